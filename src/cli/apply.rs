//! `nettune apply`, `rollback` and `history`: arguments, and the commands
//! over the journal and the writers in [`crate::apply`].

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::apply::journal::{
    self, Entry, Journal, Outcome, StateDir, StateStatus, DEFAULT_STATE_DIR,
};
use crate::apply::{persist, restore, Backend, WriteError};
use crate::cli::plan::{print, resolve, Format, TuneArgs};
use crate::error::Status;
use crate::host;
use crate::plan::compare::same_value;

/// Test hook (docs/apply.md): kill the process with SIGKILL after this many
/// changes, to test `rollback` after an interrupted apply.
const KILL_AFTER_ENV: &str = "NETTUNE_TEST_KILL_AFTER";

#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub tune: TuneArgs,
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run: text, json or sh.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Also make the settings survive a reboot: /etc/sysctl.d/90-nettune.conf
    /// and a systemd unit running /etc/nettune/apply-devices.sh.
    #[arg(long)]
    pub persist: bool,
    /// Where journals go. Default: /var/lib/nettune (DIR/var/lib/nettune with --root DIR).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    /// The state to restore (see `nettune history`). Default: the last one applied.
    pub id: Option<u32>,
    /// The tree the state was applied to (`apply --root DIR`).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Where journals are. Default: /var/lib/nettune (DIR/var/lib/nettune with --root DIR).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    /// The tree whose states to list (`apply --root DIR`).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Where journals are. Default: /var/lib/nettune (DIR/var/lib/nettune with --root DIR).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Print the states as JSON.
    #[arg(long)]
    pub json: bool,
}

fn state_dir(given: Option<&Path>, root: Option<&Path>) -> StateDir {
    let dir = match (given, root) {
        (Some(dir), _) => dir.to_path_buf(),
        (None, Some(root)) => root.join(DEFAULT_STATE_DIR.trim_start_matches('/')),
        (None, None) => PathBuf::from(DEFAULT_STATE_DIR),
    };
    StateDir::new(dir)
}

fn require_root_for_live(root: Option<&Path>, verb: &str) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if root.is_none() && unsafe { libc::geteuid() } != 0 {
        anyhow::bail!(
            "nettune {verb} changes the live host and needs root: run it as root (sudo), or try it on a capture with --root DIR; nothing was changed"
        );
    }
    Ok(())
}

fn absolute(path: &Path) -> anyhow::Result<String> {
    let abs =
        std::fs::canonicalize(path).with_context(|| format!("--root '{}'", path.display()))?;
    Ok(abs.display().to_string())
}

