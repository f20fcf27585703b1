//! The last intervals, newest first: each CPU's soft% and the drops per
//! second at each layer of the ladder, one line per interval. Where a
//! frame shows one moment, this shows whether a hot CPU or a loss is
//! steady or a burst. Drawn where the screen has room left over (a wide
//! terminal), under the CPUs and the heat map; it is not a pane of its
//! own to focus or scroll.

use std::collections::VecDeque;

use ratatui::text::{Line, Span};

use crate::monitor::Frame;

use super::filter::Filter;
use crate::monitor::text::clock;

use super::fmt::{pct, right, short};
use super::pane::{head, PaneText};
use super::theme::{Heat, Theme};

/// Intervals kept: more than any terminal shows.
pub const KEPT: usize = 200;

/// One interval, as the history shows it.
#[derive(Debug, Clone, PartialEq)]
struct Interval {
    unix_ms: u64,
    all_soft: Option<f64>,
    /// (CPU, soft%) by CPU id.
    cpus: Vec<(u32, Option<f64>)>,
    /// (layer title, drops/s), `None`: the kernel has no counter there, or
    /// a gap.
    drops: Vec<(&'static str, Option<f64>)>,
}

/// The intervals received, oldest first, at most [`KEPT`].
#[derive(Debug, Default)]
pub struct History {
    intervals: VecDeque<Interval>,
}

impl History {
    pub fn push(&mut self, frame: &Frame) {
        let r = &frame.rates;
        if self.intervals.len() == KEPT {
            self.intervals.pop_front();
        }
        self.intervals.push_back(Interval {
            unix_ms: r.unix_ms,
            all_soft: r.all_cpus.map(|t| t.soft),
            cpus: r
                .cpus
                .iter()
                .map(|c| (c.cpu, c.time.map(|t| t.soft)))
                .collect(),
            drops: r
                .drops
                .layers
                .iter()
                .map(|l| {
                    let known = !l.counters.is_empty();
                    (l.layer.title(), l.drops_per_sec.filter(|_| known))
                })
                .collect(),
        });
    }

    pub fn len(&self) -> usize {
        self.intervals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }
}

/// Width of a soft% column (`cpu12`, ` 91!`).
const CPU_COL: usize = 6;
/// Width of the time and `all` columns.
const TIME_COL: usize = 9;
const ALL_COL: usize = 5;

/// The history up to the interval ending at `upto_ms` (the frame on
/// screen: a paused view does not run ahead), newest first, for the CPUs
/// the filter lets through.
pub fn text(
    history: &History,
    upto_ms: u64,
    filter: &Filter,
    theme: &Theme,
    width: usize,
) -> PaneText {
    let shown: Vec<&Interval> = history
        .intervals
        .iter()
        .rev()
        .filter(|i| i.unix_ms <= upto_ms)
        .collect();
    let layers: Vec<&'static str> = shown
        .first()
        .map(|i| i.drops.iter().map(|d| d.0).collect())
        .unwrap_or_default();
    let drop_cols: Vec<usize> = layers.iter().map(|t| t.len().max(5) + 1).collect();
    let drops_width: usize = drop_cols.iter().sum::<usize>() + 3;
    // As many CPUs as fit beside the drops; the rest are folded into the
    // busiest of them (`max`).
    let cpus: Vec<u32> = shown
        .first()
        .map(|i| {
            i.cpus
                .iter()
                .map(|c| c.0)
                .filter(|&c| filter.cpu(c))
                .collect()
        })
        .unwrap_or_default();
    let room = width.saturating_sub(TIME_COL + ALL_COL + drops_width) / CPU_COL;
    let (listed, folded) = if cpus.len() <= room {
        (cpus.clone(), false)
    } else {
        (Vec::new(), true)
    };
    let mut title = vec![Span::raw(format!(
        "History  soft% and drops/s, {} interval(s), newest first",
        shown.len()
    ))];
    if folded {
        title.push(Span::styled(
            format!("  (max: the busiest of {} CPUs)", cpus.len()),
            theme.dim(),
        ));
    }
    let mut header = vec![head("time", TIME_COL - 1, theme), Span::raw(" ")];
    header.push(head("all", ALL_COL, theme));
    if folded {
        header.push(head("max", CPU_COL, theme));
        header.push(head("cpu", CPU_COL, theme));
    }
    for cpu in &listed {
        header.push(head(&format!("cpu{cpu}"), CPU_COL, theme));
    }
    header.push(Span::styled(" | ", theme.dim()));
    for (title, w) in layers.iter().zip(&drop_cols) {
        header.push(head(title, *w, theme));
    }
    let rows = shown
        .iter()
        .map(|interval| {
            let mut spans = vec![
                Span::raw(format!("{} ", clock(interval.unix_ms))),
                Span::raw(right(&pct(interval.all_soft), ALL_COL)),
            ];
            let soft = |cpu: u32| -> Option<f64> {
                interval.cpus.iter().find(|c| c.0 == cpu).and_then(|c| c.1)
            };
            let cell = |value: Option<f64>| -> Span<'static> {
                let hot = value.is_some_and(|v| Heat::of_soft(v) == Heat::Hot);
                let text = format!("{}{}", pct(value), if hot { "!" } else { " " });
                if hot {
                    Span::styled(right(&text, CPU_COL), theme.alarm())
                } else {
                    Span::raw(right(&text, CPU_COL))
                }
            };
            if folded {
                let busiest = cpus
                    .iter()
                    .filter_map(|&c| soft(c).map(|s| (c, s)))
                    .max_by(|a, b| a.1.total_cmp(&b.1));
                spans.push(cell(busiest.map(|b| b.1)));
                spans.push(Span::raw(right(
                    &busiest.map_or("-".to_string(), |b| b.0.to_string()),
                    CPU_COL,
                )));
            }
            for &cpu in &listed {
                spans.push(cell(soft(cpu)));
            }
            spans.push(Span::styled(" | ", theme.dim()));
            for ((_, drops), w) in interval.drops.iter().zip(&drop_cols) {
                let text = right(&short(*drops), *w);
                if drops.is_some_and(|d| d > 0.0) {
                    spans.push(Span::styled(text, theme.warn()));
                } else {
                    spans.push(Span::raw(text));
                }
            }
            Line::from(spans)
        })
        .collect();
    PaneText {
        title,
        fixed: vec![Line::from(header)],
        rows,
        min_rows: 2,
    }
}
