//! The web card's option: where the host's approval page should listen;
//! and how long the person's notifier, which hears of each pending plan
//! with its card URL, may run.
//!
//! The host only holds these values; it opens no socket and speaks no HTTP.
//! The `plan-server` crate reads it ([`crate::Host::web`]) and starts the
//! server that serves `<plan-approval-card>` (`serve --web`, the FFI
//! option, or a Rust embedder calling that crate). The one rule it carries
//! is where the page may listen: loopback unless the embedder said
//! otherwise explicitly, because anyone who can reach the address and sees
//! a card's URL can decide.

use std::net::SocketAddr;

use plan_core::ErrorCode;

use crate::HostError;

/// How long the person's notifier ([`crate::HostOptions::notifier`]) may
/// run before it is killed, with everything it started.
pub const NOTIFIER_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Where the approval page listens. Made by [`WebOptions::loopback`] (the
/// safe default: `127.0.0.1` or `::1`) or [`WebOptions::any_address`] (an
/// explicit opt-in to another address), so a value that exists is allowed.
///
/// ```
/// use plan_host::{ErrorCode, WebOptions};
///
/// let local = WebOptions::loopback("127.0.0.1:0".parse()?)?;
/// assert!(!local.is_exposed());
/// // Another address needs the explicit constructor.
/// let refused = WebOptions::loopback("0.0.0.0:8080".parse()?).map_err(|error| error.code());
/// assert_eq!(refused.map(|_| ()), Err(ErrorCode::InvalidParams));
/// assert!(WebOptions::any_address("0.0.0.0:8080".parse()?).is_exposed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebOptions {
    bind: SocketAddr,
}

impl WebOptions {
    /// A loopback address (port 0 picks a free port).
    ///
    /// # Errors
    ///
    /// `INVALID_PARAMS` for an address that is not loopback: that needs
    /// [`WebOptions::any_address`].
    pub fn loopback(bind: SocketAddr) -> Result<WebOptions, HostError> {
        if bind.ip().is_loopback() {
            Ok(WebOptions { bind })
        } else {
            Err(HostError::with_detail(
                ErrorCode::InvalidParams,
                format!("{bind} is not a loopback address; another address must be asked for explicitly"),
            ))
        }
    }

    /// Any address, asked for explicitly (`serve --web-bind`): whoever can
    /// reach it and sees a card's URL can decide.
    pub fn any_address(bind: SocketAddr) -> WebOptions {
        WebOptions { bind }
    }

    /// The address to bind.
    pub fn bind(&self) -> SocketAddr {
        self.bind
    }

    /// Whether the address is reachable from other machines (not
    /// loopback), so that starting the server should warn.
    pub fn is_exposed(&self) -> bool {
        !self.bind.ip().is_loopback()
    }
}
