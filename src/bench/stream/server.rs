//! `bench stream-server`: accept tests, each on threads of its own, many at
//! once (iperf3 serves one at a time), and send each client its side of
//! every stream.
//!
//! The harness runs one worker, the acceptor; each connection gets a
//! short-lived handler thread that reads its header before a deadline (a
//! silent or trickling peer costs one thread for two seconds at most). A
//! control connection becomes a test ([`run_test`]); a data connection is
//! handed to the test whose id it carries.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::pump::{self, Source};
use super::server_report::{Refusals, ServerInterval, ServerReport, StreamSide, TestReport};
use super::sock::{self, Buffers};
use super::wire::{Header, Kind, Params, ToClient, ToServer, HEADER_LEN, MAX_MESSAGE};
use super::{check_size, ServerConfig, MAX_STREAMS};
use crate::base::observe::Observer;
use crate::base::stop::{Stop, POLL};
use crate::base::tls::HandshakeError;
use crate::base::Root;
use crate::bench::cpu::CpuUsage;
use crate::bench::frame::{self, Conn, FrameError};
use crate::bench::harness::{self, Control, Phase, Placement, Timeline};
use crate::bench::netns;
use crate::bench::pin::{pin_current_thread, Pinning};
use crate::bench::port::{self, Transport};
use crate::bench::report::LiveCounter;
use crate::host::stat;

/// How long a new connection has to send its header, and a control
/// connection its parameters.
const HELLO_WAIT: Duration = Duration::from_secs(2);
/// How long a test waits for all its data connections.
const STREAMS_WAIT: Duration = Duration::from_secs(5);
/// A test runs at most its announced time plus this before it is ended.
const GRACE: Duration = Duration::from_secs(10);
/// Connections being greeted at once; more are closed at once.
const MAX_HANDLERS: usize = 512;

/// A stream-server with its listener bound, ready to [`run`](StreamServer::run).
pub struct StreamServer {
    config: ServerConfig,
    listener: TcpListener,
    bound: SocketAddr,
    pinning: Pinning,
}

/// Check the config and bind the listener (inside its namespace); a port
/// another program holds is refused.
pub fn open(config: ServerConfig) -> anyhow::Result<StreamServer> {
    config.validate()?;
    let pinning = Pinning::new(config.pin.clone(), &Root::live())?;
    let listener = netns::within(config.netns.as_deref(), || {
        port::ensure_unshared(config.bind, Transport::Tcp, false)
            .with_context(|| format!("--bind '{}'", config.bind))?;
        TcpListener::bind(config.bind).with_context(|| format!("--bind '{}'", config.bind))
    })?;
    listener
        .set_nonblocking(true)
        .context("cannot make the listener non-blocking")?;
    let bound = listener
        .local_addr()
        .context("cannot read the bound address")?;
    Ok(StreamServer {
        config,
        listener,
        bound,
        pinning,
    })
}

/// What the acceptor, the handlers and the calling thread share.
#[derive(Default)]
struct Shared {
    pending: Mutex<HashMap<u64, Pending>>,
    arrived: Condvar,
    reports: Mutex<Vec<TestReport>>,
    /// Warnings for the observer, taken by the calling thread.
    notes: Mutex<Vec<String>>,
    refused: Mutex<Refusals>,
    /// Bytes moved by every test so far.
    bytes: AtomicU64,
    running: AtomicUsize,
    handlers: AtomicUsize,
    finished: AtomicU64,
}

impl Shared {
    fn note(&self, text: String) {
        if let Ok(mut notes) = self.notes.lock() {
            notes.push(text);
        }
    }

    fn refuse(&self, why: impl FnOnce(&mut Refusals), text: String) {
        if let Ok(mut refused) = self.refused.lock() {
            why(&mut refused);
        }
        self.note(text);
    }
}

/// A test waiting for its data connections.
struct Pending {
    peer: IpAddr,
    streams: Vec<Option<TcpStream>>,
}

