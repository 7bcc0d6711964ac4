//! The connection over a real host: JSON-RPC framing, initialization,
//! errors, batches and their bounds, a whole submission and review through
//! the dispatcher, and the one wire form of a tool-call outcome. The host's
//! own behaviour is tested in plan-host; these tests own the wire.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::Arc;

use plan_core::{ErrorCode, Limits, Mode, Origin, PlanApproval, SessionState};
use plan_host::{
    ApprovalFilter, ApprovalId, ExpiryTimer, Host, HostOptions, ManualClock, NewSession, SessionId,
    ToolCallResult, default_catalog,
};
use plan_server::Connection;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const T0: i64 = 1_800_000_000_000;
const TTL: i64 = 60_000;
const MARKDOWN_LIMIT: usize = 4096;
const MARKDOWN: &str =
    "# Plan ✓\r\n\r\n1. Read the parser — ünïcödé 计划\r\n2. Split it\n\tend without newline";

/// A workspace and a database with a host on a manual clock and no timer
/// thread (nothing acts between a test's steps).
struct Fixture {
    _dir: tempfile::TempDir,
    workspace: PathBuf,
    clock: Arc<ManualClock>,
    host: Arc<Host>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().canonicalize().unwrap().join("workspace");
        std::fs::create_dir(&workspace).unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let options = HostOptions {
            limits: Limits::new(TTL, MARKDOWN_LIMIT).unwrap(),
            clock: Arc::clone(&clock) as Arc<dyn plan_host::Clock>,
            shells: default_catalog(),
            expiry: ExpiryTimer::Manual,
            ..HostOptions::default()
        };
        let host = Arc::new(Host::open(dir.path().join("plan.db"), options).unwrap());
        Fixture {
            _dir: dir,
            workspace,
            clock,
            host,
        }
    }

    fn root(&self) -> String {
        self.workspace.to_str().unwrap().to_owned()
    }

    fn session(&self, id: &str, mode: Mode) -> SessionState {
        self.host
            .create_session(NewSession {
                session_id: Some(id.into()),
                workspace_root: Some(self.root()),
                mode: Some(mode),
                permission_mode: None,
            })
            .unwrap()
    }

    /// A Plan session with a pending approval.
    fn pending(&self, id: &str) -> (PlanApproval, plan_host::TurnId) {
        self.session(id, Mode::Plan);
        let turn = self
            .host
            .start_turn(&SessionId::from(id), Origin::Interactive)
            .unwrap();
        let outcomes = self
            .host
            .tool_calls(&SessionId::from(id), &turn.turn_id, vec![submit("c1", MARKDOWN)])
            .unwrap();
        (approval_of(&outcomes), turn.turn_id)
    }

    fn row(&self, id: &ApprovalId) -> PlanApproval {
        self.host.approval(id).unwrap().approval
    }
}

use crate::calls::{approval_of, code, submit};

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

mod connection {
    use super::*;

    fn request(id: i64, method: &str, params: Value) -> String {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
    }

    fn reply(connection: &mut Connection, line: &str) -> Value {
        serde_json::from_str(&connection.handle_line(line).expect("a reply")).unwrap()
    }

    fn error_code(value: &Value) -> (i64, String) {
        (
            value["error"]["code"]
                .as_i64()
                .unwrap_or_else(|| panic!("not an error: {value}")),
            value["error"]["data"]["code"].as_str().unwrap().to_owned(),
        )
    }

    fn initialized(fx: &Fixture) -> Connection {
        let mut connection = Connection::new(Arc::clone(&fx.host));
        let init = reply(
            &mut connection,
            &request(0, "initialize", json!({"protocolVersion": 9, "clientName": "t"})),
        );
        assert_eq!(init["result"]["protocolVersion"], 9);
        assert_eq!(init["result"]["schemaVersion"], 10);
        assert_eq!(init["result"]["approvalTtlMs"], TTL);
        assert_eq!(init["result"]["serverName"], "plan-checkpoint");
        connection
    }

