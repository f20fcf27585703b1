//! `/proc/net/softnet_stat`: one line per CPU of hex counters.
//!
//! Layouts differ by kernel: 6.x prints 15 columns (the 13th is the CPU id,
//! which matters because lines exist only for online CPUs); 5.10-era kernels
//! 13; older ones 11, 10 or 9. The first three are always processed,
//! dropped (backlog full: netdev_max_backlog) and time_squeeze (budget ran
//! out: netdev_budget / netdev_budget_usecs).

use serde::{Deserialize, Serialize};

use crate::base::Root;
use crate::error::{KernelError, ParseError};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoftnetCpu {
    pub cpu: u32,
    pub processed: u64,
    pub dropped: u64,
    pub time_squeeze: u64,
    /// Packets steered to this CPU by RPS (column 10, from 2.6.35).
    pub received_rps: Option<u64>,
    /// Packets dropped by the flow limit (column 11).
    pub flow_limit_count: Option<u64>,
    /// Backlog length when read (column 12, 5.10+).
    pub backlog_len: Option<u64>,
}

pub fn read(root: &Root) -> Result<Vec<SoftnetCpu>, KernelError> {
    root.parse("/proc/net/softnet_stat", parse)
}

pub fn parse(text: &str) -> Result<Vec<SoftnetCpu>, ParseError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let cols = line
            .split_whitespace()
            .map(|c| u64::from_str_radix(c, 16))
            .collect::<Result<Vec<u64>, _>>()
            .map_err(|_| {
                ParseError::new(format!("line {}: '{line}' is not hex counters", n + 1))
            })?;
        if cols.len() < 9 {
            return Err(ParseError::new(format!(
                "line {}: {} columns, expected at least 9 (file truncated?)",
                n + 1,
                cols.len()
            )));
        }
        let col = |i: usize| cols.get(i).copied();
        let cpu = match col(12) {
            Some(id) => u32::try_from(id).map_err(|_| {
                ParseError::new(format!("line {}: CPU id {id} out of range", n + 1))
            })?,
            None => out.len() as u32,
        };
        out.push(SoftnetCpu {
            cpu,
            processed: cols[0],
            dropped: cols[1],
            time_squeeze: cols[2],
            received_rps: col(9),
            flow_limit_count: col(10),
            backlog_len: col(11),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Linux 6.18, 2-vCPU Firecracker VM: 15 columns, CPU id in column 13.
    const SOFTNET_6_18: &str = "\
0000000a 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000
000002de 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001 00000000 00000000
";

    // Linux 4.19 on a 4-CPU host: 11 columns, no CPU id.
    const SOFTNET_4_19: &str = "\
2d3c5f01 00000000 000004e2 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000
0b7e2a11 0000002a 00000150 00000000 00000000 00000000 00000000 00000000 00000000 00001f40 00000000
07c2d8e0 00000000 00000021 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000
09f1a4b3 00000003 00000010 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000
";

    // Linux 6.1 with CPU 1 offline: the second line is CPU 2.
    const SOFTNET_6_1_CPU1_OFFLINE: &str = "\
00001000 00000000 00000005 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000
00002000 00000007 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000002 00000000 00000000
";

    #[test]
    fn new_layout_reads_cpu_ids() {
        let cpus = parse(SOFTNET_6_18).expect("parse");
        assert_eq!(cpus.len(), 2);
        assert_eq!(cpus[0].processed, 10);
        assert_eq!(cpus[1].processed, 0x2de);
        assert_eq!(cpus[1].cpu, 1);
        let offline = parse(SOFTNET_6_1_CPU1_OFFLINE).expect("parse");
        assert_eq!(offline[1].cpu, 2);
        assert_eq!(offline[1].dropped, 7);
        assert_eq!(offline[0].time_squeeze, 5);
    }

    #[test]
    fn old_layout_counts_lines() {
        let cpus = parse(SOFTNET_4_19).expect("parse");
        assert_eq!(cpus.len(), 4);
        assert_eq!(cpus[1].cpu, 1);
        assert_eq!(cpus[1].dropped, 0x2a);
        assert_eq!(cpus[1].time_squeeze, 0x150);
        assert_eq!(cpus[1].received_rps, Some(0x1f40));
        assert_eq!(cpus[3].backlog_len, None);
    }

    #[test]
    fn garbled_or_truncated_is_an_error() {
        assert!(parse("0000000a 00000000\n").is_err());
        assert!(parse("zzzz 0 0 0 0 0 0 0 0 0 0\n").is_err());
    }
}
