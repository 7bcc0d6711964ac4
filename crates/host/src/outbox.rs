//! The outbox: notifications committed but not yet delivered, and the signal
//! that wakes the expiry timer.
//!
//! Transitions queue notifications under the state lock (so the queue is in
//! commit order); delivery happens after the lock is released, one draining
//! thread at a time. Nothing here decides or persists anything.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};

use crate::notify::HostEvent;

use crate::event::HostCore;
use crate::host::lock;

/// Wakes the expiry timer when deadlines may have changed or the host closed.
#[derive(Default)]
pub(crate) struct DeadlineSignal {
    pub(crate) generation: Mutex<u64>,
    pub(crate) changed: Condvar,
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
