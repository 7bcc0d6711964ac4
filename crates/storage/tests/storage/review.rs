//! Review and audit: locating artifacts, verifying a scope (orphans only
//! for a session or everything, normalized roots), diffing submissions, and
//! read-side errors that never say "could not be written".

use std::path::Path;

use plan_core::{ApprovalStatus, ArtifactCheck, Effect, ErrorCode, PlanApproval, Session, VerifyScope};
use plan_storage::{ExclusiveStore, StorageError, Store, write_artifact};

const NOW: i64 = 1_790_000_000_000;

struct Place {
    _dir: tempfile::TempDir,
    root: String,
    db: std::path::PathBuf,
    store: Store,
}

impl Place {
    fn new() -> Place {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir(&workspace).unwrap();
        let db = dir.path().join("plans.db");
        let (store, _) = Store::open(&db).unwrap();
        Place {
            root: workspace.to_str().unwrap().to_owned(),
            db,
            _dir: dir,
            store,
        }
    }

    fn session(&mut self, id: &str, root: Option<&str>) {
        let session = Session::new(id, root.map(str::to_owned));
        self.store.create_session(&session, NOW).unwrap();
    }

    /// A decided (rejected) submission with a real artifact.
    fn submit(&mut self, id: &str, session: &str, created_at: i64, markdown: &str) -> PlanApproval {
        let artifact = write_artifact(&self.root, id, markdown.as_bytes(), created_at, id).unwrap();
        let mut approval = crate::support::pending(id, session, created_at);
        approval.artifact = Some(artifact);
        approval.status = ApprovalStatus::Rejected;
        approval.decided_at = Some(created_at + 1);
        self.store
            .apply(&[Effect::InsertApproval(approval.clone())], created_at)
            .unwrap();
        approval
    }

    fn file(&self, approval: &PlanApproval) -> std::path::PathBuf {
        Path::new(&self.root).join(&approval.artifact.as_ref().unwrap().path)
    }
}

#[test]
fn verifying_one_approval_checks_that_approval_only() {
    let mut place = Place::new();
    place.session("s", Some(&place.root.clone()));
    let approval = place.submit("a1", "s", NOW, "# One\n");
    std::fs::write(Path::new(&place.root).join(".pi/plan/stray.md"), "# stray\n").unwrap();

    let one = place.store.verify(&VerifyScope::Approval("a1".into())).unwrap();
    assert!(one.ok(), "{one:?}");
    assert_eq!(one.artifacts.len(), 1);
    assert_eq!(one.artifacts[0].result, ArtifactCheck::Ok);
    assert!(one.orphans.is_empty());

    for scope in [VerifyScope::Session("s".into()), VerifyScope::Everything] {
        let wide = place.store.verify(&scope).unwrap();
        assert!(!wide.ok(), "{scope:?}");
        assert_eq!(wide.orphans.len(), 1, "{scope:?}");
        assert_eq!(wide.orphans[0].path, ".pi/plan/stray.md");
        assert_eq!(wide.orphans[0].workspace_root, place.root);
    }

    std::fs::write(place.file(&approval), "# Changed\n").unwrap();
    let tampered = place.store.verify(&VerifyScope::Approval("a1".into())).unwrap();
    assert_eq!(tampered.artifacts[0].result, ArtifactCheck::Mismatch);
    assert_eq!(
        tampered.artifacts[0].error_code,
        Some(ErrorCode::ArtifactIntegrityMismatch)
    );
    std::fs::remove_file(place.file(&approval)).unwrap();
    let missing = place.store.verify(&VerifyScope::Approval("a1".into())).unwrap();
    assert_eq!(missing.artifacts[0].result, ArtifactCheck::Missing);
    assert!(!missing.ok());

    let unknown = place.store.verify(&VerifyScope::Approval("nope".into()));
    assert_eq!(unknown.unwrap_err().code(), ErrorCode::ApprovalNotFound);
    let unknown = place.store.verify(&VerifyScope::Session("nope".into()));
    assert_eq!(unknown.unwrap_err().code(), ErrorCode::SessionNotFound);
}

