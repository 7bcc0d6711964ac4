//! The sandbox under composition, through the host: the pi package's layout
//! (database inside the workspace) where a Plan command can neither read nor
//! lock the database and an `auto` command of another session cannot rewrite
//! it or plant a journal; two sessions that cannot reach each other's
//! scratch directory; a host that skips namespaces (Plan still runs, `auto`
//! is `SANDBOX_UNAVAILABLE` unless opted out); the database's directory
//! hidden, with the files beside the database; a database directly in the
//! workspace root, where `auto` is refused; and what `initialize` reports.

use super::*;
use plan_core::{CommandState, Sandbox};
use plan_host::{PlanSandbox, SessionId, TurnId};

pub(crate) fn bash(call_id: &str, command: &str) -> ToolCall {
    call(call_id, "Bash", json!({"command": command}))
}

/// Whether this host runs commands inside namespaces; says so when not.
pub(crate) fn namespaced(fixture: &Fixture, test: &str) -> bool {
    let available = fixture.host.command_capabilities().plan_sandbox == PlanSandbox::Landlock
        && fixture.host.limits().commands.namespaces_available;
    if !available {
        eprintln!("{test}: no sandbox with namespaces here; P7 and P8 are not tested");
    }
    available
}

pub(crate) fn start_session(fixture: &Fixture, id: &str, mode: Mode, permission: PermissionMode) -> TurnId {
    fixture
        .host
        .create_session(NewSession {
            session_id: Some(id.into()),
            workspace_root: Some(fixture.root()),
            mode: Some(mode),
            permission_mode: Some(permission),
        })
        .unwrap();
    fixture
        .host
        .start_turn(&SessionId::from(id), Origin::Interactive)
        .unwrap()
        .turn_id
}

/// Runs one Plan Bash call and returns its stdout.
pub(crate) fn plan_stdout(
    fixture: &Fixture,
    session: &str,
    turn: &TurnId,
    call_id: &str,
    command: &str,
) -> String {
    let outcomes = fixture
        .host
        .tool_calls(&SessionId::from(session), turn, vec![bash(call_id, command)])
        .unwrap();
    assert_eq!(verdict(&outcomes[0]), Verdict::Allow, "{outcomes:?}");
    stdout_of(fixture, call_id)
}

/// Runs one `auto` command and returns its stdout.
pub(crate) fn auto_stdout(
    fixture: &Fixture,
    session: &str,
    turn: &TurnId,
    call_id: &str,
    command: &str,
) -> String {
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
    stdout_of(fixture, call_id)
}

/// What `call_id` wrote to stdout up to the first line `until` accepts (a
/// whole line each time), or up to its exit when `until` is `None`.
pub(crate) fn stdout_until(fixture: &Fixture, call_id: &str, until: Option<&dyn Fn(&str) -> bool>) -> String {
    wait_for(
        &fixture.host,
        &fixture.seen,
        &format!("stdout of {call_id}"),
        |seen| {
            let mut stdout = String::new();
            for notification in seen {
                match notification {
                    HostEvent::CommandOutput {
                        call_id: id,
                        stream: plan_host::Stream::Stdout,
                        chunk,
                        ..
                    } if id == call_id => {
                        stdout.push_str(chunk);
                        if let Some(until) = until
                            && stdout.lines().any(until)
                        {
                            return Some(stdout);
                        }
                    }
                    HostEvent::CommandExited(run) if run.call_id == call_id => {
                        return until.is_none().then(|| stdout.clone());
                    }
                    _ => {}
                }
            }
            None
        },
    )
}

pub(crate) fn stdout_of(fixture: &Fixture, call_id: &str) -> String {
    stdout_until(fixture, call_id, None)
}

/// A FIFO the test owns (in the workspace: the directory beside it holds
/// the database and is hidden): a command that reads it waits until the
/// test writes a line, so two commands can be made to run at the same time.
fn gate(fixture: &Fixture, name: &str) -> PathBuf {
    let path = fixture.workspace.join(name);
    let status = std::process::Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
    path
}

fn open_gate(path: &Path) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut fifo| std::io::Write::write_all(&mut fifo, b"go\n"))
        .unwrap();
}

