//! Setting Claude Code up for the checkpoint in a project, checking that
//! setup and undoing it: `claude-code install`, `doctor` and `uninstall`,
//! over the project's `.claude/settings.local.json` (the only settings file
//! this writes; Claude Code keeps it out of git, and honours
//! `useAutoModeDuringPlan` there).
//!
//! What `install` writes is declared once ([`Installed`]): the hook entries
//! (each this binary, spawned directly with its arguments, no shell,
//! `--project` naming the project, so the hooks find the one project
//! wherever Claude Code starts), the settings the checkpoint needs, and the
//! status line that tells the person a plan waits. `uninstall` removes
//! exactly those; `doctor` checks each against what `install` would write
//! now. Every hook a call waits on is fail-closed (`onFailure: "block"`): a
//! hook that cannot run (the binary moved or deleted) or that Claude Code
//! ends at its timeout blocks the call, never leaves it to Claude Code.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::{HOLD_MARGIN_SECONDS, approval_ttl_ms, plan_bash_prefix, shell_quoted, this_program};
use crate::agent_host::{HostClient, Project};
use crate::{Failure, exit};

/// The file `install` writes, in the project.
pub(crate) fn settings_file(project: &Project) -> PathBuf {
    project.root.join(".claude").join("settings.local.json")
}

/// What marks a hook command (written by an earlier install, as a command
/// line) or a status line as this checkpoint's.
const HOOK_MARK: &str = " claude-code hook";
const STATUS_MARK: &str = " claude-code status";
/// The arguments every hook of this checkpoint starts with.
const HOOK_ARGS: [&str; 2] = ["claude-code", "hook"];
const BASH_MARK: &str = " claude-code bash ";

/// The tools a permission mode may ask a person about (Bash confirms
/// itself on the host), and the plan exit (whose run starts the approved
/// plan's execution): what the `PostToolUse` hook hears of.
const POST_TOOL_USE_MATCHER: &str =
    "Write|Edit|MultiEdit|NotebookEdit|WebFetch|WebSearch|Task|Agent|ExitPlanMode";

/// The spinner's words while the checkpoint's hook holds a call (Claude
/// Code shows them instead of `running PreToolUse hook`).
const STATUS_MESSAGE: &str = "plan-checkpoint: checking with the host (a plan exit waits for your decision: see the status line, or run `plan-checkpoint claude-code pending`)";

/// One hook entry `install` writes.
struct HookEntry {
    event: &'static str,
    matcher: Option<&'static str>,
    /// Seconds Claude Code gives the hook.
    timeout: u64,
    /// Whether a hook that cannot run or times out blocks the call (a hook
    /// whose answer gates a call) rather than being ignored (a hook that
    /// only records; Claude Code ignores `onFailure` there anyway).
    fail_closed: bool,
    /// The spinner's words while it runs.
    status_message: Option<&'static str>,
}

/// What `install` writes into the settings, and `uninstall` removes.
pub(crate) struct Installed {
    project: PathBuf,
    program: PathBuf,
    /// The `PreToolUse` hook's timeout, past the plan's deadline.
    hold: u64,
    /// The permission rule that lets plan mode run the rewritten plan-mode
    /// Bash without asking (saving a `PermissionRequest` hook per call).
    plan_bash_rule: String,
}

impl Installed {
    /// What `install` writes now for `project`: this binary, the deadline
    /// `PLAN_CHECKPOINT_APPROVAL_TTL_MS` gives.
    pub(crate) fn now(project: &Project) -> Installed {
        let ttl_seconds = u64::try_from(approval_ttl_ms() / 1000).unwrap_or(0);
        Installed {
            project: project.root.clone(),
            program: this_program(),
            hold: ttl_seconds + HOLD_MARGIN_SECONDS,
            plan_bash_rule: format!("Bash({}:*)", plan_bash_prefix(project)),
        }
    }

