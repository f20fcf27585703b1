//! What a sink's receiving thread keeps, whichever engine reads (recvmmsg
//! in `sink`, io_uring in `uring_sink`): how it receives, the buffer
//! slots, and its counters and flow table.

use std::time::{Duration, Instant};

use super::flows::FlowTable;
use crate::bench::report::LiveCounter;

/// Bytes of each packet the sink copies out: the header and a little more.
/// MSG_TRUNC still reports every packet's real length.
pub(super) const SLOT: usize = 64;
/// With UDP_GRO a message may be a super-datagram of up to 64 KiB, whose
/// every segment's header is read: room for the largest.
pub(super) const GRO_SLOT: usize = 65_536;
/// How long a thread waits for packets before it looks at the phase again
/// until the first packet came: the traffic's start is then known to
/// within about two of these, however late the reader gets to read (see
/// [`ThreadResult::waiting`]). A thread that has had packets waits
/// [`WAIT`].
pub(super) const FIRST_WAIT: Duration = Duration::from_millis(2);
/// How long a thread waits for packets, once traffic came, before it looks
/// at the phase again: the bound on how late it sees the end of the run.
pub(super) const WAIT: Duration = Duration::from_millis(50);

/// How the threads receive.
pub(super) struct Receive {
    /// Messages per recvmmsg call.
    pub batch: usize,
    /// UDP_GRO is on: split super-datagrams.
    pub gro: bool,
    /// The io_uring engine.
    pub uring: bool,
}

/// What one receiving thread brings back.
pub(super) struct ThreadResult {
    pub(super) cpu: Option<u32>,
    pub(super) packets: u64,
    pub(super) bytes: u64,
    pub(super) datagrams: u64,
    /// The first packet arrived after this: when the last wait that came
    /// back empty before it began (the socket was empty at its end, or
    /// when a signal cut it short), or the first wait's start. At most
    /// about two [`FIRST_WAIT`]s before the packet for a reader that has
    /// its CPU.
    pub(super) waited: Option<Instant>,
    /// Until the first packet: when the current wait began.
    wait_began: Option<Instant>,
    /// When the first and the last batch were read.
    pub(super) first: Option<Instant>,
    pub(super) last: Option<Instant>,
    pub(super) flows: FlowTable,
    /// CPU time the thread used.
    pub(super) cpu_time: Duration,
}

impl ThreadResult {
    pub(super) fn new(cpu: Option<u32>) -> ThreadResult {
        ThreadResult {
            cpu,
            packets: 0,
            bytes: 0,
            datagrams: 0,
            waited: None,
            wait_began: None,
            first: None,
            last: None,
            flows: FlowTable::new(),
            cpu_time: Duration::ZERO,
        }
    }

    /// About to wait for packets. Until the first one came, note when:
    /// the traffic began after the previous wait, which came back empty,
    /// began. A reader kept off its CPU (by the receive softirq, a
    /// competing process, a stop signal) reads its first batch late, long
    /// after the traffic began, and may begin its next wait late too; the
    /// wait before it began in time.
    #[inline]
    pub(super) fn waiting(&mut self) {
        if self.first.is_none() {
            let now = Instant::now();
            self.waited = Some(self.wait_began.unwrap_or(now));
            self.wait_began = Some(now);
        }
    }

    /// Whether no packet came yet: the thread waits [`FIRST_WAIT`].
    #[inline]
    pub(super) fn before_traffic(&self) -> bool {
        self.first.is_none()
    }

    /// A batch of messages was read now.
    #[inline]
    pub(super) fn arrived(&mut self) {
        let now = Instant::now();
        if self.first.is_none() {
            self.first = Some(now);
            self.waited.get_or_insert(now);
        }
        self.last = Some(now);
    }

    /// Count one received message of `len` bytes whose first bytes are
    /// `data`: one packet, or, with a UDP_GRO segment size, a
    /// super-datagram of `len / size` packets (the last may be shorter),
    /// each numbered by its own header.
    #[inline]
    pub(super) fn datagram(&mut self, len: usize, data: &[u8], gso: Option<usize>) {
        self.datagrams += 1;
        self.bytes += len as u64;
        match gso {
            Some(size) if len > size => {
                let segments = len.div_ceil(size) as u64;
                let mut seen = 0;
                for segment in data.chunks(size) {
                    self.flows.record(segment);
                    seen += 1;
                }
                // A super-datagram cut short by the buffer (never with
                // GRO_SLOT): its unseen segments count as packets
                // without a readable header.
                self.flows.foreign(segments - seen);
                self.packets += segments;
            }
            _ => {
                self.flows.record(data);
                self.packets += 1;
            }
        }
    }

    #[inline]
    pub(super) fn publish(&self, live: &LiveCounter) {
        live.publish(self.packets, self.bytes);
    }
}
