//! Loss, reordering and duplicates from sequence numbers, per flow
//! (sender id, flow id).
//!
//! Each receiving thread keeps its own table (no locks); tables are merged
//! after the threads are joined. The rules, per flow:
//! - received: distinct packets (duplicates not counted);
//! - lost = highest sequence seen + 1 - received. Sequences start at 0, so
//!   packets lost before the first one seen count (start the sink first);
//!   packets lost after the last one seen cannot be told from packets still
//!   to come and do not count. Only flows that delivered at least one packet
//!   are known at all;
//! - reordered: packets that arrived after a higher sequence of their flow,
//!   on the same thread. With threads sharing one socket (no --reuseport) a
//!   flow is split between threads, whose relative order means nothing, so
//!   reordering is counted per thread; loss stays exact because received
//!   counts add up and the highest is the maximum.
//! - duplicates: a sequence seen again within the last [`WINDOW_BITS`]
//!   sequences of the flow on the same thread. Older late packets are taken
//!   as new (reordered), not checked.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};

use super::wire::Header;

/// How far back duplicates are recognised, in sequences.
pub const WINDOW_BITS: u64 = 1024;
const WINDOW_WORDS: usize = (WINDOW_BITS / 64) as usize;

/// One flow's state on one thread.
#[derive(Debug, Clone)]
struct FlowState {
    highest: u64,
    received: u64,
    reordered: u64,
    duplicates: u64,
    /// Bit `seq % WINDOW_BITS` is set when `seq` in
    /// `(highest - WINDOW_BITS, highest]` was received.
    window: [u64; WINDOW_WORDS],
}

impl FlowState {
    fn first(seq: u64) -> FlowState {
        let mut state = FlowState {
            highest: seq,
            received: 1,
            reordered: 0,
            duplicates: 0,
            window: [0; WINDOW_WORDS],
        };
        state.mark(seq);
        state
    }

    fn bit(seq: u64) -> (usize, u64) {
        let pos = seq % WINDOW_BITS;
        ((pos / 64) as usize, 1u64 << (pos % 64))
    }

    fn mark(&mut self, seq: u64) {
        let (word, mask) = Self::bit(seq);
        self.window[word] |= mask;
    }

    fn record(&mut self, seq: u64) {
        if seq > self.highest {
            let ahead = seq - self.highest;
            if ahead >= WINDOW_BITS {
                self.window = [0; WINDOW_WORDS];
            } else {
                // Forget the sequences the window slides over.
                for s in self.highest + 1..seq {
                    let (word, mask) = Self::bit(s);
                    self.window[word] &= !mask;
                }
            }
            self.highest = seq;
            self.mark(seq);
            self.received += 1;
            return;
        }
        if self.highest - seq < WINDOW_BITS {
            let (word, mask) = Self::bit(seq);
            if self.window[word] & mask != 0 {
                self.duplicates += 1;
                return;
            }
            self.window[word] |= mask;
        }
        self.received += 1;
        self.reordered += 1;
    }
}

/// A cheap hash for the packed (sender, flow) key: a multiply and a fold.
/// The keys are not chosen by an attacker who could exploit collisions in a
/// short benchmark, and SipHash per packet is measurable at Mpps.
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

fn key(sender: u32, flow: u16) -> u64 {
    (u64::from(sender) << 16) | u64::from(flow)
}

/// No flow has this key: keys are 48 bits (sender id, flow id).
const NO_KEY: u64 = u64::MAX;

/// One thread's flows. Allocates only when a new flow appears.
///
/// Packets come in runs of one flow (a sender's batch, a super-datagram's
/// segments), so the table remembers the flow of the last packet: a packet
/// of the same flow costs a compare and no hash lookup. At millions of
/// packets per second this is most of the sink's own work per packet
/// besides the kernel's.
#[derive(Debug)]
pub struct FlowTable {
    /// Each flow's position in `states`.
    index: HashMap<u64, usize, BuildHasherDefault<KeyHasher>>,
    states: Vec<(u64, FlowState)>,
    /// The last packet's flow: its key and position in `states`.
    last_key: u64,
    last: usize,
    /// Packets without a nettune header (another sender, or too short).
    foreign: u64,
}

