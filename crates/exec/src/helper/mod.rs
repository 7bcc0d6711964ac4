//! The sandbox helper, `plan-exec-sandbox`: the only code that runs between
//! the host and the shell. The library starts it with a plain `Command`, so
//! the host needs no `unsafe`, no `pre_exec` and no `fork` of its own
//! (possibly huge) address space.
//!
//! Two stages, both this binary:
//! - `supervise` (started by the library): leaves the host's session, becomes
//!   a child subreaper, starts the `confine` stage in a new process group,
//!   enforces the timeout and cancellation (SIGTERM to the group, SIGKILL
//!   after the grace), kills the whole group (and every orphan reparented to
//!   it) when the shell exits or the host dies, and reports the end over the
//!   lifeline socket that is its stdin.
//! - `confine` (started by the supervisor): marks inherited descriptors
//!   close-on-exec, arms its parent-death signal, applies the requested
//!   restrictions to itself and executes `<shell> -c <command>`; inside
//!   namespaces it forks an init of a new PID namespace that runs the
//!   confined shell, and ends as the shell ended.
//!
//! `probe` applies the read-only sandbox and checks that it holds.
//! `network` makes and holds the network namespace one session's networked
//! commands share (the library attaches a user-mode stack to it).
//!
//! It must not decide which confinement applies (it is told), must not fall
//! back to a weaker one (any failure is reported and nothing runs), and must
//! never be started by anything but this crate.

#[cfg(target_os = "linux")]
mod bounds;
#[cfg(target_os = "linux")]
mod git_config;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod locks;
#[cfg(target_os = "linux")]
mod namespaces;
#[cfg(target_os = "linux")]
mod pid_namespace;
#[cfg(target_os = "linux")]
mod protect;
#[cfg(target_os = "linux")]
mod routes;
#[cfg(target_os = "linux")]
mod sandbox;
#[cfg(not(target_os = "linux"))]
mod unsupported;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

#[cfg(target_os = "linux")]
use linux::{confine, hold_network, probe, supervise};
#[cfg(not(target_os = "linux"))]
use unsupported::{confine, hold_network, probe, supervise};

use crate::wire;

/// Whether this process was started as the helper: its first argument names
/// a helper stage. A binary that embeds the helper (the `plan-checkpoint`
/// CLI does, so that `cargo run` needs no second binary) checks this first
/// and hands its `main` to [`main`].
#[doc(hidden)]
pub fn is_helper_invocation() -> bool {
    let first = std::env::args_os().nth(1);
    matches!(
        first.as_deref().and_then(std::ffi::OsStr::to_str),
        Some(wire::MODE_SUPERVISE | wire::MODE_CONFINE | wire::MODE_PROBE | wire::MODE_NETWORK)
    )
}

/// The helper's `main`: dispatches on the first argument.
#[doc(hidden)]
pub fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let Some((mode, rest)) = args.split_first() else {
        return usage();
    };
    match mode.to_str() {
        Some(wire::MODE_SUPERVISE) => supervise(rest),
        Some(wire::MODE_CONFINE) => confine(rest),
        Some(wire::MODE_PROBE) => probe(rest),
        Some(wire::MODE_NETWORK) => hold_network(rest),
        Some(_) | None => usage(),
    }
}

fn usage() -> ExitCode {
    // This binary is an implementation detail of plan-exec; say so to a
    // person who runs it by hand.
    let _ = writeln!(
        std::io::stderr(),
        "plan-exec-sandbox is started by the plan-exec library only"
    );
    ExitCode::from(2)
}
