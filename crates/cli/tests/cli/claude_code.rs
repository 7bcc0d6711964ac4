//! `plan-checkpoint claude-code`, driven as Claude Code drives it: hook
//! inputs on stdin (the shapes the pinned Claude Code sends, see
//! `integrations/claude-code/test/fixtures/hook-inputs.json`), the answers
//! on stdout, the rewritten Bash run as Claude Code runs it (`bash -c`),
//! and the project's host started on demand. Each case has its own
//! temporary directory (and so its own private socket directory) and ends
//! the host it started, by its pid file.
//!
//! The real Claude Code runs the same paths in
//! `integrations/claude-code/test/e2e.test.ts`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::{Value, json};

struct Case {
    dir: tempfile::TempDir,
    project: PathBuf,
    ttl_ms: Option<u64>,
}

impl Case {
    fn new() -> Case {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().canonicalize().unwrap().join("project");
        std::fs::create_dir(&project).unwrap();
        Case {
            dir,
            project,
            ttl_ms: None,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_plan-checkpoint"));
        command
            .args(args)
            .current_dir(&self.project)
            // The per-user directory of hosts (and this case's socket) lies
            // in this case's own directory.
            .env("TMPDIR", self.dir.path())
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("PLAN_CHECKPOINT_DB");
        if let Some(ttl) = self.ttl_ms {
            command.env("PLAN_CHECKPOINT_APPROVAL_TTL_MS", ttl.to_string());
        }
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Starts the hook with `input`; the answer comes with its exit.
    fn spawn_hook(&self, input: &Value) -> Child {
        self.spawn_hook_with(input, &[])
    }

    /// [`Case::spawn_hook`] with more environment (later entries win) in
    /// the environment of the agent the hook reads the person's settings
    /// from: a stand-in for Claude Code (`timeout`, not a shell), started
    /// with `env`, which runs the hook as Claude Code does.
    fn spawn_hook_with(&self, input: &Value, env: &[(&str, &std::ffi::OsStr)]) -> Child {
        self.spawn_hook_as_agent(input, env, &[])
    }

    /// The hook under a stand-in agent started with `agent_env`, with
    /// `hook_env` added to the hook's own environment only (as Claude Code
    /// adds the `env` of the project's settings).
    fn spawn_hook_as_agent(
        &self,
        input: &Value,
        agent_env: &[(&str, &std::ffi::OsStr)],
        hook_env: &[(&str, &std::ffi::OsStr)],
    ) -> Child {
        let hook = self.command(&["claude-code", "hook"]);
        let mut command = Command::new("timeout");
        command.args(["--foreground", "600", "env"]);
        for (name, value) in hook_env {
            let mut assignment = std::ffi::OsString::from(format!("{name}="));
            assignment.push(value);
            command.arg(assignment);
        }
        command
            .arg(hook.get_program())
            .args(hook.get_args())
            .envs(hook.get_envs().filter_map(|(name, value)| Some((name, value?))))
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("PLAN_CHECKPOINT_DB")
            .current_dir(&self.project);
        for (name, value) in agent_env {
            command.env(name, value);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes())
            .unwrap();
        child
    }

    /// The hook's answer (`Null` for none).
    fn hook(&self, input: &Value) -> Value {
        answer_of(&self.spawn_hook(input).wait_with_output().unwrap())
    }

    fn input(&self, event: &str, mode: &str, tool: &str, tool_input: Value, call: &str) -> Value {
        json!({
            "session_id": "cc-session",
            "transcript_path": self.dir.path().join("transcript.jsonl"),
            "cwd": self.project,
            "permission_mode": mode,
            "hook_event_name": event,
            "tool_name": tool,
            "tool_input": tool_input,
            "tool_use_id": call,
        })
    }

    /// Runs a rewritten Bash command as Claude Code does.
    fn run_rewritten(&self, answer: &Value) -> Output {
        self.run_rewritten_with(answer, &[])
    }

    /// [`Case::run_rewritten`] with more environment (later entries win).
    fn run_rewritten_with(&self, answer: &Value, env: &[(&str, &std::ffi::OsStr)]) -> Output {
        let command = answer
            .pointer("/hookSpecificOutput/updatedInput/command")
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no rewritten command: {answer}"));
        let mut bash = Command::new("bash");
        bash.args(["-c", command])
            .current_dir(&self.project)
            .env("TMPDIR", self.dir.path())
            .env_remove("XDG_RUNTIME_DIR");
        for (name, value) in env {
            bash.env(name, value);
        }
        bash.output().unwrap()
    }

    /// Starts `input`'s hook with the host it starts telling a FIFO of the
    /// case when a plan is pending (its notifier), and waits for that event;
    /// returns the hook and the plan as `pending --json` shows it. A hook
    /// that ends first fails the test.
    fn spawn_hook_until_pending(&self, input: &Value) -> (Child, Value) {
        self.spawn_hook_until_pending_with(input, &[])
    }

    /// [`Case::spawn_hook_until_pending`] with `hook_env` added to the
    /// hook's own environment only.
    fn spawn_hook_until_pending_with(
        &self,
        input: &Value,
        hook_env: &[(&str, &std::ffi::OsStr)],
    ) -> (Child, Value) {
        let fifo = self.dir.path().join("notices");
        assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let (sender, notices) = std::sync::mpsc::channel();
        let reader = fifo.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            let read = std::fs::File::open(&reader)
                .and_then(|file| std::io::BufRead::read_line(&mut std::io::BufReader::new(file), &mut line));
            let _ = sender.send(read.map(|_| line));
        });
        let notify = format!("cat > '{}'", fifo.display());
        let mut hook =
            self.spawn_hook_as_agent(input, &[("PLAN_CHECKPOINT_NOTIFY", notify.as_ref())], hook_env);
        // A guard that only turns a missing notice into a failure.
        let guard = std::time::Instant::now();
        let notice = loop {
            match notices.recv_timeout(std::time::Duration::from_millis(200)) {
                Ok(read) => break read.unwrap(),
                Err(_) => {
                    if let Some(status) = hook.try_wait().unwrap() {
                        panic!("the hook ended ({status}) before its plan was pending");
                    }
                    assert!(
                        guard.elapsed().as_secs() < 60,
                        "no notice came for the pending plan"
                    );
                }
            }
        };
        let notice: Value = serde_json::from_str(&notice).unwrap();
        let output = self.run(&["claude-code", "pending", "--json"]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let pending: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(pending.len(), 1, "{pending:?}");
        assert_eq!(pending[0]["approvalId"], notice["approvalId"]);
        (hook, pending[0].clone())
    }

    /// The host's socket, in this case's per-user directory of hosts.
    fn socket(&self) -> PathBuf {
        let hosts = self
            .dir
            .path()
            .join(format!("plan-checkpoint-{}", unsafe_free_euid()));
        std::fs::read_dir(hosts)
            .unwrap()
            .flatten()
            .map(|entry| entry.path())
            .find(|path| path.extension().is_some_and(|extension| extension == "sock"))
            .unwrap()
    }

    /// The approval as recorded (`approvals show --json`).
    fn approval(&self, id: &str) -> Value {
        let shown = self.run(&[
            "approvals",
            "show",
            id,
            "--json",
            "--db",
            self.project.join(".pi/plan/plan.db").to_str().unwrap(),
        ]);
        serde_json::from_slice(&shown.stdout).unwrap()
    }

    fn host_pid(&self) -> Option<i32> {
        let hosts = self
            .dir
            .path()
            .join(format!("plan-checkpoint-{}", unsafe_free_euid()));
        std::fs::read_dir(hosts)
            .ok()?
            .flatten()
            .find(|entry| {
                entry
                    .path()
                    .extension()
                    .is_some_and(|extension| extension == "pid")
            })
            .and_then(|entry| std::fs::read_to_string(entry.path()).ok())
            .and_then(|text| text.trim().parse().ok())
    }

    fn kill_host(&self) {
        if let Some(pid) = self.host_pid() {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            while Path::new(&format!("/proc/{pid}")).exists()
                && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|stat| stat.contains(") Z "))
            {
                std::thread::yield_now();
            }
        }
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        self.kill_host();
    }
}

