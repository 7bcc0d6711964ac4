//! The per-session state machine: one event and the current state in, the
//! next state, the effects to carry out and a reply out.
//!
//! `handle` is deterministic. Time (`now`), the boot epoch and every fresh id
//! arrive as arguments; nothing here reads a clock, draws a random number or
//! touches a file. The caller carries out the effects (in one storage
//! transaction) and only then adopts the new state.

use crate::call_input::CallDigest;
use crate::commands::Registration;
use crate::commands::{
    CommandEntryKind, CommandFacts, CommandLaunch, CommandRequest, SandboxGrant, TurnCommand,
    TurnCommandStatus, WorkspaceIdentity, launch, parse_bash_input, refused_run, sandbox_for,
};
use crate::deadlines::is_due;
use crate::model::{ActiveTurn, BootEpoch, Limits, RowGuard, SessionState, UnixMs};
use crate::objects::{
    ApprovalStatus, Artifact, ArtifactVerification, AwaitingCall, CommandRun, ExecutionState, Mode, Origin,
    PermissionMode, PlanApproval, Sandbox, ToolAuditEntry, ToolAuditKind, TurnKind,
};
use crate::permissions::{
    ConfirmationStatus, PermissionRule, ToolConfirmation, agent_permission, granted_by_mode, write_permission,
};
use crate::session::normalize_workspace_root;
use crate::shells::check_shell;
use crate::tools::{ToolKind, parse_submit_plan_input, tool_kind};
use crate::writes::write_target;
use crate::{ApprovalId, CallId, ErrorCode, ExecutionId, Session, SessionId, ToolCall, TurnId};

/// What the caller knows about the moment an event is handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// The time to decide at, Unix ms: the host's wall clock as
    /// [`crate::decision_time`] bounds it (never before the pending
    /// approval's creation plus the monotonic time since).
    pub now: UnixMs,
    /// The boot epoch of the handling process.
    pub epoch: BootEpoch,
    /// The host's limits.
    pub limits: Limits,
}

/// A configuration change; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigChange {
    /// New mode.
    pub mode: Option<Mode>,
    /// New permission mode.
    pub permission_mode: Option<PermissionMode>,
    /// New provider (`Some(None)` clears it).
    pub provider: Option<Option<String>>,
    /// New model (`Some(None)` clears it).
    pub model: Option<Option<String>>,
    /// New shell id (`Some(None)` returns to the default shell); it must be
    /// in the shell catalog that comes with the event.
    pub shell: Option<Option<String>>,
}

/// Everything that can happen to a session.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A prompt starts a turn in the session's current mode, or in `mode`,
    /// switched to first as `Configure` would switch it.
    StartTurn {
        /// Fresh turn id.
        turn_id: TurnId,
        /// Interactive or scheduled.
        origin: Origin,
        /// The mode to switch the idle session to first (`None`: as it is).
        mode: Option<Mode>,
    },
    /// The assistant asks to run a batch of tool calls in a turn.
    ToolCalls {
        /// The turn the batch belongs to.
        turn_id: TurnId,
        /// The batch, in order.
        calls: Vec<ToolCall>,
        /// What the host found out about running the batch's `Bash` calls
        /// (a Plan turn runs them before it answers): every refusal is
        /// decided from these.
        commands: CommandFacts,
    },
    /// The artifact a `WriteArtifact` effect asked for is durable.
    ArtifactWritten {
        /// The request that was carried out.
        request: ArtifactRequest,
        /// Fresh approval id.
        approval_id: ApprovalId,
        /// Path, SHA-256 and size of the bytes written.
        artifact: Artifact,
    },
    /// The artifact a `WriteArtifact` effect asked for could not be written.
    ArtifactFailed {
        /// The request that failed.
        request: ArtifactRequest,
        /// `ARTIFACT_PATH_ESCAPE`, `ARTIFACT_SYMLINK` or `ARTIFACT_WRITE_FAILED`.
        code: ErrorCode,
    },
    /// A person approves with a permission mode (`None` if the request named none).
    Approve {
        /// The approval row as stored.
        approval: PlanApproval,
        /// The explicitly selected mode.
        permission_mode: Option<PermissionMode>,
        /// Fresh execution id.
        execution_id: ExecutionId,
        /// Fresh turn id for the execution turn.
        execution_turn_id: TurnId,
        /// What re-reading the approval's artifact found, gathered by the
        /// host inside the decision (under the lock the decision holds):
        /// only a plan whose size and SHA-256 still match is approved.
        artifact: ArtifactVerification,
    },
    /// A person rejects.
    Reject {
        /// The approval row as stored.
        approval: PlanApproval,
    },
    /// The agent that submitted a pending plan withdraws it, because it
    /// ended before anyone decided (`plan/withdraw`): the approval is
    /// `interrupted` with `PLAN_WITHDRAWN` and can no longer be approved.
    WithdrawPlan {
        /// The approval row as stored.
        approval: PlanApproval,
    },
    /// A configuration change.
    Configure {
        /// What changes.
        change: ConfigChange,
        /// The ids of the host's shell catalog (a shell to select must be one).
        shells: Vec<String>,
    },
    /// The active prompt turn finished.
    CompleteTurn {
        /// The turn that finished.
        turn_id: TurnId,
    },
    /// A person cancels the active turn.
    CancelTurn,
    /// The execution turn reports that it started working.
    StartExecution {
        /// The execution.
        execution_id: ExecutionId,
        /// The epoch of the process that reports.
        epoch: BootEpoch,
    },
    /// The execution turn reports that it finished.
    CompleteExecution {
        /// The execution.
        execution_id: ExecutionId,
        /// The epoch of the process that reports.
        epoch: BootEpoch,
    },
    /// The client asks the host to run an Agent turn's allowed Bash call
    /// (`command/start`).
    StartCommand {
        /// The turn the call belongs to.
        turn_id: TurnId,
        /// The Bash call.
        call_id: CallId,
        /// The Bash input `{command, timeoutMs?, cwd?}`.
        input: serde_json::Value,
        /// What the host found out about running it.
        commands: CommandFacts,
    },
    /// A client registers a Bash call of the active turn for a client that
    /// names it by reference (`command/register`): in a Plan turn the call
    /// is decided as a Plan Bash call and held, not run; in an Agent turn it
    /// must be a call the turn allowed (or a person confirmed) with this
    /// very input.
    RegisterCommand {
        /// The turn the call belongs to.
        turn_id: TurnId,
        /// The Bash call.
        call_id: CallId,
        /// The Bash input `{command, timeoutMs?, cwd?}`.
        input: serde_json::Value,
        /// The host's fresh reference for it.
        reference: String,
        /// What the host found out about running it.
        commands: CommandFacts,
    },
    /// A reference-carrying client asks the host to run the call registered
    /// under `reference` (`command/run`).
    RunRegistered {
        /// The reference `command/register` gave.
        reference: String,
        /// What the host found out about running the call it names.
        commands: CommandFacts,
    },
    /// A person answers a call of the active turn that awaits confirmation
    /// (`tool/confirm`).
    ConfirmTool {
        /// The turn the call belongs to.
        turn_id: TurnId,
        /// The call decided `confirm`.
        call_id: CallId,
        /// Whether the person allows it.
        allow: bool,
    },
    /// A command of the active turn ended (or failed to start).
    CommandEnded {
        /// The Bash call.
        call_id: CallId,
    },
    /// `command/cancel`.
    CancelCommand {
        /// The Bash call.
        call_id: CallId,
        /// Whether the host has a record of an ended run with this call id
        /// (an earlier turn's, or this one's): that is `COMMAND_NOT_RUNNING`
        /// rather than `COMMAND_NOT_FOUND`.
        known_ended: bool,
    },
    /// Time passed; fire whatever deadline is due.
    Tick,
}

