//! What an approved command writes must not decide what runs later, outside
//! any sandbox (`sandbox.md` P15), attacked through the host with canaries
//! each test made: agents' configuration (Claude Code's `.claude/` and
//! `.mcp.json`, Codex's `.codex/`, Gemini's `.gemini/`), what a
//! repository's configuration names (a husky or lefthook hooks directory,
//! included files, the programs git runs), repositories in every shape (a
//! bare one found by its content, a `gitdir:` pointer that is not UTF-8, a
//! hook that is a hard link to a workspace file), nested projects' `.pi`
//! (their databases and plans, with their host running or not, registered
//! or not) and paths the person protects that do not exist yet. Every
//! attack is shown to work outside the sandbox (the test made the file or
//! could make it), so each check can fail.

use std::os::unix::ffi::OsStrExt;

use super::*;
use plan_core::{CommandRun, CommandState, Sandbox};
use plan_host::{SessionId, TurnId};

use crate::sandbox::{auto_stdout, bash, namespaced, plan_stdout, start_session};

/// Runs `script` outside any sandbox in `dir`, as the person (git with no
/// system or global configuration of the machine's).
fn person(dir: &Path, script: &str) {
    let status = std::process::Command::new("/bin/bash")
        .args(["-c", script])
        .current_dir(dir)
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .status()
        .unwrap();
    assert!(status.success(), "fixture script failed: {script}");
}

/// The database outside the workspace, in a directory of its own.
fn fixture() -> Fixture {
    fixture_with(
        |workspace| workspace.parent().unwrap().join("state/plan.db"),
        |options, _| options,
    )
}

/// Every attempt of `attempts` (a name and a shell command) as one script
/// that prints `name-wrote` or `name-refused` per line.
fn attempts(attempts: &[(&str, &str)]) -> String {
    attempts
        .iter()
        .map(|(name, command)| {
            format!("if ( {command} ) 2>/dev/null; then echo {name}-wrote; else echo {name}-refused; fi\n")
        })
        .collect()
}

fn all_refused(attempts: &[(&str, &str)]) -> String {
    attempts
        .iter()
        .map(|(name, _)| format!("{name}-refused\n"))
        .collect()
}

/// Starts `command` as an `auto` command and waits for its end.
fn auto_run(fixture: &Fixture, session: &str, turn: &TurnId, call_id: &str, command: &str) -> CommandRun {
    fixture
        .host
        .tool_calls(&SessionId::from(session), turn, vec![bash(call_id, command)])
        .unwrap();
    let run = fixture
        .host
        .start_agent_command(
            &SessionId::from(session),
            turn,
            &call_id.into(),
            command,
            None,
            None,
        )
        .unwrap();
    assert_eq!(run.sandbox, Sandbox::WorkspaceWrite);
    if run.state != CommandState::Running {
        return run;
    }
    wait_for(
        &fixture.host,
        &fixture.seen,
        &format!("the end of {call_id}"),
        |seen| {
            seen.iter().find_map(|event| match event {
                HostEvent::CommandExited(run) if run.call_id == call_id => Some(run.clone()),
                _ => None,
            })
        },
    )
}

/// What every entry below `dir` is (a directory as `dir/`, a file as its
/// SHA-256, a link as its target), by path.
fn tree(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        let metadata = std::fs::symlink_metadata(&path).unwrap();
        let key = path.strip_prefix(dir).unwrap().to_path_buf();
        if metadata.is_dir() {
            out.insert(key.join(""), "directory".to_owned());
            pending.extend(
                std::fs::read_dir(&path)
                    .unwrap()
                    .map(|entry| entry.unwrap().path()),
            );
        } else if metadata.is_symlink() {
            out.insert(key, format!("-> {:?}", std::fs::read_link(&path).unwrap()));
        } else {
            out.insert(key, sha256(&std::fs::read(&path).unwrap_or_default()));
        }
    }
    out
}

/// The names the host reserves at a workspace's root (plan-core's).
const RESERVED_AT_ROOT: [&str; 6] = [".git", ".pi", ".claude", ".mcp.json", ".codex", ".gemini"];

