//! The sandbox's own seams (`sandbox.md` P10, P12, P13), attacked with
//! canaries the tests own: a library and a `BASH_ENV` script planted in the
//! workspace and named by the command's environment never run in a helper
//! stage; repository pointers that are FIFOs or huge neither block nor
//! delay a command; a workspace renamed and replaced by a symlink keeps its
//! commands where the session bound it; protected paths hold when their
//! parents are renamed, when they do not exist yet, at any depth behind any
//! number of directories, and when the repository's metadata links
//! elsewhere in the workspace. Every probe is shown to work unconfined
//! first, so each check can fail.

use std::path::{Path, PathBuf};
use std::process::Command;

use plan_exec::{CommandState, Confinement, ExecError, Isolation, Stream, WorkspaceDir};

use crate::support::*;

fn auto(workspace: &Path) -> Confinement {
    Confinement::WorkspaceWrite {
        workspace_root: workspace.to_path_buf(),
        network: false,
    }
}

/// A workspace `ws` beside a canary directory `outside`, in one temporary
/// directory with the scratch directory.
struct Fixture {
    dirs: Dirs,
    ws: PathBuf,
    outside: PathBuf,
}

fn fixture() -> Fixture {
    let dirs = dirs();
    let ws = dirs.root.path().join("ws");
    let outside = dirs.root.path().join("outside");
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&outside).unwrap();
    Fixture { dirs, ws, outside }
}

fn in_workspace(
    command: &str,
    fixture: &Fixture,
    cwd: &Path,
    confinement: Confinement,
    namespaces: bool,
) -> plan_exec::CommandSpec {
    let mut spec = spec(command, cwd, &fixture.dirs.scratch, confinement);
    spec.env = git_env(&fixture.dirs.scratch);
    spec.isolation = Isolation {
        namespaces,
        ..host_isolation()
    };
    spec
}

