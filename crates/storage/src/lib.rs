//! plan-storage: everything durable of the plan checkpoint (ADR 0053).
//!
//! It owns the SQLite database (schema v10, reached from a fresh file or from
//! a v8 database of the 0.4.14 host through the embedded migrations), the
//! typed queries and writes over it, the advisory lock on the database file
//! that keeps a second host away from it under any name, the immutable,
//! hashed plan artifacts under `<workspaceRoot>/.pi/plan/`, and the audit of
//! host-run commands, of Agent-turn permission decisions and of relayed
//! decisions in `transcript_entries`.
//!
//! It stores and loads `plan-core` values and carries out their storage
//! effects; it decides nothing about the checkpoint itself (that is
//! plan-core's job), reads no clock (time comes in as arguments) and speaks
//! no protocol. SQL lives only in this crate.

mod artifacts;
mod audit;
mod backfill;
mod chain;
mod decision;
mod error;
mod exclusive;
mod flush;
mod guard;
mod lock;
mod migrate;
mod path;
mod probe;
mod review;
mod rows;
mod store;
mod tool_audit;
mod transcript;

pub use artifacts::{
    FlushingArtifact, create_artifact, discard_unrecorded_artifact, list_artifact_files, read_artifact,
    read_artifact_unverified, sha256_hex, write_artifact,
};
pub use audit::{CommandEntry, CommandEntryKind, CommandFilter, CommandRecord, OPEN_RUNS_KEY};
pub use backfill::{DEFERRED_HISTORY_ROWS, HistoryNumberer, HistoryProgress};
pub use chain::{
    ALIAS_ATTRIBUTES, AUDIT_CURSOR_KEY, AUDIT_EXPORT_STATUS_KEY, AUDIT_HEAD_KEY, AUDITED_TYPES, AuditCursor,
    AuditFinding, AuditRecord, CONTENT_ATTRIBUTES, DATABASE_ID_KEY, EVENT_ATTRIBUTE, HASH_ATTRIBUTE,
    SEQ_ATTRIBUTE, canonical_bytes, chain_hash, is_canonical_attribute,
};
pub use decision::{DecisionChannel, DecisionEntry, DecisionNote, DecisionSource};
pub use error::StorageError;
pub use exclusive::ExclusiveStore;
pub use flush::Flusher;
pub use lock::HostLock;
pub use migrate::{MigrationReport, PendingMigration, SCHEMA_VERSION, pending_migration};
pub use plan_core::ApprovalFilter;
pub use probe::{executable_exists, real_directory, real_write_target};
pub use review::{ArtifactLocation, WorkspaceFindings};
pub use rows::ApprovalReplay;
pub use store::{DEFAULT_SHELL_KEY, SessionRows, Store, StoredApproval};
pub use tool_audit::ToolDecisionTally;
