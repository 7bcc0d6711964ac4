//! Host-run commands in the CLI: the `serve` options that configure them
//! and the read-only `commands list|show` inspection of their audit.
//!
//! It maps arguments to the host's settings and storage reads and renders the
//! answers; which command may run and how is decided below. Command text and
//! output are agent-written and untrusted: human output escapes control and
//! bidi characters.

use std::path::{Path, PathBuf};

use clap::Args;
use plan_core::{
    CallId, CommandLimits, CommandRun, ErrorCode, ResourceBounds, SessionId, ToolAuditEntry, ToolAuditKind,
    UnixMs,
};
use plan_host::{CommandEntry, CommandEntryKind, CommandFilter, CommandRecord, HostConfig, ScratchSize};
use serde::Serialize;

use crate::table::{Cell, Column, Table};
use crate::terminal::{Terminal, command_state_style};
use crate::{Failure, escape, exit, inspect, render};

/// `serve` options for host-run commands.
#[derive(Debug, Clone, Args)]
pub(crate) struct CommandArgs {
    /// The command sandbox helper. Default: this binary, which embeds it.
    #[arg(long, value_name = "PATH")]
    sandbox_helper: Option<PathBuf>,
    /// The timeout of a command whose input names none, in milliseconds.
    ///
    /// At most --command-max-timeout-ms. [default: 120000, or the maximum
    /// when that is smaller]
    #[arg(long, value_name = "COMMAND_TIMEOUT_MS")]
    command_timeout_ms: Option<u64>,
    /// The largest timeout a command may ask for, in milliseconds.
    #[arg(long, default_value_t = CommandLimits::DEFAULT_MAX_TIMEOUT_MS)]
    command_max_timeout_ms: u64,
    /// Output kept and streamed per command (both streams), in bytes.
    #[arg(long, default_value_t = plan_exec::DEFAULT_OUTPUT_CAP)]
    command_output_cap: u64,
    /// How many commands of one session may run at once.
    #[arg(long, default_value_t = CommandLimits::DEFAULT_MAX_RUNNING_PER_SESSION as u64)]
    max_running_commands: u64,
    /// Let Agent commands use the network (off by default; every Agent
    /// command, `auto` or confirmed, gets the same sandbox).
    #[arg(long)]
    network_in_auto: bool,
    /// Where the kernel sandbox is unavailable, run Agent commands (`auto`
    /// ones, and confirmed ones under ask and accept-edits) unconfined
    /// instead of refusing them with SANDBOX_UNAVAILABLE (off by default;
    /// Plan commands never run unconfined).
    /// The same opt-out where the sandbox works without its namespaces: Agent
    /// commands then run workspace-write under Landlock and seccomp only,
    /// without the protected paths.
    #[arg(long)]
    auto_without_sandbox: bool,
    /// Where each command's scratch directory is made: a private directory
    /// (0700) of this user, outside every workspace, reached without a
    /// symlink; a root that is not is refused and no command runs. Default:
    /// one per database under $XDG_RUNTIME_DIR or the temporary directory.
    #[arg(long, value_name = "DIR")]
    scratch_root: Option<PathBuf>,
    /// A command does not inherit variables whose names contain this
    /// (case-insensitive; repeat the option for several). Given at least
    /// once, it replaces the default KEY, SECRET, TOKEN and PASSWORD.
    #[arg(long, value_name = "TEXT")]
    secret_env_marker: Vec<String>,
    /// Do not enter the sandbox's namespaces even where the kernel allows
    /// them, as on a kernel without them: Plan Bash still runs, the
    /// database and terminals are no longer hidden from it, and Agent
    /// commands are refused unless --auto-without-sandbox.
    #[arg(long)]
    skip_namespaces: bool,
    /// Another path kept read-only under Agent `auto`, besides `.git`,
    /// `.pi`, every agent's configuration, the database and the helper;
    /// reserved (made an empty directory) where it does not exist yet, so
    /// no command creates it (repeatable).
    #[arg(long = "protect", value_name = "PATH")]
    protected_paths: Vec<PathBuf>,
    /// How much a command's scratch directory ($TMPDIR) may hold, in MB
    /// (MiB), from 1 to 1048576: inside the sandbox's namespaces it is a
    /// private tmpfs (memory) of this size. Without namespaces it is an
    /// ordinary directory of the scratch root and not capped.
    #[arg(long, value_name = "MB", default_value_t = ScratchSize::DEFAULT_MEGABYTES)]
    scratch_size_mb: u64,
    /// How much memory one sandboxed command may use, everything it starts
    /// and its scratch directory included, in MB (MiB), from 64 to 1048576.
    /// Kept by a cgroup of the command's own where the machine gives one
    /// (`initialize` lists `memory` in `capabilities.commands.bounds`, or
    /// says why not in `missingBounds`).
    #[arg(long, value_name = "MB", default_value_t = ResourceBounds::DEFAULT_MEMORY_MB)]
    command_memory_mb: u64,
}

