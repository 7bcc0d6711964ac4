//! Starting a process directly in a cgroup v2 directory: `clone3(2)` with
//! `CLONE_INTO_CGROUP` (Linux 5.7 and newer), then `execve(2)`. A process
//! born in its cgroup is never moved there, so no spawn waits for the
//! cgroup core's threadgroup lock (an RCU grace period per move).
//!
//! Only what `std::process::Command` would do for the supervisor's stage:
//! stdin from a descriptor, stdout and stderr inherited, a process group of
//! its own, `/` as working directory, no environment. Between the clone and
//! the exec the child calls async-signal-safe functions only, on memory
//! prepared before the clone, so it is sound even in a multi-threaded
//! caller (the tests are one). It must not be used for anything but
//! executing a program.

use std::ffi::{CString, OsString};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;

use rustix::process::Pid;

/// `CLONE_INTO_CGROUP`.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` (`CLONE_ARGS_SIZE_VER2`, the first with `cgroup`).
#[repr(C)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// Why a process was not started in the cgroup.
#[derive(Debug)]
pub(crate) enum Failure {
    /// This kernel has no `clone3` or no `CLONE_INTO_CGROUP` (nothing was
    /// started): start it another way.
    Unsupported,
    /// Anything else (nothing runs).
    Other(String),
}

fn c_string(bytes: &[u8]) -> Result<CString, Failure> {
    CString::new(bytes).map_err(|_| Failure::Other("an argument holds a NUL byte".into()))
}

