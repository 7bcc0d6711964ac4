//! `plan-checkpoint`: the terminal frontend of the plan checkpoint.
//!
//! A thin frontend: it parses arguments, calls plan-host (or, for read-only
//! inspection, plan-storage), and prints. Every decision comes from the
//! layers below; this crate decides no policy, runs no SQL and touches the
//! file system only to write to stdout and to create the demo's directory.

mod commands;
mod demo;
mod exit;
mod inspect;
mod render;
mod serve;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use plan_core::{ApprovalStatus, Limits};

/// Inspect, verify and serve plan approvals (ADR 0053 plan checkpoint).
#[derive(Debug, Parser)]
#[command(name = "plan-checkpoint", version, about, after_help = EXIT_CODES)]
struct Cli {
    /// The database file. Inspection opens it read-only and never migrates
    /// it, so it is safe beside a live host. Not used by `demo` and
    /// `completions`.
    #[arg(
        long,
        global = true,
        env = "PLAN_CHECKPOINT_DB",
        hide_env_values = true,
        value_name = "PATH"
    )]
    db: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

const EXIT_CODES: &str = "Exit codes: 0 ok, 1 verification found problems (or the operation failed, \
e.g. an unknown id or a tampered artifact), 2 usage, 3 database refused (none given, missing, wrong \
schema version, corrupt, or held by another host).";

#[derive(Debug, Subcommand)]
enum Command {
    /// Database status and migration.
    #[command(after_help = EXIT_CODES)]
    Db {
        #[command(subcommand)]
        command: DbCommand,
    },
    /// Inspect, verify, diff and export plan approvals (read-only).
    #[command(after_help = EXIT_CODES)]
    Approvals {
        #[command(subcommand)]
        command: ApprovalsCommand,
    },
    /// Inspect the audit of host-run commands (read-only).
    #[command(after_help = EXIT_CODES)]
    Commands {
        #[command(subcommand)]
        command: CommandsCommand,
    },
    /// Serve protocol v9 JSON-RPC on stdin/stdout (one message per line).
    #[command(after_help = EXIT_CODES)]
    Serve {
        /// How long an approval stays pending, in milliseconds.
        #[arg(long, default_value_t = Limits::DEFAULT_APPROVAL_TTL_MS, value_parser = clap::value_parser!(i64).range(1..))]
        approval_ttl_ms: i64,
        /// The largest accepted SubmitPlan markdown, in bytes.
        #[arg(long, default_value_t = Limits::DEFAULT_MARKDOWN_LIMIT_BYTES)]
        markdown_limit_bytes: usize,
        #[command(flatten)]
        commands: serve::CommandArgs,
    },
    /// Drive the real host through the ADR 0053 story and print each step.
    ///
    /// Creates a workspace and a database (in a new temporary directory
    /// unless --dir is given), runs a Plan turn with a denied Write and an
    /// allowed Read, SubmitPlan, an approval with accept-edits, the
    /// execution, a host restart that interrupts it, a rejected second plan
    /// and a refused scheduled Plan run, then prints the approvals table.
    /// The directory is kept so you can inspect it afterwards.
    #[command(after_help = EXIT_CODES)]
    Demo {
        /// Where to put the workspace and the database: a new or empty
        /// directory (default: a new temporary directory).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Print a shell completion script to stdout.
    #[command(after_help = EXIT_CODES)]
    Completions {
        /// The shell.
        shell: CompletionShell,
    },
}

#[derive(Debug, Subcommand)]
enum CommandsCommand {
    /// List recorded command runs, newest first.
    #[command(after_help = EXIT_CODES)]
    List {
        /// Only runs of this session.
        #[arg(long, value_name = "SESSION")]
        session: Option<String>,
        /// At most this many runs.
        #[arg(long, value_name = "N")]
        limit: Option<u32>,
        #[command(flatten)]
        output: Output,
    },
    /// Show one run and its audit entries.
    #[command(after_help = EXIT_CODES)]
    Show {
        /// The Bash call id.
        call_id: String,
        /// The session, when the call id ran in several.
        #[arg(long, value_name = "SESSION")]
        session: Option<String>,
        #[command(flatten)]
        output: Output,
    },
}

#[derive(Debug, Subcommand)]
enum DbCommand {
    /// Path, schema version, approvals by status and the live rows (pending
    /// approvals, queued or running executions). Read-only.
    #[command(after_help = EXIT_CODES)]
    Status {
        #[command(flatten)]
        output: Output,
    },
    /// Migrate a schema v8 database to v10 (or report that it is already
    /// v10). Refused while a host holds the database.
    #[command(after_help = EXIT_CODES)]
    Migrate {
        #[command(flatten)]
        output: Output,
    },
}

#[derive(Debug, Subcommand)]
enum ApprovalsCommand {
    /// Approvals newest first, as a table that fits 80 columns (two lines
    /// per approval).
    #[command(after_help = EXIT_CODES)]
    List {
        /// Only this session's approvals.
        #[arg(long, value_name = "SESSION")]
        session: Option<String>,
        /// Only approvals with this status.
        #[arg(long, value_name = "STATUS", value_parser = status_parser())]
        status: Option<String>,
        /// At most this many approvals.
        #[arg(long, value_name = "N")]
        limit: Option<u32>,
        #[command(flatten)]
        output: Output,
    },
    /// Every field of one approval, legacy v8 fields included; times in
    /// local RFC 3339 with a relative time.
    #[command(after_help = EXIT_CODES)]
    Show {
        /// The approval id.
        id: String,
        #[command(flatten)]
        output: Output,
    },
    /// Write the artifact's exact bytes to stdout, after checking its size
    /// and SHA-256 against the approval (refused on mismatch unless --force).
    #[command(after_help = EXIT_CODES)]
    Cat {
        /// The approval id.
        id: String,
        /// Print the bytes even when they do not match the record (a warning
        /// goes to stderr).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        output: Output,
    },
    /// Recompute size and SHA-256 of artifacts (ok, missing, mismatch,
    /// unreadable, legacy); with --session or --all, also report orphan
    /// files under each workspace's .pi/plan/ (one approval is checked
    /// alone). Exit 1 when anything is wrong.
    #[command(after_help = EXIT_CODES)]
    #[command(group = clap::ArgGroup::new("selection").required(true).args(["id", "session", "all"]))]
    Verify {
        /// One approval.
        id: Option<String>,
        /// Every approval of this session.
        #[arg(long, value_name = "SESSION")]
        session: Option<String>,
        /// Every approval and every workspace.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        output: Output,
    },
    /// Unified diff (3 lines of context) of two approvals' artifacts, after
    /// checking both. With one id: against the previous submission of its
    /// session. With two: from the first (older) to the second (newer).
    #[command(after_help = EXIT_CODES)]
    Diff {
        /// The approval to compare (with B: the older one, compared against).
        a: String,
        /// The newer approval id.
        b: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// JSON Lines on stdout, one protocol v9 PlanApproval per line, newest
    /// first, for audit pipelines.
    #[command(after_help = EXIT_CODES)]
    Export {
        /// Only this session's approvals.
        #[arg(long, value_name = "SESSION")]
        session: Option<String>,
        #[command(flatten)]
        output: Output,
    },
}

/// The output format flag every inspection command has.
#[derive(Debug, Clone, Copy, Args)]
struct Output {
    /// Print JSON: protocol v9 PlanApproval objects, the wire's field names.
    #[arg(long)]
    json: bool,
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
    // plan-exec starts), so `cargo run -p plan-cli` needs no second binary.
    if plan_exec::helper::is_helper_invocation() {
        return plan_exec::helper::main();
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let code = if error.use_stderr() { exit::USAGE } else { exit::OK };
            let _ = error.print();
            return exit_code(code);
        }
    };
    let code = match run(cli) {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("plan-checkpoint: error: {}", failure.message);
            failure.exit
        }
    };
    exit_code(code)
}

