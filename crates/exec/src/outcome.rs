//! What a finished command reports: its end state, exit status, byte counts
//! and output hash, or why it never ran.
//!
//! This module only describes results; it maps nothing to protocol codes
//! beyond offering each error's stable canonical name.

use std::path::PathBuf;

/// How a command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandState {
    /// The shell exited (normally or by a signal it did not get from us).
    Exited,
    /// The timeout elapsed; the process group got SIGTERM, then SIGKILL after
    /// the grace.
    TimedOut,
    /// [`crate::CancelHandle::cancel`] was called while it ran; handled like
    /// a timeout.
    Cancelled,
    /// Nothing ran; [`CommandOutcome::error`] says why.
    FailedToStart,
    /// The supervisor process vanished without a report (something outside
    /// killed it). The shell died with it through its parent-death signal;
    /// the exit status is unknown.
    Lost,
}

/// Why a command did not run. One enum for the crate; the host maps each
/// variant to its canonical code, in one place (plan-exec has no codes of
/// its own, so a client only ever sees the one code set).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// A requested confinement could not be applied (kernel without
    /// Landlock ABI 3 or seccomp, unsupported architecture, missing sandbox
    /// helper, a rule path that cannot be opened, ...). Nothing ran: there is
    /// no fallback to a weaker sandbox.
    #[error("the requested sandbox cannot be applied: {reason}")]
    SandboxUnavailable {
        /// A human-readable explanation.
        reason: String,
    },
    /// The shell could not be executed (missing or not executable).
    #[error("the shell {shell:?} cannot be run: {reason}")]
    ShellUnavailable {
        /// The shell path from the spec.
        shell: PathBuf,
        /// The operating system's explanation.
        reason: String,
    },
    /// The working directory does not exist or cannot be entered.
    #[error("the working directory {cwd:?} cannot be used: {reason}")]
    CwdUnavailable {
        /// The cwd from the spec.
        cwd: PathBuf,
        /// The operating system's explanation.
        reason: String,
    },
    /// The scratch directory is missing or not a directory.
    #[error("the scratch directory {path:?} is missing or not a directory")]
    ScratchDirMissing {
        /// The scratch dir from the spec (or the one asked to be created).
        path: PathBuf,
    },
    /// The spec cannot be expressed as a process (for example a NUL byte in
    /// the command), or a scratch directory name is not a plain name.
    #[error("invalid command spec: {reason}")]
    InvalidSpec {
        /// What is wrong.
        reason: String,
    },
    /// A scratch directory could not be created or removed.
    #[error("scratch directory {path:?}: {reason}")]
    ScratchDir {
        /// The directory concerned.
        path: PathBuf,
        /// The operating system's explanation.
        reason: String,
    },
    /// Any other operating-system failure while starting or supervising.
    #[error("cannot start the command: {reason}")]
    Spawn {
        /// The operating system's explanation.
        reason: String,
    },
}

/// The result of one command.
///
/// The hashes cover exactly the text delivered in output events, so whoever
/// kept the events can verify them: `stdout_sha256` is the lowercase hex
/// SHA-256 of the concatenated `chunk`s of every stdout event (UTF-8 bytes,
/// after U+FFFD repair), `stderr_sha256` the same for stderr, and
/// `output_sha256` the SHA-256 of the 64 bytes `SHA-256(stdout text) ||
/// SHA-256(stderr text)`. For output that is valid UTF-8 and within the cap
/// the inner hashes are those of the raw streams (`sha256sum` of each).
/// Bytes past the retained-output cap are counted in `stdout_bytes` /
/// `stderr_bytes`, not hashed: nobody keeps them, and hashing every byte of
/// a large output would cost more than reading it. A command that never ran
/// hashes two empty texts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandOutcome {
    /// How it ended.
    pub state: CommandState,
    /// The shell's exit code, when it exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended the shell, when one did.
    pub signal: Option<i32>,
    /// Raw bytes the command wrote to stdout (all of them, retained or not).
    pub stdout_bytes: u64,
    /// Raw bytes the command wrote to stderr (all of them, retained or not).
    pub stderr_bytes: u64,
    /// Whether output past the retained-output cap was dropped.
    pub truncated: bool,
    /// Lowercase hex SHA-256 of the delivered stdout text.
    pub stdout_sha256: String,
    /// Lowercase hex SHA-256 of the delivered stderr text.
    pub stderr_sha256: String,
    /// The combined output hash defined above.
    pub output_sha256: String,
    /// Why the command did not run; `Some` exactly when `state` is
    /// [`CommandState::FailedToStart`].
    pub error: Option<ExecError>,
}
