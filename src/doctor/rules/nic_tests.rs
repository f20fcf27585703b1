use crate::base::driver::{FlowHash, Qdisc};
use crate::base::Probe;
use crate::doctor::testkit::*;
use crate::doctor::Severity;

#[test]
fn rps_off_fires_on_the_single_queue_vm() {
    let findings = diagnose(&vm_2cpu_single_queue());
    let f = assert_fires(
        &findings,
        "rps.off",
        Severity::Warn,
        &["eth0", "1 RX queue for 2 CPUs", "rx-0"],
    );
    // NIC node unknown: every eligible CPU, mask 3; RFS 32768 / 1 queue.
    assert!(f.fix.contains("Write 3 (CPUs 0-1)"), "{}", f.fix);
    assert!(f.fix.contains("rps_flow_cnt = 32768"), "{}", f.fix);
    assert_eq!(f.profile, Some("pps"));
}

#[test]
fn rps_off_uses_the_nic_node_and_points_at_more_queues() {
    let mut host = two_socket_smt_8q();
    for q in &mut iface(&mut host, "eth0").rx_queues {
        q.rps_cpus = Some(vec![]);
    }
    let f = assert_fires(
        &diagnose(&host),
        "rps.off",
        Severity::Warn,
        &["8 RX queues for 32 CPUs", "all 8 RX queues"],
    );
    assert!(
        f.fix.contains("ff00ff (node 0's CPUs 0-7,16-23)"),
        "{}",
        f.fix
    );
    assert!(f.fix.contains("rps_flow_cnt = 4096"), "{}", f.fix);
    assert!(f.fix.contains("can run 63 queues"), "{}", f.fix);
}

#[test]
fn rps_off_fires_on_a_multi_queue_veth_in_a_namespace_but_not_on_a_bridge() {
    // Inside a namespace: a veth with 4 queues for 2 CPUs. Its queues are
    // not hardware queues: RPS is off, and pps plans it on all four.
    let mut host = vm_2cpu_single_queue();
    host.source.netns = Some("blue".to_string());
    let veth = iface(&mut host, "eth0");
    veth.physical = false;
    veth.driver = Some("veth".into());
    veth.irq_vectors.clear();
    let q = veth.rx_queues[0].clone();
    veth.rx_queues = (0..4)
        .map(|index| crate::host::RxQueue {
            index,
            irq: None,
            ..q.clone()
        })
        .collect();
    let f = assert_fires(
        &diagnose(&host),
        "rps.off",
        Severity::Warn,
        &["eth0", "virtual (veth)", "all 4 RX queues"],
    );
    assert_eq!(f.profile, Some("pps"));
    let masks = f
        .changes
        .iter()
        .filter(|c| c.target.to_string().ends_with("/rps_cpus") && c.to == "3")
        .count();
    assert_eq!(masks, 4, "{:?}", f.changes);
    // The same as a bridge: its packets come through its ports, whose RPS
    // placed them; no finding.
    let br = iface(&mut host, "eth0");
    br.driver = Some("bridge".into());
    br.devtype = Some("bridge".into());
    none(&diagnose(&host), "rps.off");
}

#[test]
fn rps_off_silent_when_on_covered_or_unknown() {
    none(&diagnose(&two_socket_smt_8q()), "rps.off");
    // Queues cover the CPUs: 2 queues on 2 CPUs (redpanda's rule).
    let mut host = vm_2cpu_single_queue();
    let mut q1 = iface(&mut host, "eth0").rx_queues[0].clone();
    q1.index = 1;
    iface(&mut host, "eth0").rx_queues.push(q1);
    none(&diagnose(&host), "rps.off");
    // rps_cpus unreadable.
    let mut host = vm_2cpu_single_queue();
    iface(&mut host, "eth0").rx_queues[0].rps_cpus = None;
    none(&diagnose(&host), "rps.off");
    // A veth is not judged without --all or --netns.
    let mut host = vm_2cpu_single_queue();
    let eth0 = iface(&mut host, "eth0");
    eth0.physical = false;
    eth0.driver = Some("veth".into());
    none(&diagnose(&host), "rps.off");
}

