//! `plan-checkpoint claude-code`: Claude Code's hooks mapped onto the
//! project's host (`claude-code.md`). A thin mapping: Claude Code's hook
//! events become the host's calls ([`crate::agent_host`]) and the host's
//! answers become hook answers; every rule (what Plan allows, the
//! sandbox, the plan's bytes and hash, the deadline, the decision) is the
//! host's.
//!
//! - Plan-mode Bash: `PreToolUse` rewrites the command into `claude-code
//!   bash` (the original in a quoted here-document), which asks the host to
//!   run it in the read-only Plan sandbox and streams its output and exit
//!   status; `PermissionRequest` allows exactly such a command.
//! - Other plan-mode tools: the host's table decides (a deny carries the
//!   host's code and sentence); writes to Claude Code's own plan file are
//!   Claude Code's drafting, outside the workspace, and left to it.
//! - `ExitPlanMode`: a SubmitPlan of the plan's exact bytes; the hook holds
//!   the call until a person decides (card, `claude-code approve`/`reject`)
//!   or the deadline passes, so Claude Code's own dialog never decides.
//!   Approved, the plan Claude Code proceeds with is the artifact's bytes
//!   (hash checked) and its mode follows the chosen permission mode.
//!
//! It must not decide policy, and must never let a plan-mode Bash run
//! outside the host's sandbox: anything it cannot do is a deny.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use plan_core::{ApprovalStatus, PermissionMode};
use serde_json::{Value, json};

use crate::agent_host::{HostClient, HostFailure, Project};
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

/// What `claude-code` does.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ClaudeCodeCommand {
    /// Set Claude Code up for this checkpoint in a project: writes its
    /// hooks and `useAutoModeDuringPlan: false` into the project's
    /// `.claude/settings.local.json` (merged with what is there) and says
    /// what it wrote and why.
    Install {
        /// The project (default: the current directory).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
    },
    /// Answer one Claude Code hook (its JSON on stdin, the answer on
    /// stdout). Claude Code runs this; `install` sets it up.
    Hook,
    /// Run a plan-mode Bash command through the host's read-only sandbox
    /// (the command on stdin), streaming its output; exits as it exited.
    /// The hook rewrites plan-mode Bash calls into this.
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
    /// private socket and the approval card on loopback. The hooks start
    /// it; it ends after 15 minutes without a client.
    Host {
        /// The project.
        #[arg(long, value_name = "DIR")]
        project: PathBuf,
    },
    /// List the project's pending plans (id, title, fingerprint).
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
    /// Print a pending plan's approval card URL (its token is yours: keep
    /// it out of logs).
    CardUrl {
        /// The approval id.
        approval_id: String,
        /// The project (default: the current directory).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
    },
}

