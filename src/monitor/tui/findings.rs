//! The live findings: what this interval's rates show, judged with
//! doctor's rules and thresholds (softirq hotspot, softnet drops and
//! squeezes, UDP receive errors, listen overflows, NIC drops), worst
//! first; then the sources that could not be read.

use ratatui::text::{Line, Span};

use crate::monitor::Frame;

use super::fmt::fit;
use super::pane::PaneText;
use super::theme::Theme;

pub fn text(frame: &Frame, theme: &Theme, _width: usize) -> PaneText {
    let mut rows: Vec<Line<'static>> = frame
        .findings
        .iter()
        .map(|f| {
            Line::from(vec![
                Span::raw(" "),
                Span::styled(fit(f.severity.label(), 4), theme.severity(f.severity)),
                Span::raw(" "),
                Span::raw(fit(&f.id, 21)),
                Span::raw(format!(" {}: {}", f.title, f.evidence)),
            ])
        })
        .collect();
    for m in &frame.sample.missing {
        let what = if m.path.is_empty() {
            format!("{} ({})", m.section, m.error)
        } else {
            format!("{} ({}: {})", m.section, m.path, m.kind.word())
        };
        rows.push(Line::from(Span::styled(
            format!(" not read: {what}"),
            theme.dim(),
        )));
    }
    let gone = &frame.rates.vanished.interfaces;
    if !gone.is_empty() {
        rows.push(Line::from(Span::styled(
            format!(" gone since the interval before: {}", gone.join(", ")),
            theme.warn(),
        )));
    }
    let worst = frame.worst().map(|s| s.label()).unwrap_or("none");
    let title = vec![Span::raw(format!(
        "Findings  {} this interval (worst: {worst}; `nettune doctor` gives the fix)",
        frame.findings.len()
    ))];
    if rows.is_empty() {
        rows.push(Line::from(Span::styled(
            " none: nothing this interval crossed doctor's thresholds",
            theme.dim(),
        )));
    }
    PaneText {
        title,
        fixed: Vec::new(),
        rows,
        // Up to three findings show even when another pane has the focus.
        min_rows: 3,
    }
}
