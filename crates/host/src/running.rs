//! What the host keeps about host-run commands: the runner and the sandbox
//! probe's verdict (found once at open), and one slot per running command.
//!
//! Values and the probe only: carrying out commands is `commands.rs`, which
//! sits above the event loop; this module sits below it, so the loop's state
//! can hold these without importing the module that uses the loop.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use plan_core::{CallId, CommandRun, MissingBound, ResourceBound, ResourceBounds, SessionId};
use plan_exec::{
    Availability, BoundSupport, CancelHandle, CommandBounds, CommandOutcome, InotifyBound, Isolation,
    NetworkNamespace, Runner, SandboxSupport, ScratchCap, ScratchDir, ScratchRoot, WorkspaceDir,
};

use crate::sync::lock;
use crate::types::HostOptions;

/// A running command's key: session id and call id.
pub(crate) type CommandKey = (SessionId, CallId);

/// The runner, the probe's verdict and the scratch root.
pub(crate) struct CommandSupport {
    /// `None` when the helper or the scratch root was refused: no command
    /// runs then.
    pub(crate) runner: Option<Runner>,
    /// Why the kernel sandbox is unavailable; `None` when the probe found
    /// it working (what [`crate::Host::command_capabilities`] reports).
    pub(crate) unavailable_reason: Option<String>,
    /// The probe found namespaces usable and the host did not skip them.
    pub(crate) namespaces: bool,
    /// Which bounds the probe found this machine gives a command; `None`
    /// without a working sandbox.
    pub(crate) bound_support: Option<BoundSupport>,
    /// What each command may take from the machine (plan-core's values).
    pub(crate) resource_bounds: ResourceBounds,
    /// The database's path with its directory resolved (no symlink, so it
    /// can be compared with the real workspace root and cwd).
    pub(crate) database: PathBuf,
    pub(crate) protected_paths: Vec<PathBuf>,
    /// Present whenever `runner` is.
    pub(crate) scratch_root: Option<ScratchRoot>,
    pub(crate) output_cap: u64,
    pub(crate) grace: Duration,
    pub(crate) scratch_cap: ScratchCap,
    /// The per-user directory every host's default scratch root lies in,
    /// and where each host registers its database: inside the namespaces a
    /// command sees neither another host's scratch directories nor any
    /// registered database (another project's transcripts included).
    pub(crate) hosts_directory: Option<PathBuf>,
    /// Each session's workspace, opened once: when the session is created
    /// where its directory exists, else (a session of an earlier host, or
    /// one whose directory appeared later) at its first command here, and
    /// then only if it is the directory the session first bound (its
    /// identity is kept in the database, see `HostCore::bound_workspace`).
    /// Every later command's root and working directory come from that
    /// descriptor, so renaming or replacing the directory cannot move them.
    pub(crate) workspaces: Mutex<HashMap<String, WorkspaceDir>>,
    /// Each session's network namespace with its user-mode stack, made at
    /// its first networked command and joined by every later one: the
    /// stack starts once per session, and sessions never share one.
    pub(crate) networks: Mutex<HashMap<String, NetworkNamespace>>,
}

/// The name of the registry of databases in the per-user directory.
const DATABASES: &str = "databases";

/// Registers `resolved` (the database at `database`) in the per-user
/// directory of hosts (the parent of every default scratch root, private
/// to the user), so that every host hides it from its commands; returns
/// that directory. Best effort: a host that cannot register still runs,
/// and its own database is hidden from its own commands as always.
fn register_database(database: &Path, resolved: &Path) -> Option<PathBuf> {
    let hosts = ScratchRoot::default_for(database).parent()?.to_path_buf();
    let registry = ScratchRoot::open(&hosts.join(DATABASES)).ok()?;
    let name = ScratchRoot::default_for(resolved).file_name()?.to_owned();
    let entry = registry.path().join(name);
    let text = resolved.as_os_str().as_encoded_bytes();
    if std::fs::read(&entry).ok().as_deref() != Some(text) {
        let _ = std::fs::write(&entry, text);
    }
    Some(hosts)
}

