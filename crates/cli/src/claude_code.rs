//! `plan-checkpoint claude-code`: Claude Code's hooks mapped onto the
//! project's host (`claude-code.md`). A thin mapping: Claude Code's hook
//! events become the host's calls ([`crate::agent_host`]) and the host's
//! answers become hook answers (`hook_io`); every rule (what Plan allows,
//! what a permission mode allows and where a tool may write, the sandbox,
//! the plan's bytes and hash, the deadline, the decision) is the host's.
//! What the adapter knows of Claude Code is one table of its tools
//! (`tools`), taken from the pinned version's tool list.
//!
//! - Bash, in every phase, runs on the host: `PreToolUse` rewrites the
//!   command into `claude-code bash` (the original in a quoted
//!   here-document), which asks the host to run it (read-only in plan
//!   mode, workspace-write after an approval) and streams its output and
//!   exit status; `PermissionRequest` allows exactly such a command. No
//!   other tool runs a program: the host refuses those that would
//!   (`TOOL_RUNS_OUTSIDE_HOST`), a skill declaring hooks is refused, and a
//!   skill's `!` commands never run in Claude Code's own shell.
//! - Every other call is the host's decision under its own name; where
//!   Claude Code guards a call itself, a host's `allow` is no answer, and a
//!   tool the table does not know is asked, never plainly allowed.
//! - `ExitPlanMode`: a SubmitPlan of the plan's exact bytes; the hook holds
//!   the call until a person decides (status line, card, `claude-code
//!   approve`/`reject`), the deadline passes, Claude Code ends (the plan is
//!   withdrawn) or the hook must answer before Claude Code would end it
//!   (the plan is still pending, and the model is told how to go on), so
//!   Claude Code's own dialog never decides. Approved, the plan Claude Code
//!   proceeds with is the artifact's bytes (hash checked) and its mode
//!   follows the chosen permission mode; the execution starts once the
//!   exit ran and ends `completed` at Claude Code's `Stop`, `SessionEnd`
//!   or next plan.
//!
//! It must not decide policy, and must never let a command run outside the
//! host's sandbox: anything it cannot do is a deny, and every hook a call
//! waits on fails closed (`setup`).

mod hook_io;
mod setup;
mod tools;

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use plan_core::{ApprovalStatus, ExecutionState, Mode, PermissionMode, PlanApproval};
use plan_protocol::{
    ExecutionCompleteParams, ExecutionStartParams, PlanCardUrlParams, PlanGetParams, PlanWithdrawParams,
    Session, SessionConfigureParams, SessionCreateParams, SessionGetParams, ToolConfirmParams,
    TurnCancelParams, TurnCompleteParams, TurnStartParams,
};
use serde_json::{Value, json};

use self::hook_io::{Decision, HookInput, deny, permission_allow, permission_deny, pre_tool_use};
use self::tools::{Carry, carry_of};
use crate::agent_host::{AgentProcess, HostClient, HostFailure, Project};
use crate::exit;
use crate::{Failure, log};

/// The client name the host logs.
const CLIENT: &str = "plan-checkpoint claude-code";

/// The question every Claude Code plan asks the person.
const QUESTION: &str = "Approve this plan for Claude Code to carry out, and in which permission mode?";

/// The prompt of the Plan turn a Claude Code session's plan-mode calls run
/// in (Claude Code's prompt itself is not given to hooks).
const PLAN_TURN_PROMPT: &str = "Claude Code plan mode";

/// The prompt of an Agent turn the hooks start (outside an approved
/// plan's execution).
const AGENT_TURN_PROMPT: &str = "Claude Code";

/// The longest hook input read (Claude Code's input holds one tool call;
/// a plan is bounded by the host's markdown limit, far below this).
const MAX_HOOK_INPUT: u64 = 64 * 1024 * 1024;

/// How long past the plan's deadline the holding hook may still run.
const HOLD_MARGIN_SECONDS: u64 = 300;

/// What `claude-code` does.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ClaudeCodeCommand {
    /// Set Claude Code up for this checkpoint in a project: writes its
    /// hooks, `useAutoModeDuringPlan: false`, `disableSkillShellExecution:
    /// true` and a status line into the project's
    /// `.claude/settings.local.json` (merged with what is there) and says
    /// what it wrote and why.
    Install {
        /// The project (default: the current directory); it must exist.
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
    },
    /// Remove exactly what `install` wrote (the database and plans stay).
    Uninstall {
        /// The project (default: the current directory).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
    },
    /// Check the setup: the binary the hooks run, the hooks, the settings
    /// Claude Code honours, the sandbox, the host and its socket. Exits 1
    /// when a check fails.
    Doctor {
        /// The project (default: the current directory).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
        /// JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Answer one Claude Code hook (its JSON on stdin, the answer on
    /// stdout). Claude Code runs this; `install` sets it up.
    Hook {
        /// The project the hooks were installed in (its one host, wherever
        /// Claude Code runs); default: `CLAUDE_PROJECT_DIR`, else the
        /// hook's working directory.
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
        /// The seconds Claude Code gives this hook: a held call is answered
        /// before they run out.
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<u64>,
    },
    /// The status line on the project's plan for the session Claude Code
    /// names on stdin (a plan waiting for the person: its title and
    /// deadline, and the command that decides it).
    Status {
        /// The project.
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
    },
    /// Run a Bash call through the host's sandbox (the command on stdin),
    /// streaming its output; exits as it exited. The hook rewrites Bash
    /// calls into this.
    Bash {
        /// The host session.
        #[arg(long)]
        session: String,
        /// The tool call's id.
        #[arg(long)]
        call: String,
        /// The project.
        #[arg(long, value_name = "DIR")]
        project: PathBuf,
        /// The working directory the call was decided for.
        #[arg(long, value_name = "DIR")]
        cwd: String,
        /// The command's time limit, in milliseconds.
        #[arg(long)]
        timeout_ms: Option<u64>,
        /// An Agent-phase call the host already decided (run it in the
        /// workspace-write sandbox); without it, a plan-mode call.
        #[arg(long)]
        agent: bool,
        /// The host asked a person to confirm it: this run, which Claude
        /// Code starts only once they accepted, confirms it first.
        #[arg(long, requires = "agent")]
        needs_confirmation: bool,
    },
    /// The project's host: holds its database, serves the hooks on a
    /// private socket and the approval card (on loopback, or on
    /// `--web-bind`). The hooks start it; it ends after 15 minutes without
    /// a client.
    Host {
        /// The project.
        #[arg(long, value_name = "DIR")]
        project: PathBuf,
        /// Serve the card on this address instead of loopback (the hooks
        /// pass `PLAN_CHECKPOINT_WEB_BIND` of the environment the person
        /// started Claude Code with).
        #[arg(long, value_name = "ADDR")]
        web_bind: Option<String>,
    },
    /// List the project's pending plans (id, title, deadline, fingerprint).
    Pending {
        /// The project (default: the current directory).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
        /// JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Approve a pending plan in a permission mode.
    Approve {
        /// The approval id, or a prefix of it only it has.
        approval_id: String,
        /// `ask`, `accept-edits` or `auto`.
        #[arg(long, value_name = "MODE")]
        mode: String,
        /// The project (default: the current directory).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
    },
    /// Reject a pending plan.
    Reject {
        /// The approval id, or a prefix of it only it has.
        approval_id: String,
        /// The project (default: the current directory).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
    },
    /// Print a pending plan's approval card URL (its token is yours: keep
    /// it out of logs), and on a terminal a QR code when the card is served
    /// beyond loopback.
    CardUrl {
        /// The approval id, or a prefix of it only it has.
        approval_id: String,
        /// The project (default: the current directory).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
    },
}

/// Runs one `claude-code` command.
pub(crate) fn run(command: ClaudeCodeCommand) -> Result<i32, Failure> {
    match command {
        ClaudeCodeCommand::Install { project } => {
            setup::install(&setup::existing_project(&project_dir(project)?)?)
        }
        ClaudeCodeCommand::Uninstall { project } => {
            setup::uninstall(&setup::existing_project(&project_dir(project)?)?)
        }
        ClaudeCodeCommand::Doctor { project, json } => {
            setup::doctor(&setup::existing_project(&project_dir(project)?)?, json)
        }
        ClaudeCodeCommand::Hook { project, timeout } => Ok(hook(project, timeout)),
        ClaudeCodeCommand::Status { project } => status(&Project::at(&project_dir(project)?)),
        ClaudeCodeCommand::Bash {
            session,
            call,
            project,
            cwd,
            timeout_ms,
            agent,
            needs_confirmation,
        } => {
            let phase = match (agent, needs_confirmation) {
                (false, _) => Phase::Plan,
                (true, false) => Phase::Agent { confirm: false },
                (true, true) => Phase::Agent { confirm: true },
            };
            let call = BashCall {
                session_id: &session,
                call_id: &call,
                cwd: &cwd,
                timeout_ms,
                phase,
            };
            Ok(bash(&Project::at(&project), &call))
        }
        ClaudeCodeCommand::Host { project, web_bind } => host(&Project::at(&project), web_bind),
        ClaudeCodeCommand::Pending { project, json } => pending(&Project::at(&project_dir(project)?), json),
        ClaudeCodeCommand::Approve {
            approval_id,
            mode,
            project,
        } => {
            let mode = PermissionMode::parse(&mode).ok_or_else(|| {
                Failure::new(
                    exit::USAGE,
                    format!("--mode {mode:?}: expected ask, accept-edits or auto"),
                )
            })?;
            decide(&Project::at(&project_dir(project)?), &approval_id, Some(mode))
        }
        ClaudeCodeCommand::Reject { approval_id, project } => {
            decide(&Project::at(&project_dir(project)?), &approval_id, None)
        }
        ClaudeCodeCommand::CardUrl { approval_id, project } => {
            card_url(&Project::at(&project_dir(project)?), &approval_id)
        }
    }
}

fn project_dir(project: Option<PathBuf>) -> Result<PathBuf, Failure> {
    match project {
        Some(project) => Ok(project),
        None => std::env::current_dir()
            .map_err(|error| Failure::new(exit::USAGE, format!("the current directory: {error}"))),
    }
}

fn refused(failure: HostFailure) -> Failure {
    Failure::new(exit::FAILURE, failure.text())
}

fn connect(project: &Project) -> Result<HostClient, Failure> {
    HostClient::connect(project, CLIENT).map_err(refused)
}

/// This very binary, by its absolute path.
fn this_program() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("plan-checkpoint"))
}

