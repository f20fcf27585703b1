//! `bench stream`: open a test on a stream-server, run one pinned thread per
//! stream on the harness, print a line per second from TCP_INFO, and
//! report both sides of every stream (the server sends its side at the
//! end), iperf3's field names where the meaning is the same.

use std::cell::Cell;
use std::io::Write as _;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use nix::errno::Errno;
use nix::sys::socket::{self, AddressFamily, SockFlag, SockType, SockaddrStorage};

use super::pump::{self, Moved, Source};
use super::report::{build_report, Interval, Opening, Outcome, Rtts, StreamInterval, StreamReport};
use super::server_report::TestReport;
use super::sock::{self, Buffers, Pacer, TcpInfo};
use super::wire::{Header, Kind, Params, ToClient, ToServer, MAX_MESSAGE};
use super::{StreamConfig, ZeroCopy};
use crate::base::observe::Observer;
use crate::base::stop::Stop;
use crate::base::tls::{ClientTls, HandshakeError};
use crate::base::Root;
use crate::bench::frame::{self, Conn};
use crate::bench::harness::{self, Control, Placement, Timeline};
use crate::bench::netns;
use crate::bench::pin::Pinning;
use crate::bench::report::LiveCounter;
use crate::host::{stat, CpuTime};

/// How long a connect, and the server's answer to the parameters, may take.
const ANSWER_WAIT: Duration = Duration::from_secs(5);
/// Connection attempts when the server refuses (it may still be starting).
const CONNECT_TRIES: u32 = 3;
/// After the end, how long a receiving stream reads on to the sender's FIN,
/// and how long the server has to send its results.
const DRAIN: Duration = Duration::from_secs(10);

/// A test opened on the server: its control connection and data streams.
pub(super) struct Opened {
    pub(super) ctl: Conn,
    pub(super) streams: Vec<TcpStream>,
    pub(super) window: Buffers,
    pub(super) pacer: Option<Pacer>,
    pub(super) congestion: String,
    /// The server's id of the test.
    pub(super) test: u64,
    /// Each stream's socket, local and remote address, as connected (a
    /// closed socket no longer names its peer).
    pub(super) connected: Vec<(i32, SocketAddr, SocketAddr)>,
    /// When the streams were connected (the report's start time).
    pub(super) began: SystemTime,
}

/// Open a test on the server (inside the config's namespace), run it for
/// the config's warm-up and duration or until `stop`, and report.
pub fn run(
    config: &StreamConfig,
    stop: &Stop,
    observer: &mut dyn Observer<Interval>,
) -> anyhow::Result<StreamReport> {
    config.validate()?;
    let pinning = Pinning::new(config.pin.clone(), &Root::live())?;
    let source = if config.reverse {
        None
    } else {
        Some(Source::new(config.size, config.zerocopy)?)
    };
    let opened = netns::within(config.netns.as_deref(), || open_test(config))?;
    observer.ready(
        None,
        &super::render::header(config, &pinning, &opened.window, opened.pacer),
    );
    if let Some(warning) = sock::window_capped(&opened.window) {
        observer.warning(&warning);
    }
    let live: Vec<LiveCounter> = opened
        .streams
        .iter()
        .map(|_| LiveCounter::default())
        .collect();
    let mut meter = Meter::new(config, &opened, &live, observer);
    let timeline = Timeline {
        warmup: config.warmup,
        duration: Some(config.duration),
    };
    let lowat = pump::rcvlowat(config.streams, config.size, config.pace);
    let tasks: Vec<(&TcpStream, &LiveCounter)> = opened.streams.iter().zip(&live).collect();
    let started = Instant::now();
    let done = harness::run(
        tasks,
        Placement::pinned(&pinning),
        stop,
        &timeline,
        &mut meter,
        |i, (stream, live), phase| {
            let moved = match &source {
                Some(source) => {
                    pump::send(stream, source, &|| phase.stopped(), live).map(Moved::Sent)
                }
                None => {
                    let stopped_at = Cell::new(None::<Instant>);
                    let give_up = || {
                        if !phase.stopped() {
                            return false;
                        }
                        let at = stopped_at.get().unwrap_or_else(Instant::now);
                        stopped_at.set(Some(at));
                        at.elapsed() > DRAIN
                    };
                    pump::receive(stream, config.size, lowat, &give_up, live).map(Moved::Received)
                }
            };
            moved.with_context(|| format!("stream {i}"))
        },
    )?;
    meter.wake();
    let ran = started.elapsed();
    let cpu_after = meter.read_stat();
    let server = read_results(&opened.ctl);
    opened.ctl.close();
    let finals: Vec<Option<TcpInfo>> = opened.streams.iter().map(sock::info_of).collect();
    Ok(build_report(
        config,
        &pinning,
        Outcome {
            opening: Opening {
                window: opened.window.clone(),
                pacer: opened.pacer,
                congestion: opened.congestion.clone(),
                test: opened.test,
                connected: opened.connected.clone(),
                began: opened.began,
            },
            ended: done.ended.name(),
            elapsed: done.elapsed,
            ran,
            moved: done.results,
            finals,
            server,
            cpu_before: meter.cpu_before.take(),
            cpu_after,
            baseline: meter.baseline.clone(),
            at_end: meter.at_end.clone().unwrap_or_else(|| meter.live_bytes()),
            rtts: std::mem::take(&mut meter.rtts),
            intervals: std::mem::take(&mut meter.intervals),
        },
    ))
}

