//! The rr-server's io_uring engine: the same protocol rules as the epoll
//! loop (`server::take_requests`, `server::UdpFlows`), driven by
//! completions.
//!
//! - TCP: one multishot accept; one multishot recv per connection into a
//!   provided-buffer ring. Replies are zeros: owed bytes go out as sends of
//!   the thread's zero buffer (64 KiB each at most) with MSG_WAITALL (the
//!   kernel finishes a short send itself). At most [`SENDS_IN_FLIGHT`]
//!   sends per connection are in flight, each completion letting the next
//!   go: a peer that asks for more than it reads holds a bounded number of
//!   requests in the kernel, never one per reply it is owed.
//! - UDP: one multishot recvmsg on the thread's socket (the source address
//!   comes in each buffer); replies are sendmsg requests whose header,
//!   address and head bytes live in a slot until their completion; at most
//!   [`UDP_IN_FLIGHT`] slots, past which a reply is dropped (counted) as a
//!   full socket buffer would drop it.
//!
//! Every wake-up's requests are submitted by the io_uring_enter that waits
//! for the next completions, except while the thread serves a single
//! client: then it submits them and sleeps in poll(2) on its sockets (see
//! `Worker::wait`). At the end every request is cancelled before the
//! buffers it points at are dropped.

use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, FromRawFd};
use std::time::{Duration, Instant};

use anyhow::Context;
use io_uring::{cqueue, opcode, squeue, types, IoUring};

use super::flows::{Answer, UdpFlows};
use super::server_thread::{
    accept_starved, take_requests, After, Conn, Plan, Sockets, ThreadReport, ACCEPT_PAUSE,
};
use super::wire::{CHECK_LEN, MAX_UDP_SIZE};
use crate::bench::harness::Phase;
use crate::bench::uring::{self, token, BufRing};

const ENTRIES: u32 = 256;
/// TCP receive buffers (group 0) and UDP ones (group 1): the UDP buffer
/// holds the kernel's recvmsg header, the source address and a datagram of
/// up to 64 KiB.
const TCP_BUFFERS: u16 = 512;
const TCP_BUFFER: usize = 16 * 1024;
const UDP_BUFFERS: u16 = 128;
const OUT_HEADER: usize = 16;
const NAME_LEN: usize = std::mem::size_of::<libc::sockaddr_in6>();
const UDP_BUFFER: usize = OUT_HEADER + NAME_LEN + 65_536;
/// Zeros sent per TCP send request, at most (also the longest UDP reply).
const ZEROS: usize = 64 * 1024;
/// TCP sends in flight per connection, at most (1 MiB of zeros).
const SENDS_IN_FLIGHT: u32 = 16;
/// UDP replies in flight per thread, at most.
const UDP_IN_FLIGHT: usize = 4096;
/// How long a wait lasts before the stop flag is looked at again.
const IDLE_WAIT: Duration = Duration::from_millis(50);

const ACCEPT: u64 = 1 << 56;
const TCP_RECV: u64 = 2 << 56;
const TCP_SEND: u64 = 3 << 56;
const UDP_RECV: u64 = 4 << 56;
const UDP_SEND: u64 = 5 << 56;
const CANCEL: u64 = 6 << 56;

/// A connection and whether its multishot receive is armed.
struct Slot {
    generation: u32,
    conn: Option<Conn>,
    receiving: bool,
    /// Sends in flight (at most [`SENDS_IN_FLIGHT`]).
    sending: u32,
    /// Closing: dropped once its receive has ended.
    dead: bool,
}

/// A UDP reply in flight: the sendmsg header and everything it points at
/// (the zero buffer aside), boxed so the addresses stay put.
struct Reply {
    msg: libc::msghdr,
    iov: [libc::iovec; 2],
    addr: libc::sockaddr_storage,
    /// The echoed hello or address check, or the request's sequence bytes.
    head: [u8; CHECK_LEN],
}

