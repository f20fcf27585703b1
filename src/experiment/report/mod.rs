//! The report directory of an experiment: `results.json` (everything),
//! `report.md` (the SMP IRQ affinity and RPS/RFS article's table: configs x
//! benches, rate, ratio with its interval, soft% per CPU), the SVG charts,
//! and `report.html`, one self-contained page that shows them all.

pub mod charts;
mod html;
mod markdown;
pub(crate) mod text;

use std::path::{Path, PathBuf};

use anyhow::Context as _;

pub use self::charts::{Chart, Charts};
use super::results::Results;

pub fn charts(results: &Results) -> anyhow::Result<Charts> {
    let mut out = Charts {
        bars: Vec::new(),
        latency: Vec::new(),
        soft: Vec::new(),
    };
    for (i, bench) in results.benches.iter().enumerate() {
        out.bars.push(Chart {
            file: format!("bench-{}.svg", i + 1),
            svg: charts::bars(results, &bench.name)?,
            title: format!("{}: {} per config", bench.name, bench.metric),
        });
        if let Some(svg) = charts::latency(results, &bench.name)? {
            out.latency.push(Chart {
                file: format!("bench-{}-latency.svg", i + 1),
                svg,
                title: format!("{}: latency percentiles per config", bench.name),
            });
        }
    }
    // A heat map of one column says nothing the per-CPU table does not:
    // it is drawn from two benches on.
    let heat_maps = if results.benches.len() > 1 {
        results.configs.as_slice()
    } else {
        &[]
    };
    for (i, config) in heat_maps.iter().enumerate() {
        out.soft.push(Chart {
            file: format!("soft-{}.svg", i + 1),
            svg: charts::soft_heatmap(results, &config.name)?,
            title: format!("{}: soft-interrupt time per CPU", config.name),
        });
    }
    Ok(out)
}

/// Write results.json, report.md, the charts and report.html into `dir`
/// (created if needed); returns the report page's path.
pub fn write(results: &Results, dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    results.save(dir)?;
    let charts = charts(results)?;
    for chart in charts.all() {
        let path = dir.join(&chart.file);
        std::fs::write(&path, &chart.svg)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let md = dir.join("report.md");
    std::fs::write(&md, markdown::report(results, &charts))
        .with_context(|| format!("cannot write {}", md.display()))?;
    let page = dir.join("report.html");
    std::fs::write(&page, html::report(results, &charts))
        .with_context(|| format!("cannot write {}", page.display()))?;
    Ok(page)
}
