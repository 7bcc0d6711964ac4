//! The README's examples and cross-references, checked as a new user would
//! use them: the Rust example pasted into a new crate outside the workspace
//! and run, and every file, function and test `docs/contract.md` names
//! found where it says.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root (two levels above this crate's manifest).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

/// The fenced block of `lang` that follows `heading` in `text`.
fn block<'a>(text: &'a str, heading: &str, lang: &str) -> &'a str {
    let section = &text[text.find(heading).unwrap()..];
    let fence = format!("```{lang}\n");
    let code = &section[section.find(&fence).unwrap() + fence.len()..];
    &code[..code.find("```").unwrap()]
}

/// The README's `Cargo.toml` lines and `examples/embed.rs`, in a new crate
/// in a temporary directory, run with `cargo run --example embed`. Only
/// the path of the `plan-host` dependency changes (to this checkout). The
/// workspace's `Cargo.lock` and target directory are reused (with the
/// same environment, RUSTFLAGS included) so that no dependency is resolved
/// anew and few are rebuilt, and `--offline` keeps it off the network.
#[test]
fn the_rust_example_runs_as_pasted_in_a_new_crate() {
    let root = workspace();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let manifest = block(&readme, "### Embedding in Rust", "toml");
    let example = block(&readme, "### Embedding in Rust", "rust");
    assert!(example.contains("fn main()"), "the example shows its fn main");
    let printed_path = "\"../plan-checkpoint/crates/host\"";
    assert!(manifest.contains(printed_path), "{manifest}");
    assert!(manifest.contains("[dev-dependencies]\ntempfile"), "{manifest}");
    let host_path = root.join("crates/host");
    let manifest = manifest.replace(printed_path, &format!("{:?}", host_path.display().to_string()));

    let dir = tempfile::tempdir().unwrap();
    let krate = dir.path().join("my-host");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::create_dir_all(krate.join("examples")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        format!(
            "[package]\nname = \"my-host\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n{manifest}\n\
             [workspace]\n"
        ),
    )
    .unwrap();
    std::fs::write(krate.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(krate.join("examples/embed.rs"), example).unwrap();
    std::fs::copy(root.join("Cargo.lock"), krate.join("Cargo.lock")).unwrap();

    let target = Path::new(crate::support::BIN)
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["run", "--offline", "--quiet", "--example", "embed"])
        .current_dir(&krate)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the README's Rust example failed in a new crate:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("event: "), "{stdout}");
}

/// The README's first commands are the two that work on a fresh machine,
/// and its prerequisites name the Rust version the workspace declares.
#[test]
fn the_readme_starts_with_the_two_commands_and_states_the_rust_version() {
    let root = workspace();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let first = block(&readme, "# plan-checkpoint", "sh");
    assert_eq!(
        first,
        "cargo run -p plan-checkpoint -- demo\ncargo test --workspace\n"
    );
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let version = manifest
        .lines()
        .find_map(|line| line.strip_prefix("rust-version = "))
        .unwrap()
        .trim_matches('"');
    assert!(
        readme.contains(&format!("**Rust {version} or newer**")),
        "the README's prerequisites do not name rust-version {version}"
    );
    assert!(readme.contains(&format!("requires\n  rustc {version} or newer")));
}

/// One reference of `docs/contract.md`: a path, and the name it must
/// define (a function, constant or type) or the title of a TypeScript test.
#[derive(Debug)]
struct Reference {
    path: String,
    name: Option<String>,
}

/// Every backticked `path` or `path::name` in `text` whose path is in one
/// of this repository's top folders (not a protocol method such as
/// `plan/reject`, nor a pattern such as `crates/<crate>/tests/`).
fn references(text: &str) -> Vec<Reference> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| {
            let path = span.split("::").next().unwrap_or_default();
            ["crates/", "integrations/", "clients/", "migrations/", "docs/"]
                .iter()
                .any(|top| path.starts_with(top))
                && !path.contains([' ', '<'])
        })
        .map(|span| match span.split_once("::") {
            Some((path, name)) => Reference {
                path: path.to_owned(),
                name: Some(name.to_owned()),
            },
            None => Reference {
                path: span.to_owned(),
                name: None,
            },
        })
        .collect()
}

/// Whether `source` defines `name`: a Rust item or a TypeScript export, or
/// (a quoted name) a TypeScript test of that title.
fn defines(source: &str, name: &str) -> bool {
    if let Some(title) = name.strip_prefix('"').and_then(|rest| rest.strip_suffix('"')) {
        return source.contains(&format!("test(\"{title}\""));
    }
    ["fn ", "const ", "struct ", "enum ", "function ", "pub struct "]
        .iter()
        .any(|keyword| {
            source
                .match_indices(&format!("{keyword}{name}"))
                .any(|(at, found)| {
                    source[at + found.len()..]
                        .chars()
                        .next()
                        .is_some_and(|next| !(next.is_alphanumeric() || next == '_'))
                })
        })
}

