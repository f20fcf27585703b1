//! `nettune monitor --prometheus`, run as a user runs it and judged by
//! the tools users judge it with: a real Prometheus server scraping it and
//! answering queries, `promtool check metrics` on the exposition,
//! node_exporter serving the same host beside it; clients that trickle,
//! flood or send garbage while a scrape goes through; bad input. The rules
//! and the dashboard of contrib/ are checked in `prom_contrib`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nettune::monitor::prom::parse::{parse, Parsed};
use serde_json::Value;

use crate::common::*;

/// A running exporter, stopped (SIGTERM, then SIGKILL) by its PID when
/// dropped, also when a test fails.
pub(crate) struct Exporter {
    child: Option<Child>,
    pub(crate) addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

impl Exporter {
    /// `nettune monitor --prometheus --bind 127.0.0.1:0 ARGS`, once it
    /// says where it serves.
    pub(crate) fn start(args: &[&str]) -> Exporter {
        let mut cmd = nettune();
        cmd.args(["monitor", "--prometheus", "--bind", "127.0.0.1:0"])
            .args(args);
        Exporter::spawn(cmd)
    }

    /// The same, listening on `bind`.
    pub(crate) fn start_at(bind: &str, args: &[&str]) -> Exporter {
        let mut cmd = nettune();
        cmd.args(["monitor", "--prometheus", "--bind", bind])
            .args(args);
        Exporter::spawn(cmd)
    }

    /// `cmd` (an exporter's command line), once it says where it serves.
    pub(crate) fn spawn(mut cmd: Command) -> Exporter {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nettune monitor --prometheus");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let pipe = child.stderr.take().expect("stderr");
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let url = line.split_once("http://").or(line.split_once("https://"));
                if let Some((_, rest)) = url {
                    if let Some(addr) = rest.split('/').next() {
                        let _ = tx.send(addr.to_string());
                    }
                }
                if let Ok(mut s) = sink.lock() {
                    s.push_str(&line);
                    s.push('\n');
                }
            }
        });
        let mut exporter = Exporter {
            child: Some(child),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            stderr,
        };
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(addr) => exporter.addr = addr.parse().expect("the address it printed"),
            Err(_) => panic!("the exporter did not start: {}", exporter.stderr()),
        }
        exporter
    }

    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn get(&self, path: &str) -> (u16, String, String) {
        http_get(self.addr, path)
    }

    pub(crate) fn metrics(&self) -> (String, Parsed) {
        let (status, _, body) = self.get("/metrics");
        assert_eq!(status, 200, "{body}");
        let parsed = parse(&body).unwrap_or_else(|e| panic!("{body}\n{e}"));
        (body, parsed)
    }

    /// SIGTERM; the exit code and stderr.
    pub(crate) fn stop(mut self) -> (Option<i32>, String) {
        let child = self.child.take().expect("running");
        signal(&child, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut child = child;
        let code = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the exporter did not stop on SIGTERM: {}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // Let the reader thread take the last lines.
        std::thread::sleep(Duration::from_millis(100));
        (code, self.stderr())
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&child, libc::SIGTERM);
            std::thread::sleep(Duration::from_millis(200));
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn signal(child: &Child, sig: i32) {
    let pid = i32::try_from(child.id()).expect("pid");
    // SAFETY: kill has no memory preconditions; the PID is our child's.
    unsafe { libc::kill(pid, sig) };
}

/// GET with `Connection: close`: status, head, body.
pub(crate) fn http_get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let (status, head, body) = http_raw(addr, request.as_bytes());
    (status, head, String::from_utf8(body).expect("utf-8 body"))
}

fn http_raw(addr: SocketAddr, request: &[u8]) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    s.write_all(request).expect("send");
    let mut all = Vec::new();
    s.read_to_end(&mut all).expect("read the response");
    let split = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {:?}", String::from_utf8_lossy(&all)));
    let head = String::from_utf8_lossy(&all[..split]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head}"));
    let body = all[split + 4..].to_vec();
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    (status, head, if chunked { dechunk(&body) } else { body })
}