/// Asserts that `after` is `before` but for the empty directories that
/// reserve the root's names (made where they were missing) and `added`.
fn assert_unchanged_but_reserved(
    before: &BTreeMap<PathBuf, String>,
    mut after: BTreeMap<PathBuf, String>,
    added: &[&str],
) {
    for name in RESERVED_AT_ROOT {
        let key = Path::new(name).join("");
        if !before.contains_key(&key) && after.get(&key).map(String::as_str) == Some("directory") {
            let inside = after.keys().any(|path| path != &key && path.starts_with(name));
            assert!(!inside, "the placeholder {name} holds something: {after:#?}");
            after.remove(&key);
        }
    }
    for name in added {
        assert!(after.remove(Path::new(name)).is_some(), "{name} was not written");
    }
    let changed: Vec<_> = after
        .iter()
        .filter(|(path, what)| before.get(*path) != Some(*what))
        .map(|(path, _)| path.clone())
        .chain(before.keys().filter(|path| !after.contains_key(*path)).cloned())
        .collect();
    assert!(changed.is_empty(), "changed: {changed:?}");
}

#[test]
fn agents_configuration_is_never_written_created_or_removed_by_an_approved_command() {
    let fixture = fixture();
    if !namespaced(
        &fixture,
        "agents_configuration_is_never_written_created_or_removed_by_an_approved_command",
    ) {
        return;
    }
    let ws = &fixture.workspace;
    // Claude Code set up with the checkpoint's hooks, a hook script, a
    // skill, an agent and a command of its own; a package of the project
    // with settings and servers of its own. Codex's and Gemini's
    // directories and the root's `.mcp.json` do not exist yet.
    person(
        ws,
        "set -e
         mkdir -p .claude/hooks .claude/skills/review .claude/agents .claude/commands pkg/.claude
         echo '{\"hooks\":{\"PreToolUse\":[\"plan-checkpoint claude-code hook\"]}}' > .claude/settings.local.json
         echo 'exit 0' > .claude/hooks/guard.sh
         echo 'review' > .claude/skills/review/SKILL.md
         echo 'agent' > .claude/agents/helper.md
         echo 'command' > .claude/commands/ship.md
         echo '{\"env\":{}}' > pkg/.claude/settings.json
         echo '{\"mcpServers\":{}}' > pkg/.mcp.json",
    );
    let claude = tree(&ws.join(".claude"));
    let package = tree(&ws.join("pkg"));
    let attacks: [(&str, &str); 15] = [
        ("local-settings", "echo '{}' > .claude/settings.local.json"),
        (
            "settings",
            "echo '{\"hooks\":{\"SessionStart\":[\"./evil\"]}}' > .claude/settings.json",
        ),
        ("hook", "echo evil >> .claude/hooks/guard.sh"),
        ("skill", "echo '!evil' > .claude/skills/review/SKILL.md"),
        ("agent", "mkdir .claude/agents/new"),
        ("command", "rm .claude/commands/ship.md"),
        ("removal", "rm -rf .claude/hooks"),
        ("rename", "mv .claude .claude.away"),
        (
            "replace",
            "mv .claude.away .claude.old; rm -rf .claude && mkdir .claude",
        ),
        (
            "mcp",
            "echo '{\"mcpServers\":{\"evil\":{\"command\":\"./evil\"}}}' > .mcp.json",
        ),
        (
            "codex",
            "mkdir -p .codex && echo 'notify = [\"./evil\"]' > .codex/config.toml",
        ),
        ("gemini", "mkdir -p .gemini && echo '{}' > .gemini/settings.json"),
        (
            "package-settings",
            "echo '{\"hooks\":{}}' > pkg/.claude/settings.json",
        ),
        ("package-mcp", "echo '{}' > pkg/.mcp.json"),
        ("package-move", "mv pkg pkg.away"),
    ];
    let auto = start_session(&fixture, "auto", Mode::Agent, PermissionMode::Auto);
    let script = format!("{}echo code > main.rs && cat main.rs", self::attempts(&attacks));
    assert_eq!(
        auto_stdout(&fixture, "auto", &auto, "a1", &script),
        format!("{}code\n", all_refused(&attacks))
    );
    assert_eq!(tree(&ws.join(".claude")), claude);
    assert_eq!(tree(&ws.join("pkg")), package);
    for planted in [".mcp.json", ".codex/config.toml", ".gemini/settings.json"] {
        assert!(!ws.join(planted).is_file(), "{planted} was created");
    }
    // Outside the sandbox the same writes work: the probes can fail.
    person(ws, "echo '{}' > .mcp.json.probe && rm .mcp.json.probe");
}

