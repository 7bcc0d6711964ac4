//! No network in the sandbox: TCP and UDP to loopback listeners this test
//! owns never arrive (IPv4 and IPv6), unix sockets cannot be connected to,
//! datagram and raw socketpairs are refused; a stream socketpair still
//! works. Each probe is shown to arrive when run without a sandbox; with the
//! network option only the inet ones arrive.

use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::Path;

use plan_exec::{CommandState, Confinement, ExecError, Stream};

use crate::support::*;

struct Listeners {
    tcp4: TcpListener,
    tcp6: Option<TcpListener>,
    udp4: UdpSocket,
    unix_stream: UnixListener,
    unix_dgram: UnixDatagram,
}

impl Listeners {
    fn bind(dir: &Path) -> Self {
        let tcp4 = TcpListener::bind("127.0.0.1:0").unwrap();
        let tcp6 = TcpListener::bind("[::1]:0").ok();
        let udp4 = UdpSocket::bind("127.0.0.1:0").unwrap();
        let unix_stream = UnixListener::bind(dir.join("stream.sock")).unwrap();
        let unix_dgram = UnixDatagram::bind(dir.join("dgram.sock")).unwrap();
        for nonblocking in [tcp4.set_nonblocking(true), udp4.set_nonblocking(true)] {
            nonblocking.unwrap();
        }
        if let Some(tcp6) = &tcp6 {
            tcp6.set_nonblocking(true).unwrap();
        }
        unix_stream.set_nonblocking(true).unwrap();
        unix_dgram.set_nonblocking(true).unwrap();
        Self {
            tcp4,
            tcp6,
            udp4,
            unix_stream,
            unix_dgram,
        }
    }

    /// The probes: (name, command, what receives it).
    fn probes(&self, dir: &Path) -> Vec<(&'static str, String, Receiver)> {
        let tcp = self.tcp4.local_addr().unwrap().port();
        let udp = self.udp4.local_addr().unwrap().port();
        let stream = dir.join("stream.sock").display().to_string();
        let dgram = dir.join("dgram.sock").display().to_string();
        let mut probes = vec![
            (
                "bash /dev/tcp",
                format!("echo x > /dev/tcp/127.0.0.1/{tcp}"),
                Receiver::Tcp4,
            ),
            (
                "bash /dev/udp",
                format!("echo x > /dev/udp/127.0.0.1/{udp}"),
                Receiver::Udp4,
            ),
            (
                "python tcp",
                format!(
                    "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {tcp})).send(b'x')\""
                ),
                Receiver::Tcp4,
            ),
            (
                "python udp",
                format!(
                    "python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {udp}))\""
                ),
                Receiver::Udp4,
            ),
            (
                "python unix stream connect",
                format!(
                    "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{stream}'); s.send(b'x')\""
                ),
                Receiver::UnixStream,
            ),
            (
                "python unix datagram sendto",
                format!(
                    "python3 -c \"import socket; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'x', '{dgram}')\""
                ),
                Receiver::UnixDgram,
            ),
            (
                "python raw socketpair sendto",
                format!(
                    "python3 -c \"import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_RAW); a.sendto(b'x', '{dgram}')\""
                ),
                Receiver::UnixDgram,
            ),
            (
                "python datagram socketpair sendto",
                format!(
                    "python3 -c \"import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendto(b'x', '{dgram}')\""
                ),
                Receiver::UnixDgram,
            ),
        ];
        if let Some(tcp6) = &self.tcp6 {
            let port = tcp6.local_addr().unwrap().port();
            probes.push((
                "python tcp6",
                format!("python3 -c \"import socket; socket.create_connection(('::1', {port})).send(b'x')\""),
                Receiver::Tcp6,
            ));
        }
        probes
    }

