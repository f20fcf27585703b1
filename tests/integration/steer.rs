//! `nettune steer` on recorded driver answers (ixgbe, mlx5, ice fixture
//! hosts): the plan, apply through the journal, rollback that gives back
//! the driver file byte for byte, drivers without RSS control or ntuple
//! filters refused with nothing changed, and bad input.

use std::path::Path;

use serde_json::Value;

use crate::common::{fixture_copy, run};

const DRIVER: &str = "nettune/driver.json";

fn driver(root: &Path) -> Value {
    let text = std::fs::read_to_string(root.join(DRIVER)).expect("driver file");
    serde_json::from_str(&text).expect("json")
}

/// Write a changed driver file in the layout `capture` writes.
fn write_driver(root: &Path, file: &Value) {
    std::fs::write(
        root.join(DRIVER),
        serde_json::to_string_pretty(file).expect("json") + "\n",
    )
    .expect("write");
}

fn steer(
    root: &Path,
    iface: &str,
    queue: &str,
    flow: &str,
    extra: &[&str],
) -> (i32, String, String) {
    let root = root.to_str().expect("utf8");
    let mut args = vec![
        "steer", "--root", root, "--iface", iface, "--queue", queue, "--flow", flow,
    ];
    args.extend_from_slice(extra);
    run(&args)
}

/// Apply, check what the driver file holds, roll back, compare bytes.
fn apply_and_rollback(host: &str, iface: &str, queue: u32, rings: u64, location: u64) {
    let (_dir, root) = fixture_copy(host);
    let before = std::fs::read(root.join(DRIVER)).expect("read");
    let q = queue.to_string();
    let (code, out, err) = steer(&root, iface, &q, "udp dst-port 53", &[]);
    assert_eq!(code, 0, "{host}: {err}\n{out}");
    assert!(
        out.contains(&format!(
            "steered udp4 dst-port 53 on {iface} to queue {queue}"
        )),
        "{out}"
    );
    assert!(out.contains("undo with: nettune rollback 1"), "{out}");

    let after = driver(&root);
    let e = &after["interfaces"][iface]["ethtool"];
    let table: Vec<u64> = e["rss_indirection"]
        .as_array()
        .expect("table")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert!(
        !table.contains(&u64::from(queue)),
        "{host}: queue still in RSS"
    );
    for q in (0..rings).filter(|q| *q != u64::from(queue)) {
        assert!(table.contains(&q), "{host}: queue {q} lost its weight");
    }
    let rules = e["ntuple"]["rules"].as_array().expect("rules");
    let ours = rules
        .iter()
        .find(|r| r["location"] == location)
        .unwrap_or_else(|| panic!("{host}: no rule at {location}: {rules:?}"));
    assert_eq!(ours["flow"], "udp4 dst-port 53");
    assert_eq!(ours["action"]["queue"], u64::from(queue));
    assert_eq!(e["features"]["rx-ntuple-filter"]["active"], true);
    assert_eq!(e["features"]["ntuple-filters"]["active"], true);
    assert_eq!(e["features"]["rx-gro"]["active"], false);

    // doctor: the steered queue is meant to be out of RSS.
    let root_s = root.to_str().expect("utf8");
    let (_, out, _) = run(&["doctor", "--root", root_s, "--json"]);
    assert!(!out.contains("rss.queue-without-weight"), "{host}: {out}");
    let (code, out, err) = run(&["history", "--root", root_s]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("steer {iface} queue {queue} (udp4 dst-port 53)")),
        "{out}"
    );

    let (code, out, err) = run(&["rollback", "--root", root_s]);
    assert_eq!(code, 0, "{host}: {err}\n{out}");
    let restored = std::fs::read(root.join(DRIVER)).expect("read");
    assert!(
        restored == before,
        "{host}: the driver file differs after rollback"
    );
    // Without the state, the same table is a finding again only if a
    // queue has no weight: the original spreads over all.
    let (_, out, _) = run(&["doctor", "--root", root_s, "--json"]);
    assert!(!out.contains("rss.queue-without-weight"), "{host}: {out}");
}

#[test]
fn ixgbe_steer_applies_and_rollback_gives_back_the_same_bytes() {
    // Location 2045 holds a rule of the operator's: ours goes below it.
    apply_and_rollback("two-socket-smt-8q", "eth0", 4, 8, 2044);
}

#[test]
fn mlx5_steer_applies_and_rollback_gives_back_the_same_bytes() {
    apply_and_rollback("two-socket-nic-node1", "ens1f0", 2, 8, 1023);
}

#[test]
fn ice_steer_applies_and_rollback_gives_back_the_same_bytes() {
    apply_and_rollback("one-socket-ice-16q", "ens801f0", 15, 16, 16383);
}

