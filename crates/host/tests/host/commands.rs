//! Host-run commands through the typed API: Plan Bash under the kernel's
//! read-only sandbox, streaming order, the output cap, timeout, cancel,
//! `turn/cancel` with several commands, the audit entries, Agent
//! `command/start` refusals, and a restart that interrupts and never re-runs.
//!
//! Denial is checked only with writes under the test's own temporary
//! directories. Where the kernel sandbox is missing, the Plan tests assert
//! `PLAN_SANDBOX_UNAVAILABLE` instead and say so.

use super::*;
use plan_core::{CommandRun, CommandState, Sandbox};
use plan_host::{CommandEntryKind, CommandFilter, PlanSandbox, SessionId, TurnId};

/// The output and the end of one command, as the listener saw them.
struct Seen {
    /// `(stream, seq, chunk)` of every `command/output`, in arrival order.
    output: Vec<(String, u64, String)>,
    /// The `command/exited` run.
    exited: CommandRun,
    /// How many notifications of this call came after `command/exited`.
    after_exit: usize,
}

/// A stream as the protocol names it.
fn stream_name(stream: plan_host::Stream) -> String {
    match stream {
        plan_host::Stream::Stdout => "stdout",
        plan_host::Stream::Stderr => "stderr",
    }
    .to_owned()
}

fn bash(call_id: &str, command: &str) -> ToolCall {
    call(call_id, "Bash", json!({"command": command}))
}

impl Fixture {
    /// Whether the kernel sandbox works; prints when it does not, so a
    /// skipped assertion is visible.
    fn sandboxed(&self) -> bool {
        let capabilities = self.host.command_capabilities();
        match capabilities.plan_sandbox {
            PlanSandbox::Landlock => true,
            PlanSandbox::Unavailable => {
                let reason = capabilities.reason.unwrap_or_default();
                eprintln!(
                    "the kernel sandbox is unavailable here ({reason}); asserting PLAN_SANDBOX_UNAVAILABLE"
                );
                assert!(
                    !reason.contains("was not found"),
                    "the sandbox helper is missing: build it with `cargo build -p plan-exec` (cargo test --workspace does)"
                );
                false
            }
        }
    }

    /// A Plan session `id` with an active turn; returns the turn id.
    fn plan_turn(&self, id: &str) -> TurnId {
        self.session(id, Mode::Plan);
        self.host
            .start_turn(&SessionId::from(id), Origin::Interactive)
            .unwrap()
            .turn_id
    }

    /// An Agent session in `auto` and its first turn.
    fn auto_turn(&self, id: &str) -> TurnId {
        self.host
            .create_session(NewSession {
                session_id: Some(id.into()),
                workspace_root: Some(self.root()),
                mode: Some(Mode::Agent),
                permission_mode: Some(PermissionMode::Auto),
            })
            .unwrap();
        self.host
            .start_turn(&SessionId::from(id), Origin::Interactive)
            .unwrap()
            .turn_id
    }

    /// Runs Plan Bash calls; returns each call's run.
    fn run_plan(&self, id: &str, turn: &TurnId, calls: Vec<ToolCall>) -> Vec<ToolCallResult> {
        self.host.tool_calls(&SessionId::from(id), turn, calls).unwrap()
    }

    /// Waits (bounded) for `command/exited` of `call_id`.
    fn wait_exited(&self, call_id: &str) -> Seen {
        wait_for(
            &self.host,
            &self.seen,
            &format!("command/exited of {call_id}"),
            |seen| {
                let mut output = Vec::new();
                let mut exited = None;
                let mut after_exit = 0;
                for notification in seen {
                    match notification {
                        HostEvent::CommandOutput {
                            call_id: id,
                            stream,
                            seq,
                            chunk,
                            ..
                        } if id == call_id => {
                            if exited.is_some() {
                                after_exit += 1;
                            }
                            output.push((stream_name(*stream), *seq, chunk.clone()));
                        }
                        HostEvent::CommandExited(run) if run.call_id == call_id => {
                            exited = Some(run.clone());
                        }
                        _ => {}
                    }
                }
                exited.map(|exited| Seen {
                    output,
                    exited,
                    after_exit,
                })
            },
        )
    }

    fn entries(&self, session: &str, call_id: &str) -> Vec<(CommandEntryKind, CommandRun, Option<String>)> {
        let store = plan_storage::Store::open_read_only(&self.db).unwrap();
        store
            .command_entries(session, &call_id.into())
            .unwrap()
            .into_iter()
            .map(|entry| (entry.kind, entry.run, entry.output_sha256))
            .collect()
    }
}

fn text(seen: &Seen, stream: &str) -> String {
    seen.output
        .iter()
        .filter(|(name, _, _)| name == stream)
        .map(|(_, _, chunk)| chunk.as_str())
        .collect()
}

