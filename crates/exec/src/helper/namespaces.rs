//! The namespaces the confining stage enters before Landlock and seccomp,
//! where the kernel allows them: a user namespace of its own (root's too,
//! with its own ids mapped, so that the command's inotify limits can be
//! set there), and new mount, IPC, PID (for the next child, which becomes
//! its init) and network namespaces (with the network option, the
//! session's network namespace joined instead of a new one, with the
//! machine's own addresses unroutable in it). In the private mount
//! tree it builds what Landlock cannot express:
//! - a private `/dev` with only `null`, `zero`, `full`, `random` and
//!   `urandom` (plus the `fd`/`stdin`/`stdout`/`stderr` links to the
//!   process's own descriptors), so no terminal or console is reachable;
//! - a `/proc` of the new PID namespace (mounted by its init), which lists
//!   only the command's own processes;
//! - the scratch root covered by an empty read-only tmpfs, so other
//!   commands' scratch directories are not visible, and the command's own
//!   scratch directory a private tmpfs with a size and inode cap at its
//!   place (the host's directory on disk gets nothing);
//! - the paths the host hides (its database directory, database and side
//!   files) covered by empty read-only mounts, with the directories the
//!   command needs (the workspace, the working directory, the scratch root)
//!   bound back in where a hidden directory holds them;
//! - for `auto`: every mount read-only, the workspace and the scratch
//!   directory made writable again, and the protected paths (`.git` and
//!   what a `.git` file names, nested repositories' `.git`, `.pi`, and the
//!   host's extra paths) bound read-only over the writable workspace.
//!
//! Everything here changes this process's private view only; it must never
//! change a mount, file or directory that the host or any other process
//! sees, and it must fail (so nothing runs) rather than build less than
//! asked.

use std::ffi::CStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode as FileMode, OFlags, ResolveFlags};
use rustix::mount::{MountFlags, MountPropagationFlags};

use crate::spec::ScratchCap;
use crate::wire::{ConfineArgs, Mode};

/// The device nodes a command keeps.
const DEVICES: [&str; 5] = ["null", "zero", "full", "random", "urandom"];

/// The links of a private `/dev` that only name the process's own
/// descriptors (bash's process substitution uses `/dev/fd`).
const FD_LINKS: [(&str, &str); 4] = [
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
];

fn error(what: &str, path: &Path, error: rustix::io::Errno) -> String {
    format!("{what} {}: {error}", path.display())
}

fn open_path(path: &Path) -> Result<OwnedFd, String> {
    rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, FileMode::empty())
        .map_err(|errno| error("opening", path, errno))
}

/// A directory to bind writable: its last component must not be a symlink,
/// so a link planted where the directory was cannot redirect the bind.
fn open_directory(path: &Path) -> Result<OwnedFd, String> {
    rustix::fs::open(
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        FileMode::empty(),
    )
    .map_err(|errno| error("opening", path, errno))
}

/// The device and inode of what `fd` names (`path` is for the message).
fn identity(fd: BorrowedFd<'_>, path: &Path) -> Result<(u64, u64), String> {
    rustix::fs::fstat(fd)
        .map(|stat| (stat.st_dev, stat.st_ino))
        .map_err(|errno| error("checking", path, errno))
}

/// Refuses `opened` unless it is the directory `expected` names.
fn same_directory(opened: &OwnedFd, expected: BorrowedFd<'_>, path: &Path) -> Result<(), String> {
    if identity(opened.as_fd(), path)? == identity(expected, path)? {
        Ok(())
    } else {
        Err(format!(
            "{} is no longer the scratch directory the host made",
            path.display()
        ))
    }
}

