//! The methods of protocol v9 (client -> host): one `*Params` type and one
//! `*Result` type per method, each method declared once in the
//! [`for_each_client_method!`] list, from which the [`ClientRequest`] union,
//! the [`method`] names and [`parse_request`] are derived here (and the
//! serving match of plan-server and the methods of plan-ffi there); the
//! params and result records are declared once in the
//! [`for_each_method_params!`] and [`for_each_method_result!`] lists, which
//! plan-ffi exports as they are. Ids in params are plan-core's typed ids,
//! plain strings on the wire.
//!
//! Params are strict: every params type denies unknown fields, so a stray
//! `feedback` on `plan/reject` is `INVALID_PARAMS` and reaches no handler.
//! Optional params fields are omitted when absent on serialization; results
//! serialize absent values as `null`. This module decodes and names; it
//! never decides whether a request is allowed (that is plan-core's job,
//! carried out by the host).

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use plan_core::{
    ApprovalFilter, ApprovalId, CallId, ErrorCode, ExecutionId, SessionId, TurnId, declare_shared_object,
};

use crate::error::ProtocolError;
use crate::{
    AwaitingCall, CommandCapabilities, CommandRun, Mode, Origin, PermissionMode, PlanApproval,
    PlanDecisionResult, PlanDiffResult, PlanReadArtifactResult, Session, ShellListResult, ToolCall,
    ToolCallResult, VerifyReport,
};

/// Reads a present field as `Some(value)`, where `value` reads `null` too
/// (a [`Clearable`] reads it as `Clear`); together with `#[serde(default)]`
/// an absent field stays `None`. So `Option<Clearable>` tells absent
/// (`None`, leave as is) from explicit `null` (`Some(Clear)`) from a value.
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
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

/// A new value for a session setting that can be cleared: on the wire, a
/// string sets it and `null` clears it (an absent field, `None` around this,
/// leaves it as it is).
///
/// UniFFI's nested options collapse in Kotlin and Python (`String??` is
/// `String?`), so the three states are typed here instead of as
/// `Option<Option<String>>`; the JSON is the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clearable {
    /// Set the setting to this value.
    Set {
        /// The new value.
        value: String,
    },
    /// Clear the setting (for `shell`: back to the default shell).
    Clear,
}

impl Clearable {
    /// The value to set, `None` to clear: plan-core's form of a change.
    pub fn into_option(self) -> Option<String> {
        match self {
            Clearable::Set { value } => Some(value),
            Clearable::Clear => None,
        }
    }
}

impl From<Option<String>> for Clearable {
    fn from(value: Option<String>) -> Self {
        match value {
            Some(value) => Clearable::Set { value },
            None => Clearable::Clear,
        }
    }
}

impl Serialize for Clearable {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Clearable::Set { value } => serializer.serialize_str(value),
            Clearable::Clear => serializer.serialize_none(),
        }
    }
}

impl<'de> Deserialize<'de> for Clearable {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Option::<String>::deserialize(deserializer).map(Clearable::from)
    }
}

/// On the wire a clearable setting is a string or `null`.
impl JsonSchema for Clearable {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        <Option<String> as JsonSchema>::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <Option<String> as JsonSchema>::json_schema(generator)
    }
}

