//! The host side of a command: starts the sandbox helper with a plain
//! `Command` (no `fork` of the host, no `pre_exec`, no `unsafe`), pumps both
//! output pipes on one thread per command, and turns the helper's report
//! into a [`CommandOutcome`].
//!
//! It carries out the confinement the caller chose and never picks or
//! weakens one; it records nothing (auditing is the host's job).

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, ChildStderr, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use rustix::event::{PollFd, PollFlags};

use crate::helper_file::HelperFile;
use crate::network::NetworkNamespace;
use crate::outcome::{CommandOutcome, CommandState, ExecError};
use crate::output::{OutputCollector, OutputSink, Stream};
use crate::spec::{CommandSpec, Confinement};
use crate::wire::{self, ConfineArgs, EndKind, Mode, Report, SuperviseArgs};

/// The file name of the sandbox helper binary.
pub const HELPER_NAME: &str = "plan-exec-sandbox";

/// How large a pipe the runner asks for (Linux only), so a fast writer needs fewer
/// wake-ups.
#[cfg(target_os = "linux")]
const PIPE_SIZE: usize = 1024 * 1024;

/// How long output is still taken after the supervisor vanished without a
/// report (a process it no longer kills may write forever).
const LOST_DRAIN: std::time::Duration = std::time::Duration::from_millis(100);

/// Bytes read from a pipe at a time.
const READ_SIZE: usize = 256 * 1024;

/// Whether the kernel sandbox works here, as [`Runner::sandbox_support`]
/// found out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SandboxSupport {
    /// The helper applied the read-only sandbox to itself and it held: the
    /// scratch dir was writable, a sibling directory was not, no UDP socket
    /// could be made and no capability was left.
    Available {
        /// Whether it did so inside its own namespaces (see
        /// [`crate::Isolation::namespaces`]), with no terminal reachable.
        namespaces: bool,
        /// Which of the bounds of [`crate::CommandBounds`] this machine
        /// gives a command.
        bounds: BoundSupport,
    },
    /// The sandbox cannot be applied; confined commands will fail to start
    /// with [`ExecError::SandboxUnavailable`].
    Unavailable {
        /// Why, for people.
        reason: String,
    },
}

/// Which bounds of [`crate::CommandBounds`] the machine gives a sandboxed
/// command, from what the probe found about each mechanism. `open_files`
/// is always given (a resource limit), as are the refusals of AIO contexts
/// and keys. Ask it with the namespaces the commands will have: some bounds
/// are kept in them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundSupport {
    memory_cgroup: Availability,
    pids_cgroup: Availability,
    pid_max: Availability,
    user_namespace_limits: Availability,
    root: bool,
}

/// Whether one bound can be had here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Availability {
    /// Applied to every command that asks for it.
    Available,
    /// Not here; asking for it makes a command fail to start.
    Unavailable {
        /// Why, for people.
        reason: String,
    },
}

impl Availability {
    /// Whether the bound can be had.
    pub fn is_available(&self) -> bool {
        matches!(self, Availability::Available)
    }

    fn reason(&self) -> Option<&str> {
        match self {
            Availability::Available => None,
            Availability::Unavailable { reason } => Some(reason),
        }
    }
}

impl BoundSupport {
    /// `tasks`: a `pids` cgroup of the command's own; inside its
    /// namespaces also the `pid_max` of its PID namespace (Linux 6.14+)
    /// or, not as root, `RLIMIT_NPROC` counted in its user namespace (root
    /// is never bound by `RLIMIT_NPROC`).
    pub fn tasks(&self, namespaces: bool) -> Availability {
        if self.pids_cgroup.is_available() || (namespaces && (!self.root || self.pid_max.is_available())) {
            return Availability::Available;
        }
        let no_cgroup = self.pids_cgroup.reason().unwrap_or_default();
        let reason = if namespaces {
            format!(
                "{}; {no_cgroup}; and root is never bound by RLIMIT_NPROC",
                self.pid_max.reason().unwrap_or_default()
            )
        } else {
            format!("{no_cgroup}; without namespaces nothing else bounds a command's processes")
        };
        Availability::Unavailable { reason }
    }

    /// `memory_bytes`: a `memory` cgroup of the command's own.
    pub fn memory(&self) -> Availability {
        self.memory_cgroup.clone()
    }

