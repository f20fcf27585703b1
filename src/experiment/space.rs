//! The candidates an `experiment search` measures: the dimensions a target
//! can change (RPS, RFS, XPS, IRQ layouts, coalescing, per-NAPI IRQ
//! deferral, socket buffers), the plans they make, and settings given by
//! name (`rps=all+rfs=on`). The tuner applies them; the search ranks them.

use serde::{Deserialize, Serialize};

use crate::base::cpuset::{format_list, format_mask};
use crate::base::driver::netdev::Napi;
use crate::base::driver::{DriverSetting, NapiKey};
use crate::base::Probe;
use crate::host::{Host, Interface};
use crate::plan::compare::same_value;
use crate::plan::target::{RxFile, TxFile};
use crate::plan::values::{NapiValues, HTTP_NAPI, LATENCY_NAPI};
use crate::plan::{Change, Plan, PlanOptions, Profile, Target, Value, KERNEL_GROUP};

/// What the search may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dimension {
    Rps,
    Rfs,
    Xps,
    Irq,
    Coalesce,
    Napi,
    Buffers,
}

impl Dimension {
    pub const ALL: [Dimension; 7] = [
        Dimension::Rps,
        Dimension::Rfs,
        Dimension::Xps,
        Dimension::Irq,
        Dimension::Coalesce,
        Dimension::Napi,
        Dimension::Buffers,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Dimension::Rps => "rps",
            Dimension::Rfs => "rfs",
            Dimension::Xps => "xps",
            Dimension::Irq => "irq",
            Dimension::Coalesce => "coalesce",
            Dimension::Napi => "napi",
            Dimension::Buffers => "buffers",
        }
    }

    /// Every dimension's name, for messages: `rps, rfs, ... or napi`.
    pub fn names() -> String {
        let all: Vec<&str> = Dimension::ALL.iter().map(|d| d.name()).collect();
        match all.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => all.join(""),
        }
    }

    pub fn parse(text: &str) -> anyhow::Result<Dimension> {
        Dimension::ALL
            .into_iter()
            .find(|d| d.name() == text.trim())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--space: unknown dimension '{text}'; give {}",
                    Dimension::names()
                )
            })
    }
}

/// A candidate configuration: a plan of the host as found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// `rps=app(1) xps=off`; `current` for the host as found.
    pub name: String,
    pub plan: Plan,
}

/// What the candidates of a search come with, besides themselves.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Remarks {
    /// What was not searched, and why: a dimension the target lacks or
    /// may not change (`rfs: skipped: ...`), candidates beyond
    /// `--max-candidates`.
    pub skipped: Vec<String>,
    /// How a searched dimension was made, where it differs from what its
    /// name says (`buffers: the host's socket caps ... are left alone`).
    pub notes: Vec<String>,
}

/// What a search may do, and what it knows of the benchmark.
pub struct Space {
    pub dimensions: Vec<Dimension>,
    pub ifaces: Vec<String>,
    /// The receiving application's CPUs (the pinned server side).
    pub app_cpus: Vec<u32>,
    /// May change host-wide values (rps_sock_flow_entries).
    pub allow_host: bool,
    /// Tuning a network namespace, not the host.
    pub in_namespace: bool,
    /// The host's net.core.rps_sock_flow_entries when tuning a namespace
    /// (where it cannot be seen), read from the host's namespace; `None`
    /// when it could not be read.
    pub host_rfs_table: Option<String>,
    /// At most this many candidates (besides the baseline).
    pub max_candidates: usize,
    /// The path the buffers dimension sizes socket buffers for, as
    /// `--bandwidth` (bits/s) and `--rtt` (us) of the throughput profile;
    /// `None`: its defaults (the fastest link, 100 ms).
    pub bandwidth_bits: Option<u64>,
    pub rtt_us: Option<u64>,
}

/// The sysctls that exist only in the host's network namespace: a
/// namespace's plan changes them from the host's namespace (journaled as
/// the host's), never from inside.
pub const HOST_ONLY_SYSCTLS: &[&str] = &["net.core.rps_sock_flow_entries"];

/// Whether `target` is a host-wide value a namespace cannot change.
pub fn host_only(target: &Target) -> bool {
    target
        .sysctl_name()
        .is_some_and(|n| HOST_ONLY_SYSCTLS.contains(&n))
}

