//! Text nettune writes into shell scripts and messages, made safe to
//! write: a value, an interface name or a reason can come from a saved
//! plan, a journal or a recorded tree, so it may hold anything (`a;$(x)`,
//! a newline, megabytes).
//!
//! - [`sh_word`]: one shell word that means exactly the text (POSIX sh
//!   single quotes).
//! - [`sh_comment`]: the text on one line, for after a `#`
//!   ([`sh_comment_line`]: the whole `# TEXT` line).
//! - [`excerpt`]: the text in 'single quotes' for a one-line message:
//!   control characters escaped, long text cut.

use std::borrow::Cow;

/// Characters a shell takes literally outside quotes.
fn plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.,:/-=+".contains(c)
}

/// `text` as one sh word: as it is when every character is plain, else in
/// single quotes (a `'` inside written `'\''`). Nothing inside single
/// quotes is expanded, so the word is exactly `text`.
pub fn sh_word(text: &str) -> Cow<'_, str> {
    if !text.is_empty() && text.chars().all(plain) {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(sh_quoted(text))
    }
}

/// `text` in single quotes, always (a `'` inside written `'\''`).
pub fn sh_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// `text` as the rest of a comment line: a newline (or any control
/// character) would end the comment and start a command, so each is
/// written as its escape (`\n`).
pub fn sh_comment(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(escape_controls(text))
}

/// `# TEXT`: a whole comment line, whatever the text holds.
pub fn sh_comment_line(text: &str) -> String {
    format!("# {}", sh_comment(text))
}

fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Characters of a value shown in a message.
const EXCERPT_CHARS: usize = 64;

/// `text` for an error message: `'65536\nx'`, or for a long text its first
/// 64 characters and its length (`'aaaa...' (10485760 bytes)`), so that a
/// message stays one short line whatever a file held.
pub fn excerpt(text: &str) -> String {
    let mut chars = text.char_indices();
    match chars.nth(EXCERPT_CHARS) {
        None => format!("'{}'", escape_controls(text)),
        Some((cut, _)) => format!(
            "'{}...' ({} bytes)",
            escape_controls(&text[..cut]),
            text.len()
        ),
    }
}

/// `bash -n` on `script`: whether it parses (nothing is run), for tests
/// of the scripts nettune writes.
#[cfg(test)]
pub(crate) fn bash_parses(script: &str) -> Result<(), String> {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut child = Command::new("bash")
        .arg("-n")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run bash: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_plain_or_single_quoted() {
        assert_eq!(sh_word("eth0"), "eth0");
        assert_eq!(
            sh_word("/proc/irq/74/smp_affinity_list"),
            "/proc/irq/74/smp_affinity_list"
        );
        assert_eq!(sh_word("a;$(x)"), "'a;$(x)'");
        assert_eq!(sh_word("it's"), r"'it'\''s'");
        assert_eq!(sh_word(""), "''");
        assert_eq!(sh_word("4096 131072"), "'4096 131072'");
    }

    /// bash reads each word back as exactly its text. Run with no PATH,
    /// so that even a broken quote could run no program: only the builtin
    /// printf runs.
    #[test]
    fn bash_reads_each_word_back_as_its_text() {
        for text in [
            "eth0",
            "a;$(x)",
            "it's",
            "`y` \\ \"z\"",
            "two\nlines",
            "",
            "*",
        ] {
            let out = std::process::Command::new("/bin/bash")
                .env_clear()
                .env("PATH", "/nonexistent")
                .arg("-c")
                .arg(format!("printf %s {}", sh_word(text)))
                .output()
                .expect("bash");
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                text,
                "{}",
                sh_word(text)
            );
        }
    }

    #[test]
    fn comments_stay_on_their_line() {
        assert_eq!(sh_comment("plain; $(x)"), "plain; $(x)");
        assert_eq!(
            sh_comment("why\ntouch /tmp/INJECTED\r"),
            r"why\ntouch /tmp/INJECTED\r"
        );
    }

    #[test]
    fn excerpts_are_short_and_on_one_line() {
        assert_eq!(excerpt("65536\nx"), r"'65536\nx'");
        let big = "7".repeat(10 << 20);
        let shown = excerpt(&big);
        assert!(shown.len() < 100, "{shown}");
        assert!(shown.ends_with("...' (10485760 bytes)"), "{shown}");
        assert_eq!(excerpt(&"é".repeat(64)), format!("'{}'", "é".repeat(64)));
    }
}
