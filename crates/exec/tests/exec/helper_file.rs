//! The helper is the one the runner checked: it is opened once when the
//! runner is made, refused when anyone but root or the current user could
//! replace it, and executed by descriptor, so a file put at its path later
//! never runs.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use plan_exec::{CommandState, Confinement, Runner, SandboxSupport};

use crate::support::*;

/// A private copy of the built helper in `dir/bin`.
fn copy_helper(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let helper = bin.join(plan_exec::HELPER_NAME);
    crate::support::copy_executable(Path::new(env!("CARGO_BIN_EXE_plan-exec-sandbox")), &helper);
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    helper
}

#[test]
fn replacing_the_helper_after_the_runner_opened_it_changes_nothing() {
    let dirs = dirs();
    let helper = copy_helper(dirs.root.path());
    let runner = Runner::open(&helper).unwrap();
    // An attacker swaps the file at the helper's path for a script that
    // leaves a canary and runs the command without any sandbox.
    let canary = dirs.root.path().join("replacement-ran");
    let outside = tempfile::tempdir().unwrap();
    let replacement = dirs.root.path().join("bin/replacement");
    std::fs::write(
        &replacement,
        format!(
            "#!/bin/sh\ntouch '{}'\nexec /bin/sh -c 'echo unconfined'\n",
            canary.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&replacement, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&replacement, &helper).unwrap();

    let sandboxed = matches!(runner.sandbox_support(), SandboxSupport::Available { .. });
    let target = outside.path().join("written");
    let command = format!("echo confined; echo x > '{}'", target.display());
    let confinement = if sandboxed {
        Confinement::ReadOnly
    } else {
        Confinement::None
    };
    let events = Events::default();
    let outcome = runner
        .spawn(
            spec(&command, &dirs.scratch, &dirs.scratch, confinement),
            events.sink(),
        )
        .wait();
    assert!(!canary.exists(), "the file put at the helper's path ran");
    assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
    assert_eq!(events.text(plan_exec::Stream::Stdout), "confined\n");
    if sandboxed {
        assert!(!target.exists(), "the opened helper did not confine the command");
        assert_ne!(outcome.exit_code, Some(0));
    }
    // A runner made now opens the replacement, and refuses it only if it
    // fails a check; this one passes them, so the point is the descriptor.
    assert_eq!(runner.helper(), helper.as_path());
}

#[test]
fn a_helper_someone_else_could_replace_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let helper = copy_helper(dir.path());
    let refused = |path: &Path, why: &str| {
        let error = Runner::open(path).unwrap_err();
        assert!(
            matches!(error, plan_exec::ExecError::SandboxUnavailable { .. }),
            "{why}"
        );
        error.to_string()
    };
    assert!(Runner::open(&helper).is_ok());

    // Never relative to the working directory.
    let reason = refused(Path::new(plan_exec::HELPER_NAME), "relative");
    assert!(reason.contains("not absolute"), "{reason}");

    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o775)).unwrap();
    let reason = refused(&helper, "group-writable file");
    assert!(reason.contains("writable by group or others"), "{reason}");
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o757)).unwrap();
    refused(&helper, "others-writable file");
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o644)).unwrap();
    let reason = refused(&helper, "not executable");
    assert!(reason.contains("not executable"), "{reason}");
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();

    let bin = helper.parent().unwrap();
    std::fs::set_permissions(bin, std::fs::Permissions::from_mode(0o777)).unwrap();
    let reason = refused(&helper, "others-writable directory");
    assert!(reason.contains("directory is writable by others"), "{reason}");
    // Sticky does not help: the rule has no exceptions.
    std::fs::set_permissions(bin, std::fs::Permissions::from_mode(0o1777)).unwrap();
    refused(&helper, "sticky others-writable directory");
    std::fs::set_permissions(bin, std::fs::Permissions::from_mode(0o755)).unwrap();

    let reason = refused(bin, "a directory");
    assert!(reason.contains("not a regular file"), "{reason}");

    // A symlink is resolved and the real file checked.
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&helper, &link).unwrap();
    assert!(Runner::open(&link).is_ok());

    // Owned by someone else (only root can give a file away).
    if rustix::process::geteuid().is_root() {
        let nobody = Some(rustix::process::Uid::from_raw(65534));
        rustix::fs::chown(&helper, nobody, None).unwrap();
        let reason = refused(&helper, "foreign file");
        assert!(reason.contains("owned by uid 65534"), "{reason}");
        rustix::fs::chown(&helper, Some(rustix::process::Uid::ROOT), None).unwrap();
        rustix::fs::chown(bin, nobody, None).unwrap();
        let reason = refused(&helper, "foreign directory");
        assert!(reason.contains("directory is owned by uid 65534"), "{reason}");
    } else {
        eprintln!("not root: the foreign-owner cases need chown and are skipped");
    }
}

/// Set to a file path: the entry below writes what
/// `Runner::beside_current_exe` answered there.
const BESIDE_ENV: &str = "PLAN_EXEC_TEST_BESIDE_ANSWER";

/// Not a test of its own: the body of the child process of the test below
/// (a copy of this test binary with no helper beside it).
#[test]
fn beside_current_exe_entry() {
    let Some(answer) = std::env::var_os(BESIDE_ENV) else {
        return;
    };
    let text = match Runner::beside_current_exe() {
        Ok(runner) => format!("found {}", runner.helper().display()),
        Err(error @ plan_exec::ExecError::SandboxUnavailable { .. }) => format!("unavailable {error}"),
        Err(error) => format!("other {error}"),
    };
    std::fs::write(answer, text).unwrap();
}

#[test]
fn an_embedder_without_a_bundled_helper_gets_none_not_one_from_path() {
    let dir = tempfile::tempdir().unwrap();
    // A helper on PATH and one in the working directory: neither may be used.
    let on_path = copy_helper(dir.path());
    let cwd = on_path.parent().unwrap();
    let alone = dir.path().join("alone");
    std::fs::create_dir(&alone).unwrap();
    let exe = alone.join("embedder");
    // Copied by another process: a write descriptor of this one, inherited
    // by a child another test thread forks meanwhile, would make the copy
    // "busy" (ETXTBSY) when it is executed below.
    let copied = std::process::Command::new("cp")
        .arg(std::env::current_exe().unwrap())
        .arg(&exe)
        .status()
        .unwrap();
    assert!(copied.success());
    let answer = dir.path().join("answer");
    let status = std::process::Command::new(&exe)
        .args([
            "--exact",
            "helper_file::beside_current_exe_entry",
            "--test-threads=1",
        ])
        .env(BESIDE_ENV, &answer)
        .env("PATH", cwd)
        .current_dir(cwd)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let answer = std::fs::read_to_string(&answer).unwrap();
    assert!(answer.starts_with("unavailable "), "{answer}");
    assert!(answer.contains("was not found beside"), "{answer}");
}
