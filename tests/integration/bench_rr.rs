//! `nettune bench rr-server` / `bench rr`, run as a user runs them: the
//! server first (its listening line on stderr names the address), then clients
//! against it, then the server stopped with Ctrl-C (SIGINT) for its own
//! JSON report, which must agree with the clients'.
//!
//! Traffic goes only to loopback or into network namespaces these tests
//! create (unique names, deleted by a Drop guard even when an assertion
//! fails). Every process is bounded in time and killed by PID if it
//! overruns. Runs are 1 s each after a 0.2 s warm-up: the tests check that
//! the figures are there and consistent, never how fast this machine is.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::{
    nettune, sh, skip_unless_root, status_counts, unique, KillOnDrop, Netns, Pty, ServerChild,
};

/// The longest any one nettune process may run here.
const LIMIT: Duration = Duration::from_secs(20);

/// `nettune ARGS`, inside `ns` when given.
fn command(ns: Option<&Netns>, args: &[&str]) -> Command {
    match ns {
        Some(ns) => {
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", &ns.name, env!("CARGO_BIN_EXE_nettune")])
                .args(args);
            cmd
        }
        None => {
            let mut cmd = nettune();
            cmd.args(args);
            cmd
        }
    }
}

fn finish(child: Child, limit: Duration) -> (Option<i32>, String, String) {
    crate::common::finish_bounded(child, limit)
}

/// A running rr-server, stopped by SIGINT (or killed on drop) by its PID.
struct Server(ServerChild);

impl Server {
    fn start(engine: &str, ns: Option<&Netns>, args: &[&str]) -> Server {
        // A generous --duration as a safety net; tests stop it with SIGINT.
        let all = [
            &[
                "bench",
                "rr-server",
                "--json",
                "--duration",
                "60",
                "--engine",
                engine,
            ],
            args,
        ]
        .concat();
        Server(ServerChild::spawn_bench(&mut command(ns, &all)))
    }

    fn port(&self) -> &str {
        self.addr.rsplit(':').next().expect("port")
    }

    /// Ctrl-C, then the JSON report.
    fn stop(self) -> Value {
        // SAFETY: signalling a child we started, by its PID.
        assert_eq!(unsafe { libc::kill(self.0.pid(), libc::SIGINT) }, 0);
        let (code, rest) = self.0.finish(LIMIT);
        assert_eq!(code, Some(0), "rr-server exit: {rest}");
        serde_json::from_str(&rest).unwrap_or_else(|e| panic!("{rest}\nnot JSON: {e}"))
    }
}

impl std::ops::Deref for Server {
    type Target = ServerChild;
    fn deref(&self) -> &ServerChild {
        &self.0
    }
}

/// Run a client with `--json`, 0.2 s warm-up and 1 s measured; exit must be 0.
fn client(ns: Option<&Netns>, to: &str, args: &[&str]) -> Value {
    let all = [
        &[
            "bench",
            "rr",
            "--json",
            "--to",
            to,
            "--warmup",
            "0.2",
            "--duration",
            "1",
        ],
        args,
    ]
    .concat();
    let child = command(ns, &all)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rr");
    let (code, stdout, stderr) = finish(child, LIMIT);
    assert_eq!(code, Some(0), "{all:?}: {stderr}\n{stdout}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{stdout}\nnot JSON: {e}"))
}

