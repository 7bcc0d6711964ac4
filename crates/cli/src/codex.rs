//! `plan-checkpoint codex`: Codex CLI's hooks mapped onto the project's
//! host (`codex.md`), through the agent session layer of `plan-client`. A
//! file of mapping: Codex's hook JSON becomes the session layer's flows and
//! their answers become hook answers; every rule is the host's.
//!
//! - The phase is the transcript's: the turn's `collaboration_mode.mode`
//!   (`default` is the Agent phase, anything else, unknown included, is
//!   plan).
//! - A shell call (`Bash`) is registered with the host (`command/register`)
//!   and rewritten into `plan-checkpoint codex run`, which carries the
//!   host's reference, never the command; the exec-policy rule lets that
//!   client (and nothing else) out of Codex's sandbox to reach the host,
//!   which runs the call read-only in plan, workspace-write after an
//!   approval, once.
//! - `apply_patch`, MCP and every other call follow the host's table; a
//!   call the host wants confirmed is held until a person confirms it
//!   (`codex confirm`).
//! - `Stop` in plan submits the turn's `Plan` item and holds until the
//!   person decides: an approval ends the turn, a rejection or expiry goes
//!   on with the host's sentence. In the Agent phase it ends the turn.
//!
//! Codex runs the original call when a hook fails, so this mapping answers
//! every question it can with a decision; where it cannot reach the host
//! it denies.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use plan_client::agent::{AgentSession, PlanOutcome, exit_status};
use plan_client::wire::{
    CommandGetParams, CommandRegisterParams, CommandRunParams, OutputStream, PlanApproveParams,
    PlanCardUrlParams, PlanListResult, PlanRejectParams, SessionGetParams, ToolConfirmParams,
    ToolListAwaitingParams,
};
use plan_client::{Client, ClientError, LineTransport};
use plan_core::{
    ApprovalFilter, ApprovalId, ApprovalStatus, AwaitingCall, CallId, ErrorCode, Mode, PermissionMode,
    SessionId, ToolCall, ToolCallDecision, TurnId,
};
use serde_json::{Value, json};

use crate::agent_host::Project;
use crate::codex_setup::{Setup, shell_quoted};
use crate::{Failure, exit};

/// The client name the host logs.
const CLIENT: &str = "plan-checkpoint codex";

/// The question every Codex plan asks.
const QUESTION: &str = "Approve this plan for Codex to carry out, and in which permission mode?";

/// The longest hook input read (one tool call, or a turn's end).
const MAX_HOOK_INPUT: u64 = 16 * 1024 * 1024;

/// The longest transcript read for the phase and the plan.
const MAX_TRANSCRIPT: u64 = 256 * 1024 * 1024;

/// How often a held call asks whether a person confirmed it.
const CONFIRMATION_POLL: Duration = Duration::from_millis(500);

/// What `codex` does.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum CodexCommand {
    /// Set a project up for Codex: its hooks (`.codex/hooks.json`), Codex's
    /// read-only sandbox as its default, the project and the hooks trusted
    /// in `$CODEX_HOME/config.toml`, and the exec-policy rule of the
    /// client that runs host-registered commands. Says what it wrote.
    Install {
        /// The project (default: the current directory).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
        /// Codex's home (default: `$CODEX_HOME`, else `~/.codex`).
        #[arg(long, value_name = "DIR")]
        codex_home: Option<PathBuf>,
    },
    /// Check the setup: the binary, the hooks and their trust, the rule,
    /// the sandbox, the host. Exits 1 when something does not hold.
    Doctor {
        /// The project (default: the current directory).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
        /// Codex's home (default: `$CODEX_HOME`, else `~/.codex`).
        #[arg(long, value_name = "DIR")]
        codex_home: Option<PathBuf>,
    },
    /// Remove exactly what `install` wrote.
    Uninstall {
        /// The project (default: the current directory).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
        /// Codex's home (default: `$CODEX_HOME`, else `~/.codex`).
        #[arg(long, value_name = "DIR")]
        codex_home: Option<PathBuf>,
    },
    /// Answer one Codex hook (its JSON on stdin, the answer on stdout).
    /// Codex runs this; `install` sets it up.
    Hook,
    /// Run the shell call the host registered under REFERENCE, streaming
    /// its output; exits as it exited. The hook rewrites shell calls into
    /// this, naming the socket it reached the host on (Codex's command
    /// environment need not be the hook's); it never starts a host and
    /// carries no command.
    Run {
        /// The host's socket, as the hook reached it.
        #[arg(long, value_name = "PATH")]
        socket: PathBuf,
        /// The host session.
        #[arg(long)]
        session: String,
        /// The reference `command/register` gave.
        reference: String,
    },
    /// List the project's pending plans (id, title, fingerprint, session)
    /// and the calls held for a person, with the commands that confirm
    /// and decline each.
    Pending {
        /// The project (default: the current directory).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
    },
    /// Approve a pending plan in a permission mode.
    Approve {
        /// The approval id.
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
        /// The approval id.
        approval_id: String,
        /// The project (default: the current directory).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
    },
    /// Print a pending plan's approval card URL (its token is yours).
    CardUrl {
        /// The approval id.
        approval_id: String,
        /// The project (default: the current directory).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
    },
    /// Implement an approved plan from its exact bytes: a fresh Codex
    /// thread (through `codex app-server`) started from the artifact read
    /// back and checked against its SHA-256, in Codex's default mode with
    /// the approved permission mode as Codex's approval policy (ask and
    /// accept-edits: untrusted; auto: never) and its workspace-write
    /// sandbox. Without an id: the project's newest Codex plan pending or
    /// approved, else the next one approved. Shows the calls that wait for
    /// you; exits 0 once the execution completed.
    Implement {
        /// The approval id (default: see above).
        approval_id: Option<String>,
        /// The project (default: the current directory).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
        /// The Codex CLI to run (default: `codex` on PATH).
        #[arg(long, value_name = "PATH", default_value = "codex")]
        codex: PathBuf,
        /// The model of the implementation turn (default: Codex's).
        #[arg(long)]
        model: Option<String>,
    },
    /// Confirm (or, with --decline, decline) a call the host holds for a
    /// person after an approval.
    Confirm {
        /// The call id (Codex's `call_...`).
        call_id: String,
        /// The host session (`codex-<Codex session id>`).
        #[arg(long)]
        session: String,
        /// Decline instead.
        #[arg(long)]
        decline: bool,
        /// The project (default: the current directory).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
    },
}

