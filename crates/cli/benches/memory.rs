//! Peak memory of the whole-history commands on 1M approvals: `approvals
//! list --all`, `approvals list --all --json`, `approvals export`,
//! `approvals verify --all` and its `--json`, each of which must stream (target: at most 64
//! MiB peak RSS each). Baselines measured in the same run, the same way:
//! `plan-checkpoint --version` (process start) and `approvals list` (the
//! default 20 rows).
//!
//! Peak RSS is the child's maximum resident set size as GNU time reports it
//! (`/usr/bin/time -f %M`, from the kernel's rusage of the waited-for
//! process), with stdout going to /dev/null; the bench skips with a message
//! when /usr/bin/time is absent. In the database every workspace is
//! missing, so `verify --all` reports 1M problems, one line each, streamed.
//! This bench only measures and prints; CI compiles it and does not run it.

// Benchmark harness, like test code: a failed setup must stop the run loudly.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

#[path = "support/million.rs"]
mod million;

const BIN: &str = env!("CARGO_BIN_EXE_plan-checkpoint");
const TIME: &str = "/usr/bin/time";
const TARGET_KIB: u64 = 64 * 1024;

/// Runs `plan-checkpoint args` under GNU time; returns peak RSS in KiB and
/// the wall time in seconds.
fn measure(db: &Path, args: &[&str]) -> (u64, f64) {
    let started = Instant::now();
    let output = Command::new(TIME)
        .args(["-f", "%M"])
        .arg(BIN)
        .arg("--db")
        .arg(db)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // 1 is `verify` finding problems, which this database has by design.
    assert!(matches!(output.status.code(), Some(0 | 1)), "{args:?}: {stderr}");
    let kib = stderr
        .lines()
        .last()
        .and_then(|line| line.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{args:?}: no peak RSS in {stderr:?}"));
    (kib, elapsed)
}

fn main() {
    // `cargo bench` passes filter arguments and `--bench`; this bench has
    // one group and takes none of them.
    if Command::new(TIME).args(["-f", "%M", "true"]).output().is_err() {
        eprintln!("\n!!! {TIME} is not installed: SKIPPING the memory benchmark (apt-get install time)\n");
        return;
    }
    eprintln!("building the database of {} approvals ...", million::ROWS);
    let (_dir, db) = million::database();
    let baselines: [(&str, &[&str]); 2] = [
        ("--version (process start)", &["--version"]),
        ("approvals list (20 rows)", &["approvals", "list"]),
    ];
    let streamed: [(&str, &[&str]); 5] = [
        ("approvals list --all", &["approvals", "list", "--all"]),
        (
            "approvals list --all --json",
            &["approvals", "list", "--all", "--json"],
        ),
        ("approvals export", &["approvals", "export"]),
        ("approvals verify --all", &["approvals", "verify", "--all"]),
        (
            "approvals verify --all --json",
            &["approvals", "verify", "--all", "--json"],
        ),
    ];
    let (start_kib, _) = measure(&db, baselines[0].1);
    println!(
        "\npeak RSS on {} approvals (GNU time %M, stdout to /dev/null)\n",
        million::ROWS
    );
    println!(
        "{:<32} {:>10} {:>12} {:>9}  target",
        "command", "peak MiB", "x --version", "wall s"
    );
    for (name, args) in baselines.iter().chain(streamed.iter()) {
        let (kib, seconds) = measure(&db, args);
        let verdict = if streamed.iter().any(|(streamed, _)| streamed == name) {
            if kib <= TARGET_KIB {
                "<= 64 MiB: ok"
            } else {
                "OVER 64 MiB"
            }
        } else {
            "baseline"
        };
        println!(
            "{name:<32} {:>10.1} {:>12.2} {seconds:>9.2}  {verdict}",
            kib as f64 / 1024.0,
            kib as f64 / start_kib as f64
        );
    }
}
