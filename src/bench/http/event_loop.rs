//! A server thread's I/O engine. [`EventLoop`] is the boundary: the HTTP
//! rules live in `session` and only turn bytes into bytes, so an io_uring
//! engine can sit beside the epoll one without touching them.
//!
//! The epoll engine is the article's tuned loop: level-triggered, one
//! `recv` per readiness (no extra call to meet EAGAIN), every pipelined
//! request answered, all answers to one read sent with one `send`. When
//! busy polling can engage, waits take a 100 us timeout (epoll_pwait2): the
//! kernel busy-polls the device while waiting, and a zero timeout would
//! never wait at all. Without busy polling a short timeout only adds timer
//! wake-ups (13% fewer requests per second on loopback here), so the wait
//! is then as long as the end of the run allows.

use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use nix::errno::Errno;
use nix::sys::socket::{recv, send, MsgFlags};
use serde::{Deserialize, Serialize};

use super::session::{Responses, Session};
use crate::base::epoll::{Epoll, Interest, Ready};
use crate::base::http::head::MAX_HEAD;
use crate::bench::busy_poll::BusyPoll;
use crate::bench::harness::Phase;
use crate::bench::report::LiveCounter;

/// A server thread's totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadCounts {
    /// Responses sent, refusals included.
    pub requests: u64,
    /// Connections accepted.
    pub connections: u64,
    /// Requests refused with 400 or 431 (their connections closed).
    pub refused: u64,
    /// Connections closed for being idle.
    pub idle_closed: u64,
    /// accept() failures other than "nothing to accept" (e.g. EMFILE).
    pub accept_errors: u64,
    /// When the first and the last wake-up that answered a request began:
    /// the report's rates are over this span, not the server's lifetime.
    #[serde(skip)]
    pub first_request: Option<Instant>,
    #[serde(skip)]
    pub last_request: Option<Instant>,
}

impl ThreadCounts {
    /// A wake-up that began at `now` is over; `before` is the request count
    /// it began with.
    pub fn note_traffic(&mut self, before: u64, now: Instant) {
        if self.requests > before {
            self.first_request.get_or_insert(now);
            self.last_request = Some(now);
        }
    }
}

/// One server thread's engine: accept on its own listener, serve its
/// connections until the run's phase says stop, publishing its running
/// totals to `live`.
pub trait EventLoop {
    fn run(&mut self, phase: &Phase, live: &LiveCounter) -> anyhow::Result<ThreadCounts>;
}

#[derive(Debug, Clone, Copy)]
pub struct LoopOptions {
    /// Busy polling for each accepted connection and the epoll instance.
    pub busy_poll: BusyPoll,
    pub idle_timeout: Duration,
    /// The epoll timeout while traffic flows.
    pub wait: Duration,
    /// Serve this address only; others' connections are closed at once.
    pub peer: Option<std::net::IpAddr>,
}

/// The wait while traffic flows, when busy polling is on: short and
/// non-zero (as the kernel-vs-DPDK HTTP article found).
pub const BUSY_POLL_WAIT: Duration = Duration::from_micros(100);
/// The wait otherwise, and after [`IDLE_AFTER`] empty short waits in a row:
/// long enough to cost nothing, short enough to see the stop flag.
pub const LONG_WAIT: Duration = Duration::from_millis(10);
const IDLE_AFTER: u32 = 1000;
/// How long a closing connection may take to send its FIN back.
const LINGER: Duration = Duration::from_secs(2);
const LISTENER: u64 = u64::MAX;
/// While output is pending: no reading (backpressure).
const WRITE_ONLY: Interest = Interest {
    read: false,
    write: true,
    edge: false,
};
const EVENTS: usize = 256;
/// Connections accepted per listener wake-up, so a flood of new connections
/// cannot starve the established ones.
const ACCEPT_BATCH: usize = 64;
const READ_CHUNK: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closing {
    No,
    /// Shut down the write side once the output is sent.
    AfterFlush,
    /// FIN sent; reading and discarding until the peer closes (so unread
    /// input does not turn the close into a reset that loses the answer).
    Draining,
}

struct Conn {
    stream: TcpStream,
    session: Session,
    /// Input kept between reads: the start of an incomplete request.
    input: Vec<u8>,
    /// Output the socket did not take yet, from `sent` on.
    output: Vec<u8>,
    sent: usize,
    closing: Closing,
    last_active: Instant,
}

struct Slot {
    generation: u32,
    conn: Option<Conn>,
}

pub struct EpollLoop {
    epoll: Epoll,
    listener: TcpListener,
    options: LoopOptions,
    slots: Vec<Slot>,
    free: Vec<usize>,
    responses: Responses,
    scratch: Vec<u8>,
    out: Vec<u8>,
    counts: ThreadCounts,
}

