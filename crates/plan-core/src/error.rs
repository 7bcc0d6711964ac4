//! The canonical error codes of the plan checkpoint.
//!
//! Every layer (storage, host, protocol, CLI, FFI) reports failures with one
//! of these codes, so a client sees the same `SCREAMING_SNAKE` string whether
//! it embeds the library, links it through FFI or speaks JSON-RPC. The codes
//! are a stable contract: a variant may be added, never renamed or removed.
//! This module only names and describes codes; it decides nothing.

/// A canonical, stable error code with a human message.
///
/// `as_str` gives the wire string; `Display` (through thiserror) gives a
/// sentence for people.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, thiserror::Error)]
pub enum ErrorCode {
    /// JSON that could not be parsed.
    #[error("the message is not valid JSON")]
    ParseError,
    /// A JSON-RPC envelope that is not a valid request.
    #[error("the message is not a valid JSON-RPC 2.0 request")]
    InvalidRequest,
    /// A method the protocol does not have.
    #[error("the method does not exist in protocol v9")]
    MethodNotFound,
    /// A request sent before `initialize`.
    #[error("the connection has not been initialized; send initialize first")]
    ProtocolNotInitialized,
    /// `initialize` named a protocol version other than 9.
    #[error("the protocol version is not supported; this host speaks protocol v9")]
    ProtocolVersionUnsupported,
    /// Parameters of the wrong shape, type or with unknown fields.
    #[error("the parameters are invalid for this method")]
    InvalidParams,
    /// No session with that id.
    #[error("no session has that id")]
    SessionNotFound,
    /// A session with that id exists already.
    #[error("a session with that id already exists")]
    SessionAlreadyExists,
    /// The session has an active turn, a pending approval or a live execution.
    #[error(
        "the session is busy: a turn is active, an approval is pending or an execution is queued or running"
    )]
    SessionBusy,
    /// The session has no workspace root, so no plan artifact can be written.
    #[error("the session is not bound to a project, so a plan cannot be submitted")]
    SessionNotProjectBound,
    /// A Plan run from a scheduled or unattended origin.
    #[error(
        "a Plan run needs an interactive session; change the scheduled task to Agent to run it unattended"
    )]
    PlanRequiresInteractiveSession,
    /// `SubmitPlan` outside an active Plan turn.
    #[error("SubmitPlan is only valid during the active Plan turn")]
    PlanNotActive,
    /// A tool-call batch that holds `SubmitPlan` and another call.
    #[error("SubmitPlan must be the only tool call in its batch; no call in the batch was allowed")]
    SubmitPlanNotAlone,
    /// `SubmitPlan` input that is not exactly `{title, markdown, question}`.
    #[error(
        "SubmitPlan input must be exactly {{title, markdown, question}}: non-empty strings, markdown within the size limit"
    )]
    InvalidPlanInput,
    /// A tool that Plan mode does not allow.
    #[error("the tool is not allowed in Plan mode")]
    ToolDeniedInPlan,
    /// The turn named in the request is not the session's active turn.
    #[error("the turn is not the session's active turn")]
    TurnNotActive,
    /// No approval with that id.
    #[error("no plan approval has that id")]
    ApprovalNotFound,
    /// The approval was decided already.
    #[error("the plan approval is no longer pending")]
    ApprovalNotPending,
    /// Approve without an explicit permission mode.
    #[error("approving a plan needs an explicit permission mode: ask, accept-edits or auto")]
    PermissionModeRequired,
    /// The approval's absolute deadline has passed.
    #[error("the plan approval expired at its deadline; submit a new plan")]
    PlanApprovalTimeout,
    /// The artifact path would leave the workspace.
    #[error("the plan artifact path escapes the workspace root")]
    ArtifactPathEscape,
    /// A symlink where the artifact path needs a real directory or file.
    #[error("the plan artifact path goes through a symbolic link")]
    ArtifactSymlink,
    /// The artifact could not be written durably.
    #[error("the plan artifact could not be written durably")]
    ArtifactWriteFailed,
    /// The artifact file is gone.
    #[error("the plan artifact file is missing")]
    ArtifactMissing,
    /// The artifact's size or SHA-256 differs from the record.
    #[error("the plan artifact's size or SHA-256 does not match the approval record")]
    ArtifactIntegrityMismatch,
    /// No execution with that id.
    #[error("no execution has that id")]
    ExecutionNotFound,
    /// The execution is not in a state that allows the request.
    #[error("the execution is not in a state that allows this request")]
    ExecutionNotActive,
    /// The execution was cancelled by the user.
    #[error("the execution was cancelled")]
    ExecutionCancelled,
    /// Work of an earlier host process, interrupted by the startup fence.
    #[error("the host restarted; work from the earlier host process was interrupted, not replayed")]
    HostRestarted,
    /// Another live host holds the database.
    #[error("another live host is already using this database")]
    HostAlreadyRunning,
    /// The host object was closed.
    #[error("the host has been closed")]
    HostClosed,
    /// A shell id the catalog does not know.
    #[error("the shell is not in the shell catalog")]
    ShellUnknown,
    /// A database schema version this build cannot open.
    #[error("the database schema version is not supported")]
    SchemaUnsupported,
    /// The database file is not SQLite or is corrupt.
    #[error("the database file is not a readable SQLite database")]
    DatabaseUnreadable,
    /// A storage operation failed.
    #[error("the storage operation failed")]
    StorageFailed,
    /// A bug: the host reached a state it should never reach.
    #[error("internal error")]
    Internal,
}

