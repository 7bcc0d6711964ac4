//! The Agent permission table through the typed API: what `ask` confirms,
//! that a confirmed Bash call runs only through the host, with its own
//! text, in the workspace-write sandbox; the answer given once; an
//! unattended turn that asks nobody; and the audit entries of each decision
//! in the session's transcript (`permissions.md`).

use super::*;
use plan_core::{Sandbox, ToolAuditKind};
use plan_host::{CommandEntryKind, CommandFilter, SessionId};

fn bash(call_id: &str, command: &str) -> ToolCall {
    call(call_id, "Bash", json!({"command": command}))
}

impl Fixture {
    /// An Agent session `id` under `mode`.
    fn agent_session(&self, id: &str, mode: PermissionMode) {
        self.host
            .create_session(NewSession {
                session_id: Some(id.into()),
                workspace_root: Some(self.root()),
                mode: Some(Mode::Agent),
                permission_mode: Some(mode),
            })
            .unwrap();
    }

    /// The session's tool-permission entries of `call_id`: (kind, error code, at).
    fn tool_audit(&self, session: &str, call_id: &str) -> Vec<(ToolAuditKind, Option<ErrorCode>, i64)> {
        plan_storage::Store::open_read_only(&self.db)
            .unwrap()
            .tool_entries(&SessionId::from(session), &call_id.into())
            .unwrap()
            .into_iter()
            .map(|entry| (entry.kind, entry.error_code, entry.at))
            .collect()
    }
}

#[test]
fn an_ask_confirmation_is_enforced_audited_and_answered_once() {
    let fixture = Fixture::new();
    fixture.agent_session("s", PermissionMode::Ask);
    let session = SessionId::from("s");
    let (turn, outcomes) = fixture.batch_in_new_turn(
        "s",
        vec![
            call(
                "b1",
                "Bash",
                json!({"command": "echo confirmed > confirmed.txt", "timeoutMs": 10_000}),
            ),
            call("w1", "Write", json!({"path": "notes.md"})),
            call("r1", "Read", json!({"path": "notes.md"})),
        ],
    );
    let turn = turn.turn_id;
    let decided: Vec<(Verdict, bool)> = outcomes
        .iter()
        .map(|outcome| (verdict(outcome), outcome.host_run))
        .collect();
    assert_eq!(
        decided,
        [
            (Verdict::Confirm, true),
            (Verdict::Confirm, false),
            (Verdict::Allow, false)
        ]
    );
    let start = |command: &str| {
        fixture
            .host
            .start_agent_command(&session, &turn, &"b1".into(), command, None, Some(10_000))
    };
    assert_eq!(
        code(start("echo confirmed > confirmed.txt")),
        ErrorCode::CommandNotAllowed,
        "no run before a person confirms"
    );
    let declined = fixture
        .host
        .confirm_tool(&session, &turn, &"w1".into(), false)
        .unwrap();
    assert_eq!(verdict(&declined), Verdict::Deny(ErrorCode::ToolDeclined));
    for allow in [true, false] {
        assert_eq!(
            code(fixture.host.confirm_tool(&session, &turn, &"w1".into(), allow)),
            ErrorCode::ToolConfirmationNotPending,
            "answered once"
        );
    }
    assert_eq!(
        code(fixture.host.confirm_tool(&session, &turn, &"r1".into(), true)),
        ErrorCode::ToolConfirmationNotPending,
        "a plain allow awaits nobody"
    );
    fixture.clock.advance(250);
    let confirmed = fixture
        .host
        .confirm_tool(&session, &turn, &"b1".into(), true)
        .unwrap();
    assert_eq!((verdict(&confirmed), confirmed.host_run), (Verdict::Allow, true));
    assert_eq!(
        fixture.tool_audit("s", "b1"),
        [
            (ToolAuditKind::ConfirmRequested, None, T0),
            (ToolAuditKind::Confirmed, None, T0 + 250)
        ]
    );
    assert_eq!(
        fixture.tool_audit("s", "w1"),
        [
            (ToolAuditKind::ConfirmRequested, None, T0),
            (ToolAuditKind::Declined, Some(ErrorCode::ToolDeclined), T0)
        ]
    );
    assert!(
        fixture.tool_audit("s", "r1").is_empty(),
        "a plain allow is not audited"
    );
    if fixture.host.command_capabilities().plan_sandbox != plan_host::PlanSandbox::Landlock {
        assert_eq!(
            code(start("echo confirmed > confirmed.txt")),
            ErrorCode::SandboxUnavailable
        );
        return;
    }
    let run = start("echo confirmed > confirmed.txt").unwrap();
    assert_eq!(run.sandbox, Sandbox::WorkspaceWrite);
    let exited = wait_for(&fixture.host, &fixture.seen, "command/exited of b1", |seen| {
        seen.iter().find_map(|notification| match notification {
            HostEvent::CommandExited(exited) if exited.call_id == "b1" => Some(exited.clone()),
            _ => None,
        })
    });
    assert_eq!(exited.exit_code, Some(0));
    assert_eq!(
        std::fs::read_to_string(fixture.workspace.join("confirmed.txt")).unwrap(),
        "confirmed\n"
    );
    fixture.host.complete_turn(&session, &turn).unwrap();
    assert_eq!(
        code(fixture.host.confirm_tool(&session, &turn, &"b1".into(), true)),
        ErrorCode::ToolConfirmationNotPending
    );
}

