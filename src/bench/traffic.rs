//! When a receiver's traffic began and ended, as its reads show it, for
//! every sink that reports a rate (the recvmmsg and io_uring `udp-sink`,
//! the AF_XDP sink): rates are over the traffic's span, as the sender made
//! it, whenever the reader got to read.
//!
//! A reader kept off its CPU (by the receive softirq, a competing process,
//! a stop signal) reads its first batch late and its few reads fall close
//! together: from the first read, a few thousand packets looked like
//! millions a second. Its waits before the traffic began in time, though,
//! so the span starts when the last wait that came back empty began (a few
//! ms before the first packet for a reader that has its CPU). It ends at
//! the last read: once the traffic stops, a starved reader gets its CPU
//! back and drains its queue at once; while it goes on, it reads until the
//! run ends.

use std::time::{Duration, Instant};

/// How long a reader waits for packets before it looks at the phase again
/// until the first packet came: the traffic's start is then known to within
/// about two of these, however late the reader gets to read (see
/// [`TrafficClock::waiting`]).
pub const FIRST_WAIT: Duration = Duration::from_millis(2);

/// One reader's clock: when its waits began until the first packet, and
/// when it read its first and last batch.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrafficClock {
    /// The first packet arrived after this: when the last wait that came
    /// back empty before it began (the queue was empty at its end, or a
    /// signal cut it short), or the first wait's start. At most about two
    /// [`FIRST_WAIT`]s before the packet for a reader that has its CPU.
    waited: Option<Instant>,
    /// Until the first packet: when the current wait began.
    wait_began: Option<Instant>,
    first: Option<Instant>,
    last: Option<Instant>,
}

impl TrafficClock {
    /// About to wait for packets (or to look for them once more). Until the
    /// first one came, note when: the traffic began after the previous
    /// wait, which came back empty, began. A reader kept off its CPU may
    /// begin its next wait late too; the wait before it began in time.
    #[inline]
    pub fn waiting(&mut self) {
        if self.first.is_none() {
            let now = Instant::now();
            self.waited = Some(self.wait_began.unwrap_or(now));
            self.wait_began = Some(now);
        }
    }

    /// Whether no packet came yet: the reader waits [`FIRST_WAIT`].
    #[inline]
    pub fn before_traffic(&self) -> bool {
        self.first.is_none()
    }

    /// A batch was read now.
    #[inline]
    pub fn arrived(&mut self) {
        let now = Instant::now();
        if self.first.is_none() {
            self.first = Some(now);
            self.waited.get_or_insert(now);
        }
        self.last = Some(now);
    }

    /// When the traffic began as this reader saw it; `None` if it read
    /// nothing (an idle reader's last empty wait says nothing about the
    /// traffic).
    pub fn began(&self) -> Option<Instant> {
        self.first.and(self.waited.or(self.first))
    }

    /// A clock as a reader leaves it: its last empty wait began at
    /// `waited`, it read from `first` to `last`.
    #[cfg(test)]
    pub fn read(waited: Instant, first: Instant, last: Instant) -> TrafficClock {
        TrafficClock {
            waited: Some(waited),
            wait_began: Some(waited),
            first: Some(first),
            last: Some(last),
        }
    }
}

/// The traffic's span over the readers that read, in seconds: from the
/// earliest start one saw to the latest last read; 0 when nothing was read.
pub fn traffic_seconds<'a>(clocks: impl IntoIterator<Item = &'a TrafficClock>) -> f64 {
    let (mut began, mut last): (Option<Instant>, Option<Instant>) = (None, None);
    for clock in clocks {
        if let Some(b) = clock.began() {
            began = Some(began.map_or(b, |e| e.min(b)));
        }
        if let Some(l) = clock.last {
            last = Some(last.map_or(l, |e| e.max(l)));
        }
    }
    match (began, last) {
        (Some(began), Some(last)) => last.saturating_duration_since(began).as_secs_f64(),
        _ => 0.0,
    }
}

/// What a sink's rates are over: the traffic's span, or the whole run when
/// it has none (nothing was read). One batch alone still has a span, from
/// the reader's last empty wait to that read: a few ms at most.
pub fn rate_window(traffic_s: f64, duration_s: f64) -> f64 {
    if traffic_s > 0.0 {
        traffic_s
    } else {
        duration_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_span_starts_at_the_last_empty_wait_of_the_readers_that_read() {
        let start = Instant::now();
        let ms = |n: u64| start + Duration::from_millis(n);
        let a = TrafficClock::read(ms(999), ms(1_000), ms(4_000));
        let b = TrafficClock::read(ms(1_000), ms(1_001), ms(3_990));
        let span = traffic_seconds([&a, &b]);
        assert!((span - 3.001).abs() < 1e-9, "{span}");
        // A reader that read nothing does not move the start.
        let mut idle = TrafficClock::default();
        idle.waiting();
        assert!((traffic_seconds([&idle, &a, &b]) - span).abs() < 1e-9);
        assert_eq!(traffic_seconds([&idle]), 0.0);
        assert_eq!(traffic_seconds([]), 0.0);
    }

    #[test]
    fn the_first_packet_counts_from_the_wait_before_the_one_that_found_it() {
        let mut c = TrafficClock::default();
        c.waiting();
        c.waiting();
        let second = c.wait_began.expect("a wait");
        let first = c.waited.expect("a wait");
        assert!(first <= second);
        c.waiting();
        c.arrived();
        // The third wait found the packet; the second came back empty.
        assert_eq!(c.began(), Some(second));
        assert!(!c.before_traffic());
        // Later waits do not move it.
        c.waiting();
        c.arrived();
        assert_eq!(c.began(), Some(second));
    }
}
