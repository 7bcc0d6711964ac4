//! The host lock refuses a second live host on one database.

use plan_core::ErrorCode;
use plan_storage::{HostLock, StorageError};

#[test]
fn a_second_host_is_refused_until_the_first_lets_go() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("host.db");
    let first = HostLock::acquire(&database).unwrap();
    assert_eq!(first.path(), dir.path().join("host.db.lock"));
    let error = HostLock::acquire(&database).unwrap_err();
    assert_eq!(error.code(), ErrorCode::HostAlreadyRunning);
    assert!(matches!(error, StorageError::HostAlreadyRunning { .. }));
    assert!(error.to_string().contains("host.db.lock"), "{error}");
    // Another database next to it has its own lock.
    let other = HostLock::acquire(&dir.path().join("other.db")).unwrap();
    drop(first);
    let again = HostLock::acquire(&database).unwrap();
    drop((again, other));
}
