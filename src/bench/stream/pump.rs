//! Moving one stream's bytes: the sending loop (plain copies, MSG_ZEROCOPY
//! or sendfile) and the receiving loop. Both sides of a test use them: the
//! client under the harness's phase, the server under its test's own end.
//!
//! Sockets block, with a send/receive timeout of [`POLL`], so a loop looks
//! at its end condition at least that often and never spins. Counters are
//! plain locals, published to a [`LiveCounter`] after every call.

use std::io::{self, Read};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::ZeroCopy;
use crate::base::stop::POLL;
use crate::bench::cpu::thread_cpu;
use crate::bench::errqueue;
use crate::bench::report::LiveCounter;

/// sock_extended_err origin of MSG_ZEROCOPY completions, and the code that
/// says the kernel copied the data after all (linux/errqueue.h).
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;
/// MSG_ZEROCOPY sends not yet completed before the sender reaps: each holds
/// pinned pages and some option memory (net.core.optmem_max).
const ZEROCOPY_IN_FLIGHT: u64 = 64;
/// How long a finished sender waits for its last completions.
const ZEROCOPY_DRAIN: Duration = Duration::from_secs(1);

/// What the kernel said of the MSG_ZEROCOPY sends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZeroCopyStats {
    /// send() calls with MSG_ZEROCOPY that queued data.
    pub sends: u64,
    /// Of those, completed (their pages released).
    pub completed: u64,
    /// Completed sends the kernel reported as copied anyway
    /// (SO_EE_CODE_ZEROCOPY_COPIED): always so on loopback and veth, where
    /// the receiving socket is local and gets a copy.
    pub copied: u64,
    /// Sends that waited for completions (ENOBUFS: optmem_max reached).
    pub waits: u64,
}

/// Where a sender's bytes come from: one buffer of `size` bytes written
/// again and again (its content never changes, so a MSG_ZEROCOPY send needs
/// no wait before the next), or a file of that size for sendfile.
pub struct Source {
    mode: Option<ZeroCopy>,
    buf: Vec<u8>,
    file: Option<OwnedFd>,
}

impl Source {
    pub fn new(size: usize, mode: Option<ZeroCopy>) -> anyhow::Result<Source> {
        let file = match mode {
            Some(ZeroCopy::Sendfile) => Some(memfd(size)?),
            _ => None,
        };
        Ok(Source {
            mode,
            buf: vec![0u8; if file.is_some() { 0 } else { size }],
            file,
        })
    }

    fn size(&self) -> usize {
        self.buf.len()
    }
}

/// An anonymous in-memory file of `size` zero bytes (shared memory pages
/// that sendfile hands to the socket by reference).
fn memfd(size: usize) -> anyhow::Result<OwnedFd> {
    // SAFETY: a NUL-terminated name; flags only.
    let fd = unsafe { libc::memfd_create(c"nettune-stream".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error()).context("memfd_create for sendfile failed");
    }
    // SAFETY: a new descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = libc::off_t::try_from(size).context("--size too large for a file")?;
    // SAFETY: a valid descriptor.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len) } != 0 {
        return Err(io::Error::last_os_error()).context("cannot size the sendfile buffer");
    }
    // Touch every page now, so the first sends do not pay for faults.
    let page = vec![0u8; 64 * 1024];
    let mut off = 0usize;
    while off < size {
        let n = page.len().min(size - off);
        // SAFETY: page holds n bytes; off is within the file.
        let wrote =
            unsafe { libc::pwrite(fd.as_raw_fd(), page.as_ptr().cast(), n, off as libc::off_t) };
        if wrote <= 0 {
            return Err(io::Error::last_os_error()).context("cannot fill the sendfile buffer");
        }
        off += wrote as usize;
    }
    Ok(fd)
}

/// What a stream's thread brings back.
pub(super) enum Moved {
    Sent(Sent),
    Received(Received),
}

/// What one sending loop did.
#[derive(Debug, Clone, Default)]
pub struct Sent {
    /// Bytes the kernel accepted, over the connection's life.
    pub bytes: u64,
    /// send/sendfile calls that moved data.
    pub calls: u64,
    pub zerocopy: Option<ZeroCopyStats>,
    /// This thread's (user, system) CPU time in the loop.
    pub cpu: (Duration, Duration),
}

