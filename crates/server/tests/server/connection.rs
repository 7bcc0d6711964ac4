//! Integration tests of plan-server's `Connection` as the FFI's
//! `handle_json` uses it: what a line over a bound is answered with.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use plan_host::{Host, HostOptions, Limits};
use plan_server::Connection;
use serde_json::{Value, json};

fn connection(dir: &tempfile::TempDir) -> Connection {
    let options = HostOptions {
        limits: Limits::new(Limits::DEFAULT_APPROVAL_TTL_MS, 64).unwrap(),
        ..HostOptions::default()
    };
    let host = Arc::new(Host::open(dir.path().join("plan.db"), options).unwrap());
    let mut connection = Connection::new(host);
    let init = connection
        .handle_line(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":9}}"#)
        .unwrap();
    assert!(init.contains("\"result\""), "{init}");
    connection
}

fn reply(connection: &mut Connection, line: &str) -> Value {
    serde_json::from_str(&connection.handle_line(line).unwrap()).unwrap()
}

#[test]
fn a_line_over_a_bound_is_answered_with_its_id_when_the_id_came_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut connection = connection(&dir);
    // Strings may decode to the markdown limit plus 1 MiB: 2 MB is over.
    let title = "t".repeat(2 * 1000 * 1000);
    let params = json!({"sessionId": "s1", "turnId": "t1",
        "calls": [{"callId": "c", "name": "SubmitPlan", "input": {"title": title}}]});
    let first = format!(r#"{{"jsonrpc":"2.0","id":"mine","method":"turn/toolCalls","params":{params}}}"#);
    let refused = reply(&mut connection, &first);
    assert_eq!(refused["error"]["data"]["code"], "INVALID_REQUEST");
    assert_eq!(refused["id"], "mine");
    let numbered = first.replace(r#""id":"mine""#, r#""id":41"#);
    assert_eq!(reply(&mut connection, &numbered)["id"], 41);
    // The id after the bound was never read.
    let last = format!(r#"{{"jsonrpc":"2.0","method":"turn/toolCalls","params":{params},"id":"mine"}}"#);
    let refused = reply(&mut connection, &last);
    assert_eq!(refused["error"]["data"]["code"], "INVALID_REQUEST");
    assert_eq!(refused["id"], Value::Null);
    // An id nested in the params is not the request's.
    let nested = format!(r#"{{"jsonrpc":"2.0","params":{{"id":5,"t":"{title}"}},"method":"x","id":6}}"#);
    assert_eq!(reply(&mut connection, &nested)["id"], Value::Null);
}
