//! One blocking OTLP/HTTP request: `POST` over a TCP connection with
//! timeouts, HTTP/1.1, `Connection: close`; for an `https://` endpoint the
//! same request goes through TLS (rustls, the configuration the exporter
//! built, the server's certificate and name always verified). It reports
//! the status and never retries; the exporter decides what a failure means.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};

use crate::config::{ConfigError, ExportConfig};

/// Where a request goes: host, port and path of an `http://` or
/// `https://` URL, and for https the name the certificate must carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    host: String,
    port: u16,
    path: String,
    /// `Some` for https: the DNS name (sent as SNI) or IP address the
    /// collector's certificate is checked against.
    server_name: Option<ServerName<'static>>,
}

impl Target {
    /// Parses `http://host[:port][/path]` (port 80 by default) or
    /// `https://host[:port][/path]` (port 443).
    pub(crate) fn parse(url: &str) -> Result<Target, ConfigError> {
        let invalid = |reason| ConfigError::InvalidEndpoint {
            endpoint: url.to_owned(),
            reason,
        };
        let (rest, https) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (rest, false),
            (None, Some(rest)) => (rest, true),
            (None, None) => return Err(invalid("not an http:// or https:// URL")),
        };
        let default_port = if https { 443 } else { 80 };
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
                None if after.is_empty() => default_port,
                None => return Err(invalid("junk after the host")),
            };
            (host, port)
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host, port.parse().map_err(|_| invalid("port is not a number"))?),
                None => (authority, default_port),
            }
        };
        if host.is_empty() || authority.contains('@') {
            return Err(invalid("no host (or user info, which is not supported)"));
        }
        let server_name = if https {
            Some(
                ServerName::try_from(host.to_owned())
                    .map_err(|_| invalid("the host is neither a DNS name nor an IP address"))?,
            )
        } else {
            None
        };
        Ok(Target {
            host: host.to_owned(),
            port,
            path: path.to_owned(),
            server_name,
        })
    }

    /// Whether requests go through TLS.
    pub(crate) fn is_https(&self) -> bool {
        self.server_name.is_some()
    }
}

/// Why a request did not get a 2xx.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SendError {
    /// No connection, or it broke.
    #[error("cannot reach the collector: {0}")]
    Unreachable(String),
    /// The TLS handshake failed: a certificate not trusted or not for the
    /// collector's name, a client certificate the collector refused.
    #[error("TLS handshake with the collector failed: {0}")]
    Handshake(String),
    /// The collector answered with this status.
    #[error("the collector answered {0}")]
    Refused(u16),
    /// The answer was not HTTP.
    #[error("the collector's answer is not HTTP: {0}")]
    Garbled(String),
}

/// A target ready for requests: for https, with the TLS client
/// configuration built once (trusted roots, client certificate).
#[derive(Debug)]
pub(crate) struct Endpoint {
    target: Target,
    tls: Option<Tls>,
}

#[derive(Debug)]
struct Tls {
    name: ServerName<'static>,
    config: Arc<ClientConfig>,
}

impl Endpoint {
    /// The configuration's endpoint; for https, its TLS configuration is
    /// built here (reading the platform's roots and the configured files).
    pub(crate) fn open(config: &ExportConfig) -> Result<Endpoint, ConfigError> {
        let target = Target::parse(&config.endpoint)?;
        let tls = match target.server_name.clone() {
            Some(name) => Some(Tls {
                name,
                config: crate::tls::client_config(config)?,
            }),
            None => None,
        };
        Ok(Endpoint { target, tls })
    }
}

/// POSTs `body` and returns the status when it is 2xx.
pub(crate) fn post(
    endpoint: &Endpoint,
    headers: &[(String, String)],
    content_type: &str,
    body: &[u8],
    timeout: Duration,
) -> Result<u16, SendError> {
    let target = &endpoint.target;
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
    let request = Request {
        target,
        headers,
        content_type,
        body,
    };
    let Some(tls) = &endpoint.tls else {
        return request.send(stream);
    };
    let handshake = |error: &dyn std::fmt::Display| SendError::Handshake(error.to_string());
    let mut connection = ClientConnection::new(Arc::clone(&tls.config), tls.name.clone())
        .map_err(|error| handshake(&error))?;
    while connection.is_handshaking() {
        connection
            .complete_io(&mut stream)
            .map_err(|error| handshake(&error))?;
    }
    request.send(StreamOwned::new(connection, stream))
}

/// One request, sent over a connected (plain or TLS) stream.
struct Request<'a> {
    target: &'a Target,
    headers: &'a [(String, String)],
    content_type: &'a str,
    body: &'a [u8],
}

impl Request<'_> {
    fn send(&self, mut stream: impl Read + Write) -> Result<u16, SendError> {
        let Request {
            target,
            headers,
            content_type,
            body,
        } = *self;
        let unreachable = |error: std::io::Error| SendError::Unreachable(error.to_string());
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
}
