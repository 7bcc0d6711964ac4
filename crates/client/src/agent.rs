//! The flows every hook-driven agent shares, in protocol types: a Plan or
//! Agent turn made sure of, a call decided, a plan submitted and its own
//! `plan/approvalResolved` awaited (the row as the notification carries
//! it), the approved bytes read back and checked once against the hash the
//! person saw, a host-run command's output streamed until it ends, a call
//! confirmed, an execution ended.
//!
//! An adapter maps its agent's hook JSON onto these flows and their
//! answers back; everything here is the host's answer, passed on. What
//! this module must not do: decide whether anything may happen (that is
//! the host's), spell a method name (each request is its params type), or
//! start a host (the adapter connects, and starts the project's host where
//! it has one to start).

use std::time::Duration;

use plan_core::{
    ApprovalFilter, ApprovalId, ApprovalStatus, CallId, CommandState, ErrorCode, ExecutionId, Mode, Origin,
    PlanApproval, SessionId, ToolCall, ToolCallDecision, ToolCallError, ToolCallResult, TurnId, TurnKind,
};
use plan_protocol::{
    CommandGetParams, CommandRun, ExecutionCompleteParams, ExecutionStartParams, OutputStream, PlanGetParams,
    PlanReadArtifactParams, ServerNotification, Session, SessionCreateParams, SessionGetParams,
    ToolConfirmParams, TurnCancelParams, TurnCompleteParams, TurnStartParams, TurnToolCallsParams,
};
use sha2::Digest;

use crate::{Client, ClientError, Transport};

/// How long a wait for a notification goes before it asks the host
/// directly (a notification the host dropped under load is not waited
/// for forever).
const LOOK_AGAIN: Duration = Duration::from_secs(15);

/// One agent session on the host: its id and the project it works in.
#[derive(Debug)]
pub struct AgentSession<'client, T: Transport> {
    client: &'client mut Client<T>,
    session_id: SessionId,
    workspace_root: String,
    hashes: u64,
}

/// The turn a call belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// The turn's id.
    pub turn_id: TurnId,
    /// Plan or Agent.
    pub mode: Mode,
    /// A prompt turn, or the execution of an approved plan.
    pub kind: TurnKind,
}

/// What became of a submitted plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanOutcome {
    /// Approved: the artifact's bytes, read back and checked against the
    /// SHA-256 the person saw.
    Approved {
        /// The approval as decided (its permission mode, its execution).
        approval: PlanApproval,
        /// The plan, exactly as approved.
        markdown: String,
    },
    /// Rejected, expired, interrupted, or approved but no longer readable
    /// as it was: the sentence the model reads (the host's code first
    /// where there is one).
    NotApproved {
        /// The approval as it ended.
        approval: PlanApproval,
        /// What the agent is told.
        reason: String,
    },
}

impl<'client, T: Transport> AgentSession<'client, T> {
    /// The session `session_id` in the project at `workspace_root`, over
    /// an initialized client.
    pub fn new(client: &'client mut Client<T>, session_id: SessionId, workspace_root: String) -> Self {
        AgentSession {
            client,
            session_id,
            workspace_root,
            hashes: 0,
        }
    }

    /// The client, for a request no flow here makes.
    pub fn client(&mut self) -> &mut Client<T> {
        self.client
    }

    /// The session's id.
    pub fn session_id(&self) -> &SessionId {
        &self.session_id
    }

    /// How many SHA-256 digests this session's flows computed.
    pub fn hashes(&self) -> u64 {
        self.hashes
    }

    /// The session as the host has it, created (bound to the project, in
    /// `mode`) when the host has none.
    ///
    /// # Errors
    ///
    /// The host's refusal, or a transport failure.
    pub fn session(&mut self, mode: Mode) -> Result<Session, ClientError> {
        match self.client.session_get(&SessionGetParams {
            session_id: self.session_id.clone(),
        }) {
            Err(error) if error.code() == Some(ErrorCode::SessionNotFound) => {
                self.client.session_create(&SessionCreateParams {
                    session_id: Some(self.session_id.clone()),
                    workspace_root: Some(self.workspace_root.clone()),
                    mode: Some(mode),
                    permission_mode: None,
                })
            }
            other => other,
        }
    }

