use super::*;
use crate::message::DecideRole;
use proptest::prelude::*;
use redt_proto::{Ballot, Cts, Decision};

const T: TableId = TableId(1);

/// A footprint of `(key, read cells, written cells)` on table `T`.
fn fp(records: &[(u64, u64, u64)]) -> Footprint {
    Footprint { records: records.iter().map(|&(k, r, w)| ((T, k), r, w)).collect(), ranges: Vec::new() }
}

fn decide(txn: TxnId, cts: u64) -> Decide {
    Decide {
        txn,
        ballot: Ballot(0),
        decision: Decision::Commit(Cts(cts)),
        entries: Vec::new(),
        role: DecideRole::Executor,
        catch_up: Vec::new(),
    }
}

fn phase2(txn: TxnId, dcs: &[u16]) -> BTreeMap<DcId, Decide> {
    dcs.iter().map(|&d| (DcId(d), decide(txn, 100 + txn.0))).collect()
}

fn carried(a: &Admission) -> Vec<(u16, u64)> {
    match a {
        Admission::Go { carried, .. } => carried.iter().flat_map(|(dc, v)| v.iter().map(|d| (dc.0, d.txn.0))).collect(),
        Admission::Wait { .. } => panic!("expected Go, got {a:?}"),
    }
}

#[test]
fn a_writer_waits_for_an_undecided_writer_then_carries_its_phase_2() {
    let mut q = Takeover::new();
    assert_eq!(carried(&q.admit(TxnId(1), fp(&[(7, 0, 0b1)]))), vec![]);
    assert_eq!(q.admit(TxnId(2), fp(&[(7, 0, 0b1)])), Admission::Wait { behind: TxnId(1) });
    assert_eq!(q.decided(TxnId(1), phase2(TxnId(1), &[0, 2])), vec![TxnId(2)]);
    assert_eq!(carried(&q.admit(TxnId(2), fp(&[(7, 0, 0b1)]))), vec![(0, 1), (2, 1)]);
    // Once 1's phase 2 is delivered a third writer carries only 2's decision, after 2's.
    assert!(q.finished(TxnId(1)).is_empty());
    assert_eq!(q.admit(TxnId(3), fp(&[(7, 0, 0b1)])), Admission::Wait { behind: TxnId(2) });
    q.decided(TxnId(2), phase2(TxnId(2), &[0]));
    assert_eq!(carried(&q.admit(TxnId(3), fp(&[(7, 0, 0b1)]))), vec![(0, 2)]);
}

fn committed(a: &Admission) -> Vec<u64> {
    match a {
        Admission::Go { committed, .. } => committed.iter().map(|t| t.0).collect(),
        Admission::Wait { .. } => panic!("expected Go, got {a:?}"),
    }
}

#[test]
fn a_transaction_learns_the_conflicting_commits_it_runs_after_oldest_decision_first() {
    let mut q = Takeover::new();
    q.admit(TxnId(1), fp(&[(7, 0, 0b1)]));
    q.admit(TxnId(2), fp(&[(8, 0, 0b1)]));
    q.admit(TxnId(3), fp(&[(9, 0, 0b1)]));
    q.decided(TxnId(2), phase2(TxnId(2), &[0]));
    q.decided(TxnId(1), phase2(TxnId(1), &[0]));
    let mut aborted = phase2(TxnId(3), &[0]);
    aborted.get_mut(&DcId(0)).expect("one DC").decision = Decision::Abort;
    q.decided(TxnId(3), aborted);
    // 3 aborted: its phase 2 is carried, but its writes are not in the state 4 runs on.
    let go = q.admit(TxnId(4), fp(&[(7, 0, 0b1), (8, 0, 0b1), (9, 0, 0b1)]));
    assert_eq!(committed(&go), vec![2, 1]);
    assert_eq!(carried(&go), vec![(0, 2), (0, 1), (0, 3)]);
    // Once a commit's phase 2 is delivered it is the state itself: nothing to learn.
    q.finished(TxnId(2));
    let mut aborted = phase2(TxnId(4), &[0]);
    aborted.get_mut(&DcId(0)).expect("one DC").decision = Decision::Abort;
    q.decided(TxnId(4), aborted);
    assert_eq!(committed(&q.admit(TxnId(5), fp(&[(8, 0b1, 0)]))), Vec::<u64>::new());
}

