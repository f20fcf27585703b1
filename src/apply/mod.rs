//! Apply a plan with a journal of the original values, undo it exactly,
//! list and check what was done. Library functions that take plain inputs
//! and return what happened; they never print (the command line does).
//!
//! Apply: read every target's current value; write the journal and sync it
//! BEFORE the first change; make the changes one by one, reading each back;
//! on a failure restore everything changed so far (in reverse) and return
//! an error naming the change. A write the kernel refuses for what it is (a
//! managed IRQ, a qdisc kind it lacks, a driver without the operation)
//! changes nothing and is recorded as refused, never counted as applied:
//! these are only discovered when written, as no file tells them in advance.

pub mod drift;
pub mod journal;
pub mod persist;
pub mod place;
mod steer_target;
mod target;

use std::path::Path;

use anyhow::Context as _;

pub use crate::base::records::{
    self, GuardRecord, SteerRecord, XdpRecord, NO_RULE, XDP_ATTACHED, XDP_DETACHED,
};
pub use crate::plan::drift::Drift;
pub use drift::drift;
pub use journal::{
    Entry, Journal, Listing, Outcome, StateDir, StateStatus, Unreadable, DEFAULT_STATE_DIR,
};
pub use place::Place;
pub use target::{Backend, WriteError};

use crate::base::Root;
use crate::plan::compare::same_value;
use crate::plan::{Change, PlanOptions, Target, Value};

/// Why changes are made: a profile's plan, or `nettune steer`.
#[derive(Debug, Clone)]
pub enum Purpose {
    Profile(PlanOptions),
    Steer(SteerRecord),
}

/// What to apply, and where.
pub struct Request<'a> {
    pub changes: &'a [Change],
    pub purpose: Purpose,
    /// The `--root` tree (absolute), or `None` for the live host.
    pub root: Option<&'a Path>,
    /// The network namespace the caller has entered, by name; `None`: the
    /// namespace this thread is in, whichever it is (the journal records
    /// it, found by identity).
    pub netns: Option<&'a str>,
    /// Also write the files that make the settings survive a reboot.
    pub persist: bool,
    /// irqbalance runs on this host: it would undo IRQ affinity.
    pub irqbalance_running: bool,
    /// Apply IRQ affinity changes even so.
    pub allow_irqbalance: bool,
    /// The experiment applying it (its result directory), recorded in the
    /// journal; `None` for `nettune apply`.
    pub experiment: Option<&'a str>,
    /// The guard that will watch the change (`apply --guard`), recorded
    /// in the journal before the first change.
    pub guard: Option<GuardRecord>,
}

/// How an apply ended (errors aside).
#[derive(Debug)]
pub enum Applied {
    /// Every planned value already holds: no journal was written.
    Nothing,
    /// The kernel refused every change: nothing was changed, no state kept.
    AllRefused(Journal),
    /// Changes were made: the state's journal (refusals inside).
    Done(Journal),
}

/// Test hook (debug builds only, so it cannot exist in a release build):
/// kill the process with SIGKILL after this many changes, to test rollback
/// after an interrupted apply.
#[cfg(debug_assertions)]
const KILL_AFTER_ENV: &str = "NETTUNE_TEST_KILL_AFTER";

/// Apply `req.plan` through `backend`, journaled in `state` (whose lock the
/// caller holds).
pub fn apply(state: &StateDir, backend: &Backend, req: &Request) -> anyhow::Result<Applied> {
    let here = Place::here(req.root, req.netns)?;
    refuse(state, req, &here)?;
    let changes = originals(backend, req.changes)?;
    if changes.is_empty() {
        return Ok(Applied::Nothing);
    }
    let mut journal = new_journal(state, req.root, &here, changes)?;
    match &req.purpose {
        Purpose::Profile(options) => {
            journal.profile = Some(options.profile);
            journal.options = Some(options.clone());
        }
        Purpose::Steer(record) => journal.steer = Some(record.clone()),
    }
    journal.experiment = req.experiment.map(str::to_string);
    journal.guard = req.guard.clone();
    state.save(&journal)?;
    write_changes(state, backend, &mut journal)?;
    if journal.change_count() == 0 {
        // The kernel refused every change: nothing to undo, no state.
        state.remove(journal.id)?;
        return Ok(Applied::AllRefused(journal));
    }
    if req.persist {
        persist_or_undo(state, backend, &mut journal)?;
    }
    journal.status = StateStatus::Complete;
    state.save(&journal)?;
    Ok(Applied::Done(journal))
}