pub fn run_apply(args: ApplyArgs) -> anyhow::Result<Status> {
    if args.dry_run {
        let (_, plan) = resolve(&args.tune)?;
        print(&plan, &args.tune, args.format)?;
        return Ok(Status::Clean);
    }
    if args.persist && args.tune.target.netns.is_some() {
        anyhow::bail!("--persist cannot be used with --netns: a network namespace does not survive a reboot; nothing was changed");
    }
    let root_dir = args.tune.target.root.clone();
    require_root_for_live(root_dir.as_deref(), "apply")?;
    // Bad input is reported before the state directory is created.
    let (opts, plan) = resolve(&args.tune)?;
    let state = state_dir(args.state_dir.as_deref(), root_dir.as_deref());
    let _lock = state.lock()?;
    if let Some(open) = state
        .list()?
        .into_iter()
        .rev()
        .find(|j| j.status == StateStatus::Applying)
    {
        anyhow::bail!(
            "state {} (profile {}, {}) was interrupted before it finished; run `nettune rollback {}` first; nothing was changed",
            open.id,
            open.profile.name(),
            open.time,
            open.id
        );
    }
    let root = host::open_root(root_dir.as_deref())?;
    let base = root.base().to_path_buf();
    let backend = Backend::new(root);

    // Original values, read now (not from the model): exactly what to restore.
    let mut changes = Vec::new();
    for change in &plan.changes {
        let original = backend
            .read(&change.target)
            .with_context(|| format!("reading {} before any change", change.target))?;
        if same_value(&change.target, &original, &change.to) {
            continue;
        }
        changes.push(Entry {
            target: change.target.clone(),
            group: change.group.clone(),
            to: change.to.clone(),
            reason: change.reason.clone(),
            original,
            outcome: Outcome::Pending,
        });
    }
    if changes.is_empty() {
        crate::output::print(&format!(
            "nothing to change: {} already satisfies profile {} ({} setting(s) left alone; see `nettune plan`)\n",
            args.tune.place(),
            opts.profile.name(),
            plan.skipped.len()
        ))?;
        return Ok(Status::Clean);
    }
    let mut journal = Journal {
        schema_version: journal::JOURNAL_VERSION,
        id: state.next_id()?,
        time: journal::now_utc(),
        profile: opts.profile,
        options: opts.clone(),
        root: root_dir.as_deref().map(absolute).transpose()?,
        netns: args.tune.target.netns.clone(),
        status: StateStatus::Applying,
        changes,
        persist: Vec::new(),
        created_dirs: Vec::new(),
        failure: None,
        rolled_back_at: None,
    };
    state.save(&journal)?;

    let kill_after: Option<usize> = std::env::var(KILL_AFTER_ENV)
        .ok()
        .and_then(|v| v.parse().ok());
    for i in 0..journal.changes.len() {
        if kill_after == Some(i) {
            // SAFETY: raising a signal has no memory-safety preconditions.
            unsafe { libc::raise(libc::SIGKILL) };
        }
        let entry = &journal.changes[i];
        let target = &entry.target;
        let result = backend
            .write(target, &entry.to)
            .and_then(|()| backend.check(target, &entry.to));
        match result {
            Ok(()) => journal.changes[i].outcome = Outcome::Changed,
            Err(WriteError::Refused(why)) => journal.changes[i].outcome = Outcome::Refused(why),
            Err(WriteError::Failed(why)) => {
                let failed = format!("{} -> '{}': {why}", entry.target, entry.to);
                let made = journal.changes[..i]
                    .iter()
                    .filter(|e| e.outcome == Outcome::Changed)
                    .count();
                let restore_errors = restore(&backend, &journal.changes[..=i]);
                journal.status = StateStatus::Failed;
                journal.failure = Some(failed.clone());
                state.save(&journal)?;
                if restore_errors.is_empty() {
                    anyhow::bail!(
                        "apply failed at {failed}; the {made} setting(s) changed before it were restored (state {} in {})",
                        journal.id,
                        state.path().display()
                    );
                }
                anyhow::bail!(
                    "apply failed at {failed}; restoring the settings changed before it also failed: {}; the originals are in {}",
                    restore_errors.join("; "),
                    state.path().display()
                );
            }
        }
    }
    if journal.change_count() == 0 {
        // The kernel refused every change: nothing to undo, no state.
        state.remove(journal.id)?;
        let mut out = format!(
            "nothing to change on {}: the kernel refused every planned change\n",
            args.tune.place()
        );
        out.push_str(&refusals(&journal));
        crate::output::print(&out)?;
        return Ok(Status::Clean);
    }
    if args.persist {
        let persisted = persist::prepare(&mut journal, &base)
            .and_then(|()| state.save(&journal))
            .and_then(|()| persist::write(&journal, &base));
        if let Err(e) = persisted {
            // Persisting is part of the apply: undo it all.
            let mut errors = restore(&backend, &journal.changes);
            if let Err(undo) = persist::undo(&journal, &base) {
                errors.push(format!("{undo:#}"));
            }
            journal.status = StateStatus::Failed;
            journal.failure = Some(format!("--persist: {e:#}"));
            state.save(&journal)?;
            if errors.is_empty() {
                anyhow::bail!(
                    "apply failed writing the --persist files: {e:#}; every setting was restored"
                );
            }
            anyhow::bail!(
                "apply failed writing the --persist files: {e:#}; restoring also failed: {}; the originals are in {}",
                errors.join("; "),
                state.path().display()
            );
        }
    }
    journal.status = StateStatus::Complete;
    state.save(&journal)?;
    crate::output::print(&summary(&journal, &args.tune.place()))?;
    Ok(Status::Clean)
}

