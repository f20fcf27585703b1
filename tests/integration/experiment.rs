//! `nettune experiment` and `nettune testbed`: a matrix on a testbed that
//! restores every tuned value byte for byte; a kill -9 in the middle of a
//! config, then `rollback`; bad input refused with exit 2 and nothing
//! changed; the report rendered by headless Chromium. Runs are 1 s long
//! (two CPUs shared with other work). The testbed tests need root.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

/// A testbed made by `nettune testbed up`, removed on drop.
struct Bed {
    name: String,
    server_ns: String,
    client_ns: String,
}

impl Bed {
    fn up() -> Bed {
        let name = unique("ntbt");
        let v = run_json(&["testbed", "up", "--name", &name, "--queues", "2", "--json"]);
        Bed {
            name: v["name"].as_str().expect("name").to_string(),
            server_ns: v["server"]["netns"].as_str().expect("server").to_string(),
            client_ns: v["client"]["netns"].as_str().expect("client").to_string(),
        }
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = nettune().args(["testbed", "down", &self.name]).output();
    }
}

/// What tuning may change in the server namespace: the server interface's
/// queues and every sysctl, as `inspect --json` prints them.
fn tuned_parts(ns: &str) -> String {
    tuned_parts_of(ns, "tb-server")
}

/// The queues of `iface` and every sysctl of namespace `ns`.
fn tuned_parts_of(ns: &str, name: &str) -> String {
    let host = run_json(&["inspect", "--netns", ns, "--all", "--json"]);
    let iface = host["interfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .find(|i| i["name"] == name)
        .cloned()
        .expect("the interface");
    let parts = serde_json::json!({
        "rx_queues": iface["rx_queues"],
        "tx_queues": iface["tx_queues"],
        "sysctls": host["sysctls"],
    });
    serde_json::to_string_pretty(&parts).expect("json")
}

fn state_dir() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state").display().to_string();
    (dir, path)
}

fn journals(state: &str) -> Vec<Value> {
    let Ok(entries) = std::fs::read_dir(state) else {
        return Vec::new();
    };
    let mut out: Vec<Value> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("state-"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|t| serde_json::from_str(&t).ok())
        .collect();
    out.sort_by_key(|j| j["id"].as_u64());
    out
}

/// What a root test of a run on the testbed starts with: the measuring
/// lock, a testbed, the server side's tuned parts before, a work
/// directory. `None` (the skip recorded) when not root.
struct Setup {
    _guard: std::sync::MutexGuard<'static, ()>,
    bed: Bed,
    before: String,
    work: tempfile::TempDir,
}

fn setup(test: &str) -> Option<Setup> {
    if skip_unless_root(test) {
        return None;
    }
    let guard = measuring();
    let bed = Bed::up();
    let before = tuned_parts(&bed.server_ns);
    Some(Setup {
        _guard: guard,
        bed,
        before,
        work: tempfile::tempdir().expect("tempdir"),
    })
}

