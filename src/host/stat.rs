//! `/proc/stat` per-CPU time lines, in USER_HZ ticks since boot:
//!
//! ```text
//! cpu0 2547 0 994 32038 24 0 5 12 0 0
//! ```
//!
//! Columns: user nice system idle iowait irq softirq steal guest
//! guest_nice. Kernels before 2.6.11 lack steal, before 2.6.24 guest, so
//! missing trailing columns read as 0; fewer than 4 is a broken line. Guest
//! time is already inside user and nice, so it is not kept.

use serde::{Deserialize, Serialize};

use super::{CpuTime, SystemCounters};
use crate::base::counter::{delta, Width};
use crate::base::Root;
use crate::error::{KernelError, ParseError};

/// Shares of one CPU's time between two readings, in percent, computed as
/// mpstat computes them: each field's increase divided by the increase of
/// their sum (user + nice + system + idle + iowait + irq + softirq +
/// steal). Guest time is inside `usr` and `nice` (mpstat shows it apart as
/// %guest; 0 on a host that runs no VMs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuShares {
    pub usr: f64,
    pub nice: f64,
    pub sys: f64,
    pub iowait: f64,
    pub irq: f64,
    pub soft: f64,
    pub steal: f64,
    pub idle: f64,
}

impl CpuShares {
    /// The shares of tick increases (a `CpuTime` of deltas). No tick at
    /// all is a tickless CPU that slept through: 100% idle, as mpstat shows
    /// it.
    pub fn of_ticks(d: &CpuTime) -> CpuShares {
        let total = d.total();
        if total == 0 {
            return CpuShares {
                usr: 0.0,
                nice: 0.0,
                sys: 0.0,
                iowait: 0.0,
                irq: 0.0,
                soft: 0.0,
                steal: 0.0,
                idle: 100.0,
            };
        }
        let pct = |n: u64| 100.0 * n as f64 / total as f64;
        CpuShares {
            usr: pct(d.user),
            nice: pct(d.nice),
            sys: pct(d.system),
            iowait: pct(d.iowait),
            irq: pct(d.irq),
            soft: pct(d.softirq),
            steal: pct(d.steal),
            idle: pct(d.idle),
        }
    }

    /// The shares between two readings of one CPU; `None` for a gap.
    pub fn between(before: &CpuTime, after: &CpuTime) -> Option<CpuShares> {
        tick_deltas(before, after).map(|d| CpuShares::of_ticks(&d))
    }
}

/// The tick increases of several CPUs added up (mpstat's `all` row), as
/// CPU 0 of a `CpuTime`.
pub fn sum_ticks(deltas: &[CpuTime]) -> CpuTime {
    let zero = CpuTime {
        cpu: 0,
        user: 0,
        nice: 0,
        system: 0,
        idle: 0,
        iowait: 0,
        irq: 0,
        softirq: 0,
        steal: 0,
    };
    // Saturating: deltas of a garbled capture can be near u64::MAX.
    deltas.iter().fold(zero, |sum, d| CpuTime {
        cpu: 0,
        user: sum.user.saturating_add(d.user),
        nice: sum.nice.saturating_add(d.nice),
        system: sum.system.saturating_add(d.system),
        idle: sum.idle.saturating_add(d.idle),
        iowait: sum.iowait.saturating_add(d.iowait),
        irq: sum.irq.saturating_add(d.irq),
        softirq: sum.softirq.saturating_add(d.softirq),
        steal: sum.steal.saturating_add(d.steal),
    })
}

/// Each field's increase from `before` to `after`. idle and iowait may go
/// backwards on tickless kernels (Documentation/filesystems/proc.rst): 0
/// then, as mpstat counts them. Any other field that went backwards means
/// the counters restarted (a CPU brought back online): `None`, a gap.
pub fn tick_deltas(before: &CpuTime, after: &CpuTime) -> Option<CpuTime> {
    let d = |f: fn(&CpuTime) -> u64| delta(f(before), f(after), Width::U64);
    let settled = |f: fn(&CpuTime) -> u64| d(f).unwrap_or(0);
    Some(CpuTime {
        cpu: after.cpu,
        user: d(|t| t.user)?,
        nice: d(|t| t.nice)?,
        system: d(|t| t.system)?,
        idle: settled(|t| t.idle),
        iowait: settled(|t| t.iowait),
        irq: d(|t| t.irq)?,
        softirq: d(|t| t.softirq)?,
        steal: d(|t| t.steal)?,
    })
}

