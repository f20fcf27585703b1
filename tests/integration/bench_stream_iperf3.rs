//! `bench stream --json` read as iperf3's `-J`: a script written for
//! iperf3 (`jq .end.sum_received.bits_per_second`) must get the same kind
//! of value from nettune, and the right one. Both tools run the same test
//! (two streams for a second on loopback) here, and `jq` reads the same
//! paths from both documents.
//!
//! Traffic stays on loopback; every process is bounded in time and killed
//! by its PID if it overruns.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{finish_bounded, measuring, nettune, skipped, ServerChild};

const LIMIT: Duration = Duration::from_secs(30);

/// iperf3's `-J` paths a script reads, by block.
const PATHS: &[&str] = &[
    ".start.connected[0].socket",
    ".start.connected[0].local_host",
    ".start.connected[0].local_port",
    ".start.connected[0].remote_host",
    ".start.connected[0].remote_port",
    ".start.version",
    ".start.timestamp.time",
    ".start.timestamp.timesecs",
    ".start.connecting_to.host",
    ".start.connecting_to.port",
    ".start.cookie",
    ".start.sock_bufsize",
    ".start.sndbuf_actual",
    ".start.rcvbuf_actual",
    ".start.test_start.protocol",
    ".start.test_start.num_streams",
    ".start.test_start.blksize",
    ".start.test_start.omit",
    ".start.test_start.duration",
    ".start.test_start.bytes",
    ".start.test_start.blocks",
    ".start.test_start.reverse",
    ".start.test_start.tos",
    ".start.test_start.target_bitrate",
    ".intervals[0].streams[0].socket",
    ".intervals[0].streams[0].start",
    ".intervals[0].streams[0].end",
    ".intervals[0].streams[0].seconds",
    ".intervals[0].streams[0].bytes",
    ".intervals[0].streams[0].bits_per_second",
    ".intervals[0].streams[0].retransmits",
    ".intervals[0].streams[0].snd_cwnd",
    ".intervals[0].streams[0].rtt",
    ".intervals[0].streams[0].rttvar",
    ".intervals[0].streams[0].omitted",
    ".intervals[0].streams[0].sender",
    ".intervals[0].sum.start",
    ".intervals[0].sum.end",
    ".intervals[0].sum.seconds",
    ".intervals[0].sum.bytes",
    ".intervals[0].sum.bits_per_second",
    ".intervals[0].sum.retransmits",
    ".intervals[0].sum.omitted",
    ".intervals[0].sum.sender",
    ".end.streams[0].sender.socket",
    ".end.streams[0].sender.start",
    ".end.streams[0].sender.end",
    ".end.streams[0].sender.seconds",
    ".end.streams[0].sender.bytes",
    ".end.streams[0].sender.bits_per_second",
    ".end.streams[0].sender.retransmits",
    ".end.streams[0].sender.max_snd_cwnd",
    ".end.streams[0].sender.max_rtt",
    ".end.streams[0].sender.min_rtt",
    ".end.streams[0].sender.mean_rtt",
    ".end.streams[0].sender.sender",
    ".end.streams[0].receiver.socket",
    ".end.streams[0].receiver.start",
    ".end.streams[0].receiver.end",
    ".end.streams[0].receiver.seconds",
    ".end.streams[0].receiver.bytes",
    ".end.streams[0].receiver.bits_per_second",
    ".end.streams[0].receiver.sender",
    ".end.sum_sent.start",
    ".end.sum_sent.end",
    ".end.sum_sent.seconds",
    ".end.sum_sent.bytes",
    ".end.sum_sent.bits_per_second",
    ".end.sum_sent.retransmits",
    ".end.sum_sent.sender",
    ".end.sum_received.start",
    ".end.sum_received.end",
    ".end.sum_received.seconds",
    ".end.sum_received.bytes",
    ".end.sum_received.bits_per_second",
    ".end.sum_received.sender",
    ".end.cpu_utilization_percent.host_total",
    ".end.cpu_utilization_percent.host_user",
    ".end.cpu_utilization_percent.host_system",
    ".end.cpu_utilization_percent.remote_total",
    ".end.cpu_utilization_percent.remote_user",
    ".end.cpu_utilization_percent.remote_system",
    ".end.sender_tcp_congestion",
    ".end.receiver_tcp_congestion",
];

/// `jq -c FILTER` over `doc`: its output, trimmed.
fn jq(filter: &str, doc: &str) -> String {
    let mut child = Command::new("jq")
        .args(["-c", filter])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn jq");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(doc.as_bytes())
        .expect("feed jq");
    let (code, out, err) = finish_bounded(child, LIMIT);
    assert_eq!(code, Some(0), "jq '{filter}': {err}");
    out.trim().to_string()
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// A port free on loopback now (iperf3 takes no port 0).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// An `iperf3 -s` on loopback, once it says it listens: the child and its
/// port. The port was free a moment before iperf3 binds it, and tests run
/// in parallel: when another process took it first, this server exits
/// ("Address already in use") and another port is tried. Without the
/// listening line, a client could connect to that other process, or be
/// refused for as long as it retries.
fn iperf3_server() -> (Child, String) {
    let mut failures = Vec::new();
    for _ in 0..5 {
        let port = free_port().to_string();
        // --forceflush: a piped stdout would hold the listening line back.
        let mut server = Command::new("iperf3")
            .args(["-s", "--forceflush", "-B", "127.0.0.1", "-p", &port])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn iperf3 -s");
        let stdout = server.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads to the end, so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + LIMIT;
        let mut seen = String::new();
        let listening = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.contains("Server listening on") => break true,
                Ok(line) => seen.push_str(&format!("{line}\n")),
                Err(_) => break false,
            }
        };
        if listening {
            return (server, port);
        }
        let _ = server.kill();
        let (_, _, err) = finish_bounded(server, LIMIT);
        failures.push(format!("port {port}: {seen}{}", err.trim()));
    }
    panic!("iperf3 -s never listened:\n{}", failures.join("\n"));
}

