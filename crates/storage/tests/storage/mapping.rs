//! The v8 -> v10 mapping rules of the storage contract, on the sample
//! database and on many generated v8 databases.

use std::fmt::Write as _;
use std::path::Path;

use plan_core::{ApprovalStatus, ErrorCode, Mode, PermissionMode};
use plan_storage::{ApprovalFilter, Store, StoredApproval};

use crate::support::{database_from_sql, fixture_database, fixture_sql, table_rows};

/// The v8 columns of the tables that must keep every row and value.
const KEPT: [&str; 4] = [
    "SELECT id, title, workspace_root, mode, permission_mode, provider, model, created_at, updated_at \
     FROM sessions ORDER BY rowid",
    "SELECT * FROM transcript_entries ORDER BY rowid",
    "SELECT * FROM scheduled_tasks ORDER BY rowid",
    "SELECT * FROM settings WHERE key <> 'shell.default' ORDER BY rowid",
];

fn kept_rows(path: &Path) -> Vec<Vec<String>> {
    KEPT.iter().map(|select| table_rows(path, select)).collect()
}

fn approval(store: &Store, id: &str) -> StoredApproval {
    store
        .get_approval(&plan_core::ApprovalId::from(id))
        .unwrap()
        .unwrap_or_else(|| panic!("{id} was dropped"))
}

#[test]
fn the_sample_database_maps_row_by_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_database(dir.path(), "v8.db");
    let before = kept_rows(&path);
    let (store, _) = Store::open(&path).unwrap();

    let pending = approval(&store, "pa-pending");
    assert_eq!(pending.approval.status, ApprovalStatus::Interrupted);
    assert_eq!(pending.approval.error_code, Some(ErrorCode::HostRestarted));
    assert_eq!(pending.approval.title, "Split parser");
    assert_eq!(pending.approval.question, "");
    assert_eq!(pending.approval.created_at, 1_750_000_000_500);
    assert_eq!(pending.approval.expires_at, 1_750_000_000_500 + 1_800_000);
    assert_eq!(pending.approval.decided_at, None);
    assert_eq!(pending.approval.artifact, None);
    assert_eq!(
        pending.legacy_proposal_json.as_deref(),
        Some(r#"{"title":"Split parser","summary":"s","steps":["a","b"],"proposedCommands":["cargo test"]}"#)
    );
    assert_eq!(pending.legacy_feedback, None);

    let approved = approval(&store, "pa-approved");
    assert_eq!(approved.approval.status, ApprovalStatus::Approved);
    assert_eq!(approved.approval.error_code, None);
    assert_eq!(approved.approval.title, "Fix flaky test");
    assert_eq!(approved.approval.decided_at, Some(1_750_000_201_000));
    assert_eq!(approved.approval.permission_mode, None);
    assert_eq!(approved.approval.execution_id, None);
    assert_eq!(approved.approval.execution_state, None);

    let changes = approval(&store, "pa-changes");
    assert_eq!(changes.approval.status, ApprovalStatus::Rejected);
    assert_eq!(changes.approval.error_code, None);
    assert_eq!(changes.approval.title, "First try");
    assert_eq!(changes.legacy_feedback.as_deref(), Some("please split step 2"));

    let rejected = approval(&store, "pa-rejected");
    assert_eq!(rejected.approval.status, ApprovalStatus::Rejected);
    assert_eq!(rejected.approval.title, "Планировать ✓");

    let expired = approval(&store, "pa-expired");
    assert_eq!(expired.approval.status, ApprovalStatus::Expired);
    assert_eq!(expired.approval.error_code, Some(ErrorCode::PlanApprovalTimeout));
    assert_eq!(
        expired.approval.title, "",
        "a proposal without a title maps to ''"
    );

    let garbage = approval(&store, "pa-garbage");
    assert_eq!(garbage.approval.status, ApprovalStatus::Rejected);
    assert_eq!(
        garbage.approval.title, "",
        "a proposal that is not JSON maps to ''"
    );
    assert_eq!(garbage.legacy_proposal_json.as_deref(), Some("not json at all {"));

    let all = store.list_approvals(&ApprovalFilter::default()).unwrap();
    assert_eq!(all.len(), 6, "nothing dropped");
    assert!(store.live_rows().unwrap().is_empty(), "no migrated row is live");

    // Sessions, transcripts, scheduled tasks and settings keep every value.
    drop(store);
    assert_eq!(kept_rows(&path), before);
    let (store, _) = Store::open(&path).unwrap();
    let unbound = store
        .get_session(&plan_core::SessionId::from("s-unbound"))
        .unwrap()
        .unwrap();
    assert_eq!(unbound.workspace_root, None);
    assert_eq!(unbound.permission_mode, PermissionMode::Auto);
    assert_eq!(unbound.shell, None);
    let unicode = store
        .get_session(&plan_core::SessionId::from("s-unicode"))
        .unwrap()
        .unwrap();
    assert_eq!(unicode.workspace_root.as_deref(), Some("/srv/Проект"));
    assert_eq!(unicode.mode, Mode::Plan);
    drop(store);
    assert_eq!(
        table_rows(&path, "SELECT mode FROM scheduled_tasks WHERE id = 'st-plan'"),
        ["text \"plan\""],
        "a scheduled Plan task stays in Plan"
    );
    assert_eq!(
        table_rows(
            &path,
            "SELECT value_json FROM settings WHERE key = 'shell.default'"
        ),
        ["text \"null\""]
    );
}