/// One choice in one dimension: its label and the changes it makes.
struct Choice {
    label: String,
    changes: Vec<Change>,
}

fn change(group: &str, target: Target, from: &str, to: Value, reason: &str) -> Option<Change> {
    (!same_value(&target, from, to.as_str())).then(|| Change {
        target,
        from: from.trim().to_string(),
        to,
        reason: format!("experiment search: {reason}"),
        group: group.to_string(),
        origin: None,
    })
}

fn keep() -> Choice {
    Choice {
        label: String::new(),
        changes: Vec::new(),
    }
}

/// RPS masks to try on every RX queue of `iface`.
fn rps_choices(host: &Host, iface: &Interface, app: &[u32]) -> Vec<(String, Vec<u32>)> {
    let all = host.online_cpus.clone();
    let mut out = vec![
        ("off".to_string(), Vec::new()),
        ("all".to_string(), all.clone()),
    ];
    if let (Some(local), true) = (&iface.local_cpus, host.numa_nodes.len() > 1) {
        out.push((format!("node({})", format_list(local)), local.clone()));
    }
    if !app.is_empty() {
        out.push((format!("app({})", format_list(app)), app.to_vec()));
        let others: Vec<u32> = all.iter().copied().filter(|c| !app.contains(c)).collect();
        if !others.is_empty() {
            out.push((format!("not-app({})", format_list(&others)), others));
        }
    }
    out
}

fn dimension_choices(
    d: Dimension,
    host: &Host,
    ifaces: &[&Interface],
    space: &Space,
    remarks: &mut Remarks,
) -> Vec<Choice> {
    let mut choices = vec![keep()];
    // Each dimension but buffers only ever skips; buffers may also note.
    choices.extend(match d {
        Dimension::Rps => rps_dimension(host, ifaces, space),
        Dimension::Rfs => rfs_dimension(host, ifaces, space, &mut remarks.skipped),
        Dimension::Xps => xps_dimension(host, ifaces),
        Dimension::Irq => irq_dimension(host, ifaces, space, &mut remarks.skipped),
        Dimension::Coalesce => coalesce_dimension(ifaces, &mut remarks.skipped),
        Dimension::Napi => napi_dimension(ifaces, &mut remarks.skipped),
        Dimension::Buffers => buffers_dimension(host, ifaces, space, remarks),
    });
    choices
}

/// RPS: each of rps_choices' CPU sets on every RX queue.
fn rps_dimension(host: &Host, ifaces: &[&Interface], space: &Space) -> Vec<Choice> {
    let mut choices = Vec::new();
    let Some(first) = ifaces.first() else {
        return Vec::new();
    };
    for (label, cpus) in rps_choices(host, first, &space.app_cpus) {
        let mut changes = Vec::new();
        for iface in ifaces {
            for q in &iface.rx_queues {
                if let Some(current) = &q.rps_cpus {
                    changes.extend(change(
                        &iface.name,
                        Target::rx(&iface.name, q.index, RxFile::RpsCpus),
                        &format_mask(current),
                        Value::cpu_mask(&cpus),
                        &format!("RPS {label}"),
                    ));
                }
            }
        }
        choices.push(Choice {
            label: format!("rps={label}"),
            changes,
        });
    }
    choices
}

