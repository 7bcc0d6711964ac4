//! The inspection commands (`db status`, `approvals ...`) and `db migrate`.
//!
//! Inspection opens the database with `Store::open_read_only`, which never
//! migrates and refuses anything but schema v10, so it is safe beside a live
//! host; artifacts are located, read, verified and diffed by plan-storage
//! (the same functions `serve` and the FFI use). `db migrate` is the one
//! writer here: storage's exclusive open takes the host lock first, so it
//! never runs beside a live host. This module formats answers and maps
//! failures to exit codes; it runs no SQL, reads no file itself, and decides
//! nothing about approvals. Whole-history commands (`list --all`, `list
//! --json`, `export`, `verify --all`) stream: rows are read, written and
//! dropped one at a time.

use std::path::Path;

use plan_core::{
    ApprovalStatus, ArtifactCheck, ArtifactVerification, ErrorCode, PlanApproval, SessionId, VerifyScope,
    VerifyTally,
};
use plan_storage::{
    ApprovalFilter, ExclusiveStore, PendingMigration, SCHEMA_VERSION, StorageError, Store, StoredApproval,
};
use serde::Serialize;

use crate::render::{self, FLUSH_BYTES, JsonObject};
use crate::table::Table;
use crate::terminal::{Terminal, good_style, problem_style};
use crate::{Failure, escape, exit, progress};

/// How many approvals `approvals list` shows without --limit or --all.
pub(crate) const DEFAULT_LIST_LIMIT: u32 = 20;

/// The exit code a storage failure deserves.
fn exit_for(error: &StorageError) -> i32 {
    if error.is_database_refusal() {
        exit::DATABASE_REFUSED
    } else {
        exit::FAILURE
    }
}

/// A storage failure as the user sees it: the canonical code, the specifics,
/// and for a schema refusal what to do about it.
pub(crate) fn failure(error: &StorageError) -> Failure {
    let mut message = format!("{}: {error}", error.code().as_str());
    if let StorageError::SchemaUnsupported { path, found, .. } = error {
        let command = format!(
            "plan-checkpoint --db {} db migrate",
            render::shell_word(&path.display().to_string())
        );
        message.push_str(&match found {
            8 => format!("\nhint: `{command}` migrates this schema v8 database (the 0.4.14 host's) to v10"),
            0 => format!("\nhint: the file is empty; `{command}` creates a new schema v10 in it"),
            _ => "\nhint: this build's `db migrate` migrates only schema v8 (the 0.4.14 host's) to v10"
                .to_owned(),
        });
    }
    Failure::new(exit_for(error), message)
}

/// Opens the database for inspection; every refusal is exit code 3. When
/// it had to be opened as an immutable snapshot (read-only media), stderr
/// says so, since a writer elsewhere would then go unseen.
pub(crate) fn open(database: &Path) -> Result<Store, Failure> {
    let store = Store::open_read_only(database).map_err(|error| {
        let mut refused = failure(&error);
        refused.exit = exit::DATABASE_REFUSED;
        refused
    })?;
    if store.is_immutable_snapshot() {
        render::note(&format!(
            "{}: the directory is read-only, so the database was opened as an immutable snapshot \
             (no -shm file, no locks; changes made elsewhere while this runs are not seen)",
            database.display()
        ));
    }
    Ok(store)
}

fn not_found(id: &str) -> Failure {
    let error = StorageError::ApprovalNotFound { id: id.to_owned() };
    failure(&error)
}

/// The approval id prefix every id has.
const ID_PREFIX: &str = "approval-";

/// `APPROVAL_NOT_FOUND` for `given`; when `given` lacks the `approval-`
/// every id starts with and some id starts with `approval-<given>`, a hint
/// names that form (the id is not taken for it: an id is given whole or
/// as a prefix of itself).
fn not_found_with_hint(store: &Store, given: &str) -> Result<Failure, Failure> {
    let mut refused = not_found(given);
    if !given.starts_with(ID_PREFIX) {
        let prefixed = format!("{ID_PREFIX}{given}");
        let matching = store
            .approval_ids_with_prefix(&prefixed, 1)
            .map_err(|error| failure(&error))?;
        if !matching.is_empty() {
            refused.message.push_str(&format!(
                "\nhint: approval ids start with `{ID_PREFIX}`: try `{prefixed}`"
            ));
        }
    }
    Ok(refused)
}

