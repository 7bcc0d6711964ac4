//! The approval card's web server over real loopback sockets: the token
//! rules (used, wrong, expired, wrong SHA-256, after a stop), the Host and
//! Origin checks, the security headers, the body bounds, clients that never
//! send or never read, status polls that hold no connection, and racing
//! decisions.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use plan_host::{
    ApprovalStatus, DecisionChannel, ExpiryTimer, Host, HostEvent, HostOptions, Limits, ManualClock, Mode,
    NewSession, Origin, PermissionMode, PlanApproval, SUBMIT_PLAN, ToolCall, WebOptions, serde_json,
};
use plan_server::Connection;
use plan_server::web::WebCard;
use serde_json::{Value, json};

struct Fixture {
    dir: tempfile::TempDir,
    host: Arc<Host>,
    web: Arc<WebCard>,
    approval: PlanApproval,
    resolved: std::sync::Mutex<Receiver<PlanApproval>>,
    clock: Option<Arc<ManualClock>>,
}

impl Fixture {
    fn addr(&self) -> SocketAddr {
        self.web.address()
    }

    fn url(&self) -> String {
        self.web
            .card_url(&self.approval)
            .expect("a pending approval has a card")
    }

    /// The card's path, `/card/<token>`.
    fn path(&self) -> String {
        let url = self.url();
        url[url.find("/card/").unwrap()..].to_owned()
    }

    fn token(&self) -> String {
        self.path().trim_start_matches("/card/").to_owned()
    }

    fn sha256(&self) -> String {
        self.approval.artifact.as_ref().unwrap().sha256.clone()
    }

    fn status(&self) -> PlanApproval {
        self.host.approval(&self.approval.id).unwrap().approval
    }

    fn decide(&self, body: &Value) -> Reply {
        post(
            self.addr(),
            "/decision",
            &body.to_string(),
            &[("Origin", &origin(self.addr()))],
        )
    }
}

const MARKDOWN: &str = "# Plan\n\n1. Split the lexer.\n";

/// A host with a web card server and one pending approval. With `manual`,
/// the clock is a `ManualClock` and expiry runs when asked.
fn fixture(ttl_ms: i64, manual: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    let clock = manual.then(|| Arc::new(ManualClock::new(1_800_000_000_000)));
    let mut options = HostOptions {
        limits: Limits::new(ttl_ms, 64 * 1024).unwrap(),
        web: Some(WebOptions::loopback("127.0.0.1:0".parse().unwrap()).unwrap()),
        ..HostOptions::default()
    };
    if let Some(clock) = &clock {
        options.clock = Arc::clone(clock) as Arc<dyn plan_host::Clock>;
        options.expiry = ExpiryTimer::Manual;
    }
    let host = Arc::new(Host::open(dir.path().join("plan.db"), options).unwrap());
    let web = WebCard::start_for(&host).unwrap().unwrap();
    let (sender, resolved) = channel();
    host.add_listener(Arc::new(move |event: HostEvent| {
        if let HostEvent::ApprovalResolved(approval) = event {
            let _ = sender.send(approval);
        }
    }));
    let approval = submit(&host, &workspace, "Split the parser", MARKDOWN);
    Fixture {
        dir,
        host,
        web,
        approval,
        resolved: std::sync::Mutex::new(resolved),
        clock,
    }
}

fn submit(host: &Host, workspace: &std::path::Path, title: &str, markdown: &str) -> PlanApproval {
    let session = host
        .create_session(NewSession {
            workspace_root: Some(workspace.display().to_string()),
            mode: Some(Mode::Plan),
            ..NewSession::default()
        })
        .unwrap();
    let turn = host.start_turn(&session.session.id, Origin::Interactive).unwrap();
    let call = ToolCall {
        call_id: "call-1".into(),
        name: SUBMIT_PLAN.to_owned(),
        input: json!({"title": title, "markdown": markdown, "question": "Proceed?"}),
    };
    let outcomes = host
        .tool_calls(&session.session.id, &turn.turn_id, vec![call])
        .unwrap();
    outcomes[0].approval.clone().unwrap()
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON: {}", self.body))
    }
}

fn origin(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

/// Sends raw bytes and reads the whole answer (the server closes every
/// connection after one response).
fn exchange(addr: SocketAddr, raw: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    stream.write_all(raw).unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).unwrap();
    parse_reply(&bytes)
}

