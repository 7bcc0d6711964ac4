//! `plan-checkpoint codex implement`: the driver that binds the bytes
//! (`codex.md`). A Codex frontend over `codex app-server` that, once a
//! Codex plan of the project is approved, starts its implementation in a
//! fresh Codex thread from the artifact's exact bytes, read back from the
//! host and checked against the SHA-256 the person approved
//! (`thread/prepareApprovedPlan`), in Codex's `default` collaboration mode,
//! with the approved permission mode mapped onto Codex's approval policy
//! and its workspace-write sandbox; it then follows the turn, shows the
//! calls held for the person with the commands that confirm them, and ends
//! when the turn does.
//!
//! The hooks of the thread act in the approved plan's host session (the
//! driver names it to the app-server it starts, whose hooks inherit its
//! environment), so the turn is the approved plan's execution: the host's
//! table, sandbox and audit apply as they do behind the TUI. The app-server
//! is started through plan-exec ([`plan_exec::AgentServer`]) and dies with
//! the driver.
//!
//! What this module must not do: decide anything of the checkpoint (what
//! was approved, in which mode, whether the bytes still match is the
//! host's and the session layer's answer), approve anything Codex asks its
//! frontend (every such request is declined: the hooks give the host's
//! answers before Codex asks), or start Codex from anything but the
//! checked bytes.

use std::collections::{BTreeSet, VecDeque};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::ChildStdin;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use plan_client::agent::{AgentSession, PlanOutcome};
use plan_client::wire::{ExecutionStartParams, PlanGetParams, ToolListAwaitingParams};
use plan_client::{Client, ClientError};
use plan_core::{
    ApprovalFilter, ApprovalId, ApprovalStatus, ExecutionState, PermissionMode, PlanApproval, SessionId,
};
use serde_json::{Value, json};

use crate::agent_host::Project;
use crate::{Failure, exit};

/// The environment variable that names, to the hooks of the app-server
/// the driver starts, the host session they act in: the approved plan's.
pub(crate) const SESSION_VARIABLE: &str = "PLAN_CHECKPOINT_CODEX_SESSION";

/// The prefix of the host sessions of Codex threads.
const SESSION_PREFIX: &str = "codex-";

/// How long Codex may take to answer a request of the driver's (not the
/// turn: that takes as long as the work).
const CODEX_ANSWER: Duration = Duration::from_secs(120);

/// How often, while one of Codex's `PreToolUse` hooks runs, the host is
/// asked which calls wait for the person.
const HELD_POLL: Duration = Duration::from_millis(500);

/// How long a wait for a plan goes before the host is asked directly.
const LOOK_AGAIN: Duration = Duration::from_secs(15);

/// What `implement` was asked.
pub(crate) struct Implement<'args> {
    /// The project.
    pub(crate) project: &'args Project,
    /// The approval, or `None`: the project's newest Codex plan that is
    /// pending or approved and not begun, or else the next one approved.
    pub(crate) approval_id: Option<ApprovalId>,
    /// The `codex` program.
    pub(crate) codex: &'args Path,
    /// The model of the turn (default: the thread's).
    pub(crate) model: Option<String>,
}

/// Codex's approval policy for an approved permission mode (`codex.md`):
/// Codex asks before what it does not trust under `ask` and `accept-edits`
/// (the hooks answer with the host's table: edits allowed under
/// `accept-edits`, confirmed by the person under `ask`), and never under
/// `auto`. The sandbox is Codex's workspace-write in every mode.
pub(crate) fn approval_policy(mode: PermissionMode) -> &'static str {
    match mode {
        PermissionMode::Ask | PermissionMode::AcceptEdits => "untrusted",
        PermissionMode::Auto => "never",
    }
}