/// The path through which `fd` can be named as a mount source.
fn fd_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// Enters the namespaces and builds the private mount tree for `args`, and
/// returns the descriptor the scratch directory's Landlock rule is built
/// from: the command's private tmpfs, opened inside the finished tree
/// (`None` for [`Mode::None`], which has no rules).
///
/// `expected_scratch` is the scratch directory the host made and handed over
/// as a descriptor: the tmpfs is mounted at its place, so the directory is
/// opened again here by its path (never through a symlink), and it must be
/// that very directory (same device and inode), or nothing is built. An
/// earlier command that swapped the path gets a refusal, not a mount of its
/// own choosing.
///
/// `workspace` is the workspace-write root the session bound, by its
/// descriptor, and this process's working directory is the command's (the
/// library resolved it below the workspace): both are named again inside
/// the new namespace by where they are now, without following a symlink,
/// and must still be those very directories, or nothing runs. A workspace
/// renamed or replaced since the session bound it cannot move a command
/// anywhere else.
pub(crate) fn enter(
    args: &ConfineArgs,
    expected_scratch: Option<BorrowedFd<'_>>,
    workspace: Option<BorrowedFd<'_>>,
    network: Option<(BorrowedFd<'_>, Option<BorrowedFd<'_>>)>,
) -> Result<Option<OwnedFd>, String> {
    let networked = match &args.mode {
        Mode::None => return Ok(None),
        Mode::ReadOnly => false,
        Mode::WorkspaceWrite { network, .. } => *network,
    };
    // A networked command joins the namespace the library made for its
    // session (a user-mode stack attached, the host's loopback absent);
    // any other command gets a new, empty one.
    let join = match (networked, network) {
        (true, Some(network)) => Some(network),
        (true, None) => return Err("the network namespace did not arrive".into()),
        (false, _) => None,
    };
    // A read-only command's workspace (when the library held one) is
    // walked for what it hides.
    let workspace = match (&args.mode, workspace) {
        (Mode::WorkspaceWrite { .. } | Mode::ReadOnly, Some(fd)) => {
            let path = crate::workspace::current_path(fd).ok_or("the workspace can no longer be named")?;
            Some((path, identity(fd, Path::new("the workspace"))?))
        }
        (Mode::WorkspaceWrite { .. }, None) => return Err("the workspace's descriptor is missing".into()),
        (Mode::ReadOnly, None) | (Mode::None, _) => None,
    };
    // The working directory is named again once the tree is built: the old
    // one still points into the mounts as they were (for `auto`, below a
    // mount that is read-only by then; under a hidden directory, into what
    // it hides).
    let here = rustix::fs::open(
        ".",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        FileMode::empty(),
    )
    .map_err(|errno| error("opening", Path::new("the working directory"), errno))?;
    let cwd =
        crate::workspace::current_path(here.as_fd()).ok_or("the working directory can no longer be named")?;
    let cwd_identity = identity(here.as_fd(), &cwd)?;
    drop(here);
    let needed = needed_paths(args, workspace.as_ref().map(|(path, _)| path.as_path()), &cwd);
    unshare(join, &args.bounds)?;
    rustix::mount::mount_change("/", MountPropagationFlags::PRIVATE | MountPropagationFlags::REC)
        .map_err(|errno| error("making private", Path::new("/"), errno))?;
    // Everything the new tree binds in is opened now, inside the new
    // namespace (a bind source must be a mount of it) but before any mount
    // covers it.
    let devices = DEVICES
        .iter()
        .map(|name| open_path(&Path::new("/dev").join(name)))
        .collect::<Result<Vec<_>, String>>()?;
    let host_scratch = open_directory(&args.scratch_dir)?;
    if let Some(expected) = expected_scratch {
        same_directory(&host_scratch, expected, &args.scratch_dir)?;
    }
    private_dev(&devices)?;
    let scratch = private_scratch(args, &host_scratch)?;
    for path in &args.hidden {
        hide(path, &needed)?;
    }
    // Named once the covers are in place: a workspace inside a hidden
    // directory is the copy bound back into the cover.
    let workspace_fd = match &workspace {
        Some((path, expected)) => Some(reopen(path, *expected, "the workspace")?),
        None => None,
    };
    // What the workspace holds to protect and hide, found before anything
    // is read-only (missing names are reserved on the way).
    let writable = matches!(args.mode, Mode::WorkspaceWrite { .. });
    let (user_configuration, home) = git_user_configuration(&args.env);
    let plan = match (&workspace, &workspace_fd) {
        (Some((path, _)), Some(workspace_fd)) => Some(super::protect::plan(
            workspace_fd.as_fd(),
            &super::protect::Request {
                workspace: path,
                writable,
                protected_names: &args.protected_names,
                hidden_names: &args.hidden_names,
                reserved: &args.reserved,
                protected: &args.protected,
                hidden: &args.hidden,
                user_configuration: &user_configuration,
                home: home.as_deref(),
            },
        )?),
        (_, _) => None,
    };
    // Everything read-only but the writable places: then the kernel, not a
    // filter that cannot see paths, refuses mode and time changes anywhere
    // else, for Plan as for `auto`.
    remount_everything_read_only()?;
    if let (Some(plan), Some(workspace_fd)) = (&plan, &workspace_fd) {
        let empty_file = open_path(Path::new(EMPTY_FILE))?;
        let empty_directory = open_path(Path::new(EMPTY_DIRECTORY))?;
        let covers = super::protect::Covers {
            file: empty_file.as_fd(),
            directory: empty_directory.as_fd(),
        };
        if writable {
            let tree = writable_tree(workspace_fd)?;
            super::protect::apply(tree.as_fd(), plan, &covers)?;
        } else {
            super::protect::apply(workspace_fd.as_fd(), plan, &covers)?;
        }
    }
    let walk_hidden: Vec<PathBuf> = match (&plan, &workspace) {
        (Some(plan), Some((path, _))) => plan.hidden().map(|hidden| path.join(hidden)).collect(),
        (_, _) => Vec::new(),
    };
    writable_bind(&scratch, &args.scratch_dir, false)?;
    private_shm(&args.scratch_cap)?;
    // A working directory in the scratch directory or a hidden one is
    // meant to find the private mount now there (the scratch tmpfs, an empty
    // cover), which only this namespace sees; anywhere else it must still
    // be the directory the library resolved.
    let private = cwd.starts_with(&args.scratch_dir)
        || args
            .hidden
            .iter()
            .chain(&walk_hidden)
            .any(|hidden| cwd.starts_with(hidden));
    if private {
        std::env::set_current_dir(&cwd)
            .map_err(|error| format!("working directory {}: {error}", cwd.display()))?;
    } else {
        let cwd_fd = reopen(&cwd, cwd_identity, "the working directory")?;
        rustix::process::fchdir(&cwd_fd).map_err(|errno| error("changing into", &cwd, errno))?;
    }
    // The rule names the tmpfs the command reaches at its `TMPDIR`, which
    // must be the one mounted above (nothing else runs in this namespace
    // yet, so nothing can have swapped it; checked all the same).
    let rule = open_directory(&args.scratch_dir)?;
    if identity(rule.as_fd(), &args.scratch_dir)? != identity(scratch.as_fd(), &args.scratch_dir)? {
        return Err(format!(
            "{} is not the scratch tmpfs mounted for the command",
            args.scratch_dir.display()
        ));
    }
    Ok(Some(rule))
}

