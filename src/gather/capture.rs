//! `nettune capture DIR`: copy the files nettune reads from the live host
//! into DIR, laid out as the kernel lays them out, so that
//! `--root DIR` sees the same host anywhere.
//!
//! Which files: exactly those a recording `Root` touched while reading the
//! whole host model. How: each path is walked component by component; a
//! symlink on the way is recreated with its target made relative (as sysfs
//! links are), and the walk continues at the target, which is copied too.
//! Driver data (ethtool, qdiscs, the netdev family's queues, NAPIs and
//! qstats) goes to DIR/nettune/driver.json.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use anyhow::Context as _;
use serde::Serialize;

use crate::base::root::Access;
use crate::base::Root;
use crate::host::{identity, read_host, Inputs, Selection};
use crate::nic::live::{LiveEthtool, LiveNetdev, LiveNetlink};
use crate::nic::recorded::DriverFile;

/// What a capture wrote, for the user's summary line.
#[derive(Debug, Serialize)]
pub struct CaptureSummary {
    pub dir: PathBuf,
    pub files: usize,
    pub interfaces: Vec<String>,
    /// Snapshots in the capture: 1, or a series for `monitor --root`
    /// (`nettune capture --samples N`).
    pub samples: usize,
}

/// Metadata beside the tree: DIR/nettune/capture.json.
#[derive(Debug, Serialize)]
struct CaptureInfo {
    schema_version: u32,
    nettune_version: &'static str,
    captured_unix_secs: u64,
    kernel: Option<String>,
    netns: Option<String>,
    /// The keyed hash of the host's machine id (never the id itself), so
    /// that `inspect --root` and `doctor --root` of the capture name the
    /// machine a fleet report groups by.
    machine_id_hash: Option<String>,
}

pub fn capture(dest: &Path, netns: Option<String>) -> anyhow::Result<CaptureSummary> {
    prepare_destination(dest)?;
    let root = Root::live_recording();
    let (ethtool, netlink, netdev) = (LiveEthtool, LiveNetlink, LiveNetdev);
    let sources = Inputs {
        root: &root,
        ethtool: &ethtool,
        netlink: &netlink,
        netdev: &netdev,
        netns: netns.clone(),
    };
    let selection = Selection {
        all: true,
        iface: None,
    };
    let host = read_host(&sources, &selection)?;
    let files = copy_recorded(dest, &root)?;
    let names: Vec<String> = host.interfaces.iter().map(|i| i.name.clone()).collect();
    DriverFile::record(&names, &ethtool, &netlink, &netdev).write(dest)?;
    write_info(dest, host.kernel.clone(), netns)?;
    Ok(CaptureSummary {
        dir: dest.to_path_buf(),
        files,
        interfaces: names,
        samples: 1,
    })
}

/// Copy every path the recording `root` touched into `dest`; how many
/// were copied.
pub(crate) fn copy_recorded(dest: &Path, root: &Root) -> anyhow::Result<usize> {
    let mut files = 0;
    for (path, access) in &root.recorded() {
        // A file can vanish between reading and copying (a process exits);
        // it is then absent from the capture, as it is from the host now.
        if replicate(dest, path, *access)
            .with_context(|| format!("copying {path} into {}", dest.display()))?
        {
            files += 1;
        }
    }
    Ok(files)
}

/// Write `dest/nettune/capture.json`.
pub(crate) fn write_info(
    dest: &Path,
    kernel: Option<String>,
    netns: Option<String>,
) -> anyhow::Result<()> {
    let info = CaptureInfo {
        schema_version: crate::host::SCHEMA_VERSION,
        nettune_version: env!("CARGO_PKG_VERSION"),
        captured_unix_secs: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        kernel,
        netns,
        machine_id_hash: identity::machine_id_hash(&Root::live()),
    };
    record_hostname(dest)?;
    let info_path = dest.join(identity::CAPTURE_INFO);
    fs::write(&info_path, serde_json::to_string_pretty(&info)? + "\n")
        .with_context(|| format!("cannot write {}", info_path.display()))
}

/// Copy the host name into the tree, where `--root` reads it as it reads it
/// live: the host model itself does not read it, so the recording missed it.
fn record_hostname(dest: &Path) -> anyhow::Result<()> {
    const PATH: &str = "/proc/sys/kernel/hostname";
    if inside(dest, Path::new(PATH)).exists() {
        return Ok(());
    }
    // A host without the file has no name to copy: replicate skips it.
    replicate(dest, PATH, Access::File)
        .map(|_| ())
        .with_context(|| format!("copying {PATH} into {}", dest.display()))
}

