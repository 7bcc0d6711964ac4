//! The audit chain: every audited fact of a database as one numbered,
//! hashed record (schema v10 unchanged), and the export cursor.
//!
//! An audited fact is a `transcript_entries` row whose `type` is one of
//! [`AUDITED_TYPES`]: the command audit, the tool-permission audit, and the
//! approval, execution and session-mode facts this module writes beside the
//! row changes of a transition (in the same transaction). Each such entry
//! carries, additively, `"audit": {"seq": N, "hash": "..."}`: `seq` numbers
//! the facts of the database without gaps, `hash` is
//! `SHA-256(previous hash as lowercase hex || canonical bytes)` (the first
//! record's previous hash is the empty string). The head of the chain and
//! the export cursor are keys of `settings` (`audit.chain.head`,
//! `audit.export.cursor`).
//!
//! A record's attributes are derived from the stored entry by one fixed
//! table ([`EVENTS`]); its canonical bytes are the compact JSON of
//! `{"attributes": {..}, "timeUnixMs": t}` with keys sorted, where the
//! attributes are the always-exported ones (confidential text only as its
//! SHA-256). So the chain can be recomputed from the database, and by a
//! third party from exported records alone. This module records, reads
//! and checks; it decides nothing about the checkpoint.

use std::collections::BTreeMap;

use plan_core::{ApprovalStatus, Effect, ExecutionState, PlanApproval, UnixMs};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::StorageError;
use crate::store::Store;
use crate::transcript::Role;

/// The settings key of the chain's head: `{"seq": N, "hash": "..."}`.
pub const AUDIT_HEAD_KEY: &str = "audit.chain.head";
/// The settings key of the export cursor: `{"seq": N, "entryId": id}`.
pub const AUDIT_CURSOR_KEY: &str = "audit.export.cursor";

/// The settings key of the database's identity: a JSON string, made once
/// by the first host of this build ([`Store::ensure_database_id`]) and
/// exported with every record, so a collector's file holding several
/// databases' records tells them apart.
pub const DATABASE_ID_KEY: &str = "audit.database.id";

/// The settings key of the export's health as its exporter last told it
/// (`{"state": "failing"|"ok", "lastError", "since"|"recoveredAt", ...}`),
/// for `db status`.
pub const AUDIT_EXPORT_STATUS_KEY: &str = "audit.export.status";

/// The attribute that holds a record's position in the chain.
pub const SEQ_ATTRIBUTE: &str = "plan_checkpoint.audit.seq";
/// The attribute that holds a record's chain hash.
pub const HASH_ATTRIBUTE: &str = "plan_checkpoint.audit.hash";
/// The attribute that names the event (also the record's event name).
pub const EVENT_ATTRIBUTE: &str = "event.name";

