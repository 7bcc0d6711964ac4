//! The runner: streaming order with one seq across both streams, UTF-8
//! chunks that never split a character, U+FFFD for invalid bytes, the cap
//! with exact byte counts, the output hashes (of the delivered text), the minimal environment,
//! stdin, descriptors, the process group, the timeout (the whole group gone,
//! background jobs included), cancellation from another thread, and
//! background jobs killed when the shell exits.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use plan_exec::{CommandOutcome, CommandSpec, CommandState, Confinement, OutputEvent, Stream};

use crate::support::*;

/// The shell line a gated command waits at until the test opens the gate.
const WAIT_AT_GATE: &str = "read -r _ < \"$TMPDIR/../gate\"";

/// The FIFO beside the scratch directory (`$TMPDIR/../gate`: inside the
/// namespaces the scratch directory is a private tmpfs the test cannot
/// reach, its parent is the test's directory) that a command reads a
/// line from ([`WAIT_AT_GATE`]) to go on; each line the test sends lets it
/// past one.
fn gate(dir: &Path) -> Fifo {
    Fifo::new(&dir.join("gate"))
}

/// Runs a command whose steps are separated by [`WAIT_AT_GATE`]: after each
/// output event, `open_after` says (from the events so far) whether the
/// command may take its next step. So each step's output reaches the runner
/// before the next step writes, without timing.
fn run_gated(
    spec: CommandSpec,
    mut open_after: impl FnMut(&[OutputEvent]) -> bool + Send + 'static,
) -> (CommandOutcome, Vec<OutputEvent>) {
    let gate = gate(spec.scratch.path().parent().unwrap());
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = {
        let events = Arc::clone(&events);
        move |event| {
            let mut events = events.lock().unwrap();
            events.push(event);
            if open_after(&events) {
                gate.send_line();
            }
        }
    };
    let outcome = runner().spawn(spec, sink).wait();
    let events = events.lock().unwrap().clone();
    (outcome, events)
}

/// Every case runs unsandboxed and, where available, read-only.
fn confinements() -> Vec<Confinement> {
    let mut all = vec![Confinement::None];
    if sandbox_available("runner") {
        all.push(Confinement::ReadOnly);
    }
    all
}

fn printf_escape(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("\\x{byte:02x}")).collect()
}

#[test]
fn output_keeps_arrival_order_with_one_seq_across_both_streams() {
    for confinement in confinements() {
        let dirs = dirs();
        let (outcome, events) = run_gated(
            spec(
                &format!(
                    "printf o1; {WAIT_AT_GATE}; printf e1 >&2; {WAIT_AT_GATE}; printf o2; {WAIT_AT_GATE}; printf e2 >&2"
                ),
                &dirs.scratch,
                &dirs.scratch,
                confinement,
            ),
            |_| true,
        );
        assert_eq!(outcome.exit_code, Some(0));
        let expected = [
            (Stream::Stdout, "o1"),
            (Stream::Stderr, "e1"),
            (Stream::Stdout, "o2"),
            (Stream::Stderr, "e2"),
        ];
        let expected: Vec<OutputEvent> = expected
            .iter()
            .zip(0..)
            .map(|((stream, chunk), seq)| OutputEvent {
                stream: *stream,
                seq,
                chunk: (*chunk).to_owned(),
            })
            .collect();
        assert_eq!(events, expected);
    }
}

#[test]
fn small_writes_are_coalesced() {
    let dirs = dirs();
    let (_, events) = run(spec(
        "for i in $(seq 200); do printf x; done",
        &dirs.scratch,
        &dirs.scratch,
        Confinement::None,
    ));
    assert_eq!(events.text(Stream::Stdout), "x".repeat(200));
    assert!(
        events.all().len() < 200,
        "{} events for 200 writes",
        events.all().len()
    );
    let seqs: Vec<u64> = events.all().iter().map(|event| event.seq).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
}

#[test]
fn a_character_split_across_writes_is_never_split_in_a_chunk() {
    let text = "aé€😀z";
    let bytes = text.as_bytes();
    for split in 1..bytes.len() {
        let dirs = dirs();
        // The first part always holds the complete "a", so it makes an
        // event, and the second part is written only after it: two reads.
        let command = format!(
            "printf '{}'; {WAIT_AT_GATE}; printf '{}'",
            printf_escape(&bytes[..split]),
            printf_escape(&bytes[split..])
        );
        let (outcome, events) = run_gated(
            spec(&command, &dirs.scratch, &dirs.scratch, Confinement::None),
            |_| true,
        );
        assert_eq!(outcome.stdout_bytes, bytes.len() as u64);
        let stdout: String = events.iter().map(|event| event.chunk.as_str()).collect();
        assert_eq!(stdout, text, "split at {split}");
        assert!(events.len() >= 2, "split at {split}: {events:?}");
        assert!(
            events.iter().all(|event| !event.chunk.contains('\u{FFFD}')),
            "split at {split}"
        );
    }
}

