//! Where a decision came from, in `transcript_entries` (schema v10
//! unchanged): one `system` entry of type `approvalDecided`, written in the
//! same transaction as the decision it describes, for a decision that a
//! frontend other than the client's own connection relayed (the web card).
//!
//! The approval row stays the audit of the decision itself; this entry only
//! adds its channel and the remote address. This module stores and reads
//! those entries; it decides nothing about the decision.

use plan_core::{ApprovalId, ApprovalStatus, Effect, PermissionMode, SessionId, UnixMs};
use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

use crate::error::StorageError;

/// The entry's `type` field.
const ENTRY_TYPE: &str = "approvalDecided";

/// The frontend a decision came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum DecisionChannel {
    /// The `<plan-approval-card>` page served by the host's web server.
    #[serde(rename = "webCard")]
    WebCard,
    /// The host's own client over JSON-RPC (`serve`).
    #[serde(rename = "rpc")]
    Rpc,
    /// The host's own client in-process through the FFI.
    #[serde(rename = "ffi")]
    Ffi,
    /// A Rust program embedding the host.
    #[default]
    #[serde(rename = "rust")]
    Rust,
}

impl DecisionChannel {
    /// The channel's name in the audit chain's records.
    pub const fn audit_name(self) -> &'static str {
        match self {
            DecisionChannel::WebCard => "web_card",
            DecisionChannel::Rpc => "rpc",
            DecisionChannel::Ffi => "ffi",
            DecisionChannel::Rust => "rust",
        }
    }
}

/// Where a relayed decision came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionSource {
    /// The frontend it came through.
    pub channel: DecisionChannel,
    /// The peer address of the request (`ip:port`).
    pub remote_address: String,
}

/// What the transcript records about one relayed decision, before it is
/// made: which approval, and where the decision came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionNote {
    /// The approval the decision is about.
    pub approval_id: ApprovalId,
    /// Where it came from.
    pub source: DecisionSource,
}

/// One `approvalDecided` entry as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionEntry {
    /// The approval decided.
    pub approval_id: ApprovalId,
    /// `approved` or `rejected`.
    pub status: ApprovalStatus,
    /// The mode approved with; `None` for a rejection.
    pub permission_mode: Option<PermissionMode>,
    /// The frontend it came through.
    pub via: DecisionChannel,
    /// The peer address of the request.
    pub remote_address: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StoredEntry<'entry> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    entry: &'entry DecisionEntry,
}

/// Appends the note's entry, inside `conn`'s transaction, when `effects`
/// decide the noted approval (an update to `approved` or `rejected`); an
/// expiry committed in place of the decision gets no entry.
pub(crate) fn record(
    conn: &Connection,
    effects: &[Effect],
    note: &DecisionNote,
    now: UnixMs,
) -> Result<(), StorageError> {
    let decided = effects.iter().find_map(|effect| match effect {
        Effect::UpdateApproval { approval, .. }
            if approval.id == note.approval_id
                && matches!(
                    approval.status,
                    ApprovalStatus::Approved | ApprovalStatus::Rejected
                ) =>
        {
            Some(approval)
        }
        Effect::UpdateApproval { .. }
        | Effect::WriteArtifact(_)
        | Effect::InsertApproval(_)
        | Effect::SaveSession(_)
        | Effect::CancelCommand { .. }
        | Effect::RecordToolAudit(_)
        | Effect::RecordCommand { .. }
        | Effect::BindWorkspace { .. } => None,
    });
    let Some(approval) = decided else {
        return Ok(());
    };
    let entry = DecisionEntry {
        approval_id: approval.id.clone(),
        status: approval.status,
        permission_mode: approval.permission_mode,
        via: note.source.channel,
        remote_address: note.source.remote_address.clone(),
    };
    let content = serde_json::to_string(&StoredEntry {
        kind: ENTRY_TYPE,
        entry: &entry,
    })
    .map_err(|error| StorageError::InvalidValue {
        column: "transcript_entries.content_json",
        value: error.to_string(),
    })?;
    crate::transcript::append(
        conn,
        approval.session_id.as_str(),
        crate::transcript::Role::System,
        &content,
        now,
        "recording where a decision came from",
        crate::chain::id_floor(conn)?,
    )
}

/// Every `approvalDecided` entry of a session, oldest first.
pub(crate) fn load(conn: &Connection, session_id: &SessionId) -> Result<Vec<DecisionEntry>, StorageError> {
    let mut statement = conn
        .prepare(
            "SELECT content_json FROM transcript_entries
             WHERE session_id = ?1 AND role = 'system' AND json_valid(content_json)
               AND json_extract(content_json, '$.type') = ?2
             ORDER BY seq",
        )
        .map_err(StorageError::sqlite("reading decision entries"))?;
    let rows = statement
        .query_map(params![session_id.as_str(), ENTRY_TYPE], |row| {
            row.get::<_, String>(0)
        })
        .map_err(StorageError::sqlite("reading decision entries"))?;
    let mut entries = Vec::new();
    for row in rows {
        let text = row.map_err(StorageError::sqlite("reading decision entries"))?;
        let entry = serde_json::from_str(&text).map_err(|_| StorageError::InvalidValue {
            column: "transcript_entries.content_json",
            value: text.chars().take(200).collect(),
        })?;
        entries.push(entry);
    }
    Ok(entries)
}
