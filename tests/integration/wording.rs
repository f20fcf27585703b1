//! What users read speaks to users only and cites public sources.
//!
//! Help, doctor findings, plan reasons, error messages, the docs and the
//! repository's other files speak to people who have nettune and the public
//! sources it names (docs/sources.md: the kernel's documentation, the
//! articles' public originals, fasterdata.es.net, tuned, bpftune ...). They
//! never cite the notes its developers worked from, and never tell of the
//! developers' own work: who ran what, whose builds shared a machine, notes
//! addressed to colleagues, goals met or missed, dated work logs (the
//! history stays in git). [`internal_names`] finds either in a text.
//!
//! Test code: the integration tests (product_text.rs) run it over every help
//! text, the plans and findings of every fixture, README.md, CHANGELOG.md,
//! docs/, contrib/, packaging/, bench/ and the binary; the library's own
//! tests include this file (src/lib.rs, under `#[cfg(test)]`) to check every
//! rule's finding.

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
    "the ci machines",
    "the ci vms",
];

/// Phrases about the developers' own work, as whole words without regard
/// to case. Phrases, not single words: "session" alone is HTTP's and TLS's,
/// "helper" alone is BPF's and debhelper's, "by hand" alone is what a user
/// does.
const TEAM: &[&str] = &[
    // Whose builds shared the machine, and why it was busy.
    "other engineers",
    "engineers' builds",
    "engineers compiling",
    "other builds",
    "other builders",
    "other helpers",
    "other jobs",
    "other tenants",
    "builds ran",
    "builds running",
    "builds were running",
    "machine was shared",
    "vm was shared",
    "host was shared",
    // Notes addressed to colleagues.
    "the lead",
    "note-from",
    "note from the",
    "note to the team",
    "notes to the team",
    "the team",
    "helper engineer",
    "todo for",
    "todo:",
    "fixme",
    // Who ran what.
    "we ran",
    "we measured",
    "we found",
    "we know",
    "i ran",
    "i measured",
    "measured by hand",
    "run by hand",
    "runs by hand",
    "pairs by hand",
    "the final code",
    "merge of main",
    // The work's goals, met or not.
    "goal met",
    "goal is met",
    "goal is not met",
    "goal not met",
    "goal holds",
    "goal is missed",
    "goals met",
    "target is met",
    "targets are met",
    "target is missed",
    "**not met**",
    "**not shown**",
    // Work sessions.
    "both sessions",
    "same session",
    "each session",
    "this session",
    "one session to",
    "work session",
];

/// Work sessions named by a letter, matched case-sensitively ("session A").
const SESSION_LABELS: &[&str] = &["session A", "session B", "Session A", "Session B"];

/// What in `text` users should not read: references to internal notes
/// (note file names, "these VMs", an issue number such as "issue 4" or
/// "issue-11", an article's number such as "001's" or "seed 002") and text
/// about the developers' own work (see [`TEAM`], dates of a work log).
/// Empty when the text is clean.
pub fn internal_names(text: &str) -> Vec<String> {
    let mut found = note_names(text);
    found.extend(article_numbers(text));
    found.extend(work_log_dates(text));
    found
}

/// [`internal_names`] without the articles' bare numbers and calendar
/// dates: for text such as the strings of a binary, where `001` appears in
/// data of every kind and the compiler names its release date.
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
    found.extend(team_phrases(&lower));
    found.extend(goal_verdicts(&lower));
    found.extend(
        SESSION_LABELS
            .iter()
            .filter(|l| !words_at(text, l).is_empty())
            .map(|l| (*l).to_string()),
    );
    found.extend(work_log_times(text));
    found
}

/// The [`TEAM`] phrases in `lower` (already lower case).
fn team_phrases(lower: &str) -> Vec<String> {
    TEAM.iter()
        .filter(|p| !words_at(lower, p).is_empty())
        .map(|p| (*p).to_string())
        .collect()
}

/// A sentence (or table row) that says whether a goal was met: "The goal
/// holds", "the goal (...) is not met", "| goal | ... | met |".
fn goal_verdicts(lower: &str) -> Vec<String> {
    let mut found = Vec::new();
    for sentence in lower.split(['.', '|']).flat_map(|s| s.split("\n\n")) {
        let goal = ["goal", "goals"]
            .iter()
            .any(|w| !words_at(sentence, w).is_empty());
        let verdict = ["met", "missed", "holds", "not shown", "reached"]
            .iter()
            .find(|w| !words_at(sentence, w).is_empty());
        if let (true, Some(verdict)) = (goal, verdict) {
            found.push(format!("goal ... {verdict}"));
        }
    }
    found
}

/// Where `phrase` stands in `text` as whole words: not inside a longer word
/// ("the lead" is not in "the leading", "i ran" not in "wi ran").
fn words_at(text: &str, phrase: &str) -> Vec<usize> {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let starts_word = phrase.starts_with(word);
    let ends_word = phrase.ends_with(word);
    text.match_indices(phrase)
        .filter(|(at, _)| {
            let before = text[..*at].chars().next_back();
            let after = text[at + phrase.len()..].chars().next();
            !(starts_word && before.is_some_and(word) || ends_word && after.is_some_and(word))
        })
        .map(|(at, _)| at)
        .collect()
}

