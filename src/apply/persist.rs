//! `apply --persist`: what makes the applied settings survive a reboot.
//! Sysctls go to /etc/sysctl.d/90-nettune.conf; the per-device settings
//! (IRQ affinity, RPS/XPS, ethtool, qdisc, governor, haltpoll) to a script
//! that a oneshot systemd unit runs at boot. Everything below the `--root`
//! tree when there is one. `rollback` puts back what was there before.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::journal::{Entry, Journal, Outcome, PersistFile};
use crate::plan::render::command;
use crate::plan::Change;

pub const SYSCTL_FILE: &str = "/etc/sysctl.d/90-nettune.conf";
pub const SCRIPT: &str = "/etc/nettune/apply-devices.sh";
pub const UNIT: &str = "/etc/systemd/system/nettune-devices.service";
/// What `systemctl enable` would create.
pub const WANTS_LINK: &str = "/etc/systemd/system/multi-user.target.wants/nettune-devices.service";

/// Header line that marks a file as nettune's own.
const MARK: &str = "# Written by nettune apply --persist";

fn real(base: &Path, path: &str) -> PathBuf {
    base.join(path.trim_start_matches('/'))
}

/// Record in the journal what `write` will replace, before anything is
/// written (so an interrupted persist can be undone too).
pub fn prepare(journal: &mut Journal, base: &Path) -> anyhow::Result<()> {
    let changed: Vec<&Entry> = changed(journal);
    if changed.is_empty() {
        return Ok(());
    }
    let mut files = vec![(SYSCTL_FILE, false), (SCRIPT, false), (UNIT, false)];
    files.push((WANTS_LINK, true));
    for (path, link) in files {
        let real_path = real(base, path);
        let previous = if link {
            fs::read_link(&real_path)
                .ok()
                .map(|t| t.display().to_string())
        } else {
            match fs::read_to_string(&real_path) {
                Ok(text) => Some(text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot read {}", real_path.display()))
                }
            }
        };
        journal.persist.push(PersistFile {
            path: path.to_string(),
            previous,
            link,
        });
    }
    for path in [SYSCTL_FILE, SCRIPT, UNIT, WANTS_LINK] {
        let mut dir = Path::new(path).parent();
        let mut missing = Vec::new();
        while let Some(d) = dir {
            if d == Path::new("/") || real(base, &d.display().to_string()).exists() {
                break;
            }
            missing.push(d.display().to_string());
            dir = d.parent();
        }
        for d in missing.into_iter().rev() {
            if !journal.created_dirs.contains(&d) {
                journal.created_dirs.push(d);
            }
        }
    }
    Ok(())
}

fn changed(journal: &Journal) -> Vec<&Entry> {
    journal
        .changes
        .iter()
        .filter(|e| e.outcome == Outcome::Changed)
        .collect()
}

/// Write the files `prepare` recorded.
pub fn write(journal: &Journal, base: &Path) -> anyhow::Result<()> {
    if journal.persist.is_empty() {
        return Ok(());
    }
    for dir in &journal.created_dirs {
        let d = real(base, dir);
        fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    let previous = |path: &str| {
        journal
            .persist
            .iter()
            .find(|p| p.path == path)
            .and_then(|p| p.previous.clone())
    };
    let entries = changed(journal);
    let header = format!(
        "{MARK} (state {}, profile {}); `nettune rollback {}` removes it.\n",
        journal.id,
        journal.profile.name(),
        journal.id
    );

    // Sysctls: earlier nettune states' lines stay, this state's win.
    let mut lines: Vec<(String, String)> = previous(SYSCTL_FILE)
        .filter(|text| text.starts_with(MARK))
        .map(|text| {
            text.lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| l.split_once(" = "))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .unwrap_or_default();
    for e in entries.iter().filter(|e| e.target.sysctl_name().is_some()) {
        let name = e.target.sysctl_name().unwrap_or_default().to_string();
        match lines.iter_mut().find(|(k, _)| *k == name) {
            Some(line) => line.1 = e.to.clone(),
            None => lines.push((name, e.to.clone())),
        }
    }
    let mut sysctl = header.clone();
    for (k, v) in &lines {
        sysctl.push_str(&format!("{k} = {v}\n"));
    }
    write_file(base, SYSCTL_FILE, &sysctl)?;

    // Device settings: earlier states' commands first, then this state's.
    let mut script = match previous(SCRIPT).filter(|t| t.starts_with("#!/bin/sh\n")) {
        Some(text) => text,
        None => format!(
            "#!/bin/sh\n{header}# IRQ numbers are this boot's: run `nettune apply` again after adding or moving hardware.\n"
        ),
    };
    let place = match &journal.netns {
        Some(ns) => format!(" (network namespace {ns})"),
        None => String::new(),
    };
    script.push_str(&format!(
        "\n# state {}, profile {}{place}\n",
        journal.id,
        journal.profile.name()
    ));
    for e in entries.iter().filter(|e| e.target.sysctl_name().is_none()) {
        let cmd = command(&Change {
            target: e.target.clone(),
            from: String::new(),
            to: e.to.clone(),
            reason: e.reason.clone(),
            group: e.group.clone(),
        });
        script.push_str(&format!(
            "{cmd} || echo 'nettune: could not set {}' >&2\n",
            e.target
        ));
    }
    write_file(base, SCRIPT, &script)?;

    let unit = format!(
        "{MARK}\n[Unit]\nDescription=nettune: per-device network settings ({SCRIPT})\nAfter=network-pre.target\nBefore=network.target\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/sh {SCRIPT}\n\n[Install]\nWantedBy=multi-user.target\n"
    );
    write_file(base, UNIT, &unit)?;
    let link = real(base, WANTS_LINK);
    if fs::symlink_metadata(&link).is_err() {
        symlink(UNIT, &link).with_context(|| format!("cannot create {}", link.display()))?;
    }
    Ok(())
}

fn write_file(base: &Path, path: &str, text: &str) -> anyhow::Result<()> {
    let p = real(base, path);
    fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))
}

/// Put back what was there before `write` (also after an interrupted one).
pub fn undo(journal: &Journal, base: &Path) -> anyhow::Result<()> {
    for file in journal.persist.iter().rev() {
        let p = real(base, &file.path);
        let _ = fs::remove_file(&p);
        match (&file.previous, file.link) {
            (Some(target), true) => {
                symlink(target, &p).with_context(|| format!("cannot restore {}", p.display()))?
            }
            (Some(text), false) => {
                fs::write(&p, text).with_context(|| format!("cannot restore {}", p.display()))?
            }
            (None, _) => {}
        }
    }
    for dir in journal.created_dirs.iter().rev() {
        // Only if empty: someone may have put files there since.
        let _ = fs::remove_dir(real(base, dir));
    }
    Ok(())
}
