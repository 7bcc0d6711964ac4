//! The exporter crate's own rules: the standard OTEL_* variables read as
//! OpenTelemetry SDKs read them, host options over them, a collector's
//! file read back (and refused when it is not OTLP/JSON), and https:
//! records reach a TLS collector stand-in on loopback (certificates made
//! here) exactly as they reach a plain one, and only when its certificate
//! is trusted and names it, and, for mTLS, when the client's is accepted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use plan_audit_export::{
    ConfigError, ExportConfig, ExportOverrides, ExportStartError, ExportStatus, Exporter, Protocol,
    parse_collector_lines,
};
use plan_core::{Effect, PermissionMode, Session, ToolAuditEntry, ToolAuditKind};
use plan_storage::{AuditRecord, Store};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection, StreamOwned};

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

#[test]
fn otel_sdk_disabled_turns_the_variables_off_and_leaves_explicit_options() {
    let on = [
        ("OTEL_LOGS_EXPORTER", "otlp"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
    ];
    for disabled in ["true", "TRUE", " True "] {
        let mut pairs = on.to_vec();
        pairs.push(("OTEL_SDK_DISABLED", disabled));
        assert_eq!(ExportConfig::from_env(env(&pairs)), Ok(None), "{disabled:?}");
        // A host option is the embedder's own choice: it still applies.
        let overrides = ExportOverrides {
            logs_endpoint: Some("http://127.0.0.1:9/v1/logs".to_owned()),
            ..ExportOverrides::default()
        };
        let resolved = overrides.resolve(env(&pairs)).unwrap().unwrap();
        assert_eq!(resolved.endpoint, "http://127.0.0.1:9/v1/logs");
    }
    for enabled in ["false", "0", ""] {
        let mut pairs = on.to_vec();
        pairs.push(("OTEL_SDK_DISABLED", enabled));
        assert!(
            ExportConfig::from_env(env(&pairs)).unwrap().is_some(),
            "{enabled:?}"
        );
    }
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
        on(("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector:4318")),
        Err(ConfigError::InvalidEndpoint { .. })
    ));
    assert!(matches!(
        on(("OTEL_EXPORTER_OTLP_ENDPOINT", "https://not a name:4318")),
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
        ..ExportOverrides::default()
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
            content_notes: std::collections::BTreeMap::new(),
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

fn box_origin() -> plan_audit_export::Origin {
    plan_audit_export::Origin {
        host_name: "box".to_owned(),
        database_id: None,
    }
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
        plan_audit_export::encode_protobuf(&records, &config, &box_origin()).as_slice(),
    )
    .unwrap();
    let from_json: ExportLogsServiceRequest =
        serde_json::from_slice(&plan_audit_export::encode_json(&records, &config, &box_origin())).unwrap();
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
            ("deployment.environment".to_owned(), "ci".to_owned()),
            ("plan_checkpoint.workspace.root".to_owned(), "/w/one".to_owned()),
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

// --- https ------------------------------------------------------------

/// A certificate authority made for one test.
struct Authority {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
    der: CertificateDer<'static>,
}

/// A certificate the authority issued, and its key.
struct Leaf {
    pem: String,
    key_pem: String,
    der: CertificateDer<'static>,
    key_der: Vec<u8>,
}

impl Authority {
    fn new(name: &str) -> Authority {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let certificate = params.self_signed(&key).unwrap();
        Authority {
            pem: certificate.pem(),
            der: certificate.der().clone(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf for these names (DNS names or IP addresses; none for a client).
    fn issue(&self, names: &[&str]) -> Leaf {
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let key = KeyPair::generate().unwrap();
        let certificate = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        Leaf {
            pem: certificate.pem(),
            key_pem: key.serialize_pem(),
            der: certificate.der().clone(),
            key_der: key.serialize_der(),
        }
    }

    fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.der.clone()).unwrap();
        roots
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A collector's TLS configuration: its certificate, and the authority its
/// clients' certificates must come from (mTLS), if any.
fn server_config(leaf: &Leaf, clients: Option<&Authority>) -> Arc<ServerConfig> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match clients {
        Some(authority) => builder.with_client_cert_verifier(
            WebPkiClientVerifier::builder_with_provider(Arc::new(authority.roots()), provider())
                .build()
                .unwrap(),
        ),
        None => builder.with_no_client_auth(),
    };
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf.key_der.clone()));
    Arc::new(builder.with_single_cert(vec![leaf.der.clone()], key).unwrap())
}

/// What the stand-in saw on one connection.
#[derive(Debug)]
enum Seen {
    /// A request it accepted (answered 200).
    Request {
        content_type: String,
        body: Vec<u8>,
        /// The SNI the client sent (TLS only).
        server_name: Option<String>,
    },
    /// A connection whose TLS handshake failed, and why.
    Refused(String),
}

/// An OTLP/HTTP collector stand-in on 127.0.0.1, plain or TLS: it answers
/// 200 to every request and reports each connection on a channel before it
/// answers. It stops when dropped.
struct StandIn {
    address: SocketAddr,
    seen: Receiver<Seen>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StandIn {
    fn start(tls: Option<Arc<ServerConfig>>) -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let (sender, seen) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    if let Ok(stream) = stream {
                        serve(stream, tls.as_ref(), &sender);
                    }
                }
            })
        };
        StandIn {
            address,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn endpoint(&self, scheme: &str, host: &str) -> String {
        format!("{scheme}://{host}:{}/v1/logs", self.address.port())
    }

    /// The next connection it saw; the bound is liveness, not speed.
    fn next(&self) -> Seen {
        self.seen
            .recv_timeout(Duration::from_secs(60))
            .expect("the stand-in saw no connection within 60 s")
    }

    /// The next connection, which must have been a refused handshake.
    fn next_refused(&self) -> String {
        match self.next() {
            Seen::Refused(reason) => reason,
            request @ Seen::Request { .. } => panic!("expected a refused handshake, got {request:?}"),
        }
    }

    /// Every connection seen so far (after the exporter said it is done).
    fn drain(&self) -> Vec<Seen> {
        self.seen.try_iter().collect()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.address);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(mut tcp: TcpStream, tls: Option<&Arc<ServerConfig>>, seen: &Sender<Seen>) {
    tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let Some(config) = tls else {
        if let Some((content_type, body)) = exchange(&mut tcp) {
            let _ = seen.send(Seen::Request {
                content_type,
                body,
                server_name: None,
            });
            answer(&mut tcp);
        }
        return;
    };
    let mut connection = ServerConnection::new(Arc::clone(config)).unwrap();
    while connection.is_handshaking() {
        if let Err(error) = connection.complete_io(&mut tcp) {
            let _ = seen.send(Seen::Refused(error.to_string()));
            return;
        }
    }
    let server_name = connection.server_name().map(str::to_owned);
    let mut stream = StreamOwned::new(connection, tcp);
    match exchange(&mut stream) {
        Some((content_type, body)) => {
            let _ = seen.send(Seen::Request {
                content_type,
                body,
                server_name,
            });
            answer(&mut stream);
            stream.conn.send_close_notify();
            let _ = stream.flush();
        }
        None => {
            let _ = seen.send(Seen::Refused("the request did not arrive".to_owned()));
        }
    }
}

/// Reads one `POST /v1/logs` request: its content type and body.
fn exchange(stream: &mut impl Read) -> Option<(String, Vec<u8>)> {
    let mut data = Vec::new();
    let mut buffer = [0_u8; 8192];
    let header_end = loop {
        if let Some(end) = data.windows(4).position(|window| window == b"\r\n\r\n") {
            break end + 4;
        }
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return None,
            Ok(read) => data.extend_from_slice(&buffer[..read]),
        }
    };
    let head = String::from_utf8_lossy(&data[..header_end]).to_string();
    assert!(head.starts_with("POST /v1/logs HTTP/1.1\r\n"), "{head}");
    let header = |name: &str| {
        head.lines()
            .find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| value.trim().to_owned())
            })
            .unwrap_or_default()
    };
    let length: usize = header("content-length").parse().unwrap();
    while data.len() < header_end + length {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return None,
            Ok(read) => data.extend_from_slice(&buffer[..read]),
        }
    }
    Some((
        header("content-type"),
        data[header_end..header_end + length].to_vec(),
    ))
}

