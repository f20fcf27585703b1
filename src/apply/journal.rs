//! The journal: one JSON file per applied state in the state directory
//! (`state-0001.json`, ...), holding every change's original value. It is
//! written and synced to disk (file and directory) before the first change,
//! so an apply killed at any instant leaves what `rollback` needs.
//! Format: docs/apply.md.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read as _, Write as _};
use std::os::unix::fs::{
    DirBuilderExt as _, FileTypeExt as _, MetadataExt as _, OpenOptionsExt as _,
};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Deserializer, Serialize};

use crate::base::records::{GuardRecord, SteerRecord, XdpRecord};
use crate::plan::{PlanOptions, Profile, Target, Value};

/// The journal format this nettune writes. Bumped when a field changes
/// meaning or is removed. Version 2 added the namespace's identity, the
/// boot id, IRQ names and forgotten states; version 1 journals are read
/// with those empty. Version 3: states that are not a profile (`steer`,
/// an XDP program), whose `profile` and `options` are absent. Version 4:
/// the namespace is recorded however nettune was started (`ip netns exec`,
/// `nsenter`), one without a name by identity alone (`netns` null,
/// `netns_inode` set), which an older nettune would take for the host.
pub const JOURNAL_VERSION: u32 = 4;
/// The oldest format this nettune still reads.
const OLDEST_VERSION: u32 = 1;

/// The state directory of the live host.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/nettune";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateStatus {
    /// Written before the first change; still so if the apply was killed.
    Applying,
    /// Every change made and checked.
    Complete,
    /// A change failed; everything changed before it was restored.
    Failed,
    /// `nettune rollback` restored it.
    RolledBack,
    /// `nettune rollback --forget` dropped it without restoring anything
    /// (it could no longer be undone).
    Forgotten,
}

impl StateStatus {
    pub fn text(self) -> &'static str {
        match self {
            StateStatus::Applying => "incomplete (interrupted)",
            StateStatus::Complete => "applied",
            StateStatus::Failed => "failed, restored",
            StateStatus::RolledBack => "rolled back",
            StateStatus::Forgotten => "forgotten",
        }
    }

    /// Whether its changes may still be on the host.
    pub fn is_active(self) -> bool {
        matches!(self, StateStatus::Applying | StateStatus::Complete)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Not (yet) written.
    Pending,
    /// Written and read back.
    Changed,
    /// The kernel refused it; nothing changed.
    Refused(String),
}

/// One change of a state, with the value to restore.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry<V = Value> {
    pub target: Target,
    pub group: String,
    /// The value written; in the file its text.
    pub to: V,
    pub reason: String,
    /// The value read just before apply, exactly (a file's whole text).
    pub original: String,
    pub outcome: Outcome,
    /// For an IRQ's affinity: the IRQ's name in /proc/interrupts
    /// (`eth0-TxRx-3`), which survives a reboot when its number does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_name: Option<String>,
}

impl Entry<String> {
    /// The entry with its value typed as its target takes it.
    fn typed(self) -> Result<Entry, String> {
        let to = Value::parse(&self.target, &self.to)
            .map_err(|e| format!("the value of {}: {e}", self.target))?;
        Ok(Entry {
            target: self.target,
            group: self.group,
            to,
            reason: self.reason,
            original: self.original,
            outcome: self.outcome,
            irq_name: self.irq_name,
        })
    }
}

/// A journal's changes as its file holds them, each value typed as its
/// target takes it.
fn typed_entries<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Entry>, D::Error> {
    Vec::<Entry<String>>::deserialize(d)?
        .into_iter()
        .map(Entry::typed)
        .collect::<Result<_, _>>()
        .map_err(serde::de::Error::custom)
}

