//! The one tool catalog, and validation of SubmitPlan input.
//!
//! Every rule that depends on what a tool does reads [`tool_kind`]: the Plan
//! allowlist ([`ToolKind::allowed_in_plan`]: read-only tools, Bash in the
//! read-only sandbox, SubmitPlan) and the Agent permission table of
//! `permissions` (which calls need a person's confirmation under which
//! permission mode). A name the catalog does not list is [`ToolKind::Other`]
//! (plugin and MCP tools, names nobody has heard of): denied in Plan,
//! confirmed in Agent unless the mode is `auto`. The catalog names the tools
//! of every agent the project integrates with where their kind is not
//! `Other`: pi's (`new_context`, `BrowserPreview`) and Claude Code's
//! read-only helpers and the tools that would run a program outside the
//! host. This module only classifies; the machine decides what a kind means
//! in the current turn.

use crate::ErrorCode;
use crate::text::is_plain_line;

/// The name of the plan submission tool.
pub const SUBMIT_PLAN: &str = "SubmitPlan";

/// What a tool does, as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolKind {
    /// Reads or plans and changes nothing: Read, Glob, Grep, BrowserPreview,
    /// EnterPlanMode, new_context, and an agent's own helpers that change
    /// nothing in the workspace (Claude Code's ToolSearch, AskUserQuestion,
    /// its todo list and task list).
    ReadOnly,
    /// Changes files: Write, Edit, MultiEdit, NotebookEdit, and Codex's
    /// apply_patch.
    ChangesFiles,
    /// The `Bash` tool, which only the host runs.
    Bash,
    /// The plan submission tool.
    SubmitPlan,
    /// A tool that runs a shell command or a program itself, outside the
    /// host (Claude Code's Monitor, PowerShell, REPL and Eval, Workflow
    /// scripts, remote triggers): denied in every turn with `TOOL_RUNS_OUTSIDE_HOST`, since
    /// only the host runs commands (Bash).
    RunsProgram,
    /// Anything else: plugin and MCP tools, unknown names.
    Other,
}

impl ToolKind {
    /// Whether a Plan turn may use a tool of this kind (Bash only in the
    /// read-only sandbox, SubmitPlan only alone in its batch).
    pub const fn allowed_in_plan(self) -> bool {
        match self {
            ToolKind::ReadOnly | ToolKind::Bash | ToolKind::SubmitPlan => true,
            ToolKind::ChangesFiles | ToolKind::RunsProgram | ToolKind::Other => false,
        }
    }
}

/// The tool catalog: every tool name the checkpoint knows, with its kind.
/// Names match exactly and case-sensitively, so `read` or `Read ` are
/// [`ToolKind::Other`].
pub const TOOL_CATALOG: [(&str, ToolKind); 27] = [
    ("Read", ToolKind::ReadOnly),
    ("Glob", ToolKind::ReadOnly),
    ("Grep", ToolKind::ReadOnly),
    ("BrowserPreview", ToolKind::ReadOnly),
    ("EnterPlanMode", ToolKind::ReadOnly),
    ("new_context", ToolKind::ReadOnly),
    // Claude Code's helpers: finding a deferred tool's schema, asking the
    // person a question, and the session's own todo and task lists.
    ("ToolSearch", ToolKind::ReadOnly),
    ("AskUserQuestion", ToolKind::ReadOnly),
    ("TodoWrite", ToolKind::ReadOnly),
    ("TaskCreate", ToolKind::ReadOnly),
    ("TaskGet", ToolKind::ReadOnly),
    ("TaskList", ToolKind::ReadOnly),
    ("TaskUpdate", ToolKind::ReadOnly),
    ("ListAgents", ToolKind::ReadOnly),
    ("Write", ToolKind::ChangesFiles),
    ("Edit", ToolKind::ChangesFiles),
    ("MultiEdit", ToolKind::ChangesFiles),
    ("NotebookEdit", ToolKind::ChangesFiles),
    // Codex CLI's edit tool.
    ("apply_patch", ToolKind::ChangesFiles),
    (crate::commands::BASH, ToolKind::Bash),
    (SUBMIT_PLAN, ToolKind::SubmitPlan),
    // Claude Code's tools that run a command, a script or a remote session
    // themselves, in its own process or elsewhere, never in the host.
    ("Monitor", ToolKind::RunsProgram),
    ("PowerShell", ToolKind::RunsProgram),
    ("Workflow", ToolKind::RunsProgram),
    ("RemoteTrigger", ToolKind::RunsProgram),
    ("REPL", ToolKind::RunsProgram),
    ("Eval", ToolKind::RunsProgram),
];

