//! How the CLI shows things to people: local RFC 3339 times, relative times
//! ("expires in 12 min"), the 80-column approvals table, the `show` card,
//! and writing to stdout without panicking on a closed pipe.
//!
//! Pure formatting of values the layers below produced: nothing here reads
//! the database or decides anything about an approval. "Now" comes from the
//! caller ([`now_ms`] reads the hidden `PLAN_CHECKPOINT_NOW_MS` override that
//! tests use to pin it); the time zone is the system's (`TZ` is honoured).

use std::io::Write;

use plan_core::{ApprovalStatus, PlanApproval, UnixMs};
use plan_storage::StoredApproval;

use crate::{Failure, escape, exit};

/// The hidden environment variable that pins "now" (Unix ms), for tests.
pub(crate) const NOW_ENV: &str = "PLAN_CHECKPOINT_NOW_MS";

/// The current time in Unix ms, or the value of `PLAN_CHECKPOINT_NOW_MS`.
pub(crate) fn now_ms() -> UnixMs {
    if let Some(pinned) = std::env::var(NOW_ENV)
        .ok()
        .and_then(|text| text.trim().parse::<i64>().ok())
    {
        return pinned;
    }
    jiff::Timestamp::now().as_millisecond()
}

/// `2026-07-31T14:02:05.123+02:00` in the system time zone (`TZ` honoured).
pub(crate) fn local_rfc3339(ms: UnixMs) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(timestamp) => timestamp
            .to_zoned(jiff::tz::TimeZone::system())
            .strftime("%Y-%m-%dT%H:%M:%S%.3f%:z")
            .to_string(),
        Err(_) => format!("{ms} ms (out of range)"),
    }
}

/// A span of time for people: `45 s`, `12 min`, `3 h`, `5 d` (rounded down).
pub(crate) fn span(delta_ms: i64) -> String {
    let seconds = delta_ms.unsigned_abs() / 1000;
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min", seconds / 60),
        3600..172_800 => format!("{} h", seconds / 3600),
        _ => format!("{} d", seconds / 86_400),
    }
}

/// `in 12 min` or `3 h ago`.
pub(crate) fn relative(at: UnixMs, now: UnixMs) -> String {
    if at > now {
        format!("in {}", span(at - now))
    } else {
        format!("{} ago", span(now - at))
    }
}

/// What the deadline means now: `expires in 12 min` / `expired 3 h ago` for
/// a pending row (a pending row past its deadline is expired by the next
/// host that looks at it), plain relative time otherwise.
pub(crate) fn deadline(approval: &PlanApproval, now: UnixMs) -> String {
    match approval.status {
        ApprovalStatus::Pending if approval.expires_at > now => {
            format!("expires in {}", span(approval.expires_at - now))
        }
        ApprovalStatus::Pending => format!("expired {} ago", span(now - approval.expires_at)),
        ApprovalStatus::Approved
        | ApprovalStatus::Rejected
        | ApprovalStatus::Expired
        | ApprovalStatus::Interrupted => relative(approval.expires_at, now),
    }
}

/// The last column of the table: the deadline of a pending row, else when
/// it was decided.
fn expires_or_decided(approval: &PlanApproval, now: UnixMs) -> String {
    match (approval.status, approval.decided_at) {
        (ApprovalStatus::Pending, _) => deadline(approval, now),
        (_, Some(decided)) => format!("decided {}", relative(decided, now)),
        (_, None) => "-".to_owned(),
    }
}

/// Cuts `text` to `width` characters, marking the cut with `…`.
fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Cuts `text` to `width` characters in the middle, keeping both ends
/// (ids differ at their ends).
fn fit_middle(text: &str, width: usize) -> String {
    let count = text.chars().count();
    if count <= width || width < 3 {
        return text.to_owned();
    }
    let head = (width - 1) / 2;
    let tail = width - 1 - head;
    let mut cut: String = text.chars().take(head).collect();
    cut.push('…');
    cut.extend(text.chars().skip(count - tail));
    cut
}

/// The title as shown: legacy rows without one say so.
pub(crate) fn title(approval: &PlanApproval) -> String {
    if approval.title.is_empty() {
        "(no title)".to_owned()
    } else {
        escape::line(&approval.title).into_owned()
    }
}

const ID_WIDTH: usize = 41;
const STATE_WIDTH: usize = 11;
const TITLE_WIDTH: usize = 36;
const SESSION_WIDTH: usize = 20;

/// The approvals table: two lines per approval so full ids fit in 80
/// columns. Line one: id, status, execution, created; line two: title,
/// session, and the deadline (pending) or the decision time.
pub(crate) fn table(approvals: &[PlanApproval], now: UnixMs) -> String {
    if approvals.is_empty() {
        return "no approvals\n".to_owned();
    }
    let mut out = String::new();
    push_row(
        &mut out,
        ["ID", "STATUS", "EXECUTION", "CREATED"],
        ["TITLE", "SESSION", "EXPIRES / DECIDED"],
    );
    for approval in approvals {
        let execution = approval.execution_state.map_or("-", |state| state.as_str());
        push_row(
            &mut out,
            [
                &fit_middle(&escape::line(&approval.id), ID_WIDTH),
                approval.status.as_str(),
                execution,
                &relative(approval.created_at, now),
            ],
            [
                &fit(&title(approval), TITLE_WIDTH),
                &fit_middle(&escape::line(&approval.session_id), SESSION_WIDTH),
                &expires_or_decided(approval, now),
            ],
        );
    }
    out
}

