//! Host-run commands: gathers the facts a command decision needs, carries
//! out plan-core's command decisions through plan-exec (spawn, cancel,
//! wait) and records every run's end through storage.
//!
//! One path, as quinn-proto's sans-IO shape has it: for a Plan turn's
//! `Bash` batch or an Agent's `command/start`, the host gathers the facts
//! once, under the state lock the decision holds ([`HostCore::gather`]: the
//! session's workspace by descriptor, every call's `cwd` resolved in it,
//! the shell, the sandbox helper, the scratch directory, the session's
//! network namespace); plan-core makes every refusal and returns the
//! starts, their audit entries and the workspace binding as effects; the
//! transition commits in one transaction; then, under the same lock, the
//! commands plan-core started are spawned ([`HostCore::launch`]) with
//! exactly the confinement it chose. Output events become `command/output`
//! notifications; the outcome is recorded (`commandEnded`) and announced
//! (`command/exited`), then plan-core hears `CommandEnded`. A command
//! cancelled because its turn ends is waited for and recorded by the
//! cancelling thread, under the state lock, before the turn's end is
//! carried out.
//!
//! This module decides nothing: which sandbox a command gets, whether it may
//! start, when a turn may end are plan-core's. It never weakens a
//! confinement: a Plan command is spawned with `Confinement::ReadOnly` or
//! not at all.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use std::cell::RefCell;
use std::collections::HashMap;

use plan_core::{
    CallFacts, CallId, CommandFacts, CommandLaunch, CommandShell, CwdFact, ErrorCode, Event, Mode, Reply,
    Sandbox, SandboxGrant, SessionId, ShellInfo, ToolCall, TurnId, TurnKind, WorkspaceFact,
    WorkspaceIdentity, WriteFact, default_shell,
};
use plan_exec::{CommandSpec, Confinement, NetworkNamespace, OutputEvent, ScratchDir, WorkspaceDir};
use plan_storage::Store;

use crate::HostError;
use crate::event::{HostCore, Open, Ran};
use crate::notify::HostEvent;
use crate::running::{CommandSlot, Done};
use crate::sync::lock;

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
}

/// What gathering found that spawning needs: the handles behind the facts
/// plan-core decided from, kept until the transition committed.
#[derive(Default)]
pub(crate) struct Launchpad {
    /// The session's workspace, opened, and whether the decision may keep
    /// it as the session's (it is the directory the session bound, or
    /// binds now).
    workspace: Option<(WorkspaceDir, bool)>,
    /// Its real path.
    real_root: Option<PathBuf>,
    /// Each call's real working directory.
    cwds: HashMap<CallId, PathBuf>,
    /// Each call's fresh scratch directory.
    scratch: HashMap<CallId, ScratchDir>,
    /// The session's network namespace, for a networked command.
    network: Option<NetworkNamespace>,
}

impl HostCore {
    /// Runs a command decision: facts gathered under the state lock,
    /// plan-core's transition committed in one transaction, then the
    /// commands it started spawned under the same lock. `calls` are the
    /// Bash calls and their inputs, then the file-writing calls (whose
    /// paths are looked up, [`HostCore::write_facts`]); `starts` says
    /// whether the event may start the Bash calls (`command/start`; a batch
    /// starts them only in a Plan prompt turn, which gathering finds out),
    /// so their scratch directories are made.
    pub(crate) fn run_commands(
        self: &Arc<Self>,
        session_id: &SessionId,
        turn_id: &TurnId,
        (calls, writes): (&[CallInput], &[CallInput]),
        starts: bool,
        event: impl FnOnce(CommandFacts) -> Event,
    ) -> Result<Ran, HostError> {
        let pad = RefCell::new(Launchpad::default());
        let gather = Box::new(|open: &Open| {
            let (mut facts, gathered) = self.gather(open, session_id, turn_id, calls, starts)?;
            facts.writes = self.write_facts(open, session_id, turn_id, writes)?;
            *pad.borrow_mut() = gathered;
            Ok(event(facts))
        });
        let after = Box::new(|open: &mut Open, reply: &Result<Reply, ErrorCode>| {
            let launches: Vec<&CommandLaunch> = match reply {
                Ok(Reply::CommandStarted(launch)) => vec![launch],
                Ok(Reply::ToolResults(results)) => results
                    .iter()
                    .filter_map(|result| match &result.decision {
                        plan_core::ToolDecision::RunCommand(launch) => Some(launch.as_ref()),
                        plan_core::ToolDecision::Allow
                        | plan_core::ToolDecision::HostRun
                        | plan_core::ToolDecision::Confirm { .. }
                        | plan_core::ToolDecision::Deny(_)
                        | plan_core::ToolDecision::WriteArtifact => None,
                    })
                    .collect(),
                Ok(_) | Err(_) => Vec::new(),
            };
            self.launch(open, session_id, reply.is_ok(), &launches, pad.take())
        });
        match self.run_gathered(session_id, gather, Box::new(|_, _| Ok(true)), None, after, None)? {
            Some(ran) => Ok(ran),
            None => Err(HostError::with_detail(
                ErrorCode::Internal,
                "a command event without a hook was skipped",
            )),
        }
    }

