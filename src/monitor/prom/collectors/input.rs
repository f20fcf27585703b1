//! What every collector reads: the sample and the findings of its
//! interval.

use crate::host::model::CpuTime;
use crate::monitor::findings::LiveFinding;
use crate::monitor::sample::Sample;

/// What a collector reads: the sample, and the findings of the interval
/// that ended at it (none before the second sample).
pub struct Input<'a> {
    pub sample: &'a Sample,
    /// /proc/stat's CPU times as exported: never going backwards (see
    /// `sampling::CpuTimes`), as node_exporter keeps them.
    pub cpu_time: &'a [CpuTime],
    /// The findings of the last interval and its length in seconds.
    pub findings: Option<(&'a [LiveFinding], f64)>,
}