/// RFS on (the flow table, host-wide when it is 0 and allowed, and a
/// share of it per RX queue) and off; none when the host-wide table cannot
/// be read, or is 0 and may not be changed.
fn rfs_dimension(
    host: &Host,
    ifaces: &[&Interface],
    space: &Space,
    skipped: &mut Vec<String>,
) -> Vec<Choice> {
    let mut choices = Vec::new();
    let table = if space.in_namespace {
        space.host_rfs_table.clone()
    } else {
        host.sysctls.get("net.core.rps_sock_flow_entries").cloned()
    };
    let host_table = match table {
        None => {
            skipped.push(
                "rfs: skipped: net.core.rps_sock_flow_entries (the host-wide RFS table) \
                     cannot be read"
                    .to_string(),
            );
            return Vec::new();
        }
        // The table is on already: RFS is per queue from here.
        Some(v) if v.trim() != "0" => None,
        Some(v) if space.allow_host => Some(v.trim().to_string()),
        Some(_) => {
            skipped.push(
                "rfs: skipped: RFS needs the host-wide net.core.rps_sock_flow_entries (0 \
                     now); give --allow-host to try it (journaled and restored like every \
                     change)"
                    .to_string(),
            );
            return Vec::new();
        }
    };
    let mut changes = Vec::new();
    if let Some(current) = host_table {
        changes.extend(change(
            KERNEL_GROUP,
            Target::sysctl("net.core.rps_sock_flow_entries"),
            &current,
            Value::number(crate::plan::values::RFS_ENTRIES),
            "RFS flow table",
        ));
    }
    for iface in ifaces {
        let n = iface.rx_queues.len().max(1) as u64;
        let per = (crate::plan::values::RFS_ENTRIES / n)
            .max(1)
            .next_power_of_two();
        for q in &iface.rx_queues {
            if let Some(current) = q.rps_flow_cnt {
                changes.extend(change(
                    &iface.name,
                    Target::rx(&iface.name, q.index, RxFile::RpsFlowCnt),
                    &current.to_string(),
                    Value::number(per),
                    "RFS on",
                ));
            }
        }
    }
    choices.push(Choice {
        label: "rfs=on".to_string(),
        changes,
    });
    let mut off = Vec::new();
    for iface in ifaces {
        for q in &iface.rx_queues {
            if let Some(current) = q.rps_flow_cnt {
                off.extend(change(
                    &iface.name,
                    Target::rx(&iface.name, q.index, RxFile::RpsFlowCnt),
                    &current.to_string(),
                    Value::number(0),
                    "RFS off",
                ));
            }
        }
    }
    choices.push(Choice {
        label: "rfs=off".to_string(),
        changes: off,
    });
    choices
}

/// XPS: one CPU per TX queue, or off.
fn xps_dimension(host: &Host, ifaces: &[&Interface]) -> Vec<Choice> {
    let mut choices = Vec::new();
    let cpus = &host.online_cpus;
    let (mut per_queue, mut off) = (Vec::new(), Vec::new());
    for iface in ifaces {
        for q in &iface.tx_queues {
            let Some(current) = &q.xps_cpus else { continue };
            let target = || Target::tx(&iface.name, q.index, TxFile::XpsCpus);
            let cpu = cpus.get(q.index as usize % cpus.len().max(1)).copied();
            per_queue.extend(change(
                &iface.name,
                target(),
                &format_mask(current),
                Value::cpu_mask(&cpu.into_iter().collect::<Vec<_>>()),
                "XPS: one CPU per TX queue",
            ));
            off.extend(change(
                &iface.name,
                target(),
                &format_mask(current),
                Value::cpu_mask(&[]),
                "XPS off",
            ));
        }
    }
    choices.push(Choice {
        label: "xps=per-queue".to_string(),
        changes: per_queue,
    });
    choices.push(Choice {
        label: "xps=off".to_string(),
        changes: off,
    });
    choices
}

/// Queue IRQ layouts: spread over all CPUs, onto the application's CPUs,
/// or away from them; none on interfaces without queue IRQs.
fn irq_dimension(
    host: &Host,
    ifaces: &[&Interface],
    space: &Space,
    skipped: &mut Vec<String>,
) -> Vec<Choice> {
    let mut choices = Vec::new();
    let vectors: Vec<(&Interface, u32, Option<u32>, Vec<u32>)> = ifaces
        .iter()
        .flat_map(|i| {
            i.irq_vectors
                .iter()
                .filter(|v| v.queue.is_some())
                .map(move |v| (*i, v.irq, v.queue, v.affinity.clone().unwrap_or_default()))
        })
        .collect();
    if vectors.is_empty() {
        skipped.push(format!(
            "irq: skipped: {} ha{} no queue IRQs (a virtual interface)",
            names(ifaces),
            if ifaces.len() == 1 { "s" } else { "ve" }
        ));
        return Vec::new();
    }
    let all = &host.online_cpus;
    let others: Vec<u32> = all
        .iter()
        .copied()
        .filter(|c| !space.app_cpus.contains(c))
        .collect();
    // Queue i's IRQs on the i-th CPU of the pool, wrapping.
    let mut layouts: Vec<(String, Vec<u32>)> = vec![("irq=spread".to_string(), all.clone())];
    if !space.app_cpus.is_empty() {
        let app = space.app_cpus.clone();
        layouts.push((format!("irq=app({})", format_list(&app)), app));
        if !others.is_empty() {
            layouts.push((format!("irq=not-app({})", format_list(&others)), others));
        }
    }
    for (label, pool) in layouts {
        let cpu_of = |q: u32| -> Vec<u32> {
            pool.get(q as usize % pool.len().max(1))
                .copied()
                .into_iter()
                .collect()
        };
        let changes = vectors
            .iter()
            .filter_map(|(iface, irq, queue, current)| {
                change(
                    &iface.name,
                    Target::IrqAffinity(*irq),
                    &format_list(current),
                    Value::cpu_list(&cpu_of(queue.unwrap_or(0))),
                    &label,
                )
            })
            .collect();
        choices.push(Choice { label, changes });
    }
    choices
}