/// Starts `program` with `args` (after `program` as `argv[0]`) in the
/// cgroup v2 directory `cgroup`, as described above; returns its pid.
#[allow(unsafe_code)]
pub(crate) fn spawn(
    program: &str,
    args: &[OsString],
    stdin: BorrowedFd<'_>,
    cgroup: BorrowedFd<'_>,
) -> Result<Pid, Failure> {
    let program = c_string(program.as_bytes())?;
    let mut owned = vec![program.clone()];
    for arg in args {
        owned.push(c_string(arg.as_bytes())?);
    }
    let mut argv: Vec<*const libc::c_char> = owned.iter().map(|arg| arg.as_ptr()).collect();
    argv.push(std::ptr::null());
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    let root = c"/";
    // The child's exec failure comes back through this pipe; a successful
    // exec closes it (close-on-exec) with nothing written.
    let (errors_read, errors_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|error| Failure::Other(format!("pipe: {error}")))?;
    let stdin_raw = stdin.as_raw_fd();
    let errors_raw = errors_write.as_raw_fd();
    let arguments = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        pidfd: 0,
        child_tid: 0,
        parent_tid: 0,
        exit_signal: u64::try_from(libc::SIGCHLD).unwrap_or(17),
        stack: 0,
        stack_size: 0,
        tls: 0,
        set_tid: 0,
        set_tid_size: 0,
        cgroup: u64::try_from(cgroup.as_raw_fd()).unwrap_or(u64::MAX),
    };
    // SAFETY: clone3(2) without CLONE_VM makes a copy of this process, like
    // fork(2); it reads `arguments`, a live `struct clone_args` of the size
    // passed. In the child only async-signal-safe calls follow, on memory
    // prepared above (the argument and environment arrays, the path), then
    // execve(2) or _exit(2): no allocation, no lock, no return into Rust
    // code of the parent.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &raw const arguments,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if pid == 0 {
        // SAFETY: see above; each call is async-signal-safe and its
        // pointers are valid for the call.
        unsafe {
            let failed = libc::dup2(stdin_raw, 0) < 0
                || libc::setpgid(0, 0) < 0
                || libc::chdir(root.as_ptr()) < 0
                || libc::execve(argv[0], argv.as_ptr(), envp.as_ptr()) < 0;
            if failed {
                let errno = *libc::__errno_location();
                let bytes = errno.to_le_bytes();
                libc::write(errors_raw, bytes.as_ptr().cast(), bytes.len());
            }
            libc::_exit(127)
        }
    }
    drop(errors_write);
    if pid < 0 {
        let error = std::io::Error::last_os_error();
        return Err(match error.raw_os_error() {
            Some(libc::ENOSYS | libc::E2BIG | libc::EINVAL) => Failure::Unsupported,
            _ => Failure::Other(format!("clone3: {error}")),
        });
    }
    let pid = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| Failure::Other("clone3: bad pid".into()))?;
    let mut errno = [0_u8; 4];
    let mut filled = 0;
    while filled < errno.len() {
        match rustix::io::read(&errors_read, &mut errno[filled..]) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    if filled == 0 {
        return Ok(pid);
    }
    let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
    let error = std::io::Error::from_raw_os_error(i32::from_le_bytes(errno));
    Err(Failure::Other(format!(
        "executing {}: {error}",
        program.to_string_lossy()
    )))
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::fd::{AsFd, OwnedFd};
    use std::os::unix::net::UnixStream;
    use std::path::PathBuf;

    use super::*;

    /// A fresh directory of this machine's cgroup v2 hierarchy, removed
    /// when dropped; `None` where there is none this process may make (not
    /// root, or no v2 hierarchy mounted).
    struct Group(PathBuf);

    impl Group {
        fn new(test: &str) -> Option<Group> {
            let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
            let point = mountinfo
                .lines()
                .filter_map(|line| line.split_once(" - "))
                .find(|(_, after)| after.starts_with("cgroup2 "))
                .and_then(|(before, _)| before.split(' ').nth(4).map(PathBuf::from));
            let Some(point) = point else {
                eprintln!("{test}: no cgroup v2 hierarchy here: untested");
                return None;
            };
            let directory = point.join(format!("plan-exec-test-{}-{test}", std::process::id()));
            match std::fs::create_dir(&directory) {
                Ok(()) => Some(Group(directory)),
                Err(error) => {
                    eprintln!("{test}: cannot make a v2 cgroup here ({error}): untested");
                    None
                }
            }
        }

        fn open(&self) -> OwnedFd {
            rustix::fs::open(
                &self.0,
                rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )
            .unwrap()
        }
    }

    impl Drop for Group {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(&self.0);
        }
    }

    #[test]
    fn a_process_is_born_in_the_v2_group_with_its_stdin_group_and_directory() {
        let Some(group) = Group::new("born") else {
            return;
        };
        let (ours, theirs) = UnixStream::pair().unwrap();
        let script = "cat /proc/self/cgroup; pwd; ps -o pgid= -p $$; echo $$; env | wc -l";
        let args = [OsString::from("-c"), OsString::from(format!("( {script} ) >&0"))];
        let directory = group.open();
        let pid = spawn("/bin/sh", &args, theirs.as_fd(), directory.as_fd()).unwrap();
        drop(theirs);
        let mut text = String::new();
        (&ours).read_to_string(&mut text).unwrap();
        let (_, status) = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty())
            .unwrap()
            .unwrap();
        assert_eq!(status.exit_status(), Some(0), "{text}");
        let name = group.0.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            text.lines()
                .any(|line| line.starts_with("0::/") && line.ends_with(&name)),
            "{text}"
        );
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len() - 4..];
        // In `/`, leading a process group of its own, with no environment
        // (but what the shell sets itself).
        assert_eq!(tail[0], "/");
        assert_eq!(tail[1].trim(), tail[2].trim());
        assert!(tail[3].trim().parse::<u32>().unwrap() <= 3, "{text}");
    }

    #[test]
    fn a_program_that_cannot_be_executed_is_an_error_and_leaves_no_child() {
        let Some(group) = Group::new("missing") else {
            return;
        };
        let (_ours, theirs) = UnixStream::pair().unwrap();
        let directory = group.open();
        match spawn("/nonexistent/program", &[], theirs.as_fd(), directory.as_fd()) {
            Err(Failure::Other(reason)) => assert!(reason.contains("No such file"), "{reason}"),
            other => panic!("{other:?}"),
        }
        // The group is empty again (the failed child was reaped), so it
        // can be removed.
        let path = group.0.clone();
        drop(group);
        assert!(!path.exists());
    }
}
