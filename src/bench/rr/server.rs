//! `bench rr-server`: one event loop per thread, each with its own
//! SO_REUSEPORT TCP listener and UDP socket on the same port, so the kernel
//! spreads connections and flows over the threads by hash.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::conn::{self, would_block};
use super::wire::{Hello, HELLO_LEN};
use super::{Engine, ServerConfig};
use crate::base::Root;
use crate::bench::busy_poll::{BusyPoll, BusyPollReport};
use crate::bench::event::{Epoll, Interest, Ready};
use crate::bench::harness::{self, Control, Phase, Placement, Timeline};
use crate::bench::netns;
use crate::bench::observe::Observer;
use crate::bench::pin::Pinning;
use crate::bench::port::{self, Transport};
use crate::bench::stop::Stop;

const LISTENER: u64 = 0;
const UDP: u64 = 1;
/// Connection `i` of a thread has token `FIRST_CONN + i`.
const FIRST_CONN: u64 = 2;
/// How often an idle loop looks at the stop flag.
const IDLE_WAIT: Duration = Duration::from_millis(50);
/// Work per readiness before going back to epoll, so one busy socket
/// cannot starve the others.
const BUDGET: usize = 64;
/// Flows remembered per thread; when full the table starts over (a client
/// resends its hello on a second timeout, so a forgotten flow recovers).
const MAX_FLOWS: usize = 65_536;
/// A UDP flow idle this long (up to twice) is forgotten, so a thread whose
/// earlier clients are gone serves the next lone client the fast way.
const FLOW_IDLE: Duration = Duration::from_secs(2);
/// Bytes read or written per system call.
const CHUNK: usize = 64 * 1024;
/// A thread serving a single client with blocking reads looks at its other
/// sockets and the phase after a read has waited this long (the socket's
/// timeout): a second client waits this long at most.
const ALONE_SLICE: Duration = Duration::from_millis(20);

/// What one server thread did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadReport {
    pub thread: usize,
    pub cpu: Option<u32>,
    pub tcp_connections: u64,
    pub tcp_transactions: u64,
    /// Connections closed for a bad hello.
    pub tcp_bad_hellos: u64,
    pub udp_flows: u64,
    pub udp_transactions: u64,
    /// Requests dropped on purpose (`drop_every`).
    pub udp_dropped: u64,
    /// Datagrams from a source that never sent a hello (or was forgotten).
    pub udp_unknown: u64,
    /// Replies the kernel would not take (socket buffer full).
    pub udp_send_errors: u64,
    /// Connections closed and datagrams ignored because they came from an
    /// address other than the one peer served.
    #[serde(default)]
    pub foreign: u64,
}

