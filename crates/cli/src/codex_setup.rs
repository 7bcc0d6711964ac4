//! Setting Codex CLI up for the checkpoint, checking it and undoing it
//! (`plan-checkpoint codex install`, `doctor`, `uninstall`): the project's
//! hooks (`<project>/.codex/hooks.json`), Codex's own read-only sandbox as
//! the project's default (`<project>/.codex/config.toml`), the project
//! trusted and the hooks' trust (`$CODEX_HOME/config.toml`, as Codex keys
//! it: each hook's content hash), and the exec-policy rule that lets
//! exactly the reference-carrying client out of Codex's sandbox
//! (`$CODEX_HOME/rules/plan-checkpoint.rules`).
//!
//! What is written is said; everything written is marked so that
//! `uninstall` removes exactly it. This module decides nothing about the
//! checkpoint and touches no file but these.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::Digest;

use crate::Failure;
use crate::exit;

/// The hook events the adapter answers, as `hooks.json` names them, as
/// Codex's trust key names them, their matcher and whether they hold a
/// decision (their time limit then outlasts the plan's deadline, and their
/// status line, which Codex shows while a hook runs, says where the person
/// finds what waits for them: a hook cannot say more while it holds).
const EVENTS: [(&str, &str, Option<&str>, bool); 3] = [
    ("PreToolUse", "pre_tool_use", Some("*"), true),
    ("PermissionRequest", "permission_request", Some("*"), false),
    ("Stop", "stop", None, true),
];

/// The status line of a holding hook.
pub(crate) const HOLDING_STATUS: &str =
    "plan-checkpoint: asking the host (anything waiting for you: plan-checkpoint codex pending)";

/// The status line of the hook of `holds`.
fn status_of(holds: bool) -> Option<&'static str> {
    holds.then_some(HOLDING_STATUS)
}

/// The time limit of a hook that holds nothing, in seconds.
const QUICK_HOOK_SECONDS: u64 = 60;

/// How long past the plan's deadline a holding hook may still run.
const HOOK_MARGIN_SECONDS: u64 = 300;

/// Marks the blocks this adapter writes into TOML files.
const BEGIN: &str = "# BEGIN plan-checkpoint codex";
const END: &str = "# END plan-checkpoint codex";

/// The rules file, in `$CODEX_HOME/rules/`.
const RULES_FILE: &str = "plan-checkpoint.rules";

/// Where the setup of one project lives.
pub(crate) struct Setup {
    /// The project's root.
    pub(crate) root: PathBuf,
    /// This binary, as the hooks and the rule name it.
    pub(crate) program: PathBuf,
    /// Codex's home (`$CODEX_HOME`, else `~/.codex`).
    pub(crate) codex_home: PathBuf,
}

impl Setup {
    fn hooks_file(&self) -> PathBuf {
        self.root.join(".codex").join("hooks.json")
    }

    fn project_config(&self) -> PathBuf {
        self.root.join(".codex").join("config.toml")
    }

    fn user_config(&self) -> PathBuf {
        self.codex_home.join("config.toml")
    }

    fn rules_file(&self) -> PathBuf {
        self.codex_home.join("rules").join(RULES_FILE)
    }

    /// The command Codex runs for every hook.
    pub(crate) fn hook_command(&self) -> String {
        format!("{} codex hook", shell_quoted(&self.program))
    }
}

/// Codex's home: `--codex-home`, else `$CODEX_HOME`, else `~/.codex`.
pub(crate) fn codex_home(given: Option<PathBuf>) -> Result<PathBuf, Failure> {
    given
        .or_else(|| std::env::var_os("CODEX_HOME").map(PathBuf::from))
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".codex")))
        .ok_or_else(|| {
            Failure::new(
                exit::USAGE,
                "no CODEX_HOME and no HOME: name it with --codex-home",
            )
        })
}

/// `'<path>'`: a path quoted for `sh`.
pub(crate) fn shell_quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

