//! What a command may do to file modes and locks (`sandbox.md` P6, P13):
//! mode changes work where the command may write (inside the namespaces),
//! so a binary it links in its scratch directory runs; no command anywhere
//! makes a set-user-id or set-group-id file, or a file owned by another
//! user; no command takes a lock or lease on any file, so none can stall
//! another host's database; tools that lock their own caches go on without.
//! Every probe is shown to work unconfined, so each check can fail.

use std::path::Path;

use plan_exec::{CommandState, Confinement, Isolation, Stream};

use crate::support::*;

fn auto(workspace: &Path) -> Confinement {
    Confinement::WorkspaceWrite {
        workspace_root: workspace.to_path_buf(),
        network: false,
    }
}

fn run_in(
    command: &str,
    cwd: &Path,
    scratch: &Path,
    confinement: Confinement,
    namespaces: bool,
) -> (CommandState, String) {
    let mut spec = spec(command, cwd, scratch, confinement);
    spec.env = git_env(scratch);
    spec.isolation = Isolation {
        namespaces,
        ..host_isolation()
    };
    let (outcome, events) = run(spec);
    (outcome.state, events.text(Stream::Stdout))
}

/// Each way to get a set-id bit onto a file, printing `made` when it
/// worked.
const SET_ID_ATTEMPTS: &str = "\
    echo x > f1 && chmod u+s f1 2>/dev/null; \
    echo x > f2 && chmod g+s f2 2>/dev/null; \
    python3 -c \"import os; os.close(os.open('f3', os.O_CREAT | os.O_WRONLY, 0o4755))\" 2>/dev/null; \
    python3 -c \"import os; os.mknod('f4', 0o100000 | 0o2755)\" 2>/dev/null; \
    echo x > f5 && python3 -c \"import os; os.chmod('f5', 0o6755)\" 2>/dev/null; \
    for f in f1 f2 f3 f4 f5; do test -u $f -o -g $f && echo made-$f; done; \
    echo done";

#[test]
fn no_command_makes_a_set_id_file_anywhere() {
    if !sandbox_available("no_command_makes_a_set_id_file_anywhere") {
        return;
    }
    let dirs = dirs();
    let workspace = dirs.root.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    // Unconfined each attempt works.
    let (state, stdout) = run_in(
        SET_ID_ATTEMPTS,
        &workspace,
        &dirs.scratch,
        Confinement::None,
        false,
    );
    assert_eq!(state, CommandState::Exited);
    assert_eq!(stdout, "made-f1\nmade-f2\nmade-f3\nmade-f4\nmade-f5\ndone\n");
    for namespaces in namespace_modes() {
        for (place, confinement) in [
            (workspace.clone(), auto(&workspace)),
            (dirs.scratch.clone(), Confinement::ReadOnly),
            (dirs.scratch.clone(), auto(&workspace)),
        ] {
            for name in ["f1", "f2", "f3", "f4", "f5"] {
                let _ = std::fs::remove_file(place.join(name));
            }
            let (state, stdout) = run_in(
                SET_ID_ATTEMPTS,
                &place,
                &dirs.scratch,
                confinement.clone(),
                namespaces,
            );
            assert_eq!(state, CommandState::Exited);
            assert_eq!(
                stdout, "done\n",
                "a set-id file was made in {place:?} under {confinement:?} (namespaces {namespaces})"
            );
        }
    }
    // A file owned by another user: chown needs a capability no command has.
    let (state, stdout) = run_in(
        "echo x > mine && chown 65534 mine 2>/dev/null || echo chown-refused",
        &workspace,
        &dirs.scratch,
        auto(&workspace),
        namespaces_available(),
    );
    assert_eq!(state, CommandState::Exited);
    assert_eq!(stdout, "chown-refused\n");
}

