//! An OpenTelemetry collector stand-in on loopback: an OTLP/HTTP logs
//! receiver that accepts `application/json` and `application/x-protobuf`,
//! decodes both into the OTLP/JSON shape, keeps every request, and answers
//! what the test says (2xx, a refusal, or nothing until released), over
//! plain HTTP or TLS (a server configuration the test makes). It binds
//! 127.0.0.1 only and stops when dropped.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustls::{ServerConfig, ServerConnection, StreamOwned};
use serde_json::{Value, json};

/// How the stand-in answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// 200 with an empty ExportLogsServiceResponse.
    Accept,
    /// This status, and the request is not kept.
    Refuse(u16),
    /// Keep the request, then hold the answer until the mode changes.
    Hold,
}

/// One log record as received: its decoded JSON (OTLP/JSON shape) and the
/// resource attributes of its ResourceLogs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Received {
    pub(crate) record: Value,
    pub(crate) resource: BTreeMap<String, Value>,
    pub(crate) content_type: String,
    /// The request line and headers of the request that carried it.
    pub(crate) head: String,
}

impl Received {
    pub(crate) fn attribute(&self, key: &str) -> Option<Value> {
        attributes(&self.record).remove(key)
    }

    pub(crate) fn seq(&self) -> u64 {
        self.attribute("plan_checkpoint.audit.seq")
            .and_then(|value| value.as_i64())
            .map(|seq| seq as u64)
            .expect("every audit record carries its seq")
    }

    pub(crate) fn event(&self) -> String {
        self.record["eventName"].as_str().unwrap().to_owned()
    }
}

/// Attributes as key -> plain JSON value (integers as numbers).
pub(crate) fn attributes(holder: &Value) -> BTreeMap<String, Value> {
    holder["attributes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|kv| {
            let value = &kv["value"];
            let plain = if let Some(text) = value.get("stringValue") {
                text.clone()
            } else if let Some(flag) = value.get("boolValue") {
                flag.clone()
            } else if let Some(int) = value.get("intValue") {
                json!(int.as_str().unwrap().parse::<i64>().unwrap())
            } else {
                panic!("unexpected attribute value {value}")
            };
            (kv["key"].as_str().unwrap().to_owned(), plain)
        })
        .collect()
}

#[derive(Default)]
struct State {
    answer: Option<Answer>,
    received: Vec<Received>,
    /// Every accepted request body as OTLP/JSON, one line each (what a
    /// Collector's file exporter writes).
    lines: Vec<String>,
    requests: u64,
    /// A larger request body is answered 400 and not kept (a collector's
    /// `max_request_body_size`).
    body_limit: Option<usize>,
    /// The size of every request body that came.
    body_sizes: Vec<usize>,
}

pub(crate) struct Collector {
    pub(crate) address: SocketAddr,
    state: Arc<(Mutex<State>, Condvar)>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Collector {
    pub(crate) fn start() -> Collector {
        Collector::on(TcpListener::bind("127.0.0.1:0").unwrap(), None)
    }

    /// A stand-in on a given port (to bring a collector "back up").
    pub(crate) fn start_at(address: SocketAddr) -> Collector {
        Collector::on(TcpListener::bind(address).unwrap(), None)
    }

    /// A stand-in behind TLS: a connection whose handshake fails (a client
    /// that does not trust it, or that it does not trust) sends nothing.
    #[allow(dead_code, reason = "the CLI's https tests use it")]
    pub(crate) fn start_tls(tls: Arc<ServerConfig>) -> Collector {
        Collector::on(TcpListener::bind("127.0.0.1:0").unwrap(), Some(tls))
    }

    fn on(listener: TcpListener, tls: Option<Arc<ServerConfig>>) -> Collector {
        let address = listener.local_addr().unwrap();
        let state = Arc::new((
            Mutex::new(State {
                answer: Some(Answer::Accept),
                ..State::default()
            }),
            Condvar::new(),
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let state = Arc::clone(&state);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let state = Arc::clone(&state);
                    let stop = Arc::clone(&stop);
                    let tls = tls.clone();
                    std::thread::spawn(move || serve(stream, tls, &state, &stop));
                }
            })
        };
        Collector {
            address,
            state,
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn endpoint(&self) -> String {
        format!("http://{}/v1/logs", self.address)
    }

    pub(crate) fn answer(&self, answer: Answer) {
        let (lock, changed) = &*self.state;
        lock.lock().unwrap().answer = Some(answer);
        changed.notify_all();
    }

    /// Refuses (400, not kept) every request body larger than `bytes`.
    pub(crate) fn limit_body(&self, bytes: usize) {
        self.state.0.lock().unwrap().body_limit = Some(bytes);
    }

    /// The size of every request body received so far.
    pub(crate) fn body_sizes(&self) -> Vec<usize> {
        self.state.0.lock().unwrap().body_sizes.clone()
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        self.state.0.lock().unwrap().lines.clone()
    }

    /// Waits (woken by each request) until `done` holds for what was
    /// received; the bound is liveness, not speed.
    pub(crate) fn wait_until(&self, what: &str, mut done: impl FnMut(&[Received]) -> bool) -> Vec<Received> {
        let (lock, changed) = &*self.state;
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut state = lock.lock().unwrap();
        loop {
            if done(&state.received) {
                return state.received.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "{what}: not received within 60 s ({} records)",
                state.received.len()
            );
            state = changed.wait_timeout(state, left).unwrap().0;
        }
    }

    /// Waits (woken by each request) until at least `count` requests came.
    pub(crate) fn wait_for_requests(&self, count: u64) {
        let (lock, changed) = &*self.state;
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut state = lock.lock().unwrap();
        while state.requests < count {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "{count} requests did not come within 60 s");
            state = changed.wait_timeout(state, left).unwrap().0;
        }
    }

