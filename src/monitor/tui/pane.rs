//! What every pane shares with the screen that lays them out: the text a
//! pane gives ([`PaneText`]), its column headers, the cycle of its sort
//! column, and the smallest terminal the panes fit in.

use ratatui::text::{Line, Span};

use super::fmt;
use super::theme::Theme;

/// Below this many columns the panes cannot show a row: the screen says so.
pub const MIN_WIDTH: u16 = 60;
/// Below this many rows the panes cannot show a row: the screen says so.
pub const MIN_HEIGHT: u16 = 16;

/// What a pane shows: its title (the focus mark and the row counter are
/// added), lines that always show (column headers), and the list that
/// scrolls.
#[derive(Debug, Default)]
pub struct PaneText {
    pub title: Vec<Span<'static>>,
    pub fixed: Vec<Line<'static>>,
    pub rows: Vec<Line<'static>>,
    /// Rows the pane needs at least below the fixed lines.
    pub min_rows: usize,
}

impl PaneText {
    pub fn wants(&self) -> u16 {
        clamp_u16(1 + self.fixed.len() + self.rows.len().max(self.min_rows))
    }

    pub fn min(&self) -> u16 {
        clamp_u16(1 + self.fixed.len() + self.min_rows.min(self.rows.len().max(1)))
    }
}

fn clamp_u16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// A column header: `text` right-aligned in `width`, as one span.
pub fn head(text: &str, width: usize, theme: &Theme) -> Span<'static> {
    Span::styled(fmt::right(text, width), theme.header())
}

/// The member after (or before) `now` in `all`, wrapping: cycles a sort
/// column.
pub fn cycle<T: Copy + PartialEq>(all: &[T], now: T, forward: bool) -> T {
    let i = all.iter().position(|&x| x == now).unwrap_or(0);
    let n = all.len().max(1);
    let j = if forward {
        (i + 1) % n
    } else {
        (i + n - 1) % n
    };
    all.get(j).copied().unwrap_or(now)
}
