//! Round-trip properties: serialize -> deserialize gives back an equal value,
//! for every wire type; and every typed request survives `parse_request`.

use plan_core::ErrorCode;
use plan_protocol::*;
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::Union;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn check<T>(value: &T) -> Result<(), TestCaseError>
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let text = serde_json::to_string(value).map_err(|error| TestCaseError::fail(error.to_string()))?;
    let back: T =
        serde_json::from_str(&text).map_err(|error| TestCaseError::fail(format!("{error}: {text}")))?;
    prop_assert_eq!(&back, value);
    Ok(())
}

fn text() -> impl Strategy<Value = String> + Clone {
    any::<String>()
}

fn ms() -> impl Strategy<Value = i64> + Clone {
    any::<i64>()
}

fn json() -> impl Strategy<Value = Value> + Clone {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            json_object_of(inner),
        ]
    })
}

fn json_object_of(inner: impl Strategy<Value = Value> + Clone) -> impl Strategy<Value = Value> + Clone {
    btree_map(text(), inner, 0..4).prop_map(|fields| Value::Object(fields.into_iter().collect()))
}

fn code() -> impl Strategy<Value = CanonicalCode> + Clone {
    select(ErrorCode::ALL.to_vec()).prop_map(CanonicalCode)
}

fn mode() -> impl Strategy<Value = Mode> + Clone {
    select(Mode::ALL)
}

fn permission_mode() -> impl Strategy<Value = PermissionMode> + Clone {
    select(PermissionMode::ALL)
}

fn origin() -> impl Strategy<Value = Origin> + Clone {
    select(Origin::ALL)
}

fn turn_kind() -> impl Strategy<Value = TurnKind> + Clone {
    select(TurnKind::ALL)
}

fn approval_status() -> impl Strategy<Value = ApprovalStatus> + Clone {
    select(ApprovalStatus::ALL)
}

fn execution_state() -> impl Strategy<Value = ExecutionState> + Clone {
    select(ExecutionState::ALL)
}

fn request_id() -> impl Strategy<Value = RequestId> + Clone {
    prop_oneof![
        any::<i64>().prop_map(RequestId::Number),
        text().prop_map(RequestId::String)
    ]
}

fn active_turn() -> impl Strategy<Value = ActiveTurn> + Clone {
    (text(), mode(), origin(), turn_kind()).prop_map(|(turn_id, mode, origin, kind)| ActiveTurn {
        turn_id,
        mode,
        origin,
        kind,
    })
}

fn session() -> impl Strategy<Value = Session> + Clone {
    (
        (text(), option::of(text()), mode(), permission_mode()),
        (option::of(text()), option::of(text()), option::of(text())),
        (option::of(active_turn()), option::of(text()), option::of(text())),
    )
        .prop_map(
            |(
                (session_id, workspace_root, mode, permission_mode),
                (provider, model, shell),
                (active_turn, pending_approval_id, active_execution_id),
            )| Session {
                session_id,
                workspace_root,
                mode,
                permission_mode,
                provider,
                model,
                shell,
                active_turn,
                pending_approval_id,
                active_execution_id,
            },
        )
}

fn artifact() -> impl Strategy<Value = Artifact> + Clone {
    (text(), text(), any::<u64>()).prop_map(|(path, sha256, size)| Artifact { path, sha256, size })
}

fn plan_approval() -> impl Strategy<Value = PlanApproval> + Clone {
    (
        (text(), text(), text(), text(), text()),
        (option::of(artifact()), approval_status(), option::of(code())),
        (ms(), ms(), option::of(ms())),
        (
            option::of(permission_mode()),
            option::of(text()),
            option::of(execution_state()),
        ),
    )
        .prop_map(
            |(
                (id, session_id, turn_id, title, question),
                (artifact, status, error_code),
                (created_at, expires_at, decided_at),
                (permission_mode, execution_id, execution_state),
            )| PlanApproval {
                id: id.into(),
                session_id: session_id.into(),
                turn_id: turn_id.into(),
                title,
                question,
                artifact,
                status,
                error_code: error_code.map(ErrorCode::from),
                created_at,
                expires_at,
                decided_at,
                permission_mode,
                execution_id: execution_id.map(Into::into),
                execution_state,
            },
        )
}

