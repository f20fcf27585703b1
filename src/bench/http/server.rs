//! `bench http-server`: one event loop per thread, each pinned to its CPU
//! with its own SO_REUSEPORT listener. Listeners are created one after the
//! other, each by its own thread once pinned, so listener i (the i-th in the
//! kernel's reuseport group) belongs to the i-th thread of `--pin`.
//!
//! Locality (`--locality cbpf`): a classic BPF program on the group returns
//! the index of the listener that should take a new connection. With threads
//! pinned to CPUs 0..N-1 in order that is the article's `ld #cpu; ret a`
//! (the receiving CPU is the listener index). With any other CPU list the
//! program maps each pinned CPU to its listener's index with a jump table;
//! a connection received on a CPU without a listener gets an index past the
//! end, and the kernel then falls back to its hash.

use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::errno::Errno;
use nix::sys::socket::{
    self, sockopt, AddressFamily, Backlog, SockFlag, SockType, SockaddrStorage,
};
use serde::Serialize;

use super::event_loop::{
    EpollLoop, EventLoop, LoopOptions, ThreadCounts, BUSY_POLL_WAIT, LONG_WAIT,
};
use super::{Locality, Sched, ServerArgs};
use crate::base::{cpuset, Root};
use crate::bench::pin::{pin_current_thread, Pinning};
use crate::bench::report::{self, LiveCounter, Progress};
use crate::bench::stop::{self, Stop};
use crate::bench::ticking::{self, Ended};
use crate::error::Status;