/// How one field of a stored entry becomes an attribute.
#[derive(Debug, Clone, Copy)]
enum FieldKind {
    /// The value itself (text, integer or boolean).
    Plain,
    /// Text that may be confidential: the attribute is its SHA-256; the
    /// text itself is content, exported only when the host says so, under
    /// the given attribute name.
    Hashed(&'static str),
}

/// One field of a stored entry (a JSON pointer) and its attribute.
#[derive(Debug, Clone, Copy)]
struct Field {
    pointer: &'static str,
    attribute: &'static str,
    kind: FieldKind,
}

const fn plain(pointer: &'static str, attribute: &'static str) -> Field {
    Field {
        pointer,
        attribute,
        kind: FieldKind::Plain,
    }
}

const fn hashed(pointer: &'static str, attribute: &'static str, content: &'static str) -> Field {
    Field {
        pointer,
        attribute,
        kind: FieldKind::Hashed(content),
    }
}

const APPROVAL: Field = plain("/approvalId", "plan_checkpoint.approval.id");
const EXECUTION: Field = plain("/executionId", "plan_checkpoint.execution.id");
const MODE: Field = plain("/permissionMode", "plan_checkpoint.permission_mode");
const ERROR: Field = plain("/errorCode", "plan_checkpoint.error.code");
const TURN: Field = plain("/turnId", "plan_checkpoint.turn.id");
const CALL: Field = plain("/callId", "plan_checkpoint.call.id");
const CHANNEL: Field = plain("/channel", "plan_checkpoint.channel");
/// The peer of a decision the web card relayed, `address:port` (facts
/// recorded before `client.port` existed).
const REMOTE: Field = plain("/remoteAddress", "client.address");
/// The peer's address alone (OTel's `client.address`).
const CLIENT_ADDRESS: Field = plain("/clientAddress", "client.address");
/// The peer's port (OTel's `client.port`).
const CLIENT_PORT: Field = plain("/clientPort", "client.port");
/// When the approval was created (its row's `created_at`).
const CREATED_AT: Field = plain("/createdAt", "plan_checkpoint.approval.created_at");
/// When it was decided, expired or interrupted (its row's `decided_at`).
const DECIDED_AT: Field = plain("/decidedAt", "plan_checkpoint.approval.decided_at");
const DECISION: Field = plain("/decision", "plan_checkpoint.decision");

const COMMAND: &[Field] = &[
    CALL,
    TURN,
    hashed(
        "/command",
        "plan_checkpoint.command.sha256",
        "plan_checkpoint.command.text",
    ),
    plain("/cwd", "plan_checkpoint.command.cwd"),
    plain("/shell/id", "plan_checkpoint.command.shell"),
    plain("/sandbox", "plan_checkpoint.command.sandbox"),
    plain("/network", "plan_checkpoint.command.network"),
    plain("/state", "plan_checkpoint.command.state"),
    plain("/exitCode", "plan_checkpoint.command.exit_code"),
    plain("/signal", "plan_checkpoint.command.signal"),
    ERROR,
    plain("/outputSha256", "plan_checkpoint.command.output_sha256"),
    plain("/stdoutBytes", "plan_checkpoint.command.stdout_bytes"),
    plain("/stderrBytes", "plan_checkpoint.command.stderr_bytes"),
    plain("/truncated", "plan_checkpoint.command.truncated"),
];

const TOOL: &[Field] = &[
    CALL,
    TURN,
    EXECUTION,
    plain("/tool", "plan_checkpoint.tool.name"),
    MODE,
    ERROR,
];

const EXECUTION_FIELDS: &[Field] = &[APPROVAL, EXECUTION, MODE, ERROR];

/// The entry field that marks a fact numbered after it was recorded
/// ([`begin_chain`]).
pub(crate) const BACKFILLED: &str = "backfilled";
/// Every event's field for [`BACKFILLED`].
const BACKFILLED_FIELD: Field = plain("/backfilled", "plan_checkpoint.audit.backfilled");

/// Every audited entry type: its event name and its fields, in one table.
/// The order of the fields does not matter (attributes are sorted).
pub const AUDITED_TYPES: &[&str] = &[
    "planSubmitted",
    "planApproved",
    "planRejected",
    "planExpired",
    "planInterrupted",
    "executionStarted",
    "executionCompleted",
    "executionInterrupted",
    "commandStarted",
    "commandEnded",
    "commandRefused",
    "toolConfirmRequested",
    "toolConfirmed",
    "toolDeclined",
    "toolAutoAllowed",
    "sessionModeChanged",
];

const EVENTS: &[(&str, &str, &[Field])] = &[
    (
        "planSubmitted",
        "plan_checkpoint.plan.submitted",
        &[
            APPROVAL,
            TURN,
            plain("/artifactPath", "plan_checkpoint.plan.path"),
            plain("/artifactSha256", "plan_checkpoint.plan.sha256"),
            plain("/artifactSize", "plan_checkpoint.plan.size"),
            plain("/expiresAt", "plan_checkpoint.deadline"),
            CREATED_AT,
            hashed(
                "/title",
                "plan_checkpoint.plan.title_sha256",
                "plan_checkpoint.plan.title",
            ),
            hashed(
                "/question",
                "plan_checkpoint.plan.question_sha256",
                "plan_checkpoint.plan.question",
            ),
        ],
    ),
    (
        "planApproved",
        "plan_checkpoint.plan.approved",
        &[
            APPROVAL,
            EXECUTION,
            DECISION,
            MODE,
            CHANNEL,
            REMOTE,
            CLIENT_ADDRESS,
            CLIENT_PORT,
            DECIDED_AT,
            plain("/artifactSha256", "plan_checkpoint.plan.sha256"),
        ],
    ),
    (
        "planRejected",
        "plan_checkpoint.plan.rejected",
        &[
            APPROVAL,
            DECISION,
            CHANNEL,
            REMOTE,
            CLIENT_ADDRESS,
            CLIENT_PORT,
            DECIDED_AT,
            plain("/artifactSha256", "plan_checkpoint.plan.sha256"),
        ],
    ),
    (
        "planExpired",
        "plan_checkpoint.plan.expired",
        &[APPROVAL, ERROR, DECIDED_AT],
    ),
    (
        "planInterrupted",
        "plan_checkpoint.plan.interrupted",
        &[APPROVAL, ERROR, DECIDED_AT],
    ),
    (
        "executionStarted",
        "plan_checkpoint.execution.started",
        EXECUTION_FIELDS,
    ),
    (
        "executionCompleted",
        "plan_checkpoint.execution.completed",
        EXECUTION_FIELDS,
    ),
    (
        "executionInterrupted",
        "plan_checkpoint.execution.interrupted",
        EXECUTION_FIELDS,
    ),
    ("commandStarted", "plan_checkpoint.command.started", COMMAND),
    ("commandEnded", "plan_checkpoint.command.ended", COMMAND),
    ("commandRefused", "plan_checkpoint.command.refused", COMMAND),
    (
        "toolConfirmRequested",
        "plan_checkpoint.tool.confirmation_requested",
        TOOL,
    ),
    ("toolConfirmed", "plan_checkpoint.tool.confirmed", TOOL),
    ("toolDeclined", "plan_checkpoint.tool.declined", TOOL),
    ("toolAutoAllowed", "plan_checkpoint.tool.auto_allowed", TOOL),
    (
        "sessionModeChanged",
        "plan_checkpoint.session.mode_changed",
        &[
            plain("/mode", "plan_checkpoint.session.mode"),
            MODE,
            plain("/previousMode", "plan_checkpoint.session.previous_mode"),
            plain(
                "/previousPermissionMode",
                "plan_checkpoint.session.previous_permission_mode",
            ),
        ],
    ),
];

/// The attributes that carry confidential text (exported only when the
/// host says so): never part of the canonical bytes.
pub const CONTENT_ATTRIBUTES: &[&str] = &[
    "plan_checkpoint.plan.text",
    "plan_checkpoint.plan.title",
    "plan_checkpoint.plan.question",
    "plan_checkpoint.command.text",
];

/// Attributes exported beside the chain's own under the names OpenTelemetry's
/// GenAI conventions give them, each a copy of a chained attribute (alias,
/// source). They are not part of the canonical bytes; a check of a
/// collector's copy holds each to its source.
pub const ALIAS_ATTRIBUTES: &[(&str, &str)] = &[
    ("gen_ai.conversation.id", "session.id"),
    ("gen_ai.tool.call.id", "plan_checkpoint.call.id"),
    ("gen_ai.tool.name", "plan_checkpoint.tool.name"),
];

/// Whether an exported attribute is part of a record's canonical bytes:
/// not its hash, not confidential content or what is said about cut
/// content (`<content attribute>.<detail>`), not an alias.
pub fn is_canonical_attribute(key: &str) -> bool {
    key != HASH_ATTRIBUTE
        && !CONTENT_ATTRIBUTES.iter().any(|content| {
            key == *content
                || key
                    .strip_prefix(content)
                    .is_some_and(|detail| detail.starts_with('.'))
        })
        && !ALIAS_ATTRIBUTES.iter().any(|(alias, _)| *alias == key)
}

/// One audited fact as the chain holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    /// Its position in the chain, from 1, without gaps.
    pub seq: u64,
    /// The stored chain hash (64 lowercase hex digits).
    pub hash: String,
    /// The `transcript_entries` row id.
    pub entry_id: i64,
    /// The event name (`plan_checkpoint.plan.approved`, ...).
    pub event: String,
    /// When it was recorded, Unix ms.
    pub time_unix_ms: UnixMs,
    /// The always-exported attributes, `audit.seq` and `event.name`
    /// included, `audit.hash` not: strings, integers and booleans.
    pub attributes: BTreeMap<String, Value>,
    /// Confidential text by attribute name (titles, questions, command text).
    pub content: BTreeMap<String, String>,
    /// What an exporter says about content it cut to bound a request
    /// (`<content attribute>.truncated`, `.sha256`, `.size`); empty as read.
    pub content_notes: BTreeMap<String, Value>,
    /// The session's workspace root, if it has one (for the resource).
    pub workspace_root: Option<String>,
}

