//! The kernel's drop reasons where operators already look: the monitor's
//! ladder (`--json`), the exporter's `nettune_skb_drop_reason_total`, and
//! both without permission to trace (a note once, the counters as ever).
//! Drops are provoked in namespaces of the test's own and compared with
//! the kernel's counters of the same namespace.

use std::io::{BufRead as _, BufReader};
use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;
use crate::monitor_prom::{assert_promtool_accepts, without_annotations, Exporter};

/// The exporter as the unprivileged tests run it, after the program.
const EXPORTER: [&str; 6] = [
    "monitor",
    "--prometheus",
    "--bind",
    "127.0.0.1:0",
    "--interval",
    "0.1",
];

/// A namespace with only loopback, without IPv6 (whose neighbour
/// discovery would drop packets of its own at any time).
fn quiet_namespace(tag: &str) -> Netns {
    let ns = Netns::new(tag);
    for scope in ["all", "default"] {
        ns.exec(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{scope}.disable_ipv6=1"),
        ]);
    }
    ns
}

/// Send `n` datagrams inside `ns` to a UDP port nothing listens on.
fn to_a_closed_port(ns: &Netns, n: usize) {
    ns.inside(|| {
        let closed = UdpSocket::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr");
        let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
        for _ in 0..n {
            let _ = s.send_to(&[0u8; 32], closed);
        }
    });
}

/// The sum over NDJSON lines of a reason's count under `layer`, and of a
/// counter of that layer.
fn sums(lines: &[Value], layer: &str, reason: &str, counter: &str) -> (u64, u64) {
    let (mut traced, mut counted) = (0, 0);
    for line in lines {
        let l = line["drops"]["layers"]
            .as_array()
            .expect("layers")
            .iter()
            .find(|l| l["layer"] == layer)
            .unwrap_or_else(|| panic!("no layer {layer}: {line}"));
        for r in l["reasons"].as_array().into_iter().flatten() {
            if r["reason"] == reason {
                traced += r["count"].as_u64().expect("count");
            }
        }
        for c in l["counters"].as_array().expect("counters") {
            if c["name"] == counter {
                counted += c["count"].as_u64().expect("counter count");
            }
        }
    }
    (traced, counted)
}

#[test]
fn monitor_json_names_the_reasons_under_their_layers() {
    if skip_unless_root("monitor_json_names_the_reasons_under_their_layers") {
        return;
    }
    let ns = quiet_namespace("trv");
    let mut child = nettune()
        .args([
            "monitor",
            "--netns",
            &ns.name,
            "--json",
            "--count",
            "3",
            "--interval",
            "1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nettune monitor");
    let (tx, rx) = mpsc::channel::<String>();
    let stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // The first interval is out: the tracer is attached. The datagrams
    // fall in the next ones.
    let Ok(first) = rx.recv_timeout(Duration::from_secs(30)) else {
        let (_, _, err) = finish_bounded(child, Duration::from_secs(1));
        panic!("no line within 30 s: {err}");
    };
    to_a_closed_port(&ns, 200);
    let (code, _, err) = finish_bounded(child, Duration::from_secs(30));
    let _ = reader.join();
    // A bounded run exits 1 on findings (a busy machine's softirqs).
    assert!(matches!(code, Some(0 | 1)), "{code:?}: {err}");
    assert!(!err.contains("not traced"), "{err}");
    let mut lines = vec![first];
    lines.extend(rx.try_iter());
    assert_eq!(lines.len(), 3, "{lines:?}");
    let lines: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).expect("an NDJSON line"))
        .collect();
    for line in &lines {
        assert_eq!(line["drops"]["tracing"]["unavailable"], Value::Null);
        let layers: Vec<&str> = line["drops"]["layers"]
            .as_array()
            .expect("layers")
            .iter()
            .map(|l| l["layer"].as_str().expect("name"))
            .collect();
        assert_eq!(
            layers,
            [
                "nic",
                "softnet",
                "qdisc",
                "netfilter",
                "ip",
                "ip6",
                "udp",
                "udp6",
                "tcp",
                "other"
            ]
        );
    }
    // Every datagram once, as the reason and as the namespace's NoPorts.
    let (traced, no_ports) = sums(&lines, "udp", "NO_SOCKET", "NoPorts");
    assert_eq!((traced, no_ports), (200, 200), "{lines:?}");
    let reason = lines
        .iter()
        .flat_map(|l| l["drops"]["layers"].as_array().expect("layers").iter())
        .flat_map(|l| l["reasons"].as_array().into_iter().flatten())
        .find(|r| r["reason"] == "NO_SOCKET")
        .expect("a NO_SOCKET row");
    assert_eq!(reason["protocols"][0]["name"], "udp", "{reason}");
    assert!(
        reason["locations"][0]["name"]
            .as_str()
            .is_some_and(|at| at.contains('+')),
        "a kernel location as function+offset: {reason}"
    );
}