    #[test]
    fn requests_before_initialize_and_other_versions_are_refused() {
        let fx = Fixture::new();
        let mut connection = Connection::new(Arc::clone(&fx.host));
        let refused = reply(
            &mut connection,
            &request(1, "session/create", json!({"workspaceRoot": null})),
        );
        assert_eq!(refused["id"], 1);
        assert_eq!(
            error_code(&refused),
            (-32000, "PROTOCOL_NOT_INITIALIZED".to_owned())
        );
        assert_eq!(
            fx.host.list_approvals(&ApprovalFilter::default()).unwrap().len(),
            0
        );
        let refused = reply(&mut connection, &request(2, "shell/list", json!({})));
        assert_eq!(error_code(&refused).1, "PROTOCOL_NOT_INITIALIZED");
        for version in [8, 10, 0] {
            let refused = reply(
                &mut connection,
                &request(3, "initialize", json!({"protocolVersion": version})),
            );
            assert_eq!(
                error_code(&refused),
                (-32000, "PROTOCOL_VERSION_UNSUPPORTED".to_owned())
            );
        }
        // A failed initialize leaves the connection uninitialized.
        let refused = reply(&mut connection, &request(4, "shell/list", json!({})));
        assert_eq!(error_code(&refused).1, "PROTOCOL_NOT_INITIALIZED");
        let ok = reply(
            &mut connection,
            &request(5, "initialize", json!({"protocolVersion": 9})),
        );
        assert_eq!(ok["id"], 5);
        assert_eq!(ok["jsonrpc"], "2.0");
        let ok = reply(&mut connection, &request(6, "shell/list", json!({})));
        assert!(ok["result"]["shells"].is_array(), "{ok}");
    }

    #[test]
    fn the_shell_list_is_the_hosts_catalog_as_it_is() {
        let fx = Fixture::new();
        let mut connection = initialized(&fx);
        // One declaration: the host's entries are the wire's own records.
        let (shells, default_shell): (Vec<plan_protocol::ShellInfo>, String) = fx.host.shells().unwrap();
        assert_eq!(shells.len(), default_catalog().len());
        let listed = reply(&mut connection, &request(1, "shell/list", json!({})));
        assert_eq!(
            listed["result"],
            json!({"shells": serde_json::to_value(&shells).unwrap(), "default": default_shell})
        );
        assert_eq!(
            listed["result"]["shells"][0],
            json!({"id": "bash", "path": "/bin/bash", "available": shells[0].available})
        );
    }

