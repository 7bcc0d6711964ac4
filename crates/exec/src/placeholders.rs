//! Names reserved in a person's workspace while a command runs, and given
//! back when none runs (`sandbox.md` P15).
//!
//! A name that does not exist cannot be covered by a mount, so a protected
//! name missing from the workspace (`.claude`, `.mcp.json`, a `--protect`
//! path) is made an empty directory, a placeholder, before an `auto`
//! command starts, and bound read-only inside its namespaces: the command
//! cannot create the name. The person's workspace is theirs, though, so a
//! placeholder lives only while some command that reserved it runs, of any
//! session or host:
//! - every command holding a reserved name holds a shared `flock` on the
//!   directory there (its supervisor does, for the command's whole life);
//! - a placeholder carries a mark (the extended attribute [`MARK`], set by
//!   the supervisor that made it, while it holds its lock), so that any
//!   holder, not only its maker, knows it is one; where the file system
//!   keeps no extended attributes only its maker knows;
//! - when a command is over, its supervisor lets go of its lock and tries
//!   an exclusive one: only when no other command holds the name does it
//!   get it, and then it removes the directory if it is still a marked,
//!   empty directory at that very name (same inode). One that the person
//!   filled meanwhile is theirs: only its mark is removed.
//! - a killed supervisor's placeholder (no lock left, mark still there) is
//!   removed the same way when the next command that reserves the name is
//!   over.
//!
//! A command that finds its name taken while another is being removed
//! tries again: a directory is held only once the lock is taken and the
//! name still leads to it.
//!
//! Every step goes through descriptors, one component at a time, never
//! following a link (a link where a reserved name is refuses the command,
//! as the walk does); nothing is read but directory entries and the mark.
//! Nothing here decides which names are reserved: that is the caller's.

use std::ffi::{CStr, OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags};

/// The extended attribute that marks a placeholder.
pub(crate) const MARK: &CStr = c"user.plan-checkpoint.placeholder";

/// How often a reservation tries again when the name it found was being
/// removed meanwhile (each time, a remover held it for a few system calls).
const ATTEMPTS: usize = 1000;

/// One component of a reserved path held by a running command.
struct Held {
    /// The directory it is in (the workspace root or a held component).
    parent: OwnedFd,
    name: OsString,
    /// The directory itself, with a shared lock on it.
    directory: OwnedFd,
    /// Whether this command made it (what marks it where no mark is kept).
    made: bool,
}

/// The reserved names of one command, held until it is dropped (when the
/// command is over), then given back: see the module's documentation.
#[derive(Default)]
pub(crate) struct Reservation {
    /// Outermost first.
    held: Vec<Held>,
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_list()
            .entries(self.held.iter().map(|held| (&held.name, held.made)))
            .finish()
    }
}

fn duplicate(fd: BorrowedFd<'_>) -> Result<OwnedFd, String> {
    rustix::io::fcntl_dupfd_cloexec(fd, 3).map_err(|errno| format!("dup: {errno}"))
}

fn identity(stat: &rustix::fs::Stat) -> (u64, u64) {
    (stat.st_dev, stat.st_ino)
}

/// The device and inode `name` in `parent` names, the name itself.
fn identity_at(parent: BorrowedFd<'_>, name: &OsStr) -> Option<(FileType, (u64, u64))> {
    rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|stat| (FileType::from_raw_mode(stat.st_mode), identity(&stat)))
}

fn symlink_refusal(path: &Path) -> String {
    format!(
        "{} in the workspace is a symbolic link, so it cannot be kept read-only: \
         replace it with a directory or a file (for a repository, a `gitdir:` file)",
        path.display()
    )
}

/// The plain components of `relative`, or why it is not a plain path.
fn components(relative: &Path) -> Result<Vec<&OsStr>, String> {
    relative
        .components()
        .map(|component| match component {
            Component::Normal(name) => Ok(name),
            Component::CurDir | Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                Err(format!("{} is not a plain path", relative.display()))
            }
        })
        .collect()
}

/// What a reservation found at one component.
enum Found {
    /// A directory, held.
    Held(Held),
    /// Something that is not a directory (a file, a FIFO...): the path
    /// cannot go on, and that is what is protected.
    NotADirectory,
}

impl Reservation {
    /// Makes what is missing of each of `paths` (relative to the workspace
    /// `root`) an empty, marked directory, and holds every directory of
    /// each (existing or made) until the reservation is dropped. Refused:
    /// a symbolic link on the way, a name that keeps vanishing.
    pub(crate) fn reserve(root: BorrowedFd<'_>, paths: &[PathBuf]) -> Result<Reservation, String> {
        let mut reservation = Reservation::default();
        for path in paths {
            let mut parent = duplicate(root)?;
            let mut shown = PathBuf::new();
            for name in components(path)? {
                shown.push(name);
                let found = hold(parent.as_fd(), name, &shown)?;
                match found {
                    Found::Held(held) => {
                        let next = duplicate(held.directory.as_fd())?;
                        reservation.held.push(held);
                        parent = next;
                    }
                    Found::NotADirectory => break,
                }
            }
        }
        Ok(reservation)
    }
}