fn tool_call() -> impl Strategy<Value = ToolCall> + Clone {
    (text(), text(), json()).prop_map(|(call_id, name, input)| ToolCall {
        call_id: call_id.into(),
        name,
        input,
    })
}

fn tool_call_error() -> impl Strategy<Value = ToolCallError> + Clone {
    (code(), text()).prop_map(|(code, message)| ToolCallError {
        code: code.code(),
        message,
    })
}

fn tool_call_result() -> impl Strategy<Value = ToolCallResult> + Clone {
    (
        text(),
        select(ToolCallDecision::ALL),
        option::of(tool_call_error()),
        option::of(plan_approval()),
        any::<bool>(),
    )
        .prop_map(|(call_id, decision, error, approval, host_run)| ToolCallResult {
            call_id: call_id.into(),
            decision,
            host_run,
            error,
            approval,
            command: None,
        })
}

fn shell_info() -> impl Strategy<Value = ShellInfo> + Clone {
    (text(), text(), any::<bool>()).prop_map(|(id, path, available)| ShellInfo { id, path, available })
}

fn error_object() -> impl Strategy<Value = ErrorObject> + Clone {
    (any::<i64>(), text(), code()).prop_map(|(code, message, canonical)| ErrorObject {
        code,
        message,
        data: ErrorData { code: canonical },
    })
}

fn initialize_params() -> impl Strategy<Value = InitializeParams> + Clone {
    (any::<i64>(), option::of(text())).prop_map(|(protocol_version, client_name)| InitializeParams {
        protocol_version,
        client_name,
    })
}

fn initialize_result() -> impl Strategy<Value = InitializeResult> + Clone {
    (any::<i64>(), text(), text(), any::<i64>(), ms()).prop_map(
        |(protocol_version, server_name, server_version, schema_version, approval_ttl_ms)| InitializeResult {
            protocol_version,
            server_name,
            server_version,
            schema_version,
            approval_ttl_ms,
            capabilities: plan_protocol::Capabilities {
                commands: plan_protocol::CommandCapabilities {
                    plan_sandbox: plan_protocol::PlanSandbox::Unavailable,
                    reason: Some("no Landlock".to_owned()),
                    layers: Vec::new(),
                    enforced: Vec::new(),
                    bounds: Vec::new(),
                    missing_bounds: Vec::new(),
                },
                web: Some(plan_protocol::WebCapabilities {
                    url: "http://127.0.0.1:1/".to_owned(),
                }),
            },
        },
    )
}

fn session_create_params() -> impl Strategy<Value = SessionCreateParams> + Clone {
    (
        option::of(text()),
        option::of(text()),
        option::of(mode()),
        option::of(permission_mode()),
    )
        .prop_map(
            |(session_id, workspace_root, mode, permission_mode)| SessionCreateParams {
                session_id: session_id.map(Into::into),
                workspace_root,
                mode,
                permission_mode,
            },
        )
}

fn session_get_params() -> impl Strategy<Value = SessionGetParams> + Clone {
    text().prop_map(|session_id| SessionGetParams {
        session_id: session_id.into(),
    })
}

fn clearable() -> impl Strategy<Value = Option<Clearable>> + Clone {
    option::of(option::of(text()).prop_map(Clearable::from))
}

fn session_configure_params() -> impl Strategy<Value = SessionConfigureParams> + Clone {
    (
        text(),
        option::of(mode()),
        option::of(permission_mode()),
        clearable(),
        clearable(),
        clearable(),
    )
        .prop_map(
            |(session_id, mode, permission_mode, provider, model, shell)| SessionConfigureParams {
                session_id: session_id.into(),
                mode,
                permission_mode,
                provider,
                model,
                shell,
            },
        )
}

