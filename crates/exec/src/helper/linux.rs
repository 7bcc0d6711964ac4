//! The helper's stages on Linux: supervision (session, subreaper, timeout,
//! cancellation, the final sweep, host-death detection) and confinement
//! (close-on-exec, parent-death signal, the namespaces, the sandbox, exec of
//! the shell, which inside namespaces is left to `pid_namespace`).
//!
//! It must not choose a confinement or apply less than it was told.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, Signal, WaitIdOptions, WaitOptions};

use super::{bounds, namespaces, pid_namespace, sandbox};
use crate::spec::ScratchCap;
use crate::wire::{self, ConfineArgs, EndKind, FailKind, Mode, Report};

/// Marks every descriptor from 3 up close-on-exec, so nothing the host
/// leaked (an embedder's sockets, files) reaches the shell. Marking rather
/// than closing keeps descriptors that library code of this very process may
/// still hold valid.
#[allow(unsafe_code)]
fn mark_inherited_close_on_exec() -> Result<(), String> {
    // SAFETY: close_range(2) with CLOSE_RANGE_CLOEXEC closes nothing and takes
    // no pointers; it only sets FD_CLOEXEC on descriptors 3..=u32::MAX, which
    // cannot invalidate any descriptor or memory this process uses.
    let result = unsafe { libc::syscall(libc::SYS_close_range, 3_u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) };
    if result == 0 {
        Ok(())
    } else {
        Err(format!("close_range: {}", std::io::Error::last_os_error()))
    }
}

/// Takes the socket that is our stdin as a close-on-exec descriptor and puts
/// `/dev/null` in its place.
fn take_stdin_socket() -> Result<UnixStream, String> {
    let socket =
        rustix::io::fcntl_dupfd_cloexec(std::io::stdin(), 3).map_err(|error| format!("dup: {error}"))?;
    let null = std::fs::File::open("/dev/null").map_err(|error| format!("/dev/null: {error}"))?;
    rustix::stdio::dup2_stdin(&null).map_err(|error| format!("dup2: {error}"))?;
    Ok(UnixStream::from(socket))
}

/// Whether `fd` names a directory.
fn is_directory(fd: BorrowedFd<'_>) -> bool {
    rustix::fs::fstat(fd).is_ok_and(|stat| {
        rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Directory
    })
}

fn pid_of(raw: u32) -> Option<Pid> {
    i32::try_from(raw).ok().and_then(Pid::from_raw)
}

// ---------------------------------------------------------------- supervise

pub(super) fn supervise(rest: &[OsString]) -> ExitCode {
    if let Err(reason) = mark_inherited_close_on_exec() {
        return report_and_exit(
            None,
            &Report::Fail {
                kind: FailKind::Spawn,
                reason,
            },
        );
    }
    let lifeline = match take_stdin_socket() {
        Ok(lifeline) => lifeline,
        Err(reason) => {
            return report_and_exit(
                None,
                &Report::Fail {
                    kind: FailKind::Spawn,
                    reason,
                },
            );
        }
    };
    let handover = match wire::receive_handover(&lifeline) {
        Ok(handover) => handover,
        Err(reason) => {
            return report_and_exit(
                Some(&lifeline),
                &Report::Fail {
                    kind: FailKind::Scratch,
                    reason,
                },
            );
        }
    };
    match Supervisor::start(rest, &lifeline, &handover) {
        Ok(Some(report)) => report_and_exit(Some(&lifeline), &report),
        Ok(None) => ExitCode::SUCCESS,
        Err(report) => report_and_exit(Some(&lifeline), &report),
    }
}

fn report_and_exit(lifeline: Option<&UnixStream>, report: &Report) -> ExitCode {
    if let Some(mut lifeline) = lifeline {
        // The host may be gone; then nobody is left to tell.
        let _ = lifeline.write_all(report.line().as_bytes());
    }
    ExitCode::SUCCESS
}

