//! What the caller asks for: one command, where it runs, how long it may
//! take, how much of its output is kept, and which confinement applies.
//!
//! These are plain values. This module decides nothing about *which*
//! confinement a command deserves; the caller (the host, following
//! plan-core's rules) chooses it and this crate carries it out or refuses.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::outcome::ExecError;
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
    /// (the host's database directory and its database and side files). A
    /// directory that holds a path the command needs (see
    /// [`Isolation::visible`]) is covered all the same, with only those paths
    /// bound back in; a hidden directory that is itself such a path is
    /// refused ([`crate::ExecError::SandboxUnavailable`]).
    pub hidden: Vec<PathBuf>,
    /// Paths kept read-only inside a writable workspace where they exist,
    /// besides what every workspace's repositories hold (see the crate's
    /// README: every repository's metadata in every shape, and what its
    /// configuration names as a program git runs or a file git reads).
    pub protected: Vec<PathBuf>,
    /// Paths kept read-only inside a writable workspace, and reserved where
    /// missing: the helper makes what is missing of them as empty
    /// directories before the command starts (a name that does not exist
    /// cannot be covered), so a command cannot create them.
    pub reserved: Vec<PathBuf>,
    /// Names kept read-only wherever an entry of the workspace has them
    /// (at any depth; a symbolic link of such a name refuses the command,
    /// as a mount cannot cover a link), and reserved at the root of a
    /// writable workspace where missing (an empty directory made there).
    pub protected_names: Vec<OsString>,
    /// Names hidden (an empty read-only cover) wherever an entry of the
    /// workspace has them, under every sandboxed confinement, and reserved
    /// at the root of a writable workspace where missing.
    pub hidden_names: Vec<OsString>,
    /// Directories that stay visible inside a hidden directory (the host's
    /// workspace root, so a Plan command can read it even where the
    /// database's directory is one of its ancestors). The workspace root of
    /// a workspace-write confinement, the working directory and the scratch
    /// root stay visible without being named here.
    pub visible: Vec<PathBuf>,
    /// The size and inode cap of the command's scratch directory inside the
    /// namespaces, where it is a private tmpfs of its own (without
    /// namespaces the scratch directory is the host's and has no cap).
    pub scratch_cap: ScratchCap,
    /// What the command may take from the machine: processes, memory,
    /// inotify objects, open files (see [`CommandBounds`]). Each bound
    /// asked for is applied or the command does not start.
    pub bounds: CommandBounds,
}

/// What one command (everything it starts included) may take from the
/// machine, so that it cannot starve the host, the person's other programs
/// or other commands. `None` leaves a bound unasked; a bound asked for is
/// applied completely or the command does not start
/// ([`crate::ExecError::SandboxUnavailable`]). Which bounds this machine
/// can give is [`crate::SandboxSupport::Available`]'s `bounds`; the caller
/// (who decides the values) asks only for those. Only used for a sandboxed
/// confinement.
///
/// How each is kept (see the crate's README for the details):
/// - `tasks`: the command's processes and threads, by the `pid_max` of its
///   own PID namespace (Linux 6.14 and newer, root or not), the `pids`
///   controller of a cgroup of its own where the host can make one (cgroup
///   v1 or v2), and `RLIMIT_NPROC` counted in its own user namespace when
///   the host is not root (root is never bound by `RLIMIT_NPROC`);
/// - `memory_bytes`: the `memory` controller of a cgroup of its own (swap
///   included), which also counts the kernel memory of its pipes, files,
///   inotify watches and its scratch tmpfs pages;
/// - `inotify`: the limits of its own user namespace
///   (`user.max_inotify_instances` and `user.max_inotify_watches`), which
///   the kernel counts against the user's own limits too, so a command
///   holds at most this many of the user's pool;
/// - `open_files`: `RLIMIT_NOFILE` of every process of the command (with
///   `tasks`, a bound on its pipes, sockets and files).
///
/// Kernel objects no command may have at all are refused by the seccomp
/// filter of every sandboxed command, asked for or not: AIO contexts
/// (`io_setup`, which draws on the machine-wide `fs.aio-max-nr`), keys and
/// keyrings, System V IPC and POSIX message queues, io_uring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommandBounds {
    /// Processes and threads at once, the helper's own stage and the PID
    /// namespace's init included: from [`CommandBounds::MIN_TASKS`] to
    /// [`CommandBounds::MAX_TASKS`].
    pub tasks: Option<u64>,
    /// Memory in bytes (anonymous, page cache, tmpfs, kernel objects; no
    /// swap beyond it): from [`CommandBounds::MIN_MEMORY_BYTES`].
    pub memory_bytes: Option<u64>,
    /// inotify instances and watches.
    pub inotify: Option<InotifyBound>,
    /// Open descriptors per process: from 16 to 1048576.
    pub open_files: Option<u64>,
}

