//! Numbering a big pre-chain history in steps, never inside a host's
//! startup fence.
//!
//! A database whose chain never began (upgraded from v8 or from a build
//! without the chain) has history to number before any new fact: its
//! audited transcript entries, then the facts its approval rows still
//! tell ([`crate::chain::begin_chain`] says which). When that history is
//! small it is numbered in the transaction that begins the chain, as
//! before. When it is big, beginning the chain only records where the
//! history ends ([`Backfill`], kept in the head's `backfill` field) and the
//! numbering runs later in short transactions ([`Store::number_history_step`]):
//! `plan-checkpoint db migrate` runs them to the end with progress, a host
//! runs them on a thread of its own after it answers ([`HistoryNumberer`]).
//!
//! The chain stays one sequence in row order: the history's entries are
//! numbered in place (ids up to `through_entry`), its approvals' facts
//! take the ids kept free for them (`through_entry + 1 ..`, below
//! `floor`), and every fact recorded meanwhile waits unnumbered at an id
//! from `floor` on, numbered last, in the step that ends the numbering.
//! An old approval a host changes meanwhile (the fence interrupting it)
//! has its history written first, before the change's own fact. This
//! module records; it decides nothing about the checkpoint.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use plan_core::{PlanApproval, UnixMs};
use rusqlite::{Connection, TransactionBehavior, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::chain::{BACKFILLED, FactMoment, approval_fact_list, number_after, stored_head, write_head_with};
use crate::error::StorageError;
use crate::store::{APPROVAL_COLUMNS, Store};
use crate::transcript::Role;

/// A history above this many rows (transcript entries and approvals) is
/// numbered in steps; a smaller one when the chain begins.
pub const DEFERRED_HISTORY_ROWS: i64 = 20_000;

/// How many rows one step handles: a step holds the write lock for tens
/// of milliseconds.
const STEP_ROWS: i64 = 2_000;

/// How far the numbering of a big history went (the head's `backfill`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Backfill {
    /// The last transcript row id of the history.
    through_entry: i64,
    /// The transcript row ids up to this one were numbered.
    next_entry: i64,
    /// The last approval rowid of the history.
    through_approval: i64,
    /// The approvals up to this rowid were told.
    next_approval: i64,
    /// The next id kept for an approval's history fact.
    next_id: i64,
    /// The first id of a fact recorded while the history is numbered.
    pub(crate) floor: i64,
    /// Approvals whose history is told already (by an entry of the history,
    /// or written before a host changed them): not told again.
    told: Vec<String>,
}

/// How far the numbering is, for a progress line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryProgress {
    /// Rows looked at so far (transcript entries and approvals).
    pub done: u64,
    /// Rows of the history in all.
    pub total: u64,
}

impl Backfill {
    fn progress(&self) -> HistoryProgress {
        let done = self.next_entry.max(0) + self.next_approval.max(0);
        let total = self.through_entry.max(0) + self.through_approval.max(0);
        HistoryProgress {
            done: u64::try_from(done.min(total)).unwrap_or(0),
            total: u64::try_from(total).unwrap_or(0),
        }
    }
}

/// Begins the chain of a database with a big history without numbering
/// it: records where it ends and keeps the ids its approvals' facts will
/// take. Returns `false` (nothing written) when the history is small.
pub(crate) fn begin_deferred(conn: &Connection) -> Result<bool, StorageError> {
    let failed = "measuring the audit history";
    let through_entry: i64 = conn
        .query_row("SELECT COALESCE(max(id), 0) FROM transcript_entries", [], |row| {
            row.get(0)
        })
        .map_err(StorageError::sqlite(failed))?;
    let through_approval: i64 = conn
        .query_row("SELECT COALESCE(max(rowid), 0) FROM plan_approvals", [], |row| {
            row.get(0)
        })
        .map_err(StorageError::sqlite(failed))?;
    if through_entry + through_approval <= DEFERRED_HISTORY_ROWS {
        return Ok(false);
    }
    // At most three facts per approval: its submission, its decision and
    // its execution's latest state.
    let backfill = Backfill {
        through_entry,
        next_entry: 0,
        through_approval,
        next_approval: 0,
        next_id: through_entry + 1,
        floor: through_entry + 3 * through_approval.max(0) + 1,
        told: Vec::new(),
    };
    write_head_with(conn, 0, "", Some(&backfill))?;
    Ok(true)
}

/// Before an approval row changes while the history is numbered: an old
/// row not yet told has its history written first (unnumbered, after the
/// floor, numbered in row order like every fact recorded meanwhile), so
/// the change's own fact follows its submission.
pub(crate) fn before_update(conn: &Connection, approval_id: &str) -> Result<(), StorageError> {
    let Some(head) = stored_head(conn)? else {
        return Ok(());
    };
    let Some(mut backfill) = head.backfill else {
        return Ok(());
    };
    if backfill.told.iter().any(|told| told == approval_id) {
        return Ok(());
    }
    let sql = format!("SELECT rowid, {APPROVAL_COLUMNS} FROM plan_approvals WHERE id = ?1");
    let Some((rowid, approval)) = read_approvals(conn, &sql, params![approval_id])?
        .into_iter()
        .next()
    else {
        return Ok(());
    };
    if rowid <= backfill.next_approval || rowid > backfill.through_approval {
        return Ok(());
    }
    for (fact, at) in history_facts(&approval) {
        crate::transcript::append(
            conn,
            approval.session_id.as_str(),
            Role::System,
            &fact.to_string(),
            at,
            "recording an approval's audit history",
            Some(backfill.floor),
        )?;
    }
    backfill.told.push(approval_id.to_owned());
    write_head_with(conn, head.seq, &head.hash, Some(&backfill))
}

