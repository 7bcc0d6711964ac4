//! The protocol v9 connection: JSON-RPC requests in, responses out.
//!
//! One [`Connection`] per client (the `serve` sidecar has one, each FFI
//! `PlanHost` has one) remembers whether `initialize` happened; everything
//! else is the shared [`Host`]. It frames JSON-RPC and hands each decoded
//! request to its method's one serving function (`crate::method`), the
//! same one the FFI's typed methods call, so `serve`, the FFI and Rust
//! embedders can never disagree; it decides nothing and does no I/O.

use std::sync::Arc;

use plan_core::ErrorCode;
use plan_host::{Host, HostError};
use plan_protocol::{ClientRequest, ErrorObject, Request, RequestId, Response};
use serde_json::Value;

use crate::convert::error_object;
use crate::method::{ensure_open, serve_request};
use crate::web::WebCard;

/// One client's conversation with a host.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// use std::sync::Arc;
///
/// use plan_host::{Host, HostOptions, serde_json};
/// use plan_server::Connection;
///
/// let host = Arc::new(Host::open(dir.path().join("plan.db"), HostOptions::default())?);
/// let mut connection = Connection::new(Arc::clone(&host));
/// let line = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":9}}"#;
/// let reply: serde_json::Value = serde_json::from_str(&connection.handle_line(line).ok_or("no reply")?)?;
/// assert_eq!(reply["result"]["protocolVersion"], 9);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Connection {
    host: Arc<Host>,
    /// The approval card server beside this connection, if any: it makes
    /// the URLs of `plan/cardUrl` and `capabilities.web`.
    web: Option<Arc<WebCard>>,
    initialized: bool,
}

impl Connection {
    /// A new, uninitialized connection ([`Connection`]'s example).
    pub fn new(host: Arc<Host>) -> Connection {
        Connection {
            host,
            web: None,
            initialized: false,
        }
    }

    /// A new connection whose client is told the card URLs of `web`
    /// (`initialize`'s `capabilities.web`, `plan/cardUrl`); the server
    /// test `card_urls_reach_the_hosts_own_client` uses one.
    pub fn with_web(host: Arc<Host>, web: Option<Arc<WebCard>>) -> Connection {
        Connection {
            host,
            web,
            initialized: false,
        }
    }

    /// The host behind the connection, shared with whoever opened it (the
    /// FFI's typed methods call the same host as its `handle_json`).
    pub fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// Handles one line of text: a request, a client notification or a batch.
    /// Returns the line to send back, or `None` when JSON-RPC wants no answer.
    /// A line over the protocol's message budgets (length, batch length,
    /// values, string bytes: [`plan_protocol::MessageLimits`]) is refused
    /// whole with `INVALID_REQUEST` before it is parsed, with the request's
    /// id when it came before the bound (else a null id). [`Connection`]'s
    /// example sends `initialize`; the host tests in `mod connection` send
    /// bad JSON, unknown methods and over-long lines.
    pub fn handle_line(&mut self, line: &str) -> Option<String> {
        let limits =
            plan_protocol::MessageLimits::for_markdown_limit(self.host.limits().markdown_limit_bytes());
        let mut scanner = plan_protocol::MessageScanner::new(limits);
        if let Err(overrun) = scanner.feed(line.as_bytes()) {
            // Answered with the request's id when it came before the bound.
            let reply = error_response(
                scanner.request_id().cloned(),
                ErrorObject::with_detail(overrun.code(), overrun.detail()),
            );
            return Some(serde_json::to_string(&reply).unwrap_or_else(|_| INTERNAL_ERROR_LINE.to_owned()));
        }
        let reply = match serde_json::from_str::<Value>(line) {
            Ok(message) => self.handle_message(message)?,
            Err(error) => error_response(None, ErrorObject::with_detail(ErrorCode::ParseError, error)),
        };
        Some(serde_json::to_string(&reply).unwrap_or_else(|_| INTERNAL_ERROR_LINE.to_owned()))
    }