/// Runs one `codex` command.
pub(crate) fn run(command: CodexCommand) -> Result<i32, Failure> {
    match command {
        CodexCommand::Install { project, codex_home } => {
            let report = crate::codex_setup::install(&setup(project, codex_home)?)?;
            crate::render::write_stdout(report.as_bytes())?;
            Ok(exit::OK)
        }
        CodexCommand::Uninstall { project, codex_home } => {
            let report = crate::codex_setup::uninstall(&setup(project, codex_home)?)?;
            crate::render::write_stdout(report.as_bytes())?;
            Ok(exit::OK)
        }
        CodexCommand::Doctor { project, codex_home } => doctor(&setup(project, codex_home)?),
        CodexCommand::Hook => Ok(hook()),
        CodexCommand::Run {
            socket,
            session,
            reference,
        } => Ok(run_registered(&socket, &session, &reference)),
        CodexCommand::Pending { project } => {
            let named = project.is_some();
            pending(&project_of(project)?, named)
        }
        CodexCommand::Approve {
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
            let mut client = connect(&project_of(project)?).map_err(refused)?;
            client
                .plan_approve(&PlanApproveParams {
                    approval_id: ApprovalId::from(approval_id.clone()),
                    permission_mode: Some(mode),
                })
                .map_err(refused)?;
            said(&format!("{approval_id} approved ({})\n", mode.as_str()))
        }
        CodexCommand::Reject { approval_id, project } => {
            let mut client = connect(&project_of(project)?).map_err(refused)?;
            client
                .plan_reject(&PlanRejectParams {
                    approval_id: ApprovalId::from(approval_id.clone()),
                })
                .map_err(refused)?;
            said(&format!("{approval_id} rejected\n"))
        }
        CodexCommand::CardUrl { approval_id, project } => {
            let mut client = connect(&project_of(project)?).map_err(refused)?;
            let card = client
                .plan_card_url(&PlanCardUrlParams {
                    approval_id: ApprovalId::from(approval_id),
                })
                .map_err(refused)?;
            said(&format!("{}\n", card.url))
        }
        CodexCommand::Implement {
            approval_id,
            project,
            codex,
            model,
        } => crate::codex_driver::implement(&crate::codex_driver::Implement {
            project: &project_of(project)?,
            approval_id: approval_id.map(ApprovalId::from),
            codex: &codex,
            model,
        }),
        CodexCommand::Confirm {
            call_id,
            session,
            decline,
            project,
        } => {
            let mut client = connect(&project_of(project)?).map_err(refused)?;
            let session_id = SessionId::from(session);
            let turn = client
                .session_get(&SessionGetParams {
                    session_id: session_id.clone(),
                })
                .map_err(refused)?
                .active_turn
                .map(|turn| TurnId::from(turn.turn_id))
                .ok_or_else(|| {
                    Failure::new(exit::FAILURE, "TURN_NOT_ACTIVE: the session has no active turn")
                })?;
            let result = client
                .tool_confirm(&ToolConfirmParams {
                    session_id,
                    turn_id: turn,
                    call_id: CallId::from(call_id.clone()),
                    allow: !decline,
                })
                .map_err(refused)?;
            let verb = if result.decision == ToolCallDecision::Allow {
                "confirmed"
            } else {
                "declined"
            };
            said(&format!("{call_id} {verb}\n"))
        }
    }
}

