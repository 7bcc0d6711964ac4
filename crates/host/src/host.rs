//! [`Host`]: the typed embedding API.
//!
//! Each operation reads the clock once, loads the session's state (persisted
//! rows plus the in-memory active turn), asks plan-core what happens, applies
//! the resulting storage effects in one transaction, and only then adopts the
//! new state and tells listeners. The host adds no policy of its own: when it
//! refuses something, plan-core or storage said so.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use plan_core::check_shell;
use plan_core::{
    ActiveTurn, ApprovalId, ArtifactContent, AwaitingCall, BootEpoch, CallId, CommandCapabilities,
    CommandRun, ConfigChange, Effect, ErrorCode, Event, ExecutionId, Limits, Mode, Origin, PermissionMode,
    PlanApproval, PlanDiff, Reply, SessionId, SessionState, ShellInfo, ToolCall, ToolCallResult,
    ToolDecision, TurnId, UnixMs, VerifyReport, VerifyScope,
};
use plan_storage::{
    ApprovalFilter, CommandFilter, CommandRecord, DecisionEntry, DecisionNote, DecisionSource,
    ExclusiveStore, MigrationReport, StoredApproval,
};

use crate::HostError;
use crate::error::unexpected;
use crate::event::{GatherEvent, HostCore, Open, Ran};
use crate::notify::NotificationListener;
use crate::outbox::{DeadlineSignal, Outbox};
use crate::running::{CommandSupport, Done};
use crate::sync::lock;
use crate::timer::TimerThread;
use crate::types::{ExpiryTimer, HostOptions, NewSession};
use crate::web::WebOptions;

/// The plan checkpoint host. `Send + Sync`: share it behind an `Arc`.
///
/// Its state lives in a private core shared with the threads that watch
/// running commands (they record a command's end when it exits on its own)
/// and with the expiry timer; every operation is a `Host` method.
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

impl std::fmt::Debug for Host {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Host")
            .field("database", &self.core.database)
            .field("options", &self.core.options)
            .finish_non_exhaustive()
    }
}

fn note(approval_id: &ApprovalId, source: &DecisionSource) -> DecisionNote {
    DecisionNote {
        approval_id: approval_id.clone(),
        source: source.clone(),
    }
}

pub(crate) fn fresh_id<Id: From<String>>(prefix: &str) -> Id {
    // Version 7 ids sort by creation time, which keeps logs and listings readable.
    Id::from(format!("{prefix}-{}", uuid::Uuid::now_v7().simple()))
}