fn parse_reply(bytes: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers = lines
        .filter_map(|line| line.split_once(": "))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

fn get_with(addr: SocketAddr, path: &str, extra: &[(&str, &str)]) -> Reply {
    let mut raw = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n");
    for (name, value) in extra {
        raw.push_str(&format!("{name}: {value}\r\n"));
    }
    raw.push_str("\r\n");
    exchange(addr, raw.as_bytes())
}

fn get(addr: SocketAddr, path: &str) -> Reply {
    get_with(addr, path, &[])
}

fn post(addr: SocketAddr, path: &str, body: &str, extra: &[(&str, &str)]) -> Reply {
    let mut raw = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in extra {
        raw.push_str(&format!("{name}: {value}\r\n"));
    }
    raw.push_str("\r\n");
    raw.push_str(body);
    exchange(addr, raw.as_bytes())
}

fn approve(fixture: &Fixture, mode: &str) -> Value {
    json!({"token": fixture.token(), "sha256": fixture.sha256(), "decision": "approve", "permissionMode": mode})
}

#[test]
fn a_decision_on_the_card_is_the_hosts_approve_and_is_noted() {
    let fixture = fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    let page = get(fixture.addr(), &fixture.path());
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<plan-approval-card"), "{}", page.body);
    assert!(page.body.contains("src=\"/plan-approval-card.js\""));
    let state = get(fixture.addr(), &format!("{}/state", fixture.path())).json();
    assert_eq!(state["title"], "Split the parser");
    assert_eq!(state["question"], "Proceed?");
    assert_eq!(state["expiresAt"], fixture.approval.expires_at);
    assert_eq!(state["status"]["status"], "pending");
    assert_eq!(state["plan"]["ok"], true);
    assert_eq!(state["plan"]["markdown"], MARKDOWN);
    assert_eq!(state["artifact"]["sha256"], fixture.sha256());
    // What binds the decision: the project, the file, its size and the
    // fingerprint every frontend shows, and what each mode allows.
    let artifact = fixture.approval.artifact.as_ref().unwrap();
    assert_eq!(state["project"], "workspace");
    assert_eq!(
        state["artifact"]["fileName"],
        artifact.path.trim_start_matches(".pi/plan/")
    );
    assert_eq!(state["artifact"]["size"], MARKDOWN.len());
    assert_eq!(
        state["artifact"]["fingerprint"],
        format!("sha256 {}…", &fixture.sha256()[..16])
    );
    let modes = state["permissionModes"].as_array().unwrap();
    let names: Vec<&str> = modes.iter().map(|mode| mode["mode"].as_str().unwrap()).collect();
    assert_eq!(names, ["ask", "accept-edits", "auto"]);
    for (mode, summary) in PermissionMode::ALL.iter().zip(modes) {
        let (runs, asks) = plan_core::mode_grants(*mode);
        assert_eq!(summary["runsWithoutAsking"], json!(runs));
        assert_eq!(summary["asksFirst"], json!(asks));
    }
    assert_eq!(modes[2]["asksFirst"], json!([]), "auto asks for nothing");
    let script = get(fixture.addr(), "/plan-approval-card.js");
    assert_eq!(script.status, 200);
    assert!(
        script
            .header("content-type")
            .unwrap()
            .starts_with("text/javascript")
    );

    let token = fixture.token();
    let decided = fixture.decide(&approve(&fixture, "accept-edits"));
    assert_eq!(decided.status, 200, "{}", decided.body);
    assert_eq!(decided.json()["status"]["status"], "approved");
    let row = fixture.status();
    assert_eq!(row.status, ApprovalStatus::Approved);
    assert_eq!(row.permission_mode, Some(PermissionMode::AcceptEdits));
    assert!(
        row.execution_id.is_some(),
        "the same approve queues the execution"
    );
    let entries = fixture.host.decision_entries(&row.session_id).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].via, DecisionChannel::WebCard);
    assert_eq!(entries[0].status, ApprovalStatus::Approved);
    assert_eq!(entries[0].permission_mode, Some(PermissionMode::AcceptEdits));
    assert!(
        entries[0].remote_address.starts_with("127.0.0.1:"),
        "{:?}",
        entries[0]
    );

    // A used token decides nothing more, and a decided approval has no
    // card URL; its old URL shows the outcome read-only (decided how, in
    // which mode, when).
    let again = json!({"token": token, "sha256": fixture.sha256(), "decision": "reject"});
    assert_eq!(fixture.decide(&again).status, 404);
    assert_eq!(get(fixture.addr(), &format!("/card/{token}")).status, 200);
    let outcome = get(fixture.addr(), &format!("/card/{token}/state")).json();
    assert_eq!(outcome["status"]["status"], "approved");
    assert_eq!(outcome["status"]["permissionMode"], "accept-edits");
    assert_eq!(outcome["status"]["decidedAt"], row.decided_at.unwrap());
    let status = get(fixture.addr(), &format!("/card/{token}/status")).json();
    assert_eq!(status, outcome["status"]);
    assert!(fixture.web.card_url(&row).is_none());
    assert_eq!(fixture.host.decision_entries(&row.session_id).unwrap().len(), 1);
}

#[test]
fn a_wrong_token_and_a_wrong_hash_are_the_same_404() {
    let fixture = fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    let unknown = "0".repeat(64);
    let not_hex = "z".repeat(64);
    let wrong = [
        get(fixture.addr(), &format!("/card/{unknown}")),
        get(fixture.addr(), &format!("/card/{unknown}/state")),
        get(fixture.addr(), &format!("/card/{not_hex}/state")),
        get(fixture.addr(), "/card/short/state"),
        fixture.decide(&json!({"token": unknown, "sha256": fixture.sha256(), "decision": "reject"})),
        // The right token with another artifact's hash.
        fixture.decide(&json!({"token": fixture.token(), "sha256": "0".repeat(64), "decision": "reject"})),
    ];
    for reply in &wrong {
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (
                404,
                "Not Found
"
            )
        );
    }
    assert_eq!(fixture.status().status, ApprovalStatus::Pending);
    // Nothing was spent: the right token and hash still decide.
    let rejected =
        fixture.decide(&json!({"token": fixture.token(), "sha256": fixture.sha256(), "decision": "reject"}));
    assert_eq!(rejected.status, 200, "{}", rejected.body);
    assert_eq!(fixture.status().status, ApprovalStatus::Rejected);
    let entries = fixture
        .host
        .decision_entries(&fixture.approval.session_id)
        .unwrap();
    assert_eq!((entries.len(), entries[0].permission_mode), (1, None));
}

