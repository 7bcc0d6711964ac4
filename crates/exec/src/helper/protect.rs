//! What stays read-only inside a writable workspace (P7, P13), found and
//! bound by descriptors: the workspace's `.git` (a directory, or a `gitdir:`
//! file with the directory it names and that directory's common
//! directory), the `.git` of every nested repository at any depth, whatever
//! a repository's metadata links to elsewhere in the workspace, `.pi`, and
//! the host's extra paths; plus every directory between the workspace root
//! and each of them (and each hidden path inside the workspace) made a
//! mount point of its own, because a mount point cannot be renamed or
//! removed: a command cannot move a protected path's parent away and put a
//! forged one in its place.
//!
//! The workspace is read here, before any confinement, so every read goes
//! through a descriptor opened below the workspace without following a
//! symlink, never blocks (a FIFO, socket or device behind a name is refused,
//! not opened for reading), and reads at most a few KiB per file. The walk
//! has no depth or count budget an earlier command could exhaust; it is
//! bounded in time by the command's timeout, which the supervisor enforces
//! on this stage as on the shell.
//!
//! Nothing here may change a file the host sees except creating the empty
//! `.git` and `.pi` placeholders a workspace lacks (a name that does not
//! exist cannot be bound over), and it fails (so nothing runs) rather than
//! protect less than it found.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode as FileMode, OFlags, ResolveFlags};
use rustix::mount::{MoveMountFlags, OpenTreeFlags};

/// The most a repository pointer file (`.git`, `commondir`) is read.
const POINTER_LIMIT: usize = 4096;

/// The names reserved at the workspace root: a command may not create them
/// where they do not exist (a planted `.git` is a repository whose hooks and
/// `core.fsmonitor` run when the person next uses git there).
const RESERVED_AT_ROOT: [&str; 2] = [".git", ".pi"];

/// A git directory's entry that is never walked: objects are data, and the
/// largest part of a repository.
const OBJECTS: &str = "objects";

/// What to protect, relative to the workspace root, and what to anchor.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// Bound read-only (with what is mounted below them).
    read_only: BTreeSet<PathBuf>,
    /// Made mount points of their own (ancestors of the above and of hidden
    /// paths), so that they cannot be renamed or removed.
    anchors: BTreeSet<PathBuf>,
}

fn describe(what: &str, path: &Path, errno: rustix::io::Errno) -> String {
    format!("{what} {}: {errno}", shown(path))
}

/// A workspace-relative path for messages.
fn shown(path: &Path) -> String {
    if path.as_os_str().is_empty() {
        "the workspace root".to_owned()
    } else {
        path.display().to_string()
    }
}

/// Opens `relative` below `root` without following any symlink on the way
/// or at the end and without leaving `root`.
fn open_beneath(root: BorrowedFd<'_>, relative: &Path, flags: OFlags) -> Result<OwnedFd, rustix::io::Errno> {
    let relative = if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative
    };
    rustix::fs::openat2(
        root,
        relative,
        flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        FileMode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
}

/// The type of `name` in `dir`, the name itself (a symlink is a symlink).
fn kind_at(dir: BorrowedFd<'_>, name: &OsStr) -> Result<Option<FileType>, rustix::io::Errno> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(FileType::from_raw_mode(stat.st_mode))),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(errno) => Err(errno),
    }
}

/// The type a directory listing gave for `name`, asked of the file system
/// where the listing does not say.
fn entry_kind(dir: BorrowedFd<'_>, name: &OsStr, listed: FileType) -> Option<FileType> {
    if listed == FileType::Unknown {
        kind_at(dir, name).ok().flatten()
    } else {
        Some(listed)
    }
}

