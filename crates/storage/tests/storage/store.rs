//! The typed store: sessions, approvals through plan-core transitions,
//! compare-and-set races on real connections, the startup fence, the
//! database-level invariants, queries and settings.

use std::path::Path;
use std::sync::{Arc, Barrier};

use plan_core::{
    ActiveTurn, ApprovalStatus, BootEpoch, Context, Effect, ErrorCode, Event, ExecutionState, Limits, Mode,
    Origin, PermissionMode, PlanApproval, Reply, RowGuard, Session, SessionState, ToolCall, TurnKind, handle,
};
use plan_storage::{ApprovalFilter, StorageError, Store, read_artifact, write_artifact};

use crate::support::pending;

/// The host's re-read of `approval`'s artifact found it as submitted.
fn matching_artifact(approval: &PlanApproval) -> plan_core::ArtifactVerification {
    plan_core::ArtifactVerification {
        approval_id: approval.id.clone(),
        result: plan_core::ArtifactCheck::Ok,
        error_code: None,
        detail: None,
    }
}

const NOW: i64 = 1_790_000_000_000;

fn context(now: i64) -> Context {
    Context {
        now,
        epoch: BootEpoch(7),
        limits: Limits::default(),
    }
}

fn new_store(dir: &Path) -> Store {
    Store::open(dir.join("host.db")).unwrap().0
}

fn plan_session(id: &str, root: Option<&Path>) -> Session {
    let mut session = Session::new(id, root.map(|root| root.to_str().unwrap().to_owned()));
    session.mode = Mode::Plan;
    session
}

/// A session in Plan with a pending approval, stored, and the in-memory
/// state plan-core would hold for it.
fn with_pending(store: &mut Store, session_id: &str, approval_id: &str) -> SessionState {
    let session = plan_session(session_id, None);
    store.create_session(&session, NOW).unwrap();
    let approval = pending(approval_id, session_id, NOW);
    store
        .apply(&[Effect::InsertApproval(approval.clone())], NOW)
        .unwrap();
    SessionState {
        session,
        active_turn: Some(ActiveTurn {
            turn_id: approval.turn_id.clone(),
            mode: Mode::Plan,
            origin: Origin::Interactive,
            kind: TurnKind::Prompt,
            epoch: BootEpoch(7),
            commands: Vec::new(),
            confirmations: Vec::new(),
        }),
        pending_approval: Some(approval),
        live_execution: None,
    }
}

#[test]
fn sessions_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    let mut session = Session::new("s1", Some("/home/dev/project".to_owned()));
    session.provider = Some("anthropic".to_owned());
    store.create_session(&session, NOW).unwrap();
    assert_eq!(
        store.get_session(&plan_core::SessionId::from("s1")).unwrap(),
        Some(session.clone())
    );
    assert_eq!(
        store.get_session(&plan_core::SessionId::from("nope")).unwrap(),
        None
    );

    let error = store.create_session(&session, NOW).unwrap_err();
    assert_eq!(error.code(), ErrorCode::SessionAlreadyExists);

    session.mode = Mode::Plan;
    session.permission_mode = PermissionMode::AcceptEdits;
    session.shell = Some("zsh".to_owned());
    session.model = None;
    store.save_session(&session, NOW + 1).unwrap();
    assert_eq!(
        store.get_session(&plan_core::SessionId::from("s1")).unwrap(),
        Some(session)
    );

    let error = store.save_session(&Session::new("ghost", None), NOW).unwrap_err();
    assert_eq!(error.code(), ErrorCode::SessionNotFound);
}

#[test]
fn a_read_transaction_hands_back_its_reads_and_its_error_and_then_ends() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    let session = Session::new("s1", None);
    store.create_session(&session, NOW).unwrap();
    let read = store
        .read(|store| {
            Ok::<_, StorageError>((
                store.get_session(&plan_core::SessionId::from("s1"))?,
                store.pending_approval(&plan_core::SessionId::from("s1"))?,
            ))
        })
        .unwrap();
    assert_eq!(read, (Some(session.clone()), None));
    // An error inside ends the transaction too: the next write is not
    // refused as a transaction within a transaction.
    let error = store
        .read(|_| -> Result<(), StorageError> { Err(StorageError::SessionNotFound { id: "x".to_owned() }) })
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::SessionNotFound);
    store.save_session(&session, NOW + 1).unwrap();
}