/// Send `n` datagrams to a closed port in `ns` between two scrapes of
/// `exporter`: the second scrape, and how much its NO_SOCKET series of the
/// UDP layer grew.
fn closed_port_drops(
    exporter: &Exporter,
    ns: &Netns,
    n: usize,
) -> (String, nettune::monitor::prom::parse::Parsed, f64) {
    let series = |p: &nettune::monitor::prom::parse::Parsed| {
        p.get(
            "nettune_skb_drop_reason_total",
            &[("reason", "NO_SOCKET"), ("layer", "udp")],
        )
        .unwrap_or(0.0)
    };
    let (_, before) = exporter.metrics();
    to_a_closed_port(ns, n);
    std::thread::sleep(Duration::from_millis(300));
    let (body, after) = exporter.metrics();
    let counted = series(&after) - series(&before);
    (body, after, counted)
}

#[test]
fn the_exporter_counts_each_reason_and_layer() {
    if skip_unless_root("the_exporter_counts_each_reason_and_layer") {
        return;
    }
    let ns = quiet_namespace("trp");
    let exporter = Exporter::start(&["--netns", &ns.name, "--interval", "0.1"]);
    let (body, after, counted) = closed_port_drops(&exporter, &ns, 150);
    assert_eq!(counted, 150.0, "{body}");
    assert_eq!(
        after.get(
            "nettune_scrape_collector_success",
            &[("collector", "drop_reasons")]
        ),
        Some(1.0)
    );
    assert_promtool_accepts(&body);
    let (code, err) = exporter.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("not traced"), "{err}");
}

#[test]
fn without_permission_to_trace_the_views_say_so_once_and_keep_their_counters() {
    if skip_unless_root("without_permission_to_trace_the_views_say_so_once_and_keep_their_counters")
    {
        return;
    }
    // An unprivileged user: nobody.
    let unprivileged = || {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_nettune"));
        cmd
    };
    let mut cmd = unprivileged();
    cmd.args(EXPORTER);
    let exporter = Exporter::spawn(cmd);
    for _ in 0..2 {
        let (body, scraped) = exporter.metrics();
        assert!(!body.contains("nettune_skb_drop_reason_total"), "{body}");
        assert_eq!(
            scraped.get(
                "nettune_scrape_collector_success",
                &[("collector", "drop_reasons")]
            ),
            Some(0.0)
        );
        assert!(
            scraped.get("node_netstat_Udp_NoPorts", &[]).is_some(),
            "the counters are served: {body}"
        );
        std::thread::sleep(Duration::from_millis(150));
    }
    let (code, err) = exporter.stop();
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(err.matches("drop reasons not traced").count(), 1, "{err}");
    assert!(err.contains("needs root"), "{err}");

    let out = unprivileged()
        .args(["monitor", "--once", "--json", "--interval", "0.2"])
        .output()
        .expect("monitor");
    let (code, stdout, stderr) = split(out);
    assert!(code == 0 || code == 1, "{code}: {stderr}");
    assert_eq!(
        stderr.matches("drop reasons not traced").count(),
        1,
        "{stderr}"
    );
    let line: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert!(line["drops"]["tracing"]["unavailable"]
        .as_str()
        .is_some_and(|why| why.contains("CAP_BPF")));
    // The ladder of counters as ever.
    assert!(line["drops"]["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .any(|l| l["layer"] == "udp" && l["counters"].as_array().is_some_and(|c| !c.is_empty())));
}

/// The capabilities the opt-in drop-in of nettune-monitor.service grants
/// (its `AmbientCapabilities=`), as setpriv names them: `+bpf,+perfmon`.
fn drop_in_capabilities() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("contrib/systemd/nettune-monitor.service.d/drop-reasons.conf");
    let text = std::fs::read_to_string(&path).expect("the drop-in");
    let granted: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("AmbientCapabilities="))
        .flat_map(str::split_whitespace)
        .map(|cap| {
            let name = cap.strip_prefix("CAP_").expect("a CAP_ name");
            format!("+{}", name.to_ascii_lowercase())
        })
        .collect();
    assert!(!granted.is_empty(), "the drop-in grants nothing");
    granted.join(",")
}

