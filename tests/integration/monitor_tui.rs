//! `nettune monitor`'s terminal view in a real terminal: tmux runs an
//! interactive bash, the test types the command, reads the screen with
//! `capture-pane` and presses keys; after the view ends, the shell's prompt
//! must be back, the alternate screen gone and `stty -a` show the
//! terminal's cooked modes (icanon, echo, isig, opost) and the cursor be
//! visible, whether it ended by `q`, Ctrl-C, SIGTERM, SIGHUP, a second
//! signal while the view was closing, or a panic; and a view whose
//! terminal hangs up without a signal ends on its own. Each test has its own
//! tmux server (`-L`), killed on drop, also when the test fails.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common::*;

/// How long a screen may take to show what a test waits for (a debug
/// build on a loaded 2-CPU machine).
const WAIT: Duration = Duration::from_secs(20);
const PROMPT: &str = "nt$";

struct Tmux {
    socket: String,
}

impl Tmux {
    /// A tmux server of its own with one `width` x `height` window running
    /// an interactive bash without rc files.
    fn start(tag: &str, width: u16, height: u16) -> Tmux {
        let tmux = Tmux {
            socket: format!("nt-{tag}-{}", unique("t")),
        };
        let shell = format!(
            "env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp TERM=tmux-256color TZ=UTC \
             PS1='{PROMPT} ' bash --norc --noprofile -i"
        );
        tmux.ok(&[
            "new-session",
            "-d",
            "-s",
            "main",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            &shell,
        ]);
        tmux.wait_for("the prompt", |s| s.contains(PROMPT));
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux (scripts/test installs it)")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Type `text` and Enter.
    fn type_line(&self, text: &str) {
        self.ok(&["send-keys", "-t", "main", "-l", text]);
        self.ok(&["send-keys", "-t", "main", "Enter"]);
    }

    /// Press keys as tmux names them (`q`, `?`, `C-c`, `Tab`).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "main"];
        args.extend_from_slice(keys);
        self.ok(&args);
    }

    fn screen(&self) -> String {
        self.ok(&["capture-pane", "-p", "-t", "main"])
    }

    fn cursor_visible(&self) -> bool {
        self.ok(&["display-message", "-p", "-t", "main", "#{cursor_flag}"])
            .trim()
            == "1"
    }

    fn alternate_screen(&self) -> bool {
        self.ok(&["display-message", "-p", "-t", "main", "#{alternate_on}"])
            .trim()
            == "1"
    }

