//! Typed ids: a session's, a turn's, an approval's and an execution's id
//! are different types, so an API that takes one cannot be handed another.
//!
//! They are plain strings underneath (the wire and the database store them
//! as text), convert from and to `String` and `&str` freely, and carry no
//! rule of their own: whether an id names anything is decided where it is
//! looked up. The rows of the model keep `String` fields; their typed
//! accessors ([`Session::session_id`], [`PlanApproval::approval_id`], …)
//! hand out these types.

use crate::model::{ActiveTurn, PlanApproval, Session};

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
        #[doc = concat!("assert_eq!(String::from(id), \"", $example, "\");")]
        /// ```
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(String);

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

impl Session {
    /// The session's id, typed.
    ///
    /// ```
    /// let session = plan_core::Session::new("s1", None);
    /// assert_eq!(session.session_id(), "s1");
    /// ```
    pub fn session_id(&self) -> SessionId {
        SessionId::from(&self.id)
    }
}

impl ActiveTurn {
    /// The turn's id, typed.
    ///
    /// ```
    /// use plan_core::{ActiveTurn, BootEpoch, Mode, Origin, TurnKind};
    ///
    /// let turn = ActiveTurn::new("t1".to_owned(), Mode::Plan, Origin::Interactive, TurnKind::Prompt, BootEpoch(1));
    /// assert_eq!(turn.turn_id(), "t1");
    /// ```
    pub fn turn_id(&self) -> TurnId {
        TurnId::from(&self.turn_id)
    }
}

impl PlanApproval {
    /// The approval's id, typed. The rules test
    /// `typed_ids_name_the_rows_they_come_from` shows these accessors on an
    /// approved row.
    pub fn approval_id(&self) -> ApprovalId {
        ApprovalId::from(&self.id)
    }

    /// The owning session's id, typed.
    pub fn session_id(&self) -> SessionId {
        SessionId::from(&self.session_id)
    }

    /// The id of the Plan turn that submitted it, typed.
    pub fn turn_id(&self) -> TurnId {
        TurnId::from(&self.turn_id)
    }

    /// The execution's id once approved, typed.
    pub fn execution_id(&self) -> Option<ExecutionId> {
        self.execution_id.as_ref().map(ExecutionId::from)
    }
}