#[test]
fn an_existing_default_shell_setting_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let sql = format!(
        "{}\nINSERT INTO settings VALUES ('shell.default', '\"zsh\"');",
        fixture_sql()
    );
    let path = database_from_sql(dir.path(), "v8.db", &sql);
    let (store, _) = Store::open(&path).unwrap();
    assert_eq!(store.default_shell().unwrap().as_deref(), Some("zsh"));
}

/// A small deterministic generator (xorshift64*), so every run checks the same databases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// SQL text literal.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn optional(text: Option<&str>) -> String {
    text.map_or_else(|| "NULL".to_owned(), quote)
}

const TEXTS: [&str; 8] = [
    "plain",
    "Überarbeitung — 计划 ✓",
    "emoji 🌍 and 'quotes' \"double\"",
    "tab\tnew\nline\r\n",
    "",
    "back\\slash",
    "日本語のタイトル",
    "x",
];

/// A proposal_json and the title the contract says it maps to.
fn proposal(rng: &mut Rng) -> (String, String) {
    let title = rng.pick(&TEXTS).to_owned();
    let json_title = serde_json::to_string(&title).unwrap();
    match rng.below(11) {
        0..=2 => (
            format!(r#"{{"title":{json_title},"summary":"s","steps":["a"],"proposedCommands":["ls"]}}"#),
            title,
        ),
        3 => (format!(r#"{{"steps":[],"title":{json_title}}}"#), title),
        4 => (r#"{"title":42,"steps":[]}"#.to_owned(), String::new()),
        5 => (r#"{"title":null}"#.to_owned(), String::new()),
        6 => (format!(r#"[{{"title":{json_title}}}]"#), String::new()),
        7 => (json_title, String::new()),
        8 => ("not json at all {".to_owned(), String::new()),
        9 => (format!("{{title:{json_title}}}"), String::new()),
        _ => (format!(r#"{{"plan":{{"title":{json_title}}}}}"#), String::new()),
    }
}

struct Expected {
    id: String,
    title: String,
    status: ApprovalStatus,
    error_code: Option<ErrorCode>,
    created_at: i64,
    decided_at: Option<i64>,
    proposal_json: String,
    feedback: Option<String>,
}

/// Generates one v8 database as SQL and what its approvals must become.
fn generate(seed: u64) -> (String, Vec<Expected>) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut sql = String::new();
    let baseline =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/V8__baseline.sql"))
            .unwrap();
    sql.push_str(&baseline);
    let sessions = 1 + rng.below(4);
    for session in 0..sessions {
        let root = if rng.below(3) == 0 {
            None
        } else {
            Some(format!("/srv/{}", rng.pick(&TEXTS)))
        };
        writeln!(
            sql,
            "INSERT INTO sessions VALUES ('s{session}', {}, {}, {}, {}, {}, {}, {}, {});",
            quote(rng.pick(&TEXTS)),
            optional(root.as_deref()),
            quote(rng.pick(&["agent", "plan"])),
            quote(rng.pick(&["ask", "accept-edits", "auto"])),
            optional(if rng.below(2) == 0 { None } else { Some("provider") }),
            optional(if rng.below(2) == 0 { None } else { Some("model") }),
            1_700_000_000_000_u64 + rng.below(1_000_000),
            1_700_001_000_000_u64 + rng.below(1_000_000),
        )
        .unwrap();
        for seq in 0..rng.below(30) {
            writeln!(
                sql,
                "INSERT INTO transcript_entries (session_id, seq, role, content_json, created_at) \
                 VALUES ('s{session}', {seq}, {}, {}, {});",
                quote(rng.pick(&["user", "assistant", "tool", "system"])),
                quote(&serde_json::json!({ "text": rng.pick(&TEXTS) }).to_string()),
                1_700_000_000_000_u64 + seq,
            )
            .unwrap();
        }
        writeln!(
            sql,
            "INSERT INTO scheduled_tasks VALUES ('t{session}', {}, {}, 'prompt', '0 * * * *', {}, NULL);",
            if rng.below(2) == 0 {
                format!("'s{session}'")
            } else {
                "NULL".to_owned()
            },
            quote(rng.pick(&["agent", "plan"])),
            rng.below(2),
        )
        .unwrap();
    }
    let mut expected = Vec::new();
    for index in 0..rng.below(25) {
        let (proposal_json, title) = proposal(&mut rng);
        let v8_status = rng.pick(&["pending", "approved", "rejected", "changes_requested", "expired"]);
        let (status, error_code) = match v8_status {
            "pending" => (ApprovalStatus::Interrupted, Some(ErrorCode::HostRestarted)),
            "approved" => (ApprovalStatus::Approved, None),
            "expired" => (ApprovalStatus::Expired, Some(ErrorCode::PlanApprovalTimeout)),
            _ => (ApprovalStatus::Rejected, None),
        };
        let feedback = (rng.below(3) == 0).then(|| rng.pick(&TEXTS).to_owned());
        let created_at = 1_700_000_000_000 + rng.below(10_000_000) as i64;
        let decided_at = (rng.below(4) != 0).then(|| created_at + 5_000);
        let id = format!("pa-{seed}-{index}");
        writeln!(
            sql,
            "INSERT INTO plan_approvals VALUES ({}, 's{}', 'turn', {}, '{v8_status}', {}, {created_at}, {});",
            quote(&id),
            rng.below(sessions),
            quote(&proposal_json),
            optional(feedback.as_deref()),
            decided_at.map_or_else(|| "NULL".to_owned(), |at| at.to_string()),
        )
        .unwrap();
        expected.push(Expected {
            id,
            title,
            status,
            error_code,
            created_at,
            decided_at,
            proposal_json,
            feedback,
        });
    }
    if rng.below(2) == 0 {
        sql.push_str("INSERT INTO settings VALUES ('theme', '\"light\"');\n");
    }
    (sql, expected)
}

#[test]
fn generated_v8_databases_map_by_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    for seed in 0..40 {
        let (sql, expected) = generate(seed);
        let path = database_from_sql(dir.path(), &format!("gen-{seed}.db"), &sql);
        let before = kept_rows(&path);
        let (store, report) = Store::open(&path).unwrap();
        assert_eq!(report.from, Some(8));
        let all = store.list_approvals(&ApprovalFilter::default()).unwrap();
        assert_eq!(all.len(), expected.len(), "seed {seed}: rows dropped or added");
        for want in &expected {
            let got = approval(&store, &want.id);
            let row = &got.approval;
            let context = format!("seed {seed} row {} proposal {:?}", want.id, want.proposal_json);
            assert_eq!(row.title, want.title, "{context}");
            assert_eq!(row.question, "", "{context}");
            assert_eq!(row.status, want.status, "{context}");
            assert_eq!(row.error_code, want.error_code, "{context}");
            assert_eq!(row.created_at, want.created_at, "{context}");
            assert_eq!(row.expires_at, want.created_at + 1_800_000, "{context}");
            assert_eq!(row.decided_at, want.decided_at, "{context}");
            assert_eq!(row.artifact, None, "{context}");
            assert_eq!(row.permission_mode, None, "{context}");
            assert_eq!(row.execution_id, None, "{context}");
            assert_eq!(row.execution_state, None, "{context}");
            assert_eq!(
                got.legacy_proposal_json.as_deref(),
                Some(want.proposal_json.as_str())
            );
            assert_eq!(got.legacy_feedback, want.feedback, "{context}");
        }
        drop(store);
        assert_eq!(kept_rows(&path), before, "seed {seed}: kept tables changed");
    }
}

#[test]
fn only_plan_approvals_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_database(dir.path(), "v8.db");
    // A rebuilt table gets new root pages; the kept tables and their
    // indexes must keep theirs (ADD COLUMN only rewrites the schema entry).
    let roots = "SELECT name, rootpage FROM sqlite_schema \
                 WHERE tbl_name IN ('sessions','transcript_entries','settings','scheduled_tasks') ORDER BY name";
    let before = table_rows(&path, roots);
    drop(Store::open(&path).unwrap());
    assert_eq!(table_rows(&path, roots), before);
}
