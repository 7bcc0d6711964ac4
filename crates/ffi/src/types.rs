//! The records and enums foreign hosts see. Those the wire has are exported
//! here from their one declaration each: plan-core's records and enums
//! (`PlanApproval`, `CommandRun`, `PlanDiff`, a tool call and its
//! `ToolCallResult`, the modes and statuses, ...) from
//! `plan_core::for_each_core_object!` (the sandbox status `initialize`
//! reports and `sandbox_info` returns, `CommandCapabilities`, among them),
//! the wire-only views (`Session`, `ActiveTurn`, `VerifyReport`, the
//! notifications' params, ...) from
//! `plan_protocol::for_each_shared_object!`, every method's params record
//! and the results only the protocol has (`InitializeResult`,
//! `TurnStartResult`, ...) from `plan_protocol::for_each_method_params!` and
//! `for_each_method_result!`, the host's settings (`HostConfig`) from
//! `plan_host::for_each_host_config!` and the audit export's settings it
//! holds (`ExportOverrides`) from
//! `plan_audit_export::for_each_export_overrides!`, and the typed error code from
//! plan-core's `for_each_error_code!`; so the FFI and `serve` can never
//! describe the same approval, or take the same params or the same setting,
//! differently. plan-core's typed ids and paths cross as strings, and a tool
//! call's JSON input as JSON text (UniFFI custom types); a clearable setting
//! of `session/configure` is the protocol's `Clearable`. Three names differ
//! from the Rust ones, as the bindings always had them (`CommandSandbox` is
//! plan-core's `Sandbox`; `Decision` and `ShellCatalog` are the protocol's
//! `PlanDecisionResult` and `ShellListResult`). This module exports the
//! protocol's notification union as it is too (from
//! `plan_protocol::for_each_server_notification!`), so a listener receives
//! the very value `serve` writes. It decides nothing.

use std::path::PathBuf;

use plan_audit_export::ExportOverrides;
use plan_core::{
    ApprovalFilter, ApprovalId, ApprovalStatus, Artifact, ArtifactCheck, ArtifactContent,
    ArtifactVerification, AwaitingCall, CallId, CommandCapabilities, CommandRun, CommandShell, CommandState,
    ErrorCode, ExecutionId, ExecutionState, MissingBound, Mode, Origin, OrphanArtifact, PermissionMode,
    PlanApproval, PlanDiff, PlanSandbox, Sandbox, SessionId, ShellInfo, SkippedWorkspace, ToolAuditEntry,
    ToolAuditKind, ToolCall, ToolCallDecision, ToolCallError, ToolCallResult, TurnId, TurnKind,
};
use plan_host::{HostConfig, HostError};
use plan_protocol as wire;
use plan_protocol::{
    ActiveTurn, CommandExitedNotification, CommandOutputNotification, ExecutionStateChangedNotification,
    OutputStream, PlanApprovalRequestedNotification, PlanApprovalResolvedNotification, ServerNotification,
    Session, SessionChangedNotification, VerifyReport,
};

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

export_id!(SessionId, TurnId, ApprovalId, ExecutionId, CallId);

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

/// Exports one item of a shared list (plan-core's, the protocol's,
/// plan-host's or plan-audit-export's) as a UniFFI enum or record of the
/// very Rust type (UniFFI's remote-type form: the fields are the
/// declaration's, checked by the compiler, and nothing is redeclared; a
/// field written `field: Type = default` gets that default in the bindings,
/// so a foreign call may omit it, and `= default` alone is the type's own
/// default, a record's being the record of its defaults). An item the
/// bindings know by another name (plan-core's `Sandbox` as
/// `CommandSandbox`, the protocol's `PlanDecisionResult` as `Decision`) is
/// exported under that name through a `use` alias, so the Rust type stays
/// the declared one. (Only plan-core's list renames enums and only the
/// protocol's renames records, which is where the aliases point.)
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
    ($(#[$meta:meta])* struct $name:ident as $ffi_name:ident { $($fields:tt)* }) => {
        pub use wire::$name as $ffi_name;

        export_object!(@fields [$(#[$meta])*] $ffi_name [] $($fields)*);
    };
    ($(#[$meta:meta])* struct $name:ident { $($fields:tt)* }) => {
        export_object!(@fields [$(#[$meta])*] $name [] $($fields)*);
    };
    (@fields [$($meta:tt)*] $name:ident [$($done:tt)*]
        $(#[$field_meta:meta])* $field:ident: $ty:ty = default $(, $($rest:tt)*)?) => {
        export_object!(@fields [$($meta)*] $name [
            $($done)* $(#[$field_meta])* #[uniffi(default)] pub $field: $ty,
        ] $($($rest)*)?);
    };
    (@fields [$($meta:tt)*] $name:ident [$($done:tt)*]
        $(#[$field_meta:meta])* $field:ident: $ty:ty = $default:tt $(, $($rest:tt)*)?) => {
        export_object!(@fields [$($meta)*] $name [
            $($done)* $(#[$field_meta])* #[uniffi(default = $default)] pub $field: $ty,
        ] $($($rest)*)?);
    };
    (@fields [$($meta:tt)*] $name:ident [$($done:tt)*]
        $(#[$field_meta:meta])* $field:ident: $ty:ty $(, $($rest:tt)*)?) => {
        export_object!(@fields [$($meta)*] $name [$($done)* $(#[$field_meta])* pub $field: $ty,] $($($rest)*)?);
    };
    (@fields [$($meta:tt)*] $name:ident [$($done:tt)*]) => {
        #[uniffi::remote(Record)]
        $($meta)*
        pub struct $name {
            $($done)*
        }
    };
}

plan_core::for_each_core_object!(export_object);
plan_protocol::for_each_shared_object!(export_object);
plan_audit_export::for_each_export_overrides!(export_object);
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

/// Exports the protocol's notification union as it is, from its one list:
/// a listener receives the very value `serve` writes to the wire, each
/// variant carrying its params record.
macro_rules! export_notifications {
    ($($variant:ident, $constant:ident => $name:literal, $params:ty;)+) => {
        /// One host notification: the protocol's union, each variant
        /// carrying its notification's params record (the variant is the
        /// method: `PlanApprovalRequested` is `plan/approvalRequested`).
        #[uniffi::remote(Enum)]
        pub enum ServerNotification {
            $($variant($params)),+
        }
    };
}

plan_protocol::for_each_server_notification!(export_notifications);
