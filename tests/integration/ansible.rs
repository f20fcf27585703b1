//! contrib/ansible: the `nettune.tune` collection driven by a real
//! `ansible-playbook` (Debian package ansible-core) against an inventory of
//! three hosts that are network namespaces this test creates (connection
//! local, a namespace and a state directory per host, the nettune under
//! test by path). What an operator would check: the first run changes
//! every namespace to the profile, the second changes nothing, check mode
//! changes nothing, rollback restores every namespace byte for byte, a
//! guard that fires on the first host of a `serial: 1` rollout stops the
//! play there, and the collect playbook gives `nettune fleet report` one
//! doctor report per host. Every run is bounded in time; namespaces are
//! deleted, and child processes killed by PID, also when a check fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;

/// The longest a playbook run may take: three hosts one after another,
/// each with a guard of a few seconds, on a busy machine.
const PLAYBOOK_LIMIT: Duration = Duration::from_secs(240);

const BIN: &str = env!("CARGO_BIN_EXE_nettune");

/// Whether ansible-playbook runs here; records the skip when it does not.
fn ansible_present(test: &str) -> bool {
    let found = Command::new("ansible-playbook")
        .arg("--version")
        .env("LC_ALL", "C.UTF-8")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        skipped(
            test,
            "needs ansible-playbook (Debian package ansible-core; scripts/test installs it)",
        );
    }
    found
}

/// A host of the inventory: its name, its namespace, its state directory.
struct Host {
    name: String,
    netns: String,
    state_dir: PathBuf,
}

/// An inventory and an Ansible home of its own in a temp dir; runs
/// playbooks of the collection in contrib/ansible.
struct Ansible {
    dir: tempfile::TempDir,
}

/// One ansible-playbook run, as its default output shows it (ansible-core
/// has no JSON output of its own): the exit status, each task's result
/// per host (`-v` prints it as JSON on the line) and the play recap.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// What a task did on a host: `ok`, `changed`, `fatal`, `skipping`, and
/// the module's result.
struct TaskResult {
    status: String,
    result: Value,
}

impl Ansible {
    /// `vars`: the inventory's group variables, beside the connection ones.
    fn new(hosts: &[&Host], binary: &str, vars: Value) -> Ansible {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut all_vars = json!({
            "ansible_connection": "local",
            "ansible_python_interpreter": "/usr/bin/python3",
            // The test runs as the user it is (root for the namespace
            // tests): no sudo.
            "ansible_become": false,
            "nettune_binary": binary,
        });
        if let (Some(all), Some(more)) = (all_vars.as_object_mut(), vars.as_object()) {
            all.extend(more.clone());
        }
        let host_vars: serde_json::Map<String, Value> = hosts
            .iter()
            .map(|h| {
                (
                    h.name.clone(),
                    json!({"nettune_netns": h.netns, "nettune_state_dir": s(&h.state_dir)}),
                )
            })
            .collect();
        let inventory = json!({"all": {"vars": all_vars, "hosts": host_vars}});
        std::fs::write(dir.path().join("inventory.json"), inventory.to_string())
            .expect("write the inventory");
        std::fs::write(dir.path().join("ansible.cfg"), "").expect("write ansible.cfg");
        Ansible { dir }
    }

