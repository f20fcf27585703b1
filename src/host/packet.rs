//! `/proc/net/packet`: open AF_PACKET sockets of the current network
//! namespace (tcpdump, dhclient, lldpd). Each one gets a copy of every
//! packet of its protocol on its interface, which costs CPU on the hot path.
//!
//! ```text
//! sk               RefCnt Type Proto  Iface R Rmem   User   Inode
//! ffff8f2a4c1e3000 3      3    0003   2     1 0      0      24817
//! ```

use super::PacketSocket;
use crate::base::Root;
use crate::error::{KernelError, ParseError};

pub fn read(root: &Root) -> Result<Vec<PacketSocket>, KernelError> {
    root.parse("/proc/net/packet", parse)
}

/// A header line, then one line of nine columns per socket (none when no
/// socket is open).
pub fn parse(text: &str) -> Result<Vec<PacketSocket>, ParseError> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(n, line)| (n + 1, line))
        .filter(|(_, line)| !line.trim().is_empty());
    match lines.next() {
        Some((_, header)) if header.split_whitespace().next() == Some("sk") => {}
        Some((n, other)) => {
            return Err(ParseError::new(format!(
                "line {n}: expected the 'sk RefCnt Type Proto ...' header, found '{}'",
                other.trim()
            )))
        }
        None => {
            return Err(ParseError::new(
                "empty file, expected the 'sk RefCnt Type Proto ...' header",
            ))
        }
    }
    lines.map(|(n, line)| parse_socket(line, n)).collect()
}

fn parse_socket(line: &str, n: usize) -> Result<PacketSocket, ParseError> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let [_sk, _refcnt, _type, proto, iface, _running, _rmem, user, inode] = fields[..] else {
        return Err(ParseError::new(format!(
            "line {n}: {} columns, expected 9 (sk RefCnt Type Proto Iface R Rmem User Inode; \
             file truncated?)",
            fields.len()
        )));
    };
    if proto.is_empty() || !proto.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ParseError::new(format!(
            "line {n}: protocol '{proto}' is not hex"
        )));
    }
    let number = |what: &str, value: &str| {
        value
            .parse::<u64>()
            .map_err(|_| ParseError::new(format!("line {n}: {what} '{value}' is not a number")))
    };
    let small = |what: &str, value: &str| {
        u32::try_from(number(what, value)?)
            .map_err(|_| ParseError::new(format!("line {n}: {what} '{value}' is out of range")))
    };
    Ok(PacketSocket {
        inode: number("inode", inode)?,
        protocol: proto.to_string(),
        ifindex: small("interface index", iface)?,
        uid: small("user", user)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // `cat /proc/net/packet` on the Firecracker VM, Linux 6.18: no sockets.
    const PACKET_FIRECRACKER_6_18: &str =
        "sk               RefCnt Type Proto  Iface R Rmem   User   Inode\n";

    // Debian 12, Linux 6.1: dhclient's raw socket on ifindex 2 (all
    // protocols), and `tcpdump -i any` (SOCK_DGRAM, every interface) run by
    // uid 1000. Addresses are zero to a reader without CAP_SYSLOG.
    const PACKET_DHCLIENT_TCPDUMP_6_1: &str = r"sk               RefCnt Type Proto  Iface R Rmem   User   Inode
0000000000000000 3      3    0003   2     1 0      0      21794  
0000000000000000 3      2    0003   0     1 0      1000   1048207
";

    #[test]
    fn packet_header_only_is_no_sockets() {
        assert_eq!(parse(PACKET_FIRECRACKER_6_18).expect("parse"), vec![]);
    }

    #[test]
    fn packet_dhclient_tcpdump_6_1() {
        let sockets = parse(PACKET_DHCLIENT_TCPDUMP_6_1).expect("parse");
        assert_eq!(
            sockets,
            vec![
                PacketSocket {
                    inode: 21794,
                    protocol: "0003".to_string(),
                    ifindex: 2,
                    uid: 0,
                },
                PacketSocket {
                    inode: 1_048_207,
                    protocol: "0003".to_string(),
                    ifindex: 0,
                    uid: 1000,
                },
            ]
        );
    }

    #[test]
    fn garbled_file_is_an_error_naming_the_line() {
        let header = "sk               RefCnt Type Proto  Iface R Rmem   User   Inode\n";
        let truncated = format!("{header}0000000000000000 3      3    0003   2\n");
        let err = parse(&truncated).expect_err("5 columns");
        assert!(err.0.contains("line 2"), "{}", err.0);
        let bad_inode = format!(
            "{header}0000000000000000 3      3    0003   2     1 0      0      21794\n\
             0000000000000000 3      3    88cc   3     1 0      0      2x\n"
        );
        let err = parse(&bad_inode).expect_err("bad inode");
        assert!(
            err.0.contains("line 3") && err.0.contains("'2x'"),
            "{}",
            err.0
        );
        let bad_proto = format!("{header}0 3 3 00g3 2 1 0 0 1\n");
        assert!(parse(&bad_proto).is_err());
        let no_header = "0000000000000000 3      3    0003   2     1 0      0      21794\n";
        let err = parse(no_header).expect_err("no header");
        assert!(err.0.contains("line 1"), "{}", err.0);
        assert!(parse("").is_err());
    }

    #[test]
    fn reads_the_live_host() {
        // Whatever sockets are open now, the live file parses.
        read(&Root::live()).expect("/proc/net/packet of this machine");
    }
}
