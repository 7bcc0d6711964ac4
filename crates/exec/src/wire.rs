//! The private conversation between the library and its sandbox helper:
//! the argument vectors of the helper's modes and the one-line reports sent
//! back over the lifeline socket.
//!
//! Both ends live in this crate and change together; nothing here is a
//! public or stable format, and nothing here decides anything.

use std::ffi::{OsStr, OsString};
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage,
    SendFlags,
};
use std::time::Duration;

use crate::outcome::ExecError;
use crate::spec::{CommandBounds, InotifyBound, ScratchCap};

/// The confinement as the helper receives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    None,
    ReadOnly,
    WorkspaceWrite { workspace_root: PathBuf, network: bool },
}

/// Everything the confining stage needs to restrict itself and exec the
/// shell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ConfineArgs {
    pub(crate) expected_parent: u32,
    pub(crate) mode: Mode,
    /// The scratch directory's path (its `TMPDIR`); the directory itself
    /// arrives as a descriptor (see [`send_scratch`]).
    pub(crate) scratch_dir: PathBuf,
    pub(crate) shell: PathBuf,
    pub(crate) command: OsString,
    /// The command's whole environment. It travels as arguments, never as
    /// the helper's own environment: no helper stage runs with a variable
    /// of the host's (a loader variable naming a workspace library would
    /// run workspace code, unconfined, in the stages before the sandbox).
    pub(crate) env: Vec<(OsString, OsString)>,
    /// Whether to enter namespaces and build the private mount tree.
    pub(crate) namespaces: bool,
    /// The directory holding every command's scratch directory, hidden
    /// (except the command's own) inside the namespaces.
    pub(crate) scratch_root: Option<PathBuf>,
    /// Paths covered by something empty and read-only.
    pub(crate) hidden: Vec<PathBuf>,
    /// Extra paths kept read-only inside a writable workspace.
    pub(crate) protected: Vec<PathBuf>,
    /// Paths kept read-only inside a writable workspace, and reserved
    /// there where missing.
    pub(crate) reserved: Vec<PathBuf>,
    /// Names kept read-only wherever they are in a writable workspace, and
    /// reserved at its root where missing.
    pub(crate) protected_names: Vec<OsString>,
    /// Names hidden wherever they are in the workspace (and reserved at
    /// the root of a writable one).
    pub(crate) hidden_names: Vec<OsString>,
    /// Directories bound back into a hidden directory that holds them.
    pub(crate) visible: Vec<PathBuf>,
    /// The cap of the private scratch tmpfs inside the namespaces.
    pub(crate) scratch_cap: ScratchCap,
    /// What the command may take from the machine.
    pub(crate) bounds: CommandBounds,
}

/// Everything the supervisor needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SuperviseArgs {
    pub(crate) host_pid: u32,
    pub(crate) timeout: Duration,
    pub(crate) grace: Duration,
    pub(crate) cwd: PathBuf,
    pub(crate) confine: ConfineArgs,
}

pub(crate) const MODE_SUPERVISE: &str = "supervise";
pub(crate) const MODE_CONFINE: &str = "confine";
pub(crate) const MODE_PROBE: &str = "probe";
pub(crate) const MODE_NETWORK: &str = "network";

/// The probe's names of the mechanisms that bound what a command takes.
pub(crate) const MECHANISM_MEMORY_CGROUP: &str = "memory-cgroup";
pub(crate) const MECHANISM_PIDS_CGROUP: &str = "pids-cgroup";
pub(crate) const MECHANISM_PID_MAX: &str = "pid-max";
pub(crate) const MECHANISM_USER_NAMESPACE_LIMITS: &str = "user-namespace-limits";

