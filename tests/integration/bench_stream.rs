//! `nettune bench stream-server` / `bench stream`, run as a user runs them:
//! the server first (its listening line on stderr names the address), then a
//! client against it; the server's own JSON report (one-off: it exits after
//! the test) must agree with the client's.
//!
//! Traffic goes only to loopback or into network namespaces these tests
//! create (unique names, deleted by a Drop guard even when an assertion
//! fails). Every process is bounded in time and killed by PID if it
//! overruns. Runs are 1-2 s: the tests check that the figures are there
//! and consistent (exact byte counts), never how fast this machine is;
//! the pacing test checks the rate against a pace far below what any
//! machine reaches.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::{
    finish_bounded, ip, measuring, nettune, skip_unless_root, unique, Netns, ServerChild,
};

const LIMIT: Duration = Duration::from_secs(30);

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

/// A one-off stream-server (exits after one test), killed on drop.
struct Server(ServerChild);

impl Server {
    fn start(ns: Option<&Netns>, bind: &str, args: &[&str]) -> Server {
        let all = [
            &[
                "bench",
                "stream-server",
                "--json",
                "-1",
                "--duration",
                "30",
                "--bind",
                bind,
            ],
            args,
        ]
        .concat();
        Server(ServerChild::spawn_bench(&mut command(ns, &all)))
    }

    /// The JSON report it prints when its one test is over.
    fn report(self) -> (Option<i32>, Value) {
        let (code, rest) = self.0.finish(LIMIT);
        let report =
            serde_json::from_str(&rest).unwrap_or_else(|e| panic!("{rest}\nnot JSON: {e}"));
        (code, report)
    }
}

impl std::ops::Deref for Server {
    type Target = ServerChild;
    fn deref(&self) -> &ServerChild {
        &self.0
    }
}

/// Run a client; returns exit code, parsed stdout (if JSON) and stderr.
fn client(ns: Option<&Netns>, to: &str, args: &[&str]) -> (Option<i32>, Option<Value>, String) {
    let all = [
        &["bench", "stream", "--json", "--to", to, "--duration", "1"],
        args,
    ]
    .concat();
    let child = command(ns, &all)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn stream");
    let (code, stdout, stderr) = finish_bounded(child, LIMIT);
    (code, serde_json::from_str(&stdout).ok(), stderr)
}

fn u(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} is not a count in {v:#}"))
}

