//! `Root`: the one door to /proc and /sys.
//!
//! Every read and write of kernel files goes through a `Root`, which holds a
//! filesystem root: `/` for the live host, or a directory laid out exactly as
//! the kernel lays out /proc and /sys (a capture or a test fixture). Paths are
//! always given as the kernel names them (`/proc/interrupts`), so error
//! messages name the file a user would look at.
//!
//! A `Root` can also record which paths were touched; `nettune capture` uses
//! that to copy exactly the files nettune reads, no more.
//!
//! A tree may come from anywhere (captures are meant to be shared), so
//! every read is bounded by the kind of file ([`Kind`]) and what is not a
//! regular file (a FIFO, a device) is refused without blocking
//! ([`fsio`](super::fsio)). A refused file makes the whole tree suspect:
//! [`Root::refusal`] keeps the first, so that a command that reads the
//! host part by part (a missing file only leaves its part empty) still
//! fails on it.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::fsio::{self, FileError};
use crate::error::{KernelError, ParseError};

/// The kinds of kernel file nettune reads, by how large the kernel makes
/// them. A file in a tree past its kind's limit is not one the kernel
/// wrote (a 1 GB `proc/interrupts`), and reading it would cost its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One value: a sysfs attribute, a sysctl, an IRQ's affinity, a
    /// process's `comm` or `stat`.
    Value,
    /// A table that grows with the host (CPUs, IRQs, sockets):
    /// `/proc/interrupts`, `/proc/stat`, `/proc/net/*`.
    Table,
}

impl Kind {
    /// The kind of `kernel_path`: anything under /proc that is not known
    /// to be one value is a table (the larger limit).
    pub fn of(kernel_path: &str) -> Kind {
        let pid = kernel_path
            .strip_prefix("/proc/")
            .and_then(|rest| rest.split_once('/'))
            .is_some_and(|(first, _)| first.bytes().all(|b| b.is_ascii_digit()));
        let value = ["/sys/", "/proc/sys/", "/proc/irq/"]
            .iter()
            .any(|prefix| kernel_path.starts_with(prefix));
        if value || pid {
            Kind::Value
        } else {
            Kind::Table
        }
    }

    /// The most bytes a file of this kind may hold.
    pub fn limit(self) -> u64 {
        match self {
            // sysfs fills at most one page per attribute
            // (Documentation/filesystems/sysfs.rst), 64 KiB on kernels with
            // the largest pages (arm64, ppc64); sysctls are shorter still
            // (a CPU mask for 8,192 CPUs is 2.3 KB).
            Kind::Value => 64 << 10,
            // /proc/interrupts is the largest: 11 bytes per online CPU on
            // every IRQ's line; 4,096 CPUs (the largest single-image hosts)
            // and 1,000 IRQ lines make 45 MB. Other tables are far smaller.
            Kind::Table => 64 << 20,
        }
    }
}

/// How a refused file is named in errors: what it is not.
const KERNEL_FILE: &str = "a kernel file";

/// How a recorded path was used; decides how `capture` copies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// The file's contents were read.
    File,
    /// The directory's entries were listed.
    Dir,
    /// The path was resolved (symlink target, existence check).
    Path,
}

#[derive(Debug)]
pub struct Root {
    base: PathBuf,
    recorded: Option<Mutex<BTreeSet<(String, Access)>>>,
    /// The first file refused (its path as shown, and why).
    refused: Mutex<Option<(PathBuf, String)>>,
}

impl Root {
    /// The live host.
    pub fn live() -> Root {
        Root {
            base: PathBuf::from("/"),
            recorded: None,
            refused: Mutex::new(None),
        }
    }

    /// A captured or fixture tree. It must exist and hold `proc/` or `sys/`.
    pub fn at(dir: &Path) -> anyhow::Result<Root> {
        let meta = fs::metadata(dir).map_err(|e| {
            anyhow::anyhow!(
                "--root '{}': {e}; give a directory written by `nettune capture`",
                dir.display()
            )
        })?;
        if !meta.is_dir() {
            anyhow::bail!("--root '{}' is not a directory", dir.display());
        }
        if !dir.join("proc").is_dir() && !dir.join("sys").is_dir() {
            anyhow::bail!(
                "--root '{}' holds neither proc/ nor sys/; give a directory written by `nettune capture`",
                dir.display()
            );
        }
        Ok(Root {
            base: dir.to_path_buf(),
            recorded: None,
            refused: Mutex::new(None),
        })
    }

    /// The live host, remembering every path read (for `capture`).
    pub fn live_recording() -> Root {
        Root {
            base: PathBuf::from("/"),
            recorded: Some(Mutex::new(BTreeSet::new())),
            refused: Mutex::new(None),
        }
    }

