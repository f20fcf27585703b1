//! Values with units are read the way help writes them, and absurd values
//! are refused with the accepted range, in every command that takes them:
//! one line on stderr, exit 2, nothing changed, never a panic.

use std::path::Path;

use crate::common::*;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `nettune ARGS` must fail with exit 2 and one line that contains every
/// one of `words`.
fn refused(args: &[&str], words: &[&str]) {
    let (code, out, err) = run(args);
    assert_eq!(code, 2, "{args:?} was accepted: {out}{err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: not one line: {err}"
    );
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    for word in words {
        assert!(err.contains(word), "{args:?}: '{word}' missing from: {err}");
    }
}

#[test]
fn rates_are_read_as_help_shows_them() {
    let root = fixture("two-socket-smt-8q");
    let root = s(&root);
    // `2.5G` is in plan's help for --bandwidth: 2.5 Gbit/s, as iperf3 reads it.
    let (_, help, _) = run(&["plan", "--help"]);
    assert!(help.contains("2.5G"), "{help}");
    let plan = run_json(&[
        "plan",
        "--profile",
        "throughput",
        "--bandwidth",
        "2.5G",
        "--root",
        root,
        "--json",
    ]);
    let reasons: Vec<&str> = plan["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .filter_map(|c| c["reason"].as_str())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("2.5 Gbit/s (--bandwidth)")),
        "{reasons:?}"
    );
    let (code, _, err) = run(&[
        "doctor",
        "--root",
        root,
        "--bandwidth",
        "2.5G",
        "--rtt",
        "50ms",
    ]);
    assert!(code == 0 || code == 1, "{err}");
}

#[test]
fn absurd_tuning_values_are_refused_with_their_range() {
    let root = fixture("two-socket-smt-8q");
    let root = s(&root);
    let plan = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["plan", "--profile", "throughput", "--root", root];
        args.extend_from_slice(extra);
        args.into_iter().map(String::from).collect()
    };
    for (extra, words) in [
        (
            &["--bandwidth", "1bit"][..],
            &["'1bit'", "1mbit to 10tbit"][..],
        ),
        (&["--bandwidth", "-1gbit"], &["negative"]),
        (&["--pace", "1bit"], &["'1bit'", "1mbit to 34gbit"]),
        (&["--pace", "99tbit"], &["'99tbit'", "1mbit to 34gbit"]),
        (&["--streams", "4294967295"], &["4294967295", "1..=1024"]),
        (&["--streams", "0"], &["1..=1024"]),
        (&["--rtt", "1000000s"], &["'1000000s'", "1 us to 10 s"]),
        (&["--cpus", "0-2000000000"], &["2000000000", "8191"]),
    ] {
        let args = plan(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&args, words);
    }
    for (extra, words) in [
        (
            &["--bandwidth", "1bit", "--rtt", "50ms"][..],
            &["1mbit to 10tbit"][..],
        ),
        (
            &["--bandwidth", "10gbit", "--rtt", "1000000s"],
            &["1 us to 10 s"],
        ),
        (&["--interval", "1ns"], &["'1ns'", "0.1 to 3600"]),
        (&["--interval", "99999"], &["0.1 to 3600"]),
    ] {
        let mut args = vec!["doctor", "--root", root];
        args.extend_from_slice(extra);
        refused(&args, words);
    }
}

/// `experiment search` reads --bandwidth and --rtt as plan does, and only
/// where they size something: the buffers dimension. Refused before
/// anything is entered or changed (no root needed to see it).
#[test]
fn search_path_values_are_checked_and_need_the_buffers_dimension() {
    let search = ["experiment", "search", "--bench", "stream"];
    for (extra, words) in [
        (
            &["--bandwidth", "1bit"][..],
            &["'1bit'", "1mbit to 10tbit"][..],
        ),
        (&["--rtt", "1000000s"], &["'1000000s'", "1 us to 10 s"]),
        (
            &["--space", "rps,xps", "--rtt", "30ms"],
            &["--rtt sizes the buffers dimension only; add buffers to --space or drop --rtt; nothing was changed"],
        ),
        (
            &["--space", "rps,buffer"],
            &["unknown dimension 'buffer'", "napi or buffers"],
        ),
    ] {
        let mut args = search.to_vec();
        args.extend_from_slice(extra);
        refused(&args, words);
    }
}

