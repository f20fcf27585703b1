//! An AF_XDP socket bound to one RX queue, receive side only
//! (Documentation/networking/af_xdp.rst): a UMEM of fixed-size frames, the
//! fill ring (frames handed to the kernel) and the RX ring (frames with a
//! packet in them), both memory-mapped and shared with the kernel as
//! single-producer single-consumer rings. The completion ring is required
//! to bind and stays unused (nothing is sent).
//!
//! Zero-copy (the driver DMAs into the UMEM) is asked for first; a driver
//! that cannot do it gets copy mode (the kernel copies each frame in).
//! All unsafe code of the sink is here: the mappings and the ring indexes.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// Bytes per UMEM frame: the smallest chunk AF_XDP takes, room for a
/// 1500-byte frame.
pub const FRAME_SIZE: u32 = 2048;
/// Entries of the fill and RX rings (a power of two), and frames in the
/// UMEM (32 MiB), unless `--ring` says otherwise: 160 ms of packets at
/// 100k packets/s, so a reader kept off its CPU for a while (a shared CPU,
/// a scheduler tick) loses nothing. With 4096 a paced 100k/s flood lost
/// half its packets on a loaded 2-vCPU VM.
pub const RING_SIZE: u32 = 16384;
/// The smallest and largest `--ring` (the largest: a 128 MiB UMEM).
pub const RING_MIN: u32 = 64;
pub const RING_MAX: u32 = 65536;
/// The completion ring must exist; nothing is sent.
const COMPLETION_SIZE: u32 = 64;

/// How the socket receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CopyMode {
    /// The driver writes frames straight into the UMEM.
    ZeroCopy,
    /// The kernel copies each frame into the UMEM.
    Copy,
}

impl CopyMode {
    pub fn name(self) -> &'static str {
        match self {
            CopyMode::ZeroCopy => "zero-copy",
            CopyMode::Copy => "copy",
        }
    }
}

