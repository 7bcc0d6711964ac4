//! The records and enums foreign hosts see. They mirror the protocol v9
//! objects field for field (in each language's naming style) and are built
//! from the wire types, so the FFI and `serve` can never describe the same
//! approval differently.

use plan_protocol as wire;

/// Declares the FFI's typed canonical codes from plan-core's one list, so
/// a code added there is exported here (and to every binding) by itself.
macro_rules! declare_ffi_error_code {
    ($($(#[$doc:meta])* $variant:ident => $wire:literal, $message:literal;)+) => {
        /// A canonical error code (the wire's `SCREAMING_SNAKE` string is
        /// `error_code_wire_name`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
        pub enum ErrorCode {
            $($(#[$doc])* $variant,)+
        }

        impl From<plan_core::ErrorCode> for ErrorCode {
            fn from(code: plan_core::ErrorCode) -> Self {
                match code {
                    $(plan_core::ErrorCode::$variant => ErrorCode::$variant,)+
                }
            }
        }

        impl From<ErrorCode> for plan_core::ErrorCode {
            fn from(code: ErrorCode) -> Self {
                match code {
                    $(ErrorCode::$variant => plan_core::ErrorCode::$variant,)+
                }
            }
        }
    };
}

plan_core::for_each_error_code!(declare_ffi_error_code);

/// Agent or Plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum Mode {
    /// Normal work.
    Agent,
    /// Read-only planning.
    Plan,
}

/// The execution permission mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum PermissionMode {
    /// `ask`
    Ask,
    /// `accept-edits`
    AcceptEdits,
    /// `auto`
    Auto,
}

/// Who started a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum Origin {
    /// A person.
    Interactive,
    /// A scheduled task.
    Scheduled,
}

/// What a turn is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum TurnKind {
    /// A prompt turn.
    Prompt,
    /// The execution of an approved plan.
    Execution,
}

/// An approval's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum ApprovalStatus {
    /// Waiting for a decision.
    Pending,
    /// Approved.
    Approved,
    /// Rejected.
    Rejected,
    /// Deadline passed.
    Expired,
    /// Cut off by a host restart.
    Interrupted,
}

/// An approved plan's execution state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum ExecutionState {
    /// Waiting to start.
    Queued,
    /// Working.
    Running,
    /// Done.
    Completed,
    /// Cancelled or cut off by a restart.
    Interrupted,
}

/// Allow or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum ToolCallDecision {
    /// The call may run.
    Allow,
    /// The call is refused.
    Deny,
}

/// A session's active turn.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ActiveTurn {
    /// Turn id.
    pub turn_id: String,
    /// Mode the turn runs in.
    pub mode: Mode,
    /// Who started it.
    pub origin: Origin,
    /// Prompt or execution.
    pub kind: TurnKind,
}

/// A session.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Session {
    /// Session id.
    pub session_id: String,
    /// Absolute workspace root, if project-bound.
    pub workspace_root: Option<String>,
    /// Agent or Plan.
    pub mode: Mode,
    /// Permission mode.
    pub permission_mode: PermissionMode,
    /// Provider.
    pub provider: Option<String>,
    /// Model.
    pub model: Option<String>,
    /// Selected shell id (`None`: the default shell).
    pub shell: Option<String>,
    /// The active turn.
    pub active_turn: Option<ActiveTurn>,
    /// The pending approval's id.
    pub pending_approval_id: Option<String>,
    /// The queued or running execution's id.
    pub active_execution_id: Option<String>,
}

/// An artifact's location and fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Artifact {
    /// Workspace-relative path.
    pub path: String,
    /// SHA-256, lowercase hex.
    pub sha256: String,
    /// Byte size.
    pub size: u64,
}

