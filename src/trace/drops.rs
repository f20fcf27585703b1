//! `skb:kfree_skb` counted per drop reason, CPU, kernel location and
//! packet protocol: [`DropTracer`] loads and attaches the program and
//! reads its map ([`DropTracer::sample`] per interval, [`DropTracer::totals`]
//! since the start); [`super::run`] does the loop for a duration.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use serde::Serialize;

use super::catalog::{self, Mapping, ETH_P_ARP, ETH_P_IP, ETH_P_IPV6};
use super::kallsyms::{self, Symbols};
use super::layout::DropLayout;
use super::maps::{PerCpu, PerCpuMap};
use super::programs::{self, Filter};
use super::reasons::Reasons;
use super::scope::{self, Scope};
use super::{attach_best, bpf_error, possible_cpus, read_btf, Attached, TraceError};
use crate::base::bpf;
use crate::base::drop_layer::Layer;
use crate::base::Root;

/// Distinct (location, reason, protocol) keys the map holds; drops of a
/// key beyond them are counted as lost.
pub const MAX_KEYS: usize = 8192;

/// What to trace. Checked by [`DropTracer::open`] before anything is
/// loaded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DropsConfig {
    /// Only drops in this named network namespace (by the packet's device,
    /// or its socket when it has no device).
    pub netns: Option<String>,
    /// Only drops whose device is this interface (of `netns`, or of the
    /// caller's namespace).
    pub iface: Option<String>,
    /// Only packets of this protocol.
    pub protocol: Option<Protocol>,
    /// Only these reasons (names as the kernel lists them); empty: all.
    pub reasons: Vec<String>,
}

/// A protocol filter: the packet's ethertype or its IP protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Ipv4,
    Ipv6,
    Arp,
    Tcp,
    Udp,
    Icmp,
    Icmpv6,
}

impl Protocol {
    /// Whether a packet of `ethertype` and IP protocol `l4` is one.
    pub fn matches(self, ethertype: u16, l4: u8) -> bool {
        match self {
            Protocol::Ipv4 => ethertype == ETH_P_IP,
            Protocol::Ipv6 => ethertype == ETH_P_IPV6,
            Protocol::Arp => ethertype == ETH_P_ARP,
            Protocol::Tcp => is_ip(ethertype) && l4 == catalog::IPPROTO_TCP,
            Protocol::Udp => {
                is_ip(ethertype) && matches!(l4, catalog::IPPROTO_UDP | catalog::IPPROTO_UDPLITE)
            }
            Protocol::Icmp => ethertype == ETH_P_IP && l4 == catalog::IPPROTO_ICMP,
            Protocol::Icmpv6 => ethertype == ETH_P_IPV6 && l4 == catalog::IPPROTO_ICMPV6,
        }
    }
}

fn is_ip(ethertype: u16) -> bool {
    ethertype == ETH_P_IP || ethertype == ETH_P_IPV6
}

/// How a packet is named in a report: `udp`, `tcp`, `icmp`, `ipv4`,
/// `arp`, `0x88cc`; `unknown` when the tracer could not read it.
pub fn protocol_name(ethertype: u16, l4: u8) -> String {
    match (ethertype, l4) {
        (0, _) => "unknown".to_string(),
        (e, catalog::IPPROTO_TCP) if is_ip(e) => "tcp".to_string(),
        (e, catalog::IPPROTO_UDP) if is_ip(e) => "udp".to_string(),
        (e, catalog::IPPROTO_UDPLITE) if is_ip(e) => "udplite".to_string(),
        (ETH_P_IP, catalog::IPPROTO_ICMP) => "icmp".to_string(),
        (ETH_P_IPV6, catalog::IPPROTO_ICMPV6) => "icmpv6".to_string(),
        (ETH_P_IP, _) => "ipv4".to_string(),
        (ETH_P_IPV6, _) => "ipv6".to_string(),
        (ETH_P_ARP, _) => "arp".to_string(),
        (e, _) => format!("{e:#06x}"),
    }
}

/// One map key, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DropKey {
    pub location: u64,
    pub reason: u32,
    /// Host order; 0 when not read.
    pub ethertype: u16,
    /// 0 when not read or not IP.
    pub l4: u8,
}

