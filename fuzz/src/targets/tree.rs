//! A captured tree (`--root DIR`) with one file of the attacker's choice:
//! a fixture host whose file PATH holds the input, read by `inspect`,
//! judged by `doctor` and planned for by `plan` and `steer --dry-run`, as
//! a shared capture is.
//! This reaches every /proc and /sys reader through the real `Root`, the
//! driver file (`nettune/driver.json`) and everything computed from them.
//!
//! Input: byte 0 picks the fixture, byte 1 the command, then `PATH\n` (a
//! path inside the tree) and the file's new contents.

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

pub fn host_tree(data: &[u8]) {
    let [fixture, command, rest @ ..] = data else {
        return;
    };
    let (path, contents) = split(rest, b'\n');
    let Ok(path) = std::str::from_utf8(path) else {
        return;
    };
    if !inside(path) {
        return;
    }
    let which = usize::from(*fixture) % FIXTURES.len();
    let root = hosts().join(FIXTURES[which]);
    let file = root.join(path);
    // Replace a file, or add one where a directory exists; never a
    // directory, never outside the tree (no symlinks are followed out:
    // the fixtures hold none that leave it).
    let original = match fs::symlink_metadata(&file) {
        Ok(meta) if meta.is_file() => match fs::read(&file) {
            Ok(bytes) => Some(bytes),
            Err(_) => return,
        },
        Ok(_) => return,
        Err(_) => {
            if !file.parent().is_some_and(Path::is_dir) {
                return;
            }
            None
        }
    };
    if fs::write(&file, contents).is_err() {
        return;
    }
    let root_text = root.display().to_string();
    let mut args: Vec<&str> = COMMANDS[usize::from(*command) % COMMANDS.len()].to_vec();
    if args[0] == "steer" {
        args.extend(["--iface", FIXTURE_NICS[which]]);
    }
    args.extend(["--root", &root_text]);
    nettune(&args);
    let restored = match original {
        Some(bytes) => fs::write(&file, bytes),
        None => fs::remove_file(&file),
    };
    if let Err(e) = restored {
        panic!("nettune-fuzz: cannot restore {}: {e}", file.display());
    }
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
