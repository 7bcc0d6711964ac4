//! A write is refused, not acknowledged, once the files under the open
//! connection were deleted, replaced or truncated.

use plan_core::{Effect, ErrorCode, Session};
use plan_storage::{StorageError, Store};

fn wal(database: &std::path::Path) -> std::path::PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push("-wal");
    name.into()
}

fn write(store: &mut Store, id: &str) -> Result<(), StorageError> {
    store.create_session(&Session::new(id.to_owned(), None), 1)?;
    store.apply(&[Effect::SaveSession(Session::new(id.to_owned(), None))], 2)
}

fn assert_refused(store: &mut Store, needle: &str) {
    let error = write(store, "after").unwrap_err();
    assert_eq!(error.code(), ErrorCode::StorageFailed, "{error}");
    assert!(error.to_string().contains(needle), "{error}");
    // Every later write is refused too, not only the first.
    let again = store.set_default_shell("bash").unwrap_err();
    assert!(again.to_string().contains(needle), "{again}");
}

#[test]
fn a_deleted_write_ahead_log_refuses_further_writes() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("host.db");
    let (mut store, _) = Store::open(&database).unwrap();
    write(&mut store, "before").unwrap();
    std::fs::remove_file(wal(&database)).unwrap();
    assert_refused(&mut store, "was deleted");
}

#[test]
fn a_truncated_write_ahead_log_refuses_further_writes() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("host.db");
    let (mut store, _) = Store::open(&database).unwrap();
    write(&mut store, "before").unwrap();
    let log = std::fs::OpenOptions::new()
        .write(true)
        .open(wal(&database))
        .unwrap();
    log.set_len(0).unwrap();
    assert_refused(&mut store, "was truncated");
}

#[test]
fn a_replaced_or_deleted_database_file_refuses_further_writes() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("host.db");
    let (mut store, _) = Store::open(&database).unwrap();
    write(&mut store, "before").unwrap();
    std::fs::remove_file(&database).unwrap();
    assert_refused(&mut store, "database file was deleted");

    let replaced = dir.path().join("replaced.db");
    let (mut store, _) = Store::open(&replaced).unwrap();
    write(&mut store, "before").unwrap();
    let copy = dir.path().join("copy.db");
    std::fs::copy(&replaced, &copy).unwrap();
    std::fs::rename(&copy, &replaced).unwrap();
    assert_refused(&mut store, "replaced by another file");
}
