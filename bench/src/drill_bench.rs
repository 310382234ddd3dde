//! `redt bench ycsb --cluster F --drill PLAN`: YCSB against a running cluster while a
//! [`DrillPlan`] runs ([`crate::drill`]), then the acknowledged-commits check
//! ([`redt_checkers::acked_writes`]).
//!
//! The clients are those of [`crate::run_remote_ycsb`] (closed loop, `clients_per_node` per
//! node, each with its node as coordinator) with three additions: every update writes a value
//! naming its attempt and every answer goes to the [`WriteLog`]; every answer of the measured
//! interval goes to the drill's [`Timeline`] (a commit with its latency and the data
//! partitions its transaction touched); and the clients of a node the drill has killed wait
//! until it serves again instead of submitting to a dead process.
//!
//! After the measured interval the clients stop, the drill's last actions finish, the cluster
//! settles ([`drill::settle`]), and cell 0 of every key an attempt wrote is read back through
//! the client (key/value reads of 32 keys of one partition at a time, retried while they
//! abort) and judged.

use crate::clients::{retry_rng, Submit};
use crate::cluster::{draw_txn, ycsb_table, ClusterConfig, DrawnTxn, KeySpace, RemoteReport, TxnShape};
use crate::cpu::CpuSource;
use crate::drill::{self, Counts, DownSet, DrillReport, DrillSetup, FaultDriver, LogLine, Timeline};
use crate::drill_embedded::{log_to, start_cluster, Coordinators, DrilledCluster, EmbeddedDrillReport};
use crate::drill_plan::DrillPlan;
use crate::progress::bar;
use crate::report::{Latency, RetryCounts};
use backon::{ExponentialBuilder, Retryable};
use indicatif::ProgressBar;
use rand::SeedableRng;
use redt_checkers::acked_writes::{encode, LostReport, WriteLog, TAG_BYTES};
use redt_coordinator::{Client, EmbeddedCluster, TxnStatus};
use redt_dc_executor::{KvOp, YcsbOp};
use redt_proto::{NodeId, Outcome, PartitionId, Protocol, TableId, Topology};
use redt_protocol::call::kv_call;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// What `redt bench ycsb --drill` measured: the clients' figures and the drill's.
#[derive(Clone, Debug, Serialize)]
pub struct DrillBenchReport {
    /// The clients' figures over the measured interval.
    #[serde(flatten)]
    pub run: RemoteReport,
    /// The drill's.
    pub drill: DrillReport,
}

/// Keys per read-back transaction.
const READ_BATCH: usize = 32;

/// Read-back transactions in flight at once.
const READ_PARALLEL: usize = 8;

/// How long a read-back transaction is retried (with exponential backoff) before its keys
/// count as unreadable.
const READ_RETRY_FOR: Duration = Duration::from_secs(2);

/// Stamps every update of `txn` with the value of attempt `seq` of `client` (run `nonce`);
/// returns the keys whose cell 0 it writes. Inserts (workload D) keep their values and are
/// not checked.
fn stamp(txn: &mut DrawnTxn, nonce: u32, client: u32, seq: u64) -> Vec<u64> {
    let mut cell0 = Vec::new();
    if let DrawnTxn::Ycsb(ops) = txn {
        for op in ops {
            if let YcsbOp::Update { key, cell, value } = op {
                *value = encode(nonce, client, seq, value.len());
                if *cell == 0 {
                    cell0.push(*key);
                }
            }
        }
    }
    cell0
}

fn us(t: Duration) -> u64 {
    t.as_micros().min(u64::MAX as u128) as u64
}

