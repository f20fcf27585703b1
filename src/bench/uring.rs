//! What the io_uring engines share: the start-up check that this kernel
//! (and this process's seccomp profile) can serve them, a ring set up for
//! one thread, and a provided-buffer ring.
//!
//! Kernel versions (io_uring(7), liburing's man pages): io_uring 5.1;
//! IORING_REGISTER_PBUF_RING (buffer rings) and multishot accept 5.19;
//! multishot recv and recvmsg 6.0; IORING_SETUP_SINGLE_ISSUER 6.0 and
//! DEFER_TASKRUN 6.1 (used when present).

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixDatagram, UnixListener, UnixStream};
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, types, IoUring};

/// A ring for one thread: completions run only when that thread waits
/// (DEFER_TASKRUN), without interrupting it (COOP_TASKRUN), where the
/// kernel has these; a plain ring otherwise.
pub fn ring(entries: u32) -> io::Result<IoUring> {
    ring_sized(entries, entries * 4)
}

/// [`ring`] with `completions` entries in the completion queue: a
/// multishot request that finds the queue full ends (its last completion
/// goes to the kernel's overflow list), so the queue must hold what a
/// thread reaps per wake-up.
pub fn ring_sized(entries: u32, completions: u32) -> io::Result<IoUring> {
    let tuned = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_coop_taskrun()
        .setup_cqsize(completions)
        .build(entries);
    match tuned {
        Ok(ring) => Ok(ring),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            IoUring::builder().setup_cqsize(completions).build(entries)
        }
        Err(e) => Err(e),
    }
}

/// Submit what is queued and run the task work that is due (a ring set up
/// with DEFER_TASKRUN runs it only in an enter that asks for completions),
/// without waiting: the completions of what has happened are posted.
pub fn submit_and_run(ring: &mut IoUring) -> io::Result<()> {
    let queued = ring.submission().len() as u32;
    // SAFETY: no argument pointer; the queued entries were pushed under
    // `push`'s contract.
    let entered = unsafe {
        ring.submitter().enter::<libc::sigset_t>(
            queued,
            0,
            io_uring::EnterFlags::GETEVENTS.bits(),
            None,
        )
    };
    match entered {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EBUSY)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether this kernel can serve the io_uring engines; the error says what
/// is missing, and which kernel added it. Checked once per process.
pub fn check() -> Result<(), String> {
    static RESULT: OnceLock<Result<(), String>> = OnceLock::new();
    RESULT.get_or_init(run_check).clone()
}

fn setup_error(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSYS) => {
            "the kernel has no io_uring (io_uring_setup: ENOSYS; it came in Linux 5.1, and some \
             kernels are built without CONFIG_IO_URING)"
                .to_string()
        }
        Some(libc::EPERM) | Some(libc::EACCES) => {
            let disabled = crate::base::Root::live()
                .read_value("/proc/sys/kernel/io_uring_disabled")
                .ok()
                .flatten()
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(0);
            if disabled > 0 {
                format!(
                    "io_uring_setup was refused ({}): kernel.io_uring_disabled is {disabled} \
                     (1: only the group in kernel.io_uring_group may, 2: nobody)",
                    e
                )
            } else {
                format!(
                    "io_uring_setup was refused ({e}): a seccomp profile blocks it (container \
                     runtimes' default profiles do)"
                )
            }
        }
        _ => format!("cannot create an io_uring instance: {e}"),
    }
}

fn run_check() -> Result<(), String> {
    let mut ring = ring(16).map_err(|e| setup_error(&e))?;
    let mut probe = io_uring::Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| format!("cannot ask io_uring which operations it has (Linux 5.6+): {e}"))?;
    for (code, name) in [
        (opcode::Accept::CODE, "IORING_OP_ACCEPT (Linux 5.5)"),
        (opcode::Recv::CODE, "IORING_OP_RECV (Linux 5.6)"),
        (opcode::RecvMsg::CODE, "IORING_OP_RECVMSG (Linux 5.3)"),
        (opcode::Send::CODE, "IORING_OP_SEND (Linux 5.6)"),
        (opcode::SendMsg::CODE, "IORING_OP_SENDMSG (Linux 5.3)"),
        (
            opcode::AsyncCancel::CODE,
            "IORING_OP_ASYNC_CANCEL (Linux 5.5)",
        ),
    ] {
        if !probe.is_supported(code) {
            return Err(format!("io_uring lacks {name}"));
        }
    }
    let mut buffers = BufRing::new(&ring, 0, 8, 256).map_err(|e| {
        format!("io_uring cannot register a provided-buffer ring (Linux 5.19): {e}")
    })?;
    let result = exercise(&mut ring, &mut buffers);
    drop(ring);
    drop(buffers);
    result
}

