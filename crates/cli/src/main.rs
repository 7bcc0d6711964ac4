//! `plan-checkpoint`: the terminal frontend of the plan checkpoint.
//!
//! A thin frontend: it parses arguments, calls plan-host (or, for read-only
//! inspection, plan-storage), and prints. Every decision comes from the
//! layers below; this crate decides no policy, runs no SQL and touches the
//! file system only to write to stdout and to create the demo's directory.

mod agent_host;
mod audit;
mod claude_code;
mod codex;
mod codex_driver;
mod codex_setup;
mod commands;
mod demo;
mod escape;
mod exit;
mod inspect;
mod otel;
mod progress;
mod render;
mod table;
mod terminal;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use plan_core::{ApprovalStatus, CallId, Limits, SessionId};
// Lines for people on stderr that never panic, shared with `serve`.
use plan_server::log;

/// A plan-approval checkpoint for AI coding agents: the agent plans
/// read-only and submits one plan; a person approves or rejects that exact,
/// hashed plan before a deadline. Start with `plan-checkpoint demo`.
#[derive(Debug, Parser)]
#[command(name = "plan-checkpoint", version = VERSION, after_long_help = EXIT_CODES, max_term_width = 80)]
struct Cli {
    /// The database file (or PLAN_CHECKPOINT_DB).
    ///
    /// `approvals`, `commands` and `db status` open it read-only and never
    /// migrate it, so they are safe beside a live host; `db migrate`
    /// migrates it to v10; `serve` opens it read-write (migrating it first)
    /// and holds it. `demo` and `completions` use no database: given on
    /// their command line, --db is refused (exit 2), so a demo can never
    /// run its host restarts on a real database.
    #[arg(
        long,
        global = true,
        env = "PLAN_CHECKPOINT_DB",
        hide_env_values = true,
        value_name = "PATH",
        value_hint = clap::ValueHint::FilePath,
        // Raw, so that an empty name reaches storage's refusal (exit 3)
        // like `:memory:` does, instead of a generic usage error.
        value_parser = clap::value_parser!(std::ffi::OsString)
    )]
    db: Option<std::ffi::OsString>,
    /// When to colour the output: auto (stdout is a terminal and NO_COLOR
    /// is not set), always, never.
    #[arg(long, global = true, value_name = "WHEN", default_value = "auto")]
    color: terminal::ColorChoice,
    #[command(subcommand)]
    command: Command,
}

/// `--version`: the release and the commit it was built from (`unknown`
/// for a build outside git without a recorded commit; see `build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("PLAN_CHECKPOINT_COMMIT"),
    ")"
);

/// `--db` on a command that uses no database: its own hidden argument, in
/// place of the global one (which clap then does not add), so its help does
/// not offer what it refuses; typing it is still refused (exit 2, see
/// [`db_on_command_line`]).
#[derive(Debug, clap::Args)]
struct RefusedDb {
    #[arg(long = "db", id = "db", hide = true, value_name = "PATH", value_parser = clap::value_parser!(std::ffi::OsString))]
    _db: Option<std::ffi::OsString>,
}

const EXIT_CODES: &str = "Exit codes: 0 ok, 1 verification found problems (or the operation failed, \
e.g. an unknown approval or session, or a tampered artifact), 2 usage (including an ambiguous id \
prefix), 3 database refused (none given, missing, wrong schema version, corrupt, or held by another \
host), 4 another input could not be read (`audit verify --against`'s file: missing, unreadable, or a \
line that is not OTLP/JSON; an unfinished last line of a live file is only a note).";