pub fn read(root: &Root) -> Result<Vec<CpuTime>, KernelError> {
    root.parse("/proc/stat", parse)
}

/// The per-CPU times and the host-wide lines, from one reading.
pub fn read_all(root: &Root) -> Result<(Vec<CpuTime>, SystemCounters), KernelError> {
    root.parse("/proc/stat", parse_all)
}

/// The `cpuN` lines (not the `cpu` total), in file order.
pub fn parse(text: &str) -> Result<Vec<CpuTime>, ParseError> {
    parse_all(text).map(|(cpus, _)| cpus)
}

/// The `cpuN` lines and the `ctxt`, `procs_running` and `procs_blocked`
/// lines (absent ones are `None`; a value that is not a number is an error).
pub fn parse_all(text: &str) -> Result<(Vec<CpuTime>, SystemCounters), ParseError> {
    let mut out = Vec::new();
    let mut system = SystemCounters::default();
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        let mut fields = line.split_whitespace();
        let tag = fields.next().unwrap_or_default();
        let slot = match tag {
            "ctxt" => Some(&mut system.context_switches),
            "procs_running" => Some(&mut system.procs_running),
            "procs_blocked" => Some(&mut system.procs_blocked),
            _ => None,
        };
        if let Some(slot) = slot {
            let value = fields.next().unwrap_or_default();
            *slot = Some(value.parse::<u64>().map_err(|_| {
                ParseError::new(format!("line {n}: {tag} '{value}' is not a number"))
            })?);
            continue;
        }
        let Some(id) = tag.strip_prefix("cpu").filter(|id| !id.is_empty()) else {
            continue;
        };
        // Bounded like every CPU id: per-CPU tables are sized by the
        // largest id, so a garbled id must not ask for gigabytes.
        let cpu = id
            .parse::<u32>()
            .ok()
            .filter(|&c| c < crate::base::cpuset::MAX_CPUS)
            .ok_or_else(|| {
                ParseError::new(format!(
                    "line {n}: 'cpu{id}' is not a CPU id below {} (file garbled?)",
                    crate::base::cpuset::MAX_CPUS
                ))
            })?;
        let ticks = fields
            .map(|t| {
                t.parse::<u64>().map_err(|_| {
                    ParseError::new(format!("line {n}: cpu{cpu} time '{t}' is not a number"))
                })
            })
            .collect::<Result<Vec<u64>, _>>()?;
        if ticks.len() < 4 {
            return Err(ParseError::new(format!(
                "line {n}: cpu{cpu} has {} time columns, expected at least 4 \
                 (user nice system idle; file truncated?)",
                ticks.len()
            )));
        }
        let col = |i: usize| ticks.get(i).copied().unwrap_or(0);
        out.push(CpuTime {
            cpu,
            user: col(0),
            nice: col(1),
            system: col(2),
            idle: col(3),
            iowait: col(4),
            irq: col(5),
            softirq: col(6),
            steal: col(7),
        });
    }
    if out.is_empty() {
        return Err(ParseError::new("no per-CPU 'cpuN' lines (file truncated?)"));
    }
    Ok((out, system))
}

#[cfg(test)]
mod tests {
    use super::*;

    // `cat /proc/stat` on the 2-vCPU Firecracker VM, Linux 6.18 (the long `intr`
    // line cut short).
    const STAT_FIRECRACKER_6_18: &str = r"cpu  13004 0 4396 101828 461 0 57 161 0 0
cpu0 5864 0 1957 52021 34 0 7 75 0 0
cpu1 7140 0 2439 49807 426 0 50 86 0 0
intr 198357 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 1 14 0 0 0 0 120 70 0 22 1 38465 0 2839 2114 0 1873 3720 1 0 0
ctxt 333216
btime 1795356260
processes 9636
procs_running 1
procs_blocked 0
softirq 128101 0 16977 6 4700 38465 0 181 30720 0 37052
";