/// Send until `done()`, then end the connection with a FIN (after the last
/// MSG_ZEROCOPY completions, up to a second). A receiver that closed or
/// reset the connection is an error.
pub fn send(
    stream: &TcpStream,
    source: &Source,
    done: &dyn Fn() -> bool,
    live: &LiveCounter,
) -> anyhow::Result<Sent> {
    let cpu_start = thread_cpu()?;
    stream
        .set_write_timeout(Some(POLL))
        .context("cannot set SO_SNDTIMEO")?;
    let fd = stream.as_fd();
    let mut sent = Sent::default();
    let mut zc = matches!(source.mode, Some(ZeroCopy::Msg)).then(ZeroCopyStats::default);
    let size = match &source.file {
        Some(_) => file_size(source)?,
        None => source.size(),
    };
    while !done() {
        let result = match (&source.file, zc.as_mut()) {
            (Some(file), _) => sendfile(fd.as_raw_fd(), file.as_raw_fd(), size),
            (None, Some(stats)) => {
                let r = send_flags(fd.as_raw_fd(), &source.buf, libc::MSG_ZEROCOPY);
                if let Ok(n) = r {
                    if n > 0 {
                        stats.sends += 1;
                    }
                }
                if stats.sends - stats.completed >= ZEROCOPY_IN_FLIGHT {
                    reap(fd, stats);
                }
                r
            }
            (None, None) => send_flags(fd.as_raw_fd(), &source.buf, 0),
        };
        match result {
            Ok(n) => {
                sent.bytes += n as u64;
                sent.calls += 1;
                live.publish(sent.calls, sent.bytes);
            }
            Err(e) if is_retry(&e) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) && zc.is_some() => {
                // optmem_max reached: wait for completions, then go on.
                if let Some(stats) = zc.as_mut() {
                    stats.waits += 1;
                    wait_errqueue(fd, POLL);
                    reap(fd, stats);
                }
            }
            Err(e) => return Err(closed(e, "sending")),
        }
    }
    if let Some(stats) = zc.as_mut() {
        let until = Instant::now() + ZEROCOPY_DRAIN;
        while stats.completed < stats.sends && Instant::now() < until {
            wait_errqueue(fd, POLL);
            reap(fd, stats);
        }
    }
    sent.zerocopy = zc;
    // The receiver reads to this FIN: its count is then exact.
    let _ = stream.shutdown(Shutdown::Write);
    let cpu_end = thread_cpu()?;
    sent.cpu = (
        cpu_end.0.saturating_sub(cpu_start.0),
        cpu_end.1.saturating_sub(cpu_start.1),
    );
    Ok(sent)
}

fn file_size(source: &Source) -> anyhow::Result<usize> {
    let file = source
        .file
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("no sendfile buffer"))?;
    let stat = nix::sys::stat::fstat(file).context("fstat of the sendfile buffer")?;
    Ok(stat.st_size as usize)
}

