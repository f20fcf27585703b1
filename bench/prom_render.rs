//! In-process cost of rendering one exporter reading on a recorded series
//! (made by tests/fixtures/make_hosts.py): the exposition of the first
//! snapshot. (Reading a sample and its rates is monitor's own cost:
//! bench/monitor.sh.) bench/prometheus.sh runs it on
//! the generated 256-CPU / 128-queue host.
//!
//! Usage: prom_render DIR [PASSES]

use std::time::{Duration, Instant};

use nettune::host::Selection;
use nettune::monitor::prom::Sampling;
use nettune::monitor::Feed;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(
        args.next()
            .ok_or_else(|| anyhow::anyhow!("usage: prom_render DIR [PASSES]"))?,
    );
    let passes: usize = args.next().map_or(Ok(200), |p| p.parse())?;
    let feed = Feed::replay(&dir, Selection::default())?;
    let mut sampling = Sampling::start(feed, Duration::from_secs(1))?;
    let mut times = Vec::with_capacity(passes);
    let mut size = (0, 0);
    for _ in 0..passes {
        let t = Instant::now();
        let rendered = sampling.render();
        times.push(t.elapsed());
        size = (rendered.series, rendered.body.len());
    }
    times.sort();
    println!(
        "{}: {} series, {} bytes; render median {:.2} ms, p90 {:.2} ms ({passes} passes)",
        dir.display(),
        size.0,
        size.1,
        times[times.len() / 2].as_secs_f64() * 1000.0,
        times[times.len() * 9 / 10].as_secs_f64() * 1000.0,
    );
    Ok(())
}
