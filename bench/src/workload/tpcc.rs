//! TPC-C through the lifecycle: `init` generates the database of `warehouses` with the
//! loader of `redt bench tpcc` ([`load_warehouse`]) and writes it through the cluster (records
//! calls, batched per partition), with the orders New-Order will fill created ahead; `run` is
//! `redt bench tpcc`'s terminals (`spawn_terminals`) over a client, their reconnaissance
//! read by read-only transactions at the home warehouse's coordinator; `check` reads the
//! database back and checks the 12 consistency conditions ([`check_with`]).
//!
//! What a later run or check needs is kept in the init record: warehouses, scale, seed (so the
//! NURand constants C are the load's), each terminal's next HISTORY sequence (the Payments of
//! earlier runs, which condition 8–10's sums read), and the committed deliveries per district
//! while every outcome was known (condition 11's cross-check).

use super::meta::{self, Stored};
use super::{require_commits, Meter, Target, WorkloadKind};
use crate::progress::bar;
use crate::report::{CpuCost, Outcomes};
use crate::tpcc::check::{check_with, CheckInput, CheckReport};
use crate::tpcc::driver::{spawn_terminals, Backend, Shared, TpccConfig, TypeReport};
use crate::tpcc::loader::{load_warehouse, nurand_of, rows_per_warehouse, LoadConfig, RowSink};
use crate::tpcc::schema::{self as sc, table, NuRand, Scale, DISTRICTS, MAX_OL};
use redt_coordinator::TxnAnswer;
use redt_dc_executor::RecordOp;
use redt_proto::wire::ProcedureCall;
use redt_proto::{NodeId, PartitionId, TableId};
use redt_protocol::call;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Orders created ahead of each district's D_NEXT_O_ID (New-Order writes existing ORDERS,
/// NEW-ORDER and ORDER-LINE records; `run` keeps topping them up).
pub const HEADROOM: u64 = 50;

/// What `init` loaded and the runs since added.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TpccInit {
    /// Warehouses (1..=warehouses).
    pub warehouses: u32,
    /// Rows per warehouse.
    pub scale: Scale,
    /// The loader's seed.
    pub seed: u64,
    /// The load's NURand constants.
    pub nurand: NuRand,
    /// Orders kept created ahead of D_NEXT_O_ID.
    pub headroom: u64,
    /// Per terminal `[w, slot, next]`: the next HISTORY sequence of HISTORY slot `slot` of
    /// warehouse `w` (the Payments of the runs so far use `0..next`).
    pub history_seqs: Vec<[u64; 3]>,
    /// Per district `[w, d, n]`: Deliveries committed over every run, while every outcome
    /// was known (`None` once one was not).
    pub deliveries: Option<Vec<[u64; 3]>>,
}

impl TpccInit {
    fn seqs(&self) -> HashMap<(u32, u32), u64> {
        self.history_seqs.iter().map(|&[w, s, n]| ((w as u32, s as u32), n)).collect()
    }

    fn check_input(&self) -> CheckInput {
        CheckInput {
            warehouses: self.warehouses,
            scale: Some(self.scale),
            history_seqs: self.seqs(),
            deliveries: self
                .deliveries
                .as_ref()
                .map(|d| d.iter().map(|&[w, d, n]| ((w as u32, d as u32), n)).collect()),
        }
    }
}

/// Rows of the loader on their way to the cluster.
struct Channel(tokio::sync::mpsc::Sender<RecordOp>);

impl RowSink for Channel {
    fn put(&self, t: TableId, key: u64, values: &[Vec<u8>]) -> Result<(), String> {
        let op = RecordOp::Put { table: t, key, cells: values.to_vec() };
        self.0.blocking_send(op).map_err(|_| "the writer stopped".to_string())
    }
}

/// The create operations of orders `from..=to` of district (w, d): ORDERS, NEW-ORDER and the
/// 15 ORDER-LINE records New-Order fills.
fn order_records(w: u32, d: u32, from: u64, to: u64) -> Vec<RecordOp> {
    let mut ops = Vec::new();
    for o in from..=to {
        ops.push(RecordOp::Create { table: table::ORDERS, key: sc::order_key(w, d, o) });
        ops.push(RecordOp::Create { table: table::NEW_ORDER, key: sc::new_order_key(w, d, o) });
        for l in 1..=MAX_OL {
            ops.push(RecordOp::Create { table: table::ORDER_LINE, key: sc::order_line_key(w, d, o, l) });
        }
    }
    ops
}

