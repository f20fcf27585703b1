//! The sampler on a copy of the 2-vCPU VM fixture that each test edits
//! between samples (interfaces and IRQs appear, vanish, are re-created;
//! sources go missing), and on the live host.

use std::fs;
use std::path::{Path, PathBuf};

use super::*;
use crate::base::driver::NoDriverData;
use crate::base::Root;
use crate::monitor::{between, Lifecycle};
use crate::nic::live::{LiveEthtool, LiveNetdev, LiveNetlink};

/// A copy of the `vm-2cpu-virtio` fixture in a temp dir.
fn vm_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/vm-2cpu-virtio");
    let dest = dir.path().join("host");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(&dest)
        .status()
        .expect("cp");
    assert!(status.success());
    (dir, dest)
}

fn write(tree: &Path, path: &str, text: &str) {
    let full = tree.join(path.trim_start_matches('/'));
    fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
    fs::write(full, text).expect("write");
}

fn read(tree: &Path, path: &str) -> String {
    fs::read_to_string(tree.join(path.trim_start_matches('/'))).expect("read")
}

/// A virtual interface `name` with ifindex `ifindex` and `rx` packets.
fn add_virtual(tree: &Path, name: &str, ifindex: u32, rx: u64) {
    let dev = format!("/sys/devices/virtual/net/{name}");
    write(tree, &format!("{dev}/ifindex"), &format!("{ifindex}\n"));
    write(tree, &format!("{dev}/operstate"), "up\n");
    write(
        tree,
        &format!("{dev}/statistics/rx_packets"),
        &format!("{rx}\n"),
    );
    let link = tree.join(format!("sys/class/net/{name}"));
    let _ = fs::remove_file(&link);
    std::os::unix::fs::symlink(format!("../../devices/virtual/net/{name}"), link).expect("link");
}

fn sample_at(sampler: &mut Sampler, tree: &Path, secs: f64) -> anyhow::Result<Sample> {
    let root = Root::at(tree)?;
    let src = Inputs {
        root: &root,
        ethtool: &NoDriverData,
        netlink: &NoDriverData,
        netdev: &NoDriverData,
        netns: None,
    };
    sampler.sample(
        &src,
        Stamp {
            elapsed_secs: secs,
            unix_ms: 1_700_000_000_000 + (secs * 1000.0) as u64,
        },
    )
}

fn all() -> Selection {
    Selection {
        all: false,
        iface: None,
    }
}

#[test]
fn counts_the_queue_irqs_of_the_interfaces_it_samples() {
    let (_dir, tree) = vm_copy();
    let mut sampler = Sampler::new(all());
    let s0 = sample_at(&mut sampler, &tree, 0.0).expect("sample");
    assert_eq!(s0.irq_cpus, [0, 1]);
    let names: Vec<(u32, &str, Option<u32>)> = s0
        .irqs
        .iter()
        .map(|i| (i.irq, i.name.as_str(), i.queue))
        .collect();
    assert_eq!(
        names,
        [
            (38, "virtio2-input.0", Some(0)),
            (39, "virtio2-output.0", Some(0)),
            (37, "virtio2-config", None)
        ]
    );
    assert_eq!(s0.irq(38).expect("38").per_cpu, [0, 912_345]);
    assert_eq!(s0.interfaces.len(), 1, "lo is left out by default");
    let eth0 = &s0.interfaces[0];
    assert_eq!((eth0.name.as_str(), eth0.ifindex), ("eth0", Some(2)));
    assert_eq!(eth0.link["rx_packets"], 912_345);
    // The settings came with the first sample.
    let state = s0.state.interface("eth0").expect("eth0 state");
    assert_eq!(state.driver.as_deref(), Some("virtio_net"));
    assert_eq!(state.irqs.len(), 3);
    assert_eq!(
        s0.state.sysctl_u64("net.core.netdev_max_backlog"),
        Some(1000)
    );
    assert_eq!(s0.counters.system.procs_running, Some(1));
    assert!(s0.missing.is_empty(), "{:?}", s0.missing);
}

