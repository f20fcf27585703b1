//! Host-wide settings: sysctls, the CPU frequency governor and haltpoll.
//! Inside a network namespace, what the namespace cannot set (sysctls of
//! the host's namespace only, read-only mirrors of the host's, CPU
//! settings) is named as host-wide, with the command for the host
//! ([`super::admit::sysctl_reach`]).

use super::admit::sysctl_reach;
use super::change::KERNEL_GROUP;
use super::draft::Draft;
use super::profile::{PlanOptions, Profile};
use super::target::Target;
use super::value::Value;
use super::values::{
    buffer_tier, BUSY_POLL_US, GOVERNOR, HALT_POLL_NS, HTTP_LISTEN_BACKLOG, PPS_NETDEV_BUDGET,
    PPS_NETDEV_MAX_BACKLOG, PPS_RMEM_DEFAULT, PPS_RMEM_MAX, PPS_UDP_RMEM_MIN, RFS_ENTRIES,
    TCP_MTU_PROBING,
};
use crate::base::units::{format_bytes, format_rate, format_time};
use crate::host::{Host, Interface};
use crate::plan::compare::same_value;

/// Default round trip for buffer sizes: fasterdata.es.net's first tier,
/// "paths up to 100 ms".
const DEFAULT_RTT_US: u64 = 100_000;
/// Link speed assumed when no selected link reports one.
const DEFAULT_BANDWIDTH_BITS: u64 = 10_000_000_000;

/// Kernel defaults (x86_64 and arm64 builds) that `baseline` restores.
/// Values that depend on memory size or HZ (tcp_mem, tcp_max_syn_backlog,
/// netdev_budget_usecs) are left alone.
const KERNEL_DEFAULTS: &[(&str, &str)] = &[
    ("net.core.rmem_max", "212992"),
    ("net.core.wmem_max", "212992"),
    ("net.core.rmem_default", "212992"),
    ("net.core.wmem_default", "212992"),
    ("net.core.netdev_max_backlog", "1000"),
    ("net.core.netdev_budget", "300"),
    ("net.core.dev_weight", "64"),
    ("net.core.busy_poll", "0"),
    ("net.core.busy_read", "0"),
    ("net.core.rps_sock_flow_entries", "0"),
    ("net.core.somaxconn", "4096"),
    ("net.ipv4.tcp_rmem", "4096 131072 6291456"),
    ("net.ipv4.tcp_wmem", "4096 16384 4194304"),
    ("net.ipv4.tcp_mtu_probing", "0"),
    ("net.ipv4.tcp_slow_start_after_idle", "1"),
    ("net.ipv4.tcp_notsent_lowat", "4294967295"),
    ("net.ipv4.tcp_no_metrics_save", "0"),
    ("net.ipv4.tcp_fastopen", "1"),
    ("net.ipv4.tcp_window_scaling", "1"),
    ("net.ipv4.tcp_sack", "1"),
    ("net.ipv4.tcp_timestamps", "1"),
    ("net.ipv4.tcp_moderate_rcvbuf", "1"),
    ("net.ipv4.udp_rmem_min", "4096"),
];

/// What a sysctl must be for the profile.
enum Want {
    /// A number at least this big (a bigger one satisfies).
    AtLeast(u64),
    /// Exactly this value.
    Exactly(Value),
    /// A `min default max` triple whose max is at least this; min and
    /// default keep their values, put in order if they were not.
    MaxAtLeast(u64),
    /// A bit mask with these bits set.
    BitsSet(u64),
}

/// The RFS table size the plan aims for: 32768, or more if already set.
pub(super) fn rfs_entries(host: &Host) -> u64 {
    host.sysctls
        .get("net.core.rps_sock_flow_entries")
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(RFS_ENTRIES, |n| n.max(RFS_ENTRIES).next_power_of_two())
}

/// The socket flow table RFS needs (net.core.rps_sock_flow_entries), as
/// the queues' rps_flow_cnt can count on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FlowTable {
    /// This many entries: set here, or planned with the queues.
    Here(u64),
    /// Host-wide and out of reach from this namespace: the host's value
    /// (0: RFS is off for every namespace).
    Host(u64),
    /// Host-wide, out of reach and not visible (inside a container).
    Unseen,
}

