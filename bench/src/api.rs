//! `redt bench api`: the cost of the gRPC client API against the native QUIC client, side by
//! side in one run on one embedded cluster — the same key/value transactions, the same
//! closed-loop clients, the paths taking turns ([`run_api_compare`]).
//!
//! The paths:
//! - `native-quic`: `redt_coordinator::Client::submit`, the binary protocol the nodes speak
//!   among themselves (one QUIC call);
//! - `grpc`: `redt_client::Client::run_once` (one gRPC call over TLS on TCP to the node's
//!   endpoint, `redt-grpc`);
//! - `grpc-reserved`: `redt_client::Client::run` with one attempt: a reservation, then the
//!   transaction under it (two gRPC calls), so a lost answer could be asked about — the
//!   path an application takes by default.
//!
//! CPU is this process's (every node, client and endpoint is in it), per committed
//! transaction.

use crate::progress::bar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redt_client::{NodeEndpoint, Options, Tls, Txn};
use redt_coordinator::process::cpu_time;
use redt_coordinator::{CoordinatorOptions, EmbeddedCluster, TxnStatus};
use redt_dc_executor::KvOp;
use redt_grpc::{GrpcServer, GrpcTls, TransactionsService};
use redt_proto::{CertIdentity, NodeId, TableId, Topology};
use redt_protocol::call::kv_call;
use redt_transport::Validity;
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The paths compared, in the order each round runs them.
pub const PATHS: [&str; 3] = ["native-quic", "grpc", "grpc-reserved"];

/// What `redt bench api` runs.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// Closed-loop clients per node and path.
    pub clients_per_node: usize,
    /// How long each path runs per round.
    pub duration: Duration,
    /// How long each path runs, unmeasured, before the first round.
    pub warmup: Duration,
    /// Rounds: each runs every path once, in [`PATHS`] order.
    pub rounds: usize,
    /// Keys of the `kv` table the transactions draw from, uniformly.
    pub keys: u64,
    /// The clients' seed.
    pub seed: u64,
    /// The coordinators' options.
    pub options: CoordinatorOptions,
    /// Show progress bars.
    pub progress: bool,
}

/// One path's figures over every round.
#[derive(Clone, Debug, Serialize)]
pub struct PathReport {
    /// The path ([`PATHS`]).
    pub path: String,
    /// Transactions committed.
    pub committed: u64,
    /// Transactions aborted.
    pub aborted: u64,
    /// Transactions whose outcome the client did not learn (or that failed otherwise).
    pub failed: u64,
    /// Committed per second of the path's measured time.
    pub committed_per_s: f64,
    /// Median latency of a committed transaction, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// This process's CPU time per committed transaction, µs.
    pub cpu_us_per_commit: f64,
    /// This process's CPU time per second of the path's measured time (cores busy).
    pub cpu_cores: f64,
}

/// The report of [`run_api_compare`].
#[derive(Clone, Debug, Serialize)]
pub struct ApiReport {
    /// Topology name.
    pub topology: String,
    /// DCs.
    pub dcs: usize,
    /// Nodes.
    pub nodes: usize,
    /// Inter-DC RTT of the first link, ms.
    pub rtt_ms: f64,
    /// Clients per path (per node × nodes).
    pub clients: usize,
    /// Measured seconds per path and round.
    pub duration_s: f64,
    /// Rounds.
    pub rounds: usize,
    /// Each path's figures, in [`PATHS`] order.
    pub paths: Vec<PathReport>,
}

/// A transaction: read one key, write another (16 bytes), both uniform over `keys`.
fn draw(rng: &mut StdRng, keys: u64) -> (u64, u64, [u8; 16]) {
    (rng.gen_range(0..keys), rng.gen_range(0..keys), rng.gen())
}

/// Runs the comparison on an embedded cluster of `topo` (which needs a `kv` table).
///
/// # Errors
/// No `kv` table, a cluster or endpoint that cannot start, certificates that cannot be
/// written, as text.
pub async fn run_api_compare(topo: Topology, cfg: &ApiConfig) -> Result<ApiReport, String> {
    let table = topo.tables.iter().find(|t| t.name == "kv").ok_or("the topology has no `kv` table")?.id;
    let rtt_ms = topo.links.first().and_then(|l| l.get(1)).map(|c| c.rtt.as_secs_f64() * 1e3).unwrap_or(0.0);
    let cluster = Arc::new(
        EmbeddedCluster::start(topo, cfg.options.clone()).await.map_err(|e| format!("starting the cluster: {e}"))?,
    );
    let topo = cluster.topology.clone();
    let result = compare(&cluster, &topo, table, rtt_ms, cfg).await;
    cluster.shutdown();
    result
}

