//! The rr wire protocol: a hello per TCP connection or UDP flow, then bare
//! requests and replies of exactly the sizes the hello announced, so a
//! 1-byte transaction is 1 byte on the wire as in netperf's TCP_RR/UDP_RR.
//!
//! Hello (16 bytes, client to server, echoed back unchanged as the ack):
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
//!   server counts bytes.
//! - UDP: the server keeps `reply bytes` per source address (one entry per
//!   flow). Every later datagram from that address is a request; the reply
//!   starts with a copy of the request's first [`seq_width`] bytes, which
//!   carry the request's sequence number (its low bytes, network order),
//!   zeros after. A datagram that is exactly a hello (re)registers the flow,
//!   so a client that resends the hello after a second timeout recovers from
//!   a restarted server. A request's content never equals a hello: bytes 4..8
//!   of a request are zero, of the magic not.

/// Bytes of a hello and of its echo.
pub const HELLO_LEN: usize = 16;

const MAGIC: [u8; 8] = *b"nettrr01";

/// The largest request or reply over TCP (the hello's fields are u32; a
/// bound keeps a typo from asking for gigabytes per transaction).
pub const MAX_TCP_SIZE: usize = 64 << 20;

/// The largest UDP payload over IPv4 (65535 - 20 IP - 8 UDP).
pub const MAX_UDP_SIZE: usize = 65_507;

/// Sizes a client announces for its connection or flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub request: u32,
    pub reply: u32,
}

impl Hello {
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut out = [0u8; HELLO_LEN];
        out[..8].copy_from_slice(&MAGIC);
        out[8..12].copy_from_slice(&self.request.to_be_bytes());
        out[12..16].copy_from_slice(&self.reply.to_be_bytes());
        out
    }

    /// A hello, if `bytes` is exactly one with sizes that make sense.
    pub fn decode(bytes: &[u8]) -> Option<Hello> {
        if bytes.len() != HELLO_LEN || bytes[..8] != MAGIC {
            return None;
        }
        let word = |at: usize| {
            u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let hello = Hello {
            request: word(8),
            reply: word(12),
        };
        let fits = |n: u32| (1..=MAX_TCP_SIZE as u64).contains(&u64::from(n));
        (fits(hello.request) && fits(hello.reply)).then_some(hello)
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
