//! Live driver queries: a multi-queue veth pair in a network namespace this
//! test creates, the host's eth0 (read only), and an interface that does
//! not exist. Needs root (creates namespaces); CI runs as root.

use std::fs::File;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use nettune::host::Probe;
use nettune::nic::live::{LiveEthtool, LiveNetlink};
use nettune::nic::{DriverSettings, Ethtool, Netlink, Qdisc};
use nix::sched::CloneFlags;

static NEXT_ID: AtomicU32 = AtomicU32::new(0);

/// A name unique to this process and call, short enough for an interface.
fn unique(prefix: &str) -> String {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{}x{id}", std::process::id())
}

fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "these tests create network namespaces: run as root"
    );
}

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace deleted on drop, also when an assertion fails.
struct Netns {
    name: String,
}

impl Netns {
    fn create() -> Netns {
        let name = unique("nettune-nic-");
        run("ip", &["netns", "add", &name]);
        Netns { name }
    }

    fn ip(&self, args: &[&str]) -> String {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// Run `f` on a thread inside the namespace; sockets it opens belong there.
    fn inside<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.name);
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let ns = File::open(&path).expect("open the netns file");
                    nix::sched::setns(&ns, CloneFlags::CLONE_NEWNET).expect("setns");
                    f()
                })
                .join()
                .expect("netns thread")
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// The root qdisc as `tc qdisc show dev IFACE` prints it
/// (`qdisc noqueue 0: root refcnt 2`).
fn tc_root_qdisc(netns: Option<&str>, iface: &str) -> Qdisc {
    let mut args = Vec::new();
    if let Some(ns) = netns {
        args.extend(["-n", ns]);
    }
    args.extend(["qdisc", "show", "dev", iface]);
    let text = run("tc", &args);
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
    require_root();
    let netns = Netns::create();
    let (a, b) = (unique("nta"), unique("ntb"));
    netns.ip(&[
        "link",
        "add",
        &a,
        "numrxqueues",
        "4",
        "numtxqueues",
        "4",
        "type",
        "veth",
        "peer",
        "name",
        &b,
        "numrxqueues",
        "4",
        "numtxqueues",
        "4",
    ]);
    netns.ip(&["link", "set", &a, "up"]);
    netns.ip(&["link", "set", &b, "up"]);

    // A qdisc with a handle of its own on the peer, as `tc` would set one.
    run(
        "tc",
        &[
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
        ],
    );

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

    // inspect has 50 ms for everything; one NIC must cost a small part.
    let rounds = 50;
    let start = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(LiveEthtool.query("eth0"));
    }
    let per_query = start.elapsed() / rounds;
    let start = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(LiveNetlink.root_qdisc("eth0"));
    }
    let per_qdisc = start.elapsed() / rounds;
    eprintln!("eth0: ethtool query {per_query:?}, root qdisc {per_qdisc:?}");
    assert!(
        per_query.as_millis() < 10,
        "ethtool query took {per_query:?}"
    );
    assert!(per_qdisc.as_millis() < 10, "qdisc dump took {per_qdisc:?}");
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
