//! The `plan_approvals` rows recomputed from the audit chain.
//!
//! Every state a row takes (its submission, its approval with the chosen
//! mode, its rejection, expiry or interruption, its execution's start and
//! end) is a chained fact, so replaying an approval's facts in seq order
//! gives the state its row must have now. A row that disagrees (a mode or a
//! status edited after the fact), a row no fact ever recorded, and an
//! approval whose row is gone are [`AuditFinding::Row`] findings, naming the
//! approval, the column and both values.
//!
//! A fact states only what its record carries: records written before a
//! field was chained (`created_at` and `decided_at` came with this module)
//! leave that column unchecked for their approval. This module reads
//! records and rows; it writes nothing and decides nothing.

use std::collections::HashMap;

use plan_core::PlanApproval;
use serde_json::Value;

use crate::chain::{AuditFinding, AuditRecord};

/// What an approval's submission told: the columns that never change.
#[derive(Debug, Clone, Default)]
struct Submitted {
    session_id: String,
    turn_id: Option<String>,
    artifact_path: Option<String>,
    artifact_sha256: Option<String>,
    artifact_size: Option<i64>,
    expires_at: Option<i64>,
    title_sha256: Option<String>,
    question_sha256: Option<String>,
    created_at: Option<i64>,
}

/// The state an approval's facts give it, as far as they tell it.
#[derive(Debug, Clone, Default)]
struct Told {
    /// The seq of its latest record.
    seq: u64,
    submitted: Option<Submitted>,
    /// `None` until a submission or a decision told it.
    status: Option<&'static str>,
    error_code: Option<String>,
    /// `None` when the latest decision's record does not carry it.
    decided_at: Option<Option<i64>>,
    permission_mode: Option<String>,
    execution_id: Option<String>,
    execution_state: Option<&'static str>,
}

/// The approvals' states replayed from the chain, by approval id.
#[derive(Debug, Default)]
pub struct ApprovalReplay {
    told: HashMap<String, Told>,
}

fn text(record: &AuditRecord, key: &str) -> Option<String> {
    record
        .attributes
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn integer(record: &AuditRecord, key: &str) -> Option<i64> {
    record.attributes.get(key).and_then(Value::as_i64)
}

fn shown<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "none".to_owned(), |value| value.to_string())
}

