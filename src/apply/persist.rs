//! `apply --persist`: what makes the applied settings survive a reboot.
//! Sysctls go to /etc/sysctl.d/90-nettune.conf; the per-device settings
//! (IRQ affinity, RPS/XPS, ethtool, qdisc, governor, haltpoll) to a script
//! that a oneshot systemd unit runs at boot, and that a udev rule runs
//! again for one interface when it appears (hot-plug, driver reload).
//! Everything below the `--root` tree when there is one. `rollback` puts
//! back what was there before.
//!
//! The units and the rule are nettune's own files in /etc, not the
//! package's: a persisted state is whole without the package (a binary
//! copied by hand, a `--root` tree), `rollback` removes exactly what the
//! apply wrote, and removing the package does not stop half of a state
//! (the device settings) while the sysctl file keeps the other half. The
//! files written are those in contrib/ of the source, checked there with
//! `systemd-analyze verify` and `udevadm test`.
//!
//! IRQ numbers change across reboots and driver reloads, so the script
//! finds each IRQ by its name in /proc/interrupts at boot. Every file is
//! written atomically (a temporary file in the same directory, fsync,
//! rename, fsync of the directory): a crash leaves the old file or the new
//! one, never half of one.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::journal::{Entry, Journal, Outcome, PersistFile};
use crate::base::fsio::{self, FileError};
use crate::base::text::{excerpt, sh_comment, sh_comment_line, sh_quoted, sh_word};
use crate::plan::render::set_command;

pub const SYSCTL_FILE: &str = "/etc/sysctl.d/90-nettune.conf";
pub const SCRIPT: &str = "/etc/nettune/apply-devices.sh";
pub const UNIT: &str = "/etc/systemd/system/nettune-devices.service";
/// What `systemctl enable` would create.
pub const WANTS_LINK: &str = "/etc/systemd/system/multi-user.target.wants/nettune-devices.service";
/// The template unit that runs the script for one interface.
pub const HOTPLUG_UNIT: &str = "/etc/systemd/system/nettune-devices@.service";
/// The udev rule that starts it when an interface appears; after the
/// rules that rename interfaces (80-net-setup-link), so that it names the
/// interface by its final name.
pub const UDEV_RULE: &str = "/etc/udev/rules.d/90-nettune-devices.rules";

const UNIT_TEXT: &str = include_str!("../../contrib/systemd/nettune-devices.service");
const HOTPLUG_UNIT_TEXT: &str = include_str!("../../contrib/systemd/nettune-devices@.service");
const UDEV_RULE_TEXT: &str = include_str!("../../contrib/udev/90-nettune-devices.rules");

/// Header line that marks a file as nettune's own.
const MARK: &str = "# Written by nettune apply --persist";

fn real(base: &Path, path: &str) -> PathBuf {
    base.join(path.trim_start_matches('/'))
}

