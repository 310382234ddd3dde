//! `redt bench tpcc`: closed-loop TPC-C terminals against an embedded cluster of the TPC-C
//! topology (configs/tpcc.yaml).
//!
//! Each terminal belongs to one home warehouse and submits to the node that holds that
//! warehouse's primary replica (so every terminal's coordinator sits in its warehouse's
//! DC). It draws a transaction type from the standard mix (45% New-Order, 43% Payment, 4%
//! each Order-Status, Delivery and Stock-Level), generates the inputs of clauses 2.4-2.8,
//! reads the order-dependent keys with a reconnaissance (one-sided READs of the nearest
//! replica's records and ordered-index trees, no locks, no WAN round trip: Calvin's OLLP),
//! then submits the transaction and
//! retries it after a conflict (No-Wait lock conflict: random back-off) or a stale
//! reconnaissance until it commits or rolls back. Keying and think times are off unless
//! `think` is set. A warm-up is excluded from every figure.
//!
//! Reported per type: business transactions completed, attempts, aborted attempts
//! (conflicts, stale reconnaissance, unknown outcomes) and the abort rate they make, and
//! the latency a terminal sees from the first attempt to the commit (retries included).
//! tpmC = committed New-Orders per minute of the measured interval.
//!
//! With a drill plan ([`TpccConfig::drill`], `redt bench tpcc --drill PLAN`) the plan runs over
//! the measured interval ([`crate::drill_embedded`]): a terminal whose node the drill stopped
//! submits through the nearest node up, the reconnaissance reads the replicas of its
//! coordinator's current placement, the pre-allocator writes into the current placement's
//! replicas and learners, every attempt's answer goes to the drill's timeline, and after the
//! drill every fault is healed, the cluster settles, and the 12 conditions are checked on
//! every replica of the current placement.

use super::check::{check, check_replica, CheckInput, CheckReport};
use super::loader::{self, read_at, rows_per_warehouse, Footprint, LoadConfig, Preallocator};
use super::procedures::{self as px, kind, Line, INVALID_ITEM, STALE};
use super::schema::{self as sc, table, Scale, DISTRICTS};
use super::tap::Side;
use crate::drill_embedded::{
    start_cluster, Coordinators, DrilledCluster, EmbeddedDrill, EmbeddedDrillReport, TimelineFeed,
};
use crate::drill_plan::DrillPlan;
use crate::report::{cause_counts, causes_text, CpuCost, Latency, VerbsPerTxn, DEFAULT_IDLE_WINDOW};
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redt_coordinator::{Class, ClassReport, CoordinatorOptions, Node, RetryPolicy, TxnAnswer, TxnStatus};
use redt_proto::wire::ProcedureCall;
use redt_proto::{DcId, NodeId, PartitionId, Protocol, TableId, Topology};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Parameters of a TPC-C run.
#[derive(Clone, Debug)]
pub struct TpccConfig {
    /// Warehouses.
    pub warehouses: u32,
    /// Rows per warehouse ([`Scale::SPEC`] unless testing).
    pub scale: Scale,
    /// Terminals per warehouse (closed loop).
    pub terminals_per_warehouse: usize,
    /// Measured run time.
    pub duration: Duration,
    /// Warm-up before measuring.
    pub warmup: Duration,
    /// Keying and think times of clause 5.2.5 (off: back-to-back transactions).
    pub think: bool,
    /// Check the 12 consistency conditions after the run.
    pub check: bool,
    /// Seed of the loader and the terminals.
    pub seed: u64,
    /// Progress bars on standard error.
    pub progress: bool,
    /// Coordinator options.
    pub options: CoordinatorOptions,
    /// Loader threads.
    pub load_threads: usize,
    /// Orders pre-allocated ahead of each district's D_NEXT_O_ID.
    pub headroom: u64,
    /// A drill plan to run over the measured interval, expanded for `duration`
    /// ([`DrillPlan::expand`]); `None`: no drill. With a drill the 12 conditions are checked
    /// after it whatever `check` says.
    pub drill: Option<DrillPlan>,
    /// Per-interval rows of the measured interval (off by default): database transactions
    /// (attempts; a Delivery is ten), their outcomes and latencies.
    pub interval: crate::interval::IntervalOptions,
    /// How long to measure the cluster's idle CPU once it is up, loaded and its orders
    /// pre-allocated, before the terminals start ([`CpuCost::idle_cpu_cores`]); zero: not
    /// measured. Only the embedded run has one.
    pub idle_window: Duration,
}

impl Default for TpccConfig {
    fn default() -> Self {
        TpccConfig {
            warehouses: 4,
            scale: Scale::SPEC,
            terminals_per_warehouse: DEFAULT_TERMINALS,
            duration: Duration::from_secs(60),
            warmup: Duration::from_secs(5),
            think: false,
            check: false,
            seed: 42,
            progress: false,
            options: CoordinatorOptions::default(),
            load_threads: 2,
            headroom: 200,
            drill: None,
            interval: Default::default(),
            idle_window: DEFAULT_IDLE_WINDOW,
        }
    }
}

/// Default terminals per warehouse (see `src/cmd/tpcc.rs` for why not the spec's 10).
pub const DEFAULT_TERMINALS: usize = 4;

/// The five transaction types, in report order.
pub const TYPES: [&str; 5] = ["new-order", "payment", "order-status", "delivery", "stock-level"];
const NO: usize = 0;
const PAY: usize = 1;
const OS: usize = 2;
const DEL: usize = 3;
const SL: usize = 4;

/// Figures of one transaction type.
#[derive(Clone, Debug, Serialize)]
pub struct TypeReport {
    /// Type name.
    pub name: String,
    /// Share of the business transactions completed, in percent.
    pub mix_pct: f64,
    /// Business transactions completed (committed or rolled back).
    pub completed: u64,
    /// Committed (for Delivery: all ten districts done).
    pub committed: u64,
    /// New-Order's intended rollbacks (unused item, clause 2.4.2.3).
    pub rolled_back: u64,
    /// Database transactions submitted (retries included; Delivery: one per district).
    pub attempts: u64,
    /// Attempts aborted by a lock conflict or another abort vote.
    pub aborted: u64,
    /// Attempts aborted because their reconnaissance was stale.
    pub stale: u64,
    /// Attempts whose outcome stayed unknown.
    pub unknown: u64,
    /// (aborted + stale + unknown) / attempts (intended rollbacks are not aborts).
    pub abort_rate: f64,
    /// Delivery: districts skipped because they had no undelivered order.
    pub skipped_districts: u64,
    /// Aborted attempts by cause (lock conflict, record not found, stale replica,
    /// timeout, ring full, other); zero causes left out.
    pub abort_causes: Vec<(String, u64)>,
    /// From the first attempt to the commit or rollback, retries included, ms.
    pub latency_ms: Latency,
}

