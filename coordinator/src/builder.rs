//! Starting a node from the parts every deployment has: [`NodeSpec`] binds the node's QUIC
//! transport ([`NodeSpec::bind`]), then [`BoundNode::start`] starts the node on it
//! ([`Node::start`]), has its metrics report the TCP verbs server that serves its MemStore
//! ([`Node::watch_verbs_server`]) and serves its metrics when asked.
//!
//! `redt node` (one process per node) and the embedded cluster (every node in one process)
//! both start their nodes here; each keeps only what is its own: `redt node` maps the
//! MemStore files, picks the verbs backend, restores the disk images, checks its certificate
//! before binding, reloads it and waits for a signal; the embedded cluster hands each life
//! its socket, runs the in-process verbs and restarts lives.
//!
//! Metrics: [`NodeSpec::metrics`] serves the node one start made for as long as it runs (one
//! endpoint per process, as `redt node` has). An endpoint that outlives a life and follows
//! its node across restarts (the embedded cluster's, one per node for its whole run) is left
//! to its caller, which serves it with [`MetricsEndpoint::serve`] and a [`NodeSource`] of its
//! own, and gives the spec none.

use crate::error::Result;
use crate::metrics::{MetricsServer, MetricsTls, NodeSource};
use crate::node::{Node, NodeParts};
use redt_dc_executor::{DcHandle, Region, ServerCountsHandle};
use redt_netem::WanModel;
use redt_proto::{MetricsConfig, NodeId, Topology};
use redt_protocol::stats::TxnStats;
use redt_protocol::txn::CoordinatorOptions;
use redt_transport::{NodeIdentity, SocketSpec, Transport, TransportConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// What one node starts with: the parts every deployment has, whatever maps its MemStore and
/// whatever socket it sends through. Built as a struct literal; [`NodeSpec::bind`] takes it.
pub struct NodeSpec<'a> {
    /// The topology.
    pub topology: Arc<Topology>,
    /// This node.
    pub node: NodeId,
    /// Its DC's data path (over the verbs backend its caller chose).
    pub dc: Arc<DcHandle>,
    /// Its own MemStore region, formatted (`redt_dc_executor::format_if_new`).
    pub region: Arc<Region>,
    /// Its certificate and key: its QUIC endpoint presents them.
    pub identity: &'a NodeIdentity,
    /// The UDP socket its QUIC endpoint runs on (the netem socket, or a wrapper of it).
    pub socket: SocketSpec,
    /// The WAN model its socket applies (changed by `netem set`).
    pub wan: Arc<Mutex<WanModel>>,
    /// Coordinator options.
    pub options: CoordinatorOptions,
    /// Where its counters go (shared by all nodes of an embedded cluster).
    pub stats: Arc<TxnStats>,
    /// Its data directory: the membership's Raft log lives in `raft/` under it (`None`: in
    /// memory, lost with the node).
    pub data_dir: Option<PathBuf>,
    /// The counts of the TCP verbs server serving its MemStore, when one does (started
    /// before the node by whoever maps the MemStore), for its metrics.
    pub verbs_server: Option<ServerCountsHandle>,
    /// Where to serve this node's metrics while it runs (`None`: nowhere, or served by the
    /// caller across lives: see the module's docs).
    pub metrics: Option<MetricsEndpoint>,
}

impl NodeSpec<'_> {
    /// Binds the node's QUIC transport on [`NodeSpec::socket`] with [`NodeSpec::identity`]
    /// and the topology's `transport:` settings. The node does not serve yet: whatever must
    /// hold the transport before the node starts (a certificate reload) takes it from
    /// [`BoundNode::transport`]. Must run inside a Tokio runtime.
    ///
    /// # Errors
    /// [`Transport::bind`]'s, unchanged: the identity is valid for no node of the topology or
    /// unusable, the `transport:` settings are unusable, the socket cannot be used, there is
    /// no Tokio runtime.
    pub fn bind(self) -> redt_transport::Result<BoundNode> {
        let transport = Transport::bind(
            TransportConfig::from_config(&self.topology.transport),
            &self.topology,
            self.identity,
            self.socket,
        )?;
        Ok(BoundNode {
            parts: NodeParts {
                topology: self.topology,
                node: self.node,
                dc: self.dc,
                region: self.region,
                transport: Arc::new(transport),
                wan: self.wan,
                options: self.options,
                stats: self.stats,
                data_dir: self.data_dir,
            },
            verbs_server: self.verbs_server,
            metrics: self.metrics,
        })
    }
}

