//! Integration tests of the typed `Host` API, its events and the host's
//! expiry timer. The wire over it (plan-server's `Connection`) is tested in
//! plan-server.
//!
//! Time comes from a `ManualClock`, so deadlines are crossed by moving the
//! clock, never by sleeping; only the timer tests run the host's timer
//! thread, and they wait for conditions with generous bounds instead of
//! asserting on speed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::wildcard_enum_match_arm
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use plan_core::{
    ActiveTurn, ApprovalStatus, ConfigChange, ErrorCode, ExecutionState, Limits, Mode, Origin,
    PermissionMode, PlanApproval, SessionState, ToolCall, TurnKind,
};
use plan_host::{
    ApprovalFilter, ApprovalId, ExecutionId, ExpiryTimer, Host, HostEvent, HostOptions, ManualClock,
    NewSession, SessionId, ToolCallResult, TurnId, default_catalog,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

#[path = "host/calls.rs"]
mod calls;
#[path = "host/collector.rs"]
mod collector;
#[path = "host/commands.rs"]
mod commands;
#[path = "host/config.rs"]
mod config;
#[path = "host/export.rs"]
mod export;
#[path = "host/permissions.rs"]
mod permissions;
#[path = "host/runs_later.rs"]
mod runs_later;
#[path = "host/sandbox.rs"]
mod sandbox;

use calls::{Verdict, approval_of, code, submit, verdict};

const T0: i64 = 1_800_000_000_000;
const TTL: i64 = 60_000;
const MARKDOWN_LIMIT: usize = 4096;
const MARKDOWN: &str =
    "# Plan ✓\r\n\r\n1. Read the parser — ünïcödé 计划\r\n2. Split it\n\tend without newline";

// Compile-time: the host and what embedders share across threads are Send + Sync.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Host>();
};

/// A temporary workspace and database with a host on a manual clock.
struct Fixture {
    _dir: tempfile::TempDir,
    workspace: PathBuf,
    db: PathBuf,
    clock: Arc<ManualClock>,
    host: Arc<Host>,
    seen: Arc<Mutex<Vec<HostEvent>>>,
}

/// A manual clock and no timer thread: these tests cross deadlines by moving
/// the clock and expire explicitly, so no other thread may act meanwhile.
/// The `timer` tests run the automatic timer.
fn options(clock: &Arc<ManualClock>) -> HostOptions {
    HostOptions {
        limits: Limits::new(TTL, MARKDOWN_LIMIT).unwrap(),
        clock: Arc::clone(clock) as Arc<dyn plan_host::Clock>,
        shells: default_catalog(),
        expiry: ExpiryTimer::Manual,
        ..HostOptions::default()
    }
}

/// A fixture whose database is at `database(workspace)` (the pi package's
/// layout puts it inside the workspace) and whose options `tweak` changes.
fn fixture_with(
    database: impl Fn(&Path) -> PathBuf,
    tweak: impl FnOnce(HostOptions, &Path) -> HostOptions,
) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    let db = database(&workspace);
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let host = Arc::new(Host::open(&db, tweak(options(&clock), &workspace)).unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    listen(&host, &seen);
    Fixture {
        _dir: dir,
        workspace,
        db,
        clock,
        host,
        seen,
    }
}

fn pi_layout(workspace: &Path) -> PathBuf {
    workspace.join(".pi/plan/plan.db")
}

impl Fixture {
    fn new() -> Fixture {
        fixture_with(
            |workspace| workspace.parent().unwrap().join("plan.db"),
            |options, _| options,
        )
    }

    /// Closes the host and opens a new one on the same database (a restart).
    fn restart(&mut self) {
        self.host.close();
        self.host = Arc::new(Host::open(&self.db, options(&self.clock)).unwrap());
        self.seen = Arc::new(Mutex::new(Vec::new()));
        listen(&self.host, &self.seen);
    }

    fn root(&self) -> String {
        self.workspace.to_str().unwrap().to_owned()
    }

    fn session(&self, id: &str, mode: Mode) -> SessionState {
        self.host
            .create_session(NewSession {
                session_id: Some(id.into()),
                workspace_root: Some(self.root()),
                mode: Some(mode),
                permission_mode: None,
            })
            .unwrap()
    }

    /// Starts an interactive turn in session `id` and sends `calls` as its
    /// first batch; returns the turn and the outcomes.
    fn batch_in_new_turn(&self, id: &str, calls: Vec<ToolCall>) -> (ActiveTurn, Vec<ToolCallResult>) {
        let turn = self
            .host
            .start_turn(&SessionId::from(id), Origin::Interactive)
            .unwrap();
        let outcomes = self
            .host
            .tool_calls(&SessionId::from(id), &turn.turn_id, calls)
            .unwrap();
        (turn, outcomes)
    }

    /// A Plan session with a pending approval; returns the approval and the Plan turn id.
    fn pending(&self, id: &str) -> (PlanApproval, TurnId) {
        self.session(id, Mode::Plan);
        let (turn, outcomes) = self.batch_in_new_turn(id, vec![submit("c1", MARKDOWN)]);
        (approval_of(&outcomes), turn.turn_id)
    }

    /// A session whose approved execution is queued; returns the execution id.
    fn queued(&self, id: &str, mode: PermissionMode) -> (PlanApproval, ExecutionId) {
        let (approval, _) = self.pending(id);
        let (approved, _) = self.host.approve(&approval.id, mode).unwrap();
        let execution = approved.execution_id.clone().unwrap();
        (approved, execution)
    }

    fn take_seen(&self) -> Vec<HostEvent> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }

    fn files(&self) -> Vec<String> {
        plan_storage::list_artifact_files(&self.root()).unwrap()
    }

    fn rows(&self) -> Vec<PlanApproval> {
        self.host
            .list_approvals(&ApprovalFilter::default())
            .unwrap()
            .into_iter()
            .map(|row| row.approval)
            .collect()
    }

    fn row(&self, id: &ApprovalId) -> PlanApproval {
        self.host.approval(id).unwrap().approval
    }
}

/// Waits until `found` finds what it looks for in the notifications `seen`
/// has recorded, woken by each new notification (the bound is liveness,
/// not speed). `seen` must be recorded by a listener added before this is
/// called: listeners run in order, so a wake-up finds its notification
/// already recorded.
fn wait_for<T>(
    host: &Host,
    seen: &Mutex<Vec<HostEvent>>,
    what: &str,
    mut found: impl FnMut(&[HostEvent]) -> Option<T>,
) -> T {
    let (wake, woken) = std::sync::mpsc::channel();
    let wake = Mutex::new(wake);
    host.add_listener(Arc::new(move |_| {
        let _ = wake.lock().unwrap().send(());
    }));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(value) = found(&seen.lock().unwrap()) {
            return value;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            woken.recv_timeout(left).is_ok(),
            "{what} did not come within 30 s"
        );
    }
}

fn listen(host: &Host, seen: &Arc<Mutex<Vec<HostEvent>>>) {
    let seen = Arc::clone(seen);
    host.add_listener(Arc::new(move |event| seen.lock().unwrap().push(event)));
}

fn call(id: &str, name: &str, input: Value) -> ToolCall {
    ToolCall {
        call_id: id.into(),
        name: name.to_owned(),
        input,
    }
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Which event each is, named as the protocol notification a client gets
/// for it (plan-server's tests hold the notifications themselves).
fn methods(seen: &[HostEvent]) -> Vec<&'static str> {
    seen.iter()
        .map(|event| match event {
            HostEvent::ApprovalRequested(_) => "plan/approvalRequested",
            HostEvent::ApprovalResolved(_) => "plan/approvalResolved",
            HostEvent::ExecutionStateChanged { .. } => "execution/stateChanged",
            HostEvent::SessionChanged(_) => "session/changed",
            HostEvent::CommandOutput { .. } => "command/output",
            HostEvent::CommandExited(_) => "command/exited",
        })
        .collect()
}

fn file_bytes(workspace: &Path, approval: &PlanApproval) -> Vec<u8> {
    std::fs::read(workspace.join(&approval.artifact.as_ref().unwrap().path)).unwrap()
}

mod lifecycle {
    use super::*;

