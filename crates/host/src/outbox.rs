//! The outbox: notifications committed but not yet delivered, and the signal
//! that wakes the expiry timer.
//!
//! Transitions queue notifications under the state lock (so the queue is in
//! commit order); delivery happens after the lock is released, one draining
//! thread at a time (`HostCore::deliver`, in `event.rs`). This module holds
//! the data only; nothing here decides or persists anything.

use std::collections::VecDeque;
use std::sync::atomic::AtomicI64;
use std::sync::{Condvar, Mutex};

use crate::notify::HostEvent;

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
    pub(crate) queue: VecDeque<HostEvent>,
    pub(crate) draining: bool,
}