#[test]
fn rfs_partial_fires_for_each_half_missing_and_wrong_sizes() {
    // Entries set, flow counts 0.
    let mut host = two_socket_smt_8q();
    for q in &mut iface(&mut host, "eth0").rx_queues {
        q.rps_flow_cnt = Some(0);
    }
    let f = assert_fires(
        &diagnose(&host),
        "rfs.partial",
        Severity::Warn,
        &["= 32768", "0 on 8 RX queues"],
    );
    assert!(f.fix.contains("rps_flow_cnt = 4096"), "{}", f.fix);

    // Flow counts set, entries 0.
    let mut host = two_socket_smt_8q();
    set_sysctl(&mut host, "net.core.rps_sock_flow_entries", "0");
    assert_fires(
        &diagnose(&host),
        "rfs.partial",
        Severity::Warn,
        &["4096", "= 0"],
    );

    // 32768 per queue on 8 queues: 8x the socket table.
    let mut host = two_socket_smt_8q();
    for q in &mut iface(&mut host, "eth0").rx_queues {
        q.rps_flow_cnt = Some(32768);
    }
    assert_fires(
        &diagnose(&host),
        "rfs.partial",
        Severity::Warn,
        &["32768 on RX queues 0-7", "= 4096"],
    );
}

#[test]
fn rfs_partial_silent_when_consistent_off_or_unknown() {
    none(&diagnose(&two_socket_smt_8q()), "rfs.partial");
    // RFS fully off (the VM's defaults): that is rps.off's business.
    none(&diagnose(&vm_2cpu_single_queue()), "rfs.partial");
    // Rounded up by the kernel: 32768 / 3 queues -> 16384 each.
    let mut host = two_socket_smt_8q();
    iface(&mut host, "eth0").rx_queues.truncate(3);
    for q in &mut iface(&mut host, "eth0").rx_queues {
        q.rps_flow_cnt = Some(16384);
    }
    none(&diagnose(&host), "rfs.partial");
    let mut host = two_socket_smt_8q();
    host.sysctls.remove("net.core.rps_sock_flow_entries");
    none(&diagnose(&host), "rfs.partial");
}

#[test]
fn udp_hash_ips_only_fires_on_a_multiqueue_nic() {
    let mut host = two_socket_smt_8q();
    iface(&mut host, "eth0")
        .driver_settings
        .rx_flow_hash
        .insert(
            "udp4".into(),
            Probe::Value(FlowHash {
                fields: vec!["ip_src".into(), "ip_dst".into()],
            }),
        );
    let f = assert_fires(
        &diagnose(&host),
        "rss.udp-hash-ips-only",
        Severity::Warn,
        &["8 RX queues", "udp4 on ip_src, ip_dst"],
    );
    assert!(
        f.fix.contains("ethtool -N eth0 rx-flow-hash udp4 sdfn"),
        "{}",
        f.fix
    );
    assert!(!f.fix.contains("udp6"), "{}", f.fix);
}

#[test]
fn udp_hash_silent_with_ports_single_queue_or_unsupported() {
    none(&diagnose(&two_socket_smt_8q()), "rss.udp-hash-ips-only");
    // The VM: not supported and one queue.
    none(&diagnose(&vm_2cpu_single_queue()), "rss.udp-hash-ips-only");
    let mut host = two_socket_smt_8q();
    iface(&mut host, "eth0")
        .driver_settings
        .rx_flow_hash
        .insert("udp4".into(), Probe::UNKNOWN);
    none(&diagnose(&host), "rss.udp-hash-ips-only");
}