    /// `inotify`: the limits of the command's own user namespace.
    pub fn inotify(&self, namespaces: bool) -> Availability {
        if namespaces {
            self.user_namespace_limits.clone()
        } else {
            Availability::Unavailable {
                reason: "inotify is bounded in a command's own user namespace, and commands have none here"
                    .into(),
            }
        }
    }

    /// Reads the probe's `mechanism NAME` / `nomechanism NAME REASON`
    /// lines; a mechanism the probe said nothing of is unavailable.
    fn parse(lines: &[&str]) -> BoundSupport {
        let of = |name: &str| {
            for line in lines {
                if line.strip_prefix("mechanism ") == Some(name) {
                    return Availability::Available;
                }
                if let Some(reason) = line
                    .strip_prefix("nomechanism ")
                    .and_then(|rest| rest.strip_prefix(name))
                    .and_then(|rest| rest.strip_prefix(' '))
                {
                    return Availability::Unavailable {
                        reason: reason.to_owned(),
                    };
                }
            }
            Availability::Unavailable {
                reason: format!("the sandbox helper did not say whether it has {name}"),
            }
        };
        BoundSupport {
            memory_cgroup: of(wire::MECHANISM_MEMORY_CGROUP),
            pids_cgroup: of(wire::MECHANISM_PIDS_CGROUP),
            pid_max: of(wire::MECHANISM_PID_MAX),
            user_namespace_limits: of(wire::MECHANISM_USER_NAMESPACE_LIMITS),
            root: rustix::process::geteuid().is_root(),
        }
    }
}

/// Starts commands through one sandbox helper binary, opened and checked
/// once (see [`Runner::open`]) and executed by descriptor for every command.
#[derive(Clone, Debug)]
pub struct Runner {
    helper: Arc<HelperFile>,
}

impl Runner {
    /// A runner using the helper at `helper`, an absolute path (an embedder
    /// that ships the helper somewhere else points here). The file is opened
    /// now and checked: a regular executable owned by root or the current
    /// user, not writable by group or others, in a directory owned by root
    /// or the current user that others cannot write. Every command then runs
    /// that opened file: replacing the file at its path later changes
    /// nothing.
    ///
    /// # Errors
    ///
    /// [`ExecError::SandboxUnavailable`] naming the check that failed.
    pub fn open(helper: impl AsRef<Path>) -> Result<Self, ExecError> {
        Ok(Self {
            helper: Arc::new(HelperFile::open(helper.as_ref())?),
        })
    }

    /// A runner using the helper bundled with the current executable:
    /// [`HELPER_NAME`] in its directory, or in its parent (where Cargo puts
    /// binaries when the current executable is a test in `deps/`), opened and
    /// checked as by [`Runner::open`]. Nothing is looked up on `PATH` or
    /// relative to the working directory.
    ///
    /// # Errors
    ///
    /// [`ExecError::SandboxUnavailable`] when no helper is there or the one
    /// there fails a check.
    pub fn beside_current_exe() -> Result<Self, ExecError> {
        let exe = std::env::current_exe().map_err(|error| ExecError::SandboxUnavailable {
            reason: format!("the current executable is unknown: {error}"),
        })?;
        let mut directory = exe.parent();
        for _ in 0..2 {
            let Some(dir) = directory else { break };
            let candidate = dir.join(HELPER_NAME);
            if candidate.is_file() {
                return Self::open(candidate);
            }
            directory = dir.parent();
        }
        Err(ExecError::SandboxUnavailable {
            reason: format!(
                "the sandbox helper {HELPER_NAME} was not found beside {}",
                exe.display()
            ),
        })
    }

    /// The path the helper was opened from.
    pub fn helper(&self) -> &Path {
        self.helper.path()
    }

