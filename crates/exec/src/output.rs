//! Turning the raw bytes of stdout and stderr into output events: UTF-8
//! repair that never splits a character, one `seq` across both streams in
//! arrival order, coalescing, the retained-output cap with exact byte counts,
//! and the output hashes (over exactly the text delivered in events).
//!
//! This module does no I/O and reads no clock: the runner feeds it bytes with
//! the time they arrived and asks it when the pending chunk is due.

use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// Bytes pending in the current chunk beyond which it is sent at once.
pub(crate) const COALESCE_BYTES: usize = 4096;

/// How long the first byte of a chunk may wait for more to join it.
pub(crate) const COALESCE_DELAY: Duration = Duration::from_millis(5);

/// Which output stream a chunk came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    fn index(self) -> usize {
        match self {
            Stream::Stdout => 0,
            Stream::Stderr => 1,
        }
    }
}

/// One piece of output, delivered to an [`OutputSink`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputEvent {
    /// The stream it came from.
    pub stream: Stream,
    /// Position among all events of this command, from 0, one counter
    /// across both streams, in arrival order.
    pub seq: u64,
    /// Valid UTF-8 text; never ends inside a character; invalid input bytes
    /// became U+FFFD.
    pub chunk: String,
}

/// Receives output events on the command's pump thread, in `seq` order.
pub trait OutputSink: Send + 'static {
    /// Called once per event.
    fn output(&mut self, event: OutputEvent);
}

impl<F> OutputSink for F
where
    F: FnMut(OutputEvent) + Send + 'static,
{
    fn output(&mut self, event: OutputEvent) {
        self(event)
    }
}

/// Incremental UTF-8 decoding: keeps an incomplete trailing sequence until
/// the next bytes complete it, replaces every invalid sequence with U+FFFD
/// (one replacement per maximal invalid subpart, as `String::from_utf8_lossy`
/// does).
#[derive(Debug, Default)]
pub(crate) struct Utf8Decoder {
    /// At most three bytes of a character that has not ended yet.
    carry: Vec<u8>,
}