impl DropKey {
    pub fn decode(raw: &[u8]) -> Option<DropKey> {
        let b: &[u8; programs::DROP_KEY_LEN] =
            raw.get(..programs::DROP_KEY_LEN)?.try_into().ok()?;
        Some(DropKey {
            location: u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            reason: u32::from_ne_bytes([b[8], b[9], b[10], b[11]]),
            // The field as the packet holds it: network order.
            ethertype: u16::from_be_bytes([b[12], b[13]]),
            l4: b[14],
        })
    }
}

/// One reason in one layer: how many drops, where and on which CPUs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DropRow {
    /// As the kernel names it: `SOCKET_RCVBUFF`.
    pub reason: String,
    pub code: u32,
    pub layer: Layer,
    pub count: u64,
    pub per_sec: f64,
    /// CPUs that dropped, with their counts (most first).
    pub cpus: Vec<CpuCount>,
    /// Kernel locations (`udp_queue_rcv_one_skb+0x2f5`), most first;
    /// `location` is `null` when the kernel hides addresses.
    pub locations: Vec<LocationCount>,
    /// Packet protocols (`udp`, `tcp`, `arp`), most first.
    pub protocols: Vec<ProtocolCount>,
    /// What the reason means and its fix (in reports, not intervals).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advice: Option<Advice>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CpuCount {
    pub cpu: u32,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LocationCount {
    pub location: Option<String>,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProtocolCount {
    pub protocol: String,
    pub count: u64,
}

/// What nettune says of a reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Advice {
    pub what: String,
    pub fix: Option<String>,
    pub source: String,
    pub mapping: Mapping,
}

impl Advice {
    pub fn of(reason: &str) -> Advice {
        let e = catalog::entry(reason);
        Advice {
            what: e.what.to_string(),
            fix: e.fix.map(str::to_string),
            source: e.source.to_string(),
            mapping: e.mapping,
        }
    }
}

/// The drops of one interval (a monitor's or [`super::run`]'s).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DropInterval {
    /// Seconds from the start to the end of this interval.
    pub at_secs: f64,
    pub seconds: f64,
    pub total: u64,
    pub per_sec: f64,
    /// Drops not counted by key: the map was full ([`MAX_KEYS`]).
    pub lost: u64,
    /// Most first.
    pub rows: Vec<DropRow>,
    /// The tracer's own cost: keys in the map and how long reading them
    /// took (every key, one value per possible CPU).
    pub map_keys: usize,
    pub read_ms: f64,
}

impl DropInterval {
    /// Drops per layer, in path order (layers with none left out).
    pub fn by_layer(&self) -> Vec<(Layer, u64)> {
        by_layer(&self.rows)
    }
}

fn by_layer(rows: &[DropRow]) -> Vec<(Layer, u64)> {
    let mut sums: BTreeMap<Layer, u64> = BTreeMap::new();
    for row in rows {
        *sums.entry(row.layer).or_default() += row.count;
    }
    sums.into_iter().collect()
}

/// What is traced and how: the header of a report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceInfo {
    /// `skb:kfree_skb`.
    pub tracepoint: String,
    /// The file the reason names came from.
    pub reasons_from: String,
    /// How many reasons this kernel lists.
    pub kernel_reasons: usize,
    pub scope: Scope,
    pub protocol: Option<Protocol>,
    /// The reasons kept (empty: all).
    pub reasons: Vec<String>,
    /// Whether kernel locations can be named (false when
    /// kernel.kptr_restrict hides addresses).
    pub locations: bool,
    /// Whether packet protocols are read (needs BTF).
    pub protocols: bool,
    /// What is missing or degraded, one line each.
    pub notes: Vec<String>,
}

/// A whole run: the drops from the start to the end, each reason with what
/// it means and its fix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DropsReport {
    pub trace: TraceInfo,
    pub seconds: f64,
    pub total: u64,
    pub per_sec: f64,
    pub lost: u64,
    pub by_layer: Vec<LayerCount>,
    pub rows: Vec<DropRow>,
    /// Reasons of this kernel that nettune cannot place in a layer.
    pub unmapped: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayerCount {
    pub layer: Layer,
    pub count: u64,
}

/// Counts per key and CPU.
type Counts = HashMap<DropKey, Vec<u64>>;