    /// Finds out once whether the read-only sandbox can be applied here, by
    /// having the helper apply it to itself and test it (in a temporary
    /// directory it removes again). Takes a few milliseconds.
    pub fn sandbox_support(&self) -> SandboxSupport {
        static PROBE: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.subsec_nanos());
        let name = format!(
            "plan-exec-probe-{}-{nanos}-{}",
            std::process::id(),
            PROBE.fetch_add(1, Ordering::Relaxed)
        );
        let outside = std::env::temp_dir().join(name);
        let scratch = outside.join("scratch");
        let made = std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&outside)
            .and_then(|()| std::fs::DirBuilder::new().mode(0o700).create(&scratch));
        if let Err(error) = made {
            let _ = std::fs::remove_dir_all(&outside);
            return SandboxSupport::Unavailable {
                reason: format!("probe directory: {error}"),
            };
        }
        let output = Command::new(self.helper.exec_path())
            .arg(wire::MODE_PROBE)
            .arg("--scratch")
            .arg(&scratch)
            .arg("--outside")
            .arg(&outside)
            .env_clear()
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        // The probe wrote one file; nothing in its directory is followed.
        let _ = std::fs::remove_dir_all(&outside);
        let output = match output {
            Ok(output) => output,
            Err(error) => {
                return SandboxSupport::Unavailable {
                    reason: format!(
                        "the sandbox helper {} cannot be started: {error}",
                        self.helper.path().display()
                    ),
                };
            }
        };
        let answer = String::from_utf8_lossy(&output.stdout);
        let lines: Vec<&str> = answer.lines().collect();
        let (verdict, rest) = lines
            .split_first()
            .map_or(("", &[][..]), |(first, rest)| (*first, rest));
        if verdict == "available namespaces" || verdict == "available" {
            SandboxSupport::Available {
                namespaces: verdict == "available namespaces",
                bounds: BoundSupport::parse(rest),
            }
        } else if let Some(reason) = verdict.strip_prefix("unavailable ") {
            SandboxSupport::Unavailable {
                reason: reason.to_owned(),
            }
        } else {
            SandboxSupport::Unavailable {
                reason: format!("unexpected answer from the sandbox helper: {verdict:?}"),
            }
        }
    }

    /// The path that executes the opened helper file.
    pub(crate) fn helper_exec_path(&self) -> std::path::PathBuf {
        self.helper.exec_path()
    }

    /// Starts `spec`. Never fails: a command that cannot start comes back
    /// from [`RunningCommand::wait`] as [`CommandState::FailedToStart`] with
    /// the reason. Output events go to `sink` on the command's own thread.
    pub fn spawn(&self, mut spec: CommandSpec, sink: impl OutputSink) -> RunningCommand {
        // A networked command without its session's namespace gets one of
        // its own, which lives in `spec` as long as the command runs.
        let networked = matches!(
            spec.confinement,
            Confinement::WorkspaceWrite { network: true, .. }
        );
        if networked && spec.isolation.namespaces && spec.network.is_none() {
            match NetworkNamespace::start(self) {
                Ok(network) => spec.network = Some(network),
                Err(error) => return RunningCommand::failed(error),
            }
        }
        match self.start(&spec) {
            Ok((child, lifeline)) => {
                let lifeline = Arc::new(lifeline);
                let cancel = CancelHandle {
                    lifeline: Some(Arc::clone(&lifeline)),
                };
                let supervisor_pid = child.id();
                let pump = std::thread::Builder::new()
                    .name("plan-exec-pump".into())
                    .spawn(move || pump(child, &lifeline, &spec, sink));
                match pump {
                    Ok(pump) => RunningCommand {
                        supervisor_pid: Some(supervisor_pid),
                        cancel,
                        pump: Some(pump),
                        failed: None,
                    },
                    // The lifeline closes with the failed closure, which makes
                    // the supervisor kill the command.
                    Err(error) => RunningCommand::failed(ExecError::Spawn {
                        reason: format!("pump thread: {error}"),
                    }),
                }
            }
            Err(error) => RunningCommand::failed(error),
        }
    }

    fn start(&self, spec: &CommandSpec) -> Result<(Child, UnixStream), ExecError> {
        if spec.command.contains('\0') {
            return Err(ExecError::InvalidSpec {
                reason: "the command contains a NUL byte".into(),
            });
        }
        spec.isolation.bounds.check()?;
        let opened = open_directories(spec)?;
        let handover = wire::HandoverRef {
            scratch: spec.scratch.fd(),
            cwd: opened.cwd.as_fd(),
            // A read-only command gets it too: what is hidden in it is
            // found there.
            workspace: match (&spec.confinement, &spec.workspace, &opened.workspace_by_path) {
                (Confinement::WorkspaceWrite { .. } | Confinement::ReadOnly, Some(workspace), _) => {
                    Some(workspace.fd())
                }
                (_, _, by_path) => by_path.as_ref().map(AsFd::as_fd),
            },
            network: match &spec.confinement {
                Confinement::WorkspaceWrite { network: true, .. } => {
                    spec.network.as_ref().map(NetworkNamespace::descriptors)
                }
                Confinement::WorkspaceWrite { network: false, .. }
                | Confinement::ReadOnly
                | Confinement::None => None,
            },
        };
        let mode = match &spec.confinement {
            Confinement::None => Mode::None,
            Confinement::ReadOnly => Mode::ReadOnly,
            Confinement::WorkspaceWrite {
                workspace_root,
                network,
            } => Mode::WorkspaceWrite {
                workspace_root: workspace_root.clone(),
                network: *network,
            },
        };
        let args = SuperviseArgs {
            host_pid: std::process::id(),
            timeout: spec.timeout,
            grace: spec.grace,
            cwd: spec.cwd.clone(),
            confine: ConfineArgs {
                expected_parent: std::process::id(),
                mode,
                scratch_dir: spec.scratch.path().to_path_buf(),
                shell: spec.shell.clone(),
                command: spec.command.clone().into(),
                env: spec.environment(),
                namespaces: spec.isolation.namespaces,
                scratch_root: spec.isolation.scratch_root.clone(),
                hidden: spec.isolation.hidden.clone(),
                protected: spec.isolation.protected.clone(),
                reserved: spec.isolation.reserved.clone(),
                protected_names: spec.isolation.protected_names.clone(),
                hidden_names: spec.isolation.hidden_names.clone(),
                visible: spec.isolation.visible.clone(),
                scratch_cap: spec.isolation.scratch_cap,
                // Bounds are part of the sandbox: an unconfined command
                // runs as the host does.
                bounds: if spec.confinement.is_sandboxed() {
                    spec.isolation.bounds
                } else {
                    crate::spec::CommandBounds::default()
                },
            },
        };
        let (ours, theirs) = UnixStream::pair().map_err(|error| ExecError::Spawn {
            reason: error.to_string(),
        })?;
        let mut child = Command::new(self.helper.exec_path())
            .args(args.encode())
            // The helper's own stages run unconfined: nothing of the host's
            // environment reaches them (the command's travels as arguments
            // and is set only on the shell, inside the sandbox).
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| {
                let reason = format!(
                    "the sandbox helper {} cannot be started: {error}",
                    self.helper.path().display()
                );
                if spec.confinement.is_sandboxed() {
                    ExecError::SandboxUnavailable { reason }
                } else {
                    ExecError::Spawn { reason }
                }
            })?;
        // The directories go as descriptors; a supervisor that never gets
        // them fails the command itself.
        if let Err(reason) = wire::send_handover(&ours, &handover) {
            // Closing the lifeline ends the supervisor; it is reaped here.
            drop(ours);
            let _ = child.wait();
            return Err(ExecError::Spawn { reason });
        }
        Ok((child, ours))
    }
}