struct Worker<'a> {
    plan: &'a Plan,
    // Dropped in this order: the ring (after `quiesce`), then what its
    // requests pointed at.
    ring: IoUring,
    tcp_buffers: BufRing,
    udp_buffers: BufRing,
    /// Boxed: a slot's address is in a request in flight, so it must not
    /// move when the list grows.
    #[allow(clippy::vec_box)]
    replies: Vec<Box<Reply>>,
    free_replies: Vec<usize>,
    zeros: Vec<u8>,
    slots: Vec<Slot>,
    free: Vec<usize>,
    udp: UdpFlows,
    /// Only msg_namelen matters to the multishot recvmsg: room for the
    /// source address in each buffer.
    udp_msg: Box<libc::msghdr>,
    accepting: bool,
    /// Accept failed for want of descriptors or memory: not re-armed
    /// before then.
    accept_paused: Option<Instant>,
    next_deadline_sweep: Instant,
    udp_receiving: bool,
    /// The slot of the connection accepted last (where a lone client's
    /// connection usually is).
    last_slot: usize,
    report: ThreadReport,
}

pub(super) fn serve(sockets: Sockets, plan: &Plan, phase: &Phase) -> anyhow::Result<ThreadReport> {
    // Completions, not readiness: blocking sockets let requests wait in
    // the kernel.
    sockets
        .listener
        .set_nonblocking(false)
        .context("O_NONBLOCK")?;
    sockets.udp.set_nonblocking(false).context("O_NONBLOCK")?;
    sockets.udp.set_read_timeout(None).context("SO_RCVTIMEO")?;
    let ring = uring::ring(ENTRIES).context("cannot create an io_uring instance")?;
    let tcp_buffers = BufRing::new(&ring, 0, TCP_BUFFERS, TCP_BUFFER)
        .context("cannot register the io_uring buffer ring")?;
    let udp_buffers = BufRing::new(&ring, 1, UDP_BUFFERS, UDP_BUFFER)
        .context("cannot register the io_uring buffer ring")?;
    // SAFETY: msghdr is a plain C struct; all-zero is valid.
    let mut udp_msg: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
    udp_msg.msg_namelen = NAME_LEN as libc::socklen_t;
    let mut w = Worker {
        plan,
        ring,
        tcp_buffers,
        udp_buffers,
        replies: Vec::new(),
        free_replies: Vec::new(),
        zeros: vec![0; ZEROS],
        slots: Vec::new(),
        free: Vec::new(),
        udp: UdpFlows::new(plan.key.clone()),
        udp_msg,
        accepting: false,
        accept_paused: None,
        next_deadline_sweep: Instant::now() + Duration::from_secs(1),
        udp_receiving: false,
        last_slot: 0,
        report: ThreadReport {
            thread: plan.thread,
            cpu: plan.cpu,
            ..ThreadReport::default()
        },
    };
    let result = w.run(&sockets, phase);
    // Requests point at the buffers and the reply slots: end them first.
    uring::quiesce(&mut w.ring);
    result?;
    Ok(w.report)
}

