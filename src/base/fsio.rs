//! Reading and opening files that nettune does not control, bounded.
//!
//! A capture is meant to be shared, and a saved plan, a recorded series or
//! a journal may come from anywhere: any of them can hold a FIFO where a
//! file belongs (an open or a read that waits forever), a device such as
//! `/dev/zero` (a read that never ends), or a file far larger than the
//! kernel or nettune ever writes (all the memory). Every such read goes
//! through here: it refuses what is not a regular file and what is larger
//! than the limit its caller chose for that kind of file, with an error
//! naming the path, and never blocks.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::units::format_bytes;

/// The limit for the JSON files nettune writes and reads back (saved
/// plans, journals, recorded driver answers, series, experiment results).
/// The largest real hosts (thousands of CPUs, a few thousand queues, each
/// with a CPU mask and counters) make files of a few MB; 64 MiB leaves
/// room for them and bounds what a damaged or hostile file costs.
pub const RECORD_LIMIT: u64 = 64 << 20;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The system refused (absent, permission, I/O error), as `fs::read`
    /// reports it.
    #[error("cannot read '{}': {source}", .path.display())]
    Io { path: PathBuf, source: io::Error },
    /// Larger than its kind of file ever is.
    #[error("'{}' is larger than {}: not {what}", .path.display(), format_bytes(*.limit))]
    TooLarge {
        path: PathBuf,
        limit: u64,
        what: String,
    },
    /// A FIFO, a device or a socket: its open or read may block forever or
    /// never end.
    #[error("'{}' is {kind}, not a regular file: not {what}", .path.display())]
    NotRegular {
        path: PathBuf,
        kind: &'static str,
        what: String,
    },
}

impl FileError {
    /// The system's error when the file could not be read (absent,
    /// permission); `None` when nettune refused it.
    pub fn io(&self) -> Option<&io::Error> {
        match self {
            FileError::Io { source, .. } => Some(source),
            _ => None,
        }
    }

    /// The file was absent.
    pub fn not_found(&self) -> bool {
        self.io()
            .is_some_and(|e| e.kind() == io::ErrorKind::NotFound)
    }

    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            FileError::Io { path, .. }
            | FileError::TooLarge { path, .. }
            | FileError::NotRegular { path, .. } => path,
        }
    }
}

/// Read all of `path`, which must be a regular file of at most `limit`
/// bytes; `what` names its kind for the error ("a saved plan").
///
/// It is looked at before it is opened: opening a device can act on it (a
/// watchdog arms, a tape rewinds), and the open itself never blocks
/// (`O_NONBLOCK`) should the file be swapped for a FIFO in between.
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, FileError> {
    let meta = fs::metadata(path).map_err(|source| io_error(path, source))?;
    check_regular(path, &meta, what)?;
    read_unlooked(path, limit, what)
}

/// [`read_bounded`] as UTF-8 text (invalid UTF-8 is an `InvalidData`
/// error, as `fs::read_to_string` gives).
pub fn read_text_bounded(path: &Path, limit: u64, what: &str) -> Result<String, FileError> {
    text(path, read_bounded(path, limit, what)?)
}

/// [`read_bounded`] without the look before the open: for the live /proc
/// and /sys, which hold only regular files and no devices, and which the
/// monitor reads many times a second (one system call fewer per read).
/// The opened file is still checked (`fstat`), so a FIFO or a device is
/// refused all the same, without blocking.
pub fn read_unlooked(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, FileError> {
    let file = open(path, OpenOptions::new().read(true))?;
    let meta = file.metadata().map_err(|source| io_error(path, source))?;
    check_regular(path, &meta, what)?;
    if meta.len() > limit {
        return Err(too_large(path, limit, what));
    }
    // procfs reports a size of 0 and sysfs a page: a hint, never trusted.
    let mut bytes = Vec::with_capacity(meta.len().min(limit) as usize + 1);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| io_error(path, source))?;
    if bytes.len() as u64 > limit {
        return Err(too_large(path, limit, what));
    }
    Ok(bytes)
}

/// UTF-8 text from bytes read from `path`.
pub fn text(path: &Path, bytes: Vec<u8>) -> Result<String, FileError> {
    String::from_utf8(bytes).map_err(|_| {
        io_error(
            path,
            io::Error::new(
                io::ErrorKind::InvalidData,
                "stream did not contain valid UTF-8",
            ),
        )
    })
}

