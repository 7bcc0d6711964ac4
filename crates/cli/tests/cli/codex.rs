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

    /// Answers one hook as Codex would ask it; the answer on stdout, as
    /// JSON (`Null` when the hook says nothing).
    fn hook(&self, input: &serde_json::Value) -> serde_json::Value {
        let mut hook = self
            .command(&["codex", "hook"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        hook.stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes())
            .unwrap();
        let output = hook.wait_with_output().unwrap();
        assert!(output.status.success());
        let text = String::from_utf8(output.stdout).unwrap();
        if text.trim().is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_str(&text).unwrap()
        }
    }

    /// The project's host socket, as the hook made it (under this case's
    /// TMPDIR).
    fn socket(&self) -> PathBuf {
        self.host_file("sock").unwrap()
    }

    fn host_file(&self, extension: &str) -> Option<PathBuf> {
        let directory = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|path| {
                path.file_name()
                    .is_some_and(|name| name.to_string_lossy().starts_with("plan-checkpoint-"))
            })?;
        std::fs::read_dir(directory)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|path| path.extension().is_some_and(|found| found == extension))
    }
}

impl Drop for Case {
    /// Ends the host a hook of this case started (by its pid file).
    fn drop(&mut self) {
        if let Some(pid) = self
            .host_file("pid")
            .and_then(|file| std::fs::read_to_string(file).ok())
            .and_then(|text| text.trim().parse::<i32>().ok())
        {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        }
    }
}

/// A hook input of Codex's, in the case's project.
fn hook_input(
    case: &Case,
    event: &str,
    tool: &str,
    input: serde_json::Value,
    call: &str,
) -> serde_json::Value {
    serde_json::json!({
        "session_id": "thread-1", "turn_id": "turn-1", "cwd": case.project, "hook_event_name": event,
        "tool_name": tool, "tool_input": input, "tool_use_id": call, "permission_mode": "default",
    })
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
    // While it holds a call, Codex shows where the person finds it.
    assert!(
        pre[1]["hooks"][0]["statusMessage"]
            .as_str()
            .unwrap()
            .contains("plan-checkpoint codex pending")
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
    let socket = case.dir.path().join("no-host.sock");
    let output = case.run(&[
        "codex",
        "run",
        "--socket",
        socket.to_str().unwrap(),
        "--session",
        "codex-s",
        "0123456789abcdef0123456789abcdef",
    ]);
    assert_eq!(output.status.code(), Some(126));
    assert!(String::from_utf8_lossy(&output.stderr).contains("the host could not be reached"));
    assert!(!case.project.join(".pi").exists(), "no database was made");
}

#[test]
fn in_plan_codexs_own_prompt_gets_the_hosts_answer() {
    let case = Case::new();
    assert!(case.run(&["codex", "install"]).status.success());
    // No transcript: the phase is unknown, so plan. A read the host's Plan
    // table allows is allowed; an edit is denied with the host's code.
    let read = case.hook(&hook_input(
        &case,
        "PermissionRequest",
        "Read",
        serde_json::json!({"path": "README.md"}),
        "call_read",
    ));
    assert_eq!(
        read["hookSpecificOutput"]["decision"]["behavior"], "allow",
        "{read}"
    );
    let patch = case.hook(&hook_input(
        &case,
        "PermissionRequest",
        "apply_patch",
        serde_json::json!({"input": "*** Begin Patch"}),
        "call_patch",
    ));
    let decision = &patch["hookSpecificOutput"]["decision"];
    assert_eq!(decision["behavior"], "deny", "{patch}");
    assert!(
        decision["message"]
            .as_str()
            .unwrap()
            .starts_with("TOOL_DENIED_IN_PLAN: "),
        "{patch}"
    );
    // A shell call Codex would run itself is registered with the host, never
    // run by Codex outside its sandbox; the exact client is allowed.
    let shell = case.hook(&hook_input(
        &case,
        "PermissionRequest",
        "Bash",
        serde_json::json!({"command": "touch made"}),
        "call_shell",
    ));
    assert_eq!(
        shell["hookSpecificOutput"]["decision"]["behavior"], "deny",
        "{shell}"
    );
    let rewritten = case.hook(&hook_input(
        &case,
        "PreToolUse",
        "Bash",
        serde_json::json!({"command": "true"}),
        "call_true",
    ));
    let client = rewritten["hookSpecificOutput"]["updatedInput"]["command"]
        .as_str()
        .unwrap()
        .to_owned();
    let allowed = case.hook(&hook_input(
        &case,
        "PermissionRequest",
        "Bash",
        serde_json::json!({"command": client}),
        "call_true",
    ));
    assert_eq!(
        allowed["hookSpecificOutput"]["decision"]["behavior"], "allow",
        "{allowed}"
    );
    // The client with anything after it is not the client.
    let smuggled = case.hook(&hook_input(
        &case,
        "PermissionRequest",
        "Bash",
        serde_json::json!({"command": format!("{client}; touch made")}),
        "call_smuggled",
    ));
    assert_eq!(
        smuggled["hookSpecificOutput"]["decision"]["behavior"], "deny",
        "{smuggled}"
    );
    assert!(!case.project.join("made").exists());
}

#[test]
fn the_run_client_reaches_the_host_the_hook_named_whatever_its_own_environment() {
    let case = Case::new();
    assert!(case.run(&["codex", "install"]).status.success());
    let rewritten = case.hook(&hook_input(
        &case,
        "PreToolUse",
        "Bash",
        serde_json::json!({"command": "echo from-the-host"}),
        "call_echo",
    ));
    let client = rewritten["hookSpecificOutput"]["updatedInput"]["command"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        client.contains(&format!("--socket {} ", case.socket().display())),
        "{client}"
    );
    // Codex runs it with its own command environment: another temporary
    // directory and a runtime directory of its own, where a socket derived
    // from the environment would be looked for in vain.
    let elsewhere = tempfile::tempdir().unwrap();
    let output = Command::new("/bin/sh")
        .arg("-c")
        .arg(&client)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("TMPDIR", elsewhere.path())
        .env("XDG_RUNTIME_DIR", elsewhere.path())
        .current_dir(&case.project)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "from-the-host\n",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success());
    assert!(
        std::fs::read_dir(elsewhere.path()).unwrap().next().is_none(),
        "nothing looked for or made where the client's environment points"
    );
}

