//! The event loop every host operation shares: load the session, ask
//! plan-core, apply the effects in one storage transaction, adopt the new
//! state, queue the notifications, wake the expiry timer, deliver.
//!
//! It also ends host-run commands (records, announces and reports a
//! command's end), because the loop itself ends them when a turn ends and a
//! command's end is one of its events; `commands.rs` starts them through
//! the loop.
//!
//! It carries out decisions; it makes none.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use plan_core::{
    ActiveTurn, ApprovalId, ApprovalStatus, BootEpoch, CallId, CommandRun, CommandState, Context, Effect,
    ErrorCode, Event, PlanApproval, Reply, Sandbox, SessionId, SessionState, Transition, UnixMs,
};
use plan_exec::{CommandOutcome, ExecError, ScratchDir};
use plan_storage::{CommandEntryKind, DecisionNote, FlushingArtifact, HostLock, MigrationReport, Store};

use crate::HostError;
use crate::notify::{HostEvent, NotificationListener, derive};
use crate::outbox::{DeadlineSignal, Outbox};
use crate::running::{CommandKey, CommandSlot, CommandSupport};
use crate::sync::lock;
use crate::types::HostOptions;

/// The open database and the in-memory turns and commands. `None` once
/// closed.
pub(crate) struct Open {
    pub(crate) store: Store,
    pub(crate) turns: HashMap<SessionId, ActiveTurn>,
    /// The approvals this host created, while they are pending: their
    /// session and the clock's monotonic reading at creation (no
    /// wall-clock step extends the window).
    pub(crate) created: HashMap<ApprovalId, Created>,
    /// Running commands, by session and call id.
    pub(crate) commands: HashMap<CommandKey, CommandSlot>,
    // Held for the host's lifetime; dropping it lets another host in.
    pub(crate) _lock: HostLock,
}

/// The state of a [`crate::Host`], shared with the threads that watch its
/// running commands and with the expiry timer. Private to the crate: the
/// `Host` holds it in an `Arc` and every operation is a `Host` method.
pub(crate) struct HostCore {
    pub(crate) open: Mutex<Option<Open>>,
    pub(crate) outbox: Mutex<Outbox>,
    pub(crate) listeners: Mutex<Vec<Arc<dyn NotificationListener>>>,
    pub(crate) signal: DeadlineSignal,
    pub(crate) options: HostOptions,
    pub(crate) epoch: BootEpoch,
    pub(crate) migration: MigrationReport,
    pub(crate) database: PathBuf,
    pub(crate) commands: CommandSupport,
    /// The audit exporter, while the host is open and export is on.
    pub(crate) exporter: Mutex<Option<plan_audit_export::Exporter>>,
    /// Numbers a big pre-chain history after the host answers, while it is
    /// open (plan-storage's `HistoryNumberer`).
    pub(crate) numberer: Mutex<Option<plan_storage::HistoryNumberer>>,
    /// Where a submission's artifact is flushed while its row is written:
    /// a thread of the host's with the automatic timer, the submitting
    /// thread with the manual one (that host starts no thread).
    pub(crate) flusher: plan_storage::Flusher,
}

/// A pending approval this host created.
pub(crate) struct Created {
    /// Its session, where its row is kept.
    pub(crate) session_id: SessionId,
    /// The clock's monotonic milliseconds when it was created.
    pub(crate) instant: i64,
}

/// One event carried out ([`HostCore::run`]).
pub(crate) struct Ran {
    /// The effects committed, in order. A refused event can still have some
    /// (an approval that expired before it).
    pub(crate) effects: Vec<Effect>,
    /// plan-core's reply with the session after it, or its refusal.
    pub(crate) outcome: Result<(Reply, SessionState), HostError>,
}

/// Work done under the state lock before plan-core sees an event: it may
/// queue notifications that must come before the event's own, and it may
/// say the event is moot (`false`).
pub(crate) type BeforeEvent<'hook> =
    Box<dyn FnOnce(&mut Open, &mut Vec<HostEvent>) -> Result<bool, HostError> + 'hook>;

