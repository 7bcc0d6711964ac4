//! Every command in human and `--json` form, snapshot-tested against a
//! database built through the host and against a migrated v8 database.

use crate::support::{self, Fixture, run};

fn snap(fixture: &Fixture, name: &str, args: &[&str]) -> support::Run {
    let result = run(Some(&fixture.db), args);
    Fixture::settings().bind(|| insta::assert_snapshot!(name, fixture.redact(&result.transcript())));
    result
}

#[test]
fn db_status_human_and_json() {
    let fixture = support::rich();
    assert_eq!(snap(&fixture, "db_status", &["db", "status"]).code, 0);
    let json = snap(&fixture, "db_status_json", &["db", "status", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value["counts"]["pending"], 1);
    assert_eq!(value["live"].as_array().unwrap().len(), 2);
}

#[test]
fn db_migrate_on_v10_has_nothing_to_do() {
    let fixture = support::rich();
    let before = support::dump_approvals(&fixture.db);
    assert_eq!(snap(&fixture, "db_migrate_v10", &["db", "migrate"]).code, 0);
    assert_eq!(
        snap(&fixture, "db_migrate_v10_json", &["db", "migrate", "--json"]).code,
        0
    );
    assert_eq!(support::dump_approvals(&fixture.db), before);
}

#[test]
fn approvals_list_human_json_and_filters() {
    let fixture = support::rich();
    let all = snap(&fixture, "list", &["approvals", "list"]);
    assert_eq!(all.code, 0);
    // Newest first, whole ids into a pipe.
    let order: Vec<usize> = [
        "approval-pending",
        "approval-queued",
        "approval-expired",
        "approval-rejected",
    ]
    .iter()
    .map(|name| all.stdout.find(&fixture.id(name)).unwrap())
    .collect();
    assert!(order.windows(2).all(|pair| pair[0] < pair[1]), "{order:?}");
    snap(&fixture, "list_json", &["approvals", "list", "--json"]);
    snap(
        &fixture,
        "list_session_beta",
        &["approvals", "list", "--session", "s-beta"],
    );
    snap(
        &fixture,
        "list_status_rejected_json",
        &["approvals", "list", "--status", "rejected", "--json"],
    );
    let limited = snap(&fixture, "list_limit_2", &["approvals", "list", "--limit", "2"]);
    assert_eq!(limited.stdout.lines().count(), 1 + 2 + 1);
    assert!(
        limited
            .stdout
            .ends_with("more approvals than the 2 shown; use --limit N or --all to see them\n")
    );
    // Exactly the limit: the row past it is not there, so no line.
    let exact = run(Some(&fixture.db), &["approvals", "list", "--limit", "5"]);
    assert_eq!(exact.stdout.lines().count(), 1 + 5, "{}", exact.stdout);
    assert!(!exact.stdout.contains("more approvals"), "{}", exact.stdout);
    let json = run(
        Some(&fixture.db),
        &["approvals", "list", "--limit", "2", "--json"],
    );
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value["approvals"].as_array().unwrap().len(), 2);
    assert!(
        json.stderr.contains("more approvals than the 2 shown"),
        "{}",
        json.stderr
    );
    let every = run(Some(&fixture.db), &["approvals", "list", "--all"]);
    assert_eq!(every.stdout, all.stdout, "5 rows fit in the default limit");
    snap(
        &fixture,
        "list_empty",
        &["approvals", "list", "--status", "interrupted"],
    );
    let zero = run(Some(&fixture.db), &["approvals", "list", "--limit", "0"]);
    assert_eq!(zero.code, 2, "--limit 0 is a usage error, not an empty list");
}

#[test]
fn approvals_list_has_a_default_limit_and_says_there_are_more() {
    let fixture = support::rich();
    let conn = rusqlite::Connection::open(&fixture.db).unwrap();
    conn.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 29)
         INSERT INTO plan_approvals (id, session_id, turn_id, title, question, status, created_at,
           expires_at, decided_at, legacy_proposal_json)
         SELECT 'legacy-' || printf('%02d', i), 's-beta', 't', 'Old plan ' || i, 'Q', 'rejected', i, i, i, '{}'
         FROM n;",
    )
    .unwrap();
    drop(conn);
    let listed = run(Some(&fixture.db), &["approvals", "list"]);
    assert_eq!(listed.stdout.lines().count(), 1 + 20 + 1, "{}", listed.stdout);
    assert!(
        listed
            .stdout
            .ends_with("more approvals than the 20 shown; use --limit N or --all to see them\n"),
        "{}",
        listed.stdout
    );
    let every = run(Some(&fixture.db), &["approvals", "list", "--all"]);
    assert_eq!(every.stdout.lines().count(), 1 + 35);
    let json = run(Some(&fixture.db), &["approvals", "list", "--all", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value["approvals"].as_array().unwrap().len(), 35);
    assert!(json.stderr.is_empty(), "{}", json.stderr);
}

