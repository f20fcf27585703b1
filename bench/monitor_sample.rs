//! The cost of one monitor sample plus its rates on a recorded series
//! (`bench/monitor.sh` generates the 128-CPU / 64-queue one and runs this
//! with `cargo run --release --example monitor_sample -- DIR`; `-- live`
//! samples this host back to back).
//!
//! Each pass replays the whole series with a fresh sampler; the first
//! sample of a pass (which also reads the host model: settings, IRQ
//! owners) is timed apart from the others (counters only, as every
//! interval after the first). Prints median, p90 and max in milliseconds.

use std::path::PathBuf;
use std::time::Instant;

use nettune::host::Selection;
use nettune::monitor::series::Series;
use nettune::monitor::{between, findings};

fn main() -> anyhow::Result<()> {
    let dir: PathBuf = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .ok_or_else(|| anyhow::anyhow!("usage: monitor_sample SERIES_DIR | live"))?;
    if dir.as_os_str() == "live" {
        return live();
    }
    let passes: usize = std::env::var("PASSES")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(20);
    let series = Series::load(&dir)?;
    let mut first = Vec::new();
    let mut later = Vec::new();
    let mut rates_only = Vec::new();
    for _ in 0..passes {
        let mut sampler = series.sampler(Selection::default());
        let t = Instant::now();
        let mut prev = series.sample(&mut sampler, 0)?;
        first.push(t.elapsed().as_secs_f64() * 1e3);
        for i in 1..series.len() {
            let t = Instant::now();
            let cur = series.sample(&mut sampler, i)?;
            let r = between(&prev, &cur);
            let f = findings(&r, &cur.state);
            later.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let r2 = between(&prev, &cur);
            rates_only.push(t.elapsed().as_secs_f64() * 1e3);
            assert!(r2.cpus.len() == r.cpus.len() && f.len() < 100);
            prev = cur;
        }
    }
    let mut sampler = series.sampler(Selection::default());
    series.sample(&mut sampler, 0)?;
    if let Some(h) = sampler.host() {
        let queues: usize = h.interfaces.iter().map(|i| i.rx_queues.len()).sum();
        println!(
            "series {} ({} snapshots): {} CPUs, {} RX queues, {} passes",
            dir.display(),
            series.len(),
            h.online_cpus.len(),
            queues,
            passes
        );
    }
    report("first sample (host model + counters)", &mut first);
    report("sample + rates + findings", &mut later);
    report("rates alone (between)", &mut rates_only);
    Ok(())
}

/// This host, sampled back to back: what each interval of a live run costs
/// (the first sample, which reads the host model, apart).
fn live() -> anyhow::Result<()> {
    use nettune::base::Root;
    use nettune::host::Inputs;
    use nettune::monitor::{Sampler, Stamp};
    use nettune::nic::live::{LiveEthtool, LiveNetdev, LiveNetlink};
    let root = Root::live();
    let src = Inputs {
        root: &root,
        ethtool: &LiveEthtool,
        netlink: &LiveNetlink,
        netdev: &LiveNetdev,
        netns: None,
    };
    let mut sampler = Sampler::new(Selection::default()).settings_every(f64::MAX);
    let start = Instant::now();
    let t = Instant::now();
    let mut prev = sampler.sample(&src, Stamp::since(start))?;
    let mut first = vec![t.elapsed().as_secs_f64() * 1e3];
    let mut later = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let cur = sampler.sample(&src, Stamp::since(start))?;
        let r = between(&prev, &cur);
        let _ = findings(&r, &cur.state);
        later.push(t.elapsed().as_secs_f64() * 1e3);
        prev = cur;
    }
    println!(
        "live: {} interfaces, {} CPUs",
        prev.interfaces.len(),
        prev.counters.cpu_time.len()
    );
    report("first sample (host model + counters)", &mut first);
    report("sample + rates + findings", &mut later);
    Ok(())
}

fn report(label: &str, ms: &mut [f64]) {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    println!(
        "{label:<40} median {:>7.3} ms  p90 {:>7.3} ms  max {:>7.3} ms  ({} samples)",
        at(0.5),
        at(0.9),
        at(1.0),
        ms.len()
    );
}