    /// Waits until every seq from 1 to `head` was received.
    pub(crate) fn wait_for_seqs(&self, head: u64) -> Vec<Received> {
        self.wait_until(&format!("seqs 1..={head}"), |received| {
            let seqs: std::collections::BTreeSet<u64> = received.iter().map(Received::seq).collect();
            (1..=head).all(|seq| seqs.contains(&seq))
        })
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.answer(Answer::Accept);
        let _ = TcpStream::connect(self.address);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(
    mut stream: TcpStream,
    tls: Option<Arc<ServerConfig>>,
    state: &Arc<(Mutex<State>, Condvar)>,
    stop: &AtomicBool,
) {
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let Some(tls) = tls else {
        exchange(&mut stream, state, stop);
        return;
    };
    let mut connection = ServerConnection::new(tls).unwrap();
    while connection.is_handshaking() {
        if connection.complete_io(&mut stream).is_err() {
            return;
        }
    }
    let mut stream = StreamOwned::new(connection, stream);
    exchange(&mut stream, state, stop);
    stream.conn.send_close_notify();
    let _ = stream.flush();
}

/// One request over a connected (plain or TLS) stream, and its answer.
fn exchange(stream: &mut (impl Read + Write), state: &Arc<(Mutex<State>, Condvar)>, stop: &AtomicBool) {
    let mut data = Vec::new();
    let mut buffer = [0_u8; 8192];
    let header_end = loop {
        if let Some(end) = data.windows(4).position(|window| window == b"\r\n\r\n") {
            break end + 4;
        }
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(read) => data.extend_from_slice(&buffer[..read]),
        }
    };
    let head = String::from_utf8_lossy(&data[..header_end]).to_string();
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
    let length: usize = header("content-length").parse().unwrap_or(0);
    while data.len() < header_end + length {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(read) => data.extend_from_slice(&buffer[..read]),
        }
    }
    let body = &data[header_end..header_end + length];
    let content_type = header("content-type");
    assert!(head.starts_with("POST /v1/logs HTTP/1.1\r\n"), "{head}");
    {
        let (lock, changed) = &**state;
        let mut guard = lock.lock().unwrap();
        guard.body_sizes.push(length);
        if guard.body_limit.is_some_and(|limit| length > limit) {
            guard.requests += 1;
            changed.notify_all();
            drop(guard);
            let _ = write!(
                stream,
                "HTTP/1.1 400 Bad Request\r\nContent-Length: 9\r\nConnection: close\r\n\r\ntoo large"
            );
            return;
        }
    }
    let request = match content_type.as_str() {
        "application/json" => serde_json::from_slice(body).unwrap(),
        "application/x-protobuf" => decode_request(body),
        other => panic!("unexpected content type {other:?}"),
    };
    let (lock, changed) = &**state;
    let mut guard = lock.lock().unwrap();
    guard.requests += 1;
    let answer = guard.answer.unwrap_or(Answer::Accept);
    if !matches!(answer, Answer::Refuse(_)) {
        for resource_logs in request["resourceLogs"].as_array().unwrap() {
            let resource = attributes(&resource_logs["resource"]);
            for scope in resource_logs["scopeLogs"].as_array().unwrap() {
                for record in scope["logRecords"].as_array().unwrap() {
                    guard.received.push(Received {
                        record: record.clone(),
                        resource: resource.clone(),
                        content_type: content_type.clone(),
                        head: head.clone(),
                    });
                }
            }
        }
        guard.lines.push(request.to_string());
    }
    changed.notify_all();
    // Hold: answer only once the test changes the mode (or the stand-in stops).
    while guard.answer == Some(Answer::Hold) && !stop.load(Ordering::SeqCst) {
        guard = changed.wait_timeout(guard, Duration::from_millis(200)).unwrap().0;
    }
    let status = match guard.answer.unwrap_or(Answer::Accept) {
        Answer::Refuse(status) => status,
        Answer::Accept | Answer::Hold => 200,
    };
    drop(guard);
    let body = if status == 200 { "{}" } else { "refused" };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

// --- protobuf, decoded by field number into the OTLP/JSON shape ----------

#[derive(Debug)]
enum Field<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
}

