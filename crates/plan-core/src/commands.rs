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
use crate::objects::{
    CommandCapabilities, CommandRun, CommandShell, CommandState, MissingBound, Mode, PlanSandbox, Sandbox,
    TurnKind,
};
use crate::session::normalize_workspace_root;
use crate::{CallId, ErrorCode, SessionId, TurnId};

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
    /// What a sandboxed command may take from the machine ([`ResourceBounds`]).
    pub bounds: ResourceBounds,
    /// The bounds of [`ResourceBounds`] the host's probe found this machine
    /// cannot give a command (with its namespaces, where it has them), and
    /// why: commands run without them, and `initialize` says so. Ignored
    /// while the sandbox is unavailable.
    pub missing_bounds: Vec<MissingBound>,
}

/// One bound of what a command may take from the machine (`sandbox.md`
/// P16), by the name `initialize` reports it under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceBound {
    /// Processes and threads at once.
    Processes,
    /// Memory, its pipes', files' and scratch directory's included.
    Memory,
    /// inotify instances and watches.
    Inotify,
    /// Open descriptors per process (files, pipes, sockets).
    OpenFiles,
    /// No AIO context at all (they are the machine's, not the user's).
    Aio,
    /// No key or keyring at all.
    Keys,
    /// A networked command reaches none of the machine's own addresses.
    MachineAddresses,
}

impl ResourceBound {
    /// Every bound, in the order `initialize` lists them.
    pub const ALL: [ResourceBound; 7] = [
        ResourceBound::Processes,
        ResourceBound::Memory,
        ResourceBound::Inotify,
        ResourceBound::OpenFiles,
        ResourceBound::Aio,
        ResourceBound::Keys,
        ResourceBound::MachineAddresses,
    ];

    /// The name `initialize` reports it under.
    pub const fn as_str(self) -> &'static str {
        match self {
            ResourceBound::Processes => "processes",
            ResourceBound::Memory => "memory",
            ResourceBound::Inotify => "inotify",
            ResourceBound::OpenFiles => "openFiles",
            ResourceBound::Aio => "aio",
            ResourceBound::Keys => "keys",
            ResourceBound::MachineAddresses => "machineAddresses",
        }
    }
}

/// What one sandboxed command (everything it starts included) may take
/// from the machine, so that no command starves the host, the person or
/// another command (`sandbox.md` P16). The values are this crate's policy;
/// the host asks the sandbox to keep each one the machine can give. Only
/// [`ResourceBounds::with_memory_mb`] (or the default) makes one.
///
/// ```
/// use plan_core::{ErrorCode, ResourceBounds};
///
/// let bounds = ResourceBounds::with_memory_mb(8192)?;
/// assert_eq!(bounds.memory_bytes(), 8192 * 1024 * 1024);
/// assert_eq!(bounds.tasks(), ResourceBounds::default().tasks());
/// assert_eq!(ResourceBounds::with_memory_mb(8).unwrap_err().code(), ErrorCode::InvalidParams);
/// # Ok::<(), plan_core::LimitError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceBounds {
    memory_mb: u64,
}

impl ResourceBounds {
    /// Processes and threads of one command: enough for a parallel build on
    /// a large machine, a small part of any machine's `pid_max`.
    pub const TASKS: u64 = 1024;
    /// Memory of one command by default, in MiB: 4 GiB.
    pub const DEFAULT_MEMORY_MB: u64 = 4096;
    /// The least memory a command may be given, in MiB.
    pub const MIN_MEMORY_MB: u64 = 64;
    /// The most, in MiB: 1 TiB (a bound, not a reservation).
    pub const MAX_MEMORY_MB: u64 = 1024 * 1024;
    /// inotify instances of one command (a user has 128 by default).
    pub const INOTIFY_INSTANCES: u64 = 16;
    /// inotify watches of one command.
    pub const INOTIFY_WATCHES: u64 = 16_384;
    /// Open descriptors per process of a command.
    pub const OPEN_FILES: u64 = 4096;

    /// Bounds with a memory bound of `memory_mb` MiB, from
    /// [`ResourceBounds::MIN_MEMORY_MB`] to [`ResourceBounds::MAX_MEMORY_MB`];
    /// anything else is refused with `INVALID_PARAMS` and says the range.
    pub fn with_memory_mb(memory_mb: u64) -> Result<ResourceBounds, LimitError> {
        if !(Self::MIN_MEMORY_MB..=Self::MAX_MEMORY_MB).contains(&memory_mb) {
            return Err(LimitError {
                limit: "command memory",
                value: format!("{memory_mb} MB"),
                range: format!(
                    "from {} MB to {} MB (1 TiB)",
                    Self::MIN_MEMORY_MB,
                    Self::MAX_MEMORY_MB
                ),
            });
        }
        Ok(ResourceBounds { memory_mb })
    }

