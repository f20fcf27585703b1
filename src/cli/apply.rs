//! `nettune apply`, `rollback` and `history`: arguments, where the state
//! directory is, and what is printed; the work is in [`crate::apply`].

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::json;

use crate::apply::journal::{Journal, Outcome, StateDir, StateStatus, DEFAULT_STATE_DIR};
use crate::apply::{self, place, Applied, Backend, Request};
use crate::base::text::sh_word;
use crate::cli::guard::{GuardArgs, GuardReport, GuardResult};
use crate::cli::plan::{chosen_format, print, resolve, Format, TuneArgs};
use crate::error::Status;
use crate::host;

/// The environment variable that names the state directory when
/// `--state-dir` is not given.
pub const STATE_DIR_ENV: &str = "NETTUNE_STATE_DIR";

#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub tune: TuneArgs,
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run: print the plan as text, json or sh (apply never
    /// prints a plan instead of applying it: without --dry-run it is
    /// refused). Default: text.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Also make the settings survive a reboot: /etc/sysctl.d/90-nettune.conf
    /// and a systemd unit running /etc/nettune/apply-devices.sh (which finds
    /// IRQs by name at boot); a udev rule runs it again for an interface
    /// that appears later (hot-plug, driver reload).
    #[arg(long)]
    pub persist: bool,
    /// Set IRQ affinity even though irqbalance runs (it will move the IRQs
    /// again within seconds unless told to leave them alone).
    #[arg(long)]
    pub allow_irqbalance: bool,
    /// Where journals go: a directory itself (not a link), root's and
    /// writable by root only when run as root; made with mode 0700.
    /// Default: $NETTUNE_STATE_DIR (an absolute path), else
    /// /var/lib/nettune (DIR/var/lib/nettune with --root DIR).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Print what was applied as JSON (the state's journal); with
    /// --dry-run, the plan as JSON.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    #[command(flatten)]
    pub guard: GuardArgs,
}

#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    /// The state to restore (see `nettune history`). Default: the last one
    /// applied that can still be undone. A state is restored where it was
    /// applied: its named network namespace is entered; one without a name
    /// is restored from inside it only, and the host's from the host only.
    pub id: Option<u32>,
    /// Drop state ID without restoring anything: for a state that can no
    /// longer be undone (its network namespace is gone, the host rebooted).
    /// It stays in the history as forgotten.
    #[arg(long, requires = "id")]
    pub forget: bool,
    /// With --forget: forget a state even though it could still be undone
    /// (its changes stay in place).
    #[arg(long, requires = "forget")]
    pub force: bool,
    /// The tree the state was applied to (`apply --root DIR`).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Where journals are. Default: $NETTUNE_STATE_DIR, else
    /// /var/lib/nettune (DIR/var/lib/nettune with --root DIR).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Print what was restored as JSON, with apply --json's field names:
    /// `rolled_back` (true when values were restored), `state_id`,
    /// `changed` (values restored) and `state` (the journal).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    /// The tree whose states to list (`apply --root DIR`).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Check the states of this network namespace for drift (values that
    /// changed since they were applied); the states of the host are checked
    /// without it.
    #[arg(long, value_name = "NAME", conflicts_with = "root")]
    pub netns: Option<String>,
    /// Where journals are. Default: $NETTUNE_STATE_DIR, else
    /// /var/lib/nettune (DIR/var/lib/nettune with --root DIR).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Print the states as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The state directory: `--state-dir`, else `$NETTUNE_STATE_DIR`, else the