/// The one declaration of every client method's params record, in the
/// grammar of `plan_core::for_each_core_object!` (records only; a record may
/// have no field). Each item is handed to `$callback` on its own: this
/// module expands the list into the serde and JSON Schema types, and
/// plan-ffi into its UniFFI exports of these very types, so the records a
/// foreign host passes are the wire's. Field types are named as this module
/// imports them (plan-core's typed ids and enums, [`Clearable`], the tool
/// call), so a caller brings them into scope. Params are strict
/// (`deny_unknown_fields`) and omit absent optional fields. `plan/list`'s
/// params are not here: they are plan-core's `ApprovalFilter` (the host's
/// filter, `PlanListParams` in the schema), declared in
/// `plan_core::for_each_core_object!`.
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_method_params {
    ($callback:ident) => {
        $callback! {
            /// `initialize` params: `{protocolVersion, clientName?}`.
            ///
            /// `protocolVersion` is any integer here, so that a version other than 9
            /// reaches the host and is answered `PROTOCOL_VERSION_UNSUPPORTED`.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct InitializeParams {
                /// The protocol version the client speaks; must be 9.
                protocol_version: i64,
                /// The client's name, for logs.
                #[serde(default, skip_serializing_if = "Option::is_none")]
                client_name: Option<String>,
            }
        }

        $callback! {
            /// `command/start` params: run an Agent turn's allowed (or confirmed) Bash
            /// call on the host.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct CommandStartParams {
                /// The session.
                session_id: SessionId,
                /// The active Agent turn.
                turn_id: TurnId,
                /// The Bash call `turn/toolCalls` allowed, or `tool/confirm` confirmed.
                call_id: CallId,
                /// The command text: exactly the `command` of the call's input.
                command: String,
                /// Workspace-relative or absolute working directory inside the root:
                /// the same directory as the call's input named (absent: the root).
                #[serde(default, skip_serializing_if = "Option::is_none")]
                cwd: Option<String>,
                /// Timeout in milliseconds, 1..=the host's maximum: the same timeout as
                /// the call's input asked for (absent: the host's default).
                #[serde(default, skip_serializing_if = "Option::is_none")]
                timeout_ms: Option<u64>,
            }
        }

        $callback! {
            /// `command/register` params: hold a Bash call of the active turn for a
            /// client that names it by reference instead of carrying its text (an
            /// agent's client let out of the agent's own sandbox). In a Plan turn the
            /// call is decided as a Plan Bash call and held; in an Agent turn it must
            /// be a call the turn allowed (or a person confirmed) with this input.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct CommandRegisterParams {
                /// The session.
                session_id: SessionId,
                /// Its active turn.
                turn_id: TurnId,
                /// The Bash call.
                call_id: CallId,
                /// The command text, exactly as the call holds it.
                command: String,
                /// Workspace-relative or absolute working directory inside the root
                /// (absent: the root).
                #[serde(default, skip_serializing_if = "Option::is_none")]
                cwd: Option<String>,
                /// Timeout in milliseconds (absent: the host's default).
                #[serde(default, skip_serializing_if = "Option::is_none")]
                timeout_ms: Option<u64>,
            }
        }

        $callback! {
            /// `command/run` params: start the call registered under `reference`.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct CommandRunParams {
                /// The session.
                session_id: SessionId,
                /// What `command/register` answered.
                reference: String,
            }
        }

        $callback! {
            /// `command/cancel` params.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct CommandCancelParams {
                /// The session.
                session_id: SessionId,
                /// The Bash call.
                call_id: CallId,
            }
        }

        $callback! {
            /// `command/get` params.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct CommandGetParams {
                /// The session.
                session_id: SessionId,
                /// The Bash call.
                call_id: CallId,
            }
        }

        $callback! {
            /// `session/create` params: `{sessionId?, workspaceRoot, mode?, permissionMode?}`.
            ///
            /// `workspaceRoot` must be present; `null` creates a session that is not
            /// project-bound.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct SessionCreateParams {
                /// The id to use; the host makes one when absent.
                #[serde(default, skip_serializing_if = "Option::is_none")]
                session_id: Option<SessionId>,
                /// Absolute workspace root, or `null`.
                #[serde(deserialize_with = "required_nullable")]
                #[schemars(with = "RequiredNullableString")]
                workspace_root: Option<String>,
                /// Initial mode; Agent when absent.
                #[serde(default, skip_serializing_if = "Option::is_none")]
                mode: Option<Mode>,
                /// Initial permission mode; `ask` when absent.
                #[serde(default, skip_serializing_if = "Option::is_none")]
                permission_mode: Option<PermissionMode>,
            }
        }

        $callback! {
            /// `session/get` params.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct SessionGetParams {
                /// Session id.
                session_id: SessionId,
            }
        }

        $callback! {
            /// `session/configure` params: `{sessionId, mode?, permissionMode?, provider?, model?, shell?}`.
            ///
            /// Every field but `sessionId` is optional; an absent field leaves the
            /// setting as it is. `provider`, `model` and `shell` tell an explicit `null`
            /// (clear it; for `shell`: back to the default shell) from an absent field.
            /// `mode` and `permissionMode` cannot be cleared, so `null` there means the
            /// same as absent.
            // In Rust the three clearable fields are `Option<Clearable>`: `None`
            // is absent, `Some(Clearable::Clear)` is `null`, `Some(Clearable::Set
            // { value })` is a value.
            #[derive(Default)]
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct SessionConfigureParams {
                /// Session id.
                session_id: SessionId,
                /// New mode.
                #[serde(default, skip_serializing_if = "Option::is_none")]
                mode: Option<Mode>,
                /// New permission mode.
                #[serde(default, skip_serializing_if = "Option::is_none")]
                permission_mode: Option<PermissionMode>,
                /// New provider; `null` clears it.
                #[serde(
                    default,
                    deserialize_with = "present",
                    skip_serializing_if = "Option::is_none"
                )]
                provider: Option<Clearable>,
                /// New model; `null` clears it.
                #[serde(
                    default,
                    deserialize_with = "present",
                    skip_serializing_if = "Option::is_none"
                )]
                model: Option<Clearable>,
                /// New shell id; `null` selects the default shell.
                #[serde(
                    default,
                    deserialize_with = "present",
                    skip_serializing_if = "Option::is_none"
                )]
                shell: Option<Clearable>,
            }
        }

        $callback! {
            /// `turn/start` params.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct TurnStartParams {
                /// Session id.
                session_id: SessionId,
                /// The prompt text.
                prompt: String,
                /// Interactive or scheduled.
                origin: Origin,
                /// The mode the idle session switches to first, as
                /// `session/configure` would switch it, in the same step
                /// (absent: the session's mode).
                #[serde(default, skip_serializing_if = "Option::is_none")]
                mode: Option<Mode>,
            }
        }

        $callback! {
            /// `turn/toolCalls` params.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct TurnToolCallsParams {
                /// Session id.
                session_id: SessionId,
                /// The turn the batch belongs to.
                turn_id: TurnId,
                /// The batch, in order.
                calls: Vec<ToolCall>,
            }
        }

        $callback! {
            /// `tool/confirm` params: a person's answer to a call of the active turn
            /// that `turn/toolCalls` decided `confirm`.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct ToolConfirmParams {
                /// Session id.
                session_id: SessionId,
                /// The active turn.
                turn_id: TurnId,
                /// The call awaiting confirmation.
                call_id: CallId,
                /// Whether the person allows the call.
                allow: bool,
            }
        }

        $callback! {
            /// `tool/listAwaiting` params: the calls of active turns that wait
            /// for a person, of one session or of every open session.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct ToolListAwaitingParams {
                /// Only this session's calls (absent: every session's).
                #[serde(default, skip_serializing_if = "Option::is_none")]
                session_id: Option<SessionId>,
            }
        }

        $callback! {
            /// `turn/complete` params.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct TurnCompleteParams {
                /// Session id.
                session_id: SessionId,
                /// The turn that finished.
                turn_id: TurnId,
            }
        }

        $callback! {
            /// `turn/cancel` params.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct TurnCancelParams {
                /// Session id.
                session_id: SessionId,
            }
        }

        $callback! {
            /// `plan/approve` params: `{approvalId, permissionMode}`.
            ///
            /// `permissionMode` is required by the contract, but an absent (or `null`)
            /// one is not a decoding failure: it reaches the host as `None`, which
            /// answers `PERMISSION_MODE_REQUIRED`.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct PlanApproveParams {
                /// Approval id.
                approval_id: ApprovalId,
                /// The explicitly selected execution permission mode.
                #[serde(default, skip_serializing_if = "Option::is_none")]
                permission_mode: Option<PermissionMode>,
            }
        }

        $callback! {
            /// `plan/reject` params: `{approvalId}` and nothing else (no feedback, no
            /// permission mode).
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct PlanRejectParams {
                /// Approval id.
                approval_id: ApprovalId,
            }
        }

        $callback! {
            /// `plan/withdraw` params: `{approvalId}`. The agent that submitted
            /// a pending plan withdraws it because it ended before anyone
            /// decided.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct PlanWithdrawParams {
                /// Approval id.
                approval_id: ApprovalId,
            }
        }

        $callback! {
            /// `plan/get` params.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct PlanGetParams {
                /// Approval id.
                approval_id: ApprovalId,
            }
        }

        $callback! {
            /// `plan/readArtifact` params.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct PlanReadArtifactParams {
                /// Approval id.
                approval_id: ApprovalId,
            }
        }

        $callback! {
            /// `plan/cardUrl` params: `{approvalId}`.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct PlanCardUrlParams {
                /// A pending approval.
                approval_id: ApprovalId,
            }
        }

        $callback! {
            /// `execution/start` params.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct ExecutionStartParams {
                /// Execution id.
                execution_id: ExecutionId,
            }
        }

        $callback! {
            /// `execution/complete` params.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct ExecutionCompleteParams {
                /// Execution id.
                execution_id: ExecutionId,
            }
        }

        $callback! {
            /// `shell/list` params: `{}`.
            #[derive(Default)]
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct ShellListParams {}
        }

        $callback! {
            /// `shell/setDefault` params.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct ShellSetDefaultParams {
                /// A shell id from the catalog.
                shell_id: String,
            }
        }

        $callback! {
            /// `plan/verify` params: `{approvalId?, sessionId?}`, at most one of them;
            /// neither verifies everything.
            #[derive(Default)]
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct PlanVerifyParams {
                /// Verify this approval only (no orphan search).
                #[serde(default, skip_serializing_if = "Option::is_none")]
                approval_id: Option<ApprovalId>,
                /// Verify this session's approvals and look for orphans in its workspace.
                #[serde(default, skip_serializing_if = "Option::is_none")]
                session_id: Option<SessionId>,
            }
        }

        $callback! {
            /// `plan/diff` params.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct PlanDiffParams {
                /// The approval to compare.
                approval_id: ApprovalId,
                /// What to compare it with; the session's previous submission when absent.
                #[serde(default, skip_serializing_if = "Option::is_none")]
                against_approval_id: Option<ApprovalId>,
            }
        }
    };
}