/// `experiment run` takes the search's --bandwidth and --rtt, read the
/// same way, and only where they size something: a `buffers=throughput`
/// config (a profile takes its own after a colon). Refused before
/// anything is entered or changed, and no report directory is made.
#[test]
fn run_path_values_are_checked_and_need_a_buffers_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("exp");
    let buffers = "current,buffers=throughput";
    for (extra, words) in [
        (
            &["--configs", buffers, "--bandwidth", "1bit"][..],
            &["'1bit'", "1mbit to 10tbit"][..],
        ),
        (
            &["--configs", buffers, "--rtt", "1000000s"],
            &["'1000000s'", "1 us to 10 s"],
        ),
        (
            &["--configs", "current,rps=all", "--rtt", "30ms"],
            &[
                "--rtt sizes buffers=throughput configs only; add one to --configs",
                "or drop --rtt; nothing was changed",
            ],
        ),
        (
            &["--configs", "current,throughput", "--bandwidth", "50mbit"],
            &[
                "--bandwidth sizes buffers=throughput configs only",
                "throughput:--rtt=30ms",
                "or drop --bandwidth; nothing was changed",
            ],
        ),
    ] {
        let mut args = vec!["experiment", "run", "--bench", "stream", "--out", s(&out)];
        args.extend_from_slice(extra);
        refused(&args, words);
        assert!(!out.exists(), "{args:?} made the report directory");
    }
}

/// A label the search prints on a host of more than two CPUs carries a
/// CPU list with a comma in brackets: `experiment run --configs` takes it
/// back as one config, checked (here: given twice) before anything runs.
#[test]
fn run_takes_a_search_label_with_a_cpu_list_as_one_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("exp");
    let label = "rps=not-app(0,2-3) xps=off";
    let twice = format!("current,{label},{label}");
    let args = [
        "experiment",
        "run",
        "--bench",
        "stream",
        "--out",
        s(&out),
        "--configs",
        &twice,
    ];
    refused(
        &args,
        &[&format!(
            "config '{label}' is given twice; nothing was changed"
        )],
    );
    assert!(!out.exists(), "{args:?} made the report directory");
}

#[test]
fn an_absurd_value_to_apply_changes_nothing() {
    let (dir, tree) = fixture_copy("two-socket-smt-8q");
    let state = dir.path().join("state");
    for (extra, range) in [
        (&["--bandwidth", "1bit"][..], "1mbit to 10tbit"),
        (&["--streams", "4294967295"], "1..=1024"),
        (&["--pace", "1bit"], "1mbit to 34gbit"),
    ] {
        let mut args = vec![
            "apply",
            "--profile",
            "throughput",
            "--root",
            s(&tree),
            "--state-dir",
            s(&state),
        ];
        args.extend_from_slice(extra);
        refused(&args, &[range]);
        assert!(!state.exists(), "{args:?} created the state directory");
    }
    let (code, out, _) = run(&[
        "plan",
        "--profile",
        "throughput",
        "--root",
        s(&tree),
        "--json",
    ]);
    assert_eq!(code, 0);
    assert!(
        out.contains("\"changes\""),
        "the tree still plans as before"
    );
}

