//! The executor side of chains: which phase 1 may join which chain, and what a decision
//! drains (docs/design.md, "Localized execution across DCs").

use super::{CellRef, ChainLimits, ChainMutations, ReadVersion};
use redt_dc_executor::CellVersion;
use redt_proto::{Cts, Decision, Epoch, NodeId, TxnId};
use std::collections::BTreeMap;

/// A phase 1 that names a predecessor on a cell, as [`Chains::admit`] judges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Joiner {
    /// The joining transaction.
    pub txn: TxnId,
    /// Its coordinator.
    pub coordinator: NodeId,
    /// The placement epoch it was planned in.
    pub epoch: Epoch,
    /// The predecessor its phase 1 names on this cell; `None` for a transaction that names
    /// none (it would head a chain).
    pub after: Option<TxnId>,
    /// Whether this executor knows `after` decided (its decision applied here): then its chain
    /// has drained, and the cell holds what it left. Irrelevant when `after` is `None`.
    pub after_decided_here: bool,
    /// The executor's clock, in ms.
    pub now_ms: u64,
}

/// A chain's first member: a phase 1 that took the cell's lock itself and may be chained on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainHead {
    /// The transaction.
    pub txn: TxnId,
    /// Its coordinator.
    pub coordinator: NodeId,
    /// The placement epoch it was planned in.
    pub epoch: Epoch,
    /// The executor's clock when it took the lock, in ms.
    pub now_ms: u64,
    /// The cell's committed value and version when the lock was taken.
    pub base: (Vec<u8>, CellVersion),
}

/// Why a phase 1 may not join a chain; it votes abort, and never takes the lock itself
/// instead (that could order it before its predecessor in this DC only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// Neither a chain ending in the named predecessor nor its decision is here: the
    /// predecessor's phase 1 has not arrived, or it voted abort here.
    PredecessorNotHere,
    /// The cell's chain ends in another member than the named predecessor.
    NotTail,
    /// The cell's chain is another coordinator's.
    OtherCoordinator,
    /// The cell's chain was started in another placement epoch.
    OtherEpoch,
    /// The chain has [`ChainLimits::max_members`] members.
    Full,
    /// The chain's head took its lock more than [`ChainLimits::max_hold_ms`] ago.
    TooOld,
    /// The named predecessor is decided abort here, its chain not yet drained.
    PredecessorAborted,
}

/// What a phase 1 that names a predecessor on a cell does there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// The cell has no chain, and the phase 1 names no predecessor or its predecessor is
    /// decided here: lock and read it as any phase 1 does (and open a chain on it).
    Lock,
    /// Join the chain: read `value`, and report `read` in the vote.
    Join {
        /// The value of the newest writer in the chain (the head's base if none wrote).
        value: Vec<u8>,
        /// The read as the vote reports it.
        read: ReadVersion,
    },
    /// Vote abort.
    Refuse(Refusal),
}