    #[test]
    fn submit_approve_start_complete_with_exact_notifications() {
        let fx = Fixture::new();
        let created = fx.session("s1", Mode::Plan);
        assert!(created.is_idle());
        assert_eq!(created.session.mode, Mode::Plan);
        assert_eq!(created.session.permission_mode, PermissionMode::Ask);

        let turn = fx
            .host
            .start_turn(&SessionId::from("s1"), Origin::Interactive)
            .unwrap();
        assert_eq!(
            (turn.mode, turn.kind, turn.origin),
            (Mode::Plan, TurnKind::Prompt, Origin::Interactive)
        );

        // Plan-safe tools pass, everything else is denied, the turn stays active.
        let plan_tools: Vec<&str> = plan_core::plan_tools()
            .filter(|name| *name != plan_core::SUBMIT_PLAN)
            .collect();
        let mut batch: Vec<ToolCall> = plan_tools
            .iter()
            .map(|name| call(name, name, json!({})))
            .collect();
        for name in ["Write", "Edit", "mcp__plugin__tool", "read", "Unknown"] {
            batch.push(call(name, name, json!({})));
        }
        let outcomes = fx
            .host
            .tool_calls(&SessionId::from("s1"), &turn.turn_id, batch)
            .unwrap();
        for outcome in &outcomes {
            let expected = if outcome.call_id == "Bash" {
                // Plan-mode Bash is run by the host; `{}` is no command.
                Verdict::Deny(ErrorCode::InvalidCommandInput)
            } else if plan_tools.contains(&outcome.call_id.as_str()) {
                Verdict::Allow
            } else {
                Verdict::Deny(ErrorCode::ToolDeniedInPlan)
            };
            assert_eq!(verdict(outcome), expected, "{}", outcome.call_id);
            assert!(outcome.approval.is_none());
        }
        assert_eq!(outcomes.len(), plan_tools.len() + 5);

        let outcomes = fx
            .host
            .tool_calls(
                &SessionId::from("s1"),
                &turn.turn_id,
                vec![submit("c1", MARKDOWN)],
            )
            .unwrap();
        let approval = approval_of(&outcomes);
        assert_eq!(approval.status, ApprovalStatus::Pending);
        assert_eq!(approval.turn_id, turn.turn_id);
        assert_eq!(approval.title, "Split the parser");
        assert_eq!(approval.question, "Go ahead?");
        assert_eq!(approval.created_at, T0);
        assert_eq!(approval.expires_at, T0 + TTL);
        assert_eq!(
            (
                approval.decided_at,
                approval.permission_mode,
                approval.execution_state
            ),
            (None, None, None)
        );
        let artifact = approval.artifact.clone().unwrap();
        assert!(
            artifact.path.starts_with(".pi/plan/") && artifact.path.ends_with(".md"),
            "{}",
            artifact.path
        );
        assert_eq!(file_bytes(&fx.workspace, &approval), MARKDOWN.as_bytes());
        assert_eq!(artifact.sha256, sha256(MARKDOWN.as_bytes()));
        assert_eq!(artifact.size, MARKDOWN.len() as u64);
        assert_eq!(fx.row(&approval.id), approval);
        let read = fx.host.read_artifact(&approval.id).unwrap();
        assert_eq!(read.markdown, MARKDOWN);
        assert_eq!((read.sha256, read.size), (artifact.sha256.clone(), artifact.size));
        let state = fx.host.session(&SessionId::from("s1")).unwrap();
        assert_eq!(
            state.pending_approval.as_ref().map(|row| row.id.clone()),
            Some(approval.id.clone())
        );

        let (approved, state) = fx
            .host
            .approve(&approval.id, PermissionMode::AcceptEdits)
            .unwrap();
        assert_eq!(approved.status, ApprovalStatus::Approved);
        assert_eq!(approved.decided_at, Some(T0));
        assert_eq!(approved.permission_mode, Some(PermissionMode::AcceptEdits));
        assert_eq!(approved.execution_state, Some(ExecutionState::Queued));
        assert_eq!(approved.error_code, None);
        let execution = approved.execution_id.clone().unwrap();
        assert_eq!(state.session.mode, Mode::Agent);
        assert_eq!(state.session.permission_mode, PermissionMode::AcceptEdits);
        let exec_turn = state.active_turn.clone().unwrap();
        assert_eq!(
            (exec_turn.kind, exec_turn.mode),
            (TurnKind::Execution, Mode::Agent)
        );
        assert_eq!(fx.row(&approval.id), approved);

        // Execution complete before start is refused.
        assert_eq!(
            code(fx.host.complete_execution(&execution)),
            ErrorCode::ExecutionNotActive
        );
        let running = fx.host.start_execution(&execution).unwrap();
        assert_eq!(running.execution_state, Some(ExecutionState::Running));
        assert_eq!(
            code(fx.host.start_execution(&execution)),
            ErrorCode::ExecutionNotActive
        );
        let completed = fx.host.complete_execution(&execution).unwrap();
        assert_eq!(completed.execution_state, Some(ExecutionState::Completed));
        assert_eq!(completed.status, ApprovalStatus::Approved);
        assert_eq!(
            code(fx.host.complete_execution(&execution)),
            ErrorCode::ExecutionNotActive
        );
        assert_eq!(
            code(fx.host.start_execution(&execution)),
            ErrorCode::ExecutionNotActive
        );
        assert_eq!(
            code(fx.host.start_execution(&ExecutionId::from("execution-nope"))),
            ErrorCode::ExecutionNotFound
        );

        let state = fx.host.session(&SessionId::from("s1")).unwrap();
        assert!(state.is_idle());
        assert_eq!(state.session.mode, Mode::Agent);
        assert_eq!(fx.row(&approval.id), completed);
        assert_eq!(fx.files(), vec![artifact.path.clone()]);

        let seen = fx.take_seen();
        assert_eq!(
            methods(&seen),
            [
                "session/changed",        // turn started
                "plan/approvalRequested", // SubmitPlan accepted
                "session/changed",        // pendingApprovalId
                "plan/approvalResolved",  // approved
                "execution/stateChanged", // queued
                "session/changed",        // agent, execution turn
                "execution/stateChanged", // running
                "execution/stateChanged", // completed
                "session/changed",        // idle
            ]
        );
        let states: Vec<_> = seen
            .iter()
            .filter_map(|n| match n {
                HostEvent::ExecutionStateChanged {
                    session_id,
                    execution_id,
                    state,
                } => {
                    assert_eq!(
                        (session_id.as_str(), execution_id.as_str()),
                        ("s1", execution.as_str())
                    );
                    Some(state.to_string())
                }
                _ => None,
            })
            .collect();
        assert_eq!(states, ["queued", "running", "completed"]);
        match (&seen[1], &seen[3]) {
            (HostEvent::ApprovalRequested(requested), HostEvent::ApprovalResolved(resolved)) => {
                assert_eq!(*requested, approval);
                assert_eq!(*resolved, approved);
            }
            other => panic!("unexpected {other:?}"),
        }
        match seen.last().unwrap() {
            HostEvent::SessionChanged(changed) => {
                assert_eq!(changed.active_turn, None);
                assert_eq!(changed.live_execution, None);
                assert_eq!(changed.session.mode.to_string(), "agent");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn approve_with_each_permission_mode() {
        let fx = Fixture::new();
        for (index, mode) in PermissionMode::ALL.iter().enumerate() {
            let id = format!("s{index}");
            let (approval, _) = fx.pending(&id);
            // No mode: refused, nothing changes.
            assert_eq!(
                code(fx.host.approve_relayed(&approval.id, None)),
                ErrorCode::PermissionModeRequired
            );
            assert_eq!(fx.row(&approval.id), approval);
            assert_eq!(
                fx.host.session(&SessionId::from(&id)).unwrap().session.mode,
                Mode::Plan
            );
            let (approved, state) = fx.host.approve(&approval.id, *mode).unwrap();
            assert_eq!(approved.permission_mode, Some(*mode));
            assert_eq!(approved.execution_state, Some(ExecutionState::Queued));
            assert_eq!(state.session.permission_mode, *mode);
            assert_eq!(state.session.mode, Mode::Agent);
            assert_eq!(
                fx.host
                    .session(&SessionId::from(&id))
                    .unwrap()
                    .session
                    .permission_mode,
                *mode
            );
            assert_eq!(
                code(fx.host.approve(&approval.id, *mode)),
                ErrorCode::ApprovalNotPending
            );
        }
        assert_eq!(
            code(
                fx.host
                    .approve(&ApprovalId::from("approval-nope"), PermissionMode::Ask)
            ),
            ErrorCode::ApprovalNotFound
        );
    }

    #[test]
    fn reject_is_terminal_and_grants_nothing() {
        let fx = Fixture::new();
        let (approval, _) = fx.pending("s1");
        fx.take_seen();
        let (rejected, state) = fx.host.reject(&approval.id).unwrap();
        assert_eq!(rejected.status, ApprovalStatus::Rejected);
        assert_eq!(rejected.decided_at, Some(T0));
        assert_eq!(
            (
                rejected.permission_mode,
                rejected.execution_id.clone(),
                rejected.execution_state
            ),
            (None, None, None)
        );
        assert_eq!(rejected.error_code, None);
        assert!(state.is_idle());
        assert_eq!(state.session.mode, Mode::Plan);
        assert_eq!(state.session.permission_mode, PermissionMode::Ask);
        assert_eq!(
            methods(&fx.take_seen()),
            ["plan/approvalResolved", "session/changed"]
        );
        assert_eq!(
            code(fx.host.approve(&approval.id, PermissionMode::Auto)),
            ErrorCode::ApprovalNotPending
        );
        assert_eq!(code(fx.host.reject(&approval.id)), ErrorCode::ApprovalNotPending);
        assert_eq!(fx.row(&approval.id), rejected);
        // A revision is a new turn and a new artifact.
        let turn = fx
            .host
            .start_turn(&SessionId::from("s1"), Origin::Interactive)
            .unwrap();
        let second = approval_of(
            &fx.host
                .tool_calls(
                    &SessionId::from("s1"),
                    &turn.turn_id,
                    vec![submit("c2", "# v2\n")],
                )
                .unwrap(),
        );
        assert_ne!(second.id, approval.id);
        assert_eq!(fx.files().len(), 2);
        assert_eq!(file_bytes(&fx.workspace, &approval), MARKDOWN.as_bytes());
    }

    #[test]
    fn cancel_interrupts_a_queued_execution() {
        let fx = Fixture::new();
        let (approved, execution) = fx.queued("s1", PermissionMode::Auto);
        let state = fx.host.cancel_turn(&SessionId::from("s1")).unwrap();
        assert!(state.is_idle());
        assert_eq!(state.session.mode, Mode::Agent);
        let row = fx.row(&approved.id);
        assert_eq!(row.execution_state, Some(ExecutionState::Interrupted));
        assert_eq!(row.error_code, Some(ErrorCode::ExecutionCancelled));
        assert_eq!(
            code(fx.host.start_execution(&execution)),
            ErrorCode::ExecutionNotActive
        );
        assert_eq!(
            code(fx.host.cancel_turn(&SessionId::from("s1"))),
            ErrorCode::TurnNotActive
        );
    }

    #[test]
    fn prompt_turns_complete_and_agent_tools_follow_the_permission_table() {
        let fx = Fixture::new();
        fx.session("s1", Mode::Agent);
        let turn = fx
            .host
            .start_turn(&SessionId::from("s1"), Origin::Scheduled)
            .unwrap();
        assert_eq!(turn.mode, Mode::Agent);
        let outcomes = fx
            .host
            .tool_calls(
                &SessionId::from("s1"),
                &turn.turn_id,
                vec![call("w", "Write", json!({})), call("r", "Read", json!({}))],
            )
            .unwrap();
        // A scheduled turn under `ask`: nobody can confirm the write.
        assert_eq!(
            verdict(&outcomes[0]),
            Verdict::Deny(ErrorCode::PermissionRequiresInteractiveSession)
        );
        assert_eq!(verdict(&outcomes[1]), Verdict::Allow);
        assert_eq!(
            code(
                fx.host
                    .complete_turn(&SessionId::from("s1"), &TurnId::from("turn-other"))
            ),
            ErrorCode::TurnNotActive
        );
        assert!(
            fx.host
                .complete_turn(&SessionId::from("s1"), &turn.turn_id)
                .unwrap()
                .is_idle()
        );
        assert_eq!(
            code(fx.host.session(&SessionId::from("nope"))),
            ErrorCode::SessionNotFound
        );
        assert_eq!(
            code(fx.host.start_turn(&SessionId::from("nope"), Origin::Interactive)),
            ErrorCode::SessionNotFound
        );
    }
}

mod submit_plan {
    use super::*;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A clock that runs an action once, on a chosen reading: a way to make
    /// another call land between two stages of one host operation.
    struct InterleavingClock {
        readings: AtomicUsize,
        trigger_at: AtomicUsize,
        action: OnceLock<Box<dyn Fn() + Send + Sync>>,
    }

    impl plan_host::Clock for InterleavingClock {
        fn now_ms(&self) -> i64 {
            let reading = self.readings.fetch_add(1, Ordering::SeqCst) + 1;
            if reading == self.trigger_at.load(Ordering::SeqCst)
                && let Some(action) = self.action.get()
            {
                action();
            }
            T0
        }
    }

    #[test]
    fn a_submission_overtaken_while_its_file_is_written_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().canonicalize().unwrap().join("workspace");
        std::fs::create_dir(&workspace).unwrap();
        let root = workspace.to_str().unwrap().to_owned();
        let clock = Arc::new(InterleavingClock {
            readings: AtomicUsize::new(0),
            trigger_at: AtomicUsize::new(usize::MAX),
            action: OnceLock::new(),
        });
        // No timer thread: it would read the clock and trigger the action.
        let options = HostOptions {
            clock: Arc::clone(&clock) as Arc<dyn plan_host::Clock>,
            expiry: ExpiryTimer::Manual,
            ..HostOptions::default()
        };
        let host = Arc::new(Host::open(dir.path().join("plan.db"), options).unwrap());
        let session = NewSession {
            session_id: Some("s1".into()),
            workspace_root: Some(root.clone()),
            mode: Some(Mode::Plan),
            permission_mode: None,
        };
        host.create_session(session).unwrap();
        let turn = host
            .start_turn(&SessionId::from("s1"), Origin::Interactive)
            .unwrap();
        let canceller = Arc::clone(&host);
        assert!(
            clock
                .action
                .set(Box::new(move || {
                    canceller.cancel_turn(&SessionId::from("s1")).unwrap();
                }))
                .is_ok()
        );
        // tool_calls reads the clock to decide the batch, to name the file,
        // then to record the approval: cancelling at the third reading is a
        // person pressing Stop while the artifact is being written.
        clock
            .trigger_at
            .store(clock.readings.load(Ordering::SeqCst) + 3, Ordering::SeqCst);

        let result = host.tool_calls(
            &SessionId::from("s1"),
            &turn.turn_id,
            vec![submit("c1", MARKDOWN)],
        );

        assert_eq!(code(result), ErrorCode::TurnNotActive);
        assert!(
            plan_storage::list_artifact_files(&root).unwrap().is_empty(),
            "the unrecorded artifact was removed"
        );
        assert!(
            host.list_approvals(&ApprovalFilter::default())
                .unwrap()
                .is_empty()
        );
        let state = host.session(&SessionId::from("s1")).unwrap();
        assert!(state.is_idle(), "the cancel took effect and nothing is pending");
    }

    #[test]
    fn refusals_create_nothing_and_keep_the_turn() {
        let fx = Fixture::new();
        fx.session("s1", Mode::Plan);
        let turn = fx
            .host
            .start_turn(&SessionId::from("s1"), Origin::Interactive)
            .unwrap();
        let t = turn.turn_id.as_str();

        // SubmitPlan with another call: the request fails whole.
        let batch = vec![call("r", "Read", json!({})), submit("c1", MARKDOWN)];
        assert_eq!(
            code(
                fx.host
                    .tool_calls(&SessionId::from("s1"), &TurnId::from(t), batch)
            ),
            ErrorCode::SubmitPlanNotAlone
        );
        let batch = vec![submit("c1", MARKDOWN), submit("c2", MARKDOWN)];
        assert_eq!(
            code(
                fx.host
                    .tool_calls(&SessionId::from("s1"), &TurnId::from(t), batch)
            ),
            ErrorCode::SubmitPlanNotAlone
        );

        let invalid = [
            json!({"title": "t", "markdown": "m"}),
            json!({"title": "t", "markdown": "m", "question": "q", "extra": 1}),
            json!({"title": "", "markdown": "m", "question": "q"}),
            json!({"title": "t", "markdown": "m", "question": "   "}),
            json!({"title": "t", "markdown": "", "question": "q"}),
            json!({"title": 1, "markdown": "m", "question": "q"}),
            json!({"title": "t", "markdown": "x".repeat(MARKDOWN_LIMIT + 1), "question": "q"}),
            json!("a string"),
            json!(null),
            // Control and bidi characters in a title or question: nothing
            // is written, no row, no file.
            json!({"title": "Split\u{1b}[2K", "markdown": "m", "question": "q"}),
            json!({"title": "Split\tthe parser", "markdown": "m", "question": "q"}),
            json!({"title": "t", "markdown": "m", "question": "Go?\u{9b}2J"}),
            json!({"title": "\u{202e}txt.exe", "markdown": "m", "question": "q"}),
        ];
        for input in invalid {
            let outcomes = fx
                .host
                .tool_calls(
                    &SessionId::from("s1"),
                    &TurnId::from(t),
                    vec![call("c", "SubmitPlan", input.clone())],
                )
                .unwrap();
            assert_eq!(
                verdict(&outcomes[0]),
                Verdict::Deny(ErrorCode::InvalidPlanInput),
                "{input}"
            );
            assert!(outcomes[0].approval.is_none());
        }
        // Exactly at the limit is accepted (after all the refusals, the turn is still active).
        assert!(fx.rows().is_empty());
        assert!(fx.files().is_empty());
        let state = fx.host.session(&SessionId::from("s1")).unwrap();
        assert_eq!(
            state.active_turn.as_ref().map(|turn| turn.turn_id.as_str()),
            Some(t)
        );
        let at_limit = "y".repeat(MARKDOWN_LIMIT);
        let approval = approval_of(
            &fx.host
                .tool_calls(
                    &SessionId::from("s1"),
                    &TurnId::from(t),
                    vec![submit("c", &at_limit)],
                )
                .unwrap(),
        );
        assert_eq!(approval.artifact.unwrap().size, MARKDOWN_LIMIT as u64);
    }

    #[test]
    fn not_active_outside_a_plan_turn_and_not_project_bound() {
        let fx = Fixture::new();
        fx.session("agent", Mode::Agent);
        let (_, outcomes) = fx.batch_in_new_turn("agent", vec![submit("c", MARKDOWN)]);
        assert_eq!(verdict(&outcomes[0]), Verdict::Deny(ErrorCode::PlanNotActive));
        // Without an active turn at all.
        fx.session("idle", Mode::Plan);
        assert_eq!(
            code(fx.host.tool_calls(
                &SessionId::from("idle"),
                &TurnId::from("turn-x"),
                vec![submit("c", MARKDOWN)]
            )),
            ErrorCode::TurnNotActive
        );

        fx.host
            .create_session(NewSession {
                session_id: Some("unbound".into()),
                workspace_root: None,
                mode: Some(Mode::Plan),
                permission_mode: None,
            })
            .unwrap();
        let (_, outcomes) = fx.batch_in_new_turn("unbound", vec![submit("c", MARKDOWN)]);
        assert_eq!(
            verdict(&outcomes[0]),
            Verdict::Deny(ErrorCode::SessionNotProjectBound)
        );
        assert!(fx.rows().is_empty());
        assert!(fx.files().is_empty());
        assert!(
            fx.host
                .session(&SessionId::from("unbound"))
                .unwrap()
                .active_turn
                .is_some()
        );
    }

    #[test]
    fn scheduled_plan_is_refused_before_anything_is_created() {
        let fx = Fixture::new();
        fx.session("s1", Mode::Plan);
        fx.take_seen();
        assert_eq!(
            code(fx.host.start_turn(&SessionId::from("s1"), Origin::Scheduled)),
            ErrorCode::PlanRequiresInteractiveSession
        );
        assert!(fx.host.session(&SessionId::from("s1")).unwrap().is_idle());
        assert!(fx.rows().is_empty());
        assert!(!fx.workspace.join(".pi").exists());
        assert!(fx.take_seen().is_empty());
        // Changed to Agent, the scheduled task runs.
        fx.host
            .configure_session(
                &SessionId::from("s1"),
                ConfigChange {
                    mode: Some(Mode::Agent),
                    ..ConfigChange::default()
                },
            )
            .unwrap();
        assert_eq!(
            fx.host
                .start_turn(&SessionId::from("s1"), Origin::Scheduled)
                .unwrap()
                .mode,
            Mode::Agent
        );
    }

    #[test]
    fn read_artifact_detects_missing_and_tampered_files() {
        let fx = Fixture::new();
        let (first, _) = fx.pending("s1");
        fx.host.reject(&first.id).unwrap();
        let turn = fx
            .host
            .start_turn(&SessionId::from("s1"), Origin::Interactive)
            .unwrap();
        let second = approval_of(
            &fx.host
                .tool_calls(
                    &SessionId::from("s1"),
                    &turn.turn_id,
                    vec![submit("c", "# second\n")],
                )
                .unwrap(),
        );

        let path = fx.workspace.join(&first.artifact.as_ref().unwrap().path);
        let mut tampered = MARKDOWN.as_bytes().to_vec();
        tampered[0] = b'!';
        std::fs::write(&path, &tampered).unwrap();
        assert_eq!(
            code(fx.host.read_artifact(&first.id)),
            ErrorCode::ArtifactIntegrityMismatch
        );
        std::fs::remove_file(&path).unwrap();
        assert_eq!(code(fx.host.read_artifact(&first.id)), ErrorCode::ArtifactMissing);
        assert_eq!(fx.host.read_artifact(&second.id).unwrap().markdown, "# second\n");
        assert_eq!(
            code(fx.host.read_artifact(&ApprovalId::from("approval-nope"))),
            ErrorCode::ApprovalNotFound
        );
    }

    /// Approving re-reads the artifact inside the decision: a rewritten or
    /// removed file refuses the approval with its code and changes nothing
    /// (no row, no session, no notification, no transcript entry), on the
    /// plain and the noted path; Reject stays possible.
    #[test]
    fn approving_rechecks_the_artifact_and_changes_nothing_when_it_fails() {
        let fx = Fixture::new();
        let (approval, _) = fx.pending("s1");
        let path = fx.workspace.join(&approval.artifact.as_ref().unwrap().path);
        let session_before = fx.host.session(&SessionId::from("s1")).unwrap();
        fx.take_seen();
        let source = plan_host::DecisionSource {
            channel: plan_host::DecisionChannel::WebCard,
            remote_address: "127.0.0.1:1".to_owned(),
        };

        let mut tampered = MARKDOWN.as_bytes().to_vec();
        tampered[0] = b'!';
        std::fs::write(&path, &tampered).unwrap();
        assert_eq!(
            code(fx.host.approve(&approval.id, PermissionMode::Ask)),
            ErrorCode::ArtifactIntegrityMismatch
        );
        assert_eq!(
            code(
                fx.host
                    .approve_noted(&approval.id, Some(PermissionMode::Auto), &source)
            ),
            ErrorCode::ArtifactIntegrityMismatch
        );
        // Same size, one byte different: the hash alone catches it.
        assert_eq!(tampered.len() as u64, approval.artifact.as_ref().unwrap().size);

        std::fs::write(&path, [MARKDOWN.as_bytes(), b"\n- one more step"].concat()).unwrap();
        assert_eq!(
            code(fx.host.approve_relayed(&approval.id, Some(PermissionMode::Ask))),
            ErrorCode::ArtifactIntegrityMismatch
        );

        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            code(fx.host.approve(&approval.id, PermissionMode::Ask)),
            ErrorCode::ArtifactMissing
        );
        assert_eq!(
            code(
                fx.host
                    .approve_noted(&approval.id, Some(PermissionMode::Ask), &source)
            ),
            ErrorCode::ArtifactMissing
        );

        assert_eq!(fx.row(&approval.id), approval, "the row is unchanged");
        assert_eq!(fx.host.session(&SessionId::from("s1")).unwrap(), session_before);
        assert!(fx.take_seen().is_empty(), "a refused approval notifies nothing");
        assert!(
            fx.host
                .decision_entries(&SessionId::from("s1"))
                .unwrap()
                .is_empty()
        );

        let (rejected, _) = fx.host.reject_noted(&approval.id, &source).unwrap();
        assert_eq!(rejected.status, ApprovalStatus::Rejected);
        assert_eq!(fx.host.decision_entries(&SessionId::from("s1")).unwrap().len(), 1);
    }

    /// The file restored byte for byte approves again: the check compares
    /// the bytes, not the fact that the file was touched.
    #[test]
    fn approving_a_restored_artifact_succeeds() {
        let fx = Fixture::new();
        let (approval, _) = fx.pending("s1");
        let path = fx.workspace.join(&approval.artifact.as_ref().unwrap().path);
        std::fs::write(&path, b"rewritten").unwrap();
        assert_eq!(
            code(fx.host.approve(&approval.id, PermissionMode::Ask)),
            ErrorCode::ArtifactIntegrityMismatch
        );
        std::fs::write(&path, MARKDOWN).unwrap();
        let (approved, _) = fx.host.approve(&approval.id, PermissionMode::Ask).unwrap();
        assert_eq!(approved.status, ApprovalStatus::Approved);
    }
}

mod expiry {
    use super::*;