#[derive(Debug, Clone, Serialize)]
pub struct ThreadReport {
    pub thread: usize,
    pub cpu: Option<u32>,
    #[serde(flatten)]
    pub counts: ThreadCounts,
    pub requests_per_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ServerReport {
    pub command: &'static str,
    pub bind: SocketAddr,
    pub threads: usize,
    pub locality: &'static str,
    pub busy_poll_us: Option<u32>,
    pub ended: &'static str,
    pub duration_s: f64,
    pub requests: u64,
    pub requests_per_s: f64,
    pub connections: u64,
    pub refused: u64,
    pub per_thread: Vec<ThreadReport>,
}

pub fn run(args: &ServerArgs, stop: &Stop) -> anyhow::Result<Status> {
    let root = Root::live();
    let pinning = Pinning::resolve(args.pin.as_deref(), &root)?;
    let threads = match args.threads {
        Some(n) => n as usize,
        None if !pinning.cpus().is_empty() => pinning.cpus().len(),
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let cpus: Vec<Option<u32>> = (0..threads).map(|i| pinning.cpu_for(i)).collect();
    let locality = args.locality.unwrap_or(if pinning.cpus().is_empty() {
        Locality::None
    } else {
        Locality::Cbpf
    });
    let program = match locality {
        Locality::Cbpf => {
            let online = root
                .parse("/sys/devices/system/cpu/online", cpuset::parse_list)
                .unwrap_or_default();
            for warning in locality_warnings(&cpus, &online) {
                eprintln!("http-server: warning: {warning}");
            }
            Some(cbpf_program(&cpus)?)
        }
        Locality::None => None,
    };
    let wait = match args.wait_us {
        Some(us) => Duration::from_micros(u64::from(us)),
        None if busy_polling(args.busy_poll, &root) => BUSY_POLL_WAIT,
        None => LONG_WAIT,
    };
    let options = LoopOptions {
        busy_poll: args.busy_poll,
        idle_timeout: args.idle_timeout,
        wait,
    };

    let stop_flag = AtomicBool::new(false);
    let live: Vec<LiveCounter> = (0..threads).map(|_| LiveCounter::default()).collect();
    let gate = Gate::default();
    let mut progress = Progress::new(true);

    let (bound, ended, elapsed, results) = std::thread::scope(|scope| {
        let (stop_flag, gate) = (&stop_flag, &gate);
        let mut handles = Vec::with_capacity(threads);
        let mut bound: Option<SocketAddr> = None;
        let mut group: Option<TcpListener> = None;
        let mut failure: Option<anyhow::Error> = None;
        // One thread at a time: each creates its listener once pinned, and
        // the next starts only then, so the kernel's order is the CPU order.
        for (i, cpu) in cpus.iter().copied().enumerate() {
            let (tx, rx) = mpsc::sync_channel(1);
            let addr = bound.unwrap_or(args.bind);
            let live = &live[i];
            handles.push(scope.spawn(move || {
                serve_thread(
                    cpu,
                    addr,
                    args.busy_poll,
                    args.sched,
                    options,
                    tx,
                    gate,
                    stop_flag,
                    live,
                )
            }));
            match rx.recv() {
                Ok(Ok((addr, dup))) => {
                    bound.get_or_insert(addr);
                    group.get_or_insert(dup);
                }
                Ok(Err(e)) => {
                    failure = Some(e.context(format!("server thread {i}")));
                    break;
                }
                Err(_) => {
                    failure = Some(anyhow::anyhow!(
                        "server thread {i} ended before creating its listener"
                    ));
                    break;
                }
            }
        }
        if failure.is_none() {
            if let (Some(program), Some(group)) = (&program, &group) {
                failure = attach_cbpf(group, program).err();
            }
        }
        if let (None, Some(addr)) = (&failure, bound) {
            let pin = if pinning.cpus().is_empty() {
                "not pinned".to_string()
            } else {
                format!("CPUs {}", cpuset::format_list(pinning.cpus()))
            };
            println!(
                "http-server: listening on {addr} ({threads} thread{}, {pin}, locality {}, \
                 SO_BUSY_POLL {}, epoll wait {} us, {})",
                if threads == 1 { "" } else { "s" },
                locality_name(locality),
                args.busy_poll
                    .map_or("off".to_string(), |us| format!("{us} us")),
                wait.as_micros(),
                match args.sched {
                    Sched::Batch => "SCHED_BATCH",
                    Sched::Normal => "SCHED_OTHER",
                },
            );
        }
        gate.open(failure.is_none());
        let start = Instant::now();
        let (ended, elapsed) = if failure.is_none() {
            let mut last = vec![0u64; threads];
            let duration = args.duration.unwrap_or(Duration::MAX);
            ticking::run_ticking(start, duration, stop_flag, stop, |second| {
                let now: Vec<u64> = live.iter().map(|l| l.read().0).collect();
                let per_thread: Vec<String> = now
                    .iter()
                    .zip(&last)
                    .map(|(n, l)| (n - l).to_string())
                    .collect();
                let total: u64 = now.iter().zip(&last).map(|(n, l)| n - l).sum();
                progress.show(&format!(
                    "http-server {second} s: {total} req/s  threads: {}",
                    per_thread.join(" ")
                ));
                last = now;
            })
        } else {
            stop_flag.store(true, std::sync::atomic::Ordering::Relaxed);
            (Ended::Interrupted, Duration::ZERO)
        };
        let results: Vec<anyhow::Result<ThreadCounts>> = stop::join_all(handles, "server");
        match failure {
            Some(e) => Err(e),
            None => Ok((bound, ended, elapsed, results)),
        }
    })?;
    progress.clear();
    let counts = results.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    let bound = bound.ok_or_else(|| anyhow::anyhow!("no listener was created"))?;
    let report = build_report(
        bound,
        locality,
        args.busy_poll,
        &cpus,
        ended,
        elapsed,
        counts,
    );
    if args.json {
        report::print_json(&report)?;
    } else {
        print_text(&report)?;
    }
    Ok(Status::Clean)
}

/// Holds the server threads between creating their listeners and serving,
/// and tells them whether to serve at all (false: setup failed).
#[derive(Default)]
struct Gate {
    state: Mutex<Option<bool>>,
    changed: Condvar,
}

impl Gate {
    fn open(&self, go: bool) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        *state = Some(go);
        self.changed.notify_all();
    }

    fn wait(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(go) = *state {
                return go;
            }
            state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }
}

type Created = anyhow::Result<(SocketAddr, TcpListener)>;

/// One server thread: pin, create the listener, report it, wait for the
/// gate, serve.
#[allow(clippy::too_many_arguments)]
fn serve_thread(
    cpu: Option<u32>,
    addr: SocketAddr,
    busy_poll: Option<u32>,
    sched: Sched,
    options: LoopOptions,
    created: mpsc::SyncSender<Created>,
    gate: &Gate,
    stop: &AtomicBool,
    live: &LiveCounter,
) -> anyhow::Result<ThreadCounts> {
    let setup = || -> anyhow::Result<(TcpListener, SocketAddr, TcpListener)> {
        if let Some(cpu) = cpu {
            pin_current_thread(cpu)?;
        }
        let listener = open_listener(addr, busy_poll)?;
        let local = listener
            .local_addr()
            .context("cannot read the listener's address")?;
        let dup = listener
            .try_clone()
            .context("cannot duplicate the listener")?;
        Ok((listener, local, dup))
    };
    let listener = match setup() {
        Ok((listener, local, dup)) => {
            // The receiver waits for this message; it cannot be gone.
            let _ = created.send(Ok((local, dup)));
            listener
        }
        Err(e) => {
            let _ = created.send(Err(e));
            return Ok(ThreadCounts::default());
        }
    };
    if !gate.wait() {
        return Ok(ThreadCounts::default());
    }
    if sched == Sched::Batch {
        set_sched_batch()?;
    }
    let mut engine = EpollLoop::new(listener, options)?;
    engine.run(stop, live)
}

/// SCHED_BATCH for the calling thread: a woken thread no longer preempts
/// the one running, so a client and the server thread sharing a CPU take
/// turns in whole batches (half the context switches, 8-10% more requests
/// per second on loopback here; REFERENCE section 4 cut context switches
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

fn open_listener(addr: SocketAddr, busy_poll: Option<u32>) -> anyhow::Result<TcpListener> {
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
    if let Some(usecs) = busy_poll {
        set_busy_poll(fd.as_fd(), usecs)
            .with_context(|| format!("--busy-poll '{usecs}': cannot set SO_BUSY_POLL"))?;
    }
    socket::bind(fd.as_raw_fd(), &SockaddrStorage::from(addr)).map_err(|e| bind_error(addr, e))?;
    socket::listen(&fd, Backlog::MAXCONN).context("cannot listen")?;
    Ok(TcpListener::from(fd))
}

/// Whether busy polling can engage while epoll waits: asked for with
/// --busy-poll, or on for every socket (net.core.busy_poll).
fn busy_polling(busy_poll: Option<u32>, root: &Root) -> bool {
    busy_poll.is_some()
        || root
            .read("/proc/sys/net/core/busy_poll")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|us| us > 0)
}

