//! The records and enums foreign hosts see. Those the wire has are exported
//! here from their one declaration each: plan-core's records and enums
//! (`PlanApproval`, `CommandRun`, `PlanDiff`, a tool call and its
//! `ToolCallResult`, the modes and statuses, ...) from
//! `plan_core::for_each_core_object!`, the wire-only views (`Session`,
//! `ActiveTurn`, `VerifyReport`, ...) from
//! `plan_protocol::for_each_shared_object!`, every method's params record
//! and the results only the protocol has (`InitializeResult`,
//! `TurnStartResult`, ...) from `plan_protocol::for_each_method_params!` and
//! `for_each_method_result!`, the host's settings (`HostConfig`) from
//! `plan_host::for_each_host_config!`, and the typed error code from
//! plan-core's `for_each_error_code!`; so the FFI and `serve` can never
//! describe the same approval, or take the same params or the same setting,
//! differently. plan-core's typed ids and paths cross as strings, and a tool
//! call's JSON input as JSON text (UniFFI custom types); a clearable setting
//! of `session/configure` is the protocol's `Clearable`. Three names differ
//! from the Rust ones, as the bindings always had them (`CommandSandbox` is
//! plan-core's `Sandbox`; `Decision` and `ShellCatalog` are the protocol's
//! `PlanDecisionResult` and `ShellListResult`). This module declares only
//! what differs from the wire: the typed event union and the sandbox probe's
//! answer. It decides nothing.

use std::path::PathBuf;

use plan_core::{
    ApprovalFilter, ApprovalId, ApprovalStatus, Artifact, ArtifactCheck, ArtifactContent,
    ArtifactVerification, CommandRun, CommandShell, CommandState, ErrorCode, ExecutionId, ExecutionState,
    Mode, Origin, OrphanArtifact, PermissionMode, PlanApproval, PlanDiff, Sandbox, SessionId,
    SkippedWorkspace, ToolAuditEntry, ToolAuditKind, ToolCall, ToolCallDecision, ToolCallError,
    ToolCallResult, TurnId, TurnKind,
};
use plan_host::{HostConfig, HostError};
use plan_protocol as wire;
use plan_protocol::{ActiveTurn, OutputStream, Session, ShellInfo, VerifyReport};

use crate::PlanError;

