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
use std::sync::Arc;
use std::time::Duration;

use plan_core::{
    CommandRequest, CommandRun, CommandShell, CommandState, ErrorCode, Event, Reply, Sandbox, SandboxGrant,
    SessionId, TurnId, WorkspaceIdentity,
};
use plan_exec::{CommandOutcome, CommandSpec, Confinement, ExecError, OutputEvent, ScratchDir, WorkspaceDir};
use plan_storage::{CommandEntryKind, CommandFilter, CommandRecord};

use crate::error::unexpected;
use crate::event::{HostCore, Open};
use crate::notify::HostEvent;
use crate::running::{CommandKey, CommandSlot, Done, SandboxStatus};
use crate::sync::lock;
use crate::{Host, HostError};

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

impl HostCore {
    /// The workspace `session_id` bound (P12; see
    /// [`crate::running::CommandSupport::workspaces`]): this host's open
    /// descriptor, or the directory `root` names now, which must be the one
    /// the session first bound (recorded in the database, so a later host
    /// checks it too; bound now if nothing is recorded). A directory that
    /// cannot be opened is `INVALID_COMMAND_INPUT`; one renamed or replaced
    /// since the session bound it is `COMMAND_CWD_ESCAPE`.
    pub(crate) fn bound_workspace(
        &self,
        session_id: &SessionId,
        root: &Path,
    ) -> Result<WorkspaceDir, HostError> {
        let mut workspaces = lock(&self.commands.workspaces);
        if let Some(bound) = workspaces.get(session_id.as_str()) {
            return Ok(bound.clone());
        }
        let opened =
            WorkspaceDir::open(root).map_err(|_| HostError::Refused(ErrorCode::InvalidCommandInput))?;
        let (device, inode) = opened
            .identity()
            .ok_or(HostError::Refused(ErrorCode::InvalidCommandInput))?;
        let found = WorkspaceIdentity { device, inode };
        let bound = self.with_open(|open| Ok(open.store.bind_workspace(session_id, found)?))?;
        plan_core::check_workspace_identity(bound, found).map_err(HostError::Refused)?;
        workspaces.insert(session_id.as_str().to_owned(), opened.clone());
        Ok(opened)
    }

