//! The expiry driver: a timer thread that expires approvals at their
//! deadlines without waiting for a request.
//!
//! It sleeps until the host's next deadline (or until a change or `close`
//! wakes it), then asks the host to expire what is due; the host sends
//! `plan/approvalResolved` for each. Embedders with their own event loop can
//! skip it and call [`Host::expire_due`] at [`Host::next_deadline`] instead.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::Host;
use crate::host::lock;

/// The longest the driver sleeps without looking again, so that a clock
/// jump or a missed wake-up costs at most this long.
const MAX_SLEEP: Duration = Duration::from_secs(1);

/// The shortest sleep, so that a deadline that cannot be expired right now
/// (a storage error) does not spin a core.
const MIN_SLEEP: Duration = Duration::from_millis(5);

/// A running expiry driver. Dropping it stops the thread and waits for it.
#[derive(Debug)]
pub struct ExpiryDriver {
    stop: Arc<AtomicBool>,
    host: Arc<Host>,
    thread: Option<JoinHandle<()>>,
}

impl ExpiryDriver {
    /// Starts the driver thread for `host`.
    pub fn spawn(host: Arc<Host>) -> std::io::Result<ExpiryDriver> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new()
            .name("plan-expiry".to_owned())
            .spawn({
                let host = Arc::clone(&host);
                let stop = Arc::clone(&stop);
                move || run(&host, &stop)
            })?;
        Ok(ExpiryDriver {
            stop,
            host,
            thread: Some(thread),
        })
    }
}

impl Drop for ExpiryDriver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        *lock(&self.host.signal.generation) += 1;
        self.host.signal.changed.notify_all();
        if let Some(thread) = self.thread.take() {
            // Dropped by a listener running on the driver's own thread (a
            // notification handler that shuts the host down): that thread
            // cannot join itself, and it ends on its own at the stop flag.
            if thread.thread().id() == std::thread::current().id() {
                return;
            }
            // A driver thread that panicked has nothing left to clean up.
            let _ = thread.join();
        }
    }
}

fn run(host: &Host, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) && !host.is_closed() {
        let seen = *lock(&host.signal.generation);
        // Errors here are storage hiccups; the next round tries again, and
        // any request touching the approval expires it lazily meanwhile.
        let _ = host.expire_due();
        let sleep = match host.next_deadline() {
            Ok(Some(deadline)) => {
                let wait = deadline.saturating_sub(host.now()).max(0);
                Duration::from_millis(u64::try_from(wait).unwrap_or(0)).clamp(MIN_SLEEP, MAX_SLEEP)
            }
            Ok(None) | Err(_) => MAX_SLEEP,
        };
        let generation = lock(&host.signal.generation);
        if *generation == seen && !stop.load(Ordering::SeqCst) {
            // Spurious wake-ups and timeouts both just loop.
            let _ = host.signal.changed.wait_timeout(generation, sleep);
        }
    }
}