/// Every database registered in `hosts` that still exists, but `own`.
fn registered_databases(hosts: &Path, own: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(hosts.join(DATABASES)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| std::fs::read(entry.path()).ok())
        .map(|bytes| PathBuf::from(std::ffi::OsString::from_vec(bytes)))
        .filter(|database| database.is_absolute() && database != own && database.exists())
        .collect()
}

/// `database` with its directory made absolute and resolved where it
/// exists (it does once the store is open).
fn resolved_database(database: &Path) -> PathBuf {
    let absolute = std::path::absolute(database).unwrap_or_else(|_| database.to_path_buf());
    match (absolute.parent(), absolute.file_name()) {
        (Some(directory), Some(name)) => std::fs::canonicalize(directory)
            .map_or_else(|_| absolute.clone(), |directory| directory.join(name)),
        _ => absolute,
    }
}

impl CommandSupport {
    /// Opens and checks the scratch root and the helper, probes the
    /// sandbox once and empties the scratch root (no command of an earlier
    /// process survives, so everything there is stale: part of the startup
    /// fence). A refused root or helper leaves the host without commands
    /// (`PLAN_SANDBOX_UNAVAILABLE` / `SANDBOX_UNAVAILABLE`, the reason in
    /// `initialize`); it never makes the host fail to open.
    pub(crate) fn open(options: &HostOptions, database: &Path) -> CommandSupport {
        let resolved = resolved_database(database);
        let unavailable = |reason: String| CommandSupport {
            runner: None,
            unavailable_reason: Some(reason),
            namespaces: false,
            bound_support: None,
            resource_bounds: options.limits.commands.bounds,
            database: resolved.clone(),
            protected_paths: options.protected_paths.clone(),
            scratch_root: None,
            output_cap: options.command_output_cap,
            grace: options.command_grace,
            scratch_cap: options.scratch_size.cap(),
            workspaces: Mutex::default(),
            networks: Mutex::default(),
            hosts_directory: None,
        };
        let root_path = options
            .scratch_root
            .clone()
            .unwrap_or_else(|| ScratchRoot::default_for(database));
        let scratch_root = match ScratchRoot::open(&root_path) {
            Ok(root) => root,
            Err(error) => return unavailable(format!("the scratch root is refused: {error}")),
        };
        // What cannot be swept now stays where no command can reach it:
        // every command gets a fresh directory and the root is private.
        let _ = scratch_root.sweep();
        // The helper is opened and checked once, here; every command runs
        // that opened file. Without one no command runs, sandboxed or not.
        let runner = match &options.sandbox_helper {
            Some(helper) => Runner::open(helper),
            None => Runner::beside_current_exe(),
        };
        let runner = match runner {
            Ok(runner) => runner,
            Err(error) => return unavailable(error.to_string()),
        };
        let mut namespaces = false;
        let mut bound_support = None;
        let unavailable_reason = match runner.sandbox_support() {
            SandboxSupport::Available {
                namespaces: found,
                bounds,
            } => {
                namespaces = found && !options.skip_namespaces;
                bound_support = Some(bounds);
                None
            }
            SandboxSupport::Unavailable { reason } => Some(reason),
        };
        let hosts_directory = register_database(database, &resolved);
        CommandSupport {
            hosts_directory,
            runner: Some(runner),
            unavailable_reason,
            namespaces,
            bound_support,
            resource_bounds: options.limits.commands.bounds,
            database: resolved,
            protected_paths: options.protected_paths.clone(),
            scratch_root: Some(scratch_root),
            output_cap: options.command_output_cap,
            grace: options.command_grace,
            scratch_cap: options.scratch_size.cap(),
            workspaces: Mutex::default(),
            networks: Mutex::default(),
        }
    }

