//! Golden JSON (insta snapshots) for every message: each method's request
//! and success response, each notification, and the error responses.

use plan_core::{ErrorCode, ExecutionState};
use plan_protocol::{
    ApprovalStatus, Clearable, ClientRequest, CommandOutputNotification, ErrorObject,
    ExecutionCompleteParams, ExecutionStartParams, ExecutionStateChangedNotification, InitializeParams,
    InitializeResult, Mode, Notification, Origin, OutputStream, PROTOCOL_VERSION, PermissionMode,
    PlanApprovalRequestedNotification, PlanApprovalResolvedNotification, PlanApproveParams,
    PlanDecisionResult, PlanGetParams, PlanListParams, PlanListResult, PlanReadArtifactParams,
    PlanReadArtifactResult, PlanRejectParams, PlanWithdrawParams, Request, RequestId, Response,
    SCHEMA_VERSION, ServerNotification, SessionChangedNotification, SessionConfigureParams,
    SessionCreateParams, SessionGetParams, ShellInfo, ShellListParams, ShellListResult,
    ShellSetDefaultParams, ShellSetDefaultResult, ToolCall, ToolCallResult, TurnCancelParams,
    TurnCompleteParams, TurnStartParams, TurnStartResult, TurnToolCallsParams, TurnToolCallsResult,
};
use plan_protocol::{
    Capabilities, CommandCancelParams, CommandCapabilities, CommandExitedNotification, CommandGetParams,
    CommandRun, CommandSandbox, CommandShell, CommandStartParams, CommandState, PlanSandbox,
};
use plan_protocol::{ToolAuditEntry, ToolAuditKind, ToolConfirmParams, method, notification_method};

/// A Plan-mode command run in `state`.
fn command_run(state: CommandState) -> CommandRun {
    let ended = state != CommandState::Running;
    CommandRun {
        call_id: "call_1".into(),
        session_id: "ses_01".into(),
        turn_id: "turn_01".into(),
        command: "git status --short".to_owned(),
        cwd: "src".to_owned(),
        shell: CommandShell {
            id: "bash".into(),
            path: "/bin/bash".to_owned(),
        },
        sandbox: CommandSandbox::ReadOnly,
        network: false,
        state,
        exit_code: ended.then_some(0),
        signal: None,
        error_code: None,
        started_at: 1_750_000_000_000,
        ended_at: ended.then_some(1_750_000_000_042),
        stdout_bytes: if ended { 27 } else { 0 },
        stderr_bytes: 0,
        truncated: false,
    }
}
use serde_json::json;
use std::collections::BTreeSet;

use crate::fixtures::*;

