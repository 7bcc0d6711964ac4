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

use crate::connection::{Connection, INTERNAL_ERROR_LINE, empty_batch};
use crate::convert::error_object;
use crate::inbound::{Incoming, next_message};
use crate::log;
use crate::method::SERVER_NAME;
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
    // Said at start, not first at the refusal: a wrong helper path or a
    // kernel without Landlock means every Plan-mode Bash call is refused.
    if let Some(reason) = host.command_capabilities().reason {
        log::line(&format!(
            "{SERVER_NAME} serve: Plan-mode Bash will be refused (PLAN_SANDBOX_UNAVAILABLE): {reason}"
        ));
    }
    let web = match WebCard::start_for(&host) {
        Ok(web) => web,
        Err(error) => {
            refuse_start(&error);
            host.close();
            return Err(ServeError::Web(error));
        }
    };
    let exposed = host.web().is_some_and(|options| options.is_exposed());
    if let Some(web) = &web {
        announce_web(web, exposed);
    }
    crate::notifier::start_for(&host, web.as_ref());
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
                announce_card(&requested.approval.id, url, exposed);
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
    // Every card token dies with the card server; then closing stops the
    // host's expiry timer too.
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

/// Prints a pending approval's card URL on stderr (see [`card_lines`]).
fn announce_card(approval_id: &plan_core::ApprovalId, url: &str, exposed: bool) {
    for line in card_lines(approval_id, url, exposed, std::io::stderr().is_terminal()) {
        log::line(&line);
    }
}

/// What stderr says about a pending approval's card. Its URL carries the
/// card's token, a secret of the person's (`sandbox.md` P11): it is printed
/// on a terminal only, never into a log, a file or a pipe another process
/// may read (there the line says where the URL goes instead: to the host's
/// client, as `cardUrl`, and to the notifier). On a terminal a QR code for
/// a phone follows, but only when the card server's address is reachable
/// from elsewhere (`exposed`, `--web-bind`): a QR code of a loopback URL
/// opens nothing on a phone, so the line says so instead.
fn card_lines(approval_id: &plan_core::ApprovalId, url: &str, exposed: bool, terminal: bool) -> Vec<String> {
    if !terminal {
        return vec![format!(
            "{SERVER_NAME} serve: approval {approval_id} is pending; its card URL is not printed, since \
             stderr is not a terminal and the URL's token must not reach a log; the client has it \
             (cardUrl)"
        )];
    }
    let mut lines = vec![format!("{SERVER_NAME} serve: approval {approval_id}: open {url}")];
    if !exposed {
        lines.push(format!(
            "{SERVER_NAME} serve: no QR code: the card server listens on loopback, which only this \
             machine can open (--web-bind serves an address a phone can reach)"
        ));
    } else if let Some(code) = crate::web::qr::render(url) {
        lines.push(code.trim_end_matches('\n').to_owned());
    }
    lines
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

#[cfg(test)]
mod tests {
    use super::card_lines;

    #[test]
    fn a_qr_code_only_for_an_address_reachable_from_elsewhere_and_only_on_a_terminal() {
        let id = plan_core::ApprovalId::from("approval-1");
        let loopback = card_lines(&id, "http://127.0.0.1:4000/card/x", false, true);
        insta::assert_snapshot!("card_lines_loopback_terminal", loopback.join("\n"));
        let exposed = card_lines(&id, "http://192.0.2.7:4000/card/x", true, true);
        assert_eq!(exposed.len(), 2, "{exposed:?}");
        assert!(
            exposed[1].contains('\u{2588}') || exposed[1].contains('\u{2580}'),
            "a QR code: {}",
            exposed[1]
        );
        // Into a pipe or a log: no URL, so no token (P11).
        for exposed in [false, true] {
            let lines = card_lines(&id, "http://192.0.2.7:4000/card/secret-token", exposed, false);
            assert_eq!(lines.len(), 1, "{lines:?}");
            assert!(
                !lines[0].contains("secret-token") && !lines[0].contains("http"),
                "{lines:?}"
            );
            assert!(lines[0].contains("not printed"), "{lines:?}");
        }
    }
}
