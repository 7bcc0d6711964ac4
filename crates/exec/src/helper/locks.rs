//! Locks on a command's own files, and only those (`sandbox.md` P6):
//! inside the namespaces, the shell's seccomp filter hands every `flock`
//! call to the PID namespace's init (a seccomp user notification), which
//! takes a copy of the caller's descriptor (`pidfd_getfd`), looks at the
//! file it names, and takes the lock on that very open file (a `flock` is
//! the open file's, so the caller holds it) only when the file lies on the
//! command's private scratch tmpfs or its private `/dev/shm`; anything
//! else (a file of the machine it may read, another host's database) is
//! refused as today, as on a file system without locks (`EOPNOTSUPP`).
//! Open file description locks (`fcntl` with `F_OFD_SETLK` or
//! `F_OFD_SETLKW`, the lock read from the caller's memory) go the same way.
//! So `rustc`'s incremental compilation, which insists on an OFD lock on
//! its session directory, works with `CARGO_TARGET_DIR` in `$TMPDIR`.
//!
//! What is checked is the descriptor taken, and the lock is taken on it:
//! nothing the command does after the check can change which file is
//! locked. POSIX record locks and leases stay refused in the filter
//! itself: they belong to the process that takes them, so nobody can take
//! them on its behalf.
//!
//! This module runs outside the sandbox, in init, without capabilities; it
//! decides nothing but whether a file is one of the command's own.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use rustix::fs::FlockOperation;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage,
    SendFlags,
};

/// Sends the listener of the shell's lock filter to init, before the shell
/// executes the command.
pub(crate) fn send_listener(socket: BorrowedFd<'_>, listener: &OwnedFd) -> Result<(), String> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let fds = [listener.as_fd()];
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err("the lock listener does not fit its message".into());
    }
    rustix::net::sendmsg(socket, &[IoSlice::new(b"L")], &mut control, SendFlags::empty())
        .map(drop)
        .map_err(|error| format!("handing the lock listener to init: {error}"))
}

/// Waits for the listener the shell sends; `None` when the shell ended
/// (or failed) without sending one.
fn receive_listener(socket: BorrowedFd<'_>) -> Option<OwnedFd> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0_u8; 1];
    let received = rustix::net::recvmsg(
        socket,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )
    .ok()?;
    if received.bytes != 1 {
        return None;
    }
    let mut listener = None;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = message {
            listener = listener.or_else(|| fds.next());
        }
    }
    listener
}

/// Init's lock keeper, on a thread of its own: receives the listener over
/// `socket`, then answers every `flock` of the command, taking it where the
/// file lies on one of `own_devices` (the scratch tmpfs and `/dev/shm`).
/// Returns when the listener is gone (the command ended).
pub(crate) fn keep(socket: OwnedFd, own_devices: Vec<u64>) {
    let Some(listener) = receive_listener(socket.as_fd()) else {
        return;
    };
    drop(socket);
    let listener = Arc::new(listener);
    loop {
        let notification = match receive(&listener) {
            Ok(notification) => notification,
            // The caller was killed before its notification was read.
            Err(rustix::io::Errno::INTR | rustix::io::Errno::NOENT) => continue,
            Err(_) => return,
        };
        answer(&listener, &notification, &own_devices);
    }
}

/// The next notification (blocking).
#[allow(unsafe_code)]
fn receive(listener: &OwnedFd) -> Result<libc::seccomp_notif, rustix::io::Errno> {
    // SAFETY: the kernel requires a zeroed structure; `seccomp_notif` is
    // plain integers, for which all zeroes is a valid value.
    let mut notification: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: SECCOMP_IOCTL_NOTIF_RECV writes one `seccomp_notif` into the
    // structure it is given, which lives on this stack frame.
    let result = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &mut notification,
        )
    };
    if result == 0 {
        Ok(notification)
    } else {
        Err(rustix::io::Errno::from_raw_os_error(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ))
    }
}

