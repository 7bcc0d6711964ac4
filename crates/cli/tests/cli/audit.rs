//! `audit verify`: an untouched database verifies (exit 0); a row edited,
//! deleted or inserted after the records were exported is named by its seq
//! against the collector's file (exit 1), and by the chain alone where the
//! chain can see it. `approvals export` carries each approval's seq and hash.

use std::path::Path;

use plan_audit_export::{ExportConfig, Origin, Protocol, encode_json};
use plan_storage::Store;

use crate::support::{self, run};

/// What a collector's file exporter keeps of the database's records: one
/// OTLP/JSON request per line, in batches of 4.
fn collector_file(db: &Path, dir: &Path) -> std::path::PathBuf {
    let store = Store::open_read_only(db).unwrap();
    let records = store.audit_records().unwrap();
    let origin = Origin {
        host_name: "test-host".to_owned(),
        database_id: store.database_id().unwrap(),
    };
    let mut config = ExportConfig::new("http://127.0.0.1:4318/v1/logs");
    config.protocol = Protocol::HttpJson;
    let mut text = String::new();
    for batch in records.chunks(4) {
        text.push_str(std::str::from_utf8(&encode_json(batch, &config, &origin)).unwrap());
        text.push('\n');
    }
    let path = dir.join("collected.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

fn sql(db: &Path, statement: &str) {
    rusqlite::Connection::open(db)
        .unwrap()
        .execute_batch(statement)
        .unwrap();
}

fn entry_of(seq: u64) -> String {
    format!("(SELECT id FROM transcript_entries WHERE json_extract(content_json, '$.audit.seq') = {seq})")
}

#[test]
fn an_untouched_database_verifies_alone_and_against_the_collector() {
    let fixture = support::rich();
    let alone = run(Some(&fixture.db), &["audit", "verify"]);
    assert_eq!(alone.code, 0, "{}", alone.transcript());
    // rich(): 5 submissions, 2 approvals (each with its mode change), a run
    // started and completed, a rejection, an expiry.
    assert_eq!(alone.stdout, "audit chain: 14 records up to seq 14 verified\n");
    let file = collector_file(&fixture.db, fixture._dir.path());
    let against = run(
        Some(&fixture.db),
        &["audit", "verify", "--against", file.to_str().unwrap()],
    );
    assert_eq!(against.code, 0, "{}", against.transcript());
    assert_eq!(
        against.stdout,
        "audit chain: 14 records up to seq 14 verified, compared with 14 the collector kept\n"
    );
}

#[test]
fn rows_changed_removed_or_inserted_after_export_are_named_by_seq() {
    let fixture = support::rich();
    let file = collector_file(&fixture.db, fixture._dir.path());
    let file = file.to_str().unwrap();
    // Changed: seq 2 (the first approval) now claims another permission mode.
    sql(
        &fixture.db,
        &format!(
            "UPDATE transcript_entries SET content_json = json_set(content_json, '$.permissionMode', 'auto') \
             WHERE id = {}",
            entry_of(2)
        ),
    );
    // Removed: seq 9. Inserted: a copy of seq 5 (its seq and hash too).
    sql(
        &fixture.db,
        &format!("DELETE FROM transcript_entries WHERE id = {}", entry_of(9)),
    );
    sql(
        &fixture.db,
        &format!(
            "INSERT INTO transcript_entries (session_id, seq, role, content_json, created_at) \
             SELECT session_id, 1000, role, content_json, created_at FROM transcript_entries WHERE id = {}",
            entry_of(5)
        ),
    );
    let against = run(Some(&fixture.db), &["audit", "verify", "--against", file]);
    assert_eq!(against.code, 1, "{}", against.transcript());
    // The changed record now tells another mode than the row holds: the
    // row check names that too.
    assert_eq!(
        against.stdout,
        format!(
            "seq 2: changed\nseq 5: inserted\n\
             seq 5: approval {}: permission_mode is accept-edits in the row, auto in the chain\n\
             seq 9: removed\n\
             audit chain: 4 problem(s) in 14 records up to seq 14, compared with 14 the collector kept\n",
            fixture.id("approval-completed")
        )
    );
    let json = run(
        Some(&fixture.db),
        &["audit", "verify", "--against", file, "--json"],
    );
    assert_eq!(json.code, 1);
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value["ok"], false);
    assert_eq!(
        value["findings"],
        serde_json::json!([
            {"seq": 2, "finding": "changed"},
            {"seq": 5, "finding": "inserted"},
            {"seq": 5, "finding": "row", "approvalId": fixture.id("approval-completed"),
             "field": "permission_mode", "chain": "auto", "row": "accept-edits"},
            {"seq": 9, "finding": "removed"},
        ])
    );
}

#[test]
fn a_rewritten_chain_is_caught_only_by_the_collectors_copy() {
    let fixture = support::rich();
    let file = collector_file(&fixture.db, fixture._dir.path());
    // Someone who knows the scheme edits seq 4 and recomputes every hash
    // from there: the chain alone verifies, the collector's copy does not.
    let store = Store::open_read_only(&fixture.db).unwrap();
    let records = store.audit_records().unwrap();
    drop(store);
    let conn = rusqlite::Connection::open(&fixture.db).unwrap();
    conn.execute(
        &format!(
            "UPDATE transcript_entries SET created_at = created_at + 1 WHERE id = {}",
            records[3].entry_id
        ),
        [],
    )
    .unwrap();
    drop(conn);
    let edited = Store::open_read_only(&fixture.db)
        .unwrap()
        .audit_records()
        .unwrap();
    let mut previous = records[2].hash.clone();
    let conn = rusqlite::Connection::open(&fixture.db).unwrap();
    for record in &edited[3..] {
        let hash = plan_storage::chain_hash(&previous, &record.canonical_bytes());
        conn.execute(
            "UPDATE transcript_entries SET content_json = json_set(content_json, '$.audit.hash', ?1) WHERE id = ?2",
            rusqlite::params![hash, record.entry_id],
        )
        .unwrap();
        previous = hash;
    }
    conn.execute(
        "UPDATE settings SET value_json = json_set(value_json, '$.hash', ?1) WHERE key = 'audit.chain.head'",
        [&previous],
    )
    .unwrap();
    drop(conn);
    assert_eq!(run(Some(&fixture.db), &["audit", "verify"]).code, 0);
    let against = run(
        Some(&fixture.db),
        &["audit", "verify", "--against", file.to_str().unwrap()],
    );
    assert_eq!(against.code, 1);
    assert!(
        against
            .stdout
            .starts_with("seq 4: changed\naudit chain: 1 problem(s)"),
        "{}",
        against.stdout
    );
}

#[test]
fn a_collector_file_that_is_not_otlp_json_is_an_error() {
    let fixture = support::rich();
    let path = fixture._dir.path().join("garbage.jsonl");
    std::fs::write(&path, "{\"resourceLogs\": []}\nnot json\n").unwrap();
    let result = run(
        Some(&fixture.db),
        &["audit", "verify", "--against", path.to_str().unwrap()],
    );
    // Could not read (4), not tampered (1).
    assert_eq!(result.code, 4);
    assert!(result.stderr.contains("line 2:"), "{}", result.stderr);
    let missing = run(
        Some(&fixture.db),
        &["audit", "verify", "--against", "/nonexistent/file"],
    );
    assert_eq!(missing.code, 4);
    assert!(
        missing.stderr.contains("cannot read /nonexistent/file"),
        "{}",
        missing.stderr
    );
}

#[test]
fn approvals_export_carries_the_latest_seq_and_hash_of_each_approval() {
    let fixture = support::rich();
    let export = run(Some(&fixture.db), &["approvals", "export"]);
    assert_eq!(export.code, 0);
    let records = Store::open_read_only(&fixture.db)
        .unwrap()
        .audit_records()
        .unwrap();
    for line in export.stdout.lines() {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        let id = value["id"].as_str().unwrap();
        let latest = records
            .iter()
            .rfind(|record| {
                record.attributes.get("plan_checkpoint.approval.id") == Some(&serde_json::json!(id))
            })
            .unwrap();
        assert_eq!(value["auditSeq"], latest.seq);
        assert_eq!(value["auditHash"], latest.hash.as_str());
    }
}

/// The case: after export, the completed approval's mode raised
/// from accept-edits to auto and the rejection turned into an expiry, in
/// `plan_approvals` alone (the chain's records untouched).
fn edit_decisions(fixture: &support::Fixture) {
    sql(
        &fixture.db,
        &format!(
            "UPDATE plan_approvals SET permission_mode = 'auto' WHERE id = '{}'; \
             UPDATE plan_approvals SET status = 'expired', error_code = 'PLAN_APPROVAL_TIMEOUT' \
             WHERE id = '{}';",
            fixture.id("approval-completed"),
            fixture.id("approval-rejected")
        ),
    );
}

#[test]
fn an_edited_approval_row_is_found_with_and_without_the_collectors_copy() {
    let fixture = support::rich();
    let file = collector_file(&fixture.db, fixture._dir.path());
    edit_decisions(&fixture);
    let completed = fixture.id("approval-completed");
    let rejected = fixture.id("approval-rejected");
    for args in [
        vec!["audit", "verify"],
        vec!["audit", "verify", "--against", file.to_str().unwrap()],
    ] {
        let verified = run(Some(&fixture.db), &args);
        assert_eq!(verified.code, 1, "{args:?}: {}", verified.transcript());
        for expected in [
            format!("approval {completed}: permission_mode is auto in the row, accept-edits in the chain"),
            format!("approval {rejected}: status is expired in the row, rejected in the chain"),
            format!("approval {rejected}: error_code is PLAN_APPROVAL_TIMEOUT in the row, none in the chain"),
        ] {
            assert!(
                verified.stdout.contains(&expected),
                "{args:?}: {}",
                verified.stdout
            );
        }
        let mut json_args = args.clone();
        json_args.push("--json");
        let json = run(Some(&fixture.db), &json_args);
        assert_eq!(json.code, 1);
        let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
        assert_eq!(value["ok"], false);
        assert!(
            value["findings"]
                .as_array()
                .unwrap()
                .contains(&serde_json::json!({
                    "seq": value["findings"].as_array().unwrap().iter()
                        .find(|finding| finding["field"] == "permission_mode").unwrap()["seq"],
                    "finding": "row",
                    "approvalId": completed,
                    "field": "permission_mode",
                    "chain": "accept-edits",
                    "row": "auto",
                })),
            "{}",
            json.stdout
        );
    }
}

#[test]
fn approvals_export_does_not_print_an_edited_row_as_valid() {
    let fixture = support::rich();
    edit_decisions(&fixture);
    let export = run(Some(&fixture.db), &["approvals", "export"]);
    assert_eq!(export.code, 1, "{}", export.transcript());
    assert!(
        export
            .stderr
            .contains("2 approval rows disagree with the audit chain"),
        "{}",
        export.stderr
    );
    for line in export.stdout.lines() {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        let id = value["id"].as_str().unwrap();
        let edited = id == fixture.id("approval-completed") || id == fixture.id("approval-rejected");
        assert_eq!(value["auditVerified"], !edited, "{line}");
        if edited {
            assert!(
                !value["auditDifferences"].as_array().unwrap().is_empty(),
                "{line}"
            );
        } else {
            assert!(value.get("auditDifferences").is_none(), "{line}");
        }
    }
}

fn verify_against(fixture: &support::Fixture, file: &Path) -> support::Run {
    run(
        Some(&fixture.db),
        &["audit", "verify", "--against", file.to_str().unwrap()],
    )
}

#[test]
fn the_collectors_copies_are_checked_too() {
    let fixture = support::rich();
    let file = collector_file(&fixture.db, fixture._dir.path());
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();

    // A second, different record under seq 3 (its decision changed).
    let conflicting = lines[0].replacen("\"accept-edits\"", "\"auto\"", 1);
    assert_ne!(conflicting, lines[0]);
    let with_conflict = format!("{text}{conflicting}\n");
    std::fs::write(&file, &with_conflict).unwrap();
    let checked = verify_against(&fixture, &file);
    assert_eq!(checked.code, 1, "{}", checked.transcript());
    assert!(
        checked
            .stdout
            .contains("the collector kept two different records"),
        "{}",
        checked.stdout
    );

    // A rewritten audit.hash over unchanged content.
    let store = Store::open_read_only(&fixture.db).unwrap();
    let hash = store.audit_records().unwrap()[0].hash.clone();
    let rewritten = text.replacen(&hash, &"f".repeat(64), 1);
    std::fs::write(&file, &rewritten).unwrap();
    let checked = verify_against(&fixture, &file);
    assert_eq!(checked.code, 1, "{}", checked.transcript());
    assert!(
        checked
            .stdout
            .contains("seq 1: the collector's copy (line 1) carries another audit.hash than the chain"),
        "{}",
        checked.stdout
    );

    // The last request cut from the file: the head is not in it.
    let cut = format!("{}\n", lines[..lines.len() - 1].join("\n"));
    std::fs::write(&file, &cut).unwrap();
    let checked = verify_against(&fixture, &file);
    assert_eq!(checked.code, 1, "{}", checked.transcript());
    assert!(
        checked.stdout.contains("..14: not in the collector's file"),
        "{}",
        checked.stdout
    );
}

#[test]
fn an_unfinished_last_line_is_a_note_and_an_unreadable_file_exit_4() {
    let fixture = support::rich();
    let file = collector_file(&fixture.db, fixture._dir.path());
    let text = std::fs::read_to_string(&file).unwrap();
    // A live file: the collector is writing one more request.
    std::fs::write(&file, format!("{text}{{\"resourceLogs\":[{{\"reso")).unwrap();
    let live = verify_against(&fixture, &file);
    assert_eq!(live.code, 0, "{}", live.transcript());
    assert!(live.stderr.contains("is unfinished"), "{}", live.stderr);
    // The same garbage in the middle is a file that cannot be read: not
    // "tampered" (1) but 4.
    std::fs::write(&file, format!("{{\"resourceLogs\":[{{\"reso\n{text}")).unwrap();
    let broken = verify_against(&fixture, &file);
    assert_eq!(broken.code, 4, "{}", broken.transcript());
    let missing = run(
        Some(&fixture.db),
        &["audit", "verify", "--against", "/nonexistent/collector.jsonl"],
    );
    assert_eq!(missing.code, 4, "{}", missing.transcript());
}

#[test]
fn records_of_another_database_in_the_file_are_left_out() {
    let first = support::rich();
    let second = support::rich();
    let one = collector_file(&first.db, first._dir.path());
    let two = collector_file(&second.db, second._dir.path());
    let both = first._dir.path().join("both.jsonl");
    std::fs::write(
        &both,
        format!(
            "{}{}",
            std::fs::read_to_string(&one).unwrap(),
            std::fs::read_to_string(&two).unwrap()
        ),
    )
    .unwrap();
    for fixture in [&first, &second] {
        let checked = verify_against(fixture, &both);
        assert_eq!(checked.code, 0, "{}", checked.transcript());
        assert!(
            checked.stderr.contains("records of other databases"),
            "{}",
            checked.stderr
        );
    }
}

#[test]
fn db_status_shows_the_chain_head_the_export_cursor_the_lag_and_the_last_error() {
    let fixture = support::rich();
    sql(
        &fixture.db,
        "INSERT INTO settings (key, value_json) VALUES ('audit.export.status', \
         '{\"state\":\"failing\",\"lastError\":\"cannot reach the collector: refused\",\"since\":1800000000000}')",
    );
    let status = run(Some(&fixture.db), &["db", "status"]);
    assert_eq!(status.code, 0, "{}", status.transcript());
    for expected in [
        "audit chain:     head seq 14 (",
        "export cursor:   seq 0 (lag 14)",
        "export status:   failing since ",
        ": cannot reach the collector: refused",
        "database id:     ",
    ] {
        assert!(
            status.stdout.contains(expected),
            "{expected:?} in {}",
            status.stdout
        );
    }
    let json = run(Some(&fixture.db), &["db", "status", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value["audit"]["head"], 14);
    assert_eq!(value["audit"]["exportCursor"], 0);
    assert_eq!(value["audit"]["lag"], 14);
    assert_eq!(value["audit"]["exportState"], "failing");
    assert_eq!(value["audit"]["lastError"], "cannot reach the collector: refused");
}

/// A database of a build without the chain whose history is big enough to
/// be numbered in steps: 300 decided approvals, no head, and a transcript
/// whose row ids reach 30,000 (an agent's own messages, not audited).
fn big_pre_chain_history(dir: &Path) -> std::path::PathBuf {
    let db = dir.join("big.db");
    drop(plan_storage::Store::open(&db).unwrap());
    sql(
        &db,
        "DELETE FROM settings WHERE key = 'audit.chain.head'; \
         INSERT INTO sessions (id, title, workspace_root, mode, permission_mode, created_at, updated_at) \
         VALUES ('s', '', '/nonexistent/ws', 'agent', 'ask', 1, 1); \
         WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 299) \
         INSERT INTO plan_approvals (id, session_id, turn_id, title, question, artifact_path, \
           artifact_sha256, artifact_size, status, created_at, expires_at, decided_at) \
         SELECT 'old' || i, 's', 't', 'old plan', 'ok?', '.pi/plan/old' || i || '.md', \
           printf('%064x', i), 100, 'rejected', 1700000000000 + i, 1700001800000 + i, 1700000000001 + i FROM n; \
         INSERT INTO transcript_entries (id, session_id, seq, role, content_json, created_at) \
         VALUES (30000, 's', 1, 'user', '{\"text\":\"hello\"}', 1);",
    );
    db
}

#[test]
fn db_migrate_numbers_a_big_pre_chain_history_and_a_host_answers_before_numbering_it() {
    let dir = tempfile::tempdir().unwrap();
    // `db migrate` numbers it, in steps, and says so.
    let migrated_db = big_pre_chain_history(dir.path());
    let migrated = run(Some(&migrated_db), &["db", "migrate"]);
    assert_eq!(migrated.code, 0, "{}", migrated.transcript());
    assert!(
        migrated
            .stdout
            .contains("numbered the audit history (30300 rows)"),
        "{}",
        migrated.stdout
    );
    let store = Store::open_read_only(&migrated_db).unwrap();
    assert_eq!(store.history_numbering().unwrap(), None);
    assert_eq!(store.audit_head().unwrap().0, 600);
    drop(store);
    let verified = run(Some(&migrated_db), &["audit", "verify"]);
    assert_eq!(verified.code, 0, "{}", verified.transcript());
    // A host's fence on such a database numbers nothing: it marks the
    // history, answers, and numbers it on a thread of its own.
    let hosted_db = {
        let other = dir.path().join("hosted");
        std::fs::create_dir(&other).unwrap();
        big_pre_chain_history(&other)
    };
    let host = plan_host::Host::open(&hosted_db, plan_host::HostOptions::default()).unwrap();
    // Until the numbering ends (it runs after the host answered).
    let started = std::time::Instant::now();
    loop {
        let store = Store::open_read_only(&hosted_db).unwrap();
        if store.history_numbering().unwrap().is_none() {
            assert_eq!(store.audit_head().unwrap().0, 600);
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(600),
            "numbering never ended"
        );
        std::thread::yield_now();
    }
    host.close();
    let verified = run(Some(&hosted_db), &["audit", "verify"]);
    assert_eq!(verified.code, 0, "{}", verified.transcript());
}
