//! What a command may take from the machine (`sandbox.md` P16), applied by
//! the helper's stages with the values the caller named:
//! - a cgroup of the command's own (cgroup v1 or v2, wherever the host's
//!   user may make one) with the `memory` controller's limit (swap
//!   included) and the `pids` controller's, made by the supervisor around
//!   the confining stage before it does anything, removed when the
//!   command is over;
//! - the `pid_max` of the command's own PID namespace (Linux 6.14 and
//!   newer), set by its init;
//! - the inotify limits of the command's own user namespace, which the
//!   kernel also counts against the user's own;
//! - `RLIMIT_NOFILE` on the shell, and `RLIMIT_NPROC` when the host is not
//!   root (the kernel counts it in the command's own user namespace; root
//!   is never bound by it).
//!
//! And what the probe finds out about each of them on this machine. It
//! decides no value and never applies less than asked: a bound that cannot
//! be applied is an error, and nothing runs.

use std::path::{Path, PathBuf};

use crate::spec::{CommandBounds, InotifyBound};

/// The prefix of every cgroup the helper makes, so that a later probe can
/// find what a killed supervisor left.
const CGROUP_PREFIX: &str = "plan-exec-";

/// Where `/proc/sys` keeps the limits this module sets.
const PID_MAX: &str = "/proc/sys/kernel/pid_max";
const INOTIFY_INSTANCES: &str = "/proc/sys/user/max_inotify_instances";
const INOTIFY_WATCHES: &str = "/proc/sys/user/max_inotify_watches";

// ------------------------------------------------------------------ cgroups

/// A cgroup hierarchy's version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// One directory in which the helper makes a command's cgroup for some
/// controllers.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Placement {
    parent: PathBuf,
    version: Version,
    controllers: Vec<&'static str>,
}

/// A cgroup line of `/proc/self/cgroup`: hierarchy id, controllers, path.
fn own_cgroups(text: &str) -> Vec<(Vec<&str>, &str)> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, ':');
            let _id = fields.next()?;
            let controllers = fields.next()?;
            let path = fields.next()?;
            let controllers = if controllers.is_empty() {
                Vec::new()
            } else {
                controllers.split(',').collect()
            };
            Some((controllers, path))
        })
        .collect()
}

/// A cgroup mount of `/proc/self/mountinfo`: its root in the hierarchy,
/// its mount point, its version and (v1) its controllers.
struct CgroupMount {
    root: String,
    point: PathBuf,
    version: Version,
    options: Vec<String>,
}

fn cgroup_mounts(text: &str) -> Vec<CgroupMount> {
    text.lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let mut fields = before.split(' ');
            let root = fields.nth(3)?;
            let point = fields.next()?;
            let mut after = after.split(' ');
            let version = match after.next()? {
                "cgroup" => Version::V1,
                "cgroup2" => Version::V2,
                _ => return None,
            };
            let _source = after.next()?;
            let options = after.next().unwrap_or("").split(',').map(str::to_owned).collect();
            Some(CgroupMount {
                root: root.to_owned(),
                point: PathBuf::from(super::namespaces::unescape(point)),
                version,
                options,
            })
        })
        .collect()
}

/// The directory of cgroup `path` through `mount`, if the mount shows it.
fn through(mount: &CgroupMount, path: &str) -> Option<PathBuf> {
    let relative = if mount.root == "/" {
        path.trim_start_matches('/')
    } else {
        path.strip_prefix(mount.root.as_str())?.trim_start_matches('/')
    };
    Some(if relative.is_empty() {
        mount.point.clone()
    } else {
        mount.point.join(relative)
    })
}

/// Where this process can make a child cgroup with `controller`: in a v1
/// hierarchy of that controller, below its own cgroup there (v1 lets a
/// cgroup have processes and children alike); else in the v2 hierarchy,
/// beside its own cgroup (v2 gives controllers only to cgroups without
/// processes of their own, so not below it), where the parent hands the
/// controller down. `None` where neither exists.
fn placement_of(
    controller: &'static str,
    cgroups: &str,
    mounts: &[CgroupMount],
    subtree_control: impl Fn(&Path) -> Option<String>,
) -> Option<Placement> {
    let own = own_cgroups(cgroups);
    let v1 = own
        .iter()
        .find(|(controllers, _)| controllers.contains(&controller))
        .and_then(|(_, path)| {
            let mount = mounts.iter().find(|mount| {
                mount.version == Version::V1 && mount.options.iter().any(|option| option == controller)
            })?;
            through(mount, path)
        });
    if let Some(parent) = v1 {
        return Some(Placement {
            parent,
            version: Version::V1,
            controllers: vec![controller],
        });
    }
    let (_, path) = own.iter().find(|(controllers, _)| controllers.is_empty())?;
    let mount = mounts.iter().find(|mount| mount.version == Version::V2)?;
    let own_directory = through(mount, path)?;
    let parent = if own_directory == mount.point {
        own_directory
    } else {
        own_directory.parent()?.to_path_buf()
    };
    subtree_control(&parent)?
        .split_whitespace()
        .any(|name| name == controller)
        .then_some(Placement {
            parent,
            version: Version::V2,
            controllers: vec![controller],
        })
}

