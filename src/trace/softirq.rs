//! Where the receive path spends its time: per CPU, NET_RX softirq runs,
//! the wait from raise to entry (how long the softirq waited: the delay
//! of ksoftirqd, or of a CPU busy with something else) and the run time
//! as log2 histograms; per NAPI instance, the polls, packets per poll and
//! the share of polls that used the whole budget (the "squeeze" that
//! softnet's time_squeeze counts per CPU).

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use serde::Serialize;

use super::drops::CpuCount;
use super::layout::NapiLayout;
use super::maps::{PerCpu, PerCpuMap};
use super::programs::{self, *};
use super::scope::{self, Scope};
use super::{attach, attach_best, bpf_error, possible_cpus, read_btf, Attached, TraceError};
use crate::base::bpf::{self, btf::Btf};
use crate::base::driver::netdev::Netdev as _;
use crate::base::Root;

/// NAPI instances the map holds.
pub const MAX_NAPIS: usize = 4096;
/// The softirq vectors as tracefs prints them, a fallback without BTF.
const SOFTIRQ_FORMATS: [&str; 2] = [
    "/sys/kernel/tracing/events/irq/softirq_raise/format",
    "/sys/kernel/debug/tracing/events/irq/softirq_raise/format",
];

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SoftirqConfig {
    /// Only NAPI instances of this namespace's devices (the CPU figures
    /// are the whole host's).
    pub netns: Option<String>,
    /// Only NAPI instances of this interface.
    pub iface: Option<String>,
}

/// A log2 histogram of nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Histogram {
    pub count: u64,
    pub mean_ns: Option<f64>,
    /// Upper bounds of the buckets that hold the median, the 99th
    /// percentile and the largest value (within a factor of two).
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub max_ns: Option<u64>,
    /// Non-empty buckets: [from_ns, to_ns).
    pub buckets: Vec<Bucket>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bucket {
    pub from_ns: u64,
    pub to_ns: u64,
    pub count: u64,
}

impl Histogram {
    /// From per-bucket counts (bucket b: [2^b, 2^(b+1)), bucket 0 also 0)
    /// and the sum of the values.
    pub fn from_buckets(counts: &[u64], sum_ns: u64) -> Histogram {
        let count: u64 = counts.iter().sum();
        let upper = |b: usize| 1u64.checked_shl(b as u32 + 1).unwrap_or(u64::MAX);
        let at = |q: f64| -> Option<u64> {
            if count == 0 {
                return None;
            }
            let want = ((count as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0;
            counts.iter().enumerate().find_map(|(b, &n)| {
                seen += n;
                (seen >= want).then(|| upper(b))
            })
        };
        Histogram {
            count,
            mean_ns: (count > 0).then(|| sum_ns as f64 / count as f64),
            p50_ns: at(0.5),
            p99_ns: at(0.99),
            max_ns: counts.iter().rposition(|&n| n > 0).map(upper),
            buckets: counts
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(b, &n)| Bucket {
                    from_ns: if b == 0 { 0 } else { 1 << b },
                    to_ns: upper(b),
                    count: n,
                })
                .collect(),
        }
    }
}

/// One CPU's NET_RX softirq over an interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuSoftirq {
    pub cpu: u32,
    pub raises: u64,
    pub runs: u64,
    pub runs_per_sec: f64,
    /// The share of the interval this CPU spent running NET_RX (0 to 1).
    pub busy: f64,
    /// From raise to entry.
    pub wait: Histogram,
    /// From entry to exit.
    pub run: Histogram,
}

/// One NAPI instance over an interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NapiRow {
    /// 0 for a CPU's backlog (RPS, devices without NAPI).
    pub napi_id: u32,
    /// The device (`backlog` for the backlog).
    pub device: String,
    pub ifindex: u32,
    /// The RX queue it serves, where the netdev family says (or by
    /// position on veth); `None` elsewhere.
    pub queue: Option<u32>,
    pub netns_inode: Option<u32>,
    pub polls: u64,
    pub packets: u64,
    pub packets_per_poll: Option<f64>,
    /// Polls that processed their whole budget: the device had more.
    pub full_budget_polls: u64,
    pub full_budget_share: Option<f64>,
    pub cpus: Vec<CpuCount>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SoftirqInterval {
    pub at_secs: f64,
    pub seconds: f64,
    pub cpus: Vec<CpuSoftirq>,
    /// Most polls first.
    pub napis: Vec<NapiRow>,
}

