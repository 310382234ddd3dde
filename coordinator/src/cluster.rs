//! The embedded cluster: every node of a topology in this process, each with its own QUIC
//! endpoint on its own loopback address behind the netem socket, and the in-process verbs
//! backend inside each DC (DESIGN.md §3–4) — or, for the `redt-tcp` baseline, TCP verbs
//! servers and clients over those regions (RedT §6.5).

use crate::error::{Error, Result};
use crate::node::{CoordinatorOptions, Node, NodeParts};
use crate::stats::TxnStats;
use crate::transport::{ClusterCerts, SocketSpec, Transport, TransportConfig};
use redt_dc_executor::{DcHandle, Layout, LocalVerbs, TcpVerbs, TcpVerbsServer, VerbCounts, Verbs};
use redt_netem::{NetemSocket, WanModel};
use redt_proto::{DcId, NodeId, Protocol, TableId, Topology};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Every node of a topology, running in this process.
pub struct EmbeddedCluster {
    /// The topology.
    pub topology: Arc<Topology>,
    /// Nodes by id.
    pub nodes: Vec<Arc<Node>>,
    /// Each DC's data path, by DC id, over the in-process verbs (also under `redt-tcp`:
    /// loading and checks are not part of the measured protocol).
    pub dcs: Vec<Arc<DcHandle>>,
    /// The WAN model all sockets share.
    pub wan: Arc<Mutex<WanModel>>,
    /// Counters of every node.
    pub stats: Arc<TxnStats>,
    /// The backends whose counters [`EmbeddedCluster::verb_counts`] sums: each DC's
    /// `LocalVerbs`, or under `redt-tcp` each node's `TcpVerbs` (the servers' `LocalVerbs`
    /// would count the same verbs twice).
    counted: Vec<Arc<dyn Verbs>>,
    /// Under `redt-tcp`, each node's TCP verbs server, by node id.
    tcp_servers: Vec<TcpVerbsServer>,
    sockets: Vec<Arc<NetemSocket>>,
    certs: ClusterCerts,
}

/// How long [`EmbeddedCluster::start`] waits for an address still held by a cluster shut
/// down just before (its endpoints drain their connections for a moment after closing).
const BIND_PATIENCE: Duration = Duration::from_secs(5);

/// Binds a node's netem socket, retrying every 50 ms for up to [`BIND_PATIENCE`] while the
/// address is in use.
async fn bind_socket(addr: SocketAddr, dc: DcId, wan: &Arc<Mutex<WanModel>>) -> std::io::Result<Arc<NetemSocket>> {
    let t0 = std::time::Instant::now();
    loop {
        match NetemSocket::bind(addr, dc, wan.clone()) {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && t0.elapsed() < BIND_PATIENCE => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => return other,
        }
    }
}

impl EmbeddedCluster {
    /// Starts every node of `topology`. Must run inside a tokio runtime.
    ///
    /// With `options.protocol == Protocol::RedtTcp`, every node also gets a
    /// [`TcpVerbsServer`] on its IP address (an ephemeral port) serving its region, and
    /// its own [`DcHandle`] over a [`TcpVerbs`] reaching the other nodes of its DC through
    /// their servers (RedT §6.5). Every other protocol shares one in-process verbs backend
    /// per DC.
    ///
    /// A node's address still held by a cluster shut down just before is waited for (up to
    /// 5 s).
    ///
    /// # Errors
    /// Certificate generation, a socket that cannot bind (the node's address), a TCP verbs
    /// server that cannot bind, a transport failure.
    pub async fn start(topology: Topology, options: CoordinatorOptions) -> Result<EmbeddedCluster> {
        let topology = Arc::new(topology);
        let certs = ClusterCerts::generate(&topology).map_err(|e| Error::Topology(e.to_string()))?;
        let wan = Arc::new(Mutex::new(WanModel::from_topology(&topology)));
        let layout = Layout::from_config(&topology.memstore);
        let stats = Arc::new(TxnStats::default());
        let mut verbs = Vec::new();
        let mut dcs = Vec::new();
        for dc in &topology.dcs {
            let local = Arc::new(LocalVerbs::in_process(dc.nodes.iter().copied(), layout.size));
            for &n in &dc.nodes {
                layout.format(local.region(n).expect("region of a DC node"));
            }
            let v: Arc<dyn Verbs> = local.clone();
            dcs.push(Arc::new(DcHandle::new(&topology, v)));
            verbs.push(local);
        }
        let mut counted: Vec<Arc<dyn Verbs>> = Vec::new();
        let mut tcp_servers = Vec::new();
        // The handle each node runs its executors over, by node id.
        let node_dcs: Vec<Arc<DcHandle>> = if options.protocol == Protocol::RedtTcp {
            for n in &topology.nodes {
                let backend = verbs[n.dc.0 as usize].clone();
                let at = SocketAddr::new(n.addr.ip(), 0);
                tcp_servers.push(TcpVerbsServer::spawn(at, n.id, backend)?);
            }
            let mut handles = Vec::new();
            for n in &topology.nodes {
                let peers: HashMap<NodeId, SocketAddr> = topology.dcs[n.dc.0 as usize]
                    .nodes
                    .iter()
                    .filter(|&&p| p != n.id)
                    .map(|&p| (p, tcp_servers[p.0 as usize].local_addr()))
                    .collect();
                let tcp = Arc::new(TcpVerbs::new(n.id, verbs[n.dc.0 as usize].clone(), peers));
                counted.push(tcp.clone());
                let v: Arc<dyn Verbs> = tcp;
                handles.push(Arc::new(DcHandle::new(&topology, v)));
            }
            handles
        } else {
            for v in &verbs {
                counted.push(v.clone());
            }
            topology.nodes.iter().map(|n| dcs[n.dc.0 as usize].clone()).collect()
        };
        let mut nodes = Vec::new();
        let mut sockets = Vec::new();
        for n in &topology.nodes {
            let socket = bind_socket(n.addr, n.dc, &wan)
                .await
                .map_err(|e| Error::Topology(format!("{} cannot bind {}: {e}", n.name, n.addr)))?;
            sockets.push(socket.clone());
            let identity = certs.node(n.id).ok_or_else(|| Error::Topology(format!("no certificate for {}", n.name)))?;
            let transport =
                Transport::bind(TransportConfig::default(), &topology, identity, SocketSpec::Custom(socket))?;
            let dc = n.dc.0 as usize;
            let region = verbs[dc].region(n.id).expect("region of a DC node").clone();
            nodes.push(Node::start(NodeParts {
                topology: topology.clone(),
                node: n.id,
                dc: node_dcs[n.id.0 as usize].clone(),
                region,
                transport: Arc::new(transport),
                wan: wan.clone(),
                options: options.clone(),
                stats: stats.clone(),
                data_dir: None,
            })?);
        }
        Ok(EmbeddedCluster { topology, nodes, dcs, wan, stats, counted, tcp_servers, sockets, certs })
    }

