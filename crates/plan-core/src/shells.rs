//! The shell rules (ADR 0054): which shell ids a session or the default may
//! name, and which shell stands in while no default was chosen.
//!
//! The catalog is the host's data and comes in as an argument; whether a
//! shell is installed is a fact the host asked of storage. These functions
//! only decide.

use crate::{ErrorCode, ShellInfo};

/// Whether `shell` may be selected: it must be an id of the catalog
/// (`SHELL_UNKNOWN` otherwise). Matching is exact.
pub fn check_shell<'catalog>(
    catalog: impl IntoIterator<Item = &'catalog str>,
    shell: &str,
) -> Result<(), ErrorCode> {
    if catalog.into_iter().any(|id| id == shell) {
        Ok(())
    } else {
        Err(ErrorCode::ShellUnknown)
    }
}

/// The effective default shell: the persisted one while the catalog still
/// offers it; otherwise the first installed shell of the catalog, or the
/// catalog's first entry when none is installed; `None` for an empty
/// catalog.
pub fn default_shell<'catalog>(
    catalog: &'catalog [ShellInfo],
    persisted: Option<&str>,
) -> Option<&'catalog str> {
    let offered = persisted.and_then(|persisted| catalog.iter().find(|shell| shell.id == persisted));
    offered
        .or_else(|| catalog.iter().find(|shell| shell.available))
        .or_else(|| catalog.first())
        .map(|shell| shell.id.as_str())
}
