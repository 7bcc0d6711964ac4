//! JSON Schema (draft 2020-12) for every message of protocol v9.
//!
//! The committed `schema/` folder of this crate holds one file per message,
//! generated from the Rust types by [`schema_files`]:
//!
//! - `<method>.params.json` and `<method>.result.json` for every client
//!   method, the `/` of the method written as `.` (`plan.approve.params.json`);
//! - `<method>.notification.json` for the params of every notification;
//! - `jsonrpc.request.json`, `jsonrpc.response.json`,
//!   `jsonrpc.notification.json`, `jsonrpc.error.json` for the envelope;
//! - `client_request.json` and `server_notification.json` for the
//!   method-tagged unions; `session.json` and `plan_approval.json` for the
//!   two main objects; `tool_audit_entry.json` for the transcript entries
//!   of Agent-turn permission decisions;
//! - `card.state.json`, `card.status.json`, `card.decision.json`,
//!   `card.decided.json` and `card.refusal.json` for the approval card's own
//!   messages (its web server's state, status and decisions).
//!
//! Params and requests are described as the host *reads* them (optional
//! fields may be absent, unknown fields are refused). Results, objects,
//! notifications and responses are described as the host *writes* them:
//! every field is required and absent values are `null`.
//!
//! Regenerate with `UPDATE_SCHEMA=1 cargo test -p plan-protocol`; the test
//! suite fails when the committed files drift from the types. This module
//! builds values only; writing them to disk is the test's job.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;

use crate::jsonrpc::{ErrorObject, Notification, Request, Response};
use crate::methods::{ClientRequest, MethodVisitor, visit_methods};
use crate::notifications::{NotificationVisitor, ServerNotification, visit_notifications};
use crate::{
    CardDecided, CardDecision, CardRefusal, CardState, CardStatus, PendingPlanNotice, PlanApproval, Session,
    ToolAuditEntry,
};

/// One generated schema file.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaFile {
    /// The file name inside `schema/`, for example `plan.approve.params.json`.
    pub file_name: String,
    /// The schema.
    pub schema: serde_json::Value,
}

impl SchemaFile {
    /// The file's exact text: pretty JSON and a final newline.
    pub fn render(&self) -> Result<String, serde_json::Error> {
        let mut text = serde_json::to_string_pretty(&self.schema)?;
        text.push('\n');
        Ok(text)
    }
}

/// How the host treats a message: read (params, requests) or written
/// (results, objects, notifications, responses).
#[derive(Debug, Clone, Copy)]
enum Direction {
    Read,
    Written,
}

fn schema<T: JsonSchema>(file_name: String, direction: Direction) -> SchemaFile {
    let settings = match direction {
        Direction::Read => SchemaSettings::draft2020_12().for_deserialize(),
        Direction::Written => SchemaSettings::draft2020_12().for_serialize(),
    };
    let root = settings.into_generator().into_root_schema_for::<T>();
    SchemaFile {
        file_name,
        schema: root.to_value(),
    }
}

fn file_stem(method: &str) -> String {
    method.replace('/', ".")
}

fn method_schemas<P: JsonSchema, R: JsonSchema>(method: &str) -> [SchemaFile; 2] {
    let stem = file_stem(method);
    [
        schema::<P>(format!("{stem}.params.json"), Direction::Read),
        schema::<R>(format!("{stem}.result.json"), Direction::Written),
    ]
}

fn notification_schema<N: JsonSchema>(method: &str) -> SchemaFile {
    schema::<N>(
        format!("{}.notification.json", file_stem(method)),
        Direction::Written,
    )
}

/// Every schema file, in a fixed order.
pub fn schema_files() -> Vec<SchemaFile> {
    /// Collects the params and result schema of every client method.
    struct Methods(Vec<SchemaFile>);

    impl MethodVisitor for Methods {
        fn visit<P: JsonSchema, R: JsonSchema>(&mut self, name: &'static str) {
            self.0.extend(method_schemas::<P, R>(name));
        }
    }

    let mut methods = Methods(Vec::new());
    visit_methods(&mut methods);
    let mut files = methods.0;
    /// Collects the params schema of every notification.
    struct Notifications<'files>(&'files mut Vec<SchemaFile>);

    impl NotificationVisitor for Notifications<'_> {
        fn visit<N: JsonSchema>(&mut self, name: &'static str) {
            self.0.push(notification_schema::<N>(name));
        }
    }

    visit_notifications(&mut Notifications(&mut files));

    files.push(schema::<Request>(
        "jsonrpc.request.json".to_owned(),
        Direction::Read,
    ));
    files.push(schema::<Response>(
        "jsonrpc.response.json".to_owned(),
        Direction::Written,
    ));
    files.push(schema::<Notification>(
        "jsonrpc.notification.json".to_owned(),
        Direction::Written,
    ));
    files.push(schema::<ErrorObject>(
        "jsonrpc.error.json".to_owned(),
        Direction::Written,
    ));
    files.push(schema::<ClientRequest>(
        "client_request.json".to_owned(),
        Direction::Read,
    ));
    files.push(schema::<ServerNotification>(
        "server_notification.json".to_owned(),
        Direction::Written,
    ));
    files.push(schema::<Session>("session.json".to_owned(), Direction::Written));
    files.push(schema::<PlanApproval>(
        "plan_approval.json".to_owned(),
        Direction::Written,
    ));
    files.push(schema::<ToolAuditEntry>(
        "tool_audit_entry.json".to_owned(),
        Direction::Written,
    ));
    // The approval card's own messages (its web server, not JSON-RPC).
    files.push(schema::<CardState>(
        "card.state.json".to_owned(),
        Direction::Written,
    ));
    files.push(schema::<CardStatus>(
        "card.status.json".to_owned(),
        Direction::Written,
    ));
    files.push(schema::<CardDecision>(
        "card.decision.json".to_owned(),
        Direction::Read,
    ));
    files.push(schema::<CardDecided>(
        "card.decided.json".to_owned(),
        Direction::Written,
    ));
    files.push(schema::<CardRefusal>(
        "card.refusal.json".to_owned(),
        Direction::Written,
    ));
    // What the person's notifier reads on its stdin.
    files.push(schema::<PendingPlanNotice>(
        "notifier.pending_plan.json".to_owned(),
        Direction::Written,
    ));
    files
}