async fn compare(
    cluster: &Arc<EmbeddedCluster>,
    topo: &Arc<Topology>,
    table: TableId,
    rtt_ms: f64,
    cfg: &ApiConfig,
) -> Result<ApiReport, String> {
    // Every node's gRPC endpoint, at its own IP.
    let mut servers = Vec::new();
    let mut endpoints = Vec::new();
    for node in cluster.nodes() {
        let id = node.id();
        let entry = &topo.nodes[id.0 as usize];
        let service = TransactionsService::new(
            node.handler(),
            (**node.transport()).clone(),
            topo.clone(),
            topo.transport.handler_timeout,
        );
        let identity = &cluster.certs().nodes[id.0 as usize];
        let addr = SocketAddr::new(entry.listen.ip(), 0);
        let tls = GrpcTls::new(identity).map_err(|e| format!("the gRPC TLS of {}: {e}", entry.name))?;
        let server = GrpcServer::spawn(addr, tls, service, &topo.transport, 4 << 20)
            .await
            .map_err(|e| format!("the gRPC endpoint of {}: {e}", entry.name))?;
        endpoints.push(NodeEndpoint { node: entry.name.clone(), addr: server.local_addr().to_string() });
        servers.push(server);
    }
    // A client certificate of the cluster's CA, in a directory of this run.
    let dir = std::env::temp_dir().join(format!("redt-bench-api-{}", std::process::id()));
    let ca = &cluster.certs().ca;
    let written = ca
        .write_ca(&dir, &dir.join("ca.key"))
        .and_then(|()| {
            ca.write_identity(
                &dir,
                &CertIdentity::Client { name: "redt-bench-api".into() },
                None,
                Validity::starting_now(Duration::from_secs(24 * 3600)),
            )
        })
        .map_err(|e| format!("writing the client certificate: {e}"));
    let tls = written.and_then(|_| Tls::from_dir(&dir, "redt-bench-api").map_err(|e| e.to_string()));
    let _ = std::fs::remove_dir_all(&dir);
    let tls = tls?;
    let once = Options { attempts: 1, ..Options::default() };
    let grpc = Arc::new(redt_client::Client::connect(&endpoints, &tls, once).map_err(|e| e.to_string())?);
    let native = Arc::new(cluster.client(Duration::from_secs(10)).map_err(|e| e.to_string())?);
    let nodes: Vec<NodeId> = cluster.nodes().iter().map(|n| n.id()).collect();

    let paths = Paths { native, grpc, nodes, table, keys: cfg.keys.max(2) };
    let warm = bar(cfg.progress, (PATHS.len() * (cfg.rounds + 1)) as u64, "paths");
    for (p, _) in PATHS.iter().enumerate() {
        paths.run(p, cfg.clients_per_node, cfg.warmup, cfg.seed).await;
        warm.inc(1);
    }
    let mut total: Vec<Phase> = PATHS.iter().map(|_| Phase::default()).collect();
    for round in 0..cfg.rounds {
        for (p, t) in total.iter_mut().enumerate() {
            let phase = paths.run(p, cfg.clients_per_node, cfg.duration, cfg.seed ^ (round as u64 + 1) << 40).await;
            t.add(phase);
            warm.inc(1);
        }
    }
    warm.finish_and_clear();
    drop(servers);
    let report = |p: usize, t: &Phase| {
        let secs = t.wall.as_secs_f64().max(1e-9);
        PathReport {
            path: PATHS[p].into(),
            committed: t.committed,
            aborted: t.aborted,
            failed: t.failed,
            committed_per_s: t.committed as f64 / secs,
            p50_ms: t.quantile_ms(0.5),
            p99_ms: t.quantile_ms(0.99),
            cpu_us_per_commit: if t.committed == 0 { 0.0 } else { t.cpu.as_secs_f64() * 1e6 / t.committed as f64 },
            cpu_cores: t.cpu.as_secs_f64() / secs,
        }
    };
    Ok(ApiReport {
        topology: topo.name.clone(),
        dcs: topo.dcs.len(),
        nodes: topo.nodes.len(),
        rtt_ms,
        clients: cfg.clients_per_node * topo.nodes.len(),
        duration_s: cfg.duration.as_secs_f64(),
        rounds: cfg.rounds,
        paths: total.iter().enumerate().map(|(p, t)| report(p, t)).collect(),
    })
}

