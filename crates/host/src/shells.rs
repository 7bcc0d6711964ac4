//! The host's shell catalog (ADR 0054): which shells a session may select.
//!
//! The catalog is data (plan-core's `CommandShell`); whether each shell is
//! installed is asked of storage, the only layer that looks at the
//! filesystem (by `Host::shells`, which returns plan-core's `ShellInfo`).
//! This module holds values only and imports nothing of the crate.

use plan_core::CommandShell;

/// The catalog a host offers when the embedder names none.
///
/// ```
/// let ids: Vec<String> = plan_host::default_catalog().into_iter().map(|shell| shell.id).collect();
/// assert_eq!(ids, ["bash", "zsh", "sh", "fish", "pwsh"]);
/// ```
pub fn default_catalog() -> Vec<CommandShell> {
    vec![
        CommandShell::new("bash", "/bin/bash"),
        CommandShell::new("zsh", "/bin/zsh"),
        CommandShell::new("sh", "/bin/sh"),
        CommandShell::new("fish", "/usr/bin/fish"),
        CommandShell::new("pwsh", "/usr/bin/pwsh"),
    ]
}
