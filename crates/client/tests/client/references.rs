//! `command/register` and `command/run`: a call held for a client that
//! names it by reference runs once, in the turn and phase it was
//! registered for; every other reference is refused by the host.

use plan_client::{Client, LineTransport};
use plan_core::{CallId, ErrorCode, Mode, PermissionMode, SessionId, ToolCall, ToolCallDecision, TurnId};
use plan_protocol::{
    CommandRegisterParams, CommandRunParams, SessionCreateParams, TurnCompleteParams, TurnStartParams,
    TurnToolCallsParams,
};

use super::support::Served;

fn served() -> Served {
    let mut options = plan_host::HostOptions::default();
    options.limits.commands.auto_without_sandbox = true;
    Served::with(options)
}

fn agent_turn(client: &mut Client<LineTransport>, project: String, mode: PermissionMode) -> TurnId {
    client
        .session_create(&SessionCreateParams {
            session_id: Some(SessionId::from("s".to_owned())),
            workspace_root: Some(project),
            mode: Some(Mode::Agent),
            permission_mode: Some(mode),
        })
        .unwrap();
    TurnId::from(
        client
            .turn_start(&TurnStartParams {
                session_id: "s".into(),
                prompt: "work".to_owned(),
                origin: plan_core::Origin::Interactive,
                mode: None,
            })
            .unwrap()
            .turn_id,
    )
}

fn bash(client: &mut Client<LineTransport>, turn: &TurnId, call: &str, command: &str) -> ToolCallDecision {
    let results = client
        .turn_tool_calls(&TurnToolCallsParams {
            session_id: "s".into(),
            turn_id: turn.clone(),
            calls: vec![ToolCall {
                call_id: CallId::from(call.to_owned()),
                name: plan_core::BASH.to_owned(),
                input: serde_json::json!({"command": command}),
            }],
        })
        .unwrap();
    results.results[0].decision
}

fn register(
    client: &mut Client<LineTransport>,
    turn: &TurnId,
    call: &str,
    command: &str,
) -> Result<String, ErrorCode> {
    client
        .command_register(&CommandRegisterParams {
            session_id: "s".into(),
            turn_id: turn.clone(),
            call_id: CallId::from(call.to_owned()),
            command: command.to_owned(),
            cwd: None,
            timeout_ms: None,
        })
        .map(|registered| registered.reference)
        .map_err(|error| error.code().unwrap())
}

fn run(client: &mut Client<LineTransport>, reference: &str) -> Result<plan_protocol::CommandRun, ErrorCode> {
    client
        .command_run(&CommandRunParams {
            session_id: "s".into(),
            reference: reference.to_owned(),
        })
        .map_err(|error| error.code().unwrap())
}

#[test]
fn a_reference_runs_its_call_once_and_no_other_reference_runs_anything() {
    let served = served();
    let mut client = served.client();
    let turn = agent_turn(&mut client, served.project(), PermissionMode::Auto);
    assert_eq!(bash(&mut client, &turn, "c1", "true"), ToolCallDecision::Allow);
    let reference = register(&mut client, &turn, "c1", "true").unwrap();
    assert_eq!(reference.len(), 32, "{reference}");
    // A made-up reference, or one changed by a character, runs nothing.
    assert_eq!(
        run(&mut client, "00000000000000000000000000000000"),
        Err(ErrorCode::CommandNotAllowed)
    );
    let mut altered = reference.clone();
    altered.replace_range(0..1, if reference.starts_with('0') { "1" } else { "0" });
    assert_eq!(run(&mut client, &altered), Err(ErrorCode::CommandNotAllowed));
    let started = run(&mut client, &reference).unwrap();
    assert_eq!(started.call_id.as_str(), "c1");
    assert_eq!(started.command, "true");
    // Once.
    assert_eq!(run(&mut client, &reference), Err(ErrorCode::CommandNotAllowed));
}

#[test]
fn a_call_is_registered_only_as_the_turn_decided_it() {
    let served = served();
    let mut client = served.client();
    let turn = agent_turn(&mut client, served.project(), PermissionMode::Ask);
    // Under ask a command awaits a person: it cannot be registered yet.
    assert_eq!(bash(&mut client, &turn, "c1", "true"), ToolCallDecision::Confirm);
    assert_eq!(
        register(&mut client, &turn, "c1", "true"),
        Err(ErrorCode::CommandNotAllowed)
    );
    client
        .tool_confirm(&plan_protocol::ToolConfirmParams {
            session_id: "s".into(),
            turn_id: turn.clone(),
            call_id: "c1".into(),
            allow: true,
        })
        .unwrap();
    // Confirmed: only with the very input the person saw.
    assert_eq!(
        register(&mut client, &turn, "c1", "rm -rf ."),
        Err(ErrorCode::CommandNotAllowed)
    );
    assert_eq!(
        register(&mut client, &turn, "never-decided", "true"),
        Err(ErrorCode::CommandNotAllowed)
    );
    assert!(register(&mut client, &turn, "c1", "true").is_ok());
}

