//! `apply --guard`: a change that watches its own effect. On copies of the
//! fixture trees (`--root`, no privilege) the test moves the tree's
//! counters while the guard watches; in network namespaces this test
//! creates (root), a UDP flood into a sink with a tiny receive buffer
//! starts right after the change. Either way the guard must roll the
//! change back by itself and leave every value as it was, byte for byte;
//! a quiet place keeps its change; a kill while it watches leaves a state
//! that `rollback` undoes.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::bench_udp::Running;
use crate::common::*;

/// A guarded apply running in the background: its stderr lines arrive on
/// a channel (progress), its stdout is kept for the end. Killed by its
/// PID if the test ends first.
struct Guarded {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: Vec<String>,
}

impl Guarded {
    fn start(args: &[&str]) -> Guarded {
        let mut child = nettune()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nettune apply");
        let stderr = child.stderr.take().expect("stderr");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Guarded {
            child,
            lines,
            stderr: Vec::new(),
        }
    }

    /// Wait (at most `limit`) for the line saying the change is made and
    /// the guard watches it.
    fn wait_watching(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(50)) {
                let watching = line.contains("watching for");
                self.stderr.push(line);
                if watching {
                    return;
                }
            }
        }
        panic!("the guard never started watching: {:?}", self.stderr);
    }

    /// Wait for the end (at most `limit`): exit code, stdout, all stderr.
    fn finish(mut self, limit: Duration) -> (Option<i32>, String, String) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "apply --guard ran past {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stdout = String::new();
        if let Some(mut out) = self.child.stdout.take() {
            out.read_to_string(&mut stdout).expect("stdout");
        }
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
            self.stderr.push(line);
        }
        (status.code(), stdout, self.stderr.join("\n"))
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Every file of a tree by relative path (bytes), `skip` left out.
fn files(root: &Path, skip: &[&str]) -> BTreeMap<String, Vec<u8>> {
    files_under(root, &|_| true)
        .into_iter()
        .filter_map(|path| {
            let rel = path.strip_prefix(root).ok()?.display().to_string();
            if skip.contains(&rel.as_str()) {
                return None;
            }
            Some((rel, fs::read(&path).ok()?))
        })
        .collect()
}

fn assert_same(before: &BTreeMap<String, Vec<u8>>, after: &BTreeMap<String, Vec<u8>>) {
    let differ: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert!(differ.is_empty(), "differs at {differ:?}");
}

fn tree_args<'a>(tree: &'a Path, state: &'a Path, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "apply",
        "--profile",
        "pps",
        "--root",
        s(tree),
        "--state-dir",
        s(state),
    ];
    args.extend_from_slice(more);
    args
}

fn history(extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["history", "--json"];
    args.extend_from_slice(extra);
    run_json(&args).as_array().expect("array").clone()
}

/// Add `n` to a counter of the `Udp:` lines of a /proc/net/snmp file.
fn bump_udp(snmp: &Path, names: &[&str], n: u64) {
    let text = fs::read_to_string(snmp).expect("snmp");
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut header: Vec<&str> = Vec::new();
    for line in &lines {
        if line.starts_with("Udp: ")
            && line
                .split_whitespace()
                .nth(1)
                .is_some_and(|w| w.parse::<u64>().is_err())
        {
            header = line.split_whitespace().collect();
            out.push(line.to_string());
        } else if line.starts_with("Udp: ") {
            let values: Vec<String> = line
                .split_whitespace()
                .zip(&header)
                .map(|(v, name)| match v.parse::<u64>() {
                    Ok(v) if names.contains(name) => (v + n).to_string(),
                    _ => v.to_string(),
                })
                .collect();
            out.push(values.join(" "));
        } else {
            out.push(line.to_string());
        }
    }
    // Whole or not at all, as the kernel serves the file: a reader that
    // caught it truncated would see a counter gap, not the drops.
    let next = snmp.with_extension("next");
    fs::write(&next, out.join("\n") + "\n").expect("write snmp");
    fs::rename(&next, snmp).expect("replace snmp");
}