    /// `playbook`: one of the collection's (`tune`), or a file's path.
    fn command(&self, playbook: &str, extra: &[&str]) -> Command {
        let home = self.dir.path();
        let mut cmd = Command::new("ansible-playbook");
        let playbook = if playbook.contains('/') {
            playbook.to_string()
        } else {
            format!("nettune.tune.{playbook}")
        };
        cmd.arg("-v")
            .arg("-i")
            .arg(home.join("inventory.json"))
            .arg(playbook)
            .args(extra);
        ansible_env(&mut cmd, home);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Run a playbook of the collection (`tune`, `rollback`, `collect`), or
    /// a playbook file.
    fn run(&self, playbook: &str, extra: &[&str]) -> Run {
        let child = self
            .command(playbook, extra)
            .spawn()
            .expect("start ansible-playbook");
        let (code, stdout, stderr) = finish_bounded(child, PLAYBOOK_LIMIT);
        Run {
            code,
            stdout,
            stderr,
        }
    }
}

/// The environment of every Ansible command: this collection only (never
/// one installed on the machine), an Ansible home and temp dirs in `home`,
/// no configuration file but an empty one, results as one-line JSON.
fn ansible_env(cmd: &mut Command, home: &Path) {
    cmd.env(
        "ANSIBLE_COLLECTIONS_PATH",
        Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/ansible"),
    )
    .env("ANSIBLE_COLLECTIONS_SCAN_SYS_PATH", "false")
    .env("ANSIBLE_CONFIG", home.join("ansible.cfg"))
    .env("ANSIBLE_HOME", home.join("home"))
    .env("ANSIBLE_LOCAL_TEMP", home.join("tmp"))
    .env("ANSIBLE_REMOTE_TEMP", home.join("tmp"))
    .env("ANSIBLE_STDOUT_CALLBACK", "default")
    .env("ANSIBLE_CALLBACK_RESULT_FORMAT", "json")
    .env("ANSIBLE_CALLBACK_FORMAT_PRETTY", "false")
    .env("ANSIBLE_RETRY_FILES_ENABLED", "false")
    .env("ANSIBLE_NOCOLOR", "1")
    .env("LC_ALL", "C.UTF-8");
}

impl Run {
    /// The play recap's count `what` (`ok`, `changed`, `failed`,
    /// `skipped`) for `host`; `None` when the play never reached it.
    fn recap(&self, host: &str) -> Option<BTreeMap<String, u64>> {
        let recap = self.stdout.split("PLAY RECAP").nth(1)?;
        recap.lines().find_map(|line| {
            let (name, counts) = line.split_once(" : ")?;
            (name.trim() == host).then(|| {
                counts
                    .split_whitespace()
                    .filter_map(|kv| {
                        let (k, v) = kv.split_once('=')?;
                        Some((k.to_string(), v.parse().ok()?))
                    })
                    .collect()
            })
        })
    }

    fn count(&self, host: &str, what: &str) -> u64 {
        self.recap(host)
            .and_then(|r| r.get(what).copied())
            .unwrap_or(0)
    }

    /// The result of task `task` on each host that ran it: lines such as
    /// `changed: [HOST] => {...}` and `fatal: [HOST]: FAILED! => {...}`
    /// under `TASK [NAME]`.
    fn results(&self, task: &str) -> BTreeMap<String, TaskResult> {
        let mut out = BTreeMap::new();
        let mut current = String::new();
        for line in self.stdout.lines() {
            if let Some(rest) = line.strip_prefix("TASK [") {
                current = rest.split("] ").next().unwrap_or_default().to_string();
                continue;
            }
            if current != task {
                continue;
            }
            let Some((status, rest)) = line.split_once(": [") else {
                continue;
            };
            if !["ok", "changed", "fatal", "failed", "skipping"].contains(&status) {
                continue;
            }
            let Some((host, rest)) = rest.split_once(']') else {
                continue;
            };
            // A delegated task names both: `HOST -> localhost`.
            let host = host.split(" -> ").next().unwrap_or(host).to_string();
            let result = rest
                .find("=> {")
                .and_then(|at| serde_json::from_str(&rest[at + 3..]).ok())
                .unwrap_or(Value::Null);
            out.insert(
                host,
                TaskResult {
                    status: status.to_string(),
                    result,
                },
            );
        }
        out
    }

