//! Drives one session through the plan checkpoint with plan-core alone:
//! a Plan turn, SubmitPlan, approval, execution, a restart that interrupts a
//! second execution, and a scheduled Plan run that is refused. Storage and
//! files are played by this example: it prints the effects it would carry out.

use plan_core::{
    Artifact, BootEpoch, Context, Effect, Event, ExecutionId, Limits, Mode, Origin, PermissionMode, Reply,
    Session, SessionState, ToolCall, Transition, handle, startup_fence,
};
use serde_json::json;

/// What the host found when it re-read `approval`'s artifact inside the
/// decision (storage's `Store::check_artifact`): the file as submitted.
fn matching_artifact(approval: &plan_core::PlanApproval) -> plan_core::ArtifactVerification {
    plan_core::ArtifactVerification {
        approval_id: approval.id.clone(),
        result: plan_core::ArtifactCheck::Ok,
        error_code: None,
        detail: None,
    }
}

fn show(step: &str, transition: &Transition) {
    println!("== {step}");
    match &transition.reply {
        Ok(reply) => println!("   accepted: {}", describe(reply)),
        Err(code) => println!("   refused: {} ({code})", code.as_str()),
    }
    for effect in &transition.effects {
        println!("   effect: {}", describe_effect(effect));
    }
    let state = &transition.state;
    println!(
        "   session: mode={} permission={} turn={} pending={} execution={}",
        state.session.mode,
        state.session.permission_mode,
        state
            .active_turn
            .as_ref()
            .map_or("none".to_owned(), |turn| format!(
                "{} ({})",
                turn.turn_id, turn.kind
            )),
        state
            .pending_approval
            .as_ref()
            .map_or("none", |approval| approval.id.as_str()),
        state
            .live_execution
            .as_ref()
            .and_then(|row| row.execution_state)
            .map_or("none".to_owned(), |execution| execution.to_string()),
    );
}

fn describe(reply: &Reply) -> String {
    match reply {
        Reply::TurnStarted(turn) => format!("turn {} started in {}", turn.turn_id, turn.mode),
        Reply::ToolResults(results) => results
            .iter()
            .map(|result| format!("{} -> {:?}", result.call_id, result.decision))
            .collect::<Vec<_>>()
            .join(", "),
        Reply::ApprovalRequested { approval, .. } => {
            format!("approval {} pending until {}", approval.id, approval.expires_at)
        }
        Reply::Decided(approval) => format!("approval {} is {}", approval.id, approval.status),
        Reply::ExecutionChanged(approval) => format!(
            "execution {} is {}",
            approval.execution_id.as_ref().map_or("?", ExecutionId::as_str),
            approval.execution_state.map_or("none", |state| state.as_str())
        ),
        Reply::SessionUpdated => "session updated".to_owned(),
        Reply::Ticked => "tick".to_owned(),
        Reply::CommandStarted(launch) => format!("command {} is {}", launch.run.call_id, launch.run.state),
        Reply::CommandRegistered { call_id, .. } => format!("command {call_id} is registered"),
        Reply::ToolConfirmed(result) => format!("{} -> {:?}", result.call_id, result.decision),
    }
}

fn describe_effect(effect: &Effect) -> String {
    match effect {
        Effect::WriteArtifact(request) => {
            format!(
                "write {} bytes under {}/.pi/plan/",
                request.markdown.len(),
                request.workspace_root
            )
        }
        Effect::InsertApproval(row) => format!("insert approval {} ({})", row.id, row.status),
        Effect::UpdateApproval { approval, expected } => format!(
            "update approval {} from {} to {}{}",
            approval.id,
            expected.status,
            approval.status,
            approval
                .execution_state
                .map_or(String::new(), |state| format!(", execution {state}"))
        ),
        Effect::SaveSession(session) => format!("save session {} ({})", session.id, session.mode),
        Effect::CancelCommand { call_id, .. } => format!("cancel command {call_id}"),
        Effect::RecordCommand { kind, run } => format!("record {} of command {}", kind.as_str(), run.call_id),
        Effect::BindWorkspace { identity, .. } => {
            format!(
                "bind the workspace (device {}, inode {})",
                identity.device, identity.inode
            )
        }
        Effect::RecordToolAudit(entry) => format!("audit {} of {}", entry.kind, entry.call_id),
    }
}

