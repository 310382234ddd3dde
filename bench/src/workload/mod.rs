//! The workload lifecycle against a running cluster (`redt workload init|run|check`):
//! each workload's data loaded through the cluster's own transactions, what was loaded recorded
//! in the cluster ([`meta`]), runs that read that record and refuse a mismatch, and checks that
//! can run any time later.
//!
//! | workload | init | run | check |
//! |---|---|---|---|
//! | [`ycsb`] | every record of `records_per_partition` per partition, every cell written | the YCSB clients of `redt bench ycsb --cluster` | every record present, every cell one repeated byte (as init and updates write them), the count init recorded |
//! | [`bank`] | `accounts` balances in the `kv` table | transfers | the total is accounts × balance |
//! | [`append`] | nothing but the record (lists start empty) | Jepsen list-append on fresh keys, the history to a file | the history against the lists read back |
//! | [`tpcc`] | the TPC-C database of `warehouses` | the TPC-C terminals | the 12 consistency conditions of clause 3.3.2 |
//!
//! Everything goes through a [`Target`]: a [`Client`] of the cluster (with the client
//! certificate of `redt cluster up`'s run directory, or an embedded cluster's), so the same
//! code drives a running cluster and the embedded one (`redt workload run` without
//! `--cluster`: init, run and check in one process). Loading and reading back use records
//! calls (`ProcedureKind::Records`: whole records of any table, created when missing, read as
//! missing when absent), batched per partition and coordinated by the partition's primary;
//! such idempotent calls are retried with exponential back-off until they commit.

pub mod append;
pub mod bank;
pub mod meta;
pub mod tpcc;
pub mod ycsb;

use crate::cpu::CpuSource;
use crate::interval::{IntervalOptions, Intervals, Snapshot};
use crate::progress::bar;
use crate::report::{CpuCost, Latency, Outcomes, Retries, RetryCounts};
use backon::{ExponentialBuilder, Retryable};
use redt_coordinator::{Attempt, Client, EmbeddedCluster, Retried, TxnAnswer, TxnStatus};
use redt_dc_executor::RecordOp;
use redt_proto::wire::ProcedureCall;
use redt_proto::{NodeId, PartitionId, TableId, Topology};
use redt_protocol::call;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The workloads of `redt workload`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    /// YCSB ([`ycsb`]).
    Ycsb,
    /// TPC-C ([`tpcc`]).
    Tpcc,
    /// Bank transfers ([`bank`]).
    Bank,
    /// Jepsen list-append ([`append`]).
    Append,
}

impl WorkloadKind {
    /// Every workload, in the order of their reserved metadata keys.
    pub const ALL: [WorkloadKind; 4] =
        [WorkloadKind::Ycsb, WorkloadKind::Tpcc, WorkloadKind::Bank, WorkloadKind::Append];

    /// `ycsb`, `tpcc`, `bank`, `append`.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Ycsb => "ycsb",
            WorkloadKind::Tpcc => "tpcc",
            WorkloadKind::Bank => "bank",
            WorkloadKind::Append => "append",
        }
    }
}

impl std::fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How long an idempotent call (a load batch, a read-back, the metadata record) is retried
/// before the command gives up.
pub const RETRY_FOR: Duration = Duration::from_secs(60);

/// Most operations in one load or read-back transaction (also kept under the topology's
/// `limits.max_ops_per_txn`).
pub const BATCH_OPS: usize = 256;

/// Most bytes of values in one load transaction (also kept under `limits.max_bytes_per_txn`).
pub const BATCH_BYTES: usize = 512 * 1024;

/// Load or read-back transactions in flight at once.
pub const IN_FLIGHT: usize = 8;

/// Whether an abort's reason is the coordinator refusing the call itself (`bad procedure
/// call: …`, `… (limits.max_…)`): running it again cannot commit.
fn refused(reason: &str) -> bool {
    reason.contains("bad procedure call") || reason.contains("(limits.")
}

/// A cluster the workload commands drive: a client and the topology (the cluster's file).
#[derive(Clone)]
pub struct Target {
    /// The client.
    pub client: Arc<Client>,
    /// The topology.
    pub topo: Arc<Topology>,
    /// Whether the cluster runs in this process ([`Target::embedded`]).
    embedded: bool,
}

impl Target {
    /// Connects to the running cluster of `topo` with the client certificate of `certs`
    /// (`redt-client.pem`/`.key`, as `redt cluster up` writes them). Must run inside a tokio
    /// runtime.
    ///
    /// # Errors
    /// A missing or expired certificate, a socket that cannot bind, as text.
    pub fn connect(topo: Topology, certs: &Path) -> Result<Target, String> {
        let topo = Arc::new(topo);
        let client = Client::connect(topo.clone(), certs, Duration::from_secs(10))
            .map_err(|e| format!("connecting with the client certificate of {}: {e}", certs.display()))?;
        Ok(Target { client: Arc::new(client), topo, embedded: false })
    }

