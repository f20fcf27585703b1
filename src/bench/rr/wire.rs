//! The rr wire protocol: a hello per TCP connection or UDP flow, then bare
//! requests and replies of exactly the sizes the hello announced, so a
//! 1-byte transaction is 1 byte on the wire as in netperf's TCP_RR/UDP_RR.
//!
//! Hello (16 bytes, client to server, echoed back as the ack):
//!
//! ```text
//! 0                 8               12              16
//! +-----------------+---------------+---------------+
//! | "nettrr01"      | request bytes | reply bytes   |   (u32, network order)
//! +-----------------+---------------+---------------+
//! ```
//!
//! - TCP: the client sends the hello right after connect and waits for the
//!   echo; from then on every `request bytes` read is one request, answered
//!   by `reply bytes` (zeros). Requests may be split or merged by TCP; the
//!   server counts bytes ([`TcpSession`]). Sizes: 1 to [`MAX_TCP_SIZE`].
//! - UDP: the server keeps `reply bytes` per source address (one entry per
//!   flow). Every later datagram from that address is a request; the reply
//!   starts with a copy of the request's first [`seq_width`] bytes, which
//!   carry the request's sequence number (its low bytes, network order),
//!   zeros after. A datagram that is exactly a hello (re)registers the flow,
//!   so a client that resends the hello after a second timeout recovers from
//!   a restarted server. A request's content never equals a hello: bytes 4..8
//!   of a request are zero, of the magic not. Sizes: 1 to [`MAX_UDP_SIZE`].
//!
//! UDP source addresses can be forged, so a reply larger than its request
//! would make the server an amplifier towards whoever the forged address
//! belongs to. A flow registered by a plain hello is *unproven*: each reply
//! is cut to the length of the datagram that asked for it, and the echo says
//! so (its reply field is at most its request field). A client that wants
//! replies larger than its requests first proves that it receives at its
//! address, with the address check (36 bytes, both ways):
//!
//! ```text
//! 0            8         12        16        20                    36
//! +------------+---------+---------+---------+---------------------+
//! | "nettrr02" | request | reply   | stage   | cookie (16 bytes)   |
//! +------------+---------+---------+---------+---------------------+
//! ```
//!
//! 1. client: stage 0, cookie zero ("ask");
//! 2. server: the same with stage 1 and the cookie, a MAC of the source
//!    address under a secret of the server process ([`CookieKey`]); the
//!    server keeps nothing;
//! 3. client: stage 0 with that cookie ("proof");
//! 4. server: the cookie checks out: the flow is registered as proven
//!    (full replies), answered with stage 2.
//!
//! Every answer is exactly as long as the datagram it answers. A server
//! older than the address check does not answer it; the client then falls
//! back to the plain hello and says so.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::net::SocketAddr;

/// Bytes of a hello and of its echo.
pub const HELLO_LEN: usize = 16;
/// Bytes of an address-check message, both ways.
pub const CHECK_LEN: usize = 36;
/// Bytes of an address-check cookie.
pub const COOKIE_LEN: usize = 16;

const MAGIC: [u8; 8] = *b"nettrr01";
const CHECK_MAGIC: [u8; 8] = *b"nettrr02";

/// The largest request or reply over TCP (the hello's fields are u32; a
/// bound keeps a typo from asking for gigabytes per transaction).
pub const MAX_TCP_SIZE: usize = 64 << 20;

/// The largest UDP payload over IPv4 (65535 - 20 IP - 8 UDP): the largest
/// request or reply over UDP.
pub const MAX_UDP_SIZE: usize = 65_507;

/// Sizes a client announces for its connection or flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub request: u32,
    pub reply: u32,
}

fn word(bytes: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&bytes[at..at + 4]);
    u32::from_be_bytes(w)
}

