//! No command starves the machine (`sandbox.md` P16): a fork loop, a memory
//! hog, an AIO grab and an inotify grab each end bounded, within seconds,
//! while the host (this test process) and a second command, of another
//! session, are still served. Every grab is itself bounded, so that even a
//! sandbox that failed to bound it would take a few hundred of anything
//! for a few seconds: the fork loop stops at 1000 children that each exit
//! after four seconds, the hog at 1 GiB, and the AIO and inotify grabs
//! first prove the bound is in place (a one-slot AIO context refused, the
//! command's own inotify limit read) and take nothing otherwise.
//! With `bounds` left empty (today's `CommandBounds::default()`, what a
//! command got before this change) each assertion fails: the loop forks
//! its 1000 children, the hog reaches 1 GiB, `io_setup` succeeds and the
//! inotify limit read is the user's.

use std::path::Path;
use std::process::Command;

use plan_exec::{CommandBounds, CommandState, Confinement, InotifyBound, Stream};

use crate::support::*;

/// The bounds these tests give a command: small, so a grab meets them at
/// once.
fn small_bounds() -> CommandBounds {
    CommandBounds {
        tasks: Some(CommandBounds::MIN_TASKS),
        memory_bytes: Some(256 * 1024 * 1024),
        inotify: Some(InotifyBound {
            instances: 16,
            watches: 1000,
        }),
        open_files: Some(1024),
    }
}

/// Whether every bound can be had here with the namespaces on; where one
/// cannot, asserts that a command asking for it does not start (it never
/// runs unbounded) and says so.
fn bounds_here(test: &str) -> bool {
    if !namespaces_here("the bounds kept in namespaces are untested", test) {
        return false;
    }
    let support = bound_support().unwrap();
    let missing: Vec<String> = [
        ("tasks", support.tasks(true)),
        ("memory", support.memory()),
        ("inotify", support.inotify(true)),
    ]
    .into_iter()
    .filter_map(|(name, availability)| match availability {
        plan_exec::Availability::Available => None,
        plan_exec::Availability::Unavailable { reason } => Some(format!("{name}: {reason}")),
    })
    .collect();
    if missing.is_empty() {
        return true;
    }
    let dirs = dirs();
    let mut asking = spec(
        "echo should-not-run",
        &dirs.scratch,
        &dirs.scratch,
        Confinement::ReadOnly,
    );
    asking.isolation.bounds = small_bounds();
    let (outcome, _) = run(asking);
    assert_eq!(outcome.state, CommandState::FailedToStart, "{outcome:?}");
    panic!(
        "{test}: this machine cannot bound {missing:?}; a command asking for it did not start, as asserted"
    );
}

/// A Plan command of its own scratch directory (another session's) with
/// `bounds`.
fn bounded(command: &str, scratch: &Path, bounds: CommandBounds) -> plan_exec::CommandSpec {
    let mut spec = spec(command, scratch, scratch, Confinement::ReadOnly);
    spec.isolation.bounds = bounds;
    spec
}

/// What the test shows while a grab holds what it took: the host (this
/// process) still starts a process, and a second command, of another
/// session (its own scratch directory), with the same bounds, runs `probe`
/// and prints `served`.
fn others_are_served(probe: &str) {
    let status = Command::new("/bin/sh")
        .args(["-c", "exit 0"])
        .status()
        .expect("the host could not start a process");
    assert!(status.success());
    let other = dirs();
    let (outcome, events) = run(bounded(
        &format!("{probe} && echo served"),
        &other.scratch,
        small_bounds(),
    ));
    assert_eq!(
        (outcome.state, events.text(Stream::Stdout)),
        (CommandState::Exited, "served\n".to_owned()),
        "the second command was not served: {outcome:?} {}",
        events.text(Stream::Stderr)
    );
}

