//! The audit of host-run commands in `transcript_entries` (schema v10
//! unchanged): one `tool` entry per event of a run, with the next `seq` of
//! its session.
//!
//! Entry types: `commandStarted` (committed before the process is spawned),
//! `commandEnded` (with state, exit status, byte counts and `outputSha256`;
//! the startup fence writes one with state `interrupted` for every run that
//! had started and never ended) and `commandRefused` (a start that was
//! refused, with state `failedToStart` and the code). Each entry holds the
//! whole `CommandRun` as plan-core's one declaration serializes it (the
//! wire's shape), plus `type`; entries written before a field existed still
//! read, with that field's default. This module stores and reads entries; which runs the fence interrupts is plan-core's
//! `fence_commands`.

use plan_core::{CallId, CommandRun, ErrorCode, SessionId, UnixMs};
use rusqlite::{Connection, OptionalExtension};

use crate::error::StorageError;
use crate::store::Store;

/// The entry kinds of a run, as plan-core decides them.
pub use plan_core::CommandEntryKind;

/// The kind an entry's `type` field names.
fn parse_kind(text: &str) -> Option<CommandEntryKind> {
    [
        CommandEntryKind::Started,
        CommandEntryKind::Ended,
        CommandEntryKind::Refused,
    ]
    .into_iter()
    .find(|kind| kind.as_str() == text)
}

/// One audit entry as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandEntry {
    /// The entry's type.
    pub kind: CommandEntryKind,
    /// The run as it was when the entry was written.
    pub run: CommandRun,
    /// The combined output hash (`commandEnded` of a run that spawned).
    pub output_sha256: Option<String>,
    /// The session's transcript `seq` of the entry.
    pub seq: i64,
}

/// The latest state of one run, for listings: its last entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRecord {
    /// The run as its last entry says.
    pub run: CommandRun,
    /// The type of that entry.
    pub kind: CommandEntryKind,
    /// The combined output hash, when the run ended after spawning.
    pub output_sha256: Option<String>,
}

/// Which runs to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandFilter {
    /// Only this session's runs.
    pub session_id: Option<SessionId>,
    /// At most this many, newest first.
    pub limit: Option<u32>,
}

/// The stored JSON of an entry: the run exactly as it serializes (plan-core's
/// `CommandRun`, the wire's shape), plus `type`, plus `outputSha256` for an
/// ended entry. serde_json's maps keep their keys sorted, so the stored text
/// does not depend on the order of the record's fields.
fn entry_json(
    kind: CommandEntryKind,
    run: &CommandRun,
    output_sha256: Option<&str>,
) -> Result<serde_json::Value, StorageError> {
    let mut value = serde_json::to_value(run).map_err(|error| StorageError::InvalidValue {
        column: "transcript_entries.content_json",
        value: error.to_string(),
    })?;
    if let serde_json::Value::Object(fields) = &mut value {
        fields.insert("type".to_owned(), kind.as_str().into());
        if kind == CommandEntryKind::Ended {
            fields.insert("outputSha256".to_owned(), output_sha256.into());
        }
    }
    Ok(value)
}

fn invalid(value: &str) -> StorageError {
    StorageError::InvalidValue {
        column: "transcript_entries.content_json",
        value: value.chars().take(200).collect(),
    }
}

/// What entries written before a field existed read as: no shell (an empty
/// id and path), no network, no output, not truncated. An error code this
/// build does not know reads as none, so an entry a newer host wrote still
/// lists. Every other missing optional field reads as `null`.
fn fill_defaults(fields: &mut serde_json::Map<String, serde_json::Value>) {
    let shell = fields
        .entry("shell")
        .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
    if let serde_json::Value::Object(shell) = shell {
        for key in ["id", "path"] {
            shell.entry(key).or_insert_with(|| "".into());
        }
    }
    for (key, default) in [
        ("network", serde_json::Value::Bool(false)),
        ("stdoutBytes", 0.into()),
        ("stderrBytes", 0.into()),
        ("truncated", serde_json::Value::Bool(false)),
    ] {
        fields.entry(key).or_insert(default);
    }
    if let Some(code) = fields.get_mut("errorCode")
        && code.as_str().is_some_and(|text| ErrorCode::parse(text).is_none())
    {
        *code = serde_json::Value::Null;
    }
}

/// Reads an entry; `Ok(None)` for a tool entry that is not a command entry.
fn parse_entry(text: &str, seq: i64) -> Result<Option<CommandEntry>, StorageError> {
    let mut value: serde_json::Value = serde_json::from_str(text).map_err(|_| invalid(text))?;
    let Some(kind) = value
        .get("type")
        .and_then(serde_json::Value::as_str)
        .and_then(parse_kind)
    else {
        return Ok(None);
    };
    let output_sha256 = value
        .get("outputSha256")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned);
    let serde_json::Value::Object(fields) = &mut value else {
        return Err(invalid(text));
    };
    fill_defaults(fields);
    let run: CommandRun = serde_json::from_value(value).map_err(|_| invalid(text))?;
    Ok(Some(CommandEntry {
        kind,
        run,
        output_sha256,
        seq,
    }))
}

