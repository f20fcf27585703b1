//! What a change may be when nettune did not compute it itself: the one
//! allow-list every change from elsewhere passes before anything is read,
//! journaled or written (a saved plan given to `plan`, `apply` or
//! `experiment`; a site profile's values).
//!
//! A target passes when a profile could produce its kind: a sysctl of
//! [`SYSCTLS`], an IRQ's CPU list, a queue's RPS mask, RFS count or XPS
//! mask, a CPU's governor, haltpoll's window, a driver setting, the root
//! qdisc, a NAPI setting. Steering (RSS, ntuple rules, XDP) is made by
//! `nettune steer` and the benchmarks, never by a plan. Inside a network
//! namespace only what the namespace owns passes: its own sysctls (the
//! same [`sysctl_reach`] the planner uses to name host-wide values), its
//! interfaces' queue files, driver settings, qdiscs and NAPIs, and the
//! IRQs of its interfaces; the rest is the host's, refused with the
//! command that sets it there.
//!
//! A value passes when it parses as its target's kind, within bounds: a
//! number or `min default max` triple within the sysctl's range, a CPU
//! list or hex mask of this host's CPUs, a governor or qdisc by a known
//! name, a driver or NAPI value of its type. What passes comes out typed
//! ([`Value`]), parsed once: nothing else reaches the kernel, a journal or
//! a script.

use std::collections::BTreeSet;
use std::fmt;

use super::change::Change;
use super::render::set_command;
use super::target::{RxFile, Target, TxFile};
use super::value::{sysctl_shape, whole, Typed, Value};
use crate::base::cpuset::{parse_list_within, parse_mask, MAX_CPUS};
use crate::base::driver::netdev::parse_napi_value;
use crate::base::driver::{DriverKey, QdiscSpec};
use crate::base::text::excerpt;
use crate::host::{Host, READ_ONLY_IN_NETNS, ROOT_NAMESPACE_SYSCTLS};

/// How a sysctl's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// A whole number from 0 to this.
    Number(u64),
    /// `min default max`, each a whole number from 0 to this.
    Triple(u64),
    /// A TCP congestion control by name (`bbr`, `cubic`).
    Congestion,
}

/// A sysctl a profile sets, and how its value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sysctl {
    pub name: &'static str,
    pub form: Form,
}

/// The kernel's `int` sysctls: larger is refused by the kernel anyway.
const INT: u64 = i32::MAX as u64;
/// net.core.rps_sock_flow_entries: the kernel refuses more than 2^29
/// entries (net/core/sysctl_net_core.c); a queue's rps_flow_cnt is a share
/// of that table, so no more either.
const RFS_MAX: u64 = 1 << 29;
/// busy_read / busy_poll: microseconds a read or poll may spin; one second
/// is far beyond any tuning (tuned sets 50).
const BUSY_POLL_MAX_US: u64 = 1_000_000;
/// haltpoll's window: ten milliseconds of polling before a vCPU halts is
/// far beyond any tuning (nettune sets 200 us).
const HALT_POLL_MAX_NS: u64 = 10_000_000;

const fn sysctl(name: &'static str, form: Form) -> Sysctl {
    Sysctl { name, form }
}

