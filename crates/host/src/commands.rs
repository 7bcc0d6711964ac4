//! Host-run commands: carries out plan-core's command decisions through
//! plan-exec (spawn, cancel, wait) and records every run through storage.
//!
//! Order of a run: plan-core allows it (a Plan turn's `Bash` call, or
//! `command/start` in an Agent turn) -> the `commandStarted` audit entry is
//! committed -> the helper is spawned with exactly the confinement plan-core
//! chose -> output events become `command/output` notifications -> the
//! outcome is recorded (`commandEnded`) and announced (`command/exited`),
//! then plan-core hears `CommandEnded`. A command cancelled because its turn
//! ends is waited for and recorded by the cancelling thread, under the state
//! lock, before the turn's end is carried out.
//!
//! This module decides nothing: which sandbox a command gets, whether it may
//! start, when a turn may end are plan-core's. It never weakens a
//! confinement: a Plan command is spawned with `Confinement::ReadOnly` or
//! not at all.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use plan_core::{
    CommandRequest, CommandRun, CommandState, ErrorCode, Event, Reply, Sandbox, SandboxGrant, SessionId,
    TurnId,
};
use plan_exec::{
    CancelHandle, CommandOutcome, CommandSpec, Confinement, ExecError, Isolation, OutputEvent, Runner,
    SandboxSupport, Stream,
};
use plan_protocol::{CommandExitedNotification, CommandOutputNotification, OutputStream, ServerNotification};
use plan_storage::{CommandEntryKind, CommandFilter, CommandRecord};

use crate::event::{HostCore, Open};
use crate::host::{lock, unexpected};
use crate::types::HostOptions;
use crate::{Host, HostError};

/// A running command's key: session id and call id.
pub(crate) type CommandKey = (String, String);

/// What [`Host::open`] found out about the kernel sandbox, once.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// use plan_host::{Host, HostOptions, SandboxStatus};
///
/// let options = HostOptions { sandbox_helper: Some(dir.path().join("no-helper")), ..HostOptions::default() };
/// let host = Host::open(dir.path().join("plan.db"), options)?;
/// // Without a helper nothing runs, and the host says why.
/// assert!(matches!(host.sandbox_status(), SandboxStatus::Unavailable { .. }));
/// assert!(!host.limits().commands.sandbox_available);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxStatus {
    /// Landlock ABI 3+, seccomp and dropped capabilities work: Plan Bash runs
    /// read-only.
    Landlock,
    /// No sandbox here: Plan Bash is `PLAN_SANDBOX_UNAVAILABLE` and Agent
    /// `auto` commands are `SANDBOX_UNAVAILABLE`.
    Unavailable {
        /// Why, for people.
        reason: String,
    },
}

/// The runner, the probe's verdict and the scratch root.
pub(crate) struct CommandSupport {
    runner: Option<Runner>,
    status: SandboxStatus,
    /// The probe found namespaces usable and the host did not skip them.
    namespaces: bool,
    database: PathBuf,
    protected_paths: Vec<PathBuf>,
    scratch_root: PathBuf,
    output_cap: u64,
    grace: Duration,
}