/// The plan deadline the project's host uses (as `claude-code host` reads
/// it), in seconds.
fn approval_ttl_seconds() -> u64 {
    let ms = std::env::var("PLAN_CHECKPOINT_APPROVAL_TTL_MS")
        .ok()
        .and_then(|value| value.parse::<i64>().ok())
        .unwrap_or(plan_core::Limits::DEFAULT_APPROVAL_TTL_MS);
    u64::try_from(ms / 1000).unwrap_or(0)
}

/// The content hash Codex trusts a command hook by: SHA-256 of the
/// handler's identity (event, matcher, the one command hook with its
/// timeout and status line), as canonical JSON with sorted keys.
pub(crate) fn trust_hash(
    event: &str,
    matcher: Option<&str>,
    command: &str,
    timeout: u64,
    status_message: Option<&str>,
) -> String {
    let mut identity = serde_json::Map::new();
    identity.insert("event_name".to_owned(), json!(event));
    let mut handler = json!({"async": false, "command": command, "timeout": timeout, "type": "command"});
    if let (Some(status), Some(fields)) = (status_message, handler.as_object_mut()) {
        fields.insert("statusMessage".to_owned(), json!(status));
    }
    identity.insert("hooks".to_owned(), json!([handler]));
    if let Some(matcher) = matcher {
        identity.insert("matcher".to_owned(), json!(matcher));
    }
    // serde_json's map keeps keys sorted, as Codex's does.
    let text = Value::Object(identity).to_string();
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(text.as_bytes())))
}

fn failed(path: &Path, error: impl std::fmt::Display) -> Failure {
    Failure::new(exit::FAILURE, format!("{}: {error}", path.display()))
}

fn read_optional(path: &Path) -> Result<Option<String>, Failure> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(failed(path, error)),
    }
}

fn write(path: &Path, text: &str) -> Result<(), Failure> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|error| failed(parent, error))?;
    }
    std::fs::write(path, text).map_err(|error| failed(path, error))
}

/// Whether a hooks.json handler group is one of ours.
fn is_ours(entry: &Value) -> bool {
    entry.to_string().contains(" codex hook")
}

/// The project's hooks.json with ours replacing any earlier ones (another
/// path of the binary included); the trust keys of ours with their hashes.
fn merged_hooks(setup: &Setup, text: Option<&str>) -> Result<(Value, Vec<(String, String)>), Failure> {
    let path = setup.hooks_file();
    let mut document: Value = match text {
        Some(text) => {
            serde_json::from_str(text).map_err(|error| failed(&path, format!("not JSON: {error}")))?
        }
        None => json!({}),
    };
    let hooks = document
        .as_object_mut()
        .ok_or_else(|| failed(&path, "not a JSON object"))?
        .entry("hooks")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| failed(&path, "`hooks` is not an object"))?;
    let command = setup.hook_command();
    let hold = approval_ttl_seconds() + HOOK_MARGIN_SECONDS;
    let mut trust = Vec::new();
    for (event, key_name, matcher, holds) in EVENTS {
        let timeout = if holds { hold } else { QUICK_HOOK_SECONDS };
        let groups = hooks
            .entry(event)
            .or_insert_with(|| json!([]))
            .as_array_mut()
            .ok_or_else(|| failed(&path, format!("`hooks.{event}` is not a list")))?;
        groups.retain(|group| !is_ours(group));
        let mut handler = json!({"type": "command", "command": command, "timeout": timeout});
        if let (Some(status), Some(fields)) = (status_of(holds), handler.as_object_mut()) {
            fields.insert("statusMessage".to_owned(), json!(status));
        }
        let mut group = json!({"hooks": [handler]});
        if let (Some(matcher), Some(object)) = (matcher, group.as_object_mut()) {
            object.insert("matcher".to_owned(), json!(matcher));
        }
        groups.push(group);
        let key = format!("{}:{key_name}:{}:0", path.display(), groups.len() - 1);
        trust.push((
            key,
            trust_hash(key_name, matcher, &command, timeout, status_of(holds)),
        ));
    }
    Ok((document, trust))
}

