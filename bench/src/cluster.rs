//! `redt bench ycsb`: YCSB across DCs on the embedded cluster (every node of a topology in
//! this process, real QUIC on loopback behind the netem socket) — the main job.
//!
//! RedT §6 defaults: 10 operations per transaction, Zipf θ 0.2, 50% updates, every
//! transaction inter-DC with its primaries on 2 nodes in 2 DCs: a client on node `c`
//! draws its keys from the partition whose primary is `c` and from one whose primary is a
//! node of another DC. [`YcsbConfig`] changes the mix (YCSB core workloads A–D, F) and the
//! shape (inter-DC ratio, partitions and DCs per transaction); [`draw_txn`] draws.

use crate::clients::retry_rng;
use crate::interval::{IntervalOptions, Intervals, Snapshot};
use crate::progress::bar;
use crate::report::{CpuCost, Outcomes, Retries, RetryCounts, VerbsPerTxn};
use crate::ycsb::{draw_update, MixReport, OpKind, YcsbConfig};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use redt_coordinator::{
    retrying, Class, ClassReport, CoordinatorOptions, EmbeddedCluster, Node, Retried, RetryPolicy, TxnStatus,
};
use redt_dc_executor::{KvOp, YcsbOp};
use redt_proto::{NodeId, PartitionId, Protocol, TableId, Topology};
use redt_protocol::call;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
    /// Per-interval rows of the measured interval (off by default).
    pub interval: IntervalOptions,
    /// How long to measure the embedded cluster's idle CPU, once it is up and loaded and
    /// before the clients start ([`CpuCost::idle_cpu_cores`]; usually
    /// [`crate::report::DEFAULT_IDLE_WINDOW`]); zero: not measured. A run against a running
    /// cluster has no idle window.
    pub idle_window: Duration,
    /// How the clients retry a transaction that aborted for a retryable cause
    /// ([`RetryPolicy::none`] keeps the figures comparable with runs made before clients
    /// retried: one attempt per transaction).
    pub retry: RetryPolicy,
}

/// The cumulative figures of an embedded cluster's counters, `at` into the measured interval.
pub(crate) fn stats_snapshot(stats: &redt_coordinator::TxnStats, at: Duration) -> Snapshot {
    let mut s = Snapshot { at, latency_us: stats.latency_us(), ..Snapshot::zero() };
    for c in Class::all() {
        let r = stats.report(c);
        s.committed += r.committed;
        s.aborted += r.aborted;
        s.unknown += r.unknown;
    }
    s
}

/// Results of a cluster run.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterReport {
    /// Workload name.
    pub workload: String,
    /// The commit protocol every node ran (`redt`, `2pc-paxos`, …).
    pub protocol: Protocol,
    /// The YCSB mix and transaction shape.
    pub mix: MixReport,
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
    /// Transactions of the measured interval as the coordinators answered them: every
    /// attempt (the abort rate is per attempt); their latency is the acknowledgement's.
    #[serde(flatten)]
    pub outcomes: Outcomes,
    /// The clients' attempts and retries over the measured interval, the transactions given
    /// up and the aborted attempts by cause.
    #[serde(flatten)]
    pub retries: Retries,
    /// The CPU time of this process (every node, client and replay thread) over the measured
    /// interval, and over the idle window before the warm-up.
    #[serde(flatten)]
    pub cpu: CpuCost,
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
    /// Records inserted by committed transactions in the measured interval (workload D).
    pub inserted: u64,
}

/// Where one client's transactions go: the partitions grouped by the DC of their primary.
///
/// A transaction first takes the partition whose primary is the client's node (or one
/// with its primary in the client's DC), then, if inter-DC, one partition with its primary
/// in each of `dcs_per_txn − 1` other DCs, then more partitions of those DCs up to
/// `partitions_per_txn` (as many as those DCs have). An intra-DC transaction — and every
/// transaction when `partitions_per_txn` or `dcs_per_txn` is 1 — takes only partitions
/// with their primary in the client's DC (as many as exist, up to `partitions_per_txn`).
#[derive(Clone, Debug)]
pub struct TxnShape {
    my_dc: usize,
    mine: Option<PartitionId>,
    by_dc: Vec<Vec<PartitionId>>,
    all: Vec<PartitionId>,
}

