use super::*;
use crate::procedure::{KvOp, KvProcedure, RangeRead};
use proptest::prelude::*;
use redt_proto::TableId;

const T: TableId = TableId(1);
const CELL: usize = 64;

fn kv(ops: Vec<KvOp>) -> Arc<KvProcedure> {
    Arc::new(KvProcedure::new(T, CELL as u32, ops))
}

/// The view of `accesses` over `store` (cell 0 of each key; a missing key reads zeros).
fn view_of(accesses: &[Access], store: &BTreeMap<u64, Vec<u8>>) -> Vec<Option<Vec<Vec<u8>>>> {
    accesses.iter().map(|a| Some(vec![store.get(&a.key).cloned().unwrap_or_else(|| vec![0; CELL])])).collect()
}

fn apply(accesses: &[Access], writes: &[Write], store: &mut BTreeMap<u64, Vec<u8>>) {
    for w in writes {
        let mut v = w.value.clone();
        v.resize(CELL, 0);
        store.insert(accesses[w.access].key, v);
    }
}

/// Runs `members` one after the other on `store`: what each observed, or the first to abort.
fn one_by_one(
    members: &[Arc<KvProcedure>],
    store: &mut BTreeMap<u64, Vec<u8>>,
) -> Result<Vec<Vec<Option<Vec<u8>>>>, usize> {
    let mut observed = Vec::new();
    for (j, m) in members.iter().enumerate() {
        let values = view_of(m.accesses(), store);
        let view = ReadView::new(&values);
        let writes = m.run(&view).map_err(|_| j)?;
        observed.push(m.observed(&view));
        apply(m.accesses(), &writes, store);
    }
    Ok(observed)
}

fn op() -> impl Strategy<Value = KvOp> {
    let key = 0u64..4;
    prop_oneof![
        key.clone().prop_map(KvOp::Read),
        (key.clone(), -5i64..5).prop_map(|(k, n)| KvOp::Add(k, n)),
        (key.clone(), proptest::collection::vec(1u8..=255, 1..8)).prop_map(|(k, v)| KvOp::Write(k, v)),
        (key.clone(), 0u64..100).prop_map(|(k, n)| KvOp::Append(k, n)),
        key.prop_map(KvOp::Delete),
    ]
}

/// Checks a batch of `members` on `seed` against running them one by one: the members observe,
/// and the batch writes, exactly what running them one after the other does, and the batch
/// aborts where the first member to abort alone would. A batch the members cannot form must
/// be one of a delete and a write of one key (creates differ).
fn same_as_one_by_one(members: &[Arc<KvProcedure>], seed: &BTreeMap<u64, Vec<u8>>) {
    let batch = match BatchProcedure::new(members.iter().map(|m| m.clone() as Arc<dyn Procedure>).collect()) {
        Ok(b) => b,
        Err(e) => {
            assert!(e.contains("unlike a member before it"), "{e}");
            return;
        }
    };
    let mut alone = seed.clone();
    let expected = one_by_one(members, &mut alone);
    let values = view_of(batch.accesses(), seed);
    match (batch.run_members(&ReadView::new(&values)), expected) {
        (Ok(runs), Ok(observed)) => {
            for (j, m) in members.iter().enumerate() {
                assert_eq!(m.observed(&ReadView::new(&runs.views[j])), observed[j], "member {j}");
            }
            let mut batched = seed.clone();
            apply(batch.accesses(), &runs.writes, &mut batched);
            assert_eq!(batched, alone);
            assert_eq!(Procedure::run(&batch, &ReadView::new(&values)).expect("commits"), runs.writes);
        }
        (Err((j, _)), Err(first)) => {
            assert_eq!(j, first);
            let why = Procedure::run(&batch, &ReadView::new(&values)).expect_err("aborts").0;
            assert!(why.starts_with(&format!("batch member {j}: ")), "{why}");
        }
        (got, want) => panic!("batch {got:?}, one by one {want:?}"),
    }
}

proptest! {
    /// Random batches of up to 5 members of up to 3 operations over 4 keys.
    #[test]
    fn a_batch_runs_as_its_members_back_to_back(
        members in proptest::collection::vec(proptest::collection::vec(op(), 1..4), 1..6),
        seed in proptest::collection::btree_map(0u64..4, proptest::collection::vec(any::<u8>(), CELL), 0..4),
    ) {
        let members: Vec<Arc<KvProcedure>> = members.into_iter().map(kv).collect();
        same_as_one_by_one(&members, &seed);
    }
}

