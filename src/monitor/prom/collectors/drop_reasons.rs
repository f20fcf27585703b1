//! The kernel's drop reasons (the drop tracer on skb:kfree_skb): packets
//! dropped since the exporter started, per reason and layer of the path.
//! One series per (reason, layer) seen, so at most the kernel's reasons
//! (about 125 on Linux 6.18) times the few layers a reason can fall in;
//! kernel locations stay in `monitor --json` and the terminal view.
//!
//! When the tracer could not start (no permission, no tracepoint) the
//! exporter says so once on stderr, this collector writes nothing and its
//! `nettune_scrape_collector_success` is 0; the scrape goes on.

use super::super::exposition::{Exposition, Kind};
use super::input::Input;

pub fn write(input: &Input, out: &mut Exposition) {
    let Some(totals) = &input.sample.drop_reasons else {
        return;
    };
    if totals.unavailable.is_some() {
        return;
    }
    let mut f = out.family(
        "nettune_skb_drop_reason_total",
        "Packets the kernel dropped since the exporter started, by the reason it gave \
         (skb:kfree_skb; names as the running kernel lists them) and the layer of the path \
         nettune places the reason in (nic, softnet, qdisc, netfilter, ip, ip6, udp, udp6, tcp, \
         other).",
        Kind::Counter,
    );
    for r in &totals.reasons {
        f.sample(&[("reason", &r.reason), ("layer", r.layer.key())], r.count);
    }
}

/// Whether the reasons were counted (false: the tracer could not run).
pub fn traced(input: &Input) -> bool {
    input
        .sample
        .drop_reasons
        .as_ref()
        .is_none_or(|t| t.unavailable.is_none())
}

#[cfg(test)]
mod tests {
    use super::super::testing::{render_of, value, written};
    use super::*;
    use crate::base::drop_layer::Layer;
    use crate::base::drop_reason::{ReasonTotal, ReasonTotals};
    use crate::monitor::prom::parse::parse;
    use crate::monitor::testkit;

    fn reason(reason: &str, layer: Layer, count: u64) -> ReasonTotal {
        ReasonTotal {
            reason: reason.to_string(),
            layer,
            count,
            locations: Vec::new(),
            protocols: Vec::new(),
            about: Default::default(),
        }
    }

    #[test]
    fn one_series_per_reason_and_layer_seen() {
        let mut sample = testkit::first();
        sample.drop_reasons = Some(ReasonTotals {
            reasons: vec![
                reason("SOCKET_RCVBUFF", Layer::Udp, 412),
                reason("NO_SOCKET", Layer::Udp, 7),
                reason("NO_SOCKET", Layer::Tcp, 2),
                reason("NETFILTER_DROP", Layer::Netfilter, 40),
            ],
            ..ReasonTotals::default()
        });
        let s = written(write, &sample, None);
        assert_eq!(s.len(), 4);
        let name = "nettune_skb_drop_reason_total";
        assert_eq!(
            value(&s, name, &[("reason", "SOCKET_RCVBUFF"), ("layer", "udp")]),
            Some(412.0)
        );
        assert_eq!(
            value(&s, name, &[("reason", "NO_SOCKET"), ("layer", "tcp")]),
            Some(2.0)
        );
        assert_eq!(
            value(
                &s,
                name,
                &[("reason", "NETFILTER_DROP"), ("layer", "netfilter")]
            ),
            Some(40.0)
        );
        let (text, _) = render_of(&sample, None);
        let scraped = parse(&text).expect("exposition");
        assert_eq!(
            value(
                &scraped.series,
                "nettune_scrape_collector_success",
                &[("collector", "drop_reasons")]
            ),
            Some(1.0)
        );
    }

    #[test]
    fn a_tracer_that_could_not_start_exports_nothing_and_the_scrape_goes_on() {
        let mut sample = testkit::first();
        sample.drop_reasons = Some(ReasonTotals::unavailable(
            "drop reasons not traced: needs root",
        ));
        assert!(written(write, &sample, None).is_empty());
        let (text, _) = render_of(&sample, None);
        let scraped = parse(&text).expect("exposition");
        assert!(!text.contains("nettune_skb_drop_reason_total"));
        assert_eq!(
            value(
                &scraped.series,
                "nettune_scrape_collector_success",
                &[("collector", "drop_reasons")]
            ),
            Some(0.0)
        );
        // The other collectors are served as ever.
        assert_eq!(
            value(
                &scraped.series,
                "nettune_scrape_collector_success",
                &[("collector", "ladder")]
            ),
            Some(1.0)
        );
        // Not asked for (a replay, --no-trace): nothing, and no failure.
        sample.drop_reasons = None;
        assert!(written(write, &sample, None).is_empty());
        let (text, _) = render_of(&sample, None);
        assert!(text.contains("nettune_scrape_collector_success{collector=\"drop_reasons\"} 1"));
    }
}
