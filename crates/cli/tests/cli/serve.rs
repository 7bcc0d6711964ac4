//! Black-box tests of `plan-checkpoint serve` through the shared client. No
//! test asserts on speed; timer tests wait with a bounded poll.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::client::{REPLY_TIMEOUT, Serve, error_of, is_notification, notification_methods};

const MARKDOWN: &str =
    "# Plan ✓\r\n\r\n1. Read the parser — ünïcödé 计划\r\n2. Split it\n\tno trailing newline";

// --- fixtures ------------------------------------------------------------

/// A temporary directory with a database path and a workspace.
struct Place {
    _dir: tempfile::TempDir,
    db: PathBuf,
    workspace: PathBuf,
}

impl Place {
    fn new() -> Place {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let workspace = base.join("workspace");
        std::fs::create_dir(&workspace).unwrap();
        Place {
            db: base.join("plan.db"),
            workspace,
            _dir: dir,
        }
    }

    fn root(&self) -> &str {
        self.workspace.to_str().unwrap()
    }

    fn plan_files(&self) -> Vec<PathBuf> {
        match std::fs::read_dir(self.workspace.join(".pi/plan")) {
            Ok(entries) => entries.map(|entry| entry.unwrap().path()).collect(),
            Err(_) => Vec::new(),
        }
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn now_ms() -> i64 {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap()
}

fn submit_call(call_id: &str, markdown: &str) -> Value {
    json!({"callId": call_id, "name": "SubmitPlan", "input": {"title": "Split the parser", "markdown": markdown, "question": "Go ahead?"}})
}

fn create_session(serve: &mut Serve, id: &str, root: Option<&str>, mode: &str) -> Value {
    let session = serve.call(
        "session/create",
        json!({"sessionId": id, "workspaceRoot": root, "mode": mode}),
    );
    assert_eq!(session["sessionId"], id);
    assert_eq!(session["mode"], mode);
    assert_eq!(session["activeTurn"], Value::Null);
    session
}

fn start_turn(serve: &mut Serve, session: &str) -> String {
    let turn = serve.call(
        "turn/start",
        json!({"sessionId": session, "prompt": "do it", "origin": "interactive"}),
    );
    turn["turnId"].as_str().unwrap().to_owned()
}

fn tool_calls(serve: &mut Serve, session: &str, turn: &str, calls: Value) -> Vec<Value> {
    let result = serve.call(
        "turn/toolCalls",
        json!({"sessionId": session, "turnId": turn, "calls": calls}),
    );
    result["results"].as_array().unwrap().clone()
}

/// A Plan session with a pending approval: returns (approval, turn id).
fn pending(serve: &mut Serve, root: &str, session: &str, markdown: &str) -> (Value, String) {
    create_session(serve, session, Some(root), "plan");
    let turn = start_turn(serve, session);
    let results = tool_calls(serve, session, &turn, json!([submit_call("c1", markdown)]));
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["decision"], "allow");
    assert_eq!(results[0]["error"], Value::Null);
    let approval = results[0]["approval"].clone();
    assert_eq!(approval["status"], "pending");
    (approval, turn)
}

/// Approves with `mode`; returns (approval after, execution id).
fn approve(serve: &mut Serve, approval_id: &str, mode: &str) -> (Value, String) {
    let decided = serve.call(
        "plan/approve",
        json!({"approvalId": approval_id, "permissionMode": mode}),
    );
    let approval = decided["approval"].clone();
    assert_eq!(approval["status"], "approved");
    assert_eq!(approval["executionState"], "queued");
    assert_eq!(approval["permissionMode"], mode);
    let execution = approval["executionId"].as_str().unwrap().to_owned();
    assert_eq!(decided["session"]["mode"], "agent");
    assert_eq!(decided["session"]["permissionMode"], mode);
    assert_eq!(decided["session"]["activeExecutionId"], execution.as_str());
    assert_eq!(decided["session"]["activeTurn"]["kind"], "execution");
    assert_eq!(decided["session"]["activeTurn"]["mode"], "agent");
    (approval, execution)
}

fn assert_artifact(workspace: &Path, approval: &Value, markdown: &str) {
    let artifact = &approval["artifact"];
    let path = artifact["path"].as_str().unwrap();
    assert!(path.starts_with(".pi/plan/") && path.ends_with(".md"), "{path}");
    let bytes = std::fs::read(workspace.join(path)).unwrap();
    assert_eq!(
        bytes,
        markdown.as_bytes(),
        "artifact bytes are the markdown exactly"
    );
    assert_eq!(artifact["sha256"], sha256_hex(markdown.as_bytes()));
    assert_eq!(artifact["size"], markdown.len());
}

// --- the behaviour list ---------------------------------------------------

#[test]
fn full_lifecycle_over_stdio() {
    let place = Place::new();
    let mut serve = Serve::spawn(&place.db, &[]);
    // Nothing is served before initialize.
    assert_eq!(
        serve.error("session/create", json!({"workspaceRoot": null})),
        (-32000, "PROTOCOL_NOT_INITIALIZED".to_owned())
    );
    assert_eq!(
        serve.code("initialize", json!({"protocolVersion": 8})),
        "PROTOCOL_VERSION_UNSUPPORTED"
    );
    let init = serve.call("initialize", json!({"protocolVersion": 9}));
    assert_eq!(init["approvalTtlMs"], 30 * 60 * 1000);
    assert_eq!(init["schemaVersion"], 10);

    create_session(&mut serve, "s1", Some(place.root()), "plan");
    let turn = start_turn(&mut serve, "s1");
    let session = serve.call("session/get", json!({"sessionId": "s1"}));
    assert_eq!(
        session["activeTurn"],
        json!({"turnId": turn, "mode": "plan", "origin": "interactive", "kind": "prompt"})
    );

    // Tool policy (Plan-mode Bash is run by the host; the command tests
    // cover it).
    let allowed = [
        "Read",
        "Glob",
        "Grep",
        "BrowserPreview",
        "EnterPlanMode",
        "new_context",
    ];
    let denied = ["Write", "Edit", "mcp__github__create_issue", "read", "Teleport"];
    let calls: Vec<Value> = allowed
        .iter()
        .chain(denied.iter())
        .map(|name| json!({"callId": name, "name": name, "input": {"path": "x"}}))
        .collect();
    let results = tool_calls(&mut serve, "s1", &turn, Value::Array(calls));
    assert_eq!(results.len(), allowed.len() + denied.len());
    for result in &results {
        let name = result["callId"].as_str().unwrap();
        if allowed.contains(&name) {
            assert_eq!(
                (result["decision"].as_str(), &result["error"]),
                (Some("allow"), &Value::Null),
                "{name}"
            );
        } else {
            assert_eq!(result["decision"], "deny", "{name}");
            assert_eq!(result["error"]["code"], "TOOL_DENIED_IN_PLAN", "{name}");
            assert!(result["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
        }
        assert_eq!(result["approval"], Value::Null);
    }
    // SubmitPlan with anything else: the request fails whole.
    let batch = json!([{"callId": "r", "name": "Read", "input": {}}, submit_call("c0", MARKDOWN)]);
    assert_eq!(
        serve.error(
            "turn/toolCalls",
            json!({"sessionId": "s1", "turnId": turn, "calls": batch})
        ),
        (-32000, "SUBMIT_PLAN_NOT_ALONE".to_owned())
    );
    // Invalid input is denied in its result entry; the turn stays active.
    for input in [
        json!({"title": "t", "markdown": "m"}),
        json!({"title": "t", "markdown": "m", "question": "q", "steps": []}),
        json!({"title": "", "markdown": "m", "question": "q"}),
        json!({"title": "t", "markdown": "m", "question": 3}),
    ] {
        let results = tool_calls(
            &mut serve,
            "s1",
            &turn,
            json!([{"callId": "bad", "name": "SubmitPlan", "input": input}]),
        );
        assert_eq!(results[0]["decision"], "deny");
        assert_eq!(results[0]["error"]["code"], "INVALID_PLAN_INPUT", "{input}");
    }
    assert!(place.plan_files().is_empty());
    assert!(
        serve
            .take_notifications()
            .iter()
            .all(|n| n["method"] == "session/changed")
    );

    // The submission.
    let results = tool_calls(&mut serve, "s1", &turn, json!([submit_call("c1", MARKDOWN)]));
    let approval = results[0]["approval"].clone();
    assert_eq!(results[0]["decision"], "allow");
    assert_eq!(approval["status"], "pending");
    assert_eq!(approval["sessionId"], "s1");
    assert_eq!(approval["turnId"], turn.as_str());
    assert_eq!(approval["title"], "Split the parser");
    assert_eq!(approval["question"], "Go ahead?");
    assert_eq!(approval["errorCode"], Value::Null);
    assert_eq!(approval["decidedAt"], Value::Null);
    assert_eq!(approval["permissionMode"], Value::Null);
    assert_eq!(approval["executionId"], Value::Null);
    assert_eq!(approval["executionState"], Value::Null);
    assert_eq!(
        approval["expiresAt"].as_i64().unwrap() - approval["createdAt"].as_i64().unwrap(),
        30 * 60 * 1000
    );
    assert_artifact(&place.workspace, &approval, MARKDOWN);
    assert_eq!(place.plan_files().len(), 1);
    let requested = serve.wait_notification("plan/approvalRequested", REPLY_TIMEOUT);
    assert_eq!(requested["params"]["approval"], approval);
    let id = approval["id"].as_str().unwrap().to_owned();
    assert_eq!(serve.call("plan/get", json!({"approvalId": id})), approval);
    assert_eq!(serve.call("plan/list", json!({}))["approvals"], json!([approval]));
    assert_eq!(
        serve.call("plan/list", json!({"status": "approved"}))["approvals"],
        json!([])
    );
    assert_eq!(
        serve.call("plan/list", json!({"sessionId": "other"}))["approvals"],
        json!([])
    );
    let read = serve.call("plan/readArtifact", json!({"approvalId": id}));
    assert_eq!(
        read,
        json!({"markdown": MARKDOWN, "sha256": sha256_hex(MARKDOWN.as_bytes()), "size": MARKDOWN.len()})
    );
    let session = serve.call("session/get", json!({"sessionId": "s1"}));
    assert_eq!(session["pendingApprovalId"], id.as_str());

    // Approve needs a permission mode.
    assert_eq!(
        serve.code("plan/approve", json!({"approvalId": id})),
        "PERMISSION_MODE_REQUIRED"
    );
    assert_eq!(
        serve.call("plan/get", json!({"approvalId": id}))["status"],
        "pending"
    );
    serve.take_notifications();
    let (approved, execution) = approve(&mut serve, &id, "ask");
    assert_eq!(approved["errorCode"], Value::Null);
    assert!(approved["decidedAt"].is_i64());
    assert_eq!(
        notification_methods(&serve.take_notifications_after("session/changed")),
        [
            "plan/approvalResolved",
            "execution/stateChanged",
            "session/changed"
        ]
    );

    // Execution: complete before start is refused; start, complete.
    assert_eq!(
        serve.code("execution/complete", json!({"executionId": execution})),
        "EXECUTION_NOT_ACTIVE"
    );
    let running = serve.call("execution/start", json!({"executionId": execution}));
    assert_eq!(running["executionState"], "running");
    assert_eq!(
        serve.code("execution/start", json!({"executionId": execution})),
        "EXECUTION_NOT_ACTIVE"
    );
    let changed = serve.wait_notification("execution/stateChanged", REPLY_TIMEOUT);
    assert_eq!(
        changed["params"],
        json!({"sessionId": "s1", "executionId": execution, "state": "running"})
    );
    let completed = serve.call("execution/complete", json!({"executionId": execution}));
    assert_eq!(completed["executionState"], "completed");
    assert_eq!(completed["status"], "approved");
    let changed = serve.wait_notification("execution/stateChanged", REPLY_TIMEOUT);
    assert_eq!(changed["params"]["state"], "completed");
    assert_eq!(
        serve.code("execution/complete", json!({"executionId": execution})),
        "EXECUTION_NOT_ACTIVE"
    );
    assert_eq!(
        serve.code("execution/start", json!({"executionId": "nope"})),
        "EXECUTION_NOT_FOUND"
    );
    let session = serve.call("session/get", json!({"sessionId": "s1"}));
    assert_eq!(session["mode"], "agent");
    assert_eq!(session["activeTurn"], Value::Null);
    assert_eq!(session["pendingApprovalId"], Value::Null);
    assert_eq!(session["activeExecutionId"], Value::Null);

    // SubmitPlan in an Agent turn is PLAN_NOT_ACTIVE; tools there follow
    // the permission table: under `ask` a write awaits a person.
    let agent_turn = start_turn(&mut serve, "s1");
    let results = tool_calls(
        &mut serve,
        "s1",
        &agent_turn,
        json!([{"callId": "w", "name": "Write", "input": {}}]),
    );
    assert_eq!(results[0]["decision"], "confirm");
    let results = tool_calls(
        &mut serve,
        "s1",
        &agent_turn,
        json!([submit_call("c2", MARKDOWN)]),
    );
    assert_eq!(results[0]["decision"], "deny");
    assert_eq!(results[0]["error"]["code"], "PLAN_NOT_ACTIVE");
    serve.call("turn/complete", json!({"sessionId": "s1", "turnId": agent_turn}));

    // A session without a workspace cannot submit.
    create_session(&mut serve, "unbound", None, "plan");
    let unbound_turn = start_turn(&mut serve, "unbound");
    let results = tool_calls(
        &mut serve,
        "unbound",
        &unbound_turn,
        json!([submit_call("c3", MARKDOWN)]),
    );
    assert_eq!(results[0]["error"]["code"], "SESSION_NOT_PROJECT_BOUND");
    assert_eq!(
        serve.call("plan/list", json!({}))["approvals"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(place.plan_files().len(), 1);

    assert!(serve.close().success());
}

impl Serve {
    /// Collects notifications until (and including) the first with `last`.
    fn take_notifications_after(&mut self, last: &str) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let next = match self.notifications.pop_front() {
                Some(next) => next,
                None => self.wait_notification_any(),
            };
            let done = next["method"] == last;
            seen.push(next);
            if done {
                return seen;
            }
        }
    }

    fn wait_notification_any(&mut self) -> Value {
        let message = self
            .next_message(REPLY_TIMEOUT)
            .unwrap_or_else(|| panic!("serve exited; stderr: {}", self.stderr()));
        assert!(is_notification(&message), "unexpected response {message}");
        message
    }
}

#[test]
fn approve_with_each_permission_mode_and_reject() {
    let place = Place::new();
    let mut serve = Serve::start(&place.db, &[]);
    for mode in ["ask", "accept-edits", "auto"] {
        let session = format!("s-{mode}");
        let (approval, _) = pending(&mut serve, place.root(), &session, MARKDOWN);
        let id = approval["id"].as_str().unwrap();
        let (approved, _) = approve(&mut serve, id, mode);
        assert_eq!(serve.call("plan/get", json!({"approvalId": id})), approved);
        let state = serve.call("session/get", json!({"sessionId": session}));
        assert_eq!(
            (state["mode"].as_str(), state["permissionMode"].as_str()),
            (Some("agent"), Some(mode))
        );
        assert_eq!(
            serve.code("plan/approve", json!({"approvalId": id, "permissionMode": mode})),
            "APPROVAL_NOT_PENDING"
        );
    }
    assert_eq!(
        serve.code(
            "plan/approve",
            json!({"approvalId": "x", "permissionMode": "ask"})
        ),
        "APPROVAL_NOT_FOUND"
    );

    // Reject: feedback or a permission mode makes the request invalid and rejects nothing.
    let (approval, _) = pending(&mut serve, place.root(), "r1", MARKDOWN);
    let id = approval["id"].as_str().unwrap();
    for extra in [
        json!({"feedback": "shorter please"}),
        json!({"permissionMode": "auto"}),
    ] {
        let mut params = json!({"approvalId": id});
        params
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        assert_eq!(
            serve.error("plan/reject", params),
            (-32602, "INVALID_PARAMS".to_owned())
        );
        assert_eq!(
            serve.call("plan/get", json!({"approvalId": id}))["status"],
            "pending"
        );
    }
    serve.take_notifications();
    let decided = serve.call("plan/reject", json!({"approvalId": id}));
    assert_eq!(decided["approval"]["status"], "rejected");
    assert_eq!(decided["approval"]["permissionMode"], Value::Null);
    assert_eq!(decided["approval"]["executionId"], Value::Null);
    assert_eq!(decided["approval"]["executionState"], Value::Null);
    assert_eq!(decided["session"]["mode"], "plan");
    assert_eq!(decided["session"]["permissionMode"], "ask");
    assert_eq!(decided["session"]["activeTurn"], Value::Null);
    assert_eq!(decided["session"]["pendingApprovalId"], Value::Null);
    let resolved = serve.wait_notification("plan/approvalResolved", REPLY_TIMEOUT);
    assert_eq!(resolved["params"]["approval"], decided["approval"]);
    assert_eq!(
        serve.code("plan/reject", json!({"approvalId": id})),
        "APPROVAL_NOT_PENDING"
    );
    assert_eq!(
        serve.code("plan/approve", json!({"approvalId": id, "permissionMode": "ask"})),
        "APPROVAL_NOT_PENDING"
    );
    // The session is free: a revision is a new turn and a new artifact.
    let turn = start_turn(&mut serve, "r1");
    let results = tool_calls(&mut serve, "r1", &turn, json!([submit_call("c2", "# v2\n")]));
    assert_ne!(results[0]["approval"]["id"], id);
    assert_ne!(
        results[0]["approval"]["artifact"]["path"],
        approval["artifact"]["path"]
    );
    assert_artifact(&place.workspace, &approval, MARKDOWN);
    assert!(serve.close().success());
}

#[test]
fn the_timer_expires_approvals_and_approving_late_is_a_timeout() {
    let place = Place::new();
    let mut serve = Serve::start(&place.db, &["--approval-ttl-ms", "300"]);
    let (approval, _) = pending(&mut serve, place.root(), "s1", MARKDOWN);
    let id = approval["id"].as_str().unwrap().to_owned();
    serve.take_notifications();
    // No request from here on: the timer alone must resolve it.
    let resolved = serve.wait_notification("plan/approvalResolved", Duration::from_secs(30));
    let expired = &resolved["params"]["approval"];
    assert_eq!(expired["id"], id.as_str());
    assert_eq!(expired["status"], "expired");
    assert_eq!(expired["errorCode"], "PLAN_APPROVAL_TIMEOUT");
    assert_eq!(expired["expiresAt"], approval["expiresAt"]);
    assert_eq!(expired["decidedAt"], approval["expiresAt"]);
    assert!(now_ms() >= approval["expiresAt"].as_i64().unwrap());
    let changed = serve.wait_notification("session/changed", REPLY_TIMEOUT);
    assert_eq!(changed["params"]["session"]["activeTurn"], Value::Null);
    assert_eq!(changed["params"]["session"]["mode"], "plan");
    assert_eq!(
        serve.code("plan/approve", json!({"approvalId": id, "permissionMode": "ask"})),
        "PLAN_APPROVAL_TIMEOUT"
    );
    assert_eq!(
        serve.call("plan/get", json!({"approvalId": id}))["status"],
        "expired"
    );

    // Approve after the deadline: once the timer has said it expired, which
    // it does only past expiresAt (the first half checks that).
    let (late, _) = pending(&mut serve, place.root(), "s2", MARKDOWN);
    let late_id = late["id"].as_str().unwrap().to_owned();
    serve.take_notifications();
    let resolved = serve.wait_notification("plan/approvalResolved", Duration::from_secs(30));
    assert_eq!(resolved["params"]["approval"]["id"], late_id.as_str());
    assert_eq!(
        serve.error(
            "plan/approve",
            json!({"approvalId": late_id, "permissionMode": "auto"})
        ),
        (-32000, "PLAN_APPROVAL_TIMEOUT".to_owned())
    );
    let row = serve.call("plan/get", json!({"approvalId": late_id}));
    assert_eq!(
        (row["status"].as_str(), row["errorCode"].as_str()),
        (Some("expired"), Some("PLAN_APPROVAL_TIMEOUT"))
    );
    assert_eq!(row["permissionMode"], Value::Null);
    let session = serve.call("session/get", json!({"sessionId": "s2"}));
    assert_eq!(
        (session["mode"].as_str(), &session["activeTurn"]),
        (Some("plan"), &Value::Null)
    );
    assert!(serve.close().success());
}

#[test]
fn scheduled_plan_is_refused_and_creates_nothing() {
    let place = Place::new();
    let mut serve = Serve::start(&place.db, &[]);
    create_session(&mut serve, "s1", Some(place.root()), "plan");
    assert_eq!(
        serve.error(
            "turn/start",
            json!({"sessionId": "s1", "prompt": "nightly", "origin": "scheduled"})
        ),
        (-32000, "PLAN_REQUIRES_INTERACTIVE_SESSION".to_owned())
    );
    assert!(!place.workspace.join(".pi").exists());
    assert!(place.plan_files().is_empty());
    assert_eq!(serve.call("plan/list", json!({}))["approvals"], json!([]));
    let session = serve.call("session/get", json!({"sessionId": "s1"}));
    assert_eq!(session["activeTurn"], Value::Null);
    assert!(serve.take_notifications().is_empty());
    // Explicitly changed to Agent, it runs unattended.
    serve.call("session/configure", json!({"sessionId": "s1", "mode": "agent"}));
    let turn = serve.call(
        "turn/start",
        json!({"sessionId": "s1", "prompt": "nightly", "origin": "scheduled"}),
    );
    assert_eq!(turn["mode"], "agent");
    assert!(serve.close().success());
}

#[test]
fn session_busy_for_every_guarded_action() {
    let place = Place::new();
    let mut serve = Serve::start(&place.db, &[]);
    let busy = "SESSION_BUSY".to_owned();
    let configures = [
        json!({"mode": "agent"}),
        json!({"permissionMode": "auto"}),
        json!({"provider": "p"}),
        json!({"model": "m"}),
        json!({"shell": "sh"}),
    ];
    let check_configure = |serve: &mut Serve, session: &str| {
        for change in &configures {
            let mut params = json!({"sessionId": session});
            params
                .as_object_mut()
                .unwrap()
                .extend(change.as_object().unwrap().clone());
            assert_eq!(
                serve.error("session/configure", params),
                (-32000, busy.clone()),
                "{session} {change}"
            );
        }
    };
    let start = |session: &str, origin: &str| json!({"sessionId": session, "prompt": "p", "origin": origin});

    // An active prompt turn.
    create_session(&mut serve, "turn", Some(place.root()), "plan");
    let turn = start_turn(&mut serve, "turn");
    assert_eq!(serve.code("turn/start", start("turn", "interactive")), busy);
    check_configure(&mut serve, "turn");
    serve.call("turn/complete", json!({"sessionId": "turn", "turnId": turn}));

    // A pending approval.
    let (approval, plan_turn) = pending(&mut serve, place.root(), "pending", MARKDOWN);
    assert_eq!(serve.code("turn/start", start("pending", "interactive")), busy);
    check_configure(&mut serve, "pending");
    let again =
        json!({"sessionId": "pending", "turnId": plan_turn, "calls": [submit_call("again", MARKDOWN)]});
    assert_eq!(serve.code("turn/toolCalls", again), busy);
    let read = json!({"sessionId": "pending", "turnId": plan_turn, "calls": [{"callId": "r", "name": "Read", "input": {}}]});
    assert_eq!(serve.code("turn/toolCalls", read), busy);
    assert_eq!(
        serve.code(
            "turn/complete",
            json!({"sessionId": "pending", "turnId": plan_turn})
        ),
        busy
    );
    assert_eq!(serve.code("turn/cancel", json!({"sessionId": "pending"})), busy);
    assert_eq!(
        serve.call("plan/get", json!({"approvalId": approval["id"]})),
        approval
    );
    assert_eq!(place.plan_files().len(), 1);

    // A queued, then a running execution.
    let (queued, _) = pending(&mut serve, place.root(), "exec", MARKDOWN);
    let (_, execution) = approve(&mut serve, queued["id"].as_str().unwrap(), "auto");
    for state in ["queued", "running"] {
        if state == "running" {
            serve.call("execution/start", json!({"executionId": execution}));
        }
        let before = serve.call("session/get", json!({"sessionId": "exec"}));
        let exec_turn = before["activeTurn"]["turnId"].as_str().unwrap().to_owned();
        assert_eq!(
            serve.code("turn/start", start("exec", "interactive")),
            busy,
            "{state}"
        );
        assert_eq!(
            serve.code("turn/start", start("exec", "scheduled")),
            busy,
            "{state}"
        );
        check_configure(&mut serve, "exec");
        assert_eq!(
            serve.code("turn/complete", json!({"sessionId": "exec", "turnId": exec_turn})),
            busy
        );
        assert_eq!(serve.call("session/get", json!({"sessionId": "exec"})), before);
        assert_eq!(
            serve.call("plan/get", json!({"approvalId": queued["id"]}))["executionState"],
            state
        );
    }
    assert_eq!(
        serve.call("plan/list", json!({}))["approvals"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert!(serve.close().success());
}

#[test]
fn read_artifact_detects_missing_and_tampered_files() {
    let place = Place::new();
    let mut serve = Serve::start(&place.db, &[]);
    let (approval, _) = pending(&mut serve, place.root(), "s1", MARKDOWN);
    let id = approval["id"].as_str().unwrap();
    assert_eq!(
        serve.call("plan/readArtifact", json!({"approvalId": id}))["markdown"],
        MARKDOWN
    );
    let path = place
        .workspace
        .join(approval["artifact"]["path"].as_str().unwrap());
    // Same size, one byte changed.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(
        serve.error("plan/readArtifact", json!({"approvalId": id})),
        (-32000, "ARTIFACT_INTEGRITY_MISMATCH".to_owned())
    );
    // Appended bytes.
    bytes[0] ^= 0x01;
    bytes.push(b'\n');
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(
        serve.code("plan/readArtifact", json!({"approvalId": id})),
        "ARTIFACT_INTEGRITY_MISMATCH"
    );
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        serve.code("plan/readArtifact", json!({"approvalId": id})),
        "ARTIFACT_MISSING"
    );
    assert_eq!(
        serve.code("plan/readArtifact", json!({"approvalId": "nope"})),
        "APPROVAL_NOT_FOUND"
    );
    // The row is untouched by any of it.
    assert_eq!(serve.call("plan/get", json!({"approvalId": id})), approval);
    assert!(serve.close().success());
}

/// `plan/approve` re-reads the artifact inside the decision: a rewritten or
/// removed file refuses it with its code, the row and the session stay as
/// they were, no `plan/approvalResolved` goes out, and `plan/reject` still
/// decides.
#[test]
fn approving_a_tampered_or_missing_artifact_is_refused_and_changes_nothing() {
    let place = Place::new();
    let mut serve = Serve::start(&place.db, &[]);
    let (approval, _) = pending(&mut serve, place.root(), "s1", MARKDOWN);
    let id = approval["id"].as_str().unwrap();
    let session = serve.call("session/get", json!({"sessionId": "s1"}));
    let path = place
        .workspace
        .join(approval["artifact"]["path"].as_str().unwrap());
    serve.take_notifications();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(
        serve.error(
            "plan/approve",
            json!({"approvalId": id, "permissionMode": "auto"})
        ),
        (-32000, "ARTIFACT_INTEGRITY_MISMATCH".to_owned())
    );
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        serve.code("plan/approve", json!({"approvalId": id, "permissionMode": "ask"})),
        "ARTIFACT_MISSING"
    );
    assert_eq!(serve.call("plan/get", json!({"approvalId": id})), approval);
    assert_eq!(serve.call("session/get", json!({"sessionId": "s1"})), session);
    assert!(
        !notification_methods(&serve.take_notifications()).contains(&"plan/approvalResolved".to_owned()),
        "a refused approval resolves nothing"
    );
    let rejected = serve.call("plan/reject", json!({"approvalId": id}));
    assert_eq!(rejected["approval"]["status"], "rejected");
    assert!(serve.close().success());
}

#[test]
fn shell_list_set_default_and_unknown() {
    let place = Place::new();
    let mut serve = Serve::start(&place.db, &[]);
    let listed = serve.call("shell/list", json!({}));
    let shells = listed["shells"].as_array().unwrap();
    let ids: Vec<&str> = shells.iter().map(|shell| shell["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["bash", "zsh", "sh", "fish", "pwsh"]);
    for shell in shells {
        let path = shell["path"].as_str().unwrap();
        assert_eq!(shell["available"], Path::new(path).exists(), "{shell}");
    }
    assert!(ids.contains(&listed["default"].as_str().unwrap()));
    assert_eq!(
        serve.call("shell/setDefault", json!({"shellId": "fish"})),
        json!({"default": "fish"})
    );
    assert_eq!(serve.call("shell/list", json!({}))["default"], "fish");
    assert_eq!(
        serve.error("shell/setDefault", json!({"shellId": "cmd"})),
        (-32000, "SHELL_UNKNOWN".to_owned())
    );
    assert_eq!(serve.call("shell/list", json!({}))["default"], "fish");
    create_session(&mut serve, "s1", None, "agent");
    assert_eq!(
        serve.code("session/configure", json!({"sessionId": "s1", "shell": "tcsh"})),
        "SHELL_UNKNOWN"
    );
    let configured = serve.call(
        "session/configure",
        json!({"sessionId": "s1", "shell": "sh", "model": "m1"}),
    );
    assert_eq!(
        (configured["shell"].as_str(), configured["model"].as_str()),
        (Some("sh"), Some("m1"))
    );
    let cleared = serve.call("session/configure", json!({"sessionId": "s1", "shell": null}));
    assert_eq!(
        (&cleared["shell"], cleared["model"].as_str()),
        (&Value::Null, Some("m1"))
    );
    assert!(serve.close().success());
    // The default is persisted.
    let mut serve = Serve::start(&place.db, &[]);
    assert_eq!(serve.call("shell/list", json!({}))["default"], "fish");
    assert!(serve.close().success());
}

#[test]
fn malformed_input_is_answered_and_serving_continues() {
    let place = Place::new();
    let mut serve = Serve::start(&place.db, &["--markdown-limit-bytes", "64"]);
    let alive = |serve: &mut Serve| {
        let session = serve.call("session/get", json!({"sessionId": "s1"}));
        assert_eq!(session["sessionId"], "s1");
    };
    create_session(&mut serve, "s1", Some(place.root()), "plan");

    let parse = serve.raw(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ");
    assert_eq!(
        (error_of(&parse), &parse["id"]),
        (Some((-32700, "PARSE_ERROR".to_owned())), &Value::Null)
    );
    alive(&mut serve);
    let not_utf8 = serve.raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}");
    assert_eq!(error_of(&not_utf8).unwrap().1, "PARSE_ERROR");
    alive(&mut serve);
    assert_eq!(
        serve.error("plan/requestChanges", json!({"approvalId": "a"})),
        (-32601, "METHOD_NOT_FOUND".to_owned())
    );
    alive(&mut serve);
    for (method, params) in [
        ("session/get", json!({"sessionId": 5})),
        ("session/get", json!({})),
        (
            "turn/start",
            json!({"sessionId": "s1", "prompt": ["p"], "origin": "interactive"}),
        ),
        ("plan/list", json!({"limit": "ten"})),
        (
            "plan/approve",
            json!({"approvalId": "a", "permissionMode": "everything"}),
        ),
        ("session/create", json!({"workspaceRoot": null, "color": "red"})),
        ("shell/list", json!([])),
    ] {
        assert_eq!(
            serve.error(method, params.clone()),
            (-32602, "INVALID_PARAMS".to_owned()),
            "{method} {params}"
        );
    }
    alive(&mut serve);
    let invalid = serve.raw(br#"{"jsonrpc":"2.0","id":{"a":1},"method":"session/get"}"#);
    assert_eq!(
        error_of(&invalid).unwrap(),
        (-32600, "INVALID_REQUEST".to_owned())
    );
    let invalid = serve.raw(br#""just a string""#);
    assert_eq!(
        error_of(&invalid).unwrap(),
        (-32600, "INVALID_REQUEST".to_owned())
    );
    alive(&mut serve);

    // An oversized line (the line limit follows --markdown-limit-bytes).
    let mut huge = br#"{"jsonrpc":"2.0","id":99,"method":"session/get","params":{"sessionId":""#.to_vec();
    huge.extend(std::iter::repeat_n(b'x', 2 * 1024 * 1024));
    huge.extend(br#""}}"#);
    let too_long = serve.raw(&huge);
    // Its id came before the bound: the refusal carries it.
    assert_eq!(
        (error_of(&too_long), &too_long["id"]),
        (Some((-32600, "INVALID_REQUEST".to_owned())), &json!(99))
    );
    alive(&mut serve);
    // The id after the bound was never read: a null id.
    let mut late = br#"{"jsonrpc":"2.0","method":"session/get","params":{"sessionId":""#.to_vec();
    late.extend(std::iter::repeat_n(b'x', 2 * 1024 * 1024));
    late.extend(br#""},"id":98}"#);
    let too_long = serve.raw(&late);
    assert_eq!(
        (error_of(&too_long), &too_long["id"]),
        (Some((-32600, "INVALID_REQUEST".to_owned())), &Value::Null)
    );
    alive(&mut serve);
    // Markdown over the limit is INVALID_PLAN_INPUT, at the limit accepted.
    let turn = start_turn(&mut serve, "s1");
    let results = tool_calls(
        &mut serve,
        "s1",
        &turn,
        json!([submit_call("c", &"x".repeat(65))]),
    );
    assert_eq!(results[0]["error"]["code"], "INVALID_PLAN_INPUT");
    let at_limit = "é".repeat(32);
    let results = tool_calls(&mut serve, "s1", &turn, json!([submit_call("c", &at_limit)]));
    assert_artifact(&place.workspace, &results[0]["approval"], &at_limit);

    // Blank lines are ignored; notifications get no reply; batches are answered.
    assert!(serve.send_bytes(b""));
    assert!(serve.send_bytes(br#"{"jsonrpc":"2.0","method":"session/get","params":{"sessionId":"s1"}}"#));
    assert!(serve.send_bytes(br#"{"jsonrpc":"2.0","method":"no/such/thing"}"#));
    let batch = serve.raw(
        json!([
            {"jsonrpc": "2.0", "id": "a", "method": "session/get", "params": {"sessionId": "s1"}},
            {"jsonrpc": "2.0", "method": "session/get", "params": {"sessionId": "s1"}},
            {"jsonrpc": "2.0", "id": "b", "method": "nope"},
            7
        ])
        .to_string()
        .as_bytes(),
    );
    let batch = batch
        .as_array()
        .unwrap_or_else(|| panic!("a batch is answered with an array: {batch}"));
    assert_eq!(batch.len(), 3);
    assert_eq!(
        (&batch[0]["id"], &batch[0]["result"]["sessionId"]),
        (&json!("a"), &json!("s1"))
    );
    assert_eq!(
        (&batch[1]["id"], error_of(&batch[1]).unwrap().1.as_str()),
        (&json!("b"), "METHOD_NOT_FOUND")
    );
    assert_eq!(
        (&batch[2]["id"], error_of(&batch[2]).unwrap().1.as_str()),
        (&Value::Null, "INVALID_REQUEST")
    );
    let empty = serve.raw(b"[]");
    assert_eq!(error_of(&empty).unwrap().1, "INVALID_REQUEST");
    // The next response after the notifications and the batch is this one's.
    let response = serve.request("session/get", json!({"sessionId": "s1"}));
    assert_eq!(response["result"]["sessionId"], "s1");
    // Logs go to stderr only (stdout lines are all checked to be JSON-RPC).
    serve.wait_stderr("ready");
    assert!(serve.close().success());
}

#[test]
fn eof_shuts_down_cleanly_and_a_second_serve_is_refused() {
    let place = Place::new();
    let mut first = Serve::start(&place.db, &[]);
    let (approval, _) = pending(&mut first, place.root(), "s1", MARKDOWN);

    let mut second = Serve::spawn(&place.db, &[]);
    let refusal = second
        .next_message(REPLY_TIMEOUT)
        .expect("an error line before exiting");
    assert_eq!(refusal["id"], Value::Null);
    assert_eq!(
        error_of(&refusal).unwrap(),
        (-32000, "HOST_ALREADY_RUNNING".to_owned())
    );
    let status = second.wait();
    assert!(!status.success());
    assert_eq!(status.code(), Some(3));
    assert!(
        second.next_message(REPLY_TIMEOUT).is_none(),
        "nothing after the refusal"
    );
    second.wait_stderr("HOST_ALREADY_RUNNING");

    // The first one is unaffected and still serving.
    assert_eq!(
        first.call("plan/get", json!({"approvalId": approval["id"]}))["status"],
        "pending"
    );
    let status = first.close();
    assert!(status.success(), "EOF exits 0, got {status:?}");
    assert_eq!(status.code(), Some(0));

    // EOF released the lock: a new serve starts (and fences the pending row).
    let mut third = Serve::start(&place.db, &[]);
    let row = third.call("plan/get", json!({"approvalId": approval["id"]}));
    assert_eq!(
        (row["status"].as_str(), row["errorCode"].as_str()),
        (Some("interrupted"), Some("HOST_RESTARTED"))
    );
    assert!(third.close().success());
}

// --- restart --------------------------------------------------------------

/// Every approval row's artifact bytes still match the recorded hash and size.
fn assert_all_artifacts_intact(serve: &mut Serve, workspace: &Path) {
    for approval in serve.call("plan/list", json!({}))["approvals"]
        .as_array()
        .unwrap()
    {
        let artifact = &approval["artifact"];
        let bytes = std::fs::read(workspace.join(artifact["path"].as_str().unwrap())).unwrap();
        assert_eq!(artifact["sha256"], sha256_hex(&bytes));
        assert_eq!(artifact["size"], bytes.len());
        let read = serve.call("plan/readArtifact", json!({"approvalId": approval["id"]}));
        assert_eq!(read["sha256"], artifact["sha256"]);
    }
}

/// Starts serve after a crash and checks that startup replays nothing:
/// no notification arrives while a few requests are answered.
fn restart_quietly(place: &Place) -> Serve {
    let mut serve = Serve::start(&place.db, &[]);
    serve.call("plan/list", json!({}));
    serve.call("shell/list", json!({}));
    assert!(
        serve.take_notifications().is_empty(),
        "a restart must not notify anything"
    );
    serve
}

#[test]
fn sigkill_while_pending_queued_and_running_interrupts_without_replay() {
    let place = Place::new();

    // 1. Killed while an approval is pending.
    let mut serve = Serve::start(&place.db, &[]);
    let (pending_row, _) = pending(&mut serve, place.root(), "p", "# pending\r\n");
    let pending_id = pending_row["id"].as_str().unwrap().to_owned();
    serve.kill();
    let mut serve = restart_quietly(&place);
    let row = serve.call("plan/get", json!({"approvalId": pending_id}));
    assert_eq!(row["status"], "interrupted");
    assert_eq!(row["errorCode"], "HOST_RESTARTED");
    assert!(row["decidedAt"].is_i64());
    assert_eq!(row["executionState"], Value::Null);
    assert_eq!(row["artifact"], pending_row["artifact"]);
    let session = serve.call("session/get", json!({"sessionId": "p"}));
    assert_eq!(
        (session["mode"].as_str(), &session["activeTurn"]),
        (Some("plan"), &Value::Null)
    );
    assert_eq!(session["pendingApprovalId"], Value::Null);
    assert_eq!(
        serve.code(
            "plan/approve",
            json!({"approvalId": pending_id, "permissionMode": "ask"})
        ),
        "APPROVAL_NOT_PENDING"
    );
    assert_artifact(&place.workspace, &pending_row, "# pending\r\n");

    // 2. Killed while an execution is queued.
    let (queued_row, _) = pending(&mut serve, place.root(), "q", "# queued\n");
    let queued_id = queued_row["id"].as_str().unwrap().to_owned();
    let (queued_approved, queued_execution) = approve(&mut serve, &queued_id, "accept-edits");
    serve.kill();
    let mut serve = restart_quietly(&place);
    let row = serve.call("plan/get", json!({"approvalId": queued_id}));
    assert_eq!(row["status"], "approved");
    assert_eq!(row["executionState"], "interrupted");
    assert_eq!(row["errorCode"], "HOST_RESTARTED");
    assert_eq!(row["executionId"], queued_execution.as_str());
    assert_eq!(row["decidedAt"], queued_approved["decidedAt"]);
    assert_eq!(row["permissionMode"], "accept-edits");
    let session = serve.call("session/get", json!({"sessionId": "q"}));
    assert_eq!(session["mode"], "agent");
    assert_eq!(session["permissionMode"], "accept-edits");
    assert_eq!(
        (&session["activeTurn"], &session["activeExecutionId"]),
        (&Value::Null, &Value::Null)
    );
    assert_eq!(
        serve.code("execution/start", json!({"executionId": queued_execution})),
        "EXECUTION_NOT_ACTIVE"
    );
    // The earlier interrupted row is as it was.
    assert_eq!(
        serve.call("plan/get", json!({"approvalId": pending_id}))["status"],
        "interrupted"
    );

    // 3. Killed while an execution is running.
    let (running_row, _) = pending(&mut serve, place.root(), "r", "# running\n");
    let running_id = running_row["id"].as_str().unwrap().to_owned();
    let (_, running_execution) = approve(&mut serve, &running_id, "auto");
    assert_eq!(
        serve.call("execution/start", json!({"executionId": running_execution}))["executionState"],
        "running"
    );
    let before: Vec<Value> = serve.call("plan/list", json!({}))["approvals"]
        .as_array()
        .unwrap()
        .clone();
    let files = place.plan_files().len();
    serve.kill();
    let mut serve = restart_quietly(&place);
    let row = serve.call("plan/get", json!({"approvalId": running_id}));
    assert_eq!(
        (row["status"].as_str(), row["executionState"].as_str()),
        (Some("approved"), Some("interrupted"))
    );
    assert_eq!(row["errorCode"], "HOST_RESTARTED");
    assert_eq!(
        serve.code("execution/complete", json!({"executionId": running_execution})),
        "EXECUTION_NOT_ACTIVE"
    );

    // Nothing replayed: same rows (by id), same files, every session idle, artifacts intact.
    let after: Vec<Value> = serve.call("plan/list", json!({}))["approvals"]
        .as_array()
        .unwrap()
        .clone();
    let ids = |rows: &[Value]| rows.iter().map(|row| row["id"].clone()).collect::<Vec<_>>();
    assert_eq!(ids(&after), ids(&before));
    assert_eq!(place.plan_files().len(), files);
    for (id, mode) in [("p", "plan"), ("q", "agent"), ("r", "agent")] {
        let session = serve.call("session/get", json!({"sessionId": id}));
        assert_eq!(session["mode"], mode, "{id}");
        assert_eq!(session["activeTurn"], Value::Null, "{id}");
        assert_eq!(session["pendingApprovalId"], Value::Null, "{id}");
        assert_eq!(session["activeExecutionId"], Value::Null, "{id}");
    }
    assert_all_artifacts_intact(&mut serve, &place.workspace);
    // The user may start over: Plan in the pending session, Agent in the executing one.
    assert_eq!(
        serve.call(
            "turn/start",
            json!({"sessionId": "p", "prompt": "again", "origin": "interactive"})
        )["mode"],
        "plan"
    );
    assert_eq!(
        serve.call(
            "turn/start",
            json!({"sessionId": "r", "prompt": "again", "origin": "interactive"})
        )["mode"],
        "agent"
    );
    assert!(
        serve
            .take_notifications()
            .iter()
            .all(|n| n["method"] == "session/changed")
    );
    assert!(serve.close().success());
}

// --- crash consistency ----------------------------------------------------

/// A small deterministic generator (xorshift64*), so a failing round can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// Opens the database with rusqlite (beside the live server) and checks it.
/// Returns how many approval rows it holds.
fn check_database(db: &Path, round: u32) -> usize {
    let conn = rusqlite::Connection::open(db).unwrap();
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(integrity, "ok", "round {round}");
    let mut statement = conn
        .prepare(
            "SELECT a.id, s.workspace_root, a.artifact_path, a.artifact_sha256, a.artifact_size, a.status \
             FROM plan_approvals a JOIN sessions s ON s.id = a.session_id",
        )
        .unwrap();
    let rows: Vec<(String, String, String, String, i64, String)> = statement
        .query_map([], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (id, root, path, sha256, size, status) in &rows {
        let bytes = std::fs::read(Path::new(root).join(path))
            .unwrap_or_else(|error| panic!("round {round}: artifact of {id} ({status}) at {path}: {error}"));
        assert_eq!(bytes.len() as i64, *size, "round {round}: size of {id}");
        assert_eq!(&sha256_hex(&bytes), sha256, "round {round}: SHA-256 of {id}");
    }
    let live: i64 = conn
        .query_row(
            "SELECT count(*) FROM plan_approvals WHERE status = 'pending' OR execution_state IN ('queued','running')",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(live, 0, "round {round}: the startup fence left live rows");
    rows.len()
}

/// Kills serve at pseudo-random moments while it handles submissions, then
/// restarts it and checks the database and every artifact.
///
/// Rounds: `PLAN_CRASH_ROUNDS` (default 200). Each round is one process:
/// start (which runs the fence on the previous round's leftovers), check the
/// database, then submit in a loop while a timer thread SIGKILLs the process
/// after a delay drawn from a fixed-seed generator (0 to 40 ms), so every
/// run replays the same schedule of delays (where a delay lands in the work
/// still varies with machine speed).
#[test]
fn crash_consistency_under_random_kills() {
    let rounds: u32 = std::env::var("PLAN_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let place = Place::new();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut total_rows = 0;
    let mut killed_mid_work = 0;
    for round in 0..rounds {
        let mut serve = Serve::start(&place.db, &[]);
        let rows = check_database(&place.db, round);
        assert!(rows >= total_rows, "round {round}: rows disappeared");
        total_rows = rows;

        let delay = Duration::from_millis(rng.below(41));
        let child = std::mem::replace(&mut serve.child, placeholder_child());
        let child = Arc::new(Mutex::new(child));
        let killer = std::thread::spawn({
            let child = Arc::clone(&child);
            move || {
                std::thread::sleep(delay);
                let mut child = child.lock().unwrap();
                child.kill().unwrap();
                child.wait().unwrap();
            }
        });
        // Submit until the process dies under us.
        let mut submitted = 0;
        'work: for index in 0.. {
            let session = format!("r{round}-{index}");
            let markdown = format!(
                "# round {round} plan {index}\r\n{}\n",
                "ü".repeat((index % 7) * 100)
            );
            let create = json!({"sessionId": session, "workspaceRoot": place.root(), "mode": "plan"});
            let Some(created) = serve.try_request("session/create", create) else {
                break 'work;
            };
            assert!(created.get("result").is_some(), "{created}");
            let start = json!({"sessionId": session, "prompt": "p", "origin": "interactive"});
            let Some(turn) = serve.try_request("turn/start", start) else {
                break 'work;
            };
            let turn_id = turn["result"]["turnId"].clone();
            let calls =
                json!({"sessionId": session, "turnId": turn_id, "calls": [submit_call("c", &markdown)]});
            let Some(results) = serve.try_request("turn/toolCalls", calls) else {
                break 'work;
            };
            let approval = results["result"]["results"][0]["approval"].clone();
            assert_eq!(approval["status"], "pending", "{results}");
            submitted += 1;
            // Alternate what the next kill may interrupt: a pending row, a queued or a rejected one.
            let decision = match index % 3 {
                0 => json!({"approvalId": approval["id"], "permissionMode": "auto"}),
                1 => json!({"approvalId": approval["id"]}),
                _ => continue,
            };
            let method = if index % 3 == 0 {
                "plan/approve"
            } else {
                "plan/reject"
            };
            if serve.try_request(method, decision).is_none() {
                break 'work;
            }
        }
        if submitted > 0 {
            killed_mid_work += 1;
        }
        killer.join().unwrap();
        drop(child);
    }
    // Leave it clean and look once more.
    let serve = Serve::start(&place.db, &[]);
    let rows = check_database(&place.db, rounds);
    assert!(serve.close().success());
    eprintln!(
        "crash consistency: {rounds} rounds, {killed_mid_work} killed after a submission, {rows} approval rows"
    );
    if rounds >= 50 {
        assert!(
            rows > 0 && killed_mid_work > 0,
            "the kills never landed during submissions"
        );
    }
}

/// A process that has already exited, to stand in for a child handed to the killer thread.
fn placeholder_child() -> Child {
    let mut child = Command::new("true")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child.wait().unwrap();
    child
}

// --- edges: names, limits, stdio, request bounds ---------------------------

/// Runs `serve` with the given args and stdin, and returns (exit code, stdout, stderr).
fn serve_once(args: &[&str], stdin: &[u8]) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_plan-checkpoint"))
        .arg("serve")
        .args(args)
        .env_remove("PLAN_CHECKPOINT_DB")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&bytes);
    });
    let output = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn names_that_keep_nothing_are_refused_with_exit_3() {
    for name in ["", ":memory:", "file:plans.db?mode=memory"] {
        let (code, stdout, stderr) = serve_once(&["--db", name], b"");
        assert_eq!(code, Some(3), "{name:?}: {stderr}");
        assert!(stderr.contains("INVALID_PARAMS"), "{stderr}");
        assert!(stderr.contains("cannot be a host database"), "{stderr}");
        let refusal: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(error_of(&refusal).unwrap().1, "INVALID_PARAMS");
    }
}

#[test]
fn a_request_over_a_bound_is_answered_with_its_own_id_when_it_was_read() {
    let place = Place::new();
    let mut serve = Serve::start(&place.db, &[]);
    let session = create_session(&mut serve, "s1", Some(place.root()), "plan");
    assert_eq!(session["sessionId"], "s1");
    let turn = start_turn(&mut serve, "s1");
    // A 10 MB title after the id: the strings bound trips inside the title.
    let title = "t".repeat(10 * 1000 * 1000);
    let call = json!({"callId": "c", "name": "SubmitPlan",
        "input": {"title": title, "markdown": "# m", "question": "q"}});
    let with_id = json!({"jsonrpc": "2.0", "id": "big-1", "method": "turn/toolCalls",
        "params": {"sessionId": "s1", "turnId": turn, "calls": [call]}});
    let refused = serve.raw(with_id.to_string().as_bytes());
    assert_eq!(
        (error_of(&refused), &refused["id"]),
        (Some((-32600, "INVALID_REQUEST".to_owned())), &json!("big-1"))
    );
    // The same request with its id after the title: null, the id was never read.
    let mut line = with_id.to_string();
    line = line.replacen(r#""id":"big-1","#, "", 1);
    line.pop();
    line.push_str(r#","id":"big-2"}"#);
    assert!(line.find("big-2") > line.find("ttttt"), "the id comes last");
    let refused = serve.raw(line.as_bytes());
    assert_eq!(
        (error_of(&refused), &refused["id"]),
        (Some((-32600, "INVALID_REQUEST".to_owned())), &Value::Null)
    );
    // Nothing was carried out: the turn is still open and nothing is pending.
    let session = serve.request("session/get", json!({"sessionId": "s1"}));
    assert_eq!(session["result"]["pendingApprovalId"], Value::Null, "{session}");
}

#[test]
fn a_default_command_timeout_above_the_maximum_is_refused_by_the_one_rule() {
    let place = Place::new();
    let db = place.db.to_str().unwrap();
    let args = [
        "--db",
        db,
        "--command-timeout-ms",
        "900000",
        "--command-max-timeout-ms",
        "600000",
    ];
    let (code, stdout, stderr) = serve_once(&args, b"");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("INVALID_PARAMS"), "{stderr}");
    assert!(stderr.contains("900000 ms"), "{stderr}");
    let refusal: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(error_of(&refusal).unwrap().1, "INVALID_PARAMS");
    assert!(!place.db.exists(), "a refused start created the database");
    for zero in [
        "--command-max-timeout-ms",
        "--max-running-commands",
        "--command-timeout-ms",
    ] {
        let (code, _, stderr) = serve_once(&["--db", db, zero, "0"], b"");
        assert_eq!(code, Some(2), "{zero}: {stderr}");
        assert!(stderr.contains("INVALID_PARAMS"), "{zero}: {stderr}");
    }
}

#[test]
fn an_out_of_range_scratch_size_is_refused_before_anything_opens() {
    let place = Place::new();
    let db = place.db.to_str().unwrap();
    for size in ["0", "1048577"] {
        let (code, stdout, stderr) = serve_once(&["--db", db, "--scratch-size-mb", size], b"");
        assert_eq!(code, Some(2), "{size}: {stderr}");
        assert!(stderr.contains("INVALID_PARAMS"), "{stderr}");
        assert!(stderr.contains(&format!("{size} MB")), "{stderr}");
        assert!(stderr.contains("from 1 MB to 1048576 MB"), "{stderr}");
        let refusal: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(error_of(&refusal).unwrap().1, "INVALID_PARAMS");
        assert!(!place.db.exists(), "a refused start created the database");
    }
}

#[test]
fn an_out_of_range_ttl_is_refused_by_the_one_rule() {
    let place = Place::new();
    let db = place.db.to_str().unwrap();
    for ttl in ["-5", "0", "604800001", "9223372036854775807"] {
        let (code, stdout, stderr) = serve_once(&["--db", db, "--approval-ttl-ms", ttl], b"");
        assert_eq!(code, Some(2), "{ttl}: {stderr}");
        assert!(stderr.contains("INVALID_PARAMS"), "{stderr}");
        assert!(stderr.contains(&format!("{ttl} ms")), "{stderr}");
        assert!(stderr.contains("from 1 ms to 604800000 ms"), "{stderr}");
        let refusal: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(error_of(&refusal).unwrap().1, "INVALID_PARAMS");
        assert!(!place.db.exists(), "a refused start created the database");
    }
    // The widest TTL is served, and its deadline does not saturate.
    let mut serve = Serve::start(&place.db, &["--approval-ttl-ms", "604800000"]);
    let (approval, _) = pending(&mut serve, place.root(), "s", MARKDOWN);
    let created = approval["createdAt"].as_i64().unwrap();
    assert_eq!(approval["expiresAt"].as_i64().unwrap(), created + 604_800_000);
    assert!(serve.close().success());
}

/// A session, a turn and a plan over `input`, then EOF.
fn scripted_session(root: &str) -> Vec<u8> {
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 9, "clientName": "t"}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/create", "params": {"sessionId": "s", "workspaceRoot": root, "mode": "plan"}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/get", "params": {"sessionId": "s"}}),
    ];
    let mut bytes = Vec::new();
    for line in lines {
        bytes.extend_from_slice(line.to_string().as_bytes());
        bytes.push(b'\n');
    }
    bytes
}

#[test]
fn an_unwritable_stderr_neither_crashes_nor_stops_serve() {
    let place = Place::new();
    // stderr on /dev/full: every write fails with ENOSPC.
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_plan-checkpoint"))
        .args(["serve", "--db"])
        .arg(&place.db)
        .env_remove("PLAN_CHECKPOINT_DB")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(full))
        .spawn()
        .and_then(|mut child| {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(&scripted_session(place.root()))?;
            child.wait_with_output()
        })
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let replies: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .filter(|message| !is_notification(message))
        .collect();
    assert_eq!(replies.len(), 3, "{replies:?}");
    assert_eq!(replies[2]["result"]["sessionId"], "s");

    // stderr a pipe whose reader is gone: every write fails with EPIPE.
    let mut child = Command::new(env!("CARGO_BIN_EXE_plan-checkpoint"))
        .args(["serve", "--db"])
        .arg(place.db.with_file_name("second.db"))
        .env_remove("PLAN_CHECKPOINT_DB")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&scripted_session(place.root()))
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    assert_eq!(
        text.lines().filter(|line| line.contains("\"id\":3")).count(),
        1,
        "{text}"
    );
}

/// The status of every approval, straight from the database file.
fn statuses(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut statement = conn
        .prepare("SELECT status FROM plan_approvals ORDER BY created_at")
        .unwrap();
    statement
        .query_map([], |row| row.get::<_, String>(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn a_client_that_stops_reading_does_not_stall_expiry() {
    let place = Place::new();
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_plan-checkpoint"))
            .args(["serve", "--approval-ttl-ms", "1500", "--db"])
            .arg(&place.db)
            .env_remove("PLAN_CHECKPOINT_DB")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut stdin = child.0.stdin.take().unwrap();
    let stdout = child.0.stdout.take().unwrap();
    // A reader that forwards lines until told to stop, then keeps the pipe
    // open without reading it: a client that is alive but stopped reading.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (sender, lines) = channel::<Value>();
    // Dropped when the test ends, which lets the threads close their pipes.
    let (release, released) = channel::<()>();
    let released = Arc::new(Mutex::new(released));
    let reader = std::thread::spawn({
        let stop = Arc::clone(&stop);
        let released = Arc::clone(&released);
        move || {
            let mut stdout = BufReader::new(stdout);
            let mut line = String::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                line.clear();
                if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                if let Ok(message) = serde_json::from_str(&line) {
                    let _ = sender.send(message);
                }
            }
            let _ = released.lock().unwrap().recv();
            drop(stdout);
        }
    });
    let mut next_id = 0;
    let mut request = |stdin: &mut ChildStdin, method: &str, params: Value| -> Value {
        next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params}).to_string();
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"))
            .unwrap();
        loop {
            let message = lines.recv_timeout(REPLY_TIMEOUT).expect("an answer");
            if message["id"] == next_id {
                return message["result"].clone();
            }
        }
    };
    request(
        &mut stdin,
        "initialize",
        json!({"protocolVersion": 9, "clientName": "t"}),
    );
    let mut deadlines = Vec::new();
    for session in ["a", "b"] {
        request(
            &mut stdin,
            "session/create",
            json!({"sessionId": session, "workspaceRoot": place.root(), "mode": "plan"}),
        );
        let turn = request(
            &mut stdin,
            "turn/start",
            json!({"sessionId": session, "prompt": "p", "origin": "interactive"}),
        );
        let results = request(
            &mut stdin,
            "turn/toolCalls",
            json!({"sessionId": session, "turnId": turn["turnId"], "calls": [submit_call("c", MARKDOWN)]}),
        );
        deadlines.push(results["results"][0]["approval"]["expiresAt"].as_i64().unwrap());
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    // Fill stdout: far more answer bytes than a pipe holds, never read.
    let burst = std::thread::spawn(move || {
        let released = released;
        let request = json!({"jsonrpc": "2.0", "id": 0, "method": "plan/list", "params": {}}).to_string();
        for _ in 0..2_000 {
            if stdin
                .write_all(request.as_bytes())
                .and_then(|()| stdin.write_all(b"\n"))
                .is_err()
            {
                return;
            }
        }
        let _ = released.lock().unwrap().recv();
        drop(stdin);
    });
    // Bounded poll of the database: both rows must be expired soon after
    // the later deadline, whatever the client does.
    let give_up = Instant::now() + Duration::from_secs(20);
    loop {
        let rows = statuses(&place.db);
        if rows == ["expired", "expired"] {
            break;
        }
        assert!(
            Instant::now() < give_up,
            "rows still {rows:?} {} ms after the last deadline",
            now_ms() - deadlines[1]
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop((child, release, reader, burst));
}

/// A child process that is killed and reaped when the test ends, even by a
/// failed assertion.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The peak resident set of a process, from /proc.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|line| line.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn no_request_within_the_line_cap_takes_serve_above_64_mib() {
    let place = Place::new();
    let mut serve = Serve::start(&place.db, &[]);
    let (approval, turn) = {
        create_session(&mut serve, "s", Some(place.root()), "plan");
        let turn = start_turn(&mut serve, "s");
        (Value::Null, turn)
    };
    let _ = approval;
    // 1. A 0.8 MB batch of empty objects, then one of 2 MB.
    for size in [800_000, 2_000_000] {
        let mut line = String::with_capacity(size + 2);
        line.push('[');
        while line.len() < size {
            line.push_str("{},");
        }
        line.push_str("{}]");
        let reply = serve.raw(line.as_bytes());
        let (_, code) = error_of(&reply).unwrap_or_else(|| panic!("{}", reply.to_string().len()));
        assert_eq!(code, "INVALID_REQUEST");
        assert!(reply.to_string().len() < 4096, "the answer is small");
    }
    // 2. A single request whose params hold millions of values.
    let mut line = String::from(r#"{"jsonrpc":"2.0","id":7,"method":"session/get","params":{"x":["#);
    while line.len() < 40_000_000 {
        line.push_str("1,");
    }
    line.push_str("1]}}");
    assert_eq!(
        error_of(&serve.raw(line.as_bytes())).unwrap().1,
        "INVALID_REQUEST"
    );
    // 3. One huge string where a short one belongs, echoed back cut.
    let mut line = String::from(r#"{"jsonrpc":"2.0","id":8,"method":""#);
    line.push_str(&"m".repeat(8 * 1024 * 1024));
    line.push_str(r#"","params":{}}"#);
    let reply = serve.raw(line.as_bytes());
    assert_eq!(error_of(&reply).unwrap().1, "METHOD_NOT_FOUND");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.len() < 2048, "the message echoes {} bytes", message.len());
    // 4. The largest legitimate request: an 8 MiB markdown with every byte
    //    escaped, close to the line cap.
    let markdown: String = "\u{1}".repeat(8 * 1024 * 1024 - 16);
    let calls = json!([submit_call("c", &markdown)]);
    let line = json!({"jsonrpc": "2.0", "id": 9, "method": "turn/toolCalls",
        "params": {"sessionId": "s", "turnId": turn, "calls": calls}})
    .to_string();
    assert!(line.len() > 40_000_000, "{}", line.len());
    let reply = serve.raw(line.as_bytes());
    assert_eq!(
        reply["result"]["results"][0]["decision"],
        "allow",
        "{}",
        reply.to_string().len()
    );
    let peak = peak_rss_kib(serve.child.id());
    eprintln!("serve peaked at {} KiB", peak);
    assert!(peak < 64 * 1024, "serve peaked at {} MiB", peak / 1024);
    assert!(serve.close().success());
}

/// A card URL carries a token, a secret of the person's (P11): `serve`
/// prints it on stderr only when stderr is a terminal. Into a pipe or a log
/// it says the approval is pending and where its URL goes, without it; the
/// host's own client still gets the URL on stdout.
#[test]
fn serve_web_prints_no_card_token_into_a_pipe() {
    let place = Place::new();
    let mut serve = Serve::start(&place.db, &["--web", "127.0.0.1:0"]);
    let (approval, _) = pending(&mut serve, place.root(), "s1", MARKDOWN);
    let id = approval["id"].as_str().unwrap();
    let url = serve.call("plan/cardUrl", json!({"approvalId": id}))["url"]
        .as_str()
        .unwrap()
        .to_owned();
    let token = url.rsplit('/').next().unwrap().to_owned();
    assert_eq!(token.len(), 64, "{url}");
    serve.wait_stderr(&format!("approval {id} is pending"));
    let stderr = serve.stderr();
    assert!(!stderr.contains(&token), "the token reached a pipe: {stderr}");
    assert!(!stderr.contains("/card/"), "{stderr}");
    assert!(serve.close().success());
}

#[test]
fn serve_web_reports_its_cards_and_refuses_another_address_without_web_bind() {
    let place = Place::new();
    let db = place.db.to_str().unwrap();
    // `--web` takes loopback only; the opt-in for another address is `--web-bind`.
    let (code, stdout, stderr) = serve_once(&["--db", db, "--web", "0.0.0.0:0"], b"");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("INVALID_PARAMS") && stderr.contains("not a loopback address"),
        "{stderr}"
    );
    let refusal: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(error_of(&refusal).unwrap().1, "INVALID_PARAMS");
    assert!(!place.db.exists(), "a refused start created the database");

    let input = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":9}}"#.to_owned(),
        json!({"jsonrpc":"2.0","id":2,"method":"session/create","params":{"sessionId":"s","workspaceRoot":place.root(),"mode":"plan"}}).to_string(),
    ]
    .join("\n");
    let (code, stdout, stderr) = serve_once(
        &["--db", db, "--web", "127.0.0.1:0"],
        format!("{input}\n").as_bytes(),
    );
    assert_eq!(code, Some(0), "{stderr}");
    let base = stderr
        .lines()
        .find_map(|line| line.strip_prefix("plan-checkpoint serve: approval cards at "))
        .unwrap_or_else(|| panic!("no base URL on stderr: {stderr}"));
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    assert!(!stderr.contains("WARNING"), "loopback needs no warning: {stderr}");
    let init: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(init["result"]["capabilities"]["web"]["url"], base);

    // Without --web there is no card server.
    let (_, stdout, _) = serve_once(
        &["--db", db],
        format!("{}\n", input.lines().next().unwrap()).as_bytes(),
    );
    let init: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(init["result"]["capabilities"]["web"], Value::Null);
}

#[test]
fn a_missing_sandbox_helper_is_said_at_start_and_named_in_the_plan_bash_refusal() {
    let place = Place::new();
    let root = place.root().to_owned();
    let mut serve = Serve::start(&place.db, &["--sandbox-helper", "/nonexistent/helper"]);
    create_session(&mut serve, "s", Some(&root), "plan");
    let turn = start_turn(&mut serve, "s");
    let results = tool_calls(
        &mut serve,
        "s",
        &turn,
        json!([{"callId": "c1", "name": "Bash", "input": {"command": "cat README.md"}}]),
    );
    assert_eq!(results[0]["decision"], "deny");
    assert_eq!(results[0]["error"]["code"], "PLAN_SANDBOX_UNAVAILABLE");
    assert_eq!(
        results[0]["error"]["message"],
        "the read-only Plan sandbox is unavailable, so Plan-mode Bash cannot run: \
         the requested sandbox cannot be applied: the sandbox helper /nonexistent/helper was not found"
    );
    let db = place.db.to_str().unwrap().to_owned();
    let status = serve.close();
    assert!(status.success());
    let (_, _, stderr) = serve_once(&["--db", &db, "--sandbox-helper", "/nonexistent/helper"], b"");
    insta::assert_snapshot!("serve_missing_sandbox_helper_stderr", stderr.replace(&db, "[db]"));
}