/// A repository as husky or lefthook leave it (`core.hooksPath` naming a
/// workspace directory), with a shared configuration included from the
/// workspace and every kind of program git runs named by a workspace path.
const CONFIGURED_REPOSITORY: &str = "set -e
     git init -q .
     mkdir -p .githooks tools scripts
     printf '#!/bin/sh\\necho person\\n' > .githooks/pre-commit
     chmod +x .githooks/pre-commit
     git config core.hooksPath .githooks
     printf '[core]\\n\\tfsmonitor = tools/fsmonitor\\n' > shared.gitconfig
     printf '[diff \"lock\"]\\n\\ttextconv = scripts/textconv\\n' > conditional.gitconfig
     git config include.path ../shared.gitconfig
     git config 'includeIf.gitdir:/.path' ../conditional.gitconfig
     for program in fsmonitor; do printf '#!/bin/sh\\n' > tools/$program; done
     for program in clean smudge merge ssh editor sequence alias pager credential textconv askpass; do
       printf '#!/bin/sh\\n' > scripts/$program
     done
     git config filter.lfs.clean 'scripts/clean %f'
     git config filter.lfs.smudge './scripts/smudge %f'
     git config merge.ours.driver './scripts/merge %O %A %B'
     git config core.sshCommand 'scripts/ssh -o BatchMode=yes'
     git config core.editor \"$PWD/scripts/editor\"
     git config sequence.editor ./scripts/sequence
     git config alias.ship '!./scripts/alias'
     git config core.pager './scripts/pager -R'
     git config credential.helper ./scripts/credential
     git config core.askPass scripts/askpass";

#[test]
fn what_a_repositorys_configuration_names_stays_as_the_person_left_it() {
    let fixture = fixture();
    if !namespaced(
        &fixture,
        "what_a_repositorys_configuration_names_stays_as_the_person_left_it",
    ) {
        return;
    }
    let ws = &fixture.workspace;
    person(ws, CONFIGURED_REPOSITORY);
    // husky 9: `core.hooksPath = .husky/_`, whose hooks run `.husky/<hook>`;
    // lefthook: hooks in `.git/hooks` that run what `lefthook.yml` says.
    person(
        ws,
        "set -e
         git init -q husky && cd husky
         mkdir -p .husky/_
         printf '#!/bin/sh\\n. \"$(dirname \"$0\")/h\"\\n' > .husky/_/pre-commit
         printf 'sh -e \"$(dirname \"$(dirname \"$0\")\")/$(basename \"$0\")\"\\n' > .husky/_/h
         printf 'npm test\\n' > .husky/pre-commit
         git config core.hooksPath .husky/_
         cd .. && git init -q lefty && cd lefty
         printf '#!/bin/sh\\ncall_lefthook()\\n{\\n  lefthook \"$@\"\\n}\\ncall_lefthook run pre-commit\\n' > .git/hooks/pre-commit
         chmod +x .git/hooks/pre-commit
         printf 'pre-commit:\\n  commands:\\n    lint:\\n      run: npm run lint\\n' > lefthook.yml",
    );
    let before = tree(ws);
    let attacks: [(&str, &str); 22] = [
        ("hook", "echo evil >> .githooks/pre-commit"),
        ("new-hook", "echo evil > .githooks/post-checkout"),
        ("hooks-moved", "mv .githooks .githooks.away"),
        ("include", "echo '[core] fsmonitor = ./evil' >> shared.gitconfig"),
        (
            "include-if",
            "echo '[core] pager = ./evil' >> conditional.gitconfig",
        ),
        ("fsmonitor", "echo evil >> tools/fsmonitor"),
        ("textconv", "echo evil >> scripts/textconv"),
        ("clean", "echo evil >> scripts/clean"),
        ("smudge", "rm scripts/smudge"),
        ("merge", "echo evil >> scripts/merge"),
        ("ssh", "echo evil >> scripts/ssh"),
        ("editor", "echo evil >> scripts/editor"),
        ("sequence", "echo evil >> scripts/sequence"),
        ("alias", "echo evil >> scripts/alias"),
        ("pager", "echo evil >> scripts/pager"),
        ("credential", "echo evil >> scripts/credential"),
        ("askpass", "echo evil >> scripts/askpass"),
        ("scripts-moved", "mv scripts scripts.away"),
        ("husky-hook", "echo evil >> husky/.husky/pre-commit"),
        ("husky-new-hook", "echo evil > husky/.husky/pre-push"),
        ("husky-wrapper", "echo evil >> husky/.husky/_/h"),
        ("lefthook", "echo '  evil: {run: ./evil}' >> lefty/lefthook.yml"),
    ];
    let auto = start_session(&fixture, "auto", Mode::Agent, PermissionMode::Auto);
    let script = format!("{}echo code > main.rs && cat main.rs", self::attempts(&attacks));
    assert_eq!(
        auto_stdout(&fixture, "auto", &auto, "a1", &script),
        format!("{}code\n", all_refused(&attacks))
    );
    assert_unchanged_but_reserved(&before, tree(ws), &["main.rs"]);
}