fn turn_start_params() -> impl Strategy<Value = TurnStartParams> + Clone {
    (text(), text(), origin(), proptest::option::of(mode())).prop_map(|(session_id, prompt, origin, mode)| {
        TurnStartParams {
            session_id: session_id.into(),
            prompt,
            origin,
            mode,
        }
    })
}

fn turn_start_result() -> impl Strategy<Value = TurnStartResult> + Clone {
    (text(), mode()).prop_map(|(turn_id, mode)| TurnStartResult { turn_id, mode })
}

fn turn_tool_calls_params() -> impl Strategy<Value = TurnToolCallsParams> + Clone {
    (text(), text(), vec(tool_call(), 0..4)).prop_map(|(session_id, turn_id, calls)| TurnToolCallsParams {
        session_id: session_id.into(),
        turn_id: turn_id.into(),
        calls,
    })
}

fn turn_tool_calls_result() -> impl Strategy<Value = TurnToolCallsResult> + Clone {
    vec(tool_call_result(), 0..4).prop_map(|results| TurnToolCallsResult { results })
}

fn turn_complete_params() -> impl Strategy<Value = TurnCompleteParams> + Clone {
    (text(), text()).prop_map(|(session_id, turn_id)| TurnCompleteParams {
        session_id: session_id.into(),
        turn_id: turn_id.into(),
    })
}

fn turn_cancel_params() -> impl Strategy<Value = TurnCancelParams> + Clone {
    text().prop_map(|session_id| TurnCancelParams {
        session_id: session_id.into(),
    })
}

fn plan_approve_params() -> impl Strategy<Value = PlanApproveParams> + Clone {
    (text(), option::of(permission_mode())).prop_map(|(approval_id, permission_mode)| PlanApproveParams {
        approval_id: approval_id.into(),
        permission_mode,
    })
}

fn plan_reject_params() -> impl Strategy<Value = PlanRejectParams> + Clone {
    text().prop_map(|approval_id| PlanRejectParams {
        approval_id: approval_id.into(),
    })
}

fn plan_decision_result() -> impl Strategy<Value = PlanDecisionResult> + Clone {
    (plan_approval(), session()).prop_map(|(approval, session)| PlanDecisionResult { approval, session })
}

fn plan_get_params() -> impl Strategy<Value = PlanGetParams> + Clone {
    text().prop_map(|approval_id| PlanGetParams {
        approval_id: approval_id.into(),
    })
}

fn plan_list_params() -> impl Strategy<Value = PlanListParams> + Clone {
    (
        option::of(text()),
        option::of(approval_status()),
        option::of(any::<u32>()),
    )
        .prop_map(|(session_id, status, limit)| PlanListParams {
            session_id: session_id.map(Into::into),
            status,
            limit,
        })
}

fn plan_list_result() -> impl Strategy<Value = PlanListResult> + Clone {
    vec(plan_approval(), 0..3).prop_map(|approvals| PlanListResult { approvals })
}

fn plan_read_artifact_params() -> impl Strategy<Value = PlanReadArtifactParams> + Clone {
    text().prop_map(|approval_id| PlanReadArtifactParams {
        approval_id: approval_id.into(),
    })
}

fn plan_read_artifact_result() -> impl Strategy<Value = PlanReadArtifactResult> + Clone {
    (text(), text(), any::<u64>()).prop_map(|(markdown, sha256, size)| PlanReadArtifactResult {
        markdown,
        sha256,
        size,
    })
}

fn execution_start_params() -> impl Strategy<Value = ExecutionStartParams> + Clone {
    text().prop_map(|execution_id| ExecutionStartParams {
        execution_id: execution_id.into(),
    })
}

fn execution_complete_params() -> impl Strategy<Value = ExecutionCompleteParams> + Clone {
    text().prop_map(|execution_id| ExecutionCompleteParams {
        execution_id: execution_id.into(),
    })
}

fn shell_list_result() -> impl Strategy<Value = ShellListResult> + Clone {
    (vec(shell_info(), 0..4), text()).prop_map(|(shells, default_shell)| ShellListResult {
        shells,
        default_shell,
    })
}

