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
fn a_settings_file_gives_the_flags_settings_as_its_otel_record() {
    let collector = Collector::start();
    let (dir, db, root) = place();
    let file = dir.path().join("settings.json");
    let settings = json!({"otel": {
        "logsEndpoint": collector.endpoint(),
        "protocol": "http/json",
        "serviceName": "file",
        "headers": ["x-key=v2"],
        "includeContent": true,
    }});
    std::fs::write(&file, settings.to_string()).unwrap();
    let mut serve = Serve::spawn_with_env(
        &db,
        &["--config", file.to_str().unwrap()],
        &[("OTEL_LOGS_EXPORTER", "none")],
    );
    serve.call(
        "initialize",
        json!({"protocolVersion": 9, "clientName": "otel-tests"}),
    );
    plan_and_approve(&mut serve, &root);
    let received = collector.wait_for_seqs(3);
    assert_eq!(received[0].content_type, "application/json");
    assert_eq!(received[0].resource["service.name"], json!("file"));
    assert!(received[0].head.contains("\r\nx-key: v2\r\n"));
    assert_eq!(
        received[0].attribute("plan_checkpoint.plan.title"),
        Some(json!("Split the parser"))
    );
    assert!(serve.close().success());
}

/// A certificate authority made for the test, as a PEM file, and what it
/// issues.
struct Authority {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    der: rustls::pki_types::CertificateDer<'static>,
}

impl Authority {
    fn new(name: &str, dir: &std::path::Path) -> (Authority, std::path::PathBuf) {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().unwrap();
        let certificate = params.self_signed(&key).unwrap();
        let path = dir.join(format!("{name}.pem"));
        std::fs::write(&path, certificate.pem()).unwrap();
        let authority = Authority {
            der: certificate.der().clone(),
            issuer: rcgen::Issuer::new(params, key),
        };
        (authority, path)
    }

    /// A certificate for `names` (none for a client) and its key.
    fn issue(&self, names: &[&str]) -> (rcgen::Certificate, rcgen::KeyPair) {
        let key = rcgen::KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let certificate = rcgen::CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        (certificate, key)
    }
}

/// A TLS collector stand-in for `localhost`, requiring a client
/// certificate from `clients` when given.
fn tls_collector(authority: &Authority, clients: Option<&Authority>) -> Collector {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match clients {
        Some(clients) => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(clients.der.clone()).unwrap();
            builder.with_client_cert_verifier(
                rustls::server::WebPkiClientVerifier::builder_with_provider(
                    std::sync::Arc::new(roots),
                    provider,
                )
                .build()
                .unwrap(),
            )
        }
        None => builder.with_no_client_auth(),
    };
    let (certificate, key) = authority.issue(&["localhost"]);
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    Collector::start_tls(std::sync::Arc::new(
        builder
            .with_single_cert(vec![certificate.der().clone()], key)
            .unwrap(),
    ))
}