#[derive(Debug, Subcommand)]
enum Command {
    /// Database status and migration.
    #[command(after_long_help = EXIT_CODES)]
    Db {
        #[command(subcommand)]
        command: DbCommand,
    },
    /// Inspect, verify, diff and export plan approvals (read-only).
    #[command(after_long_help = EXIT_CODES)]
    Approvals {
        #[command(subcommand)]
        command: ApprovalsCommand,
    },
    /// Check the audit chain (read-only).
    #[command(after_long_help = EXIT_CODES)]
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// The checkpoint for Claude Code, through its hooks.
    ///
    /// `install` sets a project up; the hooks start the project's host;
    /// decide with `pending`, `approve`, `reject` or the card.
    #[command(name = "claude-code", after_long_help = EXIT_CODES)]
    ClaudeCode {
        #[command(subcommand)]
        command: claude_code::ClaudeCodeCommand,
        #[command(flatten)]
        _db: RefusedDb,
    },
    /// The checkpoint for Codex CLI, through its hooks.
    ///
    /// `install` sets a project up; the hooks start the project's host;
    /// decide with `pending`, `approve`, `reject` or the card.
    #[command(after_long_help = EXIT_CODES)]
    Codex {
        #[command(subcommand)]
        command: codex::CodexCommand,
        #[command(flatten)]
        _db: RefusedDb,
    },
    /// Inspect the audit of host-run commands (read-only).
    #[command(after_long_help = EXIT_CODES)]
    Commands {
        #[command(subcommand)]
        command: CommandsCommand,
    },
    /// Serve protocol v9 JSON-RPC on stdin/stdout (one message per line).
    ///
    /// Opens the database read-write: migrates it to v10 if needed, takes
    /// the single-host lock, and interrupts whatever a previous host left
    /// pending or running (the startup fence) before the first answer.
    #[command(after_long_help = EXIT_CODES)]
    Serve(Box<ServeArgs>),
    /// Walk through a plan's life on the real host, step by step.
    ///
    /// Creates a workspace and a database (in a new temporary directory
    /// unless --dir is given), runs a Plan turn with a denied Write and an
    /// allowed Read, SubmitPlan, an approval with accept-edits, the
    /// execution, a host restart that interrupts it (the startup fence), a
    /// rejected second plan and a refused scheduled Plan run, then prints
    /// the approvals table. The directory is kept so you can inspect it
    /// afterwards with the commands it prints.
    #[command(after_long_help = EXIT_CODES)]
    Demo {
        /// Where to put the workspace and the database: a new or empty
        /// directory (default: a new temporary directory).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Also serve the approval card (as `serve --web` does) on a free
        /// loopback port; on a terminal, print its URL while the plan is
        /// pending and go on once the plan is decided on the card (or Enter
        /// is pressed). Without a terminal on stdin no URL is printed: the
        /// demo cannot wait, so the card would stop working at once.
        #[arg(long)]
        web: bool,
        #[command(flatten)]
        refused_db: RefusedDb,
    },
    /// Print a shell completion script to stdout.
    #[command(after_long_help = EXIT_CODES)]
    Completions {
        /// The shell.
        shell: CompletionShell,
        #[command(flatten)]
        refused_db: RefusedDb,
    },
}