#[test]
fn invalid_bytes_become_replacement_characters() {
    let cases: [(&[u8], &str); 4] = [
        (b"a\xffb", "a\u{FFFD}b"),
        (b"\xe2\x82", "\u{FFFD}"),
        (b"x\xe2\x82y", "x\u{FFFD}y"),
        (b"\xc3\x28", "\u{FFFD}("),
    ];
    for (bytes, expected) in cases {
        let dirs = dirs();
        let command = format!("printf '{}'", printf_escape(bytes));
        let (outcome, events) = run(spec(&command, &dirs.scratch, &dirs.scratch, Confinement::None));
        assert_eq!(events.text(Stream::Stdout), expected, "{bytes:?}");
        assert_eq!(outcome.stdout_bytes, bytes.len() as u64);
        assert_eq!(outcome.stdout_sha256, sha256_hex(expected.as_bytes()));
    }
}

#[test]
fn the_cap_stops_events_but_counts_and_hashes_every_byte() {
    for confinement in confinements() {
        let dirs = dirs();
        let mut capped = spec(
            &format!("head -c 3000 /dev/zero | tr '\\0' a; {WAIT_AT_GATE}; printf bbb >&2"),
            &dirs.scratch,
            &dirs.scratch,
            confinement.clone(),
        );
        capped.output_cap = 1000;
        // stderr is written only once the cap has been delivered.
        let (outcome, events) = run_gated(capped, |events| {
            events.iter().map(|event| event.chunk.len()).sum::<usize>() >= 1000
        });
        let text = |stream: Stream| -> String {
            events
                .iter()
                .filter(|event| event.stream == stream)
                .map(|event| event.chunk.as_str())
                .collect()
        };
        assert_eq!(text(Stream::Stdout), "a".repeat(1000));
        assert_eq!(text(Stream::Stderr), "");
        assert_eq!(
            (outcome.stdout_bytes, outcome.stderr_bytes, outcome.truncated),
            (3000, 3, true)
        );
        // The hashes cover what was delivered: 1000 bytes of stdout, no stderr.
        let stdout_hash = sha256_hex("a".repeat(1000).as_bytes());
        let stderr_hash = sha256_hex(b"");
        assert_eq!(outcome.stdout_sha256, stdout_hash);
        assert_eq!(outcome.stderr_sha256, stderr_hash);
        let mut combined = hex::decode(&stdout_hash).unwrap();
        combined.extend(hex::decode(&stderr_hash).unwrap());
        assert_eq!(outcome.output_sha256, sha256_hex(&combined));

        // Exactly the cap is not truncated.
        let mut exact = spec("printf 0123456789", &dirs.scratch, &dirs.scratch, confinement);
        exact.output_cap = 10;
        let (outcome, events) = run(exact);
        assert_eq!(
            (events.text(Stream::Stdout).as_str(), outcome.truncated),
            ("0123456789", false)
        );
    }
}

#[test]
fn the_cap_never_cuts_a_character_in_half() {
    let dirs = dirs();
    let mut capped = spec("printf 'ab€€'", &dirs.scratch, &dirs.scratch, Confinement::None);
    capped.output_cap = 4;
    let (outcome, events) = run(capped);
    assert_eq!(events.text(Stream::Stdout), "ab");
    assert_eq!((outcome.stdout_bytes, outcome.truncated), (8, true));
}

#[test]
fn a_large_output_is_counted_exactly() {
    let dirs = dirs();
    let (outcome, events) = run(spec(
        "head -c 20000000 /dev/zero; echo done >&2",
        &dirs.scratch,
        &dirs.scratch,
        Confinement::None,
    ));
    assert_eq!(outcome.stdout_bytes, 20_000_000);
    assert!(outcome.truncated);
    assert_eq!(
        events.text(Stream::Stdout).len() as u64,
        plan_exec::DEFAULT_OUTPUT_CAP
    );
    assert_eq!(
        outcome.stdout_sha256,
        sha256_hex(&vec![0_u8; plan_exec::DEFAULT_OUTPUT_CAP as usize])
    );
}