#[test]
fn rings_small_fires_when_the_nic_misses_packets() {
    let mut host = two_socket_smt_8q();
    let eth0 = iface(&mut host, "eth0");
    if let Probe::Value(r) = &mut eth0.driver_settings.rings {
        r.rx = 512;
    }
    eth0.statistics.insert("rx_missed_errors".into(), 12_345);
    let f = assert_fires(
        &diagnose(&host),
        "nic.rings-small",
        Severity::Warn,
        &["512 of a possible 4096", "rx_missed_errors 12,345"],
    );
    assert!(f.fix.contains("ethtool -G eth0 rx 4096"), "{}", f.fix);
    assert_eq!(f.profile, Some("throughput"));
}

#[test]
fn rings_small_silent_without_drops_at_max_or_unsupported() {
    // Small ring, no loss: fine.
    let mut host = two_socket_smt_8q();
    if let Probe::Value(r) = &mut iface(&mut host, "eth0").driver_settings.rings {
        r.rx = 512;
    }
    none(&diagnose(&host), "nic.rings-small");
    // Loss at the maximum ring: the ring is not the fix.
    let mut host = two_socket_smt_8q();
    iface(&mut host, "eth0")
        .statistics
        .insert("rx_missed_errors".into(), 99);
    none(&diagnose(&host), "nic.rings-small");
    // virtio: rings not supported.
    let mut host = vm_2cpu_single_queue();
    iface(&mut host, "eth0")
        .statistics
        .insert("rx_missed_errors".into(), 99);
    none(&diagnose(&host), "nic.rings-small");
}

#[test]
fn queues_unused_notes_idle_hardware_queues() {
    let mut host = two_socket_smt_8q();
    if let Probe::Value(c) = &mut iface(&mut host, "eth0").driver_settings.channels {
        c.combined = 4;
    }
    let f = assert_fires(
        &diagnose(&host),
        "nic.queues-unused",
        Severity::Info,
        &["4 of its 63 combined", "8 physical cores", "0-7"],
    );
    // http runs one queue per network CPU (32), and says the per-queue
    // settings follow on a second apply.
    assert!(f.fix.contains("ethtool -L eth0 combined 32"), "{}", f.fix);
    assert!(f.fix.contains("apply --profile http` again"), "{}", f.fix);
    assert_eq!(
        f.changes[0].target.to_string(),
        "ethtool:eth0:channels.combined"
    );
    assert_eq!(
        (f.changes[0].from.as_str(), f.changes[0].to.as_str()),
        ("4", "32")
    );
}

#[test]
fn queues_unused_silent_when_cores_are_covered_or_at_max() {
    none(&diagnose(&two_socket_smt_8q()), "nic.queues-unused");
    none(&diagnose(&vm_2cpu_single_queue()), "nic.queues-unused");
}

#[test]
fn qdisc_fires_for_fifo_roots_and_mq_over_fifo() {
    // The VM: pfifo_fast root, pfifo_fast default.
    let f = assert_fires(
        &diagnose(&vm_2cpu_single_queue()),
        "qdisc.no-fair-queue",
        Severity::Warn,
        &["eth0 root pfifo_fast", "default_qdisc = pfifo_fast"],
    );
    assert!(f.fix.contains("net.core.default_qdisc=fq"), "{}", f.fix);
    assert!(
        f.fix.contains("tc qdisc replace dev eth0 root fq"),
        "{}",
        f.fix
    );

    assert_eq!(f.profile, Some("throughput"));

    // mq over pfifo_fast: the throughput plan puts fq with a per-flow cap
    // at the root, and the fix names that.
    let mut host = two_socket_smt_8q();
    set_sysctl(&mut host, "net.core.default_qdisc", "pfifo_fast");
    let f = assert_fires(
        &diagnose(&host),
        "qdisc.no-fair-queue",
        Severity::Warn,
        &["eth0 root mq over pfifo_fast"],
    );
    let planned = &f.changes[0];
    assert!(planned.to.starts_with("fq maxrate "), "{planned:?}");
    assert!(
        f.fix
            .contains(&format!("tc qdisc replace dev eth0 root {}", planned.to)),
        "{}",
        f.fix
    );

    // A FIFO root set up by hand (handle 1:): the plan leaves it alone, the
    // fix says why and what to do by hand, and names no profile.
    let mut host = vm_2cpu_single_queue();
    iface(&mut host, "eth0").root_qdisc = Probe::Value(Qdisc {
        kind: "pfifo".into(),
        handle: "1:".into(),
    });
    let f = the(&diagnose(&host), "qdisc.no-fair-queue");
    assert!(f.fix.contains("root fq (by hand)"), "{}", f.fix);
    assert!(
        f.fix
            .contains("leaves qdisc:eth0:root alone: root qdisc pfifo 1: was set up by hand"),
        "{}",
        f.fix
    );
    assert_eq!((f.profile, f.changes.len()), (None, 0));
}

