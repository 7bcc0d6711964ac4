//! No privileges and no escapes: every capability set is empty and
//! no_new_privs and seccomp are on (so root gets no bypass: a root shell
//! cannot write a 0444 file even in the scratch dir, which root can do
//! unsandboxed); leaving the process group or session, new namespaces and
//! metadata changes in the scratch dir are refused; where Landlock scopes
//! signals (ABI 6), none reaches a process outside the sandbox.

use plan_exec::{CommandState, Confinement, Stream};

use crate::support::*;

fn status_field(status: &str, field: &str) -> String {
    status
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .map(|value| value.trim().to_owned())
        .unwrap_or_else(|| panic!("{field} missing from {status}"))
}

#[test]
fn every_capability_is_dropped_and_no_new_privs_and_seccomp_are_on() {
    if !sandbox_available("every_capability_is_dropped") {
        return;
    }
    let dirs = dirs();
    let (outcome, events) = run(spec(
        "cat /proc/self/status",
        &dirs.scratch,
        &dirs.scratch,
        Confinement::ReadOnly,
    ));
    assert_eq!(outcome.exit_code, Some(0));
    let status = events.text(Stream::Stdout);
    for field in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(status_field(&status, field), "0000000000000000", "{field}");
    }
    assert_eq!(status_field(&status, "NoNewPrivs"), "1");
    assert_eq!(status_field(&status, "Seccomp"), "2");
}

#[test]
fn root_gets_no_bypass() {
    if !sandbox_available("root_gets_no_bypass") {
        return;
    }
    let is_root = rustix::process::geteuid().is_root();
    if !is_root {
        eprintln!("root_gets_no_bypass: not running as root; checking the unprivileged case only");
    }
    // The command makes the read-only file itself (a umask, since mode
    // changes are refused): inside the namespaces its scratch directory is
    // a private tmpfs the test cannot put files in.
    let command = "(umask 0222; echo keep > \"$TMPDIR/protected.txt\"); \
        echo pwned >> \"$TMPDIR/protected.txt\"; rc=$?; cat \"$TMPDIR/protected.txt\"; exit $rc";
    let dirs = dirs();
    let (outcome, events) = run(spec(command, &dirs.scratch, &dirs.scratch, Confinement::ReadOnly));
    assert_eq!(outcome.state, CommandState::Exited);
    assert_ne!(outcome.exit_code, Some(0));
    assert_eq!(events.text(plan_exec::Stream::Stdout), "keep\n");
    if is_root {
        // Root without the sandbox writes it: the capability drop is what
        // made the difference above.
        let dirs = self::dirs();
        let (outcome, events) = run(spec(command, &dirs.scratch, &dirs.scratch, Confinement::None));
        assert_eq!(outcome.exit_code, Some(0));
        assert_eq!(events.text(plan_exec::Stream::Stdout), "keep\npwned\n");
    }
}

#[test]
fn escapes_and_metadata_changes_are_refused_even_in_the_scratch_dir() {
    if !sandbox_available("escapes_and_metadata_changes_are_refused") {
        return;
    }
    let cases = [
        // `&& :` keeps bash from executing python in its own place, so python
        // is not the group leader (which may never call setsid).
        ("setsid", "python3 -c \"import os; os.setsid()\" && :"),
        ("setpgid", "python3 -c \"import os; os.setpgid(0, 0)\""),
        ("setsid command", "setsid -w true"),
        (
            "user namespace",
            "python3 -c \"import ctypes; assert ctypes.CDLL(None).unshare(0x10000000) == 0\"",
        ),
        ("unshare command", "unshare -U true"),
        // Mode and time changes in scratch are the kernel's business inside
        // the namespaces (see `mode_changes`); without them seccomp refuses
        // them everywhere.
        (
            "setxattr in scratch",
            "echo x > \"$TMPDIR/f\" && python3 -c \"import os; os.setxattr('$TMPDIR/f', 'user.a', b'1')\"",
        ),
        // PTRACE_TRACEME only lets the parent shell trace this python: harmless.
        (
            "ptrace",
            "python3 -c \"import ctypes; assert ctypes.CDLL(None).ptrace(0, 0, 0, 0) == 0\"",
        ),
    ];
    let mut cases = cases.to_vec();
    if !namespaces_available() {
        cases.push((
            "chmod in scratch",
            "echo x > \"$TMPDIR/f\" && chmod 600 \"$TMPDIR/f\"",
        ));
        cases.push((
            "touch -d in scratch",
            "echo x > \"$TMPDIR/f\" && touch -d 2000-01-01 \"$TMPDIR/f\"",
        ));
    }
    let mut failures = Vec::new();
    for (name, command) in cases {
        let dirs = dirs();
        let (outcome, _) = run(spec(command, &dirs.scratch, &dirs.scratch, Confinement::ReadOnly));
        if outcome.state != CommandState::Exited || outcome.exit_code == Some(0) {
            failures.push(format!("{name}: not refused: {outcome:?}"));
        }
        // Without the sandbox each succeeds, so the refusal is the sandbox's.
        let dirs = super::support::dirs();
        let (outcome, events) = run(spec(command, &dirs.scratch, &dirs.scratch, Confinement::None));
        if outcome.exit_code != Some(0) {
            failures.push(format!(
                "{name}: the unsandboxed control failed: {}",
                events.text(Stream::Stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Linux 6.12 brought Landlock ABI 6, which scopes signals to the sandbox.
fn kernel_has_signal_scoping() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut numbers = release
        .trim()
        .split(['.', '-'])
        .map(|part| part.parse::<u32>().unwrap_or(0));
    let (major, minor) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    (major, minor) >= (6, 12)
}

#[test]
fn signals_cannot_leave_the_sandbox_where_landlock_scopes_them() {
    if !sandbox_available("signals_cannot_leave_the_sandbox") {
        return;
    }
    if !kernel_has_signal_scoping() {
        eprintln!(
            "signals_cannot_leave_the_sandbox: this kernel predates Landlock ABI 6; not checked (documented)"
        );
        return;
    }
    // Signal 0 only asks whether the process exists: a harmless probe of
    // whether a signal to this test process (outside the sandbox) is allowed.
    let dirs = dirs();
    let command = format!("kill -0 {}", std::process::id());
    let (outcome, _) = run(spec(
        &command,
        &dirs.scratch,
        &dirs.scratch,
        Confinement::ReadOnly,
    ));
    assert_eq!(
        (outcome.state, outcome.exit_code),
        (CommandState::Exited, Some(1))
    );
    let (outcome, _) = run(spec(&command, &dirs.scratch, &dirs.scratch, Confinement::None));
    assert_eq!(outcome.exit_code, Some(0));
    // Inside the sandbox, its own processes can still be signalled.
    let (outcome, events) = run(spec(
        "sleep 5 & job=$!; kill $job; wait $job; echo $?",
        &dirs.scratch,
        &dirs.scratch,
        Confinement::ReadOnly,
    ));
    assert_eq!(outcome.exit_code, Some(0));
    assert_eq!(events.text(Stream::Stdout), "143\n", "the job died by SIGTERM");
}