/// Every sysctl a profile sets (docs/profiles.md gives each reason), with
/// the form of its value. A test plans every profile on every fixture
/// host and checks that this list holds exactly the sysctls they set.
pub const SYSCTLS: &[Sysctl] = &[
    sysctl("net.core.rmem_max", Form::Number(INT)),
    sysctl("net.core.wmem_max", Form::Number(INT)),
    sysctl("net.core.rmem_default", Form::Number(INT)),
    sysctl("net.core.wmem_default", Form::Number(INT)),
    sysctl("net.core.netdev_max_backlog", Form::Number(INT)),
    sysctl("net.core.netdev_budget", Form::Number(INT)),
    sysctl("net.core.dev_weight", Form::Number(INT)),
    sysctl("net.core.busy_poll", Form::Number(BUSY_POLL_MAX_US)),
    sysctl("net.core.busy_read", Form::Number(BUSY_POLL_MAX_US)),
    sysctl("net.core.rps_sock_flow_entries", Form::Number(RFS_MAX)),
    sysctl("net.core.somaxconn", Form::Number(INT)),
    sysctl("net.ipv4.tcp_rmem", Form::Triple(INT)),
    sysctl("net.ipv4.tcp_wmem", Form::Triple(INT)),
    sysctl("net.ipv4.udp_rmem_min", Form::Number(INT)),
    sysctl("net.ipv4.tcp_max_syn_backlog", Form::Number(INT)),
    sysctl("net.ipv4.tcp_mtu_probing", Form::Number(2)),
    sysctl("net.ipv4.tcp_slow_start_after_idle", Form::Number(1)),
    sysctl("net.ipv4.tcp_notsent_lowat", Form::Number(u32::MAX as u64)),
    sysctl("net.ipv4.tcp_no_metrics_save", Form::Number(1)),
    // Flags up to TFO_SERVER_WO_SOCKOPT2 (0x400): ip-sysctl.rst.
    sysctl("net.ipv4.tcp_fastopen", Form::Number(0x7ff)),
    sysctl("net.ipv4.tcp_window_scaling", Form::Number(1)),
    sysctl("net.ipv4.tcp_sack", Form::Number(1)),
    sysctl("net.ipv4.tcp_timestamps", Form::Number(2)),
    sysctl("net.ipv4.tcp_moderate_rcvbuf", Form::Number(1)),
    sysctl("net.ipv4.tcp_congestion_control", Form::Congestion),
    // 0 off, 1 on, 2 memory tiering, 3 both (sysctl/kernel.rst).
    sysctl("kernel.numa_balancing", Form::Number(3)),
];

/// Every driver setting a profile changes (docs/profiles.md gives each
/// reason), by the key `plan` prints: what a site profile's
/// `driver."KEY"` may name. GRO has two names, as drivers show it. A test
/// plans every profile on every fixture host and checks that the keys
/// they set are in this list.
pub const DRIVER_KEYS: &[&str] = &[
    "rings.rx",
    "rings.tx",
    "coalesce.rx-usecs",
    "coalesce.adaptive-rx",
    "coalesce.adaptive-tx",
    "rx-flow-hash.udp4",
    "rx-flow-hash.udp6",
    "channels.combined",
    "features.rx-gro",
    "features.generic-receive-offload",
];

/// The groups of [`DRIVER_KEYS`] (the text before the first dot): a site
/// profile may leave a whole group alone (`driver."rings" = "off"`).
pub fn driver_groups() -> Vec<&'static str> {
    let mut groups: Vec<&'static str> = DRIVER_KEYS
        .iter()
        .filter_map(|k| k.split_once('.').map(|(g, _)| g))
        .collect();
    groups.dedup();
    groups
}

/// The largest ring a value may ask for: the ring sizes of NICs run to a
/// few thousand entries (ice and mlx5: 8192; ena: 16384); the driver's own
/// maximum is checked when the plan is made.
const RING_MAX: u64 = 65_536;
/// The longest interrupt coalescing a value may ask for, microseconds:
/// ten milliseconds is far beyond any tuning (throughput's adaptive
/// moderation stays under a few hundred).
const COALESCE_MAX_US: u64 = 10_000;
/// The most queues a value may ask for; the driver's own maximum is
/// checked when the plan is made.
const CHANNELS_MAX: u64 = MAX_CPUS as u64;

/// The bounds of a driver setting's count, `None` for the rest.
fn driver_range(key: &DriverKey) -> Option<(u64, u64)> {
    match key {
        DriverKey::RingRx | DriverKey::RingTx => Some((1, RING_MAX)),
        DriverKey::RxUsecs | DriverKey::TxUsecs => Some((0, COALESCE_MAX_US)),
        DriverKey::Channels(_) => Some((1, CHANNELS_MAX)),
        _ => None,
    }
}

/// The cpufreq governors (Documentation/admin-guide/pm/cpufreq.rst).
pub const GOVERNORS: &[&str] = &[
    "performance",
    "powersave",
    "schedutil",
    "ondemand",
    "conservative",
    "userspace",
];

