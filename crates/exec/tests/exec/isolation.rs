//! What only the namespaces enforce (P7, P8), aimed at canaries the test
//! created: a terminal the test holds open cannot be read; another
//! session's scratch directory and the host's database (in the pi layout,
//! inside the workspace; outside it; at the workspace's root) can be neither
//! read nor written; under `auto` the workspace's `.git` (a directory, a
//! `.git` file's gitdir and its common directory, a nested repository's),
//! `.pi`, the helper and a host-named path stay read-only, also when an
//! earlier command prepared a link or a rename for a later one; no process
//! outside the command is visible in `/proc` (more in `pid`). Every probe
//! is shown to work unconfined, so the checks can fail. Skipped, saying so,
//! where the kernel gives no namespaces.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use plan_exec::{CommandSpec, CommandState, Confinement, Isolation, ScratchCap, Stream};

use crate::support::*;

fn isolated(
    command: &str,
    cwd: &Path,
    scratch: &Path,
    confinement: Confinement,
    isolation: Isolation,
) -> CommandSpec {
    let mut spec = spec(command, cwd, scratch, confinement);
    spec.isolation = Isolation {
        namespaces: true,
        ..isolation
    };
    spec.env = git_env(scratch);
    spec
}

fn auto(workspace: &Path) -> Confinement {
    Confinement::WorkspaceWrite {
        workspace_root: workspace.to_path_buf(),
        network: false,
    }
}

/// A pseudo-terminal the test holds open, with a line typed into it that a
/// reader of its terminal side would consume.
struct Terminal {
    holder: Child,
    path: String,
}

