//! The screen: a title bar, the five panes, a status bar; the help over
//! them on `?`; a plain message when the terminal is too small.
//!
//! Narrow terminals (80x24 upward) stack the panes; each gets the rows
//! its content wants when they fit, and otherwise its minimum (title,
//! header, a row or two) while the focused pane takes the rest: Tab
//! moves the room where one looks. From 150 columns the CPUs and the heat
//! map sit left of the queues, the drop ladder and the findings. Rows the
//! first column's panes do not want show the history of the last
//! intervals (soft% per CPU, drops per layer) rather than blank lines.

use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::base::units::format_time;
use crate::monitor::text::clock;
use crate::monitor::Frame;

use super::app::{App, Pane};
use super::pane::{PaneText, MIN_HEIGHT, MIN_WIDTH};
use super::theme::Theme;
use super::{cpus, findings, heatmap, help, history, ladder, queues};

/// From this many columns (and [`WIDE_HEIGHT`] rows) two columns of panes.
pub const WIDE_WIDTH: u16 = 150;
pub const WIDE_HEIGHT: u16 = 30;

/// Draw `app` on `canvas` (any ratatui backend).
pub fn draw(canvas: &mut ratatui::Frame, app: &App, theme: &Theme) {
    let area = canvas.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        help::too_small(canvas, area);
        return;
    }
    title_bar(canvas, app, theme, Rect { height: 1, ..area });
    status_bar(
        canvas,
        app,
        theme,
        Rect {
            y: area.bottom() - 1,
            height: 1,
            ..area
        },
    );
    let body = Rect {
        y: area.y + 1,
        height: area.height - 2,
        ..area
    };
    match &app.frame {
        None => {
            let text = if app.ended.is_some() {
                "No interval to show: the recording holds fewer than two snapshots."
            } else {
                "Taking the first two samples, one interval apart..."
            };
            canvas.render_widget(Paragraph::new(text), body);
        }
        Some(frame) => panes(canvas, app, theme, frame, body),
    }
    if app.help {
        help::overlay(canvas, area, theme);
    }
}

fn panes(canvas: &mut ratatui::Frame, app: &App, theme: &Theme, frame: &Frame, body: Rect) {
    let text = |pane: Pane, width: u16| -> PaneText {
        let width = usize::from(width);
        match pane {
            Pane::Cpus => cpus::text(frame, &app.filter, app.cpu_sort, theme, width),
            Pane::Heatmap => heatmap::text(frame, &app.filter, app.heat_sort, theme, width),
            Pane::Queues => queues::text(frame, &app.filter, app.queue_sort, theme, width),
            Pane::Ladder => ladder::text(frame, theme, width),
            Pane::Findings => findings::text(frame, theme, width),
        }
    };
    let columns: Vec<(Rect, Vec<Pane>)> =
        if body.width >= WIDE_WIDTH && body.height + 2 >= WIDE_HEIGHT {
            let left = body.width * 11 / 20;
            vec![
                (
                    Rect {
                        width: left,
                        ..body
                    },
                    vec![Pane::Cpus, Pane::Heatmap],
                ),
                (
                    Rect {
                        x: body.x + left + 1,
                        width: body.width - left - 1,
                        ..body
                    },
                    vec![Pane::Queues, Pane::Ladder, Pane::Findings],
                ),
            ]
        } else {
            vec![(body, Pane::ALL.to_vec())]
        };
    let columns: Vec<(Rect, Vec<Pane>, Vec<PaneText>)> = columns
        .into_iter()
        .map(|(area, column)| {
            let texts = column.iter().map(|&p| text(p, area.width)).collect();
            (area, column, texts)
        })
        .collect();
    // Room the panes of a column do not want (the first column's, else
    // the second's): the history of the last intervals fills it, newest
    // first.
    let spare = |area: &Rect, texts: &[PaneText]| {
        let wants = texts.iter().fold(0u16, |a, t| a.saturating_add(t.wants()));
        area.height.saturating_sub(wants)
    };
    let history_in = columns
        .iter()
        .position(|(area, _, texts)| spare(area, texts) >= HISTORY_MIN)
        .filter(|_| !app.history.is_empty());
    for (i, (mut area, column, texts)) in columns.into_iter().enumerate() {
        let wants: Vec<u16> = texts.iter().map(PaneText::wants).collect();
        let spare = spare(&area, &texts);
        if history_in == Some(i) {
            area.height -= spare;
            let rect = Rect {
                y: area.bottom(),
                height: spare,
                ..area
            };
            let text = history::text(
                &app.history,
                frame.rates.unix_ms,
                &app.filter,
                theme,
                usize::from(area.width),
            );
            draw_history(canvas, theme, text, rect);
        }
        let mins: Vec<u16> = texts.iter().map(PaneText::min).collect();
        let focus = column.iter().position(|&p| p == app.focus);
        let heights = share(area.height, &wants, &mins, focus);
        let mut y = area.y;
        for ((pane, text), height) in column.iter().zip(texts).zip(heights) {
            let rect = Rect { y, height, ..area };
            draw_pane(canvas, app, theme, *pane, text, rect);
            y += height;
        }
    }
}

