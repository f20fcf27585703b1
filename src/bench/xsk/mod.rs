//! `udp-sink --xdp`: the single-RX-queue kernel bypass as a benchmark
//! engine. An XDP program on the interface redirects the steered flow's
//! packets of one queue to an AF_XDP socket bound to that queue and passes
//! everything else to the kernel stack; one reader thread takes the
//! frames from the socket's ring and counts them like `udp-sink` does
//! (packets, `udp-flood` sequence numbers per flow), with the socket's
//! drop counters and the CPU time per packet.
//!
//! Three steps, so the caller can record the program before it is live
//! (docs/bypass.md): [`load`] checks the interface and queue, loads the
//! program and opens the socket (nothing attached yet: dropping the
//! [`Loaded`] leaves nothing behind); [`Loaded::attach`] attaches the
//! program; [`Attached::run`] receives until the duration or the stop
//! token. Dropping an [`Attached`] detaches the program (also when a panic
//! unwinds through it). Nothing here prints, exits or handles signals.

pub mod journaled;
pub mod packet;
pub mod program;
mod sink;
mod socket;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::base::driver::flow::FlowSpec;
use crate::base::driver::xdp::XdpMode;
use crate::bench::busy_poll::{BusyPoll, SocketBusyPoll};
use crate::bench::report::Interval;
use crate::bench::udp::SequenceSummary;

pub use sink::{load, Attached, Loaded};
pub use socket::{CopyMode, XskStats, FRAME_SIZE, RING_MAX, RING_MIN, RING_SIZE};

/// The name the program is loaded under (`bpftool prog`, `ip link`).
pub const PROGRAM_NAME: &str = "nettune_xsk";

/// What the sink does. Build with [`XskSinkConfig::new`], adjust, `validate()`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct XskSinkConfig {
    pub iface: String,
    /// The RX queue whose packets the socket reads.
    pub queue: u32,
    /// The packets of the queue the program redirects (the rest pass).
    pub flow: FlowSpec,
    /// Where the program runs: native (in the driver) or generic.
    pub attach: XdpMode,
    /// `None`: zero-copy if the driver can, else copy.
    pub copy: Option<CopyMode>,
    /// The reader's CPU; `None`: not pinned.
    pub pin: Option<u32>,
    /// Most frames taken from the ring at a time.
    pub batch: u32,
    /// Entries of the fill and RX rings, and frames in the UMEM (a power
    /// of two): what the socket holds while the reader is away.
    pub ring: u32,
    /// Busy polling of the socket (SO_BUSY_POLL, SO_PREFER_BUSY_POLL,
    /// SO_BUSY_POLL_BUDGET); with `prefer`, the queue's NAPI also gets
    /// [`DEFERRAL`] for the run.
    #[serde(default)]
    pub busy: BusyPoll,
    #[serde(with = "crate::bench::secs::option")]
    pub duration: Option<Duration>,
    /// The interface's network namespace.
    pub netns: Option<String>,
}

impl XskSinkConfig {
    pub fn new(iface: &str, queue: u32, flow: FlowSpec) -> XskSinkConfig {
        XskSinkConfig {
            iface: iface.to_string(),
            queue,
            flow,
            attach: XdpMode::Native,
            copy: None,
            pin: None,
            batch: 256,
            ring: RING_SIZE,
            busy: BusyPoll::default(),
            duration: Some(Duration::from_secs(10)),
            netns: None,
        }
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        if !self.ring.is_power_of_two() || !(RING_MIN..=RING_MAX).contains(&self.ring) {
            anyhow::bail!(
                "--ring '{}': give a power of two from {RING_MIN} to {RING_MAX} (the kernel's \
                 AF_XDP rings are powers of two; {RING_MAX} frames are a {} MiB UMEM)",
                self.ring,
                (u64::from(RING_MAX) * u64::from(FRAME_SIZE)) >> 20
            );
        }
        if self.batch > self.ring {
            anyhow::bail!(
                "--batch '{}' is larger than --ring '{}': a batch takes at most a ring's worth of \
                 frames",
                self.batch,
                self.ring
            );
        }
        crate::bench::within("batch", u64::from(self.batch), 1, u64::from(RING_MAX))?;
        self.busy.check_values()?;
        if self.flow.proto != crate::base::driver::flow::FlowProto::Udp {
            anyhow::bail!(
                "--flow '{}' is not UDP: udp-sink --xdp reads a UDP flow",
                self.flow
            );
        }
        if self.attach == XdpMode::Offload {
            anyhow::bail!("--xdp-mode offload is not supported: use native or generic");
        }
        Ok(())
    }
}

/// The IRQ deferral the queue's NAPI gets for a run with
/// `--prefer-busy-poll`: the values of the kernel's AF_XDP documentation
/// ("Busy polling": napi_defer_hard_irqs 2, gro_flush_timeout 200000), set
/// on that NAPI alone (netdev `napi-set`), journaled and restored. While
/// the reader polls, the NAPI stays with it instead of being run by the
/// softirq of the CPU that sends.
pub const DEFERRAL: Deferral = Deferral {
    defer_hard_irqs: 2,
    gro_flush_timeout_ns: 200_000,
};