#[test]
fn plan_bash_streams_both_streams_in_order_and_is_audited() {
    let fixture = Fixture::new();
    let turn = fixture.plan_turn("s1");
    // Each step waits at a FIFO in the workspace (readable in the sandbox)
    // until the previous step's output has reached the listeners.
    let gate = fixture.workspace.join("gate");
    let status = std::process::Command::new("mkfifo").arg(&gate).status().unwrap();
    assert!(status.success());
    // Held open for reading and writing: the command's open never blocks and
    // nothing blocks if the command dies.
    let gate = std::fs::File::options()
        .read(true)
        .write(true)
        .open(&gate)
        .unwrap();
    fixture
        .host
        .add_listener(Arc::new(move |event: plan_host::HostEvent| {
            if let plan_host::HostEvent::CommandOutput { .. } = event {
                let _ = std::io::Write::write_all(&mut &gate, b"\n");
            }
        }));
    let outcomes = fixture.run_plan(
        "s1",
        &turn,
        vec![bash(
            "c1",
            "printf 'one\\n'; read -r _ < gate; printf 'two\\n' >&2; read -r _ < gate; printf 'three\\n'",
        )],
    );
    if !fixture.sandboxed() {
        assert_eq!(
            verdict(&outcomes[0]),
            Verdict::Deny(ErrorCode::PlanSandboxUnavailable)
        );
        assert!(outcomes[0].command.is_none());
        return;
    }
    let run = outcomes[0].command.clone().expect("Plan Bash returns its run");
    assert_eq!(verdict(&outcomes[0]), Verdict::Allow);
    assert_eq!(run.state, CommandState::Running);
    assert_eq!((run.sandbox, run.network), (Sandbox::ReadOnly, false));
    assert_eq!(run.cwd, ".");
    let seen = fixture.wait_exited("c1");
    assert_eq!(
        seen.after_exit, 0,
        "command/exited is the last message of its call"
    );
    let seqs: Vec<u64> = seen.output.iter().map(|(_, seq, _)| *seq).collect();
    assert_eq!(
        seqs,
        (0..seqs.len() as u64).collect::<Vec<_>>(),
        "one seq across both streams"
    );
    let streams: Vec<&str> = seen.output.iter().map(|(stream, _, _)| stream.as_str()).collect();
    assert_eq!(
        streams,
        ["stdout", "stderr", "stdout"],
        "arrival order across streams"
    );
    assert_eq!(text(&seen, "stdout"), "one\nthree\n");
    assert_eq!(text(&seen, "stderr"), "two\n");
    assert_eq!(seen.exited.state, CommandState::Exited);
    assert_eq!(seen.exited.exit_code, Some(0));
    assert_eq!((seen.exited.stdout_bytes, seen.exited.stderr_bytes), (10, 4));
    let entries = fixture.entries("s1", "c1");
    let kinds: Vec<CommandEntryKind> = entries.iter().map(|(kind, _, _)| *kind).collect();
    assert_eq!(kinds, [CommandEntryKind::Started, CommandEntryKind::Ended]);
    assert_eq!(entries[0].1.state, CommandState::Running);
    assert_eq!(entries[1].1.state, CommandState::Exited);
    assert!(
        entries
            .iter()
            .all(|(_, run, _)| run.sandbox == Sandbox::ReadOnly && !run.network)
    );
    let combined = {
        let mut inner = Vec::new();
        inner.extend(Sha256::digest(b"one\nthree\n"));
        inner.extend(Sha256::digest(b"two\n"));
        sha256(&inner)
    };
    assert_eq!(entries[1].2.as_deref(), Some(combined.as_str()));
    assert_eq!(
        fixture
            .host
            .command(&SessionId::from("s1"), &"c1".into())
            .unwrap()
            .state,
        CommandState::Exited
    );
    fixture.host.complete_turn(&SessionId::from("s1"), &turn).unwrap();
}

#[test]
fn a_plan_write_is_refused_by_the_kernel_and_leaves_nothing() {
    let fixture = Fixture::new();
    let turn = fixture.plan_turn("s1");
    std::fs::write(fixture.workspace.join("README.md"), "hello\n").unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = fixture.workspace.join("written.txt");
    let elsewhere = outside.path().join("escaped.txt");
    let command = format!(
        "cat README.md; echo x > {}; echo y > {}; echo z > \"$TMPDIR/scratch.txt\" && cat \"$TMPDIR/scratch.txt\"",
        target.display(),
        elsewhere.display()
    );
    let outcomes = fixture.run_plan("s1", &turn, vec![bash("c1", &command)]);
    if !fixture.sandboxed() {
        assert_eq!(
            verdict(&outcomes[0]),
            Verdict::Deny(ErrorCode::PlanSandboxUnavailable)
        );
        return;
    }
    let seen = fixture.wait_exited("c1");
    assert_eq!(
        text(&seen, "stdout"),
        "hello\nz\n",
        "reads work and the scratch dir is writable"
    );
    assert!(
        !text(&seen, "stderr").is_empty(),
        "the shell reports the refused writes"
    );
    assert!(!target.exists(), "the workspace was not written");
    assert!(!elsewhere.exists(), "a directory outside was not written");
    fixture.host.complete_turn(&SessionId::from("s1"), &turn).unwrap();
}

