//! Scratch directories: the one place every confinement lets a command
//! write, exported to it as `TMPDIR`.
//!
//! A [`ScratchRoot`] is a private directory (owned by the current user,
//! nobody else may enter it) that is opened level by level from `/` without
//! following a symlink, and then held open. Every scratch directory is made
//! fresh inside it with `mkdirat`, opened with `O_NOFOLLOW | O_DIRECTORY`
//! and handed on as that descriptor: the sandbox's write rule is built from
//! the descriptor, so renaming or symlinking a path afterwards changes
//! nothing. Cleaning and removal go through `openat`/`unlinkat` relative to
//! held descriptors and never follow a symlink.
//!
//! The caller names the directories and decides when they go; this module
//! decides no policy. It never follows a symlink while creating, cleaning or
//! removing anything, and never repairs a root it refuses.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use sha2::Digest;

use crate::outcome::ExecError;

/// How deep a command's directory tree may be for the host to remove it
/// (each level holds a descriptor while it is emptied).
const MAX_DEPTH: usize = 256;

fn scratch_error(path: &Path, reason: impl std::fmt::Display) -> ExecError {
    ExecError::ScratchDir {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The private directory scratch directories are made in, held open.
#[derive(Debug)]
pub struct ScratchRoot {
    path: PathBuf,
    dir: OwnedFd,
}

impl ScratchRoot {
    /// The default root for the database at `database`: one per database
    /// (so two hosts on different databases never sweep each other's), in
    /// a per-user directory under `$XDG_RUNTIME_DIR` when that is set to an
    /// absolute path of an existing directory of the current user, else
    /// under the system temporary directory:
    /// `<base>/plan-checkpoint-<uid>/<first 16 hex digits of SHA-256 of the
    /// database's absolute path>`. Never inside the database's directory,
    /// which may be inside a workspace.
    pub fn default_for(database: &Path) -> PathBuf {
        let base = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            // Someone else's runtime directory (kept across `sudo -E`) would
            // be refused as a level of the root.
            .filter(|base| {
                base.is_absolute()
                    && std::fs::symlink_metadata(base)
                        .is_ok_and(|metadata| metadata.is_dir() && metadata.uid() == euid())
            })
            .unwrap_or_else(std::env::temp_dir);
        let database = std::path::absolute(database).unwrap_or_else(|_| database.to_path_buf());
        let digest = hex::encode(sha2::Sha256::digest(database.as_os_str().as_bytes()));
        base.join(format!("plan-checkpoint-{}", euid()))
            .join(&digest[..16])
    }

    /// Opens the root at `path` (absolute), creating missing levels with
    /// mode 0700. Every level is opened from its parent with `O_NOFOLLOW`:
    /// a symlink anywhere is refused. Each existing level above the root
    /// must be owned by root or the current user and not writable by group
    /// or others unless sticky (as `/tmp`); the root itself must be owned by
    /// the current user with no access for group or others.
    ///
    /// # Errors
    ///
    /// [`ExecError::ScratchDir`] (`SCRATCH_DIR_FAILED`) naming the level and
    /// why; nothing is changed to make a refused root acceptable.
    pub fn open(path: &Path) -> Result<ScratchRoot, ExecError> {
        if !path.is_absolute() {
            return Err(scratch_error(path, "the scratch root must be an absolute path"));
        }
        let mut dir =
            rustix::fs::open("/", DIR_FLAGS, Mode::empty()).map_err(|error| scratch_error(path, error))?;
        let mut walked = PathBuf::from("/");
        let names: Vec<&OsStr> = path
            .components()
            .filter_map(|component| match component {
                Component::Normal(name) => Some(Ok(name)),
                Component::ParentDir => Some(Err(())),
                Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
            })
            .collect::<Result<_, ()>>()
            .map_err(|()| scratch_error(path, "the scratch root must not contain `..`"))?;
        let Some(last) = names.len().checked_sub(1) else {
            return Err(scratch_error(path, "the scratch root must not be `/`"));
        };
        for (index, name) in names.into_iter().enumerate() {
            walked.push(name);
            let next = match rustix::fs::openat(&dir, name, DIR_FLAGS, Mode::empty()) {
                Err(Errno::NOENT) => {
                    match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o700)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(error) => return Err(scratch_error(&walked, error)),
                    }
                    rustix::fs::openat(&dir, name, DIR_FLAGS, Mode::empty())
                }
                other => other,
            };
            let next = next.map_err(|error| match error {
                Errno::LOOP | Errno::NOTDIR => scratch_error(&walked, "is a symlink or not a directory"),
                other => scratch_error(&walked, other),
            })?;
            let stat = rustix::fs::fstat(&next).map_err(|error| scratch_error(&walked, error))?;
            if index == last {
                if stat.st_uid != euid() {
                    return Err(scratch_error(
                        &walked,
                        format!("owned by uid {}, not {}", stat.st_uid, euid()),
                    ));
                }
                if stat.st_mode & 0o077 != 0 {
                    return Err(scratch_error(
                        &walked,
                        format!("mode {:o}: group or others have access", stat.st_mode & 0o7777),
                    ));
                }
            } else {
                if stat.st_uid != 0 && stat.st_uid != euid() {
                    return Err(scratch_error(&walked, format!("owned by uid {}", stat.st_uid)));
                }
                if stat.st_mode & 0o022 != 0 && stat.st_mode & 0o1000 == 0 {
                    return Err(scratch_error(
                        &walked,
                        "writable by group or others and not sticky",
                    ));
                }
            }
            dir = next;
        }
        Ok(ScratchRoot {
            path: path.to_path_buf(),
            dir,
        })
    }

    /// The root's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes the fresh directory `name` (one plain component, mode 0700) in
    /// the root and opens it. An existing entry of that name is an error: a
    /// scratch directory is never reused.
    ///
    /// # Errors
    ///
    /// [`ExecError::InvalidSpec`] for a name that is not one plain
    /// component, [`ExecError::ScratchDir`] when it cannot be made.
    pub fn create(&self, name: &str) -> Result<ScratchDir, ExecError> {
        let plain = !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0']);
        if !plain {
            return Err(ExecError::InvalidSpec {
                reason: format!("scratch directory name {name:?} is not one plain component"),
            });
        }
        let path = self.path.join(name);
        rustix::fs::mkdirat(&self.dir, name, Mode::from_raw_mode(0o700))
            .map_err(|error| scratch_error(&path, error))?;
        let dir = rustix::fs::openat(&self.dir, name, DIR_FLAGS, Mode::empty())
            .map_err(|error| scratch_error(&path, error))?;
        Ok(ScratchDir {
            path,
            root: self.path.clone(),
            name: Some(OsString::from(name)),
            dir: Arc::new(dir),
        })
    }

    /// Removes a directory made by [`ScratchRoot::create`] and everything
    /// in it: its contents through the descriptor held since its creation
    /// (wherever it has been moved meanwhile), then whatever now has its
    /// name in the root, without following a symlink there. A directory that
    /// is already gone is fine. Directories a command made unreadable are
    /// made accessible again first.
    ///
    /// # Errors
    ///
    /// [`ExecError::ScratchDir`] when something could not be removed (the
    /// next [`ScratchRoot::sweep`] tries again).
    pub fn remove(&self, scratch: &ScratchDir) -> Result<(), ExecError> {
        clear(scratch.dir.as_fd(), &scratch.path, 0)?;
        if let Some(name) = &scratch.name {
            remove_entry(self.dir.as_fd(), name, &scratch.path, 0)?;
        }
        Ok(())
    }

    /// Removes every entry of the root (for the startup fence: no command
    /// runs then, so everything there is stale). Returns how many entries
    /// were removed. Nothing is followed out of the root.
    ///
    /// # Errors
    ///
    /// [`ExecError::ScratchDir`] when an entry could not be removed.
    pub fn sweep(&self) -> Result<usize, ExecError> {
        clear(self.dir.as_fd(), &self.path, 0)
    }
}

