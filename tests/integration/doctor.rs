//! `nettune doctor` from the outside: bad input exits 2 with a message
//! that shows what would have been right.

use std::process::Command;

fn doctor(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nettune"))
        .arg("doctor")
        .args(args)
        .output()
        .expect("run nettune");
    (
        out.status.code().expect("exit code"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unknown_ignore_id_exits_2_listing_the_valid_ids() {
    let (code, err) = doctor(&["--ignore", "cpu.mitigations,irq.onecpu"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'irq.onecpu'"), "{err}");
    assert!(
        err.contains("irq.one-cpu") && err.contains("softnet.drops"),
        "{err}"
    );
}

#[test]
fn malformed_bandwidth_or_rtt_exits_2_with_an_example() {
    let (code, err) = doctor(&["--bandwidth", "10 gigs", "--rtt", "50ms"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'10 gigs'") && err.contains("10gbit"), "{err}");

    let (code, err) = doctor(&["--bandwidth", "10gbit", "--rtt", "-5ms"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'-5ms'") && err.contains("50ms"), "{err}");
}

use serde_json::Value;

use crate::common::{fixture, fixture_copy, run, skip_unless_root, Netns};

fn findings(args: &[&str]) -> (i32, Vec<Value>, String) {
    let (code, out, err) = run(args);
    let json: Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{out}\n{err}\nnot JSON: {e}"));
    let list = json["findings"].as_array().expect("findings").clone();
    (code, list, err)
}

fn ids(list: &[Value]) -> Vec<&str> {
    list.iter().map(|f| f["id"].as_str().expect("id")).collect()
}

#[test]
fn every_queue_on_cpu0_is_critical_and_worst_first() {
    let root = fixture("two-socket-smt-8q");
    let (code, list, err) = findings(&["doctor", "--json", "--root", root.to_str().expect("path")]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(list[0]["id"], "irq.one-cpu");
    assert_eq!(list[0]["severity"], "crit");
    let evidence = list[0]["evidence"].as_str().expect("evidence");
    assert!(
        evidence.contains("CPU0") && evidence.contains("120-127"),
        "{evidence}"
    );
    for f in &list {
        for field in ["id", "severity", "title", "evidence", "why", "fix"] {
            assert!(
                f[field].as_str().is_some_and(|s| !s.is_empty()),
                "{field} in {f}"
            );
        }
    }
    let found = ids(&list);
    for expected in [
        "rss.udp-hash-ips-only",
        "nic.rings-small",
        "softnet.drops",
        "udp.rcvbuf-errors",
        "tcp.listen-overflows",
    ] {
        assert!(
            found.contains(&expected),
            "{expected} missing from {found:?}"
        );
    }
    // Worst first: severities never increase down the list.
    let rank = |s: &Value| match s.as_str() {
        Some("crit") => 2,
        Some("warn") => 1,
        _ => 0,
    };
    assert!(list
        .windows(2)
        .all(|w| rank(&w[0]["severity"]) >= rank(&w[1]["severity"])));
}

#[test]
fn a_well_tuned_host_has_no_irq_or_rps_findings() {
    let root = fixture("two-socket-nic-node1");
    let (_, list, err) = findings(&["doctor", "--json", "--root", root.to_str().expect("path")]);
    let found = ids(&list);
    for quiet in [
        "irq.one-cpu",
        "irq.shared-cpu",
        "irq.remote-numa",
        "rps.off",
        "rfs.partial",
        "qdisc.no-fair-queue",
    ] {
        assert!(
            !found.contains(&quiet),
            "{quiet} fired on a tuned host: {found:?}\n{err}"
        );
    }
}

#[test]
fn ignore_silences_and_clean_exits_0() {
    let root = fixture("vm-2cpu-virtio");
    let root = root.to_str().expect("path");
    let (code, list, _) = findings(&["doctor", "--json", "--root", root]);
    assert_eq!(code, 1);
    let all: Vec<String> = ids(&list).iter().map(|s| s.to_string()).collect();
    assert!(all.contains(&"rps.off".to_string()), "{all:?}");
    let (code, list, _) = findings(&[
        "doctor",
        "--json",
        "--root",
        root,
        "--ignore",
        &all.join(","),
    ]);
    assert_eq!(code, 0, "every finding ignored: {list:?}");
    assert!(list.is_empty());
}

#[test]
fn missing_data_is_not_a_finding() {
    // Without driver data, no driver rule may fire.
    let (_dir, root) = fixture_copy("two-socket-smt-8q");
    std::fs::remove_file(root.join("nettune/driver.json")).expect("rm");
    let (_, list, _) = findings(&["doctor", "--json", "--root", root.to_str().expect("path")]);
    let found = ids(&list);
    for quiet in [
        "nic.rings-small",
        "rss.udp-hash-ips-only",
        "qdisc.no-fair-queue",
    ] {
        assert!(
            !found.contains(&quiet),
            "{quiet} fired without data: {found:?}"
        );
    }
    assert!(
        found.contains(&"irq.one-cpu"),
        "file-based rules still judge: {found:?}"
    );
}

#[test]
fn human_output_names_each_finding_once() {
    let root = fixture("two-socket-smt-8q");
    let (code, out, _) = run(&["doctor", "--root", root.to_str().expect("path")]);
    assert_eq!(code, 1);
    assert!(
        out.lines().next().is_some_and(|l| l.contains("1 critical")),
        "{out}"
    );
    assert_eq!(out.matches("[irq.one-cpu]").count(), 1, "{out}");
}

#[test]
fn live_host_samples_and_judges() {
    let (code, out, err) = run(&["doctor", "--interval", "0.5", "--json"]);
    assert!(code == 0 || code == 1, "{err}");
    let json: Value = serde_json::from_str(&out).expect("json");
    assert!(json["findings"].is_array());
}

#[test]
fn netns_doctor_judges_the_namespace() {
    if skip_unless_root("netns_doctor_judges_the_namespace") {
        return;
    }
    let ns = Netns::new("doc");
    // One RX queue for the machine's CPUs: RPS off is a finding there.
    ns.ip(&[
        "link", "add", "ntda", "type", "veth", "peer", "name", "ntdb",
    ]);
    ns.ip(&["link", "set", "ntda", "up"]);
    ns.ip(&["link", "set", "ntdb", "up"]);
    let (code, out, err) = run(&["doctor", "--netns", &ns.name, "--interval", "0.2", "--json"]);
    assert!(code == 0 || code == 1, "{err}");
    let json: Value = serde_json::from_str(&out).expect("json");
    let text = json.to_string();
    assert!(
        !text.contains("eth0"),
        "the host's eth0 is not in the namespace: {text}"
    );
    let cpus = std::fs::read_to_string("/sys/devices/system/cpu/online").expect("online");
    if nettune::base::cpuset::parse_list(&cpus)
        .expect("cpus")
        .len()
        > 1
    {
        let rps = json["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .find(|f| f["id"] == "rps.off")
            .unwrap_or_else(|| panic!("rps.off should fire for a 1-queue veth: {text}"));
        assert!(
            rps["evidence"].as_str().expect("evidence").contains("ntda"),
            "{rps}"
        );
    }
}
