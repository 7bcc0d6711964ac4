//! Conversions between plan-core values and the wire's own views of them.
//!
//! The records and enums plan-core declares travel as they are, so only
//! what truly differs is mapped here: the wire's session (the persisted
//! configuration plus the live view, ids as text, the turn without its boot
//! epoch and commands), the verification report with its `ok`, the
//! notifications that wrap a record, and params that name plan-core values.
//! Nothing here decides anything; fields are copied, renamed and wrapped.

use crate::error::ProtocolError;
use crate::methods::{Clearable, PlanVerifyParams, SessionConfigureParams, TurnStartResult};
use crate::objects::{
    ActiveTurn, ExecutionStateChangedNotification, PlanApprovalRequestedNotification,
    PlanApprovalResolvedNotification, Session, SessionChangedNotification, VerifyReport,
};

/// The wire turn drops the boot epoch: it is never serialized.
impl From<&plan_core::ActiveTurn> for ActiveTurn {
    fn from(turn: &plan_core::ActiveTurn) -> Self {
        ActiveTurn {
            turn_id: turn.turn_id.to_string(),
            mode: turn.mode,
            origin: turn.origin,
            kind: turn.kind,
        }
    }
}

/// The wire session: the persisted configuration plus the live view
/// (`activeTurn`, `pendingApprovalId`, `activeExecutionId`).
impl From<&plan_core::SessionState> for Session {
    fn from(state: &plan_core::SessionState) -> Self {
        let session = &state.session;
        Session {
            session_id: session.id.to_string(),
            workspace_root: session.workspace_root.clone(),
            mode: session.mode,
            permission_mode: session.permission_mode,
            provider: session.provider.clone(),
            model: session.model.clone(),
            shell: session.shell.clone(),
            active_turn: state.active_turn.as_ref().map(ActiveTurn::from),
            pending_approval_id: state
                .pending_approval
                .as_ref()
                .map(|approval| approval.id.to_string()),
            active_execution_id: state
                .live_execution
                .as_ref()
                .and_then(|approval| approval.execution_id.as_ref().map(ToString::to_string)),
        }
    }
}

/// The persisted configuration of a wire session (the live view is dropped).
impl From<&Session> for plan_core::Session {
    fn from(session: &Session) -> Self {
        plan_core::Session {
            id: session.session_id.as_str().into(),
            workspace_root: session.workspace_root.clone(),
            mode: session.mode,
            permission_mode: session.permission_mode,
            provider: session.provider.clone(),
            model: session.model.clone(),
            shell: session.shell.clone(),
        }
    }
}

impl SessionConfigureParams {
    /// The plan-core configuration change these params ask for.
    pub fn to_config_change(&self) -> plan_core::ConfigChange {
        plan_core::ConfigChange {
            mode: self.mode,
            permission_mode: self.permission_mode,
            provider: self.provider.clone().map(Clearable::into_option),
            model: self.model.clone().map(Clearable::into_option),
            shell: self.shell.clone().map(Clearable::into_option),
        }
    }
}

impl From<&plan_core::ActiveTurn> for TurnStartResult {
    fn from(turn: &plan_core::ActiveTurn) -> Self {
        TurnStartResult {
            turn_id: turn.turn_id.to_string(),
            mode: turn.mode,
        }
    }
}

impl From<&plan_core::PlanApproval> for PlanApprovalRequestedNotification {
    fn from(approval: &plan_core::PlanApproval) -> Self {
        PlanApprovalRequestedNotification {
            approval: approval.clone(),
            card_url: None,
        }
    }
}

impl From<&plan_core::PlanApproval> for PlanApprovalResolvedNotification {
    fn from(approval: &plan_core::PlanApproval) -> Self {
        PlanApprovalResolvedNotification {
            approval: approval.clone(),
        }
    }
}

impl From<&plan_core::SessionState> for SessionChangedNotification {
    fn from(state: &plan_core::SessionState) -> Self {
        SessionChangedNotification {
            session: state.into(),
        }
    }
}

impl ExecutionStateChangedNotification {
    /// The notification for an approval row's execution; `None` when the row
    /// has no execution (not approved).
    pub fn from_approval(approval: &plan_core::PlanApproval) -> Option<Self> {
        let execution_id = approval.execution_id.as_ref()?.to_string();
        let state = approval.execution_state?;
        Some(ExecutionStateChangedNotification {
            session_id: approval.session_id.to_string(),
            execution_id,
            state,
        })
    }
}

impl From<&plan_core::VerifyReport> for VerifyReport {
    fn from(report: &plan_core::VerifyReport) -> Self {
        VerifyReport {
            ok: report.ok(),
            artifacts: report.artifacts.clone(),
            orphans: report.orphans.clone(),
            skipped_workspaces: report.skipped_workspaces.clone(),
        }
    }
}

impl PlanVerifyParams {
    /// The plan-core scope these params name (plan-core refuses both ids at
    /// once: `INVALID_PARAMS`).
    pub fn scope(&self) -> Result<plan_core::VerifyScope, ProtocolError> {
        plan_core::VerifyScope::select(self.approval_id.clone(), self.session_id.clone())
            .map_err(|code| ProtocolError::with_detail(code, "name at most one of approvalId and sessionId"))
    }
}