impl ErrorCode {
    /// Every code, in declaration order.
    pub const ALL: [ErrorCode; 36] = [
        ErrorCode::ParseError,
        ErrorCode::InvalidRequest,
        ErrorCode::MethodNotFound,
        ErrorCode::ProtocolNotInitialized,
        ErrorCode::ProtocolVersionUnsupported,
        ErrorCode::InvalidParams,
        ErrorCode::SessionNotFound,
        ErrorCode::SessionAlreadyExists,
        ErrorCode::SessionBusy,
        ErrorCode::SessionNotProjectBound,
        ErrorCode::PlanRequiresInteractiveSession,
        ErrorCode::PlanNotActive,
        ErrorCode::SubmitPlanNotAlone,
        ErrorCode::InvalidPlanInput,
        ErrorCode::ToolDeniedInPlan,
        ErrorCode::TurnNotActive,
        ErrorCode::ApprovalNotFound,
        ErrorCode::ApprovalNotPending,
        ErrorCode::PermissionModeRequired,
        ErrorCode::PlanApprovalTimeout,
        ErrorCode::ArtifactPathEscape,
        ErrorCode::ArtifactSymlink,
        ErrorCode::ArtifactWriteFailed,
        ErrorCode::ArtifactMissing,
        ErrorCode::ArtifactIntegrityMismatch,
        ErrorCode::ExecutionNotFound,
        ErrorCode::ExecutionNotActive,
        ErrorCode::ExecutionCancelled,
        ErrorCode::HostRestarted,
        ErrorCode::HostAlreadyRunning,
        ErrorCode::HostClosed,
        ErrorCode::ShellUnknown,
        ErrorCode::SchemaUnsupported,
        ErrorCode::DatabaseUnreadable,
        ErrorCode::StorageFailed,
        ErrorCode::Internal,
    ];

    /// The stable wire string, for example `"PLAN_APPROVAL_TIMEOUT"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ParseError => "PARSE_ERROR",
            ErrorCode::InvalidRequest => "INVALID_REQUEST",
            ErrorCode::MethodNotFound => "METHOD_NOT_FOUND",
            ErrorCode::ProtocolNotInitialized => "PROTOCOL_NOT_INITIALIZED",
            ErrorCode::ProtocolVersionUnsupported => "PROTOCOL_VERSION_UNSUPPORTED",
            ErrorCode::InvalidParams => "INVALID_PARAMS",
            ErrorCode::SessionNotFound => "SESSION_NOT_FOUND",
            ErrorCode::SessionAlreadyExists => "SESSION_ALREADY_EXISTS",
            ErrorCode::SessionBusy => "SESSION_BUSY",
            ErrorCode::SessionNotProjectBound => "SESSION_NOT_PROJECT_BOUND",
            ErrorCode::PlanRequiresInteractiveSession => "PLAN_REQUIRES_INTERACTIVE_SESSION",
            ErrorCode::PlanNotActive => "PLAN_NOT_ACTIVE",
            ErrorCode::SubmitPlanNotAlone => "SUBMIT_PLAN_NOT_ALONE",
            ErrorCode::InvalidPlanInput => "INVALID_PLAN_INPUT",
            ErrorCode::ToolDeniedInPlan => "TOOL_DENIED_IN_PLAN",
            ErrorCode::TurnNotActive => "TURN_NOT_ACTIVE",
            ErrorCode::ApprovalNotFound => "APPROVAL_NOT_FOUND",
            ErrorCode::ApprovalNotPending => "APPROVAL_NOT_PENDING",
            ErrorCode::PermissionModeRequired => "PERMISSION_MODE_REQUIRED",
            ErrorCode::PlanApprovalTimeout => "PLAN_APPROVAL_TIMEOUT",
            ErrorCode::ArtifactPathEscape => "ARTIFACT_PATH_ESCAPE",
            ErrorCode::ArtifactSymlink => "ARTIFACT_SYMLINK",
            ErrorCode::ArtifactWriteFailed => "ARTIFACT_WRITE_FAILED",
            ErrorCode::ArtifactMissing => "ARTIFACT_MISSING",
            ErrorCode::ArtifactIntegrityMismatch => "ARTIFACT_INTEGRITY_MISMATCH",
            ErrorCode::ExecutionNotFound => "EXECUTION_NOT_FOUND",
            ErrorCode::ExecutionNotActive => "EXECUTION_NOT_ACTIVE",
            ErrorCode::ExecutionCancelled => "EXECUTION_CANCELLED",
            ErrorCode::HostRestarted => "HOST_RESTARTED",
            ErrorCode::HostAlreadyRunning => "HOST_ALREADY_RUNNING",
            ErrorCode::HostClosed => "HOST_CLOSED",
            ErrorCode::ShellUnknown => "SHELL_UNKNOWN",
            ErrorCode::SchemaUnsupported => "SCHEMA_UNSUPPORTED",
            ErrorCode::DatabaseUnreadable => "DATABASE_UNREADABLE",
            ErrorCode::StorageFailed => "STORAGE_FAILED",
            ErrorCode::Internal => "INTERNAL",
        }
    }

    /// The code for a wire string, or `None` when the string is not a code.
    pub fn parse(code: &str) -> Option<ErrorCode> {
        ErrorCode::ALL
            .into_iter()
            .find(|candidate| candidate.as_str() == code)
    }

    /// The human message (the same text as `Display`).
    pub fn message(self) -> String {
        self.to_string()
    }
}
