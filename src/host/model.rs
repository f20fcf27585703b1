//! The host model: plain data that `inspect` prints, `doctor` judges and
//! `plan` diffs against. Built by `Host::read`; serialised as the `--json`
//! schema (docs/json-schema.md). CPU sets are sorted CPU ids.
//! `None` means the kernel or machine does not say (shown as "unknown").

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::softnet::SoftnetCpu;
use crate::base::driver::xdp::XdpState;
use crate::base::driver::{DriverSettings, NetdevState, Qdisc};
use crate::base::Probe;

/// Bumped when a field changes meaning or is removed (not when one is added).
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub schema_version: u32,
    pub source: Source,
    /// `uname -r` of the kernel (from /proc/sys/kernel/osrelease).
    pub kernel: Option<String>,
    pub cpus: Vec<Cpu>,
    pub online_cpus: Vec<u32>,
    pub numa_nodes: Vec<NumaNode>,
    pub isolated_cpus: Vec<u32>,
    pub nohz_full_cpus: Vec<u32>,
    pub cpuidle: CpuIdle,
    pub cpufreq: CpuFreq,
    pub mitigations: Mitigations,
    pub interfaces: Vec<Interface>,
    /// Dotted sysctl name -> value text as the kernel shows it (tabs and
    /// runs of spaces folded to one space). Absent names are not listed.
    pub sysctls: BTreeMap<String, String>,
    pub irqbalance: Irqbalance,
    pub packet_sockets: Vec<PacketSocket>,
    /// Open AF_XDP sockets in this namespace (/proc/net/protocols, XDP);
    /// `None` when the kernel has no AF_XDP.
    #[serde(default)]
    pub af_xdp_sockets: Option<u64>,
    pub conntrack: Conntrack,
    pub counters: Counters,
    /// The kernel sources that could not be read, or only in part: their
    /// part of the model is empty or incomplete. Empty when all was read.
    #[serde(default)]
    pub sources: Vec<SourceIssue>,
    /// With `--netns`: the host-wide sysctls a network namespace can neither
    /// see nor set ([`ROOT_NAMESPACE_SYSCTLS`]), as the host has them, read
    /// before entering the namespace. Empty otherwise (also inside a
    /// container, which cannot see them).
    #[serde(default)]
    pub host_sysctls: BTreeMap<String, String>,
}

/// Sysctls that exist in the host's (initial) network namespace only: a
/// child namespace has no such file (kernel net/core/sysctl_net_core.c
/// registers them for init_net alone).
pub const ROOT_NAMESPACE_SYSCTLS: &[&str] = &[
    "net.core.rps_sock_flow_entries",
    "net.core.busy_poll",
    "net.core.busy_read",
    "net.core.netdev_max_backlog",
    "net.core.netdev_budget",
    "net.core.netdev_budget_usecs",
    "net.core.dev_weight",
    "net.core.default_qdisc",
    "net.ipv4.udp_mem",
    "net.ipv4.tcp_mem",
];

/// Sysctls a child network namespace shows read-only: they mirror the
/// host's value and are set on the host.
pub const READ_ONLY_IN_NETNS: &[&str] = &[
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
];

impl Host {
    /// Read inside a network namespace other than the host's: `--netns`,
    /// or a kernel that shows the per-namespace sysctls but none of the
    /// root-namespace-only ones (nettune run inside a container, or a
    /// capture taken there).
    pub fn in_netns(&self) -> bool {
        if self.source.netns.is_some() {
            return true;
        }
        self.sysctls.contains_key("net.core.somaxconn")
            && !ROOT_NAMESPACE_SYSCTLS
                .iter()
                .any(|name| self.sysctls.contains_key(*name))
    }

    /// "network namespace 'blue'", or "this network namespace" when it has
    /// no name (a container).
    pub fn netns_text(&self) -> String {
        match &self.source.netns {
            Some(ns) => format!("network namespace '{ns}'"),
            None => "this network namespace".to_string(),
        }
    }

