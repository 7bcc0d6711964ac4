//! Small read-only questions about the filesystem that other layers need
//! answered without touching it themselves.

use std::path::Path;

/// Whether `path` names an existing regular file that someone may execute
/// (symlinks are followed, as a shell launcher would).
pub fn executable_exists(path: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(Path::new(path))
        .map(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The real path of a directory (every symlink followed), or `None` when it
/// does not exist or is not a directory. The host's command cwd check
/// compares these (plan-core's `check_resolved_cwd`).
pub fn real_directory(path: &Path) -> Option<std::path::PathBuf> {
    let real = std::fs::canonicalize(path).ok()?;
    real.is_dir().then_some(real)
}

/// Where writing `path` (absolute) would land: the real path of its
/// deepest existing ancestor (every symlink followed, the file itself
/// included when it exists) with the rest of the path after it; `None` when
/// a `..` follows a name that does not exist, a name is a link that leads
/// nowhere (writing it would create its target, wherever that is), or
/// nothing can be resolved. A file-writing tool's target is placed by this as well as by
/// its text (plan-core's `write_target`), so a link inside a workspace that
/// leads out of it is seen for what it is.
pub fn real_write_target(path: &Path) -> Option<std::path::PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(&existing) {
            let mut target = real;
            for component in rest.iter().rev() {
                target.push(component);
            }
            return Some(target);
        }
        if std::fs::symlink_metadata(&existing).is_ok_and(|metadata| metadata.file_type().is_symlink()) {
            return None;
        }
        rest.push(existing.file_name()?.to_owned());
        if !existing.pop() {
            return None;
        }
    }
}
