//! The chain compared with what a collector kept: OTLP/JSON lines, one
//! `ExportLogsServiceRequest` per line, as an OpenTelemetry Collector's file
//! exporter writes them. A local record changed, removed or inserted after
//! it was exported is named by its seq; so are the collector's own copies
//! when they disagree with each other or with the chain (two different
//! records under one seq, a rewritten `audit.hash`, a tail cut short).
//! Only the records of this database count: each carries the database's
//! identity (`plan_checkpoint.database.id` on its resource), so one file
//! may hold several databases' exports. Reads the database; writes
//! nothing.

use std::collections::BTreeMap;

use plan_storage::{
    ALIAS_ATTRIBUTES, AuditFinding, HASH_ATTRIBUTE, SEQ_ATTRIBUTE, StorageError, Store, canonical_bytes,
    is_canonical_attribute,
};
use serde_json::Value;

/// The resource attribute naming the database a record comes from.
pub const DATABASE_ID_ATTRIBUTE: &str = "plan_checkpoint.database.id";

/// One audit record as a collector kept it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectorRecord {
    /// Its `audit.seq`.
    pub seq: u64,
    /// Its `audit.hash`.
    pub hash: String,
    /// Its canonical bytes, rebuilt from its attributes and time.
    pub canonical: Vec<u8>,
    /// The database it says it comes from (its resource's
    /// `plan_checkpoint.database.id`); `None` for records exported before
    /// records carried it.
    pub database_id: Option<String>,
    /// The 1-based line of the file that holds it.
    pub line: usize,
}

/// A collector's file as read: its audit records, and what could not be
/// read without failing the whole check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CollectorFile {
    /// Every audit record of every request, in file order.
    pub records: Vec<CollectorRecord>,
    /// The last line, when it is unfinished (no newline, not JSON): a live
    /// file the collector is still writing. Its records are not read.
    pub partial_last_line: Option<usize>,
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

fn record_of(log: &Value, database_id: Option<&str>, line: usize) -> Result<Option<CollectorRecord>, String> {
    let mut attributes = BTreeMap::new();
    let mut aliases = Vec::new();
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
        } else if is_canonical_attribute(key) {
            attributes.insert(key.to_owned(), value);
        } else if ALIAS_ATTRIBUTES.iter().any(|(alias, _)| *alias == key) {
            aliases.push((key, value));
        }
    }
    // An alias is a copy of a chained attribute: a copy that says
    // otherwise makes the record a changed one.
    let mut aliases_hold = true;
    for (alias, value) in aliases {
        let source = ALIAS_ATTRIBUTES
            .iter()
            .find(|(name, _)| *name == alias)
            .map(|(_, source)| *source);
        if source.and_then(|source| attributes.get(source)) != Some(&value) {
            aliases_hold = false;
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
    let mut canonical = canonical_bytes(&attributes, millis);
    if !aliases_hold {
        // Bytes no local record has: the comparison names it changed.
        canonical.extend_from_slice(b" (an alias that is not its source)");
    }
    Ok(Some(CollectorRecord {
        seq,
        hash,
        canonical,
        database_id: database_id.map(str::to_owned),
        line,
    }))
}

/// Reads a collector's file: every audit record of every request, in file
/// order (duplicates included). Blank lines are skipped; any line that is
/// not an OTLP/JSON logs request is an error.
pub fn parse_collector_lines(text: &str) -> Result<Vec<CollectorRecord>, ParseError> {
    let mut records = Vec::new();
    for (index, line) in text.lines().enumerate() {
        records.extend(parse_line(line, index + 1)?);
    }
    Ok(records)
}

/// Reads a collector's file as [`parse_collector_lines`] does, except that
/// an unfinished last line (no newline after it, and not JSON: the
/// collector is still writing it) is set aside as
/// [`CollectorFile::partial_last_line`] instead of failing.
pub fn read_collector_file(text: &str) -> Result<CollectorFile, ParseError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut file = CollectorFile::default();
    for (index, line) in lines.iter().enumerate() {
        match parse_line(line, index + 1) {
            Ok(records) => file.records.extend(records),
            Err(error)
                if index + 1 == lines.len()
                    && !text.ends_with('\n')
                    && serde_json::from_str::<Value>(line).is_err() =>
            {
                let _ = error;
                file.partial_last_line = Some(index + 1);
            }
            Err(error) => return Err(error),
        }
    }
    Ok(file)
}