/// A file `--persist` wrote under /etc, and what was there before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistFile {
    /// Path as on the host (`/etc/sysctl.d/90-nettune.conf`).
    pub path: String,
    /// The previous contents (a symlink's target for links); `None`: absent.
    pub previous: Option<String>,
    /// A symlink (systemd's `wants` link) rather than a file.
    pub link: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    pub schema_version: u32,
    pub id: u32,
    /// When the apply started, UTC (RFC 3339).
    pub time: String,
    /// The profile applied; absent for a steer or XDP state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<PlanOptions>,
    /// What `nettune steer` set up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steer: Option<SteerRecord>,
    /// The XDP program a benchmark attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xdp: Option<XdpRecord>,
    /// The `--root` tree, absolute; `None` for the live host.
    pub root: Option<String>,
    /// The network namespace it was applied in, by name; `None` for the
    /// host, and for a namespace without a name (then `netns_inode` is
    /// set).
    pub netns: Option<String>,
    /// The namespace's identity (its nsfs inode) when applied: a namespace
    /// created again under the same name is another one. `None` for the
    /// host.
    #[serde(default)]
    pub netns_inode: Option<u64>,
    /// The namespace's cookie (`SO_NETNS_COOKIE`), which unlike the inode
    /// is never given to another namespace within a boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns_cookie: Option<u64>,
    /// The boot the state was applied in (live and namespace states).
    #[serde(default)]
    pub boot_id: Option<String>,
    pub status: StateStatus,
    #[serde(deserialize_with = "typed_entries")]
    pub changes: Vec<Entry>,
    pub persist: Vec<PersistFile>,
    /// Directories `--persist` created (removed again when empty).
    pub created_dirs: Vec<String>,
    /// Why the apply failed, for `Failed`.
    pub failure: Option<String>,
    pub rolled_back_at: Option<String>,
    /// When `rollback --forget` dropped it.
    #[serde(default)]
    pub forgotten_at: Option<String>,
    /// The `nettune experiment` run that applied it (its result directory):
    /// such a state is rolled back by the experiment itself, so one still
    /// applied means the experiment was killed; the next experiment on the
    /// same place refuses to start until `nettune rollback` restores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experiment: Option<String>,
    /// The guard of `apply --guard` watching (or that watched) this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<GuardRecord>,
}

impl Journal {
    /// What the state is, for people: `profile pps`, `steer eth2 queue 4
    /// (udp4 dst-port 53)`, `XDP program nettune_xsk (id 42) on veth1`.
    pub fn what(&self) -> String {
        if let Some(s) = &self.steer {
            return format!("steer {} queue {} ({})", s.iface, s.queue, s.flow);
        }
        if let Some(x) = &self.xdp {
            return format!("XDP program {} (id {}) on {}", x.name, x.id, x.iface);
        }
        let site = self.options.as_ref().and_then(|o| o.site.as_ref());
        match (self.profile, site) {
            // The whole chain (`edge -> pps`), so that a site profile
            // built on another is told apart from one on the built-in.
            (Some(_), Some(site)) => {
                format!("profile {} (site, includes {})", site.name, site.includes())
            }
            (Some(p), None) => format!("profile {}", p.name()),
            (None, _) => "unknown change".to_string(),
        }
    }

    /// The short word `history` shows in its column: the profile, `steer`
    /// or `xdp`.
    pub fn kind(&self) -> &'static str {
        if self.steer.is_some() {
            "steer"
        } else if self.xdp.is_some() {
            "xdp"
        } else {
            self.profile.map_or("?", Profile::name)
        }
    }

    /// Changes that were (or may have been) made: written and read back,
    /// or, in a journal of an apply that was killed, possibly written.
    /// Changes the kernel refused never count.
    pub fn change_count(&self) -> usize {
        self.changes
            .iter()
            .filter(|e| match e.outcome {
                Outcome::Changed => true,
                Outcome::Pending => self.status == StateStatus::Applying,
                Outcome::Refused(_) => false,
            })
            .count()
    }

    /// Changes the kernel refused (left alone).
    pub fn refused_count(&self) -> usize {
        self.changes
            .iter()
            .filter(|e| matches!(e.outcome, Outcome::Refused(_)))
            .count()
    }
}