/// The approval id `given` names: the id itself, or the one id it is a
/// prefix of. An ambiguous prefix is a usage error that lists the ids.
pub(crate) fn resolve(store: &Store, given: &str) -> Result<String, Failure> {
    const SHOWN: u32 = 5;
    if given.is_empty() {
        return Err(Failure::new(exit::USAGE, "an approval id cannot be empty"));
    }
    let ids = store
        .approval_ids_with_prefix(given, SHOWN + 1)
        .map_err(|error| failure(&error))?;
    match ids.as_slice() {
        [] => Err(not_found_with_hint(store, given)?),
        [only] => Ok(only.clone()),
        [first, ..] if first == given => Ok(first.clone()),
        [_, _, ..] => {
            let mut listed: Vec<String> = ids.iter().take(SHOWN as usize).cloned().collect();
            if ids.len() > SHOWN as usize {
                listed.push("...".to_owned());
            }
            Err(Failure::new(
                exit::USAGE,
                format!(
                    "the approval id prefix `{given}` is ambiguous: it starts {}; give more of the id",
                    listed.join(", ")
                ),
            ))
        }
    }
}

fn get(store: &Store, given: &str) -> Result<StoredApproval, Failure> {
    let id = resolve(store, given)?;
    store
        .get_approval(&id.as_str().into())
        .map_err(|error| failure(&error))?
        .ok_or_else(|| not_found(&id))
}

/// Refuses a `--session` that names no session (`SESSION_NOT_FOUND`, exit
/// 1), the same answer `approvals verify --session` gives.
fn require_session(store: &Store, session: Option<&SessionId>) -> Result<(), Failure> {
    let Some(session) = session else {
        return Ok(());
    };
    match store.get_session(session) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(failure(&StorageError::SessionNotFound {
            id: session.as_str().to_owned(),
        })),
        Err(error) => Err(failure(&error)),
    }
}

/// How an id is shown in a table: whole into a pipe; on a terminal, the
/// shortest prefix no other approval shares (at least the `approval-`
/// type and 8 more characters), which every command accepts back.
fn shown_id(store: &Store, term: &Terminal, id: &str) -> Result<String, Failure> {
    const SHORTEST: usize = "approval-".len() + 8;
    if !term.is_terminal || id.len() <= SHORTEST {
        return Ok(id.to_owned());
    }
    let (before, after) = store
        .approval_id_neighbours(id)
        .map_err(|error| failure(&error))?;
    let shared = |other: Option<String>| {
        other.map_or(0, |other| {
            id.bytes()
                .zip(other.bytes())
                .take_while(|(mine, theirs)| mine == theirs)
                .count()
        })
    };
    let mut length = (shared(before).max(shared(after)) + 1).max(SHORTEST);
    while !id.is_char_boundary(length.min(id.len())) {
        length += 1;
    }
    Ok(id[..length.min(id.len())].to_owned())
}

// --- db -----------------------------------------------------------------------

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusJson {
    path: String,
    schema_version: u32,
    /// `none`, `fromV8` or `createSchema`: what `db migrate` would do.
    pending_migration: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    total: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    counts: Option<Counts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    live: Option<Vec<PlanApproval>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    audit: Option<AuditStatus>,
}

/// The audit chain and its export, as `db status` shows them.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AuditStatus {
    /// The chain's head: its last seq (0 before the first record).
    head: u64,
    head_hash: String,
    /// The database's identity on every exported record.
    database_id: Option<String>,
    /// The last seq a collector accepted.
    export_cursor: u64,
    /// Records not yet accepted (head - cursor).
    lag: u64,
    /// `ok`, `failing`, or `none` (no exporter recorded anything yet).
    export_state: String,
    /// The last export error, kept until the export recovers.
    last_error: Option<String>,
    /// When the export started failing or last recovered (Unix ms).
    since: Option<u64>,
    /// While a big pre-chain history is numbered: rows done and in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    history_numbering: Option<[u64; 2]>,
}

fn audit_status(store: &Store) -> Result<AuditStatus, Failure> {
    let (head, head_hash) = store.audit_head().map_err(|error| failure(&error))?;
    let cursor = store.audit_cursor().map_err(|error| failure(&error))?.seq;
    let recorded = store.export_status().map_err(|error| failure(&error))?;
    let field = |name: &str| recorded.as_ref().and_then(|status| status.get(name).cloned());
    Ok(AuditStatus {
        head,
        head_hash,
        database_id: store.database_id().map_err(|error| failure(&error))?,
        export_cursor: cursor,
        lag: head.saturating_sub(cursor),
        export_state: field("state")
            .and_then(|state| state.as_str().map(str::to_owned))
            .unwrap_or_else(|| "none".to_owned()),
        last_error: field("lastError").and_then(|error| error.as_str().map(str::to_owned)),
        since: field("since")
            .or_else(|| field("recoveredAt"))
            .and_then(|at| at.as_u64()),
        history_numbering: store
            .history_numbering()
            .map_err(|error| failure(&error))?
            .map(|progress| [progress.done, progress.total]),
    })
}