impl TxnShape {
    /// The shape of transactions coordinated by `node`.
    pub fn new(topo: &Topology, node: NodeId) -> Self {
        let my_dc = topo.nodes[node.0 as usize].dc.0 as usize;
        let mut by_dc = vec![Vec::new(); topo.dcs.len()];
        for p in &topo.partitions {
            by_dc[topo.nodes[p.replicas[0].0 as usize].dc.0 as usize].push(p.id);
        }
        let mine = topo.partitions.iter().find(|p| p.replicas[0] == node).map(|p| p.id);
        TxnShape { my_dc, mine, by_dc, all: topo.partitions.iter().map(|p| p.id).collect() }
    }

    /// Draws the partitions of one transaction (distinct; the first is the client's own).
    pub fn partitions(&self, cfg: &YcsbConfig, rng: &mut impl Rng) -> Vec<PartitionId> {
        let want = cfg.partitions_per_txn.clamp(1, cfg.ops_per_txn.max(1));
        let local = &self.by_dc[self.my_dc];
        let first = self
            .mine
            .or_else(|| local.choose(rng).copied())
            .unwrap_or_else(|| self.all[rng.gen_range(0..self.all.len())]);
        let mut chosen = vec![first];
        let others: Vec<usize> =
            (0..self.by_dc.len()).filter(|&d| d != self.my_dc && !self.by_dc[d].is_empty()).collect();
        let inter = want >= 2
            && cfg.dcs_per_txn >= 2
            && !others.is_empty()
            && cfg.inter_dc_ratio > 0.0
            && rng.gen_bool(cfg.inter_dc_ratio.clamp(0.0, 1.0));
        let mut pool: Vec<PartitionId> = local.iter().copied().filter(|&p| p != first).collect();
        if inter {
            let extra = cfg.dcs_per_txn.min(others.len() + 1).min(want) - 1;
            for d in others.choose_multiple(rng, extra) {
                let p = *self.by_dc[*d].choose(rng).expect("non-empty by construction");
                chosen.push(p);
                pool.extend(self.by_dc[*d].iter().copied().filter(|&q| q != p));
            }
        }
        while chosen.len() < want && !pool.is_empty() {
            let i = rng.gen_range(0..pool.len());
            chosen.push(pool.swap_remove(i));
        }
        chosen
    }
}

/// The YCSB keys of every partition: the loaded ones (rank `i < records_per_partition` is
/// key `p + i·P`) and those inserted since (workload D), with YCSB's acknowledged-insert
/// window: reads only go to ranks below the lowest insert not yet settled.
pub struct KeySpace {
    partitions: u64,
    loaded: u64,
    live: Vec<AtomicU64>,
    windows: Vec<Mutex<InsertWindow>>,
    inserted: AtomicU64,
}

struct InsertWindow {
    next: u64,
    settled: std::collections::BTreeSet<u64>,
}

impl KeySpace {
    /// `records_per_partition` loaded records in each of `partitions` partitions.
    pub fn new(partitions: u64, records_per_partition: u64) -> Self {
        let rpp = records_per_partition.max(1);
        KeySpace {
            partitions,
            loaded: rpp,
            live: (0..partitions).map(|_| AtomicU64::new(rpp)).collect(),
            windows: (0..partitions)
                .map(|_| Mutex::new(InsertWindow { next: rpp, settled: Default::default() }))
                .collect(),
            inserted: AtomicU64::new(0),
        }
    }

    /// As [`KeySpace::new`], with the inserts of earlier runs taken into account: partition
    /// `p`'s next insert takes rank `next[p]` (or the first beyond the loaded ones, when
    /// `next` has no entry or a lower one), so a run never inserts over an earlier run's
    /// records. Reads stay on the loaded ranks until this run's inserts settle.
    pub fn resume(partitions: u64, records_per_partition: u64, next: &[u64]) -> Self {
        let k = KeySpace::new(partitions, records_per_partition);
        for (w, &n) in k.windows.iter().zip(next) {
            let mut w = w.lock().expect("insert window");
            w.next = w.next.max(n);
        }
        k
    }

    /// Per partition, the rank the next insert would take (for [`KeySpace::resume`]).
    pub fn next_ranks(&self) -> Vec<u64> {
        self.windows.iter().map(|w| w.lock().expect("insert window").next).collect()
    }