    pub fn is_live(&self) -> bool {
        self.base == Path::new("/")
    }

    /// The directory this root stands on (`/` when live).
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// Where a kernel path really is on disk under this root.
    pub fn real_path(&self, kernel_path: &str) -> PathBuf {
        self.base.join(kernel_path.trim_start_matches('/'))
    }

    /// The path to name in a message about `kernel_path`: the kernel path
    /// itself on the live host; the file in the tree under `--root DIR`
    /// (`DIR/sys/...`), so it never reads like the live host's file.
    pub fn shown(&self, kernel_path: &str) -> PathBuf {
        if self.is_live() {
            PathBuf::from(kernel_path)
        } else {
            self.real_path(kernel_path)
        }
    }

    /// Paths touched so far, when recording.
    pub fn recorded(&self) -> Vec<(String, Access)> {
        match &self.recorded {
            Some(set) => set
                .lock()
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default(),
            None => Vec::new(),
        }
    }

    fn record(&self, kernel_path: &str, access: Access) {
        if let Some(set) = &self.recorded {
            if let Ok(mut set) = set.lock() {
                set.insert((kernel_path.to_string(), access));
            }
        }
    }

    /// Read a kernel file that must exist.
    pub fn read(&self, kernel_path: &str) -> Result<String, KernelError> {
        let bytes = self.read_bytes(kernel_path)?;
        fsio::text(&self.real_path(kernel_path), bytes)
            .map_err(|e| self.kernel_error(kernel_path, e))
    }

    /// A kernel file's bytes as they are (what `capture` copies), bounded
    /// by its [`Kind`]; a FIFO or a device is refused without blocking.
    pub fn read_bytes(&self, kernel_path: &str) -> Result<Vec<u8>, KernelError> {
        self.record(kernel_path, Access::File);
        self.read_unrecorded(kernel_path)
    }

    fn read_unrecorded(&self, kernel_path: &str) -> Result<Vec<u8>, KernelError> {
        let path = self.real_path(kernel_path);
        let limit = Kind::of(kernel_path).limit();
        // The live /proc and /sys hold only regular files: no look before
        // the open there (the monitor reads them many times a second).
        let read = if self.is_live() {
            fsio::read_unlooked(&path, limit, KERNEL_FILE)
        } else {
            fsio::read_bounded(&path, limit, KERNEL_FILE)
        };
        read.map_err(|e| self.kernel_error(kernel_path, e))
    }

    /// A read's error as a `KernelError`; a refusal is also kept for
    /// [`Root::refusal`].
    fn kernel_error(&self, kernel_path: &str, e: FileError) -> KernelError {
        let path = self.shown(kernel_path);
        if let FileError::Io { source, .. } = e {
            return KernelError::Read { path, source };
        }
        let why = if self.is_live() {
            e.to_string()
        } else {
            format!("{e}; capture the host again with `nettune capture`")
        };
        if let Ok(mut first) = self.refused.lock() {
            first.get_or_insert_with(|| (path.clone(), why.clone()));
        }
        KernelError::Refused { path, why }
    }

    /// The first file this root refused to read (a FIFO, a device, larger
    /// than its kind's limit), as an error: a tree holding one is not a
    /// kernel tree, even where reading went on without it.
    pub fn refusal(&self) -> Result<(), KernelError> {
        match self.refused.lock().ok().and_then(|first| first.clone()) {
            Some((path, why)) => Err(KernelError::Refused { path, why }),
            None => Ok(()),
        }
    }