impl ThreadReport {
    fn add(&mut self, o: &ThreadReport) {
        self.tcp_connections += o.tcp_connections;
        self.tcp_transactions += o.tcp_transactions;
        self.tcp_bad_hellos += o.tcp_bad_hellos;
        self.udp_flows += o.udp_flows;
        self.udp_transactions += o.udp_transactions;
        self.udp_dropped += o.udp_dropped;
        self.udp_unknown += o.udp_unknown;
        self.udp_send_errors += o.udp_send_errors;
        self.foreign += o.foreign;
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerReport {
    pub command: String,
    pub bind: SocketAddr,
    /// The network namespace it served in; `null`: nettune's own.
    pub netns: Option<String>,
    pub threads: usize,
    /// The engine that ran: `epoll` or `io_uring`.
    pub engine: String,
    /// `duration` or `interrupted` (the stop token).
    pub ended: String,
    pub duration_s: f64,
    pub drop_every: Option<u64>,
    /// The busy polling set on sockets and epoll instances; null: off.
    #[serde(default)]
    pub busy_poll: Option<BusyPollReport>,
    /// Sums over the threads (`thread` and `cpu` meaningless here).
    pub total: ThreadReport,
    pub per_thread: Vec<ThreadReport>,
}

impl ServerReport {
    /// Why this run measured nothing, if it did not: no transaction came.
    pub fn problem(&self) -> Option<String> {
        let t = &self.total;
        (t.tcp_transactions + t.udp_transactions == 0).then(|| {
            format!(
                "rr-server measured nothing: no transaction arrived at {} in {:.1} s; did a \
                 client run `nettune bench rr --to {}`?",
                self.bind, self.duration_s, self.bind
            )
        })
    }
}

/// One thread's sockets.
pub(super) struct Sockets {
    pub(super) listener: TcpListener,
    pub(super) udp: UdpSocket,
}

/// An rr-server with its sockets bound, ready to [`run`](RrServer::run).
pub struct RrServer {
    config: ServerConfig,
    engine: Engine,
    engine_warning: Option<String>,
    bound: SocketAddr,
    sockets: Vec<Sockets>,
    pinning: Pinning,
    /// This kernel has EPIOCSPARAMS: epoll instances busy-poll too.
    epoll_params: bool,
}

/// Check the config and bind every thread's sockets (inside its
/// namespace); a port another program serves is refused unless
/// `share_port`.
pub fn open(config: ServerConfig) -> anyhow::Result<RrServer> {
    config.validate()?;
    let (engine, engine_warning) = config.engine.resolve()?;
    let pinning = Pinning::new(config.pin.clone(), &Root::live())?;
    // Unknown client count: allow as many descriptors as the hard limit.
    conn::ensure_descriptors(conn::hard_descriptor_limit())?;
    let (bound, sockets) = netns::within(config.netns.as_deref(), || {
        for transport in [Transport::Tcp, Transport::Udp] {
            port::ensure_unshared(config.bind, transport, config.share_port)
                .with_context(|| format!("--bind '{}'", config.bind))?;
        }
        open_all(config.bind, config.threads as usize)
    })?;
    let busy = config.busy;
    for s in &sockets {
        busy.apply_socket(s.listener.as_fd())?;
        busy.apply_socket(s.udp.as_fd())?;
    }
    Ok(RrServer {
        // io_uring has no epoll instance to take the parameters; its
        // sockets still get the socket options.
        epoll_params: busy.is_on()
            && engine != Engine::IoUring
            && crate::bench::busy_poll::epoll_params_supported(),
        config,
        engine,
        engine_warning,
        bound,
        sockets,
        pinning,
    })
}

impl RrServer {
    /// The address it answers on (the port the kernel chose for 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.bound
    }

    /// Serve until the duration or `stop`.
    pub fn run(self, stop: &Stop, observer: &mut dyn Observer<()>) -> anyhow::Result<ServerReport> {
        let threads = self.sockets.len();
        observer.ready(
            Some(self.bound),
            &format!(
                "answering TCP and UDP on {} with {threads} thread{} ({}){}{}",
                self.bound,
                if threads == 1 { "" } else { "s" },
                self.engine.name(),
                match self.pinning.cpus() {
                    [] => String::new(),
                    cpus => format!(" pinned to CPUs {}", crate::base::cpuset::format_list(cpus)),
                },
                if self.config.busy.is_on() {
                    format!("; {}", self.config.busy.describe(self.epoll_params))
                } else {
                    String::new()
                }
            ),
        );
        let timeline = Timeline {
            warmup: Duration::ZERO,
            duration: self.config.duration,
        };
        if let Some(warning) = &self.engine_warning {
            observer.warning(warning);
        }
        let drop_every = self.config.drop_every;
        let (peer, max_reply) = (self.config.peer, self.config.max_reply);
        let busy = self.config.busy;
        let pinning = &self.pinning;
        let engine = self.engine;
        let done = harness::run(
            self.sockets,
            Placement::pinned(pinning),
            stop,
            &timeline,
            &mut Quiet,
            |i, sockets, phase| {
                let plan = Plan {
                    thread: i,
                    cpu: pinning.cpu_for(i),
                    drop_every,
                    peer,
                    max_reply,
                    busy,
                };
                if engine == Engine::IoUring {
                    super::uring_server::serve(sockets, &plan, phase)
                } else {
                    serve(sockets, &plan, phase)
                }
            },
        )?;
        let mut total = ThreadReport::default();
        for t in &done.results {
            total.add(t);
        }
        Ok(ServerReport {
            command: "rr-server".to_string(),
            bind: self.bound,
            netns: self.config.netns.clone(),
            threads,
            engine: self.engine.name().to_string(),
            ended: done.ended.name().to_string(),
            duration_s: done.elapsed.as_secs_f64(),
            drop_every,
            busy_poll: busy.report(self.epoll_params),
            total,
            per_thread: done.results,
        })
    }
}

/// The server's calling thread has nothing to add to the harness.
struct Quiet;

impl Control for Quiet {}

/// Open every thread's listener and UDP socket on one port. With port 0
/// the first listener picks it; if UDP has that port taken, try again.
fn open_all(bind: SocketAddr, threads: usize) -> anyhow::Result<(SocketAddr, Vec<Sockets>)> {
    const TRIES: usize = 20;
    for _ in 0..TRIES {
        match open_on(bind, threads) {
            Err(e) if bind.port() == 0 && conn::is_in_use(&e) => continue,
            other => return other,
        }
    }
    anyhow::bail!(
        "--bind '{bind}': found no port free for both TCP and UDP in {TRIES} tries; give one"
    )
}

fn open_on(bind: SocketAddr, threads: usize) -> anyhow::Result<(SocketAddr, Vec<Sockets>)> {
    let first = conn::listener(bind)?;
    let bound = first
        .local_addr()
        .context("cannot read the bound address")?;
    let mut all = vec![Sockets {
        listener: first,
        udp: conn::udp_socket(bound)?,
    }];
    for _ in 1..threads {
        all.push(Sockets {
            listener: conn::listener(bound)?,
            udp: conn::udp_socket(bound)?,
        });
    }
    Ok((bound, all))
}

pub(super) struct Plan {
    pub(super) thread: usize,
    pub(super) cpu: Option<u32>,
    pub(super) drop_every: Option<u64>,
    /// Serve this address only.
    pub(super) peer: Option<std::net::IpAddr>,
    /// Refuse hellos asking for larger replies.
    pub(super) max_reply: Option<u32>,
    pub(super) busy: BusyPoll,
}

impl Plan {
    pub(super) fn foreign(&self, addr: SocketAddr) -> bool {
        self.peer.is_some_and(|p| p != addr.ip())
    }