/// A loaded, attached drop tracer. Dropping it detaches and frees
/// everything it put in the kernel.
pub struct DropTracer {
    root: Root,
    reasons: Reasons,
    info: TraceInfo,
    cpus: Vec<u32>,
    counts: PerCpuMap,
    stats: PerCpuMap,
    /// The reason codes kept (empty: all).
    keep: Vec<u32>,
    /// The program, attached; it holds the maps too.
    _attached: Attached,
    /// The counts at the last snapshot.
    prev: Counts,
    prev_lost: u64,
    started: Instant,
    last: Instant,
    /// Symbols of the locations seen so far (`None`: not a text symbol).
    symbols: HashMap<u64, Option<String>>,
}

impl std::fmt::Debug for DropTracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DropTracer")
            .field("info", &self.info)
            .finish()
    }
}

/// The closest names to `wanted` among the kernel's reasons.
fn closest(reasons: &Reasons, wanted: &str) -> Vec<String> {
    let wanted = wanted.to_ascii_uppercase();
    let parts: Vec<&str> = wanted.split('_').filter(|p| p.len() > 2).collect();
    let mut near: Vec<String> = reasons
        .describe()
        .into_iter()
        .map(|r| r.name)
        .filter(|n| parts.iter().any(|p| n.contains(p)))
        .collect();
    near.truncate(5);
    near
}

impl DropTracer {
    /// Check `config`, then load the program and attach it. Bad input is
    /// an error before anything is loaded.
    pub fn open(config: &DropsConfig) -> Result<DropTracer, TraceError> {
        let root = Root::live();
        let mut notes = Vec::new();
        let btf = match read_btf(&root) {
            Ok(btf) => Some(btf),
            Err(why) => {
                notes.push(format!("no BTF: {why}"));
                None
            }
        };
        let reasons = Reasons::read(&root, btf.as_ref()).ok_or_else(|| {
            TraceError::Unsupported(
                "this kernel lists no drop reasons (neither the skb:kfree_skb format in tracefs \
                 nor enum skb_drop_reason in its BTF): Linux 5.17 or later has them"
                    .to_string(),
            )
        })?;
        let mut keep = Vec::new();
        for name in &config.reasons {
            match reasons.code(name) {
                Some(code) => keep.push(code),
                None => {
                    let near = closest(&reasons, name);
                    let hint = if near.is_empty() {
                        String::new()
                    } else {
                        format!(" (close: {})", near.join(", "))
                    };
                    return Err(TraceError::Input(format!(
                        "--reason '{name}' is not one of this kernel's {} drop reasons{hint}; \
                         `nettune trace reasons` lists them",
                        reasons.len()
                    )));
                }
            }
        }
        let needs_fields =
            config.netns.is_some() || config.iface.is_some() || config.protocol.is_some();
        let layout =
            match btf.as_ref().map(DropLayout::read) {
                Some(Ok(layout)) => layout,
                Some(Err(why)) if needs_fields => {
                    return Err(TraceError::Unsupported(format!(
                        "cannot filter by namespace, interface or protocol: {why}"
                    )))
                }
                None if needs_fields => return Err(TraceError::Unsupported(
                    "cannot filter by namespace, interface or protocol without the kernel's BTF \
                     (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF)"
                        .to_string(),
                )),
                Some(Err(why)) => {
                    notes.push(format!("packet protocols are not read: {why}"));
                    DropLayout::without_btf()
                }
                None => DropLayout::without_btf(),
            };
        drop(btf);
        let scope = scope::resolve(config.netns.as_deref(), config.iface.as_deref())?;
        let cpus = possible_cpus(&root)?;
        let counts = PerCpuMap::create(
            bpf::BPF_MAP_TYPE_PERCPU_HASH,
            programs::DROP_KEY_LEN,
            1,
            MAX_KEYS,
            cpus.len(),
            "nettune_drops",
        )
        .map_err(|e| bpf_error("create the drop counters (a BPF map)", e))?;
        let stats = PerCpuMap::create(
            bpf::BPF_MAP_TYPE_PERCPU_ARRAY,
            4,
            1,
            programs::STATS,
            cpus.len(),
            "nettune_dstats",
        )
        .map_err(|e| bpf_error("create the drop counters (a BPF map)", e))?;
        let filter = Filter {
            netns_inum: scope.netns_inode,
            ifindex: scope.ifindex,
        };
        // Typed loads need the fields' offsets; without them there is
        // nothing to load.
        let btf_id = layout.fields.and(layout.btf_id);
        let build =
            |access| programs::drops(&layout, filter, access, counts.raw_fd(), stats.raw_fd());
        let attached = attach_best("kfree_skb", "nettune_drops", btf_id, build, &mut notes)?;
        let info = TraceInfo {
            tracepoint: "skb:kfree_skb".to_string(),
            reasons_from: reasons.source.clone(),
            kernel_reasons: reasons.len(),
            scope,
            protocol: config.protocol,
            reasons: keep.iter().map(|&c| reasons.name(c)).collect(),
            locations: true,
            protocols: layout.fields.is_some(),
            notes,
        };
        let now = Instant::now();
        Ok(DropTracer {
            root,
            reasons,
            info,
            cpus,
            counts,
            stats,
            keep,
            _attached: attached,
            prev: HashMap::new(),
            prev_lost: 0,
            started: now,
            last: now,
            symbols: HashMap::new(),
        })
    }