    /// Read a kernel file that a kernel or machine may legitimately lack or
    /// refuse (no cpufreq, an old kernel, `speed` of a link that is down):
    /// `None` then, an error only for real failures.
    pub fn read_optional(&self, kernel_path: &str) -> Result<Option<String>, KernelError> {
        match self.read(kernel_path) {
            Ok(text) => Ok(Some(text)),
            Err(KernelError::Read { source, .. }) if is_absent(&source) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Read a binary or very large kernel file (/sys/kernel/btf/vmlinux,
    /// /proc/kallsyms) that must exist, with its own bound `max_bytes`
    /// instead of its kind's: its whole contents are held in memory.
    pub fn read_bytes_limited(
        &self,
        kernel_path: &str,
        max_bytes: u64,
    ) -> Result<Vec<u8>, KernelError> {
        self.record(kernel_path, Access::File);
        let path = self.real_path(kernel_path);
        let read = if self.is_live() {
            fsio::read_unlooked(&path, max_bytes, KERNEL_FILE)
        } else {
            fsio::read_bounded(&path, max_bytes, KERNEL_FILE)
        };
        read.map_err(|e| self.kernel_error(kernel_path, e))
    }

    /// Read an optional one-line value, trimmed.
    pub fn read_value(&self, kernel_path: &str) -> Result<Option<String>, KernelError> {
        Ok(self
            .read_optional(kernel_path)?
            .map(|text| text.trim().to_string()))
    }

    /// Read and parse a file that must exist; parse errors name the file.
    pub fn parse<T>(
        &self,
        kernel_path: &str,
        parse: impl FnOnce(&str) -> Result<T, ParseError>,
    ) -> Result<T, KernelError> {
        let text = self.read(kernel_path)?;
        parse(&text).map_err(|e| KernelError::Parse {
            path: self.shown(kernel_path),
            msg: e.0,
        })
    }

    /// Read and parse a file that may be absent.
    pub fn parse_optional<T>(
        &self,
        kernel_path: &str,
        parse: impl FnOnce(&str) -> Result<T, ParseError>,
    ) -> Result<Option<T>, KernelError> {
        match self.read_optional(kernel_path)? {
            None => Ok(None),
            Some(text) => parse(&text).map(Some).map_err(|e| KernelError::Parse {
                path: self.shown(kernel_path),
                msg: e.0,
            }),
        }
    }

    /// Entry names of a directory, sorted; `None` when it does not exist.
    pub fn list(&self, kernel_path: &str) -> Result<Option<Vec<String>>, KernelError> {
        self.record(kernel_path, Access::Dir);
        let entries = match fs::read_dir(self.real_path(kernel_path)) {
            Ok(entries) => entries,
            Err(e) if is_absent(&e) => return Ok(None),
            Err(source) => {
                return Err(KernelError::Read {
                    path: self.shown(kernel_path),
                    source,
                })
            }
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| KernelError::Read {
                path: self.shown(kernel_path),
                source,
            })?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(Some(names))
    }

    /// Whether a kernel path exists (following symlinks).
    pub fn exists(&self, kernel_path: &str) -> bool {
        self.record(kernel_path, Access::Path);
        self.real_path(kernel_path).exists()
    }

    /// The kernel path a symlink resolves to, with every link followed
    /// (`/sys/class/net/eth0/device` -> `/sys/devices/pci0000:00/0000:00:03.0/virtio2`).
    /// `None` when the path does not exist.
    pub fn resolve(&self, kernel_path: &str) -> Option<String> {
        self.record(kernel_path, Access::Path);
        let real = fs::canonicalize(self.real_path(kernel_path)).ok()?;
        let base = fs::canonicalize(&self.base).ok()?;
        let inside = real.strip_prefix(&base).ok()?;
        Some(format!("/{}", inside.display()))
    }

    /// The last component of a symlink's target (a driver's or device's name).
    pub fn link_name(&self, kernel_path: &str) -> Option<String> {
        self.resolve(kernel_path)
            .and_then(|p| p.rsplit('/').next().map(str::to_string))
    }

    /// Write a value to a kernel file that must already exist. Under a
    /// tree, a file that resolves out of it (a symlink to the live /proc)
    /// or onto a mounted procfs or sysfs is refused: a tree never changes
    /// the live kernel.
    pub fn write(&self, kernel_path: &str, value: &str) -> Result<(), KernelError> {
        let real = self.real_path(kernel_path);
        let failed = |source| KernelError::Write {
            path: self.shown(kernel_path),
            value: value.to_string(),
            source,
        };
        if !self.is_live() {
            ensure_inside(&self.base, &real).map_err(failed)?;
        }
        // A FIFO or a device in a tree is refused, never waited on.
        let mut file =
            fsio::open_for_write(&real, !self.is_live(), KERNEL_FILE).map_err(|e| match e {
                FileError::Io { source, .. } => failed(source),
                refused => self.kernel_error(kernel_path, refused),
            })?;
        file.write_all(value.as_bytes()).map_err(failed)
    }

    /// PIDs of running processes whose `comm` is `name`. Only the matching
    /// processes are recorded, so a capture does not copy every process.
    pub fn processes_named(&self, name: &str) -> Result<Vec<u32>, KernelError> {
        let entries = match fs::read_dir(self.real_path("/proc")) {
            Ok(entries) => entries,
            Err(e) if is_absent(&e) => return Ok(Vec::new()),
            Err(source) => {
                return Err(KernelError::Read {
                    path: self.shown("/proc"),
                    source,
                })
            }
        };
        let mut pids = Vec::new();
        for entry in entries.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let comm_path = format!("/proc/{pid}/comm");
            // A process can exit between listing and reading: not an error
            // (a refused file is kept for `refusal`).
            if let Ok(comm) = self.read_unrecorded(&comm_path) {
                if comm.trim_ascii() == name.as_bytes() {
                    self.record(&comm_path, Access::File);
                    pids.push(pid);
                }
            }
        }
        pids.sort_unstable();
        Ok(pids)
    }
}

/// statfs magic numbers (linux/magic.h) of the kernel's own filesystems.
pub const PROC_SUPER_MAGIC: i64 = 0x9fa0;
pub const SYSFS_MAGIC: i64 = 0x6265_6572;

/// The filesystem type (statfs f_type) of `path`, if it exists.
pub fn fs_magic(path: &Path) -> Option<i64> {
    let stat = nix::sys::statfs::statfs(path).ok()?;
    Some(stat.filesystem_type().0 as i64)
}

/// Refuse `path` (to be written under the tree `base`) when what it
/// resolves to lies outside the tree or on a mounted procfs or sysfs: a
/// symlink in a capture (`proc/sys -> /proc/sys`) must not lead a write to
/// the live kernel. A path that does not exist yet is judged by its
/// nearest existing ancestor (where it would be created).
pub fn ensure_inside(base: &Path, path: &Path) -> io::Result<()> {
    let mut existing = path;
    while fs::symlink_metadata(existing).is_err() {
        match existing.parent() {
            Some(parent) => existing = parent,
            None => break,
        }
    }
    let resolved = fs::canonicalize(existing)?;
    let tree = fs::canonicalize(base)?;
    let refuse = |why: String| {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("refused: {why}; a --root tree never changes the live host"),
        ))
    };
    if !resolved.starts_with(&tree) {
        return refuse(format!(
            "it resolves to {}, outside the tree {}",
            resolved.display(),
            tree.display()
        ));
    }
    match fs_magic(&resolved) {
        Some(PROC_SUPER_MAGIC) => refuse(format!("{} is on a mounted procfs", resolved.display())),
        Some(SYSFS_MAGIC) => refuse(format!("{} is on a mounted sysfs", resolved.display())),
        _ => Ok(()),
    }
}