/// `text` without the managed blocks of `marker`.
fn without_block(text: &str, marker: &str) -> String {
    let mut kept = String::new();
    let mut inside = false;
    for line in text.lines() {
        if line == format!("{BEGIN} {marker}") {
            inside = true;
            // The blank line `install` put before the block goes with it.
            if kept.ends_with("\n\n") {
                kept.pop();
            }
        } else if inside && line == format!("{END} {marker}") {
            inside = false;
        } else if !inside {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// `text` read as TOML, as Codex reads it (a key may be written as a
/// table, a dotted key or an inline table).
fn parsed_toml(path: &Path, text: &str) -> Result<toml::Table, Failure> {
    text.parse::<toml::Table>().map_err(|error| {
        failed(
            path,
            format!("not valid TOML, so nothing was written: {}", error.message()),
        )
    })
}

/// The value at `keys` of a TOML document, however it was written.
fn toml_at<'table>(table: &'table toml::Table, keys: &[&str]) -> Option<&'table toml::Value> {
    let (first, rest) = keys.split_first()?;
    rest.iter()
        .try_fold(table.get(*first)?, |value, key| value.as_table()?.get(*key))
}

/// The project's `trust_level`, where the document names the project.
fn trust_level<'table>(table: &'table toml::Table, root: &str) -> Option<&'table toml::Value> {
    toml_at(table, &["projects", root, "trust_level"])
}

/// Sets the project up: writes the hooks, the project's default sandbox,
/// the trust and the rule, and returns what it wrote, for the person.
pub(crate) fn install(setup: &Setup) -> Result<String, Failure> {
    if !setup.root.is_dir() {
        return Err(Failure::new(
            exit::USAGE,
            format!("{}: no such project directory", setup.root.display()),
        ));
    }
    let hooks_path = setup.hooks_file();
    let (hooks, trust) = merged_hooks(setup, read_optional(&hooks_path)?.as_deref())?;
    let hooks_text = serde_json::to_string_pretty(&hooks).map_err(|error| failed(&hooks_path, error))?;

    // Codex's own sandbox is read-only unless the person or the session
    // says otherwise: a plan-mode call whose hook failed open still
    // cannot write. Root keys come before every table, so the block leads.
    let marker = "project";
    let project_config = setup.project_config();
    let existing = without_block(&read_optional(&project_config)?.unwrap_or_default(), marker);
    let sandbox_set = parsed_toml(&project_config, &existing)?.contains_key("sandbox_mode");
    let project_text = (!sandbox_set)
        .then(|| format!("{BEGIN} {marker}\nsandbox_mode = \"read-only\"\n{END} {marker}\n{existing}"));

    let root = setup.root.display().to_string();
    let user_config = setup.user_config();
    let (user_text, trusted_elsewhere) = trusted_user_config(&user_config, &root, &trust)?;

    // Everything was checked: now it is written.
    write(&hooks_path, &format!("{hooks_text}\n"))?;
    let sandbox_note = match &project_text {
        Some(text) => {
            write(&project_config, text)?;
            "sandbox_mode = \"read-only\": Codex's own sandbox stays read-only (commands run through the host)"
        }
        None => {
            "kept the sandbox_mode it sets (make it \"read-only\" so that plan mode cannot write when a hook fails)"
        }
    };
    write(&user_config, &user_text)?;

    let rules = setup.rules_file();
    write(
        &rules,
        &format!(
            "# Written by `plan-checkpoint codex install`; `plan-checkpoint codex uninstall` removes it.\n\
             # Lets exactly the client that runs a command the host registered out of Codex's sandbox:\n\
             # it carries a reference, never a command, and the host refuses it outside the call and\n\
             # turn it was registered for.\n\
             prefix_rule(pattern=[{}, \"codex\", \"run\"], decision=\"allow\")\n",
            Value::String(setup.program.display().to_string())
        ),
    )?;

    let project_note = if trusted_elsewhere {
        "the project's own entry was already there (kept as it is: it must say trust_level = \"trusted\")"
    } else {
        "the project trusted (Codex loads a project's hooks only then)"
    };
    Ok(format!(
        "Wrote {hooks}:\n\
         - PreToolUse (every tool, {hold} s, its status line naming `plan-checkpoint codex pending`):\n  \
           {command}\n  \
           plan mode: shell commands run in the host's read-only sandbox (the command is registered\n  \
           with the host and run by reference), apply_patch and MCP calls follow the host's table;\n  \
           after an approval: the host's permission table, calls to confirm held until you decide.\n\
         - PermissionRequest (every tool): the same command; Codex's own prompt for a call the host\n  \
           decided gets the host's answer.\n\
         - Stop ({hold} s, the same status line): the turn's plan is submitted and held until you\n  \
           decide (card or\n  \
           `plan-checkpoint codex approve`); rejected or expired, the turn goes on with the host's\n  \
           sentence.\n\
         Wrote {project_config}: {sandbox_note}.\n\
         Wrote {user_config}: {project_note}, and the three hooks trusted by their content hash\n  \
         (moving the binary or changing a hook untrusts them: run install again; `doctor` checks).\n\
         Wrote {rules}: the exec-policy rule that lets `plan-checkpoint codex run` (and nothing else)\n  \
         out of Codex's sandbox to reach the host.\n",
        hooks = hooks_path.display(),
        hold = approval_ttl_seconds() + HOOK_MARGIN_SECONDS,
        command = setup.hook_command(),
        project_config = project_config.display(),
        user_config = user_config.display(),
        rules = rules.display(),
    ))
}

