//! The values plan-core reasons about: modes, statuses, sessions, turns and
//! approval rows.
//!
//! The enums and the approval row themselves are declared once in
//! `objects` (the shared list the wire and the bindings use too); this
//! module adds their defaults and predicates and declares what only
//! plan-core has: sessions, turns, limits and the machine's view of a
//! session. It knows nothing of SQL or JSON-RPC.

use crate::commands::{CommandOptions, TurnCommand, TurnCommandStatus};
use crate::objects::{
    ApprovalStatus, Artifact, ExecutionState, Mode, Origin, PermissionMode, PlanApproval, TurnKind,
};
use crate::permissions::{ConfirmationStatus, ToolConfirmation};
use crate::{CallId, ErrorCode, SessionId, TurnId};

/// Unix epoch milliseconds, the only time unit of the checkpoint.
pub type UnixMs = i64;

impl Default for Mode {
    /// Agent is the default selector (ADR 0053 section 1).
    fn default() -> Self {
        Mode::Agent
    }
}

impl Default for PermissionMode {
    /// New sessions and the approval card start at `ask`.
    fn default() -> Self {
        PermissionMode::Ask
    }
}

impl ExecutionState {
    /// Whether this state still holds the session's single execution slot.
    pub const fn is_live(self) -> bool {
        match self {
            ExecutionState::Queued | ExecutionState::Running => true,
            ExecutionState::Completed | ExecutionState::Interrupted => false,
        }
    }
}

/// The in-memory boot epoch of one host process.
///
/// It is never serialized (not in the database, not on the wire). Every turn
/// remembers the epoch that started it, and a report stamped with another
/// epoch comes from an earlier process and is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BootEpoch(pub u64);

/// The persisted configuration of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Session id.
    pub id: SessionId,
    /// Absolute workspace root; `None` when the session is not project-bound.
    pub workspace_root: Option<String>,
    /// Agent or Plan.
    pub mode: Mode,
    /// The permission mode tools run under in Agent turns.
    pub permission_mode: PermissionMode,
    /// Model provider, if chosen.
    pub provider: Option<String>,
    /// Model, if chosen.
    pub model: Option<String>,
    /// Selected shell id; `None` means the persisted default shell.
    pub shell: Option<String>,
}

impl Session {
    /// A new idle session with the defaults: Agent mode, `ask`.
    pub fn new(id: impl Into<SessionId>, workspace_root: Option<String>) -> Session {
        Session {
            id: id.into(),
            workspace_root,
            mode: Mode::default(),
            permission_mode: PermissionMode::default(),
            provider: None,
            model: None,
            shell: None,
        }
    }
}

/// The session's one active turn. Turns live in memory only: a host restart
/// aborts them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveTurn {
    /// Turn id.
    pub turn_id: TurnId,
    /// The session mode the turn runs in.
    pub mode: Mode,
    /// Who started it.
    pub origin: Origin,
    /// Prompt or execution.
    pub kind: TurnKind,
    /// The boot epoch of the process that started it.
    pub epoch: BootEpoch,
    /// The turn's Bash calls: allowed (Agent), running or ended. A command
    /// belongs to its turn and ends before the turn does.
    pub commands: Vec<TurnCommand>,
    /// The turn's Agent calls the permission mode decided (allowed by the
    /// mode, awaiting a person, confirmed or declined), one per call id.
    /// Dropped with the turn: `turn/complete`, `turn/cancel` and the end of
    /// an execution leave no call awaiting.
    pub confirmations: Vec<ToolConfirmation>,
}

impl ActiveTurn {
    /// A turn with no commands yet.
    pub fn new(turn_id: TurnId, mode: Mode, origin: Origin, kind: TurnKind, epoch: BootEpoch) -> ActiveTurn {
        ActiveTurn {
            turn_id,
            mode,
            origin,
            kind,
            epoch,
            commands: Vec::new(),
            confirmations: Vec::new(),
        }
    }

    /// The call ids of the turn's running commands, in start order.
    pub fn running_commands(&self) -> Vec<CallId> {
        self.commands
            .iter()
            .filter(|command| command.status == TurnCommandStatus::Running)
            .map(|command| command.call_id.clone())
            .collect()
    }

    /// Whether a command of the turn is still running.
    pub fn has_running_command(&self) -> bool {
        self.commands
            .iter()
            .any(|command| command.status == TurnCommandStatus::Running)
    }
}

impl PlanApproval {
    /// Whether the row holds its session's execution slot.
    pub fn has_live_execution(&self) -> bool {
        self.execution_state.is_some_and(ExecutionState::is_live)
    }

