//! What users read cites public sources only.
//!
//! Help, doctor findings, plan reasons, error messages and the docs speak to
//! people who have nettune and the public sources it names
//! (docs/sources.md: the kernel's documentation, the articles' public
//! originals, fasterdata.es.net, tuned, bpftune ...), never the notes its
//! developers worked from. [`internal_names`] finds a reference to those
//! notes in a text; the tests run it over every help text, every rule's
//! finding, the plans of every fixture, README.md, docs/ and the binary.

/// Names of internal notes and of the machines they were written on, as
/// they appear in text (matched case-sensitively: they are file names and
/// labels).
const NOTES: &[&str] = &[
    "REFERENCE.md",
    "REFERENCE ",
    "REFERENCE section",
    "ANCHORS",
    "ENVIRONMENT.md",
    "ENVIRONMENT:",
    "ENVIRONMENT \"",
    "STYLE.md",
    "/work/shared",
    "shared/seeds",
];

/// Phrases about the machines the notes were measured on (matched without
/// regard to case).
const MACHINES: &[&str] = &[
    "these vms",
    "these machines",
    "the development vms",
    "development vm",
];

/// The references to internal notes in `text`: note file names, "these
/// VMs", an issue number ("issue 4", "issue-11"), an article's number
/// ("001's", "seed 002"). Empty when the text is clean.
pub fn internal_names(text: &str) -> Vec<String> {
    let mut found = note_names(text);
    found.extend(article_numbers(text));
    found
}

/// [`internal_names`] without the articles' bare numbers: for text such as
/// the strings of a binary, where `001` appears in data of every kind.
pub fn note_names(text: &str) -> Vec<String> {
    let mut found: Vec<String> = NOTES
        .iter()
        .filter(|n| text.contains(*n))
        .map(|n| n.trim().to_string())
        .collect();
    let lower = text.to_lowercase();
    found.extend(
        MACHINES
            .iter()
            .filter(|m| lower.contains(*m))
            .map(|m| (*m).to_string()),
    );
    found.extend(numbered(&lower, "issue"));
    found.extend(numbered(&lower, "seed"));
    found
}

/// `WORD N`, `WORD-N` or `WORD #N` (an issue or seed number).
fn numbered(lower: &str, word: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in lower.match_indices(word) {
        let before = lower[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric()) {
            continue;
        }
        let rest = &lower[at + word.len()..];
        let rest = rest
            .strip_prefix(" #")
            .or_else(|| rest.strip_prefix(' '))
            .or_else(|| rest.strip_prefix('-'))
            .or_else(|| rest.strip_prefix('s').and_then(|r| r.strip_prefix(' ')));
        if rest.is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit())) {
            found.push(lower[at..(at + word.len() + 4).min(lower.len())].to_string());
        }
    }
    found
}

/// The source articles' numbers as the notes write them: `000` to `009`
/// standing alone (`001's netperf`, `(002)`), not inside a larger number
/// (`40,000,000`, `0.001`).
fn article_numbers(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    for (at, _) in text.match_indices("00") {
        let Some(&digit) = bytes.get(at + 2) else {
            continue;
        };
        if !digit.is_ascii_digit() {
            continue;
        }
        let joined =
            |b: Option<&u8>| b.is_some_and(|c| c.is_ascii_alphanumeric() || b".,_:".contains(c));
        let before = at.checked_sub(1).and_then(|i| bytes.get(i));
        if joined(before) || joined(bytes.get(at + 3)) && bytes.get(at + 3) != Some(&b'\'') {
            continue;
        }
        found.push(text[at..at + 3].to_string());
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_kind_of_internal_name() {
        for planted in [
            "see REFERENCE.md §6",
            "rings to maximum (REFERENCE 6)",
            "(ANCHORS: bpftune)",
            "measured on these VMs",
            "on These VMs",
            "(ENVIRONMENT: TCP_RR 14k -> 78k/s)",
            "(issue 4's default --cpus)",
            "issue-11",
            "fixed in issue #3",
            "001's netperf matrix",
            "the DPDK run (002)",
            "seed 003",
            "/work/shared/ANCHORS.md",
        ] {
            assert!(!internal_names(planted).is_empty(), "missed: {planted}");
        }
    }

    #[test]
    fn leaves_ordinary_text_alone() {
        for clean in [
            "40,000,000 interrupts since boot",
            "p50 0.001 s; 0.000 [0.000-0.275]",
            "100,000 packets/s",
            "Documentation/networking/scaling.rst",
            "fasterdata.es.net host tuning; tuned's network-latency profile",
            "an issue with the driver",
            "state-0001.json",
            "netperf reissues 3 requests",
            "CPU 2000000000 is beyond 8191",
            "0x0001, 1000 ms",
        ] {
            assert_eq!(internal_names(clean), Vec::<String>::new(), "{clean}");
        }
    }
}
