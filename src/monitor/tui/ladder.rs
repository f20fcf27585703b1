//! The drop ladder: packets lost per second at each layer a received
//! packet meets, NIC -> softnet -> IPv4/IPv6 -> UDP/UDPv6 -> TCP, as a row
//! of columns. The layer losing the most is red (reverse video without
//! colour), and the line below names it (`<< losing at UDP`) with the
//! counters that grew. `-` is a layer whose counters the kernel does not
//! have, or a gap. When the drop reasons are traced, the layers only the
//! tracer sees (qdisc, netfilter, other) join the row when they dropped,
//! and a line per layer names its top reasons of the interval with their
//! kernel locations.

use ratatui::text::{Line, Span};

use crate::monitor::ladder::COUNTER_LAYERS;
use crate::monitor::{DropLayer, Frame};

use super::fmt::{right, short};
use super::pane::PaneText;
use super::theme::Theme;

const ARROW: &str = " > ";

fn value(layer: &DropLayer) -> String {
    if !layer.counters.is_empty() {
        short(layer.drops_per_sec)
    } else if layer.traced_per_sec.is_some() {
        short(layer.traced_per_sec)
    } else {
        "-".to_string()
    }
}

/// Whether the layer has a column: one with counters, or one only the
/// tracer sees that dropped this interval.
fn shown(layer: &DropLayer) -> bool {
    !layer.counters.is_empty()
        || COUNTER_LAYERS.contains(&layer.layer)
        || layer.traced_per_sec.is_some_and(|d| d > 0.0)
}

/// One line per layer with reasons: `UDP  SOCKET_RCVBUFF 412/s at
/// udp_queue_rcv_one_skb+0x2f5, NO_SOCKET 1.0/s`.
fn reasons(frame: &Frame, theme: &Theme) -> Vec<Line<'static>> {
    let ladder = &frame.rates.drops;
    let Some(tracing) = &ladder.tracing else {
        return Vec::new();
    };
    if let Some(why) = &tracing.unavailable {
        return vec![Line::from(Span::styled(format!(" {why}"), theme.dim()))];
    }
    let mut lines = Vec::new();
    for layer in ladder.layers.iter().filter(|l| !l.reasons.is_empty()) {
        let parts: Vec<String> = layer
            .reasons
            .iter()
            .map(|r| {
                let at = match r.locations.first().map(|l| l.name.as_deref()) {
                    Some(Some(name)) => format!(" at {name}"),
                    Some(None) => " (location hidden)".to_string(),
                    None => String::new(),
                };
                format!("{} {}/s{at}", r.reason, short(r.per_sec))
            })
            .collect();
        lines.push(Line::from(vec![
            Span::styled(format!(" {:<10}", layer.layer.title()), theme.warn()),
            Span::raw(parts.join(", ")),
        ]));
    }
    if tracing.lost > 0 {
        lines.push(Line::from(Span::styled(
            format!(
                " {} drops not filed by reason (the tracer's map is full)",
                tracing.lost
            ),
            theme.dim(),
        )));
    }
    lines
}

pub fn text(frame: &Frame, theme: &Theme, _width: usize) -> PaneText {
    let ladder = &frame.rates.drops;
    let mut names = vec![Span::raw(" ")];
    let mut values = vec![Span::raw(" ")];
    for (i, layer) in ladder.layers.iter().filter(|l| shown(l)).enumerate() {
        let v = value(layer);
        let w = layer.layer.title().len().max(v.len()).max(5);
        let style = if ladder.worst == Some(layer.layer) {
            theme.alarm()
        } else if layer
            .drops_per_sec
            .or(layer.traced_per_sec)
            .is_some_and(|d| d > 0.0)
        {
            theme.warn()
        } else if layer.counters.is_empty() {
            theme.dim()
        } else {
            ratatui::style::Style::new()
        };
        if i > 0 {
            names.push(Span::styled(ARROW, theme.dim()));
            values.push(Span::raw(" ".repeat(ARROW.len())));
        }
        names.push(Span::styled(right(layer.layer.title(), w), style));
        values.push(Span::styled(right(&v, w), style));
    }
    let detail = match ladder.worst.and_then(|w| ladder.layer(w)) {
        Some(worst) => {
            let counters: Vec<String> = worst
                .counters
                .iter()
                .filter(|c| c.per_sec.is_some_and(|r| r > 0.0))
                .map(|c| {
                    let scope = c
                        .scope
                        .as_deref()
                        .map(|s| format!("{s} "))
                        .unwrap_or_default();
                    let part = if c.counted { "" } else { " (within)" };
                    format!("{scope}{} {}/s{part}", c.name, short(c.per_sec))
                })
                .collect();
            Line::from(vec![
                Span::styled(
                    format!(" << losing at {}", worst.layer.title()),
                    theme.alarm(),
                ),
                Span::raw(format!(": {}", counters.join(", "))),
            ])
        }
        None => Line::from(Span::styled(" no packets lost this interval", theme.dim())),
    };
    PaneText {
        title: vec![Span::raw("Drops/s, NIC to socket")],
        fixed: vec![Line::from(names), Line::from(values)],
        rows: std::iter::once(detail)
            .chain(reasons(frame, theme))
            .collect(),
        min_rows: 1,
    }
}
