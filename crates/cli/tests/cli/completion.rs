//! The completion scripts, run in their shells: each one is sourced into a
//! real bash, zsh and fish, which then complete a subcommand (`approvals
//! <TAB>`) and a flag (`approvals list --<TAB>`), so a script that parses
//! but completes nothing below the first level fails here.
//!
//! A shell that is not installed is reported loudly on stderr; under CI
//! (`CI` set, as `.ci/run` does, which installs all three) it is a failure.
//! The report goes to the process's stderr itself, past the test harness's
//! capture, so a green run shows it.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use crate::support;

/// What `approvals <TAB>` must offer.
const SUBCOMMANDS: &[&str] = &["cat", "diff", "export", "list", "show", "verify"];
/// What `approvals list --<TAB>` must offer.
const LIST_FLAGS: &[&str] = &["--all", "--json", "--limit", "--session", "--status", "--db"];

/// Writes `completions SHELL` into `dir/file` and returns its path.
fn script(dir: &Path, shell: &str, file: &str) -> std::path::PathBuf {
    let run = support::run(None, &["completions", shell]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let path = dir.join(file);
    std::fs::write(&path, run.stdout).unwrap();
    path
}

/// Whether `shell` runs here; if not, says so loudly, and fails under CI.
fn installed(shell: &str) -> bool {
    let found = Command::new(shell)
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if !found {
        // Not `eprintln!`: the harness captures that and shows it only for
        // a failing test, so a skipped shell would pass silently.
        let _ = writeln!(
            std::io::stderr(),
            "\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
             !!! {shell} is not installed: its completion script is NOT tested here\n\
             !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
        );
        assert!(
            std::env::var_os("CI").is_none(),
            "{shell} must be installed in CI (.ci/run installs it)"
        );
    }
    found
}

fn assert_offers(shell: &str, line: &str, offered: &[String], expected: &[&str]) {
    for word in expected {
        assert!(
            offered.iter().any(|offer| offer == word),
            "{shell}: `{line}<TAB>` does not offer {word}; it offers {offered:?}"
        );
    }
}

/// Sets `COMP_WORDS`/`COMP_CWORD` as bash does for the line and calls the
/// script's completion function, printing `COMPREPLY`.
#[test]
fn bash_completes_subcommands_and_flags() {
    if !installed("bash") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = script(dir.path(), "bash", "plan-checkpoint.bash");
    let complete = |words: &[&str]| -> Vec<String> {
        let cword = words.len() - 1;
        let current = words[cword];
        let previous = words[cword - 1];
        let quoted: Vec<String> = words.iter().map(|word| format!("'{word}'")).collect();
        let program = format!(
            "source '{}'\n\
             COMP_WORDS=({})\n\
             COMP_CWORD={cword}\n\
             _plan__checkpoint plan-checkpoint '{current}' '{previous}'\n\
             printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
            path.display(),
            quoted.join(" ")
        );
        let output = Command::new("bash")
            .args(["--norc", "--noprofile", "-c", &program])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    };
    let offered = complete(&["plan-checkpoint", "approvals", ""]);
    assert_offers("bash", "plan-checkpoint approvals ", &offered, SUBCOMMANDS);
    let offered = complete(&["plan-checkpoint", "approvals", "list", "--"]);
    assert_offers("bash", "plan-checkpoint approvals list --", &offered, LIST_FLAGS);
    // Three levels down, where the generator's misspelt state was never read.
    let offered = complete(&["plan-checkpoint", "commands", "show", "--"]);
    assert_offers(
        "bash",
        "plan-checkpoint commands show --",
        &offered,
        &["--session", "--json"],
    );
}

/// An interactive zsh on a pseudo-terminal (zsh's own `zpty`), with
/// `compinit` and the script on `fpath`; TAB runs the real completion
/// system, and a `compadd` wrapper prints every candidate it is given.
const ZSH_DRIVER: &str = r#"
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PROMPT='' RPROMPT=''; fpath=(${(q)1} \$fpath); autoload -Uz compinit; compinit -u -D"
zpty -w z 'compadd () { local -a hits; builtin compadd -O hits "$@"; local h; for h in $hits; do print -r -- "<hi""t>$h"; done; builtin compadd "$@" }'
zpty -w z 'capture () { zle complete-word; print -r -- "<<EN""D>>"; zle send-break }; zle -N capture; bindkey "^I" capture'
zpty -w -n z "$2"$'\t'
zpty -r -m z out '*<<END>>*' || exit 3
print -r -- "$out"
zpty -d z
"#;

#[test]
fn zsh_completes_subcommands_and_flags() {
    if !installed("zsh") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // zsh finds completion functions on fpath by the file's name.
    script(dir.path(), "zsh", "_plan-checkpoint");
    let complete = |line: &str| -> Vec<String> {
        // `timeout`: a script that never completes would otherwise leave
        // zpty waiting for the end marker forever.
        let output = Command::new("timeout")
            .args(["120", "zsh", "-f", "-c", ZSH_DRIVER, "zsh"])
            .arg(dir.path())
            .arg(line)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "zsh driver failed: {output:?}\n{}",
            String::from_utf8_lossy(&output.stdout)
        );
        let text = String::from_utf8_lossy(&output.stdout);
        text.split("<hit>")
            .skip(1)
            .filter_map(|rest| rest.split(['\r', '\n']).next())
            .map(str::to_owned)
            .collect()
    };
    let line = "plan-checkpoint approvals ";
    assert_offers("zsh", line, &complete(line), SUBCOMMANDS);
    let line = "plan-checkpoint approvals list --";
    assert_offers("zsh", line, &complete(line), LIST_FLAGS);
}

#[test]
fn fish_completes_subcommands_and_flags() {
    if !installed("fish") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = script(dir.path(), "fish", "plan-checkpoint.fish");
    let complete = |line: &str| -> Vec<String> {
        let program = format!("source '{}'; complete -C '{line}'", path.display());
        let output = Command::new("fish")
            .args(["--no-config", "-c", &program])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        // Each candidate is its word, a tab, and its description.
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|candidate| candidate.split('\t').next())
            .map(str::to_owned)
            .collect()
    };
    let line = "plan-checkpoint approvals ";
    assert_offers("fish", line, &complete(line), SUBCOMMANDS);
    let line = "plan-checkpoint approvals list --";
    assert_offers("fish", line, &complete(line), LIST_FLAGS);
}

/// A missing shell is reported on the test process's real stderr (so a
/// green run shows it), and fails under CI: this binary runs its own zsh
/// and fish tests with a PATH that has neither shell.
#[test]
fn a_missing_shell_is_reported_loudly_and_fails_under_ci() {
    let empty = tempfile::tempdir().unwrap();
    for (shell, test) in [
        ("zsh", "completion::zsh_completes_subcommands_and_flags"),
        ("fish", "completion::fish_completes_subcommands_and_flags"),
    ] {
        let run = |ci: bool| {
            let mut command = Command::new(std::env::current_exe().unwrap());
            command
                .args([test, "--exact", "--test-threads=1"])
                .env("PATH", empty.path())
                .env_remove("CI");
            if ci {
                command.env("CI", "true");
            }
            command.output().unwrap()
        };
        let outside_ci = run(false);
        let stderr = String::from_utf8_lossy(&outside_ci.stderr);
        assert!(outside_ci.status.success(), "{shell}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "!!! {shell} is not installed: its completion script is NOT tested here"
            )),
            "{shell}: the skip was silent: {stderr}"
        );
        let under_ci = run(true);
        assert!(
            !under_ci.status.success(),
            "{shell}: under CI a missing shell fails"
        );
    }
}
