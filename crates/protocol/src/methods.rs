//! The methods of protocol v9 (client -> host): one `*Params` type and one
//! `*Result` type per method, the [`ClientRequest`] union and
//! [`parse_request`].
//!
//! Params are strict: every params type denies unknown fields, so a stray
//! `feedback` on `plan/reject` is `INVALID_PARAMS` and reaches no handler.
//! Optional params fields are omitted when absent on serialization; results
//! serialize absent values as `null`. This module decodes and names; it
//! never decides whether a request is allowed (that is plan-core's job,
//! carried out by the host).

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use plan_core::ErrorCode;

use crate::error::ProtocolError;
use crate::objects::{
    ApprovalStatus, Mode, Origin, PermissionMode, PlanApproval, Session, ShellInfo, ToolCall, ToolCallResult,
};

/// The method names, exactly as on the wire.
pub mod method {
    /// `initialize`
    pub const INITIALIZE: &str = "initialize";
    /// `session/create`
    pub const SESSION_CREATE: &str = "session/create";
    /// `session/get`
    pub const SESSION_GET: &str = "session/get";
    /// `session/configure`
    pub const SESSION_CONFIGURE: &str = "session/configure";
    /// `turn/start`
    pub const TURN_START: &str = "turn/start";
    /// `turn/toolCalls`
    pub const TURN_TOOL_CALLS: &str = "turn/toolCalls";
    /// `turn/complete`
    pub const TURN_COMPLETE: &str = "turn/complete";
    /// `turn/cancel`
    pub const TURN_CANCEL: &str = "turn/cancel";
    /// `plan/approve`
    pub const PLAN_APPROVE: &str = "plan/approve";
    /// `plan/reject`
    pub const PLAN_REJECT: &str = "plan/reject";
    /// `plan/get`
    pub const PLAN_GET: &str = "plan/get";
    /// `plan/list`
    pub const PLAN_LIST: &str = "plan/list";
    /// `plan/readArtifact`
    pub const PLAN_READ_ARTIFACT: &str = "plan/readArtifact";
    /// `execution/start`
    pub const EXECUTION_START: &str = "execution/start";
    /// `execution/complete`
    pub const EXECUTION_COMPLETE: &str = "execution/complete";
    /// `shell/list`
    pub const SHELL_LIST: &str = "shell/list";
    /// `shell/setDefault`
    pub const SHELL_SET_DEFAULT: &str = "shell/setDefault";

    /// Every client method, in contract order.
    pub const ALL: [&str; 17] = [
        INITIALIZE,
        SESSION_CREATE,
        SESSION_GET,
        SESSION_CONFIGURE,
        TURN_START,
        TURN_TOOL_CALLS,
        TURN_COMPLETE,
        TURN_CANCEL,
        PLAN_APPROVE,
        PLAN_REJECT,
        PLAN_GET,
        PLAN_LIST,
        PLAN_READ_ARTIFACT,
        EXECUTION_START,
        EXECUTION_COMPLETE,
        SHELL_LIST,
        SHELL_SET_DEFAULT,
    ];
}

/// Reads a present field as `Some(value)`, where `value` may be `None` for
/// `null`; together with `#[serde(default)]` an absent field stays `None`.
/// So `Option<Option<T>>` tells absent (`None`, leave as is) from explicit
/// `null` (`Some(None)`, clear) from a value (`Some(Some(v))`).
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// Reads a field that must be present but may be `null`.
fn required_nullable<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer)
}

/// The schema of a string field that must be present but may be `null`.
///
/// schemars treats an `Option` field as optional when reading; this stand-in
/// has the same `string|null` schema but stays in `required`.
struct RequiredNullableString;

impl JsonSchema for RequiredNullableString {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("RequiredNullableString")
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <Option<String>>::json_schema(generator)
    }
}

/// `initialize` params: `{protocolVersion, clientName?}`.
///
/// `protocolVersion` is any integer here, so that a version other than 9
/// reaches the host and is answered `PROTOCOL_VERSION_UNSUPPORTED`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InitializeParams {
    /// The protocol version the client speaks; must be 9.
    pub protocol_version: i64,
    /// The client's name, for logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_name: Option<String>,
}

/// `initialize` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// Always 9.
    pub protocol_version: i64,
    /// The host's name.
    pub server_name: String,
    /// The host's version.
    pub server_version: String,
    /// The storage schema version, 10.
    pub schema_version: i64,
    /// How long an approval stays pending, in milliseconds.
    pub approval_ttl_ms: i64,
}