/// Runs the driver; exit 0 once the turn ended and the execution is
/// recorded completed.
pub(crate) fn implement(args: &Implement<'_>) -> Result<i32, Failure> {
    let project = args.project;
    let mut client = crate::codex::connect_or_start(project).map_err(refused)?;
    let decided = approved_plan(&mut client, args.approval_id.as_ref())?;
    let session_id = decided.session_id.clone();
    let (approval, markdown) = {
        let mut session = AgentSession::new(&mut client, session_id.clone(), root_text(project));
        match session.outcome(decided).map_err(refused)? {
            PlanOutcome::Approved { approval, markdown } => (approval, markdown),
            PlanOutcome::NotApproved { approval, reason } => {
                return Err(Failure::new(
                    exit::FAILURE,
                    format!(
                        "plan {} is not started: {}",
                        approval.id.as_str(),
                        crate::escape::line(&reason)
                    ),
                ));
            }
        }
    };
    let (Some(mode), Some(execution_id)) = (approval.permission_mode, approval.execution_id.clone()) else {
        return Err(Failure::new(
            exit::FAILURE,
            format!("plan {} has no approved execution", approval.id.as_str()),
        ));
    };
    if approval.execution_state != Some(ExecutionState::Queued) {
        return Err(Failure::new(
            exit::FAILURE,
            format!(
                "EXECUTION_NOT_ACTIVE: plan {}'s execution is {} already: it is not started again",
                approval.id.as_str(),
                approval
                    .execution_state
                    .map_or("not queued", ExecutionState::as_str)
            ),
        ));
    }
    let policy = approval_policy(mode);
    let mut codex = AppServer::start(args.codex, project, &session_id)?;
    codex.request(
        "initialize",
        json!({
            "clientInfo": {"name": "plan-checkpoint", "version": env!("CARGO_PKG_VERSION")},
            "capabilities": {"experimentalApi": true},
        }),
    )?;
    codex.notify("initialized")?;
    let thread = codex.request(
        "thread/start",
        json!({"cwd": root_text(project), "approvalPolicy": policy, "sandbox": "workspace-write"}),
    )?;
    let thread_id = text_at(&thread, "/thread/id")?;
    let model = match &args.model {
        Some(model) => model.clone(),
        None => text_at(&thread, "/model")?,
    };
    // The plan enters the fresh thread as the approved bytes themselves.
    let prepared = codex.request(
        "thread/prepareApprovedPlan",
        json!({"threadId": thread_id, "markdown": markdown}),
    )?;
    let prompt = text_at(&prepared, "/prompt")?;
    // The driver begins the approved work: no other frontend begins it
    // twice.
    client
        .execution_start(&ExecutionStartParams {
            execution_id: execution_id.clone(),
        })
        .map_err(refused)?;
    said(&format!(
        "plan-checkpoint: plan {} approved ({}): Codex implements it from its exact bytes ({}), approval policy {policy}, sandbox workspace-write\ncodex thread: {}\n",
        approval.id.as_str(),
        mode.as_str(),
        approval
            .artifact
            .as_ref()
            .map_or_else(String::new, plan_core::Artifact::fingerprint),
        crate::escape::line(&thread_id),
    ))?;
    codex.request(
        "turn/start",
        json!({
            "threadId": thread_id,
            "input": [{"type": "text", "text": prompt, "text_elements": []}],
            "approvalPolicy": policy,
            "sandboxPolicy": {
                "type": "workspaceWrite",
                "writableRoots": [],
                "networkAccess": false,
                "excludeTmpdirEnvVar": false,
                "excludeSlashTmp": false,
            },
            "collaborationMode": {
                "mode": "default",
                "settings": {"model": model, "reasoning_effort": null, "developer_instructions": null},
            },
        }),
    )?;
    let turn = follow_turn(&mut codex, &mut client, &session_id)?;
    drop(codex);
    let after = client
        .plan_get(&PlanGetParams {
            approval_id: approval.id.clone(),
        })
        .map_err(refused)?;
    let state = after.execution_state.map_or("unknown", ExecutionState::as_str);
    said(&format!(
        "plan-checkpoint: the turn {turn}; execution {} {state}. Continue in Codex: codex resume {}\n",
        execution_id.as_str(),
        crate::escape::line(&thread_id),
    ))?;
    Ok(
        if turn == "completed" && after.execution_state == Some(ExecutionState::Completed) {
            exit::OK
        } else {
            exit::FAILURE
        },
    )
}

fn refused(error: ClientError) -> Failure {
    Failure::new(exit::FAILURE, error.text())
}

fn said(text: &str) -> Result<(), Failure> {
    crate::render::write_stdout(text.as_bytes())
}

fn root_text(project: &Project) -> String {
    project.root.display().to_string()
}

/// The plan to implement, once decided: `approval_id`'s, waited for while
/// pending; else the project's newest Codex plan that is pending (waited
/// for) or approved and not begun; else the next Codex plan approved.
fn approved_plan(client: &mut Client, approval_id: Option<&ApprovalId>) -> Result<PlanApproval, Failure> {
    if let Some(approval_id) = approval_id {
        let approval = client
            .plan_get(&PlanGetParams {
                approval_id: approval_id.clone(),
            })
            .map_err(refused)?;
        return decided(client, approval);
    }
    let mut announced = false;
    loop {
        if let Some(approval) = newest_codex_plan(client)? {
            return decided(client, approval);
        }
        if !announced {
            said("plan-checkpoint: waiting for a Codex plan of this project to be approved\n")?;
            announced = true;
        }
        // A plan submitted or decided meanwhile is looked for again.
        let _ = client.next_notification(Some(LOOK_AGAIN)).map_err(refused)?;
    }
}

