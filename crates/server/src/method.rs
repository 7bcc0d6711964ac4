//! The one serving function of every client method: the only place where a
//! method's typed params become a call of the typed [`Host`] API and its
//! answer becomes the method's typed result.
//!
//! [`Method`] is implemented for each params type of
//! `plan_protocol::for_each_client_method!`, and the match that serves a
//! decoded [`ClientRequest`] is generated from the same list, so a method
//! added there does not compile here until it is served. The connection
//! (`serve`'s clients, the FFI's `handle_json`) and the FFI's typed methods
//! both go through [`serve_method`], so they give the same answers. The
//! connection's own state (whether `initialize` happened) is not here; this
//! module decides nothing and only translates.

use plan_core::ErrorCode;
use plan_host::{ApprovalFilter, Host, HostError, NewSession};
use plan_protocol::{
    Capabilities, ClientRequest, CommandCancelParams, CommandGetParams, CommandRegisterParams,
    CommandRegisterResult, CommandRun, CommandRunParams, CommandStartParams, ExecutionCompleteParams,
    ExecutionStartParams, InitializeParams, InitializeResult, PROTOCOL_VERSION, PlanApproval,
    PlanApproveParams, PlanApproveResult, PlanCardUrlParams, PlanCardUrlResult, PlanDiffParams,
    PlanDiffResult, PlanGetParams, PlanListResult, PlanReadArtifactParams, PlanReadArtifactResult,
    PlanRejectParams, PlanRejectResult, PlanVerifyParams, PlanVerifyResult, PlanWithdrawParams,
    PlanWithdrawResult, RequestParams, SCHEMA_VERSION, Session, SessionConfigureParams, SessionCreateParams,
    SessionGetParams, ShellListParams, ShellListResult, ShellSetDefaultParams, ShellSetDefaultResult,
    ToolConfirmParams, ToolConfirmResult, ToolListAwaitingParams, ToolListAwaitingResult, TurnCancelParams,
    TurnCompleteParams, TurnStartParams, TurnStartResult, TurnToolCallsParams, TurnToolCallsResult,
};
use serde_json::Value;

use crate::convert::{host_error, unserializable};
use crate::web::WebCard;

/// The server name `initialize` reports (the host test
/// `requests_before_initialize_and_other_versions_are_refused` checks it).
pub const SERVER_NAME: &str = "plan-checkpoint";

/// A client method's params, served: the one mapping of the method onto the
/// host.
pub trait Method: RequestParams + Sized {
    /// Serves these params on `host`, whose approval card server (the one
    /// that makes the URLs of `plan/cardUrl` and `capabilities.web`) is
    /// `web`. Callers go through [`serve_method`], which refuses a closed
    /// host first.
    ///
    /// # Errors
    ///
    /// Whatever the typed [`Host`] method it maps to returns, and
    /// `PROTOCOL_VERSION_UNSUPPORTED` for an `initialize` of another version.
    fn serve(self, host: &Host, web: Option<&WebCard>) -> Result<Self::Result, HostError>;
}

/// Serves one method's params: `HOST_CLOSED` once the host is closed, else
/// the method's answer. The connection and the FFI's typed methods both
/// answer through here (the FFI test
/// `every_method_answers_the_same_through_the_ffi_and_the_wire` compares
/// them).
///
/// # Errors
///
/// `HOST_CLOSED`, and those of [`Method::serve`].
pub fn serve_method<P: Method>(
    host: &Host,
    web: Option<&WebCard>,
    params: P,
) -> Result<P::Result, HostError> {
    ensure_open(host)?;
    params.serve(host, web)
}

/// `HOST_CLOSED` once the host is closed: checked before any method, and
/// by the connection before its own gate.
pub(crate) fn ensure_open(host: &Host) -> Result<(), HostError> {
    if host.is_closed() {
        return Err(HostError::Refused(ErrorCode::HostClosed));
    }
    Ok(())
}

/// Generates [`serve_request`] from the method list.
macro_rules! serve_request {
    ($($variant:ident, $constant:ident, $snake:ident => $name:literal, $params:ty, $result:ty;)+) => {
        /// Serves a decoded request and serializes its answer.
        pub(crate) fn serve_request(
            host: &Host,
            web: Option<&WebCard>,
            request: ClientRequest,
        ) -> Result<Value, HostError> {
            match request {
                $(ClientRequest::$variant(params) => to_value(&serve_method(host, web, params)?),)+
            }
        }
    };
}

plan_protocol::for_each_client_method!(serve_request);

fn to_value(result: &impl serde::Serialize) -> Result<Value, HostError> {
    serde_json::to_value(result).map_err(|error| unserializable(&error))
}

impl Method for InitializeParams {
    fn serve(self, host: &Host, web: Option<&WebCard>) -> Result<InitializeResult, HostError> {
        if self.protocol_version != PROTOCOL_VERSION {
            return Err(HostError::with_detail(
                ErrorCode::ProtocolVersionUnsupported,
                format!(
                    "the client asked for v{}, this host speaks v{PROTOCOL_VERSION}",
                    self.protocol_version
                ),
            ));
        }
        let capabilities = Capabilities {
            commands: host.command_capabilities(),
            web: web.map(WebCard::capabilities),
        };
        Ok(InitializeResult {
            protocol_version: PROTOCOL_VERSION,
            server_name: SERVER_NAME.to_owned(),
            server_version: env!("CARGO_PKG_VERSION").to_owned(),
            schema_version: SCHEMA_VERSION,
            approval_ttl_ms: host.limits().approval_ttl_ms(),
            capabilities,
        })
    }
}