/// Connect the control connection, agree on the test, connect the streams
/// and wait for the server's go.
fn open_test(config: &StreamConfig) -> anyhow::Result<Opened> {
    let to = config.to;
    let mut tcp = connect(to, None)?;
    let header = Header {
        tls: config.tls.is_some(),
        ..Header::control()
    };
    tcp.write_all(&header.encode())
        .with_context(|| format!("--to '{to}': cannot send the test header"))?;
    let ctl = match &config.tls {
        Some(tls) => secure(tcp, to, tls)?,
        None => Conn::plain(tcp),
    };
    let params = Params {
        streams: config.streams,
        reverse: config.reverse,
        seconds: (config.warmup + config.duration).as_secs_f64(),
        size: config.size,
        window: config.window,
        pace: config.pace,
        cc: config.cc.clone(),
        zerocopy: config.zerocopy,
    };
    frame::write(&ctl, &ToServer::Params(params))
        .with_context(|| format!("--to '{to}': cannot send the test parameters"))?;
    let test = match answer(&ctl, to)? {
        ToClient::Accepted { test } => test,
        other => return Err(unexpected(to, &other)),
    };
    let mut streams = Vec::with_capacity(config.streams as usize);
    let mut window = None;
    for i in 0..config.streams {
        let (mut stream, buffers) = connect_stream(config)?;
        window.get_or_insert(buffers);
        let header = Header {
            kind: Kind::Data,
            stream: i,
            test,
            tls: false,
        };
        stream
            .write_all(&header.encode())
            .with_context(|| format!("--to '{to}': cannot open stream {i}"))?;
        streams.push(stream);
    }
    match answer(&ctl, to)? {
        ToClient::Ready => {}
        other => return Err(unexpected(to, &other)),
    }
    let pacer = match (config.pace, config.reverse, streams.first()) {
        (Some(_), false, Some(s)) => s.local_addr().ok().map(|local| sock::pacer_for(local).1),
        _ => None,
    };
    let congestion = streams
        .first()
        .map(|s| sock::congestion(s.as_fd()))
        .unwrap_or_default();
    let _ = ctl.tcp().set_nodelay(true);
    let connected = streams
        .iter()
        .filter_map(|s| Some((s.as_raw_fd(), s.local_addr().ok()?, s.peer_addr().ok()?)))
        .collect();
    Ok(Opened {
        ctl,
        streams,
        window: window.ok_or_else(|| anyhow::anyhow!("no stream was opened"))?,
        pacer,
        congestion,
        test,
        connected,
        began: SystemTime::now(),
    })
}

/// The TLS handshake on the control connection. A server without TLS
/// answers in plain text: its refusal is the error.
fn secure(tcp: TcpStream, to: SocketAddr, tls: &ClientTls) -> anyhow::Result<Conn> {
    match Conn::connect(tcp, tls, Instant::now() + ANSWER_WAIT) {
        Ok(conn) => Ok(conn),
        Err(HandshakeError::Plain(tcp)) => match answer(&Conn::plain(tcp), to) {
            Err(refused) => Err(refused),
            Ok(_) => anyhow::bail!(
                "--to '{to}': the stream-server does not speak TLS (it answered in plain text)"
            ),
        },
        Err(HandshakeError::Tls(e)) => {
            anyhow::bail!("--to '{to}': {}", tls.explain("the stream-server", &e))
        }
        Err(e) => anyhow::bail!("--to '{to}': {e}"),
    }
}

