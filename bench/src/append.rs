//! `redt bench append`: Jepsen's list-append workload on the embedded cluster, its history
//! in JSON lines, and a check of that history against the lists the database holds at the
//! end.
//!
//! Each client runs closed-loop transactions (retrying those that abort for a retryable
//! cause, [`AppendConfig::retry`]) of 1 to `max_txn_len` micro-operations, each a
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
use crate::clients::append::{AppendClients, AppendHistory};
use crate::clients::{OnAnswer, Submit};
use crate::drill_embedded::{start_cluster, DrilledCluster, EmbeddedDrill, EmbeddedDrillReport};
use crate::drill_plan::DrillPlan;
use crate::progress::bar;
use crate::report::{CpuCost, Outcomes, Retries};
use crate::workload::Meter;
use redt_checkers::history::{check, CheckReport, HistoryWriter, Mop};
use redt_coordinator::{CoordinatorOptions, RetryPolicy};
use redt_dc_executor::{list_items, LIST_HEADER};
use redt_proto::{Protocol, TableId, Topology};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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
    /// How the clients retry a transaction that aborted for a retryable cause (the history
    /// holds each transaction once, with its last attempt's outcome).
    pub retry: RetryPolicy,
    /// Where each client submits ([`Routing`]).
    pub routing: Routing,
}

/// Where a list-append client submits its transactions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Routing {
    /// Its own node.
    #[default]
    Home,
    /// The node of the primary replica of the first key the transaction appends to (else
    /// the first it reads), so a key's transactions share a coordinator.
    KeyOwner,
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
            retry: RetryPolicy::default(),
            routing: Routing::Home,
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
    /// The run's transactions: `ok` ones committed, `info` ones unknown, and the aborted
    /// attempts (the abort rate is per attempt; the `fail` transactions, given up, are
    /// `failed` below); the latency of the `ok` ones as the clients saw it, from their first
    /// attempt.
    #[serde(flatten)]
    pub outcomes: Outcomes,
    /// The clients' attempts and retries, the transactions given up (`fail`), and the
    /// aborted attempts by cause.
    #[serde(flatten)]
    pub retries: Retries,
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

impl AppendConfig {
    /// Its clients, on the lists of `table` from key `first_key` on.
    pub fn clients(&self, table: TableId, first_key: u64) -> AppendClients {
        AppendClients {
            table,
            first_key,
            keys: self.keys,
            max_writes_per_key: self.max_writes_per_key,
            max_txn_len: self.max_txn_len,
            read_ratio: self.read_ratio,
            per_node: self.clients_per_node,
            seed: self.seed,
            retry: self.retry,
            routing: self.routing,
        }
    }
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
    let history = HistoryWriter::new(cfg.history.as_deref())?;
    let DrilledCluster { cluster, mut drill, routes, data_root } =
        start_cluster(topo, cfg.options.clone(), cfg.drill.clone(), cfg.duration).await?;
    let topo = cluster.topology.clone();
    let stop = Arc::new(AtomicBool::new(false));
    // Counts every transaction from the start (the run has no warm-up), for the interval rows
    // and the latency.
    let meter = Arc::new(Meter::default());
    meter.set_measuring(true);
    let feed = drill.as_ref().map(EmbeddedDrill::feed).unwrap_or_default();
    let on_answer: OnAnswer<[Mop]> = {
        let (meter, topo, schema) = (meter.clone(), topo.clone(), schema.clone());
        Arc::new(move |mops, submitted, out| {
            feed.record(submitted, &out.answer().status, || {
                let mut parts: Vec<_> = mops
                    .iter()
                    .map(|m| match m {
                        Mop::Append(k, _) | Mop::Read(k, _) => topo.partition_of(&schema, *k),
                    })
                    .collect();
                parts.sort_unstable();
                parts.dedup();
                parts
            });
            meter.record_retried(out, submitted);
        })
    };
    let running = cfg.clients(tid, 0).spawn(&topo, &Submit::Embedded(routes), &stop, history, on_answer);
    let run = bar(cfg.progress, cfg.duration.as_millis() as u64, "run");
    let cpu = redt_coordinator::process::CpuWindow::start();
    let started = Instant::now();
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
    let history = running.finish().await;
    let elapsed = started.elapsed();
    let (cpu_spent, _) = cpu.read();
    // The last row ends where the clients stopped: every transaction of the history counted.
    let rows = rows.and_then(|iv| match iv {
        Some(iv) => iv.finish(meter.snapshot(elapsed), &run),
        None => Ok(()),
    });
    run.finish_and_clear();
    rows.map_err(|e| format!("interval rows: {e}"))?;
    let AppendHistory { events, keys } = match history {
        Ok(h) => h,
        Err(e) => {
            cluster.shutdown();
            return Err(e);
        }
    };

    // After a drill: heal, settle, report.
    let drill = crate::drill_embedded::finish_drill(drill, &cluster, cfg.progress).await?;
    // Every key ever used, settled, from every replica.
    let used: Vec<u64> = keys.collect();
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
    let report = check(&events, &finals)?;
    // The history has one completion per transaction; the meter counts the aborted attempts.
    let counted = meter.snapshot(elapsed);
    let outcomes = Outcomes::new(report.ok, counted.aborted, report.info, elapsed, &counted.latency_us);
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
        retries: meter.retries(cfg.retry.retries),
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