/// The descriptors a command starts with that are opened here: the working
/// directory (below the held workspace, or by its path) and, for a
/// workspace-write confinement without a held workspace, its root by path.
struct Opened {
    cwd: OwnedFd,
    workspace_by_path: Option<OwnedFd>,
}

fn open_directories(spec: &CommandSpec) -> Result<Opened, ExecError> {
    let by_path = |path: &Path| {
        rustix::fs::open(
            path,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|errno| ExecError::CwdUnavailable {
            cwd: path.to_path_buf(),
            reason: errno.to_string(),
        })
    };
    let cwd = match &spec.workspace {
        Some(workspace) => workspace.resolve_cwd(&spec.cwd)?,
        None => by_path(&spec.cwd)?,
    };
    let workspace_by_path = match (&spec.confinement, &spec.workspace) {
        (Confinement::WorkspaceWrite { workspace_root, .. }, None) => Some(by_path(workspace_root).map_err(
            |error| ExecError::SandboxUnavailable {
                reason: format!("the workspace root cannot be opened: {error}"),
            },
        )?),
        (Confinement::WorkspaceWrite { .. } | Confinement::ReadOnly | Confinement::None, _) => None,
    };
    Ok(Opened {
        cwd,
        workspace_by_path,
    })
}

/// Cancels one command from any thread. Cloneable; cancelling twice, or
/// after the command ended, does nothing.
#[derive(Clone, Debug)]
pub struct CancelHandle {
    lifeline: Option<Arc<UnixStream>>,
}

