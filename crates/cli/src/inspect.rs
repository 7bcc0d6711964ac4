//! The inspection commands (`db status`, `approvals ...`) and `db migrate`.
//!
//! Inspection opens the database with `Store::open_read_only`, which never
//! migrates and refuses anything but schema v10, so it is safe beside a live
//! host; artifacts are located, read, verified and diffed by plan-storage
//! (the same functions `serve` and the FFI use). `db migrate` is the one
//! writer here: storage's exclusive open takes the host lock first, so it
//! never runs beside a live host. This module formats answers and maps
//! failures to exit codes; it runs no SQL, reads no file itself, and decides
//! nothing about approvals.

use std::collections::BTreeMap;
use std::path::Path;

use plan_core::{ApprovalStatus, ArtifactCheck, ErrorCode, PlanApproval, VerifyReport, VerifyScope};
use plan_storage::{ApprovalFilter, ExclusiveStore, StorageError, Store, StoredApproval};
use serde::Serialize;

use crate::render::{self, wire};
use crate::{Failure, exit};

/// The exit code a storage failure deserves.
fn exit_for(error: &StorageError) -> i32 {
    match error {
        StorageError::SchemaUnsupported { .. }
        | StorageError::DatabaseUnreadable { .. }
        | StorageError::DatabaseMissing { .. }
        | StorageError::MigrationFailed { .. }
        | StorageError::HostAlreadyRunning { .. } => exit::DATABASE_REFUSED,
        StorageError::Sqlite { .. } => {
            if error.code() == ErrorCode::DatabaseUnreadable {
                exit::DATABASE_REFUSED
            } else {
                exit::FAILURE
            }
        }
        StorageError::Io { .. }
        | StorageError::InvalidValue { .. }
        | StorageError::SessionNotFound { .. }
        | StorageError::SessionAlreadyExists { .. }
        | StorageError::ApprovalNotFound { .. }
        | StorageError::StaleApproval { .. }
        | StorageError::ApprovalConflict { .. }
        | StorageError::ArtifactPathEscape { .. }
        | StorageError::ArtifactSymlink { .. }
        | StorageError::ArtifactWriteFailed { .. }
        | StorageError::ArtifactMissing { .. }
        | StorageError::WorkspaceMissing { .. }
        | StorageError::ArtifactReadFailed { .. }
        | StorageError::LegacyApproval { .. }
        | StorageError::NoWorkspace { .. }
        | StorageError::ArtifactIntegrityMismatch { .. } => exit::FAILURE,
    }
}

/// A storage failure as the user sees it: the canonical code, the specifics,
/// and for a schema refusal what to do about it.
pub(crate) fn failure(error: &StorageError) -> Failure {
    let mut message = format!("{}: {error}", error.code().as_str());
    if let StorageError::SchemaUnsupported { .. } = error {
        message.push_str(
            "\nhint: `plan-checkpoint db migrate` migrates a schema v8 database (the 0.4.14 host's) to v10; \
             no other version can be migrated by this build",
        );
    }
    Failure::new(exit_for(error), message)
}

/// Opens the database for inspection; every refusal is exit code 3.
pub(crate) fn open(database: &Path) -> Result<Store, Failure> {
    Store::open_read_only(database).map_err(|error| {
        let mut refused = failure(&error);
        refused.exit = exit::DATABASE_REFUSED;
        refused
    })
}

fn not_found(id: &str) -> Failure {
    let error = StorageError::ApprovalNotFound { id: id.to_owned() };
    failure(&error)
}

fn get(store: &Store, id: &str) -> Result<StoredApproval, Failure> {
    store
        .get_approval(id)
        .map_err(|error| failure(&error))?
        .ok_or_else(|| not_found(id))
}

// --- db -----------------------------------------------------------------------

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusJson {
    path: String,
    schema_version: u32,
    total: u64,
    counts: Counts,
    live: Vec<plan_protocol::PlanApproval>,
}