/// `nettune experiment run ARGS --out OUT --state-dir STATE`, its output
/// piped.
pub fn experiment_run(args: &[&str], out: &Path, state: &Path) -> Command {
    let mut cmd = nettune();
    cmd.args(["experiment", "run"])
        .args(args)
        .arg("--out")
        .arg(out)
        .arg("--state-dir")
        .arg(state)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

#[test]
fn a_matrix_on_the_testbed_restores_every_tuned_value() {
    let Some(Setup {
        _guard,
        bed,
        before,
        work,
    }) = setup("a_matrix_on_the_testbed_restores_every_tuned_value")
    else {
        return;
    };
    let out = work.path().join("exp");
    let state = work.path().join("state");
    let child = experiment_run(
        &[
            "--testbed",
            &bed.name,
            "--configs",
            "current,pps,latency",
            "--bench",
            "udp-flood --flows 4",
            "--bench",
            "rr --proto tcp --instances 4",
            "--server-pin",
            "1",
            "--repeat",
            "2",
            "--duration",
            "1s",
            "--warmup",
            "0.2s",
            "--seed",
            "7",
        ],
        &out,
        &state,
    )
    .spawn()
    .expect("experiment");
    let (code, stdout, stderr) = finish_bounded(child, Duration::from_secs(120));
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert_eq!(tuned_parts(&bed.server_ns), before, "values not restored");
    let results: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("results.json")).expect("results.json"),
    )
    .expect("json");
    assert_eq!(results["complete"], true);
    // The seed is a string: one from the clock is past 2^53, where jq
    // loses digits of a number.
    assert_eq!(results["settings"]["seed"], "7");
    assert_eq!(results["schema_version"], 2);
    assert_eq!(results["runs"].as_array().map(Vec::len), Some(12));
    assert_eq!(results["cells"].as_array().map(Vec::len), Some(6));
    // Rounds are interleaved: every config ran in round 1 before round 2.
    let rounds: Vec<u64> = results["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["round"].as_u64())
        .collect();
    assert_eq!(rounds, [1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2]);
    // pps changed something in the namespace, and every state was rolled back.
    let pps = results["configs"]
        .as_array()
        .expect("configs")
        .iter()
        .find(|c| c["name"] == "pps")
        .expect("pps");
    assert!(
        !pps["changes"].as_array().expect("changes").is_empty(),
        "{pps}"
    );
    let states = journals(&state.display().to_string());
    assert!(!states.is_empty());
    for j in &states {
        assert_eq!(j["status"], "rolled_back", "{j}");
        assert_eq!(j["netns"].as_str(), Some(bed.server_ns.as_str()));
    }
    for file in [
        "report.md",
        "report.html",
        "bench-1.svg",
        "bench-2.svg",
        "soft-1.svg",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let md = std::fs::read_to_string(out.join("report.md")).expect("md");
    assert!(md.contains("| pps |") && md.contains("%soft"), "{md}");
    assert!(stdout.contains("overhead"), "{stdout}");
}

#[test]
fn settings_configs_change_host_wide_values_only_when_allowed_and_restore_them() {
    let Some(Setup {
        _guard,
        bed,
        before,
        work,
    }) = setup("settings_configs_change_host_wide_values_only_when_allowed")
    else {
        return;
    };
    let table = "/proc/sys/net/core/rps_sock_flow_entries";
    let host_before = std::fs::read_to_string(table).expect("host table");
    let out = work.path().join("exp");
    let state = work.path().join("state");
    let experiment = |allow_host: bool| {
        let mut cmd = experiment_run(
            &[
                "--testbed",
                &bed.name,
                "--configs",
                "current,rps=app,rps=all+rfs=on",
                "--bench",
                "udp-flood --flows 4",
                "--server-pin",
                "1",
                "--repeat",
                "1",
                "--duration",
                "1s",
                "--warmup",
                "0",
            ],
            &out,
            &state,
        );
        if allow_host {
            cmd.arg("--allow-host");
        }
        finish_bounded(cmd.spawn().expect("experiment"), Duration::from_secs(60))
    };
    if host_before.trim() == "0" {
        let (code, _, stderr) = experiment(false);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains("--allow-host"), "{stderr}");
        assert!(!out.exists());
    }
    let (code, stdout, stderr) = experiment(true);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        std::fs::read_to_string(table).expect("host table"),
        host_before
    );
    assert_eq!(tuned_parts(&bed.server_ns), before);
    let results: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("results.json")).expect("results.json"),
    )
    .expect("json");
    let changed = |name: &str| -> Vec<String> {
        results["configs"]
            .as_array()
            .expect("configs")
            .iter()
            .find(|c| c["name"] == name)
            .expect("config")["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .map(|c| {
                format!(
                    "{}={}",
                    c["target"].as_str().unwrap_or(""),
                    c["to"].as_str().unwrap_or("")
                )
            })
            .collect()
    };
    // rps=app steers to the server's CPU (1: mask 2) on both RX queues.
    let app = changed("rps=app");
    assert!(
        app.iter().all(|c| c.ends_with("rps_cpus=2")) && app.len() == 2,
        "{app:?}"
    );
    let rfs = changed("rps=all+rfs=on");
    assert!(
        rfs.iter().any(|c| c.ends_with("rps_flow_cnt=16384")),
        "{rfs:?}"
    );
    if host_before.trim() == "0" {
        assert!(rfs.contains(&format!("{table}=32768")), "{rfs:?}");
        // Journaled as the host's, and rolled back.
        assert!(journals(&state.display().to_string())
            .iter()
            .any(|j| j["netns"].is_null() && j["status"] == "rolled_back"));
    }
}

