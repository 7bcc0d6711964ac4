//! Host events: what the host tells its embedder after a change commits.
//!
//! They are derived from a transition's effects and from the session before
//! and after, so no code path can change state without the matching event.
//! They are queued in commit order while the host's lock is held and
//! delivered after it is released, so a listener may call back into the
//! host. They are domain values: turning them into protocol notifications is
//! the server's job, not this module's.

use plan_core::{
    ApprovalStatus, CallId, CommandRun, Effect, ExecutionId, ExecutionState, PlanApproval, SessionId,
    SessionState,
};
use plan_exec::Stream;

/// One change a listener hears about. Each variant is one protocol v9
/// notification's content, in plan-core's types (the server crate writes
/// each as its notification).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostEvent {
    /// A SubmitPlan created this pending approval.
    ApprovalRequested(PlanApproval),
    /// An approval was approved, rejected, expired or interrupted; the row
    /// after the change.
    ApprovalResolved(PlanApproval),
    /// An execution moved to a new state.
    ExecutionStateChanged {
        /// The owning session.
        session_id: SessionId,
        /// The execution.
        execution_id: ExecutionId,
        /// Its new state.
        state: ExecutionState,
    },
    /// What a client sees of a session (its configuration, active turn,
    /// pending approval or live execution) changed; the session after it.
    SessionChanged(Box<SessionState>),
    /// One chunk of a host-run command's output.
    CommandOutput {
        /// The session.
        session_id: SessionId,
        /// The tool call that runs the command.
        call_id: CallId,
        /// stdout or stderr.
        stream: Stream,
        /// The chunk's number within the call, from 0, across both streams.
        seq: u64,
        /// The text of the chunk.
        chunk: String,
    },
    /// A host-run command ended; the run as it ended.
    CommandExited(CommandRun),
}

/// Receives host events, one at a time and in commit order. Called on a
/// thread that made a change (an embedder's or the expiry timer's); when
/// two threads change state at once, the one already delivering also
/// delivers the other's events, after its own. Any
/// `Fn(HostEvent) + Send + Sync` closure is a listener.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// use std::sync::{Arc, Mutex};
///
/// use plan_host::{Host, HostEvent, HostOptions, NewSession};
///
/// let host = Host::open(dir.path().join("plan.db"), HostOptions::default())?;
/// let events = Arc::new(Mutex::new(Vec::new()));
/// let seen = Arc::clone(&events);
/// host.add_listener(Arc::new(move |event: HostEvent| {
///     seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(event);
/// }));
/// host.create_session(NewSession::default())?;
/// // Creating an idle session changes nothing a client was told about.
/// assert!(events.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait NotificationListener: Send + Sync {
    /// One event, in commit order for its session.
    fn notify(&self, event: HostEvent);
}

impl<F> NotificationListener for F
where
    F: Fn(HostEvent) + Send + Sync,
{
    fn notify(&self, event: HostEvent) {
        self(event);
    }
}

/// The events one committed transition implies.
pub(crate) fn derive(before: &SessionState, after: &SessionState, effects: &[Effect]) -> Vec<HostEvent> {
    let mut events = Vec::new();
    for effect in effects {
        match effect {
            Effect::InsertApproval(approval) => events.push(HostEvent::ApprovalRequested(approval.clone())),
            Effect::UpdateApproval { approval, expected } => {
                if expected.status == ApprovalStatus::Pending && approval.status != ApprovalStatus::Pending {
                    events.push(HostEvent::ApprovalResolved(approval.clone()));
                }
                if approval.execution_state != expected.execution_state
                    && let (Some(execution_id), Some(state)) =
                        (&approval.execution_id, approval.execution_state)
                {
                    events.push(HostEvent::ExecutionStateChanged {
                        session_id: approval.session_id.clone(),
                        execution_id: execution_id.clone(),
                        state,
                    });
                }
            }
            Effect::WriteArtifact(_)
            | Effect::SaveSession(_)
            | Effect::RecordToolAudit(_)
            | Effect::RecordCommand { .. }
            | Effect::BindWorkspace { .. }
            | Effect::CancelCommand { .. } => {}
        }
    }
    if visible(before) != visible(after) {
        events.push(HostEvent::SessionChanged(Box::new(after.clone())));
    }
    // A command plan-core recorded ended in the same transition failed to
    // start: its `command/exited` is the last word about it.
    for effect in effects {
        if let Effect::RecordCommand {
            kind: plan_core::CommandEntryKind::Ended,
            run,
        } = effect
        {
            events.push(HostEvent::CommandExited(run.clone()));
        }
    }
    events
}

/// The parts of a session a client sees, borrowed.
type VisibleSession<'state> = (
    &'state plan_core::Session,
    Option<(
        &'state plan_core::TurnId,
        plan_core::Mode,
        plan_core::Origin,
        plan_core::TurnKind,
    )>,
    Option<&'state plan_core::ApprovalId>,
    Option<&'state ExecutionId>,
);

/// What a client sees of a session: the configuration, the active turn
/// without its in-memory bookkeeping (epoch, commands), the pending
/// approval's id and the live execution's id. A `SessionChanged` event is
/// due exactly when this changes.
fn visible(state: &SessionState) -> VisibleSession<'_> {
    (
        &state.session,
        state
            .active_turn
            .as_ref()
            .map(|turn| (&turn.turn_id, turn.mode, turn.origin, turn.kind)),
        state.pending_approval.as_ref().map(|approval| &approval.id),
        state
            .live_execution
            .as_ref()
            .and_then(|approval| approval.execution_id.as_ref()),
    )
}
