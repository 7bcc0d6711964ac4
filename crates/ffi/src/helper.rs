//! The sandbox helper a host that names none finds by itself: the installed
//! `plan-checkpoint` binary, which is a complete helper.
//!
//! Where a package manager puts it beside this library: `pip install
//! plan-checkpoint` (or `plan-ffi[sandbox]`) into the environment that holds
//! `plan_ffi` puts it in that environment's `bin/`, a few directories above
//! the loaded `libplan_ffi` (found in `/proc/self/maps`); else the first
//! `plan-checkpoint` on `PATH` (`pipx`, `uv tool`, `npm install -g`). It
//! decides nothing: the host opens and checks whatever it is given, and
//! without one keeps its own default (`plan-exec-sandbox` beside the
//! executable), with the same refusal when that is missing.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The binary's name.
const BINARY: &str = "plan-checkpoint";

/// How many directories above the library's own an environment's root may
/// be (`<prefix>/lib/python3.X/site-packages/plan_ffi/libplan_ffi.so`).
const PREFIX_DEPTH: usize = 5;

/// The installed `plan-checkpoint` binary, if there is one.
pub(crate) fn installed() -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    find(loaded_library(&maps).as_deref(), std::env::var_os("PATH"))
}

/// The path of the loaded `libplan_ffi` in `/proc/self/maps`' text.
fn loaded_library(maps: &str) -> Option<PathBuf> {
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .map(Path::new)
        .find(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with("libplan_ffi"))
        })
        .map(Path::to_path_buf)
}

/// `bin/plan-checkpoint` in an environment above `library`, else the first
/// `plan-checkpoint` on `path`.
fn find(library: Option<&Path>, path: Option<OsString>) -> Option<PathBuf> {
    let beside_library = library
        .into_iter()
        .flat_map(|library| library.ancestors().skip(1).take(PREFIX_DEPTH))
        .map(|prefix| prefix.join("bin").join(BINARY));
    let on_path = path
        .iter()
        .flat_map(std::env::split_paths)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(BINARY));
    beside_library
        .chain(on_path)
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::{find, loaded_library};

    #[test]
    fn the_binary_of_the_librarys_environment_comes_before_the_one_on_path() {
        let root = tempfile::tempdir().unwrap();
        let env = root.path().join("venv");
        let library_dir = env.join("lib/python3.11/site-packages/plan_ffi");
        let env_bin = env.join("bin");
        let path_bin = root.path().join("elsewhere");
        for dir in [&library_dir, &env_bin, &path_bin] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let library = library_dir.join("libplan_ffi.so");
        let path = std::env::join_paths([path_bin.clone()]).ok();
        assert_eq!(
            find(Some(&library), path.clone()),
            None,
            "nothing installed, nothing found"
        );
        std::fs::write(path_bin.join("plan-checkpoint"), "").unwrap();
        assert_eq!(
            find(Some(&library), path.clone()),
            Some(path_bin.join("plan-checkpoint"))
        );
        std::fs::write(env_bin.join("plan-checkpoint"), "").unwrap();
        assert_eq!(
            find(Some(&library), path.clone()),
            Some(env_bin.join("plan-checkpoint"))
        );
        // A relative PATH entry is never used.
        assert_eq!(find(None, Some("elsewhere".into())), None);
    }

    #[test]
    fn the_loaded_library_is_read_from_the_memory_map() {
        let maps = "7f00-7f10 r-xp 00000000 08:01 1234 /usr/lib/libc.so.6\n\
                    7f20-7f30 r-xp 00000000 08:01 5678 /venv/lib/python3.11/site-packages/plan_ffi/libplan_ffi.so\n\
                    7f40-7f50 rw-p 00000000 00:00 0\n";
        assert_eq!(
            loaded_library(maps).as_deref(),
            Some(std::path::Path::new(
                "/venv/lib/python3.11/site-packages/plan_ffi/libplan_ffi.so"
            ))
        );
        assert_eq!(loaded_library("7f40-7f50 rw-p 00000000 00:00 0\n"), None);
    }
}
