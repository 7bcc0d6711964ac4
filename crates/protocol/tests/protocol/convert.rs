//! Conversions between plan-core values and wire values.

use plan_core::{ErrorCode, ExecutionState};
use plan_protocol as wire;

use crate::fixtures::*;

#[test]
fn wire_enums_match_plan_core_strings_both_ways() {
    fn check<W, C>(
        wire_all: &[W],
        core_all: &[C],
        wire_str: fn(W) -> &'static str,
        core_str: fn(C) -> &'static str,
    ) where
        W: Copy + PartialEq + std::fmt::Debug + From<C> + serde::Serialize,
        C: Copy + PartialEq + std::fmt::Debug + From<W>,
    {
        assert_eq!(wire_all.len(), core_all.len());
        for (&wire_value, &core_value) in wire_all.iter().zip(core_all) {
            assert_eq!(C::from(wire_value), core_value);
            assert_eq!(W::from(core_value), wire_value);
            assert_eq!(wire_str(wire_value), core_str(core_value));
            assert_eq!(
                serde_json::to_value(wire_value).unwrap(),
                serde_json::json!(core_str(core_value))
            );
        }
    }
    check(
        wire::Mode::ALL,
        plan_core::Mode::ALL,
        wire::Mode::as_str,
        plan_core::Mode::as_str,
    );
    check(
        wire::PermissionMode::ALL,
        plan_core::PermissionMode::ALL,
        wire::PermissionMode::as_str,
        plan_core::PermissionMode::as_str,
    );
    check(
        wire::Origin::ALL,
        plan_core::Origin::ALL,
        wire::Origin::as_str,
        plan_core::Origin::as_str,
    );
    check(
        wire::TurnKind::ALL,
        plan_core::TurnKind::ALL,
        wire::TurnKind::as_str,
        plan_core::TurnKind::as_str,
    );
    check(
        wire::ApprovalStatus::ALL,
        plan_core::ApprovalStatus::ALL,
        wire::ApprovalStatus::as_str,
        plan_core::ApprovalStatus::as_str,
    );
    check(
        wire::ExecutionState::ALL,
        plan_core::ExecutionState::ALL,
        wire::ExecutionState::as_str,
        plan_core::ExecutionState::as_str,
    );
}

#[test]
fn canonical_codes_travel_as_their_strings() {
    for code in ErrorCode::ALL {
        let value = serde_json::to_value(wire::CanonicalCode(code)).unwrap();
        assert_eq!(value, serde_json::json!(code.as_str()));
        let back: wire::CanonicalCode = serde_json::from_value(value).unwrap();
        assert_eq!(ErrorCode::from(back), code);
    }
    assert!(
        serde_json::from_value::<wire::CanonicalCode>(serde_json::json!("plan_approval_timeout")).is_err()
    );
}

#[test]
fn plan_approvals_travel_as_plan_core_declares_them() {
    for approval in [
        pending_approval(),
        approved_approval(),
        rejected_approval(),
        expired_approval(),
        migrated_interrupted_approval(),
        with_execution(ExecutionState::Completed),
    ] {
        let value = serde_json::to_value(&approval).unwrap();
        assert_eq!(value["id"], serde_json::json!(approval.id.as_str()));
        assert_eq!(
            value["errorCode"],
            serde_json::json!(approval.error_code.map(ErrorCode::as_str))
        );
        assert_eq!(
            serde_json::from_value::<wire::PlanApproval>(value).unwrap(),
            approval
        );
    }
}