#[test]
fn repositories_found_by_content_by_byte_pointers_and_their_hard_links_are_protected_or_refused() {
    let fixture = fixture();
    if !namespaced(
        &fixture,
        "repositories_found_by_content_by_byte_pointers_and_their_hard_links_are_protected_or_refused",
    ) {
        return;
    }
    let ws = &fixture.workspace;
    // A bare repository with no `.git` entry anywhere near it, and a
    // worktree whose `gitdir:` pointer names a directory that is not UTF-8.
    person(
        ws,
        "set -e
         git init -q --bare vendor/lib.git
         printf '#!/bin/sh\\necho person\\n' > vendor/lib.git/hooks/post-receive
         mkdir sub && git init -q --separate-git-dir \"$PWD/$(printf 'meta\\377')\" sub
         printf 'gitdir: ../%s\\n' \"$(printf 'meta\\377')\" > sub/.git",
    );
    assert!(
        ws.join(std::ffi::OsStr::from_bytes(b"meta\xff"))
            .join("HEAD")
            .is_file()
    );
    let before = tree(ws);
    let attacks: [(&str, &str); 5] = [
        ("bare-hook", "echo evil >> vendor/lib.git/hooks/post-receive"),
        (
            "bare-config",
            "echo '[core] fsmonitor = ./evil' >> vendor/lib.git/config",
        ),
        ("bare-moved", "mv vendor/lib.git vendor/lib.away"),
        (
            "byte-pointer-hook",
            "echo evil > \"$(printf 'meta\\377')/hooks/pre-commit\"",
        ),
        (
            "byte-pointer-config",
            "echo evil >> \"$(printf 'meta\\377')/config\"",
        ),
    ];
    let auto = start_session(&fixture, "auto", Mode::Agent, PermissionMode::Auto);
    let script = format!("{}echo code > main.rs && cat main.rs", self::attempts(&attacks));
    assert_eq!(
        auto_stdout(&fixture, "auto", &auto, "a1", &script),
        format!("{}code\n", all_refused(&attacks))
    );
    assert_unchanged_but_reserved(&before, tree(ws), &["main.rs"]);

    // A hook installed as a hard link to a workspace file: writing the
    // file would rewrite the hook, so the command does not run at all.
    person(
        ws,
        "set -e
         mkdir linked && cd linked && git init -q .
         printf '#!/bin/sh\\necho person\\n' > hook.sh
         ln hook.sh .git/hooks/pre-commit",
    );
    let hook = std::fs::read(ws.join("linked/hook.sh")).unwrap();
    let run = auto_run(
        &fixture,
        "auto",
        &auto,
        "a2",
        "echo evil >> linked/hook.sh; touch ran",
    );
    assert_eq!(
        (run.state, run.error_code),
        (CommandState::FailedToStart, Some(ErrorCode::SandboxUnavailable)),
        "{run:?}"
    );
    assert_eq!(std::fs::read(ws.join("linked/hook.sh")).unwrap(), hook);
    assert!(!ws.join("ran").exists());
}

