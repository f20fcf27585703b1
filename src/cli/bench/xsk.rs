//! `bench udp-sink --xdp`: the AF_XDP sink on the command line. The
//! program is journaled ([`crate::bench::xsk::journaled`]) and removed on
//! every exit nettune sees: the end of the run, Ctrl-C, SIGTERM, an error,
//! a panic.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::common::{finish, Lines};
use crate::base::driver::flow::{FlowProto, FlowSpec};
use crate::base::driver::xdp::XdpMode;
use crate::base::observe::Observer;
use crate::base::stop::Stop;
use crate::bench::report::Interval;
use crate::bench::xsk::journaled::{self, Journaled};
use crate::bench::xsk::{self, CopyMode, XskSinkConfig};
use crate::error::Status;

/// The AF_XDP options of `udp-sink`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct XdpArgs {
    /// Read one RX queue through AF_XDP instead of a UDP socket: an XDP
    /// program on --iface redirects the packets of --queue that match the
    /// flow (--bind's address and port, narrowed by --flow) to an AF_XDP
    /// socket and passes everything else to the kernel stack. Needs root.
    /// See docs/bypass.md.
    #[arg(long, requires_all = ["iface", "queue"])]
    pub xdp: bool,
    /// With --xdp: the interface to attach the program to.
    #[arg(long, value_name = "IFACE", requires = "xdp")]
    pub iface: Option<String>,
    /// With --xdp: the RX queue to read (the one `nettune steer` gave the
    /// flow; 0 on a single-queue interface such as veth).
    #[arg(long, value_name = "Q", requires = "xdp")]
    pub queue: Option<u32>,
    /// With --xdp: the flow, as `nettune steer --flow` takes it ('udp4
    /// dst-port 53', 'udp src-ip 10.0.0.1 dst-port 9000'); --bind's address
    /// and port are added to it.
    #[arg(long, value_name = "FLOW", requires = "xdp", value_parser = parse_flow)]
    pub flow: Option<FlowSpec>,
    /// With --xdp: where the program runs: native (in the driver, fast) or
    /// generic (after the kernel built an skb; any driver, slow).
    #[arg(long, value_enum, value_name = "MODE", default_value_t = AttachMode::Native)]
    pub xdp_mode: AttachMode,
    /// With --xdp: AF_XDP zero-copy or copy mode; auto takes zero-copy
    /// when the driver can, else copy (the report says which).
    #[arg(long, value_enum, value_name = "COPY", default_value_t = CopyArg::Auto)]
    pub xdp_copy: CopyArg,
    /// With --xdp: entries of the socket's fill and RX rings and frames of
    /// its UMEM (2048 bytes each), a power of two from 64 to 65536; default
    /// 16384 (a 32 MiB UMEM). What the socket holds while the reader is
    /// off its CPU: more frames lose fewer packets then, and touch more
    /// memory.
    #[arg(long, value_name = "N", requires = "xdp")]
    pub ring: Option<u32>,
    /// With --xdp: SO_BUSY_POLL on the AF_XDP socket, microseconds. The
    /// reader then never sleeps: when the ring is empty it polls the
    /// queue's NAPI itself with a non-blocking receive (the kernel's
    /// AF_XDP documentation, "Busy polling"). Its CPU stays fully busy.
    /// Engages only where the driver links the queue to a NAPI (the kernel
    /// gives the socket that NAPI's id at bind); a veth links none, and
    /// the report then says busy polling never engaged.
    #[arg(long, value_name = "USECS", requires = "xdp", value_parser = clap::value_parser!(u32).range(1..=i32::MAX as i64))]
    pub busy_poll: Option<u32>,
    /// With --busy-poll: SO_PREFER_BUSY_POLL, and for the run the queue's
    /// NAPI gets an IRQ deferral (defer-hard-irqs 2, gro-flush-timeout
    /// 200 us, as the AF_XDP documentation suggests; netdev napi-set,
    /// Linux 6.13+), recorded in the state directory and restored after:
    /// while busy polling engages, the reader, not a softirq, then runs the
    /// XDP program and the copy into the UMEM.
    #[arg(long, requires = "busy_poll")]
    pub prefer_busy_poll: bool,
    /// With --busy-poll: SO_BUSY_POLL_BUDGET, packets one poll may take
    /// (the kernel's default is 8; above 64 needs CAP_NET_ADMIN).
    #[arg(long, value_name = "N", requires = "busy_poll", value_parser = clap::value_parser!(u16).range(1..))]
    pub busy_poll_budget: Option<u16>,
    /// With --xdp: where the program is recorded. Default:
    /// $NETTUNE_STATE_DIR, else /var/lib/nettune.
    #[arg(long, value_name = "DIR", requires = "xdp")]
    pub state_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AttachMode {
    #[default]
    Native,
    Generic,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum CopyArg {
    #[default]
    Auto,
    ZeroCopy,
    Copy,
}

fn parse_flow(text: &str) -> Result<FlowSpec, String> {
    FlowSpec::parse(text).map_err(|e| e.to_string())
}

/// The flow the program selects: --flow, with --bind's address and port
/// (an unspecified address or port 0 adds nothing).
pub fn resolve_flow(bind: SocketAddr, flow: Option<&FlowSpec>) -> anyhow::Result<FlowSpec> {
    let mut spec = flow.cloned().unwrap_or_else(|| {
        let mut any = FlowSpec::any(FlowProto::Udp);
        any.ipv6 = bind.is_ipv6();
        any
    });
    if !bind.ip().is_unspecified() {
        if spec.ipv6 != bind.is_ipv6() {
            anyhow::bail!("--bind '{bind}' and --flow '{spec}' are of different IP versions");
        }
        match spec.dst_ip {
            Some(ip) if ip != bind.ip() => anyhow::bail!(
                "--flow says dst-ip {ip} but --bind says {}: give one, or the same",
                bind.ip()
            ),
            _ => spec.dst_ip = Some(bind.ip()),
        }
    }
    if bind.port() != 0 {
        match spec.dst_port {
            Some(port) if port != bind.port() => anyhow::bail!(
                "--flow says dst-port {port} but --bind says {}: give one, or the same",
                bind.port()
            ),
            _ => spec.dst_port = Some(bind.port()),
        }
    }
    Ok(spec)
}

/// Prints what the AF_XDP sink tells while it runs.
struct Progress(Lines);

impl Observer<Interval> for Progress {
    fn ready(&mut self, _addr: Option<SocketAddr>, detail: &str) {
        self.0.ready(detail);
    }
    fn warning(&mut self, text: &str) {
        self.0.warning(text);
    }
    fn interval(&mut self, interval: &Interval) {
        self.0.line(interval.second, &interval.line());
    }
}

/// The journaled program: dropping it (an error, a panic) removes the
/// program and closes the record, and says how to when it cannot.
struct Live(Journaled);

impl Drop for Live {
    fn drop(&mut self) {
        if let Err(e) = self.0.remove() {
            eprintln!(
                "udp-sink: warning: {}; `{}` removes the program",
                crate::error::message(&e),
                self.0.rollback_command()
            );
        }
    }
}

/// What `udp-sink --xdp` takes from the socket sink's arguments.
pub struct Basics<'a> {
    pub bind: SocketAddr,
    pub batch: u32,
    pub duration: std::time::Duration,
    pub netns: Option<String>,
    pub pin: &'a Option<super::common::CpuList>,
    pub json: bool,
}