/// A node whose transport is bound and which does not run yet ([`NodeSpec::bind`]).
pub struct BoundNode {
    parts: NodeParts,
    verbs_server: Option<ServerCountsHandle>,
    metrics: Option<MetricsEndpoint>,
}

impl BoundNode {
    /// The node's QUIC transport, bound and not serving yet.
    pub fn transport(&self) -> &Arc<Transport> {
        &self.parts.transport
    }

    /// Starts the node ([`Node::start`]), has its metrics report the TCP verbs server given
    /// in [`NodeSpec::verbs_server`], then serves its metrics at [`NodeSpec::metrics`] when
    /// given (every scrape reads this node). Must run inside a Tokio runtime.
    ///
    /// # Errors
    /// [`Node::start`]'s; [`crate::Error::MetricsBind`] when the metrics endpoint cannot
    /// listen, after the node just started is shut down.
    pub fn start(self) -> Result<StartedNode> {
        let topology = self.parts.topology.clone();
        let node = Node::start(self.parts)?;
        if let Some(counts) = self.verbs_server {
            node.watch_verbs_server(counts);
        }
        let metrics = match self.metrics {
            Some(endpoint) => {
                let serving = node.clone();
                match endpoint.serve(&topology.metrics, Arc::new(move || Some(serving.clone()))) {
                    Ok(server) => Some(server),
                    Err(e) => {
                        node.shutdown();
                        return Err(e);
                    }
                }
            }
            None => None,
        };
        Ok(StartedNode { node, metrics })
    }
}

/// A running node ([`BoundNode::start`]) and its metrics endpoint when it serves one.
pub struct StartedNode {
    /// The node.
    pub node: Arc<Node>,
    /// Its metrics endpoint ([`NodeSpec::metrics`]; `None` without one).
    pub metrics: Option<MetricsServer>,
}

impl StartedNode {
    /// Stops its metrics endpoint, then the node ([`Node::shutdown`]).
    pub fn shutdown(&self) {
        if let Some(m) = &self.metrics {
            m.shutdown();
        }
        self.node.shutdown();
    }
}

/// Where and how a node's metrics are served: an address, over HTTPS with the node's own
/// certificate under the topology's `metrics.tls`, else plain HTTP.
#[derive(Clone, Debug)]
pub struct MetricsEndpoint {
    /// The address to listen at (port 0: one the OS picks).
    pub addr: SocketAddr,
    /// The endpoint's TLS (`None`: plain HTTP); [`MetricsTls::rotate`] gives it a new
    /// certificate.
    pub tls: Option<MetricsTls>,
}

impl MetricsEndpoint {
    /// The endpoint at `addr` of the node presenting `identity`: over TLS with its
    /// certificate when `config.tls` asks for it, else plain HTTP.
    ///
    /// # Errors
    /// [`MetricsTls::new`]'s: rustls refuses `identity`'s chain or key.
    pub fn new(addr: SocketAddr, config: &MetricsConfig, identity: &NodeIdentity) -> Result<MetricsEndpoint> {
        let tls = if config.tls { Some(MetricsTls::new(identity)?) } else { None };
        Ok(MetricsEndpoint { addr, tls })
    }

    /// Serves the node `source` names at [`MetricsEndpoint::addr`] within `limits`' caps and
    /// timeouts (the topology's `metrics:` section; [`MetricsServer::spawn`]). Must run
    /// inside a Tokio runtime.
    ///
    /// # Errors
    /// [`crate::Error::MetricsBind`] if the address cannot be listened on.
    pub fn serve(self, limits: &MetricsConfig, source: NodeSource) -> Result<MetricsServer> {
        MetricsServer::spawn(self.addr, limits, source, self.tls)
    }
}
