//! Micro-benchmarks of the executor on the in-process verbs backend: one DC of two nodes,
//! one partition each, the YCSB table of `configs/default.yaml` (10 cells of 100 B), 2,000
//! records loaded before timing.
//!
//! - the main YCSB job's sub-transaction: 10 operations on distinct keys spread over both
//!   nodes, 5 reads of every cell and 5 updates of one 100-byte cell, then its commit: phase
//!   1 and phase 2 together, and each alone;
//! - a read-only one: 10 reads of every cell, then its commit;
//! - replay of the entries such a sub-transaction leaves once committed (phase 2 wrote the
//!   cells, so replay checks the versions, flushes the entries and moves the ring's head);
//! - a redo entry appended to a ring (reserve, encode, WRITE, `Committed`) and replayed, its
//!   10 changes applied to the records by the Thomas write rule.
//!
//! Every iteration commits and releases its locks; replay (untimed where it is not what is
//! measured) keeps the rings from filling, so each iteration does the same work. Allocation
//! goes through mimalloc, as in the `redt` binary.
//!
//! `cargo bench -p redt-dc-executor --bench executor` (about 20 s); a name filter after `--`
//! runs some of them only.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use redt_dc_executor::ring::{encode, push_write};
use redt_dc_executor::{
    apply_committed, Change, DcHandle, Decision, DoorbellBatch, EntryStatus, Executor, Hlc, Layout, LocalAccess,
    LocalVerbs, LockIntent, Procedure, RedoEntry, Replayer, RingWriter, SubTxn, Verbs, Vote, VoteWord, YcsbOp,
    YcsbProcedure,
};
use redt_proto::{Cts, DcId, Epoch, NodeId, Offset, PartitionId, TableId, Topology, TxnId};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The `redt` binary's allocator (`src/main.rs`), so allocations cost here what they cost
/// there (the system allocator made phase 1 twice as slow).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The YCSB table.
const T: TableId = TableId(1);
/// Cells per record, and bytes per cell (the default topology's `usertable`).
const CELLS: usize = 10;
const CELL_BYTES: usize = 100;
/// Records loaded, half on each node (keys `0..KEYS`, partition = key mod 2).
const KEYS: u64 = 2_000;
/// Operations per sub-transaction.
const OPS: u64 = 10;
/// Sub-transactions run between two (untimed) replay passes; their keys are disjoint, so
/// phase 1 of a whole batch can run before its phase 2.
const BATCH: u64 = 32;

/// One DC of two nodes on in-process MemStores, its records loaded, replay driven by hand.
struct Dc {
    topo: Topology,
    local: Arc<LocalVerbs>,
    dc: Arc<DcHandle>,
    replayers: Vec<(NodeId, Replayer)>,
    /// Transactions issued so far (the next id).
    seq: u64,
}

impl Dc {
    fn new() -> Dc {
        let yaml = r#"
name: bench
epoch: 1
memstore: { size: 8MiB, index: 256KiB, ring: 1MiB }
dcs:
  - name: dc1
    nodes:
      - { name: a, addr: "127.0.0.1:7001" }
      - { name: b, addr: "127.0.0.2:7001" }
tables:
  - name: usertable
    id: 1
    locking: cell
    partitioning: modulo
    cells: { count: 10, bytes: 100, prefix: field }
partitions:
  - { replicas: [a] }
  - { replicas: [b] }
"#;
        let topo = Topology::from_yaml("bench.yaml", yaml).expect("the bench topology is valid");
        let layout = Layout::from_config(&topo.memstore);
        let nodes: Vec<NodeId> = topo.nodes.iter().map(|n| n.id).collect();
        let local = Arc::new(LocalVerbs::in_process(nodes.iter().copied(), layout.size));
        for &n in &nodes {
            layout.format(local.region(n).expect("the node's region"));
        }
        let verbs: Arc<dyn Verbs> = local.clone();
        let dc = Arc::new(DcHandle::new(&topo, verbs));
        let replayers = nodes.iter().map(|&n| (n, Replayer::new(layout, n))).collect();
        let d = Dc { topo, local, dc, replayers, seq: 0 };
        let value = [7u8; CELL_BYTES];
        for k in 0..KEYS {
            d.dc.insert_record(d.node_of(k), T, k, &[&value[..]; CELLS]).expect("loads");
        }
        d
    }

