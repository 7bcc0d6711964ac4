//! plan-client: a typed Rust client of protocol v9, and the flows every
//! hook-driven agent shares.
//!
//! The Rust twin of `clients/typescript`: a [`Transport`] moves lines of
//! JSON to one peer (the project host's Unix socket, or the stdio of a
//! `plan-checkpoint serve` child the caller started); a [`Client`] over it
//! initializes, numbers requests, matches responses, keeps the host's
//! notifications in arrival order and reads every message as the protocol
//! crate's types: [`Client::request`] sends any `P: RequestParams` and
//! returns `P::Result`, and one method per line of the protocol's method
//! list (`session_create`, `turn_tool_calls`, ...) is generated from that
//! list, so no method name is spelled here. A failure is one
//! [`ClientError`], whose refusals carry the host's canonical
//! [`plan_core::ErrorCode`].
//!
//! [`agent`] holds the flows an agent's hooks run against the host (a Plan
//! or Agent turn made sure of, a plan submitted and its decision awaited,
//! the approved bytes read back, a command run with its output streamed, a
//! call confirmed, an execution ended), in protocol types, so an adapter
//! is a file of mapping between its agent's hook JSON and these flows.
//!
//! What this crate must not do: decide anything (every answer is the
//! host's), start processes (a caller that wants a child sidecar spawns it
//! and hands its pipes to [`LineTransport::from_stdio`]), or touch files.

pub mod agent;
mod client;
mod error;
mod transport;

pub use client::Client;
pub use error::ClientError;
pub use transport::{LineTransport, Received, Transport};

/// The protocol types, for callers that build params and read results.
pub use plan_protocol as wire;