    /// The session's active turn in `mode`, made where missing: a turn of
    /// the other phase ends first (an Agent prompt turn completes, the
    /// execution of an approved plan completes or, never started, is
    /// cancelled; a Plan turn left without an approval is cancelled, which
    /// the host records), then a turn starts, the session switching mode
    /// in that same request. An approved plan's execution turn is started
    /// as it is found.
    ///
    /// # Errors
    ///
    /// The host's refusal (`SESSION_BUSY` while a plan is pending, ...),
    /// or a transport failure.
    pub fn ensure_turn(&mut self, mode: Mode, prompt: &str) -> Result<Turn, ClientError> {
        let session = self.session(mode)?;
        if let Some(active) = &session.active_turn {
            let turn = Turn {
                turn_id: TurnId::from(active.turn_id.clone()),
                mode: active.mode,
                kind: active.kind,
            };
            if active.mode == mode {
                if active.kind == TurnKind::Execution
                    && let Some(execution) = &session.active_execution_id
                {
                    self.begin_execution(&ExecutionId::from(execution.clone()))?;
                }
                return Ok(turn);
            }
            self.end_turn(&turn, session.active_execution_id.as_deref())?;
        }
        // The session switches phase in the step that starts the turn.
        let started = self.client.turn_start(&TurnStartParams {
            session_id: self.session_id.clone(),
            prompt: prompt.to_owned(),
            origin: Origin::Interactive,
            mode: (session.mode != mode).then_some(mode),
        })?;
        Ok(Turn {
            turn_id: TurnId::from(started.turn_id),
            mode: started.mode,
            kind: TurnKind::Prompt,
        })
    }