/// Every batch of 1 to 3 members of one operation each over 2 keys (read, add, write, append,
/// delete), on an empty store and on one whose key 0 holds a list: 1,110 batches, twice.
#[test]
fn every_small_batch_runs_as_its_members_back_to_back() {
    let ops: Vec<KvOp> = (0..2u64)
        .flat_map(|k| [KvOp::Read(k), KvOp::Add(k, 1), KvOp::Write(k, vec![9]), KvOp::Append(k, 3), KvOp::Delete(k)])
        .collect();
    let mut listed = BTreeMap::new();
    // A list of one item, 42.
    let mut list = vec![crate::procedure::LIST_TAG];
    list.extend(1u32.to_le_bytes());
    list.extend(42u64.to_le_bytes());
    list.resize(CELL, 0);
    assert_eq!(crate::procedure::list_items(&list), vec![42]);
    listed.insert(0, list);
    let mut batches = 0;
    for seed in [BTreeMap::new(), listed] {
        let mut sequences: Vec<Vec<usize>> = vec![vec![]];
        for _ in 0..3 {
            sequences = sequences
                .iter()
                .flat_map(|s| (0..ops.len()).map(move |o| s.iter().copied().chain([o]).collect::<Vec<_>>()))
                .collect();
            for s in &sequences {
                let members: Vec<Arc<KvProcedure>> = s.iter().map(|&o| kv(vec![ops[o].clone()])).collect();
                same_as_one_by_one(&members, &seed);
                batches += 1;
            }
        }
    }
    assert_eq!(batches, 2 * (10 + 100 + 1000));
}

#[test]
fn accesses_to_one_record_merge_and_members_map_onto_them() {
    let b = BatchProcedure::new(vec![
        kv(vec![KvOp::Read(1), KvOp::Add(2, 1)]),
        kv(vec![KvOp::Add(1, 2)]),
        kv(vec![KvOp::Read(3), KvOp::Read(2)]),
    ])
    .expect("a batch");
    let keys: Vec<(u64, u64, u64)> = b.accesses().iter().map(|a| (a.key, a.read, a.write)).collect();
    assert_eq!(keys, vec![(1, 1, 1), (2, 1, 1), (3, 1, 0)]);
    assert_eq!(b.access_map(), &[vec![0, 1], vec![0], vec![2, 1]]);
    assert_eq!(b.members().len(), 3);
}

#[test]
fn a_batch_refuses_what_it_cannot_run_as_its_members_would() {
    assert!(BatchProcedure::new(vec![]).unwrap_err().contains("at least one member"));
    let many: Vec<Arc<dyn Procedure>> = (0..=MAX_MEMBERS as u64).map(|k| kv(vec![KvOp::Read(k)]) as _).collect();
    assert!(BatchProcedure::new(many).unwrap_err().contains("at most 16"));
    // A range read after a member that writes into it would not see the write.
    let scan = || kv(vec![KvOp::Scan(0, 9, 4)]);
    let err = BatchProcedure::new(vec![kv(vec![KvOp::Add(3, 1)]), scan()]).unwrap_err();
    assert!(err.contains("a member before it writes into"), "{err}");
    // Before the write, or after a read, it may: its routing access stays its own.
    let b = BatchProcedure::new(vec![scan(), kv(vec![KvOp::Read(0), KvOp::Add(3, 1)]), scan()]).unwrap_err();
    assert!(b.contains("batch member 2"), "{b}");
    let b = BatchProcedure::new(vec![scan(), kv(vec![KvOp::Read(0), KvOp::Add(12, 1)]), scan()]).expect("a batch");
    let routes: Vec<usize> = b.ranges().iter().map(|r: &RangeRead| r.access).collect();
    assert_eq!(b.accesses().len(), 4, "two routing accesses, keys 0 and 12");
    assert_eq!(routes, vec![0, 3]);
    // A delete creates nothing on a missing key; a write of the same key would create it.
    let err = BatchProcedure::new(vec![kv(vec![KvOp::Delete(1)]), kv(vec![KvOp::Add(1, 1)])]).unwrap_err();
    assert!(err.contains("unlike a member before it"), "{err}");
}

#[test]
fn a_member_writes_over_what_a_member_before_it_wrote_and_the_batch_writes_the_last() {
    let b = BatchProcedure::new(vec![
        kv(vec![KvOp::Write(1, vec![7])]),
        kv(vec![KvOp::Read(1), KvOp::Write(1, vec![9, 9])]),
    ])
    .expect("a batch");
    let values = vec![Some(vec![vec![1u8; CELL]])];
    let runs = b.run_members(&ReadView::new(&values)).expect("commits");
    let mut padded = vec![7u8];
    padded.resize(CELL, 0);
    assert_eq!(runs.views[1], vec![Some(vec![padded])], "the second member reads the first's write, as stored");
    assert_eq!(runs.writes, vec![Write { access: 0, cell: 0, value: vec![9, 9] }]);
    // Not held in this DC: nothing to read, and the writes are still the batch's.
    let runs = b.run_members(&ReadView::new(&[None])).expect("commits");
    assert_eq!(runs.views, vec![vec![None], vec![None]]);
}
