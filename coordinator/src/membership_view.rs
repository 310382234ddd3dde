//! What a node's request handler shares with its membership driver (`crate::membership_task`):
//! the inbox incoming Raft messages go to, and the membership state `redt status` reports.

use redt_membership::RaftMessage;
use redt_proto::NodeId;
use std::sync::atomic::{AtomicU32, Ordering};
use tokio::sync::mpsc;

/// Raft messages the inbox holds before the driver takes them; more are dropped (Raft
/// resends).
const INBOX: usize = 4096;

/// Where incoming Raft messages go: the node's membership driver. The node's handler
/// decodes each and checks that it names its sender's node as its `from`.
#[derive(Clone, Debug)]
pub(crate) struct RaftInbox(mpsc::Sender<RaftMessage>);

impl RaftInbox {
    pub(crate) fn new() -> (RaftInbox, mpsc::Receiver<RaftMessage>) {
        let (tx, rx) = mpsc::channel(INBOX);
        (RaftInbox(tx), rx)
    }

    /// Queues a message (dropped when the driver is behind: Raft resends).
    pub(crate) fn deliver(&self, message: RaftMessage) {
        let _ = self.0.try_send(message);
    }
}

/// The membership state a node reports in `redt status`.
#[derive(Debug, Default)]
pub(crate) struct MembershipView {
    /// The leader's node id plus one (0: none known).
    pub(crate) leader: AtomicU32,
}

impl MembershipView {
    /// The leader as last known.
    pub(crate) fn leader(&self) -> Option<NodeId> {
        match self.leader.load(Ordering::Relaxed) {
            0 => None,
            n => u16::try_from(n - 1).ok().map(NodeId),
        }
    }
}