fn said(text: &str) -> Result<i32, Failure> {
    crate::render::write_stdout(text.as_bytes())?;
    Ok(exit::OK)
}

fn refused(error: ClientError) -> Failure {
    Failure::new(exit::FAILURE, error.text())
}

fn project_of(project: Option<PathBuf>) -> Result<Project, Failure> {
    let directory = match project {
        Some(project) => project,
        None => std::env::current_dir()
            .map_err(|error| Failure::new(exit::USAGE, format!("the current directory: {error}")))?,
    };
    Ok(Project::at(&directory))
}

fn setup(project: Option<PathBuf>, codex_home: Option<PathBuf>) -> Result<Setup, Failure> {
    Ok(Setup {
        root: project_of(project)?.root,
        program: this_program(),
        codex_home: crate::codex_setup::codex_home(codex_home)?,
    })
}

/// This very binary, by its absolute path.
fn this_program() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("plan-checkpoint"))
}

/// A connection to the project's host, which must already run.
fn connect(project: &Project) -> Result<Client, ClientError> {
    Client::connect(LineTransport::connect(&project.socket)?, CLIENT)
}

/// A connection to the project's host, started (as every agent's hooks
/// start it) when none answers.
pub(crate) fn connect_or_start(project: &Project) -> Result<Client, ClientError> {
    if let Ok(transport) = LineTransport::connect(&project.socket) {
        return Client::connect(transport, CLIENT);
    }
    if let Some(directory) = project.log.parent() {
        let _ = plan_exec::ScratchRoot::open(directory);
    }
    let args: Vec<OsString> = vec![
        "claude-code".into(),
        "host".into(),
        "--project".into(),
        project.root.clone().into_os_string(),
    ];
    let pid = plan_exec::start_service(&this_program(), &args, &[], &project.log).map_err(|error| {
        ClientError::Unreachable {
            detail: format!("the host could not be started: {error}"),
        }
    })?;
    let stream =
        crate::agent_host::wait_for_socket(project, pid).map_err(|failure| ClientError::Unreachable {
            detail: failure.text(),
        })?;
    Client::connect(LineTransport::from_socket(stream)?, CLIENT)
}

// ---------------------------------------------------------------- doctor

fn doctor(setup: &Setup) -> Result<i32, Failure> {
    let mut findings = crate::codex_setup::check(setup)?;
    let project = Project::at(&setup.root);
    match connect(&project) {
        Ok(client) => {
            let commands = client
                .initialize_result()
                .map(|result| result.capabilities.commands.clone());
            let sandbox = commands
                .as_ref()
                .is_some_and(|commands| commands.plan_sandbox == plan_core::PlanSandbox::Landlock);
            let reason = commands.and_then(|commands| commands.reason).unwrap_or_default();
            findings.push(crate::codex_setup::Finding {
                ok: sandbox,
                text: format!(
                    "the project's host runs (its socket {}); its read-only sandbox {}",
                    project.socket.display(),
                    if sandbox {
                        "is there".to_owned()
                    } else {
                        format!("is missing: {reason}")
                    }
                ),
            });
        }
        Err(_) => findings.push(crate::codex_setup::Finding {
            ok: true,
            text: format!(
                "no host runs for the project now (the first hook starts it; socket {})",
                project.socket.display()
            ),
        }),
    }
    let mut text = String::new();
    for finding in &findings {
        text.push_str(if finding.ok { "ok    " } else { "FAIL  " });
        text.push_str(&finding.text);
        text.push('\n');
    }
    crate::render::write_stdout(text.as_bytes())?;
    Ok(if findings.iter().all(|finding| finding.ok) {
        exit::OK
    } else {
        exit::FAILURE
    })
}

// ---------------------------------------------------------------- deciding

/// The project's pending plans, then the calls held for a person (what a
/// holding hook's status line sends the person here for), each with the
/// commands that confirm or decline it.
fn pending(project: &Project, named: bool) -> Result<i32, Failure> {
    let mut client = connect(project).map_err(refused)?;
    let PlanListResult { approvals } = client
        .plan_list(&ApprovalFilter {
            status: Some(ApprovalStatus::Pending),
            ..ApprovalFilter::default()
        })
        .map_err(refused)?;
    let mut text = if approvals.is_empty() {
        "no pending plan\n".to_owned()
    } else {
        approvals
            .iter()
            .map(|approval| {
                format!(
                    "{}  {}  {}  session {}\n",
                    approval.id.as_str(),
                    crate::escape::line(&approval.title),
                    approval
                        .artifact
                        .as_ref()
                        .map_or_else(String::new, plan_core::Artifact::fingerprint),
                    approval.session_id.as_str(),
                )
            })
            .collect()
    };
    let awaiting = client
        .tool_list_awaiting(&ToolListAwaitingParams { session_id: None })
        .map_err(refused)?;
    let project_option = if named {
        format!(" --project {}", shell_word(&root_text(project)))
    } else {
        String::new()
    };
    for call in &awaiting.calls {
        text.push_str(&held_call(call, &project_option));
    }
    said(&text)
}

