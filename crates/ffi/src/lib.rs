//! plan-ffi: the plan checkpoint host for Swift, Kotlin and Python hosts,
//! exported through UniFFI.
//!
//! One [`PlanHost`] object wraps one `plan_host::Host` (lock, migration,
//! startup fence and the host's own expiry timer start in its constructor).
//! Its protocol methods are generated from the protocol's one method list
//! (`plan_protocol::for_each_client_method!`): one method per protocol v9
//! method, named after it (`session/create` is `session_create`), taking
//! the method's params record and returning its result record, answered by
//! the method's one serving function (`plan_server::serve_method`), the
//! very one `serve` and `handle_json` answer with; so a method added to the
//! list reaches every binding with the same answers. `handle_json` speaks
//! protocol v9 as JSON through `plan_server::Connection`, for hosts that
//! prefer the wire. The constructor takes the host's one `HostConfig` and
//! turns it into options through `HostConfig::options`, as `serve` does.
//! The FFI decides nothing. Errors reach foreign code as one [`PlanError`],
//! made from host errors by exactly one mapping. Listeners get every host
//! event as the protocol's [`ServerNotification`] itself, made by exactly
//! one mapping too (`plan_server::notification`, the one `serve` writes).
//! No panic crosses the boundary
//! (UniFFI turns any that escapes into an internal error, and listener calls
//! are guarded).

mod helper;
mod types;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use plan_host::{Host, HostError, HostEvent, HostOptions};
use plan_protocol::{
    PlanApproveResult, PlanDiffResult, PlanReadArtifactResult, PlanRejectResult, PlanVerifyResult,
    PlanWithdrawResult, ShellListResult, ToolConfirmResult,
};
use plan_server::Connection;
use plan_server::web::WebCard;

