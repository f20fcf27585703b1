//! The sink's io_uring engine: one multishot receive per thread (Linux
//! 6.0) into a provided-buffer ring. One request stays armed and posts a
//! completion per datagram; the thread only waits for completions, reads
//! each buffer's header bytes and hands the buffers back in one store per
//! batch. No system call per packet or per batch of packets: one
//! io_uring_enter per wake-up, which brings hundreds of datagrams when
//! they are waiting ([`Sizing`]).
//!
//! Plain datagrams go to a multishot recv: each buffer holds the payload's
//! first bytes, and MSG_TRUNC makes the completion's result the datagram's
//! real length. With `--gro`, a multishot recvmsg: each buffer holds the
//! kernel's `io_uring_recvmsg_out` header, the control messages (the
//! UDP_GRO segment size) and the payload. (recv is the cheaper of the two:
//! no header to build and copy per datagram.) When the ring runs out of
//! buffers, or the completion queue fills, the request ends and is armed
//! again: those datagrams wait in the socket buffer, as with recvmmsg.

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::time::Duration;

use anyhow::Context;
use io_uring::{cqueue, opcode, types};

use super::gso::{gro_size, CONTROL_LEN};
use super::receive::{Receive, ThreadResult, FIRST_WAIT, GRO_SLOT, SLOT, WAIT};
use crate::bench::harness::Phase;
use crate::bench::report::LiveCounter;
use crate::bench::uring::{self, BufRing};

/// The kernel's `struct io_uring_recvmsg_out` before the name (recvmsg,
/// with `--gro`).
const OUT_HEADER: usize = 16;
/// Completions one multishot receive posts per run before the kernel
/// queues it behind other work (MULTISHOT_MAX_RETRY in io_uring/net.c):
/// a socket with datagrams waiting yields this many per run.
const PER_RUN: usize = 32;
/// GRO buffers take 64 KiB each: a fixed ring of them.
const GRO_BUFFERS: u16 = 256;
/// Submission queue entries: the thread only ever has a re-arm and the
/// final cancel to submit.
const ENTRIES: u32 = 8;
const RECV: u64 = 1;
/// How long a wait may hold completions back to gather a batch, as a NIC
/// coalesces interrupts (where the kernel has min_wait, 6.12).
const COALESCE: Duration = Duration::from_micros(50);

/// How a thread waits and how much it holds: the wait asks for `want`
/// completions, which is also how many runs of the receive the kernel
/// makes before returning (it runs deferred work until that many have
/// run), so one wake-up brings up to about `want x PER_RUN` datagrams (a
/// `--batch` of 512 packets: 16 runs). The completion queue and the buffer
/// ring hold twice that: a full queue or an empty ring would end the
/// multishot request (re-armed, but each re-arm costs a submission and a
/// poll arming). Small buffers are few enough to stay in the CPU's caches.
struct Sizing {
    want: usize,
    buffers: u16,
    completions: u32,
}

impl Sizing {
    fn new(how: &Receive) -> Sizing {
        if how.gro {
            // Each super-datagram carries up to 64 packets: one run is
            // already a large batch.
            return Sizing {
                want: 1,
                buffers: GRO_BUFFERS,
                completions: u32::from(GRO_BUFFERS),
            };
        }
        let want = (how.batch / PER_RUN).clamp(1, 64);
        let buffers = (2 * want * PER_RUN).next_power_of_two().clamp(64, 32768) as u16;
        Sizing {
            want,
            buffers,
            completions: u32::from(buffers),
        }
    }
}

/// Receive on `socket` until the run is over, counting into `result`.
pub(super) fn receive(
    socket: &UdpSocket,
    how: &Receive,
    phase: &Phase,
    live: &LiveCounter,
    result: &mut ThreadResult,
) -> anyhow::Result<()> {
    let sizing = Sizing::new(how);
    let mut ring = uring::ring_sized(ENTRIES, sizing.completions)
        .context("cannot create an io_uring instance")?;
    let payload = if how.gro { GRO_SLOT } else { SLOT };
    let control = if how.gro { CONTROL_LEN } else { 0 };
    // Plain datagrams go to a multishot recv: the buffer holds only the
    // payload. With GRO, recvmsg: the buffer starts with the kernel's
    // `io_uring_recvmsg_out` header, then the control messages.
    let header = if how.gro { OUT_HEADER } else { 0 };
    let mut buffers = BufRing::new(&ring, 0, sizing.buffers, header + control + payload)
        .context("cannot register the io_uring buffer ring")?;
    // Only msg_namelen and msg_controllen matter to a multishot recvmsg:
    // the room it leaves in each buffer for the name and control data.
    // SAFETY: msghdr is a plain C struct; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_controllen = control;
    let fd = types::Fd(socket.as_raw_fd());
    // MSG_TRUNC: a completion's result is the datagram's real length,
    // however much of it fit the buffer.
    let arm = if how.gro {
        opcode::RecvMsgMulti::new(fd, &msg, buffers.group())
            .flags(libc::MSG_TRUNC as u32)
            .build()
    } else {
        opcode::RecvMulti::new(fd, buffers.group())
            .flags(libc::MSG_TRUNC)
            .build()
    }
    .user_data(RECV);
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
        result.waiting();
        let wait = if result.before_traffic() {
            FIRST_WAIT
        } else {
            WAIT
        };
        uring::submit_and_wait_batch(&mut ring, sizing.want, COALESCE, wait)
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
                            .context("multishot receive failed")
                    }
                }
            }
            let Some(id) = cqueue::buffer_select(flags) else {
                continue;
            };
            let len = res as usize;
            if !how.gro {
                result.datagram(len, buffers.get(id, len), None);
                got = true;
            } else if let Ok(out) = types::RecvMsgOut::parse(buffers.get(id, len), &msg) {
                let control = out.control_data();
                scratch.msg_control = control.as_ptr().cast_mut().cast();
                scratch.msg_controllen = control.len();
                // SAFETY: the kernel wrote these control messages; the
                // buffer is 8-byte aligned and so is the control data
                // (after the 16-byte header, no name).
                let gso = unsafe { gro_size(&scratch) };
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