/// One call held for a person, as `pending` lists it: its id, tool,
/// session and permission mode, what it does (escaped: agent text), and
/// the commands that confirm and decline it.
pub(crate) fn held_call(call: &AwaitingCall, project_option: &str) -> String {
    let what = match call.input.get("command").and_then(Value::as_str) {
        Some(command) if call.tool == plan_core::BASH => command.to_owned(),
        Some(_) | None => call.input.to_string(),
    };
    let confirm = format!(
        "plan-checkpoint codex confirm --session {} {}{project_option}",
        shell_word(&crate::escape::line(call.session_id.as_str())),
        shell_word(&crate::escape::line(call.call_id.as_str())),
    );
    format!(
        "{}  {}  session {}  waits for you ({})\n  {}\n  {confirm}\n  {confirm} --decline\n",
        crate::escape::line(call.call_id.as_str()),
        crate::escape::line(&call.tool),
        crate::escape::line(call.session_id.as_str()),
        call.permission_mode.as_str(),
        crate::escape::line(&what),
    )
}

// ------------------------------------------------------------------- hook

/// What Codex's hook input says, as far as this mapping is concerned.
struct HookCall {
    event: String,
    session_id: SessionId,
    turn_id: String,
    transcript: Option<PathBuf>,
    cwd: String,
    tool: String,
    input: Value,
    call_id: String,
    stop_hook_active: bool,
}

impl HookCall {
    fn read(input: &Value) -> Option<HookCall> {
        let text = |name: &str| input.get(name).and_then(Value::as_str).map(str::to_owned);
        // The thread's own session, unless the driver that started this
        // Codex named the approved plan's (`codex implement`).
        let thread = text("session_id")?;
        let session = std::env::var(crate::codex_driver::SESSION_VARIABLE)
            .ok()
            .filter(|named| !named.is_empty())
            .unwrap_or_else(|| format!("codex-{thread}"));
        Some(HookCall {
            event: text("hook_event_name")?,
            session_id: SessionId::from(session),
            turn_id: text("turn_id").unwrap_or_default(),
            transcript: text("transcript_path").map(PathBuf::from),
            cwd: text("cwd")?,
            tool: text("tool_name").unwrap_or_default(),
            input: input.get("tool_input").cloned().unwrap_or(Value::Null),
            call_id: text("tool_use_id").unwrap_or_default(),
            stop_hook_active: input.get("stop_hook_active").and_then(Value::as_bool) == Some(true),
        })
    }
}

/// Answers one hook; never fails as a process (Codex would run the call).
fn hook() -> i32 {
    let mut text = String::new();
    let answer = match std::io::stdin().take(MAX_HOOK_INPUT).read_to_string(&mut text) {
        Ok(_) => match serde_json::from_str::<Value>(&text)
            .ok()
            .as_ref()
            .and_then(HookCall::read)
        {
            Some(call) => answer(&call),
            None => Some(deny(
                "INVALID_PARAMS: plan-checkpoint could not read this hook's input",
            )),
        },
        Err(_) => Some(deny(
            "INVALID_PARAMS: plan-checkpoint could not read this hook's input",
        )),
    };
    if let Some(answer) = answer {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{answer}").and_then(|()| out.flush());
    }
    exit::OK
}

fn answer(call: &HookCall) -> Option<Value> {
    let Some(root) = project_root(Path::new(&call.cwd)) else {
        // Not a project set up for the checkpoint: nothing changes.
        return None;
    };
    let project = Project::at(&root);
    let phase = phase_of(call);
    match (call.event.as_str(), phase) {
        ("PreToolUse", phase) => Some(pre_tool_use(call, &project, phase)),
        ("PermissionRequest", phase) => permission_request(call, &project, phase),
        ("Stop", Mode::Plan) => plan_stop(call, &project),
        ("Stop", Mode::Agent) => {
            // The approved work (or the prompt's) is done: the turn ends
            // on the host, and the execution is recorded completed.
            if let Ok(mut client) = connect(&project) {
                let mut session =
                    AgentSession::new(&mut client, call.session_id.clone(), root_text(&project));
                if let Ok(turn) = session.ensure_turn(Mode::Agent, "Codex") {
                    let _ = session.finish_turn(&turn);
                }
            }
            None
        }
        (_, _) => None,
    }
}

/// The project a hook belongs to: the nearest directory from `cwd` up
/// whose `.codex/hooks.json` holds this adapter's hooks.
fn project_root(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .find(|directory| {
            std::fs::read_to_string(directory.join(".codex").join("hooks.json"))
                .is_ok_and(|text| text.contains(" codex hook"))
        })
        .map(Path::to_path_buf)
}

fn root_text(project: &Project) -> String {
    project.root.display().to_string()
}

