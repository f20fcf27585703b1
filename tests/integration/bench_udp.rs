//! `nettune bench udp-sink` / `udp-flood`, run as a user runs them: the sink
//! first (its stderr's first line gives the bound address), then a flood
//! into it, then both JSON reports read and checked against each other.
//!
//! Traffic goes only to loopback or into network namespaces these tests
//! create (unique names, deleted by a Drop guard even when an assertion
//! fails). Every process is bounded in time and killed by PID if it
//! overruns. The tests here run one at a time (a lock): they measure, and a
//! full-speed flood next to a paced one would starve it on two CPUs.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{ip, measuring, unique, wait_udp_drained, Netns, Pty};

const BIN: &str = env!("CARGO_BIN_EXE_nettune");

/// `nettune ARGS`, inside `ns` when given.
pub(crate) fn nettune(ns: Option<&Netns>, args: &[&str]) -> Command {
    match ns {
        Some(ns) => {
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", &ns.name, BIN]).args(args);
            cmd
        }
        None => {
            let mut cmd = Command::new(BIN);
            cmd.args(args);
            cmd
        }
    }
}

/// The receive buffer of sinks that must lose nothing: 64 MiB holds
/// seconds of a 20,000 packets/s flood, so a receiver that the scheduler
/// leaves off the CPU for a while (a loaded 2-CPU machine) loses nothing;
/// the buffer costs memory only while packets wait in it.
const SINK_RCVBUF: &str = "64M";

/// A child process killed (by its PID) if the test ends before it does.
pub(crate) struct Running {
    child: Child,
    /// None when stderr is a terminal the test reads ([`Running::on_terminal`]).
    stderr: Option<BufReader<ChildStderr>>,
    first_line: String,
}

impl Running {
    /// Start `cmd` and read the first line of its stderr.
    pub(crate) fn start(mut cmd: Command) -> Running {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nettune");
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let mut first_line = String::new();
        stderr.read_line(&mut first_line).expect("read stderr");
        Running {
            child,
            stderr: Some(stderr),
            first_line,
        }
    }

    /// Start `cmd` with a terminal as its stderr: with `--json` it shows
    /// its per-second status line there.
    pub(crate) fn on_terminal(mut cmd: Command) -> (Running, Pty) {
        let (pty, terminal) = Pty::open();
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(terminal)
            .spawn()
            .expect("spawn nettune");
        let running = Running {
            child,
            stderr: None,
            first_line: String::new(),
        };
        (running, pty)
    }

    pub(crate) fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid")
    }

    /// The address after "listening on" in the sink's first line.
    pub(crate) fn bound_addr(&self) -> String {
        self.first_line
            .split("listening on ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no address in {:?}", self.first_line))
            .to_string()
    }

    /// Wait at most `limit` for the exit; kill on overrun. Returns the exit
    /// code, stdout and the rest of stderr.
    pub(crate) fn finish(mut self, limit: Duration) -> (Option<i32>, String, String) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("nettune ran past {limit:?}: {}", self.first_line);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stdout = String::new();
        if let Some(mut out) = self.child.stdout.take() {
            out.read_to_string(&mut stdout).expect("stdout");
        }
        let mut stderr = self.first_line.clone();
        if let Some(mut rest) = self.stderr.take() {
            rest.read_to_string(&mut stderr).expect("stderr");
        }
        (status.code(), stdout, stderr)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Run to the end and parse the JSON report on stdout; exit must be 0.
pub(crate) fn json_report(running: Running, limit: Duration) -> Value {
    let (code, stdout, stderr) = running.finish(limit);
    assert_eq!(code, Some(0), "stderr: {stderr}\nstdout: {stdout}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{stdout}\nnot JSON: {e}"))
}

pub(crate) fn u(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} is not a count in {v:#}"))
}

pub(crate) fn i(v: &Value, path: &str) -> i64 {
    v.pointer(path)
        .and_then(Value::as_i64)
        .unwrap_or_else(|| panic!("{path} is not a number in {v:#}"))
}

