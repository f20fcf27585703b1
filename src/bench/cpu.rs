//! Where the CPUs' time went during a benchmark: `/proc/stat` read before
//! and after, turned into per-CPU percentages in the layout of
//! `mpstat -P ALL` (the SMP IRQ affinity and RPS/RFS articles: the table that shows soft-interrupt
//! work piling up on one CPU).
//!
//! /proc/stat counts in USER_HZ ticks (10 ms on almost every kernel), so a
//! 1-second run gives each CPU about 100 ticks: the percentages are good to
//! about 1 point. The columns of a row are its tick deltas divided by their
//! own sum, so every row adds up to 100% (mpstat does the same); idle and
//! iowait going backwards (tickless kernels) count as 0, and a CPU whose
//! other counters went backwards (it came back online) is left out
//! (`host::stat::tick_deltas`, which `monitor` shares).

use std::io::{self, Write};

use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use crate::host::stat::{sum_ticks, tick_deltas, CpuShares};
use crate::host::CpuTime;

/// CPU time (user + system) the calling thread has used so far
/// (CLOCK_THREAD_CPUTIME_ID): an engine's worker reads it at its start and
/// end to report CPU per packet or per request.
pub fn thread_cpu_time() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts lives across the call; the clock id is a constant.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// One row: a CPU, or `all` (every CPU's ticks summed, as mpstat's `all`).
/// Guest time is inside `usr` and `nice` (the stat parser folds it in).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct CpuRow {
    /// `all` or the CPU number.
    pub cpu: String,
    /// `usr`, `nice`, `sys`, `iowait`, `irq`, `soft`, `steal`, `idle`.
    #[serde(flatten)]
    pub shares: CpuShares,
}

/// Per-CPU usage between two `/proc/stat` samples: `all` first, then each
/// CPU present in both samples, in CPU order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct CpuUsage {
    pub rows: Vec<CpuRow>,
}

impl CpuUsage {
    pub fn between(before: &[CpuTime], after: &[CpuTime]) -> CpuUsage {
        let mut deltas: Vec<CpuTime> = after
            .iter()
            .filter_map(|a| tick_deltas(before.iter().find(|b| b.cpu == a.cpu)?, a))
            .collect();
        deltas.sort_by_key(|d| d.cpu);
        let all = sum_ticks(&deltas);
        let mut rows = vec![row("all".to_string(), &all)];
        rows.extend(deltas.iter().map(|d| row(d.cpu.to_string(), d)));
        CpuUsage { rows }
    }

    /// The `mpstat -P ALL` table, one line per row.
    pub fn write_table(&self, out: &mut impl Write) -> io::Result<()> {
        writeln!(
            out,
            "CPU      %usr   %nice    %sys %iowait    %irq   %soft  %steal   %idle"
        )?;
        for r in &self.rows {
            let s = &r.shares;
            writeln!(
                out,
                "{:<4} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2}",
                r.cpu, s.usr, s.nice, s.sys, s.iowait, s.irq, s.soft, s.steal, s.idle
            )?;
        }
        Ok(())
    }
}

/// The calling thread's (user, system) CPU time so far: each worker reads
/// its own, so the figures are this engine's even when other engines share
/// the process.
pub fn thread_cpu() -> anyhow::Result<(Duration, Duration)> {
    // SAFETY: rusage is plain data, valid all-zero; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage struct.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
        return Err(std::io::Error::last_os_error()).context("getrusage failed");
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    Ok((time(usage.ru_utime), time(usage.ru_stime)))
}

/// Percentages of the row's own tick total (100% idle when no tick passed,
/// as mpstat shows a tickless CPU).
fn row(cpu: String, d: &CpuTime) -> CpuRow {
    CpuRow {
        cpu,
        shares: CpuShares::of_ticks(d),
    }
}

