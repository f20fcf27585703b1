//! `/sys/class/net/<iface>`: an interface's own files (ifindex, mtu,
//! speed, operstate, uevent, NAPI settings, loss counters) and the device
//! it sits on (`device` -> the PCI function: its NUMA node, local CPUs,
//! driver and MSI IRQs). The queues are `net_queues`.
//!
//! The parsers take a file's text or a resolved device path; [`NetClass`]
//! and [`Device`] tie them to their paths.

use std::collections::BTreeMap;

use crate::base::cpuset::parse_list;
use crate::base::Root;
use crate::error::KernelError;

/// Where the interfaces are listed.
pub const CLASS_NET: &str = "/sys/class/net";

/// Interface counters that say where packets were lost.
pub const LOSS_STATISTICS: &[&str] = &[
    "rx_packets",
    "tx_packets",
    "rx_errors",
    "rx_dropped",
    "rx_missed_errors",
    "rx_fifo_errors",
    "rx_over_errors",
    "rx_crc_errors",
    "tx_errors",
    "tx_dropped",
];

/// A number file (`ifindex`, `mtu`, `speed`), trimmed: unknown when it is
/// no number. `speed` says -1 on virtual links and links that are down.
pub fn parse_number(text: &str) -> Option<i64> {
    text.parse::<i64>().ok()
}

/// The fastest link nettune believes, in Mbit/s (10 Tbit/s; Ethernet tops
/// out at 800 Gbit/s today): plans multiply the speed by up to 10^8.
const MAX_LINK_MBPS: u64 = 10_000_000;

/// `speed` in Mbit/s: unknown for -1 (virtual links and links that are
/// down) and for a speed no link has (a capture may say anything).
pub fn parse_speed(text: &str) -> Option<u64> {
    parse_number(text)
        .and_then(|v| u64::try_from(v).ok())
        .filter(|&mbps| mbps <= MAX_LINK_MBPS)
}

/// `DEVTYPE=bridge` of a uevent file.
pub fn uevent_devtype(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("DEVTYPE="))
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// The PCI device at or above a device path: `/sys/devices/pci0000:00/0000:00:03.0`
/// for a virtio netdev whose device is `.../0000:00:03.0/virtio2`.
pub fn pci_device(device_path: &str) -> Option<&str> {
    let mut path = device_path;
    loop {
        let (parent, last) = path.rsplit_once('/')?;
        if is_pci_address(last) {
            return Some(path);
        }
        if parent.is_empty() || parent == "/sys/devices" {
            return None;
        }
        path = parent;
    }
}

/// `0000:af:00.0`: domain:bus:device.function.
fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && s.chars()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

/// The device an interface sits on, from the path its `device` link
/// resolves to; every part `None` for a virtual interface.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Device {
    /// `/sys/devices/pci0000:00/0000:00:03.0/virtio2`.
    pub path: Option<String>,
    /// The PCI function at or above it: `/sys/devices/pci0000:00/0000:00:03.0`.
    pub pci_path: Option<String>,
    /// `0000:00:03.0`.
    pub pci_address: Option<String>,
    /// `virtio2` when the device is a virtio device (its IRQs carry that name).
    pub virtio_device: Option<String>,
}

impl Device {
    /// The device of the resolved `device` link `path`.
    pub fn at(path: Option<String>) -> Device {
        let pci_path = path.as_deref().and_then(pci_device).map(str::to_string);
        let pci_address = pci_path
            .as_deref()
            .and_then(|p| p.rsplit('/').next())
            .map(str::to_string);
        let virtio_device = path
            .as_deref()
            .and_then(|p| p.rsplit('/').next())
            .filter(|d| d.starts_with("virtio"))
            .map(str::to_string);
        Device {
            path,
            pci_path,
            pci_address,
            virtio_device,
        }
    }

    /// The NUMA node and local CPUs: files of the PCI device (a virtio
    /// netdev's own device has none).
    pub fn read_locality(
        &self,
        root: &Root,
    ) -> Result<(Option<u32>, Option<Vec<u32>>), KernelError> {
        let Some(dir) = self.pci_path.as_ref().or(self.path.as_ref()) else {
            return Ok((None, None));
        };
        let node = root
            .read_value(&format!("{dir}/numa_node"))?
            .as_deref()
            .and_then(parse_number)
            .and_then(|v| u32::try_from(v).ok());
        let cpus = root.parse_optional(&format!("{dir}/local_cpulist"), parse_list)?;
        Ok((node, cpus))
    }

    /// The driver bound to the device, by its `driver` link.
    pub fn read_driver(&self, root: &Root) -> Option<String> {
        let dev = self.path.as_ref()?;
        root.link_name(&format!("{dev}/driver"))
    }

    /// The PCI function's MSI IRQs (`msi_irqs/N`); `None` without them.
    pub fn read_msi_irqs(&self, root: &Root) -> Result<Option<Vec<u32>>, KernelError> {
        let Some(p) = &self.pci_path else {
            return Ok(None);
        };
        Ok(root
            .list(&format!("{p}/msi_irqs"))?
            .map(|names| names.iter().filter_map(|n| n.parse().ok()).collect()))
    }
}

/// One interface's directory, `/sys/class/net/<name>`.
pub struct NetClass<'a> {
    root: &'a Root,
    /// `/sys/class/net/<name>`.
    pub dir: String,
}