/// The placements for `controllers`, those sharing a directory merged (v2,
/// or v1 controllers mounted together). `Err` names a controller with no
/// place.
fn placements(controllers: &[&'static str]) -> Result<Vec<Placement>, String> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|error| format!("/proc/self/cgroup: {error}"))?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|error| format!("/proc/self/mountinfo: {error}"))?;
    let mounts = cgroup_mounts(&mountinfo);
    let mut merged: Vec<Placement> = Vec::new();
    for controller in controllers {
        let placement = placement_of(controller, &cgroups, &mounts, |parent| {
            std::fs::read_to_string(parent.join("cgroup.subtree_control")).ok()
        })
        .ok_or_else(|| {
            format!("no cgroup with the {controller} controller can be made here (neither a v1 hierarchy of it nor a v2 parent that hands it down)")
        })?;
        match merged.iter_mut().find(|known| known.parent == placement.parent) {
            Some(known) => known.controllers.push(controller),
            None => merged.push(placement),
        }
    }
    Ok(merged)
}

/// A command's own cgroup (one directory per hierarchy), removed by
/// [`CommandCgroup::remove`] once the command's processes are gone.
#[derive(Debug)]
pub(crate) struct CommandCgroup {
    directories: Vec<PathBuf>,
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|error| format!("{}: {error}", path.display()))
}

/// Writes an optional limit: a file this kernel does not have (no swap
/// accounting) is skipped.
fn write_if_present(path: &Path, value: &str) -> Result<(), String> {
    match std::fs::write(path, value) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        result => result.map_err(|error| format!("{}: {error}", path.display())),
    }
}

