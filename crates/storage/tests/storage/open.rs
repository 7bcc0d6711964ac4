//! Every row of the storage contract's "what opening a database must do"
//! table, for `Store::open` and `Store::open_read_only`.

use std::path::Path;

use plan_core::ErrorCode;
use plan_storage::{MigrationReport, StorageError, Store};

use crate::support::{execute, fixture_database, logical_dump};

/// Opens `path` expecting a refusal, and checks the file is byte-identical.
fn refused(path: &Path) -> StorageError {
    let before = std::fs::read(path).unwrap();
    let error = Store::open(path).expect_err("the open must be refused");
    assert_eq!(
        std::fs::read(path).unwrap(),
        before,
        "a refused open changed the file"
    );
    let read_only = Store::open_read_only(path).expect_err("the read-only open must be refused");
    assert_eq!(read_only.code(), error.code());
    assert_eq!(
        std::fs::read(path).unwrap(),
        before,
        "a refused read-only open changed the file"
    );
    error
}

fn assert_names_version(error: &StorageError, version: u32) {
    assert_eq!(error.code(), ErrorCode::SchemaUnsupported, "{error}");
    let message = error.to_string();
    assert!(message.contains(&format!("version {version}")), "{message}");
    assert!(
        matches!(error, StorageError::SchemaUnsupported { found, .. } if *found == version),
        "{error:?}"
    );
}

#[test]
fn a_new_path_gets_the_v10_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    let (store, report) = Store::open(&path).unwrap();
    assert_eq!(report, MigrationReport { from: None, to: 10 });
    assert!(report.migrated());
    assert_eq!(store.schema_version().unwrap(), 10);
    assert_eq!(store.default_shell().unwrap(), None);
}

#[test]
fn an_empty_file_gets_the_v10_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.db");
    std::fs::write(&path, b"").unwrap();
    let (store, report) = Store::open(&path).unwrap();
    assert_eq!(report.from, None);
    assert_eq!(store.schema_version().unwrap(), 10);
}

#[test]
fn a_v8_database_is_adopted_and_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_database(dir.path(), "v8.db");
    let (store, report) = Store::open(&path).unwrap();
    assert_eq!(
        report,
        MigrationReport {
            from: Some(8),
            to: 10
        }
    );
    assert_eq!(store.schema_version().unwrap(), 10);
    drop(store);
    let history = crate::support::table_rows(&path, "SELECT version, name FROM refinery_schema_history");
    assert_eq!(
        history,
        [
            "int 8 | text \"baseline\"",
            "int 9 | text \"session_shell\"",
            "int 10 | text \"plan_checkpoint\""
        ]
    );
}

#[test]
fn a_v10_database_is_opened_without_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_database(dir.path(), "v8.db");
    drop(Store::open(&path).unwrap());
    let before = logical_dump(&path);
    let (store, report) = Store::open(&path).unwrap();
    assert_eq!(
        report,
        MigrationReport {
            from: Some(10),
            to: 10
        }
    );
    assert!(!report.migrated());
    drop(store);
    assert_eq!(logical_dump(&path), before);
    let read_only = Store::open_read_only(&path).unwrap();
    assert_eq!(read_only.schema_version().unwrap(), 10);
    assert_eq!(logical_dump(&path), before);
}

#[test]
fn v9_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_database(dir.path(), "v9.db");
    execute(&path, "PRAGMA user_version = 9;");
    let error = refused(&path);
    assert_names_version(&error, 9);
}

#[test]
fn versions_below_8_are_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    for version in [0_u32, 1, 7] {
        let path = dir.path().join(format!("v{version}.db"));
        execute(
            &path,
            &format!("CREATE TABLE old (x); PRAGMA user_version = {version};"),
        );
        let error = refused(&path);
        assert_names_version(&error, version);
    }
}

