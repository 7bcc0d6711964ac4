//! Review and audit over the recorded artifacts: locating an approval's
//! artifact, reading it verified, verifying a scope (with orphan files) and
//! diffing two submissions.
//!
//! These are the library's only implementations; the host, `serve`, the FFI
//! and the CLI all call them. What a finding means and which scopes look for
//! orphans is plan-core's (`VerifyScope`, `VerifyReport`); this module reads
//! rows and files and classifies what it found by the error it got.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use plan_core::{
    ApprovalId, ArtifactCheck, ArtifactVerification, OrphanArtifact, PlanApproval, PlanDiff, SessionId,
    SkippedWorkspace, VerifyReport, VerifyScope, normalize_workspace_root,
};
use rusqlite::params;

use crate::store::{APPROVAL_COLUMNS, query_approvals};
use crate::{ApprovalFilter, StorageError, Store, StoredApproval, list_artifact_files, read_artifact};

/// Where one approval's artifact is: its session's workspace root (in its
/// normalized form) and the recorded path, SHA-256 and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactLocation {
    /// The normalized workspace root.
    pub workspace_root: String,
    /// The recorded artifact.
    pub artifact: plan_core::Artifact,
}

/// The lines of context `plan/diff` shows around each change.
const DIFF_CONTEXT: usize = 3;

impl Store {
    /// Where an approval's artifact is, or why it has none: a row migrated
    /// from v8 is [`StorageError::LegacyApproval`], a session without a
    /// workspace [`StorageError::NoWorkspace`] (both `ARTIFACT_MISSING`).
    pub fn locate_artifact(&self, approval: &PlanApproval) -> Result<ArtifactLocation, StorageError> {
        let root = self.session_root(&approval.session_id)?;
        locate(approval, root.as_deref())
    }

    /// An approval's recorded artifact and its bytes, checked against the
    /// record (see [`read_artifact`]).
    pub fn read_recorded_artifact(
        &self,
        approval: &PlanApproval,
    ) -> Result<(plan_core::Artifact, Vec<u8>), StorageError> {
        let location = self.locate_artifact(approval)?;
        let bytes = read_artifact(&location.workspace_root, &location.artifact)?;
        Ok((location.artifact, bytes))
    }

    /// Checks one approval's artifact (size and SHA-256 of the file as it
    /// is now) and says what it found, as [`Store::verify`] does for each
    /// approval: the fact a decision is made from (plan-core's
    /// `ArtifactVerification::refuses_approval`). Only a failure to read
    /// the database is an error.
    ///
    /// `workspace_root` is the root of the approval's session as the caller
    /// read it with the decision's rows: the check adds no query of its own
    /// inside the decision.
    pub fn check_artifact(
        &self,
        approval: &PlanApproval,
        workspace_root: Option<&str>,
    ) -> Result<ArtifactVerification, StorageError> {
        let mut roots = HashMap::from([(approval.session_id.clone(), workspace_root.map(str::to_owned))]);
        self.check_one(&mut roots, approval)
    }

    /// Verifies the approvals of `scope` (size and SHA-256 of each artifact)
    /// and, for a session or everything, looks for orphan files under each
    /// workspace's `.pi/plan/`. An unknown approval or session fails the
    /// whole call; a problem with one artifact is a finding in the report.
    /// The report holds one entry per approval: for a whole history, use
    /// [`Store::visit_verification`], which holds none.
    pub fn verify(&self, scope: &VerifyScope) -> Result<VerifyReport, StorageError> {
        let mut artifacts = Vec::new();
        let findings = self.visit_verification(scope, &mut |check| {
            artifacts.push(check);
            true
        })?;
        Ok(VerifyReport {
            artifacts,
            orphans: findings.orphans,
            skipped_workspaces: findings.skipped_workspaces,
        })
    }

    /// [`Store::verify`] without holding the checks: `visit` gets each
    /// approval's check as it is made, newest first (returning `false`
    /// stops the walk; orphans are then not looked for), and the orphans
    /// and skipped workspaces come back at the end. Memory does not grow
    /// with the number of approvals: rows are read one at a time, and the
    /// orphan search merges each workspace's sorted file listing with the
    /// sorted recorded paths as SQLite returns them.
    pub fn visit_verification(
        &self,
        scope: &VerifyScope,
        visit: &mut dyn FnMut(ArtifactVerification) -> bool,
    ) -> Result<WorkspaceFindings, StorageError> {
        self.visit_verification_in(scope, None, visit)
    }

