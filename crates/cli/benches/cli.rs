//! CLI benchmarks (criterion), whole process: `plan-checkpoint approvals
//! list --limit 50` and `plan-checkpoint db status` on a database with 1M
//! approvals, each against the `sqlite3` command running the equivalent
//! query in the same run (skipped with a message when `sqlite3` is absent).
//! Targets: under 50 ms each, within 2x of sqlite3.
//!
//! `demo` times the whole ADR story (`plan-checkpoint demo --dir <new>`,
//! every step durable) next to `plan-checkpoint --version`, the process
//! start it includes, measured in the same run. This replaces the wall-clock
//! assertion the demo's test used to make.
//!
//! `migrate` times `plan-checkpoint db migrate` on a copy of a schema v8
//! database with 1M transcript rows next to one with 10k, in the same run
//! (target: 1M at most 1.2x 10k; the migration never reads the transcript).
//! Each iteration copies the v8 file, flushes the copy (the 10k case also
//! writes and flushes a ballast file as large as the difference, so both
//! write the same bytes) and then reads the same 128 MB scratch file,
//! untimed, so both start with the disk equally busy, the file equally warm
//! in the page cache and the CPU caches equally cold.
//! `PLAN_CLI_BENCH_DIR` puts its files there (a tmpfs such as /dev/shm
//! takes the fsync latency out); the system's temporary directory is the
//! default.
//!
//! The database is created at v10 through `Store::open`, then filled with
//! one INSERT ... SELECT from a recursive CTE (untimed; `support/million.rs`). These benchmarks
//! only measure; CI compiles them and does not run them.

// Benchmark harness, like test code: a failed setup must stop the run loudly.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};

#[path = "support/million.rs"]
mod million;
#[path = "support/v8.rs"]
mod v8;

const BIN: &str = env!("CARGO_BIN_EXE_plan-checkpoint");

fn run(command: &mut Command) {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{:?}: {}",
        command,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.stdout.is_empty());
}

fn plan_checkpoint(db: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command.arg("--db").arg(db).args(args);
    command
}

fn sqlite3(db: &Path, sql: &str) -> Command {
    let mut command = Command::new("sqlite3");
    command.arg("-readonly").arg(db).arg(sql);
    command
}

fn sqlite3_available() -> bool {
    Command::new("sqlite3")
        .arg("-version")
        .output()
        .is_ok_and(|output| output.status.success())
}

/// The columns the CLI reads for a listing.
const COLUMNS: &str = "id, session_id, turn_id, title, question, artifact_path, artifact_sha256, artifact_size, \
     status, error_code, created_at, expires_at, decided_at, permission_mode, execution_id, execution_state, \
     legacy_proposal_json, legacy_feedback";

fn cli(criterion: &mut Criterion) {
    let (_dir, db) = million::database();
    let baseline = sqlite3_available();
    if !baseline {
        eprintln!(
            "\n!!! the `sqlite3` command is not installed: SKIPPING the sqlite3 baselines (apt-get install sqlite3)\n"
        );
    }
    let mut group = criterion.benchmark_group("cli_1m_approvals");
    group.sample_size(30).measurement_time(Duration::from_secs(8));

    group.bench_function("plan-checkpoint approvals list --limit 50", |bencher| {
        bencher.iter(|| run(&mut plan_checkpoint(&db, &["approvals", "list", "--limit", "50"])));
    });
    if baseline {
        let sql = format!("SELECT {COLUMNS} FROM plan_approvals ORDER BY created_at DESC, id DESC LIMIT 50;");
        group.bench_function("sqlite3 list limit 50", |bencher| {
            bencher.iter(|| run(&mut sqlite3(&db, &sql)));
        });
    }

    group.bench_function("plan-checkpoint db status", |bencher| {
        bencher.iter(|| run(&mut plan_checkpoint(&db, &["db", "status"])));
    });
    if baseline {
        let sql = format!(
            "PRAGMA user_version; \
             SELECT count(*) FROM plan_approvals WHERE status = 'pending'; \
             SELECT count(*) FROM plan_approvals WHERE status = 'approved'; \
             SELECT count(*) FROM plan_approvals WHERE status = 'rejected'; \
             SELECT count(*) FROM plan_approvals WHERE status = 'expired'; \
             SELECT count(*) FROM plan_approvals WHERE status = 'interrupted'; \
             SELECT {COLUMNS} FROM plan_approvals WHERE status = 'pending' \
             UNION ALL SELECT {COLUMNS} FROM plan_approvals WHERE execution_state IN ('queued','running');"
        );
        group.bench_function("sqlite3 status", |bencher| {
            bencher.iter(|| run(&mut sqlite3(&db, &sql)));
        });
    }
    group.finish();
}

