//! The values the typed host API takes and returns: options, new-session
//! settings, tool-call outcomes and verified artifact content.
//!
//! These are plain data with their wire conversions; they decide nothing and
//! touch nothing.

use std::sync::Arc;

use std::path::PathBuf;
use std::time::Duration;

use plan_core::{CommandShell, LimitError, Limits, Mode, PermissionMode, SessionId};

use crate::clock::{Clock, SystemClock};
use crate::shells::default_catalog;

/// How a host is set up. Every field has a default; name only what
/// differs. The settings a frontend gives (`serve`'s flags, the FFI's
/// record, a JSON file) are a [`HostConfig`](crate::HostConfig), which
/// [`HostConfig::options`](crate::HostConfig::options) turns into these;
/// the fields no frontend can give (the clock, the expiry timer, the
/// frontend's decision channel, the shells) are set here.
///
/// ```
/// use plan_host::{ExpiryTimer, HostOptions, Limits};
///
/// let options = HostOptions {
///     limits: Limits::new(10 * 60 * 1000, 1024 * 1024)?,
///     expiry: ExpiryTimer::Automatic,
///     ..HostOptions::default()
/// };
/// assert_eq!(options.limits.approval_ttl_ms(), 600_000);
/// # Ok::<(), plan_host::LimitError>(())
/// ```
#[derive(Clone)]
pub struct HostOptions {
    /// Approval TTL and markdown limit.
    pub limits: Limits,
    /// The time source.
    pub clock: Arc<dyn Clock>,
    /// The selectable shells.
    pub shells: Vec<CommandShell>,
    /// The sandbox helper (`plan-exec-sandbox`, or a binary that acts as
    /// it), an absolute path. `None`: the one bundled next to the current
    /// executable (or one directory up, where Cargo puts test binaries);
    /// never one found on `PATH` or relative to the working directory.
    /// It is opened and checked once at [`crate::Host::open`] and that
    /// opened file runs every command. Without a helper that passes the
    /// checks no command runs and Plan Bash is `PLAN_SANDBOX_UNAVAILABLE`.
    pub sandbox_helper: Option<PathBuf>,
    /// The scratch root: where each command's fresh scratch directory is
    /// made. It must be (or is created as) a private directory of the
    /// host's user (mode 0700), reached from `/` without a symlink, outside
    /// every workspace; a root that fails these checks is refused, not
    /// repaired, and no command runs (`PLAN_SANDBOX_UNAVAILABLE` /
    /// `SANDBOX_UNAVAILABLE`, the reason in `initialize`). `None`: one per
    /// database under `$XDG_RUNTIME_DIR` or the system temporary directory
    /// (see `plan_exec::ScratchRoot::default_for`), never beside the
    /// database. The startup fence empties it.
    pub scratch_root: Option<PathBuf>,
    /// The retained-output cap per command (both streams), in bytes.
    pub command_output_cap: u64,
    /// Between SIGTERM and SIGKILL after a timeout or cancellation.
    pub command_grace: Duration,
    /// A command inherits the host's environment except variables whose
    /// names contain one of these (case-insensitively); default
    /// [`plan_core::DEFAULT_SECRET_ENV_MARKERS`]. `TMPDIR` is always the
    /// command's scratch directory.
    pub command_env_secret_markers: Vec<String>,
    /// Who fires approval deadlines: the host's own timer thread
    /// ([`ExpiryTimer::Automatic`], the default) or the embedder
    /// ([`ExpiryTimer::Manual`]).
    pub expiry: ExpiryTimer,
    /// Skips the sandbox's namespaces even where the kernel allows them, as
    /// on a kernel without them: Plan Bash still runs under Landlock and
    /// seccomp, the database and other scratch directories are no longer
    /// hidden and terminals are reachable (P8 is not enforced), and Agent
    /// `auto` is `SANDBOX_UNAVAILABLE` unless
    /// `limits.commands.auto_without_sandbox` is set (P7 is not enforced).
    pub skip_namespaces: bool,
    /// More paths kept read-only inside a writable workspace under `auto`,
    /// besides every repository's metadata and what its configuration
    /// names, `.pi` and every agent's configuration (plan-core's
    /// `protected_root_names`), the database with its side files and the
    /// helper. One that does not exist yet is reserved: made an empty
    /// directory before a command starts, so no command can create it.
    pub protected_paths: Vec<PathBuf>,
    /// How much a command's scratch directory (`TMPDIR`) may hold where the
    /// sandbox's namespaces are in use: it is then a private tmpfs (memory)
    /// of this size, with an inode cap that grows with it. Without
    /// namespaces the scratch directory is an ordinary directory of the
    /// scratch root, not capped.
    pub scratch_size: ScratchSize,
    /// Where the approval card's web server listens, or `None` (the
    /// default) for no web server. The host holds it; the `plan-server`
    /// crate's web module starts the server from it.
    pub web: Option<crate::WebOptions>,
    /// The person's notifier, or `None` (the default): a command line run
    /// as `/bin/sh -c <notifier>` once each time a plan becomes pending,
    /// with a `PendingPlanNotice` (JSON, the card URL in it when the web
    /// card is on) on its stdin, so the person hears of it on a phone
    /// (ntfy, a chat webhook) or a desktop notification. It runs on a thread
    /// of its own with the host's environment, its output discarded, and is
    /// killed after [`NOTIFIER_LIMIT`](crate::NOTIFIER_LIMIT): nothing it
    /// does delays a decision or a deadline. The `plan-server` crate runs it
    /// (it knows the card URL).
    pub notifier: Option<String>,
    /// Where the audit is exported as OpenTelemetry log records, or `None`
    /// (the default) for no export. [`plan_audit_export::ExportConfig::from_env`]
    /// reads the standard `OTEL_*` variables into one. The host runs the
    /// exporter on its own thread from [`crate::Host::open`] until
    /// [`crate::Host::close`]; a decision never waits on it.
    pub audit_export: Option<plan_audit_export::ExportConfig>,
    /// Told, on the exporter's thread, when the export starts failing and
    /// when it recovers (once each per change); `serve` writes each as one
    /// line on its stderr. Whatever it is, `db status` shows the last error.
    pub export_observer: Option<plan_audit_export::ExportObserver>,
    /// The frontend whose client this host answers: the audit records it as
    /// the channel of each decision its client makes (a decision relayed by
    /// the web card records the card instead). `serve` sets
    /// [`DecisionChannel::Rpc`], the FFI [`DecisionChannel::Ffi`]; the
    /// default is [`DecisionChannel::Rust`].
    ///
    /// [`DecisionChannel::Rpc`]: plan_storage::DecisionChannel::Rpc
    /// [`DecisionChannel::Ffi`]: plan_storage::DecisionChannel::Ffi
    /// [`DecisionChannel::Rust`]: plan_storage::DecisionChannel::Rust
    pub frontend: plan_storage::DecisionChannel,
}

