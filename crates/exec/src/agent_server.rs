//! Starting an agent's own server that a frontend of the person's drives
//! over its standard input and output (Codex's `codex app-server`, driven
//! by `plan-checkpoint codex implement`). Like a background service it is
//! the person's own program, run as they would run it: not confined, not
//! supervised, with their environment plus what the caller adds. Unlike
//! one, it lives only as long as its driver: it gets a process group of
//! its own, and dropping the handle kills that group and reaps it. This
//! module only starts and ends it; what is said over its pipes is the
//! caller's.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// A running agent server: its pipes, and the process that ends with the
/// handle.
#[derive(Debug)]
pub struct AgentServer {
    child: Child,
}

impl AgentServer {
    /// Starts `program args` in `cwd` with the caller's environment plus
    /// `env`, its stdin and stdout piped to the caller and its stderr the
    /// caller's.
    ///
    /// # Errors
    ///
    /// The program cannot be started (not found, not executable).
    pub fn start(
        program: &Path,
        args: &[OsString],
        cwd: &Path,
        env: &[(OsString, OsString)],
    ) -> std::io::Result<AgentServer> {
        let child = Command::new(program)
            .args(args)
            .current_dir(cwd)
            .envs(env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // Its own group: ending the handle ends what it started too.
            .process_group(0)
            .spawn()?;
        Ok(AgentServer { child })
    }

    /// Its standard input (once; `None` after the first call).
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// Its standard output (once; `None` after the first call).
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for AgentServer {
    /// Kills its process group (the server and what it started and left in
    /// the group) and reaps it.
    fn drop(&mut self) {
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