    fn reply_allowed(&self, hello: &Hello) -> bool {
        self.max_reply.is_none_or(|max| hello.reply <= max)
    }
}

/// A UDP flow: its reply size, and the epoch it was last heard from.
struct Flow {
    reply: u32,
    seen: u64,
}

/// A TCP connection's progress.
pub(super) struct Conn {
    pub(super) stream: TcpStream,
    /// The sizes, once the hello is complete.
    hello: Option<Hello>,
    hello_buf: [u8; HELLO_LEN],
    hello_got: usize,
    /// Bytes of the current (incomplete) request received so far.
    in_request: u64,
    /// Reply bytes due but not yet written.
    pub(super) owed: u64,
    /// Registered for EPOLLOUT (a reply did not fit the send buffer).
    writing: bool,
}

impl Conn {
    pub(super) fn new(stream: TcpStream) -> Conn {
        Conn {
            stream,
            hello: None,
            hello_buf: [0; HELLO_LEN],
            hello_got: 0,
            in_request: 0,
            owed: 0,
            writing: false,
        }
    }
}

pub(super) enum After {
    Keep,
    /// Nothing to read (in a blocking read: the timeout passed).
    Idle,
    Close,
}

/// One thread's event loop state.
struct Worker<'a> {
    plan: &'a Plan,
    poll: Epoll,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    udp: UdpFlows,
    buf: Vec<u8>,
    zeros: Vec<u8>,
    report: ThreadReport,
}

