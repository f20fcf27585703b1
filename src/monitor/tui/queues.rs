//! The packet table: per interface a total row (its link counters), then
//! one row per queue index with RX and TX packets and bytes per second
//! from the per-queue counters (netdev netlink qstats, or the driver's
//! statistics), and the drops the queue counted. Sorting by a column
//! orders the interfaces by their total in it, busiest first, and the
//! queues within each interface: the busiest NIC comes to the top with
//! its busiest queue (of a skewed RSS spread) first under its total, and
//! a queue row never leaves its interface (queue 3 alone says nothing).
//! By queue, the interfaces keep the kernel's order.

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use crate::monitor::{Frame, InterfaceRates, Lifecycle, QueueSource};

use super::filter::Filter;
use super::fmt::{fit, right, short};
use super::pane::{cycle, head, PaneText};
use super::theme::Theme;

/// Columns a queue row may be sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Queue,
    RxPackets,
    RxBytes,
    TxPackets,
    TxBytes,
    Drops,
}

impl Sort {
    pub const ALL: [Sort; 6] = [
        Sort::Queue,
        Sort::RxPackets,
        Sort::RxBytes,
        Sort::TxPackets,
        Sort::TxBytes,
        Sort::Drops,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Sort::Queue => "queue",
            Sort::RxPackets => "rx pkt/s",
            Sort::RxBytes => "rx B/s",
            Sort::TxPackets => "tx pkt/s",
            Sort::TxBytes => "tx B/s",
            Sort::Drops => "drop/s",
        }
    }

    pub fn cycle(self, forward: bool) -> Sort {
        cycle(&Sort::ALL, self, forward)
    }

    fn key(self, r: &QueueRow) -> f64 {
        let v = match self {
            Sort::Queue => None,
            Sort::RxPackets => r.rx_packets,
            Sort::RxBytes => r.rx_bytes,
            Sort::TxPackets => r.tx_packets,
            Sort::TxBytes => r.tx_bytes,
            Sort::Drops => r.drops,
        };
        v.unwrap_or(-1.0)
    }
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueRow {
    pub iface: String,
    /// `None`: the interface's total.
    pub queue: Option<u32>,
    pub rx_packets: Option<f64>,
    pub rx_bytes: Option<f64>,
    pub tx_packets: Option<f64>,
    pub tx_bytes: Option<f64>,
    pub drops: Option<f64>,
    /// `new`, `re-created`: no rates this interval.
    pub note: &'static str,
}

fn add(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, None) => a,
        (None, b) => b,
    }
}

fn note(lifecycle: Lifecycle) -> &'static str {
    match lifecycle {
        Lifecycle::Continuing => "",
        Lifecycle::Appeared => "new",
        Lifecycle::Recreated => "re-created",
    }
}

/// The rows of one interface: its total, then its queues in `sort` order.
fn interface_rows(iface: &InterfaceRates, sort: Sort) -> Vec<QueueRow> {
    let link = |name: &str| iface.link.get(name).copied().flatten();
    let mut out = vec![QueueRow {
        iface: iface.name.clone(),
        queue: None,
        rx_packets: iface.rx_packets_per_sec,
        rx_bytes: iface.rx_bytes_per_sec,
        tx_packets: iface.tx_packets_per_sec,
        tx_bytes: iface.tx_bytes_per_sec,
        drops: add(link("rx_dropped"), link("rx_missed_errors")),
        note: note(iface.lifecycle),
    }];
    let mut queues: Vec<QueueRow> = Vec::new();
    for q in &iface.queues {
        let row = match queues.iter_mut().find(|r| r.queue == Some(q.index)) {
            Some(row) => row,
            None => {
                queues.push(QueueRow {
                    iface: iface.name.clone(),
                    queue: Some(q.index),
                    rx_packets: None,
                    rx_bytes: None,
                    tx_packets: None,
                    tx_bytes: None,
                    drops: None,
                    note: "",
                });
                let last = queues.len() - 1;
                &mut queues[last]
            }
        };
        if q.direction == "rx" {
            row.rx_packets = q.packets_per_sec;
            row.rx_bytes = q.bytes_per_sec;
        } else {
            row.tx_packets = q.packets_per_sec;
            row.tx_bytes = q.bytes_per_sec;
        }
        row.drops = add(row.drops, q.drops_per_sec);
    }
    queues.sort_by(|a, b| {
        sort.key(b)
            .total_cmp(&sort.key(a))
            .then(a.queue.cmp(&b.queue))
    });
    out.extend(queues);
    out
}

/// The table's rows: the interfaces the filter lets through, each its
/// total then its queues; by a column other than the queue, the busiest
/// interface first (a stable sort: ties keep the kernel's order).
pub fn rows(frame: &Frame, filter: &Filter, sort: Sort) -> Vec<QueueRow> {
    let mut blocks: Vec<Vec<QueueRow>> = frame
        .rates
        .interfaces
        .iter()
        .filter(|i| filter.iface(&i.name))
        .map(|i| interface_rows(i, sort))
        .collect();
    if sort != Sort::Queue {
        let total = |block: &Vec<QueueRow>| block.first().map_or(-1.0, |r| sort.key(r));
        blocks.sort_by(|a, b| total(b).total_cmp(&total(a)));
    }
    blocks.into_iter().flatten().collect()
}

const IFACE: usize = 12;
const NUM: usize = 10;

pub fn text(frame: &Frame, filter: &Filter, sort: Sort, theme: &Theme, _width: usize) -> PaneText {
    let list = rows(frame, filter, sort);
    let sources: Vec<String> = frame
        .rates
        .interfaces
        .iter()
        .filter(|i| filter.iface(&i.name))
        .filter(|i| i.queue_source == QueueSource::None)
        .map(|i| i.name.clone())
        .collect();
    let mut title = vec![Span::raw(format!(
        "Queues  packets and bytes per second, sorted by {}",
        sort.label()
    ))];
    if !sources.is_empty() {
        title.push(Span::raw(format!(
            "  (no per-queue counters: {})",
            sources.join(", ")
        )));
    }
    let mut header = vec![Span::styled(fit("iface", IFACE), theme.header())];
    header.push(head("queue", 6, theme));
    for name in ["rx pkt/s", "rx B/s", "tx pkt/s", "tx B/s", "drop/s"] {
        header.push(head(name, NUM, theme));
    }
    let rows = list
        .iter()
        .map(|r| {
            let total = r.queue.is_none();
            let base = if total {
                Style::new().add_modifier(Modifier::BOLD)
            } else {
                Style::new()
            };
            let name = if total {
                fit(&r.iface, IFACE)
            } else {
                " ".repeat(IFACE)
            };
            let queue = r.queue.map_or("all".to_string(), |q| q.to_string());
            let mut spans = vec![
                Span::styled(name, base),
                Span::styled(right(&queue, 6), base),
            ];
            for v in [r.rx_packets, r.rx_bytes, r.tx_packets, r.tx_bytes] {
                spans.push(Span::styled(right(&short(v), NUM), base));
            }
            let drop_style = if r.drops.is_some_and(|d| d > 0.0) {
                theme.warn()
            } else {
                base
            };
            spans.push(Span::styled(right(&short(r.drops), NUM), drop_style));
            if !r.note.is_empty() {
                spans.push(Span::styled(format!("  {}", r.note), theme.dim()));
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