fn push_row(out: &mut String, first: [&str; 4], second: [&str; 3]) {
    let [id, status, execution, created] = first;
    let line = format!("{id:<ID_WIDTH$}  {status:<STATE_WIDTH$}  {execution:<STATE_WIDTH$}  {created}");
    out.push_str(line.trim_end());
    out.push('\n');
    let [title, session, when] = second;
    let line = format!("  {title:<TITLE_WIDTH$}  {session:<SESSION_WIDTH$}  {when}");
    out.push_str(line.trim_end());
    out.push('\n');
}

/// Every field of one approval, one per line.
pub(crate) fn card(stored: &StoredApproval, now: UnixMs) -> String {
    let approval = &stored.approval;
    let none = || "-".to_owned();
    let time = |ms: UnixMs| format!("{} ({})", local_rfc3339(ms), relative(ms, now));
    let mut lines: Vec<(&str, String)> = vec![
        ("id", approval.id.clone()),
        ("session", approval.session_id.clone()),
        ("turn", approval.turn_id.clone()),
        ("title", title(approval)),
        (
            "question",
            if approval.question.is_empty() {
                "(none)".to_owned()
            } else {
                approval.question.clone()
            },
        ),
        ("status", approval.status.to_string()),
        (
            "error code",
            approval
                .error_code
                .map_or_else(none, |code| code.as_str().to_owned()),
        ),
    ];
    match &approval.artifact {
        Some(artifact) => {
            lines.push(("artifact", artifact.path.clone()));
            lines.push(("artifact size", format!("{} bytes", artifact.size)));
            lines.push(("artifact sha256", artifact.sha256.clone()));
        }
        None => lines.push((
            "artifact",
            "null (migrated from schema v8; no artifact)".to_owned(),
        )),
    }
    lines.push(("created", time(approval.created_at)));
    lines.push((
        "expires",
        format!(
            "{} ({})",
            local_rfc3339(approval.expires_at),
            deadline(approval, now)
        ),
    ));
    lines.push(("decided", approval.decided_at.map_or_else(none, time)));
    lines.push((
        "permission mode",
        approval
            .permission_mode
            .map_or_else(none, |mode| mode.as_str().to_owned()),
    ));
    lines.push(("execution id", approval.execution_id.clone().unwrap_or_else(none)));
    lines.push((
        "execution state",
        approval
            .execution_state
            .map_or_else(none, |state| state.as_str().to_owned()),
    ));
    lines.push((
        "legacy proposal",
        stored.legacy_proposal_json.clone().unwrap_or_else(none),
    ));
    lines.push((
        "legacy feedback",
        stored.legacy_feedback.clone().unwrap_or_else(none),
    ));
    let mut out = String::new();
    for (label, value) in lines {
        let label = format!("{label}:");
        out.push_str(&format!("{label:<17}{}\n", escape::line(&value)));
    }
    out
}

/// The protocol v9 JSON of an approval.
pub(crate) fn wire(approval: &PlanApproval) -> plan_protocol::PlanApproval {
    plan_protocol::PlanApproval::from(approval)
}

/// Serializes a value as one line of JSON (terminal-safe, see
/// [`escape::JsonFormatter`]).
pub(crate) fn json_line(value: &impl serde::Serialize) -> Result<String, Failure> {
    let mut text = encode(value, escape::JsonFormatter(serde_json::ser::CompactFormatter))?;
    text.push('\n');
    Ok(text)
}

/// Serializes a value as indented JSON (terminal-safe).
pub(crate) fn json_pretty(value: &impl serde::Serialize) -> Result<String, Failure> {
    let mut text = encode(
        value,
        escape::JsonFormatter(serde_json::ser::PrettyFormatter::new()),
    )?;
    text.push('\n');
    Ok(text)
}

fn encode(
    value: &impl serde::Serialize,
    formatter: impl serde_json::ser::Formatter,
) -> Result<String, Failure> {
    let failed =
        |error: &dyn std::fmt::Display| Failure::new(exit::FAILURE, format!("cannot encode JSON: {error}"));
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    value.serialize(&mut serializer).map_err(|error| failed(&error))?;
    String::from_utf8(out).map_err(|error| failed(&error))
}

/// Writes bytes to stdout and flushes. A closed pipe (`| head`) is not an
/// error worth reporting; anything else is.
pub(crate) fn write_stdout(bytes: &[u8]) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(error) => Err(Failure::new(
            exit::FAILURE,
            format!("cannot write to stdout: {error}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn spans_round_down_to_the_largest_unit() {
        assert_eq!(span(0), "0 s");
        assert_eq!(span(59_999), "59 s");
        assert_eq!(span(12 * 60_000 + 59_000), "12 min");
        assert_eq!(span(3 * 3_600_000), "3 h");
        assert_eq!(span(47 * 3_600_000), "47 h");
        assert_eq!(span(5 * 86_400_000), "5 d");
        assert_eq!(relative(1_000, 0), "in 1 s");
        assert_eq!(relative(0, 3 * 3_600_000), "3 h ago");
    }

    #[test]
    fn cutting_keeps_the_width() {
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
        assert_eq!(fit_middle("session-0123456789", 9), "sess…6789");
    }
}