impl Host {
    /// Opens the host on a database: takes the single-host lock (a second
    /// live host is `HOST_ALREADY_RUNNING`), migrates the schema to v10, and
    /// runs the startup fence, all before it returns. A `Host` that exists
    /// has therefore always recovered: it cannot serve before recovery.
    /// Unless `options.expiry` is [`ExpiryTimer::Manual`], it then starts
    /// the expiry timer thread, which [`Host::close`] and dropping the host
    /// stop.
    ///
    /// ```
    /// use plan_host::{ErrorCode, Host, HostOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let host = Host::open(dir.path().join("plan.db"), HostOptions::default())?;
    /// assert_eq!(host.migration().to, 10);
    /// // One live host per database.
    /// let second = Host::open(dir.path().join("plan.db"), HostOptions::default());
    /// assert_eq!(second.map(|_| ()).map_err(|error| error.code()), Err(ErrorCode::HostAlreadyRunning));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `HOST_ALREADY_RUNNING` (another live host holds the database),
    /// `SCHEMA_UNSUPPORTED` (a schema this build cannot migrate),
    /// `DATABASE_UNREADABLE` (not an SQLite database), `INVALID_PARAMS` (a
    /// path that is not a plain file, such as an SQLite URI; a notifier that
    /// is empty or holds a NUL byte), `STORAGE_FAILED` (the file system failed), `INTERNAL` (the timer thread could not start). A
    /// failed open leaves the database as it was and releases the lock.
    pub fn open(database: impl AsRef<Path>, options: HostOptions) -> Result<Host, HostError> {
        if let Some(notifier) = &options.notifier
            && (notifier.trim().is_empty() || notifier.contains('\0'))
        {
            return Err(HostError::with_detail(
                ErrorCode::InvalidParams,
                "the notifier must be a non-empty command line without NUL bytes",
            ));
        }
        let database = database.as_ref().to_path_buf();
        let mut opened = ExclusiveStore::open(&database)?;
        let now = options.clock.now_ms();
        // On failure `opened` drops as a whole: the connection closes before
        // the lock is released.
        opened.store.startup_fence(now)?;
        // The identity every exported record carries (made once).
        let fresh_identity = uuid::Uuid::new_v4().to_string();
        opened.store.ensure_database_id(&fresh_identity)?;
        // A big pre-chain history is numbered on a thread of its own, after
        // the host answers (the fence only marked where it ends).
        let numberer = plan_storage::HistoryNumberer::start_if_needed(&database, &opened.store);
        let ExclusiveStore {
            mut store,
            migration,
            lock,
        } = opened;
        store.set_frontend(options.frontend);
        let epoch = BootEpoch(uuid::Uuid::new_v4().as_u64_pair().0);
        let mut options = options;
        let commands = CommandSupport::open(&options, &database);
        // The probe, not the embedder, says whether the sandbox works.
        options.limits.commands.sandbox_available = commands.sandbox_available();
        options.limits.commands.namespaces_available = commands.namespaces_available();
        // Why not, for the refusals plan-core words (Plan Bash's
        // `PLAN_SANDBOX_UNAVAILABLE` names the real cause).
        options.limits.commands.sandbox_unavailable_reason = commands.unavailable_reason.clone();
        // What the machine cannot bound (P16), for `initialize`.
        options.limits.commands.missing_bounds = commands.missing_bounds();
        let flusher = match options.expiry {
            ExpiryTimer::Automatic => plan_storage::Flusher::on_thread(),
            ExpiryTimer::Manual => plan_storage::Flusher::on_caller(),
        };
        let core = Arc::new(HostCore {
            open: Mutex::new(Some(Open {
                store,
                turns: HashMap::new(),
                created: HashMap::new(),
                commands: HashMap::new(),
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
            exporter: Mutex::new(None),
            numberer: Mutex::new(numberer),
            flusher,
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
        if let Some(config) = core.options.audit_export.clone() {
            let exporter = plan_audit_export::Exporter::start_observed(
                core.database.clone(),
                config,
                core.options.export_observer.clone(),
            )
            .map_err(|error| {
                core.close_now();
                HostError::with_detail(ErrorCode::InvalidParams, format!("audit export: {error}"))
            })?;
            *crate::sync::lock(&core.exporter) = Some(exporter);
        }
        Ok(Host { core, timer })
    }

    /// What opening did to the schema. [`Host::open`]'s example reads it.
    pub fn migration(&self) -> &MigrationReport {
        &self.core.migration
    }

    /// The database path (as given to [`Host::open`]; the
    /// `second_open_is_host_already_running_and_close_lets_the_next_in` host
    /// test opens it again).
    pub fn database(&self) -> &Path {
        &self.core.database
    }

    /// The host's limits, with the sandbox probe's verdict filled in.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use plan_host::{Host, HostOptions, Limits};
    ///
    /// let options = HostOptions { limits: Limits::new(60_000, 4096)?, ..HostOptions::default() };
    /// let host = Host::open(dir.path().join("plan.db"), options)?;
    /// assert_eq!(host.limits().approval_ttl_ms(), 60_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn limits(&self) -> Limits {
        self.core.options.limits.clone()
    }

    /// Registers a listener for every later event. Any
    /// `Fn(HostEvent) + Send + Sync` closure is one; the README example
    /// registers one.
    pub fn add_listener(&self, listener: Arc<dyn NotificationListener>) {
        lock(&self.core.listeners).push(listener);
    }

    /// Closes the host: releases the database and the single-host lock,
    /// cancels running commands and tells the expiry timer to end (it does
    /// not wait for the thread, so a listener on that thread may call it).
    /// Every later call fails with `HOST_CLOSED`. Closing twice is harmless.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use plan_host::{ErrorCode, Host, HostOptions, SessionId};
    ///
    /// let host = Host::open(dir.path().join("plan.db"), HostOptions::default())?;
    /// host.close();
    /// assert!(host.is_closed());
    /// let refused = host.session(&SessionId::from("s1")).map_err(|error| error.code());
    /// assert_eq!(refused.map(|_| ()), Err(ErrorCode::HostClosed));
    /// // The lock is free: the next host opens.
    /// Host::open(dir.path().join("plan.db"), HostOptions::default())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn close(&self) {
        self.core.close_now();
    }

    /// Whether [`Host::close`] was called ([`Host::close`]'s example).
    pub fn is_closed(&self) -> bool {
        self.core.closed()
    }

    // Sessions.

    /// Creates an idle session. plan-core decides what it may be: a
    /// non-empty id, and a workspace root stored normalized (`/w/` and
    /// `/x/../w` are `/w`; relative roots, NUL and a `..` above `/` are
    /// `INVALID_PARAMS`). The host makes an id when `new.session_id` is
    /// `None`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use plan_host::{Host, HostOptions, Mode, NewSession};
    ///
    /// let host = Host::open(dir.path().join("plan.db"), HostOptions::default())?;
    /// let state = host.create_session(NewSession {
    ///     session_id: Some("s1".into()),
    ///     workspace_root: Some("/srv/../w/".to_owned()),
    ///     ..NewSession::default()
    /// })?;
    /// assert_eq!(state.session.workspace_root.as_deref(), Some("/w"));
    /// assert_eq!(state.session.mode, Mode::Agent);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `INVALID_PARAMS` (an empty id, a bad workspace root),
    /// `SESSION_ALREADY_EXISTS`, `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn create_session(&self, new: NewSession) -> Result<SessionState, HostError> {
        let session_id = new
            .session_id
            .map_or_else(|| fresh_id("session"), SessionId::into_string);
        let session = plan_core::new_session(
            session_id,
            new.workspace_root.as_deref(),
            new.mode,
            new.permission_mode,
        )
        .map_err(|refusal| HostError::with_detail(refusal.code(), refusal.to_string()))?;
        let now = self.core.now();
        let state = self.core.with_open(|open| {
            open.store.create_session(&session, now)?;
            Ok(SessionState::idle(session))
        })?;
        // The session binds its workspace now, by descriptor, where the
        // directory exists: whatever later happens to the path, its commands
        // run in this directory (or, where it appears only later, in the one
        // its first command finds). A directory that cannot be bound now is
        // bound, or refused, at the first command.
        if let Some(root) = &state.session.workspace_root {
            let _ = self
                .core
                .bound_workspace(&state.session.id, std::path::Path::new(root));
        }
        Ok(state)
    }

    /// The session as it is now (an overdue approval is expired first).
    /// [`Host::close`]'s example asks for one; the README example's
    /// lifecycle reads them throughout.
    ///
    /// # Errors
    ///
    /// `SESSION_NOT_FOUND`, `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn session(&self, session_id: &SessionId) -> Result<SessionState, HostError> {
        self.core
            .session_event(session_id, Event::Tick)
            .map(|(_, state)| state)
    }

    /// Changes configuration; only while the session is idle, and a shell
    /// only from the host's catalog.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use plan_host::{ConfigChange, Host, HostOptions, Mode, NewSession, PermissionMode};
    ///
    /// let host = Host::open(dir.path().join("plan.db"), HostOptions::default())?;
    /// let session_id = host.create_session(NewSession::default())?.session.id;
    /// let change = ConfigChange {
    ///     mode: Some(Mode::Plan),
    ///     permission_mode: Some(PermissionMode::AcceptEdits),
    ///     ..ConfigChange::default()
    /// };
    /// let state = host.configure_session(&session_id, change)?;
    /// assert_eq!(state.session.mode, Mode::Plan);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `SESSION_NOT_FOUND`, `SESSION_BUSY` (a turn is active, an approval is
    /// pending or an execution is live), `SHELL_UNKNOWN`, `HOST_CLOSED`,
    /// `STORAGE_FAILED`.
    pub fn configure_session(
        &self,
        session_id: &SessionId,
        change: ConfigChange,
    ) -> Result<SessionState, HostError> {
        let shells = self
            .core
            .options
            .shells
            .iter()
            .map(|spec| spec.id.clone())
            .collect();
        self.core
            .session_event(session_id, Event::Configure { change, shells })
            .map(|(_, state)| state)
    }

    // Turns.

    /// Starts a prompt turn in the session's current mode. The README
    /// example starts a Plan turn.
    ///
    /// # Errors
    ///
    /// `SESSION_NOT_FOUND`, `SESSION_BUSY` (a turn is already active, an
    /// approval is pending, an execution is live),
    /// `PLAN_REQUIRES_INTERACTIVE_SESSION` (a scheduled Plan turn),
    /// `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn start_turn(&self, session_id: &SessionId, origin: Origin) -> Result<ActiveTurn, HostError> {
        self.start_turn_with(session_id, None, origin)
    }