/// One plan approval and its execution.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct PlanApproval {
    /// Approval id.
    pub id: String,
    /// Session id.
    pub session_id: String,
    /// The Plan turn that submitted it.
    pub turn_id: String,
    /// SubmitPlan title.
    pub title: String,
    /// SubmitPlan question.
    pub question: String,
    /// The artifact (`None` only for rows migrated from schema v8).
    pub artifact: Option<Artifact>,
    /// Status.
    pub status: ApprovalStatus,
    /// `PLAN_APPROVAL_TIMEOUT`, `HOST_RESTARTED`, `EXECUTION_CANCELLED` or `None`.
    pub error_code: Option<ErrorCode>,
    /// Creation time, Unix ms.
    pub created_at: i64,
    /// Absolute deadline, Unix ms.
    pub expires_at: i64,
    /// Decision time, Unix ms.
    pub decided_at: Option<i64>,
    /// Permission mode chosen by Approve.
    pub permission_mode: Option<PermissionMode>,
    /// Execution id, once approved.
    pub execution_id: Option<String>,
    /// Execution state, once approved.
    pub execution_state: Option<ExecutionState>,
}

/// One assistant tool call.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ToolCall {
    /// The caller's id for the call.
    pub call_id: String,
    /// Tool name.
    pub name: String,
    /// The input as JSON text.
    pub input_json: String,
}

/// The decision for one tool call.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ToolCallResult {
    /// The call.
    pub call_id: String,
    /// Allow or deny.
    pub decision: ToolCallDecision,
    /// The canonical code of a denial.
    pub error_code: Option<ErrorCode>,
    /// The human message of a denial.
    pub error_message: Option<String>,
    /// The pending approval an accepted SubmitPlan created.
    pub approval: Option<PlanApproval>,
    /// The command the host started for a Plan-turn Bash call.
    pub command: Option<CommandRun>,
}

/// The confinement of a command run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum CommandSandbox {
    /// Writes only in the turn's scratch directory, no network (every Plan command).
    ReadOnly,
    /// Writes also inside the workspace root (Agent `auto`).
    WorkspaceWrite,
    /// No sandbox (Agent `ask` and `accept-edits`).
    None,
}

/// The state of a command run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum CommandState {
    /// Spawned, not yet ended.
    Running,
    /// The shell exited.
    Exited,
    /// The timeout elapsed.
    TimedOut,
    /// Cancelled.
    Cancelled,
    /// Nothing ran; `error_code` says why.
    FailedToStart,
    /// The host died while it ran.
    Interrupted,
}

/// The stream of a `command/output` chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// One host-run command (the protocol's `CommandRun`).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct CommandRun {
    /// The Bash call.
    pub call_id: String,
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    /// The command text.
    pub command: String,
    /// Workspace-relative working directory.
    pub cwd: String,
    /// The shell's catalog id.
    pub shell_id: String,
    /// The shell's path.
    pub shell_path: String,
    /// The confinement.
    pub sandbox: CommandSandbox,
    /// Whether it had the network.
    pub network: bool,
    /// Its state.
    pub state: CommandState,
    /// The exit code.
    pub exit_code: Option<i32>,
    /// The ending signal.
    pub signal: Option<i32>,
    /// Why it failed to start or was interrupted.
    pub error_code: Option<ErrorCode>,
    /// Start, Unix ms.
    pub started_at: i64,
    /// End, Unix ms.
    pub ended_at: Option<i64>,
    /// Bytes of stdout.
    pub stdout_bytes: u64,
    /// Bytes of stderr.
    pub stderr_bytes: u64,
    /// Whether output past the cap was dropped.
    pub truncated: bool,
}