#[test]
fn a_guard_rolls_back_when_udp_drops_grow_and_restores_the_tree_byte_for_byte() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let state = dir.path().join("state");
    let snmp = tree.join("proc/net/snmp");
    let before = files(&tree, &["proc/net/snmp"]);
    let mut guarded = Guarded::start(&tree_args(
        &tree,
        &state,
        &[
            "--guard",
            "20",
            "--guard-baseline",
            "1",
            "--interval",
            "0.5",
            "--json",
        ],
    ));
    guarded.wait_watching(Duration::from_secs(30));
    assert_ne!(
        files(&tree, &["proc/net/snmp"]),
        before,
        "pps changed nothing"
    );
    // 5,000 datagrams lost at full socket buffers within one interval.
    bump_udp(&snmp, &["InErrors", "RcvbufErrors"], 5_000);
    let (code, out, err) = guarded.finish(Duration::from_secs(30));
    assert_eq!(code, Some(1), "{out}\n{err}");
    let report: Value = serde_json::from_str(&out).expect("json");
    let guard = &report["guard"];
    assert_eq!(guard["result"], "rolled_back", "{guard:#}");
    let fired: Vec<&str> = guard["fired"]
        .as_array()
        .expect("fired")
        .iter()
        .filter_map(|f| f["what"].as_str())
        .collect();
    assert!(
        fired.contains(&"UDP drops") && fired.contains(&"UDP RcvbufErrors"),
        "{fired:?}"
    );
    let udp = guard["fired"]
        .as_array()
        .expect("fired")
        .iter()
        .find(|f| f["what"] == "UDP drops")
        .expect("UDP drops");
    assert_eq!(udp["baseline_per_sec"], 0.0);
    assert_eq!(udp["limit_per_sec"], 100.0);
    assert!(udp["now_per_sec"].as_f64().expect("rate") > 100.0, "{udp}");
    assert_eq!(report["state"]["status"], "rolled_back");
    assert_same(&before, &files(&tree, &["proc/net/snmp"]));
    let states = history(&["--root", s(&tree), "--state-dir", s(&state)]);
    assert_eq!(states[0]["rolled_back"], true);
    assert!(
        states[0]["guard"]["result"]
            .as_str()
            .is_some_and(|r| r.starts_with("rolled back: UDP drops")),
        "{:#}",
        states[0]
    );
    // The same in words.
    let (code, out, _) = run(&["history", "--root", s(&tree), "--state-dir", s(&state)]);
    assert_eq!(code, 0);
    assert!(out.contains("guard rolled back: UDP drops"), "{out}");
}

#[test]
fn a_quiet_tree_keeps_its_change_and_says_the_guard_passed() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let state = dir.path().join("state");
    let (code, out, err) = run(&tree_args(
        &tree,
        &state,
        &[
            "--guard",
            "1",
            "--guard-baseline",
            "0.5",
            "--interval",
            "0.5",
        ],
    ));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("guard passed: nothing got worse"), "{out}");
    assert!(out.contains("undo with: nettune rollback 1"), "{out}");
    // Progress went to stderr while it waited.
    assert!(err.contains("measuring the baseline"), "{err}");
    let states = history(&["--root", s(&tree), "--state-dir", s(&state)]);
    assert_eq!(states[0]["status"], "complete");
    assert_eq!(states[0]["guard"]["result"], "passed");
}

#[test]
fn a_condition_that_cannot_be_read_is_refused_before_the_change() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let state = dir.path().join("state");
    // A container that hides softnet_stat.
    fs::remove_file(tree.join("proc/net/softnet_stat")).expect("remove");
    let before = files(&tree, &[]);
    let (code, _, err) = run(&tree_args(&tree, &state, &["--guard", "1"]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--guard-metric softnet needs /proc/net/softnet_stat")
            && err.contains("nothing was changed"),
        "{err}"
    );
    assert_same(&before, &files(&tree, &[]));
    assert!(history(&["--root", s(&tree), "--state-dir", s(&state)]).is_empty());
    // Without the condition it cannot read, the guard runs.
    let (code, out, err) = run(&tree_args(
        &tree,
        &state,
        &[
            "--guard",
            "0.5",
            "--interval",
            "0.5",
            "--guard-metric",
            "drops",
            "--guard-metric",
            "udp-rcvbuf",
        ],
    ));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("guard passed"), "{out}");
}

