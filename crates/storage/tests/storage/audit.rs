//! The command audit in `transcript_entries`: entry order and seq, the
//! folded records, refusals, and the startup fence's `interrupted` entries
//! written in the fence's transaction (and only once).

use plan_core::{CommandRun, CommandState, ErrorCode, Sandbox, Session};
use plan_storage::{CommandEntryKind, CommandFilter, StorageError, Store};

const NOW: i64 = 1_800_000_000_000;

fn run(call_id: &str, state: CommandState) -> CommandRun {
    CommandRun {
        call_id: call_id.to_owned(),
        session_id: "s1".into(),
        turn_id: "t1".into(),
        command: "git status\u{1b}[2J".to_owned(),
        cwd: ".".to_owned(),
        shell_id: "bash".to_owned(),
        shell_path: "/bin/bash".to_owned(),
        sandbox: Sandbox::ReadOnly,
        network: false,
        state,
        exit_code: None,
        signal: None,
        error_code: None,
        started_at: NOW,
        ended_at: None,
        stdout_bytes: 0,
        stderr_bytes: 0,
        truncated: false,
    }
}

fn store(dir: &std::path::Path) -> Store {
    let (mut store, _) = Store::open(dir.join("plan.db")).unwrap();
    store
        .create_session(&Session::new("s1", Some("/w".to_owned())), NOW)
        .unwrap();
    store
}

#[test]
fn entries_round_trip_in_order_and_fold_to_the_latest_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = store(dir.path());
    let started = run("c1", CommandState::Running);
    let mut ended = run("c1", CommandState::Exited);
    ended.exit_code = Some(3);
    ended.ended_at = Some(NOW + 5);
    ended.stdout_bytes = 12;
    let mut refused = run("c2", CommandState::FailedToStart);
    refused.error_code = Some(ErrorCode::CommandNotAllowed);
    store
        .record_command(CommandEntryKind::Started, &started, None, NOW)
        .unwrap();
    store
        .record_command(CommandEntryKind::Ended, &ended, Some(&"a".repeat(64)), NOW + 5)
        .unwrap();
    store
        .record_command(CommandEntryKind::Refused, &refused, None, NOW + 6)
        .unwrap();
    // A second start of c1, refused after it ran, does not hide the run.
    let mut again = run("c1", CommandState::FailedToStart);
    again.error_code = Some(ErrorCode::CommandNotAllowed);
    store
        .record_command(CommandEntryKind::Refused, &again, None, NOW + 7)
        .unwrap();
    assert_eq!(store.command_record("s1", "c1").unwrap().unwrap().run, ended);
    let entries = store.command_entries("s1", "c1").unwrap();
    assert_eq!(entries.len(), 3);
    assert_eq!((entries[0].kind, entries[0].seq), (CommandEntryKind::Started, 1));
    assert_eq!((entries[1].kind, entries[1].seq), (CommandEntryKind::Ended, 2));
    assert_eq!(entries[0].run, started);
    assert_eq!(entries[1].run, ended);
    assert_eq!(entries[1].output_sha256.as_deref(), Some("a".repeat(64).as_str()));
    let records = store.list_commands(&CommandFilter::default()).unwrap();
    let summary: Vec<(&str, CommandEntryKind, CommandState)> = records
        .iter()
        .map(|record| (record.run.call_id.as_str(), record.kind, record.run.state))
        .collect();
    assert_eq!(
        summary,
        [
            ("c1", CommandEntryKind::Refused, CommandState::FailedToStart),
            ("c2", CommandEntryKind::Refused, CommandState::FailedToStart),
            ("c1", CommandEntryKind::Ended, CommandState::Exited),
        ],
        "newest first, one record per run"
    );
    assert_eq!(records[1].run.error_code, Some(ErrorCode::CommandNotAllowed));
    let limited = store
        .list_commands(&CommandFilter {
            session_id: Some("s1".into()),
            limit: Some(1),
        })
        .unwrap();
    assert_eq!(limited.len(), 1);
    assert!(matches!(
        store.list_commands(&CommandFilter {
            session_id: Some("nobody".into()),
            limit: None,
        }),
        Err(StorageError::SessionNotFound { id }) if id == "nobody"
    ));
}

#[test]
fn the_startup_fence_interrupts_unended_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = store(dir.path());
    store
        .record_command(
            CommandEntryKind::Started,
            &run("c1", CommandState::Running),
            None,
            NOW,
        )
        .unwrap();
    store
        .record_command(
            CommandEntryKind::Started,
            &run("c2", CommandState::Running),
            None,
            NOW,
        )
        .unwrap();
    let mut ended = run("c2", CommandState::Exited);
    ended.ended_at = Some(NOW + 1);
    store
        .record_command(CommandEntryKind::Ended, &ended, Some(&"b".repeat(64)), NOW + 1)
        .unwrap();
    store.startup_fence(NOW + 10).unwrap();
    let c1 = store.command_record("s1", "c1").unwrap().unwrap();
    assert_eq!(c1.run.state, CommandState::Interrupted);
    assert_eq!(c1.run.error_code, Some(ErrorCode::HostRestarted));
    assert_eq!(c1.run.ended_at, Some(NOW + 10));
    assert_eq!(
        store.command_record("s1", "c2").unwrap().unwrap().run.state,
        CommandState::Exited
    );
    store.startup_fence(NOW + 20).unwrap();
    assert_eq!(
        store.command_entries("s1", "c1").unwrap().len(),
        2,
        "a second fence adds nothing"
    );
    assert_eq!(store.command_entries("s1", "c2").unwrap().len(), 2);
}