fn varint(bytes: &[u8], at: &mut usize) -> u64 {
    let mut value = 0_u64;
    let mut shift = 0;
    loop {
        let byte = bytes[*at];
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return value;
        }
        shift += 7;
    }
}

fn fields(bytes: &[u8]) -> Vec<(u64, Field<'_>)> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let key = varint(bytes, &mut at);
        let field = match key & 7 {
            0 => Field::Varint(varint(bytes, &mut at)),
            1 => {
                let value = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
                at += 8;
                Field::Fixed64(value)
            }
            2 => {
                let length = varint(bytes, &mut at) as usize;
                let slice = &bytes[at..at + length];
                at += length;
                Field::Bytes(slice)
            }
            wire => panic!("unexpected wire type {wire}"),
        };
        out.push((key >> 3, field));
    }
    out
}

fn text(field: &Field<'_>) -> String {
    match field {
        Field::Bytes(bytes) => String::from_utf8(bytes.to_vec()).unwrap(),
        other => panic!("expected a string, got {other:?}"),
    }
}

fn bytes<'a>(field: &Field<'a>) -> &'a [u8] {
    match field {
        Field::Bytes(bytes) => bytes,
        other => panic!("expected a message, got {other:?}"),
    }
}

fn any_value(message: &[u8]) -> Value {
    let mut value = json!({});
    for (number, field) in fields(message) {
        match (number, &field) {
            (1, _) => value = json!({ "stringValue": text(&field) }),
            (2, Field::Varint(flag)) => value = json!({ "boolValue": *flag != 0 }),
            (3, Field::Varint(int)) => value = json!({ "intValue": (*int as i64).to_string() }),
            other => panic!("unexpected AnyValue field {other:?}"),
        }
    }
    value
}

fn key_values(list: &[(u64, Field<'_>)], number: u64) -> Value {
    Value::Array(
        list.iter()
            .filter(|(field, _)| *field == number)
            .map(|(_, field)| {
                let mut key = String::new();
                let mut value = json!({});
                for (inner, part) in fields(bytes(field)) {
                    match inner {
                        1 => key = text(&part),
                        2 => value = any_value(bytes(&part)),
                        other => panic!("unexpected KeyValue field {other}"),
                    }
                }
                json!({ "key": key, "value": value })
            })
            .collect(),
    )
}

fn log_record(message: &[u8]) -> Value {
    let list = fields(message);
    let mut record = serde_json::Map::new();
    for (number, field) in &list {
        match (number, field) {
            (1, Field::Fixed64(time)) => {
                record.insert("timeUnixNano".into(), json!(time.to_string()));
            }
            (2, Field::Varint(severity)) => {
                record.insert("severityNumber".into(), json!(severity));
            }
            (3, _) => {
                record.insert("severityText".into(), json!(text(field)));
            }
            (5, _) => {
                record.insert("body".into(), any_value(bytes(field)));
            }
            (6, _) => {}
            (11, Field::Fixed64(time)) => {
                record.insert("observedTimeUnixNano".into(), json!(time.to_string()));
            }
            (12, _) => {
                record.insert("eventName".into(), json!(text(field)));
            }
            other => panic!("unexpected LogRecord field {other:?}"),
        }
    }
    record.insert("attributes".into(), key_values(&list, 6));
    Value::Object(record)
}

/// ExportLogsServiceRequest (protobuf) as OTLP/JSON.
fn decode_request(body: &[u8]) -> Value {
    let mut resource_logs = Vec::new();
    for (number, field) in fields(body) {
        assert_eq!(number, 1, "ExportLogsServiceRequest has resource_logs only");
        let mut resource = json!({});
        let mut scope_logs = Vec::new();
        for (inner, part) in fields(bytes(&field)) {
            match inner {
                1 => resource = json!({ "attributes": key_values(&fields(bytes(&part)), 1) }),
                2 => {
                    let mut scope = json!({});
                    let mut records = Vec::new();
                    for (member, piece) in fields(bytes(&part)) {
                        match member {
                            1 => {
                                let parts = fields(bytes(&piece));
                                scope = json!({
                                    "name": text(&parts[0].1),
                                    "version": text(&parts[1].1),
                                });
                            }
                            2 => records.push(log_record(bytes(&piece))),
                            other => panic!("unexpected ScopeLogs field {other}"),
                        }
                    }
                    scope_logs.push(json!({ "scope": scope, "logRecords": records }));
                }
                other => panic!("unexpected ResourceLogs field {other}"),
            }
        }
        resource_logs.push(json!({ "resource": resource, "scopeLogs": scope_logs }));
    }
    json!({ "resourceLogs": resource_logs })
}