    /// Starts a prompt turn in `mode`: the idle session switches to it
    /// first (as [`Host::configure`] would, recorded the same way) in the
    /// same transaction, so an agent that changes phase starts its turn in
    /// one call.
    ///
    /// # Errors
    ///
    /// As [`Host::start_turn`], for the session in `mode`.
    pub fn start_turn_in(
        &self,
        session_id: &SessionId,
        mode: Mode,
        origin: Origin,
    ) -> Result<ActiveTurn, HostError> {
        self.start_turn_with(session_id, Some(mode), origin)
    }

    fn start_turn_with(
        &self,
        session_id: &SessionId,
        mode: Option<Mode>,
        origin: Origin,
    ) -> Result<ActiveTurn, HostError> {
        let turn_id = fresh_id("turn");
        match self.core.session_event(
            session_id,
            Event::StartTurn {
                turn_id,
                origin,
                mode,
            },
        )? {
            (Reply::TurnStarted(turn), _) => Ok(turn),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Decides a batch of tool calls. A valid SubmitPlan writes its artifact
    /// durably and creates the pending approval before this returns; a
    /// Plan-turn Bash call is started in the read-only sandbox. In an Agent
    /// turn each call gets plan-core's permission table under the session's
    /// permission mode: [`ToolCallDecision::Allow`](plan_core::ToolCallDecision::Allow), or
    /// [`ToolCallDecision::Confirm`](plan_core::ToolCallDecision::Confirm) (answered with [`Host::confirm_tool`]),
    /// with `host_run` for Bash; each decision that is not a plain allow is
    /// in the session's transcript before this returns. A refused call is a
    /// result with [`ToolCallDecision::Deny`](plan_core::ToolCallDecision::Deny) and its code
    /// (`TOOL_DENIED_IN_PLAN`, `INVALID_PLAN_INPUT`, `ARTIFACT_WRITE_FAILED`,
    /// `PERMISSION_REQUIRES_INTERACTIVE_SESSION`, …), not an error. The README
    /// example submits a plan.
    ///
    /// # Errors
    ///
    /// For the whole batch: `SESSION_NOT_FOUND`, `TURN_NOT_ACTIVE` (not the
    /// session's active turn), `HOST_CLOSED`, `STORAGE_FAILED`, `INTERNAL`.
    pub fn tool_calls(
        &self,
        session_id: &SessionId,
        turn_id: &TurnId,
        calls: Vec<ToolCall>,
    ) -> Result<Vec<ToolCallResult>, HostError> {
        // One core entry and one transaction: the facts of the batch's Bash
        // calls (and where its file-writing calls' paths lead) are gathered
        // under the decision's lock, the commands a Plan turn starts are
        // spawned under it once the decision committed.
        let bash_calls = crate::commands::bash_calls(&calls);
        let write_calls = crate::commands::write_calls(&calls);
        let Ran {
            effects,
            outcome: decided,
        } = self.core.run_commands(
            session_id,
            turn_id,
            (&bash_calls, &write_calls),
            false,
            |commands| Event::ToolCalls {
                turn_id: turn_id.clone(),
                calls,
                commands,
            },
        )?;
        let (reply, _) = decided?;
        let Reply::ToolResults(results) = reply else {
            return Err(unexpected(&reply));
        };
        // Each write is its call's (by call id, not by position).
        let mut writes: HashMap<CallId, plan_core::ArtifactRequest> = effects
            .into_iter()
            .filter_map(|effect| match effect {
                Effect::WriteArtifact(request) => Some((request.call_id.clone(), request)),
                Effect::InsertApproval(_)
                | Effect::UpdateApproval { .. }
                | Effect::SaveSession(_)
                | Effect::RecordToolAudit(_)
                | Effect::RecordCommand { .. }
                | Effect::BindWorkspace { .. }
                | Effect::CancelCommand { .. } => None,
            })
            .collect();
        let mut outcomes = Vec::with_capacity(results.len());
        for result in results {
            let outcome = match result.decision {
                ToolDecision::Allow => ToolCallResult::allow(result.call_id),
                ToolDecision::HostRun => ToolCallResult::host_run(result.call_id),
                ToolDecision::Confirm { host_run } => ToolCallResult::confirm(result.call_id, host_run),
                // A refused Bash call is recorded in the decision's
                // transaction.
                ToolDecision::Deny(code) => ToolCallResult::deny_with(result.call_id, code, result.message),
                // A Plan-turn Bash call: started (or failed to start) in the
                // decision, spawned before this answers.
                ToolDecision::RunCommand(launch) => ToolCallResult::ran(result.call_id, launch.run),
                ToolDecision::WriteArtifact => match writes.remove(&result.call_id) {
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

    /// Writes the artifact and records it: plan-core decides the row while
    /// the file's fsync is in flight, and the commit that records it waits
    /// for it, so the row is never durable before the file.
    fn write_artifact(
        &self,
        session_id: &SessionId,
        request: plan_core::ArtifactRequest,
    ) -> Result<ToolCallResult, HostError> {
        let now = self.core.now();
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let created = plan_storage::create_artifact(
            &self.core.flusher,
            &request.workspace_root,
            &request.title,
            request.markdown.as_bytes(),
            now,
            &suffix[..12],
        );
        let call_id = request.call_id.clone();
        let workspace_root = request.workspace_root.clone();
        // The code alone cannot tell a full disk from a read-only one; the
        // storage error names the OS cause, and the agent sees it.
        let report_failure = |request, error: plan_storage::StorageError| {
            let code = error.code();
            let recorded = self
                .core
                .session_event(session_id, Event::ArtifactFailed { request, code });
            (recorded, None, Some((code, error.to_string())))
        };
        let (recorded, written_artifact, failure) = match created {
            Ok(mut flushing) => {
                let artifact = flushing.artifact().clone();
                // Kept for the report of a flush that fails after plan-core
                // decided the row (which then never committed).
                let failed_request = request.clone();
                let event = Event::ArtifactWritten {
                    request,
                    approval_id: fresh_id("approval"),
                    artifact: artifact.clone(),
                };
                let recorded = self.core.run_recording(session_id, event, &mut flushing);
                match flushing.wait() {
                    Ok(()) => (recorded, Some(artifact), None),
                    // The commit failed on the flush: the file is removed
                    // and no row records it, so plan-core hears that the
                    // write failed instead.
                    Err(error)
                        if recorded
                            .as_ref()
                            .is_err_and(|failed| failed.code() == ErrorCode::ArtifactWriteFailed) =>
                    {
                        report_failure(failed_request, error)
                    }
                    // Refused before any commit waited: the refusal stands,
                    // and the file is already gone.
                    Err(_) => (recorded, None, None),
                }
            }
            Err(error) => report_failure(request, error),
        };
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
            (Reply::ApprovalRequested { call_id, approval }, _) => {
                Ok(ToolCallResult::submitted(call_id, approval))
            }
            (Reply::ToolResults(results), _) => {
                let code = results
                    .into_iter()
                    .find_map(|result| match result.decision {
                        ToolDecision::Deny(code) => Some(code),
                        ToolDecision::Allow
                        | ToolDecision::HostRun
                        | ToolDecision::Confirm { .. }
                        | ToolDecision::WriteArtifact
                        | ToolDecision::RunCommand(_) => None,
                    })
                    .unwrap_or(ErrorCode::ArtifactWriteFailed);
                let message = failure
                    .filter(|(failed, _)| *failed == code)
                    .map(|(_, message)| message);
                Ok(ToolCallResult::deny_with(call_id, code, message))
            }
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// A person's answer to a call of the active Agent turn that
    /// [`Host::tool_calls`] decided [`ToolCallDecision::Confirm`](plan_core::ToolCallDecision::Confirm): the call's
    /// new decision, allow (with `host_run` for Bash, which then may start
    /// through [`Host::start_agent_command`], with the call's own command
    /// text) or deny with `TOOL_DECLINED`. The confirmation, or the decline,
    /// is in the session's transcript before this returns (the host test
    /// `an_ask_confirmation_is_enforced_audited_and_answered_once` shows it).
    ///
    /// # Errors
    ///
    /// `SESSION_NOT_FOUND`, `TOOL_CONFIRMATION_NOT_PENDING` (not a call of
    /// the active turn awaiting confirmation: never decided `confirm`,
    /// answered already, or its turn ended), `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn confirm_tool(
        &self,
        session_id: &SessionId,
        turn_id: &TurnId,
        call_id: &CallId,
        allow: bool,
    ) -> Result<ToolCallResult, HostError> {
        let event = Event::ConfirmTool {
            turn_id: turn_id.clone(),
            call_id: call_id.to_owned(),
            allow,
        };
        match self.core.session_event(session_id, event)? {
            (Reply::ToolConfirmed(result), _) => match result.decision {
                ToolDecision::Allow => Ok(ToolCallResult::allow(result.call_id)),
                ToolDecision::HostRun => Ok(ToolCallResult::host_run(result.call_id)),
                ToolDecision::Deny(code) => Ok(ToolCallResult::deny(result.call_id, code)),
                ToolDecision::Confirm { .. } | ToolDecision::WriteArtifact | ToolDecision::RunCommand(_) => {
                    Err(HostError::with_detail(
                        ErrorCode::Internal,
                        "a confirmation answered with another confirmation, a write or a run",
                    ))
                }
            },
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// The calls of active turns that wait for a person (decided
    /// `confirm`, not yet answered), with the input a confirmation covers:
    /// of `session_id`, or of every session with an active turn. What
    /// waits is plan-core's answer (`awaiting_calls`) over each session.
    ///
    /// # Errors
    ///
    /// `SESSION_NOT_FOUND` (a named session the host does not have),
    /// `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn awaiting_calls(&self, session_id: Option<&SessionId>) -> Result<Vec<AwaitingCall>, HostError> {
        let mut sessions: Vec<SessionId> = match session_id {
            Some(session_id) => vec![session_id.clone()],
            None => self
                .core
                .with_open(|open| Ok(open.turns.keys().cloned().collect()))?,
        };
        sessions.sort();
        let mut calls = Vec::new();
        for id in &sessions {
            match self.session(id) {
                Ok(state) => calls.extend(plan_core::awaiting_calls(&state)),
                // A session that went away meanwhile has nothing waiting.
                Err(HostError::Refused(ErrorCode::SessionNotFound)) if session_id.is_none() => {}
                Err(error) => return Err(error),
            }
        }
        Ok(calls)
    }

    /// Ends the active prompt turn (the host test
    /// `prompt_turns_complete_and_agent_tools_follow_the_permission_table` shows it).
    ///
    /// # Errors
    ///
    /// `SESSION_NOT_FOUND`, `TURN_NOT_ACTIVE` (not the active turn, or an
    /// execution turn, which ends through [`Host::complete_execution`]),
    /// `SESSION_BUSY` (a command of the turn is still running),
    /// `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn complete_turn(&self, session_id: &SessionId, turn_id: &TurnId) -> Result<SessionState, HostError> {
        let event = Event::CompleteTurn {
            turn_id: turn_id.clone(),
        };
        self.core.session_event(session_id, event).map(|(_, state)| state)
    }

    /// Cancels the active turn; a queued or running execution is
    /// interrupted, running commands are killed and recorded first (the
    /// host test `cancel_interrupts_a_queued_execution` shows it).
    ///
    /// # Errors
    ///
    /// `SESSION_NOT_FOUND`, `TURN_NOT_ACTIVE` (no active turn),
    /// `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn cancel_turn(&self, session_id: &SessionId) -> Result<SessionState, HostError> {
        self.end_commands_before_cancel(session_id)?;
        self.core
            .session_event(session_id, Event::CancelTurn)
            .map(|(_, state)| state)
    }

    // Approvals.

    /// Approves with the permission mode the person chose: in one
    /// transaction the approval becomes `approved`, an execution is queued,
    /// the session switches to Agent with that mode and the execution turn
    /// becomes its active turn. The README example approves a plan.
    ///
    /// # Errors
    ///
    /// `APPROVAL_NOT_FOUND`, `APPROVAL_NOT_PENDING` (decided already),
    /// `PLAN_APPROVAL_TIMEOUT` (at or after `expiresAt`; the row is then
    /// `expired`), `SESSION_BUSY` (another decision won the race),
    /// `ARTIFACT_MISSING` / `ARTIFACT_INTEGRITY_MISMATCH` (the artifact,
    /// re-read inside the decision, is gone or no longer matches its size
    /// and SHA-256; nothing changes and Reject stays possible; the host
    /// test `approving_rechecks_the_artifact_and_changes_nothing_when_it_fails`
    /// shows it), `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn approve(
        &self,
        approval_id: &ApprovalId,
        permission_mode: PermissionMode,
    ) -> Result<(PlanApproval, SessionState), HostError> {
        self.approve_relayed(approval_id, Some(permission_mode))
    }

    /// Approves on behalf of a frontend that relays a person's request as
    /// it arrived, which may lack the permission mode (`plan/approve`
    /// without `permissionMode`, the FFI's optional mode). A missing mode
    /// is refused by plan-core, the one place that rule lives, after it
    /// checked that the approval is still pending; nothing changes. Rust
    /// embedders that have a mode call [`Host::approve`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use plan_host::{ApprovalId, ErrorCode, Host, HostOptions};
    ///
    /// let host = Host::open(dir.path().join("plan.db"), HostOptions::default())?;
    /// // An unknown approval is not found, with or without a mode.
    /// let refused = host.approve_relayed(&ApprovalId::from("nope"), None);
    /// assert_eq!(refused.map(|_| ()).map_err(|error| error.code()), Err(ErrorCode::ApprovalNotFound));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// The host test `approve_with_each_permission_mode` shows the refusal
    /// of a pending approval without a mode.
    ///
    /// # Errors
    ///
    /// Those of [`Host::approve`], and `PERMISSION_MODE_REQUIRED` when
    /// `permission_mode` is `None` and the approval is still pending.
    pub fn approve_relayed(
        &self,
        approval_id: &ApprovalId,
        permission_mode: Option<PermissionMode>,
    ) -> Result<(PlanApproval, SessionState), HostError> {
        self.approve_with(approval_id, permission_mode, None)
    }

    /// [`Host::approve_relayed`] for a frontend other than the client's own
    /// connection (the web card): the same event, rules and audit, plus a
    /// transcript entry (`approvalDecided`, with `source`'s channel and
    /// remote address) written in the transaction that approves. Nothing is written
    /// when the approval is refused. The server test
    /// `a_decision_on_the_card_is_the_hosts_approve_and_is_noted` shows it.
    ///
    /// # Errors
    ///
    /// Those of [`Host::approve_relayed`].
    pub fn approve_noted(
        &self,
        approval_id: &ApprovalId,
        permission_mode: Option<PermissionMode>,
        source: &DecisionSource,
    ) -> Result<(PlanApproval, SessionState), HostError> {
        self.approve_with(approval_id, permission_mode, Some(note(approval_id, source)))
    }

    fn approve_with(
        &self,
        approval_id: &ApprovalId,
        permission_mode: Option<PermissionMode>,
        note: Option<DecisionNote>,
    ) -> Result<(PlanApproval, SessionState), HostError> {
        let approval = self.core.with_open(|open| open.decision_row(approval_id))?;
        let session_id = approval.session_id.clone();
        // The artifact is re-read under the lock the decision holds, so the
        // bytes approved are the bytes checked (plan-core decides from it).
        let gather: GatherEvent<'_> = Box::new(move |open| {
            // The session's root from the decision's rows (kept in memory
            // while this host is the database's only writer).
            let root = open
                .store
                .session_rows(&approval.session_id)?
                .and_then(|rows| rows.session.workspace_root);
            let artifact = open.store.check_artifact(&approval, root.as_deref())?;
            Ok(Event::Approve {
                approval,
                permission_mode,
                execution_id: fresh_id("execution"),
                execution_turn_id: fresh_id("turn"),
                artifact,
            })
        });
        self.decide(&session_id, gather, note.as_ref())
    }

    /// [`Host::reject`] for a relaying frontend, noted like
    /// [`Host::approve_noted`].
    ///
    /// # Errors
    ///
    /// Those of [`Host::reject`].
    pub fn reject_noted(
        &self,
        approval_id: &ApprovalId,
        source: &DecisionSource,
    ) -> Result<(PlanApproval, SessionState), HostError> {
        self.reject_with(approval_id, Some(note(approval_id, source)))
    }

    fn reject_with(
        &self,
        approval_id: &ApprovalId,
        note: Option<DecisionNote>,
    ) -> Result<(PlanApproval, SessionState), HostError> {
        let approval = self.core.with_open(|open| open.decision_row(approval_id))?;
        let session_id = approval.session_id.clone();
        self.decide(
            &session_id,
            Box::new(move |_| Ok(Event::Reject { approval })),
            note.as_ref(),
        )
    }

    /// Runs a decision event, writing `note` with it when there is one.
    fn decide(
        &self,
        session_id: &SessionId,
        gather: GatherEvent<'_>,
        note: Option<&DecisionNote>,
    ) -> Result<(PlanApproval, SessionState), HostError> {
        let ran = self
            .core
            .run_noted(session_id, gather, Box::new(|_, _| Ok(true)), note)?
            .ok_or_else(|| HostError::with_detail(ErrorCode::Internal, "a decision was skipped"))?;
        match ran.outcome? {
            (Reply::Decided(approval), state) => Ok((approval, state)),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// A session's `approvalDecided` transcript entries, oldest first: the
    /// decisions a relaying frontend made ([`Host::approve_noted`]).
    ///
    /// # Errors
    ///
    /// `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn decision_entries(&self, session_id: &SessionId) -> Result<Vec<DecisionEntry>, HostError> {
        self.core
            .with_open(|open| Ok(open.store.decision_entries(session_id)?))
    }

    /// The web card's option, as given in [`HostOptions::web`]; the
    /// `plan-server` crate starts the server from it.
    pub fn web(&self) -> Option<WebOptions> {
        self.core.options.web
    }

    /// The person's notifier, as given in [`HostOptions::notifier`]; the
    /// `plan-server` crate runs it.
    pub fn notifier(&self) -> Option<&str> {
        self.core.options.notifier.as_deref()
    }

    /// Rejects; terminal, grants nothing: the Plan turn ends and the session
    /// stays idle in Plan (the host test
    /// `reject_is_terminal_and_grants_nothing` shows it).
    ///
    /// # Errors
    ///
    /// `APPROVAL_NOT_FOUND`, `APPROVAL_NOT_PENDING`, `PLAN_APPROVAL_TIMEOUT`,
    /// `SESSION_BUSY`, `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn reject(&self, approval_id: &ApprovalId) -> Result<(PlanApproval, SessionState), HostError> {
        self.reject_with(approval_id, None)
    }

    /// Withdraws a pending plan for the agent that submitted it, which
    /// ended before anyone decided: the approval becomes `interrupted` with
    /// `PLAN_WITHDRAWN` (plan-core's rule) and can no longer be approved;
    /// its Plan turn ends.
    ///
    /// # Errors
    ///
    /// `APPROVAL_NOT_FOUND`, `APPROVAL_NOT_PENDING`, `PLAN_APPROVAL_TIMEOUT`,
    /// `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn withdraw_plan(&self, approval_id: &ApprovalId) -> Result<(PlanApproval, SessionState), HostError> {
        let approval = self.core.with_open(|open| open.decision_row(approval_id))?;
        let session_id = approval.session_id.clone();
        self.decide(
            &session_id,
            Box::new(move |_| Ok(Event::WithdrawPlan { approval })),
            None,
        )
    }

    /// One approval (with its legacy v8 fields, if any); overdue approvals
    /// are expired first. The host test `lazy_expiry_on_plan_get_and_list`
    /// shows it.
    ///
    /// # Errors
    ///
    /// `APPROVAL_NOT_FOUND`, `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn approval(&self, approval_id: &ApprovalId) -> Result<StoredApproval, HostError> {
        self.expire_due()?;
        self.stored_approval(approval_id)
    }

