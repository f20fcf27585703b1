//! One client thread: an epoll loop driving its share of the instances,
//! each a closed loop of one request and one reply at a time. TCP and UDP
//! share the loop, the counting and the stop; they differ in how a
//! transaction moves ([`TcpInstance`], [`UdpInstance`]).

use std::io::{self, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::conn::would_block;
use super::measure::thread_cpu;
use super::wire::{self, Datagram, Hello, Stage, CHECK_LEN};
use super::Sizes;
use crate::base::epoll::{Epoll, Interest, Ready};
use crate::bench::busy_poll::BusyPoll;
use crate::bench::harness::Phase;
use crate::bench::latency::Latency;
use crate::bench::report::LiveCounter;

/// Bytes per read or write system call.
const CHUNK: usize = 64 * 1024;
/// How often a TCP loop with nothing to do looks at the flags.
const IDLE_WAIT: Duration = Duration::from_millis(50);
/// The longest a UDP resend timeout grows to.
const MAX_RESEND_AFTER: Duration = Duration::from_secs(1);
/// The longest a lone TCP instance blocks in a read before it looks at the
/// phase: the bound on how late it sees the end of the run.
const LONE_WAIT: Duration = Duration::from_millis(50);

/// A thread's instances, already through the hello.
pub enum Instances {
    Tcp(Vec<TcpStream>),
    Udp(Vec<UdpFlow>),
}

/// A UDP instance's socket and the greeting it sends again when the server
/// seems to have forgotten it (a plain hello, or its address-check proof).
pub struct UdpFlow {
    pub socket: UdpSocket,
    pub hello: Vec<u8>,
}

impl Instances {
    pub fn len(&self) -> usize {
        match self {
            Instances::Tcp(v) => v.len(),
            Instances::Udp(v) => v.len(),
        }
    }
}

/// What a thread does, fixed before it starts.
pub struct Plan {
    pub cpu: Option<u32>,
    pub sizes: Sizes,
    /// UDP: the first resend timeout of each request.
    pub resend_after: Duration,
    /// Busy polling for the thread's epoll instance (its sockets have it).
    pub busy: BusyPoll,
}

/// Counts over the measured part of the run (warm-up excluded).
#[derive(Default)]
pub struct Counts {
    pub transactions: u64,
    pub latency: Latency,
    /// UDP requests sent again after a timeout.
    pub resends: u64,
    /// UDP replies to a request already answered (the reply to a resend's
    /// original, or a duplicate): ignored.
    pub late_replies: u64,
    /// UDP datagrams of the wrong size: ignored.
    pub bad_replies: u64,
    /// Send or receive errors (UDP: ICMP unreachable shows up here).
    pub errors: u64,
    /// TCP connections the server closed or reset during the run.
    pub closed: u64,
    /// The first error seen, for the report.
    pub first_error: Option<String>,
}

impl Counts {
    fn error(&mut self, what: &str, e: &io::Error) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(format!("{what}: {e}"));
        }
    }
}

pub struct ThreadResult {
    pub cpu: Option<u32>,
    pub instances: usize,
    pub counts: Counts,
    /// This thread's (user, system) CPU time over the measured part.
    pub cpu_time: (Duration, Duration),
}

/// Run one thread until the phase stops it, or its instances are all gone.
/// Transactions before the measured part only warm up: the counts start
/// over when it begins.
pub fn run(
    instances: Instances,
    plan: &Plan,
    phase: &Phase,
    live: &LiveCounter,
) -> anyhow::Result<ThreadResult> {
    let count = instances.len();
    let mut poll = Epoll::new(count.min(1024)).context("cannot create an epoll instance")?;
    plan.busy.apply_epoll(poll.as_fd())?;
    let mut counts = Counts::default();
    let per = (plan.sizes.request + plan.sizes.reply) as u64;
    let cpu_time = match instances {
        Instances::Tcp(streams) => {
            let mut all = TcpLoop::new(streams, plan.sizes, &poll)?;
            drive(&mut poll, phase, live, &mut counts, &mut all, per)?
        }
        Instances::Udp(flows) => {
            let mut all = UdpLoop::new(flows, plan, &poll)?;
            drive(&mut poll, phase, live, &mut counts, &mut all, per)?
        }
    };
    Ok(ThreadResult {
        cpu: plan.cpu,
        instances: count,
        counts,
        cpu_time,
    })
}