/// With JavaScript off the page still says when the plan must be decided:
/// the absolute deadline in UTC (the host's clock plus the approval's time
/// to live), in a `<time>` element, beside the agent's text, which stays
/// text.
#[test]
fn without_javascript_the_page_shows_the_deadline_and_the_agents_text_escaped() {
    let fixture = fixture(1_800_999, true);
    let workspace = fixture.dir.path().join("workspace");
    let hostile = submit(
        &fixture.host,
        &workspace,
        "Split <b>the</b> \"parser\"",
        "# Plan\n\n<script>alert(1)</script> \u{1b}[2J\n",
    );
    let url = fixture.web.card_url(&hostile).unwrap();
    let page = get(fixture.addr(), &url[url.find("/card/").unwrap()..]);
    assert_eq!(page.status, 200);
    let start = page.body.find("<noscript>").expect("a <noscript> block");
    let end = page.body.find("</noscript>").expect("its end");
    let shown = &page.body[start..end];
    // 1_800_000_000_000 ms (the manual clock) + 1_800_999 ms, to the second.
    assert!(
        shown.contains(
            "<p>Deadline: <time datetime=\"2027-01-15T08:30:00Z\">2027-01-15 08:30:00 UTC</time></p>"
        ),
        "{shown}"
    );
    assert!(shown.contains("<p>Status: pending</p>"), "{shown}");
    assert!(
        shown.contains("<h1>Split &lt;b&gt;the&lt;/b&gt; &quot;parser&quot;</h1>"),
        "{shown}"
    );
    assert!(
        shown.contains("&lt;script&gt;alert(1)&lt;/script&gt; \\x1b[2J"),
        "{shown}"
    );
    assert!(!shown.contains("<b>") && !shown.contains("<script>"), "{shown}");
    // Past the deadline the page says so, with the same absolute time.
    fixture.clock.as_ref().unwrap().advance(1_801_000);
    fixture.host.expire_due().unwrap();
    let page = get(fixture.addr(), &url[url.find("/card/").unwrap()..]);
    assert!(page.body.contains("<p>Status: expired</p>"), "{}", page.body);
    assert!(page.body.contains("2027-01-15 08:30:00 UTC"), "{}", page.body);
}

#[test]
fn a_token_stops_deciding_at_the_deadline() {
    let fixture = fixture(60_000, true);
    let body = approve(&fixture, "ask");
    let path = fixture.path();
    fixture.clock.as_ref().unwrap().advance(60_000);
    // Past the deadline the card shows the expiry, read-only.
    let state = get(fixture.addr(), &format!("{path}/state")).json();
    assert_eq!(state["status"]["status"], "expired");
    assert_eq!(fixture.decide(&body).status, 404);
    let row = fixture.status();
    assert_eq!(row.status, ApprovalStatus::Expired);
    assert!(fixture.host.decision_entries(&row.session_id).unwrap().is_empty());
}

#[test]
fn a_decision_the_host_refuses_leaves_the_token_live() {
    let fixture = fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    let without_mode = json!({"token": fixture.token(), "sha256": fixture.sha256(), "decision": "approve"});
    let refused = fixture.decide(&without_mode);
    assert_eq!(refused.status, 400);
    assert_eq!(refused.json()["errorCode"], "PERMISSION_MODE_REQUIRED");
    assert_eq!(fixture.status().status, ApprovalStatus::Pending);
    let bad = [
        json!({"token": fixture.token(), "sha256": fixture.sha256(), "decision": "approve", "permissionMode": "yolo"}),
        json!({"token": fixture.token(), "sha256": fixture.sha256(), "decision": "approve", "feedback": "x"}),
        json!({"token": fixture.token(), "decision": "reject"}),
        json!({"token": fixture.token(), "sha256": fixture.sha256(), "decision": "reject", "permissionMode": "auto"}),
        json!({"token": fixture.token(), "sha256": fixture.sha256(), "decision": "maybe"}),
    ];
    for body in &bad {
        assert_eq!(fixture.decide(body).status, 400, "{body}");
    }
    assert_eq!(fixture.decide(&approve(&fixture, "auto")).status, 200);
    assert_eq!(fixture.status().permission_mode, Some(PermissionMode::Auto));
}

#[test]
fn tokens_die_when_the_host_closes_and_when_the_server_stops() {
    let fixture = fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    let path = fixture.path();
    fixture.host.close();
    assert_eq!(get(fixture.addr(), &format!("{path}/state")).status, 404);
    assert_eq!(get(fixture.addr(), &path).status, 404);

    let fixture = self::fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    let path = fixture.path();
    assert_eq!(
        get(fixture.addr(), &format!("{path}/status")).json()["status"],
        "pending"
    );
    fixture.web.stop();
    // An open page's next poll finds nobody: it says its host is gone.
    assert!(fixture.web.card_url(&fixture.approval).is_none());
    assert!(
        TcpStream::connect(fixture.addr()).is_err(),
        "nothing listens after a stop"
    );
}

#[test]
fn a_foreign_host_or_origin_is_refused() {
    let fixture = fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    let addr = fixture.addr();
    let state = format!("{}/state", fixture.path());
    let body = approve(&fixture, "ask").to_string();
    let raw = |host: &str| format!("GET {state} HTTP/1.1\r\nHost: {host}\r\n\r\n");
    for host in [
        format!("localhost:{}", addr.port()),
        "evil.example".to_owned(),
        String::new(),
    ] {
        assert_eq!(exchange(addr, raw(&host).as_bytes()).status, 421, "Host: {host}");
    }
    let no_host = format!("GET {state} HTTP/1.1\r\n\r\n");
    assert_eq!(exchange(addr, no_host.as_bytes()).status, 421);
    let two_hosts = format!("GET {state} HTTP/1.1\r\nHost: {addr}\r\nHost: evil.example\r\n\r\n");
    assert_eq!(exchange(addr, two_hosts.as_bytes()).status, 400);
    assert_eq!(
        get_with(addr, &state, &[("Origin", "http://evil.example")]).status,
        403
    );
    assert_eq!(get_with(addr, &state, &[("Origin", &origin(addr))]).status, 200);
    assert_eq!(
        post(addr, "/decision", &body, &[("Origin", "http://evil.example")]).status,
        403
    );
    assert_eq!(post(addr, "/decision", &body, &[("Origin", "null")]).status, 403);
    assert_eq!(
        post(addr, "/decision", &body, &[]).status,
        403,
        "a POST must say its Origin"
    );
    let form = format!(
        "POST /decision HTTP/1.1\r\nHost: {addr}\r\nOrigin: {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        origin(addr),
        body.len()
    );
    assert_eq!(exchange(addr, form.as_bytes()).status, 415);
    assert_eq!(fixture.status().status, ApprovalStatus::Pending);
}

