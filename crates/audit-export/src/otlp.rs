//! Audit records as an OTLP `ExportLogsServiceRequest`, in OTLP/JSON and in
//! protobuf (hand-encoded: the few messages of the logs signal, by their
//! field numbers in opentelemetry-proto; the tests decode both encodings
//! with that crate's generated types, which the host itself does not
//! link, so it carries neither prost nor the OpenTelemetry SDK). The same records and
//! configuration always give the same bytes, so a record resent after a
//! crash is identical to the first copy. Encoding only; no I/O.

use std::collections::BTreeMap;

use plan_storage::{ALIAS_ATTRIBUTES, AuditRecord, HASH_ATTRIBUTE};

use crate::compare::DATABASE_ID_ATTRIBUTE;
use serde_json::{Value, json};

use crate::config::ExportConfig;

/// The instrumentation scope's name.
pub(crate) const SCOPE_NAME: &str = "plan-checkpoint";
/// OTel's `INFO` severity number.
const SEVERITY_INFO: u64 = 9;

/// An attribute value as OTLP carries it.
#[derive(Debug, Clone, PartialEq)]
enum Any {
    Text(String),
    Int(i64),
    Bool(bool),
}

fn any_of(value: &Value) -> Option<Any> {
    match value {
        Value::String(text) => Some(Any::Text(text.clone())),
        Value::Bool(flag) => Some(Any::Bool(*flag)),
        Value::Number(number) => number.as_i64().map(Any::Int),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

/// Where the records come from: the machine and the database.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// The machine's name (`host.name`, unless `OTEL_RESOURCE_ATTRIBUTES`
    /// names another).
    pub host_name: String,
    /// The database's identity (`plan_checkpoint.database.id`, and
    /// `service.instance.id` unless configured otherwise).
    pub database_id: Option<String>,
}

/// The resource attribute of a group's workspace root.
const WORKSPACE_ROOT_ATTRIBUTE: &str = "plan_checkpoint.workspace.root";

/// One record's attributes as exported: the chain's, its hash, their GenAI
/// aliases, and the confidential text (with what was said about cutting
/// it) when the configuration says so; sorted by key.
fn record_attributes(record: &AuditRecord, config: &ExportConfig) -> BTreeMap<String, Any> {
    let mut attributes: BTreeMap<String, Any> = record
        .attributes
        .iter()
        .filter_map(|(key, value)| any_of(value).map(|value| (key.clone(), value)))
        .collect();
    for (alias, source) in ALIAS_ATTRIBUTES {
        if let Some(value) = attributes.get(*source).cloned() {
            attributes.insert((*alias).to_owned(), value);
        }
    }
    attributes.insert(HASH_ATTRIBUTE.to_owned(), Any::Text(record.hash.clone()));
    if config.include_content {
        for (key, text) in &record.content {
            attributes.insert(key.clone(), Any::Text(text.clone()));
        }
        for (key, value) in &record.content_notes {
            if let Some(value) = any_of(value) {
                attributes.insert(key.clone(), value);
            }
        }
    }
    attributes
}

/// The resource of a group of records: `service.name`, `host.name` and
/// `service.instance.id` (the database's identity), each replaced by the
/// configured attribute of the same key (`OTEL_RESOURCE_ATTRIBUTES`), the
/// other configured attributes, then what only the exporter may say: the
/// database's identity and the workspace root.
fn resource_attributes(config: &ExportConfig, origin: &Origin, root: Option<&str>) -> Vec<(String, Any)> {
    let mut attributes = vec![
        ("service.name".to_owned(), Any::Text(config.service_name.clone())),
        ("host.name".to_owned(), Any::Text(origin.host_name.clone())),
    ];
    if let Some(id) = &origin.database_id {
        attributes.push(("service.instance.id".to_owned(), Any::Text(id.clone())));
    }
    for (key, value) in &config.resource_attributes {
        if key == DATABASE_ID_ATTRIBUTE || key == WORKSPACE_ROOT_ATTRIBUTE || key == "service.name" {
            continue;
        }
        match attributes.iter_mut().find(|(known, _)| known == key) {
            Some((_, known)) => *known = Any::Text(value.clone()),
            None => attributes.push((key.clone(), Any::Text(value.clone()))),
        }
    }
    if let Some(id) = &origin.database_id {
        attributes.push((DATABASE_ID_ATTRIBUTE.to_owned(), Any::Text(id.clone())));
    }
    if let Some(root) = root {
        attributes.push((WORKSPACE_ROOT_ATTRIBUTE.to_owned(), Any::Text(root.to_owned())));
    }
    attributes
}

/// The records grouped by workspace root, in order of first appearance.
fn by_root(records: &[AuditRecord]) -> Vec<(Option<&str>, Vec<&AuditRecord>)> {
    let mut groups: Vec<(Option<&str>, Vec<&AuditRecord>)> = Vec::new();
    for record in records {
        let root = record.workspace_root.as_deref();
        match groups.iter_mut().find(|(known, _)| *known == root) {
            Some((_, members)) => members.push(record),
            None => groups.push((root, vec![record])),
        }
    }
    groups
}

fn nanos(record: &AuditRecord) -> u64 {
    u64::try_from(record.time_unix_ms)
        .unwrap_or(0)
        .saturating_mul(1_000_000)
}

fn json_any(value: &Any) -> Value {
    match value {
        Any::Text(text) => json!({ "stringValue": text }),
        // OTLP/JSON writes 64-bit integers as strings.
        Any::Int(number) => json!({ "intValue": number.to_string() }),
        Any::Bool(flag) => json!({ "boolValue": flag }),
    }
}

fn json_attributes<'a>(attributes: impl IntoIterator<Item = (&'a String, &'a Any)>) -> Value {
    Value::Array(
        attributes
            .into_iter()
            .map(|(key, value)| json!({ "key": key, "value": json_any(value) }))
            .collect(),
    )
}