fn run(cli: Cli) -> Result<i32, Failure> {
    let database = cli.db.as_deref();
    match cli.command {
        Command::Serve {
            approval_ttl_ms,
            markdown_limit_bytes,
            commands,
        } => Ok(serve::run(
            require_db(database)?,
            &serve::ServeOptions {
                approval_ttl_ms,
                markdown_limit_bytes,
                commands,
            },
        )),
        Command::Commands { command } => {
            let database = require_db(database)?;
            match command {
                CommandsCommand::List {
                    session,
                    limit,
                    output,
                } => commands::list(database, session, limit, output.json),
                CommandsCommand::Show {
                    call_id,
                    session,
                    output,
                } => commands::show(database, &call_id, session, output.json),
            }
        }
        Command::Db { command } => match command {
            DbCommand::Status { output } => inspect::db_status(require_db(database)?, output.json),
            DbCommand::Migrate { output } => inspect::db_migrate(require_db(database)?, output.json),
        },
        Command::Approvals { command } => {
            let database = require_db(database)?;
            match command {
                ApprovalsCommand::List {
                    session,
                    status,
                    limit,
                    output,
                } => {
                    let status = status.as_deref().and_then(ApprovalStatus::parse);
                    inspect::list(database, session, status, limit, output.json)
                }
                ApprovalsCommand::Show { id, output } => inspect::show(database, &id, output.json),
                ApprovalsCommand::Cat { id, force, output } => {
                    inspect::cat(database, &id, force, output.json)
                }
                ApprovalsCommand::Verify {
                    id,
                    session,
                    all,
                    output,
                } => {
                    // clap's required group guarantees exactly one of id,
                    // --session and --all, so neither id means --all.
                    let _ = all;
                    let scope = plan_core::VerifyScope::select(id, session)
                        .map_err(|code| Failure::new(exit::USAGE, code.message()))?;
                    inspect::verify(database, &scope, output.json)
                }
                ApprovalsCommand::Diff { a, b, output } => match b {
                    Some(newer) => inspect::diff(database, &newer, Some(&a), output.json),
                    None => inspect::diff(database, &a, None, output.json),
                },
                ApprovalsCommand::Export { session, output: _ } => inspect::export(database, session),
            }
        }
        Command::Demo { dir } => demo::run(dir.as_deref()),
        Command::Completions { shell } => {
            let shell = match shell {
                CompletionShell::Bash => clap_complete::Shell::Bash,
                CompletionShell::Zsh => clap_complete::Shell::Zsh,
                CompletionShell::Fish => clap_complete::Shell::Fish,
            };
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "plan-checkpoint", &mut script);
            render::write_stdout(&script)?;
            Ok(exit::OK)
        }
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

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
