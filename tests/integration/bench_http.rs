//! `nettune bench http-server` and `bench http`, run as a user runs them:
//! the server first (its listening line on stderr names the address), then
//! the load generator or a raw client against it, reports read as JSON.
//!
//! All traffic stays on loopback. Every process is bounded in time and
//! killed by its PID if it overruns or the test fails. The measuring tests
//! run one at a time (a lock): two load runs side by side on two CPUs would
//! starve each other.

use std::io::{BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::common::{measuring, skipped};

const BIN: &str = env!("CARGO_BIN_EXE_nettune");

/// A `bench http-server` child, killed by its PID on drop.
struct Server {
    child: Child,
    stdout: BufReader<ChildStdout>,
    addr: String,
}

impl Server {
    fn start(engine: &str, extra: &[&str]) -> Server {
        Server::spawn(&[&["--engine", engine, "--bind", "127.0.0.1:0"], extra].concat())
    }

    /// A server inside network namespace `netns` (its `--netns` flag).
    fn start_in(engine: &str, netns: &str, bind: &str, extra: &[&str]) -> Server {
        Server::spawn(
            &[
                &["--engine", engine, "--netns", netns, "--bind", bind],
                extra,
            ]
            .concat(),
        )
    }

    fn spawn(args: &[&str]) -> Server {
        let mut child = Command::new(BIN)
            .args(["bench", "http-server", "--json"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nettune");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let addr = match crate::common::bench_server_addr(child.stderr.take().expect("stderr")) {
            Ok((addr, _rest)) => addr,
            Err(seen) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no listening line on stderr: {seen:?}")
            }
        };
        Server {
            child,
            stdout,
            addr,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Ctrl-C (SIGINT to our own child), then its JSON report.
    fn stop(mut self) -> Value {
        let pid = i32::try_from(self.child.id()).expect("pid");
        // SAFETY: kill has no memory preconditions; the PID is our child's.
        unsafe { libc::kill(pid, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            assert!(Instant::now() < deadline, "the server ignored Ctrl-C");
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).expect("stdout");
        let report: Value =
            serde_json::from_str(&rest).unwrap_or_else(|e| panic!("{rest}\nnot JSON: {e}"));
        // A server that answered nothing measured nothing: exit 1.
        let expected = if u(&report, "/requests") == 0 { 1 } else { 0 };
        assert_eq!(status.code(), Some(expected), "server exit {status:?}");
        report
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Run nettune to its end within `limit` (killed on overrun): exit code,
/// stdout, stderr.
fn run_bounded(args: &[&str], limit: Duration) -> (i32, String, String) {
    let child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nettune");
    let (code, stdout, stderr) = crate::common::finish_bounded(child, limit);
    (code.unwrap_or(-1), stdout, stderr)
}

fn load_json(args: &[&str], limit: Duration) -> Value {
    let full = [&["bench", "http", "--json"], args].concat();
    let (code, stdout, stderr) = run_bounded(&full, limit);
    assert_eq!(code, 0, "nettune {full:?}: {stderr}\n{stdout}");
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

/// min <= p50 <= p90 <= p99 <= p99.9 <= p99.99 <= max, all positive.
fn assert_ordered(latency: &Value) {
    let names = [
        "min_us", "p50_us", "p90_us", "p99_us", "p999_us", "p9999_us", "max_us",
    ];
    let values: Vec<f64> = names.iter().map(|n| f(latency, &format!("/{n}"))).collect();
    assert!(values[0] > 0.0, "{latency:#}");
    assert!(
        values.windows(2).all(|w| w[0] <= w[1]),
        "percentiles out of order: {latency:#}"
    );
}

/// One raw HTTP response: status code, headers (lower-case names), body.
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Read `n` Content-Length-framed responses from `stream`.
fn read_responses(stream: &mut TcpStream, n: usize) -> Vec<Response> {
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    while out.len() < n {
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8(buf[..end].to_vec()).expect("ascii head");
            let mut lines = head.split("\r\n");
            let status_line = lines.next().expect("status line");
            let status = status_line
                .split(' ')
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
            let headers: Vec<(String, String)> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.to_ascii_lowercase(), v.trim().to_string()))
                .collect();
            let len: usize = headers
                .iter()
                .find(|(k, _)| k == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .expect("content-length");
            if buf.len() >= end + 4 + len {
                let body = String::from_utf8(buf[end + 4..end + 4 + len].to_vec()).expect("body");
                buf.drain(..end + 4 + len);
                out.push(Response {
                    status,
                    headers,
                    body,
                });
                continue;
            }
        }
        // A socket with a read timeout reports an interrupted wait as
        // EINTR (the io_uring check's task work can interrupt this thread).
        let got = match stream.read(&mut chunk) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            got => got.expect("read a response"),
        };
        assert!(got > 0, "closed after {} of {n} responses", out.len());
        buf.extend_from_slice(&chunk[..got]);
    }
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Read until the server closes (bounded by a read timeout).
fn read_to_close(stream: &mut TcpStream) -> String {
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut all = Vec::new();
    stream
        .read_to_end(&mut all)
        .expect("the server should close the connection");
    String::from_utf8_lossy(&all).into_owned()
}

fn loopback_closed_loop_counts_every_response(engine: &str) {
    let _serial = measuring();
    let server = Server::start(engine, &["--threads", "2"]);
    let report = load_json(
        // A 10 s timeout: no request of a healthy loopback run is that slow,
        // even on a loaded machine, so any error here is a real one.
        &[
            &server.url("/plaintext"),
            "-t",
            "2",
            "-c",
            "8",
            "-d",
            "1",
            "-T",
            "10s",
        ],
        Duration::from_secs(20),
    );
    let served = server.stop();
    let requests = u(&report, "/requests");
    assert!(requests > 100, "{report:#}");
    assert!(f(&report, "/requests_per_s") > 0.0);
    assert_eq!(report["mode"], "closed");
    assert_ordered(&report["latency"]);
    assert_eq!(u(&report, "/latency/count"), requests);
    assert_eq!(u(&report, "/status_codes/200"), requests);
    assert_eq!(u(&report, "/non_2xx"), 0);
    for e in ["connect", "read", "write", "timeout", "protocol"] {
        assert_eq!(u(&report, &format!("/errors/{e}")), 0, "{report:#}");
    }
    // Each plaintext response is at least its 13-byte body plus headers.
    assert!(u(&report, "/bytes_read") > requests * 100);
    assert!(report["latency_uncorrected"].is_null());
    assert!(f(&report, "/requests_per_s_per_thread/mean") > 0.0);
    // The server answered at least every response counted, and saw the
    // 8 connections (plus the generator's pre-flight check).
    assert!(u(&served, "/requests") >= requests, "{served:#}");
    assert_eq!(u(&served, "/connections"), 9, "{served:#}");
    assert_eq!(served["per_thread"].as_array().map(Vec::len), Some(2));
}

fn loopback_open_loop_accounts_for_every_request_due_and_corrects_upwards(engine: &str) {
    let _serial = measuring();
    let server = Server::start(engine, &["--threads", "1"]);
    let started = Instant::now();
    let report = load_json(
        &[
            &server.url("/json"),
            "-t",
            "2",
            "-c",
            "4",
            "-d",
            "1500ms",
            "-D",
            "0.5",
            "--rate",
            "2000",
        ],
        Duration::from_secs(20),
    );
    let lifetime = started.elapsed().as_secs_f64();
    drop(server);
    let requests = u(&report, "/requests");
    assert!(requests > 0, "{report:#}");
    // Every request due is accounted for, whatever the delays (how fast the
    // generator keeps its rate is a benchmark's question, not a test's):
    // each thread's request k is due k/rate after it started. Each request due in the measured 1.5 s
    // (3000) was answered inside it (counted), is the one in flight on its
    // connection at the end (4), was dropped with a failed connection (an
    // error), or is still due but unsent at the end (`unsent_at_end`): a
    // generator or server starved of CPU shows as requests behind
    // schedule, never as requests lost. One more per thread for rounding.
    let unsent = u(&report, "/unsent_at_end");
    let errors: u64 = ["connect", "read", "write", "timeout", "protocol"]
        .iter()
        .map(|e| u(&report, &format!("/errors/{e}")))
        .sum();
    assert!(
        requests + unsent + 4 + errors + 2 >= 3000,
        "{requests} answered + {unsent} unsent + {errors} errors fall short of the 3000 due: \
         {report:#}"
    );
    // Responses are counted when they arrive inside the window, so requests
    // scheduled in the warm-up but answered after it add to that; nothing
    // exceeds what the schedule holds over the generator's life (warm-up
    // plus window: 4000 on time, more only when it ran late).
    assert!(
        requests as f64 <= 2000.0 * lifetime + 2.0,
        "{requests} answered in {lifetime:.2} s at 2000 req/s: {report:#}"
    );
    assert_eq!(report["mode"], "open");
    assert_ordered(&report["latency"]);
    assert_ordered(&report["latency_uncorrected"]);
    // Every request's latency from its scheduled time is at least that
    // from its actual send, so every percentile is too.
    for p in ["p50_us", "p90_us", "p99_us", "p9999_us", "max_us"] {
        let corrected = f(&report, &format!("/latency/{p}"));
        let uncorrected = f(&report, &format!("/latency_uncorrected/{p}"));
        assert!(uncorrected <= corrected, "{p}: {uncorrected} > {corrected}");
    }
}

fn sixteen_pipelined_requests_get_sixteen_answers_in_order(engine: &str) {
    let server = Server::start(engine, &["--threads", "1"]);
    let paths = ["/plaintext", "/json", "/missing", "/json?x=1"];
    let mut requests = String::new();
    for i in 0..16 {
        requests.push_str(&format!("GET {} HTTP/1.1\r\nHost: t\r\n\r\n", paths[i % 4]));
    }
    let mut stream = TcpStream::connect(&server.addr).expect("connect");
    stream.write_all(requests.as_bytes()).expect("one write");
    let responses = read_responses(&mut stream, 16);
    for (i, r) in responses.iter().enumerate() {
        let (status, body) = match paths[i % 4] {
            "/plaintext" => (200, "Hello, World!"),
            "/missing" => (404, "Not Found"),
            _ => (200, r#"{"message":"Hello, World!"}"#),
        };
        assert_eq!((r.status, r.body.as_str()), (status, body), "response {i}");
    }
    // Keep-alive: the same connection still answers.
    stream
        .write_all(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n")
        .expect("write");
    assert_eq!(read_responses(&mut stream, 1)[0].status, 200);
}

fn malformed_and_oversized_requests_are_refused_and_closed(engine: &str) {
    let server = Server::start(engine, &["--threads", "1"]);
    let mut stream = TcpStream::connect(&server.addr).expect("connect");
    stream
        .write_all(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\nTHIS IS NOT HTTP\r\n\r\n")
        .expect("write");
    let answer = read_to_close(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    let second = answer.find("HTTP/1.1 400 Bad Request\r\n");
    assert!(second.is_some(), "{answer}");
    assert!(answer.contains("Connection: close\r\n"), "{answer}");

    let mut stream = TcpStream::connect(&server.addr).expect("connect");
    let mut big = b"GET /plaintext HTTP/1.1\r\nHost: t\r\nX-Filler: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 9000));
    stream.write_all(&big).expect("write");
    let answer = read_to_close(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
}

/// Requests whose lines end in a bare LF (as `printf 'GET / HTTP/1.1\nHost:
/// x\n\n' | nc` sends) are answered at once, as nginx answers them, not left
/// waiting for the idle timeout; the connection stays open for the next.
fn bare_lf_requests_are_answered_at_once(engine: &str) {
    let server = Server::start(engine, &["--threads", "1"]);
    let mut stream = TcpStream::connect(&server.addr).expect("connect");
    stream
        .write_all(b"GET / HTTP/1.1\nHost: x\n\n")
        .expect("write");
    // read_responses waits 5 s at most: far below the 60 s idle timeout.
    assert_eq!(read_responses(&mut stream, 1)[0].status, 404);
    stream
        .write_all(b"GET /plaintext HTTP/1.1\nHost: x\n\n")
        .expect("write");
    let answer = &read_responses(&mut stream, 1)[0];
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (200, "Hello, World!")
    );
    server.stop();
}

fn idle_connections_are_closed_after_the_idle_timeout(engine: &str) {
    let server = Server::start(engine, &["--threads", "1", "--idle-timeout", "1"]);
    let mut idle = TcpStream::connect(&server.addr).expect("connect");
    let started = Instant::now();
    let rest = read_to_close(&mut idle);
    let waited = started.elapsed();
    assert!(rest.is_empty(), "{rest}");
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(4),
        "closed after {waited:?}"
    );
    let served = server.stop();
    assert_eq!(u(&served, "/per_thread/0/idle_closed"), 1, "{served:#}");
}

fn date_header_changes_after_a_second(engine: &str) {
    let server = Server::start(engine, &["--threads", "1"]);
    let mut stream = TcpStream::connect(&server.addr).expect("connect");
    let mut get = || {
        stream
            .write_all(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n")
            .expect("write");
        read_responses(&mut stream, 1).remove(0)
    };
    let first = get();
    assert_eq!(first.header("server"), Some("nettune"));
    assert_eq!(first.header("content-type"), Some("text/plain"));
    assert_eq!(first.header("content-length"), Some("13"));
    let date = first.header("date").expect("date").to_string();
    // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
    assert_eq!(date.len(), 29, "{date}");
    assert!(
        date.ends_with(" GMT") && date.as_bytes()[3] == b',',
        "{date}"
    );
    // Sleep past the next whole second, then ask again on the same connection.
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock");
    std::thread::sleep(Duration::from_millis(1100 - u64::from(now.subsec_millis())));
    let later = get();
    let later_date = later.header("date").expect("date");
    assert_ne!(later_date, date, "the Date header did not change");
}

/// A tiny HTTP server for the coordinated-omission test: one thread per
/// connection, answers every request, and stalls once for `stall` when
/// `after` has passed since its first request.
fn stalling_server(after: Duration, stall: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    static FIRST: OnceLock<Instant> = OnceLock::new();
    static STALLED: AtomicBool = AtomicBool::new(false);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let _ = stream.set_nodelay(true);
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while let Ok(n @ 1..) = stream.read(&mut chunk) {
                    buf.extend_from_slice(&chunk[..n]);
                    let mut answers = 0;
                    while let Some(end) = find(&buf, b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        answers += 1;
                    }
                    if answers == 0 {
                        continue;
                    }
                    let first = *FIRST.get_or_init(Instant::now);
                    if first.elapsed() >= after && !STALLED.swap(true, Ordering::SeqCst) {
                        std::thread::sleep(stall);
                    }
                    let reply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".repeat(answers);
                    if stream.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn open_loop_corrected_tail_shows_a_stall_the_uncorrected_one_hides() {
    let _serial = measuring();
    // One connection, so while the server stalls exactly one request is in
    // flight: its own latency is the only uncorrected sample near 200 ms.
    // The requests scheduled during the stall wait (up to 200 ms) before
    // they can be sent: the corrected latency counts that wait.
    // 5000 req/s over 0.5 + 4.5 s schedules at most ~25,000 requests (more
    // only if the run ends late), so p99.9 (the top 0.1%, some 25) holds
    // some of the ~250 scheduled in the first 50 ms of the stall (all over
    // 150 ms) however few requests a loaded machine got answered; with
    // more than 1000 samples it leaves out the one stalled sample.
    let addr = stalling_server(Duration::from_secs(2), Duration::from_millis(200));
    let started = Instant::now();
    let report = load_json(
        &[
            &format!("http://{addr}/"),
            "-t",
            "1",
            "-c",
            "1",
            "-R",
            "5000",
            "-d",
            "4.5",
            "-D",
            "0.5",
        ],
        Duration::from_secs(30),
    );
    let lifetime = started.elapsed().as_secs_f64();
    let requests = u(&report, "/requests");
    assert!(
        requests > 1_000,
        "too few samples to judge p99.9: {report:#}"
    );
    assert!(
        requests as f64 <= 5000.0 * lifetime + 1.0,
        "{requests} answered in {lifetime:.2} s at 5000 req/s: {report:#}"
    );
    let corrected = f(&report, "/latency/p999_us");
    let uncorrected = f(&report, "/latency_uncorrected/p999_us");
    let uncorrected_max = f(&report, "/latency_uncorrected/max_us");
    assert!(
        uncorrected_max >= 150_000.0,
        "the stalled request itself took {uncorrected_max} us: did the server stall?"
    );
    assert!(
        corrected >= 150_000.0,
        "corrected p99.9 {corrected} us hides the stall"
    );
    assert!(
        uncorrected < 100_000.0,
        "uncorrected p99.9 {uncorrected} us shows the stall: one sample should not"
    );
}

fn cbpf_steers_each_connection_to_the_listener_of_its_cpu(engine: &str) {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    if online.trim() == "0" {
        skipped(
            "cbpf_steers_each_connection_to_the_listener_of_its_cpu",
            "needs two CPUs",
        );
        return;
    }
    let _serial = measuring();
    let server = Server::start(engine, &["--threads", "2", "--pin", "0,1"]);
    // Load thread i runs on CPU i; loopback handles its SYNs on that CPU,
    // so the program sends its connections to listener i (server thread i).
    let report = load_json(
        &[
            &server.url("/plaintext"),
            "-t",
            "2",
            "-c",
            "6",
            "--pin",
            "0,1",
            "-d",
            "0.5",
        ],
        Duration::from_secs(20),
    );
    let served = server.stop();
    assert!(u(&report, "/requests") > 0);
    assert_eq!(served["locality"], "cbpf");
    for thread in 0..2 {
        let connections = u(&served, &format!("/per_thread/{thread}/connections"));
        // 3 from the load thread on this CPU, maybe the unpinned pre-flight.
        assert!(
            (3..=4).contains(&connections),
            "server thread {thread}: {connections} connections\n{served:#}"
        );
    }
}

#[test]
fn bad_input_is_refused_with_exit_status_2() {
    let refused = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").to_string()
        // Dropped here: nothing listens on that port any more.
    };
    let refused_url = format!("http://{refused}/");
    let cases: [(&[&str], &str); 6] = [
        (&["bench", "http", "not a url"], "not a URL"),
        (
            &["bench", "http", "https://127.0.0.1:1/"],
            "https is not supported",
        ),
        (
            &["bench", "http", &refused_url, "-d", "1"],
            "connection refused",
        ),
        (
            &["bench", "http", "http://127.0.0.1:1/", "-t", "4", "-c", "2"],
            "-c '2' is less than -t '4'",
        ),
        (
            &["bench", "http", "http://127.0.0.1:1/", "-d", "soon"],
            "'soon'",
        ),
        (
            &["bench", "http-server", "--bind", "localhost"],
            "'localhost'",
        ),
    ];
    for (args, expected) in cases {
        let (code, _, stderr) = run_bounded(args, Duration::from_secs(15));
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

/// SO_REUSEPORT would let the server join a port another program serves
/// (the kernel then splits the connections): refused, unless --share-port.
fn a_port_another_program_serves_is_refused_unless_shared(engine: &str) {
    let other = crate::common::reuseport_listener();
    let held = other.local_addr().expect("addr").to_string();
    let (code, _, err) = run_bounded(
        &[
            "bench",
            "http-server",
            "--engine",
            engine,
            "--bind",
            &held,
            "--threads",
            "1",
            "--duration",
            "0.3",
        ],
        Duration::from_secs(10),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--share-port") && err.contains(&held), "{err}");
    let (code, _, err) = run_bounded(
        &[
            "bench",
            "http-server",
            "--engine",
            engine,
            "--bind",
            &held,
            "--threads",
            "1",
            "--share-port",
            "--duration",
            "0.3",
        ],
        Duration::from_secs(10),
    );
    assert_eq!(code, 1, "served, but nothing came: {err}");
    assert!(err.contains(&format!("listening on {held}")), "{err}");
}

/// A server started well before its load reports the load's rate, as
/// udp-sink does: requests over the time it had traffic, not over its
/// whole life (which would halve the rate here, and more on a server left
/// running between loads).
fn a_server_started_before_its_load_rates_over_its_traffic(engine: &str) {
    let server = Server::start(engine, &["--threads", "1"]);
    // Two idle seconds, then half a second of load.
    std::thread::sleep(Duration::from_secs(2));
    load_json(
        &["-t", "1", "-c", "2", "-d", "0.5", &server.url("/plaintext")],
        Duration::from_secs(20),
    );
    let served = server.stop();
    let (requests, traffic, life) = (
        u(&served, "/requests"),
        f(&served, "/traffic_s"),
        f(&served, "/duration_s"),
    );
    assert!(traffic > 0.0 && traffic + 1.5 < life, "{served:#}");
    let rate = f(&served, "/requests_per_s");
    assert!(
        (rate * traffic - requests as f64).abs() < 1.0,
        "{rate} req/s over {traffic} s is not {requests} requests"
    );
    let thread_rate = f(&served, "/per_thread/0/requests_per_s");
    assert!((thread_rate - rate).abs() < 1e-6, "{served:#}");
}

/// SIGTERM ends the server like Ctrl-C: with its report.
fn sigterm_ends_the_server_with_its_report(engine: &str) {
    let mut server = Server::start(engine, &["--threads", "1"]);
    let load = load_json(
        &["-t", "1", "-c", "2", "-d", "0.5", &server.url("/plaintext")],
        Duration::from_secs(20),
    );
    let pid = i32::try_from(server.child.id()).expect("pid");
    // SAFETY: kill has no memory preconditions; the PID is our child's.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = server.child.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "the server ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    let mut rest = String::new();
    server.stdout.read_to_string(&mut rest).expect("stdout");
    let report: Value =
        serde_json::from_str(&rest).unwrap_or_else(|e| panic!("{rest}\nnot JSON: {e}"));
    assert_eq!(report["ended"], "interrupted");
    assert!(u(&report, "/requests") >= u(&load, "/requests"));
}

/// `--netns` on both sides: the server in one namespace, the load in
/// another, over a veth pair the test creates.
fn netns_flag_runs_server_and_load_in_their_namespaces(engine: &str) {
    if crate::common::skip_unless_root(&format!(
        "netns_flag_runs_server_and_load_in_their_namespaces ({engine})"
    )) {
        return;
    }
    let (a, b) = (
        crate::common::Netns::new("hn"),
        crate::common::Netns::new("hn"),
    );
    crate::common::veth_between(&a, &b, "hn", ("10.82.0.1/24", "10.82.0.2/24"), false);
    let server = Server::start_in(engine, &b.name, "10.82.0.2:0", &["--threads", "1"]);
    let load = short_load(&a.name, &server);
    assert!(u(&load, "/requests") > 0, "{load:#}");
    let served = server.stop();
    assert_eq!(served["netns"], b.name.as_str());
    assert!(u(&served, "/requests") >= u(&load, "/requests"));
}

/// Half a second of `bench http` from namespace `netns` against `server`
/// (1 thread, 2 connections).
fn short_load(netns: &str, server: &Server) -> Value {
    load_json(
        &[
            "--netns",
            netns,
            "-t",
            "1",
            "-c",
            "2",
            "-d",
            "0.5",
            &server.url("/plaintext"),
        ],
        Duration::from_secs(20),
    )
}

/// http-server busy-polling across a veth pair with GRO on: requests are
/// served and the report says what was set.
#[test]
fn busy_polling_server_across_veth_with_gro_on() {
    if crate::common::skip_unless_root("busy_polling_server_across_veth_with_gro_on") {
        return;
    }
    let (a, b) = (
        crate::common::Netns::new("hb"),
        crate::common::Netns::new("hb"),
    );
    crate::common::veth_between(&a, &b, "hb", ("10.84.0.1/24", "10.84.0.2/24"), true);
    let server = Server::start_in(
        "epoll",
        &b.name,
        "10.84.0.2:0",
        &["--threads", "1", "--busy-poll", "50", "--prefer-busy-poll"],
    );
    let load = short_load(&a.name, &server);
    assert!(u(&load, "/requests") > 0, "{load:#}");
    let served = server.stop();
    assert_eq!(u(&served, "/busy_poll_us"), 50);
    assert_eq!(served["busy_poll"]["prefer"], true);
    assert_eq!(
        served["busy_poll"]["epoll"],
        nettune::bench::busy_poll::epoll_params_supported()
    );
}

each_engine!(
    loopback_closed_loop_counts_every_response,
    loopback_open_loop_accounts_for_every_request_due_and_corrects_upwards,
    sixteen_pipelined_requests_get_sixteen_answers_in_order,
    malformed_and_oversized_requests_are_refused_and_closed,
    bare_lf_requests_are_answered_at_once,
    idle_connections_are_closed_after_the_idle_timeout,
    date_header_changes_after_a_second,
    cbpf_steers_each_connection_to_the_listener_of_its_cpu,
    a_port_another_program_serves_is_refused_unless_shared,
    sigterm_ends_the_server_with_its_report,
    a_server_started_before_its_load_rates_over_its_traffic,
    netns_flag_runs_server_and_load_in_their_namespaces,
);
