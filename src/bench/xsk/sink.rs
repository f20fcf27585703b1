//! The AF_XDP sink's steps: load (check, maps, program, socket), attach,
//! receive, detach.

use std::os::fd::OwnedFd;
use std::time::Duration;

use anyhow::Context as _;

use super::packet;
use super::program::{self, Maps, PASSED, REDIRECTED};
use super::socket::Xsk;
use super::{ProgramCounts, ProgramInfo, XskBusyPoll, XskReport, XskSinkConfig, PROGRAM_NAME};
use crate::base::bpf;
use crate::base::driver::xdp::{XdpMode, XdpProgram};
use crate::base::observe::Observer;
use crate::base::stop::Stop;
use crate::bench::busy_poll;
use crate::bench::cpu;
use crate::bench::harness::{self, Phase, Placement, Timeline};
use crate::bench::netns;
use crate::bench::pin::Pinning;
use crate::bench::report::{self, Interval, IntervalMeter, LiveCounter};
use crate::bench::traffic::{rate_window, traffic_seconds, TrafficClock, FIRST_WAIT};
use crate::bench::udp::{summarize, FlowTable, Meter};
use crate::nic::live::xdp_link::{self, Detached};

/// The license string the kernel reads to allow GPL-only helpers: the
/// program is nettune's (MIT/Apache-2.0) and GPL-compatible.
const LICENSE: &str = "Dual MIT/GPL";
/// How long the reader sleeps in poll when the ring is empty, once traffic
/// came: the bound on how late it sees the end of the run.
const POLL_MS: i32 = 50;
/// The same before the first packet: short, so that the traffic's start is
/// known to within a few ms ([`TrafficClock`]).
const FIRST_POLL_MS: i32 = FIRST_WAIT.as_millis() as i32;
/// How long [`Attached::rebind`] waits for the queue the first socket held.
const REBIND_TRIES: u32 = 200;
const REBIND_PAUSE: Duration = Duration::from_millis(10);

/// Program loaded and socket open; nothing attached yet.
pub struct Loaded {
    config: XskSinkConfig,
    ifindex: u32,
    prog: OwnedFd,
    info: ProgramInfo,
    counters: OwnedFd,
    /// Kept open: the XSKMAP holds the socket, the program the map.
    xsks: OwnedFd,
    /// The socket; `None` only while [`Attached::rebind`] replaces it.
    xsk: Option<Xsk>,
    pinning: Pinning,
}

/// Check the interface and queue, load the program and open the socket,
/// inside the config's network namespace. Errors name the interface,
/// queue or flow and leave nothing behind.
pub fn load(config: XskSinkConfig) -> anyhow::Result<Loaded> {
    config.validate()?;
    let pinning = Pinning::new(config.pin.into_iter().collect(), &crate::base::Root::live())?;
    let place = config
        .netns
        .as_deref()
        .map(|ns| format!(" in network namespace '{ns}'"))
        .unwrap_or_default();
    netns::within(config.netns.as_deref(), || {
        let iface = &config.iface;
        let ifindex = nix::net::if_::if_nametoindex(iface.as_str()).map_err(|_| {
            anyhow::anyhow!(
                "--iface '{iface}': no such interface{place} (`ip -br link` lists them)"
            )
        })?;
        let link = xdp_link::query(ifindex)
            .map_err(|e| anyhow::anyhow!("cannot read the XDP state of '{iface}': {e}"))?;
        let queues = link.rx_queues.unwrap_or(1);
        if config.queue >= queues {
            anyhow::bail!(
                "--queue {}: '{iface}' has {}; nothing was attached",
                config.queue,
                crate::base::driver::flow::queues_text(queues)
            );
        }
        refuse_taken_or_unsupported(iface, ifindex, config.attach, &link.programs)?;
        let xsks = bpf::map_create(bpf::BPF_MAP_TYPE_XSKMAP, 4, 4, queues, "nettune_xsks")
            .context("cannot create the XSKMAP (BPF_MAP_CREATE needs root)")?;
        let counters = bpf::map_create(bpf::BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 2, "nettune_count")
            .context("cannot create the program's counters")?;
        let insns = program::build(
            config.queue,
            &config.flow,
            Maps {
                xsks: std::os::fd::AsRawFd::as_raw_fd(&xsks),
                counters: std::os::fd::AsRawFd::as_raw_fd(&counters),
            },
        )
        .map_err(|e| anyhow::anyhow!("cannot assemble the XDP program: {e}"))?;
        let prog = bpf::prog_load_xdp(&insns, PROGRAM_NAME, LICENSE)?;
        let loaded = bpf::prog_info(&prog).context("cannot read the loaded program's id")?;
        let xsk = Xsk::open(ifindex, config.queue, config.copy, config.ring).map_err(|e| {
            anyhow::anyhow!(
                "cannot open an AF_XDP socket on '{iface}' queue {}{}: {e}",
                config.queue,
                match config.copy {
                    Some(super::CopyMode::ZeroCopy) =>
                        " in zero-copy mode (the driver may not support it; leave --xdp-copy at auto)",
                    _ => "",
                }
            )
        })?;
        config.busy.apply_options(xsk.fd()).map_err(|e| {
            anyhow::anyhow!("cannot set busy polling on the AF_XDP socket of '{iface}': {e:#}")
        })?;
        bpf::map_update_u32(&xsks, config.queue, xsk.raw_fd() as u32)
            .context("cannot put the AF_XDP socket in the XSKMAP")?;
        let info = ProgramInfo {
            iface: iface.clone(),
            id: loaded.id,
            name: loaded.name,
            mode: config.attach,
        };
        Ok(Loaded {
            config: config.clone(),
            ifindex,
            prog,
            info,
            counters,
            xsks,
            xsk: Some(xsk),
            pinning,
        })
    })
}

