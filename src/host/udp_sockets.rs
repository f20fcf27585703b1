//! `/proc/net/udp` and `/proc/net/udp6`: the UDP sockets of the current
//! network namespace, with the bytes waiting in each one's receive queue
//! and the datagrams it dropped (a full receive buffer, mostly), so that
//! a drop can be named with the socket it happened to.
//!
//! ```text
//!    sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
//!   311: 00000000:10E1 00000000:0000 07 00000000:00033400 00:00000000 00000000     0        0 28711 2 0000000000000000 4120
//! ```
//!
//! Addresses are the kernel's `__be32` words printed as hex numbers, so
//! their bytes are in the machine's order; ports are in host order
//! (net/ipv4/udp.c `udp4_format_sock`, net/ipv6/datagram.c
//! `__ip6_dgram_sock_seq_show`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use serde::Serialize;

use crate::base::Root;
use crate::error::{KernelError, ParseError};

/// One UDP socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UdpSocket {
    /// `udp` or `udp6`.
    pub family: &'static str,
    pub local: SocketAddr,
    /// Bytes waiting to be read.
    pub rx_queue_bytes: u64,
    /// Datagrams dropped since the socket was created.
    pub drops: u64,
    pub inode: u64,
    /// The socket's receive buffer (SO_RCVBUF as the kernel set it), when
    /// read through sock_diag ([`super::sock_diag`]); /proc/net/udp does
    /// not show it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rcvbuf_bytes: Option<u64>,
}

/// Both files; one that does not exist (no IPv6) gives no sockets.
pub fn read(root: &Root) -> Result<Vec<UdpSocket>, KernelError> {
    let mut all = root.parse("/proc/net/udp", |t| parse(t, false))?;
    if let Ok(v6) = root.parse("/proc/net/udp6", |t| parse(t, true)) {
        all.extend(v6);
    }
    Ok(all)
}

pub fn parse(text: &str, v6: bool) -> Result<Vec<UdpSocket>, ParseError> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(n, l)| (n + 1, l))
        .filter(|(_, l)| !l.trim().is_empty());
    match lines.next() {
        Some((_, header)) if header.split_whitespace().next() == Some("sl") => {}
        _ => {
            return Err(ParseError::new(
                "expected the 'sl local_address rem_address ...' header",
            ))
        }
    }
    lines.map(|(n, line)| socket(line, n, v6)).collect()
}

fn socket(line: &str, n: usize, v6: bool) -> Result<UdpSocket, ParseError> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 13 {
        return Err(ParseError::new(format!(
            "line {n}: {} columns, expected 13 (file truncated?)",
            f.len()
        )));
    }
    let bad = |what: &str, v: &str| ParseError::new(format!("line {n}: {what} '{v}' is malformed"));
    let local = address(f[1], v6).ok_or_else(|| bad("local address", f[1]))?;
    let rx_queue = f[4]
        .split_once(':')
        .and_then(|(_, rx)| u64::from_str_radix(rx, 16).ok())
        .ok_or_else(|| bad("tx_queue:rx_queue", f[4]))?;
    let inode = f[9].parse().map_err(|_| bad("inode", f[9]))?;
    let drops = f[12].parse().map_err(|_| bad("drops", f[12]))?;
    Ok(UdpSocket {
        family: if v6 { "udp6" } else { "udp" },
        local,
        rx_queue_bytes: rx_queue,
        drops,
        inode,
        rcvbuf_bytes: None,
    })
}

/// `0100007F:0035` -> 127.0.0.1:53.
fn address(text: &str, v6: bool) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let hex = addr.get(i * 8..i * 8 + 8)?;
        Some(u32::from_str_radix(hex, 16).ok()?.to_ne_bytes())
    };
    let ip = if v6 {
        if addr.len() != 32 {
            return None;
        }
        let mut bytes = [0u8; 16];
        for i in 0..4 {
            bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
        }
        IpAddr::V6(Ipv6Addr::from(bytes))
    } else {
        if addr.len() != 8 {
            return None;
        }
        IpAddr::V4(Ipv4Addr::from(word(0)?))
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    // `cat /proc/net/udp` and `/proc/net/udp6` in a namespace on Linux
    // 6.18 (x86_64), a reader on 0.0.0.0:4321 that fell behind, and one on
    // 127.0.0.53:53.
    const UDP_6_18: &str = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops            
  311: 00000000:10E1 00000000:0000 07 00000000:00033400 00:00000000 00000000     0        0 28711 2 0000000000000000 4120      
  505: 3500007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000   101        0 16940 2 0000000000000000 0         
";
    const UDP6_6_18: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  123: 00000000000000000000000001000000:10E1 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 30001 2 0000000000000000 7
";

    #[test]
    fn sockets_with_their_queue_and_drops() {
        let v4 = parse(UDP_6_18, false).expect("udp");
        assert_eq!(v4.len(), 2);
        assert_eq!(v4[0].local.to_string(), "0.0.0.0:4321");
        assert_eq!(v4[0].rx_queue_bytes, 0x33400);
        assert_eq!(v4[0].drops, 4120);
        assert_eq!(v4[0].inode, 28711);
        assert_eq!(v4[1].local.to_string(), "127.0.0.53:53");
        let v6 = parse(UDP6_6_18, true).expect("udp6");
        assert_eq!(v6[0].local.to_string(), "[::1]:4321");
        assert_eq!((v6[0].family, v6[0].drops), ("udp6", 7));
    }

    #[test]
    fn damage_is_named() {
        assert!(parse("", false).is_err());
        let cut = UDP_6_18.lines().take(2).collect::<Vec<_>>().join("\n");
        let cut = &cut[..cut.len() - 40];
        let err = parse(cut, false).expect_err("truncated").to_string();
        assert!(err.contains("line 2"), "{err}");
    }
}