    /// Poll the screen until `done` holds; the screen then.
    fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} on screen within {WAIT:?}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn resize(&self, width: u16, height: u16) {
        self.ok(&[
            "resize-window",
            "-t",
            "main",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
        ]);
    }

    /// The PID of the program the shell runs in the foreground.
    fn foreground_pid(&self) -> i32 {
        let shell = self.ok(&["display-message", "-p", "-t", "main", "#{pane_pid}"]);
        let shell = shell.trim();
        let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
            .expect("children of the shell");
        children
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .find(|pid: &i32| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim() == "nettune")
            })
            .unwrap_or_else(|| panic!("no nettune under the shell: {children}"))
    }

    /// After the view ended: the prompt is back on the normal screen, the
    /// command's exit status is `status` and the terminal is cooked again.
    fn assert_restored(&self, status: i32) {
        let screen = self.wait_for("the prompt after the view", |s| {
            s.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .is_some_and(|l| l.trim() == PROMPT)
        });
        assert!(!self.alternate_screen(), "still on the alternate screen");
        assert!(self.cursor_visible(), "the cursor is still hidden");
        assert!(
            !screen.contains("Drops/s, NIC to socket"),
            "the view was left on the normal screen:\n{screen}"
        );
        self.type_line(
            "echo \"exit=$? modes=$(stty -a | tr -s ' ;' '\\n\\n' \
             | grep -E '^-?(icanon|echo|isig|opost)$' | tr '\\n' ' ')\"",
        );
        let screen = self.wait_for("stty's answer", |s| {
            s.lines()
                .any(|l| l.starts_with("exit=") && l.contains("opost"))
        });
        let answer = screen
            .lines()
            .find(|l| l.starts_with("exit="))
            .unwrap_or_default();
        assert!(answer.starts_with(&format!("exit={status} ")), "{screen}");
        let words: Vec<&str> = answer
            .split(|c: char| c.is_whitespace() || c == '=')
            .collect();
        let modes = answer;
        for mode in ["icanon", "echo", "isig", "opost"] {
            assert!(words.contains(&mode), "{mode} is off: {modes}");
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// Send `signal` to `pid`, a nettune the test started in its own terminal.
fn send_signal(pid: i32, signal: i32) {
    // SAFETY: kill has no memory preconditions.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill {pid}");
}

fn command(args: &str) -> String {
    format!("{} monitor {args}", env!("CARGO_BIN_EXE_nettune"))
}

fn panes_shown(s: &str) -> bool {
    [
        "CPUs",
        "Interrupts/s, queue x CPU",
        "Queues",
        "Drops/s, NIC to socket",
        "Findings",
    ]
    .iter()
    .all(|p| s.contains(p))
}

#[test]
fn a_replay_shows_the_panes_help_and_q_restores_the_terminal() {
    let tmux = Tmux::start("replay", 100, 30);
    let fixture = fixture("vm-2cpu-virtio").display().to_string();
    tmux.type_line(&command(&format!("--root {fixture}")));
    let screen = tmux.wait_for("the five panes", panes_shown);
    assert!(tmux.alternate_screen());
    // CPU1's 91% soft, marked; UDP losing; the findings.
    assert!(screen.contains("91!"), "{screen}");
    assert!(screen.contains("<< losing at UDP"), "{screen}");
    assert!(screen.contains("crit softirq.hotspot"), "{screen}");
    tmux.keys(&["?"]);
    let help = tmux.wait_for("the help", |s| s.contains("help (any key closes)"));
    assert!(help.contains("next / previous pane"), "{help}");
    tmux.keys(&["Tab"]);
    let screen = tmux.wait_for("the panes again", |s| !s.contains("help (any key"));
    // The key closed the help and did nothing else.
    assert!(screen.contains("> CPUs"), "{screen}");
    tmux.keys(&["Tab"]);
    tmux.wait_for("the focus on the heat map", |s| {
        s.contains("> Interrupts/s")
    });
    // Three intervals at their recorded pace, then the recording ends.
    tmux.wait_for("the end of the recording", |s| {
        s.contains("recording ended after 3 interval(s)")
    });
    tmux.keys(&["q"]);
    tmux.assert_restored(0);
}

#[test]
fn a_live_view_follows_resizes_and_sigterm_restores_the_terminal() {
    let tmux = Tmux::start("live", 100, 30);
    tmux.type_line(&command("--interval 0.3 --all"));
    // The interval shown is the one measured: about 300 ms.
    let screen = tmux.wait_for("the panes with an interval", |s| {
        panes_shown(s) && s.contains(" ms  ")
    });
    assert!(screen.contains("live"), "{screen}");
    assert!(
        screen.lines().any(|l| l.starts_with("lo ")),
        "lo is listed with --all:\n{screen}"
    );
    tmux.resize(80, 24);
    // Redrawn for 24 rows: the title bar on the first, the keys on the
    // last (a screen not redrawn would have lost one of them).
    tmux.wait_for("the panes redrawn at 80x24", |s| {
        let lines: Vec<&str> = s.lines().collect();
        panes_shown(s)
            && lines.len() == 24
            && lines[0].starts_with(" nettune monitor")
            && lines[23].starts_with(" q quit")
    });
    tmux.resize(40, 10);
    tmux.wait_for("the too-small message", |s| {
        s.contains("Terminal too small (40x10)")
    });
    tmux.resize(100, 30);
    tmux.wait_for("the panes again", panes_shown);
    let pid = tmux.foreground_pid();
    // SAFETY: kill has no memory preconditions; the PID is the nettune
    // this test started in its own terminal.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    tmux.assert_restored(0);
}

#[test]
fn ctrl_c_quits_a_live_view() {
    let tmux = Tmux::start("ctrlc", 100, 30);
    tmux.type_line(&command("--interval 0.2"));
    tmux.wait_for("the panes", |s| panes_shown(s) && s.contains(" ms  "));
    tmux.keys(&["p"]);
    tmux.wait_for("the pause", |s| s.contains("PAUSED"));
    tmux.keys(&["C-c"]);
    tmux.assert_restored(0);
}

#[test]
fn a_panic_gives_the_terminal_back_before_its_message() {
    let tmux = Tmux::start("panic", 100, 30);
    let fixture = fixture("vm-2cpu-virtio").display().to_string();
    // A debug build's test hook panics once a frame is on screen.
    tmux.type_line(&format!(
        "NETTUNE_TEST_TUI_PANIC=1 {}",
        command(&format!("--root {fixture}"))
    ));
    let screen = tmux.wait_for("the panic message", |s| s.contains("panicked"));
    assert!(screen.contains("NETTUNE_TEST_TUI_PANIC is set"), "{screen}");
    tmux.assert_restored(101);
}

#[test]
fn a_text_or_json_run_on_a_terminal_stays_line_by_line() {
    let tmux = Tmux::start("text", 100, 30);
    let fixture = fixture("vm-2cpu-virtio").display().to_string();
    tmux.type_line(&command(&format!("--root {fixture} --text --count 1")));
    let screen = tmux.wait_for("a text block", |s| s.contains("drops/s"));
    assert!(!tmux.alternate_screen());
    assert!(screen.contains("<- losing at UDP"), "{screen}");
    tmux.assert_restored(1);
}

#[test]
fn a_128_cpu_replay_is_usable_at_80x24() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = dir.path().join("big");
    let status = Command::new("python3")
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/make_hosts.py"))
        .arg("--big")
        .arg(&big)
        .args(["--samples", "3"])
        .status()
        .expect("python3");
    assert!(status.success());
    let tmux = Tmux::start("big", 80, 24);
    tmux.type_line(&command(&format!("--root {}", big.display())));
    let screen = tmux.wait_for("the panes", panes_shown);
    assert!(screen.contains("CPUs  128 shown"), "{screen}");
    assert!(screen.contains("of 128 (arrows scroll)"), "{screen}");
    assert!(screen.contains("65 vectors"), "{screen}");
    assert!(screen.lines().all(|l| l.chars().count() <= 80), "{screen}");
    tmux.keys(&["End"]);
    tmux.wait_for("the last CPU", |s| {
        s.lines().any(|l| l.trim_start().starts_with("127 "))
    });
    tmux.keys(&["q"]);
    tmux.assert_restored(0);
}

#[test]
fn a_namespace_deleted_under_the_view_closes_it_with_the_error() {
    if skip_unless_root("a_namespace_deleted_under_the_view_closes_it_with_the_error") {
        return;
    }
    let ns = Netns::new("mtui");
    let (a, b) = (unique("ta"), unique("tb"));
    ns.veth(&a, (2, 2), &b, (2, 2));
    let tmux = Tmux::start("netns", 100, 30);
    tmux.type_line(&command(&format!("--netns {} --interval 0.3", ns.name)));
    let screen = tmux.wait_for("the namespace's interfaces", |s| {
        panes_shown(s) && s.lines().any(|l| l.starts_with(a.as_str()))
    });
    assert!(
        screen.contains(&format!("live, netns {}", ns.name)),
        "{screen}"
    );
    // The header says the CPU figures are host-wide; the window's width cuts
    // it at a place that moves with the measured interval's digits.
    assert!(screen.contains("CPU figures"), "{screen}");
    sh(&["ip", "netns", "del", &ns.name]);
    let name = ns.name.clone();
    // Already deleted: nothing left for its drop to clean up.
    std::mem::forget(ns);
    let screen = tmux.wait_for("the error", |s| s.contains("was deleted while monitor ran"));
    assert!(
        screen.contains(&format!("network namespace '{name}'")),
        "{screen}"
    );
    tmux.assert_restored(2);
}

/// A second signal while the view is closing (SIGTERM twice, as from an
/// impatient service manager, or SIGTERM then SIGINT) ends the process at
/// once, with the terminal given back first. The debug build's test hook
/// holds the closing view for seconds, so the second signal surely lands
/// while the view still has the terminal (it closes within a tenth of a
/// second otherwise, as on a terminal slow to take the last frame).
fn second_signal_while_closing(tag: &str, second: i32) {
    let tmux = Tmux::start(tag, 100, 30);
    let fixture = fixture("vm-2cpu-virtio").display().to_string();
    tmux.type_line(&format!(
        "NETTUNE_TEST_TUI_SLOW_CLOSE_MS=8000 {}",
        command(&format!("--root {fixture}"))
    ));
    tmux.wait_for("the panes", panes_shown);
    let pid = tmux.foreground_pid();
    send_signal(pid, libc::SIGTERM);
    // Longer than the 100 ms within which a signal counts as a copy of the
    // first (timeout(1) sends two): this one is a second request.
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        tmux.alternate_screen(),
        "the view should still be closing:\n{}",
        tmux.screen()
    );
    send_signal(pid, second);
    // 128 + the signal: ended by the second signal, not by the view
    // closing on its own 8 s later (that exits 0).
    tmux.assert_restored(128 + second);
}

