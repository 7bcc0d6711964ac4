//! `serve` benchmarks (criterion): round trips per second through the real
//! `plan-checkpoint serve` process over pipes, next to the storage floor
//! measured in the same run.
//!
//! - `serve/plan_get`: one `plan/get` round trip.
//! - `serve/submission`: `turn/start` + `SubmitPlan` + `plan/reject` (the
//!   reject frees the session for the next round), three round trips.
//! - `floor/submission`: the durable work of a submission done by hand:
//!   `std::fs` create-new, write, fsync file and directory, SHA-256, and one
//!   rusqlite INSERT committed under WAL + `synchronous = FULL`.
//! - `floor/submission_and_reject`: the same plus the UPDATE commit a
//!   reject makes, so it is the floor of exactly what `serve/submission` does
//!   (four fsyncs: file, directory, two commits).
//! - `floor/schema_submission_and_reject`: the same durable work with the
//!   rows the host writes in the schema it writes them to (v10, made by a
//!   host, with every index of `plan_approvals`): the INSERT of the whole
//!   approval row in one commit, the reject's UPDATE in another (neither
//!   event changes the session row, so the host writes none of it). What
//!   the host adds over this is
//!   its own code; what this adds over the plain floor is the frozen
//!   schema's index upkeep.
//! - `host/submission`: the same three calls on an in-process `plan_host::Host`
//!   (no process, no pipes, no JSON), which does the same durable work
//!   through plan-storage's real schema.
//!
//! `SERVE_BENCH_ONLY` (`serve`, `host`, `floor`, `schema-floor`, or `setup`
//! for none) runs one path alone in the `overhead` pass, for a profiler.
//!
//! `SERVE_BENCH_DIR` puts every file there (for example `/dev/shm`, which
//! takes fsync latency out and leaves the CPU, pipe and JSON cost).
//!
//! A last pass (`overhead`) times all of them interleaved, so disk drift
//! hits each alike, and prints medians: serve over the in-process host is
//! what the dispatcher, JSON and pipes add (target: under 10% of the
//! floor); the host over the floor is what plan-storage's schema and checks
//! add. These benchmarks only measure; CI compiles them and does not run
//! them.

// Benchmark harness, like test code: a failed setup must stop the run loudly.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use plan_host::SessionId;
use serde_json::{Value, json};
use sha2::Digest;

const MARKDOWN: &str = "# Plan\n\n1. Read the parser.\n2. Split it in two.\n3. Run the tests.\n";

/// A running serve process with a synchronous client. Not the tests' shared
/// client (`tests/cli/client.rs`) on purpose: that one reads through a
/// thread and a channel so a hung server fails a test, which would add a
/// thread hand-off to every round trip measured here.
struct Serve {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: i64,
    request: Vec<u8>,
    line: String,
}

