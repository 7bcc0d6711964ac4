//! Every error path: each asserts the exit code and the message.

use std::io::{Seek, SeekFrom, Write};

use crate::support::{self, Fixture, run};

fn snap_err(
    fixture: Option<&Fixture>,
    name: &str,
    db: Option<&std::path::Path>,
    args: &[&str],
) -> support::Run {
    let result = run(db, args);
    let text = match fixture {
        Some(fixture) => fixture.redact(&result.transcript()),
        None => result.transcript(),
    };
    Fixture::settings().bind(|| insta::assert_snapshot!(name, text));
    result
}

#[test]
fn no_database_given() {
    for args in [
        &["db", "status"][..],
        &["approvals", "list"],
        &["db", "migrate"],
        &["serve"],
    ] {
        let result = run(None, args);
        assert_eq!(result.code, 3, "{args:?}");
        assert!(
            result
                .stderr
                .contains("no database given: pass --db PATH or set PLAN_CHECKPOINT_DB"),
            "{}",
            result.stderr
        );
    }
}

#[test]
fn the_environment_variable_names_the_database() {
    let fixture = support::rich();
    let output = support::command()
        .env("PLAN_CHECKPOINT_DB", &fixture.db)
        .args(["db", "status"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&output.stdout).contains("schema version:  10"));
}

#[test]
fn missing_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nope.db");
    for args in [
        &["db", "status"][..],
        &["approvals", "show", "x"],
        &["db", "migrate"],
    ] {
        let result = run(Some(&db), args);
        assert_eq!(result.code, 3, "{args:?}");
        assert!(result.stderr.contains("DATABASE_UNREADABLE"), "{}", result.stderr);
        assert!(
            result.stderr.contains("no database file exists at this path"),
            "{}",
            result.stderr
        );
    }
    assert!(!db.exists(), "inspection must not create the file");
}

#[test]
fn wrong_schema_versions_name_the_version_and_db_migrate() {
    for version in [9_u32, 7, 11] {
        let (_dir, db) = support::with_version(version);
        let result = run(Some(&db), &["approvals", "list"]);
        assert_eq!(result.code, 3, "v{version}");
        assert!(result.stderr.contains("SCHEMA_UNSUPPORTED"), "{}", result.stderr);
        assert!(
            result.stderr.contains(&format!("schema version {version}")),
            "{}",
            result.stderr
        );
        assert!(result.stderr.contains("db migrate"), "{}", result.stderr);
        // db migrate refuses them too, and leaves them as they were.
        let migrate = run(Some(&db), &["db", "migrate"]);
        assert_eq!(migrate.code, 3, "{}", migrate.stderr);
        let conn = rusqlite::Connection::open(&db).unwrap();
        let found: u32 = conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap();
        assert_eq!(found, version);
    }
    let (dir, db) = support::with_version(9);
    let names = vec![(dir.path().to_string_lossy().into_owned(), "[TMP]".to_owned())];
    let fixture = Fixture {
        _dir: dir,
        db: db.clone(),
        root: String::new(),
        names,
        approvals: Vec::new(),
    };
    snap_err(Some(&fixture), "error_v9", Some(&db), &["db", "status"]);
}