/// The one declaration of the method results (and their parts) that only
/// this module has, in the grammar of [`for_each_method_params!`]: this
/// module expands it into the serde and JSON Schema types, plan-ffi into its
/// UniFFI exports. (The results that are plan-core's records or the wire's
/// shared objects come from those lists: `initialize`'s
/// `capabilities.commands` is plan-core's `CommandCapabilities`, the record
/// the host returns.) Field types are named as this module imports them.
/// Results serialize absent values as `null`.
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_method_result {
    ($callback:ident) => {
        $callback! {
            /// `initialize` result.
            #[serde(rename_all = "camelCase")]
            struct InitializeResult {
                /// Always 9.
                // A `const` in the schema, so that clients generated from it take the
                // version from there instead of typing it again.
                #[schemars(extend("const" = $crate::PROTOCOL_VERSION))]
                protocol_version: i64,
                /// The host's name.
                server_name: String,
                /// The host's version.
                server_version: String,
                /// The storage schema version, 10.
                schema_version: i64,
                /// How long an approval stays pending, in milliseconds.
                approval_ttl_ms: i64,
                /// What the host can do beyond the checkpoint.
                capabilities: Capabilities,
            }
        }

        $callback! {
            /// The host's capabilities, in the `initialize` result.
            #[serde(rename_all = "camelCase")]
            struct Capabilities {
                /// Host-run commands.
                commands: CommandCapabilities,
                /// The approval card's web server; `null` when it is off.
                #[serde(default)]
                web: Option<WebCapabilities>,
            }
        }

        $callback! {
            /// `capabilities.web` of `initialize`: where the approval card's server
            /// listens (`null` when it is off).
            #[serde(rename_all = "camelCase")]
            struct WebCapabilities {
                /// The server's base URL, without a token (`http://127.0.0.1:PORT/`).
                url: String,
            }
        }

        $callback! {
            /// `turn/start` result.
            #[serde(rename_all = "camelCase")]
            struct TurnStartResult {
                /// The new turn's id.
                turn_id: String,
                /// The mode it runs in.
                mode: Mode,
            }
        }

        $callback! {
            /// `turn/toolCalls` result: one entry per call, in order.
            #[serde(rename_all = "camelCase")]
            struct TurnToolCallsResult {
                /// The decisions.
                results: Vec<ToolCallResult>,
            }
        }

        $callback! {
            /// `command/register` result.
            #[serde(rename_all = "camelCase")]
            struct CommandRegisterResult {
                /// The Bash call registered.
                call_id: CallId,
                /// The host's fresh reference: `command/run` starts the call with it,
                /// in the turn it was registered in, once.
                reference: String,
            }
        }

        $callback! {
            /// `plan/list` result: newest first.
            #[serde(rename_all = "camelCase")]
            struct PlanListResult {
                /// The approvals, newest first.
                approvals: Vec<PlanApproval>,
            }
        }

        $callback! {
            /// `tool/listAwaiting` result: oldest first within a session.
            #[serde(rename_all = "camelCase")]
            struct ToolListAwaitingResult {
                /// The calls a person may confirm or decline (`tool/confirm`).
                calls: Vec<AwaitingCall>,
            }
        }

        $callback! {
            /// `plan/cardUrl` result: the card's URL, with its token.
            #[serde(rename_all = "camelCase")]
            struct PlanCardUrlResult {
                /// Open this in a browser to decide.
                url: String,
            }
        }

        $callback! {
            /// `shell/setDefault` result.
            #[serde(rename_all = "camelCase")]
            struct ShellSetDefaultResult {
                /// The new default shell id.
                #[serde(rename = "default")]
                default_shell: String,
            }
        }
    };
}