/// What is traced: the header of a report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SoftirqInfo {
    pub tracepoints: Vec<String>,
    /// The NET_RX vector number and where it was read.
    pub net_rx: u32,
    pub scope: Scope,
    /// Whether the NAPI view runs (needs BTF).
    pub napi: bool,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SoftirqReport {
    pub trace: SoftirqInfo,
    #[serde(flatten)]
    pub whole: SoftirqInterval,
}

/// A NAPI map key, decoded.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct NapiKey {
    id: u32,
    ifindex: u32,
    netns: u32,
    name: String,
}

impl NapiKey {
    fn decode(raw: &[u8]) -> Option<NapiKey> {
        let word = |at: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(raw.get(at..at + 4)?.try_into().ok()?))
        };
        let name = raw.get(16..32)?;
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        Some(NapiKey {
            id: word(0)?,
            ifindex: word(4)?,
            netns: word(8)?,
            name: String::from_utf8_lossy(&name[..end]).into_owned(),
        })
    }
}

/// Counts at the last snapshot.
#[derive(Debug, Default, Clone)]
struct Readings {
    state: PerCpu,
    napis: HashMap<NapiKey, PerCpu>,
}

/// A loaded, attached softirq and NAPI tracer; dropping it detaches and
/// frees everything.
pub struct SoftirqTracer {
    info: SoftirqInfo,
    cpus: Vec<u32>,
    state: PerCpuMap,
    napis: Option<PerCpuMap>,
    _attached: Vec<Attached>,
    /// This process's namespace inode: queues are looked up there.
    own_netns: Option<u32>,
    /// NAPI id -> RX queue, from the netdev family.
    queues: HashMap<u32, Option<u32>>,
    prev: Readings,
    first: Readings,
    started: Instant,
    last: Instant,
}

impl std::fmt::Debug for SoftirqTracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SoftirqTracer")
            .field("info", &self.info)
            .finish()
    }
}

/// NET_RX's vector: from BTF, else from tracefs's softirq format.
fn net_rx(root: &Root, btf: Option<&Btf>) -> Option<u32> {
    if let Some(v) = btf.and_then(|b| b.enumerator("NET_RX_SOFTIRQ")) {
        return u32::try_from(v).ok();
    }
    SOFTIRQ_FORMATS.iter().find_map(|path| {
        let text = root.read_optional(path).ok()??;
        let at = text.find("\"NET_RX\"")?;
        let open = text[..at].rfind('{')?;
        text[open + 1..at]
            .trim()
            .trim_end_matches(',')
            .trim()
            .parse()
            .ok()
    })
}