/// The display width of `text` (CJK and emoji count two).
fn width(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

#[test]
fn approvals_list_on_a_terminal_fits_its_width_and_prints_pasteable_ids() {
    let fixture = support::rich();
    let conn = rusqlite::Connection::open(&fixture.db).unwrap();
    conn.execute(
        "UPDATE plan_approvals SET title = '解析器を分割する 🚀 and a long tail of words' WHERE id = ?1",
        [fixture.id("approval-expired")],
    )
    .unwrap();
    // Fixed ids, so that the shortest unique prefixes (and so the widths
    // left for the title) are the same in every run: 17 characters, the
    // shortest shown.
    conn.execute_batch(
        "UPDATE plan_approvals SET id = 'approval-01a2' || printf('%02d', rowid) || '00000000000000000000000000'",
    )
    .unwrap();
    drop(conn);
    for columns in [80, 120, 60] {
        let listed = support::command()
            .env("PLAN_CHECKPOINT_ASSUME_TERMINAL", "1")
            .env("COLUMNS", columns.to_string())
            .arg("--db")
            .arg(&fixture.db)
            .args(["approvals", "list"])
            .output()
            .unwrap();
        let stdout = String::from_utf8(listed.stdout).unwrap();
        Fixture::settings().bind(|| {
            insta::assert_snapshot!(format!("list_terminal_{columns}"), fixture.redact(&stdout));
        });
        let lines: Vec<&str> = stdout.lines().collect();
        for line in &lines {
            assert!(width(line) <= columns, "wider than {columns}: {line:?}");
        }
        // Every column starts at the same display column on every line.
        let title_at = width(&lines[0][..lines[0].find("TITLE").unwrap()]);
        for line in &lines[1..] {
            let start = ["Document", "Fix", "解析器", "Split"]
                .iter()
                .find_map(|title| line.find(title))
                .unwrap();
            assert_eq!(width(&line[..start]), title_at, "misaligned: {line:?}");
        }
        // The ids shown are prefixes every command accepts back.
        for line in &lines[1..] {
            let shown = line.split_whitespace().next().unwrap();
            assert_eq!(shown.len(), 17, "{shown}");
            let show = run(Some(&fixture.db), &["approvals", "show", shown]);
            assert_eq!(show.code, 0, "{shown}: {}", show.stderr);
            assert!(show.stdout.starts_with(&format!("id:              {shown}")));
        }
    }
}

#[test]
fn approvals_list_json_is_exactly_the_protocol_objects() {
    let fixture = support::rich();
    let listed = run(Some(&fixture.db), &["approvals", "list", "--json"]);
    let result: plan_protocol::PlanListResult = serde_json::from_str(&listed.stdout).unwrap();
    let store = plan_storage::Store::open_read_only(&fixture.db).unwrap();
    let expected: Vec<plan_protocol::PlanApproval> = store
        .list_approvals(&plan_storage::ApprovalFilter::default())
        .unwrap()
        .into_iter()
        .map(|stored| stored.approval)
        .collect();
    assert_eq!(result.approvals, expected);
    // Same field names as the wire, nothing more.
    let value: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
    let first = value["approvals"][0].as_object().unwrap();
    let mut keys: Vec<&str> = first.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "artifact",
            "createdAt",
            "decidedAt",
            "errorCode",
            "executionId",
            "executionState",
            "expiresAt",
            "id",
            "permissionMode",
            "question",
            "sessionId",
            "status",
            "title",
            "turnId"
        ]
    );
}

