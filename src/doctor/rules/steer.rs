//! rss.queue-without-weight, xdp.generic-mode, xdp.stale-program: the
//! state the single-RX-queue method leaves, judged when nobody meant it.

use super::shared::{judged_interfaces, plural};
use crate::base::cpuset::format_list;
use crate::base::driver::xdp::XdpMode;
use crate::base::Probe;
use crate::doctor::{Context, Finding, Severity};

pub fn check(ctx: &Context, out: &mut Vec<Finding>) {
    queue_without_weight(ctx, out);
    generic_mode(ctx, out);
    stale_program(ctx, out);
}

fn finding(id: &'static str, severity: Severity, title: String) -> Finding {
    Finding {
        id,
        severity,
        title,
        evidence: String::new(),
        why: String::new(),
        fix: String::new(),
        profile: None,
        changes: Vec::new(),
        scope: Vec::new(),
    }
}

/// Queues the RSS indirection table never names (the queue a `nettune
/// steer` state took out is meant to be so).
fn queue_without_weight(ctx: &Context, out: &mut Vec<Finding>) {
    for iface in judged_interfaces(ctx) {
        let d = &iface.driver_settings;
        let Probe::Value(table) = &d.rss_indirection else {
            continue;
        };
        let rings = match (&d.rx_rings, &d.channels) {
            (Probe::Value(n), _) => *n,
            (_, Probe::Value(c)) => c.combined.saturating_add(c.rx),
            _ => continue,
        };
        // A count no device has (a garbled capture): nothing to judge, and
        // listing its queues would take gigabytes.
        if rings > crate::base::driver::flow::MAX_QUEUES {
            continue;
        }
        let steered: Vec<u32> = ctx
            .applied
            .iter()
            .filter_map(|s| s.steered.as_ref())
            .filter(|(name, _)| *name == iface.name)
            .map(|(_, q)| *q)
            .collect();
        let empty: Vec<u32> = (0..rings)
            .filter(|q| !table.contains(q) && !steered.contains(q))
            .collect();
        if table.is_empty() || empty.is_empty() {
            continue;
        }
        let mut named: Vec<u32> = table.clone();
        named.sort_unstable();
        named.dedup();
        let mut f = finding(
            "rss.queue-without-weight",
            Severity::Warn,
            format!(
                "{}: RSS sends no flow to {} {} of its {rings}",
                iface.name,
                if empty.len() == 1 { "queue" } else { "queues" },
                format_list(&empty)
            ),
        );
        let rules = match &d.ntuple {
            Probe::Value(t) => format!("; {} ntuple rule(s) steer flows by hand", t.rules.len()),
            _ => String::new(),
        };
        f.evidence = format!(
            "the {}-entry indirection table names queues {} of {}{rules}{}",
            table.len(),
            format_list(&named),
            plural(rings as usize, "RX queue"),
            if steered.is_empty() {
                String::new()
            } else {
                format!(
                    "; queue {} was given to a reader by nettune steer",
                    format_list(&steered)
                )
            }
        );
        f.why = "The NIC picks a flow's RX queue by looking its hash up in the indirection \
                 table (Documentation/networking/scaling.rst, RSS). A queue the table never \
                 names gets no hashed flow: its IRQ and CPU sit idle for ordinary traffic while \
                 the other queues carry its share. That is what the single-RX-queue bypass wants \
                 for the queue it gives to one flow, and a mistake anywhere else (a weight left \
                 at 0, a table written for fewer queues)."
            .to_string();
        f.fix = format!(
            "Spread the table over every queue again: `ethtool -X {} equal {rings}` (or \
             `ethtool -X {} default`); if `nettune steer` set it, `nettune rollback` of that \
             state restores the table it found.",
            iface.name, iface.name
        );
        out.push(f);
    }
}

/// A program in generic mode where the driver runs XDP natively.
fn generic_mode(ctx: &Context, out: &mut Vec<Finding>) {
    for iface in ctx.host.interfaces.iter().filter(|i| i.name != "lo") {
        let Probe::Value(xdp) = &iface.xdp else {
            continue;
        };
        let Some(program) = xdp.in_mode(XdpMode::Generic) else {
            continue;
        };
        let Probe::Value(features) = &xdp.features else {
            continue;
        };
        if !features.native() {
            continue;
        }
        let name = program.name.as_deref().unwrap_or("(name unknown)");
        let mut f = finding(
            "xdp.generic-mode",
            Severity::Warn,
            format!(
                "{}: XDP program {name} (id {}) runs in generic mode; the driver runs XDP natively",
                iface.name, program.id
            ),
        );
        f.evidence = format!(
            "{} has program {} in generic (skb) mode; its driver's xdp-features: {}",
            iface.name,
            program.id,
            features.actions.join(" ")
        );
        f.why = "Generic XDP runs after the kernel has allocated the packet's skb and parsed \
                 it, so it saves none of the work native XDP exists to skip; the driver here can \
                 run the program in its receive path, before any allocation \
                 (Documentation/networking/xdp-rx-metadata.rst lists what native mode adds; \
                 ip-link(8): xdpdrv vs xdpgeneric)."
            .to_string();
        f.fix = format!(
            "Attach it in native mode: `ip link set dev {} xdpgeneric off`, then load it with \
             `ip link set dev {} xdpdrv ...` or `xdp-loader load -m native`; `nettune bench \
             udp-sink --xdp` attaches natively unless told `--xdp-mode generic`.",
            iface.name, iface.name
        );
        out.push(f);
    }
}