    /// The embedded `cluster`, reached as a running one (with its client certificate).
    ///
    /// # Errors
    /// A socket that cannot bind, as text.
    pub fn embedded(cluster: &EmbeddedCluster) -> Result<Target, String> {
        let client = cluster.client(Duration::from_secs(10)).map_err(|e| e.to_string())?;
        Ok(Target { client: Arc::new(client), topo: cluster.topology.clone(), embedded: true })
    }

    /// Where a run's CPU time is read: this process for an embedded cluster, else every
    /// node's status (their processes' CPU times add up).
    pub fn cpu_source(&self) -> CpuSource {
        if self.embedded {
            CpuSource::Process
        } else {
            CpuSource::Nodes(self.client.clone(), self.topo.nodes.iter().map(|n| n.id).collect())
        }
    }

    /// The table named `name`.
    ///
    /// # Errors
    /// No such table, naming the topology.
    pub fn table(&self, name: &str) -> Result<&redt_proto::TableSchema, String> {
        self.topo.table_by_name(name).ok_or_else(|| format!("the topology `{}` has no table `{name}`", self.topo.name))
    }

    /// The partition of `key` of `table` and the node holding its primary replica.
    pub fn home(&self, table: TableId, key: u64) -> (PartitionId, NodeId) {
        let schema = self.topo.table(table).expect("callers name tables of the topology");
        let p = self.topo.partition_of(schema, key);
        (p, self.topo.partitions[p.0 as usize].replicas[0])
    }

    /// Runs `call` through `node` until it commits, retrying with exponential back-off (5 ms
    /// to 1 s, jittered) after an abort or an unknown outcome for up to [`RETRY_FOR`]. Only
    /// for idempotent calls: one whose outcome stayed unknown may have committed and is run
    /// again. A call the coordinator refuses as such (malformed, over a `limits.` value) is
    /// not retried.
    ///
    /// # Errors
    /// The refusal; the last abort or unknown outcome's reason once [`RETRY_FOR`] has passed.
    pub async fn commit_idempotent(&self, node: NodeId, call: ProcedureCall) -> Result<TxnAnswer, String> {
        let deadline = Instant::now() + RETRY_FOR;
        let attempt = || async {
            let out = self.client.submit(node, call.clone()).await;
            match &out.status {
                TxnStatus::Committed => Ok(out),
                TxnStatus::Aborted(e) | TxnStatus::Unknown(e) => Err(e.clone()),
            }
        };
        attempt
            .retry(
                ExponentialBuilder::default()
                    .with_min_delay(Duration::from_millis(5))
                    .with_max_delay(Duration::from_secs(1))
                    .with_jitter()
                    .without_max_times(),
            )
            .when(|e: &String| Instant::now() < deadline && !refused(e))
            .await
            .map_err(|e| {
                if refused(&e) {
                    e
                } else {
                    format!("{e} (retried for {})", humantime::format_duration(RETRY_FOR))
                }
            })
    }

