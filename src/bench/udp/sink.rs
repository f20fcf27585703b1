//! `bench udp-sink`: receive with recvmmsg on one socket shared by all
//! threads, or one SO_REUSEPORT socket per thread; count packets per
//! thread, sequence loss per flow, and the kernel's drop counters over the
//! run.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::errno::Errno;
use nix::sys::socket::{self, sockopt, AddressFamily, SockFlag, SockType, SockaddrStorage};
use serde::Serialize;

use super::flows::{self, FlowTable, SequenceSummary};
use super::mmsg::Batch;
use super::SinkArgs;
use crate::base::Root;
use crate::bench::pin::{pin_current_thread, Pinning};
use crate::bench::report::{
    self, format_rate, plural, print_line, Interval, IntervalMeter, LiveCounter, Progress,
};
use crate::bench::stop::{self, Ended};
use crate::error::Status;
use crate::host::snmp::Counters;
use crate::host::softnet;

/// Bytes of each packet the sink copies out: the header and a little more.
/// MSG_TRUNC still reports every packet's real length.
const SLOT: usize = 64;

/// How long a thread waits in recvmmsg for a first packet before it looks
/// at the stop flag again.
const RECV_TIMEOUT: Duration = Duration::from_millis(100);

/// The socket receive buffer: what was asked, what the kernel granted.
#[derive(Debug, Clone, Serialize)]
pub struct RcvBuf {
    /// `--rcvbuf`, if given.
    pub requested: Option<u32>,
    /// getsockopt(SO_RCVBUF): the kernel doubles the request for its own
    /// bookkeeping and applies its minimum.
    pub granted: usize,
    /// Whether SO_RCVBUFFORCE (root: past net.core.rmem_max) was used.
    pub forced: bool,
}

/// Kernel counters' change over the run, in the sink's network namespace.
/// `None` when the file could not be read (or, for the Udp counters, when
/// the sink is bound to IPv6: those are in /proc/net/snmp6, not read yet).
#[derive(Debug, Clone, Default, Serialize)]
pub struct KernelDelta {
    pub udp_in_datagrams: Option<i64>,
    pub udp_in_errors: Option<i64>,
    pub udp_rcvbuf_errors: Option<i64>,
    pub udp_mem_errors: Option<i64>,
    pub udp_no_ports: Option<i64>,
    /// Packets dropped because a CPU's backlog was full (all CPUs).
    pub softnet_dropped: Option<u64>,
    /// NAPI rounds cut short by netdev_budget (all CPUs).
    pub softnet_time_squeeze: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ThreadReport {
    pub thread: usize,
    pub cpu: Option<u32>,
    pub packets: u64,
    pub bytes: u64,
    /// Packets per second over the run's traffic time.
    pub pps: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SinkReport {
    pub command: &'static str,
    pub bind: SocketAddr,
    pub threads: usize,
    pub reuseport: bool,
    pub batch: usize,
    pub rcvbuf: RcvBuf,
    pub ended: &'static str,
    /// How long the sink ran.
    pub duration_s: f64,
    /// From the first packet received to the last: rates are over this.
    pub traffic_s: f64,
    pub packets: u64,
    pub bytes: u64,
    pub pps: f64,
    pub per_thread: Vec<ThreadReport>,
    pub sequence: SequenceSummary,
    pub kernel: KernelDelta,
    pub intervals: Vec<Interval>,
}

/// What one receiving thread brings back.
struct ThreadResult {
    cpu: Option<u32>,
    packets: u64,
    bytes: u64,
    first: Option<Instant>,
    last: Option<Instant>,
    flows: FlowTable,
}

pub fn run(args: &SinkArgs) -> anyhow::Result<Status> {
    let root = Root::live();
    let pinning = Pinning::resolve(args.pin.as_deref(), &root)?;
    let threads = args.threads as usize;
    let socket_count = if args.reuseport { threads } else { 1 };
    let (sockets, rcvbuf) = open_sockets(args, socket_count)?;
    let bound = sockets[0]
        .local_addr()
        .context("cannot read the sink's bound address")?;
    eprintln!(
        "udp-sink: listening on {bound} ({} socket{}, {threads} thread{}, SO_RCVBUF {} bytes{})",
        socket_count,
        plural(socket_count),
        plural(threads),
        rcvbuf.granted,
        if rcvbuf.forced { ", forced" } else { "" }
    );
    warn_if_capped(&rcvbuf);

    let before = KernelSample::read(&root);
    stop::catch_ctrl_c()?;
    let stop_flag = AtomicBool::new(false);
    let live: Vec<LiveCounter> = (0..threads).map(|_| LiveCounter::default()).collect();
    let mut meter = IntervalMeter::new(threads);
    let mut progress = Progress::new(args.json);
    let batch = args.batch as usize;
    let start = Instant::now();

    let (ended, elapsed, results) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let socket = &sockets[if args.reuseport { i } else { 0 }];
                let (stop_flag, live, cpu) = (&stop_flag, &live[i], pinning.cpu_for(i));
                scope.spawn(move || receive(socket, batch, cpu, stop_flag, live))
            })
            .collect();
        let (ended, elapsed) = stop::run_ticking(start, args.duration, &stop_flag, |second| {
            let line = meter.tick(second, &live).line();
            if args.json {
                progress.show(&format!("udp-sink {second} s: {line}"));
            } else {
                // A closed stdout ends nothing here; the final report says so.
                let _ = print_line(&mut progress, &line);
            }
        });
        let results: Vec<anyhow::Result<ThreadResult>> = stop::join_all(handles, "receiving");
        (ended, elapsed, results)
    });
    progress.clear();
    let after = KernelSample::read(&root);
    let results = results.into_iter().collect::<anyhow::Result<Vec<_>>>()?;

    let report = build_report(
        args,
        bound,
        rcvbuf,
        ended,
        elapsed,
        results,
        before.delta(&after, bound.is_ipv4()),
        meter.intervals,
    );
    if args.json {
        report::print_json(&report)?;
    } else {
        print_text(&report)?;
    }
    Ok(Status::Clean)
}