#[test]
fn a_plan_runs_from_submission_to_completed_execution() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    let session = plan_session("s1", Some(workspace.path()));
    store.create_session(&session, NOW).unwrap();
    let mut state = SessionState::idle(session);

    let step = |state: &mut SessionState, store: &mut Store, now: i64, event: Event| -> Reply {
        let transition = handle(state, &context(now), event);
        store.apply(&transition.effects, now).unwrap();
        *state = transition.state;
        transition.reply.unwrap()
    };
    step(
        &mut state,
        &mut store,
        NOW,
        Event::StartTurn {
            turn_id: "t1".into(),
            origin: Origin::Interactive,
            mode: None,
        },
    );
    let transition = handle(
        &state,
        &context(NOW),
        Event::ToolCalls {
            turn_id: "t1".into(),
            // No Bash call: nothing for the host to look at.
            commands: plan_core::CommandFacts::default(),
            calls: vec![ToolCall {
                call_id: "c1".into(),
                name: "SubmitPlan".to_owned(),
                input: serde_json::json!({"title": "Split parser", "markdown": "# Plan\r\n\n1. a\n", "question": "OK?"}),
            }],
        },
    );
    let [Effect::WriteArtifact(request)] = transition.effects.as_slice() else {
        panic!("expected one WriteArtifact effect: {:?}", transition.effects);
    };
    // WriteArtifact is not a storage effect: applying it writes nothing.
    store.apply(&transition.effects, NOW).unwrap();
    assert_eq!(store.list_approvals(&ApprovalFilter::default()).unwrap().len(), 0);
    let artifact = write_artifact(
        &request.workspace_root,
        &request.title,
        request.markdown.as_bytes(),
        NOW,
        "k3j9",
    )
    .unwrap();
    let request = request.clone();
    state = transition.state;
    step(
        &mut state,
        &mut store,
        NOW + 10,
        Event::ArtifactWritten {
            request,
            approval_id: "a1".into(),
            artifact: artifact.clone(),
        },
    );
    let stored = store
        .pending_approval(&plan_core::SessionId::from("s1"))
        .unwrap()
        .unwrap();
    assert_eq!(stored.artifact.as_ref(), Some(&artifact));
    assert_eq!(stored.title, "Split parser");
    assert_eq!(stored.question, "OK?");
    assert_eq!(stored.expires_at, NOW + 10 + 1_800_000);
    let root = workspace.path().to_str().unwrap();
    assert_eq!(read_artifact(root, &artifact).unwrap(), b"# Plan\r\n\n1. a\n");

    step(
        &mut state,
        &mut store,
        NOW + 20,
        Event::Approve {
            artifact: matching_artifact(&stored),
            approval: stored,
            permission_mode: Some(PermissionMode::AcceptEdits),
            execution_id: "x1".into(),
            execution_turn_id: "t2".into(),
        },
    );
    let session = store
        .get_session(&plan_core::SessionId::from("s1"))
        .unwrap()
        .unwrap();
    assert_eq!(session.mode, Mode::Agent);
    assert_eq!(session.permission_mode, PermissionMode::AcceptEdits);
    assert_eq!(
        store.pending_approval(&plan_core::SessionId::from("s1")).unwrap(),
        None
    );
    let live = store
        .live_execution(&plan_core::SessionId::from("s1"))
        .unwrap()
        .unwrap();
    assert_eq!(live.execution_state, Some(ExecutionState::Queued));
    assert_eq!(live.execution_id, Some("x1".into()));
    assert_eq!(
        store
            .find_by_execution_id(&plan_core::ExecutionId::from("x1"))
            .unwrap()
            .unwrap()
            .approval,
        live
    );

    for event in [
        Event::StartExecution {
            execution_id: "x1".into(),
            epoch: BootEpoch(7),
        },
        Event::CompleteExecution {
            execution_id: "x1".into(),
            epoch: BootEpoch(7),
        },
    ] {
        step(&mut state, &mut store, NOW + 30, event);
    }
    let done = store
        .get_approval(&plan_core::ApprovalId::from("a1"))
        .unwrap()
        .unwrap()
        .approval;
    assert_eq!(done.status, ApprovalStatus::Approved);
    assert_eq!(done.execution_state, Some(ExecutionState::Completed));
    assert_eq!(
        store.live_execution(&plan_core::SessionId::from("s1")).unwrap(),
        None
    );
    assert!(store.live_rows().unwrap().is_empty());
}