struct Supervisor {
    shell: Pid,
    /// `None`: a timeout too large to represent, i.e. none.
    deadline: Option<Instant>,
    grace: Duration,
    ending: Option<EndKind>,
    kill_at: Option<Instant>,
}

fn fail(kind: FailKind, reason: impl Into<String>) -> Report {
    Report::Fail {
        kind,
        reason: reason.into(),
    }
}

impl Supervisor {
    /// Runs the whole supervision. `Ok(None)`: the host is gone, nobody to
    /// report to.
    fn start(
        rest: &[OsString],
        lifeline: &UnixStream,
        handover: &wire::Handover,
    ) -> Result<Option<Report>, Report> {
        let started = Instant::now();
        let decoded = wire::decode(rest).map_err(|reason| fail(FailKind::Spawn, reason))?;
        let (Some(timeout), Some(grace), Some(_)) = (decoded.timeout, decoded.grace, decoded.cwd) else {
            return Err(fail(
                FailKind::Spawn,
                "supervise needs --timeout-ms, --grace-ms and --cwd",
            ));
        };
        let host_pid =
            pid_of(decoded.confine.expected_parent).ok_or_else(|| fail(FailKind::Spawn, "bad host pid"))?;
        // A session of our own: no controlling terminal for the command to
        // read from or signal, and no terminal signals from the host's.
        rustix::process::setsid().map_err(|error| fail(FailKind::Spawn, format!("setsid: {error}")))?;
        // Orphans of the command are reparented to us, so none escapes the
        // final sweep, even one that left the process group.
        rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
            .map_err(|error| fail(FailKind::Spawn, format!("subreaper: {error}")))?;
        let host = rustix::process::pidfd_open(host_pid, rustix::process::PidfdFlags::empty())
            .map_err(|error| fail(FailKind::Spawn, format!("pidfd_open(host): {error}")))?;
        if rustix::process::getppid() != Some(host_pid) {
            // The host died before we watched it.
            return Ok(None);
        }
        if !is_directory(handover.cwd.as_fd()) {
            return Err(fail(FailKind::Cwd, "not an existing directory"));
        }
        let confine = ConfineArgs {
            expected_parent: rustix::process::getpid().as_raw_nonzero().get().unsigned_abs(),
            ..decoded.confine
        };
        let (status_ours, status_theirs) =
            UnixStream::pair().map_err(|error| fail(FailKind::Spawn, format!("socketpair: {error}")))?;
        // This very binary, even if its file was replaced since it started.
        let child = Command::new("/proc/self/exe")
            .args(confine.encode())
            .stdin(Stdio::from(OwnedFd::from(status_theirs)))
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            // The stage changes into the working directory's descriptor.
            .current_dir("/")
            .process_group(0)
            .spawn()
            .map_err(|error| fail(FailKind::Spawn, format!("starting the confining stage: {error}")))?;
        let shell = pid_of(child.id()).ok_or_else(|| fail(FailKind::Spawn, "bad child pid"))?;
        drop(child);
        // The confining stage waits for this before it does anything; if it
        // cannot be sent, it gets nothing and reports why.
        let _ = wire::send_handover(&status_ours, &handover.borrow());
        // Meanwhile (the stage builds its namespaces), the command's own
        // cgroup, with the stage moved into it before it starts anything
        // (it waits for `CGROUP_READY` before it forks or executes):
        // everything the command starts is counted there. Removed when
        // this returns, after the final sweep.
        let _cgroup = match command_cgroup(&confine, shell) {
            Ok(cgroup) => cgroup,
            Err(reason) => {
                drop(status_ours);
                let _ = rustix::process::kill_process(shell, Signal::KILL);
                let _ = rustix::process::waitpid(Some(shell), WaitOptions::empty());
                return Err(fail(FailKind::Sandbox, reason));
            }
        };
        let _ = (&status_ours).write_all(&wire::CGROUP_READY);
        let mut supervisor = Supervisor {
            shell,
            deadline: started.checked_add(timeout),
            grace,
            ending: None,
            kill_at: None,
        };
        // The confining stage closes its end of the status socket by
        // executing the shell, or writes why it could not. It is read in
        // the same loop as the lifeline, the host and the deadline: what
        // the stage does before the shell runs (building namespaces,
        // reading the workspace's repository files) is the command's time,
        // ended by its timeout and cancellation like the shell itself.
        supervisor.run(lifeline, &host, status_ours)
    }

