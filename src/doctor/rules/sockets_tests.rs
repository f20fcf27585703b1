use crate::doctor::testkit::*;
use crate::doctor::Severity;
use crate::host::PacketSocket;
use crate::plan::values::{HTTP_LISTEN_BACKLOG, PPS_RMEM_DEFAULT, PPS_RMEM_MAX};

#[test]
fn udp_errors_warn_since_boot_and_crit_when_fast() {
    let mut host = vm_2cpu_single_queue();
    host.counters.udp.insert("RcvbufErrors".into(), 5120);
    host.counters.udp.insert("InErrors".into(), 5130);
    let f = assert_fires(
        &diagnose(&host),
        "udp.rcvbuf-errors",
        Severity::Warn,
        &[
            "RcvbufErrors 5,120",
            "InErrors 5,130",
            "since boot",
            "rmem_default = 208 KiB",
        ],
    );
    // The pps profile's values, from what the VM has.
    assert!(
        f.fix
            .contains(&format!("rmem_max from 4194304 to {PPS_RMEM_MAX}")),
        "{}",
        f.fix
    );
    assert!(
        f.fix
            .contains(&format!("rmem_default from 212992 to {PPS_RMEM_DEFAULT}")),
        "{}",
        f.fix
    );
    assert_eq!(f.changes.len(), 3, "{:?}", f.changes);
    assert_eq!(f.profile, Some("pps"));
    assert!(
        f.fix.contains("SO_REUSEPORT") && f.fix.contains("recvmmsg"),
        "{}",
        f.fix
    );

    // 650k pps into one socket: 5,120 dropped per second.
    let host = vm_2cpu_single_queue();
    let r = rates(&host, 2.0, |after| {
        *after.udp.entry("RcvbufErrors".into()).or_default() += 10_240;
        *after.udp.entry("InErrors".into()).or_default() += 10_240;
    });
    assert_fires(
        &diagnose_with(&host, &r),
        "udp.rcvbuf-errors",
        Severity::Crit,
        &["RcvbufErrors 10,240 (5,120/s)", "over 2 s"],
    );
}

#[test]
fn udp_errors_over_ipv6_count_too() {
    // Only the IPv6 socket drops (a service bound to [::]).
    let mut host = vm_2cpu_single_queue();
    host.counters.udp6.insert("RcvbufErrors".into(), 41);
    host.counters.udp6.insert("InErrors".into(), 45);
    let f = assert_fires(
        &diagnose(&host),
        "udp.rcvbuf-errors",
        Severity::Warn,
        &["Udp6 RcvbufErrors 41, InErrors 45 since boot"],
    );
    assert!(!f.evidence.starts_with("Udp "), "{}", f.evidence);
    // Both families while sampling: together over the critical rate
    // (600/s + 600/s), each named.
    let mut host = vm_2cpu_single_queue();
    host.counters.udp6.insert("RcvbufErrors".into(), 0);
    let r = rates(&host, 1.0, |after| {
        *after.udp.entry("RcvbufErrors".into()).or_default() += 600;
        *after.udp6.entry("RcvbufErrors".into()).or_default() += 600;
    });
    assert_fires(
        &diagnose_with(&host, &r),
        "udp.rcvbuf-errors",
        Severity::Crit,
        &["Udp RcvbufErrors 600 (600/s); Udp6 RcvbufErrors 600 (600/s) over 1 s"],
    );
}

#[test]
fn udp_errors_silent_when_zero_old_or_missing() {
    none(&diagnose(&vm_2cpu_single_queue()), "udp.rcvbuf-errors");
    let mut host = vm_2cpu_single_queue();
    host.counters.udp.insert("RcvbufErrors".into(), 77);
    let r = rates(&host, 2.0, |after| {
        *after.udp.entry("InDatagrams".into()).or_default() += 1000;
    });
    none(&diagnose_with(&host, &r), "udp.rcvbuf-errors");
    let mut host = vm_2cpu_single_queue();
    host.counters.udp.clear();
    none(&diagnose(&host), "udp.rcvbuf-errors");
}