fn f(v: &Value, path: &str) -> f64 {
    v.pointer(path)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{path} is not a number in {v:#}"))
}

/// A `--rate 20000 --duration 1` flood: never above the rate (the pacer
/// never bursts) and a real paced run. How close to 20,000 it comes depends
/// on how much CPU the scheduler gives the sender (a loaded 2-CPU machine
/// keeps it off the CPU for tens of ms, and the pacer owes at most 10 ms
/// after a stall); the pacer's arithmetic is checked exactly, on a simulated
/// clock, by `pacer_holds_the_rate_in_small_steps` and
/// `pacer_never_bursts_after_a_stall` in src/bench/udp/flood.rs.
fn paced_at_20k(sent: u64, pps: f64) {
    assert!(sent <= 21_000, "a burst: {sent} packets in 1 s at 20,000/s");
    assert!(pps <= 24_000.0, "{pps} pps at --rate 20000");
    assert!(sent >= 100, "hardly sent: {sent}");
}

/// Start a sink, flood it, return (sink report, flood report).
pub(crate) fn sink_and_flood(
    engine: &str,
    sink_ns: Option<&Netns>,
    sink_args: &[&str],
    flood_ns: Option<&Netns>,
    flood_args: &[&str],
    to: Option<&str>,
) -> (Value, Value) {
    let sink = Running::start(nettune(
        sink_ns,
        &[
            &["bench", "udp-sink", "--json", "--engine", engine],
            sink_args,
        ]
        .concat(),
    ));
    let addr = sink.bound_addr();
    let dest = match to {
        // Same port, another address (the sink bound 0.0.0.0 or similar).
        Some(ip) => format!("{ip}:{}", addr.rsplit(':').next().expect("port")),
        None => addr,
    };
    let flood = Running::start(nettune(
        flood_ns,
        &[&["bench", "udp-flood", "--json", "--to", &dest], flood_args].concat(),
    ));
    let flood = json_report(flood, Duration::from_secs(15));
    let sink = json_report(sink, Duration::from_secs(15));
    (sink, flood)
}

fn loopback_paced_flood_arrives_whole(engine: &str) {
    let _serial = measuring();
    let (sink, flood) = sink_and_flood(
        engine,
        None,
        &[
            "--bind",
            "127.0.0.1:0",
            "--duration",
            "2.5",
            "--rcvbuf",
            SINK_RCVBUF,
        ],
        None,
        &["--rate", "20000", "--flows", "2", "--duration", "1"],
        None,
    );
    let sent = u(&flood, "/packets");
    paced_at_20k(sent, f(&flood, "/pps"));
    assert_eq!(u(&flood, "/bytes"), sent * 32);
    assert_eq!(u(&flood, "/send_errors/econnrefused"), 0);
    assert_eq!(
        flood["per_thread"][0]["source_ports"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );

    assert_eq!(u(&sink, "/packets"), sent);
    assert_eq!(u(&sink, "/bytes"), sent * 32);
    assert_eq!(u(&sink, "/sequence/received"), sent);
    assert_eq!(u(&sink, "/sequence/lost"), 0);
    assert_eq!(u(&sink, "/sequence/flows"), 2);
    assert_eq!(u(&sink, "/sequence/senders"), 1);
    assert!(f(&sink, "/pps") <= 24_000.0, "{sink:#}");
    // Two whole seconds of a 2.5 s run, adding up to what arrived.
    let intervals = sink["intervals"].as_array().expect("intervals");
    assert_eq!(intervals.len(), 2);
    let in_intervals: u64 = intervals.iter().map(|v| u(v, "/packets")).sum();
    assert!(
        in_intervals <= sent && in_intervals > sent / 2,
        "{in_intervals} of {sent}"
    );
    // The root namespace's counters see at least our packets.
    assert!(i(&sink, "/kernel/udp_in_datagrams") >= sent as i64);
}

fn veth_between_namespaces_carries_a_paced_flood_whole(engine: &str) {
    if crate::common::skip_unless_root(&format!(
        "veth_between_namespaces_carries_a_paced_flood_whole ({engine})"
    )) {
        return;
    }
    let _serial = measuring();
    let (tx, rx) = (Netns::new("bu"), Netns::new("bu"));
    crate::common::veth_pair(&tx, &rx, 77, None);

    let (sink, flood) = sink_and_flood(
        engine,
        Some(&rx),
        &[
            "--bind",
            "0.0.0.0:0",
            "--duration",
            "2.5",
            "--rcvbuf",
            SINK_RCVBUF,
        ],
        Some(&tx),
        &["--rate", "20000", "--flows", "4", "--duration", "1"],
        Some("10.77.0.2"),
    );
    let sent = u(&flood, "/packets");
    paced_at_20k(sent, f(&flood, "/pps"));
    assert_eq!(u(&sink, "/packets"), sent);
    assert_eq!(u(&sink, "/sequence/lost"), 0);
    assert_eq!(u(&sink, "/sequence/flows"), 4);
    assert!(f(&sink, "/pps") <= 24_000.0, "{sink:#}");
    // The receiving namespace holds nothing else: its counters are ours.
    assert_eq!(i(&sink, "/kernel/udp_in_datagrams"), sent as i64);
    assert_eq!(i(&sink, "/kernel/udp_rcvbuf_errors"), 0);
}

/// With a socket buffer of a few packets, an unpaced flood overruns the
/// sink. In a namespace of its own on loopback, a sent packet either reaches
/// the socket (received), is dropped at the full socket buffer
/// (RcvbufErrors, or MemErrors) or, rarely, at a full CPU backlog (softnet
/// dropped, a count shared with every namespace). So:
/// - received + RcvbufErrors + MemErrors <= sent <= that + softnet dropped;
/// - loss by sequence <= the kernel's drops: it cannot see loss that did
///   not happen;
/// - loss by sequence >= half the kernel's drops: it misses only drops after
///   the last packet received of each flow (the end of the last batches),
///   a small part of a second of overrun.
fn tiny_rcvbuf_loss_is_seen_by_sequence_and_kernel_alike(engine: &str) {
    if crate::common::skip_unless_root(&format!(
        "tiny_rcvbuf_loss_is_seen_by_sequence_and_kernel_alike ({engine})"
    )) {
        return;
    }
    let _serial = measuring();
    let ns = Netns::new("bu");
    let (sink, flood) = sink_and_flood(
        engine,
        Some(&ns),
        &[
            "--bind",
            "127.0.0.1:0",
            "--duration",
            "2.5",
            "--rcvbuf",
            "2048",
        ],
        Some(&ns),
        &["--flows", "2", "--duration", "1"],
        None,
    );
    let sent = u(&flood, "/packets");
    let received = u(&sink, "/sequence/received");
    let lost = u(&sink, "/sequence/lost");
    let rcvbuf_errors = i(&sink, "/kernel/udp_rcvbuf_errors") as u64;
    let mem_errors = i(&sink, "/kernel/udp_mem_errors") as u64;
    let backlog = u(&sink, "/kernel/softnet_dropped");
    let granted = u(&sink, "/rcvbuf/granted");
    // The kernel's minimum applies, far below the default 212992.
    assert!((2048..65_536).contains(&granted), "granted {granted}");
    assert_eq!(sink["rcvbuf"]["forced"], Value::Bool(true));
    assert!(rcvbuf_errors > 0, "{sink:#}");
    assert!(lost > 0, "{sink:#}");
    let socket_drops = rcvbuf_errors + mem_errors;
    assert!(
        received + socket_drops <= sent,
        "{received} + {socket_drops} > {sent}"
    );
    assert!(
        sent <= received + socket_drops + backlog,
        "{sent} unaccounted"
    );
    assert!(
        lost <= socket_drops + backlog,
        "lost {lost} > drops {socket_drops}"
    );
    assert!(
        lost >= socket_drops / 2,
        "lost {lost} << drops {socket_drops}"
    );
}

fn reuseport_threads_split_the_flows_and_add_up(engine: &str) {
    let _serial = measuring();
    let (sink, flood) = sink_and_flood(
        engine,
        None,
        &[
            "--bind",
            "127.0.0.1:0",
            "--reuseport",
            "--threads",
            "2",
            "--duration",
            "2.5",
            "--rcvbuf",
            SINK_RCVBUF,
        ],
        None,
        // 16 source ports: all on one socket has odds 2^-15.
        &[
            "--threads",
            "2",
            "--flows",
            "8",
            "--rate",
            "40000",
            "--duration",
            "1",
        ],
        None,
    );
    let total = u(&sink, "/packets");
    assert_eq!(total, u(&flood, "/packets"));
    let threads = sink["per_thread"].as_array().expect("per_thread");
    assert_eq!(threads.len(), 2);
    let counts: Vec<u64> = threads.iter().map(|t| u(t, "/packets")).collect();
    assert_eq!(counts.iter().sum::<u64>(), total, "{counts:?}");
    assert!(
        counts.iter().all(|&c| c > 0),
        "one socket got nothing: {counts:?}"
    );
    assert_eq!(u(&sink, "/sequence/flows"), 16);
    assert_eq!(u(&sink, "/sequence/lost"), 0);
    let flood_threads: u64 = flood["per_thread"]
        .as_array()
        .expect("per_thread")
        .iter()
        .map(|t| u(t, "/packets"))
        .sum();
    assert_eq!(flood_threads, total);
}

fn text_output_prints_the_article_line_each_second(engine: &str) {
    let _serial = measuring();
    let sink = Running::start(nettune(
        None,
        &[
            "bench",
            "udp-sink",
            "--engine",
            engine,
            "--bind",
            "127.0.0.1:0",
            "--duration",
            "2.2",
            "--rcvbuf",
            SINK_RCVBUF,
        ],
    ));
    let addr = sink.bound_addr();
    let flood = Running::start(nettune(
        None,
        &[
            "bench",
            "udp-flood",
            "--to",
            &addr,
            "--rate",
            "10000",
            "--duration",
            "1.5",
        ],
    ));
    let (code, flood_out, _) = flood.finish(Duration::from_secs(10));
    assert_eq!(code, Some(0));
    let (code, out, _) = sink.finish(Duration::from_secs(10));
    assert_eq!(code, Some(0));
    let lines: Vec<&str> = out.lines().collect();
    // "0.010M pps 0.305MiB/s / 2.560Mbit/s" for each of the 2 whole
    // seconds: every rate says its unit of time.
    let per_second = lines.iter().take(2).all(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        w.len() == 5
            && w[0].ends_with('M')
            && w[1] == "pps"
            && w[2].ends_with("MiB/s")
            && w[4].ends_with("Mbit/s")
    });
    assert!(per_second, "{out}");
    assert!(out.contains("0 lost"), "{out}");
    // The flood's first line is the article's too, at most the 10,000 pps
    // asked for (less when the scheduler kept it off the CPU).
    let first: Vec<&str> = flood_out
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let mpps: f64 = first
        .first()
        .and_then(|w| w.strip_suffix('M'))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{flood_out}"));
    assert!(
        first.get(1) == Some(&"pps") && mpps > 0.0 && mpps <= 0.0105,
        "{flood_out}"
    );
}

/// Each bad input: exit 2 and a first line quoting the value (argument
/// errors come from clap, which adds a usage hint below).
#[test]
fn bad_input_exits_2_naming_the_value() {
    let held = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let held = held.local_addr().expect("addr").to_string();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["udp-sink", "--bind", "127.0.0.1"],
            "'127.0.0.1'".into(),
        ),
        (vec!["udp-sink", "--bind", &held], format!("'{held}'")),
        (
            vec!["udp-sink", "--bind", "127.0.0.1:0", "--threads", "0"],
            "'0'".into(),
        ),
        (
            vec!["udp-sink", "--bind", "127.0.0.1:0", "--pin", "999"],
            "CPU 999".into(),
        ),
        (
            vec!["udp-flood", "--to", "127.0.0.1:9", "--size", "65508"],
            "'65508'".into(),
        ),
        (
            vec!["udp-flood", "--to", "127.0.0.1:9", "--rate", "0"],
            "'0'".into(),
        ),
        (vec!["udp-flood", "--to", "nowhere:9"], "'nowhere:9'".into()),
    ];
    for (args, expected) in cases {
        let out = Command::new(BIN)
            .arg("bench")
            .args(&args)
            .args(["--duration", "1"])
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.contains(&expected), "{args:?}: {stderr}");
    }
}