impl CancelHandle {
    /// Asks the supervisor to end the command: SIGTERM to its process group,
    /// SIGKILL after the grace. Returns at once; the outcome says
    /// [`CommandState::Cancelled`] unless the command had already ended.
    pub fn cancel(&self) {
        if let Some(lifeline) = &self.lifeline {
            // A supervisor that is already gone needs no cancelling.
            let _ = (&**lifeline).write_all(wire::CANCEL);
        }
    }
}

/// A started command. Dropping it does not stop the command: its pump thread
/// still delivers output and reaps it; call [`RunningCommand::cancel`] to end
/// it early.
#[derive(Debug)]
pub struct RunningCommand {
    supervisor_pid: Option<u32>,
    cancel: CancelHandle,
    pump: Option<JoinHandle<CommandOutcome>>,
    failed: Option<ExecError>,
}

impl RunningCommand {
    fn failed(error: ExecError) -> Self {
        Self {
            supervisor_pid: None,
            cancel: CancelHandle { lifeline: None },
            pump: None,
            failed: Some(error),
        }
    }

    /// Cancels the command (see [`CancelHandle::cancel`]).
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// A handle to cancel the command from another thread while this one
    /// waits.
    pub fn cancel_handle(&self) -> CancelHandle {
        self.cancel.clone()
    }

    /// The pid of the supervising helper process, if it started.
    pub fn supervisor_pid(&self) -> Option<u32> {
        self.supervisor_pid
    }

    /// Waits until the command and everything it started are gone and all
    /// output has been delivered, and returns the outcome.
    pub fn wait(self) -> CommandOutcome {
        if let Some(pump) = self.pump {
            match pump.join() {
                Ok(outcome) => return outcome,
                Err(_) => {
                    return not_started(ExecError::Spawn {
                        reason: "the pump thread panicked".into(),
                    });
                }
            }
        }
        not_started(self.failed.unwrap_or(ExecError::Spawn {
            reason: "the command was not started".into(),
        }))
    }
}

fn not_started(error: ExecError) -> CommandOutcome {
    let totals = OutputCollector::new(0).totals();
    CommandOutcome {
        state: CommandState::FailedToStart,
        exit_code: None,
        signal: None,
        stdout_bytes: 0,
        stderr_bytes: 0,
        truncated: false,
        stdout_sha256: totals.stdout_sha256,
        stderr_sha256: totals.stderr_sha256,
        output_sha256: totals.output_sha256,
        error: Some(error),
    }
}

/// Makes a read end non-blocking and large. Both are optimisations only: a
/// pipe that refuses them still works, one read per poll.
fn tune_pipe(fd: impl AsFd) {
    let _ = rustix::io::ioctl_fionbio(&fd, true);
    #[cfg(target_os = "linux")]
    let _ = rustix::pipe::fcntl_setpipe_size(&fd, PIPE_SIZE);
}

/// One open output pipe.
struct Pipe {
    reader: Option<File>,
    stream: Stream,
}

