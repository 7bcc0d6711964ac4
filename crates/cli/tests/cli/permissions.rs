//! The Agent permission table over `serve` (`tool/confirm` and its codes)
//! and what the inspection commands say about it: `commands show` whether
//! and when a person confirmed a host-run command, `approvals show` how
//! many calls of an execution were confirmed, declined and auto-allowed.

use std::path::PathBuf;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use plan_core::{Mode, Origin, PermissionMode, ToolCall};
use plan_host::{ApprovalId, Clock, Host, HostEvent, HostOptions, ManualClock, NewSession, SessionId};
use serde_json::{Value, json};

use crate::calls::{Verdict, verdict};
use crate::client::{REPLY_TIMEOUT, Serve};
use crate::support::{self, BIN, Fixture, T0, run};

fn initialized(db: &std::path::Path) -> (Serve, bool) {
    let mut serve = Serve::spawn(db, &[]);
    let init = serve.call("initialize", json!({"protocolVersion": 9}));
    (
        serve,
        init["capabilities"]["commands"]["planSandbox"] == "landlock",
    )
}

#[test]
fn tool_confirm_over_serve_allows_declines_and_refuses_with_its_codes() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let db = dir.path().join("plan.db");
    let (mut serve, sandboxed) = initialized(&db);
    serve.call(
        "session/create",
        json!({"sessionId": "s1", "workspaceRoot": workspace, "mode": "agent", "permissionMode": "ask"}),
    );
    let turn = serve.call(
        "turn/start",
        json!({"sessionId": "s1", "prompt": "go", "origin": "interactive"}),
    )["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    let results = serve.call(
        "turn/toolCalls",
        json!({"sessionId": "s1", "turnId": turn, "calls": [
            {"callId": "b1", "name": "Bash", "input": {"command": "echo confirmed > confirmed.txt"}},
            {"callId": "w1", "name": "Write", "input": {"path": "notes.md"}},
            {"callId": "r1", "name": "Read", "input": {"path": "notes.md"}},
        ]}),
    )["results"]
        .clone();
    let decided: Vec<(&str, bool)> = results
        .as_array()
        .unwrap()
        .iter()
        .map(|result| (result["decision"].as_str().unwrap(), result["hostRun"] == true))
        .collect();
    assert_eq!(decided, [("confirm", true), ("confirm", false), ("allow", false)]);
    let start = json!({"sessionId": "s1", "turnId": turn, "callId": "b1", "command": "echo confirmed > confirmed.txt"});
    assert_eq!(serve.code("command/start", start.clone()), "COMMAND_NOT_ALLOWED");
    let declined = serve.call(
        "tool/confirm",
        json!({"sessionId": "s1", "turnId": turn, "callId": "w1", "allow": false}),
    );
    assert_eq!(declined["decision"], "deny");
    assert_eq!(declined["error"]["code"], "TOOL_DECLINED");
    for (params, expected) in [
        (
            json!({"sessionId": "s1", "turnId": turn, "callId": "w1", "allow": true}),
            "TOOL_CONFIRMATION_NOT_PENDING",
        ),
        (
            json!({"sessionId": "s1", "turnId": turn, "callId": "r1", "allow": true}),
            "TOOL_CONFIRMATION_NOT_PENDING",
        ),
        (
            json!({"sessionId": "s1", "turnId": "turn-other", "callId": "b1", "allow": true}),
            "TOOL_CONFIRMATION_NOT_PENDING",
        ),
        (
            json!({"sessionId": "nobody", "turnId": turn, "callId": "b1", "allow": true}),
            "SESSION_NOT_FOUND",
        ),
        (
            json!({"sessionId": "s1", "turnId": turn, "callId": "b1"}),
            "INVALID_PARAMS",
        ),
        (
            json!({"sessionId": "s1", "turnId": turn, "callId": "b1", "allow": "yes"}),
            "INVALID_PARAMS",
        ),
    ] {
        assert_eq!(serve.code("tool/confirm", params.clone()), expected, "{params}");
    }
    let confirmed = serve.call(
        "tool/confirm",
        json!({"sessionId": "s1", "turnId": turn, "callId": "b1", "allow": true}),
    );
    assert_eq!(
        (&confirmed["decision"], &confirmed["hostRun"]),
        (&json!("allow"), &json!(true))
    );
    let mut other_text = start.clone();
    other_text["command"] = json!("echo confirmed > confirmed.txt; touch pwned");
    assert_eq!(serve.code("command/start", other_text), "COMMAND_NOT_ALLOWED");
    if sandboxed {
        let run = serve.call("command/start", start);
        assert_eq!(run["sandbox"], "workspace-write");
        let exited = serve.wait_notification("command/exited", REPLY_TIMEOUT);
        assert_eq!(exited["params"]["command"]["exitCode"], 0);
        assert!(workspace.join("confirmed.txt").exists());
    } else {
        eprintln!("the kernel sandbox is unavailable here; asserting SANDBOX_UNAVAILABLE");
        assert_eq!(serve.code("command/start", start), "SANDBOX_UNAVAILABLE");
    }
    assert!(!workspace.join("pwned").exists());
    serve.call("turn/complete", json!({"sessionId": "s1", "turnId": turn}));
    assert_eq!(
        serve.code(
            "tool/confirm",
            json!({"sessionId": "s1", "turnId": turn, "callId": "b1", "allow": true})
        ),
        "TOOL_CONFIRMATION_NOT_PENDING",
        "the turn ended"
    );
    // Unattended: nobody can confirm, so the call is denied before anything runs.
    let scheduled = serve.call(
        "turn/start",
        json!({"sessionId": "s1", "prompt": "nightly", "origin": "scheduled"}),
    )["turnId"]
        .clone();
    let results = serve.call(
        "turn/toolCalls",
        json!({"sessionId": "s1", "turnId": scheduled, "calls": [
            {"callId": "n1", "name": "Bash", "input": {"command": "touch unattended"}},
        ]}),
    );
    assert_eq!(results["results"][0]["decision"], "deny");
    assert_eq!(
        results["results"][0]["error"]["code"],
        "PERMISSION_REQUIRES_INTERACTIVE_SESSION"
    );
    assert_eq!(results["results"][0]["hostRun"], false);
    // A background run (print or JSON mode) is as unattended.
    serve.call("turn/complete", json!({"sessionId": "s1", "turnId": scheduled}));
    let background = serve.call(
        "turn/start",
        json!({"sessionId": "s1", "prompt": "pi -p", "origin": "background"}),
    )["turnId"]
        .clone();
    let results = serve.call(
        "turn/toolCalls",
        json!({"sessionId": "s1", "turnId": background, "calls": [
            {"callId": "g1", "name": "Write", "input": {"path": "unattended"}},
        ]}),
    );
    assert_eq!(
        results["results"][0]["error"]["code"],
        "PERMISSION_REQUIRES_INTERACTIVE_SESSION"
    );
    assert!(serve.close().success());
    assert!(!workspace.join("unattended").exists());
}

