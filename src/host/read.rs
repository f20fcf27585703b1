//! Assemble the host model from the kernel sources, through a `Root` (files)
//! and the `Ethtool`/`Netlink` traits (driver and link state).

use std::collections::BTreeMap;

use super::irqname::{self, IrqOwner};
use super::model::*;
use super::snmp::Counters as SnmpCounters;
use super::{interrupts, packet, snmp6, softirqs, softnet, stat};
use crate::base::cpuset::{parse_list, parse_mask};
use crate::base::driver::{Ethtool, Netdev, Netlink};
use crate::base::Root;
use crate::error::KernelError;

/// The fastest link nettune believes, in Mbit/s (10 Tbit/s; Ethernet tops
/// out at 800 Gbit/s today): plans multiply the speed by up to 10^8.
const MAX_LINK_MBPS: u64 = 10_000_000;

/// The sysctls nettune reads: every one a tuning technique touches
/// (docs/sources.md lists where each comes from).
pub const SYSCTLS: &[&str] = &[
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
    "net.core.optmem_max",
    "net.core.netdev_max_backlog",
    "net.core.netdev_budget",
    "net.core.netdev_budget_usecs",
    "net.core.dev_weight",
    "net.core.busy_poll",
    "net.core.busy_read",
    "net.core.rps_sock_flow_entries",
    "net.core.rps_default_mask",
    "net.core.default_qdisc",
    "net.core.somaxconn",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_mem",
    "net.ipv4.udp_mem",
    "net.ipv4.udp_rmem_min",
    "net.ipv4.udp_wmem_min",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_available_congestion_control",
    "net.ipv4.tcp_allowed_congestion_control",
    "net.ipv4.tcp_mtu_probing",
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_notsent_lowat",
    "net.ipv4.tcp_no_metrics_save",
    "net.ipv4.tcp_fastopen",
    "net.ipv4.tcp_max_syn_backlog",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_moderate_rcvbuf",
    "net.ipv4.ip_local_port_range",
    "kernel.numa_balancing",
];

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
    let mut online_cpus = g.take("cpus", |r| {
        Ok(r.parse("/sys/devices/system/cpu/online", parse_list)?)
    });
    if online_cpus.is_empty() {
        // /proc/stat has a line per online CPU: the next best source.
        online_cpus = counters.cpu_time.iter().map(|t| t.cpu).collect();
    }
    let numa_nodes = g.take("numa", |r| Ok(read_numa_nodes(r)?));
    let cpufreq = g.take("cpufreq", |r| Ok(read_cpufreq(r, &online_cpus)?));
    let cpus = g.take("cpus", |r| Ok(read_cpus(r, &online_cpus, &numa_nodes)?));
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
            Ok(read_cpu_list_file(r, "/sys/devices/system/cpu/isolated")?)
        }),
        nohz_full_cpus: g.take("cpus", |r| {
            Ok(read_cpu_list_file(r, "/sys/devices/system/cpu/nohz_full")?)
        }),
        cpuidle: g.take("cpuidle", |r| Ok(read_cpuidle(r)?)),
        cpufreq,
        mitigations: g.take("mitigations", |r| Ok(read_mitigations(r)?)),
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
        conntrack: g.take("conntrack", |r| Ok(read_conntrack(r)?)),
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

/// The CPUs this kernel could ever bring online
/// (`/sys/devices/system/cpu/possible`): the bound for CPU lists a user
/// types (`--cpus`, `--pin`). Falls back to `online` on kernels without the
/// file.
pub fn possible_cpus(root: &Root) -> Result<Vec<u32>, KernelError> {
    match root.parse_optional("/sys/devices/system/cpu/possible", parse_list)? {
        Some(cpus) => Ok(cpus),
        None => root.parse("/sys/devices/system/cpu/online", parse_list),
    }
}

