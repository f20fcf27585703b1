//! Small files a user hands nettune by name (a token, a certificate, a
//! key, a CA bundle): opened without blocking (a FIFO in their place must
//! not hang the daemon), regular files only, read up to a size limit, and
//! checked on the open file itself so that what is checked is what is read.

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Why a user's file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum UserFileError {
    #[error("cannot read it: {0}")]
    Open(io::Error),
    #[error("is not a regular file")]
    NotRegular,
    #[error("is larger than {0} bytes, more than such a file holds")]
    TooLarge(u64),
    #[error("cannot read it: {0}")]
    Read(io::Error),
}

/// Open `path` (following symbolic links) for reading without blocking,
/// and check that it is a regular file; its metadata is that of the open
/// file.
pub fn open(path: &Path) -> Result<(File, Metadata), UserFileError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(UserFileError::Open)?;
    let meta = file.metadata().map_err(UserFileError::Open)?;
    if !meta.is_file() {
        return Err(UserFileError::NotRegular);
    }
    Ok((file, meta))
}

/// Read an opened file whole, refusing one of more than `max` bytes.
pub fn read_all(file: File, max: u64) -> Result<Vec<u8>, UserFileError> {
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(UserFileError::Read)?;
    if bytes.len() as u64 > max {
        return Err(UserFileError::TooLarge(max));
    }
    Ok(bytes)
}

/// [`open`] then [`read_all`].
pub fn read(path: &Path, max: u64) -> Result<Vec<u8>, UserFileError> {
    let (file, _) = open(path)?;
    read_all(file, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_directories_and_large_files_are_refused_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo");
        assert!(matches!(read(&fifo, 10), Err(UserFileError::NotRegular)));
        assert!(matches!(
            read(dir.path(), 10),
            Err(UserFileError::NotRegular)
        ));
        let big = dir.path().join("big");
        std::fs::write(&big, [b'x'; 11]).expect("write");
        assert!(matches!(read(&big, 10), Err(UserFileError::TooLarge(10))));
        assert_eq!(read(&big, 11).expect("fits"), vec![b'x'; 11]);
        assert!(matches!(
            read(&dir.path().join("missing"), 10),
            Err(UserFileError::Open(_))
        ));
    }
}
