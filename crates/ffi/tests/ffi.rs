//! Integration tests of the FFI surface as Rust sees it: every host
//! notification reaches a `PlanEventListener` as the protocol's own
//! `ServerNotification` (the value `serve` writes), with
//! the same records the calls return, and a listener that panics (which is
//! how a foreign exception arrives from the UniFFI callback glue) leaves the
//! host, its timer and the other listeners working.
//!
//! The expiry tests use the system clock with a short TTL and wait with a
//! bounded poll; nothing asserts on speed. The command test runs `printf` in
//! the test's own temporary workspace.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::wildcard_enum_match_arm
)]

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use plan_ffi::{
    ApprovalStatus, CommandExitedNotification, CommandGetParams, CommandOutputNotification, CommandSandbox,
    CommandStartParams, CommandState, ErrorCode, ExecutionCompleteParams, ExecutionStartParams,
    ExecutionState, ExecutionStateChangedNotification, ExportOverrides, HostConfig, Mode, Origin,
    OutputStream, PermissionMode, PlanApproval, PlanApprovalRequestedNotification,
    PlanApprovalResolvedNotification, PlanApproveParams, PlanCardUrlParams, PlanError, PlanEventListener,
    PlanGetParams, PlanHost, PlanRejectParams, PlanSandbox, ServerNotification, SessionChangedNotification,
    SessionConfigureParams, SessionCreateParams, SessionGetParams, ToolCall, ToolCallDecision,
    ToolConfirmParams, TurnStartParams, TurnToolCallsParams,
};

/// How long a test waits for an event from another thread before failing.
const WAIT: Duration = Duration::from_secs(20);

/// Records every event, in arrival order, and wakes waiters.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<ServerNotification>>,
    /// The threads that delivered an expired approval.
    expiry_threads: Mutex<Vec<ThreadId>>,
    arrived: Condvar,
}

impl PlanEventListener for Recorder {
    fn on_event(&self, event: ServerNotification) -> Result<(), PlanError> {
        if let ServerNotification::PlanApprovalResolved(PlanApprovalResolvedNotification { approval }) =
            &event
            && approval.status == ApprovalStatus::Expired
        {
            self.expiry_threads
                .lock()
                .unwrap()
                .push(std::thread::current().id());
        }
        self.events.lock().unwrap().push(event);
        self.arrived.notify_all();
        Ok(())
    }
}

impl Recorder {
    /// Takes the events recorded so far.
    fn drain(&self) -> Vec<ServerNotification> {
        std::mem::take(&mut *self.events.lock().unwrap())
    }