/// `serve`'s settings: each fills a field of the host's one
/// [`plan_host::HostConfig`], the record the FFI takes too.
#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// How long an approval stays pending, in milliseconds (1 to
    /// 604800000, seven days).
    #[arg(long, default_value_t = Limits::DEFAULT_APPROVAL_TTL_MS, allow_negative_numbers = true)]
    approval_ttl_ms: i64,
    /// The largest accepted SubmitPlan markdown, in bytes.
    #[arg(long, default_value_t = Limits::DEFAULT_MARKDOWN_LIMIT_BYTES as u64)]
    markdown_limit_bytes: u64,
    #[command(flatten)]
    commands: commands::CommandArgs,
    /// Serve approval cards (`<plan-approval-card>`) over HTTP on this
    /// loopback address, e.g. 127.0.0.1:0 (port 0 picks a free port).
    /// The base URL is printed on stderr, and each pending approval's
    /// card URL when stderr is a terminal (its token never goes into a
    /// log; a QR code for a phone only with --web-bind, since a phone
    /// cannot open loopback).
    #[arg(long, value_name = "ADDR", conflicts_with = "web_bind")]
    web: Option<String>,
    /// Like --web, on an address that is not loopback (a phone on the
    /// same network): anyone who can reach it and sees a card's URL can
    /// decide, so it prints a warning.
    #[arg(long, value_name = "ADDR")]
    web_bind: Option<String>,
    /// Run this command line (through /bin/sh -c) once each time a plan
    /// becomes pending, with the approval as JSON on its stdin (the
    /// card URL in it with --web or --web-bind), e.g.
    /// `--notify 'curl -sf -H "Title: plan pending" -d @- https://ntfy.example/mytopic'`:
    /// the URL reaches a phone without copying it from a terminal. It
    /// gets this process's environment; its output is discarded and it
    /// is killed after 30 s, so it never delays a decision.
    #[arg(long, value_name = "COMMAND")]
    notify: Option<String>,
    #[command(flatten)]
    otel: otel::OtelArgs,
    /// Read the host's settings from this JSON file instead of the flags
    /// above: the record the FFI takes (HostConfig), in camelCase, e.g.
    /// {"approvalTtlMs": 600000, "webAddress": "127.0.0.1:0"}; the --otel-*
    /// settings are its "otel" record, e.g. {"otel": {"logsEndpoint":
    /// "http://127.0.0.1:4318/v1/logs", "headers": ["x-tenant=a"]}}. Unknown
    /// fields are refused (INVALID_PARAMS), paths are taken as written, and
    /// without "sandboxHelper" this binary is the helper. The settings
    /// flags cannot be combined with it.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["approval_ttl_ms", "markdown_limit_bytes", "web", "web_bind", "notify", "CommandArgs", "OtelArgs"]
    )]
    config: Option<PathBuf>,
}