    #[test]
    fn lazy_expiry_on_session_access() {
        let fx = Fixture::new();
        let (approval, _) = fx.pending("s1");
        fx.take_seen();
        fx.clock.advance(TTL - 1);
        assert!(
            fx.host
                .session(&SessionId::from("s1"))
                .unwrap()
                .pending_approval
                .is_some()
        );
        assert!(fx.take_seen().is_empty());
        fx.clock.advance(1);
        let state = fx.host.session(&SessionId::from("s1")).unwrap();
        assert!(state.is_idle());
        assert_eq!(state.session.mode, Mode::Plan);
        let row = fx.row(&approval.id);
        assert_eq!(row.status, ApprovalStatus::Expired);
        assert_eq!(row.error_code, Some(ErrorCode::PlanApprovalTimeout));
        assert_eq!(row.decided_at, Some(approval.expires_at));
        assert_eq!(row.expires_at, approval.expires_at);
        let seen = fx.take_seen();
        assert_eq!(methods(&seen), ["plan/approvalResolved", "session/changed"]);
        match &seen[0] {
            HostEvent::ApprovalResolved(resolved) => {
                assert_eq!(resolved.status.to_string(), "expired");
                assert_eq!(resolved.error_code, Some(ErrorCode::PlanApprovalTimeout));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn lazy_expiry_on_plan_get_and_list() {
        let fx = Fixture::new();
        let (a, _) = fx.pending("s1");
        let (b, _) = fx.pending("s2");
        fx.clock.advance(TTL + 5);
        assert_eq!(
            fx.host.approval(&a.id).unwrap().approval.status,
            ApprovalStatus::Expired
        );
        let listed = fx
            .host
            .list_approvals(&ApprovalFilter {
                session_id: Some("s2".into()),
                ..ApprovalFilter::default()
            })
            .unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].approval.id, b.id);
        assert_eq!(listed[0].approval.status, ApprovalStatus::Expired);
        assert_eq!(listed[0].approval.decided_at, Some(b.expires_at));
    }

    #[test]
    fn expire_due_follows_next_deadline() {
        let fx = Fixture::new();
        assert_eq!(fx.host.next_deadline().unwrap(), None);
        let (a, _) = fx.pending("s1");
        fx.clock.advance(1000);
        let (b, _) = fx.pending("s2");
        assert_eq!(fx.host.next_deadline().unwrap(), Some(T0 + TTL));
        assert!(fx.host.expire_due().unwrap().is_empty());
        fx.clock.set(T0 + TTL);
        let expired = fx.host.expire_due().unwrap();
        assert_eq!(
            expired.iter().map(|row| row.id.as_str()).collect::<Vec<_>>(),
            [a.id.as_str()]
        );
        assert_eq!(expired[0].status, ApprovalStatus::Expired);
        assert_eq!(fx.host.next_deadline().unwrap(), Some(b.expires_at));
        assert_eq!(fx.row(&b.id).status, ApprovalStatus::Pending);
        fx.clock.set(b.expires_at + 10_000);
        let expired = fx.host.expire_due().unwrap();
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].decided_at, Some(b.expires_at));
        assert_eq!(fx.host.next_deadline().unwrap(), None);
        assert!(fx.host.expire_due().unwrap().is_empty());
        // A decided approval's deadline is not a deadline any more.
        let (c, _) = fx.pending("s3");
        fx.host.reject(&c.id).unwrap();
        assert_eq!(fx.host.next_deadline().unwrap(), None);
    }