/// The transcript's lines, as JSON (bounded; unreadable lines skipped).
fn transcript(call: &HookCall) -> Vec<Value> {
    let Some(path) = &call.transcript else {
        return Vec::new();
    };
    let mut text = String::new();
    let read = std::fs::File::open(path).and_then(|file| file.take(MAX_TRANSCRIPT).read_to_string(&mut text));
    if read.is_err() {
        return Vec::new();
    }
    text.lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The phase of the hook's turn: the transcript's collaboration mode for
/// it, `default` being the Agent phase; anything else is plan.
fn phase_of(call: &HookCall) -> Mode {
    let mode = transcript(call)
        .iter()
        .filter(|line| line.get("type").and_then(Value::as_str) == Some("turn_context"))
        .filter(|line| {
            line.pointer("/payload/turn_id").and_then(Value::as_str) == Some(call.turn_id.as_str())
        })
        .filter_map(|line| {
            line.pointer("/payload/collaboration_mode/mode")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .next_back();
    match mode.as_deref() {
        Some("default") => Mode::Agent,
        Some(_) | None => Mode::Plan,
    }
}

fn pre_tool_use(call: &HookCall, project: &Project, phase: Mode) -> Value {
    match pre_tool_use_on_host(call, project, phase) {
        Ok(answer) => answer,
        Err(error) => deny(&error.text()),
    }
}

fn pre_tool_use_on_host(call: &HookCall, project: &Project, phase: Mode) -> Result<Value, ClientError> {
    let mut client = connect_or_start(project)?;
    let mut session = AgentSession::new(&mut client, call.session_id.clone(), root_text(project));
    let turn = session.ensure_turn(phase, prompt_of(phase))?;
    let call_id = CallId::from(call.call_id.clone());
    let is_shell = call.tool == plan_core::BASH;
    let command = call
        .input
        .get("command")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if is_shell && phase == Mode::Plan {
        let Some(command) = command else {
            return Ok(deny("INVALID_COMMAND_INPUT: the shell call has no command"));
        };
        return registered(&mut session, &turn.turn_id, call, project, &command);
    }
    // The host's table: in plan, what Plan allows; after an approval, what
    // the chosen mode allows. A shell call carries its working directory.
    let input = match (&command, is_shell) {
        (Some(command), true) => json!({"command": command, "cwd": call.cwd}),
        _ => call.input.clone(),
    };
    let tool_call = ToolCall {
        call_id: call_id.clone(),
        name: call.tool.clone(),
        input,
    };
    let mut decided = session.decide(&turn.turn_id, tool_call.clone())?;
    let deadline = Instant::now() + hold_limit();
    while decided.decision == ToolCallDecision::Confirm {
        // Codex has no "ask" a hook can give: the call waits here while a
        // person decides on the host (`plan-checkpoint codex confirm`).
        if Instant::now() >= deadline {
            return Ok(deny(&format!(
                "TOOL_CONFIRMATION_NOT_PENDING: nobody confirmed call {} in time; ask the person to confirm it (plan-checkpoint codex confirm --session {} {}) and try again",
                call.call_id,
                call.session_id.as_str(),
                call.call_id
            )));
        }
        std::thread::sleep(CONFIRMATION_POLL);
        decided = session.decide(&turn.turn_id, tool_call.clone())?;
    }
    if let Some(error) = &decided.error {
        return Ok(deny(&format!("{}: {}", error.code.as_str(), error.message)));
    }
    match (is_shell, command) {
        (true, Some(command)) => registered(&mut session, &turn.turn_id, call, project, &command),
        // Allowed by the host: Codex's own checks still apply.
        _ => Ok(json!({})),
    }
}

/// How long a hook may hold a call for a person: within its own time
/// limit, which `install` sets past the plan's deadline.
fn hold_limit() -> Duration {
    let ms = std::env::var("PLAN_CHECKPOINT_APPROVAL_TTL_MS")
        .ok()
        .and_then(|value| value.parse::<u64>().ok())
        .unwrap_or(u64::try_from(plan_core::Limits::DEFAULT_APPROVAL_TTL_MS).unwrap_or(0));
    Duration::from_millis(ms)
}

/// Registers the shell call with the host and rewrites it into the client
/// that runs it by reference.
fn registered(
    session: &mut AgentSession<'_, LineTransport>,
    turn: &TurnId,
    call: &HookCall,
    project: &Project,
    command: &str,
) -> Result<Value, ClientError> {
    let registered = session.client().command_register(&CommandRegisterParams {
        session_id: call.session_id.clone(),
        turn_id: turn.clone(),
        call_id: CallId::from(call.call_id.clone()),
        command: command.to_owned(),
        cwd: Some(call.cwd.clone()),
        timeout_ms: None,
    });
    let reference = match registered {
        Ok(registered) => registered.reference,
        Err(ClientError::Refused { code, message, .. }) => {
            return Ok(deny(&format!("{}: {message}", code.as_str())));
        }
        Err(other) => return Err(other),
    };
    let rewritten = client_command(project, &call.session_id, &reference);
    Ok(json!({"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "allow",
        "permissionDecisionReason": "plan-checkpoint: the host runs this command in its sandbox",
        "updatedInput": {"command": rewritten},
    }}))
}

/// The rewritten shell call: this binary's `codex run` with the host's
/// socket (as this hook reached it), the session and the reference,
/// spelled as the exec-policy rule names it (Codex matches the rule only
/// on plain words, so a word is not quoted unless it must be).
fn client_command(project: &Project, session: &SessionId, reference: &str) -> String {
    format!("{}{}", client_prefix(project, session), shell_word(reference))
}

/// [`client_command`] up to its reference.
fn client_prefix(project: &Project, session: &SessionId) -> String {
    format!(
        "{} codex run --socket {} --session {} ",
        shell_word(&this_program().display().to_string()),
        shell_word(&project.socket.display().to_string()),
        shell_word(session.as_str()),
    )
}

/// Whether `command` is exactly the client this hook rewrites a shell call
/// into, for this project and session, with nothing else in it: a
/// reference of plain hexadecimal digits and no other shell text.
fn is_client_command(command: &str, project: &Project, session: &SessionId) -> bool {
    command
        .strip_prefix(client_prefix(project, session).as_str())
        .is_some_and(|reference| {
            !reference.is_empty() && reference.chars().all(|character| character.is_ascii_hexdigit())
        })
}

/// `text` as one `sh` word: as it is when it holds nothing the shell
/// would read, else single-quoted.
fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|character| character.is_ascii_alphanumeric() || "_./:@%+=,-".contains(character));
    if plain {
        text.to_owned()
    } else {
        shell_quoted(Path::new(text))
    }
}