/// The packaged exporter's user (a user of its own: here nobody) holding
/// only the capabilities the drop-in grants, ambient as systemd gives
/// them, with a bounding set of those alone: it traces the kernel's drop
/// reasons and serves them (tracefs, root's only, unread: the reasons come
/// from the kernel's BTF).
#[test]
fn the_drop_in_s_capabilities_let_an_unprivileged_exporter_trace() {
    if skip_unless_root("the_drop_in_s_capabilities_let_an_unprivileged_exporter_trace") {
        return;
    }
    let caps = drop_in_capabilities();
    let ns = quiet_namespace("trc");
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg(format!("--inh-caps=-all,{caps}"))
        .arg(format!("--ambient-caps={caps}"))
        .arg(format!("--bounding-set=-all,{caps}"))
        .arg(env!("CARGO_BIN_EXE_nettune"))
        .args(EXPORTER);
    let exporter = Exporter::spawn(cmd);
    let (body, after, counted) = closed_port_drops(&exporter, &ns, 150);
    // Host-wide (the exporter cannot enter a namespace without
    // CAP_SYS_ADMIN): other drops of this host may add to the test's.
    assert!(counted >= 150.0, "{body}");
    assert_eq!(
        after.get(
            "nettune_scrape_collector_success",
            &[("collector", "drop_reasons")]
        ),
        Some(1.0),
        "{}",
        exporter.stderr()
    );
    let (code, err) = exporter.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("not traced"), "{err}");
}

