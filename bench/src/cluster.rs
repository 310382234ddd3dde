//! `redt bench ycsb`: YCSB across DCs on the embedded cluster (every node of a topology in
//! this process, real QUIC on loopback behind the netem socket) — the main job.
//!
//! RedT §6 defaults: 10 operations per transaction, Zipf θ 0.2, 50% updates, every
//! transaction inter-DC with its primaries on 2 nodes in 2 DCs: a client on node `c`
//! draws its keys from the partition whose primary is `c` and from one whose primary is a
//! node of another DC.

use crate::report::{Latency, VerbsPerTxn};
use crate::ycsb::YcsbConfig;
use indicatif::{ProgressBar, ProgressStyle};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use redt_coordinator::{call, Class, ClassReport, CoordinatorOptions, EmbeddedCluster, TxnStatus};
use redt_dc_executor::YcsbOp;
use redt_proto::{NodeId, PartitionId, Topology};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Parameters of a cluster run.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Measured run time.
    pub duration: Duration,
    /// Warm-up before measuring.
    pub warmup: Duration,
    /// Concurrent clients per node (closed loop).
    pub clients_per_node: usize,
    /// Records per partition.
    pub records_per_partition: u64,
    /// The YCSB mix.
    pub ycsb: YcsbConfig,
    /// Coordinator options (early ack, timeouts).
    pub options: CoordinatorOptions,
    /// Seed of the clients' generators.
    pub seed: u64,
    /// Progress bars on standard error.
    pub progress: bool,
}

/// Results of a cluster run.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterReport {
    /// Workload name.
    pub workload: String,
    /// Topology name.
    pub topology: String,
    /// DCs × nodes.
    pub dcs: usize,
    /// Nodes.
    pub nodes: usize,
    /// Inter-DC RTT of the first link, in ms (the topology's).
    pub rtt_ms: f64,
    /// Early acknowledgement on?
    pub early_ack: bool,
    /// Concurrent clients in all.
    pub clients: usize,
    /// Measured seconds.
    pub duration_s: f64,
    /// Committed transactions.
    pub committed: u64,
    /// Aborted transactions.
    pub aborted: u64,
    /// Transactions with an unknown outcome.
    pub unknown: u64,
    /// Committed per second.
    pub committed_per_s: f64,
    /// aborted / (committed + aborted).
    pub abort_rate: f64,
    /// Acknowledgement latency of committed transactions, ms.
    pub latency_ms: Latency,
    /// Inter-DC round trips on the commit path per committed read-write inter-DC txn.
    pub inter_dc_round_trips_per_txn: f64,
    /// Inter-DC round trips the client waited for, per committed read-write inter-DC txn.
    pub client_round_trips_per_txn: f64,
    /// Inter-DC messages per committed read-write inter-DC txn.
    pub inter_dc_messages_per_txn: f64,
    /// RDMA verbs per committed transaction (all DCs).
    pub verbs_per_txn: VerbsPerTxn,
    /// The same figures for every class (RedT Table 2).
    pub classes: Vec<(String, ClassReport)>,
    /// Records loaded (per replica set).
    pub records: u64,
}

/// Keys of partition `p`: `p + i·P` for `i < records_per_partition`.
fn key_of(p: PartitionId, rank: u64, partitions: u64) -> u64 {
    p.0 as u64 + rank * partitions
}