fn push_confine(args: &ConfineArgs, out: &mut Vec<OsString>) {
    out.push("--scratch".into());
    out.push(args.scratch_dir.clone().into_os_string());
    match &args.mode {
        Mode::None => out.push("--none".into()),
        Mode::ReadOnly => out.push("--read-only".into()),
        Mode::WorkspaceWrite {
            workspace_root,
            network,
        } => {
            out.push("--workspace".into());
            out.push(workspace_root.clone().into_os_string());
            if *network {
                out.push("--network".into());
            }
        }
    }
    if args.namespaces {
        out.push("--namespaces".into());
    }
    if let Some(root) = &args.scratch_root {
        out.push("--scratch-root".into());
        out.push(root.clone().into_os_string());
    }
    for path in &args.hidden {
        out.push("--hide".into());
        out.push(path.clone().into_os_string());
    }
    for path in &args.protected {
        out.push("--protect".into());
        out.push(path.clone().into_os_string());
    }
    for path in &args.reserved {
        out.push("--reserve".into());
        out.push(path.clone().into_os_string());
    }
    for name in &args.protected_names {
        out.push("--protect-name".into());
        out.push(name.clone());
    }
    for name in &args.hidden_names {
        out.push("--hide-name".into());
        out.push(name.clone());
    }
    for path in &args.visible {
        out.push("--visible".into());
        out.push(path.clone().into_os_string());
    }
    out.push("--scratch-size".into());
    out.push(args.scratch_cap.size_bytes().to_string().into());
    out.push("--scratch-inodes".into());
    out.push(args.scratch_cap.inodes().to_string().into());
    let bounds = &args.bounds;
    for (flag, value) in [
        ("--tasks", bounds.tasks),
        ("--memory", bounds.memory_bytes),
        (
            "--inotify-instances",
            bounds.inotify.map(|inotify| inotify.instances),
        ),
        ("--inotify-watches", bounds.inotify.map(|inotify| inotify.watches)),
        ("--open-files", bounds.open_files),
    ] {
        if let Some(value) = value {
            out.push(flag.into());
            out.push(value.to_string().into());
        }
    }
    for (name, value) in &args.env {
        let mut entry = name.clone();
        entry.push("=");
        entry.push(value);
        out.push("--env".into());
        out.push(entry);
    }
    out.push("--shell".into());
    out.push(args.shell.clone().into_os_string());
    out.push("--".into());
    out.push(args.command.clone());
}

impl ConfineArgs {
    pub(crate) fn encode(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = vec![
            MODE_CONFINE.into(),
            "--parent".into(),
            self.expected_parent.to_string().into(),
        ];
        push_confine(self, &mut out);
        out
    }
}

impl SuperviseArgs {
    pub(crate) fn encode(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = vec![
            MODE_SUPERVISE.into(),
            "--parent".into(),
            self.host_pid.to_string().into(),
            "--timeout-ms".into(),
            millis(self.timeout).into(),
            "--grace-ms".into(),
            millis(self.grace).into(),
            "--cwd".into(),
            self.cwd.clone().into_os_string(),
        ];
        push_confine(&self.confine, &mut out);
        out
    }
}

/// Whole milliseconds, saturating at `u64::MAX` (which the helper treats as
/// "never").
fn millis(duration: Duration) -> String {
    u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .to_string()
}

/// Options of a helper stage, as parsed.
pub(crate) struct Decoded {
    pub(crate) timeout: Option<Duration>,
    pub(crate) grace: Option<Duration>,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) confine: ConfineArgs,
}

