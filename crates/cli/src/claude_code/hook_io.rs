//! Claude Code's hook protocol as the pinned version speaks it, as types:
//! what a hook reads on stdin and each answer it may print. The contract
//! behind each shape is pinned by the package's contract test
//! (`integrations/claude-code/test/contract.test.ts`). This module maps and
//! decides nothing: the flows choose an answer, this writes it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One hook's input (the fields the adapter reads; Claude Code sends more).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct HookInput {
    /// `PreToolUse`, `PermissionRequest`, `PostToolUse`,
    /// `PreSkillShellCommand`, `Stop`, `SessionEnd`, ...
    pub(crate) hook_event_name: String,
    /// Claude Code's session.
    pub(crate) session_id: String,
    /// Claude Code's working directory (where its Bash runs).
    pub(crate) cwd: String,
    /// `plan`, `default`, `acceptEdits`, ...
    #[serde(default)]
    pub(crate) permission_mode: Option<String>,
    /// The tool of a tool event (for `PreSkillShellCommand`, the shell).
    #[serde(default)]
    pub(crate) tool_name: Option<String>,
    /// The call's input.
    #[serde(default)]
    pub(crate) tool_input: Option<Value>,
    /// The call's id.
    #[serde(default)]
    pub(crate) tool_use_id: Option<String>,
}

/// A `PreToolUse` decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Decision {
    /// The call runs without Claude Code asking.
    Allow,
    /// Claude Code asks the person in its dialog.
    Ask,
    /// The call does not run; the reason is what the model reads.
    Deny,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Answer<T> {
    hook_specific_output: T,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PreToolUseAnswer {
    hook_event_name: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    permission_decision: Option<Decision>,
    #[serde(skip_serializing_if = "Option::is_none")]
    permission_decision_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    updated_input: Option<Value>,
}

fn to_value<T: Serialize>(answer: &Answer<T>) -> Value {
    serde_json::to_value(answer).unwrap_or(Value::Null)
}

/// A `PreToolUse` answer: a decision with the reason the model reads, or
/// none (Claude Code's own check follows), with the input rewritten or not.
pub(crate) fn pre_tool_use(
    decision: Option<Decision>,
    reason: Option<&str>,
    updated: Option<Value>,
) -> Value {
    to_value(&Answer {
        hook_specific_output: PreToolUseAnswer {
            hook_event_name: "PreToolUse",
            permission_decision: decision,
            permission_decision_reason: reason.map(str::to_owned),
            updated_input: updated,
        },
    })
}

/// A `PreToolUse` deny with the reason the model reads.
pub(crate) fn deny(reason: &str) -> Value {
    pre_tool_use(Some(Decision::Deny), Some(reason), None)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PermissionAnswer {
    hook_event_name: &'static str,
    decision: PermissionDecision,
}

#[derive(Serialize)]
#[serde(tag = "behavior", rename_all = "camelCase")]
enum PermissionDecision {
    Allow {
        #[serde(rename = "updatedInput", skip_serializing_if = "Option::is_none")]
        updated_input: Option<Value>,
        #[serde(rename = "updatedPermissions", skip_serializing_if = "Option::is_none")]
        updated_permissions: Option<Vec<SetMode>>,
    },
    Deny {
        message: String,
    },
}

/// A `setMode` permission update, for the session.
#[derive(Serialize)]
struct SetMode {
    #[serde(rename = "type")]
    kind: &'static str,
    mode: &'static str,
    destination: &'static str,
}

/// A `PermissionRequest` allow, with the input to run (`None`: as asked)
/// and, when given, the mode Claude Code continues in.
pub(crate) fn permission_allow(updated_input: Option<Value>, mode: Option<&'static str>) -> Value {
    to_value(&Answer {
        hook_specific_output: PermissionAnswer {
            hook_event_name: "PermissionRequest",
            decision: PermissionDecision::Allow {
                updated_input,
                updated_permissions: mode.map(|mode| {
                    vec![SetMode {
                        kind: "setMode",
                        mode,
                        destination: "session",
                    }]
                }),
            },
        },
    })
}

/// A `PermissionRequest` deny; the message reaches the model word for word.
pub(crate) fn permission_deny(message: String) -> Value {
    to_value(&Answer {
        hook_specific_output: PermissionAnswer {
            hook_event_name: "PermissionRequest",
            decision: PermissionDecision::Deny { message },
        },
    })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SkillShellAnswer {
    hook_event_name: &'static str,
    permission_decision: Decision,
    permission_decision_reason: String,
}

/// A `PreSkillShellCommand` deny: the skill's command does not run (the
/// model reads the reason in its place).
pub(crate) fn skill_shell_deny(reason: String) -> Value {
    to_value(&Answer {
        hook_specific_output: SkillShellAnswer {
            hook_event_name: "PreSkillShellCommand",
            permission_decision: Decision::Deny,
            permission_decision_reason: reason,
        },
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_answers_have_the_shapes_the_pinned_claude_code_reads() {
        assert_eq!(
            pre_tool_use(Some(Decision::Allow), Some("r"), Some(json!({"command": "c"}))),
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                "permissionDecisionReason": "r", "updatedInput": {"command": "c"}}})
        );
        assert_eq!(
            pre_tool_use(None, None, Some(json!({"plan": "p"}))),
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {"plan": "p"}}})
        );
        assert_eq!(
            permission_allow(Some(json!({"plan": "p"})), Some("acceptEdits")),
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow",
                "updatedInput": {"plan": "p"},
                "updatedPermissions": [{"type": "setMode", "mode": "acceptEdits", "destination": "session"}]}}})
        );
        assert_eq!(
            permission_allow(None, None),
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}})
        );
        assert_eq!(
            permission_deny("m".to_owned()),
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": "m"}}})
        );
        assert_eq!(
            skill_shell_deny("r".to_owned()),
            json!({"hookSpecificOutput": {"hookEventName": "PreSkillShellCommand", "permissionDecision": "deny",
                "permissionDecisionReason": "r"}})
        );
    }
}