#[test]
fn output_past_the_cap_is_counted_not_sent() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let host = Host::open(
        dir.path().join("plan.db"),
        HostOptions {
            command_output_cap: 1000,
            ..options(&clock)
        },
    )
    .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    listen(&host, &seen);
    host.create_session(NewSession {
        session_id: Some("s1".into()),
        workspace_root: workspace.to_str().map(str::to_owned),
        mode: Some(Mode::Plan),
        permission_mode: None,
    })
    .unwrap();
    let turn = host
        .start_turn(&SessionId::from("s1"), Origin::Interactive)
        .unwrap()
        .turn_id;
    let outcomes = host
        .tool_calls(
            &SessionId::from("s1"),
            &turn,
            vec![bash("c1", "head -c 5000 /dev/zero | tr '\\0' a")],
        )
        .unwrap();
    if host.command_capabilities().plan_sandbox != PlanSandbox::Landlock {
        assert_eq!(
            verdict(&outcomes[0]),
            Verdict::Deny(ErrorCode::PlanSandboxUnavailable)
        );
        return;
    }
    let exited = wait_for(&host, &seen, "command/exited", |seen| {
        seen.iter().find_map(|notification| match notification {
            HostEvent::CommandExited(run) => Some(run.clone()),
            _ => None,
        })
    });
    let sent: usize = seen
        .lock()
        .unwrap()
        .iter()
        .map(|notification| match notification {
            HostEvent::CommandOutput { chunk, .. } => chunk.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(sent, 1000, "exactly the cap is delivered");
    assert_eq!(exited.stdout_bytes, 5000, "every byte is counted");
    assert!(exited.truncated);
}

#[test]
fn a_timeout_kills_the_command() {
    let fixture = Fixture::new();
    let turn = fixture.plan_turn("s1");
    let outcomes = fixture.run_plan(
        "s1",
        &turn,
        vec![call(
            "c1",
            "Bash",
            json!({"command": "sleep 30", "timeoutMs": 200}),
        )],
    );
    if !fixture.sandboxed() {
        return;
    }
    assert!(outcomes[0].command.is_some());
    let seen = fixture.wait_exited("c1");
    assert_eq!(seen.exited.state, CommandState::TimedOut);
    assert_eq!(
        fixture
            .host
            .command(&SessionId::from("s1"), &"c1".into())
            .unwrap()
            .state,
        CommandState::TimedOut
    );
}

#[test]
fn command_cancel_kills_and_answers_not_found_and_not_running() {
    let fixture = Fixture::new();
    let turn = fixture.plan_turn("s1");
    fixture.run_plan("s1", &turn, vec![bash("c1", "sleep 30")]);
    if !fixture.sandboxed() {
        return;
    }
    assert_eq!(
        code(fixture.host.complete_turn(&SessionId::from("s1"), &turn)),
        ErrorCode::SessionBusy,
        "no turn/complete while a command runs"
    );
    assert_eq!(
        code(
            fixture
                .host
                .cancel_command(&SessionId::from("s1"), &"nope".into())
        ),
        ErrorCode::CommandNotFound
    );
    let run = fixture
        .host
        .cancel_command(&SessionId::from("s1"), &"c1".into())
        .unwrap();
    assert_eq!(run.call_id, "c1");
    let seen = fixture.wait_exited("c1");
    assert_eq!(seen.exited.state, CommandState::Cancelled);
    assert_eq!(
        code(fixture.host.cancel_command(&SessionId::from("s1"), &"c1".into())),
        ErrorCode::CommandNotRunning
    );
    fixture.host.complete_turn(&SessionId::from("s1"), &turn).unwrap();
    assert_eq!(
        code(fixture.host.cancel_command(&SessionId::from("s1"), &"c1".into())),
        ErrorCode::CommandNotRunning
    );
    assert_eq!(
        fixture
            .host
            .command(&SessionId::from("s1"), &"c1".into())
            .unwrap()
            .state,
        CommandState::Cancelled
    );
}

#[test]
fn turn_cancel_cancels_every_command_before_the_turn_ends() {
    let fixture = Fixture::new();
    let turn = fixture.plan_turn("s1");
    fixture.run_plan(
        "s1",
        &turn,
        vec![
            bash("c1", "sleep 30"),
            bash("c2", "sleep 30 & wait"),
            bash("c3", "true"),
        ],
    );
    if !fixture.sandboxed() {
        return;
    }
    let scratch_root = plan_exec::ScratchRoot::default_for(&fixture.db);
    assert!(
        std::fs::read_dir(&scratch_root).unwrap().count() >= 2,
        "each running command has its own scratch dir"
    );
    fixture.host.cancel_turn(&SessionId::from("s1")).unwrap();
    // When turn/cancel returns, both long commands have exited and their
    // ends are announced before the session's change.
    let seen = fixture.seen.lock().unwrap().clone();
    let position = |wanted: &dyn Fn(&HostEvent) -> bool| seen.iter().position(wanted);
    for call_id in ["c1", "c2"] {
        let exited = position(
            &|n| matches!(n, HostEvent::CommandExited(run) if run.call_id == call_id && run.state == CommandState::Cancelled),
        );
        let idle = seen
            .iter()
            .rposition(|n| matches!(n, HostEvent::SessionChanged(changed) if changed.active_turn.is_none()));
        assert!(exited.is_some(), "{call_id} is cancelled");
        assert!(exited < idle, "{call_id} exited before the turn ended");
        let entries = fixture.entries("s1", call_id);
        assert_eq!(entries.last().unwrap().1.state, CommandState::Cancelled);
    }
    assert_eq!(
        std::fs::read_dir(&scratch_root).unwrap().count(),
        0,
        "every command's end removed its scratch dir"
    );
    assert!(
        fixture
            .host
            .session(&SessionId::from("s1"))
            .unwrap()
            .active_turn
            .is_none()
    );
}

#[test]
fn agent_command_start_refusals_are_coded_and_audited() {
    let fixture = Fixture::new();
    let plan_turn = fixture.plan_turn("plan");
    assert_eq!(
        code(fixture.host.start_agent_command(
            &SessionId::from("plan"),
            &plan_turn,
            &"c1".into(),
            "ls",
            None,
            None
        )),
        ErrorCode::CommandNotAllowed,
        "Plan commands start only through turn/toolCalls"
    );
    fixture.session("agent", Mode::Agent);
    let turn = fixture
        .host
        .start_turn(&SessionId::from("agent"), Origin::Interactive)
        .unwrap()
        .turn_id;
    let outcomes = fixture
        .host
        .tool_calls(
            &SessionId::from("agent"),
            &turn,
            vec![
                call(
                    "b1",
                    "Bash",
                    json!({"command": "echo agent", "timeoutMs": 10_000}),
                ),
                call("r1", "Read", json!({})),
            ],
        )
        .unwrap();
    // Under `ask` the Bash call awaits a person and is host-run.
    assert_eq!(
        (verdict(&outcomes[0]), outcomes[0].host_run),
        (Verdict::Confirm, true)
    );
    assert!(
        outcomes[0].command.is_none(),
        "an Agent client has the host start its commands"
    );
    let start = |call_id: &str, command: &str, cwd: Option<&str>| {
        fixture.host.start_agent_command(
            &SessionId::from("agent"),
            &turn,
            &call_id.into(),
            command,
            cwd,
            Some(10_000),
        )
    };
    for (call_id, why) in [
        ("r1", "not a Bash call"),
        ("zz", "never allowed"),
        ("b1", "not confirmed yet"),
    ] {
        assert_eq!(
            code(start(call_id, "echo agent", None)),
            ErrorCode::CommandNotAllowed,
            "{why}"
        );
    }
    let confirmed = fixture
        .host
        .confirm_tool(&SessionId::from("agent"), &turn, &"b1".into(), true)
        .unwrap();
    assert_eq!((verdict(&confirmed), confirmed.host_run), (Verdict::Allow, true));
    assert_eq!(
        code(start("b1", "ls", Some("../.."))),
        ErrorCode::CommandCwdEscape
    );
    assert_eq!(
        code(start("b1", "echo agent; touch pwned", None)),
        ErrorCode::CommandNotAllowed,
        "only the text that was confirmed runs"
    );
    for timeout_ms in [None, Some(600_000)] {
        assert_eq!(
            code(fixture.host.start_agent_command(
                &SessionId::from("agent"),
                &turn,
                &"b1".into(),
                "echo agent",
                None,
                timeout_ms
            )),
            ErrorCode::CommandNotAllowed,
            "only the timeout that was confirmed runs: {timeout_ms:?}"
        );
    }
    if !fixture.sandboxed() {
        assert_eq!(
            code(start("b1", "echo agent", None)),
            ErrorCode::SandboxUnavailable
        );
        return;
    }
    let run = start("b1", "echo agent", None).unwrap();
    assert_eq!(
        run.sandbox,
        Sandbox::WorkspaceWrite,
        "a confirmed command is confined as an auto one is"
    );
    assert_eq!(
        code(start("b1", "echo agent", None)),
        ErrorCode::CommandNotAllowed,
        "already started"
    );
    let seen = fixture.wait_exited("b1");
    assert_eq!(text(&seen, "stdout"), "agent\n");
    let refused: Vec<(String, Option<ErrorCode>)> = fixture
        .host
        .list_commands(&CommandFilter::default())
        .unwrap()
        .into_iter()
        .filter(|record| record.kind == CommandEntryKind::Refused)
        .map(|record| (record.run.call_id.into_string(), record.run.error_code))
        .collect();
    assert_eq!(refused.len(), 9, "every refused start is recorded: {refused:?}");
    assert!(refused.contains(&("c1".to_owned(), Some(ErrorCode::CommandNotAllowed))));
    let plan_refusal = fixture.entries("plan", "c1");
    assert_eq!(
        plan_refusal[0].1.sandbox,
        Sandbox::ReadOnly,
        "a Plan turn's entry says read-only"
    );
}

#[test]
fn a_restart_interrupts_running_commands_and_never_reruns_them() {
    let mut fixture = Fixture::new();
    let turn = fixture.plan_turn("s1");
    let marker = fixture.workspace.join("ran-once");
    // Reads only; the marker shows whether anything ran it again.
    fixture.run_plan("s1", &turn, vec![bash("c1", "sleep 30")]);
    if !fixture.sandboxed() {
        return;
    }
    fixture.restart();
    let record = fixture
        .host
        .command(&SessionId::from("s1"), &"c1".into())
        .unwrap();
    assert_eq!(record.state, CommandState::Interrupted);
    assert_eq!(record.error_code, Some(ErrorCode::HostRestarted));
    let entries = fixture.entries("s1", "c1");
    let kinds: Vec<CommandEntryKind> = entries.iter().map(|(kind, _, _)| *kind).collect();
    assert_eq!(
        kinds,
        [CommandEntryKind::Started, CommandEntryKind::Ended],
        "started once, never again"
    );
    assert!(
        fixture
            .host
            .session(&SessionId::from("s1"))
            .unwrap()
            .active_turn
            .is_none()
    );
    assert!(!marker.exists());
    fixture.restart();
    assert_eq!(
        fixture.entries("s1", "c1").len(),
        2,
        "a second fence adds nothing"
    );
}

#[test]
fn the_startup_fence_clears_leftover_scratch_directories() {
    let mut fixture = Fixture::new();
    let scratch_root = plan_exec::ScratchRoot::default_for(&fixture.db);
    let stale = scratch_root.join("turn-of-a-dead-host");
    std::fs::create_dir_all(stale.join("nested")).unwrap();
    std::fs::write(stale.join("nested/file"), "left behind").unwrap();
    // What an unconfined command of the dead host could have left there:
    // links to a directory outside. The sweep removes the links only.
    let canary = canary();
    std::os::unix::fs::symlink(canary.path(), stale.join("nested/link")).unwrap();
    std::os::unix::fs::symlink(canary.path(), scratch_root.join("top-link")).unwrap();
    fixture.restart();
    assert!(!stale.exists(), "the fence removed the stale scratch directory");
    assert_eq!(std::fs::read_dir(&scratch_root).unwrap().count(), 0);
    assert_intact(&canary, "the startup sweep followed a link");
}

#[test]
fn turn_cancel_does_not_stall_when_a_listener_calls_back_into_the_host() {
    let fixture = Fixture::new();
    let turn = fixture.plan_turn("s1");
    let weak = Arc::downgrade(&fixture.host);
    fixture
        .host
        .add_listener(Arc::new(move |event: plan_host::HostEvent| {
            if let plan_host::HostEvent::CommandOutput { .. } = event
                && let Some(host) = weak.upgrade()
            {
                // A slow listener that calls back: the output thread is almost
                // always inside it when turn/cancel comes.
                std::thread::sleep(Duration::from_millis(20));
                let _ = host.session(&SessionId::from("s1"));
            }
        }));
    fixture.run_plan(
        "s1",
        &turn,
        vec![bash("c1", "while true; do echo tick; sleep 0.01; done")],
    );
    if !fixture.sandboxed() {
        return;
    }
    // Cancel once the command streams, so the output thread is busy.
    wait_for(&fixture.host, &fixture.seen, "the first command/output", |seen| {
        seen.iter()
            .any(|notification| matches!(notification, HostEvent::CommandOutput { .. }))
            .then_some(())
    });
    let host = Arc::clone(&fixture.host);
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(
            host.cancel_turn(&SessionId::from("s1"))
                .map(|state| state.active_turn.is_none()),
        );
    });
    let ended = finished
        .recv_timeout(Duration::from_secs(30))
        .expect("turn/cancel must return although a listener calls back into the host");
    assert!(ended.unwrap(), "the turn ended");
    assert_eq!(
        fixture
            .host
            .command(&SessionId::from("s1"), &"c1".into())
            .unwrap()
            .state,
        CommandState::Cancelled
    );
}