#[test]
fn a_kill_while_the_guard_watches_leaves_a_state_rollback_undoes() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let state = dir.path().join("state");
    let before = files(&tree, &[]);
    let mut guarded = Guarded::start(&tree_args(
        &tree,
        &state,
        &[
            "--guard",
            "60",
            "--guard-baseline",
            "0.5",
            "--interval",
            "0.5",
        ],
    ));
    guarded.wait_watching(Duration::from_secs(30));
    let pid = i32::try_from(guarded.child.id()).expect("pid");
    // SAFETY: a signal to the child this test started, by its PID.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let (code, _, _) = guarded.finish(Duration::from_secs(10));
    assert_eq!(code, None, "killed by a signal");
    assert_ne!(files(&tree, &[]), before, "the change was in place");

    let states = history(&["--root", s(&tree), "--state-dir", s(&state)]);
    assert_eq!(states[0]["status"], "complete");
    assert_eq!(states[0]["guard"]["result"], Value::Null);
    let (_, out, _) = run(&["history", "--root", s(&tree), "--state-dir", s(&state)]);
    assert!(out.contains("was stopped before it decided"), "{out}");
    // Nothing is stacked on a change nobody judged.
    let (code, _, err) = run(&tree_args(&tree, &state, &["--guard", "1"]));
    assert_eq!(code, 2);
    assert!(
        err.contains("guard that was stopped") && err.contains("rollback 1"),
        "{err}"
    );
    let (code, out, err) = run(&["rollback", "--root", s(&tree), "--state-dir", s(&state)]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rolled back state 1"), "{out}");
    assert_same(&before, &files(&tree, &[]));
}

