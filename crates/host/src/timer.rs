//! The expiry timer: a thread each host starts at open (unless the embedder
//! opts out with [`crate::ExpiryTimer::Manual`]) that expires approvals at their
//! deadlines without waiting for a request.
//!
//! It sleeps until the host's next deadline (or until a change or `close`
//! wakes it), then asks the host to expire what is due; the host sends
//! `plan/approvalResolved` for each. It decides nothing: which approvals are
//! due and when the next deadline is are plan-core's answers. It must not
//! outlive its host: `close` stops it at its next check, and dropping the
//! [`crate::Host`] stops it and waits for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::event::HostCore;
use crate::outbox::LOOKING;
use crate::sync::lock;

/// The longest the timer sleeps without looking again, so that a clock
/// jump or a missed wake-up costs at most this long.
const MAX_SLEEP: Duration = Duration::from_secs(1);

/// The shortest sleep, so that a deadline that cannot be expired right now
/// (a storage error) does not spin a core.
const MIN_SLEEP: Duration = Duration::from_millis(5);

/// A host's running timer thread, owned by the [`crate::Host`].
#[derive(Debug)]
pub(crate) struct TimerThread {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl TimerThread {
    /// Starts the timer thread for `core`.
    pub(crate) fn spawn(core: &Arc<HostCore>) -> std::io::Result<TimerThread> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new().name(THREAD_NAME.to_owned()).spawn({
            let core = Arc::clone(core);
            let stop = Arc::clone(&stop);
            move || run(&core, &stop)
        })?;
        Ok(TimerThread {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread and waits for it, unless this runs on the thread
    /// itself (a listener that drops the host from an expiry notification):
    /// a thread cannot join itself, and it ends on its own at the stop flag
    /// once the listener returns.
    pub(crate) fn stop(&mut self, core: &HostCore) {
        self.stop.store(true, Ordering::SeqCst);
        core.wake_timer();
        if let Some(thread) = self.thread.take() {
            if thread.thread().id() == std::thread::current().id() {
                return;
            }
            // A timer thread that panicked has nothing left to clean up.
            let _ = thread.join();
        }
    }
}

/// The timer thread's name, as debuggers and `/proc` show it.
const THREAD_NAME: &str = "plan-expiry";

fn run(core: &HostCore, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) && !core.closed() {
        // Awake: every change wakes it until it says when it looks again,
        // which it does only after reading the deadlines below.
        core.signal.looks_at.store(LOOKING, Ordering::SeqCst);
        let seen = *lock(&core.signal.generation);
        // Errors here are storage hiccups; the next round tries again, and
        // any request touching the approval expires it lazily meanwhile.
        let _ = core.expire_due_now();
        let sleep = match core.earliest_deadline() {
            Ok(Some(deadline)) => {
                let wait = deadline.saturating_sub(core.now()).max(0);
                Duration::from_millis(u64::try_from(wait).unwrap_or(0)).clamp(MIN_SLEEP, MAX_SLEEP)
            }
            Ok(None) | Err(_) => MAX_SLEEP,
        };
        let generation = lock(&core.signal.generation);
        if *generation == seen && !stop.load(Ordering::SeqCst) {
            let sleep_ms = i64::try_from(sleep.as_millis()).unwrap_or(i64::MAX);
            core.signal
                .looks_at
                .store(core.now().saturating_add(sleep_ms), Ordering::SeqCst);
            // Spurious wake-ups and timeouts both just loop.
            let _ = core.signal.changed.wait_timeout(generation, sleep);
        }
    }
}
