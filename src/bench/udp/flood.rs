//! `bench udp-flood`: sendmmsg batches of numbered packets on connected
//! sockets, `--flows` source ports per thread, optionally paced by a smooth
//! per-thread token bucket.

use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use super::mmsg::Batch;
use super::wire::Header;
use super::FloodArgs;
use crate::base::Root;
use crate::bench::pin::{pin_current_thread, Pinning};
use crate::bench::report::{
    self, format_rate, plural, print_line, Interval, IntervalMeter, LiveCounter, Progress,
};
use crate::bench::stop::{self, Ended};
use crate::error::Status;

/// Send errors, counted and survived: a flood keeps going.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SendErrors {
    /// No buffer space: a queue (qdisc, device) on the way out was full.
    pub enobufs: u64,
    /// ICMP port unreachable came back: nothing listens at the destination.
    pub econnrefused: u64,
    /// Anything else; the last one is named.
    pub other: u64,
    pub last_other: Option<String>,
}

impl SendErrors {
    fn count(&mut self, e: &io::Error) {
        match e.raw_os_error() {
            Some(libc::ENOBUFS) => self.enobufs += 1,
            Some(libc::ECONNREFUSED) => self.econnrefused += 1,
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
        self.other += other.other;
        if other.last_other.is_some() {
            self.last_other.clone_from(&other.last_other);
        }
    }

    fn total(&self) -> u64 {
        self.enobufs + self.econnrefused + self.other
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ThreadReport {
    pub thread: usize,
    pub cpu: Option<u32>,
    /// The local port of each of the thread's sockets (one per flow).
    pub source_ports: Vec<u16>,
    pub packets: u64,
    pub bytes: u64,
    pub pps: f64,
    pub send_errors: SendErrors,
}

#[derive(Debug, Clone, Serialize)]
pub struct FloodReport {
    pub command: &'static str,
    pub to: Vec<SocketAddr>,
    /// Stamped in every packet; the sink counts senders by it.
    pub sender_id: u32,
    pub threads: usize,
    pub flows_per_thread: usize,
    pub size: usize,
    pub batch: usize,
    /// `--rate`, total over all threads; null when unpaced.
    pub rate_pps: Option<u64>,
    pub ended: &'static str,
    pub duration_s: f64,
    pub packets: u64,
    pub bytes: u64,
    pub pps: f64,
    pub send_errors: SendErrors,
    pub per_thread: Vec<ThreadReport>,
    pub intervals: Vec<Interval>,
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
}

pub fn run(args: &FloodArgs) -> anyhow::Result<Status> {
    let root = Root::live();
    let pinning = Pinning::resolve(args.pin.as_deref(), &root)?;
    let threads = args.threads as usize;
    let flows_per_thread = args.flows as usize;
    let rates = split_rate(args.rate, threads)?;
    let flows = open_flows(&args.to, threads, flows_per_thread)?;
    let sender = random_sender_id();
    eprintln!(
        "udp-flood: sending to {} from {} socket{} ({threads} thread{} x {flows_per_thread} flow{}), \
         {}-byte packets, sender id {sender:#010x}",
        args.to.iter().map(ToString::to_string).collect::<Vec<_>>().join(","),
        threads * flows_per_thread,
        plural(threads * flows_per_thread),
        plural(threads),
        plural(flows_per_thread),
        args.size
    );

    stop::catch_ctrl_c()?;
    let stop_flag = AtomicBool::new(false);
    let live: Vec<LiveCounter> = (0..threads).map(|_| LiveCounter::default()).collect();
    let mut meter = IntervalMeter::new(threads);
    let mut progress = Progress::new(args.json);
    let start = Instant::now();

    let (ended, elapsed, results) = std::thread::scope(|scope| {
        let handles: Vec<_> = flows
            .into_iter()
            .zip(rates)
            .enumerate()
            .map(|(i, (flows, rate))| {
                let plan = SendPlan {
                    sender,
                    size: args.size,
                    batch: args.batch as usize,
                    rate,
                    cpu: pinning.cpu_for(i),
                };
                let (stop_flag, live) = (&stop_flag, &live[i]);
                scope.spawn(move || send(flows, &plan, stop_flag, live))
            })
            .collect();
        let (ended, elapsed) = stop::run_ticking(start, args.duration, &stop_flag, |second| {
            let line = meter.tick(second, &live).line();
            if args.json {
                progress.show(&format!("udp-flood {second} s: {line}"));
            } else {
                let _ = print_line(&mut progress, &line);
            }
        });
        let results: Vec<anyhow::Result<ThreadResult>> = stop::join_all(handles, "sending");
        (ended, elapsed, results)
    });
    progress.clear();
    let results = results.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    let report = build_report(args, sender, ended, elapsed, results, meter.intervals);
    if args.json {
        report::print_json(&report)?;
    } else {
        print_text(&report)?;
    }
    if report.packets == 0 && report.send_errors.total() > 0 {
        anyhow::bail!(
            "udp-flood: no packet could be sent to {} ({})",
            args.to[0],
            describe_errors(&report.send_errors)
        );
    }
    Ok(Status::Clean)
}

/// Split `--rate` over the threads (the first ones take the remainder).
fn split_rate(rate: Option<u64>, threads: usize) -> anyhow::Result<Vec<Option<u64>>> {
    let Some(rate) = rate else {
        return Ok(vec![None; threads]);
    };
    let threads_u64 = threads as u64;
    if rate < threads_u64 {
        anyhow::bail!(
            "--rate '{rate}' is below --threads '{threads}': each thread sends at least 1 packet/s; \
             lower --threads"
        );
    }
    Ok((0..threads_u64)
        .map(|i| Some(rate / threads_u64 + u64::from(i < rate % threads_u64)))
        .collect())
}

/// Open `flows_per_thread` connected sockets per thread. Socket g (counting
/// over all threads) goes to destination g mod len, so one flow per thread
/// spreads threads over destinations and many flows spread each thread.
fn open_flows(
    to: &[SocketAddr],
    threads: usize,
    flows_per_thread: usize,
) -> anyhow::Result<Vec<Vec<Flow>>> {
    let total = threads * flows_per_thread;
    if total < to.len() {
        anyhow::bail!(
            "{threads} thread(s) x {flows_per_thread} flow(s) = {total} socket(s) cannot reach all {} \
             destinations; raise --flows or --threads",
            to.len()
        );
    }
    if total > usize::from(u16::MAX) + 1 {
        anyhow::bail!(
            "{threads} thread(s) x {flows_per_thread} flow(s) = {total} flows is more than the \
             header's 65536 flow ids; lower --flows"
        );
    }
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
    /// This thread's share of `--rate`.
    rate: Option<u64>,
    cpu: Option<u32>,
}

/// One sending thread: batches round-robin over its flows until stopped.
/// Pacing and stop are decided here, in one loop, for every mode.
fn send(
    mut flows: Vec<Flow>,
    plan: &SendPlan,
    stop: &AtomicBool,
    live: &LiveCounter,
) -> anyhow::Result<ThreadResult> {
    if let Some(cpu) = plan.cpu {
        pin_current_thread(cpu)?;
    }
    let source_ports = flows
        .iter()
        .map(|f| f.socket.local_addr().map(|a| a.port()).unwrap_or(0))
        .collect();
    let mut buffers = Batch::new(plan.batch, plan.size);
    let mut pacer = plan
        .rate
        .map(|pps| Pacer::new(pps, plan.batch, Instant::now()));
    let mut result = ThreadResult {
        cpu: plan.cpu,
        source_ports,
        packets: 0,
        bytes: 0,
        errors: SendErrors::default(),
    };
    let mut next_flow = 0;
    while !stop.load(Ordering::Relaxed) {
        let count = match &mut pacer {
            None => buffers.capacity(),
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
            Header {
                sender: plan.sender,
                flow: flow.id,
                seq: flow.next_seq + i as u64,
            }
            .write(buffers.header_mut(i));
        }
        match buffers.send(flow.socket.as_fd(), count, plan.size) {
            Ok(sent) => {
                flow.next_seq += sent as u64;
                result.packets += sent as u64;
                result.bytes += (sent * plan.size) as u64;
                live.publish(result.packets, result.bytes);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => result.errors.count(&e),
        }
    }
    Ok(result)
}

/// A token bucket per thread, refilled by elapsed nanoseconds. It hands out
/// at most 1 ms of packets per call (at least 1, at most a batch) and holds
/// at most 10 ms of them, so a late wake-up catches up a little but the
/// sender never bursts a second's worth.
#[derive(Debug)]
struct Pacer {
    per_call: usize,
    depth: f64,
    per_ns: f64,
    tokens: f64,
    last: Instant,
}

impl Pacer {
    fn new(pps: u64, batch: usize, now: Instant) -> Pacer {
        let per_call = ((pps / 1000) as usize).clamp(1, batch.max(1));
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

    /// Until the next call's worth has accrued (at most 50 ms, so a stop is
    /// noticed even at a few packets per second).
    fn wait(&self) -> Duration {
        let missing = (self.per_call as f64 - self.tokens).max(0.0);
        Duration::from_nanos((missing / self.per_ns) as u64).min(Duration::from_millis(50))
    }
}

fn build_report(
    args: &FloodArgs,
    sender: u32,
    ended: Ended,
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
            }
        })
        .collect();
    let packets = per_thread.iter().map(|t| t.packets).sum();
    FloodReport {
        command: "udp-flood",
        to: args.to.clone(),
        sender_id: sender,
        threads: args.threads as usize,
        flows_per_thread: args.flows as usize,
        size: args.size,
        batch: args.batch as usize,
        rate_pps: args.rate,
        ended: match ended {
            Ended::Duration => "duration",
            Ended::Interrupted => "interrupted",
        },
        duration_s: secs,
        packets,
        bytes: per_thread.iter().map(|t| t.bytes).sum(),
        pps: report::per_second(packets, 0, secs).0,
        send_errors,
        per_thread,
        intervals,
    }
}

fn describe_errors(e: &SendErrors) -> String {
    let mut text = format!(
        "{} ENOBUFS, {} ECONNREFUSED, {} other",
        e.enobufs, e.econnrefused, e.other
    );
    if e.econnrefused > 0 {
        text.push_str("; ECONNREFUSED: nothing listens there, start the sink first");
    }
    if e.enobufs > 0 {
        text.push_str("; ENOBUFS: an outgoing queue was full");
    }
    if let Some(last) = &e.last_other {
        text.push_str(&format!("; last other error: {last}"));
    }
    text
}

fn print_text(r: &FloodReport) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "udp-flood: {} packets, {} bytes in {:.3} s{}",
        r.packets,
        r.bytes,
        r.duration_s,
        if r.ended == "interrupted" {
            ", stopped by Ctrl-C"
        } else {
            ""
        }
    )?;
    writeln!(
        out,
        "total     {}",
        format_rate(r.packets, r.bytes, r.duration_s)
    )?;
    for t in &r.per_thread {
        writeln!(
            out,
            "thread {:<2} {}  ({} packets, {} send errors)",
            t.thread,
            format_rate(t.packets, t.bytes, r.duration_s),
            t.packets,
            t.send_errors.total()
        )?;
    }
    writeln!(out, "errors    {}", describe_errors(&r.send_errors))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drive a pacer over simulated time, calling every `step`.
    fn simulate(pps: u64, batch: usize, step: Duration, total: Duration) -> (u64, usize) {
        let start = Instant::now();
        let mut pacer = Pacer::new(pps, batch, start);
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
        // 20,000 pps checked every 100 us for 1 s: 20 packets per 1 ms call.
        let (sent, largest) = simulate(
            20_000,
            1024,
            Duration::from_micros(100),
            Duration::from_secs(1),
        );
        assert!((19_900..=20_100).contains(&sent), "{sent}");
        assert_eq!(largest, 20);
        // 5 Mpps: calls capped at the batch.
        let (sent, largest) = simulate(
            5_000_000,
            1024,
            Duration::from_micros(50),
            Duration::from_secs(1),
        );
        assert!((4_990_000..=5_010_000).contains(&sent), "{sent}");
        assert_eq!(largest, 1024);
    }

    #[test]
    fn pacer_never_bursts_after_a_stall() {
        let start = Instant::now();
        let mut pacer = Pacer::new(100_000, 1024, start);
        assert_eq!(pacer.take(start), 100);
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
    fn rate_split_keeps_the_total() {
        let split = split_rate(Some(10), 3).expect("split");
        assert_eq!(split, vec![Some(4), Some(3), Some(3)]);
        assert_eq!(split_rate(None, 2).expect("none"), vec![None, None]);
        let err = split_rate(Some(1), 2).expect_err("too low");
        assert!(err.to_string().contains("'1'"), "{err}");
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
        let err = open_flows(&to, 1, 1).err().expect("too few sockets");
        assert!(err.to_string().contains("raise --flows"), "{err}");
    }
}
