//! Which rules could not be judged: a rule whose data could not be read
//! (see the host model's `sources`) is listed as not judged, with the file
//! and the error, instead of passing silently. Unknown is not bad, and not
//! good either.

use serde::Serialize;

use crate::host::{Host, SourceIssue};

/// The parts of the host model each rule reads (the `section` of a
/// [`SourceIssue`]; `interfaces` also covers `interface NAME`).
const NEEDS: &[(&str, &[&str])] = &[
    ("cpu.idle-latency", &["cpuidle", "cpufreq"]),
    ("cpu.mitigations", &["mitigations"]),
    // The tracer says itself when it cannot run (`trace.unavailable`).
    ("drops.reason", &[]),
    ("irq.balancer", &["processes", "interrupts"]),
    ("irq.one-cpu", &["interrupts", "cpus"]),
    ("irq.remote-numa", &["interrupts", "numa", "cpus"]),
    ("irq.shared-cpu", &["interrupts", "cpus"]),
    ("mtu.jumbo-probing", &["sysctls", "interfaces"]),
    ("napi.deferral-delays", &["sysctls", "interfaces"]),
    ("napi.no-irq-deferral", &["sysctls", "interfaces"]),
    ("netfilter.conntrack", &["conntrack"]),
    ("nic.queues-unused", &["interfaces", "cpus"]),
    ("nic.rings-small", &["interfaces"]),
    ("qdisc.no-fair-queue", &["interfaces", "sysctls"]),
    ("rfs.partial", &["interfaces", "sysctls"]),
    ("rps.off", &["interfaces", "cpus"]),
    ("rps.one-cpu", &["interfaces", "cpus"]),
    ("rss.queue-without-weight", &["interfaces"]),
    ("rss.udp-hash-ips-only", &["interfaces"]),
    ("sock.packet-taps", &["packet_sockets"]),
    (
        "softirq.hotspot",
        &["counters.softirqs", "counters.cpu_time", "cpus"],
    ),
    ("softnet.drops", &["counters.softnet", "sysctls"]),
    ("softnet.squeeze", &["counters.softnet", "sysctls"]),
    ("state.drift", &[]),
    ("tcp.buffers-inconsistent", &["sysctls"]),
    ("tcp.buffers-small", &["sysctls"]),
    ("tcp.listen-overflows", &["counters.netstat", "sysctls"]),
    ("tcp.options-off", &["sysctls"]),
    ("udp.rcvbuf-errors", &["counters.snmp", "sysctls"]),
    ("xdp.generic-mode", &["interfaces"]),
    ("xdp.stale-program", &[]),
];

/// A rule doctor could not judge, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unjudged {
    pub id: &'static str,
    /// The first source it lacks (file and error), and how many more.
    pub because: String,
}

fn covers(need: &str, issue: &SourceIssue) -> bool {
    issue.section == need || (need == "interfaces" && issue.section.starts_with("interface "))
}

/// The rules whose sources could not be read on `host`, in id order.
pub fn unjudged(host: &Host) -> Vec<Unjudged> {
    NEEDS
        .iter()
        .filter_map(|(id, needs)| {
            let missing: Vec<&SourceIssue> = host
                .sources
                .iter()
                .filter(|i| needs.iter().any(|n| covers(n, i)))
                .collect();
            let first = missing.first()?;
            let mut because = if first.path.is_empty() {
                format!("{}: {}", first.section, first.error)
            } else {
                format!("{}: {}", first.path, first.error)
            };
            if missing.len() > 1 {
                because.push_str(&format!(" (and {} more)", missing.len() - 1));
            }
            Some(Unjudged { id, because })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::testkit::vm_2cpu_single_queue;
    use crate::doctor::RULE_IDS;
    use crate::host::IssueKind;

    #[test]
    fn every_rule_says_what_it_reads() {
        let ids: Vec<&str> = NEEDS.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, RULE_IDS);
    }

    #[test]
    fn a_missing_source_names_the_rules_it_feeds() {
        let mut host = vm_2cpu_single_queue();
        assert!(unjudged(&host).is_empty());
        host.sources.push(SourceIssue {
            section: "counters.softnet".to_string(),
            path: "/proc/net/softnet_stat".to_string(),
            kind: IssueKind::Missing,
            error: "No such file or directory (os error 2)".to_string(),
        });
        let out = unjudged(&host);
        let ids: Vec<&str> = out.iter().map(|u| u.id).collect();
        assert_eq!(ids, ["softnet.drops", "softnet.squeeze"]);
        assert!(out[0]
            .because
            .starts_with("/proc/net/softnet_stat: No such file"));
    }
}
