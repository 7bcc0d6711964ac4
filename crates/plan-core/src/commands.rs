//! Host-run commands (the `Bash` tool): which input is valid, which sandbox
//! a command gets, what a run records, and what the startup fence does with
//! runs that never ended.
//!
//! These are the rules of `commands.md` as pure functions and values (the
//! run's record, `CommandRun`, and its enums are declared once in
//! `objects`). The machine (`machine.rs`) applies them to turns: when a
//! command may start, when a turn may end, what `turn/cancel` cancels first. Nothing here
//! spawns, kills or reads a pipe; the host carries those effects out through
//! plan-exec. There is no weaker fallback for a sandbox: a Plan command gets
//! [`Sandbox::ReadOnly`] or does not run.

use crate::call_input::CallDigest;
use crate::model::{ActiveTurn, LimitError, UnixMs};
use crate::objects::{CommandRun, CommandState, Mode, Sandbox, TurnKind};
use crate::session::normalize_workspace_root;
use crate::{ErrorCode, SessionId, TurnId};

/// The tool name the host runs as a command.
pub const BASH: &str = "Bash";

impl Sandbox {
    /// The code of a command that needs this sandbox where it cannot be
    /// had (no kernel sandbox, no helper): `PLAN_SANDBOX_UNAVAILABLE` for
    /// the read-only sandbox of Plan turns, `SANDBOX_UNAVAILABLE` otherwise.
    /// The one mapping; plan-core's refusals and the host's failed starts
    /// both use it.
    pub const fn unavailable_code(self) -> ErrorCode {
        match self {
            Sandbox::ReadOnly => ErrorCode::PlanSandboxUnavailable,
            Sandbox::WorkspaceWrite | Sandbox::None => ErrorCode::SandboxUnavailable,
        }
    }
}

impl CommandState {
    /// Whether the run has ended (every state but `running`).
    pub const fn is_ended(self) -> bool {
        match self {
            CommandState::Running => false,
            CommandState::Exited
            | CommandState::TimedOut
            | CommandState::Cancelled
            | CommandState::FailedToStart
            | CommandState::Interrupted => true,
        }
    }
}

/// The host's command options that shape decisions, plus what the host's
/// one probe at open found out about the kernel sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommandOptions {
    /// Timeouts and the per-session limit, in range by construction
    /// ([`CommandLimits::new`]).
    pub limits: CommandLimits,
    /// Whether Agent commands may use the network (the name is older than
    /// the rule that every Agent command, `auto` or confirmed, gets the same
    /// sandbox).
    pub network_in_auto: bool,
    /// Whether the host opted out of the workspace-write sandbox for Agent
    /// commands (`auto` ones, and confirmed ones under `ask` and
    /// `accept-edits`) where the kernel sandbox is unavailable: they then run
    /// unconfined instead of failing with `SANDBOX_UNAVAILABLE`. It never
    /// touches Plan turns, whose commands are read-only or do not run.
    ///
    /// The same opt-out covers a sandbox without namespaces: there Agent
    /// commands run workspace-write under Landlock and seccomp, without P7's
    /// protected paths, instead of `SANDBOX_UNAVAILABLE`. One option, because
    /// it means one thing (the host accepts Agent commands without the full
    /// sandbox), and the weaker case still gets every layer that works.
    pub auto_without_sandbox: bool,
    /// Whether the kernel sandbox (read-only and workspace-write) works on
    /// this host. `false` means Plan Bash is `PLAN_SANDBOX_UNAVAILABLE` and
    /// Agent commands are `SANDBOX_UNAVAILABLE`; nothing weaker runs.
    /// The default is `false` until a probe says otherwise (the safe side:
    /// nothing runs unconfined).
    pub sandbox_available: bool,
    /// Why the sandbox is unavailable, as the host found out at open (the
    /// helper was not found, failed a check, the kernel lacks Landlock):
    /// a fact for people, which a refusal for want of the sandbox carries
    /// ([`sandbox_refusal_message`]). Ignored while `sandbox_available`.
    pub sandbox_unavailable_reason: Option<String>,
    /// Whether the sandbox also enters its namespaces here (the kernel
    /// allows them and the host did not skip them), which is what keeps
    /// P7's protected paths read-only and P8's reads refused. Without them
    /// Plan Bash still runs; Agent commands are `SANDBOX_UNAVAILABLE` unless
    /// the host opted out with `auto_without_sandbox`.
    pub namespaces_available: bool,
}