/// A scratch directory as a command gets it: held open, so the sandbox's
/// rule names this very directory, plus its path for `TMPDIR`. Cloning
/// shares the descriptor.
#[derive(Clone, Debug)]
pub struct ScratchDir {
    path: PathBuf,
    root: PathBuf,
    /// Its name in the root, when a [`ScratchRoot`] made it.
    name: Option<OsString>,
    dir: Arc<OwnedFd>,
}

impl ScratchDir {
    /// Opens an existing directory the caller manages itself (not made by a
    /// [`ScratchRoot`]); the last component is not followed if it is a
    /// symlink. Its parent counts as its scratch root.
    ///
    /// # Errors
    ///
    /// [`ExecError::ScratchDirMissing`] when `path` is not a directory.
    pub fn open(path: &Path) -> Result<ScratchDir, ExecError> {
        let dir =
            rustix::fs::open(path, DIR_FLAGS, Mode::empty()).map_err(|_| ExecError::ScratchDirMissing {
                path: path.to_path_buf(),
            })?;
        Ok(ScratchDir {
            path: path.to_path_buf(),
            root: path.parent().map(Path::to_path_buf).unwrap_or_default(),
            name: None,
            dir: Arc::new(dir),
        })
    }

    /// The path it had when it was made or opened (exported as `TMPDIR`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The scratch root it lies in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The open directory.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }
}