/// The size cap of a command's private scratch tmpfs, in megabytes
/// (MiB). Only [`ScratchSize::from_megabytes`] (or the default, 1024 MB)
/// makes one, so a value that exists is in range: `serve`'s
/// `--scratch-size-mb`, the FFI option and Rust embedders meet the same rule.
///
/// ```
/// use plan_host::{ErrorCode, ScratchSize};
///
/// assert_eq!(ScratchSize::default().megabytes(), 1024);
/// assert_eq!(ScratchSize::from_megabytes(64)?.megabytes(), 64);
/// // Zero (which tmpfs would read as "no limit") is refused, never clamped.
/// assert_eq!(ScratchSize::from_megabytes(0).unwrap_err().code(), ErrorCode::InvalidParams);
/// # Ok::<(), plan_host::LimitError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScratchSize {
    megabytes: u64,
    cap: plan_exec::ScratchCap,
}

impl ScratchSize {
    /// 1 GiB.
    pub const DEFAULT_MEGABYTES: u64 = 1024;
    /// 1 TiB: an upper bound of the memory a command may fill, not a
    /// reservation.
    pub const MAX_MEGABYTES: u64 = 1024 * 1024;

    /// A cap of `megabytes` MiB, from 1 to [`ScratchSize::MAX_MEGABYTES`];
    /// anything else is refused with `INVALID_PARAMS` and says the range.
    pub fn from_megabytes(megabytes: u64) -> Result<ScratchSize, LimitError> {
        let refused = || LimitError {
            limit: "scratch size",
            value: format!("{megabytes} MB"),
            range: format!("from 1 MB to {} MB (1 TiB)", ScratchSize::MAX_MEGABYTES),
        };
        if !(1..=ScratchSize::MAX_MEGABYTES).contains(&megabytes) {
            return Err(refused());
        }
        let cap = plan_exec::ScratchCap::for_size(megabytes * 1024 * 1024).map_err(|_| refused())?;
        Ok(ScratchSize { megabytes, cap })
    }