/// The command timeouts and the per-session limit. Only
/// [`CommandLimits::new`] (or the default) makes one, so a value that exists
/// is always in range: `serve`'s flags, the FFI constructor and Rust
/// embedders meet the same rule.
///
/// ```
/// use plan_core::{CommandLimits, ErrorCode};
///
/// // No default given: the documented one, lowered to a smaller maximum.
/// let limits = CommandLimits::new(None, 60_000, 4)?;
/// assert_eq!(limits.default_timeout_ms(), 60_000);
/// // A default above the maximum is refused, never clamped.
/// let refused = CommandLimits::new(Some(900_000), 600_000, 4).unwrap_err();
/// assert_eq!(refused.code(), ErrorCode::InvalidParams);
/// # Ok::<(), plan_core::LimitError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandLimits {
    default_timeout_ms: u64,
    max_timeout_ms: u64,
    max_running_per_session: usize,
}

impl CommandLimits {
    /// Two minutes.
    pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
    /// Ten minutes.
    pub const DEFAULT_MAX_TIMEOUT_MS: u64 = 600_000;
    /// Four commands at once per session.
    pub const DEFAULT_MAX_RUNNING_PER_SESSION: usize = 4;

    /// Limits with a maximum timeout and a per-session limit of at least 1,
    /// and a default timeout from 1 ms to the maximum. Without a default,
    /// [`CommandLimits::DEFAULT_TIMEOUT_MS`] is used, lowered to the maximum
    /// when that is smaller (the one clamp). A default above the maximum is
    /// refused: a call without `timeoutMs` must never get longer than a call
    /// may ask for. Refusals are `INVALID_PARAMS` and say the range.
    pub fn new(
        default_timeout_ms: Option<u64>,
        max_timeout_ms: u64,
        max_running_per_session: usize,
    ) -> Result<CommandLimits, LimitError> {
        if max_timeout_ms == 0 {
            return Err(LimitError {
                limit: "maximum command timeout",
                value: "0 ms".to_owned(),
                range: "at least 1 ms".to_owned(),
            });
        }
        if max_running_per_session == 0 {
            return Err(LimitError {
                limit: "limit of running commands per session",
                value: "0".to_owned(),
                range: "at least 1".to_owned(),
            });
        }
        let default_timeout_ms = match default_timeout_ms {
            None => CommandLimits::DEFAULT_TIMEOUT_MS.min(max_timeout_ms),
            Some(timeout) if (1..=max_timeout_ms).contains(&timeout) => timeout,
            Some(timeout) => {
                return Err(LimitError {
                    limit: "default command timeout",
                    value: format!("{timeout} ms"),
                    range: format!("from 1 ms to the maximum command timeout ({max_timeout_ms} ms)"),
                });
            }
        };
        Ok(CommandLimits {
            default_timeout_ms,
            max_timeout_ms,
            max_running_per_session,
        })
    }

    /// The timeout of a command whose input names none, in milliseconds.
    pub fn default_timeout_ms(&self) -> u64 {
        self.default_timeout_ms
    }

    /// The largest `timeoutMs` an input may ask for.
    pub fn max_timeout_ms(&self) -> u64 {
        self.max_timeout_ms
    }

    /// How many commands of one session may run at once.
    pub fn max_running_per_session(&self) -> usize {
        self.max_running_per_session
    }
}

impl Default for CommandLimits {
    /// The documented defaults.
    fn default() -> Self {
        CommandLimits {
            default_timeout_ms: CommandLimits::DEFAULT_TIMEOUT_MS,
            max_timeout_ms: CommandLimits::DEFAULT_MAX_TIMEOUT_MS,
            max_running_per_session: CommandLimits::DEFAULT_MAX_RUNNING_PER_SESSION,
        }
    }
}

/// The longest command text, in bytes, that the kernel accepts as one
/// argument (`MAX_ARG_STRLEN` on Linux: 32 pages of 4 KiB, including the
/// terminating NUL). A longer one could never start; it is refused as input.
pub const MAX_COMMAND_BYTES: usize = 128 * 1024 - 1;

/// The parts of a variable name that mark it as a secret a command does not
/// inherit from the host, unless the host configures other markers.
pub const DEFAULT_SECRET_ENV_MARKERS: [&str; 4] = ["KEY", "SECRET", "TOKEN", "PASSWORD"];