#[test]
fn doctor_trace_names_a_full_socket_buffer_with_its_socket() {
    if skip_unless_root("doctor_trace_names_a_full_socket_buffer_with_its_socket") {
        return;
    }
    let ns = quiet_namespace("trd");
    // A reader that never reads, with the smallest buffer, flooded from
    // the same namespace until doctor is done.
    let sink = ns.inside(|| {
        let sink = UdpSocket::bind("127.0.0.1:0").expect("bind");
        nix::sys::socket::setsockopt(&sink, nix::sys::socket::sockopt::RcvBuf, &1).expect("rcvbuf");
        sink
    });
    let to = sink.local_addr().expect("addr");
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = {
        let done = std::sync::Arc::clone(&done);
        let path = format!("/run/netns/{}", ns.name);
        std::thread::spawn(move || {
            let file = std::fs::File::open(path).expect("netns");
            nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
            // Bounded: at most a minute.
            let end = std::time::Instant::now() + Duration::from_secs(60);
            while !done.load(std::sync::atomic::Ordering::Relaxed)
                && std::time::Instant::now() < end
            {
                for _ in 0..50 {
                    let _ = s.send_to(&[0u8; 32], to);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let out = nettune()
        .args([
            "doctor",
            "--netns",
            &ns.name,
            "--interval",
            "1",
            "--trace",
            "--json",
        ])
        .output()
        .expect("doctor");
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    flood.join().expect("flood");
    let (code, stdout, stderr) = split(out);
    assert_eq!(code, 1, "a full socket buffer is a warning: {stderr}");
    assert!(!stderr.contains("not traced"), "{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("JSON");
    let finding = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| {
            f["id"] == "drops.reason"
                && f["evidence"]
                    .as_str()
                    .is_some_and(|e| e.contains("SOCKET_RCVBUFF"))
        })
        .unwrap_or_else(|| panic!("no SOCKET_RCVBUFF finding: {stdout}"));
    let evidence = finding["evidence"].as_str().expect("evidence");
    assert!(
        evidence.contains(&format!("on udp {to}")),
        "the socket is named: {evidence}"
    );
    // The socket's own buffer as the kernel set it (SO_RCVBUF 1 is raised
    // to the kernel's floor), not a sysctl's default.
    let rcvbuf = nix::sys::socket::getsockopt(&sink, nix::sys::socket::sockopt::RcvBuf)
        .expect("getsockopt SO_RCVBUF");
    assert!(
        evidence.contains(&format!("on udp {to}: "))
            && evidence.contains(&format!(", rcvbuf {rcvbuf} (SO_RCVBUF)")),
        "the socket's rcvbuf {rcvbuf}: {evidence}"
    );
    assert!(evidence.contains("net.core.rmem_max"), "{evidence}");
    assert!(finding["fix"]
        .as_str()
        .is_some_and(|f| f.contains("SO_RCVBUF")));
    // The JSON keeps every reason and the socket's own drop count.
    let traced = report["trace"]["reasons"]
        .as_array()
        .expect("trace.reasons")
        .iter()
        .find(|r| r["reason"] == "SOCKET_RCVBUFF")
        .expect("SOCKET_RCVBUFF");
    assert!(traced["count"].as_u64().is_some_and(|n| n > 0));
    assert_eq!(
        report["trace"]["udp_sockets"][0]["socket"]["local"],
        to.to_string()
    );
    assert_eq!(
        report["trace"]["udp_sockets"][0]["socket"]["rcvbuf_bytes"],
        rcvbuf
    );

    // Asked with nothing to trace over, or on a capture: one clear line.
    let (code, _, err) = run(&["doctor", "--interval", "0", "--trace"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--trace") && err.contains("--interval"),
        "{err}"
    );
}

/// A recorded experiment whose runs of `pps` lost no SOCKET_RCVBUFF drops
/// while `current` did, re-rendered: the report ends with the reasons,
/// and says which config removed which drops.
#[test]
fn the_experiment_report_lists_last_which_config_removed_which_drops() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/experiment/results.json");
    let mut results: Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).expect("fixture")).expect("json");
    let reasons = |rcvbuf: u64| {
        serde_json::json!([
            { "reason": "SOCKET_RCVBUFF", "layer": "udp", "count": rcvbuf },
            { "reason": "NO_SOCKET", "layer": "udp", "count": 3 }
        ])
    };
    for run in results["runs"].as_array_mut().expect("runs") {
        let rcvbuf = if run["config"] == "current" {
            41_000
        } else {
            0
        };
        run["usage"]["reasons"] = reasons(rcvbuf);
    }
    for cell in results["cells"].as_array_mut().expect("cells") {
        let rcvbuf = if cell["config"] == "current" {
            41_000
        } else {
            0
        };
        cell["reasons"] = reasons(rcvbuf);
    }
    std::fs::write(
        dir.path().join("results.json"),
        serde_json::to_string(&results).expect("json"),
    )
    .expect("write");
    let d = dir.path().to_str().expect("utf-8");
    let (code, _, err) = run(&["experiment", "report", d]);
    assert_eq!(code, 0, "{err}");
    let md = std::fs::read_to_string(dir.path().join("report.md")).expect("report.md");
    let at = md
        .find("## Drops by the kernel's reason")
        .unwrap_or_else(|| panic!("no reasons section: {md}"));
    assert!(
        !md[at + 3..].contains("\n## "),
        "the reasons come last: {md}"
    );
    assert!(
        md[at..].contains("| SOCKET_RCVBUFF | UDP | 41,000 | 0 (removed) |"),
        "{md}"
    );
    assert!(md[at..].contains("| NO_SOCKET | UDP | 3 | 3 |"), "{md}");
    let html = std::fs::read_to_string(dir.path().join("report.html")).expect("report.html");
    assert!(html.contains("<td>0 (removed)</td>"), "{html}");
    // Results without reasons (not traced): no such section.
    let plain = tempfile::tempdir().expect("tempdir");
    std::fs::copy(&fixture, plain.path().join("results.json")).expect("copy");
    let (code, _, err) = run(&[
        "experiment",
        "report",
        plain.path().to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 0, "{err}");
    let md = std::fs::read_to_string(plain.path().join("report.md")).expect("report.md");
    assert!(!md.contains("kernel's reason"), "{md}");
}

/// The alert on drop reasons lives in contrib/prometheus/nettune-rules.yml,
/// where docs/monitor.md points: it names exactly the reasons nettune
/// calls limits, and fires on a limit, not on a decision.
#[test]
fn the_contrib_drop_reason_alert_fires_on_a_limit_and_not_on_a_decision() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("contrib/prometheus/nettune-rules.yml");
    let rules = std::fs::read_to_string(&path).expect("the contrib rules");
    let docs = std::fs::read_to_string(root.join("docs/monitor.md")).expect("docs/monitor.md");
    let section = &docs[docs
        .find("#### Drop reasons in PromQL")
        .expect("the section")..];
    assert!(
        section.contains("(../contrib/prometheus/nettune-rules.yml)")
            && section.contains("`KernelDropsAtALimit`"),
        "the docs point to the contrib rule"
    );
    let at = rules
        .find("- alert: KernelDropsAtALimit\n")
        .expect("the alert in the contrib rules");
    let matcher = rules[at..]
        .split("reason=~\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("its reason matcher");
    let mut named: Vec<&str> = matcher.split('|').collect();
    named.sort_unstable();
    let mut limits = nettune::trace::catalog::LIMITS.to_vec();
    limits.sort_unstable();
    assert_eq!(named, limits);

    let dir = tempfile::tempdir().expect("tempdir");
    let bare = dir.path().join("bare.yml");
    std::fs::write(&bare, without_annotations(&rules)).expect("write");
    let series = |reason: &str, layer: &str, values: &str| {
        format!(
            "      - series: 'nettune_skb_drop_reason_total{{instance=\"web1:10056\",job=\"nettune\",reason=\"{reason}\",layer=\"{layer}\"}}'\n        values: '{values}'\n"
        )
    };
    let test = format!(
        "rule_files: ['{}']\nevaluation_interval: 15s\ntests:\n  - interval: 15s\n    input_series:\n{}{}    alert_rule_test:\n      - eval_time: 8m\n        alertname: KernelDropsAtALimit\n        exp_alerts:\n          - exp_labels: {{severity: warning, instance: \"web1:10056\", job: nettune, reason: SOCKET_RCVBUFF, layer: udp}}\n",
        bare.display(),
        series("SOCKET_RCVBUFF", "udp", "0+1500x40"),
        series("NETFILTER_DROP", "netfilter", "0+1500x40"),
    );
    let file = dir.path().join("test.yml");
    std::fs::write(&file, test).expect("write");
    let (code, out, err) = split(
        Command::new("promtool")
            .args(["test", "rules"])
            .arg(&file)
            .output()
            .expect("promtool"),
    );
    assert_eq!(code, 0, "{out}{err}");
}
