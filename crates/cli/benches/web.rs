//! The approval card's latency: from a decision on the card (`POST
//! /decision` to `serve --web`) to the `plan/approvalResolved` notification
//! on the sidecar's stdout, against the same approve sent as `plan/approve`
//! on stdin, in the same run and interleaved, so that disk and CPU drift
//! hit both alike. Target: web <= 2 x stdin + 5 ms (medians).
//!
//! Each round makes a fresh Plan session with one pending plan (untimed),
//! then times one decision. The web decision opens its own connection, as a
//! browser's first POST would. `WEB_BENCH_ROUNDS` sets the number of rounds
//! per path (default 200); `WEB_BENCH_DIR` puts the database and workspace
//! there (for example `/dev/shm`). It only measures; CI compiles it and does
//! not run it (`cargo bench -p plan-checkpoint --bench web`).

// Benchmark harness, like test code: a failed setup must stop the run loudly.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Serve {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: i64,
    base: String,
}

impl Serve {
    fn start(db: &Path) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_plan-checkpoint"))
            .args(["serve", "--web", "127.0.0.1:0", "--db"])
            .arg(db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning plan-checkpoint serve --web");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut serve = Serve {
            child,
            stdin,
            stdout,
            next_id: 0,
            base: String::new(),
        };
        let init = serve.call("initialize", json!({"protocolVersion": 9}));
        serve.base = init["capabilities"]["web"]["url"].as_str().unwrap().to_owned();
        serve
    }

    fn send(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        self.stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        self.stdin.flush().unwrap();
        self.next_id
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        assert!(self.stdout.read_line(&mut line).unwrap() > 0, "serve ended");
        serde_json::from_str(&line).unwrap()
    }

    /// Sends a request and returns its result; notifications are skipped.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        loop {
            let message = self.read();
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
        }
    }

    /// Reads until the `plan/approvalResolved` notification.
    fn until_resolved(&mut self) -> Value {
        loop {
            let message = self.read();
            if message["method"] == "plan/approvalResolved" {
                return message;
            }
        }
    }
}

/// A fresh session with one pending plan: (approval id, card URL, sha256).
fn pending(serve: &mut Serve, workspace: &Path, round: usize) -> (String, String, String) {
    let session = format!("s{round}");
    serve.call(
        "session/create",
        json!({"sessionId": session, "workspaceRoot": workspace, "mode": "plan"}),
    );
    let turn = serve.call(
        "turn/start",
        json!({"sessionId": session, "prompt": "plan", "origin": "interactive"}),
    );
    let result = serve.call(
        "turn/toolCalls",
        json!({"sessionId": session, "turnId": turn["turnId"], "calls": [{"callId": "c", "name": "SubmitPlan",
            "input": {"title": "Bench", "question": "Go?", "markdown": "# Plan\n\n1. Measure.\n"}}]}),
    );
    let approval = &result["results"][0]["approval"];
    let id = approval["id"].as_str().unwrap().to_owned();
    let sha256 = approval["artifact"]["sha256"].as_str().unwrap().to_owned();
    let url = serve.call("plan/cardUrl", json!({"approvalId": id}))["url"]
        .as_str()
        .unwrap()
        .to_owned();
    (id, url, sha256)
}

fn post_decision(base: &str, token: &str, sha256: &str) {
    let authority = base.trim_start_matches("http://").trim_end_matches('/');
    let body =
        json!({"token": token, "sha256": sha256, "decision": "approve", "permissionMode": "ask"}).to_string();
    let mut stream = TcpStream::connect(authority).unwrap();
    write!(
        stream,
        "POST /decision HTTP/1.1\r\nHost: {authority}\r\nOrigin: http://{authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn main() {
    // `cargo bench -- --test` (and CI's compile) runs nothing.
    if std::env::args().any(|arg| arg == "--test" || arg == "--list") {
        return;
    }
    let rounds: usize = std::env::var("WEB_BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let dir = match std::env::var_os("WEB_BENCH_DIR") {
        Some(root) => tempfile::tempdir_in(root).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let workspace = dir.path().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    let mut serve = Serve::start(&dir.path().join("plan.db"));
    let (mut stdin_times, mut web_times) = (Vec::new(), Vec::new());
    for round in 0..rounds * 2 {
        let (id, url, sha256) = pending(&mut serve, &workspace, round);
        let started = Instant::now();
        if round % 2 == 0 {
            serve.send("plan/approve", json!({"approvalId": id, "permissionMode": "ask"}));
            serve.until_resolved();
            stdin_times.push(started.elapsed());
        } else {
            let token = url.rsplit('/').next().unwrap().to_owned();
            post_decision(&serve.base, &token, &sha256);
            serve.until_resolved();
            web_times.push(started.elapsed());
        }
    }
    drop(serve.stdin);
    let _ = serve.child.wait();
    let stdin_median = median(&mut stdin_times);
    let web_median = median(&mut web_times);
    let budget = stdin_median * 2 + Duration::from_millis(5);
    println!(
        "web/decision_to_resolved: median {web_median:?} over {rounds} rounds\n\
         stdin/approve_to_resolved: median {stdin_median:?} over {rounds} rounds\n\
         ratio web/stdin: {:.2}x; target web <= 2 x stdin + 5 ms = {budget:?}: {}",
        web_median.as_secs_f64() / stdin_median.as_secs_f64(),
        if web_median <= budget { "met" } else { "MISSED" }
    );
}