/// The facts an approval row still tells, marked backfilled, each with its
/// time.
fn history_facts(approval: &PlanApproval) -> Vec<(Value, UnixMs)> {
    approval_fact_list(true, approval, None, None)
        .into_iter()
        .map(|(mut fact, moment)| {
            if let Value::Object(fields) = &mut fact {
                fields.insert(BACKFILLED.to_owned(), Value::Bool(true));
            }
            let at = match moment {
                FactMoment::Submitted => approval.created_at,
                FactMoment::Decided => approval.decided_at.unwrap_or(approval.created_at),
            };
            (fact, at)
        })
        .collect()
}

fn read_approvals(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<(i64, PlanApproval)>, StorageError> {
    let failed = "reading approvals";
    let mut statement = conn.prepare_cached(sql).map_err(StorageError::sqlite(failed))?;
    let rows = statement
        .query_map(params, |row| {
            let rowid: i64 = row.get(0)?;
            Ok((rowid, crate::store::RawApproval::read_from(row, 1)?))
        })
        .map_err(StorageError::sqlite(failed))?;
    let mut approvals = Vec::new();
    for row in rows {
        let (rowid, raw) = row.map_err(StorageError::sqlite(failed))?;
        approvals.push((rowid, raw.into_stored()?.approval));
    }
    Ok(approvals)
}

/// The audited entries without a seq whose ids are in `(after, through]`,
/// in row order, at most `limit`.
fn unnumbered_entries(
    conn: &Connection,
    after: i64,
    through: i64,
    limit: i64,
) -> Result<Vec<(i64, String, String, i64)>, StorageError> {
    let sql = format!(
        "SELECT id, session_id, content_json, created_at FROM transcript_entries \
         WHERE id > ?1 AND id <= ?2 AND role IN ('tool', 'system') AND json_valid(content_json) \
           AND json_extract(content_json, '$.type') IN ({}) \
           AND json_extract(content_json, '$.audit.seq') IS NULL ORDER BY id LIMIT ?3",
        crate::chain::types_list()
    );
    let failed = "numbering the audit history";
    conn.prepare_cached(&sql)
        .and_then(|mut statement| {
            statement
                .query_map(params![after, through, limit], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                })?
                .collect()
        })
        .map_err(StorageError::sqlite(failed))
}

/// Numbers entries in place, in the order given, after `head`.
fn number_in_place(
    conn: &Connection,
    head: &mut (u64, String),
    entries: Vec<(i64, String, String, i64)>,
    backfilled: bool,
    told: Option<&mut Vec<String>>,
) -> Result<(), StorageError> {
    let mut told = told;
    for (id, session, text, at) in entries {
        let Ok(Value::Object(mut content)) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        if let (Some(told), Some(approval)) = (
            told.as_deref_mut(),
            content.get("approvalId").and_then(Value::as_str),
        ) && !told.iter().any(|known| known == approval)
        {
            told.push(approval.to_owned());
        }
        if backfilled {
            content.insert(BACKFILLED.to_owned(), Value::Bool(true));
        }
        let numbered = number_after(head, &session, Value::Object(content), at)?;
        conn.prepare_cached("UPDATE transcript_entries SET content_json = ?1 WHERE id = ?2")
            .and_then(|mut statement| statement.execute(params![numbered.to_string(), id]))
            .map_err(StorageError::sqlite("numbering the audit history"))?;
    }
    Ok(())
}

