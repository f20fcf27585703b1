//! `--busy-poll`, `--prefer-busy-poll`, `--busy-poll-budget`: the same three
//! flags on http-server, rr-server and rr.

use crate::bench::busy_poll::BusyPoll;

/// Busy polling: a blocking read or an epoll wait polls the NIC queue's
/// NAPI instead of sleeping until its interrupt. Needs a queue with NAPI (a
/// NIC, or veth with GRO or XDP on); loopback has none and is refused.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct BusyPollArgs {
    /// SO_BUSY_POLL microseconds on every socket: a read with nothing
    /// queued polls the device queue this long before sleeping. On Linux
    /// 6.9+ each thread's epoll instance gets the same (EPIOCSPARAMS), so
    /// epoll waits busy-poll without the host-wide net.core.busy_poll.
    /// Spends the waiting CPU on polling. Raising it needs CAP_NET_ADMIN.
    #[arg(long, value_name = "USECS", value_parser = clap::value_parser!(u32).range(1..=i32::MAX as i64))]
    pub busy_poll: Option<u32>,
    /// SO_PREFER_BUSY_POLL (Linux 5.11+; and epoll's prefer_busy_poll): while
    /// the application polls, the kernel leaves the queue to it and keeps
    /// the device IRQ masked as the NAPI's IRQ deferral allows
    /// (defer-hard-irqs, gro-flush-timeout). Meant for applications that
    /// poll under steady load; a ping-pong that sleeps between requests
    /// waits for the deferral's timer instead. Needs --busy-poll and
    /// CAP_NET_ADMIN.
    #[arg(long, requires = "busy_poll")]
    pub prefer_busy_poll: bool,
    /// SO_BUSY_POLL_BUDGET (Linux 5.11+; and epoll's busy_poll_budget):
    /// packets one poll may take (the kernel's default is 8; above 64 needs
    /// CAP_NET_ADMIN). Needs --busy-poll.
    #[arg(long, value_name = "N", requires = "busy_poll", value_parser = clap::value_parser!(u16).range(1..))]
    pub busy_poll_budget: Option<u16>,
}

impl BusyPollArgs {
    pub fn config(&self) -> BusyPoll {
        BusyPoll::new(self.busy_poll, self.prefer_busy_poll, self.busy_poll_budget)
    }
}
