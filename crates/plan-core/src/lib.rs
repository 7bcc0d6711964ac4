//! plan-core: the plan checkpoint of ADR 0053 as a pure, synchronous state
//! machine.
//!
//! A session is in Agent or Plan. A Plan turn may use read-only tools and
//! submit exactly one plan; the host writes it as an immutable artifact and a
//! person approves it, with an explicit permission mode, or rejects it before
//! an absolute deadline. Approval switches the session to Agent and queues one
//! execution. A host restart interrupts pending and live work instead of
//! replaying it.
//!
//! This crate decides all of that and does nothing else: it performs no I/O,
//! reads no clock, draws no random numbers and spawns nothing. Time, boot
//! epochs and fresh ids come in as arguments; decisions go out as
//! [`Transition`] values whose [`Effect`]s the host carries out.
//!
//! Besides the per-session machine it holds the other rules every frontend
//! must agree on: what a new session may be ([`new_session`], normalized
//! workspace roots), the shell catalog rules ([`check_shell`],
//! [`default_shell`]), deadlines across sessions ([`due_approvals`],
//! [`next_deadline`]), host-run commands ([`parse_bash_input`],
//! [`sandbox_for`], [`fence_commands`]), the one tool catalog
//! ([`tool_kind`]) with the Agent permission table it feeds
//! ([`agent_permission`], and [`write_permission`] for where a
//! file-changing call writes, [`write_target`]), the startup fence, which characters
//! of agent text can take over a terminal ([`is_terminal_control`]), and what
//! a verification reports
//! ([`VerifyScope`], [`VerifyReport`]).
//!
//! The enums and records it shares with the wire and the foreign bindings
//! (the modes and statuses, [`PlanApproval`], [`Artifact`], [`CommandRun`],
//! the findings of a verification, [`PlanDiff`]) are declared once, in
//! [`for_each_core_object!`], with serde and JSON Schema derives in the
//! wire's names; plan-protocol re-exports them, storage's command audit
//! stores them as they serialize, and plan-ffi exports them from the same
//! list. The derives describe shapes only: serializing is the caller's
//! business, and this crate has no UniFFI dependency.

mod calendar;
mod call_input;
mod commands;
mod deadlines;
mod error;
mod ids;
mod machine;
mod model;
mod objects;
mod permissions;
mod protected;
mod recovery;
mod review;
mod session;
mod shells;
mod text;
mod tools;
mod writes;

pub use calendar::UtcTime;
pub use call_input::CallDigest;
pub use commands::{
    BASH, BashInput, CallFacts, CommandEntryKind, CommandFacts, CommandLaunch, CommandLimits, CommandOptions,
    CommandRequest, CwdFact, DEFAULT_SECRET_ENV_MARKERS, MAX_COMMAND_BYTES, Registration, ResourceBound,
    ResourceBounds, SandboxGrant, TurnCommand, TurnCommandStatus, WorkspaceFact, WorkspaceIdentity,
    check_resolved_cwd, check_sandbox, check_workspace_identity, command_capabilities, command_inherits_env,
    fence_commands, parse_bash_input, sandbox_for, sandbox_refusal_message,
};
pub use deadlines::{decision_time, due_approvals, is_due, next_deadline, wall_deadline};
pub use error::ErrorCode;
pub use ids::{ApprovalId, CallId, ExecutionId, SessionId, TurnId};
pub use machine::{
    ArtifactRequest, ConfigChange, Context, Effect, Event, Reply, ToolDecision, ToolResult, Transition,
    awaiting_calls, handle,
};
pub use model::{ActiveTurn, BootEpoch, LimitError, Limits, RowGuard, Session, SessionState, UnixMs};
pub use objects::{
    ApprovalFilter, ApprovalStatus, Artifact, ArtifactCheck, ArtifactContent, ArtifactVerification,
    AwaitingCall, CommandCapabilities, CommandRun, CommandShell, CommandState, ExecutionState, MissingBound,
    Mode, Origin, OrphanArtifact, PermissionMode, PlanApproval, PlanDiff, PlanSandbox, Sandbox, ShellInfo,
    SkippedWorkspace, ToolAuditEntry, ToolAuditKind, ToolCall, ToolCallDecision, ToolCallError,
    ToolCallResult, TurnKind,
};
pub use permissions::{
    AgentPermission, ConfirmationStatus, PermissionRule, ToolConfirmation, agent_permission, granted_by_mode,
    mode_grants, write_permission,
};
pub use protected::{AGENT_CONFIGURATION, CHECKPOINT_DIRECTORY, REPOSITORY_METADATA, protected_root_names};
pub use recovery::{fence_row, startup_fence};
pub use review::{VerifyReport, VerifyScope, VerifyTally};
pub use session::{SessionRefusal, new_session, normalize_workspace_root};
pub use shells::{check_shell, default_shell};
pub use text::{is_plain_line, is_terminal_control};
pub use tools::{
    SUBMIT_PLAN, SUBMIT_PLAN_QUESTION_MAX_CHARS, SUBMIT_PLAN_TITLE_MAX_CHARS, SubmitPlanInput, TOOL_CATALOG,
    ToolKind, parse_submit_plan_input, plan_tools, tool_kind,
};
pub use writes::{WRITE_PATH_FIELDS, WriteFact, WriteTarget, write_paths, write_target};
