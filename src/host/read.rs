//! Assemble the host model from the kernel sources, through a `Root` (files)
//! and the `Ethtool`/`Netlink` traits (driver and link state). Each source
//! is parsed and read in its own module (`topology`, `cpuidle`, `cpufreq`,
//! `vulnerabilities`, `sysctl`, `net_class`, `net_queues`, `irq`, and the
//! /proc files); this file puts their answers together, source by source,
//! so that one that cannot be read costs only its part.

use std::collections::BTreeMap;

use super::irqname::IrqOwner;
use super::model::*;
use super::net_class::{NetClass, CLASS_NET};
use super::snmp::Counters as SnmpCounters;
use super::{
    cpufreq, cpuidle, interrupts, irq, net_queues, packet, snmp6, softirqs, softnet, stat, sysctl,
    topology, vulnerabilities,
};
use crate::base::driver::{Ethtool, Netdev, Netlink};
use crate::base::Root;
use crate::error::KernelError;

/// Which interfaces to read.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Include `lo`.
    pub all: bool,
    /// Only this interface (an error if it does not exist).
    pub iface: Option<String>,
}

impl Selection {
    /// Whether the interface `name` is selected.
    pub fn chooses(&self, name: &str) -> bool {
        match &self.iface {
            Some(wanted) => name == wanted,
            None => self.all || name != "lo",
        }
    }

    /// The interface asked for is among `present` (in network namespace
    /// `netns`), or an error naming what is there (bad input).
    pub fn check_present(&self, present: &[String], netns: Option<&str>) -> anyhow::Result<()> {
        let Some(wanted) = &self.iface else {
            return Ok(());
        };
        if present.contains(wanted) {
            return Ok(());
        }
        let place = match netns {
            Some(ns) => format!(" in network namespace '{ns}'"),
            None => String::new(),
        };
        anyhow::bail!(
            "interface '{wanted}' does not exist{place} (present: {})",
            present.join(", ")
        )
    }
}

/// Where to read from: files through `root`, driver state through the traits.
pub struct Inputs<'a> {
    pub root: &'a Root,
    pub ethtool: &'a dyn Ethtool,
    pub netlink: &'a dyn Netlink,
    /// The netdev generic-netlink family (queues, NAPIs, qstats).
    pub netdev: &'a dyn Netdev,
    pub netns: Option<String>,
}

/// Collects what could not be read while the model is assembled, so that
/// one missing or garbled source costs only its part of the model (as
/// node_exporter's collectors fail one by one).
struct Gather<'a> {
    root: &'a Root,
    issues: Vec<SourceIssue>,
}

impl Gather<'_> {
    /// The value `read` gives, or `T::default()` and an issue for `section`.
    fn take<T: Default>(
        &mut self,
        section: &str,
        read: impl FnOnce(&Root) -> anyhow::Result<T>,
    ) -> T {
        match read(self.root) {
            Ok(value) => value,
            Err(e) => {
                self.issues.push(SourceIssue::from_error(section, &e));
                T::default()
            }
        }
    }

    /// A warning about a source that was read in part (rows left out).
    fn truncated(&mut self, section: &str, path: &str, warnings: &[String]) {
        for warning in warnings {
            self.issues.push(SourceIssue {
                section: section.to_string(),
                path: self.root.shown(path).display().to_string(),
                kind: IssueKind::Truncated,
                error: warning.clone(),
            });
        }
    }
}