pub(super) fn flow_table(host: &Host) -> FlowTable {
    let name = "net.core.rps_sock_flow_entries";
    if !host.in_netns() {
        return FlowTable::Here(rfs_entries(host));
    }
    match host
        .sysctl_or_host(name)
        .and_then(|v| v.trim().parse().ok())
    {
        Some(n) => FlowTable::Host(n),
        None => FlowTable::Unseen,
    }
}

pub(super) fn plan_kernel(
    d: &mut Draft,
    host: &Host,
    opts: &PlanOptions,
    cpus: &[u32],
    ifaces: &[&Interface],
) {
    use Want::*;
    let rfs = || {
        (
            "net.core.rps_sock_flow_entries",
            AtLeast(RFS_ENTRIES),
            "RFS: steer each flow to the CPU of the thread reading it; 32768 entries (scaling.rst)",
        )
    };
    let busy_read = (
        "net.core.busy_read",
        AtLeast(BUSY_POLL_US),
        "busy polling: a blocking read spins 50 us on the queue instead of sleeping (tuned network-latency; talawah.io)",
    );
    let busy_poll = (
        "net.core.busy_poll",
        AtLeast(BUSY_POLL_US),
        "busy polling for poll/epoll: 50 us (tuned network-latency; talawah.io)",
    );
    let wanted: Vec<(&str, Want, &str)> = match opts.profile {
        Profile::Pps => vec![
            ("net.core.rmem_max", AtLeast(PPS_RMEM_MAX), "room for sockets that ask for big receive buffers: RcvbufErrors (Cloudflare 1M pps)"),
            ("net.core.rmem_default", AtLeast(PPS_RMEM_DEFAULT), "4 MB receive buffer for UDP sockets that do not set one (fasterdata UDP tuning; Cloudflare's udpreceiver never sets one)"),
            ("net.ipv4.udp_rmem_min", AtLeast(PPS_UDP_RMEM_MIN), "each UDP socket keeps 64 KB of receive buffer under udp_mem pressure: bursts of small packets (Cloudflare 1M pps)"),
            ("net.core.netdev_max_backlog", AtLeast(PPS_NETDEV_MAX_BACKLOG), "per-CPU backlog for RPS and bursts: softnet drops (bpftune raises it on drops)"),
            ("net.core.netdev_budget", AtLeast(PPS_NETDEV_BUDGET), "more packets per softirq round: time_squeeze (bpftune raises it)"),
            rfs(),
        ],
        Profile::Latency => {
            let mut v = vec![
                busy_read,
                busy_poll,
                ("net.ipv4.tcp_fastopen", BitsSet(3), "TCP Fast Open for clients and servers: data in the SYN saves a round trip (tuned network-latency)"),
                rfs(),
            ];
            if host.numa_nodes.len() > 1 {
                v.push(("kernel.numa_balancing", Exactly(Value::number(0)), "no NUMA balancing: page migration stalls threads (tuned network-latency)"));
            }
            v
        }
        Profile::Http => vec![
            ("net.core.somaxconn", AtLeast(HTTP_LISTEN_BACKLOG), "listen backlog for bursts of new connections: ListenOverflows (talawah.io; tuned: somaxconn >= 2048)"),
            ("net.ipv4.tcp_max_syn_backlog", AtLeast(HTTP_LISTEN_BACKLOG), "SYN queue for bursts of new connections (talawah.io)"),
            busy_read,
            busy_poll,
            rfs(),
        ],
        Profile::Throughput | Profile::Custom => Vec::new(),
        Profile::Baseline => KERNEL_DEFAULTS
            .iter()
            .map(|(name, value)| (*name, Exactly(Value::sysctl(value)), "kernel default"))
            .collect(),
    };
    for (name, want, reason) in wanted {
        sysctl(d, host, name, want, reason.to_string());
    }
    match opts.profile {
        Profile::Throughput => {
            buffers(d, host, opts, ifaces);
            sysctl(d, host, "net.ipv4.tcp_no_metrics_save", Exactly(Value::number(1)), "do not start new connections from an old connection's cached (possibly bad) metrics (fasterdata)".to_string());
            sysctl(
                d,
                host,
                "net.ipv4.tcp_slow_start_after_idle",
                Exactly(Value::number(0)),
                "keep the congestion window across idle periods (tuned network-throughput)"
                    .to_string(),
            );
            sysctl(d, host, "net.ipv4.tcp_moderate_rcvbuf", Exactly(Value::number(1)), "receive autotuning on: sockets grow to the tcp_rmem maximum instead of staying at its default (fasterdata)".to_string());
            if let Some(jumbo) = ifaces.iter().find(|i| i.mtu.is_some_and(|m| m > 1500)) {
                let reason = format!(
                    "MTU probing with jumbo frames ({} has MTU {}); 1, not 2 (fasterdata)",
                    jumbo.name,
                    jumbo.mtu.unwrap_or_default()
                );
                sysctl(
                    d,
                    host,
                    "net.ipv4.tcp_mtu_probing",
                    Exactly(Value::number(TCP_MTU_PROBING)),
                    reason,
                );
            }
            congestion_control(d, host, "bbr", "bbr: paced, model-based congestion control for long fat paths (fasterdata: try bbr)");
            governor(
                d,
                host,
                cpus,
                "performance governor: full clock for 40/100G flows (fasterdata 100G tuning)",
            );
        }
        Profile::Latency => {
            governor(
                d,
                host,
                cpus,
                "performance governor: no wake-up at a low clock (tuned network-latency)",
            );
            halt_poll(d, host);
        }
        Profile::Baseline => {
            congestion_control(d, host, "cubic", "kernel default (CONFIG_DEFAULT_TCP_CONG)");
        }
        Profile::Pps | Profile::Http | Profile::Custom => {}
    }
}