/// Parse a CPU list a user typed for `flag` (`--cpus`, `--pin`): bounded by
/// the host's possible CPUs, so `0-2000000000` is an error naming the value
/// and the limit instead of an allocation of gigabytes.
pub fn parse_user_cpus(flag: &str, text: &str, root: &Root) -> anyhow::Result<Vec<u32>> {
    let possible = possible_cpus(root)?;
    let limit = possible.iter().max().map_or(1, |&m| m + 1);
    crate::base::cpuset::parse_list_within(text, limit)
        .map_err(|e| anyhow::anyhow!("{flag} '{text}': {e}; write a CPU list such as 0-3,8"))
}

/// A CPU-list file that may be absent or say `(null)` (nohz_full unset).
fn read_cpu_list_file(root: &Root, path: &str) -> Result<Vec<u32>, KernelError> {
    match root.read_value(path)? {
        None => Ok(Vec::new()),
        Some(text) if text == "(null)" => Ok(Vec::new()),
        Some(text) => parse_list(&text).map_err(|e| KernelError::Parse {
            path: path.into(),
            msg: e.0,
        }),
    }
}

fn read_numa_nodes(root: &Root) -> Result<Vec<NumaNode>, KernelError> {
    let mut nodes = Vec::new();
    for name in root.list("/sys/devices/system/node")?.unwrap_or_default() {
        let Some(id) = name
            .strip_prefix("node")
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let path = format!("/sys/devices/system/node/{name}/cpulist");
        let cpus = root.parse(&path, parse_list)?;
        nodes.push(NumaNode { id, cpus });
    }
    nodes.sort_by_key(|n| n.id);
    Ok(nodes)
}

fn read_cpus(root: &Root, online: &[u32], nodes: &[NumaNode]) -> Result<Vec<Cpu>, KernelError> {
    let mut cpus = Vec::with_capacity(online.len());
    for &id in online {
        let topo = format!("/sys/devices/system/cpu/cpu{id}/topology");
        let siblings = root
            .parse_optional(&format!("{topo}/thread_siblings_list"), parse_list)?
            .unwrap_or_else(|| vec![id]);
        let number = |file: &str| -> Result<Option<u32>, KernelError> {
            Ok(root
                .read_value(&format!("{topo}/{file}"))?
                .and_then(|v| v.parse::<i64>().ok())
                .and_then(|v| u32::try_from(v).ok()))
        };
        cpus.push(Cpu {
            id,
            node: nodes.iter().find(|n| n.cpus.contains(&id)).map(|n| n.id),
            siblings,
            package: number("physical_package_id")?,
            core: number("core_id")?,
        });
    }
    Ok(cpus)
}

fn read_cpuidle(root: &Root) -> Result<CpuIdle, KernelError> {
    let base = "/sys/devices/system/cpu/cpuidle";
    let governor = match root.read_value(&format!("{base}/current_governor"))? {
        Some(g) => Some(g),
        None => root.read_value(&format!("{base}/current_governor_ro"))?,
    };
    let mut states = Vec::new();
    let cpu0 = "/sys/devices/system/cpu/cpu0/cpuidle";
    let mut names = root.list(cpu0)?.unwrap_or_default();
    // state10 sorts before state2 as text; order by number.
    names.sort_by_key(|n| {
        n.trim_start_matches("state")
            .parse::<u32>()
            .unwrap_or(u32::MAX)
    });
    for state in names.iter().filter(|n| n.starts_with("state")) {
        let dir = format!("{cpu0}/{state}");
        states.push(IdleState {
            name: root
                .read_value(&format!("{dir}/name"))?
                .unwrap_or_else(|| state.clone()),
            latency_us: root
                .read_value(&format!("{dir}/latency"))?
                .and_then(|v| v.parse().ok()),
            disabled: root.read_value(&format!("{dir}/disable"))?.as_deref() == Some("1"),
        });
    }
    Ok(CpuIdle {
        driver: root.read_value(&format!("{base}/current_driver"))?,
        governor,
        guest_halt_poll_ns: root
            .read_value("/sys/module/haltpoll/parameters/guest_halt_poll_ns")?
            .and_then(|v| v.parse().ok()),
        states,
    })
}

