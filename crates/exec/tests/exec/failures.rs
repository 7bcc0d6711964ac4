//! Commands that cannot start say why, with a distinct error each, and run
//! nothing: missing shell, cwd or scratch dir, a NUL in the command, a
//! missing helper (a sandbox error when a sandbox was asked for), a
//! workspace root that cannot be opened, the helper's own refusal to run
//! without the scratch directory's descriptor, and namespaces that cannot be
//! built.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use plan_exec::{CommandState, Confinement, ExecError, Runner, ScratchDir};

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
    assert!(
        matches!(failed(&outcome), plan_exec::ExecError::ShellUnavailable { .. }),
        "{:?}",
        failed(&outcome)
    );

    let mut missing_cwd = base.clone();
    missing_cwd.cwd = dirs.root.path().join("no-such-dir");
    let (outcome, _) = run(missing_cwd);
    assert!(
        matches!(failed(&outcome), plan_exec::ExecError::CwdUnavailable { .. }),
        "{:?}",
        failed(&outcome)
    );

    // A scratch directory is held open: one that is missing, or a symlink,
    // cannot even be named in a spec.
    let missing = ScratchDir::open(&dirs.root.path().join("no-scratch")).unwrap_err();
    assert!(matches!(missing, plan_exec::ExecError::ScratchDirMissing { .. }));
    let link = dirs.root.path().join("link-to-scratch");
    std::os::unix::fs::symlink(&dirs.scratch, &link).unwrap();
    assert!(matches!(
        ScratchDir::open(&link).unwrap_err(),
        plan_exec::ExecError::ScratchDirMissing { .. }
    ));

    let mut nul = base.clone();
    nul.command = "echo a\0b".into();
    let (outcome, _) = run(nul);
    assert!(
        matches!(failed(&outcome), plan_exec::ExecError::InvalidSpec { .. }),
        "{:?}",
        failed(&outcome)
    );

    let absent = Runner::open(dirs.root.path().join("no-helper")).unwrap_err();
    assert!(matches!(absent, plan_exec::ExecError::SandboxUnavailable { .. }));
    assert!(absent.to_string().contains("was not found"), "{absent}");

    let mut missing_workspace = base.clone();
    missing_workspace.confinement = Confinement::WorkspaceWrite {
        workspace_root: dirs.root.path().join("no-workspace"),
        network: false,
    };
    let (outcome, _) = run(missing_workspace);
    assert!(
        matches!(failed(&outcome), plan_exec::ExecError::SandboxUnavailable { .. }),
        "{:?}",
        failed(&outcome)
    );

    assert!(!marker.exists(), "a failed start ran the command");
}

#[test]
fn the_confining_stage_refuses_to_run_without_the_scratch_descriptor() {
    // The scratch directory reaches the confining stage only as a
    // descriptor; a stage that gets a byte without one refuses to run.
    let dirs = dirs();
    let (ours, theirs) = UnixStream::pair().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_plan-exec-sandbox"))
        .args([
            "confine",
            "--parent",
            &std::process::id().to_string(),
            "--scratch",
        ])
        .arg(&dirs.scratch)
        .arg("--scratch-root")
        .arg(dirs.root.path())
        .args([
            "--read-only",
            "--scratch-size",
            "1048576",
            "--scratch-inodes",
            "1024",
            "--shell",
            "/bin/true",
            "--",
            "true",
        ])
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .spawn()
        .unwrap();
    (&ours).write_all(b"s").unwrap();
    let mut report = String::new();
    (&ours).read_to_string(&mut report).unwrap();
    assert!(report.starts_with("scratch "), "{report}");
    assert!(report.contains("did not arrive"), "{report}");
    assert!(!child.wait().unwrap().success());
}

#[test]
fn namespaces_that_cannot_be_built_run_nothing() {
    if !sandbox_available("namespaces_that_cannot_be_built_run_nothing") || !namespaces_available() {
        return;
    }
    let dirs = dirs();
    let marker = dirs.root.path().join("ran");
    // The scratch path swapped after the host made (and opened) the
    // directory, as an earlier command could: for a link to it, and for
    // another directory in its place. The namespaces bind the directory by
    // its path, so either must be refused rather than bound.
    for swap in ["link", "directory"] {
        let scratch = dirs.root.path().join(format!("scratch-{swap}"));
        std::fs::create_dir(&scratch).unwrap();
        let mut spec = spec(
            &format!("touch {}", marker.display()),
            &dirs.scratch,
            &scratch,
            Confinement::ReadOnly,
        );
        spec.isolation.namespaces = true;
        let away = dirs.root.path().join(format!("away-{swap}"));
        std::fs::rename(&scratch, &away).unwrap();
        if swap == "link" {
            std::os::unix::fs::symlink(&away, &scratch).unwrap();
        } else {
            std::fs::create_dir(&scratch).unwrap();
        }
        let (outcome, _) = run(spec);
        let ExecError::SandboxUnavailable { reason } = failed(&outcome) else {
            panic!("{swap}: {outcome:?}");
        };
        assert!(reason.starts_with("namespaces: "), "{swap}: {reason}");
        assert!(!marker.exists(), "{swap}");
    }
}