/// `'<path>'`: a path quoted for `sh`.
fn shell_quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

/// The start of every rewritten Bash command.
fn bash_prefix() -> String {
    format!("{} claude-code bash ", shell_quoted(&this_program()))
}

/// The start of every rewritten plan-mode Bash command of `project`: the
/// only commands Claude Code's plan mode may run without asking its
/// permission question (`install` writes that rule), since the host runs
/// them in its read-only sandbox.
fn plan_bash_prefix(project: &Project) -> String {
    format!("{}--project {}", bash_prefix(), shell_quoted(&project.root))
}

/// A setting the person gave Claude Code in the environment they started
/// it with (`PLAN_CHECKPOINT_NOTIFY`, `PLAN_CHECKPOINT_WEB_BIND`), read from
/// the Claude Code process that ran this hook; never from the hook's own
/// environment, to which Claude Code adds the `env` of the project's
/// settings (a workspace's files could otherwise choose the command that
/// runs for each plan, or where the card is served). `None` when unset or
/// when no agent process is found.
fn persons_setting(name: &str) -> Option<String> {
    AgentProcess::of_this_hook()?
        .started_with(name)
        .filter(|value| !value.trim().is_empty())
}

/// The approval deadline the project's host uses: `PLAN_CHECKPOINT_APPROVAL_TTL_MS`
/// when set to a number, else plan-core's default.
fn approval_ttl_ms() -> i64 {
    std::env::var("PLAN_CHECKPOINT_APPROVAL_TTL_MS")
        .ok()
        .and_then(|value| value.parse::<i64>().ok())
        .unwrap_or(plan_core::Limits::DEFAULT_APPROVAL_TTL_MS)
}

// --------------------------------------------------------------------- hook

/// Answers one hook: never fails as a process (a failure is a deny the
/// model reads, or no opinion where nothing is at stake).
fn hook(project: Option<PathBuf>, timeout: Option<u64>) -> i32 {
    let started = Instant::now();
    let mut text = String::new();
    if std::io::stdin()
        .take(MAX_HOOK_INPUT)
        .read_to_string(&mut text)
        .is_err()
    {
        return exit::OK;
    }
    let Ok(input) = serde_json::from_str::<HookInput>(&text) else {
        return exit::OK;
    };
    // The hook answers a little before Claude Code would end it.
    let answer_by =
        timeout.map(|seconds| started + Duration::from_secs(seconds).saturating_sub(hold_margin(seconds)));
    if let Some(answer) = answer(&input, project, answer_by).filter(|answer| !answer.is_null()) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{answer}").and_then(|()| out.flush());
    }
    exit::OK
}

/// How long before Claude Code's end of a hook it answers: a tenth of its
/// time, between one and ten seconds.
fn hold_margin(seconds: u64) -> Duration {
    Duration::from_millis((seconds * 100).clamp(1_000, 10_000))
}

/// What one hook input asks, as far as this mapping is concerned.
struct HookCall<'a> {
    /// Claude Code's working directory, where its Bash runs.
    cwd: &'a str,
    event: &'a str,
    tool: &'a str,
    input: &'a Value,
    call_id: &'a str,
    plan_mode: bool,
    /// The project the hooks were installed in.
    project: Project,
    session_id: String,
    /// When a held call must be answered (`None`: no limit known).
    answer_by: Option<Instant>,
}

/// The project a hook serves: the one `install` named, else Claude Code's
/// project directory, else its working directory. A named project that is
/// gone cannot be served (`None`).
fn hook_project(named: Option<PathBuf>, cwd: &str) -> Option<Project> {
    match named {
        Some(named) => named.is_dir().then(|| Project::at(&named)),
        None => {
            let root = std::env::var_os("CLAUDE_PROJECT_DIR")
                .map(PathBuf::from)
                .filter(|root| root.is_dir())
                .unwrap_or_else(|| PathBuf::from(cwd));
            Some(Project::at(&root))
        }
    }
}

fn answer(input: &HookInput, named: Option<PathBuf>, answer_by: Option<Instant>) -> Option<Value> {
    let null = Value::Null;
    let call = HookCall {
        cwd: &input.cwd,
        event: &input.hook_event_name,
        tool: input.tool_name.as_deref().unwrap_or_default(),
        input: input.tool_input.as_ref().unwrap_or(&null),
        call_id: input.tool_use_id.as_deref().unwrap_or_default(),
        plan_mode: input.permission_mode.as_deref() == Some("plan"),
        project: match hook_project(named.clone(), &input.cwd) {
            Some(project) => project,
            None => return project_gone(input, named),
        },
        session_id: format!("claude-code-{}", input.session_id),
        answer_by,
    };
    match call.event {
        "PreToolUse" => Some(pre_tool(&call)),
        "PermissionRequest" => permission_request(&call),
        "PostToolUse" => {
            post_tool(&call);
            None
        }
        "PreSkillShellCommand" => Some(hook_io::skill_shell_deny(format!(
            "plan-checkpoint: a skill's shell command runs only through the host; run it with the Bash tool: {}",
            call.input
                .get("command")
                .and_then(Value::as_str)
                .unwrap_or_default()
        ))),
        "Stop" => {
            finish_execution(&call, false);
            None
        }
        "SessionEnd" => {
            finish_execution(&call, true);
            None
        }
        _ => None,
    }
}

/// The answer of a hook whose installed project is gone: the call is
/// refused (nothing here can decide it), where a call waits on it.
fn project_gone(input: &HookInput, named: Option<PathBuf>) -> Option<Value> {
    let reason = format!(
        "HOST_UNREACHABLE: the project the checkpoint was installed in ({}) is not there; run `plan-checkpoint claude-code install` in the project",
        named.unwrap_or_default().display()
    );
    match input.hook_event_name.as_str() {
        "PreToolUse" => Some(deny(&reason)),
        "PermissionRequest" => Some(permission_deny(reason)),
        "PreSkillShellCommand" => Some(hook_io::skill_shell_deny(reason)),
        _ => None,
    }
}

/// The host, started when none runs (serving the card where the person
/// asked, `PLAN_CHECKPOINT_WEB_BIND` of the environment they started Claude
/// Code with).
fn host_for(project: &Project) -> Result<HostClient, HostFailure> {
    let mut args: Vec<OsString> = vec![
        "claude-code".into(),
        "host".into(),
        "--project".into(),
        project.root.clone().into_os_string(),
    ];
    if let Some(address) = persons_setting("PLAN_CHECKPOINT_WEB_BIND") {
        args.extend(["--web-bind".into(), address.into()]);
    }
    HostClient::connect_or_start(
        project,
        &this_program(),
        &args,
        &persons_export_environment(),
        CLIENT,
    )
}

/// Names outside `OTEL_*` that decide where the host's audit goes (the
/// per-user file `crate::otel::agent_export_file` finds).
const EXPORT_LOCATING: [&str; 3] = ["PLAN_CHECKPOINT_AUDIT_EXPORT_FILE", "XDG_CONFIG_HOME", "HOME"];