/// default (inside the tree with `--root`). Hints in messages repeat the
/// options needed to find it again: `--root`, and `--state-dir` when the
/// user chose it (by flag or by the environment). An empty value is an
/// error, never the default in disguise; so is a relative one in the
/// environment, which is set once and read from whatever directory a
/// command runs in. A relative `--state-dir` is taken from the working
/// directory and shown absolute, so that hints work from anywhere.
pub fn state_dir(given: Option<&Path>, root: Option<&Path>) -> anyhow::Result<StateDir> {
    let (dir, chosen) = if let Some(dir) = given {
        if dir.as_os_str().is_empty() {
            anyhow::bail!(
                "--state-dir '' names no directory: give a directory, or leave --state-dir out \
                 for the default ({DEFAULT_STATE_DIR})"
            );
        }
        let dir =
            std::path::absolute(dir).with_context(|| format!("--state-dir '{}'", dir.display()))?;
        (dir, true)
    } else if let Some(dir) = std::env::var_os(STATE_DIR_ENV) {
        let dir = PathBuf::from(dir);
        if dir.as_os_str().is_empty() {
            anyhow::bail!(
                "{STATE_DIR_ENV} is set but empty: set it to an absolute directory, or unset it \
                 for the default ({DEFAULT_STATE_DIR})"
            );
        }
        if !dir.is_absolute() {
            anyhow::bail!(
                "{STATE_DIR_ENV} '{}' is a relative path: commands run from other directories \
                 would keep their states elsewhere; set it to an absolute directory",
                dir.display()
            );
        }
        (dir, true)
    } else {
        let dir = match root {
            Some(root) => root.join(DEFAULT_STATE_DIR.trim_start_matches('/')),
            None => PathBuf::from(DEFAULT_STATE_DIR),
        };
        (dir, false)
    };
    let mut flags = String::new();
    if let Some(root) = root {
        flags.push_str(&format!(" --root {}", sh_word(&root.display().to_string())));
    }
    if chosen {
        flags.push_str(&format!(
            " --state-dir {}",
            sh_word(&dir.display().to_string())
        ));
    }
    Ok(StateDir::new(dir).with_flags(flags))
}

pub(crate) fn require_root_for_live(root: Option<&Path>, verb: &str) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if root.is_none() && unsafe { libc::geteuid() } != 0 {
        anyhow::bail!(
            "nettune {verb} changes the live host and needs root: run it as root (sudo), or try \
             it on a capture with --root DIR; nothing was changed"
        );
    }
    Ok(())
}

/// A state directory this user cannot read and write (the default one
/// belongs to root, mode 0700): say that the command needs root, as apply
/// does, rather than the first file that could not be opened.
pub(crate) fn require_state_access(dir: &Path, verb: &str) -> anyhow::Result<()> {
    use nix::unistd::{access, AccessFlags};
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 || !dir.is_dir() {
        return Ok(());
    }
    match access(
        dir,
        AccessFlags::R_OK | AccessFlags::W_OK | AccessFlags::X_OK,
    ) {
        Err(nix::errno::Errno::EACCES | nix::errno::Errno::EPERM | nix::errno::Errno::EROFS) => {
            anyhow::bail!(
                "nettune {verb} needs root: the applied states in '{}' can be read and changed by                  root only; run it as root (sudo); nothing was changed",
                dir.display()
            )
        }
        _ => Ok(()),
    }
}

/// The tree of `--root`, refused when it reaches the live kernel, made
/// absolute for the journal.
pub(crate) fn tree(dir: &Path, verb: &str) -> anyhow::Result<PathBuf> {
    place::check_tree(dir, verb)?;
    std::fs::canonicalize(dir).with_context(|| format!("--root '{}'", dir.display()))
}