    /// The key of rank `rank` in partition `p`.
    pub fn key(&self, p: PartitionId, rank: u64) -> u64 {
        p.0 as u64 + rank * self.partitions
    }

    /// Ranks readable in `p` (loaded, plus inserts settled without a gap).
    pub fn live(&self, p: PartitionId) -> u64 {
        self.live[p.0 as usize].load(Ordering::Acquire)
    }

    /// A fresh rank of `p` to insert.
    pub fn reserve(&self, p: PartitionId) -> u64 {
        let mut w = self.windows[p.0 as usize].lock().expect("insert window");
        w.next += 1;
        w.next - 1
    }

    /// The insert of `rank` in `p` finished (committed or not: an aborted upsert leaves the
    /// record created empty in the DCs that ran it).
    pub fn settle(&self, p: PartitionId, rank: u64, committed: bool) {
        if committed {
            self.inserted.fetch_add(1, Ordering::Relaxed);
        }
        let mut w = self.windows[p.0 as usize].lock().expect("insert window");
        w.settled.insert(rank);
        let live = &self.live[p.0 as usize];
        let mut l = live.load(Ordering::Acquire);
        while w.settled.remove(&l) {
            l += 1;
        }
        live.store(l, Ordering::Release);
    }

    /// Inserts committed so far.
    pub fn inserted(&self) -> u64 {
        self.inserted.load(Ordering::Relaxed)
    }

    /// Records loaded per partition.
    pub fn loaded(&self) -> u64 {
        self.loaded
    }
}

/// One drawn transaction.
#[derive(Clone, Debug, PartialEq)]
pub enum DrawnTxn {
    /// Reads, updates and read-modify-writes: a YCSB procedure (reads fetch every cell).
    Ycsb(Vec<YcsbOp>),
    /// A transaction with inserts (workload D): a key/value procedure on the YCSB table,
    /// whose operations create missing records — reads fetch cell 0, inserts write cell 0 —
    /// and the `(partition, rank)` of each insert.
    Kv(Vec<KvOp>, Vec<(PartitionId, u64)>),
}

impl DrawnTxn {
    /// The procedure call on `table` (records of `cells` cells).
    pub fn call(&self, table: TableId, cells: usize) -> redt_proto::wire::ProcedureCall {
        match self {
            DrawnTxn::Ycsb(ops) => call::ycsb_call(table, cells, ops),
            DrawnTxn::Kv(ops, _) => call::kv_call(table, ops),
        }
    }

    /// The key of every operation, in order.
    pub fn keys(&self) -> Vec<u64> {
        match self {
            DrawnTxn::Ycsb(ops) => ops
                .iter()
                .map(|o| match o {
                    YcsbOp::Read { key } | YcsbOp::Update { key, .. } => *key,
                })
                .collect(),
            DrawnTxn::Kv(ops, _) => ops
                .iter()
                .map(|o| match o {
                    KvOp::Read(k)
                    | KvOp::Write(k, _)
                    | KvOp::Add(k, _)
                    | KvOp::Append(k, _)
                    | KvOp::Delete(k)
                    | KvOp::Check(k, _)
                    | KvOp::Scan(k, _, _) => *k,
                })
                .collect(),
        }
    }

    /// The distinct partitions its keys live in, of `table` in `topo`.
    pub fn partitions(&self, topo: &Topology, table: &redt_proto::TableSchema) -> Vec<PartitionId> {
        let mut parts: Vec<PartitionId> = self.keys().into_iter().map(|k| topo.partition_of(table, k)).collect();
        parts.sort_unstable();
        parts.dedup();
        parts
    }

    /// The inserts' `(partition, rank)`.
    pub fn inserts(&self) -> &[(PartitionId, u64)] {
        match self {
            DrawnTxn::Ycsb(_) => &[],
            DrawnTxn::Kv(_, i) => i,
        }
    }
}