    /// Everything it printed, for failure messages.
    fn dump(&self) -> String {
        format!(
            "exit {:?}\n{}\nstderr: {}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// An ansible-playbook run in the background, bounded in time, killed by
/// its PID if the test ends (a failed check) before it does.
struct Background {
    pid: i32,
    handle: Option<std::thread::JoinHandle<(Option<i32>, String, String)>>,
}

impl Background {
    fn start(mut cmd: Command) -> Background {
        let child = cmd.spawn().expect("start ansible-playbook");
        let pid = i32::try_from(child.id()).expect("pid");
        let handle = std::thread::spawn(move || finish_bounded(child, PLAYBOOK_LIMIT));
        Background {
            pid,
            handle: Some(handle),
        }
    }

    fn is_finished(&self) -> bool {
        self.handle.as_ref().is_none_or(|h| h.is_finished())
    }

    /// Wait for the end: exit status, stdout, stderr.
    fn finish(mut self) -> (Option<i32>, String, String) {
        self.handle
            .take()
            .expect("running")
            .join()
            .expect("the playbook's thread")
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if !self.is_finished() {
            // SAFETY: a signal to the child this test started, by its PID,
            // not reaped yet (its thread has not returned).
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
            }
        }
    }
}

/// The values a profile may change and a rollback must restore, as the
/// kernel shows them inside `ns`: every file under /proc/sys/net and under
/// each interface's queues (byte queue limits, which move with traffic,
/// left out), by path.
fn namespace_values(ns: &str) -> BTreeMap<String, String> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "sh", "-c"])
        .arg("grep -r -H '' /proc/sys/net /sys/class/net/*/queues 2>/dev/null; true")
        .output()
        .expect("read the namespace");
    let mut values: BTreeMap<String, String> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((path, value)) = line.split_once(':') else {
            continue;
        };
        if path.contains("/byte_queue_limits/") {
            continue;
        }
        let entry = values.entry(path.to_string()).or_default();
        entry.push_str(value);
        entry.push('\n');
    }
    assert!(
        values.keys().any(|k| k.contains("/queues/rx-")),
        "no queue files read in {ns}"
    );
    values
}

fn assert_same(ns: &str, before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) {
    let differ: Vec<String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| format!("{k}: {:?} -> {:?}", before.get(k), after.get(k)))
        .collect();
    assert!(differ.is_empty(), "{ns} differs: {differ:#?}");
}

/// A value as the kernel shows it and as a plan names it, compared the way
/// nettune reads back: masks as numbers, other values with white space
/// folded.
fn same_value(path: &str, shown: &str, planned: &str) -> bool {
    let fold = |v: &str| v.split_whitespace().collect::<Vec<_>>().join(" ");
    if path.ends_with("rps_cpus") || path.ends_with("xps_cpus") {
        let mask = |v: &str| u128::from_str_radix(&v.trim().replace(',', ""), 16).ok();
        return mask(shown).is_some() && mask(shown) == mask(planned);
    }
    fold(shown) == fold(planned)
}

/// A namespace with a veth pair inside it (two queues each way), both up:
/// a host with interfaces a profile tunes.
fn host_namespace(tag: &str, dir: &Path, index: usize) -> (Netns, Host) {
    let ns = Netns::new(tag);
    let (a, b) = (unique("ansa"), unique("ansb"));
    ns.veth(&a, (2, 2), &b, (2, 2));
    ns.wait_up(&[&a, &b]);
    let host = Host {
        name: format!("ns-host-{index}"),
        netns: ns.name.clone(),
        state_dir: dir.join(format!("state-{index}")),
    };
    (ns, host)
}

fn state_files(dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            let mut files: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .collect();
            files.sort();
            files
        }
        Err(_) => Vec::new(),
    }
}