    fn run(
        &mut self,
        lifeline: &UnixStream,
        host: &OwnedFd,
        status: UnixStream,
    ) -> Result<Option<Report>, Report> {
        let shell_fd = rustix::process::pidfd_open(self.shell, rustix::process::PidfdFlags::empty())
            .map_err(|error| fail(FailKind::Spawn, format!("pidfd_open(shell): {error}")))?;
        let mut status = Some(status);
        let mut status_text: Vec<u8> = Vec::new();
        loop {
            let now = Instant::now();
            if self.ending.is_none() && self.deadline.is_some_and(|deadline| now >= deadline) {
                self.begin_ending(EndKind::TimedOut, now);
            }
            if self.kill_at.is_some_and(|at| now >= at) {
                self.kill_at = None;
                let _ = rustix::process::kill_process_group(self.shell, Signal::KILL);
            }
            let next = match (self.ending, self.kill_at) {
                (None, _) => self.deadline,
                (Some(_), at) => at,
            };
            let wait = next.map(|at| at.saturating_duration_since(now));
            let timespec = wait.and_then(|wait| rustix::event::Timespec::try_from(wait).ok());
            let (lifeline_ready, host_ready, shell_ready, status_ready) = {
                let mut fds = vec![
                    PollFd::new(lifeline, PollFlags::IN),
                    PollFd::new(host, PollFlags::IN),
                    PollFd::new(&shell_fd, PollFlags::IN),
                ];
                if let Some(status) = &status {
                    fds.push(PollFd::new(status, PollFlags::IN));
                }
                match rustix::event::poll(&mut fds, timespec.as_ref()) {
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(error) => return Err(fail(FailKind::Spawn, format!("poll: {error}"))),
                }
                let ready = |index: usize| fds.get(index).is_some_and(|fd| !fd.revents().is_empty());
                (ready(0), ready(1), ready(2), ready(3))
            };
            if host_ready {
                self.sweep();
                return Ok(None);
            }
            if lifeline_ready {
                let mut buffer = [0_u8; 64];
                match (&*lifeline).read(&mut buffer) {
                    Ok(0) | Err(_) => {
                        self.sweep();
                        return Ok(None);
                    }
                    Ok(read) => {
                        if buffer[..read].contains(&b'\n') && self.ending.is_none() {
                            self.begin_ending(EndKind::Cancelled, Instant::now());
                        }
                    }
                }
            }
            if status_ready && let Some(socket) = &status {
                let mut buffer = [0_u8; 1024];
                match (&*socket).read(&mut buffer) {
                    // A reason is one short line; more than that is not kept.
                    Ok(read) if read > 0 => {
                        if status_text.len() < 4096 {
                            status_text.extend_from_slice(&buffer[..read]);
                        }
                    }
                    Ok(_) | Err(_) => {
                        status = None;
                        let text = String::from_utf8_lossy(&status_text);
                        if let Some((kind, reason)) = wire::parse_failure(&text) {
                            self.sweep();
                            return Err(Report::Fail { kind, reason });
                        }
                    }
                }
            }
            if shell_ready {
                // A stage that reported a failure and exited at once: its
                // reason is already on the socket.
                if let Some(socket) = status.take() {
                    let _ = socket.set_nonblocking(true);
                    let mut buffer = [0_u8; 1024];
                    while let Ok(read) = (&socket).read(&mut buffer) {
                        if read == 0 || status_text.len() >= 4096 {
                            break;
                        }
                        status_text.extend_from_slice(&buffer[..read]);
                    }
                    let text = String::from_utf8_lossy(&status_text);
                    if let Some((kind, reason)) = wire::parse_failure(&text) {
                        self.sweep();
                        return Err(Report::Fail { kind, reason });
                    }
                }
                return Ok(Some(self.finish()));
            }
        }
    }

