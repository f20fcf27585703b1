//! `nettune testbed up --scenario NAME`: each scenario builds a testbed
//! whose problem `doctor --netns` names, the scenario's profile applied
//! with `--netns` makes doctor stop naming it, and `testbed down` removes
//! everything. Speed is not asserted here: bench/scenarios.sh measures the
//! gain. The namespace tests need root.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

const SCENARIOS: &[&str] = &[
    "reader-on-softirq-cpu",
    "softirq-on-app-cpu",
    "bulk-small-buffers",
    "rr-irq-deferral",
];

#[test]
fn scenarios_are_listed_one_line_each_and_an_unknown_one_is_refused() {
    for args in [
        &["testbed", "scenarios"][..],
        &["testbed", "up", "--scenario", "help"],
    ] {
        let (code, stdout, stderr) = run(args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        for name in SCENARIOS {
            let lines: Vec<&str> = stdout
                .lines()
                .filter(|l| l.trim_start().starts_with(&format!("{name} ")))
                .collect();
            assert_eq!(lines.len(), 1, "{args:?}: one line for {name}:\n{stdout}");
        }
    }
    let name = unique("scn");
    let (code, _, stderr) = run(&["testbed", "up", "--name", &name, "--scenario", "nope"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("unknown scenario 'nope'") && stderr.contains("softirq-on-app-cpu"),
        "{stderr}"
    );
    assert!(
        !std::path::Path::new(&format!("/run/netns/ntb-{name}-server")).exists(),
        "nothing may be made for an unknown scenario"
    );
    // A scenario sets its own queue count.
    let (code, _, stderr) = run(&[
        "testbed",
        "up",
        "--scenario",
        "softirq-on-app-cpu",
        "--queues",
        "4",
    ]);
    assert_eq!(code, 2, "{stderr}");
}

/// A scenario testbed, removed on drop (also when an assertion fails).
struct Bed {
    name: String,
    up: Value,
}

impl Bed {
    fn up(scenario: &str) -> Bed {
        let name = unique("scn");
        let up = run_json(&[
            "testbed",
            "up",
            "--name",
            &name,
            "--scenario",
            scenario,
            "--json",
        ]);
        Bed {
            name: up["name"].as_str().expect("name").to_string(),
            up,
        }
    }

    fn server(&self) -> &str {
        self.up["server"]["netns"].as_str().expect("server netns")
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = nettune().args(["testbed", "down", &self.name]).output();
    }
}

/// The ids doctor names in `netns` about its veth or its sysctls (totals:
/// the counters do not matter to these rules), with `path` (--bandwidth,
/// --rtt) passed on.
fn named(netns: &str, path: &[&str]) -> Vec<String> {
    findings(netns, path)
        .iter()
        .map(|f| f["id"].as_str().expect("id").to_string())
        .collect()
}

/// The findings of `doctor --netns NETNS` on totals, as JSON.
fn findings(netns: &str, path: &[&str]) -> Vec<Value> {
    let mut args = vec!["doctor", "--netns", netns, "--interval", "0", "--json"];
    args.extend(path);
    // Exit 1: findings at warn or above; 2 would be a failure to judge.
    let (code, stdout, stderr) = run(&args);
    assert!(code == 0 || code == 1, "doctor: exit {code}: {stderr}");
    let doc: Value = serde_json::from_str(&stdout).expect("doctor JSON");
    doc["findings"].as_array().expect("findings").clone()
}

#[test]
fn each_scenario_is_named_by_doctor_and_fixed_by_its_profile() {
    if skip_unless_root("each_scenario_is_named_by_doctor_and_fixed_by_its_profile") {
        return;
    }
    for scenario in SCENARIOS {
        let bed = Bed::up(scenario);
        assert_eq!(bed.up["scenario"], *scenario, "{:#}", bed.up);
        let finding = bed.up["finding"].as_str().expect("finding").to_string();
        let profile = bed.up["profile"].as_str().expect("profile").to_string();
        // The commands that show it run inside the testbed's namespaces.
        let server = bed.up["commands"]["server"].as_str().expect("server");
        assert!(
            server.contains(&format!("--netns {}", bed.server())),
            "{server}"
        );
        // What doctor and apply need to see it (the path, for buffers).
        let doctor = bed.up["commands"]["doctor"].as_str().expect("doctor");
        let path: Vec<&str> = doctor.split_whitespace().skip(4).collect();

        let before = named(bed.server(), &path);
        assert!(
            before.contains(&finding),
            "{scenario}: doctor does not name {finding}: {before:?}"
        );

        // The fix as `testbed up` prints it, run as printed.
        let fix = bed.up["commands"]["fix"].as_str().expect("fix");
        let state = tempfile::tempdir().expect("state dir");
        let mut args: Vec<&str> = fix.split_whitespace().skip(1).collect();
        assert_eq!(args[..3], ["apply", "--profile", profile.as_str()], "{fix}");
        args.extend(["--state-dir", s(state.path())]);
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, 0, "{scenario}: apply: {stdout}{stderr}");
        let after = named(bed.server(), &path);
        assert!(
            !after.contains(&finding),
            "{scenario}: {finding} still named after apply --profile {profile}: {after:?}"
        );

        let (code, stdout, stderr) = run(&["testbed", "down", &bed.name]);
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains(&bed.name), "{stdout}");
        assert!(
            !std::path::Path::new(&format!("/run/netns/{}", bed.server())).exists(),
            "{scenario}: the server namespace is left"
        );
    }
}

