//! Applying an experiment's configs and rolling them back: the same code as
//! `nettune apply` and `nettune rollback` ([`crate::apply`]), journaled in
//! the same state directory, each journal marked with the experiment that
//! made it. A journal so marked that is still applied when an experiment
//! starts means an earlier one was killed: the experiment refuses to start
//! until `nettune rollback` has finished it.
//!
//! The process has already entered the network namespace it tunes (or
//! tunes the host): every read and write here goes to the live kernel as
//! this process sees it.

use serde::{Deserialize, Serialize};

use crate::apply::{self, Applied, Backend, Journal, StateDir, StateStatus};
use crate::base::Root;
use crate::host::Host;
use crate::plan::saved::{self, MadeFor};
use crate::plan::{Plan, PlanOptions};

/// What a config does to the host.
#[derive(Debug, Clone, PartialEq)]
pub enum Tuning {
    /// Nothing: the host as found.
    Current,
    /// A profile's plan, made on the host as found before each apply.
    Profile(PlanOptions),
    /// A saved plan (checked against the host before each apply).
    Plan { file: String, plan: Box<Plan> },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// As the user named it (`current`, `pps`, `throughput:--rtt=50ms`,
    /// `plan.json`).
    pub name: String,
    pub tuning: Tuning,
}

impl Config {
    pub fn kind(&self) -> &'static str {
        match self.tuning {
            Tuning::Current => "current",
            Tuning::Profile(_) => "profile",
            Tuning::Plan { .. } => "plan",
        }
    }
}

/// One setting a config changed, for the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changed {
    pub target: String,
    pub from: String,
    pub to: String,
}

/// Applies configs in one place, journaled in `state` (whose lock the
/// caller holds for the whole experiment).
pub struct Tuner {
    state: StateDir,
    backend: Backend,
    netns: Option<String>,
    experiment: String,
    allow_irqbalance: bool,
}

/// A config applied: restored by [`Tuned::restore`], or when dropped (a
/// panic, an early return), so that the host is never left tuned.
pub struct Tuned<'a> {
    tuner: &'a Tuner,
    journal: Option<Journal>,
    /// What was changed (empty for `current` or when nothing differed).
    pub changed: Vec<Changed>,
    /// Changes the kernel refused (left alone), with the reason.
    pub refused: Vec<String>,
}

impl Tuned<'_> {
    /// Roll the config back.
    pub fn restore(mut self) -> anyhow::Result<()> {
        match self.journal.take() {
            Some(journal) => self.tuner.undo(journal),
            None => Ok(()),
        }
    }
}

impl Drop for Tuned<'_> {
    fn drop(&mut self) {
        if let Some(journal) = self.journal.take() {
            // An error here leaves the journal applied: the next experiment
            // refuses to start and `nettune rollback` finishes it.
            let _ = self.tuner.undo(journal);
        }
    }
}

impl Tuner {
    /// `netns`: the namespace this process entered (None: the host);
    /// `experiment`: what the journals name as their maker.
    pub fn new(
        state: StateDir,
        netns: Option<String>,
        experiment: String,
        allow_irqbalance: bool,
    ) -> Tuner {
        Tuner {
            state,
            backend: Backend::new(Root::live()),
            netns,
            experiment,
            allow_irqbalance,
        }
    }

    pub fn netns(&self) -> Option<&str> {
        self.netns.as_deref()
    }

    /// Refuse to start while a state of this place is unfinished: applied by
    /// an experiment and never rolled back (it was killed), or an apply that
    /// was interrupted.
    pub fn refuse_unfinished(&self) -> anyhow::Result<()> {
        let listing = self.state.list()?;
        let here = |j: &Journal| j.root.is_none() && j.netns == self.netns;
        let open = listing.journals.iter().rev().find(|j| {
            here(j)
                && apply::place::not_undoable(j).is_none()
                && (j.status == StateStatus::Applying
                    || (j.status == StateStatus::Complete && j.experiment.is_some()))
        });
        if let Some(j) = open {
            let by = match &j.experiment {
                Some(dir) => format!("by the experiment writing {dir}"),
                None => format!("by `nettune apply` (profile {})", j.profile.name()),
            };
            anyhow::bail!(
                "state {} on {} was applied {by} and never finished or rolled back (was it \
                 killed?); restore it with `nettune rollback {}`{}, then start again; nothing \
                 was changed",
                j.id,
                self.place(),
                j.id,
                self.state_hint()
            );
        }
        Ok(())
    }