/// `path` under `base`, to be created, replaced or removed there. Under a
/// `--root` tree, its directory must lie inside the tree: a link in it
/// (`etc -> /etc`) must not lead a write to the live host's files.
fn writable(base: &Path, path: &str) -> anyhow::Result<PathBuf> {
    let p = real(base, path);
    if base != Path::new("/") {
        let dir = p.parent().unwrap_or(&p);
        crate::base::root::ensure_inside(base, dir)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?;
    }
    Ok(p)
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
    files.extend([(HOTPLUG_UNIT, false), (UDEV_RULE, false)]);
    for (path, link) in files {
        let real_path = real(base, path);
        let previous = if link {
            fs::read_link(&real_path)
                .ok()
                .map(|t| t.display().to_string())
        } else {
            // The journal keeps what was there to put it back; nettune
            // writes these files (a few hundred lines on the largest
            // hosts): one far larger is not one to keep.
            match fsio::read_text_bounded(&real_path, 16 << 20, "a file nettune writes") {
                Ok(text) => Some(text),
                Err(e) if e.not_found() => None,
                Err(FileError::Io { source, .. }) => {
                    return Err(source)
                        .with_context(|| format!("cannot read {}", real_path.display()))
                }
                Err(refused) => return Err(refused.into()),
            }
        };
        journal.persist.push(PersistFile {
            path: path.to_string(),
            previous,
            link,
        });
    }
    for path in [
        SYSCTL_FILE,
        SCRIPT,
        UNIT,
        WANTS_LINK,
        HOTPLUG_UNIT,
        UDEV_RULE,
    ] {
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
        let d = writable(base, dir)?;
        fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    let header = format!(
        "{MARK} (state {}, {}); `nettune rollback {}` removes it.\n",
        journal.id,
        sh_comment(&journal.what()),
        journal.id
    );
    write_file(base, SYSCTL_FILE, &sysctl_file(journal, &header)?)?;
    write_file(base, SCRIPT, &device_script(journal, &header))?;
    write_file(base, UNIT, UNIT_TEXT)?;
    if fs::symlink_metadata(real(base, WANTS_LINK)).is_err() {
        write_link(base, WANTS_LINK, UNIT)?;
    }
    write_file(base, HOTPLUG_UNIT, HOTPLUG_UNIT_TEXT)?;
    write_file(base, UDEV_RULE, UDEV_RULE_TEXT)?;
    Ok(())
}

/// What was at `path` before this state's persist (recorded by `prepare`).
fn previous(journal: &Journal, path: &str) -> Option<String> {
    journal
        .persist
        .iter()
        .find(|p| p.path == path)
        .and_then(|p| p.previous.clone())
}

/// The sysctl.d file: earlier nettune states' lines stay, this state's win.
/// A value is one line of `KEY = VALUE`: one holding a line break (which
/// apply refuses long before) is refused here too, never written.
fn sysctl_file(journal: &Journal, header: &str) -> anyhow::Result<String> {
    let mut lines: Vec<(String, String)> = previous(journal, SYSCTL_FILE)
        .filter(|text| text.starts_with(MARK))
        .map(|text| {
            text.lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| l.split_once(" = "))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .unwrap_or_default();
    for e in changed(journal) {
        let Some(name) = e.target.sysctl_name() else {
            continue;
        };
        let to = e.to.as_str();
        if to.chars().any(char::is_control) {
            anyhow::bail!(
                "cannot persist {name} = {}: a sysctl.d line holds no control character",
                excerpt(to)
            );
        }
        match lines.iter_mut().find(|(k, _)| k == name) {
            Some(line) => line.1 = to.to_string(),
            None => lines.push((name.to_string(), to.to_string())),
        }
    }
    let mut text = header.to_string();
    for (k, v) in &lines {
        text.push_str(&format!("{k} = {v}\n"));
    }
    Ok(text)
}

/// The boot script: earlier states' commands first, then this state's
/// device settings (IRQs found by name), each interface's in a block that
/// runs at boot and when that interface appears.
fn device_script(journal: &Journal, header: &str) -> String {
    let mut script = match previous(journal, SCRIPT).filter(|t| t.starts_with("#!/bin/sh\n")) {
        Some(text) => text,
        None => format!("#!/bin/sh\n{header}"),
    };
    if !script.contains("irq_named() {") {
        script.push_str(IRQ_NAMED);
    }
    if !script.contains("for_device() {") {
        script.push_str(FOR_DEVICE);
    }
    let place = match &journal.netns {
        Some(ns) => format!(" (network namespace {ns})"),
        None => String::new(),
    };
    script.push('\n');
    script.push_str(&sh_comment_line(&format!(
        "state {}, {}{place}",
        journal.id,
        journal.what()
    )));
    script.push('\n');
    // The scope of the open `if` block: an interface, or none (at boot).
    let mut open: Option<Option<&str>> = None;
    for e in changed(journal)
        .into_iter()
        .filter(|e| e.target.sysctl_name().is_none())
    {
        let scope = device_of(e);
        if open != Some(scope) {
            if open.is_some() {
                script.push_str("fi\n");
            }
            script.push_str(&scope_test(scope));
            open = Some(scope);
        }
        if let (Some(name), Some(_)) = (&e.irq_name, e.target.irq()) {
            script.push_str(&irq_by_name(name, e.to.as_str()));
            continue;
        }
        let cmd = set_command(&e.target, &e.to);
        if cmd.starts_with('#') {
            // Nothing in sh can make it (a NAPI setting): say so at boot.
            let say = format!(
                "nettune: {} is not set at boot; run nettune apply --profile {} again",
                e.target,
                journal.profile.map_or("?", |p| p.name())
            );
            script.push_str(&format!("{cmd}\necho {} >&2\n", sh_word(&say)));
            continue;
        }
        let say = format!("nettune: could not set {}", e.target);
        script.push_str(&format!("{cmd} || echo {} >&2\n", sh_word(&say)));
    }
    if open.is_some() {
        script.push_str("fi\n");
    }
    script
}

/// The interface a change belongs to (an IRQ's is the group plan put it
/// in: its interface); `None` for host-wide settings (governor, haltpoll).
fn device_of(e: &Entry) -> Option<&str> {
    match (e.target.iface(), e.target.irq()) {
        (Some(iface), _) => Some(iface),
        (None, Some(_)) => Some(e.group.as_str()),
        (None, None) => None,
    }
}

/// The line that opens a block of `scope`'s commands.
fn scope_test(scope: Option<&str>) -> String {
    match scope {
        Some(iface) => format!("if for_device {}; then\n", sh_quoted(iface)),
        None => "if [ -z \"$nettune_iface\" ]; then  # host-wide: at boot only\n".to_string(),
    }
}

/// The script's argument: an interface name when the hot-plug unit runs
/// it for an interface that appeared, so that only that interface's
/// blocks run; none at boot (every block).
const FOR_DEVICE: &str = r#"# With an interface name as argument (nettune-devices@IFACE.service, started
# by udev when the interface appears), only that interface's settings are made.
nettune_iface="${1-}"
for_device() { [ -z "$nettune_iface" ] || [ "$nettune_iface" = "$1" ]; }
"#;

/// A POSIX sh function the script uses: the number of the IRQ whose
/// action list in /proc/interrupts names `$1` (shared IRQs list several,
/// comma-separated).
const IRQ_NAMED: &str = r#"# IRQs are found by name: their numbers change across reboots and driver reloads.
irq_named() {
    while read -r num rest; do
        case " $rest," in *" $1,"*) echo "${num%:}"; return 0 ;; esac
    done < /proc/interrupts
    return 1
}
"#;

/// The script lines that set the affinity of the IRQ named `name`.
fn irq_by_name(name: &str, cpus: &str) -> String {
    let say = format!("nettune: could not set the affinity of IRQ {name}");
    format!(
        "irq=$(irq_named {}) && echo {} > /proc/irq/$irq/smp_affinity_list \
         || echo {} >&2\n",
        sh_quoted(name),
        sh_word(cpus),
        sh_word(&say)
    )
}

/// Write `text` to `path` atomically: a temporary file in the same
/// directory, fsync, rename over the file, fsync the directory.
fn write_file(base: &Path, path: &str, text: &str) -> anyhow::Result<()> {
    let p = writable(base, path)?;
    let dir = p
        .parent()
        .ok_or_else(|| anyhow::anyhow!("{} has no directory", p.display()))?;
    let tmp = dir.join(format!(
        ".{}.nettune-tmp",
        p.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    // A new file each time: whatever stood at the temporary name (a FIFO
    // whose open would wait forever, a link out of the tree) is replaced,
    // never opened.
    let _ = fs::remove_file(&tmp);
    let write = || -> std::io::Result<()> {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        fs::rename(&tmp, &p)?;
        fs::File::open(dir)?.sync_all()
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        anyhow::anyhow!("cannot write {}: {e}", p.display())
    })
}

/// Create the symlink `path` -> `target` atomically (a temporary link
/// renamed over it).
fn write_link(base: &Path, path: &str, target: &str) -> anyhow::Result<()> {
    let p = writable(base, path)?;
    let dir = p
        .parent()
        .ok_or_else(|| anyhow::anyhow!("{} has no directory", p.display()))?;
    let tmp = dir.join(".nettune-link-tmp");
    let _ = fs::remove_file(&tmp);
    let make = || -> std::io::Result<()> {
        symlink(target, &tmp)?;
        fs::rename(&tmp, &p)?;
        fs::File::open(dir)?.sync_all()
    };
    make().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        anyhow::anyhow!("cannot create {}: {e}", p.display())
    })
}

