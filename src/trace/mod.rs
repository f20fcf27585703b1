//! Why and where the kernel drops packets, and where the receive path
//! spends its time, from the kernel's own tracepoints: BPF programs on
//! raw tracepoints count in per-CPU maps, user space reads the maps each
//! interval. No per-packet event crosses to user space.
//!
//! - [`drops`]: `skb:kfree_skb` per drop reason, CPU, kernel location and
//!   packet protocol; each reason placed in a [`Layer`] of the path with
//!   its fix ([`catalog`]).
//! - [`softirq`]: NET_RX softirq runs, the wait from raise to entry and
//!   the run time per CPU (`irq:softirq_raise/entry/exit`), and per NAPI
//!   instance the polls, packets per poll and the share of polls that
//!   used the whole budget (`napi:napi_poll`).
//!
//! Both are library parts in the shape of the bench engines: open a
//! tracer (everything the user gave is checked before anything is loaded
//! into the kernel), then take a snapshot per interval ([`Tracer::sample`],
//! what a monitor or `doctor --interval` calls on its own clock) and the
//! totals at the end ([`Tracer::totals`]), or let [`run`] do the loop until
//! a duration or a [`Stop`]; nothing here prints or exits. Errors are
//! [`TraceError`]s, so a caller can tell bad input from a kernel or a
//! permission that does not allow tracing, and degrade to its counters.
//!
//! What is left in the kernel: nothing once the tracer is dropped or the
//! process ends, whatever the way (kill -9 included). Each program is
//! attached through BPF_RAW_TRACEPOINT_OPEN, whose attachment is a file
//! descriptor; the programs and maps are held only by descriptors (and by
//! each other), never pinned in a BPF filesystem. Closing the descriptors,
//! which the kernel does for a process that dies, detaches the programs
//! and frees the programs and maps. Two tracers at once each have their
//! own programs and maps: the kernel runs every program attached to a
//! tracepoint.
//!
//! [`Layer`]: crate::base::drop_layer::Layer
//! [`Stop`]: crate::base::stop::Stop

pub mod catalog;
pub mod drops;
pub mod kallsyms;
pub mod layout;
pub mod maps;
pub mod programs;
pub mod reasons;
pub mod scope;
pub mod softirq;
pub mod source;

use std::io;
use std::os::fd::OwnedFd;

use crate::base::bpf::{self, btf::Btf};
use crate::base::Root;
use crate::error::KernelError;

pub use drops::{DropInterval, DropRow, DropTracer, DropsConfig, DropsReport};
pub use softirq::{SoftirqConfig, SoftirqInterval, SoftirqReport, SoftirqTracer};

/// Where the kernel keeps its BTF.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";
/// More than any kernel's BTF (a distribution kernel's is ~6 MiB).
const MAX_BTF_BYTES: u64 = 256 << 20;

/// Why a tracer could not start or go on. The message is one line that
/// says what and what to do.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// What the user gave is wrong: a reason, namespace or interface that
    /// does not exist, a filter this kernel cannot apply.
    #[error("{0}")]
    Input(String),
    /// Not allowed to load BPF programs.
    #[error("{0}")]
    Permission(String),
    /// The kernel lacks something (a tracepoint, drop reasons, BTF).
    #[error("{0}")]
    Unsupported(String),
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// A map could not be read.
    #[error("cannot read the tracer's counters: {0}")]
    Read(io::Error),
}

/// The kernel's BTF, or why there is none (a note for the user).
pub fn read_btf(root: &Root) -> Result<Btf, String> {
    let bytes = match root.read_bytes_limited(VMLINUX_BTF, MAX_BTF_BYTES) {
        Ok(bytes) => bytes,
        Err(e) => {
            return Err(format!(
            "{e} (the kernel needs CONFIG_DEBUG_INFO_BTF for the views that read its structures)"
        ))
        }
    };
    Btf::parse(bytes)
        .map_err(|e| format!("{} is malformed: {e}", root.shown(VMLINUX_BTF).display()))
}

/// The error for a failed bpf(2) call: no permission is said as such.
fn bpf_error(what: &str, e: io::Error) -> TraceError {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => TraceError::Permission(format!(
            "cannot {what}: {e}; tracing loads BPF programs, which needs root (CAP_BPF and CAP_PERFMON)"
        )),
        _ => TraceError::Unsupported(format!("cannot {what}: {e}")),
    }
}

/// A loaded program attached to raw tracepoint `tracepoint`: both
/// descriptors, dropped together.
#[derive(Debug)]
pub struct Attached {
    _link: OwnedFd,
    _prog: OwnedFd,
}