    /// Loads `records_per_partition` records of `table` into every replica: keys
    /// `0..records_per_partition × partitions`, each on the replicas of its partition, every
    /// cell zero. `progress` is called with the number of records loaded so far.
    ///
    /// # Errors
    /// A full heap or index (the MemStore is too small), a duplicate key.
    pub fn load(&self, table: TableId, records_per_partition: u64, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        let schema = self.topology.table(table).ok_or_else(|| Error::Topology(format!("no table {table}")))?;
        let total = records_per_partition * self.topology.partitions.len() as u64;
        for key in 0..total {
            let p = self.topology.partition_of(schema, key);
            for &node in &self.topology.partitions[p.0 as usize].replicas {
                let dc = self.topology.nodes[node.0 as usize].dc;
                self.dcs[dc.0 as usize].insert_record(node, table, key, &[])?;
            }
            if key % 8192 == 0 {
                progress(key);
            }
        }
        progress(total);
        Ok(total)
    }

    /// The certificates the nodes run with (generated by [`EmbeddedCluster::start`]); its
    /// `client` identity lets tests and tools talk to the nodes as a cluster client.
    pub fn certs(&self) -> &ClusterCerts {
        &self.certs
    }

    /// The node with id `id`.
    pub fn node(&self, id: NodeId) -> &Arc<Node> {
        &self.nodes[id.0 as usize]
    }

    /// Verbs issued so far in every DC by the nodes' data paths (under `redt-tcp`, counted
    /// by each node's TCP verbs client, so the handles in [`EmbeddedCluster::dcs`] are not
    /// included).
    pub fn verb_counts(&self) -> VerbCounts {
        self.counted.iter().fold(VerbCounts::default(), |acc, v| acc.plus(&v.counters().snapshot()))
    }

    /// Datagrams dropped by netem so far (loss, partition, overflow), over every socket.
    pub fn dropped_datagrams(&self) -> u64 {
        self.sockets
            .iter()
            .map(|s| {
                let st = s.stats();
                st.dropped_loss + st.dropped_partition + st.dropped_overflow
            })
            .sum()
    }

    /// Cuts (or heals) every link between `dc` and the other DCs, both ways.
    ///
    /// # Errors
    /// An unknown DC.
    pub fn isolate(&self, dc: DcId, isolated: bool) -> Result<()> {
        self.wan
            .lock()
            .map_err(|_| Error::Topology("WAN model poisoned".into()))?
            .set_isolated(dc, isolated)
            .map_err(|e| Error::Topology(e.to_string()))
    }

    /// Stops every node (and, under `redt-tcp`, every TCP verbs server).
    pub fn shutdown(&self) {
        for n in &self.nodes {
            n.shutdown();
        }
        for s in &self.tcp_servers {
            s.shutdown();
        }
    }
}
