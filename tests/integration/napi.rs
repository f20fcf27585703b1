//! NAPI settings and the netdev netlink family: inspect, plan, apply and
//! rollback of per-NAPI IRQ deferral, live on a veth pair with GRO on inside
//! a network namespace this test creates (veth has NAPI only with GRO or
//! XDP on), and from recorded answers for a NIC driver (the fixture trees'
//! driver files). Live tests need root (CI runs as root); no root-namespace
//! value is touched.

use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::common::{fixture, fixture_copy, iface, run, run_json, skip_unless_root, unique, Netns};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// (target, from, to) of the plan's NAPI changes.
fn napi_changes(plan: &Value) -> Vec<(String, String, String)> {
    plan["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .filter(|c| c["target"].as_str().is_some_and(|t| t.starts_with("napi:")))
        .map(|c| {
            let f = |k: &str| c[k].as_str().expect(k).to_string();
            (f("target"), f("from"), f("to"))
        })
        .collect()
}

fn napi_skips(plan: &Value) -> Vec<(String, String)> {
    plan["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .filter(|c| c["target"].as_str().is_some_and(|t| t.starts_with("napi:")))
        .map(|c| {
            (
                c["target"].as_str().expect("target").to_string(),
                c["reason"].as_str().expect("reason").to_string(),
            )
        })
        .collect()
}

/// The three planned values of the latency profile, per RX queue.
fn latency_triples(iface: &str, queues: u32) -> Vec<(String, String, String)> {
    triples(iface, queues, ["2", "20000", "20000000"])
}

/// The three planned values of the http profile, per RX queue.
fn http_triples(iface: &str, queues: u32) -> Vec<(String, String, String)> {
    triples(iface, queues, ["100", "50000", "20000000"])
}

/// (target, "0", value) of defer-hard-irqs, gro-flush-timeout and
/// irq-suspend-timeout, per RX queue.
fn triples(iface: &str, queues: u32, values: [&str; 3]) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for q in 0..queues {
        for (key, to) in [
            "defer-hard-irqs",
            "gro-flush-timeout",
            "irq-suspend-timeout",
        ]
        .into_iter()
        .zip(values)
        {
            out.push((
                format!("napi:{iface}:rx-{q}:{key}"),
                "0".to_string(),
                to.to_string(),
            ));
        }
    }
    out
}

/// (id, defer-hard-irqs, gro-flush-timeout, irq-suspend-timeout) of each NAPI.
fn napis(entry: &Value) -> Vec<(u64, u64, u64, u64)> {
    entry["netdev"]["napis"]
        .as_array()
        .unwrap_or_else(|| panic!("napis: {:#}", entry["netdev"]))
        .iter()
        .map(|n| {
            let f = |k: &str| n[k].as_u64().unwrap_or_else(|| panic!("{k} in {n}"));
            (
                f("id"),
                f("defer_hard_irqs"),
                f("gro_flush_timeout_ns"),
                f("irq_suspend_timeout_ns"),
            )
        })
        .collect()
}

#[test]
fn inspect_shows_each_queues_napi_irq_settings_and_qstats_from_recorded_answers() {
    let tree = fixture("vm-2cpu-virtio");
    let (code, out, err) = run(&["inspect", "--root", s(&tree)]);
    assert_eq!(code, 0, "{err}");
    let table = out
        .lines()
        .skip_while(|l| !l.contains("queue  napi"))
        .take(3)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        table.contains("irq  thread  defer  gro-flush  irq-suspend  qstats"),
        "{out}"
    );
    let rx0 = table.lines().nth(1).expect("rx-0 row");
    assert!(
        rx0.starts_with("  rx-0   257 ") && rx0.contains("bytes 1211234567 packets 912345"),
        "{table}"
    );
    assert!(out.contains("napi-set yes"), "{out}");
    let host = run_json(&["inspect", "--root", s(&tree), "--json"]);
    assert_eq!(napis(iface(&host, "eth0")), [(257, 0, 0, 0)]);
    // A 6.1 kernel has no netdev family: said once, no table.
    let (_, out, _) = run(&["inspect", "--root", s(&fixture("two-socket-nic-node1"))]);
    assert!(
        out.contains(
            "napi   per queue (netdev netlink): not supported by this kernel (queue-get/napi-get: Linux 6.8+)"
        ),
        "{out}"
    );
}

