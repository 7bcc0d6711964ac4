//! The audit export's costs, measured in one run (docs/PERFORMANCE.md):
//!
//! 1. approving with the collector down vs with export off: the median time
//!    of `Host::approve`, alternating the two hosts round by round;
//! 2. the host's peak RSS while it exports 100,000 records to a collector
//!    stand-in on loopback vs its peak RSS with export off, each measured
//!    in a child process of this binary (the stand-in runs in the parent).
//!
//! Prints the figures and the ratios; asserts nothing about speed.
//! `cargo bench -p plan-host --bench export`; PLAN_BENCH_DIR puts the
//! databases elsewhere (default: the system temporary directory).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use plan_audit_export::{ExportConfig, Protocol};
use plan_core::{Effect, Mode, Origin, PermissionMode, SessionId, ToolAuditEntry, ToolAuditKind, ToolCall};
use plan_host::{ExpiryTimer, Host, HostOptions, NewSession};
use plan_storage::Store;

const ROUNDS: usize = 12;
const PER_ROUND: usize = 25;
const RECORDS: u64 = 100_000;

fn bench_dir() -> tempfile::TempDir {
    match std::env::var_os("PLAN_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(dir).unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

fn submit_pending(host: &Host, root: &str, id: &str) -> plan_host::ApprovalId {
    host.create_session(NewSession {
        session_id: Some(id.into()),
        workspace_root: Some(root.to_owned()),
        mode: Some(Mode::Plan),
        permission_mode: None,
    })
    .unwrap();
    let turn = host
        .start_turn(&SessionId::from(id), Origin::Interactive)
        .unwrap();
    let call = ToolCall {
        call_id: "c1".into(),
        name: "SubmitPlan".to_owned(),
        input: serde_json::json!({"title": "Bench", "markdown": "# Plan\n\n1. Go.\n", "question": "OK?"}),
    };
    let outcomes = host
        .tool_calls(&SessionId::from(id), &turn.turn_id, vec![call])
        .unwrap();
    outcomes[0].approval.clone().unwrap().id
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn approve_pair() {
    let dir = bench_dir();
    let root = dir.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir(&root).unwrap();
    let root = root.to_str().unwrap().to_owned();
    // A port with nothing behind it: every connection is refused.
    let down = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let options = |export: Option<ExportConfig>| HostOptions {
        expiry: ExpiryTimer::Manual,
        audit_export: export,
        ..HostOptions::default()
    };
    let off = Host::open(dir.path().join("off.db"), options(None)).unwrap();
    let on = Host::open(
        dir.path().join("down.db"),
        options(Some(ExportConfig::new(format!("http://{down}/v1/logs")))),
    )
    .unwrap();
    let (mut off_times, mut on_times) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        // Which host goes first alternates, so neither always follows the other.
        let mut pair = [(&off, &mut off_times, "off"), (&on, &mut on_times, "down")];
        if round % 2 == 1 {
            pair.reverse();
        }
        for (host, times, name) in pair {
            let pending: Vec<_> = (0..PER_ROUND)
                .map(|index| submit_pending(host, &root, &format!("{name}-{round}-{index}")))
                .collect();
            for id in pending {
                let started = Instant::now();
                host.approve(&id, PermissionMode::Ask).unwrap();
                times.push(started.elapsed());
            }
        }
    }
    let (off_median, on_median) = (median(off_times), median(on_times));
    println!(
        "approve: export off {off_median:?}, collector down {on_median:?}, ratio {:.3} ({} approvals each)",
        on_median.as_secs_f64() / off_median.as_secs_f64(),
        ROUNDS * PER_ROUND
    );
}

/// A database holding `RECORDS` audit records (tool entries, written in
/// transactions of 1,000).
fn history(db: &Path) {
    let (mut store, _) = Store::open(db).unwrap();
    let mut session = plan_core::Session::new("s", Some("/w".to_owned()));
    session.mode = Mode::Agent;
    store.create_session(&session, 0).unwrap();
    for chunk in 0..RECORDS / 1000 {
        let effects: Vec<Effect> = (0..1000)
            .map(|index| {
                Effect::RecordToolAudit(ToolAuditEntry {
                    kind: ToolAuditKind::AutoAllowed,
                    session_id: "s".into(),
                    turn_id: "t".into(),
                    execution_id: None,
                    call_id: format!("c{chunk}-{index}").into(),
                    tool: Some("Write".to_owned()),
                    permission_mode: Some(PermissionMode::Auto),
                    error_code: None,
                    at: 1_800_000_000_000 + i64::try_from(chunk * 1000 + index).unwrap(),
                })
            })
            .collect();
        store.apply(&effects, 1_800_000_000_000).unwrap();
    }
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The child: opens a host on `db` (exporting to `endpoint` when given),
/// waits until the cursor reaches the head, prints its peak RSS.
fn child(db: &Path, endpoint: Option<&str>) {
    let export = endpoint.map(|endpoint| {
        let mut config = ExportConfig::new(endpoint);
        config.protocol = Protocol::HttpProtobuf;
        config
    });
    let host = Host::open(
        db,
        HostOptions {
            expiry: ExpiryTimer::Manual,
            audit_export: export,
            ..HostOptions::default()
        },
    )
    .unwrap();
    let reader = Store::open_read_only(db).unwrap();
    let (head, _) = reader.audit_head().unwrap();
    let started = Instant::now();
    if endpoint.is_some() {
        while reader.audit_cursor().unwrap().seq < head {
            std::thread::sleep(Duration::from_millis(50));
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "export did not finish"
            );
        }
    }
    println!("{} {}", peak_rss_kib(), started.elapsed().as_millis());
    drop(host);
}

/// A collector stand-in that accepts every request (and counts the bytes).
fn sink() -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let bytes = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&bytes);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut data = Vec::new();
            let mut buffer = [0_u8; 65536];
            let mut wanted = None;
            while let Ok(read) = stream.read(&mut buffer) {
                if read == 0 {
                    break;
                }
                data.extend_from_slice(&buffer[..read]);
                if wanted.is_none()
                    && let Some(end) = data.windows(4).position(|window| window == b"\r\n\r\n")
                {
                    let head = String::from_utf8_lossy(&data[..end]).to_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|line| line.strip_prefix("content-length:"))
                        .and_then(|value| value.trim().parse().ok())
                        .unwrap_or(0);
                    wanted = Some(end + 4 + length);
                }
                if wanted.is_some_and(|wanted| data.len() >= wanted) {
                    break;
                }
            }
            counted.fetch_add(data.len() as u64, Ordering::SeqCst);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
        }
    });
    (format!("http://{address}/v1/logs"), bytes)
}

