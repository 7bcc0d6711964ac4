//! The chain compared with what a collector kept: OTLP/JSON lines, one
//! `ExportLogsServiceRequest` per line, as an OpenTelemetry Collector's file
//! exporter writes them. A local record changed, removed or inserted after
//! it was exported is named by its seq. Reads the database; writes nothing.

use std::collections::BTreeMap;

use plan_storage::{
    AuditFinding, CONTENT_ATTRIBUTES, HASH_ATTRIBUTE, SEQ_ATTRIBUTE, StorageError, Store, canonical_bytes,
};
use serde_json::Value;

/// One audit record as a collector kept it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectorRecord {
    /// Its `audit.seq`.
    pub seq: u64,
    /// Its `audit.hash`.
    pub hash: String,
    /// Its canonical bytes, rebuilt from its attributes and time.
    pub canonical: Vec<u8>,
}

/// A line of the collector's file that is not an OTLP/JSON logs request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ParseError {
    /// The 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

fn scalar(value: &Value) -> Option<Value> {
    if let Some(text) = value.get("stringValue").and_then(Value::as_str) {
        return Some(Value::from(text));
    }
    if let Some(flag) = value.get("boolValue").and_then(Value::as_bool) {
        return Some(Value::from(flag));
    }
    match value.get("intValue") {
        Some(Value::String(text)) => text.parse::<i64>().ok().map(Value::from),
        Some(Value::Number(number)) => number.as_i64().map(Value::from),
        Some(_) | None => None,
    }
}

fn record_of(log: &Value) -> Result<Option<CollectorRecord>, String> {
    let mut attributes = BTreeMap::new();
    let mut hash = None;
    for attribute in log
        .get("attributes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(key) = attribute.get("key").and_then(Value::as_str) else {
            return Err("an attribute without a key".to_owned());
        };
        let value = attribute
            .get("value")
            .and_then(scalar)
            .ok_or_else(|| format!("attribute {key:?} has no scalar value"))?;
        if key == HASH_ATTRIBUTE {
            hash = value.as_str().map(str::to_owned);
        } else if !CONTENT_ATTRIBUTES.contains(&key) {
            attributes.insert(key.to_owned(), value);
        }
    }
    let Some(seq) = attributes.get(SEQ_ATTRIBUTE).and_then(Value::as_u64) else {
        // Not an audit record (another service's log in the same file).
        return Ok(None);
    };
    let hash = hash.ok_or_else(|| format!("seq {seq} has no {HASH_ATTRIBUTE}"))?;
    let nanos = match log.get("timeUnixNano") {
        Some(Value::String(text)) => text.parse::<u64>().ok(),
        Some(Value::Number(number)) => number.as_u64(),
        Some(_) | None => None,
    }
    .ok_or_else(|| format!("seq {seq} has no timeUnixNano"))?;
    let millis = i64::try_from(nanos / 1_000_000).map_err(|_| format!("seq {seq}: time out of range"))?;
    Ok(Some(CollectorRecord {
        seq,
        hash,
        canonical: canonical_bytes(&attributes, millis),
    }))
}

/// Reads a collector's file: every audit record of every request, in file
/// order (duplicates included). Blank lines are skipped.
pub fn parse_collector_lines(text: &str) -> Result<Vec<CollectorRecord>, ParseError> {
    let mut records = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let error = |reason: String| ParseError {
            line: index + 1,
            reason,
        };
        let request: Value = serde_json::from_str(line).map_err(|parse| error(parse.to_string()))?;
        let resource_logs = request
            .get("resourceLogs")
            .and_then(Value::as_array)
            .ok_or_else(|| error("not an ExportLogsServiceRequest (no resourceLogs)".to_owned()))?;
        for scope_logs in resource_logs
            .iter()
            .filter_map(|resource| resource.get("scopeLogs").and_then(Value::as_array))
            .flatten()
        {
            for log in scope_logs
                .get("logRecords")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                records.extend(record_of(log).map_err(error)?);
            }
        }
    }
    Ok(records)
}

/// What comparing the chain with a collector's records found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// Numbered records in the database.
    pub local_records: u64,
    /// Distinct seqs the collector kept.
    pub collector_records: u64,
    /// Every finding, ordered by seq: the chain's own (recomputed from the
    /// database) and the differences from the collector's copy.
    pub findings: Vec<AuditFinding>,
}

/// Compares the database's chain with `collected`: a seq the collector has
/// and the database does not is removed; one whose canonical bytes differ
/// is changed; a local seq within the collector's range that the
/// collector never saw is inserted. The chain's own verification is
/// included, so a local edit not yet exported is found too.
pub fn verify_against(store: &Store, collected: &[CollectorRecord]) -> Result<Comparison, StorageError> {
    let (_, mut findings) = store.verify_audit_chain()?;
    let local = store.audit_records()?;
    let mut local_by_seq: BTreeMap<u64, Vec<Vec<u8>>> = BTreeMap::new();
    for record in &local {
        local_by_seq
            .entry(record.seq)
            .or_default()
            .push(record.canonical_bytes());
    }
    let mut remote: BTreeMap<u64, &CollectorRecord> = BTreeMap::new();
    for record in collected {
        remote.entry(record.seq).or_insert(record);
    }
    for (seq, kept) in &remote {
        match local_by_seq.get(seq) {
            None => findings.push(AuditFinding::Removed { seq: *seq }),
            Some(copies) => {
                // The content decides: a hash that differs over the same
                // content follows from an earlier change, named there (or
                // from a stored hash edited alone, which the chain's own
                // verification names).
                if !copies.contains(&kept.canonical) {
                    findings.push(AuditFinding::Changed { seq: *seq });
                }
            }
        }
    }
    let last_kept = remote.keys().next_back().copied().unwrap_or(0);
    for seq in local_by_seq.keys().filter(|seq| **seq <= last_kept) {
        if !remote.contains_key(seq) {
            findings.push(AuditFinding::Inserted {
                seq: *seq,
                unnumbered: false,
            });
        }
    }
    findings.sort();
    findings.dedup();
    findings.sort_by_key(AuditFinding::seq);
    Ok(Comparison {
        local_records: local.len() as u64,
        collector_records: remote.len() as u64,
        findings,
    })
}
