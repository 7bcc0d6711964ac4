//! End-to-end tests of the `plan-checkpoint` binary: every command in human
//! and `--json` form against databases built through plan-host (and a
//! migrated v8 one), every error path with its exit code, `serve` over its
//! pipes (lifecycle, timers, malformed input, crashes), inspection beside a
//! live `serve`, the demo, the help text of every command, the completion
//! scripts run in their shells, and the README's examples and references.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::wildcard_enum_match_arm
)]

#[path = "cli/support.rs"]
mod support;

#[path = "cli/audit.rs"]
mod audit;

#[path = "cli/claude_code.rs"]
mod claude_code;

#[path = "cli/client.rs"]
mod client;

#[path = "cli/codex.rs"]
mod codex;

#[path = "cli/config.rs"]
mod config;

// The collector stand-in of the host tests (an OTLP/HTTP receiver on loopback).
// Not every helper of it is used here.
#[allow(dead_code)]
#[path = "../../host/tests/host/collector.rs"]
mod collector;

// How the host tests make and read tool calls (not every helper is used here).
#[allow(dead_code, clippy::panic, clippy::expect_used)]
#[path = "../../host/tests/host/calls.rs"]
mod calls;

#[path = "cli/otel.rs"]
mod otel;

#[path = "cli/serve.rs"]
mod serve;

#[path = "cli/commands.rs"]
mod commands;

#[path = "cli/edges.rs"]
mod edges;

#[path = "cli/errors.rs"]
mod errors;

#[path = "cli/live.rs"]
mod live;

#[path = "cli/demo.rs"]
mod demo;

#[path = "cli/help.rs"]
mod help;

#[path = "cli/host_commands.rs"]
mod host_commands;
#[path = "cli/hostile.rs"]
mod hostile;
#[path = "cli/permissions.rs"]
mod permissions;

#[path = "cli/completion.rs"]
mod completion;

#[path = "cli/readme.rs"]
mod readme;