/// Runs one `claude-code` command.
pub(crate) fn run(command: ClaudeCodeCommand) -> Result<i32, Failure> {
    match command {
        ClaudeCodeCommand::Install { project } => install(&Project::at(&project_dir(project)?)),
        ClaudeCodeCommand::Hook => Ok(hook()),
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
        ClaudeCodeCommand::Host { project } => host(&Project::at(&project)),
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
            let mut client = connect(&Project::at(&project_dir(project)?))?;
            let url = client
                .call("plan/cardUrl", json!({"approvalId": approval_id}))
                .map_err(refused)?;
            let url = url.get("url").and_then(Value::as_str).unwrap_or_default();
            crate::render::write_stdout(format!("{url}\n").as_bytes())?;
            Ok(exit::OK)
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

/// The command line Claude Code runs for a hook.
fn hook_command() -> String {
    format!("{} claude-code hook", shell_quoted(&this_program()))
}

/// The start of every rewritten plan-mode Bash command.
fn bash_prefix() -> String {
    format!("{} claude-code bash ", shell_quoted(&this_program()))
}

// ------------------------------------------------------------------ install

fn install(project: &Project) -> Result<i32, Failure> {
    let directory = project.root.join(".claude");
    let path = directory.join("settings.local.json");
    let mut settings: Value = match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|error| Failure::new(exit::FAILURE, format!("{}: not JSON: {error}", path.display())))?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => json!({}),
        Err(error) => {
            return Err(Failure::new(
                exit::FAILURE,
                format!("{}: {error}", path.display()),
            ));
        }
    };
    let Some(object) = settings.as_object_mut() else {
        return Err(Failure::new(
            exit::FAILURE,
            format!("{}: not a JSON object", path.display()),
        ));
    };
    object.insert("useAutoModeDuringPlan".to_owned(), Value::Bool(false));
    let hooks = object.entry("hooks").or_insert_with(|| json!({}));
    let Some(hooks) = hooks.as_object_mut() else {
        return Err(Failure::new(
            exit::FAILURE,
            format!("{}: `hooks` is not an object", path.display()),
        ));
    };
    let command = hook_command();
    // The PreToolUse hook holds ExitPlanMode until the plan's deadline: its
    // time limit must outlast the deadline, so the model reads the host's
    // `PLAN_APPROVAL_TIMEOUT`, not Claude Code's killed hook.
    let hold = approval_ttl_ms() / 1000 + HOOK_MARGIN_SECONDS;
    let hooked = [
        ("PreToolUse", "*", hold),
        ("PermissionRequest", "*", 60),
        // Only the tools a permission mode may ask about (Bash confirms
        // itself), so no other call pays for a hook after it ran.
        ("PostToolUse", CONFIRMABLE_TOOLS, 60),
    ];
    for (event, matcher, timeout) in hooked {
        let entries = hooks.entry(event).or_insert_with(|| json!([]));
        let Some(entries) = entries.as_array_mut() else {
            return Err(Failure::new(
                exit::FAILURE,
                format!("{}: `hooks.{event}` is not a list", path.display()),
            ));
        };
        // One entry of ours, replacing an earlier one (another path of the
        // binary included).
        entries.retain(|entry| !entry.to_string().contains(" claude-code hook"));
        entries.push(json!({
            "matcher": matcher,
            "hooks": [{"type": "command", "command": command, "timeout": timeout}]
        }));
    }
    std::fs::create_dir_all(&directory)
        .map_err(|error| Failure::new(exit::FAILURE, format!("{}: {error}", directory.display())))?;
    let text = serde_json::to_string_pretty(&settings)
        .map_err(|error| Failure::new(exit::FAILURE, error.to_string()))?;
    std::fs::write(&path, format!("{text}\n"))
        .map_err(|error| Failure::new(exit::FAILURE, format!("{}: {error}", path.display())))?;
    let report = format!(
        "Wrote {path}:\n\
         - hooks.PreToolUse (every tool, timeout {hold} s, past the plan's deadline): {command}\n  \
           plan-mode Bash runs in the host's read-only sandbox, other plan-mode tools follow the\n  \
           host's table, and ExitPlanMode waits for your decision (card or `plan-checkpoint\n  \
           claude-code approve`), up to the plan's deadline.\n\
         - hooks.PermissionRequest (every tool): the same command; it passes the rewritten\n  \
           plan-mode Bash and your decision on a plan, so Claude Code's own dialog never decides.\n\
         - hooks.PostToolUse (the tools a mode may ask about): the same command; after an\n  \
           approval, a call the host asked you to confirm (in Claude Code's dialog) is recorded\n  \
           as confirmed once it ran.\n\
         - useAutoModeDuringPlan: false: otherwise plan-mode Bash goes to a remote classifier\n  \
           that skips these hooks (Claude Code honours this in local or user settings only).\n\
         The host starts with the first hook; its database is {database}.\n",
        path = path.display(),
        database = project.database.display(),
    );
    crate::render::write_stdout(report.as_bytes())?;
    Ok(exit::OK)
}

/// The Claude Code tools besides Bash that a permission mode may ask a
/// person to confirm (the host's file-changing tools and its others), as a
/// hook matcher.
const CONFIRMABLE_TOOLS: &str = "Write|Edit|MultiEdit|NotebookEdit|WebFetch|WebSearch|Task|Agent";

