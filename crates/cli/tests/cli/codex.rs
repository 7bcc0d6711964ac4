//! `plan-checkpoint codex` as a person and Codex drive it, without Codex:
//! what `install` writes beside what was there, `doctor`, `uninstall`
//! removing exactly it, a hook outside a set-up project, and the client
//! that runs registered commands, which never starts a host. The real
//! Codex runs the hooks in `integrations/codex/test/e2e.test.ts`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

struct Case {
    dir: tempfile::TempDir,
    project: PathBuf,
    codex_home: PathBuf,
}

impl Case {
    fn new() -> Case {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let project = root.join("project");
        let codex_home = root.join("codex-home");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&codex_home).unwrap();
        Case {
            dir,
            project,
            codex_home,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_plan-checkpoint"));
        command
            .args(args)
            .current_dir(&self.project)
            .env("CODEX_HOME", &self.codex_home)
            .env("TMPDIR", self.dir.path())
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("PLAN_CHECKPOINT_DB");
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn read(&self, path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }
}

#[test]
fn install_keeps_what_was_there_is_idempotent_and_uninstall_removes_exactly_it() {
    let case = Case::new();
    let hooks = case.project.join(".codex").join("hooks.json");
    let project_config = case.project.join(".codex").join("config.toml");
    let user_config = case.codex_home.join("config.toml");
    std::fs::create_dir_all(hooks.parent().unwrap()).unwrap();
    let theirs_hooks = "{\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\n        \"matcher\": \"Bash\",\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"their-linter\"\n          }\n        ]\n      }\n    ]\n  }\n}\n";
    std::fs::write(&hooks, theirs_hooks).unwrap();
    std::fs::write(&project_config, "[profiles.x]\nmodel = \"m\"\n").unwrap();
    std::fs::write(&user_config, "model = \"gpt-5.5\"\n").unwrap();

    let installed = case.run(&["codex", "install"]);
    assert!(
        installed.status.success(),
        "{}",
        String::from_utf8_lossy(&installed.stderr)
    );
    let report = String::from_utf8_lossy(&installed.stdout);
    assert!(report.contains("hooks.json"), "{report}");
    let written: serde_json::Value = serde_json::from_str(&case.read(&hooks)).unwrap();
    let pre = written["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre.len(), 2, "theirs kept, ours added: {written}");
    assert_eq!(pre[0]["hooks"][0]["command"], "their-linter");
    assert!(
        pre[1]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .ends_with(" codex hook")
    );
    assert!(
        case.read(&project_config)
            .starts_with("# BEGIN plan-checkpoint codex project\nsandbox_mode = \"read-only\"\n")
    );
    let user = case.read(&user_config);
    assert!(user.starts_with("model = \"gpt-5.5\"\n"), "{user}");
    assert_eq!(user.matches("trusted_hash = \"sha256:").count(), 3, "{user}");
    assert!(
        user.contains(&format!("[hooks.state.\"{}:pre_tool_use:1:0\"]", hooks.display())),
        "{user}"
    );
    let rules = case.read(&case.codex_home.join("rules").join("plan-checkpoint.rules"));
    assert!(rules.contains(&format!(
        "prefix_rule(pattern=[\"{}\", \"codex\", \"run\"], decision=\"allow\")",
        env!("CARGO_BIN_EXE_plan-checkpoint")
    )));

    // Again: the same files.
    let before = (
        case.read(&hooks),
        case.read(&project_config),
        case.read(&user_config),
    );
    assert!(case.run(&["codex", "install"]).status.success());
    assert_eq!(
        (
            case.read(&hooks),
            case.read(&project_config),
            case.read(&user_config)
        ),
        before
    );

    let doctor = case.run(&["codex", "doctor"]);
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(doctor.status.success(), "{said}");
    assert!(!said.contains("FAIL"), "{said}");

    // A hook changed by hand is no longer trusted, and doctor says so.
    let changed = case.read(&hooks).replace("\"timeout\": 60", "\"timeout\": 61");
    std::fs::write(&hooks, changed).unwrap();
    let doctor = case.run(&["codex", "doctor"]);
    assert_eq!(doctor.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&doctor.stdout).contains("FAIL  the PermissionRequest hook is not trusted")
    );
    assert!(case.run(&["codex", "install"]).status.success());

    let removed = case.run(&["codex", "uninstall"]);
    assert!(removed.status.success());
    let hooks_after: serde_json::Value = serde_json::from_str(&case.read(&hooks)).unwrap();
    let theirs: serde_json::Value = serde_json::from_str(theirs_hooks).unwrap();
    assert_eq!(hooks_after, theirs);
    assert_eq!(case.read(&project_config), "[profiles.x]\nmodel = \"m\"\n");
    assert_eq!(case.read(&user_config), "model = \"gpt-5.5\"\n");
    assert!(
        !case
            .codex_home
            .join("rules")
            .join("plan-checkpoint.rules")
            .exists()
    );
}

#[test]
fn install_refuses_a_project_that_does_not_exist() {
    let case = Case::new();
    let missing = case.dir.path().join("no-such-project");
    let refused = case.run(&["codex", "install", "--project", missing.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(!missing.exists());
}

#[test]
fn a_hook_outside_a_project_set_up_for_it_says_nothing_and_starts_nothing() {
    let case = Case::new();
    let mut hook = case
        .command(&["codex", "hook"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let input = serde_json::json!({
        "session_id": "s", "turn_id": "t", "cwd": case.project, "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_input": {"command": "touch x"}, "tool_use_id": "call_1",
    });
    hook.stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let output = hook.wait_with_output().unwrap();
    assert!(output.status.success());
    assert!(
        output.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(!case.project.join(".pi").exists());
}

#[test]
fn the_run_client_never_starts_a_host_and_fails_with_126() {
    let case = Case::new();
    let project = case.project.to_str().unwrap();
    let output = case.run(&[
        "codex",
        "run",
        "--project",
        project,
        "--session",
        "codex-s",
        "0123456789abcdef0123456789abcdef",
    ]);
    assert_eq!(output.status.code(), Some(126));
    assert!(String::from_utf8_lossy(&output.stderr).contains("the host could not be reached"));
    assert!(!case.project.join(".pi").exists(), "no database was made");
}