fn serve(sockets: Sockets, plan: &Plan, phase: &Phase) -> anyhow::Result<ThreadReport> {
    let mut w = Worker {
        plan,
        poll: Epoll::new(256).context("cannot create an epoll instance")?,
        conns: Vec::new(),
        free: Vec::new(),
        udp: UdpFlows::new(),
        buf: vec![0; CHUNK.max(super::wire::MAX_UDP_SIZE + 1)],
        zeros: vec![0; CHUNK.max(super::wire::MAX_UDP_SIZE)],
        report: ThreadReport {
            thread: plan.thread,
            cpu: plan.cpu,
            ..ThreadReport::default()
        },
    };
    plan.busy.apply_epoll(w.poll.as_fd())?;
    // Only blocking reads of a lone flow wait (at most this long).
    sockets
        .udp
        .set_read_timeout(Some(ALONE_SLICE))
        .context("SO_RCVTIMEO")?;
    w.poll
        .add(sockets.listener.as_raw_fd(), LISTENER, Interest::READ)
        .context("epoll_ctl(listener)")?;
    w.poll
        .add(sockets.udp.as_raw_fd(), UDP, Interest::READ)
        .context("epoll_ctl(udp)")?;
    while !phase.stopped() {
        w.udp.forget_idle();
        w.serve_alone(&sockets.udp)?;
        let ready = w.poll.wait(Some(IDLE_WAIT)).context("epoll_wait")?;
        for event in ready {
            match event.token {
                LISTENER => w.accept(&sockets.listener)?,
                UDP => w.answer_udp(&sockets.udp, false)?,
                token => w.on_conn(token, event),
            }
        }
    }
    Ok(w.report)
}

/// What a datagram asks for.
pub(super) enum UdpAnswer {
    /// A hello: echo it back unchanged.
    Echo,
    /// A request: a reply of `len` bytes starting with the request's first
    /// `width` bytes (its sequence number), zeros after.
    Reply { len: usize, width: usize },
    /// A foreign or unknown source, or dropped on purpose: no answer.
    Nothing,
}

/// A thread's UDP flows: who said hello, with which reply size.
pub(super) struct UdpFlows {
    flows: HashMap<SocketAddr, Flow>,
    /// Advances every [`FLOW_IDLE`]; a flow not seen in the last one or two
    /// is forgotten (its client is gone, or resends its hello).
    epoch: u64,
    next_sweep: Instant,
    /// UDP requests received, answered or not (for `--drop-every`).
    requests: u64,
}