/// The environment of the audit export for the host a hook starts: every
/// `OTEL_*` variable and every name of [`EXPORT_LOCATING`] as the person
/// started Claude Code with them, the hook's own removed (Claude Code adds
/// a project's settings `env` to its hooks' environment: a repository
/// could otherwise send its users' audit elsewhere, or turn it off).
fn persons_export_environment() -> Vec<(OsString, Option<OsString>)> {
    let concerns_export = |name: &str| name.starts_with("OTEL_") || EXPORT_LOCATING.contains(&name);
    let mut environment: Vec<(OsString, Option<OsString>)> = std::env::vars_os()
        .filter(|(name, _)| name.to_str().is_none_or(concerns_export))
        .map(|(name, _)| (name, None))
        .collect();
    if let Some(agent) = AgentProcess::of_this_hook() {
        environment.extend(
            agent
                .started_with_all(concerns_export)
                .into_iter()
                .map(|(name, value)| (name.into(), Some(value.into()))),
        );
    }
    environment
}

/// `PreToolUse`: the plan exit, Bash run by the host, or the host's
/// decision on the call.
fn pre_tool(call: &HookCall<'_>) -> Value {
    match carry_of(call.tool) {
        Some(Carry::PlanExit) => exit_plan(call),
        Some(Carry::HostShell) if call.plan_mode => plan_bash(call),
        Some(Carry::HostShell) => agent_bash(call),
        carry if call.plan_mode => plan_tool(call, carry),
        carry => agent_tool(call, carry),
    }
}

/// `PermissionRequest`: the plan exit's, and the rewritten Bash's; every
/// other question stays with Claude Code's dialog.
fn permission_request(call: &HookCall<'_>) -> Option<Value> {
    match carry_of(call.tool) {
        Some(Carry::PlanExit) => Some(exit_plan_permission(call)),
        Some(Carry::HostShell) => bash_permission(call),
        Some(Carry::Host | Carry::HostThenClaudeCode | Carry::Skill) | None => None,
    }
}

/// `PostToolUse`: the plan exit ran (the approved plan's execution
/// starts), or a call the host wanted confirmed ran (the person accepted
/// it in Claude Code's dialog; host-run Bash confirms itself as it starts).
fn post_tool(call: &HookCall<'_>) {
    match carry_of(call.tool) {
        Some(Carry::PlanExit) => start_execution(call),
        Some(Carry::HostShell) => {}
        Some(Carry::Host | Carry::HostThenClaudeCode | Carry::Skill) | None if !call.plan_mode => {
            record_confirmation(call);
        }
        Some(Carry::Host | Carry::HostThenClaudeCode | Carry::Skill) | None => {}
    }
}

/// The session's active Plan turn, making the session (bound to the
/// project, in Plan) and the turn where missing. A turn of the phase
/// before ends first: an Agent prompt turn completes; the approved plan's
/// execution completes when it was carried out (the next plan is its end)
/// and is cancelled when its plan exit never ran.
fn plan_turn(client: &mut HostClient, project: &Project, session_id: &str) -> Result<String, HostFailure> {
    let mut session = session_of(client, project, session_id, Mode::Plan)?;
    if let Some(turn) = session.active_turn.clone() {
        if turn.mode == Mode::Plan {
            return Ok(turn.turn_id);
        }
        match live_execution(client, &session)? {
            Some((execution, ExecutionState::Running)) => {
                client.request(&ExecutionCompleteParams {
                    execution_id: execution,
                })?;
            }
            Some((_, ExecutionState::Queued)) => {
                client.request(&TurnCancelParams {
                    session_id: session_id.into(),
                })?;
            }
            Some((_, ExecutionState::Completed | ExecutionState::Interrupted)) | None => {
                client.request(&TurnCompleteParams {
                    session_id: session_id.into(),
                    turn_id: turn.turn_id.as_str().into(),
                })?;
            }
        }
        session = session_get(client, session_id)?;
    }
    start_turn(client, &session, Mode::Plan, PLAN_TURN_PROMPT)
}

/// The session as the host reports it.
fn session_get(client: &mut HostClient, session_id: &str) -> Result<Session, HostFailure> {
    client.request(&SessionGetParams {
        session_id: session_id.into(),
    })
}

/// The session's live execution (id and state): the execution its latest
/// approval queued, while the session holds it.
fn live_execution(
    client: &mut HostClient,
    session: &Session,
) -> Result<Option<(plan_core::ExecutionId, ExecutionState)>, HostFailure> {
    let Some(execution) = session.active_execution_id.as_deref() else {
        return Ok(None);
    };
    let latest = latest_approval(client, &session.session_id)?;
    Ok(latest
        .filter(|approval| {
            approval
                .execution_id
                .as_ref()
                .is_some_and(|id| id.as_str() == execution)
        })
        .and_then(|approval| approval.execution_state)
        .map(|state| (execution.into(), state)))
}

/// The session, made (bound to the project, in `mode`) where missing; a
/// hook of a call Claude Code runs beside this one may make it first.
fn session_of(
    client: &mut HostClient,
    project: &Project,
    session_id: &str,
    mode: Mode,
) -> Result<Session, HostFailure> {
    match session_get(client, session_id) {
        Ok(session) => Ok(session),
        Err(failure) if failure.code == "SESSION_NOT_FOUND" => {
            let made = client.request(&SessionCreateParams {
                session_id: Some(session_id.into()),
                workspace_root: Some(project.root.display().to_string()),
                mode: Some(mode),
                permission_mode: None,
            });
            match made {
                Err(failure) if failure.code == "SESSION_ALREADY_EXISTS" => session_get(client, session_id),
                made => made,
            }
        }
        Err(failure) => Err(failure),
    }
}

/// A new turn in `mode` (the session switched to it first where needed);
/// when a hook of a call Claude Code runs beside this one started that
/// turn first, that turn.
fn start_turn(
    client: &mut HostClient,
    session: &Session,
    mode: Mode,
    prompt: &str,
) -> Result<String, HostFailure> {
    if session.mode != mode {
        let configured = client.request(&SessionConfigureParams {
            session_id: session.session_id.as_str().into(),
            mode: Some(mode),
            ..SessionConfigureParams::default()
        });
        match configured {
            // Busy: a turn started meanwhile (looked at below).
            Err(failure) if failure.code == "SESSION_BUSY" => {}
            configured => {
                configured?;
            }
        }
    }
    let started = client.request(&TurnStartParams {
        session_id: session.session_id.as_str().into(),
        prompt: prompt.to_owned(),
        origin: plan_core::Origin::Interactive,
        mode: None,
    });
    match started {
        Ok(turn) => Ok(turn.turn_id),
        Err(failure) if failure.code == "SESSION_BUSY" => session_get(client, &session.session_id)?
            .active_turn
            .filter(|turn| turn.mode == mode)
            .map(|turn| turn.turn_id)
            .ok_or(failure),
        Err(failure) => Err(failure),
    }
}

/// One tool call decided by the host in the session's turn (`turn`).
fn decide_in(
    client: &mut HostClient,
    call: &HookCall<'_>,
    turn: &str,
    name: &str,
    input: Value,
) -> Result<Value, HostFailure> {
    let results = client.call(
        "turn/toolCalls",
        json!({
            "sessionId": call.session_id,
            "turnId": turn,
            "calls": [{"callId": call.call_id, "name": name, "input": input}],
        }),
    )?;
    results.pointer("/results/0").cloned().ok_or_else(|| HostFailure {
        code: "INTERNAL".into(),
        message: "turn/toolCalls gave no result".into(),
    })
}

/// The host's refusal in a tool call result, as `CODE: sentence`.
fn refusal_of(result: &Value) -> Option<String> {
    if result.get("decision").and_then(Value::as_str) != Some("deny") {
        return None;
    }
    let code = result
        .pointer("/error/code")
        .and_then(Value::as_str)
        .unwrap_or("DENIED");
    let message = result
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("the host denied this call");
    Some(format!("{code}: {message}"))
}

/// A plan-mode call other than Bash and the exit: the host's Plan table
/// decides (a deny carries its code and sentence); what it allows is left
/// to Claude Code's plan mode, which never lets it write.
fn plan_tool(call: &HookCall<'_>, carry: Option<Carry>) -> Value {
    if drafts_the_plan_file(call) {
        return no_decision();
    }
    if let Some(reason) = skill_refusal(call, carry) {
        return deny(&reason);
    }
    let decided = host_for(&call.project).and_then(|mut client| {
        let turn = plan_turn(&mut client, &call.project, &call.session_id)?;
        decide_in(&mut client, call, &turn, call.tool, call.input.clone())
    });
    match decided {
        Ok(result) => refusal_of(&result).map_or_else(no_decision, |reason| deny(&reason)),
        Err(failure) => deny(&failure.text()),
    }
}

/// No opinion: Claude Code's own checks decide.
fn no_decision() -> Value {
    Value::Null
}