impl SoftirqTracer {
    pub fn open(config: &SoftirqConfig) -> Result<SoftirqTracer, TraceError> {
        let root = Root::live();
        let mut notes = Vec::new();
        let btf = match read_btf(&root) {
            Ok(btf) => Some(btf),
            Err(why) => {
                notes.push(format!("no NAPI view: {why}"));
                None
            }
        };
        let vector = net_rx(&root, btf.as_ref()).ok_or_else(|| {
            TraceError::Unsupported(
                "cannot tell the NET_RX softirq's number: neither the kernel's BTF nor tracefs \
                 lists it"
                    .to_string(),
            )
        })?;
        let napi_layout = match btf.as_ref().map(NapiLayout::read) {
            Some(Ok(layout)) => Some(layout),
            Some(Err(why)) => {
                notes.push(format!("no NAPI view: {why}"));
                None
            }
            None => None,
        };
        if napi_layout.is_none() && (config.netns.is_some() || config.iface.is_some()) {
            return Err(TraceError::Unsupported(
                "--netns and --iface choose NAPI instances, and this kernel's NAPI view is \
                 unavailable (it reads kernel structures through BTF)"
                    .to_string(),
            ));
        }
        drop(btf);
        let scope = scope::resolve(config.netns.as_deref(), config.iface.as_deref())?;
        let cpus = possible_cpus(&root)?;
        let state = PerCpuMap::create(
            bpf::BPF_MAP_TYPE_PERCPU_ARRAY,
            4,
            SOFTIRQ_WORDS,
            1,
            cpus.len(),
            "nettune_softirq",
        )
        .map_err(|e| bpf_error("create the softirq counters (a BPF map)", e))?;
        let napis = match &napi_layout {
            Some(_) => Some(
                PerCpuMap::create(
                    bpf::BPF_MAP_TYPE_PERCPU_HASH,
                    NAPI_KEY_LEN,
                    NAPI_WORDS,
                    MAX_NAPIS,
                    cpus.len(),
                    "nettune_napi",
                )
                .map_err(|e| bpf_error("create the NAPI counters (a BPF map)", e))?,
            ),
            None => None,
        };
        let asm = |what: &str, r: Result<Vec<u64>, String>| {
            r.map_err(|e| {
                TraceError::Unsupported(format!("cannot assemble the {what} program: {e}"))
            })
        };
        let fd = state.raw_fd();
        // These read nothing but their argument: raw tracepoints do.
        let mut attached = vec![
            attach(
                "softirq_raise",
                "nettune_sraise",
                &asm("softirq", programs::softirq_raise(vector, fd))?,
                None,
            )?,
            attach(
                "softirq_entry",
                "nettune_sentry",
                &asm("softirq", programs::softirq_entry(vector, fd))?,
                None,
            )?,
            attach(
                "softirq_exit",
                "nettune_sexit",
                &asm("softirq", programs::softirq_exit(vector, fd))?,
                None,
            )?,
        ];
        let mut tracepoints = vec![
            "irq:softirq_raise".to_string(),
            "irq:softirq_entry".to_string(),
            "irq:softirq_exit".to_string(),
        ];
        if let (Some(layout), Some(map)) = (&napi_layout, &napis) {
            let build =
                |access| programs::napi_poll(layout, scope.netns_inode, access, map.raw_fd());
            attached.push(attach_best(
                "napi_poll",
                "nettune_napi",
                layout.btf_id,
                build,
                &mut notes,
            )?);
            tracepoints.push("napi:napi_poll".to_string());
        }
        let own_netns = std::fs::File::open("/proc/thread-self/ns/net")
            .and_then(|f| f.metadata())
            .ok()
            .and_then(|m| u32::try_from(std::os::unix::fs::MetadataExt::ino(&m)).ok());
        let now = Instant::now();
        let mut tracer = SoftirqTracer {
            info: SoftirqInfo {
                tracepoints,
                net_rx: vector,
                scope,
                napi: napis.is_some(),
                notes,
            },
            cpus,
            state,
            napis,
            _attached: attached,
            own_netns,
            queues: HashMap::new(),
            prev: Readings::default(),
            first: Readings::default(),
            started: now,
            last: now,
        };
        // The softirq state starts at zero; keep the first reading so the
        // report's histograms are the run's.
        tracer.first = tracer.read()?;
        tracer.prev = tracer.first.clone();
        Ok(tracer)
    }

    pub fn info(&self) -> &SoftirqInfo {
        &self.info
    }

    fn read(&self) -> Result<Readings, TraceError> {
        let state = self
            .state
            .get(&0u32.to_ne_bytes())
            .map_err(TraceError::Read)?
            .unwrap_or_default();
        let mut napis = HashMap::new();
        if let Some(map) = &self.napis {
            for (raw, values) in map.all().map_err(TraceError::Read)? {
                if let Some(key) = NapiKey::decode(&raw) {
                    napis.insert(key, values);
                }
            }
        }
        Ok(Readings { state, napis })
    }