#[test]
fn in_the_pi_layout_no_sandbox_reads_locks_or_rewrites_the_database() {
    let fixture = fixture_with(pi_layout, |options, _| options);
    if !namespaced(
        &fixture,
        "in_the_pi_layout_no_sandbox_reads_locks_or_rewrites_the_database",
    ) {
        return;
    }
    let plan = start_session(&fixture, "plan", Mode::Plan, PermissionMode::Ask);
    let shm = format!("{}-shm", fixture.db.display());
    let read_and_lock = format!(
        "grep -q 'SQLite format' {db} 2>/dev/null && echo readable || echo unreadable; \
         grep -c plan .pi/plan/plan.db-wal 2>/dev/null; \
         python3 -c \"
import fcntl, os
try:
    fcntl.lockf(os.open('{shm}', os.O_RDONLY), fcntl.LOCK_SH | fcntl.LOCK_NB)
    print('locked')
except OSError:
    print('no-lock')
\"",
        db = fixture.db.display()
    );
    let stdout = plan_stdout(&fixture, "plan", &plan, "p1", &read_and_lock);
    assert!(
        !stdout.contains("locked\n") || stdout.contains("no-lock"),
        "{stdout}"
    );
    assert!(
        stdout.starts_with("unreadable\n"),
        "the database was readable: {stdout}"
    );
    // The real file is a database: the probe above can see it unconfined.
    assert!(
        std::fs::read(&fixture.db)
            .unwrap()
            .starts_with(b"SQLite format 3")
    );

    let auto = start_session(&fixture, "auto", Mode::Agent, PermissionMode::Auto);
    let db = fixture.db.display();
    let rewrite = format!(
        "printf forged >> {db} 2>/dev/null && echo wrote || echo refused; \
         echo hot > {db}-journal 2>/dev/null && echo journal || echo refused; \
         echo forged > .pi/plan/forged.md 2>/dev/null && echo artifact || echo refused"
    );
    assert_eq!(
        auto_stdout(&fixture, "auto", &auto, "a1", &rewrite),
        "refused\nrefused\nrefused\n"
    );
    assert!(!Path::new(&format!("{db}-journal")).exists());
    assert!(!fixture.workspace.join(".pi/plan/forged.md").exists());
    // The host still writes its audit: the Plan session completes its turn.
    fixture
        .host
        .complete_turn(&SessionId::from("plan"), &plan)
        .unwrap();
}

#[test]
fn two_sessions_cannot_reach_each_others_scratch() {
    let fixture = fixture_with(
        |workspace| workspace.parent().unwrap().join("plan.db"),
        |options, _| options,
    );
    if !namespaced(&fixture, "two_sessions_cannot_reach_each_others_scratch") {
        return;
    }
    let is_path = |line: &str| line.starts_with('/');
    // A Plan command keeps a note in its scratch directory and stays running
    // (its directory lives as long as it does) while another session's
    // `auto` command goes for it.
    let plan = start_session(&fixture, "plan", Mode::Plan, PermissionMode::Ask);
    let plan_gate = gate(&fixture, "plan-gate");
    let outcomes = fixture
        .host
        .tool_calls(
            &SessionId::from("plan"),
            &plan,
            vec![bash(
                "p1",
                &format!(
                    "echo secret > \"$TMPDIR/notes\" && printf '%s\\n' \"$TMPDIR\"; read line < {}",
                    plan_gate.display()
                ),
            )],
        )
        .unwrap();
    assert_eq!(verdict(&outcomes[0]), Verdict::Allow, "{outcomes:?}");
    let scratch = stdout_until(&fixture, "p1", Some(&is_path));
    // The command's own note is in its private tmpfs; the host's directory
    // at that path gets one the test writes, which no sandbox may reach.
    let notes = Path::new(scratch.trim_end()).join("notes");
    assert!(!notes.exists());
    std::fs::write(&notes, "secret\n").unwrap();
    let auto = start_session(&fixture, "auto", Mode::Agent, PermissionMode::Auto);
    let attack = format!(
        "cat {notes} 2>/dev/null || echo unreadable; echo pwned > {notes} 2>/dev/null || echo unwritable",
        notes = notes.display()
    );
    assert_eq!(
        auto_stdout(&fixture, "auto", &auto, "a1", &attack),
        "unreadable\nunwritable\n"
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "secret\n");
    open_gate(&plan_gate);
    stdout_of(&fixture, "p1");

    // And the other way round: the Plan command cannot read the auto one's.
    let auto_gate = gate(&fixture, "auto-gate");
    let auto_command = format!(
        "echo mine > \"$TMPDIR/own\" && printf '%s\\n' \"$TMPDIR\"; read line < {}",
        auto_gate.display()
    );
    fixture
        .host
        .tool_calls(&SessionId::from("auto"), &auto, vec![bash("a2", &auto_command)])
        .unwrap();
    fixture
        .host
        .start_agent_command(
            &SessionId::from("auto"),
            &auto,
            &"a2".into(),
            &auto_command,
            None,
            None,
        )
        .unwrap();
    let planted = stdout_until(&fixture, "a2", Some(&is_path));
    let own = Path::new(planted.trim_end()).join("own");
    assert!(!own.exists());
    std::fs::write(&own, "mine\n").unwrap();
    assert_eq!(
        plan_stdout(
            &fixture,
            "plan",
            &plan,
            "p2",
            &format!("cat {} 2>/dev/null || echo unreadable", own.display())
        ),
        "unreadable\n"
    );
    open_gate(&auto_gate);
    stdout_of(&fixture, "a2");
}

