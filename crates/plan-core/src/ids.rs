//! Typed ids: a session's, a turn's, an approval's, an execution's and a
//! tool call's id are different types, so an API that takes one cannot be
//! handed another.
//!
//! They are plain strings underneath (the wire and the database store them
//! as text, and serde and the JSON Schema see a plain string), convert from and to `String` and `&str` freely, and carry no
//! rule of their own: whether an id names anything is decided where it is
//! looked up. The records of the model hold them in their id fields
//! ([`crate::Session::id`], [`crate::PlanApproval::session_id`], …), so an id
//! read from a record keeps its kind wherever it is passed:
//!
//! ```compile_fail,E0308
//! use plan_core::{PlanApproval, SessionId};
//!
//! fn open_session(id: &SessionId) -> &str {
//!     id.as_str()
//! }
//!
//! fn open_owner(approval: &PlanApproval) -> &str {
//!     // An approval's own id is not its session's id.
//!     open_session(&approval.id)
//! }
//! ```
//!
//! Nor is a command's tool-call id:
//!
//! ```compile_fail,E0308
//! use plan_core::{CommandRun, SessionId};
//!
//! fn open_session(id: &SessionId) -> &str {
//!     id.as_str()
//! }
//!
//! fn open_owner(run: &CommandRun) -> &str {
//!     open_session(&run.call_id)
//! }
//! ```
//!
//! The same calls with the fields that name the session and the call
//! compile:
//!
//! ```
//! use plan_core::{CallId, CommandRun, PlanApproval, SessionId};
//!
//! fn open_session(id: &SessionId) -> &str {
//!     id.as_str()
//! }
//!
//! fn open_command(id: &CallId) -> &str {
//!     id.as_str()
//! }
//!
//! fn open_owner(approval: &PlanApproval) -> &str {
//!     open_session(&approval.session_id)
//! }
//!
//! fn open_run(run: &CommandRun) -> (&str, &str) {
//!     (open_session(&run.session_id), open_command(&run.call_id))
//! }
//! # let _ = (open_owner, open_run);
//! ```

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $example:literal) => {
        $(#[$doc])*
        ///
        /// ```
        #[doc = concat!("use plan_core::", stringify!($name), ";")]
        ///
        #[doc = concat!("let id = ", stringify!($name), "::from(\"", $example, "\");")]
        #[doc = concat!("assert_eq!(id.as_str(), \"", $example, "\");")]
        #[doc = concat!("assert_eq!(id.to_string(), \"", $example, "\");")]
        #[doc = concat!("assert_eq!(id, \"", $example, "\");")]
        #[doc = concat!("assert_eq!(\"", $example, "\", id);")]
        #[doc = concat!("assert_eq!(String::from(id), \"", $example, "\");")]
        /// ```
        #[derive(
            Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(String);

        /// The schema of the text itself, inlined where the id is used: on
        /// the wire an id is just a string.
        impl schemars::JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> std::borrow::Cow<'static, str> {
                <String as schemars::JsonSchema>::schema_name()
            }

            fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
                <String as schemars::JsonSchema>::json_schema(generator)
            }
        }

        impl $name {
            /// The id with this text.
            pub fn new(id: impl Into<String>) -> $name {
                $name(id.into())
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id's text, without copying.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> $name {
                $name(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> $name {
                $name(id.to_owned())
            }
        }

        impl From<&String> for $name {
            fn from(id: &String) -> $name {
                $name(id.clone())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str(&self.0)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }
    };
}

id_type!(
    /// A session's id.
    SessionId,
    "session-1"
);
id_type!(
    /// A turn's id (a prompt turn's or an execution turn's).
    TurnId,
    "turn-1"
);
id_type!(
    /// A plan approval's id.
    ApprovalId,
    "approval-1"
);
id_type!(
    /// An approved plan's execution id.
    ExecutionId,
    "execution-1"
);
id_type!(
    /// A tool call's id, as the agent's client names it (a Bash call's id
    /// also names the command the host runs for it).
    CallId,
    "call-1"
);