/// Results of a TPC-C run.
#[derive(Clone, Debug, Serialize)]
pub struct TpccReport {
    /// Workload name.
    pub workload: String,
    /// The commit protocol every node ran (`redt`, `2pc-paxos`, …).
    pub protocol: Protocol,
    /// Topology name.
    pub topology: String,
    /// DCs.
    pub dcs: usize,
    /// Nodes.
    pub nodes: usize,
    /// Inter-DC RTT of the first link, ms.
    pub rtt_ms: f64,
    /// Warehouses.
    pub warehouses: u32,
    /// Rows per warehouse.
    pub scale: Scale,
    /// Terminals in all.
    pub terminals: usize,
    /// Keying and think times on?
    pub think: bool,
    /// Early acknowledgement on?
    pub early_ack: bool,
    /// Seconds the load took.
    pub load_s: f64,
    /// Warm-up seconds (excluded).
    pub warmup_s: f64,
    /// Measured seconds.
    pub duration_s: f64,
    /// Committed New-Orders per minute.
    pub tpmc: f64,
    /// tpmC per warehouse (the spec's ceiling with think times is 12.86).
    pub tpmc_per_warehouse: f64,
    /// Committed business transactions per second (all types).
    pub committed_per_s: f64,
    /// Committed database transactions per second as the coordinators count them
    /// (Delivery: one per district).
    pub db_committed_per_s: f64,
    /// Aborted attempts / attempts over all types.
    pub abort_rate: f64,
    /// The CPU time of this process (every node, terminal and replay thread) over the measured
    /// interval, per committed business transaction (as `committed_per_s` counts them), and
    /// over the idle window before the warm-up.
    #[serde(flatten)]
    pub cpu: CpuCost,
    /// Per type.
    pub types: Vec<TypeReport>,
    /// Load footprint.
    pub footprint: Footprint,
    /// Records loaded per replica.
    pub records_loaded: u64,
    /// Records pre-allocated for New-Order (per replica, all of them).
    pub records_preallocated: u64,
    /// RDMA verbs per committed database transaction (aborted attempts included; the
    /// driver's own reconnaissance READs and pre-allocation excluded).
    pub verbs_per_txn: VerbsPerTxn,
    /// The coordinators' per-class figures (RedT Table 2).
    pub classes: Vec<(String, ClassReport)>,
    /// The consistency check, when asked for (after a drill: on the primaries of the current
    /// placement).
    pub check: Option<CheckReport>,
    /// The drill, when one ran.
    pub drill: Option<Box<EmbeddedDrillReport>>,
    /// After a drill: the 12 conditions on each replica rank of the current placement (the
    /// primaries, the second replicas, …).
    pub checks_after_drill: Vec<CheckReport>,
}

#[derive(Default)]
struct TypeStats {
    completed: AtomicU64,
    committed: AtomicU64,
    rolled_back: AtomicU64,
    attempts: AtomicU64,
    aborted: AtomicU64,
    stale: AtomicU64,
    unknown: AtomicU64,
    skipped: AtomicU64,
    /// Aborted attempts by cause, indexed like [`ABORT_CAUSES`].
    causes: [AtomicU64; 6],
}

/// Causes of aborted attempts, from the coordinator's abort text.
pub const ABORT_CAUSES: [&str; 6] =
    ["lock conflict", "record not found", "stale replica", "timeout", "ring full", "other"];

fn cause_of(why: &str) -> usize {
    if why.contains("lock conflict") {
        0
    } else if why.contains("not found") {
        1
    } else if why.contains("stale replicas") {
        2
    } else if why.contains("timed out") {
        3
    } else if why.contains("ring") && why.contains("full") {
        4
    } else {
        5
    }
}

/// Where terminals send their transactions and read their reconnaissance: the embedded
/// cluster's nodes and MemStores ([`Embedded`]), or a running cluster through a client
/// ([`crate::workload::tpcc`]).
pub(crate) trait Backend: Send + Sync + 'static {
    /// A coordinator chosen for one attempt, and where its reconnaissance reads.
    type Route: Clone + Send + Sync;

    /// The coordinator a terminal homed on `home` submits through now (`None` while every
    /// node is down).
    fn route(&self, home: NodeId) -> Option<Self::Route>;

    /// Records as the reconnaissance of `route` sees them (the nearest replica, no locks, or
    /// a read-only transaction): per `(table, key)`, its cells, `None` when absent (or not
    /// readable now).
    fn read(
        &self,
        route: &Self::Route,
        keys: &[(TableId, u64)],
    ) -> impl std::future::Future<Output = Vec<Option<Vec<Vec<u8>>>>> + Send;

    /// The rows of `table` in `from..=to` as the reconnaissance of `route` sees them, at most
    /// `limit` keys of the range's partition's ordered index, in key order: per row its key
    /// and cell 0 (a key without a row, a fresh record's or a deleted one's still in the tree,
    /// may be left out or read as zero). `None` when not readable now.
    fn scan(
        &self,
        route: &Self::Route,
        table: TableId,
        from: u64,
        to: u64,
        limit: u32,
    ) -> impl std::future::Future<Output = Option<Vec<(u64, i64)>>> + Send;

    /// Submits one attempt through `route`; `part` is the home warehouse's partition.
    fn submit(
        &self,
        route: &Self::Route,
        call: ProcedureCall,
        part: PartitionId,
    ) -> impl std::future::Future<Output = TxnAnswer> + Send;
}

/// The embedded cluster's backend: terminals submit through their home node (the nearest node
/// up while a drill has it down) and read with one-sided READs of the nearest replica in that
/// node's current placement, through the driver's own handles (its verbs counted apart).
pub(crate) struct Embedded {
    topo: Arc<Topology>,
    side: Arc<Side>,
    routes: Coordinators,
    /// Where every attempt's answer goes: the drill's timeline.
    feed: TimelineFeed,
}

impl Backend for Embedded {
    type Route = (Arc<Node>, DcId);

    fn route(&self, home: NodeId) -> Option<Self::Route> {
        let node = self.routes.route(home)?;
        let dc = self.topo.nodes[node.id().0 as usize].dc;
        Some((node, dc))
    }

    async fn read(&self, (node, dc): &Self::Route, keys: &[(TableId, u64)]) -> Vec<Option<Vec<Vec<u8>>>> {
        let placement = node.placement();
        keys.iter()
            .map(|&(t, key)| {
                let schema = placement.table(t)?;
                let p = placement.partition_of(schema, key);
                let at = placement.replica_in_dc(p, *dc).unwrap_or(placement.partitions[p.0 as usize].replicas[0]);
                read_at(&placement, &self.side.dcs, at, t, key)
            })
            .collect()
    }

