//! The exporter's HTTP/1.1 server: one epoll loop on one thread, every
//! socket non-blocking, so no client can hold it.
//!
//! - Requests are read with the parser the bench http-server uses
//!   (`base::http::head::parse_head`): heads up to 8 KiB (longer: 431),
//!   malformed ones 400, GET and HEAD only (others 405), `/metrics` and `/`
//!   (others 404); every refusal closes the connection.
//! - Deadlines: a request head must arrive within [`Limits::head_timeout`]
//!   of its first byte (slowloris: 408, closed); a connection idle between
//!   requests is closed after [`Limits::idle_timeout`]; a response the
//!   client does not read within [`Limits::write_timeout`] is dropped.
//! - At most [`Limits::max_connections`] at once: a new connection beyond
//!   that takes the place of the one that has waited longest for a
//!   request (idle, or trickling a head); when every connection is busy
//!   answering, the new one is closed.
//! - `/metrics` is served from the last rendered reading while it is
//!   fresh; otherwise the request waits (without blocking the loop) for
//!   the sampler thread to make a new one, which every scrape waiting then
//!   shares. A reading that takes longer than [`Limits::sample_wait`] is
//!   not waited for: the previous one is served.
//!
//! Responses are never compressed: the exposition is small, and gzip would
//! cost more CPU than the bytes it saves on loopback or a LAN.

use std::io::{self, IoSlice};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;

use crate::base::epoll::{Epoll, Interest, Ready};
use crate::base::http::date::imf_fixdate;
use crate::base::http::head::{parse_head, Answer, Parsed, MAX_HEAD};
use crate::base::stop::Stop;
use crate::base::tls::{ServerTls, Stream};

use super::exposition::CONTENT_TYPE;
use super::sampling::Rendered;
use super::web_config::BasicAuth;

/// What the server allows each client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once.
    pub max_connections: usize,
    /// From a request head's first byte to its end.
    pub head_timeout: Duration,
    /// Between requests on a kept-alive connection (and before the first).
    pub idle_timeout: Duration,
    /// To take a whole response.
    pub write_timeout: Duration,
    /// The longest a scrape waits for a new reading before the previous
    /// one is served.
    pub sample_wait: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 256,
            head_timeout: Duration::from_secs(10),
            // Longer than Prometheus' default 1 min scrape interval, so a
            // scraper keeps its connection from scrape to scrape.
            idle_timeout: Duration::from_secs(90),
            write_timeout: Duration::from_secs(30),
            sample_wait: Duration::from_secs(10),
        }
    }
}

/// The loop's side of the sampler thread.
pub trait Readings {
    /// Ask for a new reading (at most one is under way at a time).
    fn request(&mut self);
    /// A reading made since the last call, if any; an error ends the loop.
    fn take(&mut self) -> Option<anyhow::Result<Rendered>>;
}

/// What the server counted, for the exporter's last words.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub connections: u64,
    pub responses: u64,
    /// 400, 404, 405, 408 and 431 answers.
    pub refused: u64,
    /// Connections closed to make room for a new one, or refused for lack
    /// of room.
    pub evicted: u64,
}

const LISTENER: u64 = u64::MAX;
const WAKER: u64 = u64::MAX - 1;
const READ_CHUNK: usize = 4096;
/// How long a closed connection may take to send its FIN.
const LINGER: Duration = Duration::from_secs(2);
/// The loop looks at its stop token and deadlines at least this often.
const TICK: Duration = Duration::from_millis(100);
const ACCEPT_BATCH: usize = 64;

/// An eventfd the sampler thread writes to wake the loop.
pub struct Waker {
    fd: OwnedFd,
}