/// Whether the call writes Claude Code's own plan file (its plan drafting,
/// under its configuration directory, outside every workspace).
fn drafts_the_plan_file(call: &HookCall<'_>) -> bool {
    let Some(path) = call.input.get("file_path").and_then(Value::as_str) else {
        return false;
    };
    let Some(plans) = claude_configuration().map(|directory| directory.join("plans")) else {
        return false;
    };
    let path = Path::new(path);
    path.parent() == Some(plans.as_path())
        && path.extension().is_some_and(|extension| extension == "md")
        && !path
            .components()
            .any(|part| part == std::path::Component::ParentDir)
}

/// Claude Code's configuration directory (`CLAUDE_CONFIG_DIR`, else
/// `~/.claude`).
fn claude_configuration() -> Option<PathBuf> {
    std::env::var_os("CLAUDE_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".claude")))
}

/// Why a Skill call is refused: its definition declares hooks, which
/// Claude Code would run in its own shell for the rest of the session.
fn skill_refusal(call: &HookCall<'_>, carry: Option<Carry>) -> Option<String> {
    if carry != Some(Carry::Skill) {
        return None;
    }
    let name = call.input.get("skill").and_then(Value::as_str)?;
    let definition = skill_definition(&call.project, call.cwd, name)?;
    declares_hooks(&definition).then(|| {
        format!(
            "TOOL_RUNS_OUTSIDE_HOST: the skill {name} declares hooks, which Claude Code would run in its own shell, \
             outside the host's sandbox and audit ({}); {}",
            definition.display(),
            plan_core::ErrorCode::ToolRunsOutsideHost.message()
        )
    })
}

/// The file that defines the skill `name` where Claude Code finds skills
/// and commands: the project's `.claude/` (from Claude Code's working
/// directory up to the project) and the user's configuration directory.
fn skill_definition(project: &Project, cwd: &str, name: &str) -> Option<PathBuf> {
    let name = name.trim().trim_start_matches('/');
    if name.is_empty() || name.contains("..") || name.contains('\0') {
        return None;
    }
    let mut roots: Vec<PathBuf> = Path::new(cwd)
        .ancestors()
        .take_while(|directory| directory.starts_with(&project.root))
        .map(|directory| directory.join(".claude"))
        .collect();
    roots.push(project.root.join(".claude"));
    roots.extend(claude_configuration());
    let relative = name.replace(':', "/");
    roots.iter().find_map(|root| {
        [
            root.join("skills").join(&relative).join("SKILL.md"),
            root.join("commands").join(format!("{relative}.md")),
        ]
        .into_iter()
        .find(|file| file.is_file())
    })
}

/// Whether a skill or command file's front matter declares `hooks`.
fn declares_hooks(definition: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(definition) else {
        // Unreadable: nobody can say it declares none.
        return true;
    };
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return false;
    }
    lines
        .take_while(|line| line.trim_end() != "---")
        .any(|line| line.trim_start().starts_with("hooks:") || line.trim_start().starts_with("\"hooks\":"))
}

/// A plan-mode Bash call: rewritten into the host's client at once; the
/// client asks the host, which decides it in the Plan turn and runs it in
/// the read-only sandbox (or refuses it with its code: no sandbox, no
/// host), so no plan-mode Bash runs anywhere else.
fn plan_bash(call: &HookCall<'_>) -> Value {
    if call.input.get("command").and_then(Value::as_str).is_none() {
        return deny("INVALID_COMMAND_INPUT: the Bash call has no command");
    }
    pre_tool_use(
        Some(Decision::Allow),
        Some("plan mode: the command runs in plan-checkpoint's read-only sandbox"),
        Some(rewritten_bash(call, Phase::Plan)),
    )
}

/// The call's input with its command replaced by this binary's `bash`
/// client, the original command in a quoted here-document (taken as it
/// is: no expansion), so it runs through the host.
fn rewritten_bash(call: &HookCall<'_>, phase: Phase) -> Value {
    let command = call
        .input
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let delimiter = here_document_delimiter(command);
    // The phase's flags come first: a plan-mode command starts exactly
    // with the prefix `install` lets Claude Code's plan mode run unasked
    // ([`plan_bash_prefix`]), an Agent one never does.
    let mut rewritten = match phase {
        Phase::Plan => plan_bash_prefix(&call.project),
        Phase::Agent { confirm: false } => format!(
            "{}--agent --project {}",
            bash_prefix(),
            shell_quoted(&call.project.root)
        ),
        Phase::Agent { confirm: true } => format!(
            "{}--agent {NEEDS_CONFIRMATION} --project {}",
            bash_prefix(),
            shell_quoted(&call.project.root)
        ),
    };
    rewritten.push_str(&format!(
        " --session {session} --call {call_id} --cwd {cwd}",
        session = shell_quoted(Path::new(&call.session_id)),
        call_id = shell_quoted(Path::new(call.call_id)),
        cwd = shell_quoted(Path::new(call.cwd)),
    ));
    if let Some(timeout) = call.input.get("timeout").and_then(Value::as_u64) {
        rewritten.push_str(&format!(" --timeout-ms {timeout}"));
    }
    rewritten.push_str(&format!(" <<'{delimiter}'\n{command}\n{delimiter}"));
    let mut updated = call.input.clone();
    if let Some(object) = updated.as_object_mut() {
        object.insert("command".to_owned(), Value::String(rewritten));
    }
    updated
}

/// Which phase a Bash call runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A plan-mode call: the host decides and runs it in the read-only
    /// sandbox when the client asks.
    Plan,
    /// An Agent-phase call the host decided already; `confirm`: the host
    /// asked a person, whom Claude Code's dialog asks.
    Agent { confirm: bool },
}

/// The flag of a rewritten command whose run confirms it.
const NEEDS_CONFIRMATION: &str = "--needs-confirmation";

/// An Agent-phase Bash call: decided by the host on its permission table
/// in the session's Agent turn, then rewritten so the host runs it in the
/// workspace-write sandbox; one the host wants confirmed is left to Claude
/// Code's dialog (and confirms itself on the host when it runs, i.e. once
/// accepted).
fn agent_bash(call: &HookCall<'_>) -> Value {
    // The host binds a confirmation to the exact input it runs.
    let mut input = json!({
        "command": call.input.get("command").cloned().unwrap_or(Value::Null),
        "cwd": call.cwd,
    });
    if let (Some(timeout), Some(object)) = (call.input.get("timeout"), input.as_object_mut()) {
        object.insert("timeoutMs".to_owned(), timeout.clone());
    }
    let result = match agent_decision(call, input) {
        Ok(result) => result,
        Err(failure) => return deny(&failure.text()),
    };
    if let Some(reason) = refusal_of(&result) {
        return deny(&reason);
    }
    let confirm = result.get("decision").and_then(Value::as_str) == Some("confirm");
    pre_tool_use(
        Some(if confirm { Decision::Ask } else { Decision::Allow }),
        Some("the command runs through plan-checkpoint's host, in its workspace-write sandbox"),
        Some(rewritten_bash(call, Phase::Agent { confirm })),
    )
}

/// The host's decision on a call in the session's Agent turn.
fn agent_decision(call: &HookCall<'_>, input: Value) -> Result<Value, HostFailure> {
    let mut client = host_for(&call.project)?;
    let turn = agent_turn(&mut client, &call.project, &call.session_id)?;
    decide_in(&mut client, call, &turn, call.tool, input)
}

/// Agent phase (after an approval, or after the person left plan mode
/// without one), every call but Bash and the exit: the host's permission
/// table decides under the tool's own name. Its deny is the model's
/// answer; a confirmation is Claude Code's dialog; its allow runs the call
/// unasked only where it is the person's permission mode that grants it
/// and Claude Code guards nothing more itself, and never for a tool the
/// table does not know (Claude Code asks then). What every mode allows
/// (reading) is left to Claude Code's own check, which a hook's `allow`
/// would skip.
fn agent_tool(call: &HookCall<'_>, carry: Option<Carry>) -> Value {
    if let Some(reason) = skill_refusal(call, carry) {
        return deny(&reason);
    }
    let result = match agent_decision(call, call.input.clone()) {
        Ok(result) => result,
        Err(failure) => return deny(&failure.text()),
    };
    if let Some(reason) = refusal_of(&result) {
        return deny(&reason);
    }
    let confirm = result.get("decision").and_then(Value::as_str) == Some("confirm");
    match (confirm, carry) {
        (true, _) => pre_tool_use(
            Some(Decision::Ask),
            Some("plan-checkpoint's permission mode asks a person to confirm this call"),
            None,
        ),
        // The person's permission mode grants it: it runs unasked.
        (false, Some(Carry::Host)) if plan_core::granted_by_mode(plan_core::tool_kind(call.tool)) => {
            pre_tool_use(
                Some(Decision::Allow),
                Some("plan-checkpoint's permission mode allows this call"),
                None,
            )
        }
        // What every mode allows (reading): Claude Code's own check stays
        // (it asks before reading outside the project).
        (false, Some(Carry::Host)) => no_decision(),
        // Claude Code's own guard of the call decides.
        (false, Some(Carry::HostThenClaudeCode | Carry::Skill)) => no_decision(),
        (false, Some(Carry::HostShell | Carry::PlanExit)) => no_decision(),
        (false, None) => pre_tool_use(
            Some(Decision::Ask),
            Some(&format!(
                "plan-checkpoint does not know the Claude Code tool {} (its table is taken from Claude Code {}): confirm it yourself",
                call.tool,
                tools::PINNED_VERSION
            )),
            None,
        ),
    }
}