/// One send(2) with MSG_NOSIGNAL (a closed peer is EPIPE, never SIGPIPE).
fn send_flags(fd: libc::c_int, buf: &[u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: buf is valid for buf.len() bytes during the call.
    let n = unsafe {
        libc::send(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            flags | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// One sendfile(2) of the whole file from its start.
fn sendfile(sock: libc::c_int, file: libc::c_int, size: usize) -> io::Result<usize> {
    let mut offset: libc::off_t = 0;
    // SAFETY: valid descriptors; offset is a live local.
    let n = unsafe { libc::sendfile(sock, file, &mut offset, size) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Take the MSG_ZEROCOPY completions queued on the socket. Each covers a
/// range of send calls (ee_info..=ee_data, numbered from 0).
fn reap(fd: std::os::fd::BorrowedFd<'_>, stats: &mut ZeroCopyStats) {
    errqueue::drain(fd, |err| {
        if err.ee_origin == SO_EE_ORIGIN_ZEROCOPY && err.ee_errno == 0 {
            let count = u64::from(err.ee_data.wrapping_sub(err.ee_info)) + 1;
            stats.completed += count;
            if err.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0 {
                stats.copied += count;
            }
        }
    });
}

/// Wait until the socket's error queue has something (POLLERR), up to
/// `timeout`.
fn wait_errqueue(fd: std::os::fd::BorrowedFd<'_>, timeout: Duration) {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: 0,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as libc::c_int) };
}

/// What one receiving loop did.
#[derive(Debug, Clone, Default)]
pub struct Received {
    /// Bytes read, over the connection's life.
    pub bytes: u64,
    /// The sender's FIN was read: `bytes` is all it sent.
    pub eof: bool,
    pub first: Option<Instant>,
    pub last: Option<Instant>,
    pub cpu: (Duration, Duration),
}

impl Received {
    /// From the first byte to the last (or to the FIN).
    pub fn seconds(&self) -> f64 {
        match (self.first, self.last) {
            (Some(first), Some(last)) => (last - first).as_secs_f64(),
            _ => 0.0,
        }
    }
}

/// How much a receiver lets queue before the kernel wakes it (SO_RCVLOWAT),
/// at most. Every wake-up is paid by the CPU that delivers the segments,
/// which on loopback and veth is the sender's: in softirq on its way out,
/// the sender's CPU runs the receiving socket's TCP and wakes the reader
/// (an inter-processor interrupt on another CPU). Woken per ~64 KiB
/// segment, one veth stream spent about half of the sending CPU in softirq
/// and ran at ~0.72x of iperf3; waking per 128 KiB it outran iperf3
/// (bench/stream.sh measures both).
pub const RCVLOWAT: usize = 128 * 1024;

/// The wake-up mark for the receivers of a test of `streams` streams,
/// reading `size` bytes at a time from senders paced at `pace` bits per
/// second: [`RCVLOWAT`], never more than one read, nor more than a
/// millisecond of a paced stream (so a slow stream's bytes are counted when
/// they arrive, not up to [`POLL`] later). With more than one stream, 1 (a
/// wake-up per segment): measured with 4 streams across veth on 2 CPUs, the
/// mark gained 7% in rate but cost 20% more CPU per GB, as every CPU was
/// busy already and none waited on wake-ups.
pub fn rcvlowat(streams: u32, size: usize, pace: Option<u64>) -> usize {
    if streams > 1 {
        return 1;
    }
    let per_ms = pace.map_or(usize::MAX, |bits| {
        usize::try_from(bits / 8 / 1000).unwrap_or(usize::MAX)
    });
    RCVLOWAT.min(size).min(per_ms).max(1)
}

/// Read `size` bytes at a time until the sender's FIN, or until
/// `give_up()`. After the first bytes (so the first-byte time is exact),
/// the kernel wakes the reader only once `lowat` bytes are queued (or the
/// FIN, or [`POLL`] passed: a read returns what it has then). A reset
/// connection is an error.
pub fn receive(
    stream: &TcpStream,
    size: usize,
    lowat: usize,
    give_up: &dyn Fn() -> bool,
    live: &LiveCounter,
) -> anyhow::Result<Received> {
    let cpu_start = thread_cpu()?;
    stream
        .set_read_timeout(Some(POLL))
        .context("cannot set SO_RCVTIMEO")?;
    let mut buf = vec![0u8; size];
    let mut got = Received::default();
    let mut reads = 0u64;
    let mut reader = stream;
    while !give_up() {
        match reader.read(&mut buf) {
            Ok(0) => {
                got.eof = true;
                got.last = Some(Instant::now());
                break;
            }
            Ok(n) => {
                let now = Instant::now();
                if got.first.is_none() && lowat > 1 {
                    // Only an optimisation: a kernel that refuses it
                    // (before Linux 4.18 TCP ignores the wake-up part)
                    // just wakes the reader more often.
                    let _ = super::sock::set_rcvlowat(stream.as_fd(), lowat);
                }
                got.first.get_or_insert(now);
                got.last = Some(now);
                got.bytes += n as u64;
                reads += 1;
                live.publish(reads, got.bytes);
            }
            Err(e) if is_retry(&e) => {}
            Err(e) => return Err(closed(e, "receiving")),
        }
    }
    let cpu_end = thread_cpu()?;
    got.cpu = (
        cpu_end.0.saturating_sub(cpu_start.0),
        cpu_end.1.saturating_sub(cpu_start.1),
    );
    Ok(got)
}

/// Timeouts (nothing moved within [`POLL`]) and signals: look again.
fn is_retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn closed(e: io::Error, doing: &str) -> anyhow::Error {
    match e.kind() {
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => {
            anyhow::anyhow!("the other side closed the connection while {doing} ({e})")
        }
        _ => anyhow::Error::new(e).context(format!("{doing} failed")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn transfer(mode: Option<ZeroCopy>) -> (Sent, Received) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let tx = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (rx, _) = listener.accept().expect("accept");
        if mode == Some(ZeroCopy::Msg) {
            super::super::sock::enable_zerocopy(tx.as_fd()).expect("SO_ZEROCOPY");
        }
        let source = Source::new(64 * 1024, mode).expect("source");
        let stop = AtomicBool::new(false);
        let (tx_live, rx_live) = (LiveCounter::default(), LiveCounter::default());
        std::thread::scope(|s| {
            let receiving = s.spawn(|| receive(&rx, 128 * 1024, RCVLOWAT, &|| false, &rx_live));
            let sending =
                s.spawn(|| send(&tx, &source, &|| stop.load(Ordering::Relaxed), &tx_live));
            std::thread::sleep(Duration::from_millis(200));
            stop.store(true, Ordering::Relaxed);
            let sent = sending.join().expect("sender").expect("send");
            let got = receiving.join().expect("receiver").expect("receive");
            (sent, got)
        })
    }

    #[test]
    fn the_receiver_counts_exactly_what_was_sent_in_every_mode() {
        for mode in [None, Some(ZeroCopy::Msg), Some(ZeroCopy::Sendfile)] {
            let (sent, got) = transfer(mode);
            assert!(sent.bytes > 0, "{mode:?}");
            assert!(got.eof, "{mode:?}");
            assert_eq!(sent.bytes, got.bytes, "{mode:?}");
            if let Some(zc) = sent.zerocopy {
                assert!(zc.sends > 0 && zc.completed == zc.sends, "{zc:?}");
                // Loopback: the kernel copies for the local receiver.
                assert_eq!(zc.copied, zc.completed, "{zc:?}");
            }
        }
    }

    #[test]
    fn the_wake_up_mark_is_at_most_one_read_and_a_millisecond_of_a_paced_stream() {
        assert_eq!(rcvlowat(1, 1 << 20, None), RCVLOWAT);
        assert_eq!(rcvlowat(1, 4096, None), 4096);
        assert_eq!(rcvlowat(1, 1 << 20, Some(1_000_000_000)), 125_000);
        assert_eq!(rcvlowat(1, 1 << 20, Some(8)), 1);
        assert_eq!(rcvlowat(4, 1 << 20, None), 1);
    }

    #[test]
    fn a_trickle_below_the_wake_up_mark_is_counted_before_the_fin() {
        use std::io::Write;
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut tx = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (rx, _) = listener.accept().expect("accept");
        let live = LiveCounter::default();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let receiving = s.spawn(|| {
                receive(
                    &rx,
                    1 << 20,
                    RCVLOWAT,
                    &|| stop.load(Ordering::Relaxed),
                    &live,
                )
            });
            tx.write_all(b"x").expect("first byte");
            std::thread::sleep(Duration::from_millis(50));
            tx.write_all(&[0u8; 1000]).expect("a trickle");
            // Far less than RCVLOWAT, and no FIN: the read timeout hands
            // the bytes over.
            let until = Instant::now() + Duration::from_secs(5);
            while live.read().1 < 1001 && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            let seen = live.read().1;
            stop.store(true, Ordering::Relaxed);
            let got = receiving.join().expect("receiver").expect("receive");
            assert_eq!(seen, 1001);
            assert_eq!(got.bytes, 1001);
            assert!(!got.eof);
        });
    }
}