/// FNV-1a of a rank (YCSB's scrambling).
fn scramble(x: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in x.to_le_bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Draws one transaction's operations for a client on `node`.
fn draw_ops(
    topo: &Topology,
    node: NodeId,
    cfg: &YcsbConfig,
    rpp: u64,
    zipf: Option<&Zipf<f64>>,
    rng: &mut impl Rng,
) -> Vec<YcsbOp> {
    let parts = topo.partitions.len() as u64;
    let my_dc = topo.nodes[node.0 as usize].dc;
    let mine = topo.partitions.iter().find(|p| p.replicas[0] == node).map(|p| p.id);
    let others: Vec<PartitionId> =
        topo.partitions.iter().filter(|p| topo.nodes[p.replicas[0].0 as usize].dc != my_dc).map(|p| p.id).collect();
    let first = mine.unwrap_or(PartitionId(rng.gen_range(0..parts) as u32));
    let second = if others.is_empty() { first } else { others[rng.gen_range(0..others.len())] };
    let chosen = [first, second];
    let cells = 10u16;
    let mut keys = Vec::with_capacity(cfg.ops_per_txn);
    let mut guard = 0;
    while keys.len() < cfg.ops_per_txn && guard < 10 * cfg.ops_per_txn + 100 {
        guard += 1;
        let p = chosen[keys.len() % 2];
        let rank = match zipf {
            Some(z) => (z.sample(rng) as u64).saturating_sub(1).min(rpp - 1),
            None => rng.gen_range(0..rpp),
        };
        let k = key_of(p, scramble(rank) % rpp, parts);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .map(|key| {
            if rng.gen_bool(cfg.write_ratio.clamp(0.0, 1.0)) {
                let byte: u8 = rng.gen();
                YcsbOp::Update { key, cell: rng.gen_range(0..cells), value: vec![byte; 100] }
            } else {
                YcsbOp::Read { key }
            }
        })
        .collect()
}

fn bar(show: bool, len: u64, what: &'static str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(len);
    b.set_style(
        ProgressStyle::with_template("{prefix:>7} [{bar:40}] {percent:>3}% {elapsed_precise} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    b.set_prefix(what);
    b
}

/// Runs YCSB on an embedded cluster of `topo`.
///
/// # Errors
/// Cluster start-up (a loopback address that cannot bind), load (MemStore too small), as
/// text.
pub async fn run_cluster_ycsb(topo: Topology, cfg: &ClusterConfig) -> Result<ClusterReport, String> {
    let table = topo.tables.first().ok_or("the topology declares no table")?.clone();
    if table.cells.len() < 10 || table.cells.iter().any(|c| c.bytes < 100) {
        return Err(format!("YCSB needs table `{}` to have 10 cells of at least 100 bytes", table.name));
    }
    let rtt_ms = topo.links.first().and_then(|l| l.get(1)).map(|c| c.rtt.as_secs_f64() * 1e3).unwrap_or(0.0);
    let cluster = Arc::new(
        EmbeddedCluster::start(topo, cfg.options.clone()).await.map_err(|e| format!("starting the cluster: {e}"))?,
    );
    let topo = cluster.topology.clone();
    let rpp = cfg.records_per_partition.max(1);
    let total = rpp * topo.partitions.len() as u64;
    let load_bar = bar(cfg.progress, total, "load");
    let c2 = cluster.clone();
    let tid = table.id;
    let loaded = tokio::task::spawn_blocking(move || c2.load(tid, rpp, &mut |n| load_bar.set_position(n)))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("loading: {e}"))?;

    let zipf = (cfg.ycsb.theta > 0.0).then(|| Zipf::new(rpp, cfg.ycsb.theta).expect("θ > 0 and n ≥ 1"));
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = tokio::task::JoinSet::new();
    for node in &cluster.nodes {
        for c in 0..cfg.clients_per_node {
            let (node, topo, stop, ycsb, zipf) = (node.clone(), topo.clone(), stop.clone(), cfg.ycsb.clone(), zipf);
            let seed = cfg.seed ^ ((node.id().0 as u64) << 32 | c as u64);
            let tid = table.id;
            clients.spawn(async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                while !stop.load(Ordering::Relaxed) {
                    let ops = draw_ops(&topo, node.id(), &ycsb, rpp, zipf.as_ref(), &mut rng);
                    let out = node.submit(call::ycsb_call(tid, 10, &ops)).await;
                    if let TxnStatus::Unknown(_) = out.status {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            });
        }
    }
    let warm = bar(cfg.progress, cfg.warmup.as_millis() as u64, "warm-up");
    let t0 = Instant::now();
    while t0.elapsed() < cfg.warmup {
        tokio::time::sleep(Duration::from_millis(100)).await;
        warm.set_position(t0.elapsed().as_millis() as u64);
    }
    warm.finish_and_clear();
    cluster.stats.reset();
    let v0 = cluster.verb_counts();
    let run = bar(cfg.progress, cfg.duration.as_millis() as u64, "run");
    let started = Instant::now();
    while started.elapsed() < cfg.duration {
        tokio::time::sleep(Duration::from_millis(100)).await;
        run.set_position(started.elapsed().as_millis() as u64);
        let r = cluster.stats.report(Class { read_write: true, inter_dc: true });
        run.set_message(format!("{} committed", r.committed));
    }
    let elapsed = started.elapsed().as_secs_f64();
    let classes: Vec<(String, ClassReport)> =
        Class::all().iter().map(|&c| (c.name().to_string(), cluster.stats.report(c))).collect();
    let hist = cluster.stats.latency_us();
    let verbs = cluster.verb_counts().since(&v0);
    run.finish_and_clear();
    stop.store(true, Ordering::Relaxed);
    while clients.join_next().await.is_some() {}
    // Let phase 2 of the last transactions finish before stopping the nodes.
    tokio::time::sleep(Duration::from_millis((rtt_ms * 3.0) as u64 + 100)).await;
    cluster.shutdown();

    let committed: u64 = classes.iter().map(|(_, c)| c.committed).sum();
    let aborted: u64 = classes.iter().map(|(_, c)| c.aborted).sum();
    let unknown: u64 = classes.iter().map(|(_, c)| c.unknown).sum();
    let rw_inter = classes[0].1;
    let us = Latency::from_histogram(&hist);
    Ok(ClusterReport {
        workload: "ycsb".into(),
        topology: cluster.topology.name.clone(),
        dcs: cluster.topology.dcs.len(),
        nodes: cluster.topology.nodes.len(),
        rtt_ms,
        early_ack: cfg.options.early_ack,
        clients: cfg.clients_per_node * cluster.nodes.len(),
        duration_s: elapsed,
        committed,
        aborted,
        unknown,
        committed_per_s: committed as f64 / elapsed,
        abort_rate: if committed + aborted == 0 { 0.0 } else { aborted as f64 / (committed + aborted) as f64 },
        latency_ms: Latency { p50: us.p50 / 1e3, p99: us.p99 / 1e3, p999: us.p999 / 1e3, mean: us.mean / 1e3 },
        inter_dc_round_trips_per_txn: rw_inter.inter_dc_round_trips_per_txn,
        client_round_trips_per_txn: rw_inter.client_round_trips_per_txn,
        inter_dc_messages_per_txn: rw_inter.inter_dc_messages_per_txn,
        verbs_per_txn: VerbsPerTxn::new(&verbs, committed),
        classes,
        records: loaded,
    })
}

/// Results of a run against a running cluster (`redt bench ycsb --cluster F`): what the
/// clients observe. The per-class message and round-trip counters live in the node
/// processes and are not collected here.
#[derive(Clone, Debug, Serialize)]
pub struct RemoteReport {
    /// Workload name.
    pub workload: String,
    /// Topology name.
    pub topology: String,
    /// Concurrent clients in all.
    pub clients: usize,
    /// Measured seconds.
    pub duration_s: f64,
    /// Committed transactions.
    pub committed: u64,
    /// Aborted transactions.
    pub aborted: u64,
    /// Transactions with an unknown outcome (including transport failures).
    pub unknown: u64,
    /// Committed per second.
    pub committed_per_s: f64,
    /// aborted / (committed + aborted).
    pub abort_rate: f64,
    /// Client-observed latency of committed transactions (QUIC round trip to the
    /// coordinator included), ms.
    pub latency_ms: Latency,
}

/// Runs YCSB against a running cluster of `topo` through its coordinators, with the client
/// certificate in `certs`. The cluster must have been started with at least
/// `cfg.records_per_partition` records per partition (`redt cluster up
/// --records-per-partition N`).
///
/// # Errors
/// A missing client certificate, as text.
pub async fn run_remote_ycsb(
    topo: Topology,
    certs: &std::path::Path,
    cfg: &ClusterConfig,
) -> Result<RemoteReport, String> {
    use redt_coordinator::Client;
    use std::sync::atomic::AtomicU64;
    let topo = Arc::new(topo);
    let table = topo.tables.first().ok_or("the topology declares no table")?.clone();
    let client = Arc::new(Client::connect(topo.clone(), certs, Duration::from_secs(10)).map_err(|e| e.to_string())?);
    let rpp = cfg.records_per_partition.max(1);
    let zipf = (cfg.ycsb.theta > 0.0).then(|| Zipf::new(rpp, cfg.ycsb.theta).expect("θ > 0 and n ≥ 1"));
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
    let hist = Arc::new(std::sync::Mutex::new(Latency::histogram()));
    let mut tasks = tokio::task::JoinSet::new();
    for n in &topo.nodes {
        for c in 0..cfg.clients_per_node {
            let (client, topo, stop, measuring, counts, hist, ycsb) = (
                client.clone(),
                topo.clone(),
                stop.clone(),
                measuring.clone(),
                counts.clone(),
                hist.clone(),
                cfg.ycsb.clone(),
            );
            let node = n.id;
            let seed = cfg.seed ^ ((node.0 as u64) << 32 | c as u64);
            let tid = table.id;
            tasks.spawn(async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                while !stop.load(Ordering::Relaxed) {
                    let ops = draw_ops(&topo, node, &ycsb, rpp, zipf.as_ref(), &mut rng);
                    let t0 = Instant::now();
                    let out = client.submit(node, call::ycsb_call(tid, 10, &ops)).await;
                    if !measuring.load(Ordering::Relaxed) {
                        continue;
                    }
                    let k = match out.status {
                        TxnStatus::Committed => {
                            let _ = hist.lock().expect("histogram").record(t0.elapsed().as_micros().max(1) as u64);
                            0
                        }
                        TxnStatus::Aborted(_) => 1,
                        TxnStatus::Unknown(_) => 2,
                    };
                    counts[k].fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    }
    tokio::time::sleep(cfg.warmup).await;
    measuring.store(true, Ordering::Relaxed);
    let run = bar(cfg.progress, cfg.duration.as_millis() as u64, "run");
    let started = Instant::now();
    while started.elapsed() < cfg.duration {
        tokio::time::sleep(Duration::from_millis(100)).await;
        run.set_position(started.elapsed().as_millis() as u64);
    }
    measuring.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    run.finish_and_clear();
    stop.store(true, Ordering::Relaxed);
    while tasks.join_next().await.is_some() {}
    let [c, a, u] = [0, 1, 2].map(|i| counts[i].load(Ordering::Relaxed));
    let us = Latency::from_histogram(&hist.lock().expect("histogram"));
    Ok(RemoteReport {
        workload: "ycsb".into(),
        topology: topo.name.clone(),
        clients: cfg.clients_per_node * topo.nodes.len(),
        duration_s: elapsed,
        committed: c,
        aborted: a,
        unknown: u,
        committed_per_s: c as f64 / elapsed,
        abort_rate: if c + a == 0 { 0.0 } else { a as f64 / (c + a) as f64 },
        latency_ms: Latency { p50: us.p50 / 1e3, p99: us.p99 / 1e3, p999: us.p999 / 1e3, mean: us.mean / 1e3 },
    })
}