/// P14 through the wire: a call a person confirmed under `ask` runs only
/// with the input they saw. The call id sent again with another path,
/// content, `cwd` or timeout is refused with `INVALID_PARAMS`, the same
/// input keeps its decision, and `command/start` runs exactly the
/// confirmed command, `cwd` and timeout or nothing.
#[test]
fn an_ask_confirmation_is_not_reused_for_another_input_over_serve() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(workspace.join("sub")).unwrap();
    let db = dir.path().join("plan.db");
    let (mut serve, sandboxed) = initialized(&db);
    serve.call(
        "session/create",
        json!({"sessionId": "s1", "workspaceRoot": workspace, "mode": "agent", "permissionMode": "ask"}),
    );
    let turn = serve.call(
        "turn/start",
        json!({"sessionId": "s1", "prompt": "go", "origin": "interactive"}),
    )["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    let bash_seen = json!({"command": "echo seen > seen.txt", "cwd": "sub", "timeoutMs": 5_000});
    let write_seen = json!({"path": "notes.md", "content": "seen"});
    let batch = |calls: Value| json!({"sessionId": "s1", "turnId": turn, "calls": calls});
    let decided = |serve: &mut Serve, calls: Value| -> Vec<(String, bool, Value)> {
        serve.call("turn/toolCalls", batch(calls))["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|result| {
                (
                    result["decision"].as_str().unwrap().to_owned(),
                    result["hostRun"] == true,
                    result["error"]["code"].clone(),
                )
            })
            .collect()
    };
    let asked = decided(
        &mut serve,
        json!([
            {"callId": "b1", "name": "Bash", "input": bash_seen},
            {"callId": "w1", "name": "Write", "input": write_seen},
        ]),
    );
    assert_eq!(
        asked,
        [
            ("confirm".to_owned(), true, Value::Null),
            ("confirm".to_owned(), false, Value::Null)
        ]
    );
    for call_id in ["b1", "w1"] {
        let confirmed = serve.call(
            "tool/confirm",
            json!({"sessionId": "s1", "turnId": turn, "callId": call_id, "allow": true}),
        );
        assert_eq!(confirmed["decision"], "allow");
    }
    let refused = ("deny".to_owned(), false, json!("INVALID_PARAMS"));
    for (call_id, name, other) in [
        ("w1", "Write", json!({"path": "../outside.md", "content": "seen"})),
        (
            "w1",
            "Write",
            json!({"path": "notes.md", "content": "not what was shown"}),
        ),
        (
            "b1",
            "Bash",
            json!({"command": "echo seen > seen.txt; touch pwned", "cwd": "sub", "timeoutMs": 5_000}),
        ),
        (
            "b1",
            "Bash",
            json!({"command": "echo seen > seen.txt", "timeoutMs": 5_000}),
        ),
        (
            "b1",
            "Bash",
            json!({"command": "echo seen > seen.txt", "cwd": "sub", "timeoutMs": 600_000}),
        ),
    ] {
        assert_eq!(
            decided(
                &mut serve,
                json!([{"callId": call_id, "name": name, "input": other}])
            ),
            std::slice::from_ref(&refused),
            "{call_id} {other}"
        );
    }
    // The input the person saw keeps its decision.
    assert_eq!(
        decided(
            &mut serve,
            json!([
                {"callId": "b1", "name": "Bash", "input": bash_seen},
                {"callId": "w1", "name": "Write", "input": write_seen},
            ])
        ),
        [
            ("allow".to_owned(), true, Value::Null),
            ("allow".to_owned(), false, Value::Null)
        ]
    );
    let start = json!({"sessionId": "s1", "turnId": turn, "callId": "b1",
        "command": "echo seen > seen.txt", "cwd": "sub", "timeoutMs": 5_000});
    for (field, other) in [
        ("command", json!("echo seen > seen.txt; touch pwned")),
        ("cwd", json!(".")),
        ("cwd", Value::Null),
        ("timeoutMs", json!(600_000)),
        ("timeoutMs", Value::Null),
    ] {
        let mut params = start.clone();
        params[field] = other.clone();
        assert_eq!(
            serve.code("command/start", params),
            "COMMAND_NOT_ALLOWED",
            "{field} {other}"
        );
    }
    if sandboxed {
        let run = serve.call("command/start", start);
        assert_eq!(run["cwd"], "sub");
        let exited = serve.wait_notification("command/exited", REPLY_TIMEOUT);
        assert_eq!(exited["params"]["command"]["exitCode"], 0);
        assert!(workspace.join("sub/seen.txt").exists());
    } else {
        eprintln!("the kernel sandbox is unavailable here; asserting SANDBOX_UNAVAILABLE");
        assert_eq!(serve.code("command/start", start), "SANDBOX_UNAVAILABLE");
    }
    assert!(!workspace.join("pwned").exists() && !workspace.join("sub/pwned").exists());
    assert!(!workspace.join("seen.txt").exists());
    serve.call("turn/complete", json!({"sessionId": "s1", "turnId": turn}));
    assert!(serve.close().success());
}

