//! Per-turn scratch directories: the one place every confinement lets a
//! command write, exported to it as `TMPDIR`.
//!
//! The caller names and places them (ids come from outside) and decides when
//! a turn ends; this module only creates, removes and sweeps directories. It
//! never follows a symlink out of a scratch directory while removing it.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::outcome::ExecError;

fn scratch_error(path: &Path, error: &std::io::Error) -> ExecError {
    ExecError::ScratchDir {
        path: path.to_path_buf(),
        reason: error.to_string(),
    }
}

/// Creates the fresh directory `parent/name` (mode 0700; `parent` is created
/// too if needed). `name` must be one plain path component. An existing
/// `parent/name` is an error: a scratch directory is never reused.
pub fn create_scratch_dir(parent: &Path, name: &str) -> Result<PathBuf, ExecError> {
    let plain = !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0']);
    if !plain {
        return Err(ExecError::InvalidSpec {
            reason: format!("scratch directory name {name:?} is not one plain component"),
        });
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(parent)
        .map_err(|error| scratch_error(parent, &error))?;
    let path = parent.join(name);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&path)
        .map_err(|error| scratch_error(&path, &error))?;
    Ok(path)
}

/// Removes a scratch directory and everything in it. A directory that is
/// already gone is fine (the startup fence may remove what a turn's end
/// already removed). Directories the command made unreadable are made
/// accessible again first.
pub fn remove_scratch_dir(path: &Path) -> Result<(), ExecError> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::PermissionDenied => {
            restore_directory_access(path);
            match std::fs::remove_dir_all(path) {
                Ok(()) => Ok(()),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(error) => Err(scratch_error(path, &error)),
            }
        }
        Err(error) => Err(scratch_error(path, &error)),
    }
}

/// Gives the owner full access to every directory under `path` (symlinks
/// are not followed), so that removal can descend into them.
fn restore_directory_access(path: &Path) {
    let Ok(metadata) = std::fs::symlink_metadata(path) else {
        return;
    };
    if !metadata.is_dir() {
        return;
    }
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.flatten() {
            restore_directory_access(&entry.path());
        }
    }
}

/// Removes every entry under `parent` (for the startup fence: no turn is
/// running then, so every scratch directory there is stale). Returns how
/// many entries were removed. A missing `parent` removes nothing.
pub fn clear_scratch_root(parent: &Path) -> Result<usize, ExecError> {
    let entries = match std::fs::read_dir(parent) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(error) => return Err(scratch_error(parent, &error)),
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry.map_err(|error| scratch_error(parent, &error))?;
        let path = entry.path();
        let is_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
        if is_dir {
            remove_scratch_dir(&path)?;
        } else {
            std::fs::remove_file(&path).map_err(|error| scratch_error(&path, &error))?;
        }
        removed += 1;
    }
    Ok(removed)
}