fn f(v: &Value, path: &str) -> f64 {
    v.pointer(path)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{path} is not a number in {v:#}"))
}

/// Both reports agree stream by stream, to the byte, and with the server's
/// own report of the test.
fn check_exact(client: &Value, server: &Value, streams: usize, reverse: bool) {
    assert_eq!(client["end"]["bytes_match"], true, "{client:#}");
    let per_stream = client["end"]["streams"].as_array().expect("end.streams");
    assert_eq!(per_stream.len(), streams);
    let tests = server["tests"].as_array().expect("tests");
    assert_eq!(tests.len(), 1, "{server:#}");
    let test = &tests[0];
    assert_eq!(test["ended"], "complete", "{test:#}");
    assert_eq!(test["role"], if reverse { "sender" } else { "receiver" });
    for (i, s) in per_stream.iter().enumerate() {
        let sent = u(s, "/sender/bytes");
        let received = u(s, "/receiver/bytes");
        assert!(sent > 0, "{s:#}");
        assert_eq!(sent, received, "stream {i}: {s:#}");
        // The server's own report holds the same count for its side.
        let theirs = u(&test["streams"][i], "/bytes");
        assert_eq!(theirs, if reverse { sent } else { received }, "stream {i}");
        assert_eq!(test["streams"][i]["eof"], true);
    }
    let total: u64 = per_stream.iter().map(|s| u(s, "/receiver/bytes")).sum();
    if !reverse {
        // The receiver's count over the whole test is the server's.
        assert_eq!(u(client, "/end/sum_received/bytes"), total);
    }
    assert_eq!(u(test, "/bytes"), total);
    assert!(f(client, "/end/sum_sent/bits_per_second") > 0.0);
    // One whole second measured: one interval line, every stream in it.
    let intervals = client["intervals"].as_array().expect("intervals");
    assert_eq!(intervals.len(), 1, "{intervals:?}");
    assert_eq!(
        intervals[0]["streams"].as_array().map(Vec::len),
        Some(streams)
    );
    if !reverse {
        // The sender's TCP_INFO: cwnd and RTT every second.
        assert!(u(&intervals[0], "/streams/0/snd_cwnd") > 0);
        assert!(intervals[0]["streams"][0]["rtt"].is_u64());
    }
    assert!(
        f(client, "/end/cpu_seconds_per_gb/total") > 0.0,
        "{:#}",
        client["end"]["cpu_seconds_per_gb"]
    );
    // The server's per-CPU table over the test came back too.
    assert!(test["host_cpu"]["rows"]
        .as_array()
        .is_some_and(|r| r.len() > 1));
}

#[test]
fn totals_match_the_receivers_count_exactly_on_loopback() {
    let _serial = measuring();
    for (streams, reverse) in [(1, false), (4, false), (2, true)] {
        let server = Server::start(None, "127.0.0.1:0", &[]);
        let n = streams.to_string();
        let mut args = vec!["-P", n.as_str(), "--size", "128K"];
        if reverse {
            args.push("--reverse");
        }
        let (code, report, stderr) = client(None, &server.addr, &args);
        assert_eq!(code, Some(0), "{stderr}");
        let report = report.expect("JSON report");
        let (server_code, server_report) = server.report();
        assert_eq!(server_code, Some(0));
        check_exact(&report, &server_report, streams, reverse);
    }
}

#[test]
fn totals_match_across_a_veth_pair_between_namespaces() {
    if skip_unless_root("totals_match_across_a_veth_pair_between_namespaces") {
        return;
    }
    let _serial = measuring();
    let (tx, rx) = (Netns::new("st"), Netns::new("st"));
    let (a, b) = (unique("sta"), unique("stb"));
    ip(&[
        "link", "add", &a, "netns", &tx.name, "type", "veth", "peer", "name", &b, "netns", &rx.name,
    ]);
    ip(&["-n", &tx.name, "addr", "add", "10.82.0.1/24", "dev", &a]);
    ip(&["-n", &rx.name, "addr", "add", "10.82.0.2/24", "dev", &b]);
    ip(&["-n", &tx.name, "link", "set", &a, "up"]);
    ip(&["-n", &rx.name, "link", "set", &b, "up"]);
    let server = Server::start(Some(&rx), "10.82.0.2:0", &[]);
    // The client joins its namespace by --netns, the server by ip netns exec.
    let (code, report, stderr) = client(None, &server.addr, &["-P", "2", "--netns", &tx.name]);
    assert_eq!(code, Some(0), "{stderr}");
    let report = report.expect("JSON report");
    assert_eq!(report["start"]["netns"], tx.name.as_str());
    let (_, server_report) = server.report();
    check_exact(&report, &server_report, 2, false);
}

#[test]
fn a_paced_stream_holds_its_pace() {
    let _serial = measuring();
    let server = Server::start(None, "127.0.0.1:0", &[]);
    // 200 Mbit/s: a twentieth of what the slowest machine moves on
    // loopback, so only the pacing decides the rate. A second run lets
    // slow start settle outside the measured part.
    let (code, report, stderr) = client(
        None,
        &server.addr,
        &["--pace", "200mbit", "--warmup", "0.5", "--size", "64K"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let report = report.expect("JSON report");
    let rate = f(&report, "/end/sum_sent/bits_per_second");
    assert!(
        (180e6..=210e6).contains(&rate),
        "paced at 200 Mbit/s, measured {rate}: {:#}",
        report["intervals"]
    );
    assert_eq!(u(&report, "/start/pace_bits_per_second"), 200_000_000);
    assert_eq!(u(&report, "/start/test_start/target_bitrate"), 200_000_000);
    // This kernel has no fq qdisc on lo: TCP paces itself, and says so.
    assert_eq!(report["start"]["pacer"], "tcp-internal", "{report:#}");
    let pacing = u(&report, "/intervals/0/streams/0/pacing_bits_per_second");
    assert!(pacing <= 200_000_000, "{pacing}");
    drop(server);
}

#[test]
fn a_congestion_control_the_kernel_lacks_is_a_clear_error() {
    let (code, report, stderr) = client(None, "127.0.0.1:9", &["--cc", "nettune-no-such-cc"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(report.is_none());
    assert!(stderr.contains("'nettune-no-such-cc'"), "{stderr}");
    let available = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .expect("available list");
    for name in available.split_whitespace() {
        assert!(stderr.contains(name), "{name} missing from: {stderr}");
    }
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn msg_zerocopy_reaps_every_completion_and_says_the_kernel_copied() {
    let _serial = measuring();
    let server = Server::start(None, "127.0.0.1:0", &[]);
    let (code, report, stderr) = client(None, &server.addr, &["--zerocopy", "msg"]);
    assert_eq!(code, Some(0), "{stderr}");
    let report = report.expect("JSON report");
    let zc = &report["end"]["streams"][0]["zerocopy"];
    let sends = u(zc, "/sends");
    assert!(sends > 0, "{zc:#}");
    assert_eq!(u(zc, "/completed"), sends, "{zc:#}");
    // Loopback: the local receiver gets a copy, and the kernel says so.
    assert_eq!(u(zc, "/copied"), sends, "{zc:#}");
    assert_eq!(report["end"]["bytes_match"], true);
    let (_, server_report) = server.report();
    assert_eq!(server_report["tests"][0]["ended"], "complete");
}

#[test]
fn garbage_on_the_server_port_is_dropped_and_the_next_test_runs() {
    use std::io::Write as _;
    let server = Server::start(None, "127.0.0.1:0", &[]);
    let mut junk = std::net::TcpStream::connect(&server.addr).expect("connect");
    junk.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    let mut silent = std::net::TcpStream::connect(&server.addr).expect("connect");
    silent.write_all(b"NT").expect("a trickle");
    let (code, report, stderr) = client(None, &server.addr, &["--size", "64K"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(report.expect("report")["end"]["bytes_match"], true);
    let (_, server_report) = server.report();
    assert!(
        u(&server_report, "/refused/bad_header") >= 1,
        "{server_report:#}"
    );
    drop((junk, silent));
}