    #[test]
    fn unknown_methods_bad_json_and_invalid_params() {
        let fx = Fixture::new();
        let (approval, _) = fx.pending("s1");
        let mut connection = initialized(&fx);
        let unknown = reply(&mut connection, &request(1, "plan/requestChanges", json!({})));
        assert_eq!(unknown["id"], 1);
        assert_eq!(error_code(&unknown), (-32601, "METHOD_NOT_FOUND".to_owned()));
        let parse = reply(&mut connection, "{not json");
        assert_eq!(parse["id"], Value::Null);
        assert_eq!(error_code(&parse), (-32700, "PARSE_ERROR".to_owned()));
        let invalid = reply(
            &mut connection,
            r#"{"jsonrpc":"1.0","id":7,"method":"shell/list"}"#,
        );
        assert_eq!(error_code(&invalid), (-32600, "INVALID_REQUEST".to_owned()));
        assert_eq!(invalid["id"], 7);
        let invalid = reply(&mut connection, "42");
        assert_eq!(error_code(&invalid), (-32600, "INVALID_REQUEST".to_owned()));

        let id = approval.id.as_str();
        let bad_params = [
            (
                "plan/reject",
                json!({"approvalId": id, "feedback": "make it shorter"}),
            ),
            ("plan/reject", json!({"approvalId": id, "permissionMode": "ask"})),
            (
                "plan/approve",
                json!({"approvalId": id, "permissionMode": "yolo"}),
            ),
            (
                "plan/approve",
                json!({"approvalId": id, "permissionMode": "ask", "feedback": "x"}),
            ),
            ("plan/get", json!({"approvalId": 5})),
            ("plan/get", json!({})),
            ("plan/get", json!([id])),
            ("session/create", json!({})),
            ("session/create", json!({"workspaceRoot": "relative/path"})),
            (
                "turn/start",
                json!({"sessionId": "s1", "prompt": "p", "origin": "cron"}),
            ),
            ("plan/list", json!({"limit": -1})),
            ("plan/list", json!({"status": "done"})),
        ];
        for (method, params) in bad_params {
            let refused = reply(&mut connection, &request(9, method, params.clone()));
            assert_eq!(
                error_code(&refused),
                (-32602, "INVALID_PARAMS".to_owned()),
                "{method} {params}"
            );
        }
        // Nothing was rejected or approved by any of that.
        assert_eq!(fx.row(&approval.id), approval);
        let approve = reply(
            &mut connection,
            &request(10, "plan/approve", json!({"approvalId": id})),
        );
        assert_eq!(
            error_code(&approve),
            (-32000, "PERMISSION_MODE_REQUIRED".to_owned())
        );
        let approve = reply(
            &mut connection,
            &request(
                11,
                "plan/approve",
                json!({"approvalId": id, "permissionMode": null}),
            ),
        );
        assert_eq!(error_code(&approve).1, "PERMISSION_MODE_REQUIRED");
        assert_eq!(fx.row(&approval.id), approval);
        let rejected = reply(
            &mut connection,
            &request(12, "plan/reject", json!({"approvalId": id})),
        );
        assert_eq!(rejected["result"]["approval"]["status"], "rejected");
        assert_eq!(rejected["result"]["approval"]["permissionMode"], Value::Null);
        assert_eq!(rejected["result"]["session"]["mode"], "plan");
    }