/// The reader's CPU: --pin's first, else the CPU of the queue's IRQ (read
/// from this host; an interface in another namespace is a veth or alike,
/// without IRQs), else none.
fn reader_cpu(pin: &[u32], iface: &str, queue: u32, netns: Option<&str>) -> (Option<u32>, String) {
    if let Some(cpu) = pin.first() {
        return (Some(*cpu), format!("reader on CPU {cpu} (--pin)"));
    }
    if netns.is_some() {
        return (None, "reader not pinned".to_string());
    }
    let selection = crate::host::Selection {
        all: true,
        iface: Some(iface.to_string()),
    };
    let host = crate::gather::read_target(None, None, &selection).ok();
    match host
        .as_ref()
        .and_then(|h| h.interfaces.iter().find(|i| i.name == iface))
        .and_then(|i| i.queue_irq_cpu(queue))
    {
        Some((irq, Some(cpu))) => (
            Some(cpu),
            format!("reader on CPU {cpu}, where queue {queue}'s IRQ {irq} is delivered"),
        ),
        _ => (
            None,
            format!("reader not pinned (queue {queue} has no IRQ of its own)"),
        ),
    }
}

pub fn sink(x: &XdpArgs, args: Basics<'_>, stop: &Stop) -> anyhow::Result<Status> {
    let (Some(iface), Some(queue)) = (x.iface.clone(), x.queue) else {
        anyhow::bail!("--xdp needs --iface and --queue");
    };
    let flow = resolve_flow(args.bind, x.flow.as_ref())?;
    let mut config = XskSinkConfig::new(&iface, queue, flow);
    config.attach = match x.xdp_mode {
        AttachMode::Native => XdpMode::Native,
        AttachMode::Generic => XdpMode::Generic,
    };
    config.copy = match x.xdp_copy {
        CopyArg::Auto => None,
        CopyArg::ZeroCopy => Some(CopyMode::ZeroCopy),
        CopyArg::Copy => Some(CopyMode::Copy),
    };
    config.batch = args.batch;
    config.ring = x.ring.unwrap_or(xsk::RING_SIZE);
    config.busy =
        crate::bench::busy_poll::BusyPoll::new(x.busy_poll, x.prefer_busy_poll, x.busy_poll_budget);
    config.duration = Some(args.duration);
    config.netns = args.netns.clone();
    config.validate()?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        anyhow::bail!(
            "udp-sink --xdp loads an XDP program and needs root (CAP_BPF and CAP_NET_ADMIN); \
             run it as root"
        );
    }
    let pin = super::common::CpuList::of(args.pin);
    let (cpu, placement) = reader_cpu(&pin, &iface, queue, config.netns.as_deref());
    config.pin = cpu;
    let state = crate::cli::apply::state_dir(x.state_dir.as_deref(), None)?;
    let mut live = Live(journaled::attach(config, state, args.netns.as_deref())?);
    let mut progress = Progress(Lines::new("udp-sink", args.json));
    progress.warning_free(&format!(
        "{placement}; program recorded as state {} (`{}` removes it if this process is killed)",
        live.0.id(),
        live.0.rollback_command()
    ));
    let report = live.0.run(stop, &mut progress);
    progress.0.done();
    let removed = live.0.remove();
    let report = report?;
    removed?;
    finish(&report, args.json, xsk::render, report.problem())
}

impl Progress {
    /// A note on stderr (not a warning).
    fn warning_free(&mut self, text: &str) {
        self.0.ready(text);
    }
}
