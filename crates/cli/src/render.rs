//! How the CLI shows things to people: local RFC 3339 times, relative times
//! from jiff spans ("3 weeks ago", "expires in 25 minutes"), the approvals
//! table's columns and rows, the `show` card, shell-quoted words for
//! printed commands, JSON (whole, or streamed member by member), and
//! writing to stdout without panicking on a closed pipe.
//!
//! Pure formatting of values the layers below produced: nothing here reads
//! the database or decides anything about an approval. "Now" comes from the
//! caller ([`now_ms`] reads the hidden `PLAN_CHECKPOINT_NOW_MS` override that
//! tests use to pin it); the time zone is the system's (`TZ` is honoured).

use std::io::Write;
use std::path::Path;

use plan_core::{ApprovalStatus, PlanApproval, UnixMs, is_due};
use plan_storage::{StoredApproval, ToolDecisionTally};
use serde::Serialize;

use crate::table::{Cell, Column};
use crate::terminal::{Terminal, good_style, heading_style, hunk_style, removed_style, status_style};
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

/// The path a Unix system names its time zone with.
const LOCALTIME: &str = "/etc/localtime";

/// The system time zone, looked up once per process.
fn local_zone() -> jiff::tz::TimeZone {
    static ZONE: std::sync::OnceLock<jiff::tz::TimeZone> = std::sync::OnceLock::new();
    ZONE.get_or_init(|| {
        let configured = std::env::var_os("TZ").is_some() || std::env::var_os("TZDIR").is_some();
        let linked = if configured {
            None
        } else {
            linked_zone(Path::new(LOCALTIME))
        };
        linked.unwrap_or_else(jiff::tz::TimeZone::system)
    })
    .clone()
}

/// The zone a `/etc/localtime`-style symlink into a zoneinfo directory
/// names, read from the file it points to; `None` when `path` is not such a
/// link or its target is not TZif data.
///
/// Without `TZ` and `TZDIR`, this is the zone `jiff::tz::TimeZone::system()`
/// finds: it too takes the name after `zoneinfo/` in the link and reads
/// that zone's TZif file (from `/usr/share/zoneinfo`, where such links
/// point). But before its first lookup, jiff lists every name in the
/// zoneinfo directory (a walk of about 1,800 files, a tenth of a short
/// `approvals list`), which one file read makes unnecessary. With `TZ` or
/// `TZDIR` set, or without such a link, the caller asks jiff, which then
/// walks nothing it does not need.
fn linked_zone(path: &Path) -> Option<jiff::tz::TimeZone> {
    let target = std::fs::read_link(path).ok()?;
    let target = target.to_str()?;
    let (_, name) = target.rsplit_once("zoneinfo/")?;
    let data = std::fs::read(path).ok()?;
    jiff::tz::TimeZone::tzif(name, &data).ok()
}

/// `2026-07-31T14:02:05.123+02:00` in the system time zone (`TZ` honoured).
pub(crate) fn local_rfc3339(ms: UnixMs) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(timestamp) => timestamp
            .to_zoned(local_zone())
            .strftime("%Y-%m-%dT%H:%M:%S%.3f%:z")
            .to_string(),
        Err(_) => format!("{ms} ms (out of range)"),
    }
}

/// `14:02:05` in the system time zone (`TZ` honoured): a deadline within
/// the day, as a person reads it beside a clock.
pub(crate) fn local_clock(ms: UnixMs) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(timestamp) => timestamp.to_zoned(local_zone()).strftime("%H:%M:%S").to_string(),
        Err(_) => format!("{ms} ms (out of range)"),
    }
}

/// How far apart two instants are, in the largest calendar unit that fits
/// (rounded down), from jiff's span between them in the system time zone:
/// `45 seconds`, `25 minutes`, `3 hours`, `2 days`, `3 weeks`, `4 months`,
/// `2 years`.
pub(crate) fn span_between(earlier: UnixMs, later: UnixMs) -> String {
    let zone = local_zone();
    let (Ok(start), Ok(end)) = (
        jiff::Timestamp::from_millisecond(earlier.min(later)),
        jiff::Timestamp::from_millisecond(earlier.max(later)),
    ) else {
        return format!("{} ms", later.abs_diff(earlier));
    };
    let (start, end) = (start.to_zoned(zone.clone()), end.to_zoned(zone));
    let Ok(span) = start.until((jiff::Unit::Year, &end)) else {
        return format!("{} ms", later.abs_diff(earlier));
    };
    let days = i64::from(span.get_days());
    let (count, unit) = if span.get_years() > 0 {
        (i64::from(span.get_years()), "year")
    } else if span.get_months() > 0 {
        (i64::from(span.get_months()), "month")
    } else if days >= 7 {
        (days / 7, "week")
    } else if days > 0 {
        (days, "day")
    } else if span.get_hours() > 0 {
        (i64::from(span.get_hours()), "hour")
    } else if span.get_minutes() > 0 {
        (span.get_minutes(), "minute")
    } else {
        (span.get_seconds(), "second")
    };
    if count == 1 {
        format!("1 {unit}")
    } else {
        format!("{count} {unit}s")
    }
}