/// Tells the host that a call it wanted confirmed ran, i.e. the person
/// accepted it in Claude Code's dialog. A call that needed no confirmation
/// is refused by the host (`TOOL_CONFIRMATION_NOT_PENDING`), which is
/// fine: nothing is recorded twice.
fn record_confirmation(call: &HookCall<'_>) {
    let Ok(mut client) = HostClient::connect(&call.project, CLIENT) else {
        return;
    };
    let Some(turn) = session_get(&mut client, &call.session_id)
        .ok()
        .and_then(|session| session.active_turn)
    else {
        return;
    };
    let _ = client.request(&ToolConfirmParams {
        session_id: call.session_id.as_str().into(),
        turn_id: turn.turn_id.as_str().into(),
        call_id: call.call_id.into(),
        allow: true,
    });
}

/// The session's Agent turn: the active one (the approved plan's
/// execution starting when it is still queued: the exit ran); else a new
/// Agent turn. A Plan turn still active means the person left plan mode
/// without an approval: it is cancelled (the host records it) before the
/// Agent turn starts.
fn agent_turn(client: &mut HostClient, project: &Project, session_id: &str) -> Result<String, HostFailure> {
    let mut session = session_of(client, project, session_id, Mode::Agent)?;
    if let Some(turn) = session.active_turn.clone() {
        if turn.mode == Mode::Agent {
            if let Some((execution, ExecutionState::Queued)) = live_execution(client, &session)? {
                client.request(&ExecutionStartParams {
                    execution_id: execution,
                })?;
            }
            return Ok(turn.turn_id);
        }
        session = client.request(&TurnCancelParams {
            session_id: session_id.into(),
        })?;
    }
    start_turn(client, &session, Mode::Agent, AGENT_TURN_PROMPT)
}

/// A here-document delimiter that no line of `command` equals.
fn here_document_delimiter(command: &str) -> String {
    let mut salt = 0_u64;
    loop {
        let delimiter = format!("PLAN_CHECKPOINT_COMMAND_{salt}");
        if !command.lines().any(|line| line == delimiter) {
            return delimiter;
        }
        salt += 1;
    }
}

/// Bash's permission: allowed for exactly a command the PreToolUse hook
/// wrote and the host did not ask to confirm; anything else (such a
/// command included) stays with Claude Code's dialog.
fn bash_permission(call: &HookCall<'_>) -> Option<Value> {
    let command = call.input.get("command").and_then(Value::as_str)?;
    let first_line = command.lines().next().unwrap_or_default();
    (command.starts_with(&bash_prefix()) && !first_line.contains(NEEDS_CONFIRMATION))
        .then(|| permission_allow(None, None))
}

/// `Stop` and `SessionEnd`: Claude Code finished the work, so the approved
/// plan's execution that ran ends `completed` (one whose plan exit never
/// ran is cancelled at the session's end) and an Agent prompt turn
/// completes; at the session's end a plan still pending is withdrawn
/// (nobody will carry it out).
fn finish_execution(call: &HookCall<'_>, session_ends: bool) {
    let Ok(mut client) = HostClient::connect(&call.project, CLIENT) else {
        return;
    };
    let Ok(session) = session_get(&mut client, &call.session_id) else {
        return;
    };
    match live_execution(&mut client, &session) {
        Ok(Some((execution, ExecutionState::Running))) => {
            let _ = client.request(&ExecutionCompleteParams {
                execution_id: execution,
            });
        }
        Ok(Some((_, ExecutionState::Queued))) if session_ends => {
            cancel_execution(&mut client, &call.session_id);
        }
        Ok(Some(_)) | Err(_) => {}
        Ok(None) => {
            if let Some(turn) = session
                .active_turn
                .as_ref()
                .filter(|turn| turn.mode == Mode::Agent && turn.kind == plan_core::TurnKind::Prompt)
            {
                let _ = client.request(&TurnCompleteParams {
                    session_id: call.session_id.as_str().into(),
                    turn_id: turn.turn_id.as_str().into(),
                });
            }
        }
    }
    if session_ends && let Some(pending) = session.pending_approval_id {
        let _ = client.request(&PlanWithdrawParams {
            approval_id: pending.into(),
        });
    }
}

// --------------------------------------------------------------------- bash

/// One rewritten Bash call, as its command line gives it.
struct BashCall<'a> {
    session_id: &'a str,
    call_id: &'a str,
    cwd: &'a str,
    timeout_ms: Option<u64>,
    phase: Phase,
}

/// The rewritten Bash: the command (stdin, a here-document) run by the
/// host in its sandbox (read-only in plan mode, workspace-write after);
/// its output streamed, its status ours.
fn bash(project: &Project, call: &BashCall<'_>) -> i32 {
    let mut command = String::new();
    if std::io::stdin().read_to_string(&mut command).is_err() {
        log::line("plan-checkpoint: the command could not be read");
        return 126;
    }
    // The here-document's own last newline.
    if command.ends_with('\n') {
        command.pop();
    }
    match run_bash(project, call, &command) {
        Ok(code) => code,
        Err(failure) => {
            log::line(&format!("plan-checkpoint: {}", failure.text()));
            126
        }
    }
}

fn run_bash(project: &Project, call: &BashCall<'_>, command: &str) -> Result<i32, HostFailure> {
    let mut client = host_for(project)?;
    let run = match call.phase {
        Phase::Plan => {
            let turn = plan_turn(&mut client, project, call.session_id)?;
            let mut input = json!({"command": command, "cwd": call.cwd});
            if let (Some(timeout), Some(object)) = (call.timeout_ms, input.as_object_mut()) {
                object.insert("timeoutMs".to_owned(), json!(timeout));
            }
            let results = client.call(
                "turn/toolCalls",
                json!({
                    "sessionId": call.session_id,
                    "turnId": turn,
                    "calls": [{"callId": call.call_id, "name": plan_core::BASH, "input": input}],
                }),
            )?;
            let result = results.pointer("/results/0").cloned().unwrap_or(Value::Null);
            if let Some(reason) = refusal_of(&result) {
                log::line(&format!("plan-checkpoint: {reason}"));
                return Ok(126);
            }
            result.get("command").cloned().unwrap_or(Value::Null)
        }
        Phase::Agent { confirm } => {
            let session = client.call("session/get", json!({"sessionId": call.session_id}))?;
            let turn = session
                .pointer("/activeTurn/turnId")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| HostFailure {
                    code: "TURN_NOT_ACTIVE".into(),
                    message: "the session has no active turn for this call".into(),
                })?;
            if confirm {
                // Claude Code runs this only once the person accepted it in
                // its dialog: that acceptance is the confirmation.
                client.call(
                    "tool/confirm",
                    json!({"sessionId": call.session_id, "turnId": turn, "callId": call.call_id, "allow": true}),
                )?;
            }
            let mut params = json!({
                "sessionId": call.session_id,
                "turnId": turn,
                "callId": call.call_id,
                "command": command,
                "cwd": call.cwd,
            });
            if let (Some(timeout), Some(object)) = (call.timeout_ms, params.as_object_mut()) {
                object.insert("timeoutMs".to_owned(), json!(timeout));
            }
            client.call("command/start", params)?
        }
    };
    if let Some(ended) = ended_status(Some(&run)) {
        return Ok(ended);
    }
    stream_until_exit(&mut client, call)
}

/// Writes the call's output as it comes; returns its exit status.
fn stream_until_exit(client: &mut HostClient, call: &BashCall<'_>) -> Result<i32, HostFailure> {
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    loop {
        let Some(message) = client.next_notification(Some(Duration::from_secs(1)))? else {
            // A notification may have been dropped under load: ask.
            let run = client.call(
                "command/get",
                json!({"sessionId": call.session_id, "callId": call.call_id}),
            )?;
            if let Some(code) = ended_status(Some(&run)) {
                return Ok(code);
            }
            continue;
        };
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        if params.get("callId").and_then(Value::as_str) != Some(call.call_id) {
            continue;
        }
        match message.get("method").and_then(Value::as_str) {
            Some("command/output") => {
                let chunk = params.get("chunk").and_then(Value::as_str).unwrap_or_default();
                let _ = if params.get("stream").and_then(Value::as_str) == Some("stderr") {
                    stderr.write_all(chunk.as_bytes()).and_then(|()| stderr.flush())
                } else {
                    stdout.write_all(chunk.as_bytes()).and_then(|()| stdout.flush())
                };
            }
            Some("command/exited") => return Ok(ended_status(params.get("command")).unwrap_or(1)),
            Some(_) | None => {}
        }
    }
}