#[test]
fn a_fork_loop_is_refused_at_its_bound_while_the_host_and_another_command_are_served() {
    if !bounds_here("a_fork_loop_is_refused_at_its_bound_while_the_host_and_another_command_are_served") {
        return;
    }
    // At most 1000 children, each gone after four seconds; the parent
    // says when fork is refused, holds what it made while the others are
    // served, and ends (its children with it).
    let script = r#"python3 -c "
import errno, os, time
made = 0
for _ in range(1000):
    try:
        pid = os.fork()
    except OSError as error:
        print('refused', made, errno.errorcode[error.errno], flush=True)
        break
    if pid == 0:
        time.sleep(4)
        os._exit(0)
    made += 1
else:
    print('unrefused', made, flush=True)
time.sleep(2)
""#;
    for namespaces in namespace_modes() {
        let dirs = dirs();
        let mut spec = bounded(script, &dirs.scratch, small_bounds());
        spec.isolation.namespaces = namespaces;
        let (running, events) = start(spec);
        let line = stdout_line(&events, "");
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words.first(), Some(&"refused"), "namespaces {namespaces}: {line}");
        let made: u64 = words[1].parse().unwrap();
        assert!(
            made < CommandBounds::MIN_TASKS && made > CommandBounds::MIN_TASKS / 2,
            "namespaces {namespaces}: {made} children"
        );
        assert_eq!(words[2], "EAGAIN");
        others_are_served("true");
        let outcome = running.wait();
        assert_eq!(
            outcome.exit_code,
            Some(0),
            "{outcome:?} {}",
            events.text(Stream::Stderr)
        );
    }
}

#[test]
fn a_memory_hog_ends_at_its_bound_while_the_host_and_another_command_are_served() {
    if !bounds_here("a_memory_hog_ends_at_its_bound_while_the_host_and_another_command_are_served") {
        return;
    }
    // 16 MiB at a time, written, up to 1 GiB at most; the total so far on
    // each line. Waits for the test before it goes past 128 MiB.
    for namespaces in namespace_modes() {
        let dirs = dirs();
        let fifo = Fifo::new(&dirs.root.path().join("go"));
        let script = format!(
            r#"python3 -c "
blocks = []
for step in range(64):
    if step == 8:
        open('{}').readline()
    blocks.append(b'x' * (16 << 20))
    print((step + 1) * 16, flush=True)
print('unbounded', flush=True)
""#,
            dirs.root.path().join("go").display()
        );
        let mut spec = bounded(&script, &dirs.scratch, small_bounds());
        spec.isolation.namespaces = namespaces;
        // Inside the namespaces the FIFO's directory is hidden from no one:
        // it is the test's own temporary directory, readable as any file.
        let (running, events) = start(spec);
        stdout_line(&events, "128");
        others_are_served("true");
        fifo.send_line();
        let outcome = running.wait();
        let stdout = events.text(Stream::Stdout);
        let reached: u64 = stdout
            .lines()
            .filter_map(|line| line.parse().ok())
            .max()
            .unwrap_or(0);
        assert!(
            !stdout.contains("unbounded") && reached < 256,
            "namespaces {namespaces}: reached {reached} MiB: {stdout}"
        );
        assert_eq!(
            (outcome.state, outcome.signal),
            (CommandState::Exited, Some(libc::SIGKILL)),
            "namespaces {namespaces}: {outcome:?} {}",
            events.text(Stream::Stderr)
        );
        // A later command of the same host is served as before.
        others_are_served("true");
    }
}

/// Python that tries `io_setup(1)`; only where that is refused (the bound
/// proven) does it try to take half the machine's AIO slots, and says what
/// happened to each.
const AIO_GRAB: &str = r#"python3 -c "
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
context = ctypes.c_ulong(0)
if libc.syscall(206, 1, ctypes.byref(context)) == 0:
    libc.syscall(207, context)
    print('allowed', flush=True)
    raise SystemExit