/// A request to write one immutable plan artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactRequest {
    /// The session.
    pub session_id: SessionId,
    /// The Plan turn.
    pub turn_id: TurnId,
    /// The SubmitPlan call.
    pub call_id: CallId,
    /// The session's absolute workspace root.
    pub workspace_root: String,
    /// SubmitPlan `title` (the writer may use it for a readable file name).
    pub title: String,
    /// SubmitPlan `question`.
    pub question: String,
    /// The exact Markdown to write.
    pub markdown: String,
}

/// What the machine decided for one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolDecision {
    /// The client may run the call: a Plan-safe tool in a Plan turn, or an
    /// Agent call the permission table allows (or a person confirmed).
    Allow,
    /// An Agent-turn Bash call that is allowed (or confirmed): the client has
    /// the host run it through `command/start`, never runs it itself.
    HostRun,
    /// An Agent call that may run only once a person says so
    /// (`tool/confirm`); `host_run` for Bash, which even then only the host runs.
    Confirm {
        /// Whether the call, once confirmed, runs through `command/start`.
        host_run: bool,
    },
    /// Denied with a canonical code.
    Deny(ErrorCode),
    /// A valid SubmitPlan: the artifact must be written, then reported back.
    WriteArtifact,
    /// A Plan-turn Bash call: the host runs it, read-only sandboxed, before
    /// it answers, and reports `CommandEnded` when it ends; or, when the
    /// facts say it cannot run here, it failed to start (recorded, nothing
    /// spawned).
    RunCommand(Box<CommandLaunch>),
}

/// The decision for one call of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    /// The call.
    pub call_id: CallId,
    /// What happens to it.
    pub decision: ToolDecision,
    /// For a denial, a sentence more specific than its code's own message
    /// (for `PLAN_SANDBOX_UNAVAILABLE`, why the sandbox is missing here);
    /// `None` when the code says it all.
    pub message: Option<String>,
}

/// Something the caller must carry out for a transition to take effect.
///
/// All storage effects of one transition belong in one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Write the plan artifact, then report `ArtifactWritten` or `ArtifactFailed`.
    WriteArtifact(ArtifactRequest),
    /// Insert a new pending approval row.
    InsertApproval(PlanApproval),
    /// Update an approval row, only if it still matches `expected`.
    UpdateApproval {
        /// The row as it must be afterwards.
        approval: PlanApproval,
        /// What the row must be before.
        expected: RowGuard,
    },
    /// Persist the session's configuration.
    SaveSession(Session),
    /// Append a tool-permission entry to the session's transcript (a call
    /// asked about, confirmed, declined or allowed by the permission mode).
    RecordToolAudit(ToolAuditEntry),
    /// Append a command audit entry to the session's transcript: a start
    /// (committed before the process is spawned), an end plan-core decided
    /// (a command that failed to start), or a refused start.
    RecordCommand {
        /// Which entry.
        kind: CommandEntryKind,
        /// The run as the entry records it.
        run: CommandRun,
    },
    /// Bind the session to the workspace directory its path names now
    /// (P12): later commands, in this host or the next, run there or not
    /// at all.
    BindWorkspace {
        /// The session.
        session_id: SessionId,
        /// The directory.
        identity: WorkspaceIdentity,
    },
    /// Kill a running command (SIGTERM to its group, SIGKILL after the
    /// grace). Cancellations come first in a transition's effects.
    CancelCommand {
        /// The Bash call.
        call_id: CallId,
        /// `true` when the turn ends in this transition: the host waits for
        /// the command to exit, and records its end, before it carries out
        /// anything that follows.
        before_turn_end: bool,
    },
}

/// The successful answer to an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A turn started.
    TurnStarted(ActiveTurn),
    /// Decisions for a tool batch.
    ToolResults(Vec<ToolResult>),
    /// A SubmitPlan's artifact is durable and the approval is pending.
    ApprovalRequested {
        /// The SubmitPlan call.
        call_id: CallId,
        /// The new pending approval.
        approval: PlanApproval,
    },
    /// Approve or reject took effect.
    Decided(PlanApproval),
    /// An execution changed state.
    ExecutionChanged(PlanApproval),
    /// The session changed or was confirmed (configure, complete, cancel).
    SessionUpdated,
    /// A tick was handled (it may or may not have expired something).
    Ticked,
    /// An Agent command starts now (or failed to start: see
    /// [`CommandLaunch::spawns`]).
    CommandStarted(CommandLaunch),
    /// A Bash call is registered for a reference-carrying client.
    CommandRegistered {
        /// The call.
        call_id: CallId,
        /// The reference that runs it.
        reference: String,
    },
    /// A person answered a confirmation: the call's new decision
    /// ([`ToolDecision::Allow`], [`ToolDecision::HostRun`] or a deny with
    /// `TOOL_DECLINED`).
    ToolConfirmed(ToolResult),
}

/// The outcome of one event: the state to adopt, the effects that make it
/// durable, and the reply.
///
/// On a refusal, `state` and `effects` hold only what time did on its own
/// (an approval that expired before the event was looked at); the refused
/// event itself changed nothing.
#[must_use]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// The next state.
    pub state: SessionState,
    /// What to carry out, in order, in one transaction.
    pub effects: Vec<Effect>,
    /// The answer to the event.
    pub reply: Result<Reply, ErrorCode>,
}