    /// The cap in megabytes (MiB).
    pub fn megabytes(&self) -> u64 {
        self.megabytes
    }

    /// The cap as the sandbox applies it (bytes and inodes).
    pub(crate) fn cap(&self) -> plan_exec::ScratchCap {
        self.cap
    }
}

impl Default for ScratchSize {
    fn default() -> Self {
        ScratchSize {
            megabytes: ScratchSize::DEFAULT_MEGABYTES,
            cap: plan_exec::ScratchCap::default(),
        }
    }
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            limits: Limits::default(),
            clock: Arc::new(SystemClock),
            shells: default_catalog(),
            sandbox_helper: None,
            scratch_root: None,
            command_output_cap: plan_exec::DEFAULT_OUTPUT_CAP,
            command_grace: Duration::from_secs(2),
            command_env_secret_markers: plan_core::DEFAULT_SECRET_ENV_MARKERS
                .iter()
                .map(|marker| (*marker).to_owned())
                .collect(),
            expiry: ExpiryTimer::Automatic,
            skip_namespaces: false,
            protected_paths: Vec::new(),
            scratch_size: ScratchSize::default(),
            web: None,
            notifier: None,
            audit_export: None,
            export_observer: None,
            frontend: plan_storage::DecisionChannel::Rust,
        }
    }
}

impl std::fmt::Debug for HostOptions {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("HostOptions")
            .field("limits", &self.limits)
            .field("shells", &self.shells)
            .field("expiry", &self.expiry)
            .field("web", &self.web)
            .field("audit_export", &self.audit_export)
            .finish_non_exhaustive()
    }
}

/// A new session's settings; [`Host::create_session`]'s example makes one.
///
/// [`Host::create_session`]: crate::Host::create_session
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewSession {
    /// The id to use; the host makes one when `None`.
    pub session_id: Option<SessionId>,
    /// Absolute workspace root; `None` for a session not bound to a project.
    pub workspace_root: Option<String>,
    /// Initial mode (Agent when `None`).
    pub mode: Option<Mode>,
    /// Initial permission mode (`ask` when `None`).
    pub permission_mode: Option<PermissionMode>,
}

/// Who fires approval deadlines.
///
/// ```
/// use plan_host::{ExpiryTimer, HostOptions};
///
/// // The default: the host runs its own timer thread.
/// assert_eq!(HostOptions::default().expiry, ExpiryTimer::Automatic);
/// // Opting out: the embedder calls `Host::expire_due` at `Host::next_deadline`.
/// let options = HostOptions { expiry: ExpiryTimer::Manual, ..HostOptions::default() };
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ExpiryTimer {
    /// [`crate::Host::open`] starts a timer thread that expires approvals on
    /// time, and the first submission a thread that flushes artifacts while
    /// their rows are written; both stop on `close` and when the host is
    /// dropped.
    #[default]
    Automatic,
    /// No thread: the embedder's own event loop calls
    /// [`crate::Host::expire_due`] at [`crate::Host::next_deadline`]. Until
    /// it does, an overdue approval is still expired by any request that
    /// touches it (it can never be approved late), but no
    /// `plan/approvalResolved` is sent on time. A submission's fsyncs run
    /// on the thread that submits.
    Manual,
}