#[test]
fn conflicts_are_by_cell_as_locks_are() {
    let mut q = Takeover::new();
    q.admit(TxnId(1), fp(&[(7, 0b10, 0b1)]));
    // Another cell of the record, read or written: no conflict.
    assert_eq!(carried(&q.admit(TxnId(2), fp(&[(7, 0b100, 0b1000)]))), vec![]);
    // Reading the cell 1 writes, or writing the cell 1 reads: a conflict.
    assert_eq!(q.admit(TxnId(3), fp(&[(7, 0b1, 0)])), Admission::Wait { behind: TxnId(1) });
    assert_eq!(q.admit(TxnId(4), fp(&[(7, 0, 0b10)])), Admission::Wait { behind: TxnId(1) });
    // Two readers of one cell share it.
    let mut q = Takeover::new();
    q.admit(TxnId(1), fp(&[(7, 0b1, 0b10)]));
    assert_eq!(carried(&q.admit(TxnId(2), fp(&[(7, 0b1, 0b100)]))), vec![]);
}

#[test]
fn a_range_read_conflicts_with_writes_of_keys_in_its_range() {
    let mut q = Takeover::new();
    q.admit(TxnId(1), fp(&[(15, 0, 0b1)]));
    let scan = |lo, hi| Footprint { records: vec![((T, lo), 0b1, 0b10)], ranges: vec![(T, lo, hi)] };
    assert_eq!(carried(&q.admit(TxnId(2), scan(20, 30))), vec![]);
    assert_eq!(q.admit(TxnId(3), scan(10, 19)), Admission::Wait { behind: TxnId(1) });
    // And a later writer into a tracked range waits for the scan.
    assert_eq!(q.admit(TxnId(4), fp(&[(25, 0, 0b1)])), Admission::Wait { behind: TxnId(2) });
    // Another table's key 25 does not.
    let other = Footprint { records: vec![((TableId(2), 25), 0, 0b1)], ranges: Vec::new() };
    assert_eq!(carried(&q.admit(TxnId(5), other)), vec![]);
}

#[test]
fn read_only_transactions_never_wait_behind_readers_and_are_not_tracked() {
    let mut q = Takeover::new();
    assert_eq!(carried(&q.admit(TxnId(1), fp(&[(7, 0b1, 0)]))), vec![]);
    assert_eq!(q.tracked(), 0);
    assert_eq!(carried(&q.admit(TxnId(2), fp(&[(7, 0, 0b1)]))), vec![]);
    // A reader meeting an undecided writer waits like any conflicting transaction.
    assert_eq!(q.admit(TxnId(3), fp(&[(7, 0b1, 0)])), Admission::Wait { behind: TxnId(2) });
}

#[test]
fn at_most_max_carried_phase_2s_ride_on_one_phase_1_the_newest() {
    let mut q = Takeover::new();
    let n = Takeover::MAX_CARRIED as u64 + 3;
    for t in 1..=n {
        // Each on its own cell of record 7, all decided.
        assert_eq!(carried(&q.admit(TxnId(t), fp(&[(7, 0, 1 << t)]))), vec![]);
        q.decided(TxnId(t), phase2(TxnId(t), &[1]));
    }
    let all = (1..=n).fold(0u64, |m, t| m | 1 << t);
    let got = carried(&q.admit(TxnId(100), fp(&[(7, 0, all)])));
    let want: Vec<(u16, u64)> = (4..=n).map(|t| (1, t)).collect();
    assert_eq!(got, want);
}

#[test]
fn finished_forgets_and_wakes_waiters() {
    let mut q = Takeover::new();
    q.admit(TxnId(1), fp(&[(7, 0, 1)]));
    assert_eq!(q.admit(TxnId(2), fp(&[(7, 0, 1)])), Admission::Wait { behind: TxnId(1) });
    assert_eq!(q.finished(TxnId(1)), vec![TxnId(2)]);
    assert_eq!(q.tracked(), 0);
    assert_eq!(carried(&q.admit(TxnId(2), fp(&[(7, 0, 1)]))), vec![]);
}