/// Opens `path` from `/` without following a symlink anywhere on the way
/// (it is a path the kernel gave for a directory, so it holds none) and
/// checks that it is still the directory `expected` identifies: what was
/// renamed, removed or replaced meanwhile is refused.
fn reopen(path: &Path, expected: (u64, u64), what: &str) -> Result<OwnedFd, String> {
    let fd = rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        FileMode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|errno| {
        format!(
            "{what} ({}) moved while the command started: {errno}",
            path.display()
        )
    })?;
    if identity(fd.as_fd(), path)? == expected {
        Ok(fd)
    } else {
        Err(format!(
            "{what} ({}) was replaced while the command started",
            path.display()
        ))
    }
}

/// Binds the workspace `fd` names (with the mounts below it) over itself,
/// writable at its top (the hidden and protected mounts below keep their
/// own flags) and without set-id files or devices, all by descriptor: a
/// detached copy of the tree, its attributes set, moved onto the very
/// directory. Returns the new mount, which the protected paths are found in.
fn writable_tree(fd: &OwnedFd) -> Result<OwnedFd, String> {
    use super::protect::{MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY};
    let what = Path::new("the workspace");
    let tree = super::protect::clone_tree(fd).map_err(|errno| error("binding", what, errno))?;
    super::protect::set_attributes(
        tree.as_fd(),
        false,
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        MOUNT_ATTR_RDONLY,
    )
    .map_err(|errno| error("making writable", what, errno))?;
    super::protect::attach(&tree, fd).map_err(|errno| error("binding", what, errno))?;
    Ok(tree)
}