/// What the host's probe found, as `initialize` reports it (the server
/// writes this very record into `capabilities.commands`).
fn initialize_commands(fixture: &Fixture) -> Value {
    serde_json::to_value(fixture.host.command_capabilities()).unwrap()
}

#[test]
fn a_host_that_skips_namespaces_runs_plan_refuses_auto_and_says_so() {
    let fixture = fixture_with(
        |workspace| workspace.parent().unwrap().join("plan.db"),
        |options, _| HostOptions {
            skip_namespaces: true,
            ..options
        },
    );
    if fixture.host.command_capabilities().plan_sandbox != PlanSandbox::Landlock {
        eprintln!("no kernel sandbox here: nothing to skip");
        return;
    }
    assert!(!fixture.host.limits().commands.namespaces_available);
    let commands = initialize_commands(&fixture);
    assert_eq!(commands["layers"], json!(["landlock", "seccomp"]));
    // Without a user namespace of its own a command's inotify objects are
    // not bounded: said, with why, and P16 is not claimed.
    assert_eq!(
        commands["enforced"],
        json!(["P1", "P2", "P3", "P4", "P5", "P6", "P9", "P10", "P12", "P14"])
    );
    let missing: Vec<&str> = commands["missingBounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|missing| missing["bound"].as_str().unwrap())
        .collect();
    assert!(missing.contains(&"inotify"), "{commands}");
    assert!(!commands["bounds"].as_array().unwrap().contains(&json!("inotify")));

    let plan = start_session(&fixture, "plan", Mode::Plan, PermissionMode::Ask);
    let outside = fixture.workspace.parent().unwrap().join("outside.txt");
    let stdout = plan_stdout(
        &fixture,
        "plan",
        &plan,
        "p1",
        &format!(
            "echo ran; echo pwned > {} 2>/dev/null || echo refused",
            outside.display()
        ),
    );
    assert_eq!(stdout, "ran\nrefused\n");
    assert!(!outside.exists());

    let auto = start_session(&fixture, "auto", Mode::Agent, PermissionMode::Auto);
    fixture
        .host
        .tool_calls(&SessionId::from("auto"), &auto, vec![bash("a1", "echo ran")])
        .unwrap();
    let started = fixture.host.start_agent_command(
        &SessionId::from("auto"),
        &auto,
        &"a1".into(),
        "echo ran",
        None,
        None,
    );
    assert_eq!(code(started), ErrorCode::SandboxUnavailable);

    // A host that opted out gets workspace-write under Landlock and seccomp.
    let opted_out = fixture_with(
        |workspace| workspace.parent().unwrap().join("plan.db"),
        |mut options, _| {
            options.skip_namespaces = true;
            options.limits.commands.auto_without_sandbox = true;
            options
        },
    );
    let auto = start_session(&opted_out, "auto", Mode::Agent, PermissionMode::Auto);
    assert_eq!(auto_stdout(&opted_out, "auto", &auto, "a1", "echo ran"), "ran\n");
}

#[test]
fn initialize_reports_every_layer_where_namespaces_work() {
    let fixture = Fixture::new();
    if !namespaced(&fixture, "initialize_reports_every_layer_where_namespaces_work") {
        assert!(initialize_commands(&fixture)["layers"].as_array().is_some());
        return;
    }
    let commands = initialize_commands(&fixture);
    assert_eq!(commands["planSandbox"], "landlock");
    assert_eq!(commands["layers"], json!(["landlock", "seccomp", "namespaces"]));
    let mut enforced = json!([
        "P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "P11", "P12", "P13", "P14", "P15"
    ]);
    // P16 where every bound holds; each one missing is said, with why.
    let missing = commands["missingBounds"].as_array().unwrap();
    if missing.is_empty() {
        enforced.as_array_mut().unwrap().push(json!("P16"));
    }
    assert_eq!(commands["enforced"], enforced);
    let mut named: Vec<&str> = commands["bounds"]
        .as_array()
        .unwrap()
        .iter()
        .chain(missing.iter().map(|missing| &missing["bound"]))
        .map(|name| name.as_str().unwrap())
        .collect();
    named.sort_unstable();
    assert_eq!(
        named,
        [
            "aio",
            "inotify",
            "keys",
            "machineAddresses",
            "memory",
            "openFiles",
            "processes"
        ]
    );
    for missing in missing {
        assert!(!missing["reason"].as_str().unwrap().is_empty(), "{missing}");
        eprintln!("this machine cannot bound {missing}");
    }
}

#[test]
fn every_command_gets_plan_cores_bounds_from_the_host() {
    let fixture = fixture_with(
        |workspace| workspace.parent().unwrap().join("plan.db"),
        |mut options, _| {
            options.limits.commands.bounds = plan_core::ResourceBounds::with_memory_mb(512).unwrap();
            options
        },
    );
    if !namespaced(&fixture, "every_command_gets_plan_cores_bounds_from_the_host") {
        return;
    }
    let commands = initialize_commands(&fixture);
    let holds = |bound: &str| commands["bounds"].as_array().unwrap().contains(&json!(bound));
    let plan = start_session(&fixture, "plan", Mode::Plan, PermissionMode::Ask);
    // What the command's own kernel view says of each bound: its open
    // files, its PID namespace's `pid_max` (processes and threads, PIDs 1
    // to 1024), its user namespace's inotify limits, and the memory limit
    // of its own cgroup (v1 or v2).
    let stdout = plan_stdout(
        &fixture,
        "plan",
        &plan,
        "p1",
        "ulimit -Hn; cat /proc/sys/user/max_inotify_instances /proc/sys/user/max_inotify_watches; \
         cat /proc/sys/kernel/pid_max; \
         while IFS=: read -r _ controllers path; do \
           case \",$controllers,\" in \
             *,memory,*) cat /sys/fs/cgroup/memory$path/memory.limit_in_bytes ;; \
             ,,) cat /sys/fs/cgroup$path/memory.max 2>/dev/null ;; \
           esac; \
         done < /proc/self/cgroup",
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "4096", "{stdout}");
    if holds("inotify") {
        assert_eq!(lines[1..3], ["16", "16384"], "{stdout}");
    }
    if holds("processes")
        && std::fs::read_to_string("/proc/sys/kernel/osrelease").is_ok_and(|release| {
            let mut parts = release.split('.').map(|part| part.parse::<u32>().unwrap_or(0));
            (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (6, 14)
        })
    {
        assert_eq!(lines[3], "1025", "{stdout}");
    }
    if holds("memory") {
        assert!(lines[4..].contains(&"536870912"), "{stdout}");
    }
}

/// Where a test puts the database, given the workspace.
type Layout = fn(&Path) -> PathBuf;

#[test]
fn the_database_directory_is_hidden_from_plan_commands() {
    // The database in a directory of its own outside the workspace, and
    // (the default fixture) directly in the workspace's parent, beside it.
    let layouts: [(&str, Layout); 2] = [
        ("own directory", |workspace| {
            workspace.parent().unwrap().join("state/plan.db")
        }),
        ("the workspace's parent", |workspace| {
            workspace.parent().unwrap().join("plan.db")
        }),
    ];
    for (name, layout) in layouts {
        let fixture = fixture_with(layout, |options, _| options);
        if !namespaced(&fixture, "the_database_directory_is_hidden_from_plan_commands") {
            return;
        }
        let directory = fixture.db.parent().unwrap();
        let beside = directory.join("notes.txt");
        std::fs::write(&beside, "beside the database\n").unwrap();
        std::fs::write(fixture.workspace.join("README.md"), "workspace\n").unwrap();
        let plan = start_session(&fixture, "plan", Mode::Plan, PermissionMode::Ask);
        let command = format!(
            "cat {beside} 2>/dev/null || echo no-notes; \
             grep -q 'SQLite format' {db} 2>/dev/null && echo database || echo no-database; \
             echo listing=$(ls -A {dir} 2>&1 | grep -v '^workspace$' | tr '\\n' ' '); cat README.md",
            beside = beside.display(),
            db = fixture.db.display(),
            dir = directory.display()
        );
        assert_eq!(
            plan_stdout(&fixture, "plan", &plan, "p1", &command),
            "no-notes\nno-database\nlisting=\nworkspace\n",
            "{name}"
        );
        // Outside the sandbox the directory holds the database and the file.
        assert!(std::fs::read_dir(directory).unwrap().count() >= 2, "{name}");
    }
}

#[test]
fn a_database_directly_in_the_workspace_root_refuses_auto_and_keeps_plan() {
    let fixture = fixture_with(|workspace| workspace.join("plan.db"), |options, _| options);
    if !namespaced(
        &fixture,
        "a_database_directly_in_the_workspace_root_refuses_auto_and_keeps_plan",
    ) {
        return;
    }
    let db = fixture.db.display().to_string();
    // Plan still runs there, and cannot read the database.
    let plan = start_session(&fixture, "plan", Mode::Plan, PermissionMode::Ask);
    assert_eq!(
        plan_stdout(
            &fixture,
            "plan",
            &plan,
            "p1",
            &format!("grep -q 'SQLite format' {db} 2>/dev/null && echo readable || echo unreadable")
        ),
        "unreadable\n"
    );
    // `auto` would get a writable directory beside the database, where no
    // `-journal` exists to be bound read-only: refused before anything runs.
    let auto = start_session(&fixture, "auto", Mode::Agent, PermissionMode::Auto);
    let journal_command = format!("echo hot > {db}-journal; echo ran > ran.txt");
    fixture
        .host
        .tool_calls(
            &SessionId::from("auto"),
            &auto,
            vec![bash("a1", &journal_command)],
        )
        .unwrap();
    let run = fixture
        .host
        .start_agent_command(
            &SessionId::from("auto"),
            &auto,
            &"a1".into(),
            &journal_command,
            None,
            None,
        )
        .unwrap();
    assert_eq!(
        (run.state, run.error_code),
        (
            plan_core::CommandState::FailedToStart,
            Some(ErrorCode::SandboxUnavailable)
        ),
        "{run:?}"
    );
    assert!(!Path::new(&format!("{db}-journal")).exists());
    assert!(!fixture.workspace.join("ran.txt").exists());
}

#[test]
fn another_hosts_transcripts_and_scratch_are_hidden_from_plan_commands() {
    // Two hosts of two projects, as a person runs them side by side: a
    // Plan command of one reads neither the other's database (its
    // transcripts) nor a file in the other's live scratch directory.
    // The other host runs without namespaces, so its scratch directory is
    // on disk, not a private tmpfs.
    let other = fixture_with(
        |workspace| workspace.parent().unwrap().join("state/other.db"),
        |options, _| HostOptions {
            skip_namespaces: true,
            ..options
        },
    );
    let fixture = fixture_with(
        |workspace| workspace.parent().unwrap().join("state/plan.db"),
        |options, _| options,
    );
    if !namespaced(
        &fixture,
        "another_hosts_transcripts_and_scratch_are_hidden_from_plan_commands",
    ) {
        return;
    }
    let other_plan = start_session(&other, "other", Mode::Plan, PermissionMode::Ask);
    // The other host's command leaves a file in its scratch directory and
    // waits there, so the directory is live while this host's command looks.
    let gate = gate(&other, "go");
    let waiting = format!(
        "echo secret > \"$TMPDIR/live\"; echo dir=$TMPDIR; read -r _ < {}",
        gate.display()
    );
    other
        .host
        .tool_calls(&SessionId::from("other"), &other_plan, vec![bash("w1", &waiting)])
        .unwrap();
    let line = stdout_until(&other, "w1", Some(&|line: &str| line.starts_with("dir=")));
    let scratch = line
        .lines()
        .find_map(|line| line.strip_prefix("dir="))
        .unwrap()
        .to_owned();
    // Outside any sandbox both are there to read: the probes can fail.
    assert_eq!(
        std::fs::read_to_string(format!("{scratch}/live")).unwrap(),
        "secret\n"
    );
    assert!(std::fs::read(&other.db).unwrap().starts_with(b"SQLite format"));
    let plan = start_session(&fixture, "plan", Mode::Plan, PermissionMode::Ask);
    let command = format!(
        "grep -q 'SQLite format' {db} 2>/dev/null && echo transcripts-read || echo no-transcripts; \
         cat {scratch}/live 2>/dev/null || echo no-scratch",
        db = other.db.display()
    );
    assert_eq!(
        plan_stdout(&fixture, "plan", &plan, "p1", &command),
        "no-transcripts\nno-scratch\n"
    );
    open_gate(&gate);
    stdout_of(&other, "w1");
}

#[test]
fn a_session_keeps_the_workspace_it_bound_when_an_enclosing_session_replaces_it() {
    // A session bound to `workspace/inner` and an `auto` session bound to
    // `workspace`: the outer command moves `inner` away and puts a link to
    // another directory in its place; the inner session's next command
    // still runs in (and writes to) the directory it bound.
    let fixture = fixture_with(
        |workspace| workspace.parent().unwrap().join("state/plan.db"),
        |options, _| options,
    );
    if !namespaced(
        &fixture,
        "a_session_keeps_the_workspace_it_bound_when_an_enclosing_session_replaces_it",
    ) {
        return;
    }
    let inner = fixture.workspace.join("inner");
    let elsewhere = fixture.workspace.parent().unwrap().join("elsewhere");
    std::fs::create_dir(&inner).unwrap();
    std::fs::create_dir(&elsewhere).unwrap();
    fixture
        .host
        .create_session(NewSession {
            session_id: Some("inner".into()),
            workspace_root: Some(inner.display().to_string()),
            mode: Some(Mode::Agent),
            permission_mode: Some(PermissionMode::Auto),
        })
        .unwrap();
    let inner_turn = fixture
        .host
        .start_turn(&SessionId::from("inner"), Origin::Interactive)
        .unwrap()
        .turn_id;
    let outer = start_session(&fixture, "outer", Mode::Agent, PermissionMode::Auto);
    let moved = format!(
        "mv inner inner.moved && ln -s {} inner && echo swapped",
        elsewhere.display()
    );
    assert_eq!(auto_stdout(&fixture, "outer", &outer, "o1", &moved), "swapped\n");
    assert_eq!(
        auto_stdout(&fixture, "inner", &inner_turn, "i1", "touch written && pwd -P"),
        format!("{}\n", fixture.workspace.join("inner.moved").display())
    );
    assert!(fixture.workspace.join("inner.moved/written").exists());
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "the command followed the link"
    );
}

#[test]
fn a_session_keeps_the_workspace_it_bound_across_a_restart_or_runs_nothing() {
    // As above, but the next host opens the session: it has no descriptor
    // of the directory, only the path, which now names another directory.
    // Its commands are refused (COMMAND_CWD_ESCAPE), in Plan and in `auto`;
    // a session whose directory is still the one it bound runs.
    let mut fixture = fixture_with(
        |workspace| workspace.parent().unwrap().join("state/plan.db"),
        |options, _| options,
    );
    if !namespaced(
        &fixture,
        "a_session_keeps_the_workspace_it_bound_across_a_restart_or_runs_nothing",
    ) {
        return;
    }
    let inner = fixture.workspace.join("inner");
    let elsewhere = fixture.workspace.parent().unwrap().join("elsewhere");
    std::fs::create_dir(&inner).unwrap();
    std::fs::create_dir(&elsewhere).unwrap();
    for (id, mode) in [("inner-auto", Mode::Agent), ("inner-plan", Mode::Plan)] {
        fixture
            .host
            .create_session(NewSession {
                session_id: Some(id.into()),
                workspace_root: Some(inner.display().to_string()),
                mode: Some(mode),
                permission_mode: Some(PermissionMode::Auto),
            })
            .unwrap();
    }
    let outer = start_session(&fixture, "outer", Mode::Agent, PermissionMode::Auto);
    let moved = format!(
        "mv inner inner.moved && ln -s {} inner && echo swapped",
        elsewhere.display()
    );
    assert_eq!(auto_stdout(&fixture, "outer", &outer, "o1", &moved), "swapped\n");
    fixture.restart();
    for id in ["inner-auto", "inner-plan"] {
        let turn = fixture
            .host
            .start_turn(&SessionId::from(id), Origin::Interactive)
            .unwrap()
            .turn_id;
        let outcomes = fixture
            .host
            .tool_calls(&SessionId::from(id), &turn, vec![bash("x1", "touch written")])
            .unwrap();
        if id == "inner-plan" {
            // Plan: denied in the answer, as a cwd leading out is.
            assert_eq!(
                verdict(&outcomes[0]),
                Verdict::Deny(ErrorCode::CommandCwdEscape),
                "{id}: {outcomes:?}"
            );
            continue;
        }
        // Agent: the start is refused.
        assert_eq!(verdict(&outcomes[0]), Verdict::Allow, "{id}: {outcomes:?}");
        let run = fixture
            .host
            .start_agent_command(
                &SessionId::from(id),
                &turn,
                &"x1".into(),
                "touch written",
                None,
                None,
            )
            .unwrap();
        assert_eq!(
            (run.state, run.error_code),
            (CommandState::FailedToStart, Some(ErrorCode::CommandCwdEscape)),
            "{id}"
        );
    }
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "a command ran in the directory now at the session's path"
    );
    assert!(!fixture.workspace.join("inner.moved/written").exists());
    // The outer session's directory is the one it bound: it runs.
    let outer = fixture
        .host
        .start_turn(&SessionId::from("outer"), Origin::Interactive)
        .unwrap()
        .turn_id;
    assert_eq!(
        auto_stdout(&fixture, "outer", &outer, "o2", "echo still"),
        "still\n"
    );
}

