//! `redt bench bank`: transfers between accounts on the embedded cluster, then a check that
//! money was neither made nor lost.
//!
//! Every account is a record of the key/value table (`kv`, cell 0 a little-endian `i64`
//! balance), loaded with the same balance into every replica. Clients on every node run
//! closed-loop transactions: transfers (`KvOp::Add(from, −x)`, `KvOp::Add(to, +x)`, balances
//! may go negative) and, with `read_ratio`, reads of every account whose sum must be the
//! initial total (a snapshot check, for at most [`MAX_READ_ALL`] accounts). After the run
//! the clients stop, phase 2 finishes, and every replica of every account is read from the
//! MemStores: the total per replica set must be unchanged and the replicas must agree. A
//! transfer that aborted for a retryable cause is submitted again ([`BankConfig::retry`]): an
//! abort certainly did not commit, so no transfer applies twice.
//!
//! With a drill plan ([`BankConfig::drill`], `redt bench bank --drill PLAN`) the plan runs over
//! the measured interval ([`crate::drill_embedded`]): the clients of a node it stopped submit
//! through the nearest node up, every answer goes to the drill's timeline, and after the
//! drill every fault is healed and the cluster settles before the check, which reads the
//! replicas of the current placement (after a failover, the rebuilt ones).

use crate::clients::bank::BankClients;
use crate::clients::{OnAnswer, Submit};
use crate::drill_embedded::{start_cluster, DrilledCluster, EmbeddedDrill, EmbeddedDrillReport};
use crate::drill_plan::DrillPlan;
use crate::progress::bar;
use crate::report::{CpuCost, Outcomes, Retries, DEFAULT_IDLE_WINDOW};
use crate::workload::Meter;
use redt_coordinator::{Class, CoordinatorOptions, EmbeddedCluster, RetryPolicy, TxnStatus};
use redt_proto::{NodeId, Protocol, TableId, Topology};
use redt_workload::bank::BankTxn;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Read-all transactions run only up to this many accounts.
pub const MAX_READ_ALL: u64 = 64;

/// Parameters of a bank run.
#[derive(Clone, Debug)]
pub struct BankConfig {
    /// Measured run time.
    pub duration: Duration,
    /// Warm-up before measuring (transfers run, figures not counted; the check covers it).
    pub warmup: Duration,
    /// Accounts (keys `0..accounts` of the table).
    pub accounts: u64,
    /// Initial balance of each account.
    pub initial_balance: i64,
    /// Largest amount of one transfer.
    pub max_transfer: i64,
    /// Fraction of transactions that read every account (0 disables; ignored above
    /// [`MAX_READ_ALL`] accounts).
    pub read_ratio: f64,
    /// Concurrent clients per node (closed loop).
    pub clients_per_node: usize,
    /// The key/value table holding the accounts.
    pub table: String,
    /// Coordinator options.
    pub options: CoordinatorOptions,
    /// Seed of the clients' generators.
    pub seed: u64,
    /// Progress bars on standard error.
    pub progress: bool,
    /// A drill plan to run over the measured interval, expanded for `duration`
    /// ([`DrillPlan::expand`]); `None`: no drill. Its log lines are printed as they happen,
    /// above the progress bar (on standard error when it is hidden).
    pub drill: Option<DrillPlan>,
    /// Per-interval rows of the measured interval (off by default).
    pub interval: crate::interval::IntervalOptions,
    /// How long to measure the cluster's idle CPU once it is up and loaded, before the
    /// clients start ([`CpuCost::idle_cpu_cores`]); zero: not measured.
    pub idle_window: Duration,
    /// How the clients retry a transaction that aborted for a retryable cause.
    pub retry: RetryPolicy,
}

impl Default for BankConfig {
    fn default() -> Self {
        BankConfig {
            duration: Duration::from_secs(30),
            warmup: Duration::from_secs(2),
            accounts: 64,
            initial_balance: 1000,
            max_transfer: 100,
            read_ratio: 0.0,
            clients_per_node: 2,
            table: "kv".into(),
            options: CoordinatorOptions::default(),
            seed: 42,
            progress: false,
            drill: None,
            interval: Default::default(),
            idle_window: DEFAULT_IDLE_WINDOW,
            retry: RetryPolicy::default(),
        }
    }
}

