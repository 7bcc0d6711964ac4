//! [`Host`]: the typed embedding API.
//!
//! Each operation reads the clock once, loads the session's state (persisted
//! rows plus the in-memory active turn), asks plan-core what happens, applies
//! the resulting storage effects in one transaction, and only then adopts the
//! new state and tells listeners. The host adds no policy of its own: when it
//! refuses something, plan-core or storage said so.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use plan_core::{
    ActiveTurn, BootEpoch, ConfigChange, Effect, ErrorCode, Event, Limits, Origin, PermissionMode,
    PlanApproval, PlanDiff, Reply, SessionState, ToolCall, ToolDecision, UnixMs, VerifyReport, VerifyScope,
};
use plan_storage::{ApprovalFilter, ExclusiveStore, MigrationReport, StoredApproval};

use crate::HostError;
use crate::commands::CommandSupport;
use crate::event::{HostCore, Open};
use crate::notify::NotificationListener;
use crate::outbox::{DeadlineSignal, Outbox};
use crate::timer::{ExpiryTimer, TimerThread};
use crate::types::{ArtifactContent, HostOptions, NewSession, ToolCallOutcome, ToolCallVerdict};

/// The plan checkpoint host. `Send + Sync`: share it behind an `Arc`.
///
/// Its state lives in a [`HostCore`] shared with the threads that watch
/// running commands (they record a command's end when it exits on its own).
pub struct Host {
    pub(crate) core: Arc<HostCore>,
    /// The expiry timer thread, unless the embedder chose
    /// [`ExpiryTimer::Manual`]. It holds the core, not the `Host`, so
    /// dropping the `Host` is what stops it.
    timer: Option<TimerThread>,
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Some(mut timer) = self.timer.take() {
            timer.stop(&self.core);
        }
    }
}

impl std::ops::Deref for Host {
    type Target = HostCore;

    fn deref(&self) -> &HostCore {
        &self.core
    }
}

impl std::fmt::Debug for Host {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Host")
            .field("database", &self.database)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

pub(crate) fn fresh_id(prefix: &str) -> String {
    // Version 7 ids sort by creation time, which keeps logs and listings readable.
    format!("{prefix}-{}", uuid::Uuid::now_v7().simple())
}

impl Host {
    /// Opens the host on a database: takes the single-host lock (a second
    /// live host is `HOST_ALREADY_RUNNING`), migrates the schema to v10, and
    /// runs the startup fence, all before it returns. A `Host` that exists
    /// has therefore always recovered: it cannot serve before recovery.
    pub fn open(database: impl AsRef<Path>, options: HostOptions) -> Result<Host, HostError> {
        let database = database.as_ref().to_path_buf();
        let mut opened = ExclusiveStore::open(&database)?;
        let now = options.clock.now_ms();
        // On failure `opened` drops as a whole: the connection closes before
        // the lock is released.
        opened.store.startup_fence(now)?;
        let ExclusiveStore {
            store,
            migration,
            lock,
        } = opened;
        let epoch = BootEpoch(uuid::Uuid::new_v4().as_u64_pair().0);
        let mut options = options;
        let commands = CommandSupport::open(&options, &database)?;
        // The probe, not the embedder, says whether the sandbox works.
        options.limits.commands.sandbox_available = commands.sandbox_available();
        let core = Arc::new(HostCore {
                open: Mutex::new(Some(Open {
                    store,
                    turns: HashMap::new(),
                    created: HashMap::new(),
                    commands: HashMap::new(),
                    scratch: HashMap::new(),
                    _lock: lock,
                })),
                outbox: Mutex::new(Outbox::default()),
                listeners: Mutex::new(Vec::new()),
                signal: DeadlineSignal::default(),
                options,
                epoch,
                migration,
                database,
                commands,
            });
        let timer = match core.options.expiry {
            ExpiryTimer::Automatic => Some(TimerThread::spawn(&core).map_err(|error| {
                core.close_now();
                HostError::with_detail(
                    ErrorCode::Internal,
                    format!("cannot start the expiry timer: {error}"),
                )
            })?),
            ExpiryTimer::Manual => None,
        };
        Ok(Host { core, timer })
    }

