//! Every write form of the issue, as data: under the read-only sandbox each
//! leaves the workspace and a directory outside it byte-identical (tree
//! snapshots before and after); each one demonstrably writes when run
//! without a sandbox, so the probes are real. Under workspace-write the
//! workspace is writable and the outside directory still is not; with
//! namespaces mode and time changes work in the workspace and `.git` stays
//! read-only, without them metadata changes stay refused.

use std::path::Path;

use plan_exec::{CommandState, Confinement};

use crate::support::*;

/// `{T}` is the target directory; commands run with the workspace as cwd.
const WRITE_FORMS: &[(&str, &str)] = &[
    ("redirect new file", "echo pwned > {T}/new.txt"),
    ("redirect overwrite", "echo pwned > {T}/file.txt"),
    ("redirect truncate", ": > {T}/file.txt"),
    ("heredoc", "cat > {T}/heredoc.txt <<'EOF'\npwned\nEOF"),
    ("append", "echo pwned >> {T}/file.txt"),
    ("tee", "echo pwned | tee {T}/tee.txt"),
    (
        "dd notrunc",
        "dd if=/dev/zero of={T}/file.txt bs=1 count=1 conv=notrunc",
    ),
    ("cp", "cp {T}/file.txt {T}/copy.txt"),
    ("touch new", "touch {T}/touched"),
    ("touch existing", "touch {T}/file.txt"),
    ("touch -d", "touch -d 2000-01-01 {T}/file.txt"),
    ("mkdir", "mkdir {T}/newdir"),
    ("mktemp", "mktemp -p {T}"),
    ("rm", "rm -f {T}/file.txt"),
    ("rm -rf", "rm -rf {T}/sub"),
    ("rmdir", "rmdir {T}/emptydir"),
    ("mv", "mv {T}/file.txt {T}/moved.txt"),
    ("mv to scratch", "mv {T}/file.txt \"$TMPDIR\"/"),
    (
        "mv from scratch",
        "echo pwned > \"$TMPDIR\"/x && mv \"$TMPDIR\"/x {T}/x",
    ),
    ("ln -s", "ln -s /etc/passwd {T}/link"),
    ("ln hard", "ln {T}/file.txt {T}/hard"),
    (
        "hard link into scratch, then write",
        "ln {T}/file.txt \"$TMPDIR\"/h; echo pwned >> \"$TMPDIR\"/h",
    ),
    ("chmod", "chmod 600 {T}/file.txt"),
    ("chown", "chown 12345:12345 {T}/file.txt"),
    ("truncate", "truncate -s 0 {T}/file.txt"),
    ("sed -i", "sed -i s/original/pwned/ {T}/file.txt"),
    (
        "python open w",
        "python3 -c \"open('{T}/file.txt', 'w').write('pwned')\"",
    ),
    (
        "python open new",
        "python3 -c \"open('{T}/py.txt', 'w').write('pwned')\"",
    ),
    (
        "python setxattr",
        "python3 -c \"import os; os.setxattr('{T}/file.txt', 'user.pwned', b'1')\"",
    ),
    (
        "python chattr ioctl on a read-only fd",
        "python3 -c \"import array, fcntl, os; fd = os.open('{T}/file.txt', os.O_RDONLY); fcntl.ioctl(fd, 0x40086602, array.array('l', [0x80]))\"",
    ),
    (
        "python utime on a read-only fd",
        "python3 -c \"import os; fd = os.open('{T}/file.txt', os.O_RDONLY); os.utime(fd, (1, 1))\"",
    ),
    ("mkfifo", "mkfifo {T}/fifo"),
    ("git commit", "git -C {T} commit -q --allow-empty -m pwned"),
    ("git add + commit", "git -C {T} commit -qam pwned"),
    ("git reset --hard", "git -C {T} reset -q --hard HEAD~1"),
    ("git stash", "git -C {T} stash -q"),
];

fn command_for(form: &str, target: &Path) -> String {
    form.replace("{T}", &target.display().to_string())
}