impl Worker<'_> {
    fn push(&mut self, entry: &squeue::Entry) -> anyhow::Result<()> {
        // SAFETY: every entry points at memory that outlives it: sockets
        // (closed after their last receive completion), the zero buffer,
        // reply slots (freed on their completion), the buffer rings and
        // `udp_msg` (all dropped after `quiesce`).
        unsafe { uring::push(&mut self.ring, entry) }.context("io_uring submit failed")
    }

    fn run(&mut self, sockets: &Sockets, phase: &Phase) -> anyhow::Result<()> {
        let mut completions: Vec<(u64, i32, u32)> = Vec::with_capacity(ENTRIES as usize * 4);
        while !phase.stopped() {
            let paused = self
                .accept_paused
                .is_some_and(|until| Instant::now() < until);
            if !self.accepting && !paused {
                self.accept_paused = None;
                let entry = opcode::AcceptMulti::new(types::Fd(sockets.listener.as_raw_fd()))
                    .flags(libc::SOCK_CLOEXEC)
                    .build()
                    .user_data(ACCEPT);
                self.push(&entry)?;
                self.accepting = true;
            }
            if !self.udp_receiving {
                let entry = opcode::RecvMsgMulti::new(
                    types::Fd(sockets.udp.as_raw_fd()),
                    &*self.udp_msg,
                    self.udp_buffers.group(),
                )
                .build()
                .user_data(UDP_RECV);
                self.push(&entry)?;
                self.udp_receiving = true;
            }
            self.wait(sockets)?;
            completions.clear();
            completions.extend(
                self.ring
                    .completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            for &(user_data, res, flags) in &completions {
                match token::kind(user_data) {
                    ACCEPT => self.on_accept(res, flags)?,
                    TCP_RECV => self.on_tcp_recv(user_data, res, flags)?,
                    TCP_SEND => self.on_tcp_sent(user_data, res)?,
                    UDP_RECV => self.on_udp_recv(sockets, res, flags)?,
                    UDP_SEND => self.on_udp_sent(user_data, res),
                    _ => {}
                }
            }
            self.tcp_buffers.publish();
            self.udp_buffers.publish();
            self.udp.forget_idle();
            self.close_overdue()?;
        }
        Ok(())
    }

    /// Submit what is queued and wait for completions. A thread with one
    /// client sleeps in poll(2) on its sockets instead of in
    /// io_uring_enter: a socket wakes a poll(2) sleeper synchronously (the
    /// waker is about to sleep, so the scheduler may run the woken thread
    /// on the waker's CPU, as it does for the epoll engine's blocking
    /// reads), while io_uring wakes its waiter with a plain wake-up, which
    /// leaves the server on its last CPU: unpinned, part of a ping-pong's
    /// transactions then cost a cross-CPU wake-up, dear in a VM whose idle
    /// CPUs halt. The receive is still the multishot one: poll(2) only
    /// sleeps, and the enter after it posts what arrived.
    fn wait(&mut self, sockets: &Sockets) -> anyhow::Result<()> {
        let Some((mut fds, n)) = self.lone_fds(sockets) else {
            return uring::submit_and_wait(&mut self.ring, IDLE_WAIT)
                .context("io_uring_enter failed");
        };
        if !self.ring.submission().is_empty() {
            self.ring.submit().context("io_uring_enter failed")?;
        }
        if !self.ring.completion().is_empty() {
            return Ok(());
        }
        // SAFETY: `fds` holds `n` initialised pollfd entries.
        let ready = unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                n as libc::nfds_t,
                IDLE_WAIT.as_millis() as libc::c_int,
            )
        };
        if ready < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e).context("poll failed");
            }
        }
        // The multishot receive's completion is posted by the ring's task
        // work, which (DEFER_TASKRUN) runs only in an enter.
        uring::submit_and_run(&mut self.ring).context("io_uring_enter failed")
    }

    /// The sockets to poll when this thread serves one client and nothing
    /// else can complete without one of them becoming readable (no send
    /// or cancellation in flight); `None` otherwise.
    fn lone_fds(&mut self, sockets: &Sockets) -> Option<([libc::pollfd; 3], usize)> {
        let live = self.slots.len() - self.free.len();
        let flows = self.udp.count();
        if live + flows != 1 || self.free_replies.len() != self.replies.len() {
            return None;
        }
        let pollin = |fd: std::os::fd::RawFd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let mut fds = [pollin(-1); 3];
        let mut n = 0;
        if live == 1 {
            let slot = self.lone_slot()?;
            let conn = slot.conn.as_ref()?;
            if slot.dead || slot.sending > 0 || !slot.receiving {
                return None;
            }
            fds[n] = pollin(conn.stream.as_raw_fd());
            n += 1;
        }
        if self.accepting {
            fds[n] = pollin(sockets.listener.as_raw_fd());
            n += 1;
        }
        if self.udp_receiving {
            fds[n] = pollin(sockets.udp.as_raw_fd());
            n += 1;
        }
        Some((fds, n))
    }

    /// The one open connection's slot, when there is one: the slot last
    /// accepted into, else found (and remembered) by a look through all.
    fn lone_slot(&mut self) -> Option<&Slot> {
        let open = |slot: &Slot| slot.conn.is_some();
        if !self.slots.get(self.last_slot).is_some_and(open) {
            self.last_slot = self.slots.iter().position(open)?;
        }
        self.slots.get(self.last_slot)
    }

    /// Close connections past their hello deadline (once a second at most).
    fn close_overdue(&mut self) -> anyhow::Result<()> {
        let now = Instant::now();
        if now < self.next_deadline_sweep {
            return Ok(());
        }
        self.next_deadline_sweep = now + Duration::from_secs(1);
        for index in 0..self.slots.len() {
            let slot = &self.slots[index];
            if !slot.dead && slot.conn.as_ref().is_some_and(|c| c.hello_overdue(now)) {
                self.report.tcp_hello_timeouts += 1;
                self.close(index)?;
            }
        }
        Ok(())
    }

    fn token(&self, kind: u64, index: usize) -> u64 {
        token::make(kind, index, self.slots[index].generation)
    }

    /// The slot a completion belongs to, if it is still that connection's.
    fn live(&self, user_data: u64) -> Option<usize> {
        let index = token::index(user_data);
        let slot = self.slots.get(index)?;
        (token::current(user_data, slot.generation) && slot.conn.is_some()).then_some(index)
    }

    fn on_accept(&mut self, res: i32, flags: u32) -> anyhow::Result<()> {
        if !cqueue::more(flags) {
            self.accepting = false;
        }
        if res < 0 {
            return match -res {
                libc::ECONNABORTED | libc::ECANCELED | libc::EINTR => Ok(()),
                errno if accept_starved(Some(errno)) => {
                    // Serve what is open; accept again shortly.
                    self.report.accept_errors += 1;
                    self.accept_paused = Some(Instant::now() + ACCEPT_PAUSE);
                    Ok(())
                }
                errno => Err(std::io::Error::from_raw_os_error(errno)).context("accept failed"),
            };
        }
        // SAFETY: a successful accept completion carries a new descriptor
        // that nothing else owns.
        let stream = unsafe { TcpStream::from_raw_fd(res) };
        // A multishot accept carries no address: ask the socket.
        if stream
            .peer_addr()
            .is_ok_and(|addr| self.plan.rules.foreign(addr))
        {
            self.report.foreign += 1;
            return Ok(());
        }
        // A connection that cannot be set up is dropped, not the thread.
        if stream.set_nodelay(true).is_err() || self.plan.busy.apply_socket(stream.as_fd()).is_err()
        {
            return Ok(());
        }
        let index = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot {
                generation: 0,
                conn: None,
                receiving: false,
                sending: 0,
                dead: false,
            });
            self.slots.len() - 1
        });
        self.last_slot = index;
        let slot = &mut self.slots[index];
        slot.conn = Some(Conn::new(stream));
        slot.sending = 0;
        slot.dead = false;
        self.report.tcp_connections += 1;
        self.arm_tcp_recv(index)
    }

    fn arm_tcp_recv(&mut self, index: usize) -> anyhow::Result<()> {
        let token = self.token(TCP_RECV, index);
        let slot = &mut self.slots[index];
        let Some(conn) = slot.conn.as_ref() else {
            return Ok(());
        };
        slot.receiving = true;
        let entry =
            opcode::RecvMulti::new(types::Fd(conn.stream.as_raw_fd()), self.tcp_buffers.group())
                .build()
                .user_data(token);
        self.push(&entry)
    }

    fn on_tcp_recv(&mut self, user_data: u64, res: i32, flags: u32) -> anyhow::Result<()> {
        let buffer = cqueue::buffer_select(flags);
        let Some(index) = self.live(user_data) else {
            if let Some(id) = buffer {
                self.tcp_buffers.recycle(id);
            }
            return Ok(());
        };
        let ended = !cqueue::more(flags);
        if ended {
            self.slots[index].receiving = false;
        }
        let mut after = After::Keep;
        if let Some(id) = buffer {
            let slot = &mut self.slots[index];
            if let (Some(conn), false, true) = (slot.conn.as_mut(), slot.dead, res > 0) {
                let data = self.tcp_buffers.get(id, res as usize);
                after = take_requests(conn, data, &mut self.report, self.plan.rules.max_reply);
            }
            self.tcp_buffers.recycle(id);
        }
        let closed = res == 0 || (res < 0 && res != -libc::ENOBUFS);
        if closed || matches!(after, After::Close) {
            return self.close(index);
        }
        if self.slots[index].dead {
            return self.close(index);
        }
        self.send_owed(index)?;
        if ended {
            self.arm_tcp_recv(index)?;
        }
        Ok(())
    }

    /// Answer the replies owed: zeros, up to the buffer's size per request,
    /// while fewer than [`SENDS_IN_FLIGHT`] are in flight (the rest stays
    /// owed until a send completes).
    fn send_owed(&mut self, index: usize) -> anyhow::Result<()> {
        let token = self.token(TCP_SEND, index);
        let zeros = self.zeros.as_ptr();
        loop {
            let slot = &mut self.slots[index];
            let Some(conn) = slot.conn.as_mut() else {
                return Ok(());
            };
            if slot.dead || conn.owed == 0 || slot.sending >= SENDS_IN_FLIGHT {
                return Ok(());
            }
            let len = conn.owed.min(ZEROS as u64) as u32;
            conn.owed -= u64::from(len);
            slot.sending += 1;
            let entry = opcode::Send::new(types::Fd(conn.stream.as_raw_fd()), zeros, len)
                .flags(libc::MSG_WAITALL | libc::MSG_NOSIGNAL)
                .build()
                .user_data(token);
            self.push(&entry)?;
        }
    }

    /// A send completed: send more of what is owed, or close the
    /// connection if it failed.
    fn on_tcp_sent(&mut self, user_data: u64, res: i32) -> anyhow::Result<()> {
        let Some(index) = self.live(user_data) else {
            return Ok(());
        };
        let slot = &mut self.slots[index];
        slot.sending = slot.sending.saturating_sub(1);
        if res <= 0 {
            return self.close(index);
        }
        self.send_owed(index)
    }

    /// Close now if no receive is armed, else cancel it and close on its
    /// last completion.
    fn close(&mut self, index: usize) -> anyhow::Result<()> {
        if self.slots[index].sending > 0 {
            // Sends to a peer that does not read would wait as long as it
            // keeps the connection: end them with it.
            let target = self.token(TCP_SEND, index);
            let entry = opcode::AsyncCancel2::new(types::CancelBuilder::user_data(target).all())
                .build()
                .user_data(CANCEL);
            self.slots[index].sending = 0;
            self.push(&entry)?;
        }
        let slot = &mut self.slots[index];
        if slot.receiving {
            if !slot.dead {
                slot.dead = true;
                let target = self.token(TCP_RECV, index);
                let entry = opcode::AsyncCancel::new(target).build().user_data(CANCEL);
                self.push(&entry)?;
            }
            return Ok(());
        }
        if slot.conn.take().is_some() {
            slot.generation = slot.generation.wrapping_add(1);
            slot.dead = false;
            self.free.push(index);
        }
        Ok(())
    }

    fn on_udp_recv(&mut self, sockets: &Sockets, res: i32, flags: u32) -> anyhow::Result<()> {
        if !cqueue::more(flags) {
            self.udp_receiving = false;
        }
        let Some(id) = cqueue::buffer_select(flags) else {
            return match -res {
                0 | libc::ENOBUFS | libc::ECANCELED | libc::EINTR => Ok(()),
                errno => Err(std::io::Error::from_raw_os_error(errno))
                    .context("UDP multishot recvmsg failed"),
            };
        };
        let answer = {
            let bytes = self.udp_buffers.get(id, res.max(0) as usize);
            types::RecvMsgOut::parse(bytes, &self.udp_msg)
                .ok()
                .and_then(|out| {
                    let name = out.name_data();
                    let peer = peer_of(name)?;
                    let outcome = self
                        .udp
                        .on_datagram(&self.plan.rules, out.payload_data(), peer);
                    self.report.count(outcome.event);
                    Some((outcome.answer?, name_copy(name)))
                })
        };
        self.udp_buffers.recycle(id);
        if let Some((send, (addr, addr_len))) = answer {
            self.send_reply(sockets, addr, addr_len, &send)?;
        }
        Ok(())
    }

    /// sendmsg `send` to `addr`: its head, then zeros. Past
    /// [`UDP_IN_FLIGHT`] replies in flight it is dropped and counted.
    fn send_reply(
        &mut self,
        sockets: &Sockets,
        addr: libc::sockaddr_storage,
        addr_len: libc::socklen_t,
        send: &Answer,
    ) -> anyhow::Result<()> {
        let index = match self.free_replies.pop() {
            Some(index) => index,
            None if self.replies.len() >= UDP_IN_FLIGHT => {
                self.report.udp_send_errors += 1;
                return Ok(());
            }
            None => {
                self.replies.push(Box::new(Reply {
                    // SAFETY: plain C structs; all-zero is valid.
                    msg: unsafe { std::mem::zeroed() },
                    iov: [libc::iovec {
                        iov_base: std::ptr::null_mut(),
                        iov_len: 0,
                    }; 2],
                    // SAFETY: as above.
                    addr: unsafe { std::mem::zeroed() },
                    head: [0; CHECK_LEN],
                }));
                self.replies.len() - 1
            }
        };
        let head = send.head();
        // The zero buffer must cover the rest: never past it, whatever the
        // answer says (flows bound it by MAX_UDP_SIZE already).
        let total = send.total_len().min(MAX_UDP_SIZE);
        let tail = total.saturating_sub(head.len()).min(self.zeros.len());
        let zeros = self.zeros.as_ptr();
        let reply = &mut *self.replies[index];
        reply.addr = addr;
        reply.head = [0; CHECK_LEN];
        reply.head[..head.len()].copy_from_slice(head);
        reply.iov[0] = libc::iovec {
            iov_base: reply.head.as_mut_ptr().cast(),
            iov_len: head.len(),
        };
        reply.iov[1] = libc::iovec {
            iov_base: zeros.cast_mut().cast(),
            iov_len: tail,
        };
        reply.msg.msg_name = std::ptr::addr_of_mut!(reply.addr).cast();
        reply.msg.msg_namelen = addr_len;
        reply.msg.msg_iov = reply.iov.as_mut_ptr();
        reply.msg.msg_iovlen = if tail > 0 { 2 } else { 1 };
        let entry = opcode::SendMsg::new(types::Fd(sockets.udp.as_raw_fd()), &reply.msg)
            .build()
            .user_data(UDP_SEND | index as u64);
        self.push(&entry)
    }

    fn on_udp_sent(&mut self, user_data: u64, res: i32) {
        if res < 0 {
            self.report.udp_send_errors += 1;
        }
        let index = token::index(user_data);
        if index < self.replies.len() {
            self.free_replies.push(index);
        }
    }
}

