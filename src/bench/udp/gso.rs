//! UDP segmentation offload (UDP_SEGMENT, Linux 4.18) and UDP GRO
//! (UDP_GRO, Linux 5.0): one system call carries many datagrams.
//!
//! - The flood sets UDP_SEGMENT to its packet size and hands the kernel one
//!   buffer of `segments x size` bytes per message: the stack (or the NIC)
//!   cuts it into `segments` datagrams of `size` bytes, each with its own
//!   UDP header. Every segment starts with its own nettune header, so the
//!   sink numbers them one by one.
//! - The sink sets UDP_GRO: a socket that asks for it may be handed a
//!   super-datagram (a GSO packet from a local sender, or datagrams GRO
//!   merged on the way in), with a UDP_GRO control message giving the
//!   segment size. The sink splits it back at that size.
//!
//! The kernel caps the segments of one send at UDP_MAX_SEGMENTS, a
//! compile-time constant (64 when UDP_SEGMENT came, 128 in newer
//! kernels such as 6.18); [`max_segments`]
//! finds this kernel's value by asking it.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::OnceLock;

use super::wire::MAX_PAYLOAD;

/// setsockopt(SOL_UDP, UDP_SEGMENT): segment size for every send.
const UDP_SEGMENT: libc::c_int = 103;
/// setsockopt(SOL_UDP, UDP_GRO): accept GRO super-datagrams, with a
/// control message giving their segment size.
pub const UDP_GRO: libc::c_int = 104;
/// UDP_MAX_SEGMENTS of the older kernels, the fallback when the
/// kernel cannot be asked.
const OLD_MAX_SEGMENTS: u32 = 64;
/// The largest count tried when asking the kernel.
const PROBE_CEILING: u32 = 4096;

/// Segment every later send on `fd` at `size` bytes.
pub fn set_segment(fd: BorrowedFd<'_>, size: usize) -> io::Result<()> {
    let size =
        libc::c_int::try_from(size).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    set_int(fd, libc::SOL_UDP, UDP_SEGMENT, size)
}

/// Ask for GRO super-datagrams on `fd`.
pub fn set_gro(fd: BorrowedFd<'_>) -> io::Result<()> {
    set_int(fd, libc::SOL_UDP, UDP_GRO, 1)
}

/// The kernel's UDP_MAX_SEGMENTS, and whether it was asked (false: the
/// kernel could not be asked here, the value is the older kernels' 64).
/// Asked once per process: a socket sends to itself on 127.0.0.1 with a
/// 1-byte segment size; the kernel refuses (EINVAL) a send of more bytes
/// than segments it allows, before anything leaves. Counts are tried from
/// 64 up by doubling, then bisected where the refusals start, so only the
/// accepted sends deliver anything: a few hundred 1-byte datagrams to the
/// probing socket, read back at once (Udp InDatagrams counts them; nothing
/// is dropped).
pub fn max_segments() -> (u32, bool) {
    static LIMIT: OnceLock<(u32, bool)> = OnceLock::new();
    *LIMIT.get_or_init(|| probe().map_or((OLD_MAX_SEGMENTS, false), |n| (n, true)))
}

