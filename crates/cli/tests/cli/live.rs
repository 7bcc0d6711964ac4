//! Inspection is really read-only: it runs while `serve` holds the database
//! and submissions are in flight; both keep working and inspection changes
//! nothing.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use crate::support::{self, run};

struct Serve {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: i64,
}

impl Serve {
    fn spawn(db: &std::path::Path) -> Serve {
        let mut child = support::command()
            .arg("serve")
            .arg("--db")
            .arg(db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Serve {
            child,
            stdin,
            stdout,
            next_id: 1,
        }
    }

    /// Sends one request and returns its `result`, skipping notifications.
    fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let id = self.next_id;
        self.next_id += 1;
        let request = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{request}").unwrap();
        self.stdin.flush().unwrap();
        loop {
            let mut line = String::new();
            assert_ne!(
                self.stdout.read_line(&mut line).unwrap(),
                0,
                "serve closed stdout"
            );
            let message: serde_json::Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                assert!(message["error"].is_null(), "{method} failed: {message}");
                return message["result"].clone();
            }
        }
    }

    fn submit(&mut self, session: &str, title: &str) -> String {
        let turn = self.call(
            "turn/start",
            serde_json::json!({"sessionId": session, "prompt": "plan it", "origin": "interactive"}),
        );
        let turn_id = turn["turnId"].as_str().unwrap().to_owned();
        let calls = serde_json::json!([{"callId": "c1", "name": "SubmitPlan",
            "input": {"title": title, "markdown": format!("# {title}\n"), "question": "Go?"}}]);
        let result = self.call(
            "turn/toolCalls",
            serde_json::json!({"sessionId": session, "turnId": turn_id, "calls": calls}),
        );
        result["results"][0]["approval"]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn finish(mut self) -> i32 {
        drop(self.stdin);
        self.child.wait().unwrap().code().unwrap_or(-1)
    }
}

#[test]
fn inspection_beside_a_live_serve_changes_nothing_and_both_keep_working() {
    let fixture = support::rich();
    let mut serve = Serve::spawn(&fixture.db);
    serve.call("initialize", serde_json::json!({"protocolVersion": 9}));
    // A submission in flight: its approval is pending, its Plan turn active.
    let pending = serve.submit("s-alpha", "Inspect me");

    let before = support::dump_approvals(&fixture.db);
    for args in [
        &["approvals", "list"][..],
        &["approvals", "list", "--json"],
        &["approvals", "show", &pending],
        &["approvals", "cat", &pending],
        &["approvals", "verify", "--all"],
        &["approvals", "export"],
        &["db", "status"],
    ] {
        let result = run(Some(&fixture.db), args);
        assert_eq!(result.code, 0, "{args:?}: {}", result.stderr);
    }
    let shown = run(Some(&fixture.db), &["approvals", "show", &pending]);
    assert!(
        shown.stdout.contains("status:          pending"),
        "{}",
        shown.stdout
    );
    assert_eq!(
        support::dump_approvals(&fixture.db),
        before,
        "inspection changed the database"
    );

    // Migration is a writer: refused while the host holds the database.
    let migrate = run(Some(&fixture.db), &["db", "migrate"]);
    assert_eq!(
        migrate.code, 0,
        "v10 needs no migration, so no lock is taken: {}",
        migrate.stderr
    );

    // serve still works: approve the pending plan.
    let approved = serve.call(
        "plan/approve",
        serde_json::json!({"approvalId": pending, "permissionMode": "auto"}),
    );
    assert_eq!(approved["approval"]["status"], "approved");

    // Submissions and inspection at the same time.
    let db = fixture.db.clone();
    let inspector = std::thread::spawn(move || {
        for _ in 0..15 {
            let listed = run(Some(&db), &["approvals", "list", "--limit", "5"]);
            assert_eq!(listed.code, 0, "{}", listed.stderr);
            let status = run(Some(&db), &["db", "status", "--json"]);
            assert_eq!(status.code, 0, "{}", status.stderr);
        }
    });
    serve.call(
        "session/create",
        serde_json::json!({"sessionId": "s-gamma", "workspaceRoot": fixture.root, "mode": "plan"}),
    );
    for round in 0..5 {
        let id = serve.submit("s-gamma", &format!("Round {round}"));
        serve.call("plan/reject", serde_json::json!({"approvalId": id}));
    }
    inspector.join().unwrap();
    assert_eq!(serve.finish(), 0);
}

#[test]
fn db_migrate_of_a_v8_database_is_refused_while_a_host_holds_it() {
    let (_dir, db) = support::v8();
    // A host migrates on open; take the lock the way a host does.
    let lock = plan_storage::HostLock::acquire(&db).unwrap();
    let result = run(Some(&db), &["db", "migrate"]);
    assert_eq!(result.code, 3, "{}", result.stderr);
    assert!(
        result.stderr.contains("HOST_ALREADY_RUNNING"),
        "{}",
        result.stderr
    );
    drop(lock);
    assert_eq!(run(Some(&db), &["db", "migrate"]).code, 0);
}