/// Handles one event for one session.
pub fn handle(state: &SessionState, context: &Context, event: Event) -> Transition {
    let mut next = state.clone();
    let mut effects = Vec::new();
    expire_due(&mut next, context.now, &mut effects);
    // A refused `command/start`, `command/register` or `command/run` is
    // recorded (`commands.md`, Audit): the one effect a refusal keeps
    // besides what time did.
    let start = match &event {
        Event::StartCommand {
            turn_id,
            call_id,
            input,
            ..
        }
        | Event::RegisterCommand {
            turn_id,
            call_id,
            input,
            ..
        } => Some((turn_id.clone(), call_id.clone(), input.clone())),
        Event::RunRegistered { reference, .. } => Some(run_refusal_subject(state, reference)),
        Event::StartTurn { .. }
        | Event::ToolCalls { .. }
        | Event::ArtifactWritten { .. }
        | Event::ArtifactFailed { .. }
        | Event::Approve { .. }
        | Event::Reject { .. }
        | Event::WithdrawPlan { .. }
        | Event::Configure { .. }
        | Event::CompleteTurn { .. }
        | Event::CancelTurn
        | Event::StartExecution { .. }
        | Event::CompleteExecution { .. }
        | Event::ConfirmTool { .. }
        | Event::CommandEnded { .. }
        | Event::CancelCommand { .. }
        | Event::Tick => None,
    };
    let reply = apply(&mut next, context, event, &mut effects);
    match reply {
        Ok(reply) => Transition {
            state: next,
            effects,
            reply: Ok(reply),
        },
        Err(code) => {
            // Roll back whatever the refused event began, keeping the expiry.
            let mut expired_only = state.clone();
            let mut expiry_effects = Vec::new();
            expire_due(&mut expired_only, context.now, &mut expiry_effects);
            if let Some((turn_id, call_id, input)) = start {
                let grant = state.active_turn.as_ref().map_or(
                    SandboxGrant {
                        sandbox: Sandbox::ReadOnly,
                        network: false,
                    },
                    |turn| sandbox_for(turn, &context.limits.commands),
                );
                expiry_effects.push(Effect::RecordCommand {
                    kind: CommandEntryKind::Refused,
                    run: refused_run(
                        &state.session,
                        &turn_id,
                        &call_id,
                        &input,
                        grant,
                        code,
                        context.now,
                    ),
                });
            }
            Transition {
                state: expired_only,
                effects: expiry_effects,
                reply: Err(code),
            }
        }
    }
}

/// What a refused `command/run` is recorded against: the call its
/// reference named in the active turn (one that ran already: the reference
/// is spent), else no call (an empty call id and command) in the active
/// turn, if any.
fn run_refusal_subject(state: &SessionState, reference: &str) -> (TurnId, CallId, serde_json::Value) {
    let turn = state.active_turn.as_ref();
    let named = turn.and_then(|turn| {
        turn.commands
            .iter()
            .find(|known| known.is_registered_as(reference))
            .and_then(|known| {
                let registration = known.registration.as_ref()?;
                Some((known.call_id.clone(), registration.input.clone()))
            })
    });
    let turn_id = turn.map_or_else(|| TurnId::from(String::new()), |turn| turn.turn_id.clone());
    match named {
        Some((call_id, input)) => (turn_id, call_id, input),
        None => (turn_id, CallId::from(String::new()), serde_json::Value::Null),
    }
}

/// Expires the pending approval when its deadline has passed: status
/// `expired`, `PLAN_APPROVAL_TIMEOUT`, the Plan turn ends, the session stays
/// idle in Plan. `decided_at` is the deadline itself, so the record does not
/// depend on when a driver noticed.
fn expire_due(state: &mut SessionState, now: UnixMs, effects: &mut Vec<Effect>) {
    let Some(pending) = state.pending_approval.as_ref() else {
        return;
    };
    if !is_due(pending, now) {
        return;
    }
    let expected = RowGuard::of(pending);
    let mut expired = pending.clone();
    expired.status = ApprovalStatus::Expired;
    expired.error_code = Some(ErrorCode::PlanApprovalTimeout);
    expired.decided_at = Some(expired.expires_at);
    state.pending_approval = None;
    state.active_turn = None;
    effects.push(Effect::UpdateApproval {
        approval: expired,
        expected,
    });
}

fn apply(
    state: &mut SessionState,
    context: &Context,
    event: Event,
    effects: &mut Vec<Effect>,
) -> Result<Reply, ErrorCode> {
    match event {
        Event::StartTurn {
            turn_id,
            origin,
            mode,
        } => start_turn(state, context, turn_id, origin, mode, effects),
        Event::ToolCalls {
            turn_id,
            calls,
            commands,
        } => tool_calls(state, context, &turn_id, calls, &commands, effects),
        Event::ArtifactWritten {
            request,
            approval_id,
            artifact,
        } => artifact_written(state, context, request, approval_id, artifact, effects),
        Event::ArtifactFailed { request, code } => artifact_failed(state, &request, code),
        Event::Approve {
            approval,
            permission_mode,
            execution_id,
            execution_turn_id,
            artifact,
        } => approve(
            state,
            context,
            &approval,
            permission_mode,
            (execution_id, execution_turn_id),
            &artifact,
            effects,
        ),
        Event::Reject { approval } => reject(state, context, &approval, effects),
        Event::WithdrawPlan { approval } => withdraw(state, context, &approval, effects),
        Event::Configure { change, shells } => configure(state, change, &shells, effects),
        Event::CompleteTurn { turn_id } => complete_turn(state, &turn_id),
        Event::CancelTurn => cancel_turn(state, context, effects),
        Event::StartExecution { execution_id, epoch } => advance_execution(
            state,
            context,
            &execution_id,
            epoch,
            ExecutionState::Queued,
            ExecutionState::Running,
            effects,
        ),
        Event::CompleteExecution { execution_id, epoch } => advance_execution(
            state,
            context,
            &execution_id,
            epoch,
            ExecutionState::Running,
            ExecutionState::Completed,
            effects,
        ),
        Event::StartCommand {
            turn_id,
            call_id,
            input,
            commands,
        } => start_command(state, context, &turn_id, call_id, &input, &commands, effects),
        Event::RegisterCommand {
            turn_id,
            call_id,
            input,
            reference,
            commands,
        } => register_command(state, context, &turn_id, call_id, input, reference, &commands),
        Event::RunRegistered { reference, commands } => {
            run_registered(state, context, &reference, &commands, effects)
        }
        Event::ConfirmTool {
            turn_id,
            call_id,
            allow,
        } => confirm_tool(state, context, &turn_id, call_id, allow, effects),
        Event::CommandEnded { call_id } => command_ended(state, &call_id),
        Event::CancelCommand { call_id, known_ended } => cancel_command(state, call_id, known_ended, effects),
        Event::Tick => Ok(Reply::Ticked),
    }
}

fn start_turn(
    state: &mut SessionState,
    context: &Context,
    turn_id: TurnId,
    origin: Origin,
    mode: Option<Mode>,
    effects: &mut Vec<Effect>,
) -> Result<Reply, ErrorCode> {
    let mode = mode.unwrap_or(state.session.mode);
    // Unattended Plan work is refused before anything else is looked at, so
    // a scheduled Plan task gets the same answer whether or not it is busy.
    match (mode, origin) {
        (Mode::Plan, Origin::Scheduled | Origin::Background) => {
            return Err(ErrorCode::PlanRequiresInteractiveSession);
        }
        (Mode::Plan, Origin::Interactive)
        | (Mode::Agent, Origin::Interactive | Origin::Scheduled | Origin::Background) => {}
    }
    if !state.is_idle() {
        return Err(ErrorCode::SessionBusy);
    }
    // The switch is the one `session/configure` makes, in the same
    // transition as the turn it starts.
    if state.session.mode != mode {
        state.session.mode = mode;
        effects.push(Effect::SaveSession(state.session.clone()));
    }
    let turn = ActiveTurn::new(
        turn_id,
        state.session.mode,
        origin,
        TurnKind::Prompt,
        context.epoch,
    );
    state.active_turn = Some(turn.clone());
    Ok(Reply::TurnStarted(turn))
}