fn probe() -> io::Result<u32> {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
    socket.connect(socket.local_addr()?)?;
    socket.set_nonblocking(true)?;
    set_segment(std::os::fd::AsFd::as_fd(&socket), 1)?;
    let payload = vec![0u8; PROBE_CEILING as usize + 1];
    let accepts = |n: u32| -> io::Result<bool> {
        match socket.send(&payload[..n as usize]) {
            Ok(_) => {
                // Read the delivered datagrams back: none is dropped.
                let mut byte = [0u8; 1];
                while socket.recv(&mut byte).is_ok() {}
                Ok(true)
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(false),
            Err(e) => Err(e),
        }
    };
    let (mut ok, mut refused) = if accepts(OLD_MAX_SEGMENTS)? {
        let mut ok = OLD_MAX_SEGMENTS;
        while ok * 2 <= PROBE_CEILING && accepts(ok * 2)? {
            ok *= 2;
        }
        (ok, (ok * 2).min(PROBE_CEILING + 1))
    } else if accepts(2)? {
        (2, OLD_MAX_SEGMENTS)
    } else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    while refused - ok > 1 {
        let mid = ok + (refused - ok) / 2;
        if accepts(mid)? {
            ok = mid;
        } else {
            refused = mid;
        }
    }
    Ok(ok)
}

/// Check `--gso SEGMENTS` with `--size BYTES` against one datagram's limit
/// and this kernel's UDP_MAX_SEGMENTS.
pub fn check_segments(segments: u32, size: usize) -> anyhow::Result<()> {
    if segments == 0 {
        anyhow::bail!("--gso '0': give 1 or more segments per send");
    }
    let total = segments as usize * size;
    if total > MAX_PAYLOAD {
        anyhow::bail!(
            "--gso '{segments}' x --size '{size}' = {total} bytes is more than one UDP datagram \
             carries ({MAX_PAYLOAD}); give --gso {} or less at this size",
            MAX_PAYLOAD / size
        );
    }
    let (limit, asked) = max_segments();
    if segments > limit {
        anyhow::bail!(
            "--gso '{segments}': this kernel sends at most {limit} segments per UDP_SEGMENT send \
             (UDP_MAX_SEGMENTS{}); give 1 to {limit}",
            if asked {
                ""
            } else {
                ", assumed: the kernel could not be asked"
            }
        );
    }
    Ok(())
}

/// Every segment must fit the path MTU on its own: the kernel refuses a
/// segmented send whose segment size plus headers exceeds it (EINVAL).
/// `socket` is connected to `dest`.
pub fn check_mtu(socket: &UdpSocket, dest: SocketAddr, size: usize) -> anyhow::Result<()> {
    let (level, name, headers) = if dest.is_ipv4() {
        (libc::IPPROTO_IP, libc::IP_MTU, 28)
    } else {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU, 48)
    };
    let mut mtu: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: mtu and len live across the call and len is mtu's size.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&mut mtu as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        // Not known (no route cached yet): the first send says.
        return Ok(());
    }
    let mtu = mtu as usize;
    if size + headers > mtu {
        anyhow::bail!(
            "--size '{size}' with --gso: every segment travels as one packet and the path MTU \
             to {dest} is {mtu} bytes, so a segment carries at most {} bytes; lower --size",
            mtu.saturating_sub(headers)
        );
    }
    Ok(())
}

/// setsockopt with an int value.
pub fn set_int(
    socket: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: a valid fd and a c_int option of the right size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The segment size in a received message's UDP_GRO control message, if
/// it has one (a GRO super-datagram).
///
/// # Safety
/// `msg` must be a msghdr the kernel just filled: msg_control points at
/// msg_controllen bytes of well-formed control messages.
pub unsafe fn gro_size(msg: &libc::msghdr) -> Option<usize> {
    let mut cmsg = libc::CMSG_FIRSTHDR(msg);
    while !cmsg.is_null() {
        if (*cmsg).cmsg_level == libc::SOL_UDP && (*cmsg).cmsg_type == UDP_GRO {
            let size: libc::c_int = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
            return usize::try_from(size).ok().filter(|&s| s > 0);
        }
        cmsg = libc::CMSG_NXTHDR(msg, cmsg);
    }
    None
}

/// Bytes of control buffer that hold the UDP_GRO message (an int), with
/// room to spare, 8-byte aligned.
pub const CONTROL_LEN: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_tells_its_segment_limit() {
        let (limit, asked) = max_segments();
        // 64 (older kernels) or 128 (newer ones, 6.18 among them).
        assert!(limit >= 64, "{limit}");
        if asked {
            assert!(limit.is_power_of_two(), "{limit}");
        }
    }

    #[test]
    fn segments_are_bounded_by_the_datagram_and_the_kernel() {
        assert!(check_segments(54, 1200).is_ok());
        let err = check_segments(64, 1200).expect_err("too big").to_string();
        assert!(err.contains("76800") && err.contains("--gso 54"), "{err}");
        let err = check_segments(4000, 16)
            .expect_err("over limit")
            .to_string();
        assert!(err.contains("UDP_MAX_SEGMENTS"), "{err}");
        assert!(check_segments(0, 32).is_err());
    }
}
