//! What stays the person's inside a workspace (P7, P8, P13, P15), found
//! and bound by descriptors.
//!
//! Under a writable workspace, kept read-only: every repository in every
//! shape (a `.git` directory, a `gitdir:` file with the directory it names,
//! read as bytes, and that directory's common directory, every nested
//! repository's `.git` at any depth, a bare repository found by its
//! content), whatever a repository's metadata links to elsewhere in the
//! workspace, every path its configuration (and what that includes) names
//! as a program git runs or a file git reads (`core.hooksPath`,
//! `include.path`, `core.fsmonitor`, `diff.<driver>.textconv`, ...), the
//! files a hook manager's hooks read (husky's scripts, lefthook's and
//! pre-commit's configuration), the caller's protected names at any depth
//! (agents' configuration) and the caller's protected and reserved paths.
//! Under every sandbox, hidden (an empty read-only cover): the caller's
//! hidden names at any depth (nested projects' `.pi`). Every directory
//! between the workspace root and each of them (and each hidden path of
//! the caller's inside the workspace) is made a mount point of its own,
//! because a mount point cannot be renamed or removed: a command cannot
//! move a protected path's parent away and put a forged one in its place.
//!
//! What cannot be kept refuses the command instead: a protected name or a
//! `.git` that is a symbolic link (a mount cannot cover a link), a protected
//! or hidden file with other names (a hard link elsewhere would still
//! write it), a missing path git's configuration names where no directory
//! below the repository can hold it.
//!
//! The workspace is read here, before any confinement, so every read of it
//! goes through a descriptor opened below the workspace (following a link
//! only to where it stays inside), never blocks (a FIFO, socket or device
//! behind a name is refused, not opened for reading) and reads at most a
//! bounded number of bytes per file. The walk has no depth or count budget
//! an earlier command could exhaust; it is bounded in time by the command's
//! timeout, which the supervisor enforces on this stage as on the shell.
//!
//! Nothing here may change a file the host sees except creating the empty
//! directories that reserve the caller's names at the workspace root and
//! its reserved paths (a name that does not exist cannot be bound over),
//! and it fails (so nothing runs) rather than protect less than it found.
//! Which names and paths are protected is the caller's; this module knows
//! only git's own formats.

use std::collections::{BTreeSet, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode as FileMode, OFlags, ResolveFlags};
use rustix::mount::{MoveMountFlags, OpenTreeFlags};

use super::git_config::{self, Entry, Named};

/// The most a repository pointer file (`.git`, `commondir`) is read.
const POINTER_LIMIT: usize = 4096;

/// The most a configuration file is read: a larger one cannot be checked,
/// so the command is refused.
const CONFIGURATION_LIMIT: u64 = 1 << 20;

/// How much of a hook is read to see which hook manager it runs.
const HOOK_LIMIT: u64 = 64 * 1024;

/// git follows includes this deep and refuses deeper ones.
const INCLUDE_DEPTH: usize = 10;

/// The most configuration files one command's walk reads.
const CONFIGURATION_FILES: usize = 1000;

/// A git directory's entry that is never scanned: objects are data (content
/// addressed, never run), and the largest part of a repository.
const OBJECTS: &str = "objects";

/// What a hook manager's hooks read, at the top of the repository's work
/// tree, by a word its hooks contain: lefthook's configuration and scripts,
/// pre-commit's configuration, husky's scripts.
const HOOK_MANAGERS: [(&str, &[&str]); 4] = [
    (
        "lefthook",
        &[
            "lefthook.yml",
            "lefthook.yaml",
            ".lefthook.yml",
            ".lefthook.yaml",
            "lefthook-local.yml",
            "lefthook-local.yaml",
            ".lefthook-local.yml",
            ".lefthook-local.yaml",
            ".lefthook",
            ".lefthook-local",
            ".config/lefthook.yml",
            ".config/lefthook.yaml",
        ],
    ),
    (
        "pre-commit.com",
        &[".pre-commit-config.yaml", ".pre-commit-config.yml"],
    ),
    (
        "INSTALL_PYTHON",
        &[".pre-commit-config.yaml", ".pre-commit-config.yml"],
    ),
    ("husky", &[".husky"]),
];

/// What to protect and hide, and where.
pub(crate) struct Request<'a> {
    /// The workspace root's current path.
    pub(crate) workspace: &'a Path,
    /// Whether the command may write the workspace: only then is anything
    /// reserved or kept read-only (everything is read-only otherwise).
    pub(crate) writable: bool,
    /// Names kept read-only wherever an entry has them, and reserved at the
    /// root where missing.
    pub(crate) protected_names: &'a [OsString],
    /// Names hidden wherever an entry has them, and reserved at the root
    /// where missing.
    pub(crate) hidden_names: &'a [OsString],
    /// Absolute paths kept read-only, and reserved where missing.
    pub(crate) reserved: &'a [PathBuf],
    /// Absolute paths kept read-only where they exist.
    pub(crate) protected: &'a [PathBuf],
    /// The caller's hidden paths (covered already; those inside the
    /// workspace get anchors).
    pub(crate) hidden: &'a [PathBuf],
    /// git's configuration of the machine and of the person (system and
    /// global files), which applies to every repository.
    pub(crate) user_configuration: &'a [PathBuf],
    /// The person's home directory, for `~/` in git's configuration.
    pub(crate) home: Option<&'a Path>,
}

