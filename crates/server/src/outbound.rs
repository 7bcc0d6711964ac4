//! Writing `serve`'s stdout: one ordered queue, a bound on what may wait in
//! it, and a writer thread for the lines the request loop does not write.
//!
//! Notifications are produced on whatever thread made a change, the expiry
//! timer's included, and that thread must never wait for the client: a
//! client that stops reading stdout would otherwise stall the timer and
//! leave rows `pending` in the database past their deadline. So producers
//! only queue lines, and a notifier never writes or waits.
//!
//! The policy when the client does not keep up:
//! - at most [`MAX_QUEUED_NOTIFICATIONS`] notifications wait; a notification
//!   beyond that is dropped (never queued, never blocking its producer) and
//!   the next write reports on stderr how many were dropped. The database
//!   stays the truth: a client that fell behind re-reads it (`plan/list`,
//!   `session/get`);
//! - responses are never dropped: the request loop waits while more than
//!   [`MAX_QUEUED_RESPONSE_BYTES`] of them are unwritten, which stops it
//!   reading requests, and only it.
//!
//! Who writes: lines leave in the order they were queued, and one write at
//! a time is in flight (`writing`). The request loop (the thread that
//! called [`Outbound::spawn`]) writes its own answers: with each response
//! it writes everything queued before it, in one write and one flush. The
//! notifications its own requests produce are queued without waking the
//! writer thread, so they leave with that response (or right after the
//! request, when it gets none) and a round trip costs one write and no
//! thread hop. The writer thread writes what other threads queue (the
//! expiry timer, command watchers) as soon as they queue it, and what was
//! queued while another write was in flight. A batch answer is queued in
//! pieces as it is computed; notifications queued meanwhile are held back
//! until its line is complete, so no line is ever interleaved. Once stdout
//! fails (the client went away) everything is discarded. This module
//! decides nothing about the content of a line.