/// `iperf3 -J` of two streams for a second against an `iperf3 -s` it
/// starts on loopback (and kills by PID).
fn iperf3_json() -> String {
    let (mut server, port) = iperf3_server();
    // The server listens; a run that still fails (a test iperf3 itself
    // could not finish on a busy machine) is tried a few more times: its
    // document is the reference here, not what is tested.
    let mut last = String::new();
    for _ in 0..5 {
        let child = Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port, "-t", "1", "-P", "2", "-J"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn iperf3 -c");
        let (code, out, err) = finish_bounded(child, LIMIT);
        // With -J, iperf3 3.x can exit 0 on a failed test and put the
        // failure in the document's "error" instead.
        let failed_inside = serde_json::from_str::<Value>(&out)
            .map(|doc| doc.get("error").is_some_and(|e| !e.is_null()))
            .unwrap_or(true);
        if code == Some(0) && !failed_inside {
            let _ = server.kill();
            let _ = server.wait();
            return out;
        }
        last = format!("{out}{err}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = server.kill();
    let _ = server.wait();
    panic!("iperf3 -c never ran: {last}");
}

/// The same test with nettune: its client's report and the server's.
fn nettune_json() -> (String, Value) {
    let server = ServerChild::spawn_bench(nettune().args([
        "bench",
        "stream-server",
        "-1",
        "--json",
        "--duration",
        "30",
        "--bind",
        "127.0.0.1:0",
    ]));
    let child = nettune()
        .args([
            "bench",
            "stream",
            "--to",
            &server.addr,
            "-P",
            "2",
            "--duration",
            "1",
            "-J",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn bench stream");
    let (code, out, err) = finish_bounded(child, LIMIT);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let (code, rest) = server.finish(LIMIT);
    assert_eq!(code, Some(0), "{rest}");
    (out, serde_json::from_str(&rest).expect("server JSON"))
}

#[test]
fn iperf3_scripts_read_bench_stream_json_unchanged() {
    let test = "bench_stream_iperf3::iperf3_scripts_read_bench_stream_json_unchanged";
    for tool in ["iperf3", "jq"] {
        if !have(tool) {
            skipped(test, &format!("needs {tool} (scripts/test installs it)"));
            return;
        }
    }
    let _serial = measuring();
    let theirs = iperf3_json();
    let (ours, server) = nettune_json();
    // Every path gives a value of the same JSON type from both tools.
    let mut differ = Vec::new();
    for path in PATHS {
        let (a, b) = (
            jq(&format!("{path} | type"), &theirs),
            jq(&format!("{path} | type"), &ours),
        );
        if a != b || a == "\"null\"" {
            differ.push(format!("{path}: iperf3 {a}, nettune {b}"));
        }
    }
    // The list goes last: a long report's middle is what logs cut.
    assert!(differ.is_empty(), "{ours}\n{}", differ.join("\n"));
    // What the test was, the same on both.
    for path in [
        ".start.test_start.protocol",
        ".start.test_start.num_streams",
        ".start.test_start.reverse",
        ".start.connecting_to.host",
        ".start.connected | length",
        ".end.streams | length",
        ".intervals[0].streams | length",
        ".end.sum_sent.sender",
    ] {
        assert_eq!(jq(path, &theirs), jq(path, &ours), "{path}");
    }
    // The receiver's rate is its exact count over its time, and the count
    // is what the server itself reported and every stream's receiver
    // counted.
    let rate: f64 = jq(".end.sum_received.bits_per_second", &ours)
        .parse()
        .expect("a number");
    let bytes: u64 = jq(".end.sum_received.bytes", &ours)
        .parse()
        .expect("a count");
    let seconds: f64 = jq(".end.sum_received.seconds", &ours)
        .parse()
        .expect("a number");
    assert!(bytes > 0 && seconds > 0.0, "{ours}");
    assert!((rate - bytes as f64 * 8.0 / seconds).abs() < 1.0, "{ours}");
    let streams: u64 = jq("[.end.streams[].receiver.bytes] | add", &ours)
        .parse()
        .expect("a count");
    assert_eq!(streams, bytes);
    assert_eq!(server["tests"][0]["bytes"].as_u64(), Some(bytes));
    // The server's test id is the client's cookie: a string of digits
    // (jq would lose the digits of a number past 2^53), in both reports.
    let cookie: Value = serde_json::from_str(&jq(".start.cookie", &ours)).expect("JSON");
    let digits = cookie.as_str().unwrap_or_else(|| panic!("{cookie}"));
    assert!(digits.parse::<u64>().is_ok(), "{cookie}");
    assert_eq!(jq(".server.test", &ours), jq(".start.cookie", &ours));
    assert_eq!(server["tests"][0]["test"], cookie);
    assert_eq!(jq(".schema_version", &ours), "2");
}