    /// Processes and threads at once.
    pub fn tasks(&self) -> u64 {
        Self::TASKS
    }

    /// Memory in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.memory_mb * 1024 * 1024
    }

    /// Memory in MiB.
    pub fn memory_mb(&self) -> u64 {
        self.memory_mb
    }

    /// inotify instances at once.
    pub fn inotify_instances(&self) -> u64 {
        Self::INOTIFY_INSTANCES
    }

    /// inotify watches at once.
    pub fn inotify_watches(&self) -> u64 {
        Self::INOTIFY_WATCHES
    }

    /// Open descriptors per process.
    pub fn open_files(&self) -> u64 {
        Self::OPEN_FILES
    }
}

impl Default for ResourceBounds {
    fn default() -> Self {
        ResourceBounds {
            memory_mb: Self::DEFAULT_MEMORY_MB,
        }
    }
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

/// What the host's probe found about the sandbox, as `initialize`
/// reports it: whether Plan Bash can run and, if not, why; the layers that
/// work here and the properties of `sandbox.md` they enforce. P7, P8, P11
/// (a network namespace of the command's own), P13 and P15 need the
/// namespaces; P14 is this crate's own rule and holds wherever commands run;
/// P16 holds where every bound of [`ResourceBound`] does, which `bounds`
/// lists and `missingBounds` explains. Nothing without the sandbox.
pub fn command_capabilities(options: &CommandOptions) -> CommandCapabilities {
    let (layers, enforced): (&[&str], &[&str]) = if !options.sandbox_available {
        (&[], &[])
    } else if options.namespaces_available {
        (
            &["landlock", "seccomp", "namespaces"],
            &[
                "P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "P11", "P12", "P13", "P14",
                "P15",
            ],
        )
    } else {
        (
            &["landlock", "seccomp"],
            &["P1", "P2", "P3", "P4", "P5", "P6", "P9", "P10", "P12", "P14"],
        )
    };
    let mut enforced: Vec<String> = enforced.iter().map(|property| (*property).to_owned()).collect();
    // Every bound holds: a networked command has namespaces or does not
    // run (P11), AIO and keys are refused by every sandbox, open files by
    // a resource limit; the rest as the probe found.
    let (bounds, missing_bounds) = if options.sandbox_available {
        let bounds: Vec<String> = ResourceBound::ALL
            .iter()
            .map(|bound| bound.as_str())
            .filter(|name| {
                !options
                    .missing_bounds
                    .iter()
                    .any(|missing| missing.bound == *name)
            })
            .map(str::to_owned)
            .collect();
        (bounds, options.missing_bounds.clone())
    } else {
        (Vec::new(), Vec::new())
    };
    if options.sandbox_available && missing_bounds.is_empty() {
        enforced.push("P16".to_owned());
    }
    let (plan_sandbox, reason) = if options.sandbox_available {
        (PlanSandbox::Landlock, None)
    } else {
        (
            PlanSandbox::Unavailable,
            options.sandbox_unavailable_reason.clone(),
        )
    };
    CommandCapabilities {
        plan_sandbox,
        reason,
        layers: layers.iter().map(|layer| (*layer).to_owned()).collect(),
        enforced,
        bounds,
        missing_bounds,
    }
}

/// What an audit entry of a run records (`commands.md`, Audit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandEntryKind {
    /// Written before the process is spawned.
    Started,
    /// Written when the run ended (or by the fence, as `interrupted`).
    Ended,
    /// A start that was refused; nothing ran.
    Refused,
}

impl CommandEntryKind {
    /// The entry's `type` field.
    pub const fn as_str(self) -> &'static str {
        match self {
            CommandEntryKind::Started => "commandStarted",
            CommandEntryKind::Ended => "commandEnded",
            CommandEntryKind::Refused => "commandRefused",
        }
    }
}