/// An event as the state lock sees it: given whole, or completed there
/// from facts the host gathers under the same lock as the decision (the
/// approve event's artifact check, a command's facts), so nothing can
/// change between the gathering and the commit.
pub(crate) type GatherEvent<'gather> = Box<dyn FnOnce(&Open) -> Result<Event, HostError> + 'gather>;

/// Work done under the state lock right after a transition committed and
/// its notifications were queued: carrying out what plan-core decided that
/// is not storage (spawning the commands it started). It sees the reply.
pub(crate) type AfterCommit<'after> =
    Box<dyn FnOnce(&mut Open, &Result<Reply, ErrorCode>) -> Result<(), HostError> + 'after>;

impl HostCore {
    pub(crate) fn now(&self) -> UnixMs {
        self.options.clock.now_ms()
    }

    pub(crate) fn with_open<T>(
        &self,
        operation: impl FnOnce(&mut Open) -> Result<T, HostError>,
    ) -> Result<T, HostError> {
        let mut guard = lock(&self.open);
        let Some(open) = guard.as_mut() else {
            return Err(HostError::Refused(ErrorCode::HostClosed));
        };
        let writes = open.store.write_count();
        let result = operation(open);
        if open.store.write_count() != writes {
            drop(guard);
            self.wake_exporter();
        }
        result
    }

    pub(crate) fn session_event(
        &self,
        session_id: &SessionId,
        event: Event,
    ) -> Result<(Reply, SessionState), HostError> {
        self.run(session_id, event)?.outcome
    }

    /// Runs one event: decide, persist in one transaction, adopt, notify.
    ///
    /// Fails when nothing could be decided or persisted; plan-core's
    /// refusal is [`Ran::outcome`], which may still come with committed
    /// effects (an approval that expired before the event).
    pub(crate) fn run(&self, session_id: &SessionId, event: Event) -> Result<Ran, HostError> {
        self.run_event(session_id, event, None)
    }

    /// [`HostCore::run`] for the event that may record `artifact`, whose
    /// file's fsync is in flight: the transition's statements run meanwhile,
    /// and a commit that records it waits for it
    /// ([`plan_storage::Store::apply_recording`]).
    pub(crate) fn run_recording(
        &self,
        session_id: &SessionId,
        event: Event,
        artifact: &mut FlushingArtifact,
    ) -> Result<(Reply, SessionState), HostError> {
        self.run_event(session_id, event, Some(artifact))?.outcome
    }

    fn run_event(
        &self,
        session_id: &SessionId,
        event: Event,
        artifact: Option<&mut FlushingArtifact>,
    ) -> Result<Ran, HostError> {
        let ran = self.run_gathered(
            session_id,
            Box::new(move |_| Ok(event)),
            Box::new(|_, _| Ok(true)),
            None,
            Box::new(|_, _| Ok(())),
            artifact,
        )?;
        match ran {
            Some(ran) => Ok(ran),
            None => Err(HostError::with_detail(
                ErrorCode::Internal,
                "an event without a hook was skipped",
            )),
        }
    }

    /// [`HostCore::run`] with work done first under the same lock; `None`
    /// when that work said the event is moot.
    pub(crate) fn run_with(
        &self,
        session_id: &SessionId,
        event: Event,
        before: BeforeEvent<'_>,
    ) -> Result<Option<Ran>, HostError> {
        self.run_noted(session_id, Box::new(move |_| Ok(event)), before, None)
    }

    /// [`HostCore::run_with`] with the event completed under the state lock
    /// (`gather`), writing `note` (where a relayed decision came from) in
    /// the transaction that decides its approval. A failure to gather
    /// changes nothing.
    pub(crate) fn run_noted(
        &self,
        session_id: &SessionId,
        gather: GatherEvent<'_>,
        before: BeforeEvent<'_>,
        note: Option<&DecisionNote>,
    ) -> Result<Option<Ran>, HostError> {
        self.run_gathered(session_id, gather, before, note, Box::new(|_, _| Ok(())), None)
    }

