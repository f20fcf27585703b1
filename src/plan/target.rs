//! What a change writes: one setting, typed.
//!
//! A target is parsed once, at the edge (a journal file, a saved plan), and
//! carried typed everywhere else: plan builds it, doctor matches findings
//! to it, apply dispatches on it, render and persist print it. Its text is
//! the absolute kernel path of file-backed settings
//! (`/proc/irq/74/smp_affinity_list`, `/proc/sys/net/core/rmem_max`) and a
//! stable name for the rest (`ethtool:eth0:rings.rx`, `qdisc:eth0:root`,
//! `napi:eth0:rx-0:defer-hard-irqs`); that text is what `plan --json`,
//! doctor's `changes` and the journal show.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::base::driver::{DriverKey, NapiKey};

/// A file of one RX queue that plan writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RxFile {
    /// RPS: the CPUs that process this queue's packets (a hex mask).
    RpsCpus,
    /// RFS: this queue's share of the flow table.
    RpsFlowCnt,
}

/// A file of one TX queue that plan writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TxFile {
    /// XPS: the CPUs that send on this queue (a hex mask).
    XpsCpus,
    /// XPS by receive queue (a hex mask of RX queues).
    XpsRxqs,
}

impl RxFile {
    pub fn name(self) -> &'static str {
        match self {
            RxFile::RpsCpus => "rps_cpus",
            RxFile::RpsFlowCnt => "rps_flow_cnt",
        }
    }
}

impl TxFile {
    pub fn name(self) -> &'static str {
        match self {
            TxFile::XpsCpus => "xps_cpus",
            TxFile::XpsRxqs => "xps_rxqs",
        }
    }
}

/// One setting plan may change, or a scope it leaves alone as a whole.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    /// A sysctl by its dotted name (`net.core.rmem_max`).
    Sysctl(String),
    /// An IRQ's CPU list: `/proc/irq/N/smp_affinity_list`.
    IrqAffinity(u32),
    /// A file of one RX queue of an interface.
    RxQueue {
        iface: String,
        queue: u32,
        file: RxFile,
    },
    /// A file of one TX queue of an interface.
    TxQueue {
        iface: String,
        queue: u32,
        file: TxFile,
    },
    /// A CPU's cpufreq governor.
    Governor(u32),
    /// haltpoll's poll window (`guest_halt_poll_ns`).
    HaltPoll,
    /// A driver setting by its key (`rings.rx`, `features.rx-gro`).
    Driver { iface: String, key: DriverKey },
    /// The root qdisc of an interface.
    RootQdisc { iface: String },
    /// A setting of the NAPI instance that serves an RX queue (netdev
    /// netlink `napi-set`), named by the queue: NAPI ids change when a
    /// driver rebuilds its queues (veth: when GRO or XDP is toggled).
    Napi {
        iface: String,
        queue: u32,
        key: NapiKey,
    },
    /// The whole RSS indirection table of an interface (`ethtool -X`).
    RssIndirection { iface: String },
    /// The ntuple rule slot at `location` of an interface (`ethtool -N`):
    /// a rule, or `none`.
    NtupleRule { iface: String, location: u32 },
    /// Whether XDP program `id` is attached to an interface.
    XdpProgram { iface: String, id: u32 },
    /// Scope only, never written: every queue file of an interface (what
    /// waits for a new queue count).
    Queues { iface: String },
    /// Scope only, never written: CPU frequency scaling as a whole (no
    /// cpufreq here).
    Cpufreq,
    /// Scope only, never written: the choice of interfaces.
    Interfaces,
}

const HALT_POLL_PATH: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";
const CPUFREQ_PATH: &str = "/sys/devices/system/cpu/cpufreq";

impl Target {
    /// The target of sysctl `name` (`net.core.rmem_max`).
    pub fn sysctl(name: &str) -> Target {
        Target::Sysctl(name.to_string())
    }

    pub fn rx(iface: &str, queue: u32, file: RxFile) -> Target {
        Target::RxQueue {
            iface: iface.to_string(),
            queue,
            file,
        }
    }

    pub fn tx(iface: &str, queue: u32, file: TxFile) -> Target {
        Target::TxQueue {
            iface: iface.to_string(),
            queue,
            file,
        }
    }

    pub fn driver(iface: &str, key: DriverKey) -> Target {
        Target::Driver {
            iface: iface.to_string(),
            key,
        }
    }