/// `--remote`: the server sides come from `nettune serve` in the testbed's
/// server namespace; the client namespace is tuned and restored.
#[test]
fn remote_server_sides_come_from_nettune_serve() {
    if skip_unless_root("remote_server_sides_come_from_nettune_serve") {
        return;
    }
    let _guard = measuring();
    let bed = Bed::up();
    let work = tempfile::tempdir().expect("tempdir");
    let token = work.path().join("token");
    std::fs::write(&token, "0123456789abcdef0123456789abcdef\n").expect("token");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    // `ip netns exec` execs nettune in place: the PID is the daemon's, and
    // the guard kills it by that PID (and waits) also when an assertion
    // below fails.
    let daemon = ServerChild::spawn(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &bed.server_ns,
                env!("CARGO_BIN_EXE_nettune"),
            ])
            .args(["serve", "--bind", "198.18.0.1:0", "--token-file"])
            .arg(&token)
            .stderr(Stdio::null()),
    );
    let line = daemon.addr.clone();
    let before = tuned_parts_of(&bed.client_ns, "tb-client");
    let out = work.path().join("exp");
    let state = work.path().join("state");
    let token_file = token.display().to_string();
    let child = experiment_run(
        &[
            "--remote",
            line.trim(),
            "--token-file",
            &token_file,
            "--netns",
            &bed.client_ns,
            "--client-netns",
            &bed.client_ns,
            "--iface",
            "tb-client",
            "--configs",
            "current,xps=per-queue",
            "--bench",
            "udp-flood --flows 4",
            "--bench",
            "rr --proto tcp --instances 4",
            "--repeat",
            "1",
            "--duration",
            "1s",
            "--warmup",
            "0",
        ],
        &out,
        &state,
    )
    .spawn()
    .expect("experiment");
    let (code, stdout, stderr) = finish_bounded(child, Duration::from_secs(60));
    drop(daemon);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert_eq!(tuned_parts_of(&bed.client_ns, "tb-client"), before);
    let results: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("results.json")).expect("results.json"),
    )
    .expect("json");
    assert_eq!(results["settings"]["remote"].as_str(), Some(line.trim()));
    let xps = &results["configs"][1];
    assert!(
        !xps["changes"].as_array().expect("changes").is_empty(),
        "{xps}"
    );
    for run in results["runs"].as_array().expect("runs") {
        assert!(run["value"].as_f64().is_some_and(|v| v > 0.0), "{run}");
    }
}

/// Wait until a journal of `state` says `status`; false on timeout.
fn wait_for_state(state: &str, status: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if journals(state).iter().any(|j| j["status"] == status) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn kill_9_in_a_config_then_rollback_restores_and_blocks_the_next_experiment_until_then() {
    let Some(Setup {
        _guard,
        bed,
        before,
        work,
    }) = setup("kill_9_in_a_config_then_rollback_restores")
    else {
        return;
    };
    let (_dir, state) = state_dir();
    let experiment = |out: &Path| {
        experiment_run(
            &[
                "--testbed",
                &bed.name,
                "--configs",
                "pps",
                "--bench",
                "rr --proto udp --instances 2",
                "--repeat",
                "3",
                "--duration",
                "3s",
                "--warmup",
                "0",
            ],
            out,
            Path::new(&state),
        )
    };
    let mut child = experiment(&work.path().join("a"))
        .spawn()
        .expect("experiment");
    let applied = wait_for_state(&state, "complete", Duration::from_secs(30));
    // SIGKILL by PID: nothing of the experiment runs after this.
    let _ = child.kill();
    let _ = child.wait();
    assert!(applied, "pps was never applied");
    assert_ne!(
        tuned_parts(&bed.server_ns),
        before,
        "pps left nothing to restore"
    );
    // The next experiment on the same namespace refuses to start.
    let (code, _, stderr) = split(experiment(&work.path().join("b")).output().expect("second"));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("nettune rollback") && stderr.contains("nothing was changed"),
        "{stderr}"
    );
    assert!(
        !work.path().join("b").exists(),
        "the refused run made its report directory"
    );
    let (code, _, stderr) = run(&["rollback", "--state-dir", &state]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        tuned_parts(&bed.server_ns),
        before,
        "rollback did not restore"
    );
}