    /// Whether anything arrived at `receiver` (consuming it).
    fn arrived(&self, receiver: Receiver) -> bool {
        let mut buffer = [0_u8; 16];
        let result = match receiver {
            Receiver::Tcp4 => self.tcp4.accept().map(|_| ()),
            Receiver::Tcp6 => self.tcp6.as_ref().unwrap().accept().map(|_| ()),
            Receiver::Udp4 => self.udp4.recv(&mut buffer).map(|_| ()),
            Receiver::UnixStream => self.unix_stream.accept().map(|_| ()),
            Receiver::UnixDgram => self.unix_dgram.recv(&mut buffer).map(|_| ()),
        };
        match result {
            Ok(()) => true,
            Err(error) if error.kind() == ErrorKind::WouldBlock => false,
            Err(error) => panic!("listener failed: {error}"),
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Receiver {
    Tcp4,
    Tcp6,
    Udp4,
    UnixStream,
    UnixDgram,
}

#[test]
fn no_connection_or_datagram_leaves_the_sandbox() {
    if !sandbox_available("no_connection_or_datagram_leaves_the_sandbox") {
        return;
    }
    let dirs = dirs();
    let listeners = Listeners::bind(dirs.root.path());
    let workspace = dirs.root.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let mut failures = Vec::new();
    for (name, command, receiver) in listeners.probes(dirs.root.path()) {
        for confinement in [
            Confinement::ReadOnly,
            Confinement::WorkspaceWrite {
                workspace_root: workspace.clone(),
                network: false,
            },
        ] {
            let (outcome, _) = run(spec(&command, &dirs.scratch, &dirs.scratch, confinement.clone()));
            assert_eq!(outcome.state, CommandState::Exited, "{name}: {outcome:?}");
            if outcome.exit_code == Some(0) {
                failures.push(format!("{name} under {confinement:?}: the client did not fail"));
            }
            if listeners.arrived(receiver) {
                failures.push(format!("{name} under {confinement:?}: it arrived"));
            }
        }
        // Without a sandbox the same probe arrives: the check above can
        // fail. With the network allowed, nothing arrives either: the
        // command has a network of its own, in which the host's loopback
        // (where these listeners are) does not exist.
        let (outcome, events) = run(spec(&command, &dirs.scratch, &dirs.scratch, Confinement::None));
        if !listeners.arrived(receiver) {
            failures.push(format!(
                "{name} unconfined: the control did not arrive ({outcome:?}, {})",
                events.text(Stream::Stderr)
            ));
        }
        let online = Confinement::WorkspaceWrite {
            workspace_root: workspace.clone(),
            network: true,
        };
        let (outcome, events) = run(spec(&command, &dirs.scratch, &dirs.scratch, online));
        if listeners.arrived(receiver) {
            failures.push(format!(
                "{name} with the network allowed: it reached the host's loopback ({outcome:?}, {})",
                events.text(Stream::Stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn a_local_stream_socketpair_still_works() {
    if !sandbox_available("a_local_stream_socketpair_still_works") {
        return;
    }
    let dirs = dirs();
    let (outcome, events) = run(spec(
        "python3 -c \"import socket; a, b = socket.socketpair(); a.send(b'paired'); print(b.recv(6).decode())\"",
        &dirs.scratch,
        &dirs.scratch,
        Confinement::ReadOnly,
    ));
    assert_eq!(outcome.exit_code, Some(0), "{}", events.text(Stream::Stderr));
    assert_eq!(events.text(Stream::Stdout), "paired\n");
}

#[test]
fn with_the_network_a_command_has_a_network_of_its_own_without_the_hosts_loopback() {
    if !sandbox_available("with_the_network_a_command_has_a_network_of_its_own_without_the_hosts_loopback") {
        return;
    }
    let dirs = dirs();
    let workspace = dirs.root.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    // A service of the host on loopback, as the approval card's server is.
    let card = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    card.set_nonblocking(true).unwrap();
    let port = card.local_addr().unwrap().port();
    let command = format!(
        "awk '$2 == \"00000000\" {{ print \"route \" $1 }}' /proc/net/route; \
         for host in 127.0.0.1 10.0.2.2; do \
           python3 -c \"import socket; socket.create_connection(('$host', {port}), timeout=5)\" 2>/dev/null \
             && echo reached-$host || echo refused-$host; \
         done"
    );
    let online = Confinement::WorkspaceWrite {
        workspace_root: workspace.clone(),
        network: true,
    };
    let mut spec = spec(&command, &workspace, &dirs.scratch, online);
    if !namespaces_available() {
        // A command never shares the host's network namespace: without
        // namespaces the option is refused, not run on the host's network.
        let (outcome, _) = run(spec);
        assert_eq!(outcome.state, CommandState::FailedToStart, "{outcome:?}");
        assert!(matches!(
            outcome.error,
            Some(ExecError::SandboxUnavailable { .. })
        ));
        eprintln!("namespaces are unavailable here: the network option is refused, as asserted");
        return;
    }
    spec.isolation.namespaces = true;
    let (outcome, events) = run(spec);
    if !std::path::Path::new("/usr/bin/slirp4netns").exists()
        && !std::path::Path::new("/usr/local/bin/slirp4netns").exists()
    {
        assert_eq!(outcome.state, CommandState::FailedToStart, "{outcome:?}");
        assert!(
            matches!(&outcome.error, Some(ExecError::SandboxUnavailable { reason }) if reason.contains("slirp4netns")),
            "{:?}",
            outcome.error
        );
        panic!(
            "slirp4netns is not installed: the network option is refused (as asserted), but its isolation is untested here"
        );
    }
    assert_eq!(
        outcome.state,
        CommandState::Exited,
        "{outcome:?}: {}",
        events.text(Stream::Stderr)
    );
    assert_eq!(
        events.text(Stream::Stdout),
        "route tap0\nrefused-127.0.0.1\nrefused-10.0.2.2\n",
        "{}",
        events.text(Stream::Stderr)
    );
    assert!(card.accept().is_err(), "a connection reached the host's service");
}

/// The network namespace a command sits in, as the kernel names it.
const NAMESPACE_OF_THE_SHELL: &str = "readlink /proc/self/ns/net";

/// Every process on the machine sitting in the network namespace `name`.
fn processes_in(name: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|entry| {
            std::fs::read_link(entry.path().join("ns/net")).is_ok_and(|link| link.to_string_lossy() == name)
        })
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_sessions_network_namespace_is_shared_by_its_commands_kept_from_others_and_ends_with_it() {
    if !sandbox_available(
        "a_sessions_network_namespace_is_shared_by_its_commands_kept_from_others_and_ends_with_it",
    ) || !namespaces_available()
    {
        return;
    }
    let dirs = dirs();
    let workspace = dirs.root.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let card = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    card.set_nonblocking(true).unwrap();
    let port = card.local_addr().unwrap().port();
    let online = Confinement::WorkspaceWrite {
        workspace_root: workspace.clone(),
        network: true,
    };
    let runner = runner();
    let session = plan_exec::NetworkNamespace::start(&runner).unwrap();
    let other = plan_exec::NetworkNamespace::start(&runner).unwrap();
    assert!(session.is_alive() && other.is_alive());
    let namespace_of = |network: Option<&plan_exec::NetworkNamespace>, command: &str| {
        let mut spec = spec(command, &workspace, &dirs.scratch, online.clone());
        spec.network = network.cloned();
        let (outcome, events) = run(spec);
        assert_eq!(
            outcome.exit_code,
            Some(0),
            "{outcome:?}: {}",
            events.text(Stream::Stderr)
        );
        events.text(Stream::Stdout).trim().to_owned()
    };
    let reach = format!(
        "{NAMESPACE_OF_THE_SHELL}; python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)\" 2>/dev/null && echo reached || echo refused"
    );
    let first = namespace_of(Some(&session), &reach);
    let second = namespace_of(Some(&session), NAMESPACE_OF_THE_SHELL);
    let others = namespace_of(Some(&other), NAMESPACE_OF_THE_SHELL);
    let own = namespace_of(None, NAMESPACE_OF_THE_SHELL);
    let hosts = std::fs::read_link("/proc/self/ns/net")
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let (shared, reached) = first.split_once('\n').expect("two lines");
    assert_eq!(
        reached, "refused",
        "a command of the session reached the host's loopback"
    );
    assert!(card.accept().is_err(), "a connection reached the host's service");
    assert_eq!(shared, second, "two commands of one session sit in one namespace");
    for (name, namespace) in [
        ("another session's", &others),
        ("a command's own", &own),
        ("the host's", &hosts),
    ] {
        assert_ne!(shared, namespace.as_str(), "the session's namespace is {name}");
    }
    // With its last handle the namespace ends, and its stack and holder
    // with it: nothing is left in it.
    assert!(
        !processes_in(shared).is_empty(),
        "the holder and the stack sit in it"
    );
    // The stack (in the host's namespace, named by the holder's) opens a
    // socket of the machine's for each connection a command makes: a
    // bounded number of them.
    let holders: Vec<String> = processes_in(shared)
        .into_iter()
        .map(|pid| format!("/proc/{pid}/ns/net"))
        .collect();
    let stacks: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == "slirp4netns")
                && std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                    cmdline
                        .split(|byte| *byte == 0)
                        .any(|argument| holders.iter().any(|holder| argument == holder.as_bytes()))
                })
        })
        .collect();
    assert_eq!(stacks.len(), 1, "{stacks:?}");
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", stacks[0])).unwrap();
    let open_files = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .unwrap()
        .split_whitespace()
        .nth(3)
        .unwrap()
        .to_owned();
    assert_eq!(open_files, "4096", "{limits}");
    let kept = session.clone();
    drop(session);
    assert!(kept.is_alive());
    drop(kept);
    assert_eq!(processes_in(shared), Vec::<String>::new());
    assert!(other.is_alive());
}

/// The machine's own IPv4 addresses but loopback, as its local routing
/// table lists them (`/proc/net/fib_trie`: an address line, then its
/// `/32 host LOCAL` leaf).
fn machine_addresses() -> Vec<std::net::Ipv4Addr> {
    let trie = std::fs::read_to_string("/proc/net/fib_trie").unwrap();
    let mut last = None;
    let mut found = Vec::new();
    for line in trie.lines() {
        if let Some(address) = line.trim_start().strip_prefix("|-- ") {
            last = address.trim().parse::<std::net::Ipv4Addr>().ok();
        } else if line.contains("/32 host LOCAL")
            && let Some(address) = last
            && !address.is_loopback()
            && !found.contains(&address)
        {
            found.push(address);
        }
    }
    found
}

#[test]
fn a_networked_command_reaches_none_of_the_machines_own_addresses() {
    if !sandbox_available("a_networked_command_reaches_none_of_the_machines_own_addresses")
        || !namespaces_here(
            "the network option is refused without them (asserted elsewhere)",
            "a_networked_command_reaches_none_of_the_machines_own_addresses",
        )
    {
        return;
    }
    let addresses = machine_addresses();
    assert!(
        !addresses.is_empty(),
        "this machine has no address but loopback: nothing here shows a command kept from them"
    );
    let dirs = dirs();
    let workspace = dirs.root.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let online = Confinement::WorkspaceWrite {
        workspace_root: workspace.clone(),
        network: true,
    };
    // A service of the person's on each address of the machine (what
    // `--web-bind` or a server on `0.0.0.0` is reached through), TCP and
    // UDP, owned by this test and gone with it.
    let services: Vec<(TcpListener, UdpSocket)> = addresses
        .iter()
        .map(|address| {
            let tcp = TcpListener::bind((*address, 0)).unwrap();
            tcp.set_nonblocking(true).unwrap();
            let udp = UdpSocket::bind((*address, 0)).unwrap();
            udp.set_nonblocking(true).unwrap();
            (tcp, udp)
        })
        .collect();
    let probes: String = services
        .iter()
        .map(|(tcp, udp)| {
            let tcp = tcp.local_addr().unwrap();
            let udp = udp.local_addr().unwrap();
            format!(
                "(('{}', {}), ('{}', {})), ",
                tcp.ip(),
                tcp.port(),
                udp.ip(),
                udp.port()
            )
        })
        .collect();
    // Every try says how it failed (or that it got through); a UDP
    // `connect` sends nothing, it only asks the namespace for a route,
    // which an address of the outside world (the documentation range) has.
    let command = format!(
        r#"python3 -c "
import errno, socket
def attempt(kind, target):
    try:
        if kind == 'tcp':
            socket.create_connection(target, timeout=5).close()
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.sendto(b'probe', target)
        return 'reached'
    except OSError as error:
        return errno.errorcode.get(error.errno, str(error.errno))
for tcp, udp in [{probes}]:
    print('tcp', attempt('tcp', tcp), 'udp', attempt('udp', udp))
outside = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
outside.connect(('198.51.100.7', 9))
print('outside routed')
""#
    );
    let (outcome, events) = run(spec(&command, &workspace, &dirs.scratch, online));
    if !Path::new("/usr/bin/slirp4netns").exists() && !Path::new("/usr/local/bin/slirp4netns").exists() {
        panic!("slirp4netns is not installed: the network option is refused, its isolation untested here");
    }
    assert_eq!(
        outcome.exit_code,
        Some(0),
        "{outcome:?}: {}",
        events.text(Stream::Stderr)
    );
    let expected: String = addresses
        .iter()
        .map(|_| "tcp EACCES udp EACCES\n")
        .chain(["outside routed\n"])
        .collect();
    assert_eq!(
        events.text(Stream::Stdout),
        expected,
        "{addresses:?}: {}",
        events.text(Stream::Stderr)
    );
    for (tcp, udp) in &services {
        assert!(
            tcp.accept().is_err(),
            "a connection reached {:?}",
            tcp.local_addr()
        );
        let mut buffer = [0_u8; 16];
        assert!(
            udp.recv(&mut buffer)
                .is_err_and(|error| error.kind() == ErrorKind::WouldBlock),
            "a datagram reached {:?}",
            udp.local_addr()
        );
    }
}
