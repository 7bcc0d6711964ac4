//! Visible escaping of agent-written text for a terminal.
//!
//! Every human-readable output that can contain text an agent wrote (titles,
//! questions, Markdown, diffs, and anything copied from a row: ids, paths,
//! legacy v8 fields) goes through these two functions, so no control or
//! bidirectional character reaches the terminal raw. Which characters those
//! are is plan-core's [`plan_core::is_terminal_control`]; this module only
//! decides how they look: `\x1b` for a byte-sized code point, `\u202e` for a
//! larger one, `\xff` for a byte that is not UTF-8. A backslash is left as
//! it is (escaping it would double every backslash of a Markdown file):
//! an agent can write the text `\x1b`, which shows the same as an escaped
//! ESC, and neither acts on the terminal.
//!
//! `--json` output stays exact JSON: [`JsonFormatter`] writes the same
//! values, only with the controls JSON does not escape itself (C1, DEL,
//! bidi controls) as `\uXXXX`, so JSON printed to a terminal is inert too
//! and parses back to the exact text.

use std::borrow::Cow;
use std::fmt::Write;
use std::io;

use plan_core::is_terminal_control;

/// One line of text (a table cell, a field of `show`): every control
/// character is escaped, newline and tab included.
pub(crate) fn line(text: &str) -> Cow<'_, str> {
    escape(text, |_| false)
}

/// A block of text (an artifact, a diff): newline and tab keep their
/// meaning, every other control character is escaped (a carriage return
/// could hide a line by writing over it).
pub(crate) fn block(text: &str) -> Cow<'_, str> {
    escape(text, |c| c == '\n' || c == '\t')
}

/// Bytes shown as a block ([`block`]): valid UTF-8 runs are escaped as text,
/// each byte that is not part of valid UTF-8 shows as `\xNN`.
pub(crate) fn block_bytes(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return block(text);
    }
    let mut out = String::with_capacity(bytes.len() + 16);
    for chunk in bytes.utf8_chunks() {
        out.push_str(&block(chunk.valid()));
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    Cow::Owned(out)
}

fn escape(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| is_terminal_control(c) && !keep(c);
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            let code = u32::from(c);
            if code <= 0xff {
                let _ = write!(out, "\\x{code:02x}");
            } else {
                let _ = write!(out, "\\u{code:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A serde_json formatter (compact or pretty, `F`) that writes every
/// [`is_terminal_control`] character of a string as a `\uXXXX` escape.
pub(crate) struct JsonFormatter<F>(pub(crate) F);

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for JsonFormatter<F> {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (at, c) in fragment.char_indices() {
            if is_terminal_control(c) {
                writer.write_all(&fragment.as_bytes()[start..at])?;
                write!(writer, "\\u{:04x}", u32::from(c))?;
                start = at + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
    fn begin_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_array(writer)
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_array(writer)
    }
    fn begin_array_value<W: ?Sized + io::Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(writer, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_array_value(writer)
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_object(writer)
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object(writer)
    }
    fn begin_object_key<W: ?Sized + io::Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(writer, first)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_object_value(writer)
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object_value(writer)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn controls_show_as_escapes_and_text_stays() {
        assert_eq!(line("plain 解析器 🚀"), "plain 解析器 🚀");
        assert!(matches!(line("plain"), Cow::Borrowed(_)));
        assert_eq!(line("a\u{1b}[2Kb"), "a\\x1b[2Kb");
        assert_eq!(line("bel\u{7}"), "bel\\x07");
        assert_eq!(line("c1\u{9b}2K"), "c1\\x9b2K");
        assert_eq!(line("del\u{7f}"), "del\\x7f");
        assert_eq!(line("rtl\u{202e}txt"), "rtl\\u202etxt");
        assert_eq!(line("a\tb\nc"), "a\\x09b\\x0ac");
        assert_eq!(block("a\tb\nc\r"), "a\tb\nc\\x0d");
        assert_eq!(block_bytes(b"ok\xff\x1b\n"), "ok\\xff\\x1b\n");
    }

    #[test]
    fn json_escapes_every_control_and_parses_back_exactly() {
        let value = serde_json::json!({"title": "a\u{9b}b\u{202e}c\u{7f}\u{1b}d \\x1b 解"});
        let mut out = Vec::new();
        let mut serializer = serde_json::Serializer::with_formatter(
            &mut out,
            JsonFormatter(serde_json::ser::CompactFormatter),
        );
        serde::Serialize::serialize(&value, &mut serializer).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, r#"{"title":"a\u009bb\u202ec\u007f\u001bd \\x1b 解"}"#);
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), value);
    }
}
