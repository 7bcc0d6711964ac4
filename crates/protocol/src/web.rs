//! The wire of the approval card's web server. It reaches protocol v9 in
//! three additions: `plan/cardUrl` and the `capabilities.web` member of
//! `initialize` (declared with the other methods' records in `methods`) and
//! the `cardUrl` of `plan/approvalRequested`.
//!
//! A card URL carries a capability token, so it travels only in these
//! three places, to the host's own client; a `PlanApproval` never carries
//! one. This module only shapes the values; the server crate makes the URLs.
//! It also declares the card's own messages (`CardState`, `CardStatus`,
//! `CardDecision` and its answers), which the card's TypeScript reads as
//! generated types.

use plan_core::{ApprovalStatus, ErrorCode, PermissionMode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// The card's own messages, between `<plan-approval-card>` and the host's web
// server (not JSON-RPC): `GET /card/<token>/state`, the status the card
// polls (`GET /card/<token>/status`), `POST /decision` and its answers.
// Declared once here, with their schema; the card's TypeScript uses the
// generated types.

/// The approval's status as the card shows it: `GET /card/<token>/status`,
/// and in `CardState` and `CardDecided`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CardStatus {
    /// `pending`, `approved`, `rejected`, `expired` or `interrupted`.
    pub status: ApprovalStatus,
    /// The mode approved with; `null` otherwise.
    pub permission_mode: Option<PermissionMode>,
    /// Why it ended without a decision (`PLAN_APPROVAL_TIMEOUT` past its
    /// deadline); `null` otherwise.
    pub error_code: Option<ErrorCode>,
    /// When it left `pending` (approved, rejected, expired, interrupted),
    /// Unix ms; `null` while pending.
    pub decided_at: Option<i64>,
}

/// The plan file that binds the decision, as a person compares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CardArtifact {
    /// The file's name under the workspace's `.pi/plan/`.
    pub file_name: String,
    /// Its byte size as recorded.
    pub size: u64,
    /// Its SHA-256 as recorded; a decision must echo it.
    pub sha256: String,
    /// The short form of the SHA-256 every frontend shows (`sha256 ` and 16
    /// hex digits, then `…`).
    pub fingerprint: String,
}

/// The plan as the host read it after its size and SHA-256 check, or what
/// that check found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CardPlan {
    /// Whether the file matched its record.
    pub ok: bool,
    /// The Markdown when it matched; `null` otherwise.
    pub markdown: Option<String>,
    /// `ARTIFACT_MISSING`, `ARTIFACT_INTEGRITY_MISMATCH`, ... when it did not; `null` otherwise.
    pub error_code: Option<ErrorCode>,
    /// What the check found, when it failed; `null` otherwise.
    pub message: Option<String>,
}

/// What one permission mode lets the approved work do (from plan-core's
/// permission table).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionModeSummary {
    /// The mode.
    pub mode: PermissionMode,
    /// The kinds of tool call that run without asking.
    pub runs_without_asking: Vec<String>,
    /// The kinds of tool call that ask a person first.
    pub asks_first: Vec<String>,
}

impl PermissionModeSummary {
    /// Every mode, in the order the card offers them.
    pub fn all() -> Vec<PermissionModeSummary> {
        PermissionMode::ALL
            .iter()
            .map(|&mode| {
                let (runs, asks) = plan_core::mode_grants(mode);
                PermissionModeSummary {
                    mode,
                    runs_without_asking: runs.into_iter().map(str::to_owned).collect(),
                    asks_first: asks.into_iter().map(str::to_owned).collect(),
                }
            })
            .collect()
    }
}

/// `GET /card/<token>/state`: everything the card shows. A decided card's
/// token still answers it (and `GET /card/<token>/status`, its
/// `CardStatus`), read-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CardState {
    /// The approval.
    pub approval_id: String,
    /// The agent's title (untrusted text).
    pub title: String,
    /// The agent's question (untrusted text).
    pub question: String,
    /// Unix ms.
    pub created_at: i64,
    /// The absolute deadline, Unix ms.
    pub expires_at: i64,
    /// The status now.
    pub status: CardStatus,
    /// The project: the last component of the session's workspace root;
    /// `null` for a session without one.
    pub project: Option<String>,
    /// The plan file that binds the decision.
    pub artifact: CardArtifact,
    /// The plan as read now.
    pub plan: CardPlan,
    /// The modes Approve offers (`ask` first) and what each allows.
    pub permission_modes: Vec<PermissionModeSummary>,
}

/// What the person's notifier reads on its stdin, once, when a plan becomes
/// pending (the host option `notifier`, `serve --notify`): enough to tell
/// the person where and what to decide. `cardUrl` carries the card's token:
/// the notifier is the person's channel (P11 of `sandbox.md`), and the host
/// never writes this message anywhere else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingPlanNotice {
    /// The pending approval.
    pub approval_id: String,
    /// Its session.
    pub session_id: String,
    /// The project: the last component of the session's workspace root;
    /// `null` for a session without one.
    pub project: Option<String>,
    /// The agent's title (untrusted text: a notifier that shows it must not
    /// interpret it).
    pub title: String,
    /// The agent's question (untrusted text).
    pub question: String,
    /// The absolute deadline, Unix ms.
    pub expires_at: i64,
    /// The plan file that binds the decision.
    pub artifact: CardArtifact,
    /// The approval card's URL, with its token; `null` when the host serves
    /// no card (the person decides from a terminal or their client then).
    pub card_url: Option<String>,
}

/// Approve or reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CardDecisionKind {
    /// Approve with `permissionMode`.
    Approve,
    /// Reject; names no mode.
    Reject,
}

/// `POST /decision` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CardDecision {
    /// The card's token (from its URL).
    pub token: String,
    /// The SHA-256 the card showed.
    pub sha256: String,
    /// What the person decided.
    pub decision: CardDecisionKind,
    /// The mode chosen, for an approval only.
    #[serde(default)]
    pub permission_mode: Option<PermissionMode>,
}

/// `POST /decision` answer `200`: what the approval became.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CardDecided {
    /// The status after the decision.
    pub status: CardStatus,
}

/// `POST /decision` answer `400` / `409`: the host refused the decision;
/// the approval is still pending and the token still live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CardRefusal {
    /// The canonical code.
    pub error_code: ErrorCode,
    /// A human message.
    pub message: String,
    /// The plan as read at the refusal (a file rewritten while the card was
    /// open shows here as failing its check).
    pub plan: CardPlan,
}