fn unsafe_free_euid() -> u32 {
    // The uid the per-user directory is named after (`id -u`).
    let output = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&output.stdout).trim().parse().unwrap()
}

fn answer_of(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "the hook failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(text.trim()).unwrap()
    }
}

fn decision(answer: &Value) -> &str {
    answer
        .pointer("/hookSpecificOutput/permissionDecision")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn reason(answer: &Value) -> &str {
    answer
        .pointer("/hookSpecificOutput/permissionDecisionReason")
        .and_then(Value::as_str)
        .unwrap_or("")
}

#[test]
fn install_writes_the_hooks_and_the_setting_merged_and_once() {
    let case = Case::new();
    let settings = case.project.join(".claude/settings.local.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(
        &settings,
        r#"{"model": "kept", "hooks": {"Stop": [{"hooks": []}]}}"#,
    )
    .unwrap();
    for _ in 0..2 {
        let output = case.run(&["claude-code", "install"]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let said = String::from_utf8_lossy(&output.stdout);
        assert!(
            said.contains("useAutoModeDuringPlan") && said.contains("PermissionRequest"),
            "{said}"
        );
    }
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(written["model"], "kept");
    assert!(written["hooks"]["Stop"].is_array());
    assert_eq!(written["useAutoModeDuringPlan"], false);
    assert_eq!(written["disableSkillShellExecution"], true);
    let program = env!("CARGO_BIN_EXE_plan-checkpoint");
    let project = case.project.display().to_string();
    for event in [
        "PreToolUse",
        "PermissionRequest",
        "PostToolUse",
        "PreSkillShellCommand",
        "SessionEnd",
    ] {
        let entries = written["hooks"][event].as_array().unwrap();
        assert_eq!(entries.len(), 1, "{event}: {entries:?}");
        let hook = &entries[0]["hooks"][0];
        // This binary, spawned with its arguments (no shell), for this project.
        assert_eq!(hook["command"], program);
        let args = hook["args"].as_array().unwrap();
        assert_eq!(
            args[..4],
            [
                json!("claude-code"),
                json!("hook"),
                json!("--project"),
                json!(project)
            ]
        );
        // What a call waits on is fail-closed; what only records is not.
        let gates = event != "SessionEnd";
        assert_eq!(
            hook.get("onFailure") == Some(&json!("block")),
            gates,
            "{event}: {hook}"
        );
    }
    assert_eq!(
        written["hooks"]["PostToolUse"][0]["matcher"],
        "Write|Edit|MultiEdit|NotebookEdit|WebFetch|WebSearch|Task|Agent|ExitPlanMode"
    );
    // Past the plan's deadline (30 minutes by default), and the hook knows it.
    let pre = &written["hooks"]["PreToolUse"][0]["hooks"][0];
    assert_eq!(pre["timeout"], 1800 + 300);
    assert_eq!(
        pre["args"].as_array().unwrap()[4..],
        [json!("--timeout"), json!("2100")]
    );
    assert_eq!(
        written["permissions"]["allow"],
        json!([format!(
            "Bash('{program}' claude-code bash --project '{project}':*)"
        )])
    );
    assert_eq!(written["statusLine"]["refreshInterval"], 1);
}

#[test]
fn install_refuses_a_project_that_does_not_exist_and_creates_nothing() {
    let case = Case::new();
    let typo = case.dir.path().join("typo");
    let output = case.run(&["claude-code", "install", "--project", typo.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("does not exist"));
    assert!(!typo.exists());
}

#[test]
fn plan_mode_bash_runs_in_the_read_only_sandbox_and_is_audited() {
    let case = Case::new();
    std::fs::write(case.project.join("canary.txt"), "kept\n").unwrap();
    let command = "cat canary.txt; echo changed > canary.txt; touch planted; rm canary.txt; echo done";
    let answer = case.hook(&case.input(
        "PreToolUse",
        "plan",
        "Bash",
        json!({"command": command, "description": "d"}),
        "toolu_1",
    ));
    assert_eq!(decision(&answer), "allow", "{answer}");
    let rewritten = &answer["hookSpecificOutput"]["updatedInput"];
    assert_eq!(rewritten["description"], "d", "other fields are kept");
    // Claude Code asks its permission for the rewritten command: allowed.
    let permission = case.hook(&case.input("PermissionRequest", "plan", "Bash", rewritten.clone(), ""));
    assert_eq!(
        permission["hookSpecificOutput"]["decision"]["behavior"], "allow",
        "{permission}"
    );
    // Any other command is left to Claude Code.
    let other = case.hook(&case.input(
        "PermissionRequest",
        "plan",
        "Bash",
        json!({"command": "rm -rf x"}),
        "",
    ));
    assert_eq!(other, Value::Null);
    let output = case.run_rewritten(&answer);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stdout, "kept\ndone\n", "{stderr}");
    assert!(
        stderr.contains("Read-only file system") || stderr.contains("Permission denied"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(case.project.join("canary.txt")).unwrap(),
        "kept\n"
    );
    assert!(!case.project.join("planted").exists());
    let audit = case.run(&[
        "commands",
        "list",
        "--json",
        "--db",
        case.project.join(".pi/plan/plan.db").to_str().unwrap(),
    ]);
    let audit = String::from_utf8_lossy(&audit.stdout);
    assert!(
        audit.contains("toolu_1") && audit.contains("read-only"),
        "{audit}"
    );
}

#[test]
fn plan_mode_writes_are_denied_with_the_hosts_code_and_the_plan_file_is_claude_codes() {
    let case = Case::new();
    let write = json!({"file_path": case.project.join("x.txt"), "content": "x"});
    let answer = case.hook(&case.input("PreToolUse", "plan", "Write", write, "toolu_w"));
    assert_eq!(decision(&answer), "deny");
    assert!(reason(&answer).starts_with("TOOL_DENIED_IN_PLAN: "), "{answer}");
    let read = json!({"file_path": case.project.join("x.txt")});
    assert_eq!(
        case.hook(&case.input("PreToolUse", "plan", "Read", read, "toolu_r")),
        Value::Null
    );
    // Claude Code's own plan file, under its configuration directory.
    let configuration = case.dir.path().join("claude-config");
    let plan_file = json!({"file_path": configuration.join("plans/my-plan.md"), "content": "# Plan"});
    let mut input = case.input("PreToolUse", "plan", "Write", plan_file, "toolu_p");
    input["cwd"] = json!(case.project);
    let output = case
        .spawn_hook_with(&input, &[("CLAUDE_CONFIG_DIR", configuration.as_os_str())])
        .wait_with_output()
        .unwrap();
    assert_eq!(answer_of(&output), Value::Null);
}

const PLAN: &str = "# Split the \u{1b}[31mparser\u{202e}\n\n1. Write out.txt\r\n";

/// Claude Code's plan file of the case, holding the plan.
fn plan_file(case: &Case) -> PathBuf {
    let file = case.dir.path().join("config/plans/p.md");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, PLAN).unwrap();
    file
}

fn exit_plan(case: &Case) -> (Child, Value) {
    let input = case.input(
        "PreToolUse",
        "plan",
        "ExitPlanMode",
        json!({"plan": PLAN, "planFilePath": plan_file(case), "allowedPrompts": [{"tool": "Bash", "prompt": "rm -rf /"}]}),
        "toolu_exit",
    );
    case.spawn_hook_until_pending(&input)
}

#[test]
fn an_exit_refused_after_the_approval_is_not_carried_out_and_says_so() {
    for tamper in ["echo", "plan file"] {
        let case = Case::new();
        let (hook, pending) = exit_plan(&case);
        let id = pending["approvalId"].as_str().unwrap();
        assert!(
            case.run(&["claude-code", "approve", id, "--mode", "auto"])
                .status
                .success()
        );
        let answer = answer_of(&hook.wait_with_output().unwrap());
        let mut updated = answer["hookSpecificOutput"]["updatedInput"].clone();
        let expected = match tamper {
            // An echo that is not the approved bytes.
            "echo" => {
                updated["plan"] = json!("# Another plan\n");
                "ARTIFACT_INTEGRITY_MISMATCH: the plan artifact"
            }
            // Claude Code's plan file (what it proceeds with) changed since.
            _ => {
                std::fs::write(plan_file(&case), "# Rewritten while pending\n").unwrap();
                "ARTIFACT_INTEGRITY_MISMATCH: Claude Code's plan file"
            }
        };
        let refused = case.hook(&case.input("PermissionRequest", "plan", "ExitPlanMode", updated, ""));
        let refusal = &refused["hookSpecificOutput"]["decision"];
        assert_eq!(refusal["behavior"], "deny", "{refused}");
        assert!(
            refusal["message"].as_str().unwrap().starts_with(expected),
            "{tamper}: {refused}"
        );
        // The approval stands; its execution never happens, and the record says so.
        let shown = case.approval(id);
        assert_eq!(
            (&shown["status"], &shown["executionState"], &shown["errorCode"]),
            (
                &json!("approved"),
                &json!("interrupted"),
                &json!("EXECUTION_CANCELLED")
            ),
            "{tamper}: {shown}"
        );
    }
}

#[test]
fn an_approved_plan_is_the_exact_bytes_checked_and_sets_the_chosen_mode() {
    let case = Case::new();
    let (hook, pending) = exit_plan(&case);
    // The artifact on disk is the plan's exact bytes, with the recorded hash.
    let path = case.project.join(pending["artifact"]["path"].as_str().unwrap());
    assert_eq!(std::fs::read(&path).unwrap(), PLAN.as_bytes());
    assert_eq!(pending["artifact"]["size"], PLAN.len());
    // A hostile title reaches no terminal raw: escaped in the list.
    let listed = case.run(&["claude-code", "pending"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        !listed.contains('\u{1b}') && !listed.contains('\u{202e}'),
        "{listed:?}"
    );
    // And in the JSON list: nothing raw reaches a terminal.
    let json_listed = case.run(&["claude-code", "pending", "--json"]);
    let raw = String::from_utf8(json_listed.stdout.clone()).unwrap();
    assert!(!raw.contains('\u{1b}') && !raw.contains('\u{202e}'), "{raw:?}");
    let parsed: Vec<Value> = serde_json::from_str(&raw).unwrap();
    assert_eq!(parsed[0]["title"], pending["title"]);
    let id = pending["approvalId"].as_str().unwrap();
    let approved = case.run(&["claude-code", "approve", id, "--mode", "accept-edits"]);
    assert!(
        approved.status.success(),
        "{}",
        String::from_utf8_lossy(&approved.stderr)
    );
    let answer = answer_of(&hook.wait_with_output().unwrap());
    // No decision: an allow would skip the PermissionRequest hook (and the
    // mode it sets); the approved input goes on to it.
    assert_eq!(decision(&answer), "", "{answer}");
    let updated = answer["hookSpecificOutput"]["updatedInput"].clone();
    assert_eq!(updated["plan"], PLAN);
    let permission = case.hook(&case.input("PermissionRequest", "plan", "ExitPlanMode", updated, ""));
    let granted = &permission["hookSpecificOutput"]["decision"];
    assert_eq!(granted["behavior"], "allow", "{permission}");
    assert_eq!(granted["updatedInput"]["plan"], PLAN);
    assert_eq!(
        granted["updatedPermissions"],
        json!([{"type": "setMode", "mode": "acceptEdits", "destination": "session"}])
    );
    // Only the plan and its file are echoed: nothing else the model put in
    // the exit's input (the person saw only the plan).
    assert_eq!(
        granted["updatedInput"],
        json!({"plan": PLAN, "planFilePath": plan_file(&case)})
    );
    // The exit ran: the approved plan's execution starts.
    assert_eq!(
        case.hook(&case.input(
            "PostToolUse",
            "acceptEdits",
            "ExitPlanMode",
            json!({}),
            "toolu_exit"
        )),
        Value::Null
    );
    assert_eq!(case.approval(id)["executionState"], "running");
    // The Agent phase: the host's table (accept-edits) allows the write;
    // Bash is host-run in the workspace-write sandbox, after the person
    // confirms it in Claude Code's dialog, and reaches no host channel.
    let write = json!({"file_path": case.project.join("out.txt"), "content": "x"});
    let answer = case.hook(&case.input("PreToolUse", "acceptEdits", "Write", write, "toolu_w2"));
    assert_eq!(decision(&answer), "allow", "{answer}");
    // The host's socket, which the hooks reach, is beyond the command's reach.
    let socket = case.socket();
    assert!(socket.exists());
    let bash = json!({"command": format!(
        "echo made > made.txt; python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' '{}' 2>/dev/null && echo reached || echo unreachable",
        socket.display()
    )});
    let answer = case.hook(&case.input("PreToolUse", "acceptEdits", "Bash", bash, "toolu_b2"));
    assert_eq!(decision(&answer), "ask", "{answer}");
    let rewritten = answer["hookSpecificOutput"]["updatedInput"].clone();
    let permission = case.hook(&case.input("PermissionRequest", "acceptEdits", "Bash", rewritten, ""));
    assert_eq!(
        permission,
        Value::Null,
        "a confirmation is the person's, in Claude Code's dialog"
    );
    let output = case.run_rewritten(&answer);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "unreachable\n");
    assert_eq!(
        std::fs::read_to_string(case.project.join("made.txt")).unwrap(),
        "made\n"
    );
}

#[test]
fn a_rejected_or_expired_plan_is_denied_with_the_hosts_sentence() {
    let case = Case::new();
    let (hook, pending) = exit_plan(&case);
    let rejected = case.run(&["claude-code", "reject", pending["approvalId"].as_str().unwrap()]);
    assert!(rejected.status.success());
    let answer = answer_of(&hook.wait_with_output().unwrap());
    assert_eq!(decision(&answer), "deny");
    assert!(
        reason(&answer).starts_with("The person rejected this plan"),
        "{answer}"
    );

    let mut short = Case::new();
    short.ttl_ms = Some(1_500);
    let (hook, _) = exit_plan(&short);
    // Nobody decides: the host expires it at its deadline.
    let answer = answer_of(&hook.wait_with_output().unwrap());
    assert_eq!(decision(&answer), "deny");
    assert!(reason(&answer).starts_with("PLAN_APPROVAL_TIMEOUT: "), "{answer}");
}

#[test]
fn a_host_killed_while_a_plan_is_pending_denies_the_exit_and_the_next_host_interrupts_it() {
    let case = Case::new();
    let (hook, pending) = exit_plan(&case);
    case.kill_host();
    let answer = answer_of(&hook.wait_with_output().unwrap());
    assert_eq!(decision(&answer), "deny", "{answer}");
    // The next hook starts a new host, whose startup fence interrupted it.
    let read = json!({"file_path": case.project.join("x")});
    let next = case.hook(&case.input("PreToolUse", "plan", "Read", read, "toolu_next"));
    let shown = case.run(&[
        "approvals",
        "show",
        pending["approvalId"].as_str().unwrap(),
        "--json",
        "--db",
        case.project.join(".pi/plan/plan.db").to_str().unwrap(),
    ]);
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(
        shown["status"], "interrupted",
        "{shown}\nthe next hook answered {next}"
    );
}

#[test]
fn without_a_host_every_plan_mode_call_is_denied_and_nothing_runs() {
    let case = Case::new();
    // A per-user directory so deep that no Unix socket fits in it: the
    // host a hook starts cannot listen, and ends at once.
    let deep = case.dir.path().join("d".repeat(60)).join("e".repeat(60));
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(case.project.join("canary.txt"), "kept\n").unwrap();
    for (tool, input) in [
        (
            "Write",
            json!({"file_path": case.project.join("canary.txt"), "content": "x"}),
        ),
        (
            "ExitPlanMode",
            json!({"plan": "# Plan\n", "planFilePath": "/config/plans/p.md"}),
        ),
    ] {
        let input = case.input("PreToolUse", "plan", tool, input, "toolu_x");
        let child = case.spawn_hook_with(&input, &[("TMPDIR", deep.as_os_str())]);
        let answer = answer_of(&child.wait_with_output().unwrap());
        assert_eq!(decision(&answer), "deny", "{tool}: {answer}");
        assert!(
            reason(&answer).starts_with("HOST_UNREACHABLE: the host could not start"),
            "{tool}: {answer}"
        );
    }
    // Bash is rewritten at once; the client finds no host and runs nothing.
    let answer = case.hook(&case.input(
        "PreToolUse",
        "plan",
        "Bash",
        json!({"command": "rm canary.txt"}),
        "toolu_b",
    ));
    let output = case.run_rewritten_with(&answer, &[("TMPDIR", deep.as_os_str())]);
    assert_eq!(output.status.code(), Some(126));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("HOST_UNREACHABLE: the host could not start"),
        "{output:?}"
    );
    assert_eq!(
        std::fs::read_to_string(case.project.join("canary.txt")).unwrap(),
        "kept\n"
    );
}

#[test]
fn under_ask_a_call_accepted_in_claude_codes_dialog_is_recorded_as_confirmed() {
    let case = Case::new();
    let (hook, pending) = exit_plan(&case);
    let id = pending["approvalId"].as_str().unwrap();
    assert!(
        case.run(&["claude-code", "approve", id, "--mode", "ask"])
            .status
            .success()
    );
    answer_of(&hook.wait_with_output().unwrap());
    let write = json!({"file_path": case.project.join("out.txt"), "content": "x"});
    let answer = case.hook(&case.input("PreToolUse", "default", "Write", write.clone(), "toolu_ask"));
    assert_eq!(decision(&answer), "ask", "{answer}");
    // The person accepted in Claude Code's dialog; the write ran.
    assert_eq!(
        case.hook(&case.input("PostToolUse", "default", "Write", write, "toolu_ask")),
        Value::Null
    );
    // `approvals show` counts the execution's calls by how they were decided.
    let shown = case.run(&[
        "approvals",
        "show",
        id,
        "--db",
        case.project.join(".pi/plan/plan.db").to_str().unwrap(),
    ]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("1 confirmed, 0 declined"), "{shown}");
}

#[test]
fn a_host_without_its_sandbox_refuses_plan_mode_bash_with_its_code_and_nothing_runs() {
    let case = Case::new();
    std::fs::write(case.project.join("canary.txt"), "kept\n").unwrap();
    let input = case.input(
        "PreToolUse",
        "plan",
        "Bash",
        json!({"command": "rm canary.txt"}),
        "toolu_s",
    );
    // The binary, which is its own sandbox helper, installed in a
    // directory anyone may write: the helper is refused, so the host the
    // rewritten command starts has no sandbox.
    let open = case.dir.path().join("anyone-writes-here");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let binary = open.join("plan-checkpoint");
    crate::support::copy_executable(
        std::path::Path::new(env!("CARGO_BIN_EXE_plan-checkpoint")),
        &binary,
    );
    let template = case.command(&["claude-code", "hook"]);
    let mut hook = Command::new(&binary)
        .args(template.get_args())
        .envs(
            template
                .get_envs()
                .filter_map(|(name, value)| Some((name, value?))),
        )
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("PLAN_CHECKPOINT_DB")
        .current_dir(&case.project)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    hook.stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let answer = answer_of(&hook.wait_with_output().unwrap());
    // The hook asks no host (one round trip fewer per call): the command
    // goes to the host, which refuses it with its code; nothing runs.
    assert_eq!(decision(&answer), "allow", "{answer}");
    let output = case.run_rewritten_with(&answer, &[]);
    assert_eq!(output.status.code(), Some(126));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("PLAN_SANDBOX_UNAVAILABLE: "), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(case.project.join("canary.txt")).unwrap(),
        "kept\n"
    );
}

