//! Opening at the edges: a database a killed process left behind always
//! reopens, a refused file is left byte-identical with nothing beside it,
//! and inspection works on read-only media.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{self, BIN, run};

fn sibling(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

/// The names in `db`'s directory other than `db` itself.
fn beside(db: &Path) -> Vec<String> {
    let name = db.file_name().unwrap().to_owned();
    let mut names: Vec<String> = std::fs::read_dir(db.parent().unwrap())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .filter(|entry| *entry != name)
        .map(|entry| entry.to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The schema version and approval count `db status` reports.
fn status(db: &Path) -> (u64, u64) {
    let result = run(Some(db), &["db", "status", "--json"]);
    assert_eq!(result.code, 0, "{}", result.stderr);
    let status: Value = serde_json::from_str(&result.stdout).unwrap();
    (
        status["schemaVersion"].as_u64().unwrap(),
        status["total"].as_u64().unwrap(),
    )
}

/// Whether `strace` can trace a child here (it is installed and ptrace is
/// allowed).
fn strace_works() -> bool {
    Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "true"])
        .status()
        .is_ok_and(|status| status.success())
}

/// Runs the binary with `args` under strace, which kills it (SIGKILL) at
/// the `nth` call of `syscall`. Returns whether it was killed (false: it
/// finished before making that many calls).
fn run_killed_at(args: &[&str], db: &Path, syscall: &str, nth: u32) -> bool {
    let status = Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-e"])
        .arg(format!("inject={syscall}:signal=SIGKILL:when={nth}"))
        .arg(BIN)
        .args(args)
        .arg("--db")
        .arg(db)
        .env_remove("PLAN_CHECKPOINT_DB")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    !status.success()
}

/// Kills `child` (SIGKILL) when the rollback journal beside `db` first has
/// content, or after `delay`: the fallback where strace cannot be used.
fn kill_at(mut child: Child, db: &Path, delay: Option<Duration>) {
    let journal = sibling(db, "-journal");
    let give_up = Instant::now() + Duration::from_secs(10);
    match delay {
        Some(delay) => std::thread::sleep(delay),
        None => {
            while Instant::now() < give_up
                && !std::fs::metadata(&journal).is_ok_and(|metadata| metadata.len() > 0)
                && child.try_wait().unwrap().is_none()
            {
                std::hint::spin_loop();
            }
        }
    }
    let _ = child.kill();
    child.wait().unwrap();
}

/// After a kill, the product opens the file first (no other SQLite touches
/// it before): serve must start on a created file, db migrate must finish a
/// migration; then the file is complete v10.
fn assert_reopens(db: &Path, migrating: bool, total: u64, point: &str) {
    if migrating {
        let result = run(Some(db), &["db", "migrate"]);
        assert_eq!(result.code, 0, "{point}: {}", result.stderr);
    } else {
        let reopened = Command::new(BIN)
            .args(["serve", "--db"])
            .arg(db)
            .env_remove("PLAN_CHECKPOINT_DB")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&reopened.stderr);
        assert_eq!(reopened.status.code(), Some(0), "{point}: {stderr}");
        assert!(stderr.contains("ready on"), "{point}: {stderr}");
    }
    assert_eq!(status(db), (10, total), "{point}");
    assert!(!sibling(db, "-journal").exists(), "{point}: a journal is left");
}

#[test]
fn a_kill_while_creating_or_migrating_never_makes_the_database_unopenable() {
    let (_fixture_dir, v8) = support::v8();
    let v8_bytes = std::fs::read(&v8).unwrap();
    let migrated_total = {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("copy.db");
        std::fs::write(&copy, &v8_bytes).unwrap();
        assert_eq!(run(Some(&copy), &["db", "migrate"]).code, 0);
        status(&copy).1
    };
    let dir = tempfile::tempdir().unwrap();
    if strace_works() {
        // Every fsync and every write of creating and of migrating is a
        // kill point, one run each, until a run gets through them all.
        let mut points = 0;
        for syscall in ["fsync,fdatasync", "pwrite64,write"] {
            for (migrating, total) in [(false, 0), (true, migrated_total)] {
                for nth in 1.. {
                    let db = dir.path().join(format!("kill-{points}.db"));
                    let args: &[&str] = if migrating {
                        std::fs::write(&db, &v8_bytes).unwrap();
                        &["db", "migrate"]
                    } else {
                        &["serve"]
                    };
                    let killed = run_killed_at(args, &db, syscall, nth);
                    points += 1;
                    let point = format!("{args:?} killed at {syscall} #{nth}");
                    if !killed {
                        break;
                    }
                    if db.exists() {
                        assert_reopens(&db, migrating, total, &point);
                    }
                    assert!(nth < 500, "{point}: never completed");
                }
            }
        }
        eprintln!("tried {points} kill points");
        return;
    }
    eprintln!("strace cannot trace here: killing at journal writes and at delays instead");
    for round in 0..24_u32 {
        let delay = (round % 2 == 1).then(|| Duration::from_millis(u64::from(round) * 3));
        let created = dir.path().join(format!("created-{round}.db"));
        let child = Command::new(BIN)
            .args(["serve", "--db"])
            .arg(&created)
            .env_remove("PLAN_CHECKPOINT_DB")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        kill_at(child, &created, delay);
        assert_reopens(&created, false, 0, &format!("creation round {round}"));
        let migrating = dir.path().join(format!("migrating-{round}.db"));
        std::fs::write(&migrating, &v8_bytes).unwrap();
        let child = Command::new(BIN)
            .args(["db", "migrate", "--db"])
            .arg(&migrating)
            .env_remove("PLAN_CHECKPOINT_DB")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        kill_at(child, &migrating, delay);
        assert_reopens(
            &migrating,
            true,
            migrated_total,
            &format!("migration round {round}"),
        );
    }
}

