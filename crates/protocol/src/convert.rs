//! Conversions between plan-core values and wire values.
//!
//! plan-core never sees the wire, so every mapping lives here: core values
//! into wire objects for results and notifications, and wire params into
//! core values where the mapping is lossless. Enum conversions (both ways)
//! are generated next to the wire enums in `objects`. Nothing here decides
//! anything; fields are copied, renamed and wrapped.

use crate::error::CanonicalCode;
use crate::error::ProtocolError;
use crate::methods::{PlanVerifyParams, SessionConfigureParams, TurnStartResult};
use crate::notifications::{
    ExecutionStateChangedNotification, PlanApprovalRequestedNotification, PlanApprovalResolvedNotification,
    SessionChangedNotification,
};
use crate::objects::{
    ActiveTurn, Artifact, ArtifactVerification, OrphanArtifact, PlanApproval, PlanDiffResult, Session,
    SkippedWorkspace, ToolCall, VerifyReport,
};

impl From<&plan_core::Artifact> for Artifact {
    fn from(artifact: &plan_core::Artifact) -> Self {
        Artifact {
            path: artifact.path.clone(),
            sha256: artifact.sha256.clone(),
            size: artifact.size,
        }
    }
}

impl From<Artifact> for plan_core::Artifact {
    fn from(artifact: Artifact) -> Self {
        plan_core::Artifact {
            path: artifact.path,
            sha256: artifact.sha256,
            size: artifact.size,
        }
    }
}

impl From<&plan_core::PlanApproval> for PlanApproval {
    fn from(approval: &plan_core::PlanApproval) -> Self {
        PlanApproval {
            id: approval.id.to_string(),
            session_id: approval.session_id.to_string(),
            turn_id: approval.turn_id.to_string(),
            title: approval.title.clone(),
            question: approval.question.clone(),
            artifact: approval.artifact.as_ref().map(Artifact::from),
            status: approval.status.into(),
            error_code: approval.error_code.map(CanonicalCode),
            created_at: approval.created_at,
            expires_at: approval.expires_at,
            decided_at: approval.decided_at,
            permission_mode: approval.permission_mode.map(Into::into),
            execution_id: approval.execution_id.as_ref().map(ToString::to_string),
            execution_state: approval.execution_state.map(Into::into),
        }
    }
}

impl From<PlanApproval> for plan_core::PlanApproval {
    fn from(approval: PlanApproval) -> Self {
        plan_core::PlanApproval {
            id: approval.id.into(),
            session_id: approval.session_id.into(),
            turn_id: approval.turn_id.into(),
            title: approval.title,
            question: approval.question,
            artifact: approval.artifact.map(Into::into),
            status: approval.status.into(),
            error_code: approval.error_code.map(Into::into),
            created_at: approval.created_at,
            expires_at: approval.expires_at,
            decided_at: approval.decided_at,
            permission_mode: approval.permission_mode.map(Into::into),
            execution_id: approval.execution_id.map(Into::into),
            execution_state: approval.execution_state.map(Into::into),
        }
    }
}

/// The wire turn drops the boot epoch: it is never serialized.
impl From<&plan_core::ActiveTurn> for ActiveTurn {
    fn from(turn: &plan_core::ActiveTurn) -> Self {
        ActiveTurn {
            turn_id: turn.turn_id.to_string(),
            mode: turn.mode.into(),
            origin: turn.origin.into(),
            kind: turn.kind.into(),
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
            mode: session.mode.into(),
            permission_mode: session.permission_mode.into(),
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
            mode: session.mode.into(),
            permission_mode: session.permission_mode.into(),
            provider: session.provider.clone(),
            model: session.model.clone(),
            shell: session.shell.clone(),
        }
    }
}

impl From<&plan_core::ToolCall> for ToolCall {
    fn from(call: &plan_core::ToolCall) -> Self {
        ToolCall {
            call_id: call.call_id.clone(),
            name: call.name.clone(),
            input: call.input.clone(),
        }
    }
}

impl From<ToolCall> for plan_core::ToolCall {
    fn from(call: ToolCall) -> Self {
        plan_core::ToolCall {
            call_id: call.call_id,
            name: call.name,
            input: call.input,
        }
    }
}

impl SessionConfigureParams {
    /// The plan-core configuration change these params ask for.
    pub fn to_config_change(&self) -> plan_core::ConfigChange {
        plan_core::ConfigChange {
            mode: self.mode.map(Into::into),
            permission_mode: self.permission_mode.map(Into::into),
            provider: self.provider.clone(),
            model: self.model.clone(),
            shell: self.shell.clone(),
        }
    }
}

impl From<&plan_core::ActiveTurn> for TurnStartResult {
    fn from(turn: &plan_core::ActiveTurn) -> Self {
        TurnStartResult {
            turn_id: turn.turn_id.to_string(),
            mode: turn.mode.into(),
        }
    }
}

