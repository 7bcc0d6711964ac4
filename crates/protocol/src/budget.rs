//! How much one message may make a server do: the bounds every frontend
//! applies to one line (one JSON-RPC message or batch) before it builds it.
//!
//! A JSON value costs far more in memory than its text: `[1,1,1,...]` is two
//! bytes per element on the wire and dozens once parsed, so a line cap alone
//! lets a few megabytes of input take gigabytes. [`MessageScanner`] reads the
//! raw bytes once, as they arrive, keeping a few counters and no copy, and
//! stops at the first bound crossed:
//! - the line length ([`MessageLimits::max_line_bytes`]);
//! - the batch length ([`MessageLimits::max_batch`]);
//! - the number of JSON values ([`MessageLimits::max_values`]);
//! - the decoded bytes of all strings together
//!   ([`MessageLimits::max_string_bytes`]): one markdown at the limit,
//!   however it is escaped, plus room for everything else.
//!
//! It checks framing budgets only, not JSON syntax (the parser does that)
//! and not meaning, with one exception: it notes the `id` of a top-level
//! request object as it passes ([`MessageScanner::request_id`]), so that a
//! request refused over a bound is answered with its own id whenever the id
//! came before the bound tripped. Like the rest of this crate it performs no
//! I/O.

use plan_core::ErrorCode;

use crate::jsonrpc::RequestId;

/// The bounds on one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageLimits {
    /// The longest line, in bytes.
    pub max_line_bytes: usize,
    /// The most messages in one batch.
    pub max_batch: usize,
    /// The most JSON values (arrays, objects, members and scalars) in a line.
    pub max_values: usize,
    /// The most decoded string bytes in a line, all strings together.
    pub max_string_bytes: usize,
}

impl MessageLimits {
    /// The most messages in one batch.
    pub const MAX_BATCH: usize = 128;
    /// The most JSON values in one line: ample for any request of the
    /// protocol, tool inputs included, and a few megabytes once parsed.
    pub const MAX_VALUES: usize = 20_000;
    /// Room beside the markdown: ids, titles, questions, other tool inputs.
    pub const ENVELOPE_BYTES: usize = 1024 * 1024;

    /// The bounds for a host whose SubmitPlan markdown limit is
    /// `markdown_limit_bytes`: a line may carry one maximal markdown with
    /// every byte escaped (a control byte is six characters in JSON) and an
    /// envelope; its strings may decode to one maximal markdown and an
    /// envelope.
    pub fn for_markdown_limit(markdown_limit_bytes: usize) -> MessageLimits {
        MessageLimits {
            max_line_bytes: markdown_limit_bytes
                .saturating_mul(6)
                .saturating_add(MessageLimits::ENVELOPE_BYTES),
            max_batch: MessageLimits::MAX_BATCH,
            max_values: MessageLimits::MAX_VALUES,
            max_string_bytes: markdown_limit_bytes.saturating_add(MessageLimits::ENVELOPE_BYTES),
        }
    }
}

/// The bound a line crossed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overrun {
    /// Longer than `max_line_bytes`.
    LineTooLong(usize),
    /// A batch of more than `max_batch` messages.
    BatchTooLong(usize),
    /// More than `max_values` JSON values.
    TooManyValues(usize),
    /// Strings decoding to more than `max_string_bytes`.
    StringsTooLong(usize),
}

impl Overrun {
    /// The canonical code: the message is refused whole, `INVALID_REQUEST`.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::InvalidRequest
    }

    /// What was refused, for the error message.
    pub fn detail(&self) -> String {
        match self {
            Overrun::LineTooLong(limit) => format!("the line is longer than {limit} bytes"),
            Overrun::BatchTooLong(limit) => {
                format!("a batch of more than {limit} messages; nothing in it was carried out")
            }
            Overrun::TooManyValues(limit) => format!("the message holds more than {limit} JSON values"),
            Overrun::StringsTooLong(limit) => {
                format!("the strings of the message decode to more than {limit} bytes")
            }
        }
    }
}