fn deny(reason: &str) -> Value {
    json!({"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": reason,
    }})
}

/// Codex's own prompt (before it runs a call outside its sandbox or past
/// its approval policy): the exact client of a host-registered command is
/// the host's decision already; any other call is put to the host as its
/// phase has it, and Codex's prompt gets the host's answer. In plan a shell
/// call is registered (decided as every plan-mode shell call, and run only
/// by the host: Codex never runs it itself) and any other call is decided
/// on the Plan table; after an approval a call the host allows (or a person
/// confirmed while its `PreToolUse` hook held it) is allowed, since Codex's
/// own sandbox is read-only and asks for what the host's sandbox would
/// allow, and anything else is Codex's own prompt's to ask.
fn permission_request(call: &HookCall, project: &Project, phase: Mode) -> Option<Value> {
    let command = call
        .input
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let is_shell = call.tool == plan_core::BASH;
    // Codex names no call in this hook: the call is the one its transcript
    // recorded with this input, so that the host answers for the call it
    // decided (and a person perhaps confirmed) in `PreToolUse`.
    let recorded;
    let call = match (is_shell, call.call_id.is_empty(), recorded_call(call)) {
        (false, true, Some(found)) => {
            recorded = found;
            &recorded
        }
        // Without the call, after an approval, Codex's own prompt asks.
        (false, true, None) if phase == Mode::Agent => return None,
        _ => call,
    };
    let decision = if is_shell && is_client_command(command, project, &call.session_id) {
        json!({"behavior": "allow"})
    } else {
        match (phase, host_answer(call, project, phase, command)) {
            (_, Ok(HostAnswer::Allowed)) => json!({"behavior": "allow"}),
            (Mode::Plan, Ok(HostAnswer::Refused(reason))) | (Mode::Plan, Err(reason)) => {
                json!({"behavior": "deny", "message": reason})
            }
            (Mode::Agent, Ok(HostAnswer::Refused(_)) | Err(_)) => return None,
        }
    };
    Some(json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}))
}

/// The call of the hook's turn that Codex's transcript recorded with the
/// hook's tool and input, newest first: `call` with its id and its input as
/// `PreToolUse` was given it. Codex gives a custom tool's text (an
/// `apply_patch`) to `PermissionRequest` without its trailing newline, and a
/// function's arguments parsed.
fn recorded_call(call: &HookCall) -> Option<HookCall> {
    let asked = call.input.get("command").and_then(Value::as_str);
    transcript(call).iter().rev().find_map(|line| {
        let item = line.get("payload")?;
        if line.get("type").and_then(Value::as_str) != Some("response_item")
            || item.get("name").and_then(Value::as_str) != Some(call.tool.as_str())
            || item
                .pointer("/internal_chat_message_metadata_passthrough/turn_id")
                .and_then(Value::as_str)
                .is_some_and(|turn| turn != call.turn_id)
        {
            return None;
        }
        let input = match item.get("type").and_then(Value::as_str)? {
            "custom_tool_call" => {
                let text = item.get("input").and_then(Value::as_str)?;
                (Some(text.trim_end()) == asked.map(str::trim_end)).then(|| json!({"command": text}))?
            }
            "function_call" => {
                let arguments = item.get("arguments").and_then(Value::as_str)?;
                let parsed: Value = serde_json::from_str(arguments).ok()?;
                (parsed == call.input).then_some(parsed)?
            }
            _ => return None,
        };
        Some(HookCall {
            event: call.event.clone(),
            session_id: call.session_id.clone(),
            turn_id: call.turn_id.clone(),
            transcript: call.transcript.clone(),
            cwd: call.cwd.clone(),
            tool: call.tool.clone(),
            input,
            call_id: item.get("call_id").and_then(Value::as_str)?.to_owned(),
            stop_hook_active: call.stop_hook_active,
        })
    })
}

