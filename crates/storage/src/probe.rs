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
