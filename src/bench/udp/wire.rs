//! The 16-byte header at the start of every `udp-flood` packet, so the sink
//! can count loss and reordering per flow. Network byte order:
//!
//! ```text
//! 0      2      4             8                     16
//! +------+------+-------------+---------------------+----------------
//! | 'Nt' | flow | sender id   | sequence            | padding to --size
//! +------+------+-------------+---------------------+----------------
//! ```
//!
//! - magic `0x4e74` ("Nt") tells nettune packets from anything else sent to
//!   the port (the sink counts those as "without header");
//! - flow: the sending socket's index within its `udp-flood` run (thread x
//!   `--flows` + socket), one source port each;
//! - sender id: random per `udp-flood` run, so two runs into one sink are
//!   told apart;
//! - sequence: per flow, from 0, +1 per packet actually handed to the kernel.

/// Bytes the header takes; the smallest `--size`.
pub const HEADER_LEN: usize = 16;
/// The largest UDP payload over IPv4 (65535 - 20 IP - 8 UDP).
pub const MAX_PAYLOAD: usize = 65_507;

const MAGIC: u16 = 0x4e74;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub sender: u32,
    pub flow: u16,
    pub seq: u64,
}

impl Header {
    /// Write the header into the first [`HEADER_LEN`] bytes of `packet`.
    pub fn write(&self, packet: &mut [u8; HEADER_LEN]) {
        packet[0..2].copy_from_slice(&MAGIC.to_be_bytes());
        packet[2..4].copy_from_slice(&self.flow.to_be_bytes());
        packet[4..8].copy_from_slice(&self.sender.to_be_bytes());
        packet[8..16].copy_from_slice(&self.seq.to_be_bytes());
    }

    /// Read a header; `None` for a packet too short or not from `udp-flood`.
    pub fn read(packet: &[u8]) -> Option<Header> {
        let bytes: &[u8; HEADER_LEN] = packet.get(..HEADER_LEN)?.try_into().ok()?;
        if u16::from_be_bytes([bytes[0], bytes[1]]) != MAGIC {
            return None;
        }
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&bytes[8..16]);
        Some(Header {
            flow: u16::from_be_bytes([bytes[2], bytes[3]]),
            sender: u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
            seq: u64::from_be_bytes(seq),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_in_network_order() {
        let header = Header {
            sender: 0xdead_beef,
            flow: 7,
            seq: 0x0102_0304_0506_0708,
        };
        let mut packet = [0u8; 32];
        let head: &mut [u8; HEADER_LEN] = (&mut packet[..HEADER_LEN]).try_into().expect("16");
        header.write(head);
        assert_eq!(&packet[..4], &[0x4e, 0x74, 0, 7]);
        assert_eq!(&packet[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(Header::read(&packet), Some(header));
    }

    #[test]
    fn foreign_or_short_packets_have_no_header() {
        // What the article's udpsender sends: 32 zero bytes.
        assert_eq!(Header::read(&[0u8; 32]), None);
        assert_eq!(Header::read(&[0x4e, 0x74, 0, 1]), None);
    }
}