/// The part of the loop that differs between TCP and UDP.
trait Transactions {
    /// Send every instance's first request.
    fn start(&mut self, poll: &Epoll, counts: &mut Counts);
    /// Handle one ready socket.
    fn on_ready(&mut self, event: Ready, poll: &Epoll, counts: &mut Counts);
    /// Timers due by `now`; returns how long the loop may sleep.
    fn on_tick(&mut self, now: Instant, counts: &mut Counts) -> Duration;
    /// Instances still running.
    fn alive(&self) -> usize;
    /// The sockets block (with a timeout): a thread with one instance.
    fn blocking(&self) -> bool;
}

/// What a thread with one blocking instance acts on: try everything, the
/// socket's timeout bounds the wait.
const ONLY_INSTANCE: Ready = Ready {
    token: 0,
    readable: true,
    writable: true,
    hangup: false,
};

/// Returns this thread's CPU time over the measured part.
fn drive(
    poll: &mut Epoll,
    phase: &Phase,
    live: &LiveCounter,
    counts: &mut Counts,
    all: &mut impl Transactions,
    bytes_per_transaction: u64,
) -> anyhow::Result<(Duration, Duration)> {
    let mut measured_from = None;
    all.start(poll, counts);
    let mut wait = all.on_tick(Instant::now(), counts);
    while !phase.stopped() && all.alive() > 0 {
        if measured_from.is_none() && phase.measuring() {
            // Warm-up over: count from here. A connection lost in the
            // warm-up stays reported.
            measured_from = Some(thread_cpu()?);
            *counts = Counts {
                closed: counts.closed,
                first_error: counts.first_error.take(),
                ..Counts::default()
            };
        }
        if all.alive() == 1 && all.blocking() {
            // One instance: a blocking call with a timeout on its socket
            // saves the epoll_wait per transaction (sockperf does the same).
            all.on_ready(ONLY_INSTANCE, poll, counts);
        } else {
            for event in poll.wait(Some(wait)).context("epoll_wait")? {
                all.on_ready(event, poll, counts);
            }
        }
        wait = all.on_tick(Instant::now(), counts);
        live.publish(
            counts.transactions,
            counts.transactions * bytes_per_transaction,
        );
    }
    let Some((user, sys)) = measured_from else {
        return Ok((Duration::ZERO, Duration::ZERO));
    };
    let (user_now, sys_now) = thread_cpu()?;
    Ok((user_now.saturating_sub(user), sys_now.saturating_sub(sys)))
}

/// A TCP connection's transaction in progress.
struct TcpInstance {
    stream: TcpStream,
    started: Instant,
    to_send: usize,
    to_receive: usize,
    /// Registered for EPOLLOUT (a request did not fit the send buffer).
    writing: bool,
}

struct TcpLoop {
    blocking: bool,
    instances: Vec<Option<TcpInstance>>,
    sizes: Sizes,
    request: Vec<u8>,
    scratch: Vec<u8>,
    alive: usize,
}

impl TcpLoop {
    fn new(streams: Vec<TcpStream>, sizes: Sizes, poll: &Epoll) -> anyhow::Result<TcpLoop> {
        let now = Instant::now();
        let mut instances = Vec::with_capacity(streams.len());
        let blocking = streams.len() == 1;
        for (i, stream) in streams.into_iter().enumerate() {
            if blocking {
                // A lone instance blocks in its read (sockperf's way: no
                // epoll_wait per transaction), at most LONE_WAIT at a time.
                stream.set_nonblocking(false).context("O_NONBLOCK")?;
                stream
                    .set_read_timeout(Some(LONE_WAIT))
                    .context("SO_RCVTIMEO")?;
                stream
                    .set_write_timeout(Some(LONE_WAIT))
                    .context("SO_SNDTIMEO")?;
            } else {
                stream.set_nonblocking(true).context("O_NONBLOCK")?;
            }
            poll.add(stream.as_raw_fd(), i as u64, Interest::READ)
                .context("epoll_ctl(connection)")?;
            instances.push(Some(TcpInstance {
                stream,
                started: now,
                to_send: 0,
                to_receive: 0,
                writing: false,
            }));
        }
        Ok(TcpLoop {
            blocking,
            alive: instances.len(),
            instances,
            sizes,
            request: vec![0; sizes.request.min(CHUNK)],
            scratch: vec![0; sizes.reply.min(CHUNK)],
        })
    }