/// The directories a command needs even where a hidden directory holds
/// them: the workspace (the host's and the workspace-write root), the
/// working directory and the scratch root (or the scratch directory when it
/// lies outside it), each only once and none inside another.
fn needed_paths(args: &ConfineArgs, workspace: Option<&Path>, cwd: &Path) -> Vec<PathBuf> {
    let mut candidates: Vec<PathBuf> = args.visible.clone();
    candidates.extend(workspace.map(Path::to_path_buf));
    candidates.push(cwd.to_path_buf());
    candidates.extend(args.scratch_root.iter().cloned());
    candidates.push(args.scratch_dir.clone());
    let mut kept: Vec<PathBuf> = Vec::new();
    for candidate in candidates {
        if kept.iter().any(|path| candidate.starts_with(path)) {
            continue;
        }
        kept.retain(|path| !path.starts_with(&candidate));
        kept.push(candidate);
    }
    kept
}

/// A user namespace of the command's own (root's too, so that its limits
/// bound the command: see `bounds::limit_user_namespace`), and in it new
/// mount, IPC, PID and network namespaces. The PID namespace is the next
/// child's: this process stays where it is. A command never shares the
/// host's network namespace: a networked one first joins `join` (its
/// session's network namespace and, when not root, the user namespace
/// owning it), closes the machine's own addresses there, then makes its
/// own user namespace inside that one and no network namespace.
fn unshare(
    join: Option<(BorrowedFd<'_>, Option<BorrowedFd<'_>>)>,
    bounds: &crate::spec::CommandBounds,
) -> Result<(), String> {
    use rustix::thread::{LinkNameSpaceType, UnshareFlags};
    let root = rustix::process::geteuid().is_root();
    let mut flags = UnshareFlags::NEWUSER | UnshareFlags::NEWNS | UnshareFlags::NEWIPC | UnshareFlags::NEWPID;
    match join {
        None => flags |= UnshareFlags::NEWNET,
        Some((net, user)) => {
            // Read here, in the host's network namespace: every address
            // the machine holds, which the command's namespace then
            // refuses to route to.
            let machine = super::routes::machine_destinations()?;
            match (user, root) {
                (Some(user), _) => {
                    rustix::thread::move_into_link_name_space(user, Some(LinkNameSpaceType::User))
                        .map_err(|errno| format!("joining the network's user namespace: {errno}"))?
                }
                (None, false) => return Err("the network's user namespace did not arrive".into()),
                (None, true) => {}
            }
            rustix::thread::move_into_link_name_space(net, Some(LinkNameSpaceType::Network))
                .map_err(|errno| format!("joining the session's network namespace: {errno}"))?;
            super::routes::refuse(&machine)?;
        }
    }
    let ids = own_ids();
    unshare_flags(flags)?;
    map_own_ids(ids)?;
    if let Some(inotify) = bounds.inotify {
        super::bounds::limit_user_namespace(inotify)?;
    }
    Ok(())
}

/// `unshare(2)` with `flags`.
#[allow(unsafe_code)]
pub(super) fn unshare_flags(flags: rustix::thread::UnshareFlags) -> Result<(), String> {
    // SAFETY: the flags never include CLONE_FILES (the only one rustix calls
    // unsafe, because it splits the descriptor table between threads), and
    // the helper's stages are single-threaded.
    unsafe { rustix::thread::unshare_unsafe(flags) }.map_err(|errno| format!("unshare: {errno}"))
}