/// A state file this nettune cannot read (written by a newer nettune, or
/// damaged): listed, never misread, and it does not hide the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub id: Option<u32>,
    pub path: PathBuf,
    pub error: String,
}

/// Every state of a state directory.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// Readable states, oldest first.
    pub journals: Vec<Journal>,
    pub unreadable: Vec<Unreadable>,
}

impl Listing {
    /// The highest id in use, readable or not.
    pub fn last_id(&self) -> u32 {
        let readable = self.journals.iter().map(|j| j.id);
        let unreadable = self.unreadable.iter().filter_map(|u| u.id);
        readable.chain(unreadable).max().unwrap_or(0)
    }
}

/// The state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
    /// The options a command about these states must repeat to find them
    /// (` --root DIR`, ` --state-dir DIR`), for the hints in messages.
    flags: String,
}

impl StateDir {
    pub fn new(dir: PathBuf) -> StateDir {
        StateDir {
            dir,
            flags: String::new(),
        }
    }

    /// The same directory, with the options that hints must repeat.
    pub fn with_flags(self, flags: String) -> StateDir {
        StateDir { flags, ..self }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The nettune command `args` for these states, as a hint to copy:
    /// `nettune rollback 3 --state-dir /tmp/st`.
    pub fn command(&self, args: &str) -> String {
        format!("nettune {args}{}", self.flags)
    }

    /// Refuse a state directory that others could change behind nettune's
    /// back: a symbolic link (nettune would write where it points, `/etc`),
    /// or, when running as root, one not owned by root or writable by group
    /// or others (whoever can write there decides what a rollback writes as
    /// root). A missing directory passes: [`StateDir::lock`] creates it.
    pub fn check(&self) -> anyhow::Result<()> {
        let dir = self.dir.display();
        let meta = match fs::symlink_metadata(&self.dir) {
            Ok(meta) => meta,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(e).with_context(|| format!("cannot read the state directory '{dir}'"))
            }
        };
        if meta.file_type().is_symlink() {
            let to =
                fs::read_link(&self.dir).map_or_else(|_| "?".into(), |t| t.display().to_string());
            anyhow::bail!(
                "the state directory '{dir}' is a symbolic link (to '{to}'): nettune keeps its \
                 journals only in a directory itself, never where a link points; give the \
                 directory meant with --state-dir; nothing was changed"
            );
        }
        if !meta.is_dir() {
            anyhow::bail!(
                "the state directory '{dir}' is not a directory ({}); give another with \
                 --state-dir; nothing was changed",
                kind(&meta.file_type())
            );
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            if meta.uid() != 0 {
                anyhow::bail!(
                    "the state directory '{dir}' belongs to user {}, not root: its owner could \
                     change what a rollback writes as root; `chown root '{dir}'` if it is to be \
                     trusted, or give another with --state-dir; nothing was changed",
                    meta.uid()
                );
            }
            if meta.mode() & 0o022 != 0 {
                anyhow::bail!(
                    "the state directory '{dir}' can be written by group or others (mode {:04o}): \
                     they could change what a rollback writes as root; `chmod go-w '{dir}'`, or \
                     give another with --state-dir; nothing was changed",
                    meta.mode() & 0o7777
                );
            }
        }
        Ok(())
    }