/// Parses the options after the mode word. Unknown or missing options are
/// an error: the helper is only ever started by this crate.
pub(crate) fn decode(args: &[OsString]) -> Result<Decoded, String> {
    let mut parent = None;
    let mut timeout = None;
    let mut grace = None;
    let mut cwd = None;
    let mut scratch = None;
    let mut mode = None;
    let mut network = false;
    let mut workspace = None;
    let mut shell = None;
    let mut command = None;
    let mut namespaces = false;
    let mut scratch_root = None;
    let mut hidden = Vec::new();
    let mut protected = Vec::new();
    let mut reserved = Vec::new();
    let mut protected_names = Vec::new();
    let mut hidden_names = Vec::new();
    let mut visible = Vec::new();
    let mut scratch_size = None;
    let mut scratch_inodes = None;
    let mut bounds = CommandBounds::default();
    let mut inotify_instances = None;
    let mut inotify_watches = None;
    let mut env = Vec::new();
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        let flag = flag.to_str().ok_or("non-UTF-8 option")?;
        let mut value = || {
            iter.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag {
            "--parent" => parent = Some(number(&value()?)?),
            "--timeout-ms" => timeout = Some(Duration::from_millis(number(&value()?)?)),
            "--grace-ms" => grace = Some(Duration::from_millis(number(&value()?)?)),
            "--cwd" => cwd = Some(PathBuf::from(value()?)),
            "--scratch" => scratch = Some(PathBuf::from(value()?)),
            "--none" => mode = Some(false),
            "--read-only" => mode = Some(true),
            "--workspace" => workspace = Some(PathBuf::from(value()?)),
            "--network" => network = true,
            "--shell" => shell = Some(PathBuf::from(value()?)),
            "--namespaces" => namespaces = true,
            "--scratch-root" => scratch_root = Some(PathBuf::from(value()?)),
            "--hide" => hidden.push(PathBuf::from(value()?)),
            "--protect" => protected.push(PathBuf::from(value()?)),
            "--reserve" => reserved.push(PathBuf::from(value()?)),
            "--protect-name" => protected_names.push(value()?),
            "--hide-name" => hidden_names.push(value()?),
            "--visible" => visible.push(PathBuf::from(value()?)),
            "--scratch-size" => scratch_size = Some(number(&value()?)?),
            "--scratch-inodes" => scratch_inodes = Some(number(&value()?)?),
            "--tasks" => bounds.tasks = Some(number(&value()?)?),
            "--memory" => bounds.memory_bytes = Some(number(&value()?)?),
            "--inotify-instances" => inotify_instances = Some(number(&value()?)?),
            "--inotify-watches" => inotify_watches = Some(number(&value()?)?),
            "--open-files" => bounds.open_files = Some(number(&value()?)?),
            "--env" => env.push(env_entry(&value()?)?),
            "--" => {
                command = Some(value()?);
                break;
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    let mode = match (mode, workspace) {
        (Some(false), None) => Mode::None,
        (Some(true), None) => Mode::ReadOnly,
        (None, Some(workspace_root)) => Mode::WorkspaceWrite {
            workspace_root,
            network,
        },
        (Some(_), Some(_)) | (None, None) => return Err("exactly one confinement is required".into()),
    };
    let parent = parent.ok_or("--parent is required")?;
    let (Some(scratch_size), Some(scratch_inodes)) = (scratch_size, scratch_inodes) else {
        return Err("--scratch-size and --scratch-inodes are required".into());
    };
    let scratch_cap = ScratchCap::new(scratch_size, scratch_inodes).map_err(|error| error.to_string())?;
    bounds.inotify = match (inotify_instances, inotify_watches) {
        (Some(instances), Some(watches)) => Some(InotifyBound { instances, watches }),
        (None, None) => None,
        (Some(_), None) | (None, Some(_)) => {
            return Err("--inotify-instances and --inotify-watches go together".into());
        }
    };
    bounds.check().map_err(|error| error.to_string())?;
    let confine = ConfineArgs {
        expected_parent: u32::try_from(parent).map_err(|_| "--parent out of range")?,
        mode,
        scratch_dir: scratch.ok_or("--scratch is required")?,
        shell: shell.ok_or("--shell is required")?,
        command: command.ok_or("the command is required")?,
        env,
        namespaces,
        scratch_root,
        hidden,
        protected,
        reserved,
        protected_names,
        hidden_names,
        visible,
        scratch_cap,
        bounds,
    };
    Ok(Decoded {
        timeout,
        grace,
        cwd,
        confine,
    })
}

/// `NAME=VALUE`, split at the first `=` (a name never holds one).
fn env_entry(entry: &OsStr) -> Result<(OsString, OsString), String> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = entry.as_bytes();
    let equals = bytes
        .iter()
        .position(|byte| *byte == b'=')
        .filter(|position| *position > 0)
        .ok_or("--env needs NAME=VALUE")?;
    Ok((
        OsStr::from_bytes(&bytes[..equals]).to_owned(),
        OsStr::from_bytes(&bytes[equals + 1..]).to_owned(),
    ))
}

fn number(value: &OsStr) -> Result<u64, String> {
    value
        .to_str()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| format!("not a number: {value:?}"))
}

/// The kinds of failure a helper stage reports before the shell runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FailKind {
    Sandbox,
    Shell,
    Cwd,
    Scratch,
    Spawn,
}

