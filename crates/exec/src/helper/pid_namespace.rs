//! The confining stage's last steps inside namespaces: after the mount tree
//! is built (and a new PID namespace unshared for the next child), it forks
//! a tiny init, PID 1 of the new namespace, which mounts a procfs of that
//! namespace on `/proc` (so no process outside the command is visible) and
//! forks the shell, confined, in a session of its own. Init reaps every
//! orphan, forwards the signals the supervisor sends its process group to
//! the shell's group (PID 1 ignores signals it has no handler for, so the
//! shell itself cannot be PID 1), and passes the shell's exact wait status
//! back; the outer stage, still the supervisor's child and group leader,
//! then ends the same way (exit code or signal). When init exits the kernel
//! kills whatever is left in the namespace.
//!
//! Neither init nor the outer stage ever runs command code: both hold no
//! capability and set no_new_privs once the child that needs them exists.
//! Nothing here may run the shell with less than the sandbox asked for, or
//! let any process of the command outlive init.

use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::ExitCode;

use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, Signal, WaitOptions};

use super::{namespaces, sandbox};
use crate::wire::{self, ConfineArgs, Mode};

/// The signals passed on from init to the shell's process group: what the
/// supervisor sends on timeout and cancellation (TERM, then CONT for a
/// stopped command) and what a person would send the group by hand.
const FORWARDED: [libc::c_int; 7] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGCONT,
];

/// The exit code of a stage that could not do its part (after reporting
/// why on the status socket where it still could).
const FAILED: u8 = 126;

/// A child or parent side of `fork`.
pub(super) enum Forked {
    Child,
    Parent(Pid),
}

/// `fork(2)`, for this single-threaded helper.
#[allow(unsafe_code)]
pub(super) fn fork() -> Result<Forked, String> {
    // SAFETY: the helper's confining stage is single-threaded (it spawns no
    // thread), so the child is a complete copy with no lock held by a thread
    // that does not exist in it, and may run ordinary Rust code.
    let pid = unsafe { libc::fork() };
    match pid {
        0 => Ok(Forked::Child),
        pid if pid > 0 => Pid::from_raw(pid)
            .map(Forked::Parent)
            .ok_or_else(|| "fork: bad pid".to_owned()),
        _ => Err(format!("fork: {}", std::io::Error::last_os_error())),
    }
}

/// A signal set of `signals`.
#[allow(unsafe_code)]
fn set_of(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset only write the set they are given, which
    // lives on this stack frame; the signal numbers are valid constants.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in signals {
            libc::sigaddset(&mut set, *signal);
        }
        set
    }
}

/// Blocks (`block`) or unblocks `signals` for this thread.
#[allow(unsafe_code)]
fn mask(signals: &[libc::c_int], block: bool) -> Result<(), String> {
    let set = set_of(signals);
    let how = if block { libc::SIG_BLOCK } else { libc::SIG_UNBLOCK };
    // SAFETY: the set is initialised above; the old mask is not asked for.
    let result = unsafe { libc::pthread_sigmask(how, &set, std::ptr::null_mut()) };
    if result == 0 {
        Ok(())
    } else {
        Err(format!(
            "signal mask: {}",
            std::io::Error::from_raw_os_error(result)
        ))
    }
}

/// Waits for one of `signals` (which must be blocked) and returns it.
#[allow(unsafe_code)]
fn next_signal(signals: &[libc::c_int]) -> Result<libc::c_int, String> {
    let set = set_of(signals);
    loop {
        // SAFETY: the set is initialised; no siginfo is asked for.
        let signal = unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) };
        if signal > 0 {
            return Ok(signal);
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("sigwaitinfo: {error}"));
        }
    }
}

/// Restores the default action of `signal` (this binary's runtime ignores
/// SIGPIPE) so that raising it ends the process as it ended the shell.
#[allow(unsafe_code)]
fn default_action(signal: libc::c_int) {
    // SAFETY: SIG_DFL is a valid disposition for every catchable signal and
    // no handler of this process is replaced by anything but the default.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
    }
}

