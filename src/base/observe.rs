//! What an engine tells while it runs, to whoever drives it: the command
//! line prints it, a monitor or an experiment records it, a daemon sends it
//! to its client. Called from the run's controlling thread (the caller's),
//! never from a worker, so an observer needs no locking.

use std::net::SocketAddr;

/// Hooks for one engine's run; `I` is the engine's interval type. Every
/// method has a default that does nothing.
pub trait Observer<I> {
    /// Sockets are open: servers listen at `addr` (the port the kernel chose
    /// for port 0); `detail` says how (sockets, threads, buffers).
    fn ready(&mut self, _addr: Option<SocketAddr>, _detail: &str) {}
    /// Something the user should know; the run goes on.
    fn warning(&mut self, _text: &str) {}
    /// The warm-up is over; the measured part begins.
    fn measuring(&mut self) {}
    /// One interval (a second) of the measured part.
    fn interval(&mut self, _interval: &I) {}
}

/// An observer that wants nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quiet;

impl<I> Observer<I> for Quiet {}

/// Collects everything, for tests and callers that look afterwards.
#[derive(Debug, Clone)]
pub struct Recorder<I> {
    pub ready: Vec<(Option<SocketAddr>, String)>,
    pub warnings: Vec<String>,
    pub intervals: Vec<I>,
}

impl<I> Default for Recorder<I> {
    fn default() -> Self {
        Recorder {
            ready: Vec::new(),
            warnings: Vec::new(),
            intervals: Vec::new(),
        }
    }
}

impl<I: Clone> Observer<I> for Recorder<I> {
    fn ready(&mut self, addr: Option<SocketAddr>, detail: &str) {
        self.ready.push((addr, detail.to_string()));
    }
    fn warning(&mut self, text: &str) {
        self.warnings.push(text.to_string());
    }
    fn interval(&mut self, interval: &I) {
        self.intervals.push(interval.clone());
    }
}