impl StreamServer {
    /// The address it listens on (the port the kernel chose for 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.bound
    }

    /// Serve until the duration, `stop`, or the test limit.
    pub fn run(
        self,
        stop: &Stop,
        observer: &mut dyn Observer<ServerInterval>,
    ) -> anyhow::Result<ServerReport> {
        observer.ready(
            Some(self.bound),
            &format!(
                "a thread per stream{}{}",
                match self.pinning.cpus() {
                    [] => String::new(),
                    cpus => format!(
                        ", stream i of each test on CPU i of {}",
                        crate::base::cpuset::format_list(cpus)
                    ),
                },
                self.config
                    .peer
                    .map(|p| format!(", for {p} only"))
                    .unwrap_or_default()
            ),
        );
        let shared = Shared::default();
        let mut control = Meter {
            shared: &shared,
            observer,
            last: 0,
            intervals: Vec::new(),
        };
        let timeline = Timeline {
            warmup: Duration::ZERO,
            duration: self.config.duration,
        };
        let done = harness::run(
            vec![()],
            Placement::pinned(&Pinning::none()),
            stop,
            &timeline,
            &mut control,
            |_, (), phase| {
                accept_loop(&self, &shared, phase);
                Ok(())
            },
        )?;
        control.poll();
        let intervals = control.intervals;
        let tests = shared.reports.into_inner().unwrap_or_default();
        Ok(ServerReport {
            command: "stream-server".to_string(),
            bind: self.bound,
            netns: self.config.netns.clone(),
            ended: done.ended.name().to_string(),
            duration_s: done.elapsed.as_secs_f64(),
            tests,
            refused: shared.refused.into_inner().unwrap_or_default(),
            intervals,
        })
    }
}

/// The calling thread: warnings and a line per second for the observer.
struct Meter<'a> {
    shared: &'a Shared,
    observer: &'a mut dyn Observer<ServerInterval>,
    last: u64,
    intervals: Vec<ServerInterval>,
}

impl Control for Meter<'_> {
    fn poll(&mut self) {
        let notes = match self.shared.notes.lock() {
            Ok(mut notes) => std::mem::take(&mut *notes),
            Err(_) => Vec::new(),
        };
        for note in notes {
            self.observer.warning(&note);
        }
    }

    fn tick(&mut self, second: u64) {
        self.poll();
        let now = self.shared.bytes.load(Ordering::Relaxed);
        let bytes = now.saturating_sub(self.last);
        self.last = now;
        let interval = ServerInterval {
            second,
            bytes,
            bits_per_second: bytes as f64 * 8.0,
            tests: self.shared.running.load(Ordering::Relaxed),
        };
        self.observer.interval(&interval);
        self.intervals.push(interval);
    }
}

