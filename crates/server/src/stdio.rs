//! The stdio transport: protocol v9 JSON-RPC over stdin and stdout.
//!
//! One JSON message per line on stdin; responses and notifications, one per
//! line, on stdout; logs on stderr only. The host is opened (lock,
//! migration, startup fence) before the first line is read, so no request is
//! ever served before recovery. EOF on stdin closes the host and ends
//! [`serve_stdio`]. With [`HostOptions::web`] set it also runs the approval
//! card server beside stdio and prints each pending card's URL on stderr.
//! This module frames lines and nothing else: every answer
//! comes from [`Connection`], every budget from the protocol's
//! `MessageLimits`, and how the process exits is the caller's.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use plan_host::{Host, HostError, HostOptions};
use plan_protocol::{ErrorObject, MessageLimits, Notification, RequestId, Response, ServerNotification};
use serde_json::Value;

use crate::connection::{Connection, INTERNAL_ERROR_LINE, SERVER_NAME, empty_batch};
use crate::convert::error_object;
use crate::inbound::{Incoming, next_message};
use crate::log;
use crate::outbound::Outbound;
use crate::web::WebCard;

/// Why [`serve_stdio`] could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The host refused to open (the database is missing, of another schema,
    /// corrupt or locked by another host). It was logged on stderr and told
    /// to the client as an error response with a null id.
    #[error("{}", .0.message())]
    Open(#[from] HostError),
    /// The stdout writer thread could not start; the host was closed again.
    #[error("cannot start the stdout writer: {0}")]
    Writer(std::io::Error),
    /// The approval card server of [`HostOptions::web`] could not start
    /// (its address is taken or not local); told like a refused open, and
    /// the host was closed again.
    #[error("{}", .0.message())]
    Web(HostError),
}

/// How long the writer may take to flush what is queued once stdin closed.
const FLUSH_PATIENCE: Duration = Duration::from_secs(10);

