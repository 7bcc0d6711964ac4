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
    &["audit"],
    &["audit", "verify"],
    &["commands"],
    &["commands", "list"],
    &["commands", "show"],
    &["serve"],
    &["demo"],
    &["completions"],
];

/// Help text with its wrapping undone (every run of whitespace one space),
/// to find a sentence that the 80-column wrapping split across lines.
fn unwrapped(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

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
    let text = unwrapped(&String::from_utf8_lossy(&output.stdout));
    assert!(
        text.contains("Exit codes: 0 ok, 1 verification found problems"),
        "{text}"
    );
    assert!(
        text.contains("2 usage (including an ambiguous id prefix), 3 database refused"),
        "{text}"
    );
}

/// `--version` names the release and the commit it was built from: the
/// checkout's, or `unknown` (a build outside git that recorded none).
#[test]
fn version_names_the_release_and_the_commit() {
    let output = support::command().arg("--version").output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8_lossy(&output.stdout);
    let rest = text
        .trim_end()
        .strip_prefix(concat!(
            "plan-checkpoint ",
            env!("CARGO_PKG_VERSION"),
            " (commit "
        ))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        rest == "unknown" || (rest.len() == 12 && rest.chars().all(|c| c.is_ascii_hexdigit())),
        "{text}"
    );
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    if let Ok(head) = head
        && head.status.success()
    {
        assert_eq!(
            rest,
            String::from_utf8_lossy(&head.stdout).trim(),
            "built from this checkout"
        );
    }
}

/// Every help text fits 80 columns and speaks to a newcomer: no line is
/// wider (usage lines of hidden internal commands aside), and no
/// "ADR 0053" jargon.
#[test]
fn help_fits_80_columns_without_jargon() {
    let mut paths: Vec<Vec<&str>> = COMMANDS.iter().map(|path| path.to_vec()).collect();
    for sub in ["install", "pending", "approve", "reject", "card-url"] {
        paths.push(vec!["claude-code", sub]);
    }
    paths.push(vec!["claude-code"]);
    for path in paths {
        for flag in ["-h", "--help"] {
            let output = support::command().args(&path).arg(flag).output().unwrap();
            let text = String::from_utf8_lossy(&output.stdout);
            for line in text.lines() {
                let width = unicode_width::UnicodeWidthStr::width(line);
                assert!(
                    width <= 80,
                    "`{} {flag}`: {width} columns: {line:?}",
                    path.join(" ")
                );
            }
            assert!(
                !text.contains("ADR"),
                "`{} {flag}` says ADR: {text}",
                path.join(" ")
            );
        }
    }
}

