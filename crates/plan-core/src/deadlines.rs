//! Deadlines across sessions: which pending approvals are due, and when the
//! next one falls due.
//!
//! The per-session machine expires an approval whose deadline has passed
//! when any event reaches its session; an expiry driver uses these two
//! functions over all live rows to know which sessions to tick and how long
//! to sleep. Both use the same rule as the machine ([`is_due`]).

use crate::{ApprovalStatus, PlanApproval, UnixMs};

/// Whether a pending approval's absolute deadline has come: `now` at or
/// after `expires_at`. Rows that are not pending are never due.
pub fn is_due(approval: &PlanApproval, now: UnixMs) -> bool {
    approval.status == ApprovalStatus::Pending && now >= approval.expires_at
}

/// The pending approvals of `rows` that are due at `now`, in the order given.
pub fn due_approvals(rows: &[PlanApproval], now: UnixMs) -> Vec<&PlanApproval> {
    rows.iter().filter(|row| is_due(row, now)).collect()
}

/// The earliest deadline of a pending approval in `rows`, if any: when a
/// driver must next look.
pub fn next_deadline(rows: &[PlanApproval]) -> Option<UnixMs> {
    rows.iter()
        .filter(|row| row.status == ApprovalStatus::Pending)
        .map(|row| row.expires_at)
        .min()
}
