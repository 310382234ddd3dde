//! Range reads through the ordered index in transactions: the trees every record
//! creation keeps, rows across partitions, next-key (gap) locking against phantoms, and the
//! anomaly it prevents when a range read and an insert meet in two places (two DCs, here two
//! nodes run as two sub-transactions each) — with the mutant that switches gap locks off.

mod common;

use common::kv::{cts_of, decide, kv, load, partitioner, rows, run, sub};
use common::{TestDc, T};
use redt_dc_executor::{AbortReason, Decision, KvOp};
use redt_proto::Cts;

#[test]
fn record_creation_keeps_one_tree_per_partition_in_key_order() {
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    load(&dc, (0..200).rev());
    let p = partitioner(&dc);
    for part in 0..2u32 {
        let node = dc.topo.partitions[part as usize].replicas[0];
        let tree = dc.dc.ordered.tree(dc.local.as_ref(), node, T, part, false).unwrap().expect("a tree");
        let keys: Vec<u64> = tree.scan(dc.local.as_ref(), 0, u64::MAX, 1000).unwrap().iter().map(|e| e.0).collect();
        let want: Vec<u64> = (0..200).filter(|k| p.partition_of(T, *k) == part).collect();
        assert_eq!(keys, want, "partition {part}");
        for (k, at) in tree.scan(dc.local.as_ref(), 0, u64::MAX, 1000).unwrap() {
            assert_eq!(dc.dc.index.lookup(dc.local.as_ref(), node, T, k).unwrap(), Some(redt_proto::Offset(at)));
        }
    }
}

#[test]
fn a_scan_reads_the_rows_of_every_partition_in_its_range() {
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    load(&dc, (0..40).filter(|k| k % 3 != 0));
    let (s, v) = run(&dc, 1, vec![KvOp::Scan(5, 20, 100)], None);
    assert!(v.is_commit(), "{:?}", v.abort);
    let want: Vec<u64> = (5..=20).filter(|k| k % 3 != 0).collect();
    assert_eq!(rows(&v.items), want);
    for i in v.items.iter().filter(|i| i.row.is_some()) {
        let k = i.row.unwrap();
        assert_eq!(i.values, vec![(0, (k as i64 * 10 + 1).to_le_bytes().to_vec())]);
    }
    // The limit holds per partition; the procedure merges and keeps the first rows.
    let (s2, v2) = run(&dc, 2, vec![KvOp::Scan(5, 20, 3)], None);
    assert!(v2.is_commit());
    assert_eq!(rows(&v2.items), vec![5, 7, 8, 10, 11, 14], "three per partition");
    decide(&dc, &s, &v, Decision::Abort);
    decide(&dc, &s2, &v2, Decision::Abort);
}

#[test]
fn a_key_written_in_the_scan_appears_and_a_fresh_record_does_not() {
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    load(&dc, [2, 4]);
    // An aborted insert leaves a fresh record behind: no row.
    let (s, v) = run(&dc, 1, vec![KvOp::Write(3, vec![9; 8])], None);
    assert!(v.is_commit());
    decide(&dc, &s, &v, Decision::Abort);
    let (s, v) = run(&dc, 2, vec![KvOp::Scan(0, 10, 100)], None);
    assert_eq!(rows(&v.items), vec![2, 4], "the aborted insert's record is no row");
    decide(&dc, &s, &v, Decision::Abort);
    let (s, v) = run(&dc, 3, vec![KvOp::Write(3, vec![9; 8])], None);
    decide(&dc, &s, &v, Decision::Commit(cts_of(&v)));
    let (s, v) = run(&dc, 4, vec![KvOp::Scan(0, 10, 100)], None);
    assert_eq!(rows(&v.items), vec![2, 3, 4]);
    decide(&dc, &s, &v, Decision::Abort);
}

#[test]
fn a_scan_and_an_insert_into_its_own_range_in_one_transaction_commit() {
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    load(&dc, [2, 4, 6]);
    let (s, v) = run(&dc, 1, vec![KvOp::Scan(0, 10, 100), KvOp::Write(5, vec![1; 8])], None);
    assert!(v.is_commit(), "{:?}", v.abort);
    assert_eq!(rows(&v.items), vec![2, 4, 6], "the scan reads what was there before the transaction");
    decide(&dc, &s, &v, Decision::Commit(cts_of(&v)));
    let (_, v) = run(&dc, 2, vec![KvOp::Scan(0, 10, 100)], None);
    assert_eq!(rows(&v.items), vec![2, 4, 5, 6]);
}

/// Whether an insert into a range another transaction read, undecided, conflicts; with
/// `gap_locks` off (the mutant) it does not.
fn insert_conflicts(gap_locks: bool) -> Vec<(u64, bool)> {
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    dc.dc.ordered.set_gap_locks(gap_locks);
    // Partition 0 holds 0, 6, …, 36; partition 1 holds 3, 9, …, 39.
    load(&dc, (0..40).step_by(3));
    let (s, v) = run(&dc, 1, vec![KvOp::Scan(10, 21, 100)], None);
    assert!(v.is_commit());
    assert_eq!(rows(&v.items), vec![12, 15, 18, 21]);
    // Locked gaps: (6, 24] in partition 0 (rows 12, 18, next key 24) and (9, 27] in
    // partition 1 (rows 15, 21, next key 27). An insert takes its successor's gap.
    let mut out = Vec::new();
    for (i, k) in [11u64, 13, 14, 20, 22, 25, 8, 28, 29, 4, 7].into_iter().enumerate() {
        let (si, vi) = run(&dc, 10 + i as u64, vec![KvOp::Write(k, vec![1; 8])], None);
        let conflicted = matches!(vi.abort, Some(AbortReason::LockConflict { .. }));
        out.push((k, conflicted));
        decide(&dc, &si, &vi, Decision::Abort);
    }
    decide(&dc, &s, &v, Decision::Commit(cts_of(&v)));
    // Decided: the gaps are free again.
    let (si, vi) = run(&dc, 50, vec![KvOp::Write(13, vec![1; 8])], None);
    assert!(vi.is_commit(), "{:?}", vi.abort);
    decide(&dc, &si, &vi, Decision::Commit(cts_of(&vi)));
    out
}