/// Results of a bank run.
#[derive(Clone, Debug, Serialize)]
pub struct BankReport {
    /// `bank`.
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
    /// Accounts.
    pub accounts: u64,
    /// Concurrent clients in all.
    pub clients: usize,
    /// Measured seconds.
    pub duration_s: f64,
    /// Transactions of the measured interval as the coordinators answered them: every
    /// attempt (the abort rate is per attempt); the latency is each attempt's
    /// acknowledgement's.
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
    /// Transfers committed over the whole run (warm-up included).
    pub transfers_committed: u64,
    /// Transfers with an unknown outcome over the whole run.
    pub transfers_unknown: u64,
    /// Read-all transactions committed over the whole run.
    pub reads_committed: u64,
    /// Read-all transactions that saw a total other than the expected one.
    pub reads_wrong_total: u64,
    /// accounts × initial balance.
    pub expected_total: i64,
    /// The total over the primaries, the second replicas, the third replicas, … after the
    /// run.
    pub totals_by_replica: Vec<i64>,
    /// Accounts whose replicas hold different balances after the run.
    pub accounts_disagreeing: u64,
    /// Account replicas missing after the run.
    pub replicas_missing: u64,
    /// Replicas still locked when the check gave up waiting (phase 2 unfinished).
    pub replicas_locked: u64,
    /// Every total is the expected one.
    pub total_ok: bool,
    /// Every account's replicas agree.
    pub replicas_agree: bool,
    /// Every read-all saw the expected total.
    pub reads_ok: bool,
    /// All three.
    pub pass: bool,
    /// The drill, when one ran (the check above ran after it, on the current placement).
    pub drill: Option<EmbeddedDrillReport>,
}

impl BankReport {
    /// The check's verdict in one line: `ok (64 accounts, total 64000, 3 replicas each
    /// agree)` or what failed.
    pub fn check_line(&self) -> String {
        if self.pass {
            return format!(
                "ok ({} accounts, total {}, {} replicas each agree)",
                self.accounts,
                self.expected_total,
                self.totals_by_replica.len()
            );
        }
        format!(
            "FAILED (expected total {}, totals by replica {:?}; {} accounts disagreeing, {} replicas missing, {} locked; {} read-alls saw a wrong total)",
            self.expected_total,
            self.totals_by_replica,
            self.accounts_disagreeing,
            self.replicas_missing,
            self.replicas_locked,
            self.reads_wrong_total
        )
    }
}

/// One replica's view of a record: its node, cell 0 (`None`: record missing), and whether
/// the record's lock word is held.
pub type ReplicaCell = (NodeId, Option<Vec<u8>>, bool);

/// Cell 0 of `key` of `table` on each replica of its partition in the current placement
/// ([`EmbeddedCluster::placement`]: after a failover, the rebuilt replicas, not the removed
/// ones).
pub fn replica_cells(cluster: &EmbeddedCluster, table: TableId, key: u64) -> Result<Vec<ReplicaCell>, String> {
    let topo = &cluster.placement();
    let schema = topo.table(table).ok_or_else(|| format!("no table {table}"))?;
    let p = topo.partition_of(schema, key);
    topo.partitions[p.0 as usize]
        .replicas
        .iter()
        .map(|&n| {
            let dc = topo.nodes[n.0 as usize].dc;
            let img = cluster.dcs[dc.0 as usize]
                .read_record(n, table, key)
                .map_err(|e| format!("reading {key} on {}: {e}", topo.node_name(n)))?;
            Ok(match img {
                Some(i) => (n, i.values.into_iter().next(), i.lock != 0),
                None => (n, None, false),
            })
        })
        .collect()
}