/// Finds the active turn named `turn_id`, refusing while an approval is pending.
fn active_turn_named<'state>(
    state: &'state SessionState,
    turn_id: &TurnId,
) -> Result<&'state ActiveTurn, ErrorCode> {
    if state.pending_approval.is_some() {
        return Err(ErrorCode::SessionBusy);
    }
    match &state.active_turn {
        Some(turn) if turn.turn_id == *turn_id => Ok(turn),
        Some(_) | None => Err(ErrorCode::TurnNotActive),
    }
}

fn tool_calls(
    state: &mut SessionState,
    context: &Context,
    turn_id: &TurnId,
    calls: Vec<ToolCall>,
    commands: &CommandFacts,
    effects: &mut Vec<Effect>,
) -> Result<Reply, ErrorCode> {
    let turn = active_turn_named(state, turn_id)?.clone();
    let holds_submit_plan = calls
        .iter()
        .any(|call| tool_kind(&call.name) == ToolKind::SubmitPlan);
    if holds_submit_plan && calls.len() > 1 {
        return Err(ErrorCode::SubmitPlanNotAlone);
    }
    let plan_turn = match (turn.mode, turn.kind) {
        (Mode::Plan, TurnKind::Prompt) => true,
        (Mode::Plan, TurnKind::Execution) | (Mode::Agent, TurnKind::Prompt | TurnKind::Execution) => false,
    };
    let mut turn = turn;
    let mut results = Vec::with_capacity(calls.len());
    for call in calls {
        let decision = if plan_turn {
            plan_decision(state, context, &mut turn, &call, commands, effects)
        } else {
            agent_decision(state, context, &mut turn, &call, commands, effects)
        };
        // Every refused Bash call is in the audit (`commands.md`).
        if let ToolDecision::Deny(code) = decision
            && tool_kind(&call.name) == ToolKind::Bash
        {
            effects.push(Effect::RecordCommand {
                kind: CommandEntryKind::Refused,
                run: refused_run(
                    &state.session,
                    turn_id,
                    &call.call_id,
                    &call.input,
                    sandbox_for(&turn, &context.limits.commands),
                    code,
                    context.now,
                ),
            });
        }
        let message = match &decision {
            ToolDecision::Deny(code) => {
                crate::commands::sandbox_refusal_message(*code, &context.limits.commands)
            }
            ToolDecision::Allow
            | ToolDecision::HostRun
            | ToolDecision::Confirm { .. }
            | ToolDecision::WriteArtifact
            | ToolDecision::RunCommand(_) => None,
        };
        results.push(ToolResult {
            call_id: call.call_id,
            decision,
            message,
        });
    }
    bind_workspace(state, commands, effects);
    state.active_turn = Some(turn);
    Ok(Reply::ToolResults(results))
}

/// Binds the session to the workspace the host found, when it has bound
/// none yet (P12), in the transaction of the decision that looked at it.
fn bind_workspace(state: &SessionState, commands: &CommandFacts, effects: &mut Vec<Effect>) {
    if let Some(identity) = commands.unbound_workspace() {
        effects.push(Effect::BindWorkspace {
            session_id: state.session.id.clone(),
            identity,
        });
    }
}

/// Starts a command plan-core allowed: its start is recorded before
/// anything is spawned; one that the facts say cannot run here is recorded
/// ended at once and never spawned. Returns the launch and the status the
/// turn keeps for the call.
fn start_run(
    request: CommandRequest,
    commands: &CommandFacts,
    now: UnixMs,
    effects: &mut Vec<Effect>,
) -> (CommandLaunch, TurnCommandStatus) {
    let launched = launch(request, commands, now);
    let mut started = launched.run.clone();
    started.state = crate::CommandState::Running;
    started.error_code = None;
    started.ended_at = None;
    effects.push(Effect::RecordCommand {
        kind: CommandEntryKind::Started,
        run: started,
    });
    if launched.spawns() {
        return (launched, TurnCommandStatus::Running);
    }
    effects.push(Effect::RecordCommand {
        kind: CommandEntryKind::Ended,
        run: launched.run.clone(),
    });
    (launched, TurnCommandStatus::Ended)
}

/// One call of a Plan turn: the catalog's Plan allowlist, Bash run by the
/// host in the read-only sandbox, SubmitPlan written as an artifact.
fn plan_decision(
    state: &SessionState,
    context: &Context,
    turn: &mut ActiveTurn,
    call: &ToolCall,
    commands: &CommandFacts,
    effects: &mut Vec<Effect>,
) -> ToolDecision {
    match tool_kind(&call.name) {
        ToolKind::Bash => match plan_command(state, context, turn, call, commands) {
            Ok(request) => {
                let input = CallDigest::of_run(&request.input);
                let (launched, status) = start_run(request, commands, context.now, effects);
                turn.commands.push(TurnCommand {
                    call_id: call.call_id.clone(),
                    status,
                    input,
                    registration: None,
                });
                ToolDecision::RunCommand(Box::new(launched))
            }
            Err(code) => ToolDecision::Deny(code),
        },
        ToolKind::ReadOnly => ToolDecision::Allow,
        ToolKind::ChangesFiles | ToolKind::Other => ToolDecision::Deny(ErrorCode::ToolDeniedInPlan),
        // Not in any turn: the more specific reason.
        ToolKind::RunsProgram => ToolDecision::Deny(ErrorCode::ToolRunsOutsideHost),
        // A plan is submitted only once every command of the turn ended:
        // a Plan turn never ends with a command still running.
        ToolKind::SubmitPlan if turn.has_running_command() => ToolDecision::Deny(ErrorCode::SessionBusy),
        ToolKind::SubmitPlan => match submit_plan(state, context, turn, call) {
            Ok(request) => {
                effects.push(Effect::WriteArtifact(request));
                ToolDecision::WriteArtifact
            }
            Err(code) => ToolDecision::Deny(code),
        },
    }
}