/// Root qdiscs a plan may install: fq (what throughput sets) and the
/// classless qdiscs it may be set back to.
pub const QDISCS: &[&str] = &["fq", "fq_codel", "cake", "pfifo_fast", "mq"];

/// The allow-list entry of sysctl `name`.
pub fn sysctl_rule(name: &str) -> Option<&'static Sysctl> {
    SYSCTLS.iter().find(|s| s.name == name)
}

/// Why a network namespace cannot set a sysctl itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostOnly {
    /// Shown read-only inside, mirroring the host's value.
    ReadOnlyMirror,
    /// Registered for the host's network namespace only.
    RootNamespaceOnly,
    /// Not a network sysctl: one value for the whole kernel.
    NotPerNamespace,
}

impl HostOnly {
    /// The reason, for namespace `ns` ("network namespace 'blue'").
    pub fn why(self, ns: &str) -> String {
        match self {
            HostOnly::ReadOnlyMirror => {
                format!("read-only inside {ns} (it mirrors the host's value)")
            }
            HostOnly::RootNamespaceOnly => {
                format!("{ns} has no such setting: it exists in the host's network namespace only")
            }
            HostOnly::NotPerNamespace => {
                format!("not per network namespace: {ns} cannot change it")
            }
        }
    }
}

/// Whether a network namespace can set sysctl `name` itself (`None`), or
/// why only the host can.
pub fn sysctl_reach(name: &str) -> Option<HostOnly> {
    if READ_ONLY_IN_NETNS.contains(&name) {
        Some(HostOnly::ReadOnlyMirror)
    } else if ROOT_NAMESPACE_SYSCTLS.contains(&name) {
        Some(HostOnly::RootNamespaceOnly)
    } else if !name.starts_with("net.") {
        Some(HostOnly::NotPerNamespace)
    } else {
        None
    }
}

/// Where a change would be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The host (its own network namespace), or a tree captured there.
    Host,
    /// A network namespace other than the host's: only what it owns.
    Netns(Netns),
}

/// What a network namespace owns beyond its sysctls and interfaces.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Netns {
    /// Its name (`--netns`); `None` inside a container.
    pub name: Option<String>,
    /// The IRQs of its interfaces' queues (a NIC moved into it).
    pub irqs: BTreeSet<u32>,
}

impl Scope {
    /// Where changes to `host` are made: a network namespace when the
    /// model was read in one (`--netns`, a container, or its capture).
    pub fn of(host: &Host) -> Scope {
        if !host.in_netns() {
            return Scope::Host;
        }
        Scope::Netns(Netns {
            name: host.source.netns.clone(),
            irqs: host
                .interfaces
                .iter()
                .flat_map(|i| i.irq_vectors.iter().map(|v| v.irq))
                .collect(),
        })
    }

    fn text(&self) -> String {
        match self {
            Scope::Netns(Netns { name: Some(n), .. }) => format!("network namespace '{n}'"),
            _ => "this network namespace".to_string(),
        }
    }
}

/// What bounds a value on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// CPU ids are below this (the highest CPU known + 1).
    pub cpus: u32,
}

impl Limits {
    pub fn of(host: &Host) -> Limits {
        let highest = host
            .online_cpus
            .iter()
            .chain(host.cpus.iter().map(|c| &c.id))
            .max();
        Limits {
            cpus: highest.map_or(MAX_CPUS, |&c| c.saturating_add(1).min(MAX_CPUS)),
        }
    }
}

/// A change refused, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub target: Target,
    pub why: String,
    /// The target is the host's, out of a namespace's reach: set there.
    pub host_wide: bool,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A target read from a file may hold anything: shown cut and escaped.
        let target = self.target.to_string();
        if target.len() > 80 || target.chars().any(char::is_control) {
            write!(f, "{}: {}", excerpt(&target), self.why)
        } else {
            write!(f, "{target}: {}", self.why)
        }
    }
}

impl std::error::Error for Refusal {}

fn refuse(target: &Target, why: impl Into<String>) -> Refusal {
    Refusal {
        target: target.clone(),
        why: why.into(),
        host_wide: false,
    }
}

