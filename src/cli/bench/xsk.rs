//! `bench udp-sink --xdp`: the AF_XDP sink on the command line. The
//! program is recorded in the state directory before it is attached, and
//! removed (and the record closed) on every exit nettune sees: the end of
//! the run, Ctrl-C, SIGTERM, an error, a panic. After a kill -9 the record
//! stays: `nettune doctor` reports the program and `nettune rollback`
//! removes it.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::{finish, Lines};
use crate::apply::journal::{Journal, StateDir};
use crate::apply::{self, XdpRecord};
use crate::base::driver::flow::{FlowProto, FlowSpec};
use crate::base::driver::xdp::XdpMode;
use crate::base::observe::Observer;
use crate::base::stop::Stop;
use crate::bench::report::Interval;
use crate::bench::xsk::{self, Attached, CopyMode, XskSinkConfig};
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

/// The program attached and its record: dropping it (end, error, panic)
/// detaches the program and closes the record.
struct Live {
    attached: Attached,
    state: StateDir,
    journal: Journal,
}

impl Live {
    /// Detach and close the record; an error leaves the record for
    /// `rollback`.
    fn remove(&mut self) -> anyhow::Result<()> {
        if self.journal.status != apply::StateStatus::Complete {
            return Ok(());
        }
        self.attached.detach()?;
        // Another apply or rollback may hold the lock a moment.
        let mut last = None;
        for _ in 0..50 {
            match self.state.lock() {
                Ok(_lock) => return apply::xdp_removed(&self.state, &mut self.journal),
                Err(e) => last = Some(e),
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("cannot lock the state directory")))
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            eprintln!(
                "udp-sink: warning: {}; `{}` removes the program",
                crate::error::message(&e),
                self.state.command(&format!("rollback {}", self.journal.id))
            );
        }
    }
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

pub fn sink(args: &super::SinkArgs, stop: &Stop) -> anyhow::Result<Status> {
    let x = &args.xdp;
    let socket_only = args.threads != 1
        || args.reuseport
        || args.rcvbuf.is_some()
        || args.gro
        || args.engine != crate::bench::backend::Backend::Epoll;
    if socket_only {
        anyhow::bail!(
            "--threads, --reuseport, --rcvbuf, --gro and --engine do not apply to --xdp: one \
             reader takes the queue's frames from the AF_XDP socket's ring"
        );
    }
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
    let pin = super::CpuList::of(&args.pin);
    let (cpu, placement) = reader_cpu(&pin, &iface, queue, config.netns.as_deref());
    config.pin = cpu;
    let state = crate::cli::apply::state_dir(x.state_dir.as_deref(), None)?;
    let loaded = xsk::load(config)?;
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
        apply::record_xdp(&state, record, args.netns.as_deref())?
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
    let mut live = Live {
        attached,
        state,
        journal,
    };
    let mut progress = Progress(Lines::new("udp-sink", args.json));
    progress.warning_free(&format!(
        "{placement}; program recorded as state {} (`{}` removes it if this process is killed)",
        live.journal.id,
        live.state.command(&format!("rollback {}", live.journal.id))
    ));
    let report = live.attached.run(stop, &mut progress);
    progress.0.done();
    let removed = live.remove();
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