/// `db status`. A database `db migrate` would change (v8, or an empty file)
/// is described with the command that migrates it, not refused.
pub(crate) fn db_status(database: &Path, term: &Terminal, json: bool) -> Result<i32, Failure> {
    let path = database.display().to_string();
    let migrate = format!("plan-checkpoint --db {} db migrate", render::shell_word(&path));
    let pending = plan_storage::pending_migration(database).map_err(|error| {
        let mut refused = failure(&error);
        refused.exit = exit::DATABASE_REFUSED;
        refused
    })?;
    let (version, pending_name, advice) = match pending {
        PendingMigration::Nothing => (plan_storage::SCHEMA_VERSION, "none", None),
        PendingMigration::FromV8 => (
            8,
            "fromV8",
            Some(format!(
                "schema v8 (the 0.4.14 host's): inspection reads v10 only.\n\
                 Run `{migrate}` to migrate it to v10 in one transaction (all or nothing; every \
                 session, transcript entry and approval is kept). It is refused while a host holds \
                 the database.\n"
            )),
        ),
        PendingMigration::CreateSchema => (
            0,
            "createSchema",
            Some(format!(
                "the file is empty (no schema yet).\nRun `{migrate}` to create a new schema v10 in it \
                 (a host opening it does the same).\n"
            )),
        ),
    };
    if let Some(advice) = advice {
        let text = if json {
            render::json_pretty(&StatusJson {
                path,
                schema_version: version,
                pending_migration: pending_name,
                total: None,
                counts: None,
                live: None,
                audit: None,
            })?
        } else {
            format!(
                "database:        {}\nschema version:  {}\n{}",
                escape::line(&path),
                if version == 0 {
                    "none".to_owned()
                } else {
                    version.to_string()
                },
                escape::block(&advice)
            )
        };
        render::write_stdout(text.as_bytes())?;
        return Ok(exit::OK);
    }
    let store = open(database)?;
    let version = store.schema_version().map_err(|error| failure(&error))?;
    let counts = store.count_by_status().map_err(|error| failure(&error))?;
    let live = store.live_rows().map_err(|error| failure(&error))?;
    let total: u64 = counts.iter().map(|(_, count)| count).sum();
    let audit = audit_status(&store)?;
    if json {
        let text = render::json_pretty(&StatusJson {
            path,
            schema_version: version,
            pending_migration: pending_name,
            total: Some(total),
            counts: Some(Counts::of(&counts)),
            live: Some(live),
            audit: Some(audit),
        })?;
        render::write_stdout(text.as_bytes())?;
        return Ok(exit::OK);
    }
    let mut out = format!(
        "database:        {}\nschema version:  {version}\napprovals:       {total}\n",
        escape::line(&path)
    );
    for (status, count) in &counts {
        let name = format!("{:<15}", status.as_str());
        out.push_str(&format!(
            "  {}{count}\n",
            term.paint(crate::terminal::status_style(*status), &name)
        ));
    }
    let pending = live
        .iter()
        .filter(|row| row.status == ApprovalStatus::Pending)
        .count();
    let executing = live.len() - pending;
    out.push_str(&format!(
        "live rows:       {} ({pending} pending, {executing} queued or running)\n",
        live.len()
    ));
    let short: String = audit.head_hash.chars().take(12).collect();
    out.push_str(&format!(
        "audit chain:     head seq {}{}\n",
        audit.head,
        if short.is_empty() {
            String::new()
        } else {
            format!(" ({short}…)")
        }
    ));
    out.push_str(&format!(
        "database id:     {}\n",
        audit
            .database_id
            .as_deref()
            .map_or_else(|| "none yet".into(), escape::line)
    ));
    out.push_str(&format!(
        "export cursor:   seq {} (lag {})\n",
        audit.export_cursor, audit.lag
    ));
    let state = match (audit.export_state.as_str(), &audit.last_error) {
        ("failing", Some(error)) => format!(
            "failing since {}: {}",
            audit.since.map_or_else(
                || "?".to_owned(),
                |at| render::local_rfc3339(i64::try_from(at).unwrap_or(i64::MAX))
            ),
            escape::line(error)
        ),
        ("ok", _) => "ok (last error: none)".to_owned(),
        (_, _) => "no export recorded (last error: none)".to_owned(),
    };
    out.push_str(&format!("export status:   {state}\n"));
    if let Some([done, total]) = audit.history_numbering {
        out.push_str(&format!(
            "audit history:   being numbered ({done} of {total} rows; `db migrate` finishes it)\n"
        ));
    }
    if !live.is_empty() {
        out.push('\n');
    }
    render::write_stdout(out.as_bytes())?;
    let now = render::now_ms();
    let mut table = Table::new(render::approval_columns(), *term);
    for approval in &live {
        table.push(render::approval_row(
            approval,
            shown_id(&store, term, approval.id.as_str())?,
            now,
        ))?;
    }
    table.finish()?;
    Ok(exit::OK)
}