impl Waker {
    pub fn new() -> io::Result<Waker> {
        // SAFETY: eventfd takes an initial value and flags only.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a new descriptor we own.
        Ok(Waker {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    pub fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer; a full counter
        // (EAGAIN) already means "wake up".
        unsafe { libc::write(self.fd.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    fn clear(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live buffer.
        unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    }
}

enum Phase {
    /// Waiting for a request; `head_since` once its first byte came.
    Reading { head_since: Option<Instant> },
    /// A `/metrics` request waits for a new reading.
    Waiting { head_only: bool, close: bool },
    /// Sending a response: `head` then `body`, `sent` bytes of both so far.
    Writing {
        head: Vec<u8>,
        body: Option<Arc<Vec<u8>>>,
        sent: usize,
        close: bool,
    },
    /// Answered and shut for writing: input is read and dropped until the
    /// peer closes (so unread input does not turn the close into a reset
    /// that loses the answer).
    Draining,
}

struct Conn {
    stream: Stream,
    input: Vec<u8>,
    phase: Phase,
    /// When the phase began.
    since: Instant,
}

struct Slot {
    generation: u32,
    conn: Option<Conn>,
}

/// The server.
pub struct Server<'a, R: Readings> {
    listener: TcpListener,
    epoll: Epoll,
    waker: &'a Waker,
    readings: R,
    limits: Limits,
    slots: Vec<Slot>,
    free: Vec<usize>,
    open: usize,
    current: Rendered,
    /// A reading was asked for and has not come.
    asked: Option<Instant>,
    counts: Counts,
    /// TLS for every connection, from `--web-config`.
    tls: Option<ServerTls>,
    /// Basic-auth users, from `--web-config` (none: open).
    auth: BasicAuth,
}

impl<'a, R: Readings> Server<'a, R> {
    /// A server on `listener` serving `first` until the sampler thread
    /// (`readings`, waking `waker`) makes newer readings.
    pub fn new(
        listener: TcpListener,
        waker: &'a Waker,
        readings: R,
        first: Rendered,
        limits: Limits,
    ) -> anyhow::Result<Server<'a, R>> {
        listener
            .set_nonblocking(true)
            .context("cannot make the listener non-blocking")?;
        let epoll = Epoll::new(256).context("cannot create an epoll instance")?;
        epoll
            .add(listener.as_raw_fd(), LISTENER, Interest::READ)
            .context("cannot watch the listener")?;
        epoll
            .add(waker.fd.as_raw_fd(), WAKER, Interest::READ)
            .context("cannot watch the sampler's eventfd")?;
        Ok(Server {
            listener,
            epoll,
            waker,
            readings,
            limits,
            slots: Vec::new(),
            free: Vec::new(),
            open: 0,
            current: first,
            asked: None,
            counts: Counts::default(),
            tls: None,
            auth: BasicAuth::default(),
        })
    }

    /// Serve over TLS (`Some`) and ask for these users' passwords.
    pub fn with_web(mut self, tls: Option<ServerTls>, auth: BasicAuth) -> Server<'a, R> {
        self.tls = tls;
        self.auth = auth;
        self
    }

    /// Serve until `stop`, or until the sampler fails (its error).
    pub fn run(mut self, stop: &Stop) -> anyhow::Result<Counts> {
        let mut ready = Vec::new();
        let mut last_sweep = Instant::now();
        while !stop.is_set() {
            self.epoll
                .wait_into(Some(TICK), &mut ready)
                .context("epoll_wait failed")?;
            let now = Instant::now();
            for r in ready.iter().copied() {
                match r.token {
                    LISTENER => self.accept(now),
                    WAKER => {
                        self.waker.clear();
                        self.take_readings(now)?;
                    }
                    _ => self.on_event(r, now),
                }
            }
            if now.duration_since(last_sweep) >= TICK {
                last_sweep = now;
                self.sweep(now);
            }
        }
        Ok(self.counts)
    }

    fn take_readings(&mut self, now: Instant) -> anyhow::Result<()> {
        let mut got = false;
        while let Some(reading) = self.readings.take() {
            self.current = reading?;
            got = true;
        }
        if got {
            self.asked = None;
            self.answer_waiting(now);
        }
        Ok(())
    }

    /// Answer every waiting scrape with the current reading.
    fn answer_waiting(&mut self, now: Instant) {
        for index in 0..self.slots.len() {
            let waiting = match &self.slots[index].conn {
                Some(Conn {
                    phase: Phase::Waiting { head_only, close },
                    ..
                }) => Some((*head_only, *close)),
                _ => None,
            };
            if let Some((head_only, close)) = waiting {
                self.respond_metrics(index, head_only, close, now);
            }
        }
    }

    fn accept(&mut self, now: Instant) {
        for _ in 0..ACCEPT_BATCH {
            let stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
                // EMFILE and the like: the backlog keeps the connection
                // until a descriptor frees up.
                Err(_) => return,
            };
            self.counts.connections += 1;
            if self.open >= self.limits.max_connections && !self.evict_one() {
                self.counts.evicted += 1;
                continue; // dropped: closed at once
            }
            if self.register(stream, now).is_err() {
                continue;
            }
        }
    }

    /// Close the connection that has waited longest for a request, to
    /// make room; false when every connection is busy being answered.
    fn evict_one(&mut self) -> bool {
        let oldest = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match &s.conn {
                Some(c) if matches!(c.phase, Phase::Reading { .. } | Phase::Draining) => {
                    Some((i, c.since))
                }
                _ => None,
            })
            .min_by_key(|&(_, since)| since);
        match oldest {
            Some((index, _)) => {
                self.counts.evicted += 1;
                self.close(index);
                true
            }
            None => false,
        }
    }