/// The source address in a multishot recvmsg buffer.
fn peer_of(name: &[u8]) -> Option<SocketAddr> {
    let (storage, len) = name_copy(name);
    let family = i32::from(storage.ss_family);
    if family == libc::AF_INET && len as usize >= std::mem::size_of::<libc::sockaddr_in>() {
        // SAFETY: the storage holds a sockaddr_in (family checked, size
        // checked) and is aligned for it.
        let sin = unsafe { &*std::ptr::addr_of!(storage).cast::<libc::sockaddr_in>() };
        let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
        return Some(SocketAddr::from((ip, u16::from_be(sin.sin_port))));
    }
    if family == libc::AF_INET6 && len as usize >= std::mem::size_of::<libc::sockaddr_in6>() {
        // SAFETY: as above, for sockaddr_in6.
        let sin6 = unsafe { &*std::ptr::addr_of!(storage).cast::<libc::sockaddr_in6>() };
        let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
        return Some(SocketAddr::V6(std::net::SocketAddrV6::new(
            ip,
            u16::from_be(sin6.sin6_port),
            sin6.sin6_flowinfo,
            sin6.sin6_scope_id,
        )));
    }
    None
}

/// The name bytes as a sockaddr_storage (for the reply) and their length.
fn name_copy(name: &[u8]) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: plain C struct; all-zero is valid.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = name
        .len()
        .min(std::mem::size_of::<libc::sockaddr_storage>());
    // SAFETY: `len` bytes fit both the source slice and the storage.
    unsafe {
        std::ptr::copy_nonoverlapping(
            name.as_ptr(),
            std::ptr::addr_of_mut!(storage).cast::<u8>(),
            len,
        );
    }
    (storage, len as libc::socklen_t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_addresses_are_read_back() {
        for text in ["127.0.0.1:4242", "[::1]:9"] {
            let addr: SocketAddr = text.parse().expect("addr");
            let storage = nix::sys::socket::SockaddrStorage::from(addr);
            // SAFETY: the storage's first `len` bytes are its sockaddr.
            let bytes = unsafe {
                std::slice::from_raw_parts(
                    nix::sys::socket::SockaddrLike::as_ptr(&storage).cast::<u8>(),
                    nix::sys::socket::SockaddrLike::len(&storage) as usize,
                )
            };
            assert_eq!(peer_of(bytes), Some(addr));
        }
        assert_eq!(peer_of(&[0u8; 4]), None);
    }
}