/// Interrupt coalescing: 0 us, 50 us, adaptive; none when no driver can
/// change it.
fn coalesce_dimension(ifaces: &[&Interface], skipped: &mut Vec<String>) -> Vec<Choice> {
    let mut choices = Vec::new();
    let supported: Vec<&&Interface> = ifaces
        .iter()
        .filter(|i| matches!(i.driver_settings.coalesce, Probe::Value(_)))
        .collect();
    if supported.is_empty() {
        skipped.push(format!(
            "coalesce: skipped: the driver of {} cannot change interrupt coalescing",
            names(ifaces)
        ));
        return Vec::new();
    }
    for (label, settings) in [
        (
            "coalesce=0us",
            vec![DriverSetting::AdaptiveRx(false), DriverSetting::RxUsecs(0)],
        ),
        (
            "coalesce=50us",
            vec![DriverSetting::AdaptiveRx(false), DriverSetting::RxUsecs(50)],
        ),
        ("coalesce=adaptive", vec![DriverSetting::AdaptiveRx(true)]),
    ] {
        let mut changes = Vec::new();
        for iface in &supported {
            for s in &settings {
                let Probe::Value(current) =
                    crate::base::driver::setting::current_text(&s.key(), &iface.driver_settings)
                else {
                    continue;
                };
                changes.extend(change(
                    &iface.name,
                    Target::driver(&iface.name, s.key()),
                    &current,
                    Value::driver(s.clone()),
                    label,
                ));
            }
        }
        choices.push(Choice {
            label: label.to_string(),
            changes,
        });
    }
    choices
}

/// Per-NAPI IRQ deferral (defer-hard-irqs with gro-flush-timeout, netdev
/// napi-set, Linux 6.13): the latency profile's short deferral, the http
/// profile's batching one, or none; each NAPI once, through the first RX
/// queue it serves (as the profiles write it). IRQ suspension is left as
/// found: it engages only for applications that ask for it. None when no
/// RX queue of the interfaces has a NAPI whose settings the kernel reports
/// and takes (veth without GRO or XDP, a kernel before 6.13).
fn napi_dimension(ifaces: &[&Interface], skipped: &mut Vec<String>) -> Vec<Choice> {
    const KEYS: [NapiKey; 2] = [NapiKey::DeferHardIrqs, NapiKey::GroFlushTimeout];
    let mut napis: Vec<(&Interface, u32, &Napi)> = Vec::new();
    let mut why: Option<String> = None;
    for iface in ifaces {
        if let Some(reason) = crate::plan::no_napi_set(&iface.netdev) {
            why.get_or_insert_with(|| reason.to_string());
            continue;
        }
        let queues = iface.rx_queues.iter().map(|q| q.index);
        for (queue, napi) in iface.netdev.first_rx_of_each_napi(queues) {
            match napi {
                Ok(napi) if KEYS.iter().all(|k| k.value_in(napi).is_none()) => {
                    why.get_or_insert_with(|| {
                        "this kernel does not report the NAPI settings (Linux 6.13+)".to_string()
                    });
                }
                Ok(napi) => napis.push((*iface, queue, napi)),
                Err(no) => {
                    why.get_or_insert_with(|| no.reason(&iface.name, queue));
                }
            }
        }
    }
    if napis.is_empty() {
        skipped.push(format!(
            "napi: skipped: {} ha{} no NAPI whose settings can be changed: {}",
            names(ifaces),
            if ifaces.len() == 1 { "s" } else { "ve" },
            why.unwrap_or_else(|| "no RX queue".to_string())
        ));
        return Vec::new();
    }
    let off = NapiValues {
        defer_hard_irqs: 0,
        gro_flush_timeout_ns: 0,
        ..LATENCY_NAPI
    };
    let mut choices = Vec::new();
    for (label, v, what) in [
        (
            "napi=latency",
            LATENCY_NAPI,
            "as the latency profile sets it",
        ),
        ("napi=http", HTTP_NAPI, "as the http profile sets it"),
        ("napi=off", off, "off"),
    ] {
        let reason = format!(
            "IRQ deferral {what}: defer-hard-irqs {}, gro-flush-timeout {} us",
            v.defer_hard_irqs,
            v.gro_flush_timeout_ns / 1000
        );
        let mut changes = Vec::new();
        for (iface, queue, napi) in &napis {
            for (key, to) in KEYS
                .into_iter()
                .zip([v.defer_hard_irqs, v.gro_flush_timeout_ns])
            {
                let Some(current) = key.value_in(napi) else {
                    continue;
                };
                changes.extend(change(
                    &iface.name,
                    Target::napi(&iface.name, *queue, key),
                    &current.to_string(),
                    Value::number(to),
                    &reason,
                ));
            }
        }
        choices.push(Choice {
            label: label.to_string(),
            changes,
        });
    }
    choices
}