impl AuditRecord {
    /// The canonical bytes the chain hashes.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        canonical_bytes(&self.attributes, self.time_unix_ms)
    }
}

/// The canonical bytes of a record: compact JSON, keys sorted, of its
/// always-exported attributes and its time.
pub fn canonical_bytes(attributes: &BTreeMap<String, Value>, time_unix_ms: UnixMs) -> Vec<u8> {
    let mut object = Map::new();
    object.insert(
        "attributes".to_owned(),
        Value::Object(
            attributes
                .iter()
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        ),
    );
    object.insert("timeUnixMs".to_owned(), Value::from(time_unix_ms));
    Value::Object(object).to_string().into_bytes()
}

/// `SHA-256(previous || canonical)`, lowercase hex; `previous` is the
/// previous record's hash as hex, or `""` for the first record.
pub fn chain_hash(previous: &str, canonical: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(previous.as_bytes());
    hasher.update(canonical);
    hex::encode(hasher.finalize())
}

fn sha256_hex(text: &str) -> String {
    crate::artifacts::sha256_hex(text.as_bytes())
}

/// What an entry says as a record: its event, its attributes and its
/// confidential text.
type Derived = (String, BTreeMap<String, Value>, BTreeMap<String, String>);

/// The record of a stored entry (without its hash), or `None` when the
/// entry is not an audited fact.
fn derive(seq: u64, session_id: &str, content: &Value) -> Option<Derived> {
    let kind = content.get("type")?.as_str()?;
    let (_, event, fields) = EVENTS.iter().find(|(name, _, _)| *name == kind)?;
    let mut attributes = BTreeMap::new();
    let mut text = BTreeMap::new();
    attributes.insert(EVENT_ATTRIBUTE.to_owned(), Value::from(*event));
    attributes.insert(SEQ_ATTRIBUTE.to_owned(), Value::from(seq));
    attributes.insert("session.id".to_owned(), Value::from(session_id));
    for field in fields.iter().chain([&BACKFILLED_FIELD]) {
        let Some(value) = content.pointer(field.pointer) else {
            continue;
        };
        match (field.kind, value) {
            (_, Value::Null | Value::Array(_) | Value::Object(_)) => {}
            (FieldKind::Hashed(name), Value::String(value)) => {
                attributes.insert(field.attribute.to_owned(), Value::from(sha256_hex(value)));
                text.insert(name.to_owned(), value.clone());
            }
            (FieldKind::Plain | FieldKind::Hashed(_), value @ (Value::String(_) | Value::Bool(_))) => {
                attributes.insert(field.attribute.to_owned(), value.clone());
            }
            (FieldKind::Plain | FieldKind::Hashed(_), Value::Number(number)) => {
                // Integers only: a fractional number is not an audited value.
                if let Some(integer) = number.as_i64() {
                    attributes.insert(field.attribute.to_owned(), Value::from(integer));
                }
            }
        }
    }
    Some(((*event).to_owned(), attributes, text))
}

/// The head of the chain: the last seq and its hash (`(0, "")` before the
/// first record).
fn read_head(conn: &Connection) -> Result<(u64, String), StorageError> {
    Ok(stored_head(conn)?
        .map(|head| (head.seq, head.hash))
        .unwrap_or_default())
}

/// The stored head: the last seq, its hash, and while a big history is
/// being numbered ([`crate::backfill`]), how far that went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) seq: u64,
    pub(crate) hash: String,
    pub(crate) backfill: Option<crate::backfill::Backfill>,
}

/// The stored head, or `None` when this database never began its chain.
pub(crate) fn stored_head(conn: &Connection) -> Result<Option<Head>, StorageError> {
    let text: Option<String> = conn
        .prepare_cached("SELECT value_json FROM settings WHERE key = ?1")
        .and_then(|mut statement| statement.query_row([AUDIT_HEAD_KEY], |row| row.get(0)).optional())
        .map_err(StorageError::sqlite("reading the audit chain head"))?;
    let Some(text) = text else {
        return Ok(None);
    };
    let invalid = || StorageError::InvalidValue {
        column: "settings.value_json (audit.chain.head)",
        value: text.chars().take(200).collect(),
    };
    let value: Value = serde_json::from_str(&text).map_err(|_| invalid())?;
    let seq = value.get("seq").and_then(Value::as_u64).ok_or_else(invalid)?;
    let hash = value.get("hash").and_then(Value::as_str).ok_or_else(invalid)?;
    let backfill = match value.get("backfill") {
        None | Some(Value::Null) => None,
        Some(state) => Some(serde_json::from_value(state.clone()).map_err(|_| invalid())?),
    };
    Ok(Some(Head {
        seq,
        hash: hash.to_owned(),
        backfill,
    }))
}

fn write_head(conn: &Connection, seq: u64, hash: &str) -> Result<(), StorageError> {
    write_head_with(conn, seq, hash, None)
}

/// Writes the head, with the numbering's progress while it runs.
pub(crate) fn write_head_with(
    conn: &Connection,
    seq: u64,
    hash: &str,
    backfill: Option<&crate::backfill::Backfill>,
) -> Result<(), StorageError> {
    let mut head = Map::new();
    head.insert("seq".to_owned(), Value::from(seq));
    head.insert("hash".to_owned(), Value::from(hash));
    if let Some(backfill) = backfill {
        head.insert(
            "backfill".to_owned(),
            serde_json::to_value(backfill).map_err(|error| StorageError::InvalidValue {
                column: "settings.value_json (audit.chain.head)",
                value: error.to_string(),
            })?,
        );
    }
    write_setting(
        conn,
        AUDIT_HEAD_KEY,
        &Value::Object(head),
        "moving the audit chain head",
    )
}

/// Begins the chain of a new database, which has no history to number.
pub(crate) fn begin_empty_chain(conn: &Connection) -> Result<(), StorageError> {
    write_head(conn, 0, "")
}