    /// The network namespace of `session_id` (see
    /// [`CommandSupport::networks`]), made now if it has none or its stack
    /// is gone; `None` when it cannot be made.
    pub(crate) fn network(&self, session_id: &str) -> Option<NetworkNamespace> {
        let runner = self.runner.as_ref()?;
        let mut networks = lock(&self.networks);
        if let Some(network) = networks.get(session_id).filter(|network| network.is_alive()) {
            return Some(network.clone());
        }
        let made = NetworkNamespace::start(runner).ok()?;
        networks.insert(session_id.to_owned(), made.clone());
        Some(made)
    }

    pub(crate) fn sandbox_available(&self) -> bool {
        self.unavailable_reason.is_none()
    }

    /// Whether sandboxed commands run inside their namespaces.
    pub(crate) fn namespaces_available(&self) -> bool {
        self.sandbox_available() && self.namespaces
    }

    /// How each bound of P16 that a probe decides stands here: available,
    /// or unavailable with why (with the namespaces commands will have).
    fn bound_availability(&self) -> Vec<(ResourceBound, Availability)> {
        let Some(support) = &self.bound_support else {
            return Vec::new();
        };
        let namespaces = self.namespaces_available();
        vec![
            (ResourceBound::Processes, support.tasks(namespaces)),
            (ResourceBound::Memory, support.memory()),
            (ResourceBound::Inotify, support.inotify(namespaces)),
        ]
    }

    /// The bounds this machine cannot give a command, and why (what
    /// `initialize` reports; plan-core's `missing_bounds` fact).
    pub(crate) fn missing_bounds(&self) -> Vec<MissingBound> {
        self.bound_availability()
            .into_iter()
            .filter_map(|(bound, availability)| match availability {
                Availability::Available => None,
                Availability::Unavailable { reason } => Some(MissingBound {
                    bound: bound.as_str().to_owned(),
                    reason,
                }),
            })
            .collect()
    }

    /// The bounds a sandboxed command asks plan-exec to keep: plan-core's
    /// values, for every bound this machine gives (one it cannot give is
    /// reported missing instead, and a command runs without it).
    fn command_bounds(&self) -> CommandBounds {
        let values = &self.resource_bounds;
        let mut bounds = CommandBounds {
            open_files: Some(values.open_files()),
            ..CommandBounds::default()
        };
        for (bound, availability) in self.bound_availability() {
            if !availability.is_available() {
                continue;
            }
            match bound {
                ResourceBound::Processes => bounds.tasks = Some(values.tasks()),
                ResourceBound::Memory => bounds.memory_bytes = Some(values.memory_bytes()),
                ResourceBound::Inotify => {
                    bounds.inotify = Some(InotifyBound {
                        instances: values.inotify_instances(),
                        watches: values.inotify_watches(),
                    });
                }
                ResourceBound::OpenFiles
                | ResourceBound::Aio
                | ResourceBound::Keys
                | ResourceBound::MachineAddresses => {}
            }
        }
        bounds
    }

    /// Whether the database lies directly in `directory` (a resolved path).
    pub(crate) fn database_in(&self, directory: &Path) -> bool {
        self.database.parent() == Some(directory)
    }

