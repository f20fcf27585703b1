//! `nettune monitor --prometheus`: the monitor's counters for Prometheus,
//! at `http://ADDR:PORT/metrics`, in the text exposition format 0.0.4.
//!
//! - `exposition.rs`: the format (families, escaping, exact values).
//! - `collectors/`: what is exported, one collector per kernel source and
//!   file, under node_exporter's names where the series is the same thing.
//! - `sampling.rs`: readings on demand (at most one per interval, shared
//!   by every scraper) or a replay on the recording's clock; each reading
//!   rendered once.
//! - `parse.rs`: reads an exposition back (tests, the benchmark).
//! - `http.rs`: a small HTTP/1.1 server on one epoll thread, with bounds
//!   on request size, time and connections; TLS and basic auth from
//!   `web_config.rs` (the exporter-toolkit's `--web.config.file` format).
//!
//! [`run`] ties them: the sampler on a thread of its own, the server on
//! the caller's, both ended by the caller's [`Stop`].
//!
//! Why not a crate: the server needs GET of two paths, keep-alive and
//! hard limits against slow or hostile clients; tiny_http gives a thread
//! per connection and no deadline on a trickled head, hyper or axum bring
//! an async runtime and dozens of crates for the same two paths. The
//! request parser already exists (the bench http-server's, tested against
//! wrk and malformed input), and the loop is the pattern of that server.

pub mod collectors;
pub mod exposition;
pub mod http;
pub mod parse;
pub mod sampling;
pub mod web_config;

use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::time::Duration;

use crate::base::stop::Stop;

pub use collectors::MAX_SERIES;
pub use http::{Counts, Limits};
pub use sampling::{Advance, Rendered, Sampling};

/// The default port: Prometheus' list of default port allocations
/// (github.com/prometheus/prometheus/wiki/Default-port-allocations) has
/// filled 9100-9999 and continues from 10000; this one was free there
/// (and is not an IANA-registered service port). docs/monitor.md says so.
pub const DEFAULT_PORT: u16 = 10056;

/// Where the exporter listens unless told: loopback only.
pub fn default_bind() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT))
}

/// Open the listening socket, with one clear error for a port in use, an
/// address this host does not have, or a port that needs privilege.
pub fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).map_err(|e| {
        let port = addr.port();
        match e.raw_os_error() {
            Some(libc::EADDRINUSE) => anyhow::anyhow!(
                "--bind '{addr}': port {port} is already in use (`ss -tlpn 'sport = :{port}'` \
                 shows by what); stop it or pick another port, e.g. --bind {}:{}",
                addr.ip(),
                port.wrapping_add(1).max(1024)
            ),
            Some(libc::EADDRNOTAVAIL) => anyhow::anyhow!(
                "--bind '{addr}': no interface here has address {} (`ip -br addr` lists them); \
                 use 127.0.0.1 for this host only, 0.0.0.0 for every address",
                addr.ip()
            ),
            Some(libc::EACCES) => anyhow::anyhow!(
                "--bind '{addr}': port {port} is privileged; run as root or pick a port above \
                 1023 (the default is {DEFAULT_PORT})"
            ),
            _ => anyhow::anyhow!("--bind '{addr}': cannot listen: {e}"),
        }
    })
}

/// What happened while the exporter ran, for the caller to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A replay served its last snapshot; it is served until stopped.
    ReplayEnded,
}

/// The sampler thread, seen from the server loop.
struct SamplerLink {
    requests: Sender<()>,
    readings: Receiver<anyhow::Result<Rendered>>,
}

impl http::Readings for SamplerLink {
    fn request(&mut self) {
        // A sampler that ended has sent its error already.
        let _ = self.requests.send(());
    }

    fn take(&mut self) -> Option<anyhow::Result<Rendered>> {
        match self.readings.try_recv() {
            Ok(r) => Some(r),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(Err(anyhow::anyhow!(
                "the exporter's sampling thread ended unexpectedly"
            ))),
        }
    }
}

/// Serve `sampling`'s readings on `listener` until `stop` (Ok with the
/// server's counts) or until a reading fails for good (a namespace
/// deleted, a recorded snapshot damaged: the error). `on_event` hears
/// what the caller may want to tell the user; it runs on the sampler
/// thread.
pub fn run(
    listener: TcpListener,
    mut sampling: Sampling,
    limits: Limits,
    web: Option<web_config::WebConfig>,
    stop: &Stop,
    on_event: &mut (dyn FnMut(Event) + Send),
) -> anyhow::Result<Counts> {
    let first = sampling.render();
    let waker = http::Waker::new()
        .map_err(|e| anyhow::anyhow!("cannot create an eventfd for the exporter: {e}"))?;
    let (request_tx, request_rx) = mpsc::channel::<()>();
    let (reading_tx, reading_rx) = mpsc::channel();
    let link = SamplerLink {
        requests: request_tx,
        readings: reading_rx,
    };
    let mut server = http::Server::new(listener, &waker, link, first, limits)?;
    if let Some(web) = web {
        server = server.with_web(web.tls, web.users);
    }
    std::thread::scope(|scope| {
        let waker = &waker;
        let sampler = scope.spawn(move || {
            sample_on_request(
                &mut sampling,
                &request_rx,
                &reading_tx,
                waker,
                stop,
                on_event,
            )
        });
        let served = server.run(stop);
        // The sampler looks at the token between requests.
        stop.trigger();
        let sampled = sampler.join();
        let counts = served?;
        match sampled {
            Ok(()) => Ok(counts),
            Err(_) => Err(anyhow::anyhow!("the exporter's sampling thread panicked")),
        }
    })
}

/// The sampler thread: a new reading for each request (those that came
/// meanwhile share it), sent to the server, which `waker` wakes.
fn sample_on_request(
    sampling: &mut Sampling,
    requests: &Receiver<()>,
    readings: &Sender<anyhow::Result<Rendered>>,
    waker: &http::Waker,
    stop: &Stop,
    on_event: &mut (dyn FnMut(Event) + Send),
) {
    let mut ended = false;
    while !stop.is_set() {
        match requests.recv_timeout(Duration::from_millis(100)) {
            Ok(()) => {}
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        }
        while requests.try_recv().is_ok() {}
        let reading = sampling.refresh().map(|advance| {
            if advance == Advance::Ended && !ended {
                ended = true;
                on_event(Event::ReplayEnded);
            }
            sampling.render()
        });
        let failed = reading.is_err();
        let _ = readings.send(reading);
        waker.wake();
        if failed {
            return;
        }
    }
}
