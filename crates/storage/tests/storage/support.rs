//! Helpers shared by the test modules: building v8 databases, logical
//! dumps, and approval rows.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plan_core::{ApprovalStatus, Artifact, PlanApproval};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

/// The v8 sample database of the storage contract, as SQL.
///
/// Its DDL repeats `migrations/V8__baseline.sql` on purpose instead of being
/// derived from it: the fixture is the contract's own file, a witness of
/// what the 0.4.14 host wrote, and adoption of a v8 database is only checked
/// against something independent if the two are kept apart. That they say
/// the same is a test (`the_v8_fixture_has_exactly_the_baseline_schema`), so
/// neither can drift alone.
pub(crate) fn fixture_sql() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v8-sample.sql");
    std::fs::read_to_string(path).expect("the v8 fixture is part of the crate")
}

/// Creates a SQLite database at `dir/name` by executing `sql`, as the
/// `sqlite3` shell would.
pub(crate) fn database_from_sql(dir: &Path, name: &str, sql: &str) -> PathBuf {
    let path = dir.join(name);
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(sql).unwrap();
    drop(conn);
    path
}

/// The sample v8 database at `dir/name`.
pub(crate) fn fixture_database(dir: &Path, name: &str) -> PathBuf {
    database_from_sql(dir, name, &fixture_sql())
}

/// Runs `sql` on the database at `path` with a plain connection.
pub(crate) fn execute(path: &Path, sql: &str) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(sql).unwrap();
}

fn read_only(path: &Path) -> Connection {
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
}

/// The schema as `type name tbl_name sql` lines, ordered by type and name
/// (root pages left out: they depend on creation order only).
pub(crate) fn schema_dump(path: &Path) -> String {
    let conn = read_only(path);
    let mut statement = conn
        .prepare("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name")
        .unwrap();
    let rows = statement
        .query_map([], |row| {
            Ok(format!(
                "{} {} ON {}\n{}\n",
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, Option<String>>(3)?
                    .unwrap_or_else(|| "(automatic)".to_owned())
            ))
        })
        .unwrap();
    rows.map(Result::unwrap).collect::<Vec<_>>().join("\n")
}

/// A full logical dump: user_version, the schema, and every row of every
/// table in rowid order with typed values. The refinery history's
/// `applied_on` is left out because it is the wall-clock time of a run.
pub(crate) fn logical_dump(path: &Path) -> String {
    let conn = read_only(path);
    let mut out = String::new();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    writeln!(out, "user_version {version}").unwrap();
    out.push_str(&schema_dump(path));
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for table in tables {
        writeln!(out, "\n-- {table}").unwrap();
        let select = if table == "refinery_schema_history" {
            "SELECT version, name, checksum FROM refinery_schema_history ORDER BY version".to_owned()
        } else {
            format!("SELECT * FROM \"{table}\" ORDER BY rowid")
        };
        let mut statement = conn.prepare(&select).unwrap();
        let columns = statement.column_count();
        let mut rows = statement.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            let values: Vec<String> = (0..columns)
                .map(|index| value_text(row.get_ref(index).unwrap()))
                .collect();
            writeln!(out, "{}", values.join(" | ")).unwrap();
        }
    }
    out
}

fn value_text(value: ValueRef<'_>) -> String {
    match value {
        ValueRef::Null => "NULL".to_owned(),
        ValueRef::Integer(integer) => format!("int {integer}"),
        ValueRef::Real(real) => format!("real {real:?}"),
        ValueRef::Text(text) => format!("text {:?}", String::from_utf8_lossy(text)),
        ValueRef::Blob(blob) => format!("blob {}", hex::encode(blob)),
    }
}

/// Every row of one table as text, with an optional column list.
pub(crate) fn table_rows(path: &Path, select: &str) -> Vec<String> {
    let conn = read_only(path);
    let mut statement = conn.prepare(select).unwrap();
    let columns = statement.column_count();
    let mut rows = statement.query([]).unwrap();
    let mut out = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        let values: Vec<String> = (0..columns)
            .map(|index| value_text(row.get_ref(index).unwrap()))
            .collect();
        out.push(values.join(" | "));
    }
    out
}

/// A pending approval created at v10, with a well-formed artifact record.
pub(crate) fn pending(id: &str, session_id: &str, created_at: i64) -> PlanApproval {
    PlanApproval {
        id: id.into(),
        session_id: session_id.into(),
        turn_id: format!("turn-{id}").into(),
        title: format!("Title of {id}"),
        question: "Go ahead?".to_owned(),
        artifact: Some(Artifact {
            path: format!(".pi/plan/20260101T000000Z-{id}-abc.md"),
            sha256: "0".repeat(64),
            size: 12,
        }),
        status: ApprovalStatus::Pending,
        error_code: None,
        created_at,
        expires_at: created_at + 1_800_000,
        decided_at: None,
        permission_mode: None,
        execution_id: None,
        execution_state: None,
    }
}
