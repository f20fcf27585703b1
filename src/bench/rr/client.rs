//! `bench rr`: open the instances (connections or flows) and greet the
//! server, spread them over pinned threads, warm up, measure, and report
//! transactions/s, latency percentiles, this process's CPU time and the
//! host's per-CPU time over the measured part.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::conn::{self, would_block};
use super::engine::{self, Instances, ThreadResult, UdpFlow};
use super::measure::{Interval, RrControl};
use super::output;
use super::report::{ClientCpu, RrReport, ThreadReport};
use super::wire::{self, Datagram, Hello, Stage, CHECK_LEN, COOKIE_LEN, HELLO_LEN};
use super::{ClientConfig, Proto};
use crate::base::epoll::{Epoll, Interest};
use crate::base::observe::Observer;
use crate::base::stop::Stop;
use crate::base::Root;
use crate::bench::busy_poll::BusyPollReport;
use crate::bench::cpu::CpuUsage;
use crate::bench::harness::{self, Placement, Timeline};
use crate::bench::latency::Latency;
use crate::bench::netns;
use crate::bench::pin::Pinning;
use crate::bench::report::{self, LiveCounter};
use crate::host::CpuTime;
use anyhow::Context;

/// How long the server has to answer the hellos.
const HELLO_TIMEOUT: Duration = Duration::from_secs(1);
/// UDP hellos unanswered after this are sent again (until the timeout).
const HELLO_RESEND: Duration = Duration::from_millis(100);
/// How long a server silent to the address check has to answer a plain
/// hello (then it is one from before the check).
const OLD_SERVER_PROBE: Duration = Duration::from_millis(300);

/// Open the instances (inside the config's namespace), greet the server,
/// warm up, measure for the config's duration or until `stop`.
pub fn run(
    config: &ClientConfig,
    stop: &Stop,
    observer: &mut dyn Observer<Interval>,
) -> anyhow::Result<RrReport> {
    config.validate()?;
    let pinning = Pinning::new(config.pin.clone(), &Root::live())?;
    let instances = config.instances as usize;
    let threads = config.threads_used();
    conn::ensure_descriptors(instances as u64 + 64)?;
    let (per_thread, old_server) =
        netns::within(config.netns.as_deref(), || open_instances(config, threads))?;
    // The hello's reply came in already: its NAPI says whether there is
    // anything to busy-poll.
    let napi_ids = config.busy.is_on().then(|| napi_ids(&per_thread));
    let epoll_params = config.busy.is_on() && crate::bench::busy_poll::epoll_params_supported();
    let mut header = output::header(config, threads, &pinning);
    if config.busy.is_on() {
        header.push_str(&format!("; {}", config.busy.describe(epoll_params)));
    }
    observer.ready(None, &header);
    if old_server {
        observer.warning(&format!(
            "--to '{}': this rr-server predates the UDP address check (it answered only the \
             plain hello), so it sends any source replies larger than its requests; the run goes \
             on with the plain hello: upgrade nettune there",
            config.to
        ));
    }
    if napi_ids.as_ref().is_some_and(Vec::is_empty) {
        observer.warning(crate::bench::busy_poll::NO_NAPI_WARNING);
    }

    let live: Vec<LiveCounter> = (0..threads).map(|_| LiveCounter::default()).collect();
    let running = AtomicUsize::new(threads);
    let describe = format!("--to '{}' ({})", config.to, config.proto.name());
    let mut control = RrControl::new(&live, observer, describe);
    let tasks: Vec<(Instances, &LiveCounter)> = per_thread.into_iter().zip(&live).collect();
    let timeline = Timeline {
        warmup: config.warmup,
        duration: Some(config.duration),
    };
    let done = harness::run(
        tasks,
        Placement::pinned(&pinning),
        stop,
        &timeline,
        &mut control,
        |i, (instances, live), phase| {
            let plan = engine::Plan {
                cpu: pinning.cpu_for(i),
                sizes: config.size,
                resend_after: config.resend_after,
                busy: config.busy,
            };
            let result = engine::run(instances, &plan, phase, live);
            // Every thread's instances gone (the server closed them): the
            // run is over.
            if running.fetch_sub(1, Ordering::SeqCst) == 1 && !phase.stopped() {
                phase.end();
            }
            result
        },
    )?;
    let cpu_after = control.read_stat();
    let measured = Measured {
        ended: done.ended.name(),
        elapsed: done.elapsed,
        cpu_before: control.cpu_before.take(),
        cpu_after,
        intervals: std::mem::take(&mut control.intervals),
    };
    let mut report = build_report(config, threads, &pinning, measured, done.results);
    report.busy_poll = config
        .busy
        .report(epoll_params)
        .map(|b| BusyPollReport { napi_ids, ..b });
    Ok(report)
}