    /// The facts of a command decision, and the handles behind them.
    fn gather(
        &self,
        open: &Open,
        session_id: &SessionId,
        turn_id: &TurnId,
        calls: &[(CallId, serde_json::Value)],
        starts: bool,
    ) -> Result<(CommandFacts, Launchpad), HostError> {
        let mut pad = Launchpad::default();
        // Only an event that may start a command of the session's active
        // turn needs facts (`command/start`, or a Plan prompt turn's batch);
        // any other is refused or decided without them.
        let turn = open.turns.get(session_id).filter(|turn| turn.turn_id == *turn_id);
        let Some(turn) = turn.filter(|turn| {
            !calls.is_empty() && (starts || (turn.mode == Mode::Plan && turn.kind == TurnKind::Prompt))
        }) else {
            return Ok((CommandFacts::default(), pad));
        };
        let Some(session) = open.store.get_session(session_id)? else {
            return Ok((CommandFacts::default(), pad));
        };
        let Some(root) = session.workspace_root.clone() else {
            return Ok((CommandFacts::default(), pad));
        };
        let limits = &self.options.limits.commands;
        let (shell, shell_installed) = self.session_shell(&open.store, session.shell.as_deref())?;
        let (workspace, bound) = match self.cached_workspace(session_id) {
            Some(cached) => (Some(cached), true),
            None => match WorkspaceDir::open(Path::new(&root)) {
                Ok(opened) => (Some(opened), false),
                Err(_) => (None, false),
            },
        };
        let found = workspace.as_ref().and_then(|dir| {
            dir.identity()
                .map(|(device, inode)| WorkspaceIdentity { device, inode })
        });
        let real_root = workspace.as_ref().and_then(WorkspaceDir::current_path);
        let workspace_fact = match found {
            None => WorkspaceFact::Unavailable,
            Some(found) => WorkspaceFact::Found {
                found,
                bound: if bound {
                    Some(found)
                } else {
                    open.store.bound_workspace(session_id)?
                },
                real_root: real_root
                    .as_ref()
                    .and_then(|path| path.to_str())
                    .map(str::to_owned),
            },
        };
        let mut facts = CommandFacts {
            shell,
            shell_installed,
            runner_ready: self.commands.runner.is_some() && self.commands.scratch_root.is_some(),
            network_ready: true,
            ..CommandFacts::default()
        };
        if let (Some(real_root), Some(scratch_root)) = (&real_root, &self.commands.scratch_root) {
            facts.scratch_outside_workspace = plan_storage::real_directory(scratch_root.path())
                .is_some_and(|real_scratch| !real_scratch.starts_with(real_root));
            facts.database_in_workspace_root = self.commands.database_in(real_root);
        }
        // A networked command joins its session's network namespace, made
        // at the session's first such command (P11: never the host's).
        let grant = plan_core::sandbox_for(turn, limits);
        if grant.sandbox == Sandbox::WorkspaceWrite && grant.network && self.commands.namespaces_available() {
            pad.network = self.commands.network(session_id.as_str());
            facts.network_ready = pad.network.is_some();
        }
        for (call_id, input) in calls {
            // The cwd the command would run in, as plan-core normalizes it;
            // an input it refuses needs no facts.
            let Ok(parsed) = plan_core::parse_bash_input(input, Some(&root), limits) else {
                continue;
            };
            let real_cwd = workspace
                .as_ref()
                .filter(|_| found.is_some())
                .and_then(|dir| dir.locate(Path::new(&parsed.cwd)));
            let cwd = match &real_cwd {
                None => CwdFact::Missing,
                Some(path) => match path.to_str() {
                    Some(text) => CwdFact::Resolved(text.to_owned()),
                    None => CwdFact::NotText,
                },
            };
            if let Some(real_cwd) = real_cwd {
                pad.cwds.insert(call_id.clone(), real_cwd);
            }
            let scratch_ready = match self.new_scratch_dir() {
                Ok(scratch) => {
                    pad.scratch.insert(call_id.clone(), scratch);
                    true
                }
                Err(_) => false,
            };
            facts.calls.push(CallFacts {
                call_id: call_id.clone(),
                cwd,
                scratch_ready,
            });
        }
        facts.workspace = workspace_fact;
        let keep = matches!(
            &facts.workspace,
            WorkspaceFact::Found { found, bound, .. } if bound.is_none_or(|bound| bound == *found)
        );
        pad.workspace = workspace.map(|dir| (dir, keep));
        pad.real_root = real_root;
        Ok((facts, pad))
    }

