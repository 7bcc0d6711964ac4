//! The audit of Agent-turn permission decisions in `transcript_entries`
//! (schema v10 unchanged): one `tool` entry per [`ToolAuditEntry`] plan-core
//! emits (`toolConfirmRequested`, `toolConfirmed`, `toolDeclined`,
//! `toolAutoAllowed`), with the session's next `seq`, written in the
//! transaction of the transition that decided it.
//!
//! Each entry is the record exactly as serde writes it (its `type` field
//! included), and is read back the same way. This module records and reads;
//! which call needs a confirmation, and when one counts, is plan-core's.

use plan_core::{CallId, ErrorCode, ExecutionId, SessionId, ToolAuditEntry, ToolAuditKind};
use rusqlite::Connection;

use crate::error::StorageError;
use crate::store::Store;

/// The `type` values of tool-permission entries, for the SQL filter.
const TYPES: &str = "'toolConfirmRequested', 'toolConfirmed', 'toolDeclined', 'toolAutoAllowed'";

/// How an approval's execution went through the permission mode: calls a
/// person confirmed, calls declined (by a person, or because nobody could
/// be asked) and calls the mode allowed without asking.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolDecisionTally {
    /// `toolConfirmed` entries.
    pub confirmed: u64,
    /// `toolDeclined` entries.
    pub declined: u64,
    /// `toolAutoAllowed` entries.
    pub auto_allowed: u64,
}

/// Appends one entry with the session's next `seq`, inside `conn`'s
/// transaction.
pub(crate) fn insert_tool_entry(conn: &Connection, entry: &ToolAuditEntry) -> Result<(), StorageError> {
    let content = serde_json::to_value(entry).map_err(|error| StorageError::InvalidValue {
        column: "transcript_entries.content_json",
        value: error.to_string(),
    })?;
    crate::chain::append_fact(
        conn,
        entry.session_id.as_str(),
        crate::transcript::Role::Tool,
        content,
        entry.at,
        "recording a tool-permission audit entry",
    )?;
    Ok(())
}

/// Reads one stored entry. An entry this build cannot read (an error code
/// it does not know, a field a newer host added with another meaning) is
/// skipped rather than failing the whole listing.
fn parse_tool_entry(text: &str) -> Option<ToolAuditEntry> {
    let mut value: serde_json::Value = serde_json::from_str(text).ok()?;
    if let Some(code) = value.get_mut("errorCode")
        && code.as_str().is_some_and(|text| ErrorCode::parse(text).is_none())
    {
        *code = serde_json::Value::Null;
    }
    serde_json::from_value(value).ok()
}

fn load_tool_entries(
    conn: &Connection,
    condition: &str,
    value: &str,
) -> Result<Vec<ToolAuditEntry>, StorageError> {
    let mut statement = conn
        .prepare(&format!(
            "SELECT content_json FROM transcript_entries
             WHERE role = 'tool' AND json_valid(content_json)
               AND json_extract(content_json, '$.type') IN ({TYPES})
               AND {condition} = ?1
             ORDER BY id"
        ))
        .map_err(StorageError::sqlite("reading tool-permission audit entries"))?;
    let rows = statement
        .query_map([value], |row| row.get::<_, String>(0))
        .map_err(StorageError::sqlite("reading tool-permission audit entries"))?;
    let mut entries = Vec::new();
    for row in rows {
        let text = row.map_err(StorageError::sqlite("reading tool-permission audit entries"))?;
        entries.extend(parse_tool_entry(&text));
    }
    Ok(entries)
}

impl Store {
    /// Every tool-permission entry of one call of a session, oldest first
    /// (a host-run command's confirmation, for `commands show`).
    pub fn tool_entries(
        &self,
        session_id: &SessionId,
        call_id: &CallId,
    ) -> Result<Vec<ToolAuditEntry>, StorageError> {
        Ok(load_tool_entries(&self.conn, "session_id", session_id.as_str())?
            .into_iter()
            .filter(|entry| &entry.call_id == call_id)
            .collect())
    }

    /// What the permission mode decided during one approval's execution,
    /// counted (for `approvals show`).
    pub fn execution_tool_tally(
        &self,
        execution_id: &ExecutionId,
    ) -> Result<ToolDecisionTally, StorageError> {
        let entries = load_tool_entries(
            &self.conn,
            "json_extract(content_json, '$.executionId')",
            execution_id.as_str(),
        )?;
        let mut tally = ToolDecisionTally::default();
        for entry in entries {
            match entry.kind {
                ToolAuditKind::Confirmed => tally.confirmed += 1,
                ToolAuditKind::Declined => tally.declined += 1,
                ToolAuditKind::AutoAllowed => tally.auto_allowed += 1,
                ToolAuditKind::ConfirmRequested => {}
            }
        }
        Ok(tally)
    }
}