/// Where the scanner is inside a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InString {
    /// Outside any string.
    No,
    /// Inside, after an ordinary byte.
    Plain,
    /// Right after a backslash.
    Escape,
    /// Inside `\u`, with this many hex digits read and their value so far.
    Unicode(u8, u32),
}

/// The longest raw text of an `id` member the scanner keeps; a longer id is
/// not noted (the refusal then has a null id, as before it was read).
const MAX_ID_BYTES: usize = 1024;

/// Where the scanner is in noting a top-level object's `id` member.
#[derive(Debug, Clone, PartialEq, Eq)]
enum IdWatch {
    /// Not inside anything that could be the id.
    Idle,
    /// Reading a member name of the top-level object, raw.
    Key(Vec<u8>),
    /// After the name `id`, before its colon.
    AfterKey,
    /// After `"id":`, before the value.
    BeforeValue,
    /// Inside the id's string, raw (escapes undecoded).
    Text(Vec<u8>),
    /// Inside the id's number.
    Number(Vec<u8>),
}

/// Counts one line's budgets as its bytes arrive (see the module docs).
#[derive(Debug, Clone)]
pub struct MessageScanner {
    limits: MessageLimits,
    bytes: usize,
    string: InString,
    depth: usize,
    top_level_array: bool,
    top_level_object: bool,
    /// At depth 1 of the top-level object: the next string is a member name.
    name_next: bool,
    id_watch: IdWatch,
    id: Option<RequestId>,
    batch: usize,
    values: usize,
    string_bytes: usize,
    content: bool,
}

impl MessageScanner {
    /// A scanner at the start of a line.
    pub fn new(limits: MessageLimits) -> MessageScanner {
        MessageScanner {
            limits,
            bytes: 0,
            string: InString::No,
            depth: 0,
            top_level_array: false,
            top_level_object: false,
            name_next: false,
            id_watch: IdWatch::Idle,
            id: None,
            batch: 0,
            values: 0,
            string_bytes: 0,
            content: false,
        }
    }

    /// Whether everything fed so far was whitespace.
    pub fn is_blank(&self) -> bool {
        !self.content
    }

    /// The id of the line's request, once its value was read whole: the
    /// `id` member (an integer or a string) of a top-level object. `None`
    /// for a batch, a notification, or while (or because) the id has not
    /// been read, for example when a bound tripped before it.
    ///
    /// ```
    /// use plan_protocol::{MessageLimits, MessageScanner, RequestId};
    ///
    /// let limits = MessageLimits { max_string_bytes: 8, ..MessageLimits::for_markdown_limit(1) };
    /// let mut scanner = MessageScanner::new(limits);
    /// assert!(scanner.feed(br#"{"id":7,"params":{"title":"far too long"}}"#).is_err());
    /// assert_eq!(scanner.request_id(), Some(&RequestId::Number(7)));
    /// ```
    pub fn request_id(&self) -> Option<&RequestId> {
        self.id.as_ref()
    }

