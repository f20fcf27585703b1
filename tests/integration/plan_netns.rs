//! `nettune plan` inside a network namespace (a container's), on host
//! models built from a fixture the way a namespace shows it: its NIC is a
//! veth (no device, no IRQ), the root-namespace-only sysctls are absent,
//! rmem_max and friends are read-only mirrors of the host's. What a user of
//! a container expects: the veth is tuned without naming it, RPS covers a
//! multi-queue veth, every host-wide value is named once with the command
//! for the host, and nothing is planned that depends on a host-wide value
//! the namespace cannot raise.

use nettune::host::{Host, Interface, RxQueue, TxQueue, ROOT_NAMESPACE_SYSCTLS};
use nettune::plan::{plan, render, Plan, PlanOptions, Profile, Target};

use crate::common::fixture;

fn fixture_host() -> Host {
    let selection = nettune::host::Selection {
        all: true,
        iface: None,
    };
    nettune::gather::read_target(Some(&fixture("vm-2cpu-virtio")), None, &selection)
        .expect("read fixture")
}

/// A virtual interface as a namespace shows it: no device, no IRQ.
fn virtual_iface(name: &str, driver: &str, queues: u32) -> Interface {
    let mut iface = fixture_host()
        .interfaces
        .into_iter()
        .find(|i| i.name == "eth0")
        .expect("eth0");
    iface.name = name.to_string();
    iface.driver = Some(driver.to_string());
    iface.physical = false;
    iface.devtype = None;
    iface.pci_address = None;
    iface.irq_vectors.clear();
    iface.rx_queues = (0..queues)
        .map(|index| RxQueue {
            index,
            irq: None,
            affinity: None,
            effective: None,
            affinity_hint: None,
            rps_cpus: Some(Vec::new()),
            rps_flow_cnt: Some(0),
        })
        .collect();
    iface.tx_queues = (0..queues)
        .map(|index| TxQueue {
            index,
            irq: None,
            affinity: None,
            effective: None,
            affinity_hint: None,
            xps_cpus: (queues > 1).then(Vec::new),
            xps_rxqs: (queues > 1).then(Vec::new),
            tx_maxrate: None,
        })
        .collect();
    iface
}

/// The 2-CPU VM seen from inside network namespace `blue`: `lo`, a
/// 4-queue veth that is up and a veth that is down; the host's
/// root-only sysctls as read before entering (`host_flow_entries`).
fn namespace(host_flow_entries: Option<&str>) -> Host {
    let mut host = fixture_host();
    host.source.netns = Some("blue".to_string());
    let lo = host
        .interfaces
        .iter()
        .find(|i| i.name == "lo")
        .cloned()
        .expect("lo");
    let mut down = virtual_iface("veth1", "veth", 1);
    down.operstate = Some("down".to_string());
    host.interfaces = vec![lo, virtual_iface("veth0", "veth", 4), down];
    for name in ROOT_NAMESPACE_SYSCTLS {
        if let Some(value) = host.sysctls.remove(*name) {
            host.host_sysctls.insert(name.to_string(), value);
        }
    }
    match host_flow_entries {
        Some(n) => {
            host.host_sysctls
                .insert("net.core.rps_sock_flow_entries".to_string(), n.to_string());
        }
        None => host.host_sysctls.clear(),
    }
    host
}

fn plan_of(host: &Host, profile: Profile) -> Plan {
    plan(host, &PlanOptions::new(profile)).expect("plan")
}

fn targets(plan: &Plan) -> Vec<String> {
    plan.changes.iter().map(|c| c.target.to_string()).collect()
}

fn change_to<'a>(plan: &'a Plan, target: &str) -> Option<&'a str> {
    plan.changes
        .iter()
        .find(|c| c.target == target)
        .map(|c| c.to.as_str())
}

fn skip_reason<'a>(plan: &'a Plan, target: &str) -> Option<&'a str> {
    plan.skipped
        .iter()
        .find(|s| s.target == target)
        .map(|s| s.reason.as_str())
}

