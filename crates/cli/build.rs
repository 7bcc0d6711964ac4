//! Records which commit this binary was built from, for `--version`.
//!
//! In order: `PLAN_CHECKPOINT_COMMIT` (a release build sets it), the git
//! checkout this crate is built in, the `.cargo_vcs_info.json` cargo writes
//! into a published crate (so `cargo install plan-checkpoint` knows its
//! commit too), else `unknown`: a build without git still builds. It must
//! not make the crate rebuild on every run, so it watches only the files
//! that name the checked-out commit, and only those that exist.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PLAN_CHECKPOINT_COMMIT");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = std::env::var("PLAN_CHECKPOINT_COMMIT")
        .ok()
        .filter(|commit| !commit.trim().is_empty())
        .map(|commit| commit.trim().to_owned())
        .or_else(|| from_git(&manifest_dir))
        .or_else(|| from_vcs_info(&manifest_dir))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=PLAN_CHECKPOINT_COMMIT={commit}");
}

/// `git rev-parse` in the checkout, watching HEAD and the branch it names.
fn from_git(dir: &Path) -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let output = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
            .filter(|text| !text.is_empty())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(git(&["rev-parse", "--git-path", &branch]));
    }
    watched.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    for path in watched.into_iter().flatten() {
        let path = dir.join(path);
        // A path that does not exist would make cargo run this script (and
        // rebuild the crate) every time.
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    Some(commit)
}

/// The commit `cargo package` recorded, in a crate built from crates.io.
fn from_vcs_info(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(".cargo_vcs_info.json")).ok()?;
    let start = text.find("\"sha1\"")?;
    let value = text[start + 6..].split('"').nth(1)?;
    let short: String = value.chars().take(12).collect();
    (short.len() == 12 && short.chars().all(|c| c.is_ascii_hexdigit())).then_some(short)
}