impl CommandCgroup {
    /// The cgroup controllers `bounds` asks for: `memory` for the memory
    /// bound, `pids` for the tasks bound.
    fn controllers(bounds: &CommandBounds) -> Vec<&'static str> {
        let mut controllers = Vec::new();
        if bounds.memory_bytes.is_some() {
            controllers.push("memory");
        }
        if bounds.tasks.is_some() {
            controllers.push("pids");
        }
        controllers
    }

    /// Makes the cgroup `name` with the limits of `bounds` (`extra_tasks`:
    /// the helper's own processes in it besides the command's). `Ok(None)`
    /// when nothing is asked for. The tasks bound is kept here only where a
    /// `pids` controller can be had; `pids_required` makes its absence an
    /// error (nothing else keeps it for this command).
    pub(crate) fn make(
        bounds: &CommandBounds,
        name: &str,
        extra_tasks: u64,
        pids_required: bool,
    ) -> Result<Option<CommandCgroup>, String> {
        let mut controllers = Self::controllers(bounds);
        if controllers.contains(&"pids") && !pids_required && placements(&["pids"]).is_err() {
            controllers.retain(|controller| *controller != "pids");
        }
        if controllers.is_empty() {
            return Ok(None);
        }
        let placements = placements(&controllers)?;
        let mut cgroup = CommandCgroup {
            directories: Vec::new(),
        };
        for placement in &placements {
            let directory = placement.parent.join(format!("{CGROUP_PREFIX}{name}"));
            std::fs::create_dir(&directory)
                .map_err(|error| format!("making the cgroup {}: {error}", directory.display()))?;
            cgroup.directories.push(directory.clone());
            if let Err(reason) = limit(&directory, placement, bounds, extra_tasks) {
                cgroup.remove();
                return Err(reason);
            }
        }
        Ok(Some(cgroup))
    }

    /// Moves process `pid` (and so everything it starts later) into the
    /// cgroup.
    pub(crate) fn add(&self, pid: u32) -> Result<(), String> {
        for directory in &self.directories {
            write(&directory.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// Removes the cgroup; it must be empty of processes by now. What
    /// cannot be removed (a process somehow left) is left for a later
    /// probe's sweep.
    pub(crate) fn remove(&mut self) {
        for directory in self.directories.drain(..) {
            let _ = std::fs::remove_dir(&directory);
        }
    }
}

impl Drop for CommandCgroup {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Sets the limits of `bounds` that `placement`'s controllers keep.
fn limit(
    directory: &Path,
    placement: &Placement,
    bounds: &CommandBounds,
    extra_tasks: u64,
) -> Result<(), String> {
    for controller in &placement.controllers {
        match (*controller, placement.version) {
            ("memory", Version::V1) => {
                let bytes = bounds.memory_bytes.unwrap_or(u64::MAX).to_string();
                write(&directory.join("memory.limit_in_bytes"), &bytes)?;
                // Memory and swap together: a command cannot push its
                // excess into swap.
                write_if_present(&directory.join("memory.memsw.limit_in_bytes"), &bytes)?;
            }
            ("memory", Version::V2) => {
                let bytes = bounds.memory_bytes.unwrap_or(u64::MAX).to_string();
                write(&directory.join("memory.max"), &bytes)?;
                write_if_present(&directory.join("memory.swap.max"), "0")?;
                // Out of memory, the whole command ends, not one process
                // of it chosen among them.
                write_if_present(&directory.join("memory.oom.group"), "1")?;
            }
            ("pids", Version::V1 | Version::V2) => {
                let tasks = bounds
                    .tasks
                    .unwrap_or(CommandBounds::MAX_TASKS)
                    .saturating_add(extra_tasks);
                write(&directory.join("pids.max"), &tasks.to_string())?;
            }
            (_, Version::V1 | Version::V2) => {}
        }
    }
    Ok(())
}

/// Removes the cgroups a supervisor that was killed left behind: every
/// empty `plan-exec-*` group below the places this process would use, whose
/// supervisor (its pid is the name's first number) is gone.
pub(crate) fn sweep_stale_cgroups() {
    let Ok(placements) = placements(&["memory"]).or_else(|_| placements(&["pids"])) else {
        return;
    };
    let mut parents: Vec<PathBuf> = placements.into_iter().map(|placement| placement.parent).collect();
    if let Ok(pids) = self::placements(&["pids"]) {
        parents.extend(pids.into_iter().map(|placement| placement.parent));
    }
    for parent in parents {
        let Ok(entries) = std::fs::read_dir(&parent) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(rest) = name.to_str().and_then(|name| name.strip_prefix(CGROUP_PREFIX)) else {
                continue;
            };
            let owner = rest.split('-').next().and_then(|pid| pid.parse::<i32>().ok());
            let gone = owner
                .and_then(rustix::process::Pid::from_raw)
                .is_some_and(|pid| rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH));
            if gone {
                // Refused while a process is still in it: then it is not stale.
                let _ = std::fs::remove_dir(entry.path());
            }
        }
    }
}

// ----------------------------------------------------- namespaces' limits

/// Whether this kernel gives every PID namespace a `pid_max` of its own
/// (Linux 6.14 and newer). On an older one `/proc/sys/kernel/pid_max` is
/// the machine's, which a root helper must never write.
pub(crate) fn pid_namespaces_have_their_own_pid_max() -> bool {
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    let mut numbers = release
        .trim()
        .split(|character: char| !character.is_ascii_digit())
        .filter(|part| !part.is_empty())
        .map(|part| part.parse::<u32>().unwrap_or(0));
    let (major, minor) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    (major, minor) >= (6, 14)
}

/// Sets the `pid_max` of this process's PID namespace (called by its init,
/// PID 1, with `/proc` of that namespace writable) so that it holds at most
/// `tasks` processes and threads (PIDs 1 to `tasks`).
pub(crate) fn limit_pid_namespace(tasks: u64) -> Result<(), String> {
    if rustix::process::getpid().as_raw_nonzero().get() != 1 {
        return Err("pid_max is set only by the init of a new PID namespace".into());
    }
    if !pid_namespaces_have_their_own_pid_max() {
        return Err("this kernel has no pid_max per PID namespace (Linux 6.14 or newer)".into());
    }
    write(Path::new(PID_MAX), &tasks.saturating_add(1).to_string())
}

/// Sets the inotify limits of the user namespace this process just made
/// (it holds every capability there); the kernel counts each instance and
/// watch in every user namespace up to the machine's, so this bounds what
/// the command takes from the user's own limits.
pub(crate) fn limit_user_namespace(inotify: InotifyBound) -> Result<(), String> {
    write(Path::new(INOTIFY_INSTANCES), &inotify.instances.to_string())?;
    write(Path::new(INOTIFY_WATCHES), &inotify.watches.to_string())
}

/// The resource limits the shell starts with: `RLIMIT_NOFILE`, and
/// `RLIMIT_NPROC` when `nproc` (the host is not root and the command has a
/// user namespace of its own, where the kernel counts it for the command
/// alone). A soft limit already lower is kept.
pub(crate) fn limit_shell(bounds: &CommandBounds, nproc: bool) -> Result<(), String> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let mut limits = Vec::new();
    if let Some(files) = bounds.open_files {
        limits.push((Resource::Nofile, files, "open files"));
    }
    if let (Some(tasks), true) = (bounds.tasks, nproc) {
        limits.push((Resource::Nproc, tasks, "processes"));
    }
    for (resource, bound, what) in limits {
        let current = getrlimit(resource);
        let soft = current.current.map_or(bound, |soft| soft.min(bound));
        setrlimit(
            resource,
            Rlimit {
                current: Some(soft),
                maximum: Some(bound),
            },
        )
        .map_err(|error| format!("limiting {what} to {bound}: {error}"))?;
    }
    Ok(())
}