/// The TOML text parsed, failing the test when it is not TOML.
fn toml_of(text: &str) -> toml::Table {
    text.parse::<toml::Table>()
        .unwrap_or_else(|error| panic!("not TOML ({error}):\n{text}"))
}

#[test]
fn a_trust_entry_as_a_dotted_key_an_inline_table_or_a_table_is_recognised_and_kept() {
    for form in ["dotted", "inline", "table"] {
        let case = Case::new();
        let root = case.project.display().to_string();
        let user_config = case.codex_home.join("config.toml");
        let theirs = match form {
            "dotted" => format!(
                "model = \"gpt-5.5\"\nprojects.\"{root}\".trust_level = \"trusted\"\n\n[tui]\nnotifications = true\n"
            ),
            "inline" => format!("[projects]\n\"{root}\" = {{ trust_level = \"trusted\" }}\n"),
            _ => format!("[projects.\"{root}\"]\ntrust_level = \"trusted\"\n"),
        };
        std::fs::write(&user_config, &theirs).unwrap();
        let installed = case.run(&["codex", "install"]);
        assert!(
            installed.status.success(),
            "{form}: {}",
            String::from_utf8_lossy(&installed.stderr)
        );
        let written = case.read(&user_config);
        let parsed = toml_of(&written);
        assert_eq!(
            parsed["projects"][root.as_str()]["trust_level"].as_str(),
            Some("trusted"),
            "{form}"
        );
        assert!(
            written.starts_with(&theirs),
            "{form}: theirs kept as it was:\n{written}"
        );
        let hooks = parsed["hooks"]["state"].as_table().unwrap();
        assert_eq!(hooks.len(), 3, "{form}: {written}");
        let doctor = case.run(&["codex", "doctor"]);
        let said = String::from_utf8_lossy(&doctor.stdout);
        assert!(doctor.status.success(), "{form}: {said}");
        assert!(
            said.contains("ok    the project is trusted by Codex"),
            "{form}: {said}"
        );
        assert!(case.run(&["codex", "uninstall"]).status.success());
        assert_eq!(case.read(&user_config), theirs, "{form}");
    }
}

