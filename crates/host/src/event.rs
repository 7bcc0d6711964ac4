//! The event loop every host operation shares: load the session, ask
//! plan-core, apply the effects in one storage transaction, adopt the new
//! state, queue the notifications, wake the driver, deliver.
//!
//! It carries out decisions; it makes none.

use std::collections::HashMap;

use plan_core::{ActiveTurn, Context, Effect, ErrorCode, Event, Reply, SessionState, Transition};
use plan_storage::{HostLock, Store};

use crate::host::lock;
use crate::notify::derive;
use crate::{Host, HostError};

/// The open database and the in-memory turns. `None` once closed.
pub(crate) struct Open {
    pub(crate) store: Store,
    pub(crate) turns: HashMap<String, ActiveTurn>,
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
        let now = self.now();
        let context = Context {
            now,
            epoch: self.epoch,
            limits: self.options.limits,
        };
        let (effects, outcome) = self.with_open(|open| {
            let before = load_state(open, session_id)?;
            let Transition {
                state,
                effects,
                reply,
            } = plan_core::handle(&before, &context, event);
            // Events that change nothing durable (a turn start, a tick with
            // nothing due) open no write transaction at all.
            let writes = effects.iter().any(|effect| match effect {
                Effect::InsertApproval(_) | Effect::UpdateApproval { .. } | Effect::SaveSession(_) => true,
                Effect::WriteArtifact(_) | Effect::CancelCommand { .. } => false,
            });
            if writes {
                open.store.apply(&effects, now)?;
            }
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