    /// One-sided: the nearest replica's tree (its leaves READ), then each row's record.
    async fn scan(
        &self,
        (node, dc): &Self::Route,
        t: TableId,
        from: u64,
        to: u64,
        limit: u32,
    ) -> Option<Vec<(u64, i64)>> {
        let placement = node.placement();
        let p = placement.partition_of(placement.table(t)?, from);
        let at = placement.replica_in_dc(p, *dc).unwrap_or(placement.partitions[p.0 as usize].replicas[0]);
        let h = &self.side.dcs[placement.nodes[at.0 as usize].dc.0 as usize];
        let tree = h.ordered.tree(h.verbs.as_ref(), at, t, p.0, false).ok()??;
        let entries = tree.scan(h.verbs.as_ref(), from, to, limit as usize).ok()?;
        Some(
            entries
                .into_iter()
                .filter_map(|(k, _)| {
                    let v = read_at(&placement, &self.side.dcs, at, t, k)?;
                    Some((k, v.first().map_or(0, |c| sc::get(c))))
                })
                .collect(),
        )
    }

    async fn submit(&self, (node, _): &Self::Route, call: ProcedureCall, part: PartitionId) -> TxnAnswer {
        let submitted = Instant::now();
        let out = node.submit(call).await;
        self.feed.record(submitted, &out.status, || vec![part]);
        out
    }
}

/// What the terminals share: the backend, the configuration, the counters.
pub(crate) struct Shared<B: Backend> {
    pub(crate) backend: B,
    pub(crate) cfg: TpccConfig,
    /// The NURand constants of the load (C_LAST's load value picks the run-time one).
    pub(crate) nurand: sc::NuRand,
    pub(crate) stop: AtomicBool,
    stats: [TypeStats; 5],
    latency: [Mutex<hdrhistogram::Histogram<u64>>; 5],
    /// Committed district deliveries over the whole run (warm-up included), per (w, d).
    pub(crate) deliveries: Mutex<HashMap<(u32, u32), u64>>,
    /// Unknown outcomes over the whole run.
    pub(crate) unknown_total: AtomicU64,
    /// Per (w, d): an order id every older order of which is delivered, raised by committed
    /// Deliveries. The Delivery reconnaissance scans NEW_ORDER from there: with early acks a
    /// committed Delivery's phase 2 may not have reached the replica the reconnaissance reads
    /// yet, which would show the deleted row and plan it again (stale, or a lock conflict
    /// with that phase 2). The transaction itself reads from the district's first key.
    no_floor: Mutex<HashMap<(u32, u32), u64>>,
    /// Every database transaction attempted while measuring, as the interval rows count them;
    /// whether the measured interval runs (the per-type counters count only then).
    pub(crate) meter: crate::workload::Meter,
}

/// What one attempt came to.
enum Attempt {
    Committed,
    RolledBack,
    Stale,
    Aborted,
    Unknown,
}

impl<B: Backend> Shared<B> {
    /// Terminals' shared state over `backend`, before the run (nothing counted).
    pub(crate) fn new(backend: B, cfg: TpccConfig, nurand: sc::NuRand) -> Self {
        Shared {
            backend,
            cfg,
            nurand,
            stop: AtomicBool::new(false),
            stats: Default::default(),
            latency: std::array::from_fn(|_| Mutex::new(Latency::histogram())),
            deliveries: Mutex::new(HashMap::new()),
            unknown_total: AtomicU64::new(0),
            no_floor: Mutex::new(HashMap::new()),
            meter: Default::default(),
        }
    }

    fn count(&self, ty: usize, f: impl FnOnce(&TypeStats)) {
        if self.meter.measuring() {
            f(&self.stats[ty]);
        }
    }

    /// One record as the reconnaissance of `route` sees it.
    async fn read1(&self, route: &B::Route, t: TableId, key: u64) -> Option<Vec<Vec<u8>>> {
        self.backend.read(route, &[(t, key)]).await.into_iter().next().flatten()
    }

    /// Submits one attempt through `route`; `part` is the home warehouse's partition (the
    /// drill's timeline counts the commit for it).
    async fn submit(&self, route: &B::Route, ty: usize, call: ProcedureCall, part: PartitionId) -> Attempt {
        let submitted = Instant::now();
        let out = self.backend.submit(route, call, part).await;
        self.meter.record(&out.status, submitted);
        let a = match &out.status {
            TxnStatus::Committed => Attempt::Committed,
            TxnStatus::Aborted(why) if why.contains(INVALID_ITEM) => Attempt::RolledBack,
            TxnStatus::Aborted(why) if why.contains(STALE) => Attempt::Stale,
            TxnStatus::Aborted(why) => {
                tracing::trace!("tpcc {} aborted: {why}", TYPES[ty]);
                self.count(ty, |s| {
                    s.causes[cause_of(why.as_str())].fetch_add(1, Relaxed);
                });
                Attempt::Aborted
            }
            TxnStatus::Unknown(_) => {
                self.unknown_total.fetch_add(1, Relaxed);
                Attempt::Unknown
            }
        };
        self.count(ty, |s| {
            s.attempts.fetch_add(1, Relaxed);
            match a {
                Attempt::Stale => s.stale.fetch_add(1, Relaxed),
                Attempt::Aborted => s.aborted.fetch_add(1, Relaxed),
                Attempt::Unknown => s.unknown.fetch_add(1, Relaxed),
                _ => 0,
            };
        });
        a
    }

