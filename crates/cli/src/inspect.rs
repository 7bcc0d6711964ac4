//! The inspection commands (`db status`, `approvals ...`) and `db migrate`.
//!
//! Inspection opens the database with `Store::open_read_only`, which never
//! migrates and refuses anything but schema v10, so it is safe beside a live
//! host; artifacts are read and checked by plan-storage. `db migrate` is the
//! one writer here: it takes the host lock first, so it never runs beside a
//! live host. This module formats answers and maps failures to exit codes;
//! it runs no SQL, reads no file itself, and decides nothing about approvals.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use plan_core::{ApprovalStatus, Artifact, ErrorCode, PlanApproval};
use plan_storage::{ApprovalFilter, HostLock, SCHEMA_VERSION, StorageError, Store, StoredApproval};
use serde::Serialize;

use crate::render::{self, wire};
use crate::{Failure, exit};

/// Which approvals `verify` checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Selection {
    /// One approval by id.
    One(String),
    /// Every approval of a session.
    Session(String),
    /// Everything.
    All,
}

/// The exit code a storage failure deserves.
fn exit_for(error: &StorageError) -> i32 {
    match error {
        StorageError::SchemaUnsupported { .. }
        | StorageError::DatabaseUnreadable { .. }
        | StorageError::DatabaseMissing { .. }
        | StorageError::MigrationFailed { .. }
        | StorageError::DatabasePathRefused { .. }
        | StorageError::HostAlreadyRunning { .. } => exit::DATABASE_REFUSED,
        StorageError::Sqlite { .. } => {
            if error.code() == ErrorCode::DatabaseUnreadable {
                exit::DATABASE_REFUSED
            } else {
                exit::FAILURE
            }
        }
        StorageError::Io { .. }
        | StorageError::DatabaseFilesChanged { .. }
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
        | StorageError::ArtifactIntegrityMismatch { .. } => exit::FAILURE,
    }
}

/// A storage failure as the user sees it: the canonical code, the specifics,
/// and for a schema refusal what to do about it.
fn failure(error: &StorageError) -> Failure {
    let mut message = format!("{}: {error}", error.code().as_str());
    if let StorageError::SchemaUnsupported { .. } = error {
        message.push_str(
            "\nhint: `plan-checkpoint db migrate` migrates a schema v8 database (the 0.4.14 host's) to v10; \
             no other version can be migrated by this build",
        );
    }
    Failure::new(exit_for(error), message)
}

/// Opens the database for inspection; every refusal is exit code 3. When
/// it had to be opened as an immutable snapshot (read-only media), stderr
/// says so, since a writer elsewhere would then go unseen.
fn open(database: &Path) -> Result<Store, Failure> {
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
    let refused = |error: StorageError| {
        let mut refused = failure(&error);
        refused.exit = exit::DATABASE_REFUSED;
        refused
    };
    // Never migrate under a live host: it holds this lock for its lifetime.
    // The lock comes first, because only its holder may roll back what an
    // interrupted host or migration left, before anything reads the file.
    let lock = match HostLock::acquire_existing(database) {
        Ok(lock) => lock,
        Err(StorageError::HostAlreadyRunning { .. }) if is_current(database) => {
            // A live host on a v10 database: there is nothing to migrate.
            return report_migration(database, SCHEMA_VERSION, SCHEMA_VERSION, json);
        }
        Err(error) => return Err(refused(error)),
    };
    let (store, report) = Store::open(database).map_err(refused)?;
    drop(store);
    drop(lock);
    report_migration(database, report.from.unwrap_or(0), report.to, json)
}

/// Whether a read-only look finds the database at schema v10.
fn is_current(database: &Path) -> bool {
    Store::open_read_only(database)
        .and_then(|store| store.schema_version())
        .is_ok_and(|version| version == SCHEMA_VERSION)
}

