//! The host side every agent's hooks share: where a project's host lives
//! (its database, its socket, its pid and log files), starting it on
//! demand, and a protocol v9 client over its socket.
//!
//! An agent's hooks are short-lived processes; the host is the one
//! long-lived process holding the project's database (the same database,
//! lock and audit as every other frontend). A hook reaches it through a
//! Unix socket in the user's private per-user directory, which commands
//! never reach (`sandbox.md` P11). This module decides nothing: every
//! answer is the host's; an agent's adapter (`claude_code`) maps its hook
//! events onto these calls and back.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use plan_exec::ScratchRoot;
use serde_json::{Value, json};

/// How long a started host may take to answer on its socket.
const HOST_START: Duration = Duration::from_secs(20);

/// Where a project's host and its files live.
#[derive(Debug, Clone)]
pub(crate) struct Project {
    /// The project's directory (the workspace of its sessions).
    pub(crate) root: PathBuf,
    /// `<root>/.pi/plan/plan.db`, the database every frontend shares.
    pub(crate) database: PathBuf,
    /// The host's socket, in the per-user private directory.
    pub(crate) socket: PathBuf,
    /// The host's pid, beside the socket.
    pub(crate) pid_file: PathBuf,
    /// The host's log (it never holds a card URL), beside the socket.
    pub(crate) log: PathBuf,
}

impl Project {
    /// The project at `root` (made absolute, symlinks resolved where it
    /// exists).
    pub(crate) fn at(root: &Path) -> Project {
        let root = std::fs::canonicalize(root)
            .unwrap_or_else(|_| std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf()));
        let database = root.join(".pi").join("plan").join("plan.db");
        // The per-user directory of hosts (0700, hidden from commands),
        // named after the database like its scratch root.
        let scratch = ScratchRoot::default_for(&database);
        let name = scratch
            .file_name()
            .map_or_else(|| "host".to_owned(), |name| name.to_string_lossy().into_owned());
        let directory = scratch
            .parent()
            .map_or_else(|| scratch.clone(), Path::to_path_buf);
        Project {
            socket: directory.join(format!("{name}.sock")),
            pid_file: directory.join(format!("{name}.pid")),
            log: directory.join(format!("{name}.log")),
            root,
            database,
        }
    }
}

/// A protocol error the host answered, or why it could not be reached.
#[derive(Debug, Clone)]
pub(crate) struct HostFailure {
    /// The canonical code (`HOST_UNREACHABLE` when there was no answer).
    pub(crate) code: String,
    /// The host's sentence.
    pub(crate) message: String,
}

impl HostFailure {
    fn unreachable(message: impl Into<String>) -> HostFailure {
        HostFailure {
            code: "HOST_UNREACHABLE".to_owned(),
            message: message.into(),
        }
    }

    /// `CODE: sentence`, as a model or a person reads it.
    pub(crate) fn text(&self) -> String {
        format!("{}: {}", self.code, self.message)
    }
}

/// A connection to a project's host.
pub(crate) struct HostClient {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
    /// Notifications read while waiting for a response.
    notifications: VecDeque<Value>,
    /// What `initialize` answered.
    initialized: Value,
}

impl HostClient {
    /// Connects to the project's host, starting it first when none answers
    /// (`program args` is the command that runs it, in this environment with
    /// `environment` applied, see `plan_exec::start_service`), and
    /// initializes.
    pub(crate) fn connect_or_start(
        project: &Project,
        program: &Path,
        args: &[std::ffi::OsString],
        environment: &[(std::ffi::OsString, Option<std::ffi::OsString>)],
        client_name: &str,
    ) -> Result<HostClient, HostFailure> {
        let stream = match UnixStream::connect(&project.socket) {
            Ok(stream) => stream,
            Err(_) => {
                if let Some(directory) = project.log.parent() {
                    let _ = ScratchRoot::open(directory);
                }
                let pid =
                    plan_exec::start_service(program, args, environment, &project.log).map_err(|error| {
                        HostFailure::unreachable(format!("the host could not be started: {error}"))
                    })?;
                wait_for_socket(project, pid)?
            }
        };
        HostClient::initialize(stream, client_name)
    }

    /// Connects to a host that must already run.
    pub(crate) fn connect(project: &Project, client_name: &str) -> Result<HostClient, HostFailure> {
        let stream = UnixStream::connect(&project.socket).map_err(|error| {
            HostFailure::unreachable(format!(
                "no host runs for {} ({error}); it starts with the agent's first hook",
                project.root.display()
            ))
        })?;
        HostClient::initialize(stream, client_name)
    }