/// Reads a small regular file `name` of `dir`: never through a symlink,
/// never blocking, at most [`POINTER_LIMIT`] bytes. Anything that is not a
/// regular file reads as nothing.
fn read_pointer(dir: BorrowedFd<'_>, name: &str) -> Option<String> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        FileMode::empty(),
    )
    .ok()?;
    let stat = rustix::fs::fstat(&fd).ok()?;
    // Git reads a pointer of a line; a larger file is no pointer it follows.
    let small = usize::try_from(stat.st_size).is_ok_and(|size| size <= POINTER_LIMIT);
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile || !small {
        return None;
    }
    let mut buffer = vec![0_u8; POINTER_LIMIT];
    let mut filled = 0;
    while filled < buffer.len() {
        match rustix::io::read(&fd, &mut buffer[filled..]) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    }
    buffer.truncate(filled);
    String::from_utf8(buffer).ok()
}

/// `base.join(target)` with `.` and `..` taken lexically; `None` when it
/// climbs above the workspace root (then it is outside the workspace, which
/// no command may write anyway). An absolute `target` is made relative to
/// `workspace` (the root's current path), or `None` outside it.
fn lexical(workspace: &Path, base: &Path, target: &Path) -> Option<PathBuf> {
    let joined = if target.is_absolute() {
        target.strip_prefix(workspace).ok()?.to_path_buf()
    } else {
        base.join(target)
    };
    let mut out = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::Normal(name) => out.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Finds everything to protect in the workspace `root` (whose current path
/// is `workspace`). `extra`: the host's absolute paths (only those inside
/// the workspace matter; nothing else is writable); `hidden`: the host's
/// hidden paths (covered already; those inside the workspace get anchors).
pub(crate) fn plan(
    root: BorrowedFd<'_>,
    workspace: &Path,
    extra: &[PathBuf],
    hidden: &[PathBuf],
) -> Result<Plan, String> {
    let mut plan = Plan::default();
    for name in RESERVED_AT_ROOT {
        match kind_at(root, OsStr::new(name)) {
            Ok(None) => reserve(root, name)?,
            Ok(Some(FileType::Symlink)) => {
                return Err(format!(
                    "{name} in the workspace is a symbolic link, so it cannot be kept read-only: \
                     replace it with a directory (or, for .git, a `gitdir:` file)"
                ));
            }
            Ok(Some(_)) => {}
            Err(errno) => return Err(describe("checking", Path::new(name), errno)),
        }
    }
    plan.read_only.insert(PathBuf::from(".pi"));
    walk(root, workspace, &mut plan)?;
    for path in extra {
        let Some(relative) = lexical(workspace, Path::new(""), path) else {
            continue;
        };
        match open_beneath(root, &relative, OFlags::PATH) {
            Ok(_) => {
                plan.read_only.insert(relative);
            }
            Err(rustix::io::Errno::NOENT) => {}
            Err(rustix::io::Errno::LOOP | rustix::io::Errno::XDEV) => {
                return Err(format!(
                    "the protected path {} is reached through a symbolic link, so it cannot be kept read-only",
                    path.display()
                ));
            }
            Err(errno) => return Err(describe("checking", &relative, errno)),
        }
    }
    // A hidden path is a mount (its cover) already, which cannot be
    // renamed; its parents are anchored so that none of them can either.
    for path in hidden {
        if let Some(relative) = lexical(workspace, Path::new(""), path)
            && !relative.as_os_str().is_empty()
            && open_beneath(root, &relative, OFlags::PATH).is_ok()
        {
            plan.anchors.extend(ancestors(&relative));
        }
    }
    let protected: Vec<PathBuf> = plan.read_only.iter().cloned().collect();
    for path in &protected {
        plan.anchors.extend(ancestors(path));
    }
    Ok(plan)
}

/// Every proper ancestor of `relative` below the root (the root itself is
/// the writable workspace mount).
fn ancestors(relative: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut current = relative.parent();
    while let Some(path) = current {
        if path.as_os_str().is_empty() {
            break;
        }
        out.push(path.to_path_buf());
        current = path.parent();
    }
    out
}

/// Creates the empty directory `name` at the root, so that it can be bound
/// read-only: a missing name cannot be covered. Racing another command that
/// creates it first is fine: whatever it is, it is then checked like one
/// that was there.
fn reserve(root: BorrowedFd<'_>, name: &str) -> Result<(), String> {
    let dir = open_beneath(root, Path::new(""), OFlags::RDONLY | OFlags::DIRECTORY)
        .map_err(|errno| describe("opening", Path::new(""), errno))?;
    match rustix::fs::mkdirat(&dir, name, FileMode::from(0o755)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
        Err(errno) => return Err(describe("reserving", Path::new(name), errno)),
    }
    match kind_at(dir.as_fd(), OsStr::new(name)) {
        Ok(Some(FileType::Symlink)) => Err(format!("{name} in the workspace became a symbolic link")),
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(format!("{name} in the workspace vanished while it was reserved")),
        Err(errno) => Err(describe("checking", Path::new(name), errno)),
    }
}

/// Every directory of the workspace, depth first, one descriptor at a
/// time: the repository of each (its `.git`), never entering `.git`
/// itself.
fn walk(root: BorrowedFd<'_>, workspace: &Path, plan: &mut Plan) -> Result<(), String> {
    let mut pending: Vec<PathBuf> = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let dir = match open_beneath(
            root,
            &relative,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK,
        ) {
            Ok(dir) => dir,
            // Gone or replaced since it was listed: a racing command's doing;
            // what is there now is not below this name any more.
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => continue,
            // Unreadable for this user: nothing a command could write there either.
            Err(rustix::io::Errno::ACCESS) => continue,
            Err(errno) => return Err(describe("reading", &relative, errno)),
        };
        repository(root, dir.as_fd(), &relative, workspace, plan)?;
        for (name, kind) in listing(&dir, &relative)? {
            if kind == Some(FileType::Directory) && name != ".git" {
                pending.push(relative.join(name));
            }
        }
    }
    Ok(())
}

/// The entries of the open directory `dir` (at `relative`) but `.` and
/// `..`, each with its own type (a symlink is a symlink).
fn listing(dir: &OwnedFd, relative: &Path) -> Result<Vec<(OsString, Option<FileType>)>, String> {
    let entries = rustix::fs::Dir::read_from(dir).map_err(|errno| describe("reading", relative, errno))?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|errno| describe("reading", relative, errno))?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name != "." && name != ".." {
            out.push((name.to_owned(), entry_kind(dir.as_fd(), name, entry.file_type())));
        }
    }
    Ok(out)
}