/// Accept until the run ends or the test limit is reached; every handler
/// is joined before this returns.
fn accept_loop(server: &StreamServer, shared: &Shared, phase: &Phase) {
    let limit = server.config.tests.map(u64::from);
    std::thread::scope(|scope| {
        while !phase.stopped() {
            if limit.is_some_and(|n| shared.finished.load(Ordering::SeqCst) >= n) {
                phase.end();
                break;
            }
            let (conn, peer) = match server.listener.accept() {
                Ok(accepted) => accepted,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    wait_readable(server.listener.as_fd(), POLL);
                    continue;
                }
                Err(e) => {
                    shared.note(format!("accept failed: {e}"));
                    std::thread::sleep(POLL);
                    continue;
                }
            };
            if let Some(allowed) = server.config.peer {
                if peer.ip() != allowed {
                    shared.refuse(
                        |r| r.foreign_peer += 1,
                        format!(
                            "closed a connection from {peer}: this server serves {allowed} only"
                        ),
                    );
                    continue;
                }
            }
            if shared.handlers.load(Ordering::SeqCst) >= MAX_HANDLERS {
                shared.refuse(
                    |r| r.busy += 1,
                    format!("closed a connection from {peer}: {MAX_HANDLERS} connections are being greeted already"),
                );
                continue;
            }
            shared.handlers.fetch_add(1, Ordering::SeqCst);
            scope.spawn(move || {
                handle(conn, peer, server, shared, phase);
                shared.handlers.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
}

/// Wait until `fd` is readable, up to `timeout`.
fn wait_readable(fd: std::os::fd::BorrowedFd<'_>, timeout: Duration) {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as libc::c_int) };
}

/// Read a new connection's header and pass it on.
fn handle(
    conn: TcpStream,
    peer: SocketAddr,
    server: &StreamServer,
    shared: &Shared,
    phase: &Phase,
) {
    // Accepted sockets inherit O_NONBLOCK from the listener: block, with
    // timeouts, like every other socket here.
    if conn.set_nonblocking(false).is_err() {
        return;
    }
    let _ = conn.set_nodelay(true);
    let mut bytes = [0u8; HEADER_LEN];
    let deadline = Instant::now() + HELLO_WAIT;
    let plain = Conn::plain(conn);
    let header = match frame::read_exact_by(&plain, &mut bytes, deadline, &|| phase.stopped()) {
        Ok(()) => Header::decode(&bytes).map_err(|e| e.to_string()),
        Err(FrameError::Cancelled) => return,
        Err(e) => Err(e.to_string()),
    };
    match header {
        Ok(h) if h.kind == Kind::Data => attach(plain.into_tcp(), peer, h, shared),
        Ok(h) => {
            if let Some(ctl) = secure(plain, h.tls, peer, deadline, server, shared, phase) {
                run_test(ctl, peer, server, shared, phase);
            }
        }
        Err(why) => shared.refuse(
            |r| r.bad_header += 1,
            format!("dropped a connection from {peer}: {why}"),
        ),
    }
}

/// A control connection as this server speaks it: TLS when it has a
/// certificate (the client must have asked), else plain (the client must
/// not have). `None`: refused (in plain text, which the client reads
/// either way) or failed, and counted.
fn secure(
    plain: Conn,
    asked: bool,
    peer: SocketAddr,
    deadline: Instant,
    server: &StreamServer,
    shared: &Shared,
    phase: &Phase,
) -> Option<Conn> {
    let refuse = |why: String| {
        shared.refuse(
            |r| r.tls += 1,
            format!("dropped a control connection from {peer}: {why}"),
        );
    };
    match (asked, &server.config.tls) {
        (true, Some(tls)) => {
            match Conn::accept(plain.into_tcp(), tls, deadline, &|| phase.stopped()) {
                Ok(ctl) => Some(ctl),
                Err(HandshakeError::Cancelled) => None,
                Err(e) => {
                    refuse(e.to_string());
                    None
                }
            }
        }
        (false, None) => Some(plain),
        (asked, _) => {
            let error = if asked {
                "this stream-server does not speak TLS; drop the client's TLS options"
            } else {
                "this stream-server speaks TLS only on control connections; give the client the \
                 CA that signed its certificate"
            };
            let _ = plain.tcp().set_write_timeout(Some(HELLO_WAIT));
            let _ = frame::write(
                &plain,
                &ToClient::Refused {
                    error: error.to_string(),
                },
            );
            refuse(error.to_string());
            None
        }
    }
}

/// Hand a data connection to its waiting test.
fn attach(conn: TcpStream, peer: SocketAddr, header: Header, shared: &Shared) {
    let Ok(mut pending) = shared.pending.lock() else {
        return;
    };
    let slot = pending
        .get_mut(&header.test)
        .filter(|t| t.peer == peer.ip())
        .and_then(|t| t.streams.get_mut(header.stream as usize))
        .filter(|slot| slot.is_none());
    match slot {
        Some(slot) => {
            *slot = Some(conn);
            shared.arrived.notify_all();
        }
        None => {
            drop(pending);
            shared.refuse(
                |r| r.unknown_stream += 1,
                format!(
                    "dropped a data connection from {peer}: no test {:#x} with a free stream {} \
                     waits for that address",
                    header.test, header.stream
                ),
            );
        }
    }
}

/// Check a client's parameters against this server's bounds.
fn check_params(p: &Params, config: &ServerConfig) -> anyhow::Result<()> {
    crate::bench::within("streams", u64::from(p.streams), 1, u64::from(MAX_STREAMS))?;
    check_size(p.size)?;
    if !(p.seconds.is_finite() && p.seconds > 0.0) {
        anyhow::bail!("a test of {} s is not a duration", p.seconds);
    }
    if p.seconds > config.max_test.as_secs_f64() {
        anyhow::bail!(
            "a test of {:.1} s is longer than this server allows ({:.1} s); ask for less",
            p.seconds,
            config.max_test.as_secs_f64()
        );
    }
    if let Some(window) = p.window {
        crate::bench::within("window", u64::from(window), 2048, i32::MAX as u64 / 2)?;
    }
    if let Some(cc) = &p.cc {
        sock::check_cc(cc).context("on the server")?;
    }
    Ok(())
}

/// The per-stream pace when this server sends: the client's, bounded by
/// the server's rate limit split over the streams.
fn effective_pace(p: &Params, config: &ServerConfig) -> Option<u64> {
    let bound = config
        .max_rate
        .map(|rate| (rate / u64::from(p.streams.max(1))).max(8));
    match (p.pace, bound) {
        (Some(pace), Some(bound)) => Some(pace.min(bound)),
        (pace, bound) => pace.or(bound),
    }
}

/// One test on its control connection: parameters, data connections, the
/// transfer on one thread per stream, the results back to the client.
fn run_test(ctl: Conn, peer: SocketAddr, server: &StreamServer, shared: &Shared, phase: &Phase) {
    let _ = ctl.tcp().set_write_timeout(Some(HELLO_WAIT));
    let Some(params) = read_params(&ctl, peer, shared, phase) else {
        return;
    };
    let refuse = |error: String| {
        let _ = frame::write(
            &ctl,
            &ToClient::Refused {
                error: error.clone(),
            },
        );
        shared.refuse(
            |r| r.bad_params += 1,
            format!("refused a test from {peer}: {error}"),
        );
    };
    if let Err(e) = check_params(&params, &server.config) {
        return refuse(format!("{e:#}"));
    }
    let test = match crate::base::random::nonzero_u64() {
        Ok(id) => id,
        Err(e) => return refuse(format!("cannot draw a test id: {e}")),
    };
    let streams = match gather(&ctl, test, peer, &params, shared, phase) {
        Ok(streams) => streams,
        Err(e) => return refuse(format!("{e:#}")),
    };
    let pace = if params.reverse {
        effective_pace(&params, &server.config)
    } else {
        None
    };
    let setup = streams
        .iter()
        .map(|s| configure(s, &params, pace))
        .collect::<anyhow::Result<Vec<Buffers>>>();
    let buffers = match setup {
        Ok(b) => b,
        Err(e) => return refuse(format!("{e:#}")),
    };
    let source = if params.reverse {
        match Source::new(params.size, params.zerocopy) {
            Ok(s) => Some(s),
            Err(e) => return refuse(format!("{e:#}")),
        }
    } else {
        None
    };
    if frame::write(&ctl, &ToClient::Ready).is_err() {
        return shared.note(format!(
            "test {test:#x} from {peer}: the client left before the start"
        ));
    }
    shared.running.fetch_add(1, Ordering::SeqCst);
    let run = Run {
        params: &params,
        pinning: &server.pinning,
        source: source.as_ref(),
        shared,
        phase,
        end: AtomicBool::new(false),
    };
    let cpu_before = stat::read(&Root::live()).ok();
    let (ended, results) = run.transfer(&ctl, &streams);
    let cpu_after = stat::read(&Root::live()).ok();
    shared.running.fetch_sub(1, Ordering::SeqCst);
    let mut report = build_report(test, peer, &params, ended, results, &streams, buffers);
    report.pace_bits_per_second = pace;
    report.pacer = match (pace, streams.first().and_then(|s| s.local_addr().ok())) {
        (Some(_), Some(local)) => Some(sock::pacer_for(local).1),
        _ => None,
    };
    if let (Some(before), Some(after)) = (&cpu_before, &cpu_after) {
        report.host_cpu = Some(CpuUsage::between(before, after));
    }
    send_results(&ctl, peer, test, report, shared);
}

/// The test's parameters, the first message on its control connection;
/// `None` (the connection dropped, and counted unless the server is
/// stopping) for anything else.
fn read_params(ctl: &Conn, peer: SocketAddr, shared: &Shared, phase: &Phase) -> Option<Params> {
    let deadline = Instant::now() + HELLO_WAIT;
    match frame::read::<ToServer>(ctl, MAX_MESSAGE, deadline, &|| phase.stopped()) {
        Ok(ToServer::Params(p)) => Some(p),
        Ok(other) => {
            shared.refuse(
                |r| r.bad_params += 1,
                format!(
                    "dropped a control connection from {peer}: {other:?} before the parameters"
                ),
            );
            None
        }
        Err(FrameError::Cancelled) => None,
        Err(e) => {
            shared.refuse(
                |r| r.bad_params += 1,
                format!("dropped a control connection from {peer}: {e}"),
            );
            None
        }
    }
}

/// Send a test's report to its client, note how it ended unless complete,
/// and keep it for the server's own report.
fn send_results(ctl: &Conn, peer: SocketAddr, test: u64, report: TestReport, shared: &Shared) {
    if report.ended != "complete" {
        shared.note(format!(
            "test {test:#x} from {peer} ended {}{}",
            report.ended,
            report
                .error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        ));
    }
    let _ = frame::write(ctl, &ToClient::Results(Box::new(report.clone())));
    ctl.close();
    if let Ok(mut reports) = shared.reports.lock() {
        reports.push(report);
    }
    shared.finished.fetch_add(1, Ordering::SeqCst);
}

/// Register the test, accept it, and wait for its data connections.
fn gather(
    ctl: &Conn,
    test: u64,
    peer: SocketAddr,
    params: &Params,
    shared: &Shared,
    phase: &Phase,
) -> anyhow::Result<Vec<TcpStream>> {
    let n = params.streams as usize;
    {
        let mut pending = shared
            .pending
            .lock()
            .map_err(|_| anyhow::anyhow!("server state poisoned"))?;
        pending.insert(
            test,
            Pending {
                peer: peer.ip(),
                streams: (0..n).map(|_| None).collect(),
            },
        );
    }
    let take = || shared.pending.lock().ok().and_then(|mut p| p.remove(&test));
    if frame::write(ctl, &ToClient::Accepted { test }).is_err() {
        take();
        anyhow::bail!("the client left before its data connections");
    }
    let until = Instant::now() + STREAMS_WAIT;
    let mut pending = shared
        .pending
        .lock()
        .map_err(|_| anyhow::anyhow!("server state poisoned"))?;
    loop {
        let arrived = pending
            .get(&test)
            .map_or(0, |t| t.streams.iter().filter(|s| s.is_some()).count());
        if arrived == n {
            break;
        }
        if Instant::now() >= until || phase.stopped() {
            pending.remove(&test);
            anyhow::bail!(
                "only {arrived} of {n} data connections arrived within {} s",
                STREAMS_WAIT.as_secs()
            );
        }
        pending = shared
            .arrived
            .wait_timeout(pending, POLL)
            .map_err(|_| anyhow::anyhow!("server state poisoned"))?
            .0;
    }
    let entry = pending
        .remove(&test)
        .ok_or_else(|| anyhow::anyhow!("the test vanished"))?;
    Ok(entry.streams.into_iter().flatten().collect())
}

/// The server's options on one data connection.
fn configure(stream: &TcpStream, p: &Params, pace: Option<u64>) -> anyhow::Result<Buffers> {
    let fd = stream.as_fd();
    let buffers = sock::set_window(fd, p.window)?;
    if let Some(cc) = &p.cc {
        sock::set_cc(fd, cc).context("on the server")?;
    }
    if p.reverse {
        if let Some(rate) = pace {
            sock::set_pacing(fd, rate)?;
        }
        if p.zerocopy == Some(super::ZeroCopy::Msg) {
            sock::enable_zerocopy(fd)?;
        }
    }
    Ok(buffers)
}

/// What one stream thread brings back.
enum Moved {
    Received(pump::Received),
    Sent(pump::Sent),
}

/// A stream's CPU (when pinned) and what its thread brought back.
type StreamResult = (Option<u32>, anyhow::Result<Moved>);

/// A running test.
struct Run<'a> {
    params: &'a Params,
    pinning: &'a Pinning,
    source: Option<&'a Source>,
    shared: &'a Shared,
    phase: &'a Phase,
    /// The test is over: senders stop, receivers give up.
    end: AtomicBool,
}

impl Run<'_> {
    /// Move the bytes on one thread per stream while this thread watches
    /// the control connection, the test's deadline and the server's end.
    fn transfer(&self, ctl: &Conn, streams: &[TcpStream]) -> (&'static str, Vec<StreamResult>) {
        let limit =
            Duration::try_from_secs_f64(self.params.seconds).unwrap_or(super::MAX_TEST) + GRACE;
        let started = Instant::now();
        let live: Vec<LiveCounter> = streams.iter().map(|_| LiveCounter::default()).collect();
        std::thread::scope(|scope| {
            let handles: Vec<_> = streams
                .iter()
                .zip(&live)
                .enumerate()
                .map(|(i, (stream, live))| {
                    let cpu = self.pinning.cpu_for(i);
                    scope.spawn(move || (cpu, self.stream(stream, cpu, live)))
                })
                .collect();
            let mut ended = "complete";
            let mut counted = 0u64;
            let mut ctl_open = true;
            while !handles.iter().all(|h| h.is_finished()) {
                let moved: u64 = live.iter().map(|l| l.read().1).sum();
                self.shared
                    .bytes
                    .fetch_add(moved - counted, Ordering::Relaxed);
                counted = moved;
                if self.end.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                if self.phase.stopped() {
                    ended = "interrupted";
                    self.end.store(true, Ordering::SeqCst);
                } else if started.elapsed() > limit {
                    ended = "deadline";
                    self.end.store(true, Ordering::SeqCst);
                } else if ctl_open {
                    match watch(ctl) {
                        Watch::Quiet => {}
                        Watch::Stop => self.end.store(true, Ordering::SeqCst),
                        Watch::Gone => {
                            ctl_open = false;
                            // Receiving: the streams end with their FINs
                            // (or resets) on their own. Sending: stop.
                            if self.params.reverse {
                                ended = "client-gone";
                                self.end.store(true, Ordering::SeqCst);
                            }
                        }
                    }
                } else {
                    std::thread::sleep(POLL);
                }
            }
            let moved: u64 = live.iter().map(|l| l.read().1).sum();
            self.shared
                .bytes
                .fetch_add(moved - counted, Ordering::Relaxed);
            let results = handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        (None, Err(anyhow::anyhow!("a stream thread panicked")))
                    })
                })
                .collect();
            (ended, results)
        })
    }

    /// One stream's thread: pinned, then receive to the FIN or send until
    /// the end.
    fn stream(
        &self,
        stream: &TcpStream,
        cpu: Option<u32>,
        live: &LiveCounter,
    ) -> anyhow::Result<Moved> {
        if let Some(cpu) = cpu {
            pin_current_thread(cpu)?;
        }
        let end = || self.end.load(Ordering::Relaxed);
        match self.source {
            Some(source) => pump::send(stream, source, &end, live).map(Moved::Sent),
            None => {
                let lowat = pump::rcvlowat(self.params.streams, self.params.size, self.params.pace);
                pump::receive(stream, self.params.size, lowat, &end, live).map(Moved::Received)
            }
        }
    }
}

