//! The local socket transport: protocol v9 JSON-RPC, one message per line
//! as on stdio, over a Unix socket that only the user can open, for clients
//! that come and go (an agent's short-lived hook processes) while one host
//! holds the database.
//!
//! The socket lives in a directory of the user's that is private (0700,
//! checked, never through a symlink) and is itself 0600; commands never
//! reach it (`sandbox.md` P11: the directory is hidden inside their
//! namespaces, and without namespaces they may make no Unix socket at
//! all). Every connection is a [`Connection`] of its own on the one host,
//! with its own writer thread; the host's notifications go to every
//! connection open at the time. This module frames lines and accepts
//! connections; every answer comes from [`Connection`].

use std::io::BufReader;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use plan_host::{Host, HostEvent};
use plan_protocol::{MessageLimits, Notification};
use serde_json::Value;

use crate::connection::{Connection, INTERNAL_ERROR_LINE};
use crate::inbound::{Incoming, next_message};
use crate::outbound::{Notifier, Outbound};
use crate::web::WebCard;

/// The socket server of one host: its accept thread runs until
/// [`SocketServer::stop`] (or the process ends).
pub struct SocketServer {
    path: PathBuf,
    stopping: Arc<AtomicBool>,
    shared: Arc<Shared>,
}

struct Shared {
    host: Arc<Host>,
    web: Option<Arc<WebCard>>,
    /// The notifier of every open connection.
    subscribers: Mutex<Vec<(u64, Notifier)>>,
    next_id: AtomicU64,
    /// Connections open now.
    open: AtomicU64,
}

impl SocketServer {
    /// Listens on `path` for `host` (with its card server `web`, whose URL
    /// `plan/approvalRequested` carries). The directory holding `path` is
    /// made 0700 where missing and must be the user's, private and no
    /// symlink; a socket left at `path` by a host that is gone is replaced,
    /// one another host still answers on is refused.
    ///
    /// # Errors
    ///
    /// What went wrong, for the caller to report.
    pub fn start(host: &Arc<Host>, web: Option<Arc<WebCard>>, path: &Path) -> std::io::Result<SocketServer> {
        let directory = path
            .parent()
            .ok_or_else(|| std::io::Error::other("the socket path has no directory"))?;
        private_directory(directory)?;
        if std::fs::symlink_metadata(path).is_ok() {
            if UnixStream::connect(path).is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!("another host answers on {}", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        let shared = Arc::new(Shared {
            host: Arc::clone(host),
            web,
            subscribers: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
            open: AtomicU64::new(0),
        });
        let weak = Arc::downgrade(&shared);
        host.add_listener(Arc::new(move |event: HostEvent| broadcast(&weak, event)));
        let stopping = Arc::new(AtomicBool::new(false));
        std::thread::Builder::new().name("plan-socket".into()).spawn({
            let shared = Arc::clone(&shared);
            let stopping = Arc::clone(&stopping);
            move || accept(&listener, &shared, &stopping)
        })?;
        Ok(SocketServer {
            path: path.to_path_buf(),
            stopping,
            shared,
        })
    }

    /// How many clients are connected now.
    pub fn connections(&self) -> u64 {
        self.shared.open.load(Ordering::SeqCst)
    }

    /// Stops accepting and removes the socket file; open connections end
    /// when their clients close them.
    pub fn stop(&self) {
        if self.stopping.swap(true, Ordering::SeqCst) {
            return;
        }
        // The accept thread waits in accept(): one connection wakes it.
        let _ = UnixStream::connect(&self.path);
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for SocketServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Makes `directory` (0700) where missing; refuses one that is a symlink,
/// not the user's or open to others.
fn private_directory(directory: &Path) -> std::io::Result<()> {
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(directory)
    {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(error),
    }
    let metadata = std::fs::symlink_metadata(directory)?;
    let own = metadata.uid() == rustix::process::geteuid().as_raw();
    if !metadata.is_dir() || !own || metadata.mode() & 0o077 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} must be a directory of this user with no access for others (mode 0700)",
                directory.display()
            ),
        ));
    }
    Ok(())
}

fn accept(listener: &UnixListener, shared: &Arc<Shared>, stopping: &AtomicBool) {
    for incoming in listener.incoming() {
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = incoming else {
            continue;
        };
        let shared = Arc::clone(shared);
        let _ = std::thread::Builder::new()
            .name("plan-socket-client".into())
            .spawn(move || serve_client(&shared, stream));
    }
}

/// One client: its requests in order, its answers and every notification
/// of the host while it is connected, until it closes its end.
fn serve_client(shared: &Arc<Shared>, stream: UnixStream) {
    let Ok(writer) = stream.try_clone() else {
        return;
    };
    let Ok(outbound) = Outbound::spawn(writer) else {
        return;
    };
    let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
    shared.open.fetch_add(1, Ordering::SeqCst);
    lock(&shared.subscribers).push((id, outbound.notifier()));
    let budget = MessageLimits::for_markdown_limit(shared.host.limits().markdown_limit_bytes());
    let mut connection = Connection::with_web(Arc::clone(&shared.host), shared.web.clone());
    let mut input = BufReader::new(stream);
    loop {
        match next_message(&mut input, budget) {
            Ok(Incoming::Eof) | Err(_) => break,
            Ok(Incoming::Blank) => {}
            Ok(Incoming::Refused(request, error)) => {
                let response = plan_protocol::Response::error(request, error);
                outbound.line(
                    serde_json::to_string(&response).unwrap_or_else(|_| INTERNAL_ERROR_LINE.to_owned()),
                );
            }
            Ok(Incoming::Message(message)) => {
                if let Some(reply) = connection.handle_message(message) {
                    outbound.line(to_line(&reply));
                }
            }
        }
        outbound.flush_queued();
    }
    lock(&shared.subscribers).retain(|(subscriber, _)| *subscriber != id);
    shared.open.fetch_sub(1, Ordering::SeqCst);
    outbound.finish(std::time::Duration::from_secs(5));
}

fn to_line(reply: &Value) -> String {
    serde_json::to_string(reply).unwrap_or_else(|_| INTERNAL_ERROR_LINE.to_owned())
}

/// Sends a host event, as its protocol notification, to every connection.
fn broadcast(shared: &Weak<Shared>, event: HostEvent) {
    let Some(shared) = shared.upgrade() else {
        return;
    };
    let web = shared.web.as_ref().map(Arc::downgrade);
    let notification = WebCard::notification_of(web.as_ref(), event);
    let Ok(line) = serde_json::to_string(&Notification::new(notification)) else {
        return;
    };
    for (_, notifier) in lock(&shared.subscribers).iter() {
        notifier.notify(line.clone());
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