#[test]
fn an_untrusted_project_in_any_form_is_kept_and_doctor_says_so() {
    let case = Case::new();
    let root = case.project.display().to_string();
    let user_config = case.codex_home.join("config.toml");
    let theirs = format!("projects.\"{root}\".trust_level = \"untrusted\"\n");
    std::fs::write(&user_config, &theirs).unwrap();
    assert!(case.run(&["codex", "install"]).status.success());
    let written = case.read(&user_config);
    assert_eq!(
        toml_of(&written)["projects"][root.as_str()]["trust_level"].as_str(),
        Some("untrusted")
    );
    let doctor = case.run(&["codex", "doctor"]);
    assert_eq!(doctor.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&doctor.stdout).contains("FAIL  the project is trusted by Codex"),
        "{}",
        String::from_utf8_lossy(&doctor.stdout)
    );
}

#[test]
fn install_refuses_a_config_it_cannot_extend_and_changes_nothing() {
    for theirs in [
        // Not TOML at all.
        "model = \n".to_owned(),
        // Projects as an inline table that another table cannot extend.
        "projects = { \"/elsewhere\" = { trust_level = \"trusted\" } }\n".to_owned(),
        // One of these hooks trusted by another hash, outside the block.
        "[hooks.state.\"HOOKS:pre_tool_use:0:0\"]\ntrusted_hash = \"sha256:00\"\n".to_owned(),
    ] {
        let case = Case::new();
        let hooks = case.project.join(".codex").join("hooks.json");
        let theirs = theirs.replace("HOOKS", &hooks.display().to_string());
        let user_config = case.codex_home.join("config.toml");
        std::fs::write(&user_config, &theirs).unwrap();
        let refused = case.run(&["codex", "install"]);
        assert_eq!(refused.status.code(), Some(1), "{theirs}");
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains("config.toml"),
            "{}",
            String::from_utf8_lossy(&refused.stderr)
        );
        assert_eq!(case.read(&user_config), theirs);
        assert!(!case.project.join(".codex").exists(), "nothing else written");
        assert!(!case.codex_home.join("rules").exists());
    }
}

#[test]
fn doctor_reads_the_sandbox_mode_as_toml_not_as_lines() {
    let case = Case::new();
    let project_config = case.project.join(".codex").join("config.toml");
    std::fs::create_dir_all(project_config.parent().unwrap()).unwrap();
    // A profile's sandbox_mode is not the project's default.
    std::fs::write(
        &project_config,
        "[profiles.loose]\nsandbox_mode = \"danger-full-access\"\n",
    )
    .unwrap();
    assert!(case.run(&["codex", "install"]).status.success());
    let written = case.read(&project_config);
    assert_eq!(
        toml_of(&written)["sandbox_mode"].as_str(),
        Some("read-only"),
        "{written}"
    );
}