print('refused', os.strerror(ctypes.get_errno()), flush=True)
slots = int(open('/proc/sys/fs/aio-max-nr').read()) // 2
grab = ctypes.c_ulong(0)
taken = libc.syscall(206, slots, ctypes.byref(grab)) == 0
print('grab', 'taken' if taken else 'refused', flush=True)
""#;

#[test]
fn an_aio_grab_takes_nothing_while_the_host_and_another_command_are_served() {
    if !sandbox_available("an_aio_grab_takes_nothing_while_the_host_and_another_command_are_served") {
        return;
    }
    for namespaces in namespace_modes() {
        for auto in [false, true] {
            let dirs = dirs();
            let workspace = dirs.root.path().join("ws");
            std::fs::create_dir(&workspace).unwrap();
            let confinement = if auto {
                auto_of(&workspace)
            } else {
                Confinement::ReadOnly
            };
            let mut spec = spec(AIO_GRAB, &workspace, &dirs.scratch, confinement.clone());
            spec.isolation.namespaces = namespaces;
            let (outcome, events) = run(spec);
            assert_eq!(
                events.text(Stream::Stdout),
                "refused Function not implemented\ngrab refused\n",
                "{confinement:?}, namespaces {namespaces}: {outcome:?} {}",
                events.text(Stream::Stderr)
            );
        }
    }
    // The host still has its AIO (one slot, given back), and so is another
    // command served.
    let host = Command::new("python3")
        .args([
            "-c",
            "import ctypes; libc = ctypes.CDLL(None); c = ctypes.c_ulong(0); \
             assert libc.syscall(206, 1, ctypes.byref(c)) == 0; libc.syscall(207, c); print('ok')",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&host.stdout), "ok\n");
    others_are_served("true");
}

fn auto_of(workspace: &Path) -> Confinement {
    Confinement::WorkspaceWrite {
        workspace_root: workspace.to_path_buf(),
        network: false,
    }
}

#[test]
fn an_inotify_grab_ends_at_its_bound_while_the_host_and_another_command_are_served() {
    if !bounds_here("an_inotify_grab_ends_at_its_bound_while_the_host_and_another_command_are_served") {
        return;
    }
    // Reads its own limit first and takes nothing unless it is the bound
    // (a user has 128 instances; never more than 64 are tried); then
    // instances until refused, then watches on 1100 files of its scratch
    // directory until refused; holds them until the test lets it go.
    let dirs = dirs();
    let fifo = Fifo::new(&dirs.root.path().join("go"));
    let script = format!(
        r#"python3 -c "
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
limit = int(open('/proc/sys/user/max_inotify_instances').read())
if limit > 64:
    print('unbounded', limit, flush=True)
    raise SystemExit
instances = []
for _ in range(64):
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    instances.append(fd)
print('instances', len(instances), os.strerror(ctypes.get_errno()), flush=True)
watches = 0
for index in range(1100):
    path = os.path.join(os.environ['TMPDIR'], str(index))
    open(path, 'w').close()
    if libc.inotify_add_watch(instances[0], path.encode(), 2) < 0:
        break
    watches += 1
print('watches', watches, os.strerror(ctypes.get_errno()), flush=True)
open('{}').readline()
""#,
        dirs.root.path().join("go").display()
    );
    let (running, events) = start(bounded(&script, &dirs.scratch, small_bounds()));
    assert_eq!(
        stdout_line(&events, "instances "),
        "16 Too many open files",
        "{}",
        events.text(Stream::Stdout)
    );
    assert_eq!(stdout_line(&events, "watches "), "1000 No space left on device");
    // While it holds them: the host makes an instance, and so does another
    // command.
    let host = Command::new("python3")
        .args([
            "-c",
            "import ctypes, os; libc = ctypes.CDLL(None); fd = libc.inotify_init1(0); \
             assert fd >= 0; os.close(fd); print('ok')",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&host.stdout), "ok\n");
    others_are_served("python3 -c 'import ctypes; assert ctypes.CDLL(None).inotify_init1(0) >= 0'");
    fifo.send_line();
    let outcome = running.wait();
    assert_eq!(
        outcome.exit_code,
        Some(0),
        "{outcome:?} {}",
        events.text(Stream::Stderr)
    );
}