#[test]
fn every_response_has_the_security_headers_and_none_allows_other_origins() {
    let fixture = fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    let addr = fixture.addr();
    let preflight = format!(
        "OPTIONS /decision HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://evil.example\r\nAccess-Control-Request-Method: POST\r\n\r\n"
    );
    let replies = [
        get(addr, &fixture.path()),
        get(addr, "/plan-approval-card.js"),
        get(addr, "/nothing"),
        get_with(addr, "/", &[("Origin", "http://evil.example")]),
        exchange(addr, b"GET / HTTP/1.1\r\nHost: evil\r\n\r\n"),
        exchange(addr, preflight.as_bytes()),
    ];
    for reply in &replies {
        let csp = reply.header("content-security-policy").unwrap();
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
            "{csp}"
        );
        assert!(csp.contains("frame-ancestors 'none'"));
        assert_eq!(reply.header("x-frame-options"), Some("DENY"));
        assert_eq!(reply.header("referrer-policy"), Some("no-referrer"));
        assert_eq!(reply.header("cache-control"), Some("no-store"));
        assert_eq!(reply.header("x-content-type-options"), Some("nosniff"));
        assert!(
            !reply
                .headers
                .iter()
                .any(|(name, _)| name.to_ascii_lowercase().starts_with("access-control-")),
            "{:?}",
            reply.headers
        );
    }
    // A preflight from another origin is refused like any of its requests.
    assert_eq!(replies[5].status, 403);
}

#[test]
fn heads_and_bodies_are_bounded() {
    let fixture = fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    let addr = fixture.addr();
    let long_body = format!(
        "POST /decision HTTP/1.1\r\nHost: {addr}\r\nOrigin: {}\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n",
        origin(addr)
    );
    assert_eq!(exchange(addr, long_body.as_bytes()).status, 413);
    let long_head = format!(
        "GET / HTTP/1.1\r\nHost: {addr}\r\nX-Filler: {}\r\n\r\n",
        "a".repeat(9000)
    );
    assert_eq!(exchange(addr, long_head.as_bytes()).status, 431);
    let chunked = format!(
        "POST /decision HTTP/1.1\r\nHost: {addr}\r\nOrigin: {}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        origin(addr)
    );
    assert_eq!(exchange(addr, chunked.as_bytes()).status, 501);
    assert_eq!(exchange(addr, b"GET /\r\n\r\n").status, 400);
    assert_eq!(
        exchange(addr, format!("GET / HTTP/2\r\nHost: {addr}\r\n\r\n").as_bytes()).status,
        505
    );
    assert_eq!(fixture.status().status, ApprovalStatus::Pending);
}

/// A `GET` whose answer is read to its end while the client keeps its
/// side of the connection open (a browser tab that stays).
fn get_kept(addr: SocketAddr, path: &str) -> (Reply, TcpStream) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).unwrap();
    (parse_reply(&bytes), stream)
}

#[test]
fn the_polled_status_follows_a_decision_made_elsewhere() {
    let fixture = fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    // The paths are taken while the approval is pending (a card URL is
    // made for pending approvals only).
    let path = fixture.path();
    let status = format!("{path}/status");
    let body = approve(&fixture, "auto");
    let before = get(fixture.addr(), &status);
    assert_eq!(before.status, 200, "{}", before.body);
    assert_eq!(before.header("content-type"), Some("application/json"));
    assert_eq!(
        before.json(),
        json!({"status": "pending", "permissionMode": null, "errorCode": null, "decidedAt": null})
    );
    fixture.host.reject(&fixture.approval.id).unwrap();
    let row = fixture.status();
    let after = get(fixture.addr(), &status).json();
    assert_eq!(
        after,
        json!({"status": "rejected", "permissionMode": null, "errorCode": null, "decidedAt": row.decided_at.unwrap()})
    );
    let state = get(fixture.addr(), &format!("{path}/state")).json();
    assert_eq!(state["status"], after);
    // The card's token shows the outcome and decides nothing.
    assert_eq!(fixture.decide(&body).status, 404);
    assert_eq!(fixture.status().status, ApprovalStatus::Rejected);
    // A decision elsewhere is not noted as the card's.
    assert!(
        fixture
            .host
            .decision_entries(&fixture.approval.session_id)
            .unwrap()
            .is_empty()
    );
}

/// Connections to the card server held by a `python3` child from other
/// addresses of this machine's loopback (`127.0.0.2` and up: one peer
/// each), silent or with a request whose answer is never read; dropped
/// (the child killed, its connections closed) with the value.
struct Flood {
    child: std::process::Child,
    /// How many connections each source got served (accepted and not
    /// closed unanswered at once), as the child found out.
    served: Vec<usize>,
}