/// What to protect, hide and anchor, relative to the workspace root.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// Bound read-only (with what is mounted below them).
    read_only: BTreeSet<PathBuf>,
    /// Covered by something empty and read-only.
    hidden: BTreeSet<PathBuf>,
    /// Made mount points of their own (ancestors of the above and of the
    /// caller's hidden paths), so that they cannot be renamed or removed.
    anchors: BTreeSet<PathBuf>,
}

impl Plan {
    /// The workspace-relative paths this plan covers.
    pub(crate) fn hidden(&self) -> impl Iterator<Item = &Path> {
        self.hidden.iter().map(PathBuf::as_path)
    }
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

fn nonempty(relative: &Path) -> &Path {
    if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative
    }
}

/// Opens `relative` below `root` without following any symlink on the way
/// or at the end and without leaving `root`.
fn open_beneath(root: BorrowedFd<'_>, relative: &Path, flags: OFlags) -> Result<OwnedFd, rustix::io::Errno> {
    rustix::fs::openat2(
        root,
        nonempty(relative),
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

/// Reads the open file `fd` if it is a regular file: at most `limit` bytes
/// (`Err` with its size when it is larger and `whole` is asked for).
/// Anything that is not a regular file reads as `None`.
fn read_regular(fd: &OwnedFd, limit: u64, whole: bool) -> Result<Option<Vec<u8>>, u64> {
    let Ok(stat) = rustix::fs::fstat(fd) else {
        return Ok(None);
    };
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Ok(None);
    }
    let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
    if whole && size > limit {
        return Err(size);
    }
    let capacity = usize::try_from(size.min(limit)).unwrap_or(0);
    let mut buffer = vec![0_u8; capacity];
    let mut filled = 0;
    while filled < buffer.len() {
        match rustix::io::read(fd, &mut buffer[filled..]) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return Ok(None),
        }
    }
    buffer.truncate(filled);
    Ok(Some(buffer))
}

/// Reads a small regular file `name` of `dir`: never through a symlink,
/// never blocking, at most [`POINTER_LIMIT`] bytes. Anything that is not a
/// regular file, or is larger (git reads a pointer of a line; a larger
/// file is no pointer it follows), reads as nothing.
fn read_pointer(dir: BorrowedFd<'_>, name: &str) -> Option<Vec<u8>> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        FileMode::empty(),
    )
    .ok()?;
    read_regular(&fd, POINTER_LIMIT as u64, true).ok().flatten()
}

/// The path a pointer file holds, as bytes: its first line, without the
/// line end and trailing blanks (as git reads `commondir` and `gitdir:`).
fn pointer_path(text: &[u8]) -> &[u8] {
    let line = text.split(|byte| *byte == b'\n').next().unwrap_or_default();
    line.trim_ascii_end()
}

/// `base.join(target)` with `.` and `..` taken lexically; `None` when it
/// climbs above the workspace root. An absolute `target` is made relative to
/// `workspace` (the root's current path), or `None` outside it.
fn lexical(workspace: &Path, base: &Path, target: &Path) -> Option<PathBuf> {
    let joined = if target.is_absolute() {
        target.strip_prefix(workspace).ok()?.to_path_buf()
    } else {
        base.join(target)
    };
    normalized(&joined, false)
}

/// `path` with `.` and `..` taken lexically; `None` when it climbs above
/// its start. `absolute`: `path` is absolute and stays so.
fn normalized(path: &Path, absolute: bool) -> Option<PathBuf> {
    let mut out = if absolute {
        PathBuf::from("/")
    } else {
        PathBuf::new()
    };
    for component in path.components() {
        match component {
            Component::Normal(name) => out.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                if out.as_os_str() == "/" || !out.pop() {
                    return None;
                }
            }
            Component::RootDir if absolute => {}
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
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

/// Where a file or directory git names is: below the workspace root, or
/// outside the workspace (read there, never protected: nothing outside is
/// writable).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Place {
    Inside(PathBuf),
    Outside(PathBuf),
}

impl Place {
    fn parent(&self) -> Place {
        match self {
            Place::Inside(path) => Place::Inside(path.parent().map(Path::to_path_buf).unwrap_or_default()),
            Place::Outside(path) => Place::Outside(
                path.parent()
                    .map_or_else(|| PathBuf::from("/"), Path::to_path_buf),
            ),
        }
    }

    fn join(&self, name: &str) -> Place {
        match self {
            Place::Inside(path) => Place::Inside(path.join(name)),
            Place::Outside(path) => Place::Outside(path.join(name)),
        }
    }
}

/// Why a protected path is there, for the kind of scan it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    ReadOnly,
    Hidden,
}

