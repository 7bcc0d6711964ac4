//! The objects of protocol v9: wire enums, `Session`, `PlanApproval` and the
//! pieces of `turn/toolCalls` and `shell/list`.
//!
//! Objects are what the host sends: every optional field is serialized as
//! `null` when absent, never omitted. Objects accept unknown fields when read
//! (only params are strict). The one exception is [`ToolCall`], which is part
//! of `turn/toolCalls` params and so denies unknown fields. These types only
//! describe shapes; the conversions from plan-core live in `convert`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::CanonicalCode;

/// Declares a closed wire enum with one exact string per variant and, when it
/// mirrors a plan-core enum, exhaustive conversions both ways.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])* $name:ident <=> $core:ident {
            $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)?
        }
    ) => {
        wire_enum! {
            $(#[$meta])* $name {
                $($(#[$vmeta])* $variant => $text),+
            }
        }

        impl From<$name> for plan_core::$core {
            fn from(value: $name) -> Self {
                match value {
                    $($name::$variant => plan_core::$core::$variant),+
                }
            }
        }

        impl From<plan_core::$core> for $name {
            fn from(value: plan_core::$core) -> Self {
                match value {
                    $(plan_core::$core::$variant => $name::$variant),+
                }
            }
        }
    };
    (
        $(#[$meta:meta])* $name:ident {
            $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The exact wire string.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str(self.as_str())
            }
        }
    };
}

wire_enum! {
    /// `"agent"` or `"plan"`.
    Mode <=> Mode {
        /// Normal work.
        Agent => "agent",
        /// Read-only planning that ends in one SubmitPlan.
        Plan => "plan",
    }
}

wire_enum! {
    /// `"ask"`, `"accept-edits"` or `"auto"`.
    PermissionMode <=> PermissionMode {
        /// Every edit and command asks first.
        Ask => "ask",
        /// Edits are accepted; other actions ask.
        AcceptEdits => "accept-edits",
        /// Everything runs without asking.
        Auto => "auto",
    }
}

wire_enum! {
    /// `"interactive"` or `"scheduled"`.
    Origin <=> Origin {
        /// A person at the host.
        Interactive => "interactive",
        /// A scheduled task or any other unattended caller.
        Scheduled => "scheduled",
    }
}

wire_enum! {
    /// `"prompt"` or `"execution"`.
    TurnKind <=> TurnKind {
        /// A turn started by a prompt.
        Prompt => "prompt",
        /// The Agent turn that carries out an approved plan.
        Execution => "execution",
    }
}

wire_enum! {
    /// `"pending"`, `"approved"`, `"rejected"`, `"expired"` or `"interrupted"`.
    ApprovalStatus <=> ApprovalStatus {
        /// Waiting for a decision before the deadline.
        Pending => "pending",
        /// Approved with an explicit permission mode.
        Approved => "approved",
        /// Rejected; terminal.
        Rejected => "rejected",
        /// The deadline passed; terminal.
        Expired => "expired",
        /// The host restarted while it was pending; terminal.
        Interrupted => "interrupted",
    }
}

wire_enum! {
    /// `"queued"`, `"running"`, `"completed"` or `"interrupted"`.
    ExecutionState <=> ExecutionState {
        /// Approved, not yet started.
        Queued => "queued",
        /// The execution turn is working.
        Running => "running",
        /// Finished.
        Completed => "completed",
        /// Cancelled or cut off by a host restart; never resumed.
        Interrupted => "interrupted",
    }
}

wire_enum! {
    /// The decision for one tool call: `"allow"` or `"deny"`.
    ToolCallDecision {
        /// The call may run (in Agent turns the host's own permission layer
        /// still decides under the session's permission mode).
        Allow => "allow",
        /// The call must not run; `error` says why.
        Deny => "deny",
    }
}

wire_enum! {
    /// The stream a `command/output` chunk came from.
    OutputStream {
        /// Standard output.
        Stdout => "stdout",
        /// Standard error.
        Stderr => "stderr",
    }
}

wire_enum! {
    /// The confinement of a command run.
    CommandSandbox <=> Sandbox {
        /// Writes only in the turn's scratch directory; no network (every
        /// Plan-mode command).
        ReadOnly => "read-only",
        /// Writes also inside the workspace root (Agent `auto`).
        WorkspaceWrite => "workspace-write",
        /// No sandbox (Agent `ask` and `accept-edits`).
        None => "none",
    }
}