    fn done(&self, ty: usize, committed: bool, started: Instant) {
        if !self.meter.measuring() {
            return;
        }
        let s = &self.stats[ty];
        s.completed.fetch_add(1, Relaxed);
        if committed {
            s.committed.fetch_add(1, Relaxed);
        } else {
            s.rolled_back.fetch_add(1, Relaxed);
        }
        let us = started.elapsed().as_micros().max(1) as u64;
        let _ = self.latency[ty].lock().expect("histogram").record(us);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Relaxed)
    }

    /// District (w, d)'s floor: an order id every older order of which is delivered (0 until
    /// a Delivery of the district commits).
    fn no_floor(&self, w: u32, d: u32) -> u64 {
        self.no_floor.lock().unwrap_or_else(|p| p.into_inner()).get(&(w, d)).copied().unwrap_or(0)
    }

    /// Raises district (w, d)'s floor to `o` (an order id every older order of which is
    /// delivered).
    fn raise_no_floor(&self, w: u32, d: u32, o: u64) {
        let mut m = self.no_floor.lock().unwrap_or_else(|p| p.into_inner());
        let f = m.entry((w, d)).or_insert(0);
        *f = (*f).max(o);
    }

    /// The first row of `t` in `from..=to` as the reconnaissance of `route` sees it, as its
    /// key and cell 0: `Some(None)` when the range holds no row, `None` when not readable now.
    /// A row is a key whose cell 0 is not zero (NEW_ORDER and ORDER_CUSTOMER have that one
    /// cell); keys without a row (fresh records, deleted keys a range reader kept in the tree)
    /// are passed over, [`SCAN_STEP`] keys a scan.
    async fn first_row(&self, route: &B::Route, t: TableId, from: u64, to: u64) -> Option<Option<(u64, i64)>> {
        let mut from = from;
        loop {
            let rows = self.backend.scan(route, t, from, to, SCAN_STEP).await?;
            if let Some(&r) = rows.iter().find(|r| r.1 != 0) {
                return Some(Some(r));
            }
            match rows.last() {
                Some(&(k, _)) if rows.len() == SCAN_STEP as usize && k < to => from = k + 1,
                _ => return Some(None),
            }
        }
    }

    /// Committed New-Orders so far (while measuring).
    pub(crate) fn new_orders(&self) -> u64 {
        self.stats[NO].committed.load(Relaxed)
    }

    /// Starts measuring: counters from now on.
    pub(crate) fn start_measuring(&self) {
        self.meter.set_measuring(true);
    }

    /// Stops measuring.
    pub(crate) fn stop_measuring(&self) {
        self.meter.set_measuring(false);
    }

    /// The per-type figures of the measured interval, and over all types: attempts, aborted
    /// attempts (stale and unknown included), committed business transactions.
    pub(crate) fn type_reports(&self) -> (Vec<TypeReport>, u64, u64, u64) {
        let mut types = Vec::new();
        let total_completed: u64 = self.stats.iter().map(|s| s.completed.load(Relaxed)).sum();
        let (mut all_attempts, mut all_aborts, mut all_committed) = (0u64, 0u64, 0u64);
        for (k, name) in TYPES.iter().enumerate() {
            let s = &self.stats[k];
            let g = |x: &AtomicU64| x.load(Relaxed);
            let (attempts, aborted, stale, unknown) = (g(&s.attempts), g(&s.aborted), g(&s.stale), g(&s.unknown));
            let bad = aborted + stale + unknown;
            all_attempts += attempts;
            all_aborts += bad;
            all_committed += g(&s.committed);
            types.push(TypeReport {
                name: name.to_string(),
                mix_pct: if total_completed == 0 {
                    0.0
                } else {
                    100.0 * g(&s.completed) as f64 / total_completed as f64
                },
                completed: g(&s.completed),
                committed: g(&s.committed),
                rolled_back: g(&s.rolled_back),
                attempts,
                aborted,
                stale,
                unknown,
                abort_rate: if attempts == 0 { 0.0 } else { bad as f64 / attempts as f64 },
                skipped_districts: g(&s.skipped),
                abort_causes: cause_counts(ABORT_CAUSES, s.causes.iter().map(g)),
                latency_ms: Latency::ms_from_us(&self.latency[k].lock().expect("histogram")),
            });
        }
        (types, all_attempts, all_aborts, all_committed)
    }
}

/// Keys one scan of [`Shared::first_row`] reads.
const SCAN_STEP: u32 = 32;

/// The pauses between a terminal's attempts: the clients' default ([`RetryPolicy::default`]:
/// uniform in [c/2, c] with c = 10 ms × 2^(attempt − 1), at most 160 ms; a conflicting lock
/// is held for about one inter-DC round trip, two when its holder aborts). Measured on 4
/// warehouses × 4 terminals: 20/320 ms and 80/640 ms lose 12% and 23% of tpmC, 2/40 ms 12%;
/// 5/80 ms is within noise of this. The terminals retry until the transaction commits or
/// rolls back (the spec's business transactions complete), so the policy's bound is not
/// used: only its pauses.
const RETRY: RetryPolicy = RetryPolicy::with_retries(u32::MAX);

/// The pause after stale reconnaissance (or none readable): uniform in 2.5–5 ms, whatever the
/// attempt (the next read is likely fresh).
const STALE_RETRY: RetryPolicy =
    RetryPolicy { retries: u32::MAX, first: Duration::from_millis(5), cap: Duration::from_millis(5) };

/// Random back-off after the `attempt`-th failed attempt ([`RETRY`]; [`STALE_RETRY`] when
/// `stale`).
async fn backoff(rng: &mut StdRng, attempt: u32, stale: bool) {
    let policy = if stale { STALE_RETRY } else { RETRY };
    tokio::time::sleep(policy.delay(attempt, rng)).await;
}

/// The terminals of every warehouse of `sh.cfg`, spawned on a new set: each homed on the node
/// holding its warehouse's primary in `topo`, with its HISTORY slot (1-based within the
/// warehouse) and sequence counter starting at `first_seq[(w, slot)]` (0 when absent). Returns
/// the set and every terminal's `((w, slot), next sequence)` counter.
#[allow(clippy::type_complexity)]
pub(crate) fn spawn_terminals<B: Backend>(
    sh: &Arc<Shared<B>>,
    topo: &Topology,
    first_seq: &HashMap<(u32, u32), u64>,
) -> (tokio::task::JoinSet<()>, Vec<((u32, u32), Arc<AtomicU64>)>) {
    let cfg = &sh.cfg;
    let mut seqs: Vec<((u32, u32), Arc<AtomicU64>)> = Vec::new();
    let mut terminals = tokio::task::JoinSet::new();
    let mut seed_rng = StdRng::seed_from_u64(cfg.seed ^ 0x7e4d);
    for w in 1..=cfg.warehouses {
        let schema = topo.table(table::WAREHOUSE).expect("checked");
        let p = topo.partition_of(schema, sc::warehouse_key(w));
        let node_id = topo.partitions[p.0 as usize].replicas[0];
        for t in 0..cfg.terminals_per_warehouse {
            let slot = t as u32 + 1;
            let h_seq = Arc::new(AtomicU64::new(first_seq.get(&(w, slot)).copied().unwrap_or(0)));
            seqs.push(((w, slot), h_seq.clone()));
            let term = Terminal {
                sh: sh.clone(),
                w,
                slot,
                home: node_id,
                part: p,
                rng: StdRng::seed_from_u64(seed_rng.gen()),
                sl_d: (t as u32 % DISTRICTS) + 1,
                h_seq,
            };
            terminals.spawn(term.run());
        }
    }
    (terminals, seqs)
}

struct Terminal<B: Backend> {
    sh: Arc<Shared<B>>,
    w: u32,
    /// 1-based terminal number within its warehouse (its HISTORY slot).
    slot: u32,
    /// The node holding the home warehouse's primary in the topology file: its coordinator
    /// unless a drill stopped it.
    home: NodeId,
    /// The home warehouse's partition.
    part: PartitionId,
    rng: StdRng,
    /// Stock-Level's fixed district (clause 2.8.1.1).
    sl_d: u32,
    h_seq: Arc<AtomicU64>,
}

impl<B: Backend> Terminal<B> {
    fn other_warehouse(&mut self) -> u32 {
        let n = self.sh.cfg.warehouses;
        if n == 1 {
            return self.w;
        }
        let o = self.rng.gen_range(1..n);
        if o >= self.w {
            o + 1
        } else {
            o
        }
    }

    fn customer_id(&mut self) -> u32 {
        let s = self.sh.cfg.scale;
        sc::nurand(&mut self.rng, 1023, self.sh.nurand.c_id, 1, s.customers as u64) as u32
    }

    fn last_name(&mut self) -> u32 {
        let names = self.sh.cfg.scale.last_names() as u64;
        sc::nurand(&mut self.rng, 255, self.sh.nurand.c_last_run, 0, names - 1) as u32
    }