/// One step of the numbering, inside `conn`'s transaction: `None` when
/// there is nothing (left) to number, else the progress after the step.
fn step(conn: &Connection) -> Result<Option<HistoryProgress>, StorageError> {
    let Some(stored) = stored_head(conn)? else {
        return Ok(None);
    };
    let Some(mut backfill) = stored.backfill else {
        return Ok(None);
    };
    let mut head = (stored.seq, stored.hash);
    if backfill.next_entry < backfill.through_entry {
        // The history's own entries, numbered in place, a window of ids at
        // a time.
        let until = (backfill.next_entry + STEP_ROWS * 4).min(backfill.through_entry);
        let entries = unnumbered_entries(conn, backfill.next_entry, until, i64::MAX)?;
        number_in_place(conn, &mut head, entries, true, Some(&mut backfill.told))?;
        backfill.next_entry = until;
    } else if backfill.next_approval < backfill.through_approval {
        // The facts of the approval rows the history's entries do not tell.
        let sql = format!(
            "SELECT rowid, {APPROVAL_COLUMNS} FROM plan_approvals \
             WHERE rowid > ?1 AND rowid <= ?2 ORDER BY rowid LIMIT ?3"
        );
        let approvals = read_approvals(
            conn,
            &sql,
            params![backfill.next_approval, backfill.through_approval, STEP_ROWS],
        )?;
        let last = approvals
            .last()
            .map_or(backfill.through_approval, |(rowid, _)| *rowid);
        for (_, approval) in approvals {
            if backfill.told.iter().any(|told| told == approval.id.as_str()) {
                continue;
            }
            for (fact, at) in history_facts(&approval) {
                let numbered = number_after(&mut head, approval.session_id.as_str(), fact, at)?;
                if backfill.next_id >= backfill.floor {
                    return Err(StorageError::InvalidValue {
                        column: "transcript_entries.id",
                        value: "no id left for the audit history".to_owned(),
                    });
                }
                crate::transcript::insert_at(
                    conn,
                    backfill.next_id,
                    approval.session_id.as_str(),
                    Role::System,
                    &numbered.to_string(),
                    at,
                )?;
                backfill.next_id += 1;
            }
        }
        backfill.next_approval = last;
    } else {
        // What was recorded meanwhile, in row order; the step that finds
        // no more ends the numbering in the same transaction, so nothing
        // recorded after it waits.
        let entries = unnumbered_entries(conn, backfill.floor - 1, i64::MAX, STEP_ROWS)?;
        let finished = (entries.len() as i64) < STEP_ROWS;
        number_in_place(conn, &mut head, entries, false, None)?;
        if finished {
            write_head_with(conn, head.0, &head.1, None)?;
            return Ok(Some(HistoryProgress {
                done: backfill.progress().total,
                total: backfill.progress().total,
            }));
        }
    }
    write_head_with(conn, head.0, &head.1, Some(&backfill))?;
    Ok(Some(backfill.progress()))
}

impl Store {
    /// Marks a big history of a database whose chain never began for
    /// [`Store::number_history_step`] (its own transaction); a small one,
    /// or a chain that began, is left as it is (the first host's fence
    /// numbers a small history at no noticeable cost). What `db migrate`
    /// does before it numbers.
    pub fn begin_audit_chain(&mut self) -> Result<(), StorageError> {
        if stored_head(&self.conn)?.is_some() {
            return Ok(());
        }
        self.guarded(|conn| {
            let transaction = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(StorageError::sqlite("beginning a write transaction"))?;
            if stored_head(&transaction)?.is_none() {
                begin_deferred(&transaction)?;
            }
            transaction
                .commit()
                .map_err(StorageError::sqlite("beginning the audit chain"))
        })
    }

    /// How far the numbering of a big history went, while it runs.
    pub fn history_numbering(&self) -> Result<Option<HistoryProgress>, StorageError> {
        Ok(stored_head(&self.conn)?
            .and_then(|head| head.backfill)
            .map(|backfill| backfill.progress()))
    }

    /// Numbers the next part of a big history in one short transaction:
    /// `None` once nothing is left (the chain is then whole), else how far
    /// it is.
    pub fn number_history_step(&mut self) -> Result<Option<HistoryProgress>, StorageError> {
        let numbered = self.guarded(|conn| {
            let transaction = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(StorageError::sqlite("beginning a write transaction"))?;
            let progress = step(&transaction)?;
            transaction
                .commit()
                .map_err(StorageError::sqlite("committing a step of the audit history"))?;
            Ok(progress)
        })?;
        // A step that ended the numbering reports the whole; the next one
        // finds nothing.
        Ok(numbered)
    }
}

/// Numbers a big history on a thread of its own, step by step, until it
/// is done or the numberer is dropped (after the step in flight); first it
/// settles the command runs an earlier host left, when the fence left
/// that to it ([`Store::settle_open_runs`]).
#[derive(Debug)]
pub struct HistoryNumberer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl HistoryNumberer {
    /// Starts numbering the database at `path` when its history awaits
    /// numbering; `None` when there is nothing to number.
    pub fn start_if_needed(path: impl Into<PathBuf>, store: &Store) -> Option<HistoryNumberer> {
        let numbering = store.history_numbering().ok().flatten().is_some();
        let settling = crate::audit::runs_pending(&store.conn).unwrap_or(false);
        if !numbering && !settling {
            return None;
        }
        let path = path.into();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("plan-audit-history".to_owned())
            .spawn(move || {
                let Ok((mut store, _)) = Store::open(&path) else {
                    return;
                };
                // The runs an earlier host left, first: they were not
                // scanned in the fence.
                if store.settle_open_runs().is_err() {
                    return;
                }
                while !flag.load(Ordering::SeqCst) {
                    match store.number_history_step() {
                        Ok(Some(_)) => {}
                        // Done, or a failure: the next host (or `db
                        // migrate`) goes on from where the head says.
                        Ok(None) | Err(_) => return,
                    }
                }
            })
            .ok()?;
        Some(HistoryNumberer {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for HistoryNumberer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