/// Open the sink's sockets: one, or `count` SO_REUSEPORT sockets on the same
/// address (the first decides the port when `--bind` says port 0).
fn open_sockets(args: &SinkArgs, count: usize) -> anyhow::Result<(Vec<UdpSocket>, RcvBuf)> {
    let mut sockets: Vec<UdpSocket> = Vec::with_capacity(count);
    let mut rcvbuf = None;
    for _ in 0..count {
        let addr = match sockets.first() {
            Some(first) => first.local_addr()?,
            None => args.bind,
        };
        let (socket, granted) = open_socket(addr, args.reuseport, args.rcvbuf)
            .with_context(|| format!("--bind '{}'", args.bind))?;
        rcvbuf.get_or_insert(granted);
        sockets.push(socket);
    }
    let rcvbuf = rcvbuf.ok_or_else(|| anyhow::anyhow!("no socket was opened"))?;
    Ok((sockets, rcvbuf))
}

fn open_socket(
    addr: SocketAddr,
    reuseport: bool,
    rcvbuf: Option<u32>,
) -> anyhow::Result<(UdpSocket, RcvBuf)> {
    let family = if addr.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    let fd: OwnedFd = socket::socket(family, SockType::Datagram, SockFlag::SOCK_CLOEXEC, None)
        .context("cannot create a UDP socket")?;
    if reuseport {
        socket::setsockopt(&fd, sockopt::ReusePort, &true).context("cannot set SO_REUSEPORT")?;
    }
    let mut forced = false;
    if let Some(bytes) = rcvbuf {
        match socket::setsockopt(&fd, sockopt::RcvBufForce, &(bytes as usize)) {
            Ok(()) => forced = true,
            // Not root: the plain option, capped by net.core.rmem_max.
            Err(Errno::EPERM) => socket::setsockopt(&fd, sockopt::RcvBuf, &(bytes as usize))
                .with_context(|| format!("cannot set SO_RCVBUF to '{bytes}'"))?,
            Err(e) => {
                return Err(e).with_context(|| format!("cannot set SO_RCVBUFFORCE to '{bytes}'"))
            }
        }
    }
    let granted = socket::getsockopt(&fd, sockopt::RcvBuf).context("cannot read SO_RCVBUF")?;
    socket::bind(fd.as_raw_fd(), &SockaddrStorage::from(addr)).map_err(|e| bind_error(addr, e))?;
    let socket = UdpSocket::from(fd);
    socket
        .set_read_timeout(Some(RECV_TIMEOUT))
        .context("cannot set SO_RCVTIMEO")?;
    Ok((
        socket,
        RcvBuf {
            requested: rcvbuf,
            granted,
            forced,
        },
    ))
}