#[test]
fn the_environment_is_minimal_and_documented() {
    for confinement in confinements() {
        let dirs = dirs();
        let mut spec = spec("env", &dirs.scratch, &dirs.scratch, confinement);
        spec.env = vec![
            ("EXTRA".into(), "1".into()),
            ("TMPDIR".into(), "/elsewhere".into()),
            ("LANG".into(), "C".into()),
        ];
        let (_, events) = run(spec);
        let mut keys: Vec<String> = events
            .text(Stream::Stdout)
            .lines()
            .map(|line| line.to_owned())
            .filter(|line| {
                !line.starts_with("PWD=") && !line.starts_with("SHLVL=") && !line.starts_with("_=")
            })
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            vec![
                "EXTRA=1".to_owned(),
                "LANG=C".to_owned(),
                format!("PATH={}", plan_exec::DEFAULT_PATH),
                format!("TMPDIR={}", dirs.scratch.display()),
            ]
        );
    }
}

#[test]
fn stdin_is_dev_null_only_stdio_is_inherited_and_the_shell_leads_its_own_group() {
    // A descriptor the host leaks (not close-on-exec, as an embedder's
    // foreign code may create one) reaches a plain child but not the shell.
    let leaked = std::fs::File::open("/dev/null").unwrap();
    rustix::io::fcntl_setfd(&leaked, rustix::io::FdFlags::empty()).unwrap();
    let leaked_fd = std::os::fd::AsRawFd::as_raw_fd(&leaked).to_string();
    let plain = std::process::Command::new("ls")
        .arg("/proc/self/fd")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&plain.stdout)
            .lines()
            .any(|fd| fd == leaked_fd),
        "the leak must be real"
    );
    for confinement in confinements() {
        let dirs = dirs();
        let (outcome, events) = run(spec(
            "cat; readlink /proc/self/fd/0; ls /proc/self/fd | tr '\\n' ' '; echo; \
             read -r _ _ _ _ pgrp session _ < /proc/$$/stat; [ \"$pgrp\" = $$ ] && echo leader; echo $session; pwd",
            &dirs.scratch,
            &dirs.scratch,
            confinement,
        ));
        assert_eq!(outcome.exit_code, Some(0));
        let stdout = events.text(Stream::Stdout);
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines[0], "/dev/null");
        let fds: Vec<&str> = lines[1].split_whitespace().collect();
        // ls's own descriptors: stdio and the directory it lists (3); an
        // inherited descriptor would add another.
        assert_eq!(fds, ["0", "1", "2", "3"], "inherited descriptors");
        assert_eq!(lines[2], "leader");
        let our_session = own_session_from_proc();
        assert_ne!(
            lines[3], our_session,
            "the command must not share the host's session"
        );
        assert_eq!(lines[4], dirs.scratch.display().to_string());
    }
}

/// This process's session id as `/proc` reports it, the same view the
/// command's own `/proc/$$/stat` gives. `getsid` is not used because a
/// session led from outside this pid namespace (as in some containers) is
/// reported as 0, which the kernel's syscall wrapper refuses to represent.
fn own_session_from_proc() -> String {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The command name may contain spaces and parentheses; the fields after
    // the last ')' are state, ppid, pgrp, session.
    let after_name = &stat[stat.rfind(')').unwrap() + 1..];
    after_name.split_whitespace().nth(3).unwrap().to_owned()
}

#[test]
fn exit_codes_and_signals_are_reported() {
    let dirs = dirs();
    let (outcome, _) = run(spec("exit 7", &dirs.scratch, &dirs.scratch, Confinement::None));
    assert_eq!(
        (outcome.state, outcome.exit_code, outcome.signal),
        (CommandState::Exited, Some(7), None)
    );
    let (outcome, _) = run(spec(
        "kill -USR1 $$",
        &dirs.scratch,
        &dirs.scratch,
        Confinement::None,
    ));
    assert_eq!(
        (outcome.state, outcome.exit_code, outcome.signal),
        (CommandState::Exited, None, Some(10))
    );
}

/// Background jobs: two that write nowhere (so nothing but the runner's
/// sweep ends them before their sleep does; one ignores SIGTERM and SIGHUP),
/// and one that keeps stdout open and leaves a mark if it lives to finish
/// (as it would if the runner waited for end of file instead of killing it).
/// The pids are printed (`name=pid`): inside the namespaces the scratch
/// directory is the command's own.
const BACKGROUND: &str = "sleep 60 >/dev/null 2>&1 & echo bg=$!; \
    (trap '' TERM HUP; exec sleep 60) >/dev/null 2>&1 & echo stubborn=$!; \
    (sleep 20; echo holder-finished) & echo holder=$!; \
    echo sh=$$";

fn pids(events: &Events) -> Vec<i32> {
    let stdout = events.text(Stream::Stdout);
    assert!(
        !stdout.contains("holder-finished"),
        "a background job lived to finish"
    );
    ["bg", "stubborn", "holder", "sh"]
        .iter()
        .map(|name| {
            let prefix = format!("{name}=");
            stdout
                .lines()
                .find_map(|line| line.strip_prefix(&prefix))
                .unwrap_or_else(|| panic!("no {name} pid in {stdout:?}"))
                .parse()
                .unwrap()
        })
        .collect()
}