/// `session/create` params: `{sessionId?, workspaceRoot, mode?, permissionMode?}`.
///
/// `workspaceRoot` must be present; `null` creates a session that is not
/// project-bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionCreateParams {
    /// The id to use; the host makes one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Absolute workspace root, or `null`.
    #[serde(deserialize_with = "required_nullable")]
    #[schemars(with = "RequiredNullableString")]
    pub workspace_root: Option<String>,
    /// Initial mode; Agent when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// Initial permission mode; `ask` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<PermissionMode>,
}

/// `session/get` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionGetParams {
    /// Session id.
    pub session_id: String,
}

/// `session/configure` params: `{sessionId, mode?, permissionMode?, provider?, model?, shell?}`.
///
/// Every field but `sessionId` is optional; an absent field leaves the
/// setting as it is. `provider`, `model` and `shell` tell an explicit `null`
/// (clear it; for `shell`: back to the default shell) from an absent field.
/// `mode` and `permissionMode` cannot be cleared, so `null` there means the
/// same as absent.
///
/// In Rust the three clearable fields are `Option<Option<String>>`: `None`
/// is absent, `Some(None)` is `null`, `Some(Some(value))` is a value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionConfigureParams {
    /// Session id.
    pub session_id: String,
    /// New mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// New permission mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<PermissionMode>,
    /// New provider; `null` clears it.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider: Option<Option<String>>,
    /// New model; `null` clears it.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub model: Option<Option<String>>,
    /// New shell id; `null` selects the default shell.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub shell: Option<Option<String>>,
}

/// `turn/start` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnStartParams {
    /// Session id.
    pub session_id: String,
    /// The prompt text.
    pub prompt: String,
    /// Interactive or scheduled.
    pub origin: Origin,
}

/// `turn/start` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartResult {
    /// The new turn's id.
    pub turn_id: String,
    /// The mode it runs in.
    pub mode: Mode,
}

/// `turn/toolCalls` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnToolCallsParams {
    /// Session id.
    pub session_id: String,
    /// The turn the batch belongs to.
    pub turn_id: String,
    /// The batch, in order.
    pub calls: Vec<ToolCall>,
}

/// `turn/toolCalls` result: one entry per call, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnToolCallsResult {
    /// The decisions.
    pub results: Vec<ToolCallResult>,
}

/// `turn/complete` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnCompleteParams {
    /// Session id.
    pub session_id: String,
    /// The turn that finished.
    pub turn_id: String,
}

/// `turn/cancel` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnCancelParams {
    /// Session id.
    pub session_id: String,
}

/// `plan/approve` params: `{approvalId, permissionMode}`.
///
/// `permissionMode` is required by the contract, but an absent (or `null`)
/// one is not a decoding failure: it reaches the host as `None`, which
/// answers `PERMISSION_MODE_REQUIRED`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanApproveParams {
    /// Approval id.
    pub approval_id: String,
    /// The explicitly selected execution permission mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<PermissionMode>,
}

/// `plan/reject` params: `{approvalId}` and nothing else (no feedback, no
/// permission mode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanRejectParams {
    /// Approval id.
    pub approval_id: String,
}

/// `plan/approve` and `plan/reject` result: the decided row and the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanDecisionResult {
    /// The approval after the decision.
    pub approval: PlanApproval,
    /// The session after the decision.
    pub session: Session,
}

/// `plan/approve` result.
pub type PlanApproveResult = PlanDecisionResult;

/// `plan/reject` result.
pub type PlanRejectResult = PlanDecisionResult;

/// `plan/get` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanGetParams {
    /// Approval id.
    pub approval_id: String,
}

/// `plan/list` params: every filter optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanListParams {
    /// Only this session's approvals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Only approvals with this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ApprovalStatus>,
    /// At most this many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// `plan/list` result: newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanListResult {
    /// The approvals, newest first.
    pub approvals: Vec<PlanApproval>,
}

/// `plan/readArtifact` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanReadArtifactParams {
    /// Approval id.
    pub approval_id: String,
}

/// `plan/readArtifact` result: the verified bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanReadArtifactResult {
    /// The artifact's Markdown, exactly as written.
    pub markdown: String,
    /// Its SHA-256, 64 lowercase hex digits.
    pub sha256: String,
    /// Its byte size.
    pub size: u64,
}

/// `execution/start` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecutionStartParams {
    /// Execution id.
    pub execution_id: String,
}

/// `execution/complete` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecutionCompleteParams {
    /// Execution id.
    pub execution_id: String,
}

/// `shell/list` params: `{}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShellListParams {}

/// `shell/list` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShellListResult {
    /// The shell catalog.
    pub shells: Vec<ShellInfo>,
    /// The persisted default shell id.
    #[serde(rename = "default")]
    pub default_shell: String,
}