    /// Check the directory, create it (mode 0700) if missing, and hold its
    /// lock: one apply or rollback at a time.
    pub fn lock(&self) -> anyhow::Result<Flock<File>> {
        self.check()?;
        if !self.dir.exists() {
            self.create()?;
        }
        let path = self.dir.join(".lock");
        let file = open_lock(&path)?;
        Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
            anyhow::anyhow!(
                "another nettune apply or rollback holds {} ({e}); wait for it to finish",
                path.display()
            )
        })
    }

    /// Create the directory, readable by its owner only (journals tell
    /// what a host was tuned to), and make its entry durable.
    fn create(&self) -> anyhow::Result<()> {
        let cannot = || {
            format!(
                "cannot create the state directory {}; give another with --state-dir",
                self.dir.display()
            )
        };
        if let Some(parent) = self.dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).with_context(cannot)?;
        }
        match fs::DirBuilder::new().mode(0o700).create(&self.dir) {
            Ok(()) => {}
            // Made meanwhile by another nettune: checked like any other.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => return self.check(),
            Err(e) => return Err(e).with_context(cannot),
        }
        match self.dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => sync_dir(parent),
            None => Ok(()),
        }
    }

    fn file_of(&self, id: u32) -> PathBuf {
        self.dir.join(format!("state-{id:04}.json"))
    }

    /// Every state, oldest first. A missing directory has none. A file that
    /// cannot be read is listed as unreadable with the reason.
    pub fn list(&self) -> anyhow::Result<Listing> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Listing::default()),
            Err(e) => return Err(e).with_context(|| format!("cannot list {}", self.dir.display())),
        };
        let mut listing = Listing::default();
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot list {}", self.dir.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(id) = name
                .strip_prefix("state-")
                .and_then(|rest| rest.strip_suffix(".json"))
            else {
                continue;
            };
            let path = entry.path();
            match read_journal(&path) {
                Ok(journal) => listing.journals.push(journal),
                Err(error) => listing.unreadable.push(Unreadable {
                    id: id.parse().ok(),
                    path,
                    error,
                }),
            }
        }
        listing.journals.sort_by_key(|j| j.id);
        listing.unreadable.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(listing)
    }

    pub fn next_id(&self) -> anyhow::Result<u32> {
        Ok(self.list()?.last_id() + 1)
    }

    /// Remove a state that changed nothing (every change refused).
    pub fn remove(&self, id: u32) -> anyhow::Result<()> {
        let path = self.file_of(id);
        fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
        sync_dir(&self.dir)
    }

    /// Write a journal durably: a temporary file, fsync, rename over the
    /// state's file, fsync the directory. A failure (a full disk) removes
    /// the temporary file again: the state's file is as it was.
    pub fn save(&self, journal: &Journal) -> anyhow::Result<()> {
        let path = self.file_of(journal.id);
        let tmp = self.dir.join(format!(".state-{:04}.json.tmp", journal.id));
        let mut text = serde_json::to_string_pretty(journal)?;
        text.push('\n');
        let write = || -> std::io::Result<()> {
            // One left by a killed save goes first: the new one is created
            // afresh, never opened through whatever was there.
            match fs::remove_file(&tmp) {
                Err(e) if e.kind() != ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&tmp)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            fs::rename(&tmp, &path)
        };
        if let Err(e) = write() {
            let _ = fs::remove_file(&tmp);
            return Err(e).with_context(|| format!("cannot write the journal {}", path.display()));
        }
        sync_dir(&self.dir)
    }
}

/// Open (or create) the lock file without ever blocking or following a
/// link: opening a FIFO waits for a writer for ever, and a link would
/// create and lock a file elsewhere.
fn open_lock(path: &Path) -> anyhow::Result<File> {
    let not_regular = |what: &str| {
        anyhow::anyhow!(
            "the lock file '{}' is {what}, not a regular file: remove it (nettune creates it \
             again) or give another --state-dir; nothing was changed",
            path.display()
        )
    };
    match fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_file() => {
            return Err(not_regular(kind(&meta.file_type())))
        }
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot open {}", path.display())),
    }
    // Checked again on what was opened: it may have changed meanwhile.
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => not_regular("a symbolic link"),
            _ => anyhow::anyhow!("cannot open {}: {e}", path.display()),
        })?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot open {}", path.display()))?;
    if !meta.file_type().is_file() {
        return Err(not_regular(kind(&meta.file_type())));
    }
    Ok(file)
}

