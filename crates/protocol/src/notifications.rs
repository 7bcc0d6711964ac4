//! The notifications of protocol v9 (host -> client) and the
//! [`ServerNotification`] union.
//!
//! A notification has no id and gets no answer. Like results, absent
//! optional values are `null`. This module only shapes notifications; when
//! to send one is the host's decision.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{CommandRun, ExecutionState, OutputStream, PlanApproval, Session};

/// `plan/approvalRequested`: a SubmitPlan was accepted and awaits a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanApprovalRequestedNotification {
    /// The new pending approval.
    pub approval: PlanApproval,
    /// The approval card's URL, with its token, for the host's own client to
    /// show or open; `null` when the web server is off.
    #[serde(default)]
    pub card_url: Option<String>,
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

/// `command/exited`: a command ended; always the last message for its call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExitedNotification {
    /// The session.
    pub session_id: String,
    /// The Bash call.
    pub call_id: String,
    /// The run as it ended.
    pub command: CommandRun,
}

/// Declares every host notification once, as
/// `Variant, CONSTANT => "resource/event", ParamsType;`, and derives the
/// name constants and [`notification_method::ALL`], the method-tagged
/// [`ServerNotification`] union, [`ServerNotification::method`] and the
/// list the schema files are generated from. Adding a notification is one
/// line here plus its params type.
macro_rules! server_notifications {
    ($($variant:ident, $constant:ident => $name:literal, $params:ty;)+) => {
        /// The notification method names, exactly as on the wire.
        pub mod notification_method {
            $(
                #[doc = concat!("`", $name, "`")]
                pub const $constant: &str = $name;
            )+

            /// Every notification method, in contract order.
            pub const ALL: [&str; [$($name),+].len()] = [$($constant),+];
        }

        /// Every host notification with its typed params, tagged as
        /// `{"method": ..., "params": ...}`.
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
        #[serde(tag = "method", content = "params")]
        pub enum ServerNotification {
            $(
                #[doc = concat!("`", $name, "`")]
                #[serde(rename = $name)]
                $variant($params),
            )+
        }

        impl ServerNotification {
            /// The wire method name.
            pub const fn method(&self) -> &'static str {
                match self {
                    $(ServerNotification::$variant(_) => notification_method::$constant,)+
                }
            }
        }

        /// Hands every notification's name and params type to `visitor`.
        pub(crate) fn visit_notifications(visitor: &mut impl NotificationVisitor) {
            $(visitor.visit::<$params>($name);)+
        }
    };
}

/// Receives each notification's params type (see `visit_notifications`).
pub(crate) trait NotificationVisitor {
    /// One notification.
    fn visit<N: JsonSchema>(&mut self, name: &'static str);
}

server_notifications! {
    PlanApprovalRequested, PLAN_APPROVAL_REQUESTED => "plan/approvalRequested", PlanApprovalRequestedNotification;
    PlanApprovalResolved, PLAN_APPROVAL_RESOLVED => "plan/approvalResolved", PlanApprovalResolvedNotification;
    ExecutionStateChanged, EXECUTION_STATE_CHANGED => "execution/stateChanged", ExecutionStateChangedNotification;
    SessionChanged, SESSION_CHANGED => "session/changed", SessionChangedNotification;
    CommandOutput, COMMAND_OUTPUT => "command/output", CommandOutputNotification;
    CommandExited, COMMAND_EXITED => "command/exited", CommandExitedNotification;
}
