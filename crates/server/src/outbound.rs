//! Writing `serve`'s stdout: one writer thread, one ordered queue, and a
//! bound on what may wait in it.
//!
//! Notifications are produced on whatever thread made a change, the expiry
//! timer's included, and that thread must never wait for the client: a
//! client that stops reading stdout would otherwise stall the timer and
//! leave rows `pending` in the database past their deadline. So producers
//! only queue lines and this module's thread writes them.
//!
//! The policy when the client does not keep up:
//! - at most [`MAX_QUEUED_NOTIFICATIONS`] notifications wait; a notification
//!   beyond that is dropped (never queued, never blocking its producer) and
//!   the writer reports on stderr how many were dropped. The database stays
//!   the truth: a client that fell behind re-reads it (`plan/list`,
//!   `session/get`);
//! - responses are never dropped: the request loop waits while more than
//!   [`MAX_QUEUED_RESPONSE_BYTES`] of them are unwritten, which stops it
//!   reading requests, and only it.
//!
//! Lines leave in the order they were queued; a response with nothing queued
//! before it is written by the request loop itself, which saves a thread hop
//! per round trip (the writer waits meanwhile). A batch answer is queued in
//! pieces as it is computed; notifications queued meanwhile are held back
//! until its line is complete, so no line is ever interleaved. Once stdout
//! fails (the client went away) everything is discarded. This module decides
//! nothing about the content of a line.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The most notifications that may wait for the writer.
pub(crate) const MAX_QUEUED_NOTIFICATIONS: usize = 1024;

/// The most response bytes that may wait before the request loop does.
pub(crate) const MAX_QUEUED_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

enum Item {
    Notification(String),
    /// Part of a response line; the last part ends the line.
    Piece {
        text: String,
        ends_line: bool,
    },
}

#[derive(Default)]
struct State {
    items: VecDeque<Item>,
    /// Notifications queued while a batch line was open.
    held: VecDeque<String>,
    line_open: bool,
    notifications: usize,
    response_bytes: usize,
    dropped: u64,
    closing: bool,
    /// The request loop is writing a response itself (the queue was empty).
    writing: bool,
    /// stdout failed; nothing more is written.
    broken: bool,
    /// The writer thread has ended.
    done: bool,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    /// stdout. Never locked while `state` is held, so a blocked write
    /// cannot hold up a notifier.
    out: Mutex<Box<dyn Write + Send>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `text` (and a newline when `ends_line`) to stdout; on failure
    /// the client is gone and everything from now on is discarded.
    fn write(&self, text: &str, ends_line: bool) {
        let written = {
            let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
            out.write_all(text.as_bytes()).and_then(|()| {
                if ends_line {
                    out.write_all(b"\n").and_then(|()| out.flush())
                } else {
                    Ok(())
                }
            })
        };
        if written.is_err() {
            let mut state = self.lock();
            state.broken = true;
            state.items.clear();
            state.held.clear();
            state.notifications = 0;
            state.response_bytes = 0;
            self.changed.notify_all();
        }
    }
}