/// What `apply` refuses before it changes anything (also checked by a
/// caller before it takes the state directory's lock, so that a refusal
/// leaves the directory as it was): IRQ affinity under irqbalance,
/// `--persist` in a network namespace, a place whose last apply was
/// interrupted.
pub fn refuse(state: &StateDir, req: &Request, here: &Place) -> anyhow::Result<()> {
    refuse_irq_changes_under_irqbalance(req)?;
    if req.persist && here.is_namespace() {
        anyhow::bail!(
            "--persist cannot be used in a network namespace (this nettune runs in {here}): a \
             namespace does not survive a reboot; nothing was changed"
        );
    }
    refuse_after_an_interrupted_apply(state, here)
}

/// A journal of `changes` for the place given, status applying, not saved.
fn new_journal(
    state: &StateDir,
    root: Option<&Path>,
    here: &Place,
    changes: Vec<Entry>,
) -> anyhow::Result<Journal> {
    let (netns, netns_inode, netns_cookie) = here.netns_fields();
    Ok(Journal {
        schema_version: journal::JOURNAL_VERSION,
        id: state.next_id()?,
        time: journal::now_utc(),
        profile: None,
        options: None,
        steer: None,
        xdp: None,
        root: root.map(|r| r.display().to_string()),
        netns,
        netns_inode,
        netns_cookie,
        boot_id: if root.is_none() {
            place::boot_id()
        } else {
            None
        },
        status: StateStatus::Applying,
        changes,
        persist: Vec::new(),
        created_dirs: Vec::new(),
        failure: None,
        rolled_back_at: None,
        forgotten_at: None,
        experiment: None,
        guard: None,
    })
}

/// Record an XDP program about to be attached (in `netns`, by the running
/// process): a state with one pending change, synced to disk, so a run
/// killed after attaching leaves what `rollback` and `doctor` need. The
/// caller holds the state directory's lock.
pub fn record_xdp(
    state: &StateDir,
    record: XdpRecord,
    netns: Option<&str>,
) -> anyhow::Result<Journal> {
    let target = Target::XdpProgram {
        iface: record.iface.clone(),
        id: record.id,
    };
    let entry = Entry {
        target,
        group: record.iface.clone(),
        to: Value::xdp(true),
        reason: format!(
            "AF_XDP reader of queue {} (bench udp-sink --xdp, pid {})",
            record.queue, record.pid
        ),
        original: XDP_DETACHED.to_string(),
        outcome: Outcome::Pending,
        irq_name: None,
    };
    let mut journal = new_journal(state, None, &Place::here(None, netns)?, vec![entry])?;
    journal.xdp = Some(record);
    state.save(&journal)?;
    Ok(journal)
}

/// Settings a run changes beside its XDP program (the IRQ deferral of its
/// queue's NAPI, for busy polling), recorded with their originals and
/// synced before they are written; [`xdp_attached`] then marks them made,
/// and `rollback` restores them before it removes the program. The caller
/// holds the state directory's lock.
pub fn record_xdp_changes(
    state: &StateDir,
    journal: &mut Journal,
    entries: Vec<Entry>,
) -> anyhow::Result<()> {
    journal.changes.extend(entries);
    state.save(journal)
}

/// The recorded program is attached (and what [`record_xdp_changes`]
/// recorded is set): the state is complete.
pub fn xdp_attached(state: &StateDir, journal: &mut Journal) -> anyhow::Result<()> {
    for e in &mut journal.changes {
        e.outcome = Outcome::Changed;
    }
    journal.status = StateStatus::Complete;
    state.save(journal)
}

/// The recorded program was removed by its owner (or never attached):
/// the state is rolled back.
pub fn xdp_removed(state: &StateDir, journal: &mut Journal) -> anyhow::Result<()> {
    journal.status = StateStatus::RolledBack;
    journal.rolled_back_at = Some(journal::now_utc());
    state.save(journal)
}

/// irqbalance rewrites IRQ affinity within seconds: refuse to set it while
/// irqbalance runs unless asked to, saying how to stop it or ban the IRQs.
fn refuse_irq_changes_under_irqbalance(req: &Request) -> anyhow::Result<()> {
    if !req.irqbalance_running || req.allow_irqbalance {
        return Ok(());
    }
    let irqs: Vec<u32> = req.changes.iter().filter_map(|c| c.target.irq()).collect();
    if irqs.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = irqs.iter().map(ToString::to_string).collect();
    anyhow::bail!(
        "irqbalance is running and would undo the IRQ affinity of IRQs {} within seconds; \
         stop it (`systemctl stop irqbalance`), or ban these IRQs or their CPUs in its \
         configuration (IRQBALANCE_BANNED_CPULIST in /etc/default/irqbalance or \
         /etc/sysconfig/irqbalance, or --banirq={} for each), then apply again; or pass \
         --allow-irqbalance to apply anyway; nothing was changed",
        list.join(","),
        irqs[0]
    )
}

