//! Files nettune reads back that may come from elsewhere: saved plans
//! (`apply --plan`), journals in a state directory, recorded series
//! (`monitor --root`) and experiment results. Each is written where
//! nettune looks for it and read through nettune's own loader, then handed
//! to what consumes it (renderers, checks, reports). Nothing here writes
//! to the live host: every command gets `--root` or only reads.

use std::path::Path;
use std::sync::OnceLock;

use nettune::apply::journal::StateDir;
use nettune::base::stop::Stop;
use nettune::base::Root;
use nettune::host::Selection;
use nettune::monitor::{text as monitor_text, Feed, Frame};
use nettune::plan::admit::{Limits, Scope};
use nettune::plan::{render, saved};

use crate::common::{fresh_dir, hosts, nettune, scratch, write};

/// The fixture a saved plan is checked against (its seeds were made there).
const PLAN_HOST: &str = "vm-2cpu-virtio";

/// Words that may begin a command line of `plan --format sh`.
const SH_COMMANDS: &[&str] = &["set", "sysctl", "echo", "ethtool", "tc"];

/// A line of the script, outside comments, may use shell syntax only
/// inside single quotes or escaped by a backslash: a value or name from a
/// plan file must never become a command, an expansion or a second
/// command.
fn check_shell_line(line: &str, script: &str) {
    let word = line.split_whitespace().next().unwrap_or_default();
    assert!(
        SH_COMMANDS.contains(&word),
        "a script line that is no command of the plan: '{line}' in\n{script}"
    );
    let mut quoted = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => quoted = !quoted,
            _ if quoted => {}
            // A backslash makes the next character literal (`'\''`).
            '\\' => {
                chars.next();
            }
            '$' | '`' | ';' | '|' | '&' | '(' | ')' | '<' | '"' | '*' | '?' | '[' | '{' | '~'
            | '#' => panic!("'{c}' unquoted in script line '{line}' in\n{script}"),
            _ => {}
        }
    }
    assert!(!quoted, "an unterminated quote in '{line}'");
}

/// A saved plan: loaded as `apply --plan` does, admitted and checked
/// against the host it names, and rendered in every format; the shell
/// script must run only the plan's own commands.
pub fn saved_plan(data: &[u8]) {
    let dir = scratch().join("plan");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("plan.json");
    let host = hosts().join(PLAN_HOST);
    write(&path, &made_here(data, &host));
    let Ok(plan) = saved::load(&path) else { return };
    // As widely as any host would: the most CPUs Linux has.
    let limits = Limits {
        cpus: nettune::base::cpuset::MAX_CPUS,
    };
    let Ok(plan) = saved::admit(plan, "plan.json", &|_| Scope::Host, &limits) else {
        return;
    };
    let host_text = host.display().to_string();
    let path_text = path.display().to_string();
    for format in ["text", "json", "sh"] {
        nettune(&[
            "plan", "--plan", &path_text, "--root", &host_text, "--format", format,
        ]);
    }
    let place = render::place(Some(&host_text), None);
    let _ = render::text(&plan, &place);
    let _ = render::json(&plan);
    for netns in [None, Some("blue")] {
        let script = render::shell(&plan, &place, netns);
        for line in script.lines() {
            let line = line.trim_start();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            check_shell_line(line, &script);
        }
    }
    if let Ok(root) = Root::at(&host) {
        let here = saved::MadeFor::of(&root, Some(&host), None);
        let read = |t: &nettune::plan::Target| -> anyhow::Result<String> {
            Ok(t.path()
                .and_then(|p| root.read_value(&p).ok().flatten())
                .unwrap_or_default())
        };
        let _ = saved::check(&plan, "plan.json", &here, &read);
    }
}

/// The seeds were made for the fixture in the repository: a plan that
/// names a tree is taken as made for this process's copy of it, so that
/// the checks after "made for another place" are reached.
fn made_here(data: &[u8], host: &Path) -> Vec<u8> {
    let Ok(mut plan) = serde_json::from_slice::<serde_json::Value>(data) else {
        return data.to_vec();
    };
    let Some(root) = plan.pointer_mut("/made_for/root") else {
        return data.to_vec();
    };
    if !root.is_string() {
        return data.to_vec();
    }
    let here = std::fs::canonicalize(host).unwrap_or_else(|_| host.to_path_buf());
    *root = serde_json::Value::String(here.display().to_string());
    serde_json::to_vec(&plan).unwrap_or_else(|_| data.to_vec())
}

/// A journal in a state directory: listed, and shown by `history`.
pub fn journal(data: &[u8]) {
    let dir = fresh_dir("state");
    write(&dir.join("state-0001.json"), data);
    let states = StateDir::new(dir.clone());
    if let Ok(listing) = states.list() {
        assert!(listing.journals.len() + listing.unreadable.len() <= 1);
        for j in &listing.journals {
            let _ = (j.what(), j.kind(), j.change_count(), j.refused_count());
        }
        let _ = listing.last_id();
    }
    let host = hosts().join(PLAN_HOST).display().to_string();
    let dir = dir.display().to_string();
    for json in [false, true] {
        let mut args = vec!["history", "--state-dir", &dir, "--root", &host];
        if json {
            args.push("--json");
        }
        nettune(&args);
    }
}

/// The capture a series target replays: a private copy of a fixture that
/// holds a recorded series, so its series.json can be replaced.
fn series_host() -> &'static Path {
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    DIR.get_or_init(|| hosts().join("vm-2cpu-virtio"))
}

/// `nettune/series.json` of a capture: replayed as `monitor --root` does,
/// every frame rendered as text and as JSON.
pub fn series(data: &[u8]) {
    let dir = series_host();
    let path = dir.join("nettune/series.json");
    let original = ORIGINAL_SERIES.get_or_init(|| std::fs::read(&path).unwrap_or_default());
    write(&path, data);
    for all in [false, true] {
        let selection = Selection { all, iface: None };
        let Ok(mut feed) = Feed::replay(dir, selection) else {
            break;
        };
        let mut frames = 0usize;
        let _ = nettune::monitor::run(&mut feed, &Stop::new(), None, &mut |frame: &Frame| {
            frames += 1;
            let _ = monitor_text::render(frame);
            let _ = frame.json_line()?;
            Ok(())
        });
    }
    write(&path, original);
}

static ORIGINAL_SERIES: OnceLock<Vec<u8>> = OnceLock::new();

/// An experiment's `results.json`: loaded, reported (charts, Markdown,
/// HTML) and compared with itself.
pub fn results(data: &[u8]) {
    let dir = fresh_dir("experiment");
    write(&dir.join("results.json"), data);
    let Ok(results) = nettune::experiment::results::Results::load(&dir) else {
        return;
    };
    let _ = nettune::experiment::report::write(&results, &dir);
    if let Ok(diff) = nettune::experiment::compare::compare(&results, &results, "a", "b") {
        let _ = nettune::experiment::compare::text(&diff);
    }
}