pub(super) fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl EpollLoop {
    pub fn new(listener: TcpListener, options: LoopOptions) -> anyhow::Result<EpollLoop> {
        let epoll = Epoll::new(EVENTS).context("cannot create an epoll instance")?;
        options.busy_poll.apply_epoll(epoll.as_fd())?;
        epoll
            .add(listener.as_raw_fd(), LISTENER, Interest::READ)
            .context("cannot watch the listener with epoll")?;
        Ok(EpollLoop {
            epoll,
            listener,
            options,
            slots: Vec::new(),
            free: Vec::new(),
            responses: Responses::new(unix_secs()),
            scratch: vec![0; READ_CHUNK],
            out: Vec::with_capacity(READ_CHUNK),
            counts: ThreadCounts::default(),
        })
    }

    fn accept_all(&mut self, now: Instant) {
        for _ in 0..ACCEPT_BATCH {
            let stream = match self.listener.accept() {
                Ok((_, addr)) if self.options.peer.is_some_and(|p| p != addr.ip()) => continue,
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => continue,
                Err(_) => {
                    // EMFILE and the like: counted; the backlog keeps the
                    // connection until a descriptor frees up.
                    self.counts.accept_errors += 1;
                    return;
                }
            };
            if self.register(stream, now).is_err() {
                self.counts.accept_errors += 1;
            }
        }
    }

    fn register(&mut self, stream: TcpStream, now: Instant) -> io::Result<()> {
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        self.options
            .busy_poll
            .apply_socket(stream.as_fd())
            .map_err(|e| io::Error::other(format!("{e:#}")))?;
        let index = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot {
                generation: 0,
                conn: None,
            });
            self.slots.len() - 1
        });
        let slot = &mut self.slots[index];
        let token = (u64::from(slot.generation) << 32) | index as u64;
        if let Err(e) = self.epoll.add(stream.as_raw_fd(), token, Interest::READ) {
            self.free.push(index);
            return Err(e);
        }
        slot.conn = Some(Conn {
            stream,
            session: Session::default(),
            input: Vec::new(),
            output: Vec::new(),
            sent: 0,
            closing: Closing::No,
            last_active: now,
        });
        self.counts.connections += 1;
        Ok(())
    }

    fn close(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        if slot.conn.take().is_some() {
            // Dropping the stream closes it, which also removes it from epoll.
            slot.generation = slot.generation.wrapping_add(1);
            self.free.push(index);
        }
    }

    fn on_event(&mut self, ready: Ready, now: Instant) {
        let index = (ready.token & 0xffff_ffff) as usize;
        let generation = (ready.token >> 32) as u32;
        let Some(slot) = self.slots.get(index) else {
            return;
        };
        if slot.generation != generation || slot.conn.is_none() {
            return; // an event for a connection closed earlier in this batch
        }
        let alive = (!ready.writable || self.on_writable(index))
            && (!(ready.readable || ready.hangup) || self.on_readable(index, ready.hangup, now));
        if !alive {
            self.close(index);
        }
    }

    /// Send what is left of a connection's output; false to close.
    fn on_writable(&mut self, index: usize) -> bool {
        let token = self.token(index);
        let Some(conn) = self.slots[index].conn.as_mut() else {
            return false;
        };
        while conn.sent < conn.output.len() {
            match send(
                conn.stream.as_raw_fd(),
                &conn.output[conn.sent..],
                MsgFlags::MSG_NOSIGNAL,
            ) {
                Ok(n) => conn.sent += n,
                Err(Errno::EAGAIN) => return true,
                Err(Errno::EINTR) => continue,
                Err(_) => return false,
            }
        }
        conn.output.clear();
        conn.sent = 0;
        if self
            .epoll
            .modify(conn.stream.as_raw_fd(), token, Interest::READ)
            .is_err()
        {
            return false;
        }
        conn.closing != Closing::AfterFlush || start_draining(conn)
    }

    fn token(&self, index: usize) -> u64 {
        (u64::from(self.slots[index].generation) << 32) | index as u64
    }

    /// Read once, answer every complete request, send the answers; false
    /// to close.
    fn on_readable(&mut self, index: usize, hangup: bool, now: Instant) -> bool {
        let token = self.token(index);
        let Some(conn) = self.slots[index].conn.as_mut() else {
            return false;
        };
        if conn.sent < conn.output.len() {
            // Still sending earlier answers: read later. Registered for
            // writing only, a hang-up here means the socket is dead.
            return !hangup;
        }
        let fd = conn.stream.as_raw_fd();
        if conn.closing == Closing::Draining {
            return match recv(fd, &mut self.scratch, MsgFlags::empty()) {
                Ok(0) => false,
                Ok(_) | Err(Errno::EAGAIN) | Err(Errno::EINTR) => true,
                Err(_) => false,
            };
        }
        let from_input = !conn.input.is_empty();
        let received = if from_input {
            let len = conn.input.len();
            conn.input.resize(len + READ_CHUNK, 0);
            let r = recv(fd, &mut conn.input[len..], MsgFlags::empty());
            conn.input.truncate(len + r.unwrap_or(0));
            r
        } else {
            recv(fd, &mut self.scratch, MsgFlags::empty())
        };
        let n = match received {
            Ok(0) => return false,
            Ok(n) => n,
            Err(Errno::EAGAIN) | Err(Errno::EINTR) => return true,
            Err(_) => return false,
        };
        conn.last_active = now;
        let data = if from_input {
            &conn.input[..]
        } else {
            &self.scratch[..n]
        };
        self.out.clear();
        let served = conn.session.serve(data, &self.responses, &mut self.out);
        self.counts.requests += served.responses;
        self.counts.refused += served.refused;
        if served.close {
            conn.input.clear();
        } else if from_input {
            conn.input.drain(..served.consumed);
        } else {
            conn.input
                .extend_from_slice(&self.scratch[served.consumed..n]);
        }
        debug_assert!(conn.input.len() <= MAX_HEAD + READ_CHUNK);
        if !self.out.is_empty() {
            let sent = loop {
                match send(fd, &self.out, MsgFlags::MSG_NOSIGNAL) {
                    Ok(n) => break n,
                    Err(Errno::EAGAIN) => break 0,
                    Err(Errno::EINTR) => continue,
                    Err(_) => return false,
                }
            };
            if sent < self.out.len() {
                // The socket is full: keep the rest and stop reading until
                // it drains (backpressure on a client that does not read).
                conn.output.extend_from_slice(&self.out[sent..]);
                conn.sent = 0;
                if served.close {
                    conn.closing = Closing::AfterFlush;
                }
                return self.epoll.modify(fd, token, WRITE_ONLY).is_ok();
            }
        }
        if served.close {
            return start_draining(conn);
        }
        true
    }

    /// Close connections idle past the timeout, and closing ones that
    /// lingered too long.
    fn sweep(&mut self, now: Instant) {
        for index in 0..self.slots.len() {
            let Some(conn) = &self.slots[index].conn else {
                continue;
            };
            let open = conn.closing == Closing::No;
            if overdue(open, conn.last_active, now, self.options.idle_timeout) {
                if conn.closing == Closing::No {
                    self.counts.idle_closed += 1;
                }
                self.close(index);
            }
        }
    }
}

