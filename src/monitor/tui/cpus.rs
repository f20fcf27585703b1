//! The CPU pane: one row per CPU with its usr/sys/irq/soft shares as
//! numbers and as a bar, NET_RX softirqs and NIC interrupts per second.
//! The picture the articles hunt, one CPU at ~100% soft while the others
//! idle, is the row whose soft% is red (reverse video without colour) and
//! marked `!`. More CPUs than fit (a 128-CPU host): the list scrolls, and a
//! strip above it folds every CPU into one glyph of its soft%.

use ratatui::text::{Line, Span};

use crate::monitor::{CpuRates, CpuShares, Frame};

use super::filter::Filter;
use super::fmt::{pct, right, short};
use super::pane::{cycle, head, PaneText};
use super::theme::{Heat, Part, Theme, SHADES};

/// Columns a CPU row may be sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Cpu,
    Soft,
    Busy,
    NetRx,
    NicIrqs,
}

impl Sort {
    pub const ALL: [Sort; 5] = [
        Sort::Cpu,
        Sort::Soft,
        Sort::Busy,
        Sort::NetRx,
        Sort::NicIrqs,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Sort::Cpu => "CPU",
            Sort::Soft => "soft%",
            Sort::Busy => "busy%",
            Sort::NetRx => "NET_RX/s",
            Sort::NicIrqs => "nicirq/s",
        }
    }

    pub fn cycle(self, forward: bool) -> Sort {
        cycle(&Sort::ALL, self, forward)
    }

    fn key(self, c: &CpuRates) -> f64 {
        match self {
            Sort::Cpu => 0.0,
            Sort::Soft => c.time.map_or(-1.0, |t| t.soft),
            Sort::Busy => c.time.map_or(-1.0, busy),
            Sort::NetRx => c.net_rx_per_sec.unwrap_or(-1.0),
            Sort::NicIrqs => c.nic_irqs_per_sec.unwrap_or(-1.0),
        }
    }
}

/// More CPUs than this: the soft% strip folds them all into a line or two.
pub const STRIP_FROM: usize = 16;

/// Share of time not idle (nor waiting for I/O), as mpstat's 100 - %idle
/// - %iowait.
pub fn busy(t: CpuShares) -> f64 {
    (100.0 - t.idle - t.iowait).max(0.0)
}

/// The CPUs to list: those the filter lets through, in the sort order
/// (highest first; by CPU id for `CPU` and among equals).
pub fn rows<'a>(frame: &'a Frame, filter: &Filter, sort: Sort) -> Vec<&'a CpuRates> {
    let mut rows: Vec<&CpuRates> = frame
        .rates
        .cpus
        .iter()
        .filter(|c| filter.cpu(c.cpu))
        .collect();
    rows.sort_by(|a, b| sort.key(b).total_cmp(&sort.key(a)).then(a.cpu.cmp(&b.cpu)));
    rows
}

/// Width of the columns before the bar: CPU, usr, sys, irq, soft + mark,
/// NET_RX/s, nicirq/s.
const NUMBERS: usize = 5 + 5 + 5 + 5 + 6 + 1 + 9 + 9;

pub fn text(frame: &Frame, filter: &Filter, sort: Sort, theme: &Theme, width: usize) -> PaneText {
    let list = rows(frame, filter, sort);
    let bar = width.saturating_sub(NUMBERS + 2);
    let mut title = vec![Span::raw(format!(
        "CPUs  {} shown, sorted by {}",
        list.len(),
        sort.label()
    ))];
    let hot = list
        .iter()
        .filter(|c| c.time.is_some_and(|t| Heat::of_soft(t.soft) == Heat::Hot))
        .count();
    if hot > 0 {
        title.push(Span::styled(
            format!("  {hot} saturated by softirq (!)"),
            theme.alarm(),
        ));
    }
    let mut header = vec![
        head("CPU", 5, theme),
        head("usr", 5, theme),
        head("sys", 5, theme),
        head("irq", 5, theme),
        head("soft", 6, theme),
        Span::raw(" "),
        head("NET_RX/s", 9, theme),
        head("nicirq/s", 9, theme),
        Span::raw("  "),
    ];
    header.extend(legend(theme, bar));
    let mut fixed = vec![Line::from(header)];
    let all_net_rx = sum(&frame.rates.cpus, |c| c.net_rx_per_sec);
    let all_irqs = sum(&frame.rates.cpus, |c| c.nic_irqs_per_sec);
    fixed.push(row(
        "all",
        frame.rates.all_cpus,
        all_net_rx,
        all_irqs,
        bar,
        theme,
    ));
    if frame.rates.cpus.len() > STRIP_FROM {
        fixed.extend(strip(&frame.rates.cpus, filter, theme, width));
    }
    let rows = list
        .iter()
        .map(|c| {
            row(
                &c.cpu.to_string(),
                c.time,
                c.net_rx_per_sec,
                c.nic_irqs_per_sec,
                bar,
                theme,
            )
        })
        .collect();
    PaneText {
        title,
        fixed,
        rows,
        min_rows: 2,
    }
}