/// What the timeline saw of the measured part.
struct Measured {
    ended: &'static str,
    elapsed: Duration,
    cpu_before: Option<Vec<CpuTime>>,
    cpu_after: Option<Vec<CpuTime>>,
    intervals: Vec<Interval>,
}

/// Open every instance and greet the server on each, then deal them out:
/// instance i to thread i mod `threads`. Also whether the server is one
/// from before the UDP address check.
fn open_instances(args: &ClientConfig, threads: usize) -> anyhow::Result<(Vec<Instances>, bool)> {
    let count = args.instances as usize;
    let hello = Hello {
        request: args.size.request as u32,
        reply: args.size.reply as u32,
    };
    match args.proto {
        Proto::Tcp => {
            let mut streams = Vec::with_capacity(count);
            for _ in 0..count {
                let mut stream = conn::connect_tcp(args.to)?;
                args.busy.apply_socket(stream.as_fd())?;
                stream
                    .write_all(&hello.encode())
                    .with_context(|| format!("--to '{}': cannot send the hello", args.to))?;
                streams.push(stream);
            }
            for stream in &mut streams {
                await_tcp_echo(stream, &hello, args.to)?;
            }
            let dealt = deal(streams, threads).into_iter().map(Instances::Tcp);
            Ok((dealt.collect(), false))
        }
        Proto::Udp => {
            let flows = (0..count)
                .map(|_| {
                    let flow = conn::udp_flow(args.to)?;
                    args.busy.apply_socket(flow.as_fd())?;
                    Ok(flow)
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            // Replies larger than requests need a proven address.
            let check = hello.reply > hello.request;
            let mut greeted = udp_handshake(&flows, &hello, args.to, check)?;
            let old_server = check && greeted.is_none();
            if greeted.is_none() {
                greeted = udp_handshake(&flows, &hello, args.to, false)?;
            }
            let hellos = greeted.ok_or_else(|| {
                not_rr_server(
                    args.to,
                    "the UDP hello went unanswered after the address check",
                )
            })?;
            let flows: Vec<UdpFlow> = flows
                .into_iter()
                .zip(hellos)
                .map(|(socket, hello)| UdpFlow { socket, hello })
                .collect();
            let dealt = deal(flows, threads).into_iter().map(Instances::Udp);
            Ok((dealt.collect(), old_server))
        }
    }
}

/// The distinct NAPI ids the instances' packets arrived through.
fn napi_ids(per_thread: &[Instances]) -> Vec<u32> {
    let mut ids: Vec<u32> = per_thread
        .iter()
        .flat_map(|instances| match instances {
            Instances::Tcp(streams) => streams
                .iter()
                .map(|s| crate::bench::busy_poll::incoming_napi_id(s.as_fd()))
                .collect::<Vec<_>>(),
            Instances::Udp(flows) => flows
                .iter()
                .map(|f| crate::bench::busy_poll::incoming_napi_id(f.socket.as_fd()))
                .collect(),
        })
        .flatten()
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

fn deal<T>(items: Vec<T>, threads: usize) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, item) in items.into_iter().enumerate() {
        out[i % threads].push(item);
    }
    out
}

fn not_rr_server(to: SocketAddr, what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "--to '{to}': {what}; is it `nettune bench rr-server`? (start one with --bind {to})"
    )
}