impl CommandSupport {
    /// Finds the helper, probes the sandbox once and empties the scratch
    /// root (no turn of an earlier process survives, so everything there is
    /// stale: part of the startup fence).
    pub(crate) fn open(options: &HostOptions, database: &Path) -> Result<CommandSupport, HostError> {
        let scratch_root = options.scratch_root.clone().unwrap_or_else(|| {
            let mut name = database.as_os_str().to_owned();
            name.push(".scratch");
            PathBuf::from(name)
        });
        plan_exec::clear_scratch_root(&scratch_root)
            .map_err(|error| HostError::with_detail(ErrorCode::StorageFailed, error.to_string()))?;
        // A helper that is not an executable file counts as missing: no
        // command runs without it, sandboxed or not.
        let runner = match &options.sandbox_helper {
            Some(helper) => helper
                .to_str()
                .is_some_and(plan_storage::executable_exists)
                .then(|| Runner::new(helper.clone())),
            None => Runner::beside_current_exe().ok().or_else(helper_on_path),
        };
        let mut namespaces = false;
        let status = match &runner {
            None => SandboxStatus::Unavailable {
                reason: match &options.sandbox_helper {
                    Some(helper) => format!("the sandbox helper {} was not found", helper.display()),
                    None => format!("the sandbox helper {} was not found", plan_exec::HELPER_NAME),
                },
            },
            Some(runner) => match runner.sandbox_support() {
                SandboxSupport::Available { namespaces: found } => {
                    namespaces = found && !options.skip_namespaces;
                    SandboxStatus::Landlock
                }
                SandboxSupport::Unavailable { reason } => SandboxStatus::Unavailable { reason },
            },
        };
        Ok(CommandSupport {
            runner,
            status,
            namespaces,
            database: database.to_path_buf(),
            protected_paths: options.protected_paths.clone(),
            scratch_root,
            output_cap: options.command_output_cap,
            grace: options.command_grace,
        })
    }

    pub(crate) fn sandbox_available(&self) -> bool {
        match self.status {
            SandboxStatus::Landlock => true,
            SandboxStatus::Unavailable { .. } => false,
        }
    }

    /// Whether sandboxed commands run inside their namespaces.
    pub(crate) fn namespaces_available(&self) -> bool {
        self.sandbox_available() && self.namespaces
    }

    /// What a sandboxed command's namespaces hide and protect. The database
    /// must not be readable (P8) nor writable (P7) from any sandbox: the
    /// database and its side files are hidden and kept read-only. Its
    /// directory is not hidden (it may be any directory of the embedder's,
    /// `/tmp` included, whose other files stay readable); where it lies
    /// inside the workspace (but is not its root) it is kept read-only, so an
    /// `auto` command cannot plant a journal beside the database either.
    fn isolation(&self, workspace_root: &Path) -> Isolation {
        let side_files: Vec<PathBuf> = ["", "-wal", "-shm", "-journal"]
            .iter()
            .map(|suffix| {
                let mut name = self.database.as_os_str().to_owned();
                name.push(suffix);
                PathBuf::from(name)
            })
            .collect();
        let mut protected = side_files.clone();
        if let Some(directory) = self.database.parent()
            && directory.starts_with(workspace_root)
            && directory != workspace_root
        {
            protected.push(directory.to_path_buf());
        }
        if let Some(runner) = &self.runner {
            protected.push(runner.helper().to_path_buf());
        }
        protected.extend(self.protected_paths.iter().cloned());
        let hidden = side_files;
        Isolation {
            namespaces: self.namespaces_available(),
            scratch_root: Some(self.scratch_root.clone()),
            hidden,
            protected,
        }
    }
}

fn helper_on_path() -> Option<Runner> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|directory| directory.join(plan_exec::HELPER_NAME))
        .find(|candidate| candidate.is_file())
        .map(Runner::new)
}

/// The outcome of a command, handed from its watcher thread to whoever
/// records the end (the watcher itself, or a `turn/cancel` waiting for it).
#[derive(Default)]
pub(crate) struct Done {
    outcome: Mutex<Option<CommandOutcome>>,
    ready: Condvar,
}

impl Done {
    fn set(&self, outcome: CommandOutcome) {
        *lock(&self.outcome) = Some(outcome);
        self.ready.notify_all();
    }

