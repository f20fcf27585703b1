//! The shared secret of `nettune serve` and its clients (`--token-file F`):
//! a file only its owner may read or write (mode 0600 or 0400), as ssh
//! demands of a private key. Anything looser is refused before the daemon
//! listens or the client connects.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use anyhow::Context;

use crate::base::fsio::{self, FileError};

/// The fewest bytes a token may have.
pub const MIN_LEN: usize = 16;

/// A token is a few dozen bytes; a file far larger is not one (and is
/// never read whole).
const FILE_LIMIT: u64 = 64 << 10;

const MAKE_ONE: &str = "make one with `umask 077; head -c 32 /dev/urandom | base64 > FILE`";

/// A token's secret bytes. Debug output never shows them.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token({} bytes)", self.0.len())
    }
}

impl Token {
    /// A token from bytes (a caller that keeps its secret elsewhere).
    pub fn new(secret: impl Into<Vec<u8>>) -> anyhow::Result<Token> {
        let secret = secret.into();
        if secret.len() < MIN_LEN {
            anyhow::bail!(
                "the token has {} bytes; give at least {MIN_LEN} ({MAKE_ONE})",
                secret.len()
            );
        }
        Ok(Token(secret))
    }

    pub fn secret(&self) -> &[u8] {
        &self.0
    }
}

/// Read the token file: a regular file, no permission for group or others,
/// at least [`MIN_LEN`] bytes once a trailing newline is taken off.
pub fn load(path: &Path) -> anyhow::Result<Token> {
    let shown = path.display();
    let meta = std::fs::metadata(path)
        .with_context(|| format!("--token-file '{shown}': cannot read it; {MAKE_ONE}"))?;
    if !meta.is_file() {
        anyhow::bail!("--token-file '{shown}' is not a regular file");
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        anyhow::bail!(
            "--token-file '{shown}' has mode {mode:04o}: others may read or change the secret; \
             `chmod 600 {shown}` (only its owner may read it)"
        );
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    // As ssh with a private key: owned by this user or by root (systemd's
    // credentials are root's, readable by the service's user).
    if meta.uid() != me && meta.uid() != 0 && me != 0 {
        anyhow::bail!(
            "--token-file '{shown}' belongs to uid {}, neither this user ({me}) nor root; use a \
             file of your own",
            meta.uid()
        );
    }
    let text = fsio::read_bounded(path, FILE_LIMIT, "a token file").map_err(|e| match e {
        FileError::Io { source, .. } => anyhow::anyhow!("--token-file '{shown}': {source}"),
        refused => anyhow::anyhow!("--token-file {refused}; {MAKE_ONE}"),
    })?;
    let end = text
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    Token::new(text[..end].to_vec()).with_context(|| format!("--token-file '{shown}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, body: &str, mode: u32) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, body).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }

    #[test]
    fn only_a_private_file_with_enough_bytes_is_a_token() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = write(dir.path(), "good", "0123456789abcdef0123\n", 0o600);
        assert_eq!(
            load(&good).expect("token").secret(),
            b"0123456789abcdef0123"
        );
        let open = write(dir.path(), "open", "0123456789abcdef0123\n", 0o644);
        let err = format!("{:#}", load(&open).expect_err("world-readable"));
        assert!(
            err.contains("mode 0644") && err.contains("chmod 600"),
            "{err}"
        );
        let group = write(dir.path(), "group", "0123456789abcdef0123\n", 0o640);
        assert!(load(&group).is_err());
        let short = write(dir.path(), "short", "abc\n", 0o600);
        assert!(format!("{:#}", load(&short).expect_err("short")).contains("at least 16"));
        let err = format!(
            "{:#}",
            load(&dir.path().join("missing")).expect_err("missing")
        );
        assert!(
            err.contains("missing") && err.contains("head -c 32"),
            "{err}"
        );
        assert_eq!(
            format!("{:?}", load(&good).expect("token")),
            "Token(20 bytes)"
        );
    }
}