/// The repository of the directory `dir` (at `relative`), if it has one.
fn repository(
    root: BorrowedFd<'_>,
    dir: BorrowedFd<'_>,
    relative: &Path,
    workspace: &Path,
    plan: &mut Plan,
) -> Result<(), String> {
    let dot_git = relative.join(".git");
    match kind_at(dir, OsStr::new(".git")).map_err(|errno| describe("checking", &dot_git, errno))? {
        None => Ok(()),
        Some(FileType::Symlink) => Err(format!(
            "{} is a symbolic link, so it cannot be kept read-only: replace it with a `gitdir:` file",
            dot_git.display()
        )),
        Some(FileType::Directory) => {
            plan.read_only.insert(dot_git.clone());
            metadata_links(root, &dot_git, workspace, plan)
        }
        Some(FileType::RegularFile) => {
            plan.read_only.insert(dot_git.clone());
            let Some(text) = read_pointer(dir, ".git") else {
                return Ok(());
            };
            let Some(named) = text.lines().find_map(|line| line.strip_prefix("gitdir:")) else {
                return Ok(());
            };
            let Some(git_dir) = lexical(workspace, relative, Path::new(named.trim())) else {
                return Ok(());
            };
            git_directory(root, &git_dir, workspace, plan)
        }
        // A FIFO, socket or device named `.git`: git cannot use it, but the
        // name stays taken.
        Some(_) => {
            plan.read_only.insert(dot_git);
            Ok(())
        }
    }
}

