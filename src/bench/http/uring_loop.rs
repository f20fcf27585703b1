//! The io_uring engine behind the [`EventLoop`] seam: the same HTTP rules
//! (`session`), driven by completions instead of readiness.
//!
//! - one multishot accept on the thread's listener (Linux 5.19) posts a
//!   completion per new connection;
//! - one multishot recv per connection (Linux 6.0) fills buffers the kernel
//!   takes from a provided-buffer ring, no buffer per idle connection;
//! - answers go out with one send per connection at a time (the rest of a
//!   pipelined burst waits behind it, in order);
//! - everything the completions of one wake-up asked for (sends, re-armed
//!   receives, accepts) is submitted by the single io_uring_enter that also
//!   waits for the next completions: one system call per wake-up, not one
//!   per connection and operation.
//!
//! A connection's buffers live until the kernel has finished with them: a
//! connection being closed has its requests cancelled, and its slot is
//! reused only after their last completion. A client that sends without
//! reading has its receive cancelled once [`MAX_PENDING`] bytes of answers
//! wait, and re-armed when they are sent (backpressure, as the epoll
//! engine's).

use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, FromRawFd};
use std::time::{Duration, Instant};

use anyhow::Context;
use io_uring::{cqueue, opcode, types, IoUring};

use super::event_loop::{overdue, unix_secs, EventLoop, LoopOptions, ThreadCounts};
use super::session::{Responses, Session};
use crate::bench::harness::Phase;
use crate::bench::report::LiveCounter;
use crate::bench::uring::{self, token, BufRing};

/// Submission queue entries (completions: four times as many).
const ENTRIES: u32 = 512;
/// Receive buffers in the ring, and their size.
const BUFFERS: u16 = 1024;
const BUFFER_SIZE: usize = 16 * 1024;
/// Answers waiting behind a send before the connection stops reading.
const MAX_PENDING: usize = 1 << 20;
/// The wait when nothing happens, so the stop flag is seen.
const LONG_WAIT: Duration = Duration::from_millis(10);

/// What a completion belongs to: the top byte of its user_data.
const ACCEPT: u64 = 1 << 56;
const RECV: u64 = 2 << 56;
const SEND: u64 = 3 << 56;
const CANCEL: u64 = 4 << 56;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closing {
    No,
    /// Shut down the write side once the output is sent.
    AfterFlush,
    /// FIN sent; discarding input until the peer closes.
    Draining,
    /// Being closed: waiting for its requests' last completions.
    Dead,
}

struct Conn {
    stream: TcpStream,
    session: Session,
    /// The start of an incomplete request.
    input: Vec<u8>,
    /// The bytes of the send in flight, from `sent` on.
    output: Vec<u8>,
    sent: usize,
    /// Answers made while a send was in flight.
    pending: Vec<u8>,
    sending: bool,
    receiving: bool,
    /// Receive cancelled for backpressure; re-armed once output drains.
    paused: bool,
    closing: Closing,
    last_active: Instant,
}

struct Slot {
    generation: u32,
    conn: Option<Conn>,
}

pub struct UringLoop {
    // Dropped in this order: the ring (after `quiesce`), then the memory
    // its requests pointed at.
    ring: IoUring,
    buffers: BufRing,
    listener: TcpListener,
    options: LoopOptions,
    slots: Vec<Slot>,
    free: Vec<usize>,
    responses: Responses,
    out: Vec<u8>,
    completions: Vec<(u64, i32, u32)>,
    accepting: bool,
    counts: ThreadCounts,
}

impl UringLoop {
    pub fn new(listener: TcpListener, options: LoopOptions) -> anyhow::Result<UringLoop> {
        // Completions, not readiness: a blocking listener lets the kernel
        // park the accept on its wait queue.
        listener
            .set_nonblocking(false)
            .context("cannot make the listener blocking for io_uring")?;
        let ring = uring::ring(ENTRIES).context("cannot create an io_uring instance")?;
        let buffers = BufRing::new(&ring, 0, BUFFERS, BUFFER_SIZE)
            .context("cannot register the io_uring buffer ring")?;
        Ok(UringLoop {
            ring,
            buffers,
            listener,
            options,
            slots: Vec::new(),
            free: Vec::new(),
            responses: Responses::new(unix_secs()),
            out: Vec::with_capacity(BUFFER_SIZE),
            completions: Vec::with_capacity(ENTRIES as usize * 4),
            accepting: false,
            counts: ThreadCounts::default(),
        })
    }