#[test]
fn serve_exports_to_an_https_collector_its_platform_or_its_flags_trust() {
    let (dir, db, root) = place();
    let (authority, ca) = Authority::new("collector-ca", dir.path());
    // The platform's roots: rustls-native-certs reads SSL_CERT_FILE.
    let collector = tls_collector(&authority, None);
    let endpoint = format!("https://localhost:{}/v1/logs", collector.address.port());
    let mut serve = Serve::spawn_with_env(
        &db,
        &[],
        &[
            ("OTEL_LOGS_EXPORTER", "otlp"),
            ("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", &endpoint),
            ("SSL_CERT_FILE", ca.to_str().unwrap()),
        ],
    );
    serve.call(
        "initialize",
        json!({"protocolVersion": 9, "clientName": "otel-tests"}),
    );
    plan_and_approve(&mut serve, &root);
    let received = collector.wait_for_seqs(3);
    assert_eq!(
        received.iter().map(|copy| copy.event()).collect::<Vec<_>>(),
        EVENTS
    );
    assert!(serve.close().success());

    // The flags: the collector's CA, and a client certificate for a
    // collector that requires one (mTLS).
    let (clients, _) = Authority::new("clients-ca", dir.path());
    let (client, client_key) = clients.issue(&[]);
    let client_pem = dir.path().join("client.pem");
    let key_pem = dir.path().join("client.key");
    std::fs::write(&client_pem, client.pem()).unwrap();
    std::fs::write(&key_pem, client_key.serialize_pem()).unwrap();
    let collector = tls_collector(&authority, Some(&clients));
    let endpoint = format!("https://localhost:{}/v1/logs", collector.address.port());
    let (_other, db, root) = place();
    let mut serve = Serve::spawn_with_env(
        &db,
        &[
            "--otel-logs-endpoint",
            &endpoint,
            "--otel-certificate",
            ca.to_str().unwrap(),
            "--otel-client-certificate",
            client_pem.to_str().unwrap(),
            "--otel-client-key",
            key_pem.to_str().unwrap(),
        ],
        &[("OTEL_LOGS_EXPORTER", "none")],
    );
    serve.call(
        "initialize",
        json!({"protocolVersion": 9, "clientName": "otel-tests"}),
    );
    plan_and_approve(&mut serve, &root);
    let received = collector.wait_for_seqs(3);
    assert_eq!(
        received.iter().map(|copy| copy.event()).collect::<Vec<_>>(),
        EVENTS
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
            &[
                "--otel-logs-endpoint",
                "https://collector:4318/v1/logs",
                "--otel-certificate",
                "/nonexistent/ca.pem",
            ][..],
            &[][..],
            "OTLP certificate \"/nonexistent/ca.pem\": cannot be read",
        ),
        (
            &[][..],
            &[
                ("OTEL_LOGS_EXPORTER", "otlp"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318"),
                ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/nonexistent/client.key"),
            ][..],
            "an OTLP client key needs its client certificate",
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

/// The host Claude Code's hooks start exports too, with the settings of the
/// per-user file (Claude Code passes its hooks no OTEL_* variable): a plan
/// submitted through the ExitPlanMode hook and rejected from a terminal
/// reaches the collector.
#[test]
fn the_host_claude_codes_hooks_start_exports_with_the_per_user_settings() {
    use std::io::Write as _;
    use std::process::{Command, Stdio};

    let collector = Collector::start();
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let project = base.join("project");
    std::fs::create_dir(&project).unwrap();
    let xdg = base.join("xdg");
    std::fs::create_dir_all(xdg.join("plan-checkpoint")).unwrap();
    std::fs::write(
        xdg.join("plan-checkpoint/audit-export.json"),
        serde_json::json!({
            "otel": {"logsEndpoint": collector.endpoint(), "protocol": "http/json"},
            "environment": {"OTEL_RESOURCE_ATTRIBUTES": "host.name=from-the-file,team=agents"},
        })
        .to_string(),
    )
    .unwrap();
    let command = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_plan-checkpoint"));
        command
            .args(args)
            .current_dir(&project)
            .env("TMPDIR", &base)
            .env("XDG_CONFIG_HOME", &xdg)
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("PLAN_CHECKPOINT_DB")
            .env_remove("PLAN_CHECKPOINT_AUDIT_EXPORT_FILE");
        for (name, _) in std::env::vars() {
            if name.starts_with("OTEL_") {
                command.env_remove(name);
            }
        }
        command
    };
    let plan_file = base.join("config/plans/p.md");
    std::fs::create_dir_all(plan_file.parent().unwrap()).unwrap();
    std::fs::write(&plan_file, "# Plan\n").unwrap();
    let input = serde_json::json!({
        "session_id": "cc-export",
        "transcript_path": base.join("transcript.jsonl"),
        "cwd": project,
        "permission_mode": "plan",
        "hook_event_name": "PreToolUse",
        "tool_name": "ExitPlanMode",
        "tool_input": {"plan": "# Plan\n", "planFilePath": plan_file},
        "tool_use_id": "toolu_exit",
    });
    // The hook runs as Claude Code runs it: a child of the agent, whose
    // environment (the person's) is where the host takes the export's
    // settings from. `timeout` stands in for Claude Code.
    let hook_command = command(&["claude-code", "hook"]);
    let mut agent = Command::new("timeout");
    agent
        .args(["--foreground", "600"])
        .arg(hook_command.get_program())
        .args(hook_command.get_args())
        .current_dir(&project);
    for (name, value) in hook_command.get_envs() {
        match value {
            Some(value) => agent.env(name, value),
            None => agent.env_remove(name),
        };
    }
    let mut hook = agent
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    hook.stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let received = collector.wait_until("the submission", |received| {
        received
            .iter()
            .any(|copy| copy.event() == "plan_checkpoint.plan.submitted")
    });
    let submitted = received
        .iter()
        .find(|copy| copy.event() == "plan_checkpoint.plan.submitted")
        .unwrap();
    assert_eq!(
        submitted.resource.get("host.name"),
        Some(&serde_json::json!("from-the-file"))
    );
    assert_eq!(submitted.resource.get("team"), Some(&serde_json::json!("agents")));
    let id = submitted
        .attribute("plan_checkpoint.approval.id")
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    let rejected = command(&["claude-code", "reject", &id]).output().unwrap();
    assert!(
        rejected.status.success(),
        "{}",
        String::from_utf8_lossy(&rejected.stderr)
    );
    let _ = hook.wait_with_output();
    collector.wait_until("the rejection", |received| {
        received
            .iter()
            .any(|copy| copy.event() == "plan_checkpoint.plan.rejected")
    });
    // End the host this case started, by its pid file.
    let uid = String::from_utf8(Command::new("id").arg("-u").output().unwrap().stdout).unwrap();
    if let Some(pid) = std::fs::read_dir(base.join(format!("plan-checkpoint-{}", uid.trim())))
        .ok()
        .into_iter()
        .flatten()
        .flatten()
        .find(|entry| {
            entry
                .path()
                .extension()
                .is_some_and(|extension| extension == "pid")
        })
        .and_then(|entry| std::fs::read_to_string(entry.path()).ok())
    {
        let _ = Command::new("kill").args(["-KILL", pid.trim()]).status();
    }
}

/// The real OpenTelemetry Collector (core's OTLP receiver and contrib's file
/// exporter, built by `.ci/run` from `.ci/otelcol/builder.yaml` at one
/// release) between `serve` and `audit verify --against`: every record
/// reaches the collector's file once the collector is up, including the
/// ones made while it was down, through protobuf, and the file verifies
/// clean; an approval row edited afterwards is found against the file.
/// `.ci/run` runs it with `--ignored` and PLAN_CHECKPOINT_OTELCOL naming
/// the binary.
#[test]
#[ignore = "needs the real collector: .ci/run builds it and runs this test"]
fn a_real_collector_keeps_every_record_and_its_file_verifies() {
    use std::process::{Command, Stdio};

    let collector_binary = std::env::var_os("PLAN_CHECKPOINT_OTELCOL")
        .expect("PLAN_CHECKPOINT_OTELCOL names the collector .ci/run built");
    let (dir, db, root) = place();
    let base = dir.path().canonicalize().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let file = base.join("collected.jsonl");
    let config = base.join("otelcol.yaml");
    std::fs::write(
        &config,
        format!(
            "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:{port}\n\
             exporters:\n  file:\n    path: {}\n\
             service:\n  telemetry:\n    metrics:\n      level: none\n  pipelines:\n    logs:\n      \
             receivers: [otlp]\n      exporters: [file]\n",
            file.display()
        ),
    )
    .unwrap();
    // The collector is down while the work happens.
    let endpoint = format!("http://127.0.0.1:{port}/v1/logs");
    let mut serve = Serve::spawn(&db, &["--otel-logs-endpoint", &endpoint]);
    serve.call(
        "initialize",
        json!({"protocolVersion": 9, "clientName": "real-collector"}),
    );
    plan_and_approve(&mut serve, &root);
    let mut otelcol = Command::new(&collector_binary)
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let head = plan_storage::Store::open_read_only(&db)
        .unwrap()
        .audit_head()
        .unwrap()
        .0;
    assert!(head >= 3);
    // Until the file holds the head (the exporter retries with back-off).
    let started = std::time::Instant::now();
    loop {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let kept = plan_audit_export::read_collector_file(&text).unwrap();
        if kept.records.iter().any(|record| record.seq == head) {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "the collector's file never held seq {head}"
        );
        std::thread::yield_now();
    }
    assert!(serve.close().success());
    let path = file.to_str().unwrap();
    let clean = crate::support::run(Some(&db), &["audit", "verify", "--against", path]);
    assert_eq!(clean.code, 0, "{}", clean.transcript());
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("UPDATE plan_approvals SET permission_mode = 'auto'", [])
        .unwrap();
    let edited = crate::support::run(Some(&db), &["audit", "verify", "--against", path]);
    assert_eq!(edited.code, 1, "{}", edited.transcript());
    assert!(
        edited
            .stdout
            .contains("permission_mode is auto in the row, ask in the chain"),
        "{}",
        edited.stdout
    );
    let _ = otelcol.kill();
    let _ = otelcol.wait();
}

/// `serve` says the export's first failure and its recovery on stderr, one
/// line each, however many attempts fail in between; `db status` shows the
/// recorded state.
#[test]
fn serve_says_the_first_export_failure_and_the_recovery_once_each() {
    let (_dir, db, root) = place();
    let address = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let endpoint = format!("http://{address}/v1/logs");
    let mut serve = Serve::spawn(&db, &["--otel-logs-endpoint", &endpoint]);
    serve.call(
        "initialize",
        json!({"protocolVersion": 9, "clientName": "otel-tests"}),
    );
    plan_and_approve(&mut serve, &root);
    serve.wait_stderr("audit export failing: cannot reach the collector");
    let status = crate::support::run(Some(&db), &["db", "status", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(value["audit"]["exportState"], "failing", "{}", status.stdout);
    assert!(
        value["audit"]["lastError"]
            .as_str()
            .unwrap()
            .contains("cannot reach")
    );
    let collector = Collector::start_at(address);
    collector.wait_for_seqs(3);
    serve.wait_stderr("audit export recovered after");
    let stderr = serve.stderr();
    assert_eq!(stderr.matches("audit export failing").count(), 1, "{stderr}");
    assert_eq!(stderr.matches("audit export recovered").count(), 1, "{stderr}");
    assert!(serve.close().success());
    let status = crate::support::run(Some(&db), &["db", "status"]);
    assert!(status.stdout.contains("export status:   ok"), "{}", status.stdout);
    assert!(status.stdout.contains("(lag 0)"), "{}", status.stdout);
}