#[test]
fn napi_values_planned_applied_and_rolled_back_in_a_recorded_tree() {
    let (_dir, tree) = fixture_copy("vm-2cpu-busy-poll");
    let driver = tree.join("nettune/driver.json");
    let before = fs::read(&driver).expect("driver file");
    let plan = run_json(&["plan", "--json", "--root", s(&tree), "--profile", "latency"]);
    assert_eq!(napi_changes(&plan), latency_triples("eth0", 1));
    let findings = |tree: &Path| -> Vec<String> {
        let (code, out, err) = run(&["doctor", "--json", "--root", s(tree)]);
        assert!(code == 0 || code == 1, "{err}");
        let v: Value = serde_json::from_str(&out).expect("doctor json");
        v["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .map(|f| f["id"].as_str().expect("id").to_string())
            .collect()
    };
    assert!(findings(&tree).contains(&"napi.no-irq-deferral".to_string()));

    let state = tempfile::tempdir().expect("state dir");
    let state_dir = s(state.path());
    let (code, _, err) = run(&[
        "apply",
        "--root",
        s(&tree),
        "--profile",
        "latency",
        "--state-dir",
        state_dir,
    ]);
    assert_eq!(code, 0, "{err}");
    let host = run_json(&["inspect", "--root", s(&tree), "--json"]);
    assert_eq!(napis(iface(&host, "eth0")), [(257, 2, 20_000, 20_000_000)]);
    assert!(!findings(&tree).contains(&"napi.no-irq-deferral".to_string()));
    let (code, _, err) = run(&["rollback", "--root", s(&tree), "--state-dir", state_dir]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(fs::read(&driver).expect("driver file"), before);
}

#[test]
fn kernels_without_napi_set_are_left_alone_with_one_reason() {
    // A 6.8-6.12 kernel: queue-get and napi-get, but no napi-set.
    let (_dir, tree) = fixture_copy("vm-2cpu-busy-poll");
    let driver = tree.join("nettune/driver.json");
    let mut file: Value =
        serde_json::from_str(&fs::read_to_string(&driver).expect("read")).expect("json");
    file["interfaces"]["eth0"]["netdev"]["napi_set"] = Value::Bool(false);
    fs::write(&driver, serde_json::to_string_pretty(&file).expect("json")).expect("write");
    let plan = run_json(&["plan", "--json", "--root", s(&tree), "--profile", "latency"]);
    assert!(napi_changes(&plan).is_empty());
    let skips = napi_skips(&plan);
    assert_eq!(skips.len(), 1, "{skips:#?}");
    assert_eq!(skips[0].0, "napi:eth0:rx-0:defer-hard-irqs");
    assert!(
        skips[0]
            .1
            .contains("this kernel has no netdev napi-set (Linux 6.13+)"),
        "{}",
        skips[0].1
    );
    // Doctor has nothing to advise that the kernel could do.
    let (_, out, _) = run(&["doctor", "--json", "--root", s(&tree)]);
    assert!(!out.contains("napi.no-irq-deferral"), "{out}");

    // 6.1: no netdev family at all.
    let plan = run_json(&[
        "plan",
        "--json",
        "--root",
        s(&fixture("two-socket-nic-node1")),
        "--profile",
        "http",
    ]);
    let skips = napi_skips(&plan);
    assert_eq!(skips.len(), 1, "{skips:#?}");
    assert!(
        skips[0].1.contains("no netdev netlink family") && skips[0].1.contains("8 RX queues"),
        "{}",
        skips[0].1
    );
}

/// A namespace with a veth pair `a` (2 RX / 2 TX queues) and its peer `b`.
fn veth(tag: &str) -> (Netns, String, String) {
    let ns = Netns::new(tag);
    let (a, b) = (unique("na"), unique("nb"));
    ns.veth(&a, (2, 2), &b, (2, 2));
    (ns, a, b)
}

fn gro(ns: &Netns, dev: &str, on: bool) {
    ns.exec(&["ethtool", "-K", dev, "gro", if on { "on" } else { "off" }]);
}

fn inspect_ns(ns: &Netns, dev: &str) -> Value {
    let host = run_json(&["inspect", "--netns", &ns.name, "--iface", dev, "--json"]);
    iface(&host, dev).clone()
}

/// `VERB ... --netns NS --iface DEV --profile http`. The http profile: it
/// defers IRQs in any namespace, while the latency profile leaves deferral
/// off where nothing busy polls, as in a namespace of a host without busy
/// polling.
fn http<'a>(verb: &[&'a str], ns: &'a Netns, dev: &'a str) -> Vec<&'a str> {
    let mut args = verb.to_vec();
    args.extend(["--netns", &ns.name, "--iface", dev, "--profile", "http"]);
    args
}