/// `in 25 minutes`, `3 weeks ago`, or `just now` within a second.
pub(crate) fn relative(at: UnixMs, now: UnixMs) -> String {
    if at.abs_diff(now) < 1000 {
        "just now".to_owned()
    } else if at > now {
        format!("in {}", span_between(now, at))
    } else {
        format!("{} ago", span_between(at, now))
    }
}

/// What the deadline means now. Only a pending approval can still expire:
/// `expires in 25 minutes`, or `overdue by 3 minutes` (the next host that
/// looks at it expires it). An expired one says when it expired; an
/// approved, rejected or interrupted one never shows a deadline to come.
pub(crate) fn deadline(approval: &PlanApproval, now: UnixMs) -> String {
    match approval.status {
        ApprovalStatus::Pending if !is_due(approval, now) => {
            format!("expires {}", relative(approval.expires_at, now))
        }
        ApprovalStatus::Pending => format!(
            "overdue by {}; the next host to look at it expires it",
            span_between(approval.expires_at, now)
        ),
        ApprovalStatus::Expired => format!("expired {}", relative(approval.expires_at, now)),
        ApprovalStatus::Approved | ApprovalStatus::Rejected | ApprovalStatus::Interrupted => {
            format!("no longer applies: {}", approval.status)
        }
    }
}

/// The table's deadline column: the deadline of a pending row, else when
/// it was decided.
fn deadline_or_decided(approval: &PlanApproval, now: UnixMs) -> String {
    match (approval.status, approval.decided_at) {
        (ApprovalStatus::Pending, _) if !is_due(approval, now) => {
            format!("expires {}", relative(approval.expires_at, now))
        }
        (ApprovalStatus::Pending, _) => format!("overdue by {}", span_between(approval.expires_at, now)),
        (ApprovalStatus::Expired, Some(decided)) => format!("expired {}", relative(decided, now)),
        (
            ApprovalStatus::Approved | ApprovalStatus::Rejected | ApprovalStatus::Interrupted,
            Some(decided),
        ) => {
            format!("decided {}", relative(decided, now))
        }
        (
            ApprovalStatus::Expired
            | ApprovalStatus::Approved
            | ApprovalStatus::Rejected
            | ApprovalStatus::Interrupted,
            None,
        ) => "-".to_owned(),
    }
}

/// The title as shown (escaped): legacy rows without one say so.
pub(crate) fn title(approval: &PlanApproval) -> String {
    if approval.title.is_empty() {
        "(no title)".to_owned()
    } else {
        escape::line(&approval.title).into_owned()
    }
}

/// The columns of an approvals table. On a narrow terminal the session
/// goes first, then the execution state, then the creation time.
pub(crate) fn approval_columns() -> Vec<Column> {
    vec![
        Column::whole("ID"),
        Column::new("STATUS", 0),
        Column::new("EXECUTION", 3),
        Column::new("CREATED", 2),
        Column::new("DEADLINE / DECIDED", 1),
        Column::new("SESSION", 4),
        Column::flexible("TITLE"),
    ]
}

/// The approvals table of the demo, whose story is the execution: on a
/// narrow terminal its EXECUTION column is dropped last (after the session,
/// the creation time and the deadline), where `approvals list` keeps the
/// deadline longer.
pub(crate) fn story_approval_columns() -> Vec<Column> {
    vec![
        Column::whole("ID"),
        Column::new("STATUS", 0),
        Column::new("EXECUTION", 1),
        Column::new("CREATED", 3),
        Column::new("DEADLINE / DECIDED", 2),
        Column::new("SESSION", 4),
        Column::flexible("TITLE"),
    ]
}

/// One approval as a table row; `id` is the id as shown (whole, or a
/// prefix the commands accept back).
pub(crate) fn approval_row(approval: &PlanApproval, id: String, now: UnixMs) -> Vec<Cell> {
    let execution = approval.execution_state.map_or("-", |state| state.as_str());
    vec![
        Cell::plain(id),
        Cell::styled(approval.status.as_str(), status_style(approval.status)),
        Cell::plain(execution),
        Cell::plain(relative(approval.created_at, now)),
        Cell::plain(deadline_or_decided(approval, now)),
        Cell::plain(approval.session_id.clone()),
        Cell::plain(title(approval)),
    ]
}