/// One call of an Agent turn: the permission table under the session's
/// permission mode and the turn's origin (for a file-changing call, by
/// where it writes). A call that is not a plain allow is remembered in the
/// turn, with the digest of its input, and audited once. The same call id
/// sent again with the same input gets the decision it has now, unaudited;
/// with another tool or another input (P14: another path, content,
/// command, `cwd` or timeout) it is `INVALID_PARAMS` and changes nothing,
/// so a confirmation never covers an input nobody saw.
fn agent_decision(
    state: &SessionState,
    context: &Context,
    turn: &mut ActiveTurn,
    call: &ToolCall,
    commands: &CommandFacts,
    effects: &mut Vec<Effect>,
) -> ToolDecision {
    let kind = tool_kind(&call.name);
    let input = CallDigest::of_call(
        &call.name,
        &call.input,
        state.session.workspace_root.as_deref(),
        &context.limits.commands,
    );
    if let Some(known) = turn
        .confirmations
        .iter()
        .find(|known| known.call_id == call.call_id)
    {
        // A call id stands for the one call that was decided; reusing it
        // for another tool or another input would borrow that decision.
        if known.tool != call.name || known.input != input {
            return ToolDecision::Deny(ErrorCode::InvalidParams);
        }
        return decision_of(known);
    }
    let mode = state.session.permission_mode;
    let permission = match kind {
        ToolKind::ChangesFiles => {
            let target = write_target(
                &call.input,
                state.session.workspace_root.as_deref(),
                commands.write(&call.call_id),
            );
            write_permission(target, mode, turn.origin)
        }
        ToolKind::ReadOnly
        | ToolKind::Bash
        | ToolKind::SubmitPlan
        | ToolKind::RunsProgram
        | ToolKind::Other => agent_permission(kind, mode, turn.origin),
    };
    // What is remembered and audited: a mode's grant, a confirmation asked
    // for, a confirmation nobody can give (the non-interactive rule), and a
    // write nobody may make. A plain allow and the refusals of what a
    // permission mode never grants (SubmitPlan, a program outside the
    // host) are neither.
    let (status, audit_kind, error_code) = match permission.rule {
        PermissionRule::Allow if granted_by_mode(kind) => {
            (ConfirmationStatus::NotNeeded, ToolAuditKind::AutoAllowed, None)
        }
        PermissionRule::Allow => return ToolDecision::Allow,
        PermissionRule::Confirm => (
            ConfirmationStatus::Awaiting,
            ToolAuditKind::ConfirmRequested,
            None,
        ),
        PermissionRule::Deny(code)
            if code == ErrorCode::PermissionRequiresInteractiveSession
                || code == ErrorCode::ToolWriteProtected =>
        {
            (
                ConfirmationStatus::Declined(code),
                ToolAuditKind::Declined,
                Some(code),
            )
        }
        PermissionRule::Deny(code) => return ToolDecision::Deny(code),
    };
    let awaiting_input = (status == ConfirmationStatus::Awaiting).then(|| call.input.clone());
    let confirmation = ToolConfirmation {
        call_id: call.call_id.clone(),
        tool: call.name.clone(),
        kind,
        input,
        status,
        awaiting_input,
    };
    effects.push(Effect::RecordToolAudit(ToolAuditEntry {
        kind: audit_kind,
        session_id: state.session.id.clone(),
        turn_id: turn.turn_id.clone(),
        execution_id: execution_of(state, turn),
        call_id: call.call_id.clone(),
        tool: Some(call.name.clone()),
        permission_mode: Some(mode),
        error_code,
        at: context.now,
    }));
    allow_start(turn, &confirmation);
    let decision = decision_of(&confirmation);
    turn.confirmations.push(confirmation);
    decision
}

/// The calls of the session's active turn that wait for a person, oldest
/// first: what a frontend shows so the person can confirm or decline each
/// (`tool/listAwaiting`).
pub fn awaiting_calls(state: &SessionState) -> Vec<AwaitingCall> {
    let Some(turn) = &state.active_turn else {
        return Vec::new();
    };
    turn.confirmations
        .iter()
        .filter(|known| known.status == ConfirmationStatus::Awaiting)
        .map(|known| AwaitingCall {
            session_id: state.session.id.clone(),
            turn_id: turn.turn_id.clone(),
            execution_id: execution_of(state, turn),
            call_id: known.call_id.clone(),
            tool: known.tool.clone(),
            input: known.awaiting_input.clone().unwrap_or(serde_json::Value::Null),
            permission_mode: state.session.permission_mode,
        })
        .collect()
}

/// The decision a remembered call has now.
fn decision_of(confirmation: &ToolConfirmation) -> ToolDecision {
    let host_run = confirmation.kind == ToolKind::Bash;
    match confirmation.status {
        ConfirmationStatus::NotNeeded | ConfirmationStatus::Confirmed if host_run => ToolDecision::HostRun,
        ConfirmationStatus::NotNeeded | ConfirmationStatus::Confirmed => ToolDecision::Allow,
        ConfirmationStatus::Awaiting => ToolDecision::Confirm { host_run },
        ConfirmationStatus::Declined(code) => ToolDecision::Deny(code),
    }
}

/// Lets `command/start` run an allowed or confirmed Bash call, once.
fn allow_start(turn: &mut ActiveTurn, confirmation: &ToolConfirmation) {
    let may_start = match confirmation.status {
        ConfirmationStatus::NotNeeded | ConfirmationStatus::Confirmed => true,
        ConfirmationStatus::Awaiting | ConfirmationStatus::Declined(_) => false,
    };
    if may_start
        && confirmation.kind == ToolKind::Bash
        && !turn
            .commands
            .iter()
            .any(|known| known.call_id == confirmation.call_id)
    {
        turn.commands.push(TurnCommand {
            call_id: confirmation.call_id.clone(),
            status: TurnCommandStatus::Allowed,
            input: confirmation.input,
            registration: None,
        });
    }
}

/// The execution the turn carries out, when it is an execution turn.
fn execution_of(state: &SessionState, turn: &ActiveTurn) -> Option<ExecutionId> {
    match turn.kind {
        TurnKind::Execution => state
            .live_execution
            .as_ref()
            .and_then(|live| live.execution_id.clone()),
        TurnKind::Prompt => None,
    }
}

/// `tool/confirm`: a person's answer to a call of the active turn that
/// awaits it. Anything else (another turn, a call never decided `confirm`,
/// one answered already, a turn that ended) is
/// `TOOL_CONFIRMATION_NOT_PENDING`.
fn confirm_tool(
    state: &mut SessionState,
    context: &Context,
    turn_id: &TurnId,
    call_id: CallId,
    allow: bool,
    effects: &mut Vec<Effect>,
) -> Result<Reply, ErrorCode> {
    let Some(mut turn) = state.active_turn.clone().filter(|turn| turn.turn_id == *turn_id) else {
        return Err(ErrorCode::ToolConfirmationNotPending);
    };
    let Some(index) = turn
        .confirmations
        .iter()
        .position(|known| known.call_id == call_id && known.status == ConfirmationStatus::Awaiting)
    else {
        return Err(ErrorCode::ToolConfirmationNotPending);
    };
    let (status, audit_kind, error_code) = if allow {
        (ConfirmationStatus::Confirmed, ToolAuditKind::Confirmed, None)
    } else {
        (
            ConfirmationStatus::Declined(ErrorCode::ToolDeclined),
            ToolAuditKind::Declined,
            Some(ErrorCode::ToolDeclined),
        )
    };
    let confirmation = {
        let Some(known) = turn.confirmations.get_mut(index) else {
            return Err(ErrorCode::ToolConfirmationNotPending);
        };
        known.status = status;
        known.awaiting_input = None;
        known.clone()
    };
    effects.push(Effect::RecordToolAudit(ToolAuditEntry {
        kind: audit_kind,
        session_id: state.session.id.clone(),
        turn_id: turn.turn_id.clone(),
        execution_id: execution_of(state, &turn),
        call_id: call_id.clone(),
        tool: None,
        permission_mode: None,
        error_code,
        at: context.now,
    }));
    allow_start(&mut turn, &confirmation);
    let decision = decision_of(&confirmation);
    state.active_turn = Some(turn);
    Ok(Reply::ToolConfirmed(ToolResult {
        call_id,
        decision,
        message: None,
    }))
}

