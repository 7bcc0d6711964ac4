//! Storage benchmarks (criterion), each a pair measured in the same run so
//! the ratio is what counts, not the machine:
//!
//! - `submission`: write an artifact and insert its pending approval through
//!   plan-storage, against a floor doing the same durable work with plain
//!   `std::fs` and rusqlite (create_new, write, fsync file and directory,
//!   SHA-256, one IMMEDIATE transaction committed under WAL + FULL).
//! - `migration`: open (and so migrate) a v8 database with 10k and with 1M
//!   transcript rows; the transcript is never rebuilt, so they should match.
//! - `startup_fence`: the fence over 10 live rows beside 1k and beside 1M
//!   historical approvals, each with its two chained facts, and a command
//!   run per ten approvals (3.2M transcript entries at 1M); it reads live
//!   rows through partial indexes and the open command runs from their
//!   kept set, never the transcript.
//! - `decision`: approving a pending 4 KiB plan as the host does (load the
//!   session's rows, plan-core's approve, one transaction), with the
//!   artifact re-read inside the decision (`Store::check_artifact`) and
//!   without it (the finding given as matching); the re-check's cost is the
//!   ratio.
//!
//! Setup (copying databases, resetting live rows) is outside the timed part.
//! `PLAN_STORAGE_BENCH_DIR` picks the directory the files live in (a tmpfs
//! such as /dev/shm takes fsync latency out of the figures); the system's
//! temporary directory is the default.
//! These benchmarks only measure; CI compiles them and does not run them.

// Benchmark harness, like test code: a failed setup must stop the run loudly.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use plan_core::{
    ApprovalStatus, Artifact, ArtifactCheck, ArtifactVerification, BootEpoch, Context, Effect, Event, Limits,
    PermissionMode, PlanApproval, SessionState,
};
use plan_storage::{Store, write_artifact};
use rusqlite::{Connection, params};
use sha2::Digest;

/// A fresh directory for one benchmark's files.
fn bench_dir() -> tempfile::TempDir {
    let created = match std::env::var_os("PLAN_STORAGE_BENCH_DIR") {
        Some(parent) => tempfile::tempdir_in(parent),
        None => tempfile::tempdir(),
    };
    created.expect("a temporary directory for the benchmark")
}

const NOW: i64 = 1_790_000_000_000;
const MARKDOWN: &[u8] = b"# Plan\n\n1. Read the parser.\n2. Split it in two.\n3. Run the tests.\n";

fn open_store(path: &Path) -> Store {
    match Store::open(path) {
        Ok((store, _)) => store,
        Err(error) => panic!("opening {}: {error}", path.display()),
    }
}

fn pending_row(index: u64, session_id: String, artifact: Artifact) -> PlanApproval {
    PlanApproval {
        id: format!("a{index}").into(),
        session_id: session_id.into(),
        turn_id: format!("t{index}").into(),
        title: "Split parser".to_owned(),
        question: "Go ahead?".to_owned(),
        artifact: Some(artifact),
        status: ApprovalStatus::Pending,
        error_code: None,
        created_at: NOW,
        expires_at: NOW + 1_800_000,
        decided_at: None,
        permission_mode: None,
        execution_id: None,
        execution_state: None,
    }
}

/// Creates `count` sessions numbered from `first`, untimed, so each timed
/// submission has a session without a pending approval.
fn create_sessions(conn: &Connection, first: u64, count: u64) {
    let created = conn.execute(
        "WITH RECURSIVE n(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1 + ?2 - 1) \
         INSERT INTO sessions (id, created_at, updated_at) SELECT 's' || i, 0, 0 FROM n",
        params![first as i64, count as i64],
    );
    if let Err(error) = created {
        panic!("creating sessions: {error}");
    }
}

