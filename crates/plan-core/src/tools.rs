//! Tool policy for Plan turns and validation of SubmitPlan input.
//!
//! Plan is read-only: a closed allowlist of tool names passes, everything
//! else (Write, Edit, plugin tools, names nobody has heard of) is denied.
//! This module only classifies; the machine decides what a class means in
//! the current turn.

use crate::ErrorCode;
use crate::text::is_plain_line;

/// The name of the plan submission tool.
pub const SUBMIT_PLAN: &str = "SubmitPlan";

/// A tool name as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolClass {
    /// A read-only or planning tool that Plan allows.
    PlanSafe,
    /// The plan submission tool.
    SubmitPlan,
    /// Anything else: Write, Edit, plugin tools, unknown names.
    Other,
}

/// The tools a Plan turn may use besides SubmitPlan. Names match exactly.
pub const PLAN_SAFE_TOOLS: [&str; 7] = [
    "Read",
    "Glob",
    "Grep",
    "BrowserPreview",
    "Bash",
    "EnterPlanMode",
    "new_context",
];

/// Classifies a tool name. Matching is exact and case-sensitive, so
/// `read` or `Read ` are unknown tools and denied in Plan.
pub fn classify(name: &str) -> ToolClass {
    if name == SUBMIT_PLAN {
        ToolClass::SubmitPlan
    } else if PLAN_SAFE_TOOLS.contains(&name) {
        ToolClass::PlanSafe
    } else {
        ToolClass::Other
    }
}

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
/// `title`, `markdown` and `question`, all non-empty, with `markdown` at most
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
    if markdown.len() > markdown_limit_bytes {
        return Err(ErrorCode::InvalidPlanInput);
    }
    Ok(SubmitPlanInput {
        title,
        markdown,
        question,
    })
}