/// The server's next answer; a refusal is an error with its reason.
fn answer(ctl: &Conn, to: SocketAddr) -> anyhow::Result<ToClient> {
    let deadline = Instant::now() + ANSWER_WAIT;
    match frame::read::<ToClient>(ctl, MAX_MESSAGE, deadline, &|| false) {
        Ok(ToClient::Refused { error }) => {
            anyhow::bail!("--to '{to}': the stream-server refused the test: {error}")
        }
        Ok(answer) => Ok(answer),
        Err(frame::FrameError::Tls(e)) => anyhow::bail!(
            "--to '{to}': TLS: the stream-server: {}",
            crate::base::tls::explain(&e)
        ),
        Err(e) => anyhow::bail!(
            "--to '{to}': no answer from a stream-server ({e}); is `nettune bench stream-server` \
             (the same version) listening there?"
        ),
    }
}

fn unexpected(to: SocketAddr, got: &ToClient) -> anyhow::Error {
    let what = match got {
        ToClient::Accepted { .. } => "accepted",
        ToClient::Refused { .. } => "refused",
        ToClient::Ready => "ready",
        ToClient::Results(_) => "results",
    };
    anyhow::anyhow!("--to '{to}': the stream-server answered '{what}' out of turn")
}

/// A data connection with this side's options set before the handshake
/// (buffers, congestion control, pacing and SO_ZEROCOPY for a sender).
fn connect_stream(config: &StreamConfig) -> anyhow::Result<(TcpStream, Buffers)> {
    let mut buffers = None;
    let stream = connect(
        config.to,
        Some(&mut |fd: &OwnedFd| {
            let fd = fd.as_fd();
            buffers = Some(sock::set_window(fd, config.window)?);
            if let Some(cc) = &config.cc {
                sock::set_cc(fd, cc)?;
            }
            if !config.reverse {
                if let Some(rate) = config.pace {
                    sock::set_pacing(fd, rate)?;
                }
                if config.zerocopy == Some(ZeroCopy::Msg) {
                    sock::enable_zerocopy(fd)?;
                }
            }
            Ok(())
        }),
    )?;
    let buffers = buffers.ok_or_else(|| anyhow::anyhow!("no buffers read"))?;
    Ok((stream, buffers))
}

type Setup<'a> = &'a mut dyn FnMut(&OwnedFd) -> anyhow::Result<()>;

/// A blocking TCP connection to `to` within [`ANSWER_WAIT`], `setup` run on
/// the socket before the handshake; a refused connection is tried again a
/// few times (the server may be starting).
fn connect(to: SocketAddr, mut setup: Option<Setup<'_>>) -> anyhow::Result<TcpStream> {
    let mut last = Errno::ECONNREFUSED;
    for attempt in 0..CONNECT_TRIES {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(100));
        }
        let family = if to.is_ipv4() {
            AddressFamily::Inet
        } else {
            AddressFamily::Inet6
        };
        let fd = socket::socket(
            family,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
            None,
        )
        .context("cannot create a TCP socket")?;
        if let Some(setup) = setup.as_mut() {
            setup(&fd)?;
        }
        match socket::connect(fd.as_raw_fd(), &SockaddrStorage::from(to)) {
            Ok(()) | Err(Errno::EINPROGRESS) => {}
            Err(e) => {
                last = e;
                if e == Errno::ECONNREFUSED {
                    continue;
                }
                break;
            }
        }
        match finish_connect(&fd) {
            Ok(()) => {
                let stream = TcpStream::from(fd);
                stream
                    .set_nonblocking(false)
                    .context("cannot make the connection blocking")?;
                return Ok(stream);
            }
            Err(Errno::ECONNREFUSED) => last = Errno::ECONNREFUSED,
            Err(e) => {
                last = e;
                break;
            }
        }
    }
    anyhow::bail!(
        "--to '{to}': cannot connect over TCP: {}; start `nettune bench stream-server --bind {to}` \
         there first",
        last.desc()
    )
}