#[test]
fn turn_cancel_and_other_requests_hold_whatever_the_workspace_holds() {
    // Repository pointers that are a FIFO, an endless device and a socket,
    // planted by an earlier command: the next `auto` command starts,
    // `turn/cancel` ends it and answers, and the host answers meanwhile.
    let fixture = fixture_with(
        |workspace| workspace.parent().unwrap().join("state/plan.db"),
        |options, _| options,
    );
    if !namespaced(
        &fixture,
        "turn_cancel_and_other_requests_hold_whatever_the_workspace_holds",
    ) {
        return;
    }
    let ws = &fixture.workspace;
    std::fs::create_dir_all(ws.join(".g")).unwrap();
    std::fs::write(ws.join(".git"), "gitdir: .g\n").unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(ws.join(".g/commondir"))
            .status()
            .unwrap()
            .success()
    );
    std::fs::create_dir_all(ws.join("sub/.h")).unwrap();
    std::fs::write(ws.join("sub/.git"), "gitdir: .h\n").unwrap();
    std::os::unix::fs::symlink("/dev/zero", ws.join("sub/.h/commondir")).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(ws.join("sub/.h/config")).unwrap();
    let auto = start_session(&fixture, "auto", Mode::Agent, PermissionMode::Auto);
    let gate = gate(&fixture, "never");
    let waiting = format!("echo started; read -r _ < {}", gate.display());
    fixture
        .host
        .tool_calls(&SessionId::from("auto"), &auto, vec![bash("a1", &waiting)])
        .unwrap();
    fixture
        .host
        .start_agent_command(
            &SessionId::from("auto"),
            &auto,
            &"a1".into(),
            &waiting,
            None,
            None,
        )
        .unwrap();
    stdout_until(&fixture, "a1", Some(&|line: &str| line == "started"));
    // Another request is answered while the command runs.
    fixture.host.session(&SessionId::from("auto")).unwrap();
    fixture.host.cancel_turn(&SessionId::from("auto")).unwrap();
    let run = fixture
        .host
        .command(&SessionId::from("auto"), &"a1".into())
        .unwrap();
    assert_eq!(run.state, plan_core::CommandState::Cancelled, "{run:?}");
}