/// Draws one transaction: `ops_per_txn` operations on distinct keys, spread round-robin
/// over the partitions [`TxnShape::partitions`] picks, each of the kind and on the key the
/// workload draws. Records have `cells` cells of `cell_bytes` bytes.
pub fn draw_txn(
    shape: &TxnShape,
    keys: &KeySpace,
    cfg: &YcsbConfig,
    cells: usize,
    cell_bytes: usize,
    rng: &mut impl Rng,
) -> DrawnTxn {
    let parts = shape.partitions(cfg, rng);
    if cfg.workload == crate::ycsb::Workload::E {
        return draw_e(&parts, keys, cfg, cell_bytes, rng);
    }
    let mut planned: Vec<(OpKind, u64)> = Vec::with_capacity(cfg.ops_per_txn);
    let mut inserts = Vec::new();
    let mut guard = 0;
    while planned.len() < cfg.ops_per_txn && guard < 10 * cfg.ops_per_txn + 100 {
        guard += 1;
        let p = parts[planned.len() % parts.len()];
        match cfg.op_kind(rng) {
            OpKind::Insert => {
                let rank = keys.reserve(p);
                inserts.push((p, rank));
                planned.push((OpKind::Insert, keys.key(p, rank)));
            }
            kind => {
                let k = keys.key(p, cfg.rank(keys.live(p), rng));
                if !planned.iter().any(|&(_, x)| x == k) {
                    planned.push((kind, k));
                }
            }
        }
    }
    let value = |rng: &mut _| {
        let byte: u8 = Rng::gen(rng);
        vec![byte; cell_bytes]
    };
    if !inserts.is_empty() {
        let mut ops = Vec::with_capacity(planned.len() + 1);
        for (kind, k) in planned {
            match kind {
                OpKind::Read => ops.push(KvOp::Read(k)),
                OpKind::Update | OpKind::Insert => ops.push(KvOp::Write(k, value(rng))),
                OpKind::ReadModifyWrite => {
                    ops.push(KvOp::Read(k));
                    ops.push(KvOp::Write(k, value(rng)));
                }
            }
        }
        return DrawnTxn::Kv(ops, inserts);
    }
    let mut ops = Vec::with_capacity(planned.len() + 1);
    for (kind, key) in planned {
        if matches!(kind, OpKind::Read | OpKind::ReadModifyWrite) {
            ops.push(YcsbOp::Read { key });
        }
        if matches!(kind, OpKind::Update | OpKind::ReadModifyWrite) {
            ops.push(draw_update(rng, key, cells, cell_bytes));
        }
    }
    DrawnTxn::Ycsb(ops)
}

/// Draws one transaction of workload E: `ops_per_txn` operations, each an insert of a new
/// key (as workload D's) or a scan of `L` keys (uniform 1–100) from a key drawn from the
/// request distribution in one of `parts`, round-robin; a scan reads cell 0 of every key in
/// `k..k+L-1`, at most `L` rows, through the ordered index.
fn draw_e(parts: &[PartitionId], keys: &KeySpace, cfg: &YcsbConfig, cell_bytes: usize, rng: &mut impl Rng) -> DrawnTxn {
    let mut ops = Vec::with_capacity(cfg.ops_per_txn);
    let mut inserts = Vec::new();
    for i in 0..cfg.ops_per_txn {
        let p = parts[i % parts.len()];
        match cfg.op_kind(rng) {
            OpKind::Insert => {
                let rank = keys.reserve(p);
                inserts.push((p, rank));
                let byte: u8 = Rng::gen(rng);
                ops.push(KvOp::Write(keys.key(p, rank), vec![byte; cell_bytes]));
            }
            _ => {
                let from = keys.key(p, cfg.rank(keys.live(p), rng));
                let len = rng.gen_range(1..=crate::ycsb::MAX_SCAN_LENGTH);
                ops.push(KvOp::Scan(from, from.saturating_add(len - 1), len as u32));
            }
        }
    }
    DrawnTxn::Kv(ops, inserts)
}

/// Submits `txn` through `node` (again after a retryable abort, as `retry` says, pausing as
/// `pauses` draws, until `stop`) and settles its inserts once it ends; returns what its
/// attempts came to.
async fn run_one(
    node: &Arc<Node>,
    keys: &KeySpace,
    txn: &DrawnTxn,
    (table, cells): (TableId, usize),
    (retry, pauses, stop): (&RetryPolicy, &mut StdRng, &AtomicBool),
) -> Retried {
    let call = txn.call(table, cells);
    let out = retrying(retry, pauses, Some(stop), || node.submit(call.clone())).await;
    let ok = out.answer().status == TxnStatus::Committed;
    for &(p, r) in txn.inserts() {
        keys.settle(p, r, ok);
    }
    out
}