fn f(v: &Value, path: &str) -> f64 {
    v.pointer(path)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{path} is not a number in {v:#}"))
}

fn u(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} is not a count in {v:#}"))
}

fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// What every report must hold, whatever the machine's speed.
fn check_report(r: &Value, instances: u64, threads: u64) {
    let transactions = u(r, "/transactions");
    assert!(transactions > 0, "{r:#}");
    assert!(f(r, "/transactions_per_sec") > 0.0);
    assert_eq!(u(r, "/instances"), instances);
    assert_eq!(u(r, "/latency/count"), transactions);
    let order = [
        "min_us", "p50_us", "p90_us", "p99_us", "p999_us", "p9999_us", "max_us",
    ];
    let values: Vec<f64> = order
        .iter()
        .map(|k| f(r, &format!("/latency/{k}")))
        .collect();
    assert!(values[0] > 0.0, "{:#}", r["latency"]);
    assert!(
        values.windows(2).all(|w| w[0] <= w[1]),
        "percentiles out of order: {:#}",
        r["latency"]
    );
    let per_thread = r["per_thread"].as_array().expect("per_thread");
    assert_eq!(per_thread.len() as u64, threads);
    assert_eq!(
        per_thread
            .iter()
            .map(|t| u(t, "/transactions"))
            .sum::<u64>(),
        transactions
    );
    assert_eq!(
        per_thread.iter().map(|t| u(t, "/instances")).sum::<u64>(),
        instances
    );
    // One whole second measured: one interval, no more than the total.
    let intervals = r["intervals"].as_array().expect("intervals");
    assert_eq!(intervals.len(), 1, "{intervals:?}");
    assert!(u(&intervals[0], "/transactions") <= transactions);
    // The client process ran; it has at most `threads` + 1 busy threads.
    let cpu = f(r, "/client_cpu/percent_of_one_cpu");
    assert!(cpu > 0.0 && cpu <= 105.0 * (threads as f64 + 1.0), "{cpu}");
    check_cpu_table(r);
}

/// `all` then one row per online CPU. Each row is its CPU's tick deltas
/// divided by their own sum, so it adds up to 100 up to float rounding:
/// 0.01 points of tolerance. (The 1-point resolution of 10 ms ticks over a
/// 1 s run changes each column, not the sum.)
fn check_cpu_table(r: &Value) {
    let rows = r["host_cpu"]["rows"].as_array().expect("host_cpu rows");
    assert_eq!(rows.len(), online_cpus() + 1, "{rows:?}");
    assert_eq!(rows[0]["cpu"], "all");
    for row in rows {
        let sum: f64 = [
            "usr", "nice", "sys", "iowait", "irq", "soft", "steal", "idle",
        ]
        .iter()
        .map(|k| f(row, &format!("/{k}")))
        .sum();
        assert!((sum - 100.0).abs() < 0.01, "row sums to {sum}: {row}");
    }
    // `all` is the mean of the CPUs (equal tick counts per CPU): its idle
    // lies between the least and the most idle CPU.
    let idle: Vec<f64> = rows[1..].iter().map(|r| f(r, "/idle")).collect();
    let all_idle = f(&rows[0], "/idle");
    let (lo, hi) = idle
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
    assert!(all_idle >= lo - 1.0 && all_idle <= hi + 1.0, "{rows:?}");
}

/// TCP and UDP, 1 and 100 instances, against one server; then the server's
/// own count of connections and flows.
fn matrix(
    engine: &str,
    server_ns: Option<&Netns>,
    client_ns: Option<&Netns>,
    to_ip: &str,
    bind: &str,
) {
    let server = Server::start(engine, server_ns, &["--bind", bind, "--threads", "2"]);
    let to = format!("{to_ip}:{}", server.port());
    let mut done = 0;
    for proto in ["tcp", "udp"] {
        for (instances, threads) in [(1u64, 1u64), (100, 2)] {
            let report = client(
                client_ns,
                &to,
                &[
                    "--proto",
                    proto,
                    "--instances",
                    &instances.to_string(),
                    "--threads",
                    &threads.to_string(),
                ],
            );
            assert_eq!(report["proto"], proto);
            check_report(&report, instances, threads);
            done += u(&report, "/transactions");
        }
    }
    let served = server.stop();
    assert_eq!(u(&served, "/total/tcp_connections"), 101, "{served:#}");
    // 101 flows, or 100 when one of the second client's source ports was
    // the first client's, freed and picked again (about 0.4% of runs).
    let flows = u(&served, "/total/udp_flows");
    assert!((100..=101).contains(&flows), "{served:#}");
    // The server also answered the warm-ups and the last in-flight requests.
    let answered = u(&served, "/total/tcp_transactions") + u(&served, "/total/udp_transactions");
    assert!(answered >= done, "server {answered} < clients {done}");
    assert_eq!(u(&served, "/total/tcp_bad_hellos"), 0);
}

fn loopback_tcp_and_udp_with_1_and_100_instances(engine: &str) {
    matrix(engine, None, None, "127.0.0.1", "127.0.0.1:0");
}

fn veth_between_namespaces_tcp_and_udp_with_1_and_100_instances(engine: &str) {
    if skip_unless_root(&format!(
        "veth_between_namespaces_tcp_and_udp_with_1_and_100_instances ({engine})"
    )) {
        return;
    }
    let (client_ns, server_ns) = (Netns::new("rrc"), Netns::new("rrs"));
    let (a, b) = (unique("rra"), unique("rrb"));
    sh(&[
        "ip",
        "link",
        "add",
        &a,
        "netns",
        &client_ns.name,
        "type",
        "veth",
        "peer",
        "name",
        &b,
        "netns",
        &server_ns.name,
    ]);
    client_ns.ip(&["addr", "add", "10.78.0.1/24", "dev", &a]);
    server_ns.ip(&["addr", "add", "10.78.0.2/24", "dev", &b]);
    client_ns.ip(&["link", "set", &a, "up"]);
    server_ns.ip(&["link", "set", &b, "up"]);
    matrix(
        engine,
        Some(&server_ns),
        Some(&client_ns),
        "10.78.0.2",
        "0.0.0.0:0",
    );
}

/// Client and server pinned to the same CPU keep it busy: that CPU's row
/// shows little idle time, which places the table's rows on the right CPUs.
fn pinned_run_shows_its_cpu_busy_in_the_table(engine: &str) {
    let cpu = (online_cpus() - 1).to_string();
    let server = Server::start(engine, None, &["--bind", "127.0.0.1:0", "--pin", &cpu]);
    let report = client(None, &server.addr, &["--proto", "tcp", "--pin", &cpu]);
    check_report(&report, 1, 1);
    assert_eq!(report["per_thread"][0]["cpu"].as_u64(), cpu.parse().ok());
    let row = &report["host_cpu"]["rows"][online_cpus()];
    assert_eq!(row["cpu"], cpu.as_str());
    assert!(
        f(row, "/idle") < 50.0,
        "CPU {cpu} idle in a ping-pong: {row}"
    );
    server.stop();
}

/// Every 100th request dropped by the server: the run completes, the
/// client resends, and those transactions take at least the 10 ms timeout.
/// Both client paths: 10 instances on epoll, 1 instance in a blocking read
/// woken by the main thread.
fn udp_run_survives_a_server_dropping_every_100th_request(engine: &str) {
    let server = Server::start(
        engine,
        None,
        &["--bind", "127.0.0.1:0", "--drop-every", "100"],
    );
    for instances in [10, 1] {
        let report = client(
            None,
            &server.addr,
            &["--proto", "udp", "--instances", &instances.to_string()],
        );
        check_report(&report, instances, 1);
        assert!(u(&report, "/resends") > 0, "{report:#}");
        assert!(f(&report, "/latency/max_us") >= 10_000.0, "{report:#}");
    }
    let served = server.stop();
    assert!(u(&served, "/total/udp_dropped") > 0, "{served:#}");
}

fn text_output_has_a_line_per_second_and_the_mpstat_table(engine: &str) {
    let server = Server::start(engine, None, &["--bind", "127.0.0.1:0"]);
    let child = command(
        None,
        &[
            "bench",
            "rr",
            "--to",
            &server.addr,
            "--proto",
            "udp",
            "--warmup",
            "0",
            "--duration",
            "1",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn");
    let (code, out, err) = finish(child, LIMIT);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.starts_with("rr: udp to 127.0.0.1:"), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].trim_start().starts_with("1 s:") && lines[0].ends_with("transactions/s"),
        "{out}"
    );
    assert!(lines[1].starts_with("transactions  "), "{out}");
    assert!(
        lines.iter().any(|l| l.starts_with("latency us    p50 ")),
        "{out}"
    );
    let header = lines
        .iter()
        .position(|l| l.starts_with("CPU      %usr   %nice    %sys"))
        .unwrap_or_else(|| panic!("no table: {out}"));
    assert!(lines[header + 1].starts_with("all "), "{out}");
    assert_eq!(lines.len(), header + 2 + online_cpus(), "{out}");
    server.stop();
}

/// Each bad input: exit 2 and a first line quoting the value.
#[test]
fn bad_input_exits_2_naming_the_value() {
    // Ports just freed: nothing listens there.
    let free_tcp = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").to_string()
    };
    let free_udp = {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        s.local_addr().expect("addr").to_string()
    };
    // A UDP socket that reads and never answers: not an rr-server.
    let silent_socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let silent = silent_socket.local_addr().expect("addr").to_string();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["--to", &free_tcp, "--proto", "tcp"],
            format!("'{free_tcp}': cannot connect"),
        ),
        (
            vec!["--to", &free_udp, "--proto", "udp"],
            format!("'{free_udp}': UDP port unreachable"),
        ),
        (
            vec!["--to", &silent, "--proto", "udp"],
            "no answer to the UDP hello within 1 s".into(),
        ),
        (
            vec!["--to", "127.0.0.1:9", "--proto", "tcp", "--instances", "0"],
            "'0'".into(),
        ),
        (
            vec!["--to", "127.0.0.1:9", "--proto", "udp", "--size", "1,65508"],
            "'1,65508'".into(),
        ),
        (
            vec!["--to", "127.0.0.1:9", "--proto", "udp", "--pin", "999"],
            "CPU 999 in '999' is beyond this host's possible CPUs".into(),
        ),
        (
            vec!["--to", "127.0.0.1:0", "--proto", "udp"],
            "port 0".into(),
        ),
    ];
    for (args, expected) in cases {
        let child = command(
            None,
            &[&["bench", "rr", "--duration", "1"], &args[..]].concat(),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
        let (code, _, stderr) = finish(child, LIMIT);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.contains(&expected), "{args:?}: {stderr}");
    }
    let held = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let held = held.local_addr().expect("addr").to_string();
    let child = command(
        None,
        &["bench", "rr-server", "--bind", &held, "--duration", "1"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn");
    let (code, _, stderr) = finish(child, LIMIT);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("'{held}'")) && stderr.contains("already serves"),
        "{stderr}"
    );
}