#[test]
fn approvals_show_every_status() {
    let fixture = support::rich();
    for name in [
        "approval-completed",
        "approval-rejected",
        "approval-expired",
        "approval-queued",
        "approval-pending",
    ] {
        let id = fixture.id(name);
        let shown = snap(&fixture, &format!("show_{name}"), &["approvals", "show", &id]);
        assert_eq!(shown.code, 0);
        // Only a pending approval can still expire.
        assert_eq!(
            shown.stdout.contains("expires in"),
            name == "approval-pending",
            "{}",
            shown.stdout
        );
        snap(
            &fixture,
            &format!("show_{name}_json"),
            &["approvals", "show", &id, "--json"],
        );
    }
    let pending = run(
        Some(&fixture.db),
        &["approvals", "show", &fixture.id("approval-pending")],
    );
    assert!(
        pending.stdout.contains("(expires in 27 minutes)"),
        "{}",
        pending.stdout
    );
    let expired = run(
        Some(&fixture.db),
        &["approvals", "show", &fixture.id("approval-expired")],
    );
    assert!(
        expired.stdout.contains("PLAN_APPROVAL_TIMEOUT"),
        "{}",
        expired.stdout
    );
}

#[test]
fn approvals_cat_prints_the_exact_bytes() {
    let fixture = support::rich();
    let id = fixture.id("approval-completed");
    let cat = run(Some(&fixture.db), &["approvals", "cat", &id]);
    assert_eq!(cat.code, 0, "{}", cat.stderr);
    assert_eq!(cat.raw_stdout, support::PLAN_V1.as_bytes());
    snap(&fixture, "cat", &["approvals", "cat", &id]);
    let json = snap(&fixture, "cat_json", &["approvals", "cat", &id, "--json"]);
    let result: plan_protocol::PlanReadArtifactResult = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(result.markdown, support::PLAN_V1);
    assert_eq!(result.size, support::PLAN_V1.len() as u64);
}

#[test]
fn approvals_verify_all_session_and_one_when_everything_is_fine() {
    let fixture = support::rich();
    assert_eq!(
        snap(&fixture, "verify_all", &["approvals", "verify", "--all"]).code,
        0
    );
    assert_eq!(
        snap(
            &fixture,
            "verify_all_json",
            &["approvals", "verify", "--all", "--json"]
        )
        .code,
        0
    );
    assert_eq!(
        snap(
            &fixture,
            "verify_session",
            &["approvals", "verify", "--session", "s-beta"]
        )
        .code,
        0
    );
    let id = fixture.id("approval-rejected");
    assert_eq!(
        snap(&fixture, "verify_one", &["approvals", "verify", &id]).code,
        0
    );
    // Every row only when asked.
    let verbose = snap(
        &fixture,
        "verify_all_verbose",
        &["approvals", "verify", "--all", "--verbose"],
    );
    assert_eq!(
        verbose
            .stdout
            .lines()
            .filter(|line| line.starts_with("ok "))
            .count(),
        5
    );
    let quiet = run(Some(&fixture.db), &["approvals", "verify", "--all"]);
    assert_eq!(quiet.stdout.lines().count(), 2, "{}", quiet.stdout);
}

/// A database copied away from its workspace is checked against the
/// workspace it records, and `verify` says which one that is, so nobody
/// takes it for a check of files beside the copy.
#[test]
fn approvals_verify_says_which_workspace_it_read() {
    let fixture = support::rich();
    let copy = tempfile::tempdir().unwrap();
    let copied = copy.path().join("plan.db");
    std::fs::copy(&fixture.db, &copied).unwrap();
    let result = run(Some(&copied), &["approvals", "verify", "--all"]);
    let last = result.stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("read the plan files under .pi/plan/ of the workspace(s) the database records: "),
        "{}",
        result.stdout
    );
    assert!(last.contains(&fixture.root), "{last} / {}", fixture.root);
    assert!(!last.contains(copy.path().to_str().unwrap()), "{last}");
}

#[test]
fn approvals_diff_shows_what_changed_between_revisions() {
    let fixture = support::rich();
    let a = fixture.id("approval-completed");
    let b = fixture.id("approval-rejected");
    let diff = snap(&fixture, "diff", &["approvals", "diff", &a, &b]);
    assert_eq!(diff.code, 0);
    assert!(
        diff.stdout
            .contains("+2. Move tokenizing into lexer.rs and rename the API.")
    );
    let json = snap(&fixture, "diff_json", &["approvals", "diff", &a, &b, "--json"]);
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value["identical"], false);
    let same = run(Some(&fixture.db), &["approvals", "diff", &a, &a]);
    assert_eq!((same.code, same.stdout.as_str()), (0, ""));
    assert!(same.stderr.contains("identical"));
}

#[test]
fn approvals_export_is_json_lines_of_protocol_objects() {
    let fixture = support::rich();
    let export = snap(&fixture, "export", &["approvals", "export"]);
    assert_eq!(export.code, 0);
    let lines: Vec<plan_protocol::PlanApproval> = export
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    let beta = snap(
        &fixture,
        "export_session_beta",
        &["approvals", "export", "--session", "s-beta"],
    );
    assert_eq!(beta.stdout.lines().count(), 1);
}

