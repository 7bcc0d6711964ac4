//! How the tests compare a tool call's result: its decision together with
//! the code of a denial, in one value.

use plan_host::{ErrorCode, ToolCallDecision, ToolCallResult};

/// A result's decision with its code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Allow,
    Confirm,
    Deny(ErrorCode),
}

/// The verdict of `result` (a denial without a code fails the test).
pub(crate) fn verdict(result: &ToolCallResult) -> Verdict {
    match (result.decision, result.refusal()) {
        (ToolCallDecision::Allow, None) => Verdict::Allow,
        (ToolCallDecision::Confirm, None) => Verdict::Confirm,
        (ToolCallDecision::Deny, Some(code)) => Verdict::Deny(code),
        (decision, code) => panic!("{decision} with the code {code:?}"),
    }
}