// -------------------------------------------------------------------- probe

/// What the probe found about each mechanism (held, or why not), by the
/// names the library reads (`wire::MECHANISM_*`).
pub(crate) struct Found {
    pub(crate) memory_cgroup: Result<(), String>,
    pub(crate) pids_cgroup: Result<(), String>,
    pub(crate) pid_max: Result<(), String>,
    pub(crate) user_namespace_limits: Result<(), String>,
}

/// Finds out which mechanisms this machine gives a command of this user.
/// Changes nothing that outlives it: its cgroups are removed again, and
/// what it writes to `/proc/sys` is the value already there, in namespaces
/// of a child that ends. It also removes what killed supervisors left.
pub(crate) fn probe() -> Found {
    sweep_stale_cgroups();
    let name = format!("{}-probe", std::process::id());
    let cgroup = |bounds: CommandBounds| CommandCgroup::make(&bounds, &name, 0, true).map(drop);
    Found {
        memory_cgroup: cgroup(CommandBounds {
            memory_bytes: Some(u64::MAX / 2),
            ..CommandBounds::default()
        }),
        pids_cgroup: cgroup(CommandBounds {
            tasks: Some(CommandBounds::MAX_TASKS),
            ..CommandBounds::default()
        }),
        pid_max: in_child(probe_pid_max),
        user_namespace_limits: in_child(probe_inotify),
    }
}

/// Runs `check` in a child of this (single-threaded) helper and returns
/// what it found; the child ends with it.
fn in_child(check: fn() -> Result<(), String>) -> Result<(), String> {
    let (ours, theirs) =
        std::os::unix::net::UnixStream::pair().map_err(|error| format!("socketpair: {error}"))?;
    match super::pid_namespace::fork()? {
        super::pid_namespace::Forked::Child => {
            drop(ours);
            let line = match check() {
                Ok(()) => "ok".to_owned(),
                Err(reason) => reason,
            };
            let _ = std::io::Write::write_all(&mut &theirs, line.as_bytes());
            std::process::exit(0)
        }
        super::pid_namespace::Forked::Parent(child) => {
            drop(theirs);
            let mut answer = String::new();
            let _ = std::io::Read::read_to_string(&mut &ours, &mut answer);
            let _ = rustix::process::waitpid(Some(child), rustix::process::WaitOptions::empty());
            match answer.as_str() {
                "ok" => Ok(()),
                "" => Err("the probe's child ended without an answer".into()),
                reason => Err(reason.to_owned()),
            }
        }
    }
}

/// In a child: a new user and PID namespace made by an unprivileged user
/// of the machine (root first becomes `nobody`), whose own child writes its
/// namespace's `pid_max` back unchanged. Only a kernel with a `pid_max` per
/// PID namespace lets it: the machine's is writable by the machine's root
/// alone.
fn probe_pid_max() -> Result<(), String> {
    if !pid_namespaces_have_their_own_pid_max() {
        return Err("this kernel has no pid_max per PID namespace (Linux 6.14 or newer)".into());
    }
    if rustix::process::geteuid().is_root() {
        let nobody_gid = rustix::process::Gid::from_raw(65534);
        let nobody = rustix::process::Uid::from_raw(65534);
        rustix::thread::set_thread_groups(&[]).map_err(|error| format!("setgroups: {error}"))?;
        rustix::thread::set_thread_res_gid(nobody_gid, nobody_gid, nobody_gid)
            .map_err(|error| format!("setresgid: {error}"))?;
        rustix::thread::set_thread_res_uid(nobody, nobody, nobody)
            .map_err(|error| format!("setresuid: {error}"))?;
        // A changed uid makes a process undumpable, which keeps it from
        // writing its own `/proc/self` maps.
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::Dumpable)
            .map_err(|error| format!("dumpable: {error}"))?;
    }
    let ids = super::namespaces::own_ids();
    super::namespaces::unshare_flags(
        rustix::thread::UnshareFlags::NEWUSER | rustix::thread::UnshareFlags::NEWPID,
    )?;
    super::namespaces::map_own_ids(ids)?;
    in_child(|| {
        let current = std::fs::read_to_string(PID_MAX).map_err(|error| format!("{PID_MAX}: {error}"))?;
        write(Path::new(PID_MAX), current.trim())
    })
}

