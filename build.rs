//! Build script: the git commit (and its date) that `nettune --version`
//! and the man pages name.
//!
//! Read from git when the source is a git checkout; a build from a tarball
//! sets NETTUNE_BUILD_COMMIT (and SOURCE_DATE_EPOCH for the date), and
//! says `unknown` otherwise. Cargo runs this script again only when HEAD
//! moves (the files git changes on a commit, checkout or reset) or those
//! variables change, so an ordinary build does not pay for it.

use std::path::{Path, PathBuf};
use std::process::Command;

const COMMIT_ENV: &str = "NETTUNE_BUILD_COMMIT";
const EPOCH_ENV: &str = "SOURCE_DATE_EPOCH";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed={COMMIT_ENV}");
    println!("cargo:rerun-if-env-changed={EPOCH_ENV}");

    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let git = git_head(&dir);
    if git.is_some() {
        for file in watched_git_files(&dir) {
            println!("cargo:rerun-if-changed={}", file.display());
        }
    }
    let commit = std::env::var(COMMIT_ENV)
        .ok()
        .filter(|c| !c.trim().is_empty())
        .map(|c| c.trim().to_string())
        .or_else(|| git.as_ref().map(|(hash, _)| hash.clone()))
        .unwrap_or_else(|| "unknown".to_string());
    let date = std::env::var(EPOCH_ENV)
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .and_then(date_of_epoch)
        .or_else(|| git.map(|(_, date)| date))
        .unwrap_or_default();
    println!("cargo:rustc-env=NETTUNE_COMMIT={commit}");
    println!("cargo:rustc-env=NETTUNE_COMMIT_DATE={date}");
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// HEAD's abbreviated hash and its commit date (YYYY-MM-DD).
fn git_head(dir: &Path) -> Option<(String, String)> {
    let text = git(
        dir,
        &[
            "log",
            "-1",
            "--no-show-signature",
            "--abbrev=12",
            "--format=%h %cs",
        ],
    )?;
    let (hash, date) = text.split_once(' ')?;
    let hex = !hash.is_empty() && hash.chars().all(|c| c.is_ascii_hexdigit());
    hex.then(|| (hash.to_string(), date.to_string()))
}

/// The files git rewrites when HEAD moves in this checkout (a worktree has
/// its own HEAD and reflog): HEAD, its reflog, the branch's loose ref and
/// the packed refs. Only files that exist: cargo reruns a script on every
/// build when a watched file is missing.
fn watched_git_files(dir: &Path) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for name in ["HEAD", "logs/HEAD", "packed-refs"] {
        if let Some(p) = git(
            dir,
            &["rev-parse", "--path-format=absolute", "--git-path", name],
        ) {
            paths.push(PathBuf::from(p));
        }
    }
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        if let Some(p) = git(
            dir,
            &["rev-parse", "--path-format=absolute", "--git-path", &branch],
        ) {
            paths.push(PathBuf::from(p));
        }
    }
    paths.retain(|p| p.is_file());
    paths
}

/// YYYY-MM-DD (UTC) of a Unix time, as `date` gives it (this is a Linux
/// tool; a build without GNU date has no date on its man pages).
fn date_of_epoch(secs: i64) -> Option<String> {
    let out = Command::new("date")
        .args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%d"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