/// What `init` did.
#[derive(Clone, Debug, Serialize)]
pub struct InitReport {
    /// The record written.
    pub init: TpccInit,
    /// Rows loaded.
    pub rows: u64,
    /// Records created ahead for New-Order.
    pub preallocated: u64,
    /// Seconds the load took.
    pub seconds: f64,
}

/// `redt workload init tpcc`: loads `warehouses` warehouses at `scale` (the loader's rows, as
/// `redt bench tpcc` loads them, seeded with `seed`) through the cluster, creates the first
/// [`HEADROOM`] orders ahead, then writes the init record. Refused when the cluster has a
/// record already.
///
/// # Errors
/// Not the TPC-C topology; a record exists; a batch that did not commit.
pub async fn init(
    target: &Target,
    warehouses: u32,
    scale: Scale,
    seed: u64,
    progress: bool,
) -> Result<InitReport, String> {
    sc::check_topology(&target.topo)?;
    scale.validate()?;
    if warehouses == 0 || warehouses as u64 > (1 << 24) - 1 {
        return Err(format!("--warehouses must be 1 to 2^24 - 1, got {warehouses}"));
    }
    if let Some(old) = meta::read::<TpccInit>(target, WorkloadKind::Tpcc).await? {
        return Err(format!(
            "the cluster holds a TPC-C database already ({} warehouses, initialised at {}, {} runs since); TPC-C \
             loads into a fresh cluster: `redt cluster down --wipe`, `redt cluster up`, then init",
            old.params.warehouses,
            old.initialised_at(),
            old.runs
        ));
    }
    let t0 = Instant::now();
    let nurand = nurand_of(seed);
    let lcfg = LoadConfig { warehouses, scale, seed, threads: 1 };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<RecordOp>(4 * super::BATCH_OPS * super::IN_FLIGHT);
    let generator = tokio::task::spawn_blocking(move || {
        let sink = Channel(tx);
        for w in 1..=warehouses {
            load_warehouse(&sink, &lcfg, &nurand, w)?;
        }
        Ok::<(), String>(())
    });
    let b = bar(progress, rows_per_warehouse(&scale) * warehouses as u64, "load");
    let mut rows = 0u64;
    let chunk = super::BATCH_OPS * super::IN_FLIGHT * 4;
    loop {
        let mut ops = Vec::with_capacity(chunk);
        if rx.recv_many(&mut ops, chunk).await == 0 {
            break;
        }
        let n = ops.len() as u64;
        target.records(ops, &|k| b.set_position(rows + k)).await?;
        rows += n;
    }
    b.finish_and_clear();
    generator.await.map_err(|e| e.to_string())??;
    let mut pre = Vec::new();
    for w in 1..=warehouses {
        for d in 1..=DISTRICTS {
            let first = scale.orders() as u64 + 1;
            pre.extend(order_records(w, d, first, first + HEADROOM - 1));
        }
    }
    let preallocated = pre.len() as u64;
    target.records(pre, &|_| {}).await?;
    let init = TpccInit {
        warehouses,
        scale,
        seed,
        nurand,
        headroom: HEADROOM,
        history_seqs: Vec::new(),
        deliveries: Some(Vec::new()),
    };
    meta::write(target, &Stored::new(WorkloadKind::Tpcc, "redt workload init", init.clone())).await?;
    Ok(InitReport { init, rows, preallocated, seconds: t0.elapsed().as_secs_f64() })
}

/// A running cluster as the terminals' backend: every attempt through the home node, each
/// reconnaissance one read-only records transaction there.
struct Remote {
    target: Target,
}

impl Remote {
    /// Submits the read-only `call` at `node` until it commits: a read-only transaction meets
    /// the locks of the writers it reads behind, so five tries with exponential back-off from
    /// 2 ms (at most 32 ms apart); its reads, or `None` when none committed.
    async fn read_only(&self, node: NodeId, call: redt_proto::wire::ProcedureCall) -> Option<Vec<Option<Vec<u8>>>> {
        let once = || async {
            let out = self.target.client.submit(node, call.clone()).await;
            if out.status == redt_coordinator::TxnStatus::Committed {
                Ok(out.reads)
            } else {
                Err(())
            }
        };
        let backoff = backon::ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(2))
            .with_max_delay(Duration::from_millis(32))
            .with_max_times(4);
        backon::Retryable::retry(once, backoff).await.ok()
    }
}

impl Backend for Remote {
    type Route = NodeId;

    fn route(&self, home: NodeId) -> Option<NodeId> {
        Some(home)
    }

