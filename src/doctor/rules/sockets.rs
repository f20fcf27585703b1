//! Sockets and per-packet extras: udp.rcvbuf-errors, tcp.listen-overflows,
//! sock.packet-taps, netfilter.conntrack.

use super::shared::{sentence, sysctl_targets, sysctl_u64, Window};
use crate::base::counter::Width;
use crate::base::units::{format_bytes, format_count};
use crate::doctor::planned::{Planned, Plans};
use crate::doctor::targets::doubled;
use crate::doctor::{Context, Finding, Severity};
use crate::host::{Counters, Host, PacketSocket};
use crate::plan::values::{HTTP_LISTEN_BACKLOG, PPS_RMEM_DEFAULT, PPS_RMEM_MAX, PPS_UDP_RMEM_MIN};
use crate::plan::Profile;

/// UDP receive errors at this rate or more while sampling are critical:
/// a service losing a thousand datagrams every second is losing data
/// continuously, not in an occasional burst.
pub(crate) const UDP_ERRORS_CRIT_PER_SEC: f64 = 1_000.0;

/// Ethernet protocol ETH_P_ALL as /proc/net/packet shows it: the socket
/// sees every packet, sent and received.
const ETH_P_ALL: &str = "0003";

/// A conntrack table this full is about to drop new connections.
const CONNTRACK_FULL_SHARE: f64 = 0.8;

/// Above this many packets per second (softnet processed, all CPUs) the
/// per-packet conntrack lookup is worth a note: at ~1 us each it is a
/// tenth of a CPU.
const CONNTRACK_BUSY_PPS: f64 = 100_000.0;

/// Packet sockets named one by one in evidence; more are counted.
const MAX_SOCKETS_NAMED: usize = 4;

const WHY_RCVBUF: &str = "RcvbufErrors counts datagrams the kernel had received and then \
dropped because the socket's receive buffer was full: the application reads more slowly than \
they arrive. Cloudflare, \"How to receive a million packets per second\": at 650k pps netstat -s \
showed these receive errors; one socket per thread with SO_REUSEPORT reached 1.1M pps with 4 \
threads, while several threads on one socket were slower.";

const WHY_LISTEN: &str = "ListenOverflows counts connections dropped because a listening \
socket's accept queue was full: the server did not call accept() fast enough or its backlog is \
small. The client's handshake packet is dropped and retried after a second or more; the queue \
holds min(listen() backlog, net.core.somaxconn) (listen(2); tuned's network-throughput and \
network-latency profiles raise somaxconn to 2048 or more).";

const WHY_TAPS: &str = "Every packet on an interface is also offered to each AF_PACKET socket \
bound to it: the kernel runs the socket's filter and, for a match, clones the packet; sockets on \
all protocols (ETH_P_ALL) see the transmit path too. \"Linux Kernel vs DPDK: HTTP Performance \
Showdown\" (talawah.io) removed the AF_PACKET sockets on its way from 358k to 726k HTTP \
requests/s.";

const WHY_CONNTRACK: &str = "With nf_conntrack loaded every packet is looked up in the \
connection table and every new flow inserted, a cost paid per packet on every CPU; when the table \
is full, new connections are dropped (\"nf_conntrack: table full, dropping packet\"). Like the \
AF_PACKET taps removed in \"Linux Kernel vs DPDK: HTTP Performance Showdown\" (talawah.io), it is \
per-packet work the service did not ask for.";

pub fn check(ctx: &Context, plans: &Plans, out: &mut Vec<Finding>) {
    let window = Window::of(ctx);
    udp_errors(ctx.host, plans, &window, out);
    listen_overflows(ctx.host, plans, &window, out);
    packet_taps(ctx.host, out);
    conntrack(ctx.host, &window, out);
}

/// Picks one SNMP counter map out of the counters.
type CounterMap = fn(&Counters) -> &std::collections::BTreeMap<String, i64>;

fn udp(c: &Counters) -> &std::collections::BTreeMap<String, i64> {
    &c.udp
}

fn tcp_ext(c: &Counters) -> &std::collections::BTreeMap<String, i64> {
    &c.tcp_ext
}

/// "Raise a from 1 to 2 and b from 3 to 4" for the plan's changes to
/// `wanted` (name, the profile's value); the rest set by hand where the
/// plan leaves them alone, or noted as already enough.
fn raise_text(host: &Host, planned: &Planned, wanted: &[(&str, u64)]) -> String {
    let mut raised = Vec::new();
    let mut by_hand = Vec::new();
    let mut enough = Vec::new();
    for (name, value) in wanted {
        match planned.sysctl(name) {
            Some(c) => raised.push(format!("{name} from {} to {}", c.from, c.to)),
            None => match sysctl_u64(host, name) {
                Some(now) if now >= *value => enough.push(format!("{name} = {now}")),
                _ => by_hand.push(format!("{name}={value}")),
            },
        }
    }
    let mut parts = Vec::new();
    if !raised.is_empty() {
        parts.push(format!("Raise {}.", raised.join(" and ")));
    }
    if !by_hand.is_empty() {
        parts.push(format!("By hand: sysctl -w {}.", by_hand.join(" ")));
    }
    if !enough.is_empty() {
        parts.push(format!(
            "Already at least what the {} profile sets: {}.",
            planned.profile.name(),
            enough.join(", ")
        ));
    }
    parts.join(" ")
}