    /// A sysctl as this namespace shows it, else as the host has it (the
    /// values read before entering `--netns`).
    pub fn sysctl_or_host(&self, name: &str) -> Option<&str> {
        self.sysctls
            .get(name)
            .or_else(|| self.host_sysctls.get(name))
            .map(String::as_str)
    }

    /// A sysctl as a number ([`Host::sysctl_or_host`]); `None` where it is
    /// not visible or not a number.
    pub fn sysctl_number(&self, name: &str) -> Option<u64> {
        self.sysctl_or_host(name)?.trim().parse().ok()
    }

    /// The sysctls that turn busy polling on for every socket
    /// ([`BUSY_POLLING`]), as read: microseconds, `None` where one cannot
    /// be read. Busy polling is on when either is above 0 (napi.rst, "Busy
    /// polling"); both are host-wide, so inside `--netns` they are the
    /// host's.
    pub fn busy_polling(&self) -> [(&'static str, Option<u64>); 2] {
        BUSY_POLLING.map(|name| (name, self.sysctl_number(name)))
    }

    /// Whether busy polling is on for every socket, as read
    /// ([`Host::busy_polling`]).
    pub fn busy_polls(&self) -> bool {
        self.busy_polling()
            .iter()
            .any(|(_, us)| us.is_some_and(|us| us > 0))
    }
}

/// The sysctls that turn busy polling on for every socket: blocking reads
/// (`busy_read`) and poll/epoll (`busy_poll`).
pub const BUSY_POLLING: [&str; 2] = ["net.core.busy_read", "net.core.busy_poll"];

/// One kernel source nettune could not read (or read only in part).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceIssue {
    /// The part of the model it feeds: `cpus`, `interrupts`, `sysctls`,
    /// `interface eth0`, `counters.softnet`, ...
    pub section: String,
    /// The file, as on the live host, or inside the `--root` tree.
    pub path: String,
    pub kind: IssueKind,
    /// What went wrong, in the kernel's or the parser's words.
    pub error: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueKind {
    /// The file does not exist (a container hides it, an old kernel).
    Missing,
    /// It exists but cannot be read (permission, I/O error).
    Unreadable,
    /// Its text is not what the kernel writes (a damaged capture).
    Malformed,
    /// Read in part: rows cut short were left out.
    Truncated,
}

impl IssueKind {
    pub fn word(self) -> &'static str {
        match self {
            IssueKind::Missing => "missing",
            IssueKind::Unreadable => "unreadable",
            IssueKind::Malformed => "malformed",
            IssueKind::Truncated => "truncated",
        }
    }
}

impl SourceIssue {
    /// An issue of `section` from a reading error (a `KernelError` inside
    /// says which file and how).
    pub fn from_error(section: &str, e: &anyhow::Error) -> SourceIssue {
        use crate::error::KernelError;
        let kernel = e.chain().find_map(|c| c.downcast_ref::<KernelError>());
        let (path, kind, error) = match kernel {
            Some(KernelError::Read { path, source }) => (
                path.display().to_string(),
                if source.kind() == std::io::ErrorKind::NotFound {
                    IssueKind::Missing
                } else {
                    IssueKind::Unreadable
                },
                source.to_string(),
            ),
            Some(KernelError::Parse { path, msg }) => (
                path.display().to_string(),
                IssueKind::Malformed,
                msg.clone(),
            ),
            Some(KernelError::Write { path, source, .. }) => (
                path.display().to_string(),
                IssueKind::Unreadable,
                source.to_string(),
            ),
            Some(KernelError::Refused { path, why }) => (
                path.display().to_string(),
                IssueKind::Unreadable,
                why.clone(),
            ),
            None => (
                String::new(),
                IssueKind::Unreadable,
                crate::error::message(e),
            ),
        };
        SourceIssue {
            section: section.to_string(),
            path,
            kind,
            error,
        }
    }
}