/// `$CODEX_HOME/config.toml` with this project's block: the project
/// trusted unless the person's part names it already (as a table, a dotted
/// key or an inline table: kept as it is), and each hook's trust unless
/// that part holds the same hash already. The text is checked as TOML
/// before anything is written: a document the block cannot extend (an
/// inline `projects` or `hooks` table, another hash for one of these hooks)
/// is refused, naming what to change. Returns the text and whether the
/// project's entry was the person's.
fn trusted_user_config(
    path: &Path,
    root: &str,
    trust: &[(String, String)],
) -> Result<(String, bool), Failure> {
    let existing = without_block(&read_optional(path)?.unwrap_or_default(), root);
    let theirs = parsed_toml(path, &existing)?;
    let trusted_elsewhere = toml_at(&theirs, &["projects", root]).is_some();
    let mut block = format!("{BEGIN} {root}\n");
    if !trusted_elsewhere {
        block.push_str(&format!(
            "[projects.{}]\ntrust_level = \"trusted\"\n",
            toml_string(root)
        ));
    }
    for (key, hash) in trust {
        match toml_at(&theirs, &["hooks", "state", key, "trusted_hash"]).and_then(toml::Value::as_str) {
            Some(held) if held == hash => {}
            Some(_) => {
                return Err(failed(
                    path,
                    format!(
                        "it trusts the hook {key} by another hash outside plan-checkpoint's block; remove that entry (hooks.state) and install again"
                    ),
                ));
            }
            None => block.push_str(&format!(
                "[hooks.state.{}]\ntrusted_hash = {}\n",
                toml_string(key),
                toml_string(hash)
            )),
        }
    }
    block.push_str(&format!("{END} {root}\n"));
    let separator = if existing.is_empty() || existing.ends_with("\n\n") {
        ""
    } else {
        "\n"
    };
    let text = format!("{existing}{separator}{block}");
    let extended = text.parse::<toml::Table>().map_err(|error| {
        failed(
            path,
            format!(
                "plan-checkpoint's tables cannot be added to it ({}): a `projects` or `hooks` written as an inline table cannot be extended; write it as tables, then install again",
                error.message()
            ),
        )
    })?;
    let holds = |keys: &[&str], expected: &str| {
        toml_at(&extended, keys).and_then(toml::Value::as_str) == Some(expected)
    };
    let complete = trust
        .iter()
        .all(|(key, hash)| holds(&["hooks", "state", key, "trusted_hash"], hash))
        && (trusted_elsewhere || holds(&["projects", root, "trust_level"], "trusted"));
    if !complete {
        return Err(failed(
            path,
            "plan-checkpoint's trust entries would not read back as written; nothing was written",
        ));
    }
    Ok((text, trusted_elsewhere))
}