impl PartialEq for ScratchDir {
    /// The same directory: same path and same open file.
    fn eq(&self, other: &ScratchDir) -> bool {
        self.path == other.path && self.dir.as_raw_fd() == other.dir.as_raw_fd()
    }
}

impl Eq for ScratchDir {}

/// Removes every entry of the open directory `dir` (whose path, for
/// messages, is `path`); returns how many there were.
fn clear(dir: BorrowedFd<'_>, path: &Path, depth: usize) -> Result<usize, ExecError> {
    if depth > MAX_DEPTH {
        return Err(scratch_error(path, format!("deeper than {MAX_DEPTH} levels")));
    }
    let mut removed = 0;
    // Names are read first and removed after, so removal never races the
    // directory stream; a second pass finds nothing when all went.
    loop {
        let names = entry_names(dir, path)?;
        if names.is_empty() {
            return Ok(removed);
        }
        for name in names {
            remove_entry(dir, &name, &path.join(&name), depth)?;
            removed += 1;
        }
    }
}

fn entry_names(dir: BorrowedFd<'_>, path: &Path) -> Result<Vec<OsString>, ExecError> {
    let mut stream = rustix::fs::Dir::read_from(dir).map_err(|error| scratch_error(path, error))?;
    let mut names = Vec::new();
    while let Some(entry) = stream.read() {
        let entry = entry.map_err(|error| scratch_error(path, error))?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(OsStr::from_bytes(name).to_owned());
        }
    }
    Ok(names)
}

/// Removes `name` from `parent`: a symlink or file is unlinked (never
/// followed), a directory is opened without following, emptied and removed.
/// A name that is gone already is fine.
fn remove_entry(parent: BorrowedFd<'_>, name: &OsStr, path: &Path, depth: usize) -> Result<(), ExecError> {
    let stat = match rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(Errno::NOENT) => return Ok(()),
        Err(error) => return Err(scratch_error(path, error)),
    };
    if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
        return match rustix::fs::unlinkat(parent, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(error) => Err(scratch_error(path, error)),
        };
    }
    let child = match rustix::fs::openat(parent, name, DIR_FLAGS, Mode::empty()) {
        Ok(child) => child,
        Err(Errno::NOENT) => return Ok(()),
        Err(Errno::ACCESS) => {
            restore_access(parent, name, path)?;
            rustix::fs::openat(parent, name, DIR_FLAGS, Mode::empty())
                .map_err(|error| scratch_error(path, error))?
        }
        Err(error) => return Err(scratch_error(path, error)),
    };
    clear(child.as_fd(), path, depth + 1)?;
    match rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(error) => Err(scratch_error(path, error)),
    }
}

/// Gives the owner full access to the directory `name` in `parent` again.
/// `chmod` has no reliable no-follow form, so the directory is pinned with
/// an `O_PATH | O_NOFOLLOW` descriptor and changed through that
/// descriptor's `/proc/self/fd` entry, which names exactly the pinned
/// inode.
fn restore_access(parent: BorrowedFd<'_>, name: &OsStr, path: &Path) -> Result<(), ExecError> {
    let pinned = rustix::fs::openat(
        parent,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|error| scratch_error(path, error))?;
    let link = format!("/proc/self/fd/{}", pinned.as_raw_fd());
    rustix::fs::chmod(link.as_str(), Mode::from_raw_mode(0o700)).map_err(|error| scratch_error(path, error))
}
