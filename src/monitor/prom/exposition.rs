//! The Prometheus text exposition format, version 0.0.4
//! (<https://prometheus.io/docs/instrumenting/exposition_formats/>): a
//! writer that keeps each metric family in one block under its `# HELP` and
//! `# TYPE` lines, escapes label values and HELP text as the format asks,
//! and counts the series it wrote (the exporter's cardinality bound is
//! checked on that count).
//!
//! A family's HELP and TYPE lines are written with its first sample, so a
//! family with no samples (an interface without per-queue counters) leaves
//! nothing behind, as node_exporter's do.

use std::fmt::Write as _;

/// The Content-Type of a response in this format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A metric family's type, as the `# TYPE` line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (or restarts from zero): the server takes rate().
    Counter,
    /// A value that goes up and down: a setting, a state.
    Gauge,
    /// No type: what node_exporter's netstat collector writes for the SNMP
    /// counters, matched here so that both exporters' series are one.
    Untyped,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Untyped => "untyped",
        }
    }
}

/// A sample's value: integers are written exactly, floats as Rust's
/// shortest round-trip form (what Prometheus' parser reads back exactly).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Int(u64),
    Float(f64),
    /// USER_HZ ticks as seconds, written exactly (`449.04`, not
    /// `449.04000000000002`): /proc/stat's CPU times.
    Ticks(u64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Int(v)
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Value {
        Value::Int(u64::from(v))
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Int(u64::from(v))
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

/// USER_HZ: /proc/stat counts CPU time in these ticks. The kernel exports
/// 100 on every architecture (include/asm-generic/param.h), which is also
/// what node_exporter divides by.
pub const USER_HZ: u64 = 100;

/// The text of one exposition, family after family.
#[derive(Debug, Default)]
pub struct Exposition {
    text: String,
    series: usize,
}

impl Exposition {
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// Start the family `name`; its samples follow until the next family.
    /// `name` must be a valid metric name and unique in the exposition
    /// (the collectors' tests check both).
    pub fn family<'a>(&'a mut self, name: &'a str, help: &'a str, kind: Kind) -> Family<'a> {
        Family {
            out: self,
            name,
            help,
            kind,
            started: false,
        }
    }

    /// Series written so far.
    pub fn series(&self) -> usize {
        self.series
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.text.into_bytes()
    }

    /// Append another exposition (a collector's, written on its own).
    pub fn append(&mut self, other: Exposition) {
        self.text.push_str(&other.text);
        self.series += other.series;
    }
}

/// One metric family being written.
pub struct Family<'a> {
    out: &'a mut Exposition,
    name: &'a str,
    help: &'a str,
    kind: Kind,
    started: bool,
}

impl Family<'_> {
    /// One sample with its labels (name, value) in the order given.
    pub fn sample(&mut self, labels: &[(&str, &str)], value: impl Into<Value>) {
        let text = &mut self.out.text;
        if !self.started {
            self.started = true;
            text.push_str("# HELP ");
            text.push_str(self.name);
            text.push(' ');
            escape_help(self.help, text);
            text.push_str("\n# TYPE ");
            text.push_str(self.name);
            text.push(' ');
            text.push_str(self.kind.word());
            text.push('\n');
        }
        text.push_str(self.name);
        if !labels.is_empty() {
            text.push('{');
            for (i, (name, value)) in labels.iter().enumerate() {
                if i > 0 {
                    text.push(',');
                }
                text.push_str(name);
                text.push_str("=\"");
                escape_label(value, text);
                text.push('"');
            }
            text.push('}');
        }
        text.push(' ');
        write_value(value.into(), text);
        text.push('\n');
        self.out.series += 1;
    }
}

