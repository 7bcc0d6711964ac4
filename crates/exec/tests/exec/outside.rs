//! Nothing outside the command's own tree is touched (P4, P6 and the
//! socketpair half of P5), even where Landlock has no rule: a canary process
//! the test started keeps its resource limits, nice value, scheduler policy,
//! CPU affinity and I/O priority; System V IPC objects and a POSIX message
//! queue the test created survive and none can be created; no lock or lease
//! can be taken on a file the test created. Each probe is shown to work
//! without a sandbox, on a second canary, so the checks can fail.

use std::process::{Child, Command};

use plan_exec::{CommandState, Confinement, Stream};

use crate::support::*;

/// The confinements every probe runs under, each without and (where the
/// kernel allows them) with namespaces: these properties must hold either way.
/// The network option exists only inside namespaces (without them it is
/// refused: a command never shares the host's network).
fn cases(workspace: &std::path::Path) -> Vec<(Confinement, bool)> {
    namespace_modes()
        .into_iter()
        .flat_map(|namespaces| {
            confinements(workspace)
                .into_iter()
                .filter(move |confinement| {
                    namespaces || !matches!(confinement, Confinement::WorkspaceWrite { network: true, .. })
                })
                .map(move |confinement| (confinement, namespaces))
        })
        .collect()
}

fn with_namespaces(mut spec: plan_exec::CommandSpec, namespaces: bool) -> plan_exec::CommandSpec {
    spec.isolation.namespaces = namespaces;
    spec
}

fn confinements(workspace: &std::path::Path) -> Vec<Confinement> {
    vec![
        Confinement::ReadOnly,
        Confinement::WorkspaceWrite {
            workspace_root: workspace.to_path_buf(),
            network: false,
        },
        Confinement::WorkspaceWrite {
            workspace_root: workspace.to_path_buf(),
            network: true,
        },
    ]
}

/// A process the test owns, in a process group of its own, killed and
/// reaped when dropped.
struct Canary(Child);

