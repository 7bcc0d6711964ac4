//! The person's notifier: a command of theirs (`/bin/sh -c <command>`),
//! configured on the host, that hears a plan is pending (a message on its
//! stdin) and passes it on: to a phone through ntfy, a chat webhook, a
//! desktop notification.
//!
//! It is the person's own channel, not an agent's: it runs unsandboxed with
//! the host's environment, like the host itself. What this module
//! guarantees is that it can never hold the host up: the message is written
//! without blocking, its output goes nowhere, and it is killed (its whole
//! process group) once its time is up. It decides nothing about when a
//! notifier runs or what it is told.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};

/// How a notifier run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotifierOutcome {
    /// It exited with this status (0: it succeeded).
    Exited(i32),
    /// A signal ended it.
    Signalled(i32),
    /// It was still running at its time limit: its process group was
    /// killed.
    TimedOut,
    /// It could not be started.
    FailedToStart(String),
}

/// Runs `command` through `/bin/sh -c` with `message` on its stdin and
/// waits for it, at most `limit` (then its process group is killed). Its
/// stdout and stderr are discarded, so a notifier that floods them costs
/// nothing; a message it does not read is dropped (what fits the pipe is
/// written, nothing waits for the rest).
pub fn run_notifier(command: &str, message: &[u8], limit: Duration) -> NotifierOutcome {
    let started = Instant::now();
    let mut child = match Command::new("/bin/sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own group: a timeout ends what it started too.
        .process_group(0)
        .spawn()
    {
        Ok(child) => child,
        Err(error) => return NotifierOutcome::FailedToStart(error.to_string()),
    };
    if let Some(mut stdin) = child.stdin.take() {
        // Never blocks: a notifier that does not read gets what fits.
        if rustix::io::ioctl_fionbio(&stdin, true).is_ok() {
            let _ = stdin.write_all(message);
        }
    }
    let pid = rustix::process::Pid::from_child(&child);
    let end = |child: &mut std::process::Child| {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        let _ = child.kill();
        let _ = child.wait();
    };
    let Ok(pidfd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) else {
        end(&mut child);
        return NotifierOutcome::FailedToStart("pidfd_open failed".into());
    };
    loop {
        let left = limit.saturating_sub(started.elapsed());
        if left.is_zero() {
            end(&mut child);
            return NotifierOutcome::TimedOut;
        }
        let wait = Timespec {
            tv_sec: left.as_secs().try_into().unwrap_or(i64::MAX),
            tv_nsec: left.subsec_nanos().into(),
        };
        let mut ready = PollFd::new(&pidfd, PollFlags::IN);
        match rustix::event::poll(std::slice::from_mut(&mut ready), Some(&wait)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => {}
            Ok(_) => break,
            Err(error) => {
                end(&mut child);
                return NotifierOutcome::FailedToStart(format!("poll: {error}"));
            }
        }
    }
    match child.wait() {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            match (status.code(), status.signal()) {
                (Some(code), _) => NotifierOutcome::Exited(code),
                (None, Some(signal)) => NotifierOutcome::Signalled(signal),
                (None, None) => NotifierOutcome::Exited(-1),
            }
        }
        Err(error) => NotifierOutcome::FailedToStart(error.to_string()),
    }
}
