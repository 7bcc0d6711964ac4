//! The one error of the client: the host's refusal (its canonical code and
//! sentence), a host that cannot be reached or went away, or a message
//! that is not protocol v9. This module only describes failures.

use plan_core::ErrorCode;

/// Why a request did not give its result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The host answered with an error: nothing changed.
    #[error("{method}: {}: {message}", code.as_str())]
    Refused {
        /// The method refused.
        method: &'static str,
        /// The canonical code (`error.data.code`).
        code: ErrorCode,
        /// The host's sentence (`error.message`).
        message: String,
    },
    /// No host answers, or the connection ended before the answer.
    #[error("the host could not be reached: {detail}")]
    Unreachable {
        /// What happened.
        detail: String,
    },
    /// The host sent something that is not a protocol v9 message.
    #[error("the host sent a message that is not protocol v9: {detail}")]
    Malformed {
        /// What was wrong with it.
        detail: String,
    },
}

impl ClientError {
    /// The host's canonical code, for a refusal.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Refused { code, .. } => Some(*code),
            ClientError::Unreachable { .. } | ClientError::Malformed { .. } => None,
        }
    }

    /// `CODE: sentence` for a refusal, the description otherwise: what a
    /// model or a person reads.
    pub fn text(&self) -> String {
        match self {
            ClientError::Refused { code, message, .. } => format!("{}: {message}", code.as_str()),
            ClientError::Unreachable { .. } | ClientError::Malformed { .. } => self.to_string(),
        }
    }

    pub(crate) fn unreachable(detail: impl std::fmt::Display) -> ClientError {
        ClientError::Unreachable {
            detail: detail.to_string(),
        }
    }

    pub(crate) fn malformed(detail: impl std::fmt::Display) -> ClientError {
        ClientError::Malformed {
            detail: detail.to_string(),
        }
    }
}