    /// The customer a by-name selection picks: a scan of the name's CUSTOMER_LAST range (the
    /// transaction reads the same range and checks the pick).
    async fn by_name(&self, w: u32, d: u32, name: u32) -> Option<u32> {
        let route = self.sh.backend.route(self.home)?;
        let (from, to) = sc::customer_last_range(w, d, name);
        let rows = self.sh.backend.scan(&route, table::CUSTOMER_LAST, from, to, sc::MAX_SAME_LAST as u32 + 1).await?;
        let ids: Vec<u32> = rows.iter().filter(|r| r.1 > 0).map(|r| r.1 as u32).collect();
        sc::pick_by_name(&ids)
    }

    /// The route to submit through now, waiting while every node is down; `None` once
    /// stopped.
    async fn coordinator(&self) -> Option<B::Route> {
        loop {
            if self.sh.stopped() {
                return None;
            }
            if let Some(r) = self.sh.backend.route(self.home) {
                return Some(r);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn run(mut self) {
        let sh = self.sh.clone();
        // Staggered start: terminals started together with fixed keying times would
        // otherwise submit in lockstep.
        let stagger = if sh.cfg.think { 10_000 } else { 100 };
        tokio::time::sleep(Duration::from_millis(self.rng.gen_range(0..stagger))).await;
        while !sh.stopped() {
            let x = self.rng.gen_range(0..100);
            let ty = match x {
                0..45 => NO,
                45..88 => PAY,
                88..92 => OS,
                92..96 => DEL,
                _ => SL,
            };
            if sh.cfg.think {
                let keying = [18.0, 3.0, 2.0, 2.0, 2.0][ty];
                tokio::time::sleep(Duration::from_secs_f64(keying)).await;
                if sh.stopped() {
                    break;
                }
            }
            match ty {
                NO => self.new_order().await,
                PAY => self.payment().await,
                OS => self.order_status().await,
                DEL => self.delivery().await,
                _ => self.stock_level().await,
            }
            if sh.cfg.think {
                let mean = [12.0, 12.0, 10.0, 5.0, 5.0][ty];
                let u: f64 = self.rng.gen_range(f64::MIN_POSITIVE..1.0);
                tokio::time::sleep(Duration::from_secs_f64((-u.ln() * mean).min(10.0 * mean))).await;
            }
        }
    }

    async fn new_order(&mut self) {
        let sh = self.sh.clone();
        let s = sh.cfg.scale;
        let d = self.rng.gen_range(1..=DISTRICTS);
        let c = self.customer_id();
        let ol_cnt = self.rng.gen_range(5..=sc::MAX_OL) as usize;
        let rollback = self.rng.gen_range(1..=100) == 1;
        let mut lines: Vec<Line> = Vec::with_capacity(ol_cnt);
        while lines.len() < ol_cnt {
            let i_id = if rollback && lines.len() == ol_cnt - 1 {
                s.items + 1
            } else {
                sc::nurand(&mut self.rng, 8191, sh.nurand.ol_i_id, 1, s.items as u64) as u32
            };
            if lines.iter().any(|l| l.i_id == i_id) {
                continue;
            }
            let supply_w = if self.rng.gen_range(0..100) == 0 { self.other_warehouse() } else { self.w };
            lines.push(Line { i_id, supply_w, qty: self.rng.gen_range(1..=10), dist_info: Vec::new() });
        }
        // S_DIST_xx of remote supplying stock rows is immutable: read it once.
        let Some(route) = self.coordinator().await else { return };
        let remote: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].supply_w != self.w).collect();
        if !remote.is_empty() {
            let keys: Vec<(TableId, u64)> =
                remote.iter().map(|&i| (table::STOCK, sc::stock_key(lines[i].supply_w, lines[i].i_id))).collect();
            for (&i, v) in remote.iter().zip(sh.backend.read(&route, &keys).await) {
                if let Some(v) = v {
                    lines[i].dist_info = sc::trim(&v[(sc::s::DIST_01 + d as u16 - 1) as usize]).to_vec();
                }
            }
        }
        let started = Instant::now();
        let mut attempt = 0;
        while !sh.stopped() {
            attempt += 1;
            let Some(route) = self.coordinator().await else { return };
            let Some(dv) = sh.read1(&route, table::DISTRICT, sc::district_key(self.w, d)).await else {
                backoff(&mut self.rng, attempt, true).await;
                continue;
            };
            let o_id = sc::get(&dv[sc::d::NEXT_O_ID as usize]) as u64;
            let p = px::NewOrderParams { w: self.w, d, c, o_id, entry_d: sc::now_ms(), lines: lines.clone() };
            match sh.submit(&route, NO, px::call(kind::NEW_ORDER, p.encode()), self.part).await {
                Attempt::Committed => return sh.done(NO, true, started),
                Attempt::RolledBack => return sh.done(NO, false, started),
                Attempt::Stale => backoff(&mut self.rng, attempt, true).await,
                _ => backoff(&mut self.rng, attempt, false).await,
            }
        }
    }

    async fn payment(&mut self) {
        let sh = self.sh.clone();
        let d = self.rng.gen_range(1..=DISTRICTS);
        let (c_w, c_d) = if self.rng.gen_range(1..=100) <= 85 || sh.cfg.warehouses == 1 {
            (self.w, d)
        } else {
            (self.other_warehouse(), self.rng.gen_range(1..=DISTRICTS))
        };
        let by_name = (self.rng.gen_range(1..=100) <= 60).then(|| self.last_name());
        let c = match by_name {
            Some(n) => match self.by_name(c_w, c_d, n).await {
                Some(c) => c,
                None => return,
            },
            None => self.customer_id(),
        };
        let amount = self.rng.gen_range(100..=500_000);
        let started = Instant::now();
        let mut attempt = 0;
        while !sh.stopped() {
            attempt += 1;
            // A fresh HISTORY key per attempt: an aborted attempt may have created its
            // (zeroed) record on some replicas.
            let h_seq = self.h_seq.fetch_add(1, Relaxed);
            let p = px::PaymentParams {
                w: self.w,
                d,
                c_w,
                c_d,
                c,
                by_name,
                amount,
                date: sc::now_ms(),
                h_slot: self.slot,
                h_seq,
            };
            let Some(route) = self.coordinator().await else { return };
            match sh.submit(&route, PAY, px::call(kind::PAYMENT, p.encode()), self.part).await {
                Attempt::Committed => return sh.done(PAY, true, started),
                Attempt::RolledBack => return sh.done(PAY, false, started),
                Attempt::Stale => backoff(&mut self.rng, attempt, true).await,
                _ => backoff(&mut self.rng, attempt, false).await,
            }
        }
    }

    async fn order_status(&mut self) {
        let sh = self.sh.clone();
        let d = self.rng.gen_range(1..=DISTRICTS);
        let by_name = (self.rng.gen_range(1..=100) <= 60).then(|| self.last_name());
        let c = match by_name {
            Some(n) => match self.by_name(self.w, d, n).await {
                Some(c) => c,
                None => return,
            },
            None => self.customer_id(),
        };
        let started = Instant::now();
        let mut attempt = 0;
        while !sh.stopped() {
            attempt += 1;
            let Some(route) = self.coordinator().await else { return };
            let recon = async {
                // The customer's newest order: the first row of its ORDER_CUSTOMER range.
                let (from, to) = sc::order_customer_range(self.w, d, c);
                let (k, _) = sh.first_row(&route, table::ORDER_CUSTOMER, from, to).await??;
                let o_id = sc::order_of_customer_key(k);
                let ov = sh.read1(&route, table::ORDERS, sc::order_key(self.w, d, o_id)).await?;
                let ol_cnt = sc::get(&ov[sc::o::OL_CNT as usize]) as u32;
                (ol_cnt > 0).then_some((o_id, ol_cnt))
            };
            let Some((o_id, ol_cnt)) = recon.await else {
                // The replica is between the writes of one phase 2: look again.
                backoff(&mut self.rng, attempt, true).await;
                continue;
            };
            let p = px::OrderStatusParams { w: self.w, d, c, by_name, o_id, ol_cnt };
            match sh.submit(&route, OS, px::call(kind::ORDER_STATUS, p.encode()), self.part).await {
                Attempt::Committed => return sh.done(OS, true, started),
                Attempt::RolledBack => return sh.done(OS, false, started),
                Attempt::Stale => backoff(&mut self.rng, attempt, true).await,
                _ => backoff(&mut self.rng, attempt, false).await,
            }
        }
    }

    async fn delivery(&mut self) {
        let sh = self.sh.clone();
        let carrier = self.rng.gen_range(1..=10);
        let started = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for d in 1..=DISTRICTS {
            let (sh, home, part, w) = (sh.clone(), self.home, self.part, self.w);
            let seed = self.rng.gen();
            set.spawn(async move { deliver_district(sh, home, part, w, d, carrier, seed).await });
        }
        let mut all = true;
        while let Some(r) = set.join_next().await {
            all &= r.unwrap_or(false);
        }
        if all {
            sh.done(DEL, true, started);
        }
    }

    async fn stock_level(&mut self) {
        let sh = self.sh.clone();
        let (w, d) = (self.w, self.sl_d);
        let threshold = self.rng.gen_range(10..=20);
        let started = Instant::now();
        let mut attempt = 0;
        while !sh.stopped() {
            attempt += 1;
            let Some(route) = self.coordinator().await else { return };
            let Some(dv) = sh.read1(&route, table::DISTRICT, sc::district_key(w, d)).await else {
                backoff(&mut self.rng, attempt, true).await;
                continue;
            };
            let next = sc::get(&dv[sc::d::NEXT_O_ID as usize]) as u64;
            if next < 2 {
                return sh.done(SL, true, started);
            }
            let orders: Vec<u64> = (next.saturating_sub(20).max(1)..next).collect();
            let keys: Vec<(TableId, u64)> = orders.iter().map(|&o| (table::ORDERS, sc::order_key(w, d, o))).collect();
            let mut line_keys = Vec::new();
            for (&o, ov) in orders.iter().zip(sh.backend.read(&route, &keys).await) {
                let Some(ov) = ov else { continue };
                let cnt = sc::get(&ov[sc::o::OL_CNT as usize]) as u32;
                line_keys.extend((1..=cnt).map(|l| (o, l)));
            }
            let keys: Vec<(TableId, u64)> =
                line_keys.iter().map(|&(o, l)| (table::ORDER_LINE, sc::order_line_key(w, d, o, l))).collect();
            let mut items = Vec::new();
            for lv in sh.backend.read(&route, &keys).await.into_iter().flatten() {
                let i = sc::get(&lv[sc::ol::I_ID as usize]) as u32;
                if i > 0 {
                    items.push(i);
                }
            }
            items.sort_unstable();
            items.dedup();
            let p = px::StockLevelParams { w, d, threshold, next_o_id: next, items };
            match sh.submit(&route, SL, px::call(kind::STOCK_LEVEL, p.encode()), self.part).await {
                Attempt::Committed => return sh.done(SL, true, started),
                Attempt::RolledBack => return sh.done(SL, false, started),
                Attempt::Stale => backoff(&mut self.rng, attempt, true).await,
                _ => backoff(&mut self.rng, attempt, false).await,
            }
        }
    }
}

/// Delivers the oldest undelivered order of district (w, d) through the terminal's coordinator
/// (`home`, or the nearest node up while a drill has it down); `true` when delivered or
/// skipped (no undelivered order), `false` when stopped first.
async fn deliver_district<B: Backend>(
    sh: Arc<Shared<B>>,
    home: NodeId,
    part: PartitionId,
    w: u32,
    d: u32,
    carrier: u32,
    seed: u64,
) -> bool {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut attempt = 0;
    while !sh.stopped() {
        attempt += 1;
        let Some(route) = sh.backend.route(home) else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let recon = async {
            let dv = sh.read1(&route, table::DISTRICT, sc::district_key(w, d)).await?;
            let next = sc::get(&dv[sc::d::NEXT_O_ID as usize]) as u64;
            // The oldest undelivered order: the district's first NEW_ORDER row (as the
            // transaction reads it from the district's first key), from the floor up to
            // D_NEXT_O_ID - 1 (above it only orders New-Order has not filled yet).
            let floor = sh.no_floor(w, d);
            if floor >= next {
                return Some(None);
            }
            let (from, to) = (sc::new_order_key(w, d, floor), sc::new_order_key(w, d, next - 1));
            let Some((k, _)) = sh.first_row(&route, table::NEW_ORDER, from, to).await? else {
                return Some(None);
            };
            let head = k & 0xffff_ffff;
            let ov = sh.read1(&route, table::ORDERS, sc::order_key(w, d, head)).await?;
            let (c, cnt) = (sc::get(&ov[sc::o::C_ID as usize]) as u32, sc::get(&ov[sc::o::OL_CNT as usize]) as u32);
            (cnt > 0 && c > 0).then_some(Some((head, c, cnt)))
        };
        let (o_id, c, ol_cnt) = match recon.await {
            Some(Some(x)) => x,
            Some(None) => {
                sh.count(DEL, |s| {
                    s.skipped.fetch_add(1, Relaxed);
                });
                return true;
            }
            None => {
                backoff(&mut rng, attempt, true).await;
                continue;
            }
        };
        let p = px::DeliveryParams { w, d, carrier, date: sc::now_ms(), o_id, c, ol_cnt };
        match sh.submit(&route, DEL, px::call(kind::DELIVERY, p.encode()), part).await {
            Attempt::Committed => {
                *sh.deliveries.lock().expect("deliveries").entry((w, d)).or_default() += 1;
                sh.raise_no_floor(w, d, o_id + 1);
                return true;
            }
            Attempt::Stale => backoff(&mut rng, attempt, true).await,
            _ => backoff(&mut rng, attempt, false).await,
        }
    }
    false
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

/// Runs TPC-C on an embedded cluster of `topo` (the TPC-C topology).
///
/// # Errors
/// A topology without the TPC-C tables, cluster start-up, load (MemStore too small), as
/// text.
pub async fn run_tpcc(topo: Topology, cfg: &TpccConfig) -> Result<TpccReport, String> {
    sc::check_topology(&topo)?;
    cfg.scale.validate()?;
    if cfg.terminals_per_warehouse == 0 {
        return Err("at least one terminal per warehouse is needed".into());
    }
    if cfg.terminals_per_warehouse > 254 {
        return Err("at most 254 terminals per warehouse".into());
    }
    let rtt_ms = topo.links.first().and_then(|l| l.get(1)).map(|c| c.rtt.as_secs_f64() * 1e3).unwrap_or(0.0);
    let DrilledCluster { cluster, mut drill, routes, data_root } =
        start_cluster(topo, cfg.options.clone(), cfg.drill.clone(), cfg.duration).await?;
    let topo = cluster.topology.clone();

    // Load.
    let lcfg = LoadConfig { warehouses: cfg.warehouses, scale: cfg.scale, seed: cfg.seed, threads: cfg.load_threads };
    let load_bar = bar(cfg.progress, rows_per_warehouse(&cfg.scale) * cfg.warehouses as u64, "load");
    let (c2, l2, b2) = (cluster.clone(), lcfg.clone(), load_bar.clone());
    let loaded = tokio::task::spawn_blocking(move || loader::load(&c2, &l2, &b2))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("loading: {e}"))?;
    load_bar.finish_and_clear();
    let side = Arc::new(Side::new(&topo, &cluster.dcs));
    let mut pre = Preallocator::new(cfg.warehouses, &cfg.scale, cfg.headroom);
    let (t2, s2) = (topo.clone(), side.clone());
    let pre = tokio::task::spawn_blocking(move || pre.top_up(&t2, &s2.dcs).map(|()| pre))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("pre-allocating orders: {e}"))?;
    let idle_cpu_cores = crate::cpu::idle_cpu_cores(cfg.idle_window).await;