/// A git directory a `gitdir:` file names (inside the workspace), and its
/// common directory: both protected, and whatever their metadata links to.
fn git_directory(
    root: BorrowedFd<'_>,
    git_dir: &Path,
    workspace: &Path,
    plan: &mut Plan,
) -> Result<(), String> {
    let dir = match open_beneath(
        root,
        git_dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK,
    ) {
        Ok(dir) => dir,
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => return Ok(()),
        Err(rustix::io::Errno::LOOP | rustix::io::Errno::XDEV) => {
            return Err(format!(
                "the git directory {} is reached through a symbolic link, so it cannot be kept read-only",
                git_dir.display()
            ));
        }
        Err(errno) => return Err(describe("opening", git_dir, errno)),
    };
    plan.read_only.insert(git_dir.to_path_buf());
    metadata_links(root, git_dir, workspace, plan)?;
    if let Some(common) = read_pointer(dir.as_fd(), "commondir")
        && let Some(common) = lexical(workspace, git_dir, Path::new(common.trim()))
        && common != git_dir
        && !plan.read_only.contains(&common)
    {
        return git_directory(root, &common, workspace, plan);
    }
    Ok(())
}

/// Everything a git directory's metadata (its config, hooks, refs, modules;
/// not its objects) links to inside the workspace is protected too: a
/// `hooks/pre-commit` or a `config` that is a symlink to a workspace file
/// would otherwise be rewritten through that file.
fn metadata_links(
    root: BorrowedFd<'_>,
    git_dir: &Path,
    workspace: &Path,
    plan: &mut Plan,
) -> Result<(), String> {
    let mut pending = vec![git_dir.to_path_buf()];
    while let Some(relative) = pending.pop() {
        let Ok(dir) = open_beneath(
            root,
            &relative,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK,
        ) else {
            continue;
        };
        for (name, kind) in listing(&dir, &relative)? {
            match kind {
                Some(FileType::Directory) if !(relative == git_dir && name == OBJECTS) => {
                    pending.push(relative.join(&name));
                }
                Some(FileType::Symlink) => link_target(root, dir.as_fd(), &relative, &name, workspace, plan)?,
                _ => {}
            }
        }
    }
    Ok(())
}

/// Protects what the symlink `name` in `dir` (at `relative`) leads to, when
/// that lies in the workspace (followed only inside it).
fn link_target(
    root: BorrowedFd<'_>,
    dir: BorrowedFd<'_>,
    relative: &Path,
    name: &OsStr,
    workspace: &Path,
    plan: &mut Plan,
) -> Result<(), String> {
    let Ok(target) = rustix::fs::readlinkat(dir, name, Vec::new()) else {
        return Ok(());
    };
    let target = PathBuf::from(OsString::from(OsStr::from_bytes(target.as_bytes())));
    let Some(lexical_target) = lexical(workspace, relative, &target) else {
        return Ok(());
    };
    // The link may lead through further links: resolve it inside the
    // workspace and name the result by where it really is.
    let Ok(fd) = rustix::fs::openat2(
        root,
        if lexical_target.as_os_str().is_empty() {
            Path::new(".")
        } else {
            lexical_target.as_path()
        },
        OFlags::PATH | OFlags::CLOEXEC,
        FileMode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    ) else {
        return Ok(());
    };
    let (Some(real), Some(root_now)) = (
        crate::workspace::current_path(fd.as_fd()),
        crate::workspace::current_path(root),
    ) else {
        return Err(format!(
            "{} links to a place that cannot be named",
            relative.join(name).display()
        ));
    };
    let Ok(inside) = real.strip_prefix(&root_now) else {
        return Ok(());
    };
    if inside.as_os_str().is_empty() {
        return Err(format!(
            "{} links to the workspace root, which cannot be kept read-only",
            relative.join(name).display()
        ));
    }
    plan.read_only.insert(inside.to_path_buf());
    Ok(())
}

