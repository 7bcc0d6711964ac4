//! The one declaration of every enum and record that plan-core reasons about
//! and the wire, the JSON Schema and the foreign bindings carry as it is:
//! modes and statuses, the approval row, its artifact and the artifact's
//! verified bytes, a command run and the findings of a verification.
//!
//! [`for_each_core_object!`] lists them once. This module expands the list
//! into the Rust types (with serde and JSON Schema derives, in the wire's
//! field names and strings), plan-protocol re-exports those very types, and
//! plan-ffi expands the same list into UniFFI exports of them; so a field
//! added here reaches plan-core, the wire, the schema, the database's
//! command audit and every binding at once. The doc comments of the list
//! are the schema's descriptions, so they describe the wire.
//!
//! Nothing here decides anything or performs I/O; the rules that use these
//! values live in `model`, `commands` and `review`.

use crate::{ApprovalId, CallId, ErrorCode, ExecutionId, SessionId, TurnId};

/// Declares one item of a shared-object list (this module's
/// [`for_each_core_object!`] and plan-protocol's wire-only list): a closed
/// enum with one exact wire string per variant (`ALL`, `as_str`, `parse`,
/// `Display`), or a record with every field public; each with the serde and
/// JSON Schema derives. Exported so that both lists expand through this one
/// macro; the `as FfiName` part is for plan-ffi and ignored here.
#[doc(hidden)]
#[macro_export]
macro_rules! declare_shared_object {
    ($(#[$meta:meta])* enum $name:ident $(as $ffi_name:ident)? { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize, ::schemars::JsonSchema,
        )]
        $(#[$meta])*
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

            /// The variant for a wire string; `None` for anything else
            /// (matching is exact and case-sensitive).
            pub fn parse(text: &str) -> Option<$name> {
                match text {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str(self.as_str())
            }
        }
    };
    ($(#[$meta:meta])* struct $name:ident $(as $ffi_name:ident)? {
        $($(#[$field_meta:meta])* $field:ident: $ty:ty $(= $default:tt)?),* $(,)?
    }) => {
        #[derive(Debug, Clone, PartialEq, Eq, ::serde::Serialize, ::serde::Deserialize, ::schemars::JsonSchema)]
        $(#[$meta])*
        pub struct $name {
            $($(#[$field_meta])* pub $field: $ty),*
        }
    };
}

/// The one declaration of the enums and records plan-core shares with the
/// wire and the bindings: enums (`enum Name { Variant => "wire text", .. }`)
/// and records (`struct Name { field: Type, .. }`, every field public, a
/// record may have none; a
/// field written `field: Type = default` is one the bindings may omit, the
/// default in UniFFI's notation, ignored by the Rust declaration). An
/// item the bindings know by another name is written `enum Name as FfiName`
/// (plan-core's `Sandbox` is the bindings' `CommandSandbox`); an item the
/// schema knows by another name carries `#[schemars(rename = "..")]`. Each
/// item is handed to `$callback` on its own; field types are named as this
/// module imports them (`ErrorCode`, the typed ids, `Option<..>`, the other
/// items), so a caller brings them into scope.
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_core_object {
    ($callback:ident) => {
        $callback! {
            /// `"agent"` or `"plan"`.
            enum Mode {
                /// Normal work.
                Agent => "agent",
                /// Read-only planning that ends in one SubmitPlan.
                Plan => "plan",
            }
        }

        $callback! {
            /// `"ask"`, `"accept-edits"` or `"auto"`.
            enum PermissionMode {
                /// Every edit and command asks first.
                Ask => "ask",
                /// Edits are accepted; other actions ask.
                AcceptEdits => "accept-edits",
                /// Everything runs without asking.
                Auto => "auto",
            }
        }

        $callback! {
            /// `"interactive"`, `"scheduled"` or `"background"`.
            enum Origin {
                /// A person at the host.
                Interactive => "interactive",
                /// A scheduled task or any other unattended caller.
                Scheduled => "scheduled",
                /// Work the host runs in the background with nobody watching
                /// (a print-mode or JSON-mode run): unattended, as a scheduled task.
                Background => "background",
            }
        }

        $callback! {
            /// `"prompt"` or `"execution"`.
            enum TurnKind {
                /// A turn started by a prompt.
                Prompt => "prompt",
                /// The Agent turn that carries out an approved plan.
                Execution => "execution",
            }
        }

        $callback! {
            /// `"pending"`, `"approved"`, `"rejected"`, `"expired"` or `"interrupted"`.
            enum ApprovalStatus {
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
            enum ExecutionState {
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
            /// The confinement of a command run.
            #[schemars(rename = "CommandSandbox")]
            enum Sandbox as CommandSandbox {
                /// Writes only in the command's scratch directory; no network
                /// (every Plan-mode command).
                ReadOnly => "read-only",
                /// Writes also inside the workspace root; the network only where
                /// the host allows it (every Agent-mode command, under every
                /// permission mode).
                WorkspaceWrite => "workspace-write",
                /// No sandbox: only an Agent-mode command on a host whose kernel
                /// sandbox is unavailable and that opted out of it
                /// (`auto_without_sandbox`).
                None => "none",
            }
        }

        $callback! {
            /// The state of a command run.
            enum CommandState {
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
            /// The Plan sandbox a host offers.
            enum PlanSandbox {
                /// Landlock, seccomp and dropped capabilities (Linux).
                Landlock => "landlock",
                /// No sandbox: Plan Bash is `PLAN_SANDBOX_UNAVAILABLE`.
                Unavailable => "unavailable",
            }
        }

        $callback! {
            /// Whether Plan-mode Bash will work, known before a turn starts.
            #[serde(rename_all = "camelCase")]
            struct CommandCapabilities {
                /// `landlock` when the kernel sandbox works here, else `unavailable`.
                plan_sandbox: PlanSandbox,
                /// Why it is unavailable; `null` when available.
                reason: Option<String>,
                /// The kernel layers the sandbox uses here: `landlock`, `seccomp` and,
                /// where the kernel allows them and the host does not skip them,
                /// `namespaces`. Empty when the sandbox is unavailable.
                #[serde(default)]
                layers: Vec<String>,
                /// The sandbox properties of the sandbox specification that hold here,
                /// `P1` to `P16`; `P7`, `P8`, `P11`, `P13` and `P15` need the namespaces, `P16`
                /// every bound of `bounds`. Empty when the sandbox is unavailable.
                #[serde(default)]
                enforced: Vec<String>,
                /// What a sandboxed command may take from the machine is bounded here
                /// for these (P16): `processes` (processes and threads), `memory`,
                /// `inotify` (instances and watches), `openFiles` (per process, so
                /// pipes and sockets too), `aio` and `keys` (none at all), and
                /// `machineAddresses` (a networked command reaches none of the
                /// machine's own addresses). Empty when the sandbox is unavailable.
                #[serde(default)]
                bounds: Vec<String>,
                /// The bounds of P16 this machine cannot give a command, each with
                /// why (a cgroup that cannot be made, a kernel without a feature):
                /// a command runs without them.
                #[serde(default)]
                missing_bounds: Vec<MissingBound>,
            }
        }

        $callback! {
            /// A bound of P16 (`sandbox.md`) this machine cannot give a command.
            #[serde(rename_all = "camelCase")]
            struct MissingBound {
                /// Its name, as `bounds` would list it (`processes`, `memory`, `inotify`).
                bound: String,
                /// Why this machine cannot give it.
                reason: String,
            }
        }

        $callback! {
            /// What checking one artifact found.
            enum ArtifactCheck {
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
            /// One host-run command (`CommandRun` of the commands spec).
            #[serde(rename_all = "camelCase")]
            struct CommandRun {
                /// The Bash tool call.
                call_id: CallId,
                /// The session.
                session_id: SessionId,
                /// The turn the command belongs to.
                turn_id: TurnId,
                /// The command text.
                command: String,
                /// Workspace-relative working directory (`.` for the root).
                cwd: String,
                /// The shell.
                shell: CommandShell,
                /// The confinement.
                sandbox: Sandbox,
                /// Whether the command had the network.
                network: bool,
                /// Its state.
                state: CommandState,
                /// The exit code, when the shell exited normally.
                exit_code: Option<i32>,
                /// The signal that ended the shell, if one did.
                signal: Option<i32>,
                /// Why it failed to start or was interrupted.
                error_code: Option<ErrorCode>,
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
                id: ApprovalId,
                /// Owning session.
                session_id: SessionId,
                /// The Plan turn that submitted it.
                turn_id: TurnId,
                /// SubmitPlan `title`.
                title: String,
                /// SubmitPlan `question`.
                question: String,
                /// The artifact; `null` only for rows migrated from schema v8.
                artifact: Option<Artifact>,
                /// Approval status.
                status: ApprovalStatus,
                /// Why it ended other than by a decision (timeout, restart, cancel).
                error_code: Option<ErrorCode>,
                /// Creation time, Unix ms.
                created_at: i64,
                /// Absolute deadline, Unix ms; never moves.
                expires_at: i64,
                /// Decision, expiry or interruption time, Unix ms.
                decided_at: Option<i64>,
                /// Set only by approve.
                permission_mode: Option<PermissionMode>,
                /// Set only by approve.
                execution_id: Option<ExecutionId>,
                /// `null` unless approved.
                execution_state: Option<ExecutionState>,
            }
        }

        $callback! {
            /// One checked approval of a `VerifyReport`.
            #[serde(rename_all = "camelCase")]
            struct ArtifactVerification {
                /// The approval.
                approval_id: ApprovalId,
                /// What was found.
                result: ArtifactCheck,
                /// The canonical code of a problem; `null` otherwise.
                error_code: Option<ErrorCode>,
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
            /// `plan/readArtifact` result: the verified bytes.
            #[schemars(rename = "PlanReadArtifactResult")]
            #[serde(rename_all = "camelCase")]
            struct ArtifactContent {
                /// The artifact's Markdown, exactly as written.
                markdown: String,
                /// Its SHA-256, 64 lowercase hex digits.
                sha256: String,
                /// Its byte size.
                size: u64,
            }
        }

        $callback! {
            /// The `type` of a tool-permission transcript entry.
            enum ToolAuditKind {
                /// A call was decided `confirm`: a person is asked.
                ConfirmRequested => "toolConfirmRequested",
                /// A person allowed a call that awaited confirmation.
                Confirmed => "toolConfirmed",
                /// The call will not run: a person declined it
                /// (`TOOL_DECLINED`), or the turn could not ask one
                /// (`PERMISSION_REQUIRES_INTERACTIVE_SESSION`).
                Declined => "toolDeclined",
                /// The permission mode allowed a call that `ask` would have
                /// confirmed (an edit under `accept-edits`, anything under `auto`).
                AutoAllowed => "toolAutoAllowed",
            }
        }

        $callback! {
            /// A transcript entry of an Agent-turn decision that is not a plain
            /// allow (role `tool` in the session's transcript).
            #[serde(rename_all = "camelCase")]
            struct ToolAuditEntry {
                /// What happened.
                #[serde(rename = "type")]
                kind: ToolAuditKind,
                /// The session.
                session_id: SessionId,
                /// The turn of the call.
                turn_id: TurnId,
                /// The approved plan's execution, when the turn is its execution turn.
                execution_id: Option<ExecutionId>,
                /// The tool call.
                call_id: CallId,
                /// The tool name (`toolConfirmRequested`, `toolAutoAllowed`, and a
                /// `toolDeclined` nobody could be asked about); otherwise `null`.
                tool: Option<String>,
                /// The permission mode that decided (as for `tool`).
                permission_mode: Option<PermissionMode>,
                /// Why a declined call will not run; otherwise `null`.
                error_code: Option<ErrorCode>,
                /// When, Unix ms.
                at: i64,
            }
        }

        $callback! {
            /// A call of an active Agent turn that waits for a person
            /// (decided `confirm`, not yet confirmed or declined): what
            /// `tool/confirm` needs, and the input the person confirms.
            #[serde(rename_all = "camelCase")]
            struct AwaitingCall {
                /// The session.
                session_id: SessionId,
                /// The turn of the call (`tool/confirm`'s `turnId`).
                turn_id: TurnId,
                /// The approved plan's execution, when the turn is its execution turn.
                execution_id: Option<ExecutionId>,
                /// The tool call (`tool/confirm`'s `callId`).
                call_id: CallId,
                /// The tool name as the call gave it.
                tool: String,
                /// The call's input, exactly as it was decided: what a
                /// confirmation covers.
                input: serde_json::Value,
                /// The permission mode that asked for the confirmation.
                permission_mode: PermissionMode,
            }
        }

        $callback! {
            /// One assistant tool call in `turn/toolCalls` params.
            // As part of params it refuses unknown fields.
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct ToolCall {
                /// The caller's id for the call.
                call_id: CallId,
                /// The tool name, matched exactly.
                name: String,
                /// The tool input, any JSON value.
                input: serde_json::Value,
            }
        }

        $callback! {
            /// The decision for one tool call: `"allow"`, `"confirm"` or `"deny"`.
            enum ToolCallDecision {
                /// The call may run (with `hostRun`: only through `command/start`).
                Allow => "allow",
                /// The call must not run; `error` says why.
                Deny => "deny",
                /// An Agent-turn call that may run only after a person says so:
                /// answer it with `tool/confirm`.
                Confirm => "confirm",
            }
        }

        $callback! {
            /// Why one tool call was denied: `{code: "SCREAMING_SNAKE", message}`.
            #[serde(rename_all = "camelCase")]
            struct ToolCallError {
                /// The canonical code, for example `"TOOL_DENIED_IN_PLAN"`.
                code: ErrorCode,
                /// A sentence for people.
                message: String,
            }
        }

        $callback! {
            /// The decision for one call of a `turn/toolCalls` batch.
            #[serde(rename_all = "camelCase")]
            struct ToolCallResult {
                /// The call.
                call_id: CallId,
                /// Allow, confirm or deny.
                decision: ToolCallDecision,
                /// `true` for an Agent-turn Bash call that is allowed or awaits a
                /// confirmation: the client must run it through `command/start`, never
                /// itself, so it is bounded, audited, killed with the host and sandboxed.
                /// `false` otherwise (a Plan-turn Bash call was run by the host already).
                #[serde(default)]
                host_run: bool,
                /// Why it was denied; `null` when allowed.
                error: Option<ToolCallError>,
                /// The new pending approval of an accepted SubmitPlan; otherwise `null`.
                approval: Option<PlanApproval>,
                /// The command the host started for a Plan-turn Bash call; otherwise
                /// `null` (Agent turns start commands with `command/start`).
                command: Option<CommandRun>,
            }
        }

        $callback! {
            /// `plan/diff` result.
            #[schemars(rename = "PlanDiffResult")]
            #[serde(rename_all = "camelCase")]
            struct PlanDiff {
                /// The approval compared.
                approval_id: ApprovalId,
                /// What it was compared with; `null` for a session's first submission.
                against_approval_id: Option<ApprovalId>,
                /// Whether the two texts are the same bytes (false with nothing to compare).
                identical: bool,
                /// The unified diff (3 lines of context); `""` when identical, `null`
                /// with nothing to compare.
                unified: Option<String>,
            }
        }

        $callback! {
            /// `plan/list` params: every filter optional.
            #[schemars(rename = "PlanListParams")]
            #[derive(Default)]
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            struct ApprovalFilter {
                /// Only this session's approvals.
                #[serde(default, skip_serializing_if = "Option::is_none")]
                session_id: Option<SessionId> = None,
                /// Only approvals with this status.
                #[serde(default, skip_serializing_if = "Option::is_none")]
                status: Option<ApprovalStatus> = None,
                /// At most this many.
                #[serde(default, skip_serializing_if = "Option::is_none")]
                limit: Option<u32> = None,
            }
        }
    };
}

for_each_core_object!(declare_shared_object);

impl ToolCallError {
    /// The error for a code, with the code's human message.
    pub fn new(code: ErrorCode) -> ToolCallError {
        ToolCallError {
            code,
            message: code.message(),
        }
    }
}

impl From<ErrorCode> for ToolCallError {
    fn from(code: ErrorCode) -> Self {
        ToolCallError::new(code)
    }
}

impl ToolCallResult {
    /// An allowed call.
    pub fn allow(call_id: impl Into<CallId>) -> ToolCallResult {
        ToolCallResult {
            call_id: call_id.into(),
            decision: ToolCallDecision::Allow,
            host_run: false,
            error: None,
            approval: None,
            command: None,
        }
    }

    /// A denied call with its canonical code and the code's own sentence.
    pub fn deny(call_id: impl Into<CallId>, code: ErrorCode) -> ToolCallResult {
        ToolCallResult {
            decision: ToolCallDecision::Deny,
            error: Some(ToolCallError::new(code)),
            ..ToolCallResult::allow(call_id)
        }
    }

    /// A denied call whose sentence says more than its code's (why the
    /// sandbox is missing here, what the file system said).
    pub fn deny_with(call_id: impl Into<CallId>, code: ErrorCode, message: Option<String>) -> ToolCallResult {
        let mut result = ToolCallResult::deny(call_id, code);
        if let (Some(message), Some(error)) = (message, result.error.as_mut()) {
            error.message = message;
        }
        result
    }

    /// An accepted SubmitPlan: allowed, carrying the new pending approval.
    pub fn submitted(call_id: impl Into<CallId>, approval: PlanApproval) -> ToolCallResult {
        ToolCallResult {
            approval: Some(approval),
            ..ToolCallResult::allow(call_id)
        }
    }

    /// An Agent-turn Bash call the client has the host run (`command/start`).
    pub fn host_run(call_id: impl Into<CallId>) -> ToolCallResult {
        ToolCallResult {
            host_run: true,
            ..ToolCallResult::allow(call_id)
        }
    }

    /// An Agent-turn call awaiting a person's `tool/confirm`.
    pub fn confirm(call_id: impl Into<CallId>, host_run: bool) -> ToolCallResult {
        ToolCallResult {
            decision: ToolCallDecision::Confirm,
            host_run,
            ..ToolCallResult::allow(call_id)
        }
    }

    /// A Plan-turn Bash call the host started (or that failed to start).
    pub fn ran(call_id: impl Into<CallId>, command: CommandRun) -> ToolCallResult {
        ToolCallResult {
            command: Some(command),
            ..ToolCallResult::allow(call_id)
        }
    }

    /// The canonical code of a denial; `None` when allowed or awaiting a
    /// confirmation.
    pub fn refusal(&self) -> Option<ErrorCode> {
        self.error.as_ref().map(|error| error.code)
    }
}

impl CommandShell {
    /// A catalog shell with this id and executable path.
    ///
    /// ```
    /// let shell = plan_core::CommandShell::new("bash", "/bin/bash");
    /// assert_eq!((shell.id.as_str(), shell.path.as_str()), ("bash", "/bin/bash"));
    /// ```
    pub fn new(id: impl Into<String>, path: impl Into<String>) -> CommandShell {
        CommandShell {
            id: id.into(),
            path: path.into(),
        }
    }
}

impl ShellInfo {
    /// A catalog shell with whether its executable is installed (a fact the
    /// host asked of storage).
    pub fn new(shell: CommandShell, available: bool) -> ShellInfo {
        ShellInfo {
            id: shell.id,
            path: shell.path,
            available,
        }
    }
}

/// How many hex digits of an artifact's SHA-256 its fingerprint shows.
const FINGERPRINT_DIGITS: usize = 16;

impl Artifact {
    /// The short form of the SHA-256 a person compares across frontends
    /// (the approval card, the pi dialog): `sha256 ` and its first 16 hex
    /// digits, then `…`.
    pub fn fingerprint(&self) -> String {
        let digits: String = self.sha256.chars().take(FINGERPRINT_DIGITS).collect();
        format!("sha256 {digits}…")
    }

    /// The file's name, without its directory (`<unique-name>.md`).
    pub fn file_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}