    /// The artifact a person may be shown a card for: only a pending
    /// approval with its artifact has an approval card. Decided, expired
    /// and interrupted approvals (and a pending row migrated without an
    /// artifact) have none: `APPROVAL_NOT_PENDING`. Every card surface
    /// (`plan/cardUrl` with or without a card server, a card's token)
    /// asks this.
    pub fn card_artifact(&self) -> Result<&Artifact, ErrorCode> {
        match (self.status, &self.artifact) {
            (ApprovalStatus::Pending, Some(artifact)) => Ok(artifact),
            (ApprovalStatus::Pending, None)
            | (
                ApprovalStatus::Approved
                | ApprovalStatus::Rejected
                | ApprovalStatus::Expired
                | ApprovalStatus::Interrupted,
                _,
            ) => Err(ErrorCode::ApprovalNotPending),
        }
    }
}

/// What one compare-and-set update expects to find before it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowGuard {
    /// The status the row must still have.
    pub status: ApprovalStatus,
    /// The execution state the row must still have.
    pub execution_state: Option<ExecutionState>,
}

impl RowGuard {
    /// The guard that matches `approval` exactly as it is now.
    pub fn of(approval: &PlanApproval) -> RowGuard {
        RowGuard {
            status: approval.status,
            execution_state: approval.execution_state,
        }
    }
}

/// Host limits that shape decisions. Only [`Limits::new`] (or the default)
/// makes one, so a value that exists is always in range: every frontend
/// (a Rust embedder, `serve`'s flags, the FFI) goes through the same check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    approval_ttl_ms: i64,
    markdown_limit_bytes: usize,
    /// Host-run command options and whether the sandbox works here. Public:
    /// the host sets `sandbox_available` from its one probe at open.
    pub commands: CommandOptions,
}

impl Limits {
    /// The ADR's absolute 30-minute approval deadline.
    pub const DEFAULT_APPROVAL_TTL_MS: i64 = 30 * 60 * 1000;
    /// 8 MiB of markdown.
    pub const DEFAULT_MARKDOWN_LIMIT_BYTES: usize = 8 * 1024 * 1024;
    /// The longest approval TTL: seven days. A deadline is a promise to a
    /// person; far beyond that it is a misconfiguration, and near
    /// `i64::MAX` the deadline would saturate.
    pub const MAX_APPROVAL_TTL_MS: i64 = 7 * 24 * 60 * 60 * 1000;
    /// The largest markdown limit: 64 MiB.
    pub const MAX_MARKDOWN_LIMIT_BYTES: usize = 64 * 1024 * 1024;

    /// Limits with an approval TTL from 1 ms to [`Limits::MAX_APPROVAL_TTL_MS`]
    /// and a markdown limit from 1 byte to [`Limits::MAX_MARKDOWN_LIMIT_BYTES`];
    /// anything else is refused with `INVALID_PARAMS` and says the range.
    pub fn new(approval_ttl_ms: i64, markdown_limit_bytes: usize) -> Result<Limits, LimitError> {
        if !(1..=Limits::MAX_APPROVAL_TTL_MS).contains(&approval_ttl_ms) {
            return Err(LimitError {
                limit: "approval TTL",
                value: format!("{approval_ttl_ms} ms"),
                range: format!("from 1 ms to {} ms (7 days)", Limits::MAX_APPROVAL_TTL_MS),
            });
        }
        if !(1..=Limits::MAX_MARKDOWN_LIMIT_BYTES).contains(&markdown_limit_bytes) {
            return Err(LimitError {
                limit: "markdown limit",
                value: format!("{markdown_limit_bytes} bytes"),
                range: format!(
                    "from 1 byte to {} bytes (64 MiB)",
                    Limits::MAX_MARKDOWN_LIMIT_BYTES
                ),
            });
        }
        Ok(Limits {
            approval_ttl_ms,
            markdown_limit_bytes,
            commands: CommandOptions::default(),
        })
    }

    /// How long an approval stays pending, in milliseconds.
    pub fn approval_ttl_ms(&self) -> i64 {
        self.approval_ttl_ms
    }

    /// The largest accepted SubmitPlan markdown, in bytes.
    pub fn markdown_limit_bytes(&self) -> usize {
        self.markdown_limit_bytes
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            approval_ttl_ms: Limits::DEFAULT_APPROVAL_TTL_MS,
            markdown_limit_bytes: Limits::DEFAULT_MARKDOWN_LIMIT_BYTES,
            commands: CommandOptions::default(),
        }
    }
}

/// Why [`Limits::new`] refused a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitError {
    /// Which limit.
    pub limit: &'static str,
    /// The value refused, with its unit.
    pub value: String,
    /// The accepted range, in words.
    pub range: String,
}

impl LimitError {
    /// The canonical code every frontend reports: `INVALID_PARAMS`.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::InvalidParams
    }
}