pub use plan_audit_export::ExportOverrides;
pub use plan_core::{
    ApprovalFilter, ApprovalId, ApprovalStatus, Artifact, ArtifactCheck, ArtifactContent,
    ArtifactVerification, AwaitingCall, CallId, CommandCapabilities, CommandRun, CommandShell, CommandState,
    ErrorCode, ExecutionId, ExecutionState, Mode, Origin, OrphanArtifact, PermissionMode, PlanApproval,
    PlanDiff, PlanSandbox, SessionId, ShellInfo, SkippedWorkspace, ToolAuditEntry, ToolAuditKind, ToolCall,
    ToolCallDecision, ToolCallError, ToolCallResult, TurnId, TurnKind,
};
pub use plan_host::HostConfig;
pub use plan_protocol::{
    ActiveTurn, CommandExitedNotification, CommandOutputNotification, ExecutionStateChangedNotification,
    OutputStream, PlanApprovalRequestedNotification, PlanApprovalResolvedNotification, ServerNotification,
    Session, SessionChangedNotification, VerifyReport,
};
pub use types::{
    Capabilities, Clearable, CommandCancelParams, CommandGetParams, CommandRegisterParams,
    CommandRegisterResult, CommandRunParams, CommandSandbox, CommandStartParams, Decision,
    ExecutionCompleteParams, ExecutionStartParams, InitializeParams, InitializeResult, PlanApproveParams,
    PlanCardUrlParams, PlanCardUrlResult, PlanDiffParams, PlanGetParams, PlanListResult,
    PlanReadArtifactParams, PlanRejectParams, PlanVerifyParams, PlanWithdrawParams, SessionConfigureParams,
    SessionCreateParams, SessionGetParams, ShellCatalog, ShellListParams, ShellSetDefaultParams,
    ShellSetDefaultResult, ToolConfirmParams, ToolListAwaitingParams, ToolListAwaitingResult,
    TurnCancelParams, TurnCompleteParams, TurnStartParams, TurnStartResult, TurnToolCallsParams,
    TurnToolCallsResult, WebCapabilities,
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

impl From<uniffi::UnexpectedUniFFICallbackError> for PlanError {
    /// What a foreign listener threw that is not a `PlanError`. Without
    /// this conversion UniFFI's glue panics on it (and prints the panic
    /// into the host application's stderr) before the host contains it.
    fn from(error: uniffi::UnexpectedUniFFICallbackError) -> Self {
        PlanError::Failed {
            code: ErrorCode::Internal,
            reason: format!("an event listener threw: {}", error.reason),
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
    /// it must not block for long. A listener that throws (any exception,
    /// not only a `PlanError`) or panics is contained: the host and the
    /// other listeners carry on, and what it threw is dropped.
    fn on_event(&self, event: ServerNotification) -> Result<(), PlanError>;
}

/// The plan checkpoint host. Safe to call from several threads at once.
#[derive(uniffi::Object)]
pub struct PlanHost {
    host: Arc<Host>,
    /// The approval card server, when `web_address` asked for one.
    web: Option<Arc<WebCard>>,
    connection: Mutex<Connection>,
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
    pub fn new(db_path: String, config: HostConfig) -> Outcome<Arc<PlanHost>> {
        // The one conversion `serve` and Rust embedders use too: plan-core's
        // range rules, the same codes.
        let config = HostConfig {
            sandbox_helper: config.sandbox_helper.or_else(helper::installed),
            ..config
        };
        let options = HostOptions {
            frontend: plan_host::DecisionChannel::Ffi,
            ..config.options()?
        };
        let host = Arc::new(Host::open(&db_path, options)?);
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

    /// Registers a listener for every later notification.
    pub fn add_listener(&self, listener: Arc<dyn PlanEventListener>) {
        // Weakly: the card server holds the host, which holds its listeners.
        let web = self.web.as_ref().map(Arc::downgrade);
        self.host.add_listener(Arc::new(move |event: HostEvent| {
            let notification = WebCard::notification_of(web.as_ref(), event);
            // A foreign exception arrives as an `Err` (see the `From` below),
            // never as a panic; a panic of a Rust listener must still not
            // unwind into the host.
            let _ = catch_unwind(AssertUnwindSafe(|| listener.on_event(notification)));
        }));
    }

    /// Whether Plan-mode Bash can run here (the probe at open), why not,
    /// and which sandbox layers and properties hold: the record
    /// `initialize` reports as `capabilities.commands`.
    pub fn sandbox_info(&self) -> CommandCapabilities {
        self.host.command_capabilities()
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

    /// Serves one protocol v9 JSON-RPC message (request or batch); returns
    /// the response text, or `None` for a client notification.
    pub fn handle_json(&self, request: String) -> Option<String> {
        lock(&self.connection).handle_line(&request)
    }
}

/// Generates one [`PlanHost`] method per protocol method of the list, named
/// by its `snake_name` column.
macro_rules! export_methods {
    ($($variant:ident, $constant:ident, $snake:ident => $name:literal, $params:ty, $result:ty;)+) => {
        #[uniffi::export]
        impl PlanHost {
            $(
                #[doc = $name]
                ///
                /// The protocol v9 method of this name: takes its params
                /// record and answers its result record, or its error,
                /// exactly as the method answers on the wire.
                pub fn $snake(&self, params: $params) -> Outcome<$result> {
                    Ok(plan_server::serve_method(&self.host, self.web.as_deref(), params)?)
                }
            )+
        }
    };
}

plan_protocol::for_each_client_method!(export_methods);

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
        let options = HostConfig {
            approval_ttl_ms,
            ..HostConfig::default()
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
        for ttl in [-5, 0, plan_core::Limits::MAX_APPROVAL_TTL_MS + 1, i64::MAX] {
            assert_eq!(refusal(&db, Some(ttl)), ErrorCode::InvalidParams, "{ttl}");
        }
        for name in ["", ":memory:", "file:x.db?mode=memory"] {
            assert_eq!(refusal(name, None), ErrorCode::InvalidParams, "{name:?}");
        }
        assert!(!dir.exists());
    }
}
