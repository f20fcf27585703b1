//! What the terminal view shows and how: the latest frame, the focused
//! pane, each table's sort column, the filter, pause, scroll, help. Plain
//! state: keys change it ([`super::keys`]), frames arrive through
//! [`App::on_frame`], and [`super::ui::draw`] only reads it.

use std::cell::Cell;

use crate::monitor::Frame;

use super::filter::Filter;
use super::history::History;
use super::theme::Theme;
use super::{cpus, findings, heatmap, ladder, queues};

/// The panes, in Tab order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Cpus,
    Heatmap,
    Queues,
    Ladder,
    Findings,
}

impl Pane {
    pub const ALL: [Pane; 5] = [
        Pane::Cpus,
        Pane::Heatmap,
        Pane::Queues,
        Pane::Ladder,
        Pane::Findings,
    ];

    pub fn index(self) -> usize {
        Pane::ALL.iter().position(|&p| p == self).unwrap_or(0)
    }

    pub fn next(self) -> Pane {
        Pane::ALL[(self.index() + 1) % Pane::ALL.len()]
    }

    pub fn prev(self) -> Pane {
        Pane::ALL[(self.index() + Pane::ALL.len() - 1) % Pane::ALL.len()]
    }

    pub fn title(self) -> &'static str {
        match self {
            Pane::Cpus => "CPUs",
            Pane::Heatmap => "Interrupts/s, queue x CPU",
            Pane::Queues => "Queues",
            Pane::Ladder => "Drops/s, NIC to socket",
            Pane::Findings => "Findings",
        }
    }
}

/// Typing a filter after `/`: the text so far, and the filter to go back
/// to on Esc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub text: String,
    pub before: Filter,
}

/// The terminal view's state.
#[derive(Debug)]
pub struct App {
    /// Where the frames come from, for the title bar: `live`, `netns X`,
    /// `replay DIR`.
    pub source: String,
    /// The frame on screen.
    pub frame: Option<Frame>,
    /// The newest frame that arrived while paused.
    pub pending: Option<Frame>,
    pub paused: bool,
    /// Frames received in all (shown or not).
    pub received: u64,
    pub focus: Pane,
    pub cpu_sort: cpus::Sort,
    pub heat_sort: heatmap::Sort,
    pub queue_sort: queues::Sort,
    pub filter: Filter,
    pub input: Option<Input>,
    pub help: bool,
    /// First row shown of each pane's list, by [`Pane::index`].
    pub scroll: [usize; 5],
    /// Rows of each pane's list that fit at the last draw (set while
    /// drawing, so scrolling stops at the last row).
    pub visible: Cell<[usize; 5]>,
    /// A one-line message for the status bar until the next key.
    pub notice: Option<String>,
    /// The feed ended (a recorded series ran out): said in the title bar.
    pub ended: Option<String>,
    /// The intervals received so far, for the history under the panes.
    pub history: History,
}

impl App {
    pub fn new(source: impl Into<String>) -> App {
        App {
            source: source.into(),
            frame: None,
            pending: None,
            paused: false,
            received: 0,
            focus: Pane::Cpus,
            cpu_sort: cpus::Sort::Cpu,
            heat_sort: heatmap::Sort::Irq,
            queue_sort: queues::Sort::Queue,
            filter: Filter::None,
            input: None,
            help: false,
            scroll: [0; 5],
            visible: Cell::new([usize::MAX; 5]),
            notice: None,
            ended: None,
            history: History::default(),
        }
    }

    /// A new interval: shown at once, or kept for when the pause ends.
    pub fn on_frame(&mut self, frame: Frame) {
        self.received += 1;
        self.history.push(&frame);
        if self.paused {
            self.pending = Some(frame);
        } else {
            self.frame = Some(frame);
        }
    }

    pub fn toggle_pause(&mut self) {
        self.paused = !self.paused;
        if !self.paused {
            if let Some(frame) = self.pending.take() {
                self.frame = Some(frame);
            }
        }
    }

    /// Rows in `pane`'s list for the frame on screen.
    pub fn rows(&self, pane: Pane) -> usize {
        let Some(frame) = &self.frame else { return 0 };
        match pane {
            Pane::Cpus => cpus::rows(frame, &self.filter, self.cpu_sort).len(),
            Pane::Heatmap => heatmap::rows(frame, &self.filter, self.heat_sort).len(),
            Pane::Queues => queues::rows(frame, &self.filter, self.queue_sort).len(),
            // The ladder's lines under its fixed two: the losing layer,
            // then the reasons per layer when traced.
            Pane::Ladder => ladder::text(frame, &Theme::plain(), 0).rows.len(),
            Pane::Findings => findings::text(frame, &Theme::plain(), 0).rows.len(),
        }
    }

    /// Move the focused pane's list by `delta` rows, within its rows.
    pub fn scroll_by(&mut self, delta: isize) {
        let i = self.focus.index();
        let visible = self.visible.get()[i].max(1);
        let last = self.rows(self.focus).saturating_sub(visible);
        let now = self.scroll[i].min(last) as isize;
        self.scroll[i] = (now + delta).clamp(0, last as isize) as usize;
    }

    /// The first row of `pane`'s list to show when `visible` rows fit.
    pub fn first_row(&self, pane: Pane, rows: usize, visible: usize) -> usize {
        self.scroll[pane.index()].min(rows.saturating_sub(visible))
    }

    /// Note how many list rows of `pane` fit on screen (while drawing).
    pub fn set_visible(&self, pane: Pane, rows: usize) {
        let mut all = self.visible.get();
        all[pane.index()] = rows;
        self.visible.set(all);
    }

    /// The page size for PgUp/PgDn in the focused pane.
    pub fn page(&self) -> isize {
        let visible = self.visible.get()[self.focus.index()];
        if visible == usize::MAX {
            10
        } else {
            visible.max(1) as isize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tab_order_wraps() {
        assert_eq!(Pane::Findings.next(), Pane::Cpus);
        assert_eq!(Pane::Cpus.prev(), Pane::Findings);
        assert_eq!(Pane::Cpus.next(), Pane::Heatmap);
    }
}