    fn entries(&self) -> [HookEntry; 6] {
        let gate = |event, matcher, timeout| HookEntry {
            event,
            matcher,
            timeout,
            fail_closed: true,
            status_message: None,
        };
        [
            HookEntry {
                status_message: Some(STATUS_MESSAGE),
                ..gate("PreToolUse", Some("*"), self.hold)
            },
            gate("PermissionRequest", Some("*"), 60),
            gate("PostToolUse", Some(POST_TOOL_USE_MATCHER), 60),
            gate("PreSkillShellCommand", Some("*"), 60),
            HookEntry {
                fail_closed: false,
                ..gate("Stop", None, 60)
            },
            HookEntry {
                fail_closed: false,
                ..gate("SessionEnd", None, 60)
            },
        ]
    }

    /// The arguments of one hook entry's command (this binary).
    fn args(&self, entry: &HookEntry) -> Vec<String> {
        let mut args: Vec<String> = HOOK_ARGS.iter().map(|arg| (*arg).to_owned()).collect();
        args.push("--project".to_owned());
        args.push(self.project.display().to_string());
        if entry.event == "PreToolUse" {
            // The hook answers before Claude Code would end it.
            args.push("--timeout".to_owned());
            args.push(entry.timeout.to_string());
        }
        args
    }

    fn hook_value(&self, entry: &HookEntry) -> Value {
        let mut hook = json!({
            "type": "command",
            "command": self.program.display().to_string(),
            "args": self.args(entry),
            "timeout": entry.timeout,
        });
        if let Some(object) = hook.as_object_mut() {
            if entry.fail_closed {
                object.insert("onFailure".to_owned(), Value::from("block"));
            }
            if let Some(message) = entry.status_message {
                object.insert("statusMessage".to_owned(), Value::from(message));
            }
        }
        let mut value = json!({"hooks": [hook]});
        if let (Some(matcher), Some(object)) = (entry.matcher, value.as_object_mut()) {
            object.insert("matcher".to_owned(), Value::from(matcher));
        }
        value
    }

    fn status_line(&self) -> Value {
        json!({
            "type": "command",
            "command": format!("{}{STATUS_MARK} --project {}", shell_quoted(&self.program), shell_quoted(&self.project)),
            "refreshInterval": 1,
        })
    }

    /// The settings this writes over `settings` (an object), merged: its
    /// own hook entries replace earlier ones of its (another path of the
    /// binary included), everything else is kept; the status line only
    /// where the person has none of their own. Returns whether the status
    /// line is this checkpoint's.
    fn apply(&self, settings: &mut Map<String, Value>, path: &Path) -> Result<bool, Failure> {
        settings.insert("useAutoModeDuringPlan".to_owned(), Value::Bool(false));
        settings.insert("disableSkillShellExecution".to_owned(), Value::Bool(true));
        let permissions = settings.entry("permissions").or_insert_with(|| json!({}));
        let Some(permissions) = permissions.as_object_mut() else {
            return Err(refused(path, "`permissions` is not an object"));
        };
        let allow = permissions.entry("allow").or_insert_with(|| json!([]));
        let Some(allow) = allow.as_array_mut() else {
            return Err(refused(path, "`permissions.allow` is not a list"));
        };
        allow.retain(|rule| !is_ours(rule, BASH_MARK));
        allow.push(Value::String(self.plan_bash_rule.clone()));
        let status_line = match settings.get("statusLine") {
            None => true,
            Some(existing) => is_ours(existing, STATUS_MARK),
        };
        if status_line {
            settings.insert("statusLine".to_owned(), self.status_line());
        }
        let hooks = settings.entry("hooks").or_insert_with(|| json!({}));
        let Some(hooks) = hooks.as_object_mut() else {
            return Err(refused(path, "`hooks` is not an object"));
        };
        for entry in self.entries() {
            let entries = hooks.entry(entry.event).or_insert_with(|| json!([]));
            let Some(entries) = entries.as_array_mut() else {
                return Err(refused(path, &format!("`hooks.{}` is not a list", entry.event)));
            };
            entries.retain(|existing| !is_our_hook(existing));
            entries.push(self.hook_value(&entry));
        }
        Ok(status_line)
    }
}

/// Whether a status line or a permission rule is this checkpoint's.
fn is_ours(value: &Value, mark: &str) -> bool {
    value.to_string().contains(mark)
}

