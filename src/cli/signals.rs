//! Ctrl-C and SIGTERM, for commands that run until told to stop: both
//! trigger the run's [`Stop`] token, so the engine ends with its report
//! (SIGTERM is how service managers and `timeout` stop a process). A second
//! one while stopping ends the process at once, as users expect of a
//! second Ctrl-C. The only signal handling in nettune is here.

use signal_hook::consts::{SIGINT, SIGTERM};

use crate::bench::stop::Stop;

/// A stop token that Ctrl-C and SIGTERM trigger.
pub fn stop_on_signals() -> anyhow::Result<Stop> {
    let stop = Stop::new();
    for signal in [SIGINT, SIGTERM] {
        // Registered first, so it sees the flag as the previous signal left
        // it: set means this is the second one.
        signal_hook::flag::register_conditional_shutdown(signal, 128 + signal, stop.flag())
            .map_err(|e| anyhow::anyhow!("cannot handle signal {signal}: {e}"))?;
        signal_hook::flag::register(signal, stop.flag())
            .map_err(|e| anyhow::anyhow!("cannot handle signal {signal}: {e}"))?;
    }
    Ok(stop)
}