/// How long past the plan's deadline the holding hook may still run.
const HOOK_MARGIN_SECONDS: i64 = 300;

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
fn hook() -> i32 {
    let mut text = String::new();
    if std::io::stdin()
        .take(MAX_HOOK_INPUT)
        .read_to_string(&mut text)
        .is_err()
    {
        return exit::OK;
    }
    let Ok(input) = serde_json::from_str::<Value>(&text) else {
        return exit::OK;
    };
    if let Some(answer) = answer(&input) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{answer}").and_then(|()| out.flush());
    }
    exit::OK
}

/// What one hook input asks, as far as this mapping is concerned.
struct HookCall<'a> {
    /// Claude Code's working directory, where its Bash runs.
    cwd: String,
    event: &'a str,
    tool: &'a str,
    input: &'a Value,
    call_id: String,
    plan_mode: bool,
    project: Project,
    session_id: String,
}

fn answer(input: &Value) -> Option<Value> {
    let text = |name: &str| input.get(name).and_then(Value::as_str);
    let event = text("hook_event_name")?;
    let call = HookCall {
        cwd: text("cwd")?.to_owned(),
        event,
        tool: text("tool_name")?,
        input: input.get("tool_input")?,
        call_id: text("tool_use_id").unwrap_or_default().to_owned(),
        plan_mode: text("permission_mode") == Some("plan"),
        project: Project::at(Path::new(text("cwd")?)),
        session_id: format!("claude-code-{}", text("session_id")?),
    };
    match (call.event, call.tool, call.plan_mode) {
        ("PreToolUse", "ExitPlanMode", _) => Some(exit_plan(&call)),
        ("PermissionRequest", "ExitPlanMode", _) => Some(exit_plan_permission(&call)),
        ("PreToolUse", "Bash", true) => Some(plan_bash(&call)),
        ("PreToolUse", _, true) => plan_tool(&call),
        ("PreToolUse", _, false) => Some(agent_tool(&call)),
        ("PermissionRequest", "Bash", _) => bash_permission(&call),
        // A call that ran in the Agent phase: if the host was waiting for a
        // person's confirmation of it (given in Claude Code's dialog), the
        // host records it now. Host-run Bash confirms itself as it starts.
        ("PostToolUse", tool, false) if tool != plan_core::BASH => {
            record_confirmation(&call);
            None
        }
        // Everything else stays with Claude Code: a read-only tool the host
        // allowed, or a confirmation the host asked for (its dialog).
        (_, _, _) => None,
    }
}

fn pre_tool_use(decision: &str, reason: &str, updated: Option<Value>) -> Value {
    let mut output = json!({
        "hookEventName": "PreToolUse",
        "permissionDecision": decision,
        "permissionDecisionReason": reason,
    });
    if let (Some(updated), Some(object)) = (updated, output.as_object_mut()) {
        object.insert("updatedInput".to_owned(), updated);
    }
    json!({"hookSpecificOutput": output})
}

fn deny(reason: &str) -> Value {
    pre_tool_use("deny", reason, None)
}

fn permission(decision: Value) -> Value {
    json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}})
}

/// The host, started when none runs.
fn host_for(project: &Project) -> Result<HostClient, HostFailure> {
    let args: Vec<OsString> = vec![
        "claude-code".into(),
        "host".into(),
        "--project".into(),
        project.root.clone().into_os_string(),
    ];
    HostClient::connect_or_start(project, &this_program(), &args, CLIENT)
}

/// The session's active Plan turn, making the session (bound to the
/// project, in Plan) and the turn where missing.
fn plan_turn(client: &mut HostClient, project: &Project, session_id: &str) -> Result<String, HostFailure> {
    let session = session_of(client, project, session_id, "plan")?;
    if let Some(turn) = session.get("activeTurn").filter(|turn| !turn.is_null()) {
        if turn.get("mode").and_then(Value::as_str) == Some("plan") {
            return turn_id_of(turn);
        }
        // An earlier phase's turn (Claude Code went back to plan mode):
        // it ends here.
        let turn_id = turn_id_of(turn)?;
        client.call(
            "turn/complete",
            json!({"sessionId": session_id, "turnId": turn_id}),
        )?;
    }
    start_turn(client, &session, session_id, "plan", PLAN_TURN_PROMPT)
}