/// Exports plan-core's `ErrorCode` from plan-core's one list, so a code
/// added there is exported (to every binding) by itself.
macro_rules! export_error_code {
    ($($(#[$doc:meta])* $variant:ident => $wire:literal, $message:literal;)+) => {
        /// A canonical error code (the wire's `SCREAMING_SNAKE` string is
        /// `error_code_wire_name`).
        #[uniffi::remote(Enum)]
        pub enum ErrorCode {
            $($(#[$doc])* $variant,)+
        }
    };
}

plan_core::for_each_error_code!(export_error_code);

/// Exports one of plan-core's typed ids as a string: foreign code sees the
/// text (a typealias of the string type in Kotlin and Swift).
macro_rules! export_id {
    ($($id:ident),+) => {
        $(uniffi::custom_type!($id, String, {
            remote,
            lower: |id| id.into_string(),
            try_lift: |text| Ok($id::from(text)),
        });)+
    };
}

export_id!(SessionId, TurnId, ApprovalId, ExecutionId);

// A path crosses as its text (a file name that is not UTF-8 is shown with
// replacement characters, as foreign strings cannot hold it).
uniffi::custom_type!(PathBuf, String, {
    remote,
    lower: |path| path.to_string_lossy().into_owned(),
    try_lift: |text| Ok(PathBuf::from(text)),
});

/// Any JSON value (a tool call's input): foreign code passes and reads its
/// JSON text; text that is not JSON is `INVALID_PARAMS`.
type JsonValue = serde_json::Value;

uniffi::custom_type!(JsonValue, String, {
    remote,
    lower: |value| value.to_string(),
    try_lift: |text| serde_json::from_str(&text).map_err(|error| {
        PlanError::from(HostError::with_detail(
            ErrorCode::InvalidParams,
            format!("a tool call's input is not JSON text: {error}"),
        ))
        .into()
    }),
});

/// Exports one item of a shared list (plan-core's, the protocol's or plan-host's) as a
/// UniFFI enum or record of the very Rust type (UniFFI's remote-type form:
/// the fields are the declaration's, checked by the compiler, and nothing is
/// redeclared; a field written `field: Type = default` gets that default in
/// the bindings, so a foreign call may omit it). An item the bindings know
/// by another name (plan-core's
/// `Sandbox` as `CommandSandbox`, the protocol's `PlanDecisionResult` as
/// `Decision`) is exported under that name through a `use` alias, so the
/// Rust type stays the declared one. (Only plan-core's list renames enums
/// and only the protocol's renames records, which is where the aliases
/// point.)
macro_rules! export_object {
    ($(#[$meta:meta])* enum $name:ident as $ffi_name:ident {
        $($(#[$variant_meta:meta])* $variant:ident => $text:literal),+ $(,)?
    }) => {
        pub use plan_core::$name as $ffi_name;

        #[uniffi::remote(Enum)]
        $(#[$meta])*
        pub enum $ffi_name {
            $($(#[$variant_meta])* $variant),+
        }
    };
    ($(#[$meta:meta])* enum $name:ident {
        $($(#[$variant_meta:meta])* $variant:ident => $text:literal),+ $(,)?
    }) => {
        #[uniffi::remote(Enum)]
        $(#[$meta])*
        pub enum $name {
            $($(#[$variant_meta])* $variant),+
        }
    };
    ($(#[$meta:meta])* struct $name:ident as $ffi_name:ident {
        $($(#[$field_meta:meta])* $field:ident: $ty:ty $(= $default:tt)?),* $(,)?
    }) => {
        pub use wire::$name as $ffi_name;

        #[uniffi::remote(Record)]
        $(#[$meta])*
        pub struct $ffi_name {
            $($(#[$field_meta])* $(#[uniffi(default = $default)])? pub $field: $ty),*
        }
    };
    ($(#[$meta:meta])* struct $name:ident {
        $($(#[$field_meta:meta])* $field:ident: $ty:ty $(= $default:tt)?),* $(,)?
    }) => {
        #[uniffi::remote(Record)]
        $(#[$meta])*
        pub struct $name {
            $($(#[$field_meta])* $(#[uniffi(default = $default)])? pub $field: $ty),*
        }
    };
}

plan_core::for_each_core_object!(export_object);
plan_protocol::for_each_shared_object!(export_object);
plan_host::for_each_host_config!(export_object);

/// Exports one method's params record as [`export_object`] exports a
/// record (a field written `field: Type = default` gets that default), and
/// an optional field (`Option<..>`) as absent unless given (`None` by
/// default in the bindings), as it may be absent on the wire. A record may
/// have no field (`shell/list` takes none).
macro_rules! export_params {
    ($(#[$meta:meta])* struct $name:ident { $($fields:tt)* }) => {
        pub use wire::$name;

        export_params!(@fields [$(#[$meta])*] $name [] $($fields)*);
    };
    (@fields [$($meta:tt)*] $name:ident [$($done:tt)*]
        $(#[$field_meta:meta])* $field:ident: $ty:ty = $default:tt $(, $($rest:tt)*)?) => {
        export_params!(@fields [$($meta)*] $name [
            $($done)* $(#[$field_meta])* #[uniffi(default = $default)] pub $field: $ty,
        ] $($($rest)*)?);
    };
    (@fields [$($meta:tt)*] $name:ident [$($done:tt)*]
        $(#[$field_meta:meta])* $field:ident: Option<$inner:ty> $(, $($rest:tt)*)?) => {
        export_params!(@fields [$($meta)*] $name [
            $($done)* $(#[$field_meta])* #[uniffi(default = None)] pub $field: Option<$inner>,
        ] $($($rest)*)?);
    };
    (@fields [$($meta:tt)*] $name:ident [$($done:tt)*]
        $(#[$field_meta:meta])* $field:ident: $ty:ty $(, $($rest:tt)*)?) => {
        export_params!(@fields [$($meta)*] $name [$($done)* $(#[$field_meta])* pub $field: $ty,] $($($rest)*)?);
    };
    (@fields [$($meta:tt)*] $name:ident [$($done:tt)*]) => {
        #[uniffi::remote(Record)]
        $($meta)*
        pub struct $name {
            $($done)*
        }
    };
}

/// Exports one item of the protocol's method results as [`export_object`]
/// does, importing it first.
macro_rules! export_result {
    ($(#[$meta:meta])* struct $name:ident $body:tt) => {
        pub use wire::$name;

        export_object! { $(#[$meta])* struct $name $body }
    };
    ($(#[$meta:meta])* enum $name:ident $body:tt) => {
        pub use wire::$name;

        export_object! { $(#[$meta])* enum $name $body }
    };
}

plan_protocol::for_each_method_params!(export_params);
plan_protocol::for_each_method_result!(export_result);

pub use wire::Clearable;

/// A new value for a session setting that can be cleared (`provider`,
/// `model`, `shell` of `session/configure`; `None` around it leaves the
/// setting as it is).
#[uniffi::remote(Enum)]
pub enum Clearable {
    /// Set the setting to this value.
    Set {
        /// The new value.
        value: String,
    },
    /// Clear the setting (for `shell`: back to the default shell).
    Clear,
}

/// One host notification, typed: each variant carries exactly the params of
/// its protocol v9 notification, so a listener reads the same fields a
/// `serve` client reads from the wire.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum PlanEvent {
    /// `plan/approvalRequested`: a SubmitPlan was accepted and awaits a
    /// decision.
    ApprovalRequested {
        /// The new pending approval.
        approval: PlanApproval,
        /// Its approval card's URL (with the card's token); `None` without
        /// `web_address`.
        card_url: Option<String>,
    },
    /// `plan/approvalResolved`: an approval was approved, rejected, expired
    /// (by the host's timer or at a late decision) or interrupted; the
    /// approval's status and error code say which.
    ApprovalResolved {
        /// The approval after the change.
        approval: PlanApproval,
    },
    /// `execution/stateChanged`: an approved plan's execution moved to a new
    /// state.
    ExecutionStateChanged {
        /// The owning session.
        session_id: String,
        /// The execution.
        execution_id: String,
        /// Its new state.
        state: ExecutionState,
    },
    /// `session/changed`: a session's configuration or activity changed.
    SessionChanged {
        /// The session after the change.
        session: Session,
    },
    /// `command/output`: one chunk of a host-run command's output, in `seq`
    /// order per call.
    CommandOutput {
        /// The session.
        session_id: String,
        /// The Bash call.
        call_id: String,
        /// stdout or stderr.
        stream: OutputStream,
        /// From 0 per call, across both streams.
        seq: u64,
        /// The text (never a split UTF-8 character).
        chunk: String,
    },
    /// `command/exited`: a host-run command ended; always the last event of
    /// its call.
    CommandExited {
        /// The session.
        session_id: String,
        /// The Bash call.
        call_id: String,
        /// The run as it ended.
        command: CommandRun,
    },
}

/// Whether Plan-mode Bash can run on this host (probed once at open).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct SandboxInfo {
    /// `true` when the kernel's read-only sandbox works here.
    pub plan_sandbox_available: bool,
    /// Why not, when it does not.
    pub reason: Option<String>,
}

impl From<wire::ServerNotification> for PlanEvent {
    /// The one mapping from host notifications to foreign events. The match
    /// names every notification, so one added to the protocol does not
    /// compile here until it has an event.
    fn from(notification: wire::ServerNotification) -> Self {
        match notification {
            wire::ServerNotification::PlanApprovalRequested(requested) => PlanEvent::ApprovalRequested {
                approval: requested.approval,
                card_url: requested.card_url,
            },
            wire::ServerNotification::PlanApprovalResolved(resolved) => PlanEvent::ApprovalResolved {
                approval: resolved.approval,
            },
            wire::ServerNotification::ExecutionStateChanged(changed) => PlanEvent::ExecutionStateChanged {
                session_id: changed.session_id,
                execution_id: changed.execution_id,
                state: changed.state,
            },
            wire::ServerNotification::SessionChanged(changed) => PlanEvent::SessionChanged {
                session: changed.session,
            },
            wire::ServerNotification::CommandOutput(output) => PlanEvent::CommandOutput {
                session_id: output.session_id,
                call_id: output.call_id,
                stream: output.stream,
                seq: output.seq,
                chunk: output.chunk,
            },
            wire::ServerNotification::CommandExited(exited) => PlanEvent::CommandExited {
                session_id: exited.session_id,
                call_id: exited.call_id,
                command: exited.command,
            },
        }
    }
}