#[test]
fn roots_are_compared_normalized_so_a_trailing_slash_is_the_same_workspace() {
    let mut place = Place::new();
    let root = place.root.clone();
    // A session stored with an unnormalized root (as a v8 database may hold).
    place.session("slash", Some(&format!("{root}/")));
    place.session("plain", Some(&root));
    place.submit("a1", "slash", NOW, "# One\n");
    place.submit("a2", "plain", NOW + 1, "# Two\n");
    let report = place.store.verify(&VerifyScope::Everything).unwrap();
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.artifacts.len(), 2);
    let by_session = place.store.verify(&VerifyScope::Session("plain".into())).unwrap();
    assert!(by_session.orphans.is_empty(), "{by_session:?}");
    let location = place
        .store
        .locate_artifact(
            &place
                .store
                .get_approval(&plan_core::ApprovalId::from("a1"))
                .unwrap()
                .unwrap()
                .approval,
        )
        .unwrap();
    assert_eq!(location.workspace_root, root);
}

#[test]
fn missing_workspaces_are_skipped_and_legacy_rows_are_not_problems() {
    let mut place = Place::new();
    place.session("gone", Some("/nonexistent/plan-checkpoint-workspace"));
    place.session("nowhere", None);
    crate::support::execute(
        &place.db,
        &format!(
            "INSERT INTO plan_approvals (id, session_id, turn_id, title, question, status, created_at, \
             expires_at, decided_at, legacy_proposal_json) VALUES ('legacy', 'nowhere', 't', 'T', 'Q', \
             'rejected', {NOW}, {NOW}, {NOW}, '{{}}')"
        ),
    );
    let report = place.store.verify(&VerifyScope::Everything).unwrap();
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.artifacts[0].result, ArtifactCheck::Legacy);
    assert_eq!(report.artifacts[0].error_code, None);
    assert_eq!(report.skipped_workspaces.len(), 1, "{report:?}");
    assert_eq!(
        report.skipped_workspaces[0].workspace_root,
        "/nonexistent/plan-checkpoint-workspace"
    );
    let legacy = place
        .store
        .get_approval(&plan_core::ApprovalId::from("legacy"))
        .unwrap()
        .unwrap()
        .approval;
    let error = place.store.read_recorded_artifact(&legacy).unwrap_err();
    assert!(matches!(error, StorageError::LegacyApproval { .. }), "{error}");
    assert_eq!(error.code(), ErrorCode::ArtifactMissing);
}

#[test]
fn reads_of_a_missing_workspace_are_read_errors_not_write_failures() {
    let mut place = Place::new();
    let root = place.root.clone();
    place.session("s", Some(&root));
    let approval = place.submit("a1", "s", NOW, "# One\n");
    let artifact = approval.artifact.clone().unwrap();
    std::fs::remove_dir_all(&root).unwrap();
    let error = plan_storage::read_artifact(&root, &artifact).unwrap_err();
    assert!(matches!(error, StorageError::WorkspaceMissing { .. }), "{error}");
    assert_eq!(error.code(), ErrorCode::ArtifactMissing);
    let error = plan_storage::list_artifact_files(&root).unwrap_err();
    assert!(matches!(error, StorageError::WorkspaceMissing { .. }), "{error}");
    assert!(!error.to_string().contains("written"), "{error}");
    // A root that is a file is not a workspace either.
    std::fs::write(&root, "not a directory").unwrap();
    let error = plan_storage::read_artifact(&root, &artifact).unwrap_err();
    assert!(matches!(error, StorageError::WorkspaceMissing { .. }), "{error}");
}