    /// Carries out a `CancelCommand` effect under the state lock. For a turn
    /// that ends in the same transition, waits until the command exited and
    /// records its end first.
    pub(crate) fn cancel_command_now(
        &self,
        open: &mut Open,
        session_id: &SessionId,
        call_id: &str,
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
    fn remove_scratch(&self, scratch: &ScratchDir) {
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
    fn finish(&self, key: &CommandKey) {
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

/// The first pause before an unwritten command end is written again.
const RETRY_FIRST: Duration = Duration::from_millis(50);

/// The longest pause between two attempts to write a command's end.
const RETRY_MAX: Duration = Duration::from_secs(2);

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

    /// The Bash calls of a batch whose `cwd`, every symlink followed, leads
    /// out of the session's workspace (plan-core's `check_resolved_cwd`
    /// says so): resolved before plan-core decides, so such a call is
    /// denied with `COMMAND_CWD_ESCAPE` in the answer instead of allowed and
    /// then failing to start. A cwd that does not exist is left to the start
    /// (it cannot lead anywhere).
    pub(crate) fn cwd_escapes(
        &self,
        session_id: &SessionId,
        calls: &[plan_core::ToolCall],
    ) -> Result<Vec<String>, HostError> {
        if !calls.iter().any(|call| call.name == plan_core::BASH) {
            return Ok(Vec::new());
        }
        let root = self
            .core
            .with_open(|open| Ok(open.store.get_session(session_id)?))?
            .and_then(|session| session.workspace_root);
        let Some(root) = root else {
            return Ok(Vec::new());
        };
        let bash_calls = || calls.iter().filter(|call| call.name == plan_core::BASH);
        let workspace = match self.core.bound_workspace(session_id, Path::new(&root)) {
            Ok(workspace) => workspace,
            // The directory at the path is not the session's workspace any
            // more: every Bash call would run outside it.
            Err(HostError::Refused(ErrorCode::CommandCwdEscape)) => {
                return Ok(bash_calls().map(|call| call.call_id.clone()).collect());
            }
            // Not there (yet): left to the start, as a missing cwd is.
            Err(HostError::Refused(_)) => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        let Some(real_root) = workspace.current_path() else {
            return Ok(Vec::new());
        };
        let escapes = bash_calls()
            .filter(|call| {
                let Some(cwd) = call.input.get("cwd").and_then(serde_json::Value::as_str) else {
                    return false;
                };
                let Some(real_cwd) = workspace.locate(Path::new(cwd)) else {
                    return false;
                };
                match (real_root.to_str(), real_cwd.to_str()) {
                    (Some(real_root), Some(real_cwd)) => {
                        plan_core::check_resolved_cwd(real_root, real_cwd).is_err()
                    }
                    // Not expressible as text: plan-core cannot place it
                    // inside the workspace, so it counts as leaving it.
                    (None, _) | (_, None) => true,
                }
            })
            .map(|call| call.call_id.clone())
            .collect();
        Ok(escapes)
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

    /// Whether Plan-mode Bash can run here (probed once at open);
    /// [`SandboxStatus`]'s example asks.
    pub fn sandbox_status(&self) -> SandboxStatus {
        self.core.commands.status.clone()
    }

    /// Starts a command plan-core allowed and returns its run (`running`,
    /// or `failedToStart` with the code when nothing could be spawned).
    pub(crate) fn start_command(&self, request: CommandRequest) -> Result<CommandRun, HostError> {
        let prepared = self.prepare(&request)?;
        let key = (request.session_id.clone(), request.call_id.clone());
        let core = Arc::clone(&self.core);
        let now = self.core.now();
        let started = self.core.with_open(|open| {
            let Prepared {
                mut run,
                spec,
                failure,
            } = prepared;
            // Committed before anything is spawned.
            if let Err(error) = open
                .store
                .record_command(CommandEntryKind::Started, &run, None, now)
            {
                if let Some(spec) = &spec {
                    self.core.remove_scratch(&spec.scratch);
                }
                return Err(error.into());
            }
            let Some(spec) = spec else {
                run.state = CommandState::FailedToStart;
                run.error_code = Some(failure.unwrap_or(ErrorCode::Internal));
                run.ended_at = Some(now);
                open.store
                    .record_command(CommandEntryKind::Ended, &run, None, now)?;
                return Ok((run, None));
            };
            let runner = self.core.commands.runner.as_ref();
            let Some(runner) = runner else {
                return Err(HostError::with_detail(
                    ErrorCode::Internal,
                    "prepared without a runner",
                ));
            };
            let sink_core = Arc::clone(&core);
            let (session_id, call_id) = key.clone();
            let scratch = spec.scratch.clone();
            let running = runner.spawn(spec, move |event: OutputEvent| {
                let notification = HostEvent::CommandOutput {
                    session_id: session_id.clone(),
                    call_id: call_id.clone(),
                    stream: event.stream,
                    seq: event.seq,
                    chunk: event.chunk,
                };
                lock(&sink_core.outbox).queue.push_back(notification);
                sink_core.deliver();
            });
            let done = Arc::new(Done::default());
            open.commands.insert(
                key.clone(),
                CommandSlot {
                    run: run.clone(),
                    scratch,
                    ended: None,
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
                let _ = self.core.run(
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
                self.core
                    .run(
                        &key.0,
                        Event::CommandEnded {
                            call_id: key.1.clone(),
                        },
                    )?
                    .outcome?;
                lock(&self.core.outbox).queue.push_back(exited(&run));
                self.core.deliver();
                Ok(run)
            }
        }
    }

    /// The host's environment minus what plan-core's rule keeps from
    /// commands (secrets by name; `TMPDIR` is always the scratch directory).
    fn command_environment(&self) -> Vec<(OsString, OsString)> {
        let markers = &self.core.options.command_env_secret_markers;
        std::env::vars_os()
            .filter(|(name, _)| plan_core::command_inherits_env(&name.to_string_lossy(), markers))
            .collect()
    }

    /// A fresh scratch directory for one command: made by the host in the
    /// private root and held open, never a path an earlier command saw.
    fn new_scratch_dir(&self) -> Result<ScratchDir, ErrorCode> {
        let root = self
            .core
            .commands
            .scratch_root
            .as_ref()
            .ok_or(ErrorCode::Internal)?;
        root.create(&uuid::Uuid::new_v4().simple().to_string())
            .map_err(|_| ErrorCode::Internal)
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
            shell: CommandShell {
                id: shell_id.clone(),
                path: shell.map(|entry| entry.spec.path.clone()).unwrap_or_default(),
            },
            sandbox: request.grant.sandbox,
            network: request.grant.network,
            state: CommandState::Running,
            exit_code: None,
            signal: None,
            error_code: None,
            started_at: self.core.now(),
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
        let unavailable = request.grant.sandbox.unavailable_code();
        let (Some(_), Some(scratch_root)) = (&self.core.commands.runner, &self.core.commands.scratch_root)
        else {
            return Ok(failed(run, unavailable));
        };
        let root = Path::new(&request.workspace_root);
        let workspace = match self.core.bound_workspace(&request.session_id, root) {
            Ok(workspace) => workspace,
            Err(HostError::Refused(code)) => return Ok(failed(run, code)),
            Err(error) => return Err(error),
        };
        let (Some(real_root), Some(real_cwd)) = (
            workspace.current_path(),
            workspace.locate(Path::new(&request.input.cwd)),
        ) else {
            return Ok(failed(run, ErrorCode::InvalidCommandInput));
        };
        let (Some(real_root_text), Some(real_cwd_text)) = (real_root.to_str(), real_cwd.to_str()) else {
            return Ok(failed(run, ErrorCode::InvalidCommandInput));
        };
        if let Err(code) = plan_core::check_resolved_cwd(real_root_text, real_cwd_text) {
            return Ok(failed(run, code));
        }
        // A sandboxed command may write its workspace: a scratch root in
        // there (a host option can put it anywhere) would let it reach other
        // commands' scratch directories and the startup sweep.
        let scratch_in_workspace = plan_storage::real_directory(scratch_root.path())
            .is_none_or(|real_scratch| real_scratch.starts_with(&real_root));
        if request.grant.sandbox != Sandbox::None && scratch_in_workspace {
            return Ok(failed(run, unavailable));
        }
        // P7 keeps the database's side files read-only by binding over
        // them, which needs them to exist, and hides the rest by covering
        // the database's directory, which cannot be the workspace root. A
        // database directly in the workspace root would let an `auto`
        // command plant a `-journal` that SQLite plays back into the
        // database at the next host's open: refused, not half kept.
        if request.grant.sandbox == Sandbox::WorkspaceWrite && self.core.commands.database_in(&real_root) {
            return Ok(failed(run, unavailable));
        }
        // A networked command joins its session's network namespace, made
        // at the session's first such command (P11: never the host's).
        let network_namespace = match (request.grant.sandbox, request.grant.network) {
            (Sandbox::WorkspaceWrite, true) if self.core.commands.namespaces_available() => {
                match self.core.commands.network(request.session_id.as_str()) {
                    Some(network) => Some(network),
                    None => return Ok(failed(run, unavailable)),
                }
            }
            (_, _) => None,
        };
        run.shell.path.clone_from(&shell.spec.path);
        let scratch = match self.new_scratch_dir() {
            Ok(scratch) => scratch,
            Err(code) => return Ok(failed(run, code)),
        };
        let spec = CommandSpec {
            shell: PathBuf::from(&shell.spec.path),
            command: request.input.command.clone(),
            // Below the workspace's descriptor: the runner resolves it there
            // again, without leaving it.
            cwd: real_cwd
                .strip_prefix(&real_root)
                .map(Path::to_path_buf)
                .unwrap_or_default(),
            workspace: Some(workspace),
            env: self.command_environment(),
            scratch,
            timeout: Duration::from_millis(request.input.timeout_ms),
            grace: self.core.commands.grace,
            output_cap: self.core.commands.output_cap,
            confinement: confinement(request.grant, &real_root),
            isolation: self.core.commands.isolation(&real_root),
            network: network_namespace,
        };
        Ok(Prepared {
            run,
            spec: Some(spec),
            failure: None,
        })
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
        call_id: &str,
        command: &str,
        cwd: Option<&str>,
        timeout_ms: Option<u64>,
    ) -> Result<CommandRun, HostError> {
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
            turn_id: turn_id.clone(),
            call_id: call_id.to_owned(),
            input,
        };
        match self.core.run(session_id, event)?.outcome {
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
        session_id: &SessionId,
        turn_id: &TurnId,
        call_id: &str,
        command: &str,
        cwd: Option<&str>,
        code: ErrorCode,
    ) -> Result<(), HostError> {
        let now = self.core.now();
        let limits = &self.core.options.limits;
        self.core.with_open(|open| {
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
                |turn| plan_core::sandbox_for(turn, &limits.commands),
            );
            let run = CommandRun {
                call_id: call_id.to_owned(),
                session_id: session_id.clone(),
                turn_id: turn_id.clone(),
                command: command.to_owned(),
                cwd: cwd.unwrap_or(".").to_owned(),
                shell: CommandShell {
                    id: session.shell.unwrap_or_default(),
                    path: String::new(),
                },
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
    pub fn command(&self, session_id: &SessionId, call_id: &str) -> Result<CommandRun, HostError> {
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
