//! Which database names a host may use at all.
//!
//! SQLite gives some names a meaning of their own: the empty name and
//! `:memory:` open a private database that vanishes when it closes, and a
//! `file:` name is read as a URI whose parameters can do the same
//! (`mode=memory`) or loosen durability. A host on such a database would
//! acknowledge work that is gone at exit, so every open and every lock
//! refuses them first. This module only looks at the name.

use std::path::Path;

use crate::StorageError;

/// Refuses the names SQLite would not treat as a plain file on disk.
pub(crate) fn check_database_path(path: &Path) -> Result<(), StorageError> {
    let text = path.as_os_str().as_encoded_bytes();
    let reason = if text.is_empty() {
        Some("an empty name opens a temporary database that is discarded when it closes")
    } else if text == b":memory:" {
        Some("`:memory:` opens an in-memory database that is discarded when it closes")
    } else if text.starts_with(b"file:") {
        Some(
            "a `file:` name is a SQLite URI, whose parameters can make a database that keeps nothing; name the file by its path (for example `./file:...`)",
        )
    } else {
        None
    };
    match reason {
        Some(reason) => Err(StorageError::DatabasePathRefused {
            path: path.to_owned(),
            reason: reason.to_owned(),
        }),
        None => Ok(()),
    }
}