impl ApprovalReplay {
    /// Applies one record (records of other kinds are ignored); records
    /// must come in seq order.
    pub(crate) fn record(&mut self, record: &AuditRecord) {
        let Some(id) = text(record, "plan_checkpoint.approval.id") else {
            return;
        };
        let event = record
            .event
            .strip_prefix("plan_checkpoint.")
            .unwrap_or(&record.event);
        let decided_at = record
            .attributes
            .contains_key("plan_checkpoint.approval.decided_at")
            .then(|| integer(record, "plan_checkpoint.approval.decided_at"));
        let error_code = text(record, "plan_checkpoint.error.code");
        let told = self.told.entry(id).or_default();
        told.seq = told.seq.max(record.seq);
        let decision = |told: &mut Told, status: &'static str, error: Option<String>| {
            told.status = Some(status);
            told.error_code = error;
            told.decided_at = decided_at;
            told.permission_mode = None;
            told.execution_id = None;
            told.execution_state = None;
        };
        match event {
            "plan.submitted" => {
                told.submitted = Some(Submitted {
                    session_id: text(record, "session.id").unwrap_or_default(),
                    turn_id: text(record, "plan_checkpoint.turn.id"),
                    artifact_path: text(record, "plan_checkpoint.plan.path"),
                    artifact_sha256: text(record, "plan_checkpoint.plan.sha256"),
                    artifact_size: integer(record, "plan_checkpoint.plan.size"),
                    expires_at: integer(record, "plan_checkpoint.deadline"),
                    title_sha256: text(record, "plan_checkpoint.plan.title_sha256"),
                    question_sha256: text(record, "plan_checkpoint.plan.question_sha256"),
                    created_at: integer(record, "plan_checkpoint.approval.created_at"),
                });
                decision(told, "pending", None);
                told.decided_at = Some(None);
            }
            "plan.approved" => {
                decision(told, "approved", None);
                told.permission_mode = text(record, "plan_checkpoint.permission_mode");
                told.execution_id = text(record, "plan_checkpoint.execution.id");
                // A v8 approval (backfilled) had no execution.
                told.execution_state = told.execution_id.is_some().then_some("queued");
            }
            "plan.rejected" => decision(told, "rejected", None),
            "plan.expired" => decision(told, "expired", error_code),
            "plan.interrupted" => decision(told, "interrupted", error_code),
            "execution.started" | "execution.completed" | "execution.interrupted" => {
                told.execution_state = Some(match event {
                    "execution.started" => "running",
                    "execution.completed" => "completed",
                    _ => "interrupted",
                });
                told.error_code = error_code;
            }
            _ => {}
        }
    }

    /// The seq of the latest record of approval `id`, if it has any.
    pub fn latest_seq(&self, id: &str) -> Option<u64> {
        self.told.get(id).map(|told| told.seq)
    }

    /// Where `row` disagrees with what the chain tells of it, column by
    /// column; a row the chain never recorded is one finding.
    pub fn check(&self, row: &PlanApproval) -> Vec<AuditFinding> {
        let id = row.id.as_str();
        let Some(told) = self.told.get(id) else {
            return vec![AuditFinding::Row {
                seq: 0,
                approval_id: id.to_owned(),
                field: "row",
                chain: "absent".to_owned(),
                row: "present".to_owned(),
            }];
        };
        let mut findings = Vec::new();
        let mut differs = |field: &'static str, chain: String, found: String| {
            if chain != found {
                findings.push(AuditFinding::Row {
                    seq: told.seq,
                    approval_id: id.to_owned(),
                    field,
                    chain,
                    row: found,
                });
            }
        };
        let artifact = row.artifact.as_ref();
        let sha = |text: &str| format!("sha256:{}", crate::artifacts::sha256_hex(text.as_bytes()));
        if let Some(submitted) = &told.submitted {
            differs(
                "session_id",
                submitted.session_id.clone(),
                row.session_id.as_str().to_owned(),
            );
            if let Some(turn) = &submitted.turn_id {
                differs("turn_id", turn.clone(), row.turn_id.as_str().to_owned());
            }
            differs(
                "artifact_path",
                shown(submitted.artifact_path.as_ref()),
                shown(artifact.map(|a| &a.path)),
            );
            differs(
                "artifact_sha256",
                shown(submitted.artifact_sha256.as_ref()),
                shown(artifact.map(|a| &a.sha256)),
            );
            differs(
                "artifact_size",
                shown(submitted.artifact_size),
                shown(artifact.map(|a| a.size)),
            );
            if let Some(expires_at) = submitted.expires_at {
                differs("expires_at", expires_at.to_string(), row.expires_at.to_string());
            }
            if let Some(created_at) = submitted.created_at {
                differs("created_at", created_at.to_string(), row.created_at.to_string());
            }
            if let Some(title) = &submitted.title_sha256 {
                differs("title", format!("sha256:{title}"), sha(&row.title));
            }
            if let Some(question) = &submitted.question_sha256 {
                differs("question", format!("sha256:{question}"), sha(&row.question));
            }
        }
        if let Some(status) = told.status {
            differs("status", status.to_owned(), row.status.as_str().to_owned());
            differs(
                "error_code",
                shown(told.error_code.as_ref()),
                shown(row.error_code.map(|code| code.as_str())),
            );
            differs(
                "permission_mode",
                shown(told.permission_mode.as_ref()),
                shown(row.permission_mode.map(|mode| mode.as_str())),
            );
            differs(
                "execution_id",
                shown(told.execution_id.as_ref()),
                shown(row.execution_id.as_ref().map(|id| id.as_str())),
            );
            differs(
                "execution_state",
                shown(told.execution_state),
                shown(row.execution_state.map(|state| state.as_str())),
            );
        }
        if let Some(decided_at) = told.decided_at {
            differs("decided_at", shown(decided_at), shown(row.decided_at));
        }
        findings
    }

    /// The approvals the chain tells of whose id is not in `rows`: their
    /// rows were removed.
    pub(crate) fn removed(&self, present: &std::collections::HashSet<String>) -> Vec<AuditFinding> {
        self.told
            .iter()
            .filter(|(id, _)| !present.contains(id.as_str()))
            .map(|(id, told)| AuditFinding::Row {
                seq: told.seq,
                approval_id: id.clone(),
                field: "row",
                chain: "present".to_owned(),
                row: "absent".to_owned(),
            })
            .collect()
    }
}
