//! Kernel addresses to `function+0xoffset`, through /proc/kallsyms, the
//! way `%pS` prints them. The kernel hides addresses there (all zeros)
//! when `kernel.kptr_restrict` says so; locations are then unavailable,
//! never guessed.

use std::collections::BTreeMap;

use crate::base::Root;
use crate::error::KernelError;

pub const KALLSYMS: &str = "/proc/kallsyms";
/// More than any kernel's symbol table (a large one is ~20 MiB).
const MAX_BYTES: u64 = 256 << 20;

/// Symbols for a set of addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Symbols {
    /// Each address that falls in a text symbol, by address.
    Found(BTreeMap<u64, String>),
    /// /proc/kallsyms shows no addresses (kernel.kptr_restrict, or not
    /// privileged enough).
    Hidden,
}

/// Resolve `addresses` against the text `kallsyms`. Parsing only.
pub fn resolve(kallsyms: &[u8], addresses: &[u64]) -> Symbols {
    // Text symbols, sorted: (address, line start) so names stay in the
    // input until asked for.
    let mut text: Vec<(u64, usize)> = Vec::new();
    let mut any_address = false;
    let mut start = 0;
    for line in kallsyms.split(|&b| b == b'\n') {
        let at = start;
        start += line.len() + 1;
        let mut words = line.split(|&b| b == b' ');
        let (Some(addr), Some(kind)) = (words.next(), words.next()) else {
            continue;
        };
        let Some(addr) = std::str::from_utf8(addr)
            .ok()
            .and_then(|a| u64::from_str_radix(a, 16).ok())
        else {
            continue;
        };
        if addr != 0 {
            any_address = true;
        }
        if matches!(kind, b"t" | b"T" | b"w" | b"W") {
            text.push((addr, at));
        }
    }
    if !any_address {
        return Symbols::Hidden;
    }
    text.sort_unstable();
    let name_at = |at: usize| -> String {
        let line = kallsyms[at..]
            .split(|&b| b == b'\n')
            .next()
            .unwrap_or_default();
        let text = String::from_utf8_lossy(line);
        let mut words = text.split_whitespace().skip(2);
        let name = words.next().unwrap_or("?").to_string();
        match words.next() {
            Some(module) => format!("{name} {module}"),
            None => name,
        }
    };
    let mut found = BTreeMap::new();
    for &addr in addresses {
        let below = text.partition_point(|&(a, _)| a <= addr);
        if below == 0 {
            continue;
        }
        let (sym, at) = text[below - 1];
        let label = name_at(at);
        let label = match label.split_once(' ') {
            Some((name, module)) => format!("{name}+{:#x} {module}", addr - sym),
            None => format!("{label}+{:#x}", addr - sym),
        };
        found.insert(addr, label);
    }
    Symbols::Found(found)
}

/// Read /proc/kallsyms through `root` and resolve `addresses`.
pub fn read(root: &Root, addresses: &[u64]) -> Result<Symbols, KernelError> {
    let bytes = root.read_bytes_limited(KALLSYMS, MAX_BYTES)?;
    Ok(resolve(&bytes, addresses))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as /proc/kallsyms prints them on Linux 6.18 (root).
    const SAMPLE: &str = "\
ffffffff81000000 T _stext
ffffffff81b2e1c0 T __udp4_lib_rcv
ffffffff81b2d0a0 t udp_queue_rcv_one_skb
ffffffff82a00000 D some_data
ffffffffc0341000 t nft_do_chain\t[nf_tables]
";

    #[test]
    fn addresses_become_function_plus_offset() {
        let symbols = resolve(
            SAMPLE.as_bytes(),
            &[
                0xffffffff81b2d0a0 + 0x2f5,
                0xffffffff81b2e1c0,
                0xffffffffc0341010,
                0x10,
            ],
        );
        let Symbols::Found(found) = symbols else {
            panic!("hidden");
        };
        assert_eq!(found[&0xffffffff81b2d395], "udp_queue_rcv_one_skb+0x2f5");
        assert_eq!(found[&0xffffffff81b2e1c0], "__udp4_lib_rcv+0x0");
        assert_eq!(found[&0xffffffffc0341010], "nft_do_chain+0x10 [nf_tables]");
        // Below every symbol: not found, not made up.
        assert!(!found.contains_key(&0x10));
    }

    #[test]
    fn zeroed_addresses_mean_hidden() {
        // kernel.kptr_restrict=2 (or perf_event_paranoid and no CAP_SYSLOG).
        let hidden = "0000000000000000 T _stext\n0000000000000000 t udp_queue_rcv_one_skb\n";
        assert_eq!(
            resolve(hidden.as_bytes(), &[0xffffffff81b2d395]),
            Symbols::Hidden
        );
    }
}
