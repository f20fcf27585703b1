//! The drop ladder: packets lost per second at each layer a received
//! packet meets, NIC -> softnet -> IPv4/IPv6 -> UDP/UDPv6 -> TCP, as a row
//! of columns. The layer losing the most is red (reverse video without
//! colour), and the line below names it (`<< losing at UDP`) with the
//! counters that grew. `-` is a layer whose counters the kernel does not
//! have, or a gap.

use ratatui::text::{Line, Span};

use crate::monitor::{DropLayer, Frame};

use super::fmt::{right, short};
use super::pane::PaneText;
use super::theme::Theme;

const ARROW: &str = " > ";

fn value(layer: &DropLayer) -> String {
    if layer.counters.is_empty() {
        "-".to_string()
    } else {
        short(layer.drops_per_sec)
    }
}

pub fn text(frame: &Frame, theme: &Theme, _width: usize) -> PaneText {
    let ladder = &frame.rates.drops;
    let mut names = vec![Span::raw(" ")];
    let mut values = vec![Span::raw(" ")];
    for (i, layer) in ladder.layers.iter().enumerate() {
        let v = value(layer);
        let w = layer.layer.title().len().max(v.len()).max(5);
        let style = if ladder.worst == Some(layer.layer) {
            theme.alarm()
        } else if layer.drops_per_sec.is_some_and(|d| d > 0.0) {
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
        rows: vec![detail],
        min_rows: 1,
    }
}
