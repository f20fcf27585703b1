//! `Probe<T>`: a value, or why there is none.
//!
//! Drivers and kernels legitimately lack things. "Not supported" (the
//! driver said EOPNOTSUPP) and "unknown" (nobody asked: an offline tree
//! without driver data) are answers, not errors, and are shown as such.
//! In JSON a probe is the value itself, or the string `"not_supported"`
//! or `"unknown"`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Probe<T> {
    Value(T),
    Missing(Missing),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Missing {
    /// The driver or kernel does not support it.
    NotSupported,
    /// Not known: no driver data for an offline tree, or the query failed.
    Unknown,
}

impl<T> Default for Probe<T> {
    fn default() -> Self {
        Probe::Missing(Missing::Unknown)
    }
}

impl<T> Probe<T> {
    pub const NOT_SUPPORTED: Probe<T> = Probe::Missing(Missing::NotSupported);
    pub const UNKNOWN: Probe<T> = Probe::Missing(Missing::Unknown);

    pub fn value(&self) -> Option<&T> {
        match self {
            Probe::Value(v) => Some(v),
            Probe::Missing(_) => None,
        }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Probe<U> {
        match self {
            Probe::Value(v) => Probe::Value(f(v)),
            Probe::Missing(m) => Probe::Missing(m),
        }
    }

    /// What to print where the value would be: "not supported" / "unknown".
    pub fn missing_text(&self) -> Option<&'static str> {
        match self {
            Probe::Value(_) => None,
            Probe::Missing(Missing::NotSupported) => Some("not supported"),
            Probe::Missing(Missing::Unknown) => Some("unknown"),
        }
    }
}

impl<T> From<Option<T>> for Probe<T> {
    fn from(value: Option<T>) -> Self {
        match value {
            Some(v) => Probe::Value(v),
            None => Probe::UNKNOWN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_the_value_or_a_word() {
        let v: Probe<u32> = Probe::Value(512);
        assert_eq!(serde_json::to_string(&v).expect("json"), "512");
        let n: Probe<u32> = Probe::NOT_SUPPORTED;
        assert_eq!(
            serde_json::to_string(&n).expect("json"),
            "\"not_supported\""
        );
        let back: Probe<u32> = serde_json::from_str("\"unknown\"").expect("parse");
        assert_eq!(back, Probe::UNKNOWN);
        let back: Probe<u32> = serde_json::from_str("7").expect("parse");
        assert_eq!(back, Probe::Value(7));
    }
}