impl Flood {
    /// Opens `per_source` connections from each of `sources`, sending
    /// `request` on each (silent when `None`), then one more from each with
    /// a whole request for the script, read to its end: an empty answer
    /// (closed unanswered) from a source means the server took every
    /// earlier connection of it in order and had no room left for it. Once
    /// that is known for every source, `served` says how many of each
    /// source's held connections are still open (the others were closed
    /// unanswered).
    fn start(addr: SocketAddr, sources: &[&str], per_source: usize, request: Option<&str>) -> Flood {
        let script = format!(
            r#"
import select, socket, sys
addr = ('{ip}', {port})
request = {request}
held = {{}}
for source in {sources:?}:
    held[source] = []
    for _ in range({per_source}):
        s = socket.socket()
        s.bind((source, 0))
        s.connect(addr)
        if request:
            s.sendall(request.encode())
        held[source].append(s)
for source in held:
    probe = socket.socket()
    probe.bind((source, 0))
    probe.connect(addr)
    probe.sendall(b'GET /plan-approval-card.js HTTP/1.1\r\nHost: ' + ('%s:%d' % addr).encode() + b'\r\n\r\n')
    try:
        while probe.recv(65536):
            pass
    except OSError:
        pass
def closed(s):
    if not select.select([s], [], [], 0)[0]:
        return False
    try:
        return not s.recv(1, socket.MSG_PEEK)
    except OSError:
        return True
served = []
for source in held:
    served.append(str(len([s for s in held[source] if not closed(s)])))
print(' '.join(served), flush=True)
sys.stdin.read()
"#,
            ip = addr.ip(),
            port = addr.port(),
            request = request.map_or("None".to_owned(), |request| format!("{request:?}")),
        );
        let mut child = std::process::Command::new("python3")
            .args(["-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The child's one line, once it knows; a child that failed prints
        // its error on stderr and nothing here.
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let served = line
            .split_whitespace()
            .map(|count| count.parse().unwrap())
            .collect();
        Flood { child, served }
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn clients_that_never_send_or_never_read_delay_neither_expiry_nor_others() {
    let fixture = fixture(1_500, false);
    let addr = fixture.addr();
    let path = fixture.path();
    // Connections that never send a byte, from two peers.
    let silent = Flood::start(addr, &["127.0.0.2", "127.0.0.3"], 8, None);
    // Status polls and script downloads whose answers are never read.
    let unread_polls = Flood::start(
        addr,
        &["127.0.0.4"],
        8,
        Some(&format!("GET {path}/status HTTP/1.1\r\nHost: {addr}\r\n\r\n")),
    );
    let unread_script = Flood::start(
        addr,
        &["127.0.0.5"],
        8,
        Some(&format!(
            "GET /plan-approval-card.js HTTP/1.1\r\nHost: {addr}\r\n\r\n"
        )),
    );
    // Someone else is served at once, meanwhile.
    let state = get(addr, &format!("{path}/state"));
    assert_eq!(state.status, 200);
    // The deadline fires on time regardless.
    let expired = fixture
        .resolved
        .lock()
        .unwrap()
        .recv_timeout(Duration::from_secs(30))
        .unwrap();
    assert_eq!(expired.status, ApprovalStatus::Expired);
    let late = expired.decided_at.unwrap() - expired.expires_at;
    assert!((0..1_000).contains(&late), "expired {late} ms after the deadline");
    assert_eq!(
        get(addr, &format!("{path}/state")).json()["status"]["status"],
        "expired"
    );
    drop((silent, unread_polls, unread_script));
}

#[test]
fn two_tabs_approving_at_once_give_exactly_one_decision() {
    let fixture = Arc::new(fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false));
    let tabs = 8;
    let barrier = Arc::new(Barrier::new(tabs));
    let handles: Vec<_> = (0..tabs)
        .map(|tab| {
            let fixture = Arc::clone(&fixture);
            let barrier = Arc::clone(&barrier);
            let mode = if tab % 2 == 0 { "ask" } else { "auto" };
            let body = approve(&fixture, mode);
            std::thread::spawn(move || {
                barrier.wait();
                fixture.decide(&body).status
            })
        })
        .collect();
    let mut statuses: Vec<u16> = handles.into_iter().map(|handle| handle.join().unwrap()).collect();
    statuses.sort_unstable();
    assert_eq!(statuses[0], 200);
    assert!(statuses[1..].iter().all(|status| *status == 404), "{statuses:?}");
    assert_eq!(fixture.status().status, ApprovalStatus::Approved);
    assert_eq!(
        fixture
            .host
            .decision_entries(&fixture.approval.session_id)
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn an_artifact_that_fails_its_check_is_shown_as_such() {
    let fixture = fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    let workspace = fixture.dir.path().join("workspace");
    let path = workspace.join(&fixture.approval.artifact.as_ref().unwrap().path);
    let mut permissions = std::fs::metadata(&path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    permissions.set_readonly(false);
    std::fs::set_permissions(&path, permissions).unwrap();
    std::fs::write(&path, "# Another plan\n").unwrap();
    let state = get(fixture.addr(), &format!("{}/state", fixture.path())).json();
    assert_eq!(state["plan"]["ok"], false);
    assert_eq!(state["plan"]["errorCode"], "ARTIFACT_INTEGRITY_MISMATCH");
    assert!(state["plan"]["markdown"].is_null());
}

/// The card's POST is the host's approve, which re-reads the artifact: a
/// same-origin POST with the live token and the recorded hash cannot
/// approve a rewritten or removed file (`409` with the code), the token
/// stays live, nothing is written, and Reject still decides.
#[test]
fn the_card_cannot_approve_a_rewritten_or_removed_plan() {
    let fixture = fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    let workspace = fixture.dir.path().join("workspace");
    let path = workspace.join(&fixture.approval.artifact.as_ref().unwrap().path);
    std::fs::write(&path, "# Another plan\n").unwrap();
    let refused = fixture.decide(&approve(&fixture, "auto"));
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert_eq!(refused.json()["errorCode"], "ARTIFACT_INTEGRITY_MISMATCH");
    // The refusal carries the plan as the host reads it now, for the card.
    assert_eq!(refused.json()["plan"]["ok"], false);
    assert_eq!(refused.json()["plan"]["errorCode"], "ARTIFACT_INTEGRITY_MISMATCH");
    std::fs::remove_file(&path).unwrap();
    let refused = fixture.decide(&approve(&fixture, "ask"));
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert_eq!(refused.json()["errorCode"], "ARTIFACT_MISSING");
    assert_eq!(fixture.status(), fixture.approval);
    assert!(
        fixture
            .host
            .decision_entries(&fixture.approval.session_id)
            .unwrap()
            .is_empty()
    );
    let rejected =
        fixture.decide(&json!({"token": fixture.token(), "sha256": fixture.sha256(), "decision": "reject"}));
    assert_eq!(rejected.status, 200, "{}", rejected.body);
    assert_eq!(fixture.status().status, ApprovalStatus::Rejected);
}

fn call(connection: &mut Connection, method: &str, params: Value) -> Value {
    let line = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    serde_json::from_str(&connection.handle_line(&line).unwrap()).unwrap()
}

#[test]
fn card_urls_reach_the_hosts_own_client_and_never_an_approval() {
    let fixture = fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    let mut connection = Connection::with_web(Arc::clone(&fixture.host), Some(Arc::clone(&fixture.web)));
    let init = call(&mut connection, "initialize", json!({"protocolVersion": 9}));
    assert_eq!(
        init["result"]["capabilities"]["web"]["url"],
        fixture.web.base_url()
    );
    let url = call(
        &mut connection,
        "plan/cardUrl",
        json!({"approvalId": fixture.approval.id}),
    );
    assert_eq!(url["result"]["url"], fixture.url());
    let requested = fixture
        .web
        .notification(HostEvent::ApprovalRequested(fixture.approval.clone()));
    let requested = serde_json::to_value(&requested).unwrap();
    assert_eq!(requested["params"]["cardUrl"], fixture.url());
    // No approval object carries the token.
    let token = fixture.token();
    let got = call(
        &mut connection,
        "plan/get",
        json!({"approvalId": fixture.approval.id}),
    );
    assert!(!got.to_string().contains(&token));
    assert!(!requested["params"]["approval"].to_string().contains(&token));
    let unknown = call(
        &mut connection,
        "plan/cardUrl",
        json!({"approvalId": "approval-nope"}),
    );
    assert_eq!(unknown["error"]["data"]["code"], "APPROVAL_NOT_FOUND");
    fixture.host.reject(&fixture.approval.id).unwrap();
    let decided = call(
        &mut connection,
        "plan/cardUrl",
        json!({"approvalId": fixture.approval.id}),
    );
    assert_eq!(decided["error"]["data"]["code"], "APPROVAL_NOT_PENDING");

    // Without a web server: null capability, no URL.
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("w");
    std::fs::create_dir(&workspace).unwrap();
    let host = Arc::new(Host::open(dir.path().join("plan.db"), HostOptions::default()).unwrap());
    let pending = submit(&host, &workspace, "t", "m");
    let mut plain = Connection::new(Arc::clone(&host));
    let init = call(&mut plain, "initialize", json!({"protocolVersion": 9}));
    assert_eq!(init["result"]["capabilities"]["web"], Value::Null);
    let none = call(&mut plain, "plan/cardUrl", json!({"approvalId": pending.id}));
    assert_eq!(none["error"]["data"]["code"], "INVALID_PARAMS");
    let notified =
        serde_json::to_value(plan_server::notification(HostEvent::ApprovalRequested(pending))).unwrap();
    assert_eq!(notified["params"]["cardUrl"], Value::Null);
}

#[test]
fn another_address_needs_the_explicit_option() {
    let refused = WebOptions::loopback("0.0.0.0:0".parse().unwrap()).map_err(|error| error.code());
    assert_eq!(refused.map(|_| ()), Err(plan_host::ErrorCode::InvalidParams));
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(Host::open(dir.path().join("plan.db"), HostOptions::default()).unwrap());
    assert!(
        WebCard::start_for(&host).unwrap().is_none(),
        "no option, no server"
    );
    // An address that cannot be bound is refused with a reason.
    let taken = WebCard::start(
        &host,
        WebOptions::loopback("127.0.0.1:0".parse().unwrap()).unwrap(),
    )
    .unwrap();
    let again = WebCard::start(&host, WebOptions::loopback(taken.address()).unwrap()).map(|_| ());
    assert_eq!(
        again.map_err(|error| error.code()),
        Err(plan_host::ErrorCode::InvalidParams)
    );
}

#[test]
fn a_noted_decision_the_host_refuses_writes_no_transcript_entry() {
    let fixture = fixture(60_000, true);
    let source = plan_host::DecisionSource {
        channel: DecisionChannel::WebCard,
        remote_address: "127.0.0.1:9".to_owned(),
    };
    // Past the deadline the approve is a timeout: the expiry is committed,
    // and nothing says the card decided.
    fixture.clock.as_ref().unwrap().advance(60_000);
    let late = fixture
        .host
        .approve_noted(&fixture.approval.id, Some(PermissionMode::Ask), &source)
        .map_err(|error| error.code());
    assert_eq!(late.map(|_| ()), Err(plan_host::ErrorCode::PlanApprovalTimeout));
    assert_eq!(fixture.status().status, ApprovalStatus::Expired);
    let again = fixture
        .host
        .reject_noted(&fixture.approval.id, &source)
        .map_err(|error| error.code());
    // An expired approval stays a timeout for every later decision.
    assert_eq!(again.map(|_| ()), Err(plan_host::ErrorCode::PlanApprovalTimeout));
    assert!(
        fixture
            .host
            .decision_entries(&fixture.approval.session_id)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn malformed_slow_and_misdirected_requests_get_their_own_status() {
    let fixture = fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    let addr = fixture.addr();
    let no_colon = format!("GET / HTTP/1.1\r\nHost: {addr}\r\nBroken header\r\n\r\n");
    assert_eq!(exchange(addr, no_colon.as_bytes()).status, 400);
    let bad_length = format!("POST /decision HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 1e3\r\n\r\n");
    assert_eq!(exchange(addr, bad_length.as_bytes()).status, 400);
    assert_eq!(
        exchange(addr, b"GET / HTTP/1.1\r\nHost: \xff\r\n\r\n").status,
        400
    );
    assert_eq!(get(addr, "/decision").status, 405);
    assert_eq!(get(addr, "relative").status, 400);
    assert_eq!(get(addr, &format!("{}/other", fixture.path())).status, 404);
    // A head that never ends is answered when its deadline passes.
    let mut slow = TcpStream::connect(addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(slow, "GET / HTTP/1.1\r\nHost: {addr}\r\n").unwrap();
    let mut bytes = Vec::new();
    slow.read_to_end(&mut bytes).unwrap();
    assert_eq!(parse_reply(&bytes).status, 408);
}

/// Many pending plans, and one card in many tabs, all stay live: a status
/// poll is one short request whose connection the server closes after
/// its answer, so more polls than the connection cap, each from a client
/// that keeps its side open, are all answered.
#[test]
fn any_number_of_cards_and_tabs_poll_without_holding_a_connection() {
    let fixture = fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    let addr = fixture.addr();
    let workspace = fixture.dir.path().join("workspace");
    let mut approvals = vec![fixture.approval.clone()];
    for plan in 1..8 {
        approvals.push(submit(
            &fixture.host,
            &workspace,
            &format!("Plan {plan}"),
            MARKDOWN,
        ));
    }
    let paths: Vec<String> = approvals
        .iter()
        .map(|approval| {
            let url = fixture.web.card_url(approval).unwrap();
            format!("{}/status", &url[url.find("/card/").unwrap()..])
        })
        .collect();
    let tabs = plan_server::web::MAX_CONNECTIONS / paths.len() + 2;
    let mut kept = Vec::new();
    for _ in 0..tabs {
        for path in &paths {
            let (reply, stream) = get_kept(addr, path);
            assert_eq!(
                (reply.status, reply.json()["status"].as_str()),
                (200, Some("pending"))
            );
            assert_eq!(reply.header("connection"), Some("close"));
            kept.push(stream);
        }
    }
    assert!(kept.len() > plan_server::web::MAX_CONNECTIONS);
    // A decision on one card shows on its next poll; the others stay
    // pending.
    fixture.host.reject(&approvals[3].id).unwrap();
    for (index, path) in paths.iter().enumerate() {
        let expected = if index == 3 { "rejected" } else { "pending" };
        assert_eq!(get(addr, path).json()["status"], expected, "card {index}");
    }
    drop(kept);
}

/// The card's old live-status route is gone: `/card/<token>/events` is a
/// plain `404` answered at once, even for a live token, and it spends
/// nothing.
#[test]
fn the_retired_events_route_is_a_plain_404() {
    let fixture = fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    let addr = fixture.addr();
    let events = format!("{}/events", fixture.path());
    let replies = [
        get(addr, &events),
        get_with(addr, &events, &[("Accept", "text/event-stream")]),
        get_with(
            addr,
            &events,
            &[("Accept", "text/event-stream"), ("Origin", &origin(addr))],
        ),
    ];
    let unknown = get(addr, "/nothing");
    for reply in &replies {
        assert_eq!(reply.status, 404);
        assert_eq!(reply.body, "Not Found\n");
        assert_eq!(reply.headers, unknown.headers, "like any unknown path");
    }
    // Nothing was spent: the token still decides, and once decided its
    // events path is still the same 404.
    assert_eq!(fixture.status().status, ApprovalStatus::Pending);
    let decided = fixture.decide(&approve(&fixture, "ask"));
    assert_eq!(decided.status, 200, "{}", decided.body);
    let after = get(addr, &events);
    assert_eq!((after.status, after.headers), (404, unknown.headers));
}

#[test]
fn connections_over_the_cap_are_closed_unanswered() {
    use plan_server::web::{MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER, RESERVED_FOR_CARD_HOLDERS};
    let fixture = fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    let addr = fixture.addr();
    // One peer gets its share and no more; the whole request after it is
    // closed unanswered.
    let one = Flood::start(addr, &["127.0.0.2"], MAX_CONNECTIONS, None);
    assert_eq!(one.served, [MAX_CONNECTIONS_PER_PEER]);
    // Peers that never showed a card's token get no more than the room
    // not kept for card holders, all together.
    let sources: Vec<String> = (3..3 + MAX_CONNECTIONS / MAX_CONNECTIONS_PER_PEER)
        .map(|last| format!("127.0.0.{last}"))
        .collect();
    let sources: Vec<&str> = sources.iter().map(String::as_str).collect();
    let many = Flood::start(addr, &sources, MAX_CONNECTIONS_PER_PEER, None);
    assert_eq!(
        one.served[0] + many.served.iter().sum::<usize>(),
        MAX_CONNECTIONS - RESERVED_FOR_CARD_HOLDERS,
        "{:?}",
        many.served
    );
    drop(one);
    drop(many);
}

#[test]
fn a_flood_from_one_peer_or_many_leaves_room_for_the_persons_own_requests() {
    use plan_server::web::{MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER, RESERVED_FOR_CARD_HOLDERS};
    let fixture = fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    let addr = fixture.addr();
    let path = fixture.path();
    // One peer holding as many connections as it can (and a whole
    // request that finds no room): the person, from another address, is
    // served, and so is someone who has never shown a token.
    let one = Flood::start(addr, &["127.0.0.2"], MAX_CONNECTIONS, None);
    assert_eq!(one.served, [MAX_CONNECTIONS_PER_PEER]);
    assert_eq!(get(addr, &format!("{path}/state")).status, 200);
    drop(one);
    // Many peers, each at its share, hold every connection but the room
    // kept for card holders: the person, who has loaded the card, is
    // served; a peer that never showed a token is not.
    let flooders = (MAX_CONNECTIONS - RESERVED_FOR_CARD_HOLDERS).div_ceil(MAX_CONNECTIONS_PER_PEER) + 2;
    let sources: Vec<String> = (10..10 + flooders)
        .map(|last| format!("127.0.0.{last}"))
        .collect();
    let sources: Vec<&str> = sources.iter().map(String::as_str).collect();
    let many = Flood::start(addr, &sources, MAX_CONNECTIONS_PER_PEER, None);
    assert_eq!(
        many.served.iter().sum::<usize>(),
        MAX_CONNECTIONS - RESERVED_FOR_CARD_HOLDERS,
        "{:?}",
        many.served
    );
    let state = get(addr, &format!("{path}/state"));
    assert_eq!(state.status, 200);
    let decided = fixture.decide(&approve(&fixture, "ask"));
    assert_eq!(decided.status, 200, "{}", decided.body);
    let stranger = Flood::start(addr, &["127.0.0.3"], 1, None);
    assert_eq!(
        stranger.served,
        [0],
        "a peer without a token took the person's room"
    );
    drop(many);
}

#[test]
fn a_decision_on_the_card_is_a_chain_record_naming_the_card_and_its_peer() {
    let fixture = fixture(Limits::DEFAULT_APPROVAL_TTL_MS, false);
    let decided = fixture.decide(&approve(&fixture, "auto"));
    assert_eq!(decided.status, 200, "{}", decided.body);
    let store = plan_storage::Store::open_read_only(fixture.host.database()).unwrap();
    let records = store.audit_records().unwrap();
    let approved = records
        .iter()
        .find(|record| record.event == "plan_checkpoint.plan.approved")
        .unwrap();
    assert_eq!(approved.attributes["plan_checkpoint.channel"], json!("web_card"));
    assert_eq!(
        approved.attributes["plan_checkpoint.permission_mode"],
        json!("auto")
    );
    // OTel's names: the address without the port, the port beside it.
    assert_eq!(approved.attributes["client.address"], json!("127.0.0.1"));
    assert!(
        approved.attributes["client.port"]
            .as_u64()
            .is_some_and(|port| port > 0),
        "{:?}",
        approved.attributes.get("client.port")
    );
    assert_eq!(store.verify_audit_chain().unwrap().1, []);
}

/// The machine's own IPv4 addresses but loopback (its local routing
/// table's `/32 host LOCAL` leaves).
fn machine_addresses() -> Vec<std::net::Ipv4Addr> {
    let trie = std::fs::read_to_string("/proc/net/fib_trie").unwrap();
    let mut last = None;
    let mut found = Vec::new();
    for line in trie.lines() {
        if let Some(address) = line.trim_start().strip_prefix("|-- ") {
            last = address.trim().parse::<std::net::Ipv4Addr>().ok();
        } else if line.contains("/32 host LOCAL")
            && let Some(address) = last
            && !address.is_loopback()
            && !found.contains(&address)
        {
            found.push(address);
        }
    }
    found
}

#[test]
fn a_networked_command_cannot_reach_the_card_bound_on_the_machines_own_address() {
    let Some(address) = machine_addresses().first().copied() else {
        panic!("this machine has no address but loopback: nothing here shows the card kept from a command");
    };
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    let mut options = HostOptions {
        web: Some(WebOptions::any_address(SocketAddr::from((address, 0)))),
        ..HostOptions::default()
    };
    options.limits.commands.network_in_auto = true;
    let host = Arc::new(Host::open(dir.path().join("plan.db"), options).unwrap());
    let web = WebCard::start_for(&host).unwrap().unwrap();
    let (sender, events) = channel();
    host.add_listener(Arc::new(move |event: HostEvent| {
        let _ = sender.send(event);
    }));
    let approval = submit(&host, &workspace, "Split the parser", MARKDOWN);
    let card = web.card_url(&approval).unwrap();
    if !host.limits().commands.namespaces_available {
        eprintln!("no namespaces here: the network option is refused (plan-core's tests assert it)");
        return;
    }
    // The person's browser reaches the card on that address.
    assert_eq!(
        get(web.address(), &card[card.find("/card/").unwrap()..]).status,
        200
    );
    let session = host
        .create_session(NewSession {
            workspace_root: Some(workspace.display().to_string()),
            mode: Some(Mode::Agent),
            permission_mode: Some(PermissionMode::Auto),
            ..NewSession::default()
        })
        .unwrap()
        .session
        .id;
    let turn = host.start_turn(&session, Origin::Interactive).unwrap().turn_id;
    // The command tries the card's address and port with its URL, as a
    // command that read it somewhere would.
    let command = format!(
        "python3 -c \"import socket; s = socket.create_connection(('{}', {}), timeout=5); \
         s.sendall(b'GET {} HTTP/1.1\\r\\nHost: {}\\r\\n\\r\\n'); print(s.recv(64))\" 2>&1 | tail -1",
        address,
        web.address().port(),
        &card[card.find("/card/").unwrap()..],
        web.address()
    );
    let call = ToolCall {
        call_id: "net-1".into(),
        name: "Bash".to_owned(),
        input: json!({"command": command}),
    };
    host.tool_calls(&session, &turn, vec![call]).unwrap();
    host.start_agent_command(&session, &turn, &"net-1".into(), &command, None, None)
        .unwrap();
    let mut stdout = String::new();
    let run = loop {
        match events.recv_timeout(Duration::from_secs(30)).unwrap() {
            HostEvent::CommandOutput {
                chunk,
                stream: plan_host::Stream::Stdout,
                ..
            } => stdout.push_str(&chunk),
            HostEvent::CommandExited(run) => break run,
            HostEvent::CommandOutput { .. }
            | HostEvent::ApprovalRequested(_)
            | HostEvent::ApprovalResolved(_)
            | HostEvent::ExecutionStateChanged { .. }
            | HostEvent::SessionChanged(_) => {}
        }
    };
    assert!(run.network, "{run:?}");
    assert!(
        stdout.contains("PermissionError") && !stdout.contains("HTTP/1.1"),
        "the command reached the card: {stdout}"
    );
    assert_eq!(
        host.approval(&approval.id).unwrap().approval.status,
        ApprovalStatus::Pending
    );
}