/// Removes exactly what `install` wrote; returns what it removed.
pub(crate) fn uninstall(setup: &Setup) -> Result<String, Failure> {
    let mut removed = Vec::new();
    let hooks_path = setup.hooks_file();
    if let Some(text) = read_optional(&hooks_path)? {
        let mut document: Value =
            serde_json::from_str(&text).map_err(|error| failed(&hooks_path, format!("not JSON: {error}")))?;
        if let Some(hooks) = document.get_mut("hooks").and_then(Value::as_object_mut) {
            for groups in hooks.values_mut() {
                if let Some(groups) = groups.as_array_mut() {
                    groups.retain(|group| !is_ours(group));
                }
            }
            hooks.retain(|_, groups| groups.as_array().is_none_or(|groups| !groups.is_empty()));
        }
        let empty = document.as_object().is_some_and(|object| {
            object.len() == 1 && object.get("hooks").is_some_and(|hooks| hooks == &json!({}))
        });
        if empty {
            std::fs::remove_file(&hooks_path).map_err(|error| failed(&hooks_path, error))?;
        } else {
            let text = serde_json::to_string_pretty(&document).map_err(|error| failed(&hooks_path, error))?;
            write(&hooks_path, &format!("{text}\n"))?;
        }
        removed.push(format!("the hooks in {}", hooks_path.display()));
    }
    for (path, marker) in [
        (setup.project_config(), "project".to_owned()),
        (setup.user_config(), setup.root.display().to_string()),
    ] {
        if let Some(text) = read_optional(&path)? {
            let kept = without_block(&text, &marker);
            if kept != text {
                if kept.trim().is_empty() {
                    std::fs::remove_file(&path).map_err(|error| failed(&path, error))?;
                } else {
                    write(&path, &kept)?;
                }
                removed.push(format!("the block in {}", path.display()));
            }
        }
    }
    let rules = setup.rules_file();
    if rules.exists() {
        std::fs::remove_file(&rules).map_err(|error| failed(&rules, error))?;
        removed.push(format!("{}", rules.display()));
    }
    Ok(if removed.is_empty() {
        "nothing of plan-checkpoint was installed for this project\n".to_owned()
    } else {
        format!("Removed {}.\n", removed.join(", "))
    })
}

/// One finding of `doctor`.
pub(crate) struct Finding {
    /// Whether it holds.
    pub(crate) ok: bool,
    /// What was looked at and what was found.
    pub(crate) text: String,
}

fn finding(ok: bool, text: impl Into<String>) -> Finding {
    Finding {
        ok,
        text: text.into(),
    }
}

