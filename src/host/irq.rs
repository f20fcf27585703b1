//! `/proc/irq/N`: where each of a NIC's IRQ vectors may be delivered
//! (`smp_affinity_list`), where it is (`effective_affinity_list`, 4.15+),
//! and where its driver suggests (`affinity_hint`, a hex mask; all zeros
//! when the driver gave none).
//!
//! Which lines of `/proc/interrupts` are the NIC's comes first
//! ([`device_vectors`], by name through `irqname`); [`read`] then reads
//! each one's files.

use crate::base::cpuset::{parse_list, parse_mask};
use crate::base::Root;
use crate::error::{KernelError, ParseError};

use super::interrupts::{Interrupts, IrqLine};
use super::irqname::{self, IrqOwner};
use super::model::{IrqVector, VectorRole};

/// A line of /proc/interrupts that is one of a device's vectors: its
/// action name and what it serves.
#[derive(Debug)]
pub struct DeviceVector<'a> {
    pub irq: u32,
    pub line: &'a IrqLine,
    pub name: &'a str,
    pub role: VectorRole,
    pub queue: Option<u32>,
}

/// The vectors of `owner` in /proc/interrupts: among its MSI IRQs (every
/// numbered IRQ when the device has no msi_irqs), those whose name
/// belongs to the interface.
pub fn device_vectors<'a>(
    irqs: &'a Interrupts,
    owner: &IrqOwner,
    msi_irqs: Option<&[u32]>,
) -> Vec<DeviceVector<'a>> {
    let mut out = Vec::new();
    for line in &irqs.lines {
        let Some(irq) = line.irq else { continue };
        if msi_irqs.is_some_and(|msi| !msi.contains(&irq)) {
            continue;
        }
        let Some((name, (role, queue))) = line
            .actions
            .iter()
            .find_map(|a| irqname::classify(a, owner).map(|c| (a, c)))
        else {
            continue;
        };
        out.push(DeviceVector {
            irq,
            line,
            name,
            role,
            queue,
        });
    }
    out
}

/// `affinity_hint`: the CPUs of its mask, `None` when all zeros (the
/// driver gave no hint).
pub fn parse_affinity_hint(text: &str) -> Result<Option<Vec<u32>>, ParseError> {
    Ok(Some(parse_mask(text)?).filter(|cpus| !cpus.is_empty()))
}

/// Vectors in the order people read them: by queue number (queue-less
/// vectors last), then role and IRQ.
pub fn sort(vectors: &mut [IrqVector]) {
    vectors.sort_by_key(|v| (v.queue.is_none(), v.queue, v.role, v.irq));
}

/// The device's IRQ vectors with their affinities, ordered by queue.
pub fn read(
    root: &Root,
    irqs: &Interrupts,
    owner: &IrqOwner,
    msi_irqs: Option<&[u32]>,
) -> Result<Vec<IrqVector>, KernelError> {
    let mut vectors = Vec::new();
    for v in device_vectors(irqs, owner, msi_irqs) {
        let dir = format!("/proc/irq/{}", v.irq);
        let hint = root.parse_optional(&format!("{dir}/affinity_hint"), parse_affinity_hint)?;
        vectors.push(IrqVector {
            irq: v.irq,
            name: v.name.to_string(),
            role: v.role,
            queue: v.queue,
            affinity: root.parse_optional(&format!("{dir}/smp_affinity_list"), parse_list)?,
            effective: root
                .parse_optional(&format!("{dir}/effective_affinity_list"), parse_list)?,
            affinity_hint: hint.flatten(),
            per_cpu: v.line.per_cpu.clone(),
        });
    }
    sort(&mut vectors);
    Ok(vectors)
}

#[cfg(test)]
mod tests {
    use super::*;

    // two-socket-nic-node1 (Debian 12, 6.1, a ConnectX-5 on node 1): two of
    // mlx5's lines of /proc/interrupts (CPU columns cut to 4), and IRQ
    // 151's affinity_hint.
    const INTERRUPTS_MLX5_6_1: &str = "\
            CPU0       CPU1       CPU2       CPU3
 150:          0          0          0          0  IR-PCI-MSIX-0000:af:00.0 0-edge      mlx5_async0@pci:0000:af:00.0
 151:          0          0          0    1000151  IR-PCI-MSIX-0000:af:00.0 1-edge      mlx5_comp0@pci:0000:af:00.0
  24:          7          0          0          0  IR-PCI-MSI-0000:00:17.0 0-edge      ahci[0000:00:17.0]
";
    const IRQ151_AFFINITY_HINT_MLX5_6_1: &str = "0100\n";

    fn owner() -> IrqOwner<'static> {
        IrqOwner {
            iface: "ens1f0",
            pci_address: Some("0000:af:00.0"),
            virtio_device: None,
        }
    }

    #[test]
    fn the_nics_lines_are_its_vectors() {
        let irqs = super::super::interrupts::parse(INTERRUPTS_MLX5_6_1).expect("parse");
        let found = device_vectors(&irqs, &owner(), Some(&[150, 151]));
        let seen: Vec<(u32, VectorRole, Option<u32>)> =
            found.iter().map(|v| (v.irq, v.role, v.queue)).collect();
        assert_eq!(
            seen,
            [
                (150, VectorRole::Other, None),
                (151, VectorRole::Combined, Some(0))
            ]
        );
        assert_eq!(found[1].line.per_cpu[3], 1_000_151);
        // An MSI list without 151 leaves it out.
        assert_eq!(device_vectors(&irqs, &owner(), Some(&[150])).len(), 1);
    }

    #[test]
    fn an_all_zero_hint_is_no_hint() {
        assert_eq!(
            parse_affinity_hint(IRQ151_AFFINITY_HINT_MLX5_6_1).expect("hint"),
            Some(vec![8])
        );
        assert_eq!(parse_affinity_hint("0000\n").expect("zero"), None);
        assert!(parse_affinity_hint("zz").is_err());
    }

    #[test]
    fn reads_the_fixture_tree() {
        let root = crate::host::fixture("two-socket-nic-node1");
        let irqs = super::super::interrupts::read(&root).expect("interrupts");
        let vectors = read(&root, &irqs, &owner(), None).expect("vectors");
        let comp0 = vectors.iter().find(|v| v.irq == 151).expect("IRQ 151");
        assert_eq!(comp0.queue, Some(0));
        assert_eq!(comp0.affinity, Some(vec![8]));
        assert_eq!(comp0.affinity_hint, Some(vec![8]));
        // Queue vectors first, by queue; the async vector last.
        assert_eq!(vectors.last().map(|v| v.role), Some(VectorRole::Other));
    }
}