#[test]
fn completions_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let result = run(None, &["completions", shell]);
        assert_eq!(result.code, 0, "{}", result.stderr);
        assert!(result.stdout.contains("approvals"), "{shell}");
        insta::assert_snapshot!(format!("completions_{shell}"), result.stdout);
    }
}

/// A v8 database: inspection refuses it (naming v8 and `db migrate`),
/// `db migrate` brings it to v10, and its legacy rows show `artifact: null`
/// and their legacy titles.
#[test]
fn migrated_v8_database_shows_legacy_rows() {
    let (dir, db) = support::v8();
    let fixture = Fixture {
        db: db.clone(),
        root: String::new(),
        names: vec![(dir.path().to_string_lossy().into_owned(), "[TMP]".to_owned())],
        approvals: Vec::new(),
        _dir: dir,
    };
    let refused = snap(&fixture, "v8_list_refused", &["approvals", "list"]);
    assert_eq!(refused.code, 3);
    assert!(refused.stderr.contains("version 8") && refused.stderr.contains("db migrate"));
    let migrated = snap(&fixture, "v8_migrate", &["db", "migrate"]);
    assert_eq!(migrated.code, 0);
    assert!(migrated.stdout.contains("v8 -> v10"));
    assert_eq!(
        snap(&fixture, "v8_migrate_again_json", &["db", "migrate", "--json"]).code,
        0
    );
    snap(&fixture, "v8_status", &["db", "status"]);
    snap(&fixture, "v8_list", &["approvals", "list"]);
    snap(&fixture, "v8_list_json", &["approvals", "list", "--json"]);
    let shown = snap(&fixture, "v8_show_changes", &["approvals", "show", "pa-changes"]);
    assert!(shown.stdout.contains("artifact:        null"));
    assert!(shown.stdout.contains("legacy feedback: please split step 2"));
    let json = snap(
        &fixture,
        "v8_show_unicode_json",
        &["approvals", "show", "pa-rejected", "--json"],
    );
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value["artifact"], serde_json::Value::Null);
    assert_eq!(value["title"], "Планировать ✓");
    snap(&fixture, "v8_show_garbage", &["approvals", "show", "pa-garbage"]);
    snap(&fixture, "v8_export", &["approvals", "export"]);
    let verify = snap(&fixture, "v8_verify_all", &["approvals", "verify", "--all"]);
    assert_eq!(verify.code, 0);
    let cat = snap(&fixture, "v8_cat_legacy", &["approvals", "cat", "pa-approved"]);
    assert_eq!(cat.code, 1);
}

#[test]
fn colour_only_on_a_terminal_or_when_asked_and_never_with_no_color() {
    let fixture = support::rich();
    let list = |terminal: bool, no_color: bool, flag: Option<&str>| {
        let mut command = support::command();
        command.env_remove("NO_COLOR").env_remove("TERM");
        if terminal {
            command
                .env("PLAN_CHECKPOINT_ASSUME_TERMINAL", "1")
                .env("COLUMNS", "200");
        }
        if no_color {
            command.env("NO_COLOR", "1");
        }
        if let Some(flag) = flag {
            command.arg("--color").arg(flag);
        }
        let output = command
            .arg("--db")
            .arg(&fixture.db)
            .args(["approvals", "list"])
            .output()
            .unwrap();
        String::from_utf8(output.stdout).unwrap()
    };
    let pending_in_yellow = "\u{1b}[1m\u{1b}[33mpending\u{1b}[0m";
    let coloured = list(true, false, None);
    assert!(coloured.contains(pending_in_yellow), "{coloured:?}");
    assert!(coloured.contains("\u{1b}[32mapproved"), "{coloured:?}");
    assert!(coloured.contains("\u{1b}[31mrejected") && coloured.contains("\u{1b}[35mexpired"));
    for plain in [
        list(false, false, None),
        list(true, true, None),
        list(true, false, Some("never")),
    ] {
        assert!(!plain.contains('\u{1b}'), "{plain:?}");
    }
    assert!(list(false, false, Some("always")).contains(pending_in_yellow));
    assert!(list(true, true, Some("always")).contains(pending_in_yellow));
}