    /// Where the paths of an Agent turn's file-writing calls really lead
    /// (plan-core places each call by them as well as by their text): the
    /// workspace's real path and each path's real target, relative paths
    /// read from the workspace root. Nothing for any other turn.
    fn write_facts(
        &self,
        open: &Open,
        session_id: &SessionId,
        turn_id: &TurnId,
        calls: &[(CallId, serde_json::Value)],
    ) -> Result<Vec<WriteFact>, HostError> {
        let agent_turn = open
            .turns
            .get(session_id)
            .is_some_and(|turn| turn.turn_id == *turn_id && turn.mode == Mode::Agent);
        if calls.is_empty() || !agent_turn {
            return Ok(Vec::new());
        }
        let Some(root) = open
            .store
            .get_session(session_id)?
            .and_then(|session| session.workspace_root)
        else {
            return Ok(Vec::new());
        };
        let text = |path: Option<PathBuf>| path.and_then(|path| path.to_str().map(str::to_owned));
        let real_root = text(plan_storage::real_directory(Path::new(&root)));
        Ok(calls
            .iter()
            .map(|(call_id, input)| WriteFact {
                call_id: call_id.clone(),
                real_root: real_root.clone(),
                real_paths: plan_core::write_paths(input)
                    .into_iter()
                    .map(|path| text(plan_storage::real_write_target(&Path::new(&root).join(path))))
                    .collect(),
            })
            .collect())
    }

    /// The shell a session's command runs with, as the catalog has it, and
    /// whether it is installed.
    fn session_shell(
        &self,
        store: &Store,
        selected: Option<&str>,
    ) -> Result<(CommandShell, bool), HostError> {
        let (entries, default) = shell_catalog(&self.options.shells, store.default_shell()?.as_deref());
        let id = selected.map_or(default, str::to_owned);
        let entry = entries.iter().find(|entry| entry.id == id);
        Ok((
            CommandShell {
                path: entry.map(|entry| entry.path.clone()).unwrap_or_default(),
                id,
            },
            entry.is_some_and(|entry| entry.available),
        ))
    }

    /// The workspace this host opened for `session_id` already, if any.
    fn cached_workspace(&self, session_id: &SessionId) -> Option<WorkspaceDir> {
        lock(&self.commands.workspaces).get(session_id.as_str()).cloned()
    }

    /// Carries out a committed command decision under the state lock: the
    /// session keeps its workspace, every command plan-core started is
    /// spawned, and what no command took is let go.
    fn launch(
        self: &Arc<Self>,
        open: &mut Open,
        session_id: &SessionId,
        committed: bool,
        launches: &[&CommandLaunch],
        mut pad: Launchpad,
    ) -> Result<(), HostError> {
        if let Some((workspace, true)) = &pad.workspace
            && committed
        {
            lock(&self.commands.workspaces)
                .entry(session_id.as_str().to_owned())
                .or_insert_with(|| workspace.clone());
        }
        let mut failure = None;
        for launch in launches.iter().filter(|launch| launch.spawns()) {
            if let Err(error) = self.spawn(open, launch, &mut pad) {
                failure.get_or_insert(error);
            }
        }
        for scratch in pad.scratch.into_values() {
            self.remove_scratch(&scratch);
        }
        failure.map_or(Ok(()), Err)
    }