/// Tells the client and stderr that serving cannot start: a log line, and an
/// error response with a null id on stdout (the only form a client can read
/// before it has sent anything). [`serve_stdio`] does this for a refused
/// open; a frontend calls it for options it could not turn into
/// [`HostOptions`] (limits out of range).
pub fn refuse_start(error: &HostError) {
    log::line(&format!(
        "{SERVER_NAME} serve: {}: {}",
        error.code().as_str(),
        error.message()
    ));
    let line = serde_json::to_string(&Response::error(None, error_object(error)))
        .unwrap_or_else(|_| INTERNAL_ERROR_LINE.to_owned());
    let mut out = std::io::stdout().lock();
    // A closed stdout means the client went away; there is no one to tell.
    let _unwritable = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// The serialized form of a JSON-RPC error response.
fn error_line(id: Option<RequestId>, error: ErrorObject) -> String {
    serde_json::to_string(&Response::error(id, error)).unwrap_or_else(|_| INTERNAL_ERROR_LINE.to_owned())
}

fn to_line(reply: &Value) -> String {
    serde_json::to_string(reply).unwrap_or_else(|_| INTERNAL_ERROR_LINE.to_owned())
}

/// Opens the host on `database` with `options` and serves stdin until it
/// closes; then closes the host and lets stdout drain.
///
/// # Errors
///
/// [`ServeError::Open`] when the host refused to open (already told to the
/// client, see [`refuse_start`]); [`ServeError::Writer`] when stdout's
/// writer thread could not start. A failed read of stdin ends serving like
/// EOF does.
pub fn serve_stdio(database: &Path, options: HostOptions) -> Result<(), ServeError> {
    let host = match Host::open(database, options) {
        Ok(host) => Arc::new(host),
        Err(error) => {
            refuse_start(&error);
            return Err(ServeError::Open(error));
        }
    };
    let migration = host.migration();
    log::line(&format!(
        "{SERVER_NAME} serve: ready on {} (schema {} -> {})",
        database.display(),
        migration
            .from
            .map_or("new".to_owned(), |version| version.to_string()),
        migration.to
    ));
    let web = match WebCard::start_for(&host) {
        Ok(web) => web,
        Err(error) => {
            refuse_start(&error);
            host.close();
            return Err(ServeError::Web(error));
        }
    };
    if let Some(web) = &web {
        announce_web(web, host.web().is_some_and(|options| options.is_exposed()));
    }
    let outbound = match Outbound::spawn(std::io::stdout()) {
        Ok(outbound) => outbound,
        Err(error) => {
            stop_web(web.as_deref());
            host.close();
            return Err(ServeError::Writer(error));
        }
    };
    host.add_listener(Arc::new({
        let notifier = outbound.notifier();
        let web = web.as_ref().map(Arc::downgrade);
        move |event| {
            let notification = WebCard::notification_of(web.as_ref(), event);
            if let ServerNotification::PlanApprovalRequested(requested) = &notification
                && let Some(url) = &requested.card_url
            {
                announce_card(&requested.approval.id, url);
            }
            if let Ok(line) = serde_json::to_string(&Notification::new(notification)) {
                notifier.notify(line);
            }
        }
    }));
    let budget = MessageLimits::for_markdown_limit(host.limits().markdown_limit_bytes());
    let mut connection = Connection::with_web(Arc::clone(&host), web.clone());
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    loop {
        match next_message(&mut input, budget) {
            Ok(Incoming::Eof) => break,
            Ok(Incoming::Blank) => {}
            Ok(Incoming::Refused(id, error)) => outbound.line(error_line(id, error)),
            Ok(Incoming::Message(Value::Array(batch))) => answer_batch(&mut connection, batch, &outbound),
            Ok(Incoming::Message(message)) => {
                if let Some(reply) = connection.handle_single(message) {
                    outbound.line(to_line(&reply));
                }
            }
            Err(error) => {
                log::line(&format!("{SERVER_NAME} serve: reading stdin failed: {error}"));
                break;
            }
        }
        // The notifications of a message that got no answer leave now.
        outbound.flush_queued();
    }
    // Open pages hear that the host stops; then closing stops the host's
    // expiry timer too.
    stop_web(web.as_deref());
    host.close();
    outbound.finish(FLUSH_PATIENCE);
    log::line(&format!("{SERVER_NAME} serve: stdin closed, shutting down"));
    Ok(())
}

/// Says on stderr where the card server listens, with the warning an
/// address other than loopback needs.
fn announce_web(web: &WebCard, exposed: bool) {
    log::line(&format!(
        "{SERVER_NAME} serve: approval cards at {}",
        web.base_url()
    ));
    if exposed {
        log::line(&format!(
            "{SERVER_NAME} serve: WARNING: {} is not a loopback address: anyone on that network \
             who sees a card's URL can approve or reject the plan",
            web.address()
        ));
    }
}

/// Tells the person on stderr that an approval is pending. Its card URL
/// (and its QR code, for a phone) only when stderr is a terminal: the URL
/// carries the token, a secret of the person's that must never reach a
/// log, a file or a pipe another process may read (P11 of the sandbox
/// spec). The host's own client gets the URL either way
/// (`plan/approvalRequested`, `plan/cardUrl`).
fn announce_card(approval_id: &plan_core::ApprovalId, url: &str) {
    if !std::io::stderr().is_terminal() {
        log::line(&format!(
            "{SERVER_NAME} serve: approval {approval_id} is pending; its card URL went to the client \
             (plan/approvalRequested, plan/cardUrl) and is printed here only on a terminal"
        ));
        return;
    }
    log::line(&format!(
        "{SERVER_NAME} serve: approval {approval_id} is pending: open {url}"
    ));
    if let Some(code) = crate::web::qr::render(url) {
        log::line(code.trim_end_matches('\n'));
    }
}

fn stop_web(web: Option<&WebCard>) {
    if let Some(web) = web {
        web.stop();
    }
}

/// Answers a batch one message at a time, queuing each answer as soon as it
/// exists, so only one answer is ever held; a batch of notifications only
/// gets no answer at all (JSON-RPC 2.0). An empty batch gets the
/// connection's one refusal of it.
fn answer_batch(connection: &mut Connection, batch: Vec<Value>, outbound: &Outbound) {
    if batch.is_empty() {
        outbound.line(to_line(&empty_batch()));
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