    /// Runs `ops` (records operations, any tables) as few transactions as the batch limits
    /// allow, each on one partition and coordinated by its primary, [`IN_FLIGHT`] at once,
    /// each retried until it commits ([`Target::commit_idempotent`]); `progress` is told how
    /// many operations are done. Returns what each operation read, in the order of `ops`
    /// (gets: the record's cells, or `None` when missing; other operations: `None`).
    ///
    /// # Errors
    /// A batch that did not commit within [`RETRY_FOR`]; a malformed answer.
    pub async fn records(
        &self,
        ops: Vec<RecordOp>,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<Vec<Option<Vec<Vec<u8>>>>, String> {
        let limits = &self.topo.limits;
        let max_ops = BATCH_OPS.min(limits.max_ops_per_txn as usize).max(1);
        let max_bytes = BATCH_BYTES.min(limits.max_bytes_per_txn as usize / 2).max(1);
        // Group by partition, keeping each operation's position.
        let mut by_part: std::collections::BTreeMap<u32, Vec<(usize, RecordOp)>> = Default::default();
        for (i, op) in ops.into_iter().enumerate() {
            let (table, key) = op.target();
            by_part.entry(self.home(table, key).0 .0).or_default().push((i, op));
        }
        let total: usize = by_part.values().map(Vec::len).sum();
        let mut batches: Vec<(NodeId, Vec<(usize, RecordOp)>)> = Vec::new();
        for (p, ops) in by_part {
            let node = self.topo.partitions[p as usize].replicas[0];
            let mut cur: Vec<(usize, RecordOp)> = Vec::new();
            let mut bytes = 0;
            for (i, op) in ops {
                let b = match &op {
                    RecordOp::Put { cells, .. } => cells.iter().map(Vec::len).sum::<usize>(),
                    _ => 0,
                } + 8;
                if !cur.is_empty() && (cur.len() >= max_ops || bytes + b > max_bytes) {
                    batches.push((node, std::mem::take(&mut cur)));
                    bytes = 0;
                }
                bytes += b;
                cur.push((i, op));
            }
            if !cur.is_empty() {
                batches.push((node, cur));
            }
        }
        let mut out: Vec<Option<Vec<Vec<u8>>>> = vec![None; total];
        let done = AtomicU64::new(0);
        let mut pending = batches.into_iter();
        let mut set = tokio::task::JoinSet::new();
        loop {
            while set.len() < IN_FLIGHT {
                let Some((node, batch)) = pending.next() else { break };
                let me = self.clone();
                set.spawn(async move {
                    let ops: Vec<RecordOp> = batch.iter().map(|(_, op)| op.clone()).collect();
                    let o = me.commit_idempotent(node, call::records_call(&ops)).await?;
                    let mut read = Vec::with_capacity(batch.len());
                    for ((i, op), r) in batch.iter().zip(o.reads.iter().chain(std::iter::repeat(&None))) {
                        let cells = match (op, r) {
                            (RecordOp::Get { .. }, Some(bytes)) => {
                                call::decode_record_read(bytes).map_err(|e| e.to_string())?
                            }
                            (RecordOp::Get { table, key }, None) => {
                                return Err(format!("no read returned for table {table} key {key}"))
                            }
                            _ => None,
                        };
                        read.push((*i, cells));
                    }
                    Ok::<_, String>(read)
                });
            }
            let Some(joined) = set.join_next().await else { break };
            let read = joined.map_err(|e| e.to_string())??;
            progress(done.fetch_add(read.len() as u64, Ordering::Relaxed) + read.len() as u64);
            for (i, cells) in read {
                out[i] = cells;
            }
        }
        Ok(out)
    }
}

/// The outcome counters and latency histogram of a run's clients, and their retries,
/// counting only while the measured interval runs ([`measure`]).
pub struct Meter {
    measuring: AtomicBool,
    /// Committed transactions, aborted attempts, transactions with an unknown outcome.
    counts: [AtomicU64; 3],
    latency_us: Mutex<hdrhistogram::Histogram<u64>>,
    /// The transactions counted by [`Meter::record_retried`].
    retries: RetryCounts,
}

impl Default for Meter {
    fn default() -> Self {
        Meter {
            measuring: AtomicBool::new(false),
            counts: Default::default(),
            latency_us: Mutex::new(Latency::histogram()),
            retries: RetryCounts::default(),
        }
    }
}

impl Meter {
    /// Whether it counts now (the measured interval runs).
    pub fn measuring(&self) -> bool {
        self.measuring.load(Ordering::Relaxed)
    }

    /// Counts from now on (`true`) or no more (`false`).
    pub fn set_measuring(&self, on: bool) {
        self.measuring.store(on, Ordering::Relaxed);
    }