    /// Approvals, newest first, by session, status and count; overdue
    /// approvals are expired first.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use plan_host::{ApprovalFilter, Host, HostOptions};
    ///
    /// let host = Host::open(dir.path().join("plan.db"), HostOptions::default())?;
    /// assert!(host.list_approvals(&ApprovalFilter::default())?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn list_approvals(&self, filter: &ApprovalFilter) -> Result<Vec<StoredApproval>, HostError> {
        self.expire_due()?;
        self.core.with_open(|open| Ok(open.store.list_approvals(filter)?))
    }

    /// Rereads an approval's artifact and checks its size and SHA-256. The
    /// README example reads one back.
    ///
    /// # Errors
    ///
    /// `APPROVAL_NOT_FOUND`, `ARTIFACT_MISSING` (the file or its workspace
    /// is gone), `ARTIFACT_INTEGRITY_MISMATCH` (size, hash or UTF-8 differ
    /// from the record), `ARTIFACT_SYMLINK`, `ARTIFACT_PATH_ESCAPE`,
    /// `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn read_artifact(&self, approval_id: &ApprovalId) -> Result<ArtifactContent, HostError> {
        let row = self.stored_approval(approval_id)?;
        let (artifact, bytes) = self
            .core
            .with_open(|open| Ok(open.store.read_recorded_artifact(&row.approval)?))?;
        ArtifactContent::from_checked(artifact, bytes)
            .map_err(|code| HostError::with_detail(code, "the artifact is not UTF-8 text"))
    }

    /// Verifies the artifacts of a scope and, for a session or everything,
    /// looks for orphan files (storage's one verification). The README
    /// example verifies an approval.
    ///
    /// # Errors
    ///
    /// `APPROVAL_NOT_FOUND` or `SESSION_NOT_FOUND` for a scope naming
    /// neither, `HOST_CLOSED`, `STORAGE_FAILED`. A bad artifact is a finding
    /// of the report, not an error.
    pub fn verify(&self, scope: &VerifyScope) -> Result<VerifyReport, HostError> {
        self.core.with_open(|open| Ok(open.store.verify(scope)?))
    }

    /// Diffs an approval's artifact against another one, or against the
    /// previous submission of its session when `against` is `None` (the
    /// host test `verify_and_diff_through_the_host_and_the_dispatcher`
    /// shows both).
    ///
    /// # Errors
    ///
    /// `APPROVAL_NOT_FOUND` (either approval), `ARTIFACT_MISSING`,
    /// `ARTIFACT_INTEGRITY_MISMATCH`, `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn diff(
        &self,
        approval_id: &ApprovalId,
        against: Option<&ApprovalId>,
    ) -> Result<PlanDiff, HostError> {
        self.core
            .with_open(|open| Ok(open.store.diff(approval_id, against)?))
    }

    // Executions.

    /// Moves a queued execution to running. The README example runs one.
    ///
    /// # Errors
    ///
    /// `EXECUTION_NOT_FOUND`, `EXECUTION_NOT_ACTIVE` (not queued, or queued
    /// by an earlier host process), `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn start_execution(&self, execution_id: &ExecutionId) -> Result<PlanApproval, HostError> {
        self.execution_event(execution_id, |execution_id, epoch| Event::StartExecution {
            execution_id,
            epoch,
        })
    }

    /// Moves a running execution to completed and ends its turn. The README
    /// example completes one.
    ///
    /// # Errors
    ///
    /// `EXECUTION_NOT_FOUND`, `EXECUTION_NOT_ACTIVE` (not running),
    /// `SESSION_BUSY` (a command of the turn is still running),
    /// `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn complete_execution(&self, execution_id: &ExecutionId) -> Result<PlanApproval, HostError> {
        self.execution_event(execution_id, |execution_id, epoch| Event::CompleteExecution {
            execution_id,
            epoch,
        })
    }

    fn execution_event(
        &self,
        execution_id: &ExecutionId,
        event: impl FnOnce(ExecutionId, BootEpoch) -> Event,
    ) -> Result<PlanApproval, HostError> {
        let row = self
            .core
            .with_open(|open| Ok(open.store.find_by_execution_id(execution_id)?))?
            .ok_or_else(|| {
                HostError::with_detail(ErrorCode::ExecutionNotFound, format!("execution {execution_id}"))
            })?;
        let session_id = row.approval.session_id.clone();
        match self
            .core
            .session_event(&session_id, event(execution_id.clone(), self.core.epoch))?
        {
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
    /// than its `expiresAt`, so a timer set by it still fires on time. With
    /// [`ExpiryTimer::Manual`] the embedder's loop sleeps until it and then
    /// calls [`Host::expire_due`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use plan_host::{ExpiryTimer, Host, HostOptions};
    ///
    /// let options = HostOptions { expiry: ExpiryTimer::Manual, ..HostOptions::default() };
    /// let host = Host::open(dir.path().join("plan.db"), options)?;
    /// // Nothing pending: nothing to wait for and nothing to expire.
    /// assert_eq!(host.next_deadline()?, None);
    /// assert!(host.expire_due()?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn next_deadline(&self) -> Result<Option<UnixMs>, HostError> {
        self.core.earliest_deadline()
    }

    /// Expires every approval plan-core calls due, sending
    /// `plan/approvalResolved` for each; returns them. [`Host::next_deadline`]'s
    /// example calls it; the host test
    /// `with_manual_expiry_nothing_expires_until_expire_due` shows it expire.
    ///
    /// # Errors
    ///
    /// `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn expire_due(&self) -> Result<Vec<PlanApproval>, HostError> {
        self.core.expire_due_now()
    }

    // The machinery every operation shares.

    fn stored_approval(&self, approval_id: &ApprovalId) -> Result<StoredApproval, HostError> {
        self.core
            .with_open(|open| Ok(open.store.get_approval(approval_id)?))?
            .ok_or_else(|| {
                HostError::with_detail(ErrorCode::ApprovalNotFound, format!("approval {approval_id}"))
            })
    }
}

