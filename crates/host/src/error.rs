//! The host's one error type and its one mapping to a canonical code.
//!
//! Every failure an embedder, the `serve` sidecar or the FFI sees passes
//! through [`HostError::code`]; nothing else maps errors to codes.

use plan_core::{ErrorCode, Reply};
use plan_storage::StorageError;

/// Why a host operation failed. Every fallible method's `# Errors` names
/// the canonical codes ([`HostError::code`]) it can fail with.
///
/// ```
/// use plan_host::{ErrorCode, HostError};
///
/// let error = HostError::with_detail(ErrorCode::SessionNotFound, "session s1");
/// assert_eq!(error.code(), ErrorCode::SessionNotFound);
/// assert_eq!(error.code().as_str(), "SESSION_NOT_FOUND");
/// assert!(error.message().ends_with(": session s1"));
/// assert_eq!(HostError::from(ErrorCode::HostClosed).code(), ErrorCode::HostClosed);
/// ```
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// plan-core refused the event.
    #[error("{0}")]
    Refused(ErrorCode),
    /// A refusal with a detail that helps a person (an id, a field).
    #[error("{code}: {detail}")]
    RefusedWith {
        /// The canonical code.
        code: ErrorCode,
        /// What exactly was wrong.
        detail: String,
    },
    /// Storage failed or refused.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl HostError {
    /// A refusal naming what it refers to ([`HostError`]'s example).
    pub fn with_detail(code: ErrorCode, detail: impl Into<String>) -> HostError {
        HostError::RefusedWith {
            code,
            detail: detail.into(),
        }
    }

    /// The canonical code: the single mapping from internal errors
    /// ([`HostError`]'s example).
    pub fn code(&self) -> ErrorCode {
        match self {
            HostError::Refused(code) => *code,
            HostError::RefusedWith { code, .. } => *code,
            HostError::Storage(error) => error.code(),
        }
    }

    /// A sentence for people: the code's message, then `": "` and the
    /// specifics if any (the same format as every other layer's errors;
    /// [`HostError`]'s example). A storage error's own sentence already
    /// says what its code means and names the specifics (the database,
    /// the id, the path), so it is used alone: prefixing the code's message
    /// would say the same thing twice.
    pub fn message(&self) -> String {
        match self {
            HostError::Refused(code) => code.message(),
            HostError::RefusedWith { code, detail } => code.message_with(detail),
            HostError::Storage(error) => error.to_string(),
        }
    }
}

impl From<plan_core::LimitError> for HostError {
    fn from(error: plan_core::LimitError) -> Self {
        HostError::with_detail(error.code(), error.to_string())
    }
}

/// A reply plan-core was not expected to give for the event the host sent:
/// `INTERNAL`, naming it.
pub(crate) fn unexpected(reply: &Reply) -> HostError {
    HostError::with_detail(ErrorCode::Internal, format!("unexpected reply {reply:?}"))
}

impl From<ErrorCode> for HostError {
    fn from(code: ErrorCode) -> Self {
        HostError::Refused(code)
    }
}