#[test]
fn a_timeout_kills_the_whole_group_background_jobs_included() {
    for confinement in confinements() {
        let dirs = dirs();
        let mut timed = spec(
            &format!("{BACKGROUND}; sleep 60"),
            &dirs.scratch,
            &dirs.scratch,
            confinement,
        );
        timed.timeout = Duration::from_millis(500);
        let (outcome, events) = run(timed);
        assert_eq!(
            (outcome.state, outcome.signal),
            (CommandState::TimedOut, Some(15))
        );
        for pid in pids(&events) {
            assert!(!alive_in(&dirs.scratch, pid), "pid {pid} survived the timeout");
        }
    }
}

#[test]
fn a_timeout_kills_after_the_grace_when_sigterm_is_ignored() {
    let dirs = dirs();
    let mut timed = spec(
        "trap '' TERM; echo $$ > \"$TMPDIR/sh.pid\"; while :; do sleep 0.05; done",
        &dirs.scratch,
        &dirs.scratch,
        Confinement::None,
    );
    timed.timeout = Duration::from_millis(300);
    timed.grace = Duration::from_millis(200);
    let (outcome, _) = run(timed);
    assert_eq!((outcome.state, outcome.signal), (CommandState::TimedOut, Some(9)));
    assert!(!alive_in(&dirs.scratch, read_pid(&dirs.scratch.join("sh.pid"))));
}

#[test]
fn background_jobs_left_when_the_shell_exits_are_killed() {
    for confinement in confinements() {
        let dirs = dirs();
        // The background jobs keep stdout open; wait() must not hang on it.
        let (outcome, events) = run(spec(
            &format!("{BACKGROUND}; exit 0"),
            &dirs.scratch,
            &dirs.scratch,
            confinement,
        ));
        assert_eq!(
            (outcome.state, outcome.exit_code),
            (CommandState::Exited, Some(0))
        );
        for pid in pids(&events) {
            assert!(!alive_in(&dirs.scratch, pid), "pid {pid} outlived the shell");
        }
    }
}

#[test]
fn an_unsandboxed_job_that_leaves_the_group_is_killed_too() {
    let dirs = dirs();
    let (outcome, _) = run(spec(
        // The shell exits only once the escaped job has written its pid: it
        // waits on a FIFO the job writes to after that.
        "mkfifo \"$TMPDIR/up\"; \
         setsid -f bash -c 'echo $$ > \"$TMPDIR/escaped.pid\"; echo up > \"$TMPDIR/up\"; exec sleep 60'; \
         read -r _ < \"$TMPDIR/up\"",
        &dirs.scratch,
        &dirs.scratch,
        Confinement::None,
    ));
    assert_eq!(outcome.exit_code, Some(0));
    assert!(!alive_in(
        &dirs.scratch,
        read_pid(&dirs.scratch.join("escaped.pid"))
    ));
}

#[test]
fn cancel_from_another_thread_ends_the_command() {
    for confinement in confinements() {
        let dirs = dirs();
        let (running, events) = start(spec(
            &format!("{BACKGROUND}; sleep 60"),
            &dirs.scratch,
            &dirs.scratch,
            confinement,
        ));
        let handle = running.cancel_handle();
        let started = events.clone();
        let canceller = std::thread::spawn(move || {
            // `sh=` is the last line of `BACKGROUND`.
            stdout_line(&started, "sh=");
            handle.cancel();
            handle.cancel();
        });
        let outcome = running.wait();
        canceller.join().unwrap();
        assert_eq!(
            (outcome.state, outcome.signal),
            (CommandState::Cancelled, Some(15))
        );
        for pid in pids(&events) {
            assert!(
                !alive_in(&dirs.scratch, pid),
                "pid {pid} survived the cancellation"
            );
        }
    }
}

#[test]
fn cancel_after_the_end_changes_nothing() {
    let dirs = dirs();
    let (running, _) = start(spec("true", &dirs.scratch, &dirs.scratch, Confinement::None));
    let handle = running.cancel_handle();
    let outcome = running.wait();
    handle.cancel();
    assert_eq!(
        (outcome.state, outcome.exit_code),
        (CommandState::Exited, Some(0))
    );
}

#[test]
fn a_timeout_too_large_to_represent_means_none() {
    let dirs = dirs();
    let mut forever = spec("echo fine", &dirs.scratch, &dirs.scratch, Confinement::None);
    forever.timeout = Duration::MAX;
    forever.grace = Duration::MAX;
    let (outcome, events) = run(forever);
    assert_eq!(
        (outcome.state, outcome.exit_code),
        (CommandState::Exited, Some(0))
    );
    assert_eq!(events.text(Stream::Stdout), "fine\n");
}