    fn initialize(stream: UnixStream, client_name: &str) -> Result<HostClient, HostFailure> {
        let writer = stream
            .try_clone()
            .map_err(|error| HostFailure::unreachable(error.to_string()))?;
        let mut client = HostClient {
            reader: BufReader::new(stream),
            writer,
            next_id: 0,
            notifications: VecDeque::new(),
            initialized: Value::Null,
        };
        client.initialized = client.call(
            "initialize",
            json!({"protocolVersion": plan_protocol::PROTOCOL_VERSION, "clientName": client_name}),
        )?;
        Ok(client)
    }

    /// The card server's base URL `initialize` reported, when the host
    /// serves the card.
    pub(crate) fn card_server(&self) -> Option<&str> {
        self.initialized
            .pointer("/capabilities/web/url")
            .and_then(Value::as_str)
    }

    /// One typed request of the protocol's method list and its typed result.
    pub(crate) fn request<P: plan_protocol::RequestParams>(
        &mut self,
        params: &P,
    ) -> Result<P::Result, HostFailure> {
        let params = serde_json::to_value(params).map_err(|error| HostFailure {
            code: "INTERNAL".to_owned(),
            message: format!("{} params: {error}", P::METHOD),
        })?;
        let result = self.call(P::METHOD, params)?;
        serde_json::from_value(result).map_err(|error| HostFailure {
            code: "INTERNAL".to_owned(),
            message: format!(
                "the host's answer to {} is not the protocol's: {error}",
                P::METHOD
            ),
        })
    }

    /// One request and its result.
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Result<Value, HostFailure> {
        self.next_id += 1;
        let id = self.next_id;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut line = request.to_string();
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .map_err(|error| HostFailure::unreachable(format!("the host went away: {error}")))?;
        loop {
            let message = self.read_message(None)?;
            if message.get("method").is_some() {
                self.notifications.push_back(message);
                continue;
            }
            if message.get("id").and_then(Value::as_u64) != Some(id) {
                continue;
            }
            if let Some(error) = message.get("error") {
                return Err(failure_of(error));
            }
            return Ok(message.get("result").cloned().unwrap_or(Value::Null));
        }
    }

    /// The next notification, waiting at most `limit` (`None`: as long as
    /// it takes); `Ok(None)` when none came in time.
    pub(crate) fn next_notification(
        &mut self,
        limit: Option<Duration>,
    ) -> Result<Option<Value>, HostFailure> {
        if let Some(queued) = self.notifications.pop_front() {
            return Ok(Some(queued));
        }
        match self.read_message(limit) {
            Ok(message) => Ok(Some(message)),
            Err(failure) if failure.code == "TIMED_OUT" => Ok(None),
            Err(failure) => Err(failure),
        }
    }

    fn read_message(&mut self, limit: Option<Duration>) -> Result<Value, HostFailure> {
        let _ = self.reader.get_ref().set_read_timeout(limit);
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => Err(HostFailure::unreachable("the host closed the connection")),
            Ok(_) => serde_json::from_str(&line)
                .map_err(|error| HostFailure::unreachable(format!("the host sent no JSON: {error}"))),
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Err(HostFailure {
                    code: "TIMED_OUT".to_owned(),
                    message: String::new(),
                })
            }
            Err(error) => Err(HostFailure::unreachable(format!(
                "reading from the host: {error}"
            ))),
        }
    }
}

fn failure_of(error: &Value) -> HostFailure {
    let code = error
        .pointer("/data/code")
        .and_then(Value::as_str)
        .unwrap_or("INTERNAL")
        .to_owned();
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the host refused")
        .to_owned();
    HostFailure { code, message }
}