#[test]
fn sigterm_twice_gives_the_terminal_back() {
    second_signal_while_closing("term2", libc::SIGTERM);
}

#[test]
fn sigterm_then_sigint_gives_the_terminal_back() {
    second_signal_while_closing("termint", libc::SIGINT);
}

#[test]
fn sighup_closes_the_view_and_gives_the_terminal_back() {
    let tmux = Tmux::start("hup", 100, 30);
    tmux.type_line(&command("--interval 0.3"));
    tmux.wait_for("the panes", |s| panes_shown(s) && s.contains(" ms  "));
    send_signal(tmux.foreground_pid(), libc::SIGHUP);
    tmux.assert_restored(0);
}

/// The title bar's clock (HH:MM:SS), which names the interval on screen:
/// the fixture's samples are one second apart.
fn clock(screen: &str) -> String {
    let title = screen.lines().next().unwrap_or_default();
    let rest = title
        .trim_start()
        .strip_prefix("nettune monitor")
        .unwrap_or_else(|| panic!("no title bar:\n{screen}"));
    rest.split_whitespace()
        .next()
        .filter(|c| c.len() == 8 && c.as_bytes()[2] == b':')
        .unwrap_or_else(|| panic!("no clock in the title bar:\n{screen}"))
        .to_string()
}

