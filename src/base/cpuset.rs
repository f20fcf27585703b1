//! CPU sets as the kernel writes them: lists (`0-3,8`) and hex masks
//! (`ff,00000000`: 32-bit groups, the rightmost group holds CPUs 0-31).
//!
//! A CPU set in the model is a sorted `Vec<u32>` of CPU ids without repeats.
//!
//! Every set is bounded before it is expanded: a CPU list is a range syntax,
//! so `0-2000000000` would otherwise ask for gigabytes. Text from the kernel
//! is bounded by [`MAX_CPUS`]; what a user types (`--cpus`, `--pin`) by the
//! host's possible CPUs ([`parse_list_within`]).

use crate::error::ParseError;

/// The most CPUs any Linux configuration can have: `CONFIG_NR_CPUS` tops out
/// at 8192 on every architecture (x86_64 with MAXSMP). A kernel file naming
/// a CPU at or above it is malformed.
pub const MAX_CPUS: u32 = 8192;

/// Parse a CPU list such as `0-3,8,10-11` from a kernel file. Empty text is
/// the empty set; a CPU id of [`MAX_CPUS`] or more is an error.
pub fn parse_list(text: &str) -> Result<Vec<u32>, ParseError> {
    parse_list_bounded(text, MAX_CPUS, "the largest CPU count Linux supports")
}

/// Parse a CPU list a user typed, allowing only CPU ids below `limit` (the
/// host's possible CPUs: `/sys/devices/system/cpu/possible`, highest + 1).
/// The error names the offending CPU and the limit.
pub fn parse_list_within(text: &str, limit: u32) -> Result<Vec<u32>, ParseError> {
    let limit = limit.min(MAX_CPUS);
    parse_list_bounded(text, limit, "this host's possible CPUs")
}

fn parse_list_bounded(text: &str, limit: u32, what: &str) -> Result<Vec<u32>, ParseError> {
    let text = text.trim();
    // A bit per CPU below the limit: the same range repeated ten thousand
    // times costs no more memory than once.
    let mut bits = vec![0u64; (limit as usize).div_ceil(64)];
    if text.is_empty() {
        return Ok(Vec::new());
    }
    for part in text.split(',') {
        let part = part.trim();
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (parse_cpu(lo, text)?, parse_cpu(hi, text)?),
            None => {
                let cpu = parse_cpu(part, text)?;
                (cpu, cpu)
            }
        };
        if lo > hi {
            return Err(ParseError::new(format!(
                "CPU range '{part}' in '{text}' runs backwards"
            )));
        }
        if hi >= limit {
            return Err(ParseError::new(format!(
                "CPU {hi} in '{text}' is beyond {what} (CPUs 0-{})",
                limit.saturating_sub(1)
            )));
        }
        set_bits(&mut bits, lo as usize, hi as usize);
    }
    Ok(bits
        .iter()
        .enumerate()
        .flat_map(|(word, &w)| {
            (0..64u32)
                .filter(move |bit| w & (1 << bit) != 0)
                .map(move |bit| word as u32 * 64 + bit)
        })
        .collect())
}

/// Set bits `lo..=hi`, a word at a time.
fn set_bits(bits: &mut [u64], mut lo: usize, hi: usize) {
    while lo <= hi {
        let (word, bit) = (lo / 64, lo % 64);
        let end = (word * 64 + 63).min(hi);
        let n = end - lo + 1;
        bits[word] |= if n == 64 {
            u64::MAX
        } else {
            ((1u64 << n) - 1) << bit
        };
        lo = end + 1;
    }
}

fn parse_cpu(s: &str, whole: &str) -> Result<u32, ParseError> {
    s.trim()
        .parse()
        .map_err(|_| ParseError::new(format!("'{s}' in CPU list '{whole}' is not a CPU number")))
}

/// Format a CPU set as the kernel's list syntax, with ranges: `0-3,8`.
pub fn format_list(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

/// Parse a hex CPU mask (`3`, `00000000,00000001`, `ff,ffffffff`).
pub fn parse_mask(text: &str) -> Result<Vec<u32>, ParseError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(ParseError::new("empty CPU mask"));
    }
    if text.split(',').count() > (MAX_CPUS / 32) as usize {
        return Err(ParseError::new(format!(
            "CPU mask '{}...' has more than {} groups: more CPUs than Linux supports ({MAX_CPUS})",
            text.chars().take(40).collect::<String>(),
            MAX_CPUS / 32
        )));
    }
    let mut cpus = Vec::new();
    // Walk groups from the right: group 0 holds CPUs 0-31.
    for (group_index, group) in text.rsplit(',').enumerate() {
        let group = group.trim();
        let bits = u32::from_str_radix(group, 16)
            .ok()
            .filter(|_| !group.is_empty() && group.len() <= 8)
            .ok_or_else(|| ParseError::new(format!("'{text}' is not a hex CPU mask")))?;
        for bit in 0..32 {
            if bits & (1 << bit) != 0 {
                cpus.push(group_index as u32 * 32 + bit);
            }
        }
    }
    cpus.sort_unstable();
    Ok(cpus)
}