/// Our effective uid and gid, read before a user namespace is made (in
/// the new one they are unmapped until [`map_own_ids`] maps them).
pub(super) fn own_ids() -> (u32, u32) {
    (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    )
}

/// Maps our own uid and gid (`ids`, from [`own_ids`] before the namespace
/// was made), and only those, in the user namespace just made: the only
/// mapping a process may write for itself, root included. Files of other
/// users show `nobody` as their owner inside.
pub(super) fn map_own_ids((uid, gid): (u32, u32)) -> Result<(), String> {
    let write =
        |file: &str, text: String| std::fs::write(file, text).map_err(|error| format!("{file}: {error}"));
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))
}

/// The network stage's namespaces: a new network namespace and, when not
/// root, a user namespace owning it (our ids mapped), which commands that
/// join the network join too.
pub(super) fn unshare_network() -> Result<(), String> {
    use rustix::thread::UnshareFlags;
    let root = rustix::process::geteuid().is_root();
    let flags = if root {
        UnshareFlags::NEWNET
    } else {
        UnshareFlags::NEWNET | UnshareFlags::NEWUSER
    };
    let ids = own_ids();
    unshare_flags(flags)?;
    if !root {
        map_own_ids(ids)?;
    }
    Ok(())
}

fn tmpfs(target: &Path, flags: MountFlags, options: &CStr) -> Result<(), String> {
    rustix::mount::mount("tmpfs", target, "tmpfs", flags, options)
        .map_err(|errno| error("mounting a tmpfs on", target, errno))
}

fn bind(source: &Path, target: &Path, recursive: bool) -> Result<(), String> {
    let result = if recursive {
        rustix::mount::mount_bind_recursive(source, target)
    } else {
        rustix::mount::mount_bind(source, target)
    };
    result.map_err(|errno| error("binding", target, errno))
}

/// Remounts the mount at `target` with `flags` (plus the bind remount
/// flag, which changes only this mount's flags, not its filesystem's).
fn remount(target: &Path, flags: MountFlags) -> Result<(), String> {
    rustix::mount::mount_remount(target, MountFlags::BIND | flags, c"")
        .map_err(|errno| error("remounting", target, errno))
}

/// An empty file on the read-only private `/dev`, bound over hidden files.
const EMPTY_FILE: &str = "/dev/.empty";

/// An empty directory on the read-only private `/dev`, bound over hidden
/// directories the workspace walk finds.
const EMPTY_DIRECTORY: &str = "/dev/.empty-directory";

/// git's configuration files of the machine and the person, as git would
/// find them with the command's environment (`GIT_CONFIG_SYSTEM` or
/// `/etc/gitconfig`, `GIT_CONFIG_GLOBAL` or `$XDG_CONFIG_HOME/git/config`
/// and `~/.gitconfig`), and the home directory (for `~/` in them).
fn git_user_configuration(
    env: &[(std::ffi::OsString, std::ffi::OsString)],
) -> (Vec<PathBuf>, Option<PathBuf>) {
    let variable = |name: &str| {
        env.iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| PathBuf::from(value))
            .filter(|path| path.is_absolute())
    };
    let home = variable("HOME");
    let mut files = vec![variable("GIT_CONFIG_SYSTEM").unwrap_or_else(|| PathBuf::from("/etc/gitconfig"))];
    match variable("GIT_CONFIG_GLOBAL") {
        Some(global) => files.push(global),
        None => {
            files.extend(
                variable("XDG_CONFIG_HOME")
                    .or_else(|| home.as_ref().map(|home| home.join(".config")))
                    .map(|config| config.join("git/config")),
            );
            files.extend(home.as_ref().map(|home| home.join(".gitconfig")));
        }
    }
    (files, home)
}

