//! The migration is all-or-nothing: interrupted after every number of
//! SQLite VM steps, from 1 until it completes, the file is still the v8
//! database it was (same logical dump), and reopening it then migrates
//! cleanly. An interrupt in COMMIT's last steps, after the transaction is
//! durable, must be reported as the completed migration it is: trying every
//! step count (not a stride) is what found that case.

use std::path::Path;

use plan_core::ErrorCode;
use plan_storage::Store;

use crate::support::{fixture_database, logical_dump};

/// A folder for the many short-lived databases of these tests: on tmpfs
/// where the machine has one, since what is under test is atomicity under an
/// abort, not fsync latency, and every step count below is tried.
fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::tempdir_in(shm)
    {
        return dir;
    }
    tempfile::tempdir().unwrap()
}

fn run(base: &[u8], dir: &Path, expected_before: &str, expected_after: &str) -> u64 {
    let mut steps = 1;
    let mut attempts = 0;
    loop {
        let path = dir.join(format!("attempt-{steps}.db"));
        std::fs::write(&path, base).unwrap();
        attempts += 1;
        match Store::open_with_step_limit(&path, steps) {
            Ok((store, report)) => {
                assert_eq!(report.to, 10);
                drop(store);
                assert_eq!(logical_dump(&path), expected_after, "completed at {steps} steps");
                eprintln!("migration completed within {steps} steps after {attempts} interrupted attempts");
                return steps;
            }
            Err(error) => {
                assert_eq!(error.code(), ErrorCode::StorageFailed, "{steps} steps: {error}");
                assert!(error.to_string().contains("rolled back"), "{error}");
                assert_eq!(
                    logical_dump(&path),
                    expected_before,
                    "interrupted at {steps} steps"
                );
                let (store, _) = Store::open(&path).unwrap();
                drop(store);
                assert_eq!(
                    logical_dump(&path),
                    expected_after,
                    "reopened after {steps} steps"
                );
            }
        }
        remove_database(&path);
        steps += 1;
    }
}

fn remove_database(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let _ignored = std::fs::remove_file(file);
    }
}

#[test]
fn an_interrupted_v8_migration_leaves_v8_intact() {
    let dir = scratch_dir();
    let source = fixture_database(dir.path(), "source.db");
    let base = std::fs::read(&source).unwrap();
    let expected_before = logical_dump(&source);
    assert!(expected_before.starts_with("user_version 8\n"));
    drop(Store::open(&source).unwrap());
    let expected_after = logical_dump(&source);
    let completed = run(&base, dir.path(), &expected_before, &expected_after);
    assert!(
        completed > 100,
        "the migration ran suspiciously few steps: {completed}"
    );
}

#[test]
fn an_interrupted_creation_leaves_an_empty_database() {
    let dir = scratch_dir();
    let expected_after = {
        let path = dir.path().join("fresh.db");
        drop(Store::open(&path).unwrap());
        logical_dump(&path)
    };
    let mut steps = 1;
    loop {
        let path = dir.path().join(format!("create-{steps}.db"));
        std::fs::write(&path, b"").unwrap();
        match Store::open_with_step_limit(&path, steps) {
            Ok(_) => break,
            Err(error) => {
                assert_eq!(error.code(), ErrorCode::StorageFailed, "{error}");
                // Still an empty database: user_version 0 and no schema at all.
                let dump = logical_dump(&path);
                assert_eq!(dump.trim_end(), "user_version 0", "interrupted at {steps} steps");
                drop(Store::open(&path).unwrap());
                assert_eq!(logical_dump(&path), expected_after);
            }
        }
        remove_database(&path);
        steps += 1;
    }
}