    pub fn info(&self) -> &TraceInfo {
        &self.info
    }

    /// The kernel's reasons.
    pub fn reasons(&self) -> &Reasons {
        &self.reasons
    }

    /// Every count since the tracer was attached, and the lost drops.
    fn read(&self) -> Result<(Counts, u64), TraceError> {
        let mut counts = Counts::new();
        for (raw, values) in self.counts.all().map_err(TraceError::Read)? {
            let Some(key) = DropKey::decode(&raw) else {
                continue;
            };
            counts.insert(
                key,
                values
                    .iter()
                    .map(|cpu| cpu.first().copied().unwrap_or(0))
                    .collect(),
            );
        }
        let lost = self
            .stats
            .get(&programs::STAT_LOST.to_ne_bytes())
            .map_err(TraceError::Read)?
            .map_or(0, |v: PerCpu| super::maps::sum(&v, 0));
        Ok((counts, lost))
    }

    /// Name the locations not seen before (one pass over /proc/kallsyms
    /// for all of them).
    fn symbolize<'a>(&mut self, keys: impl Iterator<Item = &'a DropKey>) {
        if !self.info.locations {
            return;
        }
        let mut new: Vec<u64> = keys
            .map(|k| k.location)
            .filter(|a| !self.symbols.contains_key(a))
            .collect();
        if new.is_empty() {
            return;
        }
        new.sort_unstable();
        new.dedup();
        match kallsyms::read(&self.root, &new) {
            Ok(Symbols::Found(found)) => {
                for addr in new {
                    self.symbols.insert(addr, found.get(&addr).cloned());
                }
            }
            Ok(Symbols::Hidden) => {
                self.info.locations = false;
                self.info.notes.push(
                    "kernel locations unavailable: /proc/kallsyms hides addresses \
                     (kernel.kptr_restrict)"
                        .to_string(),
                );
            }
            Err(e) => {
                self.info.locations = false;
                self.info
                    .notes
                    .push(format!("kernel locations unavailable: {e}"));
            }
        }
    }

    /// The drops since the last snapshot (or the start).
    pub fn sample(&mut self) -> Result<DropInterval, TraceError> {
        let reading = Instant::now();
        let (counts, lost) = self.read()?;
        let now = Instant::now();
        let read_ms = now.duration_since(reading).as_secs_f64() * 1e3;
        let map_keys = counts.len();
        let seconds = now.duration_since(self.last).as_secs_f64();
        let mut delta = Counts::new();
        for (key, cpus) in &counts {
            let before = self.prev.get(key);
            let d: Vec<u64> = cpus
                .iter()
                .enumerate()
                .map(|(i, &n)| {
                    n.saturating_sub(before.and_then(|b| b.get(i).copied()).unwrap_or(0))
                })
                .collect();
            if d.iter().any(|&n| n > 0) {
                delta.insert(*key, d);
            }
        }
        self.symbolize(delta.keys());
        let rows = self.rows(&delta, seconds, false);
        let lost_delta = lost.saturating_sub(self.prev_lost);
        self.prev = counts;
        self.prev_lost = lost;
        self.last = now;
        let total = rows.iter().map(|r| r.count).sum();
        Ok(DropInterval {
            at_secs: now.duration_since(self.started).as_secs_f64(),
            seconds,
            total,
            per_sec: rate(total, seconds),
            lost: lost_delta,
            rows,
            map_keys,
            read_ms,
        })
    }

    /// Everything since the tracer was attached up to the last snapshot
    /// (so a report is the sum of its snapshots), or up to now when no
    /// snapshot was taken; with advice per reason.
    pub fn totals(&mut self) -> Result<DropsReport, TraceError> {
        let (counts, lost, seconds) = if self.last > self.started {
            (
                self.prev.clone(),
                self.prev_lost,
                self.last.duration_since(self.started).as_secs_f64(),
            )
        } else {
            let (counts, lost) = self.read()?;
            (counts, lost, self.started.elapsed().as_secs_f64())
        };
        self.symbolize(counts.keys());
        let rows = self.rows(&counts, seconds, true);
        let total = rows.iter().map(|r| r.count).sum();
        Ok(DropsReport {
            trace: self.info.clone(),
            seconds,
            total,
            per_sec: rate(total, seconds),
            lost,
            by_layer: by_layer(&rows)
                .into_iter()
                .map(|(layer, count)| LayerCount { layer, count })
                .collect(),
            rows,
            unmapped: self.reasons.unmapped(),
        })
    }

    fn rows(&self, counts: &Counts, seconds: f64, advice: bool) -> Vec<DropRow> {
        let location = |addr: u64| -> Option<String> {
            if !self.info.locations {
                return None;
            }
            match self.symbols.get(&addr) {
                Some(Some(name)) => Some(name.clone()),
                _ => Some(format!("{addr:#x}")),
            }
        };
        let keep = |k: &DropKey| {
            (self.keep.is_empty() || self.keep.contains(&k.reason))
                && self
                    .info
                    .protocol
                    .is_none_or(|p| p.matches(k.ethertype, k.l4))
        };
        build_rows(
            counts.iter().filter(|(k, _)| keep(k)),
            &self.cpus,
            |code| self.reasons.name(code),
            location,
            seconds,
            advice,
        )
    }
}

