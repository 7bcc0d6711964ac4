//! The approval card's web server: `<plan-approval-card>` in a browser tab,
//! an Electron renderer or on a phone, deciding through the same host
//! `approve` / `reject` as every other frontend.
//!
//! Why this HTTP stack: the host imposes no async runtime on its embedders
//! (the FFI, Rust hosts, `serve`), and this server needs a few routes, one
//! request per connection and a few small bodies. So it is `std` only: a
//! `TcpListener` on its own accept thread, one short-lived thread per
//! connection (at most [`MAX_CONNECTIONS`] at once, at most
//! [`MAX_CONNECTIONS_PER_PEER`] from one peer, the last
//! [`RESERVED_FOR_CARD_HOLDERS`] kept for peers that have shown a card's
//! token: `admission`; more are closed unanswered, so no flood keeps the
//! person's own requests out), and the minimal, strictly bounded HTTP/1.1 of `http`
//! (head and body caps, a whole-request deadline, a write timeout). A
//! client that sends slowly, never sends, or never reads holds only its
//! own thread, and only until its deadline. No request is held open: the
//! card polls its status with short requests, so any number of cards share
//! a browser's few connections per host. Expiry is the host's own timer
//! and never waits for this server.
//!
//! What it serves, all under the security headers of `http` (CSP without
//! inline script, no framing, no referrer, no caching, no CORS):
//! - `GET /card/<token>`: the page, which loads
//! - `GET /plan-approval-card.js`: the custom element (the TypeScript
//!   client's build output, embedded);
//! - `GET /card/<token>/state`: title, question, expiry, status and the
//!   plan as the host read it after its size and hash check;
//! - `GET /card/<token>/status`: the status alone, which the card polls
//!   (a decided card's token still reads both, read-only);
//! - `POST /decision`: `{token, sha256, decision, permissionMode?}`, the
//!   token in the body, never in a query string.
//!
//! Every request must name the bound address in `Host` (no DNS
//! rebinding), and an `Origin`, required on `POST`, must be the page's own.
//! A token that is unknown, spent, expired, bound to another artifact or
//! from before a stop is `404` with no hint which. This module decides
//! nothing about the checkpoint: a decision is the host's
//! [`Host::approve_noted`] / [`Host::reject_noted`], which record in the
//! transcript that it came from the web card and from which address.

mod admission;
mod cards;
mod http;
pub mod qr;
mod routes;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use plan_core::{ApprovalId, ErrorCode, PlanApproval};
use plan_host::{Host, HostError, HostEvent, WebOptions};
use plan_protocol::{PlanApprovalRequestedNotification, ServerNotification, WebCapabilities};

use admission::{Admission, Peer};
pub use admission::{MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER, RESERVED_FOR_CARD_HOLDERS};
use cards::Cards;

/// The time a client has to send its whole request.
const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// The time a blocking write may wait for a client that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// The pause after a failed accept.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The state the accept thread, the connection threads and the host
/// listener share.
#[derive(Debug)]
struct Shared {
    host: Arc<Host>,
    cards: Mutex<Cards>,
    address: SocketAddr,
    /// `Host` must be exactly this (`127.0.0.1:PORT`).
    authority: String,
    /// `Origin`, when sent, must be exactly this (`http://127.0.0.1:PORT`).
    origin: String,
    admission: Arc<Admission>,
    stopping: AtomicBool,
}

