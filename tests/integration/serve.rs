//! `nettune serve` and `bench ... --remote`, as users run them: a daemon
//! on loopback (its first stdout line is the address, its log on stderr),
//! clients against it, and strangers: a wrong or missing token, a token
//! file others can read, garbage, a slowloris, an old client, a client
//! that vanishes, a daemon that is killed.
//!
//! Traffic stays on loopback. Every process is bounded in time and killed
//! by its PID; the daemon is killed on drop even when an assertion fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{finish_bounded, measuring, nettune, run};

const LIMIT: Duration = Duration::from_secs(40);

/// A token file of mode `mode` in `dir`.
pub fn token_file(dir: &Path, name: &str, secret: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("{secret}\n")).expect("write the token");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    path
}

/// A daemon on loopback with a token file of its own in `dir` (with
/// `extra` options): the daemon and the token file.
pub fn daemon_with_token(dir: &Path, extra: &[&str]) -> (Daemon, PathBuf) {
    let token = token_file(dir, "token", "a-shared-secret-of-enough-bytes", 0o600);
    (Daemon::start(dir, Some(&token), extra), token)
}

/// `bench rr` against a daemon that is not there, with `flags`: it must
/// fail with exit 2 before connecting; its stderr.
pub fn refused_before_connecting(flags: &[&str]) -> String {
    let mut args = vec!["bench", "rr", "--proto", "tcp", "--remote", "127.0.0.1:9"];
    args.extend_from_slice(flags);
    let (code, _, stderr) = run(&args);
    assert_eq!(code, 2, "{stderr}");
    stderr
}