#[test]
fn sessions_show_the_live_view_of_the_state() {
    let idle = wire::Session::from(&idle_plan_state());
    assert_eq!(idle.session_id, "ses_01");
    assert_eq!(idle.mode, wire::Mode::Plan);
    assert_eq!(idle.active_turn, None);
    assert_eq!(idle.pending_approval_id, None);
    assert_eq!(idle.active_execution_id, None);

    let pending = wire::Session::from(&pending_state());
    assert_eq!(pending.pending_approval_id.as_deref(), Some("apr_01"));
    assert_eq!(
        pending.active_turn,
        Some(wire::ActiveTurn {
            turn_id: "turn_01".into(),
            mode: wire::Mode::Plan,
            origin: wire::Origin::Interactive,
            kind: wire::TurnKind::Prompt,
        })
    );
    assert_eq!(pending.active_execution_id, None);

    let executing = wire::Session::from(&executing_state());
    assert_eq!(executing.mode, wire::Mode::Agent);
    assert_eq!(executing.permission_mode, wire::PermissionMode::AcceptEdits);
    assert_eq!(executing.active_execution_id.as_deref(), Some("exe_01"));
    assert_eq!(executing.pending_approval_id, None);
    assert_eq!(
        executing.active_turn.as_ref().map(|turn| turn.kind),
        Some(wire::TurnKind::Execution)
    );

    assert_eq!(plan_core::Session::from(&executing), executing_state().session);
}

#[test]
fn tool_call_results_are_allow_deny_or_submitted() {
    assert_eq!(
        wire::ToolCallResult::allow("c").decision,
        wire::ToolCallDecision::Allow
    );
    let denied = wire::ToolCallResult::deny("c", ErrorCode::ToolDeniedInPlan);
    assert_eq!(denied.decision, wire::ToolCallDecision::Deny);
    assert_eq!(
        denied.error,
        Some(wire::ToolCallError {
            code: ErrorCode::ToolDeniedInPlan,
            message: ErrorCode::ToolDeniedInPlan.message(),
        })
    );
    let approval = pending_approval();
    let submitted = wire::ToolCallResult::submitted("c", approval.clone());
    assert_eq!(submitted.decision, wire::ToolCallDecision::Allow);
    assert_eq!(submitted.error, None);
    assert_eq!(submitted.approval, Some(approval));
}

#[test]
fn verify_reports_and_diffs_convert_with_the_core_rule_for_ok() {
    let report = plan_core::VerifyReport {
        artifacts: vec![plan_core::ArtifactVerification {
            approval_id: "a".into(),
            result: plan_core::ArtifactCheck::Mismatch,
            error_code: Some(ErrorCode::ArtifactIntegrityMismatch),
            detail: Some("changed".to_owned()),
        }],
        orphans: Vec::new(),
        skipped_workspaces: Vec::new(),
    };
    let converted = wire::VerifyReport::from(&report);
    assert!(!converted.ok);
    assert_eq!(converted.artifacts[0].result, wire::ArtifactCheck::Mismatch);
    assert_eq!(
        converted.artifacts[0].error_code,
        Some(ErrorCode::ArtifactIntegrityMismatch)
    );
    let both = wire::PlanVerifyParams {
        approval_id: Some("a".into()),
        session_id: Some("s".into()),
    };
    assert_eq!(both.scope().unwrap_err().code, ErrorCode::InvalidParams);
    assert_eq!(
        wire::PlanVerifyParams::default().scope().unwrap(),
        plan_core::VerifyScope::Everything
    );
    let diff = plan_core::PlanDiff {
        approval_id: "b".into(),
        against_approval_id: None,
        identical: false,
        unified: None,
    };
    assert_eq!(
        serde_json::to_value(&diff).unwrap(),
        serde_json::json!({"approvalId": "b", "againstApprovalId": null, "identical": false, "unified": null})
    );
}

#[test]
fn notifications_from_core_values() {
    assert_eq!(
        wire::ExecutionStateChangedNotification::from_approval(&pending_approval()),
        None
    );
    let running =
        wire::ExecutionStateChangedNotification::from_approval(&with_execution(ExecutionState::Running));
    assert_eq!(
        running,
        Some(wire::ExecutionStateChangedNotification {
            session_id: "ses_01".into(),
            execution_id: "exe_01".into(),
            state: wire::ExecutionState::Running,
        })
    );
    let started = wire::TurnStartResult::from(pending_state().active_turn.as_ref().unwrap());
    assert_eq!(started.mode, wire::Mode::Plan);
}