fn nettune_ok(args: &[&str]) -> String {
    let (code, out, err) = run(args);
    assert_eq!(code, 0, "nettune {args:?}: {err}\n{out}");
    out
}

#[test]
fn napi_values_round_trip_on_a_veth_with_gro_on_in_a_namespace() {
    if skip_unless_root("napi_values_round_trip_on_a_veth_with_gro_on_in_a_namespace") {
        return;
    }
    let (ns, a, _b) = veth("napi");
    gro(&ns, &a, true);
    let before = inspect_ns(&ns, &a);
    let ids: Vec<u64> = napis(&before).iter().map(|n| n.0).collect();
    assert_eq!(ids.len(), 2, "veth with GRO on: one NAPI per RX queue");
    assert!(napis(&before).iter().all(|n| (n.1, n.2, n.3) == (0, 0, 0)));

    assert_eq!(
        napi_changes(&run_json(&http(&["plan", "--json"], &ns, &a))),
        http_triples(&a, 2)
    );

    let state = tempfile::tempdir().expect("state dir");
    let state_dir = s(state.path());
    let apply = http(&["apply", "--state-dir", state_dir], &ns, &a);
    nettune_ok(&apply);
    let applied = inspect_ns(&ns, &a);
    assert_eq!(
        napis(&applied),
        ids.iter()
            .map(|&id| (id, 100, 50_000, 20_000_000))
            .collect::<Vec<_>>()
    );
    // Per NAPI: the device-wide sysfs defaults are not what changed.
    assert_eq!(applied["napi_defer_hard_irqs"], 0);
    assert_eq!(applied["gro_flush_timeout"], 0);

    nettune_ok(&["rollback", "--state-dir", state_dir]);
    assert_eq!(
        inspect_ns(&ns, &a)["netdev"]["napis"],
        before["netdev"]["napis"]
    );
}