/// Calendar dates (`2026-11-25`) of a work log: "Run 2026-11-22", "(2026-11-25,
/// load average ...)". Left alone: a timestamp (`2026-11-22T14:34:54Z`, as
/// in a JSON example) and a changelog's release heading (`## [0.1.0] -
/// 2026-11-26`).
fn work_log_dates(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        if line.starts_with("## [") {
            continue;
        }
        let b = line.as_bytes();
        for at in 0..b.len() {
            let Some(date) = b.get(at..at + 10) else {
                break;
            };
            let shape = date.iter().enumerate().all(|(i, c)| match i {
                4 | 7 => *c == b'-',
                _ => c.is_ascii_digit(),
            });
            let joined = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_alphanumeric());
            let before = at.checked_sub(1).and_then(|i| b.get(i));
            let after = b.get(at + 10);
            if !shape
                || !(date.starts_with(b"19") || date.starts_with(b"20"))
                || joined(before)
                || after == Some(&b'T')
                || joined(after)
            {
                continue;
            }
            found.push(format!("date {}", String::from_utf8_lossy(date)));
        }
    }
    found
}

/// Times of day of a work log: "at 14:28", "(16:25, after ...)",
/// "03:36-03:42", "04:27 UTC". Addresses and ports (`127.0.0.1:8080`,
/// `fe80::1`) are not times.
fn work_log_times(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut found = Vec::new();
    for at in 0..b.len() {
        let Some(t) = b.get(at..at + 5) else {
            break;
        };
        let digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
        if !(digits(&t[..2]) && t[2] == b':' && digits(&t[3..])) {
            continue;
        }
        let hour = (t[0] - b'0') * 10 + (t[1] - b'0');
        let minute = (t[3] - b'0') * 10 + (t[4] - b'0');
        let near =
            |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_alphanumeric() || b".:".contains(c));
        let before = at.checked_sub(1).and_then(|i| b.get(i));
        if hour > 23 || minute > 59 || near(before) || near(b.get(at + 5)) {
            continue;
        }
        let head = &text[..at];
        let tail = &text[at + 5..];
        let range = tail.len() >= 6
            && tail.as_bytes()[0] == b'-'
            && digits(&tail.as_bytes()[1..3])
            && tail.as_bytes()[3] == b':';
        if head.ends_with("at ") || head.ends_with('(') || tail.starts_with(" UTC") || range {
            found.push(format!("time {}", String::from_utf8_lossy(t)));
        }
    }
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

    fn all_found(planted: &[&str]) {
        for text in planted {
            assert!(!internal_names(text).is_empty(), "missed: {text}");
        }
    }

    fn all_clean(clean: &[&str]) {
        for text in clean {
            assert_eq!(internal_names(text), Vec::<String>::new(), "{text}");
        }
    }

    #[test]
    fn finds_every_kind_of_internal_name() {
        all_found(&[
            "see REFERENCE.md §6",
            "rings to maximum (REFERENCE 6)",
            "(ANCHORS: bpftune)",
            "measured on these VMs",
            "On a 2-vCPU VM like the CI machines",
            "on These VMs",
            "(ENVIRONMENT: TCP_RR 14k -> 78k/s)",
            "(issue 4's default --cpus)",
            "issue-11",
            "fixed in issue #3",
            "001's netperf matrix",
            "the DPDK run (002)",
            "seed 003",
            "/work/shared/ANCHORS.md",
        ]);
    }

    #[test]
    fn leaves_ordinary_text_alone() {
        all_clean(&[
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
        ]);
    }

    #[test]
    fn finds_text_about_the_teams_work() {
        all_found(&[
            "The machine was shared with other engineers' builds and benchmarks",
            "(other engineers compiling and testing on both CPUs)",
            "Runs 2026-11-22 with the final code (the same VM; other helpers' builds",
            "while other builds ran",
            "The VM was shared with other jobs",
            "set by the other tenants' load",
            "Session A (15:23, load 3.3 to 7.0)",
            "| | session A | session B | goal |",
            "The goal holds against nginx in both sessions",
            "compare within a session; the same session",
            "The overhead goal is met",
            "The goal of 1.3x is **not met**",
            "The goal (throughput at least iperf3's) is not met for one stream",
            "Six alternated pairs by hand afterwards",
            "the configuration measured by hand at 1.37x",
            "before the last merge of main",
            "NOTE-FROM-LEAD.md",
            "Ask the lead before merging",
            "TODO for the next helper: rerun",
            "TODO: rerun on a quiet host",
            "a helper engineer ran it",
            "What we know of the gap",
            "We ran it twice",
            "A second run at 14:28, load average 3.2",
            "A quiet run (16:25, after the builds had stopped)",
            "run A 03:36-03:42 at load average 15.9",
            "Run 2026-11-25 04:27 UTC with the final code",
            "A quiet run (2026-11-25, load average 1.3-1.5)",
            "on 2026-11-25 with other builds running on both CPUs",
            "The first version, developed from 2026-11-22.",
        ]);
    }

    #[test]
    fn leaves_sessions_helpers_and_dates_of_products_alone() {
        all_clean(&[
            "rustls with the *ring* provider; no session resumption.",
            "| `http_head` | the request head parser and the server session |",
            "The HTTP rules (`src/bench/http/session.rs`) only turn bytes into bytes",
            "A typical session: `nettune doctor`, then `nettune plan`",
            "deb-systemd-helper purge nettune-monitor.service",
            "bpf-helpers(7); `bpf_probe_read_kernel`, a helper for GPL-compatible programs",
            "queue IRQs look pinned by hand; set by hand (`IRQBALANCE_BANNED_CPULIST`)",
            "A plan file comes from elsewhere (another run, a colleague, a pipeline)",
            "the leading zeros; mislead; a misleading figure",
            "\"time\": \"2026-11-22T14:34:54Z\",",
            "## [0.1.0] - 2026-11-26",
            "--bind 127.0.0.1:8080 and [fe80::1]:9000, 10.0.0.1:22",
            "p50 12:30 is no time; 1:30 neither; ratio 3:1",
            "the kernel's load average: 1.2, 1.4, 1.3",
            "the goal of a profile is a faster host",
            "a machine shared with other work: read the ratios",
        ]);
    }
}