#[test]
fn qdisc_silent_for_fq_fq_codel_custom_or_unknown() {
    none(&diagnose(&two_socket_smt_8q()), "qdisc.no-fair-queue");
    for kind in ["fq_codel", "htb", "noqueue"] {
        let mut host = vm_2cpu_single_queue();
        iface(&mut host, "eth0").root_qdisc = Probe::Value(Qdisc {
            kind: kind.into(),
            handle: "1:".into(),
        });
        none(&diagnose(&host), "qdisc.no-fair-queue");
    }
    let mut host = vm_2cpu_single_queue();
    iface(&mut host, "eth0").root_qdisc = Probe::UNKNOWN;
    none(&diagnose(&host), "qdisc.no-fair-queue");
}

/// A 2-CPU namespace whose veth has 2 RX queues, as `nettune testbed up
/// --scenario softirq-on-app-cpu` leaves it, with every queue's RPS set to
/// `masks`.
fn veth_in_namespace(masks: &[&[u32]]) -> crate::host::Host {
    let mut host = vm_2cpu_single_queue();
    host.source.netns = Some("ntb-x-server".to_string());
    let veth = iface(&mut host, "eth0");
    veth.physical = false;
    veth.driver = Some("veth".into());
    veth.irq_vectors.clear();
    let q = veth.rx_queues[0].clone();
    veth.rx_queues = masks
        .iter()
        .enumerate()
        .map(|(index, m)| crate::host::RxQueue {
            index: index as u32,
            irq: None,
            rps_cpus: Some(m.to_vec()),
            ..q.clone()
        })
        .collect();
    host
}

#[test]
fn rps_one_cpu_fires_when_every_queue_steers_to_the_same_cpu() {
    let f = assert_fires(
        &diagnose(&veth_in_namespace(&[&[1], &[1]])),
        "rps.one-cpu",
        Severity::Warn,
        &["eth0", "CPU1 only", "all 2 RX queues", "CPU0 takes none"],
    );
    assert_eq!(f.profile, Some("pps"));
    assert!(f.fix.contains("Write 3 (CPUs 0-1)"), "{}", f.fix);
    // The pps plan's change is listed, queue by queue: 2 -> 3.
    let masks: Vec<(String, String)> = f
        .changes
        .iter()
        .map(|c| (c.from.clone(), c.to.clone()))
        .collect();
    assert_eq!(masks, [("2".into(), "3".into()), ("2".into(), "3".into())]);
    // Not also reported as RPS off.
    none(&diagnose(&veth_in_namespace(&[&[1], &[1]])), "rps.off");
}

#[test]
fn rps_one_cpu_is_silent_for_spread_or_mixed_masks_and_one_cpu_hosts() {
    for masks in [
        &[&[0u32, 1][..], &[0, 1][..]][..],
        &[&[0][..], &[1][..]][..],
        &[&[1][..], &[][..]][..],
        &[&[][..], &[][..]][..],
    ] {
        none(&diagnose(&veth_in_namespace(masks)), "rps.one-cpu");
    }
    // One CPU that may take network work: nowhere else to steer to.
    let mut host = veth_in_namespace(&[&[1], &[1]]);
    host.isolated_cpus = vec![0];
    none(&diagnose(&host), "rps.one-cpu");
    // A bridge gets its packets from its ports: not judged.
    let mut host = veth_in_namespace(&[&[1], &[1]]);
    let br = iface(&mut host, "eth0");
    br.driver = Some("bridge".into());
    br.devtype = Some("bridge".into());
    none(&diagnose(&host), "rps.one-cpu");
}

