//! Who may be in the handshake: the connections the daemon accepted but
//! that have not authenticated yet, bounded per source and in all, so
//! that no stranger can keep a legitimate client out.
//!
//! - Per source (an IPv4 address, an IPv6 /64, which one host usually
//!   owns whole): at most [`MAX_PER_SOURCE`] at once; a further one from
//!   that source is closed at once. A stranger with one address so holds
//!   a few slots, never all.
//! - In all: at most [`MAX_PENDING`] at once (one thread and two
//!   descriptors each); a new connection past that closes the *oldest*
//!   one still in its handshake. A legitimate client's handshake takes a
//!   few round trips, so it is the newest, not the oldest, while strangers
//!   with many addresses hold theirs open; and the daemon's threads and
//!   descriptors stay bounded however many connect.
//!
//! Every handshake also has a deadline (`HANDSHAKE_WAIT`), so a silent
//! connection frees its slot within seconds.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::Mutex;

/// Connections in their handshake at once, all sources together.
pub const MAX_PENDING: usize = 64;
/// Connections in their handshake at once from one source.
pub const MAX_PER_SOURCE: usize = 8;

/// The unit a limit applies to: an IPv4 address, or an IPv6 /64 (an
/// IPv4-mapped IPv6 address is its IPv4 address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Source(IpAddr);

impl Source {
    pub fn of(ip: IpAddr) -> Source {
        match ip {
            IpAddr::V4(v4) => Source(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Source(IpAddr::V4(v4)),
                None => {
                    let s = v6.segments();
                    Source(IpAddr::V6(std::net::Ipv6Addr::new(
                        s[0], s[1], s[2], s[3], 0, 0, 0, 0,
                    )))
                }
            },
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(f, "{v4}"),
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
        }
    }
}

struct Entry {
    source: Source,
    /// A second descriptor of the connection, to close it from here.
    conn: TcpStream,
}

#[derive(Default)]
struct Inner {
    /// By admission order: the first is the oldest.
    pending: BTreeMap<u64, Entry>,
    per_source: HashMap<Source, usize>,
    next: u64,
}

impl Inner {
    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.pending.remove(&id)?;
        if let Some(n) = self.per_source.get_mut(&entry.source) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&entry.source);
            }
        }
        Some(entry)
    }
}

/// The connections in their handshake.
#[derive(Default)]
pub struct Admission {
    inner: Mutex<Inner>,
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Its source has [`MAX_PER_SOURCE`] in their handshake.
    SourceFull(Source),
    /// The connection could not be duplicated (out of descriptors).
    NoDescriptor,
}

/// A connection admitted to its handshake; dropping it (the handshake
/// ended, however) frees its slot.
pub struct Ticket<'a> {
    admission: &'a Admission,
    id: u64,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if let Ok(mut inner) = self.admission.inner.lock() {
            inner.remove(self.id);
        }
    }
}

impl Admission {
    /// Admit `conn` from `peer` to its handshake, or say why not. When
    /// [`MAX_PENDING`] are in theirs, the oldest of them is closed (shut
    /// down: its thread sees the end and returns) and its peer returned.
    pub fn admit(
        &self,
        conn: &TcpStream,
        peer: IpAddr,
    ) -> Result<(Ticket<'_>, Option<IpAddr>), Refused> {
        let source = Source::of(peer);
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if inner.per_source.get(&source).copied().unwrap_or(0) >= MAX_PER_SOURCE {
            return Err(Refused::SourceFull(source));
        }
        let evicted = if inner.pending.len() >= MAX_PENDING {
            let oldest = inner.pending.keys().next().copied();
            oldest.and_then(|id| inner.remove(id)).map(|entry| {
                let _ = entry.conn.shutdown(Shutdown::Both);
                entry
                    .conn
                    .peer_addr()
                    .map_or(IpAddr::from([0, 0, 0, 0]), |a| a.ip())
            })
        } else {
            None
        };
        let dup = conn.try_clone().map_err(|_| Refused::NoDescriptor)?;
        let id = inner.next;
        inner.next += 1;
        inner.pending.insert(id, Entry { source, conn: dup });
        *inner.per_source.entry(source).or_insert(0) += 1;
        Ok((
            Ticket {
                admission: self,
                id,
            },
            evicted,
        ))
    }

    /// Connections in their handshake now.
    #[cfg(test)]
    fn pending(&self) -> usize {
        self.inner.lock().map_or(0, |inner| inner.pending.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    #[test]
    fn sources_are_addresses_and_ipv6_prefixes() {
        let a = Source::of("2001:db8:1:2:aaaa::1".parse().expect("ip"));
        let b = Source::of("2001:db8:1:2:bbbb::2".parse().expect("ip"));
        let c = Source::of("2001:db8:1:3::1".parse().expect("ip"));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.to_string(), "2001:db8:1:2::/64");
        assert_eq!(
            Source::of("::ffff:10.1.2.3".parse().expect("ip")),
            Source::of("10.1.2.3".parse().expect("ip"))
        );
    }

    #[test]
    fn one_source_is_capped_and_the_oldest_makes_room_for_the_newest() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let at = listener.local_addr().expect("addr");
        let mut clients = Vec::new();
        let mut accepted = Vec::new();
        for _ in 0..MAX_PENDING + 2 {
            clients.push(TcpStream::connect(at).expect("connect"));
            accepted.push(listener.accept().expect("accept").0);
        }
        let admission = Admission::default();
        let one: IpAddr = "192.0.2.1".parse().expect("ip");
        let mut tickets = Vec::new();
        for conn in &accepted[..MAX_PER_SOURCE] {
            tickets.push(admission.admit(conn, one).expect("room").0);
        }
        assert!(matches!(
            admission.admit(&accepted[MAX_PER_SOURCE], one),
            Err(Refused::SourceFull(_))
        ));
        // A slot freed is a slot to take again.
        tickets.pop();
        tickets.push(
            admission
                .admit(&accepted[MAX_PER_SOURCE], one)
                .expect("room again")
                .0,
        );
        // Fill the rest from other sources; the next one evicts the oldest.
        for (i, conn) in accepted[MAX_PER_SOURCE + 1..=MAX_PENDING]
            .iter()
            .enumerate()
        {
            let ip = IpAddr::from([198, 51, 100, i as u8]);
            let (ticket, evicted) = admission.admit(conn, ip).expect("room");
            assert_eq!(evicted, None);
            tickets.push(ticket);
        }
        assert_eq!(admission.pending(), MAX_PENDING);
        let (_newest, evicted) = admission
            .admit(
                &accepted[MAX_PENDING + 1],
                "203.0.113.9".parse().expect("ip"),
            )
            .expect("room by eviction");
        assert_eq!(evicted, Some("127.0.0.1".parse().expect("ip")));
        assert_eq!(admission.pending(), MAX_PENDING);
        // The oldest connection was shut down: its client sees the end.
        let mut byte = [0u8; 1];
        assert_eq!(clients[0].read(&mut byte).expect("read"), 0);
        drop(tickets);
        assert_eq!(admission.pending(), 1);
    }
}