impl FailKind {
    pub(crate) fn word(self) -> &'static str {
        match self {
            FailKind::Sandbox => "sandbox",
            FailKind::Shell => "shell",
            FailKind::Cwd => "cwd",
            FailKind::Scratch => "scratch",
            FailKind::Spawn => "spawn",
        }
    }

    fn parse(word: &str) -> Option<Self> {
        [
            FailKind::Sandbox,
            FailKind::Shell,
            FailKind::Cwd,
            FailKind::Scratch,
            FailKind::Spawn,
        ]
        .into_iter()
        .find(|kind| kind.word() == word)
    }
}

/// A failure as one line: `<kind> <reason>`; newlines in the reason become
/// spaces.
pub(crate) fn failure_line(kind: FailKind, reason: &str) -> String {
    format!("{} {}\n", kind.word(), reason.replace('\n', " "))
}

/// Parses `<kind> <reason>`.
pub(crate) fn parse_failure(line: &str) -> Option<(FailKind, String)> {
    let (word, reason) = line.trim_end().split_once(' ').unwrap_or((line.trim_end(), ""));
    FailKind::parse(word).map(|kind| (kind, reason.to_owned()))
}

/// Maps a reported failure to the crate error, given the spec's paths.
pub(crate) fn failure_error(
    kind: FailKind,
    reason: String,
    shell: &std::path::Path,
    cwd: &std::path::Path,
    scratch: &std::path::Path,
) -> ExecError {
    match kind {
        FailKind::Sandbox => ExecError::SandboxUnavailable { reason },
        FailKind::Shell => ExecError::ShellUnavailable {
            shell: shell.to_path_buf(),
            reason,
        },
        FailKind::Cwd => ExecError::CwdUnavailable {
            cwd: cwd.to_path_buf(),
            reason,
        },
        FailKind::Scratch => ExecError::ScratchDirMissing {
            path: scratch.to_path_buf(),
        },
        FailKind::Spawn => ExecError::Spawn { reason },
    }
}

/// How the supervised shell ended, as the supervisor reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EndKind {
    Exited,
    TimedOut,
    Cancelled,
}

impl EndKind {
    fn word(self) -> &'static str {
        match self {
            EndKind::Exited => "exited",
            EndKind::TimedOut => "timed-out",
            EndKind::Cancelled => "cancelled",
        }
    }
}

/// A supervisor report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Report {
    End {
        kind: EndKind,
        exit_code: Option<i32>,
        signal: Option<i32>,
    },
    Fail {
        kind: FailKind,
        reason: String,
    },
}

fn optional(value: Option<i32>) -> String {
    value.map_or_else(|| "-".to_owned(), |value| value.to_string())
}

impl Report {
    pub(crate) fn line(&self) -> String {
        match self {
            Report::End {
                kind,
                exit_code,
                signal,
            } => {
                format!(
                    "end {} {} {}\n",
                    kind.word(),
                    optional(*exit_code),
                    optional(*signal)
                )
            }
            Report::Fail { kind, reason } => format!("fail {}", failure_line(*kind, reason)),
        }
    }

    pub(crate) fn parse(line: &str) -> Option<Self> {
        if let Some(rest) = line.strip_prefix("end ") {
            let mut words = rest.split_whitespace();
            let kind = match words.next()? {
                "exited" => EndKind::Exited,
                "timed-out" => EndKind::TimedOut,
                "cancelled" => EndKind::Cancelled,
                _ => return None,
            };
            let parse = |word: Option<&str>| -> Option<Option<i32>> {
                match word? {
                    "-" => Some(None),
                    number => number.parse().ok().map(Some),
                }
            };
            let exit_code = parse(words.next())?;
            let signal = parse(words.next())?;
            return Some(Report::End {
                kind,
                exit_code,
                signal,
            });
        }
        let (kind, reason) = parse_failure(line.strip_prefix("fail ")?)?;
        Some(Report::Fail { kind, reason })
    }
}

/// What the network stage writes on its stdout once its network namespace
/// exists (and, when not root, its user namespace with our ids mapped).
pub(crate) const NETWORK_NAMESPACE_READY: [u8; 1] = *b"+";

/// What the supervisor sends the confining stage once it is in the
/// command's cgroup (or needs none); the stage starts nothing before.
pub(crate) const CGROUP_READY: [u8; 1] = *b"C";

/// The one command the library sends the supervisor.
pub(crate) const CANCEL: &[u8] = b"cancel\n";

/// The byte that carries the directories' descriptors.
const HANDOVER_BYTE: u8 = b's';