#[test]
fn agent_auto_commands_may_write_the_workspace_and_nothing_outside() {
    let fixture = Fixture::new();
    let turn = fixture.auto_turn("auto");
    let outside = tempfile::tempdir().unwrap();
    let escaped = outside.path().join("escaped.txt");
    let command = format!("echo inside > inside.txt; echo outside > {}", escaped.display());
    fixture
        .host
        .tool_calls(&SessionId::from("auto"), &turn, vec![bash("b1", &command)])
        .unwrap();
    let started = fixture.host.start_agent_command(
        &SessionId::from("auto"),
        &turn,
        &"b1".into(),
        &command,
        None,
        None,
    );
    if !fixture.sandboxed() {
        assert_eq!(code(started), ErrorCode::SandboxUnavailable);
        return;
    }
    let run = started.unwrap();
    assert_eq!((run.sandbox, run.network), (Sandbox::WorkspaceWrite, false));
    let seen = fixture.wait_exited("b1");
    assert_ne!(seen.exited.exit_code, Some(0), "the write outside failed");
    assert_eq!(
        std::fs::read_to_string(fixture.workspace.join("inside.txt")).unwrap(),
        "inside\n"
    );
    assert!(!escaped.exists(), "nothing was written outside the workspace");
}

#[test]
fn without_a_sandbox_plan_bash_is_refused_and_nothing_runs() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap();
    let marker = workspace.join("ran.txt");
    let clock = Arc::new(ManualClock::new(T0));
    let host = Host::open(
        dir.path().join("plan.db"),
        HostOptions {
            sandbox_helper: Some(workspace.join("no-such-helper")),
            ..options(&clock)
        },
    )
    .unwrap();
    let capabilities = host.command_capabilities();
    assert_eq!(
        capabilities.plan_sandbox,
        PlanSandbox::Unavailable,
        "a missing helper cannot sandbox anything"
    );
    let reason = capabilities.reason.unwrap();
    assert!(reason.contains("no-such-helper"), "{reason}");
    for (id, mode, permission) in [
        ("plan", Mode::Plan, PermissionMode::Ask),
        ("ask", Mode::Agent, PermissionMode::Ask),
        ("auto", Mode::Agent, PermissionMode::Auto),
    ] {
        host.create_session(NewSession {
            session_id: Some(id.into()),
            workspace_root: workspace.to_str().map(str::to_owned),
            mode: Some(mode),
            permission_mode: Some(permission),
        })
        .unwrap();
    }
    let command = format!("touch {}", marker.display());
    let turn = host
        .start_turn(&SessionId::from("plan"), Origin::Interactive)
        .unwrap()
        .turn_id;
    let outcomes = host
        .tool_calls(&SessionId::from("plan"), &turn, vec![bash("c1", &command)])
        .unwrap();
    assert_eq!(
        verdict(&outcomes[0]),
        Verdict::Deny(ErrorCode::PlanSandboxUnavailable)
    );
    // The denial names the real cause (the helper path), not the kernel.
    let message = outcomes[0]
        .error
        .as_ref()
        .map(|error| error.message.as_str())
        .unwrap_or_default();
    assert!(
        message.starts_with("the read-only Plan sandbox is unavailable, so Plan-mode Bash cannot run: ")
            && message.ends_with(&reason),
        "{message:?}"
    );
    assert!(outcomes[0].command.is_none());
    assert!(
        host.session(&SessionId::from("plan"))
            .unwrap()
            .active_turn
            .is_some(),
        "the turn stays active"
    );
    let refused = host.command(&SessionId::from("plan"), &"c1".into()).unwrap();
    assert_eq!(
        refused.error_code,
        Some(ErrorCode::PlanSandboxUnavailable),
        "the refusal is audited"
    );
    // Agent commands need their sandbox too, under auto and, once a person
    // confirmed one, under ask.
    let turn = host
        .start_turn(&SessionId::from("auto"), Origin::Interactive)
        .unwrap()
        .turn_id;
    host.tool_calls(&SessionId::from("auto"), &turn, vec![bash("a1", &command)])
        .unwrap();
    assert_eq!(
        code(host.start_agent_command(
            &SessionId::from("auto"),
            &turn,
            &"a1".into(),
            &command,
            None,
            None
        )),
        ErrorCode::SandboxUnavailable
    );
    let turn = host
        .start_turn(&SessionId::from("ask"), Origin::Interactive)
        .unwrap()
        .turn_id;
    host.tool_calls(&SessionId::from("ask"), &turn, vec![bash("k1", &command)])
        .unwrap();
    host.confirm_tool(&SessionId::from("ask"), &turn, &"k1".into(), true)
        .unwrap();
    assert_eq!(
        code(host.start_agent_command(&SessionId::from("ask"), &turn, &"k1".into(), &command, None, None)),
        ErrorCode::SandboxUnavailable
    );
    host.complete_turn(&SessionId::from("ask"), &turn).unwrap();
    assert!(!marker.exists(), "nothing ran");
}