    pub fn root_qdisc(iface: &str) -> Target {
        Target::RootQdisc {
            iface: iface.to_string(),
        }
    }

    pub fn napi(iface: &str, queue: u32, key: NapiKey) -> Target {
        Target::Napi {
            iface: iface.to_string(),
            queue,
            key,
        }
    }

    pub fn queues(iface: &str) -> Target {
        Target::Queues {
            iface: iface.to_string(),
        }
    }

    /// The kernel file behind a file-backed target (`None` for driver
    /// settings, qdiscs and scopes other than files).
    pub fn path(&self) -> Option<String> {
        Some(match self {
            Target::Sysctl(name) => format!("/proc/sys/{}", name.replace('.', "/")),
            Target::IrqAffinity(irq) => format!("/proc/irq/{irq}/smp_affinity_list"),
            Target::RxQueue { iface, queue, file } => {
                format!("/sys/class/net/{iface}/queues/rx-{queue}/{}", file.name())
            }
            Target::TxQueue { iface, queue, file } => {
                format!("/sys/class/net/{iface}/queues/tx-{queue}/{}", file.name())
            }
            Target::Governor(cpu) => {
                format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor")
            }
            Target::HaltPoll => HALT_POLL_PATH.to_string(),
            _ => return None,
        })
    }

    /// Whether apply can write it (scopes cannot).
    pub fn is_writable(&self) -> bool {
        !matches!(
            self,
            Target::Queues { .. } | Target::Cpufreq | Target::Interfaces
        )
    }

    /// The sysctl name of a sysctl target.
    pub fn sysctl_name(&self) -> Option<&str> {
        match self {
            Target::Sysctl(name) => Some(name),
            _ => None,
        }
    }

    /// The interface a per-interface target belongs to.
    pub fn iface(&self) -> Option<&str> {
        match self {
            Target::RxQueue { iface, .. }
            | Target::TxQueue { iface, .. }
            | Target::Driver { iface, .. }
            | Target::RootQdisc { iface }
            | Target::Napi { iface, .. }
            | Target::Queues { iface }
            | Target::RssIndirection { iface }
            | Target::NtupleRule { iface, .. }
            | Target::XdpProgram { iface, .. } => Some(iface),
            _ => None,
        }
    }

    /// The IRQ of an IRQ affinity target.
    pub fn irq(&self) -> Option<u32> {
        match self {
            Target::IrqAffinity(irq) => Some(*irq),
            _ => None,
        }
    }

    /// The name a person knows the target by within its group (the
    /// interface, or `kernel`): `net.core.rmem_max`, `rx-0/rps_cpus`,
    /// `rings.rx`, `qdisc root`, `cpu3/cpufreq/scaling_governor`; IRQ and
    /// other paths stay whole.
    pub fn short_name(&self) -> String {
        match self {
            Target::Sysctl(name) => name.clone(),
            Target::RxQueue { queue, file, .. } => format!("rx-{queue}/{}", file.name()),
            Target::TxQueue { queue, file, .. } => format!("tx-{queue}/{}", file.name()),
            Target::Governor(cpu) => format!("cpu{cpu}/cpufreq/scaling_governor"),
            Target::Driver { key, .. } => key.to_string(),
            Target::RootQdisc { .. } => "qdisc root".to_string(),
            Target::Napi { queue, key, .. } => format!("rx-{queue} napi {key}"),
            Target::RssIndirection { .. } => "rss indirection".to_string(),
            Target::NtupleRule { location, .. } => format!("ntuple rule {location}"),
            Target::XdpProgram { id, .. } => format!("xdp program {id}"),
            Target::Cpufreq => "cpufreq".to_string(),
            _ => self.to_string(),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = self.path() {
            return f.write_str(&path);
        }
        match self {
            Target::Driver { iface, key } => write!(f, "ethtool:{iface}:{key}"),
            Target::RootQdisc { iface } => write!(f, "qdisc:{iface}:root"),
            Target::Napi { iface, queue, key } => write!(f, "napi:{iface}:rx-{queue}:{key}"),
            Target::RssIndirection { iface } => write!(f, "rss:{iface}:indirection"),
            Target::NtupleRule { iface, location } => write!(f, "ntuple:{iface}:{location}"),
            Target::XdpProgram { iface, id } => write!(f, "xdp:{iface}:{id}"),
            Target::Queues { iface } => write!(f, "/sys/class/net/{iface}/queues"),
            Target::Cpufreq => f.write_str(CPUFREQ_PATH),
            Target::Interfaces => f.write_str("interfaces"),
            _ => unreachable!("file targets are printed by their path"),
        }
    }
}

/// A text that names no target nettune knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} is not a setting nettune writes (a kernel path under /proc/sys, /proc/irq, /sys/class/net/IFACE/queues or cpufreq, or ethtool:IFACE:KEY, qdisc:IFACE:root, napi:IFACE:rx-N:KEY, rss:IFACE:indirection, ntuple:IFACE:LOC, xdp:IFACE:ID)", crate::base::text::excerpt(.0))]
pub struct UnknownTarget(pub String);

/// An interface name as the kernel allows it: 1-15 bytes, no `/`, `:` or
/// white space (`:` would make the target text ambiguous).
fn iface_name(name: &str) -> Option<String> {
    let ok = !name.is_empty()
        && name.len() <= 15
        && name != "."
        && name != ".."
        && !name.contains(['/', ':'])
        && !name.chars().any(char::is_whitespace);
    ok.then(|| name.to_string())
}

impl FromStr for Target {
    type Err = UnknownTarget;

