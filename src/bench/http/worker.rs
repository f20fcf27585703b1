//! One `bench http` load thread: an epoll loop over its keep-alive
//! connections, the open loop's timetable, and the thread's own counters
//! and histograms (returned when it stops, merged after join).

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::errno::Errno;
use nix::sys::socket::{
    self, recv, send, sockopt, AddressFamily, MsgFlags, SockFlag, SockType, SockaddrStorage,
};

use super::output::ThreadStats;
use super::response::{Completed, ResponseReader};
use crate::base::epoll::{Epoll, Interest, Ready};
use crate::bench::harness::Phase as RunPhase;
use crate::bench::latency::Latency;
use crate::bench::report::LiveCounter;

/// Longest epoll wait: the stop flag and housekeeping are looked at least
/// this often.
const MAX_WAIT: Duration = Duration::from_millis(10);
/// Req/Sec samples, timeouts and reconnections, like wrk's 100 ms records.
const HOUSEKEEPING: Duration = Duration::from_millis(100);
const READ_CHUNK: usize = 64 * 1024;

/// The open loop's timetable: request k is due at start + k / rate.
struct Schedule {
    start: Instant,
    interval_ns: f64,
    next: u64,
}

impl Schedule {
    fn due_at(&self, k: u64) -> Instant {
        self.start + Duration::from_nanos((k as f64 * self.interval_ns) as u64)
    }

    /// Requests due by `now` and not yet sent.
    fn behind(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.start).as_nanos() as f64;
        ((elapsed / self.interval_ns) as u64 + 1).saturating_sub(self.next)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connecting,
    Open,
    Down { retry_at: Instant },
}

/// When a request was due and when it went out (the same in closed loop).
#[derive(Debug, Clone, Copy)]
struct Sent {
    due: Instant,
    sent: Instant,
}

struct Conn {
    stream: Option<TcpStream>,
    phase: Phase,
    generation: u32,
    reader: ResponseReader,
    in_flight: VecDeque<Sent>,
    /// Bytes of queued requests not yet written.
    unsent: usize,
    /// Registered for writability (a send did not take everything).
    writing: bool,
    /// Connect failures (or closes before any response) in a row.
    failures: u32,
    /// Open loop: in the free list.
    listed: bool,
    since: Instant,
}

/// What every thread shares (read only).
pub(super) struct Shared<'a> {
    pub(super) addr: SocketAddr,
    /// The request repeated `pipeline` times: any run of queued requests is
    /// a suffix of it, so unsent output is just a byte count.
    pub(super) batch: &'a [u8],
    pub(super) request_len: usize,
    pub(super) pipeline: usize,
    pub(super) timeout: Duration,
    /// Statistics count from here (after the warm-up).
    pub(super) record_from: Instant,
    pub(super) phase: &'a RunPhase,
}

/// One thread's share.
pub(super) struct Plan {
    pub(super) cpu: Option<u32>,
    pub(super) connections: usize,
    pub(super) rate: Option<u64>,
}

pub(super) struct Worker<'a> {
    shared: &'a Shared<'a>,
    epoll: Epoll,
    conns: Vec<Conn>,
    schedule: Option<Schedule>,
    /// Open loop: connections that can take another request.
    free: VecDeque<usize>,
    scratch: Vec<u8>,
    completed: Vec<Completed>,
    stats: ThreadStats,
    sampled_at: Instant,
    sampled_requests: u64,
    /// Closed loop: connections with requests queued during this batch of
    /// events, sent together after it.
    to_flush: Vec<usize>,
}