impl CommandArgs {
    /// `config` with these command settings (their ranges are checked
    /// where every frontend's are, by [`HostConfig::options`]).
    pub(crate) fn config(&self, config: HostConfig) -> HostConfig {
        // A relative path given here is the person's own choice, taken
        // from where they ran the command; the host itself never resolves
        // one against its working directory.
        let absolute = |path: &PathBuf| std::path::absolute(path).unwrap_or_else(|_| path.clone());
        HostConfig {
            // The default helper is this binary, which embeds it.
            sandbox_helper: Some(
                self.sandbox_helper
                    .as_deref()
                    .and_then(|helper| std::path::absolute(helper).ok())
                    .or_else(|| std::env::current_exe().ok())
                    .unwrap_or_default(),
            ),
            scratch_root: self.scratch_root.as_ref().map(absolute),
            scratch_size_mb: Some(self.scratch_size_mb),
            command_memory_mb: Some(self.command_memory_mb),
            command_timeout_ms: self.command_timeout_ms,
            command_max_timeout_ms: Some(self.command_max_timeout_ms),
            command_output_cap: Some(self.command_output_cap),
            max_running_commands: Some(self.max_running_commands),
            network_in_auto: self.network_in_auto,
            auto_without_sandbox: self.auto_without_sandbox,
            skip_namespaces: self.skip_namespaces,
            protected_paths: self.protected_paths.clone(),
            // Given at least once, the markers replace the default ones.
            secret_env_markers: (!self.secret_env_marker.is_empty()).then(|| self.secret_env_marker.clone()),
            ..config
        }
    }
}

/// `commands list`: recorded runs, newest first.
pub(crate) fn list(
    database: &Path,
    term: &Terminal,
    session: Option<SessionId>,
    limit: Option<u32>,
    json: bool,
) -> Result<i32, Failure> {
    let store = inspect::open(database)?;
    let filter = CommandFilter {
        session_id: session,
        limit,
    };
    let records = store
        .list_commands(&filter)
        .map_err(|error| inspect::failure(&error))?;
    if json {
        let text = render::json_pretty(&ListJson {
            commands: records.iter().map(RecordJson::from).collect(),
        })?;
        render::write_stdout(text.as_bytes())?;
    } else {
        table(&records, term)?;
    }
    Ok(exit::OK)
}