impl Terminal {
    fn open() -> Self {
        let mut holder = Command::new("python3")
            .arg("-c")
            .arg(
                "import os, sys\n\
                 master, slave = os.openpty()\n\
                 os.write(master, b'typed-secret\\n')\n\
                 print(os.ttyname(slave), flush=True)\n\
                 sys.stdin.read()",
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(holder.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Terminal {
            holder,
            path: line.trim().to_owned(),
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

#[test]
fn no_terminal_is_reachable_and_dev_holds_only_the_kept_devices() {
    if !namespaces_here(
        "P7 and P8 are not enforced and not tested",
        "no_terminal_is_reachable_and_dev_holds_only_the_kept_devices",
    ) {
        return;
    }
    let dirs = dirs();
    let workspace = dirs.root.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let terminal = Terminal::open();
    let read = format!(
        "ls -A /dev | tr '\\n' ' '; echo; timeout 5 head -n 1 {0} 2>/dev/null || echo refused; \
         for tty in /dev/tty /dev/console /dev/tty0 /dev/ptmx; do test -e $tty && echo $tty; done; \
         echo quiet > /dev/null && echo null-works",
        terminal.path
    );
    for confinement in [Confinement::ReadOnly, auto(&workspace)] {
        let (outcome, events) = run(isolated(
            &read,
            &dirs.scratch,
            &dirs.scratch,
            confinement.clone(),
            host_isolation(),
        ));
        assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
        assert_eq!(
            events.text(Stream::Stdout),
            ".empty .empty-directory fd full null random shm stderr stdin stdout urandom zero \nrefused\nnull-works\n",
            "{confinement:?}: {}",
            events.text(Stream::Stderr)
        );
    }
    // Unconfined, the same read consumes the typed line.
    let (_, events) = run(spec(
        &format!("timeout 5 head -n 1 {}", terminal.path),
        &dirs.scratch,
        &dirs.scratch,
        Confinement::None,
    ));
    assert_eq!(events.text(Stream::Stdout), "typed-secret\n");
}

/// A scratch root with this session's command directory and another
/// session's, which holds a secret.
struct Sessions {
    _dirs: Dirs,
    root: PathBuf,
    own: PathBuf,
    other: PathBuf,
    workspace: PathBuf,
}

fn sessions() -> Sessions {
    let dirs = dirs();
    let root = dirs.root.path().join("scratch-root");
    let own = root.join("command-1");
    let other = root.join("command-2");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("secret"), "other-session\n").unwrap();
    let workspace = dirs.root.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    Sessions {
        _dirs: dirs,
        root,
        own,
        other,
        workspace,
    }
}

#[test]
fn another_sessions_scratch_is_neither_readable_nor_writable() {
    if !namespaces_here(
        "P7 and P8 are not enforced and not tested",
        "another_sessions_scratch_is_neither_readable_nor_writable",
    ) {
        return;
    }
    let sessions = sessions();
    let command = format!(
        "cat {other}/secret 2>/dev/null || echo unreadable; ls -A {root}; \
         echo mine > \"$TMPDIR/file\" && cat \"$TMPDIR/file\"; \
         echo pwned > {other}/planted 2>/dev/null || echo unwritable",
        other = sessions.other.display(),
        root = sessions.root.display()
    );
    let isolation = Isolation {
        scratch_root: Some(sessions.root.clone()),
        ..host_isolation()
    };
    for confinement in [Confinement::ReadOnly, auto(&sessions.workspace)] {
        let (outcome, events) = run(isolated(
            &command,
            &sessions.workspace,
            &sessions.own,
            confinement.clone(),
            isolation.clone(),
        ));
        assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
        assert_eq!(
            events.text(Stream::Stdout),
            "unreadable\ncommand-1\nmine\nunwritable\n",
            "{confinement:?}: {}",
            events.text(Stream::Stderr)
        );
        assert!(!sessions.other.join("planted").exists());
    }
    // The command's own file was in its private tmpfs, not on disk.
    assert_eq!(std::fs::read_dir(&sessions.own).unwrap().count(), 0);
    let (_, events) = run(spec(
        &format!("cat {}/secret", sessions.other.display()),
        &sessions.workspace,
        &sessions.own,
        Confinement::None,
    ));
    assert_eq!(events.text(Stream::Stdout), "other-session\n");
}

/// A database with its side files in `dir`, as SQLite leaves them.
fn database(dir: &Path) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    ["plan.db", "plan.db-wal", "plan.db-shm"]
        .iter()
        .map(|name| {
            let path = dir.join(name);
            std::fs::write(&path, format!("transcripts of every session in {name}\n")).unwrap();
            path
        })
        .collect()
}

/// Tries to read, rewrite, truncate and lock every file, and to plant a
/// hot journal beside them; prints one word per attempt.
fn database_attacks(files: &[PathBuf]) -> String {
    let mut command = String::new();
    for file in files {
        let file = file.display();
        command.push_str(&format!(
            "grep -q transcripts {file} 2>/dev/null && echo read || echo no-read; \
             echo forged > {file} 2>/dev/null && echo wrote || echo no-write; "
        ));
    }
    let journal = files[0].with_file_name("plan.db-journal");
    command.push_str(&format!(
        "echo hot > {} 2>/dev/null && echo journal || echo no-journal",
        journal.display()
    ));
    command
}

fn expected_refusals(files: usize) -> String {
    let mut out = "no-read\nno-write\n".repeat(files);
    out.push_str("no-journal\n");
    out
}

#[test]
fn the_database_is_hidden_in_every_layout() {
    if !namespaces_here(
        "P7 and P8 are not enforced and not tested",
        "the_database_is_hidden_in_every_layout",
    ) {
        return;
    }
    // (name, database directory relative to the temporary root, hidden paths)
    let layouts: [(&str, &str, bool); 3] = [
        // The pi package's layout: the database inside the workspace.
        ("pi layout", "ws/.pi/plan", true),
        // The default layout: a directory of its own outside the workspace.
        ("own directory", "state/plan-checkpoint", true),
        // A database at the workspace's root: only its files are hidden.
        ("workspace root", "ws", false),
    ];
    for (name, relative, whole_directory) in layouts {
        let sessions = sessions();
        let root = sessions.workspace.parent().unwrap().to_path_buf();
        let directory = root.join(relative);
        let files = database(&directory);
        let hidden = if whole_directory {
            vec![directory.clone()]
        } else {
            let mut hidden = files.clone();
            hidden.push(directory.join("plan.db-journal"));
            hidden
        };
        let isolation = Isolation {
            scratch_root: Some(sessions.root.clone()),
            hidden,
            protected: files.clone(),
            namespaces: true,
            ..host_isolation()
        };
        let contents = || -> Vec<String> {
            files
                .iter()
                .map(|file| std::fs::read_to_string(file).unwrap())
                .collect()
        };
        let before = contents();
        for confinement in [Confinement::ReadOnly, auto(&sessions.workspace)] {
            let (outcome, events) = run(isolated(
                &database_attacks(&files),
                &sessions.workspace,
                &sessions.own,
                confinement.clone(),
                isolation.clone(),
            ));
            assert_eq!(outcome.state, CommandState::Exited, "{name}: {outcome:?}");
            let stdout = events.text(Stream::Stdout);
            let mut expected = expected_refusals(files.len());
            if !whole_directory && matches!(confinement, Confinement::WorkspaceWrite { .. }) {
                // A journal that does not exist yet cannot be covered; the
                // workspace is writable, so it can be made (documented).
                expected = expected.replace("no-journal", "journal");
                let _ = std::fs::remove_file(directory.join("plan.db-journal"));
            }
            assert_eq!(stdout, expected, "{name} under {confinement:?}");
            assert_eq!(contents(), before, "{name} under {confinement:?}");
        }
        // Unconfined, every attack works.
        let (_, events) = run(spec(
            &database_attacks(&files),
            &sessions.workspace,
            &sessions.own,
            Confinement::None,
        ));
        assert_eq!(
            events.text(Stream::Stdout),
            "read\nwrote\n".repeat(files.len()) + "journal\n",
            "{name}"
        );
    }
}

/// A workspace repository with a worktree elsewhere (whose `.git` is a file)
/// and a nested repository, plus `.pi`, a helper and a host-named path.
struct Repositories {
    _dirs: Dirs,
    scratch: PathBuf,
    workspace: PathBuf,
    worktree: PathBuf,
    helper: PathBuf,
    extra: PathBuf,
}

fn repositories() -> Repositories {
    let dirs = dirs();
    let main = dirs.root.path().join("main");
    populate(&main);
    let worktree = dirs.root.path().join("ws-worktree");
    sh(&main, &format!("git worktree add -q {} HEAD", worktree.display()));
    let workspace = worktree.clone();
    populate(&workspace.join("nested"));
    std::fs::create_dir_all(workspace.join(".pi/plan")).unwrap();
    std::fs::write(workspace.join(".pi/plan/plan-1.md"), "the approved plan\n").unwrap();
    let helper = workspace.join("target/release/plan-checkpoint");
    std::fs::create_dir_all(helper.parent().unwrap()).unwrap();
    std::fs::write(&helper, "#!/bin/sh\n").unwrap();
    let extra = workspace.join("deploy.key");
    std::fs::write(&extra, "key\n").unwrap();
    Repositories {
        scratch: dirs.scratch.clone(),
        _dirs: dirs,
        workspace,
        worktree,
        helper,
        extra,
    }
}

/// Attacks on every protected path; one word each.
fn protected_attacks(repos: &Repositories) -> String {
    let ws = repos.workspace.display();
    let common = repos.worktree.parent().unwrap().join("main/.git");
    let common = common.display();
    let targets = [
        format!("{common}/hooks/post-checkout"),
        format!("{common}/config"),
        format!("{ws}/.git"),
        format!("{ws}/nested/.git/hooks/pre-commit"),
        format!("{ws}/nested/.git/config"),
        format!("{ws}/.pi/plan/plan-1.md"),
        format!("{ws}/.pi/new"),
        repos.helper.display().to_string(),
        repos.extra.display().to_string(),
    ];
    // git first: the control's append to the `.git` file breaks the worktree.
    let mut command = format!(
        "git -C {ws} config core.pwned yes 2>/dev/null && echo configured || echo refused; \
         chmod 777 {ws}/.pi 2>/dev/null && echo chmod || echo refused; "
    );
    for target in targets {
        command.push_str(&format!(
            "echo pwned >> {target} 2>/dev/null && echo wrote || echo refused; "
        ));
    }
    command.push_str(&format!("echo fine > {ws}/allowed.txt && echo allowed"));
    command
}

#[test]
fn protected_paths_stay_read_only_under_auto() {
    if !namespaces_here(
        "P7 and P8 are not enforced and not tested",
        "protected_paths_stay_read_only_under_auto",
    ) {
        return;
    }
    let repos = repositories();
    let main_git = repos.worktree.parent().unwrap().join("main/.git");
    let watched = [
        main_git.clone(),
        repos.workspace.join("nested/.git"),
        repos.workspace.join(".pi"),
    ];
    let before: Vec<_> = watched.iter().map(|path| snapshot(path)).collect();
    let isolation = Isolation {
        protected: vec![repos.helper.clone(), repos.extra.clone()],
        ..host_isolation()
    };
    let (outcome, events) = run(isolated(
        &protected_attacks(&repos),
        &repos.workspace,
        &repos.scratch,
        auto(&repos.workspace),
        isolation,
    ));
    assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
    assert_eq!(
        events.text(Stream::Stdout),
        "refused\n".repeat(11) + "allowed\n",
        "{}",
        events.text(Stream::Stderr)
    );
    let after: Vec<_> = watched.iter().map(|path| snapshot(path)).collect();
    assert_eq!(after, before);
    assert_eq!(std::fs::read_to_string(&repos.helper).unwrap(), "#!/bin/sh\n");
    assert_eq!(std::fs::read_to_string(&repos.extra).unwrap(), "key\n");
    assert_eq!(
        std::fs::read_to_string(repos.workspace.join("allowed.txt")).unwrap(),
        "fine\n"
    );

    // Unconfined, every attack writes.
    let control = repositories();
    let (_, events) = run(isolated(
        &protected_attacks(&control),
        &control.workspace,
        &control.scratch,
        Confinement::None,
        host_isolation(),
    ));
    assert_eq!(
        events.text(Stream::Stdout),
        "configured\nchmod\n".to_owned() + &"wrote\n".repeat(9) + "allowed\n"
    );
}

#[test]
fn an_earlier_auto_command_cannot_prepare_a_later_one_to_reach_git() {
    if !namespaces_here(
        "P7 and P8 are not enforced and not tested",
        "an_earlier_auto_command_cannot_prepare_a_later_one_to_reach_git",
    ) {
        return;
    }
    let repos = repositories();
    let ws = repos.workspace.display().to_string();
    let main_git = repos.worktree.parent().unwrap().join("main/.git");
    let before = snapshot(&main_git);
    let nested_before = snapshot(&repos.workspace.join("nested"));
    // First command: a link to the nested repository's hooks, an attempt to
    // move the nested `.git` aside and to point the worktree's `.git` file
    // at a directory the command controls.
    let prepare = format!(
        "ln -s {ws}/nested/.git {ws}/link; mv {ws}/nested/.git {ws}/nested/.git-away 2>/dev/null; \
         mkdir -p {ws}/fake/hooks; echo 'gitdir: {ws}/fake' > {ws}/.git 2>/dev/null; true"
    );
    let exploit = format!(
        "echo pwned > {ws}/link/hooks/pre-commit 2>/dev/null && echo wrote || echo refused; \
         cat {ws}/.git"
    );
    let mut outputs = Vec::new();
    for command in [prepare, exploit] {
        let (outcome, events) = run(isolated(
            &command,
            &repos.workspace,
            &repos.scratch,
            auto(&repos.workspace),
            host_isolation(),
        ));
        assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
        outputs.push(events.text(Stream::Stdout));
    }
    assert_eq!(outputs[0], "");
    assert!(outputs[1].starts_with("refused\ngitdir: "), "{}", outputs[1]);
    assert!(!outputs[1].contains("fake"), "{}", outputs[1]);
    assert_eq!(snapshot(&main_git), before);
    let mut nested_after = snapshot(&repos.workspace.join("nested"));
    nested_after.retain(|path, _| !path.starts_with(".git-away"));
    assert_eq!(nested_after, nested_before);
}

#[test]
fn without_namespaces_a_plan_command_still_runs_and_keeps_p1_to_p6() {
    if !sandbox_available("without_namespaces_a_plan_command_still_runs_and_keeps_p1_to_p6") {
        return;
    }
    let dirs = dirs();
    let canary = dirs.root.path().join("canary");
    std::fs::write(&canary, "keep\n").unwrap();
    let mut spec = spec(
        &format!(
            "echo pwned > {0} 2>/dev/null; flock -n {0} true && echo locked; \
             python3 -c \"import socket; socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\" 2>/dev/null && echo dgram; \
             ipcmk -Q >/dev/null 2>&1 && echo queue; echo ran",
            canary.display()
        ),
        &dirs.scratch,
        &dirs.scratch,
        Confinement::ReadOnly,
    );
    spec.isolation.namespaces = false;
    let (outcome, events) = run(spec);
    assert_eq!(outcome.exit_code, Some(0), "{}", events.text(Stream::Stderr));
    assert_eq!(events.text(Stream::Stdout), "ran\n");
    assert_eq!(std::fs::read_to_string(&canary).unwrap(), "keep\n");
}

#[test]
fn no_process_outside_the_command_is_visible() {
    if !namespaces_here(
        "P7 and P8 are not enforced and not tested",
        "no_process_outside_the_command_is_visible",
    ) {
        return;
    }
    let dirs = dirs();
    let mut canary = Command::new("sleep").arg("600").spawn().unwrap();
    let command = format!(
        "test -e /proc/{0} && echo canary-visible || echo canary-hidden; \
         test -r /proc/{1}/cmdline && echo host-visible || echo host-hidden; \
         test -e /proc/self/status && echo self-visible; \
         ls /proc | grep -c '^[0-9]'",
        canary.id(),
        std::process::id()
    );
    let (outcome, events) = run(isolated(
        &command,
        &dirs.scratch,
        &dirs.scratch,
        Confinement::ReadOnly,
        host_isolation(),
    ));
    assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
    let stdout = events.text(Stream::Stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        &lines[..3],
        ["canary-hidden", "host-hidden", "self-visible"],
        "{stdout}"
    );
    // Only the command's own processes: its init, the shell, ls and grep.
    let listed: usize = lines[3].parse().unwrap();
    assert!(listed <= 4, "{stdout}");
    let (_, events) = run(spec(&command, &dirs.scratch, &dirs.scratch, Confinement::None));
    assert!(
        events
            .text(Stream::Stdout)
            .starts_with("canary-visible\nhost-visible\n")
    );
    let _ = canary.kill();
    let _ = canary.wait();
}

/// A 1 MiB cap, small enough to fill in a test.
fn small_cap() -> ScratchCap {
    ScratchCap::for_size(1024 * 1024).unwrap()
}

/// Prints the size of the file system `$TMPDIR` is on, in bytes.
const TMPDIR_SIZE: &str = "echo size=$(( $(stat -f -c '%b * %S' \"$TMPDIR\") ))";

#[test]
fn a_command_cannot_write_more_than_the_scratch_cap_and_the_disk_gets_nothing() {
    if !namespaces_here(
        "P7 and P8 are not enforced and not tested",
        "a_command_cannot_write_more_than_the_scratch_cap_and_the_disk_gets_nothing",
    ) {
        return;
    }
    let command = format!(
        "head -c 2097152 /dev/zero > \"$TMPDIR/big\"; echo rc=$?; {TMPDIR_SIZE}; \
         echo small > \"$TMPDIR/small\" 2>/dev/null || echo full"
    );
    // With the scratch directory below a scratch root (the host's layout)
    // and without one.
    for with_root in [true, false] {
        let sessions = sessions();
        let isolation = Isolation {
            scratch_root: with_root.then(|| sessions.root.clone()),
            scratch_cap: small_cap(),
            ..host_isolation()
        };
        for confinement in [Confinement::ReadOnly, auto(&sessions.workspace)] {
            let (outcome, events) = run(isolated(
                &command,
                &sessions.workspace,
                &sessions.own,
                confinement.clone(),
                isolation.clone(),
            ));
            assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
            assert_eq!(
                events.text(Stream::Stdout),
                "rc=1\nsize=1048576\nfull\n",
                "root {with_root}, {confinement:?}: {}",
                events.text(Stream::Stderr)
            );
            assert!(
                events.text(Stream::Stderr).contains("No space left on device"),
                "{}",
                events.text(Stream::Stderr)
            );
            // The host's directory on disk got nothing.
            assert_eq!(std::fs::read_dir(&sessions.own).unwrap().count(), 0);
        }
    }
    // Unconfined, the same write fills the host's directory.
    let sessions = sessions();
    let (outcome, events) = run(spec(
        &command,
        &sessions.workspace,
        &sessions.own,
        Confinement::None,
    ));
    assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
    assert!(events.text(Stream::Stdout).starts_with("rc=0\n"));
    assert_eq!(
        std::fs::metadata(sessions.own.join("big")).unwrap().len(),
        2 * 1024 * 1024
    );
}

#[test]
fn two_commands_at_once_each_have_their_own_capped_scratch() {
    if !namespaces_here(
        "P7 and P8 are not enforced and not tested",
        "two_commands_at_once_each_have_their_own_capped_scratch",
    ) {
        return;
    }
    let sessions = sessions();
    let first = sessions.root.join("first");
    let second = sessions.root.join("second");
    std::fs::create_dir(&first).unwrap();
    std::fs::create_dir(&second).unwrap();
    let go = sessions.workspace.join("go");
    let go_fifo = Fifo::new(&go);
    let isolation = Isolation {
        scratch_root: Some(sessions.root.clone()),
        scratch_cap: small_cap(),
        ..host_isolation()
    };
    // The first command writes its file, says so, and stays alive until the
    // test has run the second one (it reads a line from the FIFO `go`); then
    // it lists its scratch directory.
    let waiting = format!(
        "echo one > \"$TMPDIR/one\"; {TMPDIR_SIZE}; echo ready; \
         read -r _ < {go}; ls -A \"$TMPDIR\"; ls -A {second} 2>/dev/null || echo no-second",
        go = go.display(),
        second = second.display()
    );
    let (first_running, first_events) = start(isolated(
        &waiting,
        &sessions.workspace,
        &first,
        Confinement::ReadOnly,
        isolation.clone(),
    ));
    stdout_line(&first_events, "ready");
    let (outcome, events) = run(isolated(
        &format!(
            "echo two > \"$TMPDIR/two\"; {TMPDIR_SIZE}; ls -A \"$TMPDIR\"; ls -A {first} 2>/dev/null || echo no-first",
            first = first.display()
        ),
        &sessions.workspace,
        &second,
        auto(&sessions.workspace),
        isolation,
    ));
    assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
    assert_eq!(
        events.text(Stream::Stdout),
        "size=1048576\ntwo\nno-first\n",
        "{}",
        events.text(Stream::Stderr)
    );
    go_fifo.send_line();
    let outcome = first_running.wait();
    assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
    assert_eq!(
        first_events.text(Stream::Stdout),
        "size=1048576\nready\none\nno-second\n",
        "{}",
        first_events.text(Stream::Stderr)
    );
    for dir in [&first, &second] {
        assert_eq!(std::fs::read_dir(dir).unwrap().count(), 0, "{}", dir.display());
    }
}

/// A database directory beside which the test put a file, in one layout.
struct Layout {
    name: &'static str,
    sessions: Sessions,
    directory: PathBuf,
    files: Vec<PathBuf>,
    /// What `ls -A` of the database directory shows inside the sandbox.
    listing: &'static str,
}

fn layouts() -> Vec<Layout> {
    // (name, database directory relative to the temporary root, listing)
    let cases: [(&str, &str, &str); 3] = [
        ("own directory", "state/plan-checkpoint", ""),
        ("pi layout", "ws/.pi/plan", ""),
        // An ancestor of the workspace and of the scratch root: only they
        // are bound back.
        ("ancestor", "", "scratch-root ws"),
    ];
    cases
        .into_iter()
        .map(|(name, relative, listing)| {
            let sessions = sessions();
            let root = sessions.workspace.parent().unwrap().to_path_buf();
            let directory = if relative.is_empty() {
                root
            } else {
                root.join(relative)
            };
            let files = database(&directory);
            std::fs::write(directory.join("notes.txt"), "beside the database\n").unwrap();
            std::fs::create_dir_all(sessions.workspace.join("sub")).unwrap();
            std::fs::create_dir_all(sessions.workspace.join(".pi")).unwrap();
            std::fs::write(sessions.workspace.join("top.txt"), "workspace\n").unwrap();
            Layout {
                name,
                sessions,
                directory,
                files,
                listing,
            }
        })
        .collect()
}

#[test]
fn a_file_beside_the_database_is_hidden_in_every_layout() {
    if !namespaces_here(
        "P7 and P8 are not enforced and not tested",
        "a_file_beside_the_database_is_hidden_in_every_layout",
    ) {
        return;
    }
    for layout in layouts() {
        let Layout {
            name,
            sessions,
            directory,
            files,
            listing,
        } = &layout;
        let mut hidden = vec![directory.clone()];
        hidden.extend(files.iter().cloned());
        let isolation = Isolation {
            scratch_root: Some(sessions.root.clone()),
            hidden,
            protected: files.clone(),
            visible: vec![sessions.workspace.clone()],
            ..host_isolation()
        };
        let dir = directory.display();
        let command = format!(
            "cat {dir}/notes.txt 2>/dev/null || echo no-read; \
             echo x > {dir}/planted 2>/dev/null && echo planted || echo no-plant; \
             echo listing=$(ls -A {dir} | tr '\\n' ' '); \
             cat ../top.txt; echo mine > \"$TMPDIR/f\" && cat \"$TMPDIR/f\""
        );
        for confinement in [Confinement::ReadOnly, auto(&sessions.workspace)] {
            let (outcome, events) = run(isolated(
                &command,
                &sessions.workspace.join("sub"),
                &sessions.own,
                confinement.clone(),
                isolation.clone(),
            ));
            assert_eq!(outcome.state, CommandState::Exited, "{name}: {outcome:?}");
            assert_eq!(
                events.text(Stream::Stdout),
                format!("no-read\nno-plant\nlisting={listing}\nworkspace\nmine\n"),
                "{name} under {confinement:?}: {}",
                events.text(Stream::Stderr)
            );
            assert!(!directory.join("planted").exists(), "{name}");
        }
        // The workspace stays writable under `auto`, its `.pi` does not (P7).
        let (outcome, events) = run(isolated(
            "echo written > ../written && cat ../written; \
             echo x > ../.pi/planted 2>/dev/null && echo pi-written || echo pi-refused",
            &sessions.workspace.join("sub"),
            &sessions.own,
            auto(&sessions.workspace),
            isolation,
        ));
        assert_eq!(outcome.state, CommandState::Exited, "{name}: {outcome:?}");
        assert_eq!(events.text(Stream::Stdout), "written\npi-refused\n", "{name}");
        assert!(!sessions.workspace.join(".pi/planted").exists(), "{name}");
        // Unconfined, the file is there to read.
        let (_, events) = run(spec(
            &format!("cat {dir}/notes.txt"),
            &sessions.workspace,
            &sessions.own,
            Confinement::None,
        ));
        assert_eq!(events.text(Stream::Stdout), "beside the database\n", "{name}");
    }
}
