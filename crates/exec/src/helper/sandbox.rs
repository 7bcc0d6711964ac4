//! The restrictions the helper applies to itself before it executes the
//! shell: Landlock for the filesystem, capabilities dropped, no_new_privs,
//! and a seccomp filter for what Landlock does not cover.
//!
//! It applies exactly what it is told and reports every failure: it never
//! applies less than asked, and it never chooses a confinement itself.

#[cfg(target_arch = "x86_64")]
use std::collections::BTreeMap;
use std::os::fd::BorrowedFd;
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};
use rustix::thread::{CapabilitySet, CapabilitySets};
use seccompiler::BpfProgram;
#[cfg(target_arch = "x86_64")]
use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
    sock_filter,
};

use crate::wire::Mode;

/// The oldest Landlock ABI this sandbox accepts: ABI 3 is the first that
/// controls truncation, without which `truncate` and `O_TRUNC` could still
/// empty any file.
const REQUIRED_ABI: ABI = ABI::V3;

/// The rules a confined stage builds before it drops anything, so that every
/// path is opened (and a missing one reported) while the process still has
/// its normal rights.
pub(crate) struct Prepared {
    ruleset: landlock::RulesetCreated,
    filters: Vec<BpfProgram>,
    /// The filter that hands `flock` to init's lock keeper, where there is
    /// one (`locks::keep`).
    lock_filter: Option<BpfProgram>,
}

/// Opens a rule path, refusing anything that is not there: Landlock's own
/// helpers skip unopenable paths silently, which would leave e.g. a missing
/// scratch directory quietly unwritable instead of reported.
fn rule_path(path: &Path, want_dir: bool) -> Result<PathFd, String> {
    let metadata = std::fs::metadata(path).map_err(|error| format!("{}: {error}", path.display()))?;
    if want_dir && !metadata.is_dir() {
        return Err(format!("{} is not a directory", path.display()));
    }
    PathFd::new(path).map_err(|error| format!("{}: {error}", path.display()))
}

/// Builds the Landlock ruleset and the seccomp programs for `mode`.
/// The scratch rule is built from `scratch`, the descriptor the host
/// opened when it made the directory (or, inside the namespaces, of the
/// private tmpfs mounted there and checked), never from a path (which an
/// earlier command could have turned into a symlink); the workspace rule
/// from `workspace`, the directory the session bound. `namespaces`: whether
/// the process already sits in its own namespaces, where every mount but
/// the writable places is read-only (so mode changes are the kernel's to
/// refuse) and `/dev/shm` is a private tmpfs the command may write.
///
/// `keep_locks`: a lock keeper (the PID namespace's init) will answer the
/// command's `flock` calls (`locks::keep`), so `flock` goes to it instead
/// of being refused here.
pub(crate) fn prepare(
    mode: &Mode,
    scratch: BorrowedFd<'_>,
    workspace: Option<BorrowedFd<'_>>,
    namespaces: bool,
    keep_locks: bool,
) -> Result<Prepared, String> {
    let (workspace, network) = match mode {
        Mode::None => return Err("no confinement requested".into()),
        Mode::ReadOnly => (None, false),
        Mode::WorkspaceWrite { network, .. } => (
            Some(workspace.ok_or("the workspace's descriptor is missing")?),
            *network,
        ),
    };
    let everything = AccessFs::from_all(REQUIRED_ABI);
    let landlock_error =
        |error: landlock::RulesetError| format!("Landlock (ABI 3 or newer required): {error}");
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(everything)
        .map_err(landlock_error)?
        // Newer kernels can also confine device ioctls and signals / abstract
        // sockets to the sandbox; these tighten the required baseline where
        // available and are never needed for it.
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::IoctlDev)
        .map_err(landlock_error)?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .map_err(landlock_error)?
        .create()
        .map_err(landlock_error)?;
    let root = rule_path(Path::new("/"), true)?;
    let dev_null = rule_path(Path::new("/dev/null"), false)?;
    let mut ruleset = ruleset
        .set_compatibility(CompatLevel::HardRequirement)
        .add_rule(PathBeneath::new(root, AccessFs::from_read(REQUIRED_ABI)))
        .map_err(landlock_error)?
        .add_rule(PathBeneath::new(scratch, everything))
        .map_err(landlock_error)?
        .set_compatibility(CompatLevel::BestEffort)
        .add_rule(PathBeneath::new(
            dev_null,
            AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev,
        ))
        .map_err(landlock_error)?;
    if namespaces {
        // The private `/dev/shm` the namespaces mounted (POSIX shared
        // memory and semaphores, which Python's multiprocessing needs).
        let shm = rule_path(Path::new("/dev/shm"), true)?;
        ruleset = ruleset
            .set_compatibility(CompatLevel::HardRequirement)
            .add_rule(PathBeneath::new(shm, everything))
            .map_err(landlock_error)?;
    }
    if let Some(workspace) = workspace {
        // The directory the session bound, by its descriptor: wherever its
        // path leads by now, the rule names this directory.
        ruleset = ruleset
            .set_compatibility(CompatLevel::HardRequirement)
            .add_rule(PathBeneath::new(workspace, everything))
            .map_err(landlock_error)?;
    }
    Ok(Prepared {
        ruleset,
        // Inside the namespaces every mount but the writable places is
        // read-only, so the kernel refuses mode and time changes everywhere
        // else; without them seccomp refuses them everywhere.
        filters: seccomp_programs(network, namespaces, keep_locks)?,
        lock_filter: keep_locks.then(lock_notification_program),
    })
}