/// Format a CPU set as a hex mask in the kernel's layout: comma-separated
/// 32-bit groups, most significant first, without leading zero groups.
/// The empty set is `0` (what the kernel shows for RPS off).
pub fn format_mask(cpus: &[u32]) -> String {
    let Some(&max) = cpus.iter().max() else {
        return "0".to_string();
    };
    let groups = max / 32 + 1;
    let mut words = vec![0u32; groups as usize];
    for &cpu in cpus {
        words[(cpu / 32) as usize] |= 1 << (cpu % 32);
    }
    let mut out = String::new();
    for (i, word) in words.iter().rev().enumerate() {
        if i == 0 {
            out.push_str(&format!("{word:x}"));
        } else {
            out.push_str(&format!(",{word:08x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_round_trip_with_ranges() {
        assert_eq!(
            parse_list("0-3,8,10-11\n").expect("list"),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(format_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(parse_list("\n").expect("empty"), Vec::<u32>::new());
        assert_eq!(format_list(&[]), "");
        assert_eq!(format_list(&[5]), "5");
        assert_eq!(parse_list("0-127").expect("big").len(), 128);
    }

    #[test]
    fn list_errors_quote_the_text() {
        let err = parse_list("0-x").expect_err("garbled");
        assert!(err.0.contains("'x'"), "{}", err.0);
        assert!(parse_list("5-2").is_err());
    }

    #[test]
    fn lists_and_masks_are_bounded_before_they_are_expanded() {
        let err = parse_list("0-2000000000").expect_err("huge range");
        assert!(
            err.0.contains("2000000000") && err.0.contains("0-8191"),
            "{}",
            err.0
        );
        assert!(parse_list("4294967295").is_err());
        assert_eq!(parse_list("8191").expect("the last CPU"), vec![8191]);
        let err = parse_list_within("0-3", 2).expect_err("beyond the host");
        assert!(
            err.0.contains("CPU 3") && err.0.contains("possible CPUs (CPUs 0-1)"),
            "{}",
            err.0
        );
        assert_eq!(parse_list_within("0-1", 2).expect("fits"), vec![0, 1]);
        let groups = vec!["ffffffff"; 257].join(",");
        assert!(parse_mask(&groups).is_err());
        let groups = vec!["ffffffff"; 256].join(",");
        assert_eq!(parse_mask(&groups).expect("8192 CPUs").len(), 8192);
    }

    #[test]
    fn masks_with_comma_groups_for_many_cpus() {
        // CPU0 and CPU2 = 0x5 (Documentation/core-api/irq/irq-affinity.rst).
        assert_eq!(parse_mask("5").expect("mask"), vec![0, 2]);
        assert_eq!(parse_mask("f").expect("mask"), vec![0, 1, 2, 3]);
        // A 72-CPU host: CPU 64 set, CPU 0 set.
        assert_eq!(
            parse_mask("00000001,00000000,00000001").expect("mask"),
            vec![0, 64]
        );
        // 128 CPUs all set.
        let all = parse_mask("ffffffff,ffffffff,ffffffff,ffffffff").expect("mask");
        assert_eq!(all, (0..128).collect::<Vec<_>>());
        assert_eq!(parse_mask("0").expect("zero"), Vec::<u32>::new());
        assert_eq!(
            parse_mask("00000000,00000000").expect("zero"),
            Vec::<u32>::new()
        );
    }

    #[test]
    fn mask_format_matches_kernel_layout() {
        assert_eq!(format_mask(&[]), "0");
        assert_eq!(format_mask(&[0, 2]), "5");
        assert_eq!(format_mask(&[0, 64]), "1,00000000,00000001");
        assert_eq!(
            parse_mask(&format_mask(&[3, 40, 99])).expect("rt"),
            vec![3, 40, 99]
        );
    }

    #[test]
    fn garbled_masks_are_errors() {
        assert!(parse_mask("zz").is_err());
        assert!(parse_mask("").is_err());
        assert!(parse_mask("1,,2").is_err());
        assert!(parse_mask("123456789").is_err());
    }
}
