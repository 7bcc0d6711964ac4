//! plan-protocol: protocol v9 of the plan checkpoint, as Rust types.
//!
//! This crate is the wire. It holds the serde types of every method's params
//! and result, every object and every notification of the protocol v9
//! contract, the JSON-RPC 2.0 envelope around them, the mapping from
//! canonical error codes to JSON-RPC errors, the JSON Schema of every message
//! and the conversions from plan-core values into the wire-only views. The
//! records plan-core declares (`PlanApproval`, `CommandRun`, the enums, ...)
//! are re-exported here as they are: plan-core declares them once, with
//! their serde and JSON Schema derives.
//!
//! Wire rules, applied everywhere:
//! - field names are camelCase, exactly as in the contract;
//! - timestamps are Unix epoch milliseconds (`i64`);
//! - in results, objects and notifications an absent optional value is
//!   serialized as `null`, never omitted;
//! - every params type has `deny_unknown_fields`, so `plan/reject` with a
//!   `feedback` or `permissionMode` field is `INVALID_PARAMS`;
//! - enums travel as their exact strings (`"accept-edits"`, `"queued"`, ...).
//!
//! What this crate must not do: it performs no I/O (no sockets, files,
//! clocks or threads), it depends on no storage, and it decides nothing about
//! the plan checkpoint. plan-core decides; the host carries out; this crate
//! only names and shapes the messages, so a Rust client can depend on it
//! alone.

mod budget;
mod convert;
mod error;
mod jsonrpc;
mod methods;
mod notifications;
mod objects;
pub mod schema;
mod web;

pub use budget::{MAX_ERROR_MESSAGE_BYTES, MessageLimits, MessageScanner, Overrun, bounded_message};
pub use error::{CanonicalCode, ProtocolError, jsonrpc_code};
pub use jsonrpc::{
    ErrorData, ErrorObject, JSONRPC_VERSION, JsonRpcVersion, Notification, Request, RequestId, Response,
    ResponseOutcome,
};
pub use methods::{
    Capabilities, Clearable, ClientRequest, CommandCancelParams, CommandGetParams, CommandRegisterParams,
    CommandRegisterResult, CommandRunParams, CommandStartParams, ExecutionCompleteParams,
    ExecutionStartParams, InitializeParams, InitializeResult, PlanApproveParams, PlanApproveResult,
    PlanCardUrlParams, PlanCardUrlResult, PlanDiffParams, PlanGetParams, PlanListResult,
    PlanReadArtifactParams, PlanRejectParams, PlanRejectResult, PlanVerifyParams, PlanVerifyResult,
    PlanWithdrawParams, PlanWithdrawResult, RequestParams, SessionConfigureParams, SessionCreateParams,
    SessionGetParams, ShellListParams, ShellSetDefaultParams, ShellSetDefaultResult, ToolConfirmParams,
    ToolConfirmResult, ToolListAwaitingParams, ToolListAwaitingResult, TurnCancelParams, TurnCompleteParams,
    TurnStartParams, TurnStartResult, TurnToolCallsParams, TurnToolCallsResult, WebCapabilities, method,
    parse_request,
};
pub use notifications::{ServerNotification, notification_method};
pub use objects::{
    ActiveTurn, CommandExitedNotification, CommandOutputNotification, ExecutionStateChangedNotification,
    OutputStream, PlanApprovalRequestedNotification, PlanApprovalResolvedNotification, PlanDecisionResult,
    Session, SessionChangedNotification, ShellListResult, VerifyReport,
};
/// The objects plan-core declares and the wire carries as they are, under
/// their wire names (`CommandSandbox` is plan-core's `Sandbox`,
/// `PlanDiffResult` its `PlanDiff`, `PlanReadArtifactResult` its
/// `ArtifactContent`).
pub use plan_core::{
    ApprovalFilter as PlanListParams, ApprovalStatus, Artifact, ArtifactCheck,
    ArtifactContent as PlanReadArtifactResult, ArtifactVerification, AwaitingCall, CommandCapabilities,
    CommandRun, CommandShell, CommandState, ExecutionState, MissingBound, Mode, Origin, OrphanArtifact,
    PermissionMode, PlanApproval, PlanDiff as PlanDiffResult, PlanSandbox, Sandbox as CommandSandbox,
    ShellInfo, SkippedWorkspace, ToolAuditEntry, ToolAuditKind, ToolCall, ToolCallDecision, ToolCallError,
    ToolCallResult, TurnKind,
};
pub use web::{
    CardArtifact, CardDecided, CardDecision, CardDecisionKind, CardPlan, CardRefusal, CardState, CardStatus,
    PendingPlanNotice, PermissionModeSummary,
};

/// The protocol version this crate speaks; `initialize` must name it.
pub const PROTOCOL_VERSION: i64 = 9;

/// The storage schema version reported by `initialize`.
pub const SCHEMA_VERSION: i64 = 10;