/// The request as OTLP/JSON.
pub fn encode_json(records: &[AuditRecord], config: &ExportConfig, origin: &Origin) -> Vec<u8> {
    let resource_logs: Vec<Value> = by_root(records)
        .into_iter()
        .map(|(root, members)| {
            let resource = resource_attributes(config, origin, root);
            let log_records: Vec<Value> = members
                .into_iter()
                .map(|record| {
                    let time = nanos(record).to_string();
                    json!({
                        "timeUnixNano": time,
                        "observedTimeUnixNano": time,
                        "severityNumber": SEVERITY_INFO,
                        "severityText": "INFO",
                        "eventName": record.event,
                        "body": { "stringValue": record.event },
                        "attributes": json_attributes(&record_attributes(record, config)),
                    })
                })
                .collect();
            json!({
                "resource": { "attributes": json_attributes(resource.iter().map(|(key, value)| (key, value))) },
                "scopeLogs": [{
                    "scope": { "name": SCOPE_NAME, "version": env!("CARGO_PKG_VERSION") },
                    "logRecords": log_records,
                }],
            })
        })
        .collect();
    json!({ "resourceLogs": resource_logs }).to_string().into_bytes()
}

// --- protobuf ------------------------------------------------------------

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    tag(out, field, LEN);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn message(out: &mut Vec<u8>, field: u32, build: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    build(&mut inner);
    bytes_field(out, field, &inner);
}

/// `AnyValue`: string_value 1, bool_value 2, int_value 3.
fn proto_any(out: &mut Vec<u8>, value: &Any) {
    match value {
        Any::Text(text) => bytes_field(out, 1, text.as_bytes()),
        Any::Bool(flag) => {
            tag(out, 2, VARINT);
            varint(out, u64::from(*flag));
        }
        Any::Int(number) => {
            tag(out, 3, VARINT);
            // int64: two's complement, as protobuf encodes negative int64.
            varint(out, *number as u64);
        }
    }
}

/// `KeyValue`: key 1, value 2.
fn proto_key_value(out: &mut Vec<u8>, field: u32, key: &str, value: &Any) {
    message(out, field, |kv| {
        bytes_field(kv, 1, key.as_bytes());
        message(kv, 2, |any| proto_any(any, value));
    });
}

/// The request as protobuf: ExportLogsServiceRequest { resource_logs 1 },
/// ResourceLogs { resource 1, scope_logs 2 }, Resource { attributes 1 },
/// ScopeLogs { scope 1, log_records 2 }, InstrumentationScope { name 1,
/// version 2 }, LogRecord { time_unix_nano 1 (fixed64), severity_number 2,
/// severity_text 3, body 5, attributes 6, observed_time_unix_nano 11
/// (fixed64), event_name 12 }.
pub fn encode_protobuf(records: &[AuditRecord], config: &ExportConfig, origin: &Origin) -> Vec<u8> {
    let mut out = Vec::new();
    for (root, members) in by_root(records) {
        message(&mut out, 1, |resource_logs| {
            message(resource_logs, 1, |resource| {
                for (key, value) in resource_attributes(config, origin, root) {
                    proto_key_value(resource, 1, &key, &value);
                }
            });
            message(resource_logs, 2, |scope_logs| {
                message(scope_logs, 1, |scope| {
                    bytes_field(scope, 1, SCOPE_NAME.as_bytes());
                    bytes_field(scope, 2, env!("CARGO_PKG_VERSION").as_bytes());
                });
                for record in members {
                    message(scope_logs, 2, |log| {
                        let time = nanos(record);
                        tag(log, 1, FIXED64);
                        log.extend_from_slice(&time.to_le_bytes());
                        tag(log, 2, VARINT);
                        varint(log, SEVERITY_INFO);
                        bytes_field(log, 3, b"INFO");
                        message(log, 5, |body| proto_any(body, &Any::Text(record.event.clone())));
                        for (key, value) in record_attributes(record, config) {
                            proto_key_value(log, 6, &key, &value);
                        }
                        tag(log, 11, FIXED64);
                        log.extend_from_slice(&time.to_le_bytes());
                        bytes_field(log, 12, record.event.as_bytes());
                    });
                }
            });
        });
    }
    out
}