/// Run each multishot operation once on sockets of our own and see it
/// answer with a completion that stays armed.
fn exercise(ring: &mut IoUring, buffers: &mut BufRing) -> Result<(), String> {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let io = |what: &str, e: io::Error| format!("io_uring check: {what}: {e}");
    let name = format!(
        "nettune-uring-check-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let addr = UnixAddr::from_abstract_name(name.as_bytes()).map_err(|e| io("address", e))?;
    let listener = UnixListener::bind_addr(&addr).map_err(|e| io("listen", e))?;
    let (dgram_rx, dgram_tx) = UnixDatagram::pair().map_err(|e| io("socketpair", e))?;
    let (stream_rx, stream_tx) = UnixStream::pair().map_err(|e| io("socketpair", e))?;
    let msg: libc::msghdr = unsafe_zeroed_msghdr();
    let ops = [
        (
            opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd())).build(),
            "multishot accept (Linux 5.19)",
        ),
        (
            opcode::RecvMulti::new(types::Fd(stream_rx.as_raw_fd()), 0).build(),
            "multishot recv with provided buffers (Linux 6.0)",
        ),
        (
            opcode::RecvMsgMulti::new(types::Fd(dgram_rx.as_raw_fd()), &msg, 0).build(),
            "multishot recvmsg (Linux 6.0)",
        ),
    ];
    for (i, (entry, _)) in ops.iter().enumerate() {
        // SAFETY: `msg` and the sockets outlive the ring's use of them:
        // the ring is dropped (cancelling everything) before they are.
        unsafe {
            ring.submission()
                .push(&entry.clone().user_data(i as u64))
                .map_err(|_| "io_uring check: submission queue full".to_string())?;
        }
    }
    ring.submit().map_err(|e| io("submit", e))?;
    let _client = UnixStream::connect_addr(&addr).map_err(|e| io("connect", e))?;
    stream_tx.send_probe()?;
    dgram_tx.send(b"x").map_err(|e| io("send", e))?;
    let result = wait_armed(ring, buffers, &ops.map(|(_, what)| what));
    // The requests point at `msg` and the sockets: end them first.
    quiesce(ring);
    result
}

/// Wait until each of the `ops` (user_data = index) has completed once and
/// stayed armed.
fn wait_armed(ring: &mut IoUring, buffers: &mut BufRing, ops: &[&str; 3]) -> Result<(), String> {
    let io = |what: &str, e: io::Error| format!("io_uring check: {what}: {e}");
    let mut armed = [false; 3];
    let deadline = Instant::now() + Duration::from_secs(2);
    while armed.iter().any(|a| !a) && Instant::now() < deadline {
        let ts = types::Timespec::new().nsec(50_000_000);
        let args = types::SubmitArgs::new().timespec(&ts);
        match ring.submitter().submit_with_args(1, &args) {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR)) => {}
            Err(e) => return Err(io("wait", e)),
        }
        for cqe in ring.completion() {
            let i = cqe.user_data() as usize;
            if let Some(id) = cqueue::buffer_select(cqe.flags()) {
                buffers.recycle(id);
            }
            if cqe.result() < 0 {
                let errno = -cqe.result();
                return Err(format!(
                    "io_uring lacks {}: {}",
                    ops[i],
                    io::Error::from_raw_os_error(errno)
                ));
            }
            if !cqueue::more(cqe.flags()) {
                return Err(format!(
                    "io_uring lacks {}: it ended after one completion",
                    ops[i]
                ));
            }
            armed[i] = true;
        }
        buffers.publish();
    }
    match armed.iter().position(|a| !a) {
        Some(i) => Err(format!(
            "io_uring check: {} did not complete within 2 s",
            ops[i]
        )),
        None => Ok(()),
    }
}

trait SendProbe {
    fn send_probe(&self) -> Result<(), String>;
}

