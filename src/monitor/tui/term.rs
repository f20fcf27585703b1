//! The terminal and the two threads: the sampler on a thread of its own
//! sends each interval's [`Frame`] over a channel; this thread draws the
//! latest and reads keys.
//!
//! The terminal is always given back: raw mode and the alternate screen
//! are left by [`Guard`]'s `Drop` (a normal quit, an error, SIGTERM,
//! which triggers the run's `Stop`), and by a panic hook that runs before
//! the panic message is printed, so the message lands on the normal screen.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Once;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event};
use crossterm::{cursor, execute, terminal};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

use crate::bench::stop::Stop;
use crate::monitor::{run as run_feed, Feed, Frame, RunEnd};

use super::app::App;
use super::keys::{handle, Action};
use super::theme::Theme;
use super::ui::draw;

/// How the view is run.
#[derive(Debug, Clone)]
pub struct TuiOptions {
    /// For the title bar: `live`, `netns NAME`, `replay DIR`.
    pub source: String,
    pub theme: Theme,
}

/// How a run of the view ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TuiEnd {
    /// Intervals received.
    pub frames: u64,
}

/// What the sampler thread sends.
enum Msg {
    Frame(Box<Frame>),
    /// The feed ended: a recorded series ran out, the stop token, or an
    /// error (a deleted namespace).
    End(anyhow::Result<RunEnd>),
}

/// The longest the drawing loop waits for a key before it looks at the
/// channel and the stop token: a frame shows and SIGTERM is obeyed within
/// this; the loop draws only when something changed.
const TICK: Duration = Duration::from_millis(100);
/// A replayed series is shown at its recorded pace, within these bounds.
const REPLAY_PACE: (f64, f64) = (0.2, 5.0);
/// How long to wait for the sampler thread after the view closed (it sees
/// the stop within a tenth of a second unless stuck in a read).
const JOIN_WAIT: Duration = Duration::from_secs(2);

/// Show `feed` in the terminal until `q`, Ctrl-C or `stop` (SIGTERM).
/// An error of the feed (its namespace was deleted) ends the view and is
/// returned once the terminal is restored.
pub fn run(feed: Feed, stop: &Stop, options: TuiOptions) -> anyhow::Result<TuiEnd> {
    let (tx, rx) = mpsc::channel();
    let sampler_stop = stop.clone();
    let sampler = std::thread::Builder::new()
        .name("nettune-sampler".to_string())
        .spawn(move || sample(feed, &sampler_stop, &tx))
        .map_err(|e| anyhow::anyhow!("cannot start the sampling thread: {e}"))?;
    let result = match Guard::enter() {
        Ok(guard) => {
            let result = show(&rx, stop, &options);
            drop(guard);
            result
        }
        Err(e) => Err(anyhow::anyhow!(
            "cannot set up the terminal ({e}); use --json or pipe the output for text blocks"
        )),
    };
    stop.trigger();
    join_bounded(sampler, JOIN_WAIT);
    result
}

/// The sampler thread: frames from `feed` until it ends or `stop`; a
/// replay at its recorded pace.
fn sample(mut feed: Feed, stop: &Stop, tx: &Sender<Msg>) {
    let replay = feed.recorded_len().is_some();
    let result = run_feed(&mut feed, stop, None, &mut |frame: &Frame| {
        tx.send(Msg::Frame(Box::new(frame.clone())))
            .map_err(|_| anyhow::anyhow!("the view closed"))?;
        if replay {
            let (lo, hi) = REPLAY_PACE;
            let pace = Duration::from_secs_f64(frame.rates.interval_secs.clamp(lo, hi));
            stop.sleep_until(Instant::now() + pace);
        }
        Ok(())
    });
    let _ = tx.send(Msg::End(result));
}

fn join_bounded(handle: JoinHandle<()>, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !handle.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    if handle.is_finished() {
        let _ = handle.join();
    }
}

/// Test hook (debug builds only, so it cannot exist in a release build):
/// panic in the drawing loop once a frame is on screen, to test that a
/// panic gives the terminal back.
#[cfg(debug_assertions)]
const PANIC_ENV: &str = "NETTUNE_TEST_TUI_PANIC";

/// The drawing loop.
fn show(rx: &Receiver<Msg>, stop: &Stop, options: &TuiOptions) -> anyhow::Result<TuiEnd> {
    let mut terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    terminal.clear()?;
    let mut app = App::new(options.source.clone());
    let mut dirty = true;
    while !stop.is_set() {
        loop {
            match rx.try_recv() {
                Ok(Msg::Frame(frame)) => {
                    app.on_frame(*frame);
                    dirty = true;
                }
                Ok(Msg::End(Ok(end))) => {
                    if end.series_ended {
                        app.ended = Some(format!(
                            "recording ended after {} interval(s); q quits",
                            end.frames
                        ));
                        dirty = true;
                    }
                }
                Ok(Msg::End(Err(e))) => return Err(e),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    if app.ended.is_none() && !stop.is_set() {
                        anyhow::bail!("the sampling thread stopped unexpectedly");
                    }
                    break;
                }
            }
        }
        if !ACTIVE.load(Ordering::SeqCst) {
            // A panic hook gave the terminal back: draw no more.
            anyhow::bail!("the terminal view stopped after a panic");
        }
        if dirty {
            terminal.draw(|canvas| draw(canvas, &app, &options.theme))?;
            dirty = false;
            #[cfg(debug_assertions)]
            if app.frame.is_some() && std::env::var_os(PANIC_ENV).is_some() {
                panic!("{PANIC_ENV} is set: a panic while the view is on screen");
            }
        }
        if event::poll(TICK)? {
            match event::read()? {
                Event::Key(key) => match handle(&mut app, key) {
                    Action::Quit => break,
                    Action::Redraw => dirty = true,
                    Action::None => {}
                },
                Event::Resize(..) => {
                    terminal.autoresize()?;
                    dirty = true;
                }
                _ => {}
            }
        }
    }
    Ok(TuiEnd {
        frames: app.received,
    })
}

/// Whether the terminal is in raw mode on the alternate screen (so that
/// restoring happens once, whoever does it first).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Raw mode and the alternate screen while it lives.
struct Guard;

impl Guard {
    fn enter() -> io::Result<Guard> {
        install_panic_hook();
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        // From here on Drop restores, also when the next step fails.
        let guard = Guard;
        execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
        Ok(guard)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// Leave the alternate screen and raw mode, show the cursor; once.
fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = execute!(io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
        let _ = terminal::disable_raw_mode();
    }
}

fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}