    /// Begin instance `i`'s next transaction.
    fn send_request(&mut self, i: usize, poll: &Epoll, counts: &mut Counts) {
        if let Some(inst) = self.instances[i].as_mut() {
            inst.started = Instant::now();
            inst.to_send = self.sizes.request;
            inst.to_receive = self.sizes.reply;
        }
        self.write_request(i, poll, counts);
    }

    fn write_request(&mut self, i: usize, poll: &Epoll, counts: &mut Counts) {
        let Some(inst) = self.instances[i].as_mut() else {
            return;
        };
        while inst.to_send > 0 {
            let len = inst.to_send.min(self.request.len());
            match inst.stream.write(&self.request[..len]) {
                Ok(n) => inst.to_send -= n,
                Err(e) if would_block(&e) => break,
                Err(e) => {
                    self.close(i, counts, &e);
                    return;
                }
            }
        }
        let want_write = inst.to_send > 0;
        if want_write != inst.writing {
            let interest = if want_write {
                Interest::READ_WRITE
            } else {
                Interest::READ
            };
            if let Err(e) = poll.modify(inst.stream.as_raw_fd(), i as u64, interest) {
                self.close(i, counts, &e);
                return;
            }
            inst.writing = want_write;
        }
    }

    fn close(&mut self, i: usize, counts: &mut Counts, e: &io::Error) {
        if self.instances[i].take().is_some() {
            self.alive -= 1;
            counts.closed += 1;
            counts.error("TCP connection", e);
        }
    }
}

impl Transactions for TcpLoop {
    fn start(&mut self, poll: &Epoll, counts: &mut Counts) {
        for i in 0..self.instances.len() {
            self.send_request(i, poll, counts);
        }
    }

    fn on_ready(&mut self, event: Ready, poll: &Epoll, counts: &mut Counts) {
        let i = event.token as usize;
        let Some(inst) = self.instances.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        if inst.to_send > 0 {
            // The reply cannot come before the whole request went out.
            if event.writable || event.hangup {
                self.write_request(i, poll, counts);
            }
            return;
        }
        if !(event.readable || event.hangup) {
            return;
        }
        let len = inst.to_receive.min(self.scratch.len()).max(1);
        match inst.stream.read(&mut self.scratch[..len]) {
            Ok(0) => {
                let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "closed by the server");
                self.close(i, counts, &eof);
            }
            Ok(n) if n > inst.to_receive => {
                let extra = io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the server sent more than the reply size (not an rr-server?)",
                );
                self.close(i, counts, &extra);
            }
            Ok(n) => {
                inst.to_receive -= n;
                if inst.to_receive == 0 {
                    counts.latency.record(inst.started.elapsed());
                    counts.transactions += 1;
                    self.send_request(i, poll, counts);
                }
            }
            Err(e) if would_block(&e) => {}
            Err(e) => self.close(i, counts, &e),
        }
    }

    fn on_tick(&mut self, _now: Instant, _counts: &mut Counts) -> Duration {
        IDLE_WAIT
    }

    fn alive(&self) -> usize {
        self.alive
    }

    fn blocking(&self) -> bool {
        self.blocking
    }
}

/// A UDP flow's transaction in progress.
struct UdpInstance {
    socket: UdpSocket,
    /// Sent again after a second timeout of the same request.
    hello: Vec<u8>,
    seq: u32,
    /// When the current request was first sent (latency counts from here).
    started: Instant,
    last_sent: Instant,
    resend_after: Duration,
    /// The current request was sent more than once.
    resent: bool,
}