#[test]
fn mode_changes_work_where_the_command_may_write_so_a_linked_binary_runs() {
    if !namespaces_here(
        "mode changes stay refused everywhere and are tested in privileges",
        "mode_changes_work_where_the_command_may_write_so_a_linked_binary_runs",
    ) {
        return;
    }
    let dirs = dirs();
    let outside = dirs.root.path().join("outside.txt");
    std::fs::write(&outside, "x").unwrap();
    let command = format!(
        "printf 'int main(void) {{ return 7; }}' > \"$TMPDIR/m.c\" && cc -o \"$TMPDIR/m\" \"$TMPDIR/m.c\"; \"$TMPDIR/m\"; echo linked=$?; \
         echo x > \"$TMPDIR/f\" && chmod 700 \"$TMPDIR/f\" && touch -d 2000-01-01 \"$TMPDIR/f\" && echo scratch-changed; \
         chmod 777 {0} 2>/dev/null || echo outside-refused; \
         touch -d 2000-01-01 {0} 2>/dev/null || echo outside-time-refused",
        outside.display()
    );
    let (state, stdout) = run_in(
        &command,
        &dirs.scratch,
        &dirs.scratch,
        Confinement::ReadOnly,
        true,
    );
    assert_eq!(state, CommandState::Exited);
    assert_eq!(
        stdout,
        "linked=7\nscratch-changed\noutside-refused\noutside-time-refused\n"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&outside).unwrap().permissions().mode() & 0o777,
        0o644
    );
}

#[test]
fn no_command_locks_or_leases_a_file_another_host_needs() {
    if !sandbox_available("no_command_locks_or_leases_a_file_another_host_needs") {
        return;
    }
    let dirs = dirs();
    let workspace = dirs.root.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    // Another project's host database, outside this workspace.
    let other = dirs.root.path().join("other-project.db");
    std::fs::write(&other, "db").unwrap();
    let command = format!(
        "python3 -c \"
import fcntl, sys
f = open('{0}', 'r')
for name, take in [('flock', lambda: fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)),
                   ('lockf', lambda: fcntl.lockf(f, fcntl.LOCK_SH | fcntl.LOCK_NB)),
                   ('ofd', lambda: fcntl.fcntl(f, 37, bytes(32))),
                   ('lease', lambda: fcntl.fcntl(f, fcntl.F_SETLEASE, fcntl.F_RDLCK))]:
    try:
        take(); print(name + '-taken')
    except OSError as error:
        print(name + '-refused')
\"",
        other.display()
    );
    // Unconfined the locks are taken (the lease, as the file's owner too).
    let (state, stdout) = run_in(&command, &workspace, &dirs.scratch, Confinement::None, false);
    assert_eq!(state, CommandState::Exited);
    assert!(stdout.contains("flock-taken\nlockf-taken\n"), "{stdout}");
    for namespaces in namespace_modes() {
        for confinement in [Confinement::ReadOnly, auto(&workspace)] {
            let (state, stdout) = run_in(
                &command,
                &workspace,
                &dirs.scratch,
                confinement.clone(),
                namespaces,
            );
            assert_eq!(state, CommandState::Exited);
            assert_eq!(
                stdout, "flock-refused\nlockf-refused\nofd-refused\nlease-refused\n",
                "{confinement:?}, namespaces {namespaces}"
            );
        }
    }
}

