//! `http-server`: one event loop per thread, each pinned to its CPU with
//! its own SO_REUSEPORT listener. Listeners are created one after the
//! other, each on a thread pinned to its CPU, so listener i (the i-th in the
//! kernel's reuseport group) belongs to the i-th thread of `pin`.
//!
//! Locality (`--locality cbpf`): a classic BPF program on the group returns
//! the index of the listener that should take a new connection. With threads
//! pinned to CPUs 0..N-1 in order that is the article's `ld #cpu; ret a`
//! (the receiving CPU is the listener index). With any other CPU list the
//! program maps each pinned CPU to its listener's index with a jump table;
//! a connection received on a CPU without a listener gets an index past the
//! end, and the kernel then falls back to its hash.

use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Duration;

use anyhow::Context;
use nix::errno::Errno;
use nix::sys::socket::{
    self, sockopt, AddressFamily, Backlog, SockFlag, SockType, SockaddrStorage,
};
use serde::{Deserialize, Serialize};

use super::event_loop::{
    EpollLoop, EventLoop, LoopOptions, ThreadCounts, BUSY_POLL_WAIT, LONG_WAIT,
};
use super::uring_loop::UringLoop;
use super::{Backend, Locality, Sched, ServerConfig};
use crate::base::observe::Observer;
use crate::base::stop::Stop;
use crate::base::{cpuset, Root};
use crate::bench::backend::Workload;
use crate::bench::busy_poll::{BusyPoll, BusyPollReport};
use crate::bench::harness::{self, Control, Placement, Timeline};
use crate::bench::pin::{pin_current_thread, Pinning};
use crate::bench::port::{self, Transport};
use crate::bench::report::{deltas, LiveCounter};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadReport {
    pub thread: usize,
    pub cpu: Option<u32>,
    #[serde(flatten)]
    pub counts: ThreadCounts,
    pub requests_per_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerReport {
    pub command: String,
    pub bind: SocketAddr,
    /// The network namespace it served in; `null`: nettune's own.
    pub netns: Option<String>,
    pub threads: usize,
    pub locality: String,
    /// The engine that ran: `epoll` or `io_uring`.
    pub engine: String,
    /// Why that engine: asked for, or `--engine auto`'s rule and the
    /// figures behind it.
    #[serde(default)]
    pub engine_reason: String,
    pub busy_poll_us: Option<u32>,
    /// The busy polling set on sockets and epoll instances; null: off.
    #[serde(default)]
    pub busy_poll: Option<BusyPollReport>,
    /// `duration` or `interrupted` (the stop token).
    pub ended: String,
    pub duration_s: f64,
    /// From the first request answered to the last (udp-sink's
    /// `traffic_s`): the rates are over it, so a server started long before
    /// its load reports the load's rate.
    pub traffic_s: f64,
    pub requests: u64,
    pub requests_per_s: f64,
    pub connections: u64,
    pub refused: u64,
    pub per_thread: Vec<ThreadReport>,
}

impl ServerReport {
    /// Why this run measured nothing, if it did not: no request came.
    pub fn problem(&self) -> Option<String> {
        (self.requests == 0).then(|| {
            format!(
                "http-server measured nothing: no request arrived at {} in {:.1} s; did a load \
                 generator run (e.g. `nettune bench http http://{}/plaintext`)?",
                self.bind, self.duration_s, self.bind
            )
        })
    }
}

/// One second of the server's run: requests answered in it, per thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerInterval {
    pub second: u64,
    pub requests: u64,
    pub per_thread: Vec<u64>,
}

/// An http-server with its listeners created (in CPU order), ready to
/// [`run`](HttpServer::run).
pub struct HttpServer {
    config: ServerConfig,
    bound: SocketAddr,
    listeners: Vec<TcpListener>,
    cpus: Vec<Option<u32>>,
    pinning: Pinning,
    locality: Locality,
    wait: Duration,
    engine: Backend,
    engine_reason: String,
    warnings: Vec<String>,
    /// This kernel has EPIOCSPARAMS: epoll instances busy-poll too.
    epoll_params: bool,
}

