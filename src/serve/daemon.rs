//! The daemon: accept control connections, authenticate them, start the
//! server side each asks for on a port of its own, and send its report
//! back.
//!
//! Every control connection has a thread; every server side runs on
//! threads of its own inside that connection's thread, all inside one
//! scope: when the daemon ends (its stop token, SIGTERM) every server side
//! is stopped and joined, and when the process is killed they die with
//! it. Nothing is a child process that could outlive the daemon.
//!
//! Cost of a stranger: one thread for at most [`HANDSHAKE_WAIT`], at most
//! [`MAX_PER_SOURCE`] of them per source address and [`MAX_PENDING`] in
//! all ([`super::admit`]); a message is at most [`MAX_MESSAGE`] bytes and
//! must arrive whole before its deadline.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::admit::{Admission, Refused, Source, Ticket};
pub use super::admit::{MAX_PENDING, MAX_PER_SOURCE};
use super::proto::{
    self, AuthKind, ErrorKind, FromClient, FromDaemon, Limits, RemoteReport, Start, FLAG_TLS,
    MAX_MESSAGE, NONCE_LEN, PREAMBLE_LEN,
};
use super::token::Token;
use crate::base::observe::Observer;
use crate::base::stop::{Stop, POLL};
use crate::base::tls::{HandshakeError, ServerTls};
use crate::base::Root;
use crate::bench::cpu::CpuUsage;
use crate::bench::engine::{Engine, Placement, Server, ServerLimits};
use crate::bench::frame::{self, Conn, FrameError};
use crate::bench::stream;
use crate::host::stat;

/// How long a new connection has for the preamble, TLS and
/// authentication: a few round trips, so seconds even across continents,
/// while a silent connection frees its slot soon.
pub const HANDSHAKE_WAIT: Duration = Duration::from_secs(3);
/// How long an authenticated client has to send its request.
const REQUEST_WAIT: Duration = Duration::from_secs(10);
/// How long a message already begun (`finish`) may take to arrive whole,
/// and a report to be sent.
const MESSAGE_WAIT: Duration = Duration::from_secs(5);
/// After a server side's time is up, how long the daemon waits for the
/// client's `finish` before it closes the connection.
const FINISH_WAIT: Duration = Duration::from_secs(10);
/// How often the log sums up the connections closed at once or evicted.
const SUMMARY_EVERY: Duration = Duration::from_secs(10);
/// On `finish`, how long the server side goes on reading what is still
/// queued before it stops (datagrams in the socket buffer).
const LINGER: Duration = Duration::from_millis(250);

/// What a daemon allows; see [`Limits`].
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub bind: SocketAddr,
    /// The shared secret; `None` (and no client certificates): no
    /// authentication, loopback only.
    pub token: Option<Token>,
    /// TLS on every control connection (clients that do not ask for it
    /// are refused); client certificates when it has a client CA.
    pub tls: Option<ServerTls>,
    pub max_tests: u32,
    pub max_duration: Duration,
    pub max_rate: u64,
    pub max_reply: u32,
    pub max_threads: u32,
}

impl DaemonConfig {
    pub fn new(bind: SocketAddr, token: Option<Token>) -> DaemonConfig {
        DaemonConfig {
            bind,
            token,
            tls: None,
            max_tests: 8,
            max_duration: Duration::from_secs(300),
            max_rate: 10_000_000_000,
            max_reply: 1 << 20,
            max_threads: 64,
        }
    }