impl ServeArgs {
    /// The host's settings: the `--config` file's, or these flags'. The
    /// address checks and the range rules are
    /// [`plan_host::HostConfig::options`]'s, the same through the FFI: the
    /// flags and the file only say what was asked for.
    fn config(&self) -> Result<plan_host::HostConfig, plan_host::HostError> {
        if let Some(path) = &self.config {
            let refused = |error: String| {
                plan_host::HostError::with_detail(
                    plan_core::ErrorCode::InvalidParams,
                    format!("the settings file {}: {error}", path.display()),
                )
            };
            let text = std::fs::read_to_string(path).map_err(|error| refused(error.to_string()))?;
            let config: plan_host::HostConfig =
                serde_json::from_str(&text).map_err(|error| refused(error.to_string()))?;
            return Ok(plan_host::HostConfig {
                // The binary embeds the helper, as without a file.
                sandbox_helper: config.sandbox_helper.or_else(|| std::env::current_exe().ok()),
                ..config
            });
        }
        let config = plan_host::HostConfig {
            approval_ttl_ms: Some(self.approval_ttl_ms),
            markdown_limit_bytes: Some(self.markdown_limit_bytes),
            web_address: self.web.clone().or_else(|| self.web_bind.clone()),
            // `--web-bind` is the explicit opt-in to any address.
            web_allow_any_address: self.web.is_none() && self.web_bind.is_some(),
            notifier: self.notify.clone(),
            ..plan_host::HostConfig::default()
        };
        Ok(self.otel.config(self.commands.config(config)))
    }
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Recompute the audit chain from the database: every record's
    /// `audit.hash` from the previous one and its canonical bytes, its
    /// `audit.seq` without gaps, and every approval row against the state
    /// its chained facts give it. A changed, removed or inserted record is
    /// named by its seq, an edited approval row by its id, the column and
    /// both values (exit 1); a clean chain exits 0.
    #[command(after_long_help = EXIT_CODES)]
    Verify {
        /// Also compare with the records a collector kept: OTLP/JSON lines,
        /// one ExportLogsServiceRequest per line (an OpenTelemetry
        /// Collector's file exporter). A record changed, removed or inserted
        /// in the database after it was exported is named by its seq; so are
        /// the collector's own copies when two differ under one seq, when
        /// one's audit.hash was rewritten, or when the file ends before the
        /// database's head. Records of other databases (another
        /// plan_checkpoint.database.id) are left out. An unfinished last line
        /// (a live file) is a note; an unreadable file exits 4.
        #[arg(long, value_name = "FILE")]
        against: Option<PathBuf>,
        /// Print JSON: {records, head, collectorRecords, ok, findings:
        /// [{seq, finding, ...}], partialLastLine}.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum CommandsCommand {
    /// List recorded command runs, newest first.
    ///
    /// The table follows `approvals list`: fitted to the terminal (the
    /// command text is cut first, call ids never), states coloured, start
    /// times relative; into a pipe nothing is cut or coloured.
    #[command(after_long_help = EXIT_CODES)]
    List {
        /// Only runs of this session.
        #[arg(long, value_name = "SESSION")]
        session: Option<SessionId>,
        /// At most this many runs.
        #[arg(long, value_name = "N")]
        limit: Option<u32>,
        /// Print JSON: {commands: [...]}, each a protocol CommandRun with
        /// its audit fields.
        #[arg(long)]
        json: bool,
    },
    /// Show one run and its audit entries.
    #[command(after_long_help = EXIT_CODES)]
    Show {
        /// The Bash call id.
        call_id: CallId,
        /// The session, when the call id ran in several.
        #[arg(long, value_name = "SESSION")]
        session: Option<SessionId>,
        /// Print JSON: {entries: [...]}, the run's audit entries, oldest
        /// first, each a protocol CommandRun with its entry type.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum DbCommand {
    /// Path, schema version, approvals by status and the live rows (pending
    /// approvals, queued or running executions). Read-only. A database that
    /// needs `db migrate` (schema v8, or an empty file) is reported as such.
    #[command(after_long_help = EXIT_CODES)]
    Status {
        /// Print JSON: {path, schemaVersion, pendingMigration, total,
        /// counts, live} with live as protocol v9 PlanApproval objects.
        #[arg(long)]
        json: bool,
    },
    /// Bring the database to schema v10: migrate v8 in one transaction,
    /// create the schema in an empty file, or say it is already v10.
    ///
    /// A missing file is refused (exit 3): `db migrate` creates no
    /// database, so a mistyped path leaves nothing behind. Beside a live
    /// host the database is already v10 (the host migrated it when it
    /// opened it), so `db migrate` says there is nothing to migrate and
    /// exits 0 without writing; a database that still needs migrating is
    /// refused (exit 3, HOST_ALREADY_RUNNING) while another process holds
    /// its host lock.
    #[command(after_long_help = EXIT_CODES)]
    Migrate {
        /// Print JSON: {path, from, to, migrated} (from is 0 for an empty
        /// file).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum ApprovalsCommand {
    /// Approvals newest first, as a table sized to the terminal (the newest
    /// 20 unless --limit or --all says otherwise).
    ///
    /// On a terminal, ids are shown as the shortest prefix no other approval
    /// shares (every command accepts it back); into a pipe they are whole.
    #[command(after_long_help = EXIT_CODES)]
    List {
        /// Only this session's approvals (an unknown session is an error).
        #[arg(long, value_name = "SESSION")]
        session: Option<SessionId>,
        /// Only approvals with this status.
        #[arg(long, value_name = "STATUS", value_parser = status_parser())]
        status: Option<String>,
        /// At most this many approvals (default 20).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "all")]
        limit: Option<u32>,
        /// Every approval, streamed.
        #[arg(long)]
        all: bool,
        /// Print JSON: the protocol v9 PlanListResult, {approvals:
        /// [PlanApproval]}.
        #[arg(long)]
        json: bool,
    },
    /// Every field of one approval, legacy v8 fields included; times in
    /// local RFC 3339 with a relative time.
    ///
    /// The artifact's recorded path is relative to the session's workspace
    /// root; the human output shows the root (`workspace:`) and the joined
    /// absolute path (`artifact file:`).
    #[command(after_long_help = EXIT_CODES)]
    Show {
        /// The approval id, or a prefix of it no other approval shares.
        id: String,
        /// Print JSON: the protocol v9 PlanApproval. Its `artifact.path` is
        /// relative: the file is `<workspace root>/<artifact.path>`, with the
        /// root from the human output or the session (`session/get`).
        #[arg(long)]
        json: bool,
    },
    /// Write the artifact to stdout, after checking its size and SHA-256
    /// against the approval (refused on mismatch unless --force).
    ///
    /// Into a pipe or file it writes the exact bytes; on a terminal control
    /// and bidirectional characters are shown escaped (`\x1b`, `\u202e`)
    /// unless --raw is given.
    #[command(after_long_help = EXIT_CODES)]
    Cat {
        /// The approval id, or a prefix of it no other approval shares.
        id: String,
        /// Write the exact bytes even to a terminal (control characters
        /// in the plan reach the terminal and act on it).
        #[arg(long)]
        raw: bool,
        /// Print the bytes even when they do not match the record (a warning
        /// goes to stderr).
        #[arg(long)]
        force: bool,
        /// Print JSON: the protocol v9 PlanReadArtifactResult, {markdown,
        /// sha256, size}.
        #[arg(long)]
        json: bool,
    },
    /// Recompute size and SHA-256 of artifacts (ok, missing, mismatch,
    /// unreadable, legacy); with --session or --all, also report orphan
    /// files under each workspace's .pi/plan/ (one approval is checked
    /// alone). Prints the problems and a summary. Exit 1 when anything is
    /// wrong.
    #[command(after_long_help = EXIT_CODES)]
    #[command(group = clap::ArgGroup::new("selection").required(true).args(["id", "session", "all"]))]
    Verify {
        /// One approval (its id, or a prefix of it no other approval shares).
        id: Option<String>,
        /// Every approval of this session (an unknown session is an error).
        #[arg(long, value_name = "SESSION")]
        session: Option<SessionId>,
        /// Every approval and every workspace.
        #[arg(long)]
        all: bool,
        /// Read the plan files under this directory's .pi/plan/ instead of
        /// the workspace the database records: the check of a copied
        /// project. Only where the approvals checked record one workspace.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Print a line for every approval checked, not only the problems.
        #[arg(long, short)]
        verbose: bool,
        /// Print JSON: the plan/verify VerifyReport, streamed, so its members
        /// come as {artifacts, orphans, skippedWorkspaces, ok}.
        #[arg(long)]
        json: bool,
    },
    /// Unified diff (3 lines of context) of two approvals' artifacts, after
    /// checking both. With one id: against the previous submission of its
    /// session. With two: from the first (older) to the second (newer).
    ///
    /// On a terminal, removed lines are red, added lines green and hunk
    /// headers cyan (`--color`, NO_COLOR); into a pipe it is plain.
    #[command(after_long_help = EXIT_CODES)]
    Diff {
        /// The approval to compare (with B: the older one, compared against).
        a: String,
        /// The newer approval.
        b: Option<String>,
        /// Print JSON: the plan/diff result, {approvalId, againstApprovalId,
        /// identical, unified}.
        #[arg(long)]
        json: bool,
    },
    /// JSON Lines on stdout, one protocol v9 PlanApproval per line, newest
    /// first, for audit pipelines (streamed: the whole history is never
    /// held). Each line also carries `auditSeq` and `auditHash`: the seq
    /// and hash of the approval's latest record in the audit chain (`null`
    /// while no host has opened an upgraded database: its first host
    /// numbers the history).
    #[command(after_long_help = EXIT_CODES)]
    Export {
        /// Only this session's approvals (an unknown session is an error).
        #[arg(long, value_name = "SESSION")]
        session: Option<SessionId>,
        /// Accepted for symmetry with the other commands: export always
        /// prints JSON Lines of protocol v9 PlanApproval objects.
        #[arg(long)]
        json: bool,
    },
}

/// The shells `completions` supports.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum CompletionShell {
    /// GNU bash.
    Bash,
    /// Z shell.
    Zsh,
    /// fish.
    Fish,
}

fn status_parser() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(ApprovalStatus::ALL.iter().map(|status| status.as_str()))
}

/// A failure to report: the exit code and a message for stderr.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) exit: i32,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(exit: i32, message: impl Into<String>) -> Failure {
        Failure {
            exit,
            message: message.into(),
        }
    }
}