/// Check the config and create one listener per thread, in thread order,
/// each on a short-lived thread pinned to that thread's CPU, so the
/// reuseport group's order is the CPU order the steering program assumes
/// (inside the config's namespace); a port another program serves is
/// refused unless `share_port`.
pub fn open(config: ServerConfig) -> anyhow::Result<HttpServer> {
    config.validate()?;
    let resolved = config.engine.resolve(Workload::HttpServer)?;
    let engine = resolved.backend;
    let root = Root::live();
    let pinning = Pinning::new(config.pin.clone(), &root)?;
    let threads = match config.threads {
        Some(n) => n as usize,
        None if !pinning.cpus().is_empty() => pinning.cpus().len(),
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let cpus: Vec<Option<u32>> = (0..threads).map(|i| pinning.cpu_for(i)).collect();
    let locality = config.locality.unwrap_or(if pinning.cpus().is_empty() {
        Locality::None
    } else {
        Locality::Cbpf
    });
    let mut warnings: Vec<String> = resolved.warning.into_iter().collect();
    let program = match locality {
        Locality::Cbpf => {
            let online = root
                .parse("/sys/devices/system/cpu/online", cpuset::parse_list)
                .unwrap_or_default();
            warnings.extend(locality_warnings(&cpus, &online));
            Some(cbpf_program(&cpus)?)
        }
        Locality::None => None,
    };
    let wait = match config.wait_us {
        Some(us) => Duration::from_micros(u64::from(us)),
        None if busy_polling(config.busy(), &root) => BUSY_POLL_WAIT,
        None => LONG_WAIT,
    };
    let netns = config.netns.as_deref();
    port_free(&config, netns)?;
    let mut listeners: Vec<TcpListener> = Vec::with_capacity(threads);
    for (i, cpu) in cpus.iter().copied().enumerate() {
        let addr = match listeners.first() {
            Some(first) => first
                .local_addr()
                .context("cannot read the bound address")?,
            None => config.bind,
        };
        let busy_poll = config.busy();
        let listener = std::thread::scope(|s| {
            s.spawn(move || -> anyhow::Result<TcpListener> {
                if let Some(name) = netns {
                    crate::bench::netns::enter_thread(name)?;
                }
                if let Some(cpu) = cpu {
                    pin_current_thread(cpu)?;
                }
                open_listener(addr, busy_poll)
            })
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("a listener thread panicked")))
        })
        .with_context(|| format!("server thread {i}"))?;
        listeners.push(listener);
    }
    let first = listeners
        .first()
        .ok_or_else(|| anyhow::anyhow!("no listener was created"))?;
    if let Some(program) = &program {
        attach_cbpf(first, program)?;
    }
    let bound = first
        .local_addr()
        .context("cannot read the bound address")?;
    Ok(HttpServer {
        // io_uring has no epoll instance to take the parameters; its
        // sockets still get the socket options.
        epoll_params: config.busy().is_on()
            && engine != Backend::IoUring
            && crate::bench::busy_poll::epoll_params_supported(),
        config,
        bound,
        listeners,
        cpus,
        pinning,
        locality,
        wait,
        engine,
        engine_reason: resolved.reason,
        warnings,
    })
}

/// Refuse a port another program serves (in the server's namespace),
/// unless the config says to share it.
fn port_free(config: &ServerConfig, netns: Option<&str>) -> anyhow::Result<()> {
    crate::bench::netns::within(netns, || {
        port::ensure_unshared(config.bind, Transport::Tcp, config.share_port)
            .with_context(|| format!("--bind '{}'", config.bind))
    })
}

