//! `redt bench local`: one DC, no WAN — the in-DC data path alone (executors, verbs,
//! records, index, redo ring, replay) under YCSB.
//!
//! Every node of the chosen DC gets an in-process MemStore; the records of every
//! partition with a replica in that DC are loaded; worker threads each own an executor and
//! run transactions back to back, deciding locally (commit iff the vote is commit, `cts`
//! above every version seen and the executor's clock) and finishing at once; one replay
//! thread per node drains the redo ring.

use crate::report::{abort_rate, CpuCost, Latency, MemStoreFootprint, VerbsPerTxn};
use crate::ycsb::{YcsbConfig, YcsbGenerator};
use indicatif::{ProgressBar, ProgressStyle};
use rand::SeedableRng;
use redt_dc_executor::{
    Clock, DcHandle, Decision, Executor, Hlc, LocalAccess, LocalVerbs, Procedure, ReplayTask, SubTxn, SystemClock,
    Verbs, Vote, LINE,
};
use redt_proto::{Cts, DcId, Epoch, NodeId, TableId, Topology, TxnId};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Parameters of a local run.
#[derive(Clone, Debug)]
pub struct LocalConfig {
    /// The DC to run (its nodes and the partitions they hold).
    pub dc: DcId,
    /// Measured run time.
    pub duration: Duration,
    /// Warm-up before measuring (excluded from every figure).
    pub warmup: Duration,
    /// Worker threads (each one executor).
    pub threads: usize,
    /// Records loaded per partition (`None`: as many as the MemStore was sized for).
    pub records_per_partition: Option<u64>,
    /// The YCSB mix.
    pub ycsb: YcsbConfig,
    /// Seed of the workers' generators.
    pub seed: u64,
    /// Show progress bars on standard error.
    pub progress: bool,
    /// Per-interval rows of the measured interval (off by default).
    pub interval: crate::interval::IntervalOptions,
    /// How long to measure the idle CPU once the records are loaded and the replay threads
    /// run, before the workers start ([`CpuCost::idle_cpu_cores`]; usually
    /// [`crate::report::DEFAULT_IDLE_WINDOW`]); zero: not measured.
    pub idle_window: Duration,
}

/// Results of a local run.
#[derive(Clone, Debug, Serialize)]
pub struct LocalReport {
    /// Name of the workload.
    pub workload: String,
    /// The YCSB mix.
    pub mix: crate::ycsb::MixReport,
    /// Name of the DC run.
    pub dc: String,
    /// Nodes in that DC.
    pub nodes: usize,
    /// Worker threads.
    pub threads: usize,
    /// Measured seconds.
    pub duration_s: f64,
    /// Committed transactions in the measured interval.
    pub committed: u64,
    /// Aborted transactions in the measured interval.
    pub aborted: u64,
    /// Committed transactions per second.
    pub committed_per_s: f64,
    /// aborted / (committed + aborted).
    pub abort_rate: f64,
    /// Latency of committed transactions, in µs.
    pub latency_us: Latency,
    /// The CPU time of this process (workers and replay threads) over the measured interval,
    /// and over the idle window before the warm-up.
    #[serde(flatten)]
    pub cpu: CpuCost,
    /// Verbs per committed transaction (all verbs of the interval, aborts included).
    pub verbs_per_txn: VerbsPerTxn,
    /// Index bucket READs per index lookup.
    pub index_reads_per_lookup: f64,
    /// MemStore footprint of the loaded records.
    pub memstore: MemStoreFootprint,
    /// Records loaded in the DC.
    pub records_loaded: u64,
}

/// The keys of `table` stored in `dc`, with their node: for each partition with a replica
/// in `dc`, keys `p, p + P, p + 2P, …` (`records_per_partition` of them).
pub fn local_keys(topo: &Topology, dc: DcId, table: TableId, records_per_partition: u64) -> Vec<(u64, NodeId)> {
    let p_count = topo.partitions.len() as u64;
    let schema = topo.table(table).expect("table from this topology");
    let mut keys = Vec::new();
    for k in 0..records_per_partition * p_count {
        let p = topo.partition_of(schema, k);
        if let Some(node) = topo.replica_in_dc(p, dc) {
            keys.push((k, node));
        }
    }
    keys
}

/// The commit timestamp a local decision uses: above the executor's clock reading and
/// every version it saw.
pub fn local_cts(vote: &Vote) -> Cts {
    let seen = vote.items.iter().flat_map(|i| i.versions.iter().map(|(_, v)| v.cts())).max().unwrap_or(Cts(0));
    Cts::new(vote.hlc.max(seen).0 + 1)
}

