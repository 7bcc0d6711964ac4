//! The agent session layer against a real host: the SubmitPlan walk
//! counted (round trips, hashes), its decision read from its own
//! notification, and every other outcome given as the host's sentence.

use plan_client::agent::{AgentSession, PlanOutcome};
use plan_core::{ApprovalStatus, CallId, ErrorCode, Mode, PermissionMode, SessionId, TurnKind};

use super::support::Served;

const QUESTION: &str = "Approve?";

fn session(id: &str) -> SessionId {
    SessionId::from(id.to_owned())
}

#[test]
fn a_submit_plan_walk_from_a_fresh_session_takes_six_round_trips_and_one_hash() {
    let served = Served::start();
    let host = std::sync::Arc::clone(&served.host);
    let mut client = served.client();
    let mut agent = AgentSession::new(&mut client, session("fresh"), served.project());
    let turn = agent.ensure_turn(Mode::Plan, "plan").unwrap();
    assert_eq!((turn.mode, turn.kind), (Mode::Plan, TurnKind::Prompt));
    let markdown = "# Split the parser\n\n1. Read.\n2. Split.\n";
    let pending = agent
        .submit_plan(
            &turn.turn_id,
            CallId::from("submit-1".to_owned()),
            "Split",
            markdown,
            QUESTION,
        )
        .unwrap()
        .unwrap();
    assert_eq!(pending.status, ApprovalStatus::Pending);
    let deciding = std::thread::spawn({
        let requested = served.next_requested();
        move || host.approve(&requested.id, PermissionMode::AcceptEdits).unwrap()
    });
    let decided = agent.wait_for_decision(&pending).unwrap();
    deciding.join().unwrap();
    let PlanOutcome::Approved {
        approval,
        markdown: read,
    } = agent.outcome(decided).unwrap()
    else {
        panic!("not approved");
    };
    assert_eq!(read, markdown);
    assert_eq!(approval.permission_mode, Some(PermissionMode::AcceptEdits));
    // initialize, session/get (none), session/create, turn/start,
    // turn/toolCalls, plan/readArtifact: no plan/get after the
    // notification, one SHA-256.
    assert_eq!(agent.hashes(), 1);
    drop(agent);
    assert_eq!(client.round_trips(), 6);
}

#[test]
fn a_submit_plan_walk_in_a_running_plan_turn_takes_four_round_trips() {
    let served = Served::start();
    let host = std::sync::Arc::clone(&served.host);
    {
        let mut earlier = served.client();
        AgentSession::new(&mut earlier, session("s"), served.project())
            .ensure_turn(Mode::Plan, "plan")
            .unwrap();
    }
    let mut client = served.client();
    let mut agent = AgentSession::new(&mut client, session("s"), served.project());
    let turn = agent.ensure_turn(Mode::Plan, "plan").unwrap();
    let pending = agent
        .submit_plan(
            &turn.turn_id,
            CallId::from("c".to_owned()),
            "T",
            "plan\n",
            QUESTION,
        )
        .unwrap()
        .unwrap();
    let deciding = std::thread::spawn({
        let requested = served.next_requested();
        move || host.approve(&requested.id, PermissionMode::Ask).unwrap()
    });
    let decided = agent.wait_for_decision(&pending).unwrap();
    deciding.join().unwrap();
    assert!(matches!(
        agent.outcome(decided).unwrap(),
        PlanOutcome::Approved { .. }
    ));
    assert_eq!(agent.hashes(), 1);
    drop(agent);
    assert_eq!(client.round_trips(), 4);
}