/// Compiles a shared library whose constructor creates a file named after
/// its process in `canaries`, so every process that loads it leaves a trace
/// where a confined shell cannot write.
fn planted_library(dir: &Path, canaries: &Path) -> PathBuf {
    let source = dir.join("planted.c");
    let library = dir.join("libplanted.so");
    std::fs::write(
        &source,
        format!(
            "#include <fcntl.h>\n#include <stdio.h>\n#include <unistd.h>\n\
             __attribute__((constructor)) static void planted(void) {{\n\
             char path[4096]; snprintf(path, sizeof path, \"%s/loaded-%d\", \"{}\", (int)getpid());\n\
             int fd = open(path, O_CREAT | O_WRONLY, 0600); if (fd >= 0) close(fd); }}\n",
            canaries.display()
        ),
    )
    .unwrap();
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .expect("a C compiler (cc) is needed to plant the library of this attack");
    assert!(status.success(), "cc failed");
    library
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn workspace_code_named_by_the_environment_never_runs_outside_the_sandbox() {
    if !sandbox_available("workspace_code_named_by_the_environment_never_runs_outside_the_sandbox") {
        return;
    }
    let fixture = fixture();
    let library = planted_library(&fixture.ws, &fixture.outside);
    let bash_env = fixture.ws.join("env.sh");
    std::fs::write(
        &bash_env,
        format!("touch {}/bash-env-ran\n", fixture.outside.display()),
    )
    .unwrap();
    // The probe works: unconfined, the loader runs it and so does bash.
    let mut unconfined = in_workspace("true", &fixture, &fixture.ws, Confinement::None, false);
    unconfined.env.push(("LD_PRELOAD".into(), library.clone().into()));
    unconfined.env.push(("BASH_ENV".into(), bash_env.clone().into()));
    let (outcome, _) = run(unconfined);
    assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
    assert!(
        entries(&fixture.outside)
            .iter()
            .any(|name| name.starts_with("loaded-"))
    );
    assert!(fixture.outside.join("bash-env-ran").exists());
    for name in entries(&fixture.outside) {
        std::fs::remove_file(fixture.outside.join(name)).unwrap();
    }
    for namespaces in namespace_modes() {
        for confinement in [Confinement::ReadOnly, auto(&fixture.ws)] {
            for variable in ["LD_PRELOAD", "LD_AUDIT"] {
                let mut spec = in_workspace(
                    "echo \"$LD_PRELOAD$LD_AUDIT\" | grep -c planted",
                    &fixture,
                    &fixture.ws,
                    confinement.clone(),
                    namespaces,
                );
                spec.env.push((variable.into(), library.clone().into()));
                spec.env
                    .push(("LD_LIBRARY_PATH".into(), fixture.ws.clone().into()));
                spec.env.push(("BASH_ENV".into(), bash_env.clone().into()));
                let (outcome, events) = run(spec);
                assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
                // The command itself still gets its environment.
                assert_eq!(
                    events.text(Stream::Stdout),
                    "1\n",
                    "{variable}, namespaces {namespaces}"
                );
                assert_eq!(
                    entries(&fixture.outside),
                    Vec::<String>::new(),
                    "{variable} ran planted code unconfined (namespaces {namespaces}, {confinement:?})"
                );
            }
        }
    }
}

#[test]
fn repository_pointers_that_are_fifos_or_huge_neither_block_nor_delay_a_command() {
    if !namespaces_here(
        "the repository walk runs only inside namespaces and is not tested",
        "repository_pointers_that_are_fifos_or_huge_neither_block_nor_delay_a_command",
    ) {
        return;
    }
    let fixture = fixture();
    let ws = &fixture.ws;
    // At the root and nested: `.git` files whose gitdir's `commondir` is a
    // FIFO, a socket-like endless device link, and a huge file.
    sh(
        ws,
        "set -e
         mkdir -p .g sub/.h deep/.k
         printf 'gitdir: .g\\n' > .git
         mkfifo .g/commondir
         printf 'gitdir: ../sub/.h\\n' > sub/.git
         ln -s /dev/zero sub/.h/commondir
         printf 'gitdir: .k\\n' > deep/.git
         head -c 10000000 /dev/zero | tr '\\0' a > deep/.k/commondir
         mkfifo sub/.git-fifo",
    );
    let (outcome, events) = run(in_workspace("echo ran", &fixture, ws, auto(ws), true));
    assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
    assert_eq!(events.text(Stream::Stdout), "ran\n");
    // The gitdirs the pointers name stay protected all the same.
    let (outcome, events) = run(in_workspace(
        "touch .g/planted sub/.h/planted deep/.k/planted 2>/dev/null; echo done",
        &fixture,
        ws,
        auto(ws),
        true,
    ));
    assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
    assert_eq!(events.text(Stream::Stdout), "done\n");
    for planted in [".g/planted", "sub/.h/planted", "deep/.k/planted"] {
        assert!(!ws.join(planted).exists(), "{planted} was written");
    }
    // A command in such a workspace is cancelled as any other.
    let (running, events) = start(in_workspace(
        "echo started; exec sleep 600",
        &fixture,
        ws,
        auto(ws),
        true,
    ));
    stdout_line(&events, "started");
    running.cancel();
    let outcome = running.wait();
    assert_eq!(outcome.state, CommandState::Cancelled, "{outcome:?}");
}

#[test]
fn a_workspace_renamed_and_replaced_keeps_its_commands_where_it_is() {
    if !sandbox_available("a_workspace_renamed_and_replaced_keeps_its_commands_where_it_is") {
        return;
    }
    for namespaces in namespace_modes() {
        let fixture = fixture();
        let ws = &fixture.ws;
        std::fs::create_dir(ws.join("sub")).unwrap();
        let bound = WorkspaceDir::open(ws).unwrap();
        // An enclosing session's command moves the workspace away and puts
        // a link to another directory in its place.
        let moved = fixture.dirs.root.path().join("ws.moved");
        std::fs::rename(ws, &moved).unwrap();
        std::os::unix::fs::symlink(&fixture.outside, ws).unwrap();
        for cwd in [".", "sub"] {
            let mut spec = in_workspace(
                "touch written-here",
                &fixture,
                Path::new(cwd),
                auto(ws),
                namespaces,
            );
            spec.workspace = Some(bound.clone());
            let (outcome, _) = run(spec);
            assert_eq!(
                outcome.state,
                CommandState::Exited,
                "{outcome:?} (namespaces {namespaces})"
            );
            assert!(moved.join(cwd).join("written-here").exists(), "cwd {cwd}");
        }
        assert_eq!(
            entries(&fixture.outside),
            Vec::<String>::new(),
            "namespaces {namespaces}"
        );
        // A working directory swapped for a link that leaves the workspace
        // is refused, not followed.
        std::fs::remove_dir_all(moved.join("sub")).unwrap();
        std::os::unix::fs::symlink(&fixture.outside, moved.join("sub")).unwrap();
        for confinement in [Confinement::ReadOnly, auto(ws)] {
            let mut spec = in_workspace(
                "touch escaped",
                &fixture,
                Path::new("sub"),
                confinement,
                namespaces,
            );
            spec.workspace = Some(bound.clone());
            let (outcome, _) = run(spec);
            assert_eq!(outcome.state, CommandState::FailedToStart, "{outcome:?}");
            assert!(
                matches!(&outcome.error, Some(ExecError::CwdUnavailable { reason, .. }) if reason.contains("out of the workspace")),
                "{:?}",
                outcome.error
            );
        }
        assert_eq!(entries(&fixture.outside), Vec::<String>::new());
    }
}

/// Runs `attack` under `auto` in `ws` (inside namespaces) and returns its
/// stdout.
fn attack(fixture: &Fixture, attack: &str, isolation: Isolation) -> String {
    let mut spec = in_workspace(attack, fixture, &fixture.ws, auto(&fixture.ws), true);
    spec.isolation = Isolation {
        namespaces: true,
        ..isolation
    };
    let (outcome, events) = run(spec);
    assert_eq!(
        outcome.state,
        CommandState::Exited,
        "{outcome:?}: {}",
        events.text(Stream::Stderr)
    );
    events.text(Stream::Stdout)
}

#[test]
fn a_protected_path_holds_when_its_parents_are_renamed() {
    if !namespaces_here(
        "P13 is not enforced and not tested",
        "a_protected_path_holds_when_its_parents_are_renamed",
    ) {
        return;
    }
    let fixture = fixture();
    let ws = &fixture.ws;
    sh(
        ws,
        "set -e
         git init -q .
         mkdir -p libs/foo && git -C libs/foo init -q
         mkdir -p gits && git init -q --separate-git-dir gits/main wt
         mkdir -p extra/keep && echo kept > extra/keep/file
         mkdir -p .local/state && echo db > .local/state/plan.db",
    );
    let isolation = Isolation {
        protected: vec![ws.join("extra/keep")],
        hidden: vec![ws.join(".local/state")],
        ..host_isolation()
    };
    // Unconfined, each rename and plant works: the probes can fail.
    let probe = |target: &str, parent: &str| {
        format!(
            "if mv {parent} {parent}.away 2>/dev/null; then mkdir -p {target} && echo evil > {target}/planted && echo {parent}-moved; else echo {parent}-held; fi; "
        )
    };
    let script: String = [
        probe("libs/foo/.git/hooks", "libs"),
        probe("libs/foo/.git/hooks", "libs/foo"),
        probe("gits/main/hooks", "gits"),
        probe("extra/keep", "extra"),
        probe(".local/state", ".local"),
    ]
    .concat();
    let output = attack(&fixture, &script, isolation);
    assert_eq!(
        output, "libs-held\nlibs/foo-held\ngits-held\nextra-held\n.local-held\n",
        "a parent of a protected path was moved"
    );
    for planted in [
        "libs/foo/.git/hooks/planted",
        "gits/main/hooks/planted",
        "extra/keep/planted",
        ".local/state/planted",
    ] {
        assert!(!ws.join(planted).exists(), "{planted}");
    }
    // The rest of the workspace stays writable, renames included.
    let output = attack(
        &fixture,
        "mkdir -p free/deep && mv free free2 && echo ok > free2/deep/file && cat free2/deep/file",
        host_isolation(),
    );
    assert_eq!(output, "ok\n");
}

#[test]
fn protected_names_that_do_not_exist_yet_cannot_be_created() {
    if !namespaces_here(
        "P13 is not enforced and not tested",
        "protected_names_that_do_not_exist_yet_cannot_be_created",
    ) {
        return;
    }
    let fixture = fixture();
    let output = attack(
        &fixture,
        "mkdir -p .git/hooks 2>/dev/null; echo '[core] fsmonitor = evil' > .git/config 2>/dev/null || echo git-refused; \
         rmdir .git 2>/dev/null || echo rmdir-refused; \
         mkdir -p .pi/plans 2>/dev/null || echo pi-refused; \
         echo fine > ordinary && cat ordinary",
        host_isolation(),
    );
    assert_eq!(output, "git-refused\nrmdir-refused\npi-refused\nfine\n");
    assert!(!fixture.ws.join(".git/config").exists());
    assert!(!fixture.ws.join(".pi/plans").exists());
}

#[test]
fn nested_repositories_are_protected_at_any_depth_behind_any_number_of_directories() {
    if !namespaces_here(
        "P13 is not enforced and not tested",
        "nested_repositories_are_protected_at_any_depth_behind_any_number_of_directories",
    ) {
        return;
    }
    let fixture = fixture();
    let ws = &fixture.ws;
    // An earlier command fills any budget a walk could have, then a
    // repository sits deeper than any fixed depth.
    sh(
        ws,
        "set -e
         mkdir filler && cd filler && seq 1 20001 | xargs mkdir && cd ..
         mkdir -p a/b/c/d/e/f/g/h/i/j && git -C a/b/c/d/e/f/g/h/i/j init -q",
    );
    let output = attack(
        &fixture,
        "echo evil > a/b/c/d/e/f/g/h/i/j/.git/hooks/pre-commit 2>/dev/null || echo deep-refused",
        host_isolation(),
    );
    assert_eq!(output, "deep-refused\n");
    assert!(!ws.join("a/b/c/d/e/f/g/h/i/j/.git/hooks/pre-commit").exists());
}

#[test]
fn repository_metadata_linked_elsewhere_in_the_workspace_is_protected_there() {
    if !namespaces_here(
        "P13 is not enforced and not tested",
        "repository_metadata_linked_elsewhere_in_the_workspace_is_protected_there",
    ) {
        return;
    }
    let fixture = fixture();
    let ws = &fixture.ws;
    // `repo`'s layout: a project's git directory whose parts are links
    // into a shared directory of the workspace.
    sh(
        ws,
        "set -e
         git init -q .
         mkdir -p shared/hooks && mv .git/config shared/config
         ln -s ../shared/config .git/config
         rm -rf .git/hooks && ln -s ../shared/hooks .git/hooks",
    );
    let output = attack(
        &fixture,
        "echo evil > shared/hooks/pre-commit 2>/dev/null || echo hooks-refused; \
         echo '[core] fsmonitor = evil' >> shared/config 2>/dev/null || echo config-refused",
        host_isolation(),
    );
    assert_eq!(output, "hooks-refused\nconfig-refused\n");
    assert!(!ws.join("shared/hooks/pre-commit").exists());
    // A `.git` that is itself a link cannot be kept: the command is refused.
    let linked = fixture.dirs.root.path().join("linked");
    std::fs::create_dir(&linked).unwrap();
    sh(
        &linked,
        "git init -q --separate-git-dir real.git . && rm .git && ln -s real.git .git",
    );
    let mut spec = in_workspace("touch ran", &fixture, &linked, auto(&linked), true);
    spec.isolation.namespaces = true;
    let (outcome, _) = run(spec);
    assert_eq!(outcome.state, CommandState::FailedToStart, "{outcome:?}");
    assert!(
        matches!(&outcome.error, Some(ExecError::SandboxUnavailable { reason }) if reason.contains("symbolic link")),
        "{:?}",
        outcome.error
    );
    assert!(!linked.join("ran").exists());
}