#[test]
fn a_playbook_tunes_three_namespaces_idempotently_and_rolls_them_back_byte_for_byte() {
    const TEST: &str =
        "a_playbook_tunes_three_namespaces_idempotently_and_rolls_them_back_byte_for_byte";
    if skip_unless_root(TEST) || !ansible_present(TEST) {
        return;
    }
    let _measuring = measuring();
    let dir = tempfile::tempdir().expect("tempdir");
    let made: Vec<(Netns, Host)> = (1..=3)
        .map(|i| host_namespace("ans", dir.path(), i))
        .collect();
    let hosts: Vec<&Host> = made.iter().map(|(_, h)| h).collect();
    let ansible = Ansible::new(
        &hosts,
        BIN,
        json!({
            "nettune_profile": "pps",
            "nettune_guard": "1",
            "nettune_guard_baseline": "0.5",
            "nettune_interval": "0.5",
        }),
    );
    let before: Vec<BTreeMap<String, String>> =
        hosts.iter().map(|h| namespace_values(&h.netns)).collect();
    // What the profile sets in each namespace, as nettune plans it.
    let plans: Vec<Value> = hosts
        .iter()
        .map(|h| run_json(&["plan", "--profile", "pps", "--netns", &h.netns, "--json"]))
        .collect();

    // Check mode: every host has changes pending, shown as a diff, and
    // nothing changes.
    let check = ansible.run("tune", &["--check", "--diff"]);
    assert_eq!(check.code, Some(0), "{}", check.dump());
    let applied = check.results("Apply the profile");
    for (i, h) in hosts.iter().enumerate() {
        assert_eq!(check.count(&h.name, "changed"), 1, "{}", check.dump());
        assert_eq!(applied[&h.name].status, "changed", "{}", check.dump());
        let pending = applied[&h.name].result["plan"]["changes"]
            .as_array()
            .map(Vec::len);
        assert_eq!(pending, plans[i]["changes"].as_array().map(Vec::len));
        // The diff, as --diff prints it: each planned value on a + line.
        for change in plans[i]["changes"].as_array().expect("changes") {
            let target = change["target"].as_str().expect("target");
            let to = change["to"].as_str().expect("to");
            let line = format!("+{target} = {to}");
            assert!(
                check.stdout.lines().any(|l| l == line),
                "{line:?} not in the diff: {}",
                check.dump()
            );
        }
        assert_same(&h.netns, &before[i], &namespace_values(&h.netns));
        assert!(state_files(&h.state_dir).is_empty(), "check mode journaled");
    }

    // The first run applies: changed, and each namespace holds the profile.
    let first = ansible.run("tune", &[]);
    assert_eq!(first.code, Some(0), "{}", first.dump());
    let applied = first.results("Apply the profile");
    for (i, h) in hosts.iter().enumerate() {
        assert_eq!(first.count(&h.name, "changed"), 1, "{}", first.dump());
        assert_eq!(applied[&h.name].status, "changed");
        assert_eq!(applied[&h.name].result["guard"]["result"], "passed");
        let now = namespace_values(&h.netns);
        let mut files = 0;
        for change in plans[i]["changes"].as_array().expect("changes") {
            let target = change["target"].as_str().expect("target");
            if !target.starts_with('/') {
                continue;
            }
            files += 1;
            let shown = now
                .get(target)
                .unwrap_or_else(|| panic!("{target} not read in {}", h.netns));
            let to = change["to"].as_str().expect("to");
            assert!(
                same_value(target, shown, to),
                "{}: {target} is {shown:?}, the profile sets {to:?}",
                h.name
            );
        }
        assert!(files > 0, "pps sets no file in {}", h.netns);
        assert_eq!(state_files(&h.state_dir).len(), 1);
    }
    let tuned: Vec<BTreeMap<String, String>> =
        hosts.iter().map(|h| namespace_values(&h.netns)).collect();

    // The second run changes nothing, and journals nothing.
    let second = ansible.run("tune", &[]);
    assert_eq!(second.code, Some(0), "{}", second.dump());
    for (i, h) in hosts.iter().enumerate() {
        assert_eq!(second.count(&h.name, "changed"), 0, "{}", second.dump());
        assert_eq!(second.count(&h.name, "failed"), 0);
        assert!(second.count(&h.name, "ok") >= 1, "{}", second.dump());
        assert_same(&h.netns, &tuned[i], &namespace_values(&h.netns));
        assert_eq!(state_files(&h.state_dir).len(), 1);
    }
    // Nor does check mode see anything pending now.
    let check = ansible.run("tune", &["--check"]);
    assert_eq!(check.code, Some(0), "{}", check.dump());
    for h in &hosts {
        assert_eq!(check.count(&h.name, "changed"), 0, "{}", check.dump());
    }

    // An unknown profile fails the first host with nettune's own message,
    // and the rollout stops there.
    let bad = ansible.run("tune", &["-e", "nettune_profile=no-such-profile"]);
    assert_eq!(bad.code, Some(2), "{}", bad.dump());
    let failed = bad.results("Apply the profile");
    assert_eq!(failed.len(), 1, "{}", bad.dump());
    assert_eq!(failed[&hosts[0].name].status, "fatal");
    assert!(
        failed[&hosts[0].name].result["msg"]
            .as_str()
            .is_some_and(|m| m.starts_with("unknown profile 'no-such-profile'")),
        "{}",
        bad.dump()
    );

    // Rollback restores every namespace byte for byte; a second rollback
    // has nothing left to do.
    let rollback = ansible.run("rollback", &["--diff"]);
    assert_eq!(rollback.code, Some(0), "{}", rollback.dump());
    for (i, h) in hosts.iter().enumerate() {
        assert_eq!(rollback.count(&h.name, "changed"), 1, "{}", rollback.dump());
        assert_same(&h.netns, &before[i], &namespace_values(&h.netns));
    }
    let again = ansible.run("rollback", &[]);
    assert_eq!(again.code, Some(0), "{}", again.dump());
    for h in &hosts {
        assert_eq!(again.count(&h.name, "changed"), 0, "{}", again.dump());
    }
}

