//! The headers of a frame the AF_XDP socket received: Ethernet, IPv4 (no
//! options, as the program lets through) or IPv6 (no extension headers),
//! then UDP or TCP. The sink needs the UDP payload (where `udp-flood`'s
//! sequence header is) and the fields to check the flow.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A parsed frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Headers<'a> {
    pub proto: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    /// The UDP payload (as far as the frame holds it); empty for TCP.
    pub payload: &'a [u8],
}

const ETH_LEN: usize = 14;
const UDP: u8 = 17;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// `None` for a frame that is not TCP/UDP over plain IPv4 or IPv6.
pub fn parse(frame: &[u8]) -> Option<Headers<'_>> {
    if frame.len() < ETH_LEN {
        return None;
    }
    let (proto, src, dst, l4, ip_end) = match be16(frame, 12) {
        0x0800 => {
            let ip = frame.get(ETH_LEN..ETH_LEN + 20)?;
            if ip[0] != 0x45 {
                return None;
            }
            let total = usize::from(be16(ip, 2));
            let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
            (
                ip[9],
                IpAddr::V4(src),
                IpAddr::V4(dst),
                ETH_LEN + 20,
                ETH_LEN + total,
            )
        }
        0x86dd => {
            let ip = frame.get(ETH_LEN..ETH_LEN + 40)?;
            let payload_len = usize::from(be16(ip, 4));
            let mut src = [0u8; 16];
            src.copy_from_slice(&ip[8..24]);
            let mut dst = [0u8; 16];
            dst.copy_from_slice(&ip[24..40]);
            (
                ip[6],
                IpAddr::V6(Ipv6Addr::from(src)),
                IpAddr::V6(Ipv6Addr::from(dst)),
                ETH_LEN + 40,
                ETH_LEN + 40 + payload_len,
            )
        }
        _ => return None,
    };
    let ports = frame.get(l4..l4 + 4)?;
    let (sport, dport) = (be16(ports, 0), be16(ports, 2));
    let payload = if proto == UDP {
        let udp_len = usize::from(be16(frame.get(l4..l4 + 8)?, 4));
        // The IP and UDP lengths bound the payload (Ethernet pads short
        // frames to 60 bytes).
        let end = (l4 + udp_len).min(ip_end).min(frame.len());
        frame.get(l4 + 8..end).unwrap_or(&[])
    } else {
        &[]
    };
    Some(Headers {
        proto,
        src,
        dst,
        sport,
        dport,
        payload,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An Ethernet + IPv4 + UDP frame carrying `payload`, padded to 60 bytes
    /// as a NIC would.
    pub(crate) fn udp4_frame(
        src: [u8; 4],
        dst: [u8; 4],
        sport: u16,
        dport: u16,
        payload: &[u8],
    ) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        let total = (20 + 8 + payload.len()) as u16;
        f.extend_from_slice(&[0x45, 0]);
        f.extend_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&sport.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(payload);
        f.resize(f.len().max(60), 0);
        f
    }

    #[test]
    fn udp_payload_ends_where_the_ip_length_says() {
        let frame = udp4_frame([10, 1, 0, 1], [10, 1, 0, 2], 40000, 9000, &[7u8; 5]);
        assert_eq!(frame.len(), 60);
        let h = parse(&frame).expect("udp4");
        assert_eq!(h.proto, 17);
        assert_eq!(h.dst, "10.1.0.2".parse::<IpAddr>().expect("ip"));
        assert_eq!((h.sport, h.dport), (40000, 9000));
        assert_eq!(h.payload, &[7u8; 5]);
    }

    #[test]
    fn ipv6_and_odd_frames() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&0x86ddu16.to_be_bytes());
        let mut ip = vec![0x60, 0, 0, 0];
        ip.extend_from_slice(&12u16.to_be_bytes());
        ip.extend_from_slice(&[17, 64]);
        ip.extend_from_slice(&[0u8; 15]);
        ip.push(1); // ::1
        ip.extend_from_slice(&[0u8; 15]);
        ip.push(2); // ::2
        f.extend_from_slice(&ip);
        f.extend_from_slice(&1u16.to_be_bytes());
        f.extend_from_slice(&2u16.to_be_bytes());
        f.extend_from_slice(&12u16.to_be_bytes());
        f.extend_from_slice(&[0, 0, 9, 9, 9, 9]);
        let h = parse(&f).expect("udp6");
        assert_eq!(h.src, "::1".parse::<IpAddr>().expect("ip"));
        assert_eq!(h.payload, &[9, 9, 9, 9]);
        // ARP, a short frame, IPv4 with options: none of ours.
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(parse(&arp), None);
        assert_eq!(parse(&[0u8; 10]), None);
        let mut opts = udp4_frame([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, &[]);
        opts[14] = 0x46;
        assert_eq!(parse(&opts), None);
    }
}
