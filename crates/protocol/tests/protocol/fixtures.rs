//! Fixed sample values shared by the golden and conversion tests.

use plan_core::{
    ActiveTurn, ApprovalStatus, Artifact, BootEpoch, ErrorCode, ExecutionState, Mode, Origin, PermissionMode,
    PlanApproval, Session, SessionState, TurnKind,
};
use plan_protocol as wire;

pub(crate) const CREATED_AT: i64 = 1_785_456_000_000;
pub(crate) const TTL_MS: i64 = 30 * 60 * 1000;

pub(crate) fn artifact() -> Artifact {
    Artifact {
        path: ".pi/plan/20260731-add-retry-3f9c.md".to_owned(),
        sha256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".to_owned(),
        size: 1234,
    }
}

pub(crate) fn pending_approval() -> PlanApproval {
    PlanApproval {
        id: "apr_01".into(),
        session_id: "ses_01".into(),
        turn_id: "turn_01".into(),
        title: "Add retry to the uploader".to_owned(),
        question: "Shall I implement this plan?".to_owned(),
        artifact: Some(artifact()),
        status: ApprovalStatus::Pending,
        error_code: None,
        created_at: CREATED_AT,
        expires_at: CREATED_AT + TTL_MS,
        decided_at: None,
        permission_mode: None,
        execution_id: None,
        execution_state: None,
    }
}

pub(crate) fn approved_approval() -> PlanApproval {
    PlanApproval {
        status: ApprovalStatus::Approved,
        decided_at: Some(CREATED_AT + 60_000),
        permission_mode: Some(PermissionMode::AcceptEdits),
        execution_id: Some("exe_01".into()),
        execution_state: Some(ExecutionState::Queued),
        ..pending_approval()
    }
}

pub(crate) fn rejected_approval() -> PlanApproval {
    PlanApproval {
        status: ApprovalStatus::Rejected,
        decided_at: Some(CREATED_AT + 90_000),
        ..pending_approval()
    }
}

pub(crate) fn withdrawn_approval() -> PlanApproval {
    PlanApproval {
        status: ApprovalStatus::Interrupted,
        error_code: Some(ErrorCode::PlanWithdrawn),
        decided_at: Some(CREATED_AT + 90_000),
        ..pending_approval()
    }
}

pub(crate) fn expired_approval() -> PlanApproval {
    PlanApproval {
        status: ApprovalStatus::Expired,
        error_code: Some(ErrorCode::PlanApprovalTimeout),
        decided_at: Some(CREATED_AT + TTL_MS),
        ..pending_approval()
    }
}

/// A row migrated from schema v8 (no artifact), interrupted by a restart.
pub(crate) fn migrated_interrupted_approval() -> PlanApproval {
    PlanApproval {
        id: "apr_v8".into(),
        artifact: None,
        status: ApprovalStatus::Interrupted,
        error_code: Some(ErrorCode::HostRestarted),
        decided_at: Some(CREATED_AT + 5_000),
        ..pending_approval()
    }
}

pub(crate) fn with_execution(state: ExecutionState) -> PlanApproval {
    PlanApproval {
        execution_state: Some(state),
        ..approved_approval()
    }
}

fn core_session(mode: Mode, permission_mode: PermissionMode) -> Session {
    Session {
        id: "ses_01".into(),
        workspace_root: Some("/home/dev/project".to_owned()),
        mode,
        permission_mode,
        provider: Some("anthropic".to_owned()),
        model: None,
        shell: None,
    }
}

pub(crate) fn idle_plan_state() -> SessionState {
    SessionState::idle(core_session(Mode::Plan, PermissionMode::Ask))
}

pub(crate) fn pending_state() -> SessionState {
    SessionState {
        session: core_session(Mode::Plan, PermissionMode::Ask),
        active_turn: Some(ActiveTurn {
            turn_id: "turn_01".into(),
            mode: Mode::Plan,
            origin: Origin::Interactive,
            kind: TurnKind::Prompt,
            epoch: BootEpoch(7),
            commands: Vec::new(),
            confirmations: Vec::new(),
        }),
        pending_approval: Some(pending_approval()),
        live_execution: None,
    }
}

pub(crate) fn executing_state() -> SessionState {
    SessionState {
        session: core_session(Mode::Agent, PermissionMode::AcceptEdits),
        active_turn: Some(ActiveTurn {
            turn_id: "turn_02".into(),
            mode: Mode::Agent,
            origin: Origin::Interactive,
            kind: TurnKind::Execution,
            epoch: BootEpoch(7),
            commands: Vec::new(),
            confirmations: Vec::new(),
        }),
        pending_approval: None,
        live_execution: Some(approved_approval()),
    }
}

pub(crate) fn idle_after_reject_state() -> SessionState {
    idle_plan_state()
}

pub(crate) fn wire_approval(approval: &PlanApproval) -> wire::PlanApproval {
    approval.clone()
}

pub(crate) fn wire_session(state: &SessionState) -> wire::Session {
    wire::Session::from(state)
}

pub(crate) fn unbound_session() -> wire::Session {
    wire::Session::from(&SessionState::idle(Session::new("ses_02", None)))
}