/// `commands show`: one run's audit entries, oldest first.
pub(crate) fn show(
    database: &Path,
    call_id: &CallId,
    session: Option<SessionId>,
    json: bool,
) -> Result<i32, Failure> {
    let store = inspect::open(database)?;
    let filter = CommandFilter {
        session_id: session,
        limit: None,
    };
    let sessions: Vec<String> = store
        .list_commands(&filter)
        .map_err(|error| inspect::failure(&error))?
        .into_iter()
        .filter(|record| &record.run.call_id == call_id)
        .map(|record| record.run.session_id.into_string())
        .fold(Vec::new(), |mut sessions, session| {
            if !sessions.contains(&session) {
                sessions.push(session);
            }
            sessions
        });
    let session_id = match sessions.as_slice() {
        [] => {
            return Err(Failure::new(
                exit::FAILURE,
                format!(
                    "{}: command {call_id}",
                    ErrorCode::CommandNotFound.message_with_code()
                ),
            ));
        }
        [session] => session.clone(),
        [_, _, ..] => {
            return Err(Failure::new(
                exit::USAGE,
                format!(
                    "call id {call_id} ran in several sessions ({}); pass --session",
                    sessions.join(", ")
                ),
            ));
        }
    };
    let entries = store
        .command_entries(&session_id, call_id)
        .map_err(|error| inspect::failure(&error))?;
    let decisions = store
        .tool_entries(&SessionId::from(session_id.as_str()), call_id)
        .map_err(|error| inspect::failure(&error))?;
    let text = if json {
        render::json_pretty(&ShowJson {
            entries: entries.iter().map(EntryJson::from).collect(),
            decisions,
        })?
    } else {
        card(&entries, &decisions)
    };
    render::write_stdout(text.as_bytes())?;
    Ok(exit::OK)
}

trait CodeMessage {
    fn message_with_code(self) -> String;
}

impl CodeMessage for ErrorCode {
    fn message_with_code(self) -> String {
        format!("{}: {}", self.as_str(), self.sentence())
    }
}

#[derive(Serialize)]
struct ListJson {
    commands: Vec<RecordJson>,
}

/// One run in `--json`: the protocol's `CommandRun`, the type of its latest
/// audit entry and the output hash.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RecordJson {
    entry: &'static str,
    output_sha256: Option<String>,
    command: CommandRun,
}

impl From<&CommandRecord> for RecordJson {
    fn from(record: &CommandRecord) -> Self {
        RecordJson {
            entry: record.kind.as_str(),
            output_sha256: record.output_sha256.clone(),
            command: record.run.clone(),
        }
    }
}