/// Whether a hook entry is this checkpoint's: one of its hooks runs `hook`
/// of a `plan-checkpoint` (spawned with its arguments, or, as an earlier
/// install wrote it, a command line).
fn is_our_hook(entry: &Value) -> bool {
    entry.get("hooks").and_then(Value::as_array).is_some_and(|hooks| {
        hooks.iter().any(|hook| {
            let spawned = hook
                .get("args")
                .and_then(Value::as_array)
                .is_some_and(|args| args.iter().take(2).map(Value::as_str).eq(HOOK_ARGS.map(Some)));
            spawned || is_ours(hook, HOOK_MARK)
        })
    })
}

fn refused(path: &Path, why: &str) -> Failure {
    Failure::new(exit::FAILURE, format!("{}: {why}", path.display()))
}

/// The settings file as a JSON object (empty when there is none).
fn read_settings(path: &Path) -> Result<Map<String, Value>, Failure> {
    let value: Value = match std::fs::read_to_string(path) {
        Ok(text) => {
            serde_json::from_str(&text).map_err(|error| refused(path, &format!("not JSON: {error}")))?
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => json!({}),
        Err(error) => return Err(refused(path, &error.to_string())),
    };
    match value {
        Value::Object(object) => Ok(object),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) => {
            Err(refused(path, "not a JSON object"))
        }
    }
}

fn write_settings(path: &Path, settings: Map<String, Value>) -> Result<(), Failure> {
    if let Some(directory) = path.parent() {
        std::fs::create_dir_all(directory).map_err(|error| refused(directory, &error.to_string()))?;
    }
    let text = serde_json::to_string_pretty(&Value::Object(settings))
        .map_err(|error| Failure::new(exit::FAILURE, error.to_string()))?;
    std::fs::write(path, format!("{text}\n")).map_err(|error| refused(path, &error.to_string()))
}

/// The project a setup command names: it must exist (a typo is refused, not
/// created).
pub(crate) fn existing_project(dir: &Path) -> Result<Project, Failure> {
    if !dir.is_dir() {
        return Err(Failure::new(
            exit::USAGE,
            format!("--project {}: the directory does not exist", dir.display()),
        ));
    }
    Ok(Project::at(dir))
}

/// `claude-code install`.
pub(crate) fn install(project: &Project) -> Result<i32, Failure> {
    let path = settings_file(project);
    let mut settings = read_settings(&path)?;
    let installed = Installed::now(project);
    let status_line = installed.apply(&mut settings, &path)?;
    write_settings(&path, settings)?;
    let command = format!(
        "{} {}",
        installed.program.display(),
        installed.args(&installed.entries()[0]).join(" ")
    );
    let status = if status_line {
        "- statusLine: `claude-code status`, every second: while a plan waits for you it shows its\n  \
         title, its deadline and the commands that decide it.\n"
            .to_owned()
    } else {
        "- statusLine: yours is kept, so a waiting plan shows only in the spinner's words and in\n  \
         `plan-checkpoint claude-code pending`.\n"
            .to_owned()
    };
    let report = format!(
        "Wrote {path}:\n\
         - hooks.PreToolUse (every tool, timeout {hold} s, past the plan's deadline): {command}\n  \
           plan-mode Bash runs in the host's read-only sandbox, every other call follows the host's\n  \
           table, and ExitPlanMode waits for your decision (status line, card, or `plan-checkpoint\n  \
           claude-code approve`), answering before Claude Code would end the hook.\n\
         - hooks.PermissionRequest (every tool): passes the rewritten Bash and your decision on a plan,\n  \
           so Claude Code's own dialog never decides.\n\
         - hooks.PostToolUse (the tools a mode may ask about, and ExitPlanMode): records a call you\n  \
           confirmed in Claude Code's dialog, and starts the approved plan's execution once the exit ran.\n\
         - hooks.PreSkillShellCommand (every skill): a skill's `!` command never runs in Claude Code's\n  \
           own shell; the model runs it with Bash, which the host runs.\n\
         - hooks.Stop and hooks.SessionEnd: the approved plan's execution ends `completed`, and a plan\n  \
           still pending when the session ends is withdrawn.\n\
         - Every hook runs the binary directly (no shell); every hook a call waits on is fail-closed\n  \
           (onFailure: block): if the binary cannot run, or Claude Code ends it at its timeout, the\n  \
           call is blocked.\n\
         - useAutoModeDuringPlan: false: otherwise plan-mode Bash goes to a remote classifier that\n  \
           skips these hooks (Claude Code honours this in local or user settings only).\n\
         - disableSkillShellExecution: true: Claude Code runs no skill's `!` command itself.\n\
         - permissions.allow: {rule}\n  \
           plan mode runs the rewritten plan-mode Bash (and only that) without asking: the host runs\n  \
           it in its read-only sandbox.\n\
         {status}\
         The host starts with the first hook; its database is {database}.\n\
         Check the setup with `plan-checkpoint claude-code doctor`; undo it with `uninstall`.\n",
        path = path.display(),
        hold = installed.hold,
        rule = installed.plan_bash_rule,
        database = project.database.display(),
    );
    crate::render::write_stdout(report.as_bytes())?;
    Ok(exit::OK)
}

