//! Notifications: what the host tells its embedder after a change commits.
//!
//! They are derived from a transition's effects and from the session before
//! and after, so no code path can change state without the matching
//! notification. They are queued in commit order while the host's lock is
//! held and delivered after it is released, so a listener may call back
//! into the host.

use plan_core::{ApprovalStatus, Effect, SessionState};
use plan_protocol::{
    ExecutionStateChangedNotification, PlanApprovalRequestedNotification, PlanApprovalResolvedNotification,
    ServerNotification, Session as WireSession, SessionChangedNotification,
};

/// Receives host notifications, one at a time and in commit order. Called on
/// a thread that made a change (an embedder's or the expiry timer's); when
/// two threads change state at once, the one already delivering also
/// delivers the other's notifications, after its own. Any
/// `Fn(ServerNotification) + Send + Sync` closure is a listener.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// use std::sync::{Arc, Mutex};
///
/// use plan_host::{Host, HostOptions, NewSession, ServerNotification};
///
/// let host = Host::open(dir.path().join("plan.db"), HostOptions::default())?;
/// let methods = Arc::new(Mutex::new(Vec::new()));
/// let seen = Arc::clone(&methods);
/// host.add_listener(Arc::new(move |notification: ServerNotification| {
///     seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(notification.method());
/// }));
/// host.create_session(NewSession::default())?;
/// // Creating an idle session changes nothing a client was told about.
/// assert!(methods.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait NotificationListener: Send + Sync {
    /// One notification, in commit order for its session.
    fn notify(&self, notification: ServerNotification);
}

impl<F> NotificationListener for F
where
    F: Fn(ServerNotification) + Send + Sync,
{
    fn notify(&self, notification: ServerNotification) {
        self(notification);
    }
}

/// The notifications one committed transition implies.
pub(crate) fn derive(
    before: &SessionState,
    after: &SessionState,
    effects: &[Effect],
) -> Vec<ServerNotification> {
    let mut notifications = Vec::new();
    for effect in effects {
        match effect {
            Effect::InsertApproval(approval) => notifications.push(
                ServerNotification::PlanApprovalRequested(PlanApprovalRequestedNotification::from(approval)),
            ),
            Effect::UpdateApproval { approval, expected } => {
                if expected.status == ApprovalStatus::Pending && approval.status != ApprovalStatus::Pending {
                    notifications.push(ServerNotification::PlanApprovalResolved(
                        PlanApprovalResolvedNotification::from(approval),
                    ));
                }
                if approval.execution_state != expected.execution_state
                    && let Some(changed) = ExecutionStateChangedNotification::from_approval(approval)
                {
                    notifications.push(ServerNotification::ExecutionStateChanged(changed));
                }
            }
            Effect::WriteArtifact(_) | Effect::SaveSession(_) | Effect::CancelCommand { .. } => {}
        }
    }
    if WireSession::from(before) != WireSession::from(after) {
        notifications.push(ServerNotification::SessionChanged(
            SessionChangedNotification::from(after),
        ));
    }
    notifications
}
