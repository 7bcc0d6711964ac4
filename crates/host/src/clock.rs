//! Where the host's time comes from.
//!
//! The host reads the clock once per operation and hands the value to
//! plan-core. Tests and embedders with their own time source supply a
//! [`Clock`]; a [`ManualClock`] lets a test jump past a deadline without
//! sleeping.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use plan_core::UnixMs;

/// A source of Unix-millisecond time.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now_ms(&self) -> UnixMs;
}

/// The system wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> UnixMs {
        // A clock before 1970 reads as 0 rather than failing an operation.
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        })
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct ManualClock {
    now: AtomicI64,
}

impl ManualClock {
    /// A clock standing at `now`.
    pub fn new(now: UnixMs) -> ManualClock {
        ManualClock {
            now: AtomicI64::new(now),
        }
    }

    /// Moves the clock forward by `delta` milliseconds.
    pub fn advance(&self, delta: i64) {
        self.now.fetch_add(delta, Ordering::SeqCst);
    }

    /// Sets the clock.
    pub fn set(&self, now: UnixMs) {
        self.now.store(now, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> UnixMs {
        self.now.load(Ordering::SeqCst)
    }
}