    // A 16-CPU Xeon host, Linux 5.15 (no steal: bare metal).
    const STAT_XEON_16CPU: &str = r"cpu  9903019 1341 2563242 974803255 28724 0 459137 0 0 0
cpu0 547812 1 119094 60878594 4479 0 25199 0 0 0
cpu1 719717 144 141761 61998791 1128 0 46252 0 0 0
cpu2 670265 158 185847 61418094 542 0 30926 0 0 0
cpu3 756817 143 151429 60834812 3368 0 26829 0 0 0
cpu4 454283 123 183137 60839789 609 0 13491 0 0 0
cpu5 435309 53 157753 60340374 1000 0 23285 0 0 0
cpu6 714954 13 113419 60000489 4743 0 10913 0 0 0
cpu7 681342 25 147659 61287100 308 0 5608 0 0 0
cpu8 509027 157 149313 60311532 2166 0 23766 0 0 0
cpu9 715767 93 162147 60257618 1044 0 56635 0 0 0
cpu10 655888 119 162966 61014674 2654 0 6628 0 0 0
cpu11 475559 26 198261 60718559 2268 0 32366 0 0 0
cpu12 762837 41 167676 60048435 1781 0 35619 0 0 0
cpu13 589662 37 190448 61139115 321 0 50685 0 0 0
cpu14 676881 76 184268 61810523 845 0 46625 0 0 0
cpu15 536899 132 148064 61904756 1468 0 24310 0 0 0
intr 3922184712 45 0 0 0 0 0 0 0 1 3 0 0 0 0 0 0 29 0 0 0 0 0 33 0 0
ctxt 8620331957
btime 1714032117
processes 4170262
procs_running 3
procs_blocked 0
softirq 1825522001 45 593812340 441281 701293887 102301 0 1203 310440012 0 219324852
";

    // Linux 2.6.9 (RHEL 4): user nice system idle iowait irq softirq only.
    const STAT_2_6_9: &str = r"cpu  162380 1022 41210 6702393 60128 1873 4206
cpu0 81010 602 20840 3350130 31017 1873 3001
cpu1 81370 420 20370 3352263 29111 0 1205
intr 7401234 6821043 9 0 1 1 0 0 0 1 0 0 0 105 0 40152 0
ctxt 10230120
";

    #[test]
    fn stat_firecracker_6_18() {
        let cpus = parse(STAT_FIRECRACKER_6_18).expect("parse");
        assert_eq!(cpus.len(), 2, "the aggregate `cpu` line is not a CPU");
        let cpu1 = &cpus[1];
        assert_eq!(cpu1.cpu, 1);
        assert_eq!((cpu1.user, cpu1.system, cpu1.idle), (7140, 2439, 49807));
        assert_eq!((cpu1.iowait, cpu1.softirq, cpu1.steal), (426, 50, 86));
        assert_eq!(cpu1.total(), 7140 + 2439 + 49807 + 426 + 50 + 86);
    }

    #[test]
    fn stat_xeon_16cpu() {
        let cpus = parse(STAT_XEON_16CPU).expect("parse");
        let ids: Vec<u32> = cpus.iter().map(|c| c.cpu).collect();
        assert_eq!(ids, (0..16).collect::<Vec<u32>>());
        let cpu3 = &cpus[3];
        assert_eq!((cpu3.user, cpu3.nice, cpu3.softirq), (756_817, 143, 26_829));
        assert!(cpus.iter().all(|c| c.steal == 0));
        // The per-CPU lines add up to the kernel's own total.
        let user: u64 = cpus.iter().map(|c| c.user).sum();
        assert_eq!(user, 9_903_019);
    }

