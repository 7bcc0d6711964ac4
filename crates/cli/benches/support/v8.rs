//! Schema v8 databases (the 0.4.14 host's) for the `db migrate` pair: the
//! storage tests' v8 fixture plus `rows` transcript entries of one session,
//! written with one INSERT ... SELECT from a recursive CTE.

use std::path::{Path, PathBuf};

/// Builds `v8-<rows>.db` in `dir` and returns its path.
pub(crate) fn with_transcript(dir: &Path, rows: u64) -> PathBuf {
    let path = dir.join(format!("v8-{rows}.db"));
    let sql = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../storage/tests/fixtures/v8-sample.sql"
    ))
    .unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(&sql).unwrap();
    conn.execute(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1) \
         INSERT INTO transcript_entries (session_id, seq, role, content_json, created_at) \
         SELECT 's-agent', 1000 + i, 'assistant', \
                '{\"text\":\"line ' || i || ' of a long and realistic transcript entry\"}', 1750000000000 + i \
         FROM n",
        [rows as i64],
    )
    .unwrap();
    drop(conn);
    path
}
