//! Canonical error codes on the wire and the protocol-level error.
//!
//! [`CanonicalCode`] carries a `plan_core::ErrorCode` as its
//! `SCREAMING_SNAKE` string where the wire names a code outside plan-core's
//! records (a denial's `code`, `error.data.code`; the records' `errorCode`
//! fields are `ErrorCode` itself, with the same string and schema); [`ProtocolError`] is what request decoding
//! reports; [`jsonrpc_code`] maps a canonical code to the JSON-RPC number.
//! This module only names failures; it never decides that something failed.

use std::borrow::Cow;
use std::fmt;

use plan_core::ErrorCode;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A canonical error code as it travels: the exact `SCREAMING_SNAKE` string
/// of a `plan_core::ErrorCode` (for example `"PLAN_APPROVAL_TIMEOUT"`).
///
/// Deserializing a string that is not a known code fails: codes are only
/// ever added together with a new release of this crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CanonicalCode(pub ErrorCode);

impl CanonicalCode {
    /// The wire string.
    pub const fn as_str(self) -> &'static str {
        self.0.as_str()
    }

    /// The plan-core code.
    pub const fn code(self) -> ErrorCode {
        self.0
    }
}

impl From<ErrorCode> for CanonicalCode {
    fn from(code: ErrorCode) -> Self {
        CanonicalCode(code)
    }
}

impl From<CanonicalCode> for ErrorCode {
    fn from(code: CanonicalCode) -> Self {
        code.0
    }
}

impl fmt::Display for CanonicalCode {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// The code's own wire string (plan-core's `ErrorCode` serialization).
impl Serialize for CanonicalCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for CanonicalCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        ErrorCode::deserialize(deserializer).map(CanonicalCode)
    }
}

/// The same schema as a plan-core `ErrorCode` field, under the same name,
/// so the schema has one `CanonicalCode` definition.
impl JsonSchema for CanonicalCode {
    fn schema_name() -> Cow<'static, str> {
        ErrorCode::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        ErrorCode::schema_id()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        ErrorCode::json_schema(generator)
    }
}

/// The JSON-RPC `error.code` number for a canonical code.
///
/// `PARSE_ERROR` -32700, `INVALID_REQUEST` -32600, `METHOD_NOT_FOUND`
/// -32601, `INVALID_PARAMS` -32602, every other code -32000 (application
/// error).
pub const fn jsonrpc_code(code: ErrorCode) -> i64 {
    match code {
        ErrorCode::ParseError => -32700,
        ErrorCode::InvalidRequest => -32600,
        ErrorCode::MethodNotFound => -32601,
        ErrorCode::InvalidParams => -32602,
        ErrorCode::ProtocolNotInitialized
        | ErrorCode::ProtocolVersionUnsupported
        | ErrorCode::SessionNotFound
        | ErrorCode::SessionAlreadyExists
        | ErrorCode::SessionBusy
        | ErrorCode::SessionNotProjectBound
        | ErrorCode::PlanRequiresInteractiveSession
        | ErrorCode::PlanNotActive
        | ErrorCode::SubmitPlanNotAlone
        | ErrorCode::InvalidPlanInput
        | ErrorCode::ToolDeniedInPlan
        | ErrorCode::TurnNotActive
        | ErrorCode::ApprovalNotFound
        | ErrorCode::ApprovalNotPending
        | ErrorCode::PermissionModeRequired
        | ErrorCode::PlanApprovalTimeout
        | ErrorCode::ArtifactPathEscape
        | ErrorCode::ArtifactSymlink
        | ErrorCode::ArtifactWriteFailed
        | ErrorCode::ArtifactMissing
        | ErrorCode::ArtifactIntegrityMismatch
        | ErrorCode::ExecutionNotFound
        | ErrorCode::ExecutionNotActive
        | ErrorCode::ExecutionCancelled
        | ErrorCode::HostRestarted
        | ErrorCode::HostAlreadyRunning
        | ErrorCode::HostClosed
        | ErrorCode::ShellUnknown
        | ErrorCode::SchemaUnsupported
        | ErrorCode::DatabaseUnreadable
        | ErrorCode::StorageFailed
        | ErrorCode::Internal
        | ErrorCode::PlanSandboxUnavailable
        | ErrorCode::SandboxUnavailable
        | ErrorCode::InvalidCommandInput
        | ErrorCode::CommandCwdEscape
        | ErrorCode::CommandNotAllowed
        | ErrorCode::CommandNotFound
        | ErrorCode::CommandNotRunning
        | ErrorCode::ShellUnavailable
        | ErrorCode::ToolDeclined
        | ErrorCode::ToolConfirmationNotPending
        | ErrorCode::PermissionRequiresInteractiveSession
        | ErrorCode::ToolWriteProtected
        | ErrorCode::ToolRunsOutsideHost
        | ErrorCode::PlanWithdrawn => -32000,
    }
}

/// A failure found while decoding a message: a canonical code and an
/// optional detail for people (for example the serde message of bad params).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ProtocolError {
    /// The canonical code.
    pub code: ErrorCode,
    /// What exactly was wrong, if known.
    pub detail: Option<String>,
}

impl ProtocolError {
    /// An error with no detail.
    pub fn new(code: ErrorCode) -> ProtocolError {
        ProtocolError { code, detail: None }
    }

    /// An error with a detail for people.
    pub fn with_detail(code: ErrorCode, detail: impl Into<String>) -> ProtocolError {
        ProtocolError {
            code,
            detail: Some(detail.into()),
        }
    }

    /// The human message: the code's message, then `": "` and the detail if any.
    pub fn message(&self) -> String {
        match &self.detail {
            Some(detail) => self.code.message_with(detail),
            None => self.code.message(),
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}: {}", self.code.as_str(), self.message())
    }
}

impl From<ErrorCode> for ProtocolError {
    fn from(code: ErrorCode) -> Self {
        ProtocolError::new(code)
    }
}
