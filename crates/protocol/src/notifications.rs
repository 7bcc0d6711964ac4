//! The notifications of protocol v9 (host -> client) and the
//! [`ServerNotification`] union.
//!
//! A notification has no id and gets no answer. Like results, absent
//! optional values are `null`. This module only shapes notifications; when
//! to send one is the host's decision.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::objects::{ExecutionState, OutputStream, PlanApproval, Session};

/// The notification method names, exactly as on the wire.
pub mod notification_method {
    /// `plan/approvalRequested`
    pub const PLAN_APPROVAL_REQUESTED: &str = "plan/approvalRequested";
    /// `plan/approvalResolved`
    pub const PLAN_APPROVAL_RESOLVED: &str = "plan/approvalResolved";
    /// `execution/stateChanged`
    pub const EXECUTION_STATE_CHANGED: &str = "execution/stateChanged";
    /// `session/changed`
    pub const SESSION_CHANGED: &str = "session/changed";
    /// `command/output`
    pub const COMMAND_OUTPUT: &str = "command/output";

    /// Every notification method, in contract order.
    pub const ALL: [&str; 5] = [
        PLAN_APPROVAL_REQUESTED,
        PLAN_APPROVAL_RESOLVED,
        EXECUTION_STATE_CHANGED,
        SESSION_CHANGED,
        COMMAND_OUTPUT,
    ];
}

/// `plan/approvalRequested`: a SubmitPlan was accepted and awaits a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanApprovalRequestedNotification {
    /// The new pending approval.
    pub approval: PlanApproval,
}

/// `plan/approvalResolved`: an approval was approved, rejected, expired or
/// interrupted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanApprovalResolvedNotification {
    /// The approval after the change.
    pub approval: PlanApproval,
}

/// `execution/stateChanged`: an execution moved to a new state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionStateChangedNotification {
    /// The owning session.
    pub session_id: String,
    /// The execution.
    pub execution_id: String,
    /// Its new state.
    pub state: ExecutionState,
}

/// `session/changed`: a session's configuration or activity changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionChangedNotification {
    /// The session after the change.
    pub session: Session,
}

/// `command/output`: one chunk of streamed shell output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandOutputNotification {
    /// The session.
    pub session_id: String,
    /// The tool call that runs the command.
    pub call_id: String,
    /// stdout or stderr.
    pub stream: OutputStream,
    /// Sequence number of the chunk within the call, from 0, across both streams.
    pub seq: u64,
    /// The text of the chunk.
    pub chunk: String,
}

/// Every host notification with its typed params, tagged as
/// `{"method": ..., "params": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "method", content = "params")]
pub enum ServerNotification {
    /// `plan/approvalRequested`
    #[serde(rename = "plan/approvalRequested")]
    PlanApprovalRequested(PlanApprovalRequestedNotification),
    /// `plan/approvalResolved`
    #[serde(rename = "plan/approvalResolved")]
    PlanApprovalResolved(PlanApprovalResolvedNotification),
    /// `execution/stateChanged`
    #[serde(rename = "execution/stateChanged")]
    ExecutionStateChanged(ExecutionStateChangedNotification),
    /// `session/changed`
    #[serde(rename = "session/changed")]
    SessionChanged(SessionChangedNotification),
    /// `command/output`
    #[serde(rename = "command/output")]
    CommandOutput(CommandOutputNotification),
}

impl ServerNotification {
    /// The wire method name.
    pub const fn method(&self) -> &'static str {
        match self {
            ServerNotification::PlanApprovalRequested(_) => notification_method::PLAN_APPROVAL_REQUESTED,
            ServerNotification::PlanApprovalResolved(_) => notification_method::PLAN_APPROVAL_RESOLVED,
            ServerNotification::ExecutionStateChanged(_) => notification_method::EXECUTION_STATE_CHANGED,
            ServerNotification::SessionChanged(_) => notification_method::SESSION_CHANGED,
            ServerNotification::CommandOutput(_) => notification_method::COMMAND_OUTPUT,
        }
    }
}