impl HttpServer {
    /// The address it listens on (the port the kernel chose for 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.bound
    }

    /// Serve until the duration or `stop`.
    pub fn run(
        self,
        stop: &Stop,
        observer: &mut dyn Observer<ServerInterval>,
    ) -> anyhow::Result<ServerReport> {
        let config = &self.config;
        let threads = self.listeners.len();
        let pin = if self.pinning.cpus().is_empty() {
            "not pinned".to_string()
        } else {
            format!("CPUs {}", cpuset::format_list(self.pinning.cpus()))
        };
        observer.ready(
            Some(self.bound),
            &format!(
                "{threads} thread{}, {pin}, locality {}, {}, {} wait {} us, {}",
                if threads == 1 { "" } else { "s" },
                locality_name(self.locality),
                config.busy().describe(self.epoll_params),
                self.engine.name(),
                self.wait.as_micros(),
                match config.sched {
                    Sched::Batch => "SCHED_BATCH",
                    Sched::Normal => "SCHED_OTHER",
                },
            ),
        );
        for warning in &self.warnings {
            observer.warning(warning);
        }
        let options = LoopOptions {
            busy_poll: config.busy(),
            idle_timeout: config.idle_timeout,
            wait: self.wait,
            peer: config.peer,
        };
        let live: Vec<LiveCounter> = (0..threads).map(|_| LiveCounter::default()).collect();
        let mut control = Meter {
            live: &live,
            last: vec![0; threads],
            observer,
        };
        let tasks: Vec<(TcpListener, &LiveCounter)> =
            self.listeners.into_iter().zip(&live).collect();
        let timeline = Timeline {
            warmup: Duration::ZERO,
            duration: config.duration,
        };
        let sched = config.sched;
        let engine = self.engine;
        let done = harness::run(
            tasks,
            Placement::pinned(&self.pinning),
            stop,
            &timeline,
            &mut control,
            |_, (listener, live), phase| {
                if sched == Sched::Batch {
                    set_sched_batch()?;
                }
                if engine == Backend::IoUring {
                    UringLoop::new(listener, options)?.run(phase, live)
                } else {
                    EpollLoop::new(listener, options)?.run(phase, live)
                }
            },
        )?;
        let mut report = build_report(
            &self.config,
            self.bound,
            self.locality,
            &self.cpus,
            done.ended.name(),
            done.elapsed,
            done.results,
        );
        report.busy_poll = self.config.busy().report(self.epoll_params);
        report.engine = self.engine.name().to_string();
        report.engine_reason = self.engine_reason;
        Ok(report)
    }
}

/// Requests per second per thread, from the workers' totals.
struct Meter<'a> {
    live: &'a [LiveCounter],
    last: Vec<u64>,
    observer: &'a mut dyn Observer<ServerInterval>,
}

impl Control for Meter<'_> {
    fn tick(&mut self, second: u64) {
        let per_thread = deltas(self.live, &mut self.last);
        self.observer.interval(&ServerInterval {
            second,
            requests: per_thread.iter().sum(),
            per_thread,
        });
    }
}

