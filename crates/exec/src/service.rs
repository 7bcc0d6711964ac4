//! Starting a background service of the user's: a process that outlives
//! the one that started it (the project's host, started on demand by an
//! agent's short-lived hook process). Unlike a command it is not confined
//! or supervised: it is this very program, run by the person's own agent
//! integration. It gets a process group of its own (a terminal's signals to
//! the starter's group miss it), stdin from `/dev/null` and its output
//! appended to a log file. This module only starts it; what runs is the caller's.

use std::ffi::OsString;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// Starts `program args` in the background (see the module); returns its
/// pid. The caller waits for it to be ready by its own means. It inherits
/// this process's environment with `environment` applied over it: a name
/// with a value is set, a name with `None` removed.
///
/// # Errors
///
/// The log file cannot be opened (it is made 0600) or the program cannot
/// be started.
pub fn start_service(
    program: &Path,
    args: &[OsString],
    environment: &[(OsString, Option<OsString>)],
    log: &Path,
) -> std::io::Result<u32> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(log)?;
    let child = {
        use std::os::unix::process::CommandExt;
        let mut command = Command::new(program);
        for (name, value) in environment {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        command
            .args(args)
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            // Its own group: what ends the starter's group spares it.
            .process_group(0)
            .spawn()?
    };
    Ok(child.id())
}
