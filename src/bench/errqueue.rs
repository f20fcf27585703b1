//! A socket's error queue (MSG_ERRQUEUE), drained without blocking: where
//! the kernel puts the ICMP errors of a UDP socket with IP_RECVERR, and the
//! completions of MSG_ZEROCOPY sends. One reader for both, so every engine
//! walks the control messages the same (checked) way.

use std::os::fd::{AsRawFd, BorrowedFd};

/// The most entries taken from the queue in one call: it holds at most a
/// receive buffer's worth anyway.
const MAX_QUEUED: usize = 4096;

/// Take every queued entry (up to a bound), calling `seen` with each one's
/// extended error (its errno, origin and the origin's data: for a
/// MSG_ZEROCOPY completion the range of send calls it covers). Returns how
/// many entries were taken.
pub fn drain(socket: BorrowedFd<'_>, mut seen: impl FnMut(&libc::sock_extended_err)) -> usize {
    let mut taken = 0;
    while taken < MAX_QUEUED {
        let mut data = [0u8; 64];
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        };
        // u64 alignment for the control messages.
        let mut control = [0u64; 32];
        // SAFETY: msghdr is a plain C struct; all-zero is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: msg points at live buffers of the sizes it declares.
        let n = unsafe {
            libc::recvmsg(
                socket.as_raw_fd(),
                &mut msg,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            break;
        }
        taken += 1;
        // SAFETY: the kernel filled msg_control with msg_controllen bytes
        // of well-formed control messages; CMSG_* walk only inside them.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                let level = (*cmsg).cmsg_level;
                let kind = (*cmsg).cmsg_type;
                if (level == libc::SOL_IP && kind == libc::IP_RECVERR)
                    || (level == libc::SOL_IPV6 && kind == libc::IPV6_RECVERR)
                {
                    let err: libc::sock_extended_err =
                        std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                    seen(&err);
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
    }
    taken
}
