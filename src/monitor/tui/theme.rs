//! Colours and glyphs. With `NO_COLOR` set (https://no-color.org) no
//! colour is used at all: emphasis is bold and reverse video, and every
//! fact colour shows is also written (the `!` of a hot CPU, the `<<` of
//! the losing layer, the bar glyphs of usr/sys/irq/soft).

use ratatui::style::{Color, Modifier, Style};

use crate::doctor::thresholds::SATURATED_SOFTIRQ;
use crate::doctor::Severity;

/// soft% from which a CPU is hot: doctor's saturated softirq share
/// (`softirq.hotspot` is critical there).
pub const HOT_SOFT_PCT: f64 = 100.0 * SATURATED_SOFTIRQ;
/// soft% from which a CPU is warm: a third of its time in softirq.
pub const WARM_SOFT_PCT: f64 = 30.0;

/// How hot a CPU's softirq share is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Heat {
    Calm,
    Warm,
    Hot,
}

impl Heat {
    pub fn of_soft(pct: f64) -> Heat {
        if pct >= HOT_SOFT_PCT {
            Heat::Hot
        } else if pct >= WARM_SOFT_PCT {
            Heat::Warm
        } else {
            Heat::Calm
        }
    }
}

/// The part of a CPU's time a bar segment shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Usr,
    Sys,
    Irq,
    Soft,
}

/// Shades of a heat-map cell, from none to the most: index = level.
pub const SHADES: [char; 5] = ['·', '░', '▒', '▓', '█'];

/// The styles of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    /// Colour unless `NO_COLOR` is set to a non-empty value.
    pub fn from_env() -> Theme {
        Theme {
            color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    pub fn plain() -> Theme {
        Theme { color: false }
    }

    pub fn colored() -> Theme {
        Theme { color: true }
    }

    fn fg(&self, color: Color) -> Style {
        if self.color {
            Style::new().fg(color)
        } else {
            Style::new()
        }
    }

    /// A pane's title line; the focused pane's stands out.
    pub fn title(&self, focused: bool) -> Style {
        let bold = Style::new().add_modifier(Modifier::BOLD);
        match (focused, self.color) {
            (true, true) => bold.fg(Color::Black).bg(Color::Cyan),
            (true, false) => bold.add_modifier(Modifier::REVERSED),
            (false, true) => bold.fg(Color::Cyan),
            (false, false) => bold,
        }
    }

    /// Column headers.
    pub fn header(&self) -> Style {
        self.fg(Color::Gray).add_modifier(Modifier::UNDERLINED)
    }

    /// What matters little (no traffic, a gap).
    pub fn dim(&self) -> Style {
        if self.color {
            Style::new().fg(Color::DarkGray)
        } else {
            Style::new()
        }
    }

    /// Where packets are lost, or a CPU saturated: it must catch the eye.
    pub fn alarm(&self) -> Style {
        let bold = Style::new().add_modifier(Modifier::BOLD);
        if self.color {
            bold.fg(Color::White).bg(Color::Red)
        } else {
            bold.add_modifier(Modifier::REVERSED)
        }
    }

    /// A value worth a look (drops other than the worst, a warm CPU).
    pub fn warn(&self) -> Style {
        if self.color {
            Style::new().fg(Color::Yellow)
        } else {
            Style::new().add_modifier(Modifier::BOLD)
        }
    }

    /// A CPU's soft% figure by its heat.
    pub fn soft(&self, heat: Heat) -> Style {
        match heat {
            Heat::Calm => Style::new(),
            Heat::Warm => self.warn(),
            Heat::Hot => self.alarm(),
        }
    }

    /// A bar segment.
    pub fn part(&self, part: Part, heat: Heat) -> Style {
        match part {
            Part::Usr => self.fg(Color::Green),
            Part::Sys => self.fg(Color::Blue),
            Part::Irq => self.fg(Color::Magenta),
            Part::Soft => match heat {
                Heat::Calm => self.fg(Color::Cyan),
                Heat::Warm => self.fg(Color::Yellow),
                Heat::Hot => self.fg(Color::Red).add_modifier(Modifier::BOLD),
            },
        }
    }

    /// The glyph of a bar segment: `|` in colour (as htop draws it);
    /// without colour each part has its own.
    pub fn glyph(&self, part: Part) -> char {
        if self.color {
            return '|';
        }
        match part {
            Part::Usr => '|',
            Part::Sys => '/',
            Part::Irq => '!',
            Part::Soft => '#',
        }
    }

    /// A heat-map cell at `level` (0..=4, [`SHADES`]).
    pub fn shade(&self, level: usize) -> Style {
        if !self.color {
            return Style::new();
        }
        match level {
            0 => Style::new().fg(Color::DarkGray),
            1 => Style::new().fg(Color::Cyan),
            2 => Style::new().fg(Color::Yellow),
            3 => Style::new().fg(Color::LightRed),
            _ => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        }
    }

    pub fn severity(&self, severity: Severity) -> Style {
        match severity {
            Severity::Info => self.fg(Color::Cyan),
            Severity::Warn => self.warn(),
            Severity::Crit => self.alarm(),
        }
    }
}

/// The shade level (0..=4) of `value` on a scale up to `max`: 0 for none,
/// then quarters.
pub fn level(value: f64, max: f64) -> usize {
    if value <= 0.0 || max <= 0.0 {
        return 0;
    }
    let q = (value / max * 4.0).ceil() as usize;
    q.clamp(1, 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heat_follows_doctor_thresholds() {
        assert_eq!(Heat::of_soft(5.0), Heat::Calm);
        assert_eq!(Heat::of_soft(45.0), Heat::Warm);
        assert_eq!(Heat::of_soft(HOT_SOFT_PCT), Heat::Hot);
        assert_eq!(Heat::of_soft(91.0), Heat::Hot);
    }

    #[test]
    fn levels() {
        assert_eq!(level(0.0, 100.0), 0);
        assert_eq!(level(1.0, 100.0), 1);
        assert_eq!(level(50.0, 100.0), 2);
        assert_eq!(level(51.0, 100.0), 3);
        assert_eq!(level(100.0, 100.0), 4);
        assert_eq!(level(5.0, 0.0), 0);
    }

    #[test]
    fn no_color_uses_no_colour() {
        let t = Theme::plain();
        for style in [
            t.title(true),
            t.title(false),
            t.header(),
            t.dim(),
            t.alarm(),
            t.warn(),
            t.part(Part::Soft, Heat::Hot),
            t.shade(4),
            t.severity(Severity::Crit),
        ] {
            assert_eq!(style.fg, None, "{style:?}");
            assert_eq!(style.bg, None, "{style:?}");
        }
        assert!(t.alarm().add_modifier.contains(Modifier::REVERSED));
        let glyphs: Vec<char> = [Part::Usr, Part::Sys, Part::Irq, Part::Soft]
            .iter()
            .map(|&p| t.glyph(p))
            .collect();
        assert_eq!(glyphs, ['|', '/', '!', '#']);
    }
}