/// Every field of one approval, one per line; labels in bold and the
/// status in its colour when colouring. `workspace_root` is its session's:
/// the artifact's recorded path is relative to it, so the card shows the
/// root and the joined absolute path too. `tally` is what the permission
/// mode decided during its execution (`None` without an execution).
pub(crate) fn card(
    stored: &StoredApproval,
    workspace_root: Option<&str>,
    tally: Option<ToolDecisionTally>,
    now: UnixMs,
    term: &Terminal,
) -> String {
    let approval = &stored.approval;
    let none = || "-".to_owned();
    let time = |ms: UnixMs| format!("{} ({})", local_rfc3339(ms), relative(ms, now));
    let mut lines: Vec<(&str, String)> = vec![
        ("id", approval.id.to_string()),
        ("session", approval.session_id.to_string()),
        ("workspace", workspace_root.map_or_else(none, str::to_owned)),
        ("turn", approval.turn_id.to_string()),
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
            if let Some(root) = workspace_root {
                lines.push((
                    "artifact file",
                    std::path::Path::new(root)
                        .join(&artifact.path)
                        .display()
                        .to_string(),
                ));
            }
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
    lines.push((
        "execution id",
        approval
            .execution_id
            .as_ref()
            .map_or_else(none, ToString::to_string),
    ));
    lines.push((
        "execution state",
        approval
            .execution_state
            .map_or_else(none, |state| state.as_str().to_owned()),
    ));
    lines.push((
        "tool calls",
        tally.map_or_else(none, |tally| {
            format!(
                "{} confirmed, {} declined, {} auto-allowed",
                tally.confirmed, tally.declined, tally.auto_allowed
            )
        }),
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
        let value = escape::line(&value);
        let value = if label == "status:" {
            term.paint(status_style(approval.status), &value)
        } else {
            value.into_owned()
        };
        out.push_str(&format!(
            "{}{}{value}\n",
            term.paint(heading_style(), &label),
            " ".repeat(17usize.saturating_sub(label.len()))
        ));
    }
    out
}

/// A unified diff for people: escaped like every agent-written text, and
/// on a colouring terminal removed lines red, added lines green, file and
/// hunk headers bold and cyan, as `git diff` shows them.
pub(crate) fn unified_diff(unified: &str, term: &Terminal) -> String {
    let escaped = escape::block(unified);
    let mut out = String::with_capacity(escaped.len());
    for line in escaped.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        let style = if body.starts_with("+++") || body.starts_with("---") {
            heading_style()
        } else if body.starts_with("@@") {
            hunk_style()
        } else if body.starts_with('+') {
            good_style()
        } else if body.starts_with('-') {
            removed_style()
        } else {
            anstyle::Style::new()
        };
        out.push_str(&term.paint(style, body));
        out.push_str(end);
    }
    out
}

/// `text` as one shell word: as it is when it is plainly safe, else in
/// single quotes, so a printed command works when pasted.
pub(crate) fn shell_word(text: &str) -> String {
    let safe = !text.is_empty()
        && text.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '/' | '.' | '_' | '-' | '+' | ':' | '@' | '%' | '=' | ',')
        });
    if safe {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
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

/// Bytes a streaming command collects before it writes them.
pub(crate) const FLUSH_BYTES: usize = 64 * 1024;

/// Writes `out` when it has grown past `at` bytes.
pub(crate) fn flush_at(out: &mut String, at: usize) -> Result<(), Failure> {
    if out.len() >= at {
        write_stdout(out.as_bytes())?;
        out.clear();
    }
    Ok(())
}

/// A pretty-printed JSON object written member by member, so an array of
/// a whole history streams: each element is written (and dropped) as it
/// comes. The text is what `serde_json`'s pretty printer writes for the
/// same object, members in the order they are written.
pub(crate) struct JsonObject {
    out: String,
    members: usize,
    elements: u64,
}

impl JsonObject {
    pub(crate) fn new() -> JsonObject {
        JsonObject {
            out: String::from("{"),
            members: 0,
            elements: 0,
        }
    }

    fn key(&mut self, key: &str) {
        self.out
            .push_str(if self.members == 0 { "\n  " } else { ",\n  " });
        self.members += 1;
        // Keys are this module's constants: plain ASCII names.
        self.out.push('"');
        self.out.push_str(key);
        self.out.push_str("\": ");
    }

    /// Appends `text` (pretty JSON), its lines after the first indented.
    fn nested(&mut self, text: &str, indent: &str, first_indented: bool) {
        // JSON strings hold no raw newline, so cutting at lines is safe.
        for (index, line) in text.trim_end().lines().enumerate() {
            if index > 0 {
                self.out.push('\n');
            }
            if index > 0 || first_indented {
                self.out.push_str(indent);
            }
            self.out.push_str(line);
        }
    }

    pub(crate) fn begin_array(&mut self, key: &str) {
        self.key(key);
        self.out.push('[');
        self.elements = 0;
    }

    pub(crate) fn element(&mut self, value: &impl Serialize) -> Result<(), Failure> {
        let text = json_pretty(value)?;
        self.out.push_str(if self.elements == 0 { "\n" } else { ",\n" });
        self.nested(&text, "    ", true);
        self.elements += 1;
        flush_at(&mut self.out, FLUSH_BYTES)
    }

    /// Closes the array; returns how many elements it got.
    pub(crate) fn end_array(&mut self) -> u64 {
        self.out.push_str(if self.elements == 0 { "]" } else { "\n  ]" });
        self.elements
    }

    pub(crate) fn member(&mut self, key: &str, value: &impl Serialize) -> Result<(), Failure> {
        let text = json_pretty(value)?;
        self.key(key);
        self.nested(&text, "  ", false);
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Result<(), Failure> {
        self.out.push_str("\n}\n");
        write_stdout(self.out.as_bytes())
    }
}

/// A note for the person on stderr, prefixed with the program name.
pub(crate) fn note(text: &str) {
    crate::log::line(&format!("plan-checkpoint: note: {text}"));
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

    const MINUTE: i64 = 60_000;
    const DAY: i64 = 24 * 60 * MINUTE;

    #[test]
    fn relative_times_use_the_largest_unit_rounded_down() {
        // Pinned to UTC in the process environment by the integration
        // tests; here spans under a day do not depend on the zone.
        assert_eq!(relative(0, 500), "just now");
        assert_eq!(relative(0, 59_999), "59 seconds ago");
        assert_eq!(relative(0, MINUTE), "1 minute ago");
        assert_eq!(relative(0, 12 * MINUTE + 59_000), "12 minutes ago");
        assert_eq!(relative(3 * 60 * MINUTE, 0), "in 3 hours");
        assert_eq!(relative(0, 5 * DAY), "5 days ago");
        assert_eq!(relative(0, 22 * DAY), "3 weeks ago");
        assert_eq!(relative(0, 1112 * DAY), "3 years ago");
    }

    #[test]
    fn a_localtime_link_gives_the_zone_jiff_finds_by_its_name() {
        // Skipped where the system has no zoneinfo database to link into.
        let name = "Europe/Berlin";
        let zoneinfo = Path::new("/usr/share/zoneinfo").join(name);
        if !zoneinfo.is_file() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("localtime");
        std::os::unix::fs::symlink(&zoneinfo, &link).unwrap();
        let linked = linked_zone(&link).unwrap();
        let named = jiff::tz::TimeZone::get(name).unwrap();
        assert_eq!(linked.iana_name(), Some(name));
        // Winter, summer, and either side of the 2026 spring change.
        for seconds in [1_767_225_600_i64, 1_783_000_000, 1_774_746_000 - 1, 1_774_746_000] {
            let instant = jiff::Timestamp::from_second(seconds).unwrap();
            assert_eq!(linked.to_offset(instant), named.to_offset(instant));
        }
        // A plain file or a link elsewhere is left to jiff.
        let plain = dir.path().join("plain");
        std::fs::copy(&zoneinfo, &plain).unwrap();
        assert!(linked_zone(&plain).is_none());
        let elsewhere = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&plain, &elsewhere).unwrap();
        assert!(linked_zone(&elsewhere).is_none());
    }

    #[test]
    fn a_pending_row_is_overdue_from_its_deadline_on_as_plan_core_decides() {
        let approval = PlanApproval {
            id: "a1".into(),
            session_id: "s1".into(),
            turn_id: "t1".into(),
            title: "t".to_owned(),
            question: "q".to_owned(),
            artifact: None,
            status: ApprovalStatus::Pending,
            error_code: None,
            created_at: 0,
            expires_at: 10 * MINUTE,
            decided_at: None,
            permission_mode: None,
            execution_id: None,
            execution_state: None,
        };
        let before = 10 * MINUTE - 1;
        let at = 10 * MINUTE;
        assert!(!is_due(&approval, before) && is_due(&approval, at));
        assert!(deadline(&approval, before).starts_with("expires "));
        assert!(deadline(&approval, at).starts_with("overdue by "));
        assert!(deadline_or_decided(&approval, before).starts_with("expires "));
        assert!(deadline_or_decided(&approval, at).starts_with("overdue by "));
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("/tmp/plan.db"), "/tmp/plan.db");
        assert_eq!(shell_word("/tmp/my plans/plan.db"), "'/tmp/my plans/plan.db'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }
}