/// The effects one decision produces from the same loaded state.
fn decision(state: &SessionState, kind: usize, serial: usize) -> Vec<Effect> {
    let approval = state.pending_approval.clone().unwrap();
    let (now, event) = match kind {
        0 => (
            NOW + 1,
            Event::Approve {
                artifact: matching_artifact(&approval),
                approval,
                permission_mode: Some(PermissionMode::Auto),
                execution_id: format!("x-{serial}").into(),
                execution_turn_id: format!("xt-{serial}").into(),
            },
        ),
        1 => (NOW + 1, Event::Reject { approval }),
        // Past the deadline: the tick expires it.
        _ => (NOW + 1_800_000, Event::Tick),
    };
    let transition = handle(state, &context(now), event);
    assert!(transition.reply.is_ok());
    assert!(!transition.effects.is_empty());
    transition.effects
}

#[test]
fn racing_decisions_on_real_connections_have_exactly_one_winner() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.db");
    let mut setup = Store::open(&path).unwrap().0;
    for round in 0..24 {
        let session_id = format!("s{round}");
        let approval_id = format!("a{round}");
        let state = with_pending(&mut setup, &session_id, &approval_id);
        // Two or three racers: approve, reject and (every other round) expire.
        let racers = if round % 2 == 0 { 3 } else { 2 };
        let barrier = Arc::new(Barrier::new(racers));
        let handles: Vec<_> = (0..racers)
            .map(|kind| {
                let effects = decision(&state, kind, round);
                let barrier = Arc::clone(&barrier);
                let path = path.clone();
                std::thread::spawn(move || {
                    let mut store = Store::open(&path).unwrap().0;
                    barrier.wait();
                    store.apply(&effects, NOW + 2).map(|()| kind)
                })
            })
            .collect();
        let results: Vec<Result<usize, StorageError>> =
            handles.into_iter().map(|handle| handle.join().unwrap()).collect();
        let winners: Vec<usize> = results
            .iter()
            .filter_map(|result| result.as_ref().ok().copied())
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        for loser in results.iter().filter_map(|result| result.as_ref().err()) {
            assert_eq!(loser.code(), ErrorCode::ApprovalNotPending, "{loser}");
            assert!(loser.to_string().contains(&approval_id), "{loser}");
        }
        let row = setup
            .get_approval(&plan_core::ApprovalId::from(&approval_id))
            .unwrap()
            .unwrap()
            .approval;
        let session = setup
            .get_session(&plan_core::SessionId::from(&session_id))
            .unwrap()
            .unwrap();
        match winners[0] {
            0 => {
                assert_eq!(row.status, ApprovalStatus::Approved);
                assert_eq!(session.mode, Mode::Agent);
                assert_eq!(session.permission_mode, PermissionMode::Auto);
            }
            1 => {
                assert_eq!(row.status, ApprovalStatus::Rejected);
                assert_eq!(session.mode, Mode::Plan, "the losing approve left no trace");
            }
            _ => {
                assert_eq!(row.status, ApprovalStatus::Expired);
                assert_eq!(row.error_code, Some(ErrorCode::PlanApprovalTimeout));
                assert_eq!(session.mode, Mode::Plan);
            }
        }
    }
}