/// `db status`.
pub(crate) fn db_status(database: &Path, json: bool) -> Result<i32, Failure> {
    let store = open(database)?;
    let version = store.schema_version().map_err(|error| failure(&error))?;
    let counts = store.count_by_status().map_err(|error| failure(&error))?;
    let live = store.live_rows().map_err(|error| failure(&error))?;
    let total: u64 = counts.iter().map(|(_, count)| count).sum();
    let text = if json {
        render::json_pretty(&StatusJson {
            path: database.display().to_string(),
            schema_version: version,
            total,
            counts: Counts::of(&counts),
            live: live.iter().map(wire).collect(),
        })?
    } else {
        let mut out = format!(
            "database:        {}\nschema version:  {version}\napprovals:       {total}\n",
            database.display()
        );
        for (status, count) in &counts {
            out.push_str(&format!("  {:<15}{count}\n", status.as_str()));
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
        if !live.is_empty() {
            out.push('\n');
            out.push_str(&render::table(&live, render::now_ms()));
        }
        out
    };
    render::write_stdout(text.as_bytes())?;
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
}

/// `db migrate`: v8 -> v10, or nothing to do.
pub(crate) fn db_migrate(database: &Path, json: bool) -> Result<i32, Failure> {
    // The read-only probe tells a missing file, a v10 file (nothing to do)
    // and a file that needs the migration apart, without writing anything.
    let from = match Store::open_read_only(database) {
        Ok(store) => {
            let version = store.schema_version().map_err(|error| failure(&error))?;
            let text = if json {
                render::json_pretty(&MigrateJson {
                    path: database.display().to_string(),
                    from: version,
                    to: version,
                    migrated: false,
                })?
            } else {
                format!("{}: schema v{version}, nothing to migrate\n", database.display())
            };
            render::write_stdout(text.as_bytes())?;
            return Ok(exit::OK);
        }
        Err(StorageError::SchemaUnsupported { found, .. }) => found,
        Err(error) => {
            let mut refused = failure(&error);
            refused.exit = exit::DATABASE_REFUSED;
            return Err(refused);
        }
    };
    // Never migrate under a live host: storage takes the host lock first.
    let opened = ExclusiveStore::open(database).map_err(|error| {
        let mut refused = failure(&error);
        refused.exit = exit::DATABASE_REFUSED;
        refused
    })?;
    let report = opened.migration;
    let from = report.from.unwrap_or(from);
    let text = if json {
        render::json_pretty(&MigrateJson {
            path: database.display().to_string(),
            from,
            to: report.to,
            migrated: from != report.to,
        })?
    } else {
        format!(
            "{}: migrated schema v{from} -> v{}\n",
            database.display(),
            report.to
        )
    };
    render::write_stdout(text.as_bytes())?;
    Ok(exit::OK)
}

// --- approvals ----------------------------------------------------------------

/// `approvals list`.
pub(crate) fn list(
    database: &Path,
    session: Option<String>,
    status: Option<ApprovalStatus>,
    limit: Option<u32>,
    json: bool,
) -> Result<i32, Failure> {
    let store = open(database)?;
    let filter = ApprovalFilter {
        session_id: session,
        status,
        limit,
    };
    let rows = store.list_approvals(&filter).map_err(|error| failure(&error))?;
    let approvals: Vec<PlanApproval> = rows.into_iter().map(|stored| stored.approval).collect();
    let text = if json {
        render::json_pretty(&plan_protocol::PlanListResult {
            approvals: approvals.iter().map(wire).collect(),
        })?
    } else {
        render::table(&approvals, render::now_ms())
    };
    render::write_stdout(text.as_bytes())?;
    Ok(exit::OK)
}

/// `approvals show`.
pub(crate) fn show(database: &Path, id: &str, json: bool) -> Result<i32, Failure> {
    let store = open(database)?;
    let stored = get(&store, id)?;
    let text = if json {
        render::json_pretty(&wire(&stored.approval))?
    } else {
        render::card(&stored, render::now_ms())
    };
    render::write_stdout(text.as_bytes())?;
    Ok(exit::OK)
}

/// `approvals cat`.
pub(crate) fn cat(database: &Path, id: &str, force: bool, json: bool) -> Result<i32, Failure> {
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
            eprintln!(
                "plan-checkpoint: warning: {}: {error}; printing the bytes anyway (--force)",
                error.code().as_str()
            );
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
    } else {
        render::write_stdout(&bytes)?;
    }
    Ok(exit::OK)
}