/// Waits until a host answers on the project's socket: the one started
/// (`pid`), or another one that won the race to start. A started host that
/// ends first is reported with the last line of its log.
pub(crate) fn wait_for_socket(project: &Project, pid: u32) -> Result<UnixStream, HostFailure> {
    let started = Instant::now();
    // What the log held before this host could write to it.
    let logged_before = std::fs::metadata(&project.log).map_or(0, |meta| meta.len());
    loop {
        if let Ok(stream) = UnixStream::connect(&project.socket) {
            return Ok(stream);
        }
        if has_ended(pid) {
            let log = std::fs::read(&project.log).unwrap_or_default();
            let since =
                usize::try_from(logged_before).map_or(&log[..0], |from| log.get(from..).unwrap_or(&log));
            let since = String::from_utf8_lossy(since);
            // Another hook started the project's host at the same moment
            // and won its database: that host's socket comes.
            let another_runs = since.contains(plan_core::ErrorCode::HostAlreadyRunning.as_str());
            if !another_runs {
                if let Ok(stream) = UnixStream::connect(&project.socket) {
                    return Ok(stream);
                }
                let log = String::from_utf8_lossy(&log);
                let last = log.lines().last().unwrap_or("no reason logged");
                return Err(HostFailure::unreachable(format!(
                    "the host could not start: {last}"
                )));
            }
        }
        if started.elapsed() > HOST_START {
            return Err(HostFailure::unreachable(format!(
                "the host did not answer on {} within {} s",
                project.socket.display(),
                HOST_START.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether our child `pid` has ended (it stays a zombie until this process
/// ends, since nothing here waits for it).
fn has_ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which ends with the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

/// The agent whose hook this process is (Claude Code, which ran the hook's
/// command, directly or through a shell): a hook that holds a call watches
/// it, so a hook whose agent was killed ends instead of waiting on, and
/// what it held can be withdrawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AgentProcess {
    pid: u32,
    /// Its start time (clock ticks after boot), so a reused pid is told apart.
    started: u64,
}

/// Shells that run a hook's command line on the agent's behalf.
const SHELLS: [&str; 6] = ["sh", "bash", "dash", "zsh", "ash", "ksh"];

impl AgentProcess {
    /// The agent that ran this process: its parent, or the parent's parent
    /// when the parent is the shell that ran the hook's command line.
    pub(crate) fn of_this_hook() -> Option<AgentProcess> {
        let parent = std::os::unix::process::parent_id();
        let comm = std::fs::read_to_string(format!("/proc/{parent}/comm")).ok()?;
        let pid = if SHELLS.contains(&comm.trim()) {
            stat_fields(parent)?.get(1)?.parse().ok()?
        } else {
            parent
        };
        let started = stat_fields(pid)?.get(19)?.parse().ok()?;
        Some(AgentProcess { pid, started })
    }

    /// A variable of the environment the agent was started with
    /// (`/proc/<pid>/environ`, fixed when it started): what the person
    /// gave the agent, never what the agent adds to its hooks' environment
    /// afterwards (Claude Code adds the `env` of a project's settings,
    /// which the project's files can set). `None` when it is not set, not
    /// UTF-8, or the agent is gone.
    pub(crate) fn started_with(&self, name: &str) -> Option<String> {
        let environ = std::fs::read(format!("/proc/{}/environ", self.pid)).ok()?;
        if !self.is_alive() {
            return None;
        }
        environ.split(|byte| *byte == 0).find_map(|entry| {
            let value = entry.strip_prefix(name.as_bytes())?.strip_prefix(b"=")?;
            String::from_utf8(value.to_vec()).ok()
        })
    }

    /// Every variable of the environment the agent was started with whose
    /// name `wanted` picks (see [`AgentProcess::started_with`]); empty when
    /// the agent is gone.
    pub(crate) fn started_with_all(&self, wanted: impl Fn(&str) -> bool) -> Vec<(String, String)> {
        let Ok(environ) = std::fs::read(format!("/proc/{}/environ", self.pid)) else {
            return Vec::new();
        };
        if !self.is_alive() {
            return Vec::new();
        }
        environ
            .split(|byte| *byte == 0)
            .filter_map(|entry| {
                let entry = std::str::from_utf8(entry).ok()?;
                let (name, value) = entry.split_once('=')?;
                wanted(name).then(|| (name.to_owned(), value.to_owned()))
            })
            .collect()
    }

    /// Whether it still runs (not ended, not a zombie, not another process
    /// under its pid).
    pub(crate) fn is_alive(&self) -> bool {
        stat_fields(self.pid).is_some_and(|fields| {
            let state_ok = fields
                .first()
                .is_some_and(|state| !matches!(state.as_str(), "Z" | "X"));
            let same = fields.get(19).and_then(|start| start.parse::<u64>().ok()) == Some(self.started);
            state_ok && same
        })
    }
}

/// The fields of `/proc/<pid>/stat` after the command name (state first).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}