fn bind_error(addr: SocketAddr, e: Errno) -> anyhow::Error {
    let port = addr.port();
    match e {
        Errno::EADDRINUSE => anyhow::anyhow!(
            "address already in use: another socket holds port {port} \
             (`ss -ulpn 'sport = :{port}'` shows which); pick another port, or 0 for any"
        ),
        Errno::EADDRNOTAVAIL => anyhow::anyhow!(
            "no interface in this network namespace has address {} (`ip -br addr` lists them)",
            addr.ip()
        ),
        Errno::EACCES => {
            anyhow::anyhow!("port {port} is privileged: run as root or use a port above 1023")
        }
        other => anyhow::anyhow!("cannot bind: {}", other.desc()),
    }
}

fn warn_if_capped(rcvbuf: &RcvBuf) {
    if let Some(requested) = rcvbuf.requested {
        if !rcvbuf.forced && rcvbuf.granted < requested as usize {
            eprintln!(
                "udp-sink: warning: asked for --rcvbuf {requested}, got {} (net.core.rmem_max caps it; \
                 run as root to force it, or raise net.core.rmem_max)",
                rcvbuf.granted
            );
        }
    }
}

/// One receiving thread: recvmmsg until stopped. No allocation or lock per
/// batch: counters are plain locals, published with relaxed stores.
fn receive(
    socket: &UdpSocket,
    batch: usize,
    cpu: Option<u32>,
    stop: &AtomicBool,
    live: &LiveCounter,
) -> anyhow::Result<ThreadResult> {
    if let Some(cpu) = cpu {
        pin_current_thread(cpu)?;
    }
    let mut buffers = Batch::new(batch, SLOT);
    let mut result = ThreadResult {
        cpu,
        packets: 0,
        bytes: 0,
        first: None,
        last: None,
        flows: FlowTable::new(),
    };
    while !stop.load(Ordering::Relaxed) {
        let n = match buffers.recv(socket.as_fd()) {
            Ok(n) => n,
            Err(e) if is_retry(&e) => continue,
            Err(e) => return Err(e).context("recvmmsg failed"),
        };
        let now = Instant::now();
        result.first.get_or_insert(now);
        result.last = Some(now);
        for i in 0..n {
            let (len, head) = buffers.received(i);
            result.bytes += len as u64;
            result.flows.record(head);
        }
        result.packets += n as u64;
        live.publish(result.packets, result.bytes);
    }
    Ok(result)
}

/// Timeouts (nothing arrived) and signals (Ctrl-C) just mean "look at the
/// stop flag".
fn is_retry(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::Interrupted
    )
}

/// Kernel counters read at one moment; either may be unreadable.
struct KernelSample {
    snmp: Option<Counters>,
    softnet: Option<Vec<softnet::SoftnetCpu>>,
}

impl KernelSample {
    fn read(root: &Root) -> KernelSample {
        let snmp = Counters::read_snmp(root)
            .map_err(|e| eprintln!("udp-sink: warning: {e}; UDP counters not reported"))
            .ok();
        let softnet = softnet::read(root)
            .map_err(|e| eprintln!("udp-sink: warning: {e}; softnet drops not reported"))
            .ok();
        KernelSample { snmp, softnet }
    }

