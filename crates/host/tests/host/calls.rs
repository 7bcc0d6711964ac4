//! How the tests make and read tool calls, shared by the host's, the
//! server's and the CLI's test binaries: a SubmitPlan call, the pending
//! approval an accepted one returns, a refusal's code, and a result's
//! decision together with the code of a denial, in one value.

use plan_host::{ErrorCode, HostError, PlanApproval, ToolCall, ToolCallDecision, ToolCallResult};

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

/// A SubmitPlan call of `markdown`.
pub(crate) fn submit(id: &str, markdown: &str) -> ToolCall {
    ToolCall {
        call_id: id.into(),
        name: "SubmitPlan".to_owned(),
        input: serde_json::json!({"title": "Split the parser", "markdown": markdown, "question": "Go ahead?"}),
    }
}

/// The pending approval of the one accepted SubmitPlan in `outcomes`.
pub(crate) fn approval_of(outcomes: &[ToolCallResult]) -> PlanApproval {
    assert_eq!(outcomes.len(), 1);
    assert_eq!(verdict(&outcomes[0]), Verdict::Allow);
    outcomes[0]
        .approval
        .clone()
        .expect("an accepted SubmitPlan carries its approval")
}

/// The code of a refusal (an answer fails the test).
pub(crate) fn code<T: std::fmt::Debug>(result: Result<T, HostError>) -> ErrorCode {
    match result {
        Ok(value) => panic!("expected a refusal, got {value:?}"),
        Err(error) => error.code(),
    }
}