    fn token(&self, kind: u64, index: usize) -> u64 {
        token::make(kind, index, self.slots[index].generation)
    }

    fn push(&mut self, entry: &io_uring::squeue::Entry) -> anyhow::Result<()> {
        // SAFETY: every entry points at memory that lives until its
        // completion: the listener and connections (closed only after
        // their last completion), connection output buffers (not touched
        // while a send is in flight), the buffer ring (dropped after the
        // ring).
        unsafe { uring::push(&mut self.ring, entry) }.context("io_uring submit failed")
    }

    fn arm_accept(&mut self) -> anyhow::Result<()> {
        let entry = opcode::AcceptMulti::new(types::Fd(self.listener.as_raw_fd()))
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(ACCEPT);
        self.push(&entry)?;
        self.accepting = true;
        Ok(())
    }

    fn arm_recv(&mut self, index: usize) -> anyhow::Result<()> {
        let token = self.token(RECV, index);
        let Some(conn) = self.slots[index].conn.as_mut() else {
            return Ok(());
        };
        conn.receiving = true;
        let entry =
            opcode::RecvMulti::new(types::Fd(conn.stream.as_raw_fd()), self.buffers.group())
                .build()
                .user_data(token);
        self.push(&entry)
    }

    /// Send what is in the connection's output from `sent` on.
    fn arm_send(&mut self, index: usize) -> anyhow::Result<()> {
        let token = self.token(SEND, index);
        let Some(conn) = self.slots[index].conn.as_mut() else {
            return Ok(());
        };
        conn.sending = true;
        let rest = &conn.output[conn.sent..];
        let entry = opcode::Send::new(
            types::Fd(conn.stream.as_raw_fd()),
            rest.as_ptr(),
            u32::try_from(rest.len()).unwrap_or(u32::MAX),
        )
        .flags(libc::MSG_NOSIGNAL)
        .build()
        .user_data(token);
        self.push(&entry)
    }

    fn cancel(&mut self, kind: u64, index: usize) -> anyhow::Result<()> {
        let target = self.token(kind, index);
        let entry = opcode::AsyncCancel::new(target).build().user_data(CANCEL);
        self.push(&entry)
    }

    fn on_accept(&mut self, res: i32, flags: u32, now: Instant) -> anyhow::Result<()> {
        if !cqueue::more(flags) {
            self.accepting = false;
        }
        if res < 0 {
            if res != -libc::ECONNABORTED && res != -libc::ECANCELED {
                self.counts.accept_errors += 1;
            }
            return Ok(());
        }
        // SAFETY: a successful accept completion carries a new descriptor
        // that nothing else owns.
        let stream = unsafe { TcpStream::from_raw_fd(res) };
        if self.register(stream, now).is_err() {
            self.counts.accept_errors += 1;
        }
        Ok(())
    }