struct Fixture {
    _dirs: Dirs,
    scratch: std::path::PathBuf,
    workspace: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn fixture() -> Fixture {
    let dirs = dirs();
    let workspace = dirs.root.path().join("workspace");
    let outside = dirs.root.path().join("outside");
    populate(&workspace);
    populate(&outside);
    Fixture {
        scratch: dirs.scratch.clone(),
        workspace,
        outside,
        _dirs: dirs,
    }
}

fn run_form(fixture: &Fixture, command: &str, confinement: Confinement) -> plan_exec::CommandOutcome {
    let mut spec = spec(command, &fixture.workspace, &fixture.scratch, confinement);
    spec.env = git_env(&fixture.scratch);
    run(spec).0
}

fn run_form_in(
    fixture: &Fixture,
    command: &str,
    confinement: Confinement,
    namespaces: bool,
) -> plan_exec::CommandOutcome {
    let mut spec = spec(command, &fixture.workspace, &fixture.scratch, confinement);
    spec.env = git_env(&fixture.scratch);
    spec.isolation.namespaces = namespaces;
    run(spec).0
}

#[test]
fn read_only_sandbox_refuses_every_write_form_in_the_workspace_and_outside() {
    if !sandbox_available("read_only_sandbox_refuses_every_write_form") {
        return;
    }
    let confined = fixture();
    let mut failures = Vec::new();
    for (name, form) in WRITE_FORMS {
        for target in [&confined.workspace, &confined.outside] {
            let before = (snapshot(&confined.workspace), snapshot(&confined.outside));
            let command = command_for(form, target);
            let outcome = run_form(&confined, &command, Confinement::ReadOnly);
            if outcome.state != CommandState::Exited {
                failures.push(format!("{name}: did not run: {outcome:?}"));
            }
            let after = (snapshot(&confined.workspace), snapshot(&confined.outside));
            if before != after {
                failures.push(format!("{name} ({}): the tree changed", target.display()));
            }

            // The same probe without a sandbox, on a fresh copy, must write:
            // otherwise the case above proves nothing.
            let control = fixture();
            let target = if target == &confined.workspace {
                &control.workspace
            } else {
                &control.outside
            };
            let before = (snapshot(&control.workspace), snapshot(&control.outside));
            run_form(&control, &command_for(form, target), Confinement::None);
            if before == (snapshot(&control.workspace), snapshot(&control.outside)) {
                failures.push(format!("{name}: the unsandboxed control changed nothing"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn workspace_write_sandbox_writes_only_the_workspace() {
    if !sandbox_available("workspace_write_sandbox_writes_only_the_workspace") {
        return;
    }
    let mut failures = Vec::new();
    for namespaces in namespace_modes() {
        let mut writable = vec!["redirect new file", "append", "mkdir", "sed -i", "rm", "mv"];
        let mut still_denied = vec!["chown", "python setxattr"];
        if namespaces {
            // Everything outside is a read-only mount, so mode and time
            // changes are left to the kernel, which allows them only here;
            // `.git` is read-only (P7), so git cannot commit or reset.
            writable.extend(["chmod", "touch -d", "python utime on a read-only fd"]);
            still_denied.extend(["git commit", "git reset --hard", "git stash"]);
        } else {
            writable.extend(["git commit", "git reset --hard"]);
            still_denied.extend(["chmod", "touch -d"]);
        }
        for (name, form) in WRITE_FORMS {
            let fixture = fixture();
            let confinement = Confinement::WorkspaceWrite {
                workspace_root: fixture.workspace.clone(),
                network: false,
            };
            let outside_before = snapshot(&fixture.outside);
            let outcome = run_form_in(
                &fixture,
                &command_for(form, &fixture.outside),
                confinement.clone(),
                namespaces,
            );
            if outcome.state != CommandState::Exited || snapshot(&fixture.outside) != outside_before {
                failures.push(format!(
                    "{name} (namespaces {namespaces}): the outside directory changed or it did not run: {outcome:?}"
                ));
            }
            let workspace_before = snapshot(&fixture.workspace);
            run_form_in(
                &fixture,
                &command_for(form, &fixture.workspace),
                confinement,
                namespaces,
            );
            let changed = snapshot(&fixture.workspace) != workspace_before;
            if writable.contains(name) && !changed {
                failures.push(format!(
                    "{name} (namespaces {namespaces}): the workspace should be writable"
                ));
            }
            if still_denied.contains(name) && changed {
                failures.push(format!("{name} (namespaces {namespaces}): must stay refused"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn the_scratch_directory_is_writable_and_is_tmpdir() {
    if !sandbox_available("the_scratch_directory_is_writable_and_is_tmpdir") {
        return;
    }
    let dirs = dirs();
    let (outcome, events) = run(spec(
        "set -e; test \"$TMPDIR\" = \"$0\" || true; echo data > \"$TMPDIR/a\"; mkdir \"$TMPDIR/d\"; \
         mv \"$TMPDIR/a\" \"$TMPDIR/d/b\"; mkfifo \"$TMPDIR/fifo\"; truncate -s 1 \"$TMPDIR/d/b\"; \
         python3 -c \"import tempfile; tempfile.NamedTemporaryFile().write(b'x')\"; echo ok > /dev/null; \
         cat \"$TMPDIR/d/b\"; echo; echo \"$TMPDIR\"",
        &dirs.scratch,
        &dirs.scratch,
        Confinement::ReadOnly,
    ));
    assert_eq!(
        outcome.exit_code,
        Some(0),
        "{outcome:?} {}",
        events.text(plan_exec::Stream::Stderr)
    );
    assert_eq!(
        events.text(plan_exec::Stream::Stdout),
        format!("d\n{}\n", dirs.scratch.display())
    );
    // Inside the namespaces the scratch directory is a private tmpfs at
    // the host directory's place: the disk gets nothing.
    assert_eq!(dirs.scratch.join("d/b").is_file(), !namespaces_available());
}