/// A canary directory outside every workspace with one file in it.
fn canary() -> tempfile::TempDir {
    let canary = tempfile::tempdir().unwrap();
    // Private, as the host user's own directories are: a root that follows
    // a link to it would pass every check but the link's.
    std::fs::set_permissions(canary.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::write(canary.path().join("keep"), "canary").unwrap();
    canary
}

fn assert_intact(canary: &tempfile::TempDir, what: &str) {
    let names: Vec<_> = std::fs::read_dir(canary.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("keep")], "{what}");
}

#[test]
fn with_the_database_in_the_workspace_scratch_is_outside_it_and_fresh_per_command() {
    let fixture = fixture_with(pi_layout, |options, _| options);
    let turn = fixture.plan_turn("s1");
    fixture.run_plan(
        "s1",
        &turn,
        vec![bash("c1", "echo \"$TMPDIR\""), bash("c2", "echo \"$TMPDIR\"")],
    );
    if !fixture.sandboxed() {
        return;
    }
    let first = text(&fixture.wait_exited("c1"), "stdout");
    let second = text(&fixture.wait_exited("c2"), "stdout");
    let database_dir = fixture.db.parent().unwrap();
    for tmpdir in [&first, &second] {
        let tmpdir = Path::new(tmpdir.trim_end());
        assert!(tmpdir.is_absolute(), "{}", tmpdir.display());
        assert!(!tmpdir.starts_with(&fixture.workspace), "{}", tmpdir.display());
        assert!(!tmpdir.starts_with(database_dir), "{}", tmpdir.display());
    }
    assert_ne!(first, second, "each command gets a fresh directory");
}

