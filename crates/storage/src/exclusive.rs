//! Opening a database as its one writer: take the host lock, then migrate.
//!
//! Every read-write open that may migrate goes through here (`Host::open`
//! and `plan-checkpoint db migrate`), so a migration never runs beside a
//! live host. This module adds no SQL; it orders the lock and the open.

use std::path::Path;

use crate::{HostLock, MigrationReport, StorageError, Store};

/// A store opened read-write under the host lock; the lock is held for as
/// long as this value (or its `lock`) lives.
#[derive(Debug)]
pub struct ExclusiveStore {
    /// The open, migrated store.
    pub store: Store,
    /// What opening did to the schema.
    pub migration: MigrationReport,
    /// The single-host lock; dropping it lets another host in.
    pub lock: HostLock,
}

impl ExclusiveStore {
    /// Takes the host lock (`HOST_ALREADY_RUNNING` while another live host
    /// holds it, under any name), then opens and migrates the database to
    /// v10, creating it when there is none.
    pub fn open(database: impl AsRef<Path>) -> Result<ExclusiveStore, StorageError> {
        let database = database.as_ref();
        ExclusiveStore::open_locked(database, HostLock::acquire(database)?)
    }

    /// Like [`ExclusiveStore::open`], but a missing file is
    /// `DATABASE_MISSING` and nothing is created: for `db migrate`, which
    /// only works on an existing database.
    pub fn open_existing(database: impl AsRef<Path>) -> Result<ExclusiveStore, StorageError> {
        let database = database.as_ref();
        ExclusiveStore::open_locked(database, HostLock::acquire_existing(database)?)
    }

    /// Opens under a lock already taken: only the lock's holder may let
    /// SQLite roll back what an interrupted host or migration left.
    fn open_locked(database: &Path, lock: HostLock) -> Result<ExclusiveStore, StorageError> {
        let (mut store, migration) = Store::open(database)?;
        // Under the lock no other connection writes.
        store.keep_session_rows();
        Ok(ExclusiveStore {
            store,
            migration,
            lock,
        })
    }
}
