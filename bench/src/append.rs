//! `redt bench append`: Jepsen's list-append workload on the embedded cluster, its history
//! in JSON lines, and a check of that history against the lists the database holds at the
//! end.
//!
//! Each client runs closed-loop transactions of 1 to `max_txn_len` micro-operations, each a
//! read (`["r", k, …]`, `KvOp::Read`) or an append (`["append", k, v]`, `KvOp::Append`) of a
//! unique, increasing integer, on a small set of active keys of the key/value table. As
//! Jepsen's generator does, a key is retired after `max_writes_per_key` appends and a fresh
//! key takes its place (a list holds at most 255 items in a 2 KiB cell). After the run the
//! clients stop, phase 2 finishes, every key's list is read from every replica (they must
//! agree), and [`redt_checkers::history::check`] compares the history with the lists.
//!
//! With a drill plan ([`AppendConfig::drill`], `redt bench append --drill PLAN`) the plan runs
//! over the run ([`crate::drill_embedded`]) as in `redt bench bank --drill`: the clients of a
//! node it stopped submit through the nearest node up, every answer goes to the drill's
//! timeline, and after the drill every fault is healed and the cluster settles before the
//! lists are read from the replicas of the current placement and checked.

use crate::bank::settled_cells;
use crate::drill::Counts;
use crate::drill_embedded::{start_cluster, DrilledCluster, EmbeddedDrillReport};
use crate::drill_plan::DrillPlan;
use crate::progress::bar;
use crate::report::{CpuCost, Latency, Outcomes};
use rand::{Rng, SeedableRng};
use redt_checkers::history::{check, CheckReport, Event, EventType, HistoryWriter, Mop};
use redt_coordinator::{CoordinatorOptions, TxnStatus};
use redt_dc_executor::{list_items, LIST_HEADER};
use redt_proto::{Protocol, Topology};
use redt_protocol::call;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Parameters of a list-append run.
#[derive(Clone, Debug)]
pub struct AppendConfig {
    /// Run time (no warm-up: the history covers the whole run).
    pub duration: Duration,
    /// Active keys at any time.
    pub keys: usize,
    /// Appends after which a key is retired for a fresh one.
    pub max_writes_per_key: u32,
    /// Most micro-operations per transaction (at least 1).
    pub max_txn_len: usize,
    /// Fraction of micro-operations that are reads.
    pub read_ratio: f64,
    /// Concurrent clients per node (closed loop).
    pub clients_per_node: usize,
    /// The key/value table.
    pub table: String,
    /// Where to write the history (JSON lines), if anywhere.
    pub history: Option<PathBuf>,
    /// Coordinator options.
    pub options: CoordinatorOptions,
    /// Seed of the clients' generators.
    pub seed: u64,
    /// Progress bars on standard error.
    pub progress: bool,
    /// A drill plan to run from the start of the run, expanded for `duration`
    /// ([`DrillPlan::expand`]); `None`: no drill. Its log lines are printed as they happen,
    /// above the progress bar (on standard error when it is hidden).
    pub drill: Option<DrillPlan>,
    /// Per-interval rows of the run (off by default; a list-append run has no warm-up, so the
    /// rows cover it whole).
    pub interval: crate::interval::IntervalOptions,
}

impl Default for AppendConfig {
    fn default() -> Self {
        AppendConfig {
            duration: Duration::from_secs(30),
            keys: 16,
            max_writes_per_key: 128,
            max_txn_len: 4,
            read_ratio: 0.5,
            clients_per_node: 2,
            table: "kv".into(),
            history: None,
            options: CoordinatorOptions::default(),
            seed: 42,
            progress: false,
            drill: None,
            interval: Default::default(),
        }
    }
}

/// Results of a list-append run.
#[derive(Clone, Debug, Serialize)]
pub struct AppendReport {
    /// `append`.
    pub workload: String,
    /// The commit protocol every node ran (`redt`, `2pc-paxos`, …).
    pub protocol: Protocol,
    /// Topology name.
    pub topology: String,
    /// DCs.
    pub dcs: usize,
    /// Nodes.
    pub nodes: usize,
    /// Inter-DC RTT of the first link, in ms.
    pub rtt_ms: f64,
    /// Concurrent clients.
    pub clients: usize,
    /// Seconds run.
    pub duration_s: f64,
    /// The run's transactions: `ok` ones committed, `fail` ones aborted, `info` ones
    /// unknown; the latency of the `ok` ones as the clients saw it.
    #[serde(flatten)]
    pub outcomes: Outcomes,
    /// The CPU time of this process over the run, per `ok` transaction (no idle window).
    #[serde(flatten)]
    pub cpu: CpuCost,
    /// Keys used (active and retired).
    pub keys_used: u64,
    /// The history file, if written.
    pub history: Option<String>,
    /// History events.
    pub events: u64,
    /// Keys whose replicas hold different lists after the run.
    pub keys_disagreeing: u64,
    /// The history check.
    pub check: CheckReport,
    /// Every key's final list (primary replica), for re-checking a history file.
    #[serde(skip)]
    pub finals: BTreeMap<u64, Vec<u64>>,
    /// Replicas agree and the check found no violation.
    pub pass: bool,
    /// The drill, when one ran (the lists were read after it, on the current placement).
    pub drill: Option<EmbeddedDrillReport>,
}

