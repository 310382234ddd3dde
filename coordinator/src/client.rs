//! The client API: submit procedure calls to a running cluster's coordinators over QUIC
//! (mutual TLS with the cluster's client certificate), and operator requests such as
//! changing WAN conditions.

use crate::error::{Error, Result};
use crate::node::{TxnOutcome, TxnStatus};
use crate::status::NodeStatus;
use crate::transport::{load_identity, SocketSpec, Transport, TransportConfig, CLIENT_IDENTITY_NAME};
use redt_proto::wire::{Body, Envelope, NetemSetRequest, ProcedureCall, StatusRequest, SubmitRequest};
use redt_proto::{NodeId, Topology, TxnId};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A client of a running cluster.
pub struct Client {
    topology: Arc<Topology>,
    transport: Transport,
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
        Ok(Client { topology, transport })
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
        match self.call(node, Body::Submit(SubmitRequest { call: Some(call) })).await {
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
