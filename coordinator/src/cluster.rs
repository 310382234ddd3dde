//! The embedded cluster: every node of a topology in this process, each with its own QUIC
//! endpoint on its own loopback address behind the netem socket, and the in-process verbs
//! backend inside each DC (docs/design.md §3–4) — or, for the `redt-tcp` baseline, TCP verbs
//! servers and clients over those regions (RedT §6.5).

use crate::builder::{MetricsEndpoint, NodeSpec};
use crate::error::{Error, Result};
use crate::metrics::{MetricsServer, NodeSource};
use crate::node::Node;
use crate::Client;
use redt_dc_executor::{
    DcHandle, Layout, LocalVerbs, Region, ServerLimits, TcpVerbs, TcpVerbsServer, VerbCounts, Verbs,
};
use redt_netem::{NetemSocket, WanModel};
use redt_proto::{DcId, NodeId, Placement, Protocol, TableId, Topology};
use redt_protocol::stats::TxnStats;
use redt_protocol::txn::CoordinatorOptions;
use redt_transport::{verbs_tls, ClusterCerts, SocketSpec};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// Every node of a topology, running in this process.
pub struct EmbeddedCluster {
    /// The topology file (the nodes' current placement may be newer than its own: see
    /// [`EmbeddedCluster::placement`]).
    pub topology: Arc<Topology>,
    /// Each node's running life, by node id ([`EmbeddedCluster::restart`] replaces one).
    nodes: Arc<RwLock<Vec<Arc<Node>>>>,
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
    /// Each node's netem socket, by node id, bound once and shared by its lives (each through
    /// its own [`LifeSocket`]).
    sockets: Vec<Arc<NetemSocket>>,
    certs: ClusterCerts,
    /// What a node's next life starts with, by node id.
    lives: Vec<NodeLife>,
    options: CoordinatorOptions,
    /// Each node's metrics endpoint, by node id, when the topology has a `metrics:` section
    /// (one per node for the cluster's whole run, serving whichever life runs).
    metrics: Vec<MetricsServer>,
    /// Under `durability: disk`, the directory of the MemStores' disk images (held for its
    /// removal when the cluster is dropped).
    _images: Option<ImagesDir>,
}

/// The directory of an embedded cluster's disk images (`durability: disk`): `data_root/disk`,
/// or a fresh directory under the system's temporary directory, removed with the cluster.
#[derive(Debug)]
struct ImagesDir {
    path: PathBuf,
    remove: bool,
}

impl Drop for ImagesDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

impl ImagesDir {
    /// Gives every region of `local` a disk image in this directory, before anything is
    /// written to them (so formatting and loading are tracked too).
    fn attach(&self, local: &LocalVerbs, nodes: &[NodeId], size: u64) -> Result<()> {
        for &n in nodes {
            let region = local.region(n).ok_or_else(|| Error::topology(format!("no region for {n}")))?;
            let path = redt_dc_executor::persist::image_file(&self.path, "embedded", n);
            let (p, _) = redt_dc_executor::persist::Persistence::open_file(&path, size)?;
            region.attach(Arc::new(p))?;
        }
        Ok(())
    }
}

/// What [`EmbeddedCluster::restart`] needs to start a node again: its data path, its
/// MemStore region (kept across lives, as a restarted process maps its MemStore file again)
/// and its data directory.
struct NodeLife {
    dc: Arc<DcHandle>,
    region: Arc<Region>,
    data_dir: Option<PathBuf>,
    /// The number of the life that owns the socket now (0: none, the node is stopped).
    current: Arc<AtomicU64>,
    /// Lives started so far.
    started: AtomicU64,
}

/// One life's view of its node's netem socket. The socket outlives a stopped life (its QUIC
/// endpoint is dropped only with the last reference to the stopped node), so a kill does not
/// free the address; instead the socket belongs to one life at a time: a life that no longer
/// owns it receives nothing (its receive stays pending) and sends nothing (its datagrams are
/// dropped), as a killed process's would, and the next life takes it over on the same
/// address.
#[derive(Debug)]
struct LifeSocket {
    inner: Arc<NetemSocket>,
    life: u64,
    current: Arc<AtomicU64>,
}

