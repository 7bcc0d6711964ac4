//! Every tool of the pinned Claude Code, and how its hooks carry each call
//! to the host: the one table the adapter reads, taken from the pinned
//! version's tool list (the input schemas of its `sdk-tools.d.ts` and the
//! tools a session offers, kept in
//! `integrations/claude-code/test/fixtures/claude-code-tools.json`, which the
//! package's contract test compares with the installed Claude Code). A test
//! here fails when that list has a tool this table does not.
//!
//! The table decides nothing the host decides: what a tool is allowed to
//! do is the host's catalog and permission table (plan-core's
//! `tool_kind`), under the tool's own name. It says only what the adapter
//! must know of Claude Code to carry a call: which tool is its shell (run
//! by the host instead), which is the plan exit, and which calls Claude
//! Code guards itself beyond its permission mode (creating a worktree,
//! proposing skills, a skill whose frontmatter holds hooks), so that a
//! host's `allow` never skips that guard. A tool not in the table is asked
//! or denied, never plainly allowed.

/// How the hooks carry a call of one Claude Code tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Carry {
    /// Claude Code's shell: every call is run by the host (rewritten into
    /// the `bash` client), in the read-only sandbox in plan mode and the
    /// workspace-write one after an approval.
    HostShell,
    /// The plan exit: a SubmitPlan, decided by a person.
    PlanExit,
    /// Decided by the host under its own name; its answer stands (`allow`,
    /// a person's confirmation in Claude Code's dialog, or a deny).
    Host,
    /// Decided by the host under its own name, but Claude Code also guards
    /// the call itself (a dialog of its own, whatever the permission mode):
    /// a host's `allow` is no answer, so that guard still runs.
    HostThenClaudeCode,
    /// A skill: decided by the host, and refused when its definition
    /// declares hooks (Claude Code would run them in its own shell for the
    /// rest of the session); Claude Code's own guard stays as for
    /// [`Carry::HostThenClaudeCode`].
    Skill,
}

/// One tool of the pinned Claude Code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClaudeCodeTool {
    /// The name hooks see in `tool_name`.
    pub(crate) name: &'static str,
    /// The tool's input schema in the pinned package's `sdk-tools.d.ts`
    /// (`ToolInputSchemas`), when it has one there.
    pub(crate) schema: Option<&'static str>,
    /// How its calls reach the host.
    pub(crate) carry: Carry,
}

const fn tool(name: &'static str, schema: Option<&'static str>, carry: Carry) -> ClaudeCodeTool {
    ClaudeCodeTool { name, schema, carry }
}

/// The Claude Code version the table is taken from.
pub(crate) const PINNED_VERSION: &str = "2.1.332";

/// The prefix of every MCP tool's name (`mcp__<server>__<tool>`), whose
/// input schema is `McpInput`: plugin tools for the host's table.
pub(crate) const MCP_PREFIX: &str = "mcp__";

