//! plan-server's integration tests, one binary: the connection as the FFI
//! drives it and over a real host (`dispatch`), the approval card's web server over loopback sockets, and the
//! person's notifier.

// How the host tests make and read tool calls.
#[allow(dead_code, clippy::panic, clippy::expect_used)]
#[path = "../../host/tests/host/calls.rs"]
mod calls;

#[path = "server/connection.rs"]
mod connection;
#[path = "server/dispatch.rs"]
mod dispatch;
#[path = "server/notifier.rs"]
mod notifier;
#[path = "server/web.rs"]
mod web;