/// One sample request per method (several for methods with notable shapes),
/// named for its snapshot.
pub(crate) fn requests() -> Vec<(&'static str, ClientRequest)> {
    vec![
        (
            "initialize",
            ClientRequest::Initialize(InitializeParams {
                protocol_version: PROTOCOL_VERSION,
                client_name: Some("desktop".to_owned()),
            }),
        ),
        (
            "session_create",
            ClientRequest::SessionCreate(SessionCreateParams {
                session_id: Some("ses_01".into()),
                workspace_root: Some("/home/dev/project".to_owned()),
                mode: Some(Mode::Plan),
                permission_mode: Some(PermissionMode::Ask),
            }),
        ),
        (
            "session_create_unbound",
            ClientRequest::SessionCreate(SessionCreateParams {
                session_id: None,
                workspace_root: None,
                mode: None,
                permission_mode: None,
            }),
        ),
        (
            "session_get",
            ClientRequest::SessionGet(SessionGetParams {
                session_id: "ses_01".into(),
            }),
        ),
        (
            "session_configure",
            ClientRequest::SessionConfigure(SessionConfigureParams {
                session_id: "ses_01".into(),
                mode: Some(Mode::Plan),
                permission_mode: None,
                provider: Some(Clearable::Set {
                    value: "anthropic".to_owned(),
                }),
                model: Some(Clearable::Clear),
                shell: None,
            }),
        ),
        (
            "turn_start",
            ClientRequest::TurnStart(TurnStartParams {
                session_id: "ses_01".into(),
                prompt: "Plan a retry for the uploader".to_owned(),
                origin: Origin::Interactive,
                mode: None,
            }),
        ),
        (
            "turn_tool_calls",
            ClientRequest::TurnToolCalls(TurnToolCallsParams {
                session_id: "ses_01".into(),
                turn_id: "turn_01".into(),
                calls: vec![
                    ToolCall {
                        call_id: "call_1".into(),
                        name: "Read".to_owned(),
                        input: json!({"path": "src/upload.rs"}),
                    },
                    ToolCall {
                        call_id: "call_2".into(),
                        name: "Write".to_owned(),
                        input: json!({"path": "src/upload.rs", "content": "x"}),
                    },
                ],
            }),
        ),
        (
            "turn_tool_calls_submit_plan",
            ClientRequest::TurnToolCalls(TurnToolCallsParams {
                session_id: "ses_01".into(),
                turn_id: "turn_01".into(),
                calls: vec![ToolCall {
                    call_id: "call_3".into(),
                    name: "SubmitPlan".to_owned(),
                    input: json!({
                        "title": "Add retry to the uploader",
                        "markdown": "# Plan\n\n1. Wrap the upload in a retry loop.\n",
                        "question": "Shall I implement this plan?"
                    }),
                }],
            }),
        ),
        (
            "turn_complete",
            ClientRequest::TurnComplete(TurnCompleteParams {
                session_id: "ses_01".into(),
                turn_id: "turn_01".into(),
            }),
        ),
        (
            "turn_cancel",
            ClientRequest::TurnCancel(TurnCancelParams {
                session_id: "ses_01".into(),
            }),
        ),
        (
            "plan_approve",
            ClientRequest::PlanApprove(PlanApproveParams {
                approval_id: "apr_01".into(),
                permission_mode: Some(PermissionMode::AcceptEdits),
            }),
        ),
        (
            "plan_approve_without_mode",
            ClientRequest::PlanApprove(PlanApproveParams {
                approval_id: "apr_01".into(),
                permission_mode: None,
            }),
        ),
        (
            "plan_reject",
            ClientRequest::PlanReject(PlanRejectParams {
                approval_id: "apr_01".into(),
            }),
        ),
        (
            "plan_get",
            ClientRequest::PlanGet(PlanGetParams {
                approval_id: "apr_01".into(),
            }),
        ),
        (
            "plan_list",
            ClientRequest::PlanList(PlanListParams {
                session_id: Some("ses_01".into()),
                status: Some(ApprovalStatus::Pending),
                limit: Some(20),
            }),
        ),
        (
            "plan_list_unfiltered",
            ClientRequest::PlanList(PlanListParams::default()),
        ),
        (
            "plan_read_artifact",
            ClientRequest::PlanReadArtifact(PlanReadArtifactParams {
                approval_id: "apr_01".into(),
            }),
        ),
        (
            "plan_verify_approval",
            ClientRequest::PlanVerify(plan_protocol::PlanVerifyParams {
                approval_id: Some("apr_01".into()),
                session_id: None,
            }),
        ),
        (
            "plan_verify_everything",
            ClientRequest::PlanVerify(plan_protocol::PlanVerifyParams::default()),
        ),
        (
            "plan_diff",
            ClientRequest::PlanDiff(plan_protocol::PlanDiffParams {
                approval_id: "apr_02".into(),
                against_approval_id: Some("apr_01".into()),
            }),
        ),
        (
            "plan_diff_previous",
            ClientRequest::PlanDiff(plan_protocol::PlanDiffParams {
                approval_id: "apr_02".into(),
                against_approval_id: None,
            }),
        ),
        (
            "execution_start",
            ClientRequest::ExecutionStart(ExecutionStartParams {
                execution_id: "exe_01".into(),
            }),
        ),
        (
            "execution_complete",
            ClientRequest::ExecutionComplete(ExecutionCompleteParams {
                execution_id: "exe_01".into(),
            }),
        ),
        ("shell_list", ClientRequest::ShellList(ShellListParams {})),
        (
            "shell_set_default",
            ClientRequest::ShellSetDefault(ShellSetDefaultParams {
                shell_id: "zsh".to_owned(),
            }),
        ),
        (
            "command_start",
            ClientRequest::CommandStart(CommandStartParams {
                session_id: "ses_01".into(),
                turn_id: "turn_01".into(),
                call_id: "call_1".into(),
                command: "cargo test".to_owned(),
                cwd: Some("crates/core".to_owned()),
                timeout_ms: Some(300_000),
            }),
        ),
        (
            "command_cancel",
            ClientRequest::CommandCancel(CommandCancelParams {
                session_id: "ses_01".into(),
                call_id: "call_1".into(),
            }),
        ),
        (
            "command_get",
            ClientRequest::CommandGet(CommandGetParams {
                session_id: "ses_01".into(),
                call_id: "call_1".into(),
            }),
        ),
        (
            "plan_card_url",
            ClientRequest::PlanCardUrl(plan_protocol::PlanCardUrlParams {
                approval_id: "apr_01".into(),
            }),
        ),
        (
            "tool_confirm",
            ClientRequest::ToolConfirm(ToolConfirmParams {
                session_id: "ses_01".into(),
                turn_id: "turn_02".into(),
                call_id: "call_2".into(),
                allow: true,
            }),
        ),
        (
            "plan_withdraw",
            ClientRequest::PlanWithdraw(PlanWithdrawParams {
                approval_id: "apr_01".into(),
            }),
        ),
        (
            "command_register",
            ClientRequest::CommandRegister(plan_protocol::CommandRegisterParams {
                session_id: "ses_01".into(),
                turn_id: "turn_01".into(),
                call_id: "call_1".into(),
                command: "git log --oneline".to_owned(),
                cwd: Some("crates/core".to_owned()),
                timeout_ms: None,
            }),
        ),
        (
            "command_run",
            ClientRequest::CommandRun(plan_protocol::CommandRunParams {
                session_id: "ses_01".into(),
                reference: "9b1f4c0d7e2a4c6f8e3b5d1a2c4e6f80".to_owned(),
            }),
        ),
        (
            "tool_list_awaiting",
            ClientRequest::ToolListAwaiting(plan_protocol::ToolListAwaitingParams {
                session_id: Some("ses_01".into()),
            }),
        ),
        (
            "turn_start_in_plan",
            ClientRequest::TurnStart(TurnStartParams {
                session_id: "ses_01".into(),
                prompt: "Plan the next step".to_owned(),
                origin: Origin::Interactive,
                mode: Some(Mode::Plan),
            }),
        ),
    ]
}

