//! drops.reason: the kernel's own reasons for the packets it dropped while
//! doctor sampled (`doctor --interval S --trace`), each with the place in
//! the kernel, the socket it happened to where /proc/net/udp names one,
//! and the fix.

use super::shared::sysctl_u64;
use crate::base::drop_reason::ReasonRate;
use crate::base::units::{format_bytes, format_count};
use crate::doctor::{Context, Finding, Severity, TracedDrops};
use crate::host::Host;

/// Reasons turned into findings, most drops first; the rest are in
/// `--json` under `trace`.
const MAX_FINDINGS: usize = 8;

/// A limit reason at this rate or more is critical, as UDP receive errors
/// are (`udp.rcvbuf-errors`).
const CRIT_PER_SEC: f64 = super::sockets::UDP_ERRORS_CRIT_PER_SEC;

/// UDP sockets named in one finding.
const MAX_SOCKETS: usize = 3;

const WHY: &str = "The kernel passes a reason to the skb:kfree_skb tracepoint for every \
packet it drops (include/net/dropreason-core.h, Linux 5.17 and later); nettune counted them in the \
kernel during the interval and places each reason in a layer of the path.";

pub fn check(ctx: &Context, out: &mut Vec<Finding>) {
    let Some(traced) = ctx.traced else { return };
    for r in traced.reasons.iter().take(MAX_FINDINGS) {
        out.push(finding(ctx.host, traced, r));
    }
}

fn finding(host: &Host, traced: &TracedDrops, r: &ReasonRate) -> Finding {
    let per_sec = r.per_sec.unwrap_or(0.0);
    let severity = match (r.about.limit, per_sec) {
        (true, rate) if rate >= CRIT_PER_SEC => Severity::Crit,
        (true, rate) if rate >= 1.0 => Severity::Warn,
        _ => Severity::Info,
    };
    let rate = if per_sec >= 1.0 {
        format!("{} drops/s", format_count(per_sec.round() as u64))
    } else {
        format!("{} drops in {:.1} s", r.count, traced.seconds)
    };
    let mut evidence = format!("{rate} {} ({})", r.reason, r.layer.title());
    let udp = matches!(
        r.reason.as_str(),
        "SOCKET_RCVBUFF" | "SOCKET_BACKLOG" | "PROTO_MEM"
    ) && r.protocols.iter().any(|p| p.name.as_deref() == Some("udp"));
    if udp && !traced.udp_sockets.is_empty() {
        let named: Vec<String> = traced
            .udp_sockets
            .iter()
            .take(MAX_SOCKETS)
            .map(|s| {
                format!(
                    "on {} {}: {} dropped, {} queued",
                    s.socket.family,
                    s.socket.local,
                    format_count(s.drops),
                    format_bytes(s.socket.rx_queue_bytes)
                )
            })
            .collect();
        evidence.push_str(&format!(" {}", named.join("; ")));
        if let Some(default) = sysctl_u64(host, "net.core.rmem_default") {
            evidence.push_str(&format!(
                "; a socket's buffer is net.core.rmem_default {default} unless it sets SO_RCVBUF \
                 (up to net.core.rmem_max {})",
                sysctl_u64(host, "net.core.rmem_max").map_or("?".to_string(), |m| m.to_string())
            ));
        }
    }
    let at: Vec<String> = r.locations.iter().filter_map(|l| l.name.clone()).collect();
    if !at.is_empty() {
        evidence.push_str(&format!("; at {}", at.join(", ")));
    } else if !r.locations.is_empty() {
        evidence.push_str("; kernel locations hidden (kernel.kptr_restrict)");
    }
    let what = r.about.what.as_deref().unwrap_or("dropped for this reason");
    let source = r
        .about
        .source
        .as_deref()
        .map(|s| format!(" Source: {s}."))
        .unwrap_or_default();
    Finding {
        id: "drops.reason",
        severity,
        title: format!(
            "The kernel dropped packets for {} in {}: {what}",
            r.reason,
            r.layer.title()
        ),
        evidence,
        why: format!("{WHY}{source}"),
        fix: r
            .about
            .fix
            .clone()
            .unwrap_or_else(|| "no setting changes this: see what the reason means".to_string()),
        profile: None,
        changes: Vec::new(),
        scope: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::drop_layer::Layer;
    use crate::base::drop_reason::{About, PlaceCount};
    use crate::doctor::SocketDrops;
    use crate::host::udp_sockets::UdpSocket;

    fn reason(name: &str, layer: Layer, count: u64, limit: bool) -> ReasonRate {
        ReasonRate {
            reason: name.to_string(),
            layer,
            count,
            per_sec: Some(count as f64 / 2.0),
            locations: vec![PlaceCount {
                name: Some("udp_queue_rcv_one_skb+0x2f5".to_string()),
                count,
            }],
            protocols: vec![PlaceCount {
                name: Some("udp".to_string()),
                count,
            }],
            about: About {
                what: Some("the socket's receive buffer was full".to_string()),
                fix: Some("read faster or raise SO_RCVBUF".to_string()),
                source: Some(
                    "https://blog.cloudflare.com/how-to-receive-a-million-packets/".to_string(),
                ),
                limit,
            },
        }
    }

    fn judge(traced: &TracedDrops) -> Vec<Finding> {
        let host = crate::doctor::testkit::vm_2cpu_single_queue();
        let mut out = Vec::new();
        check(
            &Context {
                traced: Some(traced),
                ..Context::new(&host)
            },
            &mut out,
        );
        out
    }

    #[test]
    fn a_full_socket_buffer_is_named_with_its_socket_and_fix() {
        let traced = TracedDrops {
            seconds: 2.0,
            unavailable: None,
            reasons: vec![
                reason("SOCKET_RCVBUFF", Layer::Udp, 824, true),
                reason("NO_SOCKET", Layer::Udp, 6, false),
            ],
            udp_sockets: vec![SocketDrops {
                socket: UdpSocket {
                    family: "udp",
                    local: "0.0.0.0:4321".parse().expect("addr"),
                    rx_queue_bytes: 209_920,
                    drops: 824,
                    inode: 1,
                },
                drops: 824,
            }],
        };
        let found = judge(&traced);
        assert_eq!(found.len(), 2);
        let f = &found[0];
        assert_eq!((f.id, f.severity), ("drops.reason", Severity::Warn));
        assert!(
            f.evidence
                .starts_with("412 drops/s SOCKET_RCVBUFF (UDP) on udp 0.0.0.0:4321"),
            "{}",
            f.evidence
        );
        assert!(
            f.evidence.contains("net.core.rmem_default"),
            "{}",
            f.evidence
        );
        assert!(
            f.evidence.contains("at udp_queue_rcv_one_skb+0x2f5"),
            "{}",
            f.evidence
        );
        assert!(f.why.contains("cloudflare"), "{}", f.why);
        assert_eq!(f.fix, "read faster or raise SO_RCVBUF");
        // Not a limit: a note, which does not change the exit status.
        assert_eq!(found[1].severity, Severity::Info);
        assert!(!found[1].evidence.contains("0.0.0.0:4321"));
        // Not traced: nothing.
        let host = crate::doctor::testkit::vm_2cpu_single_queue();
        let mut out = Vec::new();
        check(&Context::new(&host), &mut out);
        assert!(out.is_empty());
    }
}