#[test]
fn absurd_bench_values_are_refused_with_their_range() {
    for (args, words) in [
        (
            &[
                "bench",
                "udp-flood",
                "--to",
                "127.0.0.1:9",
                "--rate",
                "4294967295000",
            ][..],
            &["'4294967295000'", "1 to 1000000000"][..],
        ),
        (
            &[
                "bench",
                "udp-flood",
                "--to",
                "127.0.0.1:9",
                "--rate",
                "1e30",
            ],
            &["'1e30'", "1 to 1000000000"],
        ),
        (
            &[
                "bench",
                "http",
                "http://127.0.0.1:9/",
                "-R",
                "4294967295000",
            ],
            &["1 to 1000000000"],
        ),
        (
            &[
                "bench",
                "udp-sink",
                "--bind",
                "127.0.0.1:0",
                "--rcvbuf",
                "3G",
            ],
            &["'3G'", "2147483647"],
        ),
        (
            &[
                "bench",
                "udp-sink",
                "--bind",
                "127.0.0.1:0",
                "--rcvbuf",
                "1bit",
            ],
            &["'1bit'", "2147483647"],
        ),
        (
            &[
                "bench",
                "udp-sink",
                "--bind",
                "127.0.0.1:0",
                "--duration",
                "1ns",
            ],
            &["'1ns'", "shorter than 20 ms"],
        ),
        (
            &[
                "bench",
                "rr",
                "--to",
                "127.0.0.1:9",
                "--proto",
                "tcp",
                "--duration",
                "1us",
            ],
            &["shorter than 20 ms"],
        ),
        (
            &["bench", "http", "http://127.0.0.1:9/", "-d", "1ns"],
            &["shorter than 20 ms"],
        ),
        (
            &[
                "bench",
                "rr",
                "--to",
                "127.0.0.1:9",
                "--proto",
                "tcp",
                "--instances",
                "4294967295",
            ],
            &["1..=100000"],
        ),
        (
            &[
                "bench",
                "udp-flood",
                "--to",
                "127.0.0.1:9",
                "--pin",
                "0-2000000000",
            ],
            &["2000000000", "possible CPUs"],
        ),
    ] {
        refused(args, words);
    }
}

/// A byte size with a binary suffix reaches the socket: `--rcvbuf 4M` is
/// 4 MiB (granted in full with SO_RCVBUFFORCE as root).
#[test]
fn rcvbuf_takes_a_suffix() {
    if skip_unless_root("rcvbuf_takes_a_suffix") {
        return;
    }
    let (code, out, err) = run(&[
        "bench",
        "udp-sink",
        "--bind",
        "127.0.0.1:0",
        "--rcvbuf",
        "4M",
        "--duration",
        "0.1",
        "--json",
    ]);
    assert_eq!(code, 1, "nothing arrives, so exit 1 with the report: {err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("report");
    assert_eq!(report["rcvbuf"]["requested"], 4 << 20, "{report:#}");
    let granted = report["rcvbuf"]["granted"].as_u64().expect("granted");
    assert!(granted >= 4 << 20, "{granted}");
}

#[test]
fn plan_json_and_format_conflict_and_apply_dry_run_json_prints_json() {
    let root = fixture("vm-2cpu-virtio");
    let root = s(&root);
    refused(
        &[
            "plan",
            "--profile",
            "pps",
            "--root",
            root,
            "--json",
            "--format",
            "sh",
        ],
        &["--json", "--format"],
    );
    let plan = run_json(&[
        "apply",
        "--profile",
        "pps",
        "--root",
        root,
        "--dry-run",
        "--json",
    ]);
    assert!(plan["changes"].is_array(), "{plan}");
    refused(
        &[
            "apply",
            "--profile",
            "pps",
            "--root",
            root,
            "--dry-run",
            "--json",
            "--format",
            "sh",
        ],
        &["--json", "--format"],
    );
}

/// Busy polling where it cannot work (loopback has no NAPI), or its
/// modifiers without a poll time: refused, naming the flag and what to do.
#[test]
fn busy_polling_where_it_cannot_work_is_refused() {
    let loopback = ["loopback has no NAPI instance", "tso off"];
    refused(
        &[
            "bench",
            "rr",
            "--to",
            "127.0.0.1:9",
            "--proto",
            "tcp",
            "--busy-poll",
            "50",
        ],
        &loopback,
    );
    refused(
        &[
            "bench",
            "rr-server",
            "--bind",
            "[::1]:0",
            "--busy-poll",
            "50",
        ],
        &loopback,
    );
    refused(
        &[
            "bench",
            "http-server",
            "--bind",
            "127.0.0.1:0",
            "--busy-poll",
            "50",
        ],
        &loopback,
    );
    refused(
        &[
            "bench",
            "rr",
            "--to",
            "10.9.9.9:9",
            "--proto",
            "udp",
            "--prefer-busy-poll",
        ],
        &["--busy-poll"],
    );
    refused(
        &[
            "bench",
            "rr",
            "--to",
            "10.9.9.9:9",
            "--proto",
            "udp",
            "--busy-poll",
            "50",
            "--busy-poll-budget",
            "0",
        ],
        &["--busy-poll-budget", "'0'"],
    );
}