impl Hello {
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut out = [0u8; HELLO_LEN];
        out[..8].copy_from_slice(&MAGIC);
        out[8..12].copy_from_slice(&self.request.to_be_bytes());
        out[12..16].copy_from_slice(&self.reply.to_be_bytes());
        out
    }

    /// A TCP hello, if `bytes` is exactly one with sizes from 1 to
    /// [`MAX_TCP_SIZE`].
    pub fn decode(bytes: &[u8]) -> Option<Hello> {
        Hello::decode_within(bytes, MAX_TCP_SIZE)
    }

    fn decode_within(bytes: &[u8], max: usize) -> Option<Hello> {
        if bytes.len() != HELLO_LEN || bytes[..8] != MAGIC {
            return None;
        }
        Some(Hello {
            request: word(bytes, 8),
            reply: word(bytes, 12),
        })
        .filter(|h| h.fits(max))
    }

    /// Both sizes from 1 to `max`.
    fn fits(&self, max: usize) -> bool {
        let ok = |n: u32| (1..=max as u64).contains(&u64::from(n));
        ok(self.request) && ok(self.reply)
    }

    /// The address-check message with these sizes.
    pub fn encode_check(&self, stage: Stage, cookie: &[u8; COOKIE_LEN]) -> [u8; CHECK_LEN] {
        let mut out = [0u8; CHECK_LEN];
        out[..8].copy_from_slice(&CHECK_MAGIC);
        out[8..12].copy_from_slice(&self.request.to_be_bytes());
        out[12..16].copy_from_slice(&self.reply.to_be_bytes());
        out[16..20].copy_from_slice(&(stage as u32).to_be_bytes());
        out[20..].copy_from_slice(cookie);
        out
    }
}

/// Where an address check stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Stage {
    /// Client: asking for a cookie (cookie zero) or proving (the cookie).
    Client = 0,
    /// Server: here is your cookie; send it back.
    Cookie = 1,
    /// Server: proven; the flow is registered with full replies.
    Proven = 2,
}

/// What a UDP datagram holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datagram {
    /// A plain hello with sizes a datagram can carry.
    Hello(Hello),
    /// An address-check message with sizes a datagram can carry.
    Check {
        hello: Hello,
        stage: Stage,
        cookie: [u8; COOKIE_LEN],
    },
    /// Starts with a magic but is no valid hello (length, sizes, stage):
    /// never a request, never answered.
    BadHello,
    /// Anything else: a request (or, to a client, a reply).
    Other,
}

/// Read a UDP datagram: a pure function of its bytes.
pub fn parse_datagram(bytes: &[u8]) -> Datagram {
    let Some(magic) = bytes.get(..8) else {
        return Datagram::Other;
    };
    if magic == MAGIC {
        return match Hello::decode_within(bytes, MAX_UDP_SIZE) {
            Some(hello) => Datagram::Hello(hello),
            None => Datagram::BadHello,
        };
    }
    if magic != CHECK_MAGIC {
        return Datagram::Other;
    }
    if bytes.len() != CHECK_LEN {
        return Datagram::BadHello;
    }
    let hello = Hello {
        request: word(bytes, 8),
        reply: word(bytes, 12),
    };
    let stage = match word(bytes, 16) {
        0 => Stage::Client,
        1 => Stage::Cookie,
        2 => Stage::Proven,
        _ => return Datagram::BadHello,
    };
    if !hello.fits(MAX_UDP_SIZE) {
        return Datagram::BadHello;
    }
    let mut cookie = [0u8; COOKIE_LEN];
    cookie.copy_from_slice(&bytes[20..]);
    Datagram::Check {
        hello,
        stage,
        cookie,
    }
}

/// The server's secret for address-check cookies: random per process, so
/// a cookie proves that its holder received at that address from this
/// server, and a restarted server hands out new ones.
#[derive(Clone)]
pub struct CookieKey([u8; 32]);

impl CookieKey {
    /// A key from the kernel's random bytes.
    pub fn random() -> std::io::Result<CookieKey> {
        let mut key = [0u8; 32];
        crate::base::random::fill(&mut key)?;
        Ok(CookieKey(key))
    }

    fn mac(&self, peer: SocketAddr) -> Hmac<Sha256> {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes a key of any size");
        let ip = match peer.ip() {
            std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            std::net::IpAddr::V6(v6) => v6,
        };
        mac.update(&ip.octets());
        mac.update(&peer.port().to_be_bytes());
        mac
    }

    /// The cookie of `peer` (ip and port).
    pub fn cookie(&self, peer: SocketAddr) -> [u8; COOKIE_LEN] {
        let full = self.mac(peer).finalize().into_bytes();
        let mut out = [0u8; COOKIE_LEN];
        out.copy_from_slice(&full[..COOKIE_LEN]);
        out
    }