#[test]
fn rps_one_cpu_is_the_scenario_not_the_plain_testbed() {
    if skip_unless_root("rps_one_cpu_is_the_scenario_not_the_plain_testbed") {
        return;
    }
    // The plain testbed's veth has RPS off (rps.off); only the scenario
    // piles its receive work on one CPU.
    let name = unique("scn");
    let up = run_json(&["testbed", "up", "--name", &name, "--queues", "2", "--json"]);
    let plain = Bed { name, up };
    let plain_ids = named(plain.server(), &[]);
    assert!(
        !plain_ids.contains(&"rps.one-cpu".to_string()),
        "{plain_ids:?}"
    );
    assert!(plain_ids.contains(&"rps.off".to_string()), "{plain_ids:?}");
    // Nor are its buffers too small for the path the buffer scenario
    // judges with.
    let path = ["--bandwidth", "50mbit", "--rtt", "30ms"];
    let plain_ids = named(plain.server(), &path);
    assert!(
        !plain_ids.contains(&"tcp.buffers-small".to_string()),
        "{plain_ids:?}"
    );
    drop(plain);

    let bed = Bed::up("softirq-on-app-cpu");
    let masks = sh(&[
        "ip",
        "netns",
        "exec",
        bed.server(),
        "sh",
        "-c",
        "cat /sys/class/net/tb-server/queues/rx-*/rps_cpus",
    ]);
    let masks: Vec<&str> = masks.split_whitespace().collect();
    assert_eq!(masks.len(), 2, "{masks:?}");
    assert!(
        masks.iter().all(|m| m.trim_start_matches('0') == "2"),
        "{masks:?}"
    );
}

/// The words of the command `testbed up` printed as `commands.KEY`, without
/// the leading `nettune`, with each (option, value) of `set` set: the
/// printed value replaced, or the option appended.
fn printed(bed: &Bed, key: &str, set: &[(&str, &str)]) -> Vec<String> {
    let line = bed.up["commands"][key]
        .as_str()
        .unwrap_or_else(|| panic!("commands.{key}: {:#}", bed.up));
    let mut words: Vec<String> = line.split_whitespace().skip(1).map(String::from).collect();
    for (option, value) in set {
        match words.iter().position(|w| w == option) {
            Some(at) => words[at + 1] = value.to_string(),
            None => words.extend([option.to_string(), value.to_string()]),
        }
    }
    words
}

/// Packets the server's veth end has received (one per buffer it was
/// handed, however many datagrams the buffer holds).
fn veth_rx_packets(netns: &str) -> u64 {
    sh(&[
        "ip",
        "netns",
        "exec",
        netns,
        "cat",
        "/sys/class/net/tb-server/statistics/rx_packets",
    ])
    .trim()
    .parse()
    .expect("rx_packets")
}

