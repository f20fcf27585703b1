//! What several targets share: text as nettune's readers take it, a
//! scratch directory per process, and copies of the fixture hosts.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The repository's fixture hosts (tests/fixtures/hosts).
pub fn fixtures_source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hosts")
}

/// The fixture hosts' names, sorted (a target picks one by a byte).
pub const FIXTURES: &[&str] = &[
    "one-socket-ice-16q",
    "two-socket-nic-node1",
    "two-socket-smt-8q",
    "vm-2cpu-busy-poll",
    "vm-2cpu-virtio",
];

/// Each fixture's NIC (for commands that name one), in the same order.
pub const FIXTURE_NICS: &[&str] = &["ens801f0", "ens1f0", "eth0", "eth0", "eth0"];

/// The input as the real readers see a file: `fs::read_to_string` refuses
/// what is not UTF-8, so such input goes no further.
pub fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// Split `data` at the first `sep`: a target's two inputs in one.
pub fn split(data: &[u8], sep: u8) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == sep) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[]),
    }
}

/// Commands print their results: keep libFuzzer's own output readable.
pub fn quiet_stdout() {
    if let Ok(null) = fs::OpenOptions::new().write(true).open("/dev/null") {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 onto fd 1; `null` stays open until then.
        unsafe { libc::dup2(null.as_raw_fd(), 1) };
    }
}

static SCRATCH: OnceLock<PathBuf> = OnceLock::new();

/// This process's scratch directory (on tmpfs when there is one), removed
/// when the process exits normally.
pub fn scratch() -> &'static Path {
    SCRATCH.get_or_init(|| {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("nettune-fuzz-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        if let Err(e) = fs::create_dir_all(&dir) {
            panic!("nettune-fuzz: cannot create {}: {e}", dir.display());
        }
        extern "C" fn remove() {
            if let Some(dir) = SCRATCH.get() {
                let _ = fs::remove_dir_all(dir);
            }
        }
        // SAFETY: registering a plain function to run at exit.
        unsafe { libc::atexit(remove) };
        dir
    })
}

/// A fresh, empty directory `name` in the scratch directory.
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = scratch().join(name);
    let _ = fs::remove_dir_all(&dir);
    if let Err(e) = fs::create_dir_all(&dir) {
        panic!("nettune-fuzz: cannot create {}: {e}", dir.display());
    }
    dir
}

/// Write `data` to `path`, which the harness owns: failing is a broken
/// harness, not a finding.
pub fn write(path: &Path, data: &[u8]) {
    if let Err(e) = fs::write(path, data) {
        panic!("nettune-fuzz: cannot write {}: {e}", path.display());
    }
}

static HOSTS: OnceLock<PathBuf> = OnceLock::new();

/// A private copy of the fixture hosts, made once per process: targets
/// change a file in it and put the file back.
pub fn hosts() -> &'static Path {
    HOSTS.get_or_init(|| {
        let dest = scratch().join("hosts");
        if let Err(e) = copy_tree(&fixtures_source(), &dest) {
            panic!("nettune-fuzz: cannot copy the fixture hosts: {e}");
        }
        dest
    })
}

fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let dest = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &dest)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(entry.path())?, &dest)?;
        } else {
            fs::copy(entry.path(), &dest)?;
        }
    }
    Ok(())
}

/// Run a nettune command line in this process, as `nettune ARGS` would;
/// its result (an error is an answer too) is dropped.
pub fn nettune(args: &[&str]) {
    use clap::Parser;
    let argv = std::iter::once("nettune").chain(args.iter().copied());
    match nettune::cli::Cli::try_parse_from(argv) {
        Ok(cli) => {
            let _ = nettune::cli::run(cli);
        }
        Err(e) => panic!("nettune-fuzz: the harness's own command line {args:?} is refused: {e}"),
    }
}
