//! The exporter crate's own rules: the standard OTEL_* variables read as
//! OpenTelemetry SDKs read them, host options over them, and a collector's
//! file read back (and refused when it is not OTLP/JSON).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::time::Duration;

use plan_audit_export::{ConfigError, ExportConfig, ExportOverrides, Protocol, parse_collector_lines};

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

#[test]
fn export_is_off_unless_otel_logs_exporter_names_otlp() {
    assert_eq!(ExportConfig::from_env(env(&[])), Ok(None));
    assert_eq!(
        ExportConfig::from_env(env(&[("OTEL_LOGS_EXPORTER", "none")])),
        Ok(None)
    );
    assert_eq!(
        ExportConfig::from_env(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")])),
        Ok(None)
    );
    assert_eq!(
        ExportConfig::from_env(env(&[("OTEL_LOGS_EXPORTER", "console")])),
        Err(ConfigError::UnsupportedExporter("console".to_owned()))
    );
    let on = ExportConfig::from_env(env(&[("OTEL_LOGS_EXPORTER", "console, otlp")]))
        .unwrap()
        .unwrap();
    assert_eq!(on.endpoint, "http://localhost:4318/v1/logs");
    assert_eq!(on.protocol, Protocol::HttpProtobuf, "OTel's default");
    assert_eq!(on.service_name, "plan-checkpoint");
    assert!(!on.include_content);
}

#[test]
fn every_standard_variable_is_read() {
    let config = ExportConfig::from_env(env(&[
        ("OTEL_LOGS_EXPORTER", "otlp"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "Authorization=Basic%20dXNlcg==, x-a=1",
        ),
        ("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "x-a=2"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
        ("OTEL_SERVICE_NAME", "agents"),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "service.name=overridden,team=platform,deployment.environment=prod",
        ),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(config.endpoint, "http://collector:4318/v1/logs");
    assert_eq!(config.protocol, Protocol::HttpJson);
    assert_eq!(
        config.headers,
        [
            ("Authorization".to_owned(), "Basic dXNlcg==".to_owned()),
            ("x-a".to_owned(), "2".to_owned())
        ]
    );
    assert_eq!(config.timeout, Duration::from_millis(2500));
    assert_eq!(config.service_name, "agents");
    assert_eq!(
        config.resource_attributes,
        [
            ("team".to_owned(), "platform".to_owned()),
            ("deployment.environment".to_owned(), "prod".to_owned())
        ]
    );
    // The signal's own endpoint is taken as it is, and its own protocol wins.
    let logs = ExportConfig::from_env(env(&[
        ("OTEL_LOGS_EXPORTER", "otlp"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:1"),
        ("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "http://[::1]:9999/custom"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "http/protobuf"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(logs.endpoint, "http://[::1]:9999/custom");
    assert_eq!(logs.protocol, Protocol::HttpProtobuf);
}

#[test]
fn unusable_variables_are_refused_with_what_is_wrong() {
    let on = |extra: (&str, &str)| ExportConfig::from_env(env(&[("OTEL_LOGS_EXPORTER", "otlp"), extra]));
    assert_eq!(
        on(("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")),
        Err(ConfigError::UnsupportedProtocol("grpc".to_owned()))
    );
    assert!(matches!(
        on(("OTEL_EXPORTER_OTLP_ENDPOINT", "https://secure:4318")),
        Err(ConfigError::InvalidEndpoint { .. })
    ));
    assert!(matches!(
        on(("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")),
        Err(ConfigError::InvalidEndpoint { .. })
    ));
    assert!(matches!(
        on(("OTEL_EXPORTER_OTLP_HEADERS", "no-equals-sign")),
        Err(ConfigError::InvalidList { .. })
    ));
    assert!(matches!(
        on(("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")),
        Err(ConfigError::InvalidTimeout { .. })
    ));
}

#[test]
fn host_options_apply_over_the_variables() {
    let overrides = ExportOverrides {
        logs_endpoint: Some("http://127.0.0.1:1/v1/logs".to_owned()),
        protocol: Some("http/json".to_owned()),
        headers: vec!["x-b=1".to_owned()],
        service_name: Some("option".to_owned()),
        include_content: true,
    };
    let config = overrides
        .resolve(env(&[
            ("OTEL_LOGS_EXPORTER", "otlp"),
            ("OTEL_SERVICE_NAME", "variable"),
        ]))
        .unwrap()
        .unwrap();
    assert_eq!(config.endpoint, "http://127.0.0.1:1/v1/logs");
    assert_eq!(config.protocol, Protocol::HttpJson);
    assert_eq!(config.service_name, "option");
    assert_eq!(config.headers, [("x-b".to_owned(), "1".to_owned())]);
    assert!(config.include_content);
    assert_eq!(ExportOverrides::default().resolve(env(&[])), Ok(None));
    let without_endpoint = ExportOverrides {
        include_content: true,
        ..ExportOverrides::default()
    };
    assert_eq!(without_endpoint.resolve(env(&[])), Err(ConfigError::NoEndpoint));
}

#[test]
fn a_collector_file_is_read_back_and_other_logs_are_skipped() {
    let line = r#"{"resourceLogs":[{"resource":{},"scopeLogs":[{"logRecords":[
        {"timeUnixNano":"5000000","attributes":[
            {"key":"plan_checkpoint.audit.seq","value":{"intValue":"1"}},
            {"key":"plan_checkpoint.audit.hash","value":{"stringValue":"abc"}},
            {"key":"plan_checkpoint.plan.title","value":{"stringValue":"confidential"}},
            {"key":"event.name","value":{"stringValue":"plan_checkpoint.plan.submitted"}}]},
        {"timeUnixNano":"1","attributes":[{"key":"other","value":{"boolValue":true}}]}]}]}]}"#
        .replace('\n', "");
    let records = parse_collector_lines(&format!("{line}\n\n{line}\n")).unwrap();
    assert_eq!(records.len(), 2, "both copies, the foreign record skipped");
    assert_eq!(records[0].seq, 1);
    assert_eq!(records[0].hash, "abc");
    // Content is outside the canonical bytes.
    assert_eq!(
        String::from_utf8(records[0].canonical.clone()).unwrap(),
        r#"{"attributes":{"event.name":"plan_checkpoint.plan.submitted","plan_checkpoint.audit.seq":1},"timeUnixMs":5}"#
    );
    let error = parse_collector_lines("{}\n").unwrap_err();
    assert_eq!(error.line, 1);
    let missing_hash = r#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"1","attributes":[{"key":"plan_checkpoint.audit.seq","value":{"intValue":"7"}}]}]}]}]}"#;
    assert!(
        parse_collector_lines(missing_hash)
            .unwrap_err()
            .reason
            .contains("seq 7")
    );
}

/// Records of two workspaces with every kind of attribute value: text,
/// integers (negative and past 32 bits), booleans, and content.
fn sample_records() -> Vec<plan_storage::AuditRecord> {
    let record = |seq: u64, root: Option<&str>, extra: &[(&str, serde_json::Value)]| {
        let mut attributes = std::collections::BTreeMap::new();
        attributes.insert(
            "event.name".to_owned(),
            serde_json::json!("plan_checkpoint.command.ended"),
        );
        attributes.insert("plan_checkpoint.audit.seq".to_owned(), serde_json::json!(seq));
        attributes.insert("session.id".to_owned(), serde_json::json!("s-ü ✓"));
        for (key, value) in extra {
            attributes.insert((*key).to_owned(), value.clone());
        }
        let mut content = std::collections::BTreeMap::new();
        content.insert(
            "plan_checkpoint.command.text".to_owned(),
            "cargo test -- \"é\"".to_owned(),
        );
        plan_storage::AuditRecord {
            seq,
            hash: format!("{seq:064x}"),
            entry_id: i64::try_from(seq).unwrap(),
            event: "plan_checkpoint.command.ended".to_owned(),
            time_unix_ms: 1_800_000_000_000 + i64::try_from(seq).unwrap(),
            attributes,
            content,
            workspace_root: root.map(str::to_owned),
        }
    };
    vec![
        record(
            1,
            Some("/w/one"),
            &[("plan_checkpoint.command.exit_code", serde_json::json!(-1))],
        ),
        record(
            2,
            None,
            &[("plan_checkpoint.command.truncated", serde_json::json!(true))],
        ),
        record(
            3,
            Some("/w/one"),
            &[(
                "plan_checkpoint.command.stdout_bytes",
                serde_json::json!(5_000_000_000_i64),
            )],
        ),
    ]
}

#[test]
fn both_encodings_are_the_same_request_to_opentelemetry_protos_own_types() {
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use prost::Message as _;

    let records = sample_records();
    let mut config = ExportConfig::new("http://127.0.0.1:4318/v1/logs");
    config.include_content = true;
    config.resource_attributes = vec![("deployment.environment".to_owned(), "ci".to_owned())];
    let from_protobuf = ExportLogsServiceRequest::decode(
        plan_audit_export::encode_protobuf(&records, &config, "box").as_slice(),
    )
    .unwrap();
    let from_json: ExportLogsServiceRequest =
        serde_json::from_slice(&plan_audit_export::encode_json(&records, &config, "box")).unwrap();
    assert_eq!(from_protobuf, from_json, "the two encodings say the same thing");

    // And what they say is what the spec lists, read through the official
    // types (field numbers and JSON names are theirs, not this crate's).
    let text = |value: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>| match value
        .as_ref()
        .and_then(|any| any.value.clone())
    {
        Some(Any::StringValue(text)) => text,
        other => panic!("not text: {other:?}"),
    };
    assert_eq!(from_protobuf.resource_logs.len(), 2, "grouped by workspace");
    let first = &from_protobuf.resource_logs[0];
    let resource: Vec<(String, String)> = first
        .resource
        .as_ref()
        .unwrap()
        .attributes
        .iter()
        .map(|kv| (kv.key.clone(), text(&kv.value)))
        .collect();
    assert_eq!(
        resource,
        [
            ("service.name".to_owned(), "plan-checkpoint".to_owned()),
            ("host.name".to_owned(), "box".to_owned()),
            ("plan_checkpoint.workspace.root".to_owned(), "/w/one".to_owned()),
            ("deployment.environment".to_owned(), "ci".to_owned()),
        ]
    );
    let scope = &first.scope_logs[0];
    assert_eq!(scope.scope.as_ref().unwrap().name, "plan-checkpoint");
    let logs = &scope.log_records;
    assert_eq!(logs.len(), 2);
    let log = &logs[1];
    assert_eq!(log.time_unix_nano, 1_800_000_000_003 * 1_000_000);
    assert_eq!(log.observed_time_unix_nano, log.time_unix_nano);
    assert_eq!(log.severity_number, 9);
    assert_eq!(log.severity_text, "INFO");
    assert_eq!(log.event_name, "plan_checkpoint.command.ended");
    assert_eq!(text(&log.body), "plan_checkpoint.command.ended");
    let attribute = |log: &opentelemetry_proto::tonic::logs::v1::LogRecord, key: &str| {
        log.attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.as_ref())
            .and_then(|value| value.value.clone())
    };
    assert_eq!(
        attribute(log, "plan_checkpoint.command.stdout_bytes"),
        Some(Any::IntValue(5_000_000_000))
    );
    assert_eq!(
        attribute(log, "plan_checkpoint.audit.seq"),
        Some(Any::IntValue(3))
    );
    assert_eq!(
        attribute(log, "plan_checkpoint.audit.hash"),
        Some(Any::StringValue(format!("{:064x}", 3)))
    );
    assert_eq!(
        attribute(log, "plan_checkpoint.command.text"),
        Some(Any::StringValue("cargo test -- \"é\"".to_owned()))
    );
    assert_eq!(
        attribute(log, "session.id"),
        Some(Any::StringValue("s-ü ✓".to_owned()))
    );
    assert_eq!(
        attribute(&logs[0], "plan_checkpoint.command.exit_code"),
        Some(Any::IntValue(-1))
    );
    let unbound = &from_protobuf.resource_logs[1].scope_logs[0].log_records[0];
    assert_eq!(
        attribute(unbound, "plan_checkpoint.command.truncated"),
        Some(Any::BoolValue(true))
    );
}
