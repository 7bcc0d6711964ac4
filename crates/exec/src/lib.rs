//! plan-exec: the only crate that spawns processes. It runs host-run shell
//! commands (`<shell> -c <command>`) with streamed output, a timeout,
//! cancellation from another thread, and the kernel-enforced Linux sandbox.
//!
//! How a command runs:
//! 1. [`Runner::open`] opens and checks the helper binary [`HELPER_NAME`]
//!    once; [`Runner::spawn`] executes that opened file (as
//!    `/proc/self/fd/<n>`, never a path that could have been replaced) with a
//!    plain `std::process::Command` (no `fork` of the host, no `pre_exec`, no
//!    `unsafe` in the host). Its stdin is a lifeline socket, its stdout and
//!    stderr are the command's pipes.
//! 2. The helper's supervisor stage leaves the host's session, becomes a
//!    child subreaper and starts the confining stage in a new process group.
//!    Where the caller asked for bounds ([`CommandBounds`]) it makes the
//!    command's own cgroup and puts the confining stage in it before the
//!    stage starts anything.
//!    It watches the host (a pidfd and the lifeline: if either says the host
//!    is gone, even after SIGKILL, it kills everything), the timeout and
//!    cancellation (SIGTERM to the group, SIGKILL after the grace), and when
//!    the shell exits it kills whatever the shell left behind.
//! 3. The confining stage marks inherited descriptors close-on-exec, arms its
//!    parent-death signal, applies the requested [`Confinement`] to itself
//!    (where [`Isolation::namespaces`] asks for them, new mount, IPC and
//!    network namespaces with a private `/dev` and the hidden and protected
//!    paths, the machine's own addresses unroutable for a networked
//!    command, the bounds kept in namespaces; then Landlock ABI 3+, all
//!    capabilities dropped, no_new_privs, seccomp, whose lock calls go to
//!    the PID namespace's init) and
//!    executes the shell with stdin `/dev/null`, in the working directory,
//!    with the minimal environment of [`CommandSpec::environment`].
//! 4. The runner's pump thread reads both pipes, delivers [`OutputEvent`]s
//!    (one `seq` across both streams, UTF-8 safe, coalesced up to 5 ms or
//!    4 KiB, stopping at the retained-output cap while still counting every
//!    byte) and returns a [`CommandOutcome`] whose hashes cover the delivered
//!    text.
//!
//! What it must not do: decide policy (which confinement a command gets, who
//! may run what, limits per session: that is plan-core's, through the host);
//! fall back to a weaker sandbox (a confinement that cannot be applied is
//! [`ExecError::SandboxUnavailable`] and nothing runs); record or audit
//! anything (the host does, through storage); depend on storage, protocol or
//! host.

mod agent_server;
#[doc(hidden)]
pub mod helper;
mod helper_file;
mod network;
mod notifier;
mod outcome;
mod output;
mod runner;
mod scratch;
mod service;
mod spec;
mod wire;
mod workspace;

pub use agent_server::AgentServer;
pub use network::NetworkNamespace;
pub use notifier::{NotifierOutcome, run_notifier};
pub use outcome::{CommandOutcome, CommandState, ExecError};
pub use output::{OutputEvent, OutputSink, Stream};
pub use runner::{
    Availability, BoundSupport, CancelHandle, HELPER_NAME, Runner, RunningCommand, SandboxSupport,
};
pub use scratch::{ScratchDir, ScratchRoot};
pub use service::start_service;
pub use spec::{
    CommandBounds, CommandSpec, Confinement, DEFAULT_LANG, DEFAULT_OUTPUT_CAP, DEFAULT_PATH, InotifyBound,
    Isolation, ScratchCap,
};
pub use workspace::WorkspaceDir;