fn parse_line(line: &str, number: usize) -> Result<Vec<CollectorRecord>, ParseError> {
    let mut records = Vec::new();
    if line.trim().is_empty() {
        return Ok(records);
    }
    let error = |reason: String| ParseError { line: number, reason };
    let request: Value = serde_json::from_str(line).map_err(|parse| error(parse.to_string()))?;
    let resource_logs = request
        .get("resourceLogs")
        .and_then(Value::as_array)
        .ok_or_else(|| error("not an ExportLogsServiceRequest (no resourceLogs)".to_owned()))?;
    for resource in resource_logs {
        let database_id = resource
            .pointer("/resource/attributes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|attribute| attribute.get("key").and_then(Value::as_str) == Some(DATABASE_ID_ATTRIBUTE))
            .and_then(|attribute| attribute.pointer("/value/stringValue"))
            .and_then(Value::as_str);
        for scope_logs in resource
            .get("scopeLogs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for log in scope_logs
                .get("logRecords")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                records.extend(record_of(log, database_id, number).map_err(error)?);
            }
        }
    }
    Ok(records)
}

/// A problem with the collector's own copies (the chain's findings are
/// [`AuditFinding`]s).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum CollectorFinding {
    /// The collector kept two different records under this seq.
    Conflicting {
        /// The seq.
        seq: u64,
        /// The lines that hold the two.
        lines: (usize, usize),
    },
    /// The collector's copy carries an `audit.hash` that is not the chain's
    /// (rewritten after it left the host).
    HashRewritten {
        /// The seq.
        seq: u64,
        /// The line that holds it.
        line: usize,
    },
    /// The file ends before the database's head: the records from `first`
    /// to `head` are not in it.
    TailMissing {
        /// The first seq missing.
        first: u64,
        /// The database's head.
        head: u64,
        /// The export cursor: records up to it were accepted by a
        /// collector, so a missing one among them was cut from the file.
        cursor: u64,
    },
}

impl CollectorFinding {
    /// The seq the finding names first.
    pub fn seq(&self) -> u64 {
        match self {
            CollectorFinding::Conflicting { seq, .. } | CollectorFinding::HashRewritten { seq, .. } => *seq,
            CollectorFinding::TailMissing { first, .. } => *first,
        }
    }
}

impl std::fmt::Display for CollectorFinding {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CollectorFinding::Conflicting { seq, lines } => write!(
                formatter,
                "seq {seq}: the collector kept two different records (lines {} and {})",
                lines.0, lines.1
            ),
            CollectorFinding::HashRewritten { seq, line } => write!(
                formatter,
                "seq {seq}: the collector's copy (line {line}) carries another audit.hash than the chain"
            ),
            CollectorFinding::TailMissing { first, head, cursor } => {
                let why = if *cursor >= *first {
                    format!(
                        "the export cursor is at {cursor}: a collector accepted them, so the file was cut"
                    )
                } else {
                    format!("the export cursor is at {cursor}: they were not exported yet")
                };
                write!(
                    formatter,
                    "seq {first}..{head}: not in the collector's file, which ends before the database's head ({why})"
                )
            }
        }
    }
}

/// What comparing the chain with a collector's records found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// Numbered records in the database.
    pub local_records: u64,
    /// Distinct seqs the collector kept of this database.
    pub collector_records: u64,
    /// Records of other databases in the file (skipped).
    pub other_databases: u64,
    /// Records without a database identity (exported before records
    /// carried one), compared as this database's.
    pub unattributed: u64,
    /// Every finding, ordered by seq: the chain's own (recomputed from the
    /// database) and the differences from the collector's copy.
    pub findings: Vec<AuditFinding>,
    /// What is wrong with the collector's own copies.
    pub collector_findings: Vec<CollectorFinding>,
}