impl UdpFlows {
    pub(super) fn new() -> UdpFlows {
        UdpFlows {
            flows: HashMap::new(),
            epoch: 0,
            next_sweep: Instant::now() + FLOW_IDLE,
            requests: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.flows.len()
    }

    pub(super) fn forget_idle(&mut self) {
        let now = Instant::now();
        if now < self.next_sweep {
            return;
        }
        self.next_sweep = now + FLOW_IDLE;
        self.epoch += 1;
        let recent = self.epoch - 1;
        self.flows.retain(|_, flow| flow.seen >= recent);
    }

    /// Hellos (within `plan`'s reply limit) register a flow and are echoed;
    /// requests from known flows get a reply carrying their sequence bytes;
    /// sources `plan` does not serve get nothing.
    pub(super) fn on_datagram(
        &mut self,
        plan: &Plan,
        datagram: &[u8],
        peer: SocketAddr,
        report: &mut ThreadReport,
    ) -> UdpAnswer {
        if plan.foreign(peer) {
            report.foreign += 1;
            return UdpAnswer::Nothing;
        }
        if let Some(hello) = Hello::decode(datagram).filter(|h| plan.reply_allowed(h)) {
            if self.flows.len() >= MAX_FLOWS && !self.flows.contains_key(&peer) {
                self.flows.clear();
            }
            let flow = Flow {
                reply: hello.reply,
                seen: self.epoch,
            };
            if self.flows.insert(peer, flow).is_none() {
                report.udp_flows += 1;
            }
            return UdpAnswer::Echo;
        }
        let Some(flow) = self.flows.get_mut(&peer) else {
            report.udp_unknown += 1;
            return UdpAnswer::Nothing;
        };
        flow.seen = self.epoch;
        let reply = flow.reply as usize;
        self.requests += 1;
        if let Some(every) = plan.drop_every {
            if self.requests % every == 0 {
                report.udp_dropped += 1;
                return UdpAnswer::Nothing;
            }
        }
        report.udp_transactions += 1;
        UdpAnswer::Reply {
            len: reply,
            width: datagram.len().min(reply).min(4),
        }
    }
}

impl Worker<'_> {
    /// With a single client on this thread (one connection and no UDP
    /// flow, or one flow and no connection), serve it with blocking reads:
    /// one system call fewer per transaction than epoll_wait + read, as
    /// sockperf's server does. A read that waits [`ALONE_SLICE`] (the
    /// socket's timeout) returns; then the loop looks at everything else.
    fn serve_alone(&mut self, udp: &UdpSocket) -> anyhow::Result<()> {
        let live = self.conns.len() - self.free.len();
        if live == 1 && self.udp.len() == 0 {
            let Some(slot) = self.conns.iter().position(Option::is_some) else {
                return Ok(());
            };
            self.serve_conn_alone(slot);
        } else if live == 0 && self.udp.len() == 1 {
            udp.set_nonblocking(false).context("O_NONBLOCK")?;
            let served = self.answer_udp(udp, true);
            udp.set_nonblocking(true).context("O_NONBLOCK")?;
            served?;
        }
        Ok(())
    }

