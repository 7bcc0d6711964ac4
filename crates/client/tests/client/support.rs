//! A host in a temporary directory, served on a socket of its own, and
//! what the tests do as the person deciding.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};

use plan_client::{Client, LineTransport};
use plan_host::{Host, HostEvent, HostOptions, PlanApproval};
use plan_server::socket::SocketServer;

pub(crate) struct Served {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) host: Arc<Host>,
    pub(crate) server: SocketServer,
    pub(crate) socket: PathBuf,
    requested: Receiver<PlanApproval>,
}

impl Served {
    pub(crate) fn start() -> Served {
        Served::with(HostOptions::default())
    }

    pub(crate) fn with(options: HostOptions) -> Served {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("project")).unwrap();
        let host = Arc::new(Host::open(dir.path().join("plan.db"), options).unwrap());
        let (sender, requested) = channel();
        let sender = std::sync::Mutex::new(sender);
        host.add_listener(Arc::new(move |event: HostEvent| {
            if let HostEvent::ApprovalRequested(approval) = event {
                let _ = sender.lock().unwrap().send(approval);
            }
        }));
        let socket = dir.path().join("sockets").join("host.sock");
        let server = SocketServer::start(&host, None, &socket).unwrap();
        Served {
            dir,
            host,
            server,
            socket,
            requested,
        }
    }

    pub(crate) fn project(&self) -> String {
        self.dir
            .path()
            .join("project")
            .canonicalize()
            .unwrap()
            .display()
            .to_string()
    }

    pub(crate) fn client(&self) -> Client {
        Client::connect(LineTransport::connect(&self.socket).unwrap(), "plan-client tests").unwrap()
    }

    /// The next plan submitted, as the host announced it.
    pub(crate) fn next_requested(&self) -> PlanApproval {
        self.requested.recv().unwrap()
    }
}
