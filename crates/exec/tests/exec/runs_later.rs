//! P15 (`sandbox.md`): nothing an `auto` command writes decides what runs
//! later outside the sandbox. The property end to end (approved commands,
//! one after another and at the same time, try every place git, a hook
//! manager or an agent reads what it runs from; then the person uses git
//! as usual, outside any sandbox, and only the person's own hooks and
//! programs run), and the shapes the helper refuses rather than protect
//! less: links and hard links where a mount cannot hold, a missing path
//! git's configuration names, a configuration too large to check,
//! includes that loop, a linked work tree whose hooks directory is its
//! own. Canaries are files of the test's own directories; every planted
//! program only creates one.

use std::path::{Path, PathBuf};
use std::process::Command;

use plan_exec::{CommandState, Confinement, ExecError, Isolation, Stream, WorkspaceDir};

use crate::support::*;

struct Fixture {
    dirs: Dirs,
    ws: PathBuf,
    /// Where the person's programs and planted ones leave their canaries.
    canaries: PathBuf,
}

fn fixture() -> Fixture {
    let dirs = dirs();
    let ws = dirs.root.path().join("ws");
    let canaries = dirs.root.path().join("canaries");
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&canaries).unwrap();
    Fixture { dirs, ws, canaries }
}

fn auto(fixture: &Fixture) -> plan_exec::CommandSpec {
    let mut spec = spec(
        "true",
        &fixture.ws,
        &fixture.dirs.scratch,
        Confinement::WorkspaceWrite {
            workspace_root: fixture.ws.clone(),
            network: false,
        },
    );
    spec.env = git_env(&fixture.dirs.scratch);
    spec.workspace = Some(WorkspaceDir::open(&fixture.ws).unwrap());
    spec.isolation = Isolation {
        namespaces: true,
        ..host_isolation()
    };
    spec
}

/// Runs `script` as an `auto` command and returns its stdout.
fn attack(fixture: &Fixture, script: &str) -> String {
    let mut spec = auto(fixture);
    spec.command = script.to_owned();
    let (outcome, events) = run(spec);
    assert_eq!(
        outcome.state,
        CommandState::Exited,
        "{outcome:?}: {}",
        events.text(Stream::Stderr)
    );
    events.text(Stream::Stdout)
}

/// Runs `script` as an `auto` command that must not start, and returns why.
fn refused(fixture: &Fixture, script: &str) -> String {
    let mut spec = auto(fixture);
    spec.command = format!("{script}; touch ran");
    let (outcome, _) = run(spec);
    assert_eq!(outcome.state, CommandState::FailedToStart, "{outcome:?}");
    assert!(!fixture.ws.join("ran").exists());
    match outcome.error {
        Some(ExecError::SandboxUnavailable { reason }) => reason,
        other => panic!("{other:?}"),
    }
}

/// A program that leaves the canary `name` when it runs.
fn program(fixture: &Fixture, name: &str) -> String {
    format!("#!/bin/sh\ntouch {}/{name}\nexit 0\n", fixture.canaries.display())
}

fn canaries(fixture: &Fixture) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(&fixture.canaries)
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The person, outside any sandbox, using git in the workspace: a commit
/// (hooks), a status (the file system monitor), a diff (a text
/// conversion), a push to a bare repository of the workspace (its hooks).
fn person_uses_git(fixture: &Fixture) {
    // The programs print nothing git expects (a monitor's token, say):
    // git's complaints about that are not what the test looks at.
    let script = "set -e
         git status --short >/dev/null 2>&1
         echo change >> notes.lock
         git diff >/dev/null 2>&1
         git add notes.lock
         git commit -qm change 2>/dev/null
         git push -q vendor/lib.git HEAD:refs/heads/main 2>/dev/null";
    let status = Command::new("/bin/bash")
        .args(["-c", script])
        .current_dir(&fixture.ws)
        .envs(git_env(&fixture.dirs.scratch))
        .status()
        .unwrap();
    assert!(status.success(), "git failed for the person");
}

