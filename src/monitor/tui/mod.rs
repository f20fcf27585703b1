//! The terminal view of `nettune monitor` (ratatui + crossterm): the
//! default when stdout is a terminal.
//!
//! Collection is apart from presentation, as in `bottom`: the sampler runs
//! on a thread of its own ([`term`]) and sends each interval's [`Frame`]
//! (sample, rates, live findings) over a channel; the drawing loop keeps
//! only the latest and redraws when a frame, a key or a resize arrives.
//!
//! - [`app`]: what the view shows and how (focus, sort, filter, pause,
//!   scroll, help): plain state, changed by [`keys::handle`] and by
//!   [`App::on_frame`]; no terminal in sight, so it is tested directly.
//! - [`ui`]: the screen for an [`App`], pane by pane: [`cpus`] (per-CPU
//!   usr/sys/irq/soft bars, the softirq hotspot in red), [`heatmap`] (queue
//!   x CPU interrupts), [`queues`] (packets and bytes per queue),
//!   [`ladder`] (drops from the NIC up to TCP, the losing layer marked) and
//!   [`findings`]. Drawn into any ratatui backend: the tests use
//!   `TestBackend` and read the cells a person would see. A pane is a
//!   function of the frame, the [`filter`] and its sort column; what the
//!   panes share with the screen ([`pane`]: their text, headers, sizes)
//!   sits below both, so the panes import neither `app` nor `ui`.
//! - [`term`]: the terminal itself (raw mode, alternate screen), restored
//!   exactly once by a guard's `Drop`, by a panic hook, on SIGTERM, SIGINT
//!   or SIGHUP (the run's `Stop`), and by [`exit_restored`] when a second
//!   signal ends the process while the view closes.
//!
//! Colour carries no information of its own: the hot CPU also says `!`,
//! the losing layer says `<< losing`, and with `NO_COLOR` set ([`Theme`])
//! emphasis is bold and reverse video only.

pub mod app;
pub mod cpus;
pub mod filter;
pub mod findings;
pub mod fmt;
pub mod heatmap;
pub mod help;
pub mod history;
pub mod keys;
pub mod ladder;
pub mod pane;
pub mod queues;
pub mod term;
pub mod theme;
pub mod ui;

pub use app::{App, Pane};
pub use filter::Filter;
pub use keys::{handle, Action};
pub use pane::{MIN_HEIGHT, MIN_WIDTH};
pub use term::{exit_restored, run, TuiEnd, TuiOptions};
pub use theme::Theme;
pub use ui::draw;

#[cfg(test)]
mod tests;