/// An XDP program recorded by a nettune benchmark whose process is gone.
fn stale_program(ctx: &Context, out: &mut Vec<Finding>) {
    for state in ctx.applied {
        let Some(x) = &state.xdp else {
            continue;
        };
        if x.owner_running {
            continue;
        }
        let r = &x.record;
        let mut f = if x.attached {
            let mut f = finding(
                "xdp.stale-program",
                Severity::Warn,
                format!(
                    "{}: XDP program {} (id {}) was left attached by a nettune bench that is gone",
                    r.iface, r.name, r.id
                ),
            );
            f.why = "The process that attached it (killed, or its machine's power cut) never \
                     removed it. The program still runs for every packet of the interface and \
                     redirects the flow's packets of its queue to an AF_XDP socket that no \
                     longer exists; they fall back to the kernel stack, at the cost of the \
                     program's work per packet."
                .to_string();
            f
        } else {
            let mut f = finding(
                "xdp.stale-program",
                Severity::Info,
                format!(
                    "state {} records XDP program {} (id {}) on {}, which is no longer attached",
                    state.id, r.name, r.id, r.iface
                ),
            );
            f.why = "A nettune bench recorded the program before attaching it and ended \
                     without closing the record (killed); the program went with its interface \
                     or was removed by hand."
                .to_string();
            f
        };
        f.evidence = format!(
            "state {}: {} mode on {} queue {}, attached by pid {} (not running)",
            state.id,
            r.mode.name(),
            r.iface,
            r.queue,
            r.pid
        );
        f.fix = format!(
            "`{}` removes that program (only if it is still the one nettune attached, never \
             another) and closes the record.",
            state.rollback
        );
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::driver::xdp::{XdpFeatures, XdpProgram, XdpState};
    use crate::base::records::XdpRecord;
    use crate::doctor::testkit::two_socket_smt_8q;
    use crate::doctor::{AppliedState, AppliedXdp};

    fn ids(out: &[Finding]) -> Vec<&str> {
        out.iter().map(|f| f.id).collect()
    }

    /// The findings of these rules on `host` with `applied` states.
    fn judge(host: &crate::host::Host, applied: &[AppliedState]) -> Vec<Finding> {
        let mut out = Vec::new();
        check(
            &Context {
                applied,
                ..Context::new(host)
            },
            &mut out,
        );
        out
    }

    #[test]
    fn a_queue_left_out_of_rss_is_found_unless_steered() {
        let mut host = two_socket_smt_8q();
        let eth0 = &mut host.interfaces[0];
        eth0.driver_settings.rx_rings = Probe::Value(8);
        // `ethtool -X eth0 weight 1 1 1 1 0 1 1 1`.
        eth0.driver_settings.rss_indirection =
            Probe::Value(crate::base::driver::flow::without_queue(128, 8, 4).expect("table"));
        let ctx = Context::new(&host);
        let mut out = Vec::new();
        check(&ctx, &mut out);
        assert_eq!(ids(&out), ["rss.queue-without-weight"]);
        assert!(
            out[0].title.contains("queue 4 of its 8"),
            "{}",
            out[0].title
        );
        assert!(out[0].fix.contains("ethtool -X eth0 equal 8"));
        let steered = [AppliedState {
            id: 2,
            what: "steer eth0 queue 4 (udp4 dst-port 53)".to_string(),
            profile: None,
            drift: Vec::new(),
            rollback: "nettune rollback 2".to_string(),
            apply_again: String::new(),
            steered: Some(("eth0".to_string(), 4)),
            xdp: None,
        }];
        let out = judge(&host, &steered);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn generic_xdp_on_a_native_driver_is_found() {
        let mut host = two_socket_smt_8q();
        let program = XdpProgram {
            mode: XdpMode::Generic,
            id: 42,
            name: Some("filter".to_string()),
        };
        host.interfaces[0].xdp = Probe::Value(XdpState {
            programs: vec![program.clone()],
            features: Probe::Value(XdpFeatures {
                actions: vec!["basic".to_string(), "redirect".to_string()],
                zc_max_segs: 1,
            }),
        });
        let mut out = Vec::new();
        check(&Context::new(&host), &mut out);
        assert_eq!(ids(&out), ["xdp.generic-mode"]);
        // A driver without native XDP: generic is all there is.
        host.interfaces[0].xdp = Probe::Value(XdpState {
            programs: vec![program],
            features: Probe::Value(XdpFeatures {
                actions: Vec::new(),
                zc_max_segs: 0,
            }),
        });
        let mut out = Vec::new();
        check(&Context::new(&host), &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn a_program_whose_bench_is_gone_is_found() {
        let host = two_socket_smt_8q();
        let record = XdpRecord {
            iface: "veth1".to_string(),
            queue: 0,
            id: 77,
            name: "nettune_xsk".to_string(),
            mode: XdpMode::Native,
            pid: 4_000_000,
            pid_start: Some(1),
        };
        let mut applied = [AppliedState {
            id: 5,
            what: "XDP program".to_string(),
            profile: None,
            drift: Vec::new(),
            rollback: "nettune rollback 5".to_string(),
            apply_again: String::new(),
            steered: None,
            xdp: Some(AppliedXdp {
                record,
                owner_running: false,
                attached: true,
            }),
        }];
        let out = judge(&host, &applied);
        assert_eq!(ids(&out), ["xdp.stale-program"]);
        assert_eq!(out[0].severity, Severity::Warn);
        assert!(out[0].fix.contains("nettune rollback 5"));
        if let Some(x) = &mut applied[0].xdp {
            x.owner_running = true;
        }
        assert!(judge(&host, &applied).is_empty());
    }
}