    /// What opening did to the schema.
    pub fn migration(&self) -> &MigrationReport {
        &self.migration
    }

    /// The database path.
    pub fn database(&self) -> &Path {
        &self.database
    }

    /// The host's limits.
    pub fn limits(&self) -> Limits {
        self.options.limits
    }

    /// Registers a listener for every later notification.
    pub fn add_listener(&self, listener: Arc<dyn NotificationListener>) {
        lock(&self.listeners).push(listener);
    }

    /// Closes the host: releases the database and the single-host lock. Every
    /// later call fails with `HOST_CLOSED`. Closing twice is harmless.
    pub fn close(&self) {
        self.core.close_now();
    }

    /// Whether [`Host::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.core.closed()
    }

    // Sessions.

    /// Creates an idle session. plan-core decides what it may be: a
    /// non-empty id, and a workspace root stored normalized (`/w/` and
    /// `/x/../w` are `/w`; relative roots, NUL and a `..` above `/` are
    /// `INVALID_PARAMS`).
    pub fn create_session(&self, new: NewSession) -> Result<SessionState, HostError> {
        let session_id = new.session_id.unwrap_or_else(|| fresh_id("session"));
        let session = plan_core::new_session(
            session_id,
            new.workspace_root.as_deref(),
            new.mode,
            new.permission_mode,
        )
        .map_err(|refusal| HostError::with_detail(refusal.code(), refusal.to_string()))?;
        let now = self.now();
        self.with_open(|open| {
            open.store.create_session(&session, now)?;
            Ok(SessionState::idle(session))
        })
    }

    /// The session as it is now (an overdue approval is expired first).
    pub fn session(&self, session_id: &str) -> Result<SessionState, HostError> {
        self.session_event(session_id, Event::Tick)
            .map(|(_, state)| state)
    }

    /// Changes configuration; only while the session is idle, and a shell
    /// only from the host's catalog (`SHELL_UNKNOWN`).
    pub fn configure_session(
        &self,
        session_id: &str,
        change: ConfigChange,
    ) -> Result<SessionState, HostError> {
        let shells = self.options.shells.iter().map(|spec| spec.id.clone()).collect();
        self.session_event(session_id, Event::Configure { change, shells })
            .map(|(_, state)| state)
    }

    // Turns.