/// In a child: a new user namespace (ids mapped as the command's are), in
/// which the inotify limits are written back unchanged.
fn probe_inotify() -> Result<(), String> {
    let ids = super::namespaces::own_ids();
    super::namespaces::unshare_flags(rustix::thread::UnshareFlags::NEWUSER)?;
    super::namespaces::map_own_ids(ids)?;
    for file in [INOTIFY_INSTANCES, INOTIFY_WATCHES] {
        let current = std::fs::read_to_string(file).map_err(|error| format!("{file}: {error}"))?;
        write(Path::new(file), current.trim())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
25 30 0:22 / /sys/fs/cgroup rw,relatime shared:9 - tmpfs tmpfs rw,mode=755
26 25 0:23 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
27 25 0:24 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
28 25 0:25 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
29 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
";

    #[test]
    fn a_v1_host_places_each_controller_below_its_own_group_in_its_hierarchy() {
        let cgroups = "4:memory:/process_api/abc\n8:pids:/\n3:cpu,cpuacct:/x\n0::/\n";
        let mounts = cgroup_mounts(MOUNTINFO);
        let nothing = |_: &Path| None;
        assert_eq!(
            placement_of("memory", cgroups, &mounts, nothing),
            Some(Placement {
                parent: PathBuf::from("/sys/fs/cgroup/memory/process_api/abc"),
                version: Version::V1,
                controllers: vec!["memory"],
            })
        );
        assert_eq!(
            placement_of("pids", cgroups, &mounts, nothing).map(|placement| placement.parent),
            Some(PathBuf::from("/sys/fs/cgroup/pids"))
        );
    }

    #[test]
    fn a_mount_of_a_subtree_is_followed_from_its_root() {
        let mountinfo = "26 25 0:23 /a /mnt/memory rw - cgroup cgroup rw,memory\n";
        let mounts = cgroup_mounts(mountinfo);
        assert_eq!(
            placement_of("memory", "4:memory:/a/b\n", &mounts, |_| None).map(|placement| placement.parent),
            Some(PathBuf::from("/mnt/memory/b"))
        );
        // A group outside the mounted subtree cannot be reached through it.
        assert_eq!(placement_of("memory", "4:memory:/c\n", &mounts, |_| None), None);
    }

    #[test]
    fn a_v2_host_places_a_command_beside_its_own_group_where_the_parent_hands_the_controller_down() {
        let mountinfo = "30 1 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let mounts = cgroup_mounts(mountinfo);
        let cgroups = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/host.scope\n";
        let parent = PathBuf::from("/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice");
        let delegated = |directory: &Path| (directory == parent).then(|| "cpu memory pids\n".to_owned());
        assert_eq!(
            placement_of("memory", cgroups, &mounts, delegated),
            Some(Placement {
                parent: parent.clone(),
                version: Version::V2,
                controllers: vec!["memory"],
            })
        );
        // A parent that does not hand the controller down gives no place.
        let without = |_: &Path| Some("cpu\n".to_owned());
        assert_eq!(placement_of("memory", cgroups, &mounts, without), None);
        // The host in the hierarchy's root: its children, there.
        let root = placement_of("pids", "0::/\n", &mounts, |_| Some("memory pids".to_owned()));
        assert_eq!(
            root.map(|placement| placement.parent),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
    }

    #[test]
    fn a_controller_mounted_nowhere_has_no_place() {
        let mounts = cgroup_mounts(MOUNTINFO);
        // The v2 hierarchy of a v1 host hands nothing down.
        assert_eq!(
            placement_of("hugetlb", "0::/\n", &mounts, |_| Some(String::new())),
            None
        );
    }
}
