//! The flood: sendmmsg batches of numbered packets on connected sockets,
//! `flows` source ports per thread, optionally paced by a smooth
//! per-thread token bucket.
//!
//! Every socket has a send timeout ([`SEND_TIMEOUT`]): a sendmmsg that
//! blocks (a full socket buffer while the neighbour is resolved, a full
//! queue) returns within it, so the flood always sees the end of its run in
//! time. Errors the kernel returns are counted by kind and reported; a
//! refused destination (ECONNREFUSED: ICMP port unreachable came back)
//! makes the run a failure ([`FloodReport::problem`]).

use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::gso;
use super::mmsg::{self, Batch};
use super::wire::Header;
use super::{FloodConfig, Interval};
use crate::base::observe::Observer;
use crate::base::stop::Stop;
use crate::base::Root;
use crate::bench::cpu::thread_cpu_time;
use crate::bench::harness::{self, Control, Phase, Placement, Timeline};
use crate::bench::netns;
use crate::bench::pin::Pinning;
use crate::bench::report::{self, plural, IntervalMeter, LiveCounter};

/// The longest a sendmmsg may block before the thread looks at the run's
/// phase again.
const SEND_TIMEOUT: Duration = Duration::from_millis(50);

/// Send errors, counted and survived: a flood keeps going.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendErrors {
    /// No buffer space: a queue (qdisc, device) on the way out was full.
    pub enobufs: u64,
    /// ICMP port unreachable came back: nothing listens at the destination.
    pub econnrefused: u64,
    /// Calls that sent nothing for the whole send timeout (a full socket
    /// buffer: the neighbour unresolved, the queue stuck).
    pub timeouts: u64,
    /// Anything else; the last one is named.
    pub other: u64,
    pub last_other: Option<String>,
}

impl SendErrors {
    fn count(&mut self, e: &io::Error) {
        match e.raw_os_error() {
            Some(libc::ENOBUFS) => self.enobufs += 1,
            Some(libc::ECONNREFUSED) => self.econnrefused += 1,
            Some(libc::EAGAIN) => self.timeouts += 1,
            _ => {
                self.other += 1;
                if self.last_other.is_none() || self.other % 4096 == 1 {
                    self.last_other = Some(e.to_string());
                }
            }
        }
    }

    fn add(&mut self, other: &SendErrors) {
        self.enobufs += other.enobufs;
        self.econnrefused += other.econnrefused;
        self.timeouts += other.timeouts;
        self.other += other.other;
        if other.last_other.is_some() {
            self.last_other.clone_from(&other.last_other);
        }
    }

    pub fn total(&self) -> u64 {
        self.enobufs + self.econnrefused + self.timeouts + self.other
    }