#[test]
fn a_namespace_tunes_its_veth_by_default_with_rps_on_every_queue() {
    let host = namespace(Some("32768"));
    let pps = plan_of(&host, Profile::Pps);
    // The veth that is up, without --iface; not lo, not the one down.
    assert_eq!(pps.interfaces, ["veth0"]);
    // 4 queues for 2 CPUs: a NIC's queues would cover the CPUs, but a
    // veth's are not hardware queues: RPS on every one, to every CPU.
    for q in 0..4 {
        let t = format!("/sys/class/net/veth0/queues/rx-{q}/rps_cpus");
        assert_eq!(change_to(&pps, &t), Some("3"), "{t}: {:?}", targets(&pps));
    }
    // No XPS: a veth has no transmit interrupt to keep local.
    assert!(targets(&pps).iter().all(|t| !t.ends_with("xps_cpus")));
    // The same with --iface.
    let mut named = PlanOptions::new(Profile::Pps);
    named.ifaces = vec!["veth0".to_string()];
    assert_eq!(plan(&host, &named).expect("plan").changes, pps.changes);

    // On the host (root namespace), the default stays physical interfaces
    // only: the same veth is not tuned unless named.
    let mut root = host.clone();
    root.source.netns = None;
    root.sysctls.append(&mut root.host_sysctls.clone());
    assert!(plan_of(&root, Profile::Pps).interfaces.is_empty());
}

#[test]
fn a_container_is_recognised_without_netns_by_its_sysctls() {
    // nettune run inside a container: no --netns, and the kernel shows
    // none of the root-namespace-only sysctls.
    let mut host = namespace(None);
    host.source.netns = None;
    assert!(host.in_netns());
    let pps = plan_of(&host, Profile::Pps);
    assert_eq!(pps.interfaces, ["veth0"]);
    let why = skip_reason(&pps, "/proc/sys/net/core/rmem_max").expect("left alone");
    assert!(
        why.contains("read-only inside this network namespace"),
        "{why}"
    );
    assert!(pps.host_command.is_some());
}

#[test]
fn host_wide_values_are_named_once_with_the_command_for_the_host() {
    let host = namespace(Some("0"));
    let pps = plan_of(&host, Profile::Pps);
    let wide: Vec<String> = pps.host_wide.iter().map(|h| h.target.to_string()).collect();
    for name in [
        "core/rmem_max",
        "core/rmem_default",
        "core/netdev_max_backlog",
        "core/netdev_budget",
        "core/rps_sock_flow_entries",
    ] {
        assert!(
            wide.contains(&format!("/proc/sys/net/{name}")),
            "{name}: {wide:?}"
        );
    }
    // Never planned as changes here.
    assert!(targets(&pps)
        .iter()
        .all(|t| !t.starts_with("/proc/sys/net/core/")));
    // The host's value where it is known (read before entering --netns).
    let flow = pps
        .host_wide
        .iter()
        .find(|h| h.target == "/proc/sys/net/core/rps_sock_flow_entries")
        .expect("flow entries");
    assert_eq!(
        (flow.from.as_deref(), flow.to.as_str()),
        (Some("0"), "32768")
    );
    let command = pps.host_command.as_deref().expect("a host command");
    assert!(
        command.starts_with("sysctl -w ")
            && command.contains("net.core.rps_sock_flow_entries=32768")
            && command.contains("net.core.netdev_max_backlog=10000"),
        "{command}"
    );
    // Text: one host-wide section with the command; the values are not
    // repeated under "left alone".
    let text = render::text(&pps, "network namespace blue");
    assert_eq!(text.matches("host-wide: ").count(), 1, "{text}");
    assert!(text.contains(command), "{text}");
    assert!(text.contains("nettune apply --profile pps"), "{text}");
    let left = text.split("\nleft alone\n").nth(1).unwrap_or_default();
    assert!(!left.contains("net.core.netdev_max_backlog"), "{text}");
    // The shell script says it too, as a comment for the host.
    let sh = render::shell(&pps, "network namespace blue", Some("blue"));
    assert!(sh.contains(&format!("# {command}")), "{sh}");

    // A value the host already has is not named.
    let mut set = host.clone();
    set.host_sysctls.insert(
        "net.core.netdev_max_backlog".to_string(),
        "20000".to_string(),
    );
    assert!(plan_of(&set, Profile::Pps)
        .host_wide
        .iter()
        .all(|h| h.target != "/proc/sys/net/core/netdev_max_backlog"));
}