impl SendProbe for UnixStream {
    fn send_probe(&self) -> Result<(), String> {
        use std::io::Write;
        (&*self)
            .write_all(b"x")
            .map_err(|e| format!("io_uring check: write: {e}"))
    }
}

fn unsafe_zeroed_msghdr() -> libc::msghdr {
    // SAFETY: msghdr is a plain C struct; all-zero (null pointers, zero
    // lengths) is a valid value.
    unsafe { std::mem::zeroed() }
}

/// A provided-buffer ring (IORING_REGISTER_PBUF_RING): `count` buffers of
/// `size` bytes the kernel picks from for multishot receives. A completion
/// names the buffer it filled; the engine hands it back with
/// [`BufRing::recycle`] once it has used the bytes, and [`BufRing::publish`]
/// makes the returned buffers visible to the kernel in one store.
pub struct BufRing {
    /// The ring entries, page-aligned as the kernel requires.
    entries: *mut types::BufRingEntry,
    entries_layout: std::alloc::Layout,
    /// The buffers, u64 words so that each starts 8-byte aligned (control
    /// messages inside are read as structs).
    buffers: Vec<u64>,
    size: usize,
    count: u16,
    group: u16,
    /// The tail as we advance it; stored to the shared tail by `publish`.
    tail: u16,
}

impl BufRing {
    /// Register `count` (a power of two, at most 32768) buffers of `size`
    /// bytes as buffer group `group` of `ring`, all available.
    pub fn new(ring: &IoUring, group: u16, count: u16, size: usize) -> io::Result<BufRing> {
        let size = size.next_multiple_of(8);
        if !count.is_power_of_two() || count > 32768 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let bytes = usize::from(count) * std::mem::size_of::<types::BufRingEntry>();
        let layout = std::alloc::Layout::from_size_align(bytes, 4096)
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: the layout has a non-zero size.
        let entries = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<types::BufRingEntry>();
        if entries.is_null() {
            return Err(io::Error::from_raw_os_error(libc::ENOMEM));
        }
        let mut ring_buffers = BufRing {
            entries,
            entries_layout: layout,
            buffers: vec![0u64; usize::from(count) * size / 8],
            size,
            count,
            group,
            tail: 0,
        };
        // SAFETY: the entries stay allocated until drop, after the ring
        // that uses them is gone (the engines drop the BufRing last, and
        // unregister first where the ring lives on).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(entries as u64, count, group, 0)?;
        }
        for id in 0..count {
            ring_buffers.recycle(id);
        }
        ring_buffers.publish();
        Ok(ring_buffers)
    }

    pub fn group(&self) -> u16 {
        self.group
    }

    /// Buffer `id`'s first `len` bytes (what a completion said it filled).
    #[inline]
    pub fn get(&self, id: u16, len: usize) -> &[u8] {
        let words = &self.buffers[usize::from(id % self.count) * self.size / 8..];
        // SAFETY: at least `size` bytes of initialised u64 words start
        // there; any byte pattern is a valid u8.
        unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), len.min(self.size)) }
    }

    /// Give buffer `id` back (visible to the kernel after `publish`).
    #[inline]
    pub fn recycle(&mut self, id: u16) {
        let id = id % self.count;
        let slot = usize::from(self.tail & (self.count - 1));
        let addr = self.buffers.as_mut_ptr() as u64 + (usize::from(id) * self.size) as u64;
        // SAFETY: slot < count: inside the entries allocation.
        let entry = unsafe { &mut *self.entries.add(slot) };
        entry.set_addr(addr);
        entry.set_len(self.size as u32);
        entry.set_bid(id);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Make every recycled buffer available to the kernel.
    #[inline]
    pub fn publish(&mut self) {
        // SAFETY: the shared tail lives in the first entry's reserved
        // field, inside the allocation; the kernel reads it with acquire.
        unsafe {
            let tail = types::BufRingEntry::tail(self.entries) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.entries.cast(), self.entries_layout) };
    }
}

/// A raw fd for io_uring operations.
pub fn fd(raw: RawFd) -> types::Fd {
    types::Fd(raw)
}

/// Wait for at least one completion, or `timeout`; a timeout or a signal is
/// not an error (the caller looks at its stop flag).
pub fn submit_and_wait(ring: &mut IoUring, timeout: Duration) -> io::Result<()> {
    enter(ring, 1, None, timeout)
}