    fn serve_conn_alone(&mut self, slot: usize) {
        let token = FIRST_CONN + slot as u64;
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return;
        };
        if conn.writing
            || conn.stream.set_nonblocking(false).is_err()
            || conn.stream.set_read_timeout(Some(ALONE_SLICE)).is_err()
        {
            return;
        }
        // Until a read times out (Idle), closed, a reply that did not fit,
        // or a slice has passed: a busy client must not keep the loop from
        // the listener (a second client) and the end of the run.
        let slice = Instant::now();
        let mut rounds = 0u32;
        let after = loop {
            let mut after =
                read_requests(conn, &mut self.buf, &mut self.report, self.plan.max_reply);
            if let After::Keep = after {
                after = write_replies(conn, &self.zeros, &self.poll, token);
            }
            if !matches!(after, After::Keep) || conn.writing {
                break after;
            }
            rounds = rounds.wrapping_add(1);
            if rounds % 64 == 0 && slice.elapsed() >= ALONE_SLICE {
                break After::Keep;
            }
        };
        if let After::Close = after {
            self.conns[slot] = None;
            self.free.push(slot);
        } else if conn.stream.set_nonblocking(true).is_err() {
            self.conns[slot] = None;
            self.free.push(slot);
        }
    }

    fn accept(&mut self, listener: &TcpListener) -> anyhow::Result<()> {
        for _ in 0..BUDGET {
            let stream = match listener.accept() {
                Ok((_, addr)) if self.plan.foreign(addr) => {
                    self.report.foreign += 1;
                    continue;
                }
                Ok((stream, _)) => stream,
                Err(e) if would_block(&e) => return Ok(()),
                // The client gave up before we accepted: nothing to do.
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
                Err(e) => {
                    return Err(e)
                        .context("accept failed (out of file descriptors? raise `ulimit -n`)")
                }
            };
            stream.set_nonblocking(true).context("O_NONBLOCK")?;
            stream.set_nodelay(true).context("TCP_NODELAY")?;
            self.plan.busy.apply_socket(stream.as_fd())?;
            let slot = self.free.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            self.poll
                .add(stream.as_raw_fd(), FIRST_CONN + slot as u64, Interest::READ)
                .context("epoll_ctl(connection)")?;
            self.conns[slot] = Some(Conn::new(stream));
            self.report.tcp_connections += 1;
        }
        Ok(())
    }

    fn on_conn(&mut self, token: u64, event: Ready) {
        let slot = (token - FIRST_CONN) as usize;
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return;
        };
        let mut after = After::Keep;
        if event.readable || event.hangup {
            after = read_requests(conn, &mut self.buf, &mut self.report, self.plan.max_reply);
        }
        if !matches!(after, After::Close) {
            after = write_replies(conn, &self.zeros, &self.poll, token);
        }
        if let After::Close = after {
            // Closing the descriptor removes it from the epoll set.
            self.conns[slot] = None;
            self.free.push(slot);
        }
    }

    /// Answer queued datagrams: hellos register a flow and are echoed;
    /// requests from known flows get a reply carrying their sequence bytes.
    /// `alone`: the socket blocks and this is the thread's only flow; stop
    /// when another flow appears.
    fn answer_udp(&mut self, socket: &UdpSocket, alone: bool) -> anyhow::Result<()> {
        // Alone: until a read times out or another flow comes.
        let budget = if alone { usize::MAX } else { BUDGET };
        let slice = Instant::now();
        for round in 0..budget {
            if alone && self.udp.len() != 1 {
                // A second client: back to epoll.
                return Ok(());
            }
            // A busy lone flow: back to the loop (listener, end) each slice.
            if alone && round % 64 == 63 && slice.elapsed() >= ALONE_SLICE {
                return Ok(());
            }
            let (n, peer) = match socket.recv_from(&mut self.buf) {
                Ok(got) => got,
                Err(e) if would_block(&e) => return Ok(()),
                Err(e) => return Err(e).context("UDP recvfrom failed"),
            };
            match self
                .udp
                .on_datagram(self.plan, &self.buf[..n], peer, &mut self.report)
            {
                UdpAnswer::Echo => self.send_udp(socket, n, peer, true),
                UdpAnswer::Reply { len, width } => {
                    self.zeros[..width].copy_from_slice(&self.buf[..width]);
                    self.send_udp(socket, len, peer, false);
                    self.zeros[..width].fill(0);
                }
                UdpAnswer::Nothing => {}
            }
        }
        Ok(())
    }

    /// Send `len` bytes of the receive buffer (a hello echo) or of the
    /// reply buffer to `peer`; a full socket buffer drops it (the client
    /// resends), anything else is counted the same way.
    fn send_udp(&mut self, socket: &UdpSocket, len: usize, peer: SocketAddr, echo: bool) {
        let data = if echo {
            &self.buf[..len]
        } else {
            &self.zeros[..len]
        };
        if socket.send_to(data, peer).is_err() {
            self.report.udp_send_errors += 1;
        }
    }
}

/// Read what the connection has: first the hello, then requests, each
/// complete one owing a reply. One read per readiness (level-triggered:
/// epoll reports again if more is queued).
fn read_requests(
    conn: &mut Conn,
    buf: &mut [u8],
    report: &mut ThreadReport,
    max_reply: Option<u32>,
) -> After {
    let n = match conn.stream.read(&mut buf[..CHUNK]) {
        Ok(0) => return After::Close,
        Ok(n) => n,
        Err(e) if would_block(&e) => return After::Idle,
        Err(_) => return After::Close,
    };
    take_requests(conn, &buf[..n], report, max_reply)
}

