//! Inspection is really read-only: it runs while `serve` holds the database
//! and submissions are in flight; both keep working and inspection changes
//! nothing.

use serde_json::json;

use crate::client::Serve;
use crate::support::{self, run};

/// Starts a Plan turn in `session` and submits a plan; returns the approval id.
fn submit(serve: &mut Serve, session: &str, title: &str) -> String {
    let turn = serve.call(
        "turn/start",
        json!({"sessionId": session, "prompt": "plan it", "origin": "interactive"}),
    );
    let calls = json!([{"callId": "c1", "name": "SubmitPlan",
        "input": {"title": title, "markdown": format!("# {title}\n"), "question": "Go?"}}]);
    let result = serve.call(
        "turn/toolCalls",
        json!({"sessionId": session, "turnId": turn["turnId"], "calls": calls}),
    );
    result["results"][0]["approval"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn inspection_beside_a_live_serve_changes_nothing_and_both_keep_working() {
    let fixture = support::rich();
    let mut serve = Serve::start(&fixture.db, &[]);
    // A submission in flight: its approval is pending, its Plan turn active.
    let pending = submit(&mut serve, "s-alpha", "Inspect me");

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

    // The live host migrated the database when it opened it: `db migrate`
    // says there is nothing to migrate, exits 0 and writes nothing.
    let migrate = run(Some(&fixture.db), &["db", "migrate"]);
    assert_eq!(
        migrate.code, 0,
        "v10 needs no migration, so no lock is taken: {}",
        migrate.stderr
    );
    assert!(
        migrate.stdout.contains("nothing to migrate"),
        "{}",
        migrate.stdout
    );
    assert_eq!(support::dump_approvals(&fixture.db), before, "db migrate wrote");

    // serve still works: approve the pending plan.
    let approved = serve.call(
        "plan/approve",
        json!({"approvalId": pending, "permissionMode": "auto"}),
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
        json!({"sessionId": "s-gamma", "workspaceRoot": fixture.root, "mode": "plan"}),
    );
    for round in 0..5 {
        let id = submit(&mut serve, "s-gamma", &format!("Round {round}"));
        serve.call("plan/reject", json!({"approvalId": id}));
    }
    inspector.join().unwrap();
    assert!(serve.close().success());
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