fn to_value(value: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(value).unwrap()
}

/// One sample success result per method, named for its snapshot.
pub(crate) fn results() -> Vec<(&'static str, &'static str, serde_json::Value)> {
    vec![
        (
            "initialize",
            method::INITIALIZE,
            to_value(&InitializeResult {
                protocol_version: PROTOCOL_VERSION,
                server_name: "plan-checkpoint".to_owned(),
                server_version: "0.1.0".to_owned(),
                schema_version: SCHEMA_VERSION,
                approval_ttl_ms: TTL_MS,
                capabilities: Capabilities {
                    commands: CommandCapabilities {
                        plan_sandbox: PlanSandbox::Landlock,
                        reason: None,
                        layers: ["landlock", "seccomp", "namespaces"].map(String::from).to_vec(),
                        enforced: ["P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9"]
                            .map(String::from)
                            .to_vec(),
                        bounds: ["processes", "inotify", "openFiles", "aio", "keys", "machineAddresses"]
                            .map(String::from)
                            .to_vec(),
                        missing_bounds: vec![plan_protocol::MissingBound {
                            bound: "memory".to_owned(),
                            reason: "no cgroup with the memory controller can be made here".to_owned(),
                        }],
                    },
                    web: Some(plan_protocol::WebCapabilities {
                        url: "http://127.0.0.1:8123/".to_owned(),
                    }),
                },
            }),
        ),
        (
            "session_create",
            method::SESSION_CREATE,
            to_value(&wire_session(&idle_plan_state())),
        ),
        (
            "session_create_unbound",
            method::SESSION_CREATE,
            to_value(&unbound_session()),
        ),
        (
            "session_get_pending",
            method::SESSION_GET,
            to_value(&wire_session(&pending_state())),
        ),
        (
            "session_configure",
            method::SESSION_CONFIGURE,
            to_value(&wire_session(&idle_plan_state())),
        ),
        (
            "turn_start",
            method::TURN_START,
            to_value(&TurnStartResult {
                turn_id: "turn_01".into(),
                mode: Mode::Plan,
            }),
        ),
        (
            "turn_tool_calls",
            method::TURN_TOOL_CALLS,
            to_value(&TurnToolCallsResult {
                results: vec![
                    ToolCallResult::allow("call_1"),
                    ToolCallResult::deny("call_2", ErrorCode::ToolDeniedInPlan),
                ],
            }),
        ),
        (
            "turn_tool_calls_submit_plan",
            method::TURN_TOOL_CALLS,
            to_value(&TurnToolCallsResult {
                results: vec![ToolCallResult::submitted(
                    "call_3",
                    wire_approval(&pending_approval()),
                )],
            }),
        ),
        (
            "turn_tool_calls_invalid_plan_input",
            method::TURN_TOOL_CALLS,
            to_value(&TurnToolCallsResult {
                results: vec![ToolCallResult::deny("call_3", ErrorCode::InvalidPlanInput)],
            }),
        ),
        (
            "turn_complete",
            method::TURN_COMPLETE,
            to_value(&wire_session(&idle_plan_state())),
        ),
        (
            "turn_cancel",
            method::TURN_CANCEL,
            to_value(&wire_session(&idle_plan_state())),
        ),
        (
            "plan_approve",
            method::PLAN_APPROVE,
            to_value(&PlanDecisionResult {
                approval: wire_approval(&approved_approval()),
                session: wire_session(&executing_state()),
            }),
        ),
        (
            "plan_reject",
            method::PLAN_REJECT,
            to_value(&PlanDecisionResult {
                approval: wire_approval(&rejected_approval()),
                session: wire_session(&idle_after_reject_state()),
            }),
        ),
        (
            "plan_get",
            method::PLAN_GET,
            to_value(&wire_approval(&pending_approval())),
        ),
        (
            "plan_get_expired",
            method::PLAN_GET,
            to_value(&wire_approval(&expired_approval())),
        ),
        (
            "plan_list",
            method::PLAN_LIST,
            to_value(&PlanListResult {
                approvals: vec![
                    wire_approval(&pending_approval()),
                    wire_approval(&migrated_interrupted_approval()),
                ],
            }),
        ),
        (
            "plan_read_artifact",
            method::PLAN_READ_ARTIFACT,
            to_value(&PlanReadArtifactResult {
                markdown: "# Plan\n\n1. Wrap the upload in a retry loop.\n".to_owned(),
                sha256: artifact().sha256,
                size: 1234,
            }),
        ),
        (
            "plan_verify",
            method::PLAN_VERIFY,
            to_value(&plan_protocol::VerifyReport::from(&plan_core::VerifyReport {
                artifacts: vec![
                    plan_core::ArtifactVerification {
                        approval_id: "apr_02".into(),
                        result: plan_core::ArtifactCheck::Ok,
                        error_code: None,
                        detail: None,
                    },
                    plan_core::ArtifactVerification {
                        approval_id: "apr_01".into(),
                        result: plan_core::ArtifactCheck::Mismatch,
                        error_code: Some(ErrorCode::ArtifactIntegrityMismatch),
                        detail: Some(
                            "plan artifact .pi/plan/a.md does not match its record: expected 12 bytes".to_owned(),
                        ),
                    },
                    plan_core::ArtifactVerification {
                        approval_id: "apr_00".into(),
                        result: plan_core::ArtifactCheck::Legacy,
                        error_code: None,
                        detail: Some("plan approval apr_00 was migrated from schema v8 and has no artifact".to_owned()),
                    },
                ],
                orphans: vec![plan_core::OrphanArtifact {
                    workspace_root: "/home/ada/src/uploader".to_owned(),
                    path: ".pi/plan/20261128T230501Z-stray-1a2b3c.md".to_owned(),
                }],
                skipped_workspaces: vec![plan_core::SkippedWorkspace {
                    workspace_root: "/home/ada/src/gone".to_owned(),
                    detail: "the workspace root does not exist; no orphans to look for".to_owned(),
                }],
            })),
        ),
        (
            "plan_diff",
            method::PLAN_DIFF,
            to_value(&plan_protocol::PlanDiffResult {
                approval_id: "apr_02".into(),
                against_approval_id: Some("apr_01".into()),
                identical: false,
                unified: Some("--- apr_01:.pi/plan/a.md\n+++ apr_02:.pi/plan/b.md\n@@ -1,2 +1,2 @@\n # Plan\n-1. Retry.\n+1. Retry with backoff.\n".to_owned()),
            }),
        ),
        (
            "plan_diff_first",
            method::PLAN_DIFF,
            to_value(&plan_protocol::PlanDiffResult {
                approval_id: "apr_01".into(),
                against_approval_id: None,
                identical: false,
                unified: None,
            }),
        ),
        (
            "execution_start",
            method::EXECUTION_START,
            to_value(&wire_approval(&with_execution(ExecutionState::Running))),
        ),
        (
            "execution_complete",
            method::EXECUTION_COMPLETE,
            to_value(&wire_approval(&with_execution(ExecutionState::Completed))),
        ),
        (
            "shell_list",
            method::SHELL_LIST,
            to_value(&ShellListResult {
                shells: vec![
                    ShellInfo {
                        id: "bash".into(),
                        path: "/bin/bash".to_owned(),
                        available: true,
                    },
                    ShellInfo {
                        id: "zsh".into(),
                        path: "/bin/zsh".to_owned(),
                        available: false,
                    },
                ],
                default_shell: "bash".to_owned(),
            }),
        ),
        (
            "shell_set_default",
            method::SHELL_SET_DEFAULT,
            to_value(&ShellSetDefaultResult {
                default_shell: "zsh".to_owned(),
            }),
        ),
        (
            "command_start",
            method::COMMAND_START,
            to_value(&CommandRun {
                sandbox: CommandSandbox::None,
                network: true,
                ..command_run(CommandState::Running)
            }),
        ),
        (
            "command_cancel",
            method::COMMAND_CANCEL,
            to_value(&command_run(CommandState::Running)),
        ),
        (
            "command_get",
            method::COMMAND_GET,
            to_value(&command_run(CommandState::Exited)),
        ),
        (
            "turn_tool_calls_plan_bash",
            method::TURN_TOOL_CALLS,
            to_value(&TurnToolCallsResult {
                results: vec![
                    ToolCallResult::ran("call_1", command_run(CommandState::Running)),
                    ToolCallResult::deny("call_2", ErrorCode::PlanSandboxUnavailable),
                ],
            }),
        ),
        (
            "plan_card_url",
            method::PLAN_CARD_URL,
            to_value(&plan_protocol::PlanCardUrlResult {
                url: format!("http://127.0.0.1:8123/card/{}", "7f".repeat(32)),
            }),
        ),
        (
            "turn_tool_calls_agent_ask",
            method::TURN_TOOL_CALLS,
            to_value(&TurnToolCallsResult {
                results: vec![
                    ToolCallResult::allow("call_1"),
                    ToolCallResult::confirm("call_2", false),
                    ToolCallResult::confirm("call_3", true),
                ],
            }),
        ),
        (
            "turn_tool_calls_agent_auto",
            method::TURN_TOOL_CALLS,
            to_value(&TurnToolCallsResult {
                results: vec![ToolCallResult::allow("call_2"), ToolCallResult::host_run("call_3")],
            }),
        ),
        (
            "turn_tool_calls_scheduled_ask",
            method::TURN_TOOL_CALLS,
            to_value(&TurnToolCallsResult {
                results: vec![ToolCallResult::deny(
                    "call_3",
                    ErrorCode::PermissionRequiresInteractiveSession,
                )],
            }),
        ),
        (
            "tool_confirm",
            method::TOOL_CONFIRM,
            to_value(&ToolCallResult::host_run("call_3")),
        ),
        (
            "tool_confirm_declined",
            method::TOOL_CONFIRM,
            to_value(&ToolCallResult::deny("call_2", ErrorCode::ToolDeclined)),
        ),
        (
            "plan_withdraw",
            method::PLAN_WITHDRAW,
            to_value(&PlanDecisionResult {
                approval: wire_approval(&withdrawn_approval()),
                session: wire_session(&idle_after_reject_state()),
            }),
        ),
        (
            "command_register",
            method::COMMAND_REGISTER,
            to_value(&plan_protocol::CommandRegisterResult {
                call_id: "call_1".into(),
                reference: "9b1f4c0d7e2a4c6f8e3b5d1a2c4e6f80".to_owned(),
            }),
        ),
        (
            "command_run",
            method::COMMAND_RUN,
            to_value(&CommandRun {
                sandbox: CommandSandbox::ReadOnly,
                ..command_run(CommandState::Running)
            }),
        ),
        (
            "tool_list_awaiting",
            method::TOOL_LIST_AWAITING,
            to_value(&plan_protocol::ToolListAwaitingResult {
                calls: vec![plan_protocol::AwaitingCall {
                    session_id: "ses_01".into(),
                    turn_id: "turn_02".into(),
                    execution_id: Some("exe_01".into()),
                    call_id: "call_3".into(),
                    tool: "Bash".to_owned(),
                    input: json!({"command": "cargo test", "cwd": "."}),
                    permission_mode: PermissionMode::AcceptEdits,
                }],
            }),
        ),
    ]
}