    async fn read(&self, node: &NodeId, keys: &[(TableId, u64)]) -> Vec<Option<Vec<Vec<u8>>>> {
        let ops: Vec<RecordOp> = keys.iter().map(|&(table, key)| RecordOp::Get { table, key }).collect();
        // None committed: nothing read (the terminal backs off and looks again).
        match self.read_only(*node, call::records_call(&ops)).await {
            Some(reads) => reads
                .iter()
                .map(|r| r.as_deref().and_then(|b| call::decode_record_read(b).ok().flatten()))
                .chain(std::iter::repeat(None))
                .take(keys.len())
                .collect(),
            None => vec![None; keys.len()],
        }
    }

    /// A read-only transaction of one key/value scan (cell 0 of each row), retried as
    /// [`Backend::read`] is.
    async fn scan(&self, node: &NodeId, t: TableId, from: u64, to: u64, limit: u32) -> Option<Vec<(u64, i64)>> {
        let ops = [redt_dc_executor::KvOp::Scan(from, to, limit)];
        let reads = self.read_only(*node, call::kv_call(t, &ops)).await?;
        let rows = redt_dc_executor::decode_scan(reads.first()?.as_deref()?)?;
        Some(rows.into_iter().map(|(k, v)| (k, sc::get(&v))).collect())
    }

    async fn submit(&self, node: &NodeId, call: ProcedureCall, _part: PartitionId) -> TxnAnswer {
        self.target.client.submit(*node, call).await
    }
}

/// Keeps [`HEADROOM`] orders created ahead of every district's D_NEXT_O_ID.
struct Prealloc {
    warehouses: u32,
    headroom: u64,
    /// Highest order created per (w, d).
    upto: HashMap<(u32, u32), u64>,
    created: u64,
}

impl Prealloc {
    /// Reads every district's D_NEXT_O_ID and creates the orders of those running less than
    /// half the headroom ahead, up to the full headroom (creations are idempotent: a record
    /// already there is left as it is).
    async fn top_up(&mut self, target: &Target) -> Result<(), String> {
        let districts: Vec<(u32, u32)> =
            (1..=self.warehouses).flat_map(|w| (1..=DISTRICTS).map(move |d| (w, d))).collect();
        let ops = districts
            .iter()
            .map(|&(w, d)| RecordOp::Get { table: table::DISTRICT, key: sc::district_key(w, d) })
            .collect();
        let read = target.records(ops, &|_| {}).await?;
        let mut create = Vec::new();
        for (&(w, d), v) in districts.iter().zip(read) {
            let Some(v) = v else { continue };
            let next = sc::get(&v[sc::d::NEXT_O_ID as usize]).max(1) as u64;
            let upto = self.upto.entry((w, d)).or_insert(next - 1);
            if *upto >= next + self.headroom / 2 {
                continue;
            }
            create.extend(order_records(w, d, (*upto + 1).max(next), next + self.headroom));
            *upto = next + self.headroom;
        }
        self.created += create.len() as u64;
        if !create.is_empty() {
            target.records(create, &|_| {}).await?;
        }
        Ok(())
    }
}

/// What a TPC-C run did.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// `tpcc`.
    pub workload: String,
    /// Topology name.
    pub topology: String,
    /// Warehouses (from the init record).
    pub warehouses: u32,
    /// Terminals in all.
    pub terminals: usize,
    /// Warm-up seconds (excluded).
    pub warmup_s: f64,
    /// Measured seconds.
    pub duration_s: f64,
    /// Committed New-Orders per minute.
    pub tpmc: f64,
    /// Committed business transactions per second.
    pub committed_per_s: f64,
    /// Aborted attempts / attempts over all types.
    pub abort_rate: f64,
    /// Per type.
    pub types: Vec<TypeReport>,
    /// Database transactions (attempts) of the measured interval as the terminals saw them.
    pub transactions: Outcomes,
    /// The CPU time of the nodes' processes over the measured interval (summed, through their
    /// status; an embedded cluster's: this process's), per committed business transaction
    /// (as `committed_per_s` counts them: a Delivery is one).
    #[serde(flatten)]
    pub cpu: CpuCost,
    /// Records created ahead for New-Order during the run.
    pub records_preallocated: u64,
}