fn submission(criterion: &mut Criterion) {
    let dir = bench_dir();
    let mut group = criterion.benchmark_group("submission");
    group.sample_size(30).measurement_time(Duration::from_secs(6));

    let workspace = dir.path().join("ours");
    let floor_workspace = dir.path().join("floor");
    for root in [&workspace, &floor_workspace] {
        if let Err(error) = std::fs::create_dir_all(root.join(".pi/plan")) {
            panic!("{error}");
        }
    }
    let root = workspace.to_string_lossy().into_owned();
    let ours_db = dir.path().join("ours.db");
    let mut store = open_store(&ours_db);
    let Ok(ours_setup) = Connection::open(&ours_db) else {
        panic!("setup connection")
    };
    let mut next: u64 = 0;
    group.bench_function("plan_storage", |bencher| {
        bencher.iter_custom(|iters| {
            create_sessions(&ours_setup, next, iters);
            let start = Instant::now();
            for _ in 0..iters {
                let suffix = format!("x{next}");
                let artifact = match write_artifact(&root, "Split parser", MARKDOWN, NOW, &suffix) {
                    Ok(artifact) => artifact,
                    Err(error) => panic!("{error}"),
                };
                let row = pending_row(next, format!("s{next}"), artifact);
                if let Err(error) = store.apply(&[Effect::InsertApproval(row)], NOW) {
                    panic!("{error}");
                }
                next += 1;
            }
            start.elapsed()
        });
    });

    // The floor: the same durable work with plain std::fs and rusqlite.
    let floor_db = dir.path().join("floor.db");
    drop(open_store(&floor_db));
    let Ok(conn) = Connection::open(&floor_db) else {
        panic!("floor connection")
    };
    if let Err(error) =
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
    {
        panic!("{error}");
    }
    let plan_dir = floor_workspace.join(".pi/plan");
    let mut floor_next: u64 = 0;
    group.bench_function("floor_std_fs_rusqlite", |bencher| {
        bencher.iter_custom(|iters| {
            create_sessions(&conn, floor_next, iters);
            let start = Instant::now();
            for _ in 0..iters {
                let relative = format!("20260101T000000Z-split-parser-x{floor_next}.md");
                let path = plan_dir.join(&relative);
                let written = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .and_then(|mut file| {
                        file.write_all(MARKDOWN)?;
                        file.sync_all()
                    })
                    .and_then(|()| std::fs::File::open(&plan_dir)?.sync_all());
                if let Err(error) = written {
                    panic!("{error}");
                }
                let sha = hex::encode(sha2::Sha256::digest(MARKDOWN));
                let inserted = conn.execute_batch("BEGIN IMMEDIATE").and_then(|()| {
                    conn.prepare_cached(
                        "INSERT INTO plan_approvals (id, session_id, turn_id, title, question, artifact_path, \
                         artifact_sha256, artifact_size, status, created_at, expires_at) \
                         VALUES (?1, ?2, ?3, 'Split parser', 'Go ahead?', ?4, ?5, ?6, 'pending', ?7, ?8)",
                    )?
                    .execute(params![
                        format!("a{floor_next}"),
                        format!("s{floor_next}"),
                        format!("t{floor_next}"),
                        format!(".pi/plan/{relative}"),
                        sha,
                        MARKDOWN.len() as i64,
                        NOW,
                        NOW + 1_800_000
                    ])?;
                    conn.execute_batch("COMMIT")
                });
                if let Err(error) = inserted {
                    panic!("{error}");
                }
                floor_next += 1;
            }
            start.elapsed()
        });
    });
    group.finish();
}

/// A v8 database (the contract's sample) with `rows` transcript entries,
/// generated in one INSERT ... SELECT over a recursive CTE.
fn v8_with_transcript(dir: &Path, rows: u64) -> PathBuf {
    let path = dir.join(format!("v8-{rows}.db"));
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v8-sample.sql");
    let Ok(sql) = std::fs::read_to_string(fixture) else {
        panic!("fixture")
    };
    let Ok(conn) = Connection::open(&path) else {
        panic!("v8 database")
    };
    let generated = conn.execute_batch(&sql).and_then(|()| {
        conn.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1) \
             INSERT INTO transcript_entries (session_id, seq, role, content_json, created_at) \
             SELECT 's-agent', 1000 + i, 'assistant', \
                    '{\"text\":\"line ' || i || ' of a long and realistic transcript entry\"}', 1750000000000 + i \
             FROM n",
            [rows as i64],
        )
    });
    if let Err(error) = generated {
        panic!("{error}");
    }
    path
}