impl Host {
    // Shells.

    /// The shell catalog with availability, and the effective default
    /// (plan-core's `default_shell` over the catalog and the persisted
    /// setting; empty for an empty catalog).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use plan_host::{CommandShell, Host, HostOptions};
    ///
    /// let options = HostOptions { shells: vec![CommandShell::new("sh", "/bin/sh")], ..HostOptions::default() };
    /// let host = Host::open(dir.path().join("plan.db"), options)?;
    /// let (entries, default) = host.shells()?;
    /// assert_eq!(entries[0].id, "sh");
    /// assert_eq!(entries[0].available, std::path::Path::new("/bin/sh").exists());
    /// # let _ = default;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn shells(&self) -> Result<(Vec<ShellInfo>, String), HostError> {
        let persisted = self.core.with_open(|open| Ok(open.store.default_shell()?))?;
        Ok(crate::commands::shell_catalog(
            &self.core.options.shells,
            persisted.as_deref(),
        ))
    }

    /// Persists the default shell (the host test
    /// `list_set_default_and_unknown_shells` shows it).
    ///
    /// # Errors
    ///
    /// `SHELL_UNKNOWN` (not in the host's catalog), `HOST_CLOSED`,
    /// `STORAGE_FAILED`.
    pub fn set_default_shell(&self, shell_id: &str) -> Result<String, HostError> {
        check_shell(
            self.core.options.shells.iter().map(|spec| spec.id.as_str()),
            shell_id,
        )
        .map_err(|code| HostError::with_detail(code, format!("shell {shell_id:?}")))?;
        self.core
            .with_open(|open| Ok(open.store.set_default_shell(shell_id)?))?;
        Ok(shell_id.to_owned())
    }
}