/// One sample of every notification, named for its snapshot.
pub(crate) fn notifications() -> Vec<(&'static str, ServerNotification)> {
    vec![
        (
            "plan_approval_requested",
            ServerNotification::PlanApprovalRequested(PlanApprovalRequestedNotification::from(
                &pending_approval(),
            )),
        ),
        (
            "plan_approval_requested_with_card",
            ServerNotification::PlanApprovalRequested(PlanApprovalRequestedNotification {
                approval: pending_approval(),
                card_url: Some(format!("http://127.0.0.1:8123/card/{}", "7f".repeat(32))),
            }),
        ),
        (
            "plan_approval_resolved_expired",
            ServerNotification::PlanApprovalResolved(PlanApprovalResolvedNotification::from(
                &expired_approval(),
            )),
        ),
        (
            "execution_state_changed",
            ServerNotification::ExecutionStateChanged(
                ExecutionStateChangedNotification::from_approval(&with_execution(ExecutionState::Running))
                    .unwrap(),
            ),
        ),
        (
            "session_changed",
            ServerNotification::SessionChanged(SessionChangedNotification::from(&executing_state())),
        ),
        (
            "command_output",
            ServerNotification::CommandOutput(CommandOutputNotification {
                session_id: "ses_01".into(),
                call_id: "call_1".into(),
                stream: OutputStream::Stderr,
                seq: 3,
                chunk: "warning: unused variable\n".to_owned(),
            }),
        ),
        (
            "command_exited_timed_out",
            ServerNotification::CommandExited(CommandExitedNotification {
                session_id: "ses_01".into(),
                call_id: "call_1".into(),
                command: CommandRun {
                    state: CommandState::TimedOut,
                    exit_code: None,
                    signal: Some(15),
                    ..command_run(CommandState::TimedOut)
                },
            }),
        ),
    ]
}