/// Bytes of the scratch file every migration iteration copies before timing.
const SCRATCH_BYTES: usize = 128 * 1024 * 1024;

fn migration(criterion: &mut Criterion) {
    let dir = bench_dir();
    let scratch = dir.path().join("scratch");
    let pattern: Vec<u8> = (0..SCRATCH_BYTES).map(|index| (index % 251) as u8).collect();
    if let Err(error) = std::fs::write(&scratch, pattern) {
        panic!("{error}");
    }
    let mut group = criterion.benchmark_group("migration");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    for (label, rows) in [
        ("10k_transcript_rows", 10_000_u64),
        ("1m_transcript_rows", 1_000_000),
    ] {
        let base = v8_with_transcript(dir.path(), rows);
        let target = dir.path().join(format!("migrating-{rows}.db"));
        group.bench_function(label, |bencher| {
            bencher.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    for suffix in ["-wal", "-shm"] {
                        let mut side = target.as_os_str().to_owned();
                        side.push(suffix);
                        let _absent = std::fs::remove_file(side);
                    }
                    // The copy is flushed before the clock starts: otherwise
                    // the migration's first fsync would also write back the
                    // copy's dirty pages, a cost of the setup, not of migrating.
                    let copied =
                        std::fs::copy(&base, &target).and_then(|_| std::fs::File::open(&target)?.sync_all());
                    // Copying 100 MB of the 1M database would leave every CPU
                    // cache cold for the 1M case only. Both cases then read the
                    // same 128 MB scratch file (reading dirties nothing), so both
                    // start equally cold and the pair compares the migrations.
                    let scratch_read = std::fs::read(&scratch).map(|bytes| black_box(bytes.len()));
                    if let Err(error) = copied.and(scratch_read.map(|_| ())) {
                        panic!("{error}");
                    }
                    let start = Instant::now();
                    let opened = Store::open(&target);
                    total += start.elapsed();
                    match opened {
                        Ok((store, report)) => {
                            assert_eq!(report.from, Some(8));
                            black_box(store);
                        }
                        Err(error) => panic!("{error}"),
                    }
                }
                total
            });
        });
    }
    group.finish();
}