    #[test]
    fn approve_or_reject_at_the_deadline_is_timeout_and_the_row_expires() {
        let fx = Fixture::new();
        let (a, _) = fx.pending("s1");
        let (c, _) = fx.pending("s3");
        fx.clock.advance(1000);
        let (b, _) = fx.pending("s2");
        fx.clock.set(a.expires_at - 1);
        assert!(fx.host.approve(&c.id, PermissionMode::Ask).is_ok());
        fx.take_seen();
        fx.clock.set(a.expires_at);
        assert_eq!(
            code(fx.host.approve(&a.id, PermissionMode::Auto)),
            ErrorCode::PlanApprovalTimeout
        );
        let row = fx.row(&a.id);
        assert_eq!(
            (row.status, row.error_code),
            (ApprovalStatus::Expired, Some(ErrorCode::PlanApprovalTimeout))
        );
        assert_eq!((row.permission_mode, row.execution_id), (None, None));
        assert_eq!(
            fx.host.session(&SessionId::from("s1")).unwrap().session.mode,
            Mode::Plan
        );
        // The expiry itself was committed and announced, even though approve failed.
        assert_eq!(
            methods(&fx.take_seen()),
            ["plan/approvalResolved", "session/changed"]
        );
        // Asking again after it expired is still a timeout, not "not pending".
        assert_eq!(
            code(fx.host.approve(&a.id, PermissionMode::Auto)),
            ErrorCode::PlanApprovalTimeout
        );
        fx.clock.set(b.expires_at);
        assert_eq!(code(fx.host.reject(&b.id)), ErrorCode::PlanApprovalTimeout);
        assert_eq!(fx.row(&b.id).status, ApprovalStatus::Expired);
        // Without a permission mode past the deadline: the deadline wins.
        let (d, _) = fx.pending("s4");
        fx.clock.set(d.expires_at + 1);
        assert_eq!(
            code(fx.host.approve_relayed(&d.id, None)),
            ErrorCode::PlanApprovalTimeout
        );
    }
}