fn await_tcp_echo(stream: &mut TcpStream, hello: &Hello, to: SocketAddr) -> anyhow::Result<()> {
    stream
        .set_read_timeout(Some(HELLO_TIMEOUT))
        .context("SO_RCVTIMEO")?;
    let mut echo = [0u8; HELLO_LEN];
    match stream.read_exact(&mut echo) {
        Ok(()) if Hello::decode(&echo) == Some(*hello) => Ok(()),
        Ok(()) => Err(not_rr_server(
            to,
            "the answer to the TCP hello is not an rr hello",
        )),
        Err(e) if would_block(&e) || e.kind() == std::io::ErrorKind::TimedOut => Err(
            not_rr_server(to, "connected, but no answer to the TCP hello within 1 s"),
        ),
        Err(e) => Err(not_rr_server(
            to,
            &format!("the connection failed during the hello ({e})"),
        )),
    }
}

/// A flow's progress through its greeting.
#[derive(Clone, PartialEq)]
enum Greeting {
    /// Sending this (a plain hello, an address check asking for a cookie,
    /// or one proving with it).
    Sending(Vec<u8>),
    /// Answered: what to send again if the server forgets the flow.
    Done(Vec<u8>),
}

/// Send the hello on every flow and wait for each answer, resending to the
/// silent ones every 100 ms, for at most 1 s. `check`: prove each flow's
/// address first (the cookie exchange of [`wire`]), for replies larger
/// than requests. Returns what each flow sends to greet again; `None` when
/// the server answered no address check but a plain hello: a server from
/// before the check.
fn udp_handshake(
    flows: &[UdpSocket],
    hello: &Hello,
    to: SocketAddr,
    check: bool,
) -> anyhow::Result<Option<Vec<Vec<u8>>>> {
    let first = if check {
        hello.encode_check(Stage::Client, &[0; COOKIE_LEN]).to_vec()
    } else {
        hello.encode().to_vec()
    };
    let mut poll = Epoll::new(flows.len().min(1024)).context("epoll")?;
    let mut state = vec![Greeting::Sending(first); flows.len()];
    let mut left = flows.len();
    for (i, flow) in flows.iter().enumerate() {
        poll.add(flow.as_raw_fd(), i as u64, Interest::READ)
            .context("epoll_ctl(udp flow)")?;
    }
    let start = Instant::now();
    let mut buf = [0u8; CHECK_LEN + 1];
    let mut any_answer = false;
    while left > 0 {
        let round = Instant::now();
        for (flow, greeting) in flows.iter().zip(&state) {
            if let Greeting::Sending(bytes) = greeting {
                send_hello(flow, bytes, to)?;
            }
        }
        while left > 0 && round.elapsed() < HELLO_RESEND {
            let wait = HELLO_RESEND.saturating_sub(round.elapsed());
            for event in poll.wait(Some(wait)).context("epoll_wait")? {
                let i = event.token as usize;
                let (Some(flow), Some(greeting)) = (flows.get(i), state.get_mut(i)) else {
                    continue;
                };
                while let Some(n) = recv_hello(flow, &mut buf, to)? {
                    any_answer = true;
                    let next = greeted(greeting, &buf[..n], hello, check)
                        .ok_or_else(|| answer_not_rr(to, &buf[..n], hello))?;
                    // Later answers (to resent hellos) change nothing.
                    if matches!(greeting, Greeting::Done(_)) {
                        continue;
                    }
                    *greeting = next;
                    match greeting {
                        Greeting::Done(_) => left -= 1,
                        // A cookie: prove at once.
                        Greeting::Sending(bytes) => send_hello(flow, bytes, to)?,
                    }
                }
            }
        }
        if left > 0 && start.elapsed() >= HELLO_TIMEOUT {
            if check && !any_answer && answers_plain_hello(&flows[0], hello, to)? {
                return Ok(None);
            }
            anyhow::bail!(
                "--to '{to}': no answer to the UDP hello within 1 s on {left} of {} flows; \
                 is `nettune bench rr-server` running there, and is UDP let through?",
                flows.len()
            );
        }
    }
    Ok(Some(
        state
            .into_iter()
            .map(|g| match g {
                Greeting::Sending(bytes) | Greeting::Done(bytes) => bytes,
            })
            .collect(),
    ))
}

