//! The shared secret of `nettune serve` and its clients (`--token-file F`):
//! a regular file owned by the user nettune runs as (or by root) that only
//! its owner may read or write (mode 0600 or 0400), as ssh demands of a
//! private key. Anything else is refused, by the daemon before it listens
//! and by a client before it connects: a secret that another user could
//! read, or replace, is no secret.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::base::user_file::{self, UserFileError};

/// The fewest bytes a token may have.
pub const MIN_LEN: usize = 16;
/// The most bytes a token file may have.
pub const MAX_FILE: u64 = 4096;

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

/// Read the token file: a regular file owned by this user or root, no
/// permission for group or others, at least [`MIN_LEN`] bytes once
/// trailing white space is taken off. What is checked is the file opened
/// (a FIFO or a device in its place is refused without waiting).
pub fn load(path: &Path) -> anyhow::Result<Token> {
    let shown = path.display();
    let (file, meta) = user_file::open(path).map_err(|e| match e {
        UserFileError::Open(err) => {
            anyhow::anyhow!("--token-file '{shown}': cannot read it: {err}; {MAKE_ONE}")
        }
        other => anyhow::anyhow!("--token-file '{shown}' {other}"),
    })?;
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
    // credentials are root's, readable by the service's user). Root is
    // held to it too: a file another user owns is one they can rewrite.
    if meta.uid() != me && meta.uid() != 0 {
        anyhow::bail!(
            "--token-file '{shown}' belongs to uid {}, neither this user (uid {me}) nor root, who \
             alone may own the secret; `chown {me} {shown}` or use a file of your own",
            meta.uid()
        );
    }
    let text = user_file::read_all(file, MAX_FILE)
        .map_err(|e| anyhow::anyhow!("--token-file '{shown}' {e}"))?;
    let end = text
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    Token::new(text[..end].to_vec()).map_err(|e| anyhow::anyhow!("--token-file '{shown}': {e}"))
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