impl From<&plan_core::PlanApproval> for PlanApprovalRequestedNotification {
    fn from(approval: &plan_core::PlanApproval) -> Self {
        PlanApprovalRequestedNotification {
            approval: approval.into(),
        }
    }
}

impl From<&plan_core::PlanApproval> for PlanApprovalResolvedNotification {
    fn from(approval: &plan_core::PlanApproval) -> Self {
        PlanApprovalResolvedNotification {
            approval: approval.into(),
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
            state: state.into(),
        })
    }
}

impl From<&plan_core::VerifyReport> for VerifyReport {
    fn from(report: &plan_core::VerifyReport) -> Self {
        VerifyReport {
            ok: report.ok(),
            artifacts: report.artifacts.iter().map(ArtifactVerification::from).collect(),
            orphans: report.orphans.iter().map(OrphanArtifact::from).collect(),
            skipped_workspaces: report
                .skipped_workspaces
                .iter()
                .map(SkippedWorkspace::from)
                .collect(),
        }
    }
}

impl From<&plan_core::ArtifactVerification> for ArtifactVerification {
    fn from(check: &plan_core::ArtifactVerification) -> Self {
        ArtifactVerification {
            approval_id: check.approval_id.to_string(),
            result: check.result.into(),
            error_code: check.error_code.map(CanonicalCode),
            detail: check.detail.clone(),
        }
    }
}

impl From<&plan_core::OrphanArtifact> for OrphanArtifact {
    fn from(orphan: &plan_core::OrphanArtifact) -> Self {
        OrphanArtifact {
            workspace_root: orphan.workspace_root.clone(),
            path: orphan.path.clone(),
        }
    }
}

impl From<&plan_core::SkippedWorkspace> for SkippedWorkspace {
    fn from(skipped: &plan_core::SkippedWorkspace) -> Self {
        SkippedWorkspace {
            workspace_root: skipped.workspace_root.clone(),
            detail: skipped.detail.clone(),
        }
    }
}

impl From<&plan_core::PlanDiff> for PlanDiffResult {
    fn from(diff: &plan_core::PlanDiff) -> Self {
        PlanDiffResult {
            approval_id: diff.approval_id.to_string(),
            against_approval_id: diff.against_approval_id.as_ref().map(ToString::to_string),
            identical: diff.identical,
            unified: diff.unified.clone(),
        }
    }
}

impl PlanVerifyParams {
    /// The plan-core scope these params name (plan-core refuses both ids at
    /// once: `INVALID_PARAMS`).
    pub fn scope(&self) -> Result<plan_core::VerifyScope, ProtocolError> {
        plan_core::VerifyScope::select(
            self.approval_id.as_deref().map(plan_core::ApprovalId::from),
            self.session_id.as_deref().map(plan_core::SessionId::from),
        )
        .map_err(|code| ProtocolError::with_detail(code, "name at most one of approvalId and sessionId"))
    }
}

impl From<&plan_core::CommandRun> for crate::objects::CommandRun {
    fn from(run: &plan_core::CommandRun) -> Self {
        crate::objects::CommandRun {
            call_id: run.call_id.clone(),
            session_id: run.session_id.to_string(),
            turn_id: run.turn_id.to_string(),
            command: run.command.clone(),
            cwd: run.cwd.clone(),
            shell: crate::objects::CommandShell {
                id: run.shell_id.clone(),
                path: run.shell_path.clone(),
            },
            sandbox: run.sandbox.into(),
            network: run.network,
            state: run.state.into(),
            exit_code: run.exit_code,
            signal: run.signal,
            error_code: run.error_code.map(crate::error::CanonicalCode),
            started_at: run.started_at,
            ended_at: run.ended_at,
            stdout_bytes: run.stdout_bytes,
            stderr_bytes: run.stderr_bytes,
            truncated: run.truncated,
        }
    }
}

impl From<&crate::objects::CommandRun> for plan_core::CommandRun {
    fn from(run: &crate::objects::CommandRun) -> Self {
        plan_core::CommandRun {
            call_id: run.call_id.clone(),
            session_id: run.session_id.as_str().into(),
            turn_id: run.turn_id.as_str().into(),
            command: run.command.clone(),
            cwd: run.cwd.clone(),
            shell_id: run.shell.id.clone(),
            shell_path: run.shell.path.clone(),
            sandbox: run.sandbox.into(),
            network: run.network,
            state: run.state.into(),
            exit_code: run.exit_code,
            signal: run.signal,
            error_code: run.error_code.map(|code| code.0),
            started_at: run.started_at,
            ended_at: run.ended_at,
            stdout_bytes: run.stdout_bytes,
            stderr_bytes: run.stderr_bytes,
            truncated: run.truncated,
        }
    }
}