// Host-run commands: the API over `commands.rs`, which carries them out.
impl Host {
    /// The first half of `turn/cancel`'s `CancelCommand` effects, carried
    /// out before the state lock is taken: the session's running commands
    /// are killed and their outcomes awaited here, so their last output can
    /// reach listeners that call back into the host. Their watchers record
    /// the ends; a command that has not been recorded when plan-core decides
    /// is recorded under the lock (`cancel_command_now`), where its outcome
    /// is then already known. This decides nothing: only a session with an
    /// active turn and nothing pending can have running commands, and
    /// plan-core cancels them on `turn/cancel` there.
    pub(crate) fn end_commands_before_cancel(&self, session_id: &SessionId) -> Result<(), HostError> {
        let running: Vec<Arc<Done>> = self.core.with_open(|open| {
            Ok(open
                .commands
                .iter()
                .filter(|((session, _), _)| session == session_id)
                .map(|(_, slot)| {
                    slot.cancel.cancel();
                    Arc::clone(&slot.done)
                })
                .collect())
        })?;
        for done in running {
            done.wait();
        }
        Ok(())
    }

    /// How many ended commands' audit entries could not be written yet
    /// (their watchers keep trying; while any is waiting, no command
    /// starts). Zero on a healthy host.
    ///
    /// # Errors
    ///
    /// `HOST_CLOSED`.
    pub fn unrecorded_command_ends(&self) -> Result<usize, HostError> {
        self.core
            .with_open(|open| Ok(open.commands.values().filter(|slot| slot.ended.is_some()).count()))
    }