/// The pile-up scenario's sender costs little per packet, as a NIC does:
/// its printed flood, run as printed (slower, shorter, with --json), hands
/// the veth 64 packets per buffer (the server's veth counts one packet per
/// send), and the printed sink, a plain reader without UDP GRO, takes the
/// datagrams one by one: the buffers are cut on the receiving side, where
/// the scenario piles the receive work.
#[test]
fn the_pile_up_scenario_sends_gso_buffers_that_its_reader_takes_one_by_one() {
    if skip_unless_root("the_pile_up_scenario_sends_gso_buffers_that_its_reader_takes_one_by_one") {
        return;
    }
    let _serial = measuring();
    let bed = Bed::up("softirq-on-app-cpu");
    let mut sink_args = printed(&bed, "server", &[("--duration", "3")]);
    sink_args.push("--json".to_string());
    // 64,000 packets/s: whatever this machine is doing, the reader keeps
    // up and nothing is dropped for want of CPU.
    let mut flood_args = printed(&bed, "client", &[("--duration", "1"), ("--rate", "64000")]);
    flood_args.push("--json".to_string());
    let rx_before = veth_rx_packets(bed.server());
    let sink = ServerChild::spawn_bench(nettune().args(&sink_args));
    let (code, stdout, stderr) = finish_bounded(
        nettune()
            .args(&flood_args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn the flood"),
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0), "{flood_args:?}: {stderr}");
    let flood: Value = serde_json::from_str(&stdout).expect("flood JSON");
    let (code, stdout) = sink.finish(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{sink_args:?}");
    let sink: Value = serde_json::from_str(&stdout).expect("sink JSON");
    let rx = veth_rx_packets(bed.server()) - rx_before;

    let u = |v: &Value, path: &str| {
        v.pointer(path)
            .and_then(Value::as_u64)
            .unwrap_or_else(|| panic!("{path} in {v:#}"))
    };
    let sent = u(&flood, "/packets");
    assert!(sent >= 64, "{flood:#}");
    // One veth packet per 64-datagram send (a few more: ARP).
    assert!(
        rx * 16 <= sent,
        "the veth carried {rx} packets for {sent} datagrams: not whole GSO buffers"
    );
    assert_eq!(flood["gso_segments"], 64, "{flood:#}");
    // The reader is plain: one datagram per packet, each read on its own.
    assert_eq!(sink["gro"], Value::Bool(false), "{sink:#}");
    let received = u(&sink, "/packets");
    assert_eq!(u(&sink, "/datagrams"), received, "{sink:#}");
    assert!(
        received * 2 >= sent,
        "the reader took {received} of {sent} datagrams"
    );
}

/// The veth end `dev` of namespace `netns` as `inspect --json` shows it.
fn inspected(netns: &str, dev: &str) -> Value {
    let host = run_json(&["inspect", "--netns", netns, "--iface", dev, "--json"]);
    iface(&host, dev).clone()
}

/// (defer-hard-irqs, gro-flush-timeout, irq-suspend-timeout) of each NAPI
/// of an interface, in id order.
fn napi_values(entry: &Value) -> Vec<(u64, u64, u64)> {
    let mut napis: Vec<&Value> = entry["netdev"]["napis"]
        .as_array()
        .unwrap_or_else(|| panic!("napis: {:#}", entry["netdev"]))
        .iter()
        .collect();
    napis.sort_by_key(|n| n["id"].as_u64());
    napis
        .iter()
        .map(|n| {
            let f = |k: &str| n[k].as_u64().unwrap_or_else(|| panic!("{k} in {n}"));
            (
                f("defer_hard_irqs"),
                f("gro_flush_timeout_ns"),
                f("irq_suspend_timeout_ns"),
            )
        })
        .collect()
}

/// The deferral scenario's veth really has NAPI at both ends (GRO on, TSO
/// off, set without ethtool), its server end defers IRQs with the long
/// timer, doctor names it with the values it reads and a fix that turns
/// deferral off (nothing busy polls, and a namespace cannot turn busy
/// polling on), the printed fix (the latency profile) writes 0 per NAPI
/// and clears every NAPI finding, also with its state on record, rollback
/// puts the scenario's values back exactly (and the finding with them),
/// and down removes it all.
#[test]
fn the_deferral_scenario_has_napi_and_the_latency_profile_turns_deferral_off() {
    if skip_unless_root("the_deferral_scenario_has_napi_and_the_latency_profile_turns_deferral_off")
    {
        return;
    }
    for sysctl in ["busy_read", "busy_poll"] {
        let us = std::fs::read_to_string(format!("/proc/sys/net/core/{sysctl}")).expect(sysctl);
        assert_eq!(
            us.trim(),
            "0",
            "net.core.{sysctl} is on on this host: busy polling takes packets before the timer, \
             so doctor rightly names nothing"
        );
    }
    let bed = Bed::up("rr-irq-deferral");
    let client = bed.up["client"]["netns"]
        .as_str()
        .expect("client")
        .to_string();
    assert!(
        bed.up["commands"]["server"]
            .as_str()
            .is_some_and(|c| c.contains("bench rr-server") && c.contains("--pin 0")),
        "{:#}",
        bed.up
    );
    for (netns, dev) in [(bed.server(), "tb-server"), (client.as_str(), "tb-client")] {
        let entry = inspected(netns, dev);
        let features = &entry["driver_settings"]["features"];
        assert_eq!(features["rx-gro"]["active"], true, "{dev}: {features:#}");
        assert_eq!(
            features["tx-tcp-segmentation"]["active"], false,
            "{dev}: {features:#}"
        );
        // GRO on: one NAPI per RX queue.
        assert_eq!(napi_values(&entry).len(), 2, "{dev}: {:#}", entry["netdev"]);
    }
    assert!(napi_values(&inspected(&client, "tb-client"))
        .iter()
        .all(|n| (n.0, n.1) == (0, 0)));
    let scenario = inspected(bed.server(), "tb-server");
    let built = napi_values(&scenario);
    assert!(
        built.iter().all(|n| (n.0, n.1) == (100, 200_000)),
        "{built:?}"
    );

    let state = tempfile::tempdir().expect("state dir");
    let state_dir = s(state.path());
    // Every NAPI finding, with the applied states of `state` on record.
    let napi_findings = || -> Vec<Value> {
        let out = nettune()
            .args([
                "doctor",
                "--netns",
                bed.server(),
                "--interval",
                "0",
                "--json",
            ])
            .env("NETTUNE_STATE_DIR", state.path())
            .output()
            .expect("doctor");
        let doc: Value = serde_json::from_slice(&out.stdout).expect("doctor JSON");
        doc["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f["id"].as_str().is_some_and(|id| id.starts_with("napi.")))
            .cloned()
            .collect()
    };
    let doctor = || -> Vec<Value> {
        napi_findings()
            .into_iter()
            .filter(|f| f["id"] == "napi.deferral-delays")
            .collect()
    };
    let found = doctor();
    assert_eq!(found.len(), 1, "{found:#?}");
    let evidence = found[0]["evidence"].as_str().expect("evidence");
    assert!(
        evidence.starts_with(
            "2 RX queues of tb-server (rx-0..1): defer-hard-irqs 100, gro-flush-timeout 200000 ns"
        ) && evidence.contains(
            "busy polling off host-wide (net.core.busy_read 0, net.core.busy_poll 0; a \
                 network namespace cannot set them)"
        ),
        "{evidence}"
    );
    assert_eq!(found[0]["severity"], "warn");
    assert_eq!(found[0]["profile"], "latency");
    // The fix is what the latency plan does here: deferral off.
    let fix = found[0]["fix"].as_str().expect("fix");
    assert!(
        fix.contains("turn IRQ deferral off")
            && fix.contains("defer-hard-irqs 0 and gro-flush-timeout 0 ns"),
        "{fix}"
    );
    let planned: Vec<(&str, &str)> = found[0]["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| {
            (
                c["target"].as_str().expect("target"),
                c["to"].as_str().expect("to"),
            )
        })
        .collect();
    assert_eq!(planned.len(), 4, "{planned:?}");
    assert!(planned.iter().all(|(_, to)| *to == "0"), "{planned:?}");

    // The fix as `testbed up` prints it, run as printed.
    let mut apply = printed(&bed, "fix", &[]);
    assert_eq!(apply[..3], ["apply", "--profile", "latency"], "{apply:?}");
    apply.extend(["--state-dir".to_string(), state_dir.to_string()]);
    let (code, stdout, stderr) = run(&apply.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 0, "apply: {stdout}{stderr}");
    let applied = napi_values(&inspected(bed.server(), "tb-server"));
    assert!(
        applied.iter().all(|n| *n == (0, 0, 0)),
        "deferral off per NAPI where nothing busy polls: {applied:?}"
    );
    let left = napi_findings();
    assert!(left.is_empty(), "named after the fix: {left:#?}");

    let (code, _, stderr) = run(&["rollback", "--state-dir", state_dir]);
    assert_eq!(code, 0, "rollback: {stderr}");
    let back = inspected(bed.server(), "tb-server");
    assert_eq!(back["netdev"]["napis"], scenario["netdev"]["napis"]);
    assert_eq!(doctor().len(), 1, "named again after rollback");

    let (code, _, stderr) = run(&["testbed", "down", &bed.name]);
    assert_eq!(code, 0, "{stderr}");
    for netns in [bed.server(), client.as_str()] {
        assert!(
            !std::path::Path::new(&format!("/run/netns/{netns}")).exists(),
            "{netns} is left"
        );
    }
    assert!(
        !std::path::Path::new(&format!("/run/nettune/testbed/{}.json", bed.name)).exists(),
        "host-wide values recorded"
    );
}

/// A short `experiment search` over `space` on the testbed (2 repeats of
/// 1 s, a fixed seed, journaled in `state_dir`): its JSON and stderr, once
/// it exited 0 (a plan measured better) or 1 (none did).
fn short_search(
    bed: &Bed,
    space: &str,
    bench: &str,
    pins: &[&str],
    state_dir: &std::path::Path,
) -> (Value, String) {
    let child = nettune()
        .args([
            "experiment",
            "search",
            "--testbed",
            &bed.name,
            "--space",
            space,
            "--bench",
            bench,
        ])
        .args(pins)
        .args([
            "--repeat",
            "2",
            "--min-duration",
            "0.5s",
            "--duration",
            "1s",
            "--warmup",
            "0.2s",
            "--seed",
            "7",
            "--state-dir",
            s(state_dir),
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("experiment search");
    let (code, stdout, stderr) = finish_bounded(child, Duration::from_secs(120));
    // 0: a plan measured better; 1: none did. Either way it searched.
    assert!(
        code == Some(0) || code == Some(1),
        "exit {code:?}: {stderr}"
    );
    (serde_json::from_str(&stdout).expect("search JSON"), stderr)
}

/// A short `experiment run` of one stream per config (`args` gives the
/// configs) on the testbed, warming up for `warmup`, its report and
/// journals under `dir`: its results.json, once it exited 0.
fn short_run(bed: &Bed, args: &[&str], warmup: &str, dir: &std::path::Path) -> Value {
    let mut all = vec!["--testbed", bed.name.as_str()];
    all.extend_from_slice(args);
    all.extend([
        "--bench",
        "stream",
        "--repeat",
        "1",
        "--duration",
        "1s",
        "--warmup",
        warmup,
    ]);
    let out = dir.join("exp");
    let child = crate::experiment::experiment_run(&all, &out, &dir.join("state-run"))
        .spawn()
        .expect("experiment run");
    let (code, stdout, stderr) = finish_bounded(child, Duration::from_secs(120));
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).expect("results.json"))
        .expect("json")
}

/// `experiment search --space napi` on the deferral scenario: the three
/// per-NAPI deferrals besides the host as found are its candidates, each
/// measured with the values written per NAPI, and the scenario's values
/// are back when the search ends. Which one wins is a measurement
/// (bench/scenarios.sh --search), not asserted here.
#[test]
fn a_search_over_napi_tries_each_deferral_and_puts_the_scenarios_back() {
    if skip_unless_root("a_search_over_napi_tries_each_deferral_and_puts_the_scenarios_back") {
        return;
    }
    let _guard = measuring();
    let bed = Bed::up("rr-irq-deferral");
    let scenario = inspected(bed.server(), "tb-server");
    let work = tempfile::tempdir().expect("tempdir");
    let (found, stderr) = short_search(
        &bed,
        "napi",
        "rr --proto tcp --pin 1",
        &["--server-pin", "0"],
        work.path(),
    );
    assert_eq!(
        found["candidates"],
        serde_json::json!(["current", "napi=latency", "napi=http", "napi=off"]),
        "{stderr}"
    );
    assert_eq!(found["skipped"], serde_json::json!([]));
    // The first round measured every candidate.
    let first: Vec<&str> = found["search"]["rounds"][0]["scores"]
        .as_array()
        .expect("scores")
        .iter()
        .map(|s| s[0].as_str().expect("name"))
        .collect();
    assert_eq!(first.len(), 3, "{first:?}");
    // The winner's plan names each NAPI by interface and RX queue. Every
    // choice changes the timer (200 us here) on both queues; the http
    // profile's keeps the scenario's 100 polls, the others change them too.
    let changes: Vec<&str> = found["plan"]["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| c["target"].as_str().expect("target"))
        .collect();
    let timers = [
        "napi:tb-server:rx-0:gro-flush-timeout",
        "napi:tb-server:rx-1:gro-flush-timeout",
    ];
    let polls = [
        "napi:tb-server:rx-0:defer-hard-irqs",
        "napi:tb-server:rx-1:defer-hard-irqs",
    ];
    assert!(
        timers.iter().all(|t| changes.contains(t))
            && changes
                .iter()
                .all(|c| timers.contains(c) || polls.contains(c)),
        "{changes:?}"
    );
    let back = inspected(bed.server(), "tb-server");
    assert_eq!(back["netdev"]["napis"], scenario["netdev"]["napis"]);
}

/// `experiment search --space buffers` on the bulk scenario, for its
/// line's path (`--bandwidth 50mbit --rtt 30ms`): the throughput profile's
/// buffers are its candidate, within what the server namespace can write
/// (its tcp_rmem maximum raised to the host's rmem_max, which it cannot
/// change and leaves alone: a note, not a skip), each run measured a
/// stream, and the scenario's tcp_rmem and tcp_wmem are back byte for
/// byte when the search ends. The candidate's label given to `experiment
/// run` with the same path applies the same values. Which one wins is a
/// measurement (bench/scenarios.sh --search), not asserted here.
#[test]
fn a_search_over_buffers_tries_the_profiles_sizes_and_puts_the_scenarios_back() {
    if skip_unless_root(
        "a_search_over_buffers_tries_the_profiles_sizes_and_puts_the_scenarios_back",
    ) {
        return;
    }
    let _guard = measuring();
    let bed = Bed::up("bulk-small-buffers");
    let read = |name: &str| {
        sh(&[
            "ip",
            "netns",
            "exec",
            bed.server(),
            "cat",
            &format!("/proc/sys/net/ipv4/{name}"),
        ])
    };
    let scenario = (read("tcp_rmem"), read("tcp_wmem"));
    let work = tempfile::tempdir().expect("tempdir");
    let path = ["--bandwidth", "50mbit", "--rtt", "30ms"];
    let (found, stderr) = short_search(&bed, "buffers", "stream", &path, work.path());
    assert_eq!(
        found["candidates"],
        serde_json::json!(["current", "buffers=throughput"]),
        "{stderr}"
    );
    assert_eq!(
        (&found["bandwidth"], &found["rtt"]),
        (&serde_json::json!("50mbit"), &serde_json::json!("30ms"))
    );
    assert_eq!(found["skipped"], serde_json::json!([]));
    assert_eq!(
        found["notes"],
        serde_json::json!([format!(
            "buffers: the host's socket caps (net.core.rmem_max, net.core.wmem_max), which \
             network namespace '{}' cannot raise, are left alone: the TCP maxima are kept \
             within them",
            bed.server()
        )])
    );
    // The first round measured it, and every run measured a stream.
    let first: Vec<&str> = found["search"]["rounds"][0]["scores"]
        .as_array()
        .expect("scores")
        .iter()
        .map(|s| s[0].as_str().expect("name"))
        .collect();
    assert_eq!(first, ["buffers=throughput"]);
    for runs in ["winner_runs", "baseline_runs"] {
        let values = found["search"][runs].as_array().expect("runs");
        assert_eq!(values.len(), 2, "{runs}");
        assert!(
            values.iter().all(|v| v.as_f64().is_some_and(|v| v > 0.0)),
            "{runs}: {values:?}"
        );
    }
    // The candidate raises the namespace's receive maximum to the host's
    // cap (the kernel's default 212992 unless the host was tuned) and
    // nothing else.
    let cap = std::fs::read_to_string("/proc/sys/net/core/rmem_max").expect("rmem_max");
    let raised = format!("4096 16384 {}", cap.trim());
    let changes: Vec<(&str, &str, &str)> = found["plan"]["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| {
            (
                c["target"].as_str().expect("target"),
                c["from"].as_str().expect("from"),
                c["to"].as_str().expect("to"),
            )
        })
        .collect();
    assert_eq!(
        changes,
        [(
            "/proc/sys/net/ipv4/tcp_rmem",
            "4096 16384 32768",
            raised.as_str()
        )]
    );
    assert_eq!((read("tcp_rmem"), read("tcp_wmem")), scenario);

    // The label, given to `experiment run` with the same path, applies
    // what the search measured.
    let mut args = vec!["--configs", "current,buffers=throughput"];
    args.extend_from_slice(&path);
    let results = short_run(&bed, &args, "0.2s", work.path());
    let config = results["configs"]
        .as_array()
        .expect("configs")
        .iter()
        .find(|c| c["name"] == "buffers=throughput")
        .expect("the buffers config");
    // The kernel writes tcp_rmem with tabs; compare values, not spacing.
    let words = |v: &str| v.split_whitespace().collect::<Vec<_>>().join(" ");
    let applied: Vec<(String, String, String)> = config["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| {
            (
                c["target"].as_str().expect("target").to_string(),
                words(c["from"].as_str().expect("from")),
                words(c["to"].as_str().expect("to")),
            )
        })
        .collect();
    let searched: Vec<(String, String, String)> = changes
        .iter()
        .map(|(t, f, to)| (t.to_string(), words(f), words(to)))
        .collect();
    assert_eq!(applied, searched);
    assert_eq!((read("tcp_rmem"), read("tcp_wmem")), scenario);
}