#[test]
fn a_diff_compares_with_the_previous_submission_or_the_one_named() {
    let mut place = Place::new();
    place.session("s", Some(&place.root.clone()));
    place.session("t", Some(&place.root.clone()));
    place.submit("a1", "s", NOW, "# Plan\n\n1. Read.\n2. Split.\n");
    place.submit("a2", "s", NOW + 10, "# Plan\n\n1. Read.\n2. Split in two.\n");
    // Same instant as a2 and a larger id: a2 comes first.
    place.submit("a3", "s", NOW + 10, "# Plan\n\n1. Read.\n2. Split in two.\n");
    place.submit("b1", "t", NOW + 5, "# Other\n");

    let first = place.store.diff(&"a1".into(), None).unwrap();
    assert_eq!(first.against_approval_id, None);
    assert_eq!(first.unified, None);
    assert!(!first.identical);

    let second = place.store.diff(&"a2".into(), None).unwrap();
    assert_eq!(second.against_approval_id, Some("a1".into()));
    assert!(!second.identical);
    let unified = second.unified.unwrap();
    assert!(unified.starts_with("--- a1:.pi/plan/"), "{unified}");
    assert!(unified.contains("\n-2. Split.\n+2. Split in two.\n"), "{unified}");

    let third = place.store.diff(&"a3".into(), None).unwrap();
    assert_eq!(third.against_approval_id, Some("a2".into()));
    assert!(third.identical);
    assert_eq!(third.unified.as_deref(), Some(""));

    let named = place.store.diff(&"a2".into(), Some(&"b1".into())).unwrap();
    assert_eq!(named.against_approval_id, Some("b1".into()));
    assert!(named.unified.unwrap().contains("-# Other\n"));

    let unknown = place.store.diff(&"a2".into(), Some(&"nope".into())).unwrap_err();
    assert_eq!(unknown.code(), ErrorCode::ApprovalNotFound);
    let a1 = place
        .store
        .get_approval(&plan_core::ApprovalId::from("a1"))
        .unwrap()
        .unwrap()
        .approval;
    std::fs::write(place.file(&a1), "# tampered\n").unwrap();
    let error = place.store.diff(&"a2".into(), None).unwrap_err();
    assert_eq!(error.code(), ErrorCode::ArtifactIntegrityMismatch);
    std::fs::remove_file(place.file(&a1)).unwrap();
    let error = place.store.diff(&"a2".into(), None).unwrap_err();
    assert_eq!(error.code(), ErrorCode::ArtifactMissing);
}

#[test]
fn an_exclusive_open_takes_the_lock_before_it_migrates() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::support::fixture_database(dir.path(), "v8.db");
    let lock = plan_storage::HostLock::acquire(&db).unwrap();
    let refused = ExclusiveStore::open(&db).unwrap_err();
    assert_eq!(refused.code(), ErrorCode::HostAlreadyRunning);
    let version = crate::support::table_rows(&db, "PRAGMA user_version");
    assert_eq!(version, ["int 8"], "refused before migrating");
    drop(lock);
    let opened = ExclusiveStore::open(&db).unwrap();
    assert_eq!(opened.migration.from, Some(8));
    assert_eq!(opened.store.schema_version().unwrap(), 10);
    let again = ExclusiveStore::open(&db).unwrap_err();
    assert_eq!(again.code(), ErrorCode::HostAlreadyRunning);
}

#[test]
fn visiting_a_verification_streams_the_same_checks_and_merges_orphans() {
    let mut place = Place::new();
    let root = place.root.clone();
    place.session("s", Some(&root));
    let mut approvals = Vec::new();
    for n in 0..5 {
        approvals.push(place.submit(&format!("a{n}"), "s", NOW + n, &format!("# Plan {n}\n")));
    }
    // Orphans sorted before, between and after the recorded paths.
    let plan_dir = Path::new(&root).join(".pi/plan");
    for name in ["0-before.md", "a2-between.md", "zz-after.md"] {
        std::fs::write(plan_dir.join(name), "# stray\n").unwrap();
    }
    std::fs::remove_file(place.file(&approvals[3])).unwrap();
    let report = place.store.verify(&VerifyScope::Everything).unwrap();
    let mut seen = Vec::new();
    let findings = place
        .store
        .visit_verification(&VerifyScope::Everything, &mut |check| {
            seen.push(check);
            true
        })
        .unwrap();
    assert_eq!(seen, report.artifacts);
    assert_eq!(findings.orphans, report.orphans);
    let orphans: Vec<&str> = findings
        .orphans
        .iter()
        .map(|orphan| orphan.path.as_str())
        .collect();
    assert_eq!(
        orphans,
        [
            ".pi/plan/0-before.md",
            ".pi/plan/a2-between.md",
            ".pi/plan/zz-after.md"
        ]
    );
    let tally = report.tally();
    assert_eq!(
        (
            tally.checked(),
            tally.count(ArtifactCheck::Missing),
            tally.problems()
        ),
        (5, 1, 4)
    );
    assert!(!tally.ok());
    // Stopping early stops the walk and skips the orphan search.
    let mut count = 0;
    let stopped = place
        .store
        .visit_verification(&VerifyScope::Everything, &mut |_| {
            count += 1;
            count < 2
        })
        .unwrap();
    assert_eq!(count, 2);
    assert!(stopped.orphans.is_empty());
}
