//! The help over the panes (`?`), and the screen of a terminal too small
//! to show them.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use super::pane::{MIN_HEIGHT, MIN_WIDTH};
use super::theme::{Theme, HOT_SOFT_PCT, WARM_SOFT_PCT};

/// The keys, as the help lists them.
pub const KEYS: &[(&str, &str)] = &[
    ("q, Ctrl-C", "quit (the terminal is restored)"),
    ("p, space", "pause (live: sampling goes on; a replay waits)"),
    ("Tab, Shift-Tab", "next / previous pane"),
    ("s, S", "next / previous sort column of the pane's table"),
    ("/", "filter: CPUs (3, 0-7, cpu12) or an interface name"),
    ("Esc", "clear the filter"),
    ("arrows, j k", "scroll the pane; PgUp PgDn Home End"),
    ("?", "this help (any key closes it)"),
];

pub fn lines(theme: &Theme) -> Vec<Line<'static>> {
    let mut out = vec![Line::from(Span::styled("Keys", theme.title(false)))];
    for (key, what) in KEYS {
        out.push(Line::from(vec![
            Span::styled(format!("  {key:<15}"), theme.header()),
            Span::raw(format!(" {what}")),
        ]));
    }
    out.push(Line::raw(""));
    out.push(Line::from(Span::styled("Reading it", theme.title(false))));
    for text in [
        format!(
            "  CPUs: soft% in yellow from {WARM_SOFT_PCT:.0}%, red and ! from {HOT_SOFT_PCT:.0}%: \
             one CPU saturated by softirq while others idle is the receive hotspot \
             (spread the queues' IRQs, RSS or RPS)."
        ),
        "  Bars: usr | sys / irq ! soft # (one glyph each without colour).".to_string(),
        "  Interrupts: a row per NIC queue vector, a column per CPU; one lit column \
         means every queue interrupts the same CPU."
            .to_string(),
        "  Queues: a sort puts the busiest interface first and orders the queues \
         under each interface's total."
            .to_string(),
        "  Drops: the layer losing the most packets is marked << losing.".to_string(),
        "  - is a value that could not be computed this interval.".to_string(),
    ] {
        out.push(Line::raw(text));
    }
    out
}

/// The help in a box over the middle of `area`.
pub fn overlay(canvas: &mut ratatui::Frame, area: Rect, theme: &Theme) {
    let width = area.width.saturating_sub(4).min(86);
    let height = area.height.saturating_sub(2).min(24);
    let rect = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    canvas.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(" nettune monitor: help (any key closes) ");
    canvas.render_widget(
        Paragraph::new(lines(theme))
            .block(block)
            .wrap(Wrap { trim: false }),
        rect,
    );
}

/// The whole screen when it is smaller than the panes need.
pub fn too_small(canvas: &mut ratatui::Frame, area: Rect) {
    let text = format!(
        "Terminal too small ({}x{}): nettune monitor needs at least {MIN_WIDTH}x{MIN_HEIGHT}. \
         Enlarge the window, or press q to quit.",
        area.width, area.height
    );
    canvas.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
}