    /// What a sandboxed command's namespaces hide and protect. The database
    /// must not be readable (P8) nor writable (P7) from any sandbox: its
    /// directory, the database and its side files are hidden and the files
    /// kept read-only. Where the directory holds the workspace or the
    /// scratch root (a database in `/tmp` or in the home directory beside
    /// the project), only those stay visible inside it; everything else
    /// there disappears. Two directories are never hidden: the root
    /// directory and the workspace root itself (a database directly in the
    /// workspace, where `auto` is refused), where only the files are. Where the directory lies
    /// inside the workspace (but is not its root) it is also kept
    /// read-only, so an `auto` command cannot plant a journal beside the
    /// database. The names every workspace protects, hides and reserves
    /// are plan-core's, handed to plan-exec as data, and the person's
    /// protected paths are reserved where missing (P15).
    pub(crate) fn isolation(&self, workspace_root: &Path) -> Isolation {
        let side_files: Vec<PathBuf> = ["", "-wal", "-shm", "-journal"]
            .iter()
            .map(|suffix| {
                let mut name = self.database.as_os_str().to_owned();
                name.push(suffix);
                PathBuf::from(name)
            })
            .collect();
        let mut protected = side_files.clone();
        let directory = self.database.parent();
        if let Some(directory) = directory
            && directory.starts_with(workspace_root)
            && directory != workspace_root
        {
            protected.push(directory.to_path_buf());
        }
        if let Some(runner) = &self.runner {
            protected.push(runner.helper().to_path_buf());
        }
        // The directory first: the files below it are then already gone,
        // and stay covered where a visible path brings them back.
        let mut hidden: Vec<PathBuf> = directory
            .filter(|directory| directory.parent().is_some() && *directory != workspace_root)
            .map(Path::to_path_buf)
            .into_iter()
            .collect();
        hidden.extend(side_files);
        // Other hosts' databases (their transcripts) and scratch roots: the
        // per-user directory holds every default scratch root (this host's
        // own stays visible to its command through the cover's bind-back).
        if let Some(hosts) = &self.hosts_directory {
            for other in registered_databases(hosts, &self.database) {
                let other_directory = other.parent().filter(|directory| {
                    directory.parent().is_some()
                        && *directory != workspace_root
                        && !workspace_root.starts_with(directory)
                });
                hidden.extend(other_directory.map(Path::to_path_buf));
                for suffix in ["", "-wal", "-shm", "-journal"] {
                    let mut name = other.as_os_str().to_owned();
                    name.push(suffix);
                    hidden.push(PathBuf::from(name));
                }
            }
            hidden.push(hosts.clone());
        }
        Isolation {
            namespaces: self.namespaces_available(),
            scratch_root: self.scratch_root.as_ref().map(|root| root.path().to_path_buf()),
            hidden,
            protected,
            // The person's protected paths are reserved where missing (P15).
            reserved: self.protected_paths.clone(),
            // plan-core's names, as data: the checkpoint's directory is
            // hidden wherever a project has one (a nested project's
            // database and plans, whether or not a host of its runs), the
            // repository's metadata and every agent's configuration kept
            // read-only at any depth, each reserved at the root.
            protected_names: plan_core::protected_root_names()
                .filter(|name| *name != plan_core::CHECKPOINT_DIRECTORY)
                .map(OsString::from)
                .collect(),
            hidden_names: vec![OsString::from(plan_core::CHECKPOINT_DIRECTORY)],
            visible: vec![workspace_root.to_path_buf()],
            scratch_cap: self.scratch_cap,
            bounds: self.command_bounds(),
        }
    }
}

/// The outcome of a command, handed from its watcher thread to whoever
/// records the end (the watcher itself, or a `turn/cancel` waiting for it).
#[derive(Default)]
pub(crate) struct Done {
    outcome: Mutex<Option<CommandOutcome>>,
    ready: Condvar,
}

impl Done {
    pub(crate) fn set(&self, outcome: CommandOutcome) {
        *lock(&self.outcome) = Some(outcome);
        self.ready.notify_all();
    }

    pub(crate) fn wait(&self) -> CommandOutcome {
        let mut outcome = lock(&self.outcome);
        loop {
            if let Some(outcome) = outcome.as_ref() {
                return outcome.clone();
            }
            outcome = self
                .ready
                .wait(outcome)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

/// One running command.
pub(crate) struct CommandSlot {
    /// The run as it started.
    pub(crate) run: CommandRun,
    /// Its own scratch directory, removed once its end is recorded.
    pub(crate) scratch: ScratchDir,
    /// The ended run and output hash, once an attempt to record them
    /// failed: a retry writes exactly these.
    pub(crate) ended: Option<(CommandRun, String)>,
    /// Cancels it from any thread.
    pub(crate) cancel: CancelHandle,
    /// Where its watcher hands over the outcome.
    pub(crate) done: Arc<Done>,
}