/// Begins the chain of a database that has none yet, inside `conn`'s
/// transaction, before the transaction changes any row: the audited facts
/// the database already holds (a database upgraded from a build without
/// the chain, or from v8) are numbered first, so `audit.seq` covers every
/// fact of the database without a gap. Each of them carries
/// `"backfilled": true` (exported as `plan_checkpoint.audit.backfilled`):
/// it was numbered and hashed after it was recorded.
///
/// In row order, first the transcript's audited entries that have no seq,
/// then, for each approval row without such entries (oldest first), the
/// facts its row still tells: its submission at `created_at`, and its
/// decision, expiry or interruption and its execution's latest state at
/// `decided_at`. Mode changes and confirmations the database never
/// recorded cannot be told and are not invented.
///
/// Does nothing, at the cost of one indexed read, once the chain began.
pub(crate) fn begin_chain(conn: &Connection) -> Result<(), StorageError> {
    if stored_head(conn)?.is_some() {
        return Ok(());
    }
    // A big history is numbered later, in steps, by `db migrate` or by the
    // host in the background ([`crate::backfill`]): never inside the
    // transaction that a host's first answer waits for.
    if crate::backfill::begin_deferred(conn)? {
        return Ok(());
    }
    write_head(conn, 0, "")?;
    let sql = format!(
        "SELECT t.id, t.session_id, t.content_json, t.created_at \
         FROM transcript_entries t \
         WHERE t.role IN ('tool', 'system') AND json_valid(t.content_json) \
           AND json_extract(t.content_json, '$.type') IN ({}) \
           AND json_extract(t.content_json, '$.audit.seq') IS NULL ORDER BY t.id",
        types_list()
    );
    let failed = "numbering the audit history";
    let entries: Vec<(i64, String, String, i64)> = conn
        .prepare(&sql)
        .and_then(|mut statement| {
            statement
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)))?
                .collect()
        })
        .map_err(StorageError::sqlite(failed))?;
    let mut told = std::collections::HashSet::new();
    for (id, session, text, at) in entries {
        let Ok(Value::Object(mut content)) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        if let Some(approval) = content.get("approvalId").and_then(Value::as_str) {
            told.insert(approval.to_owned());
        }
        content.insert(BACKFILLED.to_owned(), Value::Bool(true));
        let numbered = number(conn, read_head(conn)?, &session, Value::Object(content), at)?;
        conn.prepare_cached("UPDATE transcript_entries SET content_json = ?1 WHERE id = ?2")
            .and_then(|mut statement| statement.execute(params![numbered.to_string(), id]))
            .map_err(StorageError::sqlite(failed))?;
    }
    crate::store::for_each_approval(conn, |approval| {
        if told.contains(approval.id.as_str()) {
            return Ok(());
        }
        for (mut fact, moment) in approval_fact_list(true, approval, None, None) {
            if let Value::Object(fields) = &mut fact {
                fields.insert(BACKFILLED.to_owned(), Value::Bool(true));
            }
            let at = match moment {
                FactMoment::Submitted => approval.created_at,
                FactMoment::Decided => approval.decided_at.unwrap_or(approval.created_at),
            };
            append_fact(
                conn,
                approval.session_id.as_str(),
                Role::System,
                fact,
                at,
                "recording an approval's audit history",
            )?;
        }
        Ok(())
    })
}

/// Gives `content` the chain's next seq and hash (its `audit` field) after
/// `head`, the stored head, and moves the head; returns the numbered
/// content.
fn number(
    conn: &Connection,
    (last, previous): (u64, String),
    session_id: &str,
    content: Value,
    at: UnixMs,
) -> Result<Value, StorageError> {
    let mut head = (last, previous);
    let content = number_after(&mut head, session_id, content, at)?;
    write_head(conn, head.0, &head.1)?;
    Ok(content)
}

/// Gives `content` the seq and hash that follow `head`, and moves `head`
/// (in memory: the caller writes it).
pub(crate) fn number_after(
    head: &mut (u64, String),
    session_id: &str,
    mut content: Value,
    at: UnixMs,
) -> Result<Value, StorageError> {
    let (last, previous) = (head.0, head.1.clone());
    let seq = last + 1;
    let hash = match derive(seq, session_id, &content) {
        Some((_, attributes, _)) => chain_hash(&previous, &canonical_bytes(&attributes, at)),
        None => {
            return Err(StorageError::InvalidValue {
                column: "transcript_entries.content_json",
                value: "an audited fact of an unknown type".to_owned(),
            });
        }
    };
    if let Value::Object(fields) = &mut content {
        let mut audit = Map::new();
        audit.insert("seq".to_owned(), Value::from(seq));
        audit.insert("hash".to_owned(), Value::from(hash.clone()));
        fields.insert("audit".to_owned(), Value::Object(audit));
    }
    *head = (seq, hash);
    Ok(content)
}

fn write_setting(
    conn: &Connection,
    key: &str,
    value: &Value,
    what: &'static str,
) -> Result<(), StorageError> {
    conn.prepare_cached(
        "INSERT INTO settings (key, value_json) VALUES (?1, ?2) \
         ON CONFLICT (key) DO UPDATE SET value_json = excluded.value_json",
    )
    .and_then(|mut statement| statement.execute(params![key, value.to_string()]))
    .map_err(StorageError::sqlite(what))?;
    Ok(())
}

/// Appends an audited fact as the session's next transcript entry, with
/// the chain's next seq and hash, and moves the head; inside `conn`'s
/// transaction. `content` is the entry (an object with its `type`). The
/// first fact of a database begins its chain ([`begin_chain`]).
pub(crate) fn append_fact(
    conn: &Connection,
    session_id: &str,
    role: Role,
    content: Value,
    at: UnixMs,
    what: &'static str,
) -> Result<(), StorageError> {
    // One read of the head: it exists once the chain began.
    let head = match stored_head(conn)? {
        Some(head) => head,
        None => {
            begin_chain(conn)?;
            stored_head(conn)?.unwrap_or_default()
        }
    };
    if let Some(backfill) = &head.backfill {
        // The history before it is still being numbered: the fact waits,
        // unnumbered, after the ids the history's facts will take, and is
        // numbered after them.
        return crate::transcript::append(
            conn,
            session_id,
            role,
            &content.to_string(),
            at,
            what,
            Some(backfill.floor),
        );
    }
    let content = number(conn, (head.seq, head.hash), session_id, content, at)?;
    crate::transcript::append(conn, session_id, role, &content.to_string(), at, what, None)
}

/// The least row id a new transcript entry may take: while a big history
/// is numbered, the ids its approvals' facts will take are kept free.
pub(crate) fn id_floor(conn: &Connection) -> Result<Option<i64>, StorageError> {
    Ok(stored_head(conn)?
        .and_then(|head| head.backfill)
        .map(|backfill| backfill.floor))
}

