//! `/proc/net/protocols`: every socket protocol of the current network
//! namespace with its count of open sockets. nettune reads the `XDP` line:
//! how many AF_XDP sockets are open (the kernel has no per-socket list of
//! them unless built with CONFIG_XDP_SOCKETS_DIAG, which `ss --xdp` uses).
//!
//! ```text
//! protocol  size sockets  memory press maxhdr  slab module     cl co di ...
//! XDP       1088      1      -1   NI       0   no   kernel      n  n  n ...
//! ```

use std::collections::BTreeMap;

use crate::error::ParseError;

/// Open sockets per protocol name.
pub fn parse(text: &str) -> Result<BTreeMap<String, u64>, ParseError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    match lines.next() {
        Some((_, header))
            if header
                .split_whitespace()
                .take(3)
                .eq(["protocol", "size", "sockets"]) => {}
        _ => {
            return Err(ParseError::new(
                "expected the 'protocol size sockets ...' header on the first line",
            ))
        }
    }
    lines
        .map(|(n, line)| {
            let mut words = line.split_whitespace();
            let (Some(name), Some(_size), Some(sockets)) =
                (words.next(), words.next(), words.next())
            else {
                return Err(ParseError::new(format!(
                    "line {}: fewer than 3 columns (file truncated?)",
                    n + 1
                )));
            };
            let count = sockets.parse().map_err(|_| {
                ParseError::new(format!(
                    "line {}: sockets '{sockets}' is not a number",
                    n + 1
                ))
            })?;
            Ok((name.to_string(), count))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_xdp_line_gives_the_socket_count() {
        // Linux 6.18 with one AF_XDP socket open (an `udp-sink --xdp`).
        let text = "protocol  size sockets  memory press maxhdr  slab module     cl co di ac io in de sh ss gs se re bi br ha uh gp em\n\
PACKET    1600      0      -1   NI       0   no   kernel      n  n  n  n  n  n  n  n  n  n  n  n  n  n  n  n  n  n\n\
XDP       1088      1      -1   NI       0   no   kernel      n  n  n  n  n  n  n  n  n  n  n  n  n  n  n  n  n  n\n";
        let counts = parse(text).expect("parse");
        assert_eq!(counts["XDP"], 1);
        assert_eq!(counts["PACKET"], 0);
        assert!(parse("garbage\n").is_err());
        assert!(parse("protocol size sockets\nXDP 1088 many\n").is_err());
    }
}