    /// Whether `cookie` is `peer`'s (compared in constant time).
    pub fn verify(&self, peer: SocketAddr, cookie: &[u8; COOKIE_LEN]) -> bool {
        self.mac(peer).verify_truncated_left(cookie).is_ok()
    }
}

/// What a TCP connection's bytes asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Took {
    /// The hello completed in these bytes: echo these 16 bytes.
    pub echo: Option<[u8; HELLO_LEN]>,
    /// Requests completed in these bytes, each owed a reply.
    pub requests: u64,
}

/// The hello was not one (magic, sizes, or over the server's reply limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadHello;

/// A TCP connection's progress through its byte stream, as the server
/// counts it: the hello first, then requests by bytes. Pure: the caller
/// does the I/O.
#[derive(Debug, Clone, Default)]
pub struct TcpSession {
    hello: Option<Hello>,
    hello_buf: [u8; HELLO_LEN],
    hello_got: usize,
    /// Bytes of the current (incomplete) request received so far.
    in_request: u64,
}

impl TcpSession {
    /// The sizes, once the hello is complete.
    pub fn hello(&self) -> Option<Hello> {
        self.hello
    }

    /// Bytes of the current, incomplete request received so far.
    pub fn pending(&self) -> u64 {
        self.in_request
    }

    /// Take the next bytes the connection received. `max_reply`: refuse a
    /// hello asking for larger replies.
    pub fn take(&mut self, data: &[u8], max_reply: Option<u32>) -> Result<Took, BadHello> {
        let mut took = Took::default();
        let mut data = data;
        let hello = match self.hello {
            Some(hello) => hello,
            None => {
                let take = data.len().min(HELLO_LEN - self.hello_got);
                self.hello_buf[self.hello_got..self.hello_got + take]
                    .copy_from_slice(&data[..take]);
                self.hello_got += take;
                data = &data[take..];
                if self.hello_got < HELLO_LEN {
                    return Ok(took);
                }
                let hello = Hello::decode(&self.hello_buf)
                    .filter(|h| max_reply.is_none_or(|m| h.reply <= m))
                    .ok_or(BadHello)?;
                self.hello = Some(hello);
                took.echo = Some(self.hello_buf);
                hello
            }
        };
        // decode() saw to request >= 1.
        let request = u64::from(hello.request.max(1));
        let total = self.in_request + data.len() as u64;
        took.requests = total / request;
        self.in_request = total % request;
        Ok(took)
    }
}

/// Bytes of a UDP transaction that carry its sequence number: as many as
/// both the request and the reply have room for, at most 4.
pub fn seq_width(request: usize, reply: usize) -> usize {
    request.min(reply).min(4)
}

/// Write the low `width` bytes of `seq` (network order) at the start of
/// `buf`.
pub fn stamp(buf: &mut [u8], seq: u32, width: usize) {
    let bytes = seq.to_be_bytes();
    buf[..width].copy_from_slice(&bytes[4 - width..]);
}

