//! The notifications of protocol v9 (host -> client) and the
//! [`ServerNotification`] union.
//!
//! A notification has no id and gets no answer. Like results, absent
//! optional values are `null`. Each notification is listed once, in
//! [`for_each_server_notification!`], which this module expands into the
//! union and plan-ffi into its UniFFI export of this very union (foreign
//! listeners receive it as it is); the params records are declared in the
//! shared-object list (`objects`), so the FFI exports them from there too.
//! This module only shapes notifications; when to send one is the host's
//! decision.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    CommandExitedNotification, CommandOutputNotification, ExecutionStateChangedNotification,
    PlanApprovalRequestedNotification, PlanApprovalResolvedNotification, SessionChangedNotification,
};

/// Expands [`for_each_server_notification!`]'s list into the
/// name constants and [`notification_method::ALL`], the method-tagged
/// [`ServerNotification`] union, [`ServerNotification::method`] and the
/// list the schema files are generated from. Adding a notification is one
/// line in that list plus its params record in the shared-object list.
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

/// The one list of host notifications, as
/// `Variant, CONSTANT => "resource/event", ParamsType;`, handed whole to
/// `$callback`: this module's `server_notifications!` and plan-ffi's export
/// of [`ServerNotification`]. The params types are named as the crate root
/// exports them, so a caller brings them into scope.
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_server_notification {
    ($callback:ident) => {
        $callback! {
            PlanApprovalRequested, PLAN_APPROVAL_REQUESTED => "plan/approvalRequested", PlanApprovalRequestedNotification;
            PlanApprovalResolved, PLAN_APPROVAL_RESOLVED => "plan/approvalResolved", PlanApprovalResolvedNotification;
            ExecutionStateChanged, EXECUTION_STATE_CHANGED => "execution/stateChanged", ExecutionStateChangedNotification;
            SessionChanged, SESSION_CHANGED => "session/changed", SessionChangedNotification;
            CommandOutput, COMMAND_OUTPUT => "command/output", CommandOutputNotification;
            CommandExited, COMMAND_EXITED => "command/exited", CommandExitedNotification;
        }
    };
}

for_each_server_notification!(server_notifications);