/// Socket buffers as the throughput profile sizes them for the path
/// (bandwidth x RTT rounded up to a tier: fasterdata's host tuning), the
/// same values `plan --profile throughput` writes; none where that changes
/// nothing here. Inside a network namespace only the TCP maxima
/// (net.ipv4.tcp_rmem, tcp_wmem) are its own: the socket caps
/// (net.core.rmem_max, wmem_max) are the host's, left as they are, and the
/// maxima kept within them, as the profile's plan does.
fn buffers_dimension(
    host: &Host,
    ifaces: &[&Interface],
    space: &Space,
    remarks: &mut Remarks,
) -> Vec<Choice> {
    let opts = PlanOptions {
        ifaces: ifaces.iter().map(|i| i.name.clone()).collect(),
        bandwidth_bits: space.bandwidth_bits,
        rtt_us: space.rtt_us,
        ..PlanOptions::new(Profile::Throughput)
    };
    let plan = match crate::plan::throughput_buffers(host, &opts) {
        Ok(plan) => plan,
        Err(e) => {
            remarks
                .skipped
                .push(format!("buffers: skipped: {}", crate::error::message(&e)));
            return Vec::new();
        }
    };
    let caps: Vec<&str> = plan
        .host_wide
        .iter()
        .filter_map(|h| h.target.sysctl_name())
        .collect();
    // In a namespace: the caps the profile would raise, which only the host
    // can.
    let host_caps = (!caps.is_empty()).then(|| {
        format!(
            "the host's socket caps ({}), which {} cannot raise",
            caps.join(", "),
            host.netns_text()
        )
    });
    if plan.changes.is_empty() {
        // Why nothing can be written: a value that cannot be read or does
        // not exist here, else the values already hold the profile's.
        let why = plan
            .skipped
            .iter()
            .find(|s| !plan.host_wide.iter().any(|h| h.target == s.target))
            .map(|s| s.reason.clone())
            .unwrap_or_else(|| {
                let within = host_caps
                    .as_ref()
                    .map(|caps| format!(" within {caps}"))
                    .unwrap_or_default();
                format!(
                    "net.ipv4.tcp_rmem and tcp_wmem already hold the throughput profile's \
                     maxima{within}"
                )
            });
        remarks.skipped.push(format!("buffers: skipped: {why}"));
        return Vec::new();
    }
    if let Some(caps) = host_caps {
        // Not a skip: the buffers are searched, within what can be written.
        remarks.notes.push(format!(
            "buffers: {caps}, are left alone: the TCP maxima are kept within them"
        ));
    }
    let changes = plan
        .changes
        .into_iter()
        .map(|c| Change {
            reason: format!(
                "experiment search: buffers as the throughput profile sizes them: {}",
                c.reason
            ),
            ..c
        })
        .collect();
    vec![Choice {
        label: "buffers=throughput".to_string(),
        changes,
    }]
}