/// Whether a connection quiet since `last_active` is closed now: an open
/// one idle past the timeout, a closing one that lingered past [`LINGER`].
pub(super) fn overdue(open: bool, last_active: Instant, now: Instant, idle: Duration) -> bool {
    let limit = if open { idle } else { LINGER.min(idle) };
    now.saturating_duration_since(last_active) >= limit
}

/// Send FIN after the last answer and wait for the peer's; false when the
/// socket is already gone.
fn start_draining(conn: &mut Conn) -> bool {
    conn.closing = Closing::Draining;
    conn.stream.shutdown(Shutdown::Write).is_ok()
}

impl EventLoop for EpollLoop {
    fn run(&mut self, phase: &Phase, live: &LiveCounter) -> anyhow::Result<ThreadCounts> {
        let mut ready = Vec::with_capacity(EVENTS);
        let mut empty_waits = 0u32;
        let sweep_every = (self.options.idle_timeout / 4)
            .clamp(Duration::from_millis(10), Duration::from_secs(1));
        let mut next_sweep = Instant::now() + sweep_every;
        while !phase.stopped() {
            let timeout = if empty_waits < IDLE_AFTER {
                self.options.wait
            } else {
                LONG_WAIT
            };
            self.epoll
                .wait_into(Some(timeout), &mut ready)
                .context("epoll wait failed")?;
            empty_waits = if ready.is_empty() {
                empty_waits.saturating_add(1)
            } else {
                0
            };
            let now = Instant::now();
            self.responses.refresh(unix_secs());
            let before = self.counts.requests;
            for &event in &ready {
                if event.token == LISTENER {
                    self.accept_all(now);
                } else {
                    self.on_event(event, now);
                }
            }
            self.counts.note_traffic(before, now);
            // The live counter's second field carries connections here.
            live.publish(self.counts.requests, self.counts.connections);
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + sweep_every;
            }
        }
        Ok(self.counts.clone())
    }
}