fn read_cpufreq(root: &Root, online: &[u32]) -> Result<CpuFreq, KernelError> {
    let mut governors: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let mut driver = None;
    for &cpu in online {
        let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq");
        if let Some(gov) = root.read_value(&format!("{dir}/scaling_governor"))? {
            governors.entry(gov).or_default().push(cpu);
        }
        if driver.is_none() {
            driver = root.read_value(&format!("{dir}/scaling_driver"))?;
        }
    }
    Ok(CpuFreq { driver, governors })
}

fn read_mitigations(root: &Root) -> Result<Mitigations, KernelError> {
    let boot_param = root.read_value("/proc/cmdline")?.and_then(|cmdline| {
        cmdline
            .split_whitespace()
            .find_map(|arg| arg.strip_prefix("mitigations=").map(str::to_string))
    });
    let dir = "/sys/devices/system/cpu/vulnerabilities";
    let mut vulnerabilities = BTreeMap::new();
    for name in root.list(dir)?.unwrap_or_default() {
        if let Some(text) = root.read_value(&format!("{dir}/{name}"))? {
            vulnerabilities.insert(name, text);
        }
    }
    Ok(Mitigations {
        boot_param,
        vulnerabilities,
    })
}

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
    for name in SYSCTLS {
        let path = format!("/proc/sys/{}", name.replace('.', "/"));
        if let Some(value) = g.take("sysctls", |r| Ok(r.read_value(&path)?)) {
            out.insert((*name).to_string(), fold_whitespace(&value));
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

/// The root-namespace-only sysctls as `root` shows them (best effort: one
/// that cannot be read is left out, as inside a container).
pub fn read_root_namespace_sysctls(root: &Root) -> BTreeMap<String, String> {
    ROOT_NAMESPACE_SYSCTLS
        .iter()
        .filter_map(|name| {
            let path = format!("/proc/sys/{}", name.replace('.', "/"));
            let value = root.read_value(&path).ok().flatten()?;
            Some(((*name).to_string(), fold_whitespace(&value)))
        })
        .collect()
}

/// tcp_rmem is printed with tabs (`4096\t131072\t6291456`): show it with
/// single spaces, the way people write it.
fn fold_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn read_conntrack(root: &Root) -> Result<Conntrack, KernelError> {
    let number = |path: &str| -> Result<Option<u64>, KernelError> {
        Ok(root.read_value(path)?.and_then(|v| v.parse().ok()))
    };
    let count = number("/proc/sys/net/netfilter/nf_conntrack_count")?;
    Ok(Conntrack {
        loaded: count.is_some(),
        count,
        max: number("/proc/sys/net/netfilter/nf_conntrack_max")?,
    })
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
        r.list("/sys/class/net")?
            .ok_or_else(|| absent(r, "/sys/class/net").into())
    });
    selection.check_present(&names, src.netns.as_deref())?;
    let mut out = Vec::new();
    for name in names {
        // bonding_masters is a file in /sys/class/net, not an interface.
        if selection.chooses(&name) && root.exists(&format!("/sys/class/net/{name}/ifindex")) {
            let section = format!("interface {name}");
            if let Some(iface) = g.take(&section, |_| read_interface(src, &name, irqs).map(Some)) {
                out.push(iface);
            }
        }
    }
    Ok(out)
}