    /// The send errors by kind, with what each means.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "{} ENOBUFS, {} ECONNREFUSED, {} send timeouts, {} other",
            self.enobufs, self.econnrefused, self.timeouts, self.other
        );
        if self.econnrefused > 0 {
            text.push_str("; ECONNREFUSED: nothing listens there, start the sink first");
        }
        if self.enobufs > 0 {
            text.push_str("; ENOBUFS: an outgoing queue was full");
        }
        if self.timeouts > 0 {
            text.push_str(
                "; send timeouts: the socket buffer stayed full (an unresolved neighbour, a stuck queue)",
            );
        }
        if let Some(last) = &self.last_other {
            text.push_str(&format!("; last other error: {last}"));
        }
        text
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadReport {
    pub thread: usize,
    pub cpu: Option<u32>,
    /// The local port of each of the thread's sockets (one per flow).
    pub source_ports: Vec<u16>,
    pub packets: u64,
    pub bytes: u64,
    pub pps: f64,
    pub send_errors: SendErrors,
    /// CPU seconds the thread used (user + system).
    pub cpu_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloodReport {
    pub command: String,
    pub to: Vec<SocketAddr>,
    /// The network namespace it sent from; `null`: nettune's own.
    pub netns: Option<String>,
    /// Stamped in every packet; the sink counts senders by it.
    pub sender_id: u32,
    pub threads: usize,
    pub flows_per_thread: usize,
    pub size: usize,
    pub batch: usize,
    /// Packets per send with UDP_SEGMENT; null without.
    pub gso_segments: Option<u32>,
    /// The rate asked for, total over all threads; null when unpaced.
    pub rate_pps: Option<u64>,
    /// `duration`, `interrupted` (the stop token: Ctrl-C, SIGTERM, the
    /// caller).
    pub ended: String,
    pub duration_s: f64,
    pub packets: u64,
    pub bytes: u64,
    pub pps: f64,
    /// CPU seconds the sending threads used (user + system), and per packet.
    pub cpu_s: f64,
    pub cpu_ns_per_packet: Option<f64>,
    pub send_errors: SendErrors,
    pub per_thread: Vec<ThreadReport>,
    pub intervals: Vec<Interval>,
}

impl FloodReport {
    /// Why this run is not a measurement, if it is not: nothing could be
    /// sent, or the destination refused the packets.
    pub fn problem(&self) -> Option<String> {
        let to = self.to.first().map(ToString::to_string).unwrap_or_default();
        if self.send_errors.econnrefused > 0 {
            return Some(format!(
                "udp-flood: {} send(s) to {to} were refused (ECONNREFUSED: ICMP port unreachable \
                 came back, nothing listens there); start the sink first, or check --to",
                self.send_errors.econnrefused
            ));
        }
        if self.packets == 0 {
            return Some(format!(
                "udp-flood measured nothing: no packet could be sent to {to} in {:.1} s ({})",
                self.duration_s,
                self.send_errors.describe()
            ));
        }
        None
    }
}

/// One connected socket: one flow, one source port.
struct Flow {
    socket: UdpSocket,
    id: u16,
    next_seq: u64,
}

struct ThreadResult {
    cpu: Option<u32>,
    source_ports: Vec<u16>,
    packets: u64,
    bytes: u64,
    errors: SendErrors,
    /// CPU time the thread used (user + system).
    cpu_time: Duration,
}

/// Send for the config's duration or until `stop`.
pub fn run(
    config: &FloodConfig,
    stop: &Stop,
    observer: &mut dyn Observer<Interval>,
) -> anyhow::Result<FloodReport> {
    config.validate()?;
    let pinning = Pinning::new(config.pin.clone(), &Root::live())?;
    let threads = config.threads as usize;
    let flows_per_thread = config.flows as usize;
    let rates = split_rate(config.rate, threads);
    let flows = netns::within(config.netns.as_deref(), || {
        open_flows(&config.to, threads, flows_per_thread)
    })?;
    if config.gso.is_some() {
        for flow in flows.iter().flatten() {
            let dest = flow
                .socket
                .peer_addr()
                .context("cannot read a flow's destination")?;
            gso::check_mtu(&flow.socket, dest, config.size)?;
            gso::set_segment(flow.socket.as_fd(), config.size)
                .context("cannot set UDP_SEGMENT (the kernel has it from 4.18)")?;
        }
    }
    let sender = random_sender_id();
    observer.ready(
        None,
        &format!(
            "sending to {} from {} socket{} ({threads} thread{} x {flows_per_thread} flow{}), \
             {}-byte packets{}, sender id {sender:#010x}",
            config
                .to
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(","),
            threads * flows_per_thread,
            plural(threads * flows_per_thread),
            plural(threads),
            plural(flows_per_thread),
            config.size,
            config
                .gso
                .map(|n| format!(", UDP_SEGMENT {n} per send"))
                .unwrap_or_default()
        ),
    );

    let live: Vec<LiveCounter> = (0..threads).map(|_| LiveCounter::default()).collect();
    let mut control = Meter {
        meter: IntervalMeter::new(threads),
        live: &live,
        observer,
    };
    let tasks: Vec<(Vec<Flow>, Option<u64>, &LiveCounter)> = flows
        .into_iter()
        .zip(rates)
        .zip(&live)
        .map(|((flows, rate), live)| (flows, rate, live))
        .collect();
    let done = harness::run(
        tasks,
        Placement::pinned(&pinning),
        stop,
        &Timeline::measured(config.duration),
        &mut control,
        |i, (flows, rate, live), phase| {
            let plan = SendPlan {
                sender,
                size: config.size,
                batch: config.batch as usize,
                segments: config.gso.map_or(1, |n| n as usize),
                rate,
                cpu: pinning.cpu_for(i),
            };
            send(flows, &plan, phase, live)
        },
    )?;
    Ok(build_report(
        config,
        sender,
        done.ended.name(),
        done.elapsed,
        done.results,
        control.meter.intervals,
    ))
}

/// Turns the workers' running totals into intervals for the observer.
struct Meter<'a> {
    meter: IntervalMeter,
    live: &'a [LiveCounter],
    observer: &'a mut dyn Observer<Interval>,
}

