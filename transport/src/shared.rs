//! The state the server tasks share with the transport ([`Shared`]): counters, links, the peer
//! directory, the deadlines and the admission caps. The server tasks hold it, never the
//! transport itself, so dropping the last `Transport` shuts everything down.

use super::admission::{Admission, WarnEvery};
use super::counters::TransportCounters;
use super::links::{self, Links};
use super::peers::PeerDirectory;
use redt_proto::NodeId;
use std::sync::Arc;
use std::time::Duration;

/// State the server tasks share with the transport (they never hold the transport itself,
/// so dropping the last [`Transport`] shuts everything down).
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) counters: TransportCounters,
    /// When each peer node was last heard from and sent to, and its heartbeat connections.
    pub(crate) links: Arc<Links>,
    pub(crate) peers: PeerDirectory,
    pub(crate) max_frame_bytes: u32,
    /// How long the server waits for a request frame.
    pub(crate) request_timeout: Duration,
    /// How long a handler may work on one request.
    pub(crate) handler_timeout: Duration,
    /// How long writing one response may take.
    pub(crate) write_timeout: Duration,
    /// Incoming connections open, against the caps.
    pub(crate) admission: Arc<Admission>,
    /// Rate limits of the warnings: refused connections, cancelled handlers, reset writes.
    pub(crate) refusal_warnings: WarnEvery,
    pub(crate) handler_warnings: WarnEvery,
    pub(crate) write_warnings: WarnEvery,
}

impl Shared {
    /// Sends `peer` one heartbeat datagram on the newest live connection with it, counted
    /// in the peer's traffic; `false` when there is no such connection.
    pub(crate) fn send_heartbeat(&self, peer: NodeId) -> bool {
        let sent = self.links.send_heartbeat(peer);
        if sent {
            self.counters.sent_to(peer, links::HEARTBEAT.len());
        }
        sent
    }
}