/// A tmpfs over `/dev` holding empty files with the kept device nodes bound
/// over them, then made read-only (the bound nodes stay usable: a device
/// node is not written through its mount).
fn private_dev(devices: &[OwnedFd]) -> Result<(), String> {
    let dev = Path::new("/dev");
    let flags = MountFlags::NOSUID | MountFlags::NOEXEC;
    tmpfs(dev, flags, c"mode=0755,size=64k,nr_inodes=64")?;
    for (name, device) in DEVICES.iter().zip(devices) {
        let target = dev.join(name);
        rustix::fs::open(
            &target,
            OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC,
            FileMode::from(0o666),
        )
        .map_err(|errno| error("creating", &target, errno))?;
        bind(&fd_path(device), &target, false)?;
    }
    let shm = Path::new(SHM);
    rustix::fs::mkdir(shm, FileMode::from(0o755)).map_err(|errno| error("creating", shm, errno))?;
    for (name, target) in FD_LINKS {
        let link = dev.join(name);
        rustix::fs::symlink(target, &link).map_err(|errno| error("creating", &link, errno))?;
    }
    let empty = Path::new(EMPTY_FILE);
    rustix::fs::open(
        empty,
        OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC,
        FileMode::from(0o400),
    )
    .map_err(|errno| error("creating", empty, errno))?;
    let empty_directory = Path::new(EMPTY_DIRECTORY);
    rustix::fs::mkdir(empty_directory, FileMode::from(0o500))
        .map_err(|errno| error("creating", empty_directory, errno))?;
    remount(dev, flags | MountFlags::RDONLY)
}

/// A private tmpfs at `/dev/shm` (made in [`private_dev`]), with the scratch
/// directory's cap: POSIX shared memory and semaphores of the command's own
/// processes, shared with no one else.
fn private_shm(cap: &ScratchCap) -> Result<(), String> {
    let options = std::ffi::CString::new(format!(
        "mode=1777,size={},nr_inodes={}",
        cap.size_bytes(),
        cap.inodes()
    ))
    .map_err(|_| "shared memory tmpfs options".to_owned())?;
    tmpfs(
        Path::new(SHM),
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        &options,
    )
}

/// Where POSIX shared memory lives.
const SHM: &str = "/dev/shm";

/// A procfs instance of this process's PID namespace over `/proc`, read-only
/// (for `auto` every mount is): called by the init of the namespace `enter`
/// prepared, it lists only the command's processes, for root and non-root
/// alike. With `pid_max`, the namespace's own `pid_max` is set through it
/// before it is made read-only (see `bounds::limit_pid_namespace`). The
/// kernel refuses the mount where the `/proc` it would cover is not
/// fully visible (some containers mount over parts of it); then nothing
/// runs, and the probe reports no namespaces.
pub(crate) fn mount_proc(pid_max: Option<u64>) -> Result<(), String> {
    // Only the init of a PID namespace `enter` made, which also sits in the
    // private mount tree, may cover `/proc`: anywhere else this would cover
    // the machine's.
    if rustix::process::getpid().as_raw_nonzero().get() != 1 {
        return Err("/proc is mounted only by the init of a new PID namespace".into());
    }
    let proc = Path::new("/proc");
    let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    let Some(tasks) = pid_max else {
        return rustix::mount::mount("proc", proc, "proc", flags | MountFlags::RDONLY, c"")
            .map_err(|errno| error("mounting", proc, errno));
    };
    rustix::mount::mount("proc", proc, "proc", flags, c"").map_err(|errno| error("mounting", proc, errno))?;
    super::bounds::limit_pid_namespace(tasks)?;
    remount(proc, flags | MountFlags::RDONLY)
}

/// The magic number `statfs` reports for a tmpfs.
const TMPFS_MAGIC: rustix::fs::FsWord = 0x0102_1994;