/// Where the model was read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// `/` for the live host, otherwise the `--root` directory.
    pub root: String,
    /// The network namespace given with `--netns`.
    pub netns: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpu {
    pub id: u32,
    /// NUMA node, `None` when the kernel has no NUMA information.
    pub node: Option<u32>,
    /// SMT siblings including this CPU (thread_siblings_list).
    pub siblings: Vec<u32>,
    /// Physical package (socket).
    pub package: Option<u32>,
    pub core: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNode {
    pub id: u32,
    pub cpus: Vec<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuIdle {
    pub driver: Option<String>,
    pub governor: Option<String>,
    /// haltpoll's poll window before a vCPU halts; 0 makes every wake-up
    /// a full VM exit (tens of microseconds for a cross-CPU wake-up).
    pub guest_halt_poll_ns: Option<u64>,
    /// Idle states of CPU0 (names and exit latency), deepest last.
    pub states: Vec<IdleState>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleState {
    pub name: String,
    pub latency_us: Option<u64>,
    pub disabled: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuFreq {
    pub driver: Option<String>,
    /// Governor -> CPUs using it. Empty when there is no cpufreq.
    pub governors: BTreeMap<String, Vec<u32>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mitigations {
    /// The `mitigations=` boot parameter, if given.
    pub boot_param: Option<String>,
    /// /sys/devices/system/cpu/vulnerabilities/<name> -> its text.
    pub vulnerabilities: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interface {
    pub name: String,
    pub ifindex: Option<u32>,
    /// Kernel driver (`ixgbe`, `virtio_net`, `veth`).
    pub driver: Option<String>,
    /// Backed by a device (PCI, virtio, ...) rather than purely virtual.
    pub physical: bool,
    /// DEVTYPE of the interface's uevent (`bridge`, `bond`, `vlan`,
    /// `wlan`); `None` for most (veth, physical Ethernet).
    #[serde(default)]
    pub devtype: Option<String>,
    pub mtu: Option<u32>,
    pub speed_mbps: Option<u64>,
    pub operstate: Option<String>,
    /// PCI address of the device (or of its parent, for virtio).
    pub pci_address: Option<String>,
    pub numa_node: Option<u32>,
    pub local_cpus: Option<Vec<u32>>,
    pub rx_queues: Vec<RxQueue>,
    pub tx_queues: Vec<TxQueue>,
    /// Every IRQ vector of the device that belongs to this interface,
    /// queue vectors and the others (config, link, async, mgmt).
    pub irq_vectors: Vec<IrqVector>,
    pub root_qdisc: Probe<Qdisc>,
    /// XDP programs attached (mode, id, name) and the driver's XDP features.
    #[serde(default)]
    pub xdp: Probe<XdpState>,
    pub driver_settings: DriverSettings,
    /// The netdev netlink family: each queue's NAPI, each NAPI's IRQ and
    /// settings, per-queue counters (qstats).
    #[serde(default)]
    pub netdev: NetdevState,
    /// NAPI knobs in sysfs (Documentation/networking/napi.rst): the
    /// device's defaults, which a write also copies to every NAPI.
    pub gro_flush_timeout: Option<u64>,
    pub napi_defer_hard_irqs: Option<u64>,
    pub threaded: Option<String>,
    /// /sys/class/net/<if>/statistics counters that show loss.
    pub statistics: BTreeMap<String, u64>,
}

/// Drivers of virtual interfaces whose packets reach them through another
/// interface (a bridge port, a bond slave, the link under a VLAN or a
/// macvlan, the underlay of a tunnel): the steering of that interface has
/// already chosen their CPU.
const CARRIED_DRIVERS: &[(&str, &str)] = &[
    ("bridge", "bridge"),
    ("bonding", "bond"),
    ("team", "team"),
    ("802.1Q VLAN Support", "VLAN"),
    ("macvlan", "macvlan"),
    ("macvtap", "macvtap"),
    ("ipvlan", "ipvlan"),
    ("ipvtap", "ipvtap"),
    ("vrf", "vrf"),
    ("vxlan", "vxlan tunnel"),
    ("geneve", "geneve tunnel"),
    ("wireguard", "wireguard tunnel"),
    ("ipip", "ipip tunnel"),
    ("ip_gre", "GRE tunnel"),
    ("ip6_gre", "GRE tunnel"),
    ("ip6_tunnel", "IPv6 tunnel"),
    ("sit", "sit tunnel"),
];

/// The same, as uevent DEVTYPEs.
const CARRIED_DEVTYPES: &[(&str, &str)] = &[
    ("bridge", "bridge"),
    ("bond", "bond"),
    ("team", "team"),
    ("vlan", "VLAN"),
    ("macvlan", "macvlan"),
    ("vrf", "vrf"),
];

impl Interface {
    /// Administratively or physically down (an unknown state is not down:
    /// many virtual drivers report `unknown` while up).
    pub fn is_down(&self) -> bool {
        matches!(
            self.operstate.as_deref(),
            Some("down" | "lowerlayerdown" | "notpresent")
        )
    }

    /// For a virtual interface whose packets arrive through another one
    /// (bridge, bond, VLAN, macvlan, tunnel): what it is. `None` for
    /// physical interfaces and for virtual ones that receive on their own
    /// (veth, tun).
    pub fn carried_kind(&self) -> Option<&'static str> {
        if self.physical {
            return None;
        }
        let word = |table: &[(&str, &'static str)], name: Option<&str>| {
            let name = name?;
            table.iter().find(|(n, _)| *n == name).map(|(_, w)| *w)
        };
        word(CARRIED_DEVTYPES, self.devtype.as_deref())
            .or_else(|| word(CARRIED_DRIVERS, self.driver.as_deref()))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RxQueue {
    pub index: u32,
    pub irq: Option<u32>,
    /// smp_affinity_list of the IRQ.
    pub affinity: Option<Vec<u32>>,
    /// effective_affinity_list of the IRQ (`None` on kernels without it).
    pub effective: Option<Vec<u32>>,
    pub affinity_hint: Option<Vec<u32>>,
    pub rps_cpus: Option<Vec<u32>>,
    pub rps_flow_cnt: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxQueue {
    pub index: u32,
    pub irq: Option<u32>,
    pub affinity: Option<Vec<u32>>,
    pub effective: Option<Vec<u32>>,
    pub affinity_hint: Option<Vec<u32>>,
    pub xps_cpus: Option<Vec<u32>>,
    pub xps_rxqs: Option<Vec<u32>>,
    /// Mbit/s; 0 = unlimited.
    pub tx_maxrate: Option<u64>,
}

/// What an IRQ vector of a NIC serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VectorRole {
    /// RX queue N.
    Rx,
    /// TX queue N.
    Tx,
    /// RX and TX queue N together (`eth0-TxRx-0`, `mlx5_comp0`).
    Combined,
    /// No queue: config, link, async, mgmt.
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqVector {
    pub irq: u32,
    /// The name in /proc/interrupts.
    pub name: String,
    pub role: VectorRole,
    /// Queue number for queue vectors.
    pub queue: Option<u32>,
    pub affinity: Option<Vec<u32>>,
    pub effective: Option<Vec<u32>>,
    pub affinity_hint: Option<Vec<u32>>,
    /// Interrupts taken on each CPU since boot (index = CPU column).
    pub per_cpu: Vec<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Irqbalance {
    pub running: bool,
    pub pids: Vec<u32>,
}

/// An open AF_PACKET socket (/proc/net/packet): every packet on its
/// interface is also copied to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketSocket {
    pub inode: u64,
    /// Ethernet protocol in hex as the kernel shows it (`0003` = all).
    pub protocol: String,
    /// Interface index it is bound to; 0 = all interfaces.
    pub ifindex: u32,
    pub uid: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conntrack {
    /// nf_conntrack is loaded in this namespace (its sysctls exist).
    pub loaded: bool,
    pub count: Option<u64>,
    pub max: Option<u64>,
}

/// Counters since boot. `doctor --interval` samples them twice.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// NET_RX and NET_TX softirqs per CPU (/proc/softirqs).
    pub softirqs: Vec<CpuSoftirqs>,
    /// Per-CPU time from /proc/stat, in USER_HZ ticks.
    pub cpu_time: Vec<CpuTime>,
    pub softnet: Vec<SoftnetCpu>,
    /// /proc/net/snmp Udp.
    pub udp: BTreeMap<String, i64>,
    /// /proc/net/snmp Tcp.
    pub tcp: BTreeMap<String, i64>,
    /// /proc/net/netstat TcpExt (TCP over IPv4 and IPv6 together).
    pub tcp_ext: BTreeMap<String, i64>,
    /// /proc/net/snmp Ip (`InDiscards`, `InHdrErrors`, ...).
    #[serde(default)]
    pub ip: BTreeMap<String, i64>,
    /// /proc/net/snmp6 `Ip6*` counters, by name without the `Ip6` prefix
    /// (`InDiscards`). Empty when the kernel has no IPv6.
    #[serde(default)]
    pub ip6: BTreeMap<String, i64>,
    /// /proc/net/snmp6 `Udp6*` counters without the prefix
    /// (`RcvbufErrors`, `InErrors`, `NoPorts`, ...).
    #[serde(default)]
    pub udp6: BTreeMap<String, i64>,
    /// The lines of /proc/stat that are not per CPU.
    #[serde(default)]
    pub system: SystemCounters,
    /// The fields above that count for the whole host even when read
    /// inside a network namespace (`softirqs`, `cpu_time`, `softnet`,
    /// `system`); the SNMP counters are the namespace's own.
    #[serde(default)]
    pub host_wide: Vec<String>,
}

/// /proc/stat's host-wide lines. `None` when the line is absent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemCounters {
    /// `ctxt`: context switches since boot, all CPUs.
    pub context_switches: Option<u64>,
    /// `procs_running`: tasks runnable now (a gauge, not a counter).
    pub procs_running: Option<u64>,
    /// `procs_blocked`: tasks waiting for I/O now (a gauge).
    pub procs_blocked: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuSoftirqs {
    pub cpu: u32,
    pub net_rx: u64,
    pub net_tx: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTime {
    pub cpu: u32,
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

/// The CPU an IRQ is delivered to: the first of its effective affinity when
/// the kernel shows it and it is current, else the first of its mask.
pub fn delivered_cpu(effective: Option<&[u32]>, affinity: Option<&[u32]>) -> Option<u32> {
    match effective {
        Some(eff) if effective_current(effective, affinity) => eff.iter().min().copied(),
        _ => affinity.and_then(|a| a.iter().min().copied()),
    }
}

/// The effective affinity is shown and still current: inside the
/// configured mask. One outside it is stale: the affinity was just set (by
/// `nettune apply` or by hand) and the kernel moves the IRQ at its next
/// interrupt, which the plan's rules count on too (judge an IRQ by
/// smp_affinity_list).
pub fn effective_current(effective: Option<&[u32]>, affinity: Option<&[u32]>) -> bool {
    match (effective, affinity) {
        (Some(eff), Some(aff)) if !eff.is_empty() && !aff.is_empty() => {
            eff.iter().all(|c| aff.contains(c))
        }
        (Some(eff), _) => !eff.is_empty(),
        (None, _) => false,
    }
}

impl Interface {
    /// The IRQ of RX queue `queue` (an RX or combined vector) and the CPU
    /// it is delivered to.
    pub fn queue_irq_cpu(&self, queue: u32) -> Option<(u32, Option<u32>)> {
        if let Some(v) = self.irq_vectors.iter().find(|v| {
            v.queue == Some(queue) && matches!(v.role, VectorRole::Rx | VectorRole::Combined)
        }) {
            return Some((
                v.irq,
                delivered_cpu(v.effective.as_deref(), v.affinity.as_deref()),
            ));
        }
        let q = self.rx_queues.iter().find(|q| q.index == queue)?;
        Some((
            q.irq?,
            delivered_cpu(q.effective.as_deref(), q.affinity.as_deref()),
        ))
    }
}

impl CpuTime {
    /// All ticks; saturating, as the fields come from a file (a garbled
    /// capture may hold counts near u64::MAX).
    pub fn total(&self) -> u64 {
        [
            self.nice,
            self.system,
            self.idle,
            self.iowait,
            self.irq,
            self.softirq,
            self.steal,
        ]
        .into_iter()
        .fold(self.user, u64::saturating_add)
    }
}