for_each_method_params!(declare_shared_object);
for_each_method_result!(declare_shared_object);

/// `tool/confirm` result: the call's new decision, `allow` (with `hostRun`
/// for Bash) or `deny` with `TOOL_DECLINED`.
pub type ToolConfirmResult = ToolCallResult;

/// `plan/approve` result.
pub type PlanApproveResult = PlanDecisionResult;

/// `plan/reject` result.
pub type PlanRejectResult = PlanDecisionResult;

/// `plan/withdraw` result: the approval, `interrupted` with
/// `PLAN_WITHDRAWN`, and the session after it.
pub type PlanWithdrawResult = PlanDecisionResult;

/// `plan/verify` result type.
pub type PlanVerifyResult = VerifyReport;

/// The one list of client methods, each as
/// `Variant, CONSTANT, snake_name => "resource/verb", ParamsType, ResultType;`
/// in contract order, handed whole to `$callback`. This module derives from
/// it (through `client_methods!`) the name constants and [`method::ALL`],
/// the method-tagged [`ClientRequest`] union, [`ClientRequest::method`],
/// [`ClientRequest::params_value`], the decoding in [`parse_request`], the
/// [`RequestParams`] link from params to result type, and the list the
/// schema files are generated from; plan-server derives its one serving
/// function per method from it, and plan-ffi one method per line (named
/// `snake_name`). Types are named as this crate exports them, so a caller
/// brings them into scope. Adding a method is one line here plus its types.
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_client_method {
    ($callback:ident) => {
        $callback! {
            Initialize, INITIALIZE, initialize => "initialize", InitializeParams, InitializeResult;
            SessionCreate, SESSION_CREATE, session_create => "session/create", SessionCreateParams, Session;
            SessionGet, SESSION_GET, session_get => "session/get", SessionGetParams, Session;
            SessionConfigure, SESSION_CONFIGURE, session_configure => "session/configure", SessionConfigureParams, Session;
            TurnStart, TURN_START, turn_start => "turn/start", TurnStartParams, TurnStartResult;
            TurnToolCalls, TURN_TOOL_CALLS, turn_tool_calls => "turn/toolCalls", TurnToolCallsParams, TurnToolCallsResult;
            ToolConfirm, TOOL_CONFIRM, tool_confirm => "tool/confirm", ToolConfirmParams, ToolConfirmResult;
            TurnComplete, TURN_COMPLETE, turn_complete => "turn/complete", TurnCompleteParams, Session;
            TurnCancel, TURN_CANCEL, turn_cancel => "turn/cancel", TurnCancelParams, Session;
            PlanApprove, PLAN_APPROVE, plan_approve => "plan/approve", PlanApproveParams, PlanApproveResult;
            PlanReject, PLAN_REJECT, plan_reject => "plan/reject", PlanRejectParams, PlanRejectResult;
            PlanWithdraw, PLAN_WITHDRAW, plan_withdraw => "plan/withdraw", PlanWithdrawParams, PlanWithdrawResult;
            PlanGet, PLAN_GET, plan_get => "plan/get", PlanGetParams, PlanApproval;
            PlanList, PLAN_LIST, plan_list => "plan/list", ApprovalFilter, PlanListResult;
            PlanReadArtifact, PLAN_READ_ARTIFACT, plan_read_artifact => "plan/readArtifact", PlanReadArtifactParams, PlanReadArtifactResult;
            PlanVerify, PLAN_VERIFY, plan_verify => "plan/verify", PlanVerifyParams, PlanVerifyResult;
            PlanDiff, PLAN_DIFF, plan_diff => "plan/diff", PlanDiffParams, PlanDiffResult;
            PlanCardUrl, PLAN_CARD_URL, plan_card_url => "plan/cardUrl", PlanCardUrlParams, PlanCardUrlResult;
            ExecutionStart, EXECUTION_START, execution_start => "execution/start", ExecutionStartParams, PlanApproval;
            ExecutionComplete, EXECUTION_COMPLETE, execution_complete => "execution/complete", ExecutionCompleteParams, PlanApproval;
            ShellList, SHELL_LIST, shell_list => "shell/list", ShellListParams, ShellListResult;
            ShellSetDefault, SHELL_SET_DEFAULT, shell_set_default => "shell/setDefault", ShellSetDefaultParams, ShellSetDefaultResult;
            CommandStart, COMMAND_START, command_start => "command/start", CommandStartParams, CommandRun;
            CommandCancel, COMMAND_CANCEL, command_cancel => "command/cancel", CommandCancelParams, CommandRun;
            CommandGet, COMMAND_GET, command_get => "command/get", CommandGetParams, CommandRun;
            CommandRegister, COMMAND_REGISTER, command_register => "command/register", CommandRegisterParams, CommandRegisterResult;
            CommandRun, COMMAND_RUN, command_run => "command/run", CommandRunParams, CommandRun;
            ToolListAwaiting, TOOL_LIST_AWAITING, tool_list_awaiting => "tool/listAwaiting", ToolListAwaitingParams, ToolListAwaitingResult;
        }
    };
}

/// Expands [`for_each_client_method!`] into this crate's derived items.
macro_rules! client_methods {
    ($($variant:ident, $constant:ident, $snake:ident => $name:literal, $params:ty, $result:ty;)+) => {
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

for_each_client_method!(client_methods);

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