    /// Waits (bounded) until an event matches, then takes everything recorded
    /// up to and including it.
    fn drain_until(
        &self,
        what: &str,
        matches: impl Fn(&ServerNotification) -> bool,
    ) -> Vec<ServerNotification> {
        let deadline = Instant::now() + WAIT;
        let mut events = self.events.lock().unwrap();
        loop {
            if let Some(at) = events.iter().position(&matches) {
                return events.drain(..=at).collect();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no {what} within {WAIT:?}; got {events:#?}");
            events = self.arrived.wait_timeout(events, left).unwrap().0;
        }
    }
}

/// A listener that panics on every event (a Rust listener's bug; a foreign
/// listener's exception arrives as an `Err`, which the host drops).
struct Panicking;

impl PlanEventListener for Panicking {
    fn on_event(&self, _event: ServerNotification) -> Result<(), PlanError> {
        panic!("deliberate listener failure (this test checks it is contained)");
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    workspace: PathBuf,
    host: Arc<PlanHost>,
    recorder: Arc<Recorder>,
}

impl Fixture {
    fn new(approval_ttl_ms: Option<i64>) -> Fixture {
        Fixture::with_listeners(approval_ttl_ms, Vec::new())
    }

    /// A host with `first` listeners registered before the recorder.
    fn with_listeners(approval_ttl_ms: Option<i64>, first: Vec<Arc<dyn PlanEventListener>>) -> Fixture {
        let options = HostConfig {
            approval_ttl_ms,
            ..HostConfig::default()
        };
        Fixture::with_options(options, first)
    }

    fn with_options(options: HostConfig, first: Vec<Arc<dyn PlanEventListener>>) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().canonicalize().unwrap().join("workspace");
        std::fs::create_dir(&workspace).unwrap();
        let host = PlanHost::new(dir.path().join("plan.db").to_string_lossy().into_owned(), options).unwrap();
        for listener in first {
            host.add_listener(listener);
        }
        let recorder = Arc::new(Recorder::default());
        host.add_listener(Arc::clone(&recorder) as Arc<dyn PlanEventListener>);
        Fixture {
            _dir: dir,
            workspace,
            host,
            recorder,
        }
    }

    fn root(&self) -> Option<String> {
        Some(self.workspace.to_string_lossy().into_owned())
    }

    /// A Plan session `session_id` (created if missing) with a submitted
    /// plan; returns the pending approval.
    fn submit(&self, session_id: &str) -> PlanApproval {
        if self
            .host
            .session_get(SessionGetParams {
                session_id: session_id.into(),
            })
            .is_err()
        {
            self.host
                .session_create(SessionCreateParams {
                    session_id: Some(session_id.into()),
                    workspace_root: self.root(),
                    mode: Some(Mode::Plan),
                    permission_mode: None,
                })
                .unwrap();
        }
        let turn = self
            .host
            .turn_start(TurnStartParams {
                session_id: session_id.into(),
                prompt: String::new(),
                origin: Origin::Interactive,
                mode: None,
            })
            .unwrap();
        self.submit_in(session_id, &turn.turn_id)
    }

    /// Submits a plan in the active Plan turn `turn_id`.
    fn submit_in(&self, session_id: &str, turn_id: &str) -> PlanApproval {
        let input =
            r##"{"title":"Split the parser","markdown":"# Plan\n\n1. Split.\n","question":"Proceed?"}"##;
        let mut decided = self
            .host
            .turn_tool_calls(TurnToolCallsParams {
                session_id: session_id.into(),
                turn_id: turn_id.into(),
                calls: vec![call("s", "SubmitPlan", input)],
            })
            .unwrap();
        let result = decided.results.pop().unwrap();
        assert_eq!(result.decision, ToolCallDecision::Allow, "{result:?}");
        result.approval.unwrap()
    }

    fn session(&self, session_id: &str) -> plan_ffi::Session {
        self.host
            .session_get(SessionGetParams {
                session_id: session_id.into(),
            })
            .unwrap()
    }
}

fn call(call_id: &str, name: &str, input_json: &str) -> ToolCall {
    ToolCall {
        call_id: call_id.into(),
        name: name.to_owned(),
        input: serde_json::from_str(input_json).unwrap(),
    }
}

fn is_resolved(event: &ServerNotification, approval_id: &str, status: ApprovalStatus) -> bool {
    match event {
        ServerNotification::PlanApprovalResolved(PlanApprovalResolvedNotification { approval }) => {
            approval.id == approval_id && approval.status == status
        }
        ServerNotification::PlanApprovalRequested(_)
        | ServerNotification::ExecutionStateChanged(_)
        | ServerNotification::SessionChanged(_)
        | ServerNotification::CommandOutput(_)
        | ServerNotification::CommandExited(_) => false,
    }
}

#[test]
fn approvals_executions_and_sessions_arrive_as_the_records_the_calls_return() {
    let fixture = Fixture::new(None);
    fixture
        .host
        .session_create(SessionCreateParams {
            session_id: Some("s1".into()),
            workspace_root: fixture.root(),
            mode: Some(Mode::Plan),
            permission_mode: None,
        })
        .unwrap();
    assert_eq!(fixture.recorder.drain(), [], "a new session is not a change");
    let turn = fixture
        .host
        .turn_start(TurnStartParams {
            session_id: "s1".into(),
            prompt: String::new(),
            origin: Origin::Interactive,
            mode: None,
        })
        .unwrap();
    assert_eq!(
        fixture.recorder.drain(),
        [ServerNotification::SessionChanged(SessionChangedNotification {
            session: fixture.session("s1")
        })]
    );
    let approval = fixture.submit_in("s1", &turn.turn_id);
    let pending = fixture.session("s1");
    assert_eq!(pending.pending_approval_id.as_deref(), Some(approval.id.as_str()));
    assert_eq!(
        fixture.recorder.drain(),
        [
            ServerNotification::PlanApprovalRequested(PlanApprovalRequestedNotification {
                approval: approval.clone(),
                card_url: None,
            }),
            ServerNotification::SessionChanged(SessionChangedNotification { session: pending }),
        ]
    );

    let decision = fixture
        .host
        .plan_approve(PlanApproveParams {
            approval_id: approval.id.clone(),
            permission_mode: Some(PermissionMode::Auto),
        })
        .unwrap();
    let execution_id = decision.approval.execution_id.clone().unwrap().into_string();
    let state = |state| {
        ServerNotification::ExecutionStateChanged(ExecutionStateChangedNotification {
            session_id: "s1".into(),
            execution_id: execution_id.clone(),
            state,
        })
    };
    assert_eq!(decision.approval.permission_mode, Some(PermissionMode::Auto));
    assert_eq!(
        fixture.recorder.drain(),
        [
            ServerNotification::PlanApprovalResolved(PlanApprovalResolvedNotification {
                approval: decision.approval.clone()
            }),
            state(ExecutionState::Queued),
            ServerNotification::SessionChanged(SessionChangedNotification {
                session: decision.session.clone()
            }),
        ]
    );

    let running = fixture
        .host
        .execution_start(ExecutionStartParams {
            execution_id: execution_id.as_str().into(),
        })
        .unwrap();
    assert_eq!(running.execution_state, Some(ExecutionState::Running));
    assert_eq!(fixture.recorder.drain(), [state(ExecutionState::Running)]);

    fixture
        .host
        .execution_complete(ExecutionCompleteParams {
            execution_id: execution_id.as_str().into(),
        })
        .unwrap();
    let idle = fixture.session("s1");
    assert_eq!(idle.active_execution_id, None);
    assert_eq!(idle.mode, Mode::Agent);
    assert_eq!(
        fixture.recorder.drain(),
        [
            state(ExecutionState::Completed),
            ServerNotification::SessionChanged(SessionChangedNotification { session: idle })
        ]
    );

    // A rejection resolves the approval without an execution.
    fixture
        .host
        .session_configure(SessionConfigureParams {
            session_id: "s1".into(),
            mode: Some(Mode::Plan),
            ..SessionConfigureParams::default()
        })
        .unwrap();
    let second = fixture.submit("s1");
    fixture.recorder.drain();
    let rejected = fixture
        .host
        .plan_reject(PlanRejectParams {
            approval_id: second.id.clone(),
        })
        .unwrap();
    assert_eq!(rejected.approval.status, ApprovalStatus::Rejected);
    assert_eq!(rejected.approval.execution_id, None);
    assert_eq!(
        fixture.recorder.drain(),
        [
            ServerNotification::PlanApprovalResolved(PlanApprovalResolvedNotification {
                approval: rejected.approval
            }),
            ServerNotification::SessionChanged(SessionChangedNotification {
                session: rejected.session
            }),
        ]
    );
}

/// A listener receives the protocol's notification itself: the very value
/// (type and JSON) a `serve` client reads, method and params.
#[test]
fn a_listener_receives_the_wire_notification_itself() {
    let fixture = Fixture::new(None);
    fixture
        .host
        .session_create(SessionCreateParams {
            session_id: Some("s1".into()),
            workspace_root: fixture.root(),
            mode: Some(Mode::Plan),
            permission_mode: None,
        })
        .unwrap();
    fixture
        .host
        .turn_start(TurnStartParams {
            session_id: "s1".into(),
            prompt: String::new(),
            origin: Origin::Interactive,
            mode: None,
        })
        .unwrap();
    let events: Vec<plan_protocol::ServerNotification> = fixture.recorder.drain();
    let [changed] = events.as_slice() else {
        panic!("{events:?}");
    };
    assert_eq!(
        changed.method(),
        plan_protocol::notification_method::SESSION_CHANGED
    );
    let wire = serde_json::to_value(changed).unwrap();
    assert_eq!(wire["method"], "session/changed");
    assert_eq!(
        wire["params"]["session"],
        serde_json::to_value(fixture.session("s1")).unwrap()
    );
    assert_eq!(
        serde_json::from_value::<ServerNotification>(wire).unwrap(),
        *changed
    );
}

/// `plan_approve` re-reads the artifact inside the decision: a rewritten or
/// removed file is refused with its code, nothing changes and no event goes
/// out; `plan_reject` still decides.
#[test]
fn approving_a_tampered_or_missing_artifact_is_refused_and_changes_nothing() {
    let fixture = Fixture::new(None);
    let approval = fixture.submit("s1");
    let session = fixture.session("s1");
    fixture.recorder.drain();
    let path = fixture.workspace.join(&approval.artifact.as_ref().unwrap().path);
    let refused_code = |error: PlanError| match error {
        PlanError::Failed { code, .. } => code,
    };
    std::fs::write(&path, "# Plan\n\n1. Delete everything.\n").unwrap();
    let tampered = fixture
        .host
        .plan_approve(PlanApproveParams {
            approval_id: approval.id.clone(),
            permission_mode: Some(PermissionMode::Auto),
        })
        .unwrap_err();
    assert_eq!(refused_code(tampered), ErrorCode::ArtifactIntegrityMismatch);
    std::fs::remove_file(&path).unwrap();
    let missing = fixture
        .host
        .plan_approve(PlanApproveParams {
            approval_id: approval.id.clone(),
            permission_mode: Some(PermissionMode::Ask),
        })
        .unwrap_err();
    assert_eq!(refused_code(missing), ErrorCode::ArtifactMissing);
    assert_eq!(
        fixture
            .host
            .plan_get(PlanGetParams {
                approval_id: approval.id.clone()
            })
            .unwrap(),
        approval
    );
    assert_eq!(fixture.session("s1"), session);
    assert_eq!(fixture.recorder.drain(), [], "a refused approval sends no event");
    let rejected = fixture
        .host
        .plan_reject(PlanRejectParams {
            approval_id: approval.id.clone(),
        })
        .unwrap();
    assert_eq!(rejected.approval.status, ApprovalStatus::Rejected);
}

#[test]
fn timer_expiry_arrives_as_a_resolved_approval_on_the_timer_thread() {
    let fixture = Fixture::new(Some(200));
    let approval = fixture.submit("s1");
    fixture.recorder.drain();
    let events = fixture.recorder.drain_until("expiry", |event| {
        is_resolved(event, approval.id.as_str(), ApprovalStatus::Expired)
    });
    let Some(ServerNotification::PlanApprovalResolved(PlanApprovalResolvedNotification {
        approval: expired,
    })) = events.last()
    else {
        panic!("{events:?}");
    };
    assert_eq!(expired.error_code, Some(ErrorCode::PlanApprovalTimeout));
    assert_eq!(
        expired.expires_at, approval.expires_at,
        "the deadline never moves"
    );
    assert_eq!(
        expired,
        &fixture
            .host
            .plan_get(PlanGetParams {
                approval_id: approval.id.clone()
            })
            .unwrap()
    );
    let threads = fixture.recorder.expiry_threads.lock().unwrap().clone();
    assert_eq!(threads.len(), 1);
    assert_ne!(
        threads[0],
        std::thread::current().id(),
        "the timer's thread delivered it"
    );
    let session = fixture.session("s1");
    let changed = fixture.recorder.drain_until("the session's change", |event| {
        matches!(event, ServerNotification::SessionChanged(_))
    });
    assert_eq!(
        changed,
        [ServerNotification::SessionChanged(SessionChangedNotification {
            session
        })]
    );
}

#[test]
fn command_output_and_exit_arrive_typed_in_order() {
    let fixture = Fixture::new(None);
    let info = fixture.host.sandbox_info();
    assert!(
        !info
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("was not found"),
        "the sandbox helper is missing: build it with `cargo build -p plan-exec` (cargo test --workspace does)"
    );
    // Under `ask` the Bash call awaits a person, and then runs in the
    // workspace-write sandbox like an `auto` one.
    fixture
        .host
        .session_create(SessionCreateParams {
            session_id: Some("agent".into()),
            workspace_root: fixture.root(),
            mode: Some(Mode::Agent),
            permission_mode: None,
        })
        .unwrap();
    let turn = fixture
        .host
        .turn_start(TurnStartParams {
            session_id: "agent".into(),
            prompt: String::new(),
            origin: Origin::Interactive,
            mode: None,
        })
        .unwrap();
    let bash = call(
        "b1",
        "Bash",
        r#"{"command":"printf out; printf err >&2","timeoutMs":10000}"#,
    );
    let decided = fixture
        .host
        .turn_tool_calls(TurnToolCallsParams {
            session_id: "agent".into(),
            turn_id: turn.turn_id.as_str().into(),
            calls: vec![bash],
        })
        .unwrap();
    assert_eq!(
        (decided.results[0].decision, decided.results[0].host_run),
        (ToolCallDecision::Confirm, true)
    );
    fixture.recorder.drain();
    let start = || {
        fixture.host.command_start(CommandStartParams {
            session_id: "agent".into(),
            turn_id: turn.turn_id.as_str().into(),
            call_id: "b1".into(),
            command: "printf out; printf err >&2".to_owned(),
            cwd: None,
            timeout_ms: Some(10_000),
        })
    };
    let refused_code = |error: PlanError| match error {
        PlanError::Failed { code, .. } => code,
    };
    assert_eq!(
        start().map_err(refused_code).unwrap_err(),
        ErrorCode::CommandNotAllowed,
        "not confirmed yet"
    );
    let confirmed = fixture
        .host
        .tool_confirm(ToolConfirmParams {
            session_id: "agent".into(),
            turn_id: turn.turn_id.as_str().into(),
            call_id: "b1".into(),
            allow: true,
        })
        .unwrap();
    assert_eq!(
        (confirmed.decision, confirmed.host_run, confirmed.refusal()),
        (ToolCallDecision::Allow, true, None)
    );
    let again = fixture
        .host
        .tool_confirm(ToolConfirmParams {
            session_id: "agent".into(),
            turn_id: turn.turn_id.as_str().into(),
            call_id: "b1".into(),
            allow: false,
        })
        .map_err(refused_code)
        .unwrap_err();
    assert_eq!(again, ErrorCode::ToolConfirmationNotPending);
    if info.plan_sandbox != PlanSandbox::Landlock {
        assert_eq!(
            start().map_err(refused_code).unwrap_err(),
            ErrorCode::SandboxUnavailable
        );
        return;
    }
    let started = start().unwrap();
    assert_eq!(started.sandbox, CommandSandbox::WorkspaceWrite);
    let events = fixture.recorder.drain_until("command end", |event| {
        matches!(event, ServerNotification::CommandExited(_))
    });
    let mut chunks = Vec::new();
    let mut ended = None;
    for event in events {
        match event {
            ServerNotification::CommandOutput(CommandOutputNotification {
                session_id,
                call_id,
                stream,
                seq,
                chunk,
            }) => {
                assert_eq!((session_id.as_str(), call_id.as_str()), ("agent", "b1"));
                assert_eq!(
                    seq,
                    u64::try_from(chunks.len()).unwrap(),
                    "seq counts from 0 across streams"
                );
                chunks.push((stream, chunk));
            }
            ServerNotification::CommandExited(CommandExitedNotification {
                session_id,
                call_id,
                command,
            }) => {
                assert_eq!((session_id.as_str(), call_id.as_str()), ("agent", "b1"));
                ended = Some(command);
            }
            other @ (ServerNotification::PlanApprovalRequested(_)
            | ServerNotification::PlanApprovalResolved(_)
            | ServerNotification::ExecutionStateChanged(_)
            | ServerNotification::SessionChanged(_)) => panic!("unexpected {other:?}"),
        }
    }
    let text = |wanted: OutputStream| -> String {
        chunks
            .iter()
            .filter(|(stream, _)| *stream == wanted)
            .map(|(_, chunk)| chunk.as_str())
            .collect()
    };
    assert_eq!(text(OutputStream::Stdout), "out");
    assert_eq!(text(OutputStream::Stderr), "err");
    let ended = ended.unwrap();
    assert_eq!(ended.state, CommandState::Exited);
    assert_eq!(ended.exit_code, Some(0));
    assert_eq!((ended.stdout_bytes, ended.stderr_bytes), (3, 3));
    assert_eq!(
        ended,
        fixture
            .host
            .command_get(CommandGetParams {
                session_id: "agent".into(),
                call_id: "b1".into()
            })
            .unwrap()
    );
    assert_eq!(fixture.recorder.drain(), [], "nothing of the call after its end");
}

#[test]
fn a_panicking_listener_leaves_the_host_and_other_listeners_working() {
    let fixture = Fixture::with_listeners(None, vec![Arc::new(Panicking)]);
    let approval = fixture.submit("s1");
    let events = fixture.recorder.drain();
    assert!(
        events.contains(&ServerNotification::PlanApprovalRequested(
            PlanApprovalRequestedNotification {
                approval: approval.clone(),
                card_url: None,
            }
        )),
        "a later listener still hears it: {events:?}"
    );
    let decision = fixture
        .host
        .plan_approve(PlanApproveParams {
            approval_id: approval.id.clone(),
            permission_mode: Some(PermissionMode::Ask),
        })
        .unwrap();
    assert_eq!(decision.approval.status, ApprovalStatus::Approved);
    assert_eq!(
        fixture.recorder.drain().first(),
        Some(&ServerNotification::PlanApprovalResolved(
            PlanApprovalResolvedNotification {
                approval: decision.approval
            }
        ))
    );
}

#[test]
fn a_panicking_listener_on_the_timer_thread_does_not_stop_the_timer() {
    let fixture = Fixture::with_listeners(Some(200), vec![Arc::new(Panicking)]);
    for round in ["first", "second"] {
        let approval = fixture.submit("s1");
        fixture.recorder.drain_until(&format!("{round} expiry"), |event| {
            is_resolved(event, approval.id.as_str(), ApprovalStatus::Expired)
        });
        assert_eq!(
            fixture
                .host
                .plan_get(PlanGetParams {
                    approval_id: approval.id.clone()
                })
                .unwrap()
                .status,
            ApprovalStatus::Expired
        );
    }
}

#[test]
fn command_limits_meet_plan_cores_one_rule() {
    let dir = tempfile::tempdir().unwrap();
    let open = |command_timeout_ms: Option<u64>, command_max_timeout_ms: Option<u64>| {
        PlanHost::new(
            dir.path().join("plan.db").display().to_string(),
            HostConfig {
                command_timeout_ms,
                command_max_timeout_ms,
                ..HostConfig::default()
            },
        )
    };
    // A default above the maximum is refused, as `serve` refuses it.
    let Err(plan_ffi::PlanError::Failed { code, reason }) = open(Some(900_000), Some(600_000)) else {
        panic!("a default above the maximum was accepted");
    };
    assert_eq!(code, ErrorCode::InvalidParams, "{reason}");
    assert!(reason.contains("900000 ms"), "{reason}");
    // A smaller maximum alone lowers the default instead.
    let host = open(None, Some(60_000)).unwrap();
    host.shutdown();
}

#[test]
fn an_out_of_range_scratch_size_is_invalid_params_and_a_valid_one_opens() {
    let dir = tempfile::tempdir().unwrap();
    let open = |scratch_size_mb: Option<u64>| {
        PlanHost::new(
            dir.path().join("plan.db").display().to_string(),
            HostConfig {
                scratch_size_mb,
                ..HostConfig::default()
            },
        )
    };
    for size in [0, 1_048_577, u64::MAX] {
        let Err(plan_ffi::PlanError::Failed { code, reason }) = open(Some(size)) else {
            panic!("a scratch size of {size} MB was accepted");
        };
        assert_eq!(code, ErrorCode::InvalidParams, "{reason}");
        assert!(reason.contains(&format!("{size} MB")), "{reason}");
    }
    assert!(!dir.path().join("plan.db").exists());
    let host = open(Some(64)).unwrap();
    host.shutdown();
}

/// `sandbox_info` is the record `initialize` reports as
/// `capabilities.commands`, on a host whose sandbox works and on one whose
/// helper is missing.
#[test]
fn the_sandbox_info_is_the_capabilities_record_initialize_reports() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-helper");
    for (name, helper) in [("probed.db", None), ("helperless.db", Some(missing))] {
        let options = HostConfig {
            sandbox_helper: helper.clone(),
            ..HostConfig::default()
        };
        let host = PlanHost::new(dir.path().join(name).to_string_lossy().into_owned(), options).unwrap();
        let info: plan_protocol::CommandCapabilities = host.sandbox_info();
        if helper.is_some() {
            assert_eq!(info.plan_sandbox, PlanSandbox::Unavailable);
            assert!(
                info.reason
                    .as_deref()
                    .unwrap_or_default()
                    .contains("no-such-helper"),
                "{info:?}"
            );
        }
        let init = host
            .handle_json(
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":9}}"#.to_owned(),
            )
            .unwrap();
        let init: serde_json::Value = serde_json::from_str(&init).unwrap();
        assert_eq!(
            init["result"]["capabilities"]["commands"],
            serde_json::to_value(&info).unwrap()
        );
        host.shutdown();
    }
}

#[test]
fn skip_namespaces_refuses_auto_and_reports_two_layers() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    let options = HostConfig {
        skip_namespaces: true,
        ..HostConfig::default()
    };
    let host = PlanHost::new(dir.path().join("plan.db").to_string_lossy().into_owned(), options).unwrap();
    if host.sandbox_info().plan_sandbox != PlanSandbox::Landlock {
        eprintln!("no kernel sandbox here: nothing to skip");
        return;
    }
    let init = host
        .handle_json(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":9}}"#.to_owned(),
        )
        .unwrap();
    let init: serde_json::Value = serde_json::from_str(&init).unwrap();
    assert_eq!(
        init["result"]["capabilities"]["commands"]["layers"],
        serde_json::json!(["landlock", "seccomp"])
    );
    let root = Some(workspace.to_string_lossy().into_owned());
    host.session_create(SessionCreateParams {
        session_id: Some("auto".into()),
        workspace_root: root,
        mode: Some(Mode::Agent),
        permission_mode: Some(PermissionMode::Auto),
    })
    .unwrap();
    let turn = host
        .turn_start(TurnStartParams {
            session_id: "auto".into(),
            prompt: String::new(),
            origin: Origin::Interactive,
            mode: None,
        })
        .unwrap();
    host.turn_tool_calls(TurnToolCallsParams {
        session_id: "auto".into(),
        turn_id: turn.turn_id.as_str().into(),
        calls: vec![call("b1", "Bash", r#"{"command":"true"}"#)],
    })
    .unwrap();
    let refused = host.command_start(CommandStartParams {
        session_id: "auto".into(),
        turn_id: turn.turn_id.into(),
        call_id: "b1".into(),
        command: "true".to_owned(),
        cwd: None,
        timeout_ms: None,
    });
    assert!(
        matches!(
            refused,
            Err(plan_ffi::PlanError::Failed {
                code: ErrorCode::SandboxUnavailable,
                ..
            })
        ),
        "{refused:?}"
    );
}

/// The host options an FFI embedder has for its commands reach them: more
/// protected paths stay read-only under `auto` (where namespaces enforce
/// them), and the secret markers decide which variables a command inherits.
#[test]
fn protected_paths_and_secret_markers_reach_the_commands() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    let kept = workspace.join("kept");
    std::fs::write(&kept, "original\n").unwrap();
    let options = HostConfig {
        protected_paths: vec![kept.clone()],
        // Cargo sets this variable for every test process it runs.
        secret_env_markers: Some(vec!["cargo_manifest".to_owned()]),
        ..HostConfig::default()
    };
    let host = PlanHost::new(dir.path().join("plan.db").to_string_lossy().into_owned(), options).unwrap();
    let init = host
        .handle_json(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":9}}"#.to_owned(),
        )
        .unwrap();
    let init: serde_json::Value = serde_json::from_str(&init).unwrap();
    let layers = &init["result"]["capabilities"]["commands"]["layers"];
    if *layers != serde_json::json!(["landlock", "seccomp", "namespaces"]) {
        eprintln!("no sandbox with namespaces here ({layers}): protected paths are not enforced");
        return;
    }
    let recorder = Arc::new(Recorder::default());
    host.add_listener(Arc::clone(&recorder) as Arc<dyn PlanEventListener>);
    host.session_create(SessionCreateParams {
        session_id: Some("auto".into()),
        workspace_root: Some(workspace.to_string_lossy().into_owned()),
        mode: Some(Mode::Agent),
        permission_mode: Some(PermissionMode::Auto),
    })
    .unwrap();
    let turn = host
        .turn_start(TurnStartParams {
            session_id: "auto".into(),
            prompt: String::new(),
            origin: Origin::Interactive,
            mode: None,
        })
        .unwrap();
    let command = format!(
        "echo forged > {kept} 2>/dev/null && echo written || echo refused; \
         echo new > {fresh} && echo fresh; echo \"${{CARGO_MANIFEST_DIR-unset}}\"",
        kept = kept.display(),
        fresh = workspace.join("fresh").display()
    );
    host.turn_tool_calls(TurnToolCallsParams {
        session_id: "auto".into(),
        turn_id: turn.turn_id.as_str().into(),
        calls: vec![call(
            "b1",
            "Bash",
            &serde_json::json!({"command": command}).to_string(),
        )],
    })
    .unwrap();
    let started = host
        .command_start(CommandStartParams {
            session_id: "auto".into(),
            turn_id: turn.turn_id.into(),
            call_id: "b1".into(),
            command,
            cwd: None,
            timeout_ms: None,
        })
        .unwrap();
    assert_eq!(started.sandbox, CommandSandbox::WorkspaceWrite);
    let events = recorder.drain_until("command end", |event| {
        matches!(event, ServerNotification::CommandExited(_))
    });
    let stdout: String = events
        .iter()
        .filter_map(|event| match event {
            ServerNotification::CommandOutput(CommandOutputNotification {
                stream: OutputStream::Stdout,
                chunk,
                ..
            }) => Some(chunk.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(stdout, "refused\nfresh\nunset\n");
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "original\n");
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
}

#[test]
fn the_web_option_serves_cards_whose_urls_reach_the_app() {
    let options = HostConfig {
        web_address: Some("127.0.0.1:0".to_owned()),
        ..HostConfig::default()
    };
    let fixture = Fixture::with_options(options, Vec::new());
    let approval = fixture.submit("s1");
    let url = fixture
        .host
        .plan_card_url(PlanCardUrlParams {
            approval_id: approval.id.clone(),
        })
        .unwrap()
        .url;
    assert!(
        url.starts_with("http://127.0.0.1:") && url.contains("/card/"),
        "{url}"
    );
    let events = fixture.recorder.drain();
    assert!(
        events.contains(&ServerNotification::PlanApprovalRequested(
            PlanApprovalRequestedNotification {
                approval: approval.clone(),
                card_url: Some(url.clone()),
            }
        )),
        "{events:?}"
    );
    // The page is served while the approval is pending, and not after shutdown.
    let address = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let path = &url[url.find("/card/").unwrap()..];
    let get = |path: &str| {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        write!(stream, "GET {path} HTTP/1.1\r\nHost: {address}\r\n\r\n").unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).unwrap();
        reply
    };
    assert!(get(path).starts_with("HTTP/1.1 200"));
    fixture.host.shutdown();
    assert!(
        std::net::TcpStream::connect(&address).is_err(),
        "nothing listens after shutdown"
    );

    // Another address needs the explicit opt-in; without a server there is no URL.
    let dir = tempfile::tempdir().unwrap();
    let exposed = HostConfig {
        web_address: Some("0.0.0.0:0".to_owned()),
        ..HostConfig::default()
    };
    let refused = PlanHost::new(dir.path().join("plan.db").to_string_lossy().into_owned(), exposed);
    assert!(matches!(
        refused,
        Err(plan_ffi::PlanError::Failed {
            code: ErrorCode::InvalidParams,
            ..
        })
    ));
    let garbled = HostConfig {
        web_address: Some("localhost".to_owned()),
        ..HostConfig::default()
    };
    let refused = PlanHost::new(dir.path().join("plan.db").to_string_lossy().into_owned(), garbled);
    assert!(matches!(
        refused,
        Err(plan_ffi::PlanError::Failed {
            code: ErrorCode::InvalidParams,
            ..
        })
    ));
    let plain = Fixture::new(None);
    let pending = plain.submit("s1");
    let decided = plain.submit("s2");
    plain
        .host
        .plan_reject(PlanRejectParams {
            approval_id: decided.id.clone(),
        })
        .unwrap();
    // Without a web server, `plan_card_url` answers as `plan/cardUrl` does
    // through the connection: the approval's own state first.
    plain
        .host
        .handle_json(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":9}}"#.to_owned(),
        )
        .unwrap();
    for (id, expected) in [
        (pending.id.to_string(), ErrorCode::InvalidParams),
        (decided.id.to_string(), ErrorCode::ApprovalNotPending),
        ("no-such-approval".to_owned(), ErrorCode::ApprovalNotFound),
    ] {
        let typed = plain.host.plan_card_url(PlanCardUrlParams {
            approval_id: id.as_str().into(),
        });
        assert!(
            matches!(&typed, Err(plan_ffi::PlanError::Failed { code, .. }) if *code == expected),
            "{id}: {typed:?}"
        );
        let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "plan/cardUrl",
            "params": {"approvalId": id}});
        let answer: serde_json::Value =
            serde_json::from_str(&plain.host.handle_json(request.to_string()).unwrap()).unwrap();
        assert_eq!(
            answer["error"]["data"]["code"],
            plan_ffi::error_code_wire_name(expected),
            "{id}: {answer}"
        );
    }
}

