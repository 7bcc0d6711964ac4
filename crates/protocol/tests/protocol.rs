//! The one integration test binary of plan-protocol: golden JSON for every
//! message, round-trip properties for every type, params strictness, method
//! dispatch, error mapping, plan-core conversions and schema drift.
//!
//! Tests only: nothing here is used by the library.

// Test code: a failed expectation should stop the test loudly.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::wildcard_enum_match_arm
)]

#[path = "protocol/convert.rs"]
mod convert;
#[path = "protocol/fixtures.rs"]
mod fixtures;
#[path = "protocol/golden.rs"]
mod golden;
#[path = "protocol/parse.rs"]
mod parse;
#[path = "protocol/roundtrip.rs"]
mod roundtrip;
#[path = "protocol/schema.rs"]
mod schema;