/// A command's inotify instances and watches: each at least 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InotifyBound {
    /// inotify instances (`inotify_init`) at once.
    pub instances: u64,
    /// Watches across them.
    pub watches: u64,
}

impl CommandBounds {
    /// The fewest tasks: the kernel's smallest `pid_max` is 301, PIDs 1 to
    /// 300.
    pub const MIN_TASKS: u64 = 300;
    /// The most tasks: the kernel's largest `pid_max` (4194304) less one.
    pub const MAX_TASKS: u64 = 4_194_303;
    /// The least memory: 16 MiB (a shell and its helper need a few).
    pub const MIN_MEMORY_BYTES: u64 = 16 * 1024 * 1024;
    /// The fewest open files per process.
    pub const MIN_OPEN_FILES: u64 = 16;
    /// The most open files per process (the kernel's default `nr_open`).
    pub const MAX_OPEN_FILES: u64 = 1024 * 1024;

    /// Whether no bound is asked for.
    pub fn is_empty(&self) -> bool {
        *self == CommandBounds::default()
    }

    /// `Ok` when every bound asked for is in its range.
    ///
    /// # Errors
    ///
    /// [`ExecError::InvalidSpec`] naming the bound and its range.
    pub fn check(&self) -> Result<(), ExecError> {
        let out_of_range = |what: &str, value: u64, range: String| {
            Err(ExecError::InvalidSpec {
                reason: format!("a bound of {value} {what} is out of range: it must be {range}"),
            })
        };
        if let Some(tasks) = self.tasks
            && !(Self::MIN_TASKS..=Self::MAX_TASKS).contains(&tasks)
        {
            return out_of_range(
                "tasks",
                tasks,
                format!("from {} to {}", Self::MIN_TASKS, Self::MAX_TASKS),
            );
        }
        if let Some(memory) = self.memory_bytes
            && memory < Self::MIN_MEMORY_BYTES
        {
            return out_of_range(
                "bytes of memory",
                memory,
                format!("at least {}", Self::MIN_MEMORY_BYTES),
            );
        }
        if let Some(inotify) = self.inotify
            && (inotify.instances == 0
                || inotify.watches == 0
                || inotify.instances > i32::MAX as u64
                || inotify.watches > i32::MAX as u64)
        {
            return out_of_range(
                "inotify instances or watches",
                inotify.instances.min(inotify.watches),
                format!("from 1 to {}", i32::MAX),
            );
        }
        if let Some(files) = self.open_files
            && !(Self::MIN_OPEN_FILES..=Self::MAX_OPEN_FILES).contains(&files)
        {
            return out_of_range(
                "open files",
                files,
                format!("from {} to {}", Self::MIN_OPEN_FILES, Self::MAX_OPEN_FILES),
            );
        }
        Ok(())
    }
}

/// How much a command's private scratch tmpfs may hold: bytes (memory, as
/// tmpfs pages are) and inodes (files and directories). Only
/// [`ScratchCap::new`], [`ScratchCap::for_size`] and the default make one, so
/// a cap that exists is in range: never zero, which tmpfs would read as
/// "no limit".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScratchCap {
    size_bytes: u64,
    inodes: u64,
}