#[test]
fn rps_flow_cnt_is_planned_only_with_a_flow_table_on_the_host() {
    let flow_cnt = |q: u32| format!("/sys/class/net/veth0/queues/rx-{q}/rps_flow_cnt");
    // The host has no socket flow table and the namespace cannot make one:
    // RFS would do nothing, so it is not planned; the reason says what to
    // run on the host.
    let off = plan_of(&namespace(Some("0")), Profile::Pps);
    assert!(
        change_to(&off, &flow_cnt(0)).is_none(),
        "{:?}",
        targets(&off)
    );
    let why = skip_reason(&off, &flow_cnt(0)).expect("said why");
    assert!(
        why.contains("sysctl -w net.core.rps_sock_flow_entries=32768"),
        "{why}"
    );
    // The host has one: each queue gets its share of the host's table.
    let on = plan_of(&namespace(Some("65536")), Profile::Pps);
    for q in 0..4 {
        assert_eq!(change_to(&on, &flow_cnt(q)), Some("16384"));
    }
    assert!(on
        .host_wide
        .iter()
        .all(|h| h.target != "/proc/sys/net/core/rps_sock_flow_entries"));
    // Inside a container the host's value cannot be seen: planned, and the
    // reason says it steers only once the host sets the table.
    let unseen = plan_of(&namespace(None), Profile::Pps);
    let c = unseen
        .changes
        .iter()
        .find(|c| c.target == flow_cnt(0).as_str())
        .expect("planned");
    assert_eq!(c.to, "8192");
    assert!(c.reason.contains("only once the host sets"), "{}", c.reason);
}

#[test]
fn tcp_buffers_stay_under_a_socket_cap_the_namespace_cannot_raise() {
    let mut host = namespace(Some("0"));
    for (name, value) in [
        ("net.core.rmem_max", "4194304"),
        ("net.core.wmem_max", "212992"),
        ("net.ipv4.tcp_rmem", "4096 131072 2097152"),
        ("net.ipv4.tcp_wmem", "4096 16384 4194304"),
    ] {
        host.sysctls.insert(name.to_string(), value.to_string());
    }
    let tput = plan_of(&host, Profile::Throughput);
    // The socket caps are host-wide: named with the value the path needs.
    let caps: Vec<(String, String)> = tput
        .host_wide
        .iter()
        .map(|h| (h.target.to_string(), h.to.to_string()))
        .collect();
    assert!(
        caps.contains(&(
            "/proc/sys/net/core/rmem_max".to_string(),
            "268435456".to_string()
        )),
        "{caps:?}"
    );
    // Autotuning grows to the cap the namespace has (4 MiB), not to the
    // 128 MiB the path needs, which would sit above rmem_max.
    let rmem = tput
        .changes
        .iter()
        .find(|c| c.target == "/proc/sys/net/ipv4/tcp_rmem")
        .expect("tcp_rmem raised to the cap");
    assert_eq!(rmem.to, "4096 131072 4194304");
    assert!(
        rmem.reason.contains("only the host can raise"),
        "{}",
        rmem.reason
    );
    // Already above its cap: left as it is, not raised further.
    assert!(change_to(&tput, "/proc/sys/net/ipv4/tcp_wmem").is_none());
}

#[test]
fn bridges_vlans_and_macvlans_get_no_rps_of_their_own() {
    let mut host = namespace(Some("32768"));
    let mut bridge = virtual_iface("br0", "bridge", 1);
    bridge.devtype = Some("bridge".to_string());
    let mut vlan = virtual_iface("veth0.5", "802.1Q VLAN Support", 1);
    vlan.devtype = Some("vlan".to_string());
    let macvlan = virtual_iface("mv0", "macvlan", 1);
    host.interfaces.extend([bridge, vlan, macvlan]);
    let pps = plan_of(&host, Profile::Pps);
    // All selected (they are up), but only the veth's queues are steered:
    // their packets arrive through it, already on the CPU its RPS chose.
    assert_eq!(pps.interfaces.len(), 4, "{:?}", pps.interfaces);
    for name in ["br0", "veth0.5", "mv0"] {
        assert!(
            targets(&pps)
                .iter()
                .all(|t| !t.starts_with(&format!("/sys/class/net/{name}/"))),
            "{name}: {:?}",
            targets(&pps)
        );
        let why = skip_reason(&pps, &Target::queues(name).to_string()).expect("said why");
        assert!(why.contains("second cross-CPU hop"), "{why}");
    }
    assert!(change_to(&pps, "/sys/class/net/veth0/queues/rx-0/rps_cpus").is_some());
}

#[test]
fn cpu_settings_inside_a_namespace_are_host_wide() {
    let latency = plan_of(&namespace(Some("32768")), Profile::Latency);
    let halt = latency
        .host_wide
        .iter()
        .find(|h| h.target == Target::HaltPoll)
        .expect("haltpoll named for the host");
    assert_eq!(halt.to, "200000");
    let command = latency.host_command.as_deref().expect("command");
    assert!(
        command.contains("echo 200000 > /sys/module/haltpoll/parameters/guest_halt_poll_ns")
            && command.contains("net.core.busy_poll=50"),
        "{command}"
    );
    assert!(latency.changes.iter().all(|c| c.target != Target::HaltPoll));
}

