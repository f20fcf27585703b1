//! The queue x CPU interrupt heat map: a row per NIC IRQ vector (an
//! interface's queue, or its `other` vector), a column per CPU, each cell
//! the interrupts per second that CPU took from that vector, shaded
//! against the busiest cell. Every queue landing on CPU0 is a lit column
//! on the left. Numbers when the columns are wide enough, shades
//! (`·░▒▓█`) otherwise, and when the CPUs outnumber the columns, each
//! cell folds neighbouring CPUs together (the title says how many).

use ratatui::text::{Line, Span};

use crate::host::VectorRole;
use crate::monitor::{Frame, IrqRates, Lifecycle};

use super::filter::Filter;
use super::fmt::{fit, right, short};
use super::pane::{cycle, head, PaneText};
use super::theme::{level, Theme, SHADES};

/// Orders of the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    /// As the kernel lists the vectors (interface, then queue).
    Irq,
    /// Busiest vector first.
    Total,
}

impl Sort {
    pub const ALL: [Sort; 2] = [Sort::Irq, Sort::Total];

    pub fn label(self) -> &'static str {
        match self {
            Sort::Irq => "IRQ",
            Sort::Total => "intr/s",
        }
    }

    pub fn cycle(self, forward: bool) -> Sort {
        cycle(&Sort::ALL, self, forward)
    }
}

/// Widest cell: a short number and a space.
const NUMBER_CELL: usize = 7;
const TOTAL: usize = 8;

/// The vectors to show: of the interfaces the filter lets through.
pub fn rows<'a>(frame: &'a Frame, filter: &Filter, sort: Sort) -> Vec<&'a IrqRates> {
    let mut rows: Vec<&IrqRates> = frame
        .rates
        .irqs
        .iter()
        .filter(|i| filter.iface(&i.iface))
        .collect();
    if sort == Sort::Total {
        rows.sort_by(|a, b| {
            b.per_sec
                .unwrap_or(-1.0)
                .total_cmp(&a.per_sec.unwrap_or(-1.0))
                .then(a.irq.cmp(&b.irq))
        });
    }
    rows
}

/// `eth0 q3`, `eth0 rx1`, `eth0 other`.
pub fn label(irq: &IrqRates) -> String {
    let queue = match (irq.role, irq.queue) {
        (VectorRole::Rx, Some(q)) => format!("rx{q}"),
        (VectorRole::Tx, Some(q)) => format!("tx{q}"),
        (_, Some(q)) => format!("q{q}"),
        (_, None) => "other".to_string(),
    };
    format!("{} {queue}", irq.iface)
}

/// How the CPUs map onto columns.
struct Columns {
    /// CPU ids, in order.
    cpus: Vec<u32>,
    /// CPUs per cell (1 unless folded).
    fold: usize,
    /// Characters per cell.
    cell: usize,
    /// Numbers in the cells (else shades).
    numbers: bool,
}

impl Columns {
    fn new(cpus: Vec<u32>, room: usize) -> Columns {
        let n = cpus.len().max(1);
        let room = room.max(1);
        let (fold, cell, numbers) = if room / n >= NUMBER_CELL {
            (1, NUMBER_CELL, true)
        } else if room / n >= 2 {
            (1, 2, false)
        } else if room >= n {
            (1, 1, false)
        } else {
            (n.div_ceil(room), 1, false)
        };
        Columns {
            cpus,
            fold,
            cell,
            numbers,
        }
    }

    /// The CPU ids of each cell.
    fn cells(&self) -> std::slice::Chunks<'_, u32> {
        self.cpus.chunks(self.fold)
    }
}

pub fn text(frame: &Frame, filter: &Filter, sort: Sort, theme: &Theme, width: usize) -> PaneText {
    let list = rows(frame, filter, sort);
    let mut title = vec![Span::raw(format!(
        "Interrupts/s, queue x CPU  {} vectors, sorted by {}",
        list.len(),
        sort.label()
    ))];
    if list.is_empty() {
        return PaneText {
            title,
            fixed: vec![Line::from(Span::styled(
                "  no NIC interrupt vectors (virtual interfaces have none, or the filter hides them)",
                theme.dim(),
            ))],
            rows: Vec::new(),
            min_rows: 0,
        };
    }
    // Columns: every CPU of the frame (the filter's), so a skew shows as
    // one lit column among dark ones.
    let mut cpus: Vec<u32> = frame.rates.cpus.iter().map(|c| c.cpu).collect();
    if cpus.is_empty() {
        cpus = frame.rates.irq_cpus();
    }
    cpus.retain(|&c| filter.cpu(c));
    let label_width = list
        .iter()
        .map(|i| label(i).chars().count())
        .max()
        .unwrap_or(6)
        .clamp(6, 16);
    let room = width.saturating_sub(label_width + TOTAL + 2);
    let cols = Columns::new(cpus, room);
    if cols.fold > 1 {
        title.push(Span::raw(format!("  (each cell {} CPUs)", cols.fold)));
    }
    let value = |irq: &IrqRates, cpus: &[u32]| -> f64 {
        irq.per_cpu
            .iter()
            .filter(|c| cpus.contains(&c.cpu))
            .map(|c| c.per_sec)
            .sum()
    };
    let max = list
        .iter()
        .flat_map(|irq| cols.cells().map(|cpus| value(irq, cpus)))
        .fold(0.0, f64::max);
    let mut header = vec![
        Span::styled(fit("vector", label_width), theme.header()),
        Span::raw(" "),
        head("intr/s", TOTAL, theme),
        Span::raw(" "),
    ];
    header.push(Span::styled(cpu_ruler(&cols), theme.header()));
    let rows = list
        .iter()
        .map(|irq| {
            let mut spans = vec![Span::raw(fit(&label(irq), label_width)), Span::raw(" ")];
            let total = match (irq.lifecycle, irq.per_sec) {
                (Lifecycle::Continuing, v @ Some(_)) => short(v),
                (Lifecycle::Continuing, None) => "gap".to_string(),
                _ => "new".to_string(),
            };
            spans.push(Span::raw(right(&total, TOTAL)));
            spans.push(Span::raw(" "));
            for cpus in cols.cells() {
                let v = value(irq, cpus);
                let lvl = level(v, max);
                let text = if cols.numbers {
                    if v > 0.0 {
                        right(&short(Some(v)), cols.cell - 1) + " "
                    } else {
                        right("·", cols.cell - 1) + " "
                    }
                } else {
                    let mut cell = SHADES[lvl].to_string();
                    cell.push_str(&" ".repeat(cols.cell - 1));
                    cell
                };
                spans.push(Span::styled(text, theme.shade(lvl)));
            }
            Line::from(spans)
        })
        .collect();
    PaneText {
        title,
        fixed: vec![Line::from(header)],
        rows,
        min_rows: 1,
    }
}

/// The CPU ids over the columns: every column's when they are wide (a
/// cell of numbers), else an id wherever it fits after the last.
fn cpu_ruler(cols: &Columns) -> String {
    let mut out = String::new();
    for (i, cpus) in cols.cells().enumerate() {
        let Some(first) = cpus.first() else { continue };
        let at = i * cols.cell;
        if cols.numbers {
            out.push_str(&(right(&format!("cpu{first}"), cols.cell - 1) + " "));
            continue;
        }
        let id = first.to_string();
        let len = out.chars().count();
        // An id starts at its cell and needs a blank after the one before.
        if at >= len + usize::from(len > 0) {
            out.push_str(&" ".repeat(at - len));
            out.push_str(&id);
        }
    }
    out
}
