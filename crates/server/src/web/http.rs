//! The little HTTP/1.1 the approval page needs, strictly bounded: one
//! request per connection (every response says `Connection: close`), a
//! head of at most [`MAX_HEAD_BYTES`], a body of at most [`MAX_BODY_BYTES`]
//! sized by `Content-Length` (no chunked bodies), the whole request read
//! before a deadline, and every response carrying the page's security
//! headers. It parses and writes; which request gets which answer is
//! `routes`' business.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The longest request line plus headers accepted.
pub(crate) const MAX_HEAD_BYTES: usize = 8 * 1024;
/// The longest request body accepted (a decision is about 200 bytes).
pub(crate) const MAX_BODY_BYTES: usize = 4 * 1024;
/// At most this many header lines.
const MAX_HEADERS: usize = 64;

/// The headers of every response. The page runs only its own script
/// (`script-src 'self'`, no inline script), talks only to its own origin,
/// loads nothing else, cannot be framed, leaks no URL (and so no token) in
/// a `Referer`, and is never cached. No `Access-Control-*` header is ever
/// sent: other origins get no CORS access.
pub(crate) const SECURITY_HEADERS: &[(&str, &str)] = &[
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'none'; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
];

/// One parsed request.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) target: String,
    /// Header names lower-cased, in arrival order.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Request {
    /// The value of a header that must appear at most once; `Err` when it
    /// appears twice (a request smuggling two Hosts or Origins is refused).
    pub(crate) fn single_header(&self, name: &str) -> Result<Option<&str>, Refusal> {
        let mut values = self
            .headers
            .iter()
            .filter(|(key, _)| key == name)
            .map(|(_, value)| value.as_str());
        let first = values.next();
        if values.next().is_some() {
            return Err(Refusal::new(400, "a header appears twice"));
        }
        Ok(first)
    }
}

/// A request refused before routing, with its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) status: u16,
    pub(crate) reason: &'static str,
}

impl Refusal {
    pub(crate) const fn new(status: u16, reason: &'static str) -> Refusal {
        Refusal { status, reason }
    }
}

/// Reads one request, giving up at `deadline` (a client that sends slowly
/// or not at all keeps its connection thread no longer than that).
pub(crate) fn read_request(stream: &mut TcpStream, deadline: Instant) -> Result<Request, Refusal> {
    let mut buffer = Vec::with_capacity(1024);
    let head_end = loop {
        if let Some(end) = find_head_end(&buffer) {
            break end;
        }
        if buffer.len() >= MAX_HEAD_BYTES {
            return Err(Refusal::new(431, "the request head is too large"));
        }
        let room = MAX_HEAD_BYTES + MAX_BODY_BYTES - buffer.len();
        read_some(stream, &mut buffer, room.min(4096), deadline)?;
    };
    if head_end > MAX_HEAD_BYTES {
        return Err(Refusal::new(431, "the request head is too large"));
    }
    let head = std::str::from_utf8(&buffer[..head_end])
        .map_err(|_| Refusal::new(400, "the request head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refusal::new(400, "a malformed request line"));
    };
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(Refusal::new(505, "only HTTP/1.1 is served"));
    }
    if !target.starts_with('/') {
        return Err(Refusal::new(400, "the target must be a path"));
    }
    let mut headers = Vec::new();
    for line in lines {
        if headers.len() == MAX_HEADERS {
            return Err(Refusal::new(431, "too many headers"));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(Refusal::new(400, "a malformed header"));
        };
        if name.is_empty() || name.contains([' ', '\t']) {
            return Err(Refusal::new(400, "a malformed header name"));
        }
        headers.push((
            name.to_ascii_lowercase(),
            value.trim_matches([' ', '\t']).to_owned(),
        ));
    }
    let mut request = Request {
        method: method.to_owned(),
        target: target.to_owned(),
        headers,
        body: Vec::new(),
    };
    if request.single_header("transfer-encoding")?.is_some() {
        return Err(Refusal::new(501, "only Content-Length bodies are read"));
    }
    let length = match request.single_header("content-length")? {
        None => 0,
        Some(text) if !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) => {
            text.parse::<usize>().unwrap_or(usize::MAX)
        }
        Some(_) => return Err(Refusal::new(400, "a malformed Content-Length")),
    };
    if length > MAX_BODY_BYTES {
        return Err(Refusal::new(413, "the request body is too large"));
    }
    let mut body = buffer.split_off(head_end + 4);
    while body.len() < length {
        let missing = length - body.len();
        read_some(stream, &mut body, missing, deadline)?;
    }
    body.truncate(length);
    request.body = body;
    Ok(request)
}

fn find_head_end(buffer: &[u8]) -> Option<usize> {
    buffer.windows(4).position(|window| window == b"\r\n\r\n")
}

/// Reads up to `at_most` more bytes, waiting no later than `deadline`.
fn read_some(
    stream: &mut TcpStream,
    buffer: &mut Vec<u8>,
    at_most: usize,
    deadline: Instant,
) -> Result<(), Refusal> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(Refusal::new(408, "the request took too long"));
    }
    stream
        .set_read_timeout(Some(left.max(Duration::from_millis(1))))
        .map_err(|_| Refusal::new(500, "the connection failed"))?;
    let mut chunk = [0_u8; 4096];
    let wanted = at_most.clamp(1, chunk.len());
    match stream.read(&mut chunk[..wanted]) {
        Ok(0) => Err(Refusal::new(400, "the client closed the connection")),
        Ok(read) => {
            buffer.extend_from_slice(&chunk[..read]);
            Ok(())
        }
        Err(error)
            if matches!(
                error.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Err(Refusal::new(408, "the request took too long"))
        }
        Err(_) => Err(Refusal::new(400, "reading the request failed")),
    }
}

/// One response, written whole.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: Vec<u8>,
}

impl Response {
    pub(crate) fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            content_type,
            body: body.into(),
        }
    }

    /// A plain-text answer that says only its status (a refused token says
    /// "not found", whatever part of it was wrong).
    pub(crate) fn plain(status: u16) -> Response {
        Response::new(
            status,
            "text/plain; charset=utf-8",
            format!("{}\n", reason(status)),
        )
    }

    pub(crate) fn json(status: u16, value: &impl serde::Serialize) -> Response {
        match serde_json::to_string(value) {
            Ok(body) => Response::new(status, "application/json", body),
            Err(_) => Response::plain(500),
        }
    }
}

/// The head of a response: status line, security headers, type, length.
fn head(status: u16, content_type: &str, length: usize) -> String {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in SECURITY_HEADERS {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("Content-Type: ");
    head.push_str(content_type);
    head.push_str("\r\n");
    head.push_str(&format!("Content-Length: {length}\r\n"));
    head.push_str("Connection: close\r\n\r\n");
    head
}

/// Writes a response; a client that does not read is given up on after the
/// stream's write timeout.
pub(crate) fn write_response(stream: &mut TcpStream, response: &Response) -> std::io::Result<()> {
    let mut bytes = head(response.status, response.content_type, response.body.len()).into_bytes();
    bytes.extend_from_slice(&response.body);
    stream.write_all(&bytes)?;
    stream.flush()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}