/// `approvals verify`: storage verifies, this renders.
pub(crate) fn verify(database: &Path, scope: &VerifyScope, json: bool) -> Result<i32, Failure> {
    let store = open(database)?;
    let report = store.verify(scope).map_err(|error| failure(&error))?;
    let text = if json {
        render::json_pretty(&plan_protocol::VerifyReport::from(&report))?
    } else {
        verify_text(&report)
    };
    render::write_stdout(text.as_bytes())?;
    Ok(if report.ok() { exit::OK } else { exit::FAILURE })
}

fn verify_text(report: &VerifyReport) -> String {
    let mut out = String::new();
    let mut tally: BTreeMap<&'static str, usize> = BTreeMap::new();
    for check in &report.artifacts {
        *tally.entry(check.result.as_str()).or_default() += 1;
        out.push_str(&format!("{:<10}  {}\n", check.result.as_str(), check.approval_id));
        if check.result.is_problem()
            && let Some(detail) = &check.detail
        {
            let code = check.error_code.map_or("", ErrorCode::as_str);
            out.push_str(&format!("            {code}: {detail}\n"));
        }
    }
    for orphan in &report.orphans {
        out.push_str(&format!(
            "{:<10}  {}/{}  (no approval records it)\n",
            "orphan", orphan.workspace_root, orphan.path
        ));
    }
    for root in &report.skipped_workspaces {
        out.push_str(&format!(
            "{:<10}  {}  ({})\n",
            "skipped", root.workspace_root, root.detail
        ));
    }
    let counts: Vec<String> = ArtifactCheck::ALL
        .iter()
        .filter_map(|check| {
            tally
                .get(check.as_str())
                .map(|count| format!("{count} {}", check.as_str()))
        })
        .collect();
    let counts = if counts.is_empty() {
        "none".to_owned()
    } else {
        counts.join(", ")
    };
    let problems = report
        .artifacts
        .iter()
        .filter(|check| check.result.is_problem())
        .count()
        + report.orphans.len();
    out.push_str(&format!(
        "{} approval(s) checked: {counts}; {} orphan file(s); {}\n",
        report.artifacts.len(),
        report.orphans.len(),
        if problems == 0 {
            "everything verifies".to_owned()
        } else {
            format!("{problems} problem(s)")
        }
    ));
    out
}

/// `approvals diff`: storage diffs, this renders.
pub(crate) fn diff(
    database: &Path,
    approval_id: &str,
    against: Option<&str>,
    json: bool,
) -> Result<i32, Failure> {
    let store = open(database)?;
    let diff = store
        .diff(approval_id, against)
        .map_err(|error| failure(&error))?;
    let text = if json {
        render::json_pretty(&plan_protocol::PlanDiffResult::from(&diff))?
    } else {
        match (&diff.against_approval_id, &diff.unified) {
            (None, _) | (Some(_), None) => {
                eprintln!(
                    "plan-checkpoint: approval {} is its session's first submission; nothing to compare with",
                    diff.approval_id
                );
                String::new()
            }
            (Some(_), Some(_)) if diff.identical => {
                eprintln!("plan-checkpoint: the two artifacts are identical");
                String::new()
            }
            (Some(_), Some(unified)) => unified.clone(),
        }
    };
    render::write_stdout(text.as_bytes())?;
    Ok(exit::OK)
}

/// `approvals export`: JSON Lines, streamed.
pub(crate) fn export(database: &Path, session: Option<String>) -> Result<i32, Failure> {
    let store = open(database)?;
    let filter = ApprovalFilter {
        session_id: session,
        ..ApprovalFilter::default()
    };
    let mut buffer = String::new();
    let mut failed: Option<Failure> = None;
    let mut visit = |stored: StoredApproval| {
        match render::json_line(&wire(&stored.approval)) {
            Ok(line) => buffer.push_str(&line),
            Err(error) => {
                failed = Some(error);
                return false;
            }
        }
        if buffer.len() >= 64 * 1024 {
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
    Ok(exit::OK)
}