pub use redt_workload::append::{fill, kv_ops, Keys};

/// Draws one transaction's micro-operations as `cfg` asks ([`redt_workload::append::draw`]):
/// on the active keys of `keys`, appends taking the next of `values`.
pub(crate) fn draw(keys: &Mutex<Keys>, values: &AtomicU64, cfg: &AppendConfig, rng: &mut impl Rng) -> Vec<Mop> {
    let mut keys = keys.lock().unwrap_or_else(|p| p.into_inner());
    redt_workload::append::draw(&mut keys, cfg.max_txn_len, cfg.read_ratio, rng, || {
        values.fetch_add(1, Ordering::Relaxed)
    })
}

/// Checks the lists of `schema` (a key/value table) hold what `cfg` appends to one key with
/// `clients` clients: `max_writes_per_key` appends plus one transaction in flight per client
/// after the key is retired.
///
/// # Errors
/// They do not fit, or `cfg.keys` is 0.
pub(crate) fn check_fits(schema: &redt_proto::TableSchema, cfg: &AppendConfig, clients: usize) -> Result<(), String> {
    let capacity = (schema.cells[0].bytes as usize).saturating_sub(LIST_HEADER) / 8;
    let need = cfg.max_writes_per_key as usize + clients * cfg.max_txn_len;
    if need > capacity {
        return Err(format!(
            "table `{}` holds lists of {capacity} items; {} appends per key plus {} in flight do not fit \
             (lower --max-writes-per-key or the clients)",
            schema.name,
            cfg.max_writes_per_key,
            clients * cfg.max_txn_len
        ));
    }
    if cfg.keys == 0 {
        return Err("--keys must be at least 1".into());
    }
    Ok(())
}

