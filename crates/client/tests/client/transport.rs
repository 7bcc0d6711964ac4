//! The socket and stdio transports carry the same protocol; refusals are
//! the host's canonical codes; a host that goes away is an error, not a
//! hang.

use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;

use plan_client::{Client, ClientError, LineTransport};
use plan_core::{ErrorCode, SessionId};
use plan_host::{Host, HostOptions};
use plan_protocol::{SessionCreateParams, SessionGetParams, ShellListParams};

use super::support::Served;

#[test]
fn a_refusal_carries_the_hosts_canonical_code_and_sentence() {
    let served = Served::start();
    let mut client = served.client();
    let refused = client
        .session_get(&SessionGetParams {
            session_id: SessionId::from("nobody".to_owned()),
        })
        .unwrap_err();
    assert_eq!(refused.code(), Some(ErrorCode::SessionNotFound));
    assert!(
        refused.text().starts_with("SESSION_NOT_FOUND: "),
        "{}",
        refused.text()
    );
    let ClientError::Refused { method, .. } = refused else {
        panic!("not a refusal: {refused:?}");
    };
    assert_eq!(method, "session/get");
    // The connection goes on after a refusal.
    assert!(!client.shell_list(&ShellListParams {}).unwrap().shells.is_empty());
}

#[test]
fn the_stdio_transport_speaks_the_same_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(Host::open(dir.path().join("plan.db"), HostOptions::default()).unwrap());
    let (client_reads, server_writes) = std::io::pipe().unwrap();
    let (server_reads, client_writes) = std::io::pipe().unwrap();
    let serving = std::thread::spawn({
        let host = Arc::clone(&host);
        move || {
            let mut connection = plan_server::Connection::new(host);
            let mut output = server_writes;
            for line in BufReader::new(server_reads).lines() {
                if let Some(reply) = connection.handle_line(&line.unwrap()) {
                    writeln!(output, "{reply}").unwrap();
                }
            }
        }
    });
    let transport = LineTransport::from_stdio(client_reads, client_writes).unwrap();
    let mut client = Client::connect(transport, "stdio test").unwrap();
    assert_eq!(client.initialize_result().unwrap().protocol_version, 9);
    let session = client
        .session_create(&SessionCreateParams {
            session_id: Some(SessionId::from("s".to_owned())),
            workspace_root: None,
            mode: None,
            permission_mode: None,
        })
        .unwrap();
    assert_eq!(session.session_id, "s");
    assert_eq!(client.round_trips(), 2);
    drop(client);
    serving.join().unwrap();
}

#[test]
fn a_host_that_goes_away_is_unreachable_not_a_hang() {
    let served = Served::start();
    let mut client = served.client();
    served.server.stop();
    served.host.close();
    // The open connection now answers HOST_CLOSED; a new one finds no socket.
    let refused = client.shell_list(&ShellListParams {}).unwrap_err();
    assert_eq!(refused.code(), Some(ErrorCode::HostClosed));
    let unreachable = LineTransport::connect(&served.socket).unwrap_err();
    assert!(
        matches!(unreachable, ClientError::Unreachable { .. }),
        "{unreachable:?}"
    );
}

#[test]
fn a_connection_closed_mid_wait_is_unreachable() {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let answering = std::thread::spawn(move || {
        let mut reader = BufReader::new(theirs.try_clone().unwrap());
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        // No answer: the peer closes.
        drop(theirs);
    });
    let failed = Client::connect(LineTransport::from_socket(ours).unwrap(), "t").unwrap_err();
    assert!(matches!(failed, ClientError::Unreachable { .. }), "{failed:?}");
    answering.join().unwrap();
}