/// The YCSB table of `topo` (its first table) with its cell count and size.
pub(crate) fn ycsb_table(topo: &Topology) -> Result<(TableId, usize, usize), String> {
    let table = topo.tables.first().ok_or("the topology declares no table")?;
    Ok((table.id, table.cells.len(), table.cells.iter().map(|c| c.bytes as usize).min().unwrap_or(0)))
}

/// Runs YCSB on an embedded cluster of `topo` (its first table is the YCSB table).
///
/// # Errors
/// Cluster start-up (a loopback address that cannot bind), load (MemStore too small), as
/// text.
pub async fn run_cluster_ycsb(topo: Topology, cfg: &ClusterConfig) -> Result<ClusterReport, String> {
    let (tid, cells, cell_bytes) = ycsb_table(&topo)?;
    if cell_bytes == 0 {
        return Err("the YCSB table has an empty cell".into());
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
    let loaded = tokio::task::spawn_blocking(move || c2.load(tid, rpp, &mut |n| load_bar.set_position(n)))
        .await
        .map_err(|e| e.to_string())?;
    let loaded = match loaded {
        Ok(n) => n,
        Err(e) => {
            cluster.shutdown();
            return Err(format!("loading: {e}"));
        }
    };

    let idle_cpu_cores = crate::cpu::idle_cpu_cores(cfg.idle_window).await;

    let keys = Arc::new(KeySpace::new(topo.partitions.len() as u64, rpp));
    let stop = Arc::new(AtomicBool::new(false));
    // The clients' retries, counted from the end of the warm-up on.
    let retries = Arc::new(RetryCounts::default());
    let mut clients = tokio::task::JoinSet::new();
    for node in &cluster.nodes() {
        for c in 0..cfg.clients_per_node {
            let (node, stop, ycsb, keys) = (node.clone(), stop.clone(), cfg.ycsb.clone(), keys.clone());
            let (retry, retries) = (cfg.retry, retries.clone());
            let shape = TxnShape::new(&topo, node.id());
            let seed = cfg.seed ^ ((node.id().0 as u64) << 32 | c as u64);
            clients.spawn(async move {
                let mut rng = StdRng::seed_from_u64(seed);
                let mut pauses = retry_rng(seed);
                while !stop.load(Ordering::Relaxed) {
                    let txn = draw_txn(&shape, &keys, &ycsb, cells, cell_bytes, &mut rng);
                    let out = run_one(&node, &keys, &txn, (tid, cells), (&retry, &mut pauses, &stop)).await;
                    retries.add(&out);
                    if let TxnStatus::Unknown(_) = out.answer().status {
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
    retries.reset();
    let inserted0 = keys.inserted();
    let v0 = cluster.verb_counts();
    let run = bar(cfg.progress, cfg.duration.as_millis() as u64, "run");
    let mut rows = Intervals::start(&cfg.interval);
    let cpu = redt_coordinator::process::CpuWindow::start();
    let started = Instant::now();
    while started.elapsed() < cfg.duration {
        tokio::time::sleep(Duration::from_millis(100)).await;
        run.set_position(started.elapsed().as_millis() as u64);
        let r: u64 = Class::all().iter().map(|&c| cluster.stats.report(c).committed).sum();
        run.set_message(format!("{r} committed"));
        if let Ok(Some(iv)) = &mut rows {
            if iv.due(started.elapsed()) && started.elapsed() < cfg.duration {
                if let Err(e) = iv.take(stats_snapshot(&cluster.stats, started.elapsed()), &run) {
                    rows = Err(e);
                }
            }
        }
    }
    let elapsed = started.elapsed();
    let (cpu_spent, _) = cpu.read();
    let retried = retries.report(cfg.retry.retries);
    let classes: Vec<(String, ClassReport)> =
        Class::all().iter().map(|&c| (c.name().to_string(), cluster.stats.report(c))).collect();
    let hist = cluster.stats.latency_us();
    let verbs = cluster.verb_counts().since(&v0);
    let inserted = keys.inserted() - inserted0;
    let committed: u64 = classes.iter().map(|(_, c)| c.committed).sum();
    let aborted: u64 = classes.iter().map(|(_, c)| c.aborted).sum();
    let unknown: u64 = classes.iter().map(|(_, c)| c.unknown).sum();
    // The last row ends at the figures the report is made of.
    let rows = rows.and_then(|iv| match iv {
        Some(iv) => iv.finish(Snapshot { at: elapsed, committed, aborted, unknown, latency_us: hist.clone() }, &run),
        None => Ok(()),
    });
    run.finish_and_clear();
    stop.store(true, Ordering::Relaxed);
    while clients.join_next().await.is_some() {}
    // Let phase 2 of the last transactions finish before stopping the nodes.
    tokio::time::sleep(Duration::from_millis((rtt_ms * 3.0) as u64 + 100)).await;
    cluster.shutdown();
    rows.map_err(|e| format!("interval rows: {e}"))?;

    let rw_inter = classes[0].1;
    Ok(ClusterReport {
        workload: "ycsb".into(),
        protocol: cfg.options.protocol,
        mix: cfg.ycsb.summary(cells, cell_bytes),
        topology: cluster.topology.name.clone(),
        dcs: cluster.topology.dcs.len(),
        nodes: cluster.topology.nodes.len(),
        rtt_ms,
        early_ack: cfg.options.early_ack,
        clients: cfg.clients_per_node * cluster.nodes().len(),
        duration_s: elapsed.as_secs_f64(),
        outcomes: Outcomes::new(committed, aborted, unknown, elapsed, &hist),
        retries: retried,
        cpu: CpuCost::new(Some(cpu_spent), elapsed, committed, idle_cpu_cores),
        inter_dc_round_trips_per_txn: rw_inter.inter_dc_round_trips_per_txn,
        client_round_trips_per_txn: rw_inter.client_round_trips_per_txn,
        inter_dc_messages_per_txn: rw_inter.inter_dc_messages_per_txn,
        verbs_per_txn: VerbsPerTxn::new(&verbs, committed),
        classes,
        records: loaded,
        inserted,
    })
}

/// Results of a run against a running cluster (`redt bench ycsb --cluster F`): what the
/// clients observe. The per-class message and round-trip counters live in the node
/// processes and are not collected here.
#[derive(Clone, Debug, Serialize)]
pub struct RemoteReport {
    /// Workload name.
    pub workload: String,
    /// The YCSB mix and transaction shape.
    pub mix: MixReport,
    /// Topology name.
    pub topology: String,
    /// Concurrent clients in all.
    pub clients: usize,
    /// Measured seconds.
    pub duration_s: f64,
    /// Transactions of the measured interval (unknown: transport failures included), and
    /// their aborted attempts (the abort rate is per attempt); their latency as the clients
    /// observe it (QUIC round trip to the coordinator included), from the first attempt.
    #[serde(flatten)]
    pub outcomes: Outcomes,
    /// The clients' attempts and retries, the transactions given up and the aborted attempts
    /// by cause.
    #[serde(flatten)]
    pub retries: Retries,
    /// The CPU time of the nodes' processes over the measured interval, summed as their
    /// status reports it (not the clients'; an embedded drill's: this process's). Not
    /// measured when a node did not answer or restarted in between; no idle window.
    #[serde(flatten)]
    pub cpu: CpuCost,
}

impl RemoteReport {
    /// The report of YCSB clients (`cfg.clients_per_node` per node of `topo`, on a table of
    /// `cells` cells of `cell_bytes` bytes) that counted `counts` (committed transactions,
    /// aborted attempts, unknown transactions), the commit latencies `hist` and `retries` in
    /// `elapsed`, over which `cpu` of CPU time was spent (`None`: not measured).
    pub(crate) fn ycsb(
        topo: &Topology,
        cfg: &ClusterConfig,
        (cells, cell_bytes): (usize, usize),
        counts: &[AtomicU64; 3],
        (hist, retries): (&std::sync::Mutex<hdrhistogram::Histogram<u64>>, &RetryCounts),
        (elapsed, cpu): (Duration, Option<Duration>),
    ) -> RemoteReport {
        let [c, a, u] = [0, 1, 2].map(|i| counts[i].load(Ordering::Relaxed));
        let hist = hist.lock().unwrap_or_else(|p| p.into_inner());
        RemoteReport {
            workload: "ycsb".into(),
            mix: cfg.ycsb.summary(cells, cell_bytes),
            topology: topo.name.clone(),
            clients: cfg.clients_per_node * topo.nodes.len(),
            duration_s: elapsed.as_secs_f64(),
            outcomes: Outcomes::new(c, a, u, elapsed, &hist),
            retries: retries.report(cfg.retry.retries),
            cpu: CpuCost::new(cpu, elapsed, c, None),
        }
    }
}

/// Runs YCSB against a running cluster of `topo` through its coordinators, with the client
/// certificate in `certs` (failure drills: [`crate::drill_bench`]): [`run_remote_ycsb_on`] over
/// the loaded keys `0..cfg.records_per_partition` of every partition (the cluster must hold
/// them: `redt cluster up --records-per-partition N` or `redt workload init ycsb`).
///
/// # Errors
/// A missing client certificate, as text.
pub async fn run_remote_ycsb(
    topo: Topology,
    certs: &std::path::Path,
    cfg: &ClusterConfig,
) -> Result<RemoteReport, String> {
    let target = crate::workload::Target::connect(topo, certs)?;
    let keys = Arc::new(KeySpace::new(target.topo.partitions.len() as u64, cfg.records_per_partition.max(1)));
    run_remote_ycsb_on(&target, cfg, keys).await
}

/// Runs the YCSB clients of `cfg` (`clients_per_node` per node, each coordinated by its node)
/// on `target` over the key space `keys` (workload D settles its inserts there): warm-up,
/// then the measured interval with its interval rows.
///
/// # Errors
/// A topology without a YCSB table; writing the interval rows.
pub async fn run_remote_ycsb_on(
    target: &crate::workload::Target,
    cfg: &ClusterConfig,
    keys: Arc<KeySpace>,
) -> Result<RemoteReport, String> {
    let topo = target.topo.clone();
    let (tid, cells, cell_bytes) = ycsb_table(&topo)?;
    let stop = Arc::new(AtomicBool::new(false));
    let meter = Arc::new(crate::workload::Meter::default());
    let mut tasks = tokio::task::JoinSet::new();
    for n in &topo.nodes {
        for c in 0..cfg.clients_per_node {
            let (client, keys, stop, meter, ycsb) =
                (target.client.clone(), keys.clone(), stop.clone(), meter.clone(), cfg.ycsb.clone());
            let node = n.id;
            let shape = TxnShape::new(&topo, node);
            let seed = cfg.seed ^ ((node.0 as u64) << 32 | c as u64);
            let retry = cfg.retry;
            tasks.spawn(async move {
                let mut rng = StdRng::seed_from_u64(seed);
                let mut pauses = retry_rng(seed);
                while !stop.load(Ordering::Relaxed) {
                    let txn = draw_txn(&shape, &keys, &ycsb, cells, cell_bytes, &mut rng);
                    let t0 = Instant::now();
                    let call = txn.call(tid, cells);
                    let out = retrying(&retry, &mut pauses, Some(&stop), || client.submit(node, call.clone())).await;
                    for &(p, r) in txn.inserts() {
                        keys.settle(p, r, out.answer().status == TxnStatus::Committed);
                    }
                    meter.record_retried(&out, t0);
                }
            });
        }
    }
    let measured = crate::workload::measure(
        &meter,
        &stop,
        &target.cpu_source(),
        cfg.warmup,
        cfg.duration,
        &cfg.interval,
        cfg.progress,
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    while tasks.join_next().await.is_some() {}
    let measured = measured?;
    Ok(RemoteReport {
        workload: "ycsb".into(),
        mix: cfg.ycsb.summary(cells, cell_bytes),
        topology: topo.name.clone(),
        clients: cfg.clients_per_node * topo.nodes.len(),
        duration_s: measured.elapsed.as_secs_f64(),
        outcomes: meter.outcomes(measured.elapsed),
        retries: meter.retries(cfg.retry.retries),
        cpu: measured.cpu,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ycsb::Workload;
    use std::collections::BTreeSet;

    fn paper() -> Topology {
        Topology::from_yaml("default.yaml", include_str!("../../configs/default.yaml")).expect("default topology")
    }

    fn primary_dcs(topo: &Topology, keys: &[u64]) -> (BTreeSet<u32>, BTreeSet<u16>) {
        let parts: BTreeSet<u32> = keys.iter().map(|k| (k % topo.partitions.len() as u64) as u32).collect();
        let dcs = parts.iter().map(|&p| topo.nodes[topo.partitions[p as usize].replicas[0].0 as usize].dc.0).collect();
        (parts, dcs)
    }

    fn keys_of(t: &DrawnTxn) -> Vec<u64> {
        t.keys()
    }

    #[test]
    fn paper_shape_is_two_partitions_in_two_dcs_with_the_clients_own() {
        let topo = paper();
        let keys = KeySpace::new(8, 1000);
        let cfg = YcsbConfig::default();
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for node in 0..8u16 {
            let shape = TxnShape::new(&topo, NodeId(node));
            for _ in 0..50 {
                let t = draw_txn(&shape, &keys, &cfg, 10, 100, &mut rng);
                let k = keys_of(&t);
                assert_eq!(k.len(), 10);
                let (parts, dcs) = primary_dcs(&topo, &k);
                assert_eq!(parts.len(), 2);
                assert_eq!(dcs.len(), 2);
                assert!(parts.contains(&(node as u32)), "node {node}'s own partition");
            }
        }
    }

    #[test]
    fn inter_dc_ratio_partitions_and_dcs_per_txn() {
        let topo = paper();
        let keys = KeySpace::new(8, 1000);
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let shape = TxnShape::new(&topo, NodeId(0));
        let cfg = YcsbConfig { inter_dc_ratio: 0.3, ..Default::default() };
        let n = 4000;
        let inter = (0..n)
            .filter(|_| primary_dcs(&topo, &keys_of(&draw_txn(&shape, &keys, &cfg, 10, 100, &mut rng))).1.len() > 1)
            .count();
        let r = inter as f64 / n as f64;
        assert!((r - 0.3).abs() < 0.03, "inter-DC ratio {r}");
        let cfg = YcsbConfig { partitions_per_txn: 5, dcs_per_txn: 3, ..Default::default() };
        for _ in 0..200 {
            let (parts, dcs) = primary_dcs(&topo, &keys_of(&draw_txn(&shape, &keys, &cfg, 10, 100, &mut rng)));
            assert_eq!(parts.len(), 5);
            assert_eq!(dcs.len(), 3);
        }
        // Intra-DC: the 2 partitions with a primary in dc1.
        let cfg = YcsbConfig { inter_dc_ratio: 0.0, ..Default::default() };
        for _ in 0..100 {
            let (parts, dcs) = primary_dcs(&topo, &keys_of(&draw_txn(&shape, &keys, &cfg, 10, 100, &mut rng)));
            assert_eq!(parts, BTreeSet::from([0, 1]));
            assert_eq!(dcs.len(), 1);
        }
    }

    #[test]
    fn workload_d_inserts_new_keys_and_reads_settled_ones() {
        let topo = paper();
        let keys = KeySpace::new(8, 100);
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let shape = TxnShape::new(&topo, NodeId(2));
        let cfg = YcsbConfig::for_workload(Workload::D);
        let mut inserts = 0;
        let mut ops = 0;
        let mut pending = Vec::new();
        for _ in 0..2000 {
            let t = draw_txn(&shape, &keys, &cfg, 10, 100, &mut rng);
            ops += keys_of(&t).len();
            if let DrawnTxn::Kv(kv, ins) = &t {
                assert!(!ins.is_empty());
                for &(p, r) in ins {
                    assert!(r >= 100, "an insert takes a rank beyond the loaded ones");
                    let k = keys.key(p, r);
                    assert!(kv.iter().any(|o| matches!(o, KvOp::Write(x, v) if *x == k && v.len() == 100)));
                }
                inserts += ins.len();
                pending.extend_from_slice(ins);
            }
            // Reads never go beyond the acknowledged window.
            for k in keys_of(&t) {
                let p = PartitionId((k % 8) as u32);
                let rank = k / 8;
                assert!(rank < keys.live(p) || t.inserts().iter().any(|&(q, r)| q == p && r == rank));
            }
            // Settle out of order, every other round.
            if pending.len() > 3 {
                let (p, r) = pending.remove(1);
                keys.settle(p, r, true);
            }
        }
        let ratio = inserts as f64 / ops as f64;
        assert!((ratio - 0.05).abs() < 0.01, "insert ratio {ratio}");
        for (p, r) in pending {
            keys.settle(p, r, true);
        }
        let live: u64 = (0..8).map(|p| keys.live(PartitionId(p))).sum();
        assert_eq!(live, 800 + inserts as u64, "every insert settled: the window closes");
        assert_eq!(keys.inserted(), inserts as u64);
    }
}