/// One host notification, typed: each variant carries exactly the params of
/// its protocol v9 notification, so a listener reads the same fields a
/// `serve` client reads from the wire.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum PlanEvent {
    /// `plan/approvalRequested`: a SubmitPlan was accepted and awaits a
    /// decision.
    ApprovalRequested {
        /// The new pending approval.
        approval: PlanApproval,
    },
    /// `plan/approvalResolved`: an approval was approved, rejected, expired
    /// (by the host's timer or at a late decision) or interrupted; the
    /// approval's status and error code say which.
    ApprovalResolved {
        /// The approval after the change.
        approval: PlanApproval,
    },
    /// `execution/stateChanged`: an approved plan's execution moved to a new
    /// state.
    ExecutionStateChanged {
        /// The owning session.
        session_id: String,
        /// The execution.
        execution_id: String,
        /// Its new state.
        state: ExecutionState,
    },
    /// `session/changed`: a session's configuration or activity changed.
    SessionChanged {
        /// The session after the change.
        session: Session,
    },
    /// `command/output`: one chunk of a host-run command's output, in `seq`
    /// order per call.
    CommandOutput {
        /// The session.
        session_id: String,
        /// The Bash call.
        call_id: String,
        /// stdout or stderr.
        stream: OutputStream,
        /// From 0 per call, across both streams.
        seq: u64,
        /// The text (never a split UTF-8 character).
        chunk: String,
    },
    /// `command/exited`: a host-run command ended; always the last event of
    /// its call.
    CommandExited {
        /// The session.
        session_id: String,
        /// The Bash call.
        call_id: String,
        /// The run as it ended.
        command: CommandRun,
    },
}

/// Whether Plan-mode Bash can run on this host (probed once at open).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct SandboxInfo {
    /// `true` when the kernel's read-only sandbox works here.
    pub plan_sandbox_available: bool,
    /// Why not, when it does not.
    pub reason: Option<String>,
}

/// A configuration change; `None` leaves a field as it is, and a `clear_*`
/// flag sets that field back to none (the shell back to the default shell).
/// Setting and clearing the same field at once is `INVALID_PARAMS`.
#[derive(Debug, Clone, Default, PartialEq, Eq, uniffi::Record)]
pub struct SessionConfig {
    /// New mode.
    #[uniffi(default = None)]
    pub mode: Option<Mode>,
    /// New permission mode.
    #[uniffi(default = None)]
    pub permission_mode: Option<PermissionMode>,
    /// New provider.
    #[uniffi(default = None)]
    pub provider: Option<String>,
    /// New model.
    #[uniffi(default = None)]
    pub model: Option<String>,
    /// New shell id.
    #[uniffi(default = None)]
    pub shell: Option<String>,
    /// Remove the provider.
    #[uniffi(default = false)]
    pub clear_provider: bool,
    /// Remove the model.
    #[uniffi(default = false)]
    pub clear_model: bool,
    /// Return to the default shell.
    #[uniffi(default = false)]
    pub clear_shell: bool,
}

/// The result of approve and reject.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Decision {
    /// The decided approval.
    pub approval: PlanApproval,
    /// The session afterwards.
    pub session: Session,
}

/// Verified artifact content.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ArtifactContent {
    /// The exact Markdown.
    pub markdown: String,
    /// SHA-256, lowercase hex.
    pub sha256: String,
    /// Byte size.
    pub size: u64,
}

/// One shell.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ShellInfo {
    /// Shell id.
    pub id: String,
    /// Executable path.
    pub path: String,
    /// Whether it is installed.
    pub available: bool,
}

/// The shell catalog and the default.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ShellCatalog {
    /// The shells.
    pub shells: Vec<ShellInfo>,
    /// The default shell id.
    pub default_shell: String,
}

/// What checking one artifact found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum ArtifactCheck {
    /// Size and SHA-256 match.
    Ok,
    /// The file or its workspace is gone.
    Missing,
    /// The bytes differ from the record.
    Mismatch,
    /// The file could not be read safely.
    Unreadable,
    /// A row migrated from v8: no artifact, not a problem.
    Legacy,
}

/// One checked approval.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ArtifactVerification {
    /// The approval.
    pub approval_id: String,
    /// What was found.
    pub result: ArtifactCheck,
    /// The canonical code of a problem.
    pub error_code: Option<ErrorCode>,
    /// What exactly was found.
    pub detail: Option<String>,
}

/// A file under `<root>/.pi/plan/` no row of that workspace records.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct OrphanArtifact {
    /// The normalized workspace root.
    pub workspace_root: String,
    /// The workspace-relative path.
    pub path: String,
}

/// A workspace whose orphans could not be looked for.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct SkippedWorkspace {
    /// The workspace root.
    pub workspace_root: String,
    /// Why.
    pub detail: String,
}