#[test]
fn open_files_are_bounded_per_process() {
    if !sandbox_available("open_files_are_bounded_per_process") {
        return;
    }
    for namespaces in namespace_modes() {
        let dirs = dirs();
        let mut spec = bounded("ulimit -Hn; ulimit -Sn", &dirs.scratch, small_bounds());
        spec.isolation.namespaces = namespaces;
        let (_, events) = run(spec);
        let limits: Vec<u64> = events
            .text(Stream::Stdout)
            .lines()
            .map(|line| line.parse().unwrap())
            .collect();
        assert_eq!(limits[0], 1024, "namespaces {namespaces}");
        assert!(limits[1] <= 1024, "namespaces {namespaces}");
        // Nor can the command raise it again.
        let mut spec = bounded("ulimit -Hn 4096", &dirs.scratch, small_bounds());
        spec.isolation.namespaces = namespaces;
        let (outcome, _) = run(spec);
        assert_ne!(outcome.exit_code, Some(0), "namespaces {namespaces}");
    }
}

#[test]
fn a_bound_out_of_range_runs_nothing() {
    let dirs = dirs();
    for bounds in [
        CommandBounds {
            tasks: Some(2),
            ..CommandBounds::default()
        },
        CommandBounds {
            memory_bytes: Some(1024),
            ..CommandBounds::default()
        },
        CommandBounds {
            inotify: Some(InotifyBound {
                instances: 0,
                watches: 1,
            }),
            ..CommandBounds::default()
        },
        CommandBounds {
            open_files: Some(1),
            ..CommandBounds::default()
        },
    ] {
        let marker = dirs.root.path().join("ran");
        let (outcome, _) = run(bounded(
            &format!("touch {}", marker.display()),
            &dirs.scratch,
            bounds,
        ));
        assert_eq!(outcome.state, CommandState::FailedToStart, "{bounds:?}");
        assert!(
            matches!(&outcome.error, Some(plan_exec::ExecError::InvalidSpec { reason }) if reason.contains("out of range")),
            "{:?}",
            outcome.error
        );
        assert!(!marker.exists());
    }
}

#[test]
fn the_commands_cgroup_is_gone_when_it_ends() {
    if !bounds_here("the_commands_cgroup_is_gone_when_it_ends") {
        return;
    }
    let dirs = dirs();
    let (outcome, events) = run(bounded("cat /proc/self/cgroup", &dirs.scratch, small_bounds()));
    assert_eq!(outcome.exit_code, Some(0));
    // Inside the command its own group (`plan-exec-...`) for each bound's
    // controller; once it has ended, no such group is left.
    let text = events.text(Stream::Stdout);
    let groups: Vec<&str> = text
        .lines()
        .filter_map(|line| line.rsplit_once(':').map(|(_, path)| path))
        .filter(|path| path.contains("/plan-exec-"))
        .collect();
    assert!(!groups.is_empty(), "{text}");
    for mount in std::fs::read_to_string("/proc/self/mountinfo").unwrap().lines() {
        let fields: Vec<&str> = mount.split(' ').collect();
        let is_cgroup = mount.contains(" - cgroup ") || mount.contains(" - cgroup2 ");
        if !is_cgroup {
            continue;
        }
        for group in &groups {
            let path = Path::new(fields[4]).join(group.trim_start_matches('/'));
            assert!(!path.exists(), "{} was left", path.display());
        }
    }
}

