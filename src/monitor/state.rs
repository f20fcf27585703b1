//! [`State`]: the settings in force while `monitor` runs, the gauges an
//! exporter publishes beside the counters (IRQ affinity, RPS on or off,
//! the root qdisc, ring sizes), taken from the host model.
//!
//! Settings change rarely, so the sampler reads them (the whole host
//! model) at its first sample, whenever an interface or IRQ appears,
//! vanishes or is re-created, and every [`super::SETTINGS_EVERY_SECS`]; in
//! between every sample carries the last reading.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::base::driver::{Channels, Rings};
use crate::host::{Host, Interface, RxQueue, TxQueue, VectorRole};

/// The settings that shape where packets go and where they can be lost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// When they were read, on the samples' clock
    /// ([`super::Sample::elapsed_secs`]).
    pub read_at_secs: f64,
    pub online_cpus: Vec<u32>,
    /// The selected interfaces.
    pub interfaces: Vec<InterfaceState>,
    /// The sysctls of the receive path, by dotted name, as the kernel
    /// shows them (see [`STATE_SYSCTLS`]); absent when not readable.
    pub sysctls: BTreeMap<String, String>,
    /// irqbalance is running: it may move IRQs while monitor watches.
    pub irqbalance_running: bool,
}

/// The sysctls [`State`] carries: backlog and budget (softnet drops and
/// squeezes), socket buffers (UDP receive errors), accept queue (listen
/// overflows), RFS.
pub const STATE_SYSCTLS: &[&str] = &[
    "net.core.netdev_max_backlog",
    "net.core.netdev_budget",
    "net.core.netdev_budget_usecs",
    "net.core.dev_weight",
    "net.core.rmem_max",
    "net.core.rmem_default",
    "net.core.somaxconn",
    "net.core.rps_sock_flow_entries",
    "net.core.busy_poll",
    "net.core.busy_read",
    "net.ipv4.tcp_max_syn_backlog",
];

/// One interface's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterfaceState {
    pub name: String,
    pub ifindex: Option<u32>,
    /// Kernel driver (`ixgbe`, `virtio_net`, `veth`).
    pub driver: Option<String>,
    pub operstate: Option<String>,
    pub speed_mbps: Option<u64>,
    pub mtu: Option<u32>,
    /// NUMA node of the device, when the kernel says.
    pub numa_node: Option<u32>,
    /// Kind of the root qdisc (`mq`, `fq`, `pfifo_fast`, `noqueue`);
    /// `None` when unknown.
    pub qdisc: Option<String>,
    /// Ring sizes (`ethtool -g`); `None` when the driver does not say.
    pub rings: Option<Rings>,
    /// Queue counts (`ethtool -l`); `None` when the driver does not say.
    pub channels: Option<Channels>,
    /// RX queues: the IRQ of each, its affinity, and RPS.
    pub rx_queues: Vec<RxQueue>,
    /// TX queues: the IRQ of each, its affinity, and XPS.
    pub tx_queues: Vec<TxQueue>,
    /// Every IRQ vector of the interface with its affinity.
    pub irqs: Vec<IrqState>,
}

/// Where one IRQ vector may and does go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqState {
    pub irq: u32,
    /// Its name in /proc/interrupts.
    pub name: String,
    pub role: VectorRole,
    pub queue: Option<u32>,
    /// smp_affinity_list: the CPUs it may be delivered to.
    pub affinity: Option<Vec<u32>>,
    /// effective_affinity_list: the CPUs it is delivered to now (`None` on
    /// kernels that do not show it).
    pub effective: Option<Vec<u32>>,
}

impl InterfaceState {
    /// RPS is on for RX queue `index`: its rps_cpus mask names a CPU.
    /// `None` when the queue or its mask is unknown.
    pub fn rps_on(&self, index: u32) -> Option<bool> {
        let queue = self.rx_queues.iter().find(|q| q.index == index)?;
        queue.rps_cpus.as_ref().map(|cpus| !cpus.is_empty())
    }

    fn from_interface(iface: &Interface) -> InterfaceState {
        let driver = &iface.driver_settings;
        InterfaceState {
            name: iface.name.clone(),
            ifindex: iface.ifindex,
            driver: iface.driver.clone(),
            operstate: iface.operstate.clone(),
            speed_mbps: iface.speed_mbps,
            mtu: iface.mtu,
            numa_node: iface.numa_node,
            qdisc: iface.root_qdisc.value().map(|q| q.kind.clone()),
            rings: driver.rings.value().copied(),
            channels: driver.channels.value().copied(),
            rx_queues: iface.rx_queues.clone(),
            tx_queues: iface.tx_queues.clone(),
            irqs: iface
                .irq_vectors
                .iter()
                .map(|v| IrqState {
                    irq: v.irq,
                    name: v.name.clone(),
                    role: v.role,
                    queue: v.queue,
                    affinity: v.affinity.clone(),
                    effective: v.effective.clone(),
                })
                .collect(),
        }
    }
}

impl State {
    /// The settings of `host`, read at `read_at_secs`.
    pub fn from_host(host: &Host, read_at_secs: f64) -> State {
        State {
            read_at_secs,
            online_cpus: host.online_cpus.clone(),
            interfaces: host
                .interfaces
                .iter()
                .map(InterfaceState::from_interface)
                .collect(),
            sysctls: STATE_SYSCTLS
                .iter()
                .filter_map(|name| Some((name.to_string(), host.sysctls.get(*name)?.clone())))
                .collect(),
            irqbalance_running: host.irqbalance.running,
        }
    }

    /// The interface named `name`, if selected.
    pub fn interface(&self, name: &str) -> Option<&InterfaceState> {
        self.interfaces.iter().find(|i| i.name == name)
    }

    /// A sysctl as one number.
    pub fn sysctl_u64(&self, name: &str) -> Option<u64> {
        self.sysctls.get(name)?.trim().parse().ok()
    }
}
