//! The process exit codes, documented in `--help`.

/// Success.
pub(crate) const OK: i32 = 0;
/// Verification found problems (or an operation failed for a reason other
/// than usage or the database).
pub(crate) const FAILURE: i32 = 1;
/// The command line was wrong.
pub(crate) const USAGE: i32 = 2;
/// The database was refused: missing, wrong schema version, corrupt, locked.
pub(crate) const DATABASE_REFUSED: i32 = 3;
/// An input other than the database could not be read: `audit verify
/// --against`'s file is missing, unreadable or not OTLP/JSON (a line other
/// than an unfinished last one). Distinct from 1, which means tampering
/// was found.
pub(crate) const UNREADABLE: i32 = 4;