/// Runs list-append on an embedded cluster of `topo`, writes the history and checks it.
///
/// # Errors
/// Cluster start-up, a missing or too small table, writing the history, as text.
pub async fn run_append(topo: Topology, cfg: &AppendConfig) -> Result<AppendReport, String> {
    let schema =
        topo.table_by_name(&cfg.table).ok_or_else(|| format!("the topology has no table `{}`", cfg.table))?.clone();
    let clients = cfg.clients_per_node * topo.nodes.len();
    check_fits(&schema, cfg, clients)?;
    let tid = schema.id;
    let rtt_ms = topo.links.first().and_then(|l| l.get(1)).map(|c| c.rtt.as_secs_f64() * 1e3).unwrap_or(0.0);
    let writer = Arc::new(Mutex::new(HistoryWriter::new(cfg.history.as_deref())?));
    let DrilledCluster { cluster, mut drill, routes, data_root } =
        start_cluster(topo, cfg.options.clone(), cfg.drill.clone(), cfg.duration).await?;
    let topo = cluster.topology.clone();
    let timeline = drill.as_ref().map(|d| d.timeline.clone());
    let measured_from: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
    let keys = Arc::new(Mutex::new(Keys::new(0, cfg.keys, cfg.max_writes_per_key)));
    let values = Arc::new(AtomicU64::new(1));
    let stop = Arc::new(AtomicBool::new(false));
    let hist = Arc::new(Mutex::new(Latency::histogram()));
    let error: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    // Counts every transaction from the start (the run has no warm-up), for the interval rows.
    let meter = Arc::new(crate::workload::Meter::default());
    meter.set_measuring(true);
    let mut tasks = tokio::task::JoinSet::new();
    let mut process = 0u64;
    writer.lock().expect("history").restart_clock();
    for n in &topo.nodes {
        for _ in 0..cfg.clients_per_node {
            let (timeline, measured_from, topo, schema, routes) =
                (timeline.clone(), measured_from.clone(), topo.clone(), schema.clone(), routes.clone());
            let home = n.id;
            let (keys, values, stop, hist, writer, error, cfg2) =
                (keys.clone(), values.clone(), stop.clone(), hist.clone(), writer.clone(), error.clone(), cfg.clone());
            let meter = meter.clone();
            let mut p = process;
            let seed = cfg.seed ^ process.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            process += 1;
            let clients = clients as u64;
            tasks.spawn(async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                let record = |kind, p, mops: &[Mop], err: Option<String>| {
                    if let Err(e) = writer.lock().expect("history").record(kind, p, mops, err) {
                        error.lock().expect("error slot").get_or_insert(e);
                    }
                };
                while !stop.load(Ordering::Relaxed) {
                    // A client whose node a drill stopped goes on through the nearest node up.
                    let Some(node) = routes.route(home) else {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    };
                    let mops = draw(&keys, &values, &cfg2, &mut rng);
                    record(EventType::Invoke, p, &mops, None);
                    let t0 = Instant::now();
                    let out = node.submit(call::kv_call(tid, &kv_ops(&mops))).await;
                    if let (Some(t), Some(&from)) = (&timeline, measured_from.get()) {
                        let (s, a) = (t0.saturating_duration_since(from), from.elapsed());
                        match &out.status {
                            TxnStatus::Committed => {
                                let mut parts: Vec<_> = mops
                                    .iter()
                                    .map(|m| match m {
                                        Mop::Append(k, _) | Mop::Read(k, _) => topo.partition_of(&schema, *k),
                                    })
                                    .collect();
                                parts.sort_unstable();
                                parts.dedup();
                                t.committed(s, a, &parts);
                            }
                            TxnStatus::Aborted(_) => t.add(a, Counts { aborted: 1, ..Default::default() }),
                            TxnStatus::Unknown(_) => t.add(a, Counts { unknown: 1, ..Default::default() }),
                        }
                    }
                    meter.record(&out.status, t0);
                    match out.status {
                        TxnStatus::Committed => {
                            let _ = hist.lock().expect("histogram").record(t0.elapsed().as_micros().max(1) as u64);
                            record(EventType::Ok, p, &fill(&mops, &out.reads), None);
                        }
                        TxnStatus::Aborted(e) => record(EventType::Fail, p, &mops, Some(e)),
                        TxnStatus::Unknown(e) => {
                            record(EventType::Info, p, &mops, Some(e));
                            // Jepsen: a process whose operation is indeterminate is gone.
                            p += clients;
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                }
            });
        }
    }
    let run = bar(cfg.progress, cfg.duration.as_millis() as u64, "run");
    let cpu = redt_coordinator::process::CpuWindow::start();
    let started = Instant::now();
    let _ = measured_from.set(started);
    if let Some(d) = &mut drill {
        d.start(started, crate::drill_embedded::log_to(&run));
    }
    let mut rows = crate::interval::Intervals::start(&cfg.interval);
    while started.elapsed() < cfg.duration {
        tokio::time::sleep(Duration::from_millis(100)).await;
        run.set_position(started.elapsed().as_millis() as u64);
        if let Ok(Some(iv)) = &mut rows {
            if iv.due(started.elapsed()) && started.elapsed() < cfg.duration {
                if let Err(e) = iv.take(meter.snapshot(started.elapsed()), &run) {
                    rows = Err(e);
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    while tasks.join_next().await.is_some() {}
    let elapsed = started.elapsed();
    let (cpu_spent, _) = cpu.read();
    // The last row ends where the clients stopped: every transaction of the history counted.
    let rows = rows.and_then(|iv| match iv {
        Some(iv) => iv.finish(meter.snapshot(elapsed), &run),
        None => Ok(()),
    });
    run.finish_and_clear();
    rows.map_err(|e| format!("interval rows: {e}"))?;

    // After a drill: heal, settle, report.
    let drill = crate::drill_embedded::finish_drill(drill, &cluster, cfg.progress).await?;
    // Every key ever used, settled, from every replica.
    let used: Vec<u64> = (0..keys.lock().expect("keys").end()).collect();
    let wait = Duration::from_millis((rtt_ms * 10.0) as u64) + Duration::from_secs(5);
    let settled = settled_cells(&cluster, tid, &used, wait).await;
    cluster.shutdown();
    drop(data_root);
    let (cells, _calm) = settled?;
    let mut finals = BTreeMap::new();
    let mut disagreeing = 0;
    for (&k, reps) in used.iter().zip(&cells) {
        let lists: Vec<Vec<u64>> =
            reps.iter().map(|(_, c, _)| c.as_deref().map(list_items).unwrap_or_default()).collect();
        if lists.windows(2).any(|w| w[0] != w[1]) {
            disagreeing += 1;
        }
        finals.insert(k, lists.into_iter().next().unwrap_or_default());
    }
    if let Some(e) = error.lock().expect("error slot").take() {
        return Err(format!("writing the history: {e}"));
    }
    let writer =
        Arc::try_unwrap(writer).map_err(|_| "history still shared")?.into_inner().map_err(|e| e.to_string())?;
    let events: Vec<Event> = writer.finish()?;
    let report = check(&events, &finals)?;
    let outcomes = Outcomes::new(report.ok, report.fail, report.info, elapsed, &hist.lock().expect("histogram"));
    Ok(AppendReport {
        workload: "append".into(),
        protocol: cfg.options.protocol,
        topology: topo.name.clone(),
        dcs: topo.dcs.len(),
        nodes: topo.nodes.len(),
        rtt_ms,
        clients,
        duration_s: elapsed.as_secs_f64(),
        cpu: CpuCost::new(Some(cpu_spent), elapsed, outcomes.committed, None),
        outcomes,
        keys_used: used.len() as u64,
        history: cfg.history.as_ref().map(|p| p.display().to_string()),
        events: events.len() as u64,
        keys_disagreeing: disagreeing,
        pass: report.valid && disagreeing == 0,
        check: report,
        finals,
        drill,
    })
}