impl<'a> Worker<'a> {
    pub(super) fn new(shared: &'a Shared<'a>, plan: Plan) -> anyhow::Result<Worker<'a>> {
        if plan.rate.is_some() {
            precise_timers();
        }
        let now = Instant::now();
        let conns = (0..plan.connections)
            .map(|_| Conn {
                stream: None,
                phase: Phase::Down { retry_at: now },
                generation: 0,
                reader: ResponseReader::default(),
                in_flight: VecDeque::with_capacity(shared.pipeline),
                unsent: 0,
                writing: false,
                failures: 0,
                listed: false,
                since: now,
            })
            .collect();
        Ok(Worker {
            shared,
            epoll: Epoll::new(256).context("cannot create an epoll instance")?,
            conns,
            schedule: plan.rate.map(|rate| Schedule {
                start: now,
                interval_ns: 1e9 / rate as f64,
                next: 0,
            }),
            free: VecDeque::with_capacity(plan.connections),
            scratch: vec![0; READ_CHUNK],
            completed: Vec::new(),
            stats: ThreadStats {
                cpu: plan.cpu,
                connections: plan.connections,
                uncorrected: plan.rate.map(|_| Latency::new()),
                ..ThreadStats::default()
            },
            sampled_at: shared.record_from,
            sampled_requests: 0,
            to_flush: Vec::with_capacity(plan.connections),
        })
    }

    pub(super) fn run(mut self, live: &LiveCounter) -> anyhow::Result<ThreadStats> {
        let now = Instant::now();
        for i in 0..self.conns.len() {
            self.connect(i, now);
        }
        let mut ready: Vec<Ready> = Vec::with_capacity(256);
        let mut next_housekeeping = now + HOUSEKEEPING;
        while !self.shared.phase.stopped() {
            let now = Instant::now();
            self.dispatch_due(now);
            if now >= next_housekeeping {
                self.housekeeping(now);
                live.publish(self.stats.requests, self.stats.bytes);
                next_housekeeping = now + HOUSEKEEPING;
            }
            let timeout = self.wait_time(now, next_housekeeping);
            self.epoll
                .wait_into(Some(timeout), &mut ready)
                .context("epoll wait failed")?;
            for event in &ready {
                self.on_event(*event);
            }
            // Closed loop: the next requests go out after the whole batch
            // of responses is read, so the server is woken once for all of
            // them (about 10% more requests per second than sending each
            // at once, on 2 shared CPUs).
            let mut to_flush = std::mem::take(&mut self.to_flush);
            for &i in &to_flush {
                self.flush(i, Instant::now());
            }
            to_flush.clear();
            self.to_flush = to_flush;
        }
        if let Some(schedule) = &self.schedule {
            self.stats.unsent_at_end = schedule.behind(Instant::now());
        }
        Ok(self.stats)
    }

    /// Until the next due request (open loop, a connection free), the next
    /// housekeeping, or [`MAX_WAIT`].
    fn wait_time(&self, now: Instant, next_housekeeping: Instant) -> Duration {
        let mut until = next_housekeeping.min(now + MAX_WAIT);
        if let Some(schedule) = &self.schedule {
            if !self.free.is_empty() {
                until = until.min(schedule.due_at(schedule.next));
            }
        }
        until.saturating_duration_since(now)
    }

    fn token(&self, i: usize) -> u64 {
        (u64::from(self.conns[i].generation) << 32) | i as u64
    }

    /// Open a fresh socket for connection `i` (non-blocking connect).
    fn connect(&mut self, i: usize, now: Instant) {
        let conn = &mut self.conns[i];
        conn.generation = conn.generation.wrapping_add(1);
        conn.stream = None;
        conn.reader = ResponseReader::default();
        conn.in_flight.clear();
        conn.unsent = 0;
        conn.writing = false;
        conn.since = now;
        let token = self.token(i);
        let started = start_connect(self.shared.addr).and_then(|(stream, done)| {
            let interest = if done {
                Interest::READ
            } else {
                Interest::READ_WRITE
            };
            self.epoll.add(stream.as_raw_fd(), token, interest)?;
            Ok((stream, done))
        });
        match started {
            Ok((stream, done)) => {
                let conn = &mut self.conns[i];
                conn.stream = Some(stream);
                conn.phase = Phase::Connecting;
                if done {
                    self.opened(i, now);
                }
            }
            Err(_) => {
                self.stats.errors.connect += 1;
                self.fail(i, now);
            }
        }
    }

    /// Take connection `i` down; it reconnects after a back-off that grows
    /// with failures in a row (none after a clean close).
    fn fail(&mut self, i: usize, now: Instant) {
        let conn = &mut self.conns[i];
        conn.failures = conn.failures.saturating_add(1);
        self.down(i, now);
    }

    fn down(&mut self, i: usize, now: Instant) {
        let conn = &mut self.conns[i];
        // Dropping the stream closes it and removes it from epoll.
        conn.stream = None;
        conn.in_flight.clear();
        conn.unsent = 0;
        let backoff = match conn.failures {
            0 => Duration::ZERO,
            n => Duration::from_millis(10u64 << (n - 1).min(7)).min(Duration::from_secs(1)),
        };
        conn.phase = Phase::Down {
            retry_at: now + backoff,
        };
        if backoff.is_zero() && !self.shared.phase.stopped() {
            self.connect(i, now);
        }
    }

    fn opened(&mut self, i: usize, now: Instant) {
        let token = self.token(i);
        let conn = &mut self.conns[i];
        conn.phase = Phase::Open;
        conn.since = now;
        let Some(stream) = &conn.stream else { return };
        conn.writing = false;
        if self
            .epoll
            .modify(stream.as_raw_fd(), token, Interest::READ)
            .is_err()
        {
            self.stats.errors.connect += 1;
            self.fail(i, now);
            return;
        }
        if self.schedule.is_some() {
            self.make_free(i);
        } else {
            for _ in 0..self.shared.pipeline {
                self.queue(i, now, now);
            }
            self.flush(i, now);
        }
    }

    fn queue(&mut self, i: usize, due: Instant, sent: Instant) {
        let conn = &mut self.conns[i];
        conn.in_flight.push_back(Sent { due, sent });
        conn.unsent += self.shared.request_len;
    }

    fn make_free(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        if !conn.listed && conn.phase == Phase::Open && conn.in_flight.len() < self.shared.pipeline
        {
            conn.listed = true;
            self.free.push_back(i);
        }
    }

    /// Open loop: hand every due request to a free connection.
    fn dispatch_due(&mut self, now: Instant) {
        loop {
            let Some(schedule) = &self.schedule else {
                return;
            };
            let due = schedule.due_at(schedule.next);
            if due > now {
                return;
            }
            let Some(i) = self.pop_free() else { return };
            if let Some(schedule) = &mut self.schedule {
                schedule.next += 1;
            }
            self.queue(i, due, now);
            self.flush(i, now);
            self.make_free(i);
        }
    }

    fn pop_free(&mut self) -> Option<usize> {
        while let Some(i) = self.free.pop_front() {
            let conn = &mut self.conns[i];
            conn.listed = false;
            if conn.phase == Phase::Open && conn.in_flight.len() < self.shared.pipeline {
                return Some(i);
            }
        }
        None
    }

    /// Write queued requests; a full socket waits for writability.
    /// Requests none of whose bytes went out yet are stamped as sent now
    /// (in closed loop, also as due now: latency starts at the send, as
    /// wrk's does).
    fn flush(&mut self, i: usize, now: Instant) {
        let token = self.token(i);
        let closed_loop = self.schedule.is_none();
        let conn = &mut self.conns[i];
        let Some(stream) = &conn.stream else { return };
        let fd = stream.as_raw_fd();
        let untouched = conn.unsent / self.shared.request_len;
        for request in conn.in_flight.iter_mut().rev().take(untouched) {
            request.sent = now;
            if closed_loop {
                request.due = now;
            }
        }
        while conn.unsent > 0 {
            let from = self.shared.batch.len() - conn.unsent;
            match send(fd, &self.shared.batch[from..], MsgFlags::MSG_NOSIGNAL) {
                Ok(n) => conn.unsent -= n,
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => break,
                Err(_) => {
                    self.stats.errors.write += 1;
                    self.fail(i, now);
                    return;
                }
            }
        }
        let want_write = conn.unsent > 0;
        if want_write != conn.writing {
            let interest = if want_write {
                Interest::READ_WRITE
            } else {
                Interest::READ
            };
            if self.epoll.modify(fd, token, interest).is_ok() {
                conn.writing = want_write;
            }
        }
    }

    fn on_event(&mut self, event: Ready) {
        let i = (event.token & 0xffff_ffff) as usize;
        if self.conns.get(i).map(|c| c.generation) != Some((event.token >> 32) as u32) {
            return; // for a socket closed earlier in this batch
        }
        match self.conns[i].phase {
            Phase::Connecting if event.writable || event.hangup => {
                let now = Instant::now();
                let ok = self.conns[i]
                    .stream
                    .as_ref()
                    .is_some_and(|s| matches!(socket::getsockopt(s, sockopt::SocketError), Ok(0)));
                if ok {
                    self.opened(i, now);
                } else {
                    self.stats.errors.connect += 1;
                    self.fail(i, now);
                }
            }
            Phase::Open => {
                if event.writable {
                    self.flush(i, Instant::now());
                }
                if (event.readable || event.hangup) && self.conns[i].phase == Phase::Open {
                    self.on_readable(i);
                }
            }
            _ => {}
        }
    }

    /// Read once; complete responses free their requests' slots.
    fn on_readable(&mut self, i: usize) {
        let Some(stream) = &self.conns[i].stream else {
            return;
        };
        let received = recv(stream.as_raw_fd(), &mut self.scratch, MsgFlags::empty());
        let now = Instant::now();
        let n = match received {
            Ok(0) => {
                let conn = &self.conns[i];
                if conn.in_flight.is_empty() && conn.reader.idle() {
                    self.down(i, now); // the server closed an idle connection
                } else {
                    self.stats.errors.read += 1;
                    self.fail(i, now);
                }
                return;
            }
            Ok(n) => n,
            Err(Errno::EAGAIN) | Err(Errno::EINTR) => return,
            Err(_) => {
                self.stats.errors.read += 1;
                self.fail(i, now);
                return;
            }
        };
        let recording = now >= self.shared.record_from;
        if recording {
            self.stats.bytes += n as u64;
        }
        self.completed.clear();
        let conn = &mut self.conns[i];
        let fed = conn.reader.feed(&self.scratch[..n], &mut self.completed);
        let mut close = false;
        for done in &self.completed {
            let Some(sent) = conn.in_flight.pop_front() else {
                self.stats
                    .errors
                    .note_protocol("more responses than requests");
                self.fail(i, now);
                return;
            };
            if recording {
                self.stats.requests += 1;
                self.stats.statuses.count(done.status);
                self.stats
                    .latency
                    .record(now.saturating_duration_since(sent.due));
                if let Some(uncorrected) = &mut self.stats.uncorrected {
                    uncorrected.record(now.saturating_duration_since(sent.sent));
                }
            }
            close |= done.close;
        }
        if !self.completed.is_empty() {
            conn.failures = 0;
        }
        if let Err(why) = fed {
            self.stats.errors.note_protocol(&why);
            self.fail(i, now);
            return;
        }
        if close {
            // Requests pipelined behind a closing response are dropped.
            self.down(i, now);
            return;
        }
        if self.schedule.is_some() {
            self.make_free(i);
        } else if !self.shared.phase.stopped() {
            for _ in 0..self.completed.len() {
                self.queue(i, now, now);
            }
            self.to_flush.push(i);
        }
    }

    /// Every 100 ms: a Req/Sec sample, timeouts, reconnections.
    fn housekeeping(&mut self, now: Instant) {
        if now >= self.shared.record_from {
            let dt = now.saturating_duration_since(self.sampled_at).as_secs_f64();
            if dt > 0.0 && self.sampled_at >= self.shared.record_from {
                let done = self.stats.requests - self.sampled_requests;
                self.stats.rate_samples.push(done as f64 / dt);
            }
            self.sampled_at = now;
            self.sampled_requests = self.stats.requests;
        }
        for i in 0..self.conns.len() {
            let conn = &self.conns[i];
            match conn.phase {
                Phase::Open => {
                    if conn.in_flight.front().is_some_and(|s| {
                        now.saturating_duration_since(s.sent) >= self.shared.timeout
                    }) {
                        self.stats.errors.timeout += conn.in_flight.len() as u64;
                        self.down(i, now);
                    }
                }
                Phase::Connecting => {
                    if now.saturating_duration_since(conn.since) >= self.shared.timeout {
                        self.stats.errors.connect += 1;
                        self.fail(i, now);
                    }
                }
                Phase::Down { retry_at } => {
                    if retry_at <= now {
                        self.connect(i, now);
                    }
                }
            }
        }
    }
}