#[test]
fn an_insert_into_a_read_range_conflicts_until_the_reader_is_decided() {
    let got = insert_conflicts(true);
    let want = vec![
        (11, true),
        (13, true),
        (14, true),
        (20, true),
        (22, true),
        (25, true),
        (8, true),
        (28, false),
        (29, false),
        (4, false),
        (7, false),
    ];
    assert_eq!(got, want);
}

#[test]
fn the_mutant_without_gap_locks_lets_inserts_into_a_read_range() {
    let got = insert_conflicts(false);
    assert!(got.iter().all(|&(_, c)| !c), "{got:?}");
}

#[test]
fn a_range_past_the_last_key_locks_the_end_of_the_tree() {
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    load(&dc, [1, 2, 3]);
    let (s, v) = run(&dc, 1, vec![KvOp::Scan(2, u64::MAX, 100)], None);
    assert_eq!(rows(&v.items), vec![2, 3]);
    // Partition 0 (even keys) has nothing past 2, partition 1 nothing past 3: both end words.
    for k in [100u64, 101] {
        let (si, vi) = run(&dc, k, vec![KvOp::Write(k, vec![1; 8])], None);
        assert!(matches!(vi.abort, Some(AbortReason::LockConflict { .. })), "{k}: {:?}", vi.abort);
        decide(&dc, &si, &vi, Decision::Abort);
    }
    decide(&dc, &s, &v, Decision::Abort);
    let (_, vi) = run(&dc, 200, vec![KvOp::Write(100, vec![1; 8])], None);
    assert!(vi.is_commit());
}

/// The phantom that gap locks prevent, where a range read and an insert meet in two places:
/// reader R scans keys 10..=30 of partition 0 (node a) and reads key 1 of partition 1 (node
/// b); inserter I inserts key 20 into the range and writes key 1. R's sub-transaction on node
/// a runs first, then I's on both nodes (and I commits), then R's on node b. Serializable
/// only if R sees both of I's writes or neither; without gap locks R commits having read I's
/// key 1 but not its key 20. With them, I's insert on node a conflicts, I aborts, and R reads
/// neither. Returns whether R committed and saw key 1 written while its scan missed key 20.
fn fractured_by_a_phantom(gap_locks: bool) -> bool {
    let dc = TestDc::new(common::topology(1, "64KiB"), false);
    dc.dc.ordered.set_gap_locks(gap_locks);
    load(&dc, [10, 12, 30, 1]);
    let (a, b) = (dc.node_of(10), dc.node_of(1));
    assert_ne!(a, b);
    let reader = vec![KvOp::Scan(10, 30, 100), KvOp::Read(1)];
    let writer = vec![KvOp::Write(20, vec![7; 8]), KvOp::Write(1, vec![7; 8])];
    let (ra, va) = run(&dc, 1, reader.clone(), Some(a));
    assert!(va.is_commit());
    let (ia, via) = run(&dc, 2, writer.clone(), Some(a));
    let (ib, vib) = run(&dc, 2, writer, Some(b));
    let i_commits = via.is_commit() && vib.is_commit();
    let d = if i_commits { Decision::Commit(Cts(cts_of(&via).0.max(cts_of(&vib).0))) } else { Decision::Abort };
    decide(&dc, &ia, &via, d);
    decide(&dc, &ib, &vib, d);
    let (rb, vb) = run(&dc, 1, reader, Some(b));
    let r_commits = va.is_commit() && vb.is_commit();
    let saw_key_1 = vb.items.iter().any(|i| i.row.is_none() && i.values == vec![(0, vec![7; 8])]);
    let saw_key_20 = rows(&va.items).contains(&20);
    let d = if r_commits { Decision::Commit(Cts(cts_of(&va).0.max(cts_of(&vb).0))) } else { Decision::Abort };
    decide(&dc, &ra, &va, d);
    decide(&dc, &rb, &vb, d);
    r_commits && saw_key_1 && !saw_key_20
}

#[test]
fn gap_locks_keep_a_phantom_out_of_a_read_that_spans_two_places() {
    assert!(!fractured_by_a_phantom(true), "with gap locks the insert must conflict");
}

#[test]
fn the_mutant_without_gap_locks_commits_a_fractured_read() {
    assert!(fractured_by_a_phantom(false), "without gap locks the phantom gets in");
}

#[test]
fn a_range_on_a_table_without_an_ordered_index_is_refused() {
    let mut topo = common::topology(1, "64KiB");
    topo.tables[0].ordered = false;
    let dc = TestDc::new(topo, false);
    load(&dc, [1, 2]);
    let s = sub(&dc, 1, kv(&dc, vec![KvOp::Scan(0, 5, 10)]), None);
    let e = dc.executor().execute(&s, 1).unwrap_err().to_string();
    assert!(e.contains("no ordered index"), "{e}");
}