pub fn run_apply(args: ApplyArgs) -> anyhow::Result<Status> {
    if let (Some(format), false) = (args.format, args.dry_run) {
        anyhow::bail!(
            "--format {} prints a plan, and apply would change the host: add --dry-run, or use \
             `nettune plan --format {}`; nothing was changed",
            format.name(),
            format.name()
        );
    }
    if args.dry_run {
        let (_, plan) = resolve(&args.tune)?;
        print(&plan, &args.tune, chosen_format(args.json, args.format))?;
        return Ok(Status::Clean);
    }
    if args.persist && args.tune.target.netns.is_some() {
        anyhow::bail!(
            "--persist cannot be used with --netns: a network namespace does not survive a \
             reboot; nothing was changed"
        );
    }
    // The guard's options are checked before anything is read.
    args.guard.plan(args.tune.target.netns.is_some())?;
    let root_dir = match &args.tune.target.root {
        Some(dir) => Some(tree(dir, "apply")?),
        None => None,
    };
    require_root_for_live(root_dir.as_deref(), "apply")?;
    // Bad input is reported before the state directory is created.
    let state = state_dir(args.state_dir.as_deref(), root_dir.as_deref())?;
    state.check()?;
    if root_dir.is_none() && args.tune.target.netns.is_none() {
        // Started inside a namespace (ip netns exec, nsenter): read and
        // write that namespace's /sys, as --netns does.
        crate::base::netns::own_sysfs()?;
    }
    let (opts, plan, host) = crate::cli::plan::resolve_with_host(&args.tune)?;
    let mut request = Request {
        changes: &plan.changes,
        purpose: apply::Purpose::Profile(opts.clone()),
        root: root_dir.as_deref(),
        netns: args.tune.target.netns.as_deref(),
        persist: args.persist,
        irqbalance_running: host.irqbalance.running,
        allow_irqbalance: args.allow_irqbalance,
        experiment: None,
        guard: None,
    };
    // Refusals come before the lock, which creates the state directory.
    let here = apply::Place::here(request.root, request.netns)?;
    apply::refuse(&state, &request, &here)?;
    let guard = args.guard.plan(here.is_namespace())?;
    let stop = match guard {
        Some(_) => Some(super::signals::stop_on_signals()?),
        None => None,
    };
    let _lock = state.lock()?;
    let backend = Backend::new(host::open_root(root_dir.as_deref())?);
    // The baseline is measured only when there is something to change.
    let guarding = match (guard, stop) {
        (Some(guard), Some(stop)) if apply::pending(&backend, request.changes)? > 0 => {
            Some(guard.measure(root_dir.as_deref(), request.netns, stop)?)
        }
        _ => None,
    };
    request.guard = guarding.as_ref().map(|g| g.record());
    let applied = apply::apply(&state, &backend, &request)?;
    let (applied, guarded) = match (applied, guarding) {
        (Applied::Done(journal), Some(guarding)) => {
            let (report, journal) = guarding.watch(&state, &backend, journal)?;
            (Applied::Done(journal), Some(report))
        }
        (applied, _) => (applied, None),
    };
    // Where it was applied, also when nettune was started inside a
    // namespace without --netns.
    let place = match &here {
        apply::Place::Tree(_) => args.tune.place(),
        found => found.to_string(),
    };
    let host_wide = host_wide_note(&plan);
    let text = match &applied {
        Applied::Nothing => format!(
            "nothing to change: {place} already satisfies profile {} ({} setting(s) left alone; \
             see `nettune plan`)\n{host_wide}",
            opts.name(),
            plan.skipped.len()
        ),
        Applied::AllRefused(journal) => format!(
            "nothing to change on {place}: the kernel refused every planned change\n{}{host_wide}",
            refusals(journal)
        ),
        Applied::Done(journal) => {
            let mut text = summary(journal, &place, &state, &host_wide);
            if let Some(report) = &guarded {
                text.push_str(&report.text(&state, journal));
            }
            text
        }
    };
    if args.json {
        let mut value = match &applied {
            Applied::Nothing => {
                json!({"applied": false, "reason": "nothing to change", "state_id": null, "changed": 0})
            }
            Applied::AllRefused(j) => {
                json!({"applied": false, "reason": "the kernel refused every change", "state_id": j.id, "state": j, "changed": 0, "refused": j.refused_count()})
            }
            Applied::Done(j) => {
                json!({"applied": true, "state_id": j.id, "state": j, "changed": j.change_count(), "refused": j.refused_count()})
            }
        };
        value["host_wide"] = json!(plan.host_wide);
        value["host_command"] = json!(plan.host_command);
        if let Some(report) = &guarded {
            value["guard"] = report.json();
        }
        crate::output::print(&(serde_json::to_string_pretty(&value)? + "\n"))?;
    } else {
        crate::output::print(&text)?;
    }
    match (&guarded, &applied) {
        (Some(report), Applied::Done(journal)) => guard_status(report, journal, &state),
        _ => Ok(Status::Clean),
    }
}

