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

fn collector_json(finding: &plan_audit_export::CollectorFinding) -> serde_json::Value {
    use plan_audit_export::CollectorFinding;
    match finding {
        CollectorFinding::Conflicting { seq, lines } => {
            json!({"seq": seq, "finding": "conflicting", "lines": [lines.0, lines.1]})
        }
        CollectorFinding::HashRewritten { seq, line } => {
            json!({"seq": seq, "finding": "hashRewritten", "line": line})
        }
        CollectorFinding::TailMissing { first, head, cursor } => {
            json!({"seq": first, "finding": "tailMissing", "head": head, "exportCursor": cursor})
        }
    }
}

/// Verifies the chain (and compares it with `against`); exit 0 when clean,
/// 1 with every finding named by seq (tampering), 4 when the collector's
/// file cannot be read (an unfinished last line is only a note).
pub(crate) fn verify(database: &Path, against: Option<&Path>, json: bool) -> Result<i32, Failure> {
    let store = open(database)?;
    let (head, _) = store.audit_head().map_err(|error| failure(&error))?;
    if let Some(progress) = store.history_numbering().map_err(|error| failure(&error))? {
        render::note(&format!(
            "the audit history is being numbered ({} of {} rows): the numbered part is verified, \
             the approval rows once it is done (`plan-checkpoint db migrate` finishes it)",
            progress.done, progress.total
        ));
    }
    let mut collector_findings: Vec<plan_audit_export::CollectorFinding> = Vec::new();
    let mut partial_last_line: Option<usize> = None;
    let (records, collector_records, findings) = match against {
        None => {
            let (checked, findings) = store.verify_audit_chain().map_err(|error| failure(&error))?;
            (checked, None, findings)
        }
        Some(file) => {
            let text = std::fs::read_to_string(file).map_err(|error| {
                Failure::new(
                    exit::UNREADABLE,
                    format!("cannot read {}: {error}", file.display()),
                )
            })?;
            let kept = plan_audit_export::read_collector_file(&text)
                .map_err(|error| Failure::new(exit::UNREADABLE, format!("{}: {error}", file.display())))?;
            if let Some(line) = kept.partial_last_line {
                render::note(&format!(
                    "{}: line {line} is unfinished (a live file the collector is still writing): \
                     its records were not compared",
                    file.display()
                ));
            }
            let comparison =
                plan_audit_export::verify_against(&store, &kept.records).map_err(|error| failure(&error))?;
            if comparison.other_databases > 0 {
                render::note(&format!(
                    "{} records of other databases in {} were left out (another plan_checkpoint.database.id)",
                    comparison.other_databases,
                    file.display()
                ));
            }
            if comparison.unattributed > 0 {
                render::note(&format!(
                    "{} records in {} name no database (exported before records carried one): \
                     compared as this database's",
                    comparison.unattributed,
                    file.display()
                ));
            }
            collector_findings = comparison.collector_findings;
            partial_last_line = kept.partial_last_line;
            (
                comparison.local_records,
                Some(comparison.collector_records),
                comparison.findings,
            )
        }
    };
    let problems = findings.len() + collector_findings.len();
    let text = if json {
        render::json_pretty(&json!({
            "records": records,
            "head": head,
            "collectorRecords": collector_records,
            "ok": problems == 0,
            "findings": findings
                .iter()
                .map(finding_json)
                .chain(collector_findings.iter().map(collector_json))
                .collect::<Vec<_>>(),
            "partialLastLine": partial_last_line,
        }))?
    } else {
        let mut text = String::new();
        for finding in &findings {
            // A row's values are whatever the database holds: escaped.
            text.push_str(&format!("{}\n", crate::escape::line(&finding.to_string())));
        }
        for finding in &collector_findings {
            text.push_str(&format!("{finding}\n"));
        }
        let compared = collector_records.map_or(String::new(), |kept| {
            format!(", compared with {kept} the collector kept")
        });
        if problems == 0 {
            text.push_str(&format!(
                "audit chain: {records} records up to seq {head} verified{compared}\n"
            ));
        } else {
            text.push_str(&format!(
                "audit chain: {problems} problem(s) in {records} records up to seq {head}{compared}\n"
            ));
        }
        text
    };
    render::write_stdout(text.as_bytes())?;
    Ok(if problems == 0 { exit::OK } else { exit::FAILURE })
}