/// A chunked body (what Go's server sends node_exporter's in), joined.
fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a chunk size line");
        let size = std::str::from_utf8(&body[..line_end])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok())
            .expect("a hex chunk size");
        body = &body[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

/// A Go exporter-toolkit server (Prometheus, node_exporter) started on a
/// loopback port 0, once it logs where it listens: the child, its address
/// and its log (stderr, drained to the end so that it never blocks on a
/// full pipe; the last 8 KiB kept). A port picked free beforehand could
/// be taken by a parallel test before the server binds it; port 0 cannot.
fn spawn_listening(mut cmd: Command, what: &str) -> (Child, SocketAddr, Arc<Mutex<String>>) {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what} (Debian package): {e}"));
    let log = Arc::new(Mutex::new(String::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let pipe = child.stderr.take().expect("stderr");
    let sink = Arc::clone(&log);
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            // `msg="Listening on" address=127.0.0.1:41055`: the bound
            // address (an earlier line names the requested :0).
            if line.contains("msg=\"Listening on\"") {
                let addr = line
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("address="))
                    .and_then(|a| a.parse::<SocketAddr>().ok());
                if let Some(addr) = addr {
                    let _ = tx.send(addr);
                }
            }
            if let Ok(mut text) = sink.lock() {
                text.push_str(&line);
                text.push('\n');
                let mut cut = text.len().saturating_sub(8192);
                while !text.is_char_boundary(cut) {
                    cut += 1;
                }
                text.drain(..cut);
            }
        }
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(addr) => (child, addr, log),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            // Let the reader take the last lines.
            std::thread::sleep(Duration::from_millis(100));
            let text = log.lock().map(|t| t.clone()).unwrap_or_default();
            panic!("{text}\n{what} never logged the address it listens on");
        }
    }
}

/// A child killed by its PID when dropped, also when a test fails first.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `promtool check metrics` on `body`: its exit code and output.
fn promtool_check_metrics(body: &str) -> (i32, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(body.as_bytes())
        .expect("feed promtool");
    let (code, out, err) = finish_bounded(child, Duration::from_secs(30));
    (code.unwrap_or(-1), out + &err)
}

/// promtool's verdict on an exposition: no error, and no lint but the
/// one node_exporter's own netstat names draw (`node_netstat_Udp_...` are
/// not snake_case; node_exporter writes them so, and they are kept so
/// that both exporters' series are one).
pub(crate) fn assert_promtool_accepts(body: &str) {
    let (code, out) = promtool_check_metrics(body);
    assert!(code == 0 || code == 3, "promtool exit {code}: {out}");
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            line.starts_with("node_netstat_") && line.contains("camelCase"),
            "promtool: {line}"
        );
    }
}

fn fixture_arg(name: &str) -> String {
    fixture(name).display().to_string()
}

#[test]
fn a_replay_serves_the_recorded_counters_and_the_findings_they_show() {
    let dir = fixture("vm-2cpu-virtio");
    let exporter = Exporter::start(&["--root", &fixture_arg("vm-2cpu-virtio")]);
    let (body, m) = exporter.metrics();
    assert_promtool_accepts(&body);
    // Which snapshot was served: by its recorded time.
    let series: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("nettune/series.json")).expect("series.json"),
    )
    .expect("json");
    let when = m
        .get("nettune_sample_timestamp_seconds", &[])
        .expect("timestamp");
    let entry = series["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .find(|e| (e["unix_ms"].as_f64().unwrap_or(0.0) / 1000.0 - when).abs() < 0.001)
        .unwrap_or_else(|| panic!("no snapshot recorded at {when}"));
    let snapshot = dir.join(entry["dir"].as_str().expect("dir"));
    // node_softnet_processed_total is the first column of softnet_stat.
    let softnet = std::fs::read_to_string(snapshot.join("proc/net/softnet_stat")).expect("softnet");
    for (cpu, line) in softnet.lines().enumerate() {
        let first = line.split_whitespace().next().expect("a column");
        let processed = u64::from_str_radix(first, 16).expect("hex");
        assert_eq!(
            m.get("node_softnet_processed_total", &[("cpu", &cpu.to_string())]),
            Some(processed as f64),
            "CPU {cpu}"
        );
    }
    // The fixture's queue IRQ 38 serves eth0's RX queue 0 on CPU1.
    assert!(m
        .series
        .iter()
        .any(|s| s.name == "nettune_irq_cpu_interrupts_total"
            && s.labels["irq"] == "38"
            && s.labels["cpu"] == "1"
            && s.labels["device"] == "eth0"));
    assert_eq!(
        m.get(
            "nettune_scrape_collector_success",
            &[("collector", "softnet")]
        ),
        Some(1.0)
    );
    // Once the next snapshot is due, the interval's findings: the UDP
    // flood of the recording overflows the socket buffers.
    std::thread::sleep(Duration::from_millis(1100));
    let (_, m) = exporter.metrics();
    assert_eq!(
        m.get(
            "nettune_finding",
            &[("id", "udp.rcvbuf-errors"), ("severity", "crit")]
        ),
        Some(1.0),
        "{:?}",
        m.series
            .iter()
            .filter(|s| s.name == "nettune_finding")
            .collect::<Vec<_>>()
    );
    // After the last snapshot it says so and keeps serving it.
    std::thread::sleep(Duration::from_millis(2500));
    let (_, last) = exporter.metrics();
    let last_ms = series["samples"][3]["unix_ms"].as_f64().expect("ms");
    assert_eq!(
        last.get("nettune_sample_timestamp_seconds", &[]),
        Some(last_ms / 1000.0)
    );
    let (code, err) = exporter.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("reached its last snapshot"), "{err}");
    assert!(err.contains("stopped ("), "{err}");
}

