//! The terminal and the two threads: the sampler on a thread of its own
//! sends each interval's [`Frame`] over a channel; this thread draws the
//! latest and reads keys.
//!
//! The terminal is always given back, exactly once, whoever comes first:
//! raw mode and the alternate screen are left by [`Guard`]'s `Drop` (a
//! normal quit, an error, the first SIGTERM, SIGINT or SIGHUP, which
//! trigger the run's `Stop`), by a panic hook that runs before the panic
//! message is printed, so the message lands on the normal screen, and by
//! [`exit_restored`], which a second signal calls from its handler while
//! the view is still closing (it restores with async-signal-safe calls
//! only, then ends the process).
//!
//! A terminal that goes away without a signal reaching this process (a
//! tmux pane or terminal window closed while a shell took the SIGHUP)
//! ends the view too: the drawing loop waits on the terminal itself and
//! sees it hang up ([`Tty::Gone`]), and the run ends as on SIGHUP, with
//! nothing to restore.
//!
//! A replay stops advancing while the view is paused (the sampler thread
//! waits), so resuming goes on from the interval on screen; a live feed
//! keeps sampling, and the newest interval shows on resume.

use std::io::{self, IsTerminal};
use std::os::fd::IntoRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Once, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event};
use crossterm::{cursor, execute, terminal};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

use crate::base::stop::Stop;
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
/// channel, the stop token and the terminal's size: a frame shows, a
/// resize is redrawn and SIGTERM is obeyed within this; the loop draws
/// only when something changed.
const TICK: Duration = Duration::from_millis(100);
/// A replayed series is shown at its recorded pace, within these bounds.
const REPLAY_PACE: (f64, f64) = (0.2, 5.0);
/// How long to wait for the sampler thread after the view closed (it sees
/// the stop within a tenth of a second unless stuck in a read).
const JOIN_WAIT: Duration = Duration::from_secs(2);
/// How often a paused replay looks whether the pause ended.
const PAUSE_POLL: Duration = Duration::from_millis(50);

