//! The rr-server's UDP rules, apart from any I/O (both engines use them):
//! who said hello with which reply size, whether the source proved its
//! address, and what each datagram gets back.
//!
//! The bounds, whatever a peer sends:
//! - every answer is at most [`MAX_UDP_SIZE`] bytes, and its head (echoed
//!   hello or sequence bytes) at most [`CHECK_LEN`];
//! - to a source that has not proven its address, an answer is never
//!   longer than the datagram that asked for it (no amplification);
//! - at most [`MAX_FLOWS`] flows per thread: when full, the unproven ones
//!   go first, so forged hellos cannot push out proven clients.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use super::wire::{
    parse_datagram, CookieKey, Datagram, Hello, Stage, CHECK_LEN, HELLO_LEN, MAX_UDP_SIZE,
};

/// Flows remembered per thread; when full, unproven flows are forgotten,
/// and if all are proven the table starts over (a client resends its hello
/// on a second timeout, so a forgotten flow recovers).
pub const MAX_FLOWS: usize = 65_536;
/// A UDP flow idle this long (up to twice) is forgotten, so a thread whose
/// earlier clients are gone serves the next lone client the fast way.
const FLOW_IDLE: Duration = Duration::from_secs(2);

/// Whom and what a server serves.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rules {
    /// Serve this address only.
    pub peer: Option<IpAddr>,
    /// Refuse hellos asking for larger replies.
    pub max_reply: Option<u32>,
    /// Testing aid: drop every N-th request.
    pub drop_every: Option<u64>,
}

impl Rules {
    pub fn foreign(&self, addr: SocketAddr) -> bool {
        self.peer.is_some_and(|p| p != addr.ip())
    }

    pub fn reply_allowed(&self, hello: &Hello) -> bool {
        self.max_reply.is_none_or(|max| hello.reply <= max)
    }
}

/// What to send back: `total_len` bytes, [`head`](Answer::head) first, zeros after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    head: [u8; CHECK_LEN],
    head_len: usize,
    len: usize,
}

impl Answer {
    fn new(head: &[u8], len: usize) -> Answer {
        let head_len = head.len().min(CHECK_LEN).min(len);
        let mut bytes = [0u8; CHECK_LEN];
        bytes[..head_len].copy_from_slice(&head[..head_len]);
        Answer {
            head: bytes,
            head_len,
            len: len.min(MAX_UDP_SIZE),
        }
    }

    /// The bytes the answer starts with (at most [`CHECK_LEN`]).
    pub fn head(&self) -> &[u8] {
        &self.head[..self.head_len]
    }

    /// The whole answer's length (at most [`MAX_UDP_SIZE`]).
    pub fn total_len(&self) -> usize {
        self.len
    }
}

/// What a datagram was, for the server's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// From an address the server does not serve.
    Foreign,
    /// A malformed hello or address check, or one asking for more than the
    /// server sends: no answer.
    BadHello,
    /// A hello or proof registered a flow (`new`: one not known before).
    Registered { new: bool },
    /// An address check answered with a cookie.
    Cookie,
    /// A request from a source that never said hello (or was forgotten).
    Unknown,
    /// A request dropped on purpose (`drop_every`).
    Dropped,
    /// A request answered; `capped`: its reply was cut to the request's
    /// length (an unproven flow asking for more).
    Answered { capped: bool },
}

/// A datagram's answer and what to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub answer: Option<Answer>,
    pub event: Event,
}

/// A UDP flow: its reply size, whether its source proved its address, and
/// the epoch it was last heard from.
struct Flow {
    reply: u32,
    proven: bool,
    seen: u64,
}

/// A thread's UDP flows.
pub struct UdpFlows {
    flows: HashMap<SocketAddr, Flow>,
    key: CookieKey,
    /// Advances every [`FLOW_IDLE`]; a flow not seen in the last one or two
    /// is forgotten (its client is gone, or resends its hello).
    epoch: u64,
    next_sweep: Instant,
    /// UDP requests received, answered or not (for `drop_every`).
    requests: u64,
}

impl UdpFlows {
    pub fn new(key: CookieKey) -> UdpFlows {
        UdpFlows {
            flows: HashMap::new(),
            key,
            epoch: 0,
            next_sweep: Instant::now() + FLOW_IDLE,
            requests: 0,
        }
    }

    /// Flows known now.
    pub fn count(&self) -> usize {
        self.flows.len()
    }

    pub fn forget_idle(&mut self) {
        let now = Instant::now();
        if now < self.next_sweep {
            return;
        }
        self.next_sweep = now + FLOW_IDLE;
        self.epoch += 1;
        let recent = self.epoch - 1;
        self.flows.retain(|_, flow| flow.seen >= recent);
    }

