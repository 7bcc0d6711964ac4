//! The host lock: one live host per database, whatever path names it.
//!
//! A host takes an exclusive, non-blocking advisory lock (`flock`) on the
//! database file itself before SQLite opens it, so a second host is refused
//! with `HOST_ALREADY_RUNNING` instead of fencing the first host's live work,
//! however it names the file: the same path, a symbolic link or a hard link
//! all reach the same inode, and the lock belongs to the inode. The kernel
//! releases the lock when the descriptor is closed, including when the
//! process dies, so nothing stale ever blocks a restart, and nothing is
//! created beside the database.
//!
//! `flock` locks are independent of the POSIX (`fcntl`) locks SQLite takes on
//! the same file, but closing ANY descriptor of a file drops every POSIX lock
//! the process holds on it. So this module never opens a database that
//! another lock of this process already holds (a process-wide table of held
//! device and inode numbers answers first), and a [`HostLock`] must outlive
//! the SQLite connection it guards (the host drops the store first).
//! This module does not open the database with SQLite.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rustix::fs::{FlockOperation, flock};
use rustix::io::Errno;

use crate::StorageError;
use crate::path::check_database_path;

/// The `(device, inode)` of every database a lock of this process holds.
static HELD: Mutex<Option<HashSet<(u64, u64)>>> = Mutex::new(None);

fn held() -> MutexGuard<'static, Option<HashSet<(u64, u64)>>> {
    HELD.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How often a busy lock is asked again, and how long apart.
const LOCK_RETRIES: u32 = 20;
const LOCK_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(5);

/// An exclusive advisory lock on a database file, held until dropped.
#[derive(Debug)]
pub struct HostLock {
    /// Closing this descriptor (on drop) releases the lock.
    _file: File,
    identity: (u64, u64),
    path: PathBuf,
}

impl HostLock {
    /// Takes the lock on the database at `database`, creating an empty file
    /// there when none exists (SQLite then gives it the schema), or refuses
    /// at once with [`StorageError::HostAlreadyRunning`] when another live
    /// host holds it under any name.
    pub fn acquire(database: &Path) -> Result<HostLock, StorageError> {
        HostLock::take(database, true)
    }

    /// Like [`HostLock::acquire`], but a missing file is
    /// [`StorageError::DatabaseMissing`] and nothing is created: for
    /// commands that only work on an existing database (`db migrate`).
    pub fn acquire_existing(database: &Path) -> Result<HostLock, StorageError> {
        HostLock::take(database, false)
    }

    fn take(database: &Path, create: bool) -> Result<HostLock, StorageError> {
        check_database_path(database)?;
        // Held across the whole check-open-lock-record sequence, so two
        // threads of this process never both open the same file.
        let mut guard = held();
        let table = guard.get_or_insert_with(HashSet::new);
        let refused = || StorageError::HostAlreadyRunning {
            database: database.to_owned(),
        };
        if let Ok(metadata) = std::fs::metadata(database) {
            if !metadata.is_file() {
                return Err(not_a_file(database));
            }
            // Held by this process: refuse without opening the file, which
            // would drop the SQLite locks of the connection behind it.
            if table.contains(&(metadata.dev(), metadata.ino())) {
                return Err(refused());
            }
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(database)
            .map_err(|source| {
                if source.kind() == std::io::ErrorKind::NotFound && !create {
                    StorageError::DatabaseMissing {
                        path: database.to_owned(),
                    }
                } else {
                    StorageError::Io {
                        context: "opening the database to lock it",
                        path: database.to_owned(),
                        source,
                    }
                }
            })?;
        let metadata = file.metadata().map_err(|source| StorageError::Io {
            context: "reading the metadata of",
            path: database.to_owned(),
            source,
        })?;
        if !metadata.is_file() {
            return Err(not_a_file(database));
        }
        let identity = (metadata.dev(), metadata.ino());
        if table.contains(&identity) {
            // Only if the file was replaced by a link to a held one between
            // the look above and the open; closing this descriptor then
            // costs the holder its POSIX locks, which is why the common
            // case never opens the file.
            return Err(refused());
        }
        // A child process the previous holder was spawning keeps a copy of
        // the lock's descriptor from its fork until its exec closes it (a
        // millisecond at most), so a lock that is busy is asked again for a
        // little while before the answer is HOST_ALREADY_RUNNING.
        let mut result = flock(&file, FlockOperation::NonBlockingLockExclusive);
        for _ in 0..LOCK_RETRIES {
            if result != Err(Errno::WOULDBLOCK) {
                break;
            }
            std::thread::sleep(LOCK_RETRY_PAUSE);
            result = flock(&file, FlockOperation::NonBlockingLockExclusive);
        }
        match result {
            Ok(()) => {
                table.insert(identity);
                Ok(HostLock {
                    _file: file,
                    identity,
                    path: database.to_owned(),
                })
            }
            Err(Errno::WOULDBLOCK) => Err(refused()),
            Err(errno) => Err(StorageError::Io {
                context: "locking the database",
                path: database.to_owned(),
                source: errno.into(),
            }),
        }
    }

    /// The database path the lock was taken through.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for HostLock {
    fn drop(&mut self) {
        if let Some(table) = held().as_mut() {
            table.remove(&self.identity);
        }
    }
}

fn not_a_file(database: &Path) -> StorageError {
    StorageError::DatabaseUnreadable {
        path: database.to_owned(),
        detail: "it is not a regular file".to_owned(),
    }
}