/// Runs YCSB on one DC of `topo` and reports.
///
/// # Errors
/// Load failures (heap or index full: the MemStore is too small for the records asked)
/// and verbs errors, as text.
pub fn run_local_ycsb(topo: &Topology, cfg: &LocalConfig) -> Result<LocalReport, String> {
    let dc = topo.dcs.get(cfg.dc.0 as usize).ok_or_else(|| format!("no DC {}", cfg.dc))?;
    let table = topo.tables.first().ok_or("the topology declares no table")?;
    let layout = redt_dc_executor::Layout::from_config(&topo.memstore);
    let rl = redt_dc_executor::RecordLayout::new(table);
    let record_alloc = rl.record_bytes.div_ceil(LINE) * LINE;
    let per_node_partitions = topo.partitions.iter().filter(|p| p.replicas.iter().any(|n| dc.nodes.contains(n))).count()
        as u64
        / dc.nodes.len().max(1) as u64;
    let heap = layout.size - layout.heap_off;
    let fit = heap / record_alloc / per_node_partitions.max(1);
    let rpp = cfg.records_per_partition.unwrap_or(fit.min(1 << 17));

    let local = Arc::new(LocalVerbs::in_process(dc.nodes.iter().copied(), layout.size));
    for &n in &dc.nodes {
        let region = local.region(n).ok_or("region of a DC node")?;
        layout.format(region);
    }
    let verbs: Arc<dyn Verbs> = local.clone();
    let handle = Arc::new(DcHandle::new(topo, verbs.clone()));

    // Load.
    let keys = local_keys(topo, cfg.dc, table.id, rpp);
    let bar = progress(cfg.progress, keys.len() as u64, "load");
    for (i, &(k, node)) in keys.iter().enumerate() {
        handle
            .insert_record(node, table.id, k, &[])
            .map_err(|e| format!("loading key {k} on {}: {e} (records per partition: {rpp})", topo.node_name(node)))?;
        if i % 4096 == 0 {
            bar.set_position(i as u64);
        }
    }
    bar.finish_and_clear();
    let node_of: std::collections::HashMap<u64, NodeId> = keys.iter().copied().collect();
    let node_of = Arc::new(node_of);
    let key_list: Vec<u64> = keys.iter().map(|k| k.0).collect();

    // Replay, one thread per node.
    let replays: Vec<ReplayTask> = dc
        .nodes
        .iter()
        .map(|&n| ReplayTask::spawn(local.region(n).expect("formatted above").clone(), &handle, n, topo.node_name(n)))
        .collect();
    let idle_cpu_cores = crate::cpu::idle_cpu_cores_blocking(cfg.idle_window);

    let gen = Arc::new(YcsbGenerator::new(cfg.ycsb.clone(), table.id, rl.cells(), rl.cell_bytes[0] as usize, key_list));
    let hlc = Arc::new(Hlc::new());
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicU64::new(0));
    let aborted = Arc::new(AtomicU64::new(0));
    let hist = Arc::new(Mutex::new(Latency::histogram()));
    let error: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));

    let mut workers = Vec::new();
    for t in 0..cfg.threads {
        let (handle, gen, hlc, node_of) = (handle.clone(), gen.clone(), hlc.clone(), node_of.clone());
        let (measuring, stop, committed, aborted, hist, error) =
            (measuring.clone(), stop.clone(), committed.clone(), aborted.clone(), hist.clone(), error.clone());
        let coordinator = dc.nodes[t % dc.nodes.len()];
        let seed = cfg.seed.wrapping_add(t as u64);
        let dc_id = cfg.dc;
        workers.push(std::thread::spawn(move || {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut ex = Executor::new(handle, hlc);
            let mut local_hist = Latency::histogram();
            let mut flushed = Instant::now();
            let mut seq = (t as u64) << 32;
            while !stop.load(Ordering::Relaxed) {
                // The shared histogram lags by at most 50 ms, for the interval rows.
                if flushed.elapsed() >= Duration::from_millis(50) && !local_hist.is_empty() {
                    hist.lock().expect("histogram").add(&local_hist).expect("same histogram bounds");
                    local_hist.reset();
                    flushed = Instant::now();
                }
                seq += 1;
                let proc = Arc::new(gen.next(&mut rng));
                let local = proc
                    .accesses()
                    .iter()
                    .enumerate()
                    .filter_map(|(access, a)| node_of.get(&a.key).map(|&node| LocalAccess { access, node }))
                    .collect();
                let sub = SubTxn {
                    txn: TxnId::new(coordinator, seq),
                    epoch: Epoch(1),
                    coordinator,
                    start: redt_proto::Cts(0),
                    participants: vec![dc_id],
                    partitions: Vec::new(),
                    procedure: proc,
                    local,
                };
                let start = Instant::now();
                let res = ex.execute(&sub, SystemClock.now_ms()).and_then(|vote| {
                    if vote.is_commit() {
                        ex.finish(sub.txn, Decision::Commit(local_cts(&vote)), &vote.entries).map(|_| true)
                    } else {
                        Ok(false)
                    }
                });
                match res {
                    Ok(ok) => {
                        if measuring.load(Ordering::Relaxed) {
                            if ok {
                                committed.fetch_add(1, Ordering::Relaxed);
                                let _ = local_hist.record(start.elapsed().as_micros().max(1) as u64);
                            } else {
                                aborted.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    Err(e) => {
                        *error.lock().expect("error slot") = Some(e.to_string());
                        stop.store(true, Ordering::Relaxed);
                    }
                }
            }
            hist.lock().expect("histogram").add(&local_hist).expect("same histogram bounds");
        }));
    }

    std::thread::sleep(cfg.warmup);
    let v0 = verbs.counters().snapshot();
    let i0 = handle.index.stats().snapshot();
    let cpu = redt_coordinator::process::CpuWindow::start();
    measuring.store(true, Ordering::Relaxed);
    let started = Instant::now();
    let bar = progress(cfg.progress, cfg.duration.as_millis() as u64, "run");
    let mut rows = crate::interval::Intervals::start(&cfg.interval)?;
    let snapshot = |at: Duration| crate::interval::Snapshot {
        at,
        committed: committed.load(Ordering::Relaxed),
        aborted: aborted.load(Ordering::Relaxed),
        unknown: 0,
        latency_us: hist.lock().expect("histogram").clone(),
    };
    while started.elapsed() < cfg.duration && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        bar.set_position(started.elapsed().as_millis() as u64);
        if let Some(iv) = rows.as_mut().filter(|iv| iv.due(started.elapsed()) && started.elapsed() < cfg.duration) {
            if let Err(e) = iv.take(snapshot(started.elapsed()), &bar) {
                stop.store(true, Ordering::Relaxed);
                *error.lock().expect("error slot") = Some(format!("interval rows: {e}"));
            }
        }
    }
    measuring.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    let (cpu_spent, _) = cpu.read();
    let v1 = verbs.counters().snapshot();
    let i1 = handle.index.stats().snapshot();
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().map_err(|_| "a worker thread panicked")?;
    }
    // The last row ends at the figures the report is made of (after the workers stopped).
    if let Some(iv) = rows {
        iv.finish(snapshot(started.elapsed().min(Duration::from_secs_f64(elapsed))), &bar)
            .map_err(|e| format!("interval rows: {e}"))?;
    }
    bar.finish_and_clear();
    for r in replays {
        r.stop();
    }
    if let Some(e) = error.lock().expect("error slot").take() {
        return Err(e);
    }

    let committed = committed.load(Ordering::Relaxed);
    let aborted = aborted.load(Ordering::Relaxed);
    let verbs_used = v1.since(&v0);
    let idx = i1.since(&i0);
    let loaded = keys.len() as u64;
    let hist = hist.lock().expect("histogram");
    Ok(LocalReport {
        workload: "ycsb".into(),
        mix: cfg.ycsb.summary(rl.cells(), rl.cell_bytes[0] as usize),
        dc: dc.name.clone(),
        nodes: dc.nodes.len(),
        threads: cfg.threads,
        duration_s: elapsed,
        committed,
        aborted,
        committed_per_s: committed as f64 / elapsed,
        abort_rate: abort_rate(committed, aborted),
        latency_us: Latency::from_histogram(&hist),
        cpu: CpuCost::new(Some(cpu_spent), Duration::from_secs_f64(elapsed), committed, idle_cpu_cores),
        verbs_per_txn: VerbsPerTxn::new(&verbs_used, committed),
        index_reads_per_lookup: idx.reads_per_lookup(),
        memstore: MemStoreFootprint::new(
            record_alloc,
            rl.payload_bytes(),
            layout.index_bytes,
            loaded / dc.nodes.len().max(1) as u64,
        ),
        records_loaded: loaded,
    })
}

fn progress(show: bool, len: u64, what: &'static str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>5} [{bar:40}] {percent:>3}% {elapsed_precise} eta {eta}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_prefix(what);
    bar
}
