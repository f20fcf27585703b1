//! Live driver queries: a multi-queue veth pair in a network namespace this
//! test creates, the host's eth0 (read only), and an interface that does
//! not exist. Needs root (creates namespaces); CI runs as root.

use nettune::base::driver::{DriverSettings, Ethtool, Netlink, Qdisc};
use nettune::base::Probe;
use nettune::nic::live::{LiveEthtool, LiveNetlink};

use crate::common::{sh, skip_unless_root, unique, Netns};

/// The root qdisc as `tc qdisc show dev IFACE` prints it
/// (`qdisc noqueue 0: root refcnt 2`).
fn tc_root_qdisc(netns: Option<&str>, iface: &str) -> Qdisc {
    let mut args = Vec::new();
    if let Some(ns) = netns {
        args.extend(["-n", ns]);
    }
    args.extend(["qdisc", "show", "dev", iface]);
    let mut full = vec!["tc"];
    full.extend(args);
    let text = sh(&full);
    let line = text
        .lines()
        .find(|l| l.split_whitespace().any(|w| w == "root"))
        .unwrap_or_else(|| panic!("no root qdisc in: {text}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    Qdisc {
        kind: words[1].to_string(),
        handle: words[2].to_string(),
    }
}

fn queue_indices(settings: &DriverSettings, direction: &str) -> Vec<u32> {
    let queues = settings.queue_stats.value().expect("per-queue statistics");
    queues
        .iter()
        .filter(|q| q.direction == direction)
        .map(|q| q.index)
        .collect()
}

#[test]
fn veth_with_four_queues_answers_from_inside_its_netns() {
    if skip_unless_root("veth_with_four_queues_answers_from_inside_its_netns") {
        return;
    }
    let netns = Netns::new("nic");
    let (a, b) = (unique("nta"), unique("ntb"));
    netns.veth(&a, (4, 4), &b, (4, 4));

    // A qdisc with a handle of its own on the peer, as `tc` would set one.
    sh(&[
        "tc",
        "-n",
        &netns.name,
        "qdisc",
        "add",
        "dev",
        &b,
        "root",
        "handle",
        "8001:",
        "htb",
    ]);

    let (settings, qdisc, peer_qdisc, outside) = netns.inside(|| {
        (
            LiveEthtool.query(&a),
            LiveNetlink.root_qdisc(&a),
            LiveNetlink.root_qdisc(&b),
            LiveEthtool.query("lo"),
        )
    });

    let info = settings.info.value().expect("driver info");
    assert_eq!(info.driver, "veth");
    let channels = settings.channels.value().expect("channels");
    assert_eq!((channels.rx, channels.tx), (4, 4), "{channels:?}");
    assert_eq!((channels.max_rx, channels.max_tx), (4, 4), "{channels:?}");
    let features = settings.features.value().expect("features");
    let gro = features.get("rx-gro").expect("rx-gro");
    assert_eq!(features.get("generic-receive-offload"), Some(gro));
    assert!(gro.changeable, "veth lets GRO be switched");
    assert!(features.contains_key("rx-gro-hw"));
    assert_eq!(settings.rings, Probe::NOT_SUPPORTED);
    assert_eq!(settings.rss_indirection, Probe::NOT_SUPPORTED);
    assert_eq!(settings.rx_flow_hash.len(), 4);
    assert!(settings
        .rx_flow_hash
        .values()
        .all(|hash| *hash == Probe::NOT_SUPPORTED));
    assert_eq!(queue_indices(&settings, "rx"), [0, 1, 2, 3]);
    assert_eq!(queue_indices(&settings, "tx"), [0, 1, 2, 3]);
    let rx0 = &settings.queue_stats.value().expect("queues")[0];
    assert!(rx0.counters.contains_key("xdp_packets"), "{rx0:?}");

    let qdisc = qdisc.value().expect("root qdisc").clone();
    assert!(!qdisc.kind.is_empty());
    assert_eq!(qdisc, tc_root_qdisc(Some(&netns.name), &a));
    let htb = Qdisc {
        kind: "htb".to_string(),
        handle: "8001:".to_string(),
    };
    assert_eq!(tc_root_qdisc(Some(&netns.name), &b), htb);
    assert_eq!(peer_qdisc, Probe::Value(htb));

    // The thread saw the namespace's own loopback: loopback has no driver info.
    assert_eq!(outside.info, Probe::NOT_SUPPORTED);
}

#[test]
fn host_eth0_read_only() {
    let sys = "/sys/class/net/eth0";
    let driver = std::fs::read_link(format!("{sys}/device/driver"))
        .expect("eth0 with a driver (the VM's virtio NIC)");
    let driver = driver
        .file_name()
        .expect("driver name")
        .to_string_lossy()
        .into_owned();
    let rx_queues = std::fs::read_dir(format!("{sys}/queues"))
        .expect("eth0 queues")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
        .count() as u32;

    let settings = LiveEthtool.query("eth0");
    assert_eq!(settings.info.value().expect("driver info").driver, driver);
    if let Some(channels) = settings.channels.value() {
        assert_eq!(channels.combined + channels.rx, rx_queues, "{channels:?}");
    }
    if let Some(rings) = settings.rings.value() {
        assert!(rings.rx > 0 && rings.rx <= rings.rx_max, "{rings:?}");
    }
    if settings.queue_stats.value().is_some() {
        let expected: Vec<u32> = (0..rx_queues).collect();
        assert_eq!(queue_indices(&settings, "rx"), expected);
    }
    assert_eq!(settings.rx_flow_hash.len(), 4);

    let qdisc = LiveNetlink.root_qdisc("eth0");
    assert_eq!(
        qdisc.value().expect("root qdisc"),
        &tc_root_qdisc(None, "eth0")
    );
}

#[test]
fn missing_interface_is_unknown_not_a_panic() {
    for name in [
        unique("ntnone"),
        "a-name-far-too-long".to_string(),
        String::new(),
    ] {
        let settings = LiveEthtool.query(&name);
        assert_eq!(settings.info, Probe::UNKNOWN, "{name}");
        assert_eq!(settings.channels, Probe::UNKNOWN, "{name}");
        assert_eq!(settings.rings, Probe::UNKNOWN, "{name}");
        assert_eq!(settings.coalesce, Probe::UNKNOWN, "{name}");
        assert_eq!(settings.features, Probe::UNKNOWN, "{name}");
        assert_eq!(settings.rss_indirection, Probe::UNKNOWN, "{name}");
        assert_eq!(settings.queue_stats, Probe::UNKNOWN, "{name}");
        assert_eq!(settings.rx_flow_hash.len(), 4);
        assert!(settings.rx_flow_hash.values().all(|h| *h == Probe::UNKNOWN));
        assert_eq!(LiveNetlink.root_qdisc(&name), Probe::UNKNOWN, "{name}");
    }
}
