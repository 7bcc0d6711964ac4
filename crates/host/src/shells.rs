//! The host's shell catalog (ADR 0054): which shells a session may select.
//!
//! The catalog is data; whether each shell is installed is asked of storage,
//! the only layer that looks at the filesystem (by `Host::shells`). This
//! module holds values only and imports nothing of the crate.

/// One selectable shell.
///
/// ```
/// use plan_host::{HostOptions, ShellSpec};
///
/// let options = HostOptions { shells: vec![ShellSpec::new("bash", "/bin/bash")], ..HostOptions::default() };
/// assert_eq!(options.shells[0].id, "bash");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellSpec {
    /// The id sessions and settings refer to.
    pub id: String,
    /// The executable.
    pub path: String,
}

impl ShellSpec {
    /// A shell with this id and executable path ([`ShellSpec`]'s example).
    pub fn new(id: impl Into<String>, path: impl Into<String>) -> ShellSpec {
        ShellSpec {
            id: id.into(),
            path: path.into(),
        }
    }
}

/// The catalog a host offers when the embedder names none.
///
/// ```
/// let ids: Vec<String> = plan_host::default_catalog().into_iter().map(|shell| shell.id).collect();
/// assert_eq!(ids, ["bash", "zsh", "sh", "fish", "pwsh"]);
/// ```
pub fn default_catalog() -> Vec<ShellSpec> {
    vec![
        ShellSpec::new("bash", "/bin/bash"),
        ShellSpec::new("zsh", "/bin/zsh"),
        ShellSpec::new("sh", "/bin/sh"),
        ShellSpec::new("fish", "/usr/bin/fish"),
        ShellSpec::new("pwsh", "/usr/bin/pwsh"),
    ]
}

/// One shell with its availability on this machine ([`crate::Host::shells`]'s
/// example lists them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellEntry {
    /// The shell.
    pub spec: ShellSpec,
    /// Whether its executable exists.
    pub available: bool,
}
