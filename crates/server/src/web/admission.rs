//! Which connection the card server takes (`sandbox.md` P16): at most
//! [`MAX_CONNECTIONS`] at once, at most [`MAX_CONNECTIONS_PER_PEER`] of
//! them from one peer, and the last [`RESERVED_FOR_CARD_HOLDERS`] only for
//! peers that have shown a card's token (the person's own browsers), so
//! that a flood, from one address or from many, neither holds every
//! connection nor keeps the person's own requests out.
//!
//! A peer is an IPv4 address, or an IPv6 /64 (one host holds a whole /64,
//! so counting single IPv6 addresses would bound nothing). This module
//! only counts; what a request may do is `routes`' business.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

/// At most this many connections are served at once.
pub const MAX_CONNECTIONS: usize = 64;
/// At most this many of them from one peer.
pub const MAX_CONNECTIONS_PER_PEER: usize = 8;
/// Of [`MAX_CONNECTIONS`], the last this many are only for peers that have
/// shown a card's token.
pub const RESERVED_FOR_CARD_HOLDERS: usize = 16;
/// How many card holders are remembered (the oldest is forgotten first).
const CARD_HOLDERS_KEPT: usize = 256;

/// A peer as the bounds count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Peer(IpAddr);

impl Peer {
    pub(crate) fn of(address: IpAddr) -> Peer {
        match address {
            IpAddr::V4(v4) => Peer(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Peer(IpAddr::V4(v4)),
                None => {
                    let prefix = u128::from(v6) & !((1_u128 << 64) - 1);
                    Peer(IpAddr::V6(prefix.into()))
                }
            },
        }
    }
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_peer: HashMap<Peer, usize>,
    card_holders: VecDeque<Peer>,
}

/// The connections being served, shared by the accept thread and the
/// connection threads.
#[derive(Debug, Default)]
pub(crate) struct Admission {
    counts: Mutex<Counts>,
}

/// One admitted connection; it is counted until dropped.
#[derive(Debug)]
pub(crate) struct Ticket {
    admission: Arc<Admission>,
    peer: Peer,
}

impl Admission {
    fn counts(&self) -> MutexGuard<'_, Counts> {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A ticket for a connection from `peer`, or `None` when the
    /// connection is to be closed unanswered: all connections in use, this
    /// peer's in use, or only the reserved ones left and the peer has shown
    /// no card's token.
    pub(crate) fn admit(admission: &Arc<Admission>, peer: Peer) -> Option<Ticket> {
        let mut counts = admission.counts();
        let of_peer = counts.per_peer.get(&peer).copied().unwrap_or(0);
        let holder = counts.card_holders.contains(&peer);
        let room = if holder {
            MAX_CONNECTIONS
        } else {
            MAX_CONNECTIONS - RESERVED_FOR_CARD_HOLDERS
        };
        if counts.total >= room || of_peer >= MAX_CONNECTIONS_PER_PEER {
            return None;
        }
        counts.total += 1;
        *counts.per_peer.entry(peer).or_insert(0) += 1;
        Some(Ticket {
            admission: Arc::clone(admission),
            peer,
        })
    }

    /// Remembers that `peer` has shown a card's token.
    pub(crate) fn card_holder(&self, peer: Peer) {
        let mut counts = self.counts();
        if counts.card_holders.contains(&peer) {
            return;
        }
        if counts.card_holders.len() >= CARD_HOLDERS_KEPT {
            counts.card_holders.pop_front();
        }
        counts.card_holders.push_back(peer);
    }

    /// Forgets every card holder (their tokens die with the server).
    pub(crate) fn forget_card_holders(&self) {
        self.counts().card_holders.clear();
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut counts = self.admission.counts();
        counts.total = counts.total.saturating_sub(1);
        if let Some(count) = counts.per_peer.get_mut(&self.peer) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.per_peer.remove(&self.peer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(text: &str) -> Peer {
        Peer::of(text.parse().unwrap())
    }

    #[test]
    fn one_peer_gets_its_share_and_no_more_and_a_ticket_gives_its_place_back() {
        let admission = Arc::new(Admission::default());
        let mut held: Vec<Ticket> = (0..MAX_CONNECTIONS_PER_PEER)
            .map(|_| Admission::admit(&admission, peer("192.0.2.7")).unwrap())
            .collect();
        assert!(Admission::admit(&admission, peer("192.0.2.7")).is_none());
        assert!(Admission::admit(&admission, peer("192.0.2.8")).is_some());
        held.pop();
        assert!(Admission::admit(&admission, peer("192.0.2.7")).is_some());
    }

    #[test]
    fn the_reserved_room_is_for_card_holders_only() {
        let admission = Arc::new(Admission::default());
        let open = MAX_CONNECTIONS - RESERVED_FOR_CARD_HOLDERS;
        let flood: Vec<Ticket> = (0..open)
            .map(|index| {
                let address = format!("198.51.100.{}", index / MAX_CONNECTIONS_PER_PEER);
                Admission::admit(&admission, peer(&address)).unwrap()
            })
            .collect();
        assert!(Admission::admit(&admission, peer("203.0.113.1")).is_none());
        admission.card_holder(peer("203.0.113.2"));
        let person: Vec<Ticket> = (0..MAX_CONNECTIONS_PER_PEER)
            .map(|_| Admission::admit(&admission, peer("203.0.113.2")).unwrap())
            .collect();
        assert_eq!(flood.len() + person.len(), open + MAX_CONNECTIONS_PER_PEER);
        admission.forget_card_holders();
        assert!(Admission::admit(&admission, peer("203.0.113.2")).is_none());
    }

    #[test]
    fn an_ipv6_host_is_one_peer_across_its_64_and_a_mapped_ipv4_is_its_ipv4() {
        assert_eq!(peer("2001:db8:1:2::1"), peer("2001:db8:1:2:ffff::9"));
        assert_ne!(peer("2001:db8:1:2::1"), peer("2001:db8:1:3::1"));
        assert_eq!(peer("::ffff:192.0.2.1"), peer("192.0.2.1"));
    }
}