impl<'a> NetClass<'a> {
    pub fn new(root: &'a Root, name: &str) -> NetClass<'a> {
        NetClass {
            root,
            dir: format!("{CLASS_NET}/{name}"),
        }
    }

    /// A one-line file, trimmed; `None` when absent.
    pub fn value(&self, file: &str) -> Result<Option<String>, KernelError> {
        self.root.read_value(&format!("{}/{file}", self.dir))
    }

    /// A number file; `None` when absent or no number.
    pub fn number(&self, file: &str) -> Result<Option<i64>, KernelError> {
        Ok(self.value(file)?.as_deref().and_then(parse_number))
    }

    /// The link's speed in Mbit/s ([`parse_speed`]).
    pub fn read_speed(&self) -> Result<Option<u64>, KernelError> {
        Ok(self.value("speed")?.as_deref().and_then(parse_speed))
    }

    /// The device the interface sits on (none for a virtual one).
    pub fn device(&self) -> Device {
        Device::at(self.root.resolve(&format!("{}/device", self.dir)))
    }

    /// The DEVTYPE of its uevent (`bridge`, `vlan`, ...).
    pub fn read_devtype(&self) -> Result<Option<String>, KernelError> {
        Ok(self
            .root
            .read_optional(&format!("{}/uevent", self.dir))?
            .as_deref()
            .and_then(uevent_devtype))
    }

    /// The [`LOSS_STATISTICS`] the interface has.
    pub fn read_statistics(&self) -> Result<BTreeMap<String, u64>, KernelError> {
        let mut statistics = BTreeMap::new();
        for counter in LOSS_STATISTICS {
            if let Some(v) = self
                .value(&format!("statistics/{counter}"))?
                .and_then(|v| v.parse().ok())
            {
                statistics.insert((*counter).to_string(), v);
            }
        }
        Ok(statistics)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_pci_device_above_a_virtio_device() {
        assert_eq!(
            pci_device("/sys/devices/pci0000:00/0000:00:03.0/virtio2"),
            Some("/sys/devices/pci0000:00/0000:00:03.0")
        );
        assert_eq!(
            pci_device("/sys/devices/pci0000:ae/0000:ae:00.0/0000:af:00.0"),
            Some("/sys/devices/pci0000:ae/0000:ae:00.0/0000:af:00.0")
        );
        assert_eq!(pci_device("/sys/devices/virtual/net/veth0"), None);
    }

    #[test]
    fn devtype_comes_from_the_uevent() {
        assert_eq!(
            uevent_devtype("DEVTYPE=bridge\nINTERFACE=br0\nIFINDEX=4\n").as_deref(),
            Some("bridge")
        );
        assert_eq!(uevent_devtype("INTERFACE=veth0\nIFINDEX=5\n"), None);
    }

    #[test]
    fn a_virtio_netdev_sits_on_its_pci_function() {
        // vm-2cpu-virtio (Firecracker, 6.18): eth0's device link.
        let device = Device::at(Some(
            "/sys/devices/pci0000:00/0000:00:03.0/virtio2".to_string(),
        ));
        assert_eq!(device.pci_address.as_deref(), Some("0000:00:03.0"));
        assert_eq!(device.virtio_device.as_deref(), Some("virtio2"));
        // lo: no device link.
        assert_eq!(Device::at(None), Device::default());
    }

    // two-socket-nic-node1 (Debian 12, 6.1, mlx5 ens1f0): its mtu and
    // speed; a veth's speed on 6.18.
    const ENS1F0_MTU_MLX5_6_1: &str = "9000";
    const ENS1F0_SPEED_MLX5_6_1: &str = "25000";
    const VETH_SPEED_6_18: &str = "-1";

    #[test]
    fn numbers_and_the_unknown_speed() {
        assert_eq!(parse_number(ENS1F0_MTU_MLX5_6_1), Some(9000));
        assert_eq!(parse_speed(ENS1F0_SPEED_MLX5_6_1), Some(25_000));
        assert_eq!(parse_speed(VETH_SPEED_6_18), None);
        // No link is this fast: a capture that says so is not believed.
        assert_eq!(parse_speed("1042949672950000"), None);
        assert_eq!(parse_number("unknown"), None);
    }

    #[test]
    fn reads_the_fixture_tree() {
        let root = crate::host::fixture("two-socket-nic-node1");
        let ens1f0 = NetClass::new(&root, "ens1f0");
        let device = ens1f0.device();
        assert_eq!(device.pci_address.as_deref(), Some("0000:af:00.0"));
        assert_eq!(
            device.read_locality(&root).expect("locality"),
            (Some(1), Some((8..16).collect()))
        );
        assert_eq!(device.read_driver(&root).as_deref(), Some("mlx5_core"));
        let msi = device.read_msi_irqs(&root).expect("msi").expect("msi_irqs");
        assert!(msi.contains(&151));
        assert_eq!(ens1f0.number("mtu").expect("mtu"), Some(9000));
        assert_eq!(
            ens1f0.value("operstate").expect("operstate").as_deref(),
            Some("up")
        );
        let lo = NetClass::new(&root, "lo");
        assert_eq!(lo.device(), Device::default());
    }
}