    /// [`Store::visit_verification`], reading every plan file under
    /// `workspace` instead of the root its session records, when given: the
    /// check of a copied project (the workspace moved, or restored from a
    /// backup beside the original). The orphan search then scans
    /// `workspace` against the paths recorded for the scope. The caller
    /// makes sure the scope's approvals share one recorded workspace.
    pub fn visit_verification_in(
        &self,
        scope: &VerifyScope,
        workspace: Option<&str>,
        visit: &mut dyn FnMut(ArtifactVerification) -> bool,
    ) -> Result<WorkspaceFindings, StorageError> {
        let mut roots: HashMap<SessionId, Option<String>> = HashMap::new();
        let mut failure: Option<StorageError> = None;
        let mut stopped = false;
        let mut check = |stored: StoredApproval| {
            if let Some(workspace) = workspace {
                roots.insert(stored.approval.session_id.clone(), Some(workspace.to_owned()));
            }
            match self.check_one(&mut roots, &stored.approval) {
                Ok(found) => {
                    if !visit(found) {
                        stopped = true;
                        return false;
                    }
                }
                Err(error) => {
                    failure = Some(error);
                    return false;
                }
            }
            true
        };
        match scope {
            VerifyScope::Approval(id) => {
                let stored = self
                    .get_approval(id)?
                    .ok_or_else(|| StorageError::ApprovalNotFound { id: id.to_string() })?;
                check(stored);
            }
            VerifyScope::Session(session_id) => {
                if self.get_session(session_id)?.is_none() {
                    return Err(StorageError::SessionNotFound {
                        id: session_id.to_string(),
                    });
                }
                let filter = ApprovalFilter {
                    session_id: Some(session_id.clone()),
                    ..ApprovalFilter::default()
                };
                self.visit_approvals(&filter, &mut check)?;
            }
            VerifyScope::Everything => {
                self.visit_approvals(&ApprovalFilter::default(), &mut check)?;
            }
        }
        if let Some(error) = failure {
            return Err(error);
        }
        let mut findings = WorkspaceFindings::default();
        if scope.looks_for_orphans() && !stopped {
            let workspaces = match scope {
                VerifyScope::Session(session_id) => self
                    .session_root(session_id)?
                    .into_iter()
                    .collect::<Vec<String>>(),
                VerifyScope::Approval(_) | VerifyScope::Everything => self.workspace_roots()?,
            };
            match workspace {
                // The recorded roots' paths, against the files of the copy.
                Some(workspace) => self.find_orphans_in(workspace, &workspaces, &mut findings)?,
                None => self.find_orphans(&workspaces, &mut findings)?,
            }
        }
        Ok(findings)
    }

    /// Compares an approval's artifact with another one's, exact bytes
    /// after checking each one's size and SHA-256. Without `against`, the
    /// other one is the previous submission of the same session (by
    /// `createdAt`, then id); a session's first submission has nothing to
    /// compare with.
    pub fn diff(
        &self,
        approval_id: &ApprovalId,
        against: Option<&ApprovalId>,
    ) -> Result<PlanDiff, StorageError> {
        let approval = self.approval_row(approval_id)?;
        let other = match against {
            Some(against) => Some(self.approval_row(against)?),
            None => self.previous_submission(&approval)?,
        };
        let Some(other) = other else {
            // Checked all the same: a diff never vouches for a bad artifact.
            self.recorded_text(&approval)?;
            return Ok(PlanDiff {
                approval_id: approval.id,
                against_approval_id: None,
                identical: false,
                unified: None,
            });
        };
        let (path, text) = self.recorded_text(&approval)?;
        let (other_path, other_text) = self.recorded_text(&other)?;
        let identical = text == other_text;
        let unified = if identical {
            String::new()
        } else {
            similar::TextDiff::from_lines(&other_text, &text)
                .unified_diff()
                .context_radius(DIFF_CONTEXT)
                .header(
                    &format!("{}:{other_path}", other.id),
                    &format!("{}:{path}", approval.id),
                )
                .to_string()
        };
        Ok(PlanDiff {
            approval_id: approval.id,
            against_approval_id: Some(other.id),
            identical,
            unified: Some(unified),
        })
    }