/// `redt workload run tpcc`: `cfg`'s terminals (per warehouse, think times, duration, warm-up,
/// seed; its warehouses and scale are the init record's, `asked_warehouses` must match them)
/// on the database init loaded; then the terminals' HISTORY sequences and deliveries added to
/// the record.
///
/// # Errors
/// No init record; a mismatch; no commit at all.
pub async fn run(
    target: &Target,
    cfg: &TpccConfig,
    asked_warehouses: Option<u32>,
    cluster: &str,
) -> Result<RunReport, String> {
    let mut init = meta::read::<TpccInit>(target, WorkloadKind::Tpcc)
        .await?
        .ok_or_else(|| meta::missing(WorkloadKind::Tpcc, cluster))?;
    let p = init.params.clone();
    if let Some(w) = asked_warehouses.filter(|&w| w != p.warehouses) {
        return Err(format!(
            "--warehouses {w} does not match the cluster: it was initialised with {} warehouses (at {}). Leave the \
             flag out to run on those; a TPC-C database of {w} warehouses needs a fresh cluster and `redt workload \
             init tpcc --warehouses {w}{cluster}`",
            p.warehouses,
            init.initialised_at()
        ));
    }
    if cfg.terminals_per_warehouse == 0 || cfg.terminals_per_warehouse > 254 {
        return Err("--terminals must be 1 to 254 per warehouse".into());
    }
    let cfg = TpccConfig { warehouses: p.warehouses, scale: p.scale, ..cfg.clone() };
    let mut pre = Prealloc { warehouses: p.warehouses, headroom: p.headroom, upto: HashMap::new(), created: 0 };
    pre.top_up(target).await?;
    let sh = Arc::new(Shared::new(Remote { target: target.clone() }, cfg.clone(), p.nurand));
    let (mut terminals, seqs) = spawn_terminals(&sh, &target.topo, &p.seqs());
    let pre_stop = Arc::new(AtomicBool::new(false));
    let pre_task = {
        let (target, stop) = (target.clone(), pre_stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Err(e) = pre.top_up(&target).await {
                    tracing::warn!("tpcc pre-allocation: {e}");
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            pre.created
        })
    };
    let meter: &Meter = &sh.meter;
    let cpu = target.cpu_source();
    let measured = super::measure(meter, &sh.stop, &cpu, cfg.warmup, cfg.duration, &cfg.interval, cfg.progress).await;
    sh.stop.store(true, Ordering::Relaxed);
    while terminals.join_next().await.is_some() {}
    pre_stop.store(true, Ordering::Relaxed);
    let preallocated = pre_task.await.unwrap_or(0);
    let measured = measured?;
    let elapsed = measured.elapsed;
    // What the next check needs: every terminal's HISTORY sequence, the deliveries.
    let mut next: HashMap<(u32, u32), u64> = p.seqs();
    for ((w, slot), n) in &seqs {
        next.insert((*w, *slot), n.load(Ordering::Relaxed));
    }
    let mut hs: Vec<[u64; 3]> = next.into_iter().map(|((w, s), n)| [w as u64, s as u64, n]).collect();
    hs.sort_unstable();
    init.params.history_seqs = hs;
    init.params.deliveries = match (&p.deliveries, sh.unknown_total.load(Ordering::Relaxed)) {
        (Some(before), 0) => {
            let mut all: HashMap<(u64, u64), u64> = before.iter().map(|&[w, d, n]| ((w, d), n)).collect();
            for (&(w, d), &n) in sh.deliveries.lock().expect("deliveries").iter() {
                *all.entry((w as u64, d as u64)).or_default() += n;
            }
            let mut v: Vec<[u64; 3]> = all.into_iter().map(|((w, d), n)| [w, d, n]).collect();
            v.sort_unstable();
            Some(v)
        }
        _ => None,
    };
    init.runs += 1;
    meta::write(target, &init).await?;
    let (types, attempts, aborts, committed) = sh.type_reports();
    let transactions = sh.meter.outcomes(elapsed);
    require_commits("the TPC-C run", &transactions, elapsed, "see `redt status` and the nodes' logs")?;
    let secs = elapsed.as_secs_f64();
    Ok(RunReport {
        workload: "tpcc".into(),
        topology: target.topo.name.clone(),
        warehouses: p.warehouses,
        terminals: cfg.terminals_per_warehouse * p.warehouses as usize,
        warmup_s: cfg.warmup.as_secs_f64(),
        duration_s: secs,
        tpmc: sh.new_orders() as f64 * 60.0 / secs,
        committed_per_s: committed as f64 / secs,
        abort_rate: if attempts == 0 { 0.0 } else { aborts as f64 / attempts as f64 },
        types,
        transactions,
        cpu: CpuCost::new(measured.cpu_time, elapsed, committed, None),
        records_preallocated: preallocated,
    })
}