#[test]
fn nested_projects_databases_and_plans_are_unreadable_and_unwritable_whether_or_not_their_host_runs() {
    let fixture = fixture();
    if !namespaced(
        &fixture,
        "nested_projects_databases_and_plans_are_unreadable_and_unwritable_whether_or_not_their_host_runs",
    ) {
        return;
    }
    let ws = &fixture.workspace;
    // A nested project whose host ran elsewhere and is neither running nor
    // registered here (its files copied in, as after a reboot with another
    // runtime directory), and one whose host is running now.
    let elsewhere = tempfile::tempdir().unwrap();
    let origin = elsewhere.path().join("project");
    std::fs::create_dir_all(origin.join(".pi/plan")).unwrap();
    {
        let other = Host::open(origin.join(".pi/plan/plan.db"), options(&fixture.clock)).unwrap();
        other
            .create_session(NewSession {
                session_id: Some("nested".into()),
                workspace_root: Some(origin.display().to_string()),
                mode: Some(Mode::Plan),
                permission_mode: None,
            })
            .unwrap();
        let turn = other
            .start_turn(&SessionId::from("nested"), Origin::Interactive)
            .unwrap();
        other
            .tool_calls(
                &SessionId::from("nested"),
                &turn.turn_id,
                vec![submit("c1", "# A secret plan\n")],
            )
            .unwrap();
        other.close();
    }
    std::fs::create_dir_all(ws.join("old")).unwrap();
    person(ws, &format!("cp -a {}/.pi old/.pi", origin.display()));
    std::fs::create_dir_all(ws.join("live/.pi/plan")).unwrap();
    let live = Host::open(ws.join("live/.pi/plan/plan.db"), options(&fixture.clock)).unwrap();
    let before = tree(&ws.join("old/.pi"));
    assert!(
        std::fs::read(ws.join("old/.pi/plan/plan.db"))
            .unwrap()
            .starts_with(b"SQLite format 3")
    );

    let plan = start_session(&fixture, "plan", Mode::Plan, PermissionMode::Ask);
    let read = "for project in old live; do \
                  grep -q 'SQLite format' $project/.pi/plan/plan.db 2>/dev/null && echo $project-database-read || echo $project-database-hidden; \
                  cat $project/.pi/plan/*.md 2>/dev/null | grep -q secret && echo $project-plan-read || echo $project-plan-hidden; \
                done";
    assert_eq!(
        plan_stdout(&fixture, "plan", &plan, "p1", read),
        "old-database-hidden\nold-plan-hidden\nlive-database-hidden\nlive-plan-hidden\n"
    );
    let attacks: [(&str, &str); 7] = [
        ("forge", "printf forged >> old/.pi/plan/plan.db"),
        ("journal", "echo hot > old/.pi/plan/plan.db-journal"),
        ("plan", "echo '# forged' > old/.pi/plan/forged.md"),
        ("remove", "rm -rf old/.pi"),
        ("move", "mv old old.away"),
        ("live-forge", "printf forged >> live/.pi/plan/plan.db"),
        ("live-journal", "echo hot > live/.pi/plan/plan.db-journal"),
    ];
    let auto = start_session(&fixture, "auto", Mode::Agent, PermissionMode::Auto);
    assert_eq!(
        auto_stdout(&fixture, "auto", &auto, "a1", &self::attempts(&attacks)),
        all_refused(&attacks)
    );
    assert_eq!(tree(&ws.join("old/.pi")), before);
    assert!(!ws.join("live/.pi/plan/plan.db-journal").exists());
    live.close();
}