/// Where a flow's greeting stands after the server's `answer`; `None`
/// when the answer is not one an rr-server gives.
fn greeted(now: &Greeting, answer: &[u8], hello: &Hello, check: bool) -> Option<Greeting> {
    let sent = match now {
        Greeting::Sending(bytes) | Greeting::Done(bytes) => bytes,
    };
    match wire::parse_datagram(answer) {
        Datagram::Hello(echo) if !check && echo == *hello => Some(Greeting::Done(sent.clone())),
        Datagram::Check {
            hello: echo,
            stage,
            cookie,
        } if check && echo == *hello => {
            let proof = hello.encode_check(Stage::Client, &cookie).to_vec();
            match stage {
                Stage::Cookie => Some(Greeting::Sending(proof)),
                // The answer to this flow's proof (an answer to an earlier
                // one carries the same cookie).
                Stage::Proven if proof == *sent => Some(Greeting::Done(proof)),
                Stage::Proven | Stage::Client => Some(now.clone()),
            }
        }
        _ => None,
    }
}

fn answer_not_rr(to: SocketAddr, answer: &[u8], hello: &Hello) -> anyhow::Error {
    if let Datagram::Hello(echo) = wire::parse_datagram(answer) {
        if echo.request == hello.request && echo.reply < hello.reply {
            return anyhow::anyhow!(
                "--to '{to}': the rr-server cuts UDP replies to {} bytes for this flow (its \
                 address is not proven); upgrade nettune here, or use --proto tcp",
                echo.reply
            );
        }
    }
    not_rr_server(to, "the answer to the UDP hello is not an rr hello")
}

fn refused(to: SocketAddr, e: &std::io::Error) -> anyhow::Error {
    anyhow::anyhow!(
        "--to '{to}': UDP port unreachable ({e}): nothing listens there; \
         start `nettune bench rr-server --bind {to}` first"
    )
}

fn send_hello(flow: &UdpSocket, bytes: &[u8], to: SocketAddr) -> anyhow::Result<()> {
    match flow.send(bytes) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Err(refused(to, &e)),
        Err(e) if would_block(&e) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("--to '{to}': UDP send")),
    }
}

/// The next datagram queued on `flow` (its length), or `None`.
fn recv_hello(flow: &UdpSocket, buf: &mut [u8], to: SocketAddr) -> anyhow::Result<Option<usize>> {
    match flow.recv(buf) {
        Ok(n) => Ok(Some(n)),
        Err(e) if would_block(&e) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Err(refused(to, &e)),
        Err(e) => Err(e).with_context(|| format!("--to '{to}': UDP receive")),
    }
}