    /// Without a token or client certificates the daemon may only listen
    /// on loopback.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.auth() == AuthKind::None && !self.bind.ip().is_loopback() {
            anyhow::bail!(
                "--bind '{}': without --token-file (or --tls-client-ca), nettune serve listens on \
                 loopback only (anyone who reaches it could start benches); give --token-file FILE \
                 (mode 0600) or bind 127.0.0.1",
                self.bind
            );
        }
        crate::bench::within("max-tests", u64::from(self.max_tests), 1, 1024)?;
        crate::bench::within("max-threads", u64::from(self.max_threads), 1, 1024)?;
        crate::bench::within("max-reply", u64::from(self.max_reply), 1, 64 << 20)?;
        if self.max_duration.is_zero() || self.max_duration > stream::MAX_TEST {
            anyhow::bail!("--max-duration: give 1 s to a day");
        }
        Ok(())
    }

    /// How clients prove who they are: the token if there is one (inside
    /// TLS too), else their TLS certificate if one is required, else
    /// nothing (loopback only).
    pub fn auth(&self) -> AuthKind {
        match (&self.token, &self.tls) {
            (Some(_), _) => AuthKind::Token,
            (None, Some(tls)) if tls.client_ca().is_some() => AuthKind::Certificate,
            _ => AuthKind::None,
        }
    }

    /// What every server side of this daemon is bounded by.
    fn server_limits(&self) -> ServerLimits {
        ServerLimits {
            max_reply: self.max_reply,
            max_rate: Some(self.max_rate),
        }
    }

    pub fn limits(&self) -> Limits {
        Limits {
            max_tests: self.max_tests,
            max_seconds: self.max_duration.as_secs_f64(),
            max_rate_bits_per_second: self.max_rate,
            max_reply_bytes: self.max_reply,
            max_threads: self.max_threads,
        }
    }
}

/// What the daemon did over its life.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DaemonReport {
    pub command: String,
    pub bind: Option<SocketAddr>,
    pub duration_s: f64,
    pub connections: u64,
    /// Closed without a word: a wrong token.
    pub auth_failures: u64,
    /// Closed for a malformed, oversized, slow or foreign first message.
    pub dropped: u64,
    /// TLS handshakes that failed (a certificate refused, not TLS, too
    /// slow).
    #[serde(default)]
    pub tls_failures: u64,
    /// Closed at once: their source had as many handshakes in progress as
    /// it may.
    pub busy: u64,
    /// Closed in their handshake to make room for a newer connection (as
    /// many handshakes in progress as the daemon takes).
    #[serde(default)]
    pub evicted: u64,
    pub tests_started: u64,
    /// Requests refused (out of bounds, `max_tests` reached, a server
    /// side that could not start).
    pub tests_refused: u64,
    pub tests_finished: u64,
    /// Tests whose client left before `finish`.
    pub clients_gone: u64,
}

/// A daemon with its listener bound, ready to [`run`](Daemon::run).
pub struct Daemon {
    config: DaemonConfig,
    listener: TcpListener,
    bound: SocketAddr,
}

/// Check the config and bind the control port.
pub fn bind(config: DaemonConfig) -> anyhow::Result<Daemon> {
    config.validate()?;
    let listener =
        TcpListener::bind(config.bind).with_context(|| format!("--bind '{}'", config.bind))?;
    listener
        .set_nonblocking(true)
        .context("cannot make the listener non-blocking")?;
    let bound = listener
        .local_addr()
        .context("cannot read the bound address")?;
    Ok(Daemon {
        config,
        listener,
        bound,
    })
}

/// What the sessions share with the accepting thread.
struct Shared<'a> {
    config: &'a DaemonConfig,
    stop: &'a Stop,
    log: Mutex<Vec<String>>,
    counts: Mutex<DaemonReport>,
    admission: Admission,
    running: AtomicU32,
    next_test: AtomicU64,
}

impl Shared<'_> {
    fn log(&self, line: String) {
        if let Ok(mut log) = self.log.lock() {
            log.push(line);
        }
    }

    fn count(&self, f: impl FnOnce(&mut DaemonReport)) {
        if let Ok(mut counts) = self.counts.lock() {
            f(&mut counts);
        }
    }
}

impl Daemon {
    pub fn local_addr(&self) -> SocketAddr {
        self.bound
    }

