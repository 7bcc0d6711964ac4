//! The audit of Agent-turn permission decisions in `transcript_entries`:
//! entries written by `Store::apply` in the transition's transaction, the
//! session's `seq` shared with command entries, a call's entries read back
//! as plan-core's records, and an execution's tally.

use plan_core::{
    CommandRun, CommandShell, CommandState, Effect, ErrorCode, ExecutionId, PermissionMode, Sandbox, Session,
    SessionId, ToolAuditEntry, ToolAuditKind,
};
use plan_storage::{CommandEntryKind, Store, ToolDecisionTally};

const NOW: i64 = 1_800_000_000_000;

fn entry(kind: ToolAuditKind, call_id: &str, execution: Option<&str>, at: i64) -> ToolAuditEntry {
    ToolAuditEntry {
        kind,
        session_id: "s1".into(),
        turn_id: "t1".into(),
        execution_id: execution.map(ExecutionId::from),
        call_id: call_id.into(),
        tool: Some("Bash".to_owned()),
        permission_mode: Some(PermissionMode::Ask),
        error_code: (kind == ToolAuditKind::Declined).then_some(ErrorCode::ToolDeclined),
        at,
    }
}

#[test]
fn entries_are_recorded_in_the_transcript_and_read_back_per_call_and_per_execution() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, _) = Store::open(dir.path().join("plan.db")).unwrap();
    store
        .create_session(&Session::new("s1", Some("/w".to_owned())), NOW)
        .unwrap();
    let requested = entry(ToolAuditKind::ConfirmRequested, "b1", Some("e1"), NOW);
    let confirmed = entry(ToolAuditKind::Confirmed, "b1", Some("e1"), NOW + 5);
    store
        .apply(
            &[
                Effect::RecordToolAudit(requested.clone()),
                Effect::RecordToolAudit(entry(ToolAuditKind::AutoAllowed, "w1", Some("e1"), NOW)),
            ],
            NOW,
        )
        .unwrap();
    // A command entry in between takes the next seq of the same transcript.
    let run = CommandRun {
        call_id: "b1".into(),
        session_id: "s1".into(),
        turn_id: "t1".into(),
        command: "make".to_owned(),
        cwd: ".".to_owned(),
        shell: CommandShell {
            id: "bash".to_owned(),
            path: "/bin/bash".to_owned(),
        },
        sandbox: Sandbox::WorkspaceWrite,
        network: false,
        state: CommandState::Running,
        exit_code: None,
        signal: None,
        error_code: None,
        started_at: NOW + 6,
        ended_at: None,
        stdout_bytes: 0,
        stderr_bytes: 0,
        truncated: false,
    };
    store
        .apply(&[Effect::RecordToolAudit(confirmed.clone())], NOW + 5)
        .unwrap();
    store
        .record_command(CommandEntryKind::Started, &run, None, NOW + 6)
        .unwrap();
    store
        .apply(
            &[
                Effect::RecordToolAudit(entry(ToolAuditKind::Declined, "b2", Some("e1"), NOW + 7)),
                Effect::RecordToolAudit(entry(ToolAuditKind::Confirmed, "b3", Some("e2"), NOW + 8)),
                Effect::RecordToolAudit(entry(ToolAuditKind::Confirmed, "b4", None, NOW + 9)),
            ],
            NOW + 7,
        )
        .unwrap();
    assert_eq!(
        store.tool_entries(&SessionId::from("s1"), &"b1".into()).unwrap(),
        [requested, confirmed]
    );
    assert_eq!(store.command_entries("s1", &"b1".into()).unwrap()[0].seq, 4);
    assert_eq!(
        store.execution_tool_tally(&ExecutionId::from("e1")).unwrap(),
        ToolDecisionTally {
            confirmed: 1,
            declined: 1,
            auto_allowed: 1
        }
    );
    assert_eq!(
        store.execution_tool_tally(&ExecutionId::from("e-none")).unwrap(),
        ToolDecisionTally::default()
    );
    // The stored text is the record as serde writes it, `type` first among equals.
    let raw: String = {
        let conn = rusqlite::Connection::open(dir.path().join("plan.db")).unwrap();
        conn.query_row(
            "SELECT content_json FROM transcript_entries WHERE seq = 1",
            [],
            |row| row.get(0),
        )
        .unwrap()
    };
    let value: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(value["type"], "toolConfirmRequested");
    assert_eq!(value["callId"], "b1");
    assert_eq!(value["tool"], "Bash");
    assert_eq!(value["permissionMode"], "ask");
    assert_eq!(value["at"], NOW);
}