#[test]
fn a_lost_compare_and_set_rolls_back_the_whole_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    let state = with_pending(&mut store, "s1", "a1");
    let approve = decision(&state, 0, 1);
    let reject = decision(&state, 1, 1);
    store.apply(&reject, NOW + 1).unwrap();
    // Approve carries a SaveSession after the update; neither may land.
    let error = store.apply(&approve, NOW + 2).unwrap_err();
    assert_eq!(error.code(), ErrorCode::ApprovalNotPending);
    assert_eq!(
        store
            .get_session(&plan_core::SessionId::from("s1"))
            .unwrap()
            .unwrap()
            .mode,
        Mode::Plan
    );
    // Session first, stale update second: the session change is undone too.
    let mut changed = store
        .get_session(&plan_core::SessionId::from("s1"))
        .unwrap()
        .unwrap();
    changed.shell = Some("fish".to_owned());
    let mut effects = vec![Effect::SaveSession(changed)];
    effects.extend(approve);
    assert!(store.apply(&effects, NOW + 3).is_err());
    assert_eq!(
        store
            .get_session(&plan_core::SessionId::from("s1"))
            .unwrap()
            .unwrap()
            .shell,
        None
    );

    // A lost race on an execution transition reports the execution.
    let state = with_pending(&mut store, "s2", "a2");
    let transition = handle(
        &state,
        &context(NOW + 1),
        Event::Approve {
            artifact: matching_artifact(&state.pending_approval.clone().unwrap()),
            approval: state.pending_approval.clone().unwrap(),
            permission_mode: Some(PermissionMode::Ask),
            execution_id: "x2".into(),
            execution_turn_id: "xt2".into(),
        },
    );
    store.apply(&transition.effects, NOW + 1).unwrap();
    let start = handle(
        &transition.state,
        &context(NOW + 2),
        Event::StartExecution {
            execution_id: "x2".into(),
            epoch: BootEpoch(7),
        },
    );
    store.apply(&start.effects, NOW + 2).unwrap();
    let error = store.apply(&start.effects, NOW + 3).unwrap_err();
    assert_eq!(error.code(), ErrorCode::ExecutionNotActive, "{error}");

    let mut ghost = pending("ghost", "s1", NOW);
    ghost.status = ApprovalStatus::Rejected;
    ghost.decided_at = Some(NOW);
    let error = store
        .apply(
            &[Effect::UpdateApproval {
                approval: ghost,
                expected: RowGuard {
                    status: ApprovalStatus::Pending,
                    execution_state: None,
                },
            }],
            NOW,
        )
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::ApprovalNotFound);
}

#[test]
fn a_second_pending_approval_is_refused_by_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    with_pending(&mut store, "s1", "a1");
    let error = store
        .apply(&[Effect::InsertApproval(pending("a2", "s1", NOW + 5))], NOW + 5)
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::SessionBusy, "{error}");
    assert!(matches!(error, StorageError::ApprovalConflict { .. }));
    let error = store
        .apply(&[Effect::InsertApproval(pending("a3", "nobody", NOW))], NOW)
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::SessionNotFound, "{error}");
}

#[test]
fn database_invariants_hold_against_raw_sql() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.db");
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "PRAGMA foreign_keys = ON;
         INSERT INTO sessions (id, created_at, updated_at) VALUES ('s1', 0, 0), ('s2', 0, 0);",
    )
    .unwrap();
    let columns = "id, session_id, turn_id, title, question, artifact_path, artifact_sha256, artifact_size, \
                   status, error_code, created_at, expires_at, decided_at, permission_mode, execution_id, \
                   execution_state, legacy_proposal_json";
    let sha = "a".repeat(64);
    let row = |id: &str, session: &str, status: &str, decided: &str, execution: &str| {
        format!(
            "INSERT INTO plan_approvals ({columns}) VALUES ('{id}', '{session}', 't', 'T', 'Q', \
             '.pi/plan/{id}.md', '{sha}', 3, '{status}', NULL, 0, 10, {decided}, {execution}, NULL)"
        )
    };
    let ok = |sql: String| {
        conn.execute(&sql, [])
            .unwrap_or_else(|error| panic!("{sql}: {error}"))
    };
    let refused = |sql: String, why: &str| {
        let error = conn.execute(&sql, []).expect_err(why);
        assert!(
            matches!(
                error.sqlite_error_code(),
                Some(rusqlite::ErrorCode::ConstraintViolation)
            ),
            "{why}: {error}"
        );
    };
    ok(row("p1", "s1", "pending", "NULL", "NULL, NULL, NULL"));
    refused(
        row("p2", "s1", "pending", "NULL", "NULL, NULL, NULL"),
        "two pending rows for one session",
    );
    ok(row("p3", "s2", "pending", "NULL", "NULL, NULL, NULL"));
    ok(row("e1", "s1", "approved", "5", "'ask', 'x1', 'queued'"));
    refused(
        row("e2", "s1", "approved", "5", "'auto', 'x2', 'running'"),
        "two live executions",
    );
    ok(row("e3", "s1", "approved", "5", "'auto', 'x3', 'completed'"));
    refused(
        row("e4", "s2", "approved", "5", "'auto', 'x3', 'queued'"),
        "a reused execution id",
    );
    refused(
        row("e5", "s2", "approved", "5", "NULL, NULL, NULL"),
        "approved at v10 without execution",
    );
    refused(
        row("e6", "s2", "approved", "5", "'ask', NULL, 'queued'"),
        "partial execution fields",
    );
    refused(
        row("r1", "s2", "rejected", "5", "'ask', 'x9', 'queued'"),
        "execution on a rejected row",
    );
    refused(
        row("r2", "s2", "changes_requested", "5", "NULL, NULL, NULL"),
        "a v8-only status",
    );
    refused(
        row("r3", "s2", "rejected", "NULL", "NULL, NULL, NULL"),
        "decided without decided_at",
    );
    refused(
        row("r4", "s2", "pending", "5", "NULL, NULL, NULL"),
        "pending with decided_at",
    );
    let no_artifact = format!(
        "INSERT INTO plan_approvals ({columns}) VALUES ('n1', 's2', 't', 'T', 'Q', NULL, NULL, NULL, \
         'rejected', NULL, 0, 10, 5, NULL, NULL, NULL, NULL)"
    );
    refused(no_artifact, "a v10 row without artifact");
    let bad_sha = row("b1", "s2", "rejected", "5", "NULL, NULL, NULL").replace(&sha, &"A".repeat(64));
    refused(bad_sha, "an uppercase sha");
    let escape = row("b2", "s2", "rejected", "5", "NULL, NULL, NULL").replace(".pi/plan/b2.md", "../b2.md");
    refused(escape, "an artifact path outside .pi/plan");
    let nested =
        row("b3", "s2", "rejected", "5", "NULL, NULL, NULL").replace(".pi/plan/b3.md", ".pi/plan/x/../b3.md");
    refused(nested, "an artifact path with a subdirectory");
    let bad_code = row("b4", "s2", "rejected", "5", "NULL, NULL, NULL")
        .replace("'rejected', NULL", "'rejected', 'oops'");
    refused(bad_code, "an error code that is not a code");
    let legacy = format!(
        "INSERT INTO plan_approvals ({columns}) VALUES ('l1', 's2', 't', '', '', NULL, NULL, NULL, \
         'approved', NULL, 0, 10, NULL, NULL, NULL, NULL, '{{}}')"
    );
    ok(legacy);
}

