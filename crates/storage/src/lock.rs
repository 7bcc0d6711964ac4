//! The host lock: one live host per database.
//!
//! A host takes an exclusive, non-blocking advisory lock (`flock`) on a
//! sibling file `<database path>.lock` before it opens the database, so a
//! second host on the same database is refused with `HOST_ALREADY_RUNNING`
//! instead of fencing the first host's live work. The kernel releases the
//! lock when the file is closed, including when the process dies, so a
//! stale lock file never blocks a restart. The lock file is never deleted:
//! deleting it would let two hosts lock two different files of one name.
//! This module does not open the database.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};
use rustix::io::Errno;

use crate::StorageError;

/// How often a busy lock is asked again, and how long apart.
const LOCK_RETRIES: u32 = 20;
const LOCK_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(5);

/// An exclusive advisory lock on `<database path>.lock`, held until dropped.
#[derive(Debug)]
pub struct HostLock {
    /// Closing this file (on drop) releases the lock.
    _file: File,
    path: PathBuf,
}

impl HostLock {
    /// The lock file that guards the database at `database`.
    pub fn lock_path(database: &Path) -> PathBuf {
        let mut path = database.as_os_str().to_owned();
        path.push(".lock");
        PathBuf::from(path)
    }

    /// Takes the lock for the database at `database`, or refuses at once with
    /// [`StorageError::HostAlreadyRunning`] when another live host holds it.
    pub fn acquire(database: &Path) -> Result<HostLock, StorageError> {
        let path = HostLock::lock_path(database);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|source| StorageError::Io {
                context: "opening the host lock file",
                path: path.clone(),
                source,
            })?;
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
            Ok(()) => Ok(HostLock { _file: file, path }),
            Err(Errno::WOULDBLOCK) => Err(StorageError::HostAlreadyRunning { lock_path: path }),
            Err(errno) => Err(StorageError::Io {
                context: "locking the host lock file",
                path,
                source: errno.into(),
            }),
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