/// Why this namespace cannot set sysctl `name`, if it cannot (outside a
/// network namespace every sysctl is in reach). The same reach a saved
/// plan's changes are admitted by ([`super::admit::sysctl_reach`]).
fn out_of_reach(host: &Host, name: &str) -> Option<String> {
    if !host.in_netns() {
        return None;
    }
    sysctl_reach(name).map(|reach| reach.why(&host.netns_text()))
}

/// The value `want` asks for given the current text; `Ok(None)` when the
/// current value satisfies it, `Err(reason)` when it cannot be judged.
fn wanted(name: &str, current: Option<&str>, want: Want) -> Result<Option<Value>, String> {
    let number = current.and_then(|c| c.trim().parse::<u64>().ok());
    let to = match want {
        Want::AtLeast(n) => match number {
            Some(c) if c >= n => return Ok(None),
            _ => Value::number(n),
        },
        Want::Exactly(value) => value,
        Want::BitsSet(bits) => match number {
            Some(c) if c & bits == bits => return Ok(None),
            Some(c) => Value::number(c | bits),
            None => Value::number(bits),
        },
        Want::MaxAtLeast(n) => {
            let current = current.unwrap_or_default();
            let fields: Vec<u64> = current
                .split_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect();
            match fields[..] {
                [min, default, max] => {
                    // A triple out of order (default above max) is what
                    // doctor's tcp.buffers-inconsistent reports: sort it.
                    let mut wanted = [min, default, max.max(n)];
                    wanted.sort_unstable();
                    if wanted == [min, default, max] {
                        return Ok(None);
                    }
                    Value::triple(wanted)
                }
                _ => {
                    return Err(format!(
                        "{name} is '{current}', not three numbers: left alone"
                    ))
                }
            }
        }
    };
    Ok(Some(to))
}

