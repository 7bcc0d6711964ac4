//! Appending one entry to a session's transcript (`transcript_entries`), the
//! one place that numbers entries: the command audit, the tool-permission
//! audit and the decision notes all append through it.
//!
//! It writes inside the caller's transaction and never commits; what an
//! entry says is its caller's.

use plan_core::UnixMs;
use rusqlite::{Connection, params};

use crate::StorageError;

/// Who a transcript entry speaks for, as the `role` column holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A tool call's record: a command run, a permission decision.
    Tool,
    /// The host's own record: where a decision came from.
    System,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::Tool => "tool",
            Role::System => "system",
        }
    }
}

/// The next seq of a session's transcript.
pub(crate) const NEXT_SEQ: &str =
    "SELECT COALESCE(MAX(seq), 0) + 1 FROM transcript_entries WHERE session_id = ?1";

/// Appends `content_json` as the session's next entry (`seq` one past its
/// last), inside `conn`'s transaction; `what` names the entry in an error.
/// `floor` is the least row id it may take (ids below it are kept for the
/// audit history being numbered; `None`: the next id).
pub(crate) fn append(
    conn: &Connection,
    session_id: &str,
    role: Role,
    content_json: &str,
    at: UnixMs,
    what: &'static str,
    floor: Option<i64>,
) -> Result<(), StorageError> {
    let seq: i64 = conn
        .prepare_cached(NEXT_SEQ)
        .and_then(|mut statement| statement.query_row([session_id], |row| row.get(0)))
        .map_err(StorageError::sqlite("choosing the next transcript seq"))?;
    match floor {
        None => conn
            .prepare_cached(
                "INSERT INTO transcript_entries (session_id, seq, role, content_json, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut statement| statement.execute(params![session_id, seq, role.as_str(), content_json, at])),
        Some(floor) => conn
            .prepare_cached(
                "INSERT INTO transcript_entries (id, session_id, seq, role, content_json, created_at) \
                 VALUES (max(?6, (SELECT COALESCE(max(id), 0) + 1 FROM transcript_entries)), ?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut statement| {
                statement.execute(params![session_id, seq, role.as_str(), content_json, at, floor])
            }),
    }
    .map_err(StorageError::sqlite(what))?;
    Ok(())
}

/// Inserts `content_json` as the session's next entry at row id `id` (a
/// kept id of the audit history being numbered).
pub(crate) fn insert_at(
    conn: &Connection,
    id: i64,
    session_id: &str,
    role: Role,
    content_json: &str,
    at: UnixMs,
) -> Result<(), StorageError> {
    let seq: i64 = conn
        .prepare_cached(NEXT_SEQ)
        .and_then(|mut statement| statement.query_row([session_id], |row| row.get(0)))
        .map_err(StorageError::sqlite("choosing the next transcript seq"))?;
    conn.prepare_cached(
        "INSERT INTO transcript_entries (id, session_id, seq, role, content_json, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut statement| {
        statement.execute(params![id, session_id, seq, role.as_str(), content_json, at])
    })
    .map_err(StorageError::sqlite("recording an approval's audit history"))?;
    Ok(())
}