fn answer(stream: &mut impl Write) {
    let _ = stream.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
    );
    let _ = stream.flush();
}

const NOW: i64 = 1_800_000_000_000;
const FACTS: u64 = 7;

/// A database with `FACTS` audited facts (tool confirmations of one
/// session), the same bytes each time it is made.
fn history(dir: &Path) -> PathBuf {
    let database = dir.join("plan.db");
    let (mut store, _) = Store::open(&database).unwrap();
    store
        .create_session(&Session::new("s1", Some("/w/s1".to_owned())), NOW)
        .unwrap();
    for index in 0..FACTS {
        let kind = if index % 2 == 0 {
            ToolAuditKind::ConfirmRequested
        } else {
            ToolAuditKind::Confirmed
        };
        let entry = ToolAuditEntry {
            kind,
            session_id: "s1".into(),
            turn_id: "t1".into(),
            execution_id: None,
            call_id: format!("c{}", index / 2).into(),
            tool: Some("Bash".to_owned()),
            permission_mode: Some(PermissionMode::Ask),
            error_code: None,
            at: NOW + index as i64,
        };
        store
            .apply(&[Effect::RecordToolAudit(entry)], NOW + index as i64)
            .unwrap();
    }
    database
}

fn records(database: &Path) -> Vec<AuditRecord> {
    Store::open_read_only(database).unwrap().audit_records().unwrap()
}

