//! `serve` exports the audit as OpenTelemetry expects to be configured:
//! the standard OTEL_* variables, or the --otel-* flags over them, to a
//! collector stand-in on loopback; a configuration it cannot use is a
//! usage error before anything is served.

use serde_json::json;

use crate::client::Serve;
use crate::collector::Collector;

fn plan_and_approve(serve: &mut Serve, root: &str) {
    serve.call(
        "session/create",
        json!({"sessionId": "s1", "workspaceRoot": root, "mode": "plan"}),
    );
    let turn = serve.call(
        "turn/start",
        json!({"sessionId": "s1", "prompt": "do it", "origin": "interactive"}),
    )["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    let results = serve.call(
        "turn/toolCalls",
        json!({"sessionId": "s1", "turnId": turn, "calls": [{"callId": "c1", "name": "SubmitPlan",
            "input": {"title": "Split the parser", "markdown": "# Plan\n", "question": "Go ahead?"}}]}),
    );
    let approval = results["results"][0]["approval"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    serve.call(
        "plan/approve",
        json!({"approvalId": approval, "permissionMode": "ask"}),
    );
}

fn place() -> (tempfile::TempDir, std::path::PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let root = base.join("ws");
    std::fs::create_dir(&root).unwrap();
    (dir, base.join("plan.db"), root.to_str().unwrap().to_owned())
}

const EVENTS: [&str; 3] = [
    "plan_checkpoint.plan.submitted",
    "plan_checkpoint.plan.approved",
    "plan_checkpoint.session.mode_changed",
];

#[test]
fn the_standard_otel_variables_turn_export_on() {
    let collector = Collector::start();
    let (_dir, db, root) = place();
    let base = format!("http://{}", collector.address);
    let mut serve = Serve::spawn_with_env(
        &db,
        &[],
        &[
            ("OTEL_LOGS_EXPORTER", "otlp"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &base),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20t0ken,x-tenant=ci",
            ),
            ("OTEL_SERVICE_NAME", "checkpoint-ci"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=ci,service.name=ignored",
            ),
        ],
    );
    serve.call(
        "initialize",
        json!({"protocolVersion": 9, "clientName": "otel-tests"}),
    );
    plan_and_approve(&mut serve, &root);
    let received = collector.wait_for_seqs(3);
    let events: Vec<String> = received.iter().map(|copy| copy.event()).collect();
    assert_eq!(events, EVENTS);
    // The decision came from serve's own client, over JSON-RPC.
    let approved = received
        .iter()
        .find(|copy| copy.event() == "plan_checkpoint.plan.approved")
        .unwrap();
    assert_eq!(approved.attribute("plan_checkpoint.channel"), Some(json!("rpc")));
    for copy in &received {
        assert_eq!(copy.content_type, "application/json");
        assert_eq!(copy.resource["service.name"], json!("checkpoint-ci"));
        assert_eq!(copy.resource["deployment.environment"], json!("ci"));
        assert_eq!(copy.resource["plan_checkpoint.workspace.root"], json!(root));
        assert!(
            copy.head.contains("\r\nauthorization: Bearer t0ken\r\n"),
            "{}",
            copy.head
        );
        assert!(copy.head.contains("\r\nx-tenant: ci\r\n"), "{}", copy.head);
    }
    assert!(serve.close().success());
}

#[test]
fn the_flags_turn_export_on_and_say_what_is_exported() {
    let collector = Collector::start();
    let (_dir, db, root) = place();
    let endpoint = collector.endpoint();
    let mut serve = Serve::spawn_with_env(
        &db,
        &[
            "--otel-logs-endpoint",
            &endpoint,
            "--otel-protocol",
            "http/protobuf",
            "--otel-service-name",
            "flags",
            "--otel-header",
            "x-key=v1",
            "--otel-include-content",
        ],
        // Export stays off by the variables; the flags alone turn it on.
        &[("OTEL_LOGS_EXPORTER", "none")],
    );
    serve.call(
        "initialize",
        json!({"protocolVersion": 9, "clientName": "otel-tests"}),
    );
    plan_and_approve(&mut serve, &root);
    let received = collector.wait_for_seqs(3);
    assert_eq!(received[0].content_type, "application/x-protobuf");
    assert_eq!(received[0].resource["service.name"], json!("flags"));
    assert!(received[0].head.contains("\r\nx-key: v1\r\n"));
    assert_eq!(
        received[0].attribute("plan_checkpoint.plan.title"),
        Some(json!("Split the parser"))
    );
    assert!(serve.close().success());
}

#[test]
fn an_unusable_export_configuration_is_a_usage_error() {
    for (args, env, needle) in [
        (
            &["--otel-protocol", "http/json"][..],
            &[][..],
            "need a logs endpoint",
        ),
        (
            &["--otel-logs-endpoint", "https://collector:4318/v1/logs"][..],
            &[][..],
            "https is not supported",
        ),
        (
            &[
                "--otel-logs-endpoint",
                "http://127.0.0.1:4318/v1/logs",
                "--otel-protocol",
                "grpc",
            ][..],
            &[][..],
            "use http/protobuf or http/json",
        ),
        (&[][..], &[("OTEL_LOGS_EXPORTER", "console")][..], "only `otlp`"),
        (
            &[][..],
            &[
                ("OTEL_LOGS_EXPORTER", "otlp"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ][..],
            "grpc",
        ),
    ] {
        let (_dir, db, _) = place();
        let mut serve = Serve::spawn_with_env(&db, args, env);
        let status = serve.wait();
        assert_eq!(status.code(), Some(2), "{args:?} {env:?}");
        // The reader of stderr may still be catching up with the exit.
        serve.wait_stderr(needle);
        assert!(serve.stderr().contains("INVALID_PARAMS"), "{}", serve.stderr());
    }
}

#[test]
fn an_upgraded_database_exports_its_history_numbered_once() {
    let collector = Collector::start();
    let (_dir, db) = crate::support::v8();
    let endpoint = collector.endpoint();
    let serve = Serve::spawn_with_env(
        &db,
        &["--otel-logs-endpoint", &endpoint, "--otel-protocol", "http/json"],
        &[],
    );
    // The first host numbers the v8 history (6 approvals: each submitted
    // and decided, expired or interrupted) before anything else happens.
    let received = collector.wait_for_seqs(12);
    let seqs: Vec<u64> = received.iter().map(|record| record.seq()).collect();
    assert_eq!(seqs, (1..=12).collect::<Vec<_>>());
    assert!(
        received
            .iter()
            .all(|record| record.attribute("plan_checkpoint.audit.backfilled") == Some(json!(true)))
    );
    assert_eq!(received[0].event(), "plan_checkpoint.plan.submitted");
    assert_eq!(
        received[0].attribute("plan_checkpoint.approval.id"),
        Some(json!("pa-pending"))
    );
    assert!(serve.close().success());
    let verified = crate::support::run(Some(&db), &["audit", "verify"]);
    assert_eq!(verified.code, 0, "{}", verified.transcript());
    assert_eq!(verified.stdout, "audit chain: 12 records up to seq 12 verified\n");
    // A second host numbers nothing again.
    let serve = Serve::spawn(&db, &[]);
    assert!(serve.close().success());
    let again = crate::support::run(Some(&db), &["audit", "verify"]);
    assert_eq!(again.stdout, "audit chain: 12 records up to seq 12 verified\n");
}