/// The second byte's bits: which optional descriptors follow scratch and
/// cwd, in this order.
const HAS_WORKSPACE: u8 = 1;
const HAS_NETWORK: u8 = 2;
const HAS_NETWORK_USER: u8 = 4;

/// The most descriptors a handover carries.
const HANDOVER_MAX: usize = 5;

/// The directories a command is started with, as descriptors: the library
/// opened (or was given) each once, and the helper's stages act on these,
/// never on a path an earlier command could have swapped since.
pub(crate) struct Handover {
    /// The scratch directory the host made.
    pub(crate) scratch: OwnedFd,
    /// The working directory, resolved beneath the workspace.
    pub(crate) cwd: OwnedFd,
    /// The workspace root of a workspace-write confinement.
    pub(crate) workspace: Option<OwnedFd>,
    /// The network namespace a networked command joins (its session's,
    /// with a user-mode stack attached), and the user namespace that owns
    /// it when the host is not root.
    pub(crate) network: Option<(OwnedFd, Option<OwnedFd>)>,
}

/// Borrowed descriptors for [`send_handover`].
pub(crate) struct HandoverRef<'a> {
    pub(crate) scratch: BorrowedFd<'a>,
    pub(crate) cwd: BorrowedFd<'a>,
    pub(crate) workspace: Option<BorrowedFd<'a>>,
    pub(crate) network: Option<(BorrowedFd<'a>, Option<BorrowedFd<'a>>)>,
}

impl Handover {
    pub(crate) fn borrow(&self) -> HandoverRef<'_> {
        HandoverRef {
            scratch: self.scratch.as_fd(),
            cwd: self.cwd.as_fd(),
            workspace: self.workspace.as_ref().map(AsFd::as_fd),
            network: self
                .network
                .as_ref()
                .map(|(net, user)| (net.as_fd(), user.as_ref().map(AsFd::as_fd))),
        }
    }
}

/// Sends the descriptors over `socket` (the library to the supervisor, the
/// supervisor to the confining stage): the first two bytes on the socket
/// (a marker and which optional descriptors follow), with the descriptors
/// attached (`SCM_RIGHTS`): scratch, cwd, then the workspace, the network
/// namespace and its user namespace, each if there is one.
pub(crate) fn send_handover(socket: impl AsFd, handover: &HandoverRef<'_>) -> Result<(), String> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(HANDOVER_MAX))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let mut fds = vec![handover.scratch, handover.cwd];
    let mut present = 0;
    if let Some(workspace) = handover.workspace {
        present |= HAS_WORKSPACE;
        fds.push(workspace);
    }
    if let Some((net, user)) = handover.network {
        present |= HAS_NETWORK;
        fds.push(net);
        if let Some(user) = user {
            present |= HAS_NETWORK_USER;
            fds.push(user);
        }
    }
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err("the directories' descriptors do not fit the control message".into());
    }
    let sent = rustix::net::sendmsg(
        socket,
        &[IoSlice::new(&[HANDOVER_BYTE, present])],
        &mut control,
        SendFlags::NOSIGNAL,
    )
    .map_err(|error| format!("sending the directories' descriptors: {error}"))?;
    if sent == 2 {
        Ok(())
    } else {
        Err("the directories' descriptors were not sent".into())
    }
}

