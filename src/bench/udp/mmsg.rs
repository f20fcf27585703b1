//! A batch of packet buffers for `recvmmsg`/`sendmmsg`, allocated once per
//! thread so the hot path allocates nothing. The unsafe system calls live
//! here and nowhere else.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use super::gso::{gro_size, set_int, CONTROL_LEN};
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
    /// One control buffer per message (u64 for alignment), for the UDP_GRO
    /// segment size; empty when the batch does not receive control data.
    control: Vec<u64>,
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
            control: Vec::new(),
            headers,
        }
    }

    /// [`Batch::new`] with a control buffer per message, for receiving the
    /// UDP_GRO segment size ([`Batch::received_gro`]).
    pub fn with_control(count: usize, slot: usize) -> Batch {
        let mut batch = Batch::new(count, slot);
        let words = CONTROL_LEN / 8;
        batch.control = vec![0u64; batch.headers.len() * words];
        let base = batch.control.as_mut_ptr();
        for (i, header) in batch.headers.iter_mut().enumerate() {
            // SAFETY: i * words < control.len(), inside the allocation.
            header.msg_hdr.msg_control = unsafe { base.add(i * words) }.cast();
            header.msg_hdr.msg_controllen = CONTROL_LEN;
        }
        batch
    }

    /// Receive up to a batch: block for the first packet (up to the
    /// socket's SO_RCVTIMEO), then take what is queued (MSG_WAITFORONE).
    /// MSG_TRUNC makes each length the datagram's real size even when the
    /// buffer is smaller, so a sink can read only the header and still count
    /// bytes right.
    pub fn recv(&mut self, socket: BorrowedFd<'_>) -> io::Result<usize> {
        if !self.control.is_empty() {
            // The kernel wrote back how much it used: give the room again.
            for header in &mut self.headers {
                header.msg_hdr.msg_controllen = CONTROL_LEN;
            }
        }
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

    /// Send `packets` packets of `size` bytes on a connected socket with
    /// UDP_SEGMENT set to `size`: messages of `segments` packets each (the
    /// last one may carry fewer), the segment headers already stamped with
    /// [`Batch::segment_header_mut`]. Returns how many packets the kernel
    /// took (whole messages only).
    pub fn send_segmented(
        &mut self,
        socket: BorrowedFd<'_>,
        packets: usize,
        size: usize,
        segments: usize,
    ) -> io::Result<usize> {
        let segments = segments.max(1);
        let messages = packets.div_ceil(segments).min(self.headers.len());
        for (m, header) in self.headers[..messages].iter_mut().enumerate() {
            let carried = (packets - m * segments).min(segments);
            // SAFETY: msg_iov points at this header's own iovec (set in new).
            unsafe { (*header.msg_hdr.msg_iov).iov_len = (carried * size).min(self.slot) };
        }
        // SAFETY: as in `recv`; the kernel only reads the buffers.
        let n = unsafe {
            libc::sendmmsg(
                socket.as_raw_fd(),
                self.headers.as_mut_ptr(),
                messages as libc::c_uint,
                0,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((n as usize * segments).min(packets))
    }

    /// The header bytes of segment `segment` (of `size` bytes) of message
    /// `i`, to stamp before a segmented send.
    #[inline]
    pub fn segment_header_mut(
        &mut self,
        i: usize,
        segment: usize,
        size: usize,
    ) -> &mut [u8; HEADER_LEN] {
        let start = i * self.slot + segment * size;
        let bytes = &mut self.buffers[start..start + HEADER_LEN];
        bytes
            .try_into()
            .expect("a segment is at least HEADER_LEN bytes (check_size)")
    }

    /// Received message `i` of a batch made [`Batch::with_control`]: its
    /// real length, the bytes that fit the buffer, and the UDP_GRO segment
    /// size when it is a super-datagram.
    #[inline]
    pub fn received_gro(&self, i: usize) -> (usize, &[u8], Option<usize>) {
        let (len, bytes) = self.received(i);
        // SAFETY: the kernel filled this header's control buffer (inside
        // `control`, msg_controllen bytes) in the last recv.
        let gso = unsafe { gro_size(&self.headers[i].msg_hdr) };
        (len, bytes, gso)
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
    set_int(socket, level, name, 1)
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