#[path = "ffi/methods.rs"]
mod methods;

// The collector stand-in of the host tests (an OTLP/HTTP receiver on loopback).
#[allow(dead_code)]
#[path = "../../host/tests/host/collector.rs"]
mod collector;

#[test]
fn the_otel_options_export_the_audit_and_a_bad_one_is_invalid_params() {
    let collector = collector::Collector::start();
    let fixture = Fixture::with_options(
        HostConfig {
            otel: ExportOverrides {
                logs_endpoint: Some(collector.endpoint()),
                protocol: Some("http/json".to_owned()),
                headers: vec!["x-app=ffi".to_owned()],
                service_name: Some("embedded".to_owned()),
                ..ExportOverrides::default()
            },
            otel_from_environment: Some(false),
            ..HostConfig::default()
        },
        Vec::new(),
    );
    let approval = fixture.submit("s1");
    let received = collector.wait_for_seqs(1);
    assert_eq!(received[0].event(), "plan_checkpoint.plan.submitted");
    assert_eq!(
        received[0].attribute("plan_checkpoint.approval.id"),
        Some(serde_json::json!(approval.id))
    );
    assert_eq!(
        received[0].resource["service.name"],
        serde_json::json!("embedded")
    );
    assert!(received[0].head.contains("\r\nx-app: ffi\r\n"));
    assert_eq!(received[0].content_type, "application/json");
    fixture.host.shutdown();

    let dir = tempfile::tempdir().unwrap();
    for options in [
        HostConfig {
            otel: ExportOverrides {
                logs_endpoint: Some("http://127.0.0.1:4318/v1/logs".to_owned()),
                protocol: Some("grpc".to_owned()),
                ..ExportOverrides::default()
            },
            ..HostConfig::default()
        },
        HostConfig {
            otel: ExportOverrides {
                include_content: true,
                ..ExportOverrides::default()
            },
            otel_from_environment: Some(false),
            ..HostConfig::default()
        },
        HostConfig {
            otel: ExportOverrides {
                logs_endpoint: Some("https://127.0.0.1:4318/v1/logs".to_owned()),
                certificate: Some(dir.path().join("missing.pem")),
                ..ExportOverrides::default()
            },
            otel_from_environment: Some(false),
            ..HostConfig::default()
        },
        HostConfig {
            otel: ExportOverrides {
                logs_endpoint: Some("https://127.0.0.1:4318/v1/logs".to_owned()),
                client_certificate: Some(dir.path().join("client.pem")),
                ..ExportOverrides::default()
            },
            otel_from_environment: Some(false),
            ..HostConfig::default()
        },
    ] {
        let Err(plan_ffi::PlanError::Failed { code, reason }) =
            PlanHost::new(dir.path().join("plan.db").display().to_string(), options)
        else {
            panic!("an unusable export configuration was accepted");
        };
        assert_eq!(code, ErrorCode::InvalidParams, "{reason}");
    }
}