impl Canary {
    fn start() -> Self {
        let mut command = Command::new("sleep");
        command.arg("600");
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        Canary(command.spawn().unwrap())
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Everything the probes could change, as text.
    fn state(&self) -> String {
        let pid = self.pid();
        let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        // Fields after the command name: nice is the 19th field overall.
        let after_name = stat.rsplit_once(')').unwrap().1;
        let nice = after_name.split_whitespace().nth(16).unwrap().to_owned();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let affinity = status
            .lines()
            .find(|line| line.starts_with("Cpus_allowed_list:"))
            .unwrap()
            .to_owned();
        let tool = |program: &str, args: &[&str]| {
            let output = Command::new(program).args(args).output().unwrap();
            String::from_utf8_lossy(&output.stdout).into_owned()
        };
        let policy = tool("chrt", &["-p", &pid.to_string()]);
        let ioprio = tool("ionice", &["-p", &pid.to_string()]);
        format!("{limits}\nnice={nice}\n{affinity}\n{policy}\n{ioprio}")
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Commands that would change a canary's limits, priority, scheduling,
/// affinity or I/O priority (by pid, and by process group).
fn process_probes(pid: u32) -> String {
    format!(
        "prlimit --pid {pid} --nofile=7:7; \
         prlimit --pid {pid} --fsize=0:0; \
         renice -n 7 -p {pid}; \
         renice -n 9 -g {pid}; \
         chrt -b -p 0 {pid}; \
         taskset -p -c 0 {pid}; \
         ionice -c 3 -p {pid}; \
         ionice -c 2 -n 7 -P {pid}; \
         true"
    )
}

#[test]
fn no_limit_priority_schedule_or_affinity_change_reaches_a_process_outside() {
    if !sandbox_available("no_limit_priority_schedule_or_affinity_change_reaches_a_process_outside") {
        return;
    }
    let dirs = dirs();
    let workspace = dirs.root.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let mut failures = Vec::new();
    for (confinement, namespaces) in cases(&workspace) {
        let canary = Canary::start();
        let before = canary.state();
        let (outcome, events) = run(with_namespaces(
            spec(
                &process_probes(canary.pid()),
                &dirs.scratch,
                &dirs.scratch,
                confinement.clone(),
            ),
            namespaces,
        ));
        assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
        let after = canary.state();
        if after != before {
            failures.push(format!(
                "{confinement:?} (namespaces {namespaces}) changed the canary:\n{before}\n---\n{after}\n{}",
                events.text(Stream::Stderr)
            ));
        }
    }
    // The same probes change a canary when nothing confines them.
    let control = Canary::start();
    let before = control.state();
    let (outcome, _) = run(spec(
        &process_probes(control.pid()),
        &dirs.scratch,
        &dirs.scratch,
        Confinement::None,
    ));
    assert_eq!(outcome.exit_code, Some(0));
    assert_ne!(
        control.state(),
        before,
        "the probes change nothing even unconfined"
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn the_command_may_still_change_its_own_priority_limits_and_affinity() {
    if !sandbox_available("the_command_may_still_change_its_own_priority_limits_and_affinity") {
        return;
    }
    let dirs = dirs();
    let (outcome, events) = run(spec(
        "set -e; ulimit -n 64; nice -n 3 true; taskset -c 0 true; ionice -c 3 true; \
         python3 -c \"import os; os.setpriority(os.PRIO_PROCESS, 0, 5); print(os.getpriority(os.PRIO_PROCESS, 0))\"",
        &dirs.scratch,
        &dirs.scratch,
        Confinement::ReadOnly,
    ));
    assert_eq!(outcome.exit_code, Some(0), "{}", events.text(Stream::Stderr));
    assert_eq!(events.text(Stream::Stdout), "5\n");
}

/// One System V object the test created: kind letter for ipcrm/ipcs and id.
struct Ipc {
    kind: &'static str,
    id: String,
}

impl Ipc {
    fn create(kind: &'static str) -> Self {
        let flag = match kind {
            "m" => "-M",
            "q" => "-Q",
            _ => "-S",
        };
        let mut args = vec![flag];
        if flag != "-Q" {
            args.push(if flag == "-M" { "4096" } else { "1" });
        }
        let output = Command::new("ipcmk").args(&args).output().unwrap();
        assert!(output.status.success(), "ipcmk {args:?}");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let id = text.rsplit(':').next().unwrap().trim().to_owned();
        Ipc { kind, id }
    }

    /// Whether `ipcs` still lists it (its exit status says nothing: the id
    /// is the second column of the listing).
    fn exists(&self) -> bool {
        let output = Command::new("ipcs")
            .arg(format!("-{}", self.kind))
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .any(|line| line.split_whitespace().nth(1) == Some(self.id.as_str()))
    }

    fn remove_command(&self) -> String {
        format!("ipcrm -{} {}", self.kind, self.id)
    }
}

impl Drop for Ipc {
    fn drop(&mut self) {
        let _ = Command::new("ipcrm")
            .args([&format!("-{}", self.kind), &self.id])
            .output();
    }
}

/// A python script that creates a POSIX message queue named `created`,
/// sends on and unlinks `existing`, and prints what each call returned.
fn mq_script(created: &str, existing: &str) -> String {
    format!(
        "python3 -c \"
import ctypes, os
rt = ctypes.CDLL('librt.so.1', use_errno=True)
rt.mq_open.restype = ctypes.c_int
new = rt.mq_open(b'{created}', os.O_CREAT | os.O_RDWR, 0o600, None)
old = rt.mq_open(b'{existing}', os.O_WRONLY)
sent = rt.mq_send(old, b'x', 1, 0) if old >= 0 else -1
gone = rt.mq_unlink(b'{existing}')
rt.mq_unlink(b'{created}')
print(new >= 0, old >= 0, sent == 0, gone == 0)
\""
    )
}

fn mq_exists(name: &str) -> bool {
    let output = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import ctypes, os, sys\nrt = ctypes.CDLL('librt.so.1')\nsys.exit(0 if rt.mq_open(b'{name}', os.O_RDONLY) >= 0 else 1)"
        ))
        .output()
        .unwrap();
    output.status.success()
}

fn mq_create(name: &str) {
    let output = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import ctypes, os, sys\nrt = ctypes.CDLL('librt.so.1')\nsys.exit(0 if rt.mq_open(b'{name}', os.O_CREAT | os.O_RDWR, 0o600, None) >= 0 else 1)"
        ))
        .output()
        .unwrap();
    assert!(output.status.success(), "creating the message queue {name}");
}

fn mq_remove(name: &str) {
    let _ = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import ctypes\nctypes.CDLL('librt.so.1').mq_unlink(b'{name}')"
        ))
        .output();
}

