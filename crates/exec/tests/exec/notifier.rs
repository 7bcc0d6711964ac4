//! The person's notifier: it gets the message on its stdin, its status is
//! reported, and nothing it does (fail, hang, flood its output, leave its
//! stdin unread, start background work) holds the caller past its limit.

use std::path::Path;
use std::time::{Duration, Instant};

use plan_exec::{NotifierOutcome, run_notifier};

use crate::support::{LIVENESS, ends_within, pidfd};

/// Far above what any case here needs to finish; the hanging cases use a
/// short limit of their own.
const AMPLE: Duration = Duration::from_secs(60);

fn quoted(path: &Path) -> String {
    format!("'{}'", path.display())
}

#[test]
fn the_message_arrives_on_stdin_whole_and_the_status_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let received = dir.path().join("received.json");
    let message = br#"{"approvalId":"approval-1","title":"T \u2014 \"quoted\""}"#;
    let outcome = run_notifier(&format!("cat > {}", quoted(&received)), message, AMPLE);
    assert_eq!(outcome, NotifierOutcome::Exited(0));
    assert_eq!(std::fs::read(&received).unwrap(), message);
    assert_eq!(run_notifier("exit 3", message, AMPLE), NotifierOutcome::Exited(3));
    assert_eq!(
        run_notifier("kill -TERM $$", message, AMPLE),
        NotifierOutcome::Signalled(15)
    );
}

#[test]
fn a_notifier_that_hangs_is_killed_with_everything_it_started_at_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("background.pid");
    // It starts background work, says so, and never ends by itself.
    let command = format!("sleep 1000 & echo $! > {}; wait", quoted(&pid_file));
    let started = Instant::now();
    let outcome = run_notifier(&command, b"{}", Duration::from_millis(500));
    assert_eq!(outcome, NotifierOutcome::TimedOut);
    assert!(started.elapsed() < AMPLE, "the limit did not end it");
    let background: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Killed (by itself it would sleep for 1000 s) and, as the notifier's
    // child, reaped by init once its parent is gone. A SIGKILL is sent to
    // the group before the call returns but takes effect when the process
    // next runs, so the test waits for the end on its pidfd (readable once
    // it has ended, a zombie on its way out included); a process already
    // reaped has no pidfd to wait on.
    if let Some(pidfd) = pidfd(background) {
        assert!(
            ends_within(&pidfd, LIVENESS),
            "the notifier's background process outlived it"
        );
    }
}

#[test]
fn unread_stdin_and_flooded_output_hold_nothing_up() {
    // A message far larger than a pipe holds, to a notifier that never
    // reads it: what fits is written, the rest dropped, nothing waits.
    let large = vec![b'x'; 4 * 1024 * 1024];
    assert_eq!(run_notifier("exit 0", &large, AMPLE), NotifierOutcome::Exited(0));
    // Output nobody reads: discarded, not buffered.
    assert_eq!(
        run_notifier(
            "head -c 67108864 /dev/zero; head -c 67108864 /dev/zero >&2",
            b"{}",
            AMPLE
        ),
        NotifierOutcome::Exited(0)
    );
}

#[test]
fn a_notifier_that_cannot_start_says_so() {
    // `/bin/sh` starts; what it is asked to run does not exist: 127.
    assert_eq!(
        run_notifier("/nonexistent/notifier", b"{}", AMPLE),
        NotifierOutcome::Exited(127)
    );
}