/// Drops every capability, sets no_new_privs, enforces the Landlock ruleset
/// and installs the seccomp filters, in that order (Landlock and seccomp
/// need no_new_privs when unprivileged; the filters come last so they do not
/// get in the way of the setup itself).
/// Returns the listener of the lock filter, for the lock keeper.
pub(crate) fn enforce(prepared: Prepared) -> Result<Option<std::os::fd::OwnedFd>, String> {
    drop_capabilities()?;
    rustix::thread::set_no_new_privs(true).map_err(|error| format!("no_new_privs: {error}"))?;
    let status = prepared
        .ruleset
        .restrict_self()
        .map_err(|error| format!("Landlock restrict_self: {error}"))?;
    match status.ruleset {
        RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => {}
        RulesetStatus::NotEnforced => return Err("Landlock is not enforced by this kernel".into()),
    }
    for filter in &prepared.filters {
        seccompiler::apply_filter(filter).map_err(|error| format!("seccomp: {error}"))?;
    }
    prepared
        .lock_filter
        .as_ref()
        .map(install_with_listener)
        .transpose()
}

/// `flock`, and `fcntl` with `F_OFD_SETLK` or `F_OFD_SETLKW` (open file
/// description locks, which `rustc` takes), go to the listener of this
/// filter; every other call passes (the other filters decide it).
#[cfg(target_arch = "x86_64")]
fn lock_notification_program() -> BpfProgram {
    const BPF_LD_W_ABS: u16 = 0x20;
    const BPF_JMP_JEQ_K: u16 = 0x15;
    const BPF_RET_K: u16 = 0x06;
    const ARCH_OFFSET: u32 = 4;
    /// The low word of the second argument (little-endian).
    const ARG1_OFFSET: u32 = 24;
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    let statement = |code: u16, jt: u8, jf: u8, k: u32| sock_filter { code, jt, jf, k };
    let number = |value: i64| u32::try_from(value).unwrap_or(u32::MAX);
    let command = |value: i32| u32::try_from(value).unwrap_or(u32::MAX);
    vec![
        /* 0 */ statement(BPF_LD_W_ABS, 0, 0, ARCH_OFFSET),
        /* 1 */ statement(BPF_JMP_JEQ_K, 0, 7, AUDIT_ARCH_X86_64),
        /* 2 */ statement(BPF_LD_W_ABS, 0, 0, 0),
        /* 3 */ statement(BPF_JMP_JEQ_K, 4, 0, number(libc::SYS_flock)),
        /* 4 */ statement(BPF_JMP_JEQ_K, 0, 4, number(libc::SYS_fcntl)),
        /* 5 */ statement(BPF_LD_W_ABS, 0, 0, ARG1_OFFSET),
        /* 6 */ statement(BPF_JMP_JEQ_K, 1, 0, command(libc::F_OFD_SETLK)),
        /* 7 */ statement(BPF_JMP_JEQ_K, 0, 1, command(libc::F_OFD_SETLKW)),
        /* 8 */ statement(BPF_RET_K, 0, 0, libc::SECCOMP_RET_USER_NOTIF),
        /* 9 */ statement(BPF_RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

#[cfg(not(target_arch = "x86_64"))]
fn lock_notification_program() -> BpfProgram {
    Vec::new()
}

/// Installs `program` with a new listener (`SECCOMP_FILTER_FLAG_NEW_LISTENER`)
/// and returns the listener.
#[allow(unsafe_code)]
fn install_with_listener(program: &BpfProgram) -> Result<std::os::fd::OwnedFd, String> {
    use std::os::fd::FromRawFd;
    let length = u16::try_from(program.len()).map_err(|_| "the lock filter is too long".to_owned())?;
    let fprog = libc::sock_fprog {
        len: length,
        filter: program.as_ptr().cast::<libc::sock_filter>().cast_mut(),
    };
    // SAFETY: `fprog` points at `program`'s instructions (seccompiler's
    // `sock_filter` has the kernel's layout, as `libc::sock_filter` does),
    // which outlive the call; the kernel copies them. The call returns a
    // new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &fprog,
        )
    };
    let fd = i32::try_from(fd).unwrap_or(-1);
    if fd < 0 {
        return Err(format!(
            "seccomp lock filter: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: the kernel just returned this descriptor to this process and
    // nothing else owns it.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Empties the ambient, bounding, inheritable, permitted and effective
/// capability sets. Root keeps its uid but loses every bypass; an
/// unprivileged caller that may not shrink its bounding set has nothing to
/// lose there, because no_new_privs keeps exec from granting capabilities.
pub(crate) fn drop_capabilities() -> Result<(), String> {
    match rustix::thread::clear_ambient_capability_set() {
        Ok(()) | Err(rustix::io::Errno::INVAL) => {}
        Err(error) => return Err(format!("clearing ambient capabilities: {error}")),
    }
    let mut kept_in_bounding = Vec::new();
    for capability in CapabilitySet::all().iter() {
        match rustix::thread::remove_capability_from_bounding_set(capability) {
            // INVAL: a capability this kernel does not know.
            Ok(()) | Err(rustix::io::Errno::INVAL) => {}
            Err(rustix::io::Errno::PERM) => kept_in_bounding.push(capability),
            Err(error) => return Err(format!("dropping {capability:?} from the bounding set: {error}")),
        }
    }
    let empty = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    rustix::thread::set_capabilities(None, empty)
        .map_err(|error| format!("dropping capabilities: {error}"))?;
    let now = rustix::thread::capabilities(None).map_err(|error| format!("reading capabilities: {error}"))?;
    if !now.effective.is_empty() || !now.permitted.is_empty() || !now.inheritable.is_empty() {
        return Err("capabilities are still held after dropping them".into());
    }
    if !kept_in_bounding.is_empty() && rustix::process::geteuid().is_root() {
        return Err("running as root but the capability bounding set cannot be emptied".into());
    }
    Ok(())
}

// x86_64 system call numbers newer than the libc crate's tables.
#[cfg(target_arch = "x86_64")]
const SYS_SETXATTRAT: i64 = 463;
#[cfg(target_arch = "x86_64")]
const SYS_REMOVEXATTRAT: i64 = 466;
#[cfg(target_arch = "x86_64")]
const SYS_OPEN_TREE_ATTR: i64 = 467;
#[cfg(target_arch = "x86_64")]
const SYS_FILE_SETATTR: i64 = 469;
#[cfg(target_arch = "x86_64")]
const SYS_LSM_SET_SELF_ATTR: i64 = 460;

// ioctl requests that change inode flags or inject terminal input; the
// kernel compares the request as a 32-bit value, so the filter does too.
#[cfg(target_arch = "x86_64")]
const FS_IOC_SETFLAGS: u64 = 0x4008_6602;
#[cfg(target_arch = "x86_64")]
const FS_IOC32_SETFLAGS: u64 = 0x4004_6602;
#[cfg(target_arch = "x86_64")]
const FS_IOC_SETVERSION: u64 = 0x4008_7602;
#[cfg(target_arch = "x86_64")]
const FS_IOC32_SETVERSION: u64 = 0x4004_7602;
#[cfg(target_arch = "x86_64")]
const FS_IOC_FSSETXATTR: u64 = 0x401c_5820;
#[cfg(target_arch = "x86_64")]
const TIOCSTI: u64 = 0x5412;
#[cfg(target_arch = "x86_64")]
const TIOCLINUX: u64 = 0x541c;

#[cfg(target_arch = "x86_64")]
const SOCK_TYPE_MASK: u64 = 0xf;
#[cfg(target_arch = "x86_64")]
const IOPRIO_WHO_PROCESS: u64 = 1;

#[cfg(target_arch = "x86_64")]
fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
        .map_err(|error| format!("seccomp rule: {error}"))
}

#[cfg(target_arch = "x86_64")]
fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|error| format!("seccomp rule: {error}"))
}

#[cfg(target_arch = "x86_64")]
/// The system calls refused with EPERM, and under which arguments (an empty
/// list: always).
fn denied_syscalls(
    network: bool,
    metadata_where_writable: bool,
) -> Result<BTreeMap<i64, Vec<SeccompRule>>, String> {
    let always: &[i64] = &[
        // Leaving the process group or session.
        libc::SYS_setsid,
        libc::SYS_setpgid,
        // Ownership changes Landlock does not cover (extended attributes
        // are refused in `unsupported_rules`).
        libc::SYS_chown,
        libc::SYS_fchown,
        libc::SYS_lchown,
        libc::SYS_fchownat,
        SYS_FILE_SETATTR,
        // Mounts and root changes.
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        SYS_OPEN_TREE_ATTR,
        // Other processes' memory and descriptors.
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_kcmp,
        libc::SYS_pidfd_getfd,
        // Kernel state.
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_reboot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_sethostname,
        libc::SYS_setdomainname,
        libc::SYS_settimeofday,
        libc::SYS_clock_settime,
        libc::SYS_clock_adjtime,
        libc::SYS_adjtimex,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_quotactl_fd,
        libc::SYS_syslog,
        libc::SYS_vhangup,
        libc::SYS_iopl,
        libc::SYS_ioperm,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_fanotify_init,
        libc::SYS_open_by_handle_at,
        SYS_LSM_SET_SELF_ATTR,
        // New namespaces would hand out capabilities inside them.
        libc::SYS_unshare,
        libc::SYS_setns,
        // io_uring performs socket and file operations without the system
        // calls this filter sees.
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        // System V IPC and POSIX message queues: their objects are named
        // machine-wide (or IPC-namespace-wide), so a command could read,
        // write, create or remove those of processes outside the sandbox.
        libc::SYS_shmget,
        libc::SYS_shmat,
        libc::SYS_shmctl,
        libc::SYS_shmdt,
        libc::SYS_msgget,
        libc::SYS_msgsnd,
        libc::SYS_msgrcv,
        libc::SYS_msgctl,
        libc::SYS_semget,
        libc::SYS_semop,
        libc::SYS_semtimedop,
        libc::SYS_semctl,
        libc::SYS_mq_open,
        libc::SYS_mq_unlink,
        libc::SYS_mq_timedsend,
        libc::SYS_mq_timedreceive,
        libc::SYS_mq_notify,
        libc::SYS_mq_getsetattr,
        // Another process's memory placement or advice.
        libc::SYS_process_madvise,
        libc::SYS_migrate_pages,
        libc::SYS_move_pages,
    ];
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        always.iter().map(|number| (*number, Vec::new())).collect();

    let ioctl_rules = [
        FS_IOC_SETFLAGS,
        FS_IOC32_SETFLAGS,
        FS_IOC_SETVERSION,
        FS_IOC32_SETVERSION,
        FS_IOC_FSSETXATTR,
        TIOCSTI,
        TIOCLINUX,
    ]
    .into_iter()
    .map(|request| rule(vec![condition(1, SeccompCmpOp::Eq, request)?]))
    .collect::<Result<Vec<_>, String>>()?;
    rules.insert(libc::SYS_ioctl, ioctl_rules);

    // clone(2) with a namespace flag; clone3 is refused in its own filter.
    let namespace_flags = [
        libc::CLONE_NEWNS,
        libc::CLONE_NEWCGROUP,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
    ];
    let clone_rules = namespace_flags
        .into_iter()
        .map(|flag| {
            let flag = u64::try_from(flag).map_err(|_| "negative clone flag".to_owned())?;
            rule(vec![condition(0, SeccompCmpOp::MaskedEq(flag), flag)?])
        })
        .collect::<Result<Vec<_>, String>>()?;
    rules.insert(libc::SYS_clone, clone_rules);

    // kill(-1, ...) signals every process the caller may signal.
    rules.insert(
        libc::SYS_kill,
        vec![rule(vec![condition(0, SeccompCmpOp::Eq, u64::from(u32::MAX))?])?],
    );

    let metadata = [
        (libc::SYS_chmod, 1),
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (libc::SYS_fchmodat2, 2),
    ];
    if metadata_where_writable {
        // Mode changes are the kernel's to refuse outside the writable
        // places; what no place may get is a set-user-id or set-group-id
        // bit, which would run as the host's user (root, maybe) later.
        for (number, mode) in metadata {
            rules.insert(number, set_id_rules(mode)?);
        }
    } else {
        // Mode and time changes Landlock does not cover: refused unless a
        // read-only mount tree outside the writable places makes the kernel
        // refuse them everywhere but there.
        for number in metadata.into_iter().map(|(number, _)| number).chain([
            libc::SYS_utime,
            libc::SYS_utimes,
            libc::SYS_utimensat,
            libc::SYS_futimesat,
        ]) {
            rules.insert(number, Vec::new());
        }
    }
    // A file created with a set-id bit in its mode, wherever it may be
    // created.
    for (number, mode) in [
        (libc::SYS_open, 2),
        (libc::SYS_openat, 3),
        (libc::SYS_creat, 1),
        (libc::SYS_mknod, 1),
        (libc::SYS_mknodat, 2),
    ] {
        rules.insert(number, set_id_rules(mode)?);
    }
    insert_process_rules(&mut rules)?;
    insert_socket_rules(&mut rules, network)?;
    Ok(rules)
}

#[cfg(target_arch = "x86_64")]
/// A mode argument (argument `index`) with the set-user-id or the
/// set-group-id bit.
fn set_id_rules(index: u8) -> Result<Vec<SeccompRule>, String> {
    [libc::S_ISUID, libc::S_ISGID]
        .into_iter()
        .map(|bit| {
            let bit = u64::from(bit);
            rule(vec![condition(index, SeccompCmpOp::MaskedEq(bit), bit)?])
        })
        .collect()
}

#[cfg(target_arch = "x86_64")]
fn value(number: i32, name: &str) -> Result<u64, String> {
    u64::try_from(number).map_err(|_| format!("negative {name}"))
}

#[cfg(target_arch = "x86_64")]
/// Calls that change another process's resource limits, priority, scheduling
/// or I/O priority are refused unless they name the caller itself. Only the
/// literal "self" spellings pass (a pid of 0, `PRIO_PROCESS`/`IOPRIO_WHO_PROCESS`
/// with 0): the filter cannot know the caller's own pid, and a process group
/// or user target (`PRIO_PGRP`, `PRIO_USER`, `IOPRIO_WHO_PGRP`,
/// `IOPRIO_WHO_USER`) reaches processes outside the command even with 0,
/// which means "my group" or "my uid", and every process of the uid is
/// outside.
fn insert_process_rules(rules: &mut BTreeMap<i64, Vec<SeccompRule>>) -> Result<(), String> {
    // `pid_t` is 32 bits: the filter compares the low word, as the kernel
    // reads it.
    for number in [
        libc::SYS_prlimit64,
        libc::SYS_sched_setaffinity,
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setattr,
    ] {
        rules.insert(number, vec![rule(vec![condition(0, SeccompCmpOp::Ne, 0)?])?]);
    }
    let prio_process = u64::from(libc::PRIO_PROCESS);
    rules.insert(
        libc::SYS_setpriority,
        vec![
            rule(vec![condition(0, SeccompCmpOp::Ne, prio_process)?])?,
            rule(vec![condition(1, SeccompCmpOp::Ne, 0)?])?,
        ],
    );
    rules.insert(
        libc::SYS_ioprio_set,
        vec![
            rule(vec![condition(0, SeccompCmpOp::Ne, IOPRIO_WHO_PROCESS)?])?,
            rule(vec![condition(1, SeccompCmpOp::Ne, 0)?])?,
        ],
    );
    Ok(())
}

#[cfg(target_arch = "x86_64")]
/// Sockets. A pair of connected `AF_UNIX` stream or seqpacket sockets is
/// always allowed: both ends are connected to each other, so no address can
/// be named. Every other pair type is refused, `SOCK_RAW` included (the
/// kernel turns an `AF_UNIX` raw pair into a datagram pair, whose `sendto`
/// reaches any socket path). Without the network, no other socket exists;
/// with it, only IPv4 and IPv6 sockets, so unix, netlink, packet and vsock
/// endpoints stay out of reach either way.
fn insert_socket_rules(rules: &mut BTreeMap<i64, Vec<SeccompRule>>, network: bool) -> Result<(), String> {
    let af_unix = value(libc::AF_UNIX, "AF_UNIX")?;
    let stream = value(libc::SOCK_STREAM, "SOCK_STREAM")?;
    let seqpacket = value(libc::SOCK_SEQPACKET, "SOCK_SEQPACKET")?;
    // The type's low four bits; SOCK_NONBLOCK and SOCK_CLOEXEC sit above them.
    let mut pair_rules = vec![rule(vec![condition(0, SeccompCmpOp::Ne, af_unix)?])?];
    for kind in (0..=SOCK_TYPE_MASK).filter(|kind| *kind != stream && *kind != seqpacket) {
        pair_rules.push(rule(vec![condition(
            1,
            SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK),
            kind,
        )?])?);
    }
    rules.insert(libc::SYS_socketpair, pair_rules);
    if network {
        let inet = value(libc::AF_INET, "AF_INET")?;
        let inet6 = value(libc::AF_INET6, "AF_INET6")?;
        rules.insert(
            libc::SYS_socket,
            vec![rule(vec![
                condition(0, SeccompCmpOp::Ne, inet)?,
                condition(0, SeccompCmpOp::Ne, inet6)?,
            ])?],
        );
    } else {
        for number in [
            libc::SYS_socket,
            libc::SYS_connect,
            libc::SYS_bind,
            libc::SYS_listen,
            libc::SYS_accept,
            libc::SYS_accept4,
        ] {
            rules.insert(number, Vec::new());
        }
    }
    Ok(())
}

#[cfg(target_arch = "x86_64")]
/// Extended attribute changes, which Landlock does not cover, refused as
/// on a file system without extended attributes, so that a tool that
/// copies them when it can goes on without: `cp -p` and `cp -a` set a
/// file's ACL through `system.posix_acl_access` and, told the file system
/// has none, set its mode with `chmod` instead (which works where the
/// command may write, inside the namespaces).
const XATTR_CHANGES: [i64; 8] = [
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    SYS_SETXATTRAT,
    SYS_REMOVEXATTRAT,
];

#[cfg(target_arch = "x86_64")]
/// Every advisory lock and lease: `flock`, and `fcntl` with `F_SETLK`,
/// `F_SETLKW`, their OFD forms and `F_SETLEASE`. seccomp cannot see which
/// file a descriptor names, and every file a command can read (another
/// host's database, a lock file of any process of the user) can be locked
/// with a read descriptor, which would stall whoever needs it; so no
/// command takes any lock, inside namespaces or not. They fail as on a
/// file system without locks ("operation not supported"), which tools that
/// lock for their own caches (cargo) take as "go on without". With them,
/// the extended attribute changes of [`XATTR_CHANGES`]. With a lock keeper
/// (`keep_locks`), `flock` and the open file description locks are its to
/// answer (`locks`): taken for the command's own files only, refused as
/// here for every other. POSIX locks and leases belong to the process that
/// takes them, which nobody else can take them for: refused here always.
fn unsupported_rules(keep_locks: bool) -> Result<BTreeMap<i64, Vec<SeccompRule>>, String> {
    let mut commands = vec![
        value(libc::F_SETLK, "F_SETLK")?,
        value(libc::F_SETLKW, "F_SETLKW")?,
        value(libc::F_SETLEASE, "F_SETLEASE")?,
    ];
    if !keep_locks {
        commands.push(value(libc::F_OFD_SETLK, "F_OFD_SETLK")?);
        commands.push(value(libc::F_OFD_SETLKW, "F_OFD_SETLKW")?);
    }
    let fcntl_rules = commands
        .into_iter()
        .map(|command| rule(vec![condition(1, SeccompCmpOp::Eq, command)?]))
        .collect::<Result<Vec<_>, String>>()?;
    let mut rules = BTreeMap::from([(libc::SYS_fcntl, fcntl_rules)]);
    if !keep_locks {
        rules.insert(libc::SYS_flock, Vec::new());
    }
    rules.extend(XATTR_CHANGES.map(|number| (number, Vec::new())));
    Ok(rules)
}

#[cfg(not(target_arch = "x86_64"))]
fn seccomp_programs(
    _network: bool,
    _metadata_where_writable: bool,
    _keep_locks: bool,
) -> Result<Vec<BpfProgram>, String> {
    Err(format!(
        "the seccomp filter is defined for x86_64 only, not {}",
        std::env::consts::ARCH
    ))
}

#[cfg(target_arch = "x86_64")]
fn errno(value: i32) -> Result<u32, String> {
    u32::try_from(value).map_err(|_| "negative errno".to_owned())
}

#[cfg(target_arch = "x86_64")]
/// The seccomp programs: the denial list (EPERM), preceded by a guard that
/// refuses x32 system call numbers, which share the x86_64 audit arch and
/// would otherwise slip past a list of x86_64 numbers; and `clone3`, refused
/// with ENOSYS so that libc falls back to `clone`, whose flags the first
/// program can inspect.
fn seccomp_programs(
    network: bool,
    metadata_where_writable: bool,
    keep_locks: bool,
) -> Result<Vec<BpfProgram>, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|error| format!("seccomp: {error}"))?;
    let compile = |rules, action| -> Result<BpfProgram, String> {
        let filter = SeccompFilter::new(rules, SeccompAction::Allow, action, arch)
            .map_err(|error| format!("seccomp: {error}"))?;
        BpfProgram::try_from(filter).map_err(|error| format!("seccomp: {error}"))
    };
    let denied = compile(
        denied_syscalls(network, metadata_where_writable)?,
        SeccompAction::Errno(errno(libc::EPERM)?),
    )?;
    let mut guarded = x32_guard(errno(libc::ENOSYS)?);
    guarded.extend(denied);
    // `openat2` carries its mode in a structure seccomp cannot read, so it
    // goes the way of `clone3`: libc falls back to `openat`. `io_setup`
    // (Linux AIO) takes contexts from the machine-wide `fs.aio-max-nr`,
    // which no user or namespace bound limits: a command could take every
    // one of them. Refused as not implemented, as on a kernel without AIO,
    // so programs that use it when they can (databases, `fio`, QEMU) fall
    // back to threads; POSIX AIO (`aio_read`) is threads in glibc anyway.
    let unreadable_arguments = compile(
        BTreeMap::from([
            (libc::SYS_clone3, Vec::new()),
            (libc::SYS_openat2, Vec::new()),
            (libc::SYS_io_setup, Vec::new()),
        ]),
        SeccompAction::Errno(errno(libc::ENOSYS)?),
    )?;
    let unsupported = compile(
        unsupported_rules(keep_locks)?,
        SeccompAction::Errno(errno(libc::EOPNOTSUPP)?),
    )?;
    Ok(vec![guarded, unreadable_arguments, unsupported])
}

#[cfg(target_arch = "x86_64")]
/// `if (nr >= 0x40000000) return ERRNO(ENOSYS);`
fn x32_guard(enosys: u32) -> BpfProgram {
    const BPF_LD_W_ABS: u16 = 0x20;
    const BPF_JMP_JGE_K: u16 = 0x35;
    const BPF_RET_K: u16 = 0x06;
    const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    vec![
        sock_filter {
            code: BPF_LD_W_ABS,
            jt: 0,
            jf: 0,
            k: 0,
        },
        sock_filter {
            code: BPF_JMP_JGE_K,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        sock_filter {
            code: BPF_RET_K,
            jt: 0,
            jf: 0,
            k: SECCOMP_RET_ERRNO | enosys,
        },
    ]
}