fn host_wide(target: &Target, why: String) -> Refusal {
    Refusal {
        target: target.clone(),
        why: format!("host-wide: {why}"),
        host_wide: true,
    }
}

/// Whether a change of `target` may be made in `scope`.
pub fn admit(target: &Target, scope: &Scope) -> Result<(), Refusal> {
    let netns = match scope {
        Scope::Host => None,
        Scope::Netns(ns) => Some(ns),
    };
    match target {
        Target::Sysctl(name) => {
            if sysctl_rule(name).is_none() {
                return Err(refuse(
                    target,
                    "no nettune profile changes this sysctl (the ones they change: docs/profiles.md)",
                ));
            }
            match (netns, sysctl_reach(name)) {
                (Some(_), Some(reach)) => Err(host_wide(target, reach.why(&scope.text()))),
                _ => Ok(()),
            }
        }
        Target::IrqAffinity(irq) => match netns {
            Some(ns) if !ns.irqs.contains(irq) => Err(host_wide(
                target,
                format!(
                    "IRQ {irq} serves no interface of {}: IRQs are the host's",
                    scope.text()
                ),
            )),
            _ => Ok(()),
        },
        Target::RxQueue { .. }
        | Target::TxQueue {
            file: TxFile::XpsCpus,
            ..
        } => Ok(()),
        Target::TxQueue { .. } => Err(refuse(target, "no nettune profile sets xps_rxqs")),
        Target::Governor(_) | Target::HaltPoll => match netns {
            Some(_) => Err(host_wide(
                target,
                format!(
                    "CPU settings are the host's: {} cannot change them",
                    scope.text()
                ),
            )),
            None => Ok(()),
        },
        Target::Driver { .. } | Target::RootQdisc { .. } | Target::Napi { .. } => Ok(()),
        Target::RssIndirection { .. } | Target::NtupleRule { .. } => Err(refuse(
            target,
            "steering is set with `nettune steer`, never by a plan",
        )),
        Target::XdpProgram { .. } => Err(refuse(
            target,
            "XDP programs are attached by `nettune bench udp-sink --xdp`, never by a plan",
        )),
        Target::Queues { .. } | Target::Cpufreq | Target::Interfaces => {
            Err(refuse(target, "a scope, not a setting: nothing to write"))
        }
    }
}

/// The longest CPU list or mask text (a 1024-CPU mask is ~290 bytes).
const MAX_CPUS_BYTES: usize = 4096;
/// The longest value text of any other kind (`fq maxrate 34gbit`, a
/// tcp_rmem triple).
const MAX_VALUE_BYTES: usize = 64;