fn sysctl(d: &mut Draft, host: &Host, name: &str, want: Want, reason: String) {
    let target = Target::sysctl(name);
    if let Some(why) = out_of_reach(host, name) {
        // The host's value where it can be seen (a mirror, or read before
        // entering --netns); unseen, the profile's value is named anyway.
        let from = host.sysctl_or_host(name);
        match wanted(name, from, want) {
            Ok(Some(to)) if !from.is_some_and(|f| same_value(&target, f, to.as_str())) => {
                d.host_wide(target, from, to, reason, &why)
            }
            Ok(_) => {}
            Err(why) => d.skip(KERNEL_GROUP, &target, &why),
        }
        return;
    }
    let Some(current) = host.sysctls.get(name) else {
        if let Some(unread) = host.sources.iter().find(|i| i.section == "sysctls") {
            let why = format!(
                "{name} could not be read ({}: {})",
                unread.path, unread.error
            );
            d.skip(KERNEL_GROUP, &target, &why);
            return;
        }
        let place = match &host.source.netns {
            Some(ns) => format!(" in network namespace '{ns}'"),
            None => " on this kernel".to_string(),
        };
        d.skip(
            KERNEL_GROUP,
            &target,
            &format!("{name} does not exist{place}"),
        );
        return;
    };
    match wanted(name, Some(current), want) {
        Ok(Some(to)) => d.want(KERNEL_GROUP, target, current, to, reason),
        Ok(None) => {}
        Err(why) => d.skip(KERNEL_GROUP, &target, &why),
    }
}

/// Buffers from bandwidth x RTT per stream, rounded up to a tier.
pub(super) fn buffers(d: &mut Draft, host: &Host, opts: &PlanOptions, ifaces: &[&Interface]) {
    let (bandwidth, whence) = match opts.bandwidth_bits {
        Some(b) => (b, "--bandwidth"),
        None => match ifaces.iter().filter_map(|i| i.speed_mbps).max() {
            Some(mbps) => (mbps * 1_000_000, "link speed"),
            None => (
                DEFAULT_BANDWIDTH_BITS,
                "assumed: no link speed known, give --bandwidth",
            ),
        },
    };
    let rtt_us = opts.rtt_us.unwrap_or(DEFAULT_RTT_US);
    let streams = u64::from(opts.streams.unwrap_or(1));
    let bdp = (u128::from(bandwidth) * u128::from(rtt_us) / 8 / 1_000_000) as u64;
    let per_stream = bdp.div_ceil(streams);
    let (tcp_max, core_max, source) = buffer_tier(per_stream);
    let capped = if tcp_max < per_stream {
        ", capped at the largest tier"
    } else {
        ""
    };
    let why = format!(
        "bandwidth x RTT: {} ({whence}) x {} = {} / {streams} stream(s) = {} per stream -> autotuning max {}, socket cap {}{capped} ({source})",
        format_rate(bandwidth),
        format_time(rtt_us as f64 / 1e6),
        format_bytes(bdp),
        format_bytes(per_stream),
        format_bytes(tcp_max),
        format_bytes(core_max),
    );
    for (core, tcp) in [
        ("net.core.rmem_max", "net.ipv4.tcp_rmem"),
        ("net.core.wmem_max", "net.ipv4.tcp_wmem"),
    ] {
        // Never below the autotuning maximum left in place (a bigger one
        // set by hand is kept): a socket cap under it is the contradiction
        // doctor's tcp.buffers-inconsistent reports (ip-sysctl.rst).
        let kept = largest_field(host, tcp).unwrap_or(0);
        let (cap, why) = if kept > core_max {
            (
                kept,
                format!(
                    "{why}; raised to {tcp}'s maximum {}: the socket cap is never below autotuning's (ip-sysctl.rst)",
                    format_bytes(kept)
                ),
            )
        } else {
            (core_max, why.clone())
        };
        sysctl(d, host, core, Want::AtLeast(cap), why);
    }
    for (core, tcp) in [
        ("net.core.rmem_max", "net.ipv4.tcp_rmem"),
        ("net.core.wmem_max", "net.ipv4.tcp_wmem"),
    ] {
        let (max, why) = within_socket_cap(host, core, tcp_max, &why);
        sysctl(d, host, tcp, Want::MaxAtLeast(max), why);
    }
}

/// The autotuning maximum, held to the socket cap `core` where this
/// namespace cannot raise the cap: tcp_rmem above rmem_max is the
/// contradiction doctor's tcp.buffers-inconsistent reports, and inside a
/// namespace only the host can lift it (the plan names that as host-wide).
fn within_socket_cap(host: &Host, core: &str, tcp_max: u64, why: &str) -> (u64, String) {
    let cap = out_of_reach(host, core)
        .and(host.sysctl_or_host(core))
        .and_then(|v| v.trim().parse::<u64>().ok());
    match cap {
        Some(cap) if cap < tcp_max => (
            cap,
            format!(
                "{why}; held to {core} ({}), which only the host can raise: set it there (see host-wide) and plan again for {}",
                format_bytes(cap),
                format_bytes(tcp_max)
            ),
        ),
        _ => (tcp_max, why.to_string()),
    }
}