/// Decides a Plan-turn Bash call: a fresh call id, valid input, the
/// workspace the session bound and a cwd whose real path stays in it (the
/// host's facts), the kernel sandbox available, and room under the
/// per-session limit. The grant is always read-only and offline; there is
/// no weaker fallback.
fn plan_command(
    state: &SessionState,
    context: &Context,
    turn: &ActiveTurn,
    call: &ToolCall,
    commands: &CommandFacts,
) -> Result<CommandRequest, ErrorCode> {
    if turn.commands.iter().any(|known| known.call_id == call.call_id) {
        return Err(ErrorCode::CommandNotAllowed);
    }
    let options = &context.limits.commands;
    let input = parse_bash_input(&call.input, state.session.workspace_root.as_deref(), options)?;
    commands.plan_refusal(&call.call_id)?;
    crate::commands::check_sandbox(&sandbox_for(turn, options), options)?;
    check_running_limit(turn, context)?;
    command_request(state, context, turn, call.call_id.clone(), input)
}

fn check_running_limit(turn: &ActiveTurn, context: &Context) -> Result<(), ErrorCode> {
    if turn.running_commands().len() >= context.limits.commands.limits.max_running_per_session() {
        return Err(ErrorCode::SessionBusy);
    }
    Ok(())
}

fn command_request(
    state: &SessionState,
    context: &Context,
    turn: &ActiveTurn,
    call_id: CallId,
    input: crate::BashInput,
) -> Result<CommandRequest, ErrorCode> {
    let workspace_root = state
        .session
        .workspace_root
        .as_deref()
        .ok_or(ErrorCode::SessionNotProjectBound)
        .and_then(|root| normalize_workspace_root(root).map_err(|_| ErrorCode::CommandCwdEscape))?;
    Ok(CommandRequest {
        session_id: state.session.id.clone(),
        turn_id: turn.turn_id.clone(),
        call_id,
        workspace_root,
        input,
        shell: state.session.shell.clone(),
        grant: sandbox_for(turn, &context.limits.commands),
    })
}

/// `command/start` for an Agent turn's allowed or confirmed Bash call, with
/// exactly the input the call held: the same command text, `cwd` and
/// timeout (compared by [`CallDigest`]). A call still awaiting its
/// confirmation, declined, never decided as Bash in this turn, already
/// started, or started with any other input is `COMMAND_NOT_ALLOWED`.
fn start_command(
    state: &mut SessionState,
    context: &Context,
    turn_id: &TurnId,
    call_id: CallId,
    input: &serde_json::Value,
    commands: &CommandFacts,
    effects: &mut Vec<Effect>,
) -> Result<Reply, ErrorCode> {
    let turn = active_turn_named(state, turn_id)?.clone();
    match turn.mode {
        // Plan commands start only through turn/toolCalls, always sandboxed.
        Mode::Plan => return Err(ErrorCode::CommandNotAllowed),
        Mode::Agent => {}
    }
    let Some(index) = turn
        .commands
        .iter()
        .position(|known| known.call_id == call_id && known.status == TurnCommandStatus::Allowed)
    else {
        return Err(ErrorCode::CommandNotAllowed);
    };
    let options = &context.limits.commands;
    let input = parse_bash_input(input, state.session.workspace_root.as_deref(), options)?;
    // Only the input that was decided (and confirmed) may run: the same
    // command, in the same cwd, with the same timeout.
    let decided = turn.commands.get(index).map(|known| known.input);
    if decided != Some(CallDigest::of_run(&input)) {
        return Err(ErrorCode::CommandNotAllowed);
    }
    let request = command_request(state, context, &turn, call_id, input)?;
    crate::commands::check_sandbox(&request.grant, options)?;
    check_running_limit(&turn, context)?;
    let (launched, status) = start_run(request, commands, context.now, effects);
    let mut turn = turn;
    if let Some(command) = turn.commands.get_mut(index) {
        command.status = status;
    }
    bind_workspace(state, commands, effects);
    state.active_turn = Some(turn);
    Ok(Reply::CommandStarted(launched))
}

/// `command/register`: a Bash call of the active turn held for a client
/// that names it by reference. In a Plan prompt turn the call is decided
/// as every Plan Bash call is (a fresh call id, valid input, a cwd inside
/// the workspace, the read-only sandbox available) and registered instead
/// of run; in an Agent turn it must be a call the turn allowed or a person
/// confirmed, with exactly the input decided. Anything else is
/// `COMMAND_NOT_ALLOWED`.
fn register_command(
    state: &mut SessionState,
    context: &Context,
    turn_id: &TurnId,
    call_id: CallId,
    input: serde_json::Value,
    reference: String,
    commands: &CommandFacts,
) -> Result<Reply, ErrorCode> {
    let mut turn = active_turn_named(state, turn_id)?.clone();
    let options = &context.limits.commands;
    let parsed = parse_bash_input(&input, state.session.workspace_root.as_deref(), options)?;
    let digest = CallDigest::of_run(&parsed);
    let registration = Registration {
        reference: reference.clone(),
        input,
    };
    match (turn.mode, turn.kind) {
        (Mode::Plan, TurnKind::Prompt) => {
            if turn.commands.iter().any(|known| known.call_id == call_id) {
                return Err(ErrorCode::CommandNotAllowed);
            }
            commands.plan_refusal(&call_id)?;
            let grant = sandbox_for(&turn, options);
            crate::commands::check_sandbox(&grant, options)?;
            commands.registration_refusal(grant)?;
            turn.commands.push(TurnCommand {
                call_id: call_id.clone(),
                status: TurnCommandStatus::Registered,
                input: digest,
                registration: Some(registration),
            });
        }
        (Mode::Agent, TurnKind::Prompt | TurnKind::Execution) => {
            let Some(known) = turn.commands.iter_mut().find(|known| {
                known.call_id == call_id
                    && known.status == TurnCommandStatus::Allowed
                    && known.input == digest
            }) else {
                return Err(ErrorCode::CommandNotAllowed);
            };
            known.registration = Some(registration);
        }
        (Mode::Plan, TurnKind::Execution) => return Err(ErrorCode::CommandNotAllowed),
    }
    state.active_turn = Some(turn);
    Ok(Reply::CommandRegistered { call_id, reference })
}