#[test]
fn planning_tools_the_readme_promises_work_read_only() {
    if !sandbox_available("planning_tools_the_readme_promises_work_read_only") {
        return;
    }
    let dirs = dirs();
    let workspace = dirs.root.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    sh(
        &workspace,
        "set -e
         mkdir src && echo 'fn main() {}' > src/main.rs
         printf '[package]\\nname = \"probe\"\\nversion = \"0.1.0\"\\nedition = \"2021\"\\n' > Cargo.toml
         cargo generate-lockfile --offline -q
         git init -q . && git add . && git -c user.name=t -c user.email=t@example.invalid commit -qm one",
    );
    let before = snapshot(&workspace);
    let cases = [
        (
            "cargo metadata",
            "cargo metadata --offline --format-version 1 --no-deps >/dev/null && echo ok",
        ),
        ("cargo tree", "cargo tree --offline >/dev/null && echo ok"),
        (
            "cargo check --frozen",
            "CARGO_INCREMENTAL=0 CARGO_TARGET_DIR=\"$TMPDIR/target\" cargo check --frozen -q && echo ok",
        ),
        ("git log", "git log --oneline >/dev/null && echo ok"),
        ("git status", "git status --short >/dev/null && echo ok"),
        ("git diff", "git diff HEAD >/dev/null && echo ok"),
        ("cat", "cat Cargo.toml >/dev/null && echo ok"),
        ("grep -r", "grep -rq main src && echo ok"),
        ("find", "find . -name '*.rs' | grep -q main && echo ok"),
        ("python3 -c", "python3 -c 'print(\"ok\")'"),
        (
            "node -e",
            "if command -v node >/dev/null; then node -e 'console.log(\"ok\")'; else echo ok; fi",
        ),
    ];
    let mut env = git_env(&dirs.scratch);
    // cargo and rustup find their toolchains under the real home; nothing
    // there is written (cargo goes on without its cache lock).
    if let Some(home) = std::env::var_os("HOME") {
        env.retain(|(name, _)| name != "HOME");
        env.push(("HOME".into(), home));
    }
    for (var, value) in ["CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN"]
        .iter()
        .filter_map(|name| std::env::var_os(name).map(|value| (*name, value)))
    {
        env.push((var.into(), value));
    }
    let mut failures = Vec::new();
    for namespaces in namespace_modes() {
        for (name, command) in cases {
            let mut spec = spec(command, &workspace, &dirs.scratch, Confinement::ReadOnly);
            spec.env = env.clone();
            spec.isolation = Isolation {
                namespaces,
                ..host_isolation()
            };
            let (outcome, events) = run(spec);
            if events.text(Stream::Stdout) != "ok\n" {
                failures.push(format!(
                    "{name} (namespaces {namespaces}): {outcome:?} {}",
                    events.text(Stream::Stderr)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert_eq!(snapshot(&workspace), before);
}

/// The environment a cargo command needs here: the toolchain found under
/// the real home (nothing there is written).
fn cargo_env(scratch: &Path) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut env = git_env(scratch);
    if let Some(home) = std::env::var_os("HOME") {
        env.retain(|(name, _)| name != "HOME");
        env.push(("HOME".into(), home));
    }
    for (var, value) in ["CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN"]
        .iter()
        .filter_map(|name| std::env::var_os(name).map(|value| (*name, value)))
    {
        env.push((var.into(), value));
    }
    env
}

#[test]
fn cargo_in_a_workspace_crate_and_cp_p_in_scratch_work_read_only() {
    if !sandbox_available("cargo_in_a_workspace_crate_and_cp_p_in_scratch_work_read_only") {
        return;
    }
    let dirs = dirs();
    let workspace = dirs.root.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    // A workspace of two path-only crates (no registry, so it builds
    // offline), one depending on the other.
    sh(
        &workspace,
        "set -e
         mkdir -p app/src lib/src
         printf '[workspace]\\nmembers = [\"app\", \"lib\"]\\nresolver = \"2\"\\n' > Cargo.toml
         printf '[package]\\nname = \"app\"\\nversion = \"0.1.0\"\\nedition = \"2021\"\\n[dependencies]\\nlib = { path = \"../lib\" }\\n' > app/Cargo.toml
         printf '[package]\\nname = \"lib\"\\nversion = \"0.1.0\"\\nedition = \"2021\"\\n' > lib/Cargo.toml
         echo 'fn main() { lib::f() }' > app/src/main.rs
         echo 'pub fn f() {}' > lib/src/lib.rs
         cargo generate-lockfile --offline -q",
    );
    let before = snapshot(&workspace);
    // Incremental compilation (on for workspace crates) locks its session
    // directory: inside the namespaces the lock is taken on the scratch
    // tmpfs; without them no command takes any lock, and it needs
    // CARGO_INCREMENTAL=0 (the README says so).
    let check = "CARGO_TARGET_DIR=\"$TMPDIR/target\" cargo check --frozen -q && echo ok";
    let cases = [
        (true, check.to_owned()),
        (false, format!("CARGO_INCREMENTAL=0 {check}")),
        (true, "cargo tree --offline >/dev/null && echo ok".to_owned()),
        (false, "cargo tree --offline >/dev/null && echo ok".to_owned()),
        (
            true,
            "echo x > \"$TMPDIR/a\" && chmod 640 \"$TMPDIR/a\" && touch -d @1000000000 \"$TMPDIR/a\" \
             && cp -p \"$TMPDIR/a\" \"$TMPDIR/b\" && stat -c '%a %Y' \"$TMPDIR/b\" | grep -qx '640 1000000000' \
             && echo ok"
                .to_owned(),
        ),
    ];
    let mut failures = Vec::new();
    for (namespaces, command) in &cases {
        if *namespaces && !namespaces_available() {
            eprintln!("no namespaces here: {command} is not tested");
            continue;
        }
        let mut spec = spec(
            command,
            &workspace.join("app"),
            &dirs.scratch,
            Confinement::ReadOnly,
        );
        spec.env = cargo_env(&dirs.scratch);
        spec.isolation = Isolation {
            namespaces: *namespaces,
            ..Isolation::default()
        };
        let (outcome, events) = run(spec);
        if events.text(Stream::Stdout) != "ok\n" {
            failures.push(format!(
                "{command} (namespaces {namespaces}): {outcome:?} {}",
                events.text(Stream::Stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert_eq!(snapshot(&workspace), before);
}

#[test]
fn a_command_locks_its_own_scratch_files_and_nothing_else() {
    if !namespaces_here(
        "locks stay refused everywhere without namespaces (no_command_locks_or_leases_a_file_another_host_needs)",
        "a_command_locks_its_own_scratch_files_and_nothing_else",
    ) {
        return;
    }
    let dirs = dirs();
    let workspace = dirs.root.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let outside = dirs.root.path().join("other-project.db");
    std::fs::write(&outside, "db").unwrap();
    // A lock on a scratch file is real: a second open file cannot take it
    // (non-blocking), a child's blocking wait ends when it is released;
    // one on /dev/shm too; a file outside the scratch directory (readable,
    // in the workspace or not) is refused, shared or exclusive.
    let command = format!(
        r#"python3 -c "
import fcntl, os, struct, threading, time
path = os.path.join(os.environ['TMPDIR'], 'lock')
first = open(path, 'w')
fcntl.flock(first, fcntl.LOCK_EX | fcntl.LOCK_NB)
second = open(path, 'w')
try:
    fcntl.flock(second, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print('second-taken')
except BlockingIOError:
    print('second-refused')
pid = os.fork()
if pid == 0:
    fcntl.flock(open(path, 'w'), fcntl.LOCK_EX)
    os._exit(0)
time.sleep(0.2)
print('waiting' if os.waitpid(pid, os.WNOHANG) == (0, 0) else 'not-waiting')
fcntl.flock(first, fcntl.LOCK_UN)
print('waited', os.waitpid(pid, 0)[1])
shm = open('/dev/shm/lock', 'w')
fcntl.flock(shm, fcntl.LOCK_SH | fcntl.LOCK_NB)
print('shm-taken')
taken = []
def in_a_thread():
    fcntl.flock(open(os.path.join(os.environ['TMPDIR'], 'thread'), 'w'), fcntl.LOCK_EX | fcntl.LOCK_NB)
    taken.append('thread-taken')
thread = threading.Thread(target=in_a_thread)
thread.start()
thread.join()
print(*taken)
F_OFD_SETLK = 37
def ofd(file, kind):
    fcntl.fcntl(file, F_OFD_SETLK, struct.pack('hhqqi', kind, 0, 0, 0, 0))
ofd(open(os.path.join(os.environ['TMPDIR'], 'ofd'), 'w'), fcntl.F_WRLCK)
print('ofd-taken')
for name in ['{}', '{}']:
    for take in [lambda f: fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB), lambda f: ofd(f, fcntl.F_RDLCK)]:
        try:
            take(open(name))
            print('outside-taken')
        except OSError as error:
            print('outside-refused', error.strerror)
""#,
        outside.display(),
        workspace.join("Cargo.toml").display()
    );
    std::fs::write(workspace.join("Cargo.toml"), "").unwrap();
    for confinement in [
        Confinement::ReadOnly,
        Confinement::WorkspaceWrite {
            workspace_root: workspace.clone(),
            network: false,
        },
    ] {
        let (state, stdout) = run_in(&command, &workspace, &dirs.scratch, confinement.clone(), true);
        assert_eq!(state, CommandState::Exited);
        assert_eq!(
            stdout,
            format!(
                "second-refused\nwaiting\nwaited 0\nshm-taken\nthread-taken\nofd-taken\n{}",
                "outside-refused Operation not supported\n".repeat(4)
            ),
            "{confinement:?}"
        );
    }
}