impl Default for FlowTable {
    fn default() -> FlowTable {
        FlowTable::new()
    }
}

impl FlowTable {
    pub fn new() -> FlowTable {
        let mut index = HashMap::default();
        index.reserve(64);
        FlowTable {
            index,
            states: Vec::with_capacity(64),
            last_key: NO_KEY,
            last: 0,
            foreign: 0,
        }
    }

    /// Account one received packet by its first bytes.
    #[inline]
    pub fn record(&mut self, packet: &[u8]) {
        let Some(header) = Header::read(packet) else {
            self.foreign += 1;
            return;
        };
        let key = key(header.sender, header.flow);
        if key == self.last_key {
            if let Some((_, state)) = self.states.get_mut(self.last) {
                state.record(header.seq);
                return;
            }
        }
        self.record_other(key, header.seq);
    }

    /// A packet of another flow than the last one's.
    #[inline(never)]
    fn record_other(&mut self, key: u64, seq: u64) {
        let at = match self.index.get(&key) {
            Some(&at) => {
                if let Some((_, state)) = self.states.get_mut(at) {
                    state.record(seq);
                }
                at
            }
            None => {
                self.states.push((key, FlowState::first(seq)));
                let at = self.states.len() - 1;
                self.index.insert(key, at);
                at
            }
        };
        self.last_key = key;
        self.last = at;
    }

    /// Account `count` packets whose header could not be read.
    #[inline]
    pub fn foreign(&mut self, count: u64) {
        self.foreign += count;
    }

    fn flows(&self) -> impl Iterator<Item = &(u64, FlowState)> {
        self.states.iter()
    }
}

/// The sequence accounting of a whole run, all threads merged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceSummary {
    /// Distinct sender ids seen.
    pub senders: u64,
    /// Distinct (sender, flow) pairs seen.
    pub flows: u64,
    /// Distinct packets with a header.
    pub received: u64,
    /// Sum over flows of highest sequence + 1 - received.
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
    /// Packets without a nettune header.
    pub without_header: u64,
}