/// A NAPI's IRQ deferral.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deferral {
    pub defer_hard_irqs: u64,
    pub gro_flush_timeout_ns: u64,
}

/// What a run did about busy polling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct XskBusyPoll {
    /// The options as the kernel holds them on the socket (read back).
    pub socket: SocketBusyPoll,
    /// The NAPI the socket's packets arrived through (SO_INCOMING_NAPI_ID
    /// at the end); `None`: none, so busy polling never engaged.
    pub napi_id: Option<u32>,
    /// The deferral set on the queue's NAPI for the run, and what it was
    /// before (restored after); `None` without `--prefer-busy-poll`.
    pub deferral: Option<Deferral>,
    pub deferral_before: Option<Deferral>,
}

/// The loaded program, as recorded before it is attached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramInfo {
    pub iface: String,
    pub id: u32,
    pub name: String,
    pub mode: XdpMode,
}

/// The XDP program's own counters over the run (a per-CPU array it
/// increments): packets it redirected to the socket, packets it passed to
/// the kernel stack (every queue, every flow but the steered one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramCounts {
    pub redirected: u64,
    pub passed: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct XskReport {
    pub command: String,
    pub iface: String,
    pub queue: u32,
    pub flow: FlowSpec,
    pub netns: Option<String>,
    pub program: ProgramInfo,
    /// `zero-copy` or `copy`: what the kernel granted.
    pub socket_mode: CopyMode,
    /// The reader's CPU, if pinned.
    pub cpu: Option<u32>,
    pub batch: u32,
    /// Entries of the fill and RX rings, and the UMEM they share, in bytes.
    pub ring: u32,
    pub umem_bytes: u64,
    /// Busy polling; `None`: off (the reader sleeps in poll when the ring
    /// is empty).
    pub busy_poll: Option<XskBusyPoll>,
    /// `duration` or `interrupted`.
    pub ended: String,
    pub duration_s: f64,
    /// From just before the first packet (the start of the reader's last
    /// wait that came back empty) to the last read: rates are over this.
    pub traffic_s: f64,
    /// Frames read from the socket.
    pub packets: u64,
    /// UDP payload bytes (as `udp-sink` counts them).
    pub bytes: u64,
    pub pps: f64,
    /// Frames that were not UDP of the flow (should be none).
    pub other_frames: u64,
    pub sequence: SequenceSummary,
    /// XDP_STATISTICS over the run.
    pub drops: XskStats,
    pub program_counts: ProgramCounts,
    /// CPU seconds the reader thread used (user + system), and per packet,
    /// as `udp-sink` reports its threads'.
    pub cpu_s: f64,
    pub cpu_ns_per_packet: Option<f64>,
    /// Soft-interrupt seconds on all CPUs over the run (/proc/stat), and
    /// per packet: where the XDP program and the copy into the socket run,
    /// with everything else the host did meanwhile; `None`: unreadable.
    pub softirq_s: Option<f64>,
    pub softirq_ns_per_packet: Option<f64>,
    pub intervals: Vec<Interval>,
}

impl XskReport {
    /// Why the run measured nothing, if it did not.
    pub fn problem(&self) -> Option<String> {
        (self.packets == 0).then(|| {
            format!(
                "udp-sink --xdp measured nothing: no packet of '{}' arrived on {} queue {} in \
                 {:.1} s ({} passed to the kernel stack); is the sender sending this flow, and \
                 does it reach queue {}?",
                self.flow,
                self.iface,
                self.queue,
                self.duration_s,
                self.program_counts.passed,
                self.queue
            )
        })
    }
}