/// The clients of every path.
struct Paths {
    native: Arc<redt_coordinator::Client>,
    grpc: Arc<redt_client::Client>,
    nodes: Vec<NodeId>,
    table: TableId,
    keys: u64,
}

/// What one path did over some time.
#[derive(Default)]
struct Phase {
    committed: u64,
    aborted: u64,
    failed: u64,
    /// Each committed transaction's latency, µs.
    latencies: Vec<u64>,
    wall: Duration,
    cpu: Duration,
}

impl Phase {
    fn add(&mut self, other: Phase) {
        self.committed += other.committed;
        self.aborted += other.aborted;
        self.failed += other.failed;
        self.latencies.extend(other.latencies);
        self.wall += other.wall;
        self.cpu += other.cpu;
    }

    /// The `q` quantile of the latencies, ms (0 without any).
    fn quantile_ms(&self, q: f64) -> f64 {
        let mut v = self.latencies.clone();
        v.sort_unstable();
        let Some(last) = v.len().checked_sub(1) else { return 0.0 };
        v[((last as f64) * q).round() as usize] as f64 / 1e3
    }
}

/// How one transaction ended.
enum Ended {
    Committed,
    Aborted,
    Failed,
}

impl Paths {
    /// Runs path `p` with `per_node` clients per node for `duration`.
    async fn run(&self, p: usize, per_node: usize, duration: Duration, seed: u64) -> Phase {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = tokio::task::JoinSet::new();
        let (cpu0, t0) = (cpu_time(), Instant::now());
        for (i, &node) in self.nodes.iter().enumerate() {
            for c in 0..per_node {
                let (native, grpc, stop) = (self.native.clone(), self.grpc.clone(), stop.clone());
                let (table, keys) = (self.table, self.keys);
                let mut rng = StdRng::seed_from_u64(seed ^ ((i as u64) << 20) ^ c as u64);
                tasks.spawn(async move {
                    let mut phase = Phase::default();
                    while !stop.load(Ordering::Relaxed) {
                        let (read, write, value) = draw(&mut rng, keys);
                        let start = Instant::now();
                        let ended = match p {
                            0 => {
                                let call = kv_call(table, &[KvOp::Read(read), KvOp::Write(write, value.to_vec())]);
                                match native.submit(node, call).await.status {
                                    TxnStatus::Committed => Ended::Committed,
                                    TxnStatus::Aborted(_) => Ended::Aborted,
                                    TxnStatus::Unknown(_) => Ended::Failed,
                                }
                            }
                            _ => {
                                let txn = Txn::new("kv").get(read).put(write, value.to_vec());
                                let r = if p == 1 { grpc.run_once(&txn, i).await } else { grpc.run(&txn, i).await };
                                match r {
                                    Ok(_) => Ended::Committed,
                                    Err(redt_client::Error::Aborted { .. }) => Ended::Aborted,
                                    Err(_) => Ended::Failed,
                                }
                            }
                        };
                        match ended {
                            Ended::Committed => {
                                phase.committed += 1;
                                phase.latencies.push(start.elapsed().as_micros() as u64);
                            }
                            Ended::Aborted => phase.aborted += 1,
                            Ended::Failed => phase.failed += 1,
                        }
                    }
                    phase
                });
            }
        }
        tokio::time::sleep(duration).await;
        stop.store(true, Ordering::Relaxed);
        let mut total = Phase::default();
        while let Some(r) = tasks.join_next().await {
            if let Ok(p) = r {
                total.add(p);
            }
        }
        total.wall = t0.elapsed();
        total.cpu = cpu_time().saturating_sub(cpu0);
        total
    }
}