fn cursor(database: &Path) -> u64 {
    Store::open_read_only(database)
        .unwrap()
        .audit_cursor()
        .unwrap()
        .seq
}

fn config(endpoint: String, protocol: Protocol) -> ExportConfig {
    let mut config = ExportConfig::new(endpoint);
    config.protocol = protocol;
    config.batch_size = 3;
    config.min_backoff = Duration::from_millis(20);
    config.max_backoff = Duration::from_millis(200);
    config
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

type Accepted = Vec<(String, Vec<u8>, Option<String>)>;

/// A stand-in (TLS when `tls` is given) and a configuration for it: the
/// endpoint at `host`, `protocol`, what `configure` adds.
fn stand_in(
    tls: Option<&Arc<ServerConfig>>,
    host: &str,
    protocol: Protocol,
    configure: impl FnOnce(&mut ExportConfig),
) -> (StandIn, ExportConfig) {
    let stand_in = StandIn::start(tls.cloned());
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut config = config(stand_in.endpoint(scheme, host), protocol);
    configure(&mut config);
    (stand_in, config)
}

/// Exports everything of `database` to a fresh stand-in and returns the
/// requests it accepted (content type, body, SNI), in order.
fn export_all(
    database: &Path,
    tls: Option<&Arc<ServerConfig>>,
    host: &str,
    protocol: Protocol,
    configure: impl FnOnce(&mut ExportConfig),
) -> Accepted {
    let (stand_in, config) = stand_in(tls, host, protocol, configure);
    let exporter = Exporter::start(database, config).unwrap();
    assert!(
        exporter.wait_exported(FACTS, Duration::from_secs(60)),
        "{:?}",
        exporter.status()
    );
    drop(exporter);
    assert_eq!(cursor(database), FACTS);
    stand_in
        .drain()
        .into_iter()
        .map(|seen| match seen {
            Seen::Request {
                content_type,
                body,
                server_name,
            } => (content_type, body, server_name),
            refused @ Seen::Refused(_) => panic!("{refused:?}"),
        })
        .collect()
}

/// Starts exporting `database` to a fresh TLS stand-in that refuses the
/// handshake: returns why it refused the first, and the exporter's status
/// once it tried again (after a back-off, as for a collector that is
/// down). Nothing was accepted: the cursor did not move.
fn refused(
    database: &Path,
    tls: &Arc<ServerConfig>,
    host: &str,
    configure: impl FnOnce(&mut ExportConfig),
) -> (String, ExportStatus) {
    let (stand_in, config) = stand_in(Some(tls), host, Protocol::HttpJson, configure);
    let exporter = Exporter::start(database, config).unwrap();
    let reason = stand_in.next_refused();
    // The second attempt comes after the first failure was recorded.
    stand_in.next_refused();
    let status = exporter.status();
    drop(exporter);
    assert_eq!(status.exported_seq, 0);
    assert_eq!(cursor(database), 0, "nothing accepted, the cursor stays");
    (reason, status)
}

fn bodies(requests: &Accepted) -> Vec<Vec<u8>> {
    requests.iter().map(|(_, body, _)| body.clone()).collect()
}

/// The seqs and hashes of OTLP/JSON request bodies.
fn seqs_and_hashes(bodies: &[Vec<u8>]) -> Vec<(u64, String)> {
    let lines: String = bodies
        .iter()
        .map(|body| format!("{}\n", String::from_utf8(body.clone()).unwrap()))
        .collect();
    parse_collector_lines(&lines)
        .unwrap()
        .into_iter()
        .map(|record| (record.seq, record.hash))
        .collect()
}

#[test]
fn records_reach_an_https_collector_exactly_as_they_reach_an_http_one() {
    let files = tempfile::tempdir().unwrap();
    let authority = Authority::new("collector CA");
    let ca = write(files.path(), "ca.pem", &authority.pem);
    let tls = server_config(&authority.issue(&["localhost", "127.0.0.1"]), None);
    // A DNS name (sent as SNI) with JSON, an IP address with protobuf.
    for (host, protocol, sni) in [
        ("localhost", Protocol::HttpJson, Some("localhost".to_owned())),
        ("127.0.0.1", Protocol::HttpProtobuf, None),
    ] {
        let (plain_dir, secure_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let over_http = export_all(&history(plain_dir.path()), None, "127.0.0.1", protocol, |_| {});
        let database = history(secure_dir.path());
        let over_https = export_all(&database, Some(&tls), host, protocol, |config| {
            config.certificate = Some(ca.clone());
        });
        assert_eq!(over_https.len(), 3, "{FACTS} records, 3 a request");
        for (content_type, _, server_name) in &over_https {
            assert_eq!(content_type, protocol.content_type());
            assert_eq!(server_name, &sni, "{host}");
        }
        // The same bytes as over http: decoded the same.
        assert_eq!(bodies(&over_https), bodies(&over_http), "{host}");
        if protocol == Protocol::HttpJson {
            let expected: Vec<(u64, String)> = records(&database)
                .into_iter()
                .map(|record| (record.seq, record.hash))
                .collect();
            assert_eq!(seqs_and_hashes(&bodies(&over_https)), expected);
        }
    }
}

#[test]
fn an_untrusted_collector_gets_nothing_and_everything_once_its_ca_is_configured() {
    let files = tempfile::tempdir().unwrap();
    let authority = Authority::new("collector CA");
    let tls = server_config(&authority.issue(&["localhost"]), None);
    let database = history(files.path());
    // The platform's roots do not know the test's authority.
    let (reason, status) = refused(&database, &tls, "localhost", |_| {});
    assert!(reason.contains("UnknownCA"), "{reason}");
    assert!(status.failures >= 1);
    let error = status.last_error.unwrap();
    assert!(
        error.contains("TLS handshake") && error.contains("UnknownIssuer"),
        "{error}"
    );
    let ca = write(files.path(), "ca.pem", &authority.pem);
    let requests = export_all(&database, Some(&tls), "localhost", Protocol::HttpJson, |config| {
        config.certificate = Some(ca);
    });
    let seqs: Vec<u64> = seqs_and_hashes(&bodies(&requests))
        .into_iter()
        .map(|(seq, _)| seq)
        .collect();
    assert_eq!(seqs, (1..=FACTS).collect::<Vec<_>>(), "nothing lost");
}

#[test]
fn a_certificate_for_another_name_is_refused() {
    let files = tempfile::tempdir().unwrap();
    let authority = Authority::new("collector CA");
    let ca = write(files.path(), "ca.pem", &authority.pem);
    let tls = server_config(&authority.issue(&["collector.example"]), None);
    let database = history(files.path());
    for host in ["localhost", "127.0.0.1"] {
        let (_, status) = refused(&database, &tls, host, |config| {
            config.certificate = Some(ca.clone());
        });
        let error = status.last_error.unwrap();
        assert!(error.contains("not valid for name"), "{host}: {error}");
    }
}

#[test]
fn a_collector_that_requires_a_client_certificate_accepts_the_configured_one() {
    let files = tempfile::tempdir().unwrap();
    let dir = files.path();
    let authority = Authority::new("collector CA");
    let clients = Authority::new("clients' CA");
    let tls = server_config(&authority.issue(&["localhost"]), Some(&clients));
    let database = history(dir);
    let ca = write(dir, "ca.pem", &authority.pem);
    // No client certificate, then one from an authority the collector does
    // not trust: refused, nothing accepted.
    let (reason, _) = refused(&database, &tls, "localhost", |config| {
        config.certificate = Some(ca.clone());
    });
    assert!(reason.contains("no certificates"), "{reason}");
    let stranger = Authority::new("another CA").issue(&[]);
    let (reason, _) = refused(&database, &tls, "localhost", |config| {
        config.certificate = Some(ca.clone());
        config.client_certificate = Some(write(dir, "stranger.pem", &stranger.pem));
        config.client_key = Some(write(dir, "stranger.key", &stranger.key_pem));
    });
    assert!(reason.contains("UnknownIssuer"), "{reason}");
    let client = clients.issue(&[]);
    let requests = export_all(&database, Some(&tls), "localhost", Protocol::HttpJson, |config| {
        config.certificate = Some(ca);
        config.client_certificate = Some(write(dir, "client.pem", &client.pem));
        config.client_key = Some(write(dir, "client.key", &client.key_pem));
    });
    assert_eq!(seqs_and_hashes(&bodies(&requests)).len() as u64, FACTS);
}

#[test]
fn unusable_certificate_settings_are_refused_when_configured() {
    let files = tempfile::tempdir().unwrap();
    let dir = files.path();
    let authority = Authority::new("collector CA");
    let ca = write(dir, "ca.pem", &authority.pem);
    let client = authority.issue(&[]);
    let other = authority.issue(&[]);
    let client_pem = write(dir, "client.pem", &client.pem);
    let client_key = write(dir, "client.key", &client.key_pem);
    let missing = dir.join("missing.pem");
    let empty = write(dir, "empty.pem", "");
    let junk_key = write(
        dir,
        "junk.key",
        "-----BEGIN PRIVATE KEY-----\nAAECAwQFBgcICQ==\n-----END PRIVATE KEY-----\n",
    );
    let other_key = write(dir, "other.key", &other.key_pem);
    let on = |extra: &[(&str, &str)]| {
        let mut pairs = vec![
            ("OTEL_LOGS_EXPORTER", "otlp"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector.example"),
        ];
        pairs.extend_from_slice(extra);
        ExportConfig::from_env(env(&pairs))
    };
    let path = |path: &Path| path.to_str().unwrap().to_owned();
    let tls_file = |result: Result<Option<ExportConfig>, ConfigError>| match result {
        Err(ConfigError::TlsFile { file, path, reason }) => (file, path, reason),
        other => panic!("expected a TLS file error, got {other:?}"),
    };
    let (file, at, reason) = tls_file(on(&[("OTEL_EXPORTER_OTLP_CERTIFICATE", &path(&missing))]));
    assert_eq!((file, at), ("OTLP certificate", missing.clone()));
    assert!(reason.starts_with("cannot be read"), "{reason}");
    let (_, _, reason) = tls_file(on(&[("OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE", &path(&empty))]));
    assert_eq!(reason, "holds no PEM certificate");
    let junk_certificate = write(
        dir,
        "junk.pem",
        "-----BEGIN CERTIFICATE-----\nAAECAwQFBgcICQ==\n-----END CERTIFICATE-----\n",
    );
    let (_, _, reason) = tls_file(on(&[(
        "OTEL_EXPORTER_OTLP_CERTIFICATE",
        &path(&junk_certificate),
    )]));
    assert!(
        reason.starts_with("holds a certificate that cannot be trusted"),
        "{reason}"
    );
    let (_, _, reason) = tls_file(on(&[("OTEL_EXPORTER_OTLP_CERTIFICATE", &path(dir))]));
    assert!(reason.starts_with("cannot be read"), "a directory: {reason}");
    // A client key that is not a key, or not the certificate's.
    let with_client = |key: &Path| {
        on(&[
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", &path(&client_pem)),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", &path(key)),
        ])
    };
    for key in [&junk_key, &other_key] {
        let (file, _, reason) = tls_file(with_client(key));
        assert_eq!(file, "OTLP client key");
        assert!(reason.starts_with("is not a usable key"), "{reason}");
    }
    let (_, _, reason) = tls_file(with_client(&client_pem));
    assert_eq!(reason, "holds no PEM private key");
    let (file, _, reason) = tls_file(on(&[
        ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", &path(&missing)),
        ("OTEL_EXPORTER_OTLP_CLIENT_KEY", &path(&client_key)),
    ]));
    assert_eq!(file, "OTLP client certificate");
    assert!(reason.starts_with("cannot be read"), "{reason}");
    // Half of a client identity.
    for half in [
        ("OTEL_EXPORTER_OTLP_CLIENT_KEY", path(&client_key)),
        ("OTEL_EXPORTER_OTLP_LOGS_CLIENT_CERTIFICATE", path(&client_pem)),
    ] {
        assert!(matches!(
            on(&[(half.0, &half.1)]),
            Err(ConfigError::IncompleteClientIdentity(_))
        ));
    }
    // The signal's own variable wins, and a good configuration is read.
    let good = on(&[
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", &path(&missing)),
        ("OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE", &path(&ca)),
        ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", &path(&client_pem)),
        ("OTEL_EXPORTER_OTLP_LOGS_CLIENT_KEY", &path(&client_key)),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(good.certificate, Some(ca.clone()));
    assert_eq!(good.client_certificate, Some(client_pem.clone()));
    assert_eq!(good.client_key, Some(client_key.clone()));
    // Over http the TLS settings are not used (as OTel SDKs do).
    let plain = ExportConfig::from_env(env(&[
        ("OTEL_LOGS_EXPORTER", "otlp"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", &path(&missing)),
    ]));
    assert_eq!(plain.unwrap().unwrap().certificate, Some(missing.clone()));
    // The host options: the same checks, and they need an endpoint.
    let overrides = ExportOverrides {
        logs_endpoint: Some("https://collector.example/v1/logs".to_owned()),
        certificate: Some(empty.clone()),
        ..ExportOverrides::default()
    };
    assert!(matches!(
        overrides.resolve(env(&[])),
        Err(ConfigError::TlsFile { .. })
    ));
    let without_endpoint = ExportOverrides {
        client_key: Some(client_key.clone()),
        ..ExportOverrides::default()
    };
    assert_eq!(without_endpoint.resolve(env(&[])), Err(ConfigError::NoEndpoint));
    // A configuration given to the exporter directly is checked as it starts.
    let mut direct = ExportConfig::new("https://collector.example/v1/logs");
    direct.client_key = Some(client_key);
    let database = history(dir);
    assert!(matches!(
        Exporter::start(&database, direct),
        Err(ExportStartError::Config(ConfigError::IncompleteClientIdentity(_)))
    ));
}

#[test]
fn every_resource_attribute_of_the_variables_is_honoured_host_name_included() {
    let config = ExportOverrides {
        logs_endpoint: Some("http://127.0.0.1:9/v1/logs".to_owned()),
        ..ExportOverrides::default()
    }
    .resolve(env(&[(
        "OTEL_RESOURCE_ATTRIBUTES",
        "host.name=builder-7,service.instance.id=mine,team=a,plan_checkpoint.database.id=forged",
    )]))
    .unwrap()
    .unwrap();
    let origin = plan_audit_export::Origin {
        host_name: "box".to_owned(),
        database_id: Some("db-1".to_owned()),
    };
    let request: serde_json::Value = serde_json::from_slice(&plan_audit_export::encode_json(
        &sample_records(),
        &config,
        &origin,
    ))
    .unwrap();
    let resource: Vec<(String, String)> = request["resourceLogs"][0]["resource"]["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|kv| {
            (
                kv["key"].as_str().unwrap().to_owned(),
                kv["value"]["stringValue"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        resource,
        [
            ("service.name".to_owned(), "plan-checkpoint".to_owned()),
            ("host.name".to_owned(), "builder-7".to_owned()),
            ("service.instance.id".to_owned(), "mine".to_owned()),
            ("team".to_owned(), "a".to_owned()),
            // The database's identity is the exporter's to say.
            ("plan_checkpoint.database.id".to_owned(), "db-1".to_owned()),
            ("plan_checkpoint.workspace.root".to_owned(), "/w/one".to_owned()),
        ]
    );
}
