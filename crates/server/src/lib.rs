//! plan-server: protocol v9 JSON-RPC over the plan checkpoint host.
//!
//! This crate owns the wire. [`Connection`] serves one client's requests
//! against a shared [`plan_host::Host`]; [`serve_stdio`] is the stdio
//! transport of the `serve` sidecar (newline-delimited messages, budgets
//! counted as bytes arrive; the request loop writes each response with the
//! notifications queued before it, a writer thread the rest); [`convert`] holds
//! every conversion between host values and wire types, events included
//! ([`notification`]); [`serve_method`] is the one serving function of every
//! client method ([`Method`], for the connection and the FFI's typed
//! methods alike); [`web`] is the approval card's web server, started
//! beside either transport. The host itself knows nothing of the protocol.
//!
//! It decides nothing: every refusal is plan-core's or storage's, carried by
//! the host; this crate only translates and frames.

mod connection;
pub mod convert;
mod inbound;
pub mod log;
mod method;
pub mod notifier;
mod outbound;
pub mod socket;
mod stdio;
pub mod web;

pub use connection::Connection;
pub use convert::{error_object, notification};
pub use method::{Method, SERVER_NAME, serve_method};
pub use stdio::{ServeError, refuse_start, serve_stdio};

/// The protocol v9 wire types, for embedders that look inside the values
/// this crate hands out.
pub use plan_protocol as wire;
