//! The TPC-C initial database (clause 4.3.3.1), loaded straight into every replica's
//! MemStore of an embedded cluster, and the pre-allocation of the rows New-Order inserts.

use super::schema::{self as sc, table, NuRand, Scale, DISTRICTS, MAX_OL};
use indicatif::ProgressBar;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use redt_coordinator::EmbeddedCluster;
use redt_dc_executor::{DcHandle, RecordLayout};
use redt_proto::{NodeId, TableId, Topology};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the database is loaded.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// Warehouses (1..).
    pub warehouses: u32,
    /// Rows per warehouse.
    pub scale: Scale,
    /// Seed of the generators (each warehouse derives its own).
    pub seed: u64,
    /// Loader threads.
    pub threads: usize,
}

/// Bytes one table takes per warehouse and replica.
#[derive(Clone, Debug, Serialize)]
pub struct TableFootprint {
    /// Table name.
    pub table: String,
    /// Rows per warehouse (per replica).
    pub rows: f64,
    /// Heap bytes per record (record size rounded up to 64 B).
    pub record_bytes: u64,
    /// rows × record_bytes.
    pub bytes: f64,
}

/// The load footprint: MemStore heap bytes per warehouse per replica.
#[derive(Clone, Debug, Serialize)]
pub struct Footprint {
    /// Heap bytes in use on every node right after the load (the heap bump pointers) /
    /// warehouses / replicas.
    pub heap_bytes_per_warehouse_per_replica: f64,
    /// The same computed: the records from their sizes (`RecordLayout::record_bytes` rounded
    /// up to 64 B) plus the ordered-index trees ([`Footprint::tree_bytes_per_warehouse_per_replica`]).
    pub computed_bytes_per_warehouse_per_replica: f64,
    /// Heap bytes of the ordered indexes (configs/tpcc.yaml `ordered_index: true`) per
    /// warehouse per replica: on every node, its tree directory, and per tree its 64-byte
    /// anchor and its nodes as [`redt_dc_executor::BTree::check`] counts them, times the
    /// node size (`dc-executor/src/ordered.rs`, `btree/mod.rs`).
    pub tree_bytes_per_warehouse_per_replica: f64,
    /// Records per warehouse per replica.
    pub records_per_warehouse_per_replica: f64,
    /// Index bytes per warehouse per replica at 16 B per slot (one key each), before the
    /// headroom the hash index needs (keep its load under 0.5).
    pub index_slot_bytes_per_warehouse_per_replica: f64,
    /// Per table.
    pub tables: Vec<TableFootprint>,
}

/// What the load produced.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The load configuration.
    pub cfg: LoadConfig,
    /// The NURand constants (C_LAST's load value is needed to pick run-time values).
    pub nurand: NuRand,
    /// Records loaded per replica (all warehouses).
    pub records: u64,
    /// The footprint.
    pub footprint: Footprint,
    /// Seconds the load took.
    pub seconds: f64,
}

/// Where the loader's rows go: every replica of an embedded cluster (`Writer`), or a
/// running cluster's transactions (`redt workload init tpcc`).
pub trait RowSink: Sync {
    /// Stores row `key` of `t`, one value per cell.
    ///
    /// # Errors
    /// The row could not be stored, as text.
    fn put(&self, t: TableId, key: u64, values: &[Vec<u8>]) -> Result<(), String>;
}

/// The NURand constants a load with `seed` draws (and the run after it uses).
pub fn nurand_of(seed: u64) -> NuRand {
    NuRand::new(&mut rand::rngs::StdRng::seed_from_u64(seed))
}

/// Writes one row to every replica of its partition.
struct Writer<'a> {
    topo: &'a Topology,
    dcs: &'a [Arc<DcHandle>],
    counts: &'a [AtomicU64],
    done: &'a AtomicU64,
    /// Also write to the partitions' learners, and take a record already there (copied by
    /// a rebuild's snapshot) as written: the pre-allocation under a changing placement.
    placed: bool,
}