/// Heights for panes that want `wants` rows (at least `mins`) in `total`:
/// all they want when it fits (the rest to the focused pane). Else each
/// its minimum; the focused pane up to 60% of what is left; the others in
/// order; whatever remains to the focused pane. When not even the
/// minimums fit, the panes in order take what there is.
pub fn share(total: u16, wants: &[u16], mins: &[u16], focus: Option<usize>) -> Vec<u16> {
    let sum: u16 = wants.iter().fold(0u16, |a, &w| a.saturating_add(w));
    if sum <= total {
        let mut out = wants.to_vec();
        let i = focus.unwrap_or(out.len().saturating_sub(1));
        if let Some(h) = out.get_mut(i) {
            *h += total - sum;
        }
        return out;
    }
    let mut left = total;
    let mut out: Vec<u16> = mins
        .iter()
        .map(|&m| {
            let h = m.min(left);
            left -= h;
            h
        })
        .collect();
    let give = |i: usize, most: u16, out: &mut Vec<u16>, left: &mut u16| {
        let more = wants[i].saturating_sub(out[i]).min(*left).min(most);
        out[i] += more;
        *left -= more;
    };
    if let Some(f) = focus {
        let most = left - left * 2 / 5;
        give(f, most, &mut out, &mut left);
    }
    for i in (0..wants.len()).filter(|&i| Some(i) != focus) {
        give(i, u16::MAX, &mut out, &mut left);
    }
    if let Some(f) = focus {
        give(f, u16::MAX, &mut out, &mut left);
    }
    out
}

/// Rows the history needs to be worth drawing: its title, its header and
/// two intervals.
const HISTORY_MIN: u16 = 4;

/// The history: its title, its header, and the newest intervals that fit.
fn draw_history(canvas: &mut ratatui::Frame, theme: &Theme, text: PaneText, area: Rect) {
    let style = theme.title(false);
    let mut title = vec![Span::styled("  ", style)];
    title.extend(
        text.title
            .into_iter()
            .map(|s| Span::styled(s.content, style.patch(s.style))),
    );
    let mut lines = vec![Line::from(title)];
    lines.extend(text.fixed);
    let room = usize::from(area.height).saturating_sub(lines.len());
    lines.extend(text.rows.into_iter().take(room));
    canvas.render_widget(Paragraph::new(lines), area);
}

/// One pane: its title line, its fixed lines, then as many list rows as
/// fit from the scroll position.
fn draw_pane(
    canvas: &mut ratatui::Frame,
    app: &App,
    theme: &Theme,
    pane: Pane,
    text: PaneText,
    area: Rect,
) {
    if area.height == 0 {
        return;
    }
    let focused = app.focus == pane;
    let room = usize::from(area.height) - 1;
    let fixed = text.fixed.len().min(room);
    let visible = room - fixed;
    app.set_visible(pane, visible);
    let total = text.rows.len();
    let first = app.first_row(pane, total, visible);
    let shown = total.saturating_sub(first).min(visible);
    let style = theme.title(focused);
    let mut title = vec![Span::styled(if focused { "> " } else { "  " }, style)];
    title.extend(text.title.into_iter().map(|s| {
        let merged = style.patch(s.style);
        Span::styled(s.content, merged)
    }));
    if shown < total {
        title.push(Span::styled(
            format!(
                "  rows {}-{} of {total} (arrows scroll)",
                first + 1,
                first + shown
            ),
            style,
        ));
    }
    let title_width: usize = title.iter().map(|s| s.content.chars().count()).sum();
    let pad = usize::from(area.width).saturating_sub(title_width);
    title.push(Span::styled(" ".repeat(pad), style));
    let mut lines = vec![Line::from(title)];
    lines.extend(text.fixed.into_iter().take(fixed));
    lines.extend(text.rows.into_iter().skip(first).take(visible));
    canvas.render_widget(Paragraph::new(lines), area);
}