/// The exit status of a guarded apply: 0 the change stays, 1 the guard
/// rolled it back, 2 (an error) when rolling back failed or the guard was
/// interrupted.
fn guard_status(
    report: &GuardReport,
    journal: &Journal,
    state: &StateDir,
) -> anyhow::Result<Status> {
    match report.result {
        GuardResult::Passed => Ok(Status::Clean),
        GuardResult::RolledBack => Ok(Status::Findings),
        GuardResult::Interrupted => anyhow::bail!(
            "the guard was interrupted after {:.1} s of its {:.1} s; state {} was rolled back",
            report.watched_secs,
            report.plan.duration_secs(),
            journal.id
        ),
        GuardResult::RollbackFailed => anyhow::bail!(
            "the guard fired and rolling back state {} failed: {}; fix the cause and run `{}`",
            journal.id,
            report.rollback_error.as_deref().unwrap_or("unknown error"),
            state.command(&format!("rollback {}", journal.id))
        ),
    }
}

/// What was applied, what was refused, `host_wide` (the host-wide values
/// left to the host), and how to undo it.
fn summary(journal: &Journal, place: &str, state: &StateDir, host_wide: &str) -> String {
    let mut out = format!(
        "applied {} on {place}: {} change(s), state {}\n",
        journal.what(),
        journal.change_count(),
        journal.id
    );
    if journal.refused_count() > 0 {
        out.push_str(&format!(
            "  {} change(s) refused by the kernel, not applied:\n",
            journal.refused_count()
        ));
        out.push_str(&refusals(journal));
    }
    if !journal.persist.is_empty() {
        out.push_str(&format!(
            "  persisted in {}, {} and {}\n",
            apply::persist::SYSCTL_FILE,
            apply::persist::SCRIPT,
            apply::persist::UNIT
        ));
    }
    out.push_str(host_wide);
    // A guard that rolled the state back says so after this.
    if journal.status != StateStatus::RolledBack {
        out.push_str(&format!(
            "undo with: {}\n",
            state.command(&format!("rollback {}", journal.id))
        ));
    }
    out
}

/// What a namespace's apply could not do: the host-wide values, with the
/// command for the host.
fn host_wide_note(plan: &crate::plan::Plan) -> String {
    let Some(command) = &plan.host_command else {
        return String::new();
    };
    let names: Vec<String> = plan
        .host_wide
        .iter()
        .map(|h| h.target.short_name())
        .collect();
    format!(
        "  not applied, host-wide ({}): set on the host with\n    {command}\n",
        names.join(", ")
    )
}

fn refusals(journal: &Journal) -> String {
    let mut out = String::new();
    for e in &journal.changes {
        if let Outcome::Refused(why) = &e.outcome {
            out.push_str(&format!("  left alone {}: {why}\n", e.target));
        }
    }
    out
}

pub fn run_rollback(args: RollbackArgs) -> anyhow::Result<Status> {
    let state = state_dir(args.state_dir.as_deref(), args.root.as_deref())?;
    state.check()?;
    require_state_access(state.path(), "rollback")?;
    if !state.path().is_dir() {
        anyhow::bail!(
            "no applied states: {} does not exist (give --root or --state-dir as given to apply, \
             or set {STATE_DIR_ENV})",
            state.path().display()
        );
    }
    // Decided once without the lock, so that a refusal leaves the state
    // directory as it was (the lock file included), and again under it,
    // as another nettune may have changed the states meanwhile.
    rollback_decision(&state, &args)?;
    let _lock = state.lock()?;
    match rollback_decision(&state, &args)? {
        Decision::Forget(journal) => {
            let journal = apply::forget(&state, journal)?;
            if args.json {
                let value = json!({
                    "rolled_back": false,
                    "forgotten": true,
                    "state_id": journal.id,
                    "changed": 0,
                    "state": journal,
                });
                crate::output::print(&(serde_json::to_string_pretty(&value)? + "\n"))?;
            } else {
                crate::output::print(&forgotten(&journal))?;
            }
        }
        Decision::Undo {
            journal,
            root_dir,
            reach,
        } => {
            match reach {
                place::Reach::Here => {}
                place::Reach::Enter {
                    name,
                    inode,
                    cookie,
                } => crate::base::netns::enter_checked(&name, inode, cookie)?,
                place::Reach::Inside => crate::base::netns::own_sysfs()?,
            }
            let backend = Backend::new(host::open_root(root_dir.as_deref())?);
            let journal = apply::undo(&state, &backend, journal)?;
            if args.json {
                let value = json!({
                    "rolled_back": true,
                    "state_id": journal.id,
                    "changed": journal.change_count(),
                    "place": place::Place::of(&journal).to_string(),
                    "persisted_files_removed": !journal.persist.is_empty(),
                    "state": journal,
                });
                crate::output::print(&(serde_json::to_string_pretty(&value)? + "\n"))?;
                return Ok(Status::Clean);
            }
            crate::output::print(&format!(
                "rolled back state {} ({}, {} change(s)) on {}{}\n",
                journal.id,
                journal.what(),
                journal.change_count(),
                place::Place::of(&journal),
                if journal.persist.is_empty() {
                    ""
                } else {
                    "; removed the persisted files"
                }
            ))?;
        }
    }
    Ok(Status::Clean)
}