    /// Spawns one started command and watches it: its slot is in place
    /// before its watcher can report its end.
    fn spawn(
        self: &Arc<Self>,
        open: &mut Open,
        launch: &CommandLaunch,
        pad: &mut Launchpad,
    ) -> Result<(), HostError> {
        let request = &launch.request;
        let run = &launch.run;
        let missing = |what: &str| {
            HostError::with_detail(ErrorCode::Internal, format!("a started command without {what}"))
        };
        let runner = self.commands.runner.as_ref().ok_or_else(|| missing("a runner"))?;
        let (workspace, _) = pad.workspace.as_ref().ok_or_else(|| missing("a workspace"))?;
        let real_root = pad.real_root.as_ref().ok_or_else(|| missing("a real root"))?;
        let real_cwd = pad.cwds.get(&request.call_id).ok_or_else(|| missing("a cwd"))?;
        let scratch = pad
            .scratch
            .remove(&request.call_id)
            .ok_or_else(|| missing("a scratch directory"))?;
        let spec = CommandSpec {
            shell: PathBuf::from(&run.shell.path),
            command: request.input.command.clone(),
            // Below the workspace's descriptor: the runner resolves it there
            // again, without leaving it.
            cwd: real_cwd
                .strip_prefix(real_root)
                .map(Path::to_path_buf)
                .unwrap_or_default(),
            workspace: Some(workspace.clone()),
            env: self.command_environment(),
            scratch: scratch.clone(),
            timeout: Duration::from_millis(request.input.timeout_ms),
            grace: self.commands.grace,
            output_cap: self.commands.output_cap,
            confinement: confinement(request.grant, real_root),
            isolation: self.commands.isolation(real_root),
            network: match (request.grant.sandbox, request.grant.network) {
                (Sandbox::WorkspaceWrite, true) => pad.network.clone(),
                (_, _) => None,
            },
        };
        let key = (request.session_id.clone(), request.call_id.clone());
        let sink_core = Arc::clone(self);
        let (session_id, call_id) = key.clone();
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
        let watcher_core = Arc::clone(self);
        std::thread::Builder::new()
            .name("plan-host-command".into())
            .spawn(move || {
                done.set(running.wait());
                watcher_core.finish(&key);
            })
            .map(|_| ())
            .map_err(|error| HostError::with_detail(ErrorCode::Internal, error.to_string()))
    }

    /// The host's environment minus what plan-core's rule keeps from
    /// commands (secrets by name; `TMPDIR` is always the scratch directory).
    fn command_environment(&self) -> Vec<(OsString, OsString)> {
        let markers = &self.options.command_env_secret_markers;
        std::env::vars_os()
            .filter(|(name, _)| plan_core::command_inherits_env(&name.to_string_lossy(), markers))
            .collect()
    }

    /// A fresh scratch directory for one command: made by the host in the
    /// private root and held open, never a path an earlier command saw.
    fn new_scratch_dir(&self) -> Result<ScratchDir, ErrorCode> {
        let root = self.commands.scratch_root.as_ref().ok_or(ErrorCode::Internal)?;
        root.create(&uuid::Uuid::new_v4().simple().to_string())
            .map_err(|_| ErrorCode::Internal)
    }
}

/// The host's shells with their availability, and the default shell
/// (plan-core's rule over the persisted choice).
pub(crate) fn shell_catalog(shells: &[CommandShell], persisted: Option<&str>) -> (Vec<ShellInfo>, String) {
    let entries: Vec<ShellInfo> = shells
        .iter()
        .map(|shell| ShellInfo::new(shell.clone(), plan_storage::executable_exists(&shell.path)))
        .collect();
    let default = default_shell(&entries, persisted).unwrap_or_default().to_owned();
    (entries, default)
}

/// A tool call's id and input, as a decision's facts are gathered for it.
pub(crate) type CallInput = (CallId, serde_json::Value);

/// The file-writing calls of a batch (plan-core's catalog kind), with
/// their inputs.
pub(crate) fn write_calls(calls: &[ToolCall]) -> Vec<CallInput> {
    calls
        .iter()
        .filter(|call| plan_core::tool_kind(&call.name) == plan_core::ToolKind::ChangesFiles)
        .map(|call| (call.call_id.clone(), call.input.clone()))
        .collect()
}

/// The Bash calls of a batch whose event may start them (a Plan turn's own
/// batch), with their inputs.
pub(crate) fn bash_calls(calls: &[ToolCall]) -> Vec<(CallId, serde_json::Value)> {
    calls
        .iter()
        .filter(|call| call.name == plan_core::BASH)
        .map(|call| (call.call_id.clone(), call.input.clone()))
        .collect()
}
