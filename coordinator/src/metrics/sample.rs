//! What one scrape reads from a node ([`NodeSample::gather`]): its status (the same as
//! `redt status` shows), its answer counters, its transport's counters and measured round
//! trips, and its data path's verb counts. Only the status's ring figures need the executor
//! thread (two words of the ring and a scan of its undecided entries), and those come from a
//! sample shared with every status request, at most [`crate::SAMPLE_MAX_AGE`] (1 s) old
//! ([`Node::status`]); the rest are atomics read at the scrape.

use super::answers::AnswersSnapshot;
use crate::error::Result;
use crate::node::Node;
use crate::status::NodeStatus;
use redt_dc_executor::{ServerCounts, VerbCounts};
use redt_transport::CountersSnapshot;
use std::time::Duration;

/// One node's figures at one scrape.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSample {
    /// The node's name.
    pub node: String,
    /// Its DC's name.
    pub dc: String,
    /// Its status (counters, recoveries, ring, epoch, suspects), as `redt status` reads it:
    /// its ring figures at most [`crate::SAMPLE_MAX_AGE`] old, the rest read at the scrape
    /// ([`Node::status`]).
    pub status: NodeStatus,
    /// Its coordinators' answers.
    pub answers: AnswersSnapshot,
    /// Its transport's totals.
    pub transport: CountersSnapshot,
    /// Its traffic and measured round trip per DC that holds another node, in DC order (its
    /// own DC too, when that has other nodes).
    pub links: Vec<LinkSample>,
    /// Verbs issued by its data path's backend (in an embedded cluster, shared by the nodes
    /// of its DC).
    pub verbs: VerbCounts,
    /// What the TCP verbs server serving its MemStore did with the connections it accepted
    /// (`None` where its DC's backend is not `tcp`).
    pub verbs_server: Option<ServerCounts>,
    /// Slots of its redo ring.
    pub ring_capacity_slots: u64,
    /// When the sample was taken, ms since the Unix epoch (ages are computed against it).
    pub now_unix_ms: u64,
}

/// The traffic of one node with the nodes of one DC, and the round trip to them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinkSample {
    /// The peer DC's name.
    pub peer_dc: String,
    /// Frames sent to its nodes (requests and responses).
    pub messages_sent: u64,
    /// Their bytes, length prefixes included.
    pub bytes_sent: u64,
    /// Frames received from its nodes.
    pub messages_received: u64,
    /// Their bytes.
    pub bytes_received: u64,
    /// The smallest round-trip time QUIC measures (its smoothed estimate) on this node's live
    /// connections to the DC's nodes; `None` without one.
    pub rtt: Option<Duration>,
}

impl NodeSample {
    /// Reads `node`'s figures: now, but for its status's ring figures, which may be up to
    /// [`crate::SAMPLE_MAX_AGE`] (1 s) old ([`Node::status`]). Every counter only grows from
    /// one scrape to the next (the shared sample is only ever replaced by a newer one).
    ///
    /// # Errors
    /// As [`Node::status`]: the node is shutting down (its executor thread stopped), or a
    /// verbs failure reading its ring.
    pub async fn gather(node: &Node) -> Result<NodeSample> {
        let status = node.status(false).await?;
        let topology = node.placement();
        let me = &topology.nodes[node.id().0 as usize];
        let traffic = node.transport().counters().peers();
        let links = topology
            .dcs
            .iter()
            .filter(|dc| dc.nodes.iter().any(|&n| n != me.id))
            .map(|dc| {
                let rtt = status.link_rtts.iter().find(|(d, _)| *d == dc.id).map(|(_, rtt)| *rtt);
                let mut link = LinkSample { peer_dc: dc.name.clone(), rtt, ..LinkSample::default() };
                for &n in dc.nodes.iter().filter(|&&n| n != me.id) {
                    let t = traffic.get(n.0 as usize).copied().unwrap_or_default();
                    link.messages_sent += t.messages_sent;
                    link.bytes_sent += t.bytes_sent;
                    link.messages_received += t.messages_received;
                    link.bytes_received += t.bytes_received;
                }
                link
            })
            .collect();
        let data = node.data_path();
        let now_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Ok(NodeSample {
            node: me.name.clone(),
            dc: topology.dcs[me.dc.0 as usize].name.clone(),
            status,
            answers: node.answers().snapshot(),
            transport: node.transport().counters().snapshot(),
            links,
            verbs: data.verbs.counters().snapshot(),
            verbs_server: node.verbs_server_counts(),
            ring_capacity_slots: data.layout.ring_bytes.saturating_sub(64) / 64,
            now_unix_ms,
        })
    }
}