    fn from_str(text: &str) -> Result<Target, UnknownTarget> {
        parse(text).ok_or_else(|| UnknownTarget(text.to_string()))
    }
}

fn parse(text: &str) -> Option<Target> {
    if let Some(rest) = text.strip_prefix("/proc/sys/") {
        // Sysctl names hold no white space or control characters (those
        // of interfaces, net.ipv4.conf.IFACE.*, no white space either).
        let ok = !rest.is_empty()
            && rest.split('/').all(|part| {
                !part.is_empty()
                    && part != "."
                    && part != ".."
                    && !part.contains('.')
                    && !part.chars().any(|c| c.is_whitespace() || c.is_control())
            });
        return ok.then(|| Target::Sysctl(rest.replace('/', ".")));
    }
    if let Some(rest) = text.strip_prefix("/proc/irq/") {
        let irq = rest.strip_suffix("/smp_affinity_list")?;
        return irq.parse().ok().map(Target::IrqAffinity);
    }
    if text == HALT_POLL_PATH {
        return Some(Target::HaltPoll);
    }
    if text == CPUFREQ_PATH {
        return Some(Target::Cpufreq);
    }
    if text == "interfaces" {
        return Some(Target::Interfaces);
    }
    if let Some(rest) = text.strip_prefix("/sys/devices/system/cpu/cpu") {
        let cpu = rest.strip_suffix("/cpufreq/scaling_governor")?;
        return cpu.parse().ok().map(Target::Governor);
    }
    if let Some(rest) = text.strip_prefix("/sys/class/net/") {
        let (iface, rest) = rest.split_once('/')?;
        let iface = iface_name(iface)?;
        if rest == "queues" {
            return Some(Target::Queues { iface });
        }
        let (queue_dir, file) = rest.strip_prefix("queues/")?.split_once('/')?;
        if let Some(queue) = queue_dir.strip_prefix("rx-") {
            let file = match file {
                "rps_cpus" => RxFile::RpsCpus,
                "rps_flow_cnt" => RxFile::RpsFlowCnt,
                _ => return None,
            };
            return Some(Target::RxQueue {
                iface,
                queue: queue.parse().ok()?,
                file,
            });
        }
        let queue = queue_dir.strip_prefix("tx-")?;
        let file = match file {
            "xps_cpus" => TxFile::XpsCpus,
            "xps_rxqs" => TxFile::XpsRxqs,
            _ => return None,
        };
        return Some(Target::TxQueue {
            iface,
            queue: queue.parse().ok()?,
            file,
        });
    }
    let parts: Vec<&str> = text.splitn(3, ':').collect();
    match parts[..] {
        ["ethtool", iface, key] => Some(Target::Driver {
            iface: iface_name(iface)?,
            key: DriverKey::parse(key)?,
        }),
        ["qdisc", iface, "root"] => Some(Target::RootQdisc {
            iface: iface_name(iface)?,
        }),
        ["napi", iface, rest] => {
            let (queue, key) = rest.split_once(':')?;
            Some(Target::Napi {
                iface: iface_name(iface)?,
                queue: queue.strip_prefix("rx-")?.parse().ok()?,
                key: NapiKey::parse(key)?,
            })
        }
        ["rss", iface, "indirection"] => Some(Target::RssIndirection {
            iface: iface_name(iface)?,
        }),
        ["ntuple", iface, location] => Some(Target::NtupleRule {
            iface: iface_name(iface)?,
            location: location.parse().ok()?,
        }),
        ["xdp", iface, id] => Some(Target::XdpProgram {
            iface: iface_name(iface)?,
            id: id.parse().ok()?,
        }),
        _ => None,
    }
}

/// A target equals its text: `change.target == "qdisc:eth0:root"`.
impl PartialEq<str> for Target {
    fn eq(&self, text: &str) -> bool {
        text.parse::<Target>().is_ok_and(|t| t == *self)
    }
}

impl PartialEq<&str> for Target {
    fn eq(&self, text: &&str) -> bool {
        text.parse::<Target>().is_ok_and(|t| t == *self)
    }
}

impl Serialize for Target {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Target, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_text() {
        let targets = [
            Target::sysctl("net.ipv4.tcp_rmem"),
            Target::IrqAffinity(74),
            Target::rx("eth0", 3, RxFile::RpsFlowCnt),
            Target::tx("eth0", 0, TxFile::XpsCpus),
            Target::Governor(12),
            Target::HaltPoll,
            Target::driver("eth0", DriverKey::FlowHash("udp4".to_string())),
            Target::driver("eth0", DriverKey::Feature("rx-gro".to_string())),
            Target::root_qdisc("eth0"),
            Target::napi("eth0", 3, NapiKey::GroFlushTimeout),
            Target::RssIndirection {
                iface: "eth2".to_string(),
            },
            Target::NtupleRule {
                iface: "eth2".to_string(),
                location: 1023,
            },
            Target::XdpProgram {
                iface: "veth1".to_string(),
                id: 42,
            },
            Target::queues("eth0"),
            Target::Cpufreq,
            Target::Interfaces,
        ];
        for t in targets {
            let text = t.to_string();
            assert_eq!(text.parse::<Target>(), Ok(t.clone()), "{text}");
            let json = serde_json::to_string(&t).expect("json");
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<Target>(&json).expect("back"), t);
        }
        assert_eq!(
            Target::sysctl("net.core.rmem_max").to_string(),
            "/proc/sys/net/core/rmem_max"
        );
        assert_eq!(
            Target::rx("veth0", 1, RxFile::RpsCpus).to_string(),
            "/sys/class/net/veth0/queues/rx-1/rps_cpus"
        );
        assert_eq!(
            Target::napi("veth0", 1, NapiKey::DeferHardIrqs).to_string(),
            "napi:veth0:rx-1:defer-hard-irqs"
        );
    }

