//! [`Sampler`]: reads one [`Sample`] at a time through a `Root` and the
//! driver traits, so the same code samples the live host, a namespace, or
//! each snapshot of a recorded series.
//!
//! Every sample reads the counters (/proc/stat, /proc/softirqs,
//! /proc/interrupts, softnet_stat, snmp, snmp6, netstat, each interface's
//! statistics and per-queue counters). Which IRQ belongs to which
//! interface and queue, and the settings ([`State`]), come from the host
//! model, read again only when needed: at the first sample, when the
//! interfaces (names, ifindexes) or the IRQs in /proc/interrupts changed,
//! and every `settings_every_secs`. So an interface or IRQ that appears,
//! vanishes or is re-created is picked up at the next sample.

use std::collections::BTreeMap;

use crate::base::driver::QueueStats;
use crate::base::Probe;
use crate::host::interrupts::{self, Interrupts};
use crate::host::{read_counters_checked, read_host, Host, Inputs, Selection, SourceIssue};
use crate::host::{IssueKind, VectorRole};

use super::sample::{InterfaceCounters, IrqCounters, QueueSource, Sample, LINK_COUNTERS};
use super::state::State;

/// How often the settings are read again when nothing else made the
/// sampler read them: IRQ affinity, RPS and the qdisc change rarely, and
/// a whole host read costs far more than a sample.
pub const SETTINGS_EVERY_SECS: f64 = 10.0;

/// When a sample is taken, on the series clock and the wall clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stamp {
    /// Seconds since the series began (monotonic).
    pub elapsed_secs: f64,
    /// Milliseconds since the Unix epoch.
    pub unix_ms: u64,
}