/// The report as text, in `udp-sink`'s layout.
pub fn render(r: &XskReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let window = crate::bench::traffic::rate_window(r.traffic_s, r.duration_s);
    let _ = writeln!(
        out,
        "udp-sink --xdp: {} packets, {} bytes in {:.3} s ({:.3} s of traffic){}",
        r.packets,
        r.bytes,
        r.duration_s,
        r.traffic_s,
        crate::bench::udp::render::stopped(&r.ended)
    );
    let _ = writeln!(
        out,
        "total     {}",
        crate::bench::report::format_rate(r.packets, r.bytes, window)
    );
    let _ = writeln!(
        out,
        "path      {} queue {}{}: XDP program {} (id {}, {}), AF_XDP socket in {} mode, reader {}",
        r.iface,
        r.queue,
        r.netns
            .as_deref()
            .map(|ns| format!(" (network namespace {ns})"))
            .unwrap_or_default(),
        r.program.name,
        r.program.id,
        r.program.mode.name(),
        r.socket_mode.name(),
        r.cpu
            .map_or("not pinned".to_string(), |c| format!("on CPU {c}"))
    );
    let _ = writeln!(
        out,
        "program   {} redirected to the socket ({}), {} passed to the kernel stack",
        r.program_counts.redirected, r.flow, r.program_counts.passed
    );
    let _ = writeln!(
        out,
        "{}",
        crate::bench::udp::render::sequence_line(&r.sequence)
    );
    let _ = writeln!(
        out,
        "rings     {} entries, UMEM {} KiB, batch {}",
        r.ring,
        r.umem_bytes >> 10,
        r.batch
    );
    if let Some(b) = &r.busy_poll {
        let _ = writeln!(out, "busy poll {}", busy_text(b));
    }
    let d = &r.drops;
    let _ = writeln!(
        out,
        "drops     rx_dropped {}  rx_ring_full {}  fill ring empty {}  invalid descriptors {}",
        d.rx_dropped, d.rx_ring_full, d.rx_fill_ring_empty, d.rx_invalid_descs
    );
    let ns = |v: Option<f64>| {
        v.map_or("no packets".to_string(), |v| {
            format!("{v:.0} ns per packet")
        })
    };
    let _ = writeln!(
        out,
        "cpu       reader {:.3} s, {}; softirq (whole host) {}",
        r.cpu_s,
        ns(r.cpu_ns_per_packet),
        r.softirq_s.map_or("unknown".to_string(), |s| format!(
            "{s:.2} s, {}",
            ns(r.softirq_ns_per_packet)
        ))
    );
    out
}

/// The busy polling line: what the socket holds, the NAPI polled, the
/// deferral.
fn busy_text(b: &XskBusyPoll) -> String {
    let s = &b.socket;
    let mut text = format!("SO_BUSY_POLL {} us", s.usecs);
    if s.prefer {
        text.push_str(", SO_PREFER_BUSY_POLL");
    }
    if let Some(budget) = s.budget {
        text.push_str(&format!(", budget {budget}"));
    }
    match b.napi_id {
        Some(id) => text.push_str(&format!("; NAPI {id}")),
        None => text.push_str("; no NAPI seen: busy polling never engaged"),
    }
    if let Some(d) = &b.deferral {
        text.push_str(&format!(
            "; IRQ deferral {} polls, {} us for the run",
            d.defer_hard_irqs,
            d.gro_flush_timeout_ns / 1000
        ));
        if let Some(was) = &b.deferral_before {
            text.push_str(&format!(
                " (was {}, {} us)",
                was.defer_hard_irqs,
                was.gro_flush_timeout_ns / 1000
            ));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::driver::flow::FlowProto;

    fn config() -> XskSinkConfig {
        XskSinkConfig::new("veth0", 0, FlowSpec::any(FlowProto::Udp))
    }

    #[test]
    fn rings_are_powers_of_two_within_bounds_and_hold_a_batch() {
        assert!(config().validate().is_ok());
        for ring in [RING_MIN, 4096, RING_MAX] {
            let mut c = config();
            c.ring = ring;
            c.batch = 64;
            assert!(c.validate().is_ok(), "{ring}");
        }
        for ring in [0, 32, 1000, RING_MAX * 2] {
            let mut c = config();
            c.ring = ring;
            let err = c.validate().expect_err("bad ring").to_string();
            assert!(err.contains(&format!("--ring '{ring}'")), "{err}");
            assert!(err.contains("power of two from 64 to 65536"), "{err}");
        }
        let mut c = config();
        c.ring = 64;
        c.batch = 128;
        let err = c.validate().expect_err("batch over ring").to_string();
        assert!(
            err.contains("--batch '128' is larger than --ring '64'"),
            "{err}"
        );
    }

    #[test]
    fn busy_polling_modifiers_need_a_poll_time() {
        let mut c = config();
        c.busy = BusyPoll::new(None, true, None);
        let err = c.validate().expect_err("prefer alone").to_string();
        assert!(err.contains("--busy-poll USECS"), "{err}");
        c.busy = BusyPoll::new(Some(50), true, Some(64));
        assert!(c.validate().is_ok());
        c.busy = BusyPoll::new(Some(50), false, Some(0));
        assert!(c.validate().is_err());
    }

    #[test]
    fn the_busy_poll_line_says_what_the_socket_holds_and_whether_it_engaged() {
        let mut b = XskBusyPoll {
            socket: SocketBusyPoll {
                usecs: 50,
                prefer: true,
                budget: Some(64),
            },
            napi_id: Some(8193),
            deferral: Some(DEFERRAL),
            deferral_before: Some(Deferral {
                defer_hard_irqs: 0,
                gro_flush_timeout_ns: 0,
            }),
        };
        assert_eq!(
            busy_text(&b),
            "SO_BUSY_POLL 50 us, SO_PREFER_BUSY_POLL, budget 64; NAPI 8193; IRQ deferral 2 \
             polls, 200 us for the run (was 0, 0 us)"
        );
        b.napi_id = None;
        b.deferral = None;
        assert!(busy_text(&b).ends_with("no NAPI seen: busy polling never engaged"));
    }
}