    #[test]
    fn string_ids_are_echoed_and_notifications_get_no_reply() {
        let fx = Fixture::new();
        fx.session("s1", Mode::Plan);
        let mut connection = Connection::new(Arc::clone(&fx.host));
        // A notification is never answered, not even before initialize or when unknown.
        let notify = |method: &str, params: Value| {
            json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()
        };
        assert_eq!(
            connection.handle_line(&notify("session/get", json!({"sessionId": "s1"}))),
            None
        );
        assert_eq!(connection.handle_line(&notify("no/such", json!({}))), None);
        assert_eq!(
            connection.handle_line(&notify("plan/get", json!({"bad": 1}))),
            None
        );
        assert_eq!(
            connection
                .handle_line(r#"{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":9}}"#),
            None
        );
        // ...but it is carried out: initialize as a notification initialized the connection.
        let line =
            json!({"jsonrpc": "2.0", "id": "abc", "method": "session/get", "params": {"sessionId": "s1"}});
        let got = reply(&mut connection, &line.to_string());
        assert_eq!(got["id"], "abc");
        assert_eq!(got["result"]["sessionId"], "s1");
        assert_eq!(got["result"]["activeTurn"], Value::Null);
        // A message without an id that is not a request is an invalid request with a null id.
        let invalid = reply(&mut connection, r#"{"jsonrpc":"2.0","params":{}}"#);
        assert_eq!(invalid["id"], Value::Null);
        assert_eq!(error_code(&invalid).1, "INVALID_REQUEST");
        let invalid = reply(
            &mut connection,
            r#"{"method":"session/get","params":{"sessionId":"s1"}}"#,
        );
        assert_eq!(error_code(&invalid).1, "INVALID_REQUEST");
    }

    #[test]
    fn batches_are_answered_per_json_rpc() {
        let fx = Fixture::new();
        fx.session("s1", Mode::Plan);
        let mut connection = Connection::new(Arc::clone(&fx.host));
        let empty = reply(&mut connection, "[]");
        assert!(
            empty.is_object(),
            "an empty batch gets one error, not an array: {empty}"
        );
        assert_eq!(error_code(&empty), (-32600, "INVALID_REQUEST".to_owned()));
        assert_eq!(empty["id"], Value::Null);

        let batch = json!([
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 9}},
            {"jsonrpc": "2.0", "method": "session/get", "params": {"sessionId": "s1"}},
            {"jsonrpc": "2.0", "id": 2, "method": "session/get", "params": {"sessionId": "s1"}},
            {"jsonrpc": "2.0", "id": 3, "method": "nope/nope"},
            1,
            {"jsonrpc": "2.0", "id": 4, "method": "turn/start", "params": {"sessionId": "s1", "prompt": "p", "origin": "interactive"}},
            {"jsonrpc": "2.0", "id": 5, "method": "turn/start", "params": {"sessionId": "s1", "prompt": "p", "origin": "interactive"}},
        ]);
        let replies = reply(&mut connection, &batch.to_string());
        let replies = replies.as_array().unwrap();
        assert_eq!(replies.len(), 6, "{replies:?}");
        assert_eq!(replies[0]["id"], 1);
        assert_eq!(replies[0]["result"]["protocolVersion"], 9);
        assert_eq!(replies[1]["id"], 2);
        assert_eq!(replies[1]["result"]["sessionId"], "s1");
        assert_eq!(replies[2]["id"], 3);
        assert_eq!(error_code(&replies[2]).1, "METHOD_NOT_FOUND");
        assert_eq!(replies[3]["id"], Value::Null);
        assert_eq!(error_code(&replies[3]).1, "INVALID_REQUEST");
        assert_eq!(replies[4]["id"], 4);
        assert_eq!(replies[4]["result"]["mode"], "plan");
        assert_eq!(replies[5]["id"], 5);
        assert_eq!(error_code(&replies[5]).1, "SESSION_BUSY");

        // A batch of notifications only gets no reply at all.
        let batch = json!([{"jsonrpc": "2.0", "method": "session/get", "params": {"sessionId": "s1"}}]);
        assert_eq!(connection.handle_line(&batch.to_string()), None);
    }

    #[test]
    fn the_dispatcher_serves_a_full_submission() {
        let fx = Fixture::new();
        let root = fx.root();
        let mut connection = initialized(&fx);
        let session = reply(
            &mut connection,
            &request(
                1,
                "session/create",
                json!({"sessionId": "w1", "workspaceRoot": root, "mode": "plan"}),
            ),
        );
        assert_eq!(session["result"]["mode"], "plan");
        assert_eq!(session["result"]["permissionMode"], "ask");
        let duplicate = reply(
            &mut connection,
            &request(
                1,
                "session/create",
                json!({"sessionId": "w1", "workspaceRoot": null}),
            ),
        );
        assert_eq!(error_code(&duplicate).1, "SESSION_ALREADY_EXISTS");
        let turn = reply(
            &mut connection,
            &request(
                2,
                "turn/start",
                json!({"sessionId": "w1", "prompt": "plan it", "origin": "interactive"}),
            ),
        );
        let turn_id = turn["result"]["turnId"].as_str().unwrap().to_owned();
        let calls = json!({"sessionId": "w1", "turnId": turn_id, "calls": [
            {"callId": "c1", "name": "SubmitPlan", "input": {"title": "T", "markdown": MARKDOWN, "question": "Q?"}}
        ]});
        let submitted = reply(&mut connection, &request(3, "turn/toolCalls", calls));
        let result = &submitted["result"]["results"][0];
        assert_eq!(result["callId"], "c1");
        assert_eq!(result["decision"], "allow");
        assert_eq!(result["error"], Value::Null);
        assert_eq!(result["approval"]["status"], "pending");
        assert_eq!(
            result["approval"]["artifact"]["sha256"],
            sha256(MARKDOWN.as_bytes())
        );
        let id = result["approval"]["id"].as_str().unwrap();
        let denied = reply(
            &mut connection,
            &request(
                4,
                "turn/toolCalls",
                json!({"sessionId": "w1", "turnId": turn_id, "calls": [{"callId": "w", "name": "Write", "input": {}}]}),
            ),
        );
        assert_eq!(error_code(&denied).1, "SESSION_BUSY");
        let approved = reply(
            &mut connection,
            &request(
                5,
                "plan/approve",
                json!({"approvalId": id, "permissionMode": "auto"}),
            ),
        );
        assert_eq!(approved["result"]["approval"]["executionState"], "queued");
        assert_eq!(approved["result"]["session"]["mode"], "agent");
        assert_eq!(approved["result"]["session"]["activeTurn"]["kind"], "execution");
        let execution = approved["result"]["approval"]["executionId"].as_str().unwrap();
        assert_eq!(approved["result"]["session"]["activeExecutionId"], execution);
        let started = reply(
            &mut connection,
            &request(6, "execution/start", json!({"executionId": execution})),
        );
        assert_eq!(started["result"]["executionState"], "running");
        let done = reply(
            &mut connection,
            &request(7, "execution/complete", json!({"executionId": execution})),
        );
        assert_eq!(done["result"]["executionState"], "completed");
        let listed = reply(
            &mut connection,
            &request(
                8,
                "plan/list",
                json!({"sessionId": "w1", "status": "approved", "limit": 5}),
            ),
        );
        assert_eq!(listed["result"]["approvals"].as_array().unwrap().len(), 1);
        let read = reply(
            &mut connection,
            &request(9, "plan/readArtifact", json!({"approvalId": id})),
        );
        assert_eq!(read["result"]["markdown"], MARKDOWN);
        assert_eq!(read["result"]["size"], MARKDOWN.len());
    }
}