/// `shell/setDefault` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShellSetDefaultParams {
    /// A shell id from the catalog.
    pub shell_id: String,
}

/// `shell/setDefault` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShellSetDefaultResult {
    /// The new default shell id.
    #[serde(rename = "default")]
    pub default_shell: String,
}

/// Every client request with its typed params, tagged as
/// `{"method": ..., "params": ...}` (the JSON-RPC members without `jsonrpc`
/// and `id`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "method", content = "params")]
pub enum ClientRequest {
    /// `initialize` -> [`InitializeResult`]
    #[serde(rename = "initialize")]
    Initialize(InitializeParams),
    /// `session/create` -> [`Session`]
    #[serde(rename = "session/create")]
    SessionCreate(SessionCreateParams),
    /// `session/get` -> [`Session`]
    #[serde(rename = "session/get")]
    SessionGet(SessionGetParams),
    /// `session/configure` -> [`Session`]
    #[serde(rename = "session/configure")]
    SessionConfigure(SessionConfigureParams),
    /// `turn/start` -> [`TurnStartResult`]
    #[serde(rename = "turn/start")]
    TurnStart(TurnStartParams),
    /// `turn/toolCalls` -> [`TurnToolCallsResult`]
    #[serde(rename = "turn/toolCalls")]
    TurnToolCalls(TurnToolCallsParams),
    /// `turn/complete` -> [`Session`]
    #[serde(rename = "turn/complete")]
    TurnComplete(TurnCompleteParams),
    /// `turn/cancel` -> [`Session`]
    #[serde(rename = "turn/cancel")]
    TurnCancel(TurnCancelParams),
    /// `plan/approve` -> [`PlanApproveResult`]
    #[serde(rename = "plan/approve")]
    PlanApprove(PlanApproveParams),
    /// `plan/reject` -> [`PlanRejectResult`]
    #[serde(rename = "plan/reject")]
    PlanReject(PlanRejectParams),
    /// `plan/get` -> [`PlanApproval`]
    #[serde(rename = "plan/get")]
    PlanGet(PlanGetParams),
    /// `plan/list` -> [`PlanListResult`]
    #[serde(rename = "plan/list")]
    PlanList(PlanListParams),
    /// `plan/readArtifact` -> [`PlanReadArtifactResult`]
    #[serde(rename = "plan/readArtifact")]
    PlanReadArtifact(PlanReadArtifactParams),
    /// `execution/start` -> [`PlanApproval`]
    #[serde(rename = "execution/start")]
    ExecutionStart(ExecutionStartParams),
    /// `execution/complete` -> [`PlanApproval`]
    #[serde(rename = "execution/complete")]
    ExecutionComplete(ExecutionCompleteParams),
    /// `shell/list` -> [`ShellListResult`]
    #[serde(rename = "shell/list")]
    ShellList(ShellListParams),
    /// `shell/setDefault` -> [`ShellSetDefaultResult`]
    #[serde(rename = "shell/setDefault")]
    ShellSetDefault(ShellSetDefaultParams),
}

impl ClientRequest {
    /// The wire method name.
    pub const fn method(&self) -> &'static str {
        match self {
            ClientRequest::Initialize(_) => method::INITIALIZE,
            ClientRequest::SessionCreate(_) => method::SESSION_CREATE,
            ClientRequest::SessionGet(_) => method::SESSION_GET,
            ClientRequest::SessionConfigure(_) => method::SESSION_CONFIGURE,
            ClientRequest::TurnStart(_) => method::TURN_START,
            ClientRequest::TurnToolCalls(_) => method::TURN_TOOL_CALLS,
            ClientRequest::TurnComplete(_) => method::TURN_COMPLETE,
            ClientRequest::TurnCancel(_) => method::TURN_CANCEL,
            ClientRequest::PlanApprove(_) => method::PLAN_APPROVE,
            ClientRequest::PlanReject(_) => method::PLAN_REJECT,
            ClientRequest::PlanGet(_) => method::PLAN_GET,
            ClientRequest::PlanList(_) => method::PLAN_LIST,
            ClientRequest::PlanReadArtifact(_) => method::PLAN_READ_ARTIFACT,
            ClientRequest::ExecutionStart(_) => method::EXECUTION_START,
            ClientRequest::ExecutionComplete(_) => method::EXECUTION_COMPLETE,
            ClientRequest::ShellList(_) => method::SHELL_LIST,
            ClientRequest::ShellSetDefault(_) => method::SHELL_SET_DEFAULT,
        }
    }

    /// The params as a JSON object.
    pub fn params_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        match self {
            ClientRequest::Initialize(params) => serde_json::to_value(params),
            ClientRequest::SessionCreate(params) => serde_json::to_value(params),
            ClientRequest::SessionGet(params) => serde_json::to_value(params),
            ClientRequest::SessionConfigure(params) => serde_json::to_value(params),
            ClientRequest::TurnStart(params) => serde_json::to_value(params),
            ClientRequest::TurnToolCalls(params) => serde_json::to_value(params),
            ClientRequest::TurnComplete(params) => serde_json::to_value(params),
            ClientRequest::TurnCancel(params) => serde_json::to_value(params),
            ClientRequest::PlanApprove(params) => serde_json::to_value(params),
            ClientRequest::PlanReject(params) => serde_json::to_value(params),
            ClientRequest::PlanGet(params) => serde_json::to_value(params),
            ClientRequest::PlanList(params) => serde_json::to_value(params),
            ClientRequest::PlanReadArtifact(params) => serde_json::to_value(params),
            ClientRequest::ExecutionStart(params) => serde_json::to_value(params),
            ClientRequest::ExecutionComplete(params) => serde_json::to_value(params),
            ClientRequest::ShellList(params) => serde_json::to_value(params),
            ClientRequest::ShellSetDefault(params) => serde_json::to_value(params),
        }
    }
}