/// Load `insns` and attach them to `tracepoint`: as a BTF-typed tracing
/// program (tp_btf, whose loads of kernel memory are checked against the
/// kernel's types) when `btf_id` names the tracepoint's `btf_trace_NAME`
/// type, else as a raw-tracepoint program.
fn attach(
    tracepoint: &str,
    name: &str,
    insns: &[u64],
    btf_id: Option<u32>,
) -> Result<Attached, TraceError> {
    let (prog_type, expected_attach_type) = match btf_id {
        Some(_) => (bpf::BPF_PROG_TYPE_TRACING, bpf::BPF_TRACE_RAW_TP),
        None => (bpf::BPF_PROG_TYPE_RAW_TRACEPOINT, 0),
    };
    let prog = bpf::prog_load(&bpf::Program {
        prog_type,
        expected_attach_type,
        attach_btf_id: btf_id.unwrap_or(0),
        insns,
        name,
        license: programs::LICENSE,
        what: "tracing",
    })
    .map_err(|r| match r.errno.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => bpf_error("load the tracing program", r.errno),
        _ => TraceError::Unsupported(format!("{r}")),
    })?;
    let by_name = btf_id.is_none().then_some(tracepoint);
    let link = bpf::raw_tracepoint_open(by_name, &prog).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT) => TraceError::Unsupported(format!(
            "this kernel has no tracepoint {tracepoint} to attach to"
        )),
        _ => bpf_error(&format!("attach to the tracepoint {tracepoint}"), e),
    })?;
    Ok(Attached {
        _link: link,
        _prog: prog,
    })
}

/// Attach the program `build` makes for direct loads as a tp_btf program;
/// if the kernel refuses that (an older verifier), the one it makes for
/// bpf_probe_read_kernel as a raw-tracepoint program, with a note saying
/// so. Permission errors are not retried.
fn attach_best(
    tracepoint: &str,
    name: &str,
    btf_id: Option<u32>,
    build: impl Fn(programs::Access) -> Result<Vec<u64>, String>,
    notes: &mut Vec<String>,
) -> Result<Attached, TraceError> {
    let assemble = |access| {
        build(access).map_err(|e| {
            TraceError::Unsupported(format!("cannot assemble the {tracepoint} program: {e}"))
        })
    };
    if let Some(id) = btf_id {
        match attach(
            tracepoint,
            name,
            &assemble(programs::Access::Direct)?,
            Some(id),
        ) {
            Ok(attached) => return Ok(attached),
            Err(TraceError::Unsupported(why)) => notes.push(format!(
                "{tracepoint}: the typed (tp_btf) program was refused, reading with \
                 bpf_probe_read_kernel instead, which costs more per event: {why}"
            )),
            Err(e) => return Err(e),
        }
    }
    attach(
        tracepoint,
        name,
        &assemble(programs::Access::ProbeRead)?,
        None,
    )
}

/// The possible CPUs (per-CPU map values come one per possible CPU, in
/// this order).
fn possible_cpus(root: &Root) -> Result<Vec<u32>, TraceError> {
    let cpus = crate::host::topology::possible_cpus(root)?;
    if cpus.is_empty() {
        return Err(TraceError::Unsupported(
            "/sys/devices/system/cpu/possible lists no CPU".to_string(),
        ));
    }
    Ok(cpus)
}

/// A tracer as a monitor or a run drives it: a snapshot per interval,
/// the totals at the end.
pub trait Tracer {
    /// What one interval saw.
    type Interval;
    /// What the whole run saw.
    type Report;
    /// What happened since the last snapshot (or the start).
    fn sample(&mut self) -> Result<Self::Interval, TraceError>;
    /// Everything from the start up to the last snapshot.
    fn totals(&mut self) -> Result<Self::Report, TraceError>;
}

/// Take a snapshot every `interval` until `duration` has passed or `stop`
/// is triggered (then once more, for the last part), giving each to
/// `observer`; the report covers the whole run.
pub fn run<T: Tracer>(
    tracer: &mut T,
    interval: std::time::Duration,
    duration: Option<std::time::Duration>,
    stop: &crate::base::stop::Stop,
    observer: &mut dyn crate::base::observe::Observer<T::Interval>,
) -> Result<T::Report, TraceError> {
    use std::time::{Duration, Instant};
    let interval = interval.max(Duration::from_millis(10));
    let start = Instant::now();
    let end = duration.map(|d| start + d);
    let mut next = start + interval;
    loop {
        let until = end.map_or(next, |e| next.min(e));
        // A tracer only waits between snapshots: look at the stop token
        // less often than an engine does.
        let stopped = stop.sleep_until_polling(until, Duration::from_millis(50));
        let snapshot = tracer.sample()?;
        observer.interval(&snapshot);
        if stopped || end.is_some_and(|e| Instant::now() >= e) {
            return tracer.totals();
        }
        next += interval;
    }
}