/// The exit status a run that ended gives this process (`128 + signal`
/// for a killed one, as a shell reports it); `None` while it runs.
fn ended_status(run: Option<&Value>) -> Option<i32> {
    let run = run?;
    let state = run.get("state").and_then(Value::as_str)?;
    if state == "running" {
        return None;
    }
    if let Some(code) = run.get("exitCode").and_then(Value::as_i64) {
        return Some(i32::try_from(code).unwrap_or(1));
    }
    if let Some(signal) = run.get("signal").and_then(Value::as_i64) {
        return Some(128 + i32::try_from(signal).unwrap_or(0));
    }
    if let Some(code) = run.get("errorCode").and_then(Value::as_str) {
        log::line(&format!("plan-checkpoint: the command did not run: {code}"));
    }
    Some(126)
}

// ----------------------------------------------------------------- the exit

/// The title of a Claude Code plan: its first heading, else its first
/// non-empty line, as one plain line (control and bidirectional characters
/// shown as escapes) of at most the host's title length.
fn plan_title(plan: &str) -> String {
    let lines = || plan.lines().map(str::trim).filter(|line| !line.is_empty());
    let line = lines()
        .find(|line| line.starts_with('#'))
        .map(|line| line.trim_start_matches('#').trim())
        .filter(|line| !line.is_empty())
        .or_else(|| lines().next())
        .unwrap_or("Claude Code plan");
    let mut title = String::new();
    for character in line.chars() {
        if plan_core::is_terminal_control(character) {
            title.push_str(&character.escape_unicode().to_string());
        } else {
            title.push(character);
        }
    }
    title
        .chars()
        .take(plan_core::SUBMIT_PLAN_TITLE_MAX_CHARS)
        .collect()
}

/// The session's latest approval (`plan/list`, newest first).
fn latest_approval(client: &mut HostClient, session_id: &str) -> Result<Option<PlanApproval>, HostFailure> {
    let list = client.call("plan/list", json!({"sessionId": session_id, "limit": 1}))?;
    Ok(list
        .pointer("/approvals/0")
        .cloned()
        .and_then(|approval| serde_json::from_value(approval).ok()))
}

/// Whether `approval` is the submission of exactly `plan`.
fn is_plan(approval: &PlanApproval, plan: &str) -> bool {
    approval
        .artifact
        .as_ref()
        .is_some_and(|artifact| artifact.sha256 == sha256_hex(plan.as_bytes()))
}

/// How a plan exit's wait ended.
enum Waited {
    /// Decided (or expired, or interrupted): the approval as it is now.
    Resolved(PlanApproval),
    /// Still pending when the hook had to answer.
    StillPending(PlanApproval),
    /// Claude Code ended while the plan was pending: it was withdrawn.
    AgentGone,
}

/// `ExitPlanMode` before it runs: the plan submitted (or, when the
/// session's pending plan or not yet carried out approval is these very
/// bytes, that one) and decided.
fn exit_plan(call: &HookCall<'_>) -> Value {
    let Some(plan) = call.input.get("plan").and_then(Value::as_str) else {
        return deny("INVALID_PLAN_INPUT: ExitPlanMode carries no plan (write the plan file first)");
    };
    let agent = AgentProcess::of_this_hook();
    let mut client = match host_for(&call.project) {
        Ok(client) => client,
        Err(failure) => return deny(&failure.text()),
    };
    let approval = match submitted(&mut client, call, plan) {
        Ok(approval) => approval,
        Err(reason) => return deny(&reason),
    };
    let waited = match wait_for_decision(&mut client, approval, call.answer_by, agent) {
        Ok(waited) => waited,
        Err(failure) => return deny(&failure.text()),
    };
    let resolved = match waited {
        Waited::Resolved(resolved) => resolved,
        Waited::StillPending(pending) => return deny(&still_pending(&pending)),
        Waited::AgentGone => return deny("PLAN_WITHDRAWN: Claude Code ended while the plan was pending"),
    };
    let bytes = match approved_plan(&mut client, &resolved) {
        Ok(bytes) => bytes,
        Err(reason) => return deny(&reason),
    };
    // Claude Code proceeds with what its plan file holds when the exit is
    // allowed: it must hold the approved bytes, or the exit is refused and
    // the approval is not carried out.
    if let Err(reason) = plan_file_holds(call, &bytes) {
        cancel_execution(&mut client, &call.session_id);
        return deny(&reason);
    }
    let updated = exit_input(call, bytes);
    match resolved.permission_mode {
        // The exit is allowed here: Claude Code leaves plan mode for its
        // `default`, which is `ask`, with nothing else asked (no dialog to
        // race a person's choice).
        Some(PermissionMode::Ask) | None => pre_tool_use(
            Some(Decision::Allow),
            Some("plan-checkpoint: a person approved this plan with ask"),
            Some(updated),
        ),
        // No decision here: an `allow` would leave plan mode for `default`
        // at once, past the PermissionRequest hook that sets the chosen
        // mode. The approved input goes on to that hook.
        Some(PermissionMode::AcceptEdits | PermissionMode::Auto) => pre_tool_use(None, None, Some(updated)),
    }
}

/// The exit's input as it runs: the approved bytes and Claude Code's plan
/// file, nothing else the model put there (the person saw only the plan).
fn exit_input(call: &HookCall<'_>, plan: String) -> Value {
    let mut updated = json!({"plan": plan});
    if let (Some(file), Some(object)) = (call.input.get("planFilePath"), updated.as_object_mut()) {
        object.insert("planFilePath".to_owned(), file.clone());
    }
    updated
}

/// The approval this exit waits on: the session's latest when it is these
/// bytes, still pending or approved and not yet carried out (an earlier
/// hold answered before the person decided); else a new submission. A
/// pending plan of other bytes keeps the session busy.
fn submitted(client: &mut HostClient, call: &HookCall<'_>, plan: &str) -> Result<PlanApproval, String> {
    let latest = latest_approval(client, &call.session_id).map_err(|failure| failure.text())?;
    if let Some(latest) = latest {
        let waiting = latest.status == ApprovalStatus::Pending;
        let not_carried_out = latest.status == ApprovalStatus::Approved
            && latest.execution_state == Some(ExecutionState::Queued);
        if (waiting || not_carried_out) && is_plan(&latest, plan) {
            return Ok(latest);
        }
        if waiting {
            return Err(format!(
                "SESSION_BUSY: another plan of this session ({}, \"{}\") still waits for a person's decision until {}; \
                 wait for it, or ask the person to reject it before submitting this one",
                latest.id,
                latest.title,
                crate::render::local_clock(latest.expires_at)
            ));
        }
    }
    let input = json!({"title": plan_title(plan), "markdown": plan, "question": QUESTION});
    let result = plan_turn(client, &call.project, &call.session_id)
        .and_then(|turn| decide_in(client, call, &turn, plan_core::SUBMIT_PLAN, input))
        .map_err(|failure| failure.text())?;
    if let Some(reason) = refusal_of(&result) {
        return Err(reason);
    }
    let approval: PlanApproval = result
        .get("approval")
        .cloned()
        .and_then(|approval| serde_json::from_value(approval).ok())
        .ok_or("INTERNAL: the host submitted no approval")?;
    notify_person(client, call, &approval);
    Ok(approval)
}

/// Runs the person's notifier (`PLAN_CHECKPOINT_NOTIFY`) for a plan just
/// submitted, whichever host serves it, on its own thread: it never holds
/// the wait up.
fn notify_person(client: &mut HostClient, call: &HookCall<'_>, approval: &PlanApproval) {
    let Some(command) = persons_setting("PLAN_CHECKPOINT_NOTIFY") else {
        return;
    };
    let card_url = client
        .request(&PlanCardUrlParams {
            approval_id: approval.id.clone(),
        })
        .ok()
        .map(|card| card.url);
    let root = call.project.root.display().to_string();
    let Some(notice) = plan_server::web::pending_plan_notice(approval, Some(&root), card_url) else {
        return;
    };
    let Ok(message) = serde_json::to_vec(&notice) else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("plan-notifier".into())
        .spawn(move || plan_exec::run_notifier(&command, &message, plan_host::NOTIFIER_LIMIT));
}

