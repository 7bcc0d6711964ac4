//! plan-ffi: the plan checkpoint host for Swift, Kotlin and Python hosts,
//! exported through UniFFI.
//!
//! One [`PlanHost`] object wraps one `plan_host::Host` (lock, migration,
//! startup fence and the host's own expiry timer start in its constructor)
//! and mirrors the typed host API method for method; `handle_json` speaks
//! protocol v9 as JSON through `plan_server::Connection`, for hosts that
//! prefer the wire. Every method converts its arguments, makes one host call
//! and converts the answer; the constructor builds the options through
//! plan-core's `Limits::new` and `CommandLimits::new`. The FFI decides
//! nothing. Errors reach foreign code as one [`PlanError`], made from host
//! errors by exactly one mapping. Listeners get every host event as the
//! protocol's [`ServerNotification`] itself, made by exactly one mapping too
//! (`plan_server::notification`, the one `serve` writes). No panic crosses the boundary
//! (UniFFI turns any that escapes into an internal error, and listener calls
//! are guarded).

mod types;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use plan_core::{CommandLimits, ConfigChange, Limits};
use plan_host::{
    ApprovalFilter, Host, HostError, HostEvent, HostOptions, NewSession, ScratchSize, WebOptions,
};
use plan_server::Connection;
use plan_server::web::WebCard;

pub use plan_core::{
    ApprovalId, ApprovalStatus, Artifact, ArtifactCheck, ArtifactContent, ArtifactVerification, CallId,
    CommandCapabilities, CommandRun, CommandShell, CommandState, ErrorCode, ExecutionId, ExecutionState,
    Mode, Origin, OrphanArtifact, PermissionMode, PlanApproval, PlanDiff, PlanSandbox, SessionId, ShellInfo,
    SkippedWorkspace, ToolAuditEntry, ToolAuditKind, ToolCallDecision, ToolCallError, ToolCallResult, TurnId,
    TurnKind,
};
pub use plan_protocol::{
    ActiveTurn, CommandExitedNotification, CommandOutputNotification, ExecutionStateChangedNotification,
    OutputStream, PlanApprovalRequestedNotification, PlanApprovalResolvedNotification, ServerNotification,
    Session, SessionChangedNotification, VerifyReport,
};
pub use types::{
    ApprovalQuery, CommandSandbox, Decision, PlanHostOptions, SessionConfig, ShellCatalog, ToolCall,
};

uniffi::setup_scaffolding!();

/// The one public error: a typed canonical code and a sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, uniffi::Error)]
pub enum PlanError {
    /// Every failure.
    #[error("{}: {reason}", code.as_str())]
    Failed {
        /// The canonical code, for example `ErrorCode::ApprovalNotPending`.
        code: ErrorCode,
        /// A sentence for people.
        reason: String,
    },
}

impl From<HostError> for PlanError {
    /// The single mapping from internal errors to the public one.
    fn from(error: HostError) -> Self {
        PlanError::Failed {
            code: error.code(),
            reason: error.message(),
        }
    }
}

impl From<plan_core::ErrorCode> for PlanError {
    fn from(code: plan_core::ErrorCode) -> Self {
        PlanError::from(HostError::Refused(code))
    }
}

/// The canonical wire string of a typed code, for example
/// `"APPROVAL_NOT_PENDING"` (for logs and for matching wire errors).
#[uniffi::export]
pub fn error_code_wire_name(code: ErrorCode) -> String {
    code.as_str().to_owned()
}

/// Receives every host notification as the protocol's
/// [`ServerNotification`], the value `serve` writes to the wire: approvals
/// requested and resolved (expiries fired by the timer included), execution
/// state, session changes, and host-run commands' output and ends.
#[uniffi::export(with_foreign)]
pub trait PlanEventListener: Send + Sync {
    /// One event, in commit order for its session (a command's output in
    /// `seq` order, its `CommandExited` last). Called on the thread that made
    /// the change, on a command's own thread, or on the host's timer thread;
    /// it must not block for long. A listener that throws or panics is
    /// contained: the host and the other listeners carry on.
    fn on_event(&self, event: ServerNotification);
}