/// Refuse an interface that already has a program in that mode (nettune
/// never replaces another program) or whose driver lacks native XDP.
fn refuse_taken_or_unsupported(
    iface: &str,
    ifindex: u32,
    mode: XdpMode,
    programs: &[XdpProgram],
) -> anyhow::Result<()> {
    if let Some(p) = programs.iter().find(|p| p.mode == mode) {
        anyhow::bail!(
            "'{iface}' already has an XDP program in {} mode (id {}{}): nettune does not replace \
             another program; remove it first (`nettune rollback` if nettune left it, or the tool \
             that attached it); nothing was attached",
            mode.name(),
            p.id,
            p.name
                .as_deref()
                .map(|n| format!(", {n}"))
                .unwrap_or_default()
        );
    }
    if mode == XdpMode::Native {
        if let crate::base::Probe::Value(f) = crate::nic::live::xdp_features(ifindex) {
            if !f.native() {
                anyhow::bail!(
                    "'{iface}' has no native XDP (its driver's xdp-features: {}); run with \
                     --xdp-mode generic (slower: after the kernel builds the packet's skb); \
                     nothing was attached",
                    if f.actions.is_empty() {
                        "none".to_string()
                    } else {
                        f.actions.join(", ")
                    }
                );
            }
        }
    }
    Ok(())
}

impl Loaded {
    /// The program, as it should be recorded before attaching.
    pub fn program(&self) -> &ProgramInfo {
        &self.info
    }

    pub fn config(&self) -> &XskSinkConfig {
        &self.config
    }

    /// Attach the program; from here on, dropping the result detaches it.
    pub fn attach(self) -> anyhow::Result<Attached> {
        let mode = self.config.attach;
        let iface = self.config.iface.clone();
        netns::within(self.config.netns.as_deref(), || {
            xdp_link::attach(&iface, &self.prog, mode).map_err(|e| {
                let hint = match e.errno {
                    libc::EOPNOTSUPP => {
                        " (the driver has no native XDP: run with --xdp-mode generic)"
                    }
                    libc::EBUSY | libc::EEXIST => " (another XDP program is attached)",
                    _ => "",
                };
                anyhow::anyhow!(
                    "cannot attach the XDP program to '{iface}' in {} mode: {e}{hint}; nothing was \
                     attached",
                    mode.name()
                )
            })
        })?;
        let mut attached = Attached {
            loaded: self,
            attached: true,
        };
        if attached.loaded.config.busy.is_on() {
            // From here on an error drops `attached`, which detaches.
            attached.rebind()?;
        }
        Ok(attached)
    }
}

/// The program attached and the socket open.
pub struct Attached {
    loaded: Loaded,
    attached: bool,
}

impl Drop for Attached {
    fn drop(&mut self) {
        let _ = self.detach();
    }
}

impl Attached {
    pub fn program(&self) -> &ProgramInfo {
        &self.loaded.info
    }

