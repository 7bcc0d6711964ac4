//! `audit verify`: the audit chain recomputed from the database and, with
//! `--against FILE`, compared with the records a collector kept (OTLP/JSON
//! lines). Read-only; every finding is named by its seq.

use std::path::Path;

use plan_storage::AuditFinding;
use serde_json::json;

use crate::inspect::{failure, open};
use crate::{Failure, exit, render};

fn finding_json(finding: &AuditFinding) -> serde_json::Value {
    let (kind, unnumbered) = match finding {
        AuditFinding::Changed { .. } => ("changed", false),
        AuditFinding::Removed { .. } => ("removed", false),
        AuditFinding::Inserted { unnumbered, .. } => ("inserted", *unnumbered),
        AuditFinding::Row {
            seq,
            approval_id,
            field,
            chain,
            row,
        } => {
            return json!({
                "seq": seq,
                "finding": "row",
                "approvalId": approval_id,
                "field": field,
                "chain": chain,
                "row": row,
            });
        }
    };
    let mut value = json!({ "seq": finding.seq(), "finding": kind });
    if unnumbered {
        value["unnumbered"] = json!(true);
    }
    value
}

/// Verifies the chain (and compares it with `against`); exit 0 when clean,
/// 1 with every finding named by seq.
pub(crate) fn verify(database: &Path, against: Option<&Path>, json: bool) -> Result<i32, Failure> {
    let store = open(database)?;
    let (head, _) = store.audit_head().map_err(|error| failure(&error))?;
    let (records, collector_records, findings) = match against {
        None => {
            let (checked, findings) = store.verify_audit_chain().map_err(|error| failure(&error))?;
            (checked, None, findings)
        }
        Some(file) => {
            let text = std::fs::read_to_string(file).map_err(|error| {
                Failure::new(exit::FAILURE, format!("cannot read {}: {error}", file.display()))
            })?;
            let kept = plan_audit_export::parse_collector_lines(&text)
                .map_err(|error| Failure::new(exit::FAILURE, format!("{}: {error}", file.display())))?;
            let comparison =
                plan_audit_export::verify_against(&store, &kept).map_err(|error| failure(&error))?;
            (
                comparison.local_records,
                Some(comparison.collector_records),
                comparison.findings,
            )
        }
    };
    let text = if json {
        render::json_pretty(&json!({
            "records": records,
            "head": head,
            "collectorRecords": collector_records,
            "ok": findings.is_empty(),
            "findings": findings.iter().map(finding_json).collect::<Vec<_>>(),
        }))?
    } else {
        let mut text = String::new();
        for finding in &findings {
            // A row's values are whatever the database holds: escaped.
            text.push_str(&format!("{}\n", crate::escape::line(&finding.to_string())));
        }
        let compared = collector_records.map_or(String::new(), |kept| {
            format!(", compared with {kept} the collector kept")
        });
        if findings.is_empty() {
            text.push_str(&format!(
                "audit chain: {records} records up to seq {head} verified{compared}\n"
            ));
        } else {
            text.push_str(&format!(
                "audit chain: {} problem(s) in {records} records up to seq {head}{compared}\n",
                findings.len()
            ));
        }
        text
    };
    render::write_stdout(text.as_bytes())?;
    Ok(if findings.is_empty() {
        exit::OK
    } else {
        exit::FAILURE
    })
}