    #[test]
    fn host_wide_lines() {
        let (_, system) = parse_all(STAT_XEON_16CPU).expect("parse");
        assert_eq!(system.context_switches, Some(8_620_331_957));
        assert_eq!(system.procs_running, Some(3));
        assert_eq!(system.procs_blocked, Some(0));
        // 2.6.9 has ctxt but no procs_running line.
        let (_, old) = parse_all(STAT_2_6_9).expect("parse");
        assert_eq!(old.context_switches, Some(10_230_120));
        assert_eq!(old.procs_running, None);
        let err = parse_all("cpu0 1 2 3 4\nctxt many\n").expect_err("garbled");
        assert!(
            err.0.contains("line 2") && err.0.contains("'many'"),
            "{}",
            err.0
        );
    }

    #[test]
    fn shares_as_mpstat_computes_them() {
        let before = parse(STAT_FIRECRACKER_6_18).expect("parse");
        let mut after = before.clone();
        // CPU1 over one second: 50 user, 20 system, 8 softirq, 2 irq, 20 idle.
        after[1].user += 50;
        after[1].system += 20;
        after[1].softirq += 8;
        after[1].irq += 2;
        after[1].idle += 20;
        let s = CpuShares::between(&before[1], &after[1]).expect("shares");
        assert_eq!(
            (s.usr, s.sys, s.soft, s.irq, s.idle),
            (50.0, 20.0, 8.0, 2.0, 20.0)
        );
        // CPU0 did not tick at all: 100% idle.
        let idle = CpuShares::between(&before[0], &after[0]).expect("shares");
        assert_eq!((idle.idle, idle.usr), (100.0, 0.0));
        // Tickless kernels may count idle and iowait back a little: 0 for
        // that field, the rest still counts.
        after[1].iowait -= 3;
        let s = CpuShares::between(&before[1], &after[1]).expect("shares");
        assert_eq!((s.iowait, s.usr), (0.0, 50.0));
        // user going back is a restart: a gap.
        after[1].user = 0;
        assert_eq!(CpuShares::between(&before[1], &after[1]), None);
    }

    #[test]
    fn old_kernel_missing_columns_read_as_zero() {
        let cpus = parse(STAT_2_6_9).expect("parse");
        assert_eq!(cpus.len(), 2);
        assert_eq!(
            (cpus[0].irq, cpus[0].softirq, cpus[0].steal),
            (1873, 3001, 0)
        );
        assert_eq!(cpus[1].softirq, 1205);
    }

    #[test]
    fn garbled_file_is_an_error_naming_the_line() {
        let three_columns = "cpu  1 2 3 4\ncpu0 1 2 3\n";
        let err = parse(three_columns).expect_err("3 columns");
        assert!(err.0.contains("line 2"), "{}", err.0);
        let bad_number = "cpu  1 2 3 4\ncpu0 1 2 3 4\ncpu1 1 2 x3 4\n";
        let err = parse(bad_number).expect_err("non-numeric");
        assert!(
            err.0.contains("line 3") && err.0.contains("'x3'"),
            "{}",
            err.0
        );
        let bad_id = "cpu  1 2 3 4\ncpuX 1 2 3 4\n";
        let err = parse(bad_id).expect_err("bad id");
        assert!(err.0.contains("line 2"), "{}", err.0);
        assert!(parse("cpu  1 2 3 4\nctxt 5\n").is_err(), "no per-CPU lines");
    }

    #[test]
    fn reads_the_live_host() {
        let cpus = read(&Root::live()).expect("/proc/stat of this machine");
        let ints = crate::host::interrupts::read(&Root::live()).expect("/proc/interrupts");
        let ids: Vec<u32> = cpus.iter().map(|c| c.cpu).collect();
        assert_eq!(ids, ints.cpus, "both list the online CPUs");
        assert!(cpus.iter().all(|c| c.idle > 0));
    }

    #[test]
    fn a_cpu_id_beyond_what_linux_supports_is_an_error() {
        let Err(err) = parse("cpu5 1 1 1 1\ncpu4294967295 1 1 1 1\n") else {
            panic!("a CPU id past 8192 was accepted");
        };
        assert!(
            err.to_string()
                .contains("'cpu4294967295' is not a CPU id below 8192"),
            "{err}"
        );
    }
}
