//! irqbalance rewrites IRQ affinity within seconds (it re-places IRQs every
//! 10 s from the load it sees): a plan that pins queue IRQs while it runs
//! says so beside every IRQ change, and names the ways out. `apply` refuses
//! such changes unless `--allow-irqbalance` is given.

use serde::{Deserialize, Serialize};

use crate::host::Host;

/// irqbalance runs where the plan pins IRQs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqbalanceWarning {
    /// Its processes.
    pub pids: Vec<u32>,
    /// The IRQs the plan pins, which it will move again.
    pub irqs: Vec<u32>,
    /// What that means and what to do.
    pub note: String,
}

/// Said beside each IRQ change while irqbalance runs.
pub const BESIDE: &str = "irqbalance runs: it will move this IRQ again";

/// The warning for a plan that pins `irqs` on `host`, when irqbalance
/// runs and there are any.
pub fn warning(host: &Host, irqs: &[u32]) -> Option<IrqbalanceWarning> {
    if !host.irqbalance.running {
        return None;
    }
    let first = *irqs.first()?;
    Some(IrqbalanceWarning {
        pids: host.irqbalance.pids.clone(),
        note: format!(
            "irqbalance is running and re-places IRQs every 10 s: it will undo the IRQ \
             affinity of this plan. Stop it (`systemctl disable --now irqbalance`), or ban \
             these IRQs or their CPUs in its configuration (IRQBALANCE_BANNED_CPULIST, or \
             IRQBALANCE_ARGS=\"--banirq={first} ...\" in /etc/default/irqbalance or \
             /etc/sysconfig/irqbalance). `nettune apply` refuses IRQ changes while it runs \
             unless --allow-irqbalance is given."
        ),
        irqs: irqs.to_vec(),
    })
}