/// What a rollback will do, every refusal checked, nothing changed yet.
enum Decision {
    Forget(Journal),
    Undo {
        journal: Journal,
        root_dir: Option<PathBuf>,
        reach: place::Reach,
    },
}

fn rollback_decision(state: &StateDir, args: &RollbackArgs) -> anyhow::Result<Decision> {
    let listing = state.list()?;
    if args.forget {
        let id = args.id.ok_or_else(|| {
            anyhow::anyhow!(
                "--forget needs the state's ID (see `{}`)",
                state.command("history")
            )
        })?;
        return Ok(Decision::Forget(apply::forgettable(
            state, &listing, id, args.force,
        )?));
    }
    let journal = apply::choose(&listing, args.id, state)?;
    let root_dir = rollback_tree(&journal, args.root.as_deref())?;
    require_root_for_live(root_dir.as_deref(), "rollback")?;
    let reach = match root_dir {
        Some(_) => place::Reach::Here,
        None => place::reach(&journal, state)?,
    };
    Ok(Decision::Undo {
        journal,
        root_dir,
        reach,
    })
}

/// The tree a rollback writes: `--root` (a tree that moved), or the one in
/// the journal; never the live host for a tree's state, nor a tree for a
/// live state.
fn rollback_tree(journal: &Journal, given: Option<&Path>) -> anyhow::Result<Option<PathBuf>> {
    match (given, &journal.root) {
        (Some(dir), Some(_)) => Ok(Some(tree(dir, "rollback")?)),
        (None, Some(recorded)) => Ok(Some(tree(Path::new(recorded), "rollback")?)),
        (Some(dir), None) => anyhow::bail!(
            "state {} was applied to the live host, not to a tree: roll it back without --root {}",
            journal.id,
            dir.display()
        ),
        (None, None) => Ok(None),
    }
}

/// What forgetting a state leaves as it is.
fn forgotten(journal: &Journal) -> String {
    let left = apply::not_restored(journal);
    let mut out = format!(
        "forgot state {} ({}): nothing was restored; {} setting(s) keep the values it \
         wrote, if they still have them:\n",
        journal.id,
        journal.what(),
        left.len()
    );
    for target in left {
        out.push_str(&format!("  {target}\n"));
    }
    if !journal.persist.is_empty() {
        out.push_str("  the files it wrote with --persist stay in place too\n");
    }
    out
}

pub fn run_history(args: HistoryArgs) -> anyhow::Result<Status> {
    let state = state_dir(args.state_dir.as_deref(), args.root.as_deref())?;
    let listing = state.list()?;
    // Drift is read where the states are: the tree, this namespace, or the
    // host.
    if let Some(ns) = &args.netns {
        crate::base::netns::enter(ns)?;
    }
    let here = match &args.root {
        Some(_) => None,
        None => Some(place::Place::here_or_named(None, args.netns.as_deref())),
    };
    let backend = Backend::new(host::open_root(args.root.as_deref())?);
    let rows: Vec<Row> = listing
        .journals
        .iter()
        .map(|j| Row::of(j, &backend, here.as_ref()))
        .collect();
    if args.json {
        let mut values: Vec<serde_json::Value> = rows.iter().map(Row::json).collect();
        for u in &listing.unreadable {
            values.push(json!({
                "id": u.id,
                "file": u.path.display().to_string(),
                "status": "unreadable",
                "error": u.error,
                "undoable": false,
            }));
        }
        crate::output::print(&(serde_json::to_string_pretty(&values)? + "\n"))?;
        return Ok(Status::Clean);
    }
    if rows.is_empty() && listing.unreadable.is_empty() {
        crate::output::print(&format!(
            "no applied states in {}\n",
            state.path().display()
        ))?;
        return Ok(Status::Clean);
    }
    crate::output::print(&history_text(&rows, &listing.unreadable, &state))?;
    Ok(Status::Clean)
}

