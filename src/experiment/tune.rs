//! Applying an experiment's configs and rolling them back: the same code as
//! `nettune apply` and `nettune rollback` ([`crate::apply`]), journaled in
//! the same state directory, each journal marked with the experiment that
//! made it. A journal so marked that is still applied when an experiment
//! starts means an earlier one was killed: the experiment refuses to start
//! until `nettune rollback` has finished it.
//!
//! The process has already entered the network namespace it tunes (or
//! tunes the host): every read and write here goes to the live kernel as
//! this process sees it. Host-wide values a namespace cannot see
//! (`net.core.rps_sock_flow_entries`, for RFS) are changed, when allowed,
//! from a thread that joins the host's network namespace again, and
//! journaled as the host's: `nettune rollback` restores them there.

use std::fs::File;

use serde::{Deserialize, Serialize};

use super::space::{self as search, Dimension, Space};
use crate::apply::{self, Applied, Backend, Journal, StateDir, StateStatus};
use crate::base::Root;
use crate::host::Host;
use crate::plan::admit::{Limits, Scope as Reach};
use crate::plan::saved::{self, MadeFor};
use crate::plan::{Plan, PlanOptions, Target};

/// What a config does to the host.
#[derive(Debug, Clone, PartialEq)]
pub enum Tuning {
    /// Nothing: the host as found.
    Current,
    /// A profile's plan, made on the host as found before each apply.
    Profile(PlanOptions),
    /// A saved plan (checked against the host before each apply).
    Plan {
        file: String,
        plan: Box<saved::SavedPlan>,
    },
    /// Settings as the search names them (`rps=all+rfs=on`), made into a
    /// plan of the host as found before each apply.
    Settings(Vec<(Dimension, String)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// As the user named it (`current`, `pps`, `throughput:--rtt=50ms`,
    /// `plan.json`, `rps=app`).
    pub name: String,
    pub tuning: Tuning,
}

impl Config {
    pub fn kind(&self) -> &'static str {
        match self.tuning {
            Tuning::Current => "current",
            Tuning::Profile(_) => "profile",
            Tuning::Plan { .. } => "plan",
            Tuning::Settings(_) => "settings",
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

/// The path `buffers=throughput` sizes socket buffers for: `--bandwidth`
/// (bits/s) and `--rtt` (us) of `experiment run` and `experiment search`
/// alike, so that a label the search prints applies the same values when
/// `experiment run` is given the same path; `None`: the throughput
/// profile's defaults (the fastest link, 100 ms).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BufferPath {
    pub bandwidth_bits: Option<u64>,
    pub rtt_us: Option<u64>,
}

/// What settings configs and the search may touch.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// Interfaces settings apply to.
    pub ifaces: Vec<String>,
    /// The receiving application's CPUs (`app` in `rps=app`).
    pub app_cpus: Vec<u32>,
    /// May change host-wide values.
    pub allow_host: bool,
    /// The path of `buffers=throughput`.
    pub path: BufferPath,
}

impl Scope {
    /// The space of `dimensions` in this scope, on the host's own network
    /// namespace ([`Tuner::space`] fills in another's).
    pub fn space(&self, dimensions: Vec<Dimension>, max_candidates: usize) -> Space {
        Space {
            dimensions,
            ifaces: self.ifaces.clone(),
            app_cpus: self.app_cpus.clone(),
            allow_host: self.allow_host,
            in_namespace: false,
            host_rfs_table: None,
            max_candidates,
            bandwidth_bits: self.path.bandwidth_bits,
            rtt_us: self.path.rtt_us,
        }
    }
}

/// Applies configs in one place, journaled in `state` (whose lock the
/// caller holds for the whole experiment).
pub struct Tuner {
    state: StateDir,
    backend: Backend,
    netns: Option<String>,
    /// The host's network namespace, when this process tunes another one.
    host_net: Option<File>,
    experiment: String,
    allow_irqbalance: bool,
    scope: Scope,
}

/// A config applied: restored by [`Tuned::restore`], or when dropped (a
/// panic, an early return), so that the host is never left tuned.
pub struct Tuned<'a> {
    tuner: &'a Tuner,
    /// The journals of this config (the host's first, when any), each with
    /// whether it is the host's.
    journals: Vec<(Journal, bool)>,
    /// What was changed (empty for `current` or when nothing differed).
    pub changed: Vec<Changed>,
    /// Changes the kernel refused (left alone), with the reason.
    pub refused: Vec<String>,
}

