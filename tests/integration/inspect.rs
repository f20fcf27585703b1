//! `nettune inspect` and `nettune capture`: fixtures, live, namespaces,
//! bad input.

use std::fs;

use serde_json::Value;

use crate::common::*;

fn ids(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_u64().expect("number"))
        .collect()
}

fn inspect_fixture(name: &str) -> Value {
    let root = fixture(name);
    run_json(&["inspect", "--json", "--root", root.to_str().expect("path")])
}

#[test]
fn vm_fixture_single_queue_virtio() {
    let host = inspect_fixture("vm-2cpu-virtio");
    assert_eq!(host["schema_version"], 1);
    let cpus = host["cpus"].as_array().expect("cpus");
    assert_eq!(cpus.len(), 2);
    assert_eq!(cpus[1]["node"], 0);
    assert_eq!(ids(&cpus[1]["siblings"]), vec![1]);
    assert_eq!(host["numa_nodes"][0]["id"], 0);
    assert_eq!(ids(&host["numa_nodes"][0]["cpus"]), vec![0, 1]);
    // lo only with --all.
    let names: Vec<&str> = host["interfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .map(|i| i["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, vec!["eth0"]);
    let eth0 = iface(&host, "eth0");
    assert_eq!(eth0["driver"], "virtio_net");
    assert_eq!(eth0["mtu"], 1500);
    assert_eq!(eth0["numa_node"], Value::Null, "numa_node -1 means unknown");
    assert_eq!(eth0["pci_address"], "0000:00:03.0");
    let rx = eth0["rx_queues"].as_array().expect("rx");
    assert_eq!(rx.len(), 1);
    assert_eq!(rx[0]["irq"], 38);
    assert_eq!(ids(&rx[0]["affinity"]), vec![0, 1]);
    assert_eq!(ids(&rx[0]["effective"]), vec![1]);
    assert_eq!(ids(&rx[0]["rps_cpus"]), Vec::<u64>::new());
    assert_eq!(rx[0]["rps_flow_cnt"], 0);
    let tx = eth0["tx_queues"].as_array().expect("tx");
    assert_eq!(tx[0]["irq"], 39);
    assert_eq!(
        tx[0]["xps_cpus"],
        Value::Null,
        "single-queue devices have no xps_cpus"
    );
    // The config vector is listed, but not as a queue.
    let config = eth0["irq_vectors"]
        .as_array()
        .expect("vectors")
        .iter()
        .find(|v| v["irq"] == 37)
        .expect("config vector");
    assert_eq!(config["role"], "other");
    assert_eq!(config["name"], "virtio2-config");
    // Driver data from nettune/driver.json; unsupported stays a word.
    assert_eq!(eth0["driver_settings"]["rings"], "not_supported");
    assert_eq!(eth0["driver_settings"]["channels"]["combined"], 1);
    assert_eq!(eth0["root_qdisc"]["kind"], "pfifo_fast");
    assert_eq!(host["sysctls"]["net.core.rmem_max"], "212992");
    assert_eq!(host["sysctls"]["net.ipv4.tcp_rmem"], "4096 131072 6291456");
    assert_eq!(host["cpuidle"]["driver"], "haltpoll");
    assert_eq!(host["cpuidle"]["guest_halt_poll_ns"], 0);
    assert_eq!(host["irqbalance"]["running"], false);
}

#[test]
fn two_socket_smt_host_with_8_queues_on_node0() {
    let host = inspect_fixture("two-socket-smt-8q");
    let cpus = host["cpus"].as_array().expect("cpus");
    assert_eq!(cpus.len(), 32);
    assert_eq!(ids(&cpus[0]["siblings"]), vec![0, 16]);
    assert_eq!(ids(&cpus[17]["siblings"]), vec![1, 17]);
    assert_eq!(cpus[0]["node"], 0);
    assert_eq!(cpus[8]["node"], 1);
    assert_eq!(cpus[24]["node"], 1);
    assert_eq!(host["numa_nodes"].as_array().expect("nodes").len(), 2);
    let eth0 = iface(&host, "eth0");
    assert_eq!(eth0["driver"], "ixgbe");
    assert_eq!(eth0["numa_node"], 0);
    assert_eq!(eth0["speed_mbps"], 10000);
    let rx = eth0["rx_queues"].as_array().expect("rx");
    assert_eq!(rx.len(), 8);
    for (i, q) in rx.iter().enumerate() {
        assert_eq!(q["index"], i as u64);
        assert_eq!(
            q["irq"],
            120 + i as u64,
            "queue {i} is served by eth0-TxRx-{i}"
        );
        assert_eq!(
            ids(&q["effective"]),
            vec![0],
            "every queue delivered to CPU0"
        );
        assert_eq!(ids(&q["affinity_hint"]), vec![i as u64]);
    }
    let tx = eth0["tx_queues"].as_array().expect("tx");
    assert_eq!(
        tx[3]["irq"], 123,
        "TxRx vectors serve the TX queue of the same number"
    );
    let link = eth0["irq_vectors"]
        .as_array()
        .expect("vectors")
        .iter()
        .find(|v| v["irq"] == 128)
        .expect("link vector");
    assert_eq!(link["role"], "other");
    let hash = &eth0["driver_settings"]["rx_flow_hash"]["udp4"]["fields"];
    assert_eq!(hash, &serde_json::json!(["ip_src", "ip_dst"]));
    assert_eq!(eth0["driver_settings"]["rings"]["rx_max"], 4096);
}