/// Send SIGTERM to a child we started (by its PID).
fn terminate(running: &Running) {
    signal(running, libc::SIGTERM);
}

/// SIGTERM (how service managers and `timeout` stop a process) ends a sink
/// and a flood like Ctrl-C: at once, each with its report, exit 0 when they
/// measured something.
fn sigterm_ends_sink_and_flood_with_their_reports(engine: &str) {
    let _serial = measuring();
    let sink = Running::start(nettune(
        None,
        &[
            "bench",
            "udp-sink",
            "--engine",
            engine,
            "--json",
            "--bind",
            "127.0.0.1:0",
            "--duration",
            "60",
            "--rcvbuf",
            SINK_RCVBUF,
        ],
    ));
    let addr = sink.bound_addr();
    let (flood, status) = Running::on_terminal(nettune(
        None,
        &[
            "bench",
            "udp-flood",
            "--json",
            "--to",
            &addr,
            "--rate",
            "20000",
            "--duration",
            "60",
        ],
    ));
    // A second of the flood measured: its first status line.
    status.wait_for(
        "the flood's first status line",
        Duration::from_secs(30),
        |t| t.contains("udp-flood 1 s:"),
    );
    let asked = Instant::now();
    terminate(&flood);
    let flood = json_report(flood, Duration::from_secs(5));
    // Stopped within a small bound of the signal, not at 60 s.
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    // The sink reports what it read: once it read all that is queued.
    let port: u16 = addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    wait_udp_drained(sink.pid(), port, Duration::from_secs(20));
    let asked = Instant::now();
    terminate(&sink);
    let sink = json_report(sink, Duration::from_secs(5));
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(flood["ended"], "interrupted");
    assert_eq!(sink["ended"], "interrupted");
    assert!(f(&flood, "/duration_s") < 10.0, "{flood:#}");
    let sent = u(&flood, "/packets");
    assert!(sent >= 100, "{flood:#}");
    assert_eq!(u(&sink, "/packets"), sent);
}

