//! Reads work in the read-only sandbox: cat, grep -r, find, git status and
//! git log (git skips its optional index lock), and the tree stays intact.

use plan_exec::{CommandState, Confinement, Stream};

use crate::support::*;

#[test]
fn reads_work_read_only() {
    if !sandbox_available("reads_work_read_only") {
        return;
    }
    let dirs = dirs();
    let workspace = dirs.root.path().join("workspace");
    populate(&workspace);
    let before = snapshot(&workspace);
    let cases = [
        ("cat", "cat file.txt", "original\ndirty\n"),
        ("grep -r", "grep -r nested .", "./sub/inner.txt:nested\n"),
        ("find", "find . -name inner.txt", "./sub/inner.txt\n"),
        ("git status", "git status --porcelain", " M file.txt\n"),
        ("git log", "git log --format=%s", "two\none\n"),
        (
            "git diff",
            "git diff --stat | tail -1",
            " 1 file changed, 1 insertion(+)\n",
        ),
        ("ls", "ls", "emptydir\nfile.txt\nsecond.txt\nsub\n"),
        ("wc", "wc -l < file.txt", "2\n"),
    ];
    let mut failures = Vec::new();
    for (name, command, expected) in cases {
        let mut spec = spec(command, &workspace, &dirs.scratch, Confinement::ReadOnly);
        spec.env = git_env(&dirs.scratch);
        let (outcome, events) = run(spec);
        let stdout = events.text(Stream::Stdout);
        if outcome.state != CommandState::Exited || outcome.exit_code != Some(0) || stdout != expected {
            failures.push(format!(
                "{name}: {outcome:?} stdout={stdout:?} stderr={:?}",
                events.text(Stream::Stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert_eq!(snapshot(&workspace), before);
}

#[test]
fn the_documented_limits_hold() {
    if !sandbox_available("the_documented_limits_hold") {
        return;
    }
    // Python multiprocessing needs a writable /dev/shm (documented): inside
    // the namespaces the command has a private one; without them the
    // machine's is not writable. Plain subprocesses work either way.
    let dirs = dirs();
    let (outcome, events) = run(spec(
        "python3 -c \"import multiprocessing; multiprocessing.Lock(); print('lock-works')\" 2>&1 | tail -1; \
         python3 -c \"import subprocess; print(subprocess.run(['echo', 'child'], capture_output=True).stdout.decode(), end='')\"",
        &dirs.scratch,
        &dirs.scratch,
        Confinement::ReadOnly,
    ));
    assert_eq!(outcome.exit_code, Some(0));
    let refusal = if namespaces_available() {
        "lock-works"
    } else {
        "PermissionError: [Errno 13] Permission denied"
    };
    assert_eq!(events.text(Stream::Stdout), format!("{refusal}\nchild\n"));
}