/// What the host found out, before plan-core decides, about running the
/// Bash calls of one event: gathered once, under the lock the decision
/// holds, from the session's workspace descriptor and the host's command
/// support. plan-core reads these values and makes every refusal; it does
/// no I/O. The default says nothing is ready (no command can start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandFacts {
    /// The session's workspace as the host found it.
    pub workspace: WorkspaceFact,
    /// The shell a command of this session runs with (the session's or the
    /// default): its id and its path in the host's catalog (empty for an
    /// id the catalog does not have).
    pub shell: CommandShell,
    /// Whether [`CommandFacts::shell`] is installed on this host.
    pub shell_installed: bool,
    /// Whether the host can spawn confined commands at all: a checked
    /// sandbox helper and a private scratch root.
    pub runner_ready: bool,
    /// Whether the scratch root is outside the workspace's real root (a
    /// sandboxed command may write its workspace, so a scratch root in
    /// there would reach other commands' scratch directories).
    pub scratch_outside_workspace: bool,
    /// Whether the database lies directly in the workspace root, where P7
    /// cannot keep its side files from a workspace-write command.
    pub database_in_workspace_root: bool,
    /// Whether the session's network namespace is there for a networked
    /// command (P11: never the host's).
    pub network_ready: bool,
    /// Per Bash call: where its working directory leads and whether its
    /// scratch directory was made.
    pub calls: Vec<CallFacts>,
    /// Per file-writing call of an Agent turn: where the paths it names
    /// really lead ([`crate::write_target`] places the call by them too).
    pub writes: Vec<crate::WriteFact>,
}

/// The facts of one Bash call ([`CommandFacts::calls`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallFacts {
    /// The call.
    pub call_id: CallId,
    /// Its working directory (as [`parse_bash_input`] normalizes it),
    /// resolved below the opened workspace with every symlink followed.
    pub cwd: CwdFact,
    /// Whether the host made the fresh scratch directory it would get.
    pub scratch_ready: bool,
}

/// Where a session's workspace path leads now (P12).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum WorkspaceFact {
    /// Nothing was looked at (no workspace root, or no Bash call).
    #[default]
    NotLookedAt,
    /// The directory could not be opened (missing, not a directory).
    Unavailable,
    /// Opened: what it is now, what the session bound (`None`: not bound
    /// yet, the decision binds it), and its real path (`None` when it is
    /// not text).
    Found {
        /// The directory at the path now.
        found: WorkspaceIdentity,
        /// The directory the session bound, as recorded.
        bound: Option<WorkspaceIdentity>,
        /// Its real path, every symlink followed.
        real_root: Option<String>,
    },
}

/// Where one call's working directory leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CwdFact {
    /// Its real path (text).
    Resolved(String),
    /// It does not exist below the workspace (or its input is invalid).
    Missing,
    /// Its real path is not text: it cannot be placed inside the workspace.
    NotText,
}

/// Whether a command plan-core allowed starts: spawned, or failed before
/// anything ran, with its code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StartVerdict {
    Spawn,
    Fail(ErrorCode),
}

impl Default for CommandFacts {
    fn default() -> Self {
        CommandFacts {
            workspace: WorkspaceFact::NotLookedAt,
            shell: CommandShell {
                id: String::new(),
                path: String::new(),
            },
            shell_installed: false,
            runner_ready: false,
            scratch_outside_workspace: false,
            database_in_workspace_root: false,
            network_ready: false,
            calls: Vec::new(),
            writes: Vec::new(),
        }
    }
}

impl CommandFacts {
    fn call(&self, call_id: &CallId) -> Option<&CallFacts> {
        self.calls.iter().find(|call| &call.call_id == call_id)
    }

    /// Where the host found a file-writing call's paths lead, if it looked.
    pub(crate) fn write(&self, call_id: &CallId) -> Option<&crate::WriteFact> {
        self.writes.iter().find(|write| &write.call_id == call_id)
    }

    /// Whether the session's workspace is not the directory it bound (P12).
    fn workspace_replaced(&self) -> bool {
        match &self.workspace {
            WorkspaceFact::Found {
                found,
                bound: Some(bound),
                ..
            } => check_workspace_identity(*bound, *found).is_err(),
            WorkspaceFact::Found { bound: None, .. }
            | WorkspaceFact::NotLookedAt
            | WorkspaceFact::Unavailable => false,
        }
    }