/// A memory mapping, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    fn anonymous(len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh private anonymous mapping; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        Mapping::checked(ptr, len)
    }

    fn of_socket(fd: &OwnedFd, len: usize, offset: u64) -> io::Result<Mapping> {
        // SAFETY: a shared mapping of the socket's ring at the kernel's
        // offset; the kernel checks the length against the ring.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        Mapping::checked(ptr, len)
    }

    fn checked(ptr: *mut libc::c_void, len: usize) -> io::Result<Mapping> {
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(ptr.cast()).ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        Ok(Mapping { ptr, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// One mapped ring: producer and consumer indexes, flags, descriptors.
struct Ring {
    map: Mapping,
    producer: usize,
    consumer: usize,
    flags: usize,
    desc: usize,
    mask: u32,
}

impl Ring {
    fn map(
        fd: &OwnedFd,
        offsets: &libc::xdp_ring_offset,
        size: u32,
        entry: usize,
        pgoff: u64,
    ) -> io::Result<Ring> {
        let len = offsets.desc as usize + size as usize * entry;
        Ok(Ring {
            map: Mapping::of_socket(fd, len, pgoff)?,
            producer: offsets.producer as usize,
            consumer: offsets.consumer as usize,
            flags: offsets.flags as usize,
            desc: offsets.desc as usize,
            mask: size - 1,
        })
    }

    fn index(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: the kernel's offsets lie inside the mapping, 4-aligned;
        // the index is shared with the kernel and only accessed atomically.
        unsafe { &*self.map.ptr.as_ptr().add(offset).cast::<AtomicU32>() }
    }

    fn needs_wakeup(&self) -> bool {
        self.index(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

/// A packet in the RX ring: where it is in the UMEM and how long.
#[derive(Debug, Clone, Copy)]
struct Desc {
    addr: u64,
    len: u32,
}

/// An AF_XDP socket bound to one queue, with its UMEM and rings.
pub struct Xsk {
    fd: OwnedFd,
    umem: Mapping,
    fill: Ring,
    rx: Ring,
    /// The completion ring, mapped because the kernel requires it.
    _completion: Ring,
    /// Frames taken from the RX ring and not yet given back to the fill
    /// ring (our private copy of the fill producer).
    fill_producer: u32,
    /// Entries of the fill and RX rings, and frames in the UMEM.
    pub ring: u32,
    pub mode: CopyMode,
}

// SAFETY: the mappings belong to this socket alone; the rings are only
// touched through &mut self (one thread at a time) and atomics.
unsafe impl Send for Xsk {}

fn sockopt<T>(fd: &OwnedFd, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: value is a valid T of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The socket's counters (XDP_STATISTICS).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct XskStats {
    /// Dropped for reasons other than a full ring or an invalid descriptor.
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    /// Dropped because the RX ring was full (the reader fell behind).
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty (no frame to put a packet in).
    pub rx_fill_ring_empty: u64,
}

impl XskStats {
    /// What happened since `before` (counters only grow while the socket
    /// lives).
    pub fn since(&self, before: &XskStats) -> XskStats {
        XskStats {
            rx_dropped: self.rx_dropped.saturating_sub(before.rx_dropped),
            rx_invalid_descs: self
                .rx_invalid_descs
                .saturating_sub(before.rx_invalid_descs),
            rx_ring_full: self.rx_ring_full.saturating_sub(before.rx_ring_full),
            rx_fill_ring_empty: self
                .rx_fill_ring_empty
                .saturating_sub(before.rx_fill_ring_empty),
        }
    }
}

impl Xsk {
    /// A socket on `ifindex` queue `queue` with rings of `ring` entries
    /// (a power of two) and as many frames: zero-copy if the driver can,
    /// else copy mode (or only `only` when given).
    pub fn open(ifindex: u32, queue: u32, only: Option<CopyMode>, ring: u32) -> io::Result<Xsk> {
        let modes: &[CopyMode] = match only {
            Some(CopyMode::ZeroCopy) => &[CopyMode::ZeroCopy],
            Some(CopyMode::Copy) => &[CopyMode::Copy],
            None => &[CopyMode::ZeroCopy, CopyMode::Copy],
        };
        let mut last = io::Error::from_raw_os_error(libc::EINVAL);
        for &mode in modes {
            match Xsk::open_in(ifindex, queue, mode, ring) {
                Ok(xsk) => return Ok(xsk),
                // A driver without zero-copy refuses the bind.
                Err(e) if only.is_none() && mode == CopyMode::ZeroCopy => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    fn open_in(ifindex: u32, queue: u32, mode: CopyMode, ring: u32) -> io::Result<Xsk> {
        // SAFETY: socket(2) with constant arguments; the result is checked.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem = Mapping::anonymous(FRAME_SIZE as usize * ring as usize)?;
        // SAFETY: xdp_umem_reg is a plain C struct; zero is valid.
        let mut reg: libc::xdp_umem_reg = unsafe { std::mem::zeroed() };
        reg.addr = umem.ptr.as_ptr() as u64;
        reg.len = umem.len as u64;
        reg.chunk_size = FRAME_SIZE;
        sockopt(&fd, libc::XDP_UMEM_REG, &reg)?;
        sockopt(&fd, libc::XDP_UMEM_FILL_RING, &ring)?;
        sockopt(&fd, libc::XDP_UMEM_COMPLETION_RING, &COMPLETION_SIZE)?;
        sockopt(&fd, libc::XDP_RX_RING, &ring)?;
        // SAFETY: plain C struct; zero is valid.
        let mut offsets: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        read_opt(&fd, libc::XDP_MMAP_OFFSETS, &mut offsets)?;
        let rx = Ring::map(
            &fd,
            &offsets.rx,
            ring,
            std::mem::size_of::<libc::xdp_desc>(),
            libc::XDP_PGOFF_RX_RING as u64,
        )?;
        let fill = Ring::map(&fd, &offsets.fr, ring, 8, libc::XDP_UMEM_PGOFF_FILL_RING)?;
        let completion = Ring::map(
            &fd,
            &offsets.cr,
            COMPLETION_SIZE,
            8,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
        )?;
        let mut xsk = Xsk {
            fd,
            umem,
            fill,
            rx,
            _completion: completion,
            fill_producer: 0,
            ring,
            mode,
        };
        // Every frame to the kernel before binding.
        for frame in 0..ring {
            xsk.fill_slot(frame, u64::from(frame * FRAME_SIZE));
        }
        xsk.fill_producer = ring;
        xsk.fill
            .index(xsk.fill.producer)
            .store(ring, Ordering::Release);
        // SAFETY: sockaddr_xdp is a plain C struct; zero is valid.
        let mut addr: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
        addr.sxdp_family = libc::AF_XDP as u16;
        addr.sxdp_ifindex = ifindex;
        addr.sxdp_queue_id = queue;
        addr.sxdp_flags = libc::XDP_USE_NEED_WAKEUP
            | match mode {
                CopyMode::ZeroCopy => libc::XDP_ZEROCOPY,
                CopyMode::Copy => libc::XDP_COPY,
            };
        // SAFETY: a valid sockaddr_xdp of the size passed.
        let rc = unsafe {
            libc::bind(
                xsk.fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        // What the kernel really did.
        let options: libc::xdp_options = getsockopt_options(&xsk.fd)?;
        xsk.mode = if options.flags & libc::XDP_OPTIONS_ZEROCOPY != 0 {
            CopyMode::ZeroCopy
        } else {
            CopyMode::Copy
        };
        Ok(xsk)
    }

    /// The descriptor to put in the XSKMAP.
    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    fn fill_slot(&mut self, index: u32, addr: u64) {
        let slot = self.fill.desc + 8 * (index & self.fill.mask) as usize;
        // SAFETY: slot lies inside the fill ring's descriptor array; only
        // we write descriptors the kernel has not been given yet.
        unsafe {
            self.fill
                .map
                .ptr
                .as_ptr()
                .add(slot)
                .cast::<u64>()
                .write_volatile(addr)
        };
    }

    /// Packets in the RX ring now, up to `max`; `handle` sees each frame's
    /// bytes, then the frames go back to the fill ring. Returns how many.
    pub fn receive(&mut self, max: u32, mut handle: impl FnMut(&[u8])) -> u32 {
        let consumer = self.rx.index(self.rx.consumer).load(Ordering::Relaxed);
        let producer = self.rx.index(self.rx.producer).load(Ordering::Acquire);
        let n = producer.wrapping_sub(consumer).min(max);
        for i in 0..n {
            let at = self.rx.desc
                + std::mem::size_of::<libc::xdp_desc>()
                    * (consumer.wrapping_add(i) & self.rx.mask) as usize;
            // SAFETY: `at` lies inside the RX ring's descriptors, published
            // by the kernel before its producer store (Acquire above).
            let desc = unsafe {
                let d = self
                    .rx
                    .map
                    .ptr
                    .as_ptr()
                    .add(at)
                    .cast::<libc::xdp_desc>()
                    .read_volatile();
                Desc {
                    addr: d.addr,
                    len: d.len,
                }
            };
            let start = desc.addr as usize;
            let end = start.saturating_add(desc.len as usize);
            if end <= self.umem.len {
                // SAFETY: inside our UMEM; the kernel does not write this
                // frame until it is back in the fill ring.
                let frame = unsafe {
                    std::slice::from_raw_parts(self.umem.ptr.as_ptr().add(start), desc.len as usize)
                };
                handle(frame);
            }
            let base = desc.addr - desc.addr % u64::from(FRAME_SIZE);
            let index = self.fill_producer;
            self.fill_slot(index, base);
            self.fill_producer = self.fill_producer.wrapping_add(1);
        }
        if n > 0 {
            self.rx
                .index(self.rx.consumer)
                .store(consumer.wrapping_add(n), Ordering::Release);
            self.fill
                .index(self.fill.producer)
                .store(self.fill_producer, Ordering::Release);
        }
        n
    }

    /// Kick the driver when the kernel asks for it (XDP_USE_NEED_WAKEUP):
    /// with zero-copy, a driver that found the fill ring empty waits for
    /// this before it receives again.
    pub fn wake_if_needed(&self) {
        if self.fill.needs_wakeup() {
            self.kick();
        }
    }

    /// A zero-length, non-blocking receive: wakes the driver, and with
    /// SO_BUSY_POLL set, polls the queue's NAPI once (up to the busy-poll
    /// budget) in this thread (af_xdp.rst, "Busy polling").
    pub fn kick(&self) {
        // SAFETY: a zero-length, non-blocking receive on our socket.
        unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// The socket, for socket-level options.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.fd)
    }

    /// Wait up to `timeout_ms` for packets (poll also wakes the driver).
    pub fn wait(&self, timeout_ms: i32) -> io::Result<()> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(())
    }

    /// XDP_STATISTICS.
    pub fn stats(&self) -> io::Result<XskStats> {
        let s: libc::xdp_statistics = getsockopt_stats(&self.fd)?;
        Ok(XskStats {
            rx_dropped: s.rx_dropped,
            rx_invalid_descs: s.rx_invalid_descs,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty: s.rx_fill_ring_empty_descs,
        })
    }
}

fn getsockopt_options(fd: &OwnedFd) -> io::Result<libc::xdp_options> {
    // SAFETY: plain C struct; zero is valid.
    let mut value: libc::xdp_options = unsafe { std::mem::zeroed() };
    read_opt(fd, libc::XDP_OPTIONS, &mut value)?;
    Ok(value)
}

fn getsockopt_stats(fd: &OwnedFd) -> io::Result<libc::xdp_statistics> {
    // SAFETY: plain C struct; zero is valid.
    let mut value: libc::xdp_statistics = unsafe { std::mem::zeroed() };
    read_opt(fd, libc::XDP_STATISTICS, &mut value)?;
    Ok(value)
}

fn read_opt<T>(fd: &OwnedFd, name: libc::c_int, value: &mut T) -> io::Result<()> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: a writable T of the size passed.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            name,
            (value as *mut T).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
