//! The links to the other nodes as the failure detector sees them: when something last
//! arrived from each peer node and when something was last sent to it, and the connection a
//! heartbeat datagram takes.
//!
//! # Evidence of life
//!
//! Every frame read from a peer node (a request it sent, a response it answered) and every
//! heartbeat datagram it sent stamps the peer's `heard` time; every frame written to it
//! stamps its `sent` time. The detector's driver reads the stamps at its ticks, so a busy
//! link costs the detector nothing per message and needs no heartbeats.
//!
//! # Heartbeats
//!
//! A heartbeat is one QUIC datagram ([`HEARTBEAT`]) on a connection already open with the
//! peer, in either direction: no stream, no response, no retransmission. It goes on the
//! newest live connection with the peer, so after a peer restarts the heartbeats take the
//! connection its new process opened rather than one to its old process that has not timed
//! out yet; and both ends usually pick the same connection, so the QUIC acknowledgement of a
//! heartbeat rides on the peer's own next packet on it.

use quinn::Connection;
use redt_proto::NodeId;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The payload of a heartbeat datagram. A datagram with any other payload is ignored.
pub const HEARTBEAT: &[u8] = b"redt-hb1";

/// Bytes of datagrams a connection buffers before the oldest unread ones are dropped (the
/// reader takes them as they come; a few heartbeats' worth is plenty).
pub(crate) const DATAGRAM_BUFFER_BYTES: usize = 16 * 1024;

/// One peer node's stamps and connections.
#[derive(Debug, Default)]
struct Link {
    /// µs since the origin + 1 when a frame or heartbeat last arrived from the peer; 0: never.
    heard: AtomicU64,
    /// µs since the origin + 1 when a frame was last written to the peer; 0: never.
    sent: AtomicU64,
    /// Live connections with the peer, each with when it was set up (newest last).
    conns: Mutex<Vec<(Instant, Connection)>>,
    /// A connection for heartbeats is being set up (at most one at a time).
    connecting: AtomicBool,
}

/// The stamps and heartbeat connections of every peer node, by `NodeId` (module docs).
/// Empty for a client-only transport.
#[derive(Debug)]
pub(crate) struct Links {
    origin: Instant,
    links: Box<[Link]>,
}

impl Links {
    /// Links to `peers` nodes (`NodeId` 0 to `peers - 1`), nothing heard or sent yet.
    pub(crate) fn new(peers: usize) -> Links {
        Links { origin: Instant::now(), links: (0..peers).map(|_| Link::default()).collect() }
    }

    fn stamp_of(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_micros()).unwrap_or(u64::MAX - 1) + 1
    }

    fn instant_of(&self, stamp: u64) -> Option<Instant> {
        (stamp > 0).then(|| self.origin + Duration::from_micros(stamp - 1))
    }

    /// Something arrived from `peer` now (nothing for a peer out of range).
    pub(crate) fn heard(&self, peer: NodeId) {
        if let Some(l) = self.links.get(usize::from(peer.0)) {
            l.heard.fetch_max(self.stamp_of(Instant::now()), Ordering::Relaxed);
        }
    }

    /// Something was written to `peer` now (nothing for a peer out of range).
    pub(crate) fn sent(&self, peer: NodeId) {
        if let Some(l) = self.links.get(usize::from(peer.0)) {
            l.sent.fetch_max(self.stamp_of(Instant::now()), Ordering::Relaxed);
        }
    }

    /// When something last arrived from `peer`, if ever.
    pub(crate) fn heard_at(&self, peer: NodeId) -> Option<Instant> {
        self.links.get(usize::from(peer.0)).and_then(|l| self.instant_of(l.heard.load(Ordering::Relaxed)))
    }

    /// When something was last written to `peer`, if ever.
    pub(crate) fn sent_at(&self, peer: NodeId) -> Option<Instant> {
        self.links.get(usize::from(peer.0)).and_then(|l| self.instant_of(l.sent.load(Ordering::Relaxed)))
    }

    /// Adds `conn`, just set up with `peer` (either direction), as the newest connection for
    /// its heartbeats; drops the closed ones.
    pub(crate) fn add(&self, peer: NodeId, conn: Connection) {
        if let Some(l) = self.links.get(usize::from(peer.0)) {
            let mut conns = l.conns.lock().unwrap_or_else(|e| e.into_inner());
            conns.retain(|(_, c)| c.close_reason().is_none() && c.stable_id() != conn.stable_id());
            conns.push((Instant::now(), conn));
        }
    }

    /// Sends one heartbeat datagram to `peer` on the newest live connection with it; returns
    /// `false` when there is none (or none takes datagrams), so the caller sets one up.
    pub(crate) fn send_heartbeat(&self, peer: NodeId) -> bool {
        let Some(l) = self.links.get(usize::from(peer.0)) else { return false };
        let mut conns = l.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.retain(|(_, c)| c.close_reason().is_none());
        let sent = conns.iter().rev().any(|(_, c)| c.send_datagram(bytes::Bytes::from_static(HEARTBEAT)).is_ok());
        drop(conns);
        if sent {
            self.sent(peer);
        }
        sent
    }

    /// Claims the right to set up a connection to `peer` for heartbeats; `false` while
    /// another attempt is under way (or for a peer out of range). Release it with
    /// [`Links::connected`].
    pub(crate) fn start_connecting(&self, peer: NodeId) -> bool {
        self.links.get(usize::from(peer.0)).is_some_and(|l| !l.connecting.swap(true, Ordering::AcqRel))
    }

    /// Ends the attempt [`Links::start_connecting`] claimed.
    pub(crate) fn connected(&self, peer: NodeId) {
        if let Some(l) = self.links.get(usize::from(peer.0)) {
            l.connecting.store(false, Ordering::Release);
        }
    }
}

/// Reads the datagrams `peer` sends on `conn` until it closes, stamping each heartbeat as
/// evidence of life and passing it to `on_heartbeat` (anything else is ignored).
pub(crate) async fn read_heartbeats(
    links: std::sync::Arc<Links>,
    peer: NodeId,
    conn: Connection,
    on_heartbeat: impl Fn(),
) {
    while let Ok(datagram) = conn.read_datagram().await {
        if datagram.as_ref() == HEARTBEAT {
            links.heard(peer);
            on_heartbeat();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_only_move_forward_and_ignore_unknown_peers() {
        let links = Links::new(2);
        assert_eq!(links.heard_at(NodeId(0)), None);
        assert_eq!(links.sent_at(NodeId(1)), None);
        links.heard(NodeId(0));
        let first = links.heard_at(NodeId(0)).expect("stamped");
        assert!(first >= links.origin && first <= Instant::now());
        links.heard(NodeId(0));
        assert!(links.heard_at(NodeId(0)).expect("stamped") >= first);
        assert_eq!(links.sent_at(NodeId(0)), None, "hearing is not sending");
        links.sent(NodeId(1));
        assert!(links.sent_at(NodeId(1)).is_some());
        // A peer out of range: nothing stamped, no panic, no connection to send on.
        links.heard(NodeId(7));
        links.sent(NodeId(7));
        assert_eq!(links.heard_at(NodeId(7)), None);
        assert!(!links.send_heartbeat(NodeId(7)));
        assert!(!links.send_heartbeat(NodeId(0)), "no connection yet");
    }

    #[test]
    fn one_connection_attempt_at_a_time() {
        let links = Links::new(1);
        assert!(links.start_connecting(NodeId(0)));
        assert!(!links.start_connecting(NodeId(0)));
        links.connected(NodeId(0));
        assert!(links.start_connecting(NodeId(0)));
        assert!(!links.start_connecting(NodeId(3)));
    }
}
