//! The charts of a report, as SVG (plotters' SVG backend: no fonts or C
//! libraries needed; text is left to the browser): per bench, bars of the
//! median rate coloured by verdict, with the bootstrap 95% interval as
//! whiskers and every run as a point; per config, a heat map of
//! soft-interrupt time per CPU and bench (with two benches or more); per
//! bench with latency, the percentile curves of every config.

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::experiment::results::Results;
use crate::experiment::stats::{percent, Verdict};

const WIDTH: u32 = 760;
const HEIGHT: u32 = 420;
const FONT: &str = "sans-serif";

/// One chart: its file name in the directory, its SVG text, its caption.
pub struct Chart {
    pub file: String,
    pub svg: String,
    pub title: String,
}

/// Every chart of a report, in the order shown.
pub struct Charts {
    pub bars: Vec<Chart>,
    pub latency: Vec<Chart>,
    pub soft: Vec<Chart>,
}

impl Charts {
    pub fn all(&self) -> impl Iterator<Item = &Chart> {
        self.bars.iter().chain(&self.latency).chain(&self.soft)
    }
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("cannot draw a chart: {e:?}")
}

/// A short number: 245312 -> "245k", 1.3e6 -> "1.30M".
pub fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

fn category(names: &[String], v: &SegmentValue<i32>) -> String {
    match v {
        SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => usize::try_from(*i)
            .ok()
            .and_then(|i| names.get(i))
            .cloned()
            .unwrap_or_default(),
        SegmentValue::Last => String::new(),
    }
}

fn last_index(n: usize) -> i32 {
    i32::try_from(n.max(1) - 1).unwrap_or(0)
}

/// A bar's colour says its verdict, never its place in the list: a
/// candidate that is no different from the reference must not look like a
/// win.
pub fn verdict_color(verdict: Verdict) -> RGBColor {
    match verdict {
        Verdict::Reference => RGBColor(96, 112, 128),
        Verdict::Better => RGBColor(46, 139, 62),
        Verdict::Worse => RGBColor(200, 48, 48),
        Verdict::NoDifference => RGBColor(190, 190, 190),
    }
}

/// The legend of [`verdict_color`], as drawn on each bar chart.
const LEGEND: [(Verdict, &str); 4] = [
    (Verdict::Reference, "reference"),
    (Verdict::Better, "better"),
    (Verdict::Worse, "worse"),
    (Verdict::NoDifference, "no difference"),
];

/// Bars of bench `bench`: one per config, median rate coloured by its
/// verdict, 95% whiskers, each run as a dot, the ratio to the first
/// config on top.
pub fn bars(results: &Results, bench: &str) -> anyhow::Result<String> {
    let metric = results
        .bench(bench)
        .map(|b| b.metric.clone())
        .unwrap_or_default();
    let cells: Vec<_> = results
        .configs
        .iter()
        .filter_map(|c| results.cell(&c.name, bench))
        .collect();
    let names: Vec<String> = cells.iter().map(|c| c.config.clone()).collect();
    let top = cells
        .iter()
        .map(|c| c.summary.ci_high.max(c.summary.max))
        .fold(1.0, f64::max)
        * 1.18;
    let mut svg = String::new();
    {
        let area = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        area.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&area)
            .caption(bench, (FONT, 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d((0..last_index(names.len())).into_segmented(), 0.0..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_label_formatter(&|v| category(&names, v))
            .y_label_formatter(&|v| short(*v))
            .y_desc(format!("{metric} (median, 95% interval)"))
            .y_max_light_lines(1)
            .draw()
            .map_err(err)?;
        for (i, cell) in cells.iter().enumerate() {
            let i = i as i32;
            let color = verdict_color(cell.comparison.verdict).mix(0.85);
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), cell.summary.median),
                ],
                color.filled(),
            );
            bar.set_margin(0, 0, 18, 18);
            chart.draw_series(std::iter::once(bar)).map_err(err)?;
            let (lo, hi) = (cell.summary.ci_low, cell.summary.ci_high);
            let x = SegmentValue::CenterOf(i);
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x.clone(), lo), (x.clone(), hi)],
                    BLACK.stroke_width(2),
                )))
                .map_err(err)?;
            // Caps: a short horizontal line at each end, in pixels.
            for y in [lo, hi] {
                let at = chart.backend_coord(&(x.clone(), y));
                area.draw(&PathElement::new(
                    vec![(at.0 - 8, at.1), (at.0 + 8, at.1)],
                    BLACK.stroke_width(2),
                ))
                .map_err(err)?;
            }
            // Each run, spread across the bar so that equal values stay
            // apart.
            let values: Vec<f64> = results
                .runs
                .iter()
                .filter(|r| r.config == cell.config && r.bench == bench)
                .map(|r| r.value)
                .collect();
            for (k, value) in values.iter().enumerate() {
                let at = chart.backend_coord(&(x.clone(), *value));
                let offset = if values.len() > 1 {
                    (k as f64 / (values.len() - 1) as f64 - 0.5) * 24.0
                } else {
                    0.0
                };
                area.draw(&Circle::new(
                    (at.0 + offset as i32, at.1),
                    3,
                    BLACK.mix(0.7).filled(),
                ))
                .map_err(err)?;
            }
            let label = if cell.comparison.verdict == Verdict::Reference {
                short(cell.summary.median)
            } else {
                format!(
                    "{} {} {}",
                    short(cell.summary.median),
                    percent(cell.comparison.ratio),
                    cell.comparison.verdict.word()
                )
            };
            chart
                .draw_series(std::iter::once(Text::new(
                    label,
                    (x, hi.max(cell.summary.median) + top * 0.02),
                    (FONT, 14)
                        .into_font()
                        .color(&BLACK)
                        .pos(Pos::new(HPos::Center, VPos::Bottom)),
                )))
                .map_err(err)?;
        }
        // The legend, top left inside the plot: colour swatch and word.
        let mut x = 80;
        for (verdict, word) in LEGEND {
            area.draw(&Rectangle::new(
                [(x, 40), (x + 12, 52)],
                verdict_color(verdict).mix(0.85).filled(),
            ))
            .map_err(err)?;
            legend_word(&area, word, x)?;
            x += 24 + 8 * word.len() as i32;
        }
        area.draw(&Circle::new((x + 6, 46), 3, BLACK.mix(0.7).filled()))
            .map_err(err)?;
        legend_word(&area, "one run", x)?;
        area.present().map_err(err)?;
    }
    Ok(svg)
}