impl ScratchCap {
    /// 1 GiB.
    pub const DEFAULT_SIZE_BYTES: u64 = 1024 * 1024 * 1024;
    /// The smallest size: 64 KiB.
    pub const MIN_SIZE_BYTES: u64 = 64 * 1024;
    /// The largest size: 1 TiB (an upper bound, not a reservation).
    pub const MAX_SIZE_BYTES: u64 = 1024 * 1024 * 1024 * 1024;
    /// The fewest inodes: 16.
    pub const MIN_INODES: u64 = 16;
    /// The most inodes: 2^32.
    pub const MAX_INODES: u64 = 1 << 32;
    /// [`ScratchCap::for_size`] grants one inode per this many bytes...
    pub const BYTES_PER_INODE: u64 = 16 * 1024;
    /// ...but at least this many.
    pub const MIN_DERIVED_INODES: u64 = 1024;

    /// A cap of `size_bytes` (from [`ScratchCap::MIN_SIZE_BYTES`] to
    /// [`ScratchCap::MAX_SIZE_BYTES`]) and `inodes` (from
    /// [`ScratchCap::MIN_INODES`] to [`ScratchCap::MAX_INODES`]).
    ///
    /// # Errors
    ///
    /// [`ExecError::InvalidSpec`] saying the range, for anything outside.
    pub fn new(size_bytes: u64, inodes: u64) -> Result<ScratchCap, ExecError> {
        if !(Self::MIN_SIZE_BYTES..=Self::MAX_SIZE_BYTES).contains(&size_bytes) {
            return Err(ExecError::InvalidSpec {
                reason: format!(
                    "a scratch size of {size_bytes} bytes is out of range: it must be from {} to {} bytes",
                    Self::MIN_SIZE_BYTES,
                    Self::MAX_SIZE_BYTES
                ),
            });
        }
        if !(Self::MIN_INODES..=Self::MAX_INODES).contains(&inodes) {
            return Err(ExecError::InvalidSpec {
                reason: format!(
                    "a scratch inode cap of {inodes} is out of range: it must be from {} to {}",
                    Self::MIN_INODES,
                    Self::MAX_INODES
                ),
            });
        }
        Ok(ScratchCap { size_bytes, inodes })
    }

    /// A cap of `size_bytes` with one inode per
    /// [`ScratchCap::BYTES_PER_INODE`], at least
    /// [`ScratchCap::MIN_DERIVED_INODES`]: enough files for a build
    /// directory, while the kernel memory of the inodes stays bounded
    /// (tmpfs counts only file contents against its size).
    ///
    /// # Errors
    ///
    /// As [`ScratchCap::new`].
    pub fn for_size(size_bytes: u64) -> Result<ScratchCap, ExecError> {
        let inodes = (size_bytes / Self::BYTES_PER_INODE).clamp(Self::MIN_DERIVED_INODES, Self::MAX_INODES);
        Self::new(size_bytes, inodes)
    }

    /// The size cap, in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// The inode cap.
    pub fn inodes(&self) -> u64 {
        self.inodes
    }
}

impl Default for ScratchCap {
    /// [`ScratchCap::DEFAULT_SIZE_BYTES`] with its derived inode cap
    /// (65536).
    fn default() -> Self {
        ScratchCap {
            size_bytes: Self::DEFAULT_SIZE_BYTES,
            inodes: Self::DEFAULT_SIZE_BYTES / Self::BYTES_PER_INODE,
        }
    }
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
    /// The working directory (must exist). With [`CommandSpec::workspace`]
    /// it is resolved below that open directory (relative, or absolute
    /// below its path) when the command starts; without it, opened by its
    /// path then.
    pub cwd: PathBuf,
    /// The session's workspace, held open since the session bound it: the
    /// working directory is resolved below it, and a workspace-write
    /// confinement's root is this very directory, wherever its path leads
    /// by now. `None`: the paths are opened when the command starts.
    pub workspace: Option<crate::WorkspaceDir>,
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
    /// The network namespace a workspace-write command with the network
    /// joins inside the namespaces (its session's, made once, see
    /// [`crate::NetworkNamespace`]). `None`: such a command gets one made
    /// for it alone and ended with it (the same isolation, slower). Unused
    /// by every other command.
    pub network: Option<crate::NetworkNamespace>,
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