fn report_migration(database: &Path, from: u32, to: u32, json: bool) -> Result<i32, Failure> {
    let text = if json {
        render::json_pretty(&MigrateJson {
            path: database.display().to_string(),
            from,
            to,
            migrated: from != to,
        })?
    } else if from == to {
        format!("{}: schema v{to}, nothing to migrate\n", database.display())
    } else {
        format!("{}: migrated schema v{from} -> v{to}\n", database.display())
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

/// The approval's artifact and its session's workspace root, or why there
/// is nothing to read.
fn locate(store: &Store, approval: &PlanApproval) -> Result<(String, Artifact), Failure> {
    let Some(artifact) = approval.artifact.clone() else {
        return Err(Failure::new(
            exit::FAILURE,
            format!(
                "{}: approval {} was migrated from schema v8 and has no artifact",
                ErrorCode::ArtifactMissing.as_str(),
                approval.id
            ),
        ));
    };
    let session = store
        .get_session(&approval.session_id)
        .map_err(|error| failure(&error))?;
    let Some(root) = session.and_then(|session| session.workspace_root) else {
        return Err(Failure::new(
            exit::FAILURE,
            format!(
                "{}: the session {} of approval {} has no workspace root",
                ErrorCode::ArtifactMissing.as_str(),
                approval.session_id,
                approval.id
            ),
        ));
    };
    Ok((root, artifact))
}

/// `approvals cat`.
pub(crate) fn cat(database: &Path, id: &str, force: bool, json: bool) -> Result<i32, Failure> {
    let store = open(database)?;
    let stored = get(&store, id)?;
    let (root, artifact) = locate(&store, &stored.approval)?;
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
                "plan-checkpoint: warning: {}: {error}; printing the bytes anyway (--force)",
                error.code().as_str()
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
    } else {
        render::write_stdout(&bytes)?;
    }
    Ok(exit::OK)
}

/// The outcome of checking one artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Check {
    /// Size and SHA-256 match.
    Ok,
    /// The file is gone.
    Missing,
    /// The bytes changed.
    Mismatch,
    /// The file could not be read safely (symlink, path escape, I/O).
    Unreadable,
    /// A row migrated from v8: it never had an artifact. Not a problem.
    Legacy,
}