/// Send `signal` to a child we started (by its PID).
fn signal(running: &Running, signal: libc::c_int) {
    // SAFETY: kill with a PID of our own child and a valid signal.
    let rc = unsafe { libc::kill(running.child.id() as libc::pid_t, signal) };
    assert_eq!(rc, 0, "kill {}", running.child.id());
}

/// A reader kept off its CPU for the whole flood (here stopped, as the
/// receive softirq or a competing process can keep it off) reads what its
/// socket buffer held only when the flood is over, a few batches within a
/// millisecond. Its rate is over the time the traffic lasted, so never
/// above the rate it was sent at: over its few reads alone it would be
/// millions a second.
fn a_reader_kept_off_its_cpu_reports_its_rate_over_the_traffic(engine: &str) {
    let _serial = measuring();
    let sink = Running::start(nettune(
        None,
        &[
            "bench",
            "udp-sink",
            "--engine",
            engine,
            "--json",
            "--bind",
            "127.0.0.1:0",
            "--batch",
            "64",
            "--duration",
            "4",
        ],
    ));
    let addr = sink.bound_addr();
    // The reader is waiting for packets when it is stopped.
    std::thread::sleep(Duration::from_millis(300));
    signal(&sink, libc::SIGSTOP);
    let flood = Running::start(nettune(
        None,
        &[
            "bench",
            "udp-flood",
            "--json",
            "--to",
            &addr,
            "--rate",
            "20000",
            "--duration",
            "1",
        ],
    ));
    let flood = json_report(flood, Duration::from_secs(10));
    signal(&sink, libc::SIGCONT);
    let sink = json_report(sink, Duration::from_secs(15));
    let sent = u(&flood, "/packets");
    assert!(sent >= 100, "{flood:#}");
    // What the default socket buffer held: more than one batch.
    let got = u(&sink, "/packets");
    assert!(got > 64 && got <= sent, "{got} of {sent}");
    assert!(f(&sink, "/traffic_s") >= 0.9, "{sink:#}");
    assert!(f(&sink, "/pps") <= 24_000.0, "{sink:#}");
}

