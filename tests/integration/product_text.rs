//! What users read speaks to users and cites public sources, never internal
//! notes or the developers' own work (who ran what, whose builds shared the
//! machine, notes to colleagues, dated work logs; see wording.rs): the help
//! of every command, the plans and findings on every fixture, the
//! repository's documents, scripts, contrib/, packaging/ and fuzz targets, and
//! every string in the binary (each rule's finding text is checked in the
//! library: `doctor::tests::findings_cite_public_sources_only`).

use std::path::Path;

use crate::wording::{internal_names, note_names};
use clap::CommandFactory as _;

use crate::common::*;

const FIXTURES: &[&str] = &[
    "vm-2cpu-virtio",
    "two-socket-smt-8q",
    "two-socket-nic-node1",
];
const PROFILES: &[&str] = &["pps", "latency", "throughput", "http", "baseline"];

fn assert_clean(what: &str, text: &str) {
    let found = internal_names(text);
    assert!(
        found.is_empty(),
        "{what} cites internal notes {found:?}:\n{text}"
    );
}

/// Every command path: `[]`, `["plan"]`, `["bench", "udp-sink"]`, ...
fn command_paths(cmd: &clap::Command, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(prefix.clone());
    for sub in cmd.get_subcommands() {
        let mut path = prefix.clone();
        path.push(sub.get_name().to_string());
        command_paths(sub, path, out);
    }
}

#[test]
fn every_help_text_cites_public_sources_only() {
    let mut paths = Vec::new();
    command_paths(&nettune::cli::Cli::command(), Vec::new(), &mut paths);
    assert!(paths.len() > 12, "{paths:?}");
    for path in paths {
        for flag in ["--help", "-h"] {
            let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
            args.push(flag);
            let (code, out, err) = run(&args);
            assert_eq!(code, 0, "{args:?}: {err}");
            assert!(!out.is_empty(), "{args:?} printed no help");
            assert_clean(&format!("nettune {}", args.join(" ")), &out);
        }
    }
}

#[test]
fn plans_and_findings_on_every_fixture_cite_public_sources_only() {
    for fixture in FIXTURES {
        let root = fixture_str(fixture);
        for profile in PROFILES {
            for format in ["text", "json", "sh"] {
                let args = [
                    "plan",
                    "--profile",
                    profile,
                    "--root",
                    &root,
                    "--format",
                    format,
                ];
                let (code, out, err) = run(&args);
                assert_eq!(code, 0, "{args:?}: {err}");
                assert_clean(&format!("{args:?}"), &out);
            }
        }
        for json in [false, true] {
            let mut args = vec!["doctor", "--all", "--root", &root];
            if json {
                args.push("--json");
            }
            let (code, out, err) = run(&args);
            assert!(code == 0 || code == 1, "{args:?}: {err}");
            assert_clean(&format!("{args:?}"), &out);
        }
    }
}

/// The repository's files a user reads: the top-level documents, docs/,
/// the benchmark scripts and their tools, contrib/, packaging/, the
/// development scripts and the fuzz targets. Each
/// speaks to users (no notes to the team, no account of who ran what), and
/// none is itself a note (`NOTE-FROM-...`).
#[test]
fn repository_files_users_read_speak_to_users_only() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for entry in std::fs::read_dir(top).expect("the checkout") {
        let path = entry.expect("entry").path();
        let upper = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_uppercase()));
        if path.is_file() && (upper || path.extension().is_some_and(|e| e == "md")) {
            files.push(path);
        }
    }
    for dir in [
        "docs",
        "bench",
        "contrib",
        "packaging",
        "scripts",
        "fuzz/src",
    ] {
        // Every file but the charts: text, or skipped below if not.
        let not_a_chart = |p: &Path| p.extension().is_none_or(|e| e != "svg");
        files.extend(files_under(&top.join(dir), &not_a_chart));
    }
    files.sort();
    for must in [
        "README.md",
        "CHANGELOG.md",
        "docs/benchmarks.md",
        "docs/fast-paths.md",
        "bench/udp.sh",
        "contrib/systemd/nettune-serve.service",
        "packaging/debian/postinst",
        "scripts/test",
    ] {
        assert!(files.contains(&top.join(must)), "{must} not scanned");
    }
    let mut failures = Vec::new();
    for file in files {
        let name = file.strip_prefix(top).expect("in the checkout").display();
        let found = internal_names(&name.to_string());
        if !found.is_empty() {
            failures.push(format!("{name} is named as a note: {found:?}"));
        }
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        // Line by line to show where; then the whole text with its lines
        // joined, for a phrase broken across two lines.
        let mut seen = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let found = internal_names(line);
            if !found.is_empty() {
                failures.push(format!("{name}:{}: {found:?}: {line}", n + 1));
                seen.extend(found);
            }
        }
        let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let across: Vec<String> = note_names(&joined)
            .into_iter()
            .filter(|n| !seen.contains(n))
            .collect();
        if !across.is_empty() {
            failures.push(format!("{name}: {across:?} across lines"));
        }
    }
    assert!(
        failures.is_empty(),
        "files that do not speak to users only:\n{}",
        failures.join("\n")
    );
}

/// Every string in the binary: error messages and hints too.
#[test]
fn no_string_in_the_binary_names_internal_notes() {
    let bytes = std::fs::read(env!("CARGO_BIN_EXE_nettune")).expect("read the binary");
    let mut found = Vec::new();
    for run in bytes.split(|b| !(b.is_ascii_graphic() || *b == b' ')) {
        if run.len() < 6 {
            continue;
        }
        let text = String::from_utf8_lossy(run);
        let names = note_names(&text);
        if !names.is_empty() {
            found.push(format!("{names:?} in {text}"));
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

fn fixture_str(name: &str) -> String {
    fixture(name).display().to_string()
}