#[test]
fn a_symlinked_scratch_root_is_refused_and_never_swept() {
    // A command of an earlier host replaced the scratch root with a link to
    // a directory it wants emptied; the next host must not follow it.
    let canary = canary();
    let link = canary.path().with_extension("root-link");
    std::os::unix::fs::symlink(canary.path(), &link).unwrap();
    let fixture = fixture_with(pi_layout, |options, _| HostOptions {
        scratch_root: Some(link.clone()),
        ..options
    });
    assert_intact(&canary, "the startup sweep followed the link");
    let capabilities = fixture.host.command_capabilities();
    assert_eq!(
        capabilities.plan_sandbox,
        PlanSandbox::Unavailable,
        "a symlinked scratch root was accepted"
    );
    let reason = capabilities.reason.unwrap();
    assert!(reason.contains("scratch root"), "{reason}");
    let turn = fixture.plan_turn("s1");
    let outcomes = fixture.run_plan("s1", &turn, vec![bash("c1", "echo hi")]);
    assert_eq!(
        verdict(&outcomes[0]),
        Verdict::Deny(ErrorCode::PlanSandboxUnavailable)
    );
    fixture.host.complete_turn(&SessionId::from("s1"), &turn).unwrap();
    std::fs::remove_file(&link).unwrap();
    assert_intact(&canary, "after the host");
}

#[test]
fn a_scratch_root_inside_the_workspace_is_refused_for_sandboxed_commands() {
    let fixture = fixture_with(pi_layout, |options, workspace| HostOptions {
        scratch_root: Some(workspace.join(".scratch")),
        ..options
    });
    let turn = fixture.plan_turn("s1");
    let outcomes = fixture.run_plan("s1", &turn, vec![bash("c1", "echo hi")]);
    if !fixture.sandboxed() {
        return;
    }
    let run = outcomes[0].command.clone().unwrap();
    assert_eq!(run.state, CommandState::FailedToStart);
    assert_eq!(run.error_code, Some(ErrorCode::PlanSandboxUnavailable));
}

#[test]
fn an_auto_command_cannot_swap_another_sessions_plan_scratch() {
    let fixture = fixture_with(pi_layout, |options, _| options);
    let canary = canary();
    let plan_turn = fixture.plan_turn("plan");
    // The Plan command says where its scratch is, then waits for `go` in the
    // workspace (its scratch directory is a private tmpfs where namespaces
    // are in use) and writes through whatever its TMPDIR path leads to by
    // then.
    fixture.run_plan(
        "plan",
        &plan_turn,
        vec![bash(
            "p1",
            "echo \"$TMPDIR\"; while [ ! -e go ]; do sleep 0.02; done; echo x > \"$TMPDIR/after\"; echo rc=$?",
        )],
    );
    if !fixture.sandboxed() {
        return;
    }
    let tmpdir = fixture.first_line("p1");
    let turn = fixture.auto_turn("auto");
    let attack = format!(
        "mv '{t}' '{t}.away' && ln -s '{c}' '{t}'; echo mv=$?",
        t = tmpdir.display(),
        c = canary.path().display()
    );
    fixture
        .host
        .tool_calls(&SessionId::from("auto"), &turn, vec![bash("a1", &attack)])
        .unwrap();
    fixture
        .host
        .start_agent_command(&SessionId::from("auto"), &turn, &"a1".into(), &attack, None, None)
        .unwrap();
    let auto = fixture.wait_exited("a1");
    assert!(text(&auto, "stdout").contains("mv=1"), "{:?}", auto.output);
    // The test lets the Plan command go on, in its own directory.
    std::fs::write(fixture.workspace.join("go"), "").unwrap();
    let plan = fixture.wait_exited("p1");
    assert!(text(&plan, "stdout").contains("rc=0"), "{:?}", plan.output);
    assert_intact(&canary, "the Plan command wrote through a swapped scratch");
}