/// The settings key of the runs that started and have not ended: a JSON
/// object from `<session id>\u{1f}<call id>` to the row id of the run's
/// start entry. When it exists it is complete (every start and end keeps
/// it), so the startup fence reads those entries alone, not the whole
/// transcript; a database without it (written before it existed) is
/// scanned once, by the fence that then writes it.
pub const OPEN_RUNS_KEY: &str = "audit.commands.open";

fn run_key(run: &CommandRun) -> String {
    format!("{}\u{1f}{}", run.session_id.as_str(), run.call_id.as_str())
}

fn open_runs(conn: &Connection) -> Result<Option<serde_json::Map<String, serde_json::Value>>, StorageError> {
    let text: Option<String> = conn
        .prepare_cached("SELECT value_json FROM settings WHERE key = ?1")
        .and_then(|mut statement| statement.query_row([OPEN_RUNS_KEY], |row| row.get(0)).optional())
        .map_err(StorageError::sqlite("reading the open command runs"))?;
    Ok(
        match text.map(|text| serde_json::from_str::<serde_json::Value>(&text)) {
            Some(Ok(serde_json::Value::Object(runs))) => Some(runs),
            // Unreadable: as if absent, so the fence scans and rewrites it.
            Some(Ok(_) | Err(_)) | None => None,
        },
    )
}

pub(crate) fn write_open_runs(
    conn: &Connection,
    runs: serde_json::Map<String, serde_json::Value>,
) -> Result<(), StorageError> {
    conn.prepare_cached(
        "INSERT INTO settings (key, value_json) VALUES (?1, ?2) \
         ON CONFLICT (key) DO UPDATE SET value_json = excluded.value_json",
    )
    .and_then(|mut statement| {
        statement.execute(rusqlite::params![
            OPEN_RUNS_KEY,
            serde_json::Value::Object(runs).to_string()
        ])
    })
    .map_err(StorageError::sqlite("recording the open command runs"))?;
    Ok(())
}

/// Appends one entry with the session's next `seq`, inside `conn`'s
/// transaction, and keeps [`OPEN_RUNS_KEY`] (where it exists).
pub(crate) fn insert_entry(
    conn: &Connection,
    kind: CommandEntryKind,
    run: &CommandRun,
    output_sha256: Option<&str>,
    now: UnixMs,
) -> Result<(), StorageError> {
    let content = entry_json(kind, run, output_sha256)?;
    crate::chain::append_fact(
        conn,
        run.session_id.as_str(),
        crate::transcript::Role::Tool,
        content,
        now,
        "recording a command audit entry",
    )?;
    let entry_id = conn.last_insert_rowid();
    match kind {
        CommandEntryKind::Refused => Ok(()),
        CommandEntryKind::Started | CommandEntryKind::Ended => {
            let Some(mut runs) = open_runs(conn)? else {
                return Ok(());
            };
            if kind == CommandEntryKind::Started {
                runs.insert(run_key(run), entry_id.into());
            } else {
                runs.remove(&run_key(run));
            }
            write_open_runs(conn, runs)
        }
    }
}

/// Every command entry, oldest first (optionally of one session).
pub(crate) fn load_entries(
    conn: &Connection,
    session_id: Option<&str>,
) -> Result<Vec<CommandEntry>, StorageError> {
    let mut statement = conn
        .prepare(
            "SELECT content_json, seq FROM transcript_entries
             WHERE role = 'tool' AND (?1 IS NULL OR session_id = ?1)
               AND json_valid(content_json)
               AND json_extract(content_json, '$.type') IN ('commandStarted', 'commandEnded', 'commandRefused')
             ORDER BY id",
        )
        .map_err(StorageError::sqlite("reading command audit entries"))?;
    let rows = statement
        .query_map([session_id], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
        })
        .map_err(StorageError::sqlite("reading command audit entries"))?;
    let mut entries = Vec::new();
    for row in rows {
        let (text, seq) = row.map_err(StorageError::sqlite("reading command audit entries"))?;
        if let Some(entry) = parse_entry(&text, seq)? {
            entries.push(entry);
        }
    }
    Ok(entries)
}

