//! Scratch directories under attack: the root is private and checked at
//! every level without following a symlink (a symlinked, foreign or shared
//! root is refused, never repaired); each directory is fresh; the sandbox's
//! write rule is the directory the host created even after its path, its
//! parent or the root was swapped for a symlink; removal and the startup
//! sweep never follow a link out. Every attack aims at a canary directory
//! the test owns outside the scratch root.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use plan_exec::{CommandSpec, CommandState, Confinement, ExecError, ScratchDir, ScratchRoot};

use crate::support::*;

/// A canary directory with one file; `intact` says whether it is unchanged.
struct Canary {
    dir: tempfile::TempDir,
}

impl Canary {
    fn new() -> Canary {
        let dir = tempfile::tempdir().unwrap();
        // Private, as the host user's own directories are: a root that
        // follows a link to it would pass every check but the link's.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(dir.path().join("keep"), "canary").unwrap();
        Canary { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn assert_intact(&self, what: &str) {
        let names: Vec<_> = std::fs::read_dir(self.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("keep")], "{what}");
        assert_eq!(
            std::fs::read_to_string(self.path().join("keep")).unwrap(),
            "canary",
            "{what}"
        );
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn the_root_is_created_private_and_directories_are_fresh() {
    let base = tempfile::tempdir().unwrap();
    let path = base.path().join("a/b/root");
    let root = ScratchRoot::open(&path).unwrap();
    for level in ["a", "a/b", "a/b/root"] {
        assert_eq!(mode(&base.path().join(level)), 0o700, "{level}");
    }
    let first = root.create("command-1").unwrap();
    assert_eq!(first.path(), path.join("command-1"));
    assert_eq!(first.root(), path);
    assert_eq!(mode(first.path()), 0o700);
    // Never reused, and only one plain component.
    assert!(matches!(
        root.create("command-1").unwrap_err(),
        plan_exec::ExecError::ScratchDir { .. }
    ));
    for bad in ["", ".", "..", "a/b", "nul\0"] {
        assert!(
            matches!(root.create(bad), Err(ExecError::InvalidSpec { .. })),
            "{bad:?}"
        );
    }
    // Removal also of what a command made unreadable, and of what is gone.
    std::fs::create_dir_all(first.path().join("locked/inner")).unwrap();
    std::fs::write(first.path().join("locked/inner/file"), "x").unwrap();
    std::fs::set_permissions(
        first.path().join("locked"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    root.remove(&first).unwrap();
    assert!(!first.path().exists());
    root.remove(&first).unwrap();
    // The default root is per user and per database, never beside it.
    let database = base.path().join("ws/.pi/plan/plan.db");
    let default = ScratchRoot::default_for(&database);
    assert!(!default.starts_with(base.path()), "{}", default.display());
    assert_ne!(default, ScratchRoot::default_for(&base.path().join("other.db")));
    assert!(
        default
            .parent()
            .unwrap()
            .ends_with(format!("plan-checkpoint-{}", rustix::process::geteuid().as_raw())),
        "{}",
        default.display()
    );
}

#[test]
fn a_root_that_is_a_symlink_shared_or_foreign_is_refused_and_left_alone() {
    let canary = Canary::new();
    let base = tempfile::tempdir().unwrap();
    let refused = |path: &Path, why: &str| {
        let error = ScratchRoot::open(path).unwrap_err();
        assert!(matches!(error, plan_exec::ExecError::ScratchDir { .. }), "{why}");
        error.to_string()
    };

    // The root itself is a symlink (the startup sweep would empty its
    // target), or a level above it is.
    let link = base.path().join("root-link");
    std::os::unix::fs::symlink(canary.path(), &link).unwrap();
    let reason = refused(&link, "symlinked root");
    assert!(reason.contains("symlink"), "{reason}");
    let parent_link = base.path().join("parent-link");
    std::os::unix::fs::symlink(canary.path(), &parent_link).unwrap();
    refused(&parent_link.join("root"), "symlinked parent");
    canary.assert_intact("a refused root is never followed");

    // Writable by others, or readable by the group: refused, not repaired.
    let shared = base.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let reason = refused(&shared, "others-writable root");
    assert!(reason.contains("group or others"), "{reason}");
    assert_eq!(mode(&shared), 0o777, "a refused root is not repaired");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o750)).unwrap();
    refused(&shared, "group-readable root");
    // A level above that others can write (and that is not sticky).
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    refused(&shared.join("root"), "others-writable parent");
    assert!(!shared.join("root").exists());

    if rustix::process::geteuid().is_root() {
        let foreign = base.path().join("foreign");
        std::fs::create_dir(&foreign).unwrap();
        std::fs::set_permissions(&foreign, std::fs::Permissions::from_mode(0o700)).unwrap();
        rustix::fs::chown(&foreign, Some(rustix::process::Uid::from_raw(65534)), None).unwrap();
        let reason = refused(&foreign, "foreign root");
        assert!(reason.contains("owned by uid 65534"), "{reason}");
        assert_eq!(std::fs::metadata(&foreign).unwrap().uid(), 65534);
    } else {
        eprintln!("not root: the foreign-owner case needs chown and is skipped");
    }
    refused(Path::new("relative/root"), "relative");
}

#[test]
fn removal_and_the_sweep_never_follow_a_link_out_of_the_root() {
    let canary = Canary::new();
    let base = tempfile::tempdir().unwrap();
    let root = ScratchRoot::open(&base.path().join("root")).unwrap();

    // A command's directory holds links to the canary; another was
    // replaced by a link to it after it was made.
    let linked = root.create("links").unwrap();
    std::os::unix::fs::symlink(canary.path(), linked.path().join("dir-link")).unwrap();
    std::os::unix::fs::symlink(canary.path().join("keep"), linked.path().join("file-link")).unwrap();
    root.remove(&linked).unwrap();
    assert!(!linked.path().exists());
    canary.assert_intact("removing links");

    let swapped = root.create("swapped").unwrap();
    std::fs::write(swapped.path().join("own"), "x").unwrap();
    let away = root.path().join("swapped.away");
    std::fs::rename(swapped.path(), &away).unwrap();
    std::os::unix::fs::symlink(canary.path(), swapped.path()).unwrap();
    root.remove(&swapped).unwrap();
    canary.assert_intact("removing a directory replaced by a link");
    assert!(
        std::fs::symlink_metadata(swapped.path()).is_err(),
        "the link goes"
    );
    // Its contents went through the descriptor held since creation.
    assert_eq!(std::fs::read_dir(&away).unwrap().count(), 0);

    // What a dead host left: directories, links, files. The sweep removes
    // every entry and nothing behind a link.
    let stale = root.create("stale").unwrap();
    std::os::unix::fs::symlink(canary.path(), stale.path().join("inner-link")).unwrap();
    std::os::unix::fs::symlink(canary.path(), root.path().join("top-link")).unwrap();
    std::fs::write(root.path().join("stray"), "x").unwrap();
    assert_eq!(root.sweep().unwrap(), 4);
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
    canary.assert_intact("the sweep");
}

/// A `WorkspaceWrite` spec writing `$TMPDIR/escaped`, in `workspace`.
fn writes_tmpdir(workspace: &Path, scratch: ScratchDir) -> CommandSpec {
    let mut spec = spec(
        "echo x > \"$TMPDIR/escaped\"; echo rc=$?",
        workspace,
        workspace,
        Confinement::WorkspaceWrite {
            workspace_root: workspace.to_path_buf(),
            network: false,
        },
    );
    spec.scratch = scratch;
    spec
}

#[test]
fn a_swapped_scratch_path_does_not_widen_the_sandbox() {
    if !sandbox_available("a_swapped_scratch_path_does_not_widen_the_sandbox") {
        return;
    }
    let canary = Canary::new();
    let workspace = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    let root_path = base.path().join("root");
    let root = ScratchRoot::open(&root_path).unwrap();

    // An earlier command (or another session, or an unconfined command)
    // moved the directory away and left a symlink to the canary at its
    // path: the path now leads to the canary, the held directory does not.
    // Inside namespaces the helper binds the scratch directory again by its
    // path, and refuses a path that no longer leads to the directory the
    // host made: the command does not run at all. Without them it runs, and
    // the rule built from the held descriptor keeps the write away.
    let confined = |outcome: &plan_exec::CommandOutcome, events: &Events, namespaces: bool, rc: &str| {
        if namespaces {
            assert!(
                matches!(
                    outcome.error,
                    Some(plan_exec::ExecError::SandboxUnavailable { .. })
                ),
                "{outcome:?}"
            );
        } else {
            assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
            assert!(events.text(plan_exec::Stream::Stdout).contains(rc));
        }
    };
    let scratch = root.create("dir").unwrap();
    std::fs::rename(scratch.path(), root_path.join("dir.away")).unwrap();
    std::os::unix::fs::symlink(canary.path(), scratch.path()).unwrap();
    let spec = writes_tmpdir(workspace.path(), scratch);
    let namespaces = spec.isolation.namespaces;
    let (outcome, events) = run(spec);
    confined(&outcome, &events, namespaces, "rc=1");
    canary.assert_intact("write through a symlinked scratch path");

    // The same with the scratch root itself swapped for a symlink.
    let scratch = root.create("second").unwrap();
    let moved = base.path().join("root.away");
    std::fs::rename(&root_path, &moved).unwrap();
    std::os::unix::fs::symlink(canary.path(), &root_path).unwrap();
    std::os::unix::fs::symlink(canary.path(), canary.path().join("second")).unwrap();
    let (outcome, events) = run(writes_tmpdir(workspace.path(), scratch.clone()));
    confined(&outcome, &events, namespaces, "rc=1");
    std::fs::remove_file(canary.path().join("second")).unwrap();
    canary.assert_intact("write through a symlinked scratch root");

    // Without namespaces the held directory itself stays writable wherever
    // it now lies.
    let mut spec = writes_tmpdir(workspace.path(), scratch);
    spec.command = format!("echo x > '{}/second/own'; echo rc=$?", moved.display());
    let (outcome, events) = run(spec);
    confined(&outcome, &events, namespaces, "rc=0");
    canary.assert_intact("after the last command");
}

#[test]
fn with_the_scratch_root_isolated_a_swapped_path_or_parent_never_moves_the_scratch() {
    if !sandbox_available("with_the_scratch_root_isolated_a_swapped_path_or_parent_never_moves_the_scratch") {
        return;
    }
    let workspace = tempfile::tempdir().unwrap();
    for swap_parent in [false, true] {
        let canary = Canary::new();
        let base = tempfile::tempdir().unwrap();
        let parent = base.path().join("parent");
        std::fs::create_dir(&parent).unwrap();
        let root_path = parent.join("root");
        let root = ScratchRoot::open(&root_path).unwrap();
        let scratch = root.create("dir").unwrap();
        // An earlier command (of another session, or unconfined) swapped the
        // scratch directory's path, or the root's parent, for a link to the
        // canary, where the same names lead on.
        if swap_parent {
            std::fs::rename(&parent, base.path().join("parent.away")).unwrap();
            std::os::unix::fs::symlink(canary.path(), &parent).unwrap();
            std::os::unix::fs::symlink(canary.path(), canary.path().join("root")).unwrap();
        } else {
            std::fs::rename(scratch.path(), root_path.join("dir.away")).unwrap();
            std::os::unix::fs::symlink(canary.path(), scratch.path()).unwrap();
        }
        let mut spec = writes_tmpdir(workspace.path(), scratch);
        spec.isolation.scratch_root = Some(root_path.clone());
        let namespaces = spec.isolation.namespaces;
        let (outcome, events) = run(spec);
        if namespaces {
            // The path no longer leads to the directory the host made: no
            // tmpfs is mounted anywhere, nothing runs.
            assert!(
                matches!(outcome.error, Some(ExecError::SandboxUnavailable { .. })),
                "{outcome:?}"
            );
        } else {
            assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
            assert!(events.text(plan_exec::Stream::Stdout).contains("rc=1"));
        }
        if swap_parent {
            std::fs::remove_file(canary.path().join("root")).unwrap();
        }
        canary.assert_intact(&format!("swap of the parent: {swap_parent}"));
    }
}