#[test]
fn rps_one_cpu_after_the_pps_plan_is_gone() {
    // What `apply --profile pps --netns` writes (the plan's masks) leaves
    // nothing for the rule to report.
    let host = veth_in_namespace(&[&[1], &[1]]);
    let f = the(&diagnose(&host), "rps.one-cpu");
    let mut after = host.clone();
    for (q, c) in iface(&mut after, "eth0")
        .rx_queues
        .iter_mut()
        .zip(&f.changes)
    {
        q.rps_cpus = crate::base::cpuset::parse_mask(&c.to).ok();
    }
    none(&diagnose(&after), "rps.one-cpu");
}

/// The RPS and RFS values the latency plan writes on `host`'s eth0, as
/// `apply --profile latency` leaves them.
fn latency_applied(host: &crate::host::Host) -> crate::host::Host {
    use crate::plan::target::{RxFile, Target};
    let opts = crate::plan::PlanOptions::new(crate::plan::Profile::Latency);
    let plan = crate::plan::plan(host, &opts).expect("latency plan");
    let mut after = host.clone();
    let veth = iface(&mut after, "eth0");
    for c in &plan.changes {
        let Target::RxQueue { queue, file, .. } = &c.target else {
            continue;
        };
        let q = &mut veth.rx_queues[*queue as usize];
        match file {
            RxFile::RpsCpus => q.rps_cpus = crate::base::cpuset::parse_mask(c.to.as_str()).ok(),
            RxFile::RpsFlowCnt => q.rps_flow_cnt = c.to.as_str().parse().ok(),
        }
    }
    after
}

#[test]
fn no_rps_finding_after_the_latency_plan_in_a_namespace_where_nothing_busy_polls() {
    // A namespace cannot turn busy polling on, and the host has it off:
    // the latency plan spreads RPS as pps does (not off), so doctor has
    // nothing to say about RPS or RFS afterwards.
    let mut host = veth_in_namespace(&[&[], &[]]);
    set_sysctl(&mut host, "net.core.busy_read", "0");
    set_sysctl(&mut host, "net.core.busy_poll", "0");
    set_sysctl(&mut host, "net.core.rps_sock_flow_entries", "32768");
    assert_fires(&diagnose(&host), "rps.off", Severity::Warn, &["eth0"]);
    let after = latency_applied(&host);
    let masks: Vec<Option<Vec<u32>>> = after.interfaces[0]
        .rx_queues
        .iter()
        .map(|q| q.rps_cpus.clone())
        .collect();
    assert_eq!(masks, [Some(vec![0, 1]), Some(vec![0, 1])]);
    let findings = diagnose(&after);
    for id in ["rps.off", "rps.one-cpu", "rfs.partial"] {
        none(&findings, id);
    }
}

#[test]
fn rps_off_is_silent_where_busy_polling_is_on_as_the_latency_plan_leaves_it() {
    // Busy polling on host-wide: the latency plan turns RPS off, and
    // doctor does not then ask for it back.
    let mut host = veth_in_namespace(&[&[0, 1], &[0, 1]]);
    set_sysctl(&mut host, "net.core.busy_read", "50");
    set_sysctl(&mut host, "net.core.busy_poll", "50");
    let after = latency_applied(&host);
    assert!(after.interfaces[0]
        .rx_queues
        .iter()
        .all(|q| q.rps_cpus == Some(vec![])));
    let findings = diagnose(&after);
    for id in ["rps.off", "rps.one-cpu"] {
        none(&findings, id);
    }
    // The same queues with busy polling off are a finding.
    let mut off = after.clone();
    set_sysctl(&mut off, "net.core.busy_read", "0");
    set_sysctl(&mut off, "net.core.busy_poll", "0");
    assert_fires(&diagnose(&off), "rps.off", Severity::Warn, &["eth0"]);
}