fn summary(journal: &Journal, place: &str) -> String {
    let mut out = format!(
        "applied profile {} on {place}: {} change(s), state {}\n",
        journal.profile.name(),
        journal.change_count(),
        journal.id
    );
    out.push_str(&refusals(journal));
    if !journal.persist.is_empty() {
        out.push_str(&format!(
            "  persisted in {}, {} and {}\n",
            persist::SYSCTL_FILE,
            persist::SCRIPT,
            persist::UNIT
        ));
    }
    let root = journal
        .root
        .as_deref()
        .map(|r| format!(" --root {r}"))
        .unwrap_or_default();
    out.push_str(&format!(
        "undo with: nettune rollback {}{root}\n",
        journal.id
    ));
    out
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
    let state = state_dir(args.state_dir.as_deref(), args.root.as_deref());
    if !state.path().is_dir() {
        anyhow::bail!(
            "no applied states: {} does not exist (give --root or --state-dir as given to apply)",
            state.path().display()
        );
    }
    let _lock = state.lock()?;
    let journals = state.list()?;
    let chosen = match args.id {
        Some(id) => journals.iter().find(|j| j.id == id).ok_or_else(|| {
            anyhow::anyhow!(
                "no state {id} in {} (states: {}); see `nettune history`",
                state.path().display(),
                journals
                    .iter()
                    .map(|j| j.id.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?,
        None => journals
            .iter()
            .rev()
            .find(|j| j.status.is_active())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "nothing to roll back: no applied state in {}",
                    state.path().display()
                )
            })?,
    };
    let mut journal = chosen.clone();
    match journal.status {
        StateStatus::RolledBack => anyhow::bail!(
            "state {} was rolled back already ({})",
            journal.id,
            journal.rolled_back_at.as_deref().unwrap_or("time unknown")
        ),
        StateStatus::Failed => anyhow::bail!(
            "state {} did not apply: it failed and was restored at once ({})",
            journal.id,
            journal.failure.as_deref().unwrap_or("no reason recorded")
        ),
        StateStatus::Applying | StateStatus::Complete => {}
    }
    if let Some(newer) = journals
        .iter()
        .rev()
        .find(|j| j.id > journal.id && j.status.is_active())
    {
        anyhow::bail!(
            "state {} was applied after state {} and may change the same settings: roll it back first (`nettune rollback {}`)",
            newer.id,
            journal.id,
            newer.id
        );
    }
    let root_dir: Option<PathBuf> = args
        .root
        .clone()
        .or_else(|| journal.root.as_ref().map(PathBuf::from));
    require_root_for_live(root_dir.as_deref(), "rollback")?;
    if let Some(ns) = &journal.netns {
        host::netns::enter(ns)?;
    }
    let root = host::open_root(root_dir.as_deref())?;
    let base = root.base().to_path_buf();
    let backend = Backend::new(root);
    let mut errors = restore(&backend, &journal.changes);
    if let Err(e) = persist::undo(&journal, &base) {
        errors.push(format!("{e:#}"));
    }
    if !errors.is_empty() {
        anyhow::bail!(
            "rollback of state {} left {} setting(s) unrestored: {}; the state is kept: fix the cause and run `nettune rollback {}` again",
            journal.id,
            errors.len(),
            errors.join("; "),
            journal.id
        );
    }
    journal.status = StateStatus::RolledBack;
    journal.rolled_back_at = Some(journal::now_utc());
    state.save(&journal)?;
    crate::output::print(&format!(
        "rolled back state {} (profile {}, {} change(s)){}\n",
        journal.id,
        journal.profile.name(),
        journal.change_count(),
        if journal.persist.is_empty() {
            ""
        } else {
            "; removed the persisted files"
        }
    ))?;
    Ok(Status::Clean)
}

pub fn run_history(args: HistoryArgs) -> anyhow::Result<Status> {
    let state = state_dir(args.state_dir.as_deref(), args.root.as_deref());
    let journals = state.list()?;
    if args.json {
        let rows: Vec<serde_json::Value> = journals
            .iter()
            .map(|j| {
                serde_json::json!({
                    "id": j.id,
                    "time": j.time,
                    "profile": j.profile,
                    "changes": j.change_count(),
                    "status": j.status,
                    "rolled_back": j.status == StateStatus::RolledBack,
                    "root": j.root,
                    "netns": j.netns,
                })
            })
            .collect();
        crate::output::print(&(serde_json::to_string_pretty(&rows)? + "\n"))?;
        return Ok(Status::Clean);
    }
    if journals.is_empty() {
        crate::output::print(&format!(
            "no applied states in {}\n",
            state.path().display()
        ))?;
        return Ok(Status::Clean);
    }
    let mut out = format!(
        "{:>4}  {:<20}  {:<10}  {:>7}  {:<24}  {}\n",
        "id", "time (UTC)", "profile", "changes", "status", "on"
    );
    for j in &journals {
        let on = match (&j.root, &j.netns) {
            (Some(root), _) => format!("capture {root}"),
            (None, Some(ns)) => format!("network namespace {ns}"),
            (None, None) => "this host".to_string(),
        };
        out.push_str(&format!(
            "{:>4}  {:<20}  {:<10}  {:>7}  {:<24}  {on}\n",
            j.id,
            j.time,
            j.profile.name(),
            j.change_count(),
            j.status.text()
        ));
    }
    crate::output::print(&out)?;
    Ok(Status::Clean)
}
