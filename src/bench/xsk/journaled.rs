//! The AF_XDP sink with its program journaled, for whoever runs it (the
//! command line, a daemon, an experiment): the program is recorded in the
//! state directory before it is attached, and removed (and the record
//! closed) when the run ends, on an error, or when a panic unwinds through
//! the [`Journaled`]. After a kill -9 the record stays: `nettune doctor`
//! reports the program and `nettune rollback` removes it.

use std::time::Duration;

use crate::apply::journal::{Journal, StateDir};
use crate::apply::{self, XdpRecord};
use crate::base::observe::Observer;
use crate::base::stop::Stop;
use crate::bench::report::Interval;

use super::{load, Attached, XskReport, XskSinkConfig};

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
}

/// Load the program, record it in `state` (for the namespace `netns`),
/// then attach it. A program that could not be attached leaves no record.
pub fn attach(
    config: XskSinkConfig,
    state: StateDir,
    netns: Option<&str>,
) -> anyhow::Result<Journaled> {
    let queue = config.queue;
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
    Ok(Journaled {
        attached,
        state,
        journal,
        removed: false,
    })
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
        self.attached.run(stop, observer)
    }

    /// Detach the program and close the record; an error leaves the
    /// record for `rollback`. Later calls do nothing.
    pub fn remove(&mut self) -> anyhow::Result<()> {
        self.removed = true;
        if self.journal.status != apply::StateStatus::Complete {
            return Ok(());
        }
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
