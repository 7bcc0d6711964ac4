//! The client's integration tests: a real host behind the server's own
//! socket and connection, spoken to through [`plan_client::Client`].
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod client {
    mod agent;
    mod methods;
    mod references;
    mod support;
    mod transport;
}