#[test]
fn verify_json_is_the_library_report_whatever_the_member_order() {
    let fixture = support::rich();
    // A problem and an orphan, so every member has something in it.
    std::fs::write(fixture.artifact("approval-rejected"), "tampered\n").unwrap();
    let stray = std::path::Path::new(&fixture.root).join(".pi/plan/stray.md");
    std::fs::write(stray, "# stray\n").unwrap();
    let store = plan_storage::Store::open_read_only(&fixture.db).unwrap();
    for (args, scope) in [
        (
            &["approvals", "verify", "--all", "--json"][..],
            plan_core::VerifyScope::Everything,
        ),
        (
            &["approvals", "verify", "--session", "s-alpha", "--json"],
            plan_core::VerifyScope::Session("s-alpha".into()),
        ),
    ] {
        let printed = run(Some(&fixture.db), args);
        assert_eq!(printed.code, 1, "{}", printed.stderr);
        let parsed: plan_protocol::VerifyReport = serde_json::from_str(&printed.stdout).unwrap();
        let expected = plan_protocol::VerifyReport::from(&store.verify(&scope).unwrap());
        assert_eq!(parsed, expected);
        assert!(!parsed.ok && parsed.orphans.len() == 1);
    }
}

/// Runs `plan-checkpoint --db db args` under a pseudo-terminal (`script`),
/// stdout and stderr both on it; `None` when `script` is not installed.
fn on_a_pty(db: &std::path::Path, args: &str) -> Option<String> {
    let line = format!("{} --db '{}' {args}", support::BIN, db.display());
    let output = std::process::Command::new("script")
        .env("TZ", "UTC")
        .env_remove("NO_COLOR")
        .env_remove("PLAN_CHECKPOINT_DB")
        .env("COLUMNS", "120")
        .env("TERM", "xterm")
        .args(["-qec", &line, "/dev/null"])
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[test]
fn verify_shows_progress_on_a_terminal_and_nothing_into_a_pipe() {
    let fixture = support::rich();
    let conn = rusqlite::Connection::open(&fixture.db).unwrap();
    conn.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 1999)
         INSERT INTO plan_approvals (id, session_id, turn_id, title, question, status, created_at,
           expires_at, decided_at, legacy_proposal_json)
         SELECT 'legacy-' || i, 's-beta', 't', 'Old plan', 'Q', 'rejected', i, i, i, '{}' FROM n;",
    )
    .unwrap();
    drop(conn);
    let piped = run(Some(&fixture.db), &["approvals", "verify", "--all"]);
    assert_eq!(piped.code, 0, "{}", piped.stderr);
    assert!(piped.stderr.is_empty(), "{}", piped.stderr);
    assert!(!piped.stdout.contains("approvals verified"));
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("`script` (util-linux) is not installed: the terminal half of this test is skipped");
        return;
    }
    let shown = on_a_pty(&fixture.db, "approvals verify --all").unwrap();
    assert!(shown.contains("approvals verified"), "{shown:?}");
    assert!(
        shown.contains("2005 approval(s) checked: 5 ok, 2000 legacy"),
        "{shown:?}"
    );
}

/// `approvals show` says where the plan file is: the session's workspace
/// root and the absolute path, which is the file `approvals cat` reads; the
/// JSON stays the protocol object, its path relative to that root.
#[test]
fn show_names_the_workspace_root_and_the_absolute_artifact_path() {
    let fixture = support::rich();
    let id = fixture.id("approval-pending");
    let shown = run(Some(&fixture.db), &["approvals", "show", &id]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let field = |label: &str| {
        shown
            .stdout
            .lines()
            .find_map(|line| line.strip_prefix(label))
            .map(str::trim)
            .unwrap()
            .to_owned()
    };
    let root = field("workspace:");
    let file = std::path::PathBuf::from(field("artifact file:"));
    assert!(file.is_absolute(), "{}", file.display());
    assert_eq!(file, fixture.artifact("approval-pending"));
    assert_eq!(file, std::path::Path::new(&root).join(field("artifact:")));
    let cat = run(Some(&fixture.db), &["approvals", "cat", &id]);
    assert_eq!(std::fs::read(&file).unwrap(), cat.raw_stdout);
    let json = run(Some(&fixture.db), &["approvals", "show", &id, "--json"]);
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        std::path::Path::new(&root).join(value["artifact"]["path"].as_str().unwrap()),
        file
    );
}

