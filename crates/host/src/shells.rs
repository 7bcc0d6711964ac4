//! The host's shell catalog (ADR 0054): which shells a session may select.
//!
//! The catalog is data; whether each shell is installed is asked of storage,
//! the only layer that looks at the filesystem.

use plan_core::{CatalogShell, check_shell, default_shell};

use crate::{Host, HostError};

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

/// One shell with its availability on this machine ([`Host::shells`]'s
/// example lists them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellEntry {
    /// The shell.
    pub spec: ShellSpec,
    /// Whether its executable exists.
    pub available: bool,
}

impl Host {
    // Shells.

    /// The shell catalog with availability, and the effective default
    /// (plan-core's `default_shell` over the catalog and the persisted
    /// setting; empty for an empty catalog).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use plan_host::{Host, HostOptions, ShellSpec};
    ///
    /// let options = HostOptions { shells: vec![ShellSpec::new("sh", "/bin/sh")], ..HostOptions::default() };
    /// let host = Host::open(dir.path().join("plan.db"), options)?;
    /// let (entries, default) = host.shells()?;
    /// assert_eq!(entries[0].spec.id, "sh");
    /// assert_eq!(entries[0].available, std::path::Path::new("/bin/sh").exists());
    /// # let _ = default;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `HOST_CLOSED`, `STORAGE_FAILED`.
    pub fn shells(&self) -> Result<(Vec<ShellEntry>, String), HostError> {
        let persisted = self.with_open(|open| Ok(open.store.default_shell()?))?;
        let entries: Vec<ShellEntry> = self
            .options
            .shells
            .iter()
            .map(|spec| ShellEntry {
                available: plan_storage::executable_exists(&spec.path),
                spec: spec.clone(),
            })
            .collect();
        let catalog: Vec<CatalogShell<'_>> = entries
            .iter()
            .map(|entry| CatalogShell {
                id: &entry.spec.id,
                available: entry.available,
            })
            .collect();
        let default = default_shell(&catalog, persisted.as_deref())
            .unwrap_or_default()
            .to_owned();
        Ok((entries, default))
    }

    /// Persists the default shell (the host test
    /// `list_set_default_and_unknown_shells` shows it).
    ///
    /// # Errors
    ///
    /// `SHELL_UNKNOWN` (not in the host's catalog), `HOST_CLOSED`,
    /// `STORAGE_FAILED`.
    pub fn set_default_shell(&self, shell_id: &str) -> Result<String, HostError> {
        check_shell(self.options.shells.iter().map(|spec| spec.id.as_str()), shell_id)
            .map_err(|code| HostError::with_detail(code, format!("shell {shell_id:?}")))?;
        self.with_open(|open| Ok(open.store.set_default_shell(shell_id)?))?;
        Ok(shell_id.to_owned())
    }
}