#[test]
fn a_testbed_is_made_with_its_queues_and_addresses_and_a_name_in_use_is_refused() {
    if skip_unless_root("a_testbed_is_made_with_its_queues_and_addresses") {
        return;
    }
    let bed = Bed::up();
    let out = sh(&[
        "ip",
        "-n",
        &bed.server_ns,
        "-d",
        "-o",
        "link",
        "show",
        "tb-server",
    ]);
    assert!(
        out.contains("numrxqueues 2") && out.contains("state UP"),
        "{out}"
    );
    let addr = sh(&[
        "ip",
        "-n",
        &bed.client_ns,
        "-o",
        "addr",
        "show",
        "tb-client",
    ]);
    assert!(addr.contains("198.18.0.2/30"), "{addr}");
    let (code, _, stderr) = run(&["testbed", "up", "--name", &bed.name]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("in use") && stderr.contains("nothing was changed"),
        "{stderr}"
    );
    // The testbed is still whole.
    let again = sh(&[
        "ip",
        "-n",
        &bed.server_ns,
        "-o",
        "addr",
        "show",
        "tb-server",
    ]);
    assert!(again.contains("198.18.0.1/30"), "{again}");
}

/// `testbed up --name lab` is undone by `testbed down --name lab`, as by
/// `testbed down lab`: both spellings of the name on both verbs.
#[test]
fn a_testbed_made_with_name_is_removed_with_name() {
    if skip_unless_root("a_testbed_made_with_name_is_removed_with_name") {
        return;
    }
    for down in [&["--name"][..], &[]] {
        let bed = Bed::up();
        let (code, out, stderr) = run(&[&["testbed", "down"][..], down, &[&bed.name]].concat());
        assert_eq!(code, 0, "{down:?}: {stderr}");
        assert!(out.contains(&bed.name), "{out}");
        let left = sh(&["ip", "netns", "list"]);
        assert!(
            !left.contains(&bed.server_ns) && !left.contains(&bed.client_ns),
            "{down:?}: {left}"
        );
    }
    let (code, _, stderr) = run(&["testbed", "down", "--name", "a", "b"]);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn bad_input_is_one_clear_error_with_exit_2_and_nothing_changed() {
    let work = tempfile::tempdir().expect("tempdir");
    let out = work.path().join("exp");
    let out = out.to_str().expect("utf8");
    let base = |configs: &str, bench: &str, repeat: &str| {
        vec![
            "experiment".to_string(),
            "run".to_string(),
            "--configs".to_string(),
            configs.to_string(),
            "--bench".to_string(),
            bench.to_string(),
            "--repeat".to_string(),
            repeat.to_string(),
            "--out".to_string(),
            out.to_string(),
        ]
    };
    for (args, says) in [
        (
            base("current,fastest", "rr --proto tcp", "3"),
            "unknown config 'fastest'",
        ),
        (
            base("current,pps", "rr --proto tcp --instances lots", "3"),
            "'lots'",
        ),
        (
            base("current,pps", "rr --proto tcp --to 127.0.0.1:9", "3"),
            "own target",
        ),
        (base("current,pps", "rr --proto tcp", "0"), "--repeat"),
        (
            base("current,pps,current", "rr --proto tcp", "3"),
            "given twice",
        ),
    ] {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, stderr) = run(&refs);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(
            !Path::new(out).exists(),
            "{args:?} made the report directory"
        );
    }
}