fn rate(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

/// Group per-key, per-CPU counts into rows by (reason, layer), most first.
pub fn build_rows<'a>(
    counts: impl Iterator<Item = (&'a DropKey, &'a Vec<u64>)>,
    cpus: &[u32],
    name: impl Fn(u32) -> String,
    location: impl Fn(u64) -> Option<String>,
    seconds: f64,
    advice: bool,
) -> Vec<DropRow> {
    #[derive(Default)]
    struct Acc {
        code: u32,
        count: u64,
        cpus: BTreeMap<u32, u64>,
        locations: BTreeMap<Option<String>, u64>,
        protocols: BTreeMap<String, u64>,
    }
    let mut groups: BTreeMap<(String, Layer), Acc> = BTreeMap::new();
    for (key, per_cpu) in counts {
        let total: u64 = per_cpu.iter().sum();
        if total == 0 {
            continue;
        }
        let reason = name(key.reason);
        let layer = catalog::entry(&reason).place.layer(key.ethertype, key.l4);
        let acc = groups.entry((reason, layer)).or_default();
        acc.code = key.reason;
        acc.count += total;
        for (i, &n) in per_cpu.iter().enumerate() {
            if n > 0 {
                let cpu = cpus.get(i).copied().unwrap_or(i as u32);
                *acc.cpus.entry(cpu).or_default() += n;
            }
        }
        *acc.locations.entry(location(key.location)).or_default() += total;
        *acc.protocols
            .entry(protocol_name(key.ethertype, key.l4))
            .or_default() += total;
    }
    fn most_first<K: Clone, T>(map: BTreeMap<K, u64>, make: impl Fn(K, u64) -> T) -> Vec<T> {
        let mut pairs: Vec<(K, u64)> = map.into_iter().collect();
        // Stable: equal counts keep the key order.
        pairs.sort_by_key(|p| std::cmp::Reverse(p.1));
        pairs.into_iter().map(|(k, n)| make(k, n)).collect()
    }
    let mut rows: Vec<DropRow> = groups
        .into_iter()
        .map(|((reason, layer), acc)| DropRow {
            advice: advice.then(|| Advice::of(&reason)),
            reason,
            code: acc.code,
            layer,
            count: acc.count,
            per_sec: rate(acc.count, seconds),
            cpus: most_first(acc.cpus, |cpu, count| CpuCount { cpu, count }),
            locations: most_first(acc.locations, |location, count| LocationCount {
                location,
                count,
            }),
            protocols: most_first(acc.protocols, |protocol, count| ProtocolCount {
                protocol,
                count,
            }),
        })
        .collect();
    rows.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
    rows
}

