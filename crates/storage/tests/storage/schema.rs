//! The v10 schema: a snapshot of all of it, and proof that a migrated v8
//! database and a new one end up with the same schema and history.

use plan_storage::Store;

use crate::support::{fixture_database, schema_dump, table_rows};

#[test]
fn the_v10_schema_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fresh.db");
    drop(Store::open(&path).unwrap());
    insta::assert_snapshot!("v10_schema", schema_dump(&path));
}

#[test]
fn migrated_and_fresh_schemas_are_identical() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.db");
    drop(Store::open(&fresh).unwrap());
    let migrated = fixture_database(dir.path(), "v8.db");
    drop(Store::open(&migrated).unwrap());
    assert_eq!(schema_dump(&migrated), schema_dump(&fresh));
    let history = "SELECT version, name, checksum FROM refinery_schema_history ORDER BY version";
    assert_eq!(table_rows(&migrated, history), table_rows(&fresh, history));
    for path in [&fresh, &migrated] {
        assert_eq!(table_rows(path, "PRAGMA user_version"), ["int 10"]);
        assert_eq!(table_rows(path, "PRAGMA journal_mode"), ["text \"wal\""]);
    }
}

#[test]
fn live_row_queries_use_the_partial_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fresh.db");
    drop(Store::open(&path).unwrap());
    // The same query as the store's live-row read and the fence.
    let plan = table_rows(
        &path,
        "EXPLAIN QUERY PLAN SELECT * FROM plan_approvals INDEXED BY plan_approvals_one_pending \
         WHERE status = 'pending' UNION ALL \
         SELECT * FROM plan_approvals INDEXED BY plan_approvals_one_live_execution \
         WHERE execution_state IN ('queued','running')",
    )
    .join("\n");
    assert!(
        plan.contains("SCAN plan_approvals USING INDEX plan_approvals_one_pending"),
        "{plan}"
    );
    assert!(
        plan.contains("SCAN plan_approvals USING INDEX plan_approvals_one_live_execution"),
        "{plan}"
    );
    assert!(!plan.contains("SCAN plan_approvals\""), "{plan}");
    let plan = query_plan(
        &path,
        "SELECT * FROM plan_approvals WHERE ?1 IS NULL AND ?2 IS NULL ORDER BY created_at DESC, id DESC LIMIT 10",
    );
    assert!(plan.contains("plan_approvals_by_created"), "{plan}");
    assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    let plan = query_plan(
        &path,
        "SELECT * FROM plan_approvals WHERE session_id = ?1 AND ?2 IS NULL ORDER BY created_at DESC, id DESC LIMIT 10",
    );
    assert!(plan.contains("plan_approvals_by_session_created"), "{plan}");
    assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    let plan = query_plan(
        &path,
        "SELECT * FROM plan_approvals INDEXED BY plan_approvals_by_status_created \
         WHERE ?1 IS NULL AND status = ?2 ORDER BY created_at DESC, id DESC LIMIT 10",
    );
    assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    let plan = query_plan(
        &path,
        "SELECT count(*) FROM plan_approvals INDEXED BY plan_approvals_by_status WHERE status = ?1 AND ?2 IS NULL",
    );
    assert!(plan.contains("COVERING INDEX plan_approvals_by_status"), "{plan}");
}

/// The query plan of `sql` with both parameters bound to NULL.
fn query_plan(path: &std::path::Path, sql: &str) -> String {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut statement = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let rows = statement
        .query_map([rusqlite::types::Null, rusqlite::types::Null], |row| {
            row.get::<_, String>(3)
        })
        .unwrap();
    rows.map(Result::unwrap).collect::<Vec<_>>().join("\n")
}

#[test]
fn the_v8_fixture_has_exactly_the_baseline_schema() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = crate::support::fixture_database(dir.path(), "fixture.db");
    let baseline_sql = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/V8__baseline.sql"),
    )
    .unwrap();
    let baseline = crate::support::database_from_sql(dir.path(), "baseline.db", &baseline_sql);
    assert_eq!(
        crate::support::schema_dump(&fixture),
        crate::support::schema_dump(&baseline)
    );
    assert_eq!(
        crate::support::table_rows(&fixture, "PRAGMA user_version"),
        crate::support::table_rows(&baseline, "PRAGMA user_version")
    );
}