fn main() {
    let mut now = 1_750_000_000_000;
    let epoch = BootEpoch(1);
    let context = |now| Context {
        now,
        epoch,
        limits: Limits::default(),
    };
    let mut session = Session::new("demo", Some("/tmp/demo-workspace".to_owned()));
    session.mode = Mode::Plan;
    let mut state = SessionState::idle(session);

    // Adopts each transition's state and hands back its effects, which this
    // example only prints where a real host would carry them out.
    let run = |state: &mut SessionState, now: i64, step: &str, event: Event| -> Vec<Effect> {
        let transition = handle(state, &context(now), event);
        show(step, &transition);
        *state = transition.state.clone();
        transition.effects
    };

    let _ = run(
        &mut state,
        now,
        "a person starts a Plan turn",
        Event::StartTurn {
            turn_id: "turn-1".into(),
            origin: Origin::Interactive,
            mode: None,
        },
    );
    let tool = |name: &str, input| ToolCall {
        call_id: format!("call-{name}").into(),
        name: name.to_owned(),
        input,
    };
    let _ = run(
        &mut state,
        now,
        "the agent reads and tries to write",
        Event::ToolCalls {
            turn_id: "turn-1".into(),
            calls: vec![tool("Read", json!({})), tool("Write", json!({}))],
            // No Bash call: the host had nothing to look at.
            commands: plan_core::CommandFacts::default(),
        },
    );
    let submit = run(
        &mut state,
        now,
        "the agent submits its plan",
        Event::ToolCalls {
            turn_id: "turn-1".into(),
            commands: plan_core::CommandFacts::default(),
            calls: vec![tool(
                "SubmitPlan",
                json!({"title": "Split the parser", "markdown": "# Plan\n\n1. Split.\n", "question": "Proceed?"}),
            )],
        },
    );
    let Some(Effect::WriteArtifact(request)) = submit.first().cloned() else {
        println!("no artifact was requested; stopping");
        return;
    };
    now += 50;
    let _ = run(
        &mut state,
        now,
        "the host reports the durable artifact",
        Event::ArtifactWritten {
            request,
            approval_id: "approval-1".into(),
            artifact: Artifact {
                path: ".pi/plan/split-the-parser.md".to_owned(),
                sha256: "0".repeat(64),
                size: 19,
            },
        },
    );
    now += 60_000;
    let approval = state.pending_approval.clone();
    if let Some(approval) = approval {
        let _ = run(
            &mut state,
            now,
            "a person approves with accept-edits",
            Event::Approve {
                artifact: matching_artifact(&approval),
                approval,
                permission_mode: Some(PermissionMode::AcceptEdits),
                execution_id: "execution-1".into(),
                execution_turn_id: "turn-2".into(),
            },
        );
    }
    let _ = run(
        &mut state,
        now + 10,
        "the execution starts",
        Event::StartExecution {
            execution_id: "execution-1".into(),
            epoch,
        },
    );
    println!("== the host restarts while the execution runs");
    let rows: Vec<_> = state.live_execution.iter().cloned().collect();
    for effect in startup_fence(&rows, now + 20) {
        println!("   fence: {}", describe_effect(&effect));
    }
    let mut state = SessionState::idle(state.session.clone());
    println!(
        "   session after restart: mode={} (no Plan re-entry, nothing replayed)",
        state.session.mode
    );
    let _ = run(
        &mut state,
        now + 30,
        "a stale report from the old process",
        Event::StartExecution {
            execution_id: "execution-1".into(),
            epoch,
        },
    );
    state.session.mode = Mode::Plan;
    let _ = run(
        &mut state,
        now + 40,
        "a scheduled task tries a Plan run",
        Event::StartTurn {
            turn_id: "turn-3".into(),
            origin: Origin::Scheduled,
            mode: None,
        },
    );
}