fn main() -> ExitCode {
    // The binary is also the command sandbox helper (hidden stages that
    // plan-exec starts), so `cargo run -p plan-checkpoint` needs no second binary.
    if plan_exec::helper::is_helper_invocation() {
        return plan_exec::helper::main();
    }
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|matches| Ok((Cli::from_arg_matches(&matches)?, db_on_command_line(&matches))));
    let (cli, db_given) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => {
            let code = if error.use_stderr() { exit::USAGE } else { exit::OK };
            let _ = error.print();
            return exit_code(code);
        }
    };
    let code = match refuse_unused_db(&cli.command, db_given).and_then(|()| run(cli)) {
        Ok(code) => code,
        Err(failure) => {
            // Messages quote ids, paths and details from rows: escaped too.
            log::line(&format!(
                "plan-checkpoint: error: {}",
                escape::block(&failure.message)
            ));
            failure.exit
        }
    };
    exit_code(code)
}

/// Whether `--db` was typed on the command line (not taken from
/// PLAN_CHECKPOINT_DB, which a shell may export for every command).
/// Typed after a subcommand counts too (`demo --db x`, where `demo`'s own
/// hidden `--db` took it).
fn db_on_command_line(matches: &clap::ArgMatches) -> bool {
    let typed = |matches: &clap::ArgMatches| {
        matches.value_source("db") == Some(clap::parser::ValueSource::CommandLine)
    };
    typed(matches)
        || matches
            .subcommand()
            .is_some_and(|(_, subcommand)| typed(subcommand))
}

