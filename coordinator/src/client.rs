//! The client API: submit procedure calls to a running cluster's coordinators over QUIC
//! (mutual TLS with the cluster's client certificate), and operator requests such as
//! changing WAN conditions.

use crate::error::{Error, Result};
use crate::node::{TxnOutcome, TxnStatus};
use crate::status::NodeStatus;
use crate::transport::TransportError;
use crate::transport::{load_identity, SocketSpec, Transport, TransportConfig, CLIENT_IDENTITY_NAME};
use redt_proto::wire::{Body, Envelope, NetemSetRequest, ProcedureCall, StatusRequest, SubmitRequest};
use redt_proto::{NodeId, Topology, TxnId};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a node that could not be reached is passed over by [`Client::submit_failover`].
const DOWN_FOR: Duration = Duration::from_secs(2);

/// A client of a running cluster.
pub struct Client {
    topology: Arc<Topology>,
    transport: Transport,
    /// Nodes no connection could be set up to, and when ([`Client::submit_failover`]).
    down: Mutex<HashMap<NodeId, Instant>>,
}

impl Client {
    /// Connects (lazily) to the cluster of `topology` with the client certificate in
    /// `certs_dir` (as written by `redt certs init` / `redt cluster up`). Must run inside a
    /// tokio runtime.
    ///
    /// # Errors
    /// A missing or unreadable certificate file (named in the error), a socket that cannot
    /// bind.
    pub fn connect(topology: Arc<Topology>, certs_dir: &Path, call_timeout: Duration) -> Result<Client> {
        let identity = load_identity(certs_dir, CLIENT_IDENTITY_NAME)?;
        let bind: SocketAddr = if topology.nodes.first().is_some_and(|n| n.addr.is_ipv6()) {
            "[::1]:0".parse().expect("static address")
        } else {
            "127.0.0.1:0".parse().expect("static address")
        };
        let cfg = TransportConfig { call_timeout, ..TransportConfig::default() };
        let transport = Transport::client(cfg, &identity, SocketSpec::Bind(bind))?;
        Ok(Client { topology, transport, down: Mutex::new(HashMap::new()) })
    }

    /// The topology.
    pub fn topology(&self) -> &Arc<Topology> {
        &self.topology
    }

    async fn call(&self, node: NodeId, body: Body) -> Result<Body> {
        let n = self.topology.nodes.get(node.0 as usize).ok_or_else(|| Error::Topology(format!("no node {node}")))?;
        let msg = Envelope { epoch: self.topology.epoch.0, from: u32::MAX, body: Some(body) };
        let reply = self.transport.call_addr(n.addr, &n.name, msg).await?;
        match reply.body {
            Some(Body::Error(e)) => Err(Error::Remote { node, message: e.message }),
            Some(b) => Ok(b),
            None => Err(Error::Unexpected { node }),
        }
    }

    /// Runs `call` as one transaction with `node` as its coordinator.
    ///
    /// A transport failure after the request may have been delivered gives
    /// [`TxnStatus::Unknown`]; the client never retries a submitted transaction.
    pub async fn submit(&self, node: NodeId, call: ProcedureCall) -> TxnOutcome {
        outcome_of(self.call(node, Body::Submit(SubmitRequest { call: Some(call), txn: None })).await)
    }

    /// Runs `call` as one transaction coordinated by `preferred` or, when no connection to
    /// it can be set up (so nothing was sent), by the next node of
    /// [`failover_order`] that can be reached (issue 13: a client whose DC died goes
    /// on through another). Nodes that could not be reached are passed over for 2 s. Returns
    /// the coordinator that answered and the outcome.
    ///
    /// A transaction that was sent and whose answer was lost is not submitted again: its
    /// outcome is [`TxnStatus::Unknown`] (resubmitting could run it twice).
    pub async fn submit_failover(&self, preferred: NodeId, call: ProcedureCall) -> (NodeId, TxnOutcome) {
        let order = failover_order(&self.topology, preferred);
        let now = Instant::now();
        let up: Vec<NodeId> = {
            let down = self.down.lock().unwrap_or_else(|p| p.into_inner());
            order.iter().copied().filter(|n| down.get(n).is_none_or(|t| now.duration_since(*t) >= DOWN_FOR)).collect()
        };
        // Every node passed over: try them all again rather than give up.
        let candidates = if up.is_empty() { order } else { up };
        let mut last = None;
        for node in candidates {
            match self.call(node, Body::Submit(SubmitRequest { call: Some(call.clone()), txn: None })).await {
                Err(Error::Transport(e @ (TransportError::Connect { .. } | TransportError::Tls { .. }))) => {
                    self.down.lock().unwrap_or_else(|p| p.into_inner()).insert(node, Instant::now());
                    last = Some(e.to_string());
                }
                reply => {
                    self.down.lock().unwrap_or_else(|p| p.into_inner()).remove(&node);
                    return (node, outcome_of(reply));
                }
            }
        }
        let why = format!("no coordinator reachable: {}", last.unwrap_or_default());
        (preferred, TxnOutcome { txn: TxnId(0), status: TxnStatus::Aborted(why), reads: vec![] })
    }