/// The queue and its writer thread.
pub(crate) struct Outbound {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// A producer's handle for notifications; cheap to clone, never blocks.
#[derive(Clone)]
pub(crate) struct Notifier {
    shared: Arc<Shared>,
}

impl Notifier {
    /// Queues one notification line, or drops it when the queue is full.
    pub(crate) fn notify(&self, line: String) {
        let mut state = self.shared.lock();
        if state.broken {
            return;
        }
        if state.notifications >= MAX_QUEUED_NOTIFICATIONS {
            state.dropped += 1;
            return;
        }
        state.notifications += 1;
        if state.line_open {
            state.held.push_back(line);
        } else {
            state.items.push_back(Item::Notification(line));
        }
        self.shared.changed.notify_all();
    }
}

impl Outbound {
    /// Starts the writer thread on `out`.
    pub(crate) fn spawn(out: impl Write + Send + 'static) -> std::io::Result<Outbound> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            out: Mutex::new(Box::new(out)),
        });
        let thread = std::thread::Builder::new()
            .name("plan-stdout".to_owned())
            .spawn({
                let shared = Arc::clone(&shared);
                move || write_queued(&shared)
            })?;
        Ok(Outbound {
            shared,
            thread: Some(thread),
        })
    }

    /// A handle for notification producers.
    pub(crate) fn notifier(&self) -> Notifier {
        Notifier {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Queues one whole response line.
    pub(crate) fn line(&self, text: String) {
        self.piece(text, true);
    }

    /// Queues part of a response line (the part that ends it says so),
    /// waiting while too many response bytes are unwritten.
    pub(crate) fn piece(&self, text: String, ends_line: bool) {
        let mut state = self.shared.lock();
        while !state.broken
            && state.response_bytes > 0
            && state.response_bytes.saturating_add(text.len()) > MAX_QUEUED_RESPONSE_BYTES
        {
            state = self
                .shared
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.broken {
            return;
        }
        // Nothing waits: write it here and save the writer thread's hop.
        // What is queued meanwhile waits for this write (`writing`).
        let direct = state.items.is_empty() && !state.writing;
        let text = if direct {
            state.writing = true;
            Some(text)
        } else {
            state.response_bytes += text.len();
            state.items.push_back(Item::Piece { text, ends_line });
            None
        };
        state.line_open = !ends_line;
        if ends_line {
            // Held back while the line was open; they follow its end.
            let held: Vec<String> = state.held.drain(..).collect();
            state.items.extend(held.into_iter().map(Item::Notification));
        }
        self.shared.changed.notify_all();
        let Some(text) = text else {
            return;
        };
        drop(state);
        self.shared.write(&text, ends_line);
        self.shared.lock().writing = false;
        self.shared.changed.notify_all();
    }

    /// Lets the writer finish what is queued, waiting at most `patience`
    /// (a client that never reads again must not keep the process alive).
    pub(crate) fn finish(mut self, patience: Duration) {
        let deadline = Instant::now() + patience;
        let mut state = self.shared.lock();
        state.closing = true;
        self.shared.changed.notify_all();
        while !state.done {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        drop(state);
        if let Some(thread) = self.thread.take() {
            // It has ended; a panic there has nothing left to clean up.
            let _ended = thread.join();
        }
    }
}

fn write_queued(shared: &Shared) {
    let mut reported: u64 = 0;
    loop {
        let (item, dropped) = {
            let mut state = shared.lock();
            let item = loop {
                if !state.writing
                    && let Some(item) = state.items.pop_front()
                {
                    match &item {
                        Item::Notification(_) => state.notifications -= 1,
                        Item::Piece { text, .. } => state.response_bytes -= text.len(),
                    }
                    shared.changed.notify_all();
                    break item;
                }
                if state.closing && state.items.is_empty() && !state.writing {
                    state.done = true;
                    shared.changed.notify_all();
                    return;
                }
                state = shared.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
            };
            (item, state.dropped)
        };
        if dropped > reported {
            crate::log::line(&format!(
                "plan-checkpoint serve: stdout is not being read: dropped {} notification(s) beyond the \
                 queue of {MAX_QUEUED_NOTIFICATIONS}",
                dropped - reported
            ));
            reported = dropped;
        }
        match &item {
            Item::Notification(text) => shared.write(text, true),
            Item::Piece { text, ends_line } => shared.write(text, *ends_line),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A writer that records what it was given, optionally stalled.
    #[derive(Clone, Default)]
    struct Recorder {
        bytes: Arc<Mutex<Vec<u8>>>,
        stall: Arc<Mutex<()>>,
    }

    impl Write for Recorder {
        fn write(&mut self, buffer: &[u8]) -> std::io::Result<usize> {
            let _stalled = self.stall.lock().unwrap();
            self.bytes.lock().unwrap().extend_from_slice(buffer);
            Ok(buffer.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_keep_their_order_and_batches_are_never_interleaved() {
        let recorder = Recorder::default();
        let outbound = Outbound::spawn(recorder.clone()).unwrap();
        let notifier = outbound.notifier();
        notifier.notify("n1".to_owned());
        outbound.piece("[1".to_owned(), false);
        notifier.notify("n2".to_owned());
        outbound.piece(",2]".to_owned(), true);
        outbound.line("r".to_owned());
        outbound.finish(Duration::from_secs(10));
        let text = String::from_utf8(recorder.bytes.lock().unwrap().clone()).unwrap();
        assert_eq!(text, "n1\n[1,2]\nn2\nr\n");
    }

    #[test]
    fn a_stalled_writer_never_blocks_a_notifier_and_drops_beyond_the_bound() {
        let recorder = Recorder::default();
        let stalled = recorder.stall.lock().unwrap();
        let outbound = Outbound::spawn(recorder.clone()).unwrap();
        let notifier = outbound.notifier();
        for index in 0..MAX_QUEUED_NOTIFICATIONS + 10 {
            notifier.notify(format!("n{index}"));
        }
        // One may be in the writer's hands already; the rest wait or were dropped.
        let dropped = outbound.shared.lock().dropped;
        assert!((9..=10).contains(&dropped), "{dropped}");
        drop(stalled);
        outbound.finish(Duration::from_secs(10));
        let lines = recorder
            .bytes
            .lock()
            .unwrap()
            .split(|byte| *byte == b'\n')
            .count()
            - 1;
        assert_eq!(lines as u64, (MAX_QUEUED_NOTIFICATIONS + 10) as u64 - dropped);
    }
}