#[test]
fn a_dry_run_prints_the_method_and_changes_nothing() {
    let (_dir, root) = fixture_copy("two-socket-smt-8q");
    let before = std::fs::read(root.join(DRIVER)).expect("read");
    let (code, out, err) = steer(&root, "eth0", "4", "udp4 dst-port 53", &["--dry-run"]);
    assert_eq!(code, 0, "{err}");
    for line in [
        "ethtool -K eth0 rx-ntuple-filter on",
        "ethtool -K eth0 rx-gro off",
        "ethtool -X eth0 weight 1 1 1 1 0 1 1 1",
        "ethtool -N eth0 flow-type udp4 dst-port 53 action 4 loc 2044",
        "queue 4's IRQ 124 is delivered to CPU 0",
        "--pin 0",
    ] {
        assert!(out.contains(line), "missing '{line}' in:\n{out}");
    }
    assert_eq!(std::fs::read(root.join(DRIVER)).expect("read"), before);
    assert!(
        !root.join("var/lib/nettune").exists(),
        "a dry run wrote a state"
    );
    // JSON names every change by its target.
    let (code, out, _) = steer(
        &root,
        "eth0",
        "4",
        "udp4 dst-port 53",
        &["--dry-run", "--json"],
    );
    assert_eq!(code, 0);
    let plan: Value = serde_json::from_str(&out).expect("json");
    let targets: Vec<&str> = plan["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .filter_map(|c| c["target"].as_str())
        .collect();
    assert_eq!(
        targets,
        [
            "ethtool:eth0:features.rx-ntuple-filter",
            "ethtool:eth0:features.rx-gro",
            "rss:eth0:indirection",
            "ntuple:eth0:2044"
        ]
    );
    assert_eq!(plan["record"]["reader_cpu"], 0);
}

#[test]
fn drivers_without_rss_or_ntuple_are_refused_with_nothing_changed() {
    let (_dir, root) = fixture_copy("vm-2cpu-virtio");
    let before = std::fs::read(root.join(DRIVER)).expect("read");
    let (code, _, err) = steer(&root, "eth0", "0", "udp dst-port 53", &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not supported by driver virtio_net"), "{err}");
    assert!(err.contains("nothing was changed"), "{err}");
    assert_eq!(std::fs::read(root.join(DRIVER)).expect("read"), before);

    // RSS control but no ntuple filters (a driver that answers
    // EOPNOTSUPP to ETHTOOL_GRXCLSRLCNT).
    let (_dir, root) = fixture_copy("two-socket-smt-8q");
    let mut file = driver(&root);
    file["interfaces"]["eth0"]["ethtool"]["ntuple"] = Value::from("not_supported");
    write_driver(&root, &file);
    let before = std::fs::read(root.join(DRIVER)).expect("read");
    let (code, _, err) = steer(&root, "eth0", "4", "udp dst-port 53", &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not supported by driver ixgbe"), "{err}");
    assert!(err.contains("no ntuple filters"), "{err}");
    assert_eq!(std::fs::read(root.join(DRIVER)).expect("read"), before);
}

#[test]
fn a_part_the_driver_refuses_undoes_the_parts_before_it() {
    // The driver turns ntuple filters on, then refuses to turn GRO off
    // (its older name is fixed): nothing may stay half-done.
    let (_dir, root) = fixture_copy("two-socket-smt-8q");
    let mut file = driver(&root);
    file["interfaces"]["eth0"]["ethtool"]["features"]["generic-receive-offload"]["changeable"] =
        Value::from(false);
    write_driver(&root, &file);
    let before = std::fs::read(root.join(DRIVER)).expect("read");
    let (code, _, err) = steer(&root, "eth0", "4", "udp dst-port 53", &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("features.rx-gro"), "{err}");
    assert!(err.contains("were restored"), "{err}");
    assert_eq!(
        std::fs::read(root.join(DRIVER)).expect("read"),
        before,
        "{err}"
    );
}

#[test]
fn rollback_leaves_a_rule_someone_else_put_in_the_slot() {
    let (_dir, root) = fixture_copy("two-socket-smt-8q");
    let (code, _, err) = steer(&root, "eth0", "4", "udp dst-port 53", &[]);
    assert_eq!(code, 0, "{err}");
    // Someone replaces our rule with theirs at the same location.
    let mut file = driver(&root);
    let rules = file["interfaces"]["eth0"]["ethtool"]["ntuple"]["rules"]
        .as_array_mut()
        .expect("rules");
    for r in rules.iter_mut().filter(|r| r["location"] == 2044) {
        r["flow"] = Value::from("tcp4 dst-port 443");
    }
    write_driver(&root, &file);
    let (code, _, err) = run(&["rollback", "--root", root.to_str().expect("utf8")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("tcp4 dst-port 443"), "{err}");
    let after = driver(&root);
    let kept = after["interfaces"]["eth0"]["ethtool"]["ntuple"]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .any(|r| r["flow"] == "tcp4 dst-port 443");
    assert!(kept, "their rule was deleted");
}

#[test]
fn bad_input_is_a_clear_exit_2() {
    let (_dir, root) = fixture_copy("two-socket-smt-8q");
    let before = std::fs::read(root.join(DRIVER)).expect("read");
    for (iface, queue, flow, says) in [
        ("eth0", "9", "udp dst-port 53", "has 8 RX queues (0-7)"),
        ("eth7", "0", "udp dst-port 53", "no such interface"),
        ("eth0", "1", "udp port 53", "'port' is not a field"),
        ("eth0", "1", "icmp", "'icmp' is not a protocol"),
        (
            "eth0",
            "1",
            "tcp4 dst-port 22",
            "has a rule for tcp4 dst-port 22 already",
        ),
    ] {
        let (code, out, err) = steer(&root, iface, queue, flow, &[]);
        assert_eq!(code, 2, "{iface} {queue} {flow}: {err}\n{out}");
        assert!(err.contains(says), "expected '{says}' in: {err}");
    }
    assert_eq!(std::fs::read(root.join(DRIVER)).expect("read"), before);
}
