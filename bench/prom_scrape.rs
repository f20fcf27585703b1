//! The scraping side of bench/prometheus.sh: scrape several exporters in
//! turn, as Prometheus does (keep-alive, its request headers, gzip
//! accepted), and report per exporter the time from request to last byte,
//! the bytes on the wire, and the exporter's CPU time per scrape (from
//! /proc/PID/stat, everything it did meanwhile included); then scrape the
//! first two once more without compression, back to back, and compare
//! the series both write.
//!
//! Usage: prom_scrape SECONDS_BETWEEN ROUNDS NAME=ADDR:PORT@PID ...

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use nettune::monitor::prom::parse::{parse, Parsed};

/// What Prometheus 2.42 sends with a scrape.
const PROMETHEUS_HEADERS: &str = "User-Agent: Prometheus/2.42.0\r\n\
Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n\
Accept-Encoding: gzip\r\n\
X-Prometheus-Scrape-Timeout-Seconds: 10\r\n";

struct Target {
    name: String,
    addr: SocketAddr,
    pid: u32,
    conn: Option<TcpStream>,
    times_us: Vec<u64>,
    bytes: u64,
    cpu_start: u64,
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) in parentheses.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let num = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15; `after` starts at field 3.
    num(11) + num(12)
}

fn clk_tck() -> u64 {
    // SAFETY: sysconf has no memory preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).unwrap_or(100)
}