impl super::Tracer for DropTracer {
    type Interval = DropInterval;
    type Report = DropsReport;

    fn sample(&mut self) -> Result<DropInterval, TraceError> {
        DropTracer::sample(self)
    }

    fn totals(&mut self) -> Result<DropsReport, TraceError> {
        DropTracer::totals(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(location: u64, reason: u32, ethertype: u16, l4: u8) -> DropKey {
        DropKey {
            location,
            reason,
            ethertype,
            l4,
        }
    }

    #[test]
    fn keys_decode_as_the_program_writes_them() {
        let mut raw = Vec::new();
        raw.extend_from_slice(&0xffff_ffff_81b2_d395u64.to_ne_bytes());
        raw.extend_from_slice(&6u32.to_ne_bytes());
        raw.extend_from_slice(&[0x08, 0x00, 17, 0]);
        assert_eq!(
            DropKey::decode(&raw),
            Some(key(0xffff_ffff_81b2_d395, 6, ETH_P_IP, 17))
        );
        assert_eq!(DropKey::decode(&raw[..10]), None);
    }

    #[test]
    fn rows_group_by_reason_and_layer_most_first() {
        let counts: Counts = [
            (key(0x10, 6, ETH_P_IP, 17), vec![300, 100]),
            (key(0x20, 6, ETH_P_IPV6, 17), vec![0, 5]),
            (key(0x30, 3, ETH_P_IP, 17), vec![10, 0]),
            (key(0x40, 3, ETH_P_IP, 6), vec![2, 0]),
            (key(0x50, 71, ETH_P_IP, 17), vec![0, 0]),
        ]
        .into_iter()
        .collect();
        let names = |c: u32| match c {
            3 => "NO_SOCKET".to_string(),
            6 => "SOCKET_RCVBUFF".to_string(),
            _ => format!("REASON_{c}"),
        };
        let rows = build_rows(
            counts.iter(),
            &[0, 1],
            names,
            |a| Some(format!("f+{a:#x}")),
            2.0,
            true,
        );
        let summary: Vec<(&str, Layer, u64)> = rows
            .iter()
            .map(|r| (r.reason.as_str(), r.layer, r.count))
            .collect();
        assert_eq!(
            summary,
            [
                ("SOCKET_RCVBUFF", Layer::Udp, 400),
                ("NO_SOCKET", Layer::Udp, 10),
                ("SOCKET_RCVBUFF", Layer::Udp6, 5),
                ("NO_SOCKET", Layer::Tcp, 2),
            ]
        );
        assert_eq!(rows[0].per_sec, 200.0);
        assert_eq!(
            rows[0].cpus,
            [
                CpuCount { cpu: 0, count: 300 },
                CpuCount { cpu: 1, count: 100 }
            ]
        );
        assert_eq!(rows[0].locations[0].location.as_deref(), Some("f+0x10"));
        assert_eq!(rows[0].protocols[0].protocol, "udp");
        assert!(rows[0].advice.as_ref().is_some_and(|a| a.fix.is_some()));
        // Without advice (intervals), none is attached.
        let lean = build_rows(counts.iter(), &[0, 1], names, |_| None, 1.0, false);
        assert!(lean.iter().all(|r| r.advice.is_none()));
        assert_eq!(lean[0].locations[0].location, None);
    }

    #[test]
    fn protocols_filter_and_name() {
        assert!(Protocol::Udp.matches(ETH_P_IPV6, 17));
        assert!(!Protocol::Udp.matches(ETH_P_ARP, 17));
        assert!(Protocol::Icmp.matches(ETH_P_IP, 1));
        assert!(!Protocol::Icmp.matches(ETH_P_IPV6, 1));
        assert_eq!(protocol_name(ETH_P_IP, 17), "udp");
        assert_eq!(protocol_name(ETH_P_IP, 47), "ipv4");
        assert_eq!(protocol_name(0x88cc, 0), "0x88cc");
        assert_eq!(protocol_name(0, 0), "unknown");
    }
}
