//! Keys: what each does to the [`App`]. Pure, so the tests press keys and
//! look at the state (and at the screen drawn from it).
//!
//! | key | does |
//! |---|---|
//! | `q`, `Ctrl-C` | quit (the terminal is restored) |
//! | `p`, space | pause / resume the display (live sampling goes on; a replay waits and resumes where it was) |
//! | `s` / `S` | next / previous sort column of the focused table (queues: busiest interface first, queues within each) |
//! | `/` | filter: a CPU list (`3`, `0-7`, `cpu12`) or part of an interface name; Enter keeps it, Esc restores the one before, an empty filter clears |
//! | `Tab` / `Shift-Tab` | next / previous pane |
//! | arrows, `j`/`k`, PgUp/PgDn, Home/End | scroll the focused pane |
//! | `?`, F1 | help (any key closes it) |
//! | `Esc` | close help, clear the filter |

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::app::{App, Input, Pane};
use super::filter::Filter;

/// What the drawing loop does after a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing changed.
    None,
    /// Draw again.
    Redraw,
    /// Leave, restoring the terminal.
    Quit,
}

/// Apply `key` to `app`.
pub fn handle(app: &mut App, key: KeyEvent) -> Action {
    if key.kind == KeyEventKind::Release {
        return Action::None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && matches!(key.code, KeyCode::Char('c') | KeyCode::Char('C')) {
        return Action::Quit;
    }
    if app.input.is_some() {
        typing(app, key);
        return Action::Redraw;
    }
    app.notice = None;
    if app.help {
        // Any key closes the help; q still quits.
        app.help = false;
        return if key.code == KeyCode::Char('q') {
            Action::Quit
        } else {
            Action::Redraw
        };
    }
    match key.code {
        KeyCode::Char('q') | KeyCode::Char('Q') => return Action::Quit,
        KeyCode::Char('p') | KeyCode::Char('P') | KeyCode::Char(' ') => app.toggle_pause(),
        KeyCode::Char('s') => sort(app, true),
        KeyCode::Char('S') => sort(app, false),
        KeyCode::Char('/') => {
            app.input = Some(Input {
                text: String::new(),
                before: app.filter.clone(),
            })
        }
        KeyCode::Tab => app.focus = app.focus.next(),
        KeyCode::BackTab => app.focus = app.focus.prev(),
        KeyCode::Char('?') | KeyCode::F(1) => app.help = true,
        KeyCode::Esc => app.filter = Filter::None,
        KeyCode::Down | KeyCode::Char('j') => app.scroll_by(1),
        KeyCode::Up | KeyCode::Char('k') => app.scroll_by(-1),
        KeyCode::PageDown => app.scroll_by(app.page()),
        KeyCode::PageUp => app.scroll_by(-app.page()),
        KeyCode::Home | KeyCode::Char('g') => app.scroll_by(isize::MIN / 2),
        KeyCode::End | KeyCode::Char('G') => app.scroll_by(isize::MAX / 2),
        _ => return Action::None,
    }
    Action::Redraw
}

/// A key while the filter is being typed: the filter follows the text.
fn typing(app: &mut App, key: KeyEvent) {
    let Some(input) = app.input.as_mut() else {
        return;
    };
    match key.code {
        KeyCode::Enter => {
            app.input = None;
        }
        KeyCode::Esc => {
            app.filter = input.before.clone();
            app.input = None;
            return;
        }
        KeyCode::Backspace => {
            input.text.pop();
        }
        KeyCode::Char(c) if !c.is_control() && input.text.chars().count() < 32 => {
            input.text.push(c);
        }
        _ => {}
    }
    if let Some(input) = &app.input {
        app.filter = Filter::parse(&input.text);
    }
    // A new filter shows its rows from the top.
    app.scroll = [0; 5];
}

/// Cycle the focused table's sort column.
fn sort(app: &mut App, forward: bool) {
    let label = match app.focus {
        Pane::Cpus => {
            app.cpu_sort = app.cpu_sort.cycle(forward);
            app.cpu_sort.label()
        }
        Pane::Heatmap => {
            app.heat_sort = app.heat_sort.cycle(forward);
            app.heat_sort.label()
        }
        Pane::Queues => {
            app.queue_sort = app.queue_sort.cycle(forward);
            app.queue_sort.label()
        }
        Pane::Ladder | Pane::Findings => {
            app.notice = Some(format!(
                "{} keeps its order; Tab to a table to sort it",
                app.focus.title()
            ));
            return;
        }
    };
    app.scroll[app.focus.index()] = 0;
    app.notice = Some(format!("{}: sorted by {label}", app.focus.title()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::tui::{cpus, queues};

    fn press(app: &mut App, code: KeyCode) -> Action {
        handle(app, KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn chars(app: &mut App, text: &str) {
        for c in text.chars() {
            press(app, KeyCode::Char(c));
        }
    }

    #[test]
    fn quit_keys() {
        let mut app = App::new("test");
        assert_eq!(press(&mut app, KeyCode::Char('q')), Action::Quit);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(handle(&mut app, ctrl_c), Action::Quit);
        // Ctrl-C quits while typing a filter too.
        press(&mut app, KeyCode::Char('/'));
        assert_eq!(handle(&mut app, ctrl_c), Action::Quit);
        let mut release = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE);
        release.kind = KeyEventKind::Release;
        assert_eq!(handle(&mut App::new("t"), release), Action::None);
    }

    #[test]
    fn tab_sort_pause_help() {
        let mut app = App::new("test");
        assert_eq!(app.focus, Pane::Cpus);
        press(&mut app, KeyCode::Char('s'));
        assert_eq!(app.cpu_sort, cpus::Sort::Soft);
        press(&mut app, KeyCode::Char('S'));
        assert_eq!(app.cpu_sort, cpus::Sort::Cpu);
        press(&mut app, KeyCode::Tab);
        press(&mut app, KeyCode::Tab);
        assert_eq!(app.focus, Pane::Queues);
        press(&mut app, KeyCode::Char('s'));
        assert_eq!(app.queue_sort, queues::Sort::RxPackets);
        assert_eq!(app.cpu_sort, cpus::Sort::Cpu, "only the focused table");
        press(&mut app, KeyCode::BackTab);
        assert_eq!(app.focus, Pane::Heatmap);
        press(&mut app, KeyCode::Tab);
        press(&mut app, KeyCode::Tab);
        press(&mut app, KeyCode::Char('s'));
        assert!(app
            .notice
            .as_deref()
            .unwrap_or("")
            .contains("keeps its order"));
        press(&mut app, KeyCode::Char('p'));
        assert!(app.paused);
        press(&mut app, KeyCode::Char('p'));
        assert!(!app.paused);
        press(&mut app, KeyCode::Char('?'));
        assert!(app.help);
        // Any key closes help without acting.
        assert_eq!(press(&mut app, KeyCode::Char('p')), Action::Redraw);
        assert!(!app.help && !app.paused);
        assert_eq!(press(&mut app, KeyCode::Char('x')), Action::None);
    }

    #[test]
    fn typing_a_filter() {
        let mut app = App::new("test");
        press(&mut app, KeyCode::Char('/'));
        // q and p are text while typing.
        chars(&mut app, "eqp");
        assert_eq!(app.filter, Filter::Iface("eqp".into()));
        press(&mut app, KeyCode::Backspace);
        press(&mut app, KeyCode::Backspace);
        press(&mut app, KeyCode::Backspace);
        chars(&mut app, "cpu1-2");
        assert_eq!(app.filter, Filter::Cpus(vec![1, 2]));
        press(&mut app, KeyCode::Enter);
        assert!(app.input.is_none());
        assert_eq!(app.filter, Filter::Cpus(vec![1, 2]));
        // Esc while typing restores the filter before.
        press(&mut app, KeyCode::Char('/'));
        chars(&mut app, "eth");
        assert_eq!(app.filter, Filter::Iface("eth".into()));
        press(&mut app, KeyCode::Esc);
        assert_eq!(app.filter, Filter::Cpus(vec![1, 2]));
        // Esc outside clears it.
        press(&mut app, KeyCode::Esc);
        assert_eq!(app.filter, Filter::None);
    }
}