mod timer {
    //! The host's own expiry timer: started by `Host::open` unless the
    //! embedder opts out, stopped by `close` and by dropping the host.
    //! Waits are bounded conditions (a channel with a generous timeout),
    //! never assertions on speed.

    use std::cell::RefCell;
    use std::sync::mpsc::{self, Receiver, Sender};

    use super::*;

    /// Longer than any wait these tests need, on any machine.
    const PATIENCE: Duration = Duration::from_secs(30);

    /// Sends once when the thread that owns it ends (thread-local
    /// destructors run as a thread exits).
    struct ExitSignal(Sender<()>);

    impl Drop for ExitSignal {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }

    thread_local! {
        static ON_EXIT: RefCell<Option<ExitSignal>> = const { RefCell::new(None) };
    }

    /// A Plan session with a pending approval on `host`.
    fn pending_on(host: &Host, workspace: &Path, id: &str) -> PlanApproval {
        host.create_session(NewSession {
            session_id: Some(id.into()),
            workspace_root: Some(workspace.to_str().unwrap().to_owned()),
            mode: Some(Mode::Plan),
            permission_mode: None,
        })
        .unwrap();
        let turn = host
            .start_turn(&SessionId::from(id), Origin::Interactive)
            .unwrap();
        approval_of(
            &host
                .tool_calls(&SessionId::from(id), &turn.turn_id, vec![submit("c", MARKDOWN)])
                .unwrap(),
        )
    }

    /// Registers a listener that reports every `plan/approvalResolved`
    /// delivered on the host's timer thread (`resolved`), and arranges for
    /// `exited` to hear when that thread ends. `then` runs on the timer
    /// thread after each report.
    fn watch_timer_thread(
        host: &Host,
        then: impl Fn() + Send + Sync + 'static,
    ) -> (Receiver<PlanApproval>, Receiver<()>) {
        let (resolved_tx, resolved) = mpsc::channel();
        let (exit_tx, exited) = mpsc::channel();
        let senders = Mutex::new((resolved_tx, exit_tx));
        host.add_listener(Arc::new(move |event| {
            let HostEvent::ApprovalResolved(resolved) = event else {
                return;
            };
            if std::thread::current().name() != Some("plan-expiry") {
                return;
            }
            let (resolved_tx, exit_tx) = &*senders.lock().unwrap();
            ON_EXIT.with(|slot| {
                slot.borrow_mut()
                    .get_or_insert_with(|| ExitSignal(exit_tx.clone()));
            });
            let _ = resolved_tx.send(resolved);
            then();
        }));
        (resolved, exited)
    }

    fn manual_clock_host(dir: &Path, clock: &Arc<ManualClock>, expiry: ExpiryTimer) -> Host {
        Host::open(
            dir.join("plan.db"),
            HostOptions {
                expiry,
                ..options(clock)
            },
        )
        .unwrap()
    }

    #[test]
    fn the_host_expires_on_time_without_a_driver() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().canonicalize().unwrap();
        // The system clock and the default options: nothing but the host's
        // own timer can expire this approval.
        let host = Host::open(
            dir.path().join("plan.db"),
            HostOptions {
                limits: Limits::new(200, MARKDOWN_LIMIT).unwrap(),
                ..HostOptions::default()
            },
        )
        .unwrap();
        let (sender, receiver) = mpsc::channel();
        let sender = Mutex::new(sender);
        host.add_listener(Arc::new(move |event| {
            let _ = sender.lock().unwrap().send(event);
        }));
        let approval = pending_on(&host, &workspace, "s1");
        let deadline = Instant::now() + PATIENCE;
        let resolved = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match receiver.recv_timeout(left) {
                Ok(HostEvent::ApprovalResolved(resolved)) => break resolved,
                Ok(_) => {}
                Err(error) => panic!("no expiry within {PATIENCE:?}: {error}"),
            }
        };
        assert_eq!(resolved.id, approval.id);
        assert_eq!(resolved.status.to_string(), "expired");
        assert_eq!(resolved.error_code, Some(ErrorCode::PlanApprovalTimeout));
        assert_eq!(resolved.decided_at, Some(approval.expires_at));
        assert!(plan_host::Clock::now_ms(&plan_host::SystemClock) >= approval.expires_at);
        let row = host.approval(&approval.id).unwrap().approval;
        assert_eq!(row.status, ApprovalStatus::Expired);
    }

    #[test]
    fn with_manual_expiry_nothing_expires_until_expire_due() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().canonicalize().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let host = manual_clock_host(dir.path(), &clock, ExpiryTimer::Manual);
        let seen = Arc::new(Mutex::new(Vec::new()));
        listen(&host, &seen);
        let approval = pending_on(&host, &workspace, "s1");
        clock.advance(TTL + 1);
        // No timer thread exists to expire it (`manual_expiry_starts_no_thread`
        // counts them), so it is still pending until the embedder's call.
        assert!(
            !methods(&seen.lock().unwrap()).contains(&"plan/approvalResolved"),
            "something expired the approval without expire_due"
        );
        // The deadline is due, and the embedder's own call expires it.
        assert_eq!(host.next_deadline().unwrap(), Some(approval.expires_at));
        let expired = host.expire_due().unwrap();
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].id, approval.id);
        assert_eq!(expired[0].status, ApprovalStatus::Expired);
        assert!(methods(&seen.lock().unwrap()).contains(&"plan/approvalResolved"));
        assert_eq!(host.next_deadline().unwrap(), None);
    }

    /// The variable that lets [`manual_expiry_thread_probe`] run: only in the
    /// process of its own that [`manual_expiry_starts_no_thread`] starts.
    const THREAD_PROBE: &str = "PLAN_HOST_THREAD_PROBE";

    /// The threads of this process, as `/proc` lists them.
    fn thread_count() -> usize {
        std::fs::read_dir("/proc/self/task").unwrap().count()
    }

    #[test]
    fn manual_expiry_starts_no_thread() {
        // Threads are counted in a child process that runs the probe alone,
        // so the threads of the tests running beside this one do not count.
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "timer::manual_expiry_thread_probe",
                "--ignored",
                "--test-threads=1",
            ])
            .env(THREAD_PROBE, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("1 passed"),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    #[test]
    #[ignore = "run by manual_expiry_starts_no_thread in a process of its own"]
    fn manual_expiry_thread_probe() {
        if std::env::var_os(THREAD_PROBE).is_none() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().canonicalize().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        for name in ["manual", "automatic"] {
            std::fs::create_dir(dir.path().join(name)).unwrap();
        }
        let before = thread_count();
        let manual = manual_clock_host(&dir.path().join("manual"), &clock, ExpiryTimer::Manual);
        pending_on(&manual, &workspace, "s1");
        clock.advance(TTL + 1);
        assert_eq!(
            thread_count(),
            before,
            "a host with manual expiry started a thread"
        );
        manual.close();
        // The count does see a timer: an automatic host adds exactly one
        // (`spawn` returns once the thread exists).
        let automatic = manual_clock_host(&dir.path().join("automatic"), &clock, ExpiryTimer::Automatic);
        assert_eq!(thread_count(), before + 1);
        // Its first submission starts the thread that flushes artifacts;
        // closing ends both.
        assert_eq!(flush_threads(), 0);
        pending_on(&automatic, &workspace, "s2");
        assert_eq!(thread_count(), before + 2);
        assert_eq!(flush_threads(), 1);
        automatic.close();
        assert_eq!(flush_threads(), 0, "the flush thread outlived close()");
    }

    /// The threads of this process that flush artifacts.
    fn flush_threads() -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter(|task| {
                let comm = task.as_ref().unwrap().path().join("comm");
                std::fs::read_to_string(comm).is_ok_and(|name| name.trim_end() == "plan-fsync")
            })
            .count()
    }

    #[test]
    fn close_stops_the_timer_thread() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().canonicalize().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let host = manual_clock_host(dir.path(), &clock, ExpiryTimer::Automatic);
        let (resolved, exited) = watch_timer_thread(&host, || {});
        let approval = pending_on(&host, &workspace, "s1");
        clock.advance(TTL + 1);
        let fired = resolved.recv_timeout(PATIENCE).expect("the timer never fired");
        assert_eq!(fired.id, approval.id);
        // The timer thread lives on until the host closes, then ends.
        assert_eq!(exited.try_recv(), Err(mpsc::TryRecvError::Empty));
        host.close();
        exited
            .recv_timeout(PATIENCE)
            .expect("the timer thread outlived close()");
        // The host object is still there; only its thread is gone.
        assert_eq!(code(host.session(&SessionId::from("s1"))), ErrorCode::HostClosed);
    }

    #[test]
    fn dropping_the_host_stops_the_timer_thread_and_releases_the_host() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().canonicalize().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let host = manual_clock_host(dir.path(), &clock, ExpiryTimer::Automatic);
        let (resolved, exited) = watch_timer_thread(&host, || {});
        pending_on(&host, &workspace, "s1");
        clock.advance(TTL + 1);
        resolved.recv_timeout(PATIENCE).expect("the timer never fired");
        assert_eq!(exited.try_recv(), Err(mpsc::TryRecvError::Empty));
        drop(host);
        // Dropping waits for the thread, so it has ended already.
        assert_eq!(exited.try_recv(), Ok(()));
        // Nothing holds the host's state any more (the options held the
        // clock), and its lock is free for the next host.
        assert_eq!(Arc::strong_count(&clock), 1);
        let next = manual_clock_host(dir.path(), &clock, ExpiryTimer::Manual);
        assert_eq!(
            next.session(&SessionId::from("s1"))
                .unwrap()
                .pending_approval
                .map(|a| a.status),
            None
        );
    }

    #[test]
    fn a_listener_on_the_timer_thread_may_close_and_drop_the_host() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().canonicalize().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let host = Arc::new(manual_clock_host(dir.path(), &clock, ExpiryTimer::Automatic));
        let owner: Arc<Mutex<Option<Arc<Host>>>> = Arc::new(Mutex::new(None));
        let (resolved, exited) = watch_timer_thread(&host, {
            let owner = Arc::clone(&owner);
            move || {
                let taken = owner.lock().unwrap().take();
                if let Some(host) = taken {
                    host.close();
                    // The last reference: the host drops on its own timer
                    // thread, which cannot wait for itself.
                    drop(host);
                }
            }
        });
        pending_on(&host, &workspace, "s1");
        *owner.lock().unwrap() = Some(host);
        clock.advance(TTL + 1);
        resolved.recv_timeout(PATIENCE).expect("the timer never fired");
        exited
            .recv_timeout(PATIENCE)
            .expect("the timer thread did not end after its listener dropped the host");
        // The lock was released: the next host opens.
        let next = manual_clock_host(dir.path(), &clock, ExpiryTimer::Manual);
        assert!(!next.is_closed());
    }
}