/// A copy of the vm-2cpu-virtio recording with its snapshots `secs` apart
/// (their clock stays as recorded): a replay shows each interval for
/// `secs` seconds.
fn recording_paced(secs: f64) -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let path = tree.join("nettune/series.json");
    let text = std::fs::read_to_string(&path).expect("series.json");
    let mut series: serde_json::Value = serde_json::from_str(&text).expect("json");
    series["interval_secs"] = secs.into();
    for (k, sample) in series["samples"]
        .as_array_mut()
        .expect("samples")
        .iter_mut()
        .enumerate()
    {
        sample["elapsed_secs"] = (k as f64 * secs).into();
    }
    std::fs::write(&path, series.to_string()).expect("write series.json");
    (dir, tree)
}

#[test]
fn pause_holds_a_replay_and_resume_goes_on_from_there() {
    let tmux = Tmux::start("pause", 100, 30);
    // Three intervals (TZ=UTC: 01:26:41, :42, :43), each shown for 3 s: p
    // lands before the last one and every interval stays on screen for
    // many reads of it, however slowly a loaded machine draws and reads.
    let (_dir, recording) = recording_paced(3.0);
    tmux.type_line(&command(&format!("--root {}", recording.display())));
    tmux.wait_for("the panes", panes_shown);
    tmux.keys(&["p"]);
    let screen = tmux.wait_for("the pause", |s| s.contains("PAUSED"));
    let held = clock(&screen);
    assert!(
        held != "01:26:43",
        "the replay reached its last interval before p was pressed:\n{screen}"
    );
    // Longer than an interval at its pace: unpaused, the clock would have
    // moved by now (nothing to wait for: the test is that nothing happens).
    std::thread::sleep(Duration::from_secs(4));
    let screen = tmux.screen();
    assert_eq!(clock(&screen), held, "the screen moved while paused");
    assert!(
        screen.contains("PAUSED (p resumes)"),
        "the replay went on while paused:\n{screen}"
    );
    assert!(!screen.contains("recording ended"), "{screen}");
    // Resume: the next interval, then the rest, to the end.
    tmux.keys(&["p"]);
    let next = format!("01:26:{}", held[6..].parse::<u32>().expect("seconds") + 1);
    let screen = tmux.wait_for("the next interval", |s| {
        !s.contains("PAUSED") && clock(s) != held
    });
    // The interval after the one held, not the newest: nothing skipped.
    assert_eq!(clock(&screen), next, "resumed after {held}:\n{screen}");
    tmux.wait_for("the end of the recording", |s| {
        s.contains("recording ended after 3 interval(s)") && clock(s) == "01:26:43"
    });
    tmux.keys(&["q"]);
    tmux.assert_restored(0);
}

/// Lines of the history: those that start with an interval's `HH:MM:SS`.
fn history_lines(screen: &str) -> Vec<&str> {
    screen
        .lines()
        .filter(|l| {
            let b = l.as_bytes();
            b.len() > 8
                && b[2] == b':'
                && b[5] == b':'
                && [0, 1, 3, 4, 6, 7].iter().all(|&i| b[i].is_ascii_digit())
        })
        .collect()
}

