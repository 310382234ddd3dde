//! The coordinator side of chains: whether a new transaction chains on the coordinator's
//! transactions in flight, goes out as usual, or waits for them (docs/design.md, "Localized
//! execution across DCs").

use super::{CellRef, ChainLimits};
use redt_proto::{DcId, Decision, Epoch, NodeId, TxnId};
use std::collections::{BTreeMap, BTreeSet};

/// One cell a transaction's plan touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PlannedAccess {
    /// The cell.
    pub cell: CellRef,
    /// Whether the transaction writes it (else it only reads it).
    pub writes: bool,
}

/// What the coordinator does with a new transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChainPlan {
    /// No transaction of this coordinator in flight touches its cells in a way that conflicts:
    /// send phase 1 as usual. The cells it writes open chains later ones may join.
    Fresh,
    /// Join chains: phase 1 names `after` (per chained cell, its predecessor), goes to
    /// `executors` in the DCs named there (the chains' executors, which hold the pending
    /// versions), and the transaction commits only after `deps` commit.
    Chained {
        /// The predecessor on each chained cell, ascending by cell.
        after: Vec<(CellRef, TxnId)>,
        /// The distinct predecessors, ascending.
        deps: Vec<TxnId>,
        /// The executor each chain uses in each DC: the transaction's phase 1 goes there.
        executors: BTreeMap<DcId, NodeId>,
    },
    /// Hold the transaction until `behind` is finished here (decided, and its phase 2
    /// delivered): it conflicts with it and cannot chain (a chain past its bounds, one broken
    /// by an abort, another epoch, a write of a cell only read in flight, a transaction that
    /// cannot chain, or chains run by different executors of one DC).
    Queue {
        /// The transaction in flight it waits for.
        behind: TxnId,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PlannerChain {
    members: Vec<TxnId>,
    epoch: Epoch,
    opened_ms: u64,
    executors: BTreeMap<DcId, NodeId>,
    /// A member aborted: its successors abort too, and the executors' chains still hold them.
    broken: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct InFlight {
    cells: Vec<CellRef>,
    finished: bool,
}

/// A coordinator's view of its own transactions in flight, per cell: the chains it runs and
/// the cells its transactions read. Pure; the coordinator calls [`ChainPlanner::plan`] before
/// sending a phase 1, [`ChainPlanner::decided`] on each decision and
/// [`ChainPlanner::finished`] once a decided transaction's phase 2 is delivered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ChainPlanner {
    limits: ChainLimits,
    chains: BTreeMap<CellRef, PlannerChain>,
    readers: BTreeMap<CellRef, BTreeSet<TxnId>>,
    txns: BTreeMap<TxnId, InFlight>,
}

impl ChainPlanner {
    /// A planner with nothing in flight, under `limits` (the executors' own, so that what it
    /// plans they admit).
    pub fn new(limits: ChainLimits) -> ChainPlanner {
        ChainPlanner { limits, ..ChainPlanner::default() }
    }

    /// How many transactions are in flight (planned and not finished).
    pub fn in_flight(&self) -> usize {
        self.txns.len()
    }

    /// Plans `txn`, of `epoch`, touching `accesses`, whose executors are `executors` (one per
    /// participant DC), at `now_ms`; `chainable` is false for a transaction that may not join
    /// or open a chain (range reads, inserts). Unless the answer is [`ChainPlan::Queue`], the
    /// transaction is now in flight here.
    pub fn plan(
        &mut self,
        txn: TxnId,
        accesses: &[PlannedAccess],
        epoch: Epoch,
        executors: &BTreeMap<DcId, NodeId>,
        chainable: bool,
        now_ms: u64,
    ) -> ChainPlan {
        let mut after = Vec::new();
        let mut chosen: BTreeMap<DcId, NodeId> = BTreeMap::new();
        for a in accesses {
            if let Some(chain) = self.chains.get(&a.cell) {
                let tail = *chain.members.last().expect("a chain has a member");
                let joinable = chainable
                    && !chain.broken
                    && chain.epoch == epoch
                    && chain.members.len() < self.limits.max_members
                    && now_ms.saturating_sub(chain.opened_ms) <= self.limits.max_hold_ms;
                if !joinable {
                    return ChainPlan::Queue { behind: tail };
                }
                for (&dc, &node) in &chain.executors {
                    if *chosen.entry(dc).or_insert(node) != node {
                        return ChainPlan::Queue { behind: tail };
                    }
                }
                after.push((a.cell, tail));
            } else if let Some(readers) = self.readers.get(&a.cell) {
                if a.writes {
                    return ChainPlan::Queue { behind: *readers.iter().next().expect("non-empty") };
                }
            }
        }
        // Cells it opens chains on run on its own executors unless a chain already picked one.
        let mut used = executors.clone();
        for (&dc, &node) in &chosen {
            used.insert(dc, node);
        }
        let chained: BTreeSet<CellRef> = after.iter().map(|(c, _)| *c).collect();
        let mut cells = Vec::new();
        for a in accesses {
            cells.push(a.cell);
            if chained.contains(&a.cell) {
                self.chains.get_mut(&a.cell).expect("chained").members.push(txn);
            } else if a.writes && chainable {
                self.chains.insert(
                    a.cell,
                    PlannerChain {
                        members: vec![txn],
                        epoch,
                        opened_ms: now_ms,
                        executors: used.clone(),
                        broken: false,
                    },
                );
            } else {
                self.readers.entry(a.cell).or_default().insert(txn);
            }
        }
        self.txns.insert(txn, InFlight { cells, finished: false });
        after.sort();
        let deps: BTreeSet<TxnId> = after.iter().map(|(_, t)| *t).collect();
        if after.is_empty() {
            ChainPlan::Fresh
        } else {
            ChainPlan::Chained { after, deps: deps.into_iter().collect(), executors: chosen }
        }
    }

    /// Notes `txn`'s decision: an abort breaks its chains (no transaction joins them again
    /// until they are finished).
    pub fn decided(&mut self, txn: TxnId, decision: Decision) {
        if decision != Decision::Abort {
            return;
        }
        let Some(t) = self.txns.get(&txn) else { return };
        for c in &t.cells {
            if let Some(chain) = self.chains.get_mut(c) {
                if chain.members.contains(&txn) {
                    chain.broken = true;
                }
            }
        }
    }

    /// Notes that `txn` is decided and its phase 2 delivered everywhere. A chain is forgotten
    /// once every member is finished, a cell's readers as each finishes.
    pub fn finished(&mut self, txn: TxnId) {
        let Some(t) = self.txns.get_mut(&txn) else { return };
        t.finished = true;
        for c in t.cells.clone() {
            if let Some(readers) = self.readers.get_mut(&c) {
                readers.remove(&txn);
                if readers.is_empty() {
                    self.readers.remove(&c);
                }
            }
            let done = self
                .chains
                .get(&c)
                .is_some_and(|chain| chain.members.iter().all(|m| self.txns.get(m).is_none_or(|t| t.finished)));
            if done {
                let chain = self.chains.remove(&c).expect("present");
                for m in chain.members {
                    self.forget_if_done(m);
                }
            }
        }
        self.forget_if_done(txn);
    }

    fn forget_if_done(&mut self, txn: TxnId) {
        let Some(t) = self.txns.get(&txn) else { return };
        if t.finished && t.cells.iter().all(|c| !self.chains.get(c).is_some_and(|ch| ch.members.contains(&txn))) {
            self.txns.remove(&txn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_proto::{Cts, TableId};

    fn cell(k: u64) -> CellRef {
        CellRef { table: TableId(1), key: k, cell: 0 }
    }

    fn exec() -> BTreeMap<DcId, NodeId> {
        [(DcId(0), NodeId(0)), (DcId(1), NodeId(3))].into_iter().collect()
    }

    fn w(k: u64) -> PlannedAccess {
        PlannedAccess { cell: cell(k), writes: true }
    }

    fn r(k: u64) -> PlannedAccess {
        PlannedAccess { cell: cell(k), writes: false }
    }

    #[test]
    fn writers_of_one_cell_chain_in_order_and_the_chain_ends_when_all_finish() {
        let mut p = ChainPlanner::new(ChainLimits::default());
        let e = Epoch(1);
        assert_eq!(p.plan(TxnId(1), &[w(7)], e, &exec(), true, 0), ChainPlan::Fresh);
        let ChainPlan::Chained { after, deps, executors } = p.plan(TxnId(2), &[w(7), w(8)], e, &exec(), true, 1) else {
            panic!("expected a chain")
        };
        assert_eq!(after, vec![(cell(7), TxnId(1))]);
        assert_eq!(deps, vec![TxnId(1)]);
        assert_eq!(executors, exec());
        // Cell 8 was opened by 2: a reader of 7 and 8 chains on 2 for both.
        let ChainPlan::Chained { after, deps, .. } = p.plan(TxnId(3), &[r(7), r(8)], e, &exec(), true, 2) else {
            panic!("expected a chain")
        };
        assert_eq!(after, vec![(cell(7), TxnId(2)), (cell(8), TxnId(2))]);
        assert_eq!(deps, vec![TxnId(2)]);
        p.decided(TxnId(1), Decision::Commit(Cts(10)));
        p.finished(TxnId(1));
        assert_eq!(p.in_flight(), 3, "a finished member stays while its chain lives");
        for t in [2, 3] {
            p.decided(TxnId(t), Decision::Commit(Cts(10 + t)));
            p.finished(TxnId(t));
        }
        assert_eq!(p.in_flight(), 0);
        assert_eq!(p.plan(TxnId(4), &[w(7)], e, &exec(), true, 3), ChainPlan::Fresh);
    }

    #[test]
    fn a_chain_past_its_bounds_an_abort_or_an_epoch_queues_the_next() {
        let limits = ChainLimits { max_members: 2, max_hold_ms: 50 };
        let e = Epoch(1);
        let mut p = ChainPlanner::new(limits);
        p.plan(TxnId(1), &[w(7)], e, &exec(), true, 0);
        assert!(matches!(p.plan(TxnId(2), &[w(7)], e, &exec(), true, 10), ChainPlan::Chained { .. }));
        assert_eq!(p.plan(TxnId(3), &[w(7)], e, &exec(), true, 10), ChainPlan::Queue { behind: TxnId(2) });

        let mut p = ChainPlanner::new(limits);
        p.plan(TxnId(1), &[w(7)], e, &exec(), true, 0);
        assert_eq!(p.plan(TxnId(2), &[w(7)], e, &exec(), true, 51), ChainPlan::Queue { behind: TxnId(1) });
        assert_eq!(p.plan(TxnId(2), &[w(7)], Epoch(2), &exec(), true, 1), ChainPlan::Queue { behind: TxnId(1) });
        assert_eq!(p.plan(TxnId(2), &[w(7)], e, &exec(), false, 1), ChainPlan::Queue { behind: TxnId(1) });
        p.decided(TxnId(1), Decision::Abort);
        assert_eq!(p.plan(TxnId(2), &[w(7)], e, &exec(), true, 1), ChainPlan::Queue { behind: TxnId(1) });
        p.finished(TxnId(1));
        assert_eq!(p.plan(TxnId(2), &[w(7)], e, &exec(), true, 1), ChainPlan::Fresh);
    }

    #[test]
    fn a_write_of_a_cell_read_in_flight_queues_and_readers_share() {
        let e = Epoch(1);
        let mut p = ChainPlanner::new(ChainLimits::default());
        assert_eq!(p.plan(TxnId(1), &[r(7)], e, &exec(), true, 0), ChainPlan::Fresh);
        assert_eq!(p.plan(TxnId(2), &[r(7)], e, &exec(), true, 0), ChainPlan::Fresh);
        assert_eq!(p.plan(TxnId(3), &[w(7)], e, &exec(), true, 0), ChainPlan::Queue { behind: TxnId(1) });
        p.finished(TxnId(1));
        p.finished(TxnId(2));
        assert_eq!(p.plan(TxnId(3), &[w(7)], e, &exec(), true, 0), ChainPlan::Fresh);
    }

    #[test]
    fn chains_run_by_different_executors_of_one_dc_queue() {
        let e = Epoch(1);
        let mut p = ChainPlanner::new(ChainLimits::default());
        p.plan(TxnId(1), &[w(7)], e, &exec(), true, 0);
        let other: BTreeMap<DcId, NodeId> = [(DcId(0), NodeId(0)), (DcId(1), NodeId(4))].into_iter().collect();
        p.plan(TxnId(2), &[w(8)], e, &other, true, 0);
        assert_eq!(p.plan(TxnId(3), &[w(7), w(8)], e, &exec(), true, 0), ChainPlan::Queue { behind: TxnId(2) });
    }
}
