//! The sandbox helper binary as a runner holds it: opened once when the
//! runner is made, checked through that descriptor, and executed through
//! the same descriptor for every command, so whatever later appears at the
//! helper's path is never run.
//!
//! It must not look the helper up anywhere (no `PATH`, no working
//! directory): the caller names an absolute path or gets an error.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::outcome::ExecError;

/// An opened, checked helper binary.
#[derive(Debug)]
pub(crate) struct HelperFile {
    /// The path it was opened from (for messages only).
    path: PathBuf,
    /// The open file; executed as `/proc/self/fd/<n>`.
    file: OwnedFd,
}

fn refused(path: &Path, why: impl std::fmt::Display) -> ExecError {
    ExecError::SandboxUnavailable {
        reason: format!("the sandbox helper {} is refused: {why}", path.display()),
    }
}

/// Whether `uid` may own the helper or its directory: root, or the user the
/// host runs as (anyone else could replace it).
fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == rustix::process::geteuid().as_raw()
}

impl HelperFile {
    /// Opens `path` and checks it: an absolute path; a regular, executable
    /// file owned by root or the host's user and not writable by group or
    /// others; in a directory owned by root or the host's user that others
    /// cannot write. A sticky directory writable by others (`/tmp`) is
    /// refused too: nothing the host ships belongs there, and refusing it
    /// keeps the rule free of exceptions. Symlinks in `path` are resolved
    /// first, and the checks apply to the real location.
    pub(crate) fn open(path: &Path) -> Result<HelperFile, ExecError> {
        if !path.is_absolute() {
            return Err(refused(path, "the path is not absolute"));
        }
        let real = std::fs::canonicalize(path).map_err(|error| {
            if error.kind() == std::io::ErrorKind::NotFound {
                ExecError::SandboxUnavailable {
                    reason: format!("the sandbox helper {} was not found", path.display()),
                }
            } else {
                refused(path, error)
            }
        })?;
        let (Some(directory), Some(name)) = (real.parent(), real.file_name()) else {
            return Err(refused(path, "the path names no file"));
        };
        let flags = OFlags::RDONLY | OFlags::CLOEXEC;
        let dir = rustix::fs::open(
            directory,
            flags | OFlags::DIRECTORY | OFlags::NOFOLLOW,
            Mode::empty(),
        )
        .map_err(|error| refused(path, format!("its directory: {error}")))?;
        let file = rustix::fs::openat(&dir, name, flags | OFlags::NOFOLLOW, Mode::empty())
            .map_err(|error| refused(path, error))?;
        let stat = rustix::fs::fstat(&file).map_err(|error| refused(path, error))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(refused(path, "not a regular file"));
        }
        if !trusted_owner(stat.st_uid) {
            return Err(refused(path, format!("owned by uid {}", stat.st_uid)));
        }
        if stat.st_mode & 0o022 != 0 {
            return Err(refused(path, "writable by group or others"));
        }
        if stat.st_mode & 0o111 == 0 {
            return Err(refused(path, "not executable"));
        }
        let dir_stat = rustix::fs::fstat(&dir).map_err(|error| refused(path, error))?;
        if !trusted_owner(dir_stat.st_uid) {
            return Err(refused(
                path,
                format!("its directory is owned by uid {}", dir_stat.st_uid),
            ));
        }
        if dir_stat.st_mode & 0o002 != 0 {
            return Err(refused(path, "its directory is writable by others"));
        }
        // The name still means the file that was checked (nothing swapped it
        // between the open and the directory's check).
        let entry = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|error| refused(path, error))?;
        if (entry.st_dev, entry.st_ino) != (stat.st_dev, stat.st_ino) {
            return Err(refused(path, "it was replaced while being checked"));
        }
        Ok(HelperFile {
            path: path.to_path_buf(),
            file,
        })
    }

    /// The path it was opened from.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// What to hand `execve` to run exactly the opened file: the kernel
    /// opens the descriptor's own file, not a path that could have changed.
    /// The descriptor is close-on-exec, which `execve` applies only after it
    /// opened the program.
    pub(crate) fn exec_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_fd().as_raw_fd()))
    }
}