/// A database where an approved plan's execution (under `accept-edits`)
/// had an edit auto-allowed, a Bash call confirmed and run, and a plugin
/// call declined, on a manual clock.
fn executed() -> (Fixture, bool) {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("ws");
    std::fs::create_dir(&root).unwrap();
    let db = base.join("plan.db");
    let clock = Arc::new(ManualClock::new(T0));
    let host = Host::open(
        &db,
        HostOptions {
            clock: Arc::clone(&clock) as Arc<dyn Clock>,
            sandbox_helper: Some(PathBuf::from(BIN)),
            ..HostOptions::default()
        },
    )
    .unwrap();
    let sandboxed = host.command_capabilities().plan_sandbox == plan_host::PlanSandbox::Landlock;
    let (exits, exited) = mpsc::channel();
    host.add_listener(Arc::new(move |event: HostEvent| {
        if let HostEvent::CommandExited(run) = event {
            let _ = exits.send(run);
        }
    }));
    let session = SessionId::from("s1");
    host.create_session(NewSession {
        session_id: Some(session.clone()),
        workspace_root: Some(root.to_string_lossy().into_owned()),
        mode: Some(Mode::Plan),
        permission_mode: None,
    })
    .unwrap();
    let turn = host.start_turn(&session, Origin::Interactive).unwrap();
    let submit = ToolCall {
        call_id: "call-submit".into(),
        name: "SubmitPlan".to_owned(),
        input: json!({"title": "Build it", "markdown": support::PLAN_B, "question": "Go ahead?"}),
    };
    let approval = host.tool_calls(&session, &turn.turn_id, vec![submit]).unwrap()[0]
        .approval
        .clone()
        .unwrap();
    clock.advance(60_000);
    let (approved, state) = host
        .approve(
            &ApprovalId::from(approval.id.as_str()),
            PermissionMode::AcceptEdits,
        )
        .unwrap();
    let execution = approved.execution_id.unwrap();
    let turn = state.active_turn.unwrap().turn_id;
    host.start_execution(&execution).unwrap();
    clock.advance(1_000);
    let call = |call_id: &str, name: &str, input: Value| ToolCall {
        call_id: call_id.into(),
        name: name.to_owned(),
        input,
    };
    let outcomes = host
        .tool_calls(
            &session,
            &turn,
            vec![
                call("e1", "Edit", json!({"path": "src/lib.rs"})),
                call("b1", "Bash", json!({"command": "echo built"})),
                call("m1", "mcp__deploy", json!({})),
            ],
        )
        .unwrap();
    let decided: Vec<Verdict> = outcomes.iter().map(verdict).collect();
    assert_eq!(decided, [Verdict::Allow, Verdict::Confirm, Verdict::Confirm]);
    clock.advance(4_000);
    host.confirm_tool(&session, &turn, &"b1".into(), true).unwrap();
    clock.advance(2_000);
    host.confirm_tool(&session, &turn, &"m1".into(), false).unwrap();
    if sandboxed {
        host.start_agent_command(&session, &turn, &"b1".into(), "echo built", None, None)
            .unwrap();
        let run = exited.recv_timeout(Duration::from_secs(60)).unwrap();
        assert_eq!(run.exit_code, Some(0));
    }
    clock.advance(10_000);
    host.complete_execution(&execution).unwrap();
    host.close();
    drop(host);
    let mut names = vec![(base.to_string_lossy().into_owned(), "[TMP]".to_owned())];
    names.push((approval.id.to_string(), "approval-executed".to_owned()));
    let approvals = vec![(approval.id.to_string(), "approval-executed".to_owned())];
    (
        Fixture {
            _dir: dir,
            db,
            root: root.to_string_lossy().into_owned(),
            names,
            approvals,
        },
        sandboxed,
    )
}