    fn wait(&self) -> CommandOutcome {
        let mut outcome = lock(&self.outcome);
        loop {
            if let Some(outcome) = outcome.as_ref() {
                return outcome.clone();
            }
            outcome = self
                .ready
                .wait(outcome)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

/// One running command.
pub(crate) struct CommandSlot {
    /// The run as it started.
    pub(crate) run: CommandRun,
    /// Cancels it from any thread.
    pub(crate) cancel: CancelHandle,
    done: Arc<Done>,
}

/// The confinement plan-core's grant means. The only place a grant becomes
/// a confinement: read-only stays read-only.
fn confinement(grant: SandboxGrant, real_root: &Path) -> Confinement {
    match grant.sandbox {
        Sandbox::ReadOnly => Confinement::ReadOnly,
        Sandbox::WorkspaceWrite => Confinement::WorkspaceWrite {
            workspace_root: real_root.to_path_buf(),
            network: grant.network,
        },
        Sandbox::None => Confinement::None,
    }
}

/// The canonical code of a command that could not start.
fn start_failure_code(error: &ExecError, sandbox: Sandbox) -> ErrorCode {
    match error {
        ExecError::SandboxUnavailable { .. } => match sandbox {
            Sandbox::ReadOnly => ErrorCode::PlanSandboxUnavailable,
            Sandbox::WorkspaceWrite | Sandbox::None => ErrorCode::SandboxUnavailable,
        },
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

fn exited(run: &CommandRun) -> ServerNotification {
    ServerNotification::CommandExited(CommandExitedNotification {
        session_id: run.session_id.to_string(),
        call_id: run.call_id.clone(),
        command: run.into(),
    })
}

impl HostCore {
    /// Carries out a `CancelCommand` effect under the state lock. For a turn
    /// that ends in the same transition, waits until the command exited and
    /// records its end first.
    pub(crate) fn cancel_command_now(
        &self,
        open: &mut Open,
        session_id: &str,
        call_id: &str,
        before_turn_end: bool,
        early: &mut Vec<ServerNotification>,
    ) -> Result<(), HostError> {
        let key = (session_id.to_owned(), call_id.to_owned());
        if !before_turn_end {
            if let Some(slot) = open.commands.get(&key) {
                slot.cancel.cancel();
            }
            return Ok(());
        }
        let Some(slot) = open.commands.remove(&key) else {
            return Ok(());
        };
        slot.cancel.cancel();
        // The watcher hands the outcome over before it asks for the lock
        // this thread holds, so this wait ends.
        let outcome = slot.done.wait();
        let now = self.now();
        let ended = ended_run(&slot.run, &outcome, now);
        open.store
            .record_command(CommandEntryKind::Ended, &ended, Some(&outcome.output_sha256), now)?;
        early.push(exited(&ended));
        Ok(())
    }

    /// A turn ended: its scratch directory goes.
    pub(crate) fn turn_ended(&self, open: &mut Open, turn_id: &str) {
        if let Some(directory) = open.scratch.remove(turn_id) {
            // A directory that cannot be removed now is removed by the next
            // startup fence.
            let _ = plan_exec::remove_scratch_dir(&directory);
        }
    }

    /// The watcher's part once a command exited on its own (or was
    /// cancelled by `command/cancel`): record, announce, tell plan-core.
    fn finish(&self, key: &CommandKey) {
        let session_id = key.0.clone();
        let event = Event::CommandEnded {
            call_id: key.1.clone(),
        };
        let recorded = self.run_with(
            &session_id,
            event,
            Box::new(|open, early| {
                // Gone when a turn/cancel recorded it already.
                let Some(slot) = open.commands.remove(key) else {
                    return Ok(false);
                };
                let outcome = slot.done.wait();
                let now = self.now();
                let ended = ended_run(&slot.run, &outcome, now);
                open.store.record_command(
                    CommandEntryKind::Ended,
                    &ended,
                    Some(&outcome.output_sha256),
                    now,
                )?;
                early.push(exited(&ended));
                Ok(true)
            }),
        );
        // A closed host has nobody left to tell; the next host's fence
        // records a run whose end could not be written as interrupted.
        drop(recorded);
    }
}

/// Everything needed to spawn, worked out before the state lock is taken.
struct Prepared {
    run: CommandRun,
    spec: Option<CommandSpec>,
    failure: Option<ErrorCode>,
}

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
    pub(crate) fn end_commands_before_cancel(&self, session_id: &str) -> Result<(), HostError> {
        let running: Vec<Arc<Done>> = self.with_open(|open| {
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

    /// Whether Plan-mode Bash can run here (probed once at open);
    /// [`SandboxStatus`]'s example asks.
    pub fn sandbox_status(&self) -> SandboxStatus {
        self.commands.status.clone()
    }

    /// Starts a command plan-core allowed and returns its run (`running`,
    /// or `failedToStart` with the code when nothing could be spawned).
    pub(crate) fn start_command(&self, request: CommandRequest) -> Result<CommandRun, HostError> {
        let prepared = self.prepare(&request)?;
        let key = (request.session_id.to_string(), request.call_id.clone());
        let core = Arc::clone(&self.core);
        let now = self.now();
        let started = self.with_open(|open| {
            let Prepared {
                mut run,
                spec,
                mut failure,
            } = prepared;
            let spec = match (spec, failure) {
                (Some(mut spec), None) => match self.scratch_dir(open, request.turn_id.as_str()) {
                    Ok(scratch) => {
                        spec.scratch_dir = scratch;
                        Some(spec)
                    }
                    Err(code) => {
                        failure = Some(code);
                        None
                    }
                },
                (Some(_) | None, Some(_)) | (None, None) => None,
            };
            // Committed before anything is spawned.
            open.store
                .record_command(CommandEntryKind::Started, &run, None, now)?;
            let Some(spec) = spec else {
                run.state = CommandState::FailedToStart;
                run.error_code = Some(failure.unwrap_or(ErrorCode::Internal));
                run.ended_at = Some(now);
                open.store
                    .record_command(CommandEntryKind::Ended, &run, None, now)?;
                return Ok((run, None));
            };
            let runner = self.commands.runner.as_ref();
            let Some(runner) = runner else {
                return Err(HostError::with_detail(
                    ErrorCode::Internal,
                    "prepared without a runner",
                ));
            };
            let sink_core = Arc::clone(&core);
            let (session_id, call_id) = key.clone();
            let running = runner.spawn(spec, move |event: OutputEvent| {
                let notification = ServerNotification::CommandOutput(CommandOutputNotification {
                    session_id: session_id.clone(),
                    call_id: call_id.clone(),
                    stream: match event.stream {
                        Stream::Stdout => OutputStream::Stdout,
                        Stream::Stderr => OutputStream::Stderr,
                    },
                    seq: event.seq,
                    chunk: event.chunk,
                });
                lock(&sink_core.outbox).queue.push_back(notification);
                sink_core.deliver();
            });
            let done = Arc::new(Done::default());
            open.commands.insert(
                key.clone(),
                CommandSlot {
                    run: run.clone(),
                    cancel: running.cancel_handle(),
                    done: Arc::clone(&done),
                },
            );
            Ok((run, Some((running, done))))
        });
        let (run, spawned) = match started {
            Ok(started) => started,
            Err(error) => {
                // Nothing was spawned (the audit could not be written):
                // plan-core must not keep the command running.
                let _ = self.run(
                    &key.0,
                    Event::CommandEnded {
                        call_id: key.1.clone(),
                    },
                );
                return Err(error);
            }
        };
        match spawned {
            Some((running, done)) => {
                let watcher_core = Arc::clone(&self.core);
                let watcher_key = key.clone();
                let watcher = std::thread::Builder::new()
                    .name("plan-host-command".into())
                    .spawn(move || {
                        done.set(running.wait());
                        watcher_core.finish(&watcher_key);
                    });
                if let Err(error) = watcher {
                    return Err(HostError::with_detail(ErrorCode::Internal, error.to_string()));
                }
                Ok(run)
            }
            None => {
                // Nothing ran: plan-core hears the end at once.
                let (_, outcome) = self.run(
                    &key.0,
                    Event::CommandEnded {
                        call_id: key.1.clone(),
                    },
                )?;
                outcome?;
                lock(&self.outbox).queue.push_back(exited(&run));
                self.deliver();
                Ok(run)
            }
        }
    }

    /// The turn's scratch directory, made on its first command.
    fn scratch_dir(&self, open: &mut Open, turn_id: &str) -> Result<PathBuf, ErrorCode> {
        if let Some(directory) = open.scratch.get(turn_id) {
            return Ok(directory.clone());
        }
        let directory = plan_exec::create_scratch_dir(&self.commands.scratch_root, turn_id)
            .map_err(|_| ErrorCode::Internal)?;
        open.scratch.insert(turn_id.to_owned(), directory.clone());
        Ok(directory)
    }

    /// Resolves the shell, the real working directory and the spec.
    fn prepare(&self, request: &CommandRequest) -> Result<Prepared, HostError> {
        let (entries, default_shell) = self.shells()?;
        let shell_id = request.shell.clone().unwrap_or(default_shell);
        let shell = entries.iter().find(|entry| entry.spec.id == shell_id);
        let mut run = CommandRun {
            call_id: request.call_id.clone(),
            session_id: request.session_id.clone(),
            turn_id: request.turn_id.clone(),
            command: request.input.command.clone(),
            cwd: request.input.cwd.clone(),
            shell_id: shell_id.clone(),
            shell_path: shell.map(|entry| entry.spec.path.clone()).unwrap_or_default(),
            sandbox: request.grant.sandbox,
            network: request.grant.network,
            state: CommandState::Running,
            exit_code: None,
            signal: None,
            error_code: None,
            started_at: self.now(),
            ended_at: None,
            stdout_bytes: 0,
            stderr_bytes: 0,
            truncated: false,
        };
        let failed = |run: CommandRun, code: ErrorCode| Prepared {
            run,
            spec: None,
            failure: Some(code),
        };
        let Some(shell) = shell.filter(|entry| entry.available) else {
            return Ok(failed(run, ErrorCode::ShellUnavailable));
        };
        if self.commands.runner.is_none() {
            let code = match request.grant.sandbox {
                Sandbox::ReadOnly => ErrorCode::PlanSandboxUnavailable,
                Sandbox::WorkspaceWrite | Sandbox::None => ErrorCode::SandboxUnavailable,
            };
            return Ok(failed(run, code));
        }
        let root = Path::new(&request.workspace_root);
        let Some(real_root) = plan_storage::real_directory(root) else {
            return Ok(failed(run, ErrorCode::InvalidCommandInput));
        };
        let Some(real_cwd) = plan_storage::real_directory(&root.join(&request.input.cwd)) else {
            return Ok(failed(run, ErrorCode::InvalidCommandInput));
        };
        let (Some(real_root_text), Some(real_cwd_text)) = (real_root.to_str(), real_cwd.to_str()) else {
            return Ok(failed(run, ErrorCode::InvalidCommandInput));
        };
        if let Err(code) = plan_core::check_resolved_cwd(real_root_text, real_cwd_text) {
            return Ok(failed(run, code));
        }
        run.shell_path.clone_from(&shell.spec.path);
        let spec = CommandSpec {
            shell: PathBuf::from(&shell.spec.path),
            command: request.input.command.clone(),
            cwd: real_cwd,
            env: Vec::<(OsString, OsString)>::new(),
            // Replaced by the turn's scratch directory under the lock.
            scratch_dir: PathBuf::new(),
            timeout: Duration::from_millis(request.input.timeout_ms),
            grace: self.commands.grace,
            output_cap: self.commands.output_cap,
            confinement: confinement(request.grant, &real_root),
            isolation: self.commands.isolation(&real_root),
        };
        Ok(Prepared {
            run,
            spec: Some(spec),
            failure: None,
        })
    }

    /// `command/start`: runs an Agent turn's allowed Bash call (`call_id`
    /// is the tool call the turn's batch allowed). A refused start is
    /// recorded in the audit and returned as the error. The host tests in
    /// `tests/host/commands.rs` run commands this way.
    ///
    /// # Errors
    ///
    /// `SESSION_NOT_FOUND`, `TURN_NOT_ACTIVE`, `COMMAND_NOT_ALLOWED` (not a
    /// Bash call the turn allowed, or started already),
    /// `INVALID_COMMAND_INPUT`, `COMMAND_CWD_ESCAPE`, `SANDBOX_UNAVAILABLE`,
    /// `SHELL_UNAVAILABLE`, `SESSION_BUSY` (too many running commands),
    /// `HOST_CLOSED`, `STORAGE_FAILED`, `INTERNAL` (the process could not be
    /// spawned).
    pub fn start_agent_command(
        &self,
        session_id: &SessionId,
        turn_id: &TurnId,
        call_id: &str,
        command: &str,
        cwd: Option<&str>,
        timeout_ms: Option<u64>,
    ) -> Result<CommandRun, HostError> {
        let (session_id, turn_id) = (session_id.as_str(), turn_id.as_str());
        let mut input = serde_json::json!({"command": command});
        if let serde_json::Value::Object(fields) = &mut input {
            if let Some(cwd) = cwd {
                fields.insert("cwd".to_owned(), cwd.into());
            }
            if let Some(timeout_ms) = timeout_ms {
                fields.insert("timeoutMs".to_owned(), timeout_ms.into());
            }
        }
        let event = Event::StartCommand {
            turn_id: turn_id.into(),
            call_id: call_id.to_owned(),
            input,
        };
        let (_, outcome) = self.run(session_id, event)?;
        match outcome {
            Ok((Reply::CommandStarted(request), _)) => self.start_command(request),
            Ok((other, _)) => Err(unexpected(&other)),
            Err(HostError::Refused(code)) => {
                self.record_refusal(session_id, turn_id, call_id, command, cwd, code)?;
                Err(HostError::Refused(code))
            }
            Err(error) => Err(error),
        }
    }

    pub(crate) fn record_refusal(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        command: &str,
        cwd: Option<&str>,
        code: ErrorCode,
    ) -> Result<(), HostError> {
        let now = self.now();
        let limits = self.options.limits;
        self.with_open(|open| {
            let Some(session) = open.store.get_session(session_id)? else {
                return Ok(());
            };
            // The sandbox the command would have had in the active turn; a
            // refusal outside any turn is recorded as read-only.
            let grant = open.turns.get(session_id).map_or(
                SandboxGrant {
                    sandbox: Sandbox::ReadOnly,
                    network: false,
                },
                |turn| plan_core::sandbox_for(turn, session.permission_mode, &limits.commands),
            );
            let run = CommandRun {
                call_id: call_id.to_owned(),
                session_id: session_id.into(),
                turn_id: turn_id.into(),
                command: command.to_owned(),
                cwd: cwd.unwrap_or(".").to_owned(),
                shell_id: session.shell.unwrap_or_default(),
                shell_path: String::new(),
                sandbox: grant.sandbox,
                network: grant.network,
                state: CommandState::FailedToStart,
                exit_code: None,
                signal: None,
                error_code: Some(code),
                started_at: now,
                ended_at: Some(now),
                stdout_bytes: 0,
                stderr_bytes: 0,
                truncated: false,
            };
            open.store
                .record_command(CommandEntryKind::Refused, &run, None, now)?;
            Ok(())
        })
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
    pub fn cancel_command(&self, session_id: &SessionId, call_id: &str) -> Result<CommandRun, HostError> {
        let session_id_text = session_id.as_str();
        let known_ended = self
            .with_open(|open| Ok(open.store.command_record(session_id_text, call_id)?))?
            .is_some_and(|record| record.run.state.is_ended());
        let event = Event::CancelCommand {
            call_id: call_id.to_owned(),
            known_ended,
        };
        self.session_event(session_id_text, event)?;
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
    pub fn command(&self, session_id: &SessionId, call_id: &str) -> Result<CommandRun, HostError> {
        let session_id = session_id.as_str();
        self.with_open(|open| {
            if open.store.get_session(session_id)?.is_none() {
                return Err(HostError::with_detail(
                    ErrorCode::SessionNotFound,
                    format!("session {session_id}"),
                ));
            }
            let key = (session_id.to_owned(), call_id.to_owned());
            if let Some(slot) = open.commands.get(&key) {
                return Ok(slot.run.clone());
            }
            match open.store.command_record(session_id, call_id)? {
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
        self.with_open(|open| Ok(open.store.list_commands(filter)?))
    }
}
