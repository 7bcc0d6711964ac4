//! Where the host's time comes from.
//!
//! The host reads the clock once per operation and hands the value to
//! plan-core. Tests and embedders with their own time source supply a
//! [`Clock`]; a [`ManualClock`] lets a test jump past a deadline without
//! sleeping, and step its wall clock without time passing.
//!
//! A clock has two readings: the wall clock (Unix ms, which can be stepped
//! back or forth) and a monotonic one (ms from an arbitrary origin, which
//! only moves forward, at the pace time passes). The host measures how long
//! an approval has been pending with the second, so that no step of the
//! first extends its window.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use plan_core::UnixMs;

/// A source of Unix-millisecond time, handed to the host in
/// [`crate::HostOptions::clock`].
///
/// ```
/// use plan_host::{Clock, UnixMs};
///
/// /// A clock that stands still (the monotonic reading is the system's).
/// struct Frozen(UnixMs);
///
/// impl Clock for Frozen {
///     fn now_ms(&self) -> UnixMs {
///         self.0
///     }
/// }
///
/// assert_eq!(Frozen(42).now_ms(), 42);
/// ```
pub trait Clock: Send + Sync {
    /// The current wall-clock time.
    fn now_ms(&self) -> UnixMs;

    /// Milliseconds since an arbitrary origin, never going back and not
    /// moved by steps of the wall clock. By default the system's monotonic
    /// clock.
    fn monotonic_ms(&self) -> i64 {
        system_monotonic_ms()
    }
}

/// The system's monotonic clock, in ms since the first reading.
fn system_monotonic_ms() -> i64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = ORIGIN.get_or_init(Instant::now);
    i64::try_from(origin.elapsed().as_millis()).unwrap_or(i64::MAX)
}

/// The system wall clock, the default of [`crate::HostOptions`].
///
/// ```
/// use plan_host::{Clock, SystemClock};
///
/// assert!(SystemClock.now_ms() > 1_700_000_000_000);
/// ```
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
///
/// ```
/// use plan_host::{Clock, ManualClock};
///
/// let clock = ManualClock::new(1_000);
/// clock.advance(500);
/// assert_eq!((clock.now_ms(), clock.monotonic_ms()), (1_500, 500));
/// // A step of the wall clock: no time passes.
/// clock.set(0);
/// assert_eq!((clock.now_ms(), clock.monotonic_ms()), (0, 500));
/// ```
#[derive(Debug)]
pub struct ManualClock {
    now: AtomicI64,
    monotonic: AtomicI64,
}

impl ManualClock {
    /// A clock standing at `now` ([`ManualClock`]'s example).
    pub fn new(now: UnixMs) -> ManualClock {
        ManualClock {
            now: AtomicI64::new(now),
            monotonic: AtomicI64::new(0),
        }
    }

    /// Lets `delta` milliseconds pass: both readings move forward (a
    /// negative delta is a step of the wall clock only;
    /// [`ManualClock`]'s example).
    pub fn advance(&self, delta: i64) {
        self.now.fetch_add(delta, Ordering::SeqCst);
        if delta > 0 {
            self.monotonic.fetch_add(delta, Ordering::SeqCst);
        }
    }

    /// Steps the wall clock to `now`, as NTP or a person would: no time
    /// passes, so the monotonic reading stays where it is
    /// ([`ManualClock`]'s example).
    pub fn set(&self, now: UnixMs) {
        self.now.store(now, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> UnixMs {
        self.now.load(Ordering::SeqCst)
    }

    fn monotonic_ms(&self) -> i64 {
        self.monotonic.load(Ordering::SeqCst)
    }
}