/// Waits for the approval to leave `pending`, until the hook must answer
/// (`answer_by`); withdraws it when Claude Code (`agent`) ended meanwhile.
fn wait_for_decision(
    client: &mut HostClient,
    approval: PlanApproval,
    answer_by: Option<Instant>,
    agent: Option<AgentProcess>,
) -> Result<Waited, HostFailure> {
    let mut current = approval;
    loop {
        if current.status != ApprovalStatus::Pending {
            return Ok(Waited::Resolved(current));
        }
        if agent.is_some_and(|agent| !agent.is_alive()) {
            client.request(&PlanWithdrawParams {
                approval_id: current.id.clone(),
            })?;
            return Ok(Waited::AgentGone);
        }
        let now = Instant::now();
        if answer_by.is_some_and(|by| now >= by) {
            return Ok(Waited::StillPending(current));
        }
        // Woken by the host's notification, or after a while to look again
        // (one dropped under load is not waited for; Claude Code's end is
        // seen within the second).
        let wait = answer_by.map_or(Duration::from_secs(1), |by| {
            by.saturating_duration_since(now).min(Duration::from_secs(1))
        });
        let _ = client.next_notification(Some(wait.max(Duration::from_millis(10))))?;
        current = client.request(&PlanGetParams {
            approval_id: current.id.clone(),
        })?;
    }
}

/// What the model reads when the hook must answer while the plan still
/// waits for a person: it is not approved, and how to go on.
fn still_pending(approval: &PlanApproval) -> String {
    format!(
        "The plan {} (\"{}\") still waits for a person's decision, until {}; this exit is not approved. \
         To keep waiting, call ExitPlanMode again with the same plan; the person decides with \
         `plan-checkpoint claude-code approve {} --mode ask|accept-edits|auto` (or reject), or on the approval card.",
        approval.id,
        approval.title,
        crate::render::local_clock(approval.expires_at),
        approval.id
    )
}

/// Checks that Claude Code's plan file, which it proceeds with, holds the
/// approved bytes.
fn plan_file_holds(call: &HookCall<'_>, approved: &str) -> Result<(), String> {
    let Some(file) = call.input.get("planFilePath").and_then(Value::as_str) else {
        return Ok(());
    };
    let holds = std::fs::read(file).is_ok_and(|bytes| bytes == approved.as_bytes());
    if holds {
        Ok(())
    } else {
        Err(format!(
            "ARTIFACT_INTEGRITY_MISMATCH: Claude Code's plan file {file} no longer holds the approved plan; submit it again"
        ))
    }
}

/// The approved plan's execution does not happen (its exit was refused):
/// cancelled, so it is not left queued or running.
fn cancel_execution(client: &mut HostClient, session_id: &str) {
    let _ = client.request(&TurnCancelParams {
        session_id: session_id.into(),
    });
}

/// The exit ran: the approved plan's execution starts.
fn start_execution(call: &HookCall<'_>) {
    let Ok(mut client) = HostClient::connect(&call.project, CLIENT) else {
        return;
    };
    let Ok(session) = session_get(&mut client, &call.session_id) else {
        return;
    };
    if let Ok(Some((execution, ExecutionState::Queued))) = live_execution(&mut client, &session) {
        let _ = client.request(&ExecutionStartParams {
            execution_id: execution,
        });
    }
}

/// The approved plan's bytes, checked against its recorded SHA-256; or the
/// sentence the model reads for any other outcome.
fn approved_plan(client: &mut HostClient, approval: &PlanApproval) -> Result<String, String> {
    let approval_id = approval.id.as_str();
    match approval.status {
        ApprovalStatus::Approved => {}
        ApprovalStatus::Expired => {
            return Err(format!(
                "PLAN_APPROVAL_TIMEOUT: {}",
                plan_core::ErrorCode::PlanApprovalTimeout.message()
            ));
        }
        ApprovalStatus::Rejected => {
            // A rejection is a person's answer, not an error: no code.
            return Err(format!(
                "The person rejected this plan ({approval_id}). Stay in plan mode: revise the plan with them."
            ));
        }
        ApprovalStatus::Interrupted => {
            let code = approval.error_code.unwrap_or(plan_core::ErrorCode::HostRestarted);
            return Err(format!("{}: {}", code.as_str(), code.message()));
        }
        ApprovalStatus::Pending => return Err(format!("INTERNAL: approval {approval_id} is pending")),
    }
    let artifact = client
        .call("plan/readArtifact", json!({"approvalId": approval_id}))
        .map_err(|failure| failure.text())?;
    let markdown = artifact
        .get("markdown")
        .and_then(Value::as_str)
        .ok_or("ARTIFACT_MISSING: the approved plan could not be read")?;
    let recorded = approval
        .artifact
        .as_ref()
        .map(|artifact| artifact.sha256.as_str())
        .unwrap_or_default();
    if sha256_hex(markdown.as_bytes()) != recorded {
        return Err(format!(
            "ARTIFACT_INTEGRITY_MISMATCH: {}",
            plan_core::ErrorCode::ArtifactIntegrityMismatch.message()
        ));
    }
    Ok(markdown.to_owned())
}

fn sha256_hex(bytes: &[u8]) -> String {
    plan_storage::sha256_hex(bytes)
}

/// `ExitPlanMode`'s permission, asked right after the PreToolUse hook let
/// it through: allowed with the approved plan echoed (it must hash to the
/// record) and Claude Code's mode set from the chosen permission mode;
/// refused otherwise, and then the approved plan's execution is cancelled
/// (it does not happen).
fn exit_plan_permission(call: &HookCall<'_>) -> Value {
    let mut client = match HostClient::connect(&call.project, CLIENT) {
        Ok(client) => client,
        Err(failure) => return permission_deny(failure.text()),
    };
    let approval = match latest_approval(&mut client, &call.session_id) {
        Ok(Some(approval)) => approval,
        Ok(None) | Err(_) => {
            return permission_deny("PLAN_NOT_ACTIVE: no plan of this session was submitted".into());
        }
    };
    if approval.status != ApprovalStatus::Approved || approval.execution_state != Some(ExecutionState::Queued)
    {
        return permission_deny("PLAN_NOT_ACTIVE: this session's latest plan is not approved".into());
    }
    let plan = call.input.get("plan").and_then(Value::as_str).unwrap_or_default();
    let refusal = if !is_plan(&approval, plan) {
        Some(format!(
            "ARTIFACT_INTEGRITY_MISMATCH: {}",
            plan_core::ErrorCode::ArtifactIntegrityMismatch.message()
        ))
    } else {
        plan_file_holds(call, plan).err()
    };
    if let Some(reason) = refusal {
        cancel_execution(&mut client, &call.session_id);
        return permission_deny(reason);
    }
    let mode = match approval.permission_mode {
        Some(PermissionMode::AcceptEdits | PermissionMode::Auto) => "acceptEdits",
        Some(PermissionMode::Ask) | None => "default",
    };
    permission_allow(Some(exit_input(call, plan.to_owned())), Some(mode))
}

// ------------------------------------------------------- deciding, serving

/// A pending approval as the person's commands list it.
fn pending_line(approval: &PlanApproval, now: plan_core::UnixMs) -> String {
    let sha = approval
        .artifact
        .as_ref()
        .map(|artifact| artifact.sha256.chars().take(16).collect::<String>())
        .unwrap_or_default();
    format!(
        "{}  {}  until {} ({})  sha256 {sha}…\n",
        approval.id,
        crate::escape::line(&approval.title),
        crate::render::local_clock(approval.expires_at),
        crate::render::relative(approval.expires_at, now),
    )
}

fn pending(project: &Project, as_json: bool) -> Result<i32, Failure> {
    // No host yet (none started since install): nothing can be pending.
    let approvals: Vec<PlanApproval> = match HostClient::connect(project, CLIENT) {
        Ok(mut client) => {
            let list = client
                .call("plan/list", json!({"status": "pending"}))
                .map_err(refused)?;
            list.get("approvals")
                .cloned()
                .and_then(|approvals| serde_json::from_value(approvals).ok())
                .unwrap_or_default()
        }
        Err(_) if !project.socket.exists() => Vec::new(),
        Err(failure) => return Err(refused(failure)),
    };
    let text = if as_json {
        let rows: Vec<Value> = approvals
            .iter()
            .map(|approval| {
                json!({
                    "approvalId": approval.id,
                    "sessionId": approval.session_id,
                    "title": approval.title,
                    "expiresAt": approval.expires_at,
                    "artifact": approval.artifact,
                })
            })
            .collect();
        // Titles are the agent's text: terminal-safe JSON, as every
        // `--json` of this binary.
        crate::render::json_line(&Value::Array(rows))?
    } else if approvals.is_empty() {
        "no pending plan\n".to_owned()
    } else {
        let now = crate::render::now_ms();
        approvals
            .iter()
            .map(|approval| pending_line(approval, now))
            .collect()
    };
    crate::render::write_stdout(text.as_bytes())?;
    Ok(exit::OK)
}