    /// Serve until `stop`; every log line goes to `observer.warning` (from
    /// the calling thread). On the way out every server side is stopped
    /// and joined.
    pub fn run(self, stop: &Stop, observer: &mut dyn Observer<()>) -> anyhow::Result<DaemonReport> {
        let started = Instant::now();
        observer.ready(
            Some(self.bound),
            &format!(
                "serve: listening on {} ({}{}; at most {} tests at once, {} s each, {} threads, {} sent per test)",
                self.bound,
                if self.config.tls.is_some() { "TLS 1.3, " } else { "" },
                match self.config.auth() {
                    AuthKind::Token => "clients authenticate with the token",
                    AuthKind::Certificate => "clients authenticate with their certificate",
                    AuthKind::None => "no token: loopback clients only",
                },
                self.config.max_tests,
                self.config.max_duration.as_secs_f64(),
                self.config.max_threads,
                crate::base::units::format_rate(self.config.max_rate)
            ),
        );
        let shared = Shared {
            config: &self.config,
            stop,
            log: Mutex::new(Vec::new()),
            counts: Mutex::new(DaemonReport::default()),
            admission: Admission::default(),
            running: AtomicU32::new(0),
            next_test: AtomicU64::new(1),
        };
        let flush = |observer: &mut dyn Observer<()>| {
            let lines = shared
                .log
                .lock()
                .map(|mut l| std::mem::take(&mut *l))
                .unwrap_or_default();
            for line in lines {
                observer.warning(&line);
            }
        };
        std::thread::scope(|scope| {
            let mut sessions = Vec::new();
            // Connections closed at once (per source) and evicted, summed
            // up in the log now and then rather than a line each (a flood
            // would flood the log too).
            let mut tally = Tally::default();
            let mut summed = Instant::now();
            while !stop.is_set() {
                if summed.elapsed() >= SUMMARY_EVERY {
                    tally.log(&shared);
                    summed = Instant::now();
                }
                flush(observer);
                let (done, alive): (Vec<_>, Vec<_>) = sessions
                    .into_iter()
                    .partition(|h: &std::thread::ScopedJoinHandle<'_, ()>| h.is_finished());
                sessions = alive;
                for handle in done {
                    if handle.join().is_err() {
                        shared.log(
                            "a session thread panicked; its server side was stopped".to_string(),
                        );
                    }
                }
                let (conn, peer) = match self.listener.accept() {
                    Ok(accepted) => accepted,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        wait_readable(self.listener.as_fd(), POLL);
                        continue;
                    }
                    Err(e) => {
                        shared.log(format!("accept failed: {e}"));
                        std::thread::sleep(POLL);
                        continue;
                    }
                };
                shared.count(|c| c.connections += 1);
                let ticket = match shared.admission.admit(&conn, peer.ip()) {
                    Ok((ticket, evicted)) => {
                        if let Some(old) = evicted {
                            shared.count(|c| c.evicted += 1);
                            *tally.evicted.entry(Source::of(old)).or_insert(0) += 1;
                        }
                        ticket
                    }
                    Err(Refused::SourceFull(source)) => {
                        shared.count(|c| c.busy += 1);
                        *tally.closed.entry(source).or_insert(0) += 1;
                        continue;
                    }
                    Err(Refused::NoDescriptor) => {
                        shared.count(|c| c.busy += 1);
                        shared.log(format!(
                            "{peer}: closed at once: no file descriptor left (raise LimitNOFILE)"
                        ));
                        continue;
                    }
                };
                let shared = &shared;
                sessions.push(scope.spawn(move || session(conn, peer, ticket, shared)));
            }
            for handle in sessions {
                let _ = handle.join();
            }
            tally.log(&shared);
        });
        flush(observer);
        let mut report = shared.counts.into_inner().unwrap_or_default();
        report.command = "serve".to_string();
        report.bind = Some(self.bound);
        report.duration_s = started.elapsed().as_secs_f64();
        Ok(report)
    }
}

/// Connections the accept loop closed since its last summary, by source.
#[derive(Default)]
struct Tally {
    /// At once: the source had [`MAX_PER_SOURCE`] in their handshake.
    closed: HashMap<Source, u64>,
    /// In their handshake, the oldest, to make room for a new one.
    evicted: HashMap<Source, u64>,
}