#[test]
fn the_startup_fence_interrupts_live_rows_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    let pending_state = with_pending(&mut store, "s-pending", "a-pending");
    let mut live_ids = Vec::new();
    for (index, advance) in [0, 1, 2].into_iter().enumerate() {
        let state = with_pending(&mut store, &format!("s-exec{index}"), &format!("a-exec{index}"));
        let approved = handle(
            &state,
            &context(NOW + 1),
            Event::Approve {
                artifact: matching_artifact(&state.pending_approval.clone().unwrap()),
                approval: state.pending_approval.clone().unwrap(),
                permission_mode: Some(PermissionMode::Ask),
                execution_id: format!("x{index}").into(),
                execution_turn_id: format!("xt{index}").into(),
            },
        );
        store.apply(&approved.effects, NOW + 1).unwrap();
        let mut current = approved.state;
        let events = [
            Event::StartExecution {
                execution_id: format!("x{index}").into(),
                epoch: BootEpoch(7),
            },
            Event::CompleteExecution {
                execution_id: format!("x{index}").into(),
                epoch: BootEpoch(7),
            },
        ];
        for event in events.into_iter().take(advance) {
            let transition = handle(&current, &context(NOW + 2), event);
            store.apply(&transition.effects, NOW + 2).unwrap();
            current = transition.state;
        }
        if advance < 2 {
            live_ids.push(format!("a-exec{index}"));
        }
    }
    let rejected = handle(
        &with_pending(&mut store, "s-rejected", "a-rejected"),
        &context(NOW + 1),
        Event::Reject {
            approval: pending("a-rejected", "s-rejected", NOW),
        },
    );
    store.apply(&rejected.effects, NOW + 1).unwrap();
    let before_history: Vec<_> = ["a-exec2", "a-rejected"]
        .iter()
        .map(|id| store.get_approval(&plan_core::ApprovalId::from(*id)).unwrap())
        .collect();

    let fence_time = NOW + 99;
    let changed = store.startup_fence(fence_time).unwrap();
    let mut changed_ids: Vec<&str> = changed.iter().map(|row| row.id.as_str()).collect();
    changed_ids.sort_unstable();
    assert_eq!(changed_ids, ["a-exec0", "a-exec1", "a-pending"]);
    for row in &changed {
        assert_eq!(store.get_approval(&row.id).unwrap().unwrap().approval, *row);
        assert_eq!(row.error_code, Some(ErrorCode::HostRestarted));
    }
    let interrupted = store
        .get_approval(&plan_core::ApprovalId::from("a-pending"))
        .unwrap()
        .unwrap()
        .approval;
    assert_eq!(interrupted.status, ApprovalStatus::Interrupted);
    assert_eq!(interrupted.decided_at, Some(fence_time));
    for id in &live_ids {
        let row = store
            .get_approval(&plan_core::ApprovalId::from(id))
            .unwrap()
            .unwrap()
            .approval;
        assert_eq!(row.status, ApprovalStatus::Approved);
        assert_eq!(row.execution_state, Some(ExecutionState::Interrupted));
    }
    // Sessions keep their mode: a pending one stays in Plan, an approved one in Agent.
    assert_eq!(
        store
            .get_session(&plan_core::SessionId::from("s-pending"))
            .unwrap()
            .unwrap(),
        pending_state.session
    );
    assert_eq!(
        store
            .get_session(&plan_core::SessionId::from("s-exec0"))
            .unwrap()
            .unwrap()
            .mode,
        Mode::Agent
    );
    let after_history: Vec<_> = ["a-exec2", "a-rejected"]
        .iter()
        .map(|id| store.get_approval(&plan_core::ApprovalId::from(*id)).unwrap())
        .collect();
    assert_eq!(after_history, before_history, "finished rows are not touched");
    assert!(store.live_rows().unwrap().is_empty());
    assert!(
        store.startup_fence(fence_time + 1).unwrap().is_empty(),
        "the fence is idempotent"
    );
}