/// SO_BUSY_POLL: how long a read may busy-poll the device queue.
pub(super) fn set_busy_poll(fd: BorrowedFd<'_>, usecs: u32) -> std::io::Result<()> {
    let value = libc::c_int::try_from(usecs).unwrap_or(libc::c_int::MAX);
    // SAFETY: value lives across the call and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BUSY_POLL,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
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
    bind: SocketAddr,
    locality: Locality,
    busy_poll: Option<u32>,
    cpus: &[Option<u32>],
    ended: Ended,
    elapsed: Duration,
    counts: Vec<ThreadCounts>,
) -> ServerReport {
    let secs = elapsed.as_secs_f64();
    let rate = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
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
        command: "http-server",
        bind,
        threads: per_thread.len(),
        locality: locality_name(locality),
        busy_poll_us: busy_poll,
        ended: match ended {
            Ended::Duration => "duration",
            Ended::Interrupted => "interrupted",
        },
        duration_s: secs,
        requests,
        requests_per_s: rate(requests),
        connections: per_thread.iter().map(|t| t.counts.connections).sum(),
        refused: per_thread.iter().map(|t| t.counts.refused).sum(),
        per_thread,
    }
}

fn print_text(r: &ServerReport) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "http-server: {} requests in {:.2}s ({:.2} req/s), {} connections, {} refused{}",
        r.requests,
        r.duration_s,
        r.requests_per_s,
        r.connections,
        r.refused,
        if r.ended == "interrupted" {
            "; stopped by Ctrl-C"
        } else {
            ""
        }
    )?;
    for t in &r.per_thread {
        let cpu = t
            .cpu
            .map_or("not pinned".to_string(), |c| format!("CPU {c}"));
        writeln!(
            out,
            "thread {:<2} ({cpu}): {} requests ({:.2} req/s), {} connections, {} idle closed",
            t.thread,
            t.counts.requests,
            t.requests_per_s,
            t.counts.connections,
            t.counts.idle_closed
        )?;
    }
    Ok(())
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
