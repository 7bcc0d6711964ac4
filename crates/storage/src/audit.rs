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

/// The key of [`OPEN_RUNS_KEY`]'s value while the runs an earlier host
/// left are still to be found: `{"pending": {"through": id, "at": ms}}`.
const PENDING: &str = "pending";

/// A transcript above this many rows is not scanned for unended runs in
/// the fence: a host's thread does it after the host answered.
const SCANNED_IN_FENCE: i64 = 20_000;

/// What [`OPEN_RUNS_KEY`] holds.
enum OpenRuns {
    /// No key: unknown (a database written before it existed).
    Absent,
    /// The runs open now, complete.
    Kept(serde_json::Map<String, serde_json::Value>),
    /// Runs started up to row id `through` and never ended are an earlier
    /// host's, to be recorded interrupted at `at`, after a scan.
    Pending { through: i64, at: UnixMs },
}

fn open_runs_state(conn: &Connection) -> Result<OpenRuns, StorageError> {
    let text: Option<String> = conn
        .prepare_cached("SELECT value_json FROM settings WHERE key = ?1")
        .and_then(|mut statement| statement.query_row([OPEN_RUNS_KEY], |row| row.get(0)).optional())
        .map_err(StorageError::sqlite("reading the open command runs"))?;
    let Some(text) = text else {
        return Ok(OpenRuns::Absent);
    };
    let Ok(serde_json::Value::Object(runs)) = serde_json::from_str::<serde_json::Value>(&text) else {
        // Unreadable: as if absent, so it is found again and rewritten.
        return Ok(OpenRuns::Absent);
    };
    Ok(match runs.get(PENDING) {
        Some(pending) => OpenRuns::Pending {
            through: pending
                .get("through")
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(i64::MAX),
            at: pending.get("at").and_then(serde_json::Value::as_i64).unwrap_or(0),
        },
        None => OpenRuns::Kept(runs),
    })
}

fn open_runs(conn: &Connection) -> Result<Option<serde_json::Map<String, serde_json::Value>>, StorageError> {
    Ok(match open_runs_state(conn)? {
        OpenRuns::Kept(runs) => Some(runs),
        OpenRuns::Absent | OpenRuns::Pending { .. } => None,
    })
}

/// The startup fence's part for commands, inside its transaction: every
/// run that started and never ended is recorded `interrupted` (plan-core's
/// `fence_commands`), read from the kept open runs. Without them on a big
/// transcript, the scan is left to a host's thread after it answered
/// ([`Store::settle_open_runs`]): the runs up to now are marked pending.
pub(crate) fn fence_runs(conn: &Connection, now: UnixMs) -> Result<(), StorageError> {
    let last_id = || -> Result<i64, StorageError> {
        conn.query_row("SELECT COALESCE(max(id), 0) FROM transcript_entries", [], |row| {
            row.get(0)
        })
        .map_err(StorageError::sqlite("reading the transcript's last row id"))
    };
    let pending = |through: i64| {
        let mut inner = serde_json::Map::new();
        inner.insert("through".to_owned(), through.into());
        inner.insert("at".to_owned(), now.into());
        let mut marker = serde_json::Map::new();
        marker.insert(PENDING.to_owned(), serde_json::Value::Object(inner));
        marker
    };
    let unended = match open_runs_state(conn)? {
        OpenRuns::Pending { .. } => return write_open_runs(conn, pending(last_id()?)),
        OpenRuns::Absent => {
            let through = last_id()?;
            if through > SCANNED_IN_FENCE {
                return write_open_runs(conn, pending(through));
            }
            unended_runs(conn)?
        }
        OpenRuns::Kept(_) => unended_runs(conn)?,
    };
    for run in plan_core::fence_commands(&unended, now) {
        insert_entry(conn, CommandEntryKind::Ended, &run, None, now)?;
    }
    // Every run has ended now: the set of open runs is empty, and kept from
    // here on (the next fence reads it, not the history).
    write_open_runs(conn, serde_json::Map::new())
}

/// Whether the runs an earlier host left still wait for
/// [`Store::settle_open_runs`].
pub(crate) fn runs_pending(conn: &Connection) -> Result<bool, StorageError> {
    Ok(matches!(open_runs_state(conn)?, OpenRuns::Pending { .. }))
}