    /// Detach the program (only if it is still the one attached there);
    /// once done, later calls do nothing.
    pub fn detach(&mut self) -> anyhow::Result<Detached> {
        if !self.attached {
            return Ok(Detached::NotAttached);
        }
        let (iface, id, mode) = (
            self.loaded.info.iface.clone(),
            self.loaded.info.id,
            self.loaded.info.mode,
        );
        let done = netns::within(self.loaded.config.netns.as_deref(), || {
            xdp_link::detach_expected(&iface, id, mode)
                .map_err(|e| anyhow::anyhow!("cannot detach XDP program {id} from '{iface}': {e}"))
        })?;
        self.attached = false;
        Ok(done)
    }

    /// Receive until the duration or `stop`; the observer gets the ready
    /// line and one interval per second. The program stays attached (drop
    /// or [`Attached::detach`] removes it).
    pub fn run(
        &mut self,
        stop: &Stop,
        observer: &mut dyn Observer<Interval>,
    ) -> anyhow::Result<XskReport> {
        let config = self.loaded.config.clone();
        let info = self.loaded.info.clone();
        let (socket_mode, ring) = {
            let xsk = self.socket()?;
            (xsk.mode, xsk.ring)
        };
        observer.ready(
            None,
            &format!(
                "reading {} queue {} through AF_XDP ({} mode, rings of {}), XDP program {} id {} \
                 ({}); flow {}{}",
                config.iface,
                config.queue,
                socket_mode.name(),
                ring,
                info.name,
                info.id,
                info.mode.name(),
                config.flow,
                if config.busy.is_on() {
                    format!("; busy polling: {}", busy_header(&config.busy))
                } else {
                    String::new()
                }
            ),
        );
        let possible = crate::host::possible_cpus(&crate::base::Root::live())
            .map(|c| c.len())
            .unwrap_or(1);
        let counts_before = self.program_counts(possible);
        let stats_before = self.socket()?.stats().unwrap_or_default();
        let softirq_before = cpu::softirq_seconds();
        let live = [LiveCounter::default()];
        let mut control = Meter {
            meter: IntervalMeter::new(1),
            live: &live,
            observer,
        };
        let pinning = self.loaded.pinning.clone();
        let batch = config.batch;
        let busy = config.busy.is_on();
        let xsk = self
            .loaded
            .xsk
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("the AF_XDP socket is closed"))?;
        let done = harness::run(
            vec![xsk],
            Placement::pinned(&pinning),
            stop,
            &Timeline {
                warmup: Duration::ZERO,
                duration: config.duration,
            },
            &mut control,
            |_, xsk, phase| Ok(receive(xsk, batch, busy, phase, &live[0])),
        )?;
        let busy_poll = if busy {
            let xsk = self.socket()?;
            Some(XskBusyPoll {
                socket: config.busy.read_back(xsk.fd())?,
                napi_id: busy_poll::incoming_napi_id(xsk.fd()),
                deferral: None,
                deferral_before: None,
            })
        } else {
            None
        };
        if busy_poll.as_ref().is_some_and(|b| b.napi_id.is_none()) {
            control.observer.warning(&format!(
                "busy polling never engaged: the AF_XDP socket got no NAPI id when it was bound \
                 (SO_INCOMING_NAPI_ID 0): the driver links no NAPI to queue {} of '{}' (veth \
                 links none); the reader only spun",
                config.queue, config.iface
            ));
        }
        let softirq_s = match (softirq_before, cpu::softirq_seconds()) {
            (Some(b), Some(a)) => Some((a - b).max(0.0)),
            _ => None,
        };
        let stats_after = self.socket()?.stats().unwrap_or_default();
        let counts_after = self.program_counts(possible);
        let intervals = control.meter.intervals;
        let result = done
            .results
            .into_iter()
            .next()
            .ok_or_else(|| anyhow::anyhow!("the reader thread returned nothing"))?;
        let (traffic_s, pps) = rate(&result, done.elapsed);
        Ok(XskReport {
            command: "udp-sink --xdp".to_string(),
            iface: config.iface.clone(),
            queue: config.queue,
            flow: config.flow.clone(),
            netns: config.netns.clone(),
            program: info,
            socket_mode,
            cpu: pinning.cpu_for(0),
            batch,
            ring,
            umem_bytes: u64::from(ring) * u64::from(super::FRAME_SIZE),
            busy_poll,
            ended: done.ended.name().to_string(),
            duration_s: done.elapsed.as_secs_f64(),
            traffic_s,
            packets: result.packets,
            bytes: result.bytes,
            pps,
            other_frames: result.other,
            sequence: summarize(&[result.flows]),
            drops: stats_after.since(&stats_before),
            program_counts: ProgramCounts {
                redirected: counts_after
                    .redirected
                    .saturating_sub(counts_before.redirected),
                passed: counts_after.passed.saturating_sub(counts_before.passed),
            },
            cpu_s: result.cpu_time.as_secs_f64(),
            cpu_ns_per_packet: report::per_packet_ns(result.cpu_time.as_secs_f64(), result.packets),
            softirq_s,
            softirq_ns_per_packet: softirq_s.and_then(|s| report::per_packet_ns(s, result.packets)),
            intervals,
        })
    }

    fn program_counts(&self, possible: usize) -> ProgramCounts {
        let read = |slot| bpf::percpu_sum(&self.loaded.counters, slot, possible).unwrap_or(0);
        ProgramCounts {
            redirected: read(REDIRECTED),
            passed: read(PASSED),
        }
    }

    /// Open the socket again, now that the program is attached, and put
    /// it in the XSKMAP in place of the first one. The kernel gives an
    /// AF_XDP socket the NAPI id it busy-polls when the socket is bound
    /// (the NAPI of its queue then), and a veth creates its queue's NAPI
    /// (or a new one) when XDP is attached: a socket bound before would
    /// busy-poll nothing.
    fn rebind(&mut self) -> anyhow::Result<()> {
        // Only one socket may be bound to a queue: the first one goes
        // (and leaves the XSKMAP) before the new one binds; until then the
        // program passes the flow's packets to the stack.
        self.loaded.xsk = None;
        let l = &self.loaded;
        let (ifindex, queue, copy, ring) =
            (l.ifindex, l.config.queue, l.config.copy, l.config.ring);
        let iface = l.config.iface.clone();
        let busy = l.config.busy;
        let xsk = netns::within(l.config.netns.as_deref(), || {
            // The kernel frees the first socket's hold on the queue in
            // deferred work: the queue reads busy for a moment.
            let mut tries = 0;
            let opened = loop {
                match Xsk::open(ifindex, queue, copy, ring) {
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < REBIND_TRIES => {
                        tries += 1;
                        std::thread::sleep(REBIND_PAUSE);
                    }
                    other => break other,
                }
            };
            let xsk = opened.map_err(|e| {
                anyhow::anyhow!(
                    "cannot open the busy-polling AF_XDP socket on '{iface}' queue {queue} \
                     after attaching: {e}"
                )
            })?;
            busy.apply_options(xsk.fd()).map_err(|e| {
                anyhow::anyhow!("cannot set busy polling on the AF_XDP socket of '{iface}': {e:#}")
            })?;
            Ok(xsk)
        })?;
        bpf::map_update_u32(&self.loaded.xsks, queue, xsk.raw_fd() as u32)
            .context("cannot put the AF_XDP socket in the XSKMAP")?;
        self.loaded.xsk = Some(xsk);
        Ok(())
    }

    fn socket(&self) -> anyhow::Result<&Xsk> {
        self.loaded
            .xsk
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the AF_XDP socket is closed"))
    }

    /// The interface index the program is attached to.
    pub fn ifindex(&self) -> u32 {
        self.loaded.ifindex
    }
}