/// The keys [`check_with`] reads for `init`, given each district's D_NEXT_O_ID (`next`):
/// warehouses and districts first (read before), then per district the orders up to the
/// created headroom with their NEW-ORDER rows and 15 order lines, the customers, the
/// load's HISTORY rows and the runs' Payments.
fn check_keys(init: &TpccInit, next: &HashMap<(u32, u32), u64>) -> Vec<(TableId, u64)> {
    let s = init.scale;
    let mut keys = Vec::new();
    for w in 1..=init.warehouses {
        for d in 1..=DISTRICTS {
            let last = next.get(&(w, d)).copied().unwrap_or(s.orders() as u64 + 1) + init.headroom + 1;
            for o in 1..=last {
                keys.push((table::ORDERS, sc::order_key(w, d, o)));
                keys.push((table::NEW_ORDER, sc::new_order_key(w, d, o)));
                keys.extend((1..=MAX_OL).map(|l| (table::ORDER_LINE, sc::order_line_key(w, d, o, l))));
            }
            for c in 1..=s.customers {
                keys.push((table::CUSTOMER, sc::customer_key(w, d, c)));
                keys.push((table::HISTORY, sc::history_key(w, 0, (d as u64) << 12 | c as u64)));
            }
        }
    }
    for &[w, slot, n] in &init.history_seqs {
        keys.extend((0..n).map(|seq| (table::HISTORY, sc::history_key(w as u32, slot as u32, seq))));
    }
    keys
}

/// `redt workload check tpcc`: reads the database back (in batches; run it on a quiescent
/// cluster) and checks the 12 consistency conditions of clause 3.3.2 with what the init
/// record knows (the runs' Payments and deliveries).
///
/// # Errors
/// No init record; a read that did not commit.
pub async fn check(target: &Target, cluster: &str, progress: bool) -> Result<CheckOutcome, String> {
    let init = meta::read::<TpccInit>(target, WorkloadKind::Tpcc)
        .await?
        .ok_or_else(|| meta::missing(WorkloadKind::Tpcc, cluster))?;
    let p = init.params.clone();
    let t0 = Instant::now();
    let mut cache: HashMap<(TableId, u64), Cells> = HashMap::new();
    let mut first = Vec::new();
    for w in 1..=p.warehouses {
        first.push((table::WAREHOUSE, sc::warehouse_key(w)));
        first.extend((1..=DISTRICTS).map(|d| (table::DISTRICT, sc::district_key(w, d))));
    }
    fetch(target, first, &mut cache, progress).await?;
    let mut next = HashMap::new();
    for w in 1..=p.warehouses {
        for d in 1..=DISTRICTS {
            if let Some(Some(v)) = cache.get(&(table::DISTRICT, sc::district_key(w, d))) {
                next.insert((w, d), sc::get(&v[sc::d::NEXT_O_ID as usize]).max(1) as u64);
            }
        }
    }
    fetch(target, check_keys(&p, &next), &mut cache, progress).await?;
    // The check reads what it needs from the cache; anything it asks beyond (a database
    // that does not look as the record says) is read on the spot.
    let handle = tokio::runtime::Handle::current();
    let (t2, input) = (target.clone(), p.check_input());
    let (report, extra) = tokio::task::spawn_blocking(move || {
        let mut extra = 0u64;
        let report = check_with(&input, &mut |_w, t, key| {
            if let Some(v) = cache.get(&(t, key)) {
                return v.clone();
            }
            extra += 1;
            let read = handle.block_on(t2.records(vec![RecordOp::Get { table: t, key }], &|_| {}));
            let v = read.ok().and_then(|r| r.into_iter().next()).flatten();
            cache.insert((t, key), v.clone());
            v
        });
        (report, extra)
    })
    .await
    .map_err(|e| e.to_string())?;
    // The check's time is the reads' too.
    let report = CheckReport { seconds: t0.elapsed().as_secs_f64(), ..report };
    Ok(CheckOutcome { report, init: p, runs: init.runs, extra_reads: extra })
}

/// A record's cells, `None` when absent.
type Cells = Option<Vec<Vec<u8>>>;

/// Reads `keys` into `cache`.
async fn fetch(
    target: &Target,
    keys: Vec<(TableId, u64)>,
    cache: &mut HashMap<(TableId, u64), Cells>,
    progress: bool,
) -> Result<(), String> {
    let b = bar(progress, keys.len() as u64, "read");
    let ops = keys.iter().map(|&(table, key)| RecordOp::Get { table, key }).collect();
    let read = target.records(ops, &|n| b.set_position(n)).await?;
    b.finish_and_clear();
    cache.extend(keys.into_iter().zip(read));
    Ok(())
}

/// What `check` found.
#[derive(Clone, Debug, Serialize)]
pub struct CheckOutcome {
    /// The 12 conditions.
    pub report: CheckReport,
    /// The init record checked against.
    pub init: TpccInit,
    /// Runs recorded since init.
    pub runs: u64,
    /// Records the check read beyond those the record led it to expect (0 on a database as
    /// the record says).
    pub extra_reads: u64,
}