    fn state_hint(&self) -> String {
        if self.state.path() == std::path::Path::new(apply::DEFAULT_STATE_DIR) {
            String::new()
        } else {
            format!(" --state-dir {}", self.state.path().display())
        }
    }

    /// "network namespace X" or "this host".
    pub fn place(&self) -> String {
        crate::plan::render::place(None, self.netns.as_deref())
    }

    /// The host model here, now.
    pub fn host(&self) -> anyhow::Result<Host> {
        crate::host::read_entered(self.netns.as_deref())
    }

    /// The identity of this place, for saved plans.
    pub fn made_for(&self) -> MadeFor {
        MadeFor::of(self.backend.root(), None, self.netns.as_deref())
    }

    /// Read one target's value now.
    pub fn read(&self, target: &crate::plan::Target) -> anyhow::Result<String> {
        self.backend.read(target)
    }

    /// The plan `config` would apply now (None for `current`): a profile's
    /// plan of the host as it is, or the saved plan once checked against it.
    pub fn plan(&self, config: &Config) -> anyhow::Result<Option<(Plan, PlanOptions)>> {
        match &config.tuning {
            Tuning::Current => Ok(None),
            Tuning::Profile(opts) => {
                let host = self.host()?;
                let mut plan = crate::plan::plan(&host, opts)?;
                crate::plan::preflight::preflight(&mut plan, self.backend.root());
                plan.made_for = Some(self.made_for());
                Ok(Some((plan, opts.clone())))
            }
            Tuning::Plan { file, plan } => {
                saved::check(plan, &format!("'{file}'"), &self.made_for(), &|t| {
                    self.backend.read(t)
                })?;
                Ok(Some(((**plan).clone(), saved::options(plan))))
            }
        }
    }

    /// Apply `config` (journaled); restore with the returned guard.
    pub fn apply(&self, config: &Config) -> anyhow::Result<Tuned<'_>> {
        match self.plan(config)? {
            None => Ok(self.nothing()),
            Some((plan, opts)) => self.apply_plan(&plan, &opts),
        }
    }

    fn nothing(&self) -> Tuned<'_> {
        Tuned {
            tuner: self,
            journal: None,
            changed: Vec::new(),
            refused: Vec::new(),
        }
    }

    /// Apply `plan` (journaled); restore with the returned guard.
    pub fn apply_plan(&self, plan: &Plan, opts: &PlanOptions) -> anyhow::Result<Tuned<'_>> {
        let host_irqbalance = !plan.changes.iter().all(|c| c.target.irq().is_none())
            && crate::host::read_entered(self.netns.as_deref())
                .map(|h| h.irqbalance.running)
                .unwrap_or(false);
        let request = apply::Request {
            plan,
            options: opts,
            root: None,
            netns: self.netns.as_deref(),
            persist: false,
            irqbalance_running: host_irqbalance,
            allow_irqbalance: self.allow_irqbalance,
            experiment: Some(&self.experiment),
        };
        let journal = match apply::apply(&self.state, &self.backend, &request)? {
            Applied::Nothing => return Ok(self.nothing()),
            Applied::AllRefused(journal) => {
                let mut tuned = self.nothing();
                tuned.refused = refusals(&journal);
                return Ok(tuned);
            }
            Applied::Done(journal) => journal,
        };
        let changed = journal
            .changes
            .iter()
            .filter(|e| e.outcome == apply::Outcome::Changed)
            .map(|e| Changed {
                target: e.target.to_string(),
                from: e.original.trim().to_string(),
                to: e.to.clone(),
            })
            .collect();
        Ok(Tuned {
            tuner: self,
            refused: refusals(&journal),
            changed,
            journal: Some(journal),
        })
    }

    fn undo(&self, journal: Journal) -> anyhow::Result<()> {
        apply::undo(&self.state, &self.backend, journal).map(|_| ())
    }
}

fn refusals(journal: &Journal) -> Vec<String> {
    journal
        .changes
        .iter()
        .filter_map(|e| match &e.outcome {
            apply::Outcome::Refused(why) => Some(format!("{}: {why}", e.target)),
            _ => None,
        })
        .collect()
}