/// One GET /metrics on `conn` (reconnecting when needed): the body as
/// received (maybe gzip), and its wire size.
fn scrape(t: &mut Target, extra_headers: &str) -> anyhow::Result<(Vec<u8>, usize)> {
    if t.conn.is_none() {
        let s = TcpStream::connect_timeout(&t.addr, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(15)))?;
        s.set_nodelay(true)?;
        t.conn = Some(s);
    }
    let conn = t
        .conn
        .as_mut()
        .ok_or_else(|| anyhow::anyhow!("no connection"))?;
    let request = format!(
        "GET /metrics HTTP/1.1\r\nHost: {}\r\n{extra_headers}\r\n",
        t.addr
    );
    conn.write_all(request.as_bytes())?;
    let mut buf = Vec::with_capacity(1 << 16);
    let mut chunk = [0u8; 65536];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = conn.read(&mut chunk)?;
        anyhow::ensure!(n > 0, "{}: connection closed in a head", t.name);
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    anyhow::ensure!(head.starts_with("http/1.1 200"), "{}: {head}", t.name);
    let mut body = buf[head_end..].to_vec();
    if let Some(len) = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        while body.len() < len {
            let n = conn.read(&mut chunk)?;
            anyhow::ensure!(n > 0, "{}: connection closed in a body", t.name);
            body.extend_from_slice(&chunk[..n]);
        }
        return Ok((body, head_end + len));
    }
    anyhow::ensure!(
        head.contains("transfer-encoding: chunked"),
        "{}: unframed",
        t.name
    );
    // Chunked: read until the last chunk, then join.
    while !body.ends_with(b"0\r\n\r\n") {
        let n = conn.read(&mut chunk)?;
        anyhow::ensure!(n > 0, "{}: connection closed in a chunked body", t.name);
        body.extend_from_slice(&chunk[..n]);
    }
    let wire = head_end + body.len();
    let mut out = Vec::with_capacity(body.len());
    let mut rest = &body[..];
    loop {
        let eol = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| anyhow::anyhow!("bad chunk"))?;
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..eol])?.trim(), 16)?;
        rest = &rest[eol + 2..];
        if size == 0 {
            break;
        }
        out.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
    Ok((out, wire))
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Compare the series both write. A counter may differ by what it
/// counted in the moments between the two readings: the difference is
/// expressed in seconds of its own rate (measured over the rounds), and
/// must be under one scrape interval. Returns (compared, worst line).
fn agree(
    ours: &Parsed,
    theirs: &Parsed,
    rate: &BTreeMap<String, f64>,
    window: f64,
) -> (usize, usize, Vec<String>) {
    let mut compared = 0;
    let mut outside = Vec::new();
    let mut equal = 0;
    for s in ours.series.iter().filter(|s| s.name.starts_with("node_")) {
        let pairs: Vec<(&str, &str)> = s
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let Some(other) = theirs.get(&s.name, &pairs) else {
            continue;
        };
        compared += 1;
        let diff = (s.value - other).abs();
        if diff == 0.0 {
            equal += 1;
            continue;
        }
        let key = format!("{}{:?}", s.name, s.labels);
        let per_sec = rate.get(&key).copied().unwrap_or(0.0);
        let gauge = matches!(
            s.name.as_str(),
            "node_procs_running" | "node_procs_blocked" | "node_netstat_Tcp_CurrEstab"
        ) || s.name.starts_with("node_network_up")
            || s.name.ends_with("_bytes") && !s.name.ends_with("_total");
        // /proc/stat counts CPU time in USER_HZ ticks (1/100 s): two reads
        // of an idle CPU's counter can differ by one tick while its rate
        // over the rounds is itself one tick per second.
        let tick = if s.name == "node_cpu_seconds_total" {
            0.01 + 1e-9
        } else {
            0.0
        };
        let ok = gauge || diff <= tick || (per_sec > 0.0 && diff / per_sec <= window);
        if !ok {
            outside.push(format!(
                "{key}: ours {} theirs {other} (rate {per_sec:.2}/s)",
                s.value
            ));
        }
    }
    (compared, equal, outside)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    anyhow::ensure!(
        args.len() >= 4,
        "usage: prom_scrape SECONDS_BETWEEN ROUNDS NAME=ADDR:PORT@PID NAME=ADDR:PORT@PID ..."
    );
    let every = Duration::from_secs_f64(args[0].parse()?);
    let rounds: usize = args[1].parse()?;
    let mut targets = Vec::new();
    for spec in &args[2..] {
        let (name, rest) = spec
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("'{spec}': NAME=ADDR:PORT@PID"))?;
        let (addr, pid) = rest
            .split_once('@')
            .ok_or_else(|| anyhow::anyhow!("'{spec}': NAME=ADDR:PORT@PID"))?;
        targets.push(Target {
            name: name.to_string(),
            addr: addr.parse()?,
            pid: pid.parse()?,
            conn: None,
            times_us: Vec::new(),
            bytes: 0,
            cpu_start: 0,
        });
    }
    anyhow::ensure!(targets.len() >= 2, "agreement needs two targets");
    let read = |t: &mut Target| -> anyhow::Result<(Parsed, Instant)> {
        let (body, _) = scrape(t, "")?;
        let at = Instant::now();
        let parsed =
            parse(std::str::from_utf8(&body)?).map_err(|e| anyhow::anyhow!("{}: {e}", t.name))?;
        Ok((parsed, at))
    };
    // The first exporter's counters before the rounds: with those after,
    // each counter's rate over the whole run.
    let (ours0, t0) = read(&mut targets[0])?;
    // A first scrape each (connections open, caches warm), then the
    // measured rounds: in turn, spread over each period.
    for t in targets.iter_mut() {
        scrape(t, PROMETHEUS_HEADERS)?;
        t.cpu_start = cpu_ticks(t.pid);
    }
    let start = Instant::now();
    let slot = every / targets.len() as u32;
    for round in 0..rounds {
        for (k, t) in targets.iter_mut().enumerate() {
            let due = start + every * round as u32 + slot * k as u32;
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let t0 = Instant::now();
            let (_, wire) = scrape(t, PROMETHEUS_HEADERS)?;
            t.times_us.push(t0.elapsed().as_micros() as u64);
            t.bytes += wire as u64;
        }
    }
    let hz = clk_tck() as f64;
    println!(
        "{:<28} {:>8} {:>10} {:>10} {:>10} {:>12} {:>14}",
        "exporter", "scrapes", "p50 ms", "p90 ms", "max ms", "kB/scrape", "CPU ms/scrape"
    );
    for t in targets.iter_mut() {
        let cpu = (cpu_ticks(t.pid) - t.cpu_start) as f64 / hz * 1000.0;
        let mut sorted = t.times_us.clone();
        sorted.sort_unstable();
        let n = sorted.len().max(1) as f64;
        println!(
            "{:<28} {:>8} {:>10.2} {:>10.2} {:>10.2} {:>12.1} {:>14.2}",
            t.name,
            sorted.len(),
            percentile(&sorted, 0.5) as f64 / 1000.0,
            percentile(&sorted, 0.9) as f64 / 1000.0,
            sorted.last().copied().unwrap_or(0) as f64 / 1000.0,
            t.bytes as f64 / n / 1000.0,
            cpu / n
        );
    }
    // Agreement: the first two targets, uncompressed, back to back (a
    // fresh reading of the first: its last one is older than --interval).
    std::thread::sleep(every);
    let (ours1, t1) = read(&mut targets[0])?;
    let (theirs1, t2) = read(&mut targets[1])?;
    let secs = t1.duration_since(t0).as_secs_f64();
    let rate: BTreeMap<String, f64> = ours1
        .series
        .iter()
        .filter_map(|s| {
            let pairs: Vec<(&str, &str)> = s
                .labels
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let before = ours0.get(&s.name, &pairs)?;
            Some((
                format!("{}{:?}", s.name, s.labels),
                (s.value - before) / secs,
            ))
        })
        .collect();
    let gap = t2.duration_since(t1).as_secs_f64();
    let (compared, equal, outside) = agree(&ours1, &theirs1, &rate, every.as_secs_f64());
    println!(
        "agreement: {compared} series both write, {equal} equal, {} within one scrape interval \
         ({:.1} s) of their own rate, {} outside (the two reads {:.1} ms apart)",
        compared - equal - outside.len(),
        every.as_secs_f64(),
        outside.len(),
        gap * 1000.0
    );
    for line in outside.iter().take(20) {
        println!("  outside: {line}");
    }
    let families = |p: &Parsed| -> std::collections::BTreeSet<String> {
        p.series.iter().map(|s| s.name.clone()).collect()
    };
    let shared: Vec<String> = families(&ours1)
        .intersection(&families(&theirs1))
        .cloned()
        .collect();
    println!(
        "families both write ({}): {}",
        shared.len(),
        shared.join(" ")
    );
    if !outside.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}