#[test]
fn a_reference_dies_with_the_turn_it_was_registered_in() {
    let served = served();
    let mut client = served.client();
    let turn = agent_turn(&mut client, served.project(), PermissionMode::Auto);
    bash(&mut client, &turn, "c1", "true");
    let reference = register(&mut client, &turn, "c1", "true").unwrap();
    client
        .turn_complete(&TurnCompleteParams {
            session_id: "s".into(),
            turn_id: turn,
        })
        .unwrap();
    client
        .turn_start(&TurnStartParams {
            session_id: "s".into(),
            prompt: "next".to_owned(),
            origin: plan_core::Origin::Interactive,
            mode: None,
        })
        .unwrap();
    assert_eq!(run(&mut client, &reference), Err(ErrorCode::CommandNotAllowed));
}

#[test]
fn a_plan_call_is_registered_only_where_the_plan_sandbox_is() {
    // This host's sandbox helper is missing: a Plan-mode call is refused at
    // registration, with the Plan sandbox's own code.
    let missing = tempfile::tempdir().unwrap();
    let served = Served::with(plan_host::HostOptions {
        sandbox_helper: Some(missing.path().join("no-such-helper")),
        ..plan_host::HostOptions::default()
    });
    let mut client = served.client();
    let mut agent = plan_client::agent::AgentSession::new(&mut client, "p".into(), served.project());
    let turn = agent.ensure_turn(Mode::Plan, "plan").unwrap();
    let refused = agent
        .client()
        .command_register(&CommandRegisterParams {
            session_id: "p".into(),
            turn_id: turn.turn_id,
            call_id: "c1".into(),
            command: "true".to_owned(),
            cwd: None,
            timeout_ms: None,
        })
        .unwrap_err();
    assert_eq!(refused.code(), Some(ErrorCode::PlanSandboxUnavailable));
}

#[test]
fn every_refused_run_is_in_the_audit_with_the_call_its_reference_named() {
    let served = served();
    let mut client = served.client();
    let turn = agent_turn(&mut client, served.project(), PermissionMode::Auto);
    assert_eq!(bash(&mut client, &turn, "c1", "true"), ToolCallDecision::Allow);
    let reference = register(&mut client, &turn, "c1", "true").unwrap();
    let refused = |served: &Served| -> Vec<plan_core::CommandRun> {
        served
            .host
            .list_commands(&plan_host::CommandFilter {
                session_id: Some(SessionId::from("s".to_owned())),
                limit: None,
            })
            .unwrap()
            .into_iter()
            .filter(|record| record.kind == plan_host::CommandEntryKind::Refused)
            .map(|record| record.run)
            .collect()
    };
    // A reference the host never gave names no call.
    assert_eq!(
        run(&mut client, "00000000000000000000000000000000"),
        Err(ErrorCode::CommandNotAllowed)
    );
    let unknown = refused(&served);
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert_eq!(unknown[0].call_id.as_str(), "");
    assert_eq!(unknown[0].turn_id, turn);
    assert_eq!(unknown[0].command, "");
    assert_eq!(unknown[0].error_code, Some(ErrorCode::CommandNotAllowed));
    assert_eq!(unknown[0].state, plan_core::CommandState::FailedToStart);
    // A spent reference names the call it ran.
    run(&mut client, &reference).unwrap();
    assert_eq!(run(&mut client, &reference), Err(ErrorCode::CommandNotAllowed));
    let spent = refused(&served);
    assert_eq!(spent.len(), 2, "{spent:?}");
    let spent = spent.iter().find(|run| run.call_id.as_str() == "c1").unwrap();
    assert_eq!(spent.command, "true");
    assert_eq!(spent.error_code, Some(ErrorCode::CommandNotAllowed));
    // Outside any turn, too, and the chain still verifies.
    client
        .turn_complete(&TurnCompleteParams {
            session_id: "s".into(),
            turn_id: turn,
        })
        .ok();
    assert_eq!(run(&mut client, &reference), Err(ErrorCode::CommandNotAllowed));
    assert_eq!(refused(&served).len(), 3);
}
