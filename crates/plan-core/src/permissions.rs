//! The Agent permission table of `permissions.md`: what each permission mode
//! means for each kind of tool, and where each call that needs a person's
//! confirmation stands in its turn.
//!
//! | tool kind ([`crate::ToolKind`]) | `ask` | `accept-edits` | `auto` |
//! | --- | --- | --- | --- |
//! | read-only | allow | allow | allow |
//! | changes files, in the workspace | confirm | allow | allow |
//! | changes files, outside it or a protected name | confirm | confirm | deny `TOOL_WRITE_PROTECTED` |
//! | Bash | confirm, host-run | confirm, host-run | allow, host-run |
//! | runs a program outside the host | deny `TOOL_RUNS_OUTSIDE_HOST` | same | same |
//! | other (plugins, MCP) | confirm | confirm | allow |
//! | SubmitPlan | deny `PLAN_NOT_ACTIVE` | same | same |
//!
//! Where a file-changing call writes is placed once, from its input and the
//! session's workspace (`writes`); a write a host-run command could not make
//! (outside the workspace, or a protected name) is one a person confirms, or
//! under `auto` one nobody makes.
//!
//! A turn whose origin is not interactive cannot be confirmed: there every
//! `confirm` is `deny` with `PERMISSION_REQUIRES_INTERACTIVE_SESSION`. The
//! kinds come from the one tool catalog (`tools`), which the Plan allowlist
//! reads too. This module holds the rule only; the machine applies it to
//! turns and emits the audit entries, and no frontend restates it.

use crate::call_input::CallDigest;
use crate::objects::{Origin, PermissionMode};
use crate::tools::ToolKind;
use crate::writes::WriteTarget;
use crate::{CallId, ErrorCode};

/// What the table says about one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionRule {
    /// The call may run.
    Allow,
    /// The call may run only after a person says so (`tool/confirm`).
    Confirm,
    /// The call must not run.
    Deny(ErrorCode),
}

/// The decision for one Agent-turn call: the rule, and whether the client
/// must have the host run it (`command/start`) instead of running it itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentPermission {
    /// Allow, confirm or deny.
    pub rule: PermissionRule,
    /// `true` for Bash: only the host runs it, bounded, audited and
    /// sandboxed; a client that runs it itself is out of contract.
    pub host_run: bool,
}

impl Origin {
    /// Whether a person is there to answer a confirmation.
    pub const fn is_interactive(self) -> bool {
        match self {
            Origin::Interactive => true,
            Origin::Scheduled | Origin::Background => false,
        }
    }
}

/// The permission table, then the non-interactive rule: a `confirm` in a
/// turn of a non-interactive `origin` becomes `deny` with
/// `PERMISSION_REQUIRES_INTERACTIVE_SESSION`.
///
/// ```
/// use plan_core::{ErrorCode, Origin, PermissionMode, PermissionRule, ToolKind, agent_permission};
///
/// let edit = agent_permission(ToolKind::ChangesFiles, PermissionMode::Ask, Origin::Interactive);
/// assert_eq!(edit.rule, PermissionRule::Confirm);
/// let bash = agent_permission(ToolKind::Bash, PermissionMode::Auto, Origin::Interactive);
/// assert_eq!((bash.rule, bash.host_run), (PermissionRule::Allow, true));
/// let unattended = agent_permission(ToolKind::Bash, PermissionMode::Ask, Origin::Scheduled);
/// assert_eq!(
///     unattended.rule,
///     PermissionRule::Deny(ErrorCode::PermissionRequiresInteractiveSession)
/// );
/// ```
pub fn agent_permission(kind: ToolKind, mode: PermissionMode, origin: Origin) -> AgentPermission {
    let rule = match (kind, mode) {
        (ToolKind::ReadOnly, PermissionMode::Ask | PermissionMode::AcceptEdits | PermissionMode::Auto)
        | (ToolKind::ChangesFiles, PermissionMode::AcceptEdits | PermissionMode::Auto)
        | (ToolKind::Bash | ToolKind::Other, PermissionMode::Auto) => PermissionRule::Allow,
        (ToolKind::ChangesFiles, PermissionMode::Ask)
        | (ToolKind::Bash | ToolKind::Other, PermissionMode::Ask | PermissionMode::AcceptEdits) => {
            PermissionRule::Confirm
        }
        (ToolKind::SubmitPlan, PermissionMode::Ask | PermissionMode::AcceptEdits | PermissionMode::Auto) => {
            PermissionRule::Deny(ErrorCode::PlanNotActive)
        }
        (ToolKind::RunsProgram, PermissionMode::Ask | PermissionMode::AcceptEdits | PermissionMode::Auto) => {
            PermissionRule::Deny(ErrorCode::ToolRunsOutsideHost)
        }
    };
    AgentPermission {
        rule: attended(rule, origin),
        host_run: kind == ToolKind::Bash,
    }
}

/// The non-interactive rule: a `confirm` nobody can give is a `deny`.
fn attended(rule: PermissionRule, origin: Origin) -> PermissionRule {
    match rule {
        PermissionRule::Confirm if !origin.is_interactive() => {
            PermissionRule::Deny(ErrorCode::PermissionRequiresInteractiveSession)
        }
        PermissionRule::Confirm | PermissionRule::Allow | PermissionRule::Deny(_) => rule,
    }
}

