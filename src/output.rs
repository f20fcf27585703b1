//! Text and JSON printers over `io::Write`.