#[test]
fn a_host_that_is_not_root_gets_the_namespaces_and_the_bounds_kept_in_them() {
    use std::os::unix::process::CommandExt;
    if !sandbox_available("a_host_that_is_not_root_gets_the_namespaces_and_the_bounds_kept_in_them") {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        // Then every other test here already runs as a host that is not
        // root.
        eprintln!("not root: the other tests are this one");
        return;
    }
    // The helper's probe as an ordinary user (what such a user's host
    // runs; not `nobody`, whose ids are the kernel's overflow ids and so
    // would hide a mapping written with the wrong ones), in directories
    // of its own.
    const USER: u32 = 40_000;
    let dirs = dirs();
    for directory in [dirs.root.path(), dirs.scratch.as_path()] {
        std::os::unix::fs::chown(directory, Some(USER), Some(USER)).unwrap();
    }
    let output = Command::new(env!("CARGO_BIN_EXE_plan-exec-sandbox"))
        .args(["probe", "--scratch"])
        .arg(&dirs.scratch)
        .arg("--outside")
        .arg(dirs.root.path())
        .env_clear()
        .current_dir("/")
        .uid(USER)
        .gid(USER)
        .output()
        .unwrap();
    let answer = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = answer.lines().collect();
    let user_namespaces = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
        .is_ok_and(|count| count.trim() != "0")
        && std::fs::read_to_string("/proc/sys/kernel/unprivileged_userns_clone")
            .map_or(true, |allowed| allowed.trim() == "1");
    if !user_namespaces {
        assert_eq!(lines.first(), Some(&"available"), "{answer}");
        eprintln!("this kernel gives users no user namespaces: checked without");
        return;
    }
    assert_eq!(lines.first(), Some(&"available namespaces"), "{answer}");
    assert!(lines.contains(&"mechanism user-namespace-limits"), "{answer}");
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut parts = release.split('.').map(|part| part.parse::<u32>().unwrap_or(0));
    if (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (6, 14) {
        assert!(lines.contains(&"mechanism pid-max"), "{answer}");
    }
}

#[test]
fn a_cgroup_a_killed_supervisor_left_is_removed_by_the_next_probe() {
    if !bounds_here("a_cgroup_a_killed_supervisor_left_is_removed_by_the_next_probe") {
        return;
    }
    // Where this machine puts a command's group: beside the one a command
    // sees itself in, in the memory and pids hierarchies (or the v2 one).
    let dirs = dirs();
    let (_, events) = run(bounded("cat /proc/self/cgroup", &dirs.scratch, small_bounds()));
    let text = events.text(Stream::Stdout);
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    // A group named for a supervisor that cannot exist (beyond any
    // pid_max), as a killed one leaves it, beside each of them.
    let mut left = Vec::new();
    for line in text.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next(), fields.next().unwrap(), fields.next().unwrap());
        if !path.contains("/plan-exec-") {
            continue;
        }
        let controllers: Vec<&str> = controllers.split(',').filter(|name| !name.is_empty()).collect();
        let mount = mountinfo.lines().find(|mount| {
            let options = mount.rsplit(' ').next().unwrap_or("");
            if controllers.is_empty() {
                mount.contains(" - cgroup2 ")
            } else {
                mount.contains(" - cgroup ")
                    && controllers
                        .iter()
                        .any(|name| options.split(',').any(|option| option == *name))
            }
        });
        let Some(mount) = mount else { continue };
        let point = Path::new(mount.split(' ').nth(4).unwrap());
        let parent = Path::new(path).parent().unwrap().strip_prefix("/").unwrap();
        let stale = point.join(parent).join("plan-exec-4194305-0");
        if std::fs::create_dir(&stale).is_ok() {
            left.push(stale);
        }
    }
    assert!(!left.is_empty(), "no group of its own: {text}");
    assert!(matches!(
        runner().sandbox_support(),
        plan_exec::SandboxSupport::Available { .. }
    ));
    for stale in left {
        assert!(!stale.exists(), "{} was left", stale.display());
    }
}