    /// Counts one attempt submitted at `submitted` that came to `status` (while measuring; a
    /// commit's latency too), for clients that count their attempts themselves (the TPC-C
    /// terminals').
    pub fn record(&self, status: &TxnStatus, submitted: Instant) {
        if !self.measuring.load(Ordering::Relaxed) {
            return;
        }
        let i = match status {
            TxnStatus::Committed => {
                let us = submitted.elapsed().as_micros().max(1) as u64;
                let _ = self.latency_us.lock().unwrap_or_else(|p| p.into_inner()).record(us);
                0
            }
            TxnStatus::Aborted(_) => 1,
            TxnStatus::Unknown(_) => 2,
        };
        self.counts[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one transaction first submitted at `submitted` and attempted as `r` says
    /// ([`redt_coordinator::retrying`]), while measuring: a commit (with its latency, from the
    /// first submission to the commit) or an unknown outcome once, every aborted attempt (the
    /// last one too, when the transaction was given up) as an abort, and its attempts and
    /// their causes for [`Meter::retries`].
    pub fn record_retried<A: Attempt>(&self, r: &Retried<A>, submitted: Instant) {
        if !self.measuring.load(Ordering::Relaxed) {
            return;
        }
        match r.answer().status {
            TxnStatus::Committed => {
                let us = submitted.elapsed().as_micros().max(1) as u64;
                let _ = self.latency_us.lock().unwrap_or_else(|p| p.into_inner()).record(us);
                self.counts[0].fetch_add(1, Ordering::Relaxed);
            }
            TxnStatus::Unknown(_) => {
                self.counts[2].fetch_add(1, Ordering::Relaxed);
            }
            TxnStatus::Aborted(_) => {}
        }
        self.counts[1].fetch_add(r.aborts.len() as u64, Ordering::Relaxed);
        self.retries.add(r);
    }

    /// The retries of the transactions [`Meter::record_retried`] counted, of clients that
    /// retried at most `max_retries` times.
    pub fn retries(&self, max_retries: u32) -> Retries {
        self.retries.report(max_retries)
    }

    /// A hook for the closed-loop clients ([`crate::clients`]) that counts every transaction
    /// ([`Meter::record_retried`]).
    pub fn counting<T: ?Sized + 'static>(self: &Arc<Self>) -> crate::clients::OnAnswer<T> {
        let meter = self.clone();
        Arc::new(move |_, submitted, out| meter.record_retried(out, submitted))
    }

    /// The figures so far, `at` into the measured interval.
    pub fn snapshot(&self, at: Duration) -> Snapshot {
        let [committed, aborted, unknown] = [0, 1, 2].map(|i| self.counts[i].load(Ordering::Relaxed));
        let latency_us = self.latency_us.lock().unwrap_or_else(|p| p.into_inner()).clone();
        Snapshot { at, committed, aborted, unknown, latency_us }
    }

    /// The outcomes of a measured interval of `elapsed`.
    pub fn outcomes(&self, elapsed: Duration) -> Outcomes {
        let s = self.snapshot(elapsed);
        Outcomes::new(s.committed, s.aborted, s.unknown, elapsed, &s.latency_us)
    }
}

/// What [`measure`] measured.
#[derive(Clone, Copy, Debug)]
pub struct Measured {
    /// The measured time.
    pub elapsed: Duration,
    /// The CPU time its source spent over it (`None`: unreadable, see
    /// [`crate::cpu::CpuReading::until`]).
    pub cpu_time: Option<Duration>,
    /// That CPU time per transaction the meter counted committed (no idle window).
    pub cpu: CpuCost,
}

/// Waits out `warmup`, then measures for `duration` on `meter` (a progress bar when
/// `progress`, interval rows as `interval` asks) and reads `cpu` at either end of it, then
/// sets `stop`. Returns the measured time and its CPU cost.
///
/// # Errors
/// Writing the interval rows' CSV file.
pub async fn measure(
    meter: &Meter,
    stop: &AtomicBool,
    cpu: &CpuSource,
    warmup: Duration,
    duration: Duration,
    interval: &IntervalOptions,
    progress: bool,
) -> Result<Measured, String> {
    let warm = bar(progress && !warmup.is_zero(), warmup.as_millis() as u64, "warm-up");
    let t0 = Instant::now();
    while t0.elapsed() < warmup {
        tokio::time::sleep(Duration::from_millis(100).min(warmup)).await;
        warm.set_position(t0.elapsed().as_millis() as u64);
    }
    warm.finish_and_clear();
    let mut rows = Intervals::start(interval);
    let run = bar(progress, duration.as_millis() as u64, "run");
    let cpu0 = cpu.read().await;
    let started = Instant::now();
    meter.measuring.store(true, Ordering::Relaxed);
    while started.elapsed() < duration {
        tokio::time::sleep(Duration::from_millis(100)).await;
        run.set_position(started.elapsed().as_millis() as u64);
        run.set_message(format!("{} committed", meter.counts[0].load(Ordering::Relaxed)));
        if let Ok(Some(iv)) = &mut rows {
            if iv.due(started.elapsed()) && started.elapsed() < duration {
                if let Err(e) = iv.take(meter.snapshot(started.elapsed()), &run) {
                    rows = Err(e);
                }
            }
        }
    }
    meter.measuring.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed();
    let cpu1 = cpu.read().await;
    stop.store(true, Ordering::Relaxed);
    let last = meter.snapshot(elapsed);
    let cpu_time = cpu0.until(&cpu1);
    let cpu = CpuCost::new(cpu_time, elapsed, last.committed, None);
    let rows = rows.and_then(|iv| match iv {
        Some(iv) => iv.finish(last, &run),
        None => Ok(()),
    });
    run.finish_and_clear();
    rows.map_err(|e| format!("interval rows: {e}"))?;
    Ok(Measured { elapsed, cpu_time, cpu })
}

/// Refuses a run that committed nothing: `what` measured `elapsed` and its clients saw
/// `outcomes`. A run whose every transaction aborted measured nothing and must not pass.
///
/// # Errors
/// No commit, with the aborts and unknowns and what usually causes it (`hint`).
pub fn require_commits(what: &str, outcomes: &Outcomes, elapsed: Duration, hint: &str) -> Result<(), String> {
    if outcomes.committed > 0 {
        return Ok(());
    }
    Err(format!(
        "{what} committed no transaction in {:.1} s ({} aborted, {} unknown){}",
        elapsed.as_secs_f64(),
        outcomes.aborted,
        outcomes.unknown,
        if hint.is_empty() { String::new() } else { format!(": {hint}") }
    ))
}