fn names(ifaces: &[&Interface]) -> String {
    ifaces
        .iter()
        .map(|i| i.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The candidates of `space` on `host`, the baseline (`current`) first,
/// what was skipped and why, and notes on how candidates were made.
pub fn candidates(host: &Host, space: &Space) -> anyhow::Result<(Vec<Candidate>, Remarks)> {
    let ifaces = interfaces(host, space)?;
    let mut remarks = Remarks::default();
    let mut combos: Vec<Choice> = vec![keep()];
    for d in &space.dimensions {
        let choices = dimension_choices(*d, host, &ifaces, space, &mut remarks);
        let mut next = Vec::new();
        for base in &combos {
            for c in &choices {
                let label = [base.label.as_str(), c.label.as_str()]
                    .iter()
                    .filter(|l| !l.is_empty())
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" ");
                let mut changes = base.changes.clone();
                changes.extend(c.changes.iter().cloned());
                next.push(Choice { label, changes });
            }
        }
        combos = next;
    }
    // Choices that change nothing here (RPS already off) collapse into the
    // same plan: keep the first of each.
    let mut seen: Vec<Vec<(String, String)>> = Vec::new();
    let mut out = Vec::new();
    for c in combos {
        let mut key: Vec<(String, String)> = c
            .changes
            .iter()
            .map(|ch| (ch.target.to_string(), ch.to.to_string()))
            .collect();
        key.sort();
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let name = if c.changes.is_empty() {
            "current".to_string()
        } else {
            c.label
        };
        out.push(Candidate {
            name,
            plan: Plan::custom(host.online_cpus.clone(), space.ifaces.clone(), c.changes),
        });
    }
    let limit = space.max_candidates + 1;
    if out.len() > limit {
        remarks.skipped.push(format!(
            "{} candidates; measuring the first {} (raise --max-candidates, or narrow --space)",
            out.len() - 1,
            space.max_candidates
        ));
        out.truncate(limit);
    }
    Ok((out, remarks))
}

/// `text` cut at every `sep` character outside brackets: the search's
/// labels carry CPU lists in brackets (`rps=not-app(0,2-3)`), and a list
/// never ends a label or a setting. The pieces are trimmed; empty ones
/// are kept, for the caller to judge.
pub fn split_outside_brackets(text: &str, sep: impl Fn(char) -> bool) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            c if depth == 0 && sep(c) => {
                out.push(text[start..i].trim());
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    out.push(text[start..].trim());
    out
}

/// A config named by settings, as the search labels them: `rps=all`,
/// `rps=app+rfs=on`, `xps=off+irq=spread` (`+` between settings). The
/// search's own label is accepted as printed: its settings apart by
/// spaces, a value with its CPUs in brackets (`rps=not-app(0,2-3)
/// xps=off`).
pub fn parse_settings(text: &str) -> anyhow::Result<Vec<(Dimension, String)>> {
    let mut out: Vec<(Dimension, String)> = Vec::new();
    let parts = split_outside_brackets(text, |c| c == '+' || c.is_whitespace());
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once('=').ok_or_else(|| {
            anyhow::anyhow!("config '{text}': '{part}' is not SETTING=VALUE (e.g. rps=all)")
        })?;
        let d = Dimension::parse(key).map_err(|_| {
            anyhow::anyhow!(
                "config '{text}': unknown setting '{key}'; give {}",
                Dimension::names()
            )
        })?;
        if out.iter().any(|(x, _)| *x == d) {
            anyhow::bail!("config '{text}': {key} is given twice");
        }
        let value = value.split('(').next().unwrap_or(value).trim();
        out.push((d, value.to_string()));
    }
    Ok(out)
}

/// The plan of settings `wanted` on `host` (see [`parse_settings`]).
pub fn settings_plan(
    host: &Host,
    space: &Space,
    wanted: &[(Dimension, String)],
) -> anyhow::Result<Plan> {
    let ifaces = interfaces(host, space)?;
    let mut changes = Vec::new();
    for (d, value) in wanted {
        let mut remarks = Remarks::default();
        let choices = dimension_choices(*d, host, &ifaces, space, &mut remarks);
        let label = format!("{}={value}", d.name());
        let Some(choice) = choices
            .iter()
            .find(|c| c.label == label || c.label.starts_with(&format!("{label}(")))
        else {
            // A dimension skipped here says why; a note beside choices
            // (buffers kept within the host's caps) is no reason.
            if let (Some(why), 1) = (remarks.skipped.first(), choices.len()) {
                anyhow::bail!("{why}");
            }
            let offered: Vec<&str> = choices
                .iter()
                .filter_map(|c| c.label.strip_prefix(&format!("{}=", d.name())))
                .collect();
            anyhow::bail!(
                "{label} is not possible here; {} takes {}",
                d.name(),
                offered.join(", ")
            );
        };
        changes.extend(choice.changes.iter().cloned());
    }
    Ok(Plan::custom(
        host.online_cpus.clone(),
        space.ifaces.clone(),
        changes,
    ))
}