/// A legend entry's word, right of its mark at `x`.
fn legend_word<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    word: &str,
    x: i32,
) -> anyhow::Result<()> {
    area.draw(&Text::new(
        word,
        (x + 16, 46),
        (FONT, 13)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center)),
    ))
    .map_err(err)
}

/// White (0%) to red (100%).
fn heat(pct: f64) -> RGBColor {
    let t = (pct / 100.0).clamp(0.0, 1.0);
    let fade = |full: f64| (255.0 - (255.0 - full) * t) as u8;
    RGBColor(fade(200.0), fade(30.0), fade(30.0))
}

/// soft% per CPU (rows) and bench (columns) under config `config`: where
/// the packet processing ran.
pub fn soft_heatmap(results: &Results, config: &str) -> anyhow::Result<String> {
    let benches: Vec<String> = results.benches.iter().map(|b| b.name.clone()).collect();
    let mut cpus: Vec<String> = Vec::new();
    for b in &benches {
        if let Some(cell) = results.cell(config, b) {
            for row in cell.cpus.iter().filter(|r| r.cpu != "all") {
                if !cpus.contains(&row.cpu) {
                    cpus.push(row.cpu.clone());
                }
            }
        }
    }
    let cpu_labels: Vec<String> = cpus.iter().map(|c| format!("CPU {c}")).collect();
    let height = (120 + 44 * cpus.len() as u32).clamp(200, 900);
    let mut svg = String::new();
    {
        let area = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        area.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&area)
            .caption(format!("{config}: %soft per CPU (median)"), (FONT, 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(
                (0..last_index(benches.len())).into_segmented(),
                (0..last_index(cpus.len())).into_segmented(),
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_label_formatter(&|v| category(&benches, v))
            .y_label_formatter(&|v| category(&cpu_labels, v))
            .draw()
            .map_err(err)?;
        for (bi, bench) in benches.iter().enumerate() {
            let Some(cell) = results.cell(config, bench) else {
                continue;
            };
            for (ci, cpu) in cpus.iter().enumerate() {
                let soft = cell
                    .cpus
                    .iter()
                    .find(|r| &r.cpu == cpu)
                    .map_or(0.0, |r| r.shares.soft);
                let (x, y) = (bi as i32, ci as i32);
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [
                            (SegmentValue::Exact(x), SegmentValue::Exact(y)),
                            (SegmentValue::Exact(x + 1), SegmentValue::Exact(y + 1)),
                        ],
                        heat(soft).filled(),
                    )))
                    .map_err(err)?;
                chart
                    .draw_series(std::iter::once(Text::new(
                        format!("{soft:.1}%"),
                        (SegmentValue::CenterOf(x), SegmentValue::CenterOf(y)),
                        (FONT, 15)
                            .into_font()
                            .color(&BLACK)
                            .pos(Pos::new(HPos::Center, VPos::Center)),
                    )))
                    .map_err(err)?;
            }
        }
        area.present().map_err(err)?;
    }
    Ok(svg)
}

/// The latency percentiles of every config for `bench` (None when the
/// bench measures none).
pub fn latency(results: &Results, bench: &str) -> anyhow::Result<Option<String>> {
    let points = ["p50", "p90", "p99", "p99.9", "p99.99"];
    let labels: Vec<String> = points.iter().map(|p| p.to_string()).collect();
    let series: Vec<(String, [f64; 5])> = results
        .configs
        .iter()
        .filter_map(|c| {
            let l = results.cell(&c.name, bench)?.latency.as_ref()?;
            Some((
                c.name.clone(),
                [l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.p9999_us],
            ))
        })
        .collect();
    if series.is_empty() {
        return Ok(None);
    }
    let all = series.iter().flat_map(|(_, v)| v.iter().copied());
    let lo = all.clone().fold(f64::INFINITY, f64::min).max(0.1) * 0.8;
    let hi = all.fold(0.0, f64::max).max(lo * 2.0) * 1.25;
    let mut svg = String::new();
    {
        let area = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        area.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&area)
            .caption(format!("{bench}: latency percentiles"), (FONT, 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(
                (0..last_index(points.len())).into_segmented(),
                (lo..hi).log_scale(),
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_label_formatter(&|v| category(&labels, v))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .y_desc("microseconds (median over runs)")
            .draw()
            .map_err(err)?;
        for (i, (name, values)) in series.iter().enumerate() {
            let color = Palette99::pick(i);
            let line: Vec<(SegmentValue<i32>, f64)> = values
                .iter()
                .enumerate()
                .map(|(x, v)| (SegmentValue::CenterOf(x as i32), *v))
                .collect();
            chart
                .draw_series(LineSeries::new(line, color.stroke_width(2)))
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FONT, 14))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(err)?;
        area.present().map_err(err)?;
    }
    Ok(Some(svg))
}
