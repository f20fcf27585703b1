//! /proc and /sys text: each parser on the bytes, as `Root` hands it the
//! file's text, then what the rest of nettune computes from its result.

use nettune::host::irqname::{classify, IrqOwner};
use nettune::host::stat::{sum_ticks, tick_deltas, CpuShares};
use nettune::host::{interrupts, packet, protocols, snmp, snmp6, softirqs, softnet, stat};

use crate::common::{split, text};

/// `/proc/interrupts`; each action name classified as every interface's
/// vector that could claim it.
pub fn proc_interrupts(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Ok(parsed) = interrupts::parse(text) else {
        return;
    };
    for line in &parsed.lines {
        assert!(
            line.per_cpu.len() <= parsed.cpus.len(),
            "{} counts for {} CPUs",
            line.per_cpu.len(),
            parsed.cpus.len()
        );
        if line.irq.is_some() {
            assert_eq!(line.per_cpu.len(), parsed.cpus.len(), "a numbered row");
        }
        if let Some(irq) = line.irq {
            assert!(parsed.by_irq(irq).is_some());
        }
        for action in &line.actions {
            // An owner named after the action's own first word, so that
            // the interesting paths (a match) are taken.
            let word = action.split(['-', ':', '@']).next().unwrap_or_default();
            for owner in [
                IrqOwner {
                    iface: word,
                    pci_address: line.chip.as_deref(),
                    virtio_device: None,
                },
                IrqOwner {
                    iface: "eth0",
                    pci_address: None,
                    virtio_device: Some(word),
                },
            ] {
                let _ = classify(action, &owner);
            }
        }
    }
    let json = serde_json::to_string(&parsed).expect("the model serialises");
    let back: interrupts::Interrupts = serde_json::from_str(&json).expect("and reads back");
    assert_eq!(back.lines, parsed.lines);
}

/// `/proc/softirqs` and the per-CPU NET_RX/NET_TX view of it.
pub fn proc_softirqs(data: &[u8]) {
    let Some(text) = text(data) else { return };
    if let Ok(parsed) = softirqs::parse(text) {
        for counts in parsed.rows.values() {
            assert_eq!(counts.len(), parsed.cpus.len());
        }
        assert_eq!(parsed.net().len(), parsed.cpus.len());
    }
}

/// `/proc/net/softnet_stat`.
pub fn proc_softnet(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let _ = softnet::parse(text);
}

/// `/proc/stat`, and the shares mpstat-style views compute from two
/// readings (here: consecutive CPUs of one reading, any values at all).
pub fn proc_stat(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Ok((cpus, _system)) = stat::parse_all(text) else {
        return;
    };
    let mut deltas = Vec::new();
    for pair in cpus.windows(2) {
        let _ = CpuShares::of_ticks(&pair[0]);
        if let Some(d) = tick_deltas(&pair[0], &pair[1]) {
            let shares = CpuShares::of_ticks(&d);
            let sum = shares.usr
                + shares.nice
                + shares.sys
                + shares.iowait
                + shares.irq
                + shares.soft
                + shares.steal
                + shares.idle;
            assert!(sum.is_finite(), "shares {shares:?}");
            deltas.push(d);
        }
        let _ = CpuShares::between(&pair[0], &pair[1]);
    }
    let _ = sum_ticks(&deltas);
}

/// `/proc/net/snmp` and `/proc/net/netstat` (one format).
pub fn proc_snmp(data: &[u8]) {
    let Some(text) = text(data) else { return };
    if let Ok(counters) = snmp::parse(text) {
        for (proto, values) in &counters.0 {
            for name in values.keys() {
                assert_eq!(counters.get(proto, name), values.get(name).copied());
            }
        }
    }
}

/// `/proc/net/snmp6`.
pub fn proc_snmp6(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let _ = snmp6::parse(text);
}

/// `/proc/net/packet`.
pub fn proc_packet(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let _ = packet::parse(text);
}

/// `/proc/net/protocols`.
pub fn proc_protocols(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let _ = protocols::parse(text);
}

/// IRQ action names against an interface: `ACTION\nIFACE\nPCI\nVIRTIO`.
pub fn irqname(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let mut parts = text.split('\n');
    let action = parts.next().unwrap_or_default();
    let iface = parts.next().unwrap_or_default();
    let pci = parts.next().filter(|p| !p.is_empty());
    let virtio = parts.next().filter(|p| !p.is_empty());
    let owner = IrqOwner {
        iface,
        pci_address: pci,
        virtio_device: virtio,
    };
    let _ = classify(action, &owner);
    let (a, b) = split(data, b'\t');
    if let (Some(a), Some(b)) = (crate::common::text(a), crate::common::text(b)) {
        let _ = classify(
            a,
            &IrqOwner {
                iface: b,
                pci_address: None,
                virtio_device: None,
            },
        );
    }
}