/// Whether the server answers a plain hello on `flow` (within
/// [`OLD_SERVER_PROBE`]) with its echo: it knows no address check.
fn answers_plain_hello(flow: &UdpSocket, hello: &Hello, to: SocketAddr) -> anyhow::Result<bool> {
    let start = Instant::now();
    let mut buf = [0u8; CHECK_LEN + 1];
    let mut poll = Epoll::new(1).context("epoll")?;
    poll.add(flow.as_raw_fd(), 0, Interest::READ)
        .context("epoll_ctl(udp flow)")?;
    while start.elapsed() < OLD_SERVER_PROBE {
        send_hello(flow, &hello.encode(), to)?;
        let round = Instant::now();
        while round.elapsed() < HELLO_RESEND {
            poll.wait(Some(HELLO_RESEND.saturating_sub(round.elapsed())))
                .context("epoll_wait")?;
            while let Some(n) = recv_hello(flow, &mut buf, to)? {
                if wire::parse_datagram(&buf[..n]) == Datagram::Hello(*hello) {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

fn build_report(
    args: &ClientConfig,
    threads: usize,
    pinning: &Pinning,
    m: Measured,
    results: Vec<ThreadResult>,
) -> RrReport {
    let secs = m.elapsed.as_secs_f64();
    let rate = |n: u64| report::per_second(n, 0, secs).0;
    let mut latency = Latency::new();
    let (mut resends, mut late, mut bad, mut errors, mut closed) = (0, 0, 0, 0, 0);
    let mut first_error = None;
    let (mut user, mut sys) = (Duration::ZERO, Duration::ZERO);
    let per_thread: Vec<ThreadReport> = results
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            user += r.cpu_time.0;
            sys += r.cpu_time.1;
            let c = r.counts;
            latency.merge(&c.latency);
            resends += c.resends;
            late += c.late_replies;
            bad += c.bad_replies;
            errors += c.errors;
            closed += c.closed;
            if first_error.is_none() {
                first_error = c.first_error;
            }
            ThreadReport {
                thread: i,
                cpu: r.cpu,
                instances: r.instances,
                transactions: c.transactions,
                transactions_per_sec: rate(c.transactions),
            }
        })
        .collect();
    let transactions = per_thread.iter().map(|t| t.transactions).sum();
    let host_cpu = match (&m.cpu_before, &m.cpu_after) {
        (Some(before), Some(after)) => Some(CpuUsage::between(before, after)),
        _ => None,
    };
    let online_cpus = host_cpu
        .as_ref()
        .map(|u| u.rows.len().saturating_sub(1))
        .filter(|n| *n > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1);
    let busy = (user + sys).as_secs_f64();
    let one_cpu = if secs > 0.0 { busy * 100.0 / secs } else { 0.0 };
    RrReport {
        command: "rr".to_string(),
        to: args.to,
        netns: args.netns.clone(),
        proto: args.proto,
        request_bytes: args.size.request,
        reply_bytes: args.size.reply,
        instances: args.instances as usize,
        threads,
        pin: pinning.cpus().to_vec(),
        warmup_s: args.warmup.as_secs_f64(),
        busy_poll: None,
        ended: m.ended.to_string(),
        duration_s: secs,
        transactions,
        transactions_per_sec: rate(transactions),
        latency: latency.summary(),
        resends,
        late_replies: late,
        bad_replies: bad,
        errors,
        closed_connections: closed,
        first_error,
        client_cpu: ClientCpu {
            user_s: user.as_secs_f64(),
            sys_s: sys.as_secs_f64(),
            percent_of_one_cpu: one_cpu,
            percent_of_all_cpus: one_cpu / online_cpus as f64,
            online_cpus,
        },
        host_cpu,
        per_thread,
        intervals: m.intervals,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_are_dealt_round_robin() {
        let dealt = deal((0..5).collect(), 2);
        assert_eq!(dealt, vec![vec![0, 2, 4], vec![1, 3]]);
    }

    #[test]
    fn a_silent_udp_port_is_an_error_within_a_second() {
        // A socket that never answers: the hello times out.
        let silent = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let to = silent.local_addr().expect("addr");
        let flow = conn::udp_flow(to).expect("flow");
        let hello = Hello {
            request: 1,
            reply: 1,
        };
        let started = Instant::now();
        let err = udp_handshake(&[flow], &hello, to, false).expect_err("no echo");
        assert!(started.elapsed() < Duration::from_secs(3));
        assert!(
            err.to_string().contains("no answer to the UDP hello"),
            "{err}"
        );
    }
}