/// A v10 database with `history` finished approvals and 10 pending ones.
fn fence_database(dir: &Path, history: u64) -> (PathBuf, Connection) {
    let path = dir.join(format!("fence-{history}.db"));
    drop(open_store(&path));
    let Ok(conn) = Connection::open(&path) else {
        panic!("fence database")
    };
    let built =
        conn.execute_batch("PRAGMA foreign_keys = ON; BEGIN;")
            .and_then(|()| {
                create_sessions(&conn, 0, 100);
                conn.execute(
                    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1) \
             INSERT INTO plan_approvals (id, session_id, turn_id, title, question, artifact_path, \
               artifact_sha256, artifact_size, status, created_at, expires_at, decided_at) \
             SELECT 'h' || i, 's' || (i % 100), 't', 'old plan', 'ok?', '.pi/plan/h' || i || '.md', \
               printf('%064x', i), 100, 'rejected', 1700000000000 + i, 1700001800000 + i, 1700000000001 + i \
             FROM n",
                    [history as i64],
                )?;
                // Each historical approval's two chained facts (its
                // submission and its rejection) and, per ten approvals, a
                // command run's start and end: the transcript a long-lived
                // database holds once its history is numbered (3.2M entries
                // at 1M), which the fence must not read.
                conn.execute(
                    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1 * 2) \
             INSERT INTO transcript_entries (session_id, seq, role, content_json, created_at) \
             SELECT 's' || ((i / 2) % 100), 1000000000 + i, 'system', \
               json_object('type', CASE i % 2 WHEN 0 THEN 'planSubmitted' ELSE 'planRejected' END, \
                 'approvalId', 'h' || (i / 2), 'decision', 'rejected', 'backfilled', json('true'), \
                 'audit', json_object('seq', i, 'hash', printf('%064x', i))), 1700000000000 + i \
             FROM n",
                    [history as i64],
                )?;
                conn.execute(
                    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1 / 5) \
             INSERT INTO transcript_entries (session_id, seq, role, content_json, created_at) \
             SELECT 's' || ((i / 2) % 100), 2000000000 + i, 'tool', \
               json_object('type', CASE i % 2 WHEN 1 THEN 'commandStarted' ELSE 'commandEnded' END, \
                 'callId', 'c' || ((i + 1) / 2), 'sessionId', 's' || ((i / 2) % 100), 'turnId', 't', \
                 'command', 'cargo test', 'cwd', '.', 'shell', json_object('id', 'bash', 'path', '/bin/bash'), \
                 'sandbox', 'read-only', 'network', json('false'), \
                 'state', CASE i % 2 WHEN 1 THEN 'running' ELSE 'exited' END, 'exitCode', 0, \
                 'startedAt', 1700000000000, 'stdoutBytes', 1, 'stderrBytes', 0, 'truncated', json('false'), \
                 'audit', json_object('seq', ?1 * 2 + i, 'hash', printf('%064x', i))), 1700000000000 + i \
             FROM n",
                    [history as i64],
                )?;
                for live in 0..10 {
                    conn.execute(
                "INSERT INTO plan_approvals (id, session_id, turn_id, title, question, artifact_path, \
                   artifact_sha256, artifact_size, status, created_at, expires_at) \
                 VALUES (?1, ?2, 't', 'live', 'ok?', '.pi/plan/live.md', ?3, 1, 'pending', ?4, ?5)",
                params![format!("live{live}"), format!("s{live}"), "0".repeat(64), NOW, NOW + 1_800_000],
            )?;
                }
                conn.execute_batch("COMMIT; PRAGMA wal_checkpoint(TRUNCATE);")
            });
    if let Err(error) = built {
        panic!("{error}");
    }
    (path, conn)
}

fn startup_fence(criterion: &mut Criterion) {
    let dir = bench_dir();
    let mut group = criterion.benchmark_group("startup_fence");
    group.sample_size(20).measurement_time(Duration::from_secs(4));
    for (label, history) in [
        ("10_live_1k_history", 1_000_u64),
        ("10_live_1m_history", 1_000_000),
    ] {
        let (path, reset) = fence_database(dir.path(), history);
        let mut store = open_store(&path);
        group.bench_function(label, |bencher| {
            bencher.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // The ten live rows by primary key: a `LIKE` here would scan
                    // the whole history before every timed fence and leave the
                    // CPU caches cold in the 1M case only, which is the
                    // harness's cost, not the fence's.
                    if let Err(error) = reset.execute(
                        "UPDATE plan_approvals SET status = 'pending', error_code = NULL, decided_at = NULL \
                         WHERE id IN ('live0', 'live1', 'live2', 'live3', 'live4', \
                                      'live5', 'live6', 'live7', 'live8', 'live9')",
                        [],
                    ) {
                        panic!("{error}");
                    }
                    let start = Instant::now();
                    let fenced = store.startup_fence(NOW + 1);
                    total += start.elapsed();
                    match fenced {
                        Ok(rows) => assert_eq!(rows.len(), 10),
                        Err(error) => panic!("{error}"),
                    }
                }
                total
            });
        });
    }
    group.finish();
}