    /// Where `call_id`'s cwd leads: `Err` with the code of a cwd outside
    /// the workspace (or not placeable in it), `Ok(false)` when it could
    /// not be resolved, `Ok(true)` inside.
    fn cwd_inside(&self, call_id: &CallId) -> Result<bool, ErrorCode> {
        let real_root = match &self.workspace {
            WorkspaceFact::Found { real_root, .. } => real_root.as_deref(),
            WorkspaceFact::NotLookedAt | WorkspaceFact::Unavailable => return Ok(false),
        };
        match (real_root, self.call(call_id).map(|call| &call.cwd)) {
            (Some(real_root), Some(CwdFact::Resolved(real_cwd))) => {
                check_resolved_cwd(real_root, real_cwd).map(|()| true)
            }
            (_, Some(CwdFact::NotText)) => Err(ErrorCode::CommandCwdEscape),
            (None, Some(CwdFact::Resolved(_))) | (_, Some(CwdFact::Missing) | None) => Ok(false),
        }
    }

    /// The refusals a Plan turn gives in its answer, before anything runs:
    /// a workspace that is not the one the session bound, a cwd that leads
    /// out of it.
    pub(crate) fn plan_refusal(&self, call_id: &CallId) -> Result<(), ErrorCode> {
        if self.workspace_replaced() {
            return Err(ErrorCode::CommandCwdEscape);
        }
        self.cwd_inside(call_id).map(|_| ())
    }

    /// Why a call registered now for a later start could never run here
    /// (no shell, no runner for its sandbox): refused at registration, so
    /// no client is let out of an agent's sandbox for nothing.
    pub(crate) fn registration_refusal(&self, grant: SandboxGrant) -> Result<(), ErrorCode> {
        if !self.shell_installed {
            Err(ErrorCode::ShellUnavailable)
        } else if !self.runner_ready {
            Err(grant.sandbox.unavailable_code())
        } else {
            Ok(())
        }
    }

    /// Whether an allowed command with `grant` starts, and why not: the
    /// host could not run it here. Checked in the order a start needs them.
    pub(crate) fn start_verdict(&self, call_id: &CallId, grant: SandboxGrant) -> StartVerdict {
        let unavailable = grant.sandbox.unavailable_code();
        let verdict = if !self.shell_installed {
            Err(ErrorCode::ShellUnavailable)
        } else if !self.runner_ready {
            Err(unavailable)
        } else if matches!(
            self.workspace,
            WorkspaceFact::Unavailable | WorkspaceFact::NotLookedAt
        ) {
            Err(ErrorCode::InvalidCommandInput)
        } else if self.workspace_replaced() {
            Err(ErrorCode::CommandCwdEscape)
        } else {
            match self.cwd_inside(call_id) {
                Ok(true) => Ok(()),
                Ok(false) => Err(ErrorCode::InvalidCommandInput),
                // A cwd that is not text cannot be given to the runner.
                Err(_) if matches!(self.call(call_id).map(|call| &call.cwd), Some(CwdFact::NotText)) => {
                    Err(ErrorCode::InvalidCommandInput)
                }
                Err(code) => Err(code),
            }
        };
        let verdict = verdict.and_then(|()| {
            // What the sandbox needs here: a scratch root a sandboxed
            // command cannot reach, a database whose side files P7 can keep
            // (not directly in the workspace root), the session's own
            // network namespace for a networked command.
            let confined = grant.sandbox != Sandbox::None;
            let writes = grant.sandbox == Sandbox::WorkspaceWrite;
            if (confined && !self.scratch_outside_workspace)
                || (writes && self.database_in_workspace_root)
                || (writes && grant.network && !self.network_ready)
            {
                Err(unavailable)
            } else if !self.call(call_id).is_some_and(|call| call.scratch_ready) {
                Err(ErrorCode::Internal)
            } else {
                Ok(())
            }
        });
        match verdict {
            Ok(()) => StartVerdict::Spawn,
            Err(code) => StartVerdict::Fail(code),
        }
    }

    /// The workspace to bind with this decision: the one found, when the
    /// session has bound none yet.
    pub(crate) fn unbound_workspace(&self) -> Option<WorkspaceIdentity> {
        match &self.workspace {
            WorkspaceFact::Found {
                found, bound: None, ..
            } => Some(*found),
            WorkspaceFact::Found { bound: Some(_), .. }
            | WorkspaceFact::NotLookedAt
            | WorkspaceFact::Unavailable => None,
        }
    }
}

/// A command plan-core allowed, as it starts: the request the host spawns
/// from and the run as recorded (`running`, or `failedToStart` with its
/// code when the facts said it cannot run here; then nothing is spawned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLaunch {
    /// What to spawn.
    pub request: CommandRequest,
    /// The run as its `commandStarted` entry (and, when it failed to
    /// start, its `commandEnded` entry) records it.
    pub run: CommandRun,
}