/// `command/run`: starts the call registered under `reference` in the
/// session's active turn, as it was registered and in the sandbox of the
/// turn's phase, once. A reference of another turn, of a call that
/// started already, or one never given is `COMMAND_NOT_ALLOWED`.
fn run_registered(
    state: &mut SessionState,
    context: &Context,
    reference: &str,
    commands: &CommandFacts,
    effects: &mut Vec<Effect>,
) -> Result<Reply, ErrorCode> {
    if state.pending_approval.is_some() {
        return Err(ErrorCode::SessionBusy);
    }
    let Some(mut turn) = state.active_turn.clone() else {
        return Err(ErrorCode::CommandNotAllowed);
    };
    let Some(index) = turn
        .commands
        .iter()
        .position(|known| known.awaits_run_by(reference))
    else {
        return Err(ErrorCode::CommandNotAllowed);
    };
    let Some(known) = turn.commands.get(index).cloned() else {
        return Err(ErrorCode::CommandNotAllowed);
    };
    let Some(registration) = known.registration else {
        return Err(ErrorCode::CommandNotAllowed);
    };
    let options = &context.limits.commands;
    let input = parse_bash_input(
        &registration.input,
        state.session.workspace_root.as_deref(),
        options,
    )?;
    if CallDigest::of_run(&input) != known.input {
        return Err(ErrorCode::CommandNotAllowed);
    }
    if known.status == TurnCommandStatus::Registered {
        commands.plan_refusal(&known.call_id)?;
    }
    let request = command_request(state, context, &turn, known.call_id, input)?;
    crate::commands::check_sandbox(&request.grant, options)?;
    check_running_limit(&turn, context)?;
    let (launched, status) = start_run(request, commands, context.now, effects);
    if let Some(command) = turn.commands.get_mut(index) {
        // The registration stays: the reference is spent, not unknown.
        command.status = status;
    }
    bind_workspace(state, commands, effects);
    state.active_turn = Some(turn);
    Ok(Reply::CommandStarted(launched))
}

/// A running command of the active turn ended.
fn command_ended(state: &mut SessionState, call_id: &CallId) -> Result<Reply, ErrorCode> {
    let running = state.active_turn.as_mut().and_then(|turn| {
        turn.commands
            .iter_mut()
            .find(|known| &known.call_id == call_id && known.status == TurnCommandStatus::Running)
    });
    match running {
        Some(command) => {
            command.status = TurnCommandStatus::Ended;
            Ok(Reply::SessionUpdated)
        }
        None => Err(ErrorCode::CommandNotRunning),
    }
}

/// `command/cancel`: a running command gets killed; the kill is confirmed
/// when it ends.
fn cancel_command(
    state: &SessionState,
    call_id: CallId,
    known_ended: bool,
    effects: &mut Vec<Effect>,
) -> Result<Reply, ErrorCode> {
    let status = state.active_turn.as_ref().and_then(|turn| {
        turn.commands
            .iter()
            .find(|known| known.call_id == call_id)
            .map(|known| known.status)
    });
    match (status, known_ended) {
        (Some(TurnCommandStatus::Running), _) => {
            effects.push(Effect::CancelCommand {
                call_id,
                before_turn_end: false,
            });
            Ok(Reply::SessionUpdated)
        }
        (Some(TurnCommandStatus::Allowed | TurnCommandStatus::Registered | TurnCommandStatus::Ended), _)
        | (None, true) => Err(ErrorCode::CommandNotRunning),
        (None, false) => Err(ErrorCode::CommandNotFound),
    }
}

fn submit_plan(
    state: &SessionState,
    context: &Context,
    turn: &ActiveTurn,
    call: &ToolCall,
) -> Result<ArtifactRequest, ErrorCode> {
    let Some(workspace_root) = state.session.workspace_root.as_deref() else {
        return Err(ErrorCode::SessionNotProjectBound);
    };
    // Sessions created by this host store a normalized root already; a row
    // migrated from v8 may not, and one that cannot be normalized names no
    // safe place to write.
    let workspace_root =
        normalize_workspace_root(workspace_root).map_err(|_| ErrorCode::ArtifactPathEscape)?;
    let input = parse_submit_plan_input(&call.input, context.limits.markdown_limit_bytes())?;
    Ok(ArtifactRequest {
        session_id: state.session.id.clone(),
        turn_id: turn.turn_id.clone(),
        call_id: call.call_id.clone(),
        workspace_root,
        title: input.title,
        question: input.question,
        markdown: input.markdown,
    })
}

/// Checks that an artifact report still belongs to the active Plan turn of
/// this session with no approval pending.
fn check_artifact_report(state: &SessionState, request: &ArtifactRequest) -> Result<(), ErrorCode> {
    if request.session_id != state.session.id {
        return Err(ErrorCode::SessionNotFound);
    }
    let turn = active_turn_named(state, &request.turn_id)?;
    match (turn.mode, turn.kind) {
        (Mode::Plan, TurnKind::Prompt) => Ok(()),
        (Mode::Plan, TurnKind::Execution) | (Mode::Agent, TurnKind::Prompt | TurnKind::Execution) => {
            Err(ErrorCode::PlanNotActive)
        }
    }
}

fn artifact_written(
    state: &mut SessionState,
    context: &Context,
    request: ArtifactRequest,
    approval_id: ApprovalId,
    artifact: Artifact,
    effects: &mut Vec<Effect>,
) -> Result<Reply, ErrorCode> {
    check_artifact_report(state, &request)?;
    let approval = PlanApproval {
        id: approval_id,
        session_id: request.session_id,
        turn_id: request.turn_id,
        title: request.title,
        question: request.question,
        artifact: Some(artifact),
        status: ApprovalStatus::Pending,
        error_code: None,
        created_at: context.now,
        expires_at: context.now.saturating_add(context.limits.approval_ttl_ms()),
        decided_at: None,
        permission_mode: None,
        execution_id: None,
        execution_state: None,
    };
    state.pending_approval = Some(approval.clone());
    effects.push(Effect::InsertApproval(approval.clone()));
    Ok(Reply::ApprovalRequested {
        call_id: request.call_id,
        approval,
    })
}

fn artifact_failed(
    state: &SessionState,
    request: &ArtifactRequest,
    code: ErrorCode,
) -> Result<Reply, ErrorCode> {
    check_artifact_report(state, request)?;
    // The Plan turn stays active so the agent may try again; nothing was created.
    Ok(Reply::ToolResults(vec![ToolResult {
        call_id: request.call_id.clone(),
        decision: ToolDecision::Deny(code),
        message: None,
    }]))
}

/// Finds the pending approval a decision names, or says why it cannot be decided.
///
/// `approval` is the row as the caller loaded it, before this event's lazy
/// expiry, so a row that ran out of time a moment ago still reads `pending`
/// there while the state no longer holds it.
fn pending_for_decision(
    state: &SessionState,
    context: &Context,
    approval: &PlanApproval,
) -> Result<PlanApproval, ErrorCode> {
    if approval.session_id != state.session.id {
        return Err(ErrorCode::ApprovalNotFound);
    }
    match state.pending_approval.as_ref() {
        Some(pending) if pending.id == approval.id => Ok(pending.clone()),
        Some(_) | None => match approval.status {
            ApprovalStatus::Expired => Err(ErrorCode::PlanApprovalTimeout),
            ApprovalStatus::Pending if context.now >= approval.expires_at => {
                Err(ErrorCode::PlanApprovalTimeout)
            }
            ApprovalStatus::Pending
            | ApprovalStatus::Approved
            | ApprovalStatus::Rejected
            | ApprovalStatus::Interrupted => Err(ErrorCode::ApprovalNotPending),
        },
    }
}

