//! plan-host: the plan checkpoint for embedders.
//!
//! [`Host`] opens a database (taking the single-host lock, migrating, and
//! running the startup fence before it returns) and starts its expiry timer,
//! then carries out plan-core's decisions through plan-storage: one typed
//! method per protocol method, one transaction per decision, events
//! ([`HostEvent`]) after commit. It knows nothing of the wire: the
//! `plan-server` crate serves protocol v9 JSON-RPC over these methods, for
//! the `serve` sidecar and the FFI.
//!
//! Safe by default:
//! - deadlines fire on time without the embedder starting anything; an
//!   embedder with its own event loop opts out with [`ExpiryTimer::Manual`]
//!   and calls [`Host::expire_due`] at [`Host::next_deadline`];
//! - [`Host::approve`] takes the [`PermissionMode`] the person chose (there
//!   is no approving without one);
//! - ids are types ([`SessionId`], [`TurnId`], [`ApprovalId`],
//!   [`ExecutionId`]), so one kind cannot be passed for another;
//! - every type the API's signatures use is re-exported here, so an
//!   embedder depends on this crate alone (the README example, a doctest
//!   of this crate, uses only `plan_host` paths, and a host test checks
//!   that it does).
//!
//! The host decides nothing itself: policy is plan-core's, durability is
//! plan-storage's. It imposes no async runtime; it is `Send + Sync` and
//! serializes operations with one lock.

mod clock;
mod commands;
mod config;
mod error;
mod event;
mod host;
mod notify;
mod outbox;
mod running;
mod shells;
mod sync;
mod timer;
mod types;
mod web;

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::HostConfig;
pub use error::HostError;
pub use host::Host;
pub use notify::{HostEvent, NotificationListener};
pub use plan_storage::{
    ApprovalFilter, CommandEntry, CommandEntryKind, CommandFilter, CommandRecord, DecisionChannel,
    DecisionEntry, DecisionSource, MigrationReport, StoredApproval,
};
pub use shells::default_catalog;
pub use types::{ExpiryTimer, HostOptions, NewSession, ScratchSize};
pub use web::{NOTIFIER_LIMIT, WebOptions};

// The plan-core values the API takes and returns, and the values inside them.
pub use plan_core::{
    ActiveTurn, ApprovalId, ApprovalStatus, Artifact, ArtifactCheck, ArtifactContent, ArtifactVerification,
    BASH, BootEpoch, CallId, CommandCapabilities, CommandOptions, CommandRun, CommandShell, CommandState,
    ConfigChange, ErrorCode, ExecutionId, ExecutionState, LimitError, Limits, Mode, Origin, OrphanArtifact,
    PermissionMode, PlanApproval, PlanDiff, PlanSandbox, SUBMIT_PLAN, Sandbox, Session, SessionId,
    SessionState, ShellInfo, SkippedWorkspace, ToolCall, ToolCallDecision, ToolCallError, ToolCallResult,
    TurnCommand, TurnCommandStatus, TurnId, TurnKind, UnixMs, VerifyReport, VerifyScope, VerifyTally,
};
// Which stream a command's output chunk came from (in
// [`HostEvent::CommandOutput`]), and what a storage failure carries.
pub use plan_exec::Stream;
pub use plan_storage::StorageError;

// The audit export's settings a [`HostConfig`] holds (its `otel` field).
pub use plan_audit_export::ExportOverrides;

/// The JSON crate of tool-call inputs ([`ToolCall::input`]), so that an
/// embedder uses the same version.
pub use serde_json;

/// The README's Rust example, compiled and run as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
mod readme {}