/// `timeout(1)` sends its signal to the bench and then to its whole process
/// group: the bench gets SIGTERM twice, microseconds apart. That is one
/// request to stop, with the report, not "a second signal: exit at once".
/// The flood runs under `timeout` itself; the sink gets two SIGTERMs 5 ms
/// apart (the first one handled, the run not yet ended, when the second
/// arrives).
#[test]
fn a_sigterm_that_comes_twice_at_once_still_ends_with_the_report() {
    let _serial = measuring();
    let sink = Running::start(nettune(
        None,
        &[
            "bench",
            "udp-sink",
            "--json",
            "--bind",
            "127.0.0.1:0",
            "--duration",
            "60",
            "--rcvbuf",
            SINK_RCVBUF,
        ],
    ));
    let addr = sink.bound_addr();
    let mut under_timeout = Command::new("timeout");
    under_timeout
        .args(["--preserve-status", "-s", "TERM", "1.5", BIN])
        .args([
            "bench",
            "udp-flood",
            "--json",
            "--to",
            &addr,
            "--rate",
            "20000",
            "--duration",
            "60",
        ]);
    let flood = json_report(Running::start(under_timeout), Duration::from_secs(20));
    assert_eq!(flood["ended"], "interrupted");
    terminate(&sink);
    std::thread::sleep(Duration::from_millis(5));
    terminate(&sink);
    let sink = json_report(sink, Duration::from_secs(10));
    assert_eq!(sink["ended"], "interrupted");
    assert_eq!(u(&sink, "/packets"), u(&flood, "/packets"));
}