/// A chain that a decision drained: every member is decided here. The caller writes back
/// `write_back` (if any member committed a write) and releases the cell's lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drained {
    /// The cell.
    pub cell: CellRef,
    /// The newest committed member's value and version (last writer wins), or `None` when
    /// no member committed a write.
    pub write_back: Option<(Vec<u8>, CellVersion)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum State {
    Undecided,
    Committed(Cts),
    Aborted,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Member {
    txn: TxnId,
    /// The value it writes, if it writes the cell.
    write: Option<Vec<u8>>,
    state: State,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Chain {
    coordinator: NodeId,
    epoch: Epoch,
    opened_ms: u64,
    base: (Vec<u8>, CellVersion),
    members: Vec<Member>,
}

impl Chain {
    /// The value and version a member placed after `after` reads: the newest writer's value
    /// up to and including `after` (the whole chain if `after` is not a member) with its update
    /// counter once applied, else the base's (also for `after = None`).
    fn read_after(&self, after: Option<TxnId>) -> (Vec<u8>, ReadVersion) {
        let base_counter = self.base.1.update_counter();
        let upto = match after {
            None => 0,
            Some(a) => self.members.iter().position(|m| m.txn == a).map_or(self.members.len(), |i| i + 1),
        };
        let mut writers = 0u16;
        let mut newest = None;
        for m in &self.members[..upto] {
            if let Some(w) = &m.write {
                writers = writers.wrapping_add(1);
                newest = Some((w, m.txn));
            }
        }
        match newest {
            Some((value, creator)) => {
                (value.clone(), ReadVersion::Pending { creator, update_counter: base_counter.wrapping_add(writers) })
            }
            None => (self.base.0.clone(), ReadVersion::Committed(self.base.1)),
        }
    }

    /// The value and version the committed members leave: each committed writer advances the
    /// version from the base, at its own commit timestamp.
    fn committed_write(&self) -> Option<(Vec<u8>, CellVersion)> {
        let mut version = self.base.1;
        let mut out = None;
        for m in &self.members {
            if let (Some(w), State::Committed(cts)) = (&m.write, m.state) {
                version = version.next(cts);
                out = Some((w.clone(), version));
            }
        }
        out
    }
}

/// The chains of one executor: per hot cell it holds locked for chained transactions, the
/// members in their coordinator's order. Pure: the caller takes and releases the cells' locks,
/// reads and writes the cells, and applies what [`Chains::decide`] drains.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Chains {
    limits: ChainLimits,
    mutations: ChainMutations,
    cells: BTreeMap<CellRef, Chain>,
    /// Every member's cells.
    members: BTreeMap<TxnId, Vec<CellRef>>,
}

impl Chains {
    /// No chains, under `limits`.
    pub fn new(limits: ChainLimits) -> Chains {
        Chains { limits, ..Chains::default() }
    }

    /// Turns on deliberate bugs (tests only).
    pub fn with_mutations(mut self, mutations: ChainMutations) -> Chains {
        self.mutations = mutations;
        self
    }

    /// Whether `cell` has a chain (its lock is the chain's).
    pub fn is_chained(&self, cell: &CellRef) -> bool {
        self.cells.contains_key(cell)
    }

    /// How many chains are open.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// Whether no chain is open.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Whether `j` may join the chain on `cell`. The rule (docs/design.md, "Localized
    /// execution across DCs"): join iff the cell's chain is `j`'s coordinator's, of its epoch,
    /// within the bounds, and ends in the predecessor `j` names; lock the cell afresh iff it
    /// has no chain and the predecessor is decided here; refuse otherwise.
    pub fn admit(&self, cell: &CellRef, j: &Joiner) -> Admission {
        let Some(chain) = self.cells.get(cell) else {
            if j.after.is_none() || j.after_decided_here || mutant!(self.mutations.order_by_arrival) {
                return Admission::Lock;
            }
            return Admission::Refuse(Refusal::PredecessorNotHere);
        };
        if chain.coordinator != j.coordinator {
            return Admission::Refuse(Refusal::OtherCoordinator);
        }
        if chain.epoch != j.epoch {
            return Admission::Refuse(Refusal::OtherEpoch);
        }
        let tail = chain.members.last().expect("a chain has a member");
        if Some(tail.txn) != j.after && !mutant!(self.mutations.order_by_arrival) {
            return Admission::Refuse(Refusal::NotTail);
        }
        if tail.state == State::Aborted {
            return Admission::Refuse(Refusal::PredecessorAborted);
        }
        if chain.members.len() >= self.limits.max_members {
            return Admission::Refuse(Refusal::Full);
        }
        if j.now_ms.saturating_sub(chain.opened_ms) > self.limits.max_hold_ms {
            return Admission::Refuse(Refusal::TooOld);
        }
        // The value is the tail's; the read reported is the one after the named predecessor,
        // the same unless the tail check above was skipped.
        let (value, _) = chain.read_after(Some(tail.txn));
        let (_, read) = chain.read_after(j.after);
        Admission::Join { value, read }
    }

    /// Opens a chain on `cell` with `head`, which took the cell's lock itself; `write` is
    /// the value it writes there, if it writes the cell. A cell already chained is left as
    /// it is (its lock was not free, so no head can have taken it).
    pub fn open(&mut self, cell: CellRef, head: ChainHead, write: Option<Vec<u8>>) {
        if self.cells.contains_key(&cell) {
            return;
        }
        self.members.entry(head.txn).or_default().push(cell);
        self.cells.insert(
            cell,
            Chain {
                coordinator: head.coordinator,
                epoch: head.epoch,
                opened_ms: head.now_ms,
                base: head.base,
                members: vec![Member { txn: head.txn, write, state: State::Undecided }],
            },
        );
    }

    /// Appends `txn` to the chain on `cell`, after [`Chains::admit`] answered
    /// [`Admission::Join`]; `write` is the value it writes there, if any. Nothing happens on a
    /// cell without a chain.
    pub fn join(&mut self, cell: CellRef, txn: TxnId, write: Option<Vec<u8>>) {
        let Some(chain) = self.cells.get_mut(&cell) else { return };
        chain.members.push(Member { txn, write, state: State::Undecided });
        self.members.entry(txn).or_default().push(cell);
    }

    /// Applies `txn`'s decision to its chains and returns the chains it drained: those whose
    /// every member is now decided. A transaction in no chain drains nothing; a repeated
    /// decision is a no-op.
    pub fn decide(&mut self, txn: TxnId, decision: Decision) -> Vec<Drained> {
        let Some(cells) = self.members.get(&txn).cloned() else { return Vec::new() };
        let state = match decision {
            Decision::Commit(cts) => State::Committed(cts),
            Decision::Abort => State::Aborted,
        };
        let mut drained = Vec::new();
        for cell in cells {
            let Some(chain) = self.cells.get_mut(&cell) else { continue };
            for m in chain.members.iter_mut().filter(|m| m.txn == txn && m.state == State::Undecided) {
                m.state = state;
            }
            let early = mutant!(self.mutations.release_before_last_writer) && matches!(state, State::Committed(_));
            if early || chain.members.iter().all(|m| m.state != State::Undecided) {
                let chain = self.cells.remove(&cell).expect("present");
                for m in &chain.members {
                    if let Some(cs) = self.members.get_mut(&m.txn) {
                        cs.retain(|c| *c != cell);
                        if cs.is_empty() {
                            self.members.remove(&m.txn);
                        }
                    }
                }
                drained.push(Drained { cell, write_back: chain.committed_write() });
            }
        }
        drained
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_proto::TableId;

    const CELL: CellRef = CellRef { table: TableId(1), key: 7, cell: 0 };
    const A: NodeId = NodeId(0);

    fn head(txn: u64, now_ms: u64) -> ChainHead {
        ChainHead {
            txn: TxnId(txn),
            coordinator: A,
            epoch: Epoch(1),
            now_ms,
            base: (vec![1], CellVersion::new(3, Cts(5))),
        }
    }

    fn joiner(txn: u64, after: Option<u64>, now_ms: u64) -> Joiner {
        Joiner {
            txn: TxnId(txn),
            coordinator: A,
            epoch: Epoch(1),
            after: after.map(TxnId),
            after_decided_here: false,
            now_ms,
        }
    }

    fn limits() -> ChainLimits {
        ChainLimits { max_members: 3, max_hold_ms: 100 }
    }

    #[test]
    fn a_member_joins_only_behind_the_named_tail_of_its_coordinator_and_epoch() {
        let mut c = Chains::new(limits());
        assert_eq!(c.admit(&CELL, &joiner(2, Some(1), 0)), Admission::Refuse(Refusal::PredecessorNotHere));
        assert_eq!(
            c.admit(&CELL, &Joiner { after_decided_here: true, ..joiner(2, Some(1), 0) }),
            Admission::Lock,
            "a decided predecessor's chain has drained"
        );
        assert_eq!(c.admit(&CELL, &joiner(1, None, 0)), Admission::Lock);
        c.open(CELL, head(1, 0), Some(vec![2]));
        let pending = |creator, update_counter| ReadVersion::Pending { creator: TxnId(creator), update_counter };
        assert_eq!(c.admit(&CELL, &joiner(2, Some(1), 10)), Admission::Join { value: vec![2], read: pending(1, 4) });
        assert_eq!(c.admit(&CELL, &joiner(2, None, 10)), Admission::Refuse(Refusal::NotTail));
        assert_eq!(c.admit(&CELL, &joiner(2, Some(9), 10)), Admission::Refuse(Refusal::NotTail));
        assert_eq!(
            c.admit(&CELL, &Joiner { coordinator: NodeId(4), ..joiner(2, Some(1), 10) }),
            Admission::Refuse(Refusal::OtherCoordinator)
        );
        assert_eq!(
            c.admit(&CELL, &Joiner { epoch: Epoch(2), ..joiner(2, Some(1), 10) }),
            Admission::Refuse(Refusal::OtherEpoch)
        );
        assert_eq!(c.admit(&CELL, &joiner(2, Some(1), 101)), Admission::Refuse(Refusal::TooOld));
        // A reader joins and writes nothing: the next member still reads the head's write.
        c.join(CELL, TxnId(2), None);
        assert_eq!(c.admit(&CELL, &joiner(3, Some(2), 10)), Admission::Join { value: vec![2], read: pending(1, 4) });
        c.join(CELL, TxnId(3), Some(vec![3]));
        assert_eq!(c.admit(&CELL, &joiner(4, Some(3), 10)), Admission::Refuse(Refusal::Full));
    }

    #[test]
    fn a_chain_drains_when_its_last_member_is_decided_and_writes_back_the_last_committed_writer() {
        let mut c = Chains::new(limits());
        c.open(CELL, head(1, 0), Some(vec![2]));
        c.join(CELL, TxnId(2), Some(vec![3]));
        c.join(CELL, TxnId(3), Some(vec![4]));
        assert_eq!(c.decide(TxnId(1), Decision::Commit(Cts(20))), vec![]);
        assert_eq!(c.admit(&CELL, &joiner(4, Some(3), 0)), Admission::Refuse(Refusal::Full));
        assert_eq!(c.decide(TxnId(3), Decision::Abort), vec![], "2 is undecided");
        assert_eq!(c.decide(TxnId(3), Decision::Abort), vec![], "a repeated decision is a no-op");
        let drained = c.decide(TxnId(2), Decision::Commit(Cts(22)));
        let v = CellVersion::new(3, Cts(5)).next(Cts(20)).next(Cts(22));
        assert_eq!(drained, vec![Drained { cell: CELL, write_back: Some((vec![3], v)) }]);
        assert!(c.is_empty());
        assert_eq!(c.decide(TxnId(2), Decision::Commit(Cts(22))), vec![]);
    }

    #[test]
    fn an_aborted_tail_is_no_predecessor_and_an_all_aborted_chain_writes_nothing_back() {
        let mut c = Chains::new(limits());
        c.open(CELL, head(1, 0), Some(vec![2]));
        c.join(CELL, TxnId(2), Some(vec![3]));
        assert_eq!(c.decide(TxnId(2), Decision::Abort), vec![]);
        assert_eq!(c.admit(&CELL, &joiner(3, Some(2), 0)), Admission::Refuse(Refusal::PredecessorAborted));
        assert_eq!(c.decide(TxnId(1), Decision::Abort), vec![Drained { cell: CELL, write_back: None }]);
    }
}