    /// What `datagram` from `peer` gets: hellos register a flow, address
    /// checks get a cookie or register a proven flow, requests of known
    /// flows a reply carrying their sequence bytes.
    pub fn on_datagram(&mut self, rules: &Rules, datagram: &[u8], peer: SocketAddr) -> Outcome {
        let quiet = |event| Outcome {
            answer: None,
            event,
        };
        if rules.foreign(peer) {
            return quiet(Event::Foreign);
        }
        match parse_datagram(datagram) {
            Datagram::Other => self.request(rules, datagram, peer),
            Datagram::BadHello => quiet(Event::BadHello),
            Datagram::Hello(hello) if rules.reply_allowed(&hello) => {
                // Unproven: replies no longer than requests, and the echo
                // says so.
                let capped = Hello {
                    request: hello.request,
                    reply: hello.reply.min(hello.request),
                };
                let new = self.register(peer, hello.reply, false);
                Outcome {
                    answer: Some(Answer::new(&capped.encode(), HELLO_LEN)),
                    event: Event::Registered { new },
                }
            }
            Datagram::Check {
                hello,
                stage: Stage::Client,
                cookie,
            } if rules.reply_allowed(&hello) => {
                if self.key.verify(peer, &cookie) {
                    let new = self.register(peer, hello.reply, true);
                    let answer = hello.encode_check(Stage::Proven, &cookie);
                    Outcome {
                        answer: Some(Answer::new(&answer, CHECK_LEN)),
                        event: Event::Registered { new },
                    }
                } else {
                    // No state kept: the cookie is recomputed from the
                    // address when it comes back.
                    let answer = hello.encode_check(Stage::Cookie, &self.key.cookie(peer));
                    Outcome {
                        answer: Some(Answer::new(&answer, CHECK_LEN)),
                        event: Event::Cookie,
                    }
                }
            }
            // Over the reply limit, or a server's stage sent to a server.
            Datagram::Hello(_) | Datagram::Check { .. } => quiet(Event::BadHello),
        }
    }

    /// Remember `peer`'s flow; whether it is new. A plain hello makes the
    /// flow unproven again: it may come from a new program on a reused port,
    /// or be forged.
    fn register(&mut self, peer: SocketAddr, reply: u32, proven: bool) -> bool {
        if self.flows.len() >= MAX_FLOWS && !self.flows.contains_key(&peer) {
            self.flows.retain(|_, flow| flow.proven);
            if self.flows.len() >= MAX_FLOWS {
                self.flows.clear();
            }
        }
        let epoch = self.epoch;
        match self.flows.get_mut(&peer) {
            Some(flow) => {
                flow.proven = proven;
                flow.reply = reply;
                flow.seen = epoch;
                false
            }
            None => {
                self.flows.insert(
                    peer,
                    Flow {
                        reply,
                        proven,
                        seen: epoch,
                    },
                );
                true
            }
        }
    }

