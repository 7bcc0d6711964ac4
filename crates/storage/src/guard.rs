//! Noticing, cheaply, that the files under an open read-write connection
//! were deleted, replaced or truncated, before acknowledging another write.
//!
//! Deleting or truncating `<db>-wal` under a running host loses every
//! acknowledged write since the last checkpoint, and SQLite goes on writing
//! to its now unlinked or shortened log without a word. Before each write
//! transaction the store compares, by path, the database file with what it
//! saw when the connection opened (the same device and inode: nothing ever
//! replaces it legitimately) and the write-ahead log with what it saw after
//! its last commit: the same device and inode, and a log at least as long
//! (SQLite never shortens the log of an open connection at the default
//! `journal_size_limit`). On a mismatch every later write of the connection
//! is refused. It costs three `stat` calls per write: both files before it,
//! the log after it. What it cannot see (changes inside the files, a change
//! of the log between the check and the commit, the `-shm` file) is listed
//! in ARCHITECTURE.md; a database file replaced between the check and the
//! commit is noticed at the next write. This module only looks; it never
//! repairs anything.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::StorageError;

/// A file as last seen: device, inode and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    device: u64,
    inode: u64,
    size: u64,
}

impl Seen {
    fn of(path: &Path) -> Option<Seen> {
        std::fs::metadata(path).ok().map(|metadata| Seen {
            device: metadata.dev(),
            inode: metadata.ino(),
            size: metadata.len(),
        })
    }
}

/// What one read-write connection last saw of its files.
#[derive(Debug)]
pub(crate) struct FileGuard {
    database: PathBuf,
    wal: PathBuf,
    database_seen: Option<Seen>,
    wal_seen: Option<Seen>,
    /// Set at the first mismatch; from then on every write is refused.
    broken: Option<String>,
}

impl FileGuard {
    /// Starts watching the files of the database at `database`, as they are now.
    pub(crate) fn new(database: &Path) -> FileGuard {
        let mut wal = database.as_os_str().to_owned();
        wal.push("-wal");
        let mut guard = FileGuard {
            database: database.to_owned(),
            wal: PathBuf::from(wal),
            database_seen: None,
            wal_seen: None,
            broken: None,
        };
        guard.database_seen = Seen::of(&guard.database);
        guard.wal_seen = Seen::of(&guard.wal);
        guard
    }

    /// Refuses a write when the files are not the ones the connection uses.
    pub(crate) fn before_write(&mut self) -> Result<(), StorageError> {
        if self.broken.is_none() {
            self.broken = self.mismatch();
        }
        match &self.broken {
            None => Ok(()),
            Some(detail) => Err(StorageError::DatabaseFilesChanged {
                path: self.database.clone(),
                detail: detail.clone(),
            }),
        }
    }

    /// Records the log as a commit left them. The database file is the
    /// one [`FileGuard::before_write`] just found: a commit never replaces
    /// it, and its size is not compared.
    pub(crate) fn committed(&mut self) {
        if self.broken.is_some() {
            return;
        }
        if self.database_seen.is_none() {
            self.database_seen = Seen::of(&self.database);
        }
        self.wal_seen = Seen::of(&self.wal);
    }

    fn mismatch(&self) -> Option<String> {
        if let Some(seen) = self.database_seen {
            match Seen::of(&self.database) {
                None => return Some("the database file was deleted".to_owned()),
                Some(now) if (now.device, now.inode) != (seen.device, seen.inode) => {
                    return Some("the database file was replaced by another file".to_owned());
                }
                Some(_) => {}
            }
        }
        let seen = self.wal_seen?;
        match Seen::of(&self.wal) {
            None => Some(format!("the write-ahead log {} was deleted", self.wal.display())),
            Some(now) if (now.device, now.inode) != (seen.device, seen.inode) => Some(format!(
                "the write-ahead log {} was replaced by another file",
                self.wal.display()
            )),
            Some(now) if now.size < seen.size => Some(format!(
                "the write-ahead log {} was truncated from {} to {} bytes",
                self.wal.display(),
                seen.size,
                now.size
            )),
            Some(_) => None,
        }
    }
}