impl Stamp {
    /// Now, on a series that began at `start`.
    pub fn since(start: std::time::Instant) -> Stamp {
        Stamp {
            elapsed_secs: start.elapsed().as_secs_f64(),
            unix_ms: unix_ms_now(),
        }
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Reads samples. Keeps what the last host read said (which IRQ serves
/// which queue, the settings) between samples.
#[derive(Debug)]
pub struct Sampler {
    selection: Selection,
    settings_every_secs: f64,
    layout: Option<Layout>,
}

/// What the last host read said.
#[derive(Debug)]
struct Layout {
    host: Host,
    state: State,
    /// The interfaces and IRQs the layout was read for.
    key: Structure,
    /// The NIC IRQ vectors to count.
    vectors: Vec<Vector>,
}

#[derive(Debug, Clone)]
struct Vector {
    irq: u32,
    iface: String,
    name: String,
    role: VectorRole,
    queue: Option<u32>,
}

/// What decides whether the layout still holds: the selected interfaces
/// with their ifindex, and every numbered IRQ with its action names.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Structure {
    interfaces: Vec<(String, Option<u32>)>,
    irqs: Vec<(u32, Vec<String>)>,
}

impl Sampler {
    /// A sampler of the interfaces `selection` names (all but `lo` by
    /// default).
    pub fn new(selection: Selection) -> Sampler {
        Sampler {
            selection,
            settings_every_secs: SETTINGS_EVERY_SECS,
            layout: None,
        }
    }

    /// Read the settings again at least every `secs` (on the series
    /// clock). A replay uses the period its capture used, so that it reads
    /// the settings where the capture recorded them.
    pub fn settings_every(mut self, secs: f64) -> Sampler {
        self.settings_every_secs = secs;
        self
    }

    pub fn settings_every_secs(&self) -> f64 {
        self.settings_every_secs
    }

    /// The host model as last read (the settings of every interface in
    /// full, the CPUs, NUMA); `None` before the first sample.
    pub fn host(&self) -> Option<&Host> {
        self.layout.as_ref().map(|l| &l.host)
    }

    /// Read one sample. An error only when the first sample cannot be made
    /// at all (nothing readable, or `--iface` names an interface that does
    /// not exist); later, whatever cannot be read is listed in
    /// [`Sample::missing`] and left empty, and a selected interface that
    /// vanished is simply absent.
    pub fn sample(&mut self, src: &Inputs, at: Stamp) -> anyhow::Result<Sample> {
        let root = src.root;
        let (counters, mut missing) = read_counters_checked(root);
        let irqs = match interrupts::read(root) {
            Ok(irqs) => {
                for warning in &irqs.warnings {
                    missing.push(SourceIssue {
                        section: "interrupts".to_string(),
                        path: root.shown("/proc/interrupts").display().to_string(),
                        kind: IssueKind::Truncated,
                        error: warning.clone(),
                    });
                }
                irqs
            }
            Err(e) => {
                missing.push(SourceIssue::from_error("interrupts", &e.into()));
                Interrupts::default()
            }
        };
        let links = self.read_links(src, &mut missing)?;
        // A snapshot holding a FIFO or an oversized file is not one the
        // kernel wrote: the replay stops there.
        root.refusal()?;
        let key = Structure {
            interfaces: links.iter().map(|l| (l.name.clone(), l.ifindex)).collect(),
            irqs: irqs
                .lines
                .iter()
                .filter_map(|l| Some((l.irq?, l.actions.clone())))
                .collect(),
        };
        self.refresh_layout(src, at, key, &mut missing)?;
        let layout = self.layout.as_ref();
        let interfaces = links
            .into_iter()
            .map(|link| with_queues(src, link))
            .collect::<Vec<_>>();
        let sample_irqs = layout
            .map(|l| count_vectors(&l.vectors, &irqs, &interfaces))
            .unwrap_or_default();
        if let Some(layout) = layout {
            missing.extend(layout.host.sources.iter().cloned());
        }
        missing.sort_by(|a, b| (&a.section, &a.path).cmp(&(&b.section, &b.path)));
        missing.dedup_by(|a, b| a.section == b.section && a.path == b.path);
        Ok(Sample {
            elapsed_secs: at.elapsed_secs,
            unix_ms: at.unix_ms,
            source: crate::host::Source {
                root: root.base().display().to_string(),
                netns: src.netns.clone(),
            },
            counters,
            irq_cpus: irqs.cpus,
            irqs: sample_irqs,
            interfaces,
            state: layout.map(|l| l.state.clone()).unwrap_or_default(),
            missing,
            drop_reasons: None,
        })
    }

    /// The selected interfaces present now, with ifindex and link
    /// counters. `--iface` naming an interface that is not there is an
    /// error at the first sample only.
    fn read_links(
        &self,
        src: &Inputs,
        missing: &mut Vec<SourceIssue>,
    ) -> anyhow::Result<Vec<InterfaceCounters>> {
        let root = src.root;
        let names = match root.list("/sys/class/net") {
            Ok(names) => names.unwrap_or_default(),
            Err(e) => {
                missing.push(SourceIssue::from_error("interfaces", &e.into()));
                Vec::new()
            }
        };
        if self.layout.is_none() {
            self.selection.check_present(&names, src.netns.as_deref())?;
        }
        let mut out = Vec::new();
        for name in names {
            if !self.selection.chooses(&name) {
                continue;
            }
            let base = format!("/sys/class/net/{name}");
            // bonding_masters is a file here, not an interface; an
            // interface deleted since the listing has no ifindex either.
            let ifindex = match root.read_value(&format!("{base}/ifindex")) {
                Ok(Some(v)) => v.parse::<u32>().ok(),
                Ok(None) => continue,
                Err(e) => {
                    missing.push(SourceIssue::from_error(
                        &format!("interface {name}"),
                        &e.into(),
                    ));
                    continue;
                }
            };
            let mut link = BTreeMap::new();
            for counter in LINK_COUNTERS {
                match root.read_value(&format!("{base}/statistics/{counter}")) {
                    Ok(Some(v)) => {
                        if let Ok(v) = v.parse::<u64>() {
                            link.insert((*counter).to_string(), v);
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        missing.push(SourceIssue::from_error(
                            &format!("interface {name}"),
                            &e.into(),
                        ));
                        break;
                    }
                }
            }
            out.push(InterfaceCounters {
                name,
                ifindex,
                link,
                queues: Vec::new(),
                queue_source: QueueSource::None,
            });
        }
        Ok(out)
    }

    /// Read the host model again when the structure changed or the
    /// settings are due. A failed read keeps the last layout (its IRQs
    /// that are still there are counted) and is listed in `missing`; only
    /// a first read that fails is an error.
    fn refresh_layout(
        &mut self,
        src: &Inputs,
        at: Stamp,
        key: Structure,
        missing: &mut Vec<SourceIssue>,
    ) -> anyhow::Result<()> {
        let due = match &self.layout {
            None => true,
            Some(l) => {
                l.key != key || at.elapsed_secs - l.state.read_at_secs >= self.settings_every_secs
            }
        };
        if !due {
            return Ok(());
        }
        // `--iface` names an interface that vanished: read the rest of the
        // host without it rather than fail.
        let mut selection = self.selection.clone();
        if let Some(wanted) = &selection.iface {
            if !key.interfaces.iter().any(|(name, _)| name == wanted) {
                selection.iface = None;
                selection.all = false;
            }
        }
        match read_host(src, &selection) {
            Ok(mut host) => {
                if selection.iface.is_none() && self.selection.iface.is_some() {
                    host.interfaces.clear();
                }
                let vectors = vectors_of(&host);
                self.layout = Some(Layout {
                    state: State::from_host(&host, at.elapsed_secs),
                    host,
                    key,
                    vectors,
                });
                Ok(())
            }
            Err(e) => match &mut self.layout {
                None => Err(e),
                Some(layout) => {
                    missing.push(SourceIssue::from_error("settings", &e));
                    layout.key = key;
                    layout.state.read_at_secs = at.elapsed_secs;
                    Ok(())
                }
            },
        }
    }
}

/// Every IRQ vector of the host's interfaces.
fn vectors_of(host: &Host) -> Vec<Vector> {
    host.interfaces
        .iter()
        .flat_map(|iface| {
            iface.irq_vectors.iter().map(|v| Vector {
                irq: v.irq,
                iface: iface.name.clone(),
                name: v.name.clone(),
                role: v.role,
                queue: v.queue,
            })
        })
        .collect()
}

/// The interrupt counts of the vectors that are still in /proc/interrupts
/// under their name, for interfaces present now.
fn count_vectors(
    vectors: &[Vector],
    irqs: &Interrupts,
    interfaces: &[InterfaceCounters],
) -> Vec<IrqCounters> {
    vectors
        .iter()
        .filter(|v| interfaces.iter().any(|i| i.name == v.iface))
        .filter_map(|v| {
            let line = irqs.by_irq(v.irq)?;
            if !line.actions.iter().any(|a| a == &v.name) {
                return None;
            }
            Some(IrqCounters {
                irq: v.irq,
                iface: v.iface.clone(),
                name: v.name.clone(),
                role: v.role,
                queue: v.queue,
                per_cpu: line.per_cpu.clone(),
            })
        })
        .collect()
}

/// Add the per-queue counters: the netdev netlink family's (`qstats`) when
/// the kernel gives them, else the driver's statistics.
fn with_queues(src: &Inputs, mut link: InterfaceCounters) -> InterfaceCounters {
    let nonempty = |p: Probe<Vec<QueueStats>>| match p {
        Probe::Value(q) if !q.is_empty() => Some(q),
        _ => None,
    };
    if let Some(queues) = nonempty(src.netdev.qstats(&link.name)) {
        link.queues = queues;
        link.queue_source = QueueSource::Netlink;
    } else if let Some(queues) = nonempty(src.ethtool.queue_stats(&link.name)) {
        link.queues = queues;
        link.queue_source = QueueSource::Ethtool;
    }
    link
}

#[cfg(test)]
#[path = "sampler_tests.rs"]
mod tests;
