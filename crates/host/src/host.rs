//! [`Host`]: the typed embedding API.
//!
//! Each operation reads the clock once, loads the session's state (persisted
//! rows plus the in-memory active turn), asks plan-core what happens, applies
//! the resulting storage effects in one transaction, and only then adopts the
//! new state and tells listeners. The host adds no policy of its own: when it
//! refuses something, plan-core or storage said so.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use plan_core::{
    ActiveTurn, ApprovalStatus, BootEpoch, ConfigChange, Context, Effect, ErrorCode, Event, Limits, Mode,
    Origin, PermissionMode, PlanApproval, Reply, Session, SessionState, ToolCall, ToolDecision, Transition,
    UnixMs,
};
use plan_protocol::ServerNotification;
use plan_storage::{ApprovalFilter, HostLock, MigrationReport, Store, StoredApproval};

use crate::HostError;
use crate::clock::{Clock, SystemClock};
use crate::notify::{NotificationListener, derive};
use crate::shells::{ShellSpec, default_catalog};

/// How a host is set up.
#[derive(Clone)]
pub struct HostOptions {
    /// Approval TTL and markdown limit.
    pub limits: Limits,
    /// The time source.
    pub clock: Arc<dyn Clock>,
    /// The selectable shells.
    pub shells: Vec<ShellSpec>,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            limits: Limits::default(),
            clock: Arc::new(SystemClock),
            shells: default_catalog(),
        }
    }
}

impl std::fmt::Debug for HostOptions {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("HostOptions")
            .field("limits", &self.limits)
            .field("shells", &self.shells)
            .finish_non_exhaustive()
    }
}

/// A new session's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewSession {
    /// The id to use; the host makes one when `None`.
    pub session_id: Option<String>,
    /// Absolute workspace root; `None` for a session not bound to a project.
    pub workspace_root: Option<String>,
    /// Initial mode (Agent when `None`).
    pub mode: Option<Mode>,
    /// Initial permission mode (`ask` when `None`).
    pub permission_mode: Option<PermissionMode>,
}

/// What one tool call of a batch came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallOutcome {
    /// The call.
    pub call_id: String,
    /// Allow (also for calls an Agent turn hands to the permission layer) or deny.
    pub decision: ToolCallVerdict,
    /// The pending approval an accepted SubmitPlan created.
    pub approval: Option<PlanApproval>,
    /// A sentence about a denial more specific than its code's own message:
    /// for `ARTIFACT_WRITE_FAILED`, what the file system said (no space,
    /// read-only, a loop of links). `None` when the code says it all.
    pub message: Option<String>,
}

impl ToolCallOutcome {
    /// The protocol v9 form of the outcome.
    pub fn to_wire(&self) -> plan_protocol::ToolCallResult {
        match (self.decision, &self.approval) {
            (ToolCallVerdict::Allow(_), Some(approval)) => {
                plan_protocol::ToolCallResult::submitted(self.call_id.clone(), approval.into())
            }
            (ToolCallVerdict::Allow(_), None) => plan_protocol::ToolCallResult::allow(self.call_id.clone()),
            (ToolCallVerdict::Deny(code), _) => {
                let mut result = plan_protocol::ToolCallResult::deny(self.call_id.clone(), code);
                if let (Some(message), Some(error)) = (&self.message, result.error.as_mut()) {
                    error.message.clone_from(message);
                }
                result
            }
        }
    }
}

/// Allow or deny, as the wire says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolCallVerdict {
    /// The call may run (in an Agent turn: under the given permission mode).
    Allow(Option<PermissionMode>),
    /// The call is refused with a canonical code.
    Deny(ErrorCode),
}

/// Verified artifact bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactContent {
    /// The Markdown, exactly as written.
    pub markdown: String,
    /// SHA-256, lowercase hex.
    pub sha256: String,
    /// Byte size.
    pub size: u64,
}

/// One shell with its availability on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellEntry {
    /// The shell.
    pub spec: ShellSpec,
    /// Whether its executable exists.
    pub available: bool,
}