/// Checks the files `install` writes against this binary: present, naming
/// it, and trusted by the hashes Codex would compute for them now.
pub(crate) fn check(setup: &Setup) -> Result<Vec<Finding>, Failure> {
    let mut findings = vec![finding(
        setup.program.is_file(),
        format!("the binary {}", setup.program.display()),
    )];
    let hooks_path = setup.hooks_file();
    let hooks: Value = match read_optional(&hooks_path)? {
        Some(text) => serde_json::from_str(&text).unwrap_or(Value::Null),
        None => Value::Null,
    };
    let user_text = read_optional(&setup.user_config())?.unwrap_or_default();
    let user_config = match parsed_toml(&setup.user_config(), &user_text) {
        Ok(table) => table,
        Err(failure) => {
            findings.push(finding(false, failure.message));
            toml::Table::new()
        }
    };
    for (event, key_name, matcher, _) in EVENTS {
        let groups = hooks
            .pointer(&format!("/hooks/{event}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let Some((index, group)) = groups.iter().enumerate().find(|(_, group)| is_ours(group)) else {
            findings.push(finding(
                false,
                format!(
                    "no {event} hook of plan-checkpoint in {}: run install",
                    hooks_path.display()
                ),
            ));
            continue;
        };
        let handler = group.pointer("/hooks/0").cloned().unwrap_or(Value::Null);
        let command = handler.get("command").and_then(Value::as_str).unwrap_or_default();
        let timeout = handler.get("timeout").and_then(Value::as_u64).unwrap_or(600);
        let status = handler.get("statusMessage").and_then(Value::as_str);
        if command != setup.hook_command() {
            findings.push(finding(
                false,
                format!(
                    "the {event} hook runs `{command}`, not this binary: it moved (Codex then runs no hook of it and plan mode has only Codex's own sandbox); run install again"
                ),
            ));
            continue;
        }
        let key = format!("{}:{key_name}:{index}:0", hooks_path.display());
        let hash = trust_hash(key_name, matcher, command, timeout, status);
        let trusted = toml_at(&user_config, &["hooks", "state", &key, "trusted_hash"])
            .and_then(toml::Value::as_str)
            == Some(hash.as_str());
        findings.push(finding(
            trusted,
            if trusted {
                format!("the {event} hook runs this binary and Codex trusts it")
            } else {
                format!(
                    "the {event} hook is not trusted by its current hash (Codex silently skips an untrusted hook): run install again"
                )
            },
        ));
    }
    let root = setup.root.display().to_string();
    let trusted_project = trust_level(&user_config, &root).and_then(toml::Value::as_str) == Some("trusted");
    findings.push(finding(
        trusted_project,
        format!(
            "the project is trusted by Codex (projects.{}.trust_level = \"trusted\" in {})",
            toml_string(&root),
            setup.user_config().display()
        ),
    ));
    let rule = read_optional(&setup.rules_file())?.unwrap_or_default();
    findings.push(finding(
        rule.contains(&Value::String(setup.program.display().to_string()).to_string()),
        format!(
            "the exec-policy rule for this binary in {}",
            setup.rules_file().display()
        ),
    ));
    let sandbox = parsed_toml(
        &setup.project_config(),
        &read_optional(&setup.project_config())?.unwrap_or_default(),
    )
    .is_ok_and(|table| table.get("sandbox_mode").and_then(toml::Value::as_str) == Some("read-only"));
    findings.push(finding(
        sandbox,
        format!(
            "Codex's own sandbox is read-only by default ({})",
            setup.project_config().display()
        ),
    ));
    Ok(findings)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash Codex 0.171.0 itself reported (`hooks/list`'s
    /// `currentHash`) for a `PreToolUse` hook `/tmp/cprobe/hook.sh` with
    /// matcher `*` and a 30 s limit, and for a `Stop` hook of the same
    /// command with Codex's default limit.
    #[test]
    fn the_trust_hash_is_the_one_codex_computes() {
        assert_eq!(
            trust_hash("pre_tool_use", Some("*"), "/tmp/cprobe/hook.sh", 30, None),
            "sha256:2d646155a5e98ac8626df0c28a488b8afd5b373e3852ca9a82c15769ab302fff"
        );
        assert_eq!(
            trust_hash("stop", None, "/tmp/cprobe/hook.sh", 600, None),
            "sha256:ca73e8be194e7f7736af5aaa1b2a4ec8d49c3fab1aee53f4f17b631abed675a3"
        );
        // With a status line (`statusMessage` "probe status"), as Codex
        // 0.171.0's `hooks/list` reported it for that handler.
        assert_eq!(
            trust_hash(
                "pre_tool_use",
                Some("*"),
                "/tmp/codex-e2e-srbrY5/hook.sh",
                30,
                Some("probe status")
            ),
            "sha256:a36d1003661e7e3a107d1297fb5586f906d6a033e0a3cbbf8279de298382dfe4"
        );
    }

    #[test]
    fn a_managed_block_is_removed_alone() {
        let text = "a = 1\n# BEGIN plan-checkpoint codex /p\nb = 2\n# END plan-checkpoint codex /p\nc = 3\n";
        assert_eq!(without_block(text, "/p"), "a = 1\nc = 3\n");
        assert_eq!(without_block(text, "/other"), text);
    }
}
