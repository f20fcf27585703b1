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
use crate::bench::report::Interval;
use crate::bench::udp::SequenceSummary;

pub use sink::{load, Attached, Loaded};
pub use socket::{CopyMode, XskStats, FRAME_SIZE, RING_SIZE};

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
            duration: Some(Duration::from_secs(10)),
            netns: None,
        }
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        crate::bench::within("batch", u64::from(self.batch), 1, u64::from(RING_SIZE))?;
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
    /// `duration` or `interrupted`.
    pub ended: String,
    pub duration_s: f64,
    /// From the first packet to the last: rates are over this.
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
    let window = crate::bench::udp::render::rate_window(r.traffic_s, r.duration_s);
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