#[test]
fn lists_are_newest_first_with_filters_and_limits() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    for session in ["s1", "s2"] {
        store.create_session(&Session::new(session, None), NOW).unwrap();
    }
    let mut rows: Vec<PlanApproval> = Vec::new();
    for index in 0..6 {
        let session = if index % 2 == 0 { "s1" } else { "s2" };
        let mut row = pending(&format!("a{index}"), session, NOW + (index / 2) * 10);
        if index < 4 {
            row.status = ApprovalStatus::Rejected;
            row.decided_at = Some(row.created_at + 1);
        }
        store.apply(&[Effect::InsertApproval(row.clone())], NOW).unwrap();
        rows.push(row);
    }
    let ids = |filter: ApprovalFilter| -> Vec<String> {
        store
            .list_approvals(&filter)
            .unwrap()
            .into_iter()
            .map(|stored| stored.approval.id.into_string())
            .collect()
    };
    // Rows created in the same millisecond come newest id first: hosts draw
    // time-ordered ids, so the larger id is the later submission.
    assert_eq!(
        ids(ApprovalFilter::default()),
        ["a5", "a4", "a3", "a2", "a1", "a0"]
    );
    assert_eq!(
        ids(ApprovalFilter {
            limit: Some(3),
            ..ApprovalFilter::default()
        }),
        ["a5", "a4", "a3"]
    );
    assert_eq!(
        ids(ApprovalFilter {
            session_id: Some("s2".into()),
            ..ApprovalFilter::default()
        }),
        ["a5", "a3", "a1"]
    );
    assert_eq!(
        ids(ApprovalFilter {
            status: Some(ApprovalStatus::Pending),
            ..ApprovalFilter::default()
        }),
        ["a5", "a4"]
    );
    assert_eq!(
        ids(ApprovalFilter {
            session_id: Some("s1".into()),
            status: Some(ApprovalStatus::Rejected),
            limit: Some(1),
        }),
        ["a2"]
    );
    let counts = store.count_by_status().unwrap();
    assert_eq!(
        counts,
        [
            (ApprovalStatus::Pending, 2),
            (ApprovalStatus::Approved, 0),
            (ApprovalStatus::Rejected, 4),
            (ApprovalStatus::Expired, 0),
            (ApprovalStatus::Interrupted, 0),
        ]
    );
    assert_eq!(store.live_rows().unwrap().len(), 2);
    assert_eq!(store.schema_version().unwrap(), 10);
    assert_eq!(
        store
            .get_approval(&plan_core::ApprovalId::from("a4"))
            .unwrap()
            .unwrap()
            .approval,
        rows[4]
    );
}