/// Journaled by queue, not by NAPI id: switching GRO off and on gives the
/// queues new NAPIs (new ids), doctor sees the http state without
/// deferral, apply sets the new NAPIs by queue, and rollback restores them
/// by queue; with the NAPIs gone it refuses, says how, and keeps the state.
#[test]
fn napi_settings_follow_the_queue_when_gro_toggles_and_ids_change() {
    if skip_unless_root("napi_settings_follow_the_queue_when_gro_toggles_and_ids_change") {
        return;
    }
    let (ns, a, _b) = veth("napig");
    let state = tempfile::tempdir().expect("state dir");
    let state_dir = s(state.path());
    let apply = http(&["apply", "--state-dir", state_dir], &ns, &a);
    // GRO off: no NAPI, one reason, nothing changed on the NAPIs.
    let plan = run_json(&http(&["plan", "--json"], &ns, &a));
    let skips = napi_skips(&plan);
    assert_eq!(skips.len(), 1, "{skips:#?}");
    assert!(skips[0].1.contains("gro on"), "{}", skips[0].1);
    nettune_ok(&apply);

    // GRO on now: NAPIs without deferral under an http state.
    gro(&ns, &a, true);
    let first_ids: Vec<u64> = napis(&inspect_ns(&ns, &a)).iter().map(|n| n.0).collect();
    let doctor = || -> Value {
        let out = crate::common::nettune()
            .args(["doctor", "--json", "--netns", &ns.name])
            .env("NETTUNE_STATE_DIR", state.path())
            .output()
            .expect("doctor");
        serde_json::from_slice(&out.stdout).expect("doctor json")
    };
    let report = doctor();
    let finding = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["id"] == "napi.no-irq-deferral")
        .unwrap_or_else(|| panic!("no napi.no-irq-deferral: {report:#}"));
    assert!(
        finding["evidence"]
            .as_str()
            .expect("evidence")
            .contains("(profile http)"),
        "{finding:#}"
    );
    // Inside a namespace the plan tunes its veths without --iface: the
    // fix is what `nettune plan --profile http --netns NS` makes.
    let fix = finding["fix"].as_str().expect("fix");
    assert!(
        fix.contains("defer-hard-irqs 100,") && !fix.contains("--iface"),
        "{fix}"
    );
    assert_eq!(finding["profile"], "http", "{finding:#}");

    // A second apply sets the NAPIs, by queue.
    nettune_ok(&apply);
    assert!(napis(&inspect_ns(&ns, &a))
        .iter()
        .all(|n| (n.1, n.2, n.3) == (100, 50_000, 20_000_000)));
    let report = doctor();
    assert!(
        !report.to_string().contains("napi.no-irq-deferral"),
        "{report:#}"
    );

    // GRO off and on: new NAPI ids. veth (6.18) gives them the device's
    // defer-hard-irqs and gro-flush-timeout (0) and keeps the old
    // irq-suspend-timeout; history shows what no longer holds.
    gro(&ns, &a, false);
    gro(&ns, &a, true);
    let now = napis(&inspect_ns(&ns, &a));
    assert!(
        now.iter().all(|n| !first_ids.contains(&n.0)),
        "{now:?} {first_ids:?}"
    );
    assert!(now.iter().all(|n| (n.1, n.2) == (0, 0)), "{now:?}");
    let history = nettune_ok(&["history", "--netns", &ns.name, "--state-dir", state_dir]);
    assert!(
        history.contains(&format!(
            "{a} rx-1 napi defer-hard-irqs is '0', was set to '100'"
        )),
        "{history}"
    );

    // The NAPIs gone: rollback cannot restore them, says how, keeps the state.
    gro(&ns, &a, false);
    let (code, _, err) = run(&["rollback", "--state-dir", state_dir]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("has no NAPI instance now") && err.contains(&format!("ethtool -K {a} gro on")),
        "{err}"
    );
    // GRO on again: rollback restores the new NAPIs by queue, exactly.
    gro(&ns, &a, true);
    nettune_ok(&["rollback", "--state-dir", state_dir]);
    assert!(napis(&inspect_ns(&ns, &a))
        .iter()
        .all(|n| (n.1, n.2, n.3) == (0, 0, 0)));
    nettune_ok(&["rollback", "--state-dir", state_dir]);
}

/// The live client agrees with the kernel's own effects: GRO on creates one
/// NAPI per RX queue, and a write to the device's sysfs default reaches
/// every NAPI (which is why plan writes per NAPI instead).
#[test]
fn live_netdev_answers_match_what_the_kernel_does() {
    if skip_unless_root("live_netdev_answers_match_what_the_kernel_does") {
        return;
    }
    let (ns, a, _b) = veth("napil");
    assert!(inspect_ns(&ns, &a)["netdev"]["napis"]
        .as_array()
        .expect("napis")
        .is_empty());
    gro(&ns, &a, true);
    ns.exec(&[
        "sh",
        "-c",
        &format!("echo 7 > /sys/class/net/{a}/napi_defer_hard_irqs"),
    ]);
    let entry = inspect_ns(&ns, &a);
    assert_eq!(napis(&entry).len(), 2);
    assert!(
        napis(&entry).iter().all(|n| n.1 == 7),
        "{:#}",
        entry["netdev"]
    );
    let (_, text, _) = run(&["inspect", "--netns", &ns.name, "--iface", &a]);
    assert!(
        text.contains("one NAPI per RX queue, matched in id order"),
        "{text}"
    );
}