impl Store {
    /// Finds the runs an earlier host left unended when the fence left that
    /// to a thread (a big transcript without the kept set): scans the
    /// command entries up to the fence without holding the write lock,
    /// then, in one short transaction, keeps the runs open since and
    /// records the earlier ones interrupted at the fence's time. Returns
    /// whether there was anything to settle.
    pub fn settle_open_runs(&mut self) -> Result<bool, StorageError> {
        let OpenRuns::Pending { through, at } = open_runs_state(&self.conn)? else {
            return Ok(false);
        };
        let before: Vec<(CommandRun, i64)> = started_runs(&self.conn, i64::MIN, through)?;
        self.guarded(|conn| {
            let transaction = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(StorageError::sqlite("beginning a write transaction"))?;
            // Another fence may have moved the mark meanwhile.
            match open_runs_state(&transaction)? {
                OpenRuns::Pending {
                    through: now_through, ..
                } if now_through == through => {}
                OpenRuns::Pending { .. } | OpenRuns::Absent | OpenRuns::Kept(_) => return Ok(()),
            }
            // The kept set, complete: the earlier host's unended runs (each
            // end below removes its run) and the runs started since.
            let mut kept = serde_json::Map::new();
            for (run, id) in before
                .iter()
                .chain(started_runs(&transaction, through, i64::MAX)?.iter())
            {
                kept.insert(run_key(run), (*id).into());
            }
            write_open_runs(&transaction, kept)?;
            let unended: Vec<CommandRun> = before.into_iter().map(|(run, _)| run).collect();
            for run in plan_core::fence_commands(&unended, at) {
                insert_entry(&transaction, CommandEntryKind::Ended, &run, None, at)?;
            }
            transaction
                .commit()
                .map_err(StorageError::sqlite("committing the interrupted command runs"))
        })?;
        Ok(true)
    }
}

/// The runs started in row ids `(after, through]` and not ended there, with
/// the row id of their start entry.
fn started_runs(conn: &Connection, after: i64, through: i64) -> Result<Vec<(CommandRun, i64)>, StorageError> {
    let mut open: std::collections::HashMap<(String, String), (CommandRun, i64)> =
        std::collections::HashMap::new();
    let mut statement = conn
        .prepare(
            "SELECT id, content_json, seq FROM transcript_entries
             WHERE id > ?1 AND id <= ?2 AND role = 'tool' AND json_valid(content_json)
               AND json_extract(content_json, '$.type') IN ('commandStarted', 'commandEnded')
             ORDER BY id",
        )
        .map_err(StorageError::sqlite("reading command audit entries"))?;
    let rows = statement
        .query_map(rusqlite::params![after, through], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, i64>(2)?,
            ))
        })
        .map_err(StorageError::sqlite("reading command audit entries"))?;
    for row in rows {
        let (id, text, seq) = row.map_err(StorageError::sqlite("reading command audit entries"))?;
        let Some(entry) = parse_entry(&text, seq)? else {
            continue;
        };
        let key = (
            entry.run.session_id.as_str().to_owned(),
            entry.run.call_id.as_str().to_owned(),
        );
        match entry.kind {
            CommandEntryKind::Started => {
                open.insert(key, (entry.run, id));
            }
            CommandEntryKind::Ended => {
                open.remove(&key);
            }
            // A refused second start does not end the run.
            CommandEntryKind::Refused => {}
        }
    }
    let mut runs: Vec<(CommandRun, i64)> = open.into_values().collect();
    runs.sort_by_key(|(_, id)| *id);
    Ok(runs)
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
    load_entries_between(conn, session_id, i64::MIN, i64::MAX)
}

/// The command entries with row ids in `(after, through]`, oldest first.
fn load_entries_between(
    conn: &Connection,
    session_id: Option<&str>,
    after: i64,
    through: i64,
) -> Result<Vec<CommandEntry>, StorageError> {
    let mut statement = conn
        .prepare(
            "SELECT content_json, seq FROM transcript_entries
             WHERE id > ?2 AND id <= ?3 AND role = 'tool' AND (?1 IS NULL OR session_id = ?1)
               AND json_valid(content_json)
               AND json_extract(content_json, '$.type') IN ('commandStarted', 'commandEnded', 'commandRefused')
             ORDER BY id",
        )
        .map_err(StorageError::sqlite("reading command audit entries"))?;
    let rows = statement
        .query_map(rusqlite::params![session_id, after, through], |row| {
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