/// Drops every capability and sets no_new_privs: what a stage that only
/// waits and passes signals on needs is nothing.
fn shed_privileges() -> Result<(), String> {
    sandbox::drop_capabilities()?;
    rustix::thread::set_no_new_privs(true).map_err(|error| format!("no_new_privs: {error}"))
}

fn report(status: &UnixStream, kind: wire::FailKind, reason: &str) -> ExitCode {
    let _ = (&*status).write_all(wire::failure_line(kind, reason).as_bytes());
    ExitCode::from(FAILED)
}

/// Runs the command inside the PID namespace `namespaces::enter` prepared;
/// returns when this process (outer stage, init or a shell that could not
/// start) is to exit with the code returned.
pub(crate) fn run(
    args: &ConfineArgs,
    scratch: OwnedFd,
    workspace: Option<OwnedFd>,
    status: UnixStream,
) -> ExitCode {
    // Until the shell has its own signal handling, what the supervisor sends
    // the group waits; init takes these itself, the outer stage never does.
    if let Err(reason) = mask(&FORWARDED, true) {
        return report(&status, wire::FailKind::Spawn, &reason);
    }
    let (from_init, to_outer) = match rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC) {
        Ok(pipe) => pipe,
        Err(error) => return report(&status, wire::FailKind::Spawn, &format!("pipe: {error}")),
    };
    match fork() {
        Err(reason) => report(&status, wire::FailKind::Sandbox, &format!("namespaces: {reason}")),
        Ok(Forked::Child) => {
            drop(from_init);
            init(args, (scratch, workspace), status, to_outer)
        }
        Ok(Forked::Parent(init)) => {
            drop(to_outer);
            drop(scratch);
            drop(workspace);
            if let Err(reason) = shed_privileges() {
                let _ = rustix::process::kill_process(init, Signal::KILL);
                return report(&status, wire::FailKind::Sandbox, &reason);
            }
            drop(status);
            outer(init, from_init)
        }
    }
}

/// The outer stage once init runs: waits for it, then ends as the shell
/// ended.
fn outer(init: Pid, from_init: OwnedFd) -> ExitCode {
    let mut bytes = Vec::new();
    let _ = std::fs::File::from(from_init).read_to_end(&mut bytes);
    while let Err(rustix::io::Errno::INTR) = rustix::process::waitpid(Some(init), WaitOptions::empty()) {}
    let Ok(raw) = <[u8; 4]>::try_from(bytes.as_slice()) else {
        // Init ended without a shell status: it reported why, or was killed.
        return ExitCode::from(FAILED);
    };
    let raw = i32::from_le_bytes(raw);
    if libc::WIFEXITED(raw) {
        return ExitCode::from(u8::try_from(libc::WEXITSTATUS(raw)).unwrap_or(FAILED));
    }
    if libc::WIFSIGNALED(raw) {
        let signal = libc::WTERMSIG(raw);
        // No core file of this process (it would land in the working
        // directory, outside the sandbox's allowance).
        let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
        let _ = rustix::process::setrlimit(
            rustix::process::Resource::Core,
            rustix::process::Rlimit {
                current: Some(0),
                maximum: Some(0),
            },
        );
        default_action(signal);
        if let Some(named) = Signal::from_named_raw(signal)
            && mask(&[signal], false).is_ok()
        {
            let _ = rustix::process::kill_process(rustix::process::getpid(), named);
        }
        // Only a signal whose default is not to end the process gets here.
        return ExitCode::from(u8::try_from(128 + signal).unwrap_or(FAILED));
    }
    ExitCode::from(FAILED)
}