/// Nothing listens at the destination: the kernel answers ECONNREFUSED, and
/// the flood says so and fails instead of reporting a success.
#[test]
fn a_flood_to_a_closed_port_fails_naming_econnrefused() {
    let _serial = measuring();
    let closed = {
        let probe = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        probe.local_addr().expect("addr").to_string()
    };
    let flood = Running::start(nettune(
        None,
        &[
            "bench",
            "udp-flood",
            "--json",
            "--to",
            &closed,
            "--rate",
            "5000",
            "--duration",
            "1",
        ],
    ));
    let (code, stdout, stderr) = flood.finish(Duration::from_secs(10));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("ECONNREFUSED") && stderr.contains(&closed),
        "{stderr}"
    );
    let report: Value = serde_json::from_str(&stdout).expect("the report is still printed");
    assert!(u(&report, "/send_errors/econnrefused") > 0, "{report:#}");
}

/// A sink that received nothing measured nothing: exit 1 with the reason,
/// and the report (all zeros) still on stdout for scripts.
fn a_sink_that_received_nothing_exits_1_with_its_report(engine: &str) {
    let sink = Running::start(nettune(
        None,
        &[
            "bench",
            "udp-sink",
            "--engine",
            engine,
            "--json",
            "--bind",
            "127.0.0.1:0",
            "--pin",
            "0",
            "--duration",
            "0.5",
        ],
    ));
    let (code, stdout, stderr) = sink.finish(Duration::from_secs(10));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("measured nothing"), "{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("report");
    assert_eq!(u(&report, "/packets"), 0);
    assert_eq!(report["per_thread"][0]["cpu"], 0);
}

/// SO_REUSEPORT would let the sink join a port another program serves and
/// split the traffic with it: refused, unless asked for with --share-port.
fn reuseport_onto_a_held_port_is_refused_unless_shared(engine: &str) {
    let other = socket2_reuseport("127.0.0.1:0");
    let held = other.local_addr().expect("addr").to_string();
    let out = Command::new(BIN)
        .args([
            "bench",
            "udp-sink",
            "--engine",
            engine,
            "--reuseport",
            "--bind",
            &held,
            "--duration",
            "0.3",
        ])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--share-port") && stderr.contains("another program"),
        "{stderr}"
    );
    let port = held.rsplit(':').next().expect("port");
    assert!(stderr.contains(&format!("port {port}")), "{stderr}");
    let shared = Running::start(nettune(
        None,
        &[
            "bench",
            "udp-sink",
            "--engine",
            engine,
            "--reuseport",
            "--share-port",
            "--bind",
            &held,
            "--duration",
            "0.3",
        ],
    ));
    assert!(
        shared.first_line.contains("listening on"),
        "{}",
        shared.first_line
    );
    // It ran (and, receiving nothing, says so with exit 1).
    let (code, _, stderr) = shared.finish(Duration::from_secs(10));
    assert_eq!(code, Some(1), "{stderr}");
}

/// A UDP socket with SO_REUSEPORT, as another server would hold the port.
fn socket2_reuseport(addr: &str) -> std::net::UdpSocket {
    use nix::sys::socket::{self, sockopt, AddressFamily, SockFlag, SockType, SockaddrIn};
    use std::os::fd::AsRawFd;
    let fd = socket::socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::empty(),
        None,
    )
    .expect("socket");
    socket::setsockopt(&fd, sockopt::ReusePort, &true).expect("reuseport");
    let addr: SockaddrIn = addr.parse().expect("addr");
    socket::bind(fd.as_raw_fd(), &addr).expect("bind");
    std::net::UdpSocket::from(fd)
}