/// The host's soft-interrupt time so far, all CPUs, in seconds (from
/// /proc/stat's USER_HZ ticks; `None`: unreadable).
pub fn softirq_seconds() -> Option<f64> {
    let times = crate::host::stat::read(&crate::base::Root::live()).ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(times.iter().map(|t| t.softirq).sum::<u64>() as f64 / hz)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::stat;

    // Two `cat /proc/stat` samples 2 s apart on the 2-vCPU Firecracker VM
    // (Linux 6.18) during a loopback TCP_RR run pinned to CPU 1: CPU 1 busy
    // with the client, server and their soft interrupts, CPU 0 mostly idle.
    const STAT_BEFORE: &str = "cpu  13004 0 4396 101828 461 0 57 161 0 0
cpu0 5864 0 1957 52021 34 0 7 75 0 0
cpu1 7140 0 2439 49807 426 0 50 86 0 0
intr 198357 0 0 0 0
ctxt 333216
";
    const STAT_AFTER: &str = "cpu  13074 0 4546 102012 462 0 99 163 0 0
cpu0 5874 0 1967 52201 35 0 7 76 0 0
cpu1 7200 0 2579 49811 427 0 92 87 0 0
intr 201357 0 0 0 0
ctxt 733216
";

    #[test]
    fn rows_sum_to_100_and_show_where_soft_irq_ran() {
        let before = stat::parse(STAT_BEFORE).expect("before");
        let after = stat::parse(STAT_AFTER).expect("after");
        let usage = CpuUsage::between(&before, &after);
        let cpus: Vec<&str> = usage.rows.iter().map(|r| r.cpu.as_str()).collect();
        assert_eq!(cpus, ["all", "0", "1"]);
        for r in &usage.rows {
            let sum = r.shares.usr
                + r.shares.nice
                + r.shares.sys
                + r.shares.iowait
                + r.shares.irq
                + r.shares.soft
                + r.shares.steal
                + r.shares.idle;
            assert!((sum - 100.0).abs() < 1e-9, "{r:?} sums to {sum}");
        }
        // cpu1: 60 user, 140 sys, 4 idle, 1 iowait, 42 softirq, 1 steal = 248 ticks.
        let cpu1 = &usage.rows[2];
        assert!(
            (cpu1.shares.soft - 42.0 * 100.0 / 248.0).abs() < 1e-9,
            "{cpu1:?}"
        );
        assert!((cpu1.shares.idle - 4.0 * 100.0 / 248.0).abs() < 1e-9);
        assert_eq!(usage.rows[1].shares.soft, 0.0);
        // all: 70 user of 70+150+184+2+42+2 = 450 ticks.
        assert!((usage.rows[0].shares.usr - 70.0 * 100.0 / 450.0).abs() < 1e-9);
    }

    #[test]
    fn backwards_counters_and_vanished_cpus_do_not_break_rows() {
        let before = stat::parse(STAT_AFTER).expect("after");
        // iowait went backwards on cpu0; cpu1 went offline.
        let after = stat::parse("cpu0 5884 0 1967 52291 30 0 7 76 0 0\n").expect("one cpu");
        let usage = CpuUsage::between(&before, &after);
        assert_eq!(usage.rows.len(), 2);
        assert_eq!(usage.rows[1].shares.iowait, 0.0);
        assert!(
            (usage.rows[1].shares.usr - 10.0).abs() < 1e-9,
            "{:?}",
            usage.rows[1]
        );
        // No tick at all: 100% idle, as mpstat shows a tickless CPU.
        let idle = CpuUsage::between(&before, &before);
        assert!(idle
            .rows
            .iter()
            .all(|r| r.shares.idle == 100.0 && r.shares.usr == 0.0));
    }

    #[test]
    fn table_has_the_mpstat_columns() {
        let before = stat::parse(STAT_BEFORE).expect("before");
        let after = stat::parse(STAT_AFTER).expect("after");
        let mut out = Vec::new();
        CpuUsage::between(&before, &after)
            .write_table(&mut out)
            .expect("write");
        let text = String::from_utf8(out).expect("utf8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("CPU      %usr"), "{text}");
        assert!(lines[3].starts_with("1      24.19"), "{text}");
    }
}