impl Control for Meter<'_> {
    fn tick(&mut self, second: u64) {
        let interval = self.meter.tick(second, self.live);
        self.observer.interval(interval);
    }
}

/// Split the rate over the threads (the first ones take the remainder);
/// `validate` made sure each gets at least 1.
fn split_rate(rate: Option<u64>, threads: usize) -> Vec<Option<u64>> {
    let Some(rate) = rate else {
        return vec![None; threads];
    };
    let threads_u64 = threads as u64;
    (0..threads_u64)
        .map(|i| Some(rate / threads_u64 + u64::from(i < rate % threads_u64)))
        .collect()
}

/// Open `flows_per_thread` connected sockets per thread. Socket g (counting
/// over all threads) goes to destination g mod len, so one flow per thread
/// spreads threads over destinations and many flows spread each thread.
fn open_flows(
    to: &[SocketAddr],
    threads: usize,
    flows_per_thread: usize,
) -> anyhow::Result<Vec<Vec<Flow>>> {
    let mut per_thread = Vec::with_capacity(threads);
    for t in 0..threads {
        let mut flows = Vec::with_capacity(flows_per_thread);
        for k in 0..flows_per_thread {
            let g = t * flows_per_thread + k;
            let dest = to[g % to.len()];
            let local: SocketAddr = if dest.is_ipv4() {
                (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
            } else {
                (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
            };
            let socket = UdpSocket::bind(local)
                .with_context(|| format!("cannot open a UDP socket for '{dest}'"))?;
            socket.connect(dest).with_context(|| {
                format!("--to '{dest}': cannot connect (no route from this network namespace?)")
            })?;
            socket
                .set_write_timeout(Some(SEND_TIMEOUT))
                .context("cannot set SO_SNDTIMEO")?;
            mmsg::queue_errors(socket.as_fd(), dest.is_ipv6()).context("cannot set IP_RECVERR")?;
            flows.push(Flow {
                socket,
                id: g as u16,
                next_seq: 0,
            });
        }
        per_thread.push(flows);
    }
    Ok(per_thread)
}

/// A per-run random id, so a sink tells two floods apart. Std's
/// `RandomState` is seeded from the OS; no extra dependency needed.
fn random_sender_id() -> u32 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.finish() as u32
}

/// What a sending thread does, fixed before it starts.
struct SendPlan {
    sender: u32,
    size: usize,
    batch: usize,
    /// Packets per message (UDP_SEGMENT); 1: one datagram per message.
    segments: usize,
    /// This thread's share of the rate.
    rate: Option<u64>,
    cpu: Option<u32>,
}

/// One sending thread: batches round-robin over its flows until the run is
/// over. Pacing and stop are decided here, in one loop, for every mode.
fn send(
    mut flows: Vec<Flow>,
    plan: &SendPlan,
    phase: &Phase,
    live: &LiveCounter,
) -> anyhow::Result<ThreadResult> {
    let source_ports = flows
        .iter()
        .map(|f| f.socket.local_addr().map(|a| a.port()).unwrap_or(0))
        .collect();
    let segmented = plan.segments > 1;
    let mut buffers = if segmented {
        Batch::new(
            plan.batch.div_ceil(plan.segments),
            plan.segments * plan.size,
        )
    } else {
        Batch::new(plan.batch, plan.size)
    };
    let started_cpu = thread_cpu_time();
    let mut pacer = plan
        .rate
        .map(|pps| Pacer::new(pps, plan.batch, plan.segments, Instant::now()));
    let mut result = ThreadResult {
        cpu: plan.cpu,
        source_ports,
        packets: 0,
        bytes: 0,
        errors: SendErrors::default(),
        cpu_time: Duration::ZERO,
    };
    let mut next_flow = 0;
    while !phase.stopped() {
        let count = match &mut pacer {
            None => plan.batch,
            Some(pacer) => {
                let now = Instant::now();
                match pacer.take(now) {
                    0 => {
                        std::thread::sleep(pacer.wait());
                        continue;
                    }
                    n => n,
                }
            }
        };
        let flow_count = flows.len();
        let flow = &mut flows[next_flow];
        next_flow = (next_flow + 1) % flow_count;
        for i in 0..count {
            let header = Header {
                sender: plan.sender,
                flow: flow.id,
                seq: flow.next_seq + i as u64,
            };
            if segmented {
                let (message, segment) = (i / plan.segments, i % plan.segments);
                header.write(buffers.segment_header_mut(message, segment, plan.size));
            } else {
                header.write(buffers.header_mut(i));
            }
        }
        let sent = if segmented {
            buffers.send_segmented(flow.socket.as_fd(), count, plan.size, plan.segments)
        } else {
            buffers.send(flow.socket.as_fd(), count, plan.size)
        };
        match sent {
            Ok(sent) => {
                flow.next_seq += sent as u64;
                result.packets += sent as u64;
                result.bytes += (sent * plan.size) as u64;
                live.publish(result.packets, result.bytes);
                if sent < count {
                    // sendmmsg stops at the first failing message and, when
                    // some went out, returns their count and drops the
                    // error: it is only in the error queue.
                    pending_error(&flow.socket, &mut result.errors);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                result.errors.count(&e);
                // The queued copy of that error (or of others) goes too.
                mmsg::take_errors(flow.socket.as_fd(), |errno| {
                    if Some(errno) != e.raw_os_error() {
                        result.errors.count(&io::Error::from_raw_os_error(errno));
                    }
                });
            }
        }
    }
    result.cpu_time = thread_cpu_time().saturating_sub(started_cpu);
    Ok(result)
}

/// Count the errors queued on the socket (ICMP unreachable and the like);
/// a partial send with none queued timed out part way.
fn pending_error(socket: &UdpSocket, errors: &mut SendErrors) {
    let queued = mmsg::take_errors(socket.as_fd(), |errno| {
        errors.count(&io::Error::from_raw_os_error(errno));
    });
    if queued == 0 {
        errors.timeouts += 1;
    }
}

/// A token bucket per thread, refilled by elapsed nanoseconds. It hands out
/// 100 us of packets per call, in whole UDP_SEGMENT messages (at least one
/// message, at most a batch), and holds at most 10 ms of them, so a late
/// wake-up catches up a little but the sender never bursts a second's
/// worth. Small calls keep the flood smooth, as a NIC at its line rate is:
/// a receiver that shares its CPU with the receive softirq can only read
/// between bursts, and its socket buffer keeps only the start of each one
/// (1 ms of a 1.2 million packets/s flood is 1,024 packets at once: a
/// one-socket sink took far less of it than of the same rate in small
/// sends).
#[derive(Debug)]
struct Pacer {
    per_call: usize,
    depth: f64,
    per_ns: f64,
    tokens: f64,
    last: Instant,
}

impl Pacer {
    /// `unit`: packets per message (UDP_SEGMENT segments, else 1).
    fn new(pps: u64, batch: usize, unit: usize, now: Instant) -> Pacer {
        let batch = batch.max(1);
        let unit = unit.clamp(1, batch);
        // The most whole messages a batch holds: a batch that is not a
        // multiple of the message would otherwise end in a partial one.
        let whole = batch / unit * unit;
        let per_call = ((pps / 10_000) as usize)
            .div_ceil(unit)
            .saturating_mul(unit)
            .clamp(unit, whole);
        Pacer {
            per_call,
            depth: (pps as f64 / 100.0).max(per_call as f64),
            per_ns: pps as f64 / 1e9,
            tokens: per_call as f64,
            last: now,
        }
    }

    /// Packets that may go now: `per_call` once that many have accrued,
    /// else 0 (then sleep [`Pacer::wait`]).
    fn take(&mut self, now: Instant) -> usize {
        let elapsed = now.saturating_duration_since(self.last).as_nanos() as f64;
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.per_ns).min(self.depth);
        if self.tokens >= self.per_call as f64 {
            self.tokens -= self.per_call as f64;
            self.per_call
        } else {
            0
        }
    }

    /// Until the next call's worth has accrued (at most 20 ms, so the end
    /// of the run is noticed even at a few packets per second).
    fn wait(&self) -> Duration {
        let missing = (self.per_call as f64 - self.tokens).max(0.0);
        Duration::from_nanos((missing / self.per_ns) as u64).min(Duration::from_millis(20))
    }
}

fn build_report(
    config: &FloodConfig,
    sender: u32,
    ended: &str,
    elapsed: Duration,
    results: Vec<ThreadResult>,
    intervals: Vec<Interval>,
) -> FloodReport {
    let secs = elapsed.as_secs_f64();
    let mut send_errors = SendErrors::default();
    let per_thread: Vec<ThreadReport> = results
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            send_errors.add(&r.errors);
            ThreadReport {
                thread: i,
                cpu: r.cpu,
                source_ports: r.source_ports,
                packets: r.packets,
                bytes: r.bytes,
                pps: report::per_second(r.packets, 0, secs).0,
                send_errors: r.errors,
                cpu_s: r.cpu_time.as_secs_f64(),
            }
        })
        .collect();
    let packets = per_thread.iter().map(|t| t.packets).sum();
    let cpu_s: f64 = per_thread.iter().map(|t| t.cpu_s).sum();
    FloodReport {
        command: "udp-flood".to_string(),
        to: config.to.clone(),
        netns: config.netns.clone(),
        sender_id: sender,
        threads: config.threads as usize,
        flows_per_thread: config.flows as usize,
        size: config.size,
        batch: config.batch as usize,
        gso_segments: config.gso,
        rate_pps: config.rate,
        ended: ended.to_string(),
        duration_s: secs,
        packets,
        bytes: per_thread.iter().map(|t| t.bytes).sum(),
        pps: report::per_second(packets, 0, secs).0,
        cpu_s,
        cpu_ns_per_packet: report::per_packet_ns(cpu_s, packets),
        send_errors,
        per_thread,
        intervals,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drive a pacer over simulated time, calling every `step`.
    fn simulate(pps: u64, batch: usize, step: Duration, total: Duration) -> (u64, usize) {
        let start = Instant::now();
        let mut pacer = Pacer::new(pps, batch, 1, start);
        let (mut sent, mut largest) = (0u64, 0usize);
        let mut t = Duration::ZERO;
        while t < total {
            let n = pacer.take(start + t);
            sent += n as u64;
            largest = largest.max(n);
            t += step;
        }
        (sent, largest)
    }

    #[test]
    fn pacer_holds_the_rate_in_small_steps() {
        // 20,000 pps checked every 50 us for 1 s: 2 packets per 100 us call.
        let (sent, largest) = simulate(
            20_000,
            1024,
            Duration::from_micros(50),
            Duration::from_secs(1),
        );
        assert!((19_900..=20_100).contains(&sent), "{sent}");
        assert_eq!(largest, 2);
        // 5 Mpps: 500 per call, or the batch when that is smaller.
        let (sent, largest) = simulate(
            5_000_000,
            1024,
            Duration::from_micros(50),
            Duration::from_secs(1),
        );
        assert!((4_990_000..=5_010_000).contains(&sent), "{sent}");
        assert_eq!(largest, 500);
        let (sent, largest) = simulate(
            5_000_000,
            256,
            Duration::from_micros(50),
            Duration::from_secs(1),
        );
        assert!((4_990_000..=5_010_000).contains(&sent), "{sent}");
        assert_eq!(largest, 256);
    }

    #[test]
    fn pacer_never_bursts_after_a_stall() {
        let start = Instant::now();
        let mut pacer = Pacer::new(100_000, 1024, 1, start);
        assert_eq!(pacer.take(start), 10);
        // Asleep for half a second: at most 10 ms of packets are owed.
        let late = start + Duration::from_millis(500);
        let mut burst = 0;
        while let n @ 1.. = pacer.take(late) {
            burst += n;
        }
        assert_eq!(burst, 1000);
        assert!(pacer.wait() <= Duration::from_millis(1));
    }

    #[test]
    fn pacer_sends_small_calls_of_whole_messages() {
        // 1.2 million packets/s in messages of 64: 100 us is 120 packets,
        // two whole messages; not the 1,024-packet bursts of 1 ms calls.
        let start = Instant::now();
        let mut pacer = Pacer::new(1_200_000, 1024, 64, start);
        assert_eq!(pacer.take(start), 128);
        // Slow rates still send a whole message per call.
        let mut slow = Pacer::new(1_000, 1024, 64, start);
        assert_eq!(slow.take(start), 64);
        // Messages larger than the batch: the batch.
        let mut large = Pacer::new(1_200_000, 32, 64, start);
        assert_eq!(large.take(start), 32);
        // A batch that is not a multiple of the message: whole messages
        // only (64, not 64 + 36).
        let mut odd = Pacer::new(1_200_000, 100, 64, start);
        assert_eq!(odd.take(start), 64);
    }

    #[test]
    fn rate_split_keeps_the_total() {
        assert_eq!(split_rate(Some(10), 3), vec![Some(4), Some(3), Some(3)]);
        assert_eq!(split_rate(None, 2), vec![None, None]);
    }

    #[test]
    fn flows_are_spread_over_destinations() {
        let a = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let b = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let to = [a.local_addr().expect("a"), b.local_addr().expect("b")];
        let flows = open_flows(&to, 2, 1).expect("open");
        let peers: Vec<SocketAddr> = flows
            .iter()
            .map(|f| f[0].socket.peer_addr().expect("peer"))
            .collect();
        assert_eq!(peers, to);
    }

    #[test]
    fn a_refused_destination_is_a_problem_not_a_success() {
        let mut report = FloodReport {
            command: "udp-flood".to_string(),
            to: vec!["127.0.0.1:9".parse().expect("addr")],
            netns: None,
            sender_id: 1,
            threads: 1,
            flows_per_thread: 1,
            size: 32,
            batch: 1024,
            gso_segments: None,
            rate_pps: None,
            ended: "duration".to_string(),
            duration_s: 1.0,
            packets: 1000,
            bytes: 32000,
            pps: 1000.0,
            cpu_s: 0.0,
            cpu_ns_per_packet: None,
            send_errors: SendErrors::default(),
            per_thread: Vec::new(),
            intervals: Vec::new(),
        };
        assert_eq!(report.problem(), None);
        report.send_errors.econnrefused = 3;
        let problem = report.problem().expect("refused");
        assert!(
            problem.contains("ECONNREFUSED") && problem.contains("127.0.0.1:9"),
            "{problem}"
        );
        report.send_errors.econnrefused = 0;
        report.packets = 0;
        assert!(report
            .problem()
            .expect("nothing")
            .contains("measured nothing"));
    }
}