    let feed = drill.as_ref().map(EmbeddedDrill::feed).unwrap_or_default();
    let backend = Embedded { topo: topo.clone(), side: side.clone(), routes, feed };
    let nurand = loaded.nurand;
    let sh = Arc::new(Shared::new(backend, cfg.clone(), nurand));

    // The pre-allocator keeps topping up while the terminals run, into the current placement.
    let pre_stop = Arc::new(AtomicBool::new(false));
    let pre_thread = {
        let (cluster, side, stop) = (cluster.clone(), side.clone(), pre_stop.clone());
        std::thread::spawn(move || {
            let mut pre = pre;
            while !stop.load(Relaxed) {
                if let Err(e) = pre.top_up(&cluster.placement(), &side.dcs) {
                    tracing::error!("tpcc pre-allocation: {e}");
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            pre.created
        })
    };

    // Terminals.
    let (mut terminals, seqs) = spawn_terminals(&sh, &topo, &HashMap::new());

    let warm = bar(cfg.progress, cfg.warmup.as_millis() as u64, "warm-up");
    let t0 = Instant::now();
    while t0.elapsed() < cfg.warmup {
        tokio::time::sleep(Duration::from_millis(100)).await;
        warm.set_position(t0.elapsed().as_millis() as u64);
    }
    warm.finish_and_clear();
    cluster.stats.reset();
    let v0 = cluster.verb_counts();
    let s0 = side.counts();
    sh.start_measuring();
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
        let no = sh.new_orders();
        run.set_message(format!("{:.0} tpmC", no as f64 * 60.0 / started.elapsed().as_secs_f64().max(1e-3)));
        if let Ok(Some(iv)) = &mut rows {
            if iv.due(started.elapsed()) && started.elapsed() < cfg.duration {
                if let Err(e) = iv.take(sh.meter.snapshot(started.elapsed()), &run) {
                    rows = Err(e);
                }
            }
        }
    }
    sh.stop_measuring();
    let elapsed_d = started.elapsed();
    let (cpu_spent, _) = cpu.read();
    let rows = rows.and_then(|iv| match iv {
        Some(iv) => iv.finish(sh.meter.snapshot(elapsed_d), &run),
        None => Ok(()),
    });
    let elapsed = elapsed_d.as_secs_f64();
    let classes: Vec<(String, ClassReport)> =
        Class::all().iter().map(|&c| (c.name().to_string(), cluster.stats.report(c))).collect();
    // The transactions' verbs: everything but the driver's own (reconnaissance,
    // pre-allocation). Under redt-tcp the cluster counts only the nodes' TCP verbs, which
    // never include the driver's (it reads through the in-process handles).
    let driver_verbs = side.counts().since(&s0);
    let verbs = if cfg.options.protocol == redt_proto::Protocol::RedtTcp {
        cluster.verb_counts().since(&v0)
    } else {
        cluster.verb_counts().since(&v0).since(&driver_verbs)
    };
    run.finish_and_clear();

    // Stop the terminals, let phase 2 of everything finish, stop the pre-allocator.
    sh.stop.store(true, Relaxed);
    while terminals.join_next().await.is_some() {}
    let drain = Instant::now();
    while cluster.nodes().iter().any(|n| n.executor().run_blocking(|c, _| c.pending()).unwrap_or(0) > 0)
        && drain.elapsed() < Duration::from_secs(30)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis((rtt_ms * 3.0) as u64 + 200)).await;
    // After a drill: heal, settle, report.
    let drill = match drill {
        Some(d) => match d.finish(cfg.progress).await {
            Ok(r) => Some(Box::new(r)),
            Err(e) => {
                pre_stop.store(true, Relaxed);
                cluster.shutdown();
                return Err(e);
            }
        },
        None => None,
    };
    pre_stop.store(true, Relaxed);
    let preallocated = pre_thread.join().unwrap_or(0);