impl Tally {
    /// One log line per source, then start again.
    fn log(&mut self, shared: &Shared<'_>) {
        for (source, n) in self.closed.drain() {
            shared.log(format!(
                "{source}: {n} connection(s) closed at once: {MAX_PER_SOURCE} from there were in \
                 their handshake already"
            ));
        }
        for (source, n) in self.evicted.drain() {
            shared.log(format!(
                "{source}: {n} connection(s) closed in their handshake to make room for newer \
                 ones ({MAX_PENDING} in their handshake at once, the oldest go first)"
            ));
        }
    }
}

/// Wait until `fd` is readable, up to `timeout`; whether it is.
fn wait_readable(fd: std::os::fd::BorrowedFd<'_>, timeout: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as libc::c_int) > 0 }
}

/// One control connection: handshake, request, the test, its report.
/// The ticket (its place among the handshakes) is given up once the
/// handshake ends.
fn session(conn: TcpStream, peer: SocketAddr, ticket: Ticket<'_>, shared: &Shared<'_>) {
    // Accepted sockets inherit O_NONBLOCK from the listener: block, with
    // timeouts.
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_nodelay(true);
    let _ = conn.set_write_timeout(Some(HANDSHAKE_WAIT));
    let greeted = greet(conn, shared);
    drop(ticket);
    let conn = match greeted {
        Ok(conn) => conn,
        Err(Refusal::Auth) => {
            shared.count(|c| c.auth_failures += 1);
            shared.log(format!(
                "{peer}: authentication failed; closed without an answer"
            ));
            return;
        }
        Err(Refusal::Dropped(why)) => {
            shared.count(|c| c.dropped += 1);
            shared.log(format!("{peer}: dropped: {why}"));
            return;
        }
        Err(Refusal::Tls(why)) => {
            shared.count(|c| c.tls_failures += 1);
            shared.log(format!("{peer}: {why}"));
            return;
        }
        Err(Refusal::Quiet) => return,
    };
    let _ = conn.tcp().set_write_timeout(Some(MESSAGE_WAIT));
    let cancel = || shared.stop.is_set();
    let start =
        match frame::read::<FromClient>(&conn, MAX_MESSAGE, Instant::now() + REQUEST_WAIT, &cancel)
        {
            Ok(FromClient::Start(start)) => start,
            Ok(_) => {
                shared.count(|c| c.dropped += 1);
                return shared.log(format!(
                    "{peer}: dropped: a message other than 'start' after the handshake"
                ));
            }
            Err(FrameError::Cancelled) => return,
            Err(e) => {
                shared.count(|c| c.dropped += 1);
                return shared.log(format!("{peer}: dropped: {e}"));
            }
        };
    test(&conn, peer, &start, shared);
    conn.close();
}

enum Refusal {
    /// A wrong token: closed with no answer.
    Auth,
    /// Garbage, too large, too slow, an old client: closed, logged.
    Dropped(String),
    /// The TLS handshake failed: closed, logged.
    Tls(String),
    /// The daemon is stopping.
    Quiet,
}

impl From<FrameError> for Refusal {
    fn from(e: FrameError) -> Refusal {
        match e {
            FrameError::Cancelled => Refusal::Quiet,
            FrameError::TimedOut => Refusal::Dropped(format!(
                "no complete message within {} s (slow or silent)",
                HANDSHAKE_WAIT.as_secs()
            )),
            FrameError::Tls(e) => {
                Refusal::Tls(format!("TLS failed: {}", crate::base::tls::explain(&e)))
            }
            other => Refusal::Dropped(other.to_string()),
        }
    }
}

