//! Shared helpers: a runner for the built helper, specs, collected events,
//! fixtures, tree snapshots and process liveness.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};
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
            ..Isolation::default()
        },
        network: None,
    }
}

/// Whether the probe found namespaces usable here (then every sandboxed
/// command of these tests runs inside them).
pub(crate) fn namespaces_available() -> bool {
    matches!(support(), SandboxSupport::Available { namespaces: true })
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

fn support() -> &'static SandboxSupport {
    static SUPPORT: OnceLock<SandboxSupport> = OnceLock::new();
    SUPPORT.get_or_init(|| runner().sandbox_support())
}

#[derive(Clone, Default)]
pub(crate) struct Events(Arc<Mutex<Vec<OutputEvent>>>);

impl Events {
    pub(crate) fn sink(&self) -> impl FnMut(OutputEvent) + Send + 'static {
        let events = Arc::clone(&self.0);
        move |event| events.lock().unwrap().push(event)
    }

    pub(crate) fn all(&self) -> Vec<OutputEvent> {
        self.0.lock().unwrap().clone()
    }

    pub(crate) fn text(&self, stream: Stream) -> String {
        self.all()
            .into_iter()
            .filter(|event| event.stream == stream)
            .map(|event| event.chunk)
            .collect()
    }
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

/// Polls until `check` holds, for at most `limit` (a liveness bound, not a
/// timing assertion).
pub(crate) fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    loop {
        if check() {
            return true;
        }
        if started.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reads a pid a command wrote into a file, waiting for it to appear.
pub(crate) fn read_pid(path: &Path) -> i32 {
    assert!(
        eventually(Duration::from_secs(20), || std::fs::read_to_string(path)
            .is_ok_and(|text| text.ends_with('\n'))),
        "{} never appeared",
        path.display()
    );
    std::fs::read_to_string(path).unwrap().trim().parse().unwrap()
}

/// Waits until the command's stdout has a whole line starting with
/// `prefix` and returns the rest of it (inside the namespaces a command's
/// scratch directory is its own, so what it tells the test comes this way).
pub(crate) fn stdout_line(events: &Events, prefix: &str) -> String {
    let find = || {
        events
            .text(Stream::Stdout)
            .split_inclusive('\n')
            .filter_map(|line| line.strip_suffix('\n'))
            .find_map(|line| line.strip_prefix(prefix).map(str::to_owned))
    };
    assert!(
        eventually(Duration::from_secs(20), || find().is_some()),
        "no line {prefix:?} in {:?}",
        events.text(Stream::Stdout)
    );
    find().unwrap_or_default()
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
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let own = status
            .lines()
            .find_map(|line| line.strip_prefix("NSpid:"))
            .and_then(|pids| pids.split_whitespace().last())
            .and_then(|pid| pid.parse().ok())
            .unwrap_or(pid);
        out.push((pid, own));
    }
    out
}

/// The pid here of the living process of the command in `scratch` that
/// knows itself as `own` (what it wrote as `$$` or `$!`).
pub(crate) fn outer_pid(scratch: &Path, own: i32) -> Option<i32> {
    processes_of(scratch)
        .into_iter()
        .find(|(_, listed)| *listed == own)
        .map(|(pid, _)| pid)
}

/// Whether the command in `scratch` still has a living process that knows
/// itself as `own`.
pub(crate) fn alive_in(scratch: &Path, own: i32) -> bool {
    outer_pid(scratch, own).is_some_and(alive)
}
