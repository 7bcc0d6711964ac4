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
