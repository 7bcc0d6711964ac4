//! Review and audit values (verify, diff): what a check of the recorded
//! artifacts may find and what it reports.
//!
//! The findings themselves (`ArtifactCheck`, `ArtifactVerification`,
//! `OrphanArtifact`, `SkippedWorkspace`, `PlanDiff`) are declared once in
//! `objects`. Storage carries the checks out (it is the layer that reads
//! files); the rules of the report live here: which scopes look for orphan files, which
//! findings are problems, when a report is ok. Nothing here reads anything.

use crate::objects::{
    Artifact, ArtifactCheck, ArtifactContent, ArtifactVerification, OrphanArtifact, SkippedWorkspace,
};
use crate::{ApprovalId, ErrorCode, SessionId};

/// What `plan/verify` checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyScope {
    /// One approval, and nothing else.
    Approval(ApprovalId),
    /// Every approval of a session, and its workspace's orphan files.
    Session(SessionId),
    /// Every approval and every workspace.
    Everything,
}

impl VerifyScope {
    /// The scope the optional ids of a request name: at most one of them
    /// (`INVALID_PARAMS` for both); neither means everything.
    pub fn select(
        approval_id: Option<ApprovalId>,
        session_id: Option<SessionId>,
    ) -> Result<VerifyScope, ErrorCode> {
        match (approval_id, session_id) {
            (Some(_), Some(_)) => Err(ErrorCode::InvalidParams),
            (Some(approval_id), None) => Ok(VerifyScope::Approval(approval_id)),
            (None, Some(session_id)) => Ok(VerifyScope::Session(session_id)),
            (None, None) => Ok(VerifyScope::Everything),
        }
    }

    /// Whether orphan files are looked for: for a session or everything, never
    /// for one approval (verifying one approval checks that approval alone).
    pub const fn looks_for_orphans(&self) -> bool {
        match self {
            VerifyScope::Approval(_) => false,
            VerifyScope::Session(_) | VerifyScope::Everything => true,
        }
    }
}

impl ArtifactContent {
    /// `plan/readArtifact`'s answer from the bytes of `artifact` that
    /// storage read and found matching the record (size and SHA-256). A
    /// plan is Markdown text, as SubmitPlan took it, so bytes that are not
    /// UTF-8 are not the plan that was submitted, whatever the record says:
    /// `ARTIFACT_INTEGRITY_MISMATCH`.
    pub fn from_checked(artifact: Artifact, bytes: Vec<u8>) -> Result<ArtifactContent, ErrorCode> {
        let markdown = String::from_utf8(bytes).map_err(|_| ErrorCode::ArtifactIntegrityMismatch)?;
        Ok(ArtifactContent {
            markdown,
            sha256: artifact.sha256,
            size: artifact.size,
        })
    }
}

impl ArtifactCheck {
    /// Whether the finding makes a report not ok. A legacy row is not a
    /// problem: v8 never wrote artifacts.
    pub const fn is_problem(self) -> bool {
        match self {
            ArtifactCheck::Ok | ArtifactCheck::Legacy => false,
            ArtifactCheck::Missing | ArtifactCheck::Mismatch | ArtifactCheck::Unreadable => true,
        }
    }
}

impl ArtifactVerification {
    /// Why this finding refuses an approval, if it does: a plan is approved
    /// only as it was submitted, so anything but a matching file refuses
    /// (`ARTIFACT_MISSING` for a file or workspace that is gone, and for a
    /// row without an artifact; `ARTIFACT_INTEGRITY_MISMATCH` for other
    /// bytes; a file that cannot be read safely refuses with the code its
    /// check found, `ARTIFACT_INTEGRITY_MISMATCH` when it named none).
    /// Rejecting needs no check: it grants nothing.
    pub fn refuses_approval(&self) -> Option<ErrorCode> {
        match self.result {
            ArtifactCheck::Ok => None,
            ArtifactCheck::Missing | ArtifactCheck::Legacy => Some(ErrorCode::ArtifactMissing),
            ArtifactCheck::Mismatch => Some(ErrorCode::ArtifactIntegrityMismatch),
            ArtifactCheck::Unreadable => {
                Some(self.error_code.unwrap_or(ErrorCode::ArtifactIntegrityMismatch))
            }
        }
    }
}

/// The result of a verification.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// One entry per approval checked, newest first.
    pub artifacts: Vec<ArtifactVerification>,
    /// Orphan files, by workspace and path.
    pub orphans: Vec<OrphanArtifact>,
    /// Workspaces whose orphans could not be looked for.
    pub skipped_workspaces: Vec<SkippedWorkspace>,
}

impl VerifyReport {
    /// Ok unless an artifact is missing, mismatched or unreadable, or an
    /// orphan was found. A skipped workspace is reported, not a problem.
    pub fn ok(&self) -> bool {
        self.tally().ok()
    }

    /// The counts of this report.
    pub fn tally(&self) -> VerifyTally {
        let mut tally = VerifyTally::default();
        for check in &self.artifacts {
            tally.add(check.result);
        }
        tally.orphans = self.orphans.len() as u64;
        tally
    }
}

/// The counts of a verification: what a frontend keeps when it streams the
/// checks of a history too large to hold as a [`VerifyReport`]. It is ok by
/// the same rule as the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerifyTally {
    counts: [u64; ArtifactCheck::ALL.len()],
    /// Orphan files found.
    pub orphans: u64,
}

impl VerifyTally {
    /// Counts one artifact check.
    pub fn add(&mut self, check: ArtifactCheck) {
        self.counts[check as usize] += 1;
    }

    /// How many checks found `check`.
    pub fn count(&self, check: ArtifactCheck) -> u64 {
        self.counts[check as usize]
    }

    /// How many approvals were checked.
    pub fn checked(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Problem checks plus orphans.
    pub fn problems(&self) -> u64 {
        ArtifactCheck::ALL
            .iter()
            .filter(|check| check.is_problem())
            .map(|check| self.count(*check))
            .sum::<u64>()
            + self.orphans
    }

    /// Ok unless an artifact is missing, mismatched or unreadable, or an
    /// orphan was found.
    pub fn ok(&self) -> bool {
        self.problems() == 0
    }
}