wire_enum! {
    /// The state of a command run.
    CommandState <=> CommandState {
        /// Spawned, not yet ended.
        Running => "running",
        /// The shell exited.
        Exited => "exited",
        /// The timeout elapsed; the process group was killed.
        TimedOut => "timedOut",
        /// Cancelled by `command/cancel` or `turn/cancel`.
        Cancelled => "cancelled",
        /// Nothing ran; `errorCode` says why.
        FailedToStart => "failedToStart",
        /// The host died while it ran; recorded by the startup fence.
        Interrupted => "interrupted",
    }
}

/// The shell a command ran with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandShell {
    /// The catalog id.
    pub id: String,
    /// The executable's path.
    pub path: String,
}

/// One host-run command (`CommandRun` of the commands spec).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandRun {
    /// The Bash tool call.
    pub call_id: String,
    /// The session.
    pub session_id: String,
    /// The turn the command belongs to.
    pub turn_id: String,
    /// The command text.
    pub command: String,
    /// Workspace-relative working directory (`.` for the root).
    pub cwd: String,
    /// The shell.
    pub shell: CommandShell,
    /// The confinement.
    pub sandbox: CommandSandbox,
    /// Whether the command had the network.
    pub network: bool,
    /// Its state.
    pub state: CommandState,
    /// The exit code, when the shell exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended the shell, if one did.
    pub signal: Option<i32>,
    /// Why it failed to start or was interrupted.
    pub error_code: Option<CanonicalCode>,
    /// Start time, Unix ms.
    pub started_at: i64,
    /// End time, Unix ms.
    pub ended_at: Option<i64>,
    /// Bytes written to stdout (all of them).
    pub stdout_bytes: u64,
    /// Bytes written to stderr (all of them).
    pub stderr_bytes: u64,
    /// Whether output past the retained-output cap was dropped.
    pub truncated: bool,
}

/// The session's active turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActiveTurn {
    /// Turn id.
    pub turn_id: String,
    /// The mode the turn runs in.
    pub mode: Mode,
    /// Who started it.
    pub origin: Origin,
    /// Prompt or execution.
    pub kind: TurnKind,
}

/// A session as the host reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// Session id.
    pub session_id: String,
    /// Absolute workspace root; `null` when the session is not project-bound.
    pub workspace_root: Option<String>,
    /// Agent or Plan.
    pub mode: Mode,
    /// The permission mode of Agent turns.
    pub permission_mode: PermissionMode,
    /// Model provider, if chosen.
    pub provider: Option<String>,
    /// Model, if chosen.
    pub model: Option<String>,
    /// Selected shell id; `null` means the default shell.
    pub shell: Option<String>,
    /// The one active turn, if any.
    pub active_turn: Option<ActiveTurn>,
    /// The pending approval's id, if any.
    pub pending_approval_id: Option<String>,
    /// The queued or running execution's id, if any.
    pub active_execution_id: Option<String>,
}

/// The host-written plan file of one submission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Workspace-relative path, `.pi/plan/<unique-name>.md`.
    pub path: String,
    /// SHA-256 of the exact bytes, 64 lowercase hex digits.
    pub sha256: String,
    /// Byte size of the exact bytes.
    pub size: u64,
}

/// One plan approval and, once approved, its execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanApproval {
    /// Approval id.
    pub id: String,
    /// Owning session.
    pub session_id: String,
    /// The Plan turn that submitted it.
    pub turn_id: String,
    /// SubmitPlan `title`.
    pub title: String,
    /// SubmitPlan `question`.
    pub question: String,
    /// The artifact; `null` only for rows migrated from schema v8.
    pub artifact: Option<Artifact>,
    /// Approval status.
    pub status: ApprovalStatus,
    /// Why it ended other than by a decision (timeout, restart, cancel).
    pub error_code: Option<CanonicalCode>,
    /// Creation time, Unix ms.
    pub created_at: i64,
    /// Absolute deadline, Unix ms; never moves.
    pub expires_at: i64,
    /// Decision, expiry or interruption time, Unix ms.
    pub decided_at: Option<i64>,
    /// Set only by approve.
    pub permission_mode: Option<PermissionMode>,
    /// Set only by approve.
    pub execution_id: Option<String>,
    /// `null` unless approved.
    pub execution_state: Option<ExecutionState>,
}

