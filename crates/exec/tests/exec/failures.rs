//! Commands that cannot start say why, with a distinct error each, and run
//! nothing: missing shell, cwd or scratch dir, a NUL in the command, a
//! missing helper (a sandbox error when a sandbox was asked for), a
//! workspace root that cannot be opened, the helper's own refusal of a
//! missing scratch dir (Landlock would skip it silently), and namespaces
//! that cannot be built.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use plan_exec::{CommandState, Confinement, ExecError, Runner};

use crate::support::*;

fn failed(outcome: &plan_exec::CommandOutcome) -> &ExecError {
    assert_eq!(outcome.state, CommandState::FailedToStart, "{outcome:?}");
    assert_eq!((outcome.stdout_bytes, outcome.stderr_bytes), (0, 0));
    outcome.error.as_ref().unwrap()
}

#[test]
fn start_failures_are_distinct_errors_and_run_nothing() {
    let dirs = dirs();
    let marker = dirs.root.path().join("ran");
    let command = format!("touch {}", marker.display());
    let base = spec(&command, &dirs.scratch, &dirs.scratch, Confinement::None);

    let mut missing_shell = base.clone();
    missing_shell.shell = PathBuf::from("/nonexistent/shell");
    let (outcome, _) = run(missing_shell);
    assert_eq!(failed(&outcome).code(), "SHELL_UNAVAILABLE");

    let mut missing_cwd = base.clone();
    missing_cwd.cwd = dirs.root.path().join("no-such-dir");
    let (outcome, _) = run(missing_cwd);
    assert_eq!(failed(&outcome).code(), "COMMAND_CWD_UNAVAILABLE");

    for confinement in [Confinement::None, Confinement::ReadOnly] {
        let mut missing_scratch = base.clone();
        missing_scratch.scratch_dir = dirs.root.path().join("no-scratch");
        missing_scratch.confinement = confinement;
        let (outcome, _) = run(missing_scratch);
        assert_eq!(failed(&outcome).code(), "SCRATCH_DIR_MISSING");
    }

    let mut nul = base.clone();
    nul.command = "echo a\0b".into();
    let (outcome, _) = run(nul);
    assert_eq!(failed(&outcome).code(), "INVALID_COMMAND_SPEC");

    let absent = Runner::new(dirs.root.path().join("no-helper"));
    let outcome = absent.spawn(base.clone(), |_| {}).wait();
    assert_eq!(failed(&outcome).code(), "SPAWN_FAILED");
    let mut confined = base.clone();
    confined.confinement = Confinement::ReadOnly;
    let outcome = absent.spawn(confined, |_| {}).wait();
    assert_eq!(failed(&outcome).code(), "SANDBOX_UNAVAILABLE");
    assert!(matches!(
        absent.sandbox_support(),
        plan_exec::SandboxSupport::Unavailable { .. }
    ));

    let mut missing_workspace = base.clone();
    missing_workspace.confinement = Confinement::WorkspaceWrite {
        workspace_root: dirs.root.path().join("no-workspace"),
        network: false,
    };
    let (outcome, _) = run(missing_workspace);
    assert_eq!(failed(&outcome).code(), "SANDBOX_UNAVAILABLE");

    assert!(!marker.exists(), "a failed start ran the command");
}

#[test]
fn the_confining_stage_refuses_a_missing_scratch_dir_itself() {
    // The runner checks the scratch dir before it starts anything; the
    // helper checks again (the directory can vanish in between), because
    // Landlock would silently skip a rule path it cannot open.
    let dirs = dirs();
    let (ours, theirs) = UnixStream::pair().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_plan-exec-sandbox"))
        .args([
            "confine",
            "--parent",
            &std::process::id().to_string(),
            "--scratch",
        ])
        .arg(dirs.root.path().join("vanished"))
        .args(["--read-only", "--shell", "/bin/true", "--", "true"])
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .spawn()
        .unwrap();
    let mut report = String::new();
    (&ours).read_to_string(&mut report).unwrap();
    assert!(report.starts_with("scratch "), "{report}");
    assert!(!child.wait().unwrap().success());
}

#[test]
fn namespaces_that_cannot_be_built_run_nothing() {
    if !sandbox_available("namespaces_that_cannot_be_built_run_nothing") || !namespaces_available() {
        return;
    }
    let dirs = dirs();
    let marker = dirs.root.path().join("ran");
    let mut spec = spec(
        &format!("touch {}", marker.display()),
        &dirs.scratch,
        &dirs.scratch,
        Confinement::ReadOnly,
    );
    // A scratch root that does not exist cannot be covered.
    spec.isolation.namespaces = true;
    spec.isolation.scratch_root = Some(dirs.root.path().join("no-such-root"));
    let (outcome, _) = run(spec.clone());
    let ExecError::SandboxUnavailable { reason } = failed(&outcome) else {
        panic!("{outcome:?}");
    };
    assert!(reason.starts_with("namespaces: "), "{reason}");
    assert!(!marker.exists());
    // Namespaces asked for a Plan command whose scratch directory is a link.
    let link = dirs.root.path().join("link");
    std::os::unix::fs::symlink(&dirs.scratch, &link).unwrap();
    spec.isolation.scratch_root = None;
    spec.scratch_dir = link;
    let (outcome, _) = run(spec);
    assert!(
        matches!(failed(&outcome), ExecError::SandboxUnavailable { .. }),
        "{outcome:?}"
    );
    assert!(!marker.exists());
}