#[test]
fn every_method_has_a_golden_request_and_result() {
    let requested: BTreeSet<&str> = requests().iter().map(|(_, request)| request.method()).collect();
    let answered: BTreeSet<&str> = results().iter().map(|(_, method, _)| *method).collect();
    let all: BTreeSet<&str> = method::ALL.into_iter().collect();
    assert_eq!(requested, all);
    assert_eq!(answered, all);
    let notified: BTreeSet<&str> = notifications()
        .iter()
        .map(|(_, notification)| notification.method())
        .collect();
    assert_eq!(notified, notification_method::ALL.into_iter().collect());
}

#[test]
fn golden_requests() {
    for (index, (name, request)) in requests().into_iter().enumerate() {
        let envelope = Request::new(RequestId::Number(index as i64 + 1), &request).unwrap();
        insta::assert_json_snapshot!(format!("request__{name}"), envelope);
    }
}

#[test]
fn golden_results() {
    for (index, (name, _, result)) in results().into_iter().enumerate() {
        let response = Response::success(RequestId::Number(index as i64 + 1), &result).unwrap();
        insta::assert_json_snapshot!(format!("result__{name}"), response);
    }
}

#[test]
fn golden_notifications() {
    for (name, notification) in notifications() {
        insta::assert_json_snapshot!(format!("notification__{name}"), Notification::new(notification));
    }
}