mod busy {
    use super::*;

    fn configure(fx: &Fixture, id: &str) -> ErrorCode {
        code(fx.host.configure_session(
            &SessionId::from(id),
            ConfigChange {
                permission_mode: Some(PermissionMode::Auto),
                ..ConfigChange::default()
            },
        ))
    }

    #[test]
    fn session_busy_for_every_guarded_action() {
        let fx = Fixture::new();

        // An active prompt turn.
        fx.session("turn", Mode::Plan);
        let turn = fx
            .host
            .start_turn(&SessionId::from("turn"), Origin::Interactive)
            .unwrap();
        assert_eq!(
            code(fx.host.start_turn(&SessionId::from("turn"), Origin::Interactive)),
            ErrorCode::SessionBusy
        );
        assert_eq!(configure(&fx, "turn"), ErrorCode::SessionBusy);
        for change in [
            ConfigChange {
                mode: Some(Mode::Agent),
                ..ConfigChange::default()
            },
            ConfigChange {
                provider: Some(Some("p".to_owned())),
                ..ConfigChange::default()
            },
            ConfigChange {
                model: Some(Some("m".to_owned())),
                ..ConfigChange::default()
            },
            ConfigChange {
                shell: Some(Some("sh".to_owned())),
                ..ConfigChange::default()
            },
        ] {
            assert_eq!(
                code(fx.host.configure_session(&SessionId::from("turn"), change)),
                ErrorCode::SessionBusy
            );
        }
        assert!(
            fx.host
                .complete_turn(&SessionId::from("turn"), &turn.turn_id)
                .unwrap()
                .is_idle()
        );

        // A pending approval.
        let (approval, plan_turn) = fx.pending("pending");
        assert_eq!(
            code(
                fx.host
                    .start_turn(&SessionId::from("pending"), Origin::Interactive)
            ),
            ErrorCode::SessionBusy
        );
        assert_eq!(configure(&fx, "pending"), ErrorCode::SessionBusy);
        assert_eq!(
            code(fx.host.tool_calls(
                &SessionId::from("pending"),
                &plan_turn,
                vec![submit("again", MARKDOWN)]
            )),
            ErrorCode::SessionBusy
        );
        assert_eq!(
            code(fx.host.tool_calls(
                &SessionId::from("pending"),
                &plan_turn,
                vec![call("r", "Read", json!({}))]
            )),
            ErrorCode::SessionBusy
        );
        assert_eq!(
            code(fx.host.complete_turn(&SessionId::from("pending"), &plan_turn)),
            ErrorCode::SessionBusy
        );
        assert_eq!(
            code(fx.host.cancel_turn(&SessionId::from("pending"))),
            ErrorCode::SessionBusy
        );
        assert_eq!(fx.row(&approval.id), approval);
        assert_eq!(fx.files().len(), 1);

        // A queued execution, then a running one.
        let (_, execution) = fx.queued("exec", PermissionMode::Ask);
        for running in [false, true] {
            if running {
                fx.host.start_execution(&execution).unwrap();
            }
            let state = fx.host.session(&SessionId::from("exec")).unwrap();
            let exec_turn = state.active_turn.clone().unwrap().turn_id;
            assert_eq!(
                code(fx.host.start_turn(&SessionId::from("exec"), Origin::Interactive)),
                ErrorCode::SessionBusy
            );
            assert_eq!(
                code(fx.host.start_turn(&SessionId::from("exec"), Origin::Scheduled)),
                ErrorCode::SessionBusy
            );
            assert_eq!(configure(&fx, "exec"), ErrorCode::SessionBusy);
            assert_eq!(
                code(fx.host.complete_turn(&SessionId::from("exec"), &exec_turn)),
                ErrorCode::SessionBusy
            );
            assert_eq!(fx.host.session(&SessionId::from("exec")).unwrap(), state);
        }
        // The guarded sessions are untouched by the refusals.
        assert_eq!(
            fx.host
                .session(&SessionId::from("pending"))
                .unwrap()
                .session
                .permission_mode,
            PermissionMode::Ask
        );
        assert_eq!(fx.rows().len(), 2);
    }
}

mod restart {
    use super::*;

    #[test]
    fn second_open_is_host_already_running_and_close_lets_the_next_in() {
        let fx = Fixture::new();
        let second = Host::open(&fx.db, options(&fx.clock));
        assert_eq!(code(second), ErrorCode::HostAlreadyRunning);
        fx.host.close();
        let third = Host::open(&fx.db, options(&fx.clock)).unwrap();
        assert_eq!(
            code(Host::open(&fx.db, options(&fx.clock))),
            ErrorCode::HostAlreadyRunning
        );
        drop(third);
        assert!(Host::open(&fx.db, options(&fx.clock)).is_ok());
    }

    #[test]
    fn startup_fence_interrupts_pending_queued_and_running_without_replay() {
        let mut fx = Fixture::new();
        let (pending, _) = fx.pending("pending");
        let (queued, _) = fx.queued("queued", PermissionMode::AcceptEdits);
        let (running, running_execution) = fx.queued("running", PermissionMode::Auto);
        fx.host.start_execution(&running_execution).unwrap();
        let (_, done_execution) = fx.queued("done", PermissionMode::Ask);
        fx.host.start_execution(&done_execution).unwrap();
        let done = fx.host.complete_execution(&done_execution).unwrap();
        let (rejected, _) = fx.pending("rejected");
        let rejected = fx.host.reject(&rejected.id).unwrap().0;
        let before = fx.rows();
        let files = fx.files();

        fx.clock.advance(1234);
        fx.restart();
        let now = T0 + 1234;

        let row = fx.row(&pending.id);
        assert_eq!(row.status, ApprovalStatus::Interrupted);
        assert_eq!(row.error_code, Some(ErrorCode::HostRestarted));
        assert_eq!(row.decided_at, Some(now));
        assert_eq!(row.execution_state, None);
        for (approved, permission) in [
            (&queued, PermissionMode::AcceptEdits),
            (&running, PermissionMode::Auto),
        ] {
            let row = fx.row(&approved.id);
            assert_eq!(row.status, ApprovalStatus::Approved);
            assert_eq!(row.execution_state, Some(ExecutionState::Interrupted));
            assert_eq!(row.error_code, Some(ErrorCode::HostRestarted));
            assert_eq!(row.decided_at, approved.decided_at);
            assert_eq!(row.permission_mode, Some(permission));
            assert_eq!(row.execution_id, approved.execution_id);
        }
        assert_eq!(fx.row(&done.id), done);
        assert_eq!(fx.row(&rejected.id), rejected);

        // Session modes: Plan for the pending one, Agent for the executing ones; all idle.
        let modes = [
            ("pending", Mode::Plan),
            ("queued", Mode::Agent),
            ("running", Mode::Agent),
            ("done", Mode::Agent),
        ];
        for (id, mode) in modes {
            let state = fx.host.session(&SessionId::from(id)).unwrap();
            assert!(state.is_idle(), "{id} must be idle after the fence");
            assert_eq!(state.session.mode, mode, "{id}");
        }
        assert_eq!(
            fx.host
                .session(&SessionId::from("queued"))
                .unwrap()
                .session
                .permission_mode,
            PermissionMode::AcceptEdits
        );

        // Nothing replayed: same rows, same files, no notifications, no revived execution.
        assert_eq!(fx.rows().len(), before.len());
        assert_eq!(fx.files(), files);
        assert_eq!(fx.host.next_deadline().unwrap(), None);
        assert!(fx.host.expire_due().unwrap().is_empty());
        assert_eq!(
            code(fx.host.start_execution(queued.execution_id.as_ref().unwrap())),
            ErrorCode::ExecutionNotActive
        );
        assert_eq!(
            code(fx.host.complete_execution(&running_execution)),
            ErrorCode::ExecutionNotActive
        );
        assert_eq!(
            code(fx.host.approve(&pending.id, PermissionMode::Ask)),
            ErrorCode::ApprovalNotPending
        );
        assert!(fx.take_seen().is_empty());
        for approval in [&pending, &queued, &running] {
            assert_eq!(fx.host.read_artifact(&approval.id).unwrap().markdown, MARKDOWN);
        }
        // The user may start new turns: Plan again in the pending session, Agent in the others.
        assert_eq!(
            fx.host
                .start_turn(&SessionId::from("pending"), Origin::Interactive)
                .unwrap()
                .mode,
            Mode::Plan
        );
        assert_eq!(
            fx.host
                .start_turn(&SessionId::from("running"), Origin::Interactive)
                .unwrap()
                .mode,
            Mode::Agent
        );

        // A second restart changes nothing more.
        let after = fx.rows();
        fx.restart();
        assert_eq!(fx.rows(), after);
    }