/// Run `f` on a thread inside named network namespace `netns`.
fn in_netns<T: Send>(netns: &str, f: impl FnOnce() -> T + Send) -> T {
    let path = format!("/run/netns/{netns}");
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let ns = std::fs::File::open(&path).expect("open the netns file");
                nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
                f()
            })
            .join()
            .expect("netns thread")
    })
}

/// The round-trip time from the client's side of a testbed to the
/// server's: the shortest of 10 UDP echoes (a ping that needs no tool),
/// between the testbed's two addresses.
fn echo_rtt(up: &Value) -> Duration {
    let server = up["server"]["netns"].as_str().expect("server netns");
    let client = up["client"]["netns"].as_str().expect("client netns");
    const PROBES: usize = 10;
    let echo = in_netns(server, || {
        UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 1), 0)).expect("bind")
    });
    echo.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let port = echo.local_addr().expect("addr").port();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut buf = [0u8; 64];
            for _ in 0..PROBES {
                let Ok((n, from)) = echo.recv_from(&mut buf) else {
                    return;
                };
                let _ = echo.send_to(&buf[..n], from);
            }
        });
        let probe = in_netns(client, || {
            UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 0)).expect("bind")
        });
        probe
            .set_read_timeout(Some(Duration::from_secs(3)))
            .expect("timeout");
        let to = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 1), port);
        let mut best = Duration::MAX;
        for i in 0..PROBES {
            let sent = Instant::now();
            probe.send_to(&[i as u8; 32], to).expect("send");
            let mut buf = [0u8; 64];
            let (n, _) = probe.recv_from(&mut buf).expect("an echo within 3 s");
            assert_eq!(buf[..n], [i as u8; 32]);
            best = best.min(sent.elapsed());
        }
        best
    })
}

