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
use std::time::{Duration, Instant};

use super::output::{self, LoadReport};
use super::worker::{Plan, Shared, Worker};
use super::{Header, LoadConfig, Url};
use crate::base::observe::Observer;
use crate::base::stop::Stop;
use crate::base::Root;
use crate::bench::harness::{self, Control, Placement, Timeline};
use crate::bench::netns;
use crate::bench::pin::Pinning;
use crate::bench::report::LiveCounter;

/// Connection attempts before the run starts, and the pause between them.
const PREFLIGHT_TRIES: u32 = 3;
const PREFLIGHT_PAUSE: Duration = Duration::from_millis(200);

/// One second of the measured part: requests completed in it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LoadInterval {
    pub second: u64,
    pub requests: u64,
}

/// Load the server for the config's warm-up and duration, or until `stop`.
pub fn run(
    config: &LoadConfig,
    stop: &Stop,
    observer: &mut dyn Observer<LoadInterval>,
) -> anyhow::Result<LoadReport> {
    config.validate()?;
    let threads = config.threads as usize;
    let connections = config.connections as usize;
    let rates = split_rate(config.rate, threads);
    let pinning = Pinning::new(config.pin.clone(), &Root::live())?;
    let addr = config.url.resolve()?;
    netns::within(config.netns.as_deref(), || preflight(addr, &config.url))?;
    let request = build_request(&config.url, &config.headers);
    let pipeline = config.pipeline as usize;
    let batch = request.repeat(pipeline);
    observer.ready(None, &output::running_line(config));

    let live: Vec<LiveCounter> = (0..threads).map(|_| LiveCounter::default()).collect();
    let record_from = Instant::now() + config.warmup;
    let mut control = Meter {
        live: &live,
        last: 0,
        observer,
    };
    let tasks: Vec<(Plan, &LiveCounter)> = (0..threads)
        .map(|i| {
            let plan = Plan {
                cpu: pinning.cpu_for(i),
                connections: connections / threads + usize::from(i < connections % threads),
                rate: rates[i],
            };
            (plan, &live[i])
        })
        .collect();
    let timeline = Timeline {
        warmup: config.warmup,
        duration: Some(config.duration),
    };
    let placement = Placement {
        pinning: &pinning,
        netns: config.netns.as_deref(),
    };
    let done = harness::run(
        tasks,
        placement,
        stop,
        &timeline,
        &mut control,
        |_, (plan, live), phase| {
            let shared = Shared {
                addr,
                batch: &batch,
                request_len: request.len(),
                pipeline,
                timeout: config.timeout,
                record_from,
                phase,
            };
            Worker::new(&shared, plan)?.run(live)
        },
    )?;
    Ok(output::build(
        config,
        done.ended,
        done.elapsed,
        done.results,
    ))
}

/// Requests per second for the observer, from the workers' totals.
struct Meter<'a> {
    live: &'a [LiveCounter],
    last: u64,
    observer: &'a mut dyn Observer<LoadInterval>,
}

impl Control for Meter<'_> {
    fn measuring(&mut self) {
        self.last = self.live.iter().map(|l| l.read().0).sum();
        self.observer.measuring();
    }

    fn tick(&mut self, second: u64) {
        let now: u64 = self.live.iter().map(|l| l.read().0).sum();
        self.observer.interval(&LoadInterval {
            second,
            requests: now.saturating_sub(self.last),
        });
        self.last = now;
    }
}

/// Split the rate over the threads (the first ones take the remainder);
/// `validate` made sure each gets at least 1.
fn split_rate(rate: Option<u64>, threads: usize) -> Vec<Option<u64>> {
    let Some(rate) = rate else {
        return vec![None; threads];
    };
    let n = threads as u64;
    (0..n)
        .map(|i| Some(rate / n + u64::from(i < rate % n)))
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_split_keeps_the_total() {
        assert_eq!(split_rate(Some(10), 3), vec![Some(4), Some(3), Some(3)]);
        assert_eq!(split_rate(None, 2), vec![None, None]);
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