/// The largest field of a `min default max` sysctl (the maximum, also
/// when the fields are out of order).
fn largest_field(host: &Host, name: &str) -> Option<u64> {
    host.sysctls
        .get(name)?
        .split_whitespace()
        .filter_map(|f| f.parse::<u64>().ok())
        .max()
}

fn congestion_control(d: &mut Draft, host: &Host, wanted: &str, reason: &str) {
    let name = "net.ipv4.tcp_congestion_control";
    let target = Target::sysctl(name);
    let words = |key: &str| -> Vec<String> {
        host.sysctls
            .get(key)
            .map(|v| v.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    };
    if host.sysctls.get(name).map(|v| v.trim()) == Some(wanted) {
        return;
    }
    let available = words("net.ipv4.tcp_available_congestion_control");
    if !available.iter().any(|a| a == wanted) {
        d.skip(
            KERNEL_GROUP,
            &target,
            &format!(
                "{wanted} is not available on this kernel (available: {}): load it (modprobe tcp_{wanted}) and plan again",
                available.join(" ")
            ),
        );
        return;
    }
    if let Some(ns) = &host.source.netns {
        let allowed = words("net.ipv4.tcp_allowed_congestion_control");
        if !allowed.iter().any(|a| a == wanted) {
            d.skip(
                KERNEL_GROUP,
                &target,
                &format!(
                    "{wanted} is not allowed inside network namespace '{ns}' (tcp_allowed_congestion_control: {}): add it on the host first",
                    allowed.join(" ")
                ),
            );
            return;
        }
    }
    sysctl(
        d,
        host,
        name,
        Want::Exactly(Value::name(wanted)),
        reason.to_string(),
    );
}

/// The performance governor on the network CPUs that have cpufreq.
fn governor(d: &mut Draft, host: &Host, cpus: &[u32], reason: &str) {
    if host.cpufreq.governors.is_empty() {
        d.skip(
            KERNEL_GROUP,
            &Target::Cpufreq,
            "no cpufreq on this host (a VM, or frequency scaling off): the governor cannot be set",
        );
        return;
    }
    for &cpu in cpus {
        if let Some((current, _)) = host
            .cpufreq
            .governors
            .iter()
            .find(|(_, list)| list.contains(&cpu))
        {
            cpu_setting(
                d,
                host,
                Target::Governor(cpu),
                current,
                Value::name(GOVERNOR),
                reason.to_string(),
            );
        }
    }
}

/// A CPU setting (governor, haltpoll): changed here, or inside a network
/// namespace named as host-wide (CPUs are the host's).
fn cpu_setting(d: &mut Draft, host: &Host, target: Target, from: &str, to: Value, reason: String) {
    if !host.in_netns() {
        d.want(KERNEL_GROUP, target, from, to, reason);
    } else if !same_value(&target, from, to.as_str()) {
        let why = format!(
            "CPU settings are the host's: {} cannot change them",
            host.netns_text()
        );
        d.host_wide(target, Some(from), to, reason, &why);
    }
}

/// haltpoll's guest_halt_poll_ns raised where haltpoll is the idle driver.
fn halt_poll(d: &mut Draft, host: &Host) {
    let target = Target::HaltPoll;
    if host.cpuidle.driver.as_deref() != Some("haltpoll") {
        return;
    }
    let Some(current) = host.cpuidle.guest_halt_poll_ns else {
        return;
    };
    if current >= HALT_POLL_NS {
        return;
    }
    cpu_setting(
        d,
        host,
        target,
        &current.to_string(),
        Value::number(HALT_POLL_NS),
        "poll 200 us before halting the vCPU: a cross-CPU wake-up without a VM exit (guest-halt-polling.rst)".to_string(),
    );
}
