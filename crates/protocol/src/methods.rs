//! The methods of protocol v9 (client -> host): one `*Params` type and one
//! `*Result` type per method, declared once in the `client_methods!` list,
//! from which the [`ClientRequest`] union, the [`method`] names and
//! [`parse_request`] are derived.
//!
//! Params are strict: every params type denies unknown fields, so a stray
//! `feedback` on `plan/reject` is `INVALID_PARAMS` and reaches no handler.
//! Optional params fields are omitted when absent on serialization; results
//! serialize absent values as `null`. This module decodes and names; it
//! never decides whether a request is allowed (that is plan-core's job,
//! carried out by the host).

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use plan_core::{CallId, ErrorCode};

use crate::error::ProtocolError;
use crate::{
    ApprovalStatus, CommandCapabilities, CommandRun, Mode, Origin, PermissionMode, PlanApproval,
    PlanDecisionResult, PlanDiffResult, PlanReadArtifactResult, Session, ShellListResult, ToolCall,
    ToolCallResult, VerifyReport,
};

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
    // A `const` in the schema, so that clients generated from it take the
    // version from there instead of typing it again.
    #[schemars(extend("const" = crate::PROTOCOL_VERSION))]
    pub protocol_version: i64,
    /// The host's name.
    pub server_name: String,
    /// The host's version.
    pub server_version: String,
    /// The storage schema version, 10.
    pub schema_version: i64,
    /// How long an approval stays pending, in milliseconds.
    pub approval_ttl_ms: i64,
    /// What the host can do beyond the checkpoint.
    pub capabilities: Capabilities,
}

/// The host's capabilities, in the `initialize` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// Host-run commands.
    pub commands: CommandCapabilities,
    /// The approval card's web server; `null` when it is off.
    #[serde(default)]
    pub web: Option<crate::WebCapabilities>,
}

/// `command/start` params: run an Agent turn's allowed (or confirmed) Bash
/// call on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandStartParams {
    /// The session.
    pub session_id: String,
    /// The active Agent turn.
    pub turn_id: String,
    /// The Bash call `turn/toolCalls` allowed, or `tool/confirm` confirmed.
    pub call_id: CallId,
    /// The command text: exactly the `command` of the call's input.
    pub command: String,
    /// Workspace-relative or absolute working directory inside the root:
    /// the same directory as the call's input named (absent: the root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Timeout in milliseconds, 1..=the host's maximum: the same timeout as
    /// the call's input asked for (absent: the host's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `command/cancel` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandCancelParams {
    /// The session.
    pub session_id: String,
    /// The Bash call.
    pub call_id: CallId,
}

/// `command/get` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandGetParams {
    /// The session.
    pub session_id: String,
    /// The Bash call.
    pub call_id: CallId,
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

/// `tool/confirm` params: a person's answer to a call of the active turn
/// that `turn/toolCalls` decided `confirm`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolConfirmParams {
    /// Session id.
    pub session_id: String,
    /// The active turn.
    pub turn_id: String,
    /// The call awaiting confirmation.
    pub call_id: CallId,
    /// Whether the person allows the call.
    pub allow: bool,
}

/// `tool/confirm` result: the call's new decision, `allow` (with `hostRun`
/// for Bash) or `deny` with `TOOL_DECLINED`.
pub type ToolConfirmResult = ToolCallResult;

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

/// `plan/verify` params: `{approvalId?, sessionId?}`, at most one of them;
/// neither verifies everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanVerifyParams {
    /// Verify this approval only (no orphan search).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// Verify this session's approvals and look for orphans in its workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// `plan/verify` result type.
pub type PlanVerifyResult = VerifyReport;

/// `plan/diff` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanDiffParams {
    /// The approval to compare.
    pub approval_id: String,
    /// What to compare it with; the session's previous submission when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against_approval_id: Option<String>,
}

