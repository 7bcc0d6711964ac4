//! The JSON-RPC 2.0 envelope: requests, responses, notifications and the
//! error object.
//!
//! A [`Request`] keeps its method as a string and its params as raw JSON, so
//! that an unknown method can be answered with `METHOD_NOT_FOUND` and bad
//! params with `INVALID_PARAMS` (see [`Request::parse`]). Responses carry the
//! result as JSON; notifications are typed. This module frames messages and
//! does no I/O: reading and writing lines is the frontend's business.

use std::borrow::Cow;

use plan_core::ErrorCode;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{CanonicalCode, ProtocolError, jsonrpc_code};
use crate::methods::{ClientRequest, parse_request};
use crate::notifications::ServerNotification;

/// The `jsonrpc` member's only value.
pub const JSONRPC_VERSION: &str = "2.0";

/// The `jsonrpc: "2.0"` member. Deserializing anything else fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct JsonRpcVersion;

impl Serialize for JsonRpcVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(JSONRPC_VERSION)
    }
}

impl<'de> Deserialize<'de> for JsonRpcVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Cow::<'de, str>::deserialize(deserializer)?;
        if text == JSONRPC_VERSION {
            Ok(JsonRpcVersion)
        } else {
            Err(serde::de::Error::custom(format!(
                "jsonrpc must be \"{JSONRPC_VERSION}\", not \"{text}\""
            )))
        }
    }
}

impl JsonSchema for JsonRpcVersion {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("JsonRpcVersion")
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        let mut object = serde_json::Map::new();
        object.insert("type".to_owned(), "string".into());
        object.insert("const".to_owned(), JSONRPC_VERSION.into());
        Schema::from(object)
    }
}

/// A request id: a JSON integer or string, echoed unchanged in the response.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(String),
}

/// A client request as it arrives: `{jsonrpc, id, method, params?}`.
///
/// `params` is raw JSON; [`Request::parse`] turns it into a typed
/// [`ClientRequest`]. Absent or `null` params mean `{}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Request {
    /// Always `"2.0"`.
    pub jsonrpc: JsonRpcVersion,
    /// The id the response echoes.
    pub id: RequestId,
    /// The method name, for example `"plan/approve"`.
    pub method: String,
    /// The params object; omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub params: Option<serde_json::Value>,
}

impl Request {
    /// The envelope for a typed request.
    pub fn new(id: RequestId, request: &ClientRequest) -> Result<Request, serde_json::Error> {
        Ok(Request {
            jsonrpc: JsonRpcVersion,
            id,
            method: request.method().to_owned(),
            params: Some(request.params_value()?),
        })
    }

    /// Decodes method and params: unknown methods are `METHOD_NOT_FOUND`,
    /// bad params `INVALID_PARAMS` with the serde message as detail.
    pub fn parse(&self) -> Result<ClientRequest, ProtocolError> {
        let params = self.params.clone().unwrap_or(serde_json::Value::Null);
        parse_request(&self.method, params)
    }
}

/// The `data` member of an error: the canonical code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorData {
    /// The canonical `SCREAMING_SNAKE` code.
    pub code: CanonicalCode,
}

/// A JSON-RPC error object: `{code: <number>, message, data: {code: <string>}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorObject {
    /// The JSON-RPC number (see [`jsonrpc_code`]).
    pub code: i64,
    /// A sentence for people: the code's message, then `": "` and a detail if any.
    pub message: String,
    /// The canonical code.
    pub data: ErrorData,
}

impl ErrorObject {
    /// The error object for a canonical code, with its human message.
    pub fn new(code: ErrorCode) -> ErrorObject {
        ErrorObject {
            code: jsonrpc_code(code),
            message: code.message(),
            data: ErrorData {
                code: CanonicalCode(code),
            },
        }
    }

    /// The error object for a canonical code, its message followed by a
    /// detail, cut to [`crate::MAX_ERROR_MESSAGE_BYTES`] (a parser's detail
    /// can quote a whole hostile value).
    pub fn with_detail(code: ErrorCode, detail: impl std::fmt::Display) -> ErrorObject {
        ErrorObject {
            code: jsonrpc_code(code),
            message: crate::bounded_message(code.message_with(&detail.to_string())),
            data: ErrorData {
                code: CanonicalCode(code),
            },
        }
    }

    /// The canonical code this object carries.
    pub fn canonical_code(&self) -> ErrorCode {
        self.data.code.0
    }
}

impl From<ErrorCode> for ErrorObject {
    fn from(code: ErrorCode) -> Self {
        ErrorObject::new(code)
    }
}

impl From<&ProtocolError> for ErrorObject {
    fn from(error: &ProtocolError) -> Self {
        match &error.detail {
            Some(detail) => ErrorObject::with_detail(error.code, detail),
            None => ErrorObject::new(error.code),
        }
    }
}

impl From<ProtocolError> for ErrorObject {
    fn from(error: ProtocolError) -> Self {
        ErrorObject::from(&error)
    }
}

/// The outcome member of a response: exactly one of `result` or `error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ResponseOutcome {
    /// Success: the method's result.
    #[serde(rename = "result")]
    Result(serde_json::Value),
    /// Failure: nothing changed.
    #[serde(rename = "error")]
    Error(ErrorObject),
}

/// A response: `{jsonrpc, id, result}` or `{jsonrpc, id, error}`.
///
/// `id` is `null` only when the request's id could not be read (a parse
/// error or an invalid request).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Response {
    /// Always `"2.0"`.
    pub jsonrpc: JsonRpcVersion,
    /// The request's id, or `null`.
    pub id: Option<RequestId>,
    /// The result or the error.
    #[serde(flatten)]
    pub outcome: ResponseOutcome,
}

impl Response {
    /// A success response with any serializable result.
    pub fn success(id: RequestId, result: &impl Serialize) -> Result<Response, serde_json::Error> {
        Ok(Response {
            jsonrpc: JsonRpcVersion,
            id: Some(id),
            outcome: ResponseOutcome::Result(serde_json::to_value(result)?),
        })
    }

    /// An error response.
    pub fn error(id: Option<RequestId>, error: impl Into<ErrorObject>) -> Response {
        Response {
            jsonrpc: JsonRpcVersion,
            id,
            outcome: ResponseOutcome::Error(error.into()),
        }
    }
}

/// A host notification: `{jsonrpc, method, params}` with no id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Notification {
    /// Always `"2.0"`.
    pub jsonrpc: JsonRpcVersion,
    /// The method and its params.
    #[serde(flatten)]
    pub notification: ServerNotification,
}

impl Notification {
    /// The envelope for a notification.
    pub fn new(notification: ServerNotification) -> Notification {
        Notification {
            jsonrpc: JsonRpcVersion,
            notification,
        }
    }
}

impl From<ServerNotification> for Notification {
    fn from(notification: ServerNotification) -> Self {
        Notification::new(notification)
    }
}