#[test]
fn guard_options_are_checked_before_anything_is_read() {
    for (args, says) in [
        (
            vec![
                "apply",
                "--profile",
                "pps",
                "--netns",
                "nettune-no-such-ns",
                "--guard",
                "5",
                "--guard-metric",
                "softnet",
            ],
            "--guard-metric softnet cannot be watched in a network namespace",
        ),
        (
            vec![
                "apply",
                "--profile",
                "pps",
                "--guard",
                "0.5",
                "--interval",
                "1",
            ],
            "--guard 0.500s is shorter than one interval",
        ),
        (
            vec!["apply", "--profile", "pps", "--guard-baseline", "5"],
            "--guard <DURATION>",
        ),
        (
            vec!["apply", "--profile", "pps", "--guard", "5", "--dry-run"],
            "cannot be used with",
        ),
        (
            vec![
                "apply",
                "--profile",
                "pps",
                "--guard",
                "5",
                "--guard-metric",
                "latency",
            ],
            "invalid value 'latency'",
        ),
    ] {
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// A UDP reader at `bind` in `rx` with a 4 KiB receive buffer, for `secs`
/// seconds: quiet until a flood starts, it then loses most datagrams at
/// the socket (UDP RcvbufErrors), which a guard must see.
pub(crate) fn small_buffer_sink(rx: &Netns, bind: &str, secs: &str) -> Running {
    Running::start(crate::bench_udp::nettune(
        None,
        &[
            "bench",
            "udp-sink",
            "--netns",
            &rx.name,
            "--bind",
            bind,
            "--rcvbuf",
            "4096",
            "--duration",
            secs,
        ],
    ))
}

/// A UDP flood of 20,000 packets/s from `tx` to `to` for `secs` seconds,
/// in UDP GSO messages of 20 packets: each millisecond's 20 arrive at
/// once, as a NIC's batch does, and overflow a small socket buffer. Sent
/// as single packets every 100 us (the pacer's step), a reader with its
/// CPU takes nearly all of them in time and the drops stay below what a
/// guard counts as worse.
pub(crate) fn udp_flood(tx: &Netns, to: &str, secs: &str) -> Running {
    Running::start(crate::bench_udp::nettune(
        None,
        &[
            "bench",
            "udp-flood",
            "--netns",
            &tx.name,
            "--to",
            to,
            "--rate",
            "20000",
            "--gso",
            "20",
            "--duration",
            secs,
        ],
    ))
}

/// The values of a namespace a plan may change, as the kernel shows them:
/// every queue file of RPS/XPS and every networking sysctl (byte queue
/// limits, which move with traffic, left out).
fn namespace_values(ns: &Netns) -> String {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &ns.name, "sh", "-c"])
        .arg(
            "grep -r . /sys/class/net/*/queues/*/rps_cpus /sys/class/net/*/queues/*/rps_flow_cnt \
             /sys/class/net/*/queues/*/xps_cpus /sys/class/net/*/queues/*/xps_rxqs \
             /proc/sys/net/core /proc/sys/net/ipv4 2>/dev/null",
        )
        .output()
        .expect("read the namespace");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_guard_in_a_namespace_rolls_back_when_a_flood_starts_losing_packets() {
    if skip_unless_root("a_guard_in_a_namespace_rolls_back_when_a_flood_starts_losing_packets") {
        return;
    }
    let _measuring = measuring();
    let tx = Netns::new("gtx");
    let rx = Netns::new("grx");
    let (_, b) = veth_pair(&tx, &rx, 83, Some(2));
    rx.wait_up(&[&b]);
    let state = tempfile::tempdir().expect("state dir");
    let plan_file = state.path().join("pps.json");
    let planned = run_json(&["plan", "--profile", "pps", "--netns", &rx.name, "--json"]);
    assert!(
        !planned["changes"].as_array().expect("changes").is_empty(),
        "pps changes nothing in {}",
        rx.name
    );
    fs::write(&plan_file, planned.to_string()).expect("save the plan");
    let before = namespace_values(&rx);

    // A reader with a tiny receive buffer, quiet until the flood starts.
    let sink = small_buffer_sink(&rx, "10.83.0.2:0", "40");
    let to = sink.bound_addr();
    let mut guarded = Guarded::start(&[
        "apply",
        "--plan",
        s(&plan_file),
        "--netns",
        &rx.name,
        "--state-dir",
        s(state.path()),
        "--guard",
        "20",
        "--guard-baseline",
        "2",
        "--json",
    ]);
    guarded.wait_watching(Duration::from_secs(30));
    let changed = namespace_values(&rx);
    assert_ne!(changed, before, "the plan changed nothing");
    let flood_start = Instant::now();
    let flood = udp_flood(&tx, &to, "5");
    let (code, out, err) = guarded.finish(Duration::from_secs(40));
    let restored_after = flood_start.elapsed();
    drop(flood);
    drop(sink);
    assert_eq!(code, Some(1), "{out}\n{err}");
    let report: Value = serde_json::from_str(&out).expect("json");
    let guard = &report["guard"];
    assert_eq!(guard["result"], "rolled_back", "{guard:#}");
    assert_eq!(guard["namespace"], true);
    assert!(
        guard["metrics"]
            .as_array()
            .expect("metrics")
            .iter()
            .all(|m| m != "softnet"),
        "{guard:#}"
    );
    assert_eq!(
        guard["not_attributed"].as_array().expect("list").len(),
        2,
        "{guard:#}"
    );
    assert!(
        guard["fired"]
            .as_array()
            .expect("fired")
            .iter()
            .any(|f| f["what"] == "UDP drops" || f["what"] == "UDP RcvbufErrors"),
        "{guard:#}"
    );
    assert_eq!(namespace_values(&rx), before, "not restored byte for byte");
    eprintln!(
        "guard: flood start to restored {:.2} s (interval {} s; fired {} s, restored {} s \
         after the change)",
        restored_after.as_secs_f64(),
        guard["interval_secs"],
        guard["fired_after_secs"],
        guard["restored_after_secs"]
    );
}

#[test]
fn the_pps_profile_on_a_quiet_namespace_stays() {
    if skip_unless_root("the_pps_profile_on_a_quiet_namespace_stays") {
        return;
    }
    let ns = Netns::new("gquiet");
    let (a, b) = (unique("gqa"), unique("gqb"));
    ns.veth(&a, (2, 2), &b, (2, 2));
    ns.wait_up(&[&a, &b]);
    let state = tempfile::tempdir().expect("state dir");
    let dir = s(state.path());
    let mut args = apply_args("pps", &ns.name, dir);
    args.extend(["--guard", "2", "--guard-baseline", "1", "--json"]);
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(report["guard"]["result"], "passed", "{report:#}");
    assert_eq!(report["state"]["status"], "complete");
    let states = history(&["--state-dir", dir]);
    assert_eq!(states[0]["guard"]["result"], "passed");
    let (code, _, err) = run(&["rollback", "--state-dir", dir]);
    assert_eq!(code, 0, "{err}");
}