/// Approvals by status, in the order of the status lifecycle.
#[derive(Default, Serialize)]
struct Counts {
    pending: u64,
    approved: u64,
    rejected: u64,
    expired: u64,
    interrupted: u64,
}

impl Counts {
    fn of(counts: &[(ApprovalStatus, u64)]) -> Counts {
        let mut all = Counts::default();
        for (status, count) in counts {
            let slot = match status {
                ApprovalStatus::Pending => &mut all.pending,
                ApprovalStatus::Approved => &mut all.approved,
                ApprovalStatus::Rejected => &mut all.rejected,
                ApprovalStatus::Expired => &mut all.expired,
                ApprovalStatus::Interrupted => &mut all.interrupted,
            };
            *slot += count;
        }
        all
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MigrateJson {
    path: String,
    from: u32,
    to: u32,
    migrated: bool,
    /// Rows of a big pre-chain audit history numbered (0: none).
    #[serde(skip_serializing_if = "is_zero")]
    history_numbered: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// `db migrate`: v8 -> v10, a new schema in an empty file, or nothing to
/// do. What it does is what `db status` said it would.
pub(crate) fn db_migrate(database: &Path, json: bool) -> Result<i32, Failure> {
    let refused = |error: StorageError| {
        let mut refused = failure(&error);
        refused.exit = exit::DATABASE_REFUSED;
        refused
    };
    let spinner = progress::spinner(&format!("migrating to schema v{SCHEMA_VERSION}"));
    // Never migrate under a live host: storage takes the host lock first,
    // because only its holder may roll back what an interrupted host or
    // migration left, before anything reads the file.
    let opened = ExclusiveStore::open_existing(database);
    spinner.finish_and_clear();
    let opened = match opened {
        Ok(opened) => opened,
        Err(StorageError::HostAlreadyRunning { .. }) if is_current(database) => {
            // A live host on a v10 database: there is nothing to migrate.
            return report_migration(database, Some(SCHEMA_VERSION), 0, json);
        }
        Err(error) => return Err(refused(error)),
    };
    let report = opened.migration;
    let numbered = number_history(opened.store)?;
    report_migration(database, report.from, numbered, json)
}

/// Numbers a big pre-chain audit history to the end, in short
/// transactions, with a progress bar on a terminal; returns how many rows
/// of history it went through (0: nothing to number).
fn number_history(mut store: Store) -> Result<u64, Failure> {
    store.begin_audit_chain().map_err(|error| failure(&error))?;
    let Some(first) = store.history_numbering().map_err(|error| failure(&error))? else {
        return Ok(0);
    };
    let bar = progress::bar(first.total, "rows of audit history numbered");
    let mut total = first.total;
    while let Some(progress) = store.number_history_step().map_err(|error| failure(&error))? {
        bar.set_position(progress.done);
        total = progress.total;
        if store
            .history_numbering()
            .map_err(|error| failure(&error))?
            .is_none()
        {
            break;
        }
    }
    bar.finish_and_clear();
    Ok(total)
}

/// Whether a read-only look finds the database at schema v10.
fn is_current(database: &Path) -> bool {
    Store::open_read_only(database)
        .and_then(|store| store.schema_version())
        .is_ok_and(|version| version == SCHEMA_VERSION)
}

/// Says what the migration did, given the schema it found (`None`: an
/// empty file) and how many rows of audit history it numbered.
fn report_migration(database: &Path, found: Option<u32>, numbered: u64, json: bool) -> Result<i32, Failure> {
    let path = database.display().to_string();
    let to = SCHEMA_VERSION;
    let (from, done) = match found {
        Some(from) if from == to => (from, format!("schema v{to}, nothing to migrate")),
        Some(from) => (from, format!("migrated schema v{from} -> v{to}")),
        None => (0, format!("the file was empty: created a new schema v{to}")),
    };
    let text = if json {
        render::json_pretty(&MigrateJson {
            path,
            from,
            to,
            migrated: from != to,
            history_numbered: numbered,
        })?
    } else if numbered > 0 {
        format!(
            "{}: {done}; numbered the audit history ({numbered} rows)\n",
            escape::line(&path)
        )
    } else {
        format!("{}: {done}\n", escape::line(&path))
    };
    render::write_stdout(text.as_bytes())?;
    Ok(exit::OK)
}

// --- approvals ----------------------------------------------------------------

/// `approvals list`: at most `limit` rows (`None`: all), streamed, with
/// a line saying when there are more.
pub(crate) fn list(
    database: &Path,
    term: &Terminal,
    session: Option<SessionId>,
    status: Option<ApprovalStatus>,
    limit: Option<u32>,
    json: bool,
) -> Result<i32, Failure> {
    let store = open(database)?;
    require_session(&store, session.as_ref())?;
    // One row past the limit is read, not shown: it says whether there are
    // more without counting them (a count visits every matching row).
    let filter = ApprovalFilter {
        session_id: session,
        status,
        limit: limit.map(|limit| limit.saturating_add(1)),
    };
    let mut visited: u64 = 0;
    let mut more = false;
    let mut past_limit = || {
        visited += 1;
        more = limit.is_some_and(|limit| visited > u64::from(limit));
        more
    };
    let now = render::now_ms();
    let mut failed: Option<Failure> = None;
    let shown = if json {
        let mut object = JsonObject::new();
        object.begin_array("approvals");
        store
            .visit_approvals(&filter, &mut |stored| {
                !past_limit() && keep_going(object.element(&stored.approval), &mut failed)
            })
            .map_err(|error| failure(&error))?;
        if let Some(error) = failed.take() {
            return Err(error);
        }
        let count = object.end_array();
        object.finish()?;
        count
    } else {
        let mut table = Table::new(render::approval_columns(), *term);
        store
            .visit_approvals(&filter, &mut |stored| {
                if past_limit() {
                    return false;
                }
                let approval = stored.approval;
                let step = shown_id(&store, term, approval.id.as_str())
                    .and_then(|id| table.push(render::approval_row(&approval, id, now)));
                keep_going(step, &mut failed)
            })
            .map_err(|error| failure(&error))?;
        if let Some(error) = failed.take() {
            return Err(error);
        }
        let rows = table.rows();
        table.finish()?;
        if rows == 0 {
            let mut any = false;
            store
                .visit_approvals(
                    &ApprovalFilter {
                        limit: Some(1),
                        ..ApprovalFilter::default()
                    },
                    &mut |_| {
                        any = true;
                        false
                    },
                )
                .map_err(|error| failure(&error))?;
            let text = if !any {
                "no approvals\n"
            } else {
                "no approvals match\n"
            };
            render::write_stdout(text.as_bytes())?;
        }
        rows
    };
    if more {
        let note = format!("more approvals than the {shown} shown; use --limit N or --all to see them\n");
        if json {
            eprint!("plan-checkpoint: {note}");
        } else {
            let note = term.paint(crate::terminal::dim_style(), note.trim_end());
            render::write_stdout(format!("{note}\n").as_bytes())?;
        }
    }
    Ok(exit::OK)
}

/// A visitor's answer: go on after a success, stop and keep the failure.
fn keep_going(step: Result<(), Failure>, failed: &mut Option<Failure>) -> bool {
    match step {
        Ok(()) => true,
        Err(error) => {
            *failed = Some(error);
            false
        }
    }
}

/// `approvals show`.
pub(crate) fn show(database: &Path, term: &Terminal, id: &str, json: bool) -> Result<i32, Failure> {
    let store = open(database)?;
    let stored = get(&store, id)?;
    let text = if json {
        render::json_pretty(&stored.approval)?
    } else {
        let root = store
            .get_session(&stored.approval.session_id)
            .map_err(|error| failure(&error))?
            .and_then(|session| session.workspace_root);
        let tally = stored
            .approval
            .execution_id
            .as_ref()
            .map(|execution| store.execution_tool_tally(execution))
            .transpose()
            .map_err(|error| failure(&error))?;
        render::card(&stored, root.as_deref(), tally, render::now_ms(), term)
    };
    render::write_stdout(text.as_bytes())?;
    Ok(exit::OK)
}

/// `approvals cat`.
///
/// `exact` writes the bytes as recorded (`--raw`, or stdout is not a
/// terminal); otherwise control and bidi characters are shown escaped.
pub(crate) fn cat(database: &Path, id: &str, force: bool, exact: bool, json: bool) -> Result<i32, Failure> {
    let store = open(database)?;
    let stored = get(&store, id)?;
    let location = store
        .locate_artifact(&stored.approval)
        .map_err(|error| failure(&error))?;
    let (root, artifact) = (location.workspace_root, location.artifact);
    let (bytes, sha256, size) = match plan_storage::read_artifact(&root, &artifact) {
        Ok(bytes) => (bytes, artifact.sha256.clone(), artifact.size),
        Err(StorageError::ArtifactIntegrityMismatch {
            path,
            expected_size,
            expected_sha256,
            found_size,
            found_sha256,
        }) if force => {
            let error = StorageError::ArtifactIntegrityMismatch {
                path,
                expected_size,
                expected_sha256,
                found_size,
                found_sha256: found_sha256.clone(),
            };
            crate::log::line(&format!(
                "plan-checkpoint: warning: {}: {}; printing the bytes anyway (--force)",
                error.code().as_str(),
                escape::line(&error.to_string())
            ));
            let bytes =
                plan_storage::read_artifact_unverified(&root, &artifact).map_err(|error| failure(&error))?;
            (bytes, found_sha256, found_size)
        }
        Err(error) => return Err(failure(&error)),
    };
    if json {
        let markdown = String::from_utf8(bytes).map_err(|_| {
            Failure::new(
                exit::FAILURE,
                "the artifact is not UTF-8, so it cannot be shown as JSON; run `approvals cat` without --json",
            )
        })?;
        let text = render::json_pretty(&plan_protocol::PlanReadArtifactResult {
            markdown,
            sha256,
            size,
        })?;
        render::write_stdout(text.as_bytes())?;
    } else if exact {
        render::write_stdout(&bytes)?;
    } else {
        render::write_stdout(escape::block_bytes(&bytes).as_bytes())?;
    }
    Ok(exit::OK)
}

/// `approvals verify`: storage verifies, this renders. The human form
/// streams: problems are printed as they are found (every row with
/// `verbose`), the rest only counted, with progress on a terminal.
pub(crate) fn verify(
    database: &Path,
    term: &Terminal,
    scope: VerifyScope,
    workspace: Option<&Path>,
    verbose: bool,
    json: bool,
) -> Result<i32, Failure> {
    let store = open(database)?;
    let scope = match scope {
        VerifyScope::Approval(given) => VerifyScope::Approval(resolve(&store, given.as_str())?.into()),
        VerifyScope::Session(session) => VerifyScope::Session(session),
        VerifyScope::Everything => VerifyScope::Everything,
    };
    let recorded = recorded_roots(&store, &scope)?;
    let workspace = workspace_for(workspace, &recorded)?;
    if json {
        // Streamed like the human form; `ok` comes last because it is only
        // known at the end (the same object as plan/verify's, members in
        // another order).
        let mut tally = VerifyTally::default();
        let mut object = JsonObject::new();
        let mut failed: Option<Failure> = None;
        object.begin_array("artifacts");
        let findings = store
            .visit_verification_in(&scope, workspace.as_deref(), &mut |check| {
                tally.add(check.result);
                keep_going(object.element(&check), &mut failed)
            })
            .map_err(|error| failure(&error))?;
        if let Some(error) = failed {
            return Err(error);
        }
        object.end_array();
        tally.orphans = findings.orphans.len() as u64;
        object.member("orphans", &findings.orphans)?;
        object.member("skippedWorkspaces", &findings.skipped_workspaces)?;
        object.member("ok", &tally.ok())?;
        object.finish()?;
        return Ok(if tally.ok() { exit::OK } else { exit::FAILURE });
    }
    // One approval is shown whatever it found.
    let verbose = verbose || matches!(scope, VerifyScope::Approval(_));
    let total = match &scope {
        VerifyScope::Approval(_) => 1,
        VerifyScope::Session(session) => store
            .count_approvals(&ApprovalFilter {
                session_id: Some(session.clone()),
                ..ApprovalFilter::default()
            })
            .map_err(|error| failure(&error))?,
        VerifyScope::Everything => store
            .count_approvals(&ApprovalFilter::default())
            .map_err(|error| failure(&error))?,
    };
    let bar = progress::bar(total, "approvals verified");
    let mut tally = VerifyTally::default();
    let mut out = String::new();
    let mut failed: Option<Failure> = None;
    let findings = store.visit_verification_in(&scope, workspace.as_deref(), &mut |check| {
        tally.add(check.result);
        bar.inc(1);
        if verbose || check.result.is_problem() {
            out.push_str(&check_line(term, &check));
        }
        let step = if out.len() >= FLUSH_BYTES {
            let written = bar.suspend(|| render::write_stdout(out.as_bytes()));
            out.clear();
            written
        } else {
            Ok(())
        };
        keep_going(step, &mut failed)
    });
    bar.finish_and_clear();
    let findings = findings.map_err(|error| failure(&error))?;
    if let Some(error) = failed {
        return Err(error);
    }
    tally.orphans = findings.orphans.len() as u64;
    for orphan in &findings.orphans {
        out.push_str(&format!(
            "{}  {}/{}  (no approval records it)\n",
            term.paint(problem_style(), &format!("{:<10}", "orphan")),
            escape::line(&orphan.workspace_root),
            escape::line(&orphan.path)
        ));
    }
    for root in &findings.skipped_workspaces {
        out.push_str(&format!(
            "{:<10}  {}  ({})\n",
            "skipped",
            escape::line(&root.workspace_root),
            escape::line(&root.detail)
        ));
    }
    out.push_str(&summary(term, &tally, verbose));
    out.push_str(&checked_where(&recorded, workspace.as_deref()));
    render::write_stdout(out.as_bytes())?;
    Ok(if tally.ok() { exit::OK } else { exit::FAILURE })
}

/// The workspace roots the database records for `scope`.
fn recorded_roots(store: &Store, scope: &VerifyScope) -> Result<Vec<String>, Failure> {
    let root_of = |session: &SessionId| {
        store
            .get_session(session)
            .map(|found| found.and_then(|session| session.workspace_root))
            .map_err(|error| failure(&error))
    };
    Ok(match scope {
        VerifyScope::Approval(id) => match store.get_approval(id).map_err(|error| failure(&error))? {
            Some(stored) => root_of(&stored.approval.session_id)?.into_iter().collect(),
            None => Vec::new(),
        },
        VerifyScope::Session(session) => root_of(session)?.into_iter().collect(),
        VerifyScope::Everything => store.workspace_roots().map_err(|error| failure(&error))?,
    })
}

/// Which workspace the files were read from: the roots the database
/// records, or the one `--workspace` gave in their place. A database copied
/// away from its workspace says so, rather than seeming to check the files
/// beside the copy.
fn checked_where(recorded: &[String], workspace: Option<&str>) -> String {
    let listed: Vec<String> = recorded
        .iter()
        .map(|root| escape::line(root).into_owned())
        .collect();
    match (workspace, listed.is_empty()) {
        (Some(workspace), _) => format!(
            "read the plan files under .pi/plan/ of {} (--workspace, in place of the recorded {})\n",
            escape::line(workspace),
            if listed.is_empty() {
                "none".to_owned()
            } else {
                listed.join(", ")
            }
        ),
        (None, true) => "no workspace recorded: no plan file was read\n".to_owned(),
        (None, false) => format!(
            "read the plan files under .pi/plan/ of the workspace(s) the database records: {} \
             (--workspace DIR checks a copy instead)\n",
            listed.join(", ")
        ),
    }
}

/// `--workspace` as an absolute path, allowed only where the scope's
/// approvals record one workspace (it stands for that one).
fn workspace_for(given: Option<&Path>, recorded: &[String]) -> Result<Option<String>, Failure> {
    let Some(given) = given else {
        return Ok(None);
    };
    let mut distinct: Vec<&String> = recorded.iter().collect();
    distinct.dedup();
    if distinct.len() > 1 {
        return Err(Failure::new(
            exit::USAGE,
            format!(
                "--workspace stands for one workspace, and the database records {} ({}); \
                 choose one with --session or an approval id",
                distinct.len(),
                distinct
                    .iter()
                    .map(|root| escape::line(root).into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let absolute = std::path::absolute(given)
        .map_err(|error| Failure::new(exit::USAGE, format!("--workspace {}: {error}", given.display())))?;
    let Some(text) = absolute.to_str() else {
        return Err(Failure::new(
            exit::USAGE,
            format!("--workspace {}: not UTF-8", absolute.display()),
        ));
    };
    Ok(Some(text.to_owned()))
}

/// One check as printed: the finding, the id, and for a problem its code
/// and detail on the next line.
fn check_line(term: &Terminal, check: &ArtifactVerification) -> String {
    let style = if check.result.is_problem() {
        problem_style()
    } else {
        good_style()
    };
    let mut line = format!(
        "{}  {}\n",
        term.paint(style, &format!("{:<10}", check.result.as_str())),
        escape::line(check.approval_id.as_str())
    );
    if check.result.is_problem()
        && let Some(detail) = &check.detail
    {
        let code = check.error_code.map_or("", ErrorCode::as_str);
        line.push_str(&format!("            {code}: {}\n", escape::line(detail)));
    }
    line
}

fn summary(term: &Terminal, tally: &VerifyTally, verbose: bool) -> String {
    let counts: Vec<String> = ArtifactCheck::ALL
        .iter()
        .filter(|check| tally.count(**check) > 0)
        .map(|check| format!("{} {}", tally.count(*check), check.as_str()))
        .collect();
    let counts = if counts.is_empty() {
        "none".to_owned()
    } else {
        counts.join(", ")
    };
    let verdict = if tally.ok() {
        term.paint(good_style(), "everything verifies")
    } else {
        term.paint(problem_style(), &format!("{} problem(s)", tally.problems()))
    };
    // Problems are printed whatever `verbose` says; the rest is hidden.
    let problem_checks = tally.problems() - tally.orphans;
    let hidden = tally.checked() - problem_checks;
    let hint = if !verbose && hidden > 0 {
        " (--verbose lists every approval)"
    } else {
        ""
    };
    format!(
        "{} approval(s) checked: {counts}; {} orphan file(s); {verdict}{hint}\n",
        tally.checked(),
        tally.orphans
    )
}

/// `approvals diff`: storage diffs, this renders.
pub(crate) fn diff(
    database: &Path,
    term: &Terminal,
    approval_id: &str,
    against: Option<&str>,
    json: bool,
) -> Result<i32, Failure> {
    let store = open(database)?;
    let approval_id = resolve(&store, approval_id)?;
    let against = against.map(|given| resolve(&store, given)).transpose()?;
    let diff = store
        .diff(
            &approval_id.into(),
            against.map(plan_core::ApprovalId::from).as_ref(),
        )
        .map_err(|error| failure(&error))?;
    let text = if json {
        render::json_pretty(&diff)?
    } else {
        match (&diff.against_approval_id, &diff.unified) {
            (None, _) | (Some(_), None) => {
                crate::log::line(&format!(
                    "plan-checkpoint: approval {} is its session's first submission; nothing to compare with",
                    escape::line(diff.approval_id.as_str())
                ));
                String::new()
            }
            (Some(_), Some(_)) if diff.identical => {
                crate::log::line("plan-checkpoint: the two artifacts are identical");
                String::new()
            }
            (Some(_), Some(unified)) => render::unified_diff(unified, term),
        }
    };
    render::write_stdout(text.as_bytes())?;
    Ok(exit::OK)
}

/// `approvals export`: JSON Lines, streamed.
pub(crate) fn export(database: &Path, session: Option<SessionId>) -> Result<i32, Failure> {
    let store = open(database)?;
    require_session(&store, session.as_ref())?;
    let filter = ApprovalFilter {
        session_id: session,
        ..ApprovalFilter::default()
    };
    let heads = store.approval_audit_heads().map_err(|error| failure(&error))?;
    // Each row against the state its chained facts give it: an edited row
    // is never printed beside the chain's hash as if it were valid.
    let replay = store.approval_replay().map_err(|error| failure(&error))?;
    let mut disagreeing: u64 = 0;
    let mut buffer = String::new();
    let mut failed: Option<Failure> = None;
    let mut visit = |stored: StoredApproval| {
        // The protocol object as always, its field order kept, with the
        // chain's seq and hash and the row's verdict appended.
        let head = heads.get(stored.approval.id.as_str());
        let differences: Vec<serde_json::Value> = replay
            .check(&stored.approval)
            .iter()
            .filter_map(|finding| match finding {
                plan_storage::AuditFinding::Row {
                    field, chain, row, ..
                } => Some(serde_json::json!({"field": field, "chain": chain, "row": row})),
                plan_storage::AuditFinding::Changed { .. }
                | plan_storage::AuditFinding::Removed { .. }
                | plan_storage::AuditFinding::Inserted { .. } => None,
            })
            .collect();
        if !differences.is_empty() {
            disagreeing += 1;
        }
        let chain = serde_json::json!({
            "auditSeq": head.map(|(seq, _)| *seq),
            "auditHash": head.map(|(_, hash)| hash.as_str()),
        });
        let line = render::json_line(&stored.approval).map(|line| {
            let object = line.trim_end().trim_end_matches('}');
            let seq = chain["auditSeq"].to_string();
            let hash = chain["auditHash"].to_string();
            let verdict = if differences.is_empty() {
                "\"auditVerified\":true".to_owned()
            } else {
                format!(
                    "\"auditVerified\":false,\"auditDifferences\":{}",
                    serde_json::Value::Array(differences)
                )
            };
            format!("{object},\"auditSeq\":{seq},\"auditHash\":{hash},{verdict}}}\n")
        });
        match line {
            Ok(line) => buffer.push_str(&line),
            Err(error) => {
                failed = Some(error);
                return false;
            }
        }
        if buffer.len() >= FLUSH_BYTES {
            if let Err(error) = render::write_stdout(buffer.as_bytes()) {
                failed = Some(error);
                return false;
            }
            buffer.clear();
        }
        true
    };
    store
        .visit_approvals(&filter, &mut visit)
        .map_err(|error| failure(&error))?;
    if let Some(error) = failed {
        return Err(error);
    }
    render::write_stdout(buffer.as_bytes())?;
    if disagreeing > 0 {
        render::note(&format!(
            "{disagreeing} approval rows disagree with the audit chain (auditVerified false); \
             `plan-checkpoint audit verify` names each difference"
        ));
        return Ok(exit::FAILURE);
    }
    Ok(exit::OK)
}