/// Waits (up to `timeout`) until no replica of `keys` is locked and the replicas of each key
/// hold the same cell 0 (phase 2 and replay done), then returns every replica's cell 0, per
/// key, and whether that state was reached.
pub async fn settled_cells(
    cluster: &EmbeddedCluster,
    table: TableId,
    keys: &[u64],
    timeout: Duration,
) -> Result<(Vec<Vec<(NodeId, Option<Vec<u8>>, bool)>>, bool), String> {
    let t0 = Instant::now();
    loop {
        let cells: Vec<_> = keys.iter().map(|&k| replica_cells(cluster, table, k)).collect::<Result<_, _>>()?;
        let calm = cells
            .iter()
            .all(|reps| reps.iter().all(|(_, _, locked)| !locked) && reps.windows(2).all(|w| w[0].1 == w[1].1));
        if calm || t0.elapsed() > timeout {
            return Ok((cells, calm));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub use redt_checkers::bank::balance;

/// Runs the bank workload on an embedded cluster of `topo` and checks it.
///
/// # Errors
/// Cluster start-up, a missing table, a load failure, as text.
pub async fn run_bank(topo: Topology, cfg: &BankConfig) -> Result<BankReport, String> {
    let schema =
        topo.table_by_name(&cfg.table).ok_or_else(|| format!("the topology has no table `{}`", cfg.table))?.clone();
    if schema.cells[0].bytes < 8 {
        return Err(format!("table `{}`: cell 0 must hold at least 8 bytes for a balance", cfg.table));
    }
    if cfg.accounts < 2 {
        return Err("a bank needs at least 2 accounts".into());
    }
    let tid = schema.id;
    let rtt_ms = topo.links.first().and_then(|l| l.get(1)).map(|c| c.rtt.as_secs_f64() * 1e3).unwrap_or(0.0);
    let DrilledCluster { cluster, mut drill, routes, data_root } =
        start_cluster(topo, cfg.options.clone(), cfg.drill.clone(), cfg.duration).await?;
    let topo = cluster.topology.clone();
    let accounts: Arc<Vec<u64>> = Arc::new((0..cfg.accounts).collect());
    // Load: the same balance into every replica.
    let start_balance = cfg.initial_balance.to_le_bytes();
    for &k in accounts.iter() {
        let p = topo.partition_of(&schema, k);
        for &n in &topo.partitions[p.0 as usize].replicas {
            let dc = topo.nodes[n.0 as usize].dc;
            if let Err(e) = cluster.dcs[dc.0 as usize].insert_record(n, tid, k, &[&start_balance]) {
                cluster.shutdown();
                return Err(format!("loading account {k} on {}: {e}", topo.node_name(n)));
            }
        }
    }
    let expected = cfg.initial_balance * cfg.accounts as i64;
    let read_ratio = if cfg.accounts <= MAX_READ_ALL { cfg.read_ratio.clamp(0.0, 1.0) } else { 0.0 };
    let idle_cpu_cores = crate::cpu::idle_cpu_cores(cfg.idle_window).await;

    let stop = Arc::new(AtomicBool::new(false));
    // transfers committed, transfers unknown, reads committed, reads with a wrong total
    let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
    let feed = drill.as_ref().map(EmbeddedDrill::feed).unwrap_or_default();
    // The clients' retries, over the measured interval.
    let meter = Arc::new(Meter::default());
    let on_answer: OnAnswer<BankTxn> = {
        let (counts, accounts, topo, schema) = (counts.clone(), accounts.clone(), topo.clone(), schema.clone());
        let meter = meter.clone();
        Arc::new(move |txn, submitted, retried| {
            meter.record_retried(retried, submitted);
            let out = retried.answer();
            match txn {
                BankTxn::ReadAll(ops) => {
                    if out.status == TxnStatus::Committed {
                        counts[2].fetch_add(1, Ordering::Relaxed);
                        let total: i64 = out.reads.iter().map(|r| r.as_deref().map_or(0, balance)).sum();
                        if total != expected || out.reads.len() != ops.len() {
                            counts[3].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                &BankTxn::Transfer { from, to, .. } => {
                    feed.record(submitted, &out.status, || {
                        [from, to].iter().map(|&i| topo.partition_of(&schema, accounts[i])).collect()
                    });
                    let i = match out.status {
                        TxnStatus::Committed => 0,
                        TxnStatus::Unknown(_) => 1,
                        TxnStatus::Aborted(_) => return,
                    };
                    counts[i].fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let load = BankClients {
        table: tid,
        accounts: accounts.clone(),
        max_transfer: cfg.max_transfer,
        read_ratio,
        per_node: cfg.clients_per_node,
        seed: cfg.seed,
        retry: cfg.retry,
    };
    let mut clients = load.spawn(&topo, &Submit::Embedded(routes), &stop, on_answer);
    let warm = bar(cfg.progress, cfg.warmup.as_millis() as u64, "warm-up");
    let t0 = Instant::now();
    while t0.elapsed() < cfg.warmup {
        tokio::time::sleep(Duration::from_millis(100)).await;
        warm.set_position(t0.elapsed().as_millis() as u64);
    }
    warm.finish_and_clear();
    cluster.stats.reset();
    meter.set_measuring(true);
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
        run.set_message(format!("{} transfers", counts[0].load(Ordering::Relaxed)));
        if let Ok(Some(iv)) = &mut rows {
            if iv.due(started.elapsed()) && started.elapsed() < cfg.duration {
                let snap = crate::cluster::stats_snapshot(&cluster.stats, started.elapsed());
                if let Err(e) = iv.take(snap, &run) {
                    rows = Err(e);
                }
            }
        }
    }
    let elapsed = started.elapsed();
    let (cpu_spent, _) = cpu.read();
    meter.set_measuring(false);
    let classes: Vec<_> = Class::all().iter().map(|&c| cluster.stats.report(c)).collect();
    let hist = cluster.stats.latency_us();
    // The last row ends at the figures the report is made of.
    let rows = rows.and_then(|iv| match iv {
        Some(iv) => {
            let sum = |f: fn(&redt_coordinator::ClassReport) -> u64| classes.iter().map(f).sum::<u64>();
            let last = crate::interval::Snapshot {
                at: elapsed,
                committed: sum(|c| c.committed),
                aborted: sum(|c| c.aborted),
                unknown: sum(|c| c.unknown),
                latency_us: hist.clone(),
            };
            iv.finish(last, &run)
        }
        None => Ok(()),
    });
    run.finish_and_clear();
    stop.store(true, Ordering::Relaxed);
    while clients.join_next().await.is_some() {}

    // After a drill: heal, settle, report.
    let drill = crate::drill_embedded::finish_drill(drill, &cluster, cfg.progress).await?;
    // The check: wait for phase 2, then read every replica of the current placement.
    let wait = Duration::from_millis((rtt_ms * 10.0) as u64) + Duration::from_secs(5);
    let settled = settled_cells(&cluster, tid, &accounts, wait).await;
    cluster.shutdown();
    drop(data_root);
    rows.map_err(|e| format!("interval rows: {e}"))?;
    let (cells, _calm) = settled?;
    let replicas = cells.iter().map(|r| r.len()).max().unwrap_or(0);
    let mut totals = vec![0i64; replicas];
    let (mut disagreeing, mut missing, mut locked) = (0u64, 0u64, 0u64);
    for reps in &cells {
        for (i, (_, cell, l)) in reps.iter().enumerate() {
            match cell {
                Some(c) => totals[i] += balance(c),
                None => missing += 1,
            }
            locked += *l as u64;
        }
        if reps.windows(2).any(|w| w[0].1.as_deref().map(balance) != w[1].1.as_deref().map(balance)) {
            disagreeing += 1;
        }
    }
    let committed: u64 = classes.iter().map(|c| c.committed).sum();
    let aborted: u64 = classes.iter().map(|c| c.aborted).sum();
    let unknown: u64 = classes.iter().map(|c| c.unknown).sum();
    let total_ok = missing == 0 && totals.iter().all(|&t| t == expected);
    let replicas_agree = disagreeing == 0 && missing == 0;
    let reads_wrong = counts[3].load(Ordering::Relaxed);
    Ok(BankReport {
        workload: "bank".into(),
        protocol: cfg.options.protocol,
        topology: topo.name.clone(),
        dcs: topo.dcs.len(),
        nodes: topo.nodes.len(),
        rtt_ms,
        accounts: cfg.accounts,
        clients: cfg.clients_per_node * topo.nodes.len(),
        duration_s: elapsed.as_secs_f64(),
        outcomes: Outcomes::new(committed, aborted, unknown, elapsed, &hist),
        retries: meter.retries(cfg.retry.retries),
        cpu: CpuCost::new(Some(cpu_spent), elapsed, committed, idle_cpu_cores),
        transfers_committed: counts[0].load(Ordering::Relaxed),
        transfers_unknown: counts[1].load(Ordering::Relaxed),
        reads_committed: counts[2].load(Ordering::Relaxed),
        reads_wrong_total: reads_wrong,
        expected_total: expected,
        totals_by_replica: totals,
        accounts_disagreeing: disagreeing,
        replicas_missing: missing,
        replicas_locked: locked,
        total_ok,
        replicas_agree,
        reads_ok: reads_wrong == 0,
        pass: total_ok && replicas_agree && reads_wrong == 0,
        drill,
    })
}
