//! What the collectors' tests share: a collector's or the whole
//! exposition of a sample, read back as series.

use crate::monitor::findings::LiveFinding;
use crate::monitor::sample::Sample;

use super::super::exposition::Exposition;
use super::super::parse::{parse, Series};
use super::{render, Input};

/// The exposition of `sample` (and the interval's `findings`) as text,
/// and its count of series.
pub fn render_of(sample: &Sample, findings: Option<(&[LiveFinding], f64)>) -> (String, usize) {
    let input = Input {
        sample,
        cpu_time: &sample.counters.cpu_time,
        findings,
    };
    let e = render(&input);
    let n = e.series();
    (e.as_str().to_string(), n)
}

/// The series one collector writes for `sample`, checked by the parser
/// as a scrape would be.
pub fn written(
    write: fn(&Input, &mut Exposition),
    sample: &Sample,
    findings: Option<(&[LiveFinding], f64)>,
) -> Vec<Series> {
    let input = Input {
        sample,
        cpu_time: &sample.counters.cpu_time,
        findings,
    };
    let mut e = Exposition::new();
    write(&input, &mut e);
    let text = e.as_str();
    parse(text)
        .unwrap_or_else(|err| panic!("{err}\n{text}"))
        .series
}

/// The value of the series `name` with (at least) `labels`.
pub fn value(series: &[Series], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    series
        .iter()
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
}