/// Every tool of the pinned Claude Code, in the order of its
/// `ToolInputSchemas`, then those without a schema there.
pub(crate) const CLAUDE_CODE_TOOLS: [ClaudeCodeTool; 52] = [
    tool("Agent", Some("AgentInput"), Carry::Host),
    // The Agent tool's older name, which a session's tool list still shows.
    tool("Task", None, Carry::Host),
    tool("Bash", Some("BashInput"), Carry::HostShell),
    tool("ExitPlanMode", Some("ExitPlanModeInput"), Carry::PlanExit),
    tool("Edit", Some("FileEditInput"), Carry::Host),
    tool("Read", Some("FileReadInput"), Carry::Host),
    tool("Write", Some("FileWriteInput"), Carry::Host),
    tool("Glob", Some("GlobInput"), Carry::Host),
    tool("Grep", Some("GrepInput"), Carry::Host),
    tool("TaskStop", Some("TaskStopInput"), Carry::Host),
    tool("ListMcpResourcesTool", Some("ListMcpResourcesInput"), Carry::Host),
    tool("RefreshMcpTools", Some("RefreshMcpToolsInput"), Carry::Host),
    tool("NotebookEdit", Some("NotebookEditInput"), Carry::Host),
    tool(
        "ReadMcpResourceDirTool",
        Some("ReadMcpResourceDirInput"),
        Carry::Host,
    ),
    tool("ReadMcpResourceTool", Some("ReadMcpResourceInput"), Carry::Host),
    tool("ReportFindings", Some("ReportFindingsInput"), Carry::Host),
    tool("TodoWrite", Some("TodoWriteInput"), Carry::Host),
    tool("WebFetch", Some("WebFetchInput"), Carry::Host),
    tool("WebSearch", Some("WebSearchInput"), Carry::Host),
    // A question is the person's to answer, in Claude Code's own dialog.
    tool(
        "AskUserQuestion",
        Some("AskUserQuestionInput"),
        Carry::HostThenClaudeCode,
    ),
    tool("SendFeedback", Some("SendFeedbackInput"), Carry::Host),
    tool("ClaudeDesign", Some("ClaudeDesignInput"), Carry::Host),
    tool("Projects", Some("ProjectsInput"), Carry::Host),
    tool("EnterPlanMode", Some("EnterPlanModeInput"), Carry::Host),
    tool("TaskCreate", Some("TaskCreateInput"), Carry::Host),
    tool("TaskGet", Some("TaskGetInput"), Carry::Host),
    tool("TaskUpdate", Some("TaskUpdateInput"), Carry::Host),
    tool("TaskList", Some("TaskListInput"), Carry::Host),
    tool("Workflow", Some("WorkflowInput"), Carry::Host),
    // Scheduled prompts run later without the person; durable ones are
    // written to `.claude/`: Claude Code's own dialog guards them.
    tool("CronCreate", Some("CronCreateInput"), Carry::HostThenClaudeCode),
    tool("CronDelete", Some("CronDeleteInput"), Carry::Host),
    tool("CronList", Some("CronListInput"), Carry::Host),
    tool(
        "ScheduleWakeup",
        Some("ScheduleWakeupInput"),
        Carry::HostThenClaudeCode,
    ),
    tool("RemoteTrigger", Some("RemoteTriggerInput"), Carry::Host),
    tool(
        "ShowOnboardingRolePicker",
        Some("ShowOnboardingRolePickerInput"),
        Carry::Host,
    ),
    tool("OfferChromeSetup", Some("OfferChromeSetupInput"), Carry::Host),
    tool("ReadNotifications", Some("ReadNotificationsInput"), Carry::Host),
    tool("Monitor", Some("MonitorInput"), Carry::Host),
    // Writes skills into `.claude/skills/` once a person agrees in its dialog.
    tool(
        "ProposeSkills",
        Some("ProposeSkillsInput"),
        Carry::HostThenClaudeCode,
    ),
    tool("ProposeGoal", Some("ProposeGoalInput"), Carry::HostThenClaudeCode),
    tool("Artifact", Some("ArtifactInput"), Carry::Host),
    tool("PushNotification", Some("PushNotificationInput"), Carry::Host),
    // A git worktree under `.claude/worktrees/`: Claude Code's dialog guards it.
    tool(
        "EnterWorktree",
        Some("EnterWorktreeInput"),
        Carry::HostThenClaudeCode,
    ),
    tool(
        "ExitWorktree",
        Some("ExitWorktreeInput"),
        Carry::HostThenClaudeCode,
    ),
    tool("Skill", None, Carry::Skill),
    tool("ToolSearch", None, Carry::Host),
    tool("ListAgents", None, Carry::Host),
    tool("SendMessage", None, Carry::Host),
    tool("DeferredToolPlaceholder", None, Carry::Host),
    tool("PowerShell", None, Carry::Host),
    tool("REPL", None, Carry::Host),
    tool("Eval", None, Carry::Host),
];