#[test]
fn nic_on_node1_with_rps_xps_and_isolated_cpu() {
    let host = inspect_fixture("two-socket-nic-node1");
    assert_eq!(ids(&host["isolated_cpus"]), vec![15]);
    assert_eq!(ids(&host["nohz_full_cpus"]), vec![15]);
    let nic = iface(&host, "ens1f0");
    assert_eq!(nic["numa_node"], 1);
    assert_eq!(ids(&nic["local_cpus"]), (8..16).collect::<Vec<u64>>());
    assert_eq!(nic["mtu"], 9000);
    let rx = nic["rx_queues"].as_array().expect("rx");
    assert_eq!(rx.len(), 8);
    for (i, q) in rx.iter().enumerate() {
        assert_eq!(
            q["irq"],
            151 + i as u64,
            "mlx5_comp{i} matched by PCI address"
        );
        assert_eq!(ids(&q["affinity"]), vec![8 + i as u64]);
        assert_eq!(ids(&q["rps_cpus"]), (8..16).collect::<Vec<u64>>());
        assert_eq!(q["rps_flow_cnt"], 4096);
    }
    let tx = nic["tx_queues"].as_array().expect("tx");
    assert_eq!(ids(&tx[2]["xps_cpus"]), vec![10]);
    let async_vector = &nic["irq_vectors"].as_array().expect("vectors")[8];
    assert_eq!(async_vector["irq"], 150);
    assert_eq!(async_vector["role"], "other");
}

#[test]
fn all_includes_loopback() {
    let root = fixture("vm-2cpu-virtio");
    let host = run_json(&[
        "inspect",
        "--json",
        "--all",
        "--root",
        root.to_str().expect("path"),
    ]);
    let lo = iface(&host, "lo");
    assert_eq!(lo["physical"], false);
    assert_eq!(lo["rx_queues"].as_array().expect("rx").len(), 1);
}

#[test]
fn human_output_of_a_small_vm_fits_one_screen() {
    let root = fixture("vm-2cpu-virtio");
    let (code, out, err) = run(&["inspect", "--root", root.to_str().expect("path")]);
    assert_eq!(code, 0, "{err}");
    let lines = out.lines().count();
    assert!(lines <= 50, "{lines} lines:\n{out}");
    assert!(
        out.lines().all(|l| l.chars().count() <= 130),
        "a line is too wide:\n{out}"
    );
    let q0 = out
        .lines()
        .find(|l| l.trim_start().starts_with("q0"))
        .expect("queue line");
    assert!(q0.contains("38") && q0.contains("39"), "{q0}");
    assert!(out.contains("rings not supported"), "{out}");
}

#[test]
fn big_host_prints_one_line_per_queue() {
    let root = fixture("two-socket-smt-8q");
    let (code, out, _) = run(&["inspect", "--root", root.to_str().expect("path")]);
    assert_eq!(code, 0);
    let queue_lines = out
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            l.starts_with('q') && l[1..].starts_with(|c: char| c.is_ascii_digit())
        })
        .count();
    assert_eq!(queue_lines, 8, "{out}");
    assert!(out.contains("0-31"), "CPU sets print as ranges:\n{out}");
}

#[test]
fn missing_optional_files_are_unknown_not_errors() {
    let (_dir, root) = fixture_copy("two-socket-smt-8q");
    for irq in 120..129 {
        fs::remove_file(root.join(format!("proc/irq/{irq}/effective_affinity_list")))
            .expect("rm effective");
    }
    fs::remove_dir_all(root.join("sys/devices/system/node")).expect("rm node");
    fs::remove_dir_all(root.join("sys/devices/system/cpu/cpu0/cpufreq")).expect("rm cpufreq");
    let msi = root.join("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/msi_irqs");
    fs::remove_dir_all(msi).expect("rm msi_irqs");
    fs::remove_file(root.join("nettune/driver.json")).expect("rm driver file");
    let host = run_json(&["inspect", "--json", "--root", root.to_str().expect("path")]);
    let eth0 = iface(&host, "eth0");
    assert_eq!(eth0["rx_queues"][0]["effective"], Value::Null);
    assert_eq!(
        eth0["rx_queues"][0]["irq"], 120,
        "without msi_irqs, names still find the IRQs"
    );
    assert_eq!(host["cpus"][0]["node"], Value::Null);
    assert_eq!(eth0["driver_settings"]["rings"], "unknown");
}

