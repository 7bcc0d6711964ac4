//! plan-host: the plan checkpoint for embedders.
//!
//! [`Host`] opens a database (taking the single-host lock, migrating, and
//! running the startup fence before it returns), then carries out plan-core's
//! decisions through plan-storage: one typed method per protocol method, one
//! transaction per decision, notifications after commit. [`Connection`] serves
//! protocol v9 JSON-RPC over the same methods, for the `serve` sidecar and the
//! FFI. [`ExpiryDriver`] fires deadlines on time.
//!
//! The host decides nothing itself: policy is plan-core's, durability is
//! plan-storage's. It imposes no async runtime; it is `Send + Sync` and
//! serializes operations with one lock.

mod clock;
mod commands;
mod dispatch;
mod error;
mod event;
mod host;
mod notify;
mod outbox;
mod shells;
mod timer;
mod types;

pub use clock::{Clock, ManualClock, SystemClock};
pub use commands::SandboxStatus;
pub use dispatch::{Connection, SERVER_NAME, error_object};
pub use error::HostError;
pub use event::HostCore;
pub use host::Host;
pub use notify::NotificationListener;
pub use plan_storage::{
    ApprovalFilter, CommandEntry, CommandEntryKind, CommandFilter, CommandRecord, MigrationReport,
    StoredApproval,
};
pub use shells::{ShellEntry, ShellSpec, default_catalog};
pub use timer::ExpiryTimer;
pub use types::{ArtifactContent, HostOptions, NewSession, ToolCallOutcome, ToolCallVerdict};

/// The README's Rust example, compiled and run as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
mod readme {}