fn run_child(db: &Path, endpoint: Option<&str>) -> (u64, u128) {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command.arg("--export-rss-child").arg(db);
    if let Some(endpoint) = endpoint {
        command.arg(endpoint);
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let mut parts = text.split_whitespace();
    (
        parts.next().unwrap().parse().unwrap(),
        parts.next().unwrap().parse().unwrap(),
    )
}

fn rss_pair() {
    let dir = bench_dir();
    let template = dir.path().join("history.db");
    let started = Instant::now();
    history(&template);
    println!("rss: wrote {RECORDS} records in {:?}", started.elapsed());
    let copy = |name: &str| -> PathBuf {
        let path = dir.path().join(name);
        std::fs::copy(&template, &path).unwrap();
        path
    };
    let (endpoint, bytes) = sink();
    let (off_kib, _) = run_child(&copy("off.db"), None);
    let (on_kib, millis) = run_child(&copy("on.db"), Some(&endpoint));
    println!(
        "rss: export off peak {off_kib} KiB, exporting {RECORDS} records peak {on_kib} KiB, \
         difference {:.1} MiB; export took {millis} ms, {} bytes sent",
        (on_kib as f64 - off_kib as f64) / 1024.0,
        bytes.load(Ordering::SeqCst)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(index) = args.iter().position(|arg| arg == "--export-rss-child") {
        child(
            Path::new(&args[index + 1]),
            args.get(index + 2).map(String::as_str),
        );
        return;
    }
    // `cargo test --benches` runs this with --bench absent: measure only
    // when asked (`cargo bench` passes --bench).
    if !args.iter().any(|arg| arg == "--bench") {
        return;
    }
    approve_pair();
    rss_pair();
}