#[test]
fn a_call_held_for_a_person_is_listed_with_the_command_that_confirms_it() {
    let case = Case::new();
    assert!(case.run(&["codex", "install"]).status.success());
    // A turn in Codex's default mode (the Agent phase) of a session whose
    // permission mode asks before every command.
    let transcript = case.dir.path().join("rollout.jsonl");
    std::fs::write(
        &transcript,
        "{\"type\":\"turn_context\",\"payload\":{\"turn_id\":\"turn-1\",\"collaboration_mode\":{\"mode\":\"default\"}}}\n",
    )
    .unwrap();
    let mut input = hook_input(
        &case,
        "PreToolUse",
        "Bash",
        serde_json::json!({"command": "echo \u{1b}[31mconfirmed"}),
        "call_held",
    );
    input["transcript_path"] = serde_json::json!(transcript);
    let mut hook = case
        .command(&["codex", "hook"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    hook.stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    // The person asks what waits for them (as the hook's status line
    // says), until the hook's call is there.
    let listed = (0..2_000)
        .map(|_| case.run(&["codex", "pending"]))
        .map(|output| String::from_utf8_lossy(&output.stdout).into_owned())
        .find(|text| text.contains("call_held"))
        .expect("the held call was never listed");
    assert!(listed.contains("codex-thread-1"), "{listed}");
    assert!(listed.contains("echo \\x1b[31mconfirmed"), "escaped: {listed}");
    let confirm = listed
        .lines()
        .map(str::trim)
        .find(|line| line.starts_with("plan-checkpoint codex confirm "))
        .expect("no confirm command")
        .to_owned();
    assert_eq!(
        confirm,
        "plan-checkpoint codex confirm --session codex-thread-1 call_held"
    );
    let words: Vec<&str> = confirm.split(' ').skip(1).collect();
    let confirmed = case.run(&words);
    assert!(
        confirmed.status.success(),
        "{}",
        String::from_utf8_lossy(&confirmed.stderr)
    );
    let output = hook.wait_with_output().unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        answer["hookSpecificOutput"]["permissionDecision"], "allow",
        "{answer}"
    );
    assert!(
        !String::from_utf8_lossy(&case.run(&["codex", "pending"]).stdout).contains("call_held"),
        "answered: no longer listed"
    );
}

#[test]
fn codexs_own_prompt_for_a_confirmed_edit_gets_the_hosts_answer_for_that_call() {
    let case = Case::new();
    assert!(case.run(&["codex", "install"]).status.success());
    // The Agent phase of a session that asks before every edit; Codex's
    // transcript records the patch as the model wrote it (a trailing
    // newline), and gives `PermissionRequest` no call id and the text
    // without that newline.
    let patch = "*** Begin Patch\n*** Add File: made.txt\n+made\n*** End Patch\n";
    let transcript = case.dir.path().join("rollout.jsonl");
    let recorded = |call: &str, text: &str| {
        serde_json::json!({"type": "response_item", "payload": {
            "type": "custom_tool_call", "call_id": call, "name": "apply_patch", "input": text,
            "internal_chat_message_metadata_passthrough": {"turn_id": "turn-1"},
        }})
        .to_string()
    };
    std::fs::write(
        &transcript,
        format!(
            "{{\"type\":\"turn_context\",\"payload\":{{\"turn_id\":\"turn-1\",\"collaboration_mode\":{{\"mode\":\"default\"}}}}}}\n{}\n",
            recorded("call_patch", patch)
        ),
    )
    .unwrap();
    let mut held = hook_input(
        &case,
        "PreToolUse",
        "apply_patch",
        serde_json::json!({"command": patch}),
        "call_patch",
    );
    held["transcript_path"] = serde_json::json!(transcript);
    let mut asked = hook_input(
        &case,
        "PermissionRequest",
        "apply_patch",
        serde_json::json!({"command": patch.trim_end()}),
        "",
    );
    asked["transcript_path"] = serde_json::json!(transcript);
    if let Some(fields) = asked.as_object_mut() {
        fields.remove("tool_use_id");
    }

    // Before anyone confirmed it, Codex's prompt is not answered for the
    // host (it stays Codex's to ask), and nothing new waits for the person.
    let mut hook = case
        .command(&["codex", "hook"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    hook.stdin
        .take()
        .unwrap()
        .write_all(held.to_string().as_bytes())
        .unwrap();
    let listed = (0..2_000)
        .map(|_| case.run(&["codex", "pending"]))
        .map(|output| String::from_utf8_lossy(&output.stdout).into_owned())
        .find(|text| text.contains("call_patch"))
        .expect("the held edit was never listed");
    assert_eq!(case.hook(&asked), serde_json::Value::Null);
    let again = String::from_utf8_lossy(&case.run(&["codex", "pending"]).stdout).into_owned();
    assert_eq!(again, listed, "the prompt made no call of its own");

    // Confirmed: the hook allows it, and Codex's prompt for the same call
    // gets the host's answer for it.
    assert!(
        case.run(&["codex", "confirm", "--session", "codex-thread-1", "call_patch"])
            .status
            .success()
    );
    let output = hook.wait_with_output().unwrap();
    assert!(output.status.success());
    let answer = case.hook(&asked);
    assert_eq!(
        answer["hookSpecificOutput"]["decision"]["behavior"], "allow",
        "{answer}"
    );

    // A patch the transcript does not hold is not that call: Codex asks.
    let mut other = asked.clone();
    other["tool_input"] =
        serde_json::json!({"command": "*** Begin Patch\n*** Add File: other.txt\n+other\n*** End Patch"});
    assert_eq!(case.hook(&other), serde_json::Value::Null);
    assert!(
        !String::from_utf8_lossy(&case.run(&["codex", "pending"]).stdout).contains("call_patch"),
        "nothing waits any more"
    );
}
