//! What the host keeps about host-run commands: the runner and the sandbox
//! probe's verdict (found once at open), and one slot per running command.
//!
//! Values and the probe only: carrying out commands is `commands.rs`, which
//! sits above the event loop; this module sits below it, so the loop's state
//! can hold these without importing the module that uses the loop.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use plan_core::{CommandRun, ErrorCode, SessionId};
use plan_exec::{CancelHandle, CommandOutcome, Runner, SandboxSupport};

use crate::error::HostError;
use crate::sync::lock;
use crate::types::HostOptions;

/// A running command's key: session id and call id.
pub(crate) type CommandKey = (SessionId, String);

/// What [`crate::Host::open`] found out about the kernel sandbox, once.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// use plan_host::{Host, HostOptions, SandboxStatus};
///
/// let options = HostOptions { sandbox_helper: Some(dir.path().join("no-helper")), ..HostOptions::default() };
/// let host = Host::open(dir.path().join("plan.db"), options)?;
/// // Without a helper nothing runs, and the host says why.
/// assert!(matches!(host.sandbox_status(), SandboxStatus::Unavailable { .. }));
/// assert!(!host.limits().commands.sandbox_available);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxStatus {
    /// Landlock ABI 3+, seccomp and dropped capabilities work: Plan Bash runs
    /// read-only.
    Landlock,
    /// No sandbox here: Plan Bash is `PLAN_SANDBOX_UNAVAILABLE` and Agent
    /// `auto` commands are `SANDBOX_UNAVAILABLE`.
    Unavailable {
        /// Why, for people.
        reason: String,
    },
}

/// The runner, the probe's verdict and the scratch root.
pub(crate) struct CommandSupport {
    pub(crate) runner: Option<Runner>,
    pub(crate) status: SandboxStatus,
    pub(crate) scratch_root: PathBuf,
    pub(crate) output_cap: u64,
    pub(crate) grace: Duration,
}

impl CommandSupport {
    /// Finds the helper, probes the sandbox once and empties the scratch
    /// root (no turn of an earlier process survives, so everything there is
    /// stale: part of the startup fence).
    pub(crate) fn open(options: &HostOptions, database: &Path) -> Result<CommandSupport, HostError> {
        let scratch_root = options.scratch_root.clone().unwrap_or_else(|| {
            let mut name = database.as_os_str().to_owned();
            name.push(".scratch");
            PathBuf::from(name)
        });
        plan_exec::clear_scratch_root(&scratch_root)
            .map_err(|error| HostError::with_detail(ErrorCode::StorageFailed, error.to_string()))?;
        // A helper that is not an executable file counts as missing: no
        // command runs without it, sandboxed or not.
        let runner = match &options.sandbox_helper {
            Some(helper) => helper
                .to_str()
                .is_some_and(plan_storage::executable_exists)
                .then(|| Runner::new(helper.clone())),
            None => Runner::beside_current_exe().ok().or_else(helper_on_path),
        };
        let status = match &runner {
            None => SandboxStatus::Unavailable {
                reason: match &options.sandbox_helper {
                    Some(helper) => format!("the sandbox helper {} was not found", helper.display()),
                    None => format!("the sandbox helper {} was not found", plan_exec::HELPER_NAME),
                },
            },
            Some(runner) => match runner.sandbox_support() {
                SandboxSupport::Available => SandboxStatus::Landlock,
                SandboxSupport::Unavailable { reason } => SandboxStatus::Unavailable { reason },
            },
        };
        Ok(CommandSupport {
            runner,
            status,
            scratch_root,
            output_cap: options.command_output_cap,
            grace: options.command_grace,
        })
    }

    pub(crate) fn sandbox_available(&self) -> bool {
        match self.status {
            SandboxStatus::Landlock => true,
            SandboxStatus::Unavailable { .. } => false,
        }
    }
}

fn helper_on_path() -> Option<Runner> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|directory| directory.join(plan_exec::HELPER_NAME))
        .find(|candidate| candidate.is_file())
        .map(Runner::new)
}

/// The outcome of a command, handed from its watcher thread to whoever
/// records the end (the watcher itself, or a `turn/cancel` waiting for it).
#[derive(Default)]
pub(crate) struct Done {
    outcome: Mutex<Option<CommandOutcome>>,
    ready: Condvar,
}

impl Done {
    pub(crate) fn set(&self, outcome: CommandOutcome) {
        *lock(&self.outcome) = Some(outcome);
        self.ready.notify_all();
    }

    pub(crate) fn wait(&self) -> CommandOutcome {
        let mut outcome = lock(&self.outcome);
        loop {
            if let Some(outcome) = outcome.as_ref() {
                return outcome.clone();
            }
            outcome = self
                .ready
                .wait(outcome)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

/// One running command.
pub(crate) struct CommandSlot {
    /// The run as it started.
    pub(crate) run: CommandRun,
    /// Cancels it from any thread.
    pub(crate) cancel: CancelHandle,
    /// Where its watcher hands over the outcome.
    pub(crate) done: Arc<Done>,
}