#[test]
fn a_sessions_networked_commands_share_its_own_network_namespace_and_no_other_session_does() {
    let fixture = fixture_with(
        |workspace| workspace.parent().unwrap().join("plan.db"),
        |mut options, _| {
            options.limits.commands.network_in_auto = true;
            options
        },
    );
    if !namespaced(
        &fixture,
        "a_sessions_networked_commands_share_its_own_network_namespace_and_no_other_session_does",
    ) {
        return;
    }
    let namespace = "readlink /proc/self/ns/net";
    let one = start_session(&fixture, "one", Mode::Agent, PermissionMode::Auto);
    let two = start_session(&fixture, "two", Mode::Agent, PermissionMode::Auto);
    let first = auto_stdout(&fixture, "one", &one, "o1", namespace);
    let again = auto_stdout(&fixture, "one", &one, "o2", namespace);
    let other = auto_stdout(&fixture, "two", &two, "t1", namespace);
    let hosts = format!("{}\n", std::fs::read_link("/proc/self/ns/net").unwrap().display());
    assert!(first.starts_with("net:["), "{first:?}");
    assert_eq!(first, again, "one session's commands share its namespace");
    assert_ne!(first, other, "two sessions share a namespace");
    assert_ne!(first, hosts, "a command sits in the host's namespace");
    assert_ne!(other, hosts, "a command sits in the host's namespace");
}