impl Shared {
    fn cards(&self) -> MutexGuard<'_, Cards> {
        self.cards
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A running approval card server. Stop it with [`WebCard::stop`] (or by
/// dropping it) when its host closes: every token dies, and an open page
/// finds at its next poll that its host is gone.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// use std::sync::Arc;
///
/// use plan_host::{Host, HostOptions, WebOptions};
/// use plan_server::web::WebCard;
///
/// let options = HostOptions { web: Some(WebOptions::loopback("127.0.0.1:0".parse()?)?), ..HostOptions::default() };
/// let host = Arc::new(Host::open(dir.path().join("plan.db"), options)?);
/// let web = WebCard::start_for(&host)?.ok_or("the option is set")?;
/// assert!(web.base_url().starts_with("http://127.0.0.1:"));
/// web.stop();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct WebCard {
    shared: Arc<Shared>,
    accept: Mutex<Option<JoinHandle<()>>>,
}

/// `plan/cardUrl` on every surface (the connection, the FFI's `card_url`):
/// the URL of a pending approval's card. Without a web server there is
/// none: the approval's own state is reported first (`APPROVAL_NOT_FOUND`,
/// `APPROVAL_NOT_PENDING`), then `INVALID_PARAMS`.
///
/// # Errors
///
/// Those, and [`WebCard::card_url_of`]'s.
pub fn card_url(host: &Host, web: Option<&WebCard>, approval_id: &ApprovalId) -> Result<String, HostError> {
    match web {
        Some(web) => web.card_url_of(approval_id),
        None => {
            let approval = host.approval(approval_id)?.approval;
            has_card(&approval)?;
            Err(HostError::with_detail(
                ErrorCode::InvalidParams,
                "this host serves no approval card: start it with a web address \
                 (serve --web, HostOptions::web, the FFI's web_address)",
            ))
        }
    }
}

/// plan-core's answer whether `approval` has a card, with the status in
/// the message.
fn has_card(approval: &PlanApproval) -> Result<&plan_core::Artifact, HostError> {
    approval.card_artifact().map_err(|code| {
        HostError::with_detail(code, format!("approval {} is {}", approval.id, approval.status))
    })
}

impl WebCard {
    /// Starts the server the host's [`plan_host::HostOptions::web`] asks
    /// for; `None` when it asks for none ([`WebCard`]'s example).
    ///
    /// # Errors
    ///
    /// Those of [`WebCard::start`].
    pub fn start_for(host: &Arc<Host>) -> Result<Option<Arc<WebCard>>, HostError> {
        host.web()
            .map(|options| WebCard::start(host, options))
            .transpose()
    }

    /// Binds `options`' address and starts serving cards of `host`'s
    /// pending approvals.
    ///
    /// # Errors
    ///
    /// `INVALID_PARAMS` when the address cannot be bound (in use, not
    /// local), `INTERNAL` when a thread cannot start.
    pub fn start(host: &Arc<Host>, options: WebOptions) -> Result<Arc<WebCard>, HostError> {
        let listener = TcpListener::bind(options.bind()).map_err(|error| {
            HostError::with_detail(
                ErrorCode::InvalidParams,
                format!("cannot listen on {}: {error}", options.bind()),
            )
        })?;
        let address = listener
            .local_addr()
            .map_err(|error| HostError::with_detail(ErrorCode::Internal, error.to_string()))?;
        let authority = address.to_string();
        let shared = Arc::new(Shared {
            host: Arc::clone(host),
            cards: Mutex::new(Cards::default()),
            address,
            origin: format!("http://{authority}"),
            authority,
            admission: Arc::default(),
            stopping: AtomicBool::new(false),
        });
        // The listener holds the server weakly: the host (which holds its
        // listeners) must not keep a stopped server alive, nor the server
        // the host.
        let weak: Weak<Shared> = Arc::downgrade(&shared);
        host.add_listener(Arc::new(move |event: HostEvent| {
            if let (HostEvent::ApprovalResolved(approval), Some(shared)) = (&event, weak.upgrade()) {
                shared.cards().resolve(approval);
            }
        }));
        let accept = std::thread::Builder::new()
            .name("plan-web-accept".to_owned())
            .spawn({
                let shared = Arc::clone(&shared);
                move || accept_loop(&shared, &listener)
            })
            .map_err(|error| HostError::with_detail(ErrorCode::Internal, error.to_string()))?;
        Ok(Arc::new(WebCard {
            shared,
            accept: Mutex::new(Some(accept)),
        }))
    }

    /// The address the server listens on.
    pub fn address(&self) -> SocketAddr {
        self.shared.address
    }

    /// The server's base URL, `http://ADDRESS/`, with no token in it.
    pub fn base_url(&self) -> String {
        format!("{}/", self.shared.origin)
    }

    /// What `initialize` reports as `capabilities.web`.
    pub fn capabilities(&self) -> WebCapabilities {
        WebCapabilities { url: self.base_url() }
    }

    /// The card URL of a pending approval (its token made on first use);
    /// `None` when it is not pending, has no artifact or the server stopped.
    pub fn card_url(&self, approval: &PlanApproval) -> Option<String> {
        let token = self.shared.cards().token_for(approval).ok().flatten()?;
        Some(format!("{}card/{}", self.base_url(), token.to_hex()))
    }

    /// `plan/cardUrl`: the card URL of a pending approval.
    ///
    /// # Errors
    ///
    /// `APPROVAL_NOT_FOUND`, `APPROVAL_NOT_PENDING` (decided, expired or
    /// interrupted), `INTERNAL` (no random bytes), `HOST_CLOSED`.
    pub fn card_url_of(&self, approval_id: &ApprovalId) -> Result<String, HostError> {
        let approval = self.shared.host.approval(approval_id)?.approval;
        has_card(&approval)?;
        let token = self
            .shared
            .cards()
            .token_for(&approval)
            .map_err(|error| {
                HostError::with_detail(ErrorCode::Internal, format!("no random bytes: {error}"))
            })?
            .ok_or_else(|| {
                HostError::with_detail(ErrorCode::ApprovalNotPending, "the web card server stopped")
            })?;
        Ok(format!("{}card/{}", self.base_url(), token.to_hex()))
    }