fn write_value(value: Value, text: &mut String) {
    // Writing into a String cannot fail.
    let _ = match value {
        Value::Int(v) => write!(text, "{v}"),
        Value::Ticks(t) => write!(text, "{}.{:02}", t / USER_HZ, t % USER_HZ),
        Value::Float(v) if v.is_nan() => write!(text, "NaN"),
        Value::Float(v) if v.is_infinite() => {
            write!(text, "{}", if v > 0.0 { "+Inf" } else { "-Inf" })
        }
        Value::Float(v) => write!(text, "{v}"),
    };
}

/// Label values: backslash, double quote and line feed are escaped.
fn escape_label(value: &str, text: &mut String) {
    for c in value.chars() {
        match c {
            '\\' => text.push_str("\\\\"),
            '"' => text.push_str("\\\""),
            '\n' => text.push_str("\\n"),
            c => text.push(c),
        }
    }
}

/// HELP text: backslash and line feed are escaped.
fn escape_help(help: &str, text: &mut String) {
    for c in help.chars() {
        match c {
            '\\' => text.push_str("\\\\"),
            '\n' => text.push_str("\\n"),
            c => text.push(c),
        }
    }
}

/// A metric or label name as the format allows it
/// (`[a-zA-Z_:][a-zA-Z0-9_:]*`; labels without the colon).
pub fn valid_name(name: &str, label: bool) -> bool {
    let ok = |c: char, first: bool| {
        c.is_ascii_alphabetic()
            || c == '_'
            || (!label && c == ':')
            || (!first && c.is_ascii_digit())
    };
    let mut chars = name.chars();
    chars.next().is_some_and(|c| ok(c, true)) && chars.all(|c| ok(c, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_have_help_and_type_once_and_only_with_samples() {
        let mut e = Exposition::new();
        let mut f = e.family(
            "node_softnet_dropped_total",
            "Number of dropped packets",
            Kind::Counter,
        );
        f.sample(&[("cpu", "0")], 0u64);
        f.sample(&[("cpu", "1")], 17u64);
        e.family("nettune_empty", "never written", Kind::Gauge);
        let mut g = e.family("node_procs_running", "Runnable.", Kind::Gauge);
        g.sample(&[], 3u64);
        assert_eq!(
            e.as_str(),
            "# HELP node_softnet_dropped_total Number of dropped packets\n\
             # TYPE node_softnet_dropped_total counter\n\
             node_softnet_dropped_total{cpu=\"0\"} 0\n\
             node_softnet_dropped_total{cpu=\"1\"} 17\n\
             # HELP node_procs_running Runnable.\n\
             # TYPE node_procs_running gauge\n\
             node_procs_running 3\n"
        );
        assert_eq!(e.series(), 3);
    }

    #[test]
    fn escapes_label_values_and_help() {
        let mut e = Exposition::new();
        let mut f = e.family("x", "a \\ b\nc \"q\"", Kind::Untyped);
        f.sample(&[("l", "back\\slash \"quoted\"\nnext")], 1u64);
        assert_eq!(
            e.as_str(),
            "# HELP x a \\\\ b\\nc \"q\"\n# TYPE x untyped\n\
             x{l=\"back\\\\slash \\\"quoted\\\"\\nnext\"} 1\n"
        );
    }

    #[test]
    fn values_are_exact() {
        let mut text = String::new();
        for v in [
            Value::Ticks(44904),
            Value::Ticks(7),
            Value::Int(u64::MAX),
            Value::Float(0.1),
            Value::Float(f64::NAN),
            Value::Float(f64::NEG_INFINITY),
            Value::Float(1e21),
        ] {
            write_value(v, &mut text);
            text.push(' ');
        }
        assert_eq!(
            text,
            "449.04 0.07 18446744073709551615 0.1 NaN -Inf 1000000000000000000000 "
        );
    }

    #[test]
    fn names() {
        assert!(valid_name("node_cpu_seconds_total", false));
        assert!(valid_name("a:b", false) && !valid_name("a:b", true));
        assert!(!valid_name("0abc", false) && !valid_name("", true) && !valid_name("a-b", false));
    }
}
