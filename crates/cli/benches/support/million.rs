//! The 1M-approval database the CLI benchmarks share: 1,000 sessions (their
//! workspaces do not exist), approved/completed, rejected, expired and
//! interrupted in equal parts, created at v10 through `Store::open` and
//! filled with one INSERT ... SELECT from a recursive CTE, then `ANALYZE`.

use std::path::PathBuf;

/// Approvals in the database.
pub(crate) const ROWS: u64 = 1_000_000;
const NOW: i64 = 1_790_000_000_000;

/// Builds the 1M-row database once and returns its path (the directory
/// lives for the whole run).
pub(crate) fn database() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("million.db");
    drop(plan_storage::Store::open(&db).unwrap());
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(&format!(
        "BEGIN;
         WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 999)
         INSERT INTO sessions (id, title, workspace_root, mode, permission_mode, created_at, updated_at)
         SELECT 's' || i, '', '/nonexistent/ws' || i, 'agent', 'ask', {NOW}, {NOW} FROM n;
         WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {last})
         INSERT INTO plan_approvals (id, session_id, turn_id, title, question, artifact_path,
           artifact_sha256, artifact_size, status, error_code, created_at, expires_at, decided_at,
           permission_mode, execution_id, execution_state)
         SELECT 'approval-' || i, 's' || (i % 1000), 't' || i, 'Plan number ' || i, 'Go?',
           '.pi/plan/p' || i || '.md', printf('%064x', i), 100 + i % 50,
           CASE i % 4 WHEN 0 THEN 'approved' WHEN 1 THEN 'rejected' WHEN 2 THEN 'expired' ELSE 'interrupted' END,
           CASE i % 4 WHEN 2 THEN 'PLAN_APPROVAL_TIMEOUT' WHEN 3 THEN 'HOST_RESTARTED' ELSE NULL END,
           {NOW} - ({ROWS} - i) * 1000, {NOW} - ({ROWS} - i) * 1000 + 1800000, {NOW} - ({ROWS} - i) * 1000 + 500,
           CASE i % 4 WHEN 0 THEN 'ask' ELSE NULL END,
           CASE i % 4 WHEN 0 THEN 'e' || i ELSE NULL END,
           CASE i % 4 WHEN 0 THEN 'completed' ELSE NULL END
         FROM n;
         COMMIT;
         PRAGMA wal_checkpoint(TRUNCATE);
         ANALYZE;",
        last = ROWS - 1
    ))
    .unwrap();
    drop(conn);
    (dir, db)
}