    let check_input = CheckInput {
        warehouses: cfg.warehouses,
        scale: Some(cfg.scale),
        history_seqs: seqs.iter().map(|(k, v)| (*k, v.load(Relaxed))).collect(),
        deliveries: (sh.unknown_total.load(Relaxed) == 0).then(|| sh.deliveries.lock().expect("deliveries").clone()),
    };
    // After a drill: the 12 conditions on every replica rank of the current placement.
    let mut checks_after_drill = Vec::new();
    if drill.is_some() {
        let placement = cluster.placement();
        let ranks = placement.partitions.iter().map(|p| p.replicas.len()).max().unwrap_or(1);
        for rank in 0..ranks {
            let (c2, p2, i2) = (cluster.clone(), placement.clone(), check_input.clone());
            let r = tokio::task::spawn_blocking(move || check_replica(&c2, &p2, rank, &i2))
                .await
                .map_err(|e| e.to_string())?;
            checks_after_drill.push(r);
        }
    }
    let check_report = if let Some(first) = checks_after_drill.first() {
        Some(first.clone())
    } else if cfg.check {
        let (c2, input) = (cluster.clone(), check_input.clone());
        Some(tokio::task::spawn_blocking(move || check(&c2, &input)).await.map_err(|e| e.to_string())?)
    } else {
        None
    };
    cluster.shutdown();
    drop(data_root);
    rows.map_err(|e| format!("interval rows: {e}"))?;

