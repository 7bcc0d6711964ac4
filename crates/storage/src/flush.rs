//! fsyncs that run while their caller goes on working.
//!
//! A submission's artifact must be durable before the row that records it
//! commits. Flushed on the caller's thread, the file's fsync, its
//! directory's and the row's statements add up; with the file's flushed
//! on a [`Flusher`]'s thread, it is in flight while the caller syncs the
//! directory entry and runs the transaction's statements, and the caller
//! waits only before its commit. The order that matters (the file durable
//! before the row) is the caller's: it must [`Flush::wait`] before
//! committing.
//!
//! This module only flushes the descriptors it is handed and reports each
//! outcome to the one waiting for it; it decides nothing and orders
//! nothing between jobs. A flusher that may not, or cannot, use a thread
//! flushes on the waiter's thread instead, so a flush always happens.

use std::os::fd::OwnedFd;
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;

use rustix::io::Errno;

/// Where a host's artifact fsyncs run.
pub struct Flusher {
    /// `None` for a flusher that never starts a thread.
    thread: Option<Mutex<FlushThread>>,
}

/// A flusher's thread, started at its first flush.
enum FlushThread {
    NotStarted,
    Running {
        queue: Sender<Job>,
        thread: JoinHandle<()>,
    },
    /// Stopped, or could not be started: flushes run on the waiter's thread.
    Gone,
}

/// One descriptor to flush, and where its outcome goes.
struct Job {
    descriptor: OwnedFd,
    outcome: SyncSender<Result<(), Errno>>,
}

impl Flusher {
    /// Flushes on a thread of its own, started at the first flush and ended
    /// by [`Flusher::stop`] or when the flusher is dropped.
    pub fn on_thread() -> Flusher {
        Flusher {
            thread: Some(Mutex::new(FlushThread::NotStarted)),
        }
    }

    /// Flushes on the thread that waits for the flush: no thread is ever
    /// started (for an embedder that runs the host on its own threads only).
    pub fn on_caller() -> Flusher {
        Flusher { thread: None }
    }

    /// Starts flushing `descriptor` (its data and metadata, as `fsync`).
    pub(crate) fn start(&self, descriptor: OwnedFd) -> Flush {
        let Some(thread) = &self.thread else {
            return Flush::OnWait(descriptor);
        };
        let mut thread = thread.lock().unwrap_or_else(PoisonError::into_inner);
        if let FlushThread::NotStarted = *thread {
            *thread = start_thread();
        }
        let FlushThread::Running { queue, .. } = &*thread else {
            return Flush::OnWait(descriptor);
        };
        let (outcome, done) = std::sync::mpsc::sync_channel(1);
        match queue.send(Job { descriptor, outcome }) {
            Ok(()) => Flush::InFlight(done),
            // The thread is gone (it cannot panic, but should it end): the
            // job comes back, and the waiter flushes.
            Err(std::sync::mpsc::SendError(job)) => {
                *thread = FlushThread::Gone;
                Flush::OnWait(job.descriptor)
            }
        }
    }

    /// Ends the thread once the flushes already handed to it are done;
    /// later flushes run on the waiter's thread.
    pub fn stop(&self) {
        let Some(thread) = &self.thread else {
            return;
        };
        let stopped = std::mem::replace(
            &mut *thread.lock().unwrap_or_else(PoisonError::into_inner),
            FlushThread::Gone,
        );
        // Joined outside the lock: closing the queue lets the thread finish
        // what it holds and end.
        if let FlushThread::Running { queue, thread } = stopped {
            drop(queue);
            let _ended = thread.join();
        }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.stop();
    }
}

fn start_thread() -> FlushThread {
    let (queue, jobs) = std::sync::mpsc::channel::<Job>();
    match std::thread::Builder::new()
        .name("plan-fsync".to_owned())
        .spawn(move || flush_jobs(&jobs))
    {
        Ok(thread) => FlushThread::Running { queue, thread },
        Err(_) => FlushThread::Gone,
    }
}

/// The flush thread: one job at a time, until its queue is closed.
fn flush_jobs(jobs: &Receiver<Job>) {
    while let Ok(job) = jobs.recv() {
        // The waiter may have given up (its caller failed first); the
        // flush still happened, and nobody needs to hear about it.
        let _told = job.outcome.send(rustix::fs::fsync(&job.descriptor));
    }
}

/// A flush in flight, one left for the waiter, or one done.
pub(crate) enum Flush {
    InFlight(Receiver<Result<(), Errno>>),
    OnWait(OwnedFd),
    Done(Result<(), Errno>),
}

impl Flush {
    /// Waits for the flush (or does it) and returns its outcome; later
    /// calls return the same outcome at once.
    pub(crate) fn wait(&mut self) -> Result<(), Errno> {
        let outcome = match self {
            Flush::Done(outcome) => return *outcome,
            // A thread that ended without answering flushed nothing we can
            // vouch for.
            Flush::InFlight(done) => done.recv().unwrap_or(Err(Errno::IO)),
            Flush::OnWait(descriptor) => rustix::fs::fsync(&*descriptor),
        };
        *self = Flush::Done(outcome);
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_file(dir: &std::path::Path) -> OwnedFd {
        OwnedFd::from(std::fs::File::create(dir.join("f")).unwrap())
    }

    #[test]
    fn a_flush_reports_the_outcome_of_its_fsync_once_and_again() {
        let dir = tempfile::tempdir().unwrap();
        for flusher in [Flusher::on_thread(), Flusher::on_caller()] {
            let mut flushed = flusher.start(new_file(dir.path()));
            assert_eq!(flushed.wait(), Ok(()));
            assert_eq!(flushed.wait(), Ok(()));
        }
    }

    #[test]
    fn a_failed_fsync_is_reported_to_its_waiter() {
        for flusher in [Flusher::on_thread(), Flusher::on_caller()] {
            // fsync of a pipe is EINVAL: a real failure from the kernel.
            let (read, _write) = std::io::pipe().unwrap();
            let mut flushed = flusher.start(OwnedFd::from(read));
            assert_eq!(flushed.wait(), Err(Errno::INVAL));
            assert_eq!(flushed.wait(), Err(Errno::INVAL));
        }
    }

    #[test]
    fn only_an_on_thread_flusher_uses_a_thread_and_stop_ends_it() {
        let dir = tempfile::tempdir().unwrap();
        let on_caller = Flusher::on_caller();
        assert!(matches!(on_caller.start(new_file(dir.path())), Flush::OnWait(_)));
        let on_thread = Flusher::on_thread();
        let mut flushed = on_thread.start(new_file(dir.path()));
        assert!(matches!(flushed, Flush::InFlight(_)));
        on_thread.stop();
        // Stopping finished what the thread held.
        assert_eq!(flushed.wait(), Ok(()));
        assert!(matches!(on_thread.start(new_file(dir.path())), Flush::OnWait(_)));
    }
}
