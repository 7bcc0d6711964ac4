//! The event loop every host operation shares: load the session, ask
//! plan-core, apply the effects in one storage transaction, adopt the new
//! state, queue the notifications, wake the driver, deliver.
//!
//! It carries out decisions; it makes none.

use std::collections::HashMap;

use plan_core::{
    ActiveTurn, ApprovalStatus, Context, Effect, ErrorCode, Event, PlanApproval, Reply, SessionState,
    Transition, UnixMs,
};
use plan_storage::{HostLock, Store};

use crate::host::lock;
use crate::notify::derive;
use crate::{Host, HostError};

/// The open database and the in-memory turns. `None` once closed.
pub(crate) struct Open {
    pub(crate) store: Store,
    pub(crate) turns: HashMap<String, ActiveTurn>,
    /// The clock's monotonic reading when this host created each approval,
    /// while it is pending: no wall-clock step extends its window.
    pub(crate) created: HashMap<String, i64>,
    // Held for the host's lifetime; dropping it lets another host in.
    pub(crate) _lock: HostLock,
}

impl Host {
    pub(crate) fn with_open<T>(
        &self,
        operation: impl FnOnce(&mut Open) -> Result<T, HostError>,
    ) -> Result<T, HostError> {
        let mut guard = lock(&self.open);
        match guard.as_mut() {
            Some(open) => operation(open),
            None => Err(HostError::Refused(ErrorCode::HostClosed)),
        }
    }

    pub(crate) fn session_event(
        &self,
        session_id: &str,
        event: Event,
    ) -> Result<(Reply, SessionState), HostError> {
        let (_, outcome) = self.run(session_id, event)?;
        outcome
    }

    pub(crate) fn session_event_with_effects(
        &self,
        session_id: &str,
        event: Event,
    ) -> Result<(Reply, Vec<Effect>), HostError> {
        let (effects, outcome) = self.run(session_id, event)?;
        outcome.map(|(reply, _)| (reply, effects))
    }

    /// Runs one event: decide, persist in one transaction, adopt, notify.
    ///
    /// The outer `Result` fails when nothing could be decided or persisted;
    /// the inner one carries plan-core's refusal, which may still come with
    /// committed effects (an approval that expired before the event).
    #[allow(clippy::type_complexity)]
    pub(crate) fn run(
        &self,
        session_id: &str,
        event: Event,
    ) -> Result<(Vec<Effect>, Result<(Reply, SessionState), HostError>), HostError> {
        // The wall clock and the monotonic clock are read together, once.
        let wall = self.now();
        let instant = self.options.clock.monotonic_ms();
        let (effects, outcome) = self.with_open(|open| {
            let before = load_state(open, session_id)?;
            let now = open.decision_time(wall, instant, before.pending_approval.as_ref());
            let context = Context {
                now,
                epoch: self.epoch,
                limits: self.options.limits,
            };
            let Transition {
                state,
                effects,
                reply,
            } = plan_core::handle(&before, &context, event);
            // Events that change nothing durable (a turn start, a tick with
            // nothing due) open no write transaction at all.
            let writes = effects.iter().any(|effect| match effect {
                Effect::InsertApproval(_) | Effect::UpdateApproval { .. } | Effect::SaveSession(_) => true,
                Effect::WriteArtifact(_) => false,
            });
            if writes {
                open.store.apply(&effects, now)?;
            }
            open.track_creations(&effects, instant);
            match &state.active_turn {
                Some(turn) => open.turns.insert(session_id.to_owned(), turn.clone()),
                None => open.turns.remove(session_id),
            };
            // Queued under the state lock, so the outbox is in commit order.
            lock(&self.outbox).queue.extend(derive(&before, &state, &effects));
            let outcome = reply.map(|reply| (reply, state)).map_err(HostError::Refused);
            Ok((effects, outcome))
        })?;
        if effects
            .iter()
            .any(|effect| matches!(effect, Effect::InsertApproval(_) | Effect::UpdateApproval { .. }))
        {
            self.wake_driver();
        }
        self.deliver();
        Ok((effects, outcome))
    }
}

impl Open {
    /// The monotonic milliseconds since this host created `approval`, if it did.
    pub(crate) fn elapsed_since_creation(&self, approval: &PlanApproval, instant: i64) -> Option<i64> {
        self.created
            .get(&approval.id)
            .map(|created| instant.saturating_sub(*created).max(0))
    }

    /// The time plan-core decides at for a session with this pending approval.
    fn decision_time(&self, wall: UnixMs, instant: i64, pending: Option<&PlanApproval>) -> UnixMs {
        let elapsed = pending.and_then(|approval| self.elapsed_since_creation(approval, instant));
        plan_core::decision_time(wall, pending, elapsed)
    }

    /// Remembers when committed approvals were created, and forgets them
    /// once they are no longer pending.
    fn track_creations(&mut self, effects: &[Effect], instant: i64) {
        for effect in effects {
            match effect {
                Effect::InsertApproval(approval) => {
                    self.created.insert(approval.id.clone(), instant);
                }
                Effect::UpdateApproval { approval, .. } if approval.status != ApprovalStatus::Pending => {
                    self.created.remove(&approval.id);
                }
                Effect::UpdateApproval { .. } | Effect::WriteArtifact(_) | Effect::SaveSession(_) => {}
            }
        }
    }
}

fn load_state(open: &Open, session_id: &str) -> Result<SessionState, HostError> {
    let session = open
        .store
        .get_session(session_id)?
        .ok_or_else(|| HostError::with_detail(ErrorCode::SessionNotFound, format!("session {session_id}")))?;
    Ok(SessionState {
        session,
        active_turn: open.turns.get(session_id).cloned(),
        pending_approval: open.store.pending_approval(session_id)?,
        live_execution: open.store.live_execution(session_id)?,
    })
}
