//! Requests bounded in bytes: as many records as fit under the configured
//! bound, and a record that alone is larger sent with its confidential
//! content cut, saying so beside it (`<attribute>.truncated` = true,
//! `<attribute>.sha256` of the whole text and its `<attribute>.size` in
//! bytes). A collector's usual request limit (20 MiB) is never reached by
//! default, so one large plan cannot stop the export. Encoding and
//! cutting only; no I/O.

use plan_storage::AuditRecord;
use serde_json::Value;

use crate::config::ExportConfig;
use crate::otlp::Origin;

/// Cuts every content text of `record` to at most `keep` bytes (at a
/// character boundary), noting for each whether it was cut, the SHA-256 of
/// the whole text and its size. `keep` = 0 sends the notes alone.
pub(crate) fn cut_content(record: &mut AuditRecord, keep: usize) {
    let names: Vec<String> = record.content.keys().cloned().collect();
    for name in names {
        let Some(text) = record.content.get(&name) else {
            continue;
        };
        let whole_size = text.len();
        if whole_size <= keep && !record.content_notes.contains_key(&format!("{name}.sha256")) {
            continue;
        }
        // The whole text's hash and size, kept from the first cut.
        let sha = record
            .content_notes
            .get(&format!("{name}.sha256"))
            .cloned()
            .unwrap_or_else(|| Value::from(plan_storage::sha256_hex(text.as_bytes())));
        let size = record
            .content_notes
            .get(&format!("{name}.size"))
            .cloned()
            .unwrap_or_else(|| Value::from(whole_size as u64));
        let mut end = keep.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let cut = text[..end].to_owned();
        record.content.insert(name.clone(), cut);
        record
            .content_notes
            .insert(format!("{name}.truncated"), Value::Bool(true));
        record.content_notes.insert(format!("{name}.sha256"), sha);
        record.content_notes.insert(format!("{name}.size"), size);
    }
}

/// The body of the next request: the longest prefix of `records` whose
/// encoding fits `config.max_request_bytes`, and how many records it
/// holds (at least one). A first record that does not fit alone has its
/// content cut until it does (in `records`, so the caller sees what was
/// sent).
pub(crate) fn bounded_request(
    records: &mut [AuditRecord],
    config: &ExportConfig,
    origin: &Origin,
) -> (Vec<u8>, usize) {
    let bound = config.max_request_bytes.max(1);
    let mut count = records.len();
    loop {
        let body = crate::exporter::encode(&records[..count], config, origin);
        if body.len() <= bound {
            return (body, count);
        }
        if count > 1 {
            // Proportionally fewer, at least one fewer.
            let estimate = count.saturating_mul(bound) / body.len();
            count = estimate.clamp(1, count - 1);
            continue;
        }
        return (fit_alone(&mut records[0], config, origin, bound, body), 1);
    }
}

/// One record larger than the bound: its content cut until it fits (or
/// gone, when even the notes alone do not fit: then it is sent as it is,
/// without content, the only thing left to try).
fn fit_alone(
    record: &mut AuditRecord,
    config: &ExportConfig,
    origin: &Origin,
    bound: usize,
    mut body: Vec<u8>,
) -> Vec<u8> {
    if record.content.is_empty() || !config.include_content {
        return body;
    }
    let whole: Vec<(String, String)> = record
        .content
        .iter()
        .map(|(name, text)| (name.clone(), text.clone()))
        .collect();
    let longest = whole.iter().map(|(_, text)| text.len()).max().unwrap_or(0);
    let mut keep = longest.saturating_mul(bound) / body.len().max(1);
    for _ in 0..16 {
        for (name, text) in &whole {
            record.content.insert(name.clone(), text.clone());
        }
        cut_content(record, keep);
        body = crate::exporter::encode(std::slice::from_ref(record), config, origin);
        if body.len() <= bound || keep == 0 {
            return body;
        }
        // Escaping makes the encoding longer than the text: shrink by what
        // is still over, with a margin.
        let over = body.len() - bound;
        keep = keep.saturating_sub(over + over / 8 + 64);
    }
    cut_content(record, 0);
    crate::exporter::encode(std::slice::from_ref(record), config, origin)
}