mod bounded_lines {
    use super::*;

    fn connection(fx: &Fixture) -> Connection {
        let mut connection = Connection::new(Arc::clone(&fx.host));
        let init = connection
            .handle_line(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":9,"clientName":"t"}}"#)
            .unwrap();
        assert!(init.contains("\"result\""), "{init}");
        connection
    }

    #[test]
    fn an_oversized_batch_is_refused_whole_before_anything_runs() {
        let fx = Fixture::new();
        let mut connection = connection(&fx);
        let create = |id: usize| {
            json!({"jsonrpc": "2.0", "id": id, "method": "session/create", "params": {"sessionId": format!("s{id}"), "workspaceRoot": null}})
                .to_string()
        };
        let batch = format!("[{}]", (0..129).map(create).collect::<Vec<_>>().join(","));
        let reply: Value = serde_json::from_str(&connection.handle_line(&batch).unwrap()).unwrap();
        assert_eq!(reply["error"]["data"]["code"], "INVALID_REQUEST", "{reply}");
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains("more than 128"),
            "{reply}"
        );
        // Nothing in it was carried out.
        assert_eq!(
            code(fx.host.session(&SessionId::from("s0"))),
            ErrorCode::SessionNotFound
        );
        // 128 is allowed.
        let batch = format!("[{}]", (0..128).map(create).collect::<Vec<_>>().join(","));
        let replies: Value = serde_json::from_str(&connection.handle_line(&batch).unwrap()).unwrap();
        assert_eq!(replies.as_array().unwrap().len(), 128);
        assert_eq!(replies[0]["result"]["sessionId"], "s0", "{}", replies[0]);
        assert!(fx.host.session(&SessionId::from("s127")).is_ok());
    }

