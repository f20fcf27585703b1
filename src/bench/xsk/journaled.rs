//! The AF_XDP sink with its program journaled, for whoever runs it (the
//! command line, a daemon, an experiment): the program is recorded in the
//! state directory before it is attached, and removed (and the record
//! closed) when the run ends, on an error, or when a panic unwinds through
//! the [`Journaled`]. After a kill -9 the record stays: `nettune doctor`
//! reports the program and `nettune rollback` removes it.
//!
//! With `--prefer-busy-poll` the run also sets the IRQ deferral of the
//! queue's NAPI ([`super::DEFERRAL`], netdev `napi-set`) once the program
//! is attached (on a veth the NAPI comes with the program): recorded in
//! the same state with the values read just before, restored before the
//! program is removed, and by `rollback` after a kill.

use std::time::Duration;

use crate::apply::journal::{Journal, StateDir};
use crate::apply::{self, Backend, Entry, Outcome, XdpRecord};
use crate::base::driver::NapiKey;
use crate::base::observe::Observer;
use crate::base::stop::Stop;
use crate::base::Root;
use crate::bench::netns;
use crate::bench::report::Interval;
use crate::plan::{Target, Value};

use super::{load, Attached, Deferral, XskReport, XskSinkConfig, DEFERRAL};

/// How long removal waits for another apply or rollback that holds the
/// state directory's lock.
const LOCK_TRIES: u32 = 50;
const LOCK_PAUSE: Duration = Duration::from_millis(100);

/// An attached program and its open record. [`Journaled::remove`] detaches
/// the program and closes the record; dropping it does the same when
/// nobody did (an error, a panic), and an error then leaves the record for
/// `rollback`.
pub struct Journaled {
    attached: Attached,
    state: StateDir,
    journal: Journal,
    /// `remove` was called: dropping does nothing more.
    removed: bool,
    /// The interface's network namespace.
    netns: Option<String>,
    /// The queue's NAPI deferral before the run, when the run set it.
    deferral_before: Option<Deferral>,
}

/// Load the program, record it in `state` (for the namespace `netns`),
/// then attach it. A program that could not be attached leaves no record.
pub fn attach(
    config: XskSinkConfig,
    state: StateDir,
    netns: Option<&str>,
) -> anyhow::Result<Journaled> {
    let queue = config.queue;
    let prefer = config.busy.prefer;
    let inside = config.netns.clone();
    let loaded = load(config)?;
    let program = loaded.program().clone();
    let record = XdpRecord {
        iface: program.iface.clone(),
        queue,
        id: program.id,
        name: program.name.clone(),
        mode: program.mode,
        pid: std::process::id(),
        pid_start: apply::records::process_start(std::process::id()),
    };
    let mut journal = {
        let _lock = state.lock()?;
        apply::record_xdp(&state, record, netns)?
    };
    let attached = match loaded.attach() {
        Ok(attached) => attached,
        Err(e) => {
            // Nothing was attached: the record goes.
            if let Ok(_lock) = state.lock() {
                let _ = state.remove(journal.id);
            }
            return Err(e);
        }
    };
    {
        let _lock = state.lock()?;
        apply::xdp_attached(&state, &mut journal)?;
    }
    let mut journaled = Journaled {
        attached,
        state,
        journal,
        removed: false,
        netns: inside,
        deferral_before: None,
    };
    if prefer {
        // On an error, dropping `journaled` restores what was set and
        // removes the program.
        journaled.defer_irqs(queue)?;
    }
    Ok(journaled)
}

/// The two NAPI settings of the deferral, with their values.
fn deferral_settings(d: Deferral) -> [(NapiKey, u64); 2] {
    [
        (NapiKey::DeferHardIrqs, d.defer_hard_irqs),
        (NapiKey::GroFlushTimeout, d.gro_flush_timeout_ns),
    ]
}

impl Journaled {
    /// The record's id (`nettune rollback ID`).
    pub fn id(&self) -> u32 {
        self.journal.id
    }

    /// The command that removes the program if this process is killed.
    pub fn rollback_command(&self) -> String {
        self.state.command(&format!("rollback {}", self.journal.id))
    }