#[test]
fn p15_what_approved_commands_write_never_runs_when_the_person_uses_git() {
    if !namespaces_here(
        "P15 is not enforced and not tested",
        "p15_what_approved_commands_write_never_runs_when_the_person_uses_git",
    ) {
        return;
    }
    let fixture = fixture();
    let ws = &fixture.ws;
    // The person's repository: hooks in `.githooks` (husky's and
    // lefthook's way), a file system monitor and a text conversion named
    // by an included configuration, a bare repository they push to.
    std::fs::create_dir_all(ws.join(".githooks")).unwrap();
    std::fs::create_dir_all(ws.join("tools")).unwrap();
    for (path, canary) in [
        (".githooks/pre-commit", "person-pre-commit"),
        ("tools/fsmonitor", "person-fsmonitor"),
        ("tools/textconv", "person-textconv"),
    ] {
        std::fs::write(ws.join(path), program(&fixture, canary)).unwrap();
    }
    sh(
        ws,
        "set -e
         chmod +x .githooks/pre-commit tools/fsmonitor tools/textconv
         git init -q .
         git config user.name t; git config user.email t@example.invalid
         git config core.hooksPath .githooks
         printf '[core]\\n\\tfsmonitor = tools/fsmonitor\\n[diff \"lock\"]\\n\\ttextconv = tools/textconv\\n' > shared.gitconfig
         git config include.path ../shared.gitconfig
         echo '*.lock diff=lock' > .gitattributes
         echo one > notes.lock
         { git add -A && git -c core.hooksPath=/dev/null commit -qm one; } 2>/dev/null
         git init -q --bare vendor/lib.git",
    );
    std::fs::write(
        ws.join("vendor/lib.git/hooks/post-receive"),
        program(&fixture, "person-post-receive"),
    )
    .unwrap();
    sh(ws, "chmod +x vendor/lib.git/hooks/post-receive");
    let planted = |name: &str| program(&fixture, &format!("planted-{name}"));
    let plant = |path: &str, name: &str| {
        format!(
            "printf '{}' > {path} 2>/dev/null && chmod +x {path} 2>/dev/null; ",
            planted(name).replace('\n', "\\n")
        )
    };
    // One command prepares, another runs at the same time, a third comes
    // after both: each tries every place.
    let every_place: String = [
        plant(".githooks/pre-commit", "pre-commit"),
        plant(".githooks/pre-push", "pre-push"),
        plant("tools/fsmonitor", "fsmonitor"),
        plant("tools/textconv", "textconv"),
        plant("vendor/lib.git/hooks/post-receive", "post-receive"),
        plant(".git/hooks/post-commit", "post-commit"),
        "printf '[core]\\n\\tpager = ./pager\\n' >> shared.gitconfig 2>/dev/null; ".to_owned(),
        "mv .githooks .githooks.old 2>/dev/null && mkdir .githooks; ".to_owned(),
        plant(".githooks/pre-commit", "pre-commit-moved"),
        "mv tools tools.old 2>/dev/null && mkdir tools; ".to_owned(),
        plant("tools/fsmonitor", "fsmonitor-moved"),
        "ln tools/fsmonitor fsmonitor-link 2>/dev/null; ".to_owned(),
        plant("fsmonitor-link", "hard-link"),
        "echo done".to_owned(),
    ]
    .concat();
    let first = {
        let mut spec = auto(&fixture);
        spec.command = every_place.clone();
        start(spec)
    };
    let second = {
        let mut spec = auto(&fixture);
        spec.command = every_place.clone();
        start(spec)
    };
    for (running, events) in [first, second] {
        let outcome = running.wait();
        assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
        assert_eq!(events.text(Stream::Stdout), "done\n");
    }
    assert_eq!(attack(&fixture, &every_place), "done\n");
    // Unconfined, the same script would have planted everything: the
    // probes can fail. (Shown on a copy, so the workspace stays the
    // person's.)
    let copy = fixture.dirs.root.path().join("copy");
    sh(
        fixture.dirs.root.path(),
        &format!("cp -a {} {}", ws.display(), copy.display()),
    );
    let status = Command::new("/bin/bash")
        .args(["-c", &every_place])
        .current_dir(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        std::fs::read_to_string(copy.join(".githooks/pre-commit"))
            .unwrap()
            .contains("planted-")
    );
    std::fs::remove_dir_all(&copy).unwrap();

    person_uses_git(&fixture);
    let ran = canaries(&fixture);
    assert!(
        ran.iter().all(|name| name.starts_with("person-")),
        "planted programs ran outside the sandbox: {ran:?}"
    );
    for person in ["person-pre-commit", "person-textconv", "person-post-receive"] {
        assert!(ran.contains(&person.to_owned()), "{person} did not run: {ran:?}");
    }
}