#[derive(Clone, Debug)]
enum Op {
    Admit(Vec<(u64, u64, u64)>),
    Decide(usize),
    Finish(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let rec = (0u64..3, 0u64..4, 0u64..4);
    prop_oneof![
        prop::collection::vec(rec, 1..3).prop_map(Op::Admit),
        (0usize..8).prop_map(Op::Decide),
        (0usize..8).prop_map(Op::Finish),
    ]
}

proptest! {
    /// Against a model that keeps every transaction sent and not finished: a transaction is
    /// sent only when no conflicting one is undecided, and it carries exactly the phase 2s of
    /// the decided conflicting ones (up to the bound); one that waits names an undecided
    /// conflicting one.
    #[test]
    fn admission_matches_the_model(ops in prop::collection::vec(op(), 1..60)) {
        let mut q = Takeover::new();
        // The model: sent, unfinished transactions with their footprint and decided flag.
        let mut sent: Vec<(TxnId, Footprint, bool)> = Vec::new();
        let mut next = 1u64;
        for op in ops {
            match op {
                Op::Admit(recs) => {
                    let txn = TxnId(next);
                    next += 1;
                    let f = fp(&recs);
                    let conflicting: Vec<&(TxnId, Footprint, bool)> =
                        sent.iter().filter(|(_, o, _)| o.conflicts(&f) && !o.read_only()).collect();
                    match q.admit(txn, f.clone()) {
                        Admission::Wait { behind } => {
                            prop_assert!(conflicting.iter().any(|(t, _, d)| *t == behind && !d));
                        }
                        Admission::Go { carried, .. } => {
                            prop_assert!(conflicting.iter().all(|(_, _, d)| *d));
                            let mut want: Vec<u64> = conflicting.iter().map(|(t, _, _)| t.0).collect();
                            want.sort_unstable();
                            let mut got: Vec<u64> = carried.get(&DcId(0)).into_iter().flatten().map(|d| d.txn.0).collect();
                            got.sort_unstable();
                            prop_assert!(got.len() <= Takeover::MAX_CARRIED);
                            prop_assert_eq!(got, want);
                            if !f.read_only() {
                                sent.push((txn, f, false));
                            }
                        }
                    }
                }
                Op::Decide(i) if !sent.is_empty() => {
                    let i = i % sent.len();
                    if !sent[i].2 {
                        sent[i].2 = true;
                        q.decided(sent[i].0, phase2(sent[i].0, &[0]));
                    }
                }
                Op::Finish(i) if !sent.is_empty() => {
                    let i = i % sent.len();
                    let (t, _, _) = sent.remove(i);
                    q.finished(t);
                }
                _ => {}
            }
        }
    }
}

#[test]
fn a_batch_takes_the_held_transactions_that_conflict_with_it_and_nothing_else_holds_back() {
    let mut q = Takeover::new();
    // 9 is undecided on key 30.
    q.admit(TxnId(9), fp(&[(30, 0, 0b1)]));
    let leader = fp(&[(7, 0, 0b1)]);
    let conflicting = fp(&[(7, 0b1, 0b1), (20, 0, 0b1)]);
    let unrelated = fp(&[(8, 0, 0b1)]);
    let held_back = fp(&[(7, 0, 0b1), (30, 0b1, 0)]);
    let through_a_member = fp(&[(20, 0b1, 0)]);
    let held = [&conflicting, &unrelated, &held_back, &through_a_member];
    assert_eq!(q.blocker(&leader), None);
    assert_eq!(q.blocker(&held_back), Some(TxnId(9)));
    let (members, union) = q.batch(&leader, &held, 16);
    assert_eq!(members, vec![0, 3]);
    let mut want = leader.clone();
    want.merge(&conflicting);
    want.merge(&through_a_member);
    assert_eq!(union, want);
    // A held transaction reading a range the batch writes into stays held (its rows are read
    // before the batch's writes); one reading a range the batch does not write into joins.
    let ranged = |lo, hi| Footprint { records: vec![((T, 7), 0b1, 0)], ranges: vec![(T, lo, hi)] };
    let (into, clear) = (ranged(15, 25), ranged(21, 25));
    assert_eq!(q.batch(&leader, &[&conflicting, &into, &clear], 16).0, vec![0, 2]);
    // The bound counts the leader.
    assert_eq!(q.batch(&leader, &held, 2).0, vec![0]);
    assert_eq!(q.batch(&leader, &held, 1).0, Vec::<usize>::new());
}

#[test]
fn a_batch_forms_only_when_its_leader_may_go() {
    let mut q = Takeover::new();
    q.admit(TxnId(1), fp(&[(7, 0, 0b1)]));
    let held = fp(&[(7, 0b1, 0b1)]);
    // 1 is undecided: the leader waits, and no batch forms.
    let (a, members) = q.admit_batch(TxnId(2), fp(&[(7, 0, 0b1)]), &[&held], 16);
    assert_eq!(a, Admission::Wait { behind: TxnId(1) });
    assert!(members.is_empty());
    q.decided(TxnId(1), phase2(TxnId(1), &[0]));
    // Below 2, no batch either.
    let (a, members) = q.admit_batch(TxnId(3), fp(&[(9, 0, 0b1)]), &[&fp(&[(9, 0b1, 0)])], 1);
    assert!(matches!(a, Admission::Go { .. }) && members.is_empty());
    // Decided: it goes with the held one, and the batch's footprint is tracked under its id.
    let (a, members) = q.admit_batch(TxnId(2), fp(&[(7, 0, 0b1)]), &[&held], 16);
    assert_eq!(carried(&a), vec![(0, 1)]);
    assert_eq!(members, vec![0]);
    assert_eq!(q.blocker(&fp(&[(7, 0b1, 0)])), Some(TxnId(2)));
}
