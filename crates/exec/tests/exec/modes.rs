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
        ("python3 -c", "python3 -c 'print(\"ok\")'"),
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
