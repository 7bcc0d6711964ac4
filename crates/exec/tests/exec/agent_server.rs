//! An agent's server driven over its pipes: it gets what is written to it
//! and the caller's added environment, answers on its stdout, and dies,
//! with what it started in its group, when its handle is dropped.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use plan_exec::AgentServer;

use crate::support::{LIVENESS, ends_within, pidfd};

#[test]
fn it_speaks_over_its_pipes_gets_the_added_environment_and_dies_with_its_handle() {
    let dir = tempfile::tempdir().unwrap();
    let script = "read line; echo \"$line $ADDED $(pwd)\"; sleep 1000 & echo $!; wait";
    let mut server = AgentServer::start(
        Path::new("/bin/sh"),
        &["-c".into(), script.into()],
        dir.path(),
        &[("ADDED".into(), "added".into())],
    )
    .unwrap();
    let mut stdin = server.take_stdin().unwrap();
    let mut lines = BufReader::new(server.take_stdout().unwrap()).lines();
    writeln!(stdin, "hello").unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    assert_eq!(
        lines.next().unwrap().unwrap(),
        format!("hello added {}", cwd.display())
    );
    let sleeper: i32 = lines.next().unwrap().unwrap().trim().parse().unwrap();
    let server_end = pidfd(i32::try_from(server.id()).unwrap()).unwrap();
    let sleeper_end = pidfd(sleeper).unwrap();
    drop(server);
    assert!(
        ends_within(&server_end, LIVENESS),
        "the server outlived its handle"
    );
    assert!(
        ends_within(&sleeper_end, LIVENESS),
        "what the server started outlived its handle"
    );
}

#[test]
fn a_program_that_cannot_start_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-agent");
    assert!(AgentServer::start(&missing, &[], dir.path(), &[]).is_err());
}