/// Merge the threads' tables (see the module comment for why merging by
/// sum and maximum keeps loss exact).
pub fn summarize(tables: &[FlowTable]) -> SequenceSummary {
    #[derive(Default)]
    struct Merged {
        highest: u64,
        received: u64,
    }
    let mut merged: HashMap<u64, Merged> = HashMap::new();
    let mut summary = SequenceSummary::default();
    for table in tables {
        summary.without_header += table.foreign;
        for &(key, ref state) in table.flows() {
            let flow = merged.entry(key).or_default();
            flow.highest = flow.highest.max(state.highest);
            flow.received += state.received;
            summary.reordered += state.reordered;
            summary.duplicates += state.duplicates;
        }
    }
    let senders: BTreeSet<u64> = merged.keys().map(|k| k >> 16).collect();
    summary.senders = senders.len() as u64;
    summary.flows = merged.len() as u64;
    for flow in merged.values() {
        summary.received += flow.received;
        summary.lost += (flow.highest + 1).saturating_sub(flow.received);
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::udp::wire::HEADER_LEN;

    fn packet(sender: u32, flow: u16, seq: u64) -> [u8; 32] {
        let mut p = [0u8; 32];
        let head: &mut [u8; HEADER_LEN] = (&mut p[..HEADER_LEN]).try_into().expect("16");
        Header { sender, flow, seq }.write(head);
        p
    }

    fn feed(table: &mut FlowTable, sender: u32, flow: u16, seqs: &[u64]) {
        for &seq in seqs {
            table.record(&packet(sender, flow, seq));
        }
    }

    #[test]
    fn in_order_flows_lose_nothing() {
        let mut t = FlowTable::new();
        let seqs: Vec<u64> = (0..5000).collect();
        feed(&mut t, 1, 0, &seqs);
        feed(&mut t, 1, 1, &seqs[..10]);
        let s = summarize(&[t]);
        assert_eq!((s.senders, s.flows, s.received, s.lost), (1, 2, 5010, 0));
        assert_eq!((s.reordered, s.duplicates), (0, 0));
    }

    #[test]
    fn gaps_are_lost_until_late_packets_fill_them() {
        let mut t = FlowTable::new();
        feed(&mut t, 1, 0, &[0, 1, 4, 5, 2]);
        let s = summarize(&[t]);
        // 0..=5 expected, 3 never came; 2 came late.
        assert_eq!((s.received, s.lost, s.reordered), (5, 1, 1));
    }

    #[test]
    fn losing_the_first_packets_counts_the_tail_does_not() {
        let mut t = FlowTable::new();
        feed(&mut t, 9, 3, &[3, 4, 5]);
        assert_eq!(summarize(&[t]).lost, 3);
    }

    #[test]
    fn duplicates_inside_the_window_are_not_received_twice() {
        let mut t = FlowTable::new();
        feed(&mut t, 1, 0, &[0, 1, 2, 1, 2, 3]);
        // Far ahead, then a duplicate still inside the window.
        feed(&mut t, 1, 0, &[1000, 1000, 999]);
        let s = summarize(&[t]);
        assert_eq!(s.duplicates, 3);
        assert_eq!(s.received, 6);
        assert_eq!(s.lost, 1001 - 6);
        assert_eq!(s.reordered, 1);
    }

    #[test]
    fn a_window_jump_forgets_old_sequences() {
        let mut t = FlowTable::new();
        feed(&mut t, 1, 0, &[0, 5000, 0]);
        // 0 is older than the window after the jump: taken as new, late.
        let s = summarize(&[t]);
        assert_eq!((s.received, s.duplicates, s.reordered), (3, 0, 1));
        let mut t = FlowTable::new();
        feed(&mut t, 1, 0, &[0, 1024, 1]);
        // 1 is inside the window but was never seen: late, not a duplicate.
        let s = summarize(&[t]);
        assert_eq!((s.received, s.duplicates, s.reordered), (3, 0, 1));
    }

    #[test]
    fn a_flow_split_between_threads_merges_exactly() {
        // One socket shared by two threads: evens on one, odds on the
        // other, and 6 lost.
        let mut a = FlowTable::new();
        let mut b = FlowTable::new();
        feed(&mut a, 7, 0, &[0, 2, 4, 8]);
        feed(&mut b, 7, 0, &[1, 3, 5, 7]);
        let s = summarize(&[a, b]);
        assert_eq!((s.flows, s.received, s.lost, s.reordered), (1, 8, 1, 0));
    }

    #[test]
    fn interleaved_flows_are_each_accounted_as_their_own() {
        // Packet by packet between three flows: the remembered last flow
        // changes on every packet and must never take another's packet.
        let mut t = FlowTable::new();
        for seq in 0..3000u64 {
            let (sender, flow) = [(1, 0), (1, 1), (2, 0)][(seq % 3) as usize];
            if seq % 100 != 99 {
                t.record(&packet(sender, flow, seq / 3));
            }
        }
        let s = summarize(&[t]);
        assert_eq!((s.senders, s.flows), (2, 3));
        // 30 dropped; the last (3000th packet: flow (2, 0)'s sequence 999)
        // is a lost tail, which cannot be told from one still to come.
        assert_eq!((s.received, s.lost), (2970, 29));
        assert_eq!((s.reordered, s.duplicates), (0, 0));
    }

    #[test]
    fn packets_from_other_senders_are_counted_apart() {
        let mut t = FlowTable::new();
        t.record(&[0u8; 32]);
        t.record(&[0x4e, 0x74]);
        feed(&mut t, 1, 0, &[0]);
        feed(&mut t, 2, 0, &[0, 1]);
        let s = summarize(&[t]);
        assert_eq!((s.senders, s.flows, s.received), (2, 2, 3));
        assert_eq!(s.without_header, 2);
    }
}
