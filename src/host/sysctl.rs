//! `/proc/sys`: the sysctls nettune reads, one value per file
//! (`net.ipv4.tcp_rmem` is `/proc/sys/net/ipv4/tcp_rmem`), and
//! conntrack's table size and fill (`net.netfilter.nf_conntrack_*`,
//! present only with the module loaded).

use std::collections::BTreeMap;

use crate::base::Root;
use crate::error::KernelError;

use super::model::{Conntrack, ROOT_NAMESPACE_SYSCTLS};

/// The sysctls nettune reads: every one a tuning technique touches
/// (docs/sources.md lists where each comes from).
pub const SYSCTLS: &[&str] = &[
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
    "net.core.optmem_max",
    "net.core.netdev_max_backlog",
    "net.core.netdev_budget",
    "net.core.netdev_budget_usecs",
    "net.core.dev_weight",
    "net.core.busy_poll",
    "net.core.busy_read",
    "net.core.rps_sock_flow_entries",
    "net.core.rps_default_mask",
    "net.core.default_qdisc",
    "net.core.somaxconn",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_mem",
    "net.ipv4.udp_mem",
    "net.ipv4.udp_rmem_min",
    "net.ipv4.udp_wmem_min",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_available_congestion_control",
    "net.ipv4.tcp_allowed_congestion_control",
    "net.ipv4.tcp_mtu_probing",
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_notsent_lowat",
    "net.ipv4.tcp_no_metrics_save",
    "net.ipv4.tcp_fastopen",
    "net.ipv4.tcp_max_syn_backlog",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_moderate_rcvbuf",
    "net.ipv4.ip_local_port_range",
    "kernel.numa_balancing",
];

/// The file of sysctl `name`: `net.ipv4.tcp_rmem` -> `/proc/sys/net/ipv4/tcp_rmem`.
pub fn path_of(name: &str) -> String {
    format!("/proc/sys/{}", name.replace('.', "/"))
}

/// A sysctl's value as people write it: tcp_rmem is printed with tabs
/// (`4096\t131072\t6291456`), shown with single spaces.
pub fn parse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Sysctl `name`, or `None` when this kernel (or namespace) lacks it.
pub fn read(root: &Root, name: &str) -> Result<Option<String>, KernelError> {
    Ok(root.read_value(&path_of(name))?.as_deref().map(parse))
}

/// The root-namespace-only sysctls as `root` shows them (best effort: one
/// that cannot be read is left out, as inside a container).
pub fn read_root_namespace_sysctls(root: &Root) -> BTreeMap<String, String> {
    ROOT_NAMESPACE_SYSCTLS
        .iter()
        .filter_map(|name| {
            let value = read(root, name).ok().flatten()?;
            Some(((*name).to_string(), value))
        })
        .collect()
}

/// conntrack's model from `nf_conntrack_count` and `nf_conntrack_max`
/// (trimmed; `None` where absent): not loaded without the count.
pub fn parse_conntrack(count: Option<&str>, max: Option<&str>) -> Conntrack {
    let count = count.and_then(|v| v.parse().ok());
    Conntrack {
        loaded: count.is_some(),
        count,
        max: max.and_then(|v| v.parse().ok()),
    }
}

/// Read conntrack's count and table size.
pub fn read_conntrack(root: &Root) -> Result<Conntrack, KernelError> {
    let count = root.read_value("/proc/sys/net/netfilter/nf_conntrack_count")?;
    let max = root.read_value("/proc/sys/net/netfilter/nf_conntrack_max")?;
    Ok(parse_conntrack(count.as_deref(), max.as_deref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    // vm-2cpu-virtio (Linux 6.18): /proc/sys/net/ipv4/tcp_rmem and
    // ip_local_port_range, tab-separated as the kernel prints them.
    const TCP_RMEM_VM_6_18: &str = "4096\t131072\t6291456\n";
    const IP_LOCAL_PORT_RANGE_VM_6_18: &str = "32768\t60999\n";

    #[test]
    fn values_with_tabs_read_with_single_spaces() {
        assert_eq!(parse(TCP_RMEM_VM_6_18), "4096 131072 6291456");
        assert_eq!(parse(IP_LOCAL_PORT_RANGE_VM_6_18), "32768 60999");
        assert_eq!(parse("bbr\n"), "bbr");
        assert_eq!(path_of("net.ipv4.tcp_rmem"), "/proc/sys/net/ipv4/tcp_rmem");
    }

    #[test]
    fn conntrack_is_loaded_when_it_counts() {
        let c = parse_conntrack(Some("1234"), Some("262144"));
        assert!(c.loaded);
        assert_eq!((c.count, c.max), (Some(1234), Some(262144)));
        let absent = parse_conntrack(None, None);
        assert!(!absent.loaded && absent.count.is_none() && absent.max.is_none());
    }

    #[test]
    fn reads_the_fixture_tree() {
        let root = crate::host::fixture("vm-2cpu-virtio");
        assert_eq!(
            read(&root, "net.ipv4.tcp_rmem").expect("read").as_deref(),
            Some("4096 131072 6291456")
        );
        assert_eq!(read(&root, "net.no_such.sysctl").expect("absent"), None);
        assert!(!read_conntrack(&root).expect("conntrack").loaded);
    }
}