/// Whether a command inherits the host's environment variable `name`: not
/// when the name contains one of `markers` (case-insensitively; the host
/// option defaults to [`DEFAULT_SECRET_ENV_MARKERS`]), and never `TMPDIR`,
/// which is always the command's scratch directory. Everything else, `PATH`
/// and `HOME` included, is kept, so the user's tools are found.
pub fn command_inherits_env(name: &str, markers: &[String]) -> bool {
    let upper = name.to_uppercase();
    name != "TMPDIR"
        && !markers
            .iter()
            .any(|marker| !marker.is_empty() && upper.contains(&marker.to_uppercase()))
}

/// A validated `Bash` input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashInput {
    /// The command text, non-empty, without NUL.
    pub command: String,
    /// The timeout, 1..=the host's maximum.
    pub timeout_ms: u64,
    /// The working directory relative to the workspace root, normalized;
    /// `.` is the root itself.
    pub cwd: String,
}

/// Validates a `Bash` input `{command, timeoutMs?, cwd?}` against the
/// session's workspace root (other fields are ignored).
///
/// Refused: no workspace root (`SESSION_NOT_PROJECT_BOUND`); a missing or
/// empty command, a NUL, a command longer than [`MAX_COMMAND_BYTES`], a
/// timeout outside 1..=max, a cwd that is not a
/// non-empty string (`INVALID_COMMAND_INPUT`); a cwd outside the root after
/// resolving `..` lexically (`COMMAND_CWD_ESCAPE`).
pub fn parse_bash_input(
    input: &serde_json::Value,
    workspace_root: Option<&str>,
    options: &CommandOptions,
) -> Result<BashInput, ErrorCode> {
    let Some(workspace_root) = workspace_root else {
        return Err(ErrorCode::SessionNotProjectBound);
    };
    let serde_json::Value::Object(fields) = input else {
        return Err(ErrorCode::InvalidCommandInput);
    };
    let command = match fields.get("command") {
        Some(serde_json::Value::String(command))
            if !command.trim().is_empty()
                && !command.contains('\0')
                && command.len() <= MAX_COMMAND_BYTES =>
        {
            command.clone()
        }
        Some(_) | None => return Err(ErrorCode::InvalidCommandInput),
    };
    let timeout_ms = match fields.get("timeoutMs") {
        None | Some(serde_json::Value::Null) => options.limits.default_timeout_ms(),
        Some(value) => match value.as_u64() {
            Some(timeout) if (1..=options.limits.max_timeout_ms()).contains(&timeout) => timeout,
            Some(_) | None => return Err(ErrorCode::InvalidCommandInput),
        },
    };
    let cwd = match fields.get("cwd") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(cwd)) if !cwd.is_empty() && !cwd.contains('\0') => Some(cwd.as_str()),
        Some(_) => return Err(ErrorCode::InvalidCommandInput),
    };
    let cwd = match cwd {
        None => ".".to_owned(),
        Some(cwd) => relative_cwd(workspace_root, cwd)?,
    };
    Ok(BashInput {
        command,
        timeout_ms,
        cwd,
    })
}

/// The workspace-relative form of `cwd` (relative to the root, or absolute
/// inside it), `..` resolved lexically; `COMMAND_CWD_ESCAPE` outside.
fn relative_cwd(workspace_root: &str, cwd: &str) -> Result<String, ErrorCode> {
    let root = normalize_workspace_root(workspace_root).map_err(|_| ErrorCode::CommandCwdEscape)?;
    let joined = if cwd.starts_with('/') {
        cwd.to_owned()
    } else {
        format!("{root}/{cwd}")
    };
    let resolved = normalize_workspace_root(&joined).map_err(|_| ErrorCode::CommandCwdEscape)?;
    inside(&root, &resolved).ok_or(ErrorCode::CommandCwdEscape)
}

/// `path` relative to `root` when it is `root` or below it (both
/// normalized), `.` for the root itself.
fn inside(root: &str, path: &str) -> Option<String> {
    if path == root {
        return Some(".".to_owned());
    }
    let prefix = if root == "/" {
        String::from("/")
    } else {
        format!("{root}/")
    };
    path.strip_prefix(&prefix).map(str::to_owned)
}