/// The session, made (bound to the project, in `mode`) where missing.
fn session_of(
    client: &mut HostClient,
    project: &Project,
    session_id: &str,
    mode: &str,
) -> Result<Value, HostFailure> {
    match client.call("session/get", json!({"sessionId": session_id})) {
        Ok(session) => Ok(session),
        Err(failure) if failure.code == "SESSION_NOT_FOUND" => client.call(
            "session/create",
            json!({
                "sessionId": session_id,
                "workspaceRoot": project.root.display().to_string(),
                "mode": mode,
            }),
        ),
        Err(failure) => Err(failure),
    }
}

/// A new turn in `mode` (the session switched to it first where needed).
fn start_turn(
    client: &mut HostClient,
    session: &Value,
    session_id: &str,
    mode: &str,
    prompt: &str,
) -> Result<String, HostFailure> {
    if session.get("mode").and_then(Value::as_str) != Some(mode) {
        client.call(
            "session/configure",
            json!({"sessionId": session_id, "mode": mode}),
        )?;
    }
    let turn = client.call(
        "turn/start",
        json!({"sessionId": session_id, "prompt": prompt, "origin": "interactive"}),
    )?;
    turn_id_of(&turn)
}

/// One tool call decided by the host in the session's Plan turn.
fn decide_call(call: &HookCall<'_>, name: &str, input: Value) -> Result<(HostClient, Value), HostFailure> {
    let mut client = host_for(&call.project)?;
    let turn = plan_turn(&mut client, &call.project, &call.session_id)?;
    let results = client.call(
        "turn/toolCalls",
        json!({
            "sessionId": call.session_id,
            "turnId": turn,
            "calls": [{"callId": call.call_id, "name": name, "input": input}],
        }),
    )?;
    let result = results
        .pointer("/results/0")
        .cloned()
        .ok_or_else(|| HostFailure {
            code: "INTERNAL".into(),
            message: "turn/toolCalls gave no result".into(),
        })?;
    Ok((client, result))
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

fn plan_tool(call: &HookCall<'_>) -> Option<Value> {
    if drafts_the_plan_file(call) {
        return None;
    }
    match decide_call(call, call.tool, call.input.clone()) {
        Ok((_, result)) => refusal_of(&result).map(|reason| deny(&reason)),
        Err(failure) => Some(deny(&failure.text())),
    }
}

/// Whether the call writes Claude Code's own plan file (its plan drafting,
/// under its configuration directory, outside every workspace).
fn drafts_the_plan_file(call: &HookCall<'_>) -> bool {
    let Some(path) = call.input.get("file_path").and_then(Value::as_str) else {
        return false;
    };
    let configuration = std::env::var_os("CLAUDE_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".claude")));
    let Some(plans) = configuration.map(|directory| directory.join("plans")) else {
        return false;
    };
    let path = Path::new(path);
    path.parent() == Some(plans.as_path())
        && path.extension().is_some_and(|extension| extension == "md")
        && !path
            .components()
            .any(|part| part == std::path::Component::ParentDir)
}

fn plan_bash(call: &HookCall<'_>) -> Value {
    if call.input.get("command").and_then(Value::as_str).is_none() {
        return deny("INVALID_COMMAND_INPUT: the Bash call has no command");
    }
    // The host must be there, with its read-only sandbox, before the call
    // is let through (the `bash` client then runs it in the Plan turn).
    let client = match host_for(&call.project) {
        Ok(client) => client,
        Err(failure) => return deny(&failure.text()),
    };
    if let Some(failure) = client.plan_sandbox_refusal() {
        return deny(&failure.text());
    }
    pre_tool_use(
        "allow",
        "plan mode: the command runs in plan-checkpoint's read-only sandbox",
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
    let mut rewritten = format!(
        "{prefix}--project {project} --session {session} --call {call_id} --cwd {cwd}",
        prefix = bash_prefix(),
        project = shell_quoted(&call.project.root),
        session = shell_quoted(Path::new(&call.session_id)),
        call_id = shell_quoted(Path::new(&call.call_id)),
        cwd = shell_quoted(Path::new(&call.cwd)),
    );
    if let Some(timeout) = call.input.get("timeout").and_then(Value::as_u64) {
        rewritten.push_str(&format!(" --timeout-ms {timeout}"));
    }
    match phase {
        Phase::Plan => {}
        Phase::Agent { confirm: false } => rewritten.push_str(" --agent"),
        Phase::Agent { confirm: true } => rewritten.push_str(&format!(" --agent {NEEDS_CONFIRMATION}")),
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

/// Agent phase (after an approval, or after the person left plan mode
/// without one): every call on the host's permission table, in the
/// session's Agent turn. Bash is host-run in the workspace-write sandbox
/// (rewritten); a call the host allows runs without Claude Code asking; one
/// it wants confirmed is left to Claude Code's dialog (and a Bash call
/// confirms itself on the host when it runs, i.e. once accepted).
fn agent_tool(call: &HookCall<'_>) -> Value {
    let mut client = match host_for(&call.project) {
        Ok(client) => client,
        Err(failure) => return deny(&failure.text()),
    };
    let turn = match agent_turn(&mut client, &call.project, &call.session_id) {
        Ok(turn) => turn,
        Err(failure) => return deny(&failure.text()),
    };
    let mut input = call.input.clone();
    if call.tool == plan_core::BASH
        && let Some(object) = input.as_object_mut()
    {
        // The host binds a confirmation to the exact input it runs.
        let command = object.get("command").cloned().unwrap_or(Value::Null);
        let timeout = object.get("timeout").cloned();
        object.clear();
        object.insert("command".to_owned(), command);
        object.insert("cwd".to_owned(), Value::String(call.cwd.clone()));
        if let Some(timeout) = timeout {
            object.insert("timeoutMs".to_owned(), timeout);
        }
    }
    let results = client.call(
        "turn/toolCalls",
        json!({
            "sessionId": call.session_id,
            "turnId": turn,
            "calls": [{"callId": call.call_id, "name": call.tool, "input": input}],
        }),
    );
    let result = match results {
        Ok(results) => results.pointer("/results/0").cloned().unwrap_or(Value::Null),
        Err(failure) => return deny(&failure.text()),
    };
    if let Some(reason) = refusal_of(&result) {
        return deny(&reason);
    }
    let confirm = result.get("decision").and_then(Value::as_str) == Some("confirm");
    let decision = if confirm { "ask" } else { "allow" };
    if call.tool == plan_core::BASH {
        let reason = "the command runs through plan-checkpoint's host, in its workspace-write sandbox";
        return pre_tool_use(
            decision,
            reason,
            Some(rewritten_bash(call, Phase::Agent { confirm })),
        );
    }
    let reason = if confirm {
        "plan-checkpoint's permission mode asks a person to confirm this call"
    } else {
        "plan-checkpoint's permission mode allows this call"
    };
    pre_tool_use(decision, reason, None)
}

/// Tells the host that a call it wanted confirmed ran, i.e. the person
/// accepted it in Claude Code's dialog. A call that needed no confirmation
/// is refused by the host (`TOOL_CONFIRMATION_NOT_PENDING`), which is
/// fine: nothing is recorded twice.
fn record_confirmation(call: &HookCall<'_>) {
    let Ok(mut client) = HostClient::connect(&call.project, CLIENT) else {
        return;
    };
    let Ok(session) = client.call("session/get", json!({"sessionId": call.session_id})) else {
        return;
    };
    let Some(turn) = session.pointer("/activeTurn/turnId").and_then(Value::as_str) else {
        return;
    };
    let _ = client.call(
        "tool/confirm",
        json!({"sessionId": call.session_id, "turnId": turn, "callId": call.call_id, "allow": true}),
    );
}

/// The session's Agent turn: the active one; else the approved plan's
/// execution, started; else a new Agent turn. A Plan turn still active
/// means the person left plan mode without an approval: it is cancelled
/// (the host records it) before the Agent turn starts.
fn agent_turn(client: &mut HostClient, project: &Project, session_id: &str) -> Result<String, HostFailure> {
    let mut session = session_of(client, project, session_id, "agent")?;
    if let Some(turn) = session.get("activeTurn").filter(|turn| !turn.is_null()) {
        if turn.get("mode").and_then(Value::as_str) == Some("agent") {
            return turn_id_of(turn);
        }
        session = client.call("turn/cancel", json!({"sessionId": session_id}))?;
    }
    if let Some(execution) = session.get("activeExecutionId").and_then(Value::as_str) {
        client.call("execution/start", json!({"executionId": execution}))?;
        let session = client.call("session/get", json!({"sessionId": session_id}))?;
        if let Some(turn) = session.get("activeTurn").filter(|turn| !turn.is_null()) {
            return turn_id_of(turn);
        }
    }
    start_turn(client, &session, session_id, "agent", AGENT_TURN_PROMPT)
}

/// The `turnId` of a turn (an active turn, or `turn/start`'s answer).
fn turn_id_of(turn: &Value) -> Result<String, HostFailure> {
    turn.get("turnId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| HostFailure {
            code: "INTERNAL".into(),
            message: "the host gave a turn without an id".into(),
        })
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
        .then(|| permission(json!({"behavior": "allow"})))
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
        let Some(message) = client.next_notification(Some(std::time::Duration::from_secs(1)))? else {
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

/// `ExitPlanMode` before it runs: the plan submitted and decided.
fn exit_plan(call: &HookCall<'_>) -> Value {
    let Some(plan) = call.input.get("plan").and_then(Value::as_str) else {
        return deny("INVALID_PLAN_INPUT: ExitPlanMode carries no plan (write the plan file first)");
    };
    let input = json!({"title": plan_title(plan), "markdown": plan, "question": QUESTION});
    let (mut client, result) = match decide_call(call, plan_core::SUBMIT_PLAN, input) {
        Ok(decided) => decided,
        Err(failure) => return deny(&failure.text()),
    };
    if let Some(reason) = refusal_of(&result) {
        return deny(&reason);
    }
    let Some(approval_id) = result
        .pointer("/approval/id")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return deny("INTERNAL: the host submitted no approval");
    };
    let resolved = match wait_for_decision(&mut client, &approval_id) {
        Ok(resolved) => resolved,
        Err(failure) => return deny(&failure.text()),
    };
    match approved_plan(&mut client, &resolved) {
        Ok(bytes) => {
            // The Agent phase begins: the approved plan's execution turn.
            if let Some(execution) = resolved.get("executionId").and_then(Value::as_str)
                && let Err(failure) = client.call("execution/start", json!({"executionId": execution}))
            {
                return deny(&failure.text());
            }
            let mut updated = call.input.clone();
            if let Some(object) = updated.as_object_mut() {
                object.insert("plan".to_owned(), Value::String(bytes));
            }
            // No decision here: an `allow` would leave plan mode for
            // `default` at once, past the PermissionRequest hook that sets
            // the chosen mode. The approved input goes on to that hook.
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": updated}})
        }
        Err(reason) => deny(&reason),
    }
}

/// Waits for the approval to leave `pending`; returns it as resolved.
fn wait_for_decision(client: &mut HostClient, approval_id: &str) -> Result<Value, HostFailure> {
    loop {
        let approval = client.call("plan/get", json!({"approvalId": approval_id}))?;
        if approval.get("status").and_then(Value::as_str) != Some("pending") {
            return Ok(approval);
        }
        // Woken by the host's notification, or after a while to look again
        // (one dropped under load is not waited for).
        let _ = client.next_notification(Some(std::time::Duration::from_secs(5)))?;
    }
}

/// The approved plan's bytes, checked against its recorded SHA-256; or the
/// sentence the model reads for any other outcome.
fn approved_plan(client: &mut HostClient, approval: &Value) -> Result<String, String> {
    let status = approval.get("status").and_then(Value::as_str).unwrap_or_default();
    let approval_id = approval.get("id").and_then(Value::as_str).unwrap_or_default();
    match ApprovalStatus::parse(status) {
        Some(ApprovalStatus::Approved) => {}
        Some(ApprovalStatus::Expired) => {
            return Err(format!(
                "PLAN_APPROVAL_TIMEOUT: {}",
                plan_core::ErrorCode::PlanApprovalTimeout.message()
            ));
        }
        Some(ApprovalStatus::Rejected) => {
            // A rejection is a person's answer, not an error: no code.
            return Err(format!(
                "The person rejected this plan ({approval_id}). Stay in plan mode: revise the plan with them."
            ));
        }
        Some(ApprovalStatus::Interrupted) => {
            return Err(format!(
                "HOST_RESTARTED: {}",
                plan_core::ErrorCode::HostRestarted.message()
            ));
        }
        Some(ApprovalStatus::Pending) | None => {
            return Err(format!("INTERNAL: approval {approval_id} is {status}"));
        }
    }
    let artifact = client
        .call("plan/readArtifact", json!({"approvalId": approval_id}))
        .map_err(|failure| failure.text())?;
    let markdown = artifact
        .get("markdown")
        .and_then(Value::as_str)
        .ok_or("ARTIFACT_MISSING: the approved plan could not be read")?;
    let recorded = approval
        .pointer("/artifact/sha256")
        .and_then(Value::as_str)
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
/// record) and Claude Code's mode set from the chosen permission mode.
fn exit_plan_permission(call: &HookCall<'_>) -> Value {
    let refuse = |message: String| permission(json!({"behavior": "deny", "message": message}));
    let mut client = match HostClient::connect(&call.project, CLIENT) {
        Ok(client) => client,
        Err(failure) => return refuse(failure.text()),
    };
    let latest = client.call("plan/list", json!({"sessionId": call.session_id, "limit": 1}));
    let Some(approval) = latest.ok().and_then(|list| list.pointer("/approvals/0").cloned()) else {
        return refuse("PLAN_NOT_ACTIVE: no plan of this session was submitted".into());
    };
    let plan = call.input.get("plan").and_then(Value::as_str).unwrap_or_default();
    let recorded = approval
        .pointer("/artifact/sha256")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if approval.get("status").and_then(Value::as_str) != Some("approved") {
        return refuse("PLAN_NOT_ACTIVE: this session's latest plan is not approved".into());
    }
    if sha256_hex(plan.as_bytes()) != recorded {
        return refuse(format!(
            "ARTIFACT_INTEGRITY_MISMATCH: {}",
            plan_core::ErrorCode::ArtifactIntegrityMismatch.message()
        ));
    }
    // Claude Code proceeds with what its plan file holds when the exit is
    // allowed, so that file must hold the approved bytes too.
    if let Some(file) = call.input.get("planFilePath").and_then(Value::as_str)
        && std::fs::read(file)
            .map(|bytes| sha256_hex(&bytes))
            .ok()
            .as_deref()
            != Some(recorded)
    {
        return refuse(format!(
            "ARTIFACT_INTEGRITY_MISMATCH: Claude Code's plan file {file} no longer holds the approved plan; submit it again"
        ));
    }
    let mode = match approval.get("permissionMode").and_then(Value::as_str) {
        Some("accept-edits" | "auto") => "acceptEdits",
        Some(_) | None => "default",
    };
    permission(json!({
        "behavior": "allow",
        "updatedInput": call.input,
        "updatedPermissions": [{"type": "setMode", "mode": mode, "destination": "session"}],
    }))
}

// ------------------------------------------------------- deciding, serving

fn pending(project: &Project, as_json: bool) -> Result<i32, Failure> {
    let mut client = connect(project)?;
    let list = client
        .call("plan/list", json!({"status": "pending"}))
        .map_err(refused)?;
    let approvals = list
        .get("approvals")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let text = if as_json {
        let rows: Vec<Value> = approvals
            .iter()
            .map(|approval| {
                json!({
                    "approvalId": approval.get("id"),
                    "sessionId": approval.get("sessionId"),
                    "title": approval.get("title"),
                    "expiresAt": approval.get("expiresAt"),
                    "artifact": approval.get("artifact"),
                })
            })
            .collect();
        // Titles are the agent's text: terminal-safe JSON, as every
        // `--json` of this binary.
        crate::render::json_line(&Value::Array(rows))?
    } else if approvals.is_empty() {
        "no pending plan\n".to_owned()
    } else {
        approvals
            .iter()
            .map(|approval| {
                let field = |name: &str| approval.get(name).and_then(Value::as_str).unwrap_or_default();
                let sha = approval
                    .pointer("/artifact/sha256")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                format!(
                    "{}  {}  sha256 {}…\n",
                    field("id"),
                    crate::escape::line(field("title")),
                    sha.chars().take(16).collect::<String>()
                )
            })
            .collect()
    };
    crate::render::write_stdout(text.as_bytes())?;
    Ok(exit::OK)
}

fn decide(project: &Project, approval_id: &str, mode: Option<PermissionMode>) -> Result<i32, Failure> {
    let mut client = connect(project)?;
    let (method, params) = match mode {
        Some(mode) => (
            "plan/approve",
            json!({"approvalId": approval_id, "permissionMode": mode.as_str()}),
        ),
        None => ("plan/reject", json!({"approvalId": approval_id})),
    };
    client.call(method, params).map_err(refused)?;
    let verb = if mode.is_some() { "approved" } else { "rejected" };
    crate::render::write_stdout(format!("{approval_id} {verb}\n").as_bytes())?;
    Ok(exit::OK)
}

/// How long the host stays without a client before it ends.
const IDLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(15 * 60);

fn host(project: &Project) -> Result<i32, Failure> {
    let database_directory = project.database.parent().unwrap_or(&project.root);
    std::fs::create_dir_all(database_directory).map_err(|error| {
        Failure::new(
            exit::FAILURE,
            format!("{}: {error}", database_directory.display()),
        )
    })?;
    let failed = |error: plan_host::HostError| Failure::new(exit::DATABASE_REFUSED, error.message());
    // The host's settings as `serve` and the FFI give them, through the
    // same conversion.
    let config = plan_host::HostConfig {
        approval_ttl_ms: Some(approval_ttl_ms()),
        web_address: Some("127.0.0.1:0".to_owned()),
        notifier: std::env::var("PLAN_CHECKPOINT_NOTIFY")
            .ok()
            .filter(|notify| !notify.trim().is_empty()),
        // The binary is its own sandbox helper, as for `serve`: installed
        // alone, it still runs plan-mode Bash. Never one the environment
        // names: Claude Code gives its hooks the `env` of the project's
        // settings, which a workspace can set, and a helper built there
        // would run every later command unconfined (P15).
        sandbox_helper: std::env::current_exe().ok(),
        ..plan_host::HostConfig::default()
    };
    // The audit export as `serve` has it, from the per-user settings file
    // (Claude Code passes no OTEL_* variable to its hooks).
    let options =
        crate::otel::agent_host_options(config).map_err(|error| Failure::new(exit::USAGE, error))?;
    let options = plan_host::HostOptions {
        frontend: plan_host::DecisionChannel::Rpc,
        export_observer: Some(crate::otel::stderr_observer("plan-checkpoint claude-code host")),
        ..options
    };
    let host = std::sync::Arc::new(plan_host::Host::open(&project.database, options).map_err(failed)?);
    let web = plan_server::web::WebCard::start_for(&host).map_err(failed)?;
    plan_server::notifier::start_for(&host, web.as_ref());
    let server = plan_server::socket::SocketServer::start(&host, web.clone(), &project.socket)
        .map_err(|error| Failure::new(exit::FAILURE, format!("{}: {error}", project.socket.display())))?;
    let _ = std::fs::write(&project.pid_file, format!("{}\n", std::process::id()));
    log::line(&format!(
        "plan-checkpoint claude-code host: ready for {} on {}",
        project.root.display(),
        project.socket.display()
    ));
    let mut idle_since = std::time::Instant::now();
    loop {
        std::thread::sleep(std::time::Duration::from_secs(5));
        if server.connections() > 0 {
            idle_since = std::time::Instant::now();
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