/// Reads both pipes and the lifeline until the supervisor has reported and
/// both pipes are closed, delivering events on the way.
fn pump(
    mut child: Child,
    lifeline: &UnixStream,
    spec: &CommandSpec,
    mut sink: impl OutputSink,
) -> CommandOutcome {
    let stdout = child
        .stdout
        .take()
        .map(|pipe: ChildStdout| File::from(OwnedFd::from(pipe)));
    let stderr = child
        .stderr
        .take()
        .map(|pipe: ChildStderr| File::from(OwnedFd::from(pipe)));
    for pipe in stdout.iter().chain(stderr.iter()) {
        tune_pipe(pipe);
    }
    let mut out = Pipe {
        reader: stdout,
        stream: Stream::Stdout,
    };
    let mut err = Pipe {
        reader: stderr,
        stream: Stream::Stderr,
    };
    let mut collector = OutputCollector::new(spec.output_cap);
    let mut buffer = vec![0_u8; READ_SIZE];
    let mut report_line: Vec<u8> = Vec::new();
    let mut report: Option<Report> = None;
    let mut lifeline_open = true;
    let mut lost_since: Option<Instant> = None;
    loop {
        let pipes_open = out.reader.is_some() || err.reader.is_some();
        if !pipes_open && (report.is_some() || !lifeline_open) {
            break;
        }
        // The supervisor vanished without a report: whatever still holds the
        // pipes is not waited for; take what is there and stop.
        let lost = report.is_none() && !lifeline_open;
        if lost && lost_since.get_or_insert_with(Instant::now).elapsed() > LOST_DRAIN {
            break;
        }
        let now = Instant::now();
        let timeout = if lost {
            Some(rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            })
        } else {
            collector
                .due()
                .and_then(|due| rustix::event::Timespec::try_from(due.saturating_duration_since(now)).ok())
        };
        let (out_ready, err_ready, lifeline_ready) = {
            let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(3);
            let out_index = out.reader.as_ref().map(|reader| {
                fds.push(PollFd::new(reader, PollFlags::IN));
                fds.len() - 1
            });
            let err_index = err.reader.as_ref().map(|reader| {
                fds.push(PollFd::new(reader, PollFlags::IN));
                fds.len() - 1
            });
            let lifeline_index = lifeline_open.then(|| {
                fds.push(PollFd::new(lifeline, PollFlags::IN));
                fds.len() - 1
            });
            match rustix::event::poll(&mut fds, timeout.as_ref()) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(_) => break,
            }
            let ready = |index: Option<usize>| index.is_some_and(|index| !fds[index].revents().is_empty());
            (ready(out_index), ready(err_index), ready(lifeline_index))
        };
        let now = Instant::now();
        let mut progressed = false;
        for (pipe, ready) in [(&mut out, out_ready), (&mut err, err_ready)] {
            if !ready {
                continue;
            }
            progressed = true;
            // Drain what is there (the pipe is non-blocking), so a fast
            // writer costs one poll per pipe-full rather than per read.
            while let Some(reader) = pipe.reader.as_mut() {
                match reader.read(&mut buffer) {
                    Ok(0) => {
                        pipe.reader = None;
                        collector.finish_stream(pipe.stream, now, &mut sink);
                    }
                    Ok(read) => {
                        collector.push(pipe.stream, &buffer[..read], now, &mut sink);
                        if read < buffer.len() {
                            break;
                        }
                    }
                    Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        pipe.reader = None;
                        collector.finish_stream(pipe.stream, now, &mut sink);
                    }
                }
            }
        }
        if lifeline_ready {
            progressed = true;
            match (&*lifeline).read(&mut buffer) {
                Ok(0) | Err(_) => lifeline_open = false,
                Ok(read) => {
                    report_line.extend_from_slice(&buffer[..read]);
                    if report_line.contains(&b'\n') {
                        report = Report::parse(&String::from_utf8_lossy(&report_line));
                        lifeline_open = false;
                    }
                }
            }
        }
        if collector.due().is_some_and(|due| Instant::now() >= due) {
            collector.flush(&mut sink);
        }
        if lost && !progressed {
            break;
        }
    }
    collector.flush(&mut sink);
    drop(out);
    drop(err);
    let _ = child.wait();
    let totals = collector.totals();
    let (state, exit_code, signal, error) = match report {
        Some(Report::End {
            kind,
            exit_code,
            signal,
        }) => {
            let state = match kind {
                EndKind::Exited => CommandState::Exited,
                EndKind::TimedOut => CommandState::TimedOut,
                EndKind::Cancelled => CommandState::Cancelled,
            };
            (state, exit_code, signal, None)
        }
        Some(Report::Fail { kind, reason }) => {
            let error = wire::failure_error(kind, reason, &spec.shell, &spec.cwd, spec.scratch.path());
            (CommandState::FailedToStart, None, None, Some(error))
        }
        None => (CommandState::Lost, None, None, None),
    };
    CommandOutcome {
        state,
        exit_code,
        signal,
        stdout_bytes: totals.stdout_bytes,
        stderr_bytes: totals.stderr_bytes,
        truncated: totals.truncated,
        stdout_sha256: totals.stdout_sha256,
        stderr_sha256: totals.stderr_sha256,
        output_sha256: totals.output_sha256,
        error,
    }
}
