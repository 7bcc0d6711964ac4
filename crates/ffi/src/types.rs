//! The records and enums foreign hosts see. Those the wire has as they are
//! are exported here from their one declaration each: plan-core's records
//! and enums (`PlanApproval`, `CommandRun`, `PlanDiff`, a tool call's
//! `ToolCallResult`, the modes and statuses, ...) from
//! `plan_core::for_each_core_object!`, the wire-only
//! views (`Session`, `ActiveTurn`, `VerifyReport`, ...)
//! from `plan_protocol::for_each_shared_object!`, the host's settings
//! (`HostConfig`) from `plan_host::for_each_host_config!`, and the typed
//! error code from plan-core's `for_each_error_code!`; so the FFI and `serve`
//! can never describe the same approval, or take the same setting,
//! differently. plan-core's typed ids and paths cross as strings (UniFFI
//! custom types). Three names differ from the Rust ones, as
//! the bindings always had them (`CommandSandbox` is plan-core's `Sandbox`;
//! `Decision` and `ShellCatalog` are the protocol's `PlanDecisionResult`
//! and `ShellListResult`). This
//! module declares only what differs from the wire: tool inputs as JSON
//! text, the typed event union, the
//! sandbox probe's answer and the session change with its defaults. It
//! decides nothing.

use plan_core::{
    ApprovalFilter, ApprovalId, ApprovalStatus, Artifact, ArtifactCheck, ArtifactContent,
    ArtifactVerification, CommandRun, CommandShell, CommandState, ErrorCode, ExecutionId, ExecutionState,
    Mode, Origin, OrphanArtifact, PermissionMode, PlanApproval, PlanDiff, Sandbox, SessionId,
    SkippedWorkspace, ToolAuditEntry, ToolAuditKind, ToolCallDecision, ToolCallError, ToolCallResult, TurnId,
    TurnKind,
};
use std::path::PathBuf;

use plan_host::HostConfig;
use plan_protocol as wire;
use plan_protocol::{ActiveTurn, OutputStream, Session, ShellInfo, VerifyReport};

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
        $($(#[$field_meta:meta])* $field:ident: $ty:ty $(= $default:tt)?),+ $(,)?
    }) => {
        pub use wire::$name as $ffi_name;

        #[uniffi::remote(Record)]
        $(#[$meta])*
        pub struct $ffi_name {
            $($(#[$field_meta])* $(#[uniffi(default = $default)])? pub $field: $ty),+
        }
    };
    ($(#[$meta:meta])* struct $name:ident {
        $($(#[$field_meta:meta])* $field:ident: $ty:ty $(= $default:tt)?),+ $(,)?
    }) => {
        #[uniffi::remote(Record)]
        $(#[$meta])*
        pub struct $name {
            $($(#[$field_meta])* $(#[uniffi(default = $default)])? pub $field: $ty),+
        }
    };
}

plan_core::for_each_core_object!(export_object);
plan_protocol::for_each_shared_object!(export_object);
plan_host::for_each_host_config!(export_object);

/// One assistant tool call.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ToolCall {
    /// The caller's id for the call.
    pub call_id: String,
    /// Tool name.
    pub name: String,
    /// The input as JSON text.
    pub input_json: String,
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

/// A configuration change; `None` leaves a field as it is, and a `clear_*`
/// flag sets that field back to none (the shell back to the default shell).
/// Setting and clearing the same field at once is `INVALID_PARAMS`.
#[derive(Debug, Clone, Default, PartialEq, Eq, uniffi::Record)]
pub struct SessionConfig {
    /// New mode.
    #[uniffi(default = None)]
    pub mode: Option<Mode>,
    /// New permission mode.
    #[uniffi(default = None)]
    pub permission_mode: Option<PermissionMode>,
    /// New provider.
    #[uniffi(default = None)]
    pub provider: Option<String>,
    /// New model.
    #[uniffi(default = None)]
    pub model: Option<String>,
    /// New shell id.
    #[uniffi(default = None)]
    pub shell: Option<String>,
    /// Remove the provider.
    #[uniffi(default = false)]
    pub clear_provider: bool,
    /// Remove the model.
    #[uniffi(default = false)]
    pub clear_model: bool,
    /// Return to the default shell.
    #[uniffi(default = false)]
    pub clear_shell: bool,
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