    /// Find the RX queue of NAPI ids not seen before, through the netdev
    /// family, for devices of the namespace this tracer can ask.
    fn learn_queues<'a>(&mut self, keys: impl Iterator<Item = &'a NapiKey>) {
        let ask_in = self.info.scope.netns.clone();
        let askable = self.info.scope.netns_inode.or(self.own_netns);
        let mut devices: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for key in keys {
            if key.id == 0 || self.queues.contains_key(&key.id) {
                continue;
            }
            if Some(key.netns) == askable {
                devices.entry(key.name.clone()).or_default().push(key.id);
            } else {
                self.queues.insert(key.id, None);
            }
        }
        for (device, ids) in devices {
            let found = crate::base::netns::within(ask_in.as_deref(), || {
                let state = crate::nic::live::LiveNetdev.state(&device);
                let rx = match &state.queues {
                    crate::base::Probe::Value(q) => q
                        .iter()
                        .filter(|q| q.direction == "rx")
                        .map(|q| q.index)
                        .collect::<Vec<_>>(),
                    _ => Vec::new(),
                };
                Ok(rx
                    .into_iter()
                    .filter_map(|q| state.napi_of_rx(q).ok().map(|n| (n.napi.id, q)))
                    .collect::<HashMap<u32, u32>>())
            })
            .unwrap_or_default();
            for id in ids {
                self.queues.insert(id, found.get(&id).copied());
            }
        }
    }

    fn interval(&mut self, from: &Readings, to: &Readings, seconds: f64) -> SoftirqInterval {
        let word = |r: &Readings, cpu: usize, w: usize| -> u64 {
            r.state
                .get(cpu)
                .and_then(|c| c.get(w))
                .copied()
                .unwrap_or(0)
        };
        let diff = |cpu: usize, w: usize| word(to, cpu, w).saturating_sub(word(from, cpu, w));
        let cpus = self
            .cpus
            .iter()
            .enumerate()
            .map(|(i, &cpu)| {
                let hist = |first: usize| -> Vec<u64> {
                    (first..first + BUCKETS).map(|w| diff(i, w)).collect()
                };
                let runs = diff(i, SOFTIRQ_RUNS);
                let run_ns = diff(i, SOFTIRQ_RUN_NS);
                CpuSoftirq {
                    cpu,
                    raises: diff(i, SOFTIRQ_RAISES),
                    runs,
                    runs_per_sec: if seconds > 0.0 {
                        runs as f64 / seconds
                    } else {
                        0.0
                    },
                    busy: if seconds > 0.0 {
                        (run_ns as f64 / 1e9 / seconds).min(1.0)
                    } else {
                        0.0
                    },
                    wait: Histogram::from_buckets(
                        &hist(SOFTIRQ_WAIT_HIST),
                        diff(i, SOFTIRQ_WAIT_NS),
                    ),
                    run: Histogram::from_buckets(&hist(SOFTIRQ_RUN_HIST), run_ns),
                }
            })
            .collect();
        let moved: Vec<(&NapiKey, Vec<Vec<u64>>)> = to
            .napis
            .iter()
            .map(|(key, now)| {
                let before = from.napis.get(key);
                let d = now
                    .iter()
                    .enumerate()
                    .map(|(c, words)| {
                        words
                            .iter()
                            .enumerate()
                            .map(|(w, &n)| {
                                n.saturating_sub(
                                    before.and_then(|b| b.get(c)?.get(w).copied()).unwrap_or(0),
                                )
                            })
                            .collect()
                    })
                    .collect();
                (key, d)
            })
            .filter(|(_, d): &(&NapiKey, Vec<Vec<u64>>)| super::maps::sum(d, NAPI_POLLS) > 0)
            .collect();
        self.learn_queues(moved.iter().map(|(k, _)| *k));
        let mut napis: Vec<NapiRow> = moved
            .into_iter()
            .map(|(key, d)| {
                let polls = super::maps::sum(&d, NAPI_POLLS);
                let packets = super::maps::sum(&d, NAPI_PACKETS);
                let full = super::maps::sum(&d, NAPI_FULL);
                let mut cpus: Vec<CpuCount> = d
                    .iter()
                    .enumerate()
                    .filter_map(|(c, w)| {
                        let n = w.get(NAPI_POLLS).copied().unwrap_or(0);
                        (n > 0).then(|| CpuCount {
                            cpu: self.cpus.get(c).copied().unwrap_or(c as u32),
                            count: n,
                        })
                    })
                    .collect();
                cpus.sort_by_key(|c| std::cmp::Reverse(c.count));
                NapiRow {
                    napi_id: key.id,
                    device: if key.name.is_empty() {
                        "backlog".to_string()
                    } else {
                        key.name.clone()
                    },
                    ifindex: key.ifindex,
                    queue: self.queues.get(&key.id).copied().flatten(),
                    netns_inode: (key.netns != 0).then_some(key.netns),
                    polls,
                    packets,
                    packets_per_poll: (polls > 0).then(|| packets as f64 / polls as f64),
                    full_budget_polls: full,
                    full_budget_share: (polls > 0).then(|| full as f64 / polls as f64),
                    cpus,
                }
            })
            .filter(|row| {
                self.info
                    .scope
                    .ifindex
                    .is_none_or(|want| row.ifindex == want)
            })
            .collect();
        napis.sort_by(|a, b| b.polls.cmp(&a.polls).then(a.napi_id.cmp(&b.napi_id)));
        SoftirqInterval {
            at_secs: self.started.elapsed().as_secs_f64(),
            seconds,
            cpus,
            napis,
        }
    }

    /// The softirq time and NAPI polls since the last snapshot.
    pub fn sample(&mut self) -> Result<SoftirqInterval, TraceError> {
        let now = self.read()?;
        let read_at = Instant::now();
        let seconds = read_at.duration_since(self.last).as_secs_f64();
        self.last = read_at;
        let prev = std::mem::replace(&mut self.prev, now.clone());
        Ok(self.interval(&prev, &now, seconds))
    }

    /// Everything since the tracer was attached up to the last snapshot
    /// (or now, when none was taken).
    pub fn totals(&mut self) -> Result<SoftirqReport, TraceError> {
        let (now, seconds) = if self.last > self.started {
            (
                self.prev.clone(),
                self.last.duration_since(self.started).as_secs_f64(),
            )
        } else {
            (self.read()?, self.started.elapsed().as_secs_f64())
        };
        let first = self.first.clone();
        let whole = self.interval(&first, &now, seconds);
        Ok(SoftirqReport {
            trace: self.info.clone(),
            whole,
        })
    }
}