/// Account `data` the connection received: the hello first (echoed with
/// one write; refused past `max_reply`), then requests, each complete one
/// owing a reply.
pub(super) fn take_requests(
    conn: &mut Conn,
    data: &[u8],
    report: &mut ThreadReport,
    max_reply: Option<u32>,
) -> After {
    let mut data = data;
    let hello = match conn.hello {
        Some(hello) => hello,
        None => {
            let take = data.len().min(HELLO_LEN - conn.hello_got);
            conn.hello_buf[conn.hello_got..conn.hello_got + take].copy_from_slice(&data[..take]);
            conn.hello_got += take;
            data = &data[take..];
            if conn.hello_got < HELLO_LEN {
                return After::Keep;
            }
            let Some(hello) =
                Hello::decode(&conn.hello_buf).filter(|h| max_reply.is_none_or(|m| h.reply <= m))
            else {
                report.tcp_bad_hellos += 1;
                return After::Close;
            };
            // 16 bytes into an empty send buffer: one write takes them.
            if conn.stream.write(&conn.hello_buf).ok() != Some(HELLO_LEN) {
                return After::Close;
            }
            conn.hello = Some(hello);
            hello
        }
    };
    let request = u64::from(hello.request);
    conn.in_request += data.len() as u64;
    let complete = conn.in_request / request;
    conn.in_request %= request;
    conn.owed += complete * u64::from(hello.reply);
    report.tcp_transactions += complete;
    After::Keep
}

/// Write owed reply bytes until done or the send buffer is full; watch for
/// EPOLLOUT only while something is left.
fn write_replies(conn: &mut Conn, zeros: &[u8], poll: &Epoll, token: u64) -> After {
    while conn.owed > 0 {
        let len = conn.owed.min(zeros.len() as u64) as usize;
        match conn.stream.write(&zeros[..len]) {
            Ok(n) => conn.owed -= n as u64,
            Err(e) if would_block(&e) => break,
            Err(_) => return After::Close,
        }
    }
    let want_write = conn.owed > 0;
    if want_write != conn.writing {
        let interest = if want_write {
            Interest::READ_WRITE
        } else {
            Interest::READ
        };
        if poll
            .modify(conn.stream.as_raw_fd(), token, interest)
            .is_err()
        {
            return After::Close;
        }
        conn.writing = want_write;
    }
    After::Keep
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A connected pair on loopback: (client side, server side blocking
    /// with a timeout, so one read sees what one write sent).
    fn pair() -> (TcpStream, Conn) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        server
            .set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        (client, Conn::new(server))
    }

    #[test]
    fn split_and_merged_requests_are_counted_by_bytes() {
        let (mut client, mut conn) = pair();
        let mut buf = vec![0u8; CHUNK];
        let mut report = ThreadReport::default();
        let hello = Hello {
            request: 3,
            reply: 5,
        }
        .encode();
        // The hello split in two, its second part carrying 2 requests and
        // a third of the next.
        client.write_all(&hello[..10]).expect("write");
        assert!(matches!(
            read_requests(&mut conn, &mut buf, &mut report, None),
            After::Keep
        ));
        assert_eq!(conn.hello, None);
        let mut rest = hello[10..].to_vec();
        rest.extend_from_slice(&[0; 7]);
        client.write_all(&rest).expect("write");
        assert!(matches!(
            read_requests(&mut conn, &mut buf, &mut report, None),
            After::Keep
        ));
        assert_eq!(conn.hello.map(|h| (h.request, h.reply)), Some((3, 5)));
        assert_eq!(
            (report.tcp_transactions, conn.owed, conn.in_request),
            (2, 10, 1)
        );
        let mut echo = [0u8; HELLO_LEN];
        client.read_exact(&mut echo).expect("echo");
        assert_eq!(echo, hello);
        // The rest of the third request completes it.
        client.write_all(&[0; 2]).expect("write");
        read_requests(&mut conn, &mut buf, &mut report, None);
        assert_eq!(
            (report.tcp_transactions, conn.owed, conn.in_request),
            (3, 15, 0)
        );
    }

    #[test]
    fn a_bad_hello_or_a_closed_peer_closes_the_connection() {
        let (mut client, mut conn) = pair();
        let mut buf = vec![0u8; CHUNK];
        let mut report = ThreadReport::default();
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").expect("write");
        assert!(matches!(
            read_requests(&mut conn, &mut buf, &mut report, None),
            After::Close
        ));
        assert_eq!(report.tcp_bad_hellos, 1);
        let (client, mut conn) = pair();
        drop(client);
        assert!(matches!(
            read_requests(&mut conn, &mut buf, &mut report, None),
            After::Close
        ));
    }
}
