//! plan-server's integration tests, one binary: the connection as the FFI
//! drives it, and the approval card's web server over loopback sockets.

#[path = "server/connection.rs"]
mod connection;
#[path = "server/web.rs"]
mod web;