impl CommandLaunch {
    /// Whether the host spawns it.
    pub fn spawns(&self) -> bool {
        self.run.state == CommandState::Running
    }
}

/// The run of a command that starts now: `running` with the facts' shell,
/// or ended `failedToStart` at once.
pub(crate) fn launch(request: CommandRequest, facts: &CommandFacts, now: UnixMs) -> CommandLaunch {
    let verdict = facts.start_verdict(&request.call_id, request.grant);
    let mut run = CommandRun {
        call_id: request.call_id.clone(),
        session_id: request.session_id.clone(),
        turn_id: request.turn_id.clone(),
        command: request.input.command.clone(),
        cwd: request.input.cwd.clone(),
        shell: facts.shell.clone(),
        sandbox: request.grant.sandbox,
        network: request.grant.network,
        state: CommandState::Running,
        exit_code: None,
        signal: None,
        error_code: None,
        started_at: now,
        ended_at: None,
        stdout_bytes: 0,
        stderr_bytes: 0,
        truncated: false,
    };
    if let StartVerdict::Fail(code) = verdict {
        run.state = CommandState::FailedToStart;
        run.error_code = Some(code);
        run.ended_at = Some(now);
    }
    CommandLaunch { request, run }
}

/// The record of a refused start: what was asked (the input's own text,
/// or nothing), with the sandbox it would have had (read-only outside any
/// turn) and the refusal's code; nothing ran.
pub(crate) fn refused_run(
    session: &crate::Session,
    turn_id: &TurnId,
    call_id: &CallId,
    input: &serde_json::Value,
    grant: SandboxGrant,
    code: ErrorCode,
    now: UnixMs,
) -> CommandRun {
    let text = |key: &str| input.get(key).and_then(serde_json::Value::as_str);
    CommandRun {
        call_id: call_id.to_owned(),
        session_id: session.id.clone(),
        turn_id: turn_id.clone(),
        command: text("command").unwrap_or_default().to_owned(),
        cwd: text("cwd").unwrap_or(".").to_owned(),
        shell: CommandShell {
            id: session.shell.clone().unwrap_or_default(),
            path: String::new(),
        },
        sandbox: grant.sandbox,
        network: grant.network,
        state: CommandState::FailedToStart,
        exit_code: None,
        signal: None,
        error_code: Some(code),
        started_at: now,
        ended_at: Some(now),
        stdout_bytes: 0,
        stderr_bytes: 0,
        truncated: false,
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
    pub call_id: CallId,
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
    /// A Plan-turn Bash call decided and registered for a client that
    /// names it by reference (`command/register`): it starts only through
    /// `command/run` with that reference, in this turn, once.
    Registered,
    /// Started and not yet ended.
    Running,
    /// Started and ended (or failed to start).
    Ended,
}

/// A Bash call of the active turn registered for a client that carries a
/// reference instead of the command (an agent's client outside its own
/// sandbox): the reference the host drew, and the input that runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// The host's fresh, unguessable reference.
    pub reference: String,
    /// The Bash input `{command, cwd?, timeoutMs?}` as registered.
    pub input: serde_json::Value,
}

/// One Bash call of the active turn (memory only, like the turn).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnCommand {
    /// The tool call id.
    pub call_id: CallId,
    /// Where it stands.
    pub status: TurnCommandStatus,
    /// The digest of the call's input: what was decided (and, under `ask`
    /// or `accept-edits`, what a person confirmed), so `command/start` runs
    /// exactly this command, in this `cwd`, with this timeout, or nothing.
    /// A call whose input was not a valid Bash input has a digest no start
    /// matches; such a call can never start.
    pub input: CallDigest,
    /// Its registration for a reference-carrying client; kept once the
    /// call started, so a reference presented again is known as spent.
    pub registration: Option<Registration>,
}

impl TurnCommand {
    /// Whether `command/run` with `reference` may start this call: it is
    /// registered under that reference and has not started.
    pub fn awaits_run_by(&self, reference: &str) -> bool {
        matches!(
            self.status,
            TurnCommandStatus::Registered | TurnCommandStatus::Allowed
        ) && self.is_registered_as(reference)
    }

    /// Whether this call was registered under `reference`, started or not.
    pub fn is_registered_as(&self, reference: &str) -> bool {
        self.registration
            .as_ref()
            .is_some_and(|registration| registration.reference == reference)
    }
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
