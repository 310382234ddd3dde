//! Starting a node: [`Node::start`] assembles it (`Node::assemble`, its executor and replay
//! threads) and starts what runs on its own beside its request handler — the recovery task,
//! the failure detector, the membership driver when failover is on — then serves requests.
//! The one place that knows every task of a node.

use crate::error::Result;
use crate::node::{Node, NodeParts};
use crate::{liveness, membership_task, reclaim_task, recovery_task};
use std::sync::Arc;

impl Node {
    /// Starts a node: first its next incarnation, taken from its MemStore before it issues
    /// any transaction id ([`crate::TxnIds::start`]: ids never repeat across restarts), then its
    /// replay thread, its executor thread, its recovery task (every `scan_every`, recoverers
    /// for the undecided entries of its ring whose coordinator is gone, and the gap watch of
    /// its ring's head: `crate::recovery_task`), its failure detector (heartbeats to every
    /// other node: [`crate::liveness`], configured by [`redt_protocol::CoordinatorOptions::detector_timeouts`])
    /// and its request handler on `parts.transport`. Must run inside a Tokio runtime. The
    /// node's MemStore must be formatted (`redt_dc_executor::format_if_new`).
    ///
    /// # Errors
    /// The incarnation counter cannot be read or is used up ([`crate::Error::Protocol`],
    /// [`redt_protocol::Error::TxnIdsExhausted`]); the transport refuses to serve (it is closed or
    /// client-only), the OS refuses a thread, or there is no Tokio runtime ([`crate::Error::Io`]).
    pub fn start(parts: NodeParts) -> Result<Arc<Node>> {
        let transport = parts.transport.clone();
        let data_dir = parts.data_dir.clone();
        let detector = parts.options.detector_timeouts(&parts.topology);
        let failover = parts.options.failover;
        let (node, raft_rx) = Node::assemble(parts)?;
        recovery_task::spawn(&node)?;
        liveness::spawn(&node, &detector)?;
        reclaim_task::spawn(&node)?;
        if failover {
            let dir = data_dir.map(|d| d.join("raft"));
            membership_task::spawn(&node, dir, raft_rx, node.membership.clone())?;
        }
        transport.serve(node.handler())?;
        Ok(node)
    }
}