impl Check {
    fn is_problem(self) -> bool {
        match self {
            Check::Ok | Check::Legacy => false,
            Check::Missing | Check::Mismatch | Check::Unreadable => true,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Check::Ok => "ok",
            Check::Missing => "missing",
            Check::Mismatch => "mismatch",
            Check::Unreadable => "unreadable",
            Check::Legacy => "legacy",
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ArtifactReport {
    approval: plan_protocol::PlanApproval,
    result: Check,
    error_code: Option<&'static str>,
    detail: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OrphanReport {
    workspace_root: String,
    path: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SkippedRoot {
    workspace_root: String,
    detail: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct VerifyJson {
    ok: bool,
    artifacts: Vec<ArtifactReport>,
    orphans: Vec<OrphanReport>,
    skipped_workspaces: Vec<SkippedRoot>,
}

/// Checks one approval's artifact.
fn check_one(
    store: &Store,
    roots: &mut HashMap<String, Option<String>>,
    stored: StoredApproval,
) -> ArtifactReport {
    let approval = stored.approval;
    let report = |result: Check, code: Option<ErrorCode>, detail: Option<String>, approval: &PlanApproval| {
        ArtifactReport {
            approval: wire(approval),
            result,
            error_code: code.map(ErrorCode::as_str),
            detail,
        }
    };
    let Some(artifact) = &approval.artifact else {
        return report(
            Check::Legacy,
            None,
            Some("migrated from schema v8; no artifact".to_owned()),
            &approval,
        );
    };
    let root = match roots.get(&approval.session_id) {
        Some(root) => root.clone(),
        None => {
            let root = match store.get_session(&approval.session_id) {
                Ok(session) => session.and_then(|session| session.workspace_root),
                Err(error) => {
                    return report(
                        Check::Unreadable,
                        Some(error.code()),
                        Some(error.to_string()),
                        &approval,
                    );
                }
            };
            roots.insert(approval.session_id.clone(), root.clone());
            root
        }
    };
    let Some(root) = root else {
        return report(
            Check::Missing,
            Some(ErrorCode::ArtifactMissing),
            Some("the session has no workspace root".to_owned()),
            &approval,
        );
    };
    match plan_storage::read_artifact(&root, artifact) {
        Ok(_) => report(Check::Ok, None, None, &approval),
        Err(error) => {
            let check = match &error {
                StorageError::ArtifactMissing { .. } => Check::Missing,
                StorageError::ArtifactIntegrityMismatch { .. } => Check::Mismatch,
                StorageError::SchemaUnsupported { .. }
                | StorageError::DatabaseUnreadable { .. }
                | StorageError::DatabaseMissing { .. }
                | StorageError::MigrationFailed { .. }
                | StorageError::Sqlite { .. }
                | StorageError::Io { .. }
                | StorageError::InvalidValue { .. }
                | StorageError::SessionNotFound { .. }
                | StorageError::SessionAlreadyExists { .. }
                | StorageError::ApprovalNotFound { .. }
                | StorageError::StaleApproval { .. }
                | StorageError::ApprovalConflict { .. }
                | StorageError::HostAlreadyRunning { .. }
                | StorageError::DatabasePathRefused { .. }
                | StorageError::DatabaseFilesChanged { .. }
                | StorageError::ArtifactPathEscape { .. }
                | StorageError::ArtifactSymlink { .. }
                | StorageError::ArtifactWriteFailed { .. } => Check::Unreadable,
            };
            report(check, Some(error.code()), Some(error.to_string()), &approval)
        }
    }
}

/// `approvals verify`.
pub(crate) fn verify(database: &Path, selection: &Selection, json: bool) -> Result<i32, Failure> {
    let store = open(database)?;
    let mut roots: HashMap<String, Option<String>> = HashMap::new();
    let mut artifacts = Vec::new();
    let mut workspaces: BTreeSet<String> = BTreeSet::new();
    match selection {
        Selection::One(id) => {
            let stored = get(&store, id)?;
            artifacts.push(check_one(&store, &mut roots, stored));
        }
        Selection::Session(session_id) => {
            let session = store.get_session(session_id).map_err(|error| failure(&error))?;
            let Some(session) = session else {
                return Err(failure(&StorageError::SessionNotFound {
                    id: session_id.clone(),
                }));
            };
            roots.insert(session.id.clone(), session.workspace_root.clone());
            let filter = ApprovalFilter {
                session_id: Some(session_id.clone()),
                ..ApprovalFilter::default()
            };
            let mut visit = |stored: StoredApproval| {
                artifacts.push(check_one(&store, &mut roots, stored));
                true
            };
            store
                .visit_approvals(&filter, &mut visit)
                .map_err(|error| failure(&error))?;
        }
        Selection::All => {
            let mut visit = |stored: StoredApproval| {
                artifacts.push(check_one(&store, &mut roots, stored));
                true
            };
            store
                .visit_approvals(&ApprovalFilter::default(), &mut visit)
                .map_err(|error| failure(&error))?;
            workspaces.extend(store.workspace_roots().map_err(|error| failure(&error))?);
        }
    }
    workspaces.extend(roots.into_values().flatten());
    let mut orphans = Vec::new();
    let mut skipped = Vec::new();
    for root in workspaces {
        let files = match plan_storage::list_artifact_files(&root) {
            Ok(files) => files,
            Err(StorageError::ArtifactWriteFailed { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                skipped.push(SkippedRoot {
                    workspace_root: root,
                    detail: "the workspace root does not exist; no orphans to look for".to_owned(),
                });
                continue;
            }
            Err(error) => return Err(failure(&error)),
        };
        if files.is_empty() {
            continue;
        }
        let recorded: BTreeSet<String> = store
            .artifact_paths_in_workspace(&root)
            .map_err(|error| failure(&error))?
            .into_iter()
            .collect();
        for path in files {
            if !recorded.contains(&path) {
                orphans.push(OrphanReport {
                    workspace_root: root.clone(),
                    path,
                });
            }
        }
    }
    let ok = orphans.is_empty() && !artifacts.iter().any(|report| report.result.is_problem());
    let text = if json {
        render::json_pretty(&VerifyJson {
            ok,
            artifacts,
            orphans,
            skipped_workspaces: skipped,
        })?
    } else {
        verify_text(&artifacts, &orphans, &skipped)
    };
    render::write_stdout(text.as_bytes())?;
    Ok(if ok { exit::OK } else { exit::FAILURE })
}

fn verify_text(artifacts: &[ArtifactReport], orphans: &[OrphanReport], skipped: &[SkippedRoot]) -> String {
    let mut out = String::new();
    let mut tally: BTreeMap<&'static str, usize> = BTreeMap::new();
    for report in artifacts {
        *tally.entry(report.result.label()).or_default() += 1;
        let what = report
            .approval
            .artifact
            .as_ref()
            .map_or_else(|| "(no artifact)".to_owned(), |artifact| artifact.path.clone());
        out.push_str(&format!(
            "{:<10}  {}  {what}\n",
            report.result.label(),
            report.approval.id
        ));
        if report.result.is_problem()
            && let Some(detail) = &report.detail
        {
            let code = report.error_code.unwrap_or("");
            out.push_str(&format!("            {code}: {detail}\n"));
        }
    }
    for orphan in orphans {
        out.push_str(&format!(
            "{:<10}  {}/{}  (no approval records it)\n",
            "orphan", orphan.workspace_root, orphan.path
        ));
    }
    for root in skipped {
        out.push_str(&format!(
            "{:<10}  {}  ({})\n",
            "skipped", root.workspace_root, root.detail
        ));
    }
    let counts: Vec<String> = ["ok", "missing", "mismatch", "unreadable", "legacy"]
        .iter()
        .filter_map(|label| tally.get(label).map(|count| format!("{count} {label}")))
        .collect();
    let counts = if counts.is_empty() {
        "none".to_owned()
    } else {
        counts.join(", ")
    };
    let problems = artifacts
        .iter()
        .filter(|report| report.result.is_problem())
        .count()
        + orphans.len();
    out.push_str(&format!(
        "{} approval(s) checked: {counts}; {} orphan file(s); {}\n",
        artifacts.len(),
        orphans.len(),
        if problems == 0 {
            "everything verifies".to_owned()
        } else {
            format!("{problems} problem(s)")
        }
    ));
    out
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DiffJson {
    from: plan_protocol::PlanApproval,
    to: plan_protocol::PlanApproval,
    identical: bool,
    unified_diff: String,
}

/// Reads an approval's artifact, checked, as text.
fn artifact_text(store: &Store, approval: &PlanApproval) -> Result<(String, String), Failure> {
    let (root, artifact) = locate(store, approval)?;
    let bytes = plan_storage::read_artifact(&root, &artifact).map_err(|error| failure(&error))?;
    Ok((artifact.path, String::from_utf8_lossy(&bytes).into_owned()))
}

/// `approvals diff A B`.
pub(crate) fn diff(database: &Path, a: &str, b: &str, json: bool) -> Result<i32, Failure> {
    let store = open(database)?;
    let from = get(&store, a)?;
    let to = get(&store, b)?;
    let (from_path, from_text) = artifact_text(&store, &from.approval)?;
    let (to_path, to_text) = artifact_text(&store, &to.approval)?;
    let diff = similar::TextDiff::from_lines(&from_text, &to_text);
    let unified = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("{a}:{from_path}"), &format!("{b}:{to_path}"))
        .to_string();
    let identical = from_text == to_text;
    let text = if json {
        render::json_pretty(&DiffJson {
            from: wire(&from.approval),
            to: wire(&to.approval),
            identical,
            unified_diff: unified,
        })?
    } else if identical {
        crate::log::line("plan-checkpoint: the two artifacts are identical");
        String::new()
    } else {
        unified
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