/// Receives what [`send_handover`] sent: exactly two bytes with the
/// descriptors they announce (close-on-exec).
pub(crate) fn receive_handover(socket: impl AsFd) -> Result<Handover, String> {
    let missing = || "the directories' descriptors did not arrive".to_owned();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(HANDOVER_MAX))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut bytes = [0_u8; 2];
    let received = rustix::net::recvmsg(
        socket,
        &mut [IoSliceMut::new(&mut bytes)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )
    .map_err(|error| format!("receiving the directories' descriptors: {error}"))?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    let [marker, present] = bytes;
    let announced = |bit: u8| usize::from(present & bit != 0);
    let expected = 2 + announced(HAS_WORKSPACE) + announced(HAS_NETWORK) + announced(HAS_NETWORK_USER);
    let consistent = present & !(HAS_WORKSPACE | HAS_NETWORK | HAS_NETWORK_USER) == 0
        && (present & HAS_NETWORK_USER == 0 || present & HAS_NETWORK != 0);
    if received.bytes != 2 || marker != HANDOVER_BYTE || !consistent || fds.len() != expected {
        return Err(missing());
    }
    let mut fds = fds.into_iter();
    let (Some(scratch), Some(cwd)) = (fds.next(), fds.next()) else {
        return Err(missing());
    };
    let workspace = if present & HAS_WORKSPACE != 0 {
        fds.next()
    } else {
        None
    };
    let network = match (present & HAS_NETWORK != 0, fds.next()) {
        (true, Some(net)) => Some((net, fds.next())),
        (_, _) => None,
    };
    Ok(Handover {
        scratch,
        cwd,
        workspace,
        network,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn confine(mode: Mode) -> ConfineArgs {
        ConfineArgs {
            expected_parent: 42,
            mode,
            scratch_dir: PathBuf::from("/tmp/scratch dir"),
            shell: PathBuf::from("/bin/bash"),
            command: OsString::from("echo -- --none\n'x'"),
            env: vec![
                (OsString::from("PATH"), OsString::from("/bin")),
                (OsString::from("ODD"), OsString::from("a=b --env \n")),
                (OsString::from("EMPTY"), OsString::new()),
            ],
            namespaces: true,
            scratch_root: Some(PathBuf::from("/tmp/scratch root")),
            hidden: vec![PathBuf::from("/db"), PathBuf::from("/db-wal")],
            protected: vec![PathBuf::from("/ws/extra")],
            reserved: vec![PathBuf::from("/ws/missing")],
            protected_names: vec![OsString::from(".claude"), OsString::from("odd\nname")],
            hidden_names: vec![OsString::from(".pi")],
            visible: vec![PathBuf::from("/ws")],
            scratch_cap: ScratchCap::new(1 << 20, 64).unwrap(),
            bounds: CommandBounds {
                tasks: Some(512),
                memory_bytes: Some(1 << 30),
                inotify: Some(InotifyBound {
                    instances: 8,
                    watches: 1000,
                }),
                open_files: Some(4096),
            },
        }
    }

    #[test]
    fn helper_arguments_round_trip() {
        for mode in [
            Mode::None,
            Mode::ReadOnly,
            Mode::WorkspaceWrite {
                workspace_root: PathBuf::from("/ws"),
                network: false,
            },
            Mode::WorkspaceWrite {
                workspace_root: PathBuf::from("/ws"),
                network: true,
            },
        ] {
            let args = SuperviseArgs {
                host_pid: 7,
                timeout: Duration::from_millis(1500),
                grace: Duration::from_millis(20),
                cwd: PathBuf::from("/cwd"),
                confine: ConfineArgs {
                    expected_parent: 7,
                    ..confine(mode.clone())
                },
            };
            let encoded = args.encode();
            let decoded = decode(&encoded[1..]).unwrap();
            assert_eq!(decoded.timeout, Some(args.timeout));
            assert_eq!(decoded.grace, Some(args.grace));
            assert_eq!(decoded.cwd, Some(args.cwd.clone()));
            assert_eq!(decoded.confine, args.confine);

            let confine = confine(mode);
            let decoded = decode(&confine.encode()[1..]).unwrap();
            assert_eq!((decoded.timeout, decoded.cwd), (None, None));
            assert_eq!(decoded.confine, confine);
        }
        assert!(decode(&["--bogus".into()]).is_err());
        for flag in [
            "--hide",
            "--protect",
            "--reserve",
            "--protect-name",
            "--hide-name",
            "--scratch-root",
            "--visible",
            "--scratch-size",
        ] {
            assert_eq!(
                decode(&[flag.into()]).err(),
                Some(format!("{flag} needs a value"))
            );
        }
        assert!(decode(&["--parent".into(), "1".into(), "--scratch".into(), "/s".into()]).is_err());
        // A zero cap (which tmpfs would read as no limit) never decodes.
        let mut encoded = confine(Mode::ReadOnly).encode();
        let size = encoded.iter().position(|arg| arg == "--scratch-size").unwrap();
        encoded[size + 1] = "0".into();
        assert!(decode(&encoded[1..]).err().unwrap().contains("out of range"));
        // No bound asked for travels as no flag at all; one out of its
        // range never decodes.
        let unbounded = ConfineArgs {
            bounds: CommandBounds::default(),
            ..confine(Mode::ReadOnly)
        };
        assert_eq!(decode(&unbounded.encode()[1..]).unwrap().confine, unbounded);
        let mut encoded = confine(Mode::ReadOnly).encode();
        let tasks = encoded.iter().position(|arg| arg == "--tasks").unwrap();
        encoded[tasks + 1] = "2".into();
        assert!(decode(&encoded[1..]).err().unwrap().contains("out of range"));
    }

    /// The identity of the file `fd` names.
    fn identity(fd: BorrowedFd<'_>) -> (u64, u64) {
        let stat = rustix::fs::fstat(fd).unwrap();
        (stat.st_dev, stat.st_ino)
    }

    #[test]
    fn a_handover_carries_exactly_the_descriptors_it_announces() {
        let directory =
            |path: &str| rustix::fs::open(path, rustix::fs::OFlags::PATH, rustix::fs::Mode::empty()).unwrap();
        let (scratch, cwd, workspace, net, user) = (
            directory("/"),
            directory("/tmp"),
            directory("/proc"),
            directory("/dev"),
            directory("/sys"),
        );
        let shapes = [
            (None, None),
            (Some(workspace.as_fd()), None),
            (None, Some((net.as_fd(), None))),
            (Some(workspace.as_fd()), Some((net.as_fd(), Some(user.as_fd())))),
        ];
        for (workspace, network) in shapes {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
            let sent = HandoverRef {
                scratch: scratch.as_fd(),
                cwd: cwd.as_fd(),
                workspace,
                network,
            };
            send_handover(&ours, &sent).unwrap();
            let received = receive_handover(&theirs).unwrap();
            let received = received.borrow();
            assert_eq!(identity(received.scratch), identity(scratch.as_fd()));
            assert_eq!(identity(received.cwd), identity(cwd.as_fd()));
            assert_eq!(received.workspace.map(identity), workspace.map(identity));
            assert_eq!(
                received
                    .network
                    .map(|(net, user)| (identity(net), user.map(identity))),
                network.map(|(net, user)| (identity(net), user.map(identity)))
            );
        }
    }

    #[test]
    fn a_handover_whose_descriptors_differ_from_its_announcement_is_refused() {
        let root = rustix::fs::open("/", rustix::fs::OFlags::PATH, rustix::fs::Mode::empty()).unwrap();
        // (bytes, how many descriptors): a user namespace without a
        // network, an unknown bit, one descriptor too few or too many.
        let cases: [([u8; 2], usize); 5] = [
            ([HANDOVER_BYTE, HAS_NETWORK_USER], 3),
            ([HANDOVER_BYTE, 8], 2),
            ([HANDOVER_BYTE, HAS_WORKSPACE], 2),
            ([HANDOVER_BYTE, 0], 3),
            ([b'x', 0], 2),
        ];
        for (bytes, count) in cases {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
            let fds = vec![root.as_fd(); count];
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(HANDOVER_MAX))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            assert!(control.push(SendAncillaryMessage::ScmRights(&fds)));
            rustix::net::sendmsg(&ours, &[IoSlice::new(&bytes)], &mut control, SendFlags::NOSIGNAL).unwrap();
            assert!(receive_handover(&theirs).is_err(), "{bytes:?} with {count}");
        }
    }

    #[test]
    fn reports_round_trip() {
        let reports = [
            Report::End {
                kind: EndKind::Exited,
                exit_code: Some(0),
                signal: None,
            },
            Report::End {
                kind: EndKind::TimedOut,
                exit_code: None,
                signal: Some(15),
            },
            Report::End {
                kind: EndKind::Cancelled,
                exit_code: Some(-1),
                signal: Some(9),
            },
            Report::Fail {
                kind: FailKind::Sandbox,
                reason: "Landlock: no ABI 3".into(),
            },
            Report::Fail {
                kind: FailKind::Scratch,
                reason: String::new(),
            },
        ];
        for report in reports {
            assert_eq!(Report::parse(&report.line()), Some(report));
        }
        assert_eq!(failure_line(FailKind::Shell, "a\nb"), "shell a b\n");
        assert_eq!(Report::parse("end exploded 0 -\n"), None);
        assert_eq!(Report::parse("garbage\n"), None);
    }
}
