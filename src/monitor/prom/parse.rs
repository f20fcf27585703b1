//! Reads a text exposition back, checking what the format requires of
//! it: each family's `# HELP` and `# TYPE` at most once and before its
//! samples, a family's samples in one block, valid names, no series twice.
//! For the tests, and for the benchmark that compares this exporter's
//! values with node_exporter's (it reads either's output).

use std::collections::{BTreeMap, BTreeSet};

use super::exposition::valid_name;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A whole exposition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    pub series: Vec<Series>,
    /// Family name -> its TYPE word.
    pub types: BTreeMap<String, String>,
    pub help: BTreeMap<String, String>,
}

impl Parsed {
    /// The value of `name` with exactly these labels.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.series
            .iter()
            .find(|s| {
                s.name == name
                    && s.labels.len() == labels.iter().filter(|(_, v)| !v.is_empty()).count()
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map_or(v.is_empty(), |x| x == v))
            })
            .map(|s| s.value)
    }
}

/// Parse `text`; the error names the line and what is wrong.
pub fn parse(text: &str) -> Result<Parsed, String> {
    let mut out = Parsed::default();
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut current: Option<String> = None;
    let mut seen: BTreeSet<(String, Vec<(String, String)>)> = BTreeSet::new();
    for (n, line) in text.lines().enumerate() {
        let at = |what: String| format!("line {}: {what}: '{line}'", n + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut words = rest.splitn(3, ' ');
            let (kw, name, tail) = (words.next(), words.next(), words.next());
            let (Some(kw @ ("HELP" | "TYPE")), Some(name)) = (kw, name) else {
                continue; // another comment
            };
            if !valid_name(name, false) {
                return Err(at(format!("'{name}' is not a metric name")));
            }
            if done.contains(name) || current.as_deref() == Some(name) {
                return Err(at(format!("{kw} of '{name}' after its samples")));
            }
            let map = if kw == "HELP" {
                &mut out.help
            } else {
                &mut out.types
            };
            if map
                .insert(name.to_string(), tail.unwrap_or("").to_string())
                .is_some()
            {
                return Err(at(format!("a second {kw} for '{name}'")));
            }
            if kw == "TYPE"
                && !matches!(
                    tail,
                    Some("counter" | "gauge" | "untyped" | "summary" | "histogram")
                )
            {
                return Err(at("an unknown TYPE".to_string()));
            }
            if let Some(prev) = current.take() {
                if prev != name {
                    done.insert(prev);
                }
            }
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let series = sample(line).map_err(&at)?;
        if done.contains(&series.name) {
            return Err(at(format!(
                "'{}' continues after another family began",
                series.name
            )));
        }
        if current.as_deref() != Some(series.name.as_str()) {
            if let Some(prev) = current.replace(series.name.clone()) {
                done.insert(prev);
            }
        }
        let key = (
            series.name.clone(),
            series
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        );
        if !seen.insert(key) {
            return Err(at("the same series twice".to_string()));
        }
        out.series.push(series);
    }
    Ok(out)
}

fn sample(line: &str) -> Result<Series, String> {
    let name_end = line
        .find(['{', ' '])
        .ok_or_else(|| "no value".to_string())?;
    let name = &line[..name_end];
    if !valid_name(name, false) {
        return Err(format!("'{name}' is not a metric name"));
    }
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(mut inner) = rest.strip_prefix('{') {
        // label="value" (, label="value")* }
        loop {
            if let Some(after) = inner.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = inner
                .find('=')
                .ok_or_else(|| "a label without '='".to_string())?;
            let label = &inner[..eq];
            if !valid_name(label, true) {
                return Err(format!("'{label}' is not a label name"));
            }
            let quoted = inner[eq + 1..]
                .strip_prefix('"')
                .ok_or_else(|| "a label value without quotes".to_string())?;
            let (value, used) = unquote(quoted)?;
            if labels.insert(label.to_string(), value).is_some() {
                return Err(format!("label '{label}' twice"));
            }
            inner = &quoted[used..];
            if let Some(after) = inner.strip_prefix(',') {
                inner = after;
            } else if !inner.starts_with('}') {
                return Err("a label list not closed".to_string());
            }
        }
    }
    value_of(name, labels, rest)
}

/// A label value up to its closing quote: the value and the bytes used
/// (the quote included).
fn unquote(quoted: &str) -> Result<(String, usize), String> {
    let mut value = String::new();
    let mut escaped = false;
    for (i, c) in quoted.char_indices() {
        match (escaped, c) {
            (true, 'n') => value.push('\n'),
            (true, c @ ('\\' | '"')) => value.push(c),
            (true, c) => return Err(format!("a bad escape '\\{c}'")),
            (false, '\\') => {}
            (false, '"') => return Ok((value, i + 1)),
            (false, c) => value.push(c),
        }
        escaped = !escaped && c == '\\';
    }
    Err("an unterminated label value".to_string())
}

fn value_of(name: &str, labels: BTreeMap<String, String>, rest: &str) -> Result<Series, String> {
    let mut words = rest.split_whitespace();
    let value = words.next().ok_or_else(|| "no value".to_string())?;
    let value = match value {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v
            .parse::<f64>()
            .map_err(|_| format!("'{v}' is not a value"))?,
    };
    if let Some(ts) = words.next() {
        ts.parse::<i64>()
            .map_err(|_| format!("'{ts}' is not a timestamp"))?;
    }
    if words.next().is_some() {
        return Err("text after the value".to_string());
    }
    Ok(Series {
        name: name.to_string(),
        labels,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_samples_and_labels() {
        let p = parse(
            "# HELP a_total x\n# TYPE a_total counter\na_total{cpu=\"0\",mode=\"idle\"} 1.5\n\
             a_total{cpu=\"1\",mode=\"q\\\"\\\\\\n\"} 2 1700000000000\nb 3\n",
        )
        .expect("parses");
        assert_eq!(p.series.len(), 3);
        assert_eq!(
            p.get("a_total", &[("cpu", "0"), ("mode", "idle")]),
            Some(1.5)
        );
        assert_eq!(p.series[1].labels["mode"], "q\"\\\n");
        assert_eq!(p.get("b", &[]), Some(3.0));
        assert_eq!(p.types["a_total"], "counter");
    }

    #[test]
    fn refuses_what_the_format_forbids() {
        for bad in [
            "a 1\nb 1\na 2\n",
            "a{x=\"1\"} 1\na{x=\"1\"} 2\n",
            "# TYPE a counter\n# TYPE a counter\na 1\n",
            "a 1\n# HELP a late\n",
            "a{x=1} 1\n",
            "a{x=\"1\" 1\n",
            "0a 1\n",
            "a one\n",
            "a{x=\"1\",x=\"2\"} 1\n",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
