//! Golden outputs: what users read and what scripts parse, kept byte for
//! byte (the plan of every fixture host and profile as text, JSON and
//! shell; inspect and doctor on every fixture as text and JSON) and, for
//! the benches, the set of keys of every JSON report. A change to the code
//! that is meant to change none of these must leave them identical.
//!
//! A change that is meant to change them rewrites them:
//! `NETTUNE_BLESS=1 cargo test --test integration golden`, and the diff
//! shows in review what users will see.

use std::collections::BTreeSet;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;

const PROFILES: &[&str] = &["pps", "latency", "throughput", "http", "baseline"];

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn blessing() -> bool {
    std::env::var_os("NETTUNE_BLESS").is_some()
}

fn fixtures() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .filter_map(|e| {
            let e = e.ok()?;
            e.path()
                .is_dir()
                .then(|| e.file_name().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    names
}

/// Compare `actual` with the golden file `name`, or write it when blessing.
/// Returns a description of the difference.
fn compare(name: &str, actual: &str) -> Option<String> {
    let path = golden_dir().join(name);
    if blessing() {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, actual).expect("write golden");
        return None;
    }
    let expected = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) => return Some(format!("{name}: {err} (bless to create it)")),
    };
    if expected == actual {
        return None;
    }
    let line = expected
        .lines()
        .zip(actual.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
    Some(format!(
        "{name} differs at line {}:\n  golden: {:?}\n  now:    {:?}",
        line + 1,
        expected.lines().nth(line).unwrap_or("<end>"),
        actual.lines().nth(line).unwrap_or("<end>")
    ))
}

fn output(args: &[&str]) -> String {
    let (code, out, err) = run(args);
    // doctor exits 1 with findings; anything else that is not 0 is a fault.
    assert!(code == 0 || code == 1, "{args:?} exited {code}: {err}");
    // The checkout's own path is no part of the output users compare.
    let fixtures = fixture("").display().to_string();
    let out = out.replace(fixtures.trim_end_matches('/'), "$FIXTURES");
    format!("exit {code}\n{out}")
}

#[test]
fn inspect_doctor_and_plan_on_every_fixture_are_unchanged() {
    let mut diffs = Vec::new();
    for name in fixtures() {
        let root = fixture(&name).display().to_string();
        let mut cases: Vec<(String, Vec<String>)> = vec![
            ("inspect.txt".into(), vec!["inspect".into()]),
            (
                "inspect.json".into(),
                vec!["inspect".into(), "--json".into()],
            ),
            ("doctor.txt".into(), vec!["doctor".into()]),
            ("doctor.json".into(), vec!["doctor".into(), "--json".into()]),
        ];
        for profile in PROFILES {
            let base = vec!["plan".to_string(), "--profile".into(), profile.to_string()];
            cases.push((format!("plan-{profile}.txt"), base.clone()));
            let mut json = base.clone();
            json.push("--json".into());
            cases.push((format!("plan-{profile}.json"), json));
            let mut sh = base;
            sh.extend(["--format".to_string(), "sh".to_string()]);
            cases.push((format!("plan-{profile}.sh"), sh));
        }
        for (file, mut args) in cases {
            args.extend(["--root".to_string(), root.clone()]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            if let Some(diff) = compare(&format!("{name}/{file}"), &output(&args)) {
                diffs.push(diff);
            }
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// Every key path of a JSON value: `a.b`, array elements as `a[]`.
fn key_paths(value: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                out.insert(path.clone());
                key_paths(value, &path, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                key_paths(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

fn keys_text(value: &Value) -> String {
    let mut keys = BTreeSet::new();
    key_paths(value, "", &mut keys);
    keys.into_iter().map(|k| format!("{k}\n")).collect()
}

/// Run a bench server and its client on loopback for a second; both JSON
/// reports.
fn bench_pair(server: &[&str], client: &[&str]) -> (Value, Value) {
    let mut args = vec!["bench"];
    args.extend_from_slice(server);
    args.extend(["--bind", "127.0.0.1:0", "--duration", "30", "--json"]);
    let mut child = nettune()
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    // Every bench server names its address on stderr, the same way.
    let (addr, _rest) = bench_server_addr(child.stderr.take().expect("stderr"))
        .unwrap_or_else(|seen| panic!("{args:?}: no listening line: {seen}"));
    let mut cargs = vec!["bench"];
    cargs.extend_from_slice(client);
    let url = format!("http://{addr}/plaintext");
    if client[0] == "http" {
        cargs.extend([url.as_str(), "--duration", "1", "--json"]);
    } else {
        cargs.extend(["--to", &addr, "--duration", "1", "--json"]);
    }
    let (code, out, err) = run(&cargs);
    assert_eq!(code, 0, "{cargs:?}: {err}");
    let client_report: Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{cargs:?}: {e}: {out}"));
    // Ctrl-C ends the server with its report, as a user would stop it.
    let pid = i32::try_from(child.id()).expect("pid");
    // SAFETY: signalling the child this test started, by its PID.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).expect("server report");
    child.stdout = None;
    let (code, _, err) = finish_bounded(child, Duration::from_secs(20));
    assert_eq!(code, Some(0), "{args:?}: {err}");
    let server_report: Value =
        serde_json::from_str(&rest).unwrap_or_else(|e| panic!("{args:?}: {e}: {rest}"));
    (server_report, client_report)
}

#[test]
fn every_bench_json_report_keeps_its_keys() {
    let pairs: &[(&str, &[&str], &[&str])] = &[
        ("udp", &["udp-sink"], &["udp-flood", "--rate", "20000"]),
        (
            "rr",
            &["rr-server"],
            &["rr", "--proto", "tcp", "--warmup", "0.2"],
        ),
        ("http", &["http-server"], &["http", "-c", "4", "-t", "1"]),
        ("stream", &["stream-server"], &["stream", "--warmup", "0"]),
    ];
    let mut diffs = Vec::new();
    for (name, server, client) in pairs {
        let (server_report, client_report) = bench_pair(server, client);
        for (side, report) in [("server", &server_report), ("client", &client_report)] {
            if let Some(diff) = compare(&format!("bench/{name}-{side}.keys"), &keys_text(report)) {
                diffs.push(diff);
            }
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
