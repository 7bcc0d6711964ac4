//! Host-run commands through `serve`: capabilities, a Plan command's
//! streamed output before its `command/exited`, a write the kernel refuses,
//! SIGKILL of the serving host while a command runs (the command dies, the
//! next host's fence records it interrupted and never re-runs it), and
//! `commands list|show` over the audit.
//!
//! Denial is probed only with writes under the test's own temporary
//! directory. Where the kernel sandbox is missing, the tests assert
//! `PLAN_SANDBOX_UNAVAILABLE` and say so.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::client::{REPLY_TIMEOUT, Serve};
use crate::support::run;

/// Starts `serve`, creates the Plan session `s1` on `workspace` and a turn.
fn plan_turn(db: &Path, workspace: &Path) -> (Serve, String, bool) {
    let mut serve = Serve::spawn(db, &[]);
    let init = serve.call("initialize", json!({"protocolVersion": 9}));
    let sandbox = init["capabilities"]["commands"]["planSandbox"] == "landlock";
    if !sandbox {
        eprintln!(
            "the kernel sandbox is unavailable here ({}); asserting PLAN_SANDBOX_UNAVAILABLE",
            init["capabilities"]["commands"]["reason"]
        );
    } else {
        assert_eq!(init["capabilities"]["commands"]["reason"], Value::Null);
    }
    serve.call(
        "session/create",
        json!({"sessionId": "s1", "workspaceRoot": workspace.to_str().unwrap(), "mode": "plan"}),
    );
    let turn = serve.call(
        "turn/start",
        json!({"sessionId": "s1", "prompt": "look around", "origin": "interactive"}),
    )["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    (serve, turn, sandbox)
}

fn bash(serve: &mut Serve, turn: &str, call_id: &str, command: &str) -> Value {
    let result = serve.call(
        "turn/toolCalls",
        json!({"sessionId": "s1", "turnId": turn, "calls": [
            {"callId": call_id, "name": "Bash", "input": {"command": command}}
        ]}),
    );
    result["results"][0].clone()
}

/// The `command/output` chunks of `call_id` seen before its `command/exited`.
fn until_exited(serve: &mut Serve, call_id: &str) -> (Vec<Value>, Value) {
    let mut output = Vec::new();
    loop {
        let message = serve.next_notification(REPLY_TIMEOUT);
        if message["params"]["callId"] != call_id {
            continue;
        }
        match message["method"].as_str() {
            Some("command/output") => output.push(message["params"].clone()),
            Some("command/exited") => return (output, message["params"]["command"].clone()),
            _ => {}
        }
    }
}

#[test]
fn a_plan_command_streams_before_it_exits_and_its_write_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap().join("w");
    std::fs::create_dir(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "plan me\n").unwrap();
    let db = dir.path().join("plan.db");
    let (mut serve, turn, sandbox) = plan_turn(&db, &workspace);
    let result = bash(
        &mut serve,
        &turn,
        "c1",
        "cat notes.txt; echo oops > written.txt; echo done >&2",
    );
    if !sandbox {
        assert_eq!(result["decision"], "deny");
        assert_eq!(result["error"]["code"], "PLAN_SANDBOX_UNAVAILABLE");
        return;
    }
    assert_eq!(result["decision"], "allow");
    assert_eq!(result["command"]["state"], "running");
    assert_eq!(result["command"]["sandbox"], "read-only");
    assert_eq!(result["command"]["network"], false);
    let (output, exited) = until_exited(&mut serve, "c1");
    let seqs: Vec<u64> = output
        .iter()
        .map(|chunk| chunk["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    let stdout: String = output
        .iter()
        .filter(|chunk| chunk["stream"] == "stdout")
        .map(|chunk| chunk["chunk"].as_str().unwrap())
        .collect();
    assert_eq!(stdout, "plan me\n");
    assert_eq!(exited["state"], "exited");
    assert!(
        !workspace.join("written.txt").exists(),
        "the kernel refused the write"
    );
    let get = serve.call("command/get", json!({"sessionId": "s1", "callId": "c1"}));
    assert_eq!(get, exited);
    assert_eq!(
        serve.code("command/get", json!({"sessionId": "s1", "callId": "nope"})),
        "COMMAND_NOT_FOUND"
    );
    assert_eq!(
        serve.code(
            "command/start",
            json!({"sessionId": "s1", "turnId": turn, "callId": "c1", "command": "ls"})
        ),
        "COMMAND_NOT_ALLOWED",
        "Plan commands start only through turn/toolCalls"
    );
    // Agent text is untrusted: a terminal escape in the command is shown
    // escaped by the human listing.
    let escaped = bash(&mut serve, &turn, "c2", "echo \u{1b}[2J");
    assert_eq!(escaped["command"]["state"], "running");
    until_exited(&mut serve, "c2");
    serve.call("turn/complete", json!({"sessionId": "s1", "turnId": turn}));
    assert!(serve.close().success());

    let list = run(Some(&db), &["commands", "list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(
        list.stdout.contains("read-only") && list.stdout.contains("cat notes.txt"),
        "{}",
        list.stdout
    );
    assert!(
        !list.stdout.contains('\u{1b}'),
        "no raw escape reaches the terminal"
    );
    assert!(list.stdout.contains("echo \\x1b[2J"), "{}", list.stdout);
    let json = run(Some(&db), &["commands", "list", "--json", "--session", "s1"]);
    let value: Value = serde_json::from_str(&json.stdout).unwrap();
    // Newest first: c2, the refused start of c1, then c1.
    assert_eq!(value["commands"][0]["command"]["callId"], "c2");
    let refused = &value["commands"][1];
    assert_eq!(
        refused["entry"], "commandRefused",
        "the refused start is recorded"
    );
    assert_eq!(refused["command"]["errorCode"], "COMMAND_NOT_ALLOWED");
    let first = &value["commands"][2];
    assert_eq!(first["entry"], "commandEnded");
    assert_eq!(first["command"]["callId"], "c1");
    assert!(
        first["outputSha256"]
            .as_str()
            .is_some_and(|hash| hash.len() == 64)
    );
    let show = run(Some(&db), &["commands", "show", "c1", "--json"]);
    let value: Value = serde_json::from_str(&show.stdout).unwrap();
    let types: Vec<&str> = value["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["commandStarted", "commandEnded", "commandRefused"]);
    let human = run(Some(&db), &["commands", "show", "c1"]);
    assert_eq!(human.code, 0);
    assert!(
        human.stdout.contains("state      exited"),
        "the run, not the refusal: {}",
        human.stdout
    );
    assert!(human.stdout.contains("read-only, no network"), "{}", human.stdout);
    let missing = run(Some(&db), &["commands", "show", "nope"]);
    assert_eq!(missing.code, 1);
    assert!(missing.stderr.contains("COMMAND_NOT_FOUND"), "{}", missing.stderr);
    let unknown_session = run(Some(&db), &["commands", "list", "--session", "nobody"]);
    assert_eq!(unknown_session.code, 1);
    assert!(unknown_session.stderr.contains("SESSION_NOT_FOUND"));
}

#[test]
fn sigkill_of_serve_kills_its_commands_and_the_next_host_interrupts_them() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap().join("w");
    std::fs::create_dir(&workspace).unwrap();
    let db = dir.path().join("plan.db");
    // The command holds the read end of a FIFO in the workspace (reading is
    // allowed in the sandbox) for as long as it lives; a thread here writes
    // into it until the write fails with EPIPE, which happens when the last
    // reader is gone: the command's death, as an event.
    let fifo = workspace.join("alive");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let (mut serve, turn, sandbox) = plan_turn(&db, &workspace);
    let result = bash(&mut serve, &turn, "c1", "exec 3< alive; echo up; exec sleep 300");
    if !sandbox {
        assert_eq!(result["error"]["code"], "PLAN_SANDBOX_UNAVAILABLE");
        return;
    }
    let (gone, reader_gone) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Opening blocks until the command has opened its end.
        let mut pipe = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        let block = vec![0_u8; 64 * 1024];
        while std::io::Write::write_all(&mut pipe, &block).is_ok() {}
        let _ = gone.send(());
    });
    let first = serve.wait_notification("command/output", REPLY_TIMEOUT);
    // The command runs (the FIFO's reader is the proof of its life).
    assert_eq!(first["params"]["chunk"], "up\n");
    serve.kill();
    reader_gone
        .recv_timeout(Duration::from_secs(20))
        .expect("the command outlived its SIGKILLed host");
    let mut next = Serve::start(&db, &[]);
    let get = next.call("command/get", json!({"sessionId": "s1", "callId": "c1"}));
    assert_eq!(get["state"], "interrupted");
    assert_eq!(get["errorCode"], "HOST_RESTARTED");
    assert_eq!(
        next.code("command/cancel", json!({"sessionId": "s1", "callId": "c1"})),
        "COMMAND_NOT_RUNNING"
    );
    assert!(next.close().success());
    let show = run(Some(&db), &["commands", "show", "c1", "--json"]);
    let value: Value = serde_json::from_str(&show.stdout).unwrap();
    let states: Vec<(&str, &str)> = value["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            (
                entry["type"].as_str().unwrap(),
                entry["command"]["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [("commandStarted", "running"), ("commandEnded", "interrupted")],
        "started once, interrupted by the fence, never re-run"
    );
}

#[test]
fn serve_without_a_helper_reports_it_and_refuses_plan_bash() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap().join("w");
    std::fs::create_dir(&workspace).unwrap();
    let db = dir.path().join("plan.db");
    let helper = dir.path().join("missing-helper");
    let mut serve = Serve::spawn(&db, &["--sandbox-helper", helper.to_str().unwrap()]);
    let init = serve.call("initialize", json!({"protocolVersion": 9}));
    assert_eq!(init["capabilities"]["commands"]["planSandbox"], "unavailable");
    assert!(
        init["capabilities"]["commands"]["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("missing-helper")),
        "{init}"
    );
    serve.call(
        "session/create",
        json!({"sessionId": "s1", "workspaceRoot": workspace.to_str().unwrap(), "mode": "plan"}),
    );
    let turn = serve.call(
        "turn/start",
        json!({"sessionId": "s1", "prompt": "p", "origin": "interactive"}),
    )["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    let result = bash(&mut serve, &turn, "c1", "touch made.txt");
    assert_eq!(result["decision"], "deny");
    assert_eq!(result["error"]["code"], "PLAN_SANDBOX_UNAVAILABLE");
    assert_eq!(result["command"], Value::Null);
    assert!(serve.close().success());
    assert!(!workspace.join("made.txt").exists());
}

/// `commands list` uses the approvals table's conventions: into a pipe the
/// command is whole however long; on a terminal the table fits its width
/// (the command is cut with `…`, the call id never) and states are
/// coloured; start times are relative, like the approvals' times.
#[test]
fn commands_list_fits_a_terminal_and_cuts_nothing_into_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap().join("w");
    std::fs::create_dir(&workspace).unwrap();
    let db = dir.path().join("plan.db");
    let (mut serve, turn, sandbox) = plan_turn(&db, &workspace);
    let long = format!("echo {}", "long-argument-".repeat(6));
    let ran = bash(&mut serve, &turn, "call-with-a-long-id", &long);
    if sandbox {
        until_exited(&mut serve, "call-with-a-long-id");
    } else {
        assert_eq!(ran["error"]["code"], "PLAN_SANDBOX_UNAVAILABLE", "{ran}");
    }
    serve.call("turn/complete", json!({"sessionId": "s1", "turnId": turn}));
    assert!(serve.close().success());

    // Real times, so that "relative to now" means now.
    let list = |terminal: Option<usize>, color: &str| {
        let mut command = std::process::Command::new(crate::support::BIN);
        command
            .env_remove("PLAN_CHECKPOINT_NOW_MS")
            .env_remove("NO_COLOR")
            .args(["--color", color, "--db"])
            .arg(&db)
            .args(["commands", "list"]);
        if let Some(columns) = terminal {
            command
                .env("PLAN_CHECKPOINT_ASSUME_TERMINAL", "1")
                .env("COLUMNS", columns.to_string());
        }
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(0));
        String::from_utf8(output.stdout).unwrap()
    };
    let piped = list(None, "auto");
    if !sandbox {
        eprintln!("the kernel sandbox is unavailable here: only the refusal is listed");
        return;
    }
    assert!(piped.contains(&long), "{piped}");
    assert!(!piped.contains('…') && !piped.contains('\u{1b}'), "{piped}");
    let row = piped.lines().nth(1).unwrap();
    assert!(row.starts_with("just now") || row.contains(" ago"), "{row}");
    assert!(!row.contains("+00:00"), "times are relative, not absolute: {row}");

    let narrow = list(Some(60), "never");
    for line in narrow.lines() {
        assert!(
            unicode_width::UnicodeWidthStr::width(line) <= 60,
            "wider than the terminal: {line:?}"
        );
    }
    assert!(narrow.contains("call-with-a-long-id"), "{narrow}");
    assert!(narrow.contains('…'), "{narrow}");

    let coloured = list(Some(200), "auto");
    assert!(coloured.contains("\u{1b}["), "{coloured}");
    assert!(
        coloured.contains(&long),
        "a wide terminal cuts nothing: {coloured}"
    );
}

#[test]
fn a_scratch_root_reached_through_a_symlink_is_refused_by_serve() {
    let dir = tempfile::tempdir().unwrap();
    let canary = dir.path().join("canary");
    std::fs::create_dir(&canary).unwrap();
    std::fs::write(canary.join("keep"), "canary").unwrap();
    let link = dir.path().join("scratch-link");
    std::os::unix::fs::symlink(&canary, &link).unwrap();
    let mut serve = Serve::spawn(
        &dir.path().join("plan.db"),
        &["--scratch-root", link.to_str().unwrap()],
    );
    let init = serve.call("initialize", json!({"protocolVersion": 9}));
    assert_eq!(init["capabilities"]["commands"]["planSandbox"], "unavailable");
    let reason = init["capabilities"]["commands"]["reason"].as_str().unwrap();
    assert!(reason.contains("scratch root"), "{reason}");
    assert_eq!(std::fs::read_to_string(canary.join("keep")).unwrap(), "canary");
}