#[test]
fn what_a_mount_cannot_hold_refuses_the_command() {
    if !namespaces_here(
        "P15 is not enforced and not tested",
        "what_a_mount_cannot_hold_refuses_the_command",
    ) {
        return;
    }
    // Each shape in a workspace of its own: the reason names it.
    let cases: [(&str, &str); 10] = [
        (
            "mkdir real && ln -s real .claude",
            ".claude in the workspace is a symbolic link",
        ),
        (
            "mkdir -p pkg/real && ln -s real pkg/.mcp.json",
            "pkg/.mcp.json in the workspace is a symbolic link",
        ),
        (
            "mkdir -p sub/elsewhere && ln -s elsewhere sub/.pi",
            "sub/.pi in the workspace is a symbolic link",
        ),
        (
            "mkdir .claude && echo '{}' > settings.json && ln settings.json .claude/settings.json",
            ".claude/settings.json has 2 names",
        ),
        (
            "git init -q . && git config core.hooksPath .missing-hooks",
            "git's `core.hookspath` names .missing-hooks, which does not exist",
        ),
        (
            "git init -q . && mkdir real-hooks && ln -s real-hooks hooks && git config core.hooksPath hooks",
            "hooks in the workspace is a symbolic link",
        ),
        (
            "git init -q . && git config include.path ../extra.gitconfig",
            "git's `include.path` names extra.gitconfig, which does not exist",
        ),
        (
            "git init -q . && head -c 1100000 /dev/zero | tr '\\0' '#' >> .git/config",
            "more than the 1048576 that can be checked",
        ),
        // A hook that links to a file through another link of the
        // workspace (which a command could point elsewhere), and one whose
        // file is not there yet.
        (
            "git init -q . && mkdir -p real/hooks && ln -s real tools \
             && ln -s ../../tools/hooks/pre-commit .git/hooks/pre-commit",
            "the link .git/hooks/pre-commit names tools/hooks/pre-commit, which is reached through a symbolic link",
        ),
        (
            "git init -q . && ln -s ../../hook .git/hooks/pre-commit",
            "the link .git/hooks/pre-commit names hook, which does not exist",
        ),
    ];
    for (setup, reason) in cases {
        let fixture = fixture();
        sh(&fixture.ws, setup);
        let said = refused(&fixture, "true");
        assert!(said.contains(reason), "{setup}: {said}");
    }
    // Plan commands are refused where a hidden name is a link too, and
    // where a hidden file has other names (through them it could be read).
    let fixture = fixture();
    sh(
        &fixture.ws,
        "mkdir -p sub/.pi/plan && echo secret > sub/.pi/plan/plan.db && ln sub/.pi/plan/plan.db copy.db",
    );
    let mut spec = auto(&fixture);
    spec.confinement = Confinement::ReadOnly;
    spec.command = "cat copy.db".into();
    let (outcome, events) = run(spec);
    assert_eq!(outcome.state, CommandState::FailedToStart, "{outcome:?}");
    assert!(
        matches!(&outcome.error, Some(ExecError::SandboxUnavailable { reason }) if reason.contains("has 2 names")),
        "{:?}",
        outcome.error
    );
    assert_eq!(events.text(Stream::Stdout), "");
}