/// `demo` and `completions` use no database; a `--db` typed for them is
/// refused rather than silently ignored, since someone who typed it expects
/// it to be used (and a demo must never restart hosts on a real database).
fn refuse_unused_db(command: &Command, db_given: bool) -> Result<(), Failure> {
    let (name, hint) = match command {
        Command::Demo { .. } => (
            "demo",
            ": the demo creates its own database in its directory (choose it with --dir DIR)",
        ),
        Command::Completions { .. } => ("completions", ""),
        Command::ClaudeCode { .. } => (
            "claude-code",
            ": its database is the project's, <project>/.pi/plan/plan.db (choose the project with --project DIR)",
        ),
        Command::Codex { .. } => (
            "codex",
            ": its database is the project's, <project>/.pi/plan/plan.db (choose the project with --project DIR)",
        ),
        Command::Db { .. }
        | Command::Approvals { .. }
        | Command::Audit { .. }
        | Command::Commands { .. }
        | Command::Serve(_) => {
            return Ok(());
        }
    };
    if db_given {
        return Err(Failure::new(
            exit::USAGE,
            format!("`{name}` uses no database, so --db is refused here{hint}"),
        ));
    }
    Ok(())
}

/// What a person on a system without Linux's kernel sandbox (macOS) is
/// told when a command starts a host: everything works but Plan-mode Bash,
/// which the host refuses there rather than run unconfined.
const NO_LINUX_SANDBOX: &str = "note: Plan-mode Bash needs Linux's kernel sandbox (Landlock and seccomp), \
which this system does not have: the host refuses it with PLAN_SANDBOX_UNAVAILABLE and runs nothing; \
everything else (plans, approvals, the card, the audit) works.";

