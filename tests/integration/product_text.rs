//! What users read cites public sources, never internal notes: the help of
//! every command, the plans and findings on every fixture, README.md and
//! docs/, and every string in the binary (each rule's finding text is
//! checked in the library: `doctor::tests::findings_cite_public_sources_only`).

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

#[test]
fn readme_and_docs_cite_public_sources_only() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![top.join("README.md")];
    for entry in std::fs::read_dir(top.join("docs")).expect("docs/") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    assert!(files.len() > 5, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        assert_clean(&file.display().to_string(), &text);
    }
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