#[test]
fn includes_that_loop_or_run_deep_and_linked_work_trees_are_followed_as_git_follows_them() {
    if !namespaces_here(
        "P15 is not enforced and not tested",
        "includes_that_loop_or_run_deep_and_linked_work_trees_are_followed_as_git_follows_them",
    ) {
        return;
    }
    let fixture = fixture();
    let ws = &fixture.ws;
    // Includes that include each other, a chain of them, and a linked work
    // tree (its `.git` a `gitdir:` file into the main repository's
    // `worktrees/`) whose shared configuration names a hooks directory
    // relative to each work tree.
    sh(
        ws,
        "set -e
         git init -q main && cd main
         git config user.name t; git config user.email t@example.invalid
         git commit -q --allow-empty -m one
         git worktree add -q ../linked
         printf '[include]\\n\\tpath = b.gitconfig\\n[core]\\n\\teditor = ./edit-a\\n' > ../a.gitconfig
         printf '[include]\\n\\tpath = a.gitconfig\\n\\tpath = c.gitconfig\\n' > ../b.gitconfig
         printf '[core]\\n\\tpager = ./page-c\\n' > ../c.gitconfig
         git config core.hooksPath .hooks
         printf '[include]\\n\\tpath = ../../a.gitconfig\\n' >> .git/config
         mkdir .hooks ../linked/.hooks
         touch edit-a page-c ../linked/edit-a ../linked/page-c",
    );
    let output = attack(
        &fixture,
        "for path in a.gitconfig b.gitconfig c.gitconfig main/edit-a main/page-c main/.hooks/pre-commit \
                     linked/.hooks/pre-commit linked/edit-a linked/page-c; do \
           echo evil >> $path 2>/dev/null && echo $path-wrote || echo $path-refused; \
         done; echo free > linked/free && cat linked/free",
    );
    assert_eq!(
        output,
        "a.gitconfig-refused\nb.gitconfig-refused\nc.gitconfig-refused\nmain/edit-a-refused\n\
         main/page-c-refused\nmain/.hooks/pre-commit-refused\nlinked/.hooks/pre-commit-refused\n\
         linked/edit-a-refused\nlinked/page-c-refused\nfree\n"
    );
}

#[test]
fn nested_projects_are_hidden_from_plan_commands_at_any_depth() {
    if !namespaces_here(
        "P8 is not enforced and not tested",
        "nested_projects_are_hidden_from_plan_commands_at_any_depth",
    ) {
        return;
    }
    let fixture = fixture();
    sh(
        &fixture.ws,
        "set -e
         mkdir -p a/b/c/d/.pi/plan .pi/plan
         echo transcript > a/b/c/d/.pi/plan/plan.db
         echo plan > a/b/c/d/.pi/plan/plan-1.md
         echo own > .pi/plan/plan-2.md
         echo code > a/b/c/d/main.rs",
    );
    let mut spec = auto(&fixture);
    spec.confinement = Confinement::ReadOnly;
    spec.command = "cat a/b/c/d/.pi/plan/plan.db a/b/c/d/.pi/plan/plan-1.md .pi/plan/plan-2.md 2>/dev/null; \
                    ls -A a/b/c/d/.pi; cat a/b/c/d/main.rs"
        .into();
    let (outcome, events) = run(spec);
    assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
    assert_eq!(events.text(Stream::Stdout), "code\n");
    // A Plan command creates nothing: no name is reserved for it.
    for name in [".claude", ".mcp.json", ".codex", ".gemini", ".git"] {
        assert!(!fixture.ws.join(name).exists(), "{name}");
    }
    assert!(Path::new(&fixture.ws.join("a/b/c/d/.pi/plan/plan.db")).exists());
}

#[test]
fn ordinary_configuration_neither_refuses_commands_nor_freezes_the_work_tree() {
    if !namespaces_here(
        "P15 is not enforced and not tested",
        "ordinary_configuration_neither_refuses_commands_nor_freezes_the_work_tree",
    ) {
        return;
    }
    let fixture = fixture();
    // What repositories commonly hold: a GPG key id, programs found on
    // `PATH`, a template that is not there, a remote and a submodule's
    // path, the work tree of a submodule's own configuration.
    sh(
        &fixture.ws,
        "set -e
         git init -q .
         mkdir -p lib src
         git config user.signingKey ABCDEF1234567890
         git config commit.template .gitmessage
         git config core.excludesFile '~/.gitignore_global'
         git config credential.helper store
         git config core.editor 'vim -f'
         git config core.pager 'less -R'
         git config diff.tool vimdiff
         git config remote.origin.url ../upstream.git
         git config submodule.lib.path lib
         git config core.worktree ../..
         git config alias.lg 'log --oneline'",
    );
    assert_eq!(
        attack(
            &fixture,
            "echo code > src/main.rs && echo vendored > lib/x && echo template > .gitmessage && cat src/main.rs lib/x .gitmessage"
        ),
        "code\nvendored\ntemplate\n"
    );
}