/// The result of `verify` (protocol `VerifyReport`).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct VerifyReport {
    /// False when an artifact is missing, mismatched or unreadable, or an orphan was found.
    pub ok: bool,
    /// One entry per approval checked.
    pub artifacts: Vec<ArtifactVerification>,
    /// Orphan files.
    pub orphans: Vec<OrphanArtifact>,
    /// Workspaces skipped in the orphan search.
    pub skipped_workspaces: Vec<SkippedWorkspace>,
}

/// The result of `diff` (protocol `plan/diff`).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct PlanDiff {
    /// The approval compared.
    pub approval_id: String,
    /// What it was compared with; `None` for a session's first submission.
    pub against_approval_id: Option<String>,
    /// Whether the two texts are the same bytes.
    pub identical: bool,
    /// The unified diff; empty when identical, `None` with nothing to compare.
    pub unified: Option<String>,
}

/// Filters for `list_approvals`; all optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, uniffi::Record)]
pub struct ApprovalQuery {
    /// Only this session.
    #[uniffi(default = None)]
    pub session_id: Option<String>,
    /// Only this status.
    #[uniffi(default = None)]
    pub status: Option<ApprovalStatus>,
    /// At most this many.
    #[uniffi(default = None)]
    pub limit: Option<u32>,
}

/// Host settings; `None` takes the default (30 minutes, 8 MiB; commands: the
/// helper next to the executable or on `PATH`, 120 s default and 600 s
/// maximum timeout, 1 MiB output cap, 4 running per session, no network
/// for Agent `auto`).
#[derive(Debug, Clone, Default, PartialEq, Eq, uniffi::Record)]
pub struct PlanHostOptions {
    /// Approval TTL in milliseconds: 1 to 604800000 (seven days); 30
    /// minutes when absent. Anything else is `INVALID_PARAMS`.
    #[uniffi(default = None)]
    pub approval_ttl_ms: Option<i64>,
    /// Largest SubmitPlan markdown in bytes: 1 to 67108864 (64 MiB); 8 MiB
    /// when absent.
    #[uniffi(default = None)]
    pub markdown_limit_bytes: Option<u64>,
    /// The command sandbox helper (`plan-exec-sandbox`) an app ships, for
    /// example in its bundle or its native library directory.
    #[uniffi(default = None)]
    pub sandbox_helper: Option<String>,
    /// Where per-turn scratch directories go (default: `<db>.scratch`).
    #[uniffi(default = None)]
    pub scratch_root: Option<String>,
    /// Default command timeout in milliseconds.
    #[uniffi(default = None)]
    pub command_timeout_ms: Option<u64>,
    /// Largest command timeout in milliseconds.
    #[uniffi(default = None)]
    pub command_max_timeout_ms: Option<u64>,
    /// Retained output per command, in bytes.
    #[uniffi(default = None)]
    pub command_output_cap: Option<u64>,
    /// Running commands per session.
    #[uniffi(default = None)]
    pub max_running_commands: Option<u32>,
    /// Whether Agent `auto` commands may use the network.
    #[uniffi(default = None)]
    pub network_in_auto: Option<bool>,
    /// Where the kernel sandbox is unavailable, whether Agent `auto`
    /// commands run unconfined instead of failing with `SANDBOX_UNAVAILABLE`
    /// (Plan commands never do).
    #[uniffi(default = None)]
    pub auto_without_sandbox: Option<bool>,
    /// Whether the sandbox skips its namespaces even where the kernel allows
    /// them (as a kernel without them would): Plan Bash still runs, the
    /// database and terminals are no longer hidden from it, and Agent `auto`
    /// fails with `SANDBOX_UNAVAILABLE` unless `auto_without_sandbox`.
    #[uniffi(default = None)]
    pub skip_namespaces: Option<bool>,
}

macro_rules! map_enum {
    ($from:ty => $to:ty { $($variant:ident),+ $(,)? }) => {
        impl From<$from> for $to {
            fn from(value: $from) -> Self {
                match value {
                    $(<$from>::$variant => <$to>::$variant),+
                }
            }
        }
        impl From<$to> for $from {
            fn from(value: $to) -> Self {
                match value {
                    $(<$to>::$variant => <$from>::$variant),+
                }
            }
        }
    };
}