/// A killed apply of the same place must be rolled back first: its
/// journal holds the only record of the originals it may have changed.
fn refuse_after_an_interrupted_apply(state: &StateDir, here: &Place) -> anyhow::Result<()> {
    let listing = state.list()?;
    if let Some(open) = listing.journals.iter().rev().find(|j| {
        j.status == StateStatus::Applying
            && Place::of(j).same(here)
            && place::not_undoable(j).is_none()
    }) {
        anyhow::bail!(
            "state {} ({}, {}) was interrupted before it finished; run `{}` first; \
             nothing was changed",
            open.id,
            open.what(),
            open.time,
            state.command(&format!("rollback {}", open.id))
        );
    }
    if let Some(unjudged) = listing.journals.iter().rev().find(|j| {
        j.status == StateStatus::Complete
            && j.guard.as_ref().is_some_and(GuardRecord::interrupted)
            && Place::of(j).same(here)
            && place::not_undoable(j).is_none()
    }) {
        anyhow::bail!(
            "state {} ({}, {}) was applied under a guard that was stopped before it decided \
             whether the change made things worse; run `{}` first (or keep it with `{}`); \
             nothing was changed",
            unjudged.id,
            unjudged.what(),
            unjudged.time,
            state.command(&format!("rollback {}", unjudged.id)),
            state.command(&format!("rollback --forget {} --force", unjudged.id))
        );
    }
    Ok(())
}

/// Guard `journal`'s verdict: `passed`, or `rolled back: WHY` (saved
/// before the rollback starts, so a rollback that fails keeps it).
pub fn guard_result(state: &StateDir, journal: &mut Journal, result: &str) -> anyhow::Result<()> {
    if let Some(guard) = &mut journal.guard {
        guard.result = Some(result.to_string());
    }
    state.save(journal)
}

/// How many of `planned` do not hold their planned value now (what
/// `apply` would change), read through `backend`.
pub fn pending(backend: &Backend, planned: &[Change]) -> anyhow::Result<usize> {
    Ok(originals(backend, planned)?.len())
}

/// Every planned target's current value, read now (not from the model):
/// exactly what to restore. Targets already right are dropped.
fn originals(backend: &Backend, planned: &[Change]) -> anyhow::Result<Vec<Entry>> {
    let names = irq_names(backend.root());
    let mut changes = Vec::new();
    for change in planned {
        let original = backend
            .read(&change.target)
            .with_context(|| format!("reading {} before any change", change.target))?;
        if same_value(&change.target, &original, change.to.as_str()) {
            continue;
        }
        changes.push(Entry {
            target: change.target.clone(),
            group: change.group.clone(),
            to: change.to.clone(),
            reason: change.reason.clone(),
            original,
            outcome: Outcome::Pending,
            irq_name: change
                .target
                .irq()
                .and_then(|irq| names.iter().find(|(n, _)| *n == irq))
                .map(|(_, name)| name.clone()),
        });
    }
    Ok(changes)
}

/// IRQ numbers and their first action name in /proc/interrupts.
fn irq_names(root: &Root) -> Vec<(u32, String)> {
    crate::host::interrupts::read(root)
        .map(|irqs| {
            irqs.lines
                .iter()
                .filter_map(|l| Some((l.irq?, l.actions.first()?.clone())))
                .collect()
        })
        .unwrap_or_default()
}

/// Make the changes one by one, each read back; on a failure restore what
/// was changed and return the error.
fn write_changes(state: &StateDir, backend: &Backend, journal: &mut Journal) -> anyhow::Result<()> {
    #[cfg(debug_assertions)]
    let kill_after: Option<usize> = std::env::var(KILL_AFTER_ENV)
        .ok()
        .and_then(|v| v.parse().ok());
    for i in 0..journal.changes.len() {
        #[cfg(debug_assertions)]
        if kill_after == Some(i) {
            // SAFETY: raising a signal has no memory-safety preconditions.
            unsafe { libc::raise(libc::SIGKILL) };
        }
        let entry = &journal.changes[i];
        let result = backend
            .write(&entry.target, &entry.to)
            .and_then(|()| backend.check(&entry.target, entry.to.as_str()));
        match result {
            Ok(()) => journal.changes[i].outcome = Outcome::Changed,
            // Steering is all or nothing: a refused part fails the whole.
            Err(WriteError::Refused(why)) if journal.steer.is_some() => {
                let failed = format!("{} -> '{}': {why}", entry.target, entry.to);
                return Err(fail(state, backend, journal, i, failed));
            }
            Err(WriteError::Refused(why)) => journal.changes[i].outcome = Outcome::Refused(why),
            Err(WriteError::Failed(why)) => {
                let failed = format!("{} -> '{}': {why}", entry.target, entry.to);
                return Err(fail(state, backend, journal, i, failed));
            }
        }
    }
    Ok(())
}