    fn approval_row(&self, id: &ApprovalId) -> Result<PlanApproval, StorageError> {
        self.get_approval(id)?
            .map(|stored| stored.approval)
            .ok_or_else(|| StorageError::ApprovalNotFound { id: id.to_string() })
    }

    /// The session's submission just before `approval`, if any.
    fn previous_submission(&self, approval: &PlanApproval) -> Result<Option<PlanApproval>, StorageError> {
        let sql = format!(
            "SELECT {APPROVAL_COLUMNS} FROM plan_approvals WHERE session_id = ?1 \
             AND (created_at < ?2 OR (created_at = ?2 AND id < ?3)) \
             ORDER BY created_at DESC, id DESC LIMIT 1"
        );
        let rows = query_approvals(
            &self.conn,
            &sql,
            params![
                approval.session_id.as_str(),
                approval.created_at,
                approval.id.as_str()
            ],
        )?;
        Ok(rows.into_iter().next().map(|stored| stored.approval))
    }

    /// An artifact's recorded path and its verified text.
    fn recorded_text(&self, approval: &PlanApproval) -> Result<(String, String), StorageError> {
        let location = self.locate_artifact(approval)?;
        let bytes = read_artifact(&location.workspace_root, &location.artifact)?;
        // Verified bytes are the Markdown SubmitPlan accepted, a JSON string
        // and so UTF-8; only a hand-made row could record other bytes, and a
        // diff of those is still best shown as text.
        let text = String::from_utf8_lossy(&bytes).into_owned();
        Ok((location.artifact.path, text))
    }

    /// The workspace root of a session as stored (`None` when it has none).
    fn session_root(&self, session_id: &SessionId) -> Result<Option<String>, StorageError> {
        let session = self
            .get_session(session_id)?
            .ok_or_else(|| StorageError::SessionNotFound {
                id: session_id.to_string(),
            })?;
        Ok(session.workspace_root)
    }

    /// Checks one approval; only a failure to read the database is an error.
    fn check_one(
        &self,
        roots: &mut HashMap<SessionId, Option<String>>,
        approval: &PlanApproval,
    ) -> Result<ArtifactVerification, StorageError> {
        let root = match roots.get(&approval.session_id) {
            Some(root) => root.clone(),
            None => {
                let root = self.session_root(&approval.session_id)?;
                roots.insert(approval.session_id.clone(), root.clone());
                root
            }
        };
        let outcome = locate(approval, root.as_deref())
            .and_then(|location| read_artifact(&location.workspace_root, &location.artifact));
        let (result, error) = match outcome {
            Ok(_) => (ArtifactCheck::Ok, None),
            Err(error) => (classify(&error), Some(error)),
        };
        Ok(ArtifactVerification {
            approval_id: approval.id.clone(),
            result,
            error_code: error.as_ref().and_then(|error| match result {
                ArtifactCheck::Legacy => None,
                ArtifactCheck::Ok
                | ArtifactCheck::Missing
                | ArtifactCheck::Mismatch
                | ArtifactCheck::Unreadable => Some(error.code()),
            }),
            detail: error.map(|error| error.to_string()),
        })
    }

    /// Looks for orphan files under each workspace, comparing normalized
    /// roots: the recorded paths of every session whose root normalizes to
    /// the same workspace count for it.
    fn find_orphans(
        &self,
        workspaces: &[String],
        findings: &mut WorkspaceFindings,
    ) -> Result<(), StorageError> {
        let mut stored_roots: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for stored in self.workspace_roots()? {
            if let Ok(normalized) = normalize_workspace_root(&stored) {
                stored_roots.entry(normalized).or_default().push(stored);
            }
        }
        self.scan_for_orphans(
            workspaces,
            &|normalized| stored_roots.get(normalized).cloned().unwrap_or_default(),
            findings,
        )
    }

    /// The orphan search of a copy: the files under `workspace` against the
    /// paths recorded for `recorded` (the roots the copy stands for).
    fn find_orphans_in(
        &self,
        workspace: &str,
        recorded: &[String],
        findings: &mut WorkspaceFindings,
    ) -> Result<(), StorageError> {
        let recorded = recorded.to_vec();
        self.scan_for_orphans(&[workspace.to_owned()], &|_| recorded.clone(), findings)
    }