/// Compares the database's chain with `collected`: a seq the collector has
/// and the database does not is removed; one whose canonical bytes differ
/// is changed; a local seq within the collector's range that the
/// collector never saw is inserted. The chain's own verification is
/// included, so a local edit not yet exported is found too. The
/// collector's copies are checked as well: two different records under
/// one seq, a hash that is not the chain's, a file that ends before the
/// head. Records of another database (another
/// `plan_checkpoint.database.id`) are left out.
pub fn verify_against(store: &Store, collected: &[CollectorRecord]) -> Result<Comparison, StorageError> {
    let (_, mut findings) = store.verify_audit_chain()?;
    let database_id = store.database_id()?;
    let (head, _) = store.audit_head()?;
    let cursor = store.audit_cursor()?.seq;
    let local = store.audit_records()?;
    let mut local_by_seq: BTreeMap<u64, Vec<(&[u8], &str)>> = BTreeMap::new();
    let canonical: Vec<Vec<u8>> = local
        .iter()
        .map(plan_storage::AuditRecord::canonical_bytes)
        .collect();
    for (record, bytes) in local.iter().zip(&canonical) {
        local_by_seq
            .entry(record.seq)
            .or_default()
            .push((bytes.as_slice(), record.hash.as_str()));
    }
    let mut other_databases = 0_u64;
    let mut unattributed = 0_u64;
    let mut collector_findings = Vec::new();
    let mut remote: BTreeMap<u64, &CollectorRecord> = BTreeMap::new();
    for record in collected {
        match (&record.database_id, &database_id) {
            (Some(theirs), Some(ours)) if theirs != ours => {
                other_databases += 1;
                continue;
            }
            (Some(_), None) => {
                // This database never exported under an identity.
                other_databases += 1;
                continue;
            }
            (None, _) => unattributed += 1,
            (Some(_), Some(_)) => {}
        }
        match remote.get(&record.seq) {
            None => {
                remote.insert(record.seq, record);
            }
            Some(first) if first.canonical != record.canonical || first.hash != record.hash => {
                collector_findings.push(CollectorFinding::Conflicting {
                    seq: record.seq,
                    lines: (first.line, record.line),
                });
            }
            // A byte-identical copy sent again after a crash.
            Some(_) => {}
        }
    }
    for (seq, kept) in &remote {
        match local_by_seq.get(seq) {
            None => findings.push(AuditFinding::Removed { seq: *seq }),
            Some(copies) => {
                // The content decides: a hash that differs over the same
                // content follows from an earlier change, named there (or
                // from a stored hash edited alone, which the chain's own
                // verification names).
                if !copies
                    .iter()
                    .any(|(bytes, _)| *bytes == kept.canonical.as_slice())
                {
                    findings.push(AuditFinding::Changed { seq: *seq });
                    continue;
                }
                // The collector's hash must chain from the previous record's
                // hash, the collector's or the database's: a hash that
                // chains from neither was rewritten in the collector (a
                // local chain rewritten from some seq on is the chain's
                // `changed` finding, and the collector's copy still chains).
                let previous_local = seq
                    .checked_sub(1)
                    .filter(|previous| *previous > 0)
                    .and_then(|previous| local_by_seq.get(&previous))
                    .and_then(|copies| copies.first())
                    .map(|(_, hash)| *hash);
                let previous_kept = seq
                    .checked_sub(1)
                    .filter(|previous| *previous > 0)
                    .and_then(|previous| remote.get(&previous))
                    .map(|record| record.hash.as_str());
                let chains_from =
                    |previous: &str| plan_storage::chain_hash(previous, &kept.canonical) == kept.hash;
                let chains = if *seq == 1 {
                    chains_from("")
                } else {
                    previous_kept.is_some_and(chains_from) || previous_local.is_some_and(chains_from)
                };
                let unknown_predecessor = *seq > 1 && previous_kept.is_none() && previous_local.is_none();
                let local_hash_differs = copies.iter().all(|(_, hash)| *hash != kept.hash);
                if (!chains && !unknown_predecessor) || (unknown_predecessor && local_hash_differs) {
                    collector_findings.push(CollectorFinding::HashRewritten {
                        seq: *seq,
                        line: kept.line,
                    });
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
    if last_kept < head {
        collector_findings.push(CollectorFinding::TailMissing {
            first: last_kept + 1,
            head,
            cursor,
        });
    }
    findings.sort();
    findings.dedup();
    findings.sort_by_key(AuditFinding::seq);
    collector_findings.sort();
    collector_findings.dedup();
    collector_findings.sort_by_key(CollectorFinding::seq);
    Ok(Comparison {
        local_records: local.len() as u64,
        collector_records: remote.len() as u64,
        other_databases,
        unattributed,
        findings,
        collector_findings,
    })
}
