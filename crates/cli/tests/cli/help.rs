//! The help text of every command, snapshot-tested, so the documentation
//! (`--help` is the CLI reference) and the behaviour cannot drift apart.

use insta_cmd::assert_cmd_snapshot;

use crate::support;

const COMMANDS: &[&[&str]] = &[
    &[],
    &["db"],
    &["db", "status"],
    &["db", "migrate"],
    &["approvals"],
    &["approvals", "list"],
    &["approvals", "show"],
    &["approvals", "cat"],
    &["approvals", "verify"],
    &["approvals", "diff"],
    &["approvals", "export"],
    &["commands"],
    &["commands", "list"],
    &["commands", "show"],
    &["serve"],
    &["demo"],
    &["completions"],
];

#[test]
fn help_of_every_command() {
    for path in COMMANDS {
        let name = if path.is_empty() {
            "help_root".to_owned()
        } else {
            format!("help_{}", path.join("_"))
        };
        let mut command = support::command();
        command.args(*path).arg("--help");
        insta::with_settings!({snapshot_suffix => "", prepend_module_to_snapshot => false, omit_expression => true}, {
            assert_cmd_snapshot!(name, command);
        });
    }
}

#[test]
fn help_documents_the_exit_codes() {
    let output = support::command().arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("Exit codes: 0 ok, 1 verification found problems"),
        "{text}"
    );
    assert!(
        text.contains("2 usage (including an ambiguous id prefix), 3 database refused"),
        "{text}"
    );
}

#[test]
fn version_prints_and_exits_zero() {
    let output = support::command().arg("--version").output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("plan-checkpoint "));
}

/// `-h` is the summary: one line per option, no exit-code paragraph, no
/// long `--db` paragraph; `--help` has both.
#[test]
fn short_help_is_a_summary_and_long_help_has_the_details() {
    for path in COMMANDS {
        let short = support::command().args(*path).arg("-h").output().unwrap();
        let long = support::command().args(*path).arg("--help").output().unwrap();
        let (short, long) = (
            String::from_utf8_lossy(&short.stdout).into_owned(),
            String::from_utf8_lossy(&long.stdout).into_owned(),
        );
        assert!(!short.contains("Exit codes:"), "{path:?} -h:\n{short}");
        assert!(
            !short.contains("safe beside a live host"),
            "{path:?} -h:\n{short}"
        );
        assert!(short.contains("see more with '--help'"), "{path:?} -h:\n{short}");
        assert!(long.contains("Exit codes: 0 ok"), "{path:?} --help:\n{long}");
        assert!(long.len() > short.len(), "{path:?}");
    }
    let long = support::command().arg("--help").output().unwrap();
    assert!(String::from_utf8_lossy(&long.stdout).contains("safe beside a live host"));
}

/// `--db`'s help: "`demo` and `completions` use no database: given on
/// their command line, --db is refused (exit 2)". From the environment it
/// is ignored, as a shell may export it for every command.
#[test]
fn demo_and_completions_refuse_a_db_on_their_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("real.db");
    let target = dir.path().join("demo");
    for args in [
        vec![
            "--db",
            db.to_str().unwrap(),
            "demo",
            "--dir",
            target.to_str().unwrap(),
        ],
        vec![
            "demo",
            "--dir",
            target.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
        ],
        vec!["completions", "bash", "--db", db.to_str().unwrap()],
    ] {
        let result = support::run(None, &args);
        assert_eq!(result.code, 2, "{args:?}: {}", result.stderr);
        assert!(
            result.stderr.contains("uses no database, so --db is refused"),
            "{}",
            result.stderr
        );
        assert!(result.stdout.is_empty(), "{}", result.stdout);
        assert!(!db.exists() && !target.exists(), "a refused run creates nothing");
    }
    let result = support::run(None, &["demo", "--db", "x"]);
    assert!(
        result.stderr.contains("choose it with --dir DIR"),
        "{}",
        result.stderr
    );
    let from_env = support::command()
        .env("PLAN_CHECKPOINT_DB", &db)
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert_eq!(from_env.status.code(), Some(0));
    assert!(!db.exists());
}

/// `db migrate --help`: "A missing file is refused (exit 3): `db migrate`
/// creates no database"; "create the schema in an empty file". The
/// sentences about a live host are proved in `live.rs`
/// (`inspection_beside_a_live_serve_changes_nothing_and_both_keep_working`
/// for a v10 database,
/// `db_migrate_of_a_v8_database_is_refused_while_a_host_holds_it`).
#[test]
fn db_migrate_refuses_a_missing_file_and_fills_an_empty_one() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("typo.db");
    let result = support::run(Some(&missing), &["db", "migrate"]);
    assert_eq!(result.code, 3, "{}", result.stderr);
    assert!(
        result.stderr.contains("no database file exists at this path"),
        "{}",
        result.stderr
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing created"
    );
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let result = support::run(Some(&empty), &["db", "migrate"]);
    assert_eq!(result.code, 0, "{}", result.stderr);
    assert!(
        result.stdout.contains("created a new schema v10"),
        "{}",
        result.stdout
    );
    let again = support::run(Some(&empty), &["db", "migrate"]);
    assert!(again.stdout.contains("nothing to migrate"), "{}", again.stdout);
}