/// The destination must be new or empty: a capture never mixes with
/// another tree.
pub(crate) fn prepare_destination(dest: &Path) -> anyhow::Result<()> {
    match fs::read_dir(dest) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                anyhow::bail!(
                    "'{}' exists and is not empty; give a new directory for the capture",
                    dest.display()
                );
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => anyhow::bail!("cannot use '{}' for the capture: {e}", dest.display()),
    }
    fs::create_dir_all(dest.join("nettune"))
        .with_context(|| format!("cannot create '{}'", dest.display()))?;
    Ok(())
}

/// Copy one recorded path into `dest`. Returns whether anything was copied.
fn replicate(dest: &Path, kernel_path: &str, access: Access) -> io::Result<bool> {
    let real = match walk(dest, Path::new(kernel_path), 0) {
        Ok(real) => real,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let target = inside(dest, &real);
    let meta = match fs::metadata(&real) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if meta.is_dir() {
        fs::create_dir_all(&target)?;
        if access == Access::Dir {
            copy_listing(dest, &real)?;
        }
        return Ok(true);
    }
    // Kernel files refuse reads for many reasons (write-only, EINVAL for
    // `speed` of a down link): the live reader saw them as absent too.
    // Read as the Root reads them: bounded by kind, only regular files.
    match Root::live().read_bytes(&real.to_string_lossy()) {
        Ok(bytes) => {
            if let Some(parent) = target.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::write(&target, bytes)?;
            Ok(true)
        }
        Err(_) => Ok(false),
    }
}

/// Recreate a directory's entries: links as links, subdirectories, and
/// empty files for the names (a listing needs names, not contents).
fn copy_listing(dest: &Path, real_dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(real_dir)?.flatten() {
        let path = entry.path();
        let target = inside(dest, &path);
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        if fs::symlink_metadata(&target).is_ok() {
            continue;
        }
        if file_type.is_symlink() {
            let link = fs::read_link(&path)?;
            std::os::unix::fs::symlink(relative_link(&path, &link), &target)?;
        } else if file_type.is_dir() {
            fs::create_dir_all(&target)?;
        } else {
            fs::write(&target, b"")?;
        }
    }
    Ok(())
}

/// Walk `path` on the live filesystem from `/`, recreating every symlink and
/// directory met on the way under `dest`. Returns the real path reached.
fn walk(dest: &Path, path: &Path, depth: u32) -> io::Result<PathBuf> {
    // The kernel gives up after 40 links; so do we.
    if depth > 40 {
        return Err(io::Error::from_raw_os_error(libc::ELOOP));
    }
    let mut current = PathBuf::from("/");
    for component in path.components() {
        let name = match component {
            Component::Normal(name) => name,
            Component::ParentDir => {
                current.pop();
                continue;
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => continue,
        };
        let next = current.join(name);
        let meta = fs::symlink_metadata(&next)?;
        if meta.file_type().is_symlink() {
            let link = fs::read_link(&next)?;
            let copy = inside(dest, &next);
            if let Some(parent) = copy.parent() {
                fs::create_dir_all(parent)?;
            }
            if fs::symlink_metadata(&copy).is_err() {
                std::os::unix::fs::symlink(relative_link(&next, &link), &copy)?;
            }
            let joined = if link.is_absolute() {
                link
            } else {
                current.join(link)
            };
            current = walk(dest, &joined, depth + 1)?;
        } else {
            if meta.is_dir() {
                fs::create_dir_all(inside(dest, &next))?;
            }
            current = next;
        }
    }
    Ok(current)
}

/// `dest` + an absolute live path.
fn inside(dest: &Path, live: &Path) -> PathBuf {
    dest.join(live.strip_prefix("/").unwrap_or(live))
}

/// Symlinks in a capture are relative, so the tree works wherever it lies.
fn relative_link(link_path: &Path, target: &Path) -> PathBuf {
    if !target.is_absolute() {
        return target.to_path_buf();
    }
    let depth = link_path
        .parent()
        .map(|p| {
            p.components()
                .filter(|c| matches!(c, Component::Normal(_)))
                .count()
        })
        .unwrap_or(0);
    let mut rel = PathBuf::new();
    for _ in 0..depth {
        rel.push("..");
    }
    rel.push(target.strip_prefix("/").unwrap_or(target));
    rel
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_links_become_relative() {
        assert_eq!(
            relative_link(Path::new("/proc/mounts"), Path::new("/proc/self/mounts")),
            PathBuf::from("../proc/self/mounts")
        );
        assert_eq!(
            relative_link(
                Path::new("/sys/class/net/eth0"),
                Path::new("../../devices/x")
            ),
            PathBuf::from("../../devices/x")
        );
    }
}