fn sum(cpus: &[CpuRates], pick: fn(&CpuRates) -> Option<f64>) -> Option<f64> {
    cpus.iter().map(pick).try_fold(0.0, |s, v| Some(s + v?))
}

/// What the bar's glyphs (and colours) mean, cut to `width`.
fn legend(theme: &Theme, width: usize) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    let mut used = 0;
    for (part, name) in [
        (Part::Usr, "usr"),
        (Part::Sys, "sys"),
        (Part::Irq, "irq"),
        (Part::Soft, "soft"),
    ] {
        let text = format!("{} {name}  ", theme.glyph(part));
        let len = text.chars().count();
        if used + len > width + 2 {
            break;
        }
        used += len;
        spans.push(Span::styled(text, theme.part(part, Heat::Calm)));
    }
    spans
}

fn row(
    label: &str,
    time: Option<CpuShares>,
    net_rx: Option<f64>,
    irqs: Option<f64>,
    bar: usize,
    theme: &Theme,
) -> Line<'static> {
    let heat = time.map_or(Heat::Calm, |t| Heat::of_soft(t.soft));
    let mark = if heat == Heat::Hot { "!" } else { " " };
    let mut spans = vec![
        Span::raw(right(label, 5)),
        Span::raw(right(&pct(time.map(|t| t.usr + t.nice)), 5)),
        Span::raw(right(&pct(time.map(|t| t.sys)), 5)),
        Span::raw(right(&pct(time.map(|t| t.irq)), 5)),
        Span::styled(right(&pct(time.map(|t| t.soft)), 6), theme.soft(heat)),
        Span::styled(mark, theme.soft(heat)),
        Span::raw(right(&short(net_rx), 9)),
        Span::raw(right(&short(irqs), 9)),
        Span::raw("  "),
    ];
    if let Some(t) = time {
        spans.extend(bar_spans(t, bar, heat, theme));
    }
    Line::from(spans)
}

/// usr (with nice), sys, irq and soft as runs of glyphs in `width` cells;
/// ends are rounded on the running sum so the runs add up.
fn bar_spans(t: CpuShares, width: usize, heat: Heat, theme: &Theme) -> Vec<Span<'static>> {
    let parts = [
        (Part::Usr, t.usr + t.nice),
        (Part::Sys, t.sys),
        (Part::Irq, t.irq),
        (Part::Soft, t.soft),
    ];
    let mut spans = Vec::new();
    let mut sum = 0.0;
    let mut drawn = 0usize;
    for (part, share) in parts {
        sum += share.max(0.0);
        let end = ((sum / 100.0 * width as f64).round() as usize).min(width);
        if end > drawn {
            let glyphs: String = std::iter::repeat_n(theme.glyph(part), end - drawn).collect();
            spans.push(Span::styled(glyphs, theme.part(part, heat)));
            drawn = end;
        }
    }
    spans
}

/// Every CPU the filter lets through as one glyph of its soft%, in CPU
/// order, wrapped at `width`: where the hot CPUs are at a glance.
fn strip(cpus: &[CpuRates], filter: &Filter, theme: &Theme, width: usize) -> Vec<Line<'static>> {
    const LABEL: &str = " soft% ";
    let per_line = width.saturating_sub(LABEL.len()).max(1);
    let cells: Vec<Span<'static>> = cpus
        .iter()
        .filter(|c| filter.cpu(c.cpu))
        .map(|c| match c.time {
            None => Span::styled(" ", theme.dim()),
            Some(t) => {
                let heat = Heat::of_soft(t.soft);
                let level = match heat {
                    Heat::Hot => 4,
                    Heat::Warm if t.soft >= 55.0 => 3,
                    Heat::Warm => 2,
                    Heat::Calm if t.soft >= 5.0 => 1,
                    Heat::Calm => 0,
                };
                let style = if level == 0 {
                    theme.dim()
                } else {
                    theme.part(Part::Soft, heat)
                };
                Span::styled(SHADES[level].to_string(), style)
            }
        })
        .collect();
    cells
        .chunks(per_line)
        .enumerate()
        .map(|(i, chunk)| {
            let label = if i == 0 { LABEL } else { "       " };
            let mut spans = vec![Span::styled(label, theme.header())];
            spans.extend(chunk.iter().cloned());
            Line::from(spans)
        })
        .collect()
}
