//! Printing to stdout. A closed pipe (`nettune inspect | head`) surfaces as
//! an io::Error that `error::report` turns into a quiet exit.

use std::io::Write;

pub fn print(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()
}
