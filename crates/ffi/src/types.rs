//! The records and enums foreign hosts see. Those the wire has as they are
//! are exported here from their one declaration each: plan-core's records
//! and enums (`PlanApproval`, `CommandRun`, `PlanDiff`, a tool call's
//! `ToolCallResult`, the modes and statuses, ...) from
//! `plan_core::for_each_core_object!`, the wire-only
//! views (`Session`, `ActiveTurn`, `VerifyReport`, ...)
//! from `plan_protocol::for_each_shared_object!`, and the typed error code
//! from plan-core's `for_each_error_code!`; so the FFI and `serve` can never
//! describe the same approval differently. plan-core's typed ids cross as
//! strings (UniFFI custom types). Three names differ from the Rust ones, as
//! the bindings always had them (`CommandSandbox` is plan-core's `Sandbox`;
//! `Decision` and `ShellCatalog` are the protocol's `PlanDecisionResult`
//! and `ShellListResult`). This
//! module exports the protocol's notification union as it is too (from
//! `plan_protocol::for_each_server_notification!`), and declares only what
//! differs from the wire: tool inputs as JSON text and the argument records with defaults. It
//! decides nothing.

use plan_core::{
    ApprovalId, ApprovalStatus, Artifact, ArtifactCheck, ArtifactContent, ArtifactVerification, CallId,
    CommandCapabilities, CommandRun, CommandShell, CommandState, ErrorCode, ExecutionId, ExecutionState,
    Mode, Origin, OrphanArtifact, PermissionMode, PlanApproval, PlanDiff, PlanSandbox, Sandbox, SessionId,
    ShellInfo, SkippedWorkspace, ToolAuditEntry, ToolAuditKind, ToolCallDecision, ToolCallError,
    ToolCallResult, TurnId, TurnKind,
};
use plan_protocol as wire;
use plan_protocol::{
    ActiveTurn, CommandExitedNotification, CommandOutputNotification, ExecutionStateChangedNotification,
    OutputStream, PlanApprovalRequestedNotification, PlanApprovalResolvedNotification, ServerNotification,
    Session, SessionChangedNotification, VerifyReport,
};

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