/// `docs/contract.md` names, for each clause of ADR 0053, the files and
/// functions that enforce it and the tests that prove it: each one must
/// exist, so that the page cannot go stale.
#[test]
fn every_reference_in_the_contract_exists() {
    let root = workspace();
    let contract = std::fs::read_to_string(root.join("docs/contract.md")).unwrap();
    let references = references(&contract);
    assert!(
        references.len() > 80,
        "found only {} references",
        references.len()
    );
    let mut stale = Vec::new();
    for reference in &references {
        let path = root.join(&reference.path);
        match (&reference.name, std::fs::read_to_string(&path)) {
            (None, _) if path.exists() => {}
            (Some(name), Ok(source)) if defines(&source, name) => {}
            (name, _) => stale.push(format!("{}::{}", reference.path, name.as_deref().unwrap_or(""))),
        }
    }
    assert!(
        stale.is_empty(),
        "docs/contract.md names what does not exist: {stale:#?}"
    );
    // The checker itself tells a present name from a missing one.
    assert!(defines("fn approve(", "approve") && !defines("fn approved(", "approve"));
    assert!(defines("test(\"a b\", async", "\"a b\"") && !defines("test(\"a\"", "\"a b\""));
}

/// The commands of the README's install table ("how" column): code spans
/// that are commands (they hold a space or run a script), less those CI
/// cannot run (a Mac's Swift build, `pi install`) and a variant named in
/// passing (`generate.sh --release`).
fn install_table_commands(readme: &str) -> std::collections::BTreeSet<String> {
    const NOT_RUN: &[&str] = &[
        "crates/ffi/bindings/swift/build-xcframework.sh",
        "generate.sh --release",
    ];
    let table = &readme[readme.find("| who | installs | how |").unwrap()..];
    let table = &table[..table.find("\n\n").unwrap()];
    let mut commands = std::collections::BTreeSet::new();
    for row in table.lines().skip(2) {
        let how = row.trim_matches('|').splitn(3, " | ").nth(2).unwrap_or_default();
        for span in how.split('`').skip(1).step_by(2) {
            if (span.contains(' ') || span.ends_with(".sh")) && !NOT_RUN.contains(&span) {
                commands.insert(span.to_owned());
            }
        }
    }
    commands
}

/// Each "how" of the README's install table is what `.ci/readme-install`
/// runs from a clean checkout in CI, line for line, and it runs nothing of
/// the README's that the table does not say.
#[test]
fn the_install_table_is_what_ci_runs() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let script = std::fs::read_to_string(workspace().join(".ci/readme-install")).unwrap();
    let table = install_table_commands(&readme);
    assert!(table.len() >= 9, "the table's commands: {table:?}");
    let run: std::collections::BTreeSet<String> = script
        .lines()
        .filter_map(|line| line.strip_suffix("# from README.md"))
        // The checkout's place is the one thing the README cannot know.
        .map(|line| {
            line.trim()
                .replace("\"$checkout", "/path/to/plan-checkpoint")
                .replace("typescript\"", "typescript")
        })
        .collect();
    assert_eq!(
        table, run,
        "the README's install table and .ci/readme-install differ"
    );
    let ci = std::fs::read_to_string(workspace().join(".ci/run")).unwrap();
    assert!(
        ci.contains(".ci/readme-install"),
        ".ci/run runs the install table"
    );
}

/// The README's install table leads with the one-line installs (no
/// compiler), before any row that builds from a clone or compiles.
#[test]
fn the_install_table_leads_with_the_one_line_installs() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let table = &readme[readme.find("| who | installs | how |").unwrap()..];
    let table = &table[..table.find("\n\n").unwrap()];
    let rows: Vec<&str> = table.lines().skip(2).collect();
    for (row, expected) in rows.iter().zip([
        "`npx plan-checkpoint claude-code install`",
        "`npm install -g plan-checkpoint`, then, in your project's directory, `plan-checkpoint codex install`",
        "`npm install -g plan-checkpoint`, or `pipx install plan-checkpoint`, or `uv tool install plan-checkpoint`",
        "`npm install @plan-checkpoint/client`",
        "`pi install npm:@plan-checkpoint/pi`",
        "`pip install \"plan-ffi[sandbox]\"`",
        "`cargo install plan-checkpoint`",
    ]) {
        assert!(row.contains(expected), "{row} does not offer {expected}");
    }
}

/// What the README says to commit under `.pi/plan/` and what to ignore,
/// applied by git itself: the database and its side files are ignored,
/// the plan files are not.
#[test]
fn the_readmes_gitignore_lines_ignore_the_database_and_keep_the_plans() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let lines = block(&readme, "**What to commit.**", "gitignore");
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    assert!(git(&["init", "--quiet"]).status.success());
    std::fs::write(dir.path().join(".gitignore"), lines).unwrap();
    for ignored in [
        ".pi/plan/plan.db",
        ".pi/plan/plan.db-wal",
        ".pi/plan/plan.db-shm",
        ".pi/plan/plan.db-journal",
    ] {
        assert!(
            git(&["check-ignore", "-q", ignored]).status.success(),
            "{ignored} is not ignored"
        );
    }
    for kept in [
        ".pi/plan/20261129T234544Z-split-the-parser-8f7dfc6d22f6.md",
        ".pi/plan/.gitignore",
    ] {
        assert!(
            !git(&["check-ignore", "-q", kept]).status.success(),
            "{kept} is ignored"
        );
    }
}

/// One version for every artifact: `release/version` finds the workspace's
/// version in every crate requirement, npm package, Maven pom, the plan-ffi
/// wheel's pin on the binary's wheel and the CHANGELOG's newest entry.
#[test]
fn every_artifact_has_the_workspace_version() {
    let output = Command::new("python3")
        .arg(workspace().join("release/version"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "release/version: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        env!("CARGO_PKG_VERSION")
    );
}