/// A Prometheus server on loopback with a temporary config and data dir,
/// scraping `targets` every 2 s (job `nettune`); killed by its PID when
/// dropped. A scrape may take up to the whole interval (Prometheus wants
/// the timeout no longer than the interval): on a loaded machine a debug
/// build's `--all` scrape can take more than a second.
pub(crate) struct Prometheus {
    child: Child,
    pub(crate) addr: SocketAddr,
    log: Arc<Mutex<String>>,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(targets: &[SocketAddr]) -> Prometheus {
        Prometheus::start_with(targets, "", &[])
    }

    /// Also evaluating the rule files `rules` every second.
    pub(crate) fn with_rules(targets: &[SocketAddr], rules: &[&Path]) -> Prometheus {
        Prometheus::start_with(targets, "", rules)
    }

    /// Scraping with `job` added to the job's config (YAML at the job's
    /// indentation: `scheme`, `tls_config`, `basic_auth`), and evaluating
    /// the rule files `rules`.
    pub(crate) fn start_with(targets: &[SocketAddr], job: &str, rules: &[&Path]) -> Prometheus {
        let dir = tempfile::tempdir().expect("tempdir");
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let rules: Vec<String> = rules.iter().map(|r| format!("'{}'", r.display())).collect();
        let config = format!(
            "global:\n  scrape_interval: 2s\n  scrape_timeout: 2s\n  evaluation_interval: 1s\n\
             rule_files: [{}]\n\
             scrape_configs:\n  - job_name: nettune\n{job}    static_configs:\n      - targets: [{}]\n",
            rules.join(", "),
            targets.join(", ")
        );
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).expect("write the config");
        let mut cmd = Command::new("prometheus");
        cmd.arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg("--web.listen-address=127.0.0.1:0");
        let (child, addr, log) = spawn_listening(cmd, "prometheus");
        let mut prometheus = Prometheus {
            child,
            addr,
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if TcpStream::connect(addr).is_ok() && http_get(addr, "/-/ready").0 == 200 {
                break;
            }
            let exited = prometheus.child.try_wait().expect("wait");
            if exited.is_some() || Instant::now() > deadline {
                panic!(
                    "{}\nprometheus did not become ready (exit: {exited:?})",
                    prometheus.log()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        prometheus
    }

    /// The tail of its log.
    fn log(&self) -> String {
        self.log.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// An instant query: the `data.result` array.
    pub(crate) fn query(&self, promql: &str) -> Vec<Value> {
        let (status, _, body) = http_get(
            self.addr,
            &format!("/api/v1/query?query={}", encode(promql)),
        );
        assert_eq!(status, 200, "{promql}: {body}");
        let v: Value = serde_json::from_str(&body).expect("json");
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// The scrape target (the only one) as Prometheus sees it now.
    pub(crate) fn target(&self) -> Value {
        let (status, _, body) = http_get(self.addr, "/api/v1/targets");
        assert_eq!(status, 200, "{body}");
        let targets: Value = serde_json::from_str(&body).expect("json");
        targets["data"]["activeTargets"][0].clone()
    }

    /// The target once a scrape newer than `after` (a `lastScrape` seen
    /// before; None: any) was healthy: up, no error (at most `limit`). One
    /// scrape can time out on a loaded machine; the next one is awaited.
    pub(crate) fn wait_healthy_scrape(&self, after: Option<&Value>, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let target = self.target();
            let newer = after.is_none_or(|a| target["lastScrape"] != *a);
            if newer && target["health"] == "up" && target["lastError"] == "" {
                return target;
            }
            assert!(
                Instant::now() < deadline,
                "no healthy scrape within {limit:?}; last {target}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Query until `ok` holds for the result (at most `limit`).
    pub(crate) fn wait_for(
        &self,
        promql: &str,
        limit: Duration,
        ok: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = Instant::now() + limit;
        loop {
            let result = self.query(promql);
            if ok(&result) {
                return result;
            }
            assert!(
                Instant::now() < deadline,
                "{promql} never held; last result {result:?}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Percent-encoding for a query string value.
pub(crate) fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub(crate) fn value_of(sample: &Value) -> f64 {
    sample["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

#[test]
fn prometheus_scrapes_it_and_computes_rates() {
    let _serial = measuring();
    let exporter = Exporter::start(&["--all", "--interval", "0.5"]);
    let prometheus = Prometheus::start(&[exporter.addr]);
    // Traffic on loopback meanwhile, so that softnet processes packets.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let traffic = std::thread::spawn(move || {
        let sink = std::net::UdpSocket::bind("127.0.0.1:0").expect("sink");
        let to = sink.local_addr().expect("addr");
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            for _ in 0..50 {
                let _ = socket.send_to(&[0u8; 64], to);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let limit = Duration::from_secs(60);
    let up = prometheus.wait_for("up{job=\"nettune\"}", limit, |r| {
        r.first().map(value_of) == Some(1.0)
    });
    assert_eq!(up.len(), 1);
    // Over 10 s: at least four scrapes 2 s apart, so one that timed out
    // leaves a rate.
    let rates = prometheus.wait_for("rate(node_softnet_processed_total[10s])", limit, |r| {
        r.iter().map(value_of).any(|v| v > 0.0)
    });
    assert!(rates.iter().map(value_of).all(|v| v >= 0.0), "{rates:?}");
    // The loopback interface's packets, per device, and CPU time per mode.
    let lo = prometheus.wait_for(
        "rate(node_network_receive_packets_total{device=\"lo\"}[10s])",
        limit,
        |r| r.iter().map(value_of).any(|v| v > 0.0),
    );
    assert_eq!(lo.len(), 1);
    // The scrape itself: healthy, no error (the latest scrape's series are
    // what the instant queries below read).
    let target = prometheus.wait_healthy_scrape(None, limit);
    assert_eq!(target["health"], "up", "{target}");
    let modes = prometheus.wait_for("count by (mode) (node_cpu_seconds_total)", limit, |r| {
        !r.is_empty()
    });
    assert_eq!(modes.len(), 8, "{modes:?}");
    // Every collector read its source here.
    let collectors =
        prometheus.wait_for("nettune_scrape_collector_success", limit, |r| !r.is_empty());
    assert!(
        collectors.iter().all(|c| value_of(c) == 1.0),
        "{collectors:?}"
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = traffic.join();
    drop(prometheus);
    let (code, err) = exporter.stop();
    assert_eq!(code, Some(0), "{err}");
}

/// Rules YAML without its `annotations:` maps (each line indented
/// deeper than `annotations:` belongs to it).
pub(crate) fn without_annotations(yaml: &str) -> String {
    let mut out = String::new();
    let mut inside: Option<usize> = None;
    for line in yaml.lines() {
        let indent = line.len() - line.trim_start().len();
        if let Some(depth) = inside {
            if indent > depth || line.trim().is_empty() {
                continue;
            }
            inside = None;
        }
        if line.trim() == "annotations:" {
            inside = Some(indent);
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[test]
fn slow_and_hostile_clients_do_not_stall_a_scrape() {
    // Hundreds of connections and a 1 MiB request: not beside a test that
    // measures rates.
    let _serial = measuring();
    let exporter = Exporter::start(&["--root", &fixture_arg("two-socket-smt-8q")]);
    let addr = exporter.addr;
    // 300 silent connections (more than it keeps), 20 trickling a head.
    let mut crowd: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect(addr).ok())
        .collect();
    assert!(crowd.len() >= 290);
    for c in crowd.iter_mut().take(20) {
        let _ = c.write_all(b"GET /metrics HTTP/1.1\r\nX-Slow: ");
    }
    let started = Instant::now();
    let (body, _) = exporter.metrics();
    let took = started.elapsed();
    assert!(body.contains("node_cpu_seconds_total"));
    // Not a timing claim: only that nothing waited for a deadline.
    assert!(took < Duration::from_secs(5), "a scrape took {took:?}");
    // What each kind of bad request gets.
    let mut huge = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: ".to_vec();
    huge.resize(1 << 20, b'a');
    huge.extend_from_slice(b"\r\n\r\n");
    let cases: [(&[u8], u16); 6] = [
        (&huge, 431),
        (b"GET /admin HTTP/1.1\r\nHost: x\r\n\r\n", 404),
        (b"DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 405),
        (b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", 400),
        (
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
            400,
        ),
        (b"GET /metrics\r\n\r\n", 400),
    ];
    for (request, want) in cases {
        // A large request may be cut off by the answer: the status is
        // what counts.
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let _ = s.write_all(request);
        let mut head = [0u8; 12];
        s.read_exact(&mut head).expect("a status line");
        let status = String::from_utf8_lossy(&head[9..12]).to_string();
        assert_eq!(
            status,
            want.to_string(),
            "{:?}",
            String::from_utf8_lossy(&request[..request.len().min(40)])
        );
    }
    // Still serving, and the crowd did not hold it.
    let (status, _, _) = exporter.get("/metrics");
    assert_eq!(status, 200);
    drop(crowd);
    let (code, err) = exporter.stop();
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn node_series_match_node_exporter_on_the_same_host() {
    let _serial = measuring();
    let exporter = Exporter::start(&[]);
    let mut cmd = Command::new("prometheus-node-exporter");
    cmd.arg("--web.listen-address=127.0.0.1:0");
    // It logs the address once its listener is bound: it accepts from then.
    let (node, node_addr, _log) = spawn_listening(cmd, "prometheus-node-exporter");
    let node = KillOnDrop(node);
    let (_, _, theirs) = http_get(node_addr, "/metrics");
    let (ours_text, ours) = exporter.metrics();
    drop(node);
    let theirs = parse(&theirs).expect("node_exporter's exposition");
    // Every node_ family written here is node_exporter's: same type,
    // same label names. Families it does not write: those of its newer
    // collectors, and the drop ladder's SNMP counters, which its netstat
    // collector writes under these names only when --collector.netstat.fields
    // asks for them.
    let newer = [
        "node_softirqs_functions_total",
        "node_softnet_received_rps_total",
    ];
    let ladder = |name: &str| {
        let field = name.rsplit('_').next().unwrap_or("");
        let ip = name.starts_with("node_netstat_Ip_") || name.starts_with("node_netstat_Ip6_");
        (ip && matches!(
            field,
            "InDiscards"
                | "InHdrErrors"
                | "InAddrErrors"
                | "InUnknownProtos"
                | "InNoRoutes"
                | "InTruncatedPkts"
                | "InTooBigErrors"
        )) || matches!(
            name,
            "node_netstat_TcpExt_TCPBacklogDrop" | "node_netstat_TcpExt_TCPRcvQDrop"
        )
    };
    let mut compared = 0;
    for (name, kind) in ours.types.iter().filter(|(n, _)| n.starts_with("node_")) {
        let Some(their_kind) = theirs.types.get(name) else {
            assert!(
                newer.contains(&name.as_str()) || ladder(name),
                "node_exporter has no {name}"
            );
            continue;
        };
        assert_eq!(kind, their_kind, "{name}");
        let labels = |p: &Parsed| -> std::collections::BTreeSet<Vec<String>> {
            p.series
                .iter()
                .filter(|s| &s.name == name)
                .map(|s| s.labels.keys().cloned().collect())
                .collect()
        };
        assert_eq!(labels(&ours), labels(&theirs), "{name}");
        compared += 1;
    }
    assert!(compared >= 20, "{compared} families compared:\n{ours_text}");
    // Values: the slow ones equal, within what can happen between the two
    // scrapes for the others (a second at most here).
    for s in ours.series.iter().filter(|s| s.name.starts_with("node_")) {
        let pairs: Vec<(&str, &str)> = s
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let Some(theirs) = theirs.get(&s.name, &pairs) else {
            continue; // an interface node_exporter leaves out, or a newer family
        };
        let tolerance = match s.name.as_str() {
            "node_cpu_seconds_total" => 2.0,
            "node_context_switches_total" => 1e6,
            "node_procs_running" | "node_procs_blocked" => 100.0,
            n if n.starts_with("node_netstat_Tcp_") || n.starts_with("node_netstat_Ip") => 1e5,
            n if n.starts_with("node_network_") || n.starts_with("node_softnet_processed") => 1e6,
            _ => 1e4,
        };
        assert!(
            (s.value - theirs).abs() <= tolerance,
            "{} {:?}: ours {} node_exporter's {theirs}",
            s.name,
            s.labels,
            s.value
        );
    }
    let (code, err) = exporter.stop();
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn at_most_5000_series_on_a_256_cpu_128_queue_host() {
    let _serial = measuring();
    for spread in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let host = dir.path().join("big");
        let mut make = Command::new("python3");
        make.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/make_hosts.py"))
            .args(["--big"])
            .arg(&host)
            .args(["--cpus", "256", "--queues", "128", "--samples", "2"]);
        if spread {
            make.arg("--spread-irqs");
        }
        let out = make.output().expect("python3");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let exporter = Exporter::start(&["--root", &host.display().to_string()]);
        let (body, m) = exporter.metrics();
        let n = m.series.len();
        assert!(n <= 5_000, "{n} series (spread {spread})");
        let cells = m
            .series
            .iter()
            .filter(|s| s.name == "nettune_irq_cpu_interrupts_total")
            .count();
        if spread {
            // 129 IRQs x 256 CPUs would be 33,024 cells: the matrix took
            // what the bound left.
            assert!(cells > 129 && n > 4_900, "{cells} cells, {n} series");
        } else {
            assert_eq!(cells, 129, "one CPU per IRQ");
        }
        eprintln!(
            "256 CPUs / 128 queues (spread {spread}): {n} series, {} bytes",
            body.len()
        );
    }
}

/// `--bind` is the exporter's address: with a one-shot or JSON view and no
/// `--prometheus` it is a usage error naming the missing flag, before any
/// frame is shown, not a flag silently ignored.
#[test]
fn bind_without_prometheus_is_refused_with_any_view() {
    for args in [
        &["--once", "--bind", "127.0.0.1:0"][..],
        &["--json", "--count", "1", "--bind", "127.0.0.1:0"],
        &["--text", "--once", "--bind", "127.0.0.1:0"],
    ] {
        let child = nettune()
            .arg("monitor")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let (code, out, err) = finish_bounded(child, Duration::from_secs(20));
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains("--prometheus is not given"), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(out.is_empty(), "{args:?} showed a frame: {out}");
    }
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let in_use = format!("127.0.0.1:{port}");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--prometheus", "--bind", &in_use], "already in use"),
        (
            vec!["--prometheus", "--bind", "192.0.2.1:10056"],
            "no interface here has address",
        ),
        (
            vec!["--prometheus", "--bind", "localhost:10056"],
            "numeric ADDR:PORT",
        ),
        (vec!["--bind", "127.0.0.1:0"], "--prometheus"),
        (vec!["--prometheus", "--json"], "cannot be used with"),
        (vec!["--prometheus", "--once"], "cannot be used with"),
        (vec!["--prometheus", "--interval", "0"], "--interval 1"),
        (
            vec![
                "--prometheus",
                "--bind",
                "127.0.0.1:0",
                "--iface",
                "nosuch0",
            ],
            "nosuch0",
        ),
        (
            vec![
                "--prometheus",
                "--bind",
                "127.0.0.1:0",
                "--root",
                "/nonexistent/capture",
            ],
            "/nonexistent/capture",
        ),
    ];
    for (args, want) in cases {
        let mut argv = vec!["monitor"];
        argv.extend(args.iter().copied());
        let mut child = nettune()
            .args(&argv)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        // A case that wrongly starts serving is stopped, not waited for.
        let deadline = Instant::now() + Duration::from_secs(20);
        while child.try_wait().expect("wait").is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if child.try_wait().expect("wait").is_none() {
            signal(&child, libc::SIGKILL);
        }
        let (code, _, err) = finish_bounded(child, Duration::from_secs(5));
        assert_eq!(code, Some(2), "{argv:?}: {err}");
        assert!(err.contains(want), "{argv:?}: {err}");
        assert!(!err.contains("panicked"), "{argv:?}: {err}");
    }
    // A one-snapshot capture: monitor needs a series.
    let (dir, copy) = fixture_copy("two-socket-nic-node1");
    let (code, _, err) = run(&[
        "monitor",
        "--prometheus",
        "--bind",
        "127.0.0.1:0",
        "--root",
        &copy.display().to_string(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("needs a series of two or more"), "{err}");
    drop(dir);
    drop(taken);
}

#[test]
fn serves_a_namespace_from_the_hosts_loopback() {
    if skip_unless_root("serves_a_namespace_from_the_hosts_loopback") {
        return;
    }
    // a in the watched namespace, b in another: traffic crosses the veth.
    let ns = Netns::new("prom");
    let peer = Netns::new("peer");
    let (a, b) = (unique("pa"), unique("pb"));
    ns.veth(&a, (2, 2), &b, (2, 2));
    ns.ip(&["link", "set", &b, "netns", &peer.name]);
    let net = std::process::id() % 200 + 20;
    ns.ip(&["addr", "add", &format!("10.198.{net}.1/24"), "dev", &a]);
    peer.ip(&["addr", "add", &format!("10.198.{net}.2/24"), "dev", &b]);
    peer.ip(&["link", "set", &b, "up"]);
    let exporter = Exporter::start(&["--netns", &ns.name, "--interval", "0.2"]);
    let (_, before) = exporter.metrics();
    let packets = |m: &Parsed| m.get("node_network_receive_packets_total", &[("device", &a)]);
    let first = packets(&before).expect("the namespace's interface");
    // The host's interfaces are not the namespace's.
    assert!(before
        .get("node_network_receive_packets_total", &[("device", "eth0")])
        .is_none());
    let to = format!("10.198.{net}.1:9");
    peer.inside(|| {
        let s = std::net::UdpSocket::bind("0.0.0.0:0").expect("bind");
        // One first, so that the neighbour is resolved before the rest.
        let _ = s.send_to(&[0u8; 32], &to);
        std::thread::sleep(Duration::from_millis(200));
        for _ in 0..200 {
            let _ = s.send_to(&[0u8; 32], &to);
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let (_, after) = exporter.metrics();
    let later = packets(&after).expect("still there");
    assert!(later >= first + 200.0, "{first} -> {later}");
    // Nothing listens on port 9 there: the namespace's UDP NoPorts.
    assert!(after.get("node_netstat_Udp_NoPorts", &[]).unwrap_or(0.0) >= 200.0);
    // The namespace deleted: the next reading fails, and the exporter
    // ends with exit 2 naming it (a service manager sees it).
    sh(&["ip", "netns", "del", &ns.name]);
    std::thread::sleep(Duration::from_millis(300));
    let addr = exporter.addr;
    let _ = std::panic::catch_unwind(|| http_get(addr, "/metrics"));
    let mut exporter = exporter;
    let mut child = exporter.child.take().expect("running");
    let deadline = Instant::now() + Duration::from_secs(10);
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running: {}", exporter.stderr());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(100));
    let err = exporter.stderr();
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("was deleted"), "{err}");
}