/// The PCI device at or above a device path: `/sys/devices/pci0000:00/0000:00:03.0`
/// for a virtio netdev whose device is `.../0000:00:03.0/virtio2`.
fn pci_device(device_path: &str) -> Option<&str> {
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

fn read_interface(
    src: &Inputs,
    name: &str,
    irqs: &interrupts::Interrupts,
) -> anyhow::Result<Interface> {
    let root = src.root;
    let base = format!("/sys/class/net/{name}");
    let value = |file: &str| root.read_value(&format!("{base}/{file}"));
    let number = |file: &str| -> Result<Option<i64>, KernelError> {
        Ok(value(file)?.and_then(|v| v.parse::<i64>().ok()))
    };
    let device_path = root.resolve(&format!("{base}/device"));
    let pci_path = device_path
        .as_deref()
        .and_then(pci_device)
        .map(str::to_string);
    let pci_address = pci_path
        .as_deref()
        .and_then(|p| p.rsplit('/').next())
        .map(str::to_string);
    // Topology files sit on the PCI device; a virtio netdev's own device has none.
    let topo_dir = pci_path.clone().or_else(|| device_path.clone());
    let (numa_node, local_cpus) = match &topo_dir {
        Some(dir) => (
            root.read_value(&format!("{dir}/numa_node"))?
                .and_then(|v| v.parse::<i64>().ok())
                .and_then(|v| u32::try_from(v).ok()),
            root.parse_optional(&format!("{dir}/local_cpulist"), parse_list)?,
        ),
        None => (None, None),
    };

    let driver_settings = src.ethtool.query(name);
    let driver = match &device_path {
        Some(dev) => root.link_name(&format!("{dev}/driver")),
        None => None,
    }
    .or_else(|| driver_settings.info.value().map(|i| i.driver.clone()));

    let virtio_device = device_path
        .as_deref()
        .and_then(|p| p.rsplit('/').next())
        .filter(|d| d.starts_with("virtio"))
        .map(str::to_string);
    let msi_irqs: Option<Vec<u32>> = match &pci_path {
        Some(p) => root
            .list(&format!("{p}/msi_irqs"))?
            .map(|names| names.iter().filter_map(|n| n.parse().ok()).collect()),
        None => None,
    };
    let owner = IrqOwner {
        iface: name,
        pci_address: pci_address.as_deref(),
        virtio_device: virtio_device.as_deref(),
    };
    let irq_vectors = read_vectors(root, irqs, &owner, msi_irqs.as_deref())?;

    let (rx_queues, tx_queues) = read_queues(root, &base, &irq_vectors)?;
    let mut statistics = BTreeMap::new();
    for counter in LOSS_STATISTICS {
        if let Some(v) = root
            .read_value(&format!("{base}/statistics/{counter}"))?
            .and_then(|v| v.parse().ok())
        {
            statistics.insert((*counter).to_string(), v);
        }
    }
    Ok(Interface {
        name: name.to_string(),
        ifindex: number("ifindex")?.and_then(|v| u32::try_from(v).ok()),
        driver,
        physical: device_path.is_some(),
        devtype: root
            .read_optional(&format!("{base}/uevent"))?
            .as_deref()
            .and_then(uevent_devtype),
        mtu: number("mtu")?.and_then(|v| u32::try_from(v).ok()),
        // -1 (unknown) on virtual links and links that are down; a speed
        // no link has (a capture may say anything) is unknown too.
        speed_mbps: number("speed")?
            .and_then(|v| u64::try_from(v).ok())
            .filter(|&mbps| mbps <= MAX_LINK_MBPS),
        operstate: value("operstate")?,
        pci_address,
        numa_node,
        local_cpus,
        rx_queues,
        tx_queues,
        irq_vectors,
        root_qdisc: src.netlink.root_qdisc(name),
        xdp: src.netlink.xdp(name),
        driver_settings,
        netdev: src.netdev.state(name),
        gro_flush_timeout: number("gro_flush_timeout")?.and_then(|v| u64::try_from(v).ok()),
        napi_defer_hard_irqs: number("napi_defer_hard_irqs")?.and_then(|v| u64::try_from(v).ok()),
        threaded: value("threaded")?,
        statistics,
    })
}

/// `DEVTYPE=bridge` of a uevent file.
fn uevent_devtype(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("DEVTYPE="))
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// Interface counters that say where packets were lost.
const LOSS_STATISTICS: &[&str] = &[
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

/// The device's IRQ vectors: its MSI IRQs (all numbered IRQs when the device
/// has no msi_irqs) whose /proc/interrupts names belong to this interface,
/// ordered by role and queue number.
fn read_vectors(
    root: &Root,
    irqs: &interrupts::Interrupts,
    owner: &IrqOwner,
    msi_irqs: Option<&[u32]>,
) -> Result<Vec<IrqVector>, KernelError> {
    let mut vectors = Vec::new();
    for line in &irqs.lines {
        let Some(irq) = line.irq else { continue };
        if msi_irqs.is_some_and(|msi| !msi.contains(&irq)) {
            continue;
        }
        let Some((action, (role, queue))) = line
            .actions
            .iter()
            .find_map(|a| irqname::classify(a, owner).map(|c| (a, c)))
        else {
            continue;
        };
        let dir = format!("/proc/irq/{irq}");
        let hint = root.parse_optional(&format!("{dir}/affinity_hint"), parse_mask)?;
        vectors.push(IrqVector {
            irq,
            name: action.clone(),
            role,
            queue,
            affinity: root.parse_optional(&format!("{dir}/smp_affinity_list"), parse_list)?,
            effective: root
                .parse_optional(&format!("{dir}/effective_affinity_list"), parse_list)?,
            // An all-zero hint means the driver gave none.
            affinity_hint: hint.filter(|cpus| !cpus.is_empty()),
            per_cpu: line.per_cpu.clone(),
        });
    }
    vectors.sort_by_key(|v| (v.queue.is_none(), v.queue, v.role, v.irq));
    Ok(vectors)
}

fn queue_indices(names: &[String], prefix: &str) -> Vec<u32> {
    let mut idx: Vec<u32> = names
        .iter()
        .filter_map(|n| n.strip_prefix(prefix).and_then(|i| i.parse().ok()))
        .collect();
    idx.sort_unstable();
    idx
}

fn vector_for(vectors: &[IrqVector], index: u32, rx: bool) -> Option<&IrqVector> {
    let wanted = if rx { VectorRole::Rx } else { VectorRole::Tx };
    vectors
        .iter()
        .find(|v| v.queue == Some(index) && (v.role == wanted || v.role == VectorRole::Combined))
}

fn read_queues(
    root: &Root,
    base: &str,
    vectors: &[IrqVector],
) -> Result<(Vec<RxQueue>, Vec<TxQueue>), KernelError> {
    let names = root.list(&format!("{base}/queues"))?.unwrap_or_default();
    let mut rx = Vec::new();
    for index in queue_indices(&names, "rx-") {
        let dir = format!("{base}/queues/rx-{index}");
        let vector = vector_for(vectors, index, true);
        rx.push(RxQueue {
            index,
            irq: vector.map(|v| v.irq),
            affinity: vector.and_then(|v| v.affinity.clone()),
            effective: vector.and_then(|v| v.effective.clone()),
            affinity_hint: vector.and_then(|v| v.affinity_hint.clone()),
            rps_cpus: root.parse_optional(&format!("{dir}/rps_cpus"), parse_mask)?,
            rps_flow_cnt: root
                .read_value(&format!("{dir}/rps_flow_cnt"))?
                .and_then(|v| v.parse().ok()),
        });
    }
    let mut tx = Vec::new();
    for index in queue_indices(&names, "tx-") {
        let dir = format!("{base}/queues/tx-{index}");
        let vector = vector_for(vectors, index, false);
        tx.push(TxQueue {
            index,
            irq: vector.map(|v| v.irq),
            affinity: vector.and_then(|v| v.affinity.clone()),
            effective: vector.and_then(|v| v.effective.clone()),
            affinity_hint: vector.and_then(|v| v.affinity_hint.clone()),
            xps_cpus: root.parse_optional(&format!("{dir}/xps_cpus"), parse_mask)?,
            xps_rxqs: root.parse_optional(&format!("{dir}/xps_rxqs"), parse_mask)?,
            tx_maxrate: root
                .read_value(&format!("{dir}/tx_maxrate"))?
                .and_then(|v| v.parse().ok()),
        });
    }
    Ok((rx, tx))
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
}