/// One assistant tool call in `turn/toolCalls` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolCall {
    /// The caller's id for the call.
    pub call_id: String,
    /// The tool name, matched exactly.
    pub name: String,
    /// The tool input, any JSON value.
    pub input: serde_json::Value,
}

/// Why one tool call was denied: `{code: "SCREAMING_SNAKE", message}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallError {
    /// The canonical code, for example `"TOOL_DENIED_IN_PLAN"`.
    pub code: CanonicalCode,
    /// A sentence for people.
    pub message: String,
}

impl ToolCallError {
    /// The error for a code, with the code's human message.
    pub fn new(code: plan_core::ErrorCode) -> ToolCallError {
        ToolCallError {
            code: CanonicalCode(code),
            message: code.message(),
        }
    }
}

impl From<plan_core::ErrorCode> for ToolCallError {
    fn from(code: plan_core::ErrorCode) -> Self {
        ToolCallError::new(code)
    }
}

/// The decision for one call of a `turn/toolCalls` batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallResult {
    /// The call.
    pub call_id: String,
    /// Allow or deny.
    pub decision: ToolCallDecision,
    /// Why it was denied; `null` when allowed.
    pub error: Option<ToolCallError>,
    /// The new pending approval of an accepted SubmitPlan; otherwise `null`.
    pub approval: Option<PlanApproval>,
    /// The command the host started for a Plan-turn Bash call; otherwise
    /// `null` (Agent turns start commands with `command/start`).
    pub command: Option<CommandRun>,
}

impl ToolCallResult {
    /// An allowed call.
    pub fn allow(call_id: impl Into<String>) -> ToolCallResult {
        ToolCallResult {
            call_id: call_id.into(),
            decision: ToolCallDecision::Allow,
            error: None,
            approval: None,
            command: None,
        }
    }

    /// A denied call with its canonical code.
    pub fn deny(call_id: impl Into<String>, code: plan_core::ErrorCode) -> ToolCallResult {
        ToolCallResult {
            call_id: call_id.into(),
            decision: ToolCallDecision::Deny,
            error: Some(ToolCallError::new(code)),
            approval: None,
            command: None,
        }
    }

    /// An accepted SubmitPlan: allowed, carrying the new pending approval.
    pub fn submitted(call_id: impl Into<String>, approval: PlanApproval) -> ToolCallResult {
        ToolCallResult {
            call_id: call_id.into(),
            decision: ToolCallDecision::Allow,
            error: None,
            approval: Some(approval),
            command: None,
        }
    }

    /// A Plan-turn Bash call the host started.
    pub fn ran(call_id: impl Into<String>, command: CommandRun) -> ToolCallResult {
        ToolCallResult {
            call_id: call_id.into(),
            decision: ToolCallDecision::Allow,
            error: None,
            approval: None,
            command: Some(command),
        }
    }
}

/// One shell of the host's shell catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShellInfo {
    /// Shell id, as used by `session/configure` and `shell/setDefault`.
    pub id: String,
    /// The executable's path.
    pub path: String,
    /// Whether the executable is present on this machine.
    pub available: bool,
}

wire_enum! {
    /// What checking one artifact found.
    ArtifactCheck <=> ArtifactCheck {
        /// Size and SHA-256 match.
        Ok => "ok",
        /// The file or its workspace is gone.
        Missing => "missing",
        /// The bytes differ from the record.
        Mismatch => "mismatch",
        /// The file could not be read safely.
        Unreadable => "unreadable",
        /// A row migrated from v8: no artifact, not a problem.
        Legacy => "legacy",
    }
}

/// One checked approval of a `VerifyReport`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactVerification {
    /// The approval.
    pub approval_id: String,
    /// What was found.
    pub result: ArtifactCheck,
    /// The canonical code of a problem; `null` otherwise.
    pub error_code: Option<CanonicalCode>,
    /// What exactly was found; `null` when ok.
    pub detail: Option<String>,
}

/// A file under `<root>/.pi/plan/` that no row of that workspace records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrphanArtifact {
    /// The normalized workspace root.
    pub workspace_root: String,
    /// The workspace-relative path.
    pub path: String,
}

/// A workspace whose orphans could not be looked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkippedWorkspace {
    /// The workspace root.
    pub workspace_root: String,
    /// Why it was skipped.
    pub detail: String,
}