/// SCHED_BATCH for the calling thread: a woken thread no longer preempts
/// the one running, so a client and the server thread sharing a CPU take
/// turns in whole batches (half the context switches, 8-10% more requests
/// per second on loopback here; the kernel-vs-DPDK article cut context switches
/// the same way with Seastar's task quota).
fn set_sched_batch() -> anyhow::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; param lives across the call.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
    if rc != 0 {
        anyhow::bail!(
            "cannot switch a server thread to SCHED_BATCH: {}; use --sched normal",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

fn open_listener(addr: SocketAddr, busy_poll: BusyPoll) -> anyhow::Result<TcpListener> {
    let family = if addr.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    let fd: OwnedFd = socket::socket(
        family,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .context("cannot create a TCP socket")?;
    socket::setsockopt(&fd, sockopt::ReuseAddr, &true).context("cannot set SO_REUSEADDR")?;
    socket::setsockopt(&fd, sockopt::ReusePort, &true).context("cannot set SO_REUSEPORT")?;
    busy_poll.apply_socket(fd.as_fd())?;
    socket::bind(fd.as_raw_fd(), &SockaddrStorage::from(addr)).map_err(|e| bind_error(addr, e))?;
    socket::listen(&fd, Backlog::MAXCONN).context("cannot listen")?;
    Ok(TcpListener::from(fd))
}

/// Whether busy polling can engage while epoll waits: asked for with
/// --busy-poll, or on for every socket (net.core.busy_poll).
fn busy_polling(busy_poll: BusyPoll, root: &Root) -> bool {
    busy_poll.is_on()
        || root
            .read("/proc/sys/net/core/busy_poll")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|us| us > 0)
}

fn bind_error(addr: SocketAddr, e: Errno) -> anyhow::Error {
    let port = addr.port();
    match e {
        Errno::EADDRINUSE => anyhow::anyhow!(
            "--bind '{addr}': address already in use by a socket without SO_REUSEPORT or of \
             another user (`ss -tlpn 'sport = :{port}'` shows which); pick another port, or 0"
        ),
        Errno::EADDRNOTAVAIL => anyhow::anyhow!(
            "--bind '{addr}': no interface here has address {} (`ip -br addr` lists them)",
            addr.ip()
        ),
        Errno::EACCES => anyhow::anyhow!(
            "--bind '{addr}': port {port} is privileged; run as root or use a port above 1023"
        ),
        other => anyhow::anyhow!("--bind '{addr}': cannot bind: {}", other.desc()),
    }
}

fn locality_name(locality: Locality) -> &'static str {
    match locality {
        Locality::Cbpf => "cbpf",
        Locality::None => "none",
    }
}

/// What makes CPU steering inexact for these threads.
fn locality_warnings(cpus: &[Option<u32>], online: &[u32]) -> Vec<String> {
    let mut warnings = Vec::new();
    let pinned: Vec<u32> = cpus.iter().flatten().copied().collect();
    if pinned.is_empty() {
        warnings.push(format!(
            "--locality cbpf without --pin: threads move between CPUs, so a connection goes to \
             listener number <receiving CPU> ({} listeners), not to a thread on that CPU; pin \
             with --pin",
            cpus.len()
        ));
        return warnings;
    }
    let mut distinct = pinned.clone();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() < pinned.len() {
        warnings.push(format!(
            "{} threads on {} CPUs: with cbpf only the first listener on each CPU gets \
             connections; give one thread per CPU or --locality none",
            pinned.len(),
            distinct.len()
        ));
    }
    let uncovered: Vec<u32> = online
        .iter()
        .copied()
        .filter(|c| !distinct.contains(c))
        .collect();
    if !uncovered.is_empty() {
        warnings.push(format!(
            "no listener on CPU {}: connections received there are spread by the kernel's hash",
            cpuset::format_list(&uncovered)
        ));
    }
    warnings
}

const fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

/// The reuseport steering program for listeners created by threads on
/// `cpus` (in creation order): return the index of the first listener on
/// the receiving CPU, or one past the end (hash fallback) when none is.
fn cbpf_program(cpus: &[Option<u32>]) -> anyhow::Result<Vec<libc::sock_filter>> {
    use libc::{
        BPF_A, BPF_ABS, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_RET, BPF_W, SKF_AD_CPU, SKF_AD_OFF,
    };
    let load_cpu = stmt(BPF_LD | BPF_W | BPF_ABS, (SKF_AD_OFF + SKF_AD_CPU) as u32);
    let identity = cpus
        .iter()
        .enumerate()
        .all(|(i, cpu)| cpu.is_none_or(|c| c as usize == i));
    if identity {
        return Ok(vec![load_cpu, stmt(BPF_RET | BPF_A, 0)]);
    }
    let mut program = vec![load_cpu];
    let mut mapped: Vec<u32> = Vec::new();
    for (index, cpu) in cpus.iter().enumerate() {
        let Some(cpu) = *cpu else { continue };
        if mapped.contains(&cpu) {
            continue;
        }
        mapped.push(cpu);
        // If A == cpu fall through to `ret index`, else skip it.
        program.push(libc::sock_filter {
            code: (BPF_JMP | BPF_JEQ | BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: cpu,
        });
        program.push(stmt(BPF_RET | BPF_K, index as u32));
    }
    program.push(stmt(BPF_RET | BPF_K, cpus.len() as u32));
    if program.len() > libc::BPF_MAXINSNS as usize {
        anyhow::bail!(
            "--locality cbpf: {} CPUs need a longer program than the kernel takes; use --locality none",
            mapped.len()
        );
    }
    Ok(program)
}

fn attach_cbpf(group: &TcpListener, program: &[libc::sock_filter]) -> anyhow::Result<()> {
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        // The kernel copies the program and never writes through this.
        filter: program.as_ptr().cast_mut(),
    };
    socket::setsockopt(group, sockopt::AttachReusePortCbpf, &fprog).map_err(|e| {
        anyhow::anyhow!(
            "cannot attach the CPU locality program (SO_ATTACH_REUSEPORT_CBPF): {}; \
             use --locality none",
            e.desc()
        )
    })
}

fn build_report(
    config: &ServerConfig,
    bind: SocketAddr,
    locality: Locality,
    cpus: &[Option<u32>],
    ended: &str,
    elapsed: Duration,
    counts: Vec<ThreadCounts>,
) -> ServerReport {
    let secs = elapsed.as_secs_f64();
    let first = counts.iter().filter_map(|c| c.first_request).min();
    let last = counts.iter().filter_map(|c| c.last_request).max();
    let traffic_s = match (first, last) {
        (Some(first), Some(last)) => (last - first).as_secs_f64(),
        _ => 0.0,
    };
    // One wake-up alone has no duration: fall back to the whole run.
    let window = if traffic_s > 0.0 { traffic_s } else { secs };
    let rate = |n: u64| if window > 0.0 { n as f64 / window } else { 0.0 };
    let per_thread: Vec<ThreadReport> = counts
        .into_iter()
        .enumerate()
        .map(|(thread, counts)| ThreadReport {
            thread,
            cpu: cpus.get(thread).copied().flatten(),
            requests_per_s: rate(counts.requests),
            counts,
        })
        .collect();
    let requests = per_thread.iter().map(|t| t.counts.requests).sum();
    ServerReport {
        command: "http-server".to_string(),
        bind,
        netns: config.netns.clone(),
        threads: per_thread.len(),
        locality: locality_name(locality).to_string(),
        // Set by the caller, which knows the engine that ran.
        engine: String::new(),
        engine_reason: String::new(),
        busy_poll_us: config.busy_poll,
        busy_poll: None,
        ended: ended.to_string(),
        duration_s: secs,
        traffic_s,
        requests,
        requests_per_s: rate(requests),
        connections: per_thread.iter().map(|t| t.counts.connections).sum(),
        refused: per_thread.iter().map(|t| t.counts.refused).sum(),
        per_thread,
    }
}

/// The server's final report as text.
pub fn text(r: &ServerReport) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "http-server: {} requests in {:.2} s ({:.2} s of traffic, {:.2} req/s), {} connections, \
         {} refused{}",
        r.requests,
        r.duration_s,
        r.traffic_s,
        r.requests_per_s,
        r.connections,
        r.refused,
        if r.ended == "interrupted" {
            "; stopped early"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "http-server: engine {}",
        crate::bench::backend::describe(&r.engine, &r.engine_reason)
    );
    for t in &r.per_thread {
        let cpu = t
            .cpu
            .map_or("not pinned".to_string(), |c| format!("CPU {c}"));
        let _ = writeln!(
            out,
            "thread {:<2} ({cpu}): {} requests ({:.2} req/s), {} connections, {} idle closed",
            t.thread,
            t.counts.requests,
            t.requests_per_s,
            t.counts.connections,
            t.counts.idle_closed
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run a steering program the way the kernel would for a connection
    /// received on `cpu` (only the instructions the programs above use).
    fn steer(program: &[libc::sock_filter], cpu: u32) -> u32 {
        let mut a = 0u32;
        let mut pc = 0;
        loop {
            let insn = program[pc];
            match u32::from(insn.code) {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => a = cpu,
                c if c == libc::BPF_RET | libc::BPF_A => return a,
                c if c == libc::BPF_RET | libc::BPF_K => return insn.k,
                c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => {
                    pc += usize::from(if a == insn.k { insn.jt } else { insn.jf });
                }
                other => panic!("unexpected opcode {other:#x}"),
            }
            pc += 1;
        }
    }

    #[test]
    fn cpus_0_to_n_use_the_articles_two_instructions() {
        let program = cbpf_program(&[Some(0), Some(1), Some(2), Some(3)]).expect("program");
        assert_eq!(program.len(), 2);
        assert_eq!(program[0].k, (libc::SKF_AD_OFF + libc::SKF_AD_CPU) as u32);
        assert_eq!(steer(&program, 2), 2);
    }

    #[test]
    fn other_cpu_lists_are_mapped_to_creation_order() {
        // Threads pinned to CPUs 6, 4, 5: listener 0 on CPU 6, 1 on 4, 2 on 5.
        let program = cbpf_program(&[Some(6), Some(4), Some(5)]).expect("program");
        assert_eq!(steer(&program, 6), 0);
        assert_eq!(steer(&program, 4), 1);
        assert_eq!(steer(&program, 5), 2);
        // CPU 0 has no listener: past the end, the kernel's hash decides.
        assert_eq!(steer(&program, 0), 3);
        // Two threads on CPU 1: the CPU maps to its first listener.
        let program = cbpf_program(&[Some(1), Some(1)]).expect("program");
        assert_eq!(steer(&program, 1), 0);
    }

    #[test]
    fn warns_where_steering_cannot_be_exact() {
        assert!(locality_warnings(&[Some(0), Some(1)], &[0, 1]).is_empty());
        let w = locality_warnings(&[Some(1), Some(1)], &[0, 1]);
        assert!(w[0].contains("2 threads on 1 CPUs"), "{w:?}");
        assert!(w[1].contains("no listener on CPU 0"), "{w:?}");
        let w = locality_warnings(&[None, None], &[0, 1]);
        assert!(w[0].contains("without --pin"), "{w:?}");
    }
}