/// Read the whole host model. A source that cannot be read leaves its part
/// of the model empty and is listed in `sources`; only a host where
/// nothing at all can be read is an error.
pub fn read_host(src: &Inputs, selection: &Selection) -> anyhow::Result<Host> {
    let root = src.root;
    let mut g = Gather {
        root,
        issues: Vec::new(),
    };
    let counters = read_counters_into(&mut g);
    let mut online_cpus = g.take("cpus", |r| Ok(topology::read_online(r)?));
    if online_cpus.is_empty() {
        // /proc/stat has a line per online CPU: the next best source.
        online_cpus = counters.cpu_time.iter().map(|t| t.cpu).collect();
    }
    let numa_nodes = g.take("numa", |r| Ok(topology::read_numa_nodes(r)?));
    let cpufreq = g.take("cpufreq", |r| Ok(cpufreq::read(r, &online_cpus)?));
    let cpus = g.take("cpus", |r| {
        Ok(topology::read_cpus(r, &online_cpus, &numa_nodes)?)
    });
    let irqs = g.take("interrupts", |r| Ok(interrupts::read(r)?));
    g.truncated("interrupts", "/proc/interrupts", &irqs.warnings);
    let interfaces = read_interfaces(src, selection, &irqs, &mut g)?;
    let host = Host {
        schema_version: SCHEMA_VERSION,
        source: Source {
            root: root.base().display().to_string(),
            netns: src.netns.clone(),
        },
        kernel: g.take(
            "kernel",
            |r| Ok(r.read_value("/proc/sys/kernel/osrelease")?),
        ),
        cpus,
        online_cpus,
        numa_nodes,
        isolated_cpus: g.take("cpus", |r| {
            Ok(topology::read_cpu_list(
                r,
                "/sys/devices/system/cpu/isolated",
            )?)
        }),
        nohz_full_cpus: g.take("cpus", |r| {
            Ok(topology::read_cpu_list(
                r,
                "/sys/devices/system/cpu/nohz_full",
            )?)
        }),
        cpuidle: g.take("cpuidle", |r| Ok(cpuidle::read(r)?)),
        cpufreq,
        mitigations: g.take("mitigations", |r| Ok(vulnerabilities::read(r)?)),
        interfaces,
        sysctls: read_sysctls(&mut g),
        irqbalance: g.take("processes", |r| {
            let pids = r.processes_named("irqbalance")?;
            Ok(Irqbalance {
                running: !pids.is_empty(),
                pids,
            })
        }),
        packet_sockets: g.take("packet_sockets", |r| {
            Ok(r.parse_optional("/proc/net/packet", packet::parse)?
                .unwrap_or_default())
        }),
        af_xdp_sockets: g.take("af_xdp_sockets", |r| {
            Ok(
                r.parse_optional("/proc/net/protocols", super::protocols::parse)?
                    .and_then(|p| p.get("XDP").copied()),
            )
        }),
        conntrack: g.take("conntrack", |r| Ok(sysctl::read_conntrack(r)?)),
        counters,
        sources: Vec::new(),
        host_sysctls: BTreeMap::new(),
    };
    // A FIFO, a device or an oversized file is no kernel file: a tree that
    // holds one is not what the kernel wrote, whatever else it holds.
    root.refusal()?;
    let mut issues = g.issues;
    issues.sort_by(|a, b| (&a.section, &a.path).cmp(&(&b.section, &b.path)));
    issues.dedup();
    if nothing_read(&host) {
        let listed: Vec<String> = issues
            .iter()
            .take(4)
            .map(|i| format!("{}: {}", i.path, i.error))
            .collect();
        anyhow::bail!(
            "nothing could be read from {} ({}{}); give a directory written by `nettune capture`, \
             or run on the host itself",
            root.base().display(),
            listed.join("; "),
            if issues.len() > 4 { "; ..." } else { "" }
        );
    }
    Ok(Host {
        sources: issues,
        ..host
    })
}

/// True when no part of the model could be read at all.
fn nothing_read(host: &Host) -> bool {
    host.online_cpus.is_empty()
        && host.cpus.is_empty()
        && host.interfaces.is_empty()
        && host.sysctls.is_empty()
        && host.counters.cpu_time.is_empty()
        && host.counters.softnet.is_empty()
        && host.counters.udp.is_empty()
        && host.kernel.is_none()
}

/// The counters `doctor --interval` samples twice. What cannot be read is
/// left empty (`read_host` lists it in `sources`).
pub fn read_counters(root: &Root) -> Counters {
    read_counters_checked(root).0
}

/// The counters, and the sources that could not be read (their part is
/// empty): what `monitor` samples every interval.
pub fn read_counters_checked(root: &Root) -> (Counters, Vec<SourceIssue>) {
    let mut g = Gather {
        root,
        issues: Vec::new(),
    };
    let counters = read_counters_into(&mut g);
    (counters, g.issues)
}

/// The counters, each from its own source. softirqs, /proc/stat and
/// softnet_stat count for the whole host even inside a network namespace;
/// the SNMP counters are the namespace's.
fn read_counters_into(g: &mut Gather) -> Counters {
    let snmp = g.take("counters.snmp", |r| Ok(SnmpCounters::read_snmp(r)?));
    let netstat = g.take("counters.netstat", |r| {
        Ok(r.parse_optional("/proc/net/netstat", super::snmp::parse)?
            .unwrap_or_default())
    });
    let snmp6 = g.take("counters.snmp6", |r| Ok(snmp6::read(r)?));
    let section = |c: &SnmpCounters, tag: &str| c.0.get(tag).cloned().unwrap_or_default();
    let (cpu_time, system) = g.take("counters.cpu_time", |r| Ok(stat::read_all(r)?));
    Counters {
        softirqs: g.take("counters.softirqs", |r| Ok(softirqs::read(r)?.net())),
        cpu_time,
        softnet: g.take("counters.softnet", |r| Ok(softnet::read(r)?)),
        udp: section(&snmp, "Udp"),
        tcp: section(&snmp, "Tcp"),
        tcp_ext: section(&netstat, "TcpExt"),
        ip: section(&snmp, "Ip"),
        ip6: section(&snmp6, "Ip6"),
        udp6: section(&snmp6, "Udp6"),
        system,
        host_wide: HOST_WIDE_COUNTERS.iter().map(|c| c.to_string()).collect(),
    }
}