/// Whether `fd` names the root directory of a mount.
pub(crate) fn is_mount_root(fd: BorrowedFd<'_>) -> bool {
    use rustix::fs::{AtFlags, StatxAttributes, StatxFlags};
    rustix::fs::statx(fd, c"", AtFlags::EMPTY_PATH, StatxFlags::empty())
        .is_ok_and(|statx| statx.stx_attributes.contains(StatxAttributes::MOUNT_ROOT))
}

/// Creates the directories of `relative` below `base` (a tmpfs this process
/// just mounted, so nothing else can have put anything there) and returns
/// the innermost.
fn make_directories(base: &Path, relative: &Path) -> Result<PathBuf, String> {
    let mut target = base.to_path_buf();
    for component in relative.components() {
        match component {
            Component::Normal(name) => {
                target.push(name);
                match rustix::fs::mkdir(&target, FileMode::from(0o700)) {
                    // Two needed paths may share a parent.
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(errno) => return Err(error("creating", &target, errno)),
                }
            }
            Component::CurDir | Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(format!("{} is not a plain path", relative.display()));
            }
        }
    }
    Ok(target)
}

/// Covers the scratch root with a small read-only tmpfs and mounts the
/// command's private scratch tmpfs (size and inode capped) at the scratch
/// directory's place: below that cover, or over the host's directory
/// (through its verified descriptor, never its path) when the directory
/// lies outside the root. Returns the scratch tmpfs, opened without
/// following links and checked to be a tmpfs mount other than the host's
/// directory.
fn private_scratch(args: &ConfineArgs, host_scratch: &OwnedFd) -> Result<OwnedFd, String> {
    let cap = &args.scratch_cap;
    let options = std::ffi::CString::new(format!(
        "mode=0700,size={},nr_inodes={}",
        cap.size_bytes(),
        cap.inodes()
    ))
    .map_err(|_| "scratch tmpfs options".to_owned())?;
    let flags = MountFlags::NOSUID | MountFlags::NODEV;
    let cover = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    let below_root = args
        .scratch_root
        .as_ref()
        .and_then(|root| Some((root, args.scratch_dir.strip_prefix(root).ok()?)));
    if let Some(root) = &args.scratch_root {
        tmpfs(root, cover, c"mode=0700,size=64k,nr_inodes=256")?;
    }
    match below_root {
        Some((root, relative)) => {
            let target = make_directories(root, relative)?;
            tmpfs(&target, flags, &options)?;
        }
        None => tmpfs(&fd_path(host_scratch), flags, &options)?,
    }
    if let Some(root) = &args.scratch_root {
        remount(root, cover | MountFlags::RDONLY)?;
    }
    let scratch = open_directory(&args.scratch_dir)?;
    let path = &args.scratch_dir;
    let is_tmpfs = rustix::fs::fstatfs(&scratch)
        .map_err(|errno| error("checking", path, errno))?
        .f_type
        == TMPFS_MAGIC;
    let other_device = identity(scratch.as_fd(), path)?.0 != identity(host_scratch.as_fd(), path)?.0;
    if is_tmpfs && other_device && is_mount_root(scratch.as_fd()) {
        Ok(scratch)
    } else {
        Err(format!(
            "{} is not the scratch tmpfs just mounted",
            path.display()
        ))
    }
}

/// Covers `path` with something empty and read-only: an empty read-only
/// tmpfs over a directory, the empty read-only file over anything else.
/// Never `/dev/null`: writes to a device succeed even on a read-only mount.
/// A path that does not exist has nothing to hide. The `needed` directories
/// inside a hidden directory are bound back at their places (with what is
/// mounted below them), from descriptors opened before the cover; a hidden
/// directory that is itself needed is refused.
fn hide(path: &Path, needed: &[PathBuf]) -> Result<(), String> {
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(format!("hiding {}: {error}", path.display())),
    };
    let flags = MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    if !metadata.is_dir() {
        bind(Path::new(EMPTY_FILE), path, false)?;
        return remount(path, flags);
    }
    if needed.iter().any(|kept| kept == path) {
        return Err(format!(
            "{} is to be hidden, but the command needs it",
            path.display()
        ));
    }
    let inside: Vec<(&Path, OwnedFd)> = needed
        .iter()
        .filter_map(|kept| Some((kept.strip_prefix(path).ok()?, kept)))
        .map(|(relative, kept)| open_directory(kept).map(|fd| (relative, fd)))
        .collect::<Result<_, String>>()?;
    if inside.is_empty() {
        return tmpfs(path, flags, c"mode=0500,size=4k,nr_inodes=1");
    }
    tmpfs(
        path,
        flags - MountFlags::RDONLY,
        c"mode=0700,size=64k,nr_inodes=1024",
    )?;
    for (relative, fd) in &inside {
        let target = make_directories(path, relative)?;
        bind(&fd_path(fd), &target, true)?;
    }
    remount(path, flags)
}

