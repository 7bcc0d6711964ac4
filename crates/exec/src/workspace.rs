//! A session's workspace as the sandbox knows it: the directory opened once,
//! when the session binds it, and every command's working directory and
//! workspace-write root derived from that descriptor.
//!
//! Paths are only names: an enclosing session's command can rename the
//! directory or put a symlink where it was. The descriptor keeps naming the
//! directory the session bound, wherever it is now, so a command runs there
//! or not at all. This module opens and resolves; it decides nothing about
//! which directory a session may bind.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags, ResolveFlags};

use crate::outcome::ExecError;

/// An open directory without read rights of its own (`O_PATH`): enough to
/// resolve below it, change into it and name it in a sandbox rule.
const PATH_DIRECTORY: OFlags = OFlags::PATH.union(OFlags::DIRECTORY).union(OFlags::CLOEXEC);

/// A workspace root, held open. Cloning shares the descriptor.
#[derive(Clone, Debug)]
pub struct WorkspaceDir {
    path: PathBuf,
    dir: Arc<OwnedFd>,
}

impl WorkspaceDir {
    /// Opens the directory `path` names now (symlinks on the way are
    /// followed this once: the session binds what the person named).
    ///
    /// # Errors
    ///
    /// [`ExecError::CwdUnavailable`] when `path` is not a directory.
    pub fn open(path: &Path) -> Result<WorkspaceDir, ExecError> {
        let dir = rustix::fs::open(path, PATH_DIRECTORY, Mode::empty()).map_err(|errno| {
            ExecError::CwdUnavailable {
                cwd: path.to_path_buf(),
                reason: format!("the workspace cannot be opened: {errno}"),
            }
        })?;
        Ok(WorkspaceDir {
            path: path.to_path_buf(),
            dir: Arc::new(dir),
        })
    }

    /// Which directory it is: its filesystem's device and its inode, as
    /// `fstat` gives them (`None` when they cannot be read).
    pub fn identity(&self) -> Option<(u64, u64)> {
        rustix::fs::fstat(&*self.dir)
            .ok()
            .map(|stat| (stat.st_dev, stat.st_ino))
    }

    /// The path it was opened by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open directory.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// Where the directory is now, as the kernel names it (`None` when it
    /// was removed or cannot be named from here).
    pub fn current_path(&self) -> Option<PathBuf> {
        current_path(self.fd())
    }

    /// Where `cwd` leads now: a relative path taken from the workspace
    /// (an absolute one as it is), every symlink followed, named by the
    /// kernel; `None` when it is not an existing directory. Whether that is
    /// inside the workspace is for the caller to decide; the start is held
    /// below it by [`WorkspaceDir::resolve_cwd`] all the same.
    pub fn locate(&self, cwd: &Path) -> Option<PathBuf> {
        let cwd = if cwd.as_os_str().is_empty() {
            Path::new(".")
        } else {
            cwd
        };
        let fd = rustix::fs::openat2(
            self.fd(),
            cwd,
            PATH_DIRECTORY,
            Mode::empty(),
            ResolveFlags::NO_MAGICLINKS,
        )
        .ok()?;
        current_path(fd.as_fd())
    }

    /// Opens the working directory `cwd` below the workspace: a relative
    /// path, or an absolute one below [`WorkspaceDir::path`]. Symlinks
    /// inside the workspace are followed; one that leads out of it (or a
    /// `..` that does) is refused, as is anything that is not a directory.
    ///
    /// # Errors
    ///
    /// [`ExecError::CwdUnavailable`] saying why.
    pub fn resolve_cwd(&self, cwd: &Path) -> Result<OwnedFd, ExecError> {
        let unavailable = |reason: String| ExecError::CwdUnavailable {
            cwd: cwd.to_path_buf(),
            reason,
        };
        let relative = if cwd.is_absolute() {
            cwd.strip_prefix(&self.path)
                .map_err(|_| unavailable(format!("it is not inside the workspace {}", self.path.display())))?
        } else {
            cwd
        };
        let relative = if relative.as_os_str().is_empty() {
            Path::new(".")
        } else {
            relative
        };
        rustix::fs::openat2(
            self.fd(),
            relative,
            PATH_DIRECTORY,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        )
        .map_err(|errno| match errno {
            rustix::io::Errno::XDEV => unavailable("it leads out of the workspace".into()),
            other => unavailable(other.to_string()),
        })
    }
}

impl PartialEq for WorkspaceDir {
    /// The same workspace: same path and same open file.
    fn eq(&self, other: &WorkspaceDir) -> bool {
        use std::os::fd::AsRawFd;
        self.path == other.path && self.dir.as_raw_fd() == other.dir.as_raw_fd()
    }
}

impl Eq for WorkspaceDir {}

/// Where the directory `fd` names is now, from `/proc/self/fd`: an absolute
/// path without symlinks, or `None` (removed, or outside this process's
/// root).
pub(crate) fn current_path(fd: BorrowedFd<'_>) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    let plain = link.is_absolute()
        && link
            .components()
            .all(|component| matches!(component, Component::RootDir | Component::Normal(_)));
    // A removed directory reads as "<path> (deleted)", which names
    // whatever now has that path; checking that it is still this
    // directory is the caller's job, so only obvious non-paths are
    // dropped here.
    plain.then_some(link)
}
