//! The sink's io_uring engine: one multishot recvmsg per thread (Linux
//! 6.0) into a provided-buffer ring. One request stays armed and posts a
//! completion per datagram; the thread only waits for completions, reads
//! each buffer's header bytes and hands the buffers back in one store per
//! batch. No system call per packet or per batch of packets: one
//! io_uring_enter per wake-up.
//!
//! Each buffer holds the kernel's `io_uring_recvmsg_out` header, the
//! control messages (the UDP_GRO segment size) and the payload; MSG_TRUNC
//! makes the header carry the datagram's real length when the payload is
//! cut to the buffer. When the ring runs out of buffers the request ends
//! (ENOBUFS) and is armed again once buffers are back: those datagrams wait
//! in the socket buffer, as with recvmmsg.

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::time::Duration;

use anyhow::Context;
use io_uring::{cqueue, opcode, types};

use super::gso::{gro_size, CONTROL_LEN};
use super::sink::{Receive, ThreadResult, GRO_SLOT, SLOT};
use crate::bench::harness::Phase;
use crate::bench::report::LiveCounter;
use crate::bench::uring::{self, BufRing};

/// The kernel's `struct io_uring_recvmsg_out` before the name.
const OUT_HEADER: usize = 16;
/// Buffers in the ring: small ones (header bytes only) are cheap, so many;
/// GRO buffers take 64 KiB each.
const SMALL_BUFFERS: u16 = 4096;
const GRO_BUFFERS: u16 = 256;
/// Submission queue entries (completions: four times as many).
const ENTRIES: u32 = 64;
/// How long a wait lasts before the thread looks at the phase again.
const WAIT: Duration = Duration::from_millis(50);
const RECV: u64 = 1;
/// How long a wait may hold completions back to gather a batch, as a NIC
/// coalesces interrupts (where the kernel has min_wait, 6.12).
const COALESCE: Duration = Duration::from_micros(50);

/// Receive on `socket` until the run is over, counting into `result`.
pub(super) fn receive(
    socket: &UdpSocket,
    how: &Receive,
    phase: &Phase,
    live: &LiveCounter,
    result: &mut ThreadResult,
) -> anyhow::Result<()> {
    let mut ring = uring::ring(ENTRIES).context("cannot create an io_uring instance")?;
    let (count, payload) = if how.gro {
        (GRO_BUFFERS, GRO_SLOT)
    } else {
        (SMALL_BUFFERS, SLOT)
    };
    let control = if how.gro { CONTROL_LEN } else { 0 };
    let mut buffers = BufRing::new(&ring, 0, count, OUT_HEADER + control + payload)
        .context("cannot register the io_uring buffer ring")?;
    // Only msg_namelen and msg_controllen matter to a multishot recvmsg:
    // the room it leaves in each buffer for the name and control data.
    // SAFETY: msghdr is a plain C struct; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_controllen = control;
    let arm = opcode::RecvMsgMulti::new(types::Fd(socket.as_raw_fd()), &msg, buffers.group())
        .flags(libc::MSG_TRUNC as u32)
        .build()
        .user_data(RECV);
    // A batch's worth of completions per wake-up, within the ring.
    let want = how.batch.min(ENTRIES as usize * 2);
    let mut armed = false;
    let mut scratch: libc::msghdr = msg;
    while !phase.stopped() {
        if !armed {
            // SAFETY: `msg` and the socket outlive the ring (dropped at the
            // end of this function, which cancels the request).
            unsafe { ring.submission().push(&arm) }
                .map_err(|_| anyhow::anyhow!("io_uring submission queue full"))?;
            armed = true;
        }
        uring::submit_and_wait_batch(&mut ring, want, COALESCE, WAIT)
            .context("io_uring_enter failed")?;
        let mut got = false;
        for cqe in ring.completion() {
            let flags = cqe.flags();
            let res = cqe.result();
            if !cqueue::more(flags) {
                armed = false;
            }
            if res < 0 {
                match -res {
                    // Out of buffers, or interrupted: armed again below.
                    libc::ENOBUFS | libc::EINTR | libc::ECANCELED => continue,
                    errno => {
                        return Err(std::io::Error::from_raw_os_error(errno))
                            .context("multishot recvmsg failed")
                    }
                }
            }
            let Some(id) = cqueue::buffer_select(flags) else {
                continue;
            };
            let bytes = buffers.get(id, res as usize);
            if let Ok(out) = types::RecvMsgOut::parse(bytes, &msg) {
                let gso = if how.gro {
                    let control = out.control_data();
                    scratch.msg_control = control.as_ptr().cast_mut().cast();
                    scratch.msg_controllen = control.len();
                    // SAFETY: the kernel wrote these control messages; the
                    // buffer is 8-byte aligned and so is the control data
                    // (after the 16-byte header, no name).
                    unsafe { gro_size(&scratch) }
                } else {
                    None
                };
                result.datagram(out.incoming_payload_len() as usize, out.payload_data(), gso);
                got = true;
            }
            buffers.recycle(id);
        }
        buffers.publish();
        if got {
            result.arrived();
            result.publish(live);
        }
    }
    // The request writes into `buffers`: end it before they go.
    uring::quiesce(&mut ring);
    drop(ring);
    drop(buffers);
    Ok(())
}