/// Put back what was there before `write` (also after an interrupted one),
/// each file atomically.
pub fn undo(journal: &Journal, base: &Path) -> anyhow::Result<()> {
    for file in journal.persist.iter().rev() {
        match (&file.previous, file.link) {
            (Some(target), true) => write_link(base, &file.path, target)?,
            (Some(text), false) => write_file(base, &file.path, text)?,
            (None, _) => {
                let p = writable(base, &file.path)?;
                match fs::remove_file(&p) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(e).with_context(|| format!("cannot remove {}", p.display()))
                    }
                }
            }
        }
    }
    for dir in journal.created_dirs.iter().rev() {
        // Only if empty: someone may have put files there since.
        let _ = fs::remove_dir(real(base, dir));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IRQ names come from /proc/interrupts (of a tree, too): the name and
    /// the CPU list stay words whatever they hold.
    #[test]
    fn an_irq_line_keeps_the_name_and_cpus_words() {
        let line = irq_by_name("eth0-TxRx-0'$(x)", "0-3;reboot");
        assert_eq!(
            line,
            "irq=$(irq_named 'eth0-TxRx-0'\\''$(x)') && echo '0-3;reboot' > \
             /proc/irq/$irq/smp_affinity_list || echo 'nettune: could not set the affinity \
             of IRQ eth0-TxRx-0'\\''$(x)' >&2\n"
        );
        let script = format!("{IRQ_NAMED}{line}");
        assert_eq!(crate::base::text::bash_parses(&script), Ok(()));
    }
}