    /// The node holding `key`.
    fn node_of(&self, key: u64) -> NodeId {
        let t = self.topo.table(T).expect("the YCSB table");
        self.topo.partitions[self.topo.partition_of(t, key).0 as usize].replicas[0]
    }

    fn executor(&self) -> Executor {
        Executor::new(self.dc.clone(), Arc::new(Hlc::new()))
    }

    /// The next sub-transaction, the `n`-th: keys `10w..10w+10` of window `w = n mod 200`
    /// (consecutive ones are disjoint), the first five read (every cell), the last five
    /// updated (one 100-byte cell each); or all ten read when `read_only`.
    fn next_sub(&mut self, read_only: bool) -> SubTxn {
        let n = self.seq;
        let base = n % (KEYS / OPS) * OPS;
        let ops = (0..OPS)
            .map(|i| {
                let key = base + i;
                if read_only || i < OPS / 2 {
                    YcsbOp::Read { key }
                } else {
                    YcsbOp::Update { key, cell: (i % CELLS as u64) as u16, value: vec![n as u8; CELL_BYTES] }
                }
            })
            .collect();
        let procedure: Arc<dyn Procedure> = Arc::new(YcsbProcedure::new(T, CELLS, ops));
        let local = procedure
            .accesses()
            .iter()
            .enumerate()
            .map(|(access, a)| LocalAccess { access, node: self.node_of(a.key) })
            .collect();
        self.seq += 1;
        SubTxn {
            txn: TxnId::new(NodeId(0), self.seq),
            epoch: Epoch(1),
            coordinator: NodeId(0),
            start: Cts(0),
            participants: vec![DcId(0)],
            partitions: vec![PartitionId(0), PartitionId(1)],
            procedure,
            local,
        }
    }

    /// The next batch of sub-transactions, keys disjoint.
    fn batch(&mut self, n: u64, read_only: bool) -> Vec<SubTxn> {
        (0..n).map(|_| self.next_sub(read_only)).collect()
    }

    /// One replay pass on every node; every entry must be finished by then, so the heads
    /// reach the tails.
    fn replay(&mut self) {
        let catalog = &self.dc.catalog;
        for (n, r) in &mut self.replayers {
            let region = self.local.region(*n).expect("the node's region");
            let step = r.step(region, &mut |e| apply_committed(region, catalog, e));
            assert_eq!(step.blocked_at, None, "an entry left unfinished");
        }
    }
}

/// A commit timestamp above the vote's clock and every version it read.
fn cts_of(v: &Vote) -> Cts {
    let seen = v.items.iter().flat_map(|i| i.versions.iter().map(|(_, v)| v.cts())).max().unwrap_or(Cts(0));
    Cts(v.hlc.max(seen).0 + 1)
}

fn now_ms() -> u64 {
    use redt_dc_executor::Clock;
    redt_dc_executor::SystemClock.now_ms()
}

/// What of a sub-transaction's life a bench times.
#[derive(Clone, Copy)]
enum Timed {
    Both,
    Phase1,
    Phase2,
}

/// Times `iters` sub-transactions, committed, in batches of [`BATCH`] with a replay pass
/// after each (untimed).
fn run(dc: &mut Dc, ex: &mut Executor, iters: u64, read_only: bool, timed: Timed) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    let mut votes = Vec::with_capacity(BATCH as usize);
    while left > 0 {
        let n = left.min(BATCH);
        let subs = dc.batch(n, read_only);
        let now = now_ms();
        match timed {
            Timed::Both => {
                let t = Instant::now();
                for s in &subs {
                    let v = ex.execute(s, now).expect("phase 1 runs");
                    assert!(v.is_commit(), "{:?}", v.abort);
                    ex.finish(s.txn, Decision::Commit(cts_of(&v)), &v.entries).expect("phase 2 runs");
                }
                total += t.elapsed();
            }
            Timed::Phase1 | Timed::Phase2 => {
                let t = Instant::now();
                for s in &subs {
                    votes.push(ex.execute(s, now).expect("phase 1 runs"));
                }
                let phase1 = t.elapsed();
                let t = Instant::now();
                for (s, v) in subs.iter().zip(votes.drain(..)) {
                    assert!(v.is_commit(), "{:?}", v.abort);
                    ex.finish(s.txn, Decision::Commit(cts_of(&v)), &v.entries).expect("phase 2 runs");
                }
                total += if matches!(timed, Timed::Phase1) { phase1 } else { t.elapsed() };
            }
        }
        dc.replay();
        left -= n;
    }
    total
}

