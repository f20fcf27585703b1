//! The SIOCETHTOOL transport that every ethtool file shares: the
//! [`LiveEthtool`] handle (each of `ethtool.rs`, `ethtool_set.rs` and
//! `ntuple.rs` implements one driver trait on it), the interface name an
//! `ifreq` carries, and the socket that runs one command.
//!
//! Each command is a struct from `linux/ethtool.h` that the kernel reads and
//! rewrites in place; `ifreq.ifr_data` points at it.

use std::ffi::c_void;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};

/// Reads driver settings from the running kernel, in the calling thread's
/// network namespace.
#[derive(Debug, Clone, Copy, Default)]
pub struct LiveEthtool;

/// An interface name as `ifreq` carries it; `None` when no interface can have it.
pub(crate) struct IfName([libc::c_char; libc::IFNAMSIZ]);

impl IfName {
    pub(crate) fn new(name: &str) -> Option<IfName> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.bytes().any(|b| b == 0) {
            return None;
        }
        let mut raw = [0; libc::IFNAMSIZ];
        for (dst, src) in raw.iter_mut().zip(name.bytes()) {
            *dst = src as libc::c_char;
        }
        Some(IfName(raw))
    }
}

/// A fixed-size command struct, exactly as large as the kernel's.
pub(super) trait FixedCommand: Default {}

pub(super) fn read_u32(buf: &[u8], offset: usize) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&buf[offset..offset + 4]);
    u32::from_ne_bytes(word)
}

pub(super) fn write_u32(buf: &mut [u8], offset: usize, value: u32) {
    buf[offset..offset + 4].copy_from_slice(&value.to_ne_bytes());
}

pub(super) struct EthtoolSocket {
    fd: OwnedFd,
}

impl EthtoolSocket {
    /// Any socket will do for SIOCETHTOOL; it names the network namespace.
    pub(super) fn open() -> io::Result<EthtoolSocket> {
        let fd = socket(
            AddressFamily::Inet,
            SockType::Datagram,
            SockFlag::SOCK_CLOEXEC,
            None,
        )?;
        Ok(EthtoolSocket { fd })
    }

    /// Run one ethtool command on `iface`; the kernel reads and rewrites
    /// the command buffer at `command`. Returns the errno on failure.
    ///
    /// # Safety
    /// `command` must point to a writable buffer at least as large as what
    /// the kernel writes back for the command number in its first word.
    pub(super) unsafe fn call(&self, iface: &IfName, command: *mut c_void) -> Result<(), i32> {
        // SAFETY: ifreq is plain old data; all-zero is a valid value.
        let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
        request.ifr_name = iface.0;
        request.ifr_ifru.ifru_data = command.cast();
        // SAFETY: request is a valid ifreq; the caller vouches for command.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::SIOCETHTOOL as _, &mut request) };
        if rc < 0 {
            Err(io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO))
        } else {
            Ok(())
        }
    }

    /// A fixed-size command, returned as the kernel filled it in.
    pub(super) fn fixed<T: FixedCommand>(&self, iface: &IfName, cmd: u32) -> Result<T, i32> {
        let mut command = T::default();
        // Every command struct starts with its `u32 cmd`.
        let raw: *mut T = &mut command;
        // SAFETY: T is a #[repr(C)] struct exactly the kernel's size (checked
        // above) with the u32 command number first; cmd names that struct.
        unsafe {
            raw.cast::<u32>().write(cmd);
            self.call(iface, raw.cast())?;
        }
        Ok(command)
    }

    /// Send a fixed-size command struct as given (a set command); `cmd`
    /// replaces its first word.
    pub(super) fn send<T: FixedCommand>(
        &self,
        iface: &IfName,
        cmd: u32,
        mut command: T,
    ) -> Result<(), i32> {
        let raw: *mut T = &mut command;
        // SAFETY: as in `fixed`: a #[repr(C)] struct of the kernel's size
        // with the u32 command number first.
        unsafe {
            raw.cast::<u32>().write(cmd);
            self.call(iface, raw.cast())
        }
    }

    /// Command into a byte buffer whose header the caller has written.
    ///
    /// # Safety
    /// `buf` must be as large as the kernel writes for this command.
    pub(super) unsafe fn buffer(&self, iface: &IfName, buf: &mut [u8]) -> Result<(), i32> {
        // SAFETY: forwarded to the caller.
        unsafe { self.call(iface, buf.as_mut_ptr().cast()) }
    }
}