#[test]
fn picks_up_interfaces_and_irqs_that_appear_vanish_or_are_recreated() {
    let (_dir, tree) = vm_copy();
    let mut sampler = Sampler::new(all());
    let s0 = sample_at(&mut sampler, &tree, 0.0).expect("s0");

    // veth7 appears; eth0 receives 1,000 packets.
    add_virtual(&tree, "veth7", 7, 500);
    let eth0 = "/sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0";
    write(&tree, &format!("{eth0}/statistics/rx_packets"), "913345\n");
    let s1 = sample_at(&mut sampler, &tree, 1.0).expect("s1");
    let r = between(&s0, &s1);
    assert_eq!(
        r.interface("veth7").expect("veth7").lifecycle,
        Lifecycle::Appeared
    );
    assert_eq!(
        r.interface("eth0").expect("eth0").rx_packets_per_sec,
        Some(1_000.0)
    );
    assert!(s1.state.interface("veth7").is_some(), "settings read again");
    assert_eq!(s1.state.read_at_secs, 1.0);

    // veth7 counts from the next interval on.
    write(
        &tree,
        "/sys/devices/virtual/net/veth7/statistics/rx_packets",
        "700\n",
    );
    let s2 = sample_at(&mut sampler, &tree, 2.0).expect("s2");
    let r = between(&s1, &s2);
    assert_eq!(
        r.interface("veth7").expect("veth7").rx_packets_per_sec,
        Some(200.0)
    );
    assert_eq!(
        s2.state.read_at_secs, 1.0,
        "nothing changed: not read again"
    );

    // veth7 is deleted and created again (ifindex 8, counters from 0).
    fs::remove_dir_all(tree.join("sys/devices/virtual/net/veth7")).expect("rm");
    add_virtual(&tree, "veth7", 8, 3);
    let s3 = sample_at(&mut sampler, &tree, 3.0).expect("s3");
    let r = between(&s2, &s3);
    let veth7 = r.interface("veth7").expect("veth7");
    assert_eq!(veth7.lifecycle, Lifecycle::Recreated);
    assert_eq!(veth7.rx_packets_per_sec, None);

    // eth0 vanishes, and its IRQs with it.
    fs::remove_file(tree.join("sys/class/net/eth0")).expect("rm eth0");
    let s4 = sample_at(&mut sampler, &tree, 4.0).expect("s4");
    let r = between(&s3, &s4);
    assert_eq!(r.vanished.interfaces, ["eth0"]);
    assert_eq!(r.vanished.irqs, [38, 39, 37]);
    assert!(s4.irqs.is_empty());
}

#[test]
fn an_irq_renamed_in_proc_interrupts_is_read_again() {
    let (_dir, tree) = vm_copy();
    let mut sampler = Sampler::new(all());
    let s0 = sample_at(&mut sampler, &tree, 0.0).expect("s0");
    // The driver re-requested its vectors: IRQ 38 is now the output queue.
    let text = read(&tree, "/proc/interrupts")
        .replace("virtio2-input.0", "virtio2-inputX")
        .replace("virtio2-output.0", "virtio2-input.0");
    write(&tree, "/proc/interrupts", &text);
    let s1 = sample_at(&mut sampler, &tree, 1.0).expect("s1");
    let irq39 = s1.irq(39).expect("39");
    assert_eq!(
        (irq39.name.as_str(), irq39.role),
        ("virtio2-input.0", VectorRole::Rx)
    );
    let r = between(&s0, &s1);
    let rates39 = r.irqs.iter().find(|i| i.irq == 39).expect("39");
    assert_eq!(rates39.lifecycle, Lifecycle::Recreated);
    assert_eq!(rates39.per_sec, None);
}

#[test]
fn settings_are_read_again_when_due() {
    let (_dir, tree) = vm_copy();
    let mut sampler = Sampler::new(all()).settings_every(10.0);
    sample_at(&mut sampler, &tree, 0.0).expect("s0");
    write(&tree, "/proc/irq/38/smp_affinity_list", "0\n");
    write(&tree, "/proc/irq/38/effective_affinity_list", "0\n");
    let affinity = |s: &Sample| {
        s.state.interface("eth0").expect("eth0").irqs[0]
            .affinity
            .clone()
    };
    let s1 = sample_at(&mut sampler, &tree, 5.0).expect("s1");
    assert_eq!(affinity(&s1), Some(vec![0, 1]), "not due yet");
    let s2 = sample_at(&mut sampler, &tree, 10.5).expect("s2");
    assert_eq!(affinity(&s2), Some(vec![0]));
    assert_eq!(s2.state.read_at_secs, 10.5);
}