    /// Starts a prompt turn in the session's current mode.
    pub fn start_turn(&self, session_id: &str, origin: Origin) -> Result<ActiveTurn, HostError> {
        let turn_id = fresh_id("turn");
        match self.session_event(session_id, Event::StartTurn { turn_id, origin })? {
            (Reply::TurnStarted(turn), _) => Ok(turn),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Decides a batch of tool calls. A valid SubmitPlan writes its artifact
    /// durably and creates the pending approval before this returns.
    pub fn tool_calls(
        &self,
        session_id: &str,
        turn_id: &str,
        calls: Vec<ToolCall>,
    ) -> Result<Vec<ToolCallOutcome>, HostError> {
        // Bash calls, so that a refused one can be recorded in the audit.
        let bash_calls: Vec<(String, serde_json::Value)> = calls
            .iter()
            .filter(|call| call.name == plan_core::BASH)
            .map(|call| (call.call_id.clone(), call.input.clone()))
            .collect();
        let event = Event::ToolCalls {
            turn_id: turn_id.to_owned(),
            calls,
        };
        let (reply, effects) = self.session_event_with_effects(session_id, event)?;
        let Reply::ToolResults(results) = reply else {
            return Err(unexpected(&reply));
        };
        let mut writes = effects.into_iter().filter_map(|effect| match effect {
            Effect::WriteArtifact(request) => Some(request),
            Effect::InsertApproval(_)
            | Effect::UpdateApproval { .. }
            | Effect::SaveSession(_)
            | Effect::CancelCommand { .. } => None,
        });
        let mut outcomes = Vec::with_capacity(results.len());
        for result in results {
            let outcome = match result.decision {
                ToolDecision::Allow => ToolCallOutcome {
                    call_id: result.call_id,
                    decision: ToolCallVerdict::Allow(None),
                    approval: None,
                    message: None,
                    command: None,
                },
                ToolDecision::Delegate(mode) => ToolCallOutcome {
                    call_id: result.call_id,
                    decision: ToolCallVerdict::Allow(Some(mode)),
                    approval: None,
                    message: None,
                    command: None,
                },
                ToolDecision::Deny(code) => {
                    if let Some((_, input)) =
                        bash_calls.iter().find(|(call_id, _)| *call_id == result.call_id)
                    {
                        let text = |key: &str| input.get(key).and_then(serde_json::Value::as_str);
                        self.record_refusal(
                            session_id,
                            turn_id,
                            &result.call_id,
                            text("command").unwrap_or_default(),
                            text("cwd"),
                            code,
                        )?;
                    }
                    ToolCallOutcome {
                        call_id: result.call_id,
                        decision: ToolCallVerdict::Deny(code),
                        approval: None,
                        message: None,
                        command: None,
                    }
                }
                // A Plan-turn Bash call: the host runs it, sandboxed, before
                // it answers.
                ToolDecision::RunCommand(request) => ToolCallOutcome {
                    call_id: result.call_id,
                    decision: ToolCallVerdict::Allow(None),
                    approval: None,
                    message: None,
                    command: Some(self.start_command(request)?),
                },
                ToolDecision::WriteArtifact => match writes.next() {
                    Some(request) => self.write_artifact(session_id, request)?,
                    None => {
                        return Err(HostError::with_detail(
                            ErrorCode::Internal,
                            "a write without a request",
                        ));
                    }
                },
            };
            outcomes.push(outcome);
        }
        Ok(outcomes)
    }

    /// Writes the artifact, then reports the outcome to plan-core.
    fn write_artifact(
        &self,
        session_id: &str,
        request: plan_core::ArtifactRequest,
    ) -> Result<ToolCallOutcome, HostError> {
        let now = self.now();
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let written = plan_storage::write_artifact(
            &request.workspace_root,
            &request.title,
            request.markdown.as_bytes(),
            now,
            &suffix[..12],
        );
        let call_id = request.call_id.clone();
        let workspace_root = request.workspace_root.clone();
        let written_artifact = written.as_ref().ok().cloned();
        // The code alone cannot tell a full disk from a read-only one; the
        // storage error names the OS cause, and the agent sees it.
        let failure = written
            .as_ref()
            .err()
            .map(|error| (error.code(), error.to_string()));
        let event = match written {
            Ok(artifact) => Event::ArtifactWritten {
                request,
                approval_id: fresh_id("approval"),
                artifact,
            },
            Err(error) => Event::ArtifactFailed {
                request,
                code: error.code(),
            },
        };
        let recorded = self.session_event(session_id, event);
        if let Some(artifact) = &written_artifact
            && !matches!(recorded, Ok((Reply::ApprovalRequested { .. }, _)))
        {
            // The file was written but no approval records it: another call
            // ended the Plan turn or submitted first while it was being
            // written. A refused submission leaves nothing behind. Should the
            // removal itself fail, `approvals verify` reports the orphan.
            let _discarded = plan_storage::discard_unrecorded_artifact(&workspace_root, artifact);
        }
        match recorded? {
            (Reply::ApprovalRequested { call_id, approval }, _) => Ok(ToolCallOutcome {
                call_id,
                decision: ToolCallVerdict::Allow(None),
                approval: Some(approval),
                message: None,
                command: None,
            }),
            (Reply::ToolResults(results), _) => {
                let code = results
                    .into_iter()
                    .find_map(|result| match result.decision {
                        ToolDecision::Deny(code) => Some(code),
                        ToolDecision::Allow
                        | ToolDecision::Delegate(_)
                        | ToolDecision::WriteArtifact
                        | ToolDecision::RunCommand(_) => None,
                    })
                    .unwrap_or(ErrorCode::ArtifactWriteFailed);
                let message = failure
                    .filter(|(failed, _)| *failed == code)
                    .map(|(_, message)| message);
                Ok(ToolCallOutcome {
                    call_id,
                    decision: ToolCallVerdict::Deny(code),
                    approval: None,
                    message,
                    command: None,
                })
            }
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Ends the active prompt turn.
    pub fn complete_turn(&self, session_id: &str, turn_id: &str) -> Result<SessionState, HostError> {
        let event = Event::CompleteTurn {
            turn_id: turn_id.to_owned(),
        };
        self.session_event(session_id, event).map(|(_, state)| state)
    }

    /// Cancels the active turn; a queued or running execution is interrupted.
    pub fn cancel_turn(&self, session_id: &str) -> Result<SessionState, HostError> {
        self.end_commands_before_cancel(session_id)?;
        self.session_event(session_id, Event::CancelTurn)
            .map(|(_, state)| state)
    }

    // Approvals.

    /// Approves with an explicit permission mode (`None` is refused with
    /// `PERMISSION_MODE_REQUIRED`).
    pub fn approve(
        &self,
        approval_id: &str,
        permission_mode: Option<PermissionMode>,
    ) -> Result<(PlanApproval, SessionState), HostError> {
        let row = self.stored_approval(approval_id)?;
        let session_id = row.approval.session_id.clone();
        let event = Event::Approve {
            approval: row.approval,
            permission_mode,
            execution_id: fresh_id("execution"),
            execution_turn_id: fresh_id("turn"),
        };
        match self.session_event(&session_id, event)? {
            (Reply::Decided(approval), state) => Ok((approval, state)),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Rejects; terminal, grants nothing.
    pub fn reject(&self, approval_id: &str) -> Result<(PlanApproval, SessionState), HostError> {
        let row = self.stored_approval(approval_id)?;
        let session_id = row.approval.session_id.clone();
        match self.session_event(
            &session_id,
            Event::Reject {
                approval: row.approval,
            },
        )? {
            (Reply::Decided(approval), state) => Ok((approval, state)),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// One approval (with its legacy v8 fields, if any).
    pub fn approval(&self, approval_id: &str) -> Result<StoredApproval, HostError> {
        self.expire_due()?;
        self.stored_approval(approval_id)
    }

    /// Approvals, newest first.
    pub fn list_approvals(&self, filter: &ApprovalFilter) -> Result<Vec<StoredApproval>, HostError> {
        self.expire_due()?;
        self.with_open(|open| Ok(open.store.list_approvals(filter)?))
    }

    /// Rereads an approval's artifact and checks its size and SHA-256.
    pub fn read_artifact(&self, approval_id: &str) -> Result<ArtifactContent, HostError> {
        let row = self.stored_approval(approval_id)?;
        let bytes = self.with_open(|open| Ok(open.store.read_recorded_artifact(&row.approval)?))?;
        let markdown = String::from_utf8(bytes).map_err(|_| {
            HostError::with_detail(ErrorCode::ArtifactIntegrityMismatch, "the artifact is not UTF-8")
        })?;
        // Located and verified above, so the row has an artifact.
        let (sha256, size) = row
            .approval
            .artifact
            .map_or_else(|| (String::new(), 0), |artifact| (artifact.sha256, artifact.size));
        Ok(ArtifactContent {
            markdown,
            sha256,
            size,
        })
    }

    /// Verifies the artifacts of a scope and, for a session or everything,
    /// looks for orphan files (storage's one verification).
    pub fn verify(&self, scope: &VerifyScope) -> Result<VerifyReport, HostError> {
        self.with_open(|open| Ok(open.store.verify(scope)?))
    }

    /// Diffs an approval's artifact against another one, or against the
    /// previous submission of its session when `against` is `None`.
    pub fn diff(&self, approval_id: &str, against: Option<&str>) -> Result<PlanDiff, HostError> {
        self.with_open(|open| Ok(open.store.diff(approval_id, against)?))
    }

    // Executions.

    /// Moves a queued execution to running.
    pub fn start_execution(&self, execution_id: &str) -> Result<PlanApproval, HostError> {
        self.execution_event(execution_id, |execution_id, epoch| Event::StartExecution {
            execution_id,
            epoch,
        })
    }

    /// Moves a running execution to completed and ends its turn.
    pub fn complete_execution(&self, execution_id: &str) -> Result<PlanApproval, HostError> {
        self.execution_event(execution_id, |execution_id, epoch| Event::CompleteExecution {
            execution_id,
            epoch,
        })
    }

    fn execution_event(
        &self,
        execution_id: &str,
        event: impl FnOnce(String, BootEpoch) -> Event,
    ) -> Result<PlanApproval, HostError> {
        let row = self
            .with_open(|open| Ok(open.store.find_by_execution_id(execution_id)?))?
            .ok_or_else(|| {
                HostError::with_detail(ErrorCode::ExecutionNotFound, format!("execution {execution_id}"))
            })?;
        let session_id = row.approval.session_id.clone();
        match self.session_event(&session_id, event(execution_id.to_owned(), self.epoch))? {
            (Reply::ExecutionChanged(approval), _) => Ok(approval),
            (other, _) => Err(unexpected(&other)),
        }
    }

    // Deadlines.

    /// The earliest pending deadline across all sessions (plan-core's
    /// `next_deadline` over the live rows).
    ///
    /// It is read on the wall clock as it is now: when the clock was stepped
    /// back since an approval was created, the deadline is that much earlier
    /// than its `expiresAt`, so a timer set by it still fires on time.
    pub fn next_deadline(&self) -> Result<Option<UnixMs>, HostError> {
        self.core.earliest_deadline()
    }

    /// Expires every approval plan-core calls due; returns them.
    pub fn expire_due(&self) -> Result<Vec<PlanApproval>, HostError> {
        self.core.expire_due_now()
    }

    // The machinery every operation shares.

    fn stored_approval(&self, approval_id: &str) -> Result<StoredApproval, HostError> {
        self.with_open(|open| Ok(open.store.get_approval(approval_id)?))?
            .ok_or_else(|| {
                HostError::with_detail(ErrorCode::ApprovalNotFound, format!("approval {approval_id}"))
            })
    }
}

impl HostCore {
    /// Releases the database and the lock, cancels running commands and
    /// wakes the timer so that it ends.
    pub(crate) fn close_now(&self) {
        let closed = lock(&self.open).take();
        if let Some(open) = &closed {
            // Running commands do not outlive the host.
            for slot in open.commands.values() {
                slot.cancel.cancel();
            }
        }
        drop(closed);
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
        let due: Vec<String> = self.with_open(|open| {
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
            let (effects, _) = self.run(&session_id, Event::Tick)?;
            expired.extend(effects.into_iter().filter_map(|effect| match effect {
                Effect::UpdateApproval { approval, .. } => Some(approval),
                Effect::WriteArtifact(_)
                | Effect::InsertApproval(_)
                | Effect::SaveSession(_)
                | Effect::CancelCommand { .. } => None,
            }));
        }
        Ok(expired)
    }

}

/// Locks a mutex, recovering from poisoning: every durable change is
/// transactional, so state behind a poisoned lock is still consistent.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn unexpected(reply: &Reply) -> HostError {
    HostError::with_detail(ErrorCode::Internal, format!("unexpected reply {reply:?}"))
}
