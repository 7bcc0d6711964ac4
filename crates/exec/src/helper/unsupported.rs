//! The helper's stages where no backend exists (every OS but Linux for
//! now): nothing runs; each stage says so, so that a confined command fails
//! with `ExecError::SandboxUnavailable` and an unconfined one with
//! `ExecError::Spawn`.
//!
//! It must never run the shell without the supervision and confinement the
//! Linux stages provide.

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use crate::wire::{self, FailKind, Mode, Report};

fn reason() -> String {
    format!(
        "plan-exec has no process supervisor or sandbox for {} yet",
        std::env::consts::OS
    )
}

/// Reports the refusal over the lifeline socket, which is our stdin.
pub(super) fn supervise(rest: &[OsString]) -> ExitCode {
    let kind = match wire::decode(rest).map(|decoded| decoded.confine.mode) {
        Ok(Mode::None) => FailKind::Spawn,
        Ok(Mode::ReadOnly | Mode::WorkspaceWrite { .. }) | Err(_) => FailKind::Sandbox,
    };
    let line = Report::Fail {
        kind,
        reason: reason(),
    }
    .line();
    let _ = rustix::io::write(std::io::stdin(), line.as_bytes());
    ExitCode::SUCCESS
}

/// Never started: `supervise` refuses first.
pub(super) fn confine(_rest: &[OsString]) -> ExitCode {
    ExitCode::from(126)
}

/// No network namespace exists here: says why on stderr.
pub(super) fn hold_network(_rest: &[OsString]) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "{}", reason());
    ExitCode::from(1)
}

pub(super) fn probe(_rest: &[OsString]) -> ExitCode {
    let _ = writeln!(std::io::stdout(), "unavailable {}", reason());
    ExitCode::SUCCESS
}