/// The latest entry of every run, oldest run first. Linear: a run's start
/// is found by its session and call id, not by looking back through every
/// record.
fn fold_records(entries: Vec<CommandEntry>) -> Vec<CommandRecord> {
    let mut records: Vec<CommandRecord> = Vec::new();
    // The index of each run's start that no end followed yet.
    let mut started: std::collections::HashMap<(String, String), usize> = std::collections::HashMap::new();
    for entry in entries {
        let key = (
            entry.run.session_id.as_str().to_owned(),
            entry.run.call_id.as_str().to_owned(),
        );
        let record = CommandRecord {
            run: entry.run,
            kind: entry.kind,
            output_sha256: entry.output_sha256,
        };
        // A refused start of a call id is its own record; a start and its
        // end are one.
        match record.kind {
            CommandEntryKind::Ended => match started.remove(&key).and_then(|index| records.get_mut(index)) {
                Some(known) => *known = record,
                None => records.push(record),
            },
            CommandEntryKind::Started => {
                started.insert(key, records.len());
                records.push(record);
            }
            CommandEntryKind::Refused => records.push(record),
        }
    }
    records
}

/// The runs whose audit has a start and no end, for the startup fence:
/// the start entries [`OPEN_RUNS_KEY`] names, read by row id; without the
/// key, every command entry once.
pub(crate) fn unended_runs(conn: &Connection) -> Result<Vec<CommandRun>, StorageError> {
    let Some(runs) = open_runs(conn)? else {
        return Ok(fold_records(load_entries(conn, None)?)
            .into_iter()
            .filter(|record| record.kind == CommandEntryKind::Started)
            .map(|record| record.run)
            .collect());
    };
    let mut ids: Vec<i64> = runs.values().filter_map(serde_json::Value::as_i64).collect();
    ids.sort_unstable();
    let mut unended = Vec::with_capacity(ids.len());
    for id in ids {
        let text: Option<(String, i64)> = conn
            .prepare_cached("SELECT content_json, seq FROM transcript_entries WHERE id = ?1")
            .and_then(|mut statement| {
                statement
                    .query_row([id], |row| Ok((row.get(0)?, row.get(1)?)))
                    .optional()
            })
            .map_err(StorageError::sqlite("reading an open command run"))?;
        if let Some((text, seq)) = text
            && let Some(entry) = parse_entry(&text, seq)?
            && entry.kind == CommandEntryKind::Started
        {
            unended.push(entry.run);
        }
    }
    Ok(unended)
}

impl Store {
    /// Appends one command audit entry in its own transaction.
    pub fn record_command(
        &mut self,
        kind: CommandEntryKind,
        run: &CommandRun,
        output_sha256: Option<&str>,
        now: UnixMs,
    ) -> Result<(), StorageError> {
        self.guarded(|conn| {
            let transaction = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(StorageError::sqlite("beginning a write transaction"))?;
            insert_entry(&transaction, kind, run, output_sha256, now)?;
            transaction
                .commit()
                .map_err(StorageError::sqlite("committing a command audit entry"))
        })
    }

    /// Every command audit entry of one run (a session's call id), oldest
    /// first.
    pub fn command_entries(
        &self,
        session_id: &str,
        call_id: &CallId,
    ) -> Result<Vec<CommandEntry>, StorageError> {
        Ok(load_entries(&self.conn, Some(session_id))?
            .into_iter()
            .filter(|entry| &entry.run.call_id == call_id)
            .collect())
    }

    /// The latest record of a session's call id: its run when it ran (a
    /// refused second start does not hide it), else its latest refusal.
    pub fn command_record(
        &self,
        session_id: &str,
        call_id: &CallId,
    ) -> Result<Option<CommandRecord>, StorageError> {
        let mut records = fold_records(self.command_entries(session_id, call_id)?);
        let ran = records
            .iter()
            .rposition(|record| record.kind != CommandEntryKind::Refused);
        Ok(match ran {
            Some(index) => Some(records.swap_remove(index)),
            None => records.pop(),
        })
    }

    /// Runs, newest first, with their latest state.
    pub fn list_commands(&self, filter: &CommandFilter) -> Result<Vec<CommandRecord>, StorageError> {
        if let Some(session_id) = &filter.session_id {
            let exists = self
                .conn
                .query_row(
                    "SELECT 1 FROM sessions WHERE id = ?1",
                    [session_id.as_str()],
                    |_| Ok(()),
                )
                .optional()
                .map_err(StorageError::sqlite("looking up a session"))?
                .is_some();
            if !exists {
                return Err(StorageError::SessionNotFound {
                    id: session_id.as_str().to_owned(),
                });
            }
        }
        let mut records = fold_records(load_entries(
            &self.conn,
            filter.session_id.as_ref().map(SessionId::as_str),
        )?);
        records.reverse();
        if let Some(limit) = filter.limit {
            records.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        }
        Ok(records)
    }
}