/// The per-mount flags of one `/proc/self/mountinfo` line and its mount
/// point, unescaped.
fn mount_point(line: &str) -> Option<(PathBuf, MountFlags)> {
    let mut fields = line.split(' ');
    let point = fields.nth(4)?;
    let options = fields.next()?;
    let mut flags = MountFlags::empty();
    for option in options.split(',') {
        flags |= match option {
            "nosuid" => MountFlags::NOSUID,
            "nodev" => MountFlags::NODEV,
            "noexec" => MountFlags::NOEXEC,
            "noatime" => MountFlags::NOATIME,
            "nodiratime" => MountFlags::NODIRATIME,
            "relatime" => MountFlags::RELATIME,
            _ => MountFlags::empty(),
        };
    }
    Some((PathBuf::from(unescape(point)), flags))
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
pub(super) fn unescape(text: &str) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStringExt;
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let octal = bytes.get(index + 1..index + 4).and_then(|digits| {
            std::str::from_utf8(digits)
                .ok()
                .and_then(|digits| u8::from_str_radix(digits, 8).ok())
        });
        match (bytes[index], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                index += 4;
            }
            (byte, _) => {
                out.push(byte);
                index += 1;
            }
        }
    }
    std::ffi::OsString::from_vec(out)
}

/// Makes every mount of the private tree read-only, keeping each one's
/// other flags (a user namespace may not drop them). A mount point hidden
/// under a later mount cannot be named and cannot be reached either.
fn remount_everything_read_only() -> Result<(), String> {
    let table =
        std::fs::read_to_string("/proc/self/mountinfo").map_err(|error| format!("mountinfo: {error}"))?;
    for (point, flags) in table.lines().filter_map(mount_point) {
        match rustix::mount::mount_remount(&point, MountFlags::BIND | MountFlags::RDONLY | flags, c"") {
            // Gone from view (under another mount, or not a directory we
            // may reach): nothing reachable to make read-only.
            Ok(()) | Err(rustix::io::Errno::NOENT | rustix::io::Errno::ACCESS) => {}
            // The path now leads to a directory that is no mount (one made
            // in a cover to bind a needed path back): the listed mount is
            // out of reach below the cover.
            Err(rustix::io::Errno::INVAL) if !open_path(&point).is_ok_and(|fd| is_mount_root(fd.as_fd())) => {
            }
            Err(errno) => return Err(error("making read-only", &point, errno)),
        }
    }
    Ok(())
}

/// Binds the directory `fd` names (opened before any mount changed) over
/// `target` and makes that one mount writable. `recursive`: the mounts below
/// come along (the hidden database directory inside a workspace stays
/// hidden).
fn writable_bind(fd: &OwnedFd, target: &Path, recursive: bool) -> Result<(), String> {
    bind(&fd_path(fd), target, recursive)?;
    remount(target, current_flags(target))
}

/// The flags of the topmost mount at `point` (none if it is not listed).
fn current_flags(point: &Path) -> MountFlags {
    std::fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .and_then(|table| {
            table
                .lines()
                .filter_map(mount_point)
                .rfind(|(listed, _)| listed == point)
        })
        .map_or(MountFlags::empty(), |(_, flags)| flags)
}