/// Where a decided approval's decision came from, for its fact.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FactSource<'note> {
    pub(crate) channel: &'static str,
    /// The peer of a relayed decision; `None` for the host's own client.
    pub(crate) remote_address: Option<&'note str>,
}

fn object(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(
        pairs
            .into_iter()
            .filter(|(_, value)| !value.is_null())
            .map(|(key, value)| (key.to_owned(), value))
            .collect(),
    )
}

fn text<T: AsRef<str>>(value: Option<T>) -> Value {
    value.map_or(Value::Null, |value| Value::from(value.as_ref()))
}

/// The facts of one approval write: its submission, its decision, expiry
/// or interruption, and its execution's start and end.
pub(crate) fn approval_facts(
    conn: &Connection,
    inserted: bool,
    approval: &PlanApproval,
    before: Option<(ApprovalStatus, Option<ExecutionState>)>,
    source: Option<FactSource<'_>>,
    now: UnixMs,
) -> Result<(), StorageError> {
    for (fact, _) in approval_fact_list(inserted, approval, before, source) {
        append_fact(
            conn,
            approval.session_id.as_str(),
            Role::System,
            fact,
            now,
            "recording an approval audit fact",
        )?;
    }
    Ok(())
}

/// A relayed decision's peer as OTel names it: `client.address` without
/// the port, `client.port` beside it (`[::1]:40000` is `::1` and 40000).
/// A peer that is not `address:port` is the address as it is.
fn split_peer(peer: &str) -> (&str, Option<u16>) {
    match peer.parse::<std::net::SocketAddr>() {
        Ok(socket) => {
            let port = socket.port();
            let host = peer
                .rsplit_once(':')
                .map_or(peer, |(host, _)| host)
                .trim_start_matches('[')
                .trim_end_matches(']');
            (host, Some(port))
        }
        Err(_) => (peer, None),
    }
}

/// Which moment of an approval a fact records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FactMoment {
    /// Its submission.
    Submitted,
    /// Its decision, expiry or interruption, or its execution's progress.
    Decided,
}

/// The facts [`approval_facts`] records, each with the moment it records.
pub(crate) fn approval_fact_list(
    inserted: bool,
    approval: &PlanApproval,
    before: Option<(ApprovalStatus, Option<ExecutionState>)>,
    source: Option<FactSource<'_>>,
) -> Vec<(Value, FactMoment)> {
    let id = Value::from(approval.id.as_str());
    let artifact = approval.artifact.as_ref();
    let mut facts = Vec::new();
    if inserted {
        facts.push((
            object(vec![
                ("type", "planSubmitted".into()),
                ("approvalId", id.clone()),
                ("turnId", approval.turn_id.as_str().into()),
                ("title", approval.title.as_str().into()),
                ("question", approval.question.as_str().into()),
                ("artifactPath", text(artifact.map(|a| a.path.as_str()))),
                ("artifactSha256", text(artifact.map(|a| a.sha256.as_str()))),
                (
                    "artifactSize",
                    artifact.map_or(Value::Null, |a| Value::from(a.size)),
                ),
                ("expiresAt", approval.expires_at.into()),
                ("createdAt", approval.created_at.into()),
            ]),
            FactMoment::Submitted,
        ));
    }
    let (status_before, execution_before) = before.unwrap_or((ApprovalStatus::Pending, None));
    let peer = source.and_then(|s| s.remote_address).map(split_peer);
    if approval.status != status_before || inserted {
        let kind = match approval.status {
            ApprovalStatus::Approved => Some("planApproved"),
            ApprovalStatus::Rejected => Some("planRejected"),
            ApprovalStatus::Expired => Some("planExpired"),
            ApprovalStatus::Interrupted => Some("planInterrupted"),
            ApprovalStatus::Pending => None,
        };
        if let Some(kind) = kind {
            let decision = match approval.status {
                ApprovalStatus::Approved | ApprovalStatus::Rejected => Value::from(approval.status.as_str()),
                ApprovalStatus::Expired | ApprovalStatus::Interrupted | ApprovalStatus::Pending => {
                    Value::Null
                }
            };
            facts.push((
                object(vec![
                    ("type", kind.into()),
                    ("approvalId", id.clone()),
                    (
                        "executionId",
                        text(approval.execution_id.as_ref().map(|e| e.as_str())),
                    ),
                    ("decision", decision),
                    (
                        "permissionMode",
                        text(approval.permission_mode.map(|m| m.as_str())),
                    ),
                    ("errorCode", text(approval.error_code.map(|c| c.as_str()))),
                    ("artifactSha256", text(artifact.map(|a| a.sha256.as_str()))),
                    ("channel", text(source.map(|s| s.channel))),
                    ("clientAddress", text(peer.map(|(address, _)| address))),
                    (
                        "clientPort",
                        peer.and_then(|(_, port)| port).map_or(Value::Null, Value::from),
                    ),
                    ("decidedAt", approval.decided_at.map_or(Value::Null, Value::from)),
                ]),
                FactMoment::Decided,
            ));
        }
    }
    if approval.execution_state != execution_before {
        let kind = match approval.execution_state {
            Some(ExecutionState::Running) => Some("executionStarted"),
            Some(ExecutionState::Completed) => Some("executionCompleted"),
            Some(ExecutionState::Interrupted) => Some("executionInterrupted"),
            Some(ExecutionState::Queued) | None => None,
        };
        if let Some(kind) = kind {
            facts.push((
                object(vec![
                    ("type", kind.into()),
                    ("approvalId", id.clone()),
                    (
                        "executionId",
                        text(approval.execution_id.as_ref().map(|e| e.as_str())),
                    ),
                    (
                        "permissionMode",
                        text(approval.permission_mode.map(|m| m.as_str())),
                    ),
                    ("errorCode", text(approval.error_code.map(|c| c.as_str()))),
                ]),
                FactMoment::Decided,
            ));
        }
    }
    facts
}