/// `claude-code uninstall`: removes exactly what `install` writes.
pub(crate) fn uninstall(project: &Project) -> Result<i32, Failure> {
    let path = settings_file(project);
    let mut settings = read_settings(&path)?;
    let mut removed = Vec::new();
    if let Some(hooks) = settings.get_mut("hooks").and_then(Value::as_object_mut) {
        let events: Vec<String> = hooks.keys().cloned().collect();
        for event in events {
            let Some(entries) = hooks.get_mut(&event).and_then(Value::as_array_mut) else {
                continue;
            };
            let before = entries.len();
            entries.retain(|entry| !is_our_hook(entry));
            if entries.len() != before {
                removed.push(format!("hooks.{event}"));
            }
            if entries.is_empty() && before > 0 {
                hooks.remove(&event);
            }
        }
        if hooks.is_empty() {
            settings.remove("hooks");
        }
    }
    if let Some(permissions) = settings.get_mut("permissions").and_then(Value::as_object_mut) {
        if let Some(allow) = permissions.get_mut("allow").and_then(Value::as_array_mut) {
            let before = allow.len();
            allow.retain(|rule| !is_ours(rule, BASH_MARK));
            if allow.len() != before {
                removed.push("permissions.allow".to_owned());
            }
            if allow.is_empty() && before > 0 {
                permissions.remove("allow");
            }
        }
        if permissions.is_empty() {
            settings.remove("permissions");
        }
    }
    if settings
        .get("statusLine")
        .is_some_and(|line| is_ours(line, STATUS_MARK))
    {
        settings.remove("statusLine");
        removed.push("statusLine".to_owned());
    }
    for (key, value) in [
        ("useAutoModeDuringPlan", false),
        ("disableSkillShellExecution", true),
    ] {
        if settings.get(key) == Some(&Value::Bool(value)) {
            settings.remove(key);
            removed.push(key.to_owned());
        }
    }
    let said = if removed.is_empty() {
        format!("Nothing of plan-checkpoint's was in {}.\n", path.display())
    } else {
        write_settings(&path, settings)?;
        format!(
            "Removed from {}: {}. The project's database and plans in {} are kept.\n",
            path.display(),
            removed.join(", "),
            project.database.parent().unwrap_or(&project.root).display()
        )
    };
    crate::render::write_stdout(said.as_bytes())?;
    Ok(exit::OK)
}

/// One line of `doctor`'s report.
struct Check {
    ok: bool,
    what: &'static str,
    said: String,
}