map_enum!(wire::Mode => Mode { Agent, Plan });
map_enum!(wire::PermissionMode => PermissionMode { Ask, AcceptEdits, Auto });
map_enum!(wire::Origin => Origin { Interactive, Scheduled });
map_enum!(wire::TurnKind => TurnKind { Prompt, Execution });
map_enum!(wire::ApprovalStatus => ApprovalStatus { Pending, Approved, Rejected, Expired, Interrupted });
map_enum!(wire::ExecutionState => ExecutionState { Queued, Running, Completed, Interrupted });
map_enum!(wire::ToolCallDecision => ToolCallDecision { Allow, Deny });
map_enum!(wire::ArtifactCheck => ArtifactCheck { Ok, Missing, Mismatch, Unreadable, Legacy });
map_enum!(wire::CommandSandbox => CommandSandbox { ReadOnly, WorkspaceWrite, None });
map_enum!(wire::CommandState => CommandState { Running, Exited, TimedOut, Cancelled, FailedToStart, Interrupted });
map_enum!(wire::OutputStream => OutputStream { Stdout, Stderr });
map_enum!(plan_core::Mode => Mode { Agent, Plan });
map_enum!(plan_core::PermissionMode => PermissionMode { Ask, AcceptEdits, Auto });
map_enum!(plan_core::Origin => Origin { Interactive, Scheduled });
map_enum!(plan_core::ApprovalStatus => ApprovalStatus { Pending, Approved, Rejected, Expired, Interrupted });

impl From<wire::ActiveTurn> for ActiveTurn {
    fn from(turn: wire::ActiveTurn) -> Self {
        ActiveTurn {
            turn_id: turn.turn_id,
            mode: turn.mode.into(),
            origin: turn.origin.into(),
            kind: turn.kind.into(),
        }
    }
}

impl From<wire::Session> for Session {
    fn from(session: wire::Session) -> Self {
        Session {
            session_id: session.session_id,
            workspace_root: session.workspace_root,
            mode: session.mode.into(),
            permission_mode: session.permission_mode.into(),
            provider: session.provider,
            model: session.model,
            shell: session.shell,
            active_turn: session.active_turn.map(Into::into),
            pending_approval_id: session.pending_approval_id,
            active_execution_id: session.active_execution_id,
        }
    }
}

impl From<wire::PlanApproval> for PlanApproval {
    fn from(approval: wire::PlanApproval) -> Self {
        PlanApproval {
            id: approval.id,
            session_id: approval.session_id,
            turn_id: approval.turn_id,
            title: approval.title,
            question: approval.question,
            artifact: approval.artifact.map(|artifact| Artifact {
                path: artifact.path,
                sha256: artifact.sha256,
                size: artifact.size,
            }),
            status: approval.status.into(),
            error_code: approval.error_code.map(|code| code.0.into()),
            created_at: approval.created_at,
            expires_at: approval.expires_at,
            decided_at: approval.decided_at,
            permission_mode: approval.permission_mode.map(Into::into),
            execution_id: approval.execution_id,
            execution_state: approval.execution_state.map(Into::into),
        }
    }
}

impl From<wire::ToolCallResult> for ToolCallResult {
    fn from(result: wire::ToolCallResult) -> Self {
        ToolCallResult {
            call_id: result.call_id,
            decision: result.decision.into(),
            error_code: result.error.as_ref().map(|error| error.code.0.into()),
            error_message: result.error.map(|error| error.message),
            approval: result.approval.map(Into::into),
            command: result.command.map(Into::into),
        }
    }
}