/// Preamble, version, challenge, the client's MAC, welcome.
fn greet(tcp: TcpStream, shared: &Shared<'_>) -> Result<Conn, Refusal> {
    let deadline = Instant::now() + HANDSHAKE_WAIT;
    let cancel = || shared.stop.is_set();
    let mut bytes = [0u8; PREAMBLE_LEN];
    let plain = Conn::plain(tcp);
    frame::read_exact_by(&plain, &mut bytes, deadline, &cancel)?;
    let (version, flags) = proto::parse_preamble(&bytes).map_err(Refusal::Dropped)?;
    if !(proto::MIN_VERSION..=proto::VERSION).contains(&version) {
        let message = if version < proto::MIN_VERSION {
            format!(
                "this daemon speaks nettune serve protocol {}..{}, the client {version}: upgrade \
                 nettune on the client",
                proto::MIN_VERSION,
                proto::VERSION
            )
        } else {
            format!(
                "the client speaks nettune serve protocol {version}, this daemon {}: upgrade \
                 nettune on the daemon's host",
                proto::VERSION
            )
        };
        let _ = frame::write(
            &plain,
            &FromDaemon::Error {
                kind: ErrorKind::Upgrade,
                message: message.clone(),
            },
        );
        return Err(Refusal::Dropped(message));
    }
    let conn = match (flags & FLAG_TLS != 0, &shared.config.tls) {
        (true, Some(tls)) => {
            Conn::accept(plain.into_tcp(), tls, deadline, &cancel).map_err(|e| match e {
                HandshakeError::Cancelled => Refusal::Quiet,
                other => Refusal::Tls(other.to_string()),
            })?
        }
        (false, None) => plain,
        (wants, _) => {
            // Said in plain text, where the client expects it either way.
            let message = if wants {
                "the client asks for TLS but this daemon has no certificate: drop --tls-ca on the \
                 client, or start the daemon with --tls-cert and --tls-key"
            } else {
                "this daemon speaks TLS only: give the client --tls-ca FILE (the CA that signed the \
                 daemon's certificate)"
            };
            let _ = frame::write(
                &plain,
                &FromDaemon::Error {
                    kind: ErrorKind::Refused,
                    message: message.to_string(),
                },
            );
            return Err(Refusal::Tls(message.to_string()));
        }
    };
    let mut nonce = [0u8; NONCE_LEN];
    crate::base::random::fill(&mut nonce)
        .map_err(|e| Refusal::Dropped(format!("no random nonce: {e}")))?;
    let token = shared.config.token.as_ref();
    let challenge = FromDaemon::Challenge {
        version: proto::VERSION,
        nonce: proto::hex(&nonce),
        auth: shared.config.auth(),
    };
    frame::write(&conn, &challenge).map_err(|e| Refusal::Dropped(format!("{e:#}")))?;
    let (client_nonce, mac) =
        match frame::read::<FromClient>(&conn, MAX_MESSAGE, deadline, &cancel)? {
            FromClient::Auth { nonce, mac } => (nonce, mac),
            _ => {
                return Err(Refusal::Dropped(
                    "a message other than 'auth' in the handshake".to_string(),
                ))
            }
        };
    let client_nonce = proto::unhex(&client_nonce)
        .filter(|n| n.len() == NONCE_LEN)
        .ok_or_else(|| Refusal::Dropped("a malformed nonce".to_string()))?;
    let daemon_mac = match token {
        Some(token) => {
            if !proto::verify(
                token.secret(),
                proto::CLIENT_LABEL,
                &nonce,
                &client_nonce,
                &mac,
            ) {
                return Err(Refusal::Auth);
            }
            proto::mac(token.secret(), proto::DAEMON_LABEL, &client_nonce, &nonce)
        }
        None => String::new(),
    };
    let welcome = FromDaemon::Welcome {
        mac: daemon_mac,
        limits: shared.config.limits(),
    };
    frame::write(&conn, &welcome).map_err(|e| Refusal::Dropped(format!("{e:#}")))?;
    Ok(conn)
}

/// Check a request against the daemon's limits.
fn check(start: &Start, config: &DaemonConfig) -> anyhow::Result<Duration> {
    if !(start.seconds.is_finite() && start.seconds > 0.0) {
        anyhow::bail!("a server side of {} s is not a duration", start.seconds);
    }
    if start.seconds > config.max_duration.as_secs_f64() {
        anyhow::bail!(
            "a server side of {:.1} s is longer than this daemon allows ({:.1} s, --max-duration); \
             ask for less",
            start.seconds,
            config.max_duration.as_secs_f64()
        );
    }
    let engine = side_engine(start)?;
    let threads = engine.threads(&start.side.params);
    crate::bench::within(
        "remote-threads",
        u64::from(threads),
        1,
        u64::from(config.max_threads),
    )?;
    engine.within(&start.side.params, &config.server_limits())?;
    Duration::try_from_secs_f64(start.seconds).context("the duration")
}