impl Serve {
    fn start(db: &Path) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_plan-checkpoint"))
            .arg("serve")
            .arg("--db")
            .arg(db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning plan-checkpoint serve");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut serve = Serve {
            child,
            stdin,
            stdout,
            next_id: 1,
            request: Vec::new(),
            line: String::new(),
        };
        serve.call("initialize", &json!({"protocolVersion": 9}));
        serve
    }

    /// One round trip; notifications in between are read and dropped.
    fn call(&mut self, method: &str, params: &Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        // One write per request, as a client's line: `writeln!` on the
        // unbuffered pipe would make one system call per JSON token, and
        // serve would wake up for each of them.
        self.request.clear();
        serde_json::to_writer(&mut self.request, &request).unwrap();
        self.request.push(b'\n');
        self.stdin.write_all(&self.request).unwrap();
        loop {
            self.line.clear();
            assert!(self.stdout.read_line(&mut self.line).unwrap() > 0, "serve exited");
            let message: Value = serde_json::from_str(&self.line).unwrap();
            if message.get("id").is_none() {
                continue;
            }
            assert_eq!(message["id"], id);
            match message.get("result") {
                Some(result) => return result.clone(),
                None => panic!("{method} failed: {message}"),
            }
        }
    }

    /// turn/start + SubmitPlan + plan/reject; returns how long the
    /// SubmitPlan's `turn/toolCalls` round trip alone took.
    fn submission(&mut self, session: &str) -> Duration {
        let turn = self.call(
            "turn/start",
            &json!({"sessionId": session, "prompt": "p", "origin": "interactive"}),
        );
        let calls = json!({"sessionId": session, "turnId": turn["turnId"], "calls": [
            {"callId": "c", "name": "SubmitPlan", "input": {"title": "Split parser", "markdown": MARKDOWN, "question": "Go?"}}
        ]});
        let start = Instant::now();
        let results = self.call("turn/toolCalls", &calls);
        let submitted = start.elapsed();
        let approval = &results["results"][0]["approval"]["id"];
        black_box(self.call("plan/reject", &json!({"approvalId": approval})));
        submitted
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The artifact's durable work, as both floors do it: create-new, write,
/// fsync of the file and of its directory, SHA-256 of the bytes.
fn write_artifact(dir: &Path, name: &str) -> (PathBuf, String) {
    let path = dir.join(name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .unwrap();
    file.write_all(MARKDOWN.as_bytes()).unwrap();
    file.sync_all().unwrap();
    std::fs::File::open(dir).unwrap().sync_all().unwrap();
    (path, hex::encode(sha2::Sha256::digest(MARKDOWN.as_bytes())))
}

/// The hand-written durable floor of a submission.
struct Floor {
    dir: PathBuf,
    conn: rusqlite::Connection,
    count: u64,
}

impl Floor {
    fn new(base: &Path) -> Floor {
        let dir = base.join("floor-plan");
        std::fs::create_dir_all(&dir).unwrap();
        let conn = rusqlite::Connection::open(base.join("floor.db")).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
             CREATE TABLE IF NOT EXISTS approvals (id TEXT PRIMARY KEY, path TEXT NOT NULL, \
             sha256 TEXT NOT NULL, size INTEGER NOT NULL, status TEXT NOT NULL, created_at INTEGER NOT NULL);",
        )
        .unwrap();
        Floor { dir, conn, count: 0 }
    }

    /// create-new + write + fsync file and directory + SHA-256 + INSERT commit.
    fn submission(&mut self) -> String {
        self.count += 1;
        let id = format!("a{}", self.count);
        let (path, sha256) = write_artifact(&self.dir, &format!("{id}.md"));
        let transaction = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .unwrap();
        transaction
            .execute(
                "INSERT INTO approvals (id, path, sha256, size, status, created_at) VALUES (?1, ?2, ?3, ?4, 'pending', 0)",
                rusqlite::params![id, path.to_str().unwrap(), sha256, MARKDOWN.len() as i64],
            )
            .unwrap();
        transaction.commit().unwrap();
        id
    }

    /// The reject's UPDATE commit.
    fn reject(&mut self, id: &str) {
        let transaction = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .unwrap();
        transaction
            .execute(
                "UPDATE approvals SET status = 'rejected' WHERE id = ?1 AND status = 'pending'",
                [id],
            )
            .unwrap();
        transaction.commit().unwrap();
    }
}

/// The floor on the host's own schema: the rows a submission and its reject
/// write, by hand, into a v10 database a host made.
struct SchemaFloor {
    dir: PathBuf,
    conn: rusqlite::Connection,
    count: u64,
    /// Audit records written by `audited_submission`.
    count_facts: u64,
}

impl SchemaFloor {
    fn new(base: &Path, workspace: &Path) -> SchemaFloor {
        let db = base.join("schema-floor.db");
        let host = plan_host::Host::open(&db, plan_host::HostOptions::default()).unwrap();
        host.create_session(plan_host::NewSession {
            session_id: Some("floor".into()),
            workspace_root: Some(workspace.to_str().unwrap().to_owned()),
            mode: Some(plan_core::Mode::Plan),
            permission_mode: None,
        })
        .unwrap();
        host.close();
        drop(host);
        let dir = base.join("schema-floor-plan");
        std::fs::create_dir_all(&dir).unwrap();
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;")
            .unwrap();
        SchemaFloor {
            dir,
            conn,
            count: 0,
            count_facts: 0,
        }
    }

    /// The submission's row and, with `audit`, the audit record the host
    /// commits with it (a `planSubmitted` transcript entry with its chain
    /// hash, and the chain's head), by hand in one transaction.
    fn insert_submission(&mut self, params: &[&dyn rusqlite::ToSql], audit: bool) {
        let transaction = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .unwrap();
        transaction
            .prepare_cached(
                "INSERT INTO plan_approvals (id, session_id, turn_id, title, question, artifact_path, \
                 artifact_sha256, artifact_size, status, error_code, created_at, expires_at, decided_at, \
                 permission_mode, execution_id, execution_state) \
                 VALUES (?1, 'floor', ?2, 'Split parser', 'Go?', ?3, ?4, ?5, 'pending', NULL, ?6, ?7, NULL, NULL, NULL, NULL)",
            )
            .unwrap()
            .execute(params)
            .unwrap();
        if audit {
            self.count_facts += 1;
            let seq = self.count_facts;
            let hash = hex::encode(sha2::Sha256::digest(format!("{seq}").as_bytes()));
            let entry = json!({"type": "planSubmitted", "approvalId": format!("floor-{seq}"),
                "title": "Split parser", "question": "Go?", "audit": {"seq": seq, "hash": hash}});
            transaction
                .prepare_cached(
                    "INSERT INTO transcript_entries (session_id, seq, role, content_json, created_at) \
                     VALUES ('floor', (SELECT COALESCE(MAX(seq), 0) + 1 FROM transcript_entries WHERE session_id = 'floor'), \
                     'system', ?1, 0)",
                )
                .unwrap()
                .execute([entry.to_string()])
                .unwrap();
            transaction
                .prepare_cached(
                    "INSERT INTO settings (key, value_json) VALUES ('audit.chain.head', ?1) \
                     ON CONFLICT (key) DO UPDATE SET value_json = excluded.value_json",
                )
                .unwrap()
                .execute([json!({"seq": seq, "hash": hash}).to_string()])
                .unwrap();
        }
        transaction.commit().unwrap();
    }

    /// A submission's durable work with its audit record; returns how long
    /// it took (the reject is untimed).
    fn audited_submission(&mut self) -> Duration {
        self.submission_then_reject(true)
    }

    fn commit(&mut self, sql: &str, params: &[&dyn rusqlite::ToSql]) {
        let transaction = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .unwrap();
        assert_eq!(
            transaction.prepare_cached(sql).unwrap().execute(params).unwrap(),
            1
        );
        transaction.commit().unwrap();
    }

    /// Returns how long the submission alone (the artifact and its row's
    /// commit) took.
    fn submission_and_reject(&mut self) -> Duration {
        self.submission_then_reject(false)
    }

    /// The artifact, its row (with `audit`, its audit record too) in one
    /// commit, then the reject's commit; returns how long the submission
    /// took.
    fn submission_then_reject(&mut self, audit: bool) -> Duration {
        let start = Instant::now();
        self.count += 1;
        let id = format!("floor-{:012}", self.count);
        let name = format!("{id}.md");
        let (_, sha256) = write_artifact(&self.dir, &name);
        let now = self.count as i64;
        self.insert_submission(
            &[
                &id,
                &format!("turn-{id}"),
                &format!(".pi/plan/{name}"),
                &sha256,
                &(MARKDOWN.len() as i64),
                &now,
                &(now + 1_800_000),
            ],
            audit,
        );
        let submitted = start.elapsed();
        self.commit(
            "UPDATE plan_approvals SET status = 'rejected', decided_at = ?2 WHERE id = ?1 AND status = 'pending'",
            &[&id, &now],
        );
        submitted
    }
}

/// The same submission on an in-process host.
struct InProcess {
    host: plan_host::Host,
}

impl InProcess {
    fn new(base: &Path, workspace: &Path) -> InProcess {
        let host = plan_host::Host::open(base.join("host.db"), plan_host::HostOptions::default()).unwrap();
        host.create_session(plan_host::NewSession {
            session_id: Some("bench".into()),
            workspace_root: Some(workspace.to_str().unwrap().to_owned()),
            mode: Some(plan_core::Mode::Plan),
            permission_mode: None,
        })
        .unwrap();
        InProcess { host }
    }

    /// turn/start + SubmitPlan + reject; returns how long the SubmitPlan's
    /// `tool_calls` alone took.
    fn submission(&self) -> Duration {
        let turn = self
            .host
            .start_turn(&SessionId::from("bench"), plan_core::Origin::Interactive)
            .unwrap();
        let call = plan_core::ToolCall {
            call_id: "c".into(),
            name: "SubmitPlan".to_owned(),
            input: json!({"title": "Split parser", "markdown": MARKDOWN, "question": "Go?"}),
        };
        let start = Instant::now();
        let outcomes = self
            .host
            .tool_calls(&SessionId::from("bench"), &turn.turn_id, vec![call])
            .unwrap();
        let submitted = start.elapsed();
        let approval = outcomes[0].approval.as_ref().unwrap();
        black_box(self.host.reject(&approval.id).unwrap());
        submitted
    }
}

/// Everything one run needs, in one temporary directory.
struct Setup {
    _dir: tempfile::TempDir,
    serve: Serve,
    floor: Floor,
    schema_floor: SchemaFloor,
    host: InProcess,
    approval_id: String,
}

fn setup() -> Setup {
    // SERVE_BENCH_DIR=/dev/shm takes fsync latency out, leaving the CPU cost.
    let dir = match std::env::var_os("SERVE_BENCH_DIR") {
        Some(base) => tempfile::tempdir_in(base).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let base = dir.path().canonicalize().unwrap();
    let workspace = base.join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    // Each path writes its plans into a directory of its own, as each
    // floor does, so no directory grows faster than its floor's.
    let in_process_workspace = base.join("in-process-workspace");
    std::fs::create_dir(&in_process_workspace).unwrap();
    let mut serve = Serve::start(&base.join("plan.db"));
    serve.call(
        "session/create",
        &json!({"sessionId": "bench", "workspaceRoot": workspace.to_str().unwrap(), "mode": "plan"}),
    );
    serve.call(
        "session/create",
        &json!({"sessionId": "get", "workspaceRoot": workspace.to_str().unwrap(), "mode": "plan"}),
    );
    let turn = serve.call(
        "turn/start",
        &json!({"sessionId": "get", "prompt": "p", "origin": "interactive"}),
    );
    let calls = json!({"sessionId": "get", "turnId": turn["turnId"], "calls": [
        {"callId": "c", "name": "SubmitPlan", "input": {"title": "t", "markdown": MARKDOWN, "question": "q"}}
    ]});
    let results = serve.call("turn/toolCalls", &calls);
    let approval_id = results["results"][0]["approval"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    Setup {
        floor: Floor::new(&base),
        schema_floor: SchemaFloor::new(&base, &workspace),
        host: InProcess::new(&base, &in_process_workspace),
        _dir: dir,
        serve,
        approval_id,
    }
}

fn benches(c: &mut Criterion) {
    let mut setup = setup();
    let mut group = c.benchmark_group("serve");
    group.throughput(Throughput::Elements(1));
    let get = json!({"approvalId": setup.approval_id});
    group.bench_function("plan_get", |b| {
        b.iter(|| black_box(setup.serve.call("plan/get", &get)))
    });
    group.bench_function("submission", |b| b.iter(|| setup.serve.submission("bench")));
    group.finish();

    let mut group = c.benchmark_group("host");
    group.throughput(Throughput::Elements(1));
    group.bench_function("submission", |b| b.iter(|| black_box(setup.host.submission())));
    group.finish();

    let mut group = c.benchmark_group("floor");
    group.throughput(Throughput::Elements(1));
    group.bench_function("submission", |b| b.iter(|| black_box(setup.floor.submission())));
    group.bench_function("submission_and_reject", |b| {
        b.iter(|| {
            let id = setup.floor.submission();
            setup.floor.reject(&id);
        });
    });
    group.bench_function("schema_submission_and_reject", |b| {
        b.iter(|| setup.schema_floor.submission_and_reject())
    });
    group.finish();
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Interleaved timing of the serve submission and both floors, so that disk
/// and machine drift hit all three alike; prints the overhead.
fn overhead(_c: &mut Criterion) {
    let rounds: usize = std::env::var("SERVE_BENCH_OVERHEAD_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let mut setup = setup();
    if let Ok(only) = std::env::var("SERVE_BENCH_ONLY") {
        one_path(&mut setup, &only, rounds);
        return;
    }
    let (mut serve, mut host, mut floor, mut floor_reject, mut schema_floor, mut get) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    // The submission alone: SubmitPlan's `turn/toolCalls` through serve, and
    // its durable work by hand on the v10 schema (artifact, row, commit).
    let (mut serve_submit, mut host_submit, mut schema_submit, mut audited_submit) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let get_params = json!({"approvalId": setup.approval_id});
    for _ in 0..rounds {
        let start = Instant::now();
        serve_submit.push(setup.serve.submission("bench"));
        serve.push(start.elapsed());
        let start = Instant::now();
        host_submit.push(setup.host.submission());
        host.push(start.elapsed());
        let start = Instant::now();
        black_box(setup.floor.submission());
        floor.push(start.elapsed());
        let start = Instant::now();
        let id = setup.floor.submission();
        setup.floor.reject(&id);
        floor_reject.push(start.elapsed());
        let start = Instant::now();
        schema_submit.push(setup.schema_floor.submission_and_reject());
        schema_floor.push(start.elapsed());
        audited_submit.push(setup.schema_floor.audited_submission());
        let start = Instant::now();
        black_box(setup.serve.call("plan/get", &get_params));
        get.push(start.elapsed());
    }
    let [serve, host, floor, floor_reject, schema_floor, get] = [
        &mut serve,
        &mut host,
        &mut floor,
        &mut floor_reject,
        &mut schema_floor,
        &mut get,
    ]
    .map(|samples| median(samples));
    let per_second = |d: Duration| 1.0 / d.as_secs_f64();
    let percent = |part: Duration, of: Duration| part.as_secs_f64() / of.as_secs_f64() * 100.0;
    println!("\nserve overhead ({rounds} interleaved rounds, medians):");
    println!(
        "  serve plan/get                      {get:>10.1?}  {:>8.0} round trips/s",
        per_second(get)
    );
    println!(
        "  serve submission (3 round trips)    {serve:>10.1?}  {:>8.0} submissions/s",
        per_second(serve)
    );
    println!(
        "  in-process host submission          {host:>10.1?}  {:>8.0} /s",
        per_second(host)
    );
    println!(
        "  floor: submission + reject          {floor_reject:>10.1?}  {:>8.0} /s",
        per_second(floor_reject)
    );
    println!(
        "  floor: submission (1 commit)        {floor:>10.1?}  {:>8.0} /s",
        per_second(floor)
    );
    println!(
        "  floor on the v10 schema: + reject   {schema_floor:>10.1?}  {:>8.0} /s",
        per_second(schema_floor)
    );
    let dispatcher = serve.saturating_sub(host);
    println!(
        "  dispatcher + JSON + pipes (serve - host): {dispatcher:.1?} = {:.1}% of the matching floor (target < 10%)",
        percent(dispatcher, floor_reject)
    );
    println!(
        "  host over the matching floor: {:+.1}%; serve over the matching floor: {:+.1}%",
        percent(host, floor_reject) - 100.0,
        percent(serve, floor_reject) - 100.0
    );
    println!(
        "  over the v10-schema floor: host {:+.1}%, serve {:+.1}%",
        percent(host, schema_floor) - 100.0,
        percent(serve, schema_floor) - 100.0
    );
    let (serve_submit, host_submit, schema_submit, audited_submit) = (
        median(&mut serve_submit),
        median(&mut host_submit),
        median(&mut schema_submit),
        median(&mut audited_submit),
    );
    // In microseconds throughout: `Duration`'s own format drops to one
    // decimal of a millisecond above 1 ms, too coarse for a ratio.
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "  SubmitPlan turn/toolCalls through serve {:.1} µs vs its durable work by hand on the v10 schema {:.1} µs: {:.2}x (goal <= 1.2)",
        micros(serve_submit),
        micros(schema_submit),
        serve_submit.as_secs_f64() / schema_submit.as_secs_f64()
    );
    println!(
        "  ... the same SubmitPlan on the in-process host (no pipes, no JSON) {:.1} µs: {:.2}x",
        micros(host_submit),
        host_submit.as_secs_f64() / schema_submit.as_secs_f64()
    );
    println!(
        "  ... vs the same by hand with the audit record it commits with the row {:.1} µs: {:.2}x",
        micros(audited_submit),
        serve_submit.as_secs_f64() / audited_submit.as_secs_f64()
    );
}

/// `SERVE_BENCH_ONLY=<path>`: `rounds` submissions through one path alone,
/// so that a profiler or `perf stat -e task-clock` sees only its work (the
/// CPU time, which a loaded machine disturbs less than the wall clock).
fn one_path(setup: &mut Setup, only: &str, rounds: usize) {
    let start = Instant::now();
    for _ in 0..rounds {
        match only {
            "serve" => {
                black_box(setup.serve.submission("bench"));
            }
            "host" => {
                black_box(setup.host.submission());
            }
            "floor" => {
                let id = setup.floor.submission();
                setup.floor.reject(&id);
            }
            "schema-floor" => {
                black_box(setup.schema_floor.submission_and_reject());
            }
            "setup" => {}
            other => panic!("SERVE_BENCH_ONLY is serve, host, floor, schema-floor or setup, not {other:?}"),
        }
    }
    let rounds = u32::try_from(rounds.max(1)).unwrap_or(u32::MAX);
    println!("{only}: {rounds} rounds, {:.1?} each", start.elapsed() / rounds);
}

criterion_group! {
    name = serve_benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
    targets = benches, overhead
}
criterion_main!(serve_benches);