    #[test]
    fn an_error_never_echoes_a_whole_hostile_value() {
        let fx = Fixture::new();
        let mut connection = connection(&fx);
        let method = "m".repeat(1_000_000);
        let line = json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": {}}).to_string();
        let reply: Value = serde_json::from_str(&connection.handle_line(&line).unwrap()).unwrap();
        assert_eq!(
            reply["error"]["data"]["code"],
            "METHOD_NOT_FOUND",
            "{}",
            reply.to_string().len()
        );
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.len() < 1100, "{} bytes", message.len());
        assert!(message.contains("(cut; the message was"), "{message}");
        // A huge id in a host error is cut too.
        let session = "s".repeat(1_000_000);
        let line =
            json!({"jsonrpc": "2.0", "id": 3, "method": "session/get", "params": {"sessionId": session}})
                .to_string();
        let reply: Value = serde_json::from_str(&connection.handle_line(&line).unwrap()).unwrap();
        assert_eq!(reply["error"]["data"]["code"], "SESSION_NOT_FOUND");
        assert!(reply["error"]["message"].as_str().unwrap().len() < 1100);
    }
}

mod review {
    use super::*;
    use plan_core::{ArtifactCheck, VerifyScope};

    fn line(id: i64, method: &str, params: Value) -> String {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
    }

    fn connection(fx: &Fixture) -> Connection {
        let mut connection = Connection::new(Arc::clone(&fx.host));
        connection.handle_line(&line(0, "initialize", json!({"protocolVersion": 9})));
        connection
    }

    fn answer(connection: &mut Connection, id: i64, method: &str, params: Value) -> Value {
        serde_json::from_str(&connection.handle_line(&line(id, method, params)).unwrap()).unwrap()
    }

    #[test]
    fn roots_are_normalized_at_creation_and_bad_ones_refused_the_same_over_serve() {
        let fx = Fixture::new();
        let mut serve = connection(&fx);
        let root = fx.root();
        for (id, given) in [
            ("slash", format!("{root}/")),
            ("dotted", format!("{root}/x/../.")),
        ] {
            let state = fx
                .host
                .create_session(NewSession {
                    session_id: Some(id.into()),
                    workspace_root: Some(given),
                    ..NewSession::default()
                })
                .unwrap();
            assert_eq!(state.session.workspace_root.as_deref(), Some(root.as_str()));
        }
        for bad in ["relative", "/..", "/w\u{0}x"] {
            let embedded = fx.host.create_session(NewSession {
                workspace_root: Some(bad.to_owned()),
                ..NewSession::default()
            });
            assert_eq!(code(embedded), ErrorCode::InvalidParams, "{bad:?}");
            let wire = answer(&mut serve, 1, "session/create", json!({"workspaceRoot": bad}));
            assert_eq!(wire["error"]["data"]["code"], "INVALID_PARAMS", "{wire}");
        }
        let empty = fx.host.create_session(NewSession {
            session_id: Some(SessionId::default()),
            ..NewSession::default()
        });
        assert_eq!(code(empty), ErrorCode::InvalidParams);
        let wire = answer(
            &mut serve,
            2,
            "session/create",
            json!({"sessionId": "", "workspaceRoot": null}),
        );
        assert_eq!(wire["error"]["data"]["code"], "INVALID_PARAMS");
        assert_eq!(
            fx.host
                .list_approvals(&plan_host::ApprovalFilter::default())
                .unwrap()
                .len(),
            0
        );
    }

