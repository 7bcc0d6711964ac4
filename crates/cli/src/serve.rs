//! `plan-checkpoint serve`: protocol v9 JSON-RPC over stdio.
//!
//! One JSON message per line on stdin; responses and notifications, one per
//! line, on stdout; logs on stderr only. The host is opened (lock,
//! migration, startup fence) before the first line is read, so no request is
//! ever served before recovery. EOF on stdin closes the host and exits 0.
//! This module frames lines and nothing else: every answer comes from
//! `plan_host::Connection`.

pub(crate) use crate::commands::CommandArgs;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use plan_core::{ErrorCode, Limits};
use plan_host::{Connection, Host, HostOptions};
use plan_protocol::{ErrorObject, MessageLimits, Notification, Response};
use serde_json::Value;

use crate::inbound::{Incoming, next_message};
use crate::log;
use crate::outbound::Outbound;

/// What `serve` needs to start.
#[derive(Debug, Clone)]
pub(crate) struct ServeOptions {
    /// Approval TTL in milliseconds, as given (plan-core checks the range).
    pub(crate) approval_ttl_ms: i64,
    /// Largest SubmitPlan markdown in bytes, as given.
    pub(crate) markdown_limit_bytes: usize,
    /// Host-run command options.
    pub(crate) commands: CommandArgs,
}

/// How long the writer may take to flush what is queued once stdin closed.
const FLUSH_PATIENCE: Duration = Duration::from_secs(10);

/// Writes one line straight to stdout, before the writer thread exists.
fn write_line_now(line: &str) {
    let mut out = std::io::stdout().lock();
    // A closed stdout means the client went away; there is no one to tell.
    let _unwritable = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// The serialized form of a JSON-RPC error response with a null id.
fn error_line(error: ErrorObject) -> String {
    serde_json::to_string(&Response::error(None, error)).unwrap_or_else(|_| INTERNAL_ERROR_LINE.to_owned())
}

/// A response that needs no serialization, for when serializing failed.
const INTERNAL_ERROR_LINE: &str = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error","data":{"code":"INTERNAL"}}}"#;

fn to_line(reply: &Value) -> String {
    serde_json::to_string(reply).unwrap_or_else(|_| INTERNAL_ERROR_LINE.to_owned())
}

/// Runs the sidecar until stdin closes. Returns the process exit code.
pub(crate) fn run(database: &Path, options: &ServeOptions) -> i32 {
    // The one range rule for limits is plan-core's; a value it refuses is a
    // usage error, told on stderr and to a JSON-RPC client alike.
    let limits = match Limits::new(options.approval_ttl_ms, options.markdown_limit_bytes) {
        Ok(limits) => limits,
        Err(error) => {
            log::line(&format!(
                "plan-checkpoint serve: {}: {error}",
                error.code().as_str()
            ));
            write_line_now(&error_line(ErrorObject::with_detail(error.code(), &error)));
            return crate::exit::USAGE;
        }
    };
    let host_options = options.commands.host_options(HostOptions {
        limits,
        ..HostOptions::default()
    });
    let host = match Host::open(database, host_options) {
        Ok(host) => Arc::new(host),
        Err(error) => {
            let code = error.code();
            log::line(&format!(
                "plan-checkpoint serve: {}: {}",
                code.as_str(),
                error.message()
            ));
            // Tell a JSON-RPC client too, in the only form it can read before
            // it has sent anything: an error response with a null id.
            write_line_now(&error_line(plan_host::error_object(&error)));
            return crate::exit::DATABASE_REFUSED;
        }
    };
    let migration = host.migration();
    log::line(&format!(
        "plan-checkpoint serve: ready on {} (schema {} -> {})",
        database.display(),
        migration
            .from
            .map_or("new".to_owned(), |version| version.to_string()),
        migration.to
    ));
    let outbound = match Outbound::spawn(std::io::stdout()) {
        Ok(outbound) => outbound,
        Err(error) => {
            log::line(&format!(
                "plan-checkpoint serve: cannot start the stdout writer: {error}"
            ));
            host.close();
            return crate::exit::FAILURE;
        }
    };
    host.add_listener(Arc::new({
        let notifier = outbound.notifier();
        move |notification| {
            if let Ok(line) = serde_json::to_string(&Notification::new(notification)) {
                notifier.notify(line);
            }
        }
    }));
    let mut connection = Connection::new(Arc::clone(&host));
    let budget = MessageLimits::for_markdown_limit(limits.markdown_limit_bytes());
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    loop {
        match next_message(&mut input, budget) {
            Ok(Incoming::Eof) => break,
            Ok(Incoming::Blank) => {}
            Ok(Incoming::Refused(error)) => outbound.line(error_line(error)),
            Ok(Incoming::Message(Value::Array(batch))) => answer_batch(&mut connection, batch, &outbound),
            Ok(Incoming::Message(message)) => {
                if let Some(reply) = connection.handle_single(message) {
                    outbound.line(to_line(&reply));
                }
            }
            Err(error) => {
                log::line(&format!("plan-checkpoint serve: reading stdin failed: {error}"));
                break;
            }
        }
    }
    // Closing stops the host's expiry timer too.
    host.close();
    outbound.finish(FLUSH_PATIENCE);
    log::line("plan-checkpoint serve: stdin closed, shutting down");
    crate::exit::OK
}

/// Answers a batch one message at a time, queuing each answer as soon as it
/// exists, so only one answer is ever held; a batch of notifications only
/// gets no answer at all (JSON-RPC 2.0).
fn answer_batch(connection: &mut Connection, batch: Vec<Value>, outbound: &Outbound) {
    if batch.is_empty() {
        outbound.line(error_line(ErrorObject::with_detail(
            ErrorCode::InvalidRequest,
            "an empty batch",
        )));
        return;
    }
    let mut answered = false;
    for message in batch {
        let Some(reply) = connection.handle_single(message) else {
            continue;
        };
        let separator = if answered { "," } else { "[" };
        answered = true;
        outbound.piece(format!("{separator}{}", to_line(&reply)), false);
    }
    if answered {
        outbound.line("]".to_owned());
    }
}