/// Reads cell 0 of `keys` through `client` after the drill: batches of [`READ_BATCH`] keys of
/// one partition of the placement `topo`, each through an up replica of it (or any node up), retried while they
/// abort or stay unknown. Returns each key with its value, `None` when unreadable.
async fn read_back(
    client: &Arc<Client>,
    topo: &Topology,
    table: TableId,
    keys: Vec<u64>,
    down: &BTreeSet<NodeId>,
) -> Vec<(u64, Option<Vec<u8>>)> {
    let Some(schema) = topo.table(table).cloned() else {
        return keys.into_iter().map(|k| (k, None)).collect();
    };
    let mut by_partition: BTreeMap<PartitionId, Vec<u64>> = BTreeMap::new();
    for k in keys {
        by_partition.entry(topo.partition_of(&schema, k)).or_default().push(k);
    }
    let up: Vec<NodeId> = topo.nodes.iter().map(|n| n.id).filter(|n| !down.contains(n)).collect();
    let mut batches: Vec<(NodeId, Vec<u64>)> = Vec::new();
    for (p, ks) in by_partition {
        let replicas = &topo.partitions[p.0 as usize].replicas;
        let Some(node) = replicas.iter().find(|n| !down.contains(n)).or(up.first()).copied() else {
            continue;
        };
        batches.extend(ks.chunks(READ_BATCH).map(|c| (node, c.to_vec())));
    }
    let mut out = Vec::new();
    for wave in batches.chunks(READ_PARALLEL) {
        let mut set = tokio::task::JoinSet::new();
        for (node, ks) in wave.iter().cloned() {
            let client = client.clone();
            set.spawn(async move {
                let ops: Vec<KvOp> = ks.iter().map(|&k| KvOp::Read(k)).collect();
                let read = || async {
                    let o = client.submit(node, kv_call(table, &ops)).await;
                    match o.status == TxnStatus::Committed && o.reads.len() == ks.len() {
                        true => Ok(o.reads),
                        false => Err(()),
                    }
                };
                let backoff = ExponentialBuilder::default()
                    .with_min_delay(Duration::from_millis(10))
                    .with_max_delay(Duration::from_millis(500))
                    .with_jitter()
                    .without_max_times()
                    .with_total_delay(Some(READ_RETRY_FOR));
                match read.retry(backoff).await {
                    Ok(reads) => ks.into_iter().zip(reads.into_iter().map(|r| Some(r.unwrap_or_default()))).collect(),
                    Err(()) => ks.into_iter().map(|k| (k, None)).collect::<Vec<_>>(),
                }
            });
        }
        while let Some(r) = set.join_next().await {
            out.extend(r.unwrap_or_default());
        }
    }
    out.sort_by_key(|(k, _)| *k);
    out
}

/// The drilled YCSB clients while they run, and what they recorded.
struct Clients {
    /// Every attempt's writes and what its client was told.
    writes: Arc<WriteLog>,
    /// Set at the start of the measured interval.
    measured_from: Arc<OnceLock<Instant>>,
    /// Committed transactions, aborted attempts, unknown transactions over the measured
    /// interval.
    counts: Arc<[AtomicU64; 3]>,
    /// Commit latencies of the measured interval, µs.
    hist: Arc<Mutex<hdrhistogram::Histogram<u64>>>,
    /// The transactions' attempts over the measured interval.
    retries: Arc<RetryCounts>,
    stop: Arc<AtomicBool>,
    tasks: tokio::task::JoinSet<()>,
    /// The table's cells are long enough for the write tags ([`TAG_BYTES`]).
    checked: bool,
}