/// Whether `reply` carries the low `width` bytes of `seq`.
pub fn carries(reply: &[u8], seq: u32, width: usize) -> bool {
    let bytes = seq.to_be_bytes();
    reply.len() >= width && reply[..width] == bytes[4 - width..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trips_in_network_order() {
        let hello = Hello {
            request: 1,
            reply: 0x0102_0304,
        };
        let bytes = hello.encode();
        assert_eq!(&bytes[..8], b"nettrr01");
        assert_eq!(&bytes[8..], &[0, 0, 0, 1, 1, 2, 3, 4]);
        assert_eq!(Hello::decode(&bytes), Some(hello));
    }

    #[test]
    fn requests_and_bad_sizes_are_not_hellos() {
        let mut bytes = Hello {
            request: 16,
            reply: 16,
        }
        .encode();
        assert_eq!(Hello::decode(&bytes[..15]), None);
        // A 16-byte request stamped with any sequence number: bytes 4..8 zero.
        let mut request = [0u8; 16];
        stamp(&mut request, u32::from_be_bytes(*b"nett"), 4);
        assert_eq!(Hello::decode(&request), None);
        bytes[12..16].copy_from_slice(&0u32.to_be_bytes());
        assert_eq!(Hello::decode(&bytes), None, "a 0-byte reply");
    }

    #[test]
    fn udp_hellos_stop_at_the_datagram_limit_and_bad_ones_are_never_requests() {
        let hello = Hello {
            request: 16,
            reply: 65_507,
        };
        assert_eq!(parse_datagram(&hello.encode()), Datagram::Hello(hello));
        // The two datagrams of a reported crash: sizes TCP would take.
        for reply in [67_108_864u32, u32::MAX] {
            let bytes = Hello { request: 16, reply }.encode();
            assert_eq!(parse_datagram(&bytes), Datagram::BadHello);
        }
        assert_eq!(parse_datagram(b"nettrr01"), Datagram::BadHello);
        assert_eq!(parse_datagram(b"nettrr0"), Datagram::Other);
        assert_eq!(parse_datagram(&[0; 16]), Datagram::Other);
        let mut check = hello.encode_check(Stage::Cookie, &[9; COOKIE_LEN]);
        assert_eq!(
            parse_datagram(&check),
            Datagram::Check {
                hello,
                stage: Stage::Cookie,
                cookie: [9; COOKIE_LEN]
            }
        );
        check[19] = 7;
        assert_eq!(parse_datagram(&check), Datagram::BadHello, "no stage 7");
        assert_eq!(parse_datagram(&check[..35]), Datagram::BadHello);
    }

    #[test]
    fn cookies_belong_to_one_address_and_one_key() {
        let key = CookieKey::random().expect("key");
        let a: SocketAddr = "192.0.2.7:1000".parse().expect("addr");
        let b: SocketAddr = "192.0.2.7:1001".parse().expect("addr");
        let cookie = key.cookie(a);
        assert!(key.verify(a, &cookie));
        assert!(!key.verify(b, &cookie));
        assert!(!CookieKey::random().expect("key").verify(a, &cookie));
        assert!(!key.verify(a, &[0; COOKIE_LEN]));
    }

    #[test]
    fn a_tcp_session_counts_requests_by_bytes_and_refuses_bad_hellos() {
        let mut session = TcpSession::default();
        let hello = Hello {
            request: 3,
            reply: 5,
        }
        .encode();
        assert_eq!(session.take(&hello[..10], None), Ok(Took::default()));
        let mut rest = hello[10..].to_vec();
        rest.extend_from_slice(&[0; 7]);
        let took = session.take(&rest, None).expect("hello");
        assert_eq!((took.echo, took.requests), (Some(hello), 2));
        assert_eq!(session.pending(), 1);
        assert_eq!(session.take(&[0; 2], None).expect("more").requests, 1);
        // A 1-byte request: every byte of a big read is one.
        let mut session = TcpSession::default();
        let one = Hello {
            request: 1,
            reply: MAX_TCP_SIZE as u32,
        }
        .encode();
        session.take(&one, None).expect("hello");
        assert_eq!(
            session.take(&[0; 65_536], None).expect("reqs").requests,
            65_536
        );
        // Refused: garbage, a size past the limit, a reply past max_reply.
        assert_eq!(
            TcpSession::default().take(b"GET / HTTP/1.1\r\n\r\n", None),
            Err(BadHello)
        );
        let mut big = one;
        big[12..16].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(TcpSession::default().take(&big, None), Err(BadHello));
        assert_eq!(TcpSession::default().take(&one, Some(1024)), Err(BadHello));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        #[test]
        fn any_bytes_parse_without_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
            split in 0usize..80,
        ) {
            let _ = parse_datagram(&bytes);
            let mut session = TcpSession::default();
            let (a, b) = bytes.split_at(split.min(bytes.len()));
            let mut requests = 0;
            for part in [a, b] {
                match session.take(part, Some(1 << 20)) {
                    Ok(took) => requests += took.requests,
                    Err(BadHello) => break,
                }
            }
            proptest::prop_assert!(requests <= bytes.len() as u64);
        }
    }

    #[test]
    fn sequence_numbers_use_the_room_both_sides_have() {
        assert_eq!(seq_width(1, 1), 1);
        assert_eq!(seq_width(100, 2), 2);
        assert_eq!(seq_width(14, 14), 4);
        let mut buf = [0u8; 2];
        stamp(&mut buf, 0x1234_5678, 2);
        assert_eq!(buf, [0x56, 0x78]);
        assert!(carries(&buf, 0x5678, 2));
        assert!(carries(&buf, 0xffff_5678, 2), "only the low bytes count");
        assert!(!carries(&buf, 0x5679, 2));
        assert!(!carries(&buf[..1], 0x5678, 2));
    }
}