/// Restore the changes up to `i`, mark the journal failed, and say so.
fn fail(
    state: &StateDir,
    backend: &Backend,
    journal: &mut Journal,
    i: usize,
    failed: String,
) -> anyhow::Error {
    let made = journal.changes[..i]
        .iter()
        .filter(|e| e.outcome == Outcome::Changed)
        .count();
    let restore_errors = restore(backend, &journal.changes[..=i]);
    let verb = if journal.steer.is_some() {
        "steer"
    } else {
        "apply"
    };
    journal.status = StateStatus::Failed;
    journal.failure = Some(failed.clone());
    if let Err(e) = state.save(journal) {
        return e.context(format!("{verb} failed at {failed}"));
    }
    if restore_errors.is_empty() {
        return anyhow::anyhow!(
            "{verb} failed at {failed}; the {made} setting(s) changed before it were restored \
             (state {} in {})",
            journal.id,
            state.path().display()
        );
    }
    anyhow::anyhow!(
        "{verb} failed at {failed}; restoring the settings changed before it also failed: {}; \
         the originals are in {}",
        restore_errors.join("; "),
        state.path().display()
    )
}

/// Write the --persist files; if that fails, undo the whole apply.
fn persist_or_undo(
    state: &StateDir,
    backend: &Backend,
    journal: &mut Journal,
) -> anyhow::Result<()> {
    let base = backend.root().base().to_path_buf();
    let persisted = persist::prepare(journal, &base)
        .and_then(|()| state.save(journal))
        .and_then(|()| persist::write(journal, &base));
    let Err(e) = persisted else {
        return Ok(());
    };
    let mut errors = restore(backend, &journal.changes);
    if let Err(undo) = persist::undo(journal, &base) {
        errors.push(crate::error::message(&undo));
    }
    journal.status = StateStatus::Failed;
    journal.failure = Some(format!("--persist: {}", crate::error::message(&e)));
    state.save(journal)?;
    let why = crate::error::message(&e);
    if errors.is_empty() {
        anyhow::bail!(
            "apply failed writing the --persist files: {why}; every setting was restored"
        );
    }
    anyhow::bail!(
        "apply failed writing the --persist files: {why}; restoring also failed: {}; the \
         originals are in {}",
        errors.join("; "),
        state.path().display()
    )
}

/// Put back the originals of `entries`, last first. A target that already
/// holds its original is not written. Returns the errors.
pub fn restore(backend: &Backend, entries: &[Entry]) -> Vec<String> {
    let mut errors = Vec::new();
    for e in entries.iter().rev() {
        if let Err(err) = restore_one(backend, e) {
            errors.push(format!("{}: {}", e.target, crate::error::message(&err)));
        }
    }
    errors
}

fn restore_one(backend: &Backend, entry: &Entry) -> anyhow::Result<()> {
    let target = &entry.target;
    let current = backend.read(target)?;
    if same_value(target, &current, &entry.original) {
        return Ok(());
    }
    // A rule slot is restored only while it holds the rule nettune wrote:
    // never delete a rule someone put there since.
    if matches!(target, Target::NtupleRule { .. })
        && !same_value(target, &current, entry.to.as_str())
    {
        anyhow::bail!(
            "it now holds '{}', not the rule nettune inserted ('{}'); left alone",
            current.trim(),
            entry.to
        );
    }
    backend.write_original(target, &entry.original)?;
    backend.check(target, &entry.original)?;
    Ok(())
}