/// Errors that mean "this kernel or device does not have it", not failure.
/// sysfs answers EINVAL for `speed` of a down link, ENODEV/EOPNOTSUPP for
/// attributes a driver lacks.
fn is_absent(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::NotFound)
        || matches!(
            e.raw_os_error(),
            Some(libc::ENOENT | libc::ENOTDIR | libc::EINVAL | libc::ENODEV | libc::EOPNOTSUPP)
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_under_its_base_and_names_the_kernel_path_on_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::create_dir_all(dir.path().join("proc/sys/net/core")).expect("mkdir");
        fs::write(dir.path().join("proc/sys/net/core/somaxconn"), "4096\n").expect("write");
        let root = Root::at(dir.path()).expect("root");
        assert_eq!(
            root.read_value("/proc/sys/net/core/somaxconn")
                .expect("read"),
            Some("4096".to_string())
        );
        assert_eq!(
            root.read_value("/proc/sys/net/core/missing").expect("read"),
            None
        );
        let err = root.read("/proc/interrupts").expect_err("missing file");
        // The file in the tree, not a path that reads like the live host's.
        assert!(
            err.to_string()
                .contains(&format!("{}/proc/interrupts", dir.path().display())),
            "{err}"
        );
        let err = Root::live()
            .read("/proc/nettune-no-such-file")
            .expect_err("missing");
        assert!(
            err.to_string()
                .starts_with("cannot read /proc/nettune-no-such-file"),
            "{err}"
        );
    }

    #[test]
    fn a_tree_never_writes_through_a_link_out_of_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        fs::write(outside.path().join("somaxconn"), "4096\n").expect("write");
        fs::create_dir_all(dir.path().join("proc/sys/net")).expect("mkdir");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("proc/sys/net/core"))
            .expect("symlink");
        fs::write(dir.path().join("proc/sys/net/inside"), "1\n").expect("write");
        let root = Root::at(dir.path()).expect("root");
        let err = root
            .write("/proc/sys/net/core/somaxconn", "8192\n")
            .expect_err("a link out of the tree");
        assert!(err.to_string().contains("outside the tree"), "{err}");
        assert_eq!(
            fs::read_to_string(outside.path().join("somaxconn")).expect("read"),
            "4096\n",
            "the file the link leads to is untouched"
        );
        root.write("/proc/sys/net/inside", "2\n").expect("inside");
        // A path onto the live procfs is refused even when spelled inside.
        let live = dir.path().join("proc/sys/net/live");
        std::os::unix::fs::symlink("/proc/sys/net/core", &live).expect("symlink");
        assert!(ensure_inside(dir.path(), &live.join("somaxconn")).is_err());
        assert_eq!(fs_magic(Path::new("/proc")), Some(PROC_SUPER_MAGIC));
        assert_eq!(fs_magic(Path::new("/sys")), Some(SYSFS_MAGIC));
    }

    #[test]
    fn kernel_files_are_bounded_by_kind() {
        assert_eq!(Kind::of("/proc/interrupts"), Kind::Table);
        assert_eq!(Kind::of("/proc/net/softnet_stat"), Kind::Table);
        assert_eq!(Kind::of("/proc/sys/net/core/rmem_max"), Kind::Value);
        assert_eq!(Kind::of("/proc/irq/24/smp_affinity_list"), Kind::Value);
        assert_eq!(Kind::of("/proc/812/comm"), Kind::Value);
        assert_eq!(
            Kind::of("/sys/class/net/eth0/queues/rx-0/rps_cpus"),
            Kind::Value
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let core = dir.path().join("proc/sys/net/core");
        fs::create_dir_all(&core).expect("mkdir");
        let big = fs::File::create(core.join("rmem_max")).expect("create");
        big.set_len(Kind::Value.limit() + 1).expect("sparse");
        // A table may be that large.
        let table = fs::File::create(dir.path().join("proc/interrupts")).expect("create");
        table.set_len(Kind::Value.limit() + 1).expect("sparse");
        let root = Root::at(dir.path()).expect("root");
        assert!(root.refusal().is_ok());
        let err = root
            .read_value("/proc/sys/net/core/rmem_max")
            .expect_err("past a value's limit");
        assert!(
            err.to_string().starts_with(&format!(
                "'{}' is larger than 64 KiB: not a kernel file; capture the host again",
                core.join("rmem_max").display()
            )),
            "{err}"
        );
        assert_eq!(
            root.read("/proc/interrupts").expect("a table").len() as u64,
            Kind::Value.limit() + 1
        );
        // The refusal stays, for whoever read on without it.
        let kept = root.refusal().expect_err("kept");
        assert_eq!(kept.to_string(), err.to_string());
    }

    /// Runs `f` on a thread and fails the test if it does not end soon: a
    /// regression blocks on a FIFO forever.
    fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(20))
            .expect("blocked on a FIFO")
    }

    #[test]
    fn a_fifo_is_refused_for_reading_and_writing_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let core = dir.path().join("proc/sys/net/core");
        fs::create_dir_all(&core).expect("mkdir");
        let fifo = core.join("rmem_max");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo");
        let base = dir.path().to_path_buf();
        let (read, write) = bounded(move || {
            let root = Root::at(&base).expect("root");
            let read = root.read_value("/proc/sys/net/core/rmem_max").map(|_| ());
            let write = root.write("/proc/sys/net/core/rmem_max", "4096\n");
            (read, write)
        });
        for err in [read.expect_err("read"), write.expect_err("write")] {
            assert!(matches!(err, KernelError::Refused { .. }), "{err:?}");
            assert!(
                err.to_string().starts_with(&format!(
                    "'{}' is a FIFO, not a regular file",
                    fifo.display()
                )),
                "{err}"
            );
        }
    }

    #[test]
    fn refuses_a_root_without_proc_or_sys() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = Root::at(dir.path()).expect_err("empty dir");
        assert!(err.to_string().contains("neither proc/ nor sys/"), "{err}");
        let err = Root::at(&dir.path().join("nope")).expect_err("missing dir");
        assert!(err.to_string().contains("nope"), "{err}");
    }

    #[test]
    fn resolves_relative_symlinks_inside_the_tree() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dev = dir
            .path()
            .join("sys/devices/pci0000:00/0000:00:03.0/virtio2");
        fs::create_dir_all(&dev).expect("mkdir");
        fs::create_dir_all(dir.path().join("sys/class/net/eth0")).expect("mkdir");
        std::os::unix::fs::symlink(
            "../../../devices/pci0000:00/0000:00:03.0/virtio2",
            dir.path().join("sys/class/net/eth0/device"),
        )
        .expect("symlink");
        let root = Root::at(dir.path()).expect("root");
        assert_eq!(
            root.resolve("/sys/class/net/eth0/device").as_deref(),
            Some("/sys/devices/pci0000:00/0000:00:03.0/virtio2")
        );
        assert_eq!(
            root.link_name("/sys/class/net/eth0/device").as_deref(),
            Some("virtio2")
        );
    }
}