/// Exports one item of a shared list (plan-core's or the protocol's) as a
/// UniFFI enum or record of the very Rust type (UniFFI's remote-type form:
/// the fields are the declaration's, checked by the compiler, and nothing is
/// redeclared). An item the bindings know by another name (plan-core's
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
        $($(#[$field_meta:meta])* $field:ident: $ty:ty),+ $(,)?
    }) => {
        pub use wire::$name as $ffi_name;

        #[uniffi::remote(Record)]
        $(#[$meta])*
        pub struct $ffi_name {
            $($(#[$field_meta])* pub $field: $ty),+
        }
    };
    ($(#[$meta:meta])* struct $name:ident { $($(#[$field_meta:meta])* $field:ident: $ty:ty),+ $(,)? }) => {
        #[uniffi::remote(Record)]
        $(#[$meta])*
        pub struct $name {
            $($(#[$field_meta])* pub $field: $ty),+
        }
    };
}

plan_core::for_each_core_object!(export_object);
plan_protocol::for_each_shared_object!(export_object);

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

/// One assistant tool call.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ToolCall {
    /// The caller's id for the call.
    pub call_id: CallId,
    /// Tool name.
    pub name: String,
    /// The input as JSON text.
    pub input_json: String,
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

/// Filters for `list_approvals`; all optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, uniffi::Record)]
pub struct ApprovalQuery {
    /// Only this session.
    #[uniffi(default = None)]
    pub session_id: Option<String>,
    /// Only this status.
    #[uniffi(default = None)]
    pub status: Option<ApprovalStatus>,
    /// At most this many.
    #[uniffi(default = None)]
    pub limit: Option<u32>,
}

/// Host settings; `None` takes the default (30 minutes, 8 MiB; commands: the
/// helper next to the executable or on `PATH`, 120 s default and 600 s
/// maximum timeout, 1 MiB output cap, 4 running per session, no network
/// for Agent `auto`).
#[derive(Debug, Clone, Default, PartialEq, Eq, uniffi::Record)]
pub struct PlanHostOptions {
    /// Approval TTL in milliseconds: 1 to 604800000 (seven days); 30
    /// minutes when absent. Anything else is `INVALID_PARAMS`.
    #[uniffi(default = None)]
    pub approval_ttl_ms: Option<i64>,
    /// Largest SubmitPlan markdown in bytes: 1 to 67108864 (64 MiB); 8 MiB
    /// when absent.
    #[uniffi(default = None)]
    pub markdown_limit_bytes: Option<u64>,
    /// The command sandbox helper (`plan-exec-sandbox`) an app ships, for
    /// example in its bundle or its native library directory.
    #[uniffi(default = None)]
    pub sandbox_helper: Option<String>,
    /// Where each command's scratch directory is made: a private directory
    /// (0700) of this user, outside every workspace, reached without a
    /// symlink; one that is not is refused and no command runs (the reason
    /// is in `sandbox_info`). Default: one per database under
    /// `$XDG_RUNTIME_DIR` or the temporary directory.
    #[uniffi(default = None)]
    pub scratch_root: Option<String>,
    /// Default command timeout in milliseconds.
    #[uniffi(default = None)]
    pub command_timeout_ms: Option<u64>,
    /// Largest command timeout in milliseconds.
    #[uniffi(default = None)]
    pub command_max_timeout_ms: Option<u64>,
    /// Retained output per command, in bytes.
    #[uniffi(default = None)]
    pub command_output_cap: Option<u64>,
    /// Running commands per session.
    #[uniffi(default = None)]
    pub max_running_commands: Option<u32>,
    /// Whether Agent commands (`auto`, and confirmed ones) may use the network.
    #[uniffi(default = None)]
    pub network_in_auto: Option<bool>,
    /// Where the kernel sandbox is unavailable, whether Agent commands
    /// (`auto`, and confirmed ones under ask and accept-edits) run
    /// unconfined instead of failing with `SANDBOX_UNAVAILABLE` (Plan
    /// commands never do).
    #[uniffi(default = None)]
    pub auto_without_sandbox: Option<bool>,
    /// Whether the sandbox skips its namespaces even where the kernel allows
    /// them (as a kernel without them would): Plan Bash still runs, the
    /// database and terminals are no longer hidden from it, and Agent
    /// commands fail with `SANDBOX_UNAVAILABLE` unless `auto_without_sandbox`.
    #[uniffi(default = None)]
    pub skip_namespaces: Option<bool>,
    /// More paths kept read-only under Agent `auto`, besides `.git`, `.pi`,
    /// the database with its side files and the helper.
    #[uniffi(default = None)]
    pub protected_paths: Option<Vec<String>>,
    /// A command does not inherit the host's environment variables whose
    /// names contain one of these (case-insensitive). Default: `KEY`,
    /// `SECRET`, `TOKEN` and `PASSWORD`; an empty list keeps every variable.
    #[uniffi(default = None)]
    pub secret_env_markers: Option<Vec<String>>,
    /// How much a command's scratch directory (`TMPDIR`) may hold, in MB
    /// (MiB): 1 to 1048576; 1024 when absent. Anything else is
    /// `INVALID_PARAMS`. Inside the sandbox's namespaces the scratch
    /// directory is a private tmpfs (memory) of this size; without them it
    /// is an ordinary directory and not capped.
    #[uniffi(default = None)]
    pub scratch_size_mb: Option<u64>,
    /// Serves approval cards (`<plan-approval-card>`) over HTTP on this
    /// loopback address, e.g. `127.0.0.1:0` (port 0 picks a free port);
    /// no web server when absent. An address that is not loopback is
    /// `INVALID_PARAMS` unless `web_allow_any_address`.
    #[uniffi(default = None)]
    pub web_address: Option<String>,
    /// Lets `web_address` name an address that is not loopback: anyone who
    /// can reach it and sees a card's URL can decide.
    #[uniffi(default = None)]
    pub web_allow_any_address: Option<bool>,
    /// The person's notifier: a command line run through `/bin/sh -c` once
    /// each time a plan becomes pending, with the approval as JSON on its
    /// stdin (a `PendingPlanNotice`, the card URL in it when `web_address`
    /// is set), its output discarded and killed after 30 s. None by
    /// default. Empty, or with a NUL byte: `INVALID_PARAMS`.
    #[uniffi(default = None)]
    pub notifier: Option<String>,
    /// Exports the audit as OpenTelemetry log records (OTLP/HTTP) to this
    /// logs endpoint, a full `http://` or `https://` URL (`.../v1/logs`;
    /// https verifies the collector's certificate). Without it,
    /// export is on only when `otel_from_environment` allows the standard
    /// variables and `OTEL_LOGS_EXPORTER=otlp`. Off by default.
    #[uniffi(default = None)]
    pub otel_logs_endpoint: Option<String>,
    /// `http/protobuf` (the default) or `http/json`.
    #[uniffi(default = None)]
    pub otel_protocol: Option<String>,
    /// Request headers for the collector, each `KEY=VALUE`.
    #[uniffi(default = None)]
    pub otel_headers: Option<Vec<String>>,
    /// The resource's `service.name` (default `plan-checkpoint`).
    #[uniffi(default = None)]
    pub otel_service_name: Option<String>,
    /// Also exports the plan text, plan titles, questions and command text
    /// (their SHA-256 always is; they may be confidential).
    #[uniffi(default = None)]
    pub otel_include_content: Option<bool>,
    /// A PEM file of the CA certificates trusted for an `https://`
    /// collector, instead of the platform's roots (as
    /// `OTEL_EXPORTER_OTLP_CERTIFICATE`). A file that cannot be read or
    /// holds no certificate: `INVALID_PARAMS`.
    #[uniffi(default = None)]
    pub otel_certificate: Option<String>,
    /// A PEM file of the client certificate for a collector that requires
    /// one (mTLS, as `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE`); needs
    /// `otel_client_key`.
    #[uniffi(default = None)]
    pub otel_client_certificate: Option<String>,
    /// A PEM file of the client certificate's private key (as
    /// `OTEL_EXPORTER_OTLP_CLIENT_KEY`); needs `otel_client_certificate`.
    #[uniffi(default = None)]
    pub otel_client_key: Option<String>,
    /// Whether the standard `OTEL_*` variables of the process are read
    /// (as OpenTelemetry SDKs do); true when absent.
    #[uniffi(default = None)]
    pub otel_from_environment: Option<bool>,
}
