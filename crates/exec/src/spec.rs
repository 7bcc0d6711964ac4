//! What the caller asks for: one command, where it runs, how long it may
//! take, how much of its output is kept, and which confinement applies.
//!
//! These are plain values. This module decides nothing about *which*
//! confinement a command deserves; the caller (the host, following
//! plan-core's rules) chooses it and this crate carries it out or refuses.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::scratch::ScratchDir;
use std::time::Duration;

/// The `PATH` a command gets when the caller's environment additions do not
/// set one.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The `LANG` a command gets when the caller's additions do not set one, so
/// tools print UTF-8 rather than ASCII fallbacks.
pub const DEFAULT_LANG: &str = "C.UTF-8";

/// The retained-output cap the protocol uses by default (1 MiB).
pub const DEFAULT_OUTPUT_CAP: u64 = 1024 * 1024;

/// How the kernel confines a command. Chosen by the caller; never weakened
/// here: a confinement that cannot be applied makes the command fail to start
/// with [`crate::ExecError::SandboxUnavailable`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Confinement {
    /// No sandbox: the command runs with the host's own rights (it is still
    /// supervised: own process group, timeout, background jobs killed, dies
    /// with the host).
    None,
    /// Everything readable; writes only inside the scratch directory and to
    /// `/dev/null`; no network (no socket other than a local stream
    /// socketpair); no metadata changes, no escape from the process group,
    /// no privileges, no mount/ptrace/module loading.
    ReadOnly,
    /// As [`Confinement::ReadOnly`], and the workspace root is writable too.
    /// `network: true` lifts only the socket restrictions.
    WorkspaceWrite {
        /// The directory tree the command may write besides the scratch dir.
        workspace_root: PathBuf,
        /// Whether sockets (TCP, UDP, unix connects) are allowed.
        network: bool,
    },
}

impl Confinement {
    /// Whether the kernel sandbox helper has to apply restrictions.
    pub fn is_sandboxed(&self) -> bool {
        match self {
            Confinement::None => false,
            Confinement::ReadOnly | Confinement::WorkspaceWrite { .. } => true,
        }
    }
}

/// What the sandbox hides and keeps read-only beyond the confinement's own
/// rules, and whether namespaces carry it. Only used for a sandboxed
/// confinement.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Isolation {
    /// Whether the helper enters new mount, IPC and (offline) network
    /// namespaces, and a user namespace when not root, with a private `/dev`
    /// (only `null`, `zero`, `full`, `random`, `urandom`), the scratch root
    /// and [`Isolation::hidden`] hidden, and for workspace-write every mount
    /// read-only but the workspace and the scratch directory, with the
    /// workspace's protected paths and [`Isolation::protected`] read-only
    /// inside it. `false` (a kernel without namespaces, or a host that skips
    /// them): Landlock and seccomp only. The default is `false`, because the
    /// caller must know from [`crate::Runner::sandbox_support`] that the
    /// kernel allows them: asking for them where it does not makes every
    /// sandboxed command fail to start.
    pub namespaces: bool,
    /// The directory holding every command's scratch directory (the host's
    /// scratch root): hidden inside the namespaces, except
    /// [`CommandSpec::scratch`] itself. `None`: nothing is hidden for it.
    pub scratch_root: Option<PathBuf>,
    /// Paths covered by something empty and read-only inside the namespaces
    /// (the host's database directory, or its database and side files).
    pub hidden: Vec<PathBuf>,
    /// Paths kept read-only inside a writable workspace, besides the ones
    /// every workspace has (its `.git` and what a `.git` file names, nested
    /// repositories' `.git`, `.pi`).
    pub protected: Vec<PathBuf>,
}

/// One command to run as `<shell> -c <command>`.
///
/// The environment is cleared and rebuilt from: `PATH` =
/// [`DEFAULT_PATH`], `LANG` = [`DEFAULT_LANG`], then every entry of `env`
/// in order (later entries win, so `env` may override `PATH` and `LANG`), and
/// finally `TMPDIR` = the scratch directory's path, which `env` cannot
/// override. Nothing of
/// the host's own environment leaks in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandSpec {
    /// Absolute path of the shell, run as `<shell> -c <command>`.
    pub shell: PathBuf,
    /// The command text handed to `-c`. Must not contain a NUL byte.
    pub command: String,
    /// The working directory (must exist).
    pub cwd: PathBuf,
    /// Environment additions on top of the minimal environment.
    pub env: Vec<(OsString, OsString)>,
    /// The command's scratch directory, held open: its path is exported as
    /// `TMPDIR`, and the directory itself (the descriptor, wherever its path
    /// leads by now) is writable under every confinement.
    pub scratch: ScratchDir,
    /// Wall-clock limit from spawn; then SIGTERM to the process group.
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL after a timeout or cancellation.
    pub grace: Duration,
    /// How many raw output bytes (both streams together, in arrival order)
    /// are delivered as output events; later bytes are only counted, and
    /// the outcome says `truncated`.
    pub output_cap: u64,
    /// The confinement to apply.
    pub confinement: Confinement,
    /// The namespaces and what they hide and protect.
    pub isolation: Isolation,
}

impl CommandSpec {
    /// The complete environment the command starts with (see the type's
    /// documentation for the rules).
    pub fn environment(&self) -> Vec<(OsString, OsString)> {
        let mut entries: Vec<(OsString, OsString)> = vec![
            (OsString::from("PATH"), OsString::from(DEFAULT_PATH)),
            (OsString::from("LANG"), OsString::from(DEFAULT_LANG)),
        ];
        for (key, value) in &self.env {
            if key == "TMPDIR" {
                continue;
            }
            entries.retain(|(existing, _)| existing != key);
            entries.push((key.clone(), value.clone()));
        }
        entries.push((
            OsString::from("TMPDIR"),
            self.scratch.path().as_os_str().to_owned(),
        ));
        entries
    }
}