#[test]
fn versions_above_10_are_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_database(dir.path(), "v11.db");
    drop(Store::open(&path).unwrap());
    execute(&path, "PRAGMA user_version = 11;");
    let error = refused(&path);
    assert_names_version(&error, 11);
    assert!(error.to_string().contains("newer"), "{error}");
    let path = dir.path().join("v4000.db");
    execute(&path, "CREATE TABLE t (x); PRAGMA user_version = 4000;");
    assert_names_version(&refused(&path), 4000);
}

#[test]
fn a_v10_database_with_a_foreign_history_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("odd.db");
    drop(Store::open(&path).unwrap());
    execute(&path, "DELETE FROM refinery_schema_history WHERE version = 9;");
    assert_names_version(&refused(&path), 10);
    let path = dir.path().join("bare10.db");
    execute(&path, "CREATE TABLE t (x); PRAGMA user_version = 10;");
    assert_names_version(&refused(&path), 10);
}

#[test]
fn not_sqlite_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[u8]); 3] = [
        ("text.db", b"this is a text file, not a database\n".as_slice()),
        ("short.db", b"SQLite".as_slice()),
        ("zeros.db", &[0_u8; 4096]),
    ];
    for (name, bytes) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let error = refused(&path);
        assert_eq!(error.code(), ErrorCode::DatabaseUnreadable, "{name}: {error}");
        assert!(error.to_string().contains(name), "{error}");
    }
}

#[test]
fn a_corrupt_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_database(dir.path(), "corrupt.db");
    // Keep the 100-byte file header, scramble the schema b-tree of page 1.
    let mut bytes = std::fs::read(&path).unwrap();
    for (offset, byte) in bytes.iter_mut().enumerate().take(4096).skip(100) {
        *byte = (offset * 7 % 251) as u8;
    }
    std::fs::write(&path, &bytes).unwrap();
    let error = refused(&path);
    assert_eq!(error.code(), ErrorCode::DatabaseUnreadable, "{error}");
}

#[test]
fn read_only_never_migrates() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_database(dir.path(), "v8.db");
    let before = std::fs::read(&path).unwrap();
    let error = Store::open_read_only(&path).unwrap_err();
    assert_names_version(&error, 8);
    assert!(error.to_string().contains("db migrate"), "{error}");
    assert_eq!(std::fs::read(&path).unwrap(), before);

    let missing = dir.path().join("missing.db");
    let error = Store::open_read_only(&missing).unwrap_err();
    assert_eq!(error.code(), ErrorCode::DatabaseUnreadable);
    assert!(!missing.exists(), "a read-only open created a file");

    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    assert_names_version(&Store::open_read_only(&empty).unwrap_err(), 0);
    assert_eq!(std::fs::read(&empty).unwrap(), b"");
}

#[test]
fn read_only_store_reads_but_cannot_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_database(dir.path(), "v8.db");
    drop(Store::open(&path).unwrap());
    let mut store = Store::open_read_only(&path).unwrap();
    assert!(
        store
            .get_session(&plan_core::SessionId::from("s-plan"))
            .unwrap()
            .is_some()
    );
    let error = store.set_default_shell("bash").unwrap_err();
    assert_eq!(error.code(), ErrorCode::StorageFailed);
}

