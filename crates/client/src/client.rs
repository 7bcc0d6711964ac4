//! The protocol v9 client over a [`Transport`]: `initialize` first, then
//! numbered requests whose responses are matched by id and read as the
//! method's result type, and the host's notifications kept in arrival order
//! for [`Client::next_notification`]. It decides nothing: a refusal reaches
//! the caller as the host's canonical code.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use plan_core::ApprovalFilter;
// Every params and result type the method list names, so that a line added
// there is a method here without an edit.
#[allow(clippy::wildcard_imports)]
use plan_protocol::*;
use serde_json::Value;

use crate::{ClientError, LineTransport, Received, Transport};

/// An initialized connection to a host.
#[derive(Debug)]
pub struct Client<T: Transport = LineTransport> {
    transport: T,
    next_id: i64,
    /// Notifications read while waiting for a response, oldest first.
    queued: VecDeque<ServerNotification>,
    initialized: Option<InitializeResult>,
    round_trips: u64,
}

impl<T: Transport> Client<T> {
    /// Initializes over `transport` (as `client_name`, which the host logs).
    ///
    /// # Errors
    ///
    /// The host's refusal of `initialize`, or a transport failure.
    pub fn connect(transport: T, client_name: &str) -> Result<Client<T>, ClientError> {
        let mut client = Client {
            transport,
            next_id: 0,
            queued: VecDeque::new(),
            initialized: None,
            round_trips: 0,
        };
        let result = client.request(&InitializeParams {
            protocol_version: PROTOCOL_VERSION,
            client_name: Some(client_name.to_owned()),
        })?;
        client.initialized = Some(result);
        Ok(client)
    }

    /// What `initialize` answered (versions, the approval TTL, the host's
    /// capabilities: whether it has its Plan sandbox, where its card is).
    pub fn initialize_result(&self) -> Option<&InitializeResult> {
        self.initialized.as_ref()
    }

    /// How many requests this client has sent, `initialize` included: the
    /// round trips a flow cost.
    pub fn round_trips(&self) -> u64 {
        self.round_trips
    }

    /// Sends one request and returns its typed result.
    ///
    /// # Errors
    ///
    /// [`ClientError::Refused`] with the host's code, or a transport or
    /// framing failure.
    pub fn request<P: RequestParams>(&mut self, params: &P) -> Result<P::Result, ClientError> {
        self.next_id += 1;
        let id = self.next_id;
        let params = serde_json::to_value(params).map_err(ClientError::malformed)?;
        let message = serde_json::json!({
            "jsonrpc": plan_protocol::JSONRPC_VERSION,
            "id": id,
            "method": P::METHOD,
            "params": params,
        });
        self.round_trips += 1;
        self.transport.send(&message.to_string())?;
        loop {
            let line = match self.transport.receive(None) {
                Received::Line(line) => line,
                Received::TimedOut => continue,
                Received::Closed(reason) => return Err(ClientError::unreachable(reason)),
            };
            let Some(response) = self.read(&line)? else {
                continue;
            };
            if response.id != Some(RequestId::Number(id)) {
                continue;
            }
            return match response.outcome {
                ResponseOutcome::Result(result) => serde_json::from_value(result)
                    .map_err(|error| ClientError::malformed(format!("{}: {error}", P::METHOD))),
                ResponseOutcome::Error(error) => Err(ClientError::Refused {
                    method: P::METHOD,
                    code: error.canonical_code(),
                    message: error.message,
                }),
            };
        }
    }

    /// The next host notification, waiting at most `timeout` (`None`: as
    /// long as it takes); `Ok(None)` when none came in time. Responses to
    /// nothing pending are skipped.
    ///
    /// # Errors
    ///
    /// [`ClientError::Unreachable`] once the host closed the connection.
    pub fn next_notification(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<Option<ServerNotification>, ClientError> {
        let deadline = timeout.map(|timeout| Instant::now() + timeout);
        loop {
            if let Some(queued) = self.queued.pop_front() {
                return Ok(Some(queued));
            }
            let left = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
            match self.transport.receive(left) {
                Received::Line(line) => {
                    let _ = self.read(&line)?;
                }
                Received::TimedOut => return Ok(None),
                Received::Closed(reason) => return Err(ClientError::unreachable(reason)),
            }
        }
    }

    /// Reads one line: a notification is queued, a response returned.
    fn read(&mut self, line: &str) -> Result<Option<Response>, ClientError> {
        let message: Value = serde_json::from_str(line).map_err(ClientError::malformed)?;
        let is_notification = message.get("id").is_none() && message.get("method").is_some();
        if is_notification {
            // A notification this client does not know (a newer host's) is
            // not an error: it is skipped.
            if let Ok(notification) = serde_json::from_value::<plan_protocol::Notification>(message) {
                self.queued.push_back(notification.notification);
            }
            return Ok(None);
        }
        serde_json::from_value(message)
            .map(Some)
            .map_err(ClientError::malformed)
    }
}

/// One typed method per line of the protocol's method list, named as the
/// line's snake-case name (`plan/readArtifact` is `plan_read_artifact`).
macro_rules! typed_methods {
    ($($variant:ident, $constant:ident, $snake:ident => $name:literal, $params:ty, $result:ty;)+) => {
        impl<T: Transport> Client<T> {
            $(
                #[doc = concat!("`", $name, "`: [`Client::request`] with [`", stringify!($params), "`].")]
                ///
                /// # Errors
                ///
                /// As [`Client::request`].
                pub fn $snake(&mut self, params: &$params) -> Result<$result, ClientError> {
                    self.request(params)
                }
            )+
        }
    };
}

plan_protocol::for_each_client_method!(typed_methods);