impl Utf8Decoder {
    /// Appends the text decodable from `bytes` to `out`.
    pub(crate) fn decode_into(&mut self, bytes: &[u8], out: &mut String) {
        let joined;
        let mut input: &[u8] = if self.carry.is_empty() {
            bytes
        } else {
            let mut buffer = std::mem::take(&mut self.carry);
            buffer.extend_from_slice(bytes);
            joined = buffer;
            &joined
        };
        loop {
            match std::str::from_utf8(input) {
                Ok(text) => {
                    out.push_str(text);
                    return;
                }
                Err(error) => {
                    let (valid, rest) = input.split_at(error.valid_up_to());
                    // `valid` is valid UTF-8 by construction of `valid_up_to`.
                    out.push_str(&String::from_utf8_lossy(valid));
                    match error.error_len() {
                        Some(invalid) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            input = &rest[invalid..];
                        }
                        None => {
                            self.carry = rest.to_vec();
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Ends the stream: an incomplete trailing sequence becomes U+FFFD.
    pub(crate) fn finish_into(&mut self, out: &mut String) {
        if !self.carry.is_empty() {
            self.carry.clear();
            out.push(char::REPLACEMENT_CHARACTER);
        }
    }

    /// Forgets an incomplete trailing sequence (used when the cap cuts it).
    pub(crate) fn discard(&mut self) {
        self.carry.clear();
    }
}

/// Counts, hashes, decodes, caps and coalesces both streams of one command.
pub(crate) struct OutputCollector {
    cap: u64,
    retained: u64,
    truncated: bool,
    bytes: [u64; 2],
    hashers: [Sha256; 2],
    decoders: [Utf8Decoder; 2],
    next_seq: u64,
    pending: Option<Pending>,
    scratch: String,
}

struct Pending {
    stream: Stream,
    text: String,
    since: Instant,
}

/// The final numbers of a collector.
pub(crate) struct OutputTotals {
    pub(crate) stdout_bytes: u64,
    pub(crate) stderr_bytes: u64,
    pub(crate) truncated: bool,
    pub(crate) stdout_sha256: String,
    pub(crate) stderr_sha256: String,
    pub(crate) output_sha256: String,
}

impl OutputCollector {
    pub(crate) fn new(cap: u64) -> Self {
        Self {
            cap,
            retained: 0,
            truncated: false,
            bytes: [0, 0],
            hashers: [Sha256::new(), Sha256::new()],
            decoders: [Utf8Decoder::default(), Utf8Decoder::default()],
            next_seq: 0,
            pending: None,
            scratch: String::new(),
        }
    }

    /// Takes bytes that arrived on `stream` at `now`.
    pub(crate) fn push(&mut self, stream: Stream, bytes: &[u8], now: Instant, sink: &mut dyn OutputSink) {
        let index = stream.index();
        self.bytes[index] += bytes.len() as u64;
        if self.truncated || bytes.is_empty() {
            return;
        }
        let room = self.cap - self.retained;
        let take = usize::try_from(room).map_or(bytes.len(), |room| room.min(bytes.len()));
        self.retained += take as u64;
        let mut text = std::mem::take(&mut self.scratch);
        text.clear();
        self.decoders[index].decode_into(&bytes[..take], &mut text);
        if take < bytes.len() {
            self.truncated = true;
            for decoder in &mut self.decoders {
                decoder.discard();
            }
        }
        self.append(stream, &text, now, sink);
        self.scratch = text;
        if self.truncated {
            self.flush(sink);
        }
    }

    /// Ends `stream` (its pipe reached end of file).
    pub(crate) fn finish_stream(&mut self, stream: Stream, now: Instant, sink: &mut dyn OutputSink) {
        if self.truncated {
            return;
        }
        let mut text = String::new();
        self.decoders[stream.index()].finish_into(&mut text);
        self.append(stream, &text, now, sink);
    }

    fn append(&mut self, stream: Stream, text: &str, now: Instant, sink: &mut dyn OutputSink) {
        if text.is_empty() {
            return;
        }
        if self
            .pending
            .as_ref()
            .is_some_and(|pending| pending.stream != stream)
        {
            self.flush(sink);
        }
        match &mut self.pending {
            Some(pending) => pending.text.push_str(text),
            None => {
                self.pending = Some(Pending {
                    stream,
                    text: text.to_owned(),
                    since: now,
                });
            }
        }
        if self
            .pending
            .as_ref()
            .is_some_and(|pending| pending.text.len() >= COALESCE_BYTES)
        {
            self.flush(sink);
        }
    }

    /// When the pending chunk must be sent, if there is one.
    pub(crate) fn due(&self) -> Option<Instant> {
        self.pending
            .as_ref()
            .map(|pending| pending.since + COALESCE_DELAY)
    }

    /// Sends the pending chunk, if any.
    pub(crate) fn flush(&mut self, sink: &mut dyn OutputSink) {
        if let Some(pending) = self.pending.take() {
            self.hashers[pending.stream.index()].update(pending.text.as_bytes());
            let seq = self.next_seq;
            self.next_seq += 1;
            sink.output(OutputEvent {
                stream: pending.stream,
                seq,
                chunk: pending.text,
            });
        }
    }

    pub(crate) fn totals(self) -> OutputTotals {
        let [stdout_hasher, stderr_hasher] = self.hashers;
        let stdout_digest = stdout_hasher.finalize();
        let stderr_digest = stderr_hasher.finalize();
        let mut combined = Sha256::new();
        combined.update(stdout_digest);
        combined.update(stderr_digest);
        OutputTotals {
            stdout_bytes: self.bytes[0],
            stderr_bytes: self.bytes[1],
            truncated: self.truncated,
            stdout_sha256: hex::encode(stdout_digest),
            stderr_sha256: hex::encode(stderr_digest),
            output_sha256: hex::encode(combined.finalize()),
        }
    }
}