/// The names in the database's directory other than the database itself.
fn beside(path: &Path) -> Vec<String> {
    let name = path.file_name().unwrap().to_owned();
    let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .filter(|entry| *entry != name)
        .map(|entry| entry.to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_v8_database_with_a_damaged_table_is_refused_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_database(dir.path(), "damaged.db");
    // Page 6 is the plan_approvals table the migration copies; the schema on
    // page 1 stays readable, so only a health check finds the damage.
    let mut bytes = std::fs::read(&path).unwrap();
    for byte in &mut bytes[5 * 4096..5 * 4096 + 64] {
        *byte = 0xff;
    }
    std::fs::write(&path, &bytes).unwrap();
    let error = Store::open(&path).unwrap_err();
    assert_eq!(error.code(), ErrorCode::DatabaseUnreadable, "{error}");
    assert!(error.to_string().contains("quick_check"), "{error}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "a refused open changed the file"
    );
    assert_eq!(
        beside(&path),
        Vec::<String>::new(),
        "a refused open created files beside it"
    );
}

#[test]
fn damage_in_a_table_the_migration_never_reads_does_not_stop_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_database(dir.path(), "transcript-damaged.db");
    let (root, page_size): (i64, i64) = {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let root = conn
            .query_row(
                "SELECT rootpage FROM sqlite_schema WHERE name = 'transcript_entries'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        let page_size = conn.query_row("PRAGMA page_size", [], |row| row.get(0)).unwrap();
        (root, page_size)
    };
    let start = usize::try_from((root - 1) * page_size).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    for byte in &mut bytes[start..start + 64] {
        *byte = 0xff;
    }
    std::fs::write(&path, &bytes).unwrap();
    // The health check covers what the migration reads (plan_approvals,
    // sessions, settings), so a transcript page is not its business: the
    // migration proceeds, and a reader of the transcript meets the damage.
    let (store, report) = Store::open(&path).unwrap();
    assert_eq!(
        report,
        MigrationReport {
            from: Some(8),
            to: 10
        }
    );
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let found: String = conn
        .query_row("PRAGMA quick_check(transcript_entries)", [], |row| row.get(0))
        .unwrap();
    assert_ne!(found, "ok", "the damage is still there for a whole-file check");
}

#[test]
fn a_failed_migration_leaves_the_file_byte_identical_with_nothing_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_database(dir.path(), "v8.db");
    let before = std::fs::read(&path).unwrap();
    // Interrupted inside the migration transaction: the journal mode must
    // not have been switched and no WAL or journal file may remain.
    let error = Store::open_with_step_limit(&path, 50).unwrap_err();
    assert_eq!(error.code(), ErrorCode::StorageFailed, "{error}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "a failed migration changed the file"
    );
    assert_eq!(beside(&path), Vec::<String>::new());
}

#[test]
fn names_sqlite_would_not_keep_on_disk_are_refused_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("kept.db");
    let names = [
        std::path::PathBuf::from(""),
        std::path::PathBuf::from(":memory:"),
        std::path::PathBuf::from(format!("file:{}?mode=memory", uri.display())),
        std::path::PathBuf::from("file:relative.db"),
    ];
    for name in &names {
        let error = Store::open(name).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidParams, "{name:?}: {error}");
        assert!(error.to_string().contains("cannot be a host database"), "{error}");
        let error = Store::open_read_only(name).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidParams, "{name:?}: {error}");
        let error = plan_storage::HostLock::acquire(name).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidParams, "{name:?}: {error}");
    }
    assert!(!uri.exists());
    assert!(!Path::new("relative.db").exists());
    assert!(!Path::new("file:relative.db").exists());
    // A plain file whose name merely contains the words is a file.
    let plain = dir.path().join("file:plain.db");
    drop(Store::open(&plain).unwrap());
    assert!(plain.exists());
}

#[test]
fn the_pending_migration_is_found_without_writing() {
    use plan_storage::{PendingMigration, pending_migration};
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    assert_eq!(pending_migration(&empty).unwrap(), PendingMigration::CreateSchema);
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0, "nothing written");
    let legacy = crate::support::fixture_database(dir.path(), "v8.db");
    let before = crate::support::logical_dump(&legacy);
    assert_eq!(pending_migration(&legacy).unwrap(), PendingMigration::FromV8);
    assert_eq!(crate::support::logical_dump(&legacy), before);
    let current = dir.path().join("v10.db");
    drop(plan_storage::Store::open(&current).unwrap());
    assert_eq!(pending_migration(&current).unwrap(), PendingMigration::Nothing);
    let missing = pending_migration(&dir.path().join("nope.db")).unwrap_err();
    assert!(
        matches!(missing, plan_storage::StorageError::DatabaseMissing { .. }),
        "{missing}"
    );
    crate::support::execute(&current, "PRAGMA user_version = 9");
    let refused = pending_migration(&current).unwrap_err();
    assert!(
        matches!(
            refused,
            plan_storage::StorageError::SchemaUnsupported { found: 9, .. }
        ),
        "{refused}"
    );
}