/// The fact of a session's mode change, when `effect` saves a session whose
/// mode or permission mode differs from the stored one. Reads the stored
/// row, so it runs before the row is written.
pub(crate) fn mode_change_fact(conn: &Connection, effect: &Effect, now: UnixMs) -> Result<(), StorageError> {
    let Effect::SaveSession(session) = effect else {
        return Ok(());
    };
    let stored: Option<(String, String)> = conn
        .prepare_cached("SELECT mode, permission_mode FROM sessions WHERE id = ?1")
        .and_then(|mut statement| {
            statement
                .query_row([session.id.as_str()], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()
        })
        .map_err(StorageError::sqlite("reading a session's mode"))?;
    let Some((mode, permission_mode)) = stored else {
        return Ok(());
    };
    if mode == session.mode.as_str() && permission_mode == session.permission_mode.as_str() {
        return Ok(());
    }
    let fact = object(vec![
        ("type", "sessionModeChanged".into()),
        ("mode", session.mode.as_str().into()),
        ("permissionMode", session.permission_mode.as_str().into()),
        ("previousMode", mode.into()),
        ("previousPermissionMode", permission_mode.into()),
    ]);
    append_fact(
        conn,
        session.id.as_str(),
        Role::System,
        fact,
        now,
        "recording a mode change",
    )
}

/// The persistent export cursor: the last record a collector accepted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuditCursor {
    /// Its seq (0 before the first accepted batch).
    pub seq: u64,
    /// Its `transcript_entries` row id (0 before the first).
    pub entry_id: i64,
}

/// One finding of a chain verification, named by seq.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum AuditFinding {
    /// The record with this seq differs from what was hashed (or exported).
    Changed {
        /// Its seq.
        seq: u64,
    },
    /// No record has this seq any more.
    Removed {
        /// The missing seq.
        seq: u64,
    },
    /// A record that was not part of the chain: a repeated or out-of-order
    /// seq, a seq the collector never saw within what it kept, or an
    /// audited entry without one after the chain began (`seq` is then the
    /// seq it follows).
    Inserted {
        /// Its seq (or the seq it follows, when it has none).
        seq: u64,
        /// Whether it carries no seq at all.
        unnumbered: bool,
    },
    /// A `plan_approvals` row that disagrees with the state its chained
    /// facts give it (an edited mode or status, say), a row the chain never
    /// recorded (`field` = `row`, `chain` = `absent`) or an approval whose
    /// row is gone (`row` = `absent`).
    Row {
        /// The seq of the approval's latest record (0 when it has none).
        seq: u64,
        /// The approval's id.
        approval_id: String,
        /// The column (`status`, `permission_mode`, ...), or `row`.
        field: &'static str,
        /// The value the chain gives it (`none` for NULL).
        chain: String,
        /// The value the row holds (`none` for NULL).
        row: String,
    },
}

impl AuditFinding {
    /// The seq the finding names.
    pub fn seq(&self) -> u64 {
        match self {
            AuditFinding::Changed { seq }
            | AuditFinding::Removed { seq }
            | AuditFinding::Inserted { seq, .. }
            | AuditFinding::Row { seq, .. } => *seq,
        }
    }
}

impl std::fmt::Display for AuditFinding {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuditFinding::Changed { seq } => write!(formatter, "seq {seq}: changed"),
            AuditFinding::Removed { seq } => write!(formatter, "seq {seq}: removed"),
            AuditFinding::Inserted {
                seq,
                unnumbered: false,
            } => write!(formatter, "seq {seq}: inserted"),
            AuditFinding::Inserted {
                seq,
                unnumbered: true,
            } => {
                write!(formatter, "seq {seq}: inserted (an unnumbered record after it)")
            }
            AuditFinding::Row {
                seq,
                approval_id,
                field,
                chain,
                row,
            } => {
                let id = approval_id;
                match (*field, chain.as_str(), row.as_str()) {
                    ("row", "absent", _) => write!(
                        formatter,
                        "approval {id}: its row is not in the audit chain (inserted behind the host's back)"
                    ),
                    ("row", _, "absent") => {
                        write!(formatter, "seq {seq}: approval {id}: its row was removed")
                    }
                    (_, _, _) => write!(
                        formatter,
                        "seq {seq}: approval {id}: {field} is {row} in the row, {chain} in the chain"
                    ),
                }
            }
        }
    }
}

/// What reading the chain's entries found, row by row.
#[derive(Debug, Clone)]
pub(crate) enum ChainRow {
    /// An entry with its seq and stored hash, and the record derived from it.
    Numbered(AuditRecord),
    /// An audited entry without a seq, after the chain began.
    Unnumbered {
        /// The highest seq of the numbered entries before it.
        after: u64,
    },
}

/// Reads a stored entry as a record; `None` when it has no seq.
fn read_record(
    entry_id: i64,
    session_id: &str,
    text: &str,
    at: UnixMs,
    workspace_root: Option<String>,
) -> Result<Option<AuditRecord>, StorageError> {
    let value: Value = serde_json::from_str(text).map_err(|_| StorageError::InvalidValue {
        column: "transcript_entries.content_json",
        value: text.chars().take(200).collect(),
    })?;
    let Some(audit) = value.get("audit") else {
        return Ok(None);
    };
    let (Some(seq), Some(hash)) = (
        audit.get("seq").and_then(Value::as_u64),
        audit.get("hash").and_then(Value::as_str),
    ) else {
        return Ok(None);
    };
    let Some((event, attributes, content)) = derive(seq, session_id, &value) else {
        return Ok(None);
    };
    Ok(Some(AuditRecord {
        seq,
        hash: hash.to_owned(),
        entry_id,
        event,
        time_unix_ms: at,
        attributes,
        content,
        content_notes: BTreeMap::new(),
        workspace_root,
    }))
}

