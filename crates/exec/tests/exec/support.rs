//! Shared helpers: a runner for the built helper, specs, collected events,
//! fixtures, tree snapshots, process liveness and the events tests wait on
//! (output arriving, a line through a FIFO, a process ending). Every wait
//! here ends on its event; its time limit is only a liveness guard against
//! a hang, never what the test waits for.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use plan_exec::{
    CommandOutcome, CommandSpec, CommandState, Confinement, ExecError, Isolation, OutputEvent, Runner,
    RunningCommand, SandboxSupport, ScratchDir, Stream,
};

pub(crate) fn runner() -> Runner {
    Runner::open(env!("CARGO_BIN_EXE_plan-exec-sandbox")).unwrap()
}

/// A spec with the test's PATH (so python3 and git resolve as for the
/// test), a 60 s timeout and a 300 ms grace.
pub(crate) fn spec(command: &str, cwd: &Path, scratch: &Path, confinement: Confinement) -> CommandSpec {
    CommandSpec {
        shell: PathBuf::from("/bin/bash"),
        command: command.to_owned(),
        cwd: cwd.to_path_buf(),
        workspace: None,
        env: vec![("PATH".into(), std::env::var_os("PATH").unwrap_or_default())],
        scratch: ScratchDir::open(scratch).unwrap(),
        timeout: Duration::from_secs(60),
        grace: Duration::from_millis(300),
        output_cap: plan_exec::DEFAULT_OUTPUT_CAP,
        confinement,
        isolation: Isolation {
            namespaces: namespaces_available(),
            ..host_isolation()
        },
        network: None,
    }
}

/// The isolation plan-host asks for, but for its paths: plan-core's names
/// (`.pi` hidden wherever it is, the repository's metadata and every
/// agent's configuration kept read-only at any depth, each reserved at the
/// root), without namespaces.
pub(crate) fn host_isolation() -> Isolation {
    Isolation {
        protected_names: [".git", ".claude", ".mcp.json", ".codex", ".gemini"]
            .into_iter()
            .map(Into::into)
            .collect(),
        hidden_names: vec![".pi".into()],
        ..Isolation::default()
    }
}

/// Whether the probe found namespaces usable here (then every sandboxed
/// command of these tests runs inside them).
pub(crate) fn namespaces_available() -> bool {
    matches!(support(), SandboxSupport::Available { namespaces: true, .. })
}

/// The namespace settings to run a property under: without them always
/// (what a kernel without namespaces gets), and with them where available.
pub(crate) fn namespace_modes() -> Vec<bool> {
    let mut modes = vec![false];
    if namespaces_available() {
        modes.push(true);
    } else {
        eprintln!("namespaces are unavailable here: only the mode without them is tested");
    }
    modes
}

/// Which bounds the probe found this machine gives a command.
pub(crate) fn bound_support() -> Option<plan_exec::BoundSupport> {
    match support() {
        SandboxSupport::Available { bounds, .. } => Some(bounds.clone()),
        SandboxSupport::Unavailable { .. } => None,
    }
}

fn support() -> &'static SandboxSupport {
    static SUPPORT: OnceLock<SandboxSupport> = OnceLock::new();
    SUPPORT.get_or_init(|| runner().sandbox_support())
}

/// How long a test waits for an event before it fails instead of hanging:
/// a liveness guard far beyond any expected wait, not a timing assertion.
pub(crate) const LIVENESS: Duration = Duration::from_secs(30);

/// The output events of a command, collected by its sink, which also wakes
/// every test thread waiting for one ([`Events::wait_for`]).
#[derive(Clone, Default)]
pub(crate) struct Events(Arc<(Mutex<Vec<OutputEvent>>, Condvar)>);

impl Events {
    pub(crate) fn sink(&self) -> impl FnMut(OutputEvent) + Send + 'static {
        let shared = Arc::clone(&self.0);
        move |event| {
            let (events, arrived) = &*shared;
            events.lock().unwrap().push(event);
            arrived.notify_all();
        }
    }

    pub(crate) fn all(&self) -> Vec<OutputEvent> {
        self.0.0.lock().unwrap().clone()
    }

    pub(crate) fn text(&self, stream: Stream) -> String {
        text_of(&self.all(), stream)
    }

    /// Waits, for at most [`LIVENESS`], until `found` finds what it looks
    /// for in the events so far; it is asked again on every new event.
    pub(crate) fn wait_for<T>(&self, mut found: impl FnMut(&[OutputEvent]) -> Option<T>) -> Option<T> {
        let (events, arrived) = &*self.0;
        let deadline = Instant::now() + LIVENESS;
        let mut events = events.lock().unwrap();
        loop {
            if let Some(value) = found(&events) {
                return Some(value);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            events = arrived.wait_timeout(events, left).unwrap().0;
        }
    }
}