fn shell_set_default_params() -> impl Strategy<Value = ShellSetDefaultParams> + Clone {
    text().prop_map(|shell_id| ShellSetDefaultParams { shell_id })
}

fn shell_set_default_result() -> impl Strategy<Value = ShellSetDefaultResult> + Clone {
    text().prop_map(|default_shell| ShellSetDefaultResult { default_shell })
}

fn client_request() -> impl Strategy<Value = ClientRequest> {
    Union::new(vec![
        initialize_params().prop_map(ClientRequest::Initialize).boxed(),
        session_create_params()
            .prop_map(ClientRequest::SessionCreate)
            .boxed(),
        session_get_params().prop_map(ClientRequest::SessionGet).boxed(),
        session_configure_params()
            .prop_map(ClientRequest::SessionConfigure)
            .boxed(),
        turn_start_params().prop_map(ClientRequest::TurnStart).boxed(),
        turn_tool_calls_params()
            .prop_map(ClientRequest::TurnToolCalls)
            .boxed(),
        turn_complete_params()
            .prop_map(ClientRequest::TurnComplete)
            .boxed(),
        turn_cancel_params().prop_map(ClientRequest::TurnCancel).boxed(),
        plan_approve_params().prop_map(ClientRequest::PlanApprove).boxed(),
        plan_reject_params().prop_map(ClientRequest::PlanReject).boxed(),
        plan_get_params().prop_map(ClientRequest::PlanGet).boxed(),
        plan_list_params().prop_map(ClientRequest::PlanList).boxed(),
        plan_read_artifact_params()
            .prop_map(ClientRequest::PlanReadArtifact)
            .boxed(),
        execution_start_params()
            .prop_map(ClientRequest::ExecutionStart)
            .boxed(),
        execution_complete_params()
            .prop_map(ClientRequest::ExecutionComplete)
            .boxed(),
        Just(ShellListParams {})
            .prop_map(ClientRequest::ShellList)
            .boxed(),
        shell_set_default_params()
            .prop_map(ClientRequest::ShellSetDefault)
            .boxed(),
    ])
}

fn plan_approval_requested() -> impl Strategy<Value = PlanApprovalRequestedNotification> + Clone {
    (plan_approval(), option::of(text()))
        .prop_map(|(approval, card_url)| PlanApprovalRequestedNotification { approval, card_url })
}

fn plan_approval_resolved() -> impl Strategy<Value = PlanApprovalResolvedNotification> + Clone {
    plan_approval().prop_map(|approval| PlanApprovalResolvedNotification { approval })
}

fn execution_state_changed() -> impl Strategy<Value = ExecutionStateChangedNotification> + Clone {
    (text(), text(), execution_state()).prop_map(|(session_id, execution_id, state)| {
        ExecutionStateChangedNotification {
            session_id,
            execution_id,
            state,
        }
    })
}

fn session_changed() -> impl Strategy<Value = SessionChangedNotification> + Clone {
    session().prop_map(|session| SessionChangedNotification { session })
}

fn command_output() -> impl Strategy<Value = CommandOutputNotification> + Clone {
    (text(), text(), select(OutputStream::ALL), any::<u64>(), text()).prop_map(
        |(session_id, call_id, stream, seq, chunk)| CommandOutputNotification {
            session_id,
            call_id: call_id.into(),
            stream,
            seq,
            chunk,
        },
    )
}

fn server_notification() -> impl Strategy<Value = ServerNotification> {
    prop_oneof![
        plan_approval_requested().prop_map(ServerNotification::PlanApprovalRequested),
        plan_approval_resolved().prop_map(ServerNotification::PlanApprovalResolved),
        execution_state_changed().prop_map(ServerNotification::ExecutionStateChanged),
        session_changed().prop_map(ServerNotification::SessionChanged),
        command_output().prop_map(ServerNotification::CommandOutput),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    (request_id(), text(), option::of(json_object_of(json()))).prop_map(|(id, method, params)| Request {
        jsonrpc: JsonRpcVersion,
        id,
        method,
        params,
    })
}

fn response() -> impl Strategy<Value = Response> {
    (
        option::of(request_id()),
        prop_oneof![
            json().prop_map(ResponseOutcome::Result),
            error_object().prop_map(ResponseOutcome::Error),
        ],
    )
        .prop_map(|(id, outcome)| Response {
            jsonrpc: JsonRpcVersion,
            id,
            outcome,
        })
}

macro_rules! roundtrips {
    ($($name:ident: $strategy:expr;)+) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]
            $(
                #[test]
                fn $name(value in $strategy) {
                    check(&value)?;
                }
            )+
        }
    };
}