/// The newest Codex plan that is pending or approved with its execution
/// not begun.
fn newest_codex_plan(client: &mut Client) -> Result<Option<PlanApproval>, Failure> {
    let listed = client
        .plan_list(&ApprovalFilter {
            limit: Some(50),
            ..ApprovalFilter::default()
        })
        .map_err(refused)?;
    Ok(listed.approvals.into_iter().find(|approval| {
        approval.session_id.as_str().starts_with(SESSION_PREFIX)
            && match approval.status {
                ApprovalStatus::Pending => true,
                ApprovalStatus::Approved => approval.execution_state == Some(ExecutionState::Queued),
                ApprovalStatus::Rejected | ApprovalStatus::Expired | ApprovalStatus::Interrupted => false,
            }
    }))
}

/// `approval` once decided (waited for on its own notification while
/// pending).
fn decided(client: &mut Client, approval: PlanApproval) -> Result<PlanApproval, Failure> {
    if approval.status != ApprovalStatus::Pending {
        return Ok(approval);
    }
    said(&format!(
        "plan-checkpoint: waiting for plan {} to be decided (the card, or plan-checkpoint codex approve)\n",
        approval.id.as_str()
    ))?;
    let mut session = AgentSession::new(client, approval.session_id.clone(), String::new());
    session.wait_for_decision(&approval).map_err(refused)
}

/// The text at `pointer` of a Codex answer.
fn text_at(value: &Value, pointer: &str) -> Result<String, Failure> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            Failure::new(
                exit::FAILURE,
                format!("Codex answered without {pointer}: {value}"),
            )
        })
}

/// Follows the turn until Codex says it ended: what the agent says and
/// the commands it runs are shown (escaped: agent text), and while one of
/// its `PreToolUse` hooks runs, the calls the host holds for the person
/// are shown once each with the commands that confirm them. Returns how
/// the turn ended (`completed`, `interrupted`, `failed`).
fn follow_turn(
    codex: &mut AppServer,
    client: &mut Client,
    session_id: &SessionId,
) -> Result<String, Failure> {
    let mut hooks_running: BTreeSet<String> = BTreeSet::new();
    let mut shown: BTreeSet<String> = BTreeSet::new();
    loop {
        let message = codex.next_message(HELD_POLL)?;
        if !hooks_running.is_empty() {
            let awaiting = client
                .tool_list_awaiting(&ToolListAwaitingParams {
                    session_id: Some(session_id.clone()),
                })
                .map_err(refused)?;
            for call in awaiting.calls {
                if shown.insert(call.call_id.as_str().to_owned()) {
                    said(&format!(
                        "plan-checkpoint: this call waits for you:\n{}",
                        crate::codex::held_call(&call, "")
                    ))?;
                }
            }
        }
        let Some(message) = message else {
            continue;
        };
        let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        match method {
            "hook/started" | "hook/completed" => {
                let run = params.get("run").cloned().unwrap_or(Value::Null);
                if run.get("eventName").and_then(Value::as_str) == Some("preToolUse") {
                    let id = run
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    if method == "hook/started" {
                        hooks_running.insert(id);
                    } else {
                        hooks_running.remove(&id);
                    }
                }
            }
            "item/started" | "item/completed" => {
                let item = params.get("item").cloned().unwrap_or(Value::Null);
                let text = |pointer: &str| item.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
                match (method, text("/type")) {
                    ("item/started", "commandExecution") => {
                        said(&format!("$ {}\n", crate::escape::line(text("/command"))))?;
                    }
                    ("item/completed", "agentMessage") => {
                        said(&format!("{}\n", crate::escape::block(text("/text"))))?;
                    }
                    _ => {}
                }
            }
            "turn/completed" => {
                return Ok(params
                    .pointer("/turn/status")
                    .and_then(Value::as_str)
                    .unwrap_or("completed")
                    .to_owned());
            }
            _ => {}
        }
    }
}

/// Codex's app-server, spoken to over its stdio as a frontend does
/// (JSON-RPC 2.0 lines without the version member).
struct AppServer {
    /// Ends the process when dropped.
    _server: plan_exec::AgentServer,
    stdin: ChildStdin,
    lines: Receiver<String>,
    next_id: i64,
    /// Notifications read while a request waited for its answer.
    queued: VecDeque<Value>,
}