    /// Feeds the next bytes of the line (without its `\n`); refuses at the
    /// first bound crossed, and keeps refusing after that. The bytes before
    /// the bound are scanned (an id among them is noted).
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), Overrun> {
        let allowed = self.limits.max_line_bytes.saturating_sub(self.bytes);
        self.bytes = self.bytes.saturating_add(bytes.len());
        let (within, beyond) = bytes.split_at(bytes.len().min(allowed));
        for &byte in within {
            self.byte(byte)?;
        }
        if !beyond.is_empty() {
            return Err(Overrun::LineTooLong(self.limits.max_line_bytes));
        }
        Ok(())
    }

    /// Keeps one raw byte of a string the id watch is reading.
    fn keep(&mut self, byte: u8) {
        match &mut self.id_watch {
            IdWatch::Key(raw) | IdWatch::Text(raw) => {
                if raw.len() < MAX_ID_BYTES {
                    raw.push(byte);
                } else {
                    self.id_watch = IdWatch::Idle;
                }
            }
            IdWatch::Idle | IdWatch::AfterKey | IdWatch::BeforeValue | IdWatch::Number(_) => {}
        }
    }

    /// A string closed: a member name may be `id`, an id string is done.
    fn string_closed(&mut self) {
        self.id_watch = match std::mem::replace(&mut self.id_watch, IdWatch::Idle) {
            IdWatch::Key(raw) if raw == b"id" => IdWatch::AfterKey,
            IdWatch::Text(raw) => {
                let mut quoted = Vec::with_capacity(raw.len() + 2);
                quoted.push(b'"');
                quoted.extend_from_slice(&raw);
                quoted.push(b'"');
                if let Ok(text) = serde_json::from_slice::<String>(&quoted) {
                    self.id = Some(RequestId::String(text));
                }
                IdWatch::Idle
            }
            IdWatch::Key(_)
            | IdWatch::Idle
            | IdWatch::AfterKey
            | IdWatch::BeforeValue
            | IdWatch::Number(_) => IdWatch::Idle,
        };
    }

    /// A byte outside strings while the id's number is being read: more of
    /// it, or the byte that ends it.
    fn number_byte(&mut self, byte: u8) -> bool {
        let IdWatch::Number(raw) = &mut self.id_watch else {
            return false;
        };
        if matches!(byte, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
            if raw.len() < MAX_ID_BYTES {
                raw.push(byte);
            }
            return true;
        }
        if let Ok(number) = serde_json::from_slice::<i64>(raw) {
            self.id = Some(RequestId::Number(number));
        }
        self.id_watch = IdWatch::Idle;
        false
    }

    fn byte(&mut self, byte: u8) -> Result<(), Overrun> {
        match self.string {
            InString::No => self.structural(byte),
            InString::Plain => match byte {
                b'"' => {
                    self.string = InString::No;
                    self.string_closed();
                    Ok(())
                }
                b'\\' => {
                    self.keep(byte);
                    self.string = InString::Escape;
                    Ok(())
                }
                _ => {
                    self.keep(byte);
                    self.decoded(1)
                }
            },
            InString::Escape => {
                self.keep(byte);
                if byte == b'u' {
                    self.string = InString::Unicode(0, 0);
                    Ok(())
                } else {
                    self.string = InString::Plain;
                    self.decoded(1)
                }
            }
            InString::Unicode(digits, value) => {
                self.keep(byte);
                // A non-hex byte is the parser's syntax error to report;
                // counting it as zero keeps the scanner simple.
                let digit = char::from(byte).to_digit(16).unwrap_or(0);
                let value = value.saturating_mul(16).saturating_add(digit);
                if digits < 3 {
                    self.string = InString::Unicode(digits + 1, value);
                    return Ok(());
                }
                self.string = InString::Plain;
                // The UTF-8 length of the escaped code unit; each half of a
                // surrogate pair counts two of the pair's four bytes.
                let length = match value {
                    0..=0x7f => 1,
                    0x80..=0x7ff | 0xd800..=0xdfff => 2,
                    _ => 3,
                };
                self.decoded(length)
            }
        }
    }

    fn decoded(&mut self, length: usize) -> Result<(), Overrun> {
        self.string_bytes = self.string_bytes.saturating_add(length);
        if self.string_bytes > self.limits.max_string_bytes {
            return Err(Overrun::StringsTooLong(self.limits.max_string_bytes));
        }
        Ok(())
    }

    fn structural(&mut self, byte: u8) -> Result<(), Overrun> {
        if self.number_byte(byte) {
            return Ok(());
        }
        if matches!(byte, b' ' | b'\t' | b'\r' | b'\n') {
            return Ok(());
        }
        let first = !self.content;
        self.content = true;
        self.watch_structural(byte, first);
        // Every string and container counts as it opens, and every
        // separator counts the scalar or value after it, so the count is
        // never below the number of values the parser builds, give or take
        // the scalars of a lone top-level value.
        match byte {
            b'"' => {
                self.string = InString::Plain;
                self.count_value()
            }
            b'[' | b'{' => {
                if first && byte == b'[' {
                    self.top_level_array = true;
                }
                self.depth = self.depth.saturating_add(1);
                self.count_value()
            }
            b']' | b'}' => {
                self.depth = self.depth.saturating_sub(1);
                Ok(())
            }
            b',' => {
                if self.top_level_array && self.depth == 1 {
                    // Separators: n of them make n + 1 messages.
                    self.batch = self.batch.saturating_add(1);
                    if self.batch >= self.limits.max_batch {
                        return Err(Overrun::BatchTooLong(self.limits.max_batch));
                    }
                }
                self.count_value()
            }
            // A byte of a number, true, false or null, or a colon.
            _ => Ok(()),
        }
    }

    /// Follows the top-level object's members for the id watch: which
    /// string is a member name, the colon after `id`, the start of its value.
    fn watch_structural(&mut self, byte: u8, first: bool) {
        if first {
            self.top_level_object = byte == b'{';
            self.name_next = self.top_level_object;
            return;
        }
        if !self.top_level_object || self.depth != 1 {
            return;
        }
        match (byte, &self.id_watch) {
            (b'"', IdWatch::BeforeValue) => self.id_watch = IdWatch::Text(Vec::new()),
            (b'0'..=b'9' | b'-', IdWatch::BeforeValue) => self.id_watch = IdWatch::Number(vec![byte]),
            (b'"', IdWatch::Idle) if self.name_next => {
                self.name_next = false;
                self.id_watch = IdWatch::Key(Vec::new());
            }
            (b':', IdWatch::AfterKey) => self.id_watch = IdWatch::BeforeValue,
            (b',', _) => {
                self.name_next = true;
                self.id_watch = IdWatch::Idle;
            }
            // Anything else (a null, boolean, array or object id, or
            // structure that is not the id) ends the watch for this member.
            _ => self.id_watch = IdWatch::Idle,
        }
    }

    fn count_value(&mut self) -> Result<(), Overrun> {
        self.values = self.values.saturating_add(1);
        if self.values > self.limits.max_values {
            return Err(Overrun::TooManyValues(self.limits.max_values));
        }
        Ok(())
    }
}

