//! The drop tracer as a [`ReasonSource`]: what the monitor, its exporter,
//! doctor and experiment are handed, so that they show reasons without
//! depending on the tracer.

use crate::base::drop_reason::{About, PlaceCount, ReasonSource, ReasonTotal, ReasonTotals};

use super::drops::{DropRow, DropTracer, DropsConfig, DropsReport};
use super::TraceError;

/// The whole run's counts as totals.
pub fn totals(report: &DropsReport) -> ReasonTotals {
    ReasonTotals {
        unavailable: None,
        reasons: report.rows.iter().map(total).collect(),
        lost: report.lost,
    }
}

fn total(row: &DropRow) -> ReasonTotal {
    ReasonTotal {
        reason: row.reason.clone(),
        layer: row.layer,
        count: row.count,
        locations: row
            .locations
            .iter()
            .map(|l| PlaceCount {
                name: l.location.clone(),
                count: l.count,
            })
            .collect(),
        protocols: row
            .protocols
            .iter()
            .map(|p| PlaceCount {
                name: Some(p.protocol.clone()),
                count: p.count,
            })
            .collect(),
        about: match &row.advice {
            Some(a) => About {
                what: Some(a.what.clone()),
                fix: a.fix.clone(),
                source: Some(a.source.clone()),
                limit: super::catalog::LIMITS.contains(&row.reason.as_str()),
            },
            None => About::default(),
        },
    }
}

impl ReasonSource for DropTracer {
    fn totals(&mut self) -> ReasonTotals {
        let read = self.sample().and_then(|_| DropTracer::totals(self));
        match read {
            Ok(report) => totals(&report),
            Err(e) => ReasonTotals::unavailable(format!("drop reasons not traced: {e}")),
        }
    }
}

/// Open a drop tracer of every reason (in `netns` when given), for a
/// part that shows reasons beside its counters: the source, or one line
/// saying why there is none.
pub fn open(netns: Option<&str>) -> Result<Box<dyn ReasonSource>, String> {
    let config = DropsConfig {
        netns: netns.map(str::to_string),
        ..DropsConfig::default()
    };
    match DropTracer::open(&config) {
        Ok(tracer) => Ok(Box::new(tracer)),
        Err(e) => Err(unavailable(&e)),
    }
}

/// Why reasons are not traced, for a note.
pub fn unavailable(e: &TraceError) -> String {
    format!("drop reasons not traced (the counters still are): {e}")
}
