//! /proc/interrupts for the NICs' IRQ vectors: each vector's total, and
//! the queue x CPU matrix, which takes the series left under the bound
//! (`MAX_SERIES`) once every other collector has written.

use crate::host::VectorRole;
use crate::monitor::sample::IrqCounters;

use super::super::exposition::{Exposition, Kind};
use super::input::Input;

/// How a vector's role reads in a label.
pub fn role_word(role: VectorRole) -> &'static str {
    match role {
        VectorRole::Rx => "rx",
        VectorRole::Tx => "tx",
        VectorRole::Combined => "combined",
        VectorRole::Other => "other",
    }
}

fn irq_labels(irq: &IrqCounters) -> [(&'static str, String); 4] {
    [
        ("irq", irq.irq.to_string()),
        ("device", irq.iface.clone()),
        (
            "queue",
            irq.queue.map(|q| q.to_string()).unwrap_or_default(),
        ),
        ("role", role_word(irq.role).to_string()),
    ]
}

/// Interrupts of each NIC IRQ vector, summed over the CPUs.
pub fn write(input: &Input, out: &mut Exposition) {
    let mut f = out.family(
        "nettune_irq_interrupts_total",
        "Interrupts of one IRQ vector of a NIC, all CPUs (/proc/interrupts; the kernel keeps \
         each CPU's count in 32 bits: a wrap shows as a counter reset).",
        Kind::Counter,
    );
    for irq in &input.sample.irqs {
        let labels = irq_labels(irq);
        let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        f.sample(&labels, irq.per_cpu.iter().sum::<u64>());
    }
}

/// The queue x CPU matrix: for each IRQ vector, the CPUs that took its
/// interrupts, most first, within `budget` series (round-robin by rank
/// across IRQs, at least one CPU per IRQ).
pub fn matrix(input: &Input, budget: usize, out: &mut Exposition) {
    let s = input.sample;
    // Per IRQ: (column, count) of the CPUs with a count, most first.
    let ranked: Vec<Vec<(usize, u64)>> = s
        .irqs
        .iter()
        .map(|irq| {
            let mut cells: Vec<(usize, u64)> = irq
                .per_cpu
                .iter()
                .copied()
                .enumerate()
                .filter(|&(_, n)| n > 0)
                .collect();
            cells.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            cells
        })
        .collect();
    let mut keep = vec![0usize; ranked.len()];
    let mut left = budget;
    let deepest = ranked.iter().map(Vec::len).max().unwrap_or(0);
    for rank in 0..deepest {
        for (i, cells) in ranked.iter().enumerate() {
            if rank < cells.len() && (rank == 0 || left > 0) {
                keep[i] += 1;
                left = left.saturating_sub(1);
            }
        }
    }
    let mut f = out.family(
        "nettune_irq_cpu_interrupts_total",
        "Interrupts of one IRQ vector of a NIC on one CPU: the queue x CPU matrix, only for \
         CPUs that took the IRQ's interrupts (the most first when series are bounded).",
        Kind::Counter,
    );
    for ((irq, cells), n) in s.irqs.iter().zip(&ranked).zip(keep) {
        let labels = irq_labels(irq);
        let mut cells: Vec<(usize, u64)> = cells[..n].to_vec();
        cells.sort_by_key(|&(col, _)| col);
        for (col, count) in cells {
            let Some(cpu) = s.irq_cpus.get(col) else {
                continue;
            };
            let cpu = cpu.to_string();
            let mut all: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            all.push(("cpu", &cpu));
            f.sample(&all, count);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::super::super::parse::{parse, Series};
    use super::super::testing::{render_of, value, written};
    use super::super::MAX_SERIES;
    use super::*;
    use crate::host::model::CpuTime;
    use crate::monitor::sample::Sample;
    use crate::monitor::testkit;

    #[test]
    fn totals_and_the_cpus_that_took_them() {
        let sample = testkit::first();
        let s = written(write, &sample, None);
        assert_eq!(
            value(
                &s,
                "nettune_irq_interrupts_total",
                &[("irq", "38"), ("queue", "0")]
            ),
            Some(912_345.0)
        );
        // IRQ 38 took interrupts on CPU1 only: no CPU0 cell.
        let s = written(|input, out| matrix(input, MAX_SERIES, out), &sample, None);
        let cell = |cpu: &str| {
            value(
                &s,
                "nettune_irq_cpu_interrupts_total",
                &[("irq", "38"), ("cpu", cpu)],
            )
        };
        assert_eq!((cell("0"), cell("1")), (None, Some(912_345.0)));
    }

    /// A host with `cpus` CPUs and `queues` queue IRQs, each of which took
    /// interrupts on `spread` CPUs.
    fn big_sample(cpus: u32, queues: u32, spread: u32) -> Sample {
        let mut s = testkit::first();
        let one = s.counters.cpu_time[0].clone();
        let soft = s.counters.softnet[0].clone();
        let irqs = s.counters.softirqs[0].clone();
        s.counters.cpu_time = (0..cpus)
            .map(|cpu| CpuTime { cpu, ..one.clone() })
            .collect();
        s.counters.softnet = (0..cpus)
            .map(|cpu| crate::host::softnet::SoftnetCpu {
                cpu,
                ..soft.clone()
            })
            .collect();
        s.counters.softirqs = (0..cpus)
            .map(|cpu| crate::host::CpuSoftirqs {
                cpu,
                ..irqs.clone()
            })
            .collect();
        s.irq_cpus = (0..cpus).collect();
        s.irqs = (0..queues)
            .map(|q| IrqCounters {
                irq: 200 + q,
                iface: "eth0".to_string(),
                name: format!("ice-eth0-TxRx-{q}"),
                role: VectorRole::Combined,
                queue: Some(q),
                // Most on the queue's own CPU, then fewer on the next ones.
                per_cpu: (0..cpus)
                    .map(|cpu| {
                        let d = (cpu + cpus - q % cpus) % cpus;
                        if d < spread {
                            u64::from(1_000_000 - d)
                        } else {
                            0
                        }
                    })
                    .collect(),
            })
            .collect();
        let q0 = s.interfaces[0].queues.clone();
        s.interfaces[0].queues = (0..queues)
            .flat_map(|q| {
                q0.iter().map(move |x| crate::base::driver::QueueStats {
                    index: q,
                    ..x.clone()
                })
            })
            .collect();
        s
    }

    #[test]
    fn the_interrupt_matrix_yields_to_the_series_bound() {
        // Every IRQ took interrupts on every one of 256 CPUs (irqbalance moved
        // them all around): 32,768 cells, bounded.
        let sample = big_sample(256, 128, 256);
        let (text, count) = render_of(&sample, None);
        assert!(count <= MAX_SERIES, "{count} series");
        let s = parse(&text).expect("parses").series;
        let cells: Vec<&Series> = s
            .iter()
            .filter(|x| x.name == "nettune_irq_cpu_interrupts_total")
            .collect();
        let mut per_irq: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
        for c in &cells {
            per_irq
                .entry(c.labels["irq"].as_str())
                .or_default()
                .push(c.labels["cpu"].parse().expect("cpu"));
        }
        // The bound is used, not wasted: IRQs keep CPUs rank by rank (so
        // their counts differ by one at most), at least the busiest one, the
        // queue's own CPU.
        assert!(count > MAX_SERIES - 128, "{count} series");
        assert_eq!(per_irq.len(), 128);
        let kept: BTreeSet<usize> = per_irq.values().map(Vec::len).collect();
        let (least, most) = (kept.first().copied(), kept.last().copied());
        assert!(least >= Some(1) && most <= least.map(|l| l + 1), "{kept:?}");
        for q in 0..128u32 {
            let cpus = &per_irq[(200 + q).to_string().as_str()];
            assert!(cpus.contains(&q), "IRQ {} lost its busiest CPU", 200 + q);
        }
        // And the totals are whole.
        let total = value(&s, "nettune_irq_interrupts_total", &[("irq", "200")]);
        let whole: u64 = (0..256u64).map(|d| 1_000_000 - d).sum();
        assert_eq!(total, Some(whole as f64));

        // Each IRQ on its own CPU (affinity set, no irqbalance): one cell
        // each, nothing dropped.
        let (text, count) = render_of(&big_sample(256, 128, 1), None);
        assert!(count <= MAX_SERIES, "{count} series");
        let s = parse(&text).expect("parses").series;
        let cells = s
            .iter()
            .filter(|x| x.name == "nettune_irq_cpu_interrupts_total")
            .count();
        assert_eq!(cells, 128);
    }
}