/// The second cwd check, on real paths the host resolved with every symlink
/// followed: a cwd whose real path is outside the workspace's real root
/// (a symlink pointing out) is `COMMAND_CWD_ESCAPE`.
pub fn check_resolved_cwd(real_root: &str, real_cwd: &str) -> Result<(), ErrorCode> {
    let root = normalize_workspace_root(real_root).map_err(|_| ErrorCode::CommandCwdEscape)?;
    let cwd = normalize_workspace_root(real_cwd).map_err(|_| ErrorCode::CommandCwdEscape)?;
    inside(&root, &cwd).map(|_| ()).ok_or(ErrorCode::CommandCwdEscape)
}

/// Which directory a session's workspace is, on its filesystem: what its
/// path named when the session bound it (P12 of the sandbox spec). Kept
/// with the session, so a later host knows it too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WorkspaceIdentity {
    /// The filesystem's device number.
    pub device: u64,
    /// The directory's inode number.
    pub inode: u64,
}

/// P12 across hosts: a session's workspace is the directory it bound. The
/// directory its path names now (`found`) must be that one (`bound`, as
/// recorded when the session first bound it); one renamed or replaced
/// since, by an enclosing session's command or anyone, is
/// `COMMAND_CWD_ESCAPE`: a command would run outside the session's
/// workspace.
pub fn check_workspace_identity(bound: WorkspaceIdentity, found: WorkspaceIdentity) -> Result<(), ErrorCode> {
    if bound == found {
        Ok(())
    } else {
        Err(ErrorCode::CommandCwdEscape)
    }
}

/// The sandbox a command of `turn` gets and whether it may use the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxGrant {
    /// The confinement.
    pub sandbox: Sandbox,
    /// Whether sockets are allowed.
    pub network: bool,
}

/// Which sandbox a command needs: a Plan turn always read-only and offline;
/// an Agent turn, under every permission mode (an approved plan's execution
/// turn included), workspace-write, with the network only when the host
/// allows it (`network_in_auto`), unless the sandbox is unavailable and the
/// host opted out of it (`auto_without_sandbox`; then none).
///
/// A command a person confirmed under `ask` or `accept-edits` gets the same
/// sandbox as an `auto` one: the person read the command text, not what the
/// scripts it starts will do, so a confirmation adds a check and takes no
/// confinement away. The permission mode decides whether a person is asked
/// (`agent_permission`), never how far the command reaches.
pub fn sandbox_for(turn: &ActiveTurn, options: &CommandOptions) -> SandboxGrant {
    match (turn.mode, turn.kind) {
        (Mode::Plan, TurnKind::Prompt | TurnKind::Execution) => SandboxGrant {
            sandbox: Sandbox::ReadOnly,
            network: false,
        },
        (Mode::Agent, TurnKind::Prompt | TurnKind::Execution)
            if !options.sandbox_available && options.auto_without_sandbox =>
        {
            SandboxGrant {
                sandbox: Sandbox::None,
                network: true,
            }
        }
        (Mode::Agent, TurnKind::Prompt | TurnKind::Execution) => SandboxGrant {
            sandbox: Sandbox::WorkspaceWrite,
            network: options.network_in_auto,
        },
    }
}

/// Whether a command with `grant` may start on this host: a Plan
/// (read-only) command needs the kernel sandbox; a workspace-write (Agent)
/// command needs it with its namespaces, since without them P7 cannot be
/// kept, unless the host opted out; an unconfined command always may.
///
/// # Errors
///
/// `PLAN_SANDBOX_UNAVAILABLE` for a read-only grant without the sandbox,
/// `SANDBOX_UNAVAILABLE` for a workspace-write grant without it (or without
/// its namespaces and no opt-out).
pub fn check_sandbox(grant: &SandboxGrant, options: &CommandOptions) -> Result<(), ErrorCode> {
    match grant.sandbox {
        Sandbox::None => Ok(()),
        Sandbox::ReadOnly if options.sandbox_available => Ok(()),
        Sandbox::ReadOnly => Err(grant.sandbox.unavailable_code()),
        // A command never shares the host's network namespace (P11): the
        // network option needs namespaces of its own, whatever else the
        // host accepts without them.
        Sandbox::WorkspaceWrite
            if grant.network && !(options.sandbox_available && options.namespaces_available) =>
        {
            Err(grant.sandbox.unavailable_code())
        }
        Sandbox::WorkspaceWrite
            if options.sandbox_available
                && (options.namespaces_available || options.auto_without_sandbox) =>
        {
            Ok(())
        }
        Sandbox::WorkspaceWrite => Err(grant.sandbox.unavailable_code()),
    }
}