fn demo(criterion: &mut Criterion) {
    let scratch = tempfile::tempdir().unwrap();
    let mut round = 0_u64;
    let mut group = criterion.benchmark_group("demo");
    group.sample_size(10).measurement_time(Duration::from_secs(20));
    group.bench_function("plan-checkpoint demo", |bencher| {
        bencher.iter(|| {
            round += 1;
            let dir = scratch.path().join(format!("demo-{round}"));
            run(Command::new(BIN).arg("demo").arg("--dir").arg(&dir));
        });
    });
    group.bench_function("plan-checkpoint --version (process start)", |bencher| {
        bencher.iter(|| run(Command::new(BIN).arg("--version")));
    });
    group.finish();
}

/// Bytes of the scratch file every migrate iteration reads before timing.
const SCRATCH_BYTES: usize = 128 * 1024 * 1024;

fn migrate(criterion: &mut Criterion) {
    let dir = match std::env::var_os("PLAN_CLI_BENCH_DIR") {
        Some(parent) => tempfile::tempdir_in(parent),
        None => tempfile::tempdir(),
    }
    .unwrap();
    let scratch = dir.path().join("scratch");
    let pattern: Vec<u8> = (0..SCRATCH_BYTES).map(|index| (index % 251) as u8).collect();
    std::fs::write(&scratch, &pattern).unwrap();
    std::fs::File::open(&scratch).unwrap().sync_all().unwrap();
    let ballast = dir.path().join("ballast");
    let mut group = criterion.benchmark_group("migrate");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8));
    // Both files exist and are flushed (like the scratch file) before either
    // case runs, so no write-back of a fresh file overlaps a timed migration.
    let cases = [
        (
            "plan-checkpoint db migrate, v8 with 10k transcript rows",
            10_000_u64,
        ),
        (
            "plan-checkpoint db migrate, v8 with 1M transcript rows",
            1_000_000,
        ),
    ]
    .map(|(label, rows)| {
        let base = v8::with_transcript(dir.path(), rows);
        std::fs::File::open(&base).unwrap().sync_all().unwrap();
        let bytes = std::fs::metadata(&base).unwrap().len();
        (label, rows, base, bytes)
    });
    let largest = cases.iter().map(|case| case.3).max().unwrap();
    for (label, rows, base, bytes) in cases {
        // The smaller copy is topped up with a ballast file, so every
        // iteration of both cases writes and flushes the same bytes before
        // the clock starts and the disk is equally busy in both.
        let pad = &pattern[..usize::try_from(largest - bytes).unwrap()];
        let target = dir.path().join(format!("migrating-{rows}.db"));
        group.bench_function(label, |bencher| {
            bencher.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    for suffix in ["-wal", "-shm", "-journal"] {
                        let mut side = target.as_os_str().to_owned();
                        side.push(suffix);
                        let _absent = std::fs::remove_file(side);
                    }
                    // Flushed before the clock starts, so the migration's
                    // fsync does not also write back the copy.
                    std::fs::copy(&base, &target).unwrap();
                    std::fs::File::open(&target).unwrap().sync_all().unwrap();
                    std::fs::write(&ballast, pad).unwrap();
                    std::fs::File::open(&ballast).unwrap().sync_all().unwrap();
                    black_box(std::fs::read(&scratch).unwrap().len());
                    let mut command = plan_checkpoint(&target, &["db", "migrate"]);
                    let start = Instant::now();
                    let output = command.output().unwrap();
                    total += start.elapsed();
                    assert!(
                        output.status.success() && output.stdout.ends_with(b"migrated schema v8 -> v10\n"),
                        "{}{}",
                        String::from_utf8_lossy(&output.stdout),
                        String::from_utf8_lossy(&output.stderr)
                    );
                }
                total
            });
        });
    }
    group.finish();
}

criterion_group!(benches, migrate, cli, demo);
criterion_main!(benches);