fn sub_transactions(c: &mut Criterion) {
    let mut dc = Dc::new();
    let mut ex = dc.executor();
    let cases = [
        ("YCSB sub-transaction (5 reads, 5 x 100 B updates): execute + commit", false, Timed::Both),
        ("YCSB sub-transaction (5 reads, 5 x 100 B updates): execute (phase 1)", false, Timed::Phase1),
        ("YCSB sub-transaction (5 reads, 5 x 100 B updates): commit (phase 2)", false, Timed::Phase2),
        ("YCSB read-only sub-transaction (10 reads): execute + commit", true, Timed::Both),
    ];
    for (name, read_only, timed) in cases {
        c.bench_function(name, |b| b.iter_custom(|iters| run(&mut dc, &mut ex, iters, read_only, timed)));
    }
    c.bench_function("replay of a committed YCSB sub-transaction (2 entries)", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(BATCH);
                for s in dc.batch(n, false) {
                    let v = ex.execute(&s, now_ms()).expect("phase 1 runs");
                    assert!(v.is_commit(), "{:?}", v.abort);
                    ex.finish(s.txn, Decision::Commit(cts_of(&v)), &v.entries).expect("phase 2 runs");
                }
                let t = Instant::now();
                dc.replay();
                total += t.elapsed();
                left -= n;
            }
            total
        })
    });
}

/// A redo entry of node `a` in the shape of the ring bench's (10 locks, 10 writes of 100 B),
/// but on the records loaded there and committed at `cts`.
fn committed_entry(records: &[(u64, Offset)], txn: u64, cts: Cts) -> RedoEntry {
    RedoEntry {
        txn: TxnId(txn),
        status: EntryStatus::Committed,
        cts,
        vote: VoteWord::NONE,
        epoch: Epoch(1),
        coordinator: NodeId(0),
        start: Cts(0),
        participants: vec![DcId(0)],
        partitions: vec![PartitionId(0)],
        locks: records
            .iter()
            .enumerate()
            .map(|(i, &(key, record))| LockIntent {
                record,
                table: T,
                key,
                lock_bits: 0,
                cells: 1 << i,
                versions: vec![0],
            })
            .collect(),
        changes: records
            .iter()
            .enumerate()
            .map(|(i, &(key, record))| Change {
                record,
                table: T,
                key,
                cell: i as u16,
                value: vec![txn as u8; CELL_BYTES],
            })
            .collect(),
    }
}

fn append_and_replay(c: &mut Criterion) {
    let dc = Dc::new();
    let node = dc.node_of(0);
    let layout = dc.dc.layout;
    let records: Vec<(u64, Offset)> = (0..OPS)
        .map(|i| {
            let key = 2 * i;
            let off = dc.dc.index.lookup(dc.dc.verbs.as_ref(), node, T, key).expect("index READ").expect("loaded");
            (key, off)
        })
        .collect();
    let region = dc.local.region(node).expect("the node's region").clone();
    let catalog = dc.dc.catalog.clone();
    let mut writer = RingWriter::new(layout, node);
    let mut replayer = Replayer::new(layout, node);
    let mut txn = 0u64;
    c.bench_function("redo entry append + replay (10 locks, 10 x 100 B writes applied)", |b| {
        b.iter(|| {
            txn += 1;
            // Commit timestamps grow, so the Thomas write rule applies every change.
            let e = committed_entry(&records, txn, Cts(txn));
            let slots = redt_dc_executor::ring::encoded_slots(&e);
            let index = writer
                .reserve(dc.dc.verbs.as_ref(), slots, Duration::from_millis(200), &Instant::now)
                .expect("replay keeps up");
            let mut batch = DoorbellBatch::new();
            push_write(&mut batch, &layout, index, &encode(black_box(&e), index));
            dc.dc.verbs.post_batch(node, &mut batch).expect("in-process writes");
            let step = replayer.step(&region, &mut |e| apply_committed(&region, &catalog, e));
            assert_eq!((step.applied, step.blocked_at), (1, None));
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = sub_transactions, append_and_replay
}
criterion_main!(benches);
