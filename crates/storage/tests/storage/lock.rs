//! The host lock refuses a second live host on one database, under any name.

use plan_core::ErrorCode;
use plan_storage::{HostLock, StorageError, Store};

#[test]
fn a_second_host_is_refused_until_the_first_lets_go() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("host.db");
    let first = HostLock::acquire(&database).unwrap();
    assert_eq!(first.path(), database);
    let error = HostLock::acquire(&database).unwrap_err();
    assert_eq!(error.code(), ErrorCode::HostAlreadyRunning);
    assert!(matches!(error, StorageError::HostAlreadyRunning { .. }));
    assert!(error.to_string().contains("host.db"), "{error}");
    // Another database next to it has its own lock.
    let other = HostLock::acquire(&dir.path().join("other.db")).unwrap();
    drop(first);
    let again = HostLock::acquire(&database).unwrap();
    drop((again, other));
}

#[test]
fn every_alias_of_a_locked_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("host.db");
    drop(Store::open(&database).unwrap());
    let symlink = dir.path().join("through-a-link.db");
    std::os::unix::fs::symlink(&database, &symlink).unwrap();
    let hard_link = dir.path().join("hard-link.db");
    std::fs::hard_link(&database, &hard_link).unwrap();
    let dotted = dir.path().join(".").join("host.db");
    let held = HostLock::acquire(&database).unwrap();
    for alias in [&symlink, &hard_link, &dotted, &database] {
        let error = HostLock::acquire(alias).unwrap_err();
        assert_eq!(
            error.code(),
            ErrorCode::HostAlreadyRunning,
            "{}: {error}",
            alias.display()
        );
    }
    drop(held);
    // Taken through the link, the lock keeps the real name out too.
    let through_link = HostLock::acquire(&symlink).unwrap();
    let error = HostLock::acquire(&database).unwrap_err();
    assert_eq!(error.code(), ErrorCode::HostAlreadyRunning);
    drop(through_link);
}

#[test]
fn the_lock_creates_nothing_beside_the_database_and_refuses_what_is_not_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("host.db");
    let lock = HostLock::acquire(&database).unwrap();
    drop(lock);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["host.db"]);
    let error = HostLock::acquire(std::path::Path::new("/dev/null")).unwrap_err();
    assert_eq!(error.code(), ErrorCode::DatabaseUnreadable, "{error}");
    let error = HostLock::acquire(dir.path()).unwrap_err();
    assert_eq!(error.code(), ErrorCode::DatabaseUnreadable, "{error}");
    let missing = dir.path().join("missing.db");
    let error = HostLock::acquire_existing(&missing).unwrap_err();
    assert_eq!(error.code(), ErrorCode::DatabaseUnreadable, "{error}");
    assert!(!missing.exists());
}
