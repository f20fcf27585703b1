//! What doctor says: a finding, how bad it is, and the plan changes that
//! fix it.

use serde::{Deserialize, Serialize};

use crate::plan::Target;

/// How bad a finding is. Ordered: `Info < Warn < Crit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; does not change the exit status.
    Info,
    /// Costs performance or loses packets; exit status 1.
    Warn,
    /// Caps the host's network path now; exit status 1.
    Crit,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Crit => "crit",
        }
    }
}

/// One thing doctor found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Stable id from [`super::RULE_IDS`].
    pub id: &'static str,
    pub severity: Severity,
    /// One line.
    pub title: String,
    /// The numbers the rule saw.
    pub evidence: String,
    /// The mechanism, with the public source it comes from (docs/sources.md).
    pub why: String,
    /// The concrete change, with the values `nettune plan` writes; where
    /// the plan leaves a setting alone, what to do by hand and why.
    pub fix: String,
    /// The `nettune plan --profile` that makes the fix, if one does: named
    /// only when its plan changes something for this finding.
    pub profile: Option<&'static str>,
    /// What that profile's plan changes for this finding, exactly as
    /// `nettune plan --json` lists it.
    pub changes: Vec<PlannedChange>,
    /// The plan targets that carry this finding's fix (filled by the rule,
    /// read by [`super::planned::attach`]).
    #[serde(skip)]
    pub(crate) scope: Vec<Target>,
}

/// A plan change on a finding: `target`, `from`, `to` exactly as
/// `nettune plan --json` prints them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedChange {
    pub target: Target,
    pub from: String,
    pub to: String,
}
