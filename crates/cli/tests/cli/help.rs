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