/// Counters that count for the whole host even when read inside a network
/// namespace.
pub const HOST_WIDE_COUNTERS: &[&str] = &["softirqs", "cpu_time", "softnet", "system"];

/// Each sysctl on its own: one that cannot be read (a container hiding
/// it, no permission) is listed and the others are kept.
fn read_sysctls(g: &mut Gather) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    // A kernel with networking has /proc/sys/net: without it (a container
    // that hides /proc/sys, a capture without it), the sysctls could not be
    // read, which is not "this kernel lacks them".
    if !g.root.exists("/proc/sys/net") {
        g.take::<()>("sysctls", |r| Err(absent(r, "/proc/sys/net").into()));
        return out;
    }
    for name in sysctl::SYSCTLS {
        if let Some(value) = g.take("sysctls", |r| Ok(sysctl::read(r, name)?)) {
            out.insert((*name).to_string(), value);
        }
    }
    out
}

/// The error for a directory every kernel has, missing from this tree.
fn absent(root: &Root, path: &str) -> KernelError {
    KernelError::Read {
        path: root.shown(path),
        source: std::io::Error::from_raw_os_error(libc::ENOENT),
    }
}

/// Every selected interface, each on its own: one that cannot be read is
/// listed in `sources`. Naming an interface that does not exist is an
/// error (bad input).
fn read_interfaces(
    src: &Inputs,
    selection: &Selection,
    irqs: &interrupts::Interrupts,
    g: &mut Gather,
) -> anyhow::Result<Vec<Interface>> {
    let root = src.root;
    // Every kernel has /sys/class/net (lo at least): without it, the
    // interfaces could not be read, which is not "no interfaces".
    let names = g.take("interfaces", |r| {
        r.list(CLASS_NET)?
            .ok_or_else(|| absent(r, CLASS_NET).into())
    });
    selection.check_present(&names, src.netns.as_deref())?;
    let mut out = Vec::new();
    for name in names {
        // bonding_masters is a file in /sys/class/net, not an interface.
        if selection.chooses(&name) && root.exists(&format!("{CLASS_NET}/{name}/ifindex")) {
            let section = format!("interface {name}");
            if let Some(iface) = g.take(&section, |_| read_interface(src, &name, irqs).map(Some)) {
                out.push(iface);
            }
        }
    }
    Ok(out)
}

/// One interface: its own files (`net_class`), its IRQ vectors (`irq`),
/// its queues (`net_queues`) and the driver's and link's answers.
fn read_interface(
    src: &Inputs,
    name: &str,
    irqs: &interrupts::Interrupts,
) -> anyhow::Result<Interface> {
    let root = src.root;
    let class = NetClass::new(root, name);
    let device = class.device();
    let (numa_node, local_cpus) = device.read_locality(root)?;
    let driver_settings = src.ethtool.query(name);
    let driver = device
        .read_driver(root)
        .or_else(|| driver_settings.info.value().map(|i| i.driver.clone()));
    let msi_irqs = device.read_msi_irqs(root)?;
    let owner = IrqOwner {
        iface: name,
        pci_address: device.pci_address.as_deref(),
        virtio_device: device.virtio_device.as_deref(),
    };
    let irq_vectors = irq::read(root, irqs, &owner, msi_irqs.as_deref())?;
    let (rx_queues, tx_queues) = net_queues::read(root, &class.dir, &irq_vectors)?;
    let statistics = class.read_statistics()?;
    let unsigned = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
    Ok(Interface {
        name: name.to_string(),
        ifindex: class.number("ifindex")?.and_then(|v| u32::try_from(v).ok()),
        driver,
        physical: device.path.is_some(),
        devtype: class.read_devtype()?,
        mtu: class.number("mtu")?.and_then(|v| u32::try_from(v).ok()),
        // -1 (unknown) on virtual links and links that are down; a speed
        // no link has (a capture may say anything) is unknown too.
        speed_mbps: class.read_speed()?,
        operstate: class.value("operstate")?,
        pci_address: device.pci_address,
        numa_node,
        local_cpus,
        rx_queues,
        tx_queues,
        irq_vectors,
        root_qdisc: src.netlink.root_qdisc(name),
        xdp: src.netlink.xdp(name),
        driver_settings,
        netdev: src.netdev.state(name),
        gro_flush_timeout: unsigned(class.number("gro_flush_timeout")?),
        napi_defer_hard_irqs: unsigned(class.number("napi_defer_hard_irqs")?),
        threaded: class.value("threaded")?,
        statistics,
    })
}