    let (types, all_attempts, all_aborts, all_committed) = sh.type_reports();
    let db_committed: u64 = classes.iter().map(|(_, c)| c.committed).sum();
    let tpmc = sh.new_orders() as f64 * 60.0 / elapsed;
    Ok(TpccReport {
        workload: "tpcc".into(),
        protocol: cfg.options.protocol,
        topology: topo.name.clone(),
        dcs: topo.dcs.len(),
        nodes: topo.nodes.len(),
        rtt_ms,
        warehouses: cfg.warehouses,
        scale: cfg.scale,
        terminals: cfg.terminals_per_warehouse * cfg.warehouses as usize,
        think: cfg.think,
        early_ack: cfg.options.early_ack,
        load_s: loaded.seconds,
        warmup_s: cfg.warmup.as_secs_f64(),
        duration_s: elapsed,
        tpmc,
        tpmc_per_warehouse: tpmc / cfg.warehouses as f64,
        committed_per_s: all_committed as f64 / elapsed,
        db_committed_per_s: db_committed as f64 / elapsed,
        abort_rate: if all_attempts == 0 { 0.0 } else { all_aborts as f64 / all_attempts as f64 },
        cpu: CpuCost::new(Some(cpu_spent), elapsed_d, all_committed, idle_cpu_cores),
        types,
        footprint: loaded.footprint.clone(),
        records_loaded: loaded.records,
        records_preallocated: preallocated,
        verbs_per_txn: VerbsPerTxn::new(&verbs, db_committed),
        classes,
        check: check_report,
        drill,
        checks_after_drill,
    })
}

/// The per-type table of a TPC-C report (header, one line per type, the aborted attempts by
/// cause), indented for the reports.
pub fn type_table(types: &[TypeReport]) -> Vec<String> {
    let mut out = vec![format!(
        "    {:<13} {:>6} {:>9} {:>8} {:>9} {:>8} {:>7} {:>7} {:>10} {:>10}",
        "type", "mix %", "committed", "rollback", "attempts", "aborted", "stale", "unknown", "abort rate", "p50/p99 ms"
    )];
    for t in types {
        out.push(format!(
            "    {:<13} {:>6.1} {:>9} {:>8} {:>9} {:>8} {:>7} {:>7} {:>10.4} {:>5.0}/{:<5.0}",
            t.name,
            t.mix_pct,
            t.committed,
            t.rolled_back,
            t.attempts,
            t.aborted,
            t.stale,
            t.unknown,
            t.abort_rate,
            t.latency_ms.p50,
            t.latency_ms.p99
        ));
    }
    let totals = ABORT_CAUSES
        .map(|c| -> u64 { types.iter().flat_map(|t| &t.abort_causes).filter(|(k, _)| k == c).map(|(_, n)| n).sum() });
    if let Some(causes) = causes_text(&cause_counts(ABORT_CAUSES, totals)) {
        out.push(format!("    aborted attempts by cause: {causes}"));
    }
    out
}

impl TpccReport {
    /// After a drill, the 12 conditions per replica rank in one line: `12/12 on each of the 3
    /// replicas of every partition (…)`, or which failed.
    pub fn checks_after_drill_line(&self) -> String {
        let c = &self.checks_after_drill;
        if c.is_empty() {
            return "n/a (no drill)".into();
        }
        let per: Vec<String> = c
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let ok = r.conditions.iter().filter(|x| x.passed()).count();
                format!("replica {}: {ok}/{}", i + 1, r.conditions.len())
            })
            .collect();
        let records: u64 = c.iter().map(|r| r.records_read).sum();
        let secs: f64 = c.iter().map(|r| r.seconds).sum();
        let all = c.iter().all(|r| r.passed);
        format!(
            "{} ({}; current placement, {records} records read in {secs:.1} s)",
            if all { format!("12/12 on each of the {} replicas of every partition", c.len()) } else { "FAILED".into() },
            per.join(", ")
        )
    }

    /// The human-readable report.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let mut line = |l: String| {
            s.push_str(&l);
            s.push('\n');
        };
        line(format!(
            "redt bench tpcc — {} ({} DCs, {} nodes, {:.0} ms RTT), protocol {}, {} warehouses, {} terminals, think times {}, early ack {}, {:.1} s (+{:.0} s warm-up)",
            self.topology,
            self.dcs,
            self.nodes,
            self.rtt_ms,
            self.protocol,
            self.warehouses,
            self.terminals,
            if self.think { "on" } else { "off" },
            if self.early_ack { "on" } else { "off" },
            self.duration_s,
            self.warmup_s
        ));
        line(format!(
            "  tpmC (New-Order commits/min)  {:>10.1}   ({:.1} per warehouse)",
            self.tpmc, self.tpmc_per_warehouse
        ));
        line(format!(
            "  committed/s                   {:>10.1}   business transactions ({:.1} database transactions/s)",
            self.committed_per_s, self.db_committed_per_s
        ));
        line(format!("  abort rate (attempts)         {:>10.4}", self.abort_rate));
        let (cpu_us, cores) = self.cpu.cells();
        line(format!("  CPU µs per committed txn      {cpu_us:>10}   (business transactions; {cores})"));
        for l in type_table(&self.types) {
            line(l);
        }
        if let Some(d) = self.types.get(DEL) {
            if d.skipped_districts > 0 {
                line(format!("    (delivery skipped {} empty districts)", d.skipped_districts));
            }
        }
        let f = &self.footprint;
        line(format!(
            "  footprint per warehouse per replica: {:.1} MB heap ({:.1} MB computed: records, and {:.1} MB of ordered-index trees), {:.0} records (+{:.1} MB of 16-B index slots)",
            f.heap_bytes_per_warehouse_per_replica / 1e6,
            f.computed_bytes_per_warehouse_per_replica / 1e6,
            f.tree_bytes_per_warehouse_per_replica / 1e6,
            f.records_per_warehouse_per_replica,
            f.index_slot_bytes_per_warehouse_per_replica / 1e6
        ));
        line(format!(
            "  load {:.1} s, {} records per replica; {} records pre-allocated for New-Order",
            self.load_s, self.records_loaded, self.records_preallocated
        ));
        let v = &self.verbs_per_txn;
        line(format!(
            "  RDMA verbs per committed txn {:.1} (read {:.1}, write {:.1}, masked-cas {:.1}, faa {:.1}; {:.1} doorbells)",
            v.total, v.read, v.write, v.masked_cas, v.faa, v.doorbells
        ));
        if let Some(c) = self.check.as_ref().filter(|_| self.drill.is_none()) {
            line(format!(
                "  consistency (TPC-C 3.3.2): {} — {} records read in {:.1} s",
                if c.passed { "all 12 conditions pass" } else { "FAILED" },
                c.records_read,
                c.seconds
            ));
            for l in c.lines() {
                line(format!("    {l}"));
            }
        }
        s
    }
}
