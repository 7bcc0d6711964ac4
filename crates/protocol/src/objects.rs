//! The objects of protocol v9: wire enums, `Session`, `PlanApproval`, the
//! pieces of `turn/toolCalls` and `shell/list`, and the method results the
//! FFI exports as they are (`PlanDecisionResult`, `PlanReadArtifactResult`,
//! `ShellListResult`, `PlanDiffResult`, `VerifyReport`).
//!
//! The enums and records that foreign hosts see exactly as the wire has them
//! are declared once, in [`for_each_shared_object!`]: this module expands
//! that list into the serde and JSON Schema types, and plan-ffi expands the
//! same list into its UniFFI exports of these very types, so a field added
//! here reaches the wire, the schema and every binding at once.
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

/// Declares one item of [`for_each_shared_object!`] as a wire type: an enum
/// through `wire_enum!`, a record with the serde and JSON Schema derives.
macro_rules! declare_object {
    ($(#[$meta:meta])* enum $name:ident $(<=> $core:ident)? { $($body:tt)* }) => {
        wire_enum! {
            $(#[$meta])* $name $(<=> $core)? { $($body)* }
        }
    };
    ($(#[$meta:meta])* struct $name:ident $(as $ffi_name:ident)? { $($(#[$field_meta:meta])* $field:ident: $ty:ty),+ $(,)? }) => {
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
        $(#[$meta])*
        pub struct $name {
            $($(#[$field_meta])* pub $field: $ty),+
        }
    };
}

/// The one declaration of every object the FFI exports unchanged: wire
/// enums (`enum Name <=> PlanCoreEnum { Variant => "wire text", .. }`, the
/// plan-core twin optional) and records (`struct Name { field: Type, .. }`,
/// every field public; `struct Name as FfiName { .. }` where the bindings
/// know the record by another name, as they know `PlanDiffResult` as
/// `PlanDiff`). Each item is handed to `$callback` on its own; the
/// field types are named as this module imports them (`CanonicalCode`,
/// `Option<..>`, the other items), so a caller brings them into scope.
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_shared_object {
    ($callback:ident) => {
        $callback! {
            /// `"agent"` or `"plan"`.
            enum Mode <=> Mode {
                /// Normal work.
                Agent => "agent",
                /// Read-only planning that ends in one SubmitPlan.
                Plan => "plan",
            }
        }

        $callback! {
            /// `"ask"`, `"accept-edits"` or `"auto"`.
            enum PermissionMode <=> PermissionMode {
                /// Every edit and command asks first.
                Ask => "ask",
                /// Edits are accepted; other actions ask.
                AcceptEdits => "accept-edits",
                /// Everything runs without asking.
                Auto => "auto",
            }
        }

        $callback! {
            /// `"interactive"` or `"scheduled"`.
            enum Origin <=> Origin {
                /// A person at the host.
                Interactive => "interactive",
                /// A scheduled task or any other unattended caller.
                Scheduled => "scheduled",
            }
        }

        $callback! {
            /// `"prompt"` or `"execution"`.
            enum TurnKind <=> TurnKind {
                /// A turn started by a prompt.
                Prompt => "prompt",
                /// The Agent turn that carries out an approved plan.
                Execution => "execution",
            }
        }

        $callback! {
            /// `"pending"`, `"approved"`, `"rejected"`, `"expired"` or `"interrupted"`.
            enum ApprovalStatus <=> ApprovalStatus {
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

        $callback! {
            /// `"queued"`, `"running"`, `"completed"` or `"interrupted"`.
            enum ExecutionState <=> ExecutionState {
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

        $callback! {
            /// The decision for one tool call: `"allow"` or `"deny"`.
            enum ToolCallDecision {
                /// The call may run (in Agent turns the host's own permission layer
                /// still decides under the session's permission mode).
                Allow => "allow",
                /// The call must not run; `error` says why.
                Deny => "deny",
            }
        }

        $callback! {
            /// The stream a `command/output` chunk came from.
            enum OutputStream {
                /// Standard output.
                Stdout => "stdout",
                /// Standard error.
                Stderr => "stderr",
            }
        }

        $callback! {
            /// The confinement of a command run.
            enum CommandSandbox <=> Sandbox {
                /// Writes only in the turn's scratch directory; no network (every
                /// Plan-mode command).
                ReadOnly => "read-only",
                /// Writes also inside the workspace root (Agent `auto`).
                WorkspaceWrite => "workspace-write",
                /// No sandbox (Agent `ask` and `accept-edits`).
                None => "none",
            }
        }

        $callback! {
            /// The state of a command run.
            enum CommandState <=> CommandState {
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

        $callback! {
            /// The shell a command ran with.
            #[serde(rename_all = "camelCase")]
            struct CommandShell {
                /// The catalog id.
                id: String,
                /// The executable's path.
                path: String,
            }
        }

        $callback! {
            /// One host-run command (`CommandRun` of the commands spec).
            #[serde(rename_all = "camelCase")]
            struct CommandRun {
                /// The Bash tool call.
                call_id: String,
                /// The session.
                session_id: String,
                /// The turn the command belongs to.
                turn_id: String,
                /// The command text.
                command: String,
                /// Workspace-relative working directory (`.` for the root).
                cwd: String,
                /// The shell.
                shell: CommandShell,
                /// The confinement.
                sandbox: CommandSandbox,
                /// Whether the command had the network.
                network: bool,
                /// Its state.
                state: CommandState,
                /// The exit code, when the shell exited normally.
                exit_code: Option<i32>,
                /// The signal that ended the shell, if one did.
                signal: Option<i32>,
                /// Why it failed to start or was interrupted.
                error_code: Option<CanonicalCode>,
                /// Start time, Unix ms.
                started_at: i64,
                /// End time, Unix ms.
                ended_at: Option<i64>,
                /// Bytes written to stdout (all of them).
                stdout_bytes: u64,
                /// Bytes written to stderr (all of them).
                stderr_bytes: u64,
                /// Whether output past the retained-output cap was dropped.
                truncated: bool,
            }
        }

        $callback! {
            /// The session's active turn.
            #[serde(rename_all = "camelCase")]
            struct ActiveTurn {
                /// Turn id.
                turn_id: String,
                /// The mode the turn runs in.
                mode: Mode,
                /// Who started it.
                origin: Origin,
                /// Prompt or execution.
                kind: TurnKind,
            }
        }

        $callback! {
            /// A session as the host reports it.
            #[serde(rename_all = "camelCase")]
            struct Session {
                /// Session id.
                session_id: String,
                /// Absolute workspace root; `null` when the session is not project-bound.
                workspace_root: Option<String>,
                /// Agent or Plan.
                mode: Mode,
                /// The permission mode of Agent turns.
                permission_mode: PermissionMode,
                /// Model provider, if chosen.
                provider: Option<String>,
                /// Model, if chosen.
                model: Option<String>,
                /// Selected shell id; `null` means the default shell.
                shell: Option<String>,
                /// The one active turn, if any.
                active_turn: Option<ActiveTurn>,
                /// The pending approval's id, if any.
                pending_approval_id: Option<String>,
                /// The queued or running execution's id, if any.
                active_execution_id: Option<String>,
            }
        }

        $callback! {
            /// The host-written plan file of one submission.
            #[serde(rename_all = "camelCase")]
            struct Artifact {
                /// Workspace-relative path, `.pi/plan/<unique-name>.md`.
                path: String,
                /// SHA-256 of the exact bytes, 64 lowercase hex digits.
                sha256: String,
                /// Byte size of the exact bytes.
                size: u64,
            }
        }

        $callback! {
            /// One plan approval and, once approved, its execution.
            #[serde(rename_all = "camelCase")]
            struct PlanApproval {
                /// Approval id.
                id: String,
                /// Owning session.
                session_id: String,
                /// The Plan turn that submitted it.
                turn_id: String,
                /// SubmitPlan `title`.
                title: String,
                /// SubmitPlan `question`.
                question: String,
                /// The artifact; `null` only for rows migrated from schema v8.
                artifact: Option<Artifact>,
                /// Approval status.
                status: ApprovalStatus,
                /// Why it ended other than by a decision (timeout, restart, cancel).
                error_code: Option<CanonicalCode>,
                /// Creation time, Unix ms.
                created_at: i64,
                /// Absolute deadline, Unix ms; never moves.
                expires_at: i64,
                /// Decision, expiry or interruption time, Unix ms.
                decided_at: Option<i64>,
                /// Set only by approve.
                permission_mode: Option<PermissionMode>,
                /// Set only by approve.
                execution_id: Option<String>,
                /// `null` unless approved.
                execution_state: Option<ExecutionState>,
            }
        }

        $callback! {
            /// One shell of the host's shell catalog.
            #[serde(rename_all = "camelCase")]
            struct ShellInfo {
                /// Shell id, as used by `session/configure` and `shell/setDefault`.
                id: String,
                /// The executable's path.
                path: String,
                /// Whether the executable is present on this machine.
                available: bool,
            }
        }

        $callback! {
            /// What checking one artifact found.
            enum ArtifactCheck <=> ArtifactCheck {
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

        $callback! {
            /// One checked approval of a `VerifyReport`.
            #[serde(rename_all = "camelCase")]
            struct ArtifactVerification {
                /// The approval.
                approval_id: String,
                /// What was found.
                result: ArtifactCheck,
                /// The canonical code of a problem; `null` otherwise.
                error_code: Option<CanonicalCode>,
                /// What exactly was found; `null` when ok.
                detail: Option<String>,
            }
        }

        $callback! {
            /// A file under `<root>/.pi/plan/` that no row of that workspace records.
            #[serde(rename_all = "camelCase")]
            struct OrphanArtifact {
                /// The normalized workspace root.
                workspace_root: String,
                /// The workspace-relative path.
                path: String,
            }
        }

        $callback! {
            /// A workspace whose orphans could not be looked for.
            #[serde(rename_all = "camelCase")]
            struct SkippedWorkspace {
                /// The workspace root.
                workspace_root: String,
                /// Why it was skipped.
                detail: String,
            }
        }

        $callback! {
            /// `plan/verify` result.
            #[serde(rename_all = "camelCase")]
            struct VerifyReport {
                /// False when an artifact is missing, mismatched or unreadable, or an
                /// orphan was found.
                ok: bool,
                /// One entry per approval checked, newest first.
                artifacts: Vec<ArtifactVerification>,
                /// Files under `<root>/.pi/plan/` that no row of that workspace records.
                orphans: Vec<OrphanArtifact>,
                /// Workspaces whose orphans could not be looked for.
                skipped_workspaces: Vec<SkippedWorkspace>,
            }
        }

        $callback! {
            /// `plan/approve` and `plan/reject` result: the decided row and the session.
            #[serde(rename_all = "camelCase")]
            struct PlanDecisionResult as Decision {
                /// The approval after the decision.
                approval: PlanApproval,
                /// The session after the decision.
                session: Session,
            }
        }

        $callback! {
            /// `plan/readArtifact` result: the verified bytes.
            #[serde(rename_all = "camelCase")]
            struct PlanReadArtifactResult as ArtifactContent {
                /// The artifact's Markdown, exactly as written.
                markdown: String,
                /// Its SHA-256, 64 lowercase hex digits.
                sha256: String,
                /// Its byte size.
                size: u64,
            }
        }

        $callback! {
            /// `shell/list` result.
            #[serde(rename_all = "camelCase")]
            struct ShellListResult as ShellCatalog {
                /// The shell catalog.
                shells: Vec<ShellInfo>,
                /// The persisted default shell id.
                #[serde(rename = "default")]
                default_shell: String,
            }
        }

        $callback! {
            /// `plan/diff` result.
            #[serde(rename_all = "camelCase")]
            struct PlanDiffResult as PlanDiff {
                /// The approval compared.
                approval_id: String,
                /// What it was compared with; `null` for a session's first submission.
                against_approval_id: Option<String>,
                /// Whether the two texts are the same bytes (false with nothing to compare).
                identical: bool,
                /// The unified diff (3 lines of context); `""` when identical, `null`
                /// with nothing to compare.
                unified: Option<String>,
            }
        }
    };
}

for_each_shared_object!(declare_object);

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