/// A 4 KiB plan, as in the re-check's performance target.
fn plan_4k() -> Vec<u8> {
    let mut plan = b"# Plan\n\n".to_vec();
    let mut step = 1;
    while plan.len() < 4096 {
        plan.extend_from_slice(
            format!("{step}. Split the parser's next module and run its tests.\n").as_bytes(),
        );
        step += 1;
    }
    plan.truncate(4096);
    plan
}

/// One pending approval per new session of workspace `root`, untimed; the
/// rows to approve.
fn pending_plans(
    store: &mut Store,
    setup: &Connection,
    root: &str,
    first: u64,
    count: u64,
) -> Vec<PlanApproval> {
    let plan = plan_4k();
    let mut rows = Vec::new();
    for index in first..first + count {
        if let Err(error) = setup.execute(
            "INSERT INTO sessions (id, workspace_root, mode, created_at, updated_at) VALUES (?1, ?2, 'plan', 0, 0)",
            params![format!("d{index}"), root],
        ) {
            panic!("creating a session: {error}");
        }
        let artifact = match write_artifact(root, "Split parser", &plan, NOW, &format!("d{index}")) {
            Ok(artifact) => artifact,
            Err(error) => panic!("{error}"),
        };
        let row = pending_row(index, format!("d{index}"), artifact);
        if let Err(error) = store.apply(&[Effect::InsertApproval(row.clone())], NOW) {
            panic!("{error}");
        }
        rows.push(row);
    }
    rows
}

/// Approves `row` as the host does; `recheck` re-reads its artifact first.
fn approve_row(store: &mut Store, row: PlanApproval, recheck: bool) {
    let rows = match store.session_rows(&row.session_id) {
        Ok(Some(rows)) => rows,
        Ok(None) => panic!("no session {}", row.session_id),
        Err(error) => panic!("{error}"),
    };
    let artifact = if recheck {
        match store.check_artifact(&row, rows.session.workspace_root.as_deref()) {
            Ok(found) => found,
            Err(error) => panic!("{error}"),
        }
    } else {
        ArtifactVerification {
            approval_id: row.id.clone(),
            result: ArtifactCheck::Ok,
            error_code: None,
            detail: None,
        }
    };
    let state = SessionState {
        session: rows.session,
        active_turn: None,
        pending_approval: rows.pending_approval,
        live_execution: rows.live_execution,
    };
    let context = Context {
        now: NOW + 1,
        epoch: BootEpoch(1),
        limits: Limits::default(),
    };
    let event = Event::Approve {
        execution_id: format!("x-{}", row.id).into(),
        execution_turn_id: format!("xt-{}", row.id).into(),
        approval: row,
        permission_mode: Some(PermissionMode::Ask),
        artifact,
    };
    let transition = plan_core::handle(&state, &context, event);
    if let Err(code) = transition.reply {
        panic!("approve refused: {code:?}");
    }
    if let Err(error) = store.apply(&transition.effects, NOW + 1) {
        panic!("{error}");
    }
}

fn decision(criterion: &mut Criterion) {
    let dir = bench_dir();
    let mut group = criterion.benchmark_group("decision");
    group.sample_size(30).measurement_time(Duration::from_secs(6));
    let workspace = dir.path().join("workspace");
    if let Err(error) = std::fs::create_dir_all(&workspace) {
        panic!("{error}");
    }
    let root = workspace.to_string_lossy().into_owned();
    let path = dir.path().join("decision.db");
    let mut store = open_store(&path);
    let Ok(setup) = Connection::open(&path) else {
        panic!("setup connection")
    };
    let mut next: u64 = 0;
    for (label, recheck) in [("without_recheck", false), ("with_recheck", true)] {
        group.bench_function(label, |bencher| {
            bencher.iter_custom(|iters| {
                let rows = pending_plans(&mut store, &setup, &root, next, iters);
                next += iters;
                let start = Instant::now();
                for row in rows {
                    approve_row(&mut store, row, recheck);
                }
                start.elapsed()
            });
        });
    }
    group.finish();
}

criterion_group!(benches, submission, migration, startup_fence, decision);
criterion_main!(benches);
