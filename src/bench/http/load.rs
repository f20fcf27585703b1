//! `bench http`: a wrk-style load generator. Each thread runs one epoll
//! loop over its share of keep-alive connections and keeps plain counters
//! and its own HDR histograms, merged after join; the main thread only
//! sleeps, reports progress, sets stop and joins.
//!
//! Closed loop (default): every connection keeps `--pipeline` requests in
//! flight; the next ones go out once the batch of responses that freed
//! them is read (see `worker`). Open loop
//! (`--rate`): each thread owns a schedule (request k is due at
//! start + k / rate) and hands each due request to a free connection. A
//! request that waits because every connection is busy still counts its
//! latency from its scheduled time (corrected for coordinated omission);
//! the latency from its actual send is kept separately.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::output::{self, ThreadStats};
use super::worker::Worker;
use super::{Header, LoadArgs, Url};
use crate::base::Root;
use crate::bench::pin::Pinning;
use crate::bench::report::{LiveCounter, Progress};
use crate::bench::stop::{self, Stop};
use crate::bench::ticking;
use crate::error::Status;

/// Connection attempts before the run starts, and the pause between them.
const PREFLIGHT_TRIES: u32 = 3;
const PREFLIGHT_PAUSE: Duration = Duration::from_millis(200);

pub fn run(args: &LoadArgs, stop: &Stop) -> anyhow::Result<Status> {
    let threads = args.threads as usize;
    let connections = args.connections as usize;
    if connections < threads {
        anyhow::bail!(
            "-c '{connections}' is less than -t '{threads}': every thread needs at least one \
             connection; raise -c or lower -t"
        );
    }
    let rates = split_rate(args.rate, threads)?;
    let pinning = if args.pin_cpus {
        Pinning::all_allowed()?
    } else {
        Pinning::resolve(args.pin.as_deref(), &Root::live())?
    };
    let addr = args.url.resolve()?;
    preflight(addr, &args.url)?;
    let request = build_request(&args.url, &args.headers);
    let pipeline = args.pipeline as usize;
    let batch = request.repeat(pipeline);

    if !args.json {
        println!("{}", output::running_line(args));
    }
    let stop_flag = AtomicBool::new(false);
    let live: Vec<LiveCounter> = (0..threads).map(|_| LiveCounter::default()).collect();
    let mut progress = Progress::new(true);
    let start = Instant::now();
    let shared = Shared {
        addr,
        batch: &batch,
        request_len: request.len(),
        pipeline,
        timeout: args.timeout,
        record_from: start + args.warmup,
        stop: &stop_flag,
    };
    let total = args.warmup.saturating_add(args.duration);

    let (ended, elapsed, results) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let plan = Plan {
                    cpu: pinning.cpu_for(i),
                    connections: connections / threads + usize::from(i < connections % threads),
                    rate: rates[i],
                };
                let (shared, live) = (&shared, &live[i]);
                scope.spawn(move || Worker::new(shared, plan)?.run(live))
            })
            .collect();
        let mut last = 0u64;
        let (ended, elapsed) = ticking::run_ticking(start, total, &stop_flag, stop, |second| {
            let now: u64 = live.iter().map(|l| l.read().0).sum();
            let phase = if Duration::from_secs(second) <= args.warmup {
                " (warm-up)"
            } else {
                ""
            };
            progress.show(&format!("http {second} s: {} req/s{phase}", now - last));
            last = now;
        });
        let results: Vec<anyhow::Result<ThreadStats>> = stop::join_all(handles, "load");
        (ended, elapsed, results)
    });
    progress.clear();
    let results = results.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    let measured = elapsed.saturating_sub(args.warmup);
    let report = output::build(args, ended, measured, results);
    if args.json {
        crate::bench::report::print_json(&report)?;
    } else {
        output::print_text(&report)?;
    }
    Ok(Status::Clean)
}

/// Split `--rate` over the threads (the first ones take the remainder).
fn split_rate(rate: Option<u64>, threads: usize) -> anyhow::Result<Vec<Option<u64>>> {
    let Some(rate) = rate else {
        return Ok(vec![None; threads]);
    };
    let n = threads as u64;
    if rate < n {
        anyhow::bail!(
            "--rate '{rate}' is below -t '{threads}': each thread sends at least 1 request/s; \
             raise --rate or lower -t"
        );
    }
    Ok((0..n)
        .map(|i| Some(rate / n + u64::from(i < rate % n)))
        .collect())
}

/// Try to connect before starting, so a wrong port is one clear error and
/// not a report full of connect errors.
fn preflight(addr: SocketAddr, url: &Url) -> anyhow::Result<()> {
    let mut last = None;
    for attempt in 0..PREFLIGHT_TRIES {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            Ok(_) => return Ok(()),
            Err(e) => last = Some(e),
        }
        if attempt + 1 < PREFLIGHT_TRIES {
            std::thread::sleep(PREFLIGHT_PAUSE);
        }
    }
    let why = match last {
        Some(e) if e.kind() == io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
        Some(e) if e.kind() == io::ErrorKind::TimedOut => "no answer within 2 s".to_string(),
        Some(e) => e.to_string(),
        None => "no attempt made".to_string(),
    };
    anyhow::bail!(
        "cannot connect to {addr} ('{}'): {why} ({PREFLIGHT_TRIES} tries); is a server listening there?",
        url.text
    )
}

/// The request every connection sends, wrk style: `GET PATH HTTP/1.1`, the
/// Host header (unless -H gives one), then the -H headers.
fn build_request(url: &Url, headers: &[Header]) -> Vec<u8> {
    let mut text = format!("GET {} HTTP/1.1\r\n", url.path);
    if !headers.iter().any(|h| h.name.eq_ignore_ascii_case("host")) {
        text.push_str(&format!("Host: {}\r\n", url.authority));
    }
    for h in headers {
        text.push_str(&format!("{}: {}\r\n", h.name, h.value));
    }
    text.push_str("\r\n");
    text.into_bytes()
}

/// What every thread shares (read only).
pub(super) struct Shared<'a> {
    pub(super) addr: SocketAddr,
    /// The request repeated `pipeline` times: any run of queued requests is
    /// a suffix of it, so unsent output is just a byte count.
    pub(super) batch: &'a [u8],
    pub(super) request_len: usize,
    pub(super) pipeline: usize,
    pub(super) timeout: Duration,
    /// Statistics count from here (after the warm-up).
    pub(super) record_from: Instant,
    pub(super) stop: &'a AtomicBool,
}

/// One thread's share.
pub(super) struct Plan {
    pub(super) cpu: Option<u32>,
    pub(super) connections: usize,
    pub(super) rate: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_split_keeps_the_total() {
        let split = split_rate(Some(10), 3).expect("split");
        assert_eq!(split, vec![Some(4), Some(3), Some(3)]);
        assert!(split_rate(Some(1), 2)
            .expect_err("below threads")
            .to_string()
            .contains("'1'"));
        assert_eq!(split_rate(None, 2).expect("none"), vec![None, None]);
    }

    #[test]
    fn request_is_what_wrk_sends() {
        let url = super::super::url::parse("http://127.0.0.1:8080/json").expect("url");
        assert_eq!(
            build_request(&url, &[]),
            b"GET /json HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"
        );
        let host = Header {
            name: "Host".into(),
            value: "server.tld".into(),
        };
        assert_eq!(
            build_request(&url, &[host]),
            b"GET /json HTTP/1.1\r\nHost: server.tld\r\n\r\n"
        );
    }
}