    #[test]
    fn verify_and_diff_through_the_host_and_the_dispatcher() {
        let fx = Fixture::new();
        let (first, turn) = fx.pending("s");
        fx.host.reject(&first.id).unwrap();
        fx.clock.advance(10);
        let turn2 = fx
            .host
            .start_turn(&SessionId::from("s"), Origin::Interactive)
            .unwrap();
        assert_ne!(turn, turn2.turn_id);
        let outcomes = fx
            .host
            .tool_calls(
                &SessionId::from("s"),
                &turn2.turn_id,
                vec![submit("c2", "# Revised\n")],
            )
            .unwrap();
        let second = approval_of(&outcomes);

        std::fs::write(fx.workspace.join(".pi/plan/stray.md"), "# stray\n").unwrap();
        let one = fx.host.verify(&VerifyScope::Approval(second.id.clone())).unwrap();
        assert!(one.ok(), "{one:?}");
        assert_eq!(one.artifacts[0].result, ArtifactCheck::Ok);
        let session = fx.host.verify(&VerifyScope::Session("s".into())).unwrap();
        assert!(!session.ok());
        assert_eq!(session.orphans.len(), 1);

        let diff = fx.host.diff(&second.id, None).unwrap();
        assert_eq!(diff.against_approval_id, Some(first.id.clone()));
        assert!(diff.unified.as_deref().unwrap().contains("+# Revised\n"));

        let mut serve = connection(&fx);
        let wire = answer(
            &mut serve,
            3,
            "plan/verify",
            json!({"approvalId": second.id.as_str()}),
        );
        assert_eq!(wire["result"]["ok"], true, "{wire}");
        assert_eq!(wire["result"]["orphans"], json!([]));
        let wire = answer(&mut serve, 4, "plan/verify", json!({"sessionId": "s"}));
        assert_eq!(wire["result"]["ok"], false);
        assert_eq!(wire["result"]["orphans"][0]["path"], ".pi/plan/stray.md");
        let wire = answer(
            &mut serve,
            5,
            "plan/verify",
            json!({"sessionId": "s", "approvalId": second.id.as_str()}),
        );
        assert_eq!(wire["error"]["data"]["code"], "INVALID_PARAMS");
        let wire = answer(
            &mut serve,
            6,
            "plan/diff",
            json!({"approvalId": first.id.as_str()}),
        );
        assert_eq!(
            wire["result"],
            json!({"approvalId": first.id.as_str(), "againstApprovalId": null, "identical": false, "unified": null})
        );
        let wire = answer(&mut serve, 7, "plan/diff", json!({"approvalId": "nope"}));
        assert_eq!(wire["error"]["data"]["code"], "APPROVAL_NOT_FOUND");
    }

    #[test]
    fn a_tool_call_result_has_one_wire_form() {
        // The host's result is the wire's object itself: each kind as JSON.
        let none = json!({"error": null, "approval": null, "command": null});
        let with = |fields: Value| {
            let mut object = none.clone();
            object
                .as_object_mut()
                .unwrap()
                .extend(fields.as_object().unwrap().clone());
            object
        };
        let cases = [
            (
                ToolCallResult::allow("c"),
                with(json!({"callId": "c", "decision": "allow", "hostRun": false})),
            ),
            (
                ToolCallResult::host_run("c"),
                with(json!({"callId": "c", "decision": "allow", "hostRun": true})),
            ),
            (
                ToolCallResult::confirm("c", true),
                with(json!({"callId": "c", "decision": "confirm", "hostRun": true})),
            ),
            (
                ToolCallResult::deny("c", ErrorCode::ToolDeniedInPlan),
                with(
                    json!({"callId": "c", "decision": "deny", "hostRun": false, "error": {
                    "code": "TOOL_DENIED_IN_PLAN", "message": ErrorCode::ToolDeniedInPlan.message()}}),
                ),
            ),
            (
                ToolCallResult::deny_with("c", ErrorCode::ArtifactWriteFailed, Some("disk full".to_owned())),
                with(
                    json!({"callId": "c", "decision": "deny", "hostRun": false, "error": {
                    "code": "ARTIFACT_WRITE_FAILED", "message": "disk full"}}),
                ),
            ),
        ];
        for (result, expected) in cases {
            assert_eq!(serde_json::to_value(&result).unwrap(), expected);
            let back: ToolCallResult = serde_json::from_value(expected).unwrap();
            assert_eq!(back, result);
        }
    }
}

#[test]
fn a_closed_host_answers_host_closed_over_the_wire() {
    let fx = Fixture::new();
    fx.host.close();
    let mut connection = Connection::new(Arc::clone(&fx.host));
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":9}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"session/get","params":{"sessionId":"s1"}}"#,
    ] {
        let reply: Value = serde_json::from_str(&connection.handle_line(line).unwrap()).unwrap();
        assert_eq!(reply["error"]["data"]["code"], "HOST_CLOSED", "{reply}");
    }
}