impl From<wire::CommandRun> for CommandRun {
    fn from(run: wire::CommandRun) -> Self {
        CommandRun {
            call_id: run.call_id,
            session_id: run.session_id,
            turn_id: run.turn_id,
            command: run.command,
            cwd: run.cwd,
            shell_id: run.shell.id,
            shell_path: run.shell.path,
            sandbox: run.sandbox.into(),
            network: run.network,
            state: run.state.into(),
            exit_code: run.exit_code,
            signal: run.signal,
            error_code: run.error_code.map(|code| code.0.into()),
            started_at: run.started_at,
            ended_at: run.ended_at,
            stdout_bytes: run.stdout_bytes,
            stderr_bytes: run.stderr_bytes,
            truncated: run.truncated,
        }
    }
}

impl From<&plan_core::CommandRun> for CommandRun {
    fn from(run: &plan_core::CommandRun) -> Self {
        CommandRun::from(wire::CommandRun::from(run))
    }
}

impl From<wire::ServerNotification> for PlanEvent {
    /// The one mapping from host notifications to foreign events. The match
    /// names every notification, so one added to the protocol does not
    /// compile here until it has an event.
    fn from(notification: wire::ServerNotification) -> Self {
        match notification {
            wire::ServerNotification::PlanApprovalRequested(requested) => PlanEvent::ApprovalRequested {
                approval: requested.approval.into(),
            },
            wire::ServerNotification::PlanApprovalResolved(resolved) => PlanEvent::ApprovalResolved {
                approval: resolved.approval.into(),
            },
            wire::ServerNotification::ExecutionStateChanged(changed) => PlanEvent::ExecutionStateChanged {
                session_id: changed.session_id,
                execution_id: changed.execution_id,
                state: changed.state.into(),
            },
            wire::ServerNotification::SessionChanged(changed) => PlanEvent::SessionChanged {
                session: changed.session.into(),
            },
            wire::ServerNotification::CommandOutput(output) => PlanEvent::CommandOutput {
                session_id: output.session_id,
                call_id: output.call_id,
                stream: output.stream.into(),
                seq: output.seq,
                chunk: output.chunk,
            },
            wire::ServerNotification::CommandExited(exited) => PlanEvent::CommandExited {
                session_id: exited.session_id,
                call_id: exited.call_id,
                command: exited.command.into(),
            },
        }
    }
}

impl From<wire::ShellListResult> for ShellCatalog {
    fn from(list: wire::ShellListResult) -> Self {
        ShellCatalog {
            shells: list
                .shells
                .into_iter()
                .map(|shell| ShellInfo {
                    id: shell.id,
                    path: shell.path,
                    available: shell.available,
                })
                .collect(),
            default_shell: list.default_shell,
        }
    }
}

/// A plan-core approval as a foreign record (through the wire shape).
pub(crate) fn approval(approval: &plan_core::PlanApproval) -> PlanApproval {
    wire::PlanApproval::from(approval).into()
}

/// A plan-core session state as a foreign record (through the wire shape).
pub(crate) fn session(state: &plan_core::SessionState) -> Session {
    wire::Session::from(state).into()
}

impl From<wire::VerifyReport> for VerifyReport {
    fn from(report: wire::VerifyReport) -> Self {
        VerifyReport {
            ok: report.ok,
            artifacts: report
                .artifacts
                .into_iter()
                .map(|check| ArtifactVerification {
                    approval_id: check.approval_id,
                    result: check.result.into(),
                    error_code: check.error_code.map(|code| code.0.into()),
                    detail: check.detail,
                })
                .collect(),
            orphans: report
                .orphans
                .into_iter()
                .map(|orphan| OrphanArtifact {
                    workspace_root: orphan.workspace_root,
                    path: orphan.path,
                })
                .collect(),
            skipped_workspaces: report
                .skipped_workspaces
                .into_iter()
                .map(|skipped| SkippedWorkspace {
                    workspace_root: skipped.workspace_root,
                    detail: skipped.detail,
                })
                .collect(),
        }
    }
}

impl From<wire::PlanDiffResult> for PlanDiff {
    fn from(diff: wire::PlanDiffResult) -> Self {
        PlanDiff {
            approval_id: diff.approval_id,
            against_approval_id: diff.against_approval_id,
            identical: diff.identical,
            unified: diff.unified,
        }
    }
}