/// The busy polling asked for, for the ready line.
fn busy_header(b: &busy_poll::BusyPoll) -> String {
    let mut text = format!("SO_BUSY_POLL {} us", b.usecs.unwrap_or(0));
    if b.prefer {
        text.push_str(", SO_PREFER_BUSY_POLL with IRQ deferral");
    }
    if let Some(budget) = b.budget {
        text.push_str(&format!(", budget {budget}"));
    }
    text
}

/// What the reader brings back.
struct ReaderResult {
    packets: u64,
    bytes: u64,
    other: u64,
    /// When its traffic began and ended.
    clock: TrafficClock,
    flows: FlowTable,
    cpu_time: Duration,
}

/// The traffic's span and the packet rate over it: from the start of the
/// reader's last wait that came back empty to its last read, so that a
/// reader kept off its CPU, whose few late reads fall close together, does
/// not report them as a burst rate (crate::bench::traffic); the whole run
/// where nothing was read.
fn rate(result: &ReaderResult, elapsed: Duration) -> (f64, f64) {
    let traffic_s = traffic_seconds([&result.clock]);
    let window = rate_window(traffic_s, elapsed.as_secs_f64());
    (traffic_s, report::per_second(result.packets, 0, window).0)
}

/// The reader: take frames from the ring, count them, give them back;
/// sleep in poll when the ring is empty (spinning instead, as xdpsock does
/// without -p, measured slower on shared vCPUs: the spinning vCPU takes
/// time from the one that sends and copies). No allocation per frame.
///
/// With busy polling (`busy`) it never sleeps: an empty ring is answered
/// with a non-blocking receive, which polls the queue's NAPI in this
/// thread, as xdpsock -B does; the reader's CPU is then always busy, and
/// with SO_PREFER_BUSY_POLL and the NAPI's IRQ deferral it, not the
/// sender's softirq, runs the XDP program and the copy into the UMEM.
fn receive(
    xsk: &mut Xsk,
    batch: u32,
    busy: bool,
    phase: &Phase,
    live: &LiveCounter,
) -> ReaderResult {
    let started = cpu::thread_cpu_time();
    let mut r = ReaderResult {
        packets: 0,
        bytes: 0,
        other: 0,
        clock: TrafficClock::default(),
        flows: FlowTable::new(),
        cpu_time: Duration::ZERO,
    };
    while !phase.stopped() {
        r.clock.waiting();
        let (mut bytes, mut other) = (0u64, 0u64);
        let flows = &mut r.flows;
        let n = xsk.receive(batch, |frame| match packet::parse(frame) {
            Some(h) if h.proto == 17 => {
                bytes += h.payload.len() as u64;
                flows.record(h.payload);
            }
            _ => other += 1,
        });
        if n == 0 {
            if busy {
                xsk.kick();
            } else {
                xsk.wake_if_needed();
                let _ = xsk.wait(if r.clock.before_traffic() {
                    FIRST_POLL_MS
                } else {
                    POLL_MS
                });
            }
            continue;
        }
        r.clock.arrived();
        r.packets += u64::from(n);
        r.bytes += bytes;
        r.other += other;
        live.publish(r.packets, r.bytes);
    }
    r.cpu_time = cpu::thread_cpu_time().saturating_sub(started);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A reader that read `packets` from `first` to `last` (after the
    /// run's start), its last empty wait before them having begun at
    /// `waited`.
    fn reader(packets: u64, waited: Duration, first: Duration, last: Duration) -> ReaderResult {
        let start = Instant::now();
        ReaderResult {
            packets,
            bytes: packets * 32,
            other: 0,
            clock: TrafficClock::read(start + waited, start + first, start + last),
            flows: FlowTable::new(),
            cpu_time: Duration::ZERO,
        }
    }

    #[test]
    fn a_reader_kept_off_its_cpu_reports_its_rate_over_the_traffic_not_its_few_reads() {
        // A 10 s run; the traffic begins at 0.1 s. A competing process
        // keeps the reader off its CPU until 9.9 s, when it reads the 3,000
        // frames its ring held within 2 ms.
        let (traffic_s, pps) = rate(&reader(3_000, ms(100), ms(9_900), ms(9_902)), ms(10_000));
        // 3,000 frames in the 9.802 s the traffic lasted: some 306 a second,
        // not the 1.5 million of 3,000 frames in 2 ms.
        assert!((traffic_s - 9.802).abs() < 1e-6, "{traffic_s}");
        assert!((pps - 3_000.0 / 9.802).abs() < 0.01, "{pps}");
    }

    #[test]
    fn a_reader_that_keeps_up_reports_the_rate_over_its_reads() {
        // Its last empty wait began 2 ms before the first frame.
        let (traffic_s, pps) = rate(&reader(300_000, ms(998), ms(1_000), ms(4_000)), ms(10_000));
        assert!((traffic_s - 3.002).abs() < 1e-6, "{traffic_s}");
        assert!((pps - 300_000.0 / 3.002).abs() < 0.01, "{pps}");
        // Nothing read: no span, the whole run.
        let mut idle = reader(0, ms(0), ms(0), ms(0));
        idle.clock = TrafficClock::default();
        assert_eq!(rate(&idle, ms(10_000)), (0.0, 0.0));
    }
}