/// The resend timeout, computed as TCP computes its RTO (RFC 6298): a
/// smoothed round trip plus four times its variation, from replies to
/// requests sent once (Karn), never below `--resend-after`. With many
/// instances the round trip grows with the queue (instances / rate): a
/// fixed 10 ms would then resend requests that are merely waiting.
#[derive(Debug)]
struct ResendTimer {
    floor: Duration,
    /// Smoothed round trip and its mean deviation, ns; None before the first.
    srtt: Option<f64>,
    rttvar: f64,
}

impl ResendTimer {
    fn new(floor: Duration) -> ResendTimer {
        ResendTimer {
            floor,
            srtt: None,
            rttvar: 0.0,
        }
    }

    fn sample(&mut self, rtt: Duration) {
        let r = rtt.as_nanos() as f64;
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2.0;
            }
            Some(srtt) => {
                self.rttvar = 0.75 * self.rttvar + 0.25 * (srtt - r).abs();
                self.srtt = Some(0.875 * srtt + 0.125 * r);
            }
        }
    }

    fn timeout(&self) -> Duration {
        let estimate = self.srtt.map_or(Duration::ZERO, |srtt| {
            Duration::from_nanos((srtt + 4.0 * self.rttvar) as u64)
        });
        estimate.max(self.floor).min(MAX_RESEND_AFTER)
    }
}

struct UdpLoop {
    blocking: bool,
    instances: Vec<UdpInstance>,
    sizes: Sizes,
    width: usize,
    hello: Hello,
    request: Vec<u8>,
    scratch: Vec<u8>,
    timer: ResendTimer,
    /// How often timers are checked: a quarter of the first timeout, at
    /// most 1 ms, so a resend is at most that late.
    scan_every: Duration,
    next_scan: Instant,
}

impl UdpLoop {
    fn new(flows: Vec<UdpFlow>, plan: &Plan, poll: &Epoll) -> anyhow::Result<UdpLoop> {
        let now = Instant::now();
        let blocking = flows.len() == 1;
        // Blocking: look at the timer whenever the read returns (its
        // timeout is the resend floor, so a resend is at most that late).
        let scan_every = if blocking {
            Duration::ZERO
        } else {
            (plan.resend_after / 4).min(Duration::from_millis(1))
        };
        let mut instances = Vec::with_capacity(flows.len());
        for (i, UdpFlow { socket, hello }) in flows.into_iter().enumerate() {
            if blocking {
                socket.set_nonblocking(false).context("O_NONBLOCK")?;
                socket
                    .set_read_timeout(Some(plan.resend_after.min(LONE_WAIT)))
                    .context("SO_RCVTIMEO")?;
            }
            poll.add(socket.as_raw_fd(), i as u64, Interest::READ)
                .context("epoll_ctl(udp flow)")?;
            instances.push(UdpInstance {
                socket,
                hello,
                seq: 0,
                started: now,
                last_sent: now,
                resend_after: plan.resend_after,
                resent: false,
            });
        }
        let sizes = plan.sizes;
        Ok(UdpLoop {
            blocking,
            instances,
            sizes,
            width: wire::seq_width(sizes.request, sizes.reply),
            hello: Hello {
                request: sizes.request as u32,
                reply: sizes.reply as u32,
            },
            request: vec![0; sizes.request],
            // One byte more than a reply, to see an oversized one.
            scratch: vec![0; sizes.reply.max(CHECK_LEN) + 1],
            timer: ResendTimer::new(plan.resend_after),
            scan_every,
            next_scan: now + scan_every,
        })
    }

    fn send(&mut self, i: usize, counts: &mut Counts) {
        let inst = &mut self.instances[i];
        wire::stamp(&mut self.request, inst.seq, self.width);
        inst.last_sent = Instant::now();
        loop {
            match inst.socket.send(&self.request) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // The timer resends; ICMP unreachable and full buffers end here.
                Err(e) => {
                    counts.error("UDP send", &e);
                    break;
                }
            }
        }
    }
}