/// Declares every client method once, as
/// `Variant, CONSTANT => "resource/verb", ParamsType, ResultType;`, and
/// derives from that one list the name constants and [`method::ALL`], the
/// method-tagged [`ClientRequest`] union, [`ClientRequest::method`],
/// [`ClientRequest::params_value`], the decoding in [`parse_request`], the
/// [`RequestParams`] link from params to result type, and the list the
/// schema files are generated from. Adding a method is one line here plus
/// its types.
macro_rules! client_methods {
    ($($variant:ident, $constant:ident => $name:literal, $params:ty, $result:ty;)+) => {
        /// The method names, exactly as on the wire.
        pub mod method {
            $(
                #[doc = concat!("`", $name, "`")]
                pub const $constant: &str = $name;
            )+

            /// Every client method, in contract order.
            pub const ALL: [&str; [$($name),+].len()] = [$($constant),+];
        }

        /// Every client request with its typed params, tagged as
        /// `{"method": ..., "params": ...}` (the JSON-RPC members without
        /// `jsonrpc` and `id`).
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
        #[serde(tag = "method", content = "params")]
        pub enum ClientRequest {
            $(
                #[doc = concat!("`", $name, "` -> [`", stringify!($result), "`]")]
                #[serde(rename = $name)]
                $variant($params),
            )+
        }

        impl ClientRequest {
            /// The wire method name.
            pub const fn method(&self) -> &'static str {
                match self {
                    $(ClientRequest::$variant(_) => method::$constant,)+
                }
            }

            /// The params as a JSON object.
            pub fn params_value(&self) -> Result<serde_json::Value, serde_json::Error> {
                match self {
                    $(ClientRequest::$variant(params) => serde_json::to_value(params),)+
                }
            }
        }

        $(
            impl RequestParams for $params {
                const METHOD: &'static str = $name;
                type Result = $result;
            }
        )+

        /// The request for a known method, decoded; `None` for an unknown one.
        fn decode_request(method: &str, params: serde_json::Value) -> Option<Result<ClientRequest, ProtocolError>> {
            match method {
                $($name => Some(decode(params).map(ClientRequest::$variant)),)+
                _ => None,
            }
        }

        /// Hands every method's name, params type and result type to `visitor`.
        pub(crate) fn visit_methods(visitor: &mut impl MethodVisitor) {
            $(visitor.visit::<$params, $result>($name);)+
        }
    };
}

/// The params type of a client method names the method and its result type,
/// so a typed client can send `P` and read `P::Result`.
pub trait RequestParams: Serialize {
    /// The wire method name.
    const METHOD: &'static str;
    /// What a successful response carries.
    type Result: for<'de> Deserialize<'de>;
}

/// Receives each client method's types (see `visit_methods`).
pub(crate) trait MethodVisitor {
    /// One method.
    fn visit<P: JsonSchema, R: JsonSchema>(&mut self, name: &'static str);
}

client_methods! {
    Initialize, INITIALIZE => "initialize", InitializeParams, InitializeResult;
    SessionCreate, SESSION_CREATE => "session/create", SessionCreateParams, Session;
    SessionGet, SESSION_GET => "session/get", SessionGetParams, Session;
    SessionConfigure, SESSION_CONFIGURE => "session/configure", SessionConfigureParams, Session;
    TurnStart, TURN_START => "turn/start", TurnStartParams, TurnStartResult;
    TurnToolCalls, TURN_TOOL_CALLS => "turn/toolCalls", TurnToolCallsParams, TurnToolCallsResult;
    ToolConfirm, TOOL_CONFIRM => "tool/confirm", ToolConfirmParams, ToolConfirmResult;
    TurnComplete, TURN_COMPLETE => "turn/complete", TurnCompleteParams, Session;
    TurnCancel, TURN_CANCEL => "turn/cancel", TurnCancelParams, Session;
    PlanApprove, PLAN_APPROVE => "plan/approve", PlanApproveParams, PlanApproveResult;
    PlanReject, PLAN_REJECT => "plan/reject", PlanRejectParams, PlanRejectResult;
    PlanGet, PLAN_GET => "plan/get", PlanGetParams, PlanApproval;
    PlanList, PLAN_LIST => "plan/list", PlanListParams, PlanListResult;
    PlanReadArtifact, PLAN_READ_ARTIFACT => "plan/readArtifact", PlanReadArtifactParams, PlanReadArtifactResult;
    PlanVerify, PLAN_VERIFY => "plan/verify", PlanVerifyParams, PlanVerifyResult;
    PlanDiff, PLAN_DIFF => "plan/diff", PlanDiffParams, PlanDiffResult;
    PlanCardUrl, PLAN_CARD_URL => "plan/cardUrl", crate::PlanCardUrlParams, crate::PlanCardUrlResult;
    ExecutionStart, EXECUTION_START => "execution/start", ExecutionStartParams, PlanApproval;
    ExecutionComplete, EXECUTION_COMPLETE => "execution/complete", ExecutionCompleteParams, PlanApproval;
    ShellList, SHELL_LIST => "shell/list", ShellListParams, ShellListResult;
    ShellSetDefault, SHELL_SET_DEFAULT => "shell/setDefault", ShellSetDefaultParams, ShellSetDefaultResult;
    CommandStart, COMMAND_START => "command/start", CommandStartParams, CommandRun;
    CommandCancel, COMMAND_CANCEL => "command/cancel", CommandCancelParams, CommandRun;
    CommandGet, COMMAND_GET => "command/get", CommandGetParams, CommandRun;
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
    decode_request(method, params).unwrap_or_else(|| Err(method_not_found(method)))
}

fn method_not_found(method: &str) -> ProtocolError {
    ProtocolError::with_detail(ErrorCode::MethodNotFound, format!("`{method}`"))
}
