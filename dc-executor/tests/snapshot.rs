//! Snapshot copy for rebuilding a replica (docs/design.md, "Rebuild"): a chunked scan of a
//! source node applied to a destination under the Thomas write rule, with busy records on
//! either side deferred to a retry.

mod common;

use common::TestDc;
use proptest::prelude::*;
use redt_dc_executor::verbs::BeforeBatch;
use redt_dc_executor::{
    apply_snapshot, lock, read_snapshot, CellVersion, DcHandle, DoorbellBatch, Error, ReplicaChange, SnapshotCell,
    SnapshotChunk, SnapshotRecord, Verbs, WorkRequest,
};
use redt_proto::{Cts, NodeId, Offset, TableId, Topology, TxnId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Narrow table: 4 cells of 8 bytes, one lock group each.
const T: TableId = TableId(1);
/// Wide table: 20 cells of 3 bytes, folded onto 16 lock groups.
const W: TableId = TableId(2);

fn topology() -> Topology {
    let wide: Vec<String> = (0..20).map(|i| format!("{{ name: w{i}, bytes: 3 }}")).collect();
    let yaml = format!(
        r#"
name: test
epoch: 1
memstore: {{ size: 8MiB, index: 256KiB, ring: 64KiB }}
dcs:
  - name: dc1
    nodes:
      - {{ name: a, addr: "127.0.0.1:7001" }}
      - {{ name: b, addr: "127.0.0.2:7001" }}
tables:
  - {{ name: t, id: 1, cells: [{{ name: c0, bytes: 8 }}, {{ name: c1, bytes: 8 }}, {{ name: c2, bytes: 8 }}, {{ name: c3, bytes: 8 }}] }}
  - {{ name: w, id: 2, locking: cell, cells: [{}] }}
partitions:
  - {{ replicas: [a] }}
  - {{ replicas: [b] }}
"#,
        wide.join(", ")
    );
    Topology::from_yaml("test.yaml", &yaml).expect("test topology is valid")
}

const SRC: NodeId = NodeId(0);
const DST: NodeId = NodeId(1);

fn setup() -> TestDc {
    let dc = TestDc::new(topology(), false);
    assert_eq!(dc.topo.nodes[0].id, SRC);
    assert_eq!(dc.topo.nodes[1].id, DST);
    dc
}

fn value(table: TableId, key: u64, cell: u16, cts: u64) -> Vec<u8> {
    let v = cts ^ key << 20 ^ (cell as u64) << 40 ^ (table.0 as u64) << 56;
    let width = if table == T { 8 } else { 3 };
    v.to_le_bytes()[..width].to_vec()
}

/// Commits `cell` of `(table, key)` on `node` at `cts` through the catch-up path (Thomas
/// write rule, creating the record if absent).
fn commit(dc: &TestDc, node: NodeId, table: TableId, key: u64, cell: u16, cts: u64) {
    let change = ReplicaChange { table, key, cell, value: value(table, key, cell, cts), seen: 0 };
    let done = dc.executor().apply_replica_now(node, TxnId::new(NodeId(0), cts), &[change], Cts(cts)).unwrap();
    assert!(done, "nothing holds the record");
}

fn populate(dc: &TestDc, node: NodeId, keys: u64) {
    for k in 0..keys {
        for c in 0..4u16 {
            if (k + c as u64) % 3 != 0 {
                commit(dc, node, T, k, c, 10 + k * 7 + c as u64);
            }
        }
        commit(dc, node, W, k, (k % 20) as u16, 5 + k);
        commit(dc, node, W, k, ((k + 7) % 20) as u16, 6 + k);
    }
}

/// A record's cell versions and values.
type Cells = (Vec<CellVersion>, Vec<Vec<u8>>);

/// `(table, key)` → (versions, values) of every record of `node`.
fn contents(dc: &DcHandle, node: NodeId) -> BTreeMap<(TableId, u64), Cells> {
    let mut out = BTreeMap::new();
    for (table, key, _) in dc.index.entries(dc.verbs.as_ref(), node).unwrap() {
        let r = dc.read_record(node, table, key).unwrap().unwrap();
        out.insert((table, key), (r.versions, r.values));
    }
    out
}

/// The bucket of every entry of `node`'s index.
fn buckets(dc: &DcHandle, node: NodeId) -> BTreeMap<(TableId, u64), u64> {
    let mut out = BTreeMap::new();
    for b in 0..dc.layout.index_buckets() {
        let (entries, next) = dc.index.entries_in(dc.verbs.as_ref(), node, b, 1).unwrap();
        assert_eq!(next, b + 1);
        for (t, k, _) in entries {
            out.insert((t, k), b);
        }
    }
    out
}

/// Applies `records` to `dst`, retrying the rest while something holds a record.
fn apply_all(dc: &DcHandle, records: &[SnapshotRecord]) -> u64 {
    let mut rest = records;
    let mut written = 0;
    while !rest.is_empty() {
        let a = apply_snapshot(dc, DST, rest).unwrap();
        written += a.cells_written;
        rest = &rest[a.applied..];
    }
    written
}

/// Copies `SRC` to `DST` in chunks, checking each chunk is exactly the kept, committed
/// records of whole buckets `[from, next)` within `max_bytes` (or of one bucket). Returns
/// the number of chunks.
fn copy(dc: &DcHandle, max_buckets: u64, max_bytes: usize, keep: &dyn Fn(TableId, u64) -> bool) -> usize {
    let bucket_of = buckets(dc, SRC);
    let committed = contents(dc, SRC);
    let total = dc.layout.index_buckets();
    let mut from = 0;
    let mut chunks = 0;
    loop {
        let chunk = read_snapshot(dc, SRC, from, max_buckets, max_bytes, keep).unwrap();
        chunks += 1;
        let end = chunk.next.unwrap_or(total);
        assert!(end > from, "progress without busy records");
        assert!(end - from <= max_buckets.max(1));
        let got: BTreeSet<(TableId, u64)> = chunk.records.iter().map(|r| (r.table, r.key)).collect();
        let want: BTreeSet<(TableId, u64)> = committed
            .keys()
            .filter(|&&(t, k)| keep(t, k) && (from..end).contains(&bucket_of[&(t, k)]))
            .copied()
            .collect();
        assert_eq!(got, want, "chunk [{from}, {end})");
        let spanned: BTreeSet<u64> = got.iter().map(|k| bucket_of[k]).collect();
        assert!(chunk.encoded_bytes() <= max_bytes || spanned.len() == 1, "{} bytes", chunk.encoded_bytes());
        for r in &chunk.records {
            let cells = dc.catalog.layout(r.table).unwrap().cells();
            assert_eq!(r.cells.len(), cells, "every cell is copied");
        }
        apply_all(dc, &chunk.records);
        match chunk.next {
            Some(n) => from = n,
            None => return chunks,
        }
    }
}

#[test]
fn entries_in_pieces_are_entries() {
    let dc = setup();
    populate(&dc, SRC, 200);
    let d = &dc.dc;
    let all = d.index.entries(d.verbs.as_ref(), SRC).unwrap();
    assert_eq!(all.len(), 400);
    let mut pieces = Vec::new();
    let mut from = 0;
    while from < d.layout.index_buckets() {
        let (e, next) = d.index.entries_in(d.verbs.as_ref(), SRC, from, 37).unwrap();
        assert_eq!(next, (from + 37).min(d.layout.index_buckets()));
        pieces.extend(e);
        from = next;
    }
    assert_eq!(pieces, all);
    let (e, next) = d.index.entries_in(d.verbs.as_ref(), SRC, d.layout.index_buckets() + 5, 10).unwrap();
    assert!(e.is_empty());
    assert!(next >= d.layout.index_buckets());
}

#[test]
fn chunked_copy_reproduces_every_cell() {
    let dc = setup();
    populate(&dc, SRC, 300);
    let d = &dc.dc;
    let chunks = copy(d, 5, 300, &|_, _| true);
    assert!(chunks > 50, "{chunks} chunks");
    let src = contents(d, SRC);
    assert_eq!(src.len(), 600);
    assert_eq!(contents(d, DST), src);
    // No lock left behind on either side.
    assert!(d.locked_records(SRC).unwrap().is_empty());
    assert!(d.locked_records(DST).unwrap().is_empty());
    // One chunk for the whole index with no byte limit.
    let all = read_snapshot(d, SRC, 0, u64::MAX, usize::MAX, &|_, _| true).unwrap();
    assert_eq!(all.next, None);
    assert_eq!(all.records.len(), 600);
    // A zero byte budget still makes progress, one bucket with records at a time.
    let one = read_snapshot(d, SRC, 0, u64::MAX, 0, &|_, _| true).unwrap();
    assert!(!one.records.is_empty());
    let next = one.next.unwrap();
    let again = read_snapshot(d, SRC, next, u64::MAX, 0, &|_, _| true).unwrap();
    assert!(again.next.unwrap() > next);
}

#[test]
fn keep_filters_records() {
    let dc = setup();
    populate(&dc, SRC, 100);
    let d = &dc.dc;
    let keep = |t: TableId, k: u64| t == T && k % 2 == 0;
    copy(d, 64, 4096, &keep);
    let src = contents(d, SRC);
    let dst = contents(d, DST);
    assert_eq!(dst.len(), 50);
    for (k, v) in &dst {
        assert!(keep(k.0, k.1));
        assert_eq!(&src[k], v);
    }
}

#[test]
fn thomas_write_rule_both_ways_and_idempotent() {
    let dc = setup();
    let d = &dc.dc;
    commit(&dc, SRC, T, 7, 0, 100);
    commit(&dc, SRC, T, 7, 1, 50);
    commit(&dc, SRC, T, 7, 2, 60);
    commit(&dc, DST, T, 7, 0, 200); // newer on the destination: kept
    commit(&dc, DST, T, 7, 1, 20); // older: overwritten
    commit(&dc, DST, T, 7, 3, 30); // not on the source: untouched
    let chunk = read_snapshot(d, SRC, 0, u64::MAX, usize::MAX, &|_, _| true).unwrap();
    assert_eq!(chunk.records.len(), 1);
    let src = d.read_record(SRC, T, 7).unwrap().unwrap();
    let a = apply_snapshot(d, DST, &chunk.records).unwrap();
    assert_eq!((a.applied, a.cells_written), (1, 2));
    let dst = d.read_record(DST, T, 7).unwrap().unwrap();
    assert_eq!(dst.versions[0].cts(), Cts(200));
    assert_eq!(dst.values[0], value(T, 7, 0, 200));
    assert_eq!(dst.versions[1], src.versions[1], "exactly the incoming version");
    assert_eq!(dst.values[1], value(T, 7, 1, 50));
    assert_eq!(dst.versions[2], src.versions[2]);
    assert_eq!(dst.values[2], value(T, 7, 2, 60));
    assert_eq!(dst.versions[3].cts(), Cts(30));
    assert_eq!(dst.lock, 0);
    // Update counters of the groups written moved (cells 1 and 2: groups 1 and 2).
    assert_eq!(dst.counters[1], 2);
    assert_eq!(dst.counters[2], 1);
    // Again: nothing changes, not even a counter.
    let a = apply_snapshot(d, DST, &chunk.records).unwrap();
    assert_eq!((a.applied, a.cells_written), (1, 0));
    assert_eq!(d.read_record(DST, T, 7).unwrap().unwrap(), dst);
    // At an equal commit timestamp the update counter decides (ThomasRule::Versions): the
    // same version or a lower counter leaves the local cell, a higher counter replaces it.
    let local = dst.versions[0];
    let at = |uc: u16| {
        let mut same = chunk.records.clone();
        same[0].cells = vec![SnapshotCell { cell: 0, version: CellVersion::new(uc, Cts(200)).0, value: vec![1; 8] }];
        same
    };
    assert_eq!(apply_snapshot(d, DST, &at(local.update_counter())).unwrap().cells_written, 0);
    assert_eq!(apply_snapshot(d, DST, &at(local.update_counter().wrapping_sub(1))).unwrap().cells_written, 0);
    assert_eq!(d.read_record(DST, T, 7).unwrap().unwrap(), dst);
    let higher = CellVersion::new(local.update_counter() + 1, Cts(200));
    assert_eq!(apply_snapshot(d, DST, &at(higher.update_counter())).unwrap().cells_written, 1);
    let after = d.read_record(DST, T, 7).unwrap().unwrap();
    assert_eq!((after.versions[0], &after.values[0][..8]), (higher, &[1u8; 8][..]));
}

#[test]
fn the_same_cell_twice_in_one_record_keeps_the_newer() {
    let dc = setup();
    let d = &dc.dc;
    let cell = |cts: u64, v: u8| SnapshotCell { cell: 1, version: CellVersion::new(1, Cts(cts)).0, value: vec![v; 8] };
    let r = SnapshotRecord { table: T, key: 3, cells: vec![cell(40, 4), cell(30, 3), cell(50, 5)] };
    let a = apply_snapshot(d, DST, &[r]).unwrap();
    assert_eq!((a.applied, a.cells_written), (1, 2));
    let img = d.read_record(DST, T, 3).unwrap().unwrap();
    assert_eq!(img.versions[1].cts(), Cts(50));
    assert_eq!(img.values[1], vec![5; 8]);
}

#[test]
fn bad_snapshot_records_are_refused_whole() {
    let dc = setup();
    let d = &dc.dc;
    let good = SnapshotRecord {
        table: T,
        key: 1,
        cells: vec![SnapshotCell { cell: 0, version: CellVersion::new(1, Cts(5)).0, value: vec![1; 8] }],
    };
    let with = |r: SnapshotRecord| apply_snapshot(d, DST, &[good.clone(), r]);
    let mut bad = good.clone();
    bad.table = TableId(99);
    assert!(matches!(with(bad), Err(Error::UnknownTable(TableId(99)))));
    let mut bad = good.clone();
    bad.cells[0].cell = 4;
    let e = with(bad).unwrap_err();
    assert!(matches!(e, Error::InvalidSnapshot { .. }), "{e}");
    assert!(e.to_string().contains("cell 4 beyond"), "{e}");
    let mut bad = good.clone();
    bad.table = W;
    bad.cells[0].value = vec![1; 4];
    let e = with(bad).unwrap_err();
    assert!(e.to_string().contains("4-byte value for a 3-byte cell"), "{e}");
    // Nothing was written, not even the good record.
    assert!(d.index.entries(d.verbs.as_ref(), DST).unwrap().is_empty());
    // A shorter value is zero-padded.
    let mut short = good.clone();
    short.cells[0].value = vec![7; 2];
    apply_snapshot(d, DST, &[short]).unwrap();
    assert_eq!(d.read_record(DST, T, 1).unwrap().unwrap().values[0], vec![7, 7, 0, 0, 0, 0, 0, 0]);
}

/// Takes `groups` of `(table, key)`'s record on `node` exclusively; returns the release operand.
fn hold(d: &DcHandle, node: NodeId, table: TableId, key: u64, groups: u16) -> (Offset, u64) {
    let at = d.index.lookup(d.verbs.as_ref(), node, table, key).unwrap().unwrap();
    let cas = lock::plan(0, groups, 0).unwrap();
    let lw = Offset(at.0 + 16);
    let old = d.verbs.masked_compare_and_swap(node, lw, cas.compare, cas.mask, cas.swap, cas.mask).unwrap();
    assert_eq!(lock::outcome(&cas, old), lock::LockOutcome::Acquired);
    (lw, lock::release_operand(cas.added))
}

fn release(d: &DcHandle, node: NodeId, (lw, op): (Offset, u64)) {
    d.verbs.fetch_and_add(node, lw, op).unwrap();
}

#[test]
fn a_record_held_on_the_source_ends_the_chunk_before_its_bucket() {
    let dc = setup();
    populate(&dc, SRC, 100);
    let d = &dc.dc;
    let bucket_of = buckets(d, SRC);
    // The record of the highest bucket among table T's, so some records come before it.
    let (&(table, key), &bucket) = bucket_of.iter().filter(|(k, _)| k.0 == T).max_by_key(|(_, &b)| b).unwrap();
    let held = hold(d, SRC, table, key, 1 << 3);
    // Shared locks elsewhere do not stop the scan.
    let (other, _) = bucket_of.iter().find(|(k, &b)| k.0 == T && b < bucket).unwrap();
    let cas = lock::plan(0b1, 0, 0).unwrap();
    let at = d.index.lookup(d.verbs.as_ref(), SRC, other.0, other.1).unwrap().unwrap();
    d.verbs.masked_compare_and_swap(SRC, Offset(at.0 + 16), cas.compare, cas.mask, cas.swap, cas.mask).unwrap();

    let chunk = read_snapshot(d, SRC, 0, u64::MAX, usize::MAX, &|_, _| true).unwrap();
    assert_eq!(chunk.next, Some(bucket));
    let got: BTreeSet<_> = chunk.records.iter().map(|r| (r.table, r.key)).collect();
    let want: BTreeSet<_> = bucket_of.iter().filter(|(_, &b)| b < bucket).map(|(&k, _)| k).collect();
    assert_eq!(got, want);
    // From the busy bucket itself: an empty chunk that resumes there.
    let stuck = read_snapshot(d, SRC, bucket, 4, usize::MAX, &|_, _| true).unwrap();
    assert_eq!(stuck, SnapshotChunk { records: Vec::new(), next: Some(bucket) });
    // A filter that leaves the busy record out passes it.
    let past = read_snapshot(d, SRC, bucket, 1, usize::MAX, &|t, k| (t, k) != (table, key)).unwrap();
    assert_eq!(past.next, Some(bucket + 1).filter(|&b| b < d.layout.index_buckets()));
    release(d, SRC, held);
    let rest = read_snapshot(d, SRC, bucket, u64::MAX, usize::MAX, &|_, _| true).unwrap();
    assert_eq!(rest.next, None);
    assert!(rest.records.iter().any(|r| (r.table, r.key) == (table, key)));
    assert_eq!(chunk.records.len() + rest.records.len(), bucket_of.len());
}

#[test]
fn a_record_held_on_the_destination_stops_apply() {
    let dc = setup();
    populate(&dc, SRC, 20);
    let d = &dc.dc;
    let chunk = read_snapshot(d, SRC, 0, u64::MAX, usize::MAX, &|t, _| t == T).unwrap();
    let records = chunk.records;
    assert!(records.len() >= 10);
    // Hold, on the destination, a group the fifth record carries; another group of the
    // third record (which it does not carry) does not stop it.
    let fifth = &records[4];
    let third = &records[2];
    d.insert_record(DST, fifth.table, fifth.key, &[]).unwrap();
    d.insert_record(DST, third.table, third.key, &[]).unwrap();
    let carried: u16 = third.cells.iter().fold(0, |g, c| g | 1 << c.cell);
    let free_group = (0..4).find(|g| carried >> g & 1 == 0);
    let held = hold(d, DST, fifth.table, fifth.key, 1 << fifth.cells[0].cell);
    let aside = free_group.map(|g| hold(d, DST, third.table, third.key, 1 << g));
    let a = apply_snapshot(d, DST, &records).unwrap();
    assert_eq!(a.applied, 4);
    let dst = contents(d, DST);
    let src = contents(d, SRC);
    for r in &records[..4] {
        assert_eq!(dst[&(r.table, r.key)], src[&(r.table, r.key)]);
    }
    assert!(records[5..].iter().all(|r| !dst.contains_key(&(r.table, r.key))));
    release(d, DST, held);
    if let Some(h) = aside {
        release(d, DST, h);
    }
    let b = apply_snapshot(d, DST, &records[4..]).unwrap();
    assert_eq!(b.applied, records.len() - 4);
    let dst = contents(d, DST);
    for r in &records {
        assert_eq!(dst[&(r.table, r.key)], src[&(r.table, r.key)]);
    }
    assert!(d.locked_records(DST).unwrap().is_empty());
}

#[test]
fn a_commit_between_image_and_recheck_makes_the_record_busy() {
    let dc = setup();
    populate(&dc, SRC, 50);
    let d = &dc.dc;
    let bucket_of = buckets(d, SRC);
    let (&(table, key), &bucket) = bucket_of.iter().max_by_key(|(_, &b)| b).unwrap();
    let at = d.index.lookup(d.verbs.as_ref(), SRC, table, key).unwrap().unwrap();
    // Bump the record's update counters right before the first header re-READ: a commit
    // landing between the image READ and the re-READ.
    let armed = Arc::new(AtomicBool::new(false));
    let counter_word = Offset(at.0 + 24);
    let trigger = armed.clone();
    let verbs = BeforeBatch::new(d.verbs.clone(), move |inner: &dyn Verbs, node, batch: &DoorbellBatch| {
        let recheck = batch.requests().iter().any(|r| matches!(r, WorkRequest::Read { len: 40, .. }));
        if recheck && trigger.swap(false, Ordering::SeqCst) {
            inner.fetch_and_add(node, counter_word, 1)?;
        }
        Ok(())
    });
    let spy = DcHandle::new(&dc.topo, Arc::new(verbs));
    // Start the scan in the busy record's bucket so the armed re-READ is the one covering it.
    armed.store(true, Ordering::SeqCst);
    let chunk = read_snapshot(&spy, SRC, bucket, 1, usize::MAX, &|_, _| true).unwrap();
    assert_eq!(chunk, SnapshotChunk { records: Vec::new(), next: Some(bucket) });
    let chunk = read_snapshot(&spy, SRC, bucket, 1, usize::MAX, &|_, _| true).unwrap();
    assert!(chunk.records.iter().any(|r| (r.table, r.key) == (table, key)));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random commits on the source (even commit timestamps) and older or newer ones
    /// already on the destination (odd), a chunked copy: every destination cell ends as the
    /// write with the newer commit timestamp of the two replicas.
    #[test]
    fn copy_keeps_the_newer_cell(
        src_writes in proptest::collection::vec((0u64..60, any::<bool>(), 0u16..20, 1u64..500), 0..150),
        dst_writes in proptest::collection::vec((0u64..60, any::<bool>(), 0u16..20, 1u64..500), 0..80),
        max_buckets in 1u64..200,
        max_bytes in 0usize..3000,
    ) {
        let dc = setup();
        let d = &dc.dc;
        // (table, key, cell) → newest cts written per side.
        let mut newest: BTreeMap<(TableId, u64, u16), (u64, u64)> = BTreeMap::new();
        let table_cell = |wide: bool, cell: u16| if wide { (W, cell) } else { (T, cell % 4) };
        for &(key, wide, cell, cts) in &src_writes {
            let (t, c) = table_cell(wide, cell);
            commit(&dc, SRC, t, key, c, cts * 2);
            let e = newest.entry((t, key, c)).or_default();
            e.0 = e.0.max(cts * 2);
        }
        for &(key, wide, cell, cts) in &dst_writes {
            let (t, c) = table_cell(wide, cell);
            commit(&dc, DST, t, key, c, cts * 2 + 1);
            let e = newest.entry((t, key, c)).or_default();
            e.1 = e.1.max(cts * 2 + 1);
        }
        let before = contents(d, SRC);
        copy(d, max_buckets, max_bytes, &|_, _| true);
        prop_assert_eq!(contents(d, SRC), before, "the source is unchanged");
        let src = contents(d, SRC);
        for (&(t, key, c), &(s, ds)) in &newest {
            let img = d.read_record(DST, t, key).unwrap().expect("copied or pre-existing");
            let cell = c as usize;
            let want = s.max(ds);
            prop_assert_eq!(img.versions[cell].cts(), Cts(want));
            prop_assert_eq!(&img.values[cell], &value(t, key, c, want));
            if s > ds {
                prop_assert_eq!(img.versions[cell], src[&(t, key)].0[cell], "the source's exact version");
            }
        }
        prop_assert!(d.locked_records(DST).unwrap().is_empty());
        // Copying again writes nothing.
        let again = read_snapshot(d, SRC, 0, u64::MAX, usize::MAX, &|_, _| true).unwrap();
        prop_assert_eq!(apply_all(d, &again.records), 0);
    }
}

/// A loaded record (values written at version 0, as the bulk loaders do) is copied whole: onto
/// a node without it, and onto a record created here since by the catch-up of another cell
/// (zeros at version 0 elsewhere), whose never-written cells take the load while the written
/// one keeps its newer value.
#[test]
fn loaded_cells_never_written_since_are_copied() {
    let dc = setup();
    let d = &dc.dc;
    let load: Vec<Vec<u8>> = (0..4u64).map(|c| (100 + c).to_le_bytes().to_vec()).collect();
    let refs: Vec<&[u8]> = load.iter().map(Vec::as_slice).collect();
    d.insert_record(SRC, T, 1, &refs).unwrap();
    d.insert_record(SRC, T, 2, &refs).unwrap();
    // On DST, key 2 exists already: created by the catch-up of cell 3 at cts 50.
    commit(&dc, DST, T, 2, 3, 50);
    let chunk = read_snapshot(d, SRC, 0, d.layout.index_buckets(), usize::MAX, &|_, _| true).unwrap();
    assert_eq!(chunk.records.len(), 2);
    assert!(chunk.records.iter().all(|r| r.cells.iter().all(|c| c.version == 0)));
    apply_all(d, &chunk.records);
    let one = d.read_record(DST, T, 1).unwrap().expect("created by the copy");
    assert_eq!(one.values, load, "the load is copied");
    let two = d.read_record(DST, T, 2).unwrap().unwrap();
    assert_eq!(&two.values[..3], &load[..3], "never-written cells take the load");
    assert_eq!(two.values[3], value(T, 2, 3, 50), "the written cell keeps its newer value");
    assert_eq!(two.versions[3].cts(), Cts(50));
    // Applying again changes nothing.
    let before = contents(d, DST);
    apply_all(d, &chunk.records);
    assert_eq!(contents(d, DST), before);
}