#[test]
fn unconfirmed_calls_are_dropped_with_their_turn() {
    let fixture = Fixture::new();
    fixture.agent_session("s", PermissionMode::AcceptEdits);
    let session = SessionId::from("s");
    for end in ["complete", "cancel"] {
        let (turn, outcomes) = fixture.batch_in_new_turn("s", vec![bash("b1", "make")]);
        assert_eq!(verdict(&outcomes[0]), Verdict::Confirm);
        match end {
            "complete" => fixture.host.complete_turn(&session, &turn.turn_id).map(|_| ()),
            _ => fixture.host.cancel_turn(&session).map(|_| ()),
        }
        .unwrap();
        assert_eq!(
            code(
                fixture
                    .host
                    .confirm_tool(&session, &turn.turn_id, &"b1".into(), true)
            ),
            ErrorCode::ToolConfirmationNotPending,
            "after turn/{end}"
        );
        assert_eq!(
            code(
                fixture
                    .host
                    .start_agent_command(&session, &turn.turn_id, &"b1".into(), "make", None, None)
            ),
            ErrorCode::TurnNotActive
        );
    }
    assert_eq!(
        code(
            fixture
                .host
                .confirm_tool(&SessionId::from("nobody"), &TurnId::from("t"), &"b1".into(), true)
        ),
        ErrorCode::SessionNotFound
    );
}

#[test]
fn a_scheduled_turn_denies_what_needs_a_person_before_anything_runs() {
    let fixture = Fixture::new();
    fixture.agent_session("s", PermissionMode::Ask);
    let session = SessionId::from("s");
    let turn = fixture
        .host
        .start_turn(&session, Origin::Scheduled)
        .unwrap()
        .turn_id;
    let marker = fixture.workspace.join("unattended.txt");
    let command = format!("touch {}", marker.display());
    let outcomes = fixture
        .host
        .tool_calls(
            &session,
            &turn,
            vec![
                bash("b1", &command),
                call("e1", "Edit", json!({"path": "src/lib.rs"})),
            ],
        )
        .unwrap();
    for outcome in &outcomes {
        assert_eq!(
            verdict(outcome),
            Verdict::Deny(ErrorCode::PermissionRequiresInteractiveSession),
            "{}",
            outcome.call_id
        );
        assert!(!outcome.host_run && outcome.command.is_none());
    }
    assert_eq!(
        code(fixture.host.confirm_tool(&session, &turn, &"b1".into(), true)),
        ErrorCode::ToolConfirmationNotPending
    );
    assert_eq!(
        code(
            fixture
                .host
                .start_agent_command(&session, &turn, &"b1".into(), &command, None, None)
        ),
        ErrorCode::CommandNotAllowed
    );
    assert!(!marker.exists(), "nothing ran");
    assert_eq!(
        fixture.tool_audit("s", "b1"),
        [(
            ToolAuditKind::Declined,
            Some(ErrorCode::PermissionRequiresInteractiveSession),
            T0
        )]
    );
    // The denied Bash call is in the command audit as a refusal too.
    let refused: Vec<(String, Option<ErrorCode>)> = fixture
        .host
        .list_commands(&CommandFilter::default())
        .unwrap()
        .into_iter()
        .filter(|record| record.kind == CommandEntryKind::Refused)
        .map(|record| (record.run.call_id.into_string(), record.run.error_code))
        .collect();
    assert!(refused.contains(&(
        "b1".to_owned(),
        Some(ErrorCode::PermissionRequiresInteractiveSession)
    )));
}

