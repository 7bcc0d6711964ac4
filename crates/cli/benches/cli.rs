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
//! The database is created at v10 through `Store::open`, then filled with
//! one INSERT ... SELECT from a recursive CTE (untimed; `support/million.rs`). These benchmarks
//! only measure; CI compiles them and does not run them.

// Benchmark harness, like test code: a failed setup must stop the run loudly.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

#[path = "support/million.rs"]
mod million;

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

criterion_group!(benches, cli, demo);
criterion_main!(benches);