#[test]
fn golden_error_responses() {
    let reject_with_feedback = plan_protocol::parse_request(
        "plan/reject",
        json!({"approvalId": "apr_01", "feedback": "shorter"}),
    )
    .unwrap_err();
    let cases: Vec<(&str, Response)> = vec![
        ("parse_error", Response::error(None, ErrorCode::ParseError)),
        (
            "invalid_request",
            Response::error(
                None,
                ErrorObject::with_detail(ErrorCode::InvalidRequest, "missing `method`"),
            ),
        ),
        (
            "method_not_found",
            Response::error(
                Some(RequestId::Number(1)),
                plan_protocol::parse_request("plan/requestChanges", json!({})).unwrap_err(),
            ),
        ),
        (
            "invalid_params_reject_with_feedback",
            Response::error(Some(RequestId::String("req-7".to_owned())), reject_with_feedback),
        ),
        (
            "protocol_not_initialized",
            Response::error(Some(RequestId::Number(2)), ErrorCode::ProtocolNotInitialized),
        ),
        (
            "protocol_version_unsupported",
            Response::error(Some(RequestId::Number(3)), ErrorCode::ProtocolVersionUnsupported),
        ),
        (
            "session_busy",
            Response::error(Some(RequestId::Number(4)), ErrorCode::SessionBusy),
        ),
        (
            "permission_mode_required",
            Response::error(Some(RequestId::Number(5)), ErrorCode::PermissionModeRequired),
        ),
        (
            "plan_approval_timeout",
            Response::error(Some(RequestId::Number(6)), ErrorCode::PlanApprovalTimeout),
        ),
        (
            "submit_plan_not_alone",
            Response::error(Some(RequestId::Number(7)), ErrorCode::SubmitPlanNotAlone),
        ),
    ];
    for (name, response) in cases {
        insta::assert_json_snapshot!(format!("error__{name}"), response);
    }
}