/// Whether a command starts a host that would run Bash (and so deserves
/// [`NO_LINUX_SANDBOX`] off Linux).
fn starts_a_host(command: &Command) -> bool {
    match command {
        Command::Serve(_) | Command::Demo { .. } => true,
        Command::ClaudeCode { command, .. } => {
            matches!(command, claude_code::ClaudeCodeCommand::Install { .. })
        }
        Command::Codex { command, .. } => matches!(command, codex::CodexCommand::Install { .. }),
        Command::Db { .. }
        | Command::Approvals { .. }
        | Command::Audit { .. }
        | Command::Commands { .. }
        | Command::Completions { .. } => false,
    }
}

fn run(cli: Cli) -> Result<i32, Failure> {
    let database = cli.db.map(PathBuf::from);
    let database = database.as_deref();
    let term = terminal::Terminal::detect(cli.color);
    if !cfg!(target_os = "linux") && starts_a_host(&cli.command) {
        log::line(NO_LINUX_SANDBOX);
    }
    match cli.command {
        Command::Serve(args) => Ok(serve(require_db(database)?, &args)),
        Command::Commands { command } => {
            let database = require_db(database)?;
            match command {
                CommandsCommand::List { session, limit, json } => {
                    commands::list(database, &term, session, limit, json)
                }
                CommandsCommand::Show {
                    call_id,
                    session,
                    json,
                } => commands::show(database, &call_id, session, json),
            }
        }
        Command::Audit {
            command: AuditCommand::Verify { against, json },
        } => audit::verify(require_db(database)?, against.as_deref(), json),
        Command::Db { command } => match command {
            DbCommand::Status { json } => inspect::db_status(require_db(database)?, &term, json),
            DbCommand::Migrate { json } => inspect::db_migrate(require_db(database)?, json),
        },
        Command::Approvals { command } => {
            let database = require_db(database)?;
            match command {
                ApprovalsCommand::List {
                    session,
                    status,
                    limit,
                    all,
                    json,
                } => {
                    let status = status.as_deref().and_then(ApprovalStatus::parse);
                    let limit = match (all, limit) {
                        (true, _) => None,
                        (false, Some(limit)) => Some(limit),
                        (false, None) => Some(inspect::DEFAULT_LIST_LIMIT),
                    };
                    inspect::list(database, &term, session, status, limit, json)
                }
                ApprovalsCommand::Show { id, json } => inspect::show(database, &term, &id, json),
                ApprovalsCommand::Cat { id, raw, force, json } => {
                    inspect::cat(database, &id, force, raw || !term.is_terminal, json)
                }
                ApprovalsCommand::Verify {
                    id,
                    session,
                    all,
                    workspace,
                    verbose,
                    json,
                } => {
                    // clap's required group guarantees exactly one of id,
                    // --session and --all, so neither id means --all.
                    let _ = all;
                    let scope = plan_core::VerifyScope::select(id.map(Into::into), session)
                        .map_err(|code| Failure::new(exit::USAGE, code.message()))?;
                    inspect::verify(database, &term, scope, workspace.as_deref(), verbose, json)
                }
                ApprovalsCommand::Diff { a, b, json } => match b {
                    Some(newer) => inspect::diff(database, &term, &newer, Some(&a), json),
                    None => inspect::diff(database, &term, &a, None, json),
                },
                ApprovalsCommand::Export { session, json: _ } => inspect::export(database, session),
            }
        }
        Command::Demo { dir, web, .. } => demo::run(dir.as_deref(), &term, web),
        Command::ClaudeCode { command, .. } => claude_code::run(command),
        Command::Codex { command, .. } => codex::run(command),
        Command::Completions { shell: choice, .. } => {
            let shell = match choice {
                CompletionShell::Bash => clap_complete::Shell::Bash,
                CompletionShell::Zsh => clap_complete::Shell::Zsh,
                CompletionShell::Fish => clap_complete::Shell::Fish,
            };
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), BIN_NAME, &mut script);
            render::write_stdout(&completion_script(choice, script))?;
            Ok(exit::OK)
        }
    }
}

