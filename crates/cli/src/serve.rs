//! `plan-checkpoint serve`: protocol v9 JSON-RPC over stdio.
//!
//! One JSON message per line on stdin; responses and notifications, one per
//! line, on stdout; logs on stderr only. The host is opened (lock,
//! migration, startup fence) before the first line is read, so no request is
//! ever served before recovery. EOF on stdin closes the host and exits 0.
//! This module frames lines and nothing else: every answer comes from
//! `plan_host::Connection`.

pub(crate) use crate::commands::CommandArgs;
use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use plan_core::{ErrorCode, Limits};
use plan_host::{Connection, ExpiryDriver, Host, HostOptions};
use plan_protocol::{ErrorObject, Notification, Response};

/// What `serve` needs to start.
#[derive(Debug, Clone)]
pub(crate) struct ServeOptions {
    /// Approval TTL in milliseconds.
    pub(crate) approval_ttl_ms: i64,
    /// Largest SubmitPlan markdown in bytes.
    pub(crate) markdown_limit_bytes: usize,
    /// Host-run command options.
    pub(crate) commands: CommandArgs,
}

/// Stdout shared by responses and notifications; one whole line at a time.
type SharedOut = Arc<Mutex<std::io::Stdout>>;

fn write_line(out: &SharedOut, line: &str) {
    let mut out = out.lock().unwrap_or_else(PoisonError::into_inner);
    // A closed stdout means the client went away; EOF on stdin follows.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The longest accepted line: the markdown limit with room for JSON string
/// escapes (a control byte becomes six characters) and the envelope.
fn max_line_bytes(markdown_limit_bytes: usize) -> usize {
    markdown_limit_bytes.saturating_mul(6).saturating_add(1024 * 1024)
}

/// Runs the sidecar until stdin closes. Returns the process exit code.
pub(crate) fn run(database: &Path, options: &ServeOptions) -> i32 {
    let out: SharedOut = Arc::new(Mutex::new(std::io::stdout()));
    let host_options = options.commands.host_options(HostOptions {
        limits: Limits {
            approval_ttl_ms: options.approval_ttl_ms,
            markdown_limit_bytes: options.markdown_limit_bytes,
            ..Limits::default()
        },
        ..HostOptions::default()
    });
    let host = match Host::open(database, host_options) {
        Ok(host) => Arc::new(host),
        Err(error) => {
            let code = error.code();
            eprintln!("plan-checkpoint serve: {}: {}", code.as_str(), error.message());
            // Tell a JSON-RPC client too, in the only form it can read before
            // it has sent anything: an error response with a null id.
            let response = Response::error(None, plan_host::error_object(&error));
            if let Ok(line) = serde_json::to_string(&response) {
                write_line(&out, &line);
            }
            return crate::exit::DATABASE_REFUSED;
        }
    };
    let migration = host.migration();
    eprintln!(
        "plan-checkpoint serve: ready on {} (schema {} -> {})",
        database.display(),
        migration
            .from
            .map_or("new".to_owned(), |version| version.to_string()),
        migration.to
    );
    host.add_listener(Arc::new({
        let out = Arc::clone(&out);
        move |notification| {
            if let Ok(line) = serde_json::to_string(&Notification::new(notification)) {
                write_line(&out, &line);
            }
        }
    }));
    let driver = match ExpiryDriver::spawn(Arc::clone(&host)) {
        Ok(driver) => driver,
        Err(error) => {
            eprintln!("plan-checkpoint serve: cannot start the expiry timer: {error}");
            return crate::exit::FAILURE;
        }
    };
    let mut connection = Connection::new(Arc::clone(&host));
    let limit = max_line_bytes(options.markdown_limit_bytes);
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    loop {
        match read_bounded_line(&mut input, limit) {
            Ok(Line::Eof) => break,
            Ok(Line::Text(bytes)) => {
                let reply = match std::str::from_utf8(&bytes) {
                    Ok(text) if text.trim().is_empty() => None,
                    Ok(text) => connection.handle_line(text),
                    Err(_) => error_line(ErrorCode::ParseError, "the line is not UTF-8"),
                };
                if let Some(reply) = reply {
                    write_line(&out, &reply);
                }
            }
            Ok(Line::TooLong) => {
                let detail = format!("the line is longer than {limit} bytes");
                if let Some(reply) = error_line(ErrorCode::InvalidRequest, &detail) {
                    write_line(&out, &reply);
                }
            }
            Err(error) => {
                eprintln!("plan-checkpoint serve: reading stdin failed: {error}");
                break;
            }
        }
    }
    drop(driver);
    host.close();
    eprintln!("plan-checkpoint serve: stdin closed, shutting down");
    crate::exit::OK
}

fn error_line(code: ErrorCode, detail: &str) -> Option<String> {
    serde_json::to_string(&Response::error(None, ErrorObject::with_detail(code, detail))).ok()
}

enum Line {
    Text(Vec<u8>),
    TooLong,
    Eof,
}

/// Reads one `\n`-terminated line without ever buffering more than `limit`
/// bytes of it; the rest of an oversized line is skipped.
fn read_bounded_line(input: &mut impl BufRead, limit: usize) -> std::io::Result<Line> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let available = input.fill_buf()?;
        if available.is_empty() {
            return Ok(match (line.is_empty() && !too_long, too_long) {
                (true, _) => Line::Eof,
                (false, true) => Line::TooLong,
                (false, false) => Line::Text(line),
            });
        }
        let (chunk, found_newline) = match available.iter().position(|byte| *byte == b'\n') {
            Some(index) => (&available[..index], true),
            None => (available, false),
        };
        if !too_long {
            if line.len() + chunk.len() > limit {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let consumed = chunk.len() + usize::from(found_newline);
        input.consume(consumed);
        if found_newline {
            return Ok(if too_long { Line::TooLong } else { Line::Text(line) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &[u8], limit: usize) -> Vec<String> {
        let mut input = std::io::BufReader::with_capacity(4, text);
        let mut seen = Vec::new();
        loop {
            match read_bounded_line(&mut input, limit).unwrap() {
                Line::Eof => return seen,
                Line::TooLong => seen.push("<too long>".to_owned()),
                Line::Text(bytes) => seen.push(String::from_utf8(bytes).unwrap()),
            }
        }
    }

    #[test]
    fn bounded_lines_skip_oversized_ones_and_keep_going() {
        assert_eq!(
            lines(b"short\nthis one is far too long\nok\nlast-no-nl", 10),
            ["short", "<too long>", "ok", "last-no-nl"]
        );
        // A last line without a newline is bounded too.
        assert_eq!(lines(b"ok\nlast-no-newline", 10), ["ok", "<too long>"]);
        assert_eq!(lines(b"", 10), Vec::<String>::new());
        assert_eq!(lines(b"exactly10!\n", 10), ["exactly10!"]);
    }
}
