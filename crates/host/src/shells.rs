//! The host's shell catalog (ADR 0054): which shells a session may select.
//!
//! The catalog is data; whether each shell is installed is asked of storage,
//! the only layer that looks at the filesystem.

/// One selectable shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellSpec {
    /// The id sessions and settings refer to.
    pub id: String,
    /// The executable.
    pub path: String,
}

impl ShellSpec {
    /// A shell with this id and executable path.
    pub fn new(id: impl Into<String>, path: impl Into<String>) -> ShellSpec {
        ShellSpec {
            id: id.into(),
            path: path.into(),
        }
    }
}

/// The catalog a host offers when the embedder names none.
pub fn default_catalog() -> Vec<ShellSpec> {
    vec![
        ShellSpec::new("bash", "/bin/bash"),
        ShellSpec::new("zsh", "/bin/zsh"),
        ShellSpec::new("sh", "/bin/sh"),
        ShellSpec::new("fish", "/usr/bin/fish"),
        ShellSpec::new("pwsh", "/usr/bin/pwsh"),
    ]
}
