//! Measurements of the RDMA-friendly hash index (RedT §4.2 / CREST §4.1, as in FaRM/FORD):
//! READ verbs per lookup at given slot loads, counted by `IndexStats` on the in-process
//! backend. These are counts of verbs, not timings, so they are deterministic for a given
//! key set and safe to assert on.
//!
//! Run with `--nocapture` to see the figures.

use rand::{rngs::StdRng, Rng, SeedableRng};
use redt_dc_executor::{Index, IndexStats, Layout, LocalVerbs, LINE};
use redt_proto::{MemStoreConfig, NodeId, Offset, TableId};

const NODE: NodeId = NodeId(0);

/// Index bytes of `configs/default.yaml` (`memstore.index: 16MiB`): 262,144 buckets.
const DEFAULT_INDEX_BYTES: u64 = 16 << 20;

/// The bound the index is built to meet at its recommended load.
const MAX_READS_PER_LOOKUP: f64 = 1.6;

/// A formatted one-node MemStore whose index area is `index_bytes`, with a minimal ring and
/// heap (the index never touches them).
fn memstore(index_bytes: u64) -> (LocalVerbs, Layout) {
    let mut cfg = MemStoreConfig { size_bytes: 0, index_bytes, ring_bytes: 4096 };
    cfg.size_bytes = 3 * LINE
        + index_bytes
        + 2 * 4096
        + cfg.decision_log_bytes()
        + cfg.absent_lock_bytes()
        + cfg.promise_table_bytes();
    let layout = Layout::from_config(&cfg);
    let verbs = LocalVerbs::in_process([NODE], layout.size);
    layout.format(verbs.region(NODE).expect("node 0 was created"));
    (verbs, layout)
}

/// READs per lookup for hits, misses and both.
#[derive(Debug)]
struct Figures {
    hit: f64,
    miss: f64,
    all: f64,
    /// Mean 64-byte buckets READ per lookup (hits and misses).
    buckets: f64,
}

/// Inserts `present` into `index`, then looks up every present key and every key of
/// `absent`, and returns the READs per lookup of each kind.
fn measure(verbs: &LocalVerbs, index: &Index, present: &[(TableId, u64)], absent: &[(TableId, u64)]) -> Figures {
    for (i, &(t, k)) in present.iter().enumerate() {
        index.insert(verbs, NODE, t, k, Offset(LINE * (i as u64 + 1))).expect("below the probe limit");
    }
    let start = index.stats().snapshot();
    for (i, &(t, k)) in present.iter().enumerate() {
        assert_eq!(index.lookup(verbs, NODE, t, k).unwrap(), Some(Offset(LINE * (i as u64 + 1))));
    }
    let hits = index.stats().since(&start);
    let mid = index.stats().snapshot();
    for &(t, k) in absent {
        assert_eq!(index.lookup(verbs, NODE, t, k).unwrap(), None);
    }
    let misses = index.stats().since(&mid);
    let all: IndexStats = index.stats().since(&start);
    Figures {
        hit: hits.reads_per_lookup(),
        miss: misses.reads_per_lookup(),
        all: all.reads_per_lookup(),
        buckets: all.lookup_buckets() as f64 / all.lookups() as f64,
    }
}

/// Dense keys `0..n` of one table, as YCSB and TPC-C generate them.
fn dense(table: u16, range: std::ops::Range<u64>) -> Vec<(TableId, u64)> {
    range.map(|k| (TableId(table), k)).collect()
}

/// Runs `measure` with dense keys at `load` (fraction of slots) over an index of
/// `index_bytes` with the given first-READ window, and prints the figures.
fn at_load(index_bytes: u64, load: f64, read_buckets: usize) -> Figures {
    let (verbs, layout) = memstore(index_bytes);
    let index = Index::new(layout).with_read_buckets(read_buckets);
    let n = (index.capacity_slots() as f64 * load) as u64;
    let f = measure(&verbs, &index, &dense(1, 0..n), &dense(1, n..2 * n));
    println!(
        "load {load:.3} ({n} keys in {} buckets), first READ {read_buckets} bucket(s): \
         READs/lookup hit {:.3}, miss {:.3}, all {:.3}; buckets READ/lookup {:.2}",
        layout.index_buckets(),
        f.hit,
        f.miss,
        f.all,
        f.buckets,
    );
    f
}

