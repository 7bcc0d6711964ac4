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