/// Answers notification `id`: `errno` 0 is success.
#[allow(unsafe_code)]
fn respond(listener: &OwnedFd, id: u64, errno: i32) {
    let mut response = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: -errno,
        flags: 0,
    };
    // SAFETY: SECCOMP_IOCTL_NOTIF_SEND reads one `seccomp_notif_resp` from
    // the structure it is given, which lives on this stack frame. A caller
    // that is gone makes it fail, which changes nothing.
    let _ = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut response,
        )
    };
}

/// Whether notification `id` still stands for the same caller (so the
/// descriptor taken through its pid is its own, not a later process's).
#[allow(unsafe_code)]
fn still_valid(listener: &OwnedFd, id: u64) -> bool {
    let mut id = id;
    // SAFETY: SECCOMP_IOCTL_NOTIF_ID_VALID reads one `u64` from the
    // pointer it is given, which lives on this stack frame.
    unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &mut id) == 0 }
}

/// The `flock` operation of `operation`, with `LOCK_NB` whatever it asked.
fn non_blocking(operation: i32) -> Option<FlockOperation> {
    let shared = operation & libc::LOCK_SH != 0;
    let exclusive = operation & libc::LOCK_EX != 0;
    let unlock = operation & libc::LOCK_UN != 0;
    match (shared, exclusive, unlock) {
        (true, false, false) => Some(FlockOperation::NonBlockingLockShared),
        (false, true, false) => Some(FlockOperation::NonBlockingLockExclusive),
        (false, false, true) => Some(FlockOperation::NonBlockingUnlock),
        _ => None,
    }
}

/// The blocking form of a non-blocking operation.
fn blocking(operation: FlockOperation) -> FlockOperation {
    match operation {
        FlockOperation::NonBlockingLockShared | FlockOperation::LockShared => FlockOperation::LockShared,
        FlockOperation::NonBlockingLockExclusive | FlockOperation::LockExclusive => {
            FlockOperation::LockExclusive
        }
        FlockOperation::NonBlockingUnlock | FlockOperation::Unlock => FlockOperation::Unlock,
    }
}

/// A lock call the keeper may take on the caller's behalf.
enum Call {
    /// `flock(fd, operation)`.
    Flock { operation: i32 },
    /// `fcntl(fd, F_OFD_SETLK or F_OFD_SETLKW, &lock)`, the lock as read
    /// from the caller's memory.
    OpenFileLock { wait: bool, lock: libc::flock },
}

/// Reads the caller's `struct flock` at `address`.
#[allow(unsafe_code)]
fn read_lock(pid: i32, address: u64) -> Result<libc::flock, i32> {
    // SAFETY: `flock` is plain integers, for which all zeroes is a valid
    // value.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::flock>();
    let local = libc::iovec {
        iov_base: (&raw mut lock).cast(),
        iov_len: size,
    };
    let remote = libc::iovec {
        iov_base: usize::try_from(address).unwrap_or(0) as *mut libc::c_void,
        iov_len: size,
    };
    // SAFETY: the local iovec covers exactly `lock`, on this stack frame;
    // the remote one is only read by the kernel, in the caller's address
    // space, which fails (EFAULT) rather than touch ours.
    let read = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if usize::try_from(read).ok() == Some(size) {
        Ok(lock)
    } else {
        Err(libc::EFAULT)
    }
}

/// Takes an open file description lock on `file` (`wait`: F_OFD_SETLKW).
#[allow(unsafe_code)]
fn open_file_lock(file: &OwnedFd, wait: bool, lock: &libc::flock) -> i32 {
    let command = if wait {
        libc::F_OFD_SETLKW
    } else {
        libc::F_OFD_SETLK
    };
    // SAFETY: fcntl with an OFD lock command reads one `struct flock` from
    // the pointer it is given, which is `lock`, alive for the call.
    let result = unsafe { libc::fcntl(file.as_raw_fd(), command, std::ptr::from_ref(lock)) };
    if result == 0 {
        0
    } else {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    }
}

