//! A batch of packet buffers for `recvmmsg`/`sendmmsg`, allocated once per
//! thread so the hot path allocates nothing. The unsafe system calls live
//! here and nowhere else.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use super::wire::HEADER_LEN;

/// `count` buffers of `slot` bytes with one iovec and one mmsghdr each.
/// Holds raw pointers into its own heap buffers (not `Send`): build it on
/// the thread that uses it. The buffers never grow, so the pointers stay
/// valid when the `Batch` itself moves.
pub struct Batch {
    buffers: Vec<u8>,
    slot: usize,
    /// Referenced by `headers`; kept alive and never resized.
    _iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
}

impl Batch {
    /// `count` >= 1 buffers of `slot` >= [`HEADER_LEN`] bytes, zeroed.
    pub fn new(count: usize, slot: usize) -> Batch {
        let count = count.max(1);
        let slot = slot.max(HEADER_LEN);
        let mut buffers = vec![0u8; count * slot];
        let base = buffers.as_mut_ptr();
        let mut iovecs: Vec<libc::iovec> = (0..count)
            .map(|i| libc::iovec {
                // SAFETY: i * slot < buffers.len(), inside the allocation.
                iov_base: unsafe { base.add(i * slot) }.cast(),
                iov_len: slot,
            })
            .collect();
        let iov_base = iovecs.as_mut_ptr();
        let headers = (0..count)
            .map(|i| {
                // SAFETY: mmsghdr is a plain C struct; all-zero (null
                // pointers, zero lengths) is a valid value.
                let mut header: libc::mmsghdr = unsafe { std::mem::zeroed() };
                // SAFETY: i < iovecs.len().
                header.msg_hdr.msg_iov = unsafe { iov_base.add(i) };
                header.msg_hdr.msg_iovlen = 1;
                header
            })
            .collect();
        Batch {
            buffers,
            slot,
            _iovecs: iovecs,
            headers,
        }
    }

    pub fn capacity(&self) -> usize {
        self.headers.len()
    }

    /// Receive up to a batch: block for the first packet (up to the
    /// socket's SO_RCVTIMEO), then take what is queued (MSG_WAITFORONE).
    /// MSG_TRUNC makes each length the datagram's real size even when the
    /// buffer is smaller, so a sink can read only the header and still count
    /// bytes right.
    pub fn recv(&mut self, socket: BorrowedFd<'_>) -> io::Result<usize> {
        // SAFETY: headers point at iovecs that point into `buffers`, all
        // alive and sized as declared; the kernel writes at most iov_len
        // bytes per buffer and fills msg_len/msg_flags.
        let n = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                self.headers.as_mut_ptr(),
                self.headers.len() as libc::c_uint,
                libc::MSG_WAITFORONE | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// Send the first `count` buffers, `len` bytes each, on a connected
    /// socket. Returns how many the kernel took (fewer than `count` when an
    /// error stopped it part way; the error comes on the next call).
    pub fn send(&mut self, socket: BorrowedFd<'_>, count: usize, len: usize) -> io::Result<usize> {
        let count = count.min(self.headers.len());
        let len = len.min(self.slot);
        for header in &mut self.headers[..count] {
            // SAFETY: msg_iov points at this header's own iovec (set in new).
            unsafe { (*header.msg_hdr.msg_iov).iov_len = len };
        }
        // SAFETY: as in `recv`; the kernel only reads the buffers.
        let n = unsafe {
            libc::sendmmsg(
                socket.as_raw_fd(),
                self.headers.as_mut_ptr(),
                count as libc::c_uint,
                0,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// Received packet `i`: its real length and the bytes that fit the buffer.
    #[inline]
    pub fn received(&self, i: usize) -> (usize, &[u8]) {
        let len = self.headers[i].msg_len as usize;
        let start = i * self.slot;
        (len, &self.buffers[start..start + len.min(self.slot)])
    }

    /// The header bytes of buffer `i`, to stamp before sending.
    #[inline]
    pub fn header_mut(&mut self, i: usize) -> &mut [u8; HEADER_LEN] {
        let start = i * self.slot;
        let bytes = &mut self.buffers[start..start + HEADER_LEN];
        bytes
            .try_into()
            .expect("a slot is at least HEADER_LEN bytes (Batch::new)")
    }
}

/// Ask the kernel to queue the ICMP errors a socket's packets bring back
/// (IP_RECVERR / IPV6_RECVERR), so [`take_errors`] can count them: a
/// partial sendmmsg drops the error that stopped it.
pub fn queue_errors(socket: BorrowedFd<'_>, ipv6: bool) -> io::Result<()> {
    let (level, name) = if ipv6 {
        (libc::SOL_IPV6, libc::IPV6_RECVERR)
    } else {
        (libc::SOL_IP, libc::IP_RECVERR)
    };
    let on: libc::c_int = 1;
    // SAFETY: a valid fd and a c_int option of the right size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Drain the socket's error queue (see [`queue_errors`]), calling `seen`
/// with each error's errno. Returns how many were taken.
pub fn take_errors(socket: BorrowedFd<'_>, mut seen: impl FnMut(i32)) -> usize {
    crate::bench::errqueue::drain(socket, |err| seen(err.ee_errno as i32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsFd;

    #[test]
    fn sends_and_receives_a_batch_over_loopback() {
        let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .expect("timeout");
        let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        tx.connect(rx.local_addr().expect("addr")).expect("connect");
        let mut out = Batch::new(4, 100);
        for i in 0..4 {
            out.header_mut(i)[0] = i as u8 + 1;
        }
        assert_eq!(out.send(tx.as_fd(), 3, 100).expect("send"), 3);
        // Buffers smaller than the packets: lengths are still real.
        let mut inbox = Batch::new(8, 16);
        let mut got = Vec::new();
        while got.len() < 3 {
            let n = inbox.recv(rx.as_fd()).expect("recv");
            for i in 0..n {
                let (len, bytes) = inbox.received(i);
                got.push((len, bytes.len(), bytes[0]));
            }
        }
        assert_eq!(got, vec![(100, 16, 1), (100, 16, 2), (100, 16, 3)]);
    }
}