impl AppServer {
    /// Starts `codex app-server` in the project, its hooks acting in
    /// `session`.
    fn start(program: &Path, project: &Project, session: &SessionId) -> Result<AppServer, Failure> {
        let mut server = plan_exec::AgentServer::start(
            program,
            &[OsString::from("app-server")],
            &project.root,
            &[(OsString::from(SESSION_VARIABLE), OsString::from(session.as_str()))],
        )
        .map_err(|error| {
            Failure::new(
                exit::FAILURE,
                format!("{} app-server could not be started: {error}", program.display()),
            )
        })?;
        let (Some(stdin), Some(stdout)) = (server.take_stdin(), server.take_stdout()) else {
            return Err(Failure::new(exit::FAILURE, "codex app-server has no pipes"));
        };
        let (sender, lines) = channel();
        let reading = std::thread::Builder::new()
            .name("codex-app-server".into())
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if sender.send(line).is_err() {
                        break;
                    }
                }
            });
        if reading.is_err() {
            return Err(Failure::new(exit::FAILURE, "no thread to read codex app-server"));
        }
        Ok(AppServer {
            _server: server,
            stdin,
            lines,
            next_id: 0,
            queued: VecDeque::new(),
        })
    }

    fn send(&mut self, message: &Value) -> Result<(), Failure> {
        writeln!(self.stdin, "{message}")
            .and_then(|()| self.stdin.flush())
            .map_err(|error| Failure::new(exit::FAILURE, format!("codex app-server went away: {error}")))
    }

    fn notify(&mut self, method: &str) -> Result<(), Failure> {
        self.send(&json!({"method": method}))
    }

    /// One request and its result.
    fn request(&mut self, method: &str, params: Value) -> Result<Value, Failure> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"id": id, "method": method, "params": params}))?;
        let deadline = Instant::now() + CODEX_ANSWER;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Failure::new(
                    exit::FAILURE,
                    format!("codex app-server did not answer {method} in time"),
                ));
            }
            let Some(message) = self.read(left)? else {
                continue;
            };
            if message.get("method").is_some() {
                self.queued.push_back(message);
                continue;
            }
            if message.get("id").and_then(Value::as_i64) != Some(id) {
                continue;
            }
            if let Some(error) = message.get("error") {
                return Err(Failure::new(
                    exit::FAILURE,
                    format!("codex app-server refused {method}: {error}"),
                ));
            }
            return Ok(message.get("result").cloned().unwrap_or(Value::Null));
        }
    }

    /// The next notification, waiting at most `timeout`.
    fn next_message(&mut self, timeout: Duration) -> Result<Option<Value>, Failure> {
        if let Some(queued) = self.queued.pop_front() {
            return Ok(Some(queued));
        }
        self.read(timeout)
    }

    /// Reads one message: a request of Codex's is answered here (and
    /// `None` returned), anything else is returned.
    fn read(&mut self, timeout: Duration) -> Result<Option<Value>, Failure> {
        let line = match self.lines.recv_timeout(timeout) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => return Ok(None),
            Err(RecvTimeoutError::Disconnected) => {
                return Err(Failure::new(exit::FAILURE, "codex app-server ended"));
            }
        };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            return Ok(None);
        };
        match (
            message.get("id").cloned(),
            message.get("method").and_then(Value::as_str),
        ) {
            (Some(id), Some(method)) => {
                let answer = declined(method);
                let mut reply = json!({"id": id});
                if let Some(fields) = reply.as_object_mut() {
                    match answer {
                        Ok(result) => fields.insert("result".to_owned(), result),
                        Err(error) => fields.insert("error".to_owned(), error),
                    };
                }
                self.send(&reply)?;
                Ok(None)
            }
            (_, _) => Ok(Some(message)),
        }
    }
}

/// The driver's answer to a request Codex makes of its frontend: never a
/// grant. The hooks put every call to the host before Codex asks; what
/// Codex still asks about is what the host did not allow.
fn declined(method: &str) -> Result<Value, Value> {
    match method {
        "item/commandExecution/requestApproval" | "item/fileChange/requestApproval" => {
            Ok(json!({"decision": "decline"}))
        }
        "applyPatchApproval" | "execCommandApproval" => Ok(json!({
            "decision": {"denied": {"rejection": "plan-checkpoint: the host did not allow this"}},
        })),
        _ => Err(json!({"code": -32601, "message": "plan-checkpoint's driver answers no such request"})),
    }
}