#[test]
fn the_notifier_hears_of_each_plan_whichever_host_runs_and_the_card_is_served_where_asked() {
    let case = Case::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let bind = format!("127.0.0.1:{port}");
    // A host already runs (started by an earlier call, asked for no
    // notifier), serving the card where the person asked.
    let read = case.input(
        "PreToolUse",
        "plan",
        "Read",
        json!({"file_path": case.project.join("x")}),
        "toolu_r",
    );
    let output = case
        .spawn_hook_with(&read, &[("PLAN_CHECKPOINT_WEB_BIND", bind.as_ref())])
        .wait_with_output()
        .unwrap();
    answer_of(&output);
    assert!(case.host_pid().is_some());
    // The plan's hook runs the person's notifier itself.
    let (hook, pending) = exit_plan(&case);
    let id = pending["approvalId"].as_str().unwrap();
    let url = case.run(&["claude-code", "card-url", &id[..21]]);
    let url = String::from_utf8_lossy(&url.stdout);
    assert!(url.starts_with(&format!("http://{bind}/card/")), "{url}");
    assert!(case.run(&["claude-code", "reject", id]).status.success());
    answer_of(&hook.wait_with_output().unwrap());
}

#[test]
fn the_status_line_says_a_plan_waits_its_deadline_and_the_command_and_pending_works_before_any_host() {
    let case = Case::new();
    // Before any host: nothing pending, no error.
    let before = case.run(&["claude-code", "pending"]);
    assert!(before.status.success(), "{before:?}");
    assert_eq!(String::from_utf8_lossy(&before.stdout), "no pending plan\n");
    let status = |case: &Case| -> String {
        let mut child = case
            .command(&[
                "claude-code",
                "status",
                "--project",
                case.project.to_str().unwrap(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(br#"{"session_id":"cc-session","cwd":"/"}"#)
            .unwrap();
        String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap()
    };
    assert_eq!(status(&case), "plan-checkpoint: on\n");
    let (hook, pending) = exit_plan(&case);
    let id = pending["approvalId"].as_str().unwrap();
    let shown = status(&case);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), 2, "{shown}");
    // The agent's title, escaped; the deadline; the command that decides it.
    assert!(lines[0].starts_with("plan-checkpoint: the plan \"Split the \\u{1b}[31mparser\\u{202e}\" waits for your decision until "), "{shown}");
    assert!(!shown.contains('\u{1b}'));
    assert_eq!(
        lines[1],
        format!(
            "plan-checkpoint claude-code approve {} --mode ask|accept-edits|auto (or reject, card-url)",
            &id[..21]
        )
    );
    let approved = case.run(&["claude-code", "approve", &id[..21], "--mode", "auto"]);
    assert_eq!(
        String::from_utf8_lossy(&approved.stdout),
        format!("{id} approved with auto\n")
    );
    answer_of(&hook.wait_with_output().unwrap());
}

/// A case whose plan was approved with `mode` and whose exit ran.
fn approved_with(mode: &str) -> Case {
    let case = Case::new();
    let (hook, pending) = exit_plan(&case);
    let id = pending["approvalId"].as_str().unwrap();
    assert!(
        case.run(&["claude-code", "approve", id, "--mode", mode])
            .status
            .success()
    );
    answer_of(&hook.wait_with_output().unwrap());
    case.hook(&case.input(
        "PostToolUse",
        "acceptEdits",
        "ExitPlanMode",
        json!({}),
        "toolu_exit",
    ));
    case
}

#[test]
fn after_an_auto_approval_nothing_runs_outside_the_host_and_no_guard_of_claude_codes_is_skipped() {
    let case = approved_with("auto");
    std::fs::create_dir_all(case.project.join(".claude/skills/hooked")).unwrap();
    std::fs::write(
        case.project.join(".claude/skills/hooked/SKILL.md"),
        "---\nname: hooked\ndescription: d\nhooks:\n  PreToolUse:\n    - hooks:\n        - type: command\n          command: touch x\n---\nBody\n",
    )
    .unwrap();
    std::fs::create_dir_all(case.project.join(".claude/skills/plain")).unwrap();
    std::fs::write(
        case.project.join(".claude/skills/plain/SKILL.md"),
        "---\nname: plain\ndescription: d\n---\nBody !`date`\n",
    )
    .unwrap();
    let hook = |tool: &str, input: Value, call: &str| {
        case.hook(&case.input("PreToolUse", "acceptEdits", tool, input, call))
    };
    // A tool that runs a program itself: the host refuses it.
    let monitor = hook(
        "Monitor",
        json!({"command": "touch x", "description": "d", "timeout_ms": 1000}),
        "t1",
    );
    assert_eq!(decision(&monitor), "deny");
    assert!(
        reason(&monitor).starts_with("TOOL_RUNS_OUTSIDE_HOST: "),
        "{monitor}"
    );
    // A skill declaring hooks is refused; one without is left to Claude
    // Code's own guard of skills.
    let skill = hook("Skill", json!({"skill": "hooked"}), "t2");
    assert_eq!(decision(&skill), "deny");
    assert!(
        reason(&skill).starts_with("TOOL_RUNS_OUTSIDE_HOST: the skill hooked declares hooks"),
        "{skill}"
    );
    assert_eq!(hook("Skill", json!({"skill": "plain"}), "t3"), Value::Null);
    // A skill's shell command never runs in Claude Code's shell.
    let shell = case.hook(&json!({
        "session_id": "cc-session", "cwd": case.project, "permission_mode": "acceptEdits",
        "hook_event_name": "PreSkillShellCommand", "tool_name": "Bash", "tool_input": {"command": "date"},
        "tool_use_id": "s1", "command_name": "plain",
    }));
    assert_eq!(
        shell["hookSpecificOutput"]["permissionDecision"], "deny",
        "{shell}"
    );
    // What Claude Code guards itself keeps its guard; the host's allow is
    // no answer there.
    assert_eq!(hook("EnterWorktree", json!({"name": "w"}), "t4"), Value::Null);
    // A tool the table does not know is asked, never plainly allowed.
    let unknown = hook("SomethingNew", json!({}), "t5");
    assert_eq!(decision(&unknown), "ask", "{unknown}");
    // An MCP tool is the host's: auto allows it.
    assert_eq!(
        decision(&hook("mcp__github__create_issue", json!({}), "t6")),
        "allow"
    );
    // A write where no command may is refused; in the project it is allowed.
    let settings = hook(
        "Write",
        json!({"file_path": case.project.join(".claude/settings.json"), "content": "{}"}),
        "t7",
    );
    assert!(
        reason(&settings).starts_with("TOOL_WRITE_PROTECTED: "),
        "{settings}"
    );
    assert_eq!(
        decision(&hook(
            "Write",
            json!({"file_path": case.project.join("a.txt"), "content": "a"}),
            "t8"
        )),
        "allow"
    );
}

#[test]
fn a_hook_whose_project_is_gone_blocks_the_call() {
    let case = Case::new();
    let gone = case.dir.path().join("moved-away");
    let input = case.input(
        "PreToolUse",
        "plan",
        "Bash",
        json!({"command": "true"}),
        "toolu_g",
    );
    let output = case
        .command(&["claude-code", "hook", "--project", gone.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.to_string().as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    let answer = answer_of(&output);
    assert_eq!(decision(&answer), "deny", "{answer}");
    assert!(
        reason(&answer).starts_with("HOST_UNREACHABLE: the project the checkpoint was installed in"),
        "{answer}"
    );
}

#[test]
fn hooks_of_calls_claude_code_runs_side_by_side_share_one_session_and_turn() {
    let case = Case::new();
    // The session's first calls, all at once (Claude Code runs read-only
    // tools in parallel): none is refused for losing a race to make the
    // session or its turn.
    let hooks: Vec<Child> = (0..6)
        .map(|index| {
            let read = json!({"file_path": case.project.join(format!("f{index}"))});
            case.spawn_hook(&case.input("PreToolUse", "plan", "Read", read, &format!("toolu_{index}")))
        })
        .collect();
    for hook in hooks {
        assert_eq!(answer_of(&hook.wait_with_output().unwrap()), Value::Null);
    }
}

#[test]
fn an_approved_auto_command_cannot_switch_the_checkpoint_off_for_the_next_session() {
    let case = Case::new();
    let installed = case.run(&["claude-code", "install"]);
    assert!(
        installed.status.success(),
        "{}",
        String::from_utf8_lossy(&installed.stderr)
    );
    let claude = case.project.join(".claude");
    let local_settings = std::fs::read(claude.join("settings.local.json")).unwrap();
    let (hook, pending) = exit_plan(&case);
    let id = pending["approvalId"].as_str().unwrap();
    let approved = case.run(&["claude-code", "approve", id, "--mode", "auto"]);
    assert!(
        approved.status.success(),
        "{}",
        String::from_utf8_lossy(&approved.stderr)
    );
    answer_of(&hook.wait_with_output().unwrap());

    // The approved command turns the checkpoint off for the next `claude`:
    // its hooks removed or replaced, hooks and servers of its own, and an
    // environment that names a helper it built in the workspace. The
    // helper, run anywhere outside the sandbox, leaves a canary.
    let canary = case.dir.path().join("planted-helper-ran");
    let planted_settings = format!(
        "{{\"env\":{{\"PLAN_CHECKPOINT_SANDBOX_HELPER\":\"{}\"}},\"hooks\":{{\"SessionStart\":[{{\"hooks\":[{{\"type\":\"command\",\"command\":\"./helper\"}}]}}]}}}}",
        case.project.join("helper").display()
    );
    let attacks = [
        (
            "local-settings",
            "echo '{}' > .claude/settings.local.json".to_owned(),
        ),
        ("removal", "rm .claude/settings.local.json".to_owned()),
        (
            "settings",
            format!("echo '{planted_settings}' > .claude/settings.json"),
        ),
        ("moved", "mv .claude .claude.away".to_owned()),
        (
            "mcp",
            "echo '{\"mcpServers\":{\"x\":{\"command\":\"./helper\"}}}' > .mcp.json".to_owned(),
        ),
    ];
    let mut script: String = attacks
        .iter()
        .map(|(name, command)| {
            format!("if ( {command} ) 2>/dev/null; then echo {name}-wrote; else echo {name}-refused; fi\n")
        })
        .collect();
    script.push_str(&format!(
        "printf '#!/bin/sh\\ntouch {}\\n' > helper && chmod 755 helper && echo built\n",
        canary.display()
    ));
    let bash = json!({ "command": script });
    let answer = case.hook(&case.input("PreToolUse", "acceptEdits", "Bash", bash, "toolu_auto"));
    assert_eq!(decision(&answer), "allow", "{answer}");
    let output = case.run_rewritten(&answer);
    let expected: String = attacks
        .iter()
        .map(|(name, _)| format!("{name}-refused\n"))
        .chain(["built\n".to_owned()])
        .collect();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        expected,
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        std::fs::read(claude.join("settings.local.json")).unwrap(),
        local_settings
    );
    assert!(!claude.join("settings.json").exists());
    assert!(!case.project.join(".mcp.json").is_file());
    // The helper it built is the kind a host would accept: root's or the
    // user's, not writable by others. Run directly, it leaves the canary:
    // the probe works.
    assert!(case.project.join("helper").is_file());

    // The next session: the host is gone (after a reboot, say), and Claude
    // Code starts the hooks with whatever environment the project's
    // settings could give them. The next host still uses its own helper:
    // Plan-mode Bash runs in the read-only sandbox and the planted helper
    // never runs.
    case.kill_host();
    let helper = case.project.join("helper");
    let input = case.input(
        "PreToolUse",
        "plan",
        "Bash",
        json!({"command": "touch planted 2>/dev/null || echo refused; echo ran"}),
        "toolu_next",
    );
    let output = case
        .spawn_hook_with(&input, &[("PLAN_CHECKPOINT_SANDBOX_HELPER", helper.as_os_str())])
        .wait_with_output()
        .unwrap();
    let answer = answer_of(&output);
    assert_eq!(decision(&answer), "allow", "{answer}");
    // The rewritten command starts the host, with the same environment.
    let output = case.run_rewritten_with(&answer, &[("PLAN_CHECKPOINT_SANDBOX_HELPER", helper.as_os_str())]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "refused\nran\n",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!case.project.join("planted").exists());
    assert!(!canary.exists(), "the host ran a helper built in the workspace");
    assert!(Command::new(&helper).status().unwrap().success());
    assert!(canary.exists());
}

#[test]
fn the_notifier_and_the_cards_address_come_from_the_person_never_from_the_projects_settings() {
    let case = Case::new();
    // What a planted `.claude/settings.json` `env` gives the hooks: a
    // notifier of the workspace's choosing and the card on every address.
    let planted = case.project.join("planted-notifier-ran");
    let planted_notify = format!("touch '{}'", planted.display());
    let (hook, pending) = case.spawn_hook_until_pending_with(
        &case.input(
            "PreToolUse",
            "plan",
            "ExitPlanMode",
            json!({"plan": PLAN, "planFilePath": plan_file(&case)}),
            "toolu_settings",
        ),
        &[
            ("PLAN_CHECKPOINT_NOTIFY", planted_notify.as_ref()),
            ("PLAN_CHECKPOINT_WEB_BIND", "0.0.0.0:0".as_ref()),
        ],
    );
    // The person's notifier ran (the helper waited on it), so the hook's
    // own one did not: one notifier runs per plan.
    let id = pending["approvalId"].as_str().unwrap();
    let url = case.run(&["claude-code", "card-url", id]);
    let url = String::from_utf8_lossy(&url.stdout);
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(case.run(&["claude-code", "reject", id]).status.success());
    let output = hook.wait_with_output().unwrap();
    assert_eq!(decision(&answer_of(&output)), "deny");
    assert!(!planted.exists(), "the project's settings chose the notifier");
}

/// The audit export's settings are the person's too: a project's settings
/// `env` that names an export file in the workspace, or an OTLP endpoint,
/// reaches the hooks' environment but never the host a hook starts (each
/// planted value here is one the exporter refuses, so a host that read it
/// would not start and the plan would never be pending).
#[test]
fn the_audit_exports_settings_come_from_the_person_never_from_the_projects_settings() {
    let case = Case::new();
    let planted_file = case.project.join("planted-audit-export.json");
    std::fs::write(&planted_file, "{ this is not the person's file").unwrap();
    let (hook, pending) = case.spawn_hook_until_pending_with(
        &case.input(
            "PreToolUse",
            "plan",
            "ExitPlanMode",
            json!({"plan": PLAN, "planFilePath": plan_file(&case)}),
            "toolu_export",
        ),
        &[
            ("PLAN_CHECKPOINT_AUDIT_EXPORT_FILE", planted_file.as_os_str()),
            ("XDG_CONFIG_HOME", case.project.as_os_str()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "not an endpoint".as_ref()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon".as_ref()),
        ],
    );
    let id = pending["approvalId"].as_str().unwrap();
    assert!(case.run(&["claude-code", "reject", id]).status.success());
    let output = hook.wait_with_output().unwrap();
    assert_eq!(decision(&answer_of(&output)), "deny");
}