/// The sentence a refusal for want of the sandbox carries in place of its
/// code's own message: the real cause the host found (see
/// [`CommandOptions::sandbox_unavailable_reason`]), so nobody is told
/// "not available on this host" when the helper path is wrong. `None` for
/// any other code, while the sandbox is available, or without a reason.
///
/// ```
/// use plan_core::{CommandOptions, ErrorCode, sandbox_refusal_message};
///
/// let options = CommandOptions {
///     sandbox_unavailable_reason: Some("the sandbox helper /opt/helper was not found".to_owned()),
///     ..CommandOptions::default()
/// };
/// let message = sandbox_refusal_message(ErrorCode::PlanSandboxUnavailable, &options);
/// assert!(message.is_some_and(|text| text.ends_with(": the sandbox helper /opt/helper was not found")));
/// assert_eq!(sandbox_refusal_message(ErrorCode::ToolDeniedInPlan, &options), None);
/// ```
pub fn sandbox_refusal_message(code: ErrorCode, options: &CommandOptions) -> Option<String> {
    if options.sandbox_available {
        return None;
    }
    let reason = options.sandbox_unavailable_reason.as_deref()?;
    if code == ErrorCode::PlanSandboxUnavailable {
        Some(format!(
            "the read-only Plan sandbox is unavailable, so Plan-mode Bash cannot run: {reason}"
        ))
    } else if code == ErrorCode::SandboxUnavailable {
        Some(format!(
            "the workspace-write sandbox is unavailable, so this command cannot run: {reason}"
        ))
    } else {
        None
    }
}

/// What `initialize` reports about the sandbox: the layers that work here
/// and the properties of `sandbox.md` they enforce. P7, P8, P11 (a network
/// namespace of the command's own) and P13 need the namespaces; P14 is
/// this crate's own rule and holds wherever commands run. Nothing without
/// the sandbox.
pub fn sandbox_report(options: &CommandOptions) -> (Vec<&'static str>, Vec<&'static str>) {
    if !options.sandbox_available {
        return (Vec::new(), Vec::new());
    }
    if options.namespaces_available {
        (
            vec!["landlock", "seccomp", "namespaces"],
            vec![
                "P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "P11", "P12", "P13", "P14",
            ],
        )
    } else {
        (
            vec!["landlock", "seccomp"],
            vec!["P1", "P2", "P3", "P4", "P5", "P6", "P9", "P10", "P12", "P14"],
        )
    }
}

/// What the host must start: one validated command with its sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRequest {
    /// The session.
    pub session_id: SessionId,
    /// The turn the command belongs to.
    pub turn_id: TurnId,
    /// The tool call.
    pub call_id: String,
    /// The session's normalized workspace root.
    pub workspace_root: String,
    /// The validated input.
    pub input: BashInput,
    /// The session's selected shell id (`None`: the default shell).
    pub shell: Option<String>,
    /// The confinement and network rule.
    pub grant: SandboxGrant,
}

/// Where one Bash call of the active turn stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnCommandStatus {
    /// An Agent-turn Bash call the client may start with `command/start`:
    /// allowed by the permission mode, or confirmed by a person.
    Allowed,
    /// Started and not yet ended.
    Running,
    /// Started and ended (or failed to start).
    Ended,
}

/// One Bash call of the active turn (memory only, like the turn).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnCommand {
    /// The tool call id.
    pub call_id: String,
    /// Where it stands.
    pub status: TurnCommandStatus,
    /// The digest of the call's input: what was decided (and, under `ask`
    /// or `accept-edits`, what a person confirmed), so `command/start` runs
    /// exactly this command, in this `cwd`, with this timeout, or nothing.
    /// A call whose input was not a valid Bash input has a digest no start
    /// matches; such a call can never start.
    pub input: CallDigest,
}

/// The startup fence for command runs: every run whose audit has a start and
/// no end becomes `interrupted` with `HOST_RESTARTED`, ended now. The host's
/// children died with the old process; nothing is re-run. The caller writes
/// these in the same transaction as the approvals' fence.
pub fn fence_commands(unended: &[CommandRun], now: UnixMs) -> Vec<CommandRun> {
    unended
        .iter()
        .filter(|run| !run.state.is_ended())
        .map(|run| {
            let mut interrupted = run.clone();
            interrupted.state = CommandState::Interrupted;
            interrupted.error_code = Some(ErrorCode::HostRestarted);
            interrupted.ended_at = Some(now);
            interrupted
        })
        .collect()
}
