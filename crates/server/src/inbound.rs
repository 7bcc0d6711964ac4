//! Reading `serve`'s stdin: one JSON-RPC message (or batch) per line, parsed
//! as it streams in, within the protocol's message budgets.
//!
//! Every byte comes through [`LineReader`], which stops at the `\n` and feeds
//! it to a [`plan_protocol::MessageScanner`] first, so a line that would cost
//! more than its budgets (length, batch length, JSON values, string bytes) is
//! cut off at the first byte too many, and the rest of it is skipped without
//! being stored. A small line is read whole and parsed; a long one is parsed
//! as it streams in and is never held whole. This module frames and parses; it answers nothing.

use std::io::{BufRead, Read};

use plan_core::ErrorCode;
use plan_protocol::{ErrorObject, MessageLimits, MessageScanner, Overrun, RequestId};
use serde::Deserialize;
use serde_json::Value;

/// Lines up to this long are read whole, then parsed.
const SMALL_LINE_BYTES: u64 = 256 * 1024;

/// How much of a longer line the parser's buffer reads ahead.
const PARSE_BUFFER_BYTES: usize = 64 * 1024;

/// What one line of stdin held.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// stdin is closed.
    Eof,
    /// An empty or whitespace-only line: nothing to answer.
    Blank,
    /// A parsed message or batch.
    Message(Value),
    /// A line refused before or while parsing, with the error to answer and
    /// the request's id when it was read before the refusal (else `None`,
    /// answered with a null id).
    Refused(Option<RequestId>, ErrorObject),
}

/// Reads the next line as one JSON value, within `limits`.
pub(crate) fn next_message(input: &mut impl BufRead, limits: MessageLimits) -> std::io::Result<Incoming> {
    if input.fill_buf()?.is_empty() {
        return Ok(Incoming::Eof);
    }
    let mut line = LineReader {
        input,
        scanner: MessageScanner::new(limits),
        overrun: None,
        failure: None,
        ended: false,
    };
    // Most lines are small: read them whole (through the budgets) and parse
    // the slice, which is fastest. Only a line longer than that is parsed
    // as it streams in, so a large one is never held whole.
    let mut head = Vec::new();
    let head_read = (&mut line).take(SMALL_LINE_BYTES).read_to_end(&mut head);
    let parsed = match head_read {
        Err(_) => None,
        Ok(_) if line.ended => Some(serde_json::from_slice::<Value>(&head)),
        Ok(_) => {
            // serde_json reads a reader one byte per call; the buffer in
            // between lets the line reader scan and copy in blocks. It never
            // reads past the line's end, since the line reader stops there.
            let rest = std::io::BufReader::with_capacity(PARSE_BUFFER_BYTES, &mut line);
            let mut parser = serde_json::Deserializer::from_reader(std::io::Cursor::new(head).chain(rest));
            Some(Value::deserialize(&mut parser).and_then(|value| parser.end().map(|()| value)))
        }
    };
    line.skip_rest();
    if let Some(failure) = line.failure {
        return Err(failure);
    }
    if let Some(overrun) = line.overrun {
        return Ok(Incoming::Refused(
            line.scanner.request_id().cloned(),
            ErrorObject::with_detail(overrun.code(), overrun.detail()),
        ));
    }
    Ok(match parsed {
        Some(Ok(message)) => Incoming::Message(message),
        Some(Err(_)) if line.scanner.is_blank() => Incoming::Blank,
        // JSON-RPC 2.0: a parse error is answered with a null id.
        Some(Err(error)) => Incoming::Refused(None, ErrorObject::with_detail(ErrorCode::ParseError, error)),
        // Reading failed without an overrun or a stdin failure: cannot be,
        // since the line reader fails only for those two.
        None => Incoming::Refused(None, ErrorObject::new(ErrorCode::Internal)),
    })
}

/// The bytes of one line, up to (not including) its `\n`, with the budgets
/// counted on the way.
struct LineReader<'input, R: BufRead> {
    input: &'input mut R,
    scanner: MessageScanner,
    /// The budget the line crossed; reading stops there.
    overrun: Option<Overrun>,
    /// A failure to read stdin itself.
    failure: Option<std::io::Error>,
    /// The `\n` (or the end of stdin) was reached.
    ended: bool,
}

impl<R: BufRead> LineReader<'_, R> {
    /// Consumes what is left of the line without keeping it.
    fn skip_rest(&mut self) {
        while !self.ended {
            let available = match self.input.fill_buf() {
                Ok(available) => available,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    self.failure.get_or_insert(error);
                    return;
                }
            };
            if available.is_empty() {
                self.ended = true;
                return;
            }
            let (length, newline) = match available.iter().position(|byte| *byte == b'\n') {
                Some(index) => (index + 1, true),
                None => (available.len(), false),
            };
            self.input.consume(length);
            self.ended = newline;
        }
    }
}

impl<R: BufRead> Read for LineReader<'_, R> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        if self.overrun.is_some() {
            return Err(std::io::Error::other("the line is over its budget"));
        }
        if self.ended || buffer.is_empty() {
            return Ok(0);
        }
        let available = match self.input.fill_buf() {
            Ok(available) => available,
            Err(error) => {
                let kind = error.kind();
                let message = error.to_string();
                self.failure.get_or_insert(error);
                return Err(std::io::Error::new(kind, message));
            }
        };
        if available.is_empty() {
            self.ended = true;
            return Ok(0);
        }
        let take = available.len().min(buffer.len());
        let (length, newline) = match available[..take].iter().position(|byte| *byte == b'\n') {
            Some(index) => (index, true),
            None => (take, false),
        };
        if let Err(overrun) = self.scanner.feed(&available[..length]) {
            self.overrun = Some(overrun);
            return Err(std::io::Error::other(overrun.detail()));
        }
        buffer[..length].copy_from_slice(&available[..length]);
        self.input.consume(length + usize::from(newline));
        self.ended = newline;
        Ok(length)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;

    fn messages(text: &[u8], limits: MessageLimits) -> Vec<String> {
        let mut input = std::io::BufReader::with_capacity(4, text);
        let mut seen = Vec::new();
        loop {
            match next_message(&mut input, limits).unwrap() {
                Incoming::Eof => return seen,
                Incoming::Blank => seen.push("<blank>".to_owned()),
                Incoming::Message(value) => seen.push(value.to_string()),
                Incoming::Refused(_, error) => seen.push(format!("<{}>", error.canonical_code().as_str())),
            }
        }
    }

    #[test]
    fn lines_are_parsed_one_by_one_and_refusals_skip_only_their_line() {
        let limits = MessageLimits {
            max_line_bytes: 12,
            max_batch: 2,
            max_values: 100,
            max_string_bytes: 100,
        };
        assert_eq!(
            messages(
                b"{\"a\":1}\n\"this one is far too long\"\n[1]\n  \n[1,2,3]\n{bad\n\"last\"",
                limits
            ),
            [
                "{\"a\":1}",
                "<INVALID_REQUEST>",
                "[1]",
                "<blank>",
                "<INVALID_REQUEST>",
                "<PARSE_ERROR>",
                "\"last\""
            ]
        );
        // A last line without a newline is bounded too.
        assert_eq!(
            messages(b"1\n12345678901234567890", limits),
            ["1", "<INVALID_REQUEST>"]
        );
        assert_eq!(messages(b"", limits), Vec::<String>::new());
        assert_eq!(messages(b"\"exactly12!\"\n", limits), ["\"exactly12!\""]);
        // Two values on one line are a parse error, not two messages.
        assert_eq!(messages(b"1 2\n3\n", limits), ["<PARSE_ERROR>", "3"]);
    }
}
