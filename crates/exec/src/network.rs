//! A session's own network: one network namespace with a user-mode stack
//! (`slirp4netns`) attached, made once and joined by every networked
//! command of that session, so a command never shares the host's network
//! namespace and never reaches the host's loopback (where the approval
//! card's server listens), and pays for the stack's start only once.
//!
//! The namespace is held by the helper's `network` stage and by the
//! descriptors kept here; the stack runs with no environment, confined by
//! its own sandbox and seccomp filter, and ends with this value: when it is
//! dropped, or when the host process is gone (its exit descriptor and the
//! holder's stdin close). This module decides nothing about who may have a
//! network; the host asks for one only where plan-core's rule grants it.

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};

use crate::outcome::ExecError;
use crate::runner::Runner;
use crate::wire;

/// The open files (so the connections) of a session's network stack.
const STACK_OPEN_FILES: u64 = 4096;

/// How long making the namespace and configuring its stack may take.
const NETWORK_SETUP: Duration = Duration::from_secs(10);

/// Where the user-mode network stack is looked for: fixed places of the
/// system's packages, never `PATH`.
const NETWORK_STACKS: [&str; 2] = ["/usr/bin/slirp4netns", "/usr/local/bin/slirp4netns"];

/// A network namespace with its stack, shared by the commands given it.
/// Cloning shares it; the namespace and its stack end with the last clone.
#[derive(Clone, Debug)]
pub struct NetworkNamespace {
    held: Arc<Held>,
}

#[derive(Debug)]
struct Held {
    net: OwnedFd,
    /// The user namespace owning `net` when the host is not root.
    user: Option<OwnedFd>,
    processes: Mutex<Processes>,
}

#[derive(Debug)]
struct Processes {
    /// The helper's `network` stage, holding the namespace.
    holder: Child,
    /// The stack, which exits when `exit` closes.
    stack: Child,
    exit: Option<OwnedFd>,
}

/// Two handles are equal when they share one namespace.
impl PartialEq for NetworkNamespace {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.held, &other.held)
    }
}

impl Eq for NetworkNamespace {}

