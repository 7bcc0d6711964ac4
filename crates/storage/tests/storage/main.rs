//! Integration tests of plan-storage, one binary: opening and migrating,
//! the v8 mapping, the interrupted migration, the schema, the store's typed
//! API and races, the startup fence, the host lock and the artifacts.

// Test code: a failed expectation should stop the test loudly, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod artifacts;
mod audit;
mod chain;
mod files;
mod interrupt;
mod lock;
mod mapping;
mod open;
mod probe;
mod review;
mod schema;
mod store;
mod support;
mod tool_audit;
