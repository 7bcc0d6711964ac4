//! Deadlines: which pending approvals are due, when the next one falls due,
//! and the time a decision is made at, so that no step of the wall clock can
//! extend an approval's window.
//!
//! The per-session machine expires an approval whose deadline has passed
//! when any event reaches its session; the host's expiry timer uses
//! [`due_approvals`] and [`next_deadline`] over all live rows to know which
//! sessions to tick and how long to sleep. Both use the same rule as the
//! machine ([`is_due`]).
//!
//! An approval's deadline is absolute (`expiresAt` never moves), but the wall
//! clock can be stepped back (NTP, a person, a VM resume). While the host
//! that created the pending approval is alive it also knows how much
//! monotonic time has passed since the creation; the decision time is then
//! never earlier than `createdAt` plus that elapsed time, so the window
//! closes on time whatever the wall clock says, and a decision is never
//! recorded before the creation. The caller measures; this module only
//! computes, from values passed in (it reads no clock).

use crate::{ApprovalStatus, PlanApproval, UnixMs};

/// Whether a pending approval's absolute deadline has come: `now` at or
/// after `expires_at`. Rows that are not pending are never due.
pub fn is_due(approval: &PlanApproval, now: UnixMs) -> bool {
    approval.status == ApprovalStatus::Pending && now >= approval.expires_at
}

/// The pending approvals of `rows` that are due at the wall-clock time
/// `wall_now`, in the order given. `elapsed` gives, for a row this host
/// created, the monotonic milliseconds since its creation (see
/// [`decision_time`]); `None` for rows it did not create.
pub fn due_approvals(
    rows: &[PlanApproval],
    wall_now: UnixMs,
    elapsed: impl Fn(&PlanApproval) -> Option<i64>,
) -> Vec<&PlanApproval> {
    rows.iter()
        .filter(|row| is_due(row, decision_time(wall_now, Some(row), elapsed(row))))
        .collect()
}

/// The earliest deadline of a pending approval in `rows`, if any, on the
/// wall clock as it reads at `wall_now` (see [`wall_deadline`]): when a
/// driver must next look.
pub fn next_deadline(
    rows: &[PlanApproval],
    wall_now: UnixMs,
    elapsed: impl Fn(&PlanApproval) -> Option<i64>,
) -> Option<UnixMs> {
    rows.iter()
        .filter(|row| row.status == ApprovalStatus::Pending)
        .map(|row| wall_deadline(wall_now, row, elapsed(row)))
        .min()
}

/// The time to decide at: the wall clock, but never earlier than the
/// pending approval's creation, nor than its creation plus the monotonic
/// time elapsed since then (`elapsed_since_creation_ms`, when the caller
/// measured the creation itself; `None` otherwise).
pub fn decision_time(
    wall_now: UnixMs,
    pending: Option<&PlanApproval>,
    elapsed_since_creation_ms: Option<i64>,
) -> UnixMs {
    let Some(pending) = pending else {
        return wall_now;
    };
    let monotonic = elapsed_since_creation_ms.map_or(pending.created_at, |elapsed| {
        pending.created_at.saturating_add(elapsed.max(0))
    });
    wall_now.max(pending.created_at).max(monotonic)
}

/// When, on the wall clock as it reads now, the pending approval's window
/// closes: `expiresAt` itself while the clocks agree, earlier when the wall
/// clock was stepped back (so a timer set by it fires on time).
pub fn wall_deadline(
    wall_now: UnixMs,
    pending: &PlanApproval,
    elapsed_since_creation_ms: Option<i64>,
) -> UnixMs {
    let now = decision_time(wall_now, Some(pending), elapsed_since_creation_ms);
    let remaining = pending.expires_at.saturating_sub(now);
    wall_now.saturating_add(remaining).min(pending.expires_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(created_at: UnixMs, expires_at: UnixMs) -> PlanApproval {
        PlanApproval {
            id: "a".into(),
            session_id: "s".into(),
            turn_id: "t".into(),
            title: String::new(),
            question: String::new(),
            artifact: None,
            status: ApprovalStatus::Pending,
            error_code: None,
            created_at,
            expires_at,
            decided_at: None,
            permission_mode: None,
            execution_id: None,
            execution_state: None,
        }
    }

    #[test]
    fn a_wall_clock_stepped_back_neither_extends_the_window_nor_predates_the_creation() {
        let approval = pending(10_000, 11_000);
        // The clocks agree: the wall clock decides.
        assert_eq!(decision_time(10_500, Some(&approval), Some(500)), 10_500);
        assert_eq!(wall_deadline(10_500, &approval, Some(500)), 11_000);
        // Stepped back an hour, 600 ms after the creation: still 600 ms in.
        assert_eq!(
            decision_time(10_600 - 3_600_000, Some(&approval), Some(600)),
            10_600
        );
        assert_eq!(
            wall_deadline(10_600 - 3_600_000, &approval, Some(600)),
            11_000 - 3_600_000
        );
        // Past the real deadline the decision time is past it too.
        assert!(decision_time(0, Some(&approval), Some(1_000)) >= approval.expires_at);
        // Without a monotonic reading, never before the creation.
        assert_eq!(decision_time(5, Some(&approval), None), 10_000);
        // A wall clock stepped forward counts: windows only ever shrink.
        assert_eq!(decision_time(10_900, Some(&approval), Some(100)), 10_900);
        // No pending approval: the wall clock.
        assert_eq!(decision_time(42, None, Some(7)), 42);
    }
}