/// The installed name of the binary, which completion scripts register.
const BIN_NAME: &str = "plan-checkpoint";

/// The generated script, repaired where the generator gets a hyphenated
/// binary name wrong.
///
/// clap_complete's bash generator names the state of `plan-checkpoint
/// approvals` `plan__checkpoint__subcmd__approvals` while it sets it, but
/// spells the `case` label that reads it `plan__subcmd__checkpoint__...`
/// (it turns the hyphen into its subcommand separator there only), so no
/// level below the first ever completes. Spelling the labels the way they
/// are set makes every level reachable; the tests source the script in bash
/// and complete a subcommand and a flag, so a generator that fixes this
/// itself (or breaks it differently) is noticed.
fn completion_script(shell: CompletionShell, script: Vec<u8>) -> Vec<u8> {
    match shell {
        CompletionShell::Bash => {
            let text = String::from_utf8_lossy(&script);
            let set = BIN_NAME.replace('-', "__");
            let misread = BIN_NAME.replace('-', "__subcmd__");
            text.replace(&misread, &set).into_bytes()
        }
        CompletionShell::Zsh | CompletionShell::Fish => script,
    }
}

fn require_db(database: Option<&Path>) -> Result<&Path, Failure> {
    database.ok_or_else(|| {
        Failure::new(
            exit::DATABASE_REFUSED,
            "no database given: pass --db PATH or set PLAN_CHECKPOINT_DB",
        )
    })
}

/// `serve`: the host's settings become host options through the one
/// conversion (plan-core's range rules refuse what is out of range) and
/// `plan-server`'s stdio transport does the rest; its outcome becomes an
/// exit code.
fn serve(database: &Path, args: &ServeArgs) -> i32 {
    // A value the rules refuse is a usage error, told on stderr and to a
    // JSON-RPC client alike.
    let options = match args.config().and_then(|config| config.options()) {
        Ok(options) => plan_host::HostOptions {
            frontend: plan_host::DecisionChannel::Rpc,
            export_observer: Some(otel::stderr_observer("plan-checkpoint serve")),
            ..options
        },
        Err(error) => {
            plan_server::refuse_start(&error);
            return exit::USAGE;
        }
    };
    match plan_server::serve_stdio(database, options) {
        Ok(()) => exit::OK,
        Err(plan_server::ServeError::Open(_)) => exit::DATABASE_REFUSED,
        Err(plan_server::ServeError::Web(_)) => exit::USAGE,
        Err(error @ plan_server::ServeError::Writer(_)) => {
            log::line(&format!("plan-checkpoint serve: {error}"));
            exit::FAILURE
        }
    }
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, NO_LINUX_SANDBOX, starts_a_host};

    /// Off Linux (macOS), the commands that start a host say that Plan-mode
    /// Bash needs Linux's sandbox; inspection says nothing.
    #[test]
    fn the_commands_that_start_a_host_say_plan_bash_needs_linux() {
        assert!(NO_LINUX_SANDBOX.contains("Plan-mode Bash needs Linux's kernel sandbox"));
        assert!(NO_LINUX_SANDBOX.contains("PLAN_SANDBOX_UNAVAILABLE"));
        let starts = |args: &[&str]| {
            let cli = Cli::try_parse_from(std::iter::once("plan-checkpoint").chain(args.iter().copied()))
                .unwrap_or_else(|error| panic!("{error}"));
            starts_a_host(&cli.command)
        };
        assert!(starts(&["demo"]));
        assert!(starts(&["--db", "x.db", "serve"]));
        assert!(starts(&["claude-code", "install"]));
        assert!(!starts(&["--db", "x.db", "approvals", "list"]));
        assert!(!starts(&["claude-code", "pending"]));
    }
}