/// Starts `cfg.clients_per_node` closed-loop YCSB clients per node of `topo` (table `tid` of
/// `cells` cells of `cell_bytes` bytes) submitting through `submit`; every answer of the
/// measured interval goes to `timeline`, every attempt's writes to the [`WriteLog`].
fn spawn_clients(
    topo: &Arc<Topology>,
    cfg: &ClusterConfig,
    (tid, cells, cell_bytes): (TableId, usize, usize),
    submit: Submit,
    timeline: Arc<Timeline>,
) -> Result<Clients, String> {
    let schema = topo.tables.first().cloned().ok_or("the topology declares no table")?;
    // Values of earlier runs on the same cluster must not pass for this run's.
    let nonce = (drill::unix_ms() as u32 ^ (cfg.seed as u32).rotate_left(16)) | 1;
    let writes = Arc::new(WriteLog::new(nonce));
    let checked = cell_bytes >= TAG_BYTES;
    let origin = Instant::now();
    let measured_from: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
    let keys = Arc::new(KeySpace::new(topo.partitions.len() as u64, cfg.records_per_partition.max(1)));
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
    let hist = Arc::new(Mutex::new(Latency::histogram()));
    let retries = Arc::new(RetryCounts::default());
    let mut tasks = tokio::task::JoinSet::new();
    for n in &topo.nodes {
        for c in 0..cfg.clients_per_node {
            let (submit, keys, stop, counts, hist, ycsb) =
                (submit.clone(), keys.clone(), stop.clone(), counts.clone(), hist.clone(), cfg.ycsb.clone());
            let (topo, schema, timeline, measured_from, writes) =
                (topo.clone(), schema.clone(), timeline.clone(), measured_from.clone(), writes.clone());
            let node = n.id;
            let shape = TxnShape::new(&topo, node);
            let seed = cfg.seed ^ ((node.0 as u64) << 32 | c as u64);
            let client_id = (u32::from(node.0) << 16) | c as u32;
            let (retry, retries) = (cfg.retry, retries.clone());
            tasks.spawn(async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                let mut pauses = retry_rng(seed);
                let mut seq = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let mut txn = draw_txn(&shape, &keys, &ycsb, cells, cell_bytes, &mut rng);
                    seq += 1;
                    // Every attempt of a retried transaction writes the same values: only its
                    // last attempt can have committed (the others aborted).
                    let written = stamp(&mut txn, writes.nonce(), client_id, seq);
                    let submitted = Instant::now();
                    let call = txn.call(tid, cells);
                    let Some(retried) = submit.submit_retrying(node, call, &retry, &mut pauses, &stop).await else {
                        // Every node is down: nothing was submitted.
                        for &(p, r) in txn.inserts() {
                            keys.settle(p, r, false);
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    };
                    let answered = Instant::now();
                    let out = retried.answer();
                    for &(p, r) in txn.inserts() {
                        keys.settle(p, r, out.status == TxnStatus::Committed);
                    }
                    let told = out.status.outcome();
                    if checked {
                        let (s, a) = (us(submitted.duration_since(origin)), us(answered.duration_since(origin)));
                        writes.record(client_id, seq, &written, s, a, told);
                    }
                    if let Some(&from) = measured_from.get() {
                        let (s, a) =
                            (submitted.saturating_duration_since(from), answered.saturating_duration_since(from));
                        // Every aborted attempt counts as an abort (the last one too when the
                        // transaction was given up).
                        let aborted = retried.aborts.len() as u64;
                        if aborted > 0 {
                            timeline.add(a, Counts { aborted, ..Default::default() });
                        }
                        let k = match told {
                            Outcome::Committed => {
                                let _ = hist
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .record((answered - submitted).as_micros().max(1) as u64);
                                timeline.committed(s, a, &txn.partitions(&topo, &schema));
                                Some(0)
                            }
                            Outcome::Aborted => None,
                            Outcome::Unknown => {
                                timeline.add(a, Counts { unknown: 1, ..Default::default() });
                                Some(2)
                            }
                        };
                        if !stop.load(Ordering::Relaxed) {
                            if let Some(k) = k {
                                counts[k].fetch_add(1, Ordering::Relaxed);
                            }
                            counts[1].fetch_add(aborted, Ordering::Relaxed);
                            retries.add(&retried);
                        }
                    }
                    if told == Outcome::Unknown {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            });
        }
    }
    Ok(Clients { writes, measured_from, counts, hist, retries, stop, tasks, checked })
}

impl Clients {
    /// The run's report: the clients' counts, latencies and attempts over the measured
    /// interval `measured` (its length and CPU time), on a table of `cells` cells of
    /// `cell_bytes` bytes.
    fn report(
        &self,
        topo: &Topology,
        cfg: &ClusterConfig,
        cells: (usize, usize),
        measured: (Duration, Option<Duration>),
    ) -> RemoteReport {
        RemoteReport::ycsb(topo, cfg, cells, &self.counts, (&self.hist, &self.retries), measured)
    }

    /// Lets the clients warm up for `cfg.warmup`, then measures for `cfg.duration`, calling
    /// `start_drill` with the start of the measured interval and its progress bar; stops the
    /// clients and returns the measured time and the CPU time `cpu` spent over it (`None`:
    /// unreadable, as when the drill killed a node).
    async fn measure(
        &mut self,
        cfg: &ClusterConfig,
        cpu: &CpuSource,
        start_drill: impl FnOnce(Instant, &ProgressBar),
    ) -> (Duration, Option<Duration>) {
        tokio::time::sleep(cfg.warmup).await;
        let run = bar(cfg.progress, cfg.duration.as_millis() as u64, "run");
        let cpu0 = cpu.read().await;
        let started = Instant::now();
        let _ = self.measured_from.set(started);
        start_drill(started, &run);
        while started.elapsed() < cfg.duration {
            tokio::time::sleep(Duration::from_millis(100)).await;
            run.set_position(started.elapsed().as_millis() as u64);
            run.set_message(format!("{} committed", self.counts[0].load(Ordering::Relaxed)));
        }
        self.stop.store(true, Ordering::Relaxed);
        let elapsed = started.elapsed();
        let cpu1 = cpu.read().await;
        run.finish_and_clear();
        while self.tasks.join_next().await.is_some() {}
        (elapsed, cpu0.until(&cpu1))
    }

    /// Reads back every key written (through `client`, on the placement `topo`, avoiding the
    /// nodes `down`) and judges it; `None` when the cells are too short for the tags.
    async fn lost(
        &self,
        client: &Arc<Client>,
        topo: &Topology,
        tid: TableId,
        down: &BTreeSet<NodeId>,
    ) -> Option<LostReport> {
        if !self.checked {
            return None;
        }
        let read = read_back(client, topo, tid, self.writes.keys(), down).await;
        Some(self.writes.report(&read))
    }
}

/// Runs YCSB against the running cluster of `topo` (client certificate in `certs`, the
/// clients as `cfg` says) while `plan` runs, its effects carried out by `driver`; then
/// settles, reads back every key written and reports. The nodes' status is asked with the
/// operator certificate `operator` of `certs` (settling counts the locks left, which the
/// nodes serve to an operator only). `on_log` gets the drill's log lines as they happen
/// (after the progress bar's, when shown).
///
/// # Errors
/// A plan whose last action is not within the measured interval, a topology without a YCSB
/// table, a missing client or operator certificate; as text.
pub async fn run_drill_ycsb(
    topo: Topology,
    certs: &std::path::Path,
    operator: &str,
    cfg: &ClusterConfig,
    plan: DrillPlan,
    driver: Arc<dyn FaultDriver>,
    on_log: Arc<dyn Fn(&LogLine) + Send + Sync>,
) -> Result<DrillBenchReport, String> {
    crate::drill_embedded::check_within(&plan, cfg.duration)?;
    let topo = Arc::new(topo);
    let table = ycsb_table(&topo)?;
    // A call to a node that dies mid-call is unknown after 5 s; a transaction takes far less.
    let client = Arc::new(Client::connect(topo.clone(), certs, Duration::from_secs(5)).map_err(|e| e.to_string())?);
    // The drill asks the nodes up for their status every 100 ms.
    let watcher = Arc::new(
        Client::connect_as(topo.clone(), certs, operator, Duration::from_millis(500))
            .map_err(|e| format!("the operator certificate {operator}: {e}"))?,
    );
    let timeline = Arc::new(Timeline::new(topo.partitions.len()));
    let down = Arc::new(DownSet::default());
    let submit = Submit::Remote { client: client.clone(), topo: topo.clone(), down: down.clone() };
    let mut clients = spawn_clients(&topo, cfg, table, submit, timeline.clone())?;
    let mut drill_task = None;
    let nodes = CpuSource::Nodes(watcher.clone(), topo.nodes.iter().map(|n| n.id).collect());
    let measured = clients
        .measure(cfg, &nodes, |started, run| {
            let printer = run.clone();
            let setup = DrillSetup {
                plan,
                topo: topo.clone(),
                driver,
                watcher: watcher.clone(),
                timeline: timeline.clone(),
                down: down.clone(),
                on_log: Arc::new(move |l: &LogLine| {
                    printer.println(l.to_string());
                    on_log(l)
                }),
                counts_from_status: false,
            };
            let until = cfg.duration;
            drill_task = Some(tokio::spawn(async move { drill::run(&setup, started, until).await }));
        })
        .await;
    let watch =
        drill_task.ok_or("the drill was never started")?.await.map_err(|e| format!("the drill task failed: {e}"))?;
    let left_down = down.snapshot();
    let settled = drill::settle(&watcher, &left_down).await;
    let lost = clients.lost(&client, &topo, table.0, &left_down).await;
    let report = drill::report(&watch, &timeline.snapshot(), cfg.duration, &settled, lost);
    Ok(DrillBenchReport { run: clients.report(&topo, cfg, (table.1, table.2), measured), drill: report })
}

/// What `redt bench ycsb --drill PLAN` (the embedded cluster) measured: the clients' figures,
/// and the drill's with the heals and settling after it and the acknowledged-commits check.
#[derive(Clone, Debug, Serialize)]
pub struct EmbeddedDrillBenchReport {
    /// The clients' figures over the measured interval.
    #[serde(flatten)]
    pub run: RemoteReport,
    /// The commit protocol every node ran.
    pub protocol: Protocol,
    /// Records loaded (per replica set).
    pub records: u64,
    /// The drill; its `lost` is the read-back after the cluster settled, on the current
    /// placement.
    pub drill: EmbeddedDrillReport,
}

/// Runs YCSB on an embedded cluster of `topo` while `plan` (expanded for `cfg.duration`) runs
/// ([`crate::drill_embedded`]: in-process stops and restarts, netem partitions and slow
/// links, the clients of a stopped node through the nearest node up); after it heals every
/// fault, waits for the cluster to settle, reads back cell 0 of every key an attempt wrote on
/// the current placement ([`EmbeddedCluster::placement`]) and judges it ([`redt_checkers::acked_writes`]).
/// `on_log` gets the drill's log lines as they happen.
///
/// # Errors
/// A plan whose last action is not within the measured interval, a topology without a YCSB
/// table, cluster start-up or load; as text.
pub async fn run_embedded_drill_ycsb(
    topo: Topology,
    cfg: &ClusterConfig,
    plan: DrillPlan,
    on_log: Arc<dyn Fn(&LogLine) + Send + Sync>,
) -> Result<EmbeddedDrillBenchReport, String> {
    let table = ycsb_table(&topo)?;
    if table.2 == 0 {
        return Err("the YCSB table has an empty cell".into());
    }
    let DrilledCluster { cluster, drill, routes, data_root } =
        start_cluster(topo, cfg.options.clone(), Some(plan), cfg.duration).await?;
    let result = embedded_drill(&cluster, drill, routes, cfg, table, on_log).await;
    cluster.shutdown();
    drop(data_root);
    result
}

/// [`run_embedded_drill_ycsb`] once the cluster is up (the caller shuts it down).
async fn embedded_drill(
    cluster: &Arc<EmbeddedCluster>,
    drill: Option<crate::drill_embedded::EmbeddedDrill>,
    routes: Coordinators,
    cfg: &ClusterConfig,
    table: (TableId, usize, usize),
    on_log: Arc<dyn Fn(&LogLine) + Send + Sync>,
) -> Result<EmbeddedDrillBenchReport, String> {
    let mut drill = drill.ok_or("no drill plan")?;
    let topo = cluster.topology.clone();
    let rpp = cfg.records_per_partition.max(1);
    let load_bar = bar(cfg.progress, rpp * topo.partitions.len() as u64, "load");
    let c2 = cluster.clone();
    let records = tokio::task::spawn_blocking(move || c2.load(table.0, rpp, &mut |n| load_bar.set_position(n)))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("loading: {e}"))?;
    let mut clients = spawn_clients(&topo, cfg, table, Submit::Embedded(routes), drill.timeline.clone())?;
    let measured = clients
        .measure(cfg, &CpuSource::Process, |started, run| {
            let bar_log = log_to(run);
            drill.start(
                started,
                Arc::new(move |l: &LogLine| {
                    bar_log(l);
                    on_log(l)
                }),
            );
        })
        .await;
    let mut report = drill.finish(cfg.progress).await?;
    // Every fault is healed and the cluster settled (or gave up): read on the placement now.
    let reader = Arc::new(cluster.client(Duration::from_secs(5)).map_err(|e| e.to_string())?);
    report.drill.lost = clients.lost(&reader, &cluster.placement(), table.0, &BTreeSet::new()).await;
    Ok(EmbeddedDrillBenchReport {
        run: clients.report(&topo, cfg, (table.1, table.2), measured),
        protocol: cfg.options.protocol,
        records,
        drill: report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_checkers::acked_writes::decode;

    #[test]
    fn updates_are_stamped_and_cell_0_writes_listed() {
        let mut t = DrawnTxn::Ycsb(vec![
            YcsbOp::Read { key: 1 },
            YcsbOp::Update { key: 2, cell: 0, value: vec![7; 100] },
            YcsbOp::Update { key: 3, cell: 4, value: vec![7; 100] },
        ]);
        assert_eq!(stamp(&mut t, 9, 3, 5), [2]);
        let DrawnTxn::Ycsb(ops) = &t else { unreachable!("built above") };
        for op in &ops[1..] {
            let YcsbOp::Update { value, .. } = op else { unreachable!("updates") };
            assert_eq!(value.len(), 100);
            assert_eq!(decode(9, value), Some((3, 5)));
        }
        let mut kv = DrawnTxn::Kv(vec![KvOp::Write(4, vec![1; 100])], vec![]);
        assert!(stamp(&mut kv, 9, 3, 6).is_empty(), "inserts are not checked");
    }
}