impl Method for SessionCreateParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<Session, HostError> {
        let state = host.create_session(NewSession {
            session_id: self.session_id,
            workspace_root: self.workspace_root,
            mode: self.mode,
            permission_mode: self.permission_mode,
        })?;
        Ok(Session::from(&state))
    }
}

impl Method for SessionGetParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<Session, HostError> {
        Ok(Session::from(&host.session(&self.session_id)?))
    }
}

impl Method for SessionConfigureParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<Session, HostError> {
        let state = host.configure_session(&self.session_id, self.to_config_change())?;
        Ok(Session::from(&state))
    }
}

impl Method for TurnStartParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<TurnStartResult, HostError> {
        let turn = match self.mode {
            Some(mode) => host.start_turn_in(&self.session_id, mode, self.origin)?,
            None => host.start_turn(&self.session_id, self.origin)?,
        };
        Ok(TurnStartResult::from(&turn))
    }
}

impl Method for TurnToolCallsParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<TurnToolCallsResult, HostError> {
        let results = host.tool_calls(&self.session_id, &self.turn_id, self.calls)?;
        Ok(TurnToolCallsResult { results })
    }
}

impl Method for ToolConfirmParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<ToolConfirmResult, HostError> {
        host.confirm_tool(&self.session_id, &self.turn_id, &self.call_id, self.allow)
    }
}

impl Method for ToolListAwaitingParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<ToolListAwaitingResult, HostError> {
        let calls = host.awaiting_calls(self.session_id.as_ref())?;
        Ok(ToolListAwaitingResult { calls })
    }
}

impl Method for TurnCompleteParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<Session, HostError> {
        Ok(Session::from(
            &host.complete_turn(&self.session_id, &self.turn_id)?,
        ))
    }
}

impl Method for TurnCancelParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<Session, HostError> {
        Ok(Session::from(&host.cancel_turn(&self.session_id)?))
    }
}

impl Method for PlanApproveParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<PlanApproveResult, HostError> {
        let (approval, session) = host.approve_relayed(&self.approval_id, self.permission_mode)?;
        Ok(PlanApproveResult {
            approval,
            session: Session::from(&session),
        })
    }
}

impl Method for PlanRejectParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<PlanRejectResult, HostError> {
        let (approval, session) = host.reject(&self.approval_id)?;
        Ok(PlanRejectResult {
            approval,
            session: Session::from(&session),
        })
    }
}

impl Method for PlanWithdrawParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<PlanWithdrawResult, HostError> {
        let (approval, session) = host.withdraw_plan(&self.approval_id)?;
        Ok(PlanWithdrawResult {
            approval,
            session: Session::from(&session),
        })
    }
}

impl Method for PlanGetParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<PlanApproval, HostError> {
        Ok(host.approval(&self.approval_id)?.approval)
    }
}

impl Method for ApprovalFilter {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<PlanListResult, HostError> {
        // The wire's params are the host's filter: one declaration.
        let approvals = host
            .list_approvals(&self)?
            .into_iter()
            .map(|row| row.approval)
            .collect();
        Ok(PlanListResult { approvals })
    }
}

impl Method for PlanReadArtifactParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<PlanReadArtifactResult, HostError> {
        host.read_artifact(&self.approval_id)
    }
}

impl Method for PlanVerifyParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<PlanVerifyResult, HostError> {
        let scope = self.scope().map_err(host_error)?;
        Ok(PlanVerifyResult::from(&host.verify(&scope)?))
    }
}

impl Method for PlanDiffParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<PlanDiffResult, HostError> {
        host.diff(&self.approval_id, self.against_approval_id.as_ref())
    }
}

impl Method for PlanCardUrlParams {
    fn serve(self, host: &Host, web: Option<&WebCard>) -> Result<PlanCardUrlResult, HostError> {
        Ok(PlanCardUrlResult {
            url: crate::web::card_url(host, web, &self.approval_id)?,
        })
    }
}

impl Method for ExecutionStartParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<PlanApproval, HostError> {
        host.start_execution(&self.execution_id)
    }
}

impl Method for ExecutionCompleteParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<PlanApproval, HostError> {
        host.complete_execution(&self.execution_id)
    }
}

impl Method for ShellListParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<ShellListResult, HostError> {
        let (shells, default_shell) = host.shells()?;
        Ok(ShellListResult {
            shells,
            default_shell,
        })
    }
}

impl Method for ShellSetDefaultParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<ShellSetDefaultResult, HostError> {
        let default_shell = host.set_default_shell(&self.shell_id)?;
        Ok(ShellSetDefaultResult { default_shell })
    }
}

impl Method for CommandStartParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<CommandRun, HostError> {
        host.start_agent_command(
            &self.session_id,
            &self.turn_id,
            &self.call_id,
            &self.command,
            self.cwd.as_deref(),
            self.timeout_ms,
        )
    }
}

impl Method for CommandRegisterParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<CommandRegisterResult, HostError> {
        let reference = host.register_command(
            &self.session_id,
            &self.turn_id,
            &self.call_id,
            &self.command,
            self.cwd.as_deref(),
            self.timeout_ms,
        )?;
        Ok(CommandRegisterResult {
            call_id: self.call_id,
            reference,
        })
    }
}

impl Method for CommandRunParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<CommandRun, HostError> {
        host.run_registered(&self.session_id, &self.reference)
    }
}

impl Method for CommandCancelParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<CommandRun, HostError> {
        host.cancel_command(&self.session_id, &self.call_id)
    }
}

impl Method for CommandGetParams {
    fn serve(self, host: &Host, _web: Option<&WebCard>) -> Result<CommandRun, HostError> {
        host.command(&self.session_id, &self.call_id)
    }
}