fn udp6(c: &Counters) -> &std::collections::BTreeMap<String, i64> {
    &c.udp6
}

/// UDP receive errors over IPv4 (/proc/net/snmp Udp) and IPv6
/// (/proc/net/snmp6 Udp6): the same sockets' buffers, counted apart.
fn udp_errors(host: &Host, plans: &Plans, window: &Window, out: &mut Vec<Finding>) {
    let mut worst = 0;
    let mut seen = Vec::new();
    for (proto, pick) in [("Udp", udp as CounterMap), ("Udp6", udp6)] {
        let rcvbuf = window.counter(pick, "RcvbufErrors");
        let in_errors = window.counter(pick, "InErrors");
        worst += rcvbuf.unwrap_or(0).max(in_errors.unwrap_or(0));
        let counts: Vec<String> = [("RcvbufErrors", rcvbuf), ("InErrors", in_errors)]
            .into_iter()
            .filter_map(|(name, n)| {
                let n = n.filter(|&n| n > 0)?;
                Some(format!(
                    "{name} {}{}",
                    format_count(n),
                    window.rate_suffix(n)
                ))
            })
            .collect();
        if !counts.is_empty() {
            seen.push(format!("{proto} {}", counts.join(", ")));
        }
    }
    if worst == 0 {
        return;
    }
    let severity = match window.per_sec(worst) {
        Some(rate) if rate >= UDP_ERRORS_CRIT_PER_SEC => Severity::Crit,
        _ => Severity::Warn,
    };
    let wanted = [
        ("net.core.rmem_max", PPS_RMEM_MAX),
        ("net.core.rmem_default", PPS_RMEM_DEFAULT),
        ("net.ipv4.udp_rmem_min", PPS_UDP_RMEM_MIN),
    ];
    let settings: Vec<String> = wanted[..2]
        .iter()
        .filter_map(|(name, _)| {
            sysctl_u64(host, name).map(|v| format!("{name} = {}", format_bytes(v)))
        })
        .collect();
    let settings = if settings.is_empty() {
        String::new()
    } else {
        format!("; {}", settings.join(", "))
    };
    let names: Vec<&str> = wanted.iter().map(|(n, _)| *n).collect();
    let scope = sysctl_targets(&names);
    let planned = plans.planned(Profile::Pps, &scope);
    out.push(Finding {
        id: "udp.rcvbuf-errors",
        severity,
        title: "UDP datagrams dropped at full socket buffers".to_string(),
        evidence: format!("{} {}{settings}", seen.join("; "), window.span()),
        why: WHY_RCVBUF.to_string(),
        fix: format!(
            "{} In the application: set SO_RCVBUF to {} or more (up to net.core.rmem_max), read \
             with one SO_REUSEPORT socket per thread, and batch with recvmmsg.",
            raise_text(host, &planned, &wanted),
            format_bytes(PPS_RMEM_DEFAULT)
        ),
        profile: Some(Profile::Pps.name()),
        changes: Vec::new(),
        scope,
    });
}

fn listen_overflows(host: &Host, plans: &Plans, window: &Window, out: &mut Vec<Finding>) {
    let overflows = window.counter(tcp_ext, "ListenOverflows");
    let drops = window.counter(tcp_ext, "ListenDrops");
    if overflows.unwrap_or(0) == 0 && drops.unwrap_or(0) == 0 {
        return;
    }
    let mut seen = Vec::new();
    for (name, n) in [("ListenOverflows", overflows), ("ListenDrops", drops)] {
        if let Some(n) = n.filter(|&n| n > 0) {
            seen.push(format!(
                "{name} {}{}",
                format_count(n),
                window.rate_suffix(n)
            ));
        }
    }
    let wanted = [
        ("net.core.somaxconn", HTTP_LISTEN_BACKLOG),
        ("net.ipv4.tcp_max_syn_backlog", HTTP_LISTEN_BACKLOG),
    ];
    let settings: Vec<String> = wanted
        .iter()
        .filter_map(|(name, _)| sysctl_u64(host, name).map(|v| format!("{name} = {v}")))
        .collect();
    let settings = if settings.is_empty() {
        String::new()
    } else {
        format!("; {}", settings.join(", "))
    };
    let names: Vec<&str> = wanted.iter().map(|(n, _)| *n).collect();
    let scope = sysctl_targets(&names);
    let planned = plans.planned(Profile::Http, &scope);
    out.push(Finding {
        id: "tcp.listen-overflows",
        severity: Severity::Warn,
        title: "Listening sockets overflowed and dropped connections".to_string(),
        evidence: format!("TcpExt {} {}{settings}", seen.join(", "), window.span()),
        why: WHY_LISTEN.to_string(),
        fix: format!(
            "{} Raise the server's listen() backlog to match (the kernel uses the smaller); if \
             accept() itself lags, more accepting threads with SO_REUSEPORT matter more.",
            raise_text(host, &planned, &wanted)
        ),
        profile: Some(Profile::Http.name()),
        changes: Vec::new(),
        scope,
    });
}