#[test]
fn a_guard_that_fires_on_the_first_host_stops_a_serial_rollout_there() {
    const TEST: &str = "a_guard_that_fires_on_the_first_host_stops_a_serial_rollout_there";
    if skip_unless_root(TEST) || !ansible_present(TEST) {
        return;
    }
    let _measuring = measuring();
    let dir = tempfile::tempdir().expect("tempdir");
    // The first host receives from a sender namespace outside the
    // inventory; the other two are quiet.
    let tx = Netns::new("anstx");
    let rx = Netns::new("ansrx");
    let (_, b) = veth_pair(&tx, &rx, 86, Some(2));
    rx.wait_up(&[&b]);
    let first = Host {
        name: "ns-host-1".into(),
        netns: rx.name.clone(),
        state_dir: dir.path().join("state-1"),
    };
    let others: Vec<(Netns, Host)> = (2..=3)
        .map(|i| host_namespace("ans", dir.path(), i))
        .collect();
    let mut hosts = vec![&first];
    hosts.extend(others.iter().map(|(_, h)| h));
    let before: Vec<BTreeMap<String, String>> =
        hosts.iter().map(|h| namespace_values(&h.netns)).collect();
    let ansible = Ansible::new(
        &hosts,
        BIN,
        json!({
            "nettune_profile": "pps",
            "nettune_serial": 1,
            "nettune_guard": "20",
            "nettune_guard_baseline": "1",
            "nettune_interval": "0.5",
        }),
    );

    // A reader with a tiny receive buffer in the first host, quiet until
    // the flood starts.
    let sink = crate::apply_guard::small_buffer_sink(&rx, "10.86.0.2:0", "90");
    let to = sink.bound_addr();
    let play = Background::start(ansible.command("tune", &[]));
    // The journal is written after the baseline and before the first
    // change: the flood starts once it is there.
    let deadline = Instant::now() + Duration::from_secs(120);
    while state_files(&first.state_dir).is_empty() {
        assert!(
            Instant::now() < deadline && !play.is_finished(),
            "the first host never started its change"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let flood = crate::apply_guard::udp_flood(&tx, &to, "10");
    let (code, stdout, stderr) = play.finish();
    drop(flood);
    drop(sink);
    let run = Run {
        code,
        stdout,
        stderr,
    };
    assert_eq!(run.code, Some(2), "{}", run.dump());
    assert_eq!(run.count(&first.name, "failed"), 1, "{}", run.dump());
    let applied = run.results("Apply the profile");
    assert_eq!(applied[&first.name].status, "fatal", "{}", run.dump());
    let result = &applied[&first.name].result;
    assert_eq!(result["guard"]["result"], "rolled_back", "{}", run.dump());
    let msg = result["msg"].as_str().expect("msg");
    assert!(
        msg.starts_with("guard fired")
            && msg.contains("UDP")
            && msg.contains("/s (baseline ")
            && msg.contains("rolled back state 1"),
        "{msg}"
    );
    // The first host is as it was: the guard rolled it back.
    assert_same(&first.netns, &before[0], &namespace_values(&first.netns));
    let states = run_json(&["history", "--json", "--state-dir", s(&first.state_dir)]);
    assert_eq!(states[0]["status"], "rolled_back", "{states:#}");
    // The play stopped there: the other hosts were never touched.
    for (i, h) in hosts.iter().enumerate().skip(1) {
        assert!(!applied.contains_key(&h.name), "{}", run.dump());
        assert_eq!(run.count(&h.name, "changed"), 0, "{}", run.dump());
        assert_eq!(run.count(&h.name, "ok"), 0, "{}", run.dump());
        assert_same(&h.netns, &before[i], &namespace_values(&h.netns));
        assert!(!h.state_dir.exists(), "{} has a state dir", h.name);
    }
}

#[test]
fn the_collect_playbook_gives_fleet_report_one_doctor_report_per_host() {
    const TEST: &str = "the_collect_playbook_gives_fleet_report_one_doctor_report_per_host";
    if skip_unless_root(TEST) || !ansible_present(TEST) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let made: Vec<(Netns, Host)> = (1..=3)
        .map(|i| host_namespace("ansc", dir.path(), i))
        .collect();
    let hosts: Vec<&Host> = made.iter().map(|(_, h)| h).collect();
    let reports = dir.path().join("reports");
    let ansible = Ansible::new(
        &hosts,
        BIN,
        json!({"nettune_collect_dir": s(&reports), "nettune_interval": 0.5}),
    );
    let collected = ansible.run("collect", &[]);
    assert_eq!(collected.code, Some(0), "{}", collected.dump());
    let files = state_files(&reports);
    let names: Vec<String> = files
        .iter()
        .filter_map(|p| Some(p.file_name()?.to_str()?.to_string()))
        .collect();
    assert_eq!(
        names,
        vec!["ns-host-1.json", "ns-host-2.json", "ns-host-3.json"]
    );
    for (file, h) in files.iter().zip(&hosts) {
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(file).expect("read")).expect("json");
        assert_eq!(report["host"]["netns"], h.netns.as_str(), "{file:?}");
        assert!(report["findings"].is_array(), "{file:?}");
    }
    let (code, out, err) = run(&["fleet", "report", s(&reports), "--json"]);
    assert_eq!(code, 0, "{err}");
    let fleet: Value = serde_json::from_str(&out).expect("fleet json");
    assert_eq!(fleet["hosts"], 3, "{fleet:#}");
    assert_eq!(fleet["skipped"].as_array().map(Vec::len), Some(0));
}

/// A stand-in for an older nettune: its version, and an `apply --help`
/// without `--guard`. Every call is logged, so the test sees that nothing
/// but the questions was asked.
fn old_nettune(dir: &Path) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt as _;
    let script = dir.join("nettune");
    let log = dir.join("calls.log");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n\
             echo \"$*\" >> '{}'\n\
             case \"$*\" in\n\
             --version) echo 'nettune 0.0.9 (commit 0123456789ab)' ;;\n\
             'apply --help') printf 'Usage: nettune apply [OPTIONS]\\n\\nOptions:\\n      \
             --profile <NAME>\\n      --netns <NAME>\\n      --state-dir <DIR>\\n      \
             --json\\n' ;;\n\
             *) echo 'nettune: this stand-in changes nothing' >&2; exit 2 ;;\n\
             esac\n",
            log.display()
        ),
    )
    .expect("write the stand-in");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    (script, log)
}