impl Tuned<'_> {
    /// Roll the config back, last journal first.
    pub fn restore(mut self) -> anyhow::Result<()> {
        self.undo_all()
    }

    fn undo_all(&mut self) -> anyhow::Result<()> {
        let mut first_error = None;
        while let Some((journal, host)) = self.journals.pop() {
            if let Err(e) = self.tuner.undo(journal, host) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for Tuned<'_> {
    fn drop(&mut self) {
        // An error here leaves a journal applied: the next experiment
        // refuses to start and `nettune rollback` finishes it.
        let _ = self.undo_all();
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
            host_net: None,
            experiment,
            allow_irqbalance,
            scope: Scope::default(),
        }
    }

    /// The host's network namespace (opened before this process entered
    /// the one it tunes), for host-wide values.
    pub fn with_host_net(mut self, host_net: Option<File>) -> Tuner {
        self.host_net = host_net;
        self
    }

    pub fn with_scope(mut self, scope: Scope) -> Tuner {
        self.scope = scope;
        self
    }

    pub fn netns(&self) -> Option<&str> {
        self.netns.as_deref()
    }

    /// Run `f` in the host's network namespace: on this thread when this
    /// process tunes the host, else on a thread that joins it.
    fn on_host<T: Send>(&self, f: impl FnOnce() -> anyhow::Result<T> + Send) -> anyhow::Result<T> {
        let Some(net) = (self.netns.is_some())
            .then_some(self.host_net.as_ref())
            .flatten()
        else {
            if self.netns.is_some() {
                anyhow::bail!(
                    "the host's network namespace is not at hand to change host-wide values"
                );
            }
            return f();
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                nix::sched::setns(net, nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| {
                    anyhow::anyhow!("cannot return to the host's network namespace: {e}")
                })?;
                f()
            })
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("a thread in the host's namespace panicked")))
        })
    }

    /// A sysctl of the host's namespace (`net.core.rps_sock_flow_entries`).
    pub fn host_sysctl(&self, name: &str) -> Option<String> {
        let path = format!("/proc/sys/{}", name.replace('.', "/"));
        self.on_host(|| Ok(Root::live().read_value(&path)?))
            .ok()
            .flatten()
    }

    /// The places whose unfinished states block an experiment: this one
    /// (the namespace this process tunes, however it got there), and the
    /// host when host-wide values may change.
    fn places(&self) -> anyhow::Result<Vec<apply::Place>> {
        let here = apply::Place::here(None, self.netns.as_deref())?;
        let mut places = vec![here];
        if self.scope.allow_host && self.netns.is_some() {
            places.push(apply::Place::Host);
        }
        Ok(places)
    }

    /// Refuse to start while a state of a place it would tune is
    /// unfinished: applied by an experiment and never rolled back (it was
    /// killed), or an apply that was interrupted.
    pub fn refuse_unfinished(&self) -> anyhow::Result<()> {
        let listing = self.state.list()?;
        let places = self.places()?;
        let open = listing.journals.iter().rev().find(|j| {
            let place = apply::Place::of(j);
            places.iter().any(|p| p.same(&place))
                && apply::place::not_undoable(j).is_none()
                && (j.status == StateStatus::Applying
                    || (j.status == StateStatus::Complete && j.experiment.is_some()))
        });
        if let Some(j) = open {
            let by = match &j.experiment {
                Some(dir) => format!("by the experiment writing {dir}"),
                None => format!("by nettune ({})", j.what()),
            };
            anyhow::bail!(
                "state {} on {} was applied {by} and never finished or rolled back (was it \
                 killed?); restore it with `{}`, then start again; nothing was changed",
                j.id,
                apply::Place::of(j),
                self.state.command(&format!("rollback {}", j.id))
            );
        }
        Ok(())
    }

    /// The host model here, now.
    pub fn host(&self) -> anyhow::Result<Host> {
        let host = crate::gather::read_entered(self.netns.as_deref())?;
        if self.netns.is_none() {
            return Ok(host);
        }
        // The host-wide values a namespace cannot see, as the host has
        // them (best effort, as `read_target` does).
        let host_sysctls = self
            .on_host(|| {
                Ok(crate::host::sysctl::read_root_namespace_sysctls(
                    &Root::live(),
                ))
            })
            .unwrap_or_default();
        Ok(Host {
            host_sysctls,
            ..host
        })
    }

    /// The identity of this place, for saved plans.
    pub fn made_for(&self) -> MadeFor {
        MadeFor::of(self.backend.root(), None, self.netns.as_deref())
    }

    /// What the search and settings configs may change here.
    pub fn space(&self, dimensions: Vec<Dimension>, max_candidates: usize) -> Space {
        Space {
            in_namespace: self.netns.is_some(),
            host_rfs_table: if self.netns.is_some() {
                self.host_sysctl("net.core.rps_sock_flow_entries")
            } else {
                None
            },
            ..self.scope.space(dimensions, max_candidates)
        }
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
                let name = format!("'{file}'");
                let plan = (**plan).clone();
                // The gate of `apply --plan`; the host-wide values this
                // experiment changes from the host's namespace (only with
                // --allow-host: see apply_plan) are admitted as the host's.
                let host = self.host()?;
                let here = Reach::of(&host);
                let scope_of = |t: &Target| {
                    if self.netns.is_some() && search::host_only(t) {
                        Reach::Host
                    } else {
                        here.clone()
                    }
                };
                let plan = saved::admit(plan, &name, &scope_of, &Limits::of(&host))?;
                saved::check(&plan, &name, &self.made_for(), &|t| self.read(t))?;
                let opts = saved::options(&plan);
                Ok(Some((plan, opts)))
            }
            Tuning::Settings(settings) => {
                let host = self.host()?;
                let dims = settings.iter().map(|(d, _)| *d).collect();
                let plan = search::settings_plan(&host, &self.space(dims, 1), settings)?;
                let opts = saved::options(&plan);
                Ok(Some((plan, opts)))
            }
        }
    }

    /// A target's value now (a host-wide one read in the host's namespace).
    pub fn read(&self, target: &Target) -> anyhow::Result<String> {
        if self.netns.is_some() && search::host_only(target) {
            return self.on_host(|| Backend::new(Root::live()).read(target));
        }
        self.backend.read(target)
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
            journals: Vec::new(),
            changed: Vec::new(),
            refused: Vec::new(),
        }
    }

    /// Apply `plan` (journaled): its host-wide changes in the host's
    /// namespace first, then the rest here. Restore with the returned guard.
    pub fn apply_plan(&self, plan: &Plan, opts: &PlanOptions) -> anyhow::Result<Tuned<'_>> {
        let (host_part, here_part): (Vec<_>, Vec<_>) = plan
            .changes
            .iter()
            .cloned()
            .partition(|c| self.netns.is_some() && search::host_only(&c.target));
        if !host_part.is_empty() && !self.scope.allow_host {
            anyhow::bail!(
                "the plan changes host-wide values ({}) that a network namespace cannot; give \
                 --allow-host to change them on the host (journaled and restored)",
                host_part
                    .iter()
                    .map(|c| c.target.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let mut tuned = self.nothing();
        for (changes, host) in [(host_part, true), (here_part, false)] {
            if changes.is_empty() {
                continue;
            }
            let part = Plan {
                changes,
                ..plan.clone()
            };
            let applied = if host {
                self.on_host(|| self.apply_here(&part, opts, None))?
            } else {
                self.apply_here(&part, opts, self.netns.as_deref())?
            };
            match applied {
                Applied::Nothing => {}
                Applied::AllRefused(journal) => tuned.refused.extend(refusals(&journal)),
                Applied::Done(journal) => {
                    tuned.refused.extend(refusals(&journal));
                    tuned.changed.extend(
                        journal
                            .changes
                            .iter()
                            .filter(|e| e.outcome == apply::Outcome::Changed)
                            .map(|e| Changed {
                                target: e.target.to_string(),
                                from: e.original.trim().to_string(),
                                to: e.to.to_string(),
                            }),
                    );
                    tuned.journals.push((journal, host));
                }
            }
        }
        Ok(tuned)
    }

    /// One journaled apply in the calling thread's namespace, recorded as
    /// `netns`.
    fn apply_here(
        &self,
        plan: &Plan,
        opts: &PlanOptions,
        netns: Option<&str>,
    ) -> anyhow::Result<Applied> {
        let backend = Backend::new(Root::live());
        let irqbalance = plan.changes.iter().any(|c| c.target.irq().is_some())
            && crate::gather::read_entered(netns)
                .map(|h| h.irqbalance.running)
                .unwrap_or(false);
        let request = apply::Request {
            changes: &plan.changes,
            purpose: apply::Purpose::Profile(opts.clone()),
            root: None,
            netns,
            persist: false,
            irqbalance_running: irqbalance,
            allow_irqbalance: self.allow_irqbalance,
            experiment: Some(&self.experiment),
            guard: None,
        };
        apply::apply(&self.state, &backend, &request)
    }

    fn undo(&self, journal: Journal, host: bool) -> anyhow::Result<()> {
        if host {
            return self.on_host(|| {
                apply::undo(&self.state, &Backend::new(Root::live()), journal).map(|_| ())
            });
        }
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