#[test]
fn a_rejected_plan_and_a_tampered_one_are_not_approved_and_say_why() {
    let served = Served::start();
    let host = std::sync::Arc::clone(&served.host);
    let mut client = served.client();
    let mut agent = AgentSession::new(&mut client, session("r"), served.project());
    let turn = agent.ensure_turn(Mode::Plan, "plan").unwrap();
    let pending = agent
        .submit_plan(
            &turn.turn_id,
            CallId::from("a".to_owned()),
            "T",
            "first\n",
            QUESTION,
        )
        .unwrap()
        .unwrap();
    let rejecting = std::thread::spawn({
        let requested = served.next_requested();
        let host = std::sync::Arc::clone(&host);
        move || host.reject(&requested.id).unwrap()
    });
    let decided = agent.wait_for_decision(&pending).unwrap();
    rejecting.join().unwrap();
    let PlanOutcome::NotApproved { reason, .. } = agent.outcome(decided).unwrap() else {
        panic!("a rejected plan was approved");
    };
    assert!(reason.contains("rejected"), "{reason}");
    // The same bytes again are the refused plan; other bytes are a new one.
    assert!(agent.refused_already("first\n").unwrap());
    assert!(!agent.refused_already("first, revised\n").unwrap());

    // Approved, then the file changes before it is read back.
    let turn = agent.ensure_turn(Mode::Plan, "plan again").unwrap();
    let pending = agent
        .submit_plan(
            &turn.turn_id,
            CallId::from("b".to_owned()),
            "T",
            "second\n",
            QUESTION,
        )
        .unwrap()
        .unwrap();
    let requested = served.next_requested();
    host.approve(&requested.id, PermissionMode::Auto).unwrap();
    let decided = agent.wait_for_decision(&pending).unwrap();
    let path = std::path::Path::new(&served.project()).join(&decided.artifact.as_ref().unwrap().path);
    let mut permissions = std::fs::metadata(&path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    permissions.set_readonly(false);
    std::fs::set_permissions(&path, permissions).unwrap();
    std::fs::write(&path, "tampered\n").unwrap();
    let PlanOutcome::NotApproved { reason, .. } = agent.outcome(decided).unwrap() else {
        panic!("a tampered plan was handed on");
    };
    assert!(reason.starts_with("ARTIFACT_INTEGRITY_MISMATCH: "), "{reason}");
}

#[test]
fn an_expired_plan_is_the_hosts_timeout_and_the_next_plan_turn_starts() {
    let options = plan_host::HostOptions {
        limits: plan_core::Limits::new(300, plan_core::Limits::DEFAULT_MARKDOWN_LIMIT_BYTES).unwrap(),
        ..plan_host::HostOptions::default()
    };
    let served = Served::with(options);
    let mut client = served.client();
    let mut agent = AgentSession::new(&mut client, session("e"), served.project());
    let turn = agent.ensure_turn(Mode::Plan, "plan").unwrap();
    let pending = agent
        .submit_plan(
            &turn.turn_id,
            CallId::from("x".to_owned()),
            "T",
            "plan\n",
            QUESTION,
        )
        .unwrap()
        .unwrap();
    let decided = agent.wait_for_decision(&pending).unwrap();
    let PlanOutcome::NotApproved { reason, .. } = agent.outcome(decided).unwrap() else {
        panic!("an expired plan was approved");
    };
    assert!(
        reason.starts_with(ErrorCode::PlanApprovalTimeout.as_str()),
        "{reason}"
    );
    assert_eq!(agent.ensure_turn(Mode::Plan, "again").unwrap().mode, Mode::Plan);
}

#[test]
fn an_agent_turn_after_an_approval_is_the_execution_and_ending_it_completes_it() {
    let served = Served::start();
    let host = std::sync::Arc::clone(&served.host);
    let mut client = served.client();
    let mut agent = AgentSession::new(&mut client, session("x"), served.project());
    let turn = agent.ensure_turn(Mode::Plan, "plan").unwrap();
    agent
        .submit_plan(
            &turn.turn_id,
            CallId::from("p".to_owned()),
            "T",
            "plan\n",
            QUESTION,
        )
        .unwrap()
        .unwrap();
    let (approval, _) = host
        .approve(&served.next_requested().id, PermissionMode::Auto)
        .unwrap();
    let execution = agent.ensure_turn(Mode::Agent, "work").unwrap();
    assert_eq!(execution.kind, TurnKind::Execution);
    let running = host.approval(&approval.id).unwrap();
    assert_eq!(
        running.approval.execution_state,
        Some(plan_core::ExecutionState::Running)
    );
    // Planning again completes the approved work first.
    let again = agent.ensure_turn(Mode::Plan, "plan again").unwrap();
    assert_eq!(again.mode, Mode::Plan);
    let completed = host.approval(&approval.id).unwrap();
    assert_eq!(
        completed.approval.execution_state,
        Some(plan_core::ExecutionState::Completed)
    );
}

#[test]
fn a_plan_title_is_its_first_heading_as_one_plain_line() {
    use plan_client::agent::plan_title;
    assert_eq!(
        plan_title("intro\n\n## Split \u{202e}it\n", "x"),
        "Split \\u{202e}it"
    );
    assert_eq!(plan_title("  first line\nsecond", "x"), "first line");
    assert_eq!(plan_title("", "Codex plan"), "Codex plan");
    assert_eq!(
        plan_title(&format!("# {}", "a".repeat(500)), "x").chars().count(),
        plan_core::SUBMIT_PLAN_TITLE_MAX_CHARS
    );
}

#[test]
fn planning_again_from_an_approved_execution_takes_six_round_trips_and_one_hash() {
    let served = Served::start();
    let host = std::sync::Arc::clone(&served.host);
    {
        let mut earlier = served.client();
        let mut agent = AgentSession::new(&mut earlier, session("again"), served.project());
        let turn = agent.ensure_turn(Mode::Plan, "plan").unwrap();
        agent
            .submit_plan(
                &turn.turn_id,
                CallId::from("first".to_owned()),
                "T",
                "first\n",
                QUESTION,
            )
            .unwrap()
            .unwrap();
        host.approve(&served.next_requested().id, PermissionMode::Auto)
            .unwrap();
        // The approved work begins.
        let execution = agent.ensure_turn(Mode::Agent, "work").unwrap();
        assert_eq!(execution.kind, TurnKind::Execution);
    }
    // A new hook plans again while the execution runs: the execution
    // completes and a Plan turn starts, then the plan is submitted and
    // decided.
    let mut client = served.client();
    let mut agent = AgentSession::new(&mut client, session("again"), served.project());
    let turn = agent.ensure_turn(Mode::Plan, "plan again").unwrap();
    assert_eq!((turn.mode, turn.kind), (Mode::Plan, TurnKind::Prompt));
    let pending = agent
        .submit_plan(
            &turn.turn_id,
            CallId::from("second".to_owned()),
            "T",
            "second\n",
            QUESTION,
        )
        .unwrap()
        .unwrap();
    let deciding = std::thread::spawn({
        let requested = served.next_requested();
        move || host.approve(&requested.id, PermissionMode::Ask).unwrap()
    });
    let decided = agent.wait_for_decision(&pending).unwrap();
    deciding.join().unwrap();
    assert!(matches!(
        agent.outcome(decided).unwrap(),
        PlanOutcome::Approved { .. }
    ));
    assert_eq!(agent.hashes(), 1);
    drop(agent);
    // initialize, session/get (the running execution), execution/complete,
    // turn/start in Plan, turn/toolCalls, plan/readArtifact.
    assert_eq!(client.round_trips(), 6);
}