#[test]
fn listen_overflows_fire_and_name_the_backlogs() {
    let mut host = vm_2cpu_single_queue();
    host.counters.tcp_ext.insert("ListenOverflows".into(), 1204);
    host.counters.tcp_ext.insert("ListenDrops".into(), 1210);
    let f = assert_fires(
        &diagnose(&host),
        "tcp.listen-overflows",
        Severity::Warn,
        &[
            "ListenOverflows 1,204",
            "ListenDrops 1,210",
            "somaxconn = 4096",
        ],
    );
    let to = HTTP_LISTEN_BACKLOG;
    assert!(
        f.fix.contains(&format!("somaxconn from 4096 to {to}")),
        "{}",
        f.fix
    );
    assert!(
        f.fix
            .contains(&format!("tcp_max_syn_backlog from 2048 to {to}")),
        "{}",
        f.fix
    );
    assert_eq!(f.profile, Some("http"));

    // Already at the http profile's values: nothing planned, no profile.
    set_sysctl(&mut host, "net.core.somaxconn", &to.to_string());
    set_sysctl(&mut host, "net.ipv4.tcp_max_syn_backlog", &to.to_string());
    let f = the(&diagnose(&host), "tcp.listen-overflows");
    assert!(
        f.fix
            .contains("Already at least what the http profile sets"),
        "{}",
        f.fix
    );
    assert_eq!((f.profile, f.changes.len()), (None, 0));
}

#[test]
fn listen_overflows_silent_without_overflows() {
    none(&diagnose(&vm_2cpu_single_queue()), "tcp.listen-overflows");
    let mut host = vm_2cpu_single_queue();
    host.counters.tcp_ext.clear();
    none(&diagnose(&host), "tcp.listen-overflows");
}

fn packet_socket(inode: u64, protocol: &str, ifindex: u32) -> PacketSocket {
    PacketSocket {
        inode,
        protocol: protocol.into(),
        ifindex,
        uid: 0,
    }
}

#[test]
fn packet_taps_warn_for_all_protocols_and_note_others() {
    let mut host = vm_2cpu_single_queue();
    host.packet_sockets = vec![
        packet_socket(31337, "0003", 0),
        packet_socket(4242, "0800", 2),
    ];
    let f = assert_fires(
        &diagnose(&host),
        "sock.packet-taps",
        Severity::Warn,
        &[
            "2 AF_PACKET",
            "inode 31337 on all interfaces, all protocols",
            "inode 4242 on eth0, protocol 0800",
        ],
    );
    assert!(f.fix.contains("socket:[31337]"), "{}", f.fix);

    let mut host = vm_2cpu_single_queue();
    host.packet_sockets = vec![packet_socket(4242, "0800", 2)];
    assert_fires(
        &diagnose(&host),
        "sock.packet-taps",
        Severity::Info,
        &["1 AF_PACKET"],
    );
}

#[test]
fn packet_taps_silent_without_sockets() {
    none(&diagnose(&vm_2cpu_single_queue()), "sock.packet-taps");
}

#[test]
fn conntrack_warns_near_full_and_notes_busy_hosts() {
    let mut host = two_socket_smt_8q();
    host.conntrack.loaded = true;
    host.conntrack.count = Some(58_000);
    host.conntrack.max = Some(65_536);
    let f = assert_fires(
        &diagnose(&host),
        "netfilter.conntrack",
        Severity::Warn,
        &["58,000 of 65,536", "89%"],
    );
    assert!(
        f.fix.contains("nf_conntrack_max from 65536 to 131072"),
        "{}",
        f.fix
    );

    let mut host = two_socket_smt_8q();
    host.conntrack.loaded = true;
    host.conntrack.count = Some(300);
    host.conntrack.max = Some(65_536);
    let r = rates(&host, 2.0, |after| {
        for s in &mut after.softnet {
            s.processed += 25_000;
        }
    });
    assert_fires(
        &diagnose_with(&host, &r),
        "netfilter.conntrack",
        Severity::Info,
        &["400,000 packets/s"],
    );
}

#[test]
fn conntrack_silent_when_unloaded_quiet_or_unknown() {
    let mut host = two_socket_smt_8q();
    host.conntrack.loaded = false;
    host.conntrack.count = Some(65_000);
    host.conntrack.max = Some(65_536);
    none(&diagnose(&host), "netfilter.conntrack");
    // Loaded, few entries, and no sample to judge the packet rate.
    let mut host = two_socket_smt_8q();
    host.conntrack.loaded = true;
    host.conntrack.count = Some(300);
    host.conntrack.max = Some(65_536);
    none(&diagnose(&host), "netfilter.conntrack");
    host.conntrack.count = None;
    none(&diagnose(&host), "netfilter.conntrack");
}