/// Decodes one params object as `P`, mapping every failure to `INVALID_PARAMS`
/// with the serde message as detail.
fn decode<P: for<'de> Deserialize<'de>>(params: serde_json::Value) -> Result<P, ProtocolError> {
    serde_json::from_value(params)
        .map_err(|error| ProtocolError::with_detail(ErrorCode::InvalidParams, error.to_string()))
}

/// Decodes a method name and its params into a typed request.
///
/// - an unknown method is `METHOD_NOT_FOUND` (with the method as detail);
/// - `null` params mean `{}` (JSON-RPC lets a request omit params);
/// - params that are not a JSON object, have a wrong type, miss a required
///   field or hold an unknown field are `INVALID_PARAMS`, with the serde
///   message as detail.
pub fn parse_request(method: &str, params: serde_json::Value) -> Result<ClientRequest, ProtocolError> {
    let params = match params {
        serde_json::Value::Null => serde_json::Value::Object(serde_json::Map::new()),
        serde_json::Value::Object(fields) => serde_json::Value::Object(fields),
        serde_json::Value::Bool(_)
        | serde_json::Value::Number(_)
        | serde_json::Value::String(_)
        | serde_json::Value::Array(_) => {
            if !method::ALL.contains(&method) {
                return Err(method_not_found(method));
            }
            return Err(ProtocolError::with_detail(
                ErrorCode::InvalidParams,
                "params must be a JSON object",
            ));
        }
    };
    let request = match method {
        method::INITIALIZE => ClientRequest::Initialize(decode(params)?),
        method::SESSION_CREATE => ClientRequest::SessionCreate(decode(params)?),
        method::SESSION_GET => ClientRequest::SessionGet(decode(params)?),
        method::SESSION_CONFIGURE => ClientRequest::SessionConfigure(decode(params)?),
        method::TURN_START => ClientRequest::TurnStart(decode(params)?),
        method::TURN_TOOL_CALLS => ClientRequest::TurnToolCalls(decode(params)?),
        method::TURN_COMPLETE => ClientRequest::TurnComplete(decode(params)?),
        method::TURN_CANCEL => ClientRequest::TurnCancel(decode(params)?),
        method::PLAN_APPROVE => ClientRequest::PlanApprove(decode(params)?),
        method::PLAN_REJECT => ClientRequest::PlanReject(decode(params)?),
        method::PLAN_GET => ClientRequest::PlanGet(decode(params)?),
        method::PLAN_LIST => ClientRequest::PlanList(decode(params)?),
        method::PLAN_READ_ARTIFACT => ClientRequest::PlanReadArtifact(decode(params)?),
        method::EXECUTION_START => ClientRequest::ExecutionStart(decode(params)?),
        method::EXECUTION_COMPLETE => ClientRequest::ExecutionComplete(decode(params)?),
        method::SHELL_LIST => ClientRequest::ShellList(decode(params)?),
        method::SHELL_SET_DEFAULT => ClientRequest::ShellSetDefault(decode(params)?),
        unknown => return Err(method_not_found(unknown)),
    };
    Ok(request)
}

fn method_not_found(method: &str) -> ProtocolError {
    ProtocolError::with_detail(ErrorCode::MethodNotFound, format!("`{method}`"))
}