    /// Receive until the duration or `stop` (see [`Attached::run`]); the
    /// program stays attached until [`Journaled::remove`].
    pub fn run(
        &mut self,
        stop: &Stop,
        observer: &mut dyn Observer<Interval>,
    ) -> anyhow::Result<XskReport> {
        let mut report = self.attached.run(stop, observer)?;
        if let (Some(busy), Some(before)) = (report.busy_poll.as_mut(), self.deferral_before) {
            busy.deferral = Some(DEFERRAL);
            busy.deferral_before = Some(before);
        }
        Ok(report)
    }

    /// Set [`DEFERRAL`] on the NAPI of `queue`, recorded first with the
    /// values it replaces.
    fn defer_irqs(&mut self, queue: u32) -> anyhow::Result<()> {
        let iface = self.attached.program().iface.clone();
        let pid = std::process::id();
        let settings = deferral_settings(DEFERRAL);
        let entries = netns::within(self.netns.as_deref(), || {
            let backend = Backend::new(Root::live());
            let mut entries = Vec::new();
            for (key, to) in settings {
                let target = Target::napi(&iface, queue, key);
                let original = backend.read(&target).map_err(|e| {
                    anyhow::anyhow!(
                        "--prefer-busy-poll: cannot defer the IRQs of '{iface}' queue {queue}: \
                         {e:#}; the program was removed"
                    )
                })?;
                let to = Value::parse(&target, &to.to_string()).map_err(anyhow::Error::msg)?;
                entries.push(Entry {
                    target,
                    group: iface.clone(),
                    to,
                    reason: format!(
                        "IRQ deferral while the AF_XDP reader busy-polls queue {queue} (bench \
                         udp-sink --xdp --prefer-busy-poll, pid {pid})"
                    ),
                    original,
                    outcome: Outcome::Pending,
                    irq_name: None,
                });
            }
            Ok(entries)
        })?;
        let number = |e: &Entry| e.original.trim().parse::<u64>().unwrap_or(0);
        self.deferral_before = Some(Deferral {
            defer_hard_irqs: number(&entries[0]),
            gro_flush_timeout_ns: number(&entries[1]),
        });
        {
            let _lock = self.state.lock()?;
            apply::record_xdp_changes(&self.state, &mut self.journal, entries.clone())?;
        }
        netns::within(self.netns.as_deref(), || {
            let backend = Backend::new(Root::live());
            for e in &entries {
                backend
                    .write(&e.target, &e.to)
                    .and_then(|()| backend.check(&e.target, e.to.as_str()))
                    .map_err(|err| {
                        anyhow::anyhow!(
                            "--prefer-busy-poll: cannot set {} to '{}': {err}; the program was \
                             removed",
                            e.target,
                            e.to
                        )
                    })?;
            }
            Ok(())
        })?;
        let _lock = self.state.lock()?;
        apply::xdp_attached(&self.state, &mut self.journal)
    }

    /// Put back what [`Journaled::defer_irqs`] set (the state's NAPI
    /// entries), in the interface's namespace.
    fn restore_deferral(&self) -> anyhow::Result<()> {
        let napi: Vec<Entry> = self
            .journal
            .changes
            .iter()
            .filter(|e| matches!(e.target, Target::Napi { .. }))
            .cloned()
            .collect();
        if napi.is_empty() {
            return Ok(());
        }
        let errors = netns::within(self.netns.as_deref(), || {
            Ok(apply::restore(&Backend::new(Root::live()), &napi))
        })?;
        if !errors.is_empty() {
            anyhow::bail!(
                "cannot restore the IRQ deferral of '{}': {}",
                self.attached.program().iface,
                errors.join("; ")
            );
        }
        Ok(())
    }

    /// Detach the program and close the record; an error leaves the
    /// record for `rollback`. Later calls do nothing.
    pub fn remove(&mut self) -> anyhow::Result<()> {
        self.removed = true;
        if self.journal.status != apply::StateStatus::Complete {
            return Ok(());
        }
        // First: on a veth the NAPI goes with the program.
        self.restore_deferral()?;
        self.attached.detach()?;
        let mut last = None;
        for _ in 0..LOCK_TRIES {
            match self.state.lock() {
                Ok(_lock) => return apply::xdp_removed(&self.state, &mut self.journal),
                Err(e) => last = Some(e),
            }
            std::thread::sleep(LOCK_PAUSE);
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("cannot lock the state directory")))
    }
}

impl Drop for Journaled {
    fn drop(&mut self) {
        if !self.removed {
            let _ = self.remove();
        }
    }
}