/// `value` as a value of `target` on a host with `limits`, or why it is
/// not one.
pub fn admit_value(target: &Target, value: &str, limits: &Limits) -> Result<Value, Refusal> {
    let bad = |why: String| refuse(target, format!("{} {why}", excerpt(value)));
    let cpus = matches!(
        target,
        Target::IrqAffinity(_)
            | Target::RxQueue {
                file: RxFile::RpsCpus,
                ..
            }
            | Target::TxQueue { .. }
    );
    let longest = if cpus {
        MAX_CPUS_BYTES
    } else {
        MAX_VALUE_BYTES
    };
    if value.len() > longest {
        return Err(bad(format!(
            "is longer than any value of this setting ({longest} bytes at most)"
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(bad("holds a control character (a newline?)".to_string()));
    }
    if cpus && value.contains(' ') {
        return Err(bad(
            "holds a space: CPU lists and masks have none".to_string()
        ));
    }
    let typed = match target {
        Target::Sysctl(name) => match sysctl_rule(name) {
            Some(rule) => sysctl_value(rule, value).map_err(bad)?,
            None => return Err(refuse(target, "no nettune profile changes this sysctl")),
        },
        Target::IrqAffinity(_) => match parse_list_within(value, limits.cpus) {
            Ok(cpus) if !cpus.is_empty() => Typed::CpuList(cpus),
            Ok(_) => return Err(bad("is not a CPU list (such as 0-3,8)".to_string())),
            Err(e) => return Err(bad(format!("is not a CPU list of this host: {e}"))),
        },
        Target::RxQueue {
            file: RxFile::RpsCpus,
            ..
        }
        | Target::TxQueue { .. } => Typed::CpuMask(cpu_mask(value, limits).map_err(bad)?),
        Target::RxQueue {
            file: RxFile::RpsFlowCnt,
            ..
        } => Typed::Number(number(value, RFS_MAX).map_err(bad)?),
        Target::Governor(_) if GOVERNORS.contains(&value) => Typed::Name,
        Target::Governor(_) => {
            return Err(bad(format!("is not a governor ({})", GOVERNORS.join(", "))))
        }
        Target::HaltPoll => Typed::Number(number(value, HALT_POLL_MAX_NS).map_err(bad)?),
        Target::Driver {
            key: DriverKey::FlowHash(_),
            ..
        } if value.is_empty() => {
            return Err(bad(
                "hashes on no field at all: give the letters of the fields, such as \"sdfn\""
                    .to_string(),
            ))
        }
        Target::Driver { key, .. } => {
            if let Some((least, most)) = driver_range(key) {
                match whole(value) {
                    Some(n) if n < least => {
                        return Err(bad(format!(
                            "is below {least}, the least this setting takes"
                        )))
                    }
                    Some(n) if n > most => {
                        return Err(bad(format!(
                            "is above {most}, the largest this setting takes"
                        )))
                    }
                    _ => {}
                }
            }
            Typed::Driver(key.setting(value).map_err(|e| refuse(target, e))?)
        }
        Target::RootQdisc { .. } => match QdiscSpec::parse(value) {
            Ok(spec) if !QDISCS.contains(&spec.kind.as_str()) => {
                return Err(bad(format!(
                    "is not a root qdisc a plan installs ({})",
                    QDISCS.join(", ")
                )))
            }
            Ok(spec) if spec.maxrate_bytes.is_some() && spec.kind != "fq" => {
                return Err(bad("sets maxrate, which only fq has".to_string()))
            }
            Ok(spec) => Typed::Qdisc(spec),
            Err(e) => return Err(refuse(target, e)),
        },
        Target::Napi { key, .. } if digits(value) => {
            Typed::Number(parse_napi_value(*key, value).map_err(|e| refuse(target, e))?)
        }
        Target::Napi { .. } => return Err(bad("is not a whole number".to_string())),
        _ => {
            return Err(admit(target, &Scope::Host)
                .err()
                .unwrap_or_else(|| refuse(target, "not a value nettune writes")))
        }
    };
    Ok(Value::given(typed, value))
}

/// Whether `change` may be made in `scope`: its value, then its target; a
/// host-wide one is refused with the command that sets it on the host.
/// Its value, typed, when it may.
pub fn admit_change<V: AsRef<str>>(
    change: &Change<V>,
    scope: &Scope,
    limits: &Limits,
) -> Result<Value, Refusal> {
    let value = admit_value(&change.target, change.to.as_ref(), limits)?;
    admit(&change.target, scope).map_err(|mut refusal| {
        if refusal.host_wide {
            refusal.why = format!(
                "{}; set it on the host: {}",
                refusal.why,
                set_command(&change.target, &value)
            );
        }
        refusal
    })?;
    Ok(value)
}

fn digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// A whole number from 0 to `max`.
fn number(text: &str, max: u64) -> Result<u64, String> {
    match whole(text) {
        Some(n) if n <= max => Ok(n),
        Some(_) => Err(format!("is above {max}, the largest this setting takes")),
        None => Err(format!("is not a whole number from 0 to {max}")),
    }
}

/// A sysctl's value in its form; typed by its shape, as
/// [`Value::sysctl`] types it.
fn sysctl_value(rule: &Sysctl, value: &str) -> Result<Typed, String> {
    match rule.form {
        Form::Number(max) => number(value, max).map(Typed::Number),
        Form::Triple(max) => {
            let fields: Vec<&str> = value.split(' ').collect();
            let [min, default, most] = fields[..] else {
                return Err(format!(
                    "is not three whole numbers (min default max, such as 4096 131072 6291456) from 0 to {max}"
                ));
            };
            Ok(Typed::Triple([
                number(min, max)?,
                number(default, max)?,
                number(most, max)?,
            ]))
        }
        Form::Congestion => {
            // TCP_CA_NAME_MAX is 16 with the terminating NUL.
            let ok = (1..16).contains(&value.len())
                && value
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if ok {
                Ok(sysctl_shape(value))
            } else {
                Err("is not a congestion control name (such as bbr or cubic)".to_string())
            }
        }
    }
}

/// A hex CPU mask (`3`, `ff,ffffffff`) of this host's CPUs.
fn cpu_mask(value: &str, limits: &Limits) -> Result<Vec<u32>, String> {
    let groups_max = limits.cpus.div_ceil(32).max(1) as usize;
    if value.split(',').count() > groups_max {
        return Err(format!(
            "is not a hex CPU mask of this host's {} CPUs",
            limits.cpus
        ));
    }
    match parse_mask(value) {
        Ok(cpus) => match cpus.iter().find(|&&c| c >= limits.cpus) {
            Some(cpu) => Err(format!(
                "names CPU {cpu}, beyond this host's CPUs (0-{})",
                limits.cpus.saturating_sub(1)
            )),
            None => Ok(cpus),
        },
        Err(e) => Err(format!("is not a hex CPU mask: {e}")),
    }
}

/// The number of changes of each refusal named in one message.
const NAMED: usize = 4;

/// Every change of `changes` admitted in the scope `scope_of` gives it,
/// its value typed, or one line naming what is refused (at most a few,
/// then how many more).
pub fn admit_all(
    changes: Vec<Change<String>>,
    scope_of: &dyn Fn(&Target) -> Scope,
    limits: &Limits,
) -> Result<Vec<Change>, String> {
    let mut admitted = Vec::new();
    let mut refused = Vec::new();
    for change in changes {
        match admit_change(&change, &scope_of(&change.target), limits) {
            Ok(value) => admitted.push(change.with_value(value)),
            Err(refusal) => refused.push(refusal),
        }
    }
    if refused.is_empty() {
        return Ok(admitted);
    }
    let mut shown: Vec<String> = refused.iter().take(NAMED).map(|r| r.to_string()).collect();
    if refused.len() > NAMED {
        shown.push(format!("and {} more", refused.len() - NAMED));
    }
    Err(format!(
        "{} change(s) refused: {}",
        refused.len(),
        shown.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> Target {
        text.parse().expect("target")
    }

    fn netns(irqs: &[u32]) -> Scope {
        Scope::Netns(Netns {
            name: Some("blue".to_string()),
            irqs: irqs.iter().copied().collect(),
        })
    }

    const TWO_CPUS: Limits = Limits { cpus: 2 };

    #[test]
    fn only_targets_a_profile_could_change_pass() {
        for ok in [
            "/proc/sys/net/core/rmem_max",
            "/proc/sys/kernel/numa_balancing",
            "/proc/irq/74/smp_affinity_list",
            "/sys/class/net/eth0/queues/rx-0/rps_cpus",
            "/sys/class/net/eth0/queues/rx-0/rps_flow_cnt",
            "/sys/class/net/eth0/queues/tx-0/xps_cpus",
            "/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor",
            "/sys/module/haltpoll/parameters/guest_halt_poll_ns",
            "ethtool:eth0:rings.rx",
            "qdisc:eth0:root",
            "napi:eth0:rx-0:defer-hard-irqs",
        ] {
            assert_eq!(admit(&t(ok), &Scope::Host), Ok(()), "{ok}");
        }
        for refused in [
            "/proc/sys/vm/swappiness",
            "/proc/sys/kernel/core_pattern",
            "/proc/sys/net/ipv4/ip_forward",
            "/sys/class/net/eth0/queues/tx-0/xps_rxqs",
            "rss:eth0:indirection",
            "ntuple:eth0:3",
            "xdp:eth0:7",
            "/sys/class/net/eth0/queues",
            "interfaces",
        ] {
            let target = t(refused);
            let refusal = admit(&target, &Scope::Host).expect_err(refused);
            assert!(!refusal.host_wide, "{refusal}");
            assert!(admit(&target, &netns(&[])).is_err(), "{refused}");
        }
    }

    #[test]
    fn a_namespace_passes_only_what_it_owns() {
        let ns = netns(&[74]);
        for own in [
            "/proc/sys/net/ipv4/tcp_rmem",
            "/proc/sys/net/core/somaxconn",
            "/proc/irq/74/smp_affinity_list",
            "/sys/class/net/veth0/queues/rx-0/rps_cpus",
            "ethtool:veth0:features.rx-gro",
            "qdisc:veth0:root",
            "napi:veth0:rx-0:gro-flush-timeout",
        ] {
            assert_eq!(admit(&t(own), &ns), Ok(()), "{own}");
        }
        for (host, why) in [
            (
                "/proc/sys/net/core/rmem_max",
                "read-only inside network namespace 'blue'",
            ),
            (
                "/proc/sys/net/core/busy_poll",
                "host's network namespace only",
            ),
            (
                "/proc/sys/kernel/numa_balancing",
                "not per network namespace",
            ),
            (
                "/proc/irq/75/smp_affinity_list",
                "IRQ 75 serves no interface",
            ),
            (
                "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
                "CPU settings",
            ),
            (
                "/sys/module/haltpoll/parameters/guest_halt_poll_ns",
                "CPU settings",
            ),
        ] {
            let refusal = admit(&t(host), &ns).expect_err(host);
            assert!(refusal.host_wide, "{refusal}");
            assert!(refusal.to_string().contains(why), "{refusal}");
        }
        // The planner names the same sysctls host-wide.
        for rule in SYSCTLS {
            let here = admit(&Target::sysctl(rule.name), &ns).is_ok();
            assert_eq!(here, sysctl_reach(rule.name).is_none(), "{}", rule.name);
        }
    }

    #[test]
    fn a_host_wide_change_is_refused_with_the_command_for_the_host() {
        let change = Change {
            target: t("/proc/sys/net/core/busy_poll"),
            from: "0".to_string(),
            to: "50".to_string(),
            reason: String::new(),
            group: "kernel".to_string(),
            origin: None,
        };
        let refusal = admit_change(&change, &netns(&[]), &TWO_CPUS).expect_err("host-wide");
        assert!(
            refusal
                .to_string()
                .ends_with("set it on the host: sysctl -w net.core.busy_poll=50"),
            "{refusal}"
        );
        assert_eq!(
            admit_change(&change, &Scope::Host, &TWO_CPUS),
            Ok(Value::number(50))
        );
    }

    #[test]
    fn values_pass_only_as_their_kind_within_bounds() {
        let cases: &[(&str, &str, bool)] = &[
            ("/proc/sys/net/core/rmem_max", "16777216", true),
            ("/proc/sys/net/core/rmem_max", "2147483647", true),
            ("/proc/sys/net/core/rmem_max", "2147483648", false),
            ("/proc/sys/net/core/rmem_max", "65536\nx", false),
            ("/proc/sys/net/core/rmem_max", " 65536", false),
            ("/proc/sys/net/core/rmem_max", "+65536", false),
            ("/proc/sys/net/core/rmem_max", "-1", false),
            ("/proc/sys/net/core/rmem_max", "", false),
            ("/proc/sys/net/core/busy_poll", "50", true),
            ("/proc/sys/net/core/busy_poll", "1000001", false),
            ("/proc/sys/net/ipv4/tcp_mtu_probing", "3", false),
            ("/proc/sys/net/ipv4/tcp_notsent_lowat", "4294967295", true),
            ("/proc/sys/net/ipv4/tcp_rmem", "4096 131072 6291456", true),
            ("/proc/sys/net/ipv4/tcp_rmem", "4096  131072 6291456", false),
            (
                "/proc/sys/net/ipv4/tcp_rmem",
                "4096\t131072\t6291456",
                false,
            ),
            ("/proc/sys/net/ipv4/tcp_rmem", "4096 131072", false),
            ("/proc/sys/net/ipv4/tcp_congestion_control", "bbr", true),
            ("/proc/sys/net/ipv4/tcp_congestion_control", "bbr;x", false),
            ("/proc/irq/74/smp_affinity_list", "0-1", true),
            ("/proc/irq/74/smp_affinity_list", "1,0", true),
            ("/proc/irq/74/smp_affinity_list", "0-2", false),
            ("/proc/irq/74/smp_affinity_list", "", false),
            ("/proc/irq/74/smp_affinity_list", "0, 1", false),
            ("/sys/class/net/eth0/queues/rx-0/rps_cpus", "3", true),
            ("/sys/class/net/eth0/queues/rx-0/rps_cpus", "0", true),
            ("/sys/class/net/eth0/queues/rx-0/rps_cpus", "00000003", true),
            ("/sys/class/net/eth0/queues/rx-0/rps_cpus", "4", false),
            (
                "/sys/class/net/eth0/queues/rx-0/rps_cpus",
                "0,00000001",
                false,
            ),
            ("/sys/class/net/eth0/queues/rx-0/rps_cpus", "xyz", false),
            ("/sys/class/net/eth0/queues/rx-0/rps_flow_cnt", "4096", true),
            (
                "/sys/class/net/eth0/queues/rx-0/rps_flow_cnt",
                "536870913",
                false,
            ),
            ("/sys/class/net/eth0/queues/tx-0/xps_cpus", "2", true),
            (
                "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
                "performance",
                true,
            ),
            (
                "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
                "turbo",
                false,
            ),
            (
                "/sys/module/haltpoll/parameters/guest_halt_poll_ns",
                "200000",
                true,
            ),
            (
                "/sys/module/haltpoll/parameters/guest_halt_poll_ns",
                "4000000000",
                false,
            ),
            ("ethtool:eth0:rings.rx", "4096", true),
            ("ethtool:eth0:rings.rx", "4096x", false),
            ("ethtool:eth0:rings.rx", "0", false),
            ("ethtool:eth0:rings.rx", "65537", false),
            ("ethtool:eth0:coalesce.rx-usecs", "0", true),
            ("ethtool:eth0:coalesce.rx-usecs", "10001", false),
            ("ethtool:eth0:channels.combined", "0", false),
            ("ethtool:eth0:features.rx-gro", "on", true),
            ("ethtool:eth0:features.rx-gro", "yes", false),
            ("ethtool:eth0:rx-flow-hash.udp4", "sdfn", true),
            ("ethtool:eth0:rx-flow-hash.udp4", "sdfn;x", false),
            ("ethtool:eth0:rx-flow-hash.udp4", "", false),
            ("qdisc:eth0:root", "fq", true),
            ("qdisc:eth0:root", "fq maxrate 8gbit", true),
            ("qdisc:eth0:root", "fq_codel", true),
            ("qdisc:eth0:root", "netem", false),
            ("qdisc:eth0:root", "fq_codel maxrate 8gbit", false),
            ("qdisc:eth0:root", "fq; rm -rf /", false),
            ("qdisc:eth0:root", "fq\nx", false),
            ("napi:eth0:rx-0:defer-hard-irqs", "100", true),
            ("napi:eth0:rx-0:defer-hard-irqs", "2147483648", false),
            ("napi:eth0:rx-0:defer-hard-irqs", " 100", false),
        ];
        for (target, value, ok) in cases {
            let result = admit_value(&t(target), value, &TWO_CPUS);
            assert_eq!(result.is_ok(), *ok, "{target} = {value:?}: {result:?}");
            if let Err(refusal) = result {
                assert_eq!(refusal.to_string().lines().count(), 1, "{refusal}");
            }
        }
    }

    #[test]
    fn a_huge_value_is_named_by_its_start_and_length() {
        let huge = "7".repeat(10 << 20);
        for target in [
            "/proc/sys/net/core/rmem_max",
            "/proc/irq/74/smp_affinity_list",
        ] {
            let refusal = admit_value(&t(target), &huge, &TWO_CPUS).expect_err("huge");
            let text = refusal.to_string();
            assert!(
                text.len() < 300 && text.contains("(10485760 bytes)"),
                "{text}"
            );
        }
    }
}