/// Finds everything to protect and hide in the workspace `root` for
/// `request`, reserving the missing names and paths first (writable only).
pub(crate) fn plan(root: BorrowedFd<'_>, request: &Request<'_>) -> Result<Plan, String> {
    let mut finder = Finder {
        root,
        request,
        plan: Plan::default(),
        scans: Vec::new(),
        repositories: Vec::new(),
        analyzed: HashSet::new(),
        user_entries: None,
        configuration_files: 0,
    };
    if request.writable {
        for name in request.protected_names.iter().chain(request.hidden_names) {
            reserve(root, Path::new(name))?;
        }
        for path in request.reserved {
            if let Some(relative) = lexical(request.workspace, Path::new(""), path)
                && !relative.as_os_str().is_empty()
            {
                reserve(root, &relative)?;
            }
        }
    }
    finder.walk()?;
    if request.writable {
        // Reserved paths exist by now (or a file stands where one of their
        // directories would go, which is then what is kept).
        for path in request.reserved {
            if let Some(relative) = lexical(request.workspace, Path::new(""), path) {
                finder.named_path(&Place::Inside(relative), None, "the protected path")?;
            }
        }
        for path in request.protected {
            let Some(relative) = lexical(request.workspace, Path::new(""), path) else {
                continue;
            };
            match open_beneath(root, &relative, OFlags::PATH) {
                Ok(_) => finder.protect(relative)?,
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
        finder.drain()?;
        // A hidden path is a mount (its cover) already, which cannot be
        // renamed; its parents are anchored so that none of them can either.
        for path in request.hidden {
            if let Some(relative) = lexical(request.workspace, Path::new(""), path)
                && !relative.as_os_str().is_empty()
                && open_beneath(root, &relative, OFlags::PATH).is_ok()
            {
                finder.plan.anchors.extend(ancestors(&relative));
            }
        }
        let found: Vec<PathBuf> = finder
            .plan
            .read_only
            .iter()
            .chain(&finder.plan.hidden)
            .cloned()
            .collect();
        for path in &found {
            finder.plan.anchors.extend(ancestors(path));
        }
    }
    Ok(finder.plan)
}

/// Creates what is missing of `relative` below the root as empty
/// directories, so that it can be bound read-only: a missing name cannot be
/// covered. Racing another command that creates it first is fine: whatever
/// it is, it is then checked like one that was there; a symlink on the way
/// refuses the command.
fn reserve(root: BorrowedFd<'_>, relative: &Path) -> Result<(), String> {
    let mut parent = PathBuf::new();
    for component in relative.components() {
        let Component::Normal(name) = component else {
            return Err(format!("{} is not a plain path", relative.display()));
        };
        let dir = open_beneath(root, &parent, OFlags::RDONLY | OFlags::DIRECTORY)
            .map_err(|errno| describe("reserving", &parent.join(name), errno))?;
        match rustix::fs::mkdirat(&dir, name, FileMode::from(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(errno) => return Err(describe("reserving", &parent.join(name), errno)),
        }
        parent.push(name);
        match kind_at(dir.as_fd(), name) {
            Ok(Some(FileType::Symlink)) => {
                return Err(format!(
                    "{} in the workspace is a symbolic link, so it cannot be kept read-only: \
                     replace it with a directory or a file (for a repository, a `gitdir:` file)",
                    parent.display()
                ));
            }
            // A file where a directory of the path would go: the path
            // cannot be made, and the file is what is protected.
            Ok(Some(FileType::Directory)) => {}
            Ok(Some(_)) => return Ok(()),
            Ok(None) => {
                return Err(format!(
                    "{} in the workspace vanished while it was reserved",
                    parent.display()
                ));
            }
            Err(errno) => return Err(describe("checking", &parent, errno)),
        }
    }
    Ok(())
}

/// Whether a directory's entries make it a git directory, as git tells
/// one: a `HEAD`, and `objects` and `refs` (or a `commondir` that holds
/// them).
fn is_git_directory(entries: &[(OsString, Option<FileType>)]) -> bool {
    let has = |name: &str, kinds: &[FileType]| {
        entries
            .iter()
            .any(|(entry, kind)| entry == name && kind.is_some_and(|kind| kinds.contains(&kind)))
    };
    has("HEAD", &[FileType::RegularFile, FileType::Symlink])
        && ((has(OBJECTS, &[FileType::Directory]) && has("refs", &[FileType::Directory]))
            || has("commondir", &[FileType::RegularFile]))
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

/// A repository to analyze: its git directory and the top of the work
/// tree its configuration applies to (`None`: bare).
type Repository = (Place, Option<PathBuf>);

struct Finder<'r, 'a> {
    root: BorrowedFd<'r>,
    request: &'r Request<'a>,
    plan: Plan,
    /// Protected or hidden paths whose contents are still to be scanned.
    scans: Vec<(PathBuf, Kind)>,
    /// Git directories still to be analyzed.
    repositories: Vec<Repository>,
    /// Git directories analyzed (or queued) already.
    analyzed: HashSet<Repository>,
    /// The user's configuration, read at the first repository.
    user_entries: Option<Vec<(Place, Entry)>>,
    configuration_files: usize,
}

impl Finder<'_, '_> {
    fn symlink_refusal(path: &Path) -> String {
        format!(
            "{} in the workspace is a symbolic link, so it cannot be kept read-only (a mount cannot \
             cover a link): replace it with what it links to",
            path.display()
        )
    }

    /// Every directory of the workspace, depth first, one descriptor at a
    /// time: the hidden and protected names in each, its repository (its
    /// `.git`), never entering a repository's metadata or a protected or
    /// hidden entry.
    fn walk(&mut self) -> Result<(), String> {
        let writable = self.request.writable;
        let mut pending: Vec<PathBuf> = vec![PathBuf::new()];
        while let Some(relative) = pending.pop() {
            let dir = match open_beneath(
                self.root,
                &relative,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK,
            ) {
                Ok(dir) => dir,
                // Gone or replaced since it was listed: a racing command's doing;
                // what is there now is not below this name any more.
                Err(rustix::io::Errno::NOENT | rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
                    continue;
                }
                // Unreadable for this user: nothing a command could write there either.
                Err(rustix::io::Errno::ACCESS) => continue,
                Err(errno) => return Err(describe("reading", &relative, errno)),
            };
            let entries = listing(&dir, &relative)?;
            if is_git_directory(&entries) {
                if relative.as_os_str().is_empty() {
                    if writable {
                        return Err(
                            "the workspace is itself a git directory (a bare repository), which cannot be \
                             kept read-only while the workspace is writable"
                                .to_owned(),
                        );
                    }
                } else {
                    if writable {
                        self.queue_repository(Place::Inside(relative), None);
                    }
                    continue;
                }
            }
            for (name, kind) in entries {
                let path = relative.join(&name);
                if self.request.hidden_names.contains(&name) {
                    if kind == Some(FileType::Symlink) {
                        return Err(Self::symlink_refusal(&path));
                    }
                    self.hide(path);
                } else if name == ".git" {
                    if writable {
                        self.repository(dir.as_fd(), &relative)?;
                    }
                } else if writable && self.request.protected_names.contains(&name) {
                    if kind == Some(FileType::Symlink) {
                        return Err(Self::symlink_refusal(&path));
                    }
                    self.protect(path)?;
                } else if kind == Some(FileType::Directory) {
                    pending.push(path);
                }
            }
            self.drain()?;
        }
        Ok(())
    }

    /// Keeps `relative` read-only (and what it links to, and what it is).
    fn protect(&mut self, relative: PathBuf) -> Result<(), String> {
        if relative.as_os_str().is_empty() {
            return Err("the workspace root itself would have to be kept read-only".to_owned());
        }
        if self.plan.read_only.insert(relative.clone()) {
            self.scans.push((relative, Kind::ReadOnly));
        }
        Ok(())
    }

    /// Hides `relative` (and what it links to).
    fn hide(&mut self, relative: PathBuf) {
        if self.plan.hidden.insert(relative.clone()) {
            self.scans.push((relative, Kind::Hidden));
        }
    }

    fn queue_repository(&mut self, git_dir: Place, top: Option<PathBuf>) {
        let repository = (git_dir, top);
        if self.analyzed.insert(repository.clone()) {
            self.repositories.push(repository);
        }
    }

    /// Scans what was protected or hidden and analyzes the repositories
    /// found, until nothing new turns up (one queue, no recursion: a chain
    /// of links or pointers of any length cannot exhaust the stack).
    fn drain(&mut self) -> Result<(), String> {
        loop {
            if let Some((path, kind)) = self.scans.pop() {
                self.scan(&path, kind)?;
            } else if let Some((git_dir, top)) = self.repositories.pop() {
                self.git_directory(&git_dir, top.as_deref())?;
            } else {
                return Ok(());
            }
        }
    }

    /// Everything below the protected or hidden `relative`: a file with
    /// other names refuses the command (writing one of them would write
    /// it); what a link inside leads to in the workspace is protected or
    /// hidden too. Objects of a git directory are data and not scanned.
    fn scan(&mut self, relative: &Path, kind: Kind) -> Result<(), String> {
        let stat = match rustix::fs::statat(self.root, nonempty(relative), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(rustix::io::Errno::NOENT) => return Ok(()),
            Err(errno) => return Err(describe("checking", relative, errno)),
        };
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => return Self::single_name(relative, stat.st_nlink),
            FileType::Directory => {}
            FileType::Symlink => return Err(Self::symlink_refusal(relative)),
            FileType::Fifo
            | FileType::Socket
            | FileType::CharacterDevice
            | FileType::BlockDevice
            | FileType::Unknown => return Ok(()),
        }
        let mut pending = vec![relative.to_path_buf()];
        while let Some(directory) = pending.pop() {
            let Ok(dir) = open_beneath(
                self.root,
                &directory,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK,
            ) else {
                continue;
            };
            for (name, listed) in listing(&dir, &directory)? {
                match listed {
                    Some(FileType::Directory) if name != OBJECTS => pending.push(directory.join(&name)),
                    Some(FileType::Symlink) => self.link_target(dir.as_fd(), &directory, &name, kind)?,
                    Some(FileType::RegularFile) => {
                        if let Ok(stat) =
                            rustix::fs::statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                        {
                            Self::single_name(&directory.join(&name), stat.st_nlink)?;
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn single_name(relative: &Path, links: u64) -> Result<(), String> {
        if links > 1 {
            Err(format!(
                "{} has {links} names (hard links): through another name it could still be written, \
                 so it cannot be kept read-only; give it a single name",
                relative.display()
            ))
        } else {
            Ok(())
        }
    }

    /// Protects (or hides) what the symlink `name` in `dir` (at `relative`)
    /// leads to, when that lies in the workspace.
    fn link_target(
        &mut self,
        dir: BorrowedFd<'_>,
        relative: &Path,
        name: &OsStr,
        kind: Kind,
    ) -> Result<(), String> {
        let Ok(target) = rustix::fs::readlinkat(dir, name, Vec::new()) else {
            return Ok(());
        };
        let target = PathBuf::from(OsStr::from_bytes(target.as_bytes()));
        let Some(lexical_target) = lexical(self.request.workspace, relative, &target) else {
            return Ok(());
        };
        if kind == Kind::ReadOnly {
            // What the link leads to is kept as a path git names is: where
            // it is missing, nothing may be created there; where it leads
            // through another link of the workspace (which a command could
            // point elsewhere), the command is refused.
            let setting = format!("the link {}", relative.join(name).display());
            return self.named_path(&Place::Inside(lexical_target), None, &setting);
        }
        // A hidden link's data is hidden where it really is, through
        // whatever further links lead there.
        let Ok(fd) = rustix::fs::openat2(
            self.root,
            nonempty(&lexical_target),
            OFlags::PATH | OFlags::CLOEXEC,
            FileMode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        ) else {
            return Ok(());
        };
        let (Some(real), Some(root_now)) = (
            crate::workspace::current_path(fd.as_fd()),
            crate::workspace::current_path(self.root),
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
        self.hide(inside.to_path_buf());
        Ok(())
    }

    /// The repository of the directory `dir` (at `relative`), whose `.git`
    /// entry exists.
    fn repository(&mut self, dir: BorrowedFd<'_>, relative: &Path) -> Result<(), String> {
        let dot_git = relative.join(".git");
        match kind_at(dir, OsStr::new(".git")).map_err(|errno| describe("checking", &dot_git, errno))? {
            None => Ok(()),
            Some(FileType::Symlink) => Err(format!(
                "{} is a symbolic link, so it cannot be kept read-only: replace it with a `gitdir:` file",
                dot_git.display()
            )),
            Some(FileType::Directory) => {
                self.queue_repository(Place::Inside(dot_git), Some(relative.to_path_buf()));
                Ok(())
            }
            Some(FileType::RegularFile) => {
                self.protect(dot_git.clone())?;
                let Some(text) = read_pointer(dir, ".git") else {
                    return Ok(());
                };
                let Some(named) = text
                    .split(|byte| *byte == b'\n')
                    .find_map(|line| line.strip_prefix(b"gitdir:"))
                else {
                    return Ok(());
                };
                if let Some(git_dir) =
                    self.place_of(&Place::Inside(relative.to_path_buf()), named.trim_ascii())
                {
                    self.queue_repository(git_dir, Some(relative.to_path_buf()));
                }
                Ok(())
            }
            // A FIFO, socket or device named `.git`: git cannot use it, but the
            // name stays taken.
            Some(_) => self.protect(dot_git),
        }
    }

    /// Where `named` (bytes of a pointer or of a configuration value) leads
    /// from `base`: `~/` is the person's home, an absolute path is itself,
    /// anything else is relative to `base`. `None` for what names no place
    /// (`~user`, `%(prefix)/`, an empty value, a relative path above `/`).
    fn place_of(&self, base: &Place, named: &[u8]) -> Option<Place> {
        if named.is_empty() || named.starts_with(b"%(") {
            return None;
        }
        let path = Path::new(OsStr::from_bytes(named));
        let absolute = if let Some(rest) = named.strip_prefix(b"~/") {
            Some(self.request.home?.join(OsStr::from_bytes(rest)))
        } else if named.starts_with(b"~") {
            return None;
        } else if path.is_absolute() {
            Some(path.to_path_buf())
        } else {
            None
        };
        let workspace = self.request.workspace;
        match (absolute, base) {
            (Some(absolute), _) => {
                let absolute = normalized(&absolute, true)?;
                match absolute.strip_prefix(workspace) {
                    Ok(inside) => Some(Place::Inside(inside.to_path_buf())),
                    Err(_) => Some(Place::Outside(absolute)),
                }
            }
            (None, Place::Inside(base)) => match lexical(workspace, base, path) {
                Some(inside) => Some(Place::Inside(inside)),
                None => Some(Place::Outside(normalized(
                    &workspace.join(base).join(path),
                    true,
                )?)),
            },
            (None, Place::Outside(base)) => {
                let absolute = normalized(&base.join(path), true)?;
                match absolute.strip_prefix(workspace) {
                    Ok(inside) => Some(Place::Inside(inside.to_path_buf())),
                    Err(_) => Some(Place::Outside(absolute)),
                }
            }
        }
    }

    /// Opens `place` for reading: below the workspace, following a link
    /// only where it stays inside (one that leaves it is read where it
    /// leads, outside), never blocking.
    fn open_place(&self, place: &Place) -> Option<OwnedFd> {
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let outside = |path: &Path| rustix::fs::open(path, flags, FileMode::empty()).ok();
        match place {
            Place::Inside(relative) => match rustix::fs::openat2(
                self.root,
                nonempty(relative),
                flags,
                FileMode::empty(),
                ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
            ) {
                Ok(fd) => Some(fd),
                Err(rustix::io::Errno::XDEV) => outside(&self.request.workspace.join(relative)),
                Err(_) => None,
            },
            Place::Outside(path) => outside(path),
        }
    }

    /// The entries of the configuration file at `place` (none where there
    /// is no regular file); one too large to check refuses the command.
    fn configuration(&mut self, place: &Place) -> Result<Vec<Entry>, String> {
        self.configuration_files += 1;
        if self.configuration_files > CONFIGURATION_FILES {
            return Err(format!(
                "the repositories' configuration includes more than {CONFIGURATION_FILES} files, which cannot be checked"
            ));
        }
        let Some(fd) = self.open_place(place) else {
            return Ok(Vec::new());
        };
        match read_regular(&fd, CONFIGURATION_LIMIT, true) {
            Ok(Some(text)) => Ok(git_config::parse(&text)),
            Ok(None) => Ok(Vec::new()),
            Err(size) => Err(format!(
                "git's configuration {} holds {size} bytes, more than the {CONFIGURATION_LIMIT} that can be checked",
                Self::shown_place(place)
            )),
        }
    }

    fn shown_place(place: &Place) -> String {
        match place {
            Place::Inside(relative) => shown(relative),
            Place::Outside(path) => path.display().to_string(),
        }
    }

    /// The entries of the files at `files` and of everything they include
    /// (followed as deep as git follows them), each with the file it is in.
    fn configurations(&mut self, files: Vec<Place>) -> Result<Vec<(Place, Entry)>, String> {
        let mut out = Vec::new();
        let mut pending: Vec<(Place, usize)> = files.into_iter().map(|place| (place, 0)).collect();
        while let Some((file, depth)) = pending.pop() {
            for entry in self.configuration(&file)? {
                if git_config::named(&entry) == Named::Include
                    && depth < INCLUDE_DEPTH
                    && let Some(value) = &entry.value
                    && let Some(included) = self.place_of(&file.parent(), value)
                {
                    pending.push((included, depth + 1));
                }
                out.push((file.clone(), entry));
            }
        }
        Ok(out)
    }

    /// A git directory: itself, its common directory, and what its
    /// configuration (with the user's) names, for the work tree at `top`
    /// (`None`: a bare repository, whose hooks and commands run in it).
    fn git_directory(&mut self, git_dir: &Place, top: Option<&Path>) -> Result<(), String> {
        if let Place::Inside(relative) = git_dir {
            match open_beneath(
                self.root,
                relative,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK,
            ) {
                Ok(_) => {}
                Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => return Ok(()),
                Err(rustix::io::Errno::LOOP | rustix::io::Errno::XDEV) => {
                    return Err(format!(
                        "the git directory {} is reached through a symbolic link, so it cannot be kept read-only",
                        relative.display()
                    ));
                }
                Err(errno) => return Err(describe("opening", relative, errno)),
            }
            self.protect(relative.clone())?;
        }
        let common = self
            .open_place(&git_dir.join("commondir"))
            .and_then(|fd| read_regular(&fd, POINTER_LIMIT as u64, true).ok().flatten());
        if let Some(common) = common
            && let Some(common) = self.place_of(git_dir, pointer_path(&common))
            && common != *git_dir
        {
            self.queue_repository(common, top.map(Path::to_path_buf));
        }
        if self.user_entries.is_none() {
            let files: Vec<Place> = self
                .request
                .user_configuration
                .iter()
                .filter_map(|path| {
                    self.place_of(&Place::Outside(PathBuf::from("/")), path.as_os_str().as_bytes())
                })
                .collect();
            // A user's configuration file inside a workspace (a home
            // directory that is one) is one git reads: kept where it exists.
            for file in &files {
                if let Place::Inside(relative) = file
                    && open_beneath(self.root, relative, OFlags::PATH).is_ok()
                {
                    self.protect(relative.clone())?;
                }
            }
            let entries = self.configurations(files)?;
            self.user_entries = Some(entries);
        }
        let own = self.configurations(vec![git_dir.join("config"), git_dir.join("config.worktree")])?;
        let base = top.map_or_else(|| git_dir.clone(), |top| Place::Inside(top.to_path_buf()));
        let mut hooks = vec![git_dir.join("hooks")];
        let user = self.user_entries.clone().unwrap_or_default();
        for (file, entry) in user.iter().chain(&own) {
            let Some(value) = &entry.value else {
                continue;
            };
            let setting = format!(
                "git's `{}{}{}`",
                entry.section,
                entry
                    .subsection
                    .as_ref()
                    .map(|subsection| format!(".{}.", String::from_utf8_lossy(subsection)))
                    .unwrap_or_else(|| ".".to_owned()),
                entry.key
            );
            match git_config::named(entry) {
                Named::Include => {
                    if let Some(included) = self.place_of(&file.parent(), value) {
                        self.named_path(&included, top, &setting)?;
                    }
                }
                Named::Hooks => {
                    if let Some(directory) = self.place_of(&base, value.trim_ascii()) {
                        self.named_path(&directory, top, &setting)?;
                        hooks.push(directory);
                    }
                }
                // A file git reads is a path only as a command line's word
                // is: a missing bare word (a GPG key id in
                // `user.signingKey`, say) names nothing to keep.
                Named::Path => self.program_word(&base, value.trim_ascii(), true, top, &setting)?,
                Named::Program => {
                    for word in git_config::words(value) {
                        self.program_word(&base, word, false, top, &setting)?;
                    }
                }
                Named::Nothing => {}
            }
        }
        if let Some(top) = top {
            for directory in hooks {
                self.hook_managers(&directory, top)?;
            }
        }
        Ok(())
    }

    /// A word of a command line git runs (or, `file`, the value of a file
    /// git reads), relative to `base`: a path there that is plainly one
    /// (`./x`, `../x`, `/x`, `~/x`, or below a directory that exists, or a
    /// file's value that exists) is protected, or kept from being created
    /// where missing; any other word (a program found on `PATH`, an option,
    /// a placeholder, a key id) names nothing in the workspace.
    fn program_word(
        &mut self,
        base: &Place,
        word: &[u8],
        file: bool,
        top: Option<&Path>,
        setting: &str,
    ) -> Result<(), String> {
        let Some(place) = self.place_of(base, word) else {
            return Ok(());
        };
        let Place::Inside(relative) = &place else {
            return Ok(());
        };
        if file && rustix::fs::statat(self.root, nonempty(relative), AtFlags::SYMLINK_NOFOLLOW).is_ok() {
            return self.named_path(&place, top, setting);
        }
        let explicit = word.starts_with(b"./")
            || word.starts_with(b"../")
            || word.starts_with(b"/")
            || word.starts_with(b"~/");
        let below_existing = word.contains(&b'/')
            && word
                .split(|byte| *byte == b'/')
                .next()
                .and_then(|first| self.place_of(base, first))
                .is_some_and(|first| match first {
                    Place::Inside(first) => {
                        rustix::fs::statat(self.root, nonempty(&first), AtFlags::SYMLINK_NOFOLLOW).is_ok()
                    }
                    Place::Outside(_) => false,
                });
        if explicit || below_existing {
            self.named_path(&place, top, setting)
        } else {
            Ok(())
        }
    }

    /// A path git reads or runs, named by `setting`: inside the workspace
    /// it is kept read-only where it exists; where it does not, the nearest
    /// directory that exists below the repository's work tree is (so
    /// nothing can be created there), or, where there is none, the command
    /// is refused. A path reached through a symbolic link is refused too (a
    /// command could point the link elsewhere).
    fn named_path(&mut self, place: &Place, top: Option<&Path>, setting: &str) -> Result<(), String> {
        let Place::Inside(relative) = place else {
            return Ok(());
        };
        if relative.as_os_str().is_empty() {
            return Err(format!(
                "{setting} names the workspace root, which cannot be kept read-only"
            ));
        }
        match open_beneath(self.root, relative, OFlags::PATH) {
            Ok(_) => return self.protect(relative.clone()),
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => {}
            Err(rustix::io::Errno::LOOP | rustix::io::Errno::XDEV) => {
                return Err(format!(
                    "{setting} names {}, which is reached through a symbolic link, so it cannot be kept \
                     read-only: name what the link leads to",
                    relative.display()
                ));
            }
            Err(errno) => return Err(describe("checking", relative, errno)),
        }
        for ancestor in ancestors(relative) {
            match open_beneath(self.root, &ancestor, OFlags::PATH) {
                Ok(_) => {
                    let floor = top.is_some_and(|top| top.starts_with(&ancestor));
                    if floor {
                        break;
                    }
                    return self.protect(ancestor);
                }
                Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => {}
                Err(rustix::io::Errno::LOOP | rustix::io::Errno::XDEV) => {
                    return Err(format!(
                        "{setting} names {}, which is reached through a symbolic link, so it cannot be \
                         kept read-only",
                        relative.display()
                    ));
                }
                Err(errno) => return Err(describe("checking", &ancestor, errno)),
            }
        }
        Err(format!(
            "{setting} names {}, which does not exist in the workspace and cannot be reserved there: \
             an approved command could create it, and what it put there would run or be read later; \
             create it (or change the setting) and run the command again",
            relative.display()
        ))
    }

    /// The files a hook manager's hooks in `hooks` read, at the work tree's
    /// `top`: husky's scripts (the directory holding a hooks directory
    /// named `_`), and whatever [`HOOK_MANAGERS`] says for a word its hooks
    /// contain. Only what exists is protected.
    fn hook_managers(&mut self, hooks: &Place, top: &Path) -> Result<(), String> {
        if let Place::Inside(relative) = hooks
            && relative.file_name() == Some(OsStr::new("_"))
            && let Some(parent) = relative.parent()
            && !top.starts_with(parent)
            && open_beneath(self.root, parent, OFlags::PATH).is_ok()
        {
            self.protect(parent.to_path_buf())?;
        }
        let Some(dir) = self.open_place(hooks) else {
            return Ok(());
        };
        let Ok(entries) = listing(&dir, Path::new("hooks")) else {
            return Ok(());
        };
        let mut found = BTreeSet::new();
        for (name, kind) in entries {
            if kind != Some(FileType::RegularFile) || name.as_bytes().ends_with(b".sample") {
                continue;
            }
            let Ok(fd) = rustix::fs::openat(
                &dir,
                name.as_os_str(),
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
                FileMode::empty(),
            ) else {
                continue;
            };
            let Ok(Some(text)) = read_regular(&fd, HOOK_LIMIT, false) else {
                continue;
            };
            for (marker, files) in HOOK_MANAGERS {
                if text
                    .windows(marker.len())
                    .any(|window| window == marker.as_bytes())
                {
                    found.extend(files.iter().copied());
                }
            }
        }
        for file in found {
            let path = top.join(file);
            if open_beneath(self.root, &path, OFlags::PATH).is_ok() {
                self.protect(path)?;
            }
        }
        Ok(())
    }
}

/// The empty file and the empty directory covers are made of.
pub(crate) struct Covers<'a> {
    pub(crate) file: BorrowedFd<'a>,
    pub(crate) directory: BorrowedFd<'a>,
}

/// Carries out `plan` in the mount `tree` (the writable workspace mount, or
/// for a read-only command the workspace as it is): anchors first (shallow
/// to deep, each a mount point of its own unless it is one), then each
/// protected path bound over itself read-only, without set-id or device
/// files, then each hidden path covered by an empty read-only file or
/// directory.
pub(crate) fn apply(tree: BorrowedFd<'_>, plan: &Plan, covers: &Covers<'_>) -> Result<(), String> {
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
    let sealed = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    for path in &plan.read_only {
        let fd = match open_beneath(tree, path, OFlags::PATH) {
            Ok(fd) => fd,
            Err(errno) => return Err(describe("protecting", path, errno)),
        };
        let clone = clone_tree(&fd).map_err(|errno| describe("protecting", path, errno))?;
        set_attributes(clone.as_fd(), true, sealed, 0)
            .map_err(|errno| describe("protecting", path, errno))?;
        attach(&clone, &fd).map_err(|errno| describe("protecting", path, errno))?;
    }
    for path in &plan.hidden {
        let fd = match open_beneath(tree, path, OFlags::PATH) {
            Ok(fd) => fd,
            Err(errno) => return Err(describe("hiding", path, errno)),
        };
        let directory = rustix::fs::fstat(&fd)
            .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Directory);
        let cover = if directory { covers.directory } else { covers.file };
        let clone = rustix::mount::open_tree(
            cover,
            c"",
            OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC | OpenTreeFlags::AT_EMPTY_PATH,
        )
        .map_err(|errno| describe("hiding", path, errno))?;
        set_attributes(clone.as_fd(), false, sealed | MOUNT_ATTR_NOEXEC, 0)
            .map_err(|errno| describe("hiding", path, errno))?;
        attach(&clone, &fd).map_err(|errno| describe("hiding", path, errno))?;
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
/// `MOUNT_ATTR_NOEXEC`.
pub(crate) const MOUNT_ATTR_NOEXEC: u64 = 0x8;

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
