//! contrib/prometheus and contrib/grafana, judged as their users judge
//! them: `promtool check` on the configuration and the rules, `promtool
//! test rules` on the rules' unit tests, and a real Prometheus evaluating
//! the rules and answering every query of the Grafana dashboard (its
//! variables filled in as Grafana fills them) while it scrapes a running
//! `nettune monitor --prometheus` and loopback traffic makes drops (as
//! root, drops whose reason the exporter traces).

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;
use crate::monitor_prom::{encode, http_get, value_of, Exporter, Prometheus};

fn contrib(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("contrib")
        .join(path)
}

fn promtool(args: &[&str], path: &Path) -> (i32, String) {
    let out = Command::new("promtool")
        .args(args)
        .arg(path)
        .output()
        .expect("promtool (Debian package prometheus)");
    let (code, stdout, stderr) = split(out);
    (code, stdout + &stderr)
}

#[test]
fn the_scrape_config_and_the_rules_pass_promtool_check() {
    let (code, out) = promtool(&["check", "config"], &contrib("prometheus/prometheus.yml"));
    assert_eq!(code, 0, "{out}");
    // The config names the rules file: promtool checked it too.
    assert!(out.contains("1 rule files found"), "{out}");
    let rules = contrib("prometheus/nettune-rules.yml");
    let text = std::fs::read_to_string(&rules).expect("rules");
    let count = text
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            l.starts_with("- record:") || l.starts_with("- alert:")
        })
        .count();
    let (code, out) = promtool(&["check", "rules"], &rules);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("SUCCESS: {count} rules found")),
        "{out}"
    );
    // The alerts users asked for are there.
    for alert in [
        "SoftnetDropsGrowing",
        "UdpReceiveBufferErrorsGrowing",
        "NetRxSoftirqHotspot",
        "NettuneFinding",
        "KernelDropsAtALimit",
    ] {
        assert!(text.contains(&format!("- alert: {alert}\n")), "{alert}");
    }
}

/// The unit tests beside the rules: every recording rule against numbers
/// worked out by hand, every alert firing on a flooded host only after
/// its `for`, and never on a quiet one.
#[test]
fn the_rules_pass_their_unit_tests() {
    let dir = contrib("prometheus/tests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("contrib/prometheus/tests")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for file in &files {
        let (code, out) = promtool(&["test", "rules"], file);
        assert_eq!(code, 0, "{}: {out}", file.display());
        assert!(out.contains("SUCCESS"), "{out}");
    }
    // Every rule of the file is exercised by them.
    let tests: String = files
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("test file"))
        .collect();
    let rules = std::fs::read_to_string(contrib("prometheus/nettune-rules.yml")).expect("rules");
    for line in rules.lines().map(str::trim_start) {
        let name = line
            .strip_prefix("- record: ")
            .or_else(|| line.strip_prefix("- alert: "));
        if let Some(name) = name {
            assert!(tests.contains(name), "no unit test uses {name}");
        }
    }
}

