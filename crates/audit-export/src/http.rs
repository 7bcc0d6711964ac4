//! One blocking OTLP/HTTP request: `POST` over a plain TCP connection with
//! timeouts, HTTP/1.1, `Connection: close`. It reports the status and never
//! retries; the exporter decides what a failure means.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::config::ConfigError;

/// Where a request goes: host, port and path of an `http://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    host: String,
    port: u16,
    path: String,
}

impl Target {
    /// Parses `http://host[:port][/path]`.
    pub(crate) fn parse(url: &str) -> Result<Target, ConfigError> {
        let invalid = |reason| ConfigError::InvalidEndpoint {
            endpoint: url.to_owned(),
            reason,
        };
        if url.starts_with("https://") {
            return Err(invalid(
                "https is not supported by this build (send to a local collector over http)",
            ));
        }
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| invalid("not an http:// URL"))?;
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash..]),
            None => (rest, "/"),
        };
        let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
            let (host, after) = bracketed
                .split_once(']')
                .ok_or_else(|| invalid("unclosed [ in host"))?;
            let port = match after.strip_prefix(':') {
                Some(port) => port.parse().map_err(|_| invalid("port is not a number"))?,
                None if after.is_empty() => 80,
                None => return Err(invalid("junk after the host")),
            };
            (host, port)
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host, port.parse().map_err(|_| invalid("port is not a number"))?),
                None => (authority, 80),
            }
        };
        if host.is_empty() || authority.contains('@') {
            return Err(invalid("no host (or user info, which is not supported)"));
        }
        Ok(Target {
            host: host.to_owned(),
            port,
            path: path.to_owned(),
        })
    }
}

/// Why a request did not get a 2xx.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SendError {
    /// No connection, or it broke.
    #[error("cannot reach the collector: {0}")]
    Unreachable(String),
    /// The collector answered with this status.
    #[error("the collector answered {0}")]
    Refused(u16),
    /// The answer was not HTTP.
    #[error("the collector's answer is not HTTP: {0}")]
    Garbled(String),
}

/// POSTs `body` and returns the status when it is 2xx.
pub(crate) fn post(
    target: &Target,
    headers: &[(String, String)],
    content_type: &str,
    body: &[u8],
    timeout: Duration,
) -> Result<u16, SendError> {
    let unreachable = |error: std::io::Error| SendError::Unreachable(error.to_string());
    let addresses: Vec<_> = (target.host.as_str(), target.port)
        .to_socket_addrs()
        .map_err(unreachable)?
        .collect();
    let mut last = SendError::Unreachable("the host name has no address".to_owned());
    let mut stream = None;
    for address in addresses {
        match TcpStream::connect_timeout(&address, timeout) {
            Ok(connected) => {
                stream = Some(connected);
                break;
            }
            Err(error) => last = unreachable(error),
        }
    }
    let mut stream = stream.ok_or(last)?;
    stream.set_read_timeout(Some(timeout)).map_err(unreachable)?;
    stream.set_write_timeout(Some(timeout)).map_err(unreachable)?;
    let host = if target.host.contains(':') {
        format!("[{}]:{}", target.host, target.port)
    } else {
        format!("{}:{}", target.host, target.port)
    };
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         User-Agent: plan-checkpoint/{}\r\nConnection: close\r\n",
        target.path,
        body.len(),
        env!("CARGO_PKG_VERSION"),
    );
    for (name, value) in headers {
        // A header that would break the request line structure is dropped.
        if name.contains(['\r', '\n', ':']) || value.contains(['\r', '\n']) {
            continue;
        }
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).map_err(unreachable)?;
    stream.write_all(body).map_err(unreachable)?;
    stream.flush().map_err(unreachable)?;
    // The status line is all that matters; the body is read and dropped
    // (bounded) so the collector is not reset mid-answer.
    let mut answer = Vec::new();
    let mut buffer = [0_u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => {
                answer.extend_from_slice(&buffer[..read]);
                if answer.len() > 64 * 1024 {
                    break;
                }
            }
            Err(error) if answer.windows(4).any(|window| window == b"\r\n\r\n") => {
                let _ = error;
                break;
            }
            Err(error) => return Err(unreachable(error)),
        }
    }
    let line_end = answer
        .windows(2)
        .position(|window| window == b"\r\n")
        .unwrap_or(answer.len());
    let line = String::from_utf8_lossy(&answer[..line_end]).into_owned();
    let mut parts = line.split(' ');
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
        return Err(SendError::Garbled(line));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(SendError::Garbled(line));
    }
    let status: u16 = code.parse().map_err(|_| SendError::Garbled(line.clone()))?;
    if (200..300).contains(&status) {
        Ok(status)
    } else {
        Err(SendError::Refused(status))
    }
}