/// PID 1 of the new namespace.
/// `rules`: the scratch directory and the workspace-write root the shell's
/// sandbox rules are built from.
fn init(
    args: &ConfineArgs,
    rules: (OwnedFd, Option<OwnedFd>),
    status: UnixStream,
    to_outer: OwnedFd,
) -> ExitCode {
    let (scratch, workspace) = rules;
    // If the outer stage dies, so does init, and with it the namespace.
    if let Err(error) = rustix::process::set_parent_process_death_signal(Some(Signal::KILL)) {
        return report(
            &status,
            wire::FailKind::Spawn,
            &format!("parent-death signal: {error}"),
        );
    }
    if outer_gone(to_outer.as_fd()) {
        return ExitCode::from(FAILED);
    }
    if let Err(reason) = namespaces::mount_proc(pid_max_of(args)) {
        return report(&status, wire::FailKind::Sandbox, &format!("namespaces: {reason}"));
    }
    let mut waited = FORWARDED.to_vec();
    waited.push(libc::SIGCHLD);
    if let Err(reason) = mask(&[libc::SIGCHLD], true) {
        return report(&status, wire::FailKind::Spawn, &reason);
    }
    // The command's own files, which it may lock: those of its scratch
    // tmpfs and of its private `/dev/shm` (see `locks`).
    let own_devices: Vec<u64> = [
        rustix::fs::fstat(&scratch).map(|stat| stat.st_dev),
        rustix::fs::stat("/dev/shm").map(|stat| stat.st_dev),
    ]
    .into_iter()
    .flatten()
    .collect();
    let (keeper, to_keeper) = match rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::STREAM,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    ) {
        Ok(pair) => pair,
        Err(error) => return report(&status, wire::FailKind::Spawn, &format!("socketpair: {error}")),
    };
    let shell = match fork() {
        Err(reason) => return report(&status, wire::FailKind::Spawn, &reason),
        Ok(Forked::Child) => {
            drop(to_outer);
            drop(keeper);
            return shell(
                args,
                (scratch.as_fd(), workspace.as_ref().map(AsFd::as_fd)),
                &status,
                to_keeper.as_fd(),
            );
        }
        Ok(Forked::Parent(shell)) => shell,
    };
    drop(to_keeper);
    drop(scratch);
    drop(workspace);
    if let Err(reason) = shed_privileges() {
        let _ = rustix::process::kill_process(shell, Signal::KILL);
        return report(&status, wire::FailKind::Sandbox, &reason);
    }
    drop(status);
    // Init forks nothing more, so a thread of its own is safe here; it ends
    // with init.
    let _ = std::thread::Builder::new()
        .name("plan-exec-locks".into())
        .spawn(move || super::locks::keep(keeper, own_devices));
    let Ok(raw) = reap_until_shell_ends(shell, &waited) else {
        return ExitCode::from(FAILED);
    };
    let _ = std::fs::File::from(to_outer).write_all(&raw.to_le_bytes());
    ExitCode::SUCCESS
}

/// The tasks bound this namespace's `pid_max` keeps, where the kernel
/// gives it one (elsewhere the supervisor's cgroup or `RLIMIT_NPROC` keep
/// it).
fn pid_max_of(args: &ConfineArgs) -> Option<u64> {
    args.bounds
        .tasks
        .filter(|_| super::bounds::pid_namespaces_have_their_own_pid_max())
}

/// Whether the outer stage (the only reader of init's pipe) is gone: then
/// the parent-death signal was armed too late to fire.
fn outer_gone(to_outer: BorrowedFd<'_>) -> bool {
    let mut fds = [PollFd::new(&to_outer, PollFlags::OUT)];
    match rustix::event::poll(&mut fds, Some(&rustix::event::Timespec::default())) {
        Ok(_) => fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP),
        Err(_) => true,
    }
}