/// The SQL list of audited types.
pub(crate) fn types_list() -> String {
    AUDITED_TYPES
        .iter()
        .map(|kind| format!("'{kind}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An audited entry's columns: row id, session, content, time and the
/// session's workspace root.
type EntryColumns = (i64, String, String, i64, Option<String>);

fn entry_columns(row: &rusqlite::Row<'_>) -> rusqlite::Result<EntryColumns> {
    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?))
}

impl Store {
    /// The head of the chain: the last seq and its hash (`(0, "")` while
    /// nothing was recorded).
    pub fn audit_head(&self) -> Result<(u64, String), StorageError> {
        read_head(&self.conn)
    }

    /// The database's identity ([`DATABASE_ID_KEY`]), if a host made one.
    pub fn database_id(&self) -> Result<Option<String>, StorageError> {
        let text: Option<String> = self
            .conn
            .prepare_cached("SELECT value_json FROM settings WHERE key = ?1")
            .and_then(|mut statement| {
                statement
                    .query_row([DATABASE_ID_KEY], |row| row.get(0))
                    .optional()
            })
            .map_err(StorageError::sqlite("reading the database's identity"))?;
        Ok(text.and_then(|text| match serde_json::from_str::<Value>(&text) {
            Ok(Value::String(id)) => Some(id),
            Ok(_) | Err(_) => None,
        }))
    }

    /// Records `fresh` as the database's identity unless it has one, and
    /// returns the identity it has. The host calls it once when it opens,
    /// with a new random id.
    pub fn ensure_database_id(&mut self, fresh: &str) -> Result<String, StorageError> {
        if let Some(id) = self.database_id()? {
            return Ok(id);
        }
        self.guarded(|conn| {
            conn.prepare_cached(
                "INSERT INTO settings (key, value_json) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
            )
            .and_then(|mut statement| {
                statement.execute(params![DATABASE_ID_KEY, Value::from(fresh).to_string()])
            })
            .map_err(StorageError::sqlite("recording the database's identity"))
        })?;
        Ok(self.database_id()?.unwrap_or_else(|| fresh.to_owned()))
    }

    /// The export's health as its exporter last recorded it.
    pub fn export_status(&self) -> Result<Option<Value>, StorageError> {
        let text: Option<String> = self
            .conn
            .prepare_cached("SELECT value_json FROM settings WHERE key = ?1")
            .and_then(|mut statement| {
                statement
                    .query_row([AUDIT_EXPORT_STATUS_KEY], |row| row.get(0))
                    .optional()
            })
            .map_err(StorageError::sqlite("reading the audit export's status"))?;
        Ok(text.and_then(|text| serde_json::from_str(&text).ok()))
    }

    /// Records the export's health (its own small transaction; the
    /// exporter calls it when the export starts failing or recovers).
    pub fn set_export_status(&mut self, status: &Value) -> Result<(), StorageError> {
        self.guarded(|conn| {
            write_setting(
                conn,
                AUDIT_EXPORT_STATUS_KEY,
                status,
                "recording the audit export's status",
            )
        })
    }

    /// The export cursor.
    pub fn audit_cursor(&self) -> Result<AuditCursor, StorageError> {
        let text: Option<String> = self
            .conn
            .prepare_cached("SELECT value_json FROM settings WHERE key = ?1")
            .and_then(|mut statement| {
                statement
                    .query_row([AUDIT_CURSOR_KEY], |row| row.get(0))
                    .optional()
            })
            .map_err(StorageError::sqlite("reading the audit export cursor"))?;
        let Some(text) = text else {
            return Ok(AuditCursor::default());
        };
        let value: Value = serde_json::from_str(&text).map_err(|_| StorageError::InvalidValue {
            column: "settings.value_json (audit.export.cursor)",
            value: text.clone(),
        })?;
        match (
            value.get("seq").and_then(Value::as_u64),
            value.get("entryId").and_then(Value::as_i64),
        ) {
            (Some(seq), Some(entry_id)) => Ok(AuditCursor { seq, entry_id }),
            (_, _) => Err(StorageError::InvalidValue {
                column: "settings.value_json (audit.export.cursor)",
                value: text,
            }),
        }
    }

    /// Moves the export cursor to `to`, only forward: a cursor already at or
    /// past it is left alone. Its own transaction.
    pub fn advance_audit_cursor(&mut self, to: AuditCursor) -> Result<(), StorageError> {
        self.guarded(|conn| {
            let transaction = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(StorageError::sqlite("beginning a write transaction"))?;
            let current: Option<String> = transaction
                .query_row(
                    "SELECT value_json FROM settings WHERE key = ?1",
                    [AUDIT_CURSOR_KEY],
                    |row| row.get(0),
                )
                .optional()
                .map_err(StorageError::sqlite("reading the audit export cursor"))?;
            let current_seq = current
                .and_then(|text| serde_json::from_str::<Value>(&text).ok())
                .and_then(|value| value.get("seq").and_then(Value::as_u64))
                .unwrap_or(0);
            if current_seq < to.seq {
                let mut cursor = Map::new();
                cursor.insert("seq".to_owned(), Value::from(to.seq));
                cursor.insert("entryId".to_owned(), Value::from(to.entry_id));
                write_setting(
                    &transaction,
                    AUDIT_CURSOR_KEY,
                    &Value::Object(cursor),
                    "moving the audit export cursor",
                )?;
            }
            transaction
                .commit()
                .map_err(StorageError::sqlite("committing the audit export cursor"))
        })
    }

    /// Up to `limit` records after `cursor`, in seq order. Reads forward
    /// from the cursor's row id; when that does not continue the chain (a
    /// row id reused after deletions), it falls back to reading every
    /// numbered entry.
    pub fn audit_records_after(
        &self,
        cursor: AuditCursor,
        limit: u32,
    ) -> Result<Vec<AuditRecord>, StorageError> {
        let fast = self.numbered_records(Some(cursor.entry_id), Some(cursor.seq), limit)?;
        if fast.first().is_none_or(|record| record.seq == cursor.seq + 1) {
            let (head, _) = self.audit_head()?;
            if !fast.is_empty() || head <= cursor.seq {
                return Ok(fast);
            }
        }
        let mut all = self.numbered_records(None, Some(cursor.seq), u32::MAX)?;
        all.sort_by_key(|record| record.seq);
        all.truncate(limit as usize);
        Ok(all)
    }

    fn numbered_records(
        &self,
        after_entry: Option<i64>,
        after_seq: Option<u64>,
        limit: u32,
    ) -> Result<Vec<AuditRecord>, StorageError> {
        let sql = "SELECT t.id, t.session_id, t.content_json, t.created_at, s.workspace_root \
             FROM transcript_entries t LEFT JOIN sessions s ON s.id = t.session_id \
             WHERE t.id > ?1 AND t.role IN ('tool', 'system') AND json_valid(t.content_json) \
               AND json_extract(t.content_json, '$.audit.seq') > ?2 \
             ORDER BY t.id LIMIT ?3";
        let failed = "reading audit records";
        let mut statement = self
            .conn
            .prepare_cached(sql)
            .map_err(StorageError::sqlite(failed))?;
        let rows = statement
            .query_map(
                params![
                    after_entry.unwrap_or(i64::MIN),
                    i64::try_from(after_seq.unwrap_or(0)).unwrap_or(i64::MAX),
                    i64::from(limit)
                ],
                entry_columns,
            )
            .map_err(StorageError::sqlite(failed))?;
        let mut records = Vec::new();
        for row in rows {
            let (id, session, text, at, root) = row.map_err(StorageError::sqlite(failed))?;
            records.extend(read_record(id, &session, &text, at, root)?);
        }
        Ok(records)
    }

    /// Every audited entry in row order, numbered or not (entries without a
    /// seq before the chain's first record are history that no host has
    /// numbered yet, [`begin_chain`], and are left out).
    pub(crate) fn chain_rows(&self) -> Result<Vec<ChainRow>, StorageError> {
        let sql = format!(
            "SELECT t.id, t.session_id, t.content_json, t.created_at, s.workspace_root \
             FROM transcript_entries t LEFT JOIN sessions s ON s.id = t.session_id \
             WHERE t.role IN ('tool', 'system') AND json_valid(t.content_json) \
               AND json_extract(t.content_json, '$.type') IN ({}) ORDER BY t.id",
            types_list()
        );
        let failed = "reading the audit chain";
        let mut statement = self.conn.prepare(&sql).map_err(StorageError::sqlite(failed))?;
        let rows = statement
            .query_map([], entry_columns)
            .map_err(StorageError::sqlite(failed))?;
        let mut found = Vec::new();
        let mut last: Option<u64> = None;
        for row in rows {
            let (id, session, text, at, root) = row.map_err(StorageError::sqlite(failed))?;
            match read_record(id, &session, &text, at, root)? {
                Some(record) => {
                    last = Some(last.map_or(record.seq, |last| last.max(record.seq)));
                    found.push(ChainRow::Numbered(record));
                }
                None => {
                    if let Some(after) = last {
                        found.push(ChainRow::Unnumbered { after });
                    }
                }
            }
        }
        Ok(found)
    }

    /// Every numbered record, in row order (for comparisons and exports).
    pub fn audit_records(&self) -> Result<Vec<AuditRecord>, StorageError> {
        Ok(self
            .chain_rows()?
            .into_iter()
            .filter_map(|row| match row {
                ChainRow::Numbered(record) => Some(record),
                ChainRow::Unnumbered { .. } => None,
            })
            .collect())
    }

    /// Recomputes the chain from the database: every record's hash from the
    /// previous record's stored hash and its own canonical bytes, the seqs
    /// without gaps up to the head, and every `plan_approvals` row against
    /// the state its chained facts give it ([`AuditFinding::Row`]). Returns how many records it checked and
    /// what it found, ordered by seq.
    pub fn verify_audit_chain(&self) -> Result<(u64, Vec<AuditFinding>), StorageError> {
        let (head, _) = self.audit_head()?;
        // While a big history is numbered, the entries not numbered yet and
        // the rows their facts will tell are not findings: the numbered
        // part is checked.
        let numbering = stored_head(&self.conn)?.is_some_and(|head| head.backfill.is_some());
        let rows = self.chain_rows()?;
        let mut findings = Vec::new();
        let mut expected = 1_u64;
        let mut previous: Option<String> = Some(String::new());
        let mut checked = 0_u64;
        let mut replay = crate::rows::ApprovalReplay::default();
        for row in rows {
            let record = match row {
                ChainRow::Numbered(record) => {
                    replay.record(&record);
                    record
                }
                ChainRow::Unnumbered { after } => {
                    if !numbering {
                        findings.push(AuditFinding::Inserted {
                            seq: after,
                            unnumbered: true,
                        });
                    }
                    continue;
                }
            };
            checked += 1;
            if record.seq < expected {
                findings.push(AuditFinding::Inserted {
                    seq: record.seq,
                    unnumbered: false,
                });
                continue;
            }
            if record.seq > expected {
                findings.extend((expected..record.seq).map(|seq| AuditFinding::Removed { seq }));
                // Its predecessor is gone: its link cannot be checked.
                previous = None;
            }
            if let Some(previous) = &previous
                && chain_hash(previous, &record.canonical_bytes()) != record.hash
            {
                findings.push(AuditFinding::Changed { seq: record.seq });
            }
            previous = Some(record.hash.clone());
            expected = record.seq + 1;
        }
        findings.extend((expected..=head).map(|seq| AuditFinding::Removed { seq }));
        // Every approval row against the state its facts give it.
        if !numbering {
            let mut present = std::collections::HashSet::new();
            crate::store::for_each_approval(&self.conn, |approval| {
                present.insert(approval.id.as_str().to_owned());
                findings.extend(replay.check(approval));
                Ok(())
            })?;
            findings.extend(replay.removed(&present));
        }
        findings.sort();
        findings.dedup();
        findings.sort_by_key(AuditFinding::seq);
        Ok((checked, findings))
    }

    /// The approvals' states as their chained facts give them, to check
    /// rows against ([`crate::ApprovalReplay::check`]).
    pub fn approval_replay(&self) -> Result<crate::ApprovalReplay, StorageError> {
        let mut replay = crate::ApprovalReplay::default();
        for row in self.chain_rows()? {
            if let ChainRow::Numbered(record) = row {
                replay.record(&record);
            }
        }
        Ok(replay)
    }

    /// The latest record of each approval (its decision, expiry,
    /// interruption or its execution's latest state), by approval id: the
    /// seq and hash `approvals export` carries.
    pub fn approval_audit_heads(&self) -> Result<BTreeMap<String, (u64, String)>, StorageError> {
        // Only the three values are read, row by row: one entry per
        // approval is held, not the history.
        let failed = "reading the approvals' audit records";
        let mut statement = self
            .conn
            .prepare(
                "SELECT json_extract(content_json, '$.approvalId'), json_extract(content_json, '$.audit.seq'), \
                 json_extract(content_json, '$.audit.hash') FROM transcript_entries \
                 WHERE role = 'system' AND json_valid(content_json) \
                   AND json_type(content_json, '$.approvalId') = 'text' \
                   AND json_type(content_json, '$.audit.seq') = 'integer' \
                   AND json_type(content_json, '$.audit.hash') = 'text' \
                 ORDER BY id",
            )
            .map_err(StorageError::sqlite(failed))?;
        let rows = statement
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, i64>(1)?,
                    row.get::<_, String>(2)?,
                ))
            })
            .map_err(StorageError::sqlite(failed))?;
        let mut heads = BTreeMap::new();
        for row in rows {
            let (id, seq, hash) = row.map_err(StorageError::sqlite(failed))?;
            heads.insert(id, (u64::try_from(seq).unwrap_or(0), hash));
        }
        Ok(heads)
    }
}