fn packet_taps(host: &Host, out: &mut Vec<Finding>) {
    let sockets = &host.packet_sockets;
    if sockets.is_empty() {
        return;
    }
    let all_protocols = |s: &PacketSocket| s.protocol.eq_ignore_ascii_case(ETH_P_ALL);
    let taps = sockets.iter().filter(|s| all_protocols(s)).count();
    let severity = if taps > 0 {
        Severity::Warn
    } else {
        Severity::Info
    };
    let iface_name = |ifindex: u32| -> String {
        if ifindex == 0 {
            return "all interfaces".to_string();
        }
        host.interfaces
            .iter()
            .find(|i| i.ifindex == Some(ifindex))
            .map(|i| i.name.clone())
            .unwrap_or_else(|| format!("ifindex {ifindex}"))
    };
    let mut named: Vec<String> = sockets
        .iter()
        .take(MAX_SOCKETS_NAMED)
        .map(|s| {
            let proto = if all_protocols(s) {
                "all protocols (0003)".to_string()
            } else {
                format!("protocol {}", s.protocol)
            };
            format!(
                "inode {} on {}, {proto}, uid {}",
                s.inode,
                iface_name(s.ifindex),
                s.uid
            )
        })
        .collect();
    if sockets.len() > MAX_SOCKETS_NAMED {
        named.push(format!("{} more", sockets.len() - MAX_SOCKETS_NAMED));
    }
    let inodes: Vec<String> = sockets
        .iter()
        .map(|s| format!("socket:[{}]", s.inode))
        .collect();
    out.push(Finding {
        id: "sock.packet-taps",
        severity,
        title: format!(
            "{} AF_PACKET socket(s) see the traffic ({taps} on all protocols)",
            sockets.len()
        ),
        evidence: format!(
            "{} AF_PACKET socket(s): {}",
            sockets.len(),
            named.join("; ")
        ),
        why: WHY_TAPS.to_string(),
        fix: format!(
            "Find their owners (ss -0 -p, or the processes whose /proc/PID/fd links to {}) and \
             stop what is not needed: a forgotten tcpdump, a capture agent. A DHCP client's \
             filtered socket costs little.",
            inodes.join(", ")
        ),
        profile: None,
        changes: Vec::new(),
        scope: Vec::new(),
    });
}

fn conntrack(host: &Host, window: &Window, out: &mut Vec<Finding>) {
    let ct = &host.conntrack;
    if !ct.loaded {
        return;
    }
    let mut seen = Vec::new();
    let mut fixes = Vec::new();
    let mut severity = Severity::Info;
    if let (Some(count), Some(max)) = (ct.count, ct.max) {
        if max > 0 && count as f64 >= max as f64 * CONNTRACK_FULL_SHARE {
            severity = Severity::Warn;
            seen.push(format!(
                "nf_conntrack tracks {} of {} entries ({}%)",
                format_count(count),
                format_count(max),
                (count as f64 * 100.0 / max as f64).round() as u64
            ));
            fixes.push(format!(
                "raise net.netfilter.nf_conntrack_max from {max} to {}",
                doubled(max)
            ));
        }
    }
    let processed = window.per_cpu(
        |c| c.softnet.as_slice(),
        |s| (s.cpu, s.processed),
        Width::U32,
    );
    let total: u64 = processed.iter().map(|(_, n)| n).sum();
    if let Some(pps) = window.per_sec(total) {
        if pps >= CONNTRACK_BUSY_PPS {
            seen.push(format!(
                "nf_conntrack is loaded while the host receives {} packets/s {}",
                format_count(pps.round() as u64),
                window.span()
            ));
        }
    }
    if seen.is_empty() {
        return;
    }
    fixes.push(
        "exempt high-rate flows from tracking with a notrack rule in the raw table \
         (nft: ... notrack), or unload nf_conntrack where no rule needs it"
            .to_string(),
    );
    let fix = format!("{}.", sentence(&fixes.join("; ")));
    out.push(Finding {
        id: "netfilter.conntrack",
        severity,
        title: "Connection tracking on a busy path".to_string(),
        evidence: seen.join("; "),
        why: WHY_CONNTRACK.to_string(),
        fix,
        profile: None,
        changes: Vec::new(),
        scope: Vec::new(),
    });
}

#[cfg(test)]
#[path = "sockets_tests.rs"]
mod tests;
