//! What a new session may be: its id and its workspace root.
//!
//! A workspace root is kept in one normalized form so that `/w`, `/w/`,
//! `/w/./` and `/x/../w` name one workspace everywhere (artifacts, listings,
//! verification). Normalization is lexical: it never looks at the
//! filesystem, so it is the same on every host and in every test.

use std::fmt;

use crate::{ErrorCode, Mode, PermissionMode, Session, SessionId};

/// Why a workspace root or a session id is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionRefusal {
    /// The session id is empty.
    EmptySessionId,
    /// The workspace root is not an absolute path.
    RootNotAbsolute(String),
    /// The workspace root contains a NUL character.
    RootContainsNul(String),
    /// A `..` in the workspace root climbs above `/`.
    RootClimbsAboveTop(String),
}

impl SessionRefusal {
    /// The canonical code: every refusal here is a bad parameter.
    pub const fn code(&self) -> ErrorCode {
        match self {
            SessionRefusal::EmptySessionId
            | SessionRefusal::RootNotAbsolute(_)
            | SessionRefusal::RootContainsNul(_)
            | SessionRefusal::RootClimbsAboveTop(_) => ErrorCode::InvalidParams,
        }
    }
}

impl fmt::Display for SessionRefusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionRefusal::EmptySessionId => formatter.write_str("sessionId must not be empty"),
            SessionRefusal::RootNotAbsolute(root) => {
                write!(formatter, "workspaceRoot must be an absolute path, got {root:?}")
            }
            SessionRefusal::RootContainsNul(root) => {
                write!(formatter, "workspaceRoot must not contain NUL, got {root:?}")
            }
            SessionRefusal::RootClimbsAboveTop(root) => {
                write!(
                    formatter,
                    "workspaceRoot has a `..` that climbs above `/`: {root:?}"
                )
            }
        }
    }
}

/// The normalized form of an absolute workspace root: one `/` between
/// components, no `.` components, each `..` removing the component before
/// it, no trailing `/` (except for `/` itself).
///
/// Refused: a relative root, a NUL anywhere, and a `..` with nothing left
/// to remove (it would name something above `/`).
pub fn normalize_workspace_root(root: &str) -> Result<String, SessionRefusal> {
    if root.contains('\0') {
        return Err(SessionRefusal::RootContainsNul(root.to_owned()));
    }
    if !root.starts_with('/') {
        return Err(SessionRefusal::RootNotAbsolute(root.to_owned()));
    }
    let mut components: Vec<&str> = Vec::new();
    for component in root.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                if components.pop().is_none() {
                    return Err(SessionRefusal::RootClimbsAboveTop(root.to_owned()));
                }
            }
            name => components.push(name),
        }
    }
    Ok(format!("/{}", components.join("/")))
}

/// A new idle session, or why it cannot exist: the id must not be empty and
/// a workspace root is stored normalized. `None` for mode or permission mode
/// takes the defaults (Agent, `ask`).
pub fn new_session(
    id: impl Into<SessionId>,
    workspace_root: Option<&str>,
    mode: Option<Mode>,
    permission_mode: Option<PermissionMode>,
) -> Result<Session, SessionRefusal> {
    let id = id.into();
    if id.as_str().is_empty() {
        return Err(SessionRefusal::EmptySessionId);
    }
    let workspace_root = workspace_root.map(normalize_workspace_root).transpose()?;
    let mut session = Session::new(id, workspace_root);
    session.mode = mode.unwrap_or_default();
    session.permission_mode = permission_mode.unwrap_or_default();
    Ok(session)
}