impl NetworkNamespace {
    /// Makes a network namespace through `runner`'s helper and attaches a
    /// user-mode stack to it, without the host's loopback.
    ///
    /// # Errors
    ///
    /// [`ExecError::SandboxUnavailable`] when the namespace cannot be made
    /// or `slirp4netns` is missing, not root's, or does not configure it.
    pub fn start(runner: &Runner) -> Result<NetworkNamespace, ExecError> {
        let unavailable = |reason: String| ExecError::SandboxUnavailable { reason };
        let stack = network_stack().map_err(unavailable)?;
        let holder = Command::new(runner.helper_exec_path())
            .arg(wire::MODE_NETWORK)
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| unavailable(format!("starting the network namespace's holder: {error}")))?;
        let held = attach(holder, &stack).map_err(unavailable)?;
        Ok(NetworkNamespace { held: Arc::new(held) })
    }

    /// Whether its stack still runs (a stack that died leaves the
    /// namespace without a network; the host then makes a new one).
    pub fn is_alive(&self) -> bool {
        let Ok(mut processes) = self.held.processes.lock() else {
            return false;
        };
        let Processes { holder, stack, .. } = &mut *processes;
        [holder, stack]
            .into_iter()
            .all(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// The namespace, and the user namespace owning it when not root.
    pub(crate) fn descriptors(&self) -> (BorrowedFd<'_>, Option<BorrowedFd<'_>>) {
        (self.held.net.as_fd(), self.held.user.as_ref().map(AsFd::as_fd))
    }
}

/// Waits for the holder's namespace, opens it and attaches the stack; on
/// any failure the holder (and a started stack) are ended and reaped.
fn attach(mut holder: Child, stack: &Path) -> Result<Held, String> {
    let made = holder.stdout.take().is_some_and(|stdout| {
        one_byte_within(stdout.as_fd(), NETWORK_SETUP) == Some(wire::NETWORK_NAMESPACE_READY[0])
    });
    if !made {
        let stderr = holder.stderr.take();
        end(&mut holder);
        let mut reason = String::new();
        if let Some(mut stderr) = stderr {
            let _ = stderr.read_to_string(&mut reason);
        }
        return Err(format!(
            "the network namespace could not be made: {}",
            reason.trim()
        ));
    }
    match attach_stack(&holder, stack) {
        Ok((net, user, stack, exit)) => Ok(Held {
            net,
            user,
            processes: Mutex::new(Processes {
                holder,
                stack,
                exit: Some(exit),
            }),
        }),
        Err(reason) => {
            end(&mut holder);
            Err(reason)
        }
    }
}

/// Opens the holder's namespaces and starts the stack in them; returns
/// them, the stack and the write end of its exit descriptor.
fn attach_stack(holder: &Child, stack: &Path) -> Result<(OwnedFd, Option<OwnedFd>, Child, OwnedFd), String> {
    let namespaces = format!("/proc/{}/ns", holder.id());
    let open = |name: &str| {
        rustix::fs::open(
            format!("{namespaces}/{name}").as_str(),
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|errno| format!("opening the network namespace ({name}): {errno}"))
    };
    let root = rustix::process::geteuid().is_root();
    let net = open("net")?;
    let user = if root { None } else { Some(open("user")?) };
    let (exit_read, exit_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|error| format!("network pipe: {error}"))?;
    let (ready_read, ready_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|error| format!("network pipe: {error}"))?;
    let mut command = Command::new(stack);
    command
        .env_clear()
        .current_dir("/")
        // It parses what commands send: it confines itself too (a mount
        // namespace of its own, capabilities dropped, a seccomp filter).
        .args(["--configure", "--mtu=65520", "--disable-host-loopback"])
        .args(["--enable-sandbox", "--enable-seccomp"])
        // Its stdin is the exit descriptor (end of file: exit), its stdout
        // the ready one.
        .args(["--exit-fd=0", "--ready-fd=1", "--netns-type=path"]);
    if !root {
        command.arg(format!("--userns-path={namespaces}/user"));
    }
    let mut child = command
        .arg(format!("{namespaces}/net"))
        .arg("tap0")
        .stdin(Stdio::from(exit_read))
        .stdout(Stdio::from(ready_write))
        .stderr(Stdio::null())
        .spawn()
        .map_err(|error| format!("starting {}: {error}", stack.display()))?;
    // The ready pipe's write end lived in `command` too: without closing
    // it, a stack that dies would never be seen as gone.
    drop(command);
    // Each connection a command makes through the stack is a socket of the
    // stack's on the machine: at most this many at once, whatever the
    // host's own limit.
    let limited = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .map(|pid| {
            rustix::process::prlimit(
                Some(pid),
                rustix::process::Resource::Nofile,
                rustix::process::Rlimit {
                    current: Some(STACK_OPEN_FILES),
                    maximum: Some(STACK_OPEN_FILES),
                },
            )
        });
    if !matches!(limited, Some(Ok(_))) {
        end(&mut child);
        return Err("the network stack's open files could not be bounded".into());
    }
    if one_byte_within(ready_read.as_fd(), NETWORK_SETUP).is_none() {
        end(&mut child);
        return Err(format!(
            "{} did not configure the network namespace",
            stack.display()
        ));
    }
    Ok((net, user, child, exit_write))
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Ok(processes) = self.processes.get_mut() {
            // End of file on the stack's exit descriptor and on the
            // holder's stdin: both end by themselves; killed all the same.
            drop(processes.exit.take());
            end(&mut processes.stack);
            end(&mut processes.holder);
        }
    }
}

/// Closes `child`'s stdin (the holder exits on end of file), kills it and
/// reaps it: it is our own child.
fn end(child: &mut Child) {
    drop(child.stdin.take());
    let _ = child.kill();
    let _ = child.wait();
}

/// The first byte readable on `fd` within `limit`; `None` on end of file,
/// an error or when nothing came.
fn one_byte_within(fd: BorrowedFd<'_>, limit: Duration) -> Option<u8> {
    let mut ready = PollFd::new(&fd, PollFlags::IN);
    let wait = Timespec {
        tv_sec: limit.as_secs().try_into().unwrap_or(i64::MAX),
        tv_nsec: 0,
    };
    if !matches!(
        rustix::event::poll(std::slice::from_mut(&mut ready), Some(&wait)),
        Ok(1)
    ) {
        return None;
    }
    let mut byte = [0_u8; 1];
    match rustix::io::read(fd, &mut byte) {
        Ok(1) => Some(byte[0]),
        Ok(_) | Err(_) => None,
    }
}

/// The first installed network stack that only root can replace.
fn network_stack() -> Result<PathBuf, String> {
    use std::os::unix::fs::MetadataExt;
    for candidate in NETWORK_STACKS {
        let Ok(metadata) = std::fs::metadata(candidate) else {
            continue;
        };
        let trusted = metadata.is_file() && metadata.uid() == 0 && metadata.mode() & 0o022 == 0;
        if trusted {
            return Ok(PathBuf::from(candidate));
        }
    }
    Err(format!(
        "the network option needs slirp4netns (a user-mode network stack, package slirp4netns) at {}, owned by root",
        NETWORK_STACKS.join(" or ")
    ))
}