/// Ctrl-C (SIGINT) and SIGTERM end a run early with a full report, also
/// when the only instance's thread sits in a blocking read.
fn ctrl_c_stops_a_long_run_with_a_report(engine: &str) {
    let server = Server::start(engine, None, &["--bind", "127.0.0.1:0"]);
    for proto in ["tcp", "udp"] {
        let (status, terminal) = Pty::open();
        let child = command(
            None,
            &[
                "bench",
                "rr",
                "--json",
                "--to",
                &server.addr,
                "--proto",
                proto,
                "--warmup",
                "0.2",
                "--duration",
                "30",
            ],
        )
        .stdout(Stdio::piped())
        .stderr(terminal)
        .spawn()
        .expect("spawn");
        let child = KillOnDrop(Some(child));
        // Measuring, with transactions counted: the status line it shows
        // on a terminal says so (however long a loaded machine took).
        status.wait_for("a status line with transactions", LIMIT, |t| {
            status_counts(t, "transactions/s").iter().any(|&n| n > 0)
        });
        let pid = child.pid();
        let signal = if proto == "tcp" {
            libc::SIGINT
        } else {
            libc::SIGTERM
        };
        let asked = std::time::Instant::now();
        // SAFETY: signalling a child we started, by its PID.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
        let (code, out, _) = finish(child.take(), LIMIT);
        assert!(
            asked.elapsed() < Duration::from_secs(3),
            "{:?}",
            asked.elapsed()
        );
        assert_eq!(code, Some(0), "{}", status.text());
        let report: Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{out}\nnot JSON: {e}"));
        assert_eq!(report["ended"], "interrupted");
        assert!(f(&report, "/duration_s") < 30.0, "{report:#}");
        assert!(u(&report, "/transactions") > 0, "{report:#}");
    }
    server.stop();
}