/// The approval id `given` names: itself or the one id it is a prefix of,
/// as `approvals` resolves it (read beside the live host).
fn resolve_id(project: &Project, given: &str) -> Result<String, Failure> {
    let store = plan_storage::Store::open_read_only(&project.database).map_err(|error| {
        Failure::new(
            exit::FAILURE,
            format!(
                "APPROVAL_NOT_FOUND: {} has no database yet: {}",
                project.root.display(),
                error
            ),
        )
    })?;
    crate::inspect::resolve(&store, given)
}

fn decide(project: &Project, given: &str, mode: Option<PermissionMode>) -> Result<i32, Failure> {
    let approval_id = resolve_id(project, given)?;
    let mut client = connect(project)?;
    let (method, params) = match mode {
        Some(mode) => (
            "plan/approve",
            json!({"approvalId": approval_id, "permissionMode": mode.as_str()}),
        ),
        None => ("plan/reject", json!({"approvalId": approval_id})),
    };
    client.call(method, params).map_err(refused)?;
    let said = match mode {
        Some(mode) => format!("{approval_id} approved with {}\n", mode.as_str()),
        None => format!("{approval_id} rejected\n"),
    };
    crate::render::write_stdout(said.as_bytes())?;
    Ok(exit::OK)
}

fn card_url(project: &Project, given: &str) -> Result<i32, Failure> {
    use std::io::IsTerminal;
    let approval_id = resolve_id(project, given)?;
    let mut client = connect(project)?;
    let card = client
        .request(&PlanCardUrlParams {
            approval_id: approval_id.as_str().into(),
        })
        .map_err(refused)?;
    let said = card_lines(&card.url, std::io::stdout().is_terminal());
    crate::render::write_stdout(said.as_bytes())?;
    Ok(exit::OK)
}

/// What `card-url` prints: the URL, and on a terminal a QR code for a
/// phone when the card is served beyond loopback (one of a loopback URL
/// opens nothing on a phone, so a line says how to serve it farther).
fn card_lines(url: &str, terminal: bool) -> String {
    let mut said = format!("{url}\n");
    if !terminal {
        return said;
    }
    let host = url
        .split_once("://")
        .map_or(url, |(_, rest)| rest)
        .split(['/', ':'])
        .next()
        .unwrap_or_default();
    let loopback = host == "localhost" || host.starts_with("127.") || host.starts_with('[');
    if loopback {
        said.push_str(
            "(no QR code: the card is served on loopback, which only this machine opens; \
             PLAN_CHECKPOINT_WEB_BIND=ADDR serves it where a phone can reach it)\n",
        );
    } else if let Some(code) = plan_server::web::qr::render(url) {
        said.push_str(&code);
    }
    said
}

/// The status line for Claude Code's session (its JSON on stdin). A plan
/// that waits for the person: its title and deadline, then the command
/// that decides it; an approved plan being carried out: its mode;
/// otherwise that the checkpoint is on. Never starts a host.
fn status(project: &Project) -> Result<i32, Failure> {
    let mut text = String::new();
    let _ = std::io::stdin().take(1024 * 1024).read_to_string(&mut text);
    let session_id = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|input| input.get("session_id").and_then(Value::as_str).map(str::to_owned))
        .map(|id| format!("claude-code-{id}"));
    let line = session_id
        .and_then(|session_id| {
            let mut client = HostClient::connect(project, CLIENT).ok()?;
            let session = session_get(&mut client, &session_id).ok()?;
            if let Some(pending) = session.pending_approval_id.as_deref() {
                let approval = client
                    .request(&PlanGetParams {
                        approval_id: pending.into(),
                    })
                    .ok()?;
                // Two lines, each short enough for a terminal's width.
                let short = approval.id.as_str().chars().take("approval-".len() + 12).collect::<String>();
                return Some(format!(
                    "plan-checkpoint: the plan \"{}\" waits for your decision until {}\n\
                     plan-checkpoint claude-code approve {short} --mode ask|accept-edits|auto (or reject, card-url)",
                    crate::escape::line(&approval.title),
                    crate::render::local_clock(approval.expires_at),
                ));
            }
            Some(if session.active_execution_id.is_some() {
                format!(
                    "plan-checkpoint: carrying out the approved plan ({})",
                    session.permission_mode.as_str()
                )
            } else {
                "plan-checkpoint: on".to_owned()
            })
        })
        .unwrap_or_else(|| "plan-checkpoint: on".to_owned());
    crate::render::write_stdout(format!("{line}\n").as_bytes())?;
    Ok(exit::OK)
}

/// How long the host stays without a client before it ends.
const IDLE_LIMIT: Duration = Duration::from_secs(15 * 60);

fn host(project: &Project, web_bind: Option<String>) -> Result<i32, Failure> {
    let database_directory = project.database.parent().unwrap_or(&project.root);
    std::fs::create_dir_all(database_directory).map_err(|error| {
        Failure::new(
            exit::FAILURE,
            format!("{}: {error}", database_directory.display()),
        )
    })?;
    // With its code: a hook that started this host while another started
    // too waits for the other's socket on `HOST_ALREADY_RUNNING`.
    let failed = |error: plan_host::HostError| {
        Failure::new(
            exit::DATABASE_REFUSED,
            format!("{}: {}", error.code().as_str(), error.message()),
        )
    };
    // The card on loopback, or where the person asked (a phone's reach),
    // as `serve --web-bind` does.
    let web_bind = web_bind.filter(|address| !address.trim().is_empty());
    // The host's settings as `serve` and the FFI give them, through the
    // same conversion.
    let config = plan_host::HostConfig {
        approval_ttl_ms: Some(approval_ttl_ms()),
        web_allow_any_address: web_bind.is_some(),
        web_address: Some(web_bind.unwrap_or_else(|| "127.0.0.1:0".to_owned())),
        // The hooks run the person's notifier themselves, for each plan
        // they submit, whichever host is running.
        notifier: None,
        // The binary is its own sandbox helper, as for `serve`: installed
        // alone, it still runs plan-mode Bash. Never one the environment
        // names: Claude Code gives its hooks the `env` of the project's
        // settings, which a workspace can set, and a helper built there
        // would run every later command unconfined (P15).
        sandbox_helper: std::env::current_exe().ok(),
        ..plan_host::HostConfig::default()
    };
    // The audit export as `serve` has it, from the per-user settings file
    // and the person's own OTEL_* variables (the hook that started this
    // host passed those, never a project's, see `persons_export_environment`).
    let options =
        crate::otel::agent_host_options(config).map_err(|error| Failure::new(exit::USAGE, error))?;
    let options = plan_host::HostOptions {
        frontend: plan_host::DecisionChannel::Rpc,
        export_observer: Some(crate::otel::stderr_observer("plan-checkpoint claude-code host")),
        ..options
    };
    let host = std::sync::Arc::new(plan_host::Host::open(&project.database, options).map_err(failed)?);
    let web = plan_server::web::WebCard::start_for(&host).map_err(failed)?;
    // The pid file names this host before its socket answers: whoever has
    // talked to the host (a hook whose plan is pending) finds its pid.
    let _ = std::fs::write(&project.pid_file, format!("{}\n", std::process::id()));
    let server = match plan_server::socket::SocketServer::start(&host, web.clone(), &project.socket) {
        Ok(server) => server,
        Err(error) => {
            let _ = std::fs::remove_file(&project.pid_file);
            return Err(Failure::new(
                exit::FAILURE,
                format!("{}: {error}", project.socket.display()),
            ));
        }
    };
    log::line(&format!(
        "plan-checkpoint claude-code host: ready for {} on {}",
        project.root.display(),
        project.socket.display()
    ));
    let mut idle_since = Instant::now();
    loop {
        std::thread::sleep(Duration::from_secs(5));
        if server.connections() > 0 {
            idle_since = Instant::now();
        } else if idle_since.elapsed() >= IDLE_LIMIT {
            break;
        }
    }
    server.stop();
    if let Some(web) = &web {
        web.stop();
    }
    host.close();
    let _ = std::fs::remove_file(&project.pid_file);
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::card_lines;

    #[test]
    fn a_card_beyond_loopback_gets_a_qr_code_on_a_terminal_only() {
        let far = "http://192.0.2.7:8123/card/00";
        assert_eq!(card_lines(far, false), format!("{far}\n"));
        let drawn = card_lines(far, true);
        assert!(
            drawn.starts_with(&format!("{far}\n")) && drawn.lines().count() > 10,
            "{drawn}"
        );
        let near = "http://127.0.0.1:8123/card/00";
        let said = card_lines(near, true);
        assert!(said.contains("no QR code") && said.lines().count() == 2, "{said}");
        assert!(card_lines("http://[::1]:8123/card/00", true).contains("no QR code"));
    }
}