/// The kind of a tool name: its catalog entry, or [`ToolKind::Other`].
pub fn tool_kind(name: &str) -> ToolKind {
    TOOL_CATALOG
        .iter()
        .find(|(known, _)| *known == name)
        .map_or(ToolKind::Other, |(_, kind)| *kind)
}

/// The names a Plan turn may call, in catalog order (SubmitPlan included).
pub fn plan_tools() -> impl Iterator<Item = &'static str> {
    TOOL_CATALOG
        .iter()
        .filter(|(_, kind)| kind.allowed_in_plan())
        .map(|(name, _)| *name)
}

/// The most characters (Unicode scalar values) a SubmitPlan title may have:
/// it is one line on the approval card, in a terminal table and in a
/// notification.
pub const SUBMIT_PLAN_TITLE_MAX_CHARS: usize = 200;

/// The most characters (Unicode scalar values) a SubmitPlan question may
/// have: it is read on the card before deciding, beside the plan itself.
pub const SUBMIT_PLAN_QUESTION_MAX_CHARS: usize = 1_000;

/// A validated SubmitPlan input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmitPlanInput {
    /// Non-empty title, kept as a structured field.
    pub title: String,
    /// The Markdown bytes, written unchanged.
    pub markdown: String,
    /// Non-empty question, kept as a structured field.
    pub question: String,
}

/// Validates SubmitPlan input: a JSON object with exactly the string fields
/// `title`, `markdown` and `question`, all non-empty, title and question
/// within [`SUBMIT_PLAN_TITLE_MAX_CHARS`] and [`SUBMIT_PLAN_QUESTION_MAX_CHARS`]
/// characters, with `markdown` at most
/// `markdown_limit_bytes` bytes.
///
/// A title or question made only of white space counts as empty: the
/// approval card would show nothing a person could decide on. A title or
/// question holding a control character (C0 including tab and newline, DEL,
/// C1) or a bidirectional control is refused ([`crate::is_plain_line`]):
/// they are one-line fields a person reads in a terminal. The Markdown is
/// not checked for them; it is kept byte for byte and escaped when shown.
pub fn parse_submit_plan_input(
    input: &serde_json::Value,
    markdown_limit_bytes: usize,
) -> Result<SubmitPlanInput, ErrorCode> {
    let serde_json::Value::Object(fields) = input else {
        return Err(ErrorCode::InvalidPlanInput);
    };
    if fields.len() != 3 {
        return Err(ErrorCode::InvalidPlanInput);
    }
    let text = |key: &str| -> Result<String, ErrorCode> {
        match fields.get(key) {
            Some(serde_json::Value::String(value)) => Ok(value.clone()),
            Some(_) | None => Err(ErrorCode::InvalidPlanInput),
        }
    };
    let title = text("title")?;
    let markdown = text("markdown")?;
    let question = text("question")?;
    if title.trim().is_empty() || question.trim().is_empty() || markdown.is_empty() {
        return Err(ErrorCode::InvalidPlanInput);
    }
    if !is_plain_line(&title) || !is_plain_line(&question) {
        return Err(ErrorCode::InvalidPlanInput);
    }
    if title.chars().count() > SUBMIT_PLAN_TITLE_MAX_CHARS
        || question.chars().count() > SUBMIT_PLAN_QUESTION_MAX_CHARS
    {
        return Err(ErrorCode::InvalidPlanInput);
    }
    if markdown.len() > markdown_limit_bytes {
        return Err(ErrorCode::InvalidPlanInput);
    }
    Ok(SubmitPlanInput {
        title,
        markdown,
        question,
    })
}