/// A request's user_data: the kind of request in the top byte (each
/// engine names its own kinds, `n << 56`), and for a connection's requests
/// its slot index and the slot's generation, so a completion that comes
/// after the slot was reused is recognised and ignored.
pub mod token {
    /// The bits that hold the kind.
    pub const KIND: u64 = 0xff << 56;
    const GENERATION: u32 = 0x00ff_ffff;

    pub fn make(kind: u64, index: usize, generation: u32) -> u64 {
        kind | (u64::from(generation & GENERATION) << 32) | (index as u64 & 0xffff_ffff)
    }

    pub fn kind(user_data: u64) -> u64 {
        user_data & KIND
    }

    pub fn index(user_data: u64) -> usize {
        (user_data & 0xffff_ffff) as usize
    }

    /// Whether `user_data` was made for a slot now at `generation`.
    pub fn current(user_data: u64, generation: u32) -> bool {
        ((user_data >> 32) as u32 & GENERATION) == generation & GENERATION
    }
}

/// user_data of the cancel-everything request [`quiesce`] submits.
const QUIESCE: u64 = u64::MAX - 1;

/// Cancel every request still in flight on `ring` and wait (at most a
/// second) until the kernel has said so, so that no request touches a
/// buffer after its owner drops it. Engines call this at the end of a run,
/// before dropping the ring and then their buffers.
pub fn quiesce(ring: &mut IoUring) {
    let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
        .build()
        .user_data(QUIESCE);
    // SAFETY: a cancel request references no memory of ours.
    if unsafe { ring.submission().push(&cancel) }.is_err() {
        let _ = ring.submit();
        // SAFETY: as above.
        if unsafe { ring.submission().push(&cancel) }.is_err() {
            return;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        if submit_and_wait(ring, Duration::from_millis(20)).is_err() {
            return;
        }
        if ring.completion().any(|cqe| cqe.user_data() == QUIESCE) {
            // Drain what the cancellation completed.
            let _ = submit_and_wait(ring, Duration::ZERO);
            ring.completion().for_each(drop);
            return;
        }
    }
}

/// Push `entry`, submitting first when the submission queue is full.
///
/// # Safety
/// As `SubmissionQueue::push`: whatever `entry` points at stays valid until
/// its completion.
pub unsafe fn push(ring: &mut IoUring, entry: &io_uring::squeue::Entry) -> io::Result<()> {
    if ring.submission().push(entry).is_ok() {
        return Ok(());
    }
    ring.submit()?;
    ring.submission()
        .push(entry)
        .map_err(|_| io::Error::from_raw_os_error(libc::EBUSY))
}

/// Wait for `want` completions, or, once `min_wait` has passed, for any
/// (IORING_ENTER min_wait, Linux 6.12: wake-ups coalesced the way NIC
/// interrupts are); at most `timeout`. On kernels without min_wait: for
/// one completion, as [`submit_and_wait`].
pub fn submit_and_wait_batch(
    ring: &mut IoUring,
    want: usize,
    min_wait: Duration,
    timeout: Duration,
) -> io::Result<()> {
    if !ring.params().is_feature_min_timeout() {
        return submit_and_wait(ring, timeout);
    }
    enter(ring, want, Some(min_wait), timeout)
}

/// Submit what is queued and wait; a timeout, a signal or a busy
/// completion queue just return (the caller looks again).
fn enter(
    ring: &mut IoUring,
    want: usize,
    min_wait: Option<Duration>,
    timeout: Duration,
) -> io::Result<()> {
    let ts = types::Timespec::from(timeout);
    let mut args = types::SubmitArgs::new().timespec(&ts);
    if let Some(min_wait) = min_wait {
        args = args.min_wait_usec(u32::try_from(min_wait.as_micros()).unwrap_or(u32::MAX));
    }
    match ring.submitter().submit_with_args(want.max(1), &args) {
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_carry_kind_slot_and_generation() {
        let t = token::make(3 << 56, 41, 0x0100_0007);
        assert_eq!(token::kind(t), 3 << 56);
        assert_eq!(token::index(t), 41);
        // Generations wrap at 24 bits: compared in the same width.
        assert!(token::current(t, 7));
        assert!(!token::current(t, 8));
    }

    #[test]
    fn the_check_passes_or_names_what_is_missing() {
        match check() {
            Ok(()) => {}
            Err(missing) => assert!(missing.contains("io_uring"), "{missing}"),
        }
    }
}
