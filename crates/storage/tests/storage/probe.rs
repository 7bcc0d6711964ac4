//! The filesystem questions storage answers for other layers.

#[test]
fn a_write_target_is_placed_where_its_links_lead() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let workspace = root.join("workspace");
    let outside = root.join("outside");
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, workspace.join("link")).unwrap();
    std::os::unix::fs::symlink(outside.join("missing"), workspace.join("dangling")).unwrap();
    let real = |path: &std::path::Path| plan_storage::real_write_target(path);
    // A new file, an existing directory's new subdirectories, a file.
    assert_eq!(
        real(&workspace.join("src/new.rs")),
        Some(workspace.join("src/new.rs"))
    );
    assert_eq!(
        real(&workspace.join("a/b/c.txt")),
        Some(workspace.join("a/b/c.txt"))
    );
    // Through a link: where it leads.
    assert_eq!(
        real(&workspace.join("link/new.txt")),
        Some(outside.join("new.txt"))
    );
    assert_eq!(
        real(&workspace.join("src/../link/new")),
        Some(outside.join("new"))
    );
    // A link to nothing cannot be placed; nor `..` after a missing name.
    assert_eq!(real(&workspace.join("dangling")), None);
    assert_eq!(real(&workspace.join("dangling/x")), None);
    assert_eq!(real(&workspace.join("missing/../x")), None);
    assert_eq!(real(std::path::Path::new("relative/path")), None);
}