/// The engine of a request's server side.
fn side_engine(start: &Start) -> anyhow::Result<&'static dyn Engine> {
    start
        .side
        .engine()
        .ok_or_else(|| anyhow::anyhow!("no server side called '{}'", start.side.name()))
}

/// Open the requested server side on `local` (the address the client
/// reached), serving `peer` only.
fn open_side(
    start: &Start,
    local: IpAddr,
    peer: IpAddr,
    seconds: Duration,
    config: &DaemonConfig,
) -> anyhow::Result<Box<dyn Server>> {
    let mut at = Placement::new(SocketAddr::new(local, 0));
    at.pin = start.pin.clone();
    at.duration = Some(seconds);
    at.peer = Some(peer);
    at.one_test = true;
    at.limits = config.server_limits();
    at.tls = config.tls.clone();
    side_engine(start)?.open(&start.side.params, &at)
}

/// Reserves one of `max_tests` slots; frees it when dropped.
struct Slot<'a>(&'a AtomicU32);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn refuse(conn: &Conn, peer: SocketAddr, kind: ErrorKind, message: String, shared: &Shared<'_>) {
    shared.count(|c| c.tests_refused += 1);
    shared.log(format!("{peer}: refused: {message}"));
    let _ = frame::write(conn, &FromDaemon::Error { kind, message });
}

/// Run one requested server side until the client's `finish`, its
/// departure, its time (and a grace) or the daemon's end; report.
fn test(conn: &Conn, peer: SocketAddr, start: &Start, shared: &Shared<'_>) {
    let config = shared.config;
    let seconds = match check(start, config) {
        Ok(s) => s,
        Err(e) => return refuse(conn, peer, ErrorKind::Refused, format!("{e:#}"), shared),
    };
    if shared.running.fetch_add(1, Ordering::SeqCst) >= config.max_tests {
        shared.running.fetch_sub(1, Ordering::SeqCst);
        let message = format!(
            "{} tests are running, the most this daemon runs at once (--max-tests); try again later",
            config.max_tests
        );
        return refuse(conn, peer, ErrorKind::Busy, message, shared);
    }
    let _slot = Slot(&shared.running);
    let local = match conn.tcp().local_addr() {
        Ok(a) => a.ip(),
        Err(e) => return refuse(conn, peer, ErrorKind::Failed, e.to_string(), shared),
    };
    let side = match open_side(start, local, peer.ip(), seconds, config) {
        Ok(side) => side,
        Err(e) => return refuse(conn, peer, ErrorKind::Failed, format!("{e:#}"), shared),
    };
    let id = shared.next_test.fetch_add(1, Ordering::SeqCst);
    let bench = start.side.name();
    let port = side.local_addr().port();
    let started = FromDaemon::Started {
        test: id,
        port,
        detail: format!(
            "{bench} on {local}:{port} {}, {:.1} s at most",
            if start.side.engine().is_some_and(|e| !e.answers()) {
                "(it sends nothing)".to_string()
            } else {
                format!("for {} only", peer.ip())
            },
            seconds.as_secs_f64()
        ),
    };
    if frame::write(conn, &started).is_err() {
        shared.count(|c| c.clients_gone += 1);
        return shared.log(format!("{peer}: left before its {bench} started"));
    }
    shared.count(|c| c.tests_started += 1);
    shared.log(format!("test {id}: {bench} on port {port} for {peer}"));
    let test_stop = Stop::new();
    let began = Instant::now();
    let cpu_before = stat::read(&Root::live()).ok();
    let (ended, result) = std::thread::scope(|scope| {
        let handle = scope.spawn(|| side.run(&test_stop));
        let ended = wait_for_end(conn, shared, began + seconds + FINISH_WAIT, || {
            format!("test {id}: {peer} sent a message other than 'finish'; stopping its {bench}")
        });
        test_stop.trigger();
        let result = handle
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the {bench} thread panicked")));
        (ended, result)
    });
    let cpu_after = stat::read(&Root::live()).ok();
    let (report, error) = match result {
        Ok(served) => (Some(served.report), None),
        Err(e) => (None, Some(format!("{e:#}"))),
    };
    let remote = RemoteReport {
        test: id,
        bench: bench.to_string(),
        ended: if error.is_some() { "failed" } else { ended }.to_string(),
        seconds: began.elapsed().as_secs_f64(),
        report,
        host_cpu: match (&cpu_before, &cpu_after) {
            (Some(b), Some(a)) => Some(CpuUsage::between(b, a)),
            _ => None,
        },
        error,
    };
    if ended == "client-gone" {
        shared.count(|c| c.clients_gone += 1);
        shared.log(format!(
            "test {id}: {peer} left mid-test; its {bench} was stopped"
        ));
    } else {
        send_report(conn, peer, &remote, shared);
    }
}