/// A non-blocking TCP socket with its connect started; true when it
/// connected at once.
fn start_connect(addr: SocketAddr) -> io::Result<(TcpStream, bool)> {
    let family = if addr.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    let fd: OwnedFd = socket::socket(
        family,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    socket::setsockopt(&fd, sockopt::TcpNoDelay, &true)?;
    let done = match socket::connect(fd.as_raw_fd(), &SockaddrStorage::from(addr)) {
        Ok(()) => true,
        Err(Errno::EINPROGRESS) => false,
        Err(e) => return Err(e.into()),
    };
    Ok((TcpStream::from(fd), done))
}

/// Wake-ups as close to the schedule as the kernel allows (the default
/// 50 us timer slack would delay every paced send).
fn precise_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only the
    // calling thread; failure just leaves the default slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_counts_what_is_due() {
        let start = Instant::now();
        let mut s = Schedule {
            start,
            interval_ns: 1e6, // 1000 req/s
            next: 0,
        };
        assert_eq!(s.behind(start), 1, "request 0 is due at once");
        assert_eq!(s.behind(start + Duration::from_micros(10_500)), 11);
        s.next = 11;
        assert_eq!(s.behind(start + Duration::from_micros(10_500)), 0);
        assert_eq!(s.due_at(11), start + Duration::from_millis(11));
    }
}