#[test]
fn a_v8_database_is_refused_for_inspection() {
    let (_dir, db) = support::v8();
    for args in [&["approvals", "export"][..], &["approvals", "verify", "--all"]] {
        let result = run(Some(&db), args);
        assert_eq!(result.code, 3, "{args:?}");
        assert!(result.stderr.contains("schema version 8"), "{}", result.stderr);
        assert!(result.stderr.contains("db migrate"), "{}", result.stderr);
    }
    // db status describes it instead, with the command that migrates it.
    let status = run(Some(&db), &["db", "status"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    let command = format!("`plan-checkpoint --db {} db migrate`", db.display());
    assert!(status.stdout.contains("schema version:  8"), "{}", status.stdout);
    assert!(status.stdout.contains(&command), "{}", status.stdout);
    let json = run(Some(&db), &["db", "status", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value["schemaVersion"], 8);
    assert_eq!(value["pendingMigration"], "fromV8");
}

#[test]
fn an_empty_file_gets_the_same_story_from_status_and_migrate() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("empty.db");
    std::fs::write(&db, b"").unwrap();
    let status = run(Some(&db), &["db", "status"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(status.stdout.contains("the file is empty"), "{}", status.stdout);
    assert!(
        status.stdout.contains("create a new schema v10"),
        "{}",
        status.stdout
    );
    let json = run(Some(&db), &["db", "status", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value["pendingMigration"], "createSchema");
    assert_eq!(std::fs::metadata(&db).unwrap().len(), 0, "status writes nothing");
    let listed = run(Some(&db), &["approvals", "list"]);
    assert_eq!(listed.code, 3);
    assert!(
        listed.stderr.contains("creates a new schema v10"),
        "{}",
        listed.stderr
    );
    let migrate = run(Some(&db), &["db", "migrate"]);
    assert_eq!(migrate.code, 0, "{}", migrate.stderr);
    assert!(
        migrate
            .stdout
            .contains("the file was empty: created a new schema v10"),
        "{}",
        migrate.stdout
    );
    assert_eq!(run(Some(&db), &["approvals", "list"]).stdout, "no approvals\n");
}

#[test]
fn unknown_sessions_are_refused_alike_by_list_verify_and_export() {
    let fixture = support::rich();
    for args in [
        &["approvals", "list", "--session", "no-such-session"][..],
        &["approvals", "list", "--session", "no-such-session", "--json"],
        &["approvals", "verify", "--session", "no-such-session"],
        &["approvals", "verify", "--session", "no-such-session", "--json"],
        &["approvals", "export", "--session", "no-such-session"],
    ] {
        let result = run(Some(&fixture.db), args);
        assert_eq!(result.code, 1, "{args:?}");
        assert!(result.stdout.is_empty(), "{args:?}: {}", result.stdout);
        assert!(
            result.stderr.contains("SESSION_NOT_FOUND") && result.stderr.contains("no-such-session"),
            "{args:?}: {}",
            result.stderr
        );
    }
}

#[test]
fn id_prefixes_resolve_and_an_ambiguous_one_is_a_usage_error() {
    let fixture = support::rich();
    let id = fixture.id("approval-pending");
    let prefix = &id[..id.len() - 6];
    let whole = run(Some(&fixture.db), &["approvals", "show", &id]);
    let short = run(Some(&fixture.db), &["approvals", "show", prefix]);
    assert_eq!(short.code, 0, "{}", short.stderr);
    assert_eq!(short.stdout, whole.stdout);
    for args in [
        &["approvals", "cat", prefix][..],
        &["approvals", "verify", prefix],
        &["approvals", "diff", prefix],
    ] {
        assert_eq!(run(Some(&fixture.db), args).code, 0, "{args:?}");
    }
    let ambiguous = run(Some(&fixture.db), &["approvals", "show", "approval-"]);
    assert_eq!(ambiguous.code, 2, "{}", ambiguous.stderr);
    assert!(
        ambiguous
            .stderr
            .contains("the approval id prefix `approval-` is ambiguous"),
        "{}",
        ambiguous.stderr
    );
    assert_eq!(run(Some(&fixture.db), &["approvals", "show", ""]).code, 2);
    let unknown = run(Some(&fixture.db), &["approvals", "show", "approval-zzz"]);
    assert_eq!(unknown.code, 1);
    assert!(
        unknown.stderr.contains("APPROVAL_NOT_FOUND"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn corrupt_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("text.db");
    std::fs::write(
        &text,
        "this is not a database, just some text that is long enough",
    )
    .unwrap();
    let result = run(Some(&text), &["approvals", "list"]);
    assert_eq!(result.code, 3);
    assert!(result.stderr.contains("DATABASE_UNREADABLE") && result.stderr.contains("SQLite header"));

    // A real database whose schema page is smashed.
    let fixture = support::rich();
    let mut file = std::fs::OpenOptions::new().write(true).open(&fixture.db).unwrap();
    file.seek(SeekFrom::Start(100)).unwrap();
    file.write_all(&[0xA5; 3000]).unwrap();
    drop(file);
    let result = run(Some(&fixture.db), &["approvals", "list"]);
    assert_eq!(result.code, 3, "{}", result.stderr);
    assert!(result.stderr.contains("DATABASE_UNREADABLE"), "{}", result.stderr);
}

#[test]
fn unknown_ids() {
    let fixture = support::rich();
    for args in [
        &["approvals", "show", "no-such-id"][..],
        &["approvals", "cat", "no-such-id"],
        &["approvals", "verify", "no-such-id"],
        &["approvals", "diff", "no-such-id"],
        &["approvals", "diff", "no-such-id", "no-such-id"],
    ] {
        let result = run(Some(&fixture.db), args);
        assert_eq!(result.code, 1, "{args:?}");
        assert!(
            result
                .stderr
                .contains("APPROVAL_NOT_FOUND: no plan approval has id \"no-such-id\""),
            "{}",
            result.stderr
        );
    }
    let session = run(Some(&fixture.db), &["approvals", "verify", "--session", "nobody"]);
    assert_eq!(session.code, 1);
    assert!(session.stderr.contains("SESSION_NOT_FOUND"), "{}", session.stderr);
    snap_err(
        Some(&fixture),
        "error_unknown_id",
        Some(&fixture.db),
        &["approvals", "show", "no-such-id"],
    );
}

#[test]
fn an_id_without_its_approval_prefix_is_not_found_with_a_hint_naming_the_prefixed_form() {
    let fixture = support::rich();
    let id = fixture.id("approval-completed");
    let bare = id.strip_prefix("approval-").unwrap();
    let result = run(Some(&fixture.db), &["approvals", "show", &bare[..11]]);
    assert_eq!(result.code, 1, "{}", result.stderr);
    assert!(result.stdout.is_empty(), "{}", result.stdout);
    let text = fixture.redact(&result.stderr.replace(&bare[..11], "[bare id prefix]"));
    Fixture::settings().bind(|| insta::assert_snapshot!("error_id_without_prefix", text));
    // An id that is no approval's, prefixed or not, gets no such hint.
    let unknown = run(Some(&fixture.db), &["approvals", "show", "no-such-id"]);
    assert!(!unknown.stderr.contains("hint"), "{}", unknown.stderr);
}

#[test]
fn tampered_artifact() {
    let fixture = support::rich();
    let id = fixture.id("approval-completed");
    std::fs::write(
        fixture.artifact("approval-completed"),
        "# Something else entirely\n",
    )
    .unwrap();
    let cat = snap_err(
        Some(&fixture),
        "error_cat_tampered",
        Some(&fixture.db),
        &["approvals", "cat", &id],
    );
    assert_eq!(cat.code, 1);
    assert!(cat.stdout.is_empty(), "nothing is printed on mismatch");
    assert!(cat.stderr.contains("ARTIFACT_INTEGRITY_MISMATCH"));
    let forced = run(Some(&fixture.db), &["approvals", "cat", &id, "--force"]);
    assert_eq!(forced.code, 0);
    assert_eq!(forced.stdout, "# Something else entirely\n");
    assert!(forced.stderr.contains("warning: ARTIFACT_INTEGRITY_MISMATCH"));
    let verify = snap_err(
        Some(&fixture),
        "error_verify_tampered",
        Some(&fixture.db),
        &["approvals", "verify", "--all"],
    );
    assert_eq!(verify.code, 1);
    assert!(verify.stdout.contains("mismatch"));
    let json = run(Some(&fixture.db), &["approvals", "verify", &id, "--json"]);
    assert_eq!(json.code, 1);
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value["ok"], false);
    assert_eq!(value["artifacts"][0]["result"], "mismatch");
    assert_eq!(value["artifacts"][0]["errorCode"], "ARTIFACT_INTEGRITY_MISMATCH");
    let diff = run(
        Some(&fixture.db),
        &["approvals", "diff", &id, &fixture.id("approval-rejected")],
    );
    assert_eq!(diff.code, 1);
    assert!(diff.stderr.contains("ARTIFACT_INTEGRITY_MISMATCH"));
}

#[test]
fn missing_artifact() {
    let fixture = support::rich();
    let id = fixture.id("approval-rejected");
    std::fs::remove_file(fixture.artifact("approval-rejected")).unwrap();
    let cat = run(Some(&fixture.db), &["approvals", "cat", &id, "--force"]);
    assert_eq!(cat.code, 1);
    assert!(cat.stderr.contains("ARTIFACT_MISSING"), "{}", cat.stderr);
    let verify = snap_err(
        Some(&fixture),
        "error_verify_missing",
        Some(&fixture.db),
        &["approvals", "verify", "--session", "s-alpha"],
    );
    assert_eq!(verify.code, 1);
    assert!(verify.stdout.contains("missing"));
}

#[test]
fn orphan_file() {
    let fixture = support::rich();
    let orphan = std::path::Path::new(&fixture.root).join(".pi/plan/20260101T000000Z-stray-000000000000.md");
    std::fs::write(&orphan, "# nobody recorded me\n").unwrap();
    let verify = snap_err(
        Some(&fixture),
        "error_verify_orphan",
        Some(&fixture.db),
        &["approvals", "verify", "--all"],
    );
    assert_eq!(verify.code, 1);
    assert!(verify.stdout.contains("orphan"));
    let json = run(Some(&fixture.db), &["approvals", "verify", "--all", "--json"]);
    assert_eq!(json.code, 1);
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        value["orphans"][0]["path"],
        ".pi/plan/20260101T000000Z-stray-000000000000.md"
    );
    // The other workspace has no orphan: its session verifies.
    assert_eq!(
        run(Some(&fixture.db), &["approvals", "verify", "--session", "s-beta"]).code,
        0
    );
    // Verifying one approval checks that approval alone, not its workspace.
    let listed = run(Some(&fixture.db), &["approvals", "list", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
    let one = listed["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|approval| approval["artifact"].is_object())
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let single = run(Some(&fixture.db), &["approvals", "verify", &one, "--json"]);
    assert_eq!(single.code, 0, "{}{}", single.stdout, single.stderr);
    let value: serde_json::Value = serde_json::from_str(&single.stdout).unwrap();
    assert_eq!(value["ok"], true);
    assert_eq!(value["orphans"], serde_json::json!([]));
    assert_eq!(value["artifacts"].as_array().unwrap().len(), 1);
}

#[test]
fn bad_flags_are_usage_errors() {
    let fixture = support::rich();
    let cases: &[(&[&str], &str)] = &[
        (
            &["approvals", "list", "--limit", "many"],
            "invalid value 'many' for '--limit <N>'",
        ),
        (
            &["approvals", "list", "--status", "done"],
            "invalid value 'done' for '--status <STATUS>'",
        ),
        (
            &["approvals", "verify"],
            "the following required arguments were not provided",
        ),
        (&["approvals", "verify", "x", "--all"], "cannot be used with"),
        (
            &["approvals", "diff"],
            "the following required arguments were not provided",
        ),
        (
            &["approvals", "frobnicate"],
            "unrecognized subcommand 'frobnicate'",
        ),
        (&["completions", "powershell"], "invalid value 'powershell'"),
        (&["db", "status", "--bogus"], "unexpected argument '--bogus'"),
        (&[], "Usage: plan-checkpoint"),
    ];
    for (args, message) in cases {
        let result = run(Some(&fixture.db), args);
        assert_eq!(result.code, 2, "{args:?}: {}", result.stderr);
        assert!(result.stderr.contains(message), "{args:?}: {}", result.stderr);
    }
    snap_err(
        None,
        "error_bad_limit",
        None,
        &["approvals", "list", "--limit", "many"],
    );
}

#[test]
fn demo_refuses_a_directory_that_is_not_empty() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
    let result = run(None, &["demo", "--dir", dir.path().to_str().unwrap()]);
    assert_eq!(result.code, 2);
    assert!(result.stderr.contains("is not empty"), "{}", result.stderr);
}

/// A refusal says its sentence once: `serve` on a database another host
/// holds names the database and the lock, on stderr and in its JSON-RPC
/// error, without repeating "another live host is already using".
#[test]
fn a_refused_serve_says_why_once() {
    let fixture = support::rich();
    let lock = plan_storage::HostLock::acquire(&fixture.db).unwrap();
    let output = support::command()
        .arg("--db")
        .arg(&fixture.db)
        .arg("serve")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    drop(lock);
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let sentence = "another live host is already using";
    for (name, text) in [("stderr", &stderr), ("stdout", &stdout)] {
        assert_eq!(text.matches(sentence).count(), 1, "{name}: {text}");
        assert!(text.contains("HOST_ALREADY_RUNNING"), "{name}: {text}");
        assert!(text.contains("holds the lock on the file"), "{name}: {text}");
    }
}