/// One state as history shows it.
struct Row<'a> {
    journal: &'a Journal,
    place: String,
    not_undoable: Option<String>,
    /// `None`: not checked here (another place, or not applied).
    drift: Option<Vec<apply::Drift>>,
}

impl<'a> Row<'a> {
    /// `here`: where this process reads values (`None`: a `--root` tree).
    fn of(journal: &'a Journal, backend: &Backend, here: Option<&place::Place>) -> Row<'a> {
        let not_undoable = place::not_undoable(journal);
        let place = place::Place::of(journal);
        let here = match (&place, here) {
            (place::Place::Tree(_), here) => here.is_none(),
            (_, Some(here)) => place.same(here),
            (_, None) => false,
        };
        let checked = here && journal.status == StateStatus::Complete && not_undoable.is_none();
        Row {
            journal,
            place: place.to_string(),
            not_undoable,
            drift: checked.then(|| apply::drift(journal, backend)),
        }
    }

    fn json(&self) -> serde_json::Value {
        let j = self.journal;
        json!({
            "id": j.id,
            "time": j.time,
            "profile": j.profile,
            "what": j.what(),
            "changes": j.change_count(),
            "refused": j.refused_count(),
            "status": j.status,
            "rolled_back": j.status == StateStatus::RolledBack,
            "root": j.root,
            "netns": j.netns,
            "netns_inode": j.netns_inode,
            "place": self.place,
            "undoable": self.not_undoable.is_none(),
            "not_undoable_because": self.not_undoable,
            "drift": self.drift,
            "guard": j.guard,
        })
    }
}

fn history_text(rows: &[Row], unreadable: &[apply::Unreadable], state: &StateDir) -> String {
    let mut out = format!(
        "{:>4}  {:<20}  {:<10}  {:>7}  {:<24}  {}\n",
        "id", "time (UTC)", "profile", "changes", "status", "on"
    );
    for row in rows {
        let j = row.journal;
        out.push_str(&format!(
            "{:>4}  {:<20}  {:<10}  {:>7}  {:<24}  {}\n",
            j.id,
            j.time,
            j.kind(),
            j.change_count(),
            j.status.text(),
            row.place
        ));
        if j.profile.is_none() {
            out.push_str(&format!("      {}\n", j.what()));
        }
        if j.status.is_active() {
            if let Some(why) = &row.not_undoable {
                // A running benchmark's program goes when it ends: no
                // reason to forget its record.
                let running = j.xdp.as_ref().is_some_and(|x| x.owner_running());
                let hint = if running {
                    String::new()
                } else {
                    format!(
                        " (drop it with `{}`)",
                        state.command(&format!("rollback --forget {}", j.id))
                    )
                };
                out.push_str(&format!("      cannot be undone: {why}{hint}\n"));
            }
        }
        if let Some(guard) = &j.guard {
            match &guard.result {
                Some(result) if result != "passed" => {
                    out.push_str(&format!("      guard {result}\n"));
                }
                None if j.status == StateStatus::Complete && guard.interrupted() => {
                    out.push_str(&format!(
                        "      its guard (pid {}) was stopped before it decided: roll it back, \
                         or keep it with `{}`\n",
                        guard.pid,
                        state.command(&format!("rollback --forget {} --force", j.id))
                    ));
                }
                _ => {}
            }
        }
        match row.drift.as_deref() {
            Some([]) => {}
            Some(drifted) => {
                out.push_str(&format!(
                    "      no longer holds: {} setting(s) changed since it was applied:\n",
                    drifted.len()
                ));
                for d in drifted {
                    out.push_str(&format!(
                        "        {} {} is '{}', was set to '{}'\n",
                        d.group,
                        d.target.short_name(),
                        d.now,
                        d.applied
                    ));
                }
            }
            None => {}
        }
    }
    for u in unreadable {
        out.push_str(&format!(
            "{:>4}  cannot be read: {} ({})\n",
            u.id.map_or("?".to_string(), |id| id.to_string()),
            u.path.display(),
            u.error
        ));
    }
    out
}