/// Show `feed` in the terminal until `q`, Ctrl-C, `stop` (SIGTERM) or the
/// terminal hangs up. An error of the feed (its namespace was deleted)
/// ends the view and is returned once the terminal is restored.
pub fn run(feed: Feed, stop: &Stop, options: TuiOptions) -> anyhow::Result<TuiEnd> {
    let (tx, rx) = mpsc::channel();
    let sampler_stop = stop.clone();
    let paused = Arc::new(AtomicBool::new(false));
    let sampler_paused = Arc::clone(&paused);
    let sampler = std::thread::Builder::new()
        .name("nettune-sampler".to_string())
        .spawn(move || sample(feed, &sampler_stop, &sampler_paused, &tx))
        .map_err(|e| anyhow::anyhow!("cannot start the sampling thread: {e}"))?;
    let result = match Guard::enter() {
        Ok(guard) => {
            let result = show(&rx, stop, &paused, &options);
            #[cfg(debug_assertions)]
            slow_close_for_tests();
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
/// replay at its recorded pace, standing still while `paused`.
fn sample(mut feed: Feed, stop: &Stop, paused: &AtomicBool, tx: &Sender<Msg>) {
    let replay = feed.recorded_len().is_some();
    let result = run_feed(&mut feed, stop, None, &mut |frame: &Frame| {
        tx.send(Msg::Frame(Box::new(frame.clone())))
            .map_err(|_| anyhow::anyhow!("the view closed"))?;
        if replay {
            let (lo, hi) = REPLAY_PACE;
            let pace = Duration::from_secs_f64(frame.rates.interval_secs.clamp(lo, hi));
            wait_unpaused(pace, paused, stop);
        }
        Ok(())
    });
    if replay {
        // "Recording ended" is news of the replay going on: not while paused.
        wait_unpaused(Duration::ZERO, paused, stop);
    }
    let _ = tx.send(Msg::End(result));
}

/// Wait until `pace` of time not `paused` has passed (time spent paused
/// does not count, so a resumed replay keeps the rest of its interval), or
/// until `stop`; true when stopped.
fn wait_unpaused(pace: Duration, paused: &AtomicBool, stop: &Stop) -> bool {
    let mut left = pace;
    let mut last = Instant::now();
    loop {
        if stop.is_set() {
            return true;
        }
        let now = Instant::now();
        let is_paused = paused.load(Ordering::SeqCst);
        if !is_paused {
            left = left.saturating_sub(now - last);
            if left.is_zero() {
                return false;
            }
        }
        last = now;
        std::thread::sleep(if is_paused {
            PAUSE_POLL
        } else {
            left.min(PAUSE_POLL)
        });
    }
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

/// Test hook (debug builds only): hold the view this many milliseconds
/// after it closed and before the terminal is given back, as a terminal
/// slow to take the last frame would, so that a test's second signal
/// lands while the view is closing.
#[cfg(debug_assertions)]
const SLOW_CLOSE_ENV: &str = "NETTUNE_TEST_TUI_SLOW_CLOSE_MS";

#[cfg(debug_assertions)]
fn slow_close_for_tests() {
    let ms = std::env::var(SLOW_CLOSE_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(ms) = ms {
        std::thread::sleep(Duration::from_millis(ms.min(30_000)));
    }
}

/// The drawing loop.
fn show(
    rx: &Receiver<Msg>,
    stop: &Stop,
    paused: &AtomicBool,
    options: &TuiOptions,
) -> anyhow::Result<TuiEnd> {
    let mut terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    terminal.clear()?;
    let mut app = App::new(options.source.clone());
    let mut dirty = true;
    let mut last_size = None;
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
        if STATE.load(Ordering::SeqCst) != TAKEN {
            // A panic hook gave the terminal back: draw no more.
            anyhow::bail!("the terminal view stopped after a panic");
        }
        if dirty {
            if let Err(e) = terminal.draw(|canvas| draw(canvas, &app, &options.theme)) {
                if tty_state(Duration::ZERO)? == Tty::Gone {
                    break;
                }
                return Err(e.into());
            }
            dirty = false;
            #[cfg(debug_assertions)]
            if app.frame.is_some() && std::env::var_os(PANIC_ENV).is_some() {
                panic!("{PANIC_ENV} is set: a panic while the view is on screen");
            }
        }
        match tty_state(TICK)? {
            Tty::Gone => break,
            Tty::Quiet => {}
            Tty::Input => {
                // Every event crossterm has read, keys and resizes alike.
                while event::poll(Duration::ZERO)? {
                    match event::read()? {
                        Event::Key(key) => {
                            let action = handle(&mut app, key);
                            // The replay stands still while the view is paused.
                            paused.store(app.paused, Ordering::SeqCst);
                            match action {
                                Action::Quit => {
                                    return Ok(TuiEnd {
                                        frames: app.received,
                                    })
                                }
                                Action::Redraw => dirty = true,
                                Action::None => {}
                            }
                        }
                        Event::Resize(..) => dirty = true,
                        _ => {}
                    }
                }
            }
        }
        // A resize is seen here, not only through crossterm's SIGWINCH
        // event, which comes with the next key only (crossterm reads only
        // when a key waits, above).
        match terminal.size() {
            Ok(size) if last_size != Some(size) => {
                last_size = Some(size);
                terminal.autoresize()?;
                dirty = true;
            }
            Ok(_) => {}
            Err(_) if tty_state(Duration::ZERO)? == Tty::Gone => break,
            Err(e) => return Err(e.into()),
        }
    }
    if tty_state(Duration::ZERO)? == Tty::Gone {
        // Nothing to give back: leave the terminal alone.
        lost();
        // Dropped, ratatui's Terminal would show the cursor again and,
        // failing, print so on stderr: the same gone terminal, where a
        // failed print panics. There is no cursor left to show.
        std::mem::forget(terminal);
    }
    Ok(TuiEnd {
        frames: app.received,
    })
}

/// What the terminal has for the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tty {
    /// Nothing within the wait.
    Quiet,
    /// A key (or more) waits to be read.
    Input,
    /// Hung up: the other end of the pseudo-terminal closed (a terminal
    /// window or tmux pane gone), which a SIGHUP may not have told this
    /// process (it goes to the session's leader, a shell that may have
    /// caught it or ignored it).
    Gone,
}

/// Wait up to `timeout` for the terminal to have a key or to hang up.
///
/// Why not crossterm's `event::poll` alone: on a hung-up terminal every
/// read returns end-of-file at once, and crossterm's reader loops on
/// such reads without returning, so the view would spin and never see
/// its stop. The view asks crossterm for events only when this says a key
/// waits; a hang-up in the microseconds between the two is the only case
/// left to crossterm.
fn tty_state(timeout: Duration) -> io::Result<Tty> {
    let Some(&(fd, _)) = SAVED_MODES.get() else {
        // The modes could not be read, so neither could crossterm's raw
        // mode be set: not reached while the view runs.
        return Ok(if event::poll(timeout)? {
            Tty::Input
        } else {
            Tty::Quiet
        });
    };
    let mut watch = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid pollfd for one call; fd stays open while the view
    // runs (stdin, or the /dev/tty kept for the process's life).
    let ready = unsafe { libc::poll(&mut watch, 1, ms) };
    if ready < 0 {
        let e = io::Error::last_os_error();
        // A signal (SIGWINCH, or the stop): the loop looks again.
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(Tty::Quiet)
        } else {
            Err(e)
        };
    }
    Ok(
        if watch.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            Tty::Gone
        } else if watch.revents & libc::POLLIN != 0 {
            Tty::Input
        } else {
            Tty::Quiet
        },
    )
}

/// The terminal hung up: there is nothing to give back (raw mode and the
/// alternate screen went with it, and every write fails), so the guard and
/// the panic hook leave it alone.
fn lost() {
    let _ = STATE.compare_exchange(TAKEN, FREE, Ordering::SeqCst, Ordering::SeqCst);
}

/// Who has the terminal: [`FREE`] (as the view found it), [`TAKEN`] (raw
/// mode and the alternate screen may be on), [`RESTORING`] (one path is
/// giving it back; the others leave it alone).
static STATE: AtomicU8 = AtomicU8::new(FREE);
const FREE: u8 = 0;
const TAKEN: u8 = 1;
const RESTORING: u8 = 2;
/// The exit status a signal asked for while another path was restoring
/// (0: none): that path ends the process once the terminal is back.
static EXIT_AFTER_RESTORE: AtomicI32 = AtomicI32::new(0);
/// The terminal's modes before raw mode, and a descriptor of it (crossterm
/// keeps its own copy behind a lock, which a signal handler cannot take).
static SAVED_MODES: OnceLock<(libc::c_int, libc::termios)> = OnceLock::new();
/// What leaves the alternate screen and shows the cursor (crossterm's
/// `LeaveAlternateScreen` and `cursor::Show`).
const LEAVE: &[u8] = b"\x1b[?1049l\x1b[?25h";

/// Raw mode and the alternate screen while it lives.
struct Guard;

impl Guard {
    fn enter() -> io::Result<Guard> {
        install_panic_hook();
        save_modes();
        STATE.store(TAKEN, Ordering::SeqCst);
        // From here on Drop restores, also when a step fails.
        let guard = Guard;
        terminal::enable_raw_mode()?;
        execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
        Ok(guard)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// Note the terminal's modes for [`exit_restored`], on the descriptor
/// crossterm changes (stdin when it is a terminal, else /dev/tty).
fn save_modes() {
    if SAVED_MODES.get().is_some() {
        return;
    }
    let fd = if io::stdin().is_terminal() {
        libc::STDIN_FILENO
    } else {
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
        {
            // Kept open for the process's life: the handler needs it.
            Ok(tty) => tty.into_raw_fd(),
            Err(_) => return,
        }
    };
    // SAFETY: termios is plain data, and tcgetattr fills it or fails.
    let mut modes: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open and modes is a valid termios to write to.
    if unsafe { libc::tcgetattr(fd, &mut modes) } == 0 {
        let _ = SAVED_MODES.set((fd, modes));
    }
}

/// Leave the alternate screen and raw mode, show the cursor: whoever comes
/// first, once. A signal that asked to end the process meanwhile is
/// obeyed once the terminal is back.
fn restore() {
    if STATE
        .compare_exchange(TAKEN, RESTORING, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return;
    }
    let _ = execute!(io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
    let _ = terminal::disable_raw_mode();
    STATE.store(FREE, Ordering::SeqCst);
    let code = EXIT_AFTER_RESTORE.load(Ordering::SeqCst);
    if code != 0 {
        // SAFETY: _exit has no preconditions; the terminal is back.
        unsafe { libc::_exit(code) };
    }
}

/// End the process with `code`, giving the terminal back first if the
/// view has it; for a second Ctrl-C, SIGTERM or SIGHUP while the view is
/// closing (`crate::cli::signals`). Async-signal-safe: atomics, `write`,
/// `tcsetattr` and `_exit` only. When another path is already restoring
/// the terminal (perhaps the thread this handler interrupted), it returns
/// and that path ends the process when done, so the terminal is restored
/// exactly once and never left half-done.
pub fn exit_restored(code: i32) {
    match STATE.compare_exchange(TAKEN, RESTORING, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => {
            restore_in_handler();
            // SAFETY: _exit is async-signal-safe; the terminal is back.
            unsafe { libc::_exit(code) };
        }
        Err(RESTORING) => {
            EXIT_AFTER_RESTORE.store(code, Ordering::SeqCst);
            // The restoring path may have finished before it could see the
            // request: then the terminal is back and this ends it.
            if STATE.load(Ordering::SeqCst) == FREE {
                // SAFETY: as above.
                unsafe { libc::_exit(code) };
            }
        }
        // FREE: the terminal is as the view found it.
        // SAFETY: as above.
        Err(_) => unsafe { libc::_exit(code) },
    }
}

/// [`restore`] with async-signal-safe calls: the escape sequences written
/// straight to stdout, the saved modes set back.
fn restore_in_handler() {
    // SAFETY: write and tcsetattr are async-signal-safe; LEAVE is a valid
    // buffer of its length; the saved descriptor stays open (stdin, or a
    // /dev/tty kept for the process's life) and the modes are a termios
    // that tcgetattr filled.
    unsafe {
        libc::write(libc::STDOUT_FILENO, LEAVE.as_ptr().cast(), LEAVE.len());
        if let Some((fd, modes)) = SAVED_MODES.get() {
            libc::tcsetattr(*fd, libc::TCSANOW, modes);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paused_replay_waits_until_resumed_or_stopped() {
        let stop = Stop::new();
        let paused = Arc::new(AtomicBool::new(false));
        assert!(!wait_unpaused(Duration::ZERO, &paused, &stop));
        // Paused: it waits past its pace, until resumed.
        paused.store(true, Ordering::SeqCst);
        let resumed = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (paused, resumed, stop) = (Arc::clone(&paused), Arc::clone(&resumed), stop.clone());
            std::thread::spawn(move || {
                let stopped = wait_unpaused(Duration::from_millis(10), &paused, &stop);
                (stopped, resumed.load(Ordering::SeqCst))
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        assert!(!waiter.is_finished(), "went on while paused");
        resumed.store(true, Ordering::SeqCst);
        paused.store(false, Ordering::SeqCst);
        assert_eq!(waiter.join().expect("waiter"), (false, true));
        // Paused, then stopped: it returns, saying so.
        paused.store(true, Ordering::SeqCst);
        let waiter = {
            let (paused, stop) = (Arc::clone(&paused), stop.clone());
            std::thread::spawn(move || wait_unpaused(Duration::from_secs(3600), &paused, &stop))
        };
        stop.trigger();
        assert!(waiter.join().expect("waiter"));
    }
}