/// The open database and the in-memory turns. `None` once closed.
struct Open {
    store: Store,
    turns: HashMap<String, ActiveTurn>,
    /// The clock's monotonic reading when this host created each approval,
    /// while it is pending: no wall-clock step extends its window.
    created: HashMap<String, i64>,
    // Held for the host's lifetime; dropping it lets another host in.
    _lock: HostLock,
}

/// Wakes the expiry driver when deadlines may have changed or the host closed.
#[derive(Default)]
pub(crate) struct DeadlineSignal {
    pub(crate) generation: Mutex<u64>,
    pub(crate) changed: Condvar,
}

/// Notifications committed but not yet delivered, in commit order.
///
/// Each transition queues its notifications while it still holds the state
/// lock, so the queue is in commit order. One thread at a time drains it
/// (`draining`), so a change committed while another thread is still
/// delivering an earlier one's notifications cannot overtake them.
#[derive(Default)]
struct Outbox {
    queue: VecDeque<ServerNotification>,
    draining: bool,
}

/// The plan checkpoint host. `Send + Sync`: share it behind an `Arc`.
pub struct Host {
    open: Mutex<Option<Open>>,
    outbox: Mutex<Outbox>,
    listeners: Mutex<Vec<Arc<dyn NotificationListener>>>,
    pub(crate) signal: DeadlineSignal,
    options: HostOptions,
    epoch: BootEpoch,
    migration: MigrationReport,
    database: PathBuf,
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

fn fresh_id(prefix: &str) -> String {
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
        let lock = HostLock::acquire(&database)?;
        let (mut store, migration) = Store::open(&database)?;
        let now = options.clock.now_ms();
        store.startup_fence(now)?;
        let epoch = BootEpoch(uuid::Uuid::new_v4().as_u64_pair().0);
        Ok(Host {
            open: Mutex::new(Some(Open {
                store,
                turns: HashMap::new(),
                created: HashMap::new(),
                _lock: lock,
            })),
            outbox: Mutex::new(Outbox::default()),
            listeners: Mutex::new(Vec::new()),
            signal: DeadlineSignal::default(),
            options,
            epoch,
            migration,
            database,
        })
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
        let closed = lock(&self.open).take();
        drop(closed);
        self.wake_driver();
    }

    /// Whether [`Host::close`] was called.
    pub fn is_closed(&self) -> bool {
        lock(&self.open).is_none()
    }

    // Sessions.