fn title_bar(canvas: &mut ratatui::Frame, app: &App, theme: &Theme, area: Rect) {
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let mut parts = vec![" nettune monitor".to_string()];
    if let Some(frame) = &app.frame {
        let r = &frame.rates;
        parts.push(clock(r.unix_ms));
        parts.push(format!("interval {}", format_time(r.interval_secs)));
        parts.push(format!("{} CPUs", r.cpus.len()));
    }
    let mut spans = vec![Span::styled(parts.join("  "), bold)];
    // What changes how to read the screen comes before the source, which
    // may be a long path and is cut first.
    if app.paused {
        let note = if app.pending.is_some() {
            "  PAUSED (newer data waiting; p resumes)"
        } else {
            "  PAUSED (p resumes)"
        };
        spans.push(Span::styled(note, theme.alarm()));
    }
    if let Some(ended) = &app.ended {
        spans.push(Span::styled(format!("  {ended}"), theme.warn()));
    }
    let mut tail = vec![app.source.clone()];
    if app
        .frame
        .as_ref()
        .is_some_and(|f| f.sample.source.netns.is_some())
    {
        tail.push("CPU figures are the whole host's".to_string());
    }
    spans.push(Span::styled(format!("  {}", tail.join("  ")), bold));
    canvas.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn status_bar(canvas: &mut ratatui::Frame, app: &App, theme: &Theme, area: Rect) {
    let line = if let Some(input) = &app.input {
        Line::from(vec![
            Span::styled(" filter: ", theme.title(true)),
            Span::raw(format!("{}_", input.text)),
            Span::styled(
                "   CPU list (0-7, cpu3) or interface name; Enter keeps, Esc cancels",
                theme.dim(),
            ),
        ])
    } else if let Some(notice) = &app.notice {
        Line::from(Span::styled(format!(" {notice}"), theme.warn()))
    } else {
        let mut spans = Vec::new();
        if let Some(label) = app.filter.label() {
            spans.push(Span::styled(
                format!(" filter: {label} (Esc clears) "),
                theme.title(true),
            ));
        }
        spans.push(Span::styled(
            " q quit  p pause  Tab pane  s sort  / filter  arrows scroll  ? help",
            theme.dim(),
        ));
        Line::from(spans)
    };
    canvas.render_widget(Paragraph::new(line), area);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_fits_and_the_rest_goes_to_the_focus() {
        assert_eq!(share(20, &[4, 3, 3], &[2, 2, 2], Some(1)), [4, 13, 3]);
        assert_eq!(share(10, &[4, 3, 3], &[2, 2, 2], None), [4, 3, 3]);
    }

    #[test]
    fn too_little_room_gives_the_focus_what_it_wants() {
        // 3 panes want 40, 20, 5; 22 rows: minimums 4+3+3, 12 left; the
        // focus takes 60% of them (8), then the others in order.
        assert_eq!(share(22, &[40, 20, 5], &[4, 3, 3], Some(0)), [12, 7, 3]);
        assert_eq!(share(22, &[40, 20, 5], &[4, 3, 3], Some(2)), [14, 3, 5]);
        assert_eq!(share(22, &[40, 20, 5], &[4, 3, 3], Some(1)), [8, 11, 3]);
        // Not even the minimums: in order.
        assert_eq!(share(5, &[40, 20, 5], &[4, 3, 3], Some(1)), [4, 1, 0]);
        assert_eq!(share(0, &[4], &[2], Some(0)), [0]);
    }
}
