//! The command audit in `transcript_entries`: entry order and seq, the
//! folded records, refusals, and the startup fence's `interrupted` entries
//! written in the fence's transaction (and only once).

use plan_core::{CommandRun, CommandState, ErrorCode, Sandbox, Session};
use plan_storage::{CommandEntryKind, CommandFilter, StorageError, Store};

const NOW: i64 = 1_800_000_000_000;

fn run(call_id: &str, state: CommandState) -> CommandRun {
    CommandRun {
        call_id: call_id.into(),
        session_id: "s1".into(),
        turn_id: "t1".into(),
        command: "git status\u{1b}[2J".to_owned(),
        cwd: ".".to_owned(),
        shell: plan_core::CommandShell {
            id: "bash".to_owned(),
            path: "/bin/bash".to_owned(),
        },
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
    assert_eq!(
        store.command_record("s1", &"c1".into()).unwrap().unwrap().run,
        ended
    );
    let entries = store.command_entries("s1", &"c1".into()).unwrap();
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
    let c1 = store.command_record("s1", &"c1".into()).unwrap().unwrap();
    assert_eq!(c1.run.state, CommandState::Interrupted);
    assert_eq!(c1.run.error_code, Some(ErrorCode::HostRestarted));
    assert_eq!(c1.run.ended_at, Some(NOW + 10));
    assert_eq!(
        store
            .command_record("s1", &"c2".into())
            .unwrap()
            .unwrap()
            .run
            .state,
        CommandState::Exited
    );
    store.startup_fence(NOW + 20).unwrap();
    assert_eq!(
        store.command_entries("s1", &"c1".into()).unwrap().len(),
        2,
        "a second fence adds nothing"
    );
    assert_eq!(store.command_entries("s1", &"c2".into()).unwrap().len(), 2);
}

/// The `content_json` texts of a session's entries, oldest first.
fn stored_texts(dir: &std::path::Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(dir.join("plan.db")).unwrap();
    let mut statement = conn
        .prepare("SELECT content_json FROM transcript_entries WHERE role = 'tool' ORDER BY id")
        .unwrap();
    statement
        .query_map([], |row| row.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A stored text without the chain's `audit` field (written first, keys
/// being sorted), checked to be exactly `{"hash":<64 hex>,"seq":N}`.
fn without_chain_field(text: &str, seq: u64) -> String {
    let rest = text.strip_prefix(r#"{"audit":{"hash":""#).unwrap();
    let (hash, rest) = rest.split_at(64);
    assert!(
        hash.bytes()
            .all(|byte| byte.is_ascii_hexdigit() && !byte.is_ascii_uppercase())
    );
    let rest = rest.strip_prefix(&format!(r#"","seq":{seq}}},"#)).unwrap();
    format!("{{{rest}")
}

#[test]
fn entries_are_stored_in_the_same_json_text_as_always() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = store(dir.path());
    let mut ended = run("c1", CommandState::Exited);
    ended.exit_code = Some(0);
    ended.ended_at = Some(NOW + 5);
    ended.stdout_bytes = 12;
    let mut refused = run("c2", CommandState::FailedToStart);
    refused.error_code = Some(ErrorCode::CommandNotAllowed);
    store
        .record_command(
            CommandEntryKind::Started,
            &run("c1", CommandState::Running),
            None,
            NOW,
        )
        .unwrap();
    store
        .record_command(CommandEntryKind::Ended, &ended, Some(&"a".repeat(64)), NOW + 5)
        .unwrap();
    store
        .record_command(CommandEntryKind::Refused, &refused, None, NOW + 6)
        .unwrap();
    let hash = "a".repeat(64);
    let texts: Vec<String> = stored_texts(dir.path())
        .iter()
        .zip(1..)
        .map(|(text, seq)| without_chain_field(text, seq))
        .collect();
    assert_eq!(
        texts,
        [
            r#"{"callId":"c1","command":"git status\u001b[2J","cwd":".","endedAt":null,"errorCode":null,"exitCode":null,"network":false,"sandbox":"read-only","sessionId":"s1","shell":{"id":"bash","path":"/bin/bash"},"signal":null,"startedAt":1800000000000,"state":"running","stderrBytes":0,"stdoutBytes":0,"truncated":false,"turnId":"t1","type":"commandStarted"}"#.to_owned(),
            format!(
                r#"{{"callId":"c1","command":"git status\u001b[2J","cwd":".","endedAt":1800000000005,"errorCode":null,"exitCode":0,"network":false,"outputSha256":"{hash}","sandbox":"read-only","sessionId":"s1","shell":{{"id":"bash","path":"/bin/bash"}},"signal":null,"startedAt":1800000000000,"state":"exited","stderrBytes":0,"stdoutBytes":12,"truncated":false,"turnId":"t1","type":"commandEnded"}}"#
            ),
            r#"{"callId":"c2","command":"git status\u001b[2J","cwd":".","endedAt":null,"errorCode":"COMMAND_NOT_ALLOWED","exitCode":null,"network":false,"sandbox":"read-only","sessionId":"s1","shell":{"id":"bash","path":"/bin/bash"},"signal":null,"startedAt":1800000000000,"state":"failedToStart","stderrBytes":0,"stdoutBytes":0,"truncated":false,"turnId":"t1","type":"commandRefused"}"#.to_owned(),
        ]
    );
}

#[test]
fn entries_without_the_later_fields_still_read_with_their_defaults() {
    let dir = tempfile::tempdir().unwrap();
    drop(store(dir.path()));
    let conn = rusqlite::Connection::open(dir.path().join("plan.db")).unwrap();
    for (seq, content) in [
        // No shell, network, byte counts, truncation or optional fields.
        r#"{"type":"commandStarted","callId":"c1","sessionId":"s1","turnId":"t1","command":"ls","cwd":".","sandbox":"read-only","state":"running","startedAt":1800000000000}"#,
        // A shell without its path, and a code this build does not know.
        r#"{"type":"commandRefused","callId":"c2","sessionId":"s1","turnId":"t1","command":"ls","cwd":".","shell":{"id":"zsh"},"sandbox":"none","state":"failedToStart","errorCode":"SOME_LATER_CODE","startedAt":1800000000000}"#,
    ]
    .into_iter()
    .enumerate()
    {
        conn.execute(
            "INSERT INTO transcript_entries (session_id, seq, role, content_json, created_at)
             VALUES ('s1', ?1, 'tool', ?2, ?3)",
            rusqlite::params![seq as i64 + 1, content, NOW],
        )
        .unwrap();
    }
    drop(conn);
    let (store, _) = Store::open(dir.path().join("plan.db")).unwrap();
    let started = store.command_entries("s1", &"c1".into()).unwrap();
    let mut expected = run("c1", CommandState::Running);
    expected.command = "ls".to_owned();
    expected.shell = plan_core::CommandShell {
        id: String::new(),
        path: String::new(),
    };
    assert_eq!(started.len(), 1);
    assert_eq!(started[0].run, expected);
    assert_eq!(started[0].output_sha256, None);
    let refused = store.command_entries("s1", &"c2".into()).unwrap();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].run.shell.id, "zsh");
    assert_eq!(refused[0].run.shell.path, "");
    assert_eq!(refused[0].run.sandbox, Sandbox::None);
    assert_eq!(refused[0].run.error_code, None);
}