    /// Scans each of `workspaces` for files under `.pi/plan/` that none of
    /// the paths recorded for `stored(normalized root)` names.
    fn scan_for_orphans(
        &self,
        workspaces: &[String],
        stored: &dyn Fn(&str) -> Vec<String>,
        findings: &mut WorkspaceFindings,
    ) -> Result<(), StorageError> {
        let mut scanned: BTreeSet<String> = BTreeSet::new();
        for root in workspaces {
            let normalized = match normalize_workspace_root(root) {
                Ok(normalized) => normalized,
                Err(refusal) => {
                    findings.skipped_workspaces.push(SkippedWorkspace {
                        workspace_root: root.clone(),
                        detail: refusal.to_string(),
                    });
                    continue;
                }
            };
            if !scanned.insert(normalized.clone()) {
                continue;
            }
            let files = match list_artifact_files(&normalized) {
                Ok(files) => files,
                Err(StorageError::WorkspaceMissing { .. }) => {
                    findings.skipped_workspaces.push(SkippedWorkspace {
                        workspace_root: normalized,
                        detail: "the workspace root does not exist; no orphans to look for".to_owned(),
                    });
                    continue;
                }
                Err(error) => {
                    findings.skipped_workspaces.push(SkippedWorkspace {
                        workspace_root: normalized,
                        detail: format!("{}: {error}", error.code().as_str()),
                    });
                    continue;
                }
            };
            if files.is_empty() {
                continue;
            }
            let stored = stored(&normalized);
            let mut files = files.into_iter().peekable();
            // Both sides are sorted: walk them together, so the recorded
            // paths are never collected.
            self.visit_recorded_paths(&stored, &mut |recorded| {
                while let Some(file) = files.next_if(|file| file.as_str() < recorded) {
                    findings.orphans.push(OrphanArtifact {
                        workspace_root: normalized.clone(),
                        path: file,
                    });
                }
                files.next_if(|file| file == recorded);
                files.peek().is_some()
            })?;
            findings.orphans.extend(files.map(|path| OrphanArtifact {
                workspace_root: normalized.clone(),
                path,
            }));
        }
        Ok(())
    }
}

/// What [`Store::visit_verification`] found besides the checks of each
/// approval.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkspaceFindings {
    /// Orphan files, by workspace and path.
    pub orphans: Vec<OrphanArtifact>,
    /// Workspaces whose orphans could not be looked for.
    pub skipped_workspaces: Vec<SkippedWorkspace>,
}

/// The one rule for where an artifact is, given its session's root.
fn locate(approval: &PlanApproval, session_root: Option<&str>) -> Result<ArtifactLocation, StorageError> {
    let Some(artifact) = approval.artifact.clone() else {
        return Err(StorageError::LegacyApproval {
            id: approval.id.to_string(),
        });
    };
    let Some(root) = session_root else {
        return Err(StorageError::NoWorkspace {
            id: approval.id.to_string(),
            session_id: approval.session_id.to_string(),
        });
    };
    let workspace_root =
        normalize_workspace_root(root).map_err(|refusal| StorageError::ArtifactPathEscape {
            detail: refusal.to_string(),
        })?;
    Ok(ArtifactLocation {
        workspace_root,
        artifact,
    })
}

/// What a failure to locate or read an artifact means for a verification.
fn classify(error: &StorageError) -> ArtifactCheck {
    match error {
        StorageError::LegacyApproval { .. } => ArtifactCheck::Legacy,
        StorageError::ArtifactMissing { .. }
        | StorageError::WorkspaceMissing { .. }
        | StorageError::NoWorkspace { .. } => ArtifactCheck::Missing,
        StorageError::ArtifactIntegrityMismatch { .. } => ArtifactCheck::Mismatch,
        StorageError::ArtifactReadFailed { .. }
        | StorageError::ArtifactPathEscape { .. }
        | StorageError::ArtifactSymlink { .. }
        | StorageError::ArtifactWriteFailed { .. }
        | StorageError::SchemaUnsupported { .. }
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
        | StorageError::DatabasePathRefused { .. }
        | StorageError::DatabaseFilesChanged { .. }
        | StorageError::HostAlreadyRunning { .. } => ArtifactCheck::Unreadable,
    }
}