impl super::Tracer for SoftirqTracer {
    type Interval = SoftirqInterval;
    type Report = SoftirqReport;

    fn sample(&mut self) -> Result<SoftirqInterval, TraceError> {
        SoftirqTracer::sample(self)
    }

    fn totals(&mut self) -> Result<SoftirqReport, TraceError> {
        SoftirqTracer::totals(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_give_bucket_bounds() {
        let mut counts = vec![0u64; BUCKETS];
        counts[10] = 90; // [1024, 2048) ns
        counts[20] = 10; // [~1 ms, ~2 ms)
        let h = Histogram::from_buckets(&counts, 90 * 1500 + 10 * 1_500_000);
        assert_eq!(h.count, 100);
        assert_eq!(h.p50_ns, Some(2048));
        assert_eq!(h.p99_ns, Some(2 << 20));
        assert_eq!(h.max_ns, Some(2 << 20));
        assert_eq!(h.buckets.len(), 2);
        assert_eq!((h.buckets[0].from_ns, h.buckets[0].to_ns), (1024, 2048));
        let empty = Histogram::from_buckets(&[0; BUCKETS], 0);
        assert_eq!(
            (empty.p50_ns, empty.mean_ns, empty.max_ns),
            (None, None, None)
        );
        // The last bucket's bound does not overflow.
        let mut top = vec![0u64; BUCKETS];
        top[63] = 1;
        assert_eq!(Histogram::from_buckets(&top, 0).max_ns, Some(u64::MAX));
    }

    #[test]
    fn napi_keys_decode() {
        let mut raw = vec![0u8; NAPI_KEY_LEN];
        raw[0..4].copy_from_slice(&8193u32.to_ne_bytes());
        raw[4..8].copy_from_slice(&3u32.to_ne_bytes());
        raw[8..12].copy_from_slice(&4026531840u32.to_ne_bytes());
        raw[16..20].copy_from_slice(b"eth0");
        let key = NapiKey::decode(&raw).expect("key");
        assert_eq!(
            (key.id, key.ifindex, key.netns, key.name.as_str()),
            (8193, 3, 4026531840, "eth0")
        );
        assert!(NapiKey::decode(&raw[..20]).is_none());
    }
}