enum Watch {
    Quiet,
    Stop,
    Gone,
}

/// Look at the control connection for up to [`POLL`]: the client's Stop,
/// its departure, or nothing.
fn watch(ctl: &Conn) -> Watch {
    if !ctl.wait_readable(POLL) {
        return Watch::Quiet;
    }
    match frame::read::<ToServer>(ctl, MAX_MESSAGE, Instant::now() + HELLO_WAIT, &|| false) {
        Ok(ToServer::Stop) => Watch::Stop,
        // Anything else now is a client that does not follow the protocol.
        _ => Watch::Gone,
    }
}

fn build_report(
    test: u64,
    peer: SocketAddr,
    params: &Params,
    ended: &str,
    results: Vec<StreamResult>,
    streams: &[TcpStream],
    buffers: Vec<Buffers>,
) -> TestReport {
    let mut first_error = None;
    let sides: Vec<StreamSide> = results
        .into_iter()
        .zip(streams)
        .zip(buffers)
        .enumerate()
        .map(|(i, (((cpu, moved), stream), buffers))| {
            let mut side = StreamSide {
                stream: i as u32,
                cpu,
                bytes: 0,
                eof: false,
                seconds: 0.0,
                bits_per_second: 0.0,
                cpu_user_s: 0.0,
                cpu_sys_s: 0.0,
                buffers,
                tcp: sock::info_of(stream),
                zerocopy: None,
                error: None,
            };
            match moved {
                Ok(Moved::Received(r)) => {
                    side.bytes = r.bytes;
                    side.eof = r.eof;
                    side.seconds = r.seconds();
                    side.cpu_user_s = r.cpu.0.as_secs_f64();
                    side.cpu_sys_s = r.cpu.1.as_secs_f64();
                }
                Ok(Moved::Sent(s)) => {
                    side.bytes = s.bytes;
                    side.eof = true;
                    side.seconds = params.seconds;
                    side.cpu_user_s = s.cpu.0.as_secs_f64();
                    side.cpu_sys_s = s.cpu.1.as_secs_f64();
                    side.zerocopy = s.zerocopy;
                }
                Err(e) => {
                    let text = format!("{e:#}");
                    first_error.get_or_insert_with(|| format!("stream {i}: {text}"));
                    side.error = Some(text);
                }
            }
            if side.seconds > 0.0 {
                side.bits_per_second = side.bytes as f64 * 8.0 / side.seconds;
            }
            side
        })
        .collect();
    let bytes = sides.iter().map(|s| s.bytes).sum();
    let seconds = sides.iter().map(|s| s.seconds).fold(0.0, f64::max);
    let ended = if first_error.is_some() && ended == "complete" {
        "failed"
    } else {
        ended
    };
    TestReport {
        test,
        peer,
        role: if params.reverse { "sender" } else { "receiver" }.to_string(),
        ended: ended.to_string(),
        error: first_error,
        size: params.size,
        congestion: streams
            .first()
            .map(|s| sock::congestion(s.as_fd()))
            .unwrap_or_default(),
        pace_bits_per_second: None,
        pacer: None,
        bytes,
        seconds,
        bits_per_second: if seconds > 0.0 {
            bytes as f64 * 8.0 / seconds
        } else {
            0.0
        },
        cpu_user_s: sides.iter().map(|s| s.cpu_user_s).sum(),
        cpu_sys_s: sides.iter().map(|s| s.cpu_sys_s).sum(),
        host_cpu: None,
        streams: sides,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_limit_bounds_the_pace_per_stream() {
        let mut config = ServerConfig::new("127.0.0.1:0".parse().expect("addr"));
        let mut p = Params {
            streams: 4,
            reverse: true,
            seconds: 1.0,
            size: 1024,
            window: None,
            pace: None,
            cc: None,
            zerocopy: None,
        };
        assert_eq!(effective_pace(&p, &config), None);
        config.max_rate = Some(4_000_000_000);
        assert_eq!(effective_pace(&p, &config), Some(1_000_000_000));
        p.pace = Some(100_000_000);
        assert_eq!(effective_pace(&p, &config), Some(100_000_000));
        p.seconds = 1e9;
        assert!(check_params(&p, &config)
            .expect_err("too long")
            .to_string()
            .contains("longer than this server allows"));
    }
}
