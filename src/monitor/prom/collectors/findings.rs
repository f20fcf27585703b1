//! The findings of the last interval, one series per doctor rule id.

use super::super::exposition::{Exposition, Kind};
use super::input::Input;

/// What the last interval showed: doctor's ids, one series per finding.
pub fn write(input: &Input, out: &mut Exposition) {
    let Some((findings, _)) = input.findings else {
        return;
    };
    let mut f = out.family(
        "nettune_finding",
        "A finding the last interval showed (doctor's rule id and severity; docs/doctor.md); \
         absent when not seen.",
        Kind::Gauge,
    );
    for finding in findings {
        f.sample(
            &[("id", &finding.id), ("severity", finding.severity.label())],
            1u64,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{value, written};
    use super::*;
    use crate::doctor::Severity;
    use crate::monitor::findings::LiveFinding;
    use crate::monitor::testkit;

    #[test]
    fn one_series_per_finding_and_none_before_an_interval() {
        let sample = testkit::first();
        // No interval yet: no findings family.
        assert!(written(write, &sample, None).is_empty());
        let finding = LiveFinding {
            id: "udp.rcvbuf-errors".to_string(),
            severity: Severity::Crit,
            title: "t".to_string(),
            evidence: "e".to_string(),
        };
        let s = written(write, &sample, Some((&[finding], 1.0)));
        assert_eq!(
            value(
                &s,
                "nettune_finding",
                &[("id", "udp.rcvbuf-errors"), ("severity", "crit")]
            ),
            Some(1.0)
        );
    }
}