    /// [`HostCore::run_noted`] with `after` carried out under the same lock
    /// once the transition committed, and with the commit waiting for
    /// `artifact` when the transition records it.
    pub(crate) fn run_gathered(
        &self,
        session_id: &SessionId,
        gather: GatherEvent<'_>,
        before: BeforeEvent<'_>,
        note: Option<&DecisionNote>,
        after: AfterCommit<'_>,
        artifact: Option<&mut FlushingArtifact>,
    ) -> Result<Option<Ran>, HostError> {
        // The wall clock and the monotonic clock are read together, once.
        let wall = self.now();
        let instant = self.options.clock.monotonic_ms();
        let ran = self.with_open(|open| {
            let mut early = Vec::new();
            if !before(open, &mut early)? {
                lock(&self.outbox).queue.extend(early);
                return Ok(None);
            }
            let before = load_state(open, session_id)?;
            let event = gather(open)?;
            let now = open.decision_time(wall, instant, before.pending_approval.as_ref());
            let context = Context {
                now,
                epoch: self.epoch,
                limits: self.options.limits.clone(),
            };
            let Transition {
                state,
                effects,
                reply,
            } = plan_core::handle(&before, &context, event);
            // Events that change nothing durable (a turn start, a tick with
            // nothing due) open no write transaction at all.
            let writes = effects.iter().any(|effect| match effect {
                Effect::InsertApproval(_)
                | Effect::UpdateApproval { .. }
                | Effect::SaveSession(_)
                | Effect::RecordToolAudit(_)
                | Effect::RecordCommand { .. }
                | Effect::BindWorkspace { .. } => true,
                Effect::WriteArtifact(_) | Effect::CancelCommand { .. } => false,
            });
            // Cancellations come first: a turn that ends here ends only after
            // its commands exited and their ends are recorded.
            for effect in &effects {
                if let Effect::CancelCommand {
                    call_id,
                    before_turn_end,
                } = effect
                {
                    self.cancel_command_now(open, session_id, call_id, *before_turn_end, &mut early)?;
                }
            }
            if writes {
                match artifact {
                    Some(artifact) => open.store.apply_recording(&effects, now, note, artifact)?,
                    None => open.store.apply_noted(&effects, now, note)?,
                }
            }
            open.track_creations(&effects, instant);
            match &state.active_turn {
                Some(turn) => {
                    open.turns.insert(session_id.clone(), turn.clone());
                }
                None => {
                    open.turns.remove(session_id);
                }
            }
            // Queued under the state lock, so the outbox is in commit order.
            let mut outbox = lock(&self.outbox);
            outbox.queue.extend(early);
            outbox.queue.extend(derive(&before, &state, &effects));
            drop(outbox);
            after(open, &reply)?;
            let outcome = reply.map(|reply| (reply, state)).map_err(HostError::Refused);
            Ok(Some(Ran { effects, outcome }))
        })?;
        let Some(ran) = ran else {
            self.deliver();
            return Ok(None);
        };
        self.wake_timer_for(&ran.effects);
        self.deliver();
        Ok(Some(ran))
    }
}

impl Open {
    /// The approval a decision is about: while this host's own pending
    /// approval, the row storage keeps for its session; otherwise the row
    /// as stored.
    pub(crate) fn decision_row(&self, approval_id: &ApprovalId) -> Result<PlanApproval, HostError> {
        if let Some(created) = self.created.get(approval_id)
            && let Some(pending) = self
                .store
                .session_rows(&created.session_id)?
                .and_then(|rows| rows.pending_approval)
                .filter(|pending| pending.id == *approval_id)
        {
            return Ok(pending);
        }
        match self.store.get_approval(approval_id)? {
            Some(row) => Ok(row.approval),
            None => Err(HostError::with_detail(
                ErrorCode::ApprovalNotFound,
                format!("approval {approval_id}"),
            )),
        }
    }