/// A flood whose packets wait for a neighbour nobody answers fills its
/// socket buffer; sendmmsg then blocks. The flood still ends within a small
/// bound of its duration, and of SIGTERM.
#[test]
fn a_flood_blocked_on_an_unresolved_neighbour_stops_on_time() {
    if crate::common::skip_unless_root("a_flood_blocked_on_an_unresolved_neighbour_stops_on_time") {
        return;
    }
    let _serial = measuring();
    let (tx, rx) = (Netns::new("bu"), Netns::new("bu"));
    let (a, b) = (unique("nta"), unique("ntb"));
    ip(&[
        "link", "add", &a, "netns", &tx.name, "type", "veth", "peer", "name", &b, "netns", &rx.name,
    ]);
    ip(&["-n", &tx.name, "addr", "add", "10.78.0.1/24", "dev", &a]);
    ip(&["-n", &tx.name, "link", "set", &a, "up"]);
    // The peer is up but has no address: ARP for 10.78.0.2 goes unanswered.
    ip(&["-n", &rx.name, "link", "set", &b, "up"]);
    let started = Instant::now();
    let flood = Running::start(nettune(
        None,
        &[
            "bench",
            "udp-flood",
            "--netns",
            &tx.name,
            "--json",
            "--to",
            "10.78.0.2:9",
            "--duration",
            "1",
        ],
    ));
    let report = json_report(flood, Duration::from_secs(10));
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(report["ended"], "duration");
    assert!(u(&report, "/send_errors/timeouts") > 0, "{report:#}");

    let flood = Running::start(nettune(
        None,
        &[
            "bench",
            "udp-flood",
            "--netns",
            &tx.name,
            "--json",
            "--to",
            "10.78.0.2:9",
            "--duration",
            "60",
        ],
    ));
    std::thread::sleep(Duration::from_millis(1000));
    let asked = Instant::now();
    terminate(&flood);
    let report = json_report(flood, Duration::from_secs(10));
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(report["ended"], "interrupted");
}

/// `--netns` puts each side in its own namespace (no `ip netns exec`), and
/// the sink's kernel counters are its namespace's.
fn netns_flag_runs_each_side_in_its_namespace(engine: &str) {
    if crate::common::skip_unless_root(&format!(
        "netns_flag_runs_each_side_in_its_namespace ({engine})"
    )) {
        return;
    }
    let _serial = measuring();
    let (tx, rx) = (Netns::new("bu"), Netns::new("bu"));
    crate::common::veth_pair(&tx, &rx, 79, None);
    let sink = Running::start(nettune(
        None,
        &[
            "bench",
            "udp-sink",
            "--engine",
            engine,
            "--netns",
            &rx.name,
            "--json",
            "--bind",
            "10.79.0.2:0",
            "--duration",
            "2.5",
            "--rcvbuf",
            SINK_RCVBUF,
        ],
    ));
    let port = sink
        .bound_addr()
        .rsplit(':')
        .next()
        .expect("port")
        .to_string();
    let flood = Running::start(nettune(
        None,
        &[
            "bench",
            "udp-flood",
            "--netns",
            &tx.name,
            "--json",
            "--to",
            &format!("10.79.0.2:{port}"),
            "--rate",
            "20000",
            "--duration",
            "1",
        ],
    ));
    let flood = json_report(flood, Duration::from_secs(10));
    let sink = json_report(sink, Duration::from_secs(10));
    let sent = u(&flood, "/packets");
    assert!(sent >= 100, "{flood:#}");
    assert_eq!(u(&sink, "/packets"), sent);
    assert_eq!(sink["netns"], rx.name.as_str());
    assert_eq!(sink["kernel"]["softnet_scope"], "host");
    // Only our packets went through the receiving namespace's UDP layer.
    assert_eq!(i(&sink, "/kernel/udp_in_datagrams"), sent as i64);
}

each_engine!(
    loopback_paced_flood_arrives_whole,
    veth_between_namespaces_carries_a_paced_flood_whole,
    tiny_rcvbuf_loss_is_seen_by_sequence_and_kernel_alike,
    reuseport_threads_split_the_flows_and_add_up,
    text_output_prints_the_article_line_each_second,
    sigterm_ends_sink_and_flood_with_their_reports,
    a_sink_that_received_nothing_exits_1_with_its_report,
    reuseport_onto_a_held_port_is_refused_unless_shared,
    netns_flag_runs_each_side_in_its_namespace,
    a_reader_kept_off_its_cpu_reports_its_rate_over_the_traffic,
);