    fn register(&mut self, stream: TcpStream, now: Instant) -> anyhow::Result<()> {
        stream.set_nodelay(true)?;
        // The socket options of --busy-poll (there is no epoll instance to
        // give the epoll parameters to).
        self.options.busy_poll.apply_socket(stream.as_fd())?;
        let index = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot {
                generation: 0,
                conn: None,
            });
            self.slots.len() - 1
        });
        self.slots[index].conn = Some(Conn {
            stream,
            session: Session::default(),
            input: Vec::new(),
            output: Vec::new(),
            sent: 0,
            pending: Vec::new(),
            sending: false,
            receiving: false,
            paused: false,
            closing: Closing::No,
            last_active: now,
        });
        self.counts.connections += 1;
        self.arm_recv(index)
    }

    /// The connection of a completion, if it is still the one the request
    /// was made for.
    fn live_index(&self, user_data: u64) -> Option<usize> {
        let index = token::index(user_data);
        let slot = self.slots.get(index)?;
        (token::current(user_data, slot.generation) && slot.conn.is_some()).then_some(index)
    }

    /// Begin closing: cancel what is in flight; the slot is freed once the
    /// last completion came back.
    fn close(&mut self, index: usize) -> anyhow::Result<()> {
        let Some(conn) = self.slots[index].conn.as_mut() else {
            return Ok(());
        };
        if conn.closing == Closing::Dead {
            // Already closing: this may have been its last request.
            self.release_if_done(index);
            return Ok(());
        }
        conn.closing = Closing::Dead;
        let (receiving, sending) = (conn.receiving, conn.sending);
        if receiving {
            self.cancel(RECV, index)?;
        }
        if sending {
            self.cancel(SEND, index)?;
        }
        self.release_if_done(index);
        Ok(())
    }

    /// Free a dead connection's slot once no request refers to it.
    fn release_if_done(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        let done = slot
            .conn
            .as_ref()
            .is_some_and(|c| c.closing == Closing::Dead && !c.receiving && !c.sending);
        if done {
            // Dropping the stream closes the descriptor.
            slot.conn = None;
            slot.generation = slot.generation.wrapping_add(1);
            self.free.push(index);
        }
    }

    fn on_recv(&mut self, index: usize, res: i32, flags: u32, now: Instant) -> anyhow::Result<()> {
        let buffer = cqueue::buffer_select(flags);
        let ended = !cqueue::more(flags);
        if ended {
            if let Some(conn) = self.slots[index].conn.as_mut() {
                conn.receiving = false;
            }
        }
        let result = match buffer {
            Some(id) if res > 0 => self.on_data(index, id, res as usize, now),
            _ => Ok(()),
        };
        if let Some(id) = buffer {
            self.buffers.recycle(id);
        }
        result?;
        let Some(conn) = self.slots[index].conn.as_ref() else {
            return Ok(());
        };
        let state = conn.closing;
        if res == 0 || (res < 0 && res != -libc::ENOBUFS && res != -libc::ECANCELED) {
            // The peer closed (or reset): done with it.
            return self.close(index);
        }
        if state == Closing::Dead {
            self.release_if_done(index);
            return Ok(());
        }
        if ended && !conn.paused {
            // Out of buffers (ENOBUFS) or ended by the kernel: again.
            self.arm_recv(index)?;
        }
        Ok(())
    }

    /// Answer every complete request in `len` bytes of buffer `id`.
    fn on_data(&mut self, index: usize, id: u16, len: usize, now: Instant) -> anyhow::Result<()> {
        let Some(conn) = self.slots[index].conn.as_mut() else {
            return Ok(());
        };
        if conn.closing != Closing::No {
            // Closing: what comes after the last answered request is read
            // and dropped, so the close is not a reset.
            return Ok(());
        }
        conn.last_active = now;
        let data = self.buffers.get(id, len);
        self.out.clear();
        let served = if conn.input.is_empty() {
            let served = conn.session.serve(data, &self.responses, &mut self.out);
            if !served.close {
                conn.input.extend_from_slice(&data[served.consumed..]);
            }
            served
        } else {
            conn.input.extend_from_slice(data);
            let served = conn
                .session
                .serve(&conn.input, &self.responses, &mut self.out);
            conn.input.drain(..served.consumed);
            served
        };
        self.counts.requests += served.responses;
        self.counts.refused += served.refused;
        if served.close {
            conn.input.clear();
            conn.closing = Closing::AfterFlush;
        }
        if self.out.is_empty() {
            return self.flush_done(index);
        }
        if conn.sending {
            conn.pending.extend_from_slice(&self.out);
            if conn.pending.len() > MAX_PENDING && conn.receiving && !conn.paused {
                conn.paused = true;
                self.cancel(RECV, index)?;
            }
            return Ok(());
        }
        conn.output.clear();
        conn.sent = 0;
        std::mem::swap(&mut conn.output, &mut self.out);
        self.arm_send(index)
    }

    fn on_send(&mut self, index: usize, res: i32) -> anyhow::Result<()> {
        let Some(conn) = self.slots[index].conn.as_mut() else {
            return Ok(());
        };
        conn.sending = false;
        if conn.closing == Closing::Dead {
            self.release_if_done(index);
            return Ok(());
        }
        if res < 0 {
            return self.close(index);
        }
        conn.sent += res as usize;
        if conn.sent < conn.output.len() {
            return self.arm_send(index);
        }
        if !conn.pending.is_empty() {
            conn.output.clear();
            conn.sent = 0;
            std::mem::swap(&mut conn.output, &mut conn.pending);
            return self.arm_send(index);
        }
        self.flush_done(index)
    }

    /// All output is out: close the write side if asked, resume reading
    /// if paused.
    fn flush_done(&mut self, index: usize) -> anyhow::Result<()> {
        let Some(conn) = self.slots[index].conn.as_mut() else {
            return Ok(());
        };
        if conn.sending {
            return Ok(());
        }
        if conn.closing == Closing::AfterFlush {
            conn.closing = Closing::Draining;
            if conn.stream.shutdown(Shutdown::Write).is_err() {
                return self.close(index);
            }
        }
        if conn.paused {
            conn.paused = false;
            if !conn.receiving {
                return self.arm_recv(index);
            }
        }
        Ok(())
    }

    /// Close connections idle past the timeout, and closing ones that
    /// lingered too long.
    fn sweep(&mut self, now: Instant) -> anyhow::Result<()> {
        for index in 0..self.slots.len() {
            let Some(conn) = &self.slots[index].conn else {
                continue;
            };
            if conn.closing == Closing::Dead {
                continue;
            }
            let open = conn.closing == Closing::No;
            if overdue(open, conn.last_active, now, self.options.idle_timeout) {
                if conn.closing == Closing::No {
                    self.counts.idle_closed += 1;
                }
                self.close(index)?;
            }
        }
        Ok(())
    }

    fn dispatch(
        &mut self,
        user_data: u64,
        res: i32,
        flags: u32,
        now: Instant,
    ) -> anyhow::Result<()> {
        match token::kind(user_data) {
            ACCEPT => self.on_accept(res, flags, now),
            RECV => match self.live_index(user_data) {
                Some(index) => self.on_recv(index, res, flags, now),
                None => {
                    if let Some(id) = cqueue::buffer_select(flags) {
                        self.buffers.recycle(id);
                    }
                    Ok(())
                }
            },
            SEND => match self.live_index(user_data) {
                Some(index) => self.on_send(index, res),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }
}

impl EventLoop for UringLoop {
    fn run(&mut self, phase: &Phase, live: &LiveCounter) -> anyhow::Result<ThreadCounts> {
        let sweep_every = (self.options.idle_timeout / 4)
            .clamp(Duration::from_millis(10), Duration::from_secs(1));
        let mut next_sweep = Instant::now() + sweep_every;
        let wait = self.options.wait.min(LONG_WAIT);
        let result = (|| -> anyhow::Result<()> {
            while !phase.stopped() {
                if !self.accepting {
                    self.arm_accept()?;
                }
                uring::submit_and_wait(&mut self.ring, wait).context("io_uring_enter failed")?;
                let now = Instant::now();
                self.responses.refresh(unix_secs());
                let mut completions = std::mem::take(&mut self.completions);
                completions.clear();
                completions.extend(
                    self.ring
                        .completion()
                        .map(|c| (c.user_data(), c.result(), c.flags())),
                );
                let before = self.counts.requests;
                for &(user_data, res, flags) in &completions {
                    self.dispatch(user_data, res, flags, now)?;
                }
                self.counts.note_traffic(before, now);
                self.completions = completions;
                self.buffers.publish();
                live.publish(self.counts.requests, self.counts.connections);
                if now >= next_sweep {
                    self.sweep(now)?;
                    next_sweep = now + sweep_every;
                }
            }
            Ok(())
        })();
        // Requests point at connection buffers and the buffer ring: end
        // them before anything is dropped.
        uring::quiesce(&mut self.ring);
        result?;
        Ok(self.counts.clone())
    }
}