    /// The monotonic milliseconds since this host created `approval`, if it did.
    pub(crate) fn elapsed_since_creation(&self, approval: &PlanApproval, instant: i64) -> Option<i64> {
        self.created
            .get(&approval.id)
            .map(|created| instant.saturating_sub(created.instant).max(0))
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
                    self.created.insert(
                        approval.id.clone(),
                        Created {
                            session_id: approval.session_id.clone(),
                            instant,
                        },
                    );
                }
                Effect::UpdateApproval { approval, .. } if approval.status != ApprovalStatus::Pending => {
                    self.created.remove(&approval.id);
                }
                Effect::UpdateApproval { .. }
                | Effect::WriteArtifact(_)
                | Effect::SaveSession(_)
                | Effect::RecordToolAudit(_)
                | Effect::RecordCommand { .. }
                | Effect::BindWorkspace { .. }
                | Effect::CancelCommand { .. } => {}
            }
        }
    }
}

/// The session's state: the rows storage keeps or reads in one
/// transaction, and the active turn this host keeps.
fn load_state(open: &Open, session_id: &SessionId) -> Result<SessionState, HostError> {
    let rows = open
        .store
        .session_rows(session_id)?
        .ok_or_else(|| HostError::with_detail(ErrorCode::SessionNotFound, format!("session {session_id}")))?;
    Ok(SessionState {
        session: rows.session,
        active_turn: open.turns.get(session_id).cloned(),
        pending_approval: rows.pending_approval,
        live_execution: rows.live_execution,
    })
}

impl HostCore {
    /// Delivers queued notifications in commit order, after the state lock
    /// is released (so a listener may call back into the host). If another
    /// thread is delivering already, it delivers these too, after the ones
    /// committed before them.
    /// Tells the exporter (if any) that something was committed; it never
    /// waits on the exporter's work.
    pub(crate) fn wake_exporter(&self) {
        if let Some(exporter) = lock(&self.exporter).as_ref() {
            exporter.wake();
        }
    }

    pub(crate) fn deliver(&self) {
        {
            let mut outbox = lock(&self.outbox);
            if outbox.draining || outbox.queue.is_empty() {
                return;
            }
            outbox.draining = true;
        }
        let _unwinding = DrainGuard(&self.outbox);
        loop {
            let notification = {
                let mut outbox = lock(&self.outbox);
                match outbox.queue.pop_front() {
                    Some(notification) => notification,
                    None => {
                        outbox.draining = false;
                        return;
                    }
                }
            };
            let listeners = lock(&self.listeners).clone();
            for listener in &listeners {
                listener.notify(notification.clone());
            }
        }
    }

    /// Wakes the timer if committed `effects` may have moved the earliest
    /// deadline before the time it looks again anyway: a new pending
    /// approval due earlier. A row leaving pending only moves deadlines
    /// later, so the timer's own next look is soon enough for it (it finds
    /// nothing due and reads the deadlines again).
    pub(crate) fn wake_timer_for(&self, effects: &[Effect]) {
        let looks_at = self.signal.looks_at.load(Ordering::SeqCst);
        let earlier = effects.iter().any(|effect| match effect {
            Effect::InsertApproval(approval) | Effect::UpdateApproval { approval, .. } => {
                approval.status == ApprovalStatus::Pending && approval.expires_at < looks_at
            }
            Effect::WriteArtifact(_)
            | Effect::SaveSession(_)
            | Effect::RecordToolAudit(_)
            | Effect::RecordCommand { .. }
            | Effect::BindWorkspace { .. }
            | Effect::CancelCommand { .. } => false,
        });
        if earlier {
            self.wake_timer();
        }
    }

    pub(crate) fn wake_timer(&self) {
        *lock(&self.signal.generation) += 1;
        self.signal.changed.notify_all();
    }
}

// The host's life and its deadlines, for the `Host` and the timer.
impl HostCore {
    /// Releases the database and the lock, cancels running commands and
    /// wakes the timer so that it ends.
    pub(crate) fn close_now(&self) {
        // The exporter stops first (after its request in flight): no
        // connection of this host outlives the lock.
        let exporter = lock(&self.exporter).take();
        drop(exporter);
        let numberer = lock(&self.numberer).take();
        drop(numberer);
        let closed = lock(&self.open).take();
        if let Some(open) = &closed {
            // Running commands do not outlive the host.
            for slot in open.commands.values() {
                slot.cancel.cancel();
            }
        }
        drop(closed);
        self.flusher.stop();
        self.wake_timer();
    }