    /// Moves a queued execution to running; one running already is left
    /// as it is.
    fn begin_execution(&mut self, execution_id: &ExecutionId) -> Result<(), ClientError> {
        match self.client.execution_start(&ExecutionStartParams {
            execution_id: execution_id.clone(),
        }) {
            Ok(_) => Ok(()),
            Err(error) if error.code() == Some(ErrorCode::ExecutionNotActive) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Ends `turn`, which belongs to the phase the agent left.
    fn end_turn(&mut self, turn: &Turn, execution: Option<&str>) -> Result<(), ClientError> {
        match (turn.mode, turn.kind, execution) {
            (Mode::Agent, TurnKind::Execution, Some(execution)) => {
                match self.end_execution(&ExecutionId::from(execution.to_owned())) {
                    // Approved but never begun: it did not happen.
                    Err(error) if error.code() == Some(ErrorCode::ExecutionNotActive) => self.cancel_turn(),
                    other => other.map(|_| ()),
                }
            }
            (Mode::Agent, TurnKind::Prompt, _) => self
                .client
                .turn_complete(&TurnCompleteParams {
                    session_id: self.session_id.clone(),
                    turn_id: turn.turn_id.clone(),
                })
                .map(|_| ()),
            (Mode::Plan, _, _) | (Mode::Agent, TurnKind::Execution, None) => self.cancel_turn(),
        }
    }

    fn cancel_turn(&mut self) -> Result<(), ClientError> {
        self.client
            .turn_cancel(&TurnCancelParams {
                session_id: self.session_id.clone(),
            })
            .map(|_| ())
    }

    /// Ends the turn the agent finished: an execution completes (the
    /// approved work is done), a prompt turn completes.
    ///
    /// # Errors
    ///
    /// The host's refusal (`SESSION_BUSY` while a command runs), or a
    /// transport failure.
    pub fn finish_turn(&mut self, turn: &Turn) -> Result<(), ClientError> {
        let session = self.session(turn.mode)?;
        match session.active_turn {
            Some(active) if active.turn_id == turn.turn_id.as_str() => {
                self.end_turn(turn, session.active_execution_id.as_deref())
            }
            Some(_) | None => Ok(()),
        }
    }

    /// `execution/complete`: the approved work is done.
    ///
    /// # Errors
    ///
    /// `EXECUTION_NOT_ACTIVE` and the other refusals of the host.
    pub fn end_execution(&mut self, execution_id: &ExecutionId) -> Result<PlanApproval, ClientError> {
        self.client.execution_complete(&ExecutionCompleteParams {
            execution_id: execution_id.clone(),
        })
    }

    /// One call decided by the host in `turn`.
    ///
    /// # Errors
    ///
    /// The host's refusal of the whole batch, or a transport failure.
    pub fn decide(&mut self, turn: &TurnId, call: ToolCall) -> Result<ToolCallResult, ClientError> {
        let results = self.client.turn_tool_calls(&TurnToolCallsParams {
            session_id: self.session_id.clone(),
            turn_id: turn.clone(),
            calls: vec![call],
        })?;
        results
            .results
            .into_iter()
            .next()
            .ok_or_else(|| ClientError::malformed("turn/toolCalls answered no result"))
    }

    /// `tool/confirm`: a person's answer to a call the host asked about.
    ///
    /// # Errors
    ///
    /// `TOOL_CONFIRMATION_NOT_PENDING` and the host's other refusals.
    pub fn confirm(
        &mut self,
        turn: &TurnId,
        call_id: &CallId,
        allow: bool,
    ) -> Result<ToolCallResult, ClientError> {
        self.client.tool_confirm(&ToolConfirmParams {
            session_id: self.session_id.clone(),
            turn_id: turn.clone(),
            call_id: call_id.clone(),
            allow,
        })
    }

    /// Submits a plan in the Plan `turn`: the host's pending approval, or
    /// its refusal of the call.
    ///
    /// # Errors
    ///
    /// The host's refusal of the batch, or a transport failure.
    pub fn submit_plan(
        &mut self,
        turn: &TurnId,
        call_id: CallId,
        title: &str,
        markdown: &str,
        question: &str,
    ) -> Result<Result<PlanApproval, ToolCallError>, ClientError> {
        let input = serde_json::json!({"title": title, "markdown": markdown, "question": question});
        let result = self.decide(
            turn,
            ToolCall {
                call_id,
                name: plan_core::SUBMIT_PLAN.to_owned(),
                input,
            },
        )?;
        Ok(match (result.decision, result.approval, result.error) {
            (ToolCallDecision::Allow, Some(approval), _) => Ok(approval),
            (_, _, Some(error)) => Err(error),
            (_, _, None) => Err(ToolCallError {
                code: ErrorCode::Internal,
                message: "the host accepted the plan without an approval".to_owned(),
            }),
        })
    }

    /// Waits until `pending` is decided, expires or is interrupted, and
    /// returns the row its own `plan/approvalResolved` carries. Only after a
    /// long silence, or past the deadline, does it ask the host.
    ///
    /// # Errors
    ///
    /// [`ClientError::Unreachable`] when the host goes away meanwhile.
    pub fn wait_for_decision(&mut self, pending: &PlanApproval) -> Result<PlanApproval, ClientError> {
        loop {
            match self.client.next_notification(Some(LOOK_AGAIN))? {
                Some(ServerNotification::PlanApprovalResolved(resolved))
                    if resolved.approval.id == pending.id =>
                {
                    return Ok(resolved.approval);
                }
                Some(_) => {}
                None => {
                    let approval = self.approval(&pending.id)?;
                    if approval.status != ApprovalStatus::Pending {
                        return Ok(approval);
                    }
                }
            }
        }
    }

    fn approval(&mut self, approval_id: &ApprovalId) -> Result<PlanApproval, ClientError> {
        self.client.plan_get(&PlanGetParams {
            approval_id: approval_id.clone(),
        })
    }

    /// What became of a decided plan: approved, its bytes read back from
    /// the host (which rechecks the file) and hashed once here against the
    /// SHA-256 in the decided row, the one the person saw; otherwise the
    /// sentence the agent reads.
    ///
    /// # Errors
    ///
    /// A transport failure while reading the plan back.
    pub fn outcome(&mut self, approval: PlanApproval) -> Result<PlanOutcome, ClientError> {
        let reason = match approval.status {
            ApprovalStatus::Approved => return self.approved(approval),
            ApprovalStatus::Rejected => format!(
                "The person rejected this plan ({}). Stay in plan mode: revise the plan with them and submit it again.",
                approval.id.as_str()
            ),
            ApprovalStatus::Expired => coded(ErrorCode::PlanApprovalTimeout),
            ApprovalStatus::Interrupted => coded(approval.error_code.unwrap_or(ErrorCode::HostRestarted)),
            ApprovalStatus::Pending => format!(
                "The plan {} is still pending: nobody decided it yet.",
                approval.id.as_str()
            ),
        };
        Ok(PlanOutcome::NotApproved { approval, reason })
    }

    fn approved(&mut self, approval: PlanApproval) -> Result<PlanOutcome, ClientError> {
        let read = match self.client.plan_read_artifact(&PlanReadArtifactParams {
            approval_id: approval.id.clone(),
        }) {
            Ok(read) => read,
            Err(ClientError::Refused { code, message, .. }) => {
                let reason = format!("{}: {message}", code.as_str());
                return Ok(PlanOutcome::NotApproved { approval, reason });
            }
            Err(other) => return Err(other),
        };
        self.hashes += 1;
        let digest = hex::encode(sha2::Sha256::digest(read.markdown.as_bytes()));
        let recorded = approval
            .artifact
            .as_ref()
            .map(|artifact| artifact.sha256.as_str());
        if Some(digest.as_str()) != recorded {
            let reason = coded(ErrorCode::ArtifactIntegrityMismatch);
            return Ok(PlanOutcome::NotApproved { approval, reason });
        }
        Ok(PlanOutcome::Approved {
            approval,
            markdown: read.markdown,
        })
    }

    /// Whether the session's latest submission was decided and not
    /// approved and is exactly `markdown` (its recorded SHA-256): an agent
    /// whose turn went on after that refusal, with no new plan, is not
    /// asked about it again.
    ///
    /// # Errors
    ///
    /// The host's refusal of `plan/list`, or a transport failure.
    pub fn refused_already(&mut self, markdown: &str) -> Result<bool, ClientError> {
        let latest = self.client.plan_list(&ApprovalFilter {
            session_id: Some(self.session_id.clone()),
            limit: Some(1),
            ..ApprovalFilter::default()
        })?;
        let Some(latest) = latest.approvals.into_iter().next() else {
            return Ok(false);
        };
        let refused = match latest.status {
            ApprovalStatus::Rejected | ApprovalStatus::Expired | ApprovalStatus::Interrupted => true,
            ApprovalStatus::Pending | ApprovalStatus::Approved => false,
        };
        if !refused {
            return Ok(false);
        }
        self.hashes += 1;
        let digest = hex::encode(sha2::Sha256::digest(markdown.as_bytes()));
        Ok(latest.artifact.is_some_and(|artifact| artifact.sha256 == digest))
    }

    /// Streams the output of the host-run command `run` (as the host
    /// started it) to `sink` until it ends; returns the run as it ended.
    ///
    /// # Errors
    ///
    /// [`ClientError::Unreachable`] when the host goes away meanwhile (the
    /// command dies with it).
    pub fn stream_command(
        &mut self,
        run: CommandRun,
        sink: &mut dyn FnMut(OutputStream, &str),
    ) -> Result<CommandRun, ClientError> {
        if run.state != CommandState::Running {
            return Ok(run);
        }
        let call_id = run.call_id.clone();
        loop {
            match self.client.next_notification(Some(LOOK_AGAIN))? {
                Some(ServerNotification::CommandOutput(output))
                    if output.call_id == call_id && output.session_id == self.session_id.as_str() =>
                {
                    sink(output.stream, &output.chunk);
                }
                Some(ServerNotification::CommandExited(exited))
                    if exited.call_id == call_id && exited.session_id == self.session_id.as_str() =>
                {
                    return Ok(exited.command);
                }
                Some(_) => {}
                None => {
                    let now = self.client.command_get(&CommandGetParams {
                        session_id: self.session_id.clone(),
                        call_id: call_id.clone(),
                    })?;
                    if now.state != CommandState::Running {
                        return Ok(now);
                    }
                }
            }
        }
    }
}

/// The title a plan gets on the host: its first heading, else its first
/// non-empty line (`fallback` for an empty plan), as one plain line with
/// terminal-control and bidirectional characters shown as escapes, at most
/// the host's title length.
pub fn plan_title(plan: &str, fallback: &str) -> String {
    let lines = || plan.lines().map(str::trim).filter(|line| !line.is_empty());
    let line = lines()
        .find(|line| line.starts_with('#'))
        .map(|line| line.trim_start_matches('#').trim())
        .filter(|line| !line.is_empty())
        .or_else(|| lines().next())
        .unwrap_or(fallback);
    let mut title = String::new();
    for character in line.chars() {
        if plan_core::is_terminal_control(character) {
            title.extend(character.escape_unicode());
        } else {
            title.push(character);
        }
    }
    title
        .chars()
        .take(plan_core::SUBMIT_PLAN_TITLE_MAX_CHARS)
        .collect()
}

/// `CODE: the code's sentence`.
fn coded(code: ErrorCode) -> String {
    format!("{}: {}", code.as_str(), code.message())
}

/// The exit status a process that stands for an ended run exits with (as a
/// shell reports it: `128 + signal` for a killed one, 126 for a run that
/// never started); `None` while it runs.
pub fn exit_status(run: &CommandRun) -> Option<i32> {
    match run.state {
        CommandState::Running => None,
        CommandState::Exited
        | CommandState::TimedOut
        | CommandState::Cancelled
        | CommandState::Interrupted => Some(match (run.exit_code, run.signal) {
            (Some(code), _) => code,
            (None, Some(signal)) => 128 + signal,
            (None, None) => 126,
        }),
        CommandState::FailedToStart => Some(126),
    }
}