/// `-h` is the summary: one line per option, no exit-code paragraph, no
/// long `--db` paragraph; `--help` has both.
#[test]
fn short_help_is_a_summary_and_long_help_has_the_details() {
    for path in COMMANDS {
        let short = support::command().args(*path).arg("-h").output().unwrap();
        let long = support::command().args(*path).arg("--help").output().unwrap();
        let (short, long) = (
            unwrapped(&String::from_utf8_lossy(&short.stdout)),
            unwrapped(&String::from_utf8_lossy(&long.stdout)),
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
    assert!(unwrapped(&String::from_utf8_lossy(&long.stdout)).contains("safe beside a live host"));
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

/// Each sentence of `--help` that states behaviour, and the test that
/// proves it (`module::test` under `tests/cli/`). Changing a sentence means
/// changing this table, which names a test that must exist.
const BEHAVIOUR: &[(&[&str], &str, &str)] = &[
    (
        &[],
        "open it read-only and never migrate it, so they are safe beside a live host",
        "live::inspection_beside_a_live_serve_changes_nothing_and_both_keep_working",
    ),
    (
        &[],
        "`serve` opens it read-write (migrating it first) and holds it",
        "serve::eof_shuts_down_cleanly_and_a_second_serve_is_refused",
    ),
    (
        &[],
        "given on their command line, --db is refused (exit 2)",
        "help::demo_and_completions_refuse_a_db_on_their_command_line",
    ),
    (
        &[],
        "auto (stdout is a terminal and NO_COLOR is not set), always, never",
        "commands::colour_only_on_a_terminal_or_when_asked_and_never_with_no_color",
    ),
    (
        &[],
        "2 usage (including an ambiguous id prefix)",
        "errors::id_prefixes_resolve_and_an_ambiguous_one_is_a_usage_error",
    ),
    (
        &[],
        "3 database refused (none given, missing, wrong schema version, corrupt",
        "errors::corrupt_files_are_refused",
    ),
    (
        &["db", "status"],
        "A database that needs `db migrate` (schema v8, or an empty file) is reported as such",
        "errors::an_empty_file_gets_the_same_story_from_status_and_migrate",
    ),
    (
        &["db", "migrate"],
        "migrate v8 in one transaction",
        "commands::migrated_v8_database_shows_legacy_rows",
    ),
    (
        &["db", "migrate"],
        "create the schema in an empty file",
        "help::db_migrate_refuses_a_missing_file_and_fills_an_empty_one",
    ),
    (
        &["db", "migrate"],
        "or say it is already v10",
        "commands::db_migrate_on_v10_has_nothing_to_do",
    ),
    (
        &["db", "migrate"],
        "A missing file is refused (exit 3)",
        "help::db_migrate_refuses_a_missing_file_and_fills_an_empty_one",
    ),
    (
        &["db", "migrate"],
        "says there is nothing to migrate and exits 0 without writing",
        "live::inspection_beside_a_live_serve_changes_nothing_and_both_keep_working",
    ),
    (
        &["db", "migrate"],
        "refused (exit 3, HOST_ALREADY_RUNNING)",
        "live::db_migrate_of_a_v8_database_is_refused_while_a_host_holds_it",
    ),
    (
        &["approvals", "list"],
        "the newest 20 unless --limit or --all says otherwise",
        "commands::approvals_list_has_a_default_limit_and_says_there_are_more",
    ),
    (
        &["approvals", "list"],
        "ids are shown as the shortest prefix no other approval shares",
        "commands::approvals_list_on_a_terminal_fits_its_width_and_prints_pasteable_ids",
    ),
    (
        &["approvals", "list"],
        "an unknown session is an error",
        "errors::unknown_sessions_are_refused_alike_by_list_verify_and_export",
    ),
    (
        &["approvals", "list"],
        "the protocol v9 PlanListResult",
        "commands::approvals_list_json_is_exactly_the_protocol_objects",
    ),
    (
        &["approvals", "show"],
        "legacy v8 fields included",
        "commands::migrated_v8_database_shows_legacy_rows",
    ),
    (
        &["approvals", "show"],
        "times in local RFC 3339 with a relative time",
        "commands::approvals_show_every_status",
    ),
    (
        &["approvals", "show"],
        "the joined absolute path (`artifact file:`)",
        "commands::show_names_the_workspace_root_and_the_absolute_artifact_path",
    ),
    (
        &["approvals", "cat"],
        "refused on mismatch unless --force",
        "errors::tampered_artifact",
    ),
    (
        &["approvals", "cat"],
        "Into a pipe or file it writes the exact bytes",
        "hostile::cat_writes_exact_bytes_only_into_a_pipe_or_with_raw",
    ),
    (
        &["approvals", "verify"],
        "also report orphan files",
        "errors::orphan_file",
    ),
    (
        &["approvals", "verify"],
        "Exit 1 when anything is wrong",
        "errors::tampered_artifact",
    ),
    (
        &["approvals", "verify"],
        "Print a line for every approval checked",
        "commands::approvals_verify_all_session_and_one_when_everything_is_fine",
    ),
    (
        &["approvals", "verify"],
        "streamed, so its members come as",
        "commands::verify_json_is_the_library_report_whatever_the_member_order",
    ),
    (
        &["approvals", "diff"],
        "With one id: against the previous submission of its session",
        "commands::approvals_diff_with_one_id_compares_with_the_previous_submission",
    ),
    (
        &["approvals", "diff"],
        "With two: from the first (older) to the second (newer)",
        "commands::approvals_diff_shows_what_changed_between_revisions",
    ),
    (
        &["approvals", "diff"],
        "removed lines are red, added lines green",
        "commands::approvals_diff_is_coloured_on_a_terminal_and_plain_into_a_pipe",
    ),
    (
        &["approvals", "export"],
        "one protocol v9 PlanApproval per line, newest first",
        "commands::approvals_export_is_json_lines_of_protocol_objects",
    ),
    (
        &["approvals", "export"],
        "Each line also carries `auditSeq` and `auditHash`",
        "audit::approvals_export_carries_the_latest_seq_and_hash_of_each_approval",
    ),
    (
        &["audit", "verify"],
        "A changed, removed or inserted record is named by its seq, an edited approval row by its id",
        "audit::rows_changed_removed_or_inserted_after_export_are_named_by_seq",
    ),
    (
        &["audit", "verify"],
        "every approval row against the state its chained facts give it",
        "audit::an_edited_approval_row_is_found_with_and_without_the_collectors_copy",
    ),
    (
        &["audit", "verify"],
        "when one's audit.hash was rewritten, or when the file ends before the database's head",
        "audit::the_collectors_copies_are_checked_too",
    ),
    (
        &["audit", "verify"],
        "An unfinished last line (a live file) is a note; an unreadable file exits 4",
        "audit::an_unfinished_last_line_is_a_note_and_an_unreadable_file_exit_4",
    ),
    (
        &["audit", "verify"],
        "A record changed, removed or inserted in the database after it was exported is named by its seq",
        "audit::a_rewritten_chain_is_caught_only_by_the_collectors_copy",
    ),
    (
        &["commands", "list"],
        "the command text is cut first, call ids never",
        "host_commands::commands_list_fits_a_terminal_and_cuts_nothing_into_a_pipe",
    ),
    (
        &["serve"],
        "interrupts whatever a previous host left pending or running (the startup fence)",
        "serve::sigkill_while_pending_queued_and_running_interrupts_without_replay",
    ),
    (
        &["serve"],
        "(1 to 604800000, seven days)",
        "serve::an_out_of_range_ttl_is_refused_by_the_one_rule",
    ),
    (
        &["serve"],
        "Default: this binary, which embeds it",
        "host_commands::a_plan_command_streams_before_it_exits_and_its_write_is_refused",
    ),
    (
        &["demo"],
        "The directory is kept",
        "demo::demo_without_a_directory_makes_and_keeps_a_temporary_one",
    ),
    (
        &["demo"],
        "a new or empty directory",
        "errors::demo_refuses_a_directory_that_is_not_empty",
    ),
    (
        &["completions"],
        "Print a shell completion script to stdout",
        "completion::bash_completes_subcommands_and_flags",
    ),
];

#[test]
fn every_behaviour_sentence_of_the_help_names_a_test_that_exists() {
    let tests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli");
    for (path, sentence, test) in BEHAVIOUR {
        let output = support::command().args(*path).arg("--help").output().unwrap();
        // Wrapped at 80 columns: a sentence may span lines.
        let help = unwrapped(&String::from_utf8_lossy(&output.stdout));
        assert!(
            help.contains(sentence),
            "`{} --help` no longer says {sentence:?}",
            path.join(" ")
        );
        let (module, name) = test.split_once("::").unwrap();
        let source = std::fs::read_to_string(tests.join(format!("{module}.rs"))).unwrap();
        assert!(
            source.contains(&format!("#[test]\nfn {name}()")),
            "{test}, named for {sentence:?}, is not a test"
        );
    }
}