#[test]
fn a_wide_terminal_shows_the_history_of_soft_and_drops_per_interval() {
    let tmux = Tmux::start("history", 200, 50);
    let fixture = fixture("vm-2cpu-virtio").display().to_string();
    tmux.type_line(&command(&format!("--root {fixture}")));
    let screen = tmux.wait_for("the end of the recording", |s| {
        s.contains("recording ended after 3 interval(s)")
    });
    assert!(screen.contains("History"), "{screen}");
    let header = screen
        .lines()
        .find(|l| l.contains("cpu0") && l.contains("cpu1") && l.contains("softnet"))
        .unwrap_or_else(|| panic!("no history header:\n{screen}"));
    assert!(header.contains("UDP") && header.contains("all"), "{header}");
    // One line per recorded interval, each with CPU1's 91% soft marked and
    // UDP's 20k drops/s.
    let rows = history_lines(&screen);
    assert_eq!(rows.len(), 3, "{screen}");
    for row in &rows {
        assert!(row.contains("91!") && row.contains("20.0k"), "{row}");
    }
    tmux.keys(&["q"]);
    tmux.assert_restored(0);
}

#[test]
fn a_live_view_on_200x50_fills_the_screen_as_intervals_come() {
    let tmux = Tmux::start("fill", 200, 50);
    tmux.type_line(&command("--interval 0.1 --all"));
    // The history grows by an interval at a time until the room below the
    // CPUs and the heat map is full: down to the line above the keys.
    let screen = tmux.wait_for("a full history", |s| {
        let lines: Vec<&str> = s.lines().collect();
        lines.len() == 50 && history_lines(lines[48]).len() == 1
    });
    assert!(history_lines(&screen).len() >= 20, "{screen}");
    let blank = screen.lines().filter(|l| l.trim().is_empty()).count();
    assert_eq!(blank, 0, "blank lines on a 200x50 screen:\n{screen}");
    let pid = tmux.foreground_pid();
    // SAFETY: kill has no memory preconditions; the PID is the nettune
    // this test started in its own terminal.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    tmux.assert_restored(0);
}

/// A nettune the test started in a session of its own, killed by its PID
/// when dropped (a view that does not end would outlive its terminal).
struct Stray(i32);

impl Drop for Stray {
    fn drop(&mut self) {
        // SAFETY: kill has no memory preconditions; the PID is a nettune
        // this test started (a dead one's PID is not reused this soon).
        unsafe { libc::kill(self.0, libc::SIGKILL) };
    }
}

/// A terminal that goes away without a SIGHUP reaching the view: the tmux
/// pane is killed while nettune runs in a session of its own (`setsid`),
/// so the hang-up's SIGHUP goes to the pane's bash and bash's to its job,
/// never to nettune, as when a wrapping shell takes the signal. The view
/// sees its terminal hang up and exits 0 on its own, instead of running on
/// against a terminal that reads end-of-file forever.
#[test]
fn a_view_whose_terminal_hangs_up_without_a_sighup_exits() {
    let tmux = Tmux::start("hangup", 100, 30);
    let dir = tempfile::tempdir().expect("tempdir");
    let (pid_file, status_file) = (dir.path().join("pid"), dir.path().join("status"));
    tmux.type_line(&format!(
        "setsid -w sh -c 'echo $$ > {}; {}; echo $? > {}'",
        pid_file.display(),
        command("--interval 0.3"),
        status_file.display()
    ));
    tmux.wait_for("the panes", |s| panes_shown(s) && s.contains(" ms  "));
    let sh = std::fs::read_to_string(&pid_file).expect("the pid file");
    let sh = sh.trim();
    let children =
        std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children")).expect("children of sh");
    let pid: i32 = children
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no nettune under sh: '{children}'"));
    let _stray = Stray(pid);
    assert!(
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "nettune")
    );
    tmux.ok(&["kill-pane", "-t", "main"]);
    // Bounded, not timed: a view that spins never writes its status.
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Ok(text) = std::fs::read_to_string(&status_file) {
            if text.ends_with('\n') {
                break text.trim().to_string();
            }
        }
        assert!(
            Instant::now() < deadline,
            "nettune (PID {pid}) still runs {WAIT:?} after its terminal hung up"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status, "0", "ended on its own, not by a signal");
}