/// What the host said of a call Codex's own prompt asks about.
enum HostAnswer {
    /// The host's table allows it now.
    Allowed,
    /// Not for Codex to run: the host's code and sentence, or (a shell
    /// call the host took) what the host does with it.
    Refused(String),
}

/// Puts `call` to the host in the session's turn of `phase` (see
/// [`permission_request`]); `Err` is why the host could not answer.
fn host_answer(call: &HookCall, project: &Project, phase: Mode, command: &str) -> Result<HostAnswer, String> {
    if call.tool == plan_core::BASH && phase == Mode::Agent {
        // After an approval the host runs shell calls only through its
        // client; Codex's own prompt asks about any other.
        return Ok(HostAnswer::Refused(String::new()));
    }
    let failed = |error: ClientError| error.text();
    let mut client = connect_or_start(project).map_err(failed)?;
    let mut session = AgentSession::new(&mut client, call.session_id.clone(), root_text(project));
    let turn = session.ensure_turn(phase, prompt_of(phase)).map_err(failed)?;
    if call.tool == plan_core::BASH {
        let registered = session.client().command_register(&CommandRegisterParams {
            session_id: call.session_id.clone(),
            turn_id: turn.turn_id,
            call_id: CallId::from(call.call_id.clone()),
            command: command.to_owned(),
            cwd: Some(call.cwd.clone()),
            timeout_ms: None,
        });
        return Ok(HostAnswer::Refused(match registered {
            Ok(_) => "plan-checkpoint: the host runs plan-mode shell commands itself, in its read-only sandbox; Codex does not run them outside its own".to_owned(),
            Err(error) => error.text(),
        }));
    }
    let decided = session
        .decide(
            &turn.turn_id,
            ToolCall {
                call_id: CallId::from(call.call_id.clone()),
                name: call.tool.clone(),
                input: call.input.clone(),
            },
        )
        .map_err(failed)?;
    Ok(match (decided.decision, decided.error) {
        (_, Some(error)) => HostAnswer::Refused(format!("{}: {}", error.code.as_str(), error.message)),
        (ToolCallDecision::Allow, None) => HostAnswer::Allowed,
        (decision, None) => HostAnswer::Refused(format!("the host's decision is {}", decision.as_str())),
    })
}

/// The prompt a turn the hooks start on the host is recorded with.
fn prompt_of(phase: Mode) -> &'static str {
    match phase {
        Mode::Plan => "Codex plan mode",
        Mode::Agent => "Codex",
    }
}

/// The plan of the hook's turn: its `Plan` item's exact bytes and id.
fn turn_plan(call: &HookCall) -> Option<(String, String)> {
    transcript(call)
        .iter()
        .filter(|line| line.pointer("/payload/type").and_then(Value::as_str) == Some("item_completed"))
        .filter(|line| {
            line.pointer("/payload/turn_id").and_then(Value::as_str) == Some(call.turn_id.as_str())
        })
        .filter(|line| line.pointer("/payload/item/type").and_then(Value::as_str) == Some("Plan"))
        .filter_map(|line| {
            let text = line.pointer("/payload/item/text").and_then(Value::as_str)?;
            let id = line
                .pointer("/payload/item/id")
                .and_then(Value::as_str)
                .unwrap_or("plan");
            Some((id.to_owned(), text.to_owned()))
        })
        .next_back()
}