/// How a call of `name` is carried: its row's way, [`Carry::Host`] for an
/// MCP tool, `None` for a tool the table does not know.
pub(crate) fn carry_of(name: &str) -> Option<Carry> {
    if name.starts_with(MCP_PREFIX) {
        return Some(Carry::Host);
    }
    CLAUDE_CODE_TOOLS
        .iter()
        .find(|row| row.name == name)
        .map(|row| row.carry)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use plan_core::{ToolKind, tool_kind};
    use serde_json::Value;

    use super::*;

    /// The schema of the MCP tools (`mcp__*`), which carry as [`Carry::Host`].
    const MCP_SCHEMA: &str = "McpInput";

    /// The pinned Claude Code's tool list, as the package's contract test
    /// recorded it from the installed version.
    fn pinned_list() -> Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../integrations/claude-code/test/fixtures/claude-code-tools.json"
        );
        let text = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{path}: {error}"));
        serde_json::from_str(&text).unwrap_or_else(|error| panic!("{path}: {error}"))
    }

    fn names(list: &Value, key: &str) -> BTreeSet<String> {
        list[key]
            .as_array()
            .unwrap_or_else(|| panic!("the pinned list has no `{key}`"))
            .iter()
            .map(|name| name.as_str().unwrap_or_default().to_owned())
            .collect()
    }

    #[test]
    fn the_table_has_every_tool_of_the_pinned_claude_code_and_no_other() {
        let list = pinned_list();
        assert_eq!(
            list["version"], PINNED_VERSION,
            "the table is taken from another version"
        );
        let schemas: BTreeSet<String> = CLAUDE_CODE_TOOLS
            .iter()
            .filter_map(|row| row.schema.map(str::to_owned))
            .chain([MCP_SCHEMA.to_owned()])
            .collect();
        assert_eq!(
            schemas,
            names(&list, "schemas"),
            "sdk-tools.d.ts's ToolInputSchemas changed: add (or remove) the tool's row"
        );
        let offered = names(&list, "offered");
        for name in &offered {
            assert!(
                carry_of(name).is_some(),
                "Claude Code offers {name}, which the table lacks"
            );
        }
        // Every row is a tool of the pinned version: one it offers in the
        // recorded sessions or one its schemas name; the rest are the tools
        // it enables only elsewhere (another platform, a setting), each named.
        let elsewhere = ["PowerShell", "REPL", "Eval"];
        for row in CLAUDE_CODE_TOOLS {
            assert!(
                offered.contains(row.name) || row.schema.is_some() || elsewhere.contains(&row.name),
                "{} is in no list of the pinned version",
                row.name
            );
        }
    }

    #[test]
    fn what_runs_a_program_is_the_hosts_or_refused_and_what_only_reads_is_a_plan_tool() {
        // Only the shell is run by the host; every other tool that would run
        // a command, a script or a remote session is one the host refuses.
        for name in [
            "Monitor",
            "PowerShell",
            "REPL",
            "Eval",
            "Workflow",
            "RemoteTrigger",
        ] {
            assert_eq!(tool_kind(name), ToolKind::RunsProgram, "{name}");
            assert_eq!(carry_of(name), Some(Carry::Host), "{name}");
        }
        assert_eq!(carry_of("Bash"), Some(Carry::HostShell));
        for name in [
            "Read",
            "Glob",
            "Grep",
            "ToolSearch",
            "AskUserQuestion",
            "TodoWrite",
            "TaskCreate",
            "TaskGet",
            "TaskList",
            "TaskUpdate",
            "ListAgents",
            "EnterPlanMode",
        ] {
            assert_eq!(tool_kind(name), ToolKind::ReadOnly, "{name}");
        }
        for name in ["Write", "Edit", "NotebookEdit"] {
            assert_eq!(tool_kind(name), ToolKind::ChangesFiles, "{name}");
        }
        // Each row is one name.
        let unique: BTreeSet<&str> = CLAUDE_CODE_TOOLS.iter().map(|row| row.name).collect();
        assert_eq!(unique.len(), CLAUDE_CODE_TOOLS.len());
        assert_eq!(carry_of("mcp__github__create_issue"), Some(Carry::Host));
        assert_eq!(carry_of("SomethingNew"), None);
    }
}
