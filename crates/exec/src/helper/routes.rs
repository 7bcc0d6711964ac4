//! The machine's own addresses, unroutable from a networked command's
//! namespace (`sandbox.md` P16): a service the person published on
//! `0.0.0.0` or on one of the machine's addresses (the approval card with
//! `--web-bind` among them) would otherwise be reached through the
//! user-mode stack, which connects from the host's network namespace.
//!
//! Before a networked command joins its session's namespace, the
//! confining stage reads the host's local routing table (every address the
//! machine holds, its broadcast addresses and any local range, over
//! rtnetlink, unprivileged); once in the namespace, where it still holds
//! `CAP_NET_ADMIN`, it adds a `prohibit` route for each, which the
//! command, without capabilities, cannot remove: a connection or datagram
//! to any of them fails with `EACCES` there, while the rest of the world
//! stays reachable through the stack. The namespace's own loopback
//! (`127.0.0.0/8`) is the command's own and is left alone. IPv6 needs
//! nothing: the stack gives the namespace no IPv6 route at all.
//!
//! It reads and adds routes only; it decides nothing about who gets a
//! network.

use std::net::Ipv4Addr;
use std::os::fd::{AsFd, OwnedFd};

/// A destination of the local table: an address and its prefix length.
pub(crate) type Destination = (Ipv4Addr, u8);

const HEADER: usize = 16;
const ROUTE_MESSAGE: usize = 12;
const ATTRIBUTE_HEADER: usize = 4;

/// `rtnetlink` values (from `linux/rtnetlink.h`), as the kernel reads
/// them.
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP: u16 = 0x300;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
const RTA_DST: u16 = 1;
const RTA_TABLE: u16 = 15;
const RT_TABLE_MAIN: u8 = 254;
const RT_TABLE_LOCAL: u32 = 255;
const RTN_LOCAL: u8 = 2;
const RTN_BROADCAST: u8 = 3;
const RTN_ANYCAST: u8 = 4;
const RTN_PROHIBIT: u8 = 8;
const RTPROT_STATIC: u8 = 4;
const AF_INET: u8 = 2;

fn route_socket() -> Result<OwnedFd, String> {
    rustix::net::socket_with(
        rustix::net::AddressFamily::NETLINK,
        rustix::net::SocketType::RAW,
        rustix::net::SocketFlags::CLOEXEC,
        // No protocol: `NETLINK_ROUTE`.
        None,
    )
    .map_err(|errno| format!("rtnetlink socket: {errno}"))
}