/// Whether process `pid` runs (a zombie has ended).
fn running(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|end| stat[end + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// Whether link `link` exists in network namespace `netns`.
fn has_link(netns: &str, link: &str) -> bool {
    std::process::Command::new("ip")
        .args(["-n", netns, "link", "show", link])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn delay_line_record(bed: &str) -> std::path::PathBuf {
    std::path::Path::new("/run/nettune/testbed/delay-line").join(format!("{bed}.json"))
}

/// Wait at most `limit` for `done`.
fn wait_for(limit: Duration, done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

#[test]
fn the_bulk_scenario_has_a_real_round_trip_time_and_down_stops_its_delay_line() {
    if skip_unless_root(
        "the_bulk_scenario_has_a_real_round_trip_time_and_down_stops_its_delay_line",
    ) {
        return;
    }
    // A plain testbed's sides are a veth apart: well under a millisecond.
    let name = unique("scn");
    let up = run_json(&["testbed", "up", "--name", &name, "--queues", "2", "--json"]);
    let plain = Bed { name, up };
    let plain_rtt = echo_rtt(&plain.up);
    assert!(plain_rtt < Duration::from_millis(10), "{plain_rtt:?}");
    drop(plain);

    let bed = Bed::up("bulk-small-buffers");
    let line = &bed.up["delay_line"];
    assert_eq!(line["rtt_us"], 30_000, "{:#}", bed.up);
    assert_eq!(line["rate_bps"], 50_000_000, "{:#}", bed.up);
    let pid = line["pid"].as_i64().expect("the forwarder's PID");
    assert!(running(pid), "the forwarder {pid} does not run");
    let client = bed.up["client"]["netns"]
        .as_str()
        .expect("client")
        .to_string();
    assert!(has_link(bed.server(), "tb-sdelay") && has_link(&client, "tb-cdelay"));
    assert!(delay_line_record(&bed.name).exists());

    // The line's 30 ms, never less (a packet is held until it is due),
    // and not much more.
    let rtt = echo_rtt(&bed.up);
    assert!(
        rtt >= Duration::from_micros(29_500) && rtt <= Duration::from_millis(36),
        "round trip over the 30 ms line: {rtt:?}"
    );

    let (code, _, stderr) = run(&["testbed", "down", &bed.name]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!running(pid), "the forwarder {pid} outlived testbed down");
    assert!(!delay_line_record(&bed.name).exists());
    for netns in [bed.server(), client.as_str()] {
        assert!(
            !std::path::Path::new(&format!("/run/netns/{netns}")).exists(),
            "{netns} is left"
        );
    }
}

#[test]
fn a_delay_line_ends_with_its_namespaces_and_a_killed_one_leaves_nothing() {
    if skip_unless_root("a_delay_line_ends_with_its_namespaces_and_a_killed_one_leaves_nothing") {
        return;
    }
    // Killed outright: its TUN devices go with it, and down still
    // removes the rest.
    let bed = Bed::up("bulk-small-buffers");
    let pid = bed.up["delay_line"]["pid"].as_i64().expect("pid");
    // SAFETY: SIGKILL to the forwarder this test's testbed started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    assert!(
        wait_for(Duration::from_secs(5), || !has_link(
            bed.server(),
            "tb-sdelay"
        )),
        "the TUN device outlived its forwarder"
    );
    let (code, _, stderr) = run(&["testbed", "down", &bed.name]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!delay_line_record(&bed.name).exists());
    assert!(!std::path::Path::new(&format!("/run/netns/{}", bed.server())).exists());
    drop(bed);

    // Its namespaces removed by other means: it ends by itself and
    // forgets its record.
    let bed = Bed::up("bulk-small-buffers");
    let pid = bed.up["delay_line"]["pid"].as_i64().expect("pid");
    let client = bed.up["client"]["netns"]
        .as_str()
        .expect("client")
        .to_string();
    sh(&["ip", "netns", "delete", bed.server()]);
    sh(&["ip", "netns", "delete", &client]);
    assert!(
        wait_for(Duration::from_secs(5), || !running(pid)),
        "the forwarder {pid} outlived its namespaces"
    );
    assert!(!delay_line_record(&bed.name).exists());
    let (code, _, stderr) = run(&["testbed", "down", &bed.name]);
    assert_eq!(code, 2, "nothing is left to remove: {stderr}");
}

#[test]
fn experiment_run_measures_the_bulk_scenario_with_a_stream_and_puts_its_buffers_back() {
    if skip_unless_root(
        "experiment_run_measures_the_bulk_scenario_with_a_stream_and_puts_its_buffers_back",
    ) {
        return;
    }
    let _guard = measuring();
    let bed = Bed::up("bulk-small-buffers");
    let tcp_rmem = || {
        sh(&[
            "ip",
            "netns",
            "exec",
            bed.server(),
            "cat",
            "/proc/sys/net/ipv4/tcp_rmem",
        ])
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
    };
    assert_eq!(tcp_rmem(), "4096 16384 32768");
    let work = tempfile::tempdir().expect("tempdir");
    let results = short_run(
        &bed,
        &[
            "--configs",
            "current,throughput:--bandwidth 50mbit --rtt 30ms",
        ],
        "0.5s",
        work.path(),
    );
    assert_eq!(results["complete"], true);
    assert_eq!(results["benches"][0]["kind"], "stream");
    assert_eq!(results["benches"][0]["metric"], "bits/s");
    let runs = results["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    for run in runs {
        assert!(run["value"].as_f64().is_some_and(|v| v > 0.0), "{run}");
    }
    // The profile raised the namespace's buffers for its run, and the
    // experiment put the scenario's back.
    let throughput = results["configs"]
        .as_array()
        .expect("configs")
        .iter()
        .find(|c| c["kind"] == "profile")
        .expect("the profile's config");
    assert!(
        throughput["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .any(|c| c["target"].as_str().is_some_and(|t| t.contains("tcp_rmem"))),
        "{throughput}"
    );
    assert_eq!(tcp_rmem(), "4096 16384 32768");
}
