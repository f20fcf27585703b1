//! A captured tree (`--root DIR`) with one file of the attacker's choice:
//! a fixture host whose file PATH holds the input, read by `inspect`,
//! judged by `doctor` and planned for by `plan` and `steer --dry-run`, as
//! a shared capture is.
//! This reaches every /proc and /sys reader through the real `Root`, the
//! driver file (`nettune/driver.json`) and everything computed from them.
//!
//! Input: byte 0 picks the fixture, byte 1 the command, then `PATH\n` (a
//! path inside the tree) and the file's new contents; up to four such
//! files separated by NUL bytes.

use std::fs;
use std::path::{Component, Path};

use crate::common::{hosts, nettune, split, FIXTURES, FIXTURE_NICS};

const COMMANDS: &[&[&str]] = &[
    &["inspect", "--json"],
    &["inspect"],
    &["doctor", "--json"],
    &["doctor"],
    &["plan", "--profile", "pps", "--format", "sh"],
    &["plan", "--profile", "latency", "--json"],
    &["plan", "--profile", "throughput"],
    &["plan", "--profile", "http", "--json"],
    &["plan", "--profile", "baseline"],
    // The fixture's NIC is added: --iface NIC.
    &[
        "steer",
        "--dry-run",
        "--queue",
        "1",
        "--flow",
        "udp dst-port 53",
    ],
];

/// A relative path that stays inside the tree.
fn inside(path: &str) -> bool {
    !path.is_empty()
        && Path::new(path)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

/// A file replaced (or added) for one run, put back on drop.
struct Replaced {
    file: std::path::PathBuf,
    original: Option<Vec<u8>>,
}

impl Drop for Replaced {
    fn drop(&mut self) {
        let restored = match self.original.take() {
            Some(bytes) => fs::write(&self.file, bytes),
            None => fs::remove_file(&self.file),
        };
        if let Err(e) = restored {
            panic!("nettune-fuzz: cannot restore {}: {e}", self.file.display());
        }
    }
}

/// Put `contents` at `path` inside `root`: a file replaced, or added where
/// a directory exists; never a directory, never outside the tree (the
/// fixtures hold no symlink that leaves it).
fn replace(root: &Path, path: &[u8], contents: &[u8]) -> Option<Replaced> {
    let path = std::str::from_utf8(path).ok().filter(|p| inside(p))?;
    let file = root.join(path);
    let original = match fs::symlink_metadata(&file) {
        Ok(meta) if meta.is_file() => Some(fs::read(&file).ok()?),
        Ok(_) => return None,
        Err(_) if file.parent().is_some_and(Path::is_dir) => None,
        Err(_) => return None,
    };
    fs::write(&file, contents).ok()?;
    Some(Replaced { file, original })
}

/// The most files one input replaces.
const MAX_FILES: usize = 4;

pub fn host_tree(data: &[u8]) {
    let [fixture, command, rest @ ..] = data else {
        return;
    };
    let which = usize::from(*fixture) % FIXTURES.len();
    let root = hosts().join(FIXTURES[which]);
    // `PATH\nCONTENTS`, several separated by NUL bytes (kernel text
    // files hold none), so that files can disagree with each other.
    let mut replaced = Vec::new();
    for entry in rest.split(|&b| b == 0).take(MAX_FILES) {
        let (path, contents) = split(entry, b'\n');
        match replace(&root, path, contents) {
            Some(r) => replaced.push(r),
            None => return,
        }
    }
    let root_text = root.display().to_string();
    let mut args: Vec<&str> = COMMANDS[usize::from(*command) % COMMANDS.len()].to_vec();
    if args[0] == "steer" {
        args.extend(["--iface", FIXTURE_NICS[which]]);
    }
    args.extend(["--root", &root_text]);
    nettune(&args);
    // Put back in reverse order (a path named twice gets its first
    // original back).
    while replaced.pop().is_some() {}
}

/// `nettune/driver.json` of a capture (the NIC answers `--root` sees):
/// byte 0 picks the fixture, byte 1 the command, the rest is the file.
pub fn driver_file(data: &[u8]) {
    let [fixture, command, contents @ ..] = data else {
        return;
    };
    let mut input = vec![*fixture, *command];
    input.extend_from_slice(b"nettune/driver.json\n");
    input.extend_from_slice(contents);
    host_tree(&input);
}