/// The longest error message a server sends, in bytes.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 1024;

/// Cuts a message for people to [`MAX_ERROR_MESSAGE_BYTES`] (at a character
/// boundary) and says how long it was, so that an error never echoes a whole
/// hostile value (a parser names the string it could not use).
pub fn bounded_message(message: String) -> String {
    if message.len() <= MAX_ERROR_MESSAGE_BYTES {
        return message;
    }
    let mut end = MAX_ERROR_MESSAGE_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… (cut; the message was {} bytes)",
        &message[..end],
        message.len()
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn limits() -> MessageLimits {
        MessageLimits {
            max_line_bytes: 1000,
            max_batch: 3,
            max_values: 20,
            max_string_bytes: 10,
        }
    }

    fn scan(text: &str) -> Result<(), Overrun> {
        MessageScanner::new(limits()).feed(text.as_bytes())
    }

    #[test]
    fn each_bound_is_enforced_and_ordinary_messages_pass() {
        assert_eq!(scan(r#"{"id":1,"m":"x"}"#), Ok(()));
        assert_eq!(scan("[{},{},{}]"), Ok(()));
        assert_eq!(scan("[{},{},{},{}]"), Err(Overrun::BatchTooLong(3)));
        // Commas inside nested arrays or strings are not batch separators.
        assert_eq!(scan(r#"[{"a":[1,2,3,4]},"x,y,z,w"]"#), Ok(()));
        assert_eq!(
            scan(&format!("[{}1]", "1,".repeat(20))),
            Err(Overrun::BatchTooLong(3))
        );
        assert_eq!(
            scan(&format!("{{\"p\":[{}1]}}", "1,".repeat(20))),
            Err(Overrun::TooManyValues(20))
        );
        assert_eq!(scan(r#""0123456789""#), Ok(()));
        assert_eq!(scan(r#""0123456789a""#), Err(Overrun::StringsTooLong(10)));
        // Escapes count what they decode to, not how they are written.
        assert_eq!(
            scan(r#""\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001""#),
            Ok(())
        );
        assert_eq!(scan(r#""\u00e9\u00e9\u00e9\u00e9\u00e9""#), Ok(()));
        assert_eq!(
            scan(r#""\u00e9\u00e9\u00e9\u00e9\u00e9\n""#),
            Err(Overrun::StringsTooLong(10))
        );
        assert_eq!(scan(r#""\"\"\"\"\"\"\"\"\"\"""#), Ok(()));
        assert_eq!(scan(&"x".repeat(1001)), Err(Overrun::LineTooLong(1000)));
    }

    #[test]
    fn the_id_is_noted_when_it_comes_before_the_bound() {
        let roomy = MessageLimits {
            max_string_bytes: 30,
            ..limits()
        };
        let noted = |text: &str| {
            let mut scanner = MessageScanner::new(roomy);
            let refused = scanner.feed(text.as_bytes()).is_err();
            (refused, scanner.request_id().cloned())
        };
        let long = "x".repeat(31);
        assert_eq!(
            noted(&format!(r#"{{"jsonrpc":"2.0","id":7,"p":{{"t":"{long}"}}}}"#)),
            (true, Some(RequestId::Number(7)))
        );
        assert_eq!(
            noted(&format!(r#"{{ "id" : "a\"b" , "t":"{long}"}}"#)),
            (true, Some(RequestId::String("a\"b".to_owned())))
        );
        // The id after the bound, or the bound inside the id: not read.
        assert_eq!(noted(&format!(r#"{{"t":"{long}","id":7}}"#)), (true, None));
        assert_eq!(noted(&format!(r#"{{"id":"{long}"}}"#)), (true, None));
        // Only the top-level object's own id member counts.
        assert_eq!(noted(r#"{"p":{"id":3},"x":"id"}"#), (false, None));
        assert_eq!(noted(r#"[{"id":3}]"#), (false, None));
        assert_eq!(noted(r#"{"id":null}"#), (false, None));
        assert_eq!(noted(r#"{"id":1.5}"#), (false, None));
        assert_eq!(noted(r#"{"id":-42}"#), (false, Some(RequestId::Number(-42))));
        // A line over the length bound is scanned up to the bound.
        let mut scanner = MessageScanner::new(limits());
        let line = format!(r#"{{"id":9,"p":[{}]}}"#, " ".repeat(1000));
        assert_eq!(scanner.feed(line.as_bytes()), Err(Overrun::LineTooLong(1000)));
        assert_eq!(scanner.request_id(), Some(&RequestId::Number(9)));
    }

    #[test]
    fn blank_lines_are_told_apart() {
        let mut scanner = MessageScanner::new(limits());
        scanner.feed(b"  \t\r").unwrap();
        assert!(scanner.is_blank());
        scanner.feed(b"{").unwrap();
        assert!(!scanner.is_blank());
    }

    #[test]
    fn long_messages_are_cut_and_say_how_long_they_were() {
        assert_eq!(bounded_message("short".to_owned()), "short");
        let long = format!("unknown variant `{}`", "é".repeat(5000));
        let cut = bounded_message(long.clone());
        assert!(cut.len() < MAX_ERROR_MESSAGE_BYTES + 64, "{}", cut.len());
        assert!(
            cut.ends_with(&format!("(cut; the message was {} bytes)", long.len())),
            "{cut}"
        );
    }
}