/// An empty or blank config list (or bench line) is a one-line error with
/// exit 2, before anything is made or applied: no report directory, no
/// journal.
#[test]
fn an_empty_config_or_bench_list_is_refused_with_nothing_applied() {
    let work = tempfile::tempdir().expect("tempdir");
    let (out, state) = (work.path().join("exp"), work.path().join("state"));
    for (configs, bench, says) in [
        ("", "rr --proto tcp", "--configs '' names no config"),
        (" ", "rr --proto tcp", "names no config"),
        (",", "rr --proto tcp", "names no config"),
        ("current", "", "--bench ''"),
        ("current", "  ", "--bench '  '"),
    ] {
        let child = experiment_run(
            &["--configs", configs, "--bench", bench, "--repeat", "1"],
            &out,
            &state,
        )
        .spawn()
        .expect("spawn");
        let (code, stdout, stderr) = crate::common::finish_bounded(child, Duration::from_secs(20));
        assert_eq!(code, Some(2), "{configs:?} {bench:?}: {stderr}{stdout}");
        assert!(stderr.contains(says), "{configs:?} {bench:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(!out.exists(), "{configs:?} made the report directory");
        assert!(!state.exists(), "{configs:?} touched the state directory");
    }
}

/// `experiment run --configs current,PLAN` on the testbed with `plan` as
/// the plan file: refused with exit 2 and one line holding `says`, before
/// anything runs or changes (no report, no journal, the server side's
/// tuned parts as they were).
fn assert_plan_config_refused(bed: &Bed, plan: &Value, says: &[&str]) {
    let before = tuned_parts(&bed.server_ns);
    let work = tempfile::tempdir().expect("tempdir");
    let file = work.path().join("plan.json");
    std::fs::write(&file, plan.to_string()).expect("write");
    let out = work.path().join("exp");
    let state = work.path().join("state");
    let configs = format!("current,{}", file.display());
    let (code, _, stderr) = split(
        experiment_run(
            &[
                "--testbed",
                &bed.name,
                "--configs",
                &configs,
                "--bench",
                "udp-flood",
                "--duration",
                "1s",
            ],
            &out,
            &state,
        )
        .output()
        .expect("experiment"),
    );
    assert_eq!(code, 2, "{stderr}");
    for w in says.iter().chain(&["nothing was changed"]) {
        assert!(stderr.contains(w), "no '{w}' in: {stderr}");
    }
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(!out.exists());
    assert!(journals(&state.display().to_string()).is_empty());
    assert_eq!(tuned_parts(&bed.server_ns), before);
}

#[test]
fn a_plan_for_another_host_is_refused_before_anything_changes() {
    if skip_unless_root("a_plan_for_another_host_is_refused_before_anything_changes") {
        return;
    }
    let bed = Bed::up();
    let plan = serde_json::json!({
        "profile": "custom", "cpus": [0], "interfaces": ["tb-server"],
        "changes": [{"target": "/sys/class/net/tb-server/queues/rx-0/rps_cpus",
                     "from": "0", "to": "1", "reason": "test", "group": "tb-server"}],
        "skipped": [],
        "made_for": {"machine_id": "00000000000000000000000000000000",
                     "hostname": "elsewhere", "netns": bed.server_ns, "root": null}
    });
    assert_plan_config_refused(&bed, &plan, &["host elsewhere"]);
}

/// A saved plan config passes the gate of `apply --plan`: made for this
/// very namespace, it still may change only what a profile could (a
/// change of vm.swappiness to the value it has is refused), before
/// anything runs or changes.
#[test]
fn a_plan_config_may_change_only_what_a_profile_could() {
    if skip_unless_root("a_plan_config_may_change_only_what_a_profile_could") {
        return;
    }
    let bed = Bed::up();
    let mut plan = run_json(&[
        "plan",
        "--profile",
        "pps",
        "--netns",
        &bed.server_ns,
        "--json",
    ]);
    let swappiness = std::fs::read_to_string("/proc/sys/vm/swappiness").expect("swappiness");
    let swappiness = swappiness.trim();
    plan["changes"]
        .as_array_mut()
        .expect("changes")
        .push(serde_json::json!({
            "target": "/proc/sys/vm/swappiness", "from": swappiness, "to": swappiness,
            "reason": "edited", "group": "kernel",
        }));
    let says = "/proc/sys/vm/swappiness: no nettune profile changes this sysctl";
    assert_plan_config_refused(&bed, &plan, &[says]);
}

/// A plan saved on one tree and refused on another (another place) or
/// after a value it changes moved; applied where it was made.
#[test]
fn a_saved_plan_is_refused_elsewhere_or_when_its_from_values_moved() {
    let (_a_dir, a) = fixture_copy("two-socket-nic-node1");
    let (_b_dir, b) = fixture_copy("two-socket-nic-node1");
    let a = a.to_str().expect("utf8").to_string();
    let b = b.to_str().expect("utf8").to_string();
    let plan = run_json(&["plan", "--profile", "pps", "--root", &a, "--json"]);
    assert!(plan["made_for"]["root"].is_string(), "{plan}");
    let change = plan["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .find(|c| {
            c["target"]
                .as_str()
                .is_some_and(|t| t.ends_with("rps_cpus"))
        })
        .cloned()
        .expect("an rps change");
    let work = tempfile::tempdir().expect("tempdir");
    let file = work.path().join("plan.json");
    std::fs::write(&file, serde_json::to_string(&plan).expect("json")).expect("write");
    let file = file.to_str().expect("utf8");
    // Another tree: refused, nothing changed there.
    let (code, _, stderr) = run(&["apply", "--plan", file, "--root", &b]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("made for tree"), "{stderr}");
    assert!(!Path::new(&b).join("var/lib/nettune").exists());
    // A value it changes moved since: refused.
    let target = change["target"].as_str().expect("target");
    let path = PathBuf::from(&a).join(target.trim_start_matches('/'));
    let original = std::fs::read_to_string(&path).expect("read");
    std::fs::write(&path, "ff\n").expect("write");
    let (code, _, stderr) = run(&["apply", "--plan", file, "--root", &a]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("changed since it was made"), "{stderr}");
    // Back as it was: applied, and rolled back exactly.
    std::fs::write(&path, &original).expect("write");
    let (code, stdout, stderr) = run(&["apply", "--plan", file, "--root", &a]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("applied profile pps"), "{stdout}");
    assert_eq!(run(&["rollback", "--root", &a]).0, 0);
    assert_eq!(std::fs::read_to_string(&path).expect("read"), original);
}