#[test]
fn no_system_v_ipc_or_posix_message_queue_outside_is_touched_or_created() {
    if !sandbox_available("no_system_v_ipc_or_posix_message_queue_outside_is_touched_or_created") {
        return;
    }
    let dirs = dirs();
    let workspace = dirs.root.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let tag = std::process::id();
    let mut failures = Vec::new();
    for (index, (confinement, namespaces)) in cases(&workspace).into_iter().enumerate() {
        let objects = [Ipc::create("m"), Ipc::create("q"), Ipc::create("s")];
        let existing = format!("/plan-exec-test-{tag}-{index}");
        mq_create(&existing);
        let mut command: Vec<String> = objects.iter().map(Ipc::remove_command).collect();
        command.push("ipcmk -M 4096 && echo created-shm".into());
        command.push("ipcmk -Q && echo created-queue".into());
        command.push(mq_script(
            &format!("/plan-exec-test-{tag}-{index}-new"),
            &existing,
        ));
        let (outcome, events) = run(with_namespaces(
            spec(
                &command.join("; "),
                &dirs.scratch,
                &dirs.scratch,
                confinement.clone(),
            ),
            namespaces,
        ));
        assert_eq!(outcome.state, CommandState::Exited, "{outcome:?}");
        let stdout = events.text(Stream::Stdout);
        if stdout != "False False False False\n" {
            failures.push(format!("{confinement:?} (namespaces {namespaces}): {stdout}"));
        }
        for object in &objects {
            if !object.exists() {
                failures.push(format!("{confinement:?} removed {}", object.remove_command()));
            }
        }
        if !mq_exists(&existing) {
            failures.push(format!("{confinement:?} unlinked the message queue"));
        }
        mq_remove(&existing);
    }
    // Unconfined, the same removal works.
    let control = [Ipc::create("m"), Ipc::create("q"), Ipc::create("s")];
    let existing = format!("/plan-exec-test-{tag}-control");
    mq_create(&existing);
    let mut command: Vec<String> = control.iter().map(Ipc::remove_command).collect();
    command.push(mq_script(
        &format!("/plan-exec-test-{tag}-control-new"),
        &existing,
    ));
    let (outcome, events) = run(spec(
        &command.join(" && "),
        &dirs.scratch,
        &dirs.scratch,
        Confinement::None,
    ));
    assert_eq!(outcome.exit_code, Some(0), "{}", events.text(Stream::Stderr));
    assert_eq!(events.text(Stream::Stdout), "True True True True\n");
    assert!(control.iter().all(|object| !object.exists()));
    mq_remove(&existing);
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Takes a flock, a POSIX read lock (what stalls SQLite's `-shm`), an OFD
/// lock and a read lease on `file`, and prints which succeeded.
fn lock_script(file: &str) -> String {
    format!(
        "python3 -c \"
import fcntl, os, struct
def attempt(call):
    try:
        call()
        return 'yes'
    except OSError:
        return 'no'
fd = os.open('{file}', os.O_RDONLY)
results = [
    attempt(lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)),
    attempt(lambda: fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)),
    attempt(lambda: fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack('hhqqi4x', fcntl.F_RDLCK, 0, 0, 0, 0))),
    attempt(lambda: fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)),
]
print(' '.join(results))
\""
    )
}

#[test]
fn a_plan_command_takes_no_lock_or_lease_on_a_file_outside() {
    if !sandbox_available("a_plan_command_takes_no_lock_or_lease_on_a_file_outside") {
        return;
    }
    let dirs = dirs();
    let file = dirs.root.path().join("plan.db-shm");
    std::fs::write(&file, b"canary").unwrap();
    let script = lock_script(&file.display().to_string());
    for namespaces in namespace_modes() {
        let (outcome, events) = run(with_namespaces(
            spec(&script, &dirs.scratch, &dirs.scratch, Confinement::ReadOnly),
            namespaces,
        ));
        assert_eq!(outcome.exit_code, Some(0), "{}", events.text(Stream::Stderr));
        assert_eq!(
            events.text(Stream::Stdout),
            "no no no no\n",
            "namespaces {namespaces}"
        );
    }
    let (outcome, events) = run(spec(&script, &dirs.scratch, &dirs.scratch, Confinement::None));
    assert_eq!(outcome.exit_code, Some(0), "{}", events.text(Stream::Stderr));
    assert_eq!(events.text(Stream::Stdout), "yes yes yes yes\n");
}