#[test]
fn an_older_nettune_is_named_with_its_version_and_what_is_needed() {
    const TEST: &str = "an_older_nettune_is_named_with_its_version_and_what_is_needed";
    if !ansible_present(TEST) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (script, log) = old_nettune(dir.path());
    let host = Host {
        name: "old-host".into(),
        netns: format!("nt-ans-none-{}", std::process::id()),
        state_dir: dir.path().join("state"),
    };
    let ansible = Ansible::new(&[&host], s(&script), json!({"nettune_guard": "1m"}));
    for extra in [&[][..], &["--check"][..]] {
        let run = ansible.run("tune", extra);
        assert_eq!(run.code, Some(2), "{}", run.dump());
        let results = run.results("Apply the profile");
        assert_eq!(results["old-host"].status, "fatal", "{}", run.dump());
        let msg = results["old-host"].result["msg"].as_str().expect("msg");
        assert!(
            msg.contains("nettune 0.0.9 at ")
                && msg.contains("`nettune apply --guard`")
                && msg.contains("nettune 0.1.0 or later"),
            "{extra:?}: {msg}"
        );
    }
    let calls = std::fs::read_to_string(&log).expect("calls");
    assert!(
        calls
            .lines()
            .all(|c| c == "--version" || c == "apply --help"),
        "{calls}"
    );
    assert!(!host.state_dir.exists());
}