/// What the daemon at `addr` says, to its end, to a client that sends
/// `preamble` and nothing more (within 5 s).
pub fn plain_answer(addr: &str, preamble: &[u8]) -> String {
    let mut conn = TcpStream::connect(addr).expect("connect");
    conn.write_all(preamble).expect("preamble");
    conn.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut answer = Vec::new();
    let _ = conn.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// A running daemon: its address, its log file, killed by PID on drop.
pub struct Daemon {
    child: Option<Child>,
    pub addr: String,
    pub log: PathBuf,
}

impl Daemon {
    pub fn start(dir: &Path, token: Option<&Path>, extra: &[&str]) -> Daemon {
        let log = dir.join(format!("serve-{}.log", crate::common::unique("d")));
        let mut cmd = nettune();
        cmd.args(["serve", "--bind", "127.0.0.1:0"]);
        if let Some(token) = token {
            cmd.arg("--token-file").arg(token);
        }
        let mut child = cmd
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("spawn serve");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut addr = String::new();
        stdout.read_line(&mut addr).expect("the address line");
        let addr = addr.trim().to_string();
        assert!(
            addr.parse::<std::net::SocketAddr>().is_ok(),
            "first line is not an address: {addr:?} (log: {})",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        Daemon {
            child: Some(child),
            addr,
            log,
        }
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.as_ref().expect("running").id()).expect("pid")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait until the log holds `text` (up to 15 s); the log.
    pub fn wait_log(&self, text: &str) -> String {
        let until = Instant::now() + Duration::from_secs(15);
        loop {
            let log = self.log();
            if log.contains(text) {
                return log;
            }
            assert!(
                Instant::now() < until,
                "no '{text}' in the daemon's log:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Threads of the daemon process now.
    pub fn threads(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/task", self.pid()))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    /// Wait until the daemon has `n` threads or fewer (its benches gone).
    fn wait_threads(&self, n: usize) {
        let until = Instant::now() + Duration::from_secs(15);
        while self.threads() > n {
            assert!(
                Instant::now() < until,
                "the daemon still has {} threads, expected {n}:\n{}",
                self.threads(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: signalling the daemon we started, by its PID.
        assert_eq!(unsafe { libc::kill(self.pid(), signal) }, 0);
    }

    pub fn wait(self) -> Option<i32> {
        self.wait_within(LIMIT)
    }

    /// Wait until the daemon's process is gone (at most `limit`): its exit code.
    pub fn wait_within(mut self, limit: Duration) -> Option<i32> {
        let child = self.child.take().expect("running");
        finish_bounded(child, limit).0
    }

    /// Whether the daemon itself holds a socket listening on `addr`'s
    /// port: another program that takes the port once the daemon let it
    /// go is not taken for the daemon.
    pub fn listens_on(&self, addr: &str) -> bool {
        let port = addr.parse::<std::net::SocketAddr>().expect("addr").port();
        ["tcp", "tcp6"].iter().any(|table| {
            crate::common::own_sockets(self.pid(), table)
                .iter()
                .any(|s| s.port == port && s.state == "0A")
        })
    }

    /// Wait until the daemon no longer listens on `addr` (up to 10 s).
    fn wait_not_listening(&self, addr: &str) {
        let until = Instant::now() + Duration::from_secs(10);
        while self.listens_on(addr) {
            assert!(
                Instant::now() < until,
                "the daemon still listens on {addr}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A bench client with `--remote` against `daemon`, JSON on stdout.
pub fn client_command(daemon: &Daemon, token: Option<&Path>, args: &[&str]) -> Command {
    let mut cmd = nettune();
    cmd.args(["bench"])
        .args(args)
        .args(["--json", "--remote", &daemon.addr]);
    if let Some(token) = token {
        cmd.arg("--token-file").arg(token);
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

pub fn client(
    daemon: &Daemon,
    token: Option<&Path>,
    args: &[&str],
) -> (Option<i32>, Option<Value>, String) {
    let child = client_command(daemon, token, args)
        .spawn()
        .expect("spawn a client");
    let (code, stdout, stderr) = finish_bounded(child, LIMIT);
    (code, serde_json::from_str(&stdout).ok(), stderr)
}

fn f(v: &Value, path: &str) -> f64 {
    v.pointer(path)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{path} is not a number in {v:#}"))
}

/// Each bench's load and what its server side's report must show.
pub const BENCHES: [(&str, &[&str], &str); 4] = [
    (
        "rr-server",
        &["rr", "--proto", "udp", "--duration", "1", "--warmup", "0.2"],
        "/total/udp_transactions",
    ),
    (
        "udp-sink",
        &["udp-flood", "--rate", "20000", "--duration", "1"],
        "/packets",
    ),
    (
        "stream-server",
        &[
            "stream",
            "--duration",
            "1",
            "--size",
            "64K",
            "--pace",
            "500mbit",
        ],
        "/tests/0/bytes",
    ),
    (
        "http-server",
        &["http", "-t", "1", "-c", "2", "-d", "1"],
        "/requests",
    ),
];

#[test]
fn four_clients_with_different_benches_at_once_all_get_their_reports() {
    let _serial = measuring();
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(
        dir.path(),
        "token",
        "a-shared-secret-of-enough-bytes",
        0o600,
    );
    let daemon = Daemon::start(dir.path(), Some(&token), &[]);
    let idle = daemon.threads();
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = BENCHES
            .iter()
            .map(|(bench, args, _)| {
                let (daemon, token) = (&daemon, &token);
                s.spawn(move || (*bench, client(daemon, Some(token), args)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect()
    });
    for ((bench, (code, report, stderr)), (_, _, path)) in results.into_iter().zip(BENCHES) {
        assert_eq!(code, Some(0), "{bench}: {stderr}");
        let report = report.unwrap_or_else(|| panic!("{bench}: no JSON: {stderr}"));
        let remote = &report["remote"];
        assert_eq!(remote["bench"], bench, "{report:#}");
        assert_eq!(remote["ended"], "finished", "{remote:#}");
        assert!(remote["error"].is_null(), "{remote:#}");
        assert!(
            f(&remote["report"], path) > 0.0,
            "{bench}: {path} in {remote:#}"
        );
        // The receiver's view includes the daemon host's CPU table.
        assert!(remote["host_cpu"]["rows"]
            .as_array()
            .is_some_and(|r| r.len() > 1));
    }
    // The flood's packets all arrived at the daemon's sink, or were counted
    // lost there: the receiver's view is in the flood's report.
    let until = Instant::now() + Duration::from_secs(15);
    while daemon.log().matches("ended (finished)").count() < 4 {
        assert!(Instant::now() < until, "{}", daemon.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // Every bench is gone: the daemon is back to its idle threads.
    daemon.wait_threads(idle);
}

/// docs/serve.md's line `bench http --remote ADDR:PORT ... /plaintext`: a
/// path alone is what is loaded on the daemon's server side.
#[test]
fn http_with_a_path_alone_loads_that_path_on_the_daemons_server() {
    let _serial = measuring();
    let dir = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(dir.path(), None, &[]);
    let load = ["http", "-t", "1", "-c", "2", "-d", "0.5", "/json"];
    let (code, report, stderr) = client(&daemon, None, &load);
    assert_eq!(code, Some(0), "{stderr}");
    let report = report.unwrap_or_else(|| panic!("no JSON: {stderr}"));
    assert!(
        report["url"].as_str().is_some_and(|u| u.ends_with("/json")),
        "{report:#}"
    );
    assert!(
        f(&report["remote"]["report"], "/requests") > 0.0,
        "{report:#}"
    );
    // Without --remote a path alone names no server: one line, exit 2.
    let (code, _, stderr) = run(&["bench", "http", "-d", "0.5", "/json"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--remote"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn a_wrong_token_learns_nothing_and_others_are_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(dir.path(), "token", "the-right-secret-0123456789", 0o600);
    let wrong = token_file(dir.path(), "wrong", "the-wrong-secret-0123456789", 0o600);
    let daemon = Daemon::start(dir.path(), Some(&token), &[]);
    let rr = ["rr", "--proto", "tcp", "--duration", "0.5", "--warmup", "0"];
    let (code, report, stderr) = client(&daemon, Some(&wrong), &rr);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(report.is_none());
    assert!(stderr.contains("not the daemon's"), "{stderr}");
    daemon.wait_log("authentication failed");
    // No token at all: the client knows before it sends anything.
    let (code, _, stderr) = client(&daemon, None, &rr);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("wants a token"), "{stderr}");
    // The right token still works.
    let (code, report, stderr) = client(&daemon, Some(&token), &rr);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(report.expect("report")["remote"]["bench"], "rr-server");
}

#[test]
fn token_files_that_are_missing_or_readable_by_others_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let open = token_file(dir.path(), "open", "a-shared-secret-of-enough-bytes", 0o644);
    let missing = dir.path().join("missing");
    for (file, says) in [(&open, "mode 0644"), (&missing, "cannot read it")] {
        let file = file.to_str().expect("path");
        let (code, _, stderr) = run(&["serve", "--bind", "127.0.0.1:0", "--token-file", file]);
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
        let (code, _, stderr) = run(&[
            "bench",
            "rr",
            "--proto",
            "tcp",
            "--remote",
            "127.0.0.1:9",
            "--token-file",
            file,
        ]);
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
    // Without a token the daemon listens on loopback only.
    let (code, _, stderr) = run(&["serve", "--bind", "0.0.0.0:0"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("loopback only"), "{stderr}");
}

#[test]
fn garbage_slowloris_and_old_clients_are_dropped_while_others_are_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(
        dir.path(),
        "token",
        "a-shared-secret-of-enough-bytes",
        0o600,
    );
    let daemon = Daemon::start(dir.path(), Some(&token), &[]);
    // Garbage.
    let mut garbage = TcpStream::connect(&daemon.addr).expect("connect");
    garbage
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    // A slowloris: a valid preamble and a 100-byte message announced, then
    // its body a byte a second.
    let mut slow = TcpStream::connect(&daemon.addr).expect("connect");
    slow.write_all(b"NTsv\x00\x01\x00\x00\x00\x00\x00\x64")
        .expect("preamble");
    // An oversized message: a length far past the limit after the preamble.
    let mut huge = TcpStream::connect(&daemon.addr).expect("connect");
    huge.write_all(b"NTsv\x00\x01\x00\x00\x7f\xff\xff\xff")
        .expect("huge");
    // An older client (protocol 0): told to upgrade.
    let answer = plain_answer(&daemon.addr, b"NTsv\x00\x00\x00\x00");
    assert!(
        answer.contains("\"kind\":\"upgrade\"") && answer.contains("upgrade nettune on the client"),
        "{answer}"
    );
    // Others are served while the slowloris trickles.
    let served = std::thread::scope(|s| {
        let trickle = s.spawn(|| {
            for _ in 0..8 {
                if slow.write_all(b"{").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(900));
            }
        });
        let result = client(
            &daemon,
            Some(&token),
            &["rr", "--proto", "tcp", "--duration", "0.5", "--warmup", "0"],
        );
        let _ = trickle.join();
        result
    });
    assert_eq!(served.0, Some(0), "{}", served.2);
    let log = daemon.wait_log("slow or silent");
    assert!(log.contains("not a nettune client"), "{log}");
    assert!(log.contains("is more than the 16384 allowed"), "{log}");
    assert!(log.contains("upgrade nettune on the client"), "{log}");
    drop((garbage, huge));
}

/// Start a long client and read its stderr until the daemon's server side
/// is named: (the client, the server side's address).
/// The caller waits for the child it gets back.
#[allow(clippy::zombie_processes)]
fn long_client(daemon: &Daemon, token: &Path, args: &[&str]) -> (Child, String) {
    let mut child = client_command(daemon, Some(token), args)
        .spawn()
        .expect("spawn");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    loop {
        line.clear();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the client ended before its server side started");
        }
        if let Some(rest) = line.strip_prefix("remote: ") {
            let addr = rest
                .split_whitespace()
                .nth(2)
                .expect("an address")
                .to_string();
            // Keep draining stderr so the client never blocks on it.
            std::thread::spawn(move || {
                let mut sink = String::new();
                let _ = stderr.read_to_string(&mut sink);
            });
            return (child, addr);
        }
    }
}

#[test]
fn a_client_that_vanishes_mid_test_has_its_bench_stopped() {
    let _serial = measuring();
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(
        dir.path(),
        "token",
        "a-shared-secret-of-enough-bytes",
        0o600,
    );
    let daemon = Daemon::start(dir.path(), Some(&token), &[]);
    let idle = daemon.threads();
    let (mut child, addr) = long_client(
        &daemon,
        &token,
        &[
            "stream",
            "--duration",
            "30",
            "--pace",
            "100mbit",
            "--size",
            "64K",
        ],
    );
    assert!(daemon.listens_on(&addr) || daemon.log().contains("test 1"));
    std::thread::sleep(Duration::from_millis(500));
    child.kill().expect("kill the client");
    let _ = child.wait();
    daemon.wait_log("left mid-test");
    daemon.wait_not_listening(&addr);
    daemon.wait_threads(idle);
    // Others are unaffected.
    let (code, _, stderr) = client(
        &daemon,
        Some(&token),
        &["rr", "--proto", "tcp", "--duration", "0.5", "--warmup", "0"],
    );
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn killing_the_daemon_kills_its_benches() {
    let _serial = measuring();
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(
        dir.path(),
        "token",
        "a-shared-secret-of-enough-bytes",
        0o600,
    );
    for signal in [libc::SIGKILL, libc::SIGTERM] {
        let daemon = Daemon::start(dir.path(), Some(&token), &[]);
        let (child, addr) = long_client(
            &daemon,
            &token,
            &["rr", "--proto", "tcp", "--duration", "30", "--warmup", "0"],
        );
        assert!(daemon.listens_on(&addr), "{addr}");
        daemon.signal(signal);
        // The daemon itself gone (its benches with it) well before the
        // 30 s bench would end on its own.
        let code = daemon.wait_within(Duration::from_secs(20));
        if signal == libc::SIGTERM {
            assert_eq!(code, Some(0), "a SIGTERM ends the daemon cleanly");
        }
        // The client sees its connection closed and ends (exit 1: lost
        // connections), within its bound.
        let (code, _, _) = finish_bounded(child, LIMIT);
        assert_ne!(code, Some(0));
    }
}

#[test]
fn a_busy_daemon_refuses_past_max_tests_and_bounds_the_duration() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = token_file(
        dir.path(),
        "token",
        "a-shared-secret-of-enough-bytes",
        0o600,
    );
    let daemon = Daemon::start(
        dir.path(),
        Some(&token),
        &["--max-tests", "1", "--max-duration", "20"],
    );
    let (mut first, _) = long_client(
        &daemon,
        &token,
        &["rr", "--proto", "tcp", "--duration", "10", "--warmup", "0"],
    );
    let (code, _, stderr) = client(
        &daemon,
        Some(&token),
        &["rr", "--proto", "tcp", "--duration", "1"],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("busy") && stderr.contains("--max-tests"),
        "{stderr}"
    );
    let _ = first.kill();
    let _ = first.wait();
    daemon.wait_log("left mid-test");
    let (code, _, stderr) = client(
        &daemon,
        Some(&token),
        &["rr", "--proto", "tcp", "--duration", "60"],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("longer than this daemon allows"),
        "{stderr}"
    );
}

#[test]
fn the_library_client_api_starts_a_server_side_and_returns_its_report() {
    use nettune::base::observe::Quiet;
    use nettune::base::stop::Stop;
    use nettune::bench::rr;
    use nettune::serve::{self, DaemonConfig, ServerSide, Start, Token};

    let _serial = measuring();
    let token = Token::new("an-in-process-secret-0123").expect("token");
    let daemon = serve::bind(DaemonConfig::new(
        "127.0.0.1:0".parse().expect("addr"),
        Some(token.clone()),
    ))
    .expect("bind");
    let at = daemon.local_addr();
    /// Stops the daemon when the test ends, also by a failed assertion
    /// (else the scope would wait for the daemon forever).
    struct StopOnDrop(Stop);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.trigger();
        }
    }
    let stop = Stop::new();
    std::thread::scope(|s| {
        let daemon_stop = stop.clone();
        let _guard = StopOnDrop(stop.clone());
        let running = s.spawn(move || daemon.run(&daemon_stop, &mut Quiet));
        let start = Start {
            side: ServerSide::of(
                &rr::entry::Rr,
                &rr::entry::ServerParams {
                    threads: 1,
                    max_reply: 32,
                },
            ),
            seconds: 10.0,
            pin: Vec::new(),
        };
        let test = serve::start(at, Some(&token), &start).expect("start");
        assert_eq!(
            test.addr.ip(),
            at.ip(),
            "traffic goes to the daemon's address"
        );
        let mut config = rr::ClientConfig::new(test.addr, rr::Proto::Tcp);
        config.size = rr::Sizes {
            request: 8,
            reply: 32,
        };
        config.duration = Duration::from_millis(500);
        config.warmup = Duration::ZERO;
        let load = rr::run_client(&config, &Stop::new(), &mut Quiet).expect("rr");
        let remote = test.finish().expect("report");
        assert_eq!(remote.bench, "rr-server");
        let answered = remote
            .report
            .as_ref()
            .and_then(|r| r.pointer("/total/tcp_transactions"))
            .and_then(Value::as_u64);
        // The server answered what the client counted, and at most the one
        // transaction in flight when the client stopped.
        let answered = answered.expect("a count");
        assert!(
            (load.transactions..=load.transactions + 1).contains(&answered),
            "client {} server {answered}",
            load.transactions
        );
        // A reply larger than asked for at start is refused by the server side.
        let big = serve::start(at, Some(&token), &start).expect("start");
        let mut config = rr::ClientConfig::new(big.addr, rr::Proto::Tcp);
        config.size = rr::Sizes {
            request: 1,
            reply: 64,
        };
        assert!(rr::run_client(&config, &Stop::new(), &mut Quiet).is_err());
        drop(big);
        stop.trigger();
        let report = running.join().expect("daemon thread").expect("daemon run");
        assert_eq!(report.tests_started, 2);
    });
}