/// Wait, while the server side runs, for the client's `finish`, its
/// departure, the `deadline` or the daemon's end; say which. `unexpected`
/// is the log line for a message other than `finish`.
fn wait_for_end(
    conn: &Conn,
    shared: &Shared<'_>,
    deadline: Instant,
    unexpected: impl Fn() -> String,
) -> &'static str {
    loop {
        if shared.stop.is_set() {
            break "stopped";
        }
        if Instant::now() > deadline {
            break "duration";
        }
        if !conn.wait_readable(POLL) {
            continue;
        }
        match frame::read::<FromClient>(conn, MAX_MESSAGE, Instant::now() + MESSAGE_WAIT, &|| false)
        {
            Ok(FromClient::Finish) => {
                // Let what is queued in the server side's sockets be read.
                std::thread::sleep(LINGER);
                break "finished";
            }
            Ok(_) => {
                shared.log(unexpected());
                break "client-gone";
            }
            Err(_) => break "client-gone",
        }
    }
}

/// Send a finished test's report to its client, and log how it ended.
fn send_report(conn: &Conn, peer: SocketAddr, remote: &RemoteReport, shared: &Shared<'_>) {
    shared.count(|c| c.tests_finished += 1);
    let _ = conn.tcp().set_write_timeout(Some(MESSAGE_WAIT));
    let _ = frame::write(conn, &FromDaemon::Report(Box::new(remote.clone())));
    shared.log(format!(
        "test {id}: {bench} for {peer} ended ({}){}",
        remote.ended,
        remote
            .error
            .as_deref()
            .map(|e| format!(": {e}"))
            .unwrap_or_default(),
        id = remote.test,
        bench = remote.bench,
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::tls::{PemFile, ServerFiles};

    #[test]
    fn beyond_loopback_clients_must_authenticate_with_a_token_or_a_certificate() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec!["192.0.2.1".to_string()]).expect("p");
        let cert = params.self_signed(&key).expect("cert");
        std::fs::write(dir.path().join("c.pem"), cert.pem()).expect("write");
        std::fs::write(dir.path().join("c.key"), key.serialize_pem()).expect("write");
        let files = |client_ca: bool| ServerFiles {
            cert: PemFile::new("--tls-cert", dir.path().join("c.pem")),
            key: PemFile::new("--tls-key", dir.path().join("c.key")),
            client_ca: client_ca.then(|| PemFile::new("--tls-client-ca", dir.path().join("c.pem"))),
        };
        let public: SocketAddr = "0.0.0.0:5299".parse().expect("addr");
        let mut config = DaemonConfig::new(public, None);
        assert!(config.validate().is_err());
        // TLS alone encrypts but does not say who the client is.
        config.tls = Some(ServerTls::load(&files(false)).expect("tls"));
        assert_eq!(config.auth(), AuthKind::None);
        assert!(config.validate().is_err());
        config.tls = Some(ServerTls::load(&files(true)).expect("tls"));
        assert_eq!(config.auth(), AuthKind::Certificate);
        assert!(config.validate().is_ok());
        config.token = Some(Token::new("0123456789abcdef").expect("token"));
        assert_eq!(config.auth(), AuthKind::Token);
    }
}