    /// Handles one parsed JSON message (an object or a batch array; the
    /// host test `batches_are_answered_per_json_rpc` sends both).
    pub fn handle_message(&mut self, message: Value) -> Option<Value> {
        match message {
            Value::Array(batch) => {
                if batch.is_empty() {
                    return Some(empty_batch());
                }
                let replies: Vec<Value> = batch
                    .into_iter()
                    .filter_map(|item| self.handle_single(item))
                    .collect();
                if replies.is_empty() {
                    None
                } else {
                    Some(Value::Array(replies))
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Object(_) => {
                self.handle_single(message)
            }
        }
    }

    /// Handles one message that is not a batch (or one message of a batch,
    /// for a frontend that streams a batch's answers one by one); `None`
    /// for a client notification, which is never answered (the host test
    /// `string_ids_are_echoed_and_notifications_get_no_reply` shows both).
    pub fn handle_single(&mut self, message: Value) -> Option<Value> {
        let id = request_id(&message);
        if let Some((method, params)) = client_notification(&message) {
            // JSON-RPC 2.0: a notification is carried out but never answered,
            // not even with an error.
            if let Ok(parsed) = plan_protocol::parse_request(method, params.clone()) {
                let _ = self.dispatch(parsed);
            }
            return None;
        }
        let mut request = match serde_json::from_value::<Request>(message) {
            Ok(request) => request,
            // Not a request and not a notification: an invalid request,
            // answered with the id if one could be read, else null.
            Err(error) => {
                return Some(error_response(
                    id,
                    ErrorObject::with_detail(ErrorCode::InvalidRequest, error),
                ));
            }
        };
        // The params are moved, not copied: they can hold a whole markdown.
        let params = request.params.take().unwrap_or(Value::Null);
        let outcome = match plan_protocol::parse_request(&request.method, params) {
            Ok(parsed) => self.dispatch(parsed).map_err(|error| error_object(&error)),
            Err(error) => Err(ErrorObject::from(error)),
        };
        let response = match outcome {
            Ok(result) => Response {
                jsonrpc: plan_protocol::JsonRpcVersion,
                id: Some(request.id),
                outcome: plan_protocol::ResponseOutcome::Result(result),
            },
            Err(error) => Response::error(Some(request.id), error),
        };
        Some(serde_json::to_value(&response).unwrap_or_else(|_| internal_error_value()))
    }

    /// Serves one typed request (the host test
    /// `the_dispatcher_serves_a_full_submission` drives every step): the
    /// connection's own gate, then the method's one serving function
    /// ([`crate::method::serve_method`]).
    ///
    /// # Errors
    ///
    /// `HOST_CLOSED`, `PROTOCOL_VERSION_UNSUPPORTED` (an `initialize` for
    /// another version), `PROTOCOL_NOT_INITIALIZED` (anything before
    /// `initialize`), `PERMISSION_MODE_REQUIRED` (a `plan/approve` without
    /// a mode, refused by plan-core), and whatever the typed [`Host`]
    /// method it maps to returns.
    pub fn dispatch(&mut self, request: ClientRequest) -> Result<Value, HostError> {
        // A closed host answers HOST_CLOSED even before `initialize`.
        ensure_open(&self.host)?;
        let initialize = matches!(request, ClientRequest::Initialize(_));
        if !initialize && !self.initialized {
            return Err(HostError::Refused(ErrorCode::ProtocolNotInitialized));
        }
        let result = serve_request(&self.host, self.web.as_deref(), request)?;
        if initialize {
            self.initialized = true;
        }
        Ok(result)
    }
}

fn request_id(message: &Value) -> Option<RequestId> {
    match message {
        Value::Object(fields) => match fields.get("id") {
            Some(Value::Number(number)) => number.as_i64().map(RequestId::Number),
            Some(Value::String(text)) => Some(RequestId::String(text.clone())),
            Some(Value::Null | Value::Bool(_) | Value::Array(_) | Value::Object(_)) | None => None,
        },
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) => None,
    }
}

/// The method and params of a client notification: an object with
/// `jsonrpc: "2.0"`, a string `method` and no `id`. Anything else without an
/// id is an invalid request, answered with a `null` id.
fn client_notification(message: &Value) -> Option<(&str, &Value)> {
    let Value::Object(fields) = message else {
        return None;
    };
    let version = fields.get("jsonrpc").and_then(Value::as_str);
    if fields.contains_key("id") || version != Some(plan_protocol::JSONRPC_VERSION) {
        return None;
    }
    let method = fields.get("method").and_then(Value::as_str)?;
    Some((method, fields.get("params").unwrap_or(&Value::Null)))
}

/// The answer to an empty batch (JSON-RPC 2.0: an invalid request with a
/// null id), for [`Connection::handle_message`] and the stdio transport,
/// which streams a batch's answers itself.
pub(crate) fn empty_batch() -> Value {
    error_response(
        None,
        ErrorObject::with_detail(ErrorCode::InvalidRequest, "an empty batch"),
    )
}

fn error_response(id: Option<RequestId>, error: ErrorObject) -> Value {
    serde_json::to_value(Response::error(id, error)).unwrap_or_else(|_| internal_error_value())
}

/// A response that needs no serialization, for the case where serializing
/// failed: `ErrorObject::new(INTERNAL)` with a null id, written out (a test
/// checks that the two agree). `INTERNAL` is an application error, so its
/// number is the spec's -32000, not JSON-RPC's reserved -32603: every
/// canonical code but the four JSON-RPC ones is -32000 (`jsonrpc_code`).
/// The one fallback line of this crate.
pub(crate) const INTERNAL_ERROR_LINE: &str = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"internal error","data":{"code":"INTERNAL"}}}"#;

fn internal_error_value() -> Value {
    serde_json::from_str(INTERNAL_ERROR_LINE).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fallback_line_is_the_one_internal_error_object() {
        let written = Response::error(None, ErrorObject::new(ErrorCode::Internal));
        let fallback: Response =
            serde_json::from_str(INTERNAL_ERROR_LINE).unwrap_or_else(|_| written.clone());
        assert_eq!(fallback, written);
        assert_eq!(
            internal_error_value(),
            serde_json::to_value(&written).unwrap_or(Value::Null)
        );
    }
}