    #[test]
    fn every_call_after_close_is_host_closed() {
        let fx = Fixture::new();
        let (approval, _) = fx.pending("s1");
        fx.host.close();
        assert!(fx.host.is_closed());
        fx.host.close();
        let h = &fx.host;
        let closed = [
            code(h.create_session(NewSession::default())),
            code(h.session(&SessionId::from("s1"))),
            code(h.configure_session(&SessionId::from("s1"), ConfigChange::default())),
            code(h.start_turn(&SessionId::from("s1"), Origin::Interactive)),
            code(h.tool_calls(&SessionId::from("s1"), &TurnId::from("t"), vec![])),
            code(h.complete_turn(&SessionId::from("s1"), &TurnId::from("t"))),
            code(h.cancel_turn(&SessionId::from("s1"))),
            code(h.approve(&approval.id, PermissionMode::Ask)),
            code(h.reject(&approval.id)),
            code(h.approval(&approval.id)),
            code(h.list_approvals(&ApprovalFilter::default())),
            code(h.read_artifact(&approval.id)),
            code(h.start_execution(&ExecutionId::from("e"))),
            code(h.complete_execution(&ExecutionId::from("e"))),
            code(h.shells()),
            code(h.set_default_shell("sh")),
            code(h.next_deadline()),
            code(h.expire_due()),
        ];
        assert!(closed.iter().all(|c| *c == ErrorCode::HostClosed), "{closed:?}");
    }
}

mod shells {
    use super::*;

    #[test]
    fn list_set_default_and_unknown_shells() {
        let fx = Fixture::new();
        let (entries, default) = fx.host.shells().unwrap();
        let ids: Vec<_> = entries.iter().map(|entry| entry.id.clone()).collect();
        assert_eq!(ids, ["bash", "zsh", "sh", "fish", "pwsh"]);
        for entry in &entries {
            assert_eq!(entry.available, Path::new(&entry.path).exists(), "{}", entry.id);
        }
        assert!(ids.contains(&default));
        assert_eq!(fx.host.set_default_shell("zsh").unwrap(), "zsh");
        assert_eq!(fx.host.shells().unwrap().1, "zsh");
        assert_eq!(
            code(fx.host.set_default_shell("cmd.exe")),
            ErrorCode::ShellUnknown
        );
        assert_eq!(fx.host.shells().unwrap().1, "zsh");
        fx.session("s1", Mode::Agent);
        let change = ConfigChange {
            shell: Some(Some("tcsh".to_owned())),
            ..ConfigChange::default()
        };
        assert_eq!(
            code(fx.host.configure_session(&SessionId::from("s1"), change)),
            ErrorCode::ShellUnknown
        );
        let change = ConfigChange {
            shell: Some(Some("sh".to_owned())),
            ..ConfigChange::default()
        };
        assert_eq!(
            fx.host
                .configure_session(&SessionId::from("s1"), change)
                .unwrap()
                .session
                .shell
                .as_deref(),
            Some("sh")
        );
        // The default survives a restart.
        let mut fx = fx;
        fx.restart();
        assert_eq!(fx.host.shells().unwrap().1, "zsh");
    }
}

mod concurrency {
    use super::*;

    #[test]
    fn concurrent_lifecycles_and_one_winner_per_decision() {
        let fx = Fixture::new();
        let threads = 4;
        let rounds = 5;
        std::thread::scope(|scope| {
            for thread in 0..threads {
                let fx = &fx;
                scope.spawn(move || {
                    let id = format!("t{thread}");
                    fx.session(&id, Mode::Plan);
                    for round in 0..rounds {
                        if round > 0 {
                            fx.host
                                .configure_session(
                                    &SessionId::from(&id),
                                    ConfigChange {
                                        mode: Some(Mode::Plan),
                                        ..ConfigChange::default()
                                    },
                                )
                                .unwrap();
                        }
                        let turn = fx
                            .host
                            .start_turn(&SessionId::from(&id), Origin::Interactive)
                            .unwrap();
                        let markdown = format!("# thread {thread} round {round}\n");
                        let approval = approval_of(
                            &fx.host
                                .tool_calls(
                                    &SessionId::from(&id),
                                    &turn.turn_id,
                                    vec![submit("c", &markdown)],
                                )
                                .unwrap(),
                        );
                        let (approved, _) = fx.host.approve(&approval.id, PermissionMode::Auto).unwrap();
                        let execution = approved.execution_id.unwrap();
                        fx.host.start_execution(&execution).unwrap();
                        fx.host.complete_execution(&execution).unwrap();
                        assert_eq!(fx.host.read_artifact(&approval.id).unwrap().markdown, markdown);
                    }
                });
            }
        });
        let rows = fx.rows();
        assert_eq!(rows.len(), threads * rounds);
        assert!(
            rows.iter()
                .all(|row| row.execution_state == Some(ExecutionState::Completed))
        );
        assert_eq!(fx.files().len(), threads * rounds);

        // Several threads race to decide one approval: exactly one wins.
        let (approval, _) = fx.pending("race");
        let outcomes: Vec<Result<PlanApproval, ErrorCode>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|thread| {
                    let fx = &fx;
                    let id = approval.id.clone();
                    scope.spawn(move || {
                        let result = if thread % 2 == 0 {
                            fx.host.approve(&id, PermissionMode::Ask)
                        } else {
                            fx.host.reject(&id)
                        };
                        result.map(|(row, _)| row).map_err(|error| error.code())
                    })
                })
                .collect();
            handles.into_iter().map(|handle| handle.join().unwrap()).collect()
        });
        let winners: Vec<_> = outcomes
            .iter()
            .filter_map(|outcome| outcome.as_ref().ok())
            .collect();
        assert_eq!(winners.len(), 1, "{outcomes:?}");
        assert!(
            outcomes
                .iter()
                .filter_map(|outcome| outcome.as_ref().err())
                .all(|code| *code == ErrorCode::ApprovalNotPending),
            "{outcomes:?}"
        );
        assert_eq!(fx.row(&approval.id).status, winners[0].status);
    }
}

mod ordering {
    use super::*;

    /// A change committed while another thread is still delivering an earlier
    /// change's notifications must not overtake them: listeners see
    /// notifications in commit order, so the last `session/changed` always
    /// describes the session as it is.
    #[test]
    fn notifications_keep_commit_order_across_threads() {
        let fx = Fixture::new();
        let (approval, _) = fx.pending("s1");
        let (blocked_tx, blocked_rx) = std::sync::mpsc::channel::<()>();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let blocked_tx = Mutex::new(blocked_tx);
        let release_rx = Mutex::new(release_rx);
        let order = Arc::new(Mutex::new(Vec::new()));
        fx.host.add_listener(Arc::new({
            let order = Arc::clone(&order);
            move |event: HostEvent| {
                let resolved = matches!(event, HostEvent::ApprovalResolved(_));
                order.lock().unwrap().push(event);
                if resolved {
                    // Hold this delivery until the other thread has committed its change.
                    blocked_tx.lock().unwrap().send(()).unwrap();
                    release_rx
                        .lock()
                        .unwrap()
                        .recv_timeout(Duration::from_secs(20))
                        .unwrap();
                }
            }
        }));
        std::thread::scope(|scope| {
            let rejecting = scope.spawn(|| fx.host.reject(&approval.id).unwrap());
            blocked_rx.recv_timeout(Duration::from_secs(20)).unwrap();
            // Commits after the rejection, while its notifications are being delivered.
            let turn = fx
                .host
                .start_turn(&SessionId::from("s1"), Origin::Interactive)
                .unwrap();
            release_tx.send(()).unwrap();
            rejecting.join().unwrap();
            let order = order.lock().unwrap();
            assert_eq!(
                methods(&order),
                ["plan/approvalResolved", "session/changed", "session/changed"]
            );
            match order.last().unwrap() {
                HostEvent::SessionChanged(changed) => assert_eq!(
                    changed.active_turn.as_ref().map(|turn| turn.turn_id.clone()),
                    Some(turn.turn_id.clone()),
                    "the last session/changed must describe the session after the later commit"
                ),
                other => panic!("unexpected {other:?}"),
            }
        });
    }
}