/// The plan checkpoint host. Safe to call from several threads at once.
#[derive(uniffi::Object)]
pub struct PlanHost {
    host: Arc<Host>,
    /// The approval card server, when `web_address` asked for one.
    web: Option<Arc<WebCard>>,
    connection: Mutex<Connection>,
}

/// One optional setting of a [`SessionConfig`] as the typed host API takes
/// it: unchanged, set, or cleared.
fn optional_change(
    field: &str,
    value: Option<String>,
    clear: bool,
) -> Result<Option<Option<String>>, HostError> {
    match (value, clear) {
        (None, false) => Ok(None),
        (Some(value), false) => Ok(Some(Some(value))),
        (None, true) => Ok(Some(None)),
        (Some(_), true) => Err(HostError::with_detail(
            plan_core::ErrorCode::InvalidParams,
            format!("{field} cannot be set and cleared at once"),
        )),
    }
}

/// The host's web option from the FFI's two settings (the loopback rule
/// is the host's `WebOptions`).
fn web_options(address: Option<&str>, any_address: Option<bool>) -> Result<Option<WebOptions>, HostError> {
    let Some(address) = address else {
        return Ok(None);
    };
    let address: std::net::SocketAddr = address.parse().map_err(|error| {
        HostError::with_detail(
            plan_core::ErrorCode::InvalidParams,
            format!("web_address {address:?} is not an address and port: {error}"),
        )
    })?;
    if any_address.unwrap_or(false) {
        Ok(Some(WebOptions::any_address(address)))
    } else {
        WebOptions::loopback(address).map(Some)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

type Outcome<T> = Result<T, PlanError>;

#[uniffi::export]
impl PlanHost {
    /// Opens the database (created if missing, migrated from v8 if needed),
    /// takes the single-host lock, runs the startup fence and starts the
    /// expiry timer.
    #[uniffi::constructor]
    pub fn new(db_path: String, options: PlanHostOptions) -> Outcome<Arc<PlanHost>> {
        // The range rule is plan-core's, the same one `serve` and Rust
        // embedders meet; a limit too large for this platform is out of it.
        let markdown_limit_bytes = match options.markdown_limit_bytes {
            Some(limit) => usize::try_from(limit).unwrap_or(usize::MAX),
            None => Limits::DEFAULT_MARKDOWN_LIMIT_BYTES,
        };
        let limits = Limits::new(
            options.approval_ttl_ms.unwrap_or(Limits::DEFAULT_APPROVAL_TTL_MS),
            markdown_limit_bytes,
        )
        .map_err(HostError::from)?;
        let mut limits = limits;
        let commands = &mut limits.commands;
        // The command limits' range and clamp are plan-core's too.
        commands.limits = CommandLimits::new(
            options.command_timeout_ms,
            options
                .command_max_timeout_ms
                .unwrap_or(CommandLimits::DEFAULT_MAX_TIMEOUT_MS),
            options
                .max_running_commands
                .map_or(CommandLimits::DEFAULT_MAX_RUNNING_PER_SESSION, |limit| {
                    usize::try_from(limit).unwrap_or(usize::MAX)
                }),
        )
        .map_err(HostError::from)?;
        let scratch_size =
            ScratchSize::from_megabytes(options.scratch_size_mb.unwrap_or(ScratchSize::DEFAULT_MEGABYTES))
                .map_err(HostError::from)?;
        let web = web_options(options.web_address.as_deref(), options.web_allow_any_address)?;
        commands.network_in_auto = options.network_in_auto.unwrap_or(false);
        commands.auto_without_sandbox = options.auto_without_sandbox.unwrap_or(false);
        let audit_export = plan_audit_export::ExportOverrides {
            logs_endpoint: options.otel_logs_endpoint,
            protocol: options.otel_protocol,
            headers: options.otel_headers.unwrap_or_default(),
            service_name: options.otel_service_name,
            include_content: options.otel_include_content.unwrap_or(false),
            certificate: options.otel_certificate.map(Into::into),
            client_certificate: options.otel_client_certificate.map(Into::into),
            client_key: options.otel_client_key.map(Into::into),
        }
        .resolve(|name| {
            options
                .otel_from_environment
                .unwrap_or(true)
                .then(|| std::env::var(name).ok())
                .flatten()
        })
        .map_err(|error| HostError::with_detail(plan_core::ErrorCode::InvalidParams, error.to_string()))?;
        let defaults = HostOptions::default();
        let host = Arc::new(Host::open(
            &db_path,
            HostOptions {
                limits,
                sandbox_helper: options.sandbox_helper.map(Into::into),
                scratch_root: options.scratch_root.map(Into::into),
                skip_namespaces: options.skip_namespaces.unwrap_or(false),
                protected_paths: options
                    .protected_paths
                    .unwrap_or_default()
                    .into_iter()
                    .map(Into::into)
                    .collect(),
                command_env_secret_markers: options
                    .secret_env_markers
                    .unwrap_or_else(|| defaults.command_env_secret_markers.clone()),
                command_output_cap: options.command_output_cap.unwrap_or(defaults.command_output_cap),
                scratch_size,
                web,
                notifier: options.notifier.clone(),
                audit_export,
                frontend: plan_host::DecisionChannel::Ffi,
                ..defaults
            },
        )?);
        let web = match WebCard::start_for(&host) {
            Ok(web) => web,
            Err(error) => {
                host.close();
                return Err(error.into());
            }
        };
        plan_server::notifier::start_for(&host, web.as_ref());
        Ok(Arc::new(PlanHost {
            connection: Mutex::new(Connection::with_web(Arc::clone(&host), web.clone())),
            web,
            host,
        }))
    }

    /// `plan/cardUrl`: the approval card URL of a pending approval.
    pub fn card_url(&self, approval_id: String) -> Outcome<String> {
        let approval_id = ApprovalId::from(approval_id);
        Ok(plan_server::web::card_url(
            &self.host,
            self.web.as_deref(),
            &approval_id,
        )?)
    }

    /// Registers a listener for every later notification.
    pub fn add_listener(&self, listener: Arc<dyn PlanEventListener>) {
        // Weakly: the card server holds the host, which holds its listeners.
        let web = self.web.as_ref().map(Arc::downgrade);
        self.host.add_listener(Arc::new(move |event: HostEvent| {
            let notification = WebCard::notification_of(web.as_ref(), event);
            // A foreign exception reaches Rust as a panic of the UniFFI
            // callback glue; it must not unwind into the host.
            let _ = catch_unwind(AssertUnwindSafe(|| listener.on_event(notification)));
        }));
    }

    /// Whether Plan-mode Bash can run here (the probe at open), why not,
    /// and which sandbox layers and properties hold: the record
    /// `initialize` reports as `capabilities.commands`.
    pub fn sandbox_info(&self) -> CommandCapabilities {
        self.host.command_capabilities()
    }

    /// `tool/confirm`: a person's answer to a call of the active Agent turn
    /// that `tool_calls` decided `Confirm`; the call's new decision (allow,
    /// with `host_run` for Bash, or deny with `TOOL_DECLINED`).
    pub fn confirm_tool(
        &self,
        session_id: String,
        turn_id: String,
        call_id: String,
        allow: bool,
    ) -> Outcome<ToolCallResult> {
        Ok(self
            .host
            .confirm_tool(&session_id.into(), &turn_id.into(), &call_id.into(), allow)?)
    }

    /// `command/start`: runs an Agent turn's allowed or confirmed Bash call
    /// on the host, with the call's own command text.
    pub fn start_command(
        &self,
        session_id: String,
        turn_id: String,
        call_id: String,
        command: String,
        cwd: Option<String>,
        timeout_ms: Option<u64>,
    ) -> Outcome<CommandRun> {
        let run = self.host.start_agent_command(
            &session_id.into(),
            &turn_id.into(),
            &call_id.into(),
            &command,
            cwd.as_deref(),
            timeout_ms,
        )?;
        Ok(run)
    }

    /// `command/cancel`: kills a running command; a `CommandExited` event
    /// confirms it.
    pub fn cancel_command(&self, session_id: String, call_id: String) -> Outcome<CommandRun> {
        Ok(self.host.cancel_command(&session_id.into(), &call_id.into())?)
    }

    /// `command/get`: a run by session and call id.
    pub fn get_command(&self, session_id: String, call_id: String) -> Outcome<CommandRun> {
        Ok(self.host.command(&session_id.into(), &call_id.into())?)
    }

    /// Releases the database and the single-host lock and stops the timer.
    /// Later calls fail with `HOST_CLOSED`. Idempotent, and safe to call
    /// from a listener, even one running on the timer thread.
    pub fn shutdown(&self) {
        // Closing releases the database and the lock whatever the timer
        // thread is doing, and tells the host's timer to end; it never
        // waits for that thread, so it cannot wait for itself. The approval
        // card server stops first, and every card token dies with it.
        if let Some(web) = &self.web {
            web.stop();
        }
        self.host.close();
    }

    /// Creates a session.
    pub fn create_session(
        &self,
        session_id: Option<String>,
        workspace_root: Option<String>,
        mode: Option<Mode>,
        permission_mode: Option<PermissionMode>,
    ) -> Outcome<Session> {
        let new = NewSession {
            session_id: session_id.map(Into::into),
            workspace_root,
            mode,
            permission_mode,
        };
        Ok(Session::from(&self.host.create_session(new)?))
    }

    /// A session.
    pub fn get_session(&self, session_id: String) -> Outcome<Session> {
        Ok(Session::from(&self.host.session(&session_id.into())?))
    }

    /// Changes configuration while the session is idle.
    pub fn configure_session(&self, session_id: String, config: SessionConfig) -> Outcome<Session> {
        let change = ConfigChange {
            mode: config.mode,
            permission_mode: config.permission_mode,
            provider: optional_change("provider", config.provider, config.clear_provider)?,
            model: optional_change("model", config.model, config.clear_model)?,
            shell: optional_change("shell", config.shell, config.clear_shell)?,
        };
        Ok(Session::from(
            &self.host.configure_session(&session_id.into(), change)?,
        ))
    }

    /// Starts a prompt turn.
    pub fn start_turn(&self, session_id: String, origin: Origin) -> Outcome<ActiveTurn> {
        let turn = self.host.start_turn(&session_id.into(), origin)?;
        Ok(ActiveTurn::from(&turn))
    }

    /// Decides a tool-call batch; a valid SubmitPlan writes its artifact.
    pub fn tool_calls(
        &self,
        session_id: String,
        turn_id: String,
        calls: Vec<ToolCall>,
    ) -> Outcome<Vec<ToolCallResult>> {
        let calls = calls
            .into_iter()
            .map(|call| {
                let input = serde_json::from_str(&call.input_json).map_err(|error| {
                    HostError::with_detail(
                        plan_core::ErrorCode::InvalidParams,
                        format!("input of {}: {error}", call.call_id),
                    )
                })?;
                Ok(plan_core::ToolCall {
                    call_id: call.call_id,
                    name: call.name,
                    input,
                })
            })
            .collect::<Result<Vec<_>, HostError>>()?;
        Ok(self.host.tool_calls(&session_id.into(), &turn_id.into(), calls)?)
    }

    /// Ends the active prompt turn.
    pub fn complete_turn(&self, session_id: String, turn_id: String) -> Outcome<Session> {
        Ok(Session::from(
            &self.host.complete_turn(&session_id.into(), &turn_id.into())?,
        ))
    }

    /// Cancels the active turn.
    pub fn cancel_turn(&self, session_id: String) -> Outcome<Session> {
        Ok(Session::from(&self.host.cancel_turn(&session_id.into())?))
    }

    /// Approves with an explicit permission mode; without one it is
    /// `PERMISSION_MODE_REQUIRED` (plan-core's rule, as on the wire).
    pub fn approve(&self, approval_id: String, permission_mode: Option<PermissionMode>) -> Outcome<Decision> {
        let (approval, session) = self.host.approve_relayed(&approval_id.into(), permission_mode)?;
        Ok(Decision {
            approval,
            session: Session::from(&session),
        })
    }

    /// Rejects.
    pub fn reject(&self, approval_id: String) -> Outcome<Decision> {
        let (approval, session) = self.host.reject(&approval_id.into())?;
        Ok(Decision {
            approval,
            session: Session::from(&session),
        })
    }

    /// One approval.
    pub fn get_approval(&self, approval_id: String) -> Outcome<PlanApproval> {
        Ok(self.host.approval(&approval_id.into())?.approval)
    }

    /// Approvals, newest first.
    pub fn list_approvals(&self, query: ApprovalQuery) -> Outcome<Vec<PlanApproval>> {
        let filter = ApprovalFilter {
            session_id: query.session_id.map(plan_core::SessionId::from),
            status: query.status,
            limit: query.limit,
        };
        let rows = self.host.list_approvals(&filter)?;
        Ok(rows.into_iter().map(|row| row.approval).collect())
    }

    /// Rereads an artifact and checks it against the record.
    pub fn read_artifact(&self, approval_id: String) -> Outcome<ArtifactContent> {
        Ok(self.host.read_artifact(&approval_id.into())?)
    }

    /// Queued -> running.
    pub fn start_execution(&self, execution_id: String) -> Outcome<PlanApproval> {
        Ok(self.host.start_execution(&execution_id.into())?)
    }

    /// Running -> completed.
    pub fn complete_execution(&self, execution_id: String) -> Outcome<PlanApproval> {
        Ok(self.host.complete_execution(&execution_id.into())?)
    }

    /// The shell catalog.
    pub fn list_shells(&self) -> Outcome<ShellCatalog> {
        let (shells, default_shell) = self.host.shells()?;
        Ok(ShellCatalog {
            shells,
            default_shell,
        })
    }

    /// Verifies artifacts: one approval (`approval_id`), a session's
    /// approvals and its workspace's orphans (`session_id`), or everything
    /// (neither). Naming both is `INVALID_PARAMS`.
    pub fn verify(&self, approval_id: Option<String>, session_id: Option<String>) -> Outcome<VerifyReport> {
        let approval_id = approval_id.map(plan_core::ApprovalId::from);
        let session_id = session_id.map(plan_core::SessionId::from);
        let scope = plan_core::VerifyScope::select(approval_id, session_id)
            .map_err(|code| HostError::with_detail(code, "name at most one of approval_id and session_id"))?;
        let report = self.host.verify(&scope)?;
        Ok(VerifyReport::from(&report))
    }

    /// Diffs an approval's artifact against `against_approval_id`, or against
    /// the previous submission of its session when `None`.
    pub fn diff(&self, approval_id: String, against_approval_id: Option<String>) -> Outcome<PlanDiff> {
        let against = against_approval_id.map(plan_host::ApprovalId::from);
        Ok(self.host.diff(&approval_id.into(), against.as_ref())?)
    }

    /// Persists the default shell.
    pub fn set_default_shell(&self, shell_id: String) -> Outcome<String> {
        Ok(self.host.set_default_shell(&shell_id)?)
    }

    /// Serves one protocol v9 JSON-RPC message (request or batch); returns
    /// the response text, or `None` for a client notification.
    pub fn handle_json(&self, request: String) -> Option<String> {
        lock(&self.connection).handle_line(&request)
    }
}

impl Drop for PlanHost {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::panic)]

    use super::*;

    fn refusal(db_path: &str, approval_ttl_ms: Option<i64>) -> ErrorCode {
        let options = PlanHostOptions {
            approval_ttl_ms,
            ..PlanHostOptions::default()
        };
        match PlanHost::new(db_path.to_owned(), options) {
            Ok(_) => panic!("{db_path:?} with {approval_ttl_ms:?} should be refused"),
            Err(PlanError::Failed { code, .. }) => code,
        }
    }

    #[test]
    fn out_of_range_limits_and_names_that_keep_nothing_are_invalid_params() {
        let dir = std::env::temp_dir().join(format!("plan-ffi-limits-{}", std::process::id()));
        let db = dir.join("never-created.db");
        let db = db.to_string_lossy();
        for ttl in [-5, 0, Limits::MAX_APPROVAL_TTL_MS + 1, i64::MAX] {
            assert_eq!(refusal(&db, Some(ttl)), ErrorCode::InvalidParams, "{ttl}");
        }
        for name in ["", ":memory:", "file:x.db?mode=memory"] {
            assert_eq!(refusal(name, None), ErrorCode::InvalidParams, "{name:?}");
        }
        assert!(!dir.exists());
    }
}