#[test]
fn reads_per_lookup_at_half_load() {
    let f = at_load(DEFAULT_INDEX_BYTES, 0.5, Index::DEFAULT_READ_BUCKETS);
    assert!(f.hit <= MAX_READS_PER_LOOKUP, "{f:?}");
    assert!(f.miss <= MAX_READS_PER_LOOKUP, "{f:?}");
    assert!(f.all <= MAX_READS_PER_LOOKUP, "{f:?}");
    println!("recommended max slot load: {}", Index::RECOMMENDED_MAX_LOAD);
}

#[test]
fn reads_per_lookup_at_default_config_load() {
    // configs/default.yaml: 393,216 records per node in 262,144 buckets, 37.5% of slots.
    let f = at_load(DEFAULT_INDEX_BYTES, 393_216.0 / (4.0 * 262_144.0), Index::DEFAULT_READ_BUCKETS);
    assert!(f.all <= MAX_READS_PER_LOOKUP, "{f:?}");
}

#[test]
fn reads_per_lookup_at_three_quarter_load() {
    let f = at_load(DEFAULT_INDEX_BYTES, 0.75, Index::DEFAULT_READ_BUCKETS);
    // Still within the bound, though misses now walk past a full home pair half the time.
    assert!(f.hit <= MAX_READS_PER_LOOKUP, "{f:?}");
    assert!(f.all <= MAX_READS_PER_LOOKUP, "{f:?}");
}

#[test]
fn first_read_of_two_buckets_beats_one() {
    for load in [0.5, 0.75] {
        // A 1 MiB index (16,384 buckets) gives the same figures to two decimals.
        let one = at_load(1 << 20, load, 1);
        let two = at_load(1 << 20, load, 2);
        assert!(two.all < one.all, "load {load}: one {one:?}, two {two:?}");
    }
}

#[test]
fn reads_per_lookup_under_churn() {
    // Half load, then 20 rounds of as many remove + insert pairs as there are keys (as
    // TPC-C's NewOrder and Delivery do to the new-order table). Without reclaiming
    // tombstones every empty slot would be a tombstone by round 10 and every lookup would
    // walk to the probe limit (5.5 READs each).
    let (verbs, layout) = memstore(64 << 10);
    let index = Index::new(layout);
    let n = index.capacity_slots() / 2;
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let mut live: Vec<u64> = (0..n).collect();
    for &k in &live {
        index.insert(&verbs, NODE, TableId(2), k, Offset(LINE * (k + 1))).unwrap();
    }
    let mut next = n;
    for round in 1..=20 {
        for _ in 0..n {
            let i = rng.gen_range(0..live.len());
            assert!(index.remove(&verbs, NODE, TableId(2), live[i]).unwrap());
            index.insert(&verbs, NODE, TableId(2), next, Offset(LINE * (next + 1))).unwrap();
            live[i] = next;
            next += 1;
        }
        if round % 5 != 0 {
            continue;
        }
        let start = index.stats().snapshot();
        for &k in &live {
            assert_eq!(index.lookup(&verbs, NODE, TableId(2), k).unwrap(), Some(Offset(LINE * (k + 1))));
        }
        for k in next..next + n {
            assert_eq!(index.lookup(&verbs, NODE, TableId(2), k).unwrap(), None);
        }
        let s = index.stats().since(&start);
        let all = index.stats();
        println!(
            "load 0.5 after {round} x {n} remove+insert pairs: READs/lookup (hits and misses) {:.3}; \
             {:.1}% of removes reclaimed their slot",
            s.reads_per_lookup(),
            100.0 * all.reclaimed() as f64 / all.removes() as f64,
        );
        assert!(s.reads_per_lookup() <= MAX_READS_PER_LOOKUP, "round {round}: {s:?}");
    }
}
