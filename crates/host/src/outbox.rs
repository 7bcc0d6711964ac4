//! The outbox: notifications committed but not yet delivered, and the signal
//! that wakes the expiry timer.
//!
//! Transitions queue notifications under the state lock (so the queue is in
//! commit order); delivery happens after the lock is released, one draining
//! thread at a time. Nothing here decides or persists anything.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Condvar, Mutex};

use plan_core::{ApprovalStatus, Effect};
use plan_protocol::ServerNotification;

use crate::event::HostCore;
use crate::host::lock;

/// Wakes the expiry timer when deadlines may have changed or the host closed.
pub(crate) struct DeadlineSignal {
    pub(crate) generation: Mutex<u64>,
    pub(crate) changed: Condvar,
    /// When (Unix ms) the sleeping timer looks again by itself;
    /// [`LOOKING`] while it is awake (or there is none). A new deadline
    /// before it needs a wake-up; one at or after it does not, because the
    /// timer reads every deadline again when it looks.
    pub(crate) looks_at: AtomicI64,
}

/// [`DeadlineSignal::looks_at`] while the timer is awake: every new
/// deadline is before it, so every change wakes the timer.
pub(crate) const LOOKING: i64 = i64::MAX;

impl Default for DeadlineSignal {
    fn default() -> DeadlineSignal {
        DeadlineSignal {
            generation: Mutex::new(0),
            changed: Condvar::new(),
            looks_at: AtomicI64::new(LOOKING),
        }
    }
}

/// Notifications committed but not yet delivered, in commit order.
///
/// Each transition queues its notifications while it still holds the state
/// lock, so the queue is in commit order. One thread at a time drains it
/// (`draining`), so a change committed while another thread is still
/// delivering an earlier one's notifications cannot overtake them.
#[derive(Default)]
pub(crate) struct Outbox {
    pub(crate) queue: VecDeque<ServerNotification>,
    pub(crate) draining: bool,
}

impl HostCore {
    /// Delivers queued notifications in commit order, after the state lock
    /// is released (so a listener may call back into the host). If another
    /// thread is delivering already, it delivers these too, after the ones
    /// committed before them.
    pub(crate) fn deliver(&self) {
        {
            let mut outbox = lock(&self.outbox);
            if outbox.draining || outbox.queue.is_empty() {
                return;
            }
            outbox.draining = true;
        }
        let _unwinding = DrainGuard(&self.outbox);
        loop {
            let notification = {
                let mut outbox = lock(&self.outbox);
                match outbox.queue.pop_front() {
                    Some(notification) => notification,
                    None => {
                        outbox.draining = false;
                        return;
                    }
                }
            };
            let listeners = lock(&self.listeners).clone();
            for listener in &listeners {
                listener.notify(notification.clone());
            }
        }
    }

    /// Wakes the timer if committed `effects` may have moved the earliest
    /// deadline before the time it looks again anyway: a new pending
    /// approval due earlier. A row leaving pending only moves deadlines
    /// later, so the timer's own next look is soon enough for it (it finds
    /// nothing due and reads the deadlines again).
    pub(crate) fn wake_timer_for(&self, effects: &[Effect]) {
        let looks_at = self.signal.looks_at.load(Ordering::SeqCst);
        let earlier = effects.iter().any(|effect| match effect {
            Effect::InsertApproval(approval) | Effect::UpdateApproval { approval, .. } => {
                approval.status == ApprovalStatus::Pending && approval.expires_at < looks_at
            }
            Effect::WriteArtifact(_) | Effect::SaveSession(_) | Effect::CancelCommand { .. } => false,
        });
        if earlier {
            self.wake_timer();
        }
    }

    pub(crate) fn wake_timer(&self) {
        *lock(&self.signal.generation) += 1;
        self.signal.changed.notify_all();
    }
}

/// Lets another thread drain the outbox if a listener panics mid-delivery.
struct DrainGuard<'host>(&'host Mutex<Outbox>);

impl Drop for DrainGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            lock(self.0).draining = false;
        }
    }
}