/// Holds `name` in `parent` (at `shown`, for messages), made if missing.
fn hold(parent: BorrowedFd<'_>, name: &OsStr, shown: &Path) -> Result<Found, String> {
    for _ in 0..ATTEMPTS {
        let made = match rustix::fs::mkdirat(parent, name, Mode::from(0o755)) {
            Ok(()) => true,
            Err(rustix::io::Errno::EXIST) => false,
            Err(errno) => return Err(format!("reserving {}: {errno}", shown.display())),
        };
        match identity_at(parent, name) {
            None => continue,
            Some((FileType::Symlink, _)) => return Err(symlink_refusal(shown)),
            Some((FileType::Directory, _)) => {}
            Some((_, _)) => return Ok(Found::NotADirectory),
        }
        let directory = match rustix::fs::openat(
            parent,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(directory) => directory,
            // Removed or replaced since it was looked at.
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => continue,
            Err(errno) => return Err(format!("reserving {}: {errno}", shown.display())),
        };
        match rustix::fs::flock(&directory, FlockOperation::NonBlockingLockShared) {
            Ok(()) => {}
            // A remover holds it for a moment: look again.
            Err(rustix::io::Errno::WOULDBLOCK) => {
                std::thread::yield_now();
                continue;
            }
            Err(errno) => return Err(format!("reserving {}: {errno}", shown.display())),
        }
        let held_identity = rustix::fs::fstat(&directory)
            .map(|stat| identity(&stat))
            .map_err(|errno| format!("reserving {}: {errno}", shown.display()))?;
        if identity_at(parent, name).map(|(_, found)| found) != Some(held_identity) {
            // Removed (and perhaps made again) before the lock was taken.
            continue;
        }
        if made {
            // Marked only once held, so that no remover can take it for a
            // placeholder nobody holds. A file system without extended
            // attributes leaves it to its maker alone.
            let _ = rustix::fs::fsetxattr(&directory, MARK, b"1", rustix::fs::XattrFlags::empty());
        }
        return Ok(Found::Held(Held {
            parent: duplicate(parent)?,
            name: name.to_owned(),
            directory,
            made,
        }));
    }
    Err(format!(
        "reserving {}: it kept vanishing while it was reserved",
        shown.display()
    ))
}

/// Whether the open directory `directory` holds no entry.
fn is_empty(directory: BorrowedFd<'_>) -> bool {
    let Ok(entries) = rustix::fs::Dir::read_from(directory) else {
        return false;
    };
    for entry in entries {
        let Ok(entry) = entry else {
            return false;
        };
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            return false;
        }
    }
    true
}

fn is_marked(directory: BorrowedFd<'_>) -> bool {
    let mut value = [0_u8; 8];
    rustix::fs::fgetxattr(directory, MARK, &mut value).is_ok()
}

/// Gives `directory` (`name` in `parent`) back once nobody holds it: with
/// an exclusive lock taken, a marked (or, `made`, own) empty directory
/// still at that name is removed; a marked one the person filled keeps its
/// contents and loses its mark. The caller holds no lock on it any more.
fn give_back(parent: BorrowedFd<'_>, name: &OsStr, directory: &OwnedFd, made: bool) {
    if rustix::fs::flock(directory, FlockOperation::NonBlockingLockExclusive).is_err() {
        // Another command holds it: the last one to let go gives it back.
        return;
    }
    let marked = is_marked(directory.as_fd());
    if !(marked || made) {
        return;
    }
    if !is_empty(directory.as_fd()) {
        if marked {
            let _ = rustix::fs::fremovexattr(directory, MARK);
        }
        return;
    }
    let Ok(held) = rustix::fs::fstat(directory) else {
        return;
    };
    if identity_at(parent, name).map(|(_, found)| found) == Some(identity(&held)) {
        let _ = rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // Innermost first, so that a parent made for a reserved path is
        // empty by the time it is given back.
        while let Some(held) = self.held.pop() {
            let _ = rustix::fs::flock(&held.directory, FlockOperation::Unlock);
            give_back(held.parent.as_fd(), &held.name, &held.directory, held.made);
        }
    }
}

/// The paths a writable command reserves, relative to the workspace at
/// `workspace` (its current path): each of `names` at the root, and each of
/// `reserved` (absolute) that lies inside the workspace below its root.
pub(crate) fn reserved_paths(workspace: &Path, names: &[&OsString], reserved: &[PathBuf]) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = names.iter().map(PathBuf::from).collect();
    for path in reserved {
        if let Ok(inside) = path.strip_prefix(workspace)
            && let Some(relative) = lexical(inside)
            && !relative.as_os_str().is_empty()
        {
            paths.push(relative);
        }
    }
    paths
}

/// `path` with `.` and `..` taken lexically; `None` when it climbs above
/// its start or is not relative.
fn lexical(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
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