fn approve(
    state: &mut SessionState,
    context: &Context,
    approval: &PlanApproval,
    permission_mode: Option<PermissionMode>,
    (execution_id, execution_turn_id): (ExecutionId, TurnId),
    artifact: &ArtifactVerification,
    effects: &mut Vec<Effect>,
) -> Result<Reply, ErrorCode> {
    let pending = pending_for_decision(state, context, approval)?;
    let Some(permission_mode) = permission_mode else {
        return Err(ErrorCode::PermissionModeRequired);
    };
    if artifact.approval_id != pending.id {
        return Err(ErrorCode::Internal);
    }
    if let Some(refusal) = artifact.refuses_approval() {
        return Err(refusal);
    }
    let expected = RowGuard::of(&pending);
    let mut approved = pending;
    approved.status = ApprovalStatus::Approved;
    approved.decided_at = Some(context.now);
    approved.permission_mode = Some(permission_mode);
    approved.execution_id = Some(execution_id);
    approved.execution_state = Some(ExecutionState::Queued);
    state.session.mode = Mode::Agent;
    state.session.permission_mode = permission_mode;
    state.pending_approval = None;
    state.live_execution = Some(approved.clone());
    state.active_turn = Some(ActiveTurn::new(
        execution_turn_id,
        Mode::Agent,
        Origin::Interactive,
        TurnKind::Execution,
        context.epoch,
    ));
    effects.push(Effect::UpdateApproval {
        approval: approved.clone(),
        expected,
    });
    effects.push(Effect::SaveSession(state.session.clone()));
    Ok(Reply::Decided(approved))
}

fn reject(
    state: &mut SessionState,
    context: &Context,
    approval: &PlanApproval,
    effects: &mut Vec<Effect>,
) -> Result<Reply, ErrorCode> {
    let pending = pending_for_decision(state, context, approval)?;
    let expected = RowGuard::of(&pending);
    let mut rejected = pending;
    rejected.status = ApprovalStatus::Rejected;
    rejected.decided_at = Some(context.now);
    state.pending_approval = None;
    state.active_turn = None;
    effects.push(Effect::UpdateApproval {
        approval: rejected.clone(),
        expected,
    });
    Ok(Reply::Decided(rejected))
}

/// The pending plan ends undecided: `interrupted`, `PLAN_WITHDRAWN`, at
/// `now`; the Plan turn ends with it, as a rejection's does, so the agent
/// may plan again.
fn withdraw(
    state: &mut SessionState,
    context: &Context,
    approval: &PlanApproval,
    effects: &mut Vec<Effect>,
) -> Result<Reply, ErrorCode> {
    let pending = pending_for_decision(state, context, approval)?;
    let expected = RowGuard::of(&pending);
    let mut withdrawn = pending;
    withdrawn.status = ApprovalStatus::Interrupted;
    withdrawn.error_code = Some(ErrorCode::PlanWithdrawn);
    withdrawn.decided_at = Some(context.now);
    state.pending_approval = None;
    state.active_turn = None;
    effects.push(Effect::UpdateApproval {
        approval: withdrawn.clone(),
        expected,
    });
    Ok(Reply::Decided(withdrawn))
}

fn configure(
    state: &mut SessionState,
    change: ConfigChange,
    shells: &[String],
    effects: &mut Vec<Effect>,
) -> Result<Reply, ErrorCode> {
    // An unknown shell is a bad request whatever the session is doing.
    if let Some(Some(shell)) = &change.shell {
        check_shell(shells.iter().map(String::as_str), shell)?;
    }
    if !state.is_idle() {
        return Err(ErrorCode::SessionBusy);
    }
    let ConfigChange {
        mode,
        permission_mode,
        provider,
        model,
        shell,
    } = change;
    let before = state.session.clone();
    let session = &mut state.session;
    if let Some(mode) = mode {
        session.mode = mode;
    }
    if let Some(permission_mode) = permission_mode {
        session.permission_mode = permission_mode;
    }
    if let Some(provider) = provider {
        session.provider = provider;
    }
    if let Some(model) = model {
        session.model = model;
    }
    if let Some(shell) = shell {
        session.shell = shell;
    }
    if *session != before {
        effects.push(Effect::SaveSession(session.clone()));
    }
    Ok(Reply::SessionUpdated)
}

fn complete_turn(state: &mut SessionState, turn_id: &TurnId) -> Result<Reply, ErrorCode> {
    let turn = active_turn_named(state, turn_id)?;
    if turn.has_running_command() {
        return Err(ErrorCode::SessionBusy);
    }
    match turn.kind {
        TurnKind::Prompt => {
            state.active_turn = None;
            Ok(Reply::SessionUpdated)
        }
        // An execution turn ends through execution/complete, which records
        // the execution's outcome; ending it silently would lose that.
        TurnKind::Execution => Err(ErrorCode::SessionBusy),
    }
}

fn cancel_turn(
    state: &mut SessionState,
    context: &Context,
    effects: &mut Vec<Effect>,
) -> Result<Reply, ErrorCode> {
    if state.pending_approval.is_some() {
        return Err(ErrorCode::SessionBusy);
    }
    let Some(turn) = state.active_turn.take() else {
        return Err(ErrorCode::TurnNotActive);
    };
    // Every running command of the turn is killed, and has exited, before
    // anything else of the cancellation happens.
    for call_id in turn.running_commands() {
        effects.push(Effect::CancelCommand {
            call_id,
            before_turn_end: true,
        });
    }
    if let Some(live) = state.live_execution.take() {
        let expected = RowGuard::of(&live);
        let mut interrupted = live;
        interrupted.execution_state = Some(ExecutionState::Interrupted);
        interrupted.error_code = Some(ErrorCode::ExecutionCancelled);
        interrupted.decided_at = interrupted.decided_at.or(Some(context.now));
        effects.push(Effect::UpdateApproval {
            approval: interrupted,
            expected,
        });
    }
    Ok(Reply::SessionUpdated)
}

fn advance_execution(
    state: &mut SessionState,
    context: &Context,
    execution_id: &ExecutionId,
    reporter_epoch: BootEpoch,
    from: ExecutionState,
    to: ExecutionState,
    effects: &mut Vec<Effect>,
) -> Result<Reply, ErrorCode> {
    let Some(live) = state.live_execution.as_ref() else {
        return Err(ErrorCode::ExecutionNotActive);
    };
    if live.execution_id.as_ref() != Some(execution_id) {
        return Err(ErrorCode::ExecutionNotActive);
    }
    let turn_epoch = state.active_turn.as_ref().map(|turn| turn.epoch);
    if reporter_epoch != context.epoch || turn_epoch != Some(context.epoch) {
        return Err(ErrorCode::HostRestarted);
    }
    if live.execution_state != Some(from) {
        return Err(ErrorCode::ExecutionNotActive);
    }
    // Completing ends the execution turn, which never ends with a command
    // still running.
    if !to.is_live()
        && state
            .active_turn
            .as_ref()
            .is_some_and(ActiveTurn::has_running_command)
    {
        return Err(ErrorCode::SessionBusy);
    }
    let expected = RowGuard::of(live);
    let mut advanced = live.clone();
    advanced.execution_state = Some(to);
    if to.is_live() {
        state.live_execution = Some(advanced.clone());
    } else {
        state.live_execution = None;
        state.active_turn = None;
    }
    effects.push(Effect::UpdateApproval {
        approval: advanced.clone(),
        expected,
    });
    Ok(Reply::ExecutionChanged(advanced))
}
