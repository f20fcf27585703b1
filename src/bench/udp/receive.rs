//! What a sink's receiving thread keeps, whichever engine reads (recvmmsg
//! in `sink`, io_uring in `uring_sink`): how it receives, the buffer
//! slots, and its counters and flow table.

use std::time::Duration;

use super::flows::FlowTable;
use crate::bench::report::LiveCounter;
use crate::bench::traffic::TrafficClock;
pub(super) use crate::bench::traffic::FIRST_WAIT;

/// Bytes of each packet the sink copies out: the header and a little more.
/// MSG_TRUNC still reports every packet's real length.
pub(super) const SLOT: usize = 64;
/// With UDP_GRO a message may be a super-datagram of up to 64 KiB, whose
/// every segment's header is read: room for the largest.
pub(super) const GRO_SLOT: usize = 65_536;
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
    /// When its traffic began and ended.
    pub(super) clock: TrafficClock,
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
            clock: TrafficClock::default(),
            flows: FlowTable::new(),
            cpu_time: Duration::ZERO,
        }
    }

    /// About to wait for packets ([`TrafficClock::waiting`]).
    #[inline]
    pub(super) fn waiting(&mut self) {
        self.clock.waiting();
    }

    /// Whether no packet came yet: the thread waits [`FIRST_WAIT`].
    #[inline]
    pub(super) fn before_traffic(&self) -> bool {
        self.clock.before_traffic()
    }

    /// A batch of messages was read now.
    #[inline]
    pub(super) fn arrived(&mut self) {
        self.clock.arrived();
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