    fn register(&mut self, stream: TcpStream, now: Instant) -> io::Result<()> {
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        let stream = Stream::new(stream, self.tls.as_ref())?;
        let index = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot {
                generation: 0,
                conn: None,
            });
            self.slots.len() - 1
        });
        let token = self.token(index);
        if let Err(e) = self.epoll.add(stream.as_raw_fd(), token, Interest::READ) {
            self.free.push(index);
            return Err(e);
        }
        self.slots[index].conn = Some(Conn {
            stream,
            input: Vec::new(),
            phase: Phase::Reading { head_since: None },
            since: now,
        });
        self.open += 1;
        Ok(())
    }

    fn token(&self, index: usize) -> u64 {
        (u64::from(self.slots[index].generation) << 32) | index as u64
    }

    fn close(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        if slot.conn.take().is_some() {
            // Dropping the stream closes it and takes it out of epoll.
            slot.generation = slot.generation.wrapping_add(1);
            self.free.push(index);
            self.open -= 1;
        }
    }

    fn conn(&mut self, index: usize) -> Option<&mut Conn> {
        self.slots.get_mut(index)?.conn.as_mut()
    }

    fn on_event(&mut self, ready: Ready, now: Instant) {
        let index = (ready.token & 0xffff_ffff) as usize;
        let generation = (ready.token >> 32) as u32;
        match self.slots.get(index) {
            Some(slot) if slot.generation == generation && slot.conn.is_some() => {}
            _ => return, // closed earlier in this batch
        }
        let alive = match self.conn(index).map(|c| &c.phase) {
            Some(Phase::Reading { .. }) if ready.readable || ready.hangup => {
                self.on_readable(index, now) && self.watch_tls_output(index)
            }
            // TLS handshake output the socket did not take at once.
            Some(Phase::Reading { .. }) if ready.writable => self.watch_tls_output(index),
            Some(Phase::Writing { .. }) if ready.writable => {
                self.on_writable(index, now) && self.handle_input(index, now)
            }
            Some(Phase::Draining) => self.drain(index),
            // A hang-up while waiting or writing: the client is gone.
            Some(_) => !ready.hangup,
            None => false,
        };
        if !alive {
            self.close(index);
        }
    }

    /// While reading, also wait for the socket to be writable when TLS
    /// output (a handshake step) is left to send; false to close.
    fn watch_tls_output(&mut self, index: usize) -> bool {
        let token = self.token(index);
        let Some(conn) = self.conn(index) else {
            return false;
        };
        if !matches!(conn.phase, Phase::Reading { .. }) {
            return true;
        }
        if conn.stream.flush().is_err() {
            return false;
        }
        let interest = if conn.stream.wants_write() {
            READ_WRITE
        } else {
            Interest::READ
        };
        let fd = conn.stream.as_raw_fd();
        self.epoll.modify(fd, token, interest).is_ok()
    }

    /// Read what came, and answer a request if its head is whole.
    fn on_readable(&mut self, index: usize, now: Instant) -> bool {
        let Some(conn) = self.conn(index) else {
            return false;
        };
        // At most one byte past the limit is kept: enough to know.
        let room = (MAX_HEAD + 1).saturating_sub(conn.input.len());
        let mut chunk = [0u8; READ_CHUNK];
        let want = room.clamp(1, READ_CHUNK);
        match conn.stream.read(&mut chunk[..want]) {
            Ok(0) => return false,
            Ok(n) => {
                conn.input.extend_from_slice(&chunk[..n]);
                if let Phase::Reading { head_since } = &mut conn.phase {
                    head_since.get_or_insert(now);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return true,
            Err(_) => return false,
        }
        self.handle_input(index, now)
    }

    /// Answer the requests at the start of the input, one after the
    /// other while each answer goes out at once; false to close.
    fn handle_input(&mut self, index: usize, now: Instant) -> bool {
        loop {
            match self.answer_one(index, now) {
                Step::Close => return false,
                Step::Wait => return true,
                Step::Answered => {}
            }
            match self.conn(index) {
                Some(Conn {
                    phase: Phase::Reading { .. },
                    input,
                    ..
                }) if !input.is_empty() => continue,
                Some(_) => return true,
                None => return false,
            }
        }
    }

    /// Answer the request at the start of the input, if whole.
    fn answer_one(&mut self, index: usize, now: Instant) -> Step {
        let Some(conn) = self.conn(index) else {
            return Step::Close;
        };
        if !matches!(conn.phase, Phase::Reading { .. }) {
            return Step::Wait;
        }
        let request = match parse_head(&conn.input) {
            Parsed::Incomplete => return Step::Wait,
            Parsed::Refused(answer) => Err(answer),
            Parsed::Head(head) => {
                // A request body is not read: answer, then close.
                let close = head.close || head.body_len > 0;
                let authorization = head.authorization.map(<[u8]>::to_vec);
                let head_only = head.method == b"HEAD";
                let route = match (head.method, head.path) {
                    (b"GET" | b"HEAD", b"/metrics") => Ok(Route::Metrics),
                    (b"GET" | b"HEAD", b"/") => Ok(Route::Index),
                    (b"GET" | b"HEAD", _) => Err(Answer::NotFound),
                    _ => Err(Answer::MethodNotAllowed),
                };
                let len = head.len;
                conn.input.drain(..len);
                Ok((route, head_only, close, authorization))
            }
        };
        // Basic auth (when users are configured) before any routing, as
        // the exporter-toolkit does.
        let request = match request {
            Ok((_, head_only, close, authorization))
                if !self.auth.allows(authorization.as_deref()) =>
            {
                let alive = self.respond_unauthorized(index, head_only, close, now);
                return if alive { Step::Answered } else { Step::Close };
            }
            Ok((route, head_only, close, _)) => Ok((route, head_only, close)),
            Err(answer) => Err(answer),
        };
        let alive = match request {
            Err(answer) => self.refuse(index, answer, now),
            Ok((Err(answer), head_only, close)) => {
                self.respond_small(index, answer, head_only, close, now)
            }
            Ok((Ok(Route::Index), head_only, close)) => {
                self.respond_small(index, Answer::Plaintext, head_only, close, now)
            }
            Ok((Ok(Route::Metrics), head_only, close)) => {
                self.metrics_or_wait(index, head_only, close, now)
            }
        };
        if alive {
            Step::Answered
        } else {
            Step::Close
        }
    }

    /// Answer a scrape from a fresh reading, or park it until a new one.
    fn metrics_or_wait(
        &mut self,
        index: usize,
        head_only: bool,
        close: bool,
        now: Instant,
    ) -> bool {
        if self.current.fresh(now) {
            return self.respond_metrics(index, head_only, close, now);
        }
        if self.asked.is_none() {
            self.readings.request();
            self.asked = Some(now);
        }
        let token = self.token(index);
        let Some(conn) = self.conn(index) else {
            return false;
        };
        conn.phase = Phase::Waiting { head_only, close };
        conn.since = now;
        let fd = conn.stream.as_raw_fd();
        // Not reading while the answer is pending (hang-ups are still
        // reported).
        self.epoll.modify(fd, token, NOTHING).is_ok()
    }

    /// 400, 408 or 431: answer and close (the rest of the input is
    /// unreadable).
    fn refuse(&mut self, index: usize, answer: Answer, now: Instant) -> bool {
        if let Some(conn) = self.conn(index) {
            conn.input.clear();
        }
        self.respond_small(index, answer, false, true, now)
    }

    fn respond_metrics(
        &mut self,
        index: usize,
        head_only: bool,
        close: bool,
        now: Instant,
    ) -> bool {
        let body = Arc::clone(&self.current.body);
        let head = response_head("200 OK", CONTENT_TYPE, body.len(), close, "");
        let body = (!head_only).then_some(body);
        self.start_writing(index, head, body, close, now)
    }

    fn respond_small(
        &mut self,
        index: usize,
        answer: Answer,
        head_only: bool,
        close: bool,
        now: Instant,
    ) -> bool {
        let (status, text, extra): (&str, &str, &str) = match answer {
            Answer::Plaintext | Answer::Json => (
                "200 OK",
                "nettune monitor: Prometheus metrics at /metrics\n",
                "",
            ),
            Answer::NotFound => ("404 Not Found", "Not Found: metrics are at /metrics\n", ""),
            Answer::MethodNotAllowed => (
                "405 Method Not Allowed",
                "Method Not Allowed\n",
                "Allow: GET, HEAD\r\n",
            ),
            Answer::BadRequest => ("400 Bad Request", "Bad Request\n", ""),
            Answer::TooLarge => (
                "431 Request Header Fields Too Large",
                "Request Header Fields Too Large\n",
                "",
            ),
        };
        if !matches!(answer, Answer::Plaintext | Answer::Json) {
            self.counts.refused += 1;
        }
        let head = response_head(
            status,
            "text/plain; charset=utf-8",
            text.len(),
            close,
            extra,
        );
        let body = (!head_only).then(|| Arc::new(text.as_bytes().to_vec()));
        self.start_writing(index, head, body, close, now)
    }

    /// 401: no password, or a wrong one.
    fn respond_unauthorized(
        &mut self,
        index: usize,
        head_only: bool,
        close: bool,
        now: Instant,
    ) -> bool {
        let challenge = "WWW-Authenticate: Basic realm=\"nettune monitor\", charset=\"UTF-8\"\r\n";
        let answer = ("401 Unauthorized", "Unauthorized\n", challenge);
        self.respond_refusal(index, answer, head_only, close, now)
    }

    fn respond_timeout(&mut self, index: usize, now: Instant) -> bool {
        let answer = ("408 Request Timeout", "Request Timeout\n", "");
        self.respond_refusal(index, answer, false, true, now)
    }

    /// A refusal the shared parser does not know: (status, body, extra
    /// header lines).
    fn respond_refusal(
        &mut self,
        index: usize,
        (status, text, extra): (&str, &str, &str),
        head_only: bool,
        close: bool,
        now: Instant,
    ) -> bool {
        self.counts.refused += 1;
        let head = response_head(
            status,
            "text/plain; charset=utf-8",
            text.len(),
            close,
            extra,
        );
        let body = (!head_only).then(|| Arc::new(text.as_bytes().to_vec()));
        self.start_writing(index, head, body, close, now)
    }

    fn start_writing(
        &mut self,
        index: usize,
        head: Vec<u8>,
        body: Option<Arc<Vec<u8>>>,
        close: bool,
        now: Instant,
    ) -> bool {
        self.counts.responses += 1;
        let token = self.token(index);
        let Some(conn) = self.conn(index) else {
            return false;
        };
        conn.phase = Phase::Writing {
            head,
            body,
            sent: 0,
            close,
        };
        conn.since = now;
        // Try at once: most answers fit the socket buffer.
        if !self.on_writable(index, now) {
            return false;
        }
        match self.conn(index) {
            Some(conn) if matches!(conn.phase, Phase::Writing { .. }) => {
                let fd = conn.stream.as_raw_fd();
                self.epoll.modify(fd, token, WRITE).is_ok()
            }
            Some(_) => true,
            None => false,
        }
    }

    /// Send what the socket takes; when all is sent, read the next
    /// request (or close).
    fn on_writable(&mut self, index: usize, now: Instant) -> bool {
        let token = self.token(index);
        let Some(conn) = self.conn(index) else {
            return false;
        };
        let Phase::Writing {
            head,
            body,
            sent,
            close,
        } = &mut conn.phase
        else {
            return true;
        };
        let body_bytes: &[u8] = body.as_deref().map_or(&[], |b| b.as_slice());
        let total = head.len() + body_bytes.len();
        while *sent < total {
            let slices: [IoSlice; 2] = if *sent < head.len() {
                [IoSlice::new(&head[*sent..]), IoSlice::new(body_bytes)]
            } else {
                [
                    IoSlice::new(&body_bytes[*sent - head.len()..]),
                    IoSlice::new(&[]),
                ]
            };
            match conn.stream.write_vectored(&slices) {
                Ok(0) => return false,
                Ok(n) => *sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return false,
            }
        }
        // TLS records rustls holds for a socket that was full.
        match conn.stream.flush() {
            Ok(()) if conn.stream.wants_write() => return true,
            Ok(()) => {}
            Err(_) => return false,
        }
        let close = *close;
        let fd = conn.stream.as_raw_fd();
        conn.since = now;
        if close {
            conn.stream.shutdown_write();
            conn.phase = Phase::Draining;
            conn.input.clear();
            return self.epoll.modify(fd, token, Interest::READ).is_ok();
        }
        // A request may have come before this answer went out.
        let pipelined = !conn.input.is_empty();
        conn.phase = Phase::Reading {
            head_since: pipelined.then_some(now),
        };
        self.epoll.modify(fd, token, Interest::READ).is_ok()
    }

    /// Read and drop input until the peer closes.
    fn drain(&mut self, index: usize) -> bool {
        let Some(conn) = self.conn(index) else {
            return false;
        };
        let mut chunk = [0u8; READ_CHUNK];
        loop {
            match conn.stream.read(&mut chunk) {
                Ok(0) => return false,
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return false,
            }
        }
    }

    /// Apply the deadlines.
    fn sweep(&mut self, now: Instant) {
        if let Some(asked) = self.asked {
            if now.duration_since(asked) >= self.limits.sample_wait {
                // The sampler is slow: serve what there is; its reading
                // is taken when it comes.
                self.answer_waiting(now);
            }
        }
        for index in 0..self.slots.len() {
            let Some(conn) = &self.slots[index].conn else {
                continue;
            };
            let waited = now.duration_since(conn.since);
            let action = match &conn.phase {
                Phase::Reading { head_since: None } if waited >= self.limits.idle_timeout => {
                    Action::Close
                }
                Phase::Reading {
                    head_since: Some(since),
                } if now.duration_since(*since) >= self.limits.head_timeout => Action::Timeout,
                Phase::Writing { .. } if waited >= self.limits.write_timeout => Action::Close,
                Phase::Draining if waited >= LINGER => Action::Close,
                _ => Action::Keep,
            };
            match action {
                Action::Keep => {}
                Action::Close => self.close(index),
                Action::Timeout => {
                    if !self.respond_timeout(index, now) {
                        self.close(index);
                    }
                }
            }
        }
    }
}

enum Route {
    Metrics,
    Index,
}

/// What answering one request did.
enum Step {
    /// Answered (or parked): look at the input again.
    Answered,
    /// Nothing more to do until the socket is ready.
    Wait,
    Close,
}

enum Action {
    Keep,
    Close,
    Timeout,
}

/// Registered for nothing: only hang-ups and errors are reported.
const NOTHING: Interest = Interest {
    read: false,
    write: false,
    edge: false,
};
const WRITE: Interest = Interest {
    read: false,
    write: true,
    edge: false,
};
const READ_WRITE: Interest = Interest {
    read: true,
    write: true,
    edge: false,
};

fn response_head(
    status: &str,
    content_type: &str,
    len: usize,
    close: bool,
    extra: &str,
) -> Vec<u8> {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let date = imf_fixdate(secs);
    let mut head = format!("HTTP/1.1 {status}\r\nServer: nettune\r\nDate: ").into_bytes();
    head.extend_from_slice(&date);
    head.extend_from_slice(
        format!(
            "\r\nContent-Type: {content_type}\r\nContent-Length: {len}\r\n{extra}{}\r\n",
            if close { "Connection: close\r\n" } else { "" }
        )
        .as_bytes(),
    );
    head
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