fn text_of(events: &[OutputEvent], stream: Stream) -> String {
    events
        .iter()
        .filter(|event| event.stream == stream)
        .map(|event| event.chunk.as_str())
        .collect()
}

pub(crate) fn start(spec: CommandSpec) -> (RunningCommand, Events) {
    let events = Events::default();
    let running = runner().spawn(spec, events.sink());
    (running, events)
}

pub(crate) fn run(spec: CommandSpec) -> (CommandOutcome, Events) {
    let (running, events) = start(spec);
    (running.wait(), events)
}

/// A temporary directory with a scratch dir inside it.
pub(crate) struct Dirs {
    pub(crate) root: tempfile::TempDir,
    pub(crate) scratch: PathBuf,
}

pub(crate) fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let scratch = root.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    Dirs { root, scratch }
}

/// Whether the sandbox works here with its namespaces; says so, with what
/// is then `untested`, when it does not (see [`sandbox_available`]).
pub(crate) fn namespaces_here(untested: &str, test: &str) -> bool {
    if !sandbox_available(test) {
        return false;
    }
    if !namespaces_available() {
        eprintln!("{test}: the kernel gives no namespaces here; {untested}");
        return false;
    }
    true
}

/// Whether the sandbox works here. Where it does not, asserts that a
/// confined command fails with the distinct unavailable error instead of
/// running, and says so, so a test never passes by skipping silently.
pub(crate) fn sandbox_available(test: &str) -> bool {
    match support() {
        SandboxSupport::Available { .. } => true,
        SandboxSupport::Unavailable { reason } => {
            let dirs = dirs();
            let (outcome, _) = run(spec(
                "echo should-not-run",
                &dirs.scratch,
                &dirs.scratch,
                Confinement::ReadOnly,
            ));
            assert_eq!(outcome.state, CommandState::FailedToStart);
            assert!(
                matches!(outcome.error, Some(ExecError::SandboxUnavailable { .. })),
                "{:?}",
                outcome.error
            );
            eprintln!(
                "{test}: the sandbox is unavailable here ({reason}); asserted SANDBOX_UNAVAILABLE instead of running"
            );
            false
        }
    }
}

/// Runs a command outside any sandbox, for fixtures.
pub(crate) fn sh(cwd: &Path, command: &str) {
    let status = Command::new("/bin/bash")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", cwd)
        .status()
        .unwrap();
    assert!(status.success(), "fixture command failed: {command}");
}

/// Git identity and config for commands, so git needs no HOME config.
pub(crate) fn git_env(home: &Path) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    vec![
        ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
        ("HOME".into(), home.as_os_str().to_owned()),
        ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
        ("GIT_AUTHOR_NAME".into(), "t".into()),
        ("GIT_AUTHOR_EMAIL".into(), "t@example.invalid".into()),
        ("GIT_COMMITTER_NAME".into(), "t".into()),
        ("GIT_COMMITTER_EMAIL".into(), "t@example.invalid".into()),
    ]
}

/// A directory with files, a subdirectory, an empty directory and a git
/// repository with two commits and one uncommitted change.
pub(crate) fn populate(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    sh(
        dir,
        "set -e
         git init -q .
         git config user.name t; git config user.email t@example.invalid
         printf 'original\\n' > file.txt
         mkdir sub emptydir; printf 'nested\\n' > sub/inner.txt; touch emptydir/.keep; rm emptydir/.keep
         git add file.txt sub; git commit -qm one
         printf 'second\\n' > second.txt; git add second.txt; git commit -qm two
         printf 'dirty\\n' >> file.txt",
    );
}

/// Everything observable about a tree except access times: type, mode,
/// owner, size, inode, link count, modification and change times, content,
/// symlink targets and extended attributes.
pub(crate) type Snapshot = BTreeMap<PathBuf, String>;