mod review {
    use super::*;

    #[test]
    fn a_read_of_a_vanished_workspace_is_missing_not_a_write_failure() {
        let fx = Fixture::new();
        let (approval, _) = fx.pending("s");
        std::fs::remove_dir_all(&fx.workspace).unwrap();
        let error = fx.host.read_artifact(&approval.id).unwrap_err();
        assert_eq!(error.code(), ErrorCode::ArtifactMissing, "{}", error.message());
        assert!(!error.message().contains("written"), "{}", error.message());
    }
}

mod edges {
    use super::*;

    fn clock_now(clock: &ManualClock) -> i64 {
        plan_host::Clock::now_ms(clock)
    }

    #[test]
    fn a_second_host_through_a_symlink_or_hard_link_is_refused_and_fences_nothing() {
        let fx = Fixture::new();
        let (approval, _) = fx.pending("s");
        let symlink = fx.db.with_file_name("alias-symlink.db");
        std::os::unix::fs::symlink(&fx.db, &symlink).unwrap();
        let hard_link = fx.db.with_file_name("alias-hard-link.db");
        std::fs::hard_link(&fx.db, &hard_link).unwrap();
        for alias in [&symlink, &hard_link] {
            let second = Host::open(alias, options(&fx.clock));
            assert_eq!(code(second), ErrorCode::HostAlreadyRunning, "{}", alias.display());
        }
        // The first host's live approval was not fenced by either attempt.
        assert_eq!(fx.row(&approval.id).status, ApprovalStatus::Pending);
        assert!(fx.host.approve(&approval.id, PermissionMode::Ask).is_ok());
    }

    #[test]
    fn names_that_keep_nothing_are_refused() {
        let clock = Arc::new(ManualClock::new(T0));
        for name in ["", ":memory:", "file:plans.db?mode=memory"] {
            let error = Host::open(name, options(&clock)).unwrap_err();
            assert_eq!(
                error.code(),
                ErrorCode::InvalidParams,
                "{name:?}: {}",
                error.message()
            );
        }
        assert!(!Path::new("file:plans.db?mode=memory").exists());
    }

    #[test]
    fn a_wall_clock_stepped_back_does_not_extend_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().canonicalize().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let ttl = 300;
        let host = Host::open(
            dir.path().join("plan.db"),
            HostOptions {
                limits: Limits::new(ttl, MARKDOWN_LIMIT).unwrap(),
                clock: Arc::clone(&clock) as Arc<dyn plan_host::Clock>,
                shells: default_catalog(),
                expiry: ExpiryTimer::Manual,
                ..HostOptions::default()
            },
        )
        .unwrap();
        let root = workspace.to_str().unwrap().to_owned();
        let pending = |id: &str| {
            host.create_session(NewSession {
                session_id: Some(id.into()),
                workspace_root: Some(root.clone()),
                mode: Some(Mode::Plan),
                permission_mode: None,
            })
            .unwrap();
            let turn = host
                .start_turn(&SessionId::from(id), Origin::Interactive)
                .unwrap();
            approval_of(
                &host
                    .tool_calls(&SessionId::from(id), &turn.turn_id, vec![submit("c", MARKDOWN)])
                    .unwrap(),
            )
        };
        // Decided inside the window after a step back: never before createdAt.
        let early = pending("early");
        clock.set(T0 - 3_600_000);
        let (approved, _) = host.approve(&early.id, PermissionMode::Ask).unwrap();
        assert!(
            approved.decided_at.unwrap() >= approved.created_at,
            "decidedAt {:?} is before createdAt {}",
            approved.decided_at,
            approved.created_at
        );
        // Created, then the clock steps back an hour and the real TTL passes.
        clock.set(T0);
        let late = pending("late");
        clock.set(T0 - 3_600_000);
        // The TTL passes; the wall clock, an hour behind, stays short of expiresAt.
        clock.advance(ttl + 100);
        assert!(clock_now(&clock) < late.expires_at);
        assert_eq!(
            code(host.approve(&late.id, PermissionMode::Ask)),
            ErrorCode::PlanApprovalTimeout
        );
        let row = host.approval(&late.id).unwrap().approval;
        assert_eq!(row.status, ApprovalStatus::Expired);
        // expiresAt never moves, and the record is the deadline itself.
        assert_eq!(row.expires_at, late.expires_at);
        assert_eq!(row.decided_at, Some(late.expires_at));
    }

    #[test]
    fn the_timer_expires_on_time_after_the_wall_clock_stepped_back() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().canonicalize().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let host = Arc::new(
            Host::open(
                dir.path().join("plan.db"),
                HostOptions {
                    limits: Limits::new(200, MARKDOWN_LIMIT).unwrap(),
                    clock: Arc::clone(&clock) as Arc<dyn plan_host::Clock>,
                    shells: default_catalog(),
                    ..HostOptions::default()
                },
            )
            .unwrap(),
        );
        // No driver: the host's own timer fires.
        let (resolved_tx, resolved) = std::sync::mpsc::channel();
        let resolved_tx = Mutex::new(resolved_tx);
        host.add_listener(Arc::new(move |event: HostEvent| {
            if let HostEvent::ApprovalResolved(approval) = event {
                let _ = resolved_tx.lock().unwrap().send(approval.id.to_string());
            }
        }));
        host.create_session(NewSession {
            session_id: Some("s".into()),
            workspace_root: Some(workspace.to_str().unwrap().to_owned()),
            mode: Some(Mode::Plan),
            permission_mode: None,
        })
        .unwrap();
        let turn = host
            .start_turn(&SessionId::from("s"), Origin::Interactive)
            .unwrap();
        let approval = approval_of(
            &host
                .tool_calls(&SessionId::from("s"), &turn.turn_id, vec![submit("c", MARKDOWN)])
                .unwrap(),
        );
        clock.set(T0 - 3_600_000);
        clock.advance(300);
        // The wall clock is nowhere near expiresAt; the timer must act on
        // the elapsed monotonic time (the bound is liveness, not speed).
        let expired = resolved
            .recv_timeout(Duration::from_secs(20))
            .expect("the approval never expired");
        assert_eq!(expired, approval.id);
        assert_eq!(
            host.approval(&approval.id).unwrap().approval.status,
            ApprovalStatus::Expired
        );
    }

    #[test]
    fn a_failed_artifact_write_names_its_cause() {
        let fx = Fixture::new();
        // Two different causes: `.pi` is a plain file (not a directory), and
        // the workspace root is gone.
        std::fs::write(fx.workspace.join(".pi"), b"in the way").unwrap();
        fx.session("blocked", Mode::Plan);
        let (turn, outcomes) = fx.batch_in_new_turn("blocked", vec![submit("c1", MARKDOWN)]);
        assert_eq!(
            verdict(&outcomes[0]),
            Verdict::Deny(ErrorCode::ArtifactWriteFailed)
        );
        // The error's message names the OS cause.
        let not_a_directory = outcomes[0].error.clone().unwrap().message;
        assert!(not_a_directory.contains("Not a directory"), "{not_a_directory}");

        std::fs::remove_file(fx.workspace.join(".pi")).unwrap();
        std::fs::remove_dir(&fx.workspace).unwrap();
        let outcomes = fx
            .host
            .tool_calls(
                &SessionId::from("blocked"),
                &turn.turn_id,
                vec![submit("c2", MARKDOWN)],
            )
            .unwrap();
        assert_eq!(
            verdict(&outcomes[0]),
            Verdict::Deny(ErrorCode::ArtifactWriteFailed)
        );
        let missing = outcomes[0].error.clone().unwrap().message;
        assert!(missing.contains("No such file or directory"), "{missing}");
        assert_ne!(missing, not_a_directory);
    }
}

mod readme {
    /// The README's Rust example (run as a doctest of this crate) in text.
    fn rust_example() -> &'static str {
        let readme = include_str!("../../../README.md");
        let section = &readme[readme.find("### Embedding in Rust").unwrap()..];
        let code = &section[section.find("```rust\n").unwrap() + "```rust\n".len()..];
        &code[..code.find("```").unwrap()]
    }

    /// The crates a path in `code` starts from: the lowercase identifier
    /// before a `::` that is not itself after a `::`.
    fn path_roots(code: &str) -> std::collections::BTreeSet<&str> {
        let mut roots = std::collections::BTreeSet::new();
        for (at, _) in code.match_indices("::") {
            let before = &code[..at];
            let start = before
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |index| index + 1);
            let ident = &before[start..];
            let after_path = before[..start].ends_with("::");
            if !after_path && ident.starts_with(|c: char| c.is_ascii_lowercase()) {
                roots.insert(ident);
            }
        }
        roots
    }

    #[test]
    fn the_rust_example_embeds_a_host_through_plan_host_alone() {
        let code = rust_example();
        assert!(code.contains("Host::open"), "not the embedding example");
        // `serde_json` is allowed only as the crate plan-host re-exports.
        let imports = &code[code.find("use plan_host::{").unwrap()..];
        let imports = &imports[..imports.find("};").unwrap()];
        assert!(imports.contains("serde_json"), "{imports}");
        let roots = path_roots(code);
        let allowed = ["plan_host", "serde_json", "std", "tempfile"];
        let foreign: Vec<&&str> = roots.iter().filter(|root| !allowed.contains(root)).collect();
        assert!(
            foreign.is_empty(),
            "the example reaches past plan_host: {foreign:?}"
        );
        // The check itself sees a direct import.
        assert!(path_roots("use plan_core::Mode; plan_host::Host::open").contains("plan_core"));
    }
}