    pub(crate) fn closed(&self) -> bool {
        lock(&self.open).is_none()
    }

    /// The earliest pending deadline, on the wall clock as it is now.
    pub(crate) fn earliest_deadline(&self) -> Result<Option<UnixMs>, HostError> {
        let wall = self.now();
        let instant = self.options.clock.monotonic_ms();
        self.with_open(|open| {
            let live = open.store.live_rows()?;
            Ok(plan_core::next_deadline(&live, wall, |row| {
                open.elapsed_since_creation(row, instant)
            }))
        })
    }

    /// Expires every approval plan-core calls due; returns them.
    pub(crate) fn expire_due_now(&self) -> Result<Vec<PlanApproval>, HostError> {
        let wall = self.now();
        let instant = self.options.clock.monotonic_ms();
        let due: Vec<SessionId> = self.with_open(|open| {
            let live = open.store.live_rows()?;
            Ok(
                plan_core::due_approvals(&live, wall, |row| open.elapsed_since_creation(row, instant))
                    .into_iter()
                    .map(|row| row.session_id.clone())
                    .collect(),
            )
        })?;
        let mut expired = Vec::new();
        for session_id in due {
            let ran = self.run(&session_id, Event::Tick)?;
            expired.extend(ran.effects.into_iter().filter_map(|effect| match effect {
                Effect::UpdateApproval { approval, .. } => Some(approval),
                Effect::WriteArtifact(_)
                | Effect::InsertApproval(_)
                | Effect::SaveSession(_)
                | Effect::RecordToolAudit(_)
                | Effect::RecordCommand { .. }
                | Effect::BindWorkspace { .. }
                | Effect::CancelCommand { .. } => None,
            }));
        }
        Ok(expired)
    }
}

// The end of a host-run command: recorded, announced and told to plan-core
// here, in the event loop's module, because the loop itself ends commands
// (a turn's `CancelCommand`) and a command's end is an event of the loop.
impl HostCore {
    /// Carries out a `CancelCommand` effect under the state lock. For a turn
    /// that ends in the same transition, waits until the command exited and
    /// records its end first.
    pub(crate) fn cancel_command_now(
        &self,
        open: &mut Open,
        session_id: &SessionId,
        call_id: &CallId,
        before_turn_end: bool,
        early: &mut Vec<HostEvent>,
    ) -> Result<(), HostError> {
        let key = (session_id.clone(), call_id.to_owned());
        if !before_turn_end {
            if let Some(slot) = open.commands.get(&key) {
                slot.cancel.cancel();
            }
            return Ok(());
        }
        let Some(slot) = open.commands.get(&key) else {
            return Ok(());
        };
        slot.cancel.cancel();
        self.record_end(open, &key, early)?;
        Ok(())
    }

    /// Records the end of the command `key` (its outcome is known or about
    /// to be: the watcher hands it over before it asks for the state lock)
    /// and only then lets go of it. When the entry cannot be written, the
    /// slot stays, with the ended run fixed, so a retry writes the same
    /// entry; nothing is dropped. `Ok(false)`: no such command (recorded
    /// already).
    fn record_end(
        &self,
        open: &mut Open,
        key: &CommandKey,
        early: &mut Vec<HostEvent>,
    ) -> Result<bool, HostError> {
        let Some(slot) = open.commands.get_mut(key) else {
            return Ok(false);
        };
        let (ended, output_sha256) = match &slot.ended {
            Some(ended) => ended.clone(),
            None => {
                let outcome = slot.done.wait();
                let ended = ended_run(&slot.run, &outcome, self.now());
                let ended = (ended, outcome.output_sha256);
                slot.ended = Some(ended.clone());
                ended
            }
        };
        let now = ended.ended_at.unwrap_or(ended.started_at);
        open.store
            .record_command(CommandEntryKind::Ended, &ended, Some(&output_sha256), now)?;
        if let Some(slot) = open.commands.remove(key) {
            self.remove_scratch(&slot.scratch);
        }
        early.push(exited(&ended));
        Ok(true)
    }