/// Reaps every child until the shell has ended, passing the forwarded
/// signals on to the shell's group; returns the shell's raw wait status.
fn reap_until_shell_ends(shell: Pid, waited: &[libc::c_int]) -> Result<i32, String> {
    loop {
        // A SIGCHLD that came before this wait is still pending (blocked).
        loop {
            // Any child (`waitpid(None)` would mean this process group only).
            match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some((pid, status))) if pid == shell => return Ok(status.as_raw()),
                Ok(Some(_)) | Err(rustix::io::Errno::INTR) => {}
                Ok(None) => break,
                Err(error) => return Err(format!("waitpid: {error}")),
            }
        }
        let signal = next_signal(waited)?;
        if signal == libc::SIGCHLD {
            continue;
        }
        if let Some(named) = Signal::from_named_raw(signal) {
            // Before the shell has made its session, its group does not
            // exist yet; the signal then waits in its blocked set until the
            // shell's exec clears it.
            if rustix::process::kill_process_group(shell, named).is_err() {
                let _ = rustix::process::kill_process(shell, named);
            }
        }
    }
}

/// The shell's side of init's fork: a session (and process group) of its
/// own inside the namespace, the sandbox, then the shell. Returns only if
/// something failed, after reporting it.
/// `rules`: the scratch directory and workspace the sandbox's rules are
/// built from; `keeper`: where the lock filter's listener goes (init's lock
/// keeper).
fn shell(
    args: &ConfineArgs,
    rules: (BorrowedFd<'_>, Option<BorrowedFd<'_>>),
    status: &UnixStream,
    keeper: BorrowedFd<'_>,
) -> ExitCode {
    let (scratch, workspace) = rules;
    if let Err(error) = rustix::process::setsid() {
        return report(status, wire::FailKind::Spawn, &format!("setsid: {error}"));
    }
    // `RLIMIT_NPROC` counts in the command's own user namespace, except for
    // root, whom it never binds.
    let nproc = !rustix::process::geteuid().is_root();
    if let Err(reason) = super::bounds::limit_shell(&args.bounds, nproc) {
        return report(status, wire::FailKind::Sandbox, &reason);
    }
    let applied = match &args.mode {
        Mode::None => Ok(None),
        Mode::ReadOnly | Mode::WorkspaceWrite { .. } => {
            sandbox::prepare(&args.mode, scratch, workspace, true, true).and_then(sandbox::enforce)
        }
    };
    let listener = match applied {
        Ok(listener) => listener,
        Err(reason) => return report(status, wire::FailKind::Sandbox, &reason),
    };
    if let Some(listener) = listener
        && let Err(reason) = super::locks::send_listener(keeper, &listener)
    {
        return report(status, wire::FailKind::Sandbox, &reason);
    }
    // A signal forwarded since the fork was held until now; the exec also
    // restores SIGPIPE's default.
    let mut held = FORWARDED.to_vec();
    held.push(libc::SIGCHLD);
    if let Err(reason) = mask(&held, false) {
        return report(status, wire::FailKind::Spawn, &reason);
    }
    let error = super::linux::shell_command(args).exec();
    report(status, wire::FailKind::Shell, &error.to_string())
}

/// For the probe, after `namespaces::enter`: whether a child is PID 1 of a
/// new PID namespace and can mount a `/proc` of it that lists only itself.
pub(crate) fn probe() -> bool {
    match fork() {
        Err(_) => false,
        Ok(Forked::Child) => {
            let works = namespaces::mount_proc(None).is_ok()
                && std::fs::read_link("/proc/self").is_ok_and(|link| link.as_os_str() == "1")
                && std::fs::read_dir("/proc").is_ok_and(|entries| {
                    entries
                        .flatten()
                        .filter(|entry| entry.file_name().to_string_lossy().parse::<u32>().is_ok())
                        .all(|entry| entry.file_name() == "1")
                });
            // The probe goes on in this mount tree: no procfs of a
            // namespace about to die stays over the host's.
            let _ = rustix::mount::unmount("/proc", rustix::mount::UnmountFlags::DETACH);
            std::process::exit(if works { 0 } else { 1 })
        }
        Ok(Forked::Parent(child)) => loop {
            match rustix::process::waitpid(Some(child), WaitOptions::empty()) {
                Err(rustix::io::Errno::INTR) => {}
                Ok(Some((_, status))) => break status.exit_status() == Some(0),
                Ok(None) | Err(_) => break false,
            }
        },
    }
}