    /// The protocol notification of a host event, with the card URL in
    /// `plan/approvalRequested` (the one place `cardUrl` is filled in). A
    /// host listener should hold the server weakly and use
    /// [`WebCard::notification_of`]: the server holds the host, so a strong
    /// reference in one of its listeners would keep both alive forever.
    pub fn notification(&self, event: HostEvent) -> ServerNotification {
        match event {
            HostEvent::ApprovalRequested(approval) => {
                ServerNotification::PlanApprovalRequested(PlanApprovalRequestedNotification {
                    card_url: self.card_url(&approval),
                    approval,
                })
            }
            other @ (HostEvent::ApprovalResolved(_)
            | HostEvent::ExecutionStateChanged { .. }
            | HostEvent::SessionChanged(_)
            | HostEvent::CommandOutput { .. }
            | HostEvent::CommandExited(_)) => crate::notification(other),
        }
    }

    /// [`WebCard::notification`] through a weak reference: without a live
    /// server (none, or dropped) the plain [`crate::notification`].
    pub fn notification_of(web: Option<&Weak<WebCard>>, event: HostEvent) -> ServerNotification {
        match web.and_then(Weak::upgrade) {
            Some(web) => web.notification(event),
            None => crate::notification(event),
        }
    }

    /// Stops serving: the accept thread ends and every token dies (an open
    /// page's next poll is not answered, so it shows its host as
    /// unreachable). Stopping twice is harmless.
    pub fn stop(&self) {
        if self.shared.stopping.swap(true, Ordering::SeqCst) {
            return;
        }
        self.shared.cards().stop();
        self.shared.admission.forget_card_holders();
        // The accept thread waits in accept(): one connection wakes it, and
        // it sees the flag.
        let _ = TcpStream::connect_timeout(&self.shared.address, Duration::from_secs(1));
        let handle = self
            .accept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

impl Drop for WebCard {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener) {
    for incoming in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = incoming else {
            // Out of descriptors or memory: accept fails at once until some
            // connection ends, so pause instead of spinning.
            std::thread::sleep(ACCEPT_BACKOFF);
            continue;
        };
        // Over a bound the connection is closed unanswered (dropping it).
        let Some(peer) = stream.peer_addr().ok().map(|peer| Peer::of(peer.ip())) else {
            continue;
        };
        let Some(ticket) = Admission::admit(&shared.admission, peer) else {
            continue;
        };
        // A thread that cannot start drops the ticket with the closure.
        let _ = std::thread::Builder::new()
            .name("plan-web-conn".to_owned())
            .spawn({
                let shared = Arc::clone(shared);
                move || {
                    if routes::serve_connection(&shared, stream) {
                        shared.admission.card_holder(peer);
                    }
                    drop(ticket);
                }
            });
    }
}

/// The project a person recognises: the last component of the session's
/// workspace root (the card and the notifier show it).
pub(crate) fn project_name(root: &str) -> String {
    root.rsplit('/')
        .find(|part| !part.is_empty())
        .unwrap_or("/")
        .to_owned()
}

/// What a person's notifier hears of a pending approval with an
/// artifact (`None` without one): its project (the last component of the
/// session's workspace root), its untrusted title and question, its
/// deadline, the plan file that binds the decision and the card's URL when
/// a card is served. The one construction of the notice, for the host's
/// notifier and for an agent's hook that runs the person's notifier itself.
pub fn pending_plan_notice(
    approval: &PlanApproval,
    workspace_root: Option<&str>,
    card_url: Option<String>,
) -> Option<plan_protocol::PendingPlanNotice> {
    let artifact = approval.artifact.as_ref()?;
    Some(plan_protocol::PendingPlanNotice {
        approval_id: approval.id.to_string(),
        session_id: approval.session_id.to_string(),
        project: workspace_root.map(project_name),
        title: approval.title.clone(),
        question: approval.question.clone(),
        expires_at: approval.expires_at,
        artifact: card_artifact(artifact),
        card_url,
    })
}

/// The plan file that binds a decision, as the card and the notifier show
/// it.
pub(crate) fn card_artifact(artifact: &plan_core::Artifact) -> plan_protocol::CardArtifact {
    plan_protocol::CardArtifact {
        file_name: artifact.file_name().to_owned(),
        size: artifact.size,
        sha256: artifact.sha256.clone(),
        fingerprint: artifact.fingerprint(),
    }
}