roundtrips! {
    request_id_roundtrips: request_id();
    request_roundtrips: request();
    response_roundtrips: response();
    notification_roundtrips: server_notification().prop_map(Notification::new);
    error_object_roundtrips: error_object();
    canonical_code_roundtrips: code();
    mode_roundtrips: mode();
    permission_mode_roundtrips: permission_mode();
    origin_roundtrips: origin();
    turn_kind_roundtrips: turn_kind();
    approval_status_roundtrips: approval_status();
    execution_state_roundtrips: execution_state();
    tool_call_decision_roundtrips: select(ToolCallDecision::ALL);
    output_stream_roundtrips: select(OutputStream::ALL);
    active_turn_roundtrips: active_turn();
    session_roundtrips: session();
    artifact_roundtrips: artifact();
    plan_approval_roundtrips: plan_approval();
    tool_call_roundtrips: tool_call();
    tool_call_error_roundtrips: tool_call_error();
    tool_call_result_roundtrips: tool_call_result();
    shell_info_roundtrips: shell_info();
    initialize_params_roundtrips: initialize_params();
    initialize_result_roundtrips: initialize_result();
    session_create_params_roundtrips: session_create_params();
    session_get_params_roundtrips: session_get_params();
    session_configure_params_roundtrips: session_configure_params();
    turn_start_params_roundtrips: turn_start_params();
    turn_start_result_roundtrips: turn_start_result();
    turn_tool_calls_params_roundtrips: turn_tool_calls_params();
    turn_tool_calls_result_roundtrips: turn_tool_calls_result();
    turn_complete_params_roundtrips: turn_complete_params();
    turn_cancel_params_roundtrips: turn_cancel_params();
    plan_approve_params_roundtrips: plan_approve_params();
    plan_reject_params_roundtrips: plan_reject_params();
    plan_decision_result_roundtrips: plan_decision_result();
    plan_get_params_roundtrips: plan_get_params();
    plan_list_params_roundtrips: plan_list_params();
    plan_list_result_roundtrips: plan_list_result();
    plan_read_artifact_params_roundtrips: plan_read_artifact_params();
    plan_read_artifact_result_roundtrips: plan_read_artifact_result();
    execution_start_params_roundtrips: execution_start_params();
    execution_complete_params_roundtrips: execution_complete_params();
    shell_list_params_roundtrips: Just(ShellListParams {});
    shell_list_result_roundtrips: shell_list_result();
    shell_set_default_params_roundtrips: shell_set_default_params();
    shell_set_default_result_roundtrips: shell_set_default_result();
    plan_approval_requested_roundtrips: plan_approval_requested();
    plan_approval_resolved_roundtrips: plan_approval_resolved();
    execution_state_changed_roundtrips: execution_state_changed();
    session_changed_roundtrips: session_changed();
    command_output_roundtrips: command_output();
    server_notification_roundtrips: server_notification();
    client_request_roundtrips: client_request();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A typed request sent through the envelope decodes to itself through
    /// `parse_request`, the path every frontend takes.
    #[test]
    fn client_requests_survive_the_envelope_and_parse_request(request in client_request(), id in request_id()) {
        let envelope = Request::new(id, &request).map_err(|error| TestCaseError::fail(error.to_string()))?;
        let line = serde_json::to_string(&envelope).map_err(|error| TestCaseError::fail(error.to_string()))?;
        let read: Request = serde_json::from_str(&line).map_err(|error| TestCaseError::fail(error.to_string()))?;
        prop_assert_eq!(read.parse(), Ok(request));
    }
}