    fn begin_ending(&mut self, kind: EndKind, now: Instant) {
        self.ending = Some(kind);
        // A grace too large to represent means no SIGKILL.
        self.kill_at = now.checked_add(self.grace);
        let _ = rustix::process::kill_process_group(self.shell, Signal::TERM);
        // A stopped process acts on SIGTERM only once continued.
        let _ = rustix::process::kill_process_group(self.shell, Signal::CONT);
    }

    /// The shell has exited: read its status without reaping it (its pid,
    /// which is also the group id, stays taken while we kill the group),
    /// kill and reap everything else, then reap it.
    fn finish(&mut self) -> Report {
        let status = rustix::process::waitid(
            rustix::process::WaitId::Pid(self.shell),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        );
        let (exit_code, signal) = match status {
            Ok(Some(status)) => (status.exit_status(), status.terminating_signal()),
            Ok(None) | Err(_) => (None, None),
        };
        self.sweep();
        Report::End {
            kind: self.ending.unwrap_or(EndKind::Exited),
            exit_code,
            signal,
        }
    }

    /// Kills the process group and every other child until only the shell
    /// (possibly a zombie) is left, then reaps the shell. Every descendant
    /// that outlives its parent is reparented to us (subreaper), so when our
    /// only child is the shell, nothing of the command is left.
    fn sweep(&mut self) {
        let started = Instant::now();
        loop {
            let _ = rustix::process::kill_process_group(self.shell, Signal::KILL);
            let _ = rustix::process::kill_process(self.shell, Signal::KILL);
            match children() {
                Some(children) => {
                    let others: Vec<Pid> = children.into_iter().filter(|pid| *pid != self.shell).collect();
                    if others.is_empty() {
                        break;
                    }
                    for pid in others {
                        let _ = rustix::process::kill_process(pid, Signal::KILL);
                        let _ = rustix::process::waitpid(Some(pid), WaitOptions::NOHANG);
                    }
                }
                None => {
                    // Without /proc child lists: reap what the group kill
                    // ends until no child is left (or give up after a while).
                    match rustix::process::waitpid(None, WaitOptions::NOHANG) {
                        Err(rustix::io::Errno::CHILD) => return,
                        Ok(_) | Err(_) if started.elapsed() > Duration::from_secs(2) => return,
                        Ok(_) | Err(_) => {}
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = rustix::process::waitpid(Some(self.shell), WaitOptions::empty());
    }
}

/// Makes the command's cgroup for the bounds `args` asks (none for an
/// unconfined command) and moves the confining stage `stage` into it. The
/// cgroup's `pids` limit is required where nothing else keeps the tasks
/// bound: without namespaces, or for root on a kernel without a `pid_max`
/// per PID namespace (`RLIMIT_NPROC` keeps it for anyone else inside them).
fn command_cgroup(args: &ConfineArgs, stage: Pid) -> Result<Option<bounds::CommandCgroup>, String> {
    if matches!(args.mode, Mode::None) {
        return Ok(None);
    }
    let root = rustix::process::geteuid().is_root();
    let pids_required = !args.namespaces || (root && !bounds::pid_namespaces_have_their_own_pid_max());
    // Inside namespaces the outer stage stays outside the PID namespace.
    let extra_tasks = u64::from(args.namespaces);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    let name = format!("{}-{nanos}", std::process::id());
    let cgroup = bounds::CommandCgroup::make(&args.bounds, &name, extra_tasks, pids_required)?;
    if let Some(cgroup) = &cgroup {
        cgroup.add(stage.as_raw_nonzero().get().unsigned_abs())?;
    }
    Ok(cgroup)
}

/// Our direct children, from `/proc/thread-self/children` (the helper is
/// single-threaded, so this thread's children are the process's).
fn children() -> Option<Vec<Pid>> {
    let text = std::fs::read_to_string("/proc/thread-self/children").ok()?;
    Some(
        text.split_whitespace()
            .filter_map(|word| word.parse::<i32>().ok())
            .filter_map(Pid::from_raw)
            .collect(),
    )
}

// ------------------------------------------------------------------ confine

pub(super) fn confine(rest: &[OsString]) -> ExitCode {
    let cloexec = mark_inherited_close_on_exec();
    let Ok(status) = take_stdin_socket() else {
        return ExitCode::from(126);
    };
    let failed = |kind: FailKind, reason: String| {
        let _ = (&status).write_all(wire::failure_line(kind, &reason).as_bytes());
        ExitCode::from(126)
    };
    if let Err(reason) = cloexec {
        return failed(FailKind::Spawn, reason);
    }
    let decoded = match wire::decode(rest) {
        Ok(decoded) => decoded,
        Err(reason) => return failed(FailKind::Spawn, reason),
    };
    let args = decoded.confine;
    // If the supervisor dies, so does the shell.
    if let Err(error) = rustix::process::set_parent_process_death_signal(Some(Signal::KILL)) {
        return failed(FailKind::Spawn, format!("parent-death signal: {error}"));
    }
    if rustix::process::getppid() != pid_of(args.expected_parent) {
        return ExitCode::from(126);
    }
    let wire::Handover {
        scratch,
        cwd,
        workspace,
        network,
    } = match wire::receive_handover(&status) {
        Ok(handover) => handover,
        Err(reason) => return failed(FailKind::Scratch, reason),
    };
    // The working directory is the one the library resolved, by its
    // descriptor: no path is looked up again here.
    if let Err(error) = rustix::process::fchdir(&cwd) {
        return failed(FailKind::Cwd, error.to_string());
    }
    if matches!(args.mode, Mode::WorkspaceWrite { network: true, .. }) && !args.namespaces {
        return failed(
            FailKind::Sandbox,
            "the network option needs the namespaces: a command never shares the host's network".into(),
        );
    }
    if matches!(args.mode, Mode::WorkspaceWrite { .. }) && workspace.is_none() {
        return failed(
            FailKind::Sandbox,
            "the workspace's descriptor did not arrive".into(),
        );
    }
    if !is_directory(scratch.as_fd()) {
        return failed(
            FailKind::Scratch,
            format!("{} is not a directory", args.scratch_dir.display()),
        );
    }
    // Unconfined commands get no namespaces (`enter` builds nothing for
    // them), so no PID namespace either.
    if args.namespaces && !matches!(args.mode, Mode::None) {
        // Inside the namespaces the scratch rule names the private tmpfs
        // mounted at the scratch directory's place.
        let scratch = match namespaces::enter(
            &args,
            Some(scratch.as_fd()),
            workspace.as_ref().map(AsFd::as_fd),
            network
                .as_ref()
                .map(|(net, user)| (net.as_fd(), user.as_ref().map(AsFd::as_fd))),
        ) {
            Ok(Some(private)) => private,
            Ok(None) => scratch,
            Err(reason) => return failed(FailKind::Sandbox, format!("namespaces: {reason}")),
        };
        if let Err(reason) = wait_for_cgroup(&status) {
            return failed(FailKind::Spawn, reason);
        }
        // The shell runs as a child of an init of the new PID namespace;
        // this process stays the supervisor's child and ends as it ends.
        return pid_namespace::run(&args, scratch, workspace, status);
    }
    if let Err(reason) = wait_for_cgroup(&status) {
        return failed(FailKind::Spawn, reason);
    }
    // Without namespaces `RLIMIT_NPROC` would count every process of the
    // user, not the command's: the supervisor's cgroup keeps that bound.
    if let Err(reason) = bounds::limit_shell(&args.bounds, false) {
        return failed(FailKind::Sandbox, reason);
    }
    if let Err(reason) = apply(
        &args.mode,
        scratch.as_fd(),
        workspace.as_ref().map(AsFd::as_fd),
        args.namespaces,
    ) {
        return failed(FailKind::Sandbox, reason);
    }
    let error = shell_command(&args).exec();
    failed(FailKind::Shell, error.to_string())
}

/// Waits until the supervisor has put this stage into the command's cgroup
/// (or found it needs none): nothing of the command may start before.
fn wait_for_cgroup(status: &UnixStream) -> Result<(), String> {
    let mut byte = [0_u8; 1];
    match (&*status).read(&mut byte) {
        Ok(1) if byte == wire::CGROUP_READY => Ok(()),
        Ok(_) | Err(_) => Err("the supervisor did not place the command in its cgroup".into()),
    }
}

/// `<shell> -c <command>` with the command's environment and nothing of
/// this stage's own.
pub(super) fn shell_command(args: &ConfineArgs) -> Command {
    let mut command = Command::new(&args.shell);
    command
        .arg("-c")
        .arg(&args.command)
        .env_clear()
        .envs(args.env.iter().map(|(name, value)| (name, value)));
    command
}

/// Applies `mode` to this process (nothing for [`Mode::None`]).
/// `scratch` is the descriptor the host opened when it made the directory,
/// or inside the namespaces the command's private scratch tmpfs;
/// `namespaces`: whether the process already sits in its private namespaces.
fn apply(
    mode: &Mode,
    scratch: BorrowedFd<'_>,
    workspace: Option<BorrowedFd<'_>>,
    namespaces: bool,
) -> Result<(), String> {
    match mode {
        Mode::None => Ok(()),
        Mode::ReadOnly | Mode::WorkspaceWrite { .. } => {
            // No lock keeper here: `flock` stays refused.
            let prepared = sandbox::prepare(mode, scratch, workspace, namespaces, false)?;
            sandbox::enforce(prepared).map(drop)
        }
    }
}

// ------------------------------------------------------------------ network

/// `network`: makes a network namespace (and, when not root, a user
/// namespace owning it, with our own ids mapped), says so on stdout and
/// holds it until its stdin reaches end of file, i.e. until the library's
/// handle is dropped or the host is gone. The library attaches the
/// user-mode stack to it and hands it to each networked command of one
/// session, whose confining stage joins it instead of making its own.
/// It runs nothing and reads nothing else.
pub(super) fn hold_network(_rest: &[OsString]) -> ExitCode {
    match make_network_namespace() {
        Ok(()) => {
            if std::io::stdout()
                .write_all(&wire::NETWORK_NAMESPACE_READY)
                .and_then(|()| std::io::stdout().flush())
                .is_err()
            {
                return ExitCode::from(1);
            }
            // Until the library lets go: end of file or an error alike.
            let mut sink = [0_u8; 64];
            while matches!(std::io::stdin().read(&mut sink), Ok(read) if read > 0) {}
            ExitCode::SUCCESS
        }
        Err(reason) => {
            let _ = writeln!(std::io::stderr(), "{reason}");
            ExitCode::from(1)
        }
    }
}

fn make_network_namespace() -> Result<(), String> {
    mark_inherited_close_on_exec()?;
    // Gone with the host even if a descriptor of its stdin leaked.
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(|error| format!("parent-death signal: {error}"))?;
    namespaces::unshare_network()
}

// -------------------------------------------------------------------- probe

/// `probe --scratch <dir>/scratch --outside <dir>`: enters the namespaces
/// (with `<dir>` as the scratch root) where the kernel allows it, applies the
/// read-only sandbox to itself, then checks that the scratch dir is
/// writable, that `<dir>` is not, that no UDP socket can be made and that no
/// capability is left, and with namespaces that no terminal is reachable
/// and that a child is PID 1 of a new PID namespace with a `/proc` of its
/// own.
/// Prints `available namespaces`, `available` (Landlock and seccomp only) or
/// `unavailable <reason>`.
///
/// After `available`, one line per mechanism that bounds what a command
/// takes from the machine: `mechanism <name>` or `nomechanism <name>
/// <reason>` (the library's `BoundSupport` reads them), found before the
/// probe confines itself.
pub(super) fn probe(rest: &[OsString]) -> ExitCode {
    let found = bounds::probe();
    let mut lines = Vec::new();
    match probe_checks(rest) {
        Ok(namespaces) => {
            lines.push(
                if namespaces {
                    "available namespaces"
                } else {
                    "available"
                }
                .to_owned(),
            );
            for (name, held) in [
                (wire::MECHANISM_MEMORY_CGROUP, found.memory_cgroup),
                (wire::MECHANISM_PIDS_CGROUP, found.pids_cgroup),
                (wire::MECHANISM_PID_MAX, found.pid_max),
                (wire::MECHANISM_USER_NAMESPACE_LIMITS, found.user_namespace_limits),
            ] {
                lines.push(match held {
                    Ok(()) => format!("mechanism {name}"),
                    Err(reason) => format!("nomechanism {name} {}", reason.replace('\n', " ")),
                });
            }
        }
        Err(reason) => lines.push(format!("unavailable {}", reason.replace('\n', " "))),
    }
    let _ = writeln!(std::io::stdout(), "{}", lines.join("\n"));
    ExitCode::SUCCESS
}

/// `Ok(true)`: everything held inside the namespaces.
fn probe_checks(rest: &[OsString]) -> Result<bool, String> {
    let [scratch_flag, scratch, outside_flag, outside] = rest else {
        return Err("probe needs --scratch DIR --outside DIR".into());
    };
    if scratch_flag != "--scratch" || outside_flag != "--outside" {
        return Err("probe needs --scratch DIR --outside DIR".into());
    }
    mark_inherited_close_on_exec()?;
    let scratch = Path::new(scratch);
    let outside = Path::new(outside);
    let scratch_fd = rustix::fs::open(
        scratch,
        rustix::fs::OFlags::RDONLY
            | rustix::fs::OFlags::DIRECTORY
            | rustix::fs::OFlags::NOFOLLOW
            | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|error| format!("the probe's scratch directory: {error}"))?;
    let args = ConfineArgs {
        expected_parent: 0,
        mode: Mode::ReadOnly,
        scratch_dir: scratch.to_path_buf(),
        shell: PathBuf::new(),
        command: OsString::new(),
        env: Vec::new(),
        namespaces: true,
        scratch_root: Some(outside.to_path_buf()),
        hidden: Vec::new(),
        protected: Vec::new(),
        reserved: Vec::new(),
        protected_names: Vec::new(),
        hidden_names: Vec::new(),
        visible: Vec::new(),
        // Small: the probe writes one file.
        scratch_cap: ScratchCap::for_size(ScratchCap::MIN_SIZE_BYTES)
            .map_err(|error| format!("the probe's scratch cap: {error}"))?,
        bounds: crate::spec::CommandBounds::default(),
    };
    // A kernel that refuses namespaces leaves Landlock and seccomp, which
    // the checks below need either way.
    let private = namespaces::enter(&args, Some(scratch_fd.as_fd()), None, None)
        .ok()
        .flatten();
    let namespaces = private.is_some()
        && ["/dev/pts", "/dev/tty", "/dev/console"]
            .iter()
            .all(|device| std::fs::symlink_metadata(device).is_err())
        && pid_namespace::probe();
    apply(
        &Mode::ReadOnly,
        private.as_ref().unwrap_or(&scratch_fd).as_fd(),
        None,
        namespaces,
    )?;
    std::fs::write(scratch.join("allowed"), b"probe")
        .map_err(|error| format!("the scratch directory is not writable inside the sandbox: {error}"))?;
    if std::fs::write(outside.join("denied"), b"probe").is_ok() {
        return Err("a write outside the scratch directory was not refused".into());
    }
    if std::net::UdpSocket::bind("127.0.0.1:0").is_ok() {
        return Err("a UDP socket could be created".into());
    }
    let capabilities = rustix::thread::capabilities(None).map_err(|error| error.to_string())?;
    if !capabilities.effective.is_empty() || !capabilities.permitted.is_empty() {
        return Err("capabilities are still held".into());
    }
    Ok(namespaces)
}