    /// Whether Plan-mode Bash can run here (probed once at open), why not,
    /// and which sandbox layers and properties hold: plan-core's
    /// `command_capabilities` over what the probe found, the record
    /// `initialize` reports and the FFI's `sandbox_info` returns.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use plan_host::{Host, HostOptions, PlanSandbox};
    ///
    /// let options = HostOptions { sandbox_helper: Some(dir.path().join("no-helper")), ..HostOptions::default() };
    /// let host = Host::open(dir.path().join("plan.db"), options)?;
    /// // Without a helper nothing runs, and the host says why.
    /// let capabilities = host.command_capabilities();
    /// assert_eq!(capabilities.plan_sandbox, PlanSandbox::Unavailable);
    /// assert!(capabilities.reason.is_some());
    /// assert!(!host.limits().commands.sandbox_available);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn command_capabilities(&self) -> CommandCapabilities {
        plan_core::command_capabilities(&self.core.options.limits.commands)
    }

    /// `command/start`: runs an Agent turn's allowed or confirmed Bash call
    /// (`call_id` is the tool call the turn's batch decided, `command` the
    /// text of its input) in the workspace-write sandbox, under every
    /// permission mode. A refused start is recorded in the audit and returned
    /// as the error. The host tests in `tests/host/commands.rs` run commands
    /// this way.
    ///
    /// # Errors
    ///
    /// `SESSION_NOT_FOUND`, `TURN_NOT_ACTIVE`, `COMMAND_NOT_ALLOWED` (not a
    /// Bash call the turn allowed or a person confirmed, still awaiting its
    /// confirmation, declined, started already, or another command text,
    /// `cwd` or timeout than the call's input),
    /// `INVALID_COMMAND_INPUT`, `COMMAND_CWD_ESCAPE`, `SANDBOX_UNAVAILABLE`,
    /// `SHELL_UNAVAILABLE`, `SESSION_BUSY` (too many running commands),
    /// `HOST_CLOSED`, `STORAGE_FAILED`, `INTERNAL` (the process could not be
    /// spawned).
    pub fn start_agent_command(
        &self,
        session_id: &SessionId,
        turn_id: &TurnId,
        call_id: &CallId,
        command: &str,
        cwd: Option<&str>,
        timeout_ms: Option<u64>,
    ) -> Result<CommandRun, HostError> {
        let input = bash_input(command, cwd, timeout_ms);
        let calls = [(call_id.to_owned(), input.clone())];
        let ran = self
            .core
            .run_commands(session_id, turn_id, (&calls, &[]), true, |commands| {
                Event::StartCommand {
                    turn_id: turn_id.clone(),
                    call_id: call_id.to_owned(),
                    input,
                    commands,
                }
            })?;
        // A refused start was recorded in the refusal's transaction.
        match ran.outcome? {
            (Reply::CommandStarted(launch), _) => Ok(launch.run),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// `command/register`: holds a Bash call of the session's active turn
    /// for a client that names it by reference rather than carrying its
    /// text (an agent's client let out of the agent's own sandbox). In a
    /// Plan turn plan-core decides the call as it decides every Plan Bash
    /// call and registers it instead of running it; in an Agent turn the
    /// call must be one the turn allowed or a person confirmed, with this
    /// input. Returns the fresh reference `command/run` takes, once.
    ///
    /// # Errors
    ///
    /// `SESSION_NOT_FOUND`, `TURN_NOT_ACTIVE`, `SESSION_BUSY` (a plan is
    /// pending), `COMMAND_NOT_ALLOWED` (a call id used already in the Plan
    /// turn; an Agent call not allowed with this input),
    /// `INVALID_COMMAND_INPUT`, `COMMAND_CWD_ESCAPE`,
    /// `PLAN_SANDBOX_UNAVAILABLE`, `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn register_command(
        &self,
        session_id: &SessionId,
        turn_id: &TurnId,
        call_id: &CallId,
        command: &str,
        cwd: Option<&str>,
        timeout_ms: Option<u64>,
    ) -> Result<String, HostError> {
        let input = bash_input(command, cwd, timeout_ms);
        let reference = uuid::Uuid::new_v4().simple().to_string();
        let calls = [(call_id.to_owned(), input.clone())];
        let ran = self
            .core
            .run_commands(session_id, turn_id, (&calls, &[]), false, |commands| {
                Event::RegisterCommand {
                    turn_id: turn_id.clone(),
                    call_id: call_id.to_owned(),
                    input,
                    reference,
                    commands,
                }
            })?;
        match ran.outcome? {
            (Reply::CommandRegistered { reference, .. }, _) => Ok(reference),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// `command/run`: starts the call `command/register` registered under
    /// `reference` in the session's active turn (read-only in a Plan turn,
    /// the workspace-write sandbox in an Agent turn), once; its output
    /// streams as `command/output` like every host-run command's.
    ///
    /// # Errors
    ///
    /// `SESSION_NOT_FOUND`, `COMMAND_NOT_ALLOWED` (no call of the active
    /// turn is registered under `reference`: another turn's, one that ran
    /// already, or one never given), `SESSION_BUSY`, the start refusals of
    /// `command/start`, `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn run_registered(&self, session_id: &SessionId, reference: &str) -> Result<CommandRun, HostError> {
        // Which call the reference names is looked up to gather its facts;
        // plan-core decides again, under the lock, whether it runs, and
        // records every refusal, of a reference it never gave or one spent
        // included (no facts are gathered for those).
        let registered = self.core.with_open(|open| {
            Ok(open.turns.get(session_id).map(|turn| {
                let call = turn.commands.iter().find_map(|known| {
                    let registration = known.registration.as_ref()?;
                    known
                        .awaits_run_by(reference)
                        .then(|| (known.call_id.clone(), registration.input.clone()))
                });
                (turn.turn_id.clone(), call)
            }))
        })?;
        let (turn_id, call) = registered.unwrap_or_else(|| (TurnId::from(String::new()), None));
        let calls: Vec<(CallId, serde_json::Value)> = call.into_iter().collect();
        let ran = self
            .core
            .run_commands(session_id, &turn_id, (&calls, &[]), true, |commands| {
                Event::RunRegistered {
                    reference: reference.to_owned(),
                    commands,
                }
            })?;
        match ran.outcome? {
            (Reply::CommandStarted(launch), _) => Ok(launch.run),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// `command/cancel`: kills a running command (SIGTERM to its group,
    /// SIGKILL after the grace); `command/exited` with state `cancelled`
    /// confirms it. Returns the run as it is now (the host tests in
    /// `tests/host/commands.rs` cancel commands).
    ///
    /// # Errors
    ///
    /// `SESSION_NOT_FOUND`, `COMMAND_NOT_FOUND`, `COMMAND_NOT_RUNNING`,
    /// `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn cancel_command(&self, session_id: &SessionId, call_id: &CallId) -> Result<CommandRun, HostError> {
        let session_id_text = session_id.as_str();
        let known_ended = self
            .core
            .with_open(|open| Ok(open.store.command_record(session_id_text, call_id)?))?
            .is_some_and(|record| record.run.state.is_ended());
        let event = Event::CancelCommand {
            call_id: call_id.to_owned(),
            known_ended,
        };
        self.core.session_event(session_id, event)?;
        self.command(session_id, call_id)
    }

    /// `command/get`: a running command as it started, or the latest audit
    /// record of an ended one (the host tests in `tests/host/commands.rs`
    /// read runs back).
    ///
    /// # Errors
    ///
    /// `SESSION_NOT_FOUND`, `COMMAND_NOT_FOUND` (no run has that call id),
    /// `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn command(&self, session_id: &SessionId, call_id: &CallId) -> Result<CommandRun, HostError> {
        self.core.with_open(|open| {
            if open.store.get_session(session_id)?.is_none() {
                return Err(HostError::with_detail(
                    ErrorCode::SessionNotFound,
                    format!("session {session_id}"),
                ));
            }
            let key = (session_id.clone(), call_id.to_owned());
            if let Some(slot) = open.commands.get(&key) {
                // An ended run whose entry is still being written is ended.
                return Ok(slot
                    .ended
                    .as_ref()
                    .map_or_else(|| slot.run.clone(), |(run, _)| run.clone()));
            }
            match open.store.command_record(session_id.as_str(), call_id)? {
                Some(record) => Ok(record.run),
                None => Err(HostError::with_detail(
                    ErrorCode::CommandNotFound,
                    format!("command {call_id}"),
                )),
            }
        })
    }

    /// Recorded runs, newest first, with their latest state (the host
    /// tests in `tests/host/commands.rs` list them).
    ///
    /// # Errors
    ///
    /// `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn list_commands(&self, filter: &CommandFilter) -> Result<Vec<CommandRecord>, HostError> {
        self.core.with_open(|open| Ok(open.store.list_commands(filter)?))
    }
}

/// A Bash call's input as a tool call carries it: `{command, cwd?, timeoutMs?}`.
fn bash_input(command: &str, cwd: Option<&str>, timeout_ms: Option<u64>) -> serde_json::Value {
    let mut input = serde_json::json!({"command": command});
    if let serde_json::Value::Object(fields) = &mut input {
        if let Some(cwd) = cwd {
            fields.insert("cwd".to_owned(), cwd.into());
        }
        if let Some(timeout_ms) = timeout_ms {
            fields.insert("timeoutMs".to_owned(), timeout_ms.into());
        }
    }
    input
}