/// The shell calls of the hook's turn that never reached the host: their
/// hooks did not run (untrusted, the binary moved, Codex skipped them).
fn unseen_shell_calls(call: &HookCall, session: &mut AgentSession<'_, LineTransport>) -> Vec<String> {
    let ids: Vec<String> = transcript(call)
        .iter()
        .filter(|line| line.pointer("/payload/type").and_then(Value::as_str) == Some("function_call"))
        .filter(|line| {
            matches!(
                line.pointer("/payload/name").and_then(Value::as_str),
                Some("exec_command" | "shell" | "shell_command")
            )
        })
        .filter_map(|line| {
            line.pointer("/payload/call_id")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    ids.into_iter()
        .filter(|id| {
            let seen = session.client().command_get(&CommandGetParams {
                session_id: call.session_id.clone(),
                call_id: CallId::from(id.clone()),
            });
            matches!(
                seen,
                Err(ClientError::Refused {
                    code: ErrorCode::CommandNotFound,
                    ..
                })
            )
        })
        .collect()
}

fn block(reason: &str) -> Value {
    json!({"decision": "block", "reason": reason})
}

/// `Stop` in plan: the turn's plan submitted and decided.
fn plan_stop(call: &HookCall, project: &Project) -> Option<Value> {
    let mut client = match connect_or_start(project) {
        Ok(client) => client,
        Err(error) if call.stop_hook_active => {
            return Some(json!({"systemMessage": format!("plan-checkpoint: {}", error.text())}));
        }
        Err(error) => return Some(block(&error.text())),
    };
    let mut session = AgentSession::new(&mut client, call.session_id.clone(), root_text(project));
    let unseen = unseen_shell_calls(call, &mut session);
    let warning = (!unseen.is_empty()).then(|| {
        format!(
            "plan-checkpoint: {} shell call(s) of this conversation never reached the host ({}): Codex ran them without the checkpoint's hooks (untrusted or moved?). Run `plan-checkpoint codex doctor`.",
            unseen.len(),
            unseen.join(", ")
        )
    });
    let Some((plan_id, markdown)) = turn_plan(call) else {
        return warning.map(|warning| json!({"systemMessage": warning}));
    };
    let said = |text: String| {
        let text = match &warning {
            Some(warning) => format!("{text}\n\n{warning}"),
            None => text,
        };
        json!({"systemMessage": text})
    };
    if call.stop_hook_active && session.refused_already(&markdown).unwrap_or(false) {
        // The turn went on after this very plan was refused and the model
        // wrote no other: it ends, rather than asking again.
        return Some(said(
            "plan-checkpoint: this plan was not approved and no new plan was written; plan again to submit one."
                .to_owned(),
        ));
    }
    let outcome = submit_and_decide(&mut session, &plan_id, &markdown);
    Some(match outcome {
        Ok(PlanOutcome::Approved { approval, .. }) => said(format!(
            "plan-checkpoint: plan {id} approved ({}); its exact bytes are {}. To implement it from those bytes rather than from this conversation, run `plan-checkpoint codex implement {id}`.",
            approval.permission_mode.map_or("?", PermissionMode::as_str),
            approval
                .artifact
                .as_ref()
                .map_or_else(String::new, |artifact| artifact.path.clone()),
            id = approval.id.as_str(),
        )),
        // Codex goes on with the reason, which the model and the person
        // read: what the turn missed is said there too.
        Ok(PlanOutcome::NotApproved { reason, .. }) => block(&match &warning {
            Some(warning) => format!("{reason}\n\n{warning}"),
            None => reason,
        }),
        Err(error) => block(&error.text()),
    })
}

fn submit_and_decide(
    session: &mut AgentSession<'_, LineTransport>,
    plan_id: &str,
    markdown: &str,
) -> Result<PlanOutcome, ClientError> {
    let turn = session.ensure_turn(Mode::Plan, "Codex plan mode")?;
    let pending = session.submit_plan(
        &turn.turn_id,
        CallId::from(plan_id.to_owned()),
        &plan_client::agent::plan_title(markdown, "Codex plan"),
        markdown,
        QUESTION,
    )?;
    let pending = match pending {
        Ok(pending) => pending,
        Err(error) => {
            return Err(ClientError::Refused {
                method: "turn/toolCalls",
                code: error.code,
                message: error.message,
            });
        }
    };
    let decided = session.wait_for_decision(&pending)?;
    session.outcome(decided)
}

// -------------------------------------------------------------------- run

/// The client the rewritten shell call runs: the registered command, run
/// by the host, its output streamed; the process exits as it exited.
fn run_registered(socket: &Path, session: &str, reference: &str) -> i32 {
    match stream_registered(socket, session, reference) {
        Ok(status) => status,
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "plan-checkpoint: {}", error.text());
            126
        }
    }
}

fn stream_registered(socket: &Path, session: &str, reference: &str) -> Result<i32, ClientError> {
    // Never a host started from here: this process runs outside Codex's
    // sandbox on whatever the model may have typed. The socket is the one
    // the hook reached, not one this process's environment would name.
    let mut client = Client::connect(LineTransport::connect(socket)?, CLIENT)?;
    let session_id = SessionId::from(session.to_owned());
    let run = client.command_run(&CommandRunParams {
        session_id: session_id.clone(),
        reference: reference.to_owned(),
    })?;
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    // Streaming creates no session: no workspace root is needed.
    let mut agent = AgentSession::new(&mut client, session_id, String::new());
    let ended = agent.stream_command(run, &mut |stream, chunk| {
        let _ = match stream {
            OutputStream::Stdout => stdout.write_all(chunk.as_bytes()).and_then(|()| stdout.flush()),
            OutputStream::Stderr => stderr.write_all(chunk.as_bytes()).and_then(|()| stderr.flush()),
        };
    })?;
    if let Some(code) = ended.error_code {
        let _ = writeln!(
            stderr,
            "plan-checkpoint: the command did not run: {}: {}",
            code.as_str(),
            code.message()
        );
    }
    Ok(exit_status(&ended).unwrap_or(1))
}