#[test]
fn a_refused_file_is_left_byte_identical_with_nothing_beside_it() {
    let (dir, v8) = support::v8();
    // Damage the plan_approvals table (page 6); the schema stays readable.
    let mut bytes = std::fs::read(&v8).unwrap();
    for byte in &mut bytes[5 * 4096..5 * 4096 + 64] {
        *byte = 0xff;
    }
    std::fs::write(&v8, &bytes).unwrap();
    let result = run(Some(&v8), &["db", "migrate"]);
    assert_eq!(result.code, 3, "{}", result.stderr);
    assert!(result.stderr.contains("DATABASE_UNREADABLE"), "{}", result.stderr);
    assert_eq!(
        std::fs::read(&v8).unwrap(),
        bytes,
        "db migrate changed a refused file"
    );
    assert_eq!(beside(&v8), Vec::<String>::new());

    // Something that is not a file at all: nothing may appear beside it.
    let folder = dir.path().join("folder.db");
    std::fs::create_dir(&folder).unwrap();
    for args in [&["serve"][..], &["db", "migrate"], &["approvals", "list"]] {
        let result = run(Some(&folder), args);
        assert_eq!(result.code, 3, "{args:?}: {}", result.stderr);
    }
    assert_eq!(beside(&v8), ["folder.db"]);
}

#[test]
fn names_that_keep_nothing_are_refused_with_exit_3() {
    for name in ["", ":memory:", "file:plans.db?mode=memory"] {
        for args in [&["db", "migrate"][..], &["db", "status"], &["approvals", "list"]] {
            let result = run(Some(Path::new(name)), args);
            assert_eq!(result.code, 3, "{name:?} {args:?}: {}", result.stderr);
            assert!(result.stderr.contains("INVALID_PARAMS"), "{}", result.stderr);
        }
    }
}

/// Runs the binary as an unprivileged user when this process is root (who
/// may write anywhere), so that a read-only directory really is read-only.
fn run_unprivileged(db: &Path, args: &[&str]) -> support::Run {
    use std::os::unix::process::CommandExt;
    let mut command = support::command();
    command.arg("--db").arg(db).args(args);
    use std::os::unix::fs::MetadataExt;
    // /proc/self belongs to the effective user of this process.
    if std::fs::metadata("/proc/self").unwrap().uid() == 0 {
        command.uid(65534).gid(65534);
    }
    let output = command.output().unwrap();
    support::Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        raw_stdout: output.stdout,
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn inspection_works_on_read_only_media_and_says_what_it_did() {
    let fixture = support::rich();
    let outer = tempfile::tempdir().unwrap();
    set_mode(outer.path(), 0o755);
    let media = outer.path().join("backup");
    std::fs::create_dir(&media).unwrap();
    let db = media.join("plans.db");
    std::fs::copy(&fixture.db, &db).unwrap();
    // A WAL database closed cleanly: no -wal, no -shm beside it.
    assert_eq!(beside(&db), Vec::<String>::new());
    set_mode(&db, 0o444);
    set_mode(&media, 0o555);
    let listed = run_unprivileged(&db, &["approvals", "list", "--json"]);
    let direct = run(Some(&fixture.db), &["approvals", "list", "--json"]);
    set_mode(&media, 0o755);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(listed.stderr.contains("immutable snapshot"), "{}", listed.stderr);
    assert_eq!(listed.stdout, direct.stdout);
    assert_eq!(
        beside(&db),
        Vec::<String>::new(),
        "inspection wrote beside the file"
    );

    // With a write-ahead log holding changes, and no -shm to read it with,
    // an immutable open would show stale data: refused, saying why.
    std::fs::write(sibling(&db, "-wal"), b"pretend frames").unwrap();
    set_mode(&media, 0o555);
    let refused = run_unprivileged(&db, &["approvals", "list"]);
    set_mode(&media, 0o755);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    assert!(refused.stderr.contains("write-ahead log"), "{}", refused.stderr);
}
