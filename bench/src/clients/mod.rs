//! The closed-loop clients of the bank and list-append workloads, one loop per workload
//! ([`bank`], [`append`]) shared by their embedded benches (`redt bench bank|append`) and their
//! lifecycle runs against a cluster (`redt workload run bank|append`).
//!
//! A client is homed on a node and submits there through a [`Submit`]: the nodes of an embedded
//! cluster in-process (the nearest node up while a drill has its node down), or a cluster's
//! nodes through a QUIC [`Client`]. A transaction that aborts for a retryable cause is
//! submitted again under the clients' [`RetryPolicy`] ([`Route::submit_retrying`]); once it
//! ends, its last answer and its attempts go to the runner's hook with the transaction and when
//! it was first submitted; the runner keeps its own figures there (a
//! [`crate::workload::Meter`], the drill's timeline, the bank's read-all totals).

pub mod append;
pub mod bank;

use crate::drill::DownSet;
use crate::drill_embedded::Coordinators;
use redt_coordinator::{failover_order, retrying, Client, Node, Retried, RetryPolicy, TxnAnswer};
use redt_proto::wire::ProcedureCall;
use redt_proto::{NodeId, Topology};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a client waits before asking again for a node while every node is down.
pub const NO_ROUTE_PAUSE: Duration = Duration::from_millis(20);

/// How long a client waits after an unknown outcome before its next transaction.
pub const UNKNOWN_PAUSE: Duration = Duration::from_millis(10);

/// Where clients submit.
#[derive(Clone)]
pub enum Submit {
    /// The nodes of a cluster through a QUIC client: a client's home node, or while `down`
    /// holds it the nearest node up ([`failover_order`]).
    Remote {
        /// The client every closed-loop client shares.
        client: Arc<Client>,
        /// The cluster's topology (for the failover order).
        topo: Arc<Topology>,
        /// The nodes down (a drill's; empty without one).
        down: Arc<DownSet>,
    },
    /// The nodes of an embedded cluster in-process ([`Coordinators::route`]).
    Embedded(Coordinators),
}

/// The node one transaction goes to ([`Submit::route`]).
pub enum Route {
    /// A node of a cluster, through the client.
    Remote(Arc<Client>, NodeId),
    /// The current life of a node of an embedded cluster.
    Embedded(Arc<Node>),
}

impl Route {
    /// Submits `call` to the node and waits for its answer (one attempt: a lost answer is
    /// unknown).
    pub async fn submit(&self, call: ProcedureCall) -> TxnAnswer {
        match self {
            Route::Remote(client, node) => client.submit(*node, call).await,
            Route::Embedded(node) => node.submit(call).await,
        }
    }

    /// Submits `call` to the node ([`Route::submit`]) and again after each abort whose cause is
    /// retryable, as `policy` says ([`retrying`]; pauses drawn from `rng`), until it commits,
    /// its outcome is unknown (never submitted again), an abort is not retryable, no retry is
    /// left or `stop` is set. Returns the last answer, the attempts and the aborts' causes.
    pub async fn submit_retrying(
        &self,
        call: ProcedureCall,
        policy: &RetryPolicy,
        rng: &mut impl rand::Rng,
        stop: &AtomicBool,
    ) -> Retried {
        retrying(policy, rng, Some(stop), || self.submit(call.clone())).await
    }
}

impl Submit {
    /// The nodes of the cluster of `topo` through `client`, none of them ever taken for down.
    pub fn remote(client: Arc<Client>, topo: Arc<Topology>) -> Self {
        Submit::Remote { client, topo, down: Default::default() }
    }

    /// The node a client homed on `home` submits to now: its own, or while it is down the
    /// nearest node up; `None` while every node is down.
    pub fn route(&self, home: NodeId) -> Option<Route> {
        match self {
            Submit::Remote { client, topo, down } => {
                let node = if down.contains(home) {
                    failover_order(topo, home).into_iter().find(|&n| !down.contains(n))?
                } else {
                    home
                };
                Some(Route::Remote(client.clone(), node))
            }
            Submit::Embedded(routes) => Some(Route::Embedded(routes.route(home)?)),
        }
    }

    /// Runs `call` for a client homed on `home` ([`Submit::route`]) under `policy`
    /// ([`Route::submit_retrying`]; every attempt through the same node); `None`, submitting
    /// nothing, while every node is down.
    pub async fn submit_retrying(
        &self,
        home: NodeId,
        call: ProcedureCall,
        policy: &RetryPolicy,
        rng: &mut impl rand::Rng,
        stop: &AtomicBool,
    ) -> Option<Retried> {
        Some(self.route(home)?.submit_retrying(call, policy, rng, stop).await)
    }
}

/// Told of every transaction once it ends: the transaction (`T`: a bank transaction, a
/// list-append's micro-operations), when it was first submitted, and what its attempts came
/// to (the last one's answer is the transaction's).
pub type OnAnswer<T> = Arc<dyn Fn(&T, Instant, &Retried) + Send + Sync>;

/// The generator of a client's pauses between retries, seeded from the client's own `seed`
/// (apart from the generator of its transactions, whose draws stay those of a run without
/// retries).
pub fn retry_rng(seed: u64) -> rand::rngs::StdRng {
    rand::SeedableRng::seed_from_u64(seed ^ 0x7265_7472_795f_7061)
}

/// One closed-loop client of [`ids`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientId {
    /// Its home node.
    pub home: NodeId,
    /// Its number among the clients of its node, from 0.
    pub on_node: usize,
    /// Its number among all clients, from 0 (node by node, in the topology's order).
    pub index: u64,
}

/// `per_node` clients on every node of `topo`, node by node.
pub fn ids(topo: &Topology, per_node: usize) -> impl Iterator<Item = ClientId> + '_ {
    topo.nodes
        .iter()
        .flat_map(move |n| (0..per_node).map(move |c| (n.id, c)))
        .zip(0..)
        .map(|((home, on_node), index)| ClientId { home, on_node, index })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_count_clients_node_by_node() {
        let topo = Topology::from_yaml("local-fast.yaml", include_str!("../../../configs/local-fast.yaml")).unwrap();
        let got: Vec<ClientId> = ids(&topo, 2).collect();
        assert_eq!(got.len(), 2 * topo.nodes.len());
        for (i, id) in got.iter().enumerate() {
            assert_eq!(id.index, i as u64, "numbered in order");
            assert_eq!(id.home, topo.nodes[i / 2].id, "two clients per node, node by node");
            assert_eq!(id.on_node, i % 2);
        }
        assert_eq!(ids(&topo, 0).count(), 0);
    }
}