/// Every canonical code's error object, in one table: number, message, data.
/// One transcript entry of every tool-permission type, as storage writes them.
#[test]
fn golden_tool_audit_entries() {
    let entry =
        |kind, tool: Option<&str>, mode: Option<PermissionMode>, code: Option<ErrorCode>| ToolAuditEntry {
            kind,
            session_id: "ses_01".into(),
            turn_id: "turn_02".into(),
            execution_id: Some("exe_01".into()),
            call_id: "call_3".into(),
            tool: tool.map(str::to_owned),
            permission_mode: mode,
            error_code: code,
            at: 1_750_000_060_000,
        };
    let entries = vec![
        entry(
            ToolAuditKind::ConfirmRequested,
            Some("Bash"),
            Some(PermissionMode::Ask),
            None,
        ),
        entry(ToolAuditKind::Confirmed, None, None, None),
        entry(ToolAuditKind::Declined, None, None, Some(ErrorCode::ToolDeclined)),
        entry(
            ToolAuditKind::AutoAllowed,
            Some("Edit"),
            Some(PermissionMode::AcceptEdits),
            None,
        ),
    ];
    insta::assert_json_snapshot!("tool_audit_entries", entries);
}

#[test]
fn golden_error_objects_for_every_code() {
    let table: Vec<ErrorObject> = ErrorCode::ALL.into_iter().map(ErrorObject::new).collect();
    insta::assert_json_snapshot!("error_objects", table);
}