    /// Creates an idle session.
    pub fn create_session(&self, new: NewSession) -> Result<SessionState, HostError> {
        if let Some(root) = &new.workspace_root
            && !Path::new(root).is_absolute()
        {
            return Err(HostError::with_detail(
                ErrorCode::InvalidParams,
                format!("workspaceRoot must be an absolute path, got {root:?}"),
            ));
        }
        let session_id = new.session_id.unwrap_or_else(|| fresh_id("session"));
        if session_id.is_empty() {
            return Err(HostError::with_detail(
                ErrorCode::InvalidParams,
                "sessionId must not be empty",
            ));
        }
        let mut session = Session::new(session_id, new.workspace_root);
        session.mode = new.mode.unwrap_or_default();
        session.permission_mode = new.permission_mode.unwrap_or_default();
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

    /// Changes configuration; only while the session is idle.
    pub fn configure_session(
        &self,
        session_id: &str,
        change: ConfigChange,
    ) -> Result<SessionState, HostError> {
        if let Some(Some(shell)) = &change.shell
            && !self.options.shells.iter().any(|spec| &spec.id == shell)
        {
            return Err(HostError::with_detail(
                ErrorCode::ShellUnknown,
                format!("shell {shell:?}"),
            ));
        }
        self.session_event(session_id, Event::Configure(change))
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
            | Effect::AbortTurn { .. } => None,
        });
        let mut outcomes = Vec::with_capacity(results.len());
        for result in results {
            let outcome = match result.decision {
                ToolDecision::Allow => ToolCallOutcome {
                    call_id: result.call_id,
                    decision: ToolCallVerdict::Allow(None),
                    approval: None,
                    message: None,
                },
                ToolDecision::Delegate(mode) => ToolCallOutcome {
                    call_id: result.call_id,
                    decision: ToolCallVerdict::Allow(Some(mode)),
                    approval: None,
                    message: None,
                },
                ToolDecision::Deny(code) => ToolCallOutcome {
                    call_id: result.call_id,
                    decision: ToolCallVerdict::Deny(code),
                    approval: None,
                    message: None,
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
            }),
            (Reply::ToolResults(results), _) => {
                let code = results
                    .into_iter()
                    .find_map(|result| match result.decision {
                        ToolDecision::Deny(code) => Some(code),
                        ToolDecision::Allow | ToolDecision::Delegate(_) | ToolDecision::WriteArtifact => None,
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
        let Some(artifact) = row.approval.artifact else {
            return Err(HostError::with_detail(
                ErrorCode::ArtifactMissing,
                format!("approval {approval_id} was migrated from schema v8 and has no artifact"),
            ));
        };
        let session = self.with_open(|open| Ok(open.store.get_session(&row.approval.session_id)?))?;
        let Some(root) = session.and_then(|session| session.workspace_root) else {
            return Err(HostError::with_detail(
                ErrorCode::ArtifactMissing,
                "the session has no workspace root",
            ));
        };
        let bytes = plan_storage::read_artifact(&root, &artifact)?;
        let markdown = String::from_utf8(bytes).map_err(|_| {
            HostError::with_detail(ErrorCode::ArtifactIntegrityMismatch, "the artifact is not UTF-8")
        })?;
        Ok(ArtifactContent {
            markdown,
            sha256: artifact.sha256,
            size: artifact.size,
        })
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

    // Shells.

    /// The shell catalog with availability, and the persisted default.
    pub fn shells(&self) -> Result<(Vec<ShellEntry>, String), HostError> {
        let default = self.with_open(|open| Ok(open.store.default_shell()?))?;
        let entries: Vec<ShellEntry> = self
            .options
            .shells
            .iter()
            .map(|spec| ShellEntry {
                available: plan_storage::executable_exists(&spec.path),
                spec: spec.clone(),
            })
            .collect();
        // Until someone picks a default, the first installed shell of the
        // catalog stands in (the catalog's first entry if none is installed).
        let fallback = || {
            entries
                .iter()
                .find(|entry: &&ShellEntry| entry.available)
                .or(entries.first())
                .map_or_else(String::new, |entry| entry.spec.id.clone())
        };
        let default = default.unwrap_or_else(fallback);
        Ok((entries, default))
    }

    /// The shell catalog and default in their protocol v9 form, the one
    /// shape `serve` and the FFI both hand out.
    pub fn shell_list(&self) -> Result<plan_protocol::ShellListResult, HostError> {
        let (entries, default_shell) = self.shells()?;
        let shells = entries
            .into_iter()
            .map(|entry| plan_protocol::ShellInfo {
                id: entry.spec.id,
                path: entry.spec.path,
                available: entry.available,
            })
            .collect();
        Ok(plan_protocol::ShellListResult {
            shells,
            default_shell,
        })
    }

    /// Persists the default shell.
    pub fn set_default_shell(&self, shell_id: &str) -> Result<String, HostError> {
        if !self.options.shells.iter().any(|spec| spec.id == shell_id) {
            return Err(HostError::with_detail(
                ErrorCode::ShellUnknown,
                format!("shell {shell_id:?}"),
            ));
        }
        self.with_open(|open| Ok(open.store.set_default_shell(shell_id)?))?;
        Ok(shell_id.to_owned())
    }

    // Deadlines.

    /// The earliest pending deadline across all sessions.
    ///
    /// It is read on the wall clock as it is now: when the clock was stepped
    /// back since an approval was created, the deadline is that much earlier
    /// than its `expiresAt`, so a timer set by it still fires on time.
    pub fn next_deadline(&self) -> Result<Option<UnixMs>, HostError> {
        let wall = self.now();
        let instant = self.options.clock.monotonic_ms();
        self.with_open(|open| {
            Ok(open
                .store
                .live_rows()?
                .iter()
                .filter(|row| row.status == ApprovalStatus::Pending)
                .map(|row| plan_core::wall_deadline(wall, row, open.elapsed_since_creation(row, instant)))
                .min())
        })
    }

    /// Expires every approval whose deadline has passed; returns them.
    pub fn expire_due(&self) -> Result<Vec<PlanApproval>, HostError> {
        let wall = self.now();
        let instant = self.options.clock.monotonic_ms();
        let due: Vec<String> = self.with_open(|open| {
            Ok(open
                .store
                .live_rows()?
                .into_iter()
                .filter(|row| {
                    row.status == ApprovalStatus::Pending
                        && row.expires_at <= open.decision_time(wall, instant, Some(row))
                })
                .map(|row| row.session_id)
                .collect())
        })?;
        let mut expired = Vec::new();
        for session_id in due {
            let (effects, _) = self.run(&session_id, Event::Tick)?;
            expired.extend(effects.into_iter().filter_map(|effect| match effect {
                Effect::UpdateApproval { approval, .. } => Some(approval),
                Effect::WriteArtifact(_)
                | Effect::InsertApproval(_)
                | Effect::SaveSession(_)
                | Effect::AbortTurn { .. } => None,
            }));
        }
        Ok(expired)
    }

    // The machinery every operation shares.

    pub(crate) fn now(&self) -> UnixMs {
        self.options.clock.now_ms()
    }

    fn stored_approval(&self, approval_id: &str) -> Result<StoredApproval, HostError> {
        self.with_open(|open| Ok(open.store.get_approval(approval_id)?))?
            .ok_or_else(|| {
                HostError::with_detail(ErrorCode::ApprovalNotFound, format!("approval {approval_id}"))
            })
    }

    fn with_open<T>(
        &self,
        operation: impl FnOnce(&mut Open) -> Result<T, HostError>,
    ) -> Result<T, HostError> {
        let mut guard = lock(&self.open);
        match guard.as_mut() {
            Some(open) => operation(open),
            None => Err(HostError::Refused(ErrorCode::HostClosed)),
        }
    }

    fn session_event(&self, session_id: &str, event: Event) -> Result<(Reply, SessionState), HostError> {
        let (_, outcome) = self.run(session_id, event)?;
        outcome
    }

    fn session_event_with_effects(
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
    fn run(
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
                Effect::WriteArtifact(_) | Effect::AbortTurn { .. } => false,
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

    /// Delivers queued notifications in commit order, after the state lock
    /// is released (so a listener may call back into the host). If another
    /// thread is delivering already, it delivers these too, after the ones
    /// committed before them.
    fn deliver(&self) {
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

    fn wake_driver(&self) {
        *lock(&self.signal.generation) += 1;
        self.signal.changed.notify_all();
    }
}

/// Lets another thread drain the outbox if a listener panics mid-delivery.
struct DrainGuard<'host>(&'host Mutex<Outbox>);

impl Drop for DrainGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            lock(self.0).draining = false;
        }
    }
}

impl Open {
    /// The monotonic milliseconds since this host created `approval`, if it did.
    fn elapsed_since_creation(&self, approval: &PlanApproval, instant: i64) -> Option<i64> {
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
                Effect::UpdateApproval { .. }
                | Effect::WriteArtifact(_)
                | Effect::SaveSession(_)
                | Effect::AbortTurn { .. } => {}
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

/// Locks a mutex, recovering from poisoning: every durable change is
/// transactional, so state behind a poisoned lock is still consistent.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn unexpected(reply: &Reply) -> HostError {
    HostError::with_detail(ErrorCode::Internal, format!("unexpected reply {reply:?}"))
}
