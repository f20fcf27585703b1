//! drops.reason: the kernel's own reasons for the packets it dropped while
//! doctor sampled (`doctor --interval S --trace`), each with the place in
//! the kernel, the socket it happened to (from sock_diag, with its own
//! receive buffer, or /proc/net/udp) and the fix.

use super::shared::sysctl_u64;
use crate::base::drop_reason::ReasonRate;
use crate::base::units::{format_bytes, format_count};
use crate::doctor::{Context, Finding, Severity, SocketDrops, TracedDrops};
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

/// A socket as evidence: its drops and queue over the interval and, where
/// the kernel reported it, its own receive buffer and where that came from
/// (net.core.rmem_default for a socket that never set one).
fn socket(s: &SocketDrops, default: Option<u64>) -> String {
    let mut text = format!(
        "on {} {}: {} dropped, {} queued",
        s.socket.family,
        s.socket.local,
        format_count(s.drops),
        format_bytes(s.socket.rx_queue_bytes)
    );
    if let Some(rcvbuf) = s.socket.rcvbuf_bytes {
        let from = if Some(rcvbuf) == default {
            "net.core.rmem_default"
        } else {
            "SO_RCVBUF"
        };
        text.push_str(&format!(", rcvbuf {rcvbuf} ({from})"));
    }
    text
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
        let default = sysctl_u64(host, "net.core.rmem_default");
        let shown: Vec<&SocketDrops> = traced.udp_sockets.iter().take(MAX_SOCKETS).collect();
        let named: Vec<String> = shown.iter().map(|s| socket(s, default)).collect();
        evidence.push_str(&format!(" {}", named.join("; ")));
        let max = sysctl_u64(host, "net.core.rmem_max").map_or("?".to_string(), |m| m.to_string());
        if shown.iter().all(|s| s.socket.rcvbuf_bytes.is_some()) {
            // The ceiling of SO_RCVBUF for a process without CAP_NET_ADMIN.
            evidence.push_str(&format!("; net.core.rmem_max {max}"));
        } else if let Some(default) = default {
            evidence.push_str(&format!(
                "; a socket's buffer is net.core.rmem_default {default} unless it sets SO_RCVBUF \
                 (up to net.core.rmem_max {max})"
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
                    rcvbuf_bytes: None,
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

    /// Read through sock_diag, a socket's own buffer is the evidence, and
    /// where it came from: a buffer the application set, or the default.
    #[test]
    fn a_socket_read_through_sock_diag_shows_its_own_buffer() {
        let sink = |port: u16, rcvbuf: u64, drops: u64| SocketDrops {
            socket: UdpSocket {
                family: "udp",
                local: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
                rx_queue_bytes: 1664,
                drops,
                inode: u64::from(port),
                rcvbuf_bytes: Some(rcvbuf),
            },
            drops,
        };
        let traced = TracedDrops {
            seconds: 2.0,
            unavailable: None,
            reasons: vec![reason("SOCKET_RCVBUFF", Layer::Udp, 824, true)],
            // The fixture's net.core.rmem_default is 212992.
            udp_sockets: vec![sink(4321, 2304, 800), sink(4322, 212_992, 24)],
        };
        let found = judge(&traced);
        let e = &found[0].evidence;
        assert!(
            e.starts_with(
                "412 drops/s SOCKET_RCVBUFF (UDP) on udp 127.0.0.1:4321: 800 dropped, 1.6 KiB \
                 queued, rcvbuf 2304 (SO_RCVBUF); on udp 127.0.0.1:4322: 24 dropped, 1.6 KiB \
                 queued, rcvbuf 212992 (net.core.rmem_default); net.core.rmem_max "
            ),
            "{e}"
        );
        assert!(!e.contains("unless it sets SO_RCVBUF"), "{e}");
    }
}