impl RowSink for Writer<'_> {
    fn put(&self, t: TableId, key: u64, values: &[Vec<u8>]) -> Result<(), String> {
        let topo = self.topo;
        let schema = topo.table(t).ok_or_else(|| format!("no table {t}"))?;
        let p = topo.partition_of(schema, key);
        let refs: Vec<&[u8]> = values.iter().map(|v| v.as_slice()).collect();
        let part = &topo.partitions[p.0 as usize];
        let learners = part.learners.iter().map(|l| l.node).filter(|_| self.placed);
        for node in part.replicas.iter().copied().chain(learners) {
            let dc = topo.nodes[node.0 as usize].dc;
            match self.dcs[dc.0 as usize].insert_record(node, t, key, &refs) {
                Ok(_) => {}
                Err(redt_dc_executor::Error::DuplicateKey { .. }) if self.placed => {}
                Err(e) => {
                    return Err(format!(
                        "loading {} key {key:#x} on {}: {e}",
                        schema.name, topo.nodes[node.0 as usize].name
                    ))
                }
            }
        }
        self.counts[t.0 as usize].fetch_add(1, Ordering::Relaxed);
        self.done.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Rows one warehouse loads (order lines at their expected 10 per order), for progress.
pub fn rows_per_warehouse(s: &Scale) -> u64 {
    // Customers, their history and last-name rows, orders with their ORDER_CUSTOMER rows and
    // ~10 lines, new orders.
    let per_district = s.customers as u64 * 3 + s.new_orders as u64 + s.orders() as u64 * 12;
    2 * s.items as u64 + 1 + DISTRICTS as u64 * (1 + per_district)
}

/// Heap bytes of one record of `t` (allocation rounded up to 64 B).
pub fn record_bytes(topo: &Topology, t: TableId) -> u64 {
    topo.table(t).map_or(0, |s| RecordLayout::new(s).record_bytes.div_ceil(64) * 64)
}

/// Heap bytes of a tree's anchor (`BTree`'s layout: a 64-byte block naming the root).
const TREE_ANCHOR_BYTES: u64 = 64;

/// Rounds `bytes` up to the heap's 64-byte allocation unit.
fn heap_alloc(bytes: u64) -> u64 {
    bytes.div_ceil(64) * 64
}

/// Makes, on every replica of the partitions holding warehouses `1..=warehouses`, the tree of
/// every ordered TPC-C table, one at a time: the load's threads then never race to make a
/// node's tree directory (a loser's block would be heap no tree uses).
///
/// # Errors
/// A full heap, as text.
fn make_trees(cluster: &EmbeddedCluster, warehouses: u32) -> Result<(), String> {
    let topo = &cluster.topology;
    let mut parts: Vec<redt_proto::PartitionId> = (1..=warehouses.min(topo.partitions.len() as u32))
        .filter_map(|w| topo.table(table::WAREHOUSE).map(|s| topo.partition_of(s, sc::warehouse_key(w))))
        .collect();
    parts.sort();
    parts.dedup();
    for p in parts {
        for &node in &topo.partitions[p.0 as usize].replicas {
            let h = &cluster.dcs[topo.nodes[node.0 as usize].dc.0 as usize];
            for &t in sc::TABLES.iter().filter(|&&t| h.ordered.is_ordered(t)) {
                h.ordered.tree(h.verbs.as_ref(), node, t, p.0, true).map_err(|e| format!("making a tree: {e}"))?;
            }
        }
    }
    Ok(())
}

/// Heap bytes the ordered indexes take on every node of `cluster`: per node with a tree
/// directory, the directory block (a count word and one word per ordered table and
/// partition), and per tree its anchor and its nodes ([`redt_dc_executor::BTree::check`]).
///
/// # Errors
/// A tree that fails its check, as text.
fn tree_bytes(cluster: &EmbeddedCluster) -> Result<u64, String> {
    let topo = &cluster.topology;
    let ordered: Vec<TableId> = topo.tables.iter().filter(|t| t.ordered).map(|t| t.id).collect();
    let parts = topo.partitions.len() as u32;
    let mut total = 0;
    for n in &topo.nodes {
        let h = &cluster.dcs[n.dc.0 as usize];
        let mut any = false;
        for &t in &ordered {
            for p in 0..parts {
                let tree = h.ordered.tree(h.verbs.as_ref(), n.id, t, p, false).map_err(|e| e.to_string())?;
                let Some(tree) = tree else { continue };
                any = true;
                let shape = tree.check(h.verbs.as_ref()).map_err(|e| format!("tree of {t} p{p}: {e}"))?;
                total += TREE_ANCHOR_BYTES + shape.nodes_per_level.iter().sum::<u64>() * tree.node_bytes();
            }
        }
        if any {
            total += heap_alloc(8 * (1 + ordered.len() as u64 * parts as u64));
        }
    }
    Ok(total)
}

fn heap_used(cluster: &EmbeddedCluster) -> u64 {
    let mut total = 0;
    for dc in &cluster.topology.dcs {
        let h = &cluster.dcs[dc.id.0 as usize];
        for &n in &dc.nodes {
            let mut b = [0u8; 8];
            if h.verbs.read(n, h.layout.heap_next_offset(), &mut b).is_ok() {
                total += u64::from_le_bytes(b).saturating_sub(h.layout.heap_off);
            }
        }
    }
    total
}

/// Loads `cfg.warehouses` warehouses into every replica of `cluster` (which must run the
/// TPC-C topology and hold no TPC-C rows yet), advancing `bar` by rows.
///
/// # Errors
/// A MemStore too small, a duplicate key, as text.
pub fn load(cluster: &EmbeddedCluster, cfg: &LoadConfig, bar: &ProgressBar) -> Result<Loaded, String> {
    cfg.scale.validate()?;
    if cfg.warehouses == 0 || cfg.warehouses as u64 > (1 << 24) - 1 {
        return Err(format!("warehouses must be 1 to 2^24 - 1, got {}", cfg.warehouses));
    }
    let t0 = Instant::now();
    let heap0 = heap_used(cluster);
    let trees0 = tree_bytes(cluster)?;
    make_trees(cluster, cfg.warehouses)?;
    let nurand = nurand_of(cfg.seed);
    let counts: Vec<AtomicU64> =
        (0..=sc::TABLES.iter().map(|t| t.0).max().unwrap_or(0)).map(|_| AtomicU64::new(0)).collect();
    let done = AtomicU64::new(0);
    let next = AtomicUsize::new(1);
    let finished = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let writer = Writer { topo: &cluster.topology, dcs: &cluster.dcs, counts: &counts, done: &done, placed: false };
    let errors = std::sync::Mutex::new(Vec::new());
    let threads = cfg.threads.max(1);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let w = next.fetch_add(1, Ordering::Relaxed);
                    if w > cfg.warehouses as usize || failed.load(Ordering::Relaxed) {
                        break;
                    }
                    if let Err(e) = load_warehouse(&writer, cfg, &nurand, w as u32) {
                        failed.store(true, Ordering::Relaxed);
                        errors.lock().expect("errors").push(e);
                        break;
                    }
                }
                finished.fetch_add(1, Ordering::Relaxed);
            });
        }
        while finished.load(Ordering::Relaxed) < threads {
            bar.set_position(done.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    bar.set_position(done.load(Ordering::Relaxed));
    if let Some(e) = errors.into_inner().expect("errors").into_iter().next() {
        return Err(e);
    }
    let topo = &cluster.topology;
    let replicas = topo.partitions[0].replicas.len() as f64;
    let wh = cfg.warehouses as f64;
    let mut tables = Vec::new();
    let mut computed = 0.0;
    let mut records = 0u64;
    for &t in &sc::TABLES {
        let n = counts[t.0 as usize].load(Ordering::Relaxed);
        records += n;
        let rb = record_bytes(topo, t);
        let rows = n as f64 / wh;
        computed += rows * rb as f64;
        tables.push(TableFootprint {
            table: topo.table(t).map(|s| s.name.clone()).unwrap_or_default(),
            rows,
            record_bytes: rb,
            bytes: rows * rb as f64,
        });
    }
    let heap = heap_used(cluster).saturating_sub(heap0);
    let trees = tree_bytes(cluster)?.saturating_sub(trees0) as f64 / wh / replicas;
    let footprint = Footprint {
        heap_bytes_per_warehouse_per_replica: heap as f64 / wh / replicas,
        computed_bytes_per_warehouse_per_replica: computed + trees,
        tree_bytes_per_warehouse_per_replica: trees,
        records_per_warehouse_per_replica: records as f64 / wh,
        index_slot_bytes_per_warehouse_per_replica: records as f64 / wh * 16.0,
        tables,
    };
    Ok(Loaded { cfg: cfg.clone(), nurand, records, footprint, seconds: t0.elapsed().as_secs_f64() })
}

/// Generates warehouse `w` of `cfg` (its ITEM copy, WAREHOUSE, STOCK and ten districts with
/// their customers, history, orders, order lines and new orders) into `wr`, with the NURand
/// constants `nu` ([`nurand_of`] the load's seed).
///
/// # Errors
/// The sink's; more customers sharing a last name than the index holds.
pub fn load_warehouse(wr: &dyn RowSink, cfg: &LoadConfig, nu: &NuRand, w: u32) -> Result<(), String> {
    let s = cfg.scale;
    let mut rng = rand::rngs::StdRng::seed_from_u64(cfg.seed ^ (w as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let now = sc::now_ms();
    // ITEM (this warehouse's copy; every copy is identical: one generator per item table).
    let mut irng = rand::rngs::StdRng::seed_from_u64(cfg.seed ^ 0x17e4);
    for i in 1..=s.items {
        let v = vec![
            sc::num(irng.gen_range(1..=10_000)),
            sc::num(irng.gen_range(100..=10_000)),
            sc::astring(&mut irng, 14, 24),
            sc::data_string(&mut irng),
        ];
        wr.put(table::ITEM, sc::item_key(w, i), &v)?;
    }
    // WAREHOUSE.
    wr.put(
        table::WAREHOUSE,
        sc::warehouse_key(w),
        &[
            sc::astring(&mut rng, 6, 10),
            sc::address(&mut rng),
            sc::num(rng.gen_range(0..=2000)),
            sc::num(10_000 * s.customers as i64),
        ],
    )?;
    // STOCK.
    for i in 1..=s.items {
        let mut v = vec![sc::num(rng.gen_range(10..=100)), sc::num(0), sc::num(0), sc::num(0)];
        for _ in 0..DISTRICTS {
            v.push(sc::astring(&mut rng, 24, 24));
        }
        v.push(sc::data_string(&mut rng));
        wr.put(table::STOCK, sc::stock_key(w, i), &v)?;
    }
    for d in 1..=DISTRICTS {
        load_district(wr, &s, nu, w, d, now, &mut rng)?;
    }
    Ok(())
}

fn load_district(
    wr: &dyn RowSink,
    s: &Scale,
    nu: &NuRand,
    w: u32,
    d: u32,
    now: i64,
    rng: &mut impl Rng,
) -> Result<(), String> {
    let n = s.customers;
    let first_new = s.delivered() + 1;
    wr.put(
        table::DISTRICT,
        sc::district_key(w, d),
        &[
            sc::astring(rng, 6, 10),
            sc::address(rng),
            sc::num(rng.gen_range(0..=2000)),
            sc::num(1000 * n as i64),
            sc::num(n as i64 + 1),
        ],
    )?;
    // O_C_ID is a random permutation of the customers (clause 4.3.3.1).
    let mut perm: Vec<u32> = (1..=n).collect();
    perm.shuffle(rng);
    // CUSTOMER and HISTORY.
    let names = s.last_names();
    let mut by_name: Vec<Vec<(Vec<u8>, u32)>> = vec![Vec::new(); names as usize];
    for c in 1..=n {
        let name = if c <= names { c - 1 } else { sc::nurand(rng, 255, nu.c_last_load, 0, names as u64 - 1) as u32 };
        let first = sc::astring(rng, 8, 16);
        by_name[name as usize].push((first.clone(), c));
        let credit: &[u8] = if rng.gen_bool(0.1) { b"BC" } else { b"GC" };
        let v = vec![
            first,
            b"OE".to_vec(),
            sc::last_name(name),
            sc::address(rng),
            sc::nstring(rng, 16, 16),
            sc::num(now),
            credit.to_vec(),
            sc::num(5_000_000),
            sc::num(rng.gen_range(0..=5000)),
            sc::num(-1000),
            sc::num(1000),
            sc::num(1),
            sc::num(0),
            sc::astring(rng, 300, 500),
        ];
        wr.put(table::CUSTOMER, sc::customer_key(w, d, c), &v)?;
        let h = vec![
            sc::num(c as i64),
            sc::num(d as i64),
            sc::num(w as i64),
            sc::num(d as i64),
            sc::num(now),
            sc::num(1000),
            sc::astring(rng, 12, 24),
        ];
        wr.put(table::HISTORY, sc::history_key(w, 0, (d as u64) << 12 | c as u64), &h)?;
    }
    // The last-name index: one row per customer, by name and rank by C_FIRST.
    for (name, mut list) in by_name.into_iter().enumerate() {
        if list.is_empty() {
            continue;
        }
        if list.len() > sc::MAX_SAME_LAST {
            return Err(format!(
                "{} customers share a last name in w{w} d{d} (at most {})",
                list.len(),
                sc::MAX_SAME_LAST
            ));
        }
        list.sort();
        for (rank, (_, c)) in list.iter().enumerate() {
            let key = sc::customer_last_key(w, d, name as u32, rank as u32);
            wr.put(table::CUSTOMER_LAST, key, &[sc::num(*c as i64)])?;
        }
    }
    // ORDER, ORDER-LINE, NEW-ORDER.
    for o in 1..=n {
        let delivered = o < first_new;
        let ol_cnt = rng.gen_range(5..=MAX_OL);
        let carrier = if delivered { rng.gen_range(1..=10) } else { 0 };
        let ov = vec![
            sc::num(perm[o as usize - 1] as i64),
            sc::num(now),
            sc::num(carrier),
            sc::num(ol_cnt as i64),
            sc::num(1),
        ];
        wr.put(table::ORDERS, sc::order_key(w, d, o as u64), &ov)?;
        let c = perm[o as usize - 1];
        wr.put(table::ORDER_CUSTOMER, sc::order_customer_key(w, d, c, o as u64), &[sc::num(o as i64)])?;
        for l in 1..=ol_cnt {
            let v = vec![
                sc::num(rng.gen_range(1..=s.items) as i64),
                sc::num(w as i64),
                sc::num(if delivered { now } else { 0 }),
                sc::num(5),
                sc::num(if delivered { 0 } else { rng.gen_range(1..=999_999) }),
                sc::astring(rng, 24, 24),
            ];
            wr.put(table::ORDER_LINE, sc::order_line_key(w, d, o as u64, l), &v)?;
        }
        if !delivered {
            wr.put(table::NEW_ORDER, sc::new_order_key(w, d, o as u64), &[sc::num(1)])?;
        }
    }
    Ok(())
}

/// Creates, ahead of each district's D_NEXT_O_ID, the (zeroed) ORDERS, NEW_ORDER and 15
/// ORDER_LINE records New-Order will fill, on every replica. redt's upsert creates a
/// missing record outside any lock, so two executors creating the same key at once could
/// both publish it in the index; New-Orders racing for one o_id do exactly that. Created
/// here by one thread, in order, the keys exist before any transaction names them.
pub struct Preallocator {
    /// Orders kept allocated ahead of D_NEXT_O_ID.
    pub headroom: u64,
    warehouses: u32,
    /// Highest allocated order id per (w, d), index `(w - 1) * 10 + d - 1`.
    upto: Vec<u64>,
    /// Records created so far.
    pub created: u64,
}

impl Preallocator {
    /// A pre-allocator for a database freshly loaded at `scale`.
    pub fn new(warehouses: u32, scale: &Scale, headroom: u64) -> Self {
        Preallocator {
            headroom,
            warehouses,
            upto: vec![scale.orders() as u64; (warehouses * DISTRICTS) as usize],
            created: 0,
        }
    }

    /// Highest order id allocated in district (w, d).
    pub fn allocated(&self, w: u32, d: u32) -> u64 {
        self.upto[((w - 1) * DISTRICTS + d - 1) as usize]
    }

    /// Tops every district whose allocation runs less than half the headroom ahead of
    /// D_NEXT_O_ID (read from the partition's primary replica) back up to the full
    /// headroom, through the DC handles `dcs` (by DC id), into every replica and learner of
    /// the placement `topo` (the current one: after a failover the rebuilt replicas need
    /// them too). A record already on a replica (a learner's snapshot copied it) counts as
    /// created.
    ///
    /// # Errors
    /// A full MemStore, as text.
    pub fn top_up(&mut self, topo: &Topology, dcs: &[Arc<DcHandle>]) -> Result<(), String> {
        let counts: Vec<AtomicU64> =
            (0..=sc::TABLES.iter().map(|t| t.0).max().unwrap_or(0)).map(|_| AtomicU64::new(0)).collect();
        let done = AtomicU64::new(0);
        let wr = Writer { topo, dcs, counts: &counts, done: &done, placed: true };
        for w in 1..=self.warehouses {
            for d in 1..=DISTRICTS {
                let key = sc::district_key(w, d);
                let Some(next) =
                    read_primary(topo, dcs, table::DISTRICT, key).map(|v| sc::get(&v[sc::d::NEXT_O_ID as usize]))
                else {
                    continue;
                };
                let slot = &mut self.upto[((w - 1) * DISTRICTS + d - 1) as usize];
                let target = next as u64 + self.headroom;
                if *slot >= next as u64 + self.headroom / 2 {
                    continue;
                }
                while *slot < target {
                    let o = *slot + 1;
                    wr.put(table::ORDERS, sc::order_key(w, d, o), &[])?;
                    wr.put(table::NEW_ORDER, sc::new_order_key(w, d, o), &[])?;
                    for l in 1..=MAX_OL {
                        wr.put(table::ORDER_LINE, sc::order_line_key(w, d, o, l), &[])?;
                    }
                    *slot = o;
                }
            }
        }
        self.created += done.load(Ordering::Relaxed);
        Ok(())
    }
}

/// Reads the record `key` of `t` from its partition's primary replica (cell values).
pub fn read_primary(topo: &Topology, dcs: &[Arc<DcHandle>], t: TableId, key: u64) -> Option<Vec<Vec<u8>>> {
    let schema = topo.table(t)?;
    let p = topo.partition_of(schema, key);
    let node: NodeId = topo.partitions[p.0 as usize].replicas[0];
    read_at(topo, dcs, node, t, key)
}

/// Reads the record `key` of `t` on `node` (cell values) through the DC handles `dcs` (by
/// DC id), `None` if absent.
pub fn read_at(topo: &Topology, dcs: &[Arc<DcHandle>], node: NodeId, t: TableId, key: u64) -> Option<Vec<Vec<u8>>> {
    let dc = topo.nodes[node.0 as usize].dc;
    dcs[dc.0 as usize].read_record(node, t, key).ok().flatten().map(|r| r.values)
}