/// `approvals diff --help`: "On a terminal, removed lines are red, added
/// lines green and hunk headers cyan; into a pipe it is plain."
#[test]
fn approvals_diff_is_coloured_on_a_terminal_and_plain_into_a_pipe() {
    let fixture = support::rich();
    let a = fixture.id("approval-completed");
    let b = fixture.id("approval-rejected");
    let on_terminal = support::command()
        .env_remove("NO_COLOR")
        .env("PLAN_CHECKPOINT_ASSUME_TERMINAL", "1")
        .arg("--db")
        .arg(&fixture.db)
        .args(["approvals", "diff", &a, &b])
        .output()
        .unwrap();
    let text = String::from_utf8(on_terminal.stdout).unwrap();
    let red = "\u{1b}[31m-";
    let green = "\u{1b}[32m+2. Move tokenizing into lexer.rs and rename the API.";
    let cyan = "\u{1b}[36m@@";
    for painted in [red, green, cyan] {
        assert!(text.contains(painted), "{painted:?} missing from {text:?}");
    }
    let piped = support::command()
        .env_remove("NO_COLOR")
        .arg("--db")
        .arg(&fixture.db)
        .args(["approvals", "diff", &a, &b])
        .output()
        .unwrap();
    assert!(!piped.stdout.contains(&0x1b), "a pipe gets no colour");
    let no_color = run(
        Some(&fixture.db),
        &["approvals", "diff", &a, &b, "--color", "never"],
    );
    assert!(!no_color.stdout.contains('\u{1b}'));
}

/// `approvals diff --help`: "With one id: against the previous submission
/// of its session." The first submission has nothing to compare with.
#[test]
fn approvals_diff_with_one_id_compares_with_the_previous_submission() {
    let fixture = support::rich();
    let first = fixture.id("approval-completed");
    let revision = fixture.id("approval-rejected");
    let one = run(Some(&fixture.db), &["approvals", "diff", &revision]);
    let two = run(Some(&fixture.db), &["approvals", "diff", &first, &revision]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    assert!(!one.stdout.is_empty());
    assert_eq!(one.stdout, two.stdout);
    let alone = run(Some(&fixture.db), &["approvals", "diff", &first]);
    assert_eq!((alone.code, alone.stdout.as_str()), (0, ""));
    assert!(
        alone.stderr.contains("nothing to compare with"),
        "{}",
        alone.stderr
    );
}

/// `--workspace DIR` checks a copy of the project: the plan files and the
/// orphans under DIR, for the approvals of the one workspace it stands for.
#[test]
fn approvals_verify_workspace_checks_a_copied_project() {
    let fixture = support::rich();
    let copy = tempfile::tempdir().unwrap();
    let project = copy.path().join("project");
    let copy_tree = |from: &std::path::Path, to: &std::path::Path| {
        let status = std::process::Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .unwrap();
        assert!(status.success());
    };
    copy_tree(std::path::Path::new(&fixture.root), &project);
    let project_text = project.to_str().unwrap();
    let args = [
        "approvals",
        "verify",
        "--session",
        "s-alpha",
        "--workspace",
        project_text,
    ];
    let intact = run(Some(&fixture.db), &args);
    assert_eq!(intact.code, 0, "{}{}", intact.stdout, intact.stderr);
    assert!(
        intact.stdout.contains(&format!(
            "of {project_text} (--workspace, in place of the recorded {})",
            fixture.root
        )),
        "{}",
        intact.stdout
    );
    // A change in the copy, not in the original, is what it finds.
    let plans = project.join(".pi/plan");
    let first = std::fs::read_dir(&plans)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|ext| ext == "md"))
        .unwrap();
    std::fs::write(&first, "tampered in the copy\n").unwrap();
    std::fs::write(plans.join("stray.md"), "no approval records me\n").unwrap();
    let tampered = run(Some(&fixture.db), &args);
    assert_eq!(tampered.code, 1, "{}", tampered.stdout);
    assert!(
        tampered.stdout.contains("ARTIFACT_INTEGRITY_MISMATCH"),
        "{}",
        tampered.stdout
    );
    assert!(
        tampered
            .stdout
            .contains(&format!("{project_text}/.pi/plan/stray.md")),
        "{}",
        tampered.stdout
    );
    let original = run(
        Some(&fixture.db),
        &["approvals", "verify", "--session", "s-alpha"],
    );
    assert_eq!(original.code, 0, "the original is untouched: {}", original.stdout);

    // The database records two workspaces: --workspace cannot stand for both.
    let both = run(
        Some(&fixture.db),
        &["approvals", "verify", "--all", "--workspace", project_text],
    );
    assert_eq!(both.code, 2, "{}", both.stderr);
    assert!(
        both.stderr.contains("--workspace stands for one workspace"),
        "{}",
        both.stderr
    );
}
