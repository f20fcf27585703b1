//! The values `nettune plan` writes and the names of its targets, in one
//! place: the plan engine uses them, and `nettune doctor` names them in its
//! fixes (by hand, where the plan leaves a setting alone), so the two cannot
//! drift apart. docs/profiles.md gives the reason for every value.

const KB: u64 = 1 << 10;
const MB: u64 = 1 << 20;

/// net.core.rps_sock_flow_entries for RFS (scaling.rst; Scylla perftune.py).
pub const RFS_ENTRIES: u64 = 32768;
/// busy_read / busy_poll in microseconds (tuned's network-latency profile).
pub const BUSY_POLL_US: u64 = 50;
/// haltpoll's poll window: long enough that a cross-CPU wake-up in a
/// request/response loop finds the vCPU still polling
/// (Documentation/virt/guest-halt-polling.rst).
pub const HALT_POLL_NS: u64 = 200_000;
/// pps: net.core.rmem_max, room for sockets that ask for big receive
/// buffers (Cloudflare, receiving 1M UDP packets/s).
pub const PPS_RMEM_MAX: u64 = 16 * MB;
/// pps: net.core.rmem_default, the 4 MB UDP socket buffer of
/// fasterdata.es.net's UDP tuning, for receivers that never set SO_RCVBUF
/// (Cloudflare's udpreceiver does not).
pub const PPS_RMEM_DEFAULT: u64 = 4 * MB;
/// pps: net.ipv4.udp_rmem_min, what each UDP socket keeps under udp_mem
/// pressure (Cloudflare, receiving 1M UDP packets/s).
pub const PPS_UDP_RMEM_MIN: u64 = 64 * KB;
/// pps: net.core.netdev_max_backlog, the per-CPU backlog RPS queues into
/// (bpftune raises it on drops).
pub const PPS_NETDEV_MAX_BACKLOG: u64 = 10_000;
/// pps: net.core.netdev_budget, packets per softirq round (bpftune raises
/// it on time_squeeze).
pub const PPS_NETDEV_BUDGET: u64 = 600;
/// http: net.core.somaxconn and net.ipv4.tcp_max_syn_backlog (talawah.io's
/// kernel vs DPDK HTTP tuning; tuned sets somaxconn >= 2048).
pub const HTTP_LISTEN_BACKLOG: u64 = 65535;
/// throughput: net.ipv4.tcp_mtu_probing with jumbo frames; 1, not 2
/// (fasterdata.es.net).
pub const TCP_MTU_PROBING: u64 = 1;
/// The governor the latency and throughput profiles set.
pub const GOVERNOR: &str = "performance";

/// Per-NAPI settings a profile writes with netdev napi-set (Linux 6.13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NapiValues {
    /// Empty polls after a poll that found packets before the device IRQ
    /// is re-armed.
    pub defer_hard_irqs: u64,
    /// The deferral's timer, nanoseconds: while IRQs are deferred, NAPI is
    /// polled after this long when no application polls first (and GRO
    /// holds packets until it fires).
    pub gro_flush_timeout_ns: u64,
    /// The longest IRQs stay off while an application with prefer-busy-poll
    /// epoll keeps finding events, nanoseconds.
    pub irq_suspend_timeout_ns: u64,
}

/// latency: a short deferral. After traffic the IRQ stays masked for at
/// most 2 x 20 us, so a packet nobody polls for waits 20 us at most (Eric
/// Dumazet's example timer in the commit that added napi_defer_hard_irqs);
/// measured across veth (bench/busy_poll.sh), the kernel selftest's 100 x
/// 50 us raised a 5000/s ping-pong's median from 4.5 to 20 us. IRQ
/// suspension as in the kernel's busy-poll selftest: it engages only for
/// applications that ask (epoll prefer_busy_poll). Only where busy
/// polling is on: without a poller the plan turns deferral off
/// (src/plan/napi.rs says why).
pub const LATENCY_NAPI: NapiValues = NapiValues {
    defer_hard_irqs: 2,
    gro_flush_timeout_ns: 20_000,
    irq_suspend_timeout_ns: 20_000_000,
};

/// http: the kernel's busy-poll selftest values
/// (tools/testing/selftests/net/busy_poll_test.sh): a busy request server
/// keeps IRQs off while it polls, in batches (napi.rst, "IRQ mitigation").
pub const HTTP_NAPI: NapiValues = NapiValues {
    defer_hard_irqs: 100,
    gro_flush_timeout_ns: 50_000,
    irq_suspend_timeout_ns: 20_000_000,
};

/// Buffer tiers for throughput: autotuning maximum (tcp_rmem/tcp_wmem third
/// field) and the socket-option cap (rmem_max/wmem_max), smallest first.
const BUFFER_TIERS: &[(u64, u64, &str)] = &[
    (16 * MB, 16 * MB, "tuned network-throughput"),
    (32 * MB, 64 * MB, "fasterdata: 10G host, paths up to 100 ms"),
    (
        64 * MB,
        128 * MB,
        "fasterdata: 10G up to 200 ms or 40G up to 50 ms",
    ),
    (128 * MB, 256 * MB, "fasterdata: measurement hosts"),
    (
        256 * MB,
        512 * MB,
        "fasterdata: measurement hosts, the bigger case",
    ),
    (
        1024 * MB,
        2_147_483_647,
        "fasterdata: 40/100G, buffers up to 2 GB",
    ),
];

/// The tier for `per_stream` bytes in flight: (autotuning maximum, socket
/// cap, source); the largest tier when none holds it.
pub fn buffer_tier(per_stream: u64) -> (u64, u64, &'static str) {
    BUFFER_TIERS
        .iter()
        .copied()
        .find(|(tcp, _, _)| *tcp >= per_stream)
        .or_else(|| BUFFER_TIERS.last().copied())
        .unwrap_or((16 * MB, 16 * MB, ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_tiers_hold_the_bdp() {
        // 10 Gbit/s x 50 ms = 62.5 MB in flight -> 64 MiB, cap 128 MiB.
        assert_eq!(buffer_tier(62_500_000).0, 64 << 20);
        assert_eq!(buffer_tier(62_500_000).1, 128 << 20);
        assert_eq!(buffer_tier(1).0, 16 << 20);
        // Beyond the largest tier: the largest.
        assert_eq!(buffer_tier(4 << 30).1, 2_147_483_647);
    }
}