/// SO_REUSEPORT would let a second rr-server join a port another program
/// serves: refused, unless asked for with --share-port.
fn a_port_another_program_serves_is_refused_unless_shared(engine: &str) {
    let other = crate::common::reuseport_listener();
    let held = other.local_addr().expect("addr").to_string();
    let child = command(
        None,
        &[
            "bench",
            "rr-server",
            "--engine",
            engine,
            "--bind",
            &held,
            "--duration",
            "0.3",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn");
    let (code, _, err) = finish(child, LIMIT);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--share-port") && err.contains("another program"),
        "{err}"
    );
    let child = command(
        None,
        &[
            "bench",
            "rr-server",
            "--engine",
            engine,
            "--bind",
            &held,
            "--share-port",
            "--duration",
            "0.3",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn");
    let (code, _, err) = finish(child, LIMIT);
    // It served (nothing came, so it says it measured nothing: exit 1).
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.starts_with(&format!("rr-server: listening on {held} (")),
        "{err}"
    );
    assert!(err.contains("measured nothing"), "{err}");
}

/// `--netns` on both sides, no `ip netns exec`.
fn netns_flag_runs_server_and_client_in_their_namespaces(engine: &str) {
    if skip_unless_root("netns_flag_runs_server_and_client_in_their_namespaces") {
        return;
    }
    let (a, b) = (Netns::new("rn"), Netns::new("rn"));
    let (va, vb) = (unique("rna"), unique("rnb"));
    sh(&[
        "ip", "link", "add", &va, "netns", &a.name, "type", "veth", "peer", "name", &vb, "netns",
        &b.name,
    ]);
    a.ip(&["addr", "add", "10.81.0.1/24", "dev", &va]);
    b.ip(&["addr", "add", "10.81.0.2/24", "dev", &vb]);
    a.ip(&["link", "set", &va, "up"]);
    b.ip(&["link", "set", &vb, "up"]);
    let server = Server::start(engine, None, &["--netns", &b.name, "--bind", "10.81.0.2:0"]);
    let report = client(None, &server.addr, &["--netns", &a.name, "--proto", "tcp"]);
    assert!(u(&report, "/transactions") > 0, "{report:#}");
    assert_eq!(report["netns"], a.name.as_str());
    let served = server.stop();
    assert_eq!(served["netns"], b.name.as_str());
    assert!(u(&served, "/total/tcp_transactions") >= u(&report, "/transactions"));
}

/// Busy polling across a veth pair with GRO on and TSO off (so veth
/// delivers through NAPI): both ends busy-poll, the reports say what was
/// set, which NAPI the client's sockets poll, and whether the kernel took
/// the epoll parameters (EPIOCSPARAMS, Linux 6.9) as probed here.
#[test]
fn busy_polling_rr_across_veth_with_gro_on() {
    if skip_unless_root("busy_polling_rr_across_veth_with_gro_on") {
        return;
    }
    let (a, b) = (Netns::new("rb"), Netns::new("rb"));
    crate::common::veth_between(&a, &b, "rb", ("10.83.0.1/24", "10.83.0.2/24"), true);
    let busy = [
        "--busy-poll",
        "50",
        "--prefer-busy-poll",
        "--busy-poll-budget",
        "16",
    ];
    let server_args = [&["--netns", &b.name, "--bind", "10.83.0.2:0"][..], &busy].concat();
    let server = Server::start("epoll", None, &server_args);
    let epoll = nettune::bench::busy_poll::epoll_params_supported();
    for proto in ["tcp", "udp"] {
        let args = [&["--netns", &a.name, "--proto", proto][..], &busy].concat();
        let report = client(None, &server.addr, &args);
        assert!(u(&report, "/transactions") > 0, "{report:#}");
        assert_eq!(u(&report, "/busy_poll/usecs"), 50, "{report:#}");
        assert_eq!(report["busy_poll"]["prefer"], true);
        assert_eq!(u(&report, "/busy_poll/budget"), 16);
        assert_eq!(report["busy_poll"]["epoll"], epoll);
        let ids = report["busy_poll"]["napi_ids"]
            .as_array()
            .expect("napi_ids");
        assert!(!ids.is_empty(), "no NAPI to poll: {report:#}");
    }
    let served = server.stop();
    assert_eq!(u(&served, "/busy_poll/usecs"), 50, "{served:#}");
    assert_eq!(served["busy_poll"]["epoll"], epoll);
    assert!(u(&served, "/total/udp_transactions") > 0);
}

/// veth with TSO on at the sender delivers through the backlog, not NAPI:
/// busy polling has nothing to poll, and the client says so once.
#[test]
fn busy_polling_without_a_napi_path_says_it_never_engaged() {
    if skip_unless_root("busy_polling_without_a_napi_path_says_it_never_engaged") {
        return;
    }
    let (a, b) = (Netns::new("rt"), Netns::new("rt"));
    crate::common::veth_between(&a, &b, "rt", ("10.86.0.1/24", "10.86.0.2/24"), false);
    let server = Server::start(
        "epoll",
        None,
        &["--netns", &b.name, "--bind", "10.86.0.2:0"],
    );
    let all = [
        "bench",
        "rr",
        "--to",
        &server.addr,
        "--netns",
        &a.name,
        "--proto",
        "tcp",
        "--busy-poll",
        "50",
        "--warmup",
        "0.2",
        "--duration",
        "0.5",
        "--json",
    ];
    let child = command(None, &all)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rr");
    let (code, stdout, stderr) = finish(child, LIMIT);
    assert_eq!(code, Some(0), "{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(report["busy_poll"]["napi_ids"], Value::Array(Vec::new()));
    assert_eq!(
        stderr.matches("busy polling cannot engage").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("tso off"), "{stderr}");
}

/// Without --proto the client runs TCP_RR, as netperf and sockperf do by
/// default (the server's count says which protocol it answered).
#[test]
fn proto_defaults_to_tcp() {
    let server = Server::start("epoll", None, &["--bind", "127.0.0.1:0"]);
    let report = client(None, &server.addr, &[]);
    assert_eq!(report["proto"], "tcp", "{report:#}");
    check_report(&report, 1, 1);
    let served = server.stop();
    assert!(u(&served, "/total/tcp_transactions") > 0, "{served:#}");
    assert_eq!(u(&served, "/total/udp_transactions"), 0, "{served:#}");
}

each_engine!(
    loopback_tcp_and_udp_with_1_and_100_instances,
    veth_between_namespaces_tcp_and_udp_with_1_and_100_instances,
    pinned_run_shows_its_cpu_busy_in_the_table,
    udp_run_survives_a_server_dropping_every_100th_request,
    text_output_has_a_line_per_second_and_the_mpstat_table,
    ctrl_c_stops_a_long_run_with_a_report,
    a_port_another_program_serves_is_refused_unless_shared,
    netns_flag_runs_server_and_client_in_their_namespaces,
);