/// A bounded UDP flood on loopback at a socket that never reads: its
/// receive buffer fills and the rest count as RcvbufErrors (the udp layer
/// of the drop ladder, and monitor's udp.rcvbuf-errors finding).
struct Flood {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Flood {
    fn start() -> Flood {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let sink = UdpSocket::bind("127.0.0.1:0").expect("sink");
            let to = sink.local_addr().expect("addr");
            let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
            let deadline = Instant::now() + Duration::from_secs(120);
            while !flag.load(Ordering::Relaxed) && Instant::now() < deadline {
                for _ in 0..200 {
                    let _ = socket.send_to(&[0u8; 512], to);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            drop(sink);
        });
        Flood {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `$instance` as Grafana writes a selected value into a `=~` matcher:
/// regex metacharacters escaped, the backslash doubled for the PromQL
/// string.
fn grafana_regex(value: &str) -> String {
    value
        .chars()
        .map(|c| match c {
            '\\' | '^' | '$' | '*' | '+' | '?' | '.' | '(' | ')' | '|' | '[' | ']' | '{' | '}' => {
                format!("\\\\{c}")
            }
            c => c.to_string(),
        })
        .collect()
}

/// Grafana's variables in `expr`, replaced; longest names first, so that
/// `$__interval` does not eat the start of `$__interval_ms`.
fn fill(expr: &str, vars: &[(&str, String)]) -> String {
    let mut vars: Vec<&(&str, String)> = vars.iter().collect();
    vars.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
    let mut out = expr.to_string();
    for (name, value) in vars {
        out = out.replace(&format!("${{{name}}}"), value);
        out = out.replace(&format!("[[{name}]]"), value);
        out = out.replace(&format!("${name}"), value);
    }
    out
}

/// Every panel of the dashboard, rows' nested panels included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in dashboard["panels"].as_array().expect("panels") {
        out.push(p);
        if let Some(inner) = p["panels"].as_array() {
            out.extend(inner.iter());
        }
    }
    out
}

/// A range query over the last `secs` seconds, one point a second: the
/// `data.result` array.
fn query_range(prometheus: &Prometheus, promql: &str, secs: u64) -> Vec<Value> {
    let end = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let path = format!(
        "/api/v1/query_range?query={}&start={}&end={end}&step=1",
        encode(promql),
        end - secs
    );
    let (status, _, body) = http_get(prometheus.addr, &path);
    assert_eq!(status, 200, "{promql}: {body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

/// The numbers in a query's result (instant or range), NaN included.
fn numbers(result: &[Value]) -> Vec<f64> {
    result
        .iter()
        .flat_map(|series| {
            let points: Vec<&Value> = match series["values"].as_array() {
                Some(values) => values.iter().collect(),
                None => vec![&series["value"]],
            };
            points
                .into_iter()
                .map(|p| {
                    p[1].as_str()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(f64::NAN)
                })
                .collect::<Vec<f64>>()
        })
        .collect()
}

#[test]
fn the_dashboard_is_a_grafana_dashboard_filtered_by_its_variables() {
    let text = std::fs::read_to_string(contrib("grafana/nettune.json")).expect("dashboard");
    let d: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    assert!(d["uid"].as_str().is_some_and(|u| !u.is_empty()));
    assert!(d["schemaVersion"].as_u64().is_some());
    let vars: Vec<&str> = d["templating"]["list"]
        .as_array()
        .expect("templating")
        .iter()
        .map(|v| v["name"].as_str().expect("name"))
        .collect();
    assert_eq!(vars, ["datasource", "job", "instance"]);
    let mut ids = std::collections::BTreeSet::new();
    let mut kinds = std::collections::BTreeSet::new();
    for p in panels(&d) {
        let title = p["title"].as_str().expect("a title");
        assert!(
            ids.insert(p["id"].as_u64().expect("id")),
            "{title}: id twice"
        );
        kinds.insert(p["type"].as_str().expect("type"));
        for key in ["h", "w", "x", "y"] {
            assert!(p["gridPos"][key].as_u64().is_some(), "{title}: gridPos");
        }
        if p["type"] == "row" {
            continue;
        }
        assert!(
            p["description"].as_str().is_some_and(|s| !s.is_empty()),
            "{title}"
        );
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}");
        let mut refs = std::collections::BTreeSet::new();
        for t in targets {
            assert!(refs.insert(t["refId"].as_str().expect("refId")), "{title}");
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{title}");
            let expr = t["expr"].as_str().expect("expr");
            // Every query follows the host and job chosen above.
            assert!(
                expr.contains("instance=~\"$instance\"") && expr.contains("job=~\"$job\""),
                "{title}: {expr}"
            );
        }
    }
    // The four views asked for: the heat map of per-CPU soft%, the queue
    // x CPU matrix, the drop ladder, the findings.
    for kind in ["heatmap", "table", "bargauge", "state-timeline"] {
        assert!(kinds.contains(kind), "no {kind} panel");
    }
}

/// Whether `expr` reads the drop tracer's series, which only an exporter
/// allowed to load BPF serves.
fn reads_drop_reasons(expr: &str) -> bool {
    expr.contains("nettune_skb_drop_reason")
}

#[test]
fn every_dashboard_query_and_rule_gives_data_on_a_running_exporter() {
    let _serial = measuring();
    // As root the exporter traces the kernel's drop reasons, and the flood
    // below drops at its full socket buffer: SOCKET_RCVBUFF. Without root
    // it cannot (no CAP_BPF): the drop-reason rule and panel then have no
    // data, which is checked as such, and the skip recorded.
    let traced = is_root();
    if !traced {
        skipped(
            "every_dashboard_query_and_rule_gives_data_on_a_running_exporter (drop reasons)",
            "needs root to trace the kernel's drop reasons",
        );
    }
    let exporter = Exporter::start(&["--all", "--interval", "0.5"]);
    let rules = contrib("prometheus/nettune-rules.yml");
    let prometheus = Prometheus::with_rules(&[exporter.addr], &[&rules]);
    let flood = Flood::start();
    let limit = Duration::from_secs(60);
    let instance = exporter.addr.to_string();

    // The recording rules on the exporter's real series: drops at the UDP
    // layer, and a soft% per CPU between 0 and 1.
    let udp = prometheus.wait_for(
        "instance_layer:nettune_drops:rate5m{layer=\"udp\"}",
        limit,
        |r| r.iter().map(value_of).any(|v| v > 0.0),
    );
    assert_eq!(udp.len(), 1, "{udp:?}");
    let cpus = std::fs::read_to_string("/proc/stat")
        .expect("/proc/stat")
        .lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .count();
    let soft = prometheus.wait_for("instance_cpu:node_cpu_softirq:ratio_rate5m", limit, |r| {
        r.len() == cpus
    });
    assert!(
        soft.iter().map(value_of).all(|v| (0.0..=1.0).contains(&v)),
        "{soft:?}"
    );
    for rule in [
        "instance_cpu:node_softirqs_net_rx:rate5m",
        "instance:node_softnet_dropped:rate5m",
        "instance:nettune_udp_rcvbuf_errors:rate5m",
    ] {
        let r = prometheus.query(rule);
        assert!(!r.is_empty(), "{rule} recorded nothing");
    }
    // The kernel's reason for the flood's drops, per host, reason and layer.
    if traced {
        prometheus.wait_for(
            "instance_layer_reason:nettune_skb_drop_reason:rate5m{reason=\"SOCKET_RCVBUFF\",layer=\"udp\"}",
            limit,
            |r| r.iter().map(value_of).any(|v| v > 0.0),
        );
    } else {
        let traced = prometheus.wait_for(
            "nettune_scrape_collector_success{collector=\"drop_reasons\"}",
            limit,
            |r| !r.is_empty(),
        );
        assert_eq!(traced.iter().map(value_of).collect::<Vec<_>>(), [0.0]);
    }
    // The socket-buffer alert is pending (it fires after 5 minutes).
    prometheus.wait_for(
        "ALERTS{alertname=\"UdpReceiveBufferErrorsGrowing\",alertstate=\"pending\"}",
        limit,
        |r| !r.is_empty(),
    );
    // The exporter's finding of the flood, which the findings panels show.
    prometheus.wait_for("nettune_finding{id=\"udp.rcvbuf-errors\"}", limit, |r| {
        !r.is_empty()
    });

    // The dashboard's variables, as Grafana resolves them: the job and
    // instance lists from the label values, then $__rate_interval for a 1 s
    // scrape interval (four scrape intervals).
    let (_, _, jobs) = http_get(
        prometheus.addr,
        &format!(
            "/api/v1/label/job/values?match[]={}",
            encode("nettune_build_info")
        ),
    );
    assert!(jobs.contains("\"nettune\""), "{jobs}");
    let (_, _, instances) = http_get(
        prometheus.addr,
        &format!(
            "/api/v1/label/instance/values?match[]={}",
            encode("nettune_build_info{job=~\"nettune\"}")
        ),
    );
    assert!(instances.contains(&instance), "{instances}");
    let vars = [
        ("job", grafana_regex("nettune")),
        ("instance", grafana_regex(&instance)),
        ("__rate_interval", "4s".to_string()),
        ("__interval", "1s".to_string()),
        ("__range", "30s".to_string()),
        ("datasource", "prometheus".to_string()),
    ];
    // A rate over 4 s needs a few scrapes.
    std::thread::sleep(Duration::from_secs(5));
    let text = std::fs::read_to_string(contrib("grafana/nettune.json")).expect("dashboard");
    let d: Value = serde_json::from_str(&text).expect("json");
    let mut queries = 0;
    for p in panels(&d) {
        let title = p["title"].as_str().unwrap_or("?");
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = fill(t["expr"].as_str().expect("expr"), &vars);
            assert!(!expr.contains('$'), "{title}: a variable left in {expr}");
            let result = if t["instant"] == true {
                prometheus.query(&expr)
            } else {
                query_range(&prometheus, &expr, 20)
            };
            if !traced && reads_drop_reasons(&expr) {
                assert!(result.is_empty(), "{title}: {result:?}");
                continue;
            }
            assert!(!result.is_empty(), "{title}: no data for {expr}");
            // Values are numbers. A share of a NIC's queues is NaN while
            // the NIC receives nothing (0/0): the test sends nothing
            // through the host's NICs, so those may be idle.
            let values = numbers(&result);
            let nic_share = expr.contains(" / ")
                && (expr.contains("nettune_queue_") || expr.contains("nettune_irq_"));
            assert!(
                nic_share || values.iter().any(|v| v.is_finite()),
                "{title}: only NaN from {expr}: {result:?}"
            );
            queries += 1;
        }
    }
    assert!(queries >= 15, "{queries} queries");
    // What the panels show of the flood: the drop ladder's UDP bar and the
    // finding.
    let ladder = panels(&d)
        .into_iter()
        .find(|p| p["title"] == "Drop ladder")
        .expect("the drop ladder");
    let udp = ladder["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .find(|t| {
            t["legendFormat"]
                .as_str()
                .is_some_and(|l| l.ends_with(" UDP"))
        })
        .expect("its UDP bar");
    let result = query_range(
        &prometheus,
        &fill(udp["expr"].as_str().expect("expr"), &vars),
        10,
    );
    assert!(numbers(&result).iter().any(|v| *v > 0.0), "{result:?}");
    let now = panels(&d)
        .into_iter()
        .find(|p| p["title"] == "Findings now")
        .expect("the findings table");
    let result = prometheus.query(&fill(
        now["targets"][0]["expr"].as_str().expect("expr"),
        &vars,
    ));
    assert!(
        result
            .iter()
            .any(|s| s["metric"]["id"] == "udp.rcvbuf-errors"),
        "{result:?}"
    );
    // The drops by reason: the flood's full socket buffer, in the UDP layer.
    let reasons = panels(&d)
        .into_iter()
        .find(|p| p["title"] == "Drops by reason")
        .expect("the drops-by-reason panel");
    let result = query_range(
        &prometheus,
        &fill(reasons["targets"][0]["expr"].as_str().expect("expr"), &vars),
        10,
    );
    let flood_reason = result
        .iter()
        .find(|s| s["metric"]["reason"] == "SOCKET_RCVBUFF" && s["metric"]["layer"] == "udp");
    if traced {
        let series = flood_reason.unwrap_or_else(|| panic!("no SOCKET_RCVBUFF: {result:?}"));
        assert!(
            numbers(std::slice::from_ref(series))
                .iter()
                .any(|v| *v > 0.0),
            "{series}"
        );
    } else {
        assert!(flood_reason.is_none(), "{result:?}");
    }
    drop(flood);
    drop(prometheus);
    let (code, err) = exporter.stop();
    assert_eq!(code, Some(0), "{err}");
}
