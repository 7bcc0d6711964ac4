//! Every conversion between host values and protocol v9 wire types: events
//! to notifications, tool-call outcomes, host errors to error objects and protocol errors to host
//! errors. (plan-core's records travel as they are; the wire's own views of
//! plan-core values are the protocol crate's `From` impls; this module adds
//! what only the host has.)
//!
//! It decides nothing and carries no state.

use plan_core::ErrorCode;
use plan_host::{HostError, HostEvent, Stream};
use plan_protocol::{
    CommandExitedNotification, CommandOutputNotification, ErrorObject, ExecutionStateChangedNotification,
    OutputStream, PlanApprovalRequestedNotification, PlanApprovalResolvedNotification, ProtocolError,
    ServerNotification, SessionChangedNotification,
};

/// The protocol notification for a host event: the one place events become
/// wire messages (`serve` writes it, the FFI hands it to its listeners as it is).
///
/// ```
/// use plan_host::{HostEvent, SessionState, Session};
///
/// let event = HostEvent::SessionChanged(Box::new(SessionState::idle(Session::new("s1", None))));
/// assert_eq!(plan_server::notification(event).method(), "session/changed");
/// ```
pub fn notification(event: HostEvent) -> ServerNotification {
    match event {
        HostEvent::ApprovalRequested(approval) => {
            ServerNotification::PlanApprovalRequested(PlanApprovalRequestedNotification::from(&approval))
        }
        HostEvent::ApprovalResolved(approval) => {
            ServerNotification::PlanApprovalResolved(PlanApprovalResolvedNotification::from(&approval))
        }
        HostEvent::ExecutionStateChanged {
            session_id,
            execution_id,
            state,
        } => ServerNotification::ExecutionStateChanged(ExecutionStateChangedNotification {
            session_id: session_id.into_string(),
            execution_id: execution_id.into_string(),
            state,
        }),
        HostEvent::SessionChanged(state) => {
            ServerNotification::SessionChanged(SessionChangedNotification::from(state.as_ref()))
        }
        HostEvent::CommandOutput {
            session_id,
            call_id,
            stream,
            seq,
            chunk,
        } => ServerNotification::CommandOutput(CommandOutputNotification {
            session_id: session_id.into_string(),
            call_id,
            stream: output_stream(stream),
            seq,
            chunk,
        }),
        HostEvent::CommandExited(run) => ServerNotification::CommandExited(CommandExitedNotification {
            session_id: run.session_id.to_string(),
            call_id: run.call_id.clone(),
            command: run,
        }),
    }
}

fn output_stream(stream: Stream) -> OutputStream {
    match stream {
        Stream::Stdout => OutputStream::Stdout,
        Stream::Stderr => OutputStream::Stderr,
    }
}

/// The wire error for a host error: JSON-RPC number, human message, canonical code.
///
/// ```
/// use plan_host::{ErrorCode, HostError};
/// use plan_server::error_object;
///
/// let error = HostError::with_detail(ErrorCode::ApprovalNotFound, "approval a1");
/// let wire = error_object(&error);
/// assert_eq!(wire.code, -32000);
/// assert_eq!(wire.data.code.0, ErrorCode::ApprovalNotFound);
/// assert!(wire.message.ends_with(": approval a1"));
/// ```
pub fn error_object(error: &HostError) -> ErrorObject {
    let code = error.code();
    ErrorObject {
        code: plan_protocol::jsonrpc_code(code),
        message: plan_protocol::bounded_message(error.message()),
        data: plan_protocol::ErrorData {
            code: plan_protocol::CanonicalCode(code),
        },
    }
}

/// A protocol refusal (bad params) as the host error the connection reports.
pub fn host_error(error: ProtocolError) -> HostError {
    match error.detail {
        Some(detail) => HostError::with_detail(error.code, detail),
        None => HostError::Refused(error.code),
    }
}

/// A value that could not be serialized: `INTERNAL`, with serde's reason.
pub(crate) fn unserializable(error: &serde_json::Error) -> HostError {
    HostError::with_detail(ErrorCode::Internal, error.to_string())
}