/// The state `rollback [ID]` would restore: state `id`, or the newest one
/// that is still applied. Refused when it cannot be undone (with how to
/// forget it), when a newer state of the same place is still applied (roll
/// that back first), or when a newer state cannot be read.
pub fn choose(listing: &Listing, id: Option<u32>, state: &StateDir) -> anyhow::Result<Journal> {
    let dir = state.path();
    let chosen = match id {
        Some(id) => listing
            .journals
            .iter()
            .find(|j| j.id == id)
            .ok_or_else(
                || match listing.unreadable.iter().find(|u| u.id == Some(id)) {
                    Some(u) => anyhow::anyhow!(
                        "state {id} ({}) cannot be read: {}",
                        u.path.display(),
                        u.error
                    ),
                    None => anyhow::anyhow!(
                        "no state {id} in {} (states: {}); see `{}`",
                        dir.display(),
                        listing
                            .journals
                            .iter()
                            .map(|j| j.id.to_string())
                            .collect::<Vec<_>>()
                            .join(", "),
                        state.command("history")
                    ),
                },
            )?,
        None => listing
            .journals
            .iter()
            .rev()
            .find(|j| j.status.is_active() && place::not_undoable(j).is_none())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "nothing to roll back: no applied state that can still be undone in {} (see \
                     `{}`)",
                    dir.display(),
                    state.command("history")
                )
            })?,
    };
    if let Some(why) = place::not_undoable(chosen) {
        let hint = if chosen.status.is_active() {
            format!(
                "; drop it with `{}`",
                state.command(&format!("rollback --forget {}", chosen.id))
            )
        } else {
            String::new()
        };
        anyhow::bail!("state {} cannot be rolled back: {why}{hint}", chosen.id);
    }
    if let Some(newer) = listing.journals.iter().rev().find(|j| {
        j.id > chosen.id
            // An XDP program's run touches nothing but the program and
            // its own queue's IRQ deferral.
            && j.xdp.is_none()
            && j.status.is_active()
            && place::same_place(j, chosen)
            && place::not_undoable(j).is_none()
    }) {
        anyhow::bail!(
            "state {} was applied after state {} on the same host and may change the same \
             settings: roll it back first (`{}`)",
            newer.id,
            chosen.id,
            state.command(&format!("rollback {}", newer.id))
        );
    }
    if let Some(unknown) = listing
        .unreadable
        .iter()
        .find(|u| u.id.is_some_and(|id| id > chosen.id))
    {
        anyhow::bail!(
            "{} is newer than state {} and cannot be read ({}); it may change the same \
             settings: roll it back with the nettune that wrote it first",
            unknown.path.display(),
            chosen.id,
            unknown.error
        );
    }
    Ok(chosen.clone())
}

/// Restore `journal`'s originals through `backend` (the caller is in its
/// namespace, with its tree), remove its --persist files, and mark it
/// rolled back. On errors the state is kept, to be run again.
pub fn undo(state: &StateDir, backend: &Backend, mut journal: Journal) -> anyhow::Result<Journal> {
    let mut errors = restore(backend, &journal.changes);
    if let Err(e) = persist::undo(&journal, backend.root().base()) {
        errors.push(crate::error::message(&e));
    }
    if !errors.is_empty() {
        anyhow::bail!(
            "rollback of state {} left {} setting(s) unrestored: {}; the state is kept: fix the \
             cause and run `{}` again",
            journal.id,
            errors.len(),
            errors.join("; "),
            state.command(&format!("rollback {}", journal.id))
        );
    }
    journal.status = StateStatus::RolledBack;
    journal.rolled_back_at = Some(journal::now_utc());
    state.save(&journal)?;
    Ok(journal)
}

/// The state `id` that `rollback --forget` would drop without restoring
/// anything: one that can no longer be undone (its namespace is gone, the
/// host rebooted); one that can still be undone only with `force`.
pub fn forgettable(
    state: &StateDir,
    listing: &Listing,
    id: u32,
    force: bool,
) -> anyhow::Result<Journal> {
    let journal = listing
        .journals
        .iter()
        .find(|j| j.id == id)
        .cloned()
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no state {id} in {}; see `{}`",
                state.path().display(),
                state.command("history")
            )
        })?;
    if !journal.status.is_active() {
        anyhow::bail!(
            "state {id} is {} already: nothing to forget",
            journal.status.text()
        );
    }
    if place::not_undoable(&journal).is_none() && !force {
        anyhow::bail!(
            "state {id} can still be undone: roll it back (`{}`), or give --force to forget it \
             and keep its {} change(s) in place",
            state.command(&format!("rollback {id}")),
            journal.change_count()
        );
    }
    Ok(journal)
}

/// Drop a state [`forgettable`] returned: marked forgotten, nothing
/// restored.
pub fn forget(state: &StateDir, mut journal: Journal) -> anyhow::Result<Journal> {
    journal.status = StateStatus::Forgotten;
    journal.forgotten_at = Some(journal::now_utc());
    state.save(&journal)?;
    Ok(journal)
}

/// The targets a forgotten state leaves as they are.
pub fn not_restored(journal: &Journal) -> Vec<&Target> {
    journal
        .changes
        .iter()
        .filter(|e| !matches!(e.outcome, Outcome::Refused(_)))
        .map(|e| &e.target)
        .collect()
}
