//! `bench rr-server`: one event loop per thread, each with its own
//! SO_REUSEPORT TCP listener and UDP socket on the same port, so the kernel
//! spreads connections and flows over the threads by hash.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::conn::{self, would_block};
use super::flows::{Rules, UdpFlows};
pub use super::server_thread::ThreadReport;
use super::server_thread::{
    accept_starved, take_requests, After, Conn, Plan, Sockets, ACCEPT_PAUSE, HELLO_DEADLINE,
};
use super::wire::{CookieKey, MAX_UDP_SIZE};
use super::{Backend, ServerConfig};
use crate::base::epoll::{Epoll, Interest, Ready};
use crate::base::observe::Observer;
use crate::base::stop::Stop;
use crate::base::Root;
use crate::bench::backend::Workload;
use crate::bench::busy_poll::BusyPollReport;
use crate::bench::harness::{self, Control, Phase, Placement, Timeline};
use crate::bench::netns;
use crate::bench::pin::Pinning;
use crate::bench::port::{self, Transport};

const LISTENER: u64 = 0;
const UDP: u64 = 1;
/// Connection `i` of a thread has token `FIRST_CONN + i`.
const FIRST_CONN: u64 = 2;
/// How often an idle loop looks at the stop flag.
const IDLE_WAIT: Duration = Duration::from_millis(50);
/// Work per readiness before going back to epoll, so one busy socket
/// cannot starve the others.
const BUDGET: usize = 64;
/// Bytes read or written per system call.
const CHUNK: usize = 64 * 1024;
/// A thread serving a single client with blocking reads looks at its other
/// sockets and the phase after a read has waited this long (the socket's
/// timeout): a second client waits this long at most.
const ALONE_SLICE: Duration = Duration::from_millis(20);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerReport {
    pub command: String,
    pub bind: SocketAddr,
    /// The network namespace it served in; `null`: nettune's own.
    pub netns: Option<String>,
    pub threads: usize,
    /// The engine that ran: `epoll` or `io_uring`.
    pub engine: String,
    /// Why that engine: asked for, or `--engine auto`'s rule and the
    /// figures behind it.
    #[serde(default)]
    pub engine_reason: String,
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

/// An rr-server with its sockets bound, ready to [`run`](RrServer::run).
pub struct RrServer {
    config: ServerConfig,
    engine: Backend,
    engine_reason: String,
    engine_warning: Option<String>,
    bound: SocketAddr,
    sockets: Vec<Sockets>,
    pinning: Pinning,
    /// This kernel has EPIOCSPARAMS: epoll instances busy-poll too.
    epoll_params: bool,
    /// The secret of this process's UDP address-check cookies.
    key: CookieKey,
}

/// Check the config and bind every thread's sockets (inside its
/// namespace); a port another program serves is refused unless
/// `share_port`.
pub fn open(config: ServerConfig) -> anyhow::Result<RrServer> {
    config.validate()?;
    let resolved = config.engine.resolve(Workload::RrServer)?;
    let engine = resolved.backend;
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
    let key = CookieKey::random().context("cannot draw the address-check secret")?;
    Ok(RrServer {
        key,
        // io_uring has no epoll instance to take the parameters; its
        // sockets still get the socket options.
        epoll_params: busy.is_on()
            && engine != Backend::IoUring
            && crate::bench::busy_poll::epoll_params_supported(),
        config,
        engine,
        engine_reason: resolved.reason,
        engine_warning: resolved.warning,
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
                "TCP and UDP, {threads} thread{} ({}){}{}",
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
        let rules = Rules {
            peer: self.config.peer,
            max_reply: self.config.max_reply,
            drop_every,
        };
        let busy = self.config.busy;
        let key = &self.key;
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
                    rules,
                    busy,
                    key: key.clone(),
                };
                if engine == Backend::IoUring {
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
            engine_reason: self.engine_reason.clone(),
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
    /// Accepting stopped (the listener out of the epoll set) until then.
    accept_paused: Option<Instant>,
    /// The next look for connections past their hello deadline.
    next_deadline_sweep: Instant,
}

fn serve(sockets: Sockets, plan: &Plan, phase: &Phase) -> anyhow::Result<ThreadReport> {
    let mut w = Worker {
        plan,
        poll: Epoll::new(256).context("cannot create an epoll instance")?,
        conns: Vec::new(),
        free: Vec::new(),
        udp: UdpFlows::new(plan.key.clone()),
        buf: vec![0; CHUNK.max(MAX_UDP_SIZE + 1)],
        zeros: vec![0; CHUNK.max(MAX_UDP_SIZE)],
        report: ThreadReport {
            thread: plan.thread,
            cpu: plan.cpu,
            ..ThreadReport::default()
        },
        accept_paused: None,
        next_deadline_sweep: Instant::now() + HELLO_DEADLINE,
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
        w.housekeeping(&sockets.listener)?;
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

impl Worker<'_> {
    /// Resume accepting after a pause; close connections past their hello
    /// deadline (once a second at most).
    fn housekeeping(&mut self, listener: &TcpListener) -> anyhow::Result<()> {
        let now = Instant::now();
        if self.accept_paused.is_some_and(|until| now >= until) {
            self.accept_paused = None;
            self.poll
                .add(listener.as_raw_fd(), LISTENER, Interest::READ)
                .context("epoll_ctl(listener)")?;
        }
        if now < self.next_deadline_sweep {
            return Ok(());
        }
        self.next_deadline_sweep = now + Duration::from_secs(1);
        for slot in 0..self.conns.len() {
            if self.conns[slot]
                .as_ref()
                .is_some_and(|c| c.hello_overdue(now))
            {
                self.conns[slot] = None;
                self.free.push(slot);
                self.report.tcp_hello_timeouts += 1;
            }
        }
        Ok(())
    }

    /// With a single client on this thread (one connection and no UDP
    /// flow, or one flow and no connection), serve it with blocking reads:
    /// one system call fewer per transaction than epoll_wait + read, as
    /// sockperf's server does. A read that waits [`ALONE_SLICE`] (the
    /// socket's timeout) returns; then the loop looks at everything else.
    fn serve_alone(&mut self, udp: &UdpSocket) -> anyhow::Result<()> {
        let live = self.conns.len() - self.free.len();
        if live == 1 && self.udp.count() == 0 {
            let Some(slot) = self.conns.iter().position(Option::is_some) else {
                return Ok(());
            };
            self.serve_conn_alone(slot);
        } else if live == 0 && self.udp.count() == 1 {
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
        // Writes time out too: a client that stops reading must not hold
        // the thread in a blocking write.
        if conn.writing
            || conn.stream.set_nonblocking(false).is_err()
            || conn.stream.set_read_timeout(Some(ALONE_SLICE)).is_err()
            || conn.stream.set_write_timeout(Some(ALONE_SLICE)).is_err()
        {
            return;
        }
        // Until a read times out (Idle), closed, a reply that did not fit,
        // or a slice has passed: a busy client must not keep the loop from
        // the listener (a second client) and the end of the run.
        let slice = Instant::now();
        let mut rounds = 0u32;
        let after = loop {
            let mut after = read_requests(
                conn,
                &mut self.buf,
                &mut self.report,
                self.plan.rules.max_reply,
            );
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
                Ok((_, addr)) if self.plan.rules.foreign(addr) => {
                    self.report.foreign += 1;
                    continue;
                }
                Ok((stream, _)) => stream,
                Err(e) if would_block(&e) => return Ok(()),
                // The client gave up before we accepted: nothing to do.
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
                Err(e) if accept_starved(e.raw_os_error()) => {
                    // Out of descriptors (many connections held open) or
                    // memory: serve what is open, try again shortly.
                    self.report.accept_errors += 1;
                    self.poll
                        .delete(listener.as_raw_fd())
                        .context("epoll_ctl(listener)")?;
                    self.accept_paused = Some(Instant::now() + ACCEPT_PAUSE);
                    return Ok(());
                }
                Err(e) => return Err(e).context("accept failed"),
            };
            // A connection that cannot be set up is dropped; the thread
            // goes on serving the others.
            let ready = stream.set_nonblocking(true).is_ok()
                && stream.set_nodelay(true).is_ok()
                && self.plan.busy.apply_socket(stream.as_fd()).is_ok();
            if !ready {
                continue;
            }
            let slot = self.free.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            if self
                .poll
                .add(stream.as_raw_fd(), FIRST_CONN + slot as u64, Interest::READ)
                .is_err()
            {
                self.free.push(slot);
                continue;
            }
            self.conns[slot] = Some(Conn::new(stream));
            self.report.tcp_connections += 1;
        }
        Ok(())
    }

    fn on_conn(&mut self, token: u64, event: Ready) {
        let Some(slot) = token.checked_sub(FIRST_CONN).map(|s| s as usize) else {
            return;
        };
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return;
        };
        let mut after = After::Keep;
        // While a reply waits for room, requests wait in the kernel.
        if !conn.writing && (event.readable || event.hangup) {
            after = read_requests(
                conn,
                &mut self.buf,
                &mut self.report,
                self.plan.rules.max_reply,
            );
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

    /// Answer queued datagrams ([`UdpFlows::on_datagram`] says how).
    /// `alone`: the socket blocks and this is the thread's only flow; stop
    /// when another flow appears.
    fn answer_udp(&mut self, socket: &UdpSocket, alone: bool) -> anyhow::Result<()> {
        // Alone: until a read times out or another flow comes.
        let budget = if alone { usize::MAX } else { BUDGET };
        let slice = Instant::now();
        for round in 0..budget {
            if alone && self.udp.count() != 1 {
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
                // An ICMP error queued by an earlier send: not this
                // socket's failure.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e).context("UDP recvfrom failed"),
            };
            let datagram = self.buf.get(..n).unwrap_or(&[]);
            let outcome = self.udp.on_datagram(&self.plan.rules, datagram, peer);
            self.report.count(outcome.event);
            if let Some(send) = outcome.answer {
                self.send_udp(socket, &send, peer);
            }
        }
        Ok(())
    }

    /// Answer an answer: its head over the start of the zero buffer, then
    /// zeros (the head is wiped after). A full socket buffer drops it (the
    /// client resends), anything else is counted the same way.
    fn send_udp(&mut self, socket: &UdpSocket, send: &super::flows::Answer, peer: SocketAddr) {
        let head = send.head();
        let fits = head.len() <= send.total_len() && send.total_len() <= self.zeros.len();
        let sent = fits && {
            self.zeros[..head.len()].copy_from_slice(head);
            let sent = socket.send_to(&self.zeros[..send.total_len()], peer);
            self.zeros[..head.len()].fill(0);
            sent.is_ok()
        };
        if !sent {
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
    let chunk = buf.len().min(CHUNK);
    let n = match conn.stream.read(&mut buf[..chunk]) {
        Ok(0) => return After::Close,
        Ok(n) => n,
        Err(e) if would_block(&e) => return After::Idle,
        Err(_) => return After::Close,
    };
    take_requests(conn, &buf[..n.min(chunk)], report, max_reply)
}

/// Write owed reply bytes until done or the send buffer is full; while
/// something is left, wait for EPOLLOUT only (requests wait meanwhile).
fn write_replies(conn: &mut Conn, zeros: &[u8], poll: &Epoll, token: u64) -> After {
    while conn.owed > 0 {
        let len = conn.owed.min(zeros.len() as u64) as usize;
        match conn.stream.write(&zeros[..len]) {
            Ok(0) => return After::Close,
            Ok(n) => conn.owed = conn.owed.saturating_sub(n as u64),
            Err(e) if would_block(&e) => break,
            Err(_) => return After::Close,
        }
    }
    let want_write = conn.owed > 0;
    if want_write != conn.writing {
        let interest = if want_write {
            Interest::WRITE
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
    use super::super::wire::{Hello, HELLO_LEN};
    use super::*;
    use std::net::{TcpListener, TcpStream};

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
        assert_eq!(conn.session.hello(), None);
        let mut rest = hello[10..].to_vec();
        rest.extend_from_slice(&[0; 7]);
        client.write_all(&rest).expect("write");
        assert!(matches!(
            read_requests(&mut conn, &mut buf, &mut report, None),
            After::Keep
        ));
        assert_eq!(
            conn.session.hello().map(|h| (h.request, h.reply)),
            Some((3, 5))
        );
        assert_eq!(
            (report.tcp_transactions, conn.owed, conn.session.pending()),
            (2, 10, 1)
        );
        let mut echo = [0u8; HELLO_LEN];
        client.read_exact(&mut echo).expect("echo");
        assert_eq!(echo, hello);
        // The rest of the third request completes it.
        client.write_all(&[0; 2]).expect("write");
        read_requests(&mut conn, &mut buf, &mut report, None);
        assert_eq!(
            (report.tcp_transactions, conn.owed, conn.session.pending()),
            (3, 15, 0)
        );
    }

    #[test]
    fn a_connection_without_its_hello_is_overdue_after_the_deadline() {
        let (mut client, mut conn) = pair();
        let later = conn.opened + HELLO_DEADLINE;
        assert!(!conn.hello_overdue(conn.opened));
        assert!(conn.hello_overdue(later));
        client
            .write_all(
                &Hello {
                    request: 1,
                    reply: 1,
                }
                .encode(),
            )
            .expect("write");
        let mut buf = vec![0u8; CHUNK];
        read_requests(&mut conn, &mut buf, &mut ThreadReport::default(), None);
        assert!(!conn.hello_overdue(later), "greeted in time");
    }

    #[test]
    fn owed_bytes_saturate_instead_of_overflowing() {
        let (mut client, mut conn) = pair();
        let mut report = ThreadReport::default();
        let hello = Hello {
            request: 1,
            reply: 64 << 20,
        };
        client.write_all(&hello.encode()).expect("write");
        let mut buf = vec![0u8; CHUNK];
        read_requests(&mut conn, &mut buf, &mut report, None);
        // 64 KiB of 1-byte requests owe 4 TiB; a peer that never reads can
        // come near the top of the count, never past it.
        take_requests(&mut conn, &[0; 65_536], &mut report, None);
        assert_eq!(conn.owed, 65_536 << 26);
        conn.owed = u64::MAX - 10;
        take_requests(&mut conn, &[0; 65_536], &mut report, None);
        assert_eq!(conn.owed, u64::MAX);
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
