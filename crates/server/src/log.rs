//! Lines for people on stderr that can never panic or stop the program.
//!
//! `eprintln!` panics when stderr cannot be written (`2>/dev/full`, a log
//! pipe whose reader died), and a panic in `serve` after the startup fence
//! would take the host down over a diagnostic. Every line the stdio
//! transport writes to stderr goes through [`line`], which drops what cannot
//! be written (the `plan-checkpoint` binary uses it for all of its own). This
//! module writes nothing else and reads nothing.

use std::io::Write;

/// Writes one line to stderr; a failed write is ignored (there is nowhere
/// left to report it).
pub fn line(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _unwritable = stderr
        .write_all(text.as_bytes())
        .and_then(|()| stderr.write_all(b"\n"))
        .and_then(|()| stderr.flush());
}