/// What a file is, for a message.
fn kind(t: &fs::FileType) -> &'static str {
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// The most a journal file may hold: one that changes every queue of a
/// large host is a few hundred KB.
const MAX_JOURNAL_BYTES: u64 = 16 << 20;

/// A journal file's text: a regular file (never a link, a FIFO that would
/// block, a device that never ends), of a bounded size.
fn read_text(path: &Path) -> Result<String, String> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => "not a nettune journal: a symbolic link".to_string(),
            _ => format!("cannot read it: {e}"),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "not a nettune journal: {}",
            kind(&meta.file_type())
        ));
    }
    if meta.len() > MAX_JOURNAL_BYTES {
        return Err(format!(
            "not a nettune journal: {} bytes, more than a journal holds ({MAX_JOURNAL_BYTES})",
            meta.len()
        ));
    }
    let mut text = String::new();
    file.take(MAX_JOURNAL_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read it: {e}"))?;
    Ok(text)
}

/// Read one journal, checking its format version before anything else: a
/// journal of a newer format is an error naming both versions, never a
/// misread of fields whose meaning changed.
fn read_journal(path: &Path) -> Result<Journal, String> {
    #[derive(Deserialize)]
    struct Version {
        schema_version: Option<u32>,
    }
    let text = read_text(path)?;
    let version = serde_json::from_str::<Version>(&text)
        .map_err(|e| format!("not a nettune journal: {e}"))?
        .schema_version
        .ok_or_else(|| "not a nettune journal: no schema_version".to_string())?;
    if version > JOURNAL_VERSION {
        return Err(format!(
            "written by a newer nettune (journal version {version}; this nettune reads versions \
             {OLDEST_VERSION} to {JOURNAL_VERSION}): use that nettune, or upgrade this one"
        ));
    }
    if version < OLDEST_VERSION {
        return Err(format!(
            "journal version {version} is not one nettune ever wrote"
        ));
    }
    serde_json::from_str(&text).map_err(|e| format!("not a nettune journal: {e}"))
}

fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync directory {}", dir.display()))
}

/// Now, UTC, as RFC 3339 (`2025-06-11T10:15:30Z`).
pub fn now_utc() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    rfc3339(secs)
}

fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rest = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        // `date -u -d @1700000000`
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        // A leap day.
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    pub(crate) fn journal(id: u32) -> Journal {
        Journal {
            schema_version: JOURNAL_VERSION,
            id,
            time: now_utc(),
            profile: Some(Profile::Pps),
            options: Some(PlanOptions::new(Profile::Pps)),
            steer: None,
            xdp: None,
            guard: None,
            root: None,
            netns: None,
            netns_inode: None,
            netns_cookie: None,
            boot_id: None,
            status: StateStatus::Applying,
            changes: vec![Entry {
                target: Target::sysctl("net.core.rmem_max"),
                group: "kernel".to_string(),
                to: Value::number(16777216),
                reason: "test".to_string(),
                original: "212992\n".to_string(),
                outcome: Outcome::Pending,
                irq_name: None,
            }],
            persist: Vec::new(),
            created_dirs: Vec::new(),
            failure: None,
            rolled_back_at: None,
            forgotten_at: None,
            experiment: None,
        }
    }

    #[test]
    fn saved_states_list_in_order_and_ids_grow() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = StateDir::new(dir.path().join("state"));
        let _lock = state.lock().expect("lock");
        assert_eq!(state.next_id().expect("id"), 1);
        for id in [2, 1, 10] {
            state.save(&journal(id)).expect("save");
        }
        let ids: Vec<u32> = state
            .list()
            .expect("list")
            .journals
            .iter()
            .map(|j| j.id)
            .collect();
        assert_eq!(ids, [1, 2, 10]);
        assert_eq!(state.next_id().expect("id"), 11);
        let mut done = journal(2);
        done.status = StateStatus::Complete;
        state.save(&done).expect("rewrite");
        assert_eq!(state.list().expect("list").journals[1], done);
        // No temporary files are left behind.
        let names: Vec<String> = fs::read_dir(state.path())
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }

    /// A journal reads back typed and is written again byte for byte,
    /// whatever form of its kind each value's text takes; one whose value
    /// is not of its target's kind is listed as unreadable, not misread.
    #[test]
    fn values_read_back_as_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = StateDir::new(dir.path().to_path_buf());
        let mut old = serde_json::to_value(journal(1)).expect("json");
        old["changes"][0]["target"] = serde_json::json!("/proc/irq/74/smp_affinity_list");
        old["changes"][0]["to"] = serde_json::json!("1,0");
        let text = serde_json::to_string_pretty(&old).expect("text") + "\n";
        fs::write(dir.path().join("state-0001.json"), &text).expect("write");
        let mut bad = old.clone();
        bad["id"] = serde_json::json!(2);
        bad["changes"][0]["to"] = serde_json::json!("x");
        fs::write(dir.path().join("state-0002.json"), bad.to_string()).expect("write");
        let listing = state.list().expect("list");
        assert_eq!(listing.journals.len(), 1);
        assert!(
            listing.unreadable[0].error.contains("smp_affinity_list"),
            "{}",
            listing.unreadable[0].error
        );
        state.save(&listing.journals[0]).expect("save");
        let again = fs::read_to_string(dir.path().join("state-0001.json")).expect("read");
        assert_eq!(again, text);
    }

    #[test]
    fn a_second_lock_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = StateDir::new(dir.path().to_path_buf());
        let _held = state.lock().expect("first lock");
        let err = state.lock().expect_err("second lock");
        assert!(err.to_string().contains("another nettune"), "{err}");
    }

    #[test]
    fn garbage_in_the_state_dir_is_listed_not_fatal() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = StateDir::new(dir.path().to_path_buf());
        fs::write(dir.path().join("state-0001.json"), "{").expect("write");
        state.save(&journal(2)).expect("save");
        let listing = state.list().expect("list");
        assert_eq!(listing.journals.len(), 1);
        assert_eq!(listing.unreadable.len(), 1);
        assert!(listing.unreadable[0].path.ends_with("state-0001.json"));
        assert!(listing.unreadable[0]
            .error
            .contains("not a nettune journal"));
        assert_eq!(state.next_id().expect("id"), 3);
    }

    #[test]
    fn a_journal_of_a_newer_format_is_named_and_never_misread() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = StateDir::new(dir.path().to_path_buf());
        let mut newer = serde_json::to_value(journal(4)).expect("json");
        newer["schema_version"] = serde_json::json!(JOURNAL_VERSION + 1);
        // A field whose meaning this version does not know.
        newer["changes"] = serde_json::json!("moved elsewhere");
        fs::write(dir.path().join("state-0004.json"), newer.to_string()).expect("write");
        state.save(&journal(1)).expect("save");
        let listing = state.list().expect("list");
        assert_eq!(listing.journals.len(), 1);
        let bad = &listing.unreadable[0];
        assert_eq!(bad.id, Some(4));
        assert!(bad.error.contains("newer nettune"), "{}", bad.error);
        assert!(
            bad.error
                .contains(&format!("version {}", JOURNAL_VERSION + 1)),
            "{}",
            bad.error
        );
        // Its id stays taken.
        assert_eq!(state.next_id().expect("id"), 5);
    }

    #[test]
    fn version_1_journals_are_still_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut old = serde_json::to_value(journal(1)).expect("json");
        old["schema_version"] = serde_json::json!(1);
        for field in ["netns_inode", "boot_id", "forgotten_at"] {
            old.as_object_mut().expect("object").remove(field);
        }
        fs::write(dir.path().join("state-0001.json"), old.to_string()).expect("write");
        let listing = StateDir::new(dir.path().to_path_buf())
            .list()
            .expect("list");
        assert_eq!(listing.journals.len(), 1, "{:?}", listing.unreadable);
        assert_eq!(listing.journals[0].boot_id, None);
    }
}