#[test]
fn a_command_longer_than_the_kernel_accepts_is_invalid_input_before_anything_runs() {
    let fixture = Fixture::new();
    let turn = fixture.plan_turn("s1");
    let marker = fixture.workspace.join("ran");
    let long = format!("touch '{}' #{}", marker.display(), "x".repeat(128 * 1024));
    let outcomes = fixture.run_plan("s1", &turn, vec![bash("c1", &long)]);
    assert_eq!(
        verdict(&outcomes[0]),
        Verdict::Deny(ErrorCode::InvalidCommandInput)
    );
    assert!(outcomes[0].command.is_none());
    let entries = fixture.entries("s1", "c1");
    assert!(
        entries
            .iter()
            .all(|(kind, _, _)| *kind == CommandEntryKind::Refused),
        "nothing was started: {entries:?}"
    );
    assert!(!marker.exists());
}

#[test]
fn commands_keep_path_and_home_and_lose_what_the_secret_rule_names() {
    let fixture = fixture_with(pi_layout, |options, _| HostOptions {
        command_env_secret_markers: vec!["HOME".to_owned()],
        ..options
    });
    let turn = fixture.plan_turn("s1");
    fixture.run_plan(
        "s1",
        &turn,
        vec![bash(
            "c1",
            "echo \"$PATH\"; echo \"${HOME-unset}\"; echo \"${USER-unset}\"",
        )],
    );
    if !fixture.sandboxed() {
        return;
    }
    let seen = fixture.wait_exited("c1");
    let lines: Vec<String> = text(&seen, "stdout").lines().map(str::to_owned).collect();
    assert_eq!(
        lines[0],
        std::env::var("PATH").unwrap(),
        "the host's PATH is kept"
    );
    assert_eq!(lines[1], "unset", "the configured rule drops HOME");
    assert_eq!(
        lines[2],
        std::env::var("USER").unwrap_or_else(|_| "unset".to_owned()),
        "the rest of the host's environment is kept"
    );
}

#[test]
fn a_cwd_leaving_the_workspace_through_a_symlink_is_denied_in_the_answer() {
    let fixture = Fixture::new();
    let canary = canary();
    std::os::unix::fs::symlink(canary.path(), fixture.workspace.join("link-out")).unwrap();
    std::fs::create_dir(fixture.workspace.join("src")).unwrap();
    let turn = fixture.plan_turn("s1");
    let outcomes = fixture.run_plan(
        "s1",
        &turn,
        vec![
            call("c1", "Bash", json!({"command": "pwd", "cwd": "link-out"})),
            call("c2", "Bash", json!({"command": "pwd", "cwd": "src"})),
        ],
    );
    assert_eq!(verdict(&outcomes[0]), Verdict::Deny(ErrorCode::CommandCwdEscape));
    assert!(outcomes[0].command.is_none());
    if fixture.sandboxed() {
        assert_eq!(verdict(&outcomes[1]), Verdict::Allow);
        let seen = fixture.wait_exited("c2");
        assert_eq!(
            text(&seen, "stdout").trim_end(),
            fixture.workspace.join("src").to_str().unwrap()
        );
    }
    assert_intact(&canary, "a command ran in the symlinked cwd");
}

impl Fixture {
    /// Waits for the first output line of `call_id`, woken by each
    /// notification.
    fn first_line(&self, call_id: &str) -> PathBuf {
        wait_for(
            &self.host,
            &self.seen,
            &format!("a line from {call_id}"),
            |seen| {
                let printed: String = seen
                    .iter()
                    .filter_map(|notification| match notification {
                        HostEvent::CommandOutput {
                            call_id: id, chunk, ..
                        } if id == call_id => Some(chunk.clone()),
                        _ => None,
                    })
                    .collect();
                printed.split_once('\n').map(|(line, _)| PathBuf::from(line))
            },
        )
    }
}