/// `claude-code doctor`: the binary, the hooks, the settings Claude Code
/// honours, the sandbox, the host and its socket; exit 1 when any fails.
pub(crate) fn doctor(project: &Project, as_json: bool) -> Result<i32, Failure> {
    let path = settings_file(project);
    let installed = Installed::now(project);
    let settings = read_settings(&path).unwrap_or_default();
    let mut checks = Vec::new();
    // The binary the hooks run.
    let hooked = settings
        .get("hooks")
        .and_then(|hooks| hooks.get("PreToolUse"))
        .and_then(Value::as_array)
        .and_then(|entries| entries.iter().find(|entry| is_our_hook(entry)))
        .and_then(|entry| entry.pointer("/hooks/0/command"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let program = hooked.as_deref().and_then(program_of);
    checks.push(match &program {
        Some(program) if is_executable(program) => Check {
            ok: true,
            what: "binary",
            said: format!("the hooks run {}", program.display()),
        },
        Some(program) => Check {
            ok: false,
            what: "binary",
            said: format!(
                "the hooks run {}, which is not there (moved or deleted): every hooked call is blocked; run `install` again",
                program.display()
            ),
        },
        None => Check {
            ok: false,
            what: "binary",
            said: "no hook of plan-checkpoint names a binary: run `install`".to_owned(),
        },
    });
    // The hooks, as install writes them now.
    let hooks = settings.get("hooks").and_then(Value::as_object);
    let missing: Vec<String> = installed
        .entries()
        .iter()
        .filter(|entry| {
            let want = installed.hook_value(entry);
            !hooks
                .and_then(|hooks| hooks.get(entry.event))
                .and_then(Value::as_array)
                .is_some_and(|entries| {
                    entries.iter().any(|existing| {
                        existing == &want || same_but_binary(existing, &want, hooked.as_deref())
                    })
                })
        })
        .map(|entry| format!("hooks.{}", entry.event))
        .chain(
            (!settings
                .get("permissions")
                .and_then(|permissions| permissions.get("allow"))
                .and_then(Value::as_array)
                .is_some_and(|allow| allow.contains(&Value::String(installed.plan_bash_rule.clone()))))
            .then(|| {
                "permissions.allow (plan-mode Bash then asks a PermissionRequest hook each time)".to_owned()
            }),
        )
        .collect();
    checks.push(Check {
        ok: missing.is_empty(),
        what: "hooks",
        said: if missing.is_empty() {
            format!(
                "every hook is there, for this project, fail-closed; PreToolUse answers within {} s, past the {} s deadline",
                installed.hold,
                installed.hold - HOLD_MARGIN_SECONDS
            )
        } else {
            format!(
                "missing or not as `install` writes them now (another project, an older install, another deadline): {}; run `install`",
                missing.join(", ")
            )
        },
    });
    // The settings Claude Code honours, wherever they are set.
    let mut wrong = Vec::new();
    if settings.get("useAutoModeDuringPlan") != Some(&Value::Bool(false)) {
        wrong.push("useAutoModeDuringPlan is not false in settings.local.json".to_owned());
    }
    if settings.get("disableSkillShellExecution") != Some(&Value::Bool(true)) {
        wrong.push("disableSkillShellExecution is not true in settings.local.json".to_owned());
    }
    for other in other_settings(project) {
        let switched_off = read_settings(&other)
            .ok()
            .is_some_and(|other| other.get("disableAllHooks") == Some(&Value::Bool(true)));
        if switched_off {
            wrong.push(format!("{} sets disableAllHooks: no hook runs", other.display()));
        }
    }
    checks.push(Check {
        ok: wrong.is_empty(),
        what: "settings",
        said: if wrong.is_empty() {
            "useAutoModeDuringPlan false, disableSkillShellExecution true, no disableAllHooks".to_owned()
        } else {
            wrong.join("; ")
        },
    });
    // The sandbox the host would use: this binary as its helper.
    // Never one an environment names (P15), as the host it starts.
    let helper = this_program();
    checks.push(
        match plan_exec::Runner::open(&helper).map(|runner| runner.sandbox_support()) {
            Ok(plan_exec::SandboxSupport::Available { .. }) => Check {
                ok: true,
                what: "sandbox",
                said: format!("{} runs commands in the kernel sandbox here", helper.display()),
            },
            Ok(plan_exec::SandboxSupport::Unavailable { reason }) => Check {
                ok: false,
                what: "sandbox",
                said: format!("no kernel sandbox, so plan-mode Bash is refused: {reason}"),
            },
            Err(error) => Check {
                ok: false,
                what: "sandbox",
                said: format!("the sandbox helper {} is refused: {error}", helper.display()),
            },
        },
    );
    // The host and its socket.
    checks.push(match HostClient::connect(project, super::CLIENT) {
        Ok(client) => Check {
            ok: true,
            what: "host",
            said: format!(
                "running for {} (pid file {}), card server {}",
                project.root.display(),
                project.pid_file.display(),
                client.card_server().unwrap_or("off")
            ),
        },
        Err(_) if !project.socket.exists() => Check {
            ok: true,
            what: "host",
            said: "not running; the first hook starts it".to_owned(),
        },
        Err(failure) => Check {
            ok: false,
            what: "host",
            said: format!(
                "its socket {} does not answer: {}",
                project.socket.display(),
                failure.text()
            ),
        },
    });
    checks.push(socket_directory_check(project));
    let failed = checks.iter().any(|check| !check.ok);
    let text = if as_json {
        let rows: Vec<Value> = checks
            .iter()
            .map(|check| json!({"check": check.what, "ok": check.ok, "detail": check.said}))
            .collect();
        crate::render::json_line(&json!({"ok": !failed, "checks": rows}))?
    } else {
        checks
            .iter()
            .map(|check| {
                format!(
                    "{:<4} {:<8} {}\n",
                    if check.ok { "ok" } else { "FAIL" },
                    check.what,
                    check.said
                )
            })
            .collect()
    };
    crate::render::write_stdout(text.as_bytes())?;
    Ok(if failed { exit::FAILURE } else { exit::OK })
}

/// Whether `existing` is `want` for another path of the binary (still an
/// install of this project, but `binary` reports the path).
fn same_but_binary(existing: &Value, want: &Value, hooked: Option<&str>) -> bool {
    let Some(hooked) = hooked else {
        return false;
    };
    let mut existing = existing.clone();
    if let Some(command) = existing.pointer_mut("/hooks/0/command")
        && command.as_str() == Some(hooked)
    {
        *command = Value::from(this_program().display().to_string());
    }
    existing == *want
}

/// The program a hook runs: its `command`, spawned directly (or, from an
/// earlier install, the quoted path a command line starts with).
fn program_of(command: &str) -> Option<PathBuf> {
    match command.strip_prefix('\'') {
        Some(quoted) => quoted.split_once('\'').map(|(path, _)| PathBuf::from(path)),
        None => Some(PathBuf::from(command)),
    }
}

fn is_executable(path: &Path) -> bool {
    path.to_str().is_some_and(plan_storage::executable_exists)
}

/// The other settings files Claude Code reads for this project: the
/// project's shared one and the user's.
fn other_settings(project: &Project) -> Vec<PathBuf> {
    let mut files = vec![project.root.join(".claude").join("settings.json")];
    let configuration = std::env::var_os("CLAUDE_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".claude")));
    if let Some(configuration) = configuration {
        files.push(configuration.join("settings.json"));
    }
    files
}

/// The per-user directory of hosts: private to the user (commands never
/// reach the socket, P11).
fn socket_directory_check(project: &Project) -> Check {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let Some(directory) = project.socket.parent() else {
        return Check {
            ok: false,
            what: "socket",
            said: "the socket has no directory".to_owned(),
        };
    };
    match std::fs::metadata(directory) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Check {
            ok: true,
            what: "socket",
            said: format!("{} is made private (0700) by the first hook", directory.display()),
        },
        Err(error) => Check {
            ok: false,
            what: "socket",
            said: format!("{}: {error}", directory.display()),
        },
        Ok(metadata) => {
            let private = metadata.permissions().mode() & 0o077 == 0;
            let mine = metadata.uid() == rustix_free_uid();
            Check {
                ok: private && mine,
                what: "socket",
                said: if private && mine {
                    format!("{} is yours alone (0700)", project.socket.display())
                } else {
                    format!(
                        "{} is not private to you (mode {:o}): others could reach the host",
                        directory.display(),
                        metadata.permissions().mode() & 0o777
                    )
                },
            }
        }
    }
}

/// This process's uid, as the owner of the files it makes.
fn rustix_free_uid() -> u32 {
    std::fs::metadata("/proc/self")
        .map(|metadata| std::os::unix::fs::MetadataExt::uid(&metadata))
        .unwrap_or(u32::MAX)
}