impl std::fmt::Display for LimitError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "the {} of {} is out of range: it must be {}",
            self.limit, self.value, self.range
        )
    }
}

impl std::error::Error for LimitError {}

/// Everything the machine knows about one session at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionState {
    /// The persisted configuration.
    pub session: Session,
    /// The one active turn, if any (memory only).
    pub active_turn: Option<ActiveTurn>,
    /// The session's one pending approval, if any.
    pub pending_approval: Option<PlanApproval>,
    /// The approved row whose execution is queued or running, if any.
    pub live_execution: Option<PlanApproval>,
}

impl SessionState {
    /// An idle session with nothing pending and nothing live.
    pub fn idle(session: Session) -> SessionState {
        SessionState {
            session,
            active_turn: None,
            pending_approval: None,
            live_execution: None,
        }
    }

    /// Idle means: no turn, no pending approval, no live execution.
    pub fn is_idle(&self) -> bool {
        self.active_turn.is_none() && self.pending_approval.is_none() && self.live_execution.is_none()
    }

    /// The next instant at which the machine changes state on its own: the
    /// pending approval's deadline. A driver arms a timer for it and sends
    /// `Event::Tick` then.
    pub fn next_deadline(&self) -> Option<UnixMs> {
        self.pending_approval.as_ref().map(|approval| approval.expires_at)
    }

    /// Checks the structural invariants every reachable state satisfies.
    ///
    /// Used by tests and by hosts that want to assert what they loaded.
    pub fn check_invariants(&self) -> Result<(), String> {
        if let Some(pending) = &self.pending_approval {
            if pending.status != ApprovalStatus::Pending {
                return Err(format!("pending slot holds a {} row", pending.status));
            }
            if pending.session_id != self.session.id {
                return Err("pending approval belongs to another session".to_owned());
            }
            let holds_plan_turn = self.active_turn.as_ref().is_some_and(|turn| {
                turn.kind == TurnKind::Prompt && turn.mode == Mode::Plan && turn.turn_id == pending.turn_id
            });
            if !holds_plan_turn {
                return Err("a pending approval needs its Plan turn active".to_owned());
            }
            if self.live_execution.is_some() {
                return Err("pending approval and live execution at once".to_owned());
            }
        }
        if let Some(live) = &self.live_execution {
            if live.status != ApprovalStatus::Approved || !live.has_live_execution() {
                return Err("live slot holds a row without a live execution".to_owned());
            }
            if self.session.mode != Mode::Agent {
                return Err("a live execution needs the session in Agent".to_owned());
            }
            let holds_execution_turn = self
                .active_turn
                .as_ref()
                .is_some_and(|turn| turn.kind == TurnKind::Execution && turn.mode == Mode::Agent);
            if !holds_execution_turn {
                return Err("a live execution needs its execution turn active".to_owned());
            }
        }
        if let Some(turn) = &self.active_turn {
            for (index, command) in turn.commands.iter().enumerate() {
                if turn.commands[..index]
                    .iter()
                    .any(|earlier| earlier.call_id == command.call_id)
                {
                    return Err(format!("call {} appears twice in the turn", command.call_id));
                }
            }
            for (index, confirmation) in turn.confirmations.iter().enumerate() {
                if turn.confirmations[..index]
                    .iter()
                    .any(|earlier| earlier.call_id == confirmation.call_id)
                {
                    return Err(format!(
                        "call {} is decided twice in the turn",
                        confirmation.call_id
                    ));
                }
                let command = turn
                    .commands
                    .iter()
                    .find(|command| command.call_id == confirmation.call_id);
                if command.is_some_and(|command| command.input != confirmation.input) {
                    return Err(format!(
                        "call {} may start with an input other than the one decided",
                        confirmation.call_id
                    ));
                }
                let startable = command.is_some();
                let may_start = match confirmation.status {
                    ConfirmationStatus::NotNeeded | ConfirmationStatus::Confirmed => true,
                    ConfirmationStatus::Awaiting | ConfirmationStatus::Declined(_) => false,
                };
                if startable && !may_start {
                    return Err(format!(
                        "call {} may start without a confirmation",
                        confirmation.call_id
                    ));
                }
            }
            if turn.mode == Mode::Plan && !turn.confirmations.is_empty() {
                return Err("a Plan turn holds permission decisions".to_owned());
            }
            if self.pending_approval.is_some() && turn.has_running_command() {
                return Err("a command runs while an approval is pending".to_owned());
            }
        }
        if let Some(turn) = &self.active_turn
            && turn.kind == TurnKind::Execution
            && self.live_execution.is_none()
        {
            return Err("an execution turn without a live execution".to_owned());
        }
        Ok(())
    }
}