/// The interfaces of `space`, each as `host` has it.
fn interfaces<'h>(host: &'h Host, space: &Space) -> anyhow::Result<Vec<&'h Interface>> {
    let ifaces: Vec<&Interface> = space
        .ifaces
        .iter()
        .map(|name| {
            host.interfaces
                .iter()
                .find(|i| &i.name == name)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "interface '{name}' does not exist here (present: {})",
                        host.interfaces
                            .iter()
                            .map(|i| i.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })
        })
        .collect::<anyhow::Result<_>>()?;
    if ifaces.is_empty() {
        anyhow::bail!("no interface to tune or search: name one with --iface");
    }
    Ok(ifaces)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dimensions_parse_by_name() {
        assert_eq!(Dimension::parse("rps").expect("rps"), Dimension::Rps);
        assert_eq!(Dimension::parse("napi").expect("napi"), Dimension::Napi);
        let err = Dimension::parse("rss").expect_err("no such dimension");
        assert!(
            err.to_string()
                .ends_with("give rps, rfs, xps, irq, coalesce, napi or buffers"),
            "{err}"
        );
        assert_eq!(
            parse_settings("rps=all+napi=latency").expect("settings"),
            [
                (Dimension::Rps, "all".to_string()),
                (Dimension::Napi, "latency".to_string())
            ]
        );
    }

    /// The search's labels are taken back as printed: settings apart by
    /// spaces, CPU lists in brackets with commas in them (a host with more
    /// than two CPUs): no setting is dropped.
    #[test]
    fn the_search_labels_parse_back_with_every_setting() {
        assert_eq!(
            parse_settings("rps=not-app(0,2-3) irq=not-app(0,2-3)  xps=off").expect("label"),
            [
                (Dimension::Rps, "not-app".to_string()),
                (Dimension::Irq, "not-app".to_string()),
                (Dimension::Xps, "off".to_string())
            ]
        );
        assert_eq!(
            parse_settings("rps=app(1)+xps=off").expect("joined by +"),
            [
                (Dimension::Rps, "app".to_string()),
                (Dimension::Xps, "off".to_string())
            ]
        );
        let err = parse_settings("rps=app(1) rps=all").expect_err("twice");
        assert!(err.to_string().contains("rps is given twice"), "{err}");
        assert_eq!(
            split_outside_brackets("a(0,2-3),b,(1,(2,3)),", |c| c == ','),
            ["a(0,2-3)", "b", "(1,(2,3))", ""]
        );
    }

    pub(super) fn fixture(name: &str) -> Host {
        crate::gather::fixture_host(name)
    }

    pub(super) fn space(dimensions: &[Dimension], iface: &str) -> Space {
        Space {
            dimensions: dimensions.to_vec(),
            ifaces: vec![iface.to_string()],
            app_cpus: vec![1],
            allow_host: false,
            in_namespace: false,
            host_rfs_table: None,
            max_candidates: 32,
            bandwidth_bits: None,
            rtt_us: None,
        }
    }

    pub(super) fn changes(plan: &Plan) -> Vec<(String, String, String)> {
        plan.changes
            .iter()
            .map(|c| (c.target.to_string(), c.from.clone(), c.to.to_string()))
            .collect()
    }

    /// The changes of eth0's rx-0 NAPI: defer-hard-irqs and
    /// gro-flush-timeout, each (from, to).
    fn eth0_napi(defer: (u64, u64), timer: (u64, u64)) -> Vec<(String, String, String)> {
        [("defer-hard-irqs", defer), ("gro-flush-timeout", timer)]
            .into_iter()
            .map(|(key, (from, to))| {
                (
                    format!("napi:eth0:rx-0:{key}"),
                    from.to_string(),
                    to.to_string(),
                )
            })
            .collect()
    }

    /// eth0 of the 2-CPU VM fixture: one RX queue served by NAPI 257, on a
    /// kernel with napi-set.
    #[test]
    fn napi_offers_the_profiles_deferrals_and_off_per_napi() {
        let mut host = fixture("vm-2cpu-virtio");
        let napi_space = space(&[Dimension::Napi], "eth0");
        // Deferral off as found: `napi=off` is the host as found.
        let (found, remarks) = candidates(&host, &napi_space).expect("candidates");
        assert_eq!(remarks, Remarks::default());
        let names: Vec<&str> = found.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["current", "napi=latency", "napi=http"]);
        assert_eq!(changes(&found[1].plan), eth0_napi((0, 2), (0, 20_000)));
        assert_eq!(changes(&found[2].plan), eth0_napi((0, 100), (0, 50_000)));
        assert!(found[1].plan.changes[0]
            .reason
            .contains("IRQ deferral as the latency profile sets it: defer-hard-irqs 2, gro-flush-timeout 20 us"));

        // Deferral set for throughput (as the rr-irq-deferral scenario
        // sets it): every choice changes it.
        let eth0 = host
            .interfaces
            .iter_mut()
            .find(|i| i.name == "eth0")
            .expect("eth0");
        let Probe::Value(napis) = &mut eth0.netdev.napis else {
            panic!("the fixture has NAPIs");
        };
        napis[0].defer_hard_irqs = Some(100);
        napis[0].gro_flush_timeout_ns = Some(200_000);
        let (found, _) = candidates(&host, &napi_space).expect("candidates");
        let names: Vec<&str> = found.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["current", "napi=latency", "napi=http", "napi=off"]);
        let off = settings_plan(&host, &napi_space, &[(Dimension::Napi, "off".to_string())])
            .expect("napi=off");
        assert_eq!(changes(&off), eth0_napi((100, 0), (200_000, 0)));
        let err = settings_plan(&host, &napi_space, &[(Dimension::Napi, "fast".to_string())])
            .expect_err("no such choice");
        assert_eq!(
            err.to_string(),
            "napi=fast is not possible here; napi takes latency, http, off"
        );

        // With RPS: every RPS choice with every deferral (RPS off as found
        // collapses into the host as found: 4 RPS choices x 4 deferrals).
        let (found, _) = candidates(&host, &space(&[Dimension::Rps, Dimension::Napi], "eth0"))
            .expect("rps,napi");
        assert_eq!(
            found.len(),
            16,
            "{:?}",
            found.iter().map(|c| &c.name).collect::<Vec<_>>()
        );
        assert!(found.iter().any(|c| c.name == "rps=all napi=off"));
    }

    #[test]
    fn napi_is_skipped_with_the_reason_where_no_napi_can_be_changed() {
        // No netdev netlink family.
        let host = fixture("two-socket-nic-node1");
        let (found, remarks) =
            candidates(&host, &space(&[Dimension::Rps, Dimension::Napi], "ens1f0"))
                .expect("rps,napi");
        assert!(remarks.notes.is_empty(), "{remarks:?}");
        assert_eq!(
            remarks.skipped,
            [
                "napi: skipped: ens1f0 has no NAPI whose settings can be changed: this kernel has \
              no netdev netlink family (napi-set: Linux 6.13+)"
            ]
        );
        assert!(found.len() > 1);
        assert!(found.iter().all(|c| !c.name.contains("napi")), "{found:?}");

        // napi-set, but no NAPI on the device (loopback; veth without GRO).
        let host = fixture("vm-2cpu-virtio");
        let lo = space(&[Dimension::Napi], "lo");
        let (found, remarks) = candidates(&host, &lo).expect("napi on lo");
        let notes = remarks.skipped;
        assert_eq!(found.len(), 1);
        assert!(
            notes[0].starts_with("napi: skipped: lo has no NAPI whose settings can be changed: lo has no NAPI instance now"),
            "{notes:?}"
        );
        let err = settings_plan(&host, &lo, &[(Dimension::Napi, "latency".to_string())])
            .expect_err("nothing to set");
        assert!(err.to_string().starts_with("napi: skipped"), "{err}");
    }
}

#[cfg(test)]
#[path = "space_buffers_tests.rs"]
mod buffers_tests;