#[test]
fn an_end_that_cannot_be_written_is_retried_and_nothing_starts_meanwhile() {
    let fixture = Fixture::new();
    let turn = fixture.plan_turn("s1");
    fixture.run_plan(
        "s1",
        &turn,
        vec![bash(
            "c1",
            "echo \"$TMPDIR\"; while [ ! -e go ]; do sleep 0.02; done; echo done",
        )],
    );
    if !fixture.sandboxed() {
        return;
    }
    fixture.first_line("c1");
    // The test holds the database's write lock (as a Plan command holding a
    // lock on the database would), then lets the command end.
    let blocker = rusqlite::Connection::open(&fixture.db).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    std::fs::write(fixture.workspace.join("go"), "").unwrap();
    // The host says, once its attempt failed, that one end is unwritten. No
    // notification marks a failed write (that is the point), so this one
    // wait polls the host's own count, bounded for liveness.
    let deadline = Instant::now() + Duration::from_secs(60);
    while fixture.host.unrecorded_command_ends().unwrap() == 0 {
        assert!(Instant::now() < deadline, "the end was never attempted");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        fixture
            .host
            .command(&SessionId::from("s1"), &"c1".into())
            .unwrap()
            .state,
        CommandState::Exited
    );
    // Nothing starts while an end is unwritten.
    let refused = fixture
        .host
        .tool_calls(&SessionId::from("s1"), &turn, vec![bash("c2", "echo no")])
        .unwrap_err();
    assert_eq!(refused.code(), ErrorCode::StorageFailed);
    // The lock goes; the end is written and announced, never dropped.
    blocker.execute_batch("ROLLBACK").unwrap();
    let seen = fixture.wait_exited("c1");
    assert_eq!(seen.exited.state, CommandState::Exited);
    let entries = fixture.entries("s1", "c1");
    assert_eq!(
        entries
            .iter()
            .map(|(kind, run, _)| (*kind, run.state))
            .collect::<Vec<_>>(),
        [
            (CommandEntryKind::Started, CommandState::Running),
            (CommandEntryKind::Ended, CommandState::Exited)
        ]
    );
    assert_eq!(fixture.host.unrecorded_command_ends().unwrap(), 0);
    // And commands start again.
    let outcomes = fixture.run_plan("s1", &turn, vec![bash("c3", "echo again")]);
    assert_eq!(verdict(&outcomes[0]), Verdict::Allow);
    assert_eq!(text(&fixture.wait_exited("c3"), "stdout"), "again\n");
}

#[test]
fn an_auto_command_cannot_prepare_the_scratch_of_the_next_one() {
    // Issue item 1: an `auto` command swaps its TMPDIR for a link; the next
    // `auto` command of the turn must not write through it.
    let fixture = fixture_with(pi_layout, |options, _| options);
    let canary = canary();
    fixture
        .host
        .create_session(NewSession {
            session_id: Some("auto".into()),
            workspace_root: Some(fixture.root()),
            mode: Some(Mode::Agent),
            permission_mode: Some(PermissionMode::Auto),
        })
        .unwrap();
    let session = SessionId::from("auto");
    let turn = fixture
        .host
        .start_turn(&session, Origin::Interactive)
        .unwrap()
        .turn_id;
    let prepare = format!(
        "mv \"$TMPDIR\" \"$TMPDIR.away\" && ln -s '{}' \"$TMPDIR\"; echo mv=$?",
        canary.path().display()
    );
    let write = "echo x > \"$TMPDIR/escaped\"; echo rc=$?; echo \"$TMPDIR\"";
    fixture
        .host
        .tool_calls(&session, &turn, vec![bash("a1", &prepare), bash("a2", write)])
        .unwrap();
    if !fixture.sandboxed() {
        return;
    }
    fixture
        .host
        .start_agent_command(&session, &turn, &"a1".into(), &prepare, None, None)
        .unwrap();
    let first = fixture.wait_exited("a1");
    assert!(text(&first, "stdout").contains("mv=1"), "{:?}", first.output);
    fixture
        .host
        .start_agent_command(&session, &turn, &"a2".into(), write, None, None)
        .unwrap();
    let second = fixture.wait_exited("a2");
    assert!(text(&second, "stdout").contains("rc=0"), "{:?}", second.output);
    assert_intact(&canary, "the second command wrote through the first one's link");
}

#[test]
fn a_helper_replaced_after_the_host_opened_it_never_runs() {
    // Issue item 4: the helper lives where a command can replace it (a
    // build directory in the workspace); later commands must still run the
    // file the host checked at open.
    let bundled = plan_exec::Runner::beside_current_exe().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let helper = bin.path().join(plan_exec::HELPER_NAME);
    copy_executable(bundled.helper(), &helper);
    let fixture = fixture_with(pi_layout, |options, _| HostOptions {
        sandbox_helper: Some(helper.clone()),
        ..options
    });
    let canary = bin.path().join("replacement-ran");
    let replacement = bin.path().join("replacement");
    std::fs::write(&replacement, format!("#!/bin/sh\ntouch '{}'\n", canary.display())).unwrap();
    std::fs::set_permissions(&replacement, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::rename(&replacement, &helper).unwrap();
    // An empty directory outside the workspace the command must not write.
    let outside = tempfile::tempdir().unwrap();
    let turn = fixture.plan_turn("s1");
    let command = format!(
        "echo confined; echo x > '{}/written'; echo rc=$?",
        outside.path().display()
    );
    fixture.run_plan("s1", &turn, vec![bash("c1", &command)]);
    if !fixture.sandboxed() {
        return;
    }
    let seen = fixture.wait_exited("c1");
    assert!(!canary.exists(), "the file put at the helper's path ran");
    let stdout = text(&seen, "stdout");
    assert!(
        stdout.starts_with("confined\n") && stdout.contains("rc=1"),
        "{stdout}"
    );
    assert!(!outside.path().join("written").exists());
    let audit = fixture.entries("s1", "c1");
    assert_eq!(audit.last().unwrap().1.sandbox, Sandbox::ReadOnly);
}

/// Copies an executable with `cp`, in a process of its own: a copy written
/// by this test process would hold a write descriptor that a child forked
/// meanwhile by another test thread keeps until its own exec, and running
/// the copy then fails with ETXTBSY ("Text file busy").
fn copy_executable(from: &std::path::Path, to: &std::path::Path) {
    let status = std::process::Command::new("cp")
        .arg("--")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cp {} {}: {status}",
        from.display(),
        to.display()
    );
}