/// `host` with the RPS of `iface` on every CPU and the host's busy
/// polling at `busy_us` (busy_read and busy_poll).
fn rps_on_and_busy_polling(mut host: Host, iface: &str, busy_us: &str) -> Host {
    for iface in host.interfaces.iter_mut().filter(|i| i.name == iface) {
        for q in &mut iface.rx_queues {
            q.rps_cpus = Some(vec![0, 1]);
        }
    }
    for name in ["net.core.busy_read", "net.core.busy_poll"] {
        let values = if host.in_netns() {
            &mut host.host_sysctls
        } else {
            &mut host.sysctls
        };
        values.insert(name.to_string(), busy_us.to_string());
    }
    host
}

/// Where busy polling will be on, latency's busy polling and RPS exclude
/// each other: RPS goes off (pps spreads it), and no RFS flow count is
/// planned for a virtual interface without RPS. In a namespace whose host
/// busy polls (a veth), and on a host where the plan turns it on (its NIC).
#[test]
fn latency_turns_rps_off_where_busy_polling_will_be_on() {
    for (host, iface, queues) in [
        (
            rps_on_and_busy_polling(namespace(Some("32768")), "veth0", "50"),
            "veth0",
            4,
        ),
        (
            rps_on_and_busy_polling(fixture_host(), "eth0", "0"),
            "eth0",
            1,
        ),
    ] {
        let latency = plan_of(&host, Profile::Latency);
        for queue in 0..queues {
            let rps = format!("/sys/class/net/{iface}/queues/rx-{queue}/rps_cpus");
            assert_eq!(
                change_to(&latency, &rps),
                Some("0"),
                "{:?}",
                targets(&latency)
            );
        }
        let rps = format!("/sys/class/net/{iface}/queues/rx-0/rps_cpus");
        let reason = &latency
            .changes
            .iter()
            .find(|c| c.target == rps.as_str())
            .expect("rps")
            .reason;
        assert!(reason.starts_with("RPS off: with busy polling"), "{reason}");
        if iface == "veth0" {
            assert!(
                targets(&latency)
                    .iter()
                    .all(|t| !t.ends_with("rps_flow_cnt")),
                "{:?}",
                targets(&latency)
            );
        }
        let pps = plan_of(&host, Profile::Pps);
        assert!(change_to(&pps, &rps).is_none());
    }
}

/// In a namespace of a host that does not busy poll (and which the
/// namespace cannot make busy poll), nothing takes a veth's packets on the
/// reader's CPU: latency sets RPS and RFS as pps does, and its reason
/// says why.
#[test]
fn latency_in_a_namespace_without_busy_polling_sets_rps_as_pps_does() {
    let mut host = namespace(Some("32768"));
    for name in ["net.core.busy_read", "net.core.busy_poll"] {
        // The fixture's host does not busy poll.
        assert_eq!(host.host_sysctls.get(name).map(String::as_str), Some("0"));
    }
    let latency = plan_of(&host, Profile::Latency);
    let pps = plan_of(&host, Profile::Pps);
    let steering = |plan: &Plan| -> Vec<(String, String)> {
        plan.changes
            .iter()
            .map(|c| (c.target.to_string(), c.to.as_str().to_string()))
            .filter(|(t, _)| t.contains("/queues/rx-"))
            .collect()
    };
    assert_eq!(steering(&latency), steering(&pps));
    assert_eq!(
        change_to(&latency, "/sys/class/net/veth0/queues/rx-3/rps_cpus"),
        Some("3")
    );
    assert_eq!(
        change_to(&latency, "/sys/class/net/veth0/queues/rx-3/rps_flow_cnt"),
        Some("8192")
    );
    let reason = &latency
        .changes
        .iter()
        .find(|c| c.target.to_string().ends_with("rx-0/rps_cpus"))
        .expect("rps")
        .reason;
    assert!(
        reason.contains(
            "the latency profile turns RPS off only for a busy poller, and nothing will busy poll \
             here (net.core.busy_read 0, net.core.busy_poll 0 on the host, which network \
             namespace 'blue' cannot change)"
        ) && reason.contains("scaling.rst"),
        "{reason}"
    );
    // A container that cannot see the host's values: taken as 0, said so.
    host.host_sysctls.clear();
    let latency = plan_of(&host, Profile::Latency);
    let rps = "/sys/class/net/veth0/queues/rx-0/rps_cpus";
    assert_eq!(change_to(&latency, rps), Some("3"));
    let reason = &latency
        .changes
        .iter()
        .find(|c| c.target == rps)
        .expect("rps")
        .reason;
    assert!(
        reason.contains(
            "net.core.busy_read and net.core.busy_poll not visible from network namespace \
             'blue', taken as 0"
        ),
        "{reason}"
    );
}