/// Carries out `plan` in the writable workspace mount `tree`: anchors first
/// (shallow to deep, each a mount point of its own unless it is one), then
/// each protected path bound over itself read-only, without set-id or
/// device files.
pub(crate) fn apply(tree: BorrowedFd<'_>, plan: &Plan) -> Result<(), String> {
    let mut anchors: Vec<&PathBuf> = plan.anchors.iter().collect();
    anchors.sort_by_key(|path| path.components().count());
    for anchor in anchors {
        let fd = match open_beneath(tree, anchor, OFlags::PATH | OFlags::DIRECTORY) {
            Ok(fd) => fd,
            // Vanished or swapped since the walk: refused, nothing runs.
            Err(errno) => return Err(describe("anchoring", anchor, errno)),
        };
        if super::namespaces::is_mount_root(fd.as_fd()) {
            continue;
        }
        let clone = clone_tree(&fd).map_err(|errno| describe("anchoring", anchor, errno))?;
        attach(&clone, &fd).map_err(|errno| describe("anchoring", anchor, errno))?;
    }
    for path in &plan.read_only {
        let fd = match open_beneath(tree, path, OFlags::PATH) {
            Ok(fd) => fd,
            Err(errno) => return Err(describe("protecting", path, errno)),
        };
        let clone = clone_tree(&fd).map_err(|errno| describe("protecting", path, errno))?;
        set_attributes(
            clone.as_fd(),
            true,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            0,
        )
        .map_err(|errno| describe("protecting", path, errno))?;
        attach(&clone, &fd).map_err(|errno| describe("protecting", path, errno))?;
    }
    Ok(())
}

/// A detached copy of the mount tree at what `fd` names (with the mounts
/// below it), to be attached elsewhere or over itself.
pub(crate) fn clone_tree(fd: &OwnedFd) -> Result<OwnedFd, rustix::io::Errno> {
    rustix::mount::open_tree(
        fd,
        c"",
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_EMPTY_PATH
            | OpenTreeFlags::AT_RECURSIVE,
    )
}

/// Attaches the detached mount `clone` over what `target` names.
pub(crate) fn attach(clone: &OwnedFd, target: &OwnedFd) -> Result<(), rustix::io::Errno> {
    rustix::mount::move_mount(
        clone,
        c"",
        target,
        c"",
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )
}

/// `MOUNT_ATTR_RDONLY`.
pub(crate) const MOUNT_ATTR_RDONLY: u64 = 0x1;
/// `MOUNT_ATTR_NOSUID`.
pub(crate) const MOUNT_ATTR_NOSUID: u64 = 0x2;
/// `MOUNT_ATTR_NODEV`.
pub(crate) const MOUNT_ATTR_NODEV: u64 = 0x4;

/// `struct mount_attr`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `mount_setattr(2)` on the mount `fd` names (and, `recursive`, every
/// mount below it): sets `set`, clears `clear`.
#[allow(unsafe_code)]
pub(crate) fn set_attributes(
    fd: BorrowedFd<'_>,
    recursive: bool,
    set: u64,
    clear: u64,
) -> Result<(), rustix::io::Errno> {
    const SYS_MOUNT_SETATTR: libc::c_long = 442;
    const AT_RECURSIVE: libc::c_uint = 0x8000;
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags =
        libc::c_uint::try_from(libc::AT_EMPTY_PATH).unwrap_or(0) | if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: mount_setattr(2) reads `attr` (a live, initialised
    // `struct mount_attr` of the size passed) and the empty path string;
    // it writes no memory of this process.
    let result = unsafe {
        libc::syscall(
            SYS_MOUNT_SETATTR,
            fd.as_raw_fd(),
            c"".as_ptr(),
            flags,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(rustix::io::Errno::from_raw_os_error(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL),
        ))
    }
}