impl Transactions for UdpLoop {
    fn start(&mut self, _poll: &Epoll, counts: &mut Counts) {
        for i in 0..self.instances.len() {
            self.instances[i].started = Instant::now();
            self.send(i, counts);
        }
    }

    fn on_ready(&mut self, event: Ready, _poll: &Epoll, counts: &mut Counts) {
        let i = event.token as usize;
        if i >= self.instances.len() {
            return;
        }
        // A few datagrams per readiness: a late reply may queue before the
        // one awaited. After a completion the next reply cannot be there
        // yet: epoll says when (a blocking lone instance just waits for it).
        for _ in 0..4 {
            let inst = &mut self.instances[i];
            let n = match inst.socket.recv(&mut self.scratch) {
                Ok(n) => n,
                Err(e) if would_block(&e) => return,
                Err(e) => {
                    counts.error("UDP receive", &e);
                    return;
                }
            };
            let datagram = &self.scratch[..n.min(self.scratch.len())];
            // Replies are zeros after at most 4 sequence bytes: never a
            // hello's magic. Answers to resent hellos are expected.
            match wire::parse_datagram(datagram) {
                Datagram::Other => {}
                Datagram::Check {
                    hello,
                    stage: Stage::Cookie,
                    cookie,
                } if hello == self.hello => {
                    // A restarted server (a new secret): prove again.
                    inst.hello = hello.encode_check(Stage::Client, &cookie).to_vec();
                    let _ = inst.socket.send(&inst.hello);
                    continue;
                }
                _ => continue,
            }
            if n != self.sizes.reply {
                counts.bad_replies += 1;
                continue;
            }
            if !wire::carries(datagram, inst.seq, self.width) {
                counts.late_replies += 1;
                continue;
            }
            let rtt = inst.started.elapsed();
            counts.latency.record(rtt);
            counts.transactions += 1;
            if !inst.resent {
                self.timer.sample(rtt);
            }
            inst.seq = inst.seq.wrapping_add(1);
            inst.resend_after = self.timer.timeout();
            inst.resent = false;
            inst.started = Instant::now();
            self.send(i, counts);
            if !self.blocking {
                return;
            }
        }
    }

    fn on_tick(&mut self, now: Instant, counts: &mut Counts) -> Duration {
        if now >= self.next_scan {
            self.next_scan = now + self.scan_every;
            for i in 0..self.instances.len() {
                let inst = &mut self.instances[i];
                if now.saturating_duration_since(inst.last_sent) < inst.resend_after {
                    continue;
                }
                // A second timeout of the same request: the server may
                // have forgotten the flow (restarted); say hello again.
                if inst.resent {
                    let _ = inst.socket.send(&inst.hello);
                }
                inst.resent = true;
                inst.resend_after = (inst.resend_after * 2).min(MAX_RESEND_AFTER);
                counts.resends += 1;
                self.send(i, counts);
            }
        }
        self.next_scan.saturating_duration_since(now)
    }

    fn alive(&self) -> usize {
        self.instances.len()
    }

    fn blocking(&self) -> bool {
        self.blocking
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resend_timeout_follows_the_round_trip_above_the_floor() {
        let ms = Duration::from_millis;
        let mut timer = ResendTimer::new(ms(10));
        assert_eq!(timer.timeout(), ms(10), "no sample yet: the floor");
        // Fast replies (20 us) keep the floor.
        for _ in 0..50 {
            timer.sample(Duration::from_micros(20));
        }
        assert_eq!(timer.timeout(), ms(10));
        // A queue of 1500 instances at 200k/s: 7.5 ms round trips, varying.
        for i in 0..200 {
            timer.sample(ms(5 + (i % 6)));
        }
        let t = timer.timeout();
        assert!(t > ms(10) && t < ms(30), "{t:?}");
        // Never past the 1 s ceiling.
        for _ in 0..50 {
            timer.sample(Duration::from_secs(5));
        }
        assert_eq!(timer.timeout(), MAX_RESEND_AFTER);
    }
}