impl LifeSocket {
    fn owns(&self) -> bool {
        self.current.load(Ordering::Acquire) == self.life
    }
}

impl quinn::AsyncUdpSocket for LifeSocket {
    fn create_io_poller(self: Arc<Self>) -> std::pin::Pin<Box<dyn quinn::UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &quinn::udp::Transmit) -> std::io::Result<()> {
        if self.owns() {
            self.inner.try_send(transmit)
        } else {
            Ok(())
        }
    }

    fn poll_recv(
        &self,
        cx: &mut std::task::Context,
        bufs: &mut [std::io::IoSliceMut<'_>],
        meta: &mut [quinn::udp::RecvMeta],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.owns() {
            self.inner.poll_recv(cx, bufs, meta)
        } else {
            std::task::Poll::Pending
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

/// How long [`EmbeddedCluster::start`] waits for an address still held by a cluster shut
/// down just before (its endpoints drain their connections for a moment after closing).
const BIND_PATIENCE: Duration = Duration::from_secs(5);

/// Binds a node's netem socket, retrying with exponential backoff (`backon`) for up to
/// `patience` while the address is in use.
async fn bind_socket(
    addr: SocketAddr,
    dc: DcId,
    wan: &Arc<Mutex<WanModel>>,
    patience: Duration,
) -> std::io::Result<Arc<NetemSocket>> {
    use backon::{ExponentialBuilder, Retryable};
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(10))
        .with_max_delay(Duration::from_millis(250))
        .without_max_times()
        .with_total_delay(Some(patience));
    (|| async { NetemSocket::bind(addr, dc, wan.clone()) })
        .retry(backoff)
        .when(|e: &std::io::Error| e.kind() == std::io::ErrorKind::AddrInUse)
        .await
}

impl EmbeddedCluster {
    /// Starts every node of `topology`. Must run inside a tokio runtime.
    ///
    /// With `options.protocol == Protocol::RedtTcp`, every node also gets a
    /// [`TcpVerbsServer`] on its IP address (an ephemeral port) serving its region, and
    /// its own [`DcHandle`] over a [`TcpVerbs`] reaching the other nodes of its DC through
    /// their servers (RedT §6.5), over TLS with the generated cluster CA (same-DC node
    /// certificates only, the topology's `verbs:` limits). Every other protocol shares one
    /// in-process verbs backend per DC.
    ///
    /// A node's address still held by a cluster shut down just before is waited for (up to
    /// 5 s). With the topology's `metrics:` section, every node also serves its metrics
    /// ([`EmbeddedCluster::metrics_addrs`]) from its start to the cluster's shutdown, across
    /// its lives (503 while it is killed); with `metrics.tls`, over HTTPS with the node's
    /// generated certificate ([`EmbeddedCluster::certs`] has the CA that signed it).
    ///
    /// # Errors
    /// Certificate generation, a socket that cannot bind (the node's address), a TCP verbs
    /// server or a metrics endpoint that cannot bind or build its TLS, a transport failure.
    pub async fn start(topology: Topology, options: CoordinatorOptions) -> Result<EmbeddedCluster> {
        EmbeddedCluster::start_in(topology, options, None).await
    }

    /// As [`EmbeddedCluster::start`], each node with its data directory `data_root/<node
    /// name>` (the membership's Raft log, kept across [`EmbeddedCluster::restart`] as a
    /// restarted process keeps its `--data-dir`); `None`: in memory.
    ///
    /// # Errors
    /// As [`EmbeddedCluster::start`].
    pub async fn start_in(
        topology: Topology,
        options: CoordinatorOptions,
        data_root: Option<PathBuf>,
    ) -> Result<EmbeddedCluster> {
        let topology = Arc::new(topology);
        let certs = ClusterCerts::generate(&topology).map_err(|e| Error::topology(e.to_string()))?;
        let wan = Arc::new(Mutex::new(WanModel::from_topology(&topology)));
        let layout = Layout::from_config(&topology.memstore);
        let stats = Arc::new(TxnStats::default());
        let mut verbs = Vec::new();
        let mut dcs = Vec::new();
        let images = (topology.durability == redt_proto::Durability::Disk).then(|| match &data_root {
            Some(root) => ImagesDir { path: root.join("disk"), remove: false },
            None => {
                static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let dir = std::env::temp_dir().join(format!("redt-images-{}-{n}", std::process::id()));
                ImagesDir { path: dir, remove: true }
            }
        });
        for dc in &topology.dcs {
            let local = Arc::new(LocalVerbs::in_process(dc.nodes.iter().copied(), layout.size));
            if let Some(images) = &images {
                images.attach(&local, &dc.nodes, layout.size)?;
            }
            for &n in &dc.nodes {
                let region = local.region(n).expect("region of a DC node");
                layout.format(region);
                region.sync()?;
            }
            let v: Arc<dyn Verbs> = local.clone();
            dcs.push(Arc::new(DcHandle::new(&topology, v)));
            verbs.push(local);
        }
        let mut counted: Vec<Arc<dyn Verbs>> = Vec::new();
        let mut tcp_servers = Vec::new();
        // The handle each node runs its executors over, by node id.
        let node_dcs: Vec<Arc<DcHandle>> = if options.protocol == Protocol::RedtTcp {
            let limits = ServerLimits::from_config(&topology.verbs);
            let mut tls = Vec::new();
            for n in &topology.nodes {
                let identity = certs.node(n.id).expect("an identity per node");
                tls.push(verbs_tls(identity, &topology, n.id)?);
            }
            for n in &topology.nodes {
                let backend = verbs[n.dc.0 as usize].clone();
                let at = SocketAddr::new(n.listen.ip(), 0);
                let node_tls = tls[n.id.0 as usize].clone();
                tcp_servers.push(TcpVerbsServer::spawn_with_limits(at, n.id, backend, node_tls, limits)?);
            }
            let mut handles = Vec::new();
            for n in &topology.nodes {
                let peers: HashMap<NodeId, SocketAddr> = topology.dcs[n.dc.0 as usize]
                    .nodes
                    .iter()
                    .filter(|&&p| p != n.id)
                    .map(|&p| (p, tcp_servers[p.0 as usize].local_addr()))
                    .collect();
                let tcp = TcpVerbs::new(n.id, verbs[n.dc.0 as usize].clone(), peers, tls[n.id.0 as usize].clone())
                    .with_source_ip(n.listen.ip());
                let tcp = Arc::new(tcp);
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
        let lives: Vec<NodeLife> = topology
            .nodes
            .iter()
            .map(|n| NodeLife {
                dc: node_dcs[n.id.0 as usize].clone(),
                region: verbs[n.dc.0 as usize].region(n.id).expect("region of a DC node").clone(),
                data_dir: data_root.as_ref().map(|r| r.join(&n.name)),
                current: Arc::new(AtomicU64::new(0)),
                started: AtomicU64::new(0),
            })
            .collect();
        let mut sockets = Vec::new();
        for n in &topology.nodes {
            let socket = bind_socket(n.listen, n.dc, &wan, BIND_PATIENCE)
                .await
                .map_err(|e| Error::topology(format!("{} cannot bind {}: {e}", n.name, n.listen)))?;
            sockets.push(socket);
        }
        let mut cluster = EmbeddedCluster {
            topology: topology.clone(),
            nodes: Arc::new(RwLock::new(Vec::new())),
            dcs,
            wan,
            stats,
            counted,
            tcp_servers,
            _images: images,
            sockets,
            certs,
            lives,
            options,
            metrics: Vec::new(),
        };
        let mut nodes = Vec::new();
        for n in &topology.nodes {
            nodes.push(cluster.start_node(n.id)?);
        }
        *cluster.nodes.write().unwrap_or_else(|p| p.into_inner()) = nodes;
        for n in &topology.nodes {
            let Some(addr) = topology.metrics_addr(n.id) else { continue };
            let (lives, i) = (cluster.nodes.clone(), n.id.0 as usize);
            let source: NodeSource = Arc::new(move || lives.read().unwrap_or_else(|p| p.into_inner()).get(i).cloned());
            // Over TLS, with the node's own certificate (`metrics.tls`); served here rather than
            // by each life's `NodeSpec`, as the endpoint outlives the lives.
            let endpoint = match cluster.certs.node(n.id) {
                Some(identity) => MetricsEndpoint::new(addr, &topology.metrics, identity),
                None => Err(Error::topology(format!("no certificate for {}", n.name))),
            };
            match endpoint.and_then(|endpoint| endpoint.serve(&topology.metrics, source)) {
                Ok(server) => cluster.metrics.push(server),
                Err(e) => {
                    cluster.shutdown();
                    return Err(e);
                }
            }
        }
        Ok(cluster)
    }

    /// Starts a new life of node `id` on its region, its socket handed over to it.
    fn start_node(&self, id: NodeId) -> Result<Arc<Node>> {
        let n = self.topology.nodes.get(id.0 as usize).ok_or_else(|| Error::topology(format!("no node {id}")))?;
        let life = &self.lives[id.0 as usize];
        let number = life.started.fetch_add(1, Ordering::AcqRel) + 1;
        life.current.store(number, Ordering::Release);
        let socket = Arc::new(LifeSocket {
            inner: self.sockets[id.0 as usize].clone(),
            life: number,
            current: life.current.clone(),
        });
        let identity =
            self.certs.node(n.id).ok_or_else(|| Error::topology(format!("no certificate for {}", n.name)))?;
        let started = NodeSpec {
            topology: self.topology.clone(),
            node: n.id,
            dc: life.dc.clone(),
            region: life.region.clone(),
            identity,
            socket: SocketSpec::Custom(socket),
            wan: self.wan.clone(),
            options: self.options.clone(),
            stats: self.stats.clone(),
            data_dir: life.data_dir.clone(),
            verbs_server: self.tcp_servers.get(id.0 as usize).map(TcpVerbsServer::counts_handle),
            // The node's endpoint serves every life (`start_in`).
            metrics: None,
        }
        .bind()?
        .start()?;
        Ok(started.node)
    }

    /// Stops node `id` as a killed process stops: its socket goes deaf and mute at once (see
    /// `LifeSocket`: it answers nothing), its QUIC endpoint closes, its executor, replay,
    /// recovery, failure-detector and membership tasks stop. Its MemStore region stays as it is, still reachable by the
    /// other nodes of its DC through the verbs (a killed process's shared memory file stays
    /// too). Blocks until the executor and replay threads have stopped.
    ///
    /// # Errors
    /// An unknown node.
    pub fn kill(&self, id: NodeId) -> Result<()> {
        let node =
            self.nodes_read().get(id.0 as usize).cloned().ok_or_else(|| Error::topology(format!("no node {id}")))?;
        self.lives[id.0 as usize].current.store(0, Ordering::Release);
        node.shutdown();
        Ok(())
    }

    /// Starts a new life of node `id` (stopped by [`EmbeddedCluster::kill`]) on the same
    /// MemStore region, address and data directory, as `redt cluster start --node` starts a
    /// killed process again: it formats nothing, takes its next incarnation from its MemStore
    /// and learns the current placement from the membership. Returns the new life.
    ///
    /// # Errors
    /// An unknown node, a node that cannot start.
    pub fn restart(&self, id: NodeId) -> Result<Arc<Node>> {
        let node = self.start_node(id)?;
        let mut nodes = self.nodes.write().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = nodes.get_mut(id.0 as usize) {
            *slot = node.clone();
        }
        Ok(node)
    }

    fn nodes_read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<Node>>> {
        self.nodes.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Every node's current life, by node id.
    pub fn nodes(&self) -> Vec<Arc<Node>> {
        self.nodes_read().clone()
    }

    /// The newest placement any node runs (the topology file's until the membership changed
    /// it): what checks after a failover must read.
    pub fn placement(&self) -> Placement {
        let newest = self.nodes_read().iter().map(|n| n.placement()).max_by_key(|t| t.epoch());
        newest.unwrap_or_else(|| Placement::initial(self.topology.clone()))
    }

    /// A client of this cluster over QUIC with its client certificate (status requests,
    /// submissions as an outside client would make them); calls time out after
    /// `call_timeout`. Must run inside a tokio runtime.
    ///
    /// # Errors
    /// A socket that cannot bind.
    pub fn client(&self, call_timeout: Duration) -> Result<Client> {
        Client::with_identity(self.topology.clone(), &self.certs.client, call_timeout)
    }

    /// As [`EmbeddedCluster::client`], with the operator certificate: its admin requests
    /// (`Client::netem_set`) are served.
    ///
    /// # Errors
    /// A socket that cannot bind.
    pub fn operator(&self, call_timeout: Duration) -> Result<Client> {
        Client::with_identity(self.topology.clone(), &self.certs.operator, call_timeout)
    }

    /// Sets the RTT of the one-way link `from → to` (the netem model every socket shares).
    ///
    /// # Errors
    /// An unknown DC.
    pub fn set_rtt(&self, from: DcId, to: DcId, rtt: Duration) -> Result<()> {
        let mut wan = self.wan.lock().map_err(|_| Error::topology("WAN model poisoned"))?;
        let mut c = wan.link(from, to).ok_or_else(|| Error::topology(format!("no link {from} -> {to}")))?;
        c.rtt = rtt;
        wan.set_link(from, to, c).map_err(|e| Error::topology(e.to_string()))
    }

    /// Cuts (or heals) the link between DCs `a` and `b`, both ways.
    ///
    /// # Errors
    /// An unknown DC.
    pub fn set_partitioned(&self, a: DcId, b: DcId, cut: bool) -> Result<()> {
        let mut wan = self.wan.lock().map_err(|_| Error::topology("WAN model poisoned"))?;
        wan.set_partitioned(a, b, cut).map_err(|e| Error::topology(e.to_string()))?;
        wan.set_partitioned(b, a, cut).map_err(|e| Error::topology(e.to_string()))
    }

    /// Puts every link back to the topology file's conditions (no cut, the file's RTTs).
    ///
    /// # Errors
    /// The WAN model's lock is poisoned.
    pub fn reset_links(&self) -> Result<()> {
        *self.wan.lock().map_err(|_| Error::topology("WAN model poisoned"))? = WanModel::from_topology(&self.topology);
        Ok(())
    }

    /// Loads `records_per_partition` records of `table` into every replica: keys
    /// `0..records_per_partition × partitions`, each on the replicas of its partition, every
    /// cell zero. `progress` is called with the number of records loaded so far.
    ///
    /// # Errors
    /// A full heap or index (the MemStore is too small), a duplicate key.
    pub fn load(&self, table: TableId, records_per_partition: u64, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        let schema = self.topology.table(table).ok_or_else(|| Error::topology(format!("no table {table}")))?;
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

    /// The current life of the node with id `id`.
    ///
    /// # Panics
    /// If `id` is not a node of the topology.
    pub fn node(&self, id: NodeId) -> Arc<Node> {
        self.nodes_read()[id.0 as usize].clone()
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
            .map_err(|_| Error::topology("WAN model poisoned"))?
            .set_isolated(dc, isolated)
            .map_err(|e| Error::topology(e.to_string()))
    }

    /// Where each node serves its metrics, by node id (empty without the topology's
    /// `metrics:` section).
    pub fn metrics_addrs(&self) -> Vec<SocketAddr> {
        self.metrics.iter().map(MetricsServer::local_addr).collect()
    }

    /// Stops every node (and, under `redt-tcp`, every TCP verbs server; and every metrics
    /// endpoint).
    pub fn shutdown(&self) {
        for m in &self.metrics {
            m.shutdown();
        }
        for n in self.nodes_read().iter() {
            n.shutdown();
        }
        for s in &self.tcp_servers {
            s.shutdown();
        }
    }
}