fn fixture_results() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/experiment/results.json")
}

#[test]
fn the_report_renders_in_headless_chromium() {
    let Some(chromium) = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok())
    else {
        skipped(
            "the_report_renders_in_headless_chromium",
            "chromium is not installed",
        );
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(fixture_results(), dir.path().join("results.json")).expect("copy");
    let d = dir.path().to_str().expect("utf8");
    let (code, _, stderr) = run(&["experiment", "report", d]);
    assert_eq!(code, 0, "{stderr}");
    let page = dir.path().join("report.html");
    let shot = dir.path().join("shot.png");
    let profile = dir.path().join("profile");
    let url = format!("file://{}", page.display());
    let browse = |extra: &[String]| {
        let child = Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("--window-size=1200,2000")
            .args(extra)
            .arg(&url)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("chromium");
        finish_bounded(child, Duration::from_secs(60))
    };
    let (code, dom, stderr) = browse(&["--dump-dom".to_string()]);
    assert_eq!(code, Some(0), "{stderr}");
    // The browser parsed the charts as SVG elements, with their text.
    assert!(dom.matches("<svg").count() >= 3, "{dom}");
    assert!(
        dom.contains("packets/s") && dom.contains("%soft per CPU"),
        "{dom}"
    );
    let (code, _, stderr) = browse(&[format!("--screenshot={}", shot.display())]);
    assert_eq!(code, Some(0), "{stderr}");
    let png = std::fs::read(&shot).expect("screenshot");
    assert_eq!(&png[1..4], b"PNG");
    // A blank 1200x2000 page compresses to a few kilobytes; charts and
    // tables do not.
    assert!(png.len() > 40_000, "screenshot of {} bytes", png.len());
}

#[test]
fn compare_diffs_two_result_directories() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    std::fs::create_dir_all(&a).expect("a");
    std::fs::create_dir_all(&b).expect("b");
    std::fs::copy(fixture_results(), a.join("results.json")).expect("copy a");
    // B: every udp-flood run 20% faster.
    let mut results: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture_results()).expect("read"))
            .expect("json");
    for r in results["runs"].as_array_mut().expect("runs") {
        if r["bench"]
            .as_str()
            .is_some_and(|b| b.starts_with("udp-flood"))
        {
            let v = r["value"].as_f64().expect("value");
            r["value"] = serde_json::json!(v * 1.2);
        }
    }
    std::fs::write(b.join("results.json"), results.to_string()).expect("write b");
    let v = run_json(&[
        "experiment",
        "compare",
        a.to_str().expect("utf8"),
        b.to_str().expect("utf8"),
        "--json",
    ]);
    for cell in v["cells"].as_array().expect("cells") {
        let ratio = cell["comparison"]["ratio"].as_f64().expect("ratio");
        if cell["bench"]
            .as_str()
            .is_some_and(|b| b.starts_with("udp-flood"))
        {
            assert!((ratio - 1.2).abs() < 1e-9, "{cell}");
            // Better, unless the fixture's runs spread too much to tell
            // (then it says so).
            let verdict = &cell["comparison"]["verdict"];
            assert!(
                verdict == "better" || !cell["comparison"]["warning"].is_null(),
                "{cell}"
            );
        } else {
            assert!((ratio - 1.0).abs() < 1e-9, "{cell}");
            assert_eq!(cell["comparison"]["verdict"], "no_difference", "{cell}");
        }
    }
}