#[test]
fn commands_show_and_approvals_show_say_what_a_person_confirmed() {
    let (fixture, sandboxed) = executed();
    let approvals = run(
        Some(&fixture.db),
        &["approvals", "show", &fixture.id("approval-executed")],
    );
    assert_eq!(approvals.code, 0, "{}", approvals.stderr);
    assert!(
        approvals
            .stdout
            .contains("tool calls:      1 confirmed, 1 declined, 1 auto-allowed"),
        "{}",
        approvals.stdout
    );
    Fixture::settings().bind(|| {
        insta::assert_snapshot!(
            "permissions_approvals_show",
            fixture.redact(&approvals.transcript())
        );
    });
    if !sandboxed {
        eprintln!("the kernel sandbox is unavailable here; the command did not run, so it has no card");
        return;
    }
    let show = run(Some(&fixture.db), &["commands", "show", "b1"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    let mut settings = Fixture::settings();
    // The shell's path is the machine's.
    settings.add_filter(r"(?m)^shell +.*$", "shell      [shell]");
    settings.bind(|| {
        insta::assert_snapshot!("permissions_commands_show", fixture.redact(&show.transcript()));
    });
    let json = run(Some(&fixture.db), &["commands", "show", "b1", "--json"]);
    let value: Value = serde_json::from_str(&json.stdout).unwrap();
    let kinds: Vec<&str> = value["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["toolConfirmRequested", "toolConfirmed"]);
    assert_eq!(value["decisions"][1]["at"], T0 + 65_000);
}