fn answer(listener: &Arc<OwnedFd>, notification: &libc::seccomp_notif, own_devices: &[u64]) {
    let id = notification.id;
    let args = notification.data.args;
    // The kernel reads a descriptor and a command as 32-bit integers.
    let low = |value: u64| i32::try_from(value & 0xffff_ffff).unwrap_or(-1);
    let Ok(pid) = i32::try_from(notification.pid) else {
        return respond(listener, id, libc::ESRCH);
    };
    let call = match i64::from(notification.data.nr) {
        libc::SYS_flock => Call::Flock {
            operation: low(args[1]),
        },
        libc::SYS_fcntl => match read_lock(pid, args[2]) {
            Ok(lock) => Call::OpenFileLock {
                wait: low(args[1]) == libc::F_OFD_SETLKW,
                lock,
            },
            Err(errno) => return respond(listener, id, errno),
        },
        _ => return respond(listener, id, libc::EOPNOTSUPP),
    };
    // The caller is a thread; its descriptors are its process's.
    let taken = process_of(pid)
        .ok_or(rustix::io::Errno::SRCH)
        .and_then(|pid| rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()))
        .and_then(|pidfd| {
            rustix::process::pidfd_getfd(&pidfd, low(args[0]), rustix::process::PidfdGetfdFlags::empty())
        });
    let file = match taken {
        Ok(file) => file,
        // Not a descriptor of the caller's: what the call would say.
        Err(rustix::io::Errno::BADF) => return respond(listener, id, libc::EBADF),
        // Anything else (a caller gone, no right to take it): no lock.
        Err(_) => return respond(listener, id, libc::EOPNOTSUPP),
    };
    // The pid is the caller's still: the descriptor taken is its own.
    if !still_valid(listener, id) {
        return;
    }
    let own = rustix::fs::fstat(&file).is_ok_and(|stat| own_devices.contains(&stat.st_dev));
    if !own {
        return respond(listener, id, libc::EOPNOTSUPP);
    }
    match call {
        Call::Flock { operation } => flock_for(listener, id, file, operation),
        Call::OpenFileLock { wait, lock } => {
            let errno = open_file_lock(&file, false, &lock);
            if wait && (errno == libc::EAGAIN || errno == libc::EACCES) {
                wait_for(listener, id, move || open_file_lock(&file, true, &lock));
            } else {
                respond(listener, id, errno);
            }
        }
    }
}

/// The process (thread group) of thread `tid`, from this PID namespace's
/// `/proc`: a pidfd names a process, and the seccomp notification names the
/// calling thread.
fn process_of(tid: i32) -> Option<rustix::process::Pid> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let tgid = status
        .lines()
        .find_map(|line| line.strip_prefix("Tgid:"))?
        .trim()
        .parse::<i32>()
        .ok()?;
    rustix::process::Pid::from_raw(tgid)
}

/// `flock(file, operation)` for the caller: at once where it can, else
/// (a blocking call the lock is held against) on a thread that waits.
fn flock_for(listener: &Arc<OwnedFd>, id: u64, file: OwnedFd, operation: i32) {
    let Some(attempt) = non_blocking(operation) else {
        return respond(listener, id, libc::EINVAL);
    };
    match rustix::fs::flock(&file, attempt) {
        Ok(()) => respond(listener, id, 0),
        Err(rustix::io::Errno::WOULDBLOCK) if operation & libc::LOCK_NB == 0 => {
            wait_for(listener, id, move || {
                match rustix::fs::flock(&file, blocking(attempt)) {
                    Ok(()) => 0,
                    Err(error) => error.raw_os_error(),
                }
            });
        }
        Err(error) => respond(listener, id, error.raw_os_error()),
    }
}

/// Answers `id` with what `take` returns, on a thread of its own, so the
/// other callers are answered while this one waits for its lock (the
/// threads count against the command's bound on tasks).
fn wait_for(listener: &Arc<OwnedFd>, id: u64, take: impl FnOnce() -> i32 + Send + 'static) {
    let keeper = Arc::clone(listener);
    let spawned = std::thread::Builder::new()
        .name("plan-exec-lock".into())
        .spawn(move || respond(&keeper, id, take()));
    if spawned.is_err() {
        respond(listener, id, libc::ENOLCK);
    }
}