    fn request(&mut self, rules: &Rules, datagram: &[u8], peer: SocketAddr) -> Outcome {
        let Some(flow) = self.flows.get_mut(&peer) else {
            return Outcome {
                answer: None,
                event: Event::Unknown,
            };
        };
        flow.seen = self.epoch;
        let wanted = (flow.reply as usize).min(MAX_UDP_SIZE);
        let len = if flow.proven {
            wanted
        } else {
            wanted.min(datagram.len())
        };
        self.requests += 1;
        if rules
            .drop_every
            .is_some_and(|every| every > 0 && self.requests % every == 0)
        {
            return Outcome {
                answer: None,
                event: Event::Dropped,
            };
        }
        let width = datagram.len().min(len).min(4);
        Outcome {
            answer: Some(Answer::new(&datagram[..width], len)),
            event: Event::Answered {
                capped: len < wanted,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Flows with a fresh key, the default rules, and a source address.
    fn fresh(peer: &str) -> (UdpFlows, Rules, SocketAddr) {
        let key = CookieKey::random().expect("random");
        (UdpFlows::new(key), Rules::default(), addr(peer))
    }

    fn addr(text: &str) -> SocketAddr {
        text.parse().expect("addr")
    }

    #[test]
    fn the_reported_crash_datagrams_get_nothing_large() {
        let (mut flows, rules, peer) = fresh("192.0.2.1:4000");
        let mut first = b"nettrr01".to_vec();
        first.extend_from_slice(&16u32.to_be_bytes());
        first.extend_from_slice(&67_108_864u32.to_be_bytes());
        let out = flows.on_datagram(&rules, &first, peer);
        assert_eq!(out.event, Event::BadHello, "over the UDP limit");
        assert_eq!(out.answer, None);
        let mut second = b"nettrr01".to_vec();
        second.extend_from_slice(&16u32.to_be_bytes());
        second.extend_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(
            flows.on_datagram(&rules, &second, peer).event,
            Event::BadHello
        );
        assert_eq!(flows.count(), 0);
    }

    #[test]
    fn an_unproven_flow_gets_no_more_than_it_sent() {
        let (mut flows, rules, peer) = fresh("192.0.2.1:4000");
        let hello = Hello {
            request: 1,
            reply: 65_507,
        };
        let out = flows.on_datagram(&rules, &hello.encode(), peer);
        let echo = out.answer.expect("echo");
        assert_eq!(echo.total_len(), HELLO_LEN);
        assert_eq!(
            parse_datagram(echo.head()),
            Datagram::Hello(Hello {
                request: 1,
                reply: 1
            }),
            "the echo says replies are cut to the request"
        );
        let out = flows.on_datagram(&rules, &[7], peer);
        assert_eq!(out.event, Event::Answered { capped: true });
        let reply = out.answer.expect("reply");
        assert_eq!((reply.total_len(), reply.head()), (1, &[7u8][..]));
        // A larger request gets a reply up to its own length.
        let out = flows.on_datagram(&rules, &[0; 100], peer);
        assert_eq!(out.answer.expect("reply").total_len(), 100);
    }

    #[test]
    fn a_cookie_proves_the_address_and_opens_full_replies() {
        let (mut flows, rules, peer) = fresh("[2001:db8::1]:5000");
        let hello = Hello {
            request: 1,
            reply: 1000,
        };
        let ask = hello.encode_check(Stage::Client, &[0; 16]);
        let out = flows.on_datagram(&rules, &ask, peer);
        assert_eq!(out.event, Event::Cookie);
        assert_eq!(flows.count(), 0, "nothing kept for an unproven address");
        let answer = out.answer.expect("cookie");
        assert_eq!(answer.total_len(), ask.len(), "no larger than the request");
        let Datagram::Check {
            stage: Stage::Cookie,
            cookie,
            ..
        } = parse_datagram(answer.head())
        else {
            panic!("not a cookie: {answer:?}");
        };
        // The cookie from another port proves nothing.
        let other = addr("[2001:db8::1]:5001");
        let proof = hello.encode_check(Stage::Client, &cookie);
        assert_eq!(
            flows.on_datagram(&rules, &proof, other).event,
            Event::Cookie
        );
        let out = flows.on_datagram(&rules, &proof, peer);
        assert_eq!(out.event, Event::Registered { new: true });
        assert!(matches!(
            parse_datagram(out.answer.expect("ack").head()),
            Datagram::Check {
                stage: Stage::Proven,
                ..
            }
        ));
        let out = flows.on_datagram(&rules, &[3], peer);
        assert_eq!(out.event, Event::Answered { capped: false });
        assert_eq!(out.answer.expect("reply").total_len(), 1000);
    }

    #[test]
    fn limits_foreign_sources_and_server_stages_get_nothing() {
        let (mut flows, _, peer) = fresh("192.0.2.1:4000");
        let rules = Rules {
            peer: Some(addr("192.0.2.9:1").ip()),
            ..Rules::default()
        };
        let hello = Hello {
            request: 8,
            reply: 8,
        };
        assert_eq!(
            flows.on_datagram(&rules, &hello.encode(), peer).event,
            Event::Foreign
        );
        let rules = Rules {
            max_reply: Some(4),
            ..Rules::default()
        };
        assert_eq!(
            flows.on_datagram(&rules, &hello.encode(), peer).event,
            Event::BadHello
        );
        let rules = Rules::default();
        let spoofed_ack = hello.encode_check(Stage::Proven, &[1; 16]);
        assert_eq!(
            flows.on_datagram(&rules, &spoofed_ack, peer).event,
            Event::BadHello
        );
        assert_eq!(
            flows.on_datagram(&rules, &[0; 8], peer).event,
            Event::Unknown
        );
    }

    #[test]
    fn a_full_table_drops_unproven_flows_first() {
        let (mut flows, rules, proven) = fresh("198.51.100.1:9");
        let hello = Hello {
            request: 1,
            reply: 2,
        };
        let cookie = flows.key.cookie(proven);
        flows.on_datagram(&rules, &hello.encode_check(Stage::Client, &cookie), proven);
        for i in 0..MAX_FLOWS as u32 {
            let ip = std::net::Ipv4Addr::from(0x0a00_0000 + i);
            flows.on_datagram(&rules, &hello.encode(), SocketAddr::from((ip, 1)));
        }
        assert!(flows.count() <= MAX_FLOWS);
        let out = flows.on_datagram(&rules, &[1], proven);
        assert_eq!(out.answer.expect("still known").total_len(), 2);
    }

    #[test]
    fn any_bytes_get_a_bounded_answer() {
        let (mut flows, rules, peer) = fresh("192.0.2.1:4000");
        let hello = Hello {
            request: 1,
            reply: 65_507,
        };
        let cookie = flows.key.cookie(peer);
        flows.on_datagram(&rules, &hello.encode_check(Stage::Client, &cookie), peer);
        let mut datagram = Vec::new();
        for len in [0usize, 1, 7, 8, 15, 16, 17, 35, 36, 37, 70_000] {
            datagram.resize(len, 0xff);
            if let Some(send) = flows.on_datagram(&rules, &datagram, peer).answer {
                assert!(send.total_len() <= MAX_UDP_SIZE && send.head().len() <= send.total_len());
            }
        }
    }
}