#[test]
fn nonexistent_root_is_a_one_line_error() {
    let (code, out, err) = run(&["inspect", "--root", "/nonexistent/nettune-root"]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/nettune-root"), "{err}");
}

/// One garbled file costs only its part of the model: inspect still shows
/// the rest, exits 0, and names the file (in the tree, not as the live
/// host's) with what is wrong, in text and in JSON.
#[test]
fn a_garbled_file_is_a_named_source_not_a_failure() {
    for (file, garble, section) in [
        ("proc/net/softnet_stat", None, "counters.softnet"),
        ("proc/interrupts", Some(("912345", "9x2345")), "interrupts"),
        ("proc/net/snmp", None, "counters.snmp"),
    ] {
        let (_dir, root) = fixture_copy("vm-2cpu-virtio");
        let path = root.join(file);
        let text = match garble {
            Some((from, to)) => fs::read_to_string(&path).expect("read").replace(from, to),
            None => "0000000a zz\nUdp: InDatagrams NoPorts\n".to_string(),
        };
        fs::write(&path, text).expect("write");
        let tree = root.to_str().expect("path");
        let (code, out, err) = run(&["inspect", "--root", tree]);
        assert_eq!(code, 0, "{file}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(out.contains("sources not read"), "{file}: {out}");
        assert!(out.contains(&format!("{tree}/{file}")), "{file}: {out}");
        let host = run_json(&["inspect", "--json", "--root", tree]);
        let issue = host["sources"]
            .as_array()
            .expect("sources")
            .iter()
            .find(|i| i["section"] == section)
            .unwrap_or_else(|| panic!("{file}: {host:#}"));
        assert_eq!(issue["kind"], "malformed", "{issue}");
        assert_eq!(issue["path"], format!("{tree}/{file}"));
        // The rest of the host is there.
        assert!(!host["interfaces"].as_array().expect("ifaces").is_empty());
    }
}

#[test]
fn unknown_interface_or_namespace_exits_2() {
    let root = fixture("vm-2cpu-virtio");
    let (code, _, err) = run(&[
        "inspect",
        "--iface",
        "eth9",
        "--root",
        root.to_str().expect("path"),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("'eth9'") && err.contains("eth0"), "{err}");
    let (code, _, err) = run(&["inspect", "--netns", "nettune-no-such-ns"]);
    assert_eq!(code, 2);
    assert!(err.contains("'nettune-no-such-ns'"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn live_host() {
    let host = run_json(&["inspect", "--json"]);
    let online = fs::read_to_string("/sys/devices/system/cpu/online").expect("online");
    let cpus = host["cpus"].as_array().expect("cpus");
    assert_eq!(
        cpus.len(),
        nettune::base::cpuset::parse_list(&online)
            .expect("list")
            .len()
    );
    let mut expected: Vec<String> = fs::read_dir("/sys/class/net")
        .expect("class/net")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "lo" && n != "bonding_masters")
        .collect();
    expected.sort();
    let mut seen: Vec<String> = host["interfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .map(|i| i["name"].as_str().expect("name").to_string())
        .collect();
    seen.sort();
    assert_eq!(seen, expected);
    let rmem = fs::read_to_string("/proc/sys/net/core/rmem_max").expect("rmem_max");
    assert_eq!(host["sysctls"]["net.core.rmem_max"], rmem.trim());
}

/// What changes between two reads of a live host: counters and PIDs.
fn without_counters(mut host: Value) -> Value {
    host["counters"] = Value::Null;
    host["source"] = Value::Null;
    host["conntrack"]["count"] = Value::Null;
    if let Some(ifaces) = host["interfaces"].as_array_mut() {
        for iface in ifaces {
            iface["statistics"] = Value::Null;
            iface["driver_settings"]["queue_stats"] = Value::Null;
            if let Some(vectors) = iface["irq_vectors"].as_array_mut() {
                for v in vectors {
                    v["per_cpu"] = Value::Null;
                }
            }
        }
    }
    host
}

#[test]
fn capture_then_inspect_root_matches_live() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cap = dir.path().join("cap");
    let cap_str = cap.to_str().expect("path");
    let (code, out, err) = run(&["capture", cap_str]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("captured"), "{out}");
    let live = run_json(&["inspect", "--json", "--all"]);
    let offline = run_json(&["inspect", "--json", "--all", "--root", cap_str]);
    assert_eq!(without_counters(offline), without_counters(live.clone()));
    // The host block names the same machine offline as live (what a fleet
    // report groups by), yet the capture holds only the machine id's hash:
    // machine-id(5) calls the id itself confidential.
    if live["host"]["machine_id_hash"].is_string() {
        let id = fs::read_to_string("/etc/machine-id").expect("machine id");
        assert!(!cap.join("etc/machine-id").exists());
        let info = fs::read_to_string(cap.join("nettune/capture.json")).expect("capture.json");
        assert!(!info.contains(id.trim()), "{info}");
    }
    // Symlinks in a capture are relative, so the tree can be moved.
    let link = fs::read_link(cap.join("sys/class/net/lo")).expect("lo link");
    assert!(link.is_relative(), "{}", link.display());
    let moved = dir.path().join("moved");
    fs::rename(&cap, &moved).expect("move");
    run_json(&["inspect", "--json", "--root", moved.to_str().expect("path")]);
    // A capture never writes into a non-empty directory.
    let (code, _, err) = run(&["capture", moved.to_str().expect("path")]);
    assert_eq!(code, 2);
    assert!(err.contains("not empty"), "{err}");
}

#[test]
fn netns_with_a_four_queue_veth() {
    if skip_unless_root("netns_with_a_four_queue_veth") {
        return;
    }
    let ns = Netns::new("insp");
    ns.veth("ntva", (4, 4), "ntvb", (4, 4));
    ns.exec(&[
        "sh",
        "-c",
        "echo 2 > /sys/class/net/ntva/queues/rx-1/rps_cpus",
    ]);
    ns.exec(&[
        "sh",
        "-c",
        "echo 1 > /sys/class/net/ntva/queues/tx-2/xps_cpus",
    ]);
    let host = run_json(&["inspect", "--json", "--netns", &ns.name]);
    assert_eq!(host["source"]["netns"], ns.name.as_str());
    let names: Vec<&str> = host["interfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .map(|i| i["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        vec!["ntva", "ntvb"],
        "only the namespace's interfaces"
    );
    let veth = iface(&host, "ntva");
    assert_eq!(veth["driver"], "veth");
    assert_eq!(veth["rx_queues"].as_array().expect("rx").len(), 4);
    assert_eq!(ids(&veth["rx_queues"][1]["rps_cpus"]), vec![1]);
    assert_eq!(ids(&veth["rx_queues"][0]["rps_cpus"]), Vec::<u64>::new());
    assert_eq!(ids(&veth["tx_queues"][2]["xps_cpus"]), vec![0]);
    assert_eq!(veth["driver_settings"]["channels"]["rx"], 4);
    // The namespace's own sysctls: set one that is per-netns and see it.
    ns.exec(&["sh", "-c", "echo 1234 > /proc/sys/net/core/somaxconn"]);
    let host = run_json(&["inspect", "--json", "--netns", &ns.name]);
    assert_eq!(host["sysctls"]["net.core.somaxconn"], "1234");
    // Per-CPU counters count for the whole host, also read from here: the
    // model and the text say so.
    let host_wide: Vec<&str> = host["counters"]["host_wide"]
        .as_array()
        .expect("host_wide")
        .iter()
        .map(|v| v.as_str().expect("name"))
        .collect();
    assert_eq!(host_wide, ["softirqs", "cpu_time", "softnet", "system"]);
    let (code, text, _) = run(&["inspect", "--netns", &ns.name]);
    assert_eq!(code, 0);
    assert!(
        text.contains("the whole host's, not only this namespace's"),
        "{text}"
    );

    // A capture of the namespace reads back the same.
    let dir = tempfile::tempdir().expect("tempdir");
    let cap = dir.path().join("cap");
    let (code, _, err) = run(&["capture", "--netns", &ns.name, cap.to_str().expect("path")]);
    assert_eq!(code, 0, "{err}");
    let offline = run_json(&["inspect", "--json", "--root", cap.to_str().expect("path")]);
    let veth = iface(&offline, "ntva");
    assert_eq!(ids(&veth["rx_queues"][1]["rps_cpus"]), vec![1]);
    assert_eq!(offline["sysctls"]["net.core.somaxconn"], "1234");
}

/// A usage error is one line that names what is missing or wrong.
#[test]
fn a_missing_argument_is_named_on_one_line() {
    for (args, named) in [
        (vec!["bench", "udp-flood"], "--to"),
        (vec!["plan"], "--profile"),
        // --proto has a default (tcp); --to or --remote does not.
        (vec!["bench", "rr"], "--to"),
    ] {
        let (code, out, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(named), "{args:?}: {err}");
    }
}
