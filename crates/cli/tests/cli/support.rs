//! Test support: databases built through the real `plan_host::Host` with a
//! `ManualClock`, a runner for the real binary with time and time zone
//! pinned, and redaction of the random parts (ids, temp paths) so that
//! snapshots are stable.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use plan_core::{ConfigChange, Mode, Origin, PermissionMode, ToolCall};
use plan_host::{ApprovalId, Clock, Host, HostOptions, ManualClock, NewSession, SessionId};

/// 2026-09-21T14:13:20Z: the host clock when fixtures start.
pub(crate) const T0: i64 = 1_790_000_000_000;
/// "Now" for every inspection run: 45 minutes after T0.
pub(crate) const NOW: i64 = T0 + 45 * 60_000;

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_plan-checkpoint");

/// The binary with the environment pinned: UTC, fixed now, no inherited db.
pub(crate) fn command() -> Command {
    let mut command = Command::new(BIN);
    command
        .env("TZ", "UTC")
        .env("PLAN_CHECKPOINT_NOW_MS", NOW.to_string())
        .env_remove("PLAN_CHECKPOINT_DB")
        .env("NO_COLOR", "1");
    command
}

/// What a run of the binary did.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) raw_stdout: Vec<u8>,
}

impl Run {
    pub(crate) fn from(output: Output) -> Run {
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            raw_stdout: output.stdout,
        }
    }

    /// The whole run as one text for a snapshot.
    pub(crate) fn transcript(&self) -> String {
        format!(
            "exit: {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs the binary with `--db db` (when given) and `args`.
pub(crate) fn run(db: Option<&Path>, args: &[&str]) -> Run {
    let mut command = command();
    if let Some(db) = db {
        command.arg("--db").arg(db);
    }
    Run::from(command.args(args).output().unwrap())
}

/// A database and workspace built for one test, plus the names that
/// replace their random parts in snapshots.
pub(crate) struct Fixture {
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) db: PathBuf,
    pub(crate) root: String,
    /// (literal, replacement), longest first.
    pub(crate) names: Vec<(String, String)>,
    pub(crate) approvals: Vec<(String, String)>,
}

impl Fixture {
    /// The id of the approval given this name.
    pub(crate) fn id(&self, name: &str) -> String {
        self.approvals
            .iter()
            .find(|(_, given)| given == name)
            .map(|(id, _)| id.clone())
            .unwrap_or_else(|| panic!("no approval named {name}"))
    }

    /// The artifact path (absolute) of the named approval.
    pub(crate) fn artifact(&self, name: &str) -> PathBuf {
        let stored = self.open_host_free_read(name);
        Path::new(&self.root).join(stored)
    }

    fn open_host_free_read(&self, name: &str) -> String {
        let store = plan_storage::Store::open_read_only(&self.db).unwrap();
        let approval = store
            .get_approval(&self.id(name).into())
            .unwrap()
            .unwrap()
            .approval;
        approval.artifact.unwrap().path
    }

    /// Replaces the random parts of `text` with stable names.
    pub(crate) fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (literal, name) in &self.names {
            text = text.replace(literal, name);
        }
        text
    }

    /// Snapshot settings: the generic filters for ids the host draws.
    pub(crate) fn settings() -> insta::Settings {
        let mut settings = insta::Settings::clone_current();
        settings.add_filter(r"turn-[0-9a-f]{32}", "turn-[id]");
        settings.add_filter(r"execution-[0-9a-f]{32}", "execution-[id]");
        settings.add_filter(r"approval-[0-9a-f]{32}", "approval-[id]");
        // On a terminal ids are shown as their shortest unique prefix, whose
        // length depends on the random part: the column's padding with it.
        settings.add_filter(r"approval-[0-9a-f]{8,31}( +|\b)", "approval-[prefix]  ");
        settings.add_filter(r"(?m)^ID +STATUS", "ID  STATUS");
        settings.add_filter(r"-[0-9a-f]{12}\.md", "-[suffix].md");
        // The chain's hashes cover the random ids.
        settings.add_filter(r#""auditHash":"[0-9a-f]{64}""#, r#""auditHash":"[hash]""#);
        settings.add_filter(r#""headHash": "[0-9a-f]{64}""#, r#""headHash": "[hash]""#);
        settings.add_filter(r"\(([0-9a-f]{12})…\)", "([hash]…)");
        // The database's identity is random.
        settings.add_filter(
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "[database-id]",
        );
        settings.set_prepend_module_to_snapshot(false);
        settings
    }
}

fn submit(title: &str, markdown: &str) -> ToolCall {
    ToolCall {
        call_id: "call-submit".into(),
        name: "SubmitPlan".to_owned(),
        input: serde_json::json!({"title": title, "markdown": markdown, "question": "Go ahead?"}),
    }
}

pub(crate) const PLAN_V1: &str =
    "# Split the parser\n\n1. Read the parser.\n2. Move tokenizing into lexer.rs.\n3. Run the tests.\n";
pub(crate) const PLAN_V2: &str = "# Split the parser\n\n1. Read the parser.\n2. Move tokenizing into lexer.rs and rename the API.\n3. Run the tests.\n";
pub(crate) const PLAN_V3: &str = "# Add a cache\n\n1. Measure.\n2. Cache the parse tree.\n";
pub(crate) const PLAN_V4: &str = "# Document the lexer\n\nWrite docs for every public item.\n";
pub(crate) const PLAN_B: &str = "# Fix the flaky test\n\n1. Find the race.\n2. Fix it.\n";

/// Plans a turn and submits `markdown`; returns the approval id.
fn plan(host: &Host, session: &str, title: &str, markdown: &str) -> String {
    let turn = host
        .start_turn(&SessionId::from(session), Origin::Interactive)
        .unwrap();
    let outcomes = host
        .tool_calls(
            &SessionId::from(session),
            &turn.turn_id,
            vec![submit(title, markdown)],
        )
        .unwrap();
    outcomes
        .into_iter()
        .find_map(|outcome| outcome.approval)
        .unwrap()
        .id
        .into_string()
}

fn to_plan(host: &Host, session: &str) {
    host.configure_session(
        &SessionId::from(session),
        ConfigChange {
            mode: Some(Mode::Plan),
            ..ConfigChange::default()
        },
    )
    .unwrap();
}

/// A database with every status and execution state of interest:
/// in session `s-alpha`: a completed execution, a rejected revision, an
/// expired plan and a pending one; in `s-beta`: an approved, queued one.
pub(crate) fn rich() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root_alpha = base.join("ws-alpha");
    let root_beta = base.join("ws-beta");
    std::fs::create_dir(&root_alpha).unwrap();
    std::fs::create_dir(&root_beta).unwrap();
    let db = base.join("plan.db");
    let clock = Arc::new(ManualClock::new(T0));
    let options = HostOptions {
        clock: Arc::clone(&clock) as Arc<dyn Clock>,
        ..HostOptions::default()
    };
    let host = Host::open(&db, options).unwrap();
    let mut approvals = Vec::new();
    for (id, root) in [("s-alpha", &root_alpha), ("s-beta", &root_beta)] {
        host.create_session(NewSession {
            session_id: Some(id.into()),
            workspace_root: Some(root.to_string_lossy().into_owned()),
            mode: Some(Mode::Plan),
            permission_mode: None,
        })
        .unwrap();
    }
    // 1. Approved and completed.
    let completed = plan(&host, "s-alpha", "Split the parser", PLAN_V1);
    clock.advance(60_000);
    let (approved, _) = host
        .approve(&ApprovalId::from(&completed), PermissionMode::AcceptEdits)
        .unwrap();
    let execution = approved.execution_id.unwrap();
    clock.advance(1_000);
    host.start_execution(&execution).unwrap();
    clock.advance(120_000);
    host.complete_execution(&execution).unwrap();
    approvals.push((completed, "approval-completed".to_owned()));
    // 2. A revision, rejected.
    clock.advance(60_000);
    to_plan(&host, "s-alpha");
    let rejected = plan(&host, "s-alpha", "Split the parser (revision)", PLAN_V2);
    clock.advance(30_000);
    host.reject(&ApprovalId::from(&rejected)).unwrap();
    approvals.push((rejected, "approval-rejected".to_owned()));
    // 3. Expired: nobody answered for 30 minutes.
    clock.advance(10_000);
    let expired = plan(&host, "s-alpha", "Add a cache", PLAN_V3);
    clock.advance(30 * 60_000);
    host.expire_due().unwrap();
    approvals.push((expired, "approval-expired".to_owned()));
    // 4. s-beta: approved, execution queued (a live row).
    clock.advance(60_000);
    let queued = plan(&host, "s-beta", "Fix the flaky test", PLAN_B);
    clock.advance(5_000);
    host.approve(&ApprovalId::from(&queued), PermissionMode::Ask)
        .unwrap();
    approvals.push((queued, "approval-queued".to_owned()));
    // 5. Pending in s-alpha, created 3 minutes before NOW (expires in 27 min).
    clock.set(NOW - 3 * 60_000);
    let pending = plan(&host, "s-alpha", "Document the lexer", PLAN_V4);
    approvals.push((pending, "approval-pending".to_owned()));
    host.close();
    drop(host);

    let base_text = base.to_string_lossy().into_owned();
    let mut names: Vec<(String, String)> = approvals.clone();
    names.push((base_text, "[TMP]".to_owned()));
    names.sort_by_key(|(literal, _)| std::cmp::Reverse(literal.len()));
    Fixture {
        _dir: dir,
        db,
        root: root_alpha.to_string_lossy().into_owned(),
        names,
        approvals,
    }
}

/// A schema v8 database made from the 0.4.14 fixture (not migrated). The
/// fixture lives with the storage tests, which own the v8 contract.
pub(crate) fn v8() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v8.db");
    let sql = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../storage/tests/fixtures/v8-sample.sql"
    ))
    .unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(&sql).unwrap();
    drop(conn);
    (dir, db)
}

/// A database with `user_version` set to `version` and one table.
pub(crate) fn with_version(version: u32) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(format!("v{version}.db"));
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(&format!(
        "CREATE TABLE sessions (id TEXT); PRAGMA user_version = {version};"
    ))
    .unwrap();
    drop(conn);
    (dir, db)
}

/// Every plan_approvals row, as text, straight from SQLite (for "nothing
/// changed" checks).
pub(crate) fn dump_approvals(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut statement = conn
        .prepare(
            "SELECT id || '|' || status || '|' || ifnull(execution_state, '-') || '|' || ifnull(decided_at, '-') \
             FROM plan_approvals ORDER BY id",
        )
        .unwrap();
    statement
        .query_map([], |row| row.get::<_, String>(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Copies an executable with `cp`, in a process of its own: a copy written
/// by this test process would hold a write descriptor that a child forked
/// meanwhile by another test thread keeps until its own exec, and running
/// the copy then fails with ETXTBSY ("Text file busy").
pub(crate) fn copy_executable(from: &std::path::Path, to: &std::path::Path) {
    let status = std::process::Command::new("cp")
        .arg("--")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cp {} {}: {status}",
        from.display(),
        to.display()
    );
}