#[test]
fn the_default_shell_is_a_persisted_setting() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path());
    assert_eq!(store.default_shell().unwrap(), None);
    store.set_default_shell("bash").unwrap();
    assert_eq!(store.default_shell().unwrap().as_deref(), Some("bash"));
    store.set_default_shell("pwsh \"7\"").unwrap();
    drop(store);
    let store = new_store(dir.path());
    assert_eq!(store.default_shell().unwrap().as_deref(), Some("pwsh \"7\""));
}

/// The rows the database's only writer keeps are, after every commit, the
/// rows a fresh connection reads; a change made behind its back is dropped
/// at the write it breaks, and read again after.
#[test]
fn the_only_writer_keeps_the_rows_a_fresh_read_returns() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("host.db");
    let mut writer = plan_storage::ExclusiveStore::open(&database).unwrap().store;
    let id = plan_core::SessionId::from("s1");
    let fresh = |writer: &Store| {
        let kept = writer.session_rows(&id).unwrap();
        let reader = Store::open_read_only(&database).unwrap();
        assert_eq!(kept, reader.session_rows(&id).unwrap());
        kept
    };
    assert_eq!(fresh(&writer), None);
    let mut state = with_pending(&mut writer, "s1", "a1");
    assert_eq!(fresh(&writer).unwrap().pending_approval, state.pending_approval);
    let mut now = NOW;
    for event in [
        Event::Approve {
            artifact: matching_artifact(&state.pending_approval.clone().unwrap()),
            approval: state.pending_approval.clone().unwrap(),
            permission_mode: Some(PermissionMode::AcceptEdits),
            execution_id: "x1".into(),
            execution_turn_id: "t2".into(),
        },
        Event::StartExecution {
            execution_id: "x1".into(),
            epoch: BootEpoch(7),
        },
        Event::CompleteExecution {
            execution_id: "x1".into(),
            epoch: BootEpoch(7),
        },
    ] {
        now += 10;
        let transition = handle(&state, &context(now), event);
        writer.apply(&transition.effects, now).unwrap();
        state = transition.state;
        let rows = fresh(&writer).unwrap();
        assert_eq!(rows.session, state.session);
        assert_eq!(rows.pending_approval, state.pending_approval);
        assert_eq!(rows.live_execution, state.live_execution);
    }
    assert_eq!(fresh(&writer).unwrap().session.mode, Mode::Agent);

    // Another connection inserts a pending approval behind the writer's
    // back (no host does: they take the lock). The writer still has the
    // session without one until its next write, which the one-pending index
    // refuses; that refusal drops what it kept.
    let stale = writer.session_rows(&id).unwrap().unwrap();
    assert_eq!(stale.pending_approval, None);
    let mut other = Store::open(&database).unwrap().0;
    other
        .apply(&[Effect::InsertApproval(pending("a2", "s1", now))], now)
        .unwrap();
    assert_eq!(writer.session_rows(&id).unwrap(), Some(stale));
    let error = writer
        .apply(&[Effect::InsertApproval(pending("a3", "s1", now))], now)
        .unwrap_err();
    assert!(matches!(error, StorageError::ApprovalConflict { .. }), "{error}");
    let reread = fresh(&writer).unwrap();
    assert_eq!(
        reread.pending_approval.map(|approval| approval.id),
        Some("a2".into())
    );
}

#[test]
fn a_sessions_workspace_is_bound_once_and_kept_for_the_next_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.db");
    let first = plan_core::WorkspaceIdentity { device: 1, inode: 10 };
    let other = plan_core::WorkspaceIdentity { device: 1, inode: 11 };
    let session = plan_core::SessionId::from("s1");
    {
        let mut store = Store::open(&path).unwrap().0;
        store
            .create_session(&Session::new("s1", Some("/w".to_owned())), NOW)
            .unwrap();
        assert_eq!(store.bind_workspace(&session, first).unwrap(), first);
        // A later binding does not replace the first one.
        assert_eq!(store.bind_workspace(&session, other).unwrap(), first);
        // Another session binds its own.
        store
            .create_session(&Session::new("s2", Some("/w".to_owned())), NOW)
            .unwrap();
        assert_eq!(
            store
                .bind_workspace(&plan_core::SessionId::from("s2"), other)
                .unwrap(),
            other
        );
    }
    let mut reopened = Store::open(&path).unwrap().0;
    assert_eq!(reopened.bind_workspace(&session, other).unwrap(), first);
}
