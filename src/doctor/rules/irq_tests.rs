use crate::doctor::testkit::*;
use crate::doctor::Severity;

#[test]
fn one_cpu_fires_when_all_queues_land_on_cpu0() {
    let mut host = two_socket_smt_8q();
    pin_rx_irqs(iface(&mut host, "eth0"), &[0; 8]);
    let findings = diagnose(&host);
    let f = assert_fires(
        &findings,
        "irq.one-cpu",
        Severity::Crit,
        &["74-81", "CPU0", "1-31", "effective"],
    );
    // The fix follows the plan: NIC node 0, one core each, in queue order;
    // IRQ 74 is already alone on CPU 0 and stays.
    assert!(f.fix.contains(": 75->1, 76->2"), "{}", f.fix);
    assert!(f.fix.contains("81->7"), "{}", f.fix);
    assert!(f.fix.contains("IRQ 74 keeps its CPU"), "{}", f.fix);
    assert_eq!(f.profile, Some("pps"));
    assert_eq!(f.changes.len(), 7, "{:?}", f.changes);
    // irq.shared-cpu would only repeat it.
    none(&findings, "irq.shared-cpu");
}

#[test]
fn one_cpu_uses_the_first_cpu_of_a_mask_without_effective_affinity() {
    // An older kernel: no effective_affinity_list, every mask 0-31.
    let mut host = two_socket_smt_8q();
    let eth0 = iface(&mut host, "eth0");
    for v in &mut eth0.irq_vectors {
        v.affinity = Some((0..32).collect());
        v.effective = None;
    }
    let findings = diagnose(&host);
    assert_fires(
        &findings,
        "irq.one-cpu",
        Severity::Crit,
        &["CPU0", "first CPU"],
    );
}

#[test]
fn one_cpu_silent_when_tuned_single_queue_unknown_or_no_other_cpu() {
    none(&diagnose(&two_socket_smt_8q()), "irq.one-cpu");
    // One RX queue: nothing to spread.
    none(&diagnose(&vm_2cpu_single_queue()), "irq.one-cpu");
    // Affinity unknown: unknown is not bad.
    let mut host = two_socket_smt_8q();
    for v in &mut iface(&mut host, "eth0").irq_vectors {
        v.affinity = None;
        v.effective = None;
    }
    for q in &mut iface(&mut host, "eth0").rx_queues {
        q.affinity = None;
        q.effective = None;
    }
    none(&diagnose(&host), "irq.one-cpu");
    // Every other CPU isolated: CPU0 is the only choice.
    let mut host = two_socket_smt_8q();
    pin_rx_irqs(iface(&mut host, "eth0"), &[0; 8]);
    host.isolated_cpus = (1..32).collect();
    none(&diagnose(&host), "irq.one-cpu");
}

#[test]
fn shared_cpu_fires_when_queues_double_up_and_cpus_are_free() {
    let mut host = two_socket_smt_8q();
    pin_rx_irqs(iface(&mut host, "eth0"), &[0, 1, 2, 3, 0, 1, 2, 3]);
    let findings = diagnose(&host);
    let f = assert_fires(
        &findings,
        "irq.shared-cpu",
        Severity::Warn,
        &["74,78 share CPU0", "4-31"],
    );
    assert!(f.fix.contains("78->4"), "{}", f.fix);
}

#[test]
fn shared_cpu_fires_for_smt_siblings_while_cores_are_free() {
    let mut host = two_socket_smt_8q();
    pin_rx_irqs(iface(&mut host, "eth0"), &[0, 16, 1, 17, 2, 18, 3, 19]);
    let findings = diagnose(&host);
    assert_fires(
        &findings,
        "irq.shared-cpu",
        Severity::Warn,
        &["CPUs 0 and 16", "SMT siblings", "12 whole cores"],
    );
}

#[test]
fn shared_cpu_silent_when_queues_outnumber_cpus() {
    // A 4-queue virtio NIC on the 2-vCPU VM: doubling up is unavoidable.
    let mut host = vm_2cpu_single_queue();
    let eth0 = iface(&mut host, "eth0");
    eth0.irq_vectors = (0..4)
        .map(|q| crate::host::IrqVector {
            irq: 38 + q,
            name: format!("virtio2-input.{q}"),
            role: crate::host::VectorRole::Rx,
            queue: Some(q),
            affinity: Some(vec![q % 2]),
            effective: Some(vec![q % 2]),
            affinity_hint: None,
            per_cpu: vec![10, 10],
        })
        .collect();
    let findings = diagnose(&host);
    none(&findings, "irq.shared-cpu");
    none(&findings, "irq.one-cpu");
    none(&diagnose(&two_socket_smt_8q()), "irq.shared-cpu");
}

#[test]
fn remote_numa_fires_for_a_node1_nic_served_from_node0() {
    let mut host = nic_on_node1();
    // A kernel with busy polling (the sysctls exist): the latency plan
    // turns it on.
    set_sysctl(&mut host, "net.core.busy_read", "0");
    set_sysctl(&mut host, "net.core.busy_poll", "0");
    let findings = diagnose(&host);
    let f = assert_fires(
        &findings,
        "irq.remote-numa",
        Severity::Warn,
        &[
            "node 1",
            "74-81 on CPUs 0-7 (node 0)",
            "RPS of RX queues 0-7",
            "XPS of TX queues 0-7",
        ],
    );
    // Node 1's cores first: CPU 8 for queue 0.
    assert!(f.fix.contains("74->8"), "{}", f.fix);
    // latency busy-polls: RPS goes off rather than to node 1, and the fix
    // says why.
    assert!(f.fix.contains("Turn RPS off"), "{}", f.fix);
    assert!(f.fix.contains("busy polling"), "{}", f.fix);
    assert_eq!(f.profile, Some("latency"));
}

#[test]
fn remote_numa_silent_when_local_unknown_or_local_cpus_unusable() {
    none(&diagnose(&two_socket_smt_8q()), "irq.remote-numa");
    let mut host = nic_on_node1();
    iface(&mut host, "eth0").numa_node = None;
    none(&diagnose(&host), "irq.remote-numa");
    // Node 1 entirely isolated for an application: node 0 is all there is.
    let mut host = nic_on_node1();
    host.isolated_cpus = crate::doctor::testkit::NODE1.to_vec();
    none(&diagnose(&host), "irq.remote-numa");
}

#[test]
fn balancer_is_info_and_warn_when_irqs_look_pinned() {
    let mut vm = vm_2cpu_single_queue();
    vm.irqbalance.running = true;
    vm.irqbalance.pids = vec![812];
    let f = assert_fires(&diagnose(&vm), "irq.balancer", Severity::Info, &["pid 812"]);
    assert!(f.fix.contains("--banirq=38"), "{}", f.fix);

    let mut host = two_socket_smt_8q();
    host.irqbalance.running = true;
    assert_fires(
        &diagnose(&host),
        "irq.balancer",
        Severity::Warn,
        &["eth0", "pinned"],
    );
}

#[test]
fn balancer_silent_when_not_running() {
    none(&diagnose(&two_socket_smt_8q()), "irq.balancer");
    none(&diagnose(&vm_2cpu_single_queue()), "irq.balancer");
}
