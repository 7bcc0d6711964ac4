//! The wire of the approval card's web server: `plan/cardUrl`, the
//! `capabilities.web` member of `initialize` and the `cardUrl` of
//! `plan/approvalRequested` (additions to protocol v9).
//!
//! A card URL carries a capability token, so it travels only in these
//! three places, to the host's own client; a `PlanApproval` never carries
//! one. This module only shapes the values; the server crate makes the URLs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `plan/cardUrl` params: `{approvalId}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanCardUrlParams {
    /// A pending approval.
    pub approval_id: String,
}

/// `plan/cardUrl` result: the card's URL, with its token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanCardUrlResult {
    /// Open this in a browser to decide.
    pub url: String,
}

/// `capabilities.web` of `initialize`: where the approval card's server
/// listens (`null` when it is off).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebCapabilities {
    /// The server's base URL, without a token (`http://127.0.0.1:PORT/`).
    pub url: String,
}
