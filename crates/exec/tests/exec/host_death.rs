//! A host that dies, even by SIGKILL, takes its commands with it; a
//! supervisor killed from outside takes the shell with it (parent-death
//! signal) and the outcome says `Lost`.
//!
//! The "host" is this test binary run again with `PLAN_EXEC_TEST_HOST` set:
//! it starts a command, says it is ready (a line into a FIFO the test
//! holds), and waits to be killed (reading its stdin, a pipe the test holds
//! open).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use plan_exec::{CommandState, Confinement, Stream};

use crate::support::*;

const HOST_ENV: &str = "PLAN_EXEC_TEST_HOST";

/// The host side; does nothing in a normal test run.
#[test]
fn host_process_entry() {
    let Some(dir) = std::env::var_os(HOST_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let scratch = dir.join("scratch");
    let confinement = if std::env::var_os("PLAN_EXEC_TEST_SANDBOX").is_some() {
        Confinement::ReadOnly
    } else {
        Confinement::None
    };
    // The pids are printed: inside the namespaces the scratch directory is
    // the command's own; this host writes them where the test finds them.
    let events = Events::default();
    let running = runner().spawn(
        spec(
            "sleep 60 & echo bg=$!; echo sh=$$; sleep 60",
            &scratch,
            &scratch,
            confinement,
        ),
        events.sink(),
    );
    // `sh=` is printed after `bg=`.
    stdout_line(&events, "sh=");
    for line in events.text(Stream::Stdout).lines() {
        let (name, pid) = line.split_once('=').unwrap();
        std::fs::write(dir.join(format!("{name}.pid")), format!("{pid}\n")).unwrap();
    }
    // The test reads this line from its FIFO once the pid files are whole.
    std::fs::write(dir.join("ready"), running.supervisor_pid().unwrap().to_string()).unwrap();
    // Until the test kills it (or, should the test itself die, until its
    // end of the pipe closes): nothing here ends on a clock.
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
}

#[test]
fn sigkill_of_the_host_kills_its_commands() {
    let mut cases = vec![false];
    if sandbox_available("sigkill_of_the_host_kills_its_commands") {
        cases.push(true);
    }
    for sandboxed in cases {
        let dirs = dirs();
        let mut host = Command::new(std::env::current_exe().unwrap());
        host.args([
            "--exact",
            "host_death::host_process_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HOST_ENV, dirs.root.path())
        .stdin(std::process::Stdio::piped());
        if sandboxed {
            host.env("PLAN_EXEC_TEST_SANDBOX", "1");
        }
        let ready = Fifo::new(&dirs.root.path().join("ready"));
        let mut host = host.spawn().unwrap();
        assert!(ready.receive().is_some(), "the test host never got ready");
        // Inside namespaces the pids the command wrote are its own
        // namespace's: find the same processes here.
        let shell = outer_pid(&dirs.scratch, read_pid(&dirs.root.path().join("sh.pid"))).unwrap();
        let background = outer_pid(&dirs.scratch, read_pid(&dirs.root.path().join("bg.pid"))).unwrap();
        assert!(alive(shell) && alive(background));
        let pidfds = [shell, background].map(|pid| pidfd(pid).unwrap());
        host.kill().unwrap();
        host.wait().unwrap();
        for (pid, pidfd) in [shell, background].into_iter().zip(&pidfds) {
            assert!(
                ends_within(pidfd, Duration::from_secs(10)),
                "pid {pid} outlived its SIGKILLed host"
            );
        }
    }
}

#[test]
fn a_killed_supervisor_takes_the_shell_with_it() {
    let dirs = dirs();
    let (running, events) = start(spec(
        "echo sh=$$; sleep 60",
        &dirs.scratch,
        &dirs.scratch,
        Confinement::None,
    ));
    let shell = outer_pid(&dirs.scratch, stdout_line(&events, "sh=").parse().unwrap()).unwrap();
    let shell_pidfd = pidfd(shell).unwrap();
    let supervisor =
        rustix::process::Pid::from_raw(i32::try_from(running.supervisor_pid().unwrap()).unwrap()).unwrap();
    rustix::process::kill_process(supervisor, rustix::process::Signal::KILL).unwrap();
    let outcome = running.wait();
    assert_eq!(outcome.state, CommandState::Lost);
    assert!(
        ends_within(&shell_pidfd, Duration::from_secs(10)),
        "the shell outlived its supervisor"
    );
}