    /// Sends a `netem set` request to every node; returns the nodes that did not confirm,
    /// with why.
    pub async fn netem_set(&self, req: NetemSetRequest) -> Vec<(String, String)> {
        let mut failed = Vec::new();
        for n in &self.topology.nodes {
            match self.call(n.id, Body::NetemSet(req.clone())).await {
                Ok(Body::Ack(_)) => {}
                Ok(_) => failed.push((n.name.clone(), "unexpected reply".into())),
                Err(e) => failed.push((n.name.clone(), e.to_string())),
            }
        }
        failed
    }

    /// Asks `node` for its status ([`NodeStatus`]); with `count_locks` it also counts the
    /// records holding a lock (a full scan of its index: slow on a large MemStore).
    ///
    /// # Errors
    /// The node is unreachable or answered an error; the reply does not decode
    /// ([`Error::Remote`] names the node).
    pub async fn status(&self, node: NodeId, count_locks: bool) -> Result<NodeStatus> {
        match self.call(node, Body::Status(StatusRequest { count_locks })).await? {
            Body::NodeStatus(r) => NodeStatus::from_wire(&r).map_err(|message| Error::Remote { node, message }),
            _ => Err(Error::Unexpected { node }),
        }
    }

    /// The status of each of `nodes`, asked at once, in node order (an unreachable node's
    /// error as text, after the client's call timeout).
    pub async fn status_of(
        self: &Arc<Self>,
        nodes: &[NodeId],
        count_locks: bool,
    ) -> Vec<(NodeId, std::result::Result<NodeStatus, String>)> {
        let mut asks = tokio::task::JoinSet::new();
        for &n in nodes {
            let client = self.clone();
            asks.spawn(async move { (n, client.status(n, count_locks).await.map_err(|e| e.to_string())) });
        }
        let mut all = Vec::new();
        while let Some(r) = asks.join_next().await {
            all.extend(r.ok());
        }
        all.sort_by_key(|(n, _)| *n);
        all
    }
}

/// What a submission's reply tells the client.
fn outcome_of(reply: Result<Body>) -> TxnOutcome {
    match reply {
        Ok(Body::Outcome(o)) => {
            let status = match o.outcome {
                0 => TxnStatus::Committed,
                1 => TxnStatus::Aborted(o.error),
                _ => TxnStatus::Unknown(o.error),
            };
            TxnOutcome {
                txn: TxnId(o.txn),
                status,
                reads: o.reads.into_iter().map(|r| (!r.is_empty()).then_some(r)).collect(),
            }
        }
        Ok(_) => TxnOutcome { txn: TxnId(0), status: TxnStatus::Unknown("unexpected reply".into()), reads: vec![] },
        // The coordinator refused it before running it (bad epoch, malformed).
        Err(Error::Remote { message, .. }) => {
            TxnOutcome { txn: TxnId(0), status: TxnStatus::Aborted(message), reads: vec![] }
        }
        Err(e) => TxnOutcome { txn: TxnId(0), status: TxnStatus::Unknown(e.to_string()), reads: vec![] },
    }
}

/// The coordinators [`Client::submit_failover`] tries for `preferred`, in order: itself, the
/// other nodes of its DC, then the other DCs' nodes, nearest DC (by the topology's RTT from
/// `preferred`'s DC) first.
pub fn failover_order(topology: &Topology, preferred: NodeId) -> Vec<NodeId> {
    let Some(home) = topology.nodes.get(preferred.0 as usize).map(|n| n.dc) else { return vec![preferred] };
    let rtt = |n: &redt_proto::Node| {
        if n.dc == home {
            Duration::ZERO
        } else {
            topology.links[home.0 as usize][n.dc.0 as usize].rtt
        }
    };
    let mut order: Vec<&redt_proto::Node> = topology.nodes.iter().filter(|n| n.id != preferred).collect();
    order.sort_by_key(|n| (rtt(n), n.dc, n.id));
    std::iter::once(preferred).chain(order.into_iter().map(|n| n.id)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failover_tries_the_own_dc_first_then_the_nearest() {
        let t = Topology::from_yaml("world-5dc.yaml", include_str!("../../configs/world-5dc.yaml")).expect("valid");
        for n in &t.nodes {
            let order = failover_order(&t, n.id);
            assert_eq!(order[0], n.id);
            assert_eq!(order.len(), t.nodes.len());
            let mut seen: Vec<NodeId> = order.clone();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), t.nodes.len(), "each node once");
            let rtts: Vec<Duration> = order
                .iter()
                .map(|m| {
                    let d = t.nodes[m.0 as usize].dc;
                    if d == n.dc {
                        Duration::ZERO
                    } else {
                        t.links[n.dc.0 as usize][d.0 as usize].rtt
                    }
                })
                .collect();
            assert!(rtts.windows(2).all(|w| w[0] <= w[1]), "nearest first from {}: {rtts:?}", n.name);
        }
    }
}