#[test]
fn the_modules_document_themselves_the_playbooks_parse_and_the_collection_builds() {
    const TEST: &str =
        "the_modules_document_themselves_the_playbooks_parse_and_the_collection_builds";
    if !ansible_present(TEST) {
        return;
    }
    let ansible = Ansible::new(&[], BIN, json!({}));
    for playbook in ["tune", "rollback", "collect"] {
        let child = ansible
            .command(playbook, &["--syntax-check"])
            .spawn()
            .expect("ansible-playbook");
        let (code, out, err) = finish_bounded(child, PLAYBOOK_LIMIT);
        assert_eq!(code, Some(0), "{playbook}: {out}{err}");
    }
    for module in ["apply", "rollback", "facts"] {
        let mut cmd = Command::new("ansible-doc");
        cmd.args(["--json", "-t", "module", &format!("nettune.tune.{module}")]);
        ansible_env(&mut cmd, ansible.dir.path());
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ansible-doc");
        let (code, out, err) = finish_bounded(child, PLAYBOOK_LIMIT);
        assert_eq!(code, Some(0), "{module}: {err}");
        let doc: Value = serde_json::from_str(&out).expect("ansible-doc json");
        let entry = &doc[format!("nettune.tune.{module}")];
        assert!(
            entry["doc"]["options"].is_object() && entry["return"].is_object(),
            "{module}: {entry:#}"
        );
    }
    // The collection builds as its README says, with every module in it.
    let mut cmd = Command::new("ansible-galaxy");
    cmd.args(["collection", "build", "--output-path"])
        .arg(ansible.dir.path())
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("contrib/ansible/ansible_collections/nettune/tune"),
        );
    ansible_env(&mut cmd, ansible.dir.path());
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ansible-galaxy");
    let (code, out, err) = finish_bounded(child, PLAYBOOK_LIMIT);
    assert_eq!(code, Some(0), "{out}{err}");
    let tarball = ansible
        .dir
        .path()
        .join(format!("nettune-tune-{}.tar.gz", env!("CARGO_PKG_VERSION")));
    let listed = sh(&["tar", "tzf", s(&tarball)]);
    for file in [
        "plugins/modules/apply.py",
        "plugins/modules/rollback.py",
        "plugins/modules/facts.py",
        "plugins/module_utils/nettune.py",
        "roles/install/tasks/main.yml",
        "playbooks/tune.yml",
        "playbooks/collect.yml",
        "playbooks/rollback.yml",
    ] {
        assert!(listed.lines().any(|l| l == file), "{file} not in {listed}");
    }
}

#[test]
fn the_install_role_copies_a_binary_once_and_checks_it() {
    const TEST: &str = "the_install_role_copies_a_binary_once_and_checks_it";
    if !ansible_present(TEST) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let dest = dir.path().join("bin/nettune");
    let host = Host {
        name: "fresh-host".into(),
        netns: String::new(),
        state_dir: dir.path().join("state"),
    };
    let ansible = Ansible::new(&[&host], s(&dest), json!({"nettune_binary_src": BIN}));
    let playbook = dir.path().join("install.yml");
    std::fs::write(
        &playbook,
        "- hosts: all\n  gather_facts: false\n  roles:\n    - nettune.tune.install\n",
    )
    .expect("write the playbook");
    let first = ansible.run(s(&playbook), &[]);
    assert_eq!(first.code, Some(0), "{}", first.dump());
    assert!(
        first.count("fresh-host", "changed") >= 1,
        "{}",
        first.dump()
    );
    let checked = first.results("nettune.tune.install : Check the installed nettune");
    assert_eq!(
        checked["fresh-host"].result["ansible_facts"]["nettune"]["version"],
        env!("CARGO_PKG_VERSION"),
        "{}",
        first.dump()
    );
    let (code, out, _) = split(
        Command::new(&dest)
            .arg("--version")
            .output()
            .expect("run the copy"),
    );
    assert_eq!(code, 0);
    assert!(out.starts_with(&format!("nettune {}", env!("CARGO_PKG_VERSION"))));
    // Already there: nothing to do.
    let second = ansible.run(s(&playbook), &[]);
    assert_eq!(second.code, Some(0), "{}", second.dump());
    assert_eq!(
        second.count("fresh-host", "changed"),
        0,
        "{}",
        second.dump()
    );
}