#[derive(Serialize)]
struct ShowJson {
    entries: Vec<EntryJson>,
    /// The call's tool-permission entries: whether and when a person
    /// confirmed it, or the mode allowed it.
    decisions: Vec<ToolAuditEntry>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EntryJson {
    #[serde(rename = "type")]
    kind: &'static str,
    seq: i64,
    output_sha256: Option<String>,
    command: CommandRun,
}

impl From<&CommandEntry> for EntryJson {
    fn from(entry: &CommandEntry) -> Self {
        EntryJson {
            kind: entry.kind.as_str(),
            seq: entry.seq,
            output_sha256: entry.output_sha256.clone(),
            command: entry.run.clone(),
        }
    }
}

fn outcome(run: &CommandRun) -> String {
    match (run.exit_code, run.signal, run.error_code) {
        (_, _, Some(code)) => code.as_str().to_owned(),
        (Some(exit_code), _, None) => format!("exit {exit_code}"),
        (None, Some(signal), None) => format!("signal {signal}"),
        (None, None, None) => "-".to_owned(),
    }
}

/// The columns of a commands table, in the approvals table's conventions
/// (the shared [`Table`]): the call id is never cut, the command text gives
/// way first, and on a narrow terminal the sandbox, then the start time,
/// then the outcome are dropped. Into a pipe nothing is cut.
fn columns() -> Vec<Column> {
    vec![
        Column::new("STARTED", 2),
        Column::whole("CALL"),
        Column::new("SANDBOX", 3),
        Column::new("STATE", 0),
        Column::new("OUTCOME", 1),
        Column::flexible("COMMAND"),
    ]
}

/// One run as a table row; times relative to `now`, like approvals.
fn row(record: &CommandRecord, now: UnixMs) -> Vec<Cell> {
    let run = &record.run;
    let refused = record.kind == CommandEntryKind::Refused;
    let state = match record.kind {
        CommandEntryKind::Refused => "refused",
        CommandEntryKind::Started | CommandEntryKind::Ended => run.state.as_str(),
    };
    vec![
        Cell::plain(render::relative(run.started_at, now)),
        Cell::plain(run.call_id.clone()),
        Cell::plain(run.sandbox.as_str()),
        Cell::styled(state, command_state_style(run.state, refused)),
        Cell::plain(outcome(run)),
        Cell::plain(run.command.clone()),
    ]
}

/// Writes `records` as a table for `term` (or says there are none).
pub(crate) fn table(records: &[CommandRecord], term: &Terminal) -> Result<(), Failure> {
    if records.is_empty() {
        return render::write_stdout(b"no commands recorded\n");
    }
    let now = render::now_ms();
    let mut table = Table::new(columns(), *term);
    for record in records {
        table.push(row(record, now))?;
    }
    table.finish()
}

/// Whether and when a person confirmed the call, from its tool-permission
/// entries (`-` for a Plan command, which no permission mode decides).
fn confirmation(decisions: &[ToolAuditEntry]) -> String {
    // Entries are oldest first, and an answer follows its request: the last
    // one says where the call stands.
    decisions.last().map_or_else(
        || "-".to_owned(),
        |entry| {
            let at = render::local_rfc3339(entry.at);
            let mode = entry.permission_mode.map_or("-", |mode| mode.as_str());
            match entry.kind {
                ToolAuditKind::ConfirmRequested => format!("asked under {mode} at {at}, never answered"),
                ToolAuditKind::Confirmed => format!("confirmed by a person at {at}"),
                ToolAuditKind::Declined => format!(
                    "declined ({}) at {at}",
                    entry.error_code.map_or("-", ErrorCode::as_str)
                ),
                ToolAuditKind::AutoAllowed => format!("not asked: allowed by {mode} at {at}"),
            }
        },
    )
}

fn card(entries: &[CommandEntry], decisions: &[ToolAuditEntry]) -> String {
    // The run as it last stood; a refused second start does not hide it.
    let latest = entries
        .iter()
        .rev()
        .find(|entry| entry.kind != CommandEntryKind::Refused)
        .or(entries.last());
    let Some(last) = latest else {
        return String::new();
    };
    let run = &last.run;
    let mut text = String::new();
    let mut line = |label: &str, value: String| text.push_str(&format!("{label:<10} {value}\n"));
    line("call", escape::line(run.call_id.as_str()).into_owned());
    line("session", escape::line(run.session_id.as_str()).into_owned());
    line("turn", escape::line(run.turn_id.as_str()).into_owned());
    line("command", escape::line(&run.command).into_owned());
    line("cwd", escape::line(&run.cwd).into_owned());
    line(
        "shell",
        format!(
            "{} ({})",
            escape::line(&run.shell.id),
            escape::line(&run.shell.path)
        ),
    );
    line(
        "sandbox",
        format!(
            "{}{}",
            run.sandbox.as_str(),
            if run.network { ", network" } else { ", no network" }
        ),
    );
    line("confirmed", confirmation(decisions));
    line("state", run.state.as_str().to_owned());
    line("outcome", outcome(run));
    line(
        "output",
        format!(
            "{} bytes stdout, {} bytes stderr{}",
            run.stdout_bytes,
            run.stderr_bytes,
            if run.truncated { " (truncated)" } else { "" }
        ),
    );
    if let Some(hash) = &last.output_sha256 {
        line("sha256", hash.clone());
    }
    line("started", render::local_rfc3339(run.started_at));
    if let Some(ended_at) = run.ended_at {
        line("ended", render::local_rfc3339(ended_at));
    }
    text.push_str("entries:\n");
    for entry in entries {
        text.push_str(&format!(
            "  #{:<5} {:<15} {}\n",
            entry.seq,
            entry.kind.as_str(),
            entry.run.state.as_str()
        ));
    }
    text
}