    #[test]
    fn texts_that_name_nothing_nettune_writes_are_refused() {
        for bad in [
            "/etc/passwd",
            "/proc/sys/",
            "/proc/sys/net/../../etc",
            "/proc/sys/net/core/rmem_max\nx",
            "/proc/sys/net/core/rmem max",
            "/proc/irq/x/smp_affinity_list",
            "/proc/irq/5/smp_affinity",
            "/sys/class/net/eth0/queues/rx-0/rps_other",
            "/sys/class/net/a/b/queues/rx-0/rps_cpus",
            "qdisc::root",
            "qdisc:eth0:ingress",
            "ethtool:eth0:rings.bogus",
            "ethtool:averyveryverylongname:rings.rx",
            "napi:eth0:tx-0:defer-hard-irqs",
            "napi:eth0:rx-x:defer-hard-irqs",
            "napi:eth0:rx-0:threaded",
            "napi:eth0:rx-0",
            "rss:eth0:table",
            "ntuple:eth0:x",
            "ntuple:eth0:-1",
            "xdp:eth0:",
        ] {
            let err = bad.parse::<Target>().expect_err(bad);
            let shown = crate::base::text::excerpt(bad);
            assert!(err.to_string().contains(&shown), "{err}");
            assert_eq!(err.to_string().lines().count(), 1, "{err}");
        }
    }

    #[test]
    fn scopes_are_not_writable() {
        assert!(!Target::queues("eth0").is_writable());
        assert!(!Target::Cpufreq.is_writable());
        assert!(Target::HaltPoll.is_writable());
        assert_eq!(Target::queues("eth0").path(), None);
    }
}