#[test]
fn a_named_interface_must_exist_at_first_and_may_vanish_later() {
    let (_dir, tree) = vm_copy();
    let mut sampler = Sampler::new(Selection {
        all: false,
        iface: Some("eth9".into()),
    });
    let err = sample_at(&mut sampler, &tree, 0.0).expect_err("no eth9");
    assert!(
        err.to_string()
            .contains("interface 'eth9' does not exist (present: eth0, lo)"),
        "{err}"
    );
    let mut sampler = Sampler::new(Selection {
        all: false,
        iface: Some("lo".into()),
    });
    let s0 = sample_at(&mut sampler, &tree, 0.0).expect("lo");
    assert_eq!(s0.interfaces.len(), 1);
    assert!(s0.irqs.is_empty(), "eth0's IRQs are not lo's");
    fs::remove_file(tree.join("sys/class/net/lo")).expect("rm lo");
    let s1 = sample_at(&mut sampler, &tree, 1.0).expect("lo gone");
    assert!(s1.interfaces.is_empty());
    assert!(s1.state.interfaces.is_empty());
    assert_eq!(between(&s0, &s1).vanished.interfaces, ["lo"]);
}

#[test]
fn unreadable_counters_degrade_to_what_can_be_read_and_say_which() {
    let (_dir, tree) = vm_copy();
    for gone in ["proc/net/softnet_stat", "proc/net/snmp"] {
        fs::remove_file(tree.join(gone)).expect("rm");
    }
    write(&tree, "/proc/softirqs", "garbage\n");
    let mut sampler = Sampler::new(all());
    let s0 = sample_at(&mut sampler, &tree, 0.0).expect("s0");
    let missing = |section: &str| s0.missing.iter().find(|m| m.section == section);
    let softnet = missing("counters.softnet").expect("softnet listed");
    assert!(
        softnet.path.ends_with("proc/net/softnet_stat"),
        "{softnet:?}"
    );
    assert_eq!(softnet.kind, IssueKind::Missing);
    assert!(missing("counters.snmp").is_some(), "{:?}", s0.missing);
    let softirqs = missing("counters.softirqs").expect("softirqs listed");
    assert_eq!(softirqs.kind, IssueKind::Malformed);
    assert!(s0.counters.softnet.is_empty() && s0.counters.udp.is_empty());
    assert!(!s0.counters.cpu_time.is_empty(), "/proc/stat still read");
    assert!(!s0.irqs.is_empty(), "/proc/interrupts still read");
    // Nothing at all readable: the first sample is an error.
    let empty = tempfile::tempdir().expect("tempdir");
    fs::create_dir_all(empty.path().join("proc")).expect("mkdir");
    let err = sample_at(&mut Sampler::new(all()), empty.path(), 0.0).expect_err("empty");
    assert!(err.to_string().contains("nothing could be read"), "{err}");
}

#[test]
fn samples_the_live_host_twice() {
    let root = Root::live();
    let src = Inputs {
        root: &root,
        ethtool: &LiveEthtool,
        netlink: &LiveNetlink,
        netdev: &LiveNetdev,
        netns: None,
    };
    let mut sampler = Sampler::new(Selection {
        all: true,
        iface: None,
    });
    let start = std::time::Instant::now();
    let first = sampler.sample(&src, Stamp::since(start)).expect("first");
    std::thread::sleep(std::time::Duration::from_millis(50));
    let second = sampler.sample(&src, Stamp::since(start)).expect("second");
    let rates = between(&first, &second);
    assert!(rates.interval_secs > 0.04, "{}", rates.interval_secs);
    assert_eq!(rates.cpus.len(), second.counters.cpu_time.len());
    assert!(rates.cpus.iter().all(|c| c.time.is_some()));
    assert!(rates.interface("lo").is_some(), "{:?}", second.interfaces);
    assert!(second.counters.system.context_switches > first.counters.system.context_switches);
}
