//! Black-box tests of plan-exec, one binary: the runner (streaming, UTF-8,
//! cap, hashes, timeout, cancellation, background jobs, host death, start
//! failures, scratch directories) and the sandbox helper (every write form,
//! network, privileges, escapes, reads, the PID namespace, what a command
//! may take from the machine) and the person's notifier, driven through the public API and
//! the built `plan-exec-sandbox` binary.

// Test code: a failed expectation should stop the test loudly, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod agent_server;
mod bounds;
mod failures;
mod helper_file;
mod host_death;
mod isolation;
mod modes;
mod network;
mod notifier;
mod outside;
mod pid;
mod privileges;
mod reads;
mod runner;
mod runs_later;
mod scratch;
mod seams;
mod support;
mod writes;