pub(crate) fn snapshot(root: &Path) -> Snapshot {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, path: &Path, out: &mut Snapshot) {
    let metadata = std::fs::symlink_metadata(path).unwrap();
    let mut xattrs = Vec::new();
    let mut names = vec![0_u8; 4096];
    if let Ok(length) = rustix::fs::llistxattr(path, &mut names[..]) {
        for name in names[..length]
            .split(|byte| *byte == 0)
            .filter(|name| !name.is_empty())
        {
            let name = std::ffi::CString::new(name.to_vec()).unwrap();
            let mut value = vec![0_u8; 4096];
            let size = rustix::fs::lgetxattr(path, name.as_c_str(), &mut value[..]).unwrap_or(0);
            xattrs.push(format!("{name:?}={:?}", &value[..size]));
        }
    }
    let body = if metadata.is_file() {
        format!("{:?}", std::fs::read(path).unwrap())
    } else if metadata.file_type().is_symlink() {
        format!("-> {:?}", std::fs::read_link(path).unwrap())
    } else {
        String::new()
    };
    out.insert(
        path.strip_prefix(root).unwrap().to_path_buf(),
        format!(
            "mode={:o} uid={} gid={} size={} ino={} nlink={} mtime={}.{} ctime={}.{} xattrs={xattrs:?} {body}",
            metadata.mode(),
            metadata.uid(),
            metadata.gid(),
            metadata.size(),
            metadata.ino(),
            metadata.nlink(),
            metadata.mtime(),
            metadata.mtime_nsec(),
            metadata.ctime(),
            metadata.ctime_nsec(),
        ),
    );
    if metadata.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            walk(root, &entry.unwrap().path(), out);
        }
    }
}

/// Whether a process with this pid exists and is not a zombie.
pub(crate) fn alive(pid: i32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return false;
    };
    if rustix::process::test_kill_process(pid).is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.as_raw_nonzero())) {
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().chars().next());
            state != Some(Some('Z'))
        }
        Err(_) => false,
    }
}

/// Reads the pid a command wrote into a file before it ended (so the file
/// is whole: the command's end is the event the caller waited for).
pub(crate) fn read_pid(path: &Path) -> i32 {
    let text = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{}: no pid in {text:?}", path.display()))
}

/// Waits until the command's stdout has a whole line starting with
/// `prefix` and returns the rest of it (inside the namespaces a command's
/// scratch directory is its own, so what it tells the test comes this way).
pub(crate) fn stdout_line(events: &Events, prefix: &str) -> String {
    let line = events.wait_for(|events| {
        text_of(events, Stream::Stdout)
            .split_inclusive('\n')
            .filter_map(|line| line.strip_suffix('\n'))
            .find_map(|line| line.strip_prefix(prefix).map(str::to_owned))
    });
    line.unwrap_or_else(|| {
        panic!(
            "no line {prefix:?} in {:?} (stderr {:?})",
            events.text(Stream::Stdout),
            events.text(Stream::Stderr)
        )
    })
}

/// A FIFO the test holds open for reading and writing: a process opening
/// it never blocks, a line the test sends early waits in the pipe, nothing
/// blocks if the other side dies, and the test reads with a bounded wait.
/// A command waits for the test with `read -r _ < fifo` (the test
/// [`Fifo::send_line`]s) or tells it something with `echo ... > fifo` (the
/// test [`Fifo::receive`]s).
pub(crate) struct Fifo(File);

impl Fifo {
    pub(crate) fn new(path: &Path) -> Fifo {
        rustix::fs::mkfifoat(rustix::fs::CWD, path, rustix::fs::Mode::from_raw_mode(0o600))
            .unwrap_or_else(|error| panic!("mkfifo {}: {error}", path.display()));
        Fifo(File::options().read(true).write(true).open(path).unwrap())
    }

    /// Lets a reader past one `read`.
    pub(crate) fn send_line(&self) {
        (&self.0).write_all(b"\n").unwrap();
    }

    /// What a writer wrote (one write of at most a pipe buffer arrives
    /// whole), once it is there; `None` if nothing came within
    /// [`LIVENESS`].
    pub(crate) fn receive(&self) -> Option<String> {
        if !readable_within(&self.0, LIVENESS) {
            return None;
        }
        let mut buffer = [0_u8; 4096];
        let length = (&self.0).read(&mut buffer).unwrap();
        Some(String::from_utf8_lossy(&buffer[..length]).into_owned())
    }
}

