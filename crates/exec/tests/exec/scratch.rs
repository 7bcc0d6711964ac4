//! Scratch directory helpers: fresh 0700 directories, refusal of reuse and
//! of names that are not one plain component, removal (also of what a
//! command made unreadable, and of what is already gone), and the sweep of
//! a whole scratch root.

use std::os::unix::fs::PermissionsExt;

use plan_exec::{ExecError, clear_scratch_root, create_scratch_dir, remove_scratch_dir};

#[test]
fn scratch_directories_are_created_fresh_and_removed() {
    let root = tempfile::tempdir().unwrap();
    let parent = root.path().join("scratch-root");
    let dir = create_scratch_dir(&parent, "turn-1").unwrap();
    assert_eq!(dir, parent.join("turn-1"));
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert!(matches!(
        create_scratch_dir(&parent, "turn-1").unwrap_err(),
        plan_exec::ExecError::ScratchDir { .. }
    ));
    for bad in ["", ".", "..", "a/b", "nul\0"] {
        assert!(
            matches!(
                create_scratch_dir(&parent, bad),
                Err(ExecError::InvalidSpec { .. })
            ),
            "{bad:?}"
        );
    }

    std::fs::create_dir_all(dir.join("locked/inner")).unwrap();
    std::fs::write(dir.join("locked/inner/file"), "x").unwrap();
    std::fs::set_permissions(dir.join("locked"), std::fs::Permissions::from_mode(0o000)).unwrap();
    remove_scratch_dir(&dir).unwrap();
    assert!(!dir.exists());
    remove_scratch_dir(&dir).unwrap();

    create_scratch_dir(&parent, "a").unwrap();
    create_scratch_dir(&parent, "b").unwrap();
    std::fs::write(parent.join("stray"), "x").unwrap();
    assert_eq!(clear_scratch_root(&parent).unwrap(), 3);
    assert_eq!(std::fs::read_dir(&parent).unwrap().count(), 0);
    assert_eq!(clear_scratch_root(&root.path().join("missing")).unwrap(), 0);
}