#[test]
fn a_nested_sessions_plan_cannot_be_rewritten_by_an_enclosing_sessions_command() {
    let fixture = fixture();
    if !namespaced(
        &fixture,
        "a_nested_sessions_plan_cannot_be_rewritten_by_an_enclosing_sessions_command",
    ) {
        return;
    }
    let inner = fixture.workspace.join("inner");
    std::fs::create_dir(&inner).unwrap();
    fixture
        .host
        .create_session(NewSession {
            session_id: Some("inner".into()),
            workspace_root: Some(inner.display().to_string()),
            mode: Some(Mode::Plan),
            permission_mode: None,
        })
        .unwrap();
    let turn = fixture
        .host
        .start_turn(&SessionId::from("inner"), Origin::Interactive)
        .unwrap();
    let outcomes = fixture
        .host
        .tool_calls(
            &SessionId::from("inner"),
            &turn.turn_id,
            vec![submit("c1", MARKDOWN)],
        )
        .unwrap();
    let approval = approval_of(&outcomes);
    let artifact = inner.join(&approval.artifact.as_ref().unwrap().path);
    assert_eq!(std::fs::read(&artifact).unwrap(), MARKDOWN.as_bytes());
    let outer = start_session(&fixture, "outer", Mode::Agent, PermissionMode::Auto);
    let relative = artifact
        .strip_prefix(&fixture.workspace)
        .unwrap()
        .display()
        .to_string();
    let attacks = [
        ("rewrite", format!("echo '# another plan' > {relative}")),
        (
            "replace",
            format!("rm -f {relative} && echo '# another plan' > {relative}"),
        ),
    ];
    let attacks: Vec<(&str, &str)> = attacks
        .iter()
        .map(|(name, command)| (*name, command.as_str()))
        .collect();
    assert_eq!(
        auto_stdout(&fixture, "outer", &outer, "o1", &self::attempts(&attacks)),
        all_refused(&attacks)
    );
    // The plan is still the one submitted, so the person can approve it.
    let (approved, _) = fixture.host.approve(&approval.id, PermissionMode::Ask).unwrap();
    assert_eq!(approved.status, ApprovalStatus::Approved);
}

#[test]
fn protected_paths_that_do_not_exist_yet_cannot_be_created() {
    let fixture = fixture_with(
        |workspace| workspace.parent().unwrap().join("state/plan.db"),
        |options, workspace| HostOptions {
            protected_paths: vec![
                workspace.join("deploy/prod.env"),
                workspace.join("release-keys"),
                workspace.join("existing/kept.txt"),
            ],
            ..options
        },
    );
    if !namespaced(
        &fixture,
        "protected_paths_that_do_not_exist_yet_cannot_be_created",
    ) {
        return;
    }
    let ws = &fixture.workspace;
    std::fs::create_dir(ws.join("existing")).unwrap();
    std::fs::write(ws.join("existing/kept.txt"), "kept\n").unwrap();
    let attacks: [(&str, &str); 5] = [
        ("file", "mkdir -p deploy && echo SECRET=x > deploy/prod.env"),
        (
            "file-as-link",
            "mkdir -p deploy && ln -s ../main.rs deploy/prod.env",
        ),
        ("directory", "mkdir -p release-keys/more"),
        ("existing", "echo changed > existing/kept.txt"),
        ("existing-moved", "mv existing existing.away"),
    ];
    let auto = start_session(&fixture, "auto", Mode::Agent, PermissionMode::Auto);
    let script = format!("{}echo code > main.rs && cat main.rs", self::attempts(&attacks));
    assert_eq!(
        auto_stdout(&fixture, "auto", &auto, "a1", &script),
        format!("{}code\n", all_refused(&attacks))
    );
    assert!(!ws.join("deploy/prod.env").is_file());
    assert!(!ws.join("deploy/prod.env").is_symlink());
    assert!(!ws.join("release-keys/more").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("existing/kept.txt")).unwrap(),
        "kept\n"
    );
}
