//! Restart recovery: what the startup fence does to the persisted rows.
//!
//! A new host process never continues the work of an older one. Before it
//! serves anything it interrupts every approval still pending and every
//! execution still queued or running, records `HOST_RESTARTED`, and replays
//! nothing: no approval is re-requested, no execution re-queued. Sessions keep
//! their mode (a pending approval's session stays in Plan; an approved one
//! already switched to Agent and stays there). Active turns live in memory
//! only, so a new process starts with none.

use crate::model::{RowGuard, UnixMs};
use crate::objects::{ApprovalStatus, ExecutionState, PlanApproval};
use crate::{Effect, ErrorCode};

/// Maps one persisted row to the row after the startup fence; `None` when the
/// fence leaves it as it is.
pub fn fence_row(row: &PlanApproval, now: UnixMs) -> Option<PlanApproval> {
    match (row.status, row.execution_state) {
        (ApprovalStatus::Pending, _) => {
            let mut interrupted = row.clone();
            interrupted.status = ApprovalStatus::Interrupted;
            interrupted.error_code = Some(ErrorCode::HostRestarted);
            interrupted.decided_at = Some(now);
            Some(interrupted)
        }
        (_, Some(ExecutionState::Queued | ExecutionState::Running)) => {
            let mut interrupted = row.clone();
            interrupted.execution_state = Some(ExecutionState::Interrupted);
            interrupted.error_code = Some(ErrorCode::HostRestarted);
            Some(interrupted)
        }
        (
            ApprovalStatus::Approved
            | ApprovalStatus::Rejected
            | ApprovalStatus::Expired
            | ApprovalStatus::Interrupted,
            None | Some(ExecutionState::Completed | ExecutionState::Interrupted),
        ) => None,
    }
}

/// The startup fence over persisted rows: one compare-and-set update per row
/// that was pending, queued or running. The caller applies all of them in one
/// transaction before serving any request.
pub fn startup_fence(rows: &[PlanApproval], now: UnixMs) -> Vec<Effect> {
    rows.iter()
        .filter_map(|row| {
            fence_row(row, now).map(|approval| Effect::UpdateApproval {
                approval,
                expected: RowGuard::of(row),
            })
        })
        .collect()
}
