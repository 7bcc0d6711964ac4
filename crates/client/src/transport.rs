//! How messages travel: the [`Transport`] contract (one JSON message per
//! line, each way) and [`LineTransport`], which frames lines over the
//! project host's Unix socket or over a child's stdio. A transport moves
//! and frames lines; it knows nothing of requests, ids or methods (the
//! [`crate::Client`] does) and starts no process.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::time::Duration;

use crate::ClientError;

/// The longest line accepted from a peer: a result holds at most one plan
/// (8 MiB by default, 64 MiB at the host's largest setting) as JSON text.
const MAX_LINE_BYTES: u64 = 160 * 1024 * 1024;

/// What one wait for a line gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// One line, without its newline.
    Line(String),
    /// Nothing came within the time given.
    TimedOut,
    /// The peer closed its end (or the line could not be read).
    Closed(String),
}

/// A channel of JSON-RPC lines to one peer.
pub trait Transport {
    /// Sends one message (a JSON text without a newline).
    ///
    /// # Errors
    ///
    /// [`ClientError::Unreachable`] when the peer is gone.
    fn send(&mut self, message: &str) -> Result<(), ClientError>;

    /// The next line from the peer, waiting at most `timeout` (`None`: as
    /// long as it takes).
    fn receive(&mut self, timeout: Option<Duration>) -> Received;
}

/// Newline-delimited JSON over a byte stream: the host's Unix socket
/// ([`LineTransport::connect`]) or a child's stdin and stdout
/// ([`LineTransport::from_stdio`]). Lines are read on a thread of their
/// own, so a wait can end at a timeout whatever the stream is.
pub struct LineTransport {
    writer: Box<dyn Write + Send>,
    lines: Receiver<Received>,
    /// Ends the reading thread's stream on drop (a socket's shutdown).
    on_drop: Option<Box<dyn FnOnce() + Send>>,
}

impl std::fmt::Debug for LineTransport {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("LineTransport").finish_non_exhaustive()
    }
}

impl LineTransport {
    /// Connects to a host's Unix socket.
    ///
    /// # Errors
    ///
    /// [`ClientError::Unreachable`] when nothing listens there.
    pub fn connect(socket: &Path) -> Result<LineTransport, ClientError> {
        let stream = UnixStream::connect(socket)
            .map_err(|error| ClientError::unreachable(format!("{}: {error}", socket.display())))?;
        LineTransport::from_socket(stream)
    }

    /// Frames lines over a connected Unix socket.
    ///
    /// # Errors
    ///
    /// [`ClientError::Unreachable`] when the socket cannot be shared with
    /// the reading thread.
    pub fn from_socket(stream: UnixStream) -> Result<LineTransport, ClientError> {
        let reader = stream.try_clone().map_err(ClientError::unreachable)?;
        let closer = stream.try_clone().map_err(ClientError::unreachable)?;
        let mut transport = LineTransport::from_stdio(reader, stream)?;
        transport.on_drop = Some(Box::new(move || {
            let _ = closer.shutdown(std::net::Shutdown::Both);
        }));
        Ok(transport)
    }

    /// Frames lines over a reader and a writer: a `plan-checkpoint serve`
    /// child's stdout and stdin, as the caller spawned it.
    ///
    /// # Errors
    ///
    /// [`ClientError::Unreachable`] when the reading thread cannot start.
    pub fn from_stdio(
        reader: impl Read + Send + 'static,
        writer: impl Write + Send + 'static,
    ) -> Result<LineTransport, ClientError> {
        let (sender, lines) = sync_channel(64);
        std::thread::Builder::new()
            .name("plan-client-reader".into())
            .spawn(move || read_lines(reader, &sender))
            .map_err(ClientError::unreachable)?;
        Ok(LineTransport {
            writer: Box::new(writer),
            lines,
            on_drop: None,
        })
    }
}

fn read_lines(reader: impl Read, sender: &SyncSender<Received>) {
    let mut reader = BufReader::new(reader);
    loop {
        let mut line = Vec::new();
        let read = (&mut reader).take(MAX_LINE_BYTES).read_until(b'\n', &mut line);
        let received = match read {
            Ok(0) => Received::Closed("the host closed the connection".to_owned()),
            Ok(_) if line.last() != Some(&b'\n') && line.len() as u64 >= MAX_LINE_BYTES => {
                Received::Closed(format!("a line longer than {MAX_LINE_BYTES} bytes"))
            }
            Ok(_) => {
                while line.last().is_some_and(|byte| *byte == b'\n' || *byte == b'\r') {
                    line.pop();
                }
                match String::from_utf8(line) {
                    Ok(text) => Received::Line(text),
                    Err(_) => Received::Closed("a line that is not UTF-8".to_owned()),
                }
            }
            Err(error) => Received::Closed(format!("reading from the host: {error}")),
        };
        let closed = matches!(received, Received::Closed(_));
        if sender.send(received).is_err() || closed {
            return;
        }
    }
}

impl Transport for LineTransport {
    fn send(&mut self, message: &str) -> Result<(), ClientError> {
        let mut line = Vec::with_capacity(message.len() + 1);
        line.extend_from_slice(message.as_bytes());
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .and_then(|()| self.writer.flush())
            .map_err(|error| ClientError::unreachable(format!("the host went away: {error}")))
    }

    fn receive(&mut self, timeout: Option<Duration>) -> Received {
        let received = match timeout {
            Some(timeout) => self.lines.recv_timeout(timeout),
            None => self.lines.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match received {
            Ok(received) => received,
            Err(RecvTimeoutError::Timeout) => Received::TimedOut,
            Err(RecvTimeoutError::Disconnected) => {
                Received::Closed("the host closed the connection".to_owned())
            }
        }
    }
}

impl Drop for LineTransport {
    fn drop(&mut self) {
        if let Some(close) = self.on_drop.take() {
            close();
        }
    }
}