/// A pidfd of the process `pid`, to be opened while the process is known to
/// live (so a later reuse of its pid cannot confuse the wait on it); `None`
/// if there is no such process (any more).
pub(crate) fn pidfd(pid: i32) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(pid)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

/// Whether the process of `pidfd` ends within `limit` (a pidfd becomes
/// readable when its process has ended, zombie or reaped).
pub(crate) fn ends_within(pidfd: &OwnedFd, limit: Duration) -> bool {
    readable_within(pidfd, limit)
}

fn readable_within(fd: impl std::os::fd::AsFd, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = rustix::event::Timespec::try_from(left).unwrap();
        let mut fds = [rustix::event::PollFd::new(&fd, rustix::event::PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(ready) => return ready > 0,
            Err(rustix::io::Errno::INTR) => continue,
            Err(error) => panic!("poll: {error}"),
        }
    }
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The processes of the command whose scratch directory is `scratch`, by
/// the `TMPDIR` in their environment (the helper's stages carry it too), as
/// `(pid here, pid in its own PID namespace)`. A zombie has no environment
/// left, so only living processes are listed. Inside namespaces the pid a
/// command writes (`$$`, `$!`) is the second one.
pub(crate) fn processes_of(scratch: &Path) -> Vec<(i32, i32)> {
    let mut marker = b"TMPDIR=".to_vec();
    marker.extend_from_slice(scratch.as_os_str().as_encoded_bytes());
    marker.push(0);
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        // The shell and what it starts carry the scratch directory as
        // `TMPDIR`; the helper's own stages (which get no environment) name
        // it in their arguments.
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let by_environment = environ
            .split_inclusive(|byte| *byte == 0)
            .any(|entry| entry == marker);
        let by_arguments = cmdline
            .split(|byte| *byte == 0)
            .any(|argument| argument == scratch.as_os_str().as_encoded_bytes());
        if !by_environment && !by_arguments {
            continue;
        }
        let Some((_, own)) = parent_and_own_pid(pid) else {
            continue;
        };
        out.push((pid, own));
    }
    out
}

/// A process's parent pid and its pid in its own PID namespace, from
/// `/proc/<pid>/status` (readable for as long as the process exists, in
/// the middle of an exec and as a zombie too).
fn parent_and_own_pid(pid: i32) -> Option<(i32, i32)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|values| values.split_whitespace().last())
            .and_then(|value| value.parse().ok())
    };
    Some((field("PPid:")?, field("NSpid:").unwrap_or(pid)))
}

/// The pid here of the process of the command in `scratch` that knows
/// itself as `own` (what it wrote as `$$` or `$!`). It is looked for among
/// [`processes_of`] and all their descendants (by parent pid): a job the
/// command has just started may be in the middle of its exec, when its
/// environment cannot be read, but it is its parent's child throughout.
pub(crate) fn outer_pid(scratch: &Path, own: i32) -> Option<i32> {
    let table: Vec<(i32, i32, i32)> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_string_lossy().parse::<i32>().ok())
        .filter_map(|pid| parent_and_own_pid(pid).map(|(parent, own)| (pid, parent, own)))
        .collect();
    let mut tree: BTreeSet<i32> = processes_of(scratch).into_iter().map(|(pid, _)| pid).collect();
    loop {
        let known = tree.len();
        for (pid, parent, _) in &table {
            if tree.contains(parent) {
                tree.insert(*pid);
            }
        }
        if tree.len() == known {
            break;
        }
    }
    table
        .into_iter()
        .find(|(pid, _, listed)| tree.contains(pid) && *listed == own)
        .map(|(pid, _, _)| pid)
}

/// Whether the command in `scratch` still has a living process that knows
/// itself as `own`.
pub(crate) fn alive_in(scratch: &Path, own: i32) -> bool {
    outer_pid(scratch, own).is_some_and(alive)
}

/// Copies an executable with `cp`, in a process of its own: a copy written
/// by this test process would hold a write descriptor that a child forked
/// meanwhile by another test thread keeps until its own exec, and running
/// the copy then fails with ETXTBSY ("Text file busy").
pub(crate) fn copy_executable(from: &std::path::Path, to: &std::path::Path) {
    let status = std::process::Command::new("cp")
        .arg("--")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cp {} {}: {status}",
        from.display(),
        to.display()
    );
}