use std::collections::VecDeque;
use std::io::{BufWriter, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{JoinHandle, ThreadId};
use std::time::{Duration, Instant};

/// The most notifications that may wait for the writer.
pub(crate) const MAX_QUEUED_NOTIFICATIONS: usize = 1024;

/// The most response bytes that may wait before the request loop does.
pub(crate) const MAX_QUEUED_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// What one write gathers before it reaches stdout: the lines of a round
/// trip leave in one system call, and a line longer than this passes
/// through without being copied.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;

enum Item {
    Notification(String),
    /// Part of a response line; the last part ends the line.
    Piece {
        text: String,
        ends_line: bool,
    },
}

impl Item {
    /// The text and whether a newline follows it.
    fn parts(&self) -> (&str, bool) {
        match self {
            Item::Notification(text) => (text, true),
            Item::Piece { text, ends_line } => (text, *ends_line),
        }
    }
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
    /// How many of the dropped notifications stderr was told about.
    reported: u64,
    closing: bool,
    /// A write is in flight (the request loop's or the writer thread's);
    /// whoever comes next queues behind it.
    writing: bool,
    /// The writer thread has lines to write: another thread queued them,
    /// or they were queued while a write was in flight.
    wanted: bool,
    /// The writer thread is waiting on [`Shared::work`].
    writer_waiting: bool,
    /// stdout failed; nothing more is written.
    broken: bool,
    /// The writer thread has ended.
    done: bool,
}

impl State {
    /// Takes every queued line, in order, for one write.
    fn take_queued(&mut self) -> VecDeque<Item> {
        let items = std::mem::take(&mut self.items);
        for item in &items {
            match item {
                Item::Notification(_) => self.notifications -= 1,
                Item::Piece { text, .. } => self.response_bytes -= text.len(),
            }
        }
        items
    }

    /// The notifications dropped since stderr was last told, if any.
    fn take_report(&mut self) -> Option<u64> {
        let unreported = self.dropped - self.reported;
        self.reported = self.dropped;
        (unreported > 0).then_some(unreported)
    }
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the writer thread: it has lines to write, or it should end.
    work: Condvar,
    /// Wakes the request loop: queued response bytes left, stdout failed
    /// or the writer thread ended.
    changed: Condvar,
    /// stdout behind one buffer. Never locked while `state` is held, so a
    /// blocked write cannot hold up a notifier.
    out: Mutex<BufWriter<Box<dyn Write + Send>>>,
    /// The request loop's thread: its notifications wait for its next write.
    request_loop: ThreadId,
    /// Where the report of dropped notifications goes: stderr
    /// ([`crate::log::line`]) in `serve`, a recorder in tests (so a green
    /// test run prints no report of drops it provoked on purpose).
    log: fn(&str),
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `items` in order as one write, flushed when the last of them
    /// ends a line (an open batch line stays buffered until its end); on
    /// failure the client is gone and everything from now on is discarded.
    /// The caller holds `writing`.
    fn write(&self, items: &VecDeque<Item>, dropped: Option<u64>) {
        if let Some(dropped) = dropped {
            (self.log)(&format!(
                "plan-checkpoint serve: stdout is not being read: dropped {dropped} notification(s) beyond \
                 the queue of {MAX_QUEUED_NOTIFICATIONS}"
            ));
        }
        let written = {
            let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
            let mut ends_line = false;
            let mut written = Ok(());
            for item in items {
                let (text, ends) = item.parts();
                written = out
                    .write_all(text.as_bytes())
                    .and_then(|()| if ends { out.write_all(b"\n") } else { Ok(()) });
                if written.is_err() {
                    break;
                }
                ends_line = ends;
            }
            written.and_then(|()| if ends_line { out.flush() } else { Ok(()) })
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

    /// Asks the writer thread for the lines queued now.
    fn want_writer(&self, state: &mut State) {
        state.wanted = true;
        if state.writer_waiting {
            self.work.notify_one();
        }
    }

    /// The request loop's write of `items`, with `writing` taken; what
    /// other threads queued meanwhile goes to the writer thread.
    fn write_from_loop(&self, mut state: MutexGuard<'_, State>, items: &VecDeque<Item>) {
        state.writing = true;
        let dropped = state.take_report();
        drop(state);
        self.write(items, dropped);
        let mut state = self.lock();
        state.writing = false;
        if !state.items.is_empty() {
            self.want_writer(&mut state);
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
    /// The request loop's own notifications wait for its next write; any
    /// other thread's wake the writer thread.
    pub(crate) fn notify(&self, line: String) {
        let from_loop = std::thread::current().id() == self.shared.request_loop;
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
            // Queued behind the open line when it ends.
            state.held.push_back(line);
            return;
        }
        state.items.push_back(Item::Notification(line));
        // A write in flight is followed by a look at the queue.
        if !from_loop && !state.writing {
            self.shared.want_writer(&mut state);
        }
    }
}

impl Outbound {
    /// Starts the writer thread on `out`. The calling thread is the request
    /// loop: only it may call [`Outbound`]'s methods.
    pub(crate) fn spawn(out: impl Write + Send + 'static) -> std::io::Result<Outbound> {
        Outbound::spawn_logging(out, crate::log::line)
    }

    /// [`Outbound::spawn`] with the report of dropped notifications going
    /// to `log` instead of stderr.
    fn spawn_logging(out: impl Write + Send + 'static, log: fn(&str)) -> std::io::Result<Outbound> {
        let out: Box<dyn Write + Send> = Box::new(out);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            changed: Condvar::new(),
            out: Mutex::new(BufWriter::with_capacity(WRITE_BUFFER_BYTES, out)),
            request_loop: std::thread::current().id(),
            log,
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

    /// Writes (or queues) one whole response line.
    pub(crate) fn line(&self, text: String) {
        self.piece(text, true);
    }

    /// Writes part of a response line (the part that ends it says so),
    /// after everything queued before it and in the same write; queues it
    /// instead while another write is in flight, waiting while too many
    /// response bytes are unwritten.
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
        let held: Vec<String> = if ends_line {
            // Held back while the line was open; they follow its end.
            state.held.drain(..).collect()
        } else {
            Vec::new()
        };
        state.line_open = !ends_line;
        if state.writing {
            // The writer thread is writing; it looks at the queue after.
            state.response_bytes += text.len();
            state.items.push_back(Item::Piece { text, ends_line });
            state.items.extend(held.into_iter().map(Item::Notification));
            return;
        }
        let mut items = state.take_queued();
        items.push_back(Item::Piece { text, ends_line });
        state.notifications -= held.len();
        items.extend(held.into_iter().map(Item::Notification));
        self.shared.write_from_loop(state, &items);
    }

    /// Writes what the request loop's last request queued when it got no
    /// response (a client notification): nothing waits for the next one.
    pub(crate) fn flush_queued(&self) {
        let mut state = self.shared.lock();
        if state.writing || state.broken || state.items.is_empty() {
            return;
        }
        let items = state.take_queued();
        self.shared.write_from_loop(state, &items);
    }

    /// Lets the writer finish what is queued, waiting at most `patience`
    /// (a client that never reads again must not keep the process alive).
    pub(crate) fn finish(mut self, patience: Duration) {
        let deadline = Instant::now() + patience;
        let mut state = self.shared.lock();
        state.closing = true;
        self.shared.want_writer(&mut state);
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

/// The writer thread: writes what it is asked to, everything queued at
/// once, until the queue is closed and empty.
fn write_queued(shared: &Shared) {
    let mut state = shared.lock();
    loop {
        if (state.wanted || state.closing) && !state.writing {
            state.wanted = false;
            if !state.items.is_empty() {
                let unblocks = state.response_bytes > 0;
                let items = state.take_queued();
                state.writing = true;
                let dropped = state.take_report();
                drop(state);
                if unblocks {
                    // The request loop may be waiting for these bytes to leave.
                    shared.changed.notify_all();
                }
                shared.write(&items, dropped);
                state = shared.lock();
                state.writing = false;
                // Queued while this write was in flight: this thread's too.
                state.wanted = !state.items.is_empty();
                continue;
            }
            if state.closing {
                state.done = true;
                drop(state);
                shared.changed.notify_all();
                return;
            }
        }
        state.writer_waiting = true;
        state = shared.work.wait(state).unwrap_or_else(PoisonError::into_inner);
        state.writer_waiting = false;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::mpsc;

    use super::*;

    /// A writer that records each write it was given, optionally stalled,
    /// and says when a write arrives.
    #[derive(Clone, Default)]
    struct Recorder {
        writes: Arc<Mutex<Vec<String>>>,
        stall: Arc<Mutex<()>>,
        arrived: Option<mpsc::Sender<()>>,
    }

    impl Recorder {
        fn text(&self) -> String {
            self.writes.lock().unwrap().concat()
        }
    }

    impl Write for Recorder {
        fn write(&mut self, buffer: &[u8]) -> std::io::Result<usize> {
            if let Some(arrived) = &self.arrived {
                let _gone = arrived.send(());
            }
            let _stalled = self.stall.lock().unwrap();
            self.writes
                .lock()
                .unwrap()
                .push(String::from_utf8_lossy(buffer).into_owned());
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
        assert_eq!(recorder.text(), "n1\n[1,2]\nn2\nr\n");
    }

    #[test]
    fn the_request_loops_notifications_leave_with_its_response_in_one_write() {
        let recorder = Recorder::default();
        let outbound = Outbound::spawn(recorder.clone()).unwrap();
        let notifier = outbound.notifier();
        notifier.notify("n1".to_owned());
        notifier.notify("n2".to_owned());
        outbound.line("r1".to_owned());
        // A request without an answer: its notification leaves after it.
        notifier.notify("n3".to_owned());
        outbound.flush_queued();
        assert_eq!(*recorder.writes.lock().unwrap(), ["n1\nn2\nr1\n", "n3\n"]);
        outbound.finish(Duration::from_secs(10));
    }

    #[test]
    fn another_threads_notification_is_written_without_waiting_for_a_response() {
        let (arrived, writes) = mpsc::channel();
        let recorder = Recorder {
            arrived: Some(arrived),
            ..Recorder::default()
        };
        let outbound = Outbound::spawn(recorder.clone()).unwrap();
        let notifier = outbound.notifier();
        std::thread::spawn(move || notifier.notify("timer".to_owned()))
            .join()
            .unwrap();
        writes.recv().unwrap();
        outbound.finish(Duration::from_secs(10));
        assert_eq!(recorder.text(), "timer\n");
    }

    #[test]
    fn a_stalled_writer_never_blocks_a_notifier_and_drops_beyond_the_bound() {
        let (arrived, writes) = mpsc::channel();
        let recorder = Recorder {
            arrived: Some(arrived),
            ..Recorder::default()
        };
        // The report of the drops is recorded, not printed: a green run of
        // this test says nothing on stderr.
        static REPORTS: Mutex<Vec<String>> = Mutex::new(Vec::new());
        let stalled = recorder.stall.lock().unwrap();
        let outbound = Outbound::spawn_logging(recorder.clone(), |line| {
            REPORTS.lock().unwrap().push(line.to_owned());
        })
        .unwrap();
        let notifier = outbound.notifier();
        std::thread::spawn(move || {
            notifier.notify("first".to_owned());
            // The writer thread took it and is stuck writing it.
            writes.recv().unwrap();
            for index in 0..MAX_QUEUED_NOTIFICATIONS + 10 {
                notifier.notify(format!("n{index}"));
            }
        })
        .join()
        .unwrap();
        assert_eq!(outbound.shared.lock().dropped, 10);
        drop(stalled);
        outbound.finish(Duration::from_secs(10));
        let lines = recorder.text().split('\n').count() - 1;
        assert_eq!(lines, 1 + MAX_QUEUED_NOTIFICATIONS);
        assert_eq!(
            *REPORTS.lock().unwrap(),
            [
                "plan-checkpoint serve: stdout is not being read: dropped 10 notification(s) beyond the queue of 1024"
            ]
        );
    }
}