#[test]
fn an_executions_decisions_are_audited_against_it() {
    let fixture = Fixture::new();
    let (_, execution) = fixture.queued("s", PermissionMode::AcceptEdits);
    let session = SessionId::from("s");
    let turn = fixture
        .host
        .session(&session)
        .unwrap()
        .active_turn
        .unwrap()
        .turn_id;
    let outcomes = fixture
        .host
        .tool_calls(
            &session,
            &turn,
            vec![
                call("e1", "Edit", json!({"path": "src/lib.rs"})),
                call("m1", "mcp_deploy", json!({})),
                bash("b1", "true"),
                call("r1", "Read", json!({})),
            ],
        )
        .unwrap();
    let decided: Vec<Verdict> = outcomes.iter().map(verdict).collect();
    assert_eq!(
        decided,
        [Verdict::Allow, Verdict::Confirm, Verdict::Confirm, Verdict::Allow]
    );
    fixture
        .host
        .confirm_tool(&session, &turn, &"m1".into(), false)
        .unwrap();
    fixture
        .host
        .confirm_tool(&session, &turn, &"b1".into(), true)
        .unwrap();
    let tally = plan_storage::Store::open_read_only(&fixture.db)
        .unwrap()
        .execution_tool_tally(&execution)
        .unwrap();
    assert_eq!((tally.confirmed, tally.declined, tally.auto_allowed), (1, 1, 1));
}

#[test]
fn a_write_through_a_link_out_of_the_workspace_is_what_its_target_is() {
    let fixture = Fixture::new();
    fixture.agent_session("s", PermissionMode::Auto);
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), fixture.workspace.join("link")).unwrap();
    std::fs::create_dir_all(fixture.workspace.join("src")).unwrap();
    let inside = fixture.workspace.join("src/new.rs");
    let through = fixture.workspace.join("link/new.rs");
    let (_, outcomes) = fixture.batch_in_new_turn(
        "s",
        vec![
            call("in", "Write", json!({"file_path": inside, "content": "x"})),
            call("out", "Write", json!({"file_path": through, "content": "x"})),
            call("rel", "Edit", json!({"path": "link/new.rs"})),
            call(
                "cfg",
                "Write",
                json!({"file_path": fixture.workspace.join(".claude/settings.json")}),
            ),
        ],
    );
    let decided: Vec<Verdict> = outcomes.iter().map(verdict).collect();
    let refused = Verdict::Deny(ErrorCode::ToolWriteProtected);
    assert_eq!(decided, [Verdict::Allow, refused, refused, refused]);
    // Each refusal is in the transcript with its code.
    for call_id in ["out", "rel", "cfg"] {
        let audited = fixture.tool_audit("s", call_id);
        assert_eq!(audited.len(), 1, "{call_id}");
        assert_eq!(
            (audited[0].0, audited[0].1),
            (ToolAuditKind::Declined, Some(ErrorCode::ToolWriteProtected))
        );
    }
}