#[test]
fn plan_mode_cargo_check_and_cargo_tree_work_in_a_workspace_crate() {
    let fixture = fixture_with(
        |workspace| workspace.parent().unwrap().join("db").join("plan.db"),
        |options, _| options,
    );
    if fixture.host.command_capabilities().plan_sandbox != PlanSandbox::Landlock {
        eprintln!("no kernel sandbox here: Plan Bash is refused (asserted elsewhere)");
        return;
    }
    // A workspace of two path-only crates, so nothing needs the network.
    let ws = &fixture.workspace;
    std::fs::create_dir_all(ws.join("app/src")).unwrap();
    std::fs::create_dir_all(ws.join("lib/src")).unwrap();
    std::fs::write(
        ws.join("Cargo.toml"),
        "[workspace]\nmembers = [\"app\", \"lib\"]\nresolver = \"2\"\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("app/Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nlib = { path = \"../lib\" }\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("lib/Cargo.toml"),
        "[package]\nname = \"lib\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(ws.join("app/src/main.rs"), "fn main() { lib::f() }\n").unwrap();
    std::fs::write(ws.join("lib/src/lib.rs"), "pub fn f() {}\n").unwrap();
    assert!(
        std::process::Command::new("cargo")
            .args(["generate-lockfile", "--offline", "-q"])
            .current_dir(ws)
            .status()
            .unwrap()
            .success()
    );
    let plan = start_session(&fixture, "plan", Mode::Plan, PermissionMode::Ask);
    // Incremental compilation needs its lock, which a command takes on its
    // scratch tmpfs inside the namespaces; without them it is off.
    let incremental = if fixture.host.limits().commands.namespaces_available {
        ""
    } else {
        "CARGO_INCREMENTAL=0 "
    };
    let stdout = plan_stdout(
        &fixture,
        "plan",
        &plan,
        "p1",
        &format!(
            "cd app && {incremental}CARGO_TARGET_DIR=\"$TMPDIR/target\" cargo check --frozen -q 2>&1 | grep -v -e last-use -e cache -e 'disk I/O' -e '^Caused' -e '^$'; test ${{PIPESTATUS[0]}} = 0 && echo checked; \
             cargo tree --offline --prefix none 2>/dev/null | head -2"
        ),
    );
    assert!(stdout.starts_with("checked\napp v0.1.0"), "{stdout}");
    assert!(stdout.contains("lib v0.1.0"), "{stdout}");
}