/// Wait for a non-blocking connect to finish, up to [`ANSWER_WAIT`].
fn finish_connect(fd: &OwnedFd) -> Result<(), Errno> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut pfd, 1, ANSWER_WAIT.as_millis() as libc::c_int) };
    if n == 0 {
        return Err(Errno::ETIMEDOUT);
    }
    if n < 0 {
        return Err(Errno::last());
    }
    match socket::getsockopt(fd, socket::sockopt::SocketError) {
        Ok(0) => Ok(()),
        Ok(code) => Err(Errno::from_raw(code)),
        Err(e) => Err(e),
    }
}

/// The server's results, after the transfer.
fn read_results(ctl: &Conn) -> Result<TestReport, String> {
    match frame::read::<ToClient>(ctl, MAX_MESSAGE, Instant::now() + DRAIN, &|| false) {
        Ok(ToClient::Results(report)) => Ok(*report),
        Ok(_) => Err("it answered something other than its results".to_string()),
        Err(e) => Err(format!("no results ({e})")),
    }
}

/// The calling thread: per-second lines from the counters and TCP_INFO,
/// the measured part's bounds, and (reverse) the Stop to the server.
struct Meter<'a> {
    streams: &'a [TcpStream],
    live: &'a [LiveCounter],
    ctl: &'a Conn,
    observer: &'a mut dyn Observer<Interval>,
    sender: bool,
    reverse: bool,
    last: Vec<u64>,
    last_retrans: Vec<u32>,
    /// Bytes when the measured part began, and when it ended.
    baseline: Vec<u64>,
    at_end: Option<Vec<u64>>,
    rtts: Vec<Rtts>,
    intervals: Vec<Interval>,
    cpu_before: Option<Vec<CpuTime>>,
}

impl<'a> Meter<'a> {
    fn new(
        config: &StreamConfig,
        opened: &'a Opened,
        live: &'a [LiveCounter],
        observer: &'a mut dyn Observer<Interval>,
    ) -> Meter<'a> {
        let n = opened.streams.len();
        Meter {
            streams: &opened.streams,
            live,
            ctl: &opened.ctl,
            observer,
            sender: !config.reverse,
            reverse: config.reverse,
            last: vec![0; n],
            last_retrans: vec![0; n],
            baseline: vec![0; n],
            at_end: None,
            rtts: vec![Rtts::default(); n],
            intervals: Vec::new(),
            cpu_before: None,
        }
    }

    fn live_bytes(&self) -> Vec<u64> {
        self.live.iter().map(|l| l.read().1).collect()
    }

    fn read_stat(&mut self) -> Option<Vec<CpuTime>> {
        stat::read(&Root::live())
            .map_err(|e| self.observer.warning(&format!("{e}; no per-CPU table")))
            .ok()
    }
}

impl Control for Meter<'_> {
    fn measuring(&mut self) {
        self.cpu_before = self.read_stat();
        self.baseline = self.live_bytes();
        self.last = self.baseline.clone();
        for (i, stream) in self.streams.iter().enumerate() {
            if let Some(info) = sock::info_of(stream) {
                self.last_retrans[i] = info.total_retrans;
            }
        }
        self.observer.measuring();
    }

    fn tick(&mut self, second: u64) {
        let now = self.live_bytes();
        let mut streams = Vec::with_capacity(now.len());
        for (i, stream) in self.streams.iter().enumerate() {
            let bytes = now[i].saturating_sub(self.last[i]);
            let info = sock::info_of(stream);
            let mut interval =
                StreamInterval::of_second(second, stream.as_raw_fd(), i as u32, bytes, self.sender);
            interval.rtt = info.map(|t| t.rtt);
            interval.rttvar = info.map(|t| t.rttvar);
            if let (Some(info), true) = (info, self.sender) {
                interval.retransmits = Some(u64::from(
                    info.total_retrans.saturating_sub(self.last_retrans[i]),
                ));
                interval.snd_cwnd = Some(info.snd_cwnd);
                interval.pacing_bits_per_second = Some(info.pacing_bits_per_second);
                self.last_retrans[i] = info.total_retrans;
                self.rtts[i].add(&info);
            }
            streams.push(interval);
        }
        self.last = now;
        let interval = Interval::of(second, streams, self.sender);
        self.observer.interval(&interval);
        self.intervals.push(interval);
    }

    /// The run is over: note where the counters stood and, receiving, ask
    /// the server to stop sending (once).
    fn wake(&mut self) {
        if self.at_end.is_none() {
            self.at_end = Some(self.live_bytes());
            if self.reverse {
                let _ = frame::write(self.ctl, &ToServer::Stop);
            }
        }
    }
}