/// Open the existing regular file `path` for writing, truncated: never
/// blocks on a FIFO, never writes to a device. `look` first checks what
/// the path is without opening it (for trees; the live /proc and /sys
/// hold only regular files).
pub fn open_for_write(path: &Path, look: bool, what: &str) -> Result<File, FileError> {
    if look {
        let meta = fs::metadata(path).map_err(|source| io_error(path, source))?;
        check_regular(path, &meta, what)?;
    }
    let file = open(path, OpenOptions::new().write(true).truncate(true))?;
    let meta = file.metadata().map_err(|source| io_error(path, source))?;
    check_regular(path, &meta, what)?;
    Ok(file)
}

/// Open with `O_NONBLOCK` (a FIFO's open returns at once) and `O_NOCTTY`
/// (a terminal never becomes ours). Regular files ignore `O_NONBLOCK`.
fn open(path: &Path, options: &mut OpenOptions) -> Result<File, FileError> {
    options
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|source| io_error(path, source))
}

/// A directory is an error of its own (`EISDIR`, as a read gives), not a
/// refusal: reading one neither blocks nor grows.
fn check_regular(path: &Path, meta: &Metadata, what: &str) -> Result<(), FileError> {
    let file_type = meta.file_type();
    let kind = if file_type.is_file() {
        return Ok(());
    } else if file_type.is_dir() {
        return Err(io_error(path, io::Error::from_raw_os_error(libc::EISDIR)));
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "not a file"
    };
    Err(FileError::NotRegular {
        path: path.to_path_buf(),
        kind,
        what: what.to_string(),
    })
}

fn io_error(path: &Path, source: io::Error) -> FileError {
    FileError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn too_large(path: &Path, limit: u64, what: &str) -> FileError {
    FileError::TooLarge {
        path: path.to_path_buf(),
        limit,
        what: what.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_file_up_to_its_limit_and_refuses_one_byte_more() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("plan.json");
        fs::write(&path, "0123456789").expect("write");
        assert_eq!(
            read_text_bounded(&path, 10, "a saved plan").expect("read"),
            "0123456789"
        );
        let err = read_bounded(&path, 9, "a saved plan").expect_err("too large");
        assert_eq!(
            err.to_string(),
            format!("'{}' is larger than 9 B: not a saved plan", path.display())
        );
        assert!(err.io().is_none());
    }

    #[test]
    fn a_file_that_grows_past_its_size_is_cut_at_the_limit() {
        // procfs says 0 bytes: only the read itself can tell.
        let err = read_unlooked(Path::new("/proc/self/status"), 16, "a kernel file")
            .expect_err("larger than 16 bytes");
        assert!(
            matches!(err, FileError::TooLarge { limit: 16, .. }),
            "{err}"
        );
        let status = read_unlooked(Path::new("/proc/self/status"), 1 << 20, "a kernel file")
            .expect("live procfs files are regular");
        assert!(!status.is_empty());
    }

    #[test]
    fn refuses_fifos_and_devices_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo");
        for read in [read_bounded, read_unlooked] {
            let err = read(&fifo, 100, "a saved plan").expect_err("a FIFO");
            assert_eq!(
                err.to_string(),
                format!(
                    "'{}' is a FIFO, not a regular file: not a saved plan",
                    fifo.display()
                )
            );
            let err = read(Path::new("/dev/zero"), 100, "a saved plan").expect_err("a device");
            assert!(err.to_string().contains("a character device"), "{err}");
        }
        for look in [true, false] {
            let err = open_for_write(&fifo, look, "a kernel file").expect_err("a FIFO");
            assert!(matches!(
                err,
                FileError::NotRegular { .. } | FileError::Io { .. }
            ));
        }
    }

    #[test]
    fn absent_files_and_directories_are_errors_not_refusals() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = read_bounded(&dir.path().join("nope"), 100, "x").expect_err("absent");
        assert!(err.not_found());
        let err = read_bounded(dir.path(), 100, "x").expect_err("a directory");
        assert_eq!(
            err.io().and_then(io::Error::raw_os_error),
            Some(libc::EISDIR)
        );
    }
}