    fn delta(&self, after: &KernelSample, ipv4: bool) -> KernelDelta {
        let udp = |name: &str| -> Option<i64> {
            if !ipv4 {
                return None;
            }
            let before = self.snmp.as_ref()?.get("Udp", name)?;
            let after = after.snmp.as_ref()?.get("Udp", name)?;
            Some(after - before)
        };
        let softnet_sum = |field: fn(&softnet::SoftnetCpu) -> u64| -> Option<u64> {
            let sum = |cpus: &Option<Vec<softnet::SoftnetCpu>>| -> Option<u64> {
                Some(cpus.as_ref()?.iter().map(field).sum())
            };
            Some(sum(&after.softnet)?.saturating_sub(sum(&self.softnet)?))
        };
        KernelDelta {
            udp_in_datagrams: udp("InDatagrams"),
            udp_in_errors: udp("InErrors"),
            udp_rcvbuf_errors: udp("RcvbufErrors"),
            udp_mem_errors: udp("MemErrors"),
            udp_no_ports: udp("NoPorts"),
            softnet_dropped: softnet_sum(|c| c.dropped),
            softnet_time_squeeze: softnet_sum(|c| c.time_squeeze),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn build_report(
    args: &SinkArgs,
    bound: SocketAddr,
    rcvbuf: RcvBuf,
    ended: Ended,
    elapsed: Duration,
    results: Vec<ThreadResult>,
    kernel: KernelDelta,
    intervals: Vec<Interval>,
) -> SinkReport {
    let first = results.iter().filter_map(|r| r.first).min();
    let last = results.iter().filter_map(|r| r.last).max();
    let traffic_s = match (first, last) {
        (Some(first), Some(last)) => (last - first).as_secs_f64(),
        _ => 0.0,
    };
    // One batch alone has no duration: fall back to the whole run.
    let rate_window = if traffic_s > 0.0 {
        traffic_s
    } else {
        elapsed.as_secs_f64()
    };
    let per_thread = results
        .iter()
        .enumerate()
        .map(|(i, r)| ThreadReport {
            thread: i,
            cpu: r.cpu,
            packets: r.packets,
            bytes: r.bytes,
            pps: report::per_second(r.packets, 0, rate_window).0,
        })
        .collect::<Vec<_>>();
    let packets = results.iter().map(|r| r.packets).sum();
    let bytes = results.iter().map(|r| r.bytes).sum();
    let tables: Vec<FlowTable> = results.into_iter().map(|r| r.flows).collect();
    SinkReport {
        command: "udp-sink",
        bind: bound,
        threads: args.threads as usize,
        reuseport: args.reuseport,
        batch: args.batch as usize,
        rcvbuf,
        ended: match ended {
            Ended::Duration => "duration",
            Ended::Interrupted => "interrupted",
        },
        duration_s: elapsed.as_secs_f64(),
        traffic_s,
        packets,
        bytes,
        pps: report::per_second(packets, 0, rate_window).0,
        per_thread,
        sequence: flows::summarize(&tables),
        kernel,
        intervals,
    }
}

fn print_text(r: &SinkReport) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let window = if r.traffic_s > 0.0 {
        r.traffic_s
    } else {
        r.duration_s
    };
    writeln!(
        out,
        "udp-sink: {} packets, {} bytes in {:.3} s ({:.3} s of traffic){}",
        r.packets,
        r.bytes,
        r.duration_s,
        r.traffic_s,
        if r.ended == "interrupted" {
            ", stopped by Ctrl-C"
        } else {
            ""
        }
    )?;
    writeln!(out, "total     {}", format_rate(r.packets, r.bytes, window))?;
    for t in &r.per_thread {
        writeln!(
            out,
            "thread {:<2} {}  ({} packets)",
            t.thread,
            format_rate(t.packets, t.bytes, window),
            t.packets
        )?;
    }
    let s = &r.sequence;
    let expected = s.received + s.lost;
    writeln!(
        out,
        "sequence  {} sender{}, {} flow{}: {} received, {} lost ({:.3}%), {} reordered, {} duplicate, {} without header",
        s.senders,
        plural(s.senders as usize),
        s.flows,
        plural(s.flows as usize),
        s.received,
        s.lost,
        if expected > 0 { 100.0 * s.lost as f64 / expected as f64 } else { 0.0 },
        s.reordered,
        s.duplicates,
        s.without_header
    )?;
    let k = &r.kernel;
    let show = |v: Option<i64>| v.map_or("?".to_string(), |v| format!("+{v}"));
    let show_u = |v: Option<u64>| v.map_or("?".to_string(), |v| format!("+{v}"));
    writeln!(
        out,
        "kernel    Udp InDatagrams {}  InErrors {}  RcvbufErrors {}  MemErrors {}  NoPorts {}",
        show(k.udp_in_datagrams),
        show(k.udp_in_errors),
        show(k.udp_rcvbuf_errors),
        show(k.udp_mem_errors),
        show(k.udp_no_ports)
    )?;
    writeln!(
        out,
        "          softnet dropped {}  time_squeeze {}",
        show_u(k.softnet_dropped),
        show_u(k.softnet_time_squeeze)
    )?;
    writeln!(out, "where     {}", where_lost(s, k, &r.rcvbuf))?;
    Ok(())
}

/// One sentence on where the lost packets died, from the counters.
fn where_lost(s: &SequenceSummary, k: &KernelDelta, rcvbuf: &RcvBuf) -> String {
    let rcvbuf_errors = k.udp_rcvbuf_errors.unwrap_or(0).max(0) as u64;
    let mem_errors = k.udp_mem_errors.unwrap_or(0).max(0) as u64;
    let backlog = k.softnet_dropped.unwrap_or(0);
    let counted = rcvbuf_errors + mem_errors + backlog;
    if s.lost == 0 && counted == 0 {
        return "no packet lost".to_string();
    }
    let mut parts = Vec::new();
    if rcvbuf_errors > 0 {
        parts.push(format!(
            "{rcvbuf_errors} dropped by full socket buffers (RcvbufErrors: read faster with more \
             threads and --reuseport, or raise --rcvbuf from {} bytes)",
            rcvbuf.granted
        ));
    }
    if mem_errors > 0 {
        parts.push(format!(
            "{mem_errors} for lack of UDP memory (MemErrors: net.ipv4.udp_mem)"
        ));
    }
    if backlog > 0 {
        parts.push(format!(
            "{backlog} in full CPU backlogs (softnet dropped: net.core.netdev_max_backlog, RPS)"
        ));
    }
    let mut text = format!("{} lost by sequence", s.lost);
    if !parts.is_empty() {
        text.push_str("; the kernel counted ");
        text.push_str(&parts.join(", "));
    }
    if s.lost > counted {
        text.push_str(&format!(
            "; {} never reached this host's UDP layer (sender, network, NIC: see `ethtool -S`)",
            s.lost - counted
        ));
    } else if counted > s.lost {
        text.push_str(
            "; the counters exceed the sequence loss: drops after the last packet seen, \
             or other sockets in this network namespace",
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(received: u64, lost: u64) -> SequenceSummary {
        SequenceSummary {
            senders: 1,
            flows: 1,
            received,
            lost,
            ..SequenceSummary::default()
        }
    }

    fn kernel(rcvbuf_errors: i64, softnet_dropped: u64) -> KernelDelta {
        KernelDelta {
            udp_rcvbuf_errors: Some(rcvbuf_errors),
            udp_mem_errors: Some(0),
            softnet_dropped: Some(softnet_dropped),
            ..KernelDelta::default()
        }
    }

    const RCVBUF: RcvBuf = RcvBuf {
        requested: None,
        granted: 212_992,
        forced: false,
    };

    #[test]
    fn where_names_the_socket_buffer_and_the_rest() {
        let text = where_lost(&summary(900, 100), &kernel(60, 0), &RCVBUF);
        assert!(text.starts_with("100 lost by sequence"), "{text}");
        assert!(text.contains("60 dropped by full socket buffers"), "{text}");
        assert!(text.contains("from 212992 bytes"), "{text}");
        assert!(
            text.contains("40 never reached this host's UDP layer"),
            "{text}"
        );
    }

    #[test]
    fn where_explains_counters_above_the_sequence_loss() {
        let text = where_lost(&summary(900, 10), &kernel(0, 25), &RCVBUF);
        assert!(text.contains("25 in full CPU backlogs"), "{text}");
        assert!(text.contains("exceed the sequence loss"), "{text}");
        assert_eq!(
            where_lost(&summary(5, 0), &kernel(0, 0), &RCVBUF),
            "no packet lost"
        );
    }
}