/// The table for a file-changing call, by where it writes
/// ([`crate::write_target`]): in the workspace, the row of
/// [`ToolKind::ChangesFiles`]; outside it or at a protected name, what a
/// host-run command's write there gets: no write under `auto` (nobody is
/// asked, `TOOL_WRITE_PROTECTED`), a confirmation under `ask` and
/// `accept-edits`, where the person sees the exact path and content before
/// anything is written. Then the non-interactive rule.
///
/// ```
/// use plan_core::{ErrorCode, Origin, PermissionMode, PermissionRule, WriteTarget, write_permission};
///
/// let inside = write_permission(WriteTarget::Workspace, PermissionMode::AcceptEdits, Origin::Interactive);
/// assert_eq!(inside.rule, PermissionRule::Allow);
/// let outside = write_permission(WriteTarget::Outside, PermissionMode::AcceptEdits, Origin::Interactive);
/// assert_eq!(outside.rule, PermissionRule::Confirm);
/// let settings = write_permission(WriteTarget::Protected, PermissionMode::Auto, Origin::Interactive);
/// assert_eq!(settings.rule, PermissionRule::Deny(ErrorCode::ToolWriteProtected));
/// ```
pub fn write_permission(target: WriteTarget, mode: PermissionMode, origin: Origin) -> AgentPermission {
    let rule = match (target, mode) {
        (WriteTarget::Workspace, _) => return agent_permission(ToolKind::ChangesFiles, mode, origin),
        (
            WriteTarget::Protected | WriteTarget::Outside,
            PermissionMode::Ask | PermissionMode::AcceptEdits,
        ) => PermissionRule::Confirm,
        (WriteTarget::Protected | WriteTarget::Outside, PermissionMode::Auto) => {
            PermissionRule::Deny(ErrorCode::ToolWriteProtected)
        }
    };
    AgentPermission {
        rule: attended(rule, origin),
        host_run: false,
    }
}

/// The tool kinds an Agent turn calls, each with how a person reads it, in
/// the order the approval card lists them (SubmitPlan is denied in every
/// mode and is not a grant).
const AGENT_TOOL_KINDS: [(ToolKind, &str); 4] = [
    (ToolKind::ReadOnly, "reading and searching files"),
    (ToolKind::ChangesFiles, "changing files"),
    (ToolKind::Bash, "shell commands, run by the host in its sandbox"),
    (ToolKind::Other, "other tools (plugins, MCP)"),
];

/// What `mode` lets an interactive Agent turn do, read from the table
/// ([`agent_permission`]) for a person: the kinds of tool call that run
/// without asking, and those that ask a person first.
///
/// ```
/// use plan_core::{PermissionMode, mode_grants};
///
/// let (runs, asks) = mode_grants(PermissionMode::AcceptEdits);
/// assert_eq!(runs, ["reading and searching files", "changing files"]);
/// assert_eq!(asks.len(), 2);
/// ```
pub fn mode_grants(mode: PermissionMode) -> (Vec<&'static str>, Vec<&'static str>) {
    let mut runs = Vec::new();
    let mut asks = Vec::new();
    for (kind, label) in AGENT_TOOL_KINDS {
        match agent_permission(kind, mode, Origin::Interactive).rule {
            PermissionRule::Allow => runs.push(label),
            PermissionRule::Confirm => asks.push(label),
            PermissionRule::Deny(_) => {}
        }
    }
    (runs, asks)
}

/// Whether an `allow` for `kind` is the permission mode's grant rather than
/// a plain allow: the strictest mode (`ask`) would have asked for it. Such
/// allows are audited as auto-allowed.
pub fn granted_by_mode(kind: ToolKind) -> bool {
    agent_permission(kind, PermissionMode::Ask, Origin::Interactive).rule == PermissionRule::Confirm
}

/// Where one Agent call the permission mode decided stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfirmationStatus {
    /// Allowed by the permission mode; nobody needs to be asked.
    NotNeeded,
    /// Decided `confirm`; no person has answered yet.
    Awaiting,
    /// A person allowed it.
    Confirmed,
    /// It will not run: `TOOL_DECLINED` (a person said no) or
    /// `PERMISSION_REQUIRES_INTERACTIVE_SESSION` (nobody could be asked).
    Declined(ErrorCode),
}

/// One Agent call of the active turn that is not a plain allow (memory
/// only, like the turn; the audit entries are what lasts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolConfirmation {
    /// The tool call id.
    pub call_id: CallId,
    /// The tool name as the call gave it.
    pub tool: String,
    /// Its kind in the catalog.
    pub kind: ToolKind,
    /// What the call asks for, as decided (and, once confirmed, as a person
    /// saw it): the call id sent again with another input is refused, and a
    /// Bash call starts only with this input (tool, command, `cwd`,
    /// timeout).
    pub input: CallDigest,
    /// Where it stands.
    pub status: ConfirmationStatus,
    /// The input as the call gave it, kept while the call awaits a person
    /// so a frontend can show what a confirmation covers; dropped once it
    /// is answered.
    pub awaiting_input: Option<serde_json::Value>,
}