    /// A command is over (everything it started is gone): its scratch
    /// directory goes.
    pub(crate) fn remove_scratch(&self, scratch: &ScratchDir) {
        if let Some(root) = &self.commands.scratch_root {
            // What cannot be removed now is removed by the next startup
            // sweep; no later command is given this directory again.
            let _ = root.remove(scratch);
        }
    }

    /// The watcher's part once a command exited on its own (or was
    /// cancelled by `command/cancel`): record, announce, tell plan-core.
    /// An end that cannot be written is retried, with a growing pause,
    /// until it is written or the host closes; meanwhile the host starts no
    /// command (`STORAGE_FAILED`), so the audit never loses a run.
    pub(crate) fn finish(&self, key: &CommandKey) {
        let session_id = key.0.clone();
        let mut pause = RETRY_FIRST;
        loop {
            let event = Event::CommandEnded {
                call_id: key.1.clone(),
            };
            let recorded = self.run_with(
                &session_id,
                event,
                Box::new(|open, early| self.record_end(open, key, early)),
            );
            match recorded {
                Ok(_) => return,
                // A closed host has nobody left to tell; the next host's
                // fence records the run as interrupted.
                Err(error) if error.code() == ErrorCode::HostClosed => return,
                Err(_) => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(RETRY_MAX);
                }
            }
        }
    }
}

/// The canonical code of a command that could not start: the one mapping
/// from plan-exec's errors to codes.
fn start_failure_code(error: &ExecError, sandbox: Sandbox) -> ErrorCode {
    match error {
        ExecError::SandboxUnavailable { .. } => sandbox.unavailable_code(),
        ExecError::ShellUnavailable { .. } => ErrorCode::ShellUnavailable,
        ExecError::CwdUnavailable { .. } | ExecError::InvalidSpec { .. } => ErrorCode::InvalidCommandInput,
        ExecError::ScratchDirMissing { .. } | ExecError::ScratchDir { .. } | ExecError::Spawn { .. } => {
            ErrorCode::Internal
        }
    }
}

/// The run after its outcome.
fn ended_run(run: &CommandRun, outcome: &CommandOutcome, now: i64) -> CommandRun {
    let mut ended = run.clone();
    ended.state = match outcome.state {
        plan_exec::CommandState::Exited => CommandState::Exited,
        plan_exec::CommandState::TimedOut => CommandState::TimedOut,
        plan_exec::CommandState::Cancelled => CommandState::Cancelled,
        plan_exec::CommandState::FailedToStart => CommandState::FailedToStart,
        // The supervisor vanished: the command died with it, how is unknown.
        plan_exec::CommandState::Lost => CommandState::Interrupted,
    };
    ended.error_code = match (&outcome.error, outcome.state) {
        (Some(error), _) => Some(start_failure_code(error, run.sandbox)),
        (None, plan_exec::CommandState::Lost) => Some(ErrorCode::Internal),
        (
            None,
            plan_exec::CommandState::Exited
            | plan_exec::CommandState::TimedOut
            | plan_exec::CommandState::Cancelled
            | plan_exec::CommandState::FailedToStart,
        ) => None,
    };
    ended.exit_code = outcome.exit_code;
    ended.signal = outcome.signal;
    ended.stdout_bytes = outcome.stdout_bytes;
    ended.stderr_bytes = outcome.stderr_bytes;
    ended.truncated = outcome.truncated;
    ended.ended_at = Some(now.max(run.started_at));
    ended
}

fn exited(run: &CommandRun) -> HostEvent {
    HostEvent::CommandExited(run.clone())
}

/// The first pause before an unwritten command end is written again.
const RETRY_FIRST: Duration = Duration::from_millis(50);

/// The longest pause between two attempts to write a command's end.
const RETRY_MAX: Duration = Duration::from_secs(2);

/// Lets another thread drain the outbox if a listener panics mid-delivery.
struct DrainGuard<'host>(&'host Mutex<Outbox>);

impl Drop for DrainGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            lock(self.0).draining = false;
        }
    }
}