/// A netlink message of `kind` with `flags` around `payload`.
fn message(kind: u16, flags: u16, sequence: u32, payload: &[u8]) -> Vec<u8> {
    let length = u32::try_from(HEADER + payload.len()).unwrap_or(u32::MAX);
    let mut bytes = Vec::with_capacity(HEADER + payload.len());
    bytes.extend_from_slice(&length.to_ne_bytes());
    bytes.extend_from_slice(&kind.to_ne_bytes());
    bytes.extend_from_slice(&flags.to_ne_bytes());
    bytes.extend_from_slice(&sequence.to_ne_bytes());
    bytes.extend_from_slice(&0_u32.to_ne_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// An `rtmsg`: family, destination prefix, table, protocol, scope, type.
fn route_message(destination_length: u8, table: u8, protocol: u8, kind: u8) -> [u8; ROUTE_MESSAGE] {
    let mut bytes = [0_u8; ROUTE_MESSAGE];
    bytes[0] = AF_INET;
    bytes[1] = destination_length;
    bytes[4] = table;
    bytes[5] = protocol;
    bytes[7] = kind;
    bytes
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// The netlink messages in one read: (type, payload).
fn messages(mut bytes: &[u8]) -> Vec<(u16, &[u8])> {
    let mut found = Vec::new();
    while let (Some(length), Some(kind)) = (u32_at(bytes, 0), u16_at(bytes, 4)) {
        let length = usize::try_from(length).unwrap_or(0);
        let Some(payload) = bytes.get(HEADER..length).filter(|_| length >= HEADER) else {
            break;
        };
        found.push((kind, payload));
        bytes = bytes.get(length.next_multiple_of(4)..).unwrap_or_default();
    }
    found
}

/// The destination of one route of a dump, if it is an IPv4 route of the
/// local table that names the machine (an address of its, a broadcast or
/// anycast address of its networks, a local range) outside `127.0.0.0/8`.
fn local_destination(payload: &[u8]) -> Option<Destination> {
    let header = payload.get(..ROUTE_MESSAGE)?;
    let (family, length, table, kind) = (header[0], header[1], header[4], header[7]);
    if family != AF_INET || !matches!(kind, RTN_LOCAL | RTN_BROADCAST | RTN_ANYCAST) {
        return None;
    }
    let mut table = u32::from(table);
    let mut destination = None;
    let mut attributes = payload.get(ROUTE_MESSAGE..)?;
    while let (Some(size), Some(kind)) = (u16_at(attributes, 0), u16_at(attributes, 2)) {
        let size = usize::from(size);
        let data = attributes
            .get(ATTRIBUTE_HEADER..size)
            .filter(|_| size >= ATTRIBUTE_HEADER)?;
        match kind {
            RTA_DST => destination = <[u8; 4]>::try_from(data).ok().map(Ipv4Addr::from),
            RTA_TABLE => table = u32_at(data, 0)?,
            _ => {}
        }
        attributes = attributes.get(size.next_multiple_of(4)..).unwrap_or_default();
    }
    let destination = destination?;
    (table == RT_TABLE_LOCAL && !destination.is_loopback()).then_some((destination, length))
}

/// Every destination of this network namespace's local table (see
/// [`local_destination`]), read over rtnetlink.
pub(crate) fn machine_destinations() -> Result<Vec<Destination>, String> {
    let socket = route_socket()?;
    let request = message(
        RTM_GETROUTE,
        NLM_F_REQUEST | NLM_F_DUMP,
        1,
        &route_message(0, 0, 0, 0),
    );
    rustix::io::write(&socket, &request).map_err(|errno| format!("asking for the routes: {errno}"))?;
    let mut destinations = Vec::new();
    let mut buffer = vec![0_u8; 64 * 1024];
    loop {
        let read =
            rustix::io::read(&socket, &mut buffer).map_err(|errno| format!("reading the routes: {errno}"))?;
        if read == 0 {
            return Err("the route dump ended early".into());
        }
        for (kind, payload) in messages(&buffer[..read]) {
            match kind {
                NLMSG_DONE => {
                    destinations.sort_unstable();
                    destinations.dedup();
                    return Ok(destinations);
                }
                NLMSG_ERROR => return Err(format!("the route dump failed: {}", error_of(payload))),
                RTM_NEWROUTE => destinations.extend(local_destination(payload)),
                _ => {}
            }
        }
    }
}

/// The errno of an `NLMSG_ERROR` payload (0: an acknowledgement).
fn error_of(payload: &[u8]) -> i32 {
    u32_at(payload, 0).map_or(0, |raw| -(raw.cast_signed()))
}

/// Adds a `prohibit` route for each of `destinations` to this network
/// namespace's main table (one already there is fine).
pub(crate) fn refuse(destinations: &[Destination]) -> Result<(), String> {
    if destinations.is_empty() {
        return Ok(());
    }
    let socket = route_socket()?;
    for (sequence, (address, length)) in (2_u32..).zip(destinations) {
        let mut payload = route_message(*length, RT_TABLE_MAIN, RTPROT_STATIC, RTN_PROHIBIT).to_vec();
        payload.extend_from_slice(&8_u16.to_ne_bytes());
        payload.extend_from_slice(&RTA_DST.to_ne_bytes());
        payload.extend_from_slice(&address.octets());
        let request = message(
            RTM_NEWROUTE,
            NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
            sequence,
            &payload,
        );
        rustix::io::write(&socket, &request)
            .map_err(|errno| format!("refusing {address}/{length}: {errno}"))?;
        acknowledged(socket.as_fd(), *address, *length)?;
    }
    Ok(())
}

/// Waits for the kernel's answer to one route: done, or already there.
fn acknowledged(socket: std::os::fd::BorrowedFd<'_>, address: Ipv4Addr, length: u8) -> Result<(), String> {
    let mut buffer = [0_u8; 4096];
    let read = rustix::io::read(socket, &mut buffer)
        .map_err(|errno| format!("refusing {address}/{length}: {errno}"))?;
    for (kind, payload) in messages(&buffer[..read]) {
        if kind == NLMSG_ERROR {
            return match error_of(payload) {
                0 => Ok(()),
                errno if errno == libc::EEXIST => Ok(()),
                errno => Err(format!(
                    "refusing {address}/{length}: {}",
                    std::io::Error::from_raw_os_error(errno)
                )),
            };
        }
    }
    Err(format!("refusing {address}/{length}: no answer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `RTM_NEWROUTE` payload as the kernel dumps it.
    fn dumped(kind: u8, table: u8, destination: [u8; 4], length: u8) -> Vec<u8> {
        let mut payload = route_message(length, table, 2, kind).to_vec();
        payload.extend_from_slice(&8_u16.to_ne_bytes());
        payload.extend_from_slice(&RTA_TABLE.to_ne_bytes());
        payload.extend_from_slice(&u32::from(table).to_ne_bytes());
        payload.extend_from_slice(&8_u16.to_ne_bytes());
        payload.extend_from_slice(&RTA_DST.to_ne_bytes());
        payload.extend_from_slice(&destination);
        payload
    }

    #[test]
    fn the_machines_addresses_and_broadcasts_are_taken_and_loopback_and_other_tables_are_not() {
        assert_eq!(
            local_destination(&dumped(RTN_LOCAL, 255, [192, 0, 2, 2], 32)),
            Some((Ipv4Addr::new(192, 0, 2, 2), 32))
        );
        assert_eq!(
            local_destination(&dumped(RTN_BROADCAST, 255, [192, 0, 2, 255], 32)),
            Some((Ipv4Addr::new(192, 0, 2, 255), 32))
        );
        assert_eq!(
            local_destination(&dumped(RTN_LOCAL, 255, [10, 0, 0, 0], 8)),
            Some((Ipv4Addr::new(10, 0, 0, 0), 8))
        );
        assert_eq!(
            local_destination(&dumped(RTN_LOCAL, 255, [127, 0, 0, 1], 32)),
            None
        );
        assert_eq!(local_destination(&dumped(1, 254, [192, 0, 2, 0], 24)), None);
    }

    #[test]
    fn a_read_splits_into_its_messages_and_stops_at_a_short_one() {
        let mut bytes = message(RTM_NEWROUTE, 0, 1, &[1, 2, 3]);
        bytes.resize(bytes.len().next_multiple_of(4), 0);
        bytes.extend(message(NLMSG_DONE, 0, 1, &[0; 4]));
        bytes.extend_from_slice(&[0xff; 6]);
        let found = messages(&bytes);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0], (RTM_NEWROUTE, &[1_u8, 2, 3][..]));
        assert_eq!(found[1].0, NLMSG_DONE);
    }
}
