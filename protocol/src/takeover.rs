//! Decided-holder takeover: a coordinator never sends a phase 1 that would meet the lock of
//! one of its own transactions still in flight; it holds the new transaction until that one
//! is decided, then sends the phase 1 carrying the decision (docs/design.md, "Decided-holder
//! takeover").
//!
//! Under No-Wait a transaction that meets a lock aborts, and under a WAN the lock is held from
//! phase 1 until phase 2 reaches the executor, about one and a half round trips. Most of the
//! conflicts on a hot record are between transactions of one coordinator (TPC-C's terminals of
//! a warehouse all submit to the node of its home partition's primary), and the coordinator
//! knows everything about its own: which cells each touches, and its decision as soon as it is
//! taken. So [`Takeover::admit`] answers, for a new transaction:
//! - [`Admission::Wait`] while a conflicting transaction of this coordinator is undecided
//!   (sending now would only abort on its lock, or, worse, take a lock it then holds against
//!   it);
//! - [`Admission::Go`] otherwise, with the phase 2 ([`Decide`]) of every conflicting
//!   transaction that is decided but whose phase 2 may still be on its way: the executor
//!   applies those first (the holder's decision, carried on the request), so the lock is gone
//!   when the phase 1 runs.
//!
//! A carried phase 2 is the coordinator's own, exactly as it sends it (entries and catch-up
//! targets included), so an executor applying it does what the phase 2 itself would; the
//! phase 2 that arrives later is a repeat. Conflicts are by cell, as locks are: two accesses
//! to one record conflict when one writes a cell the other reads or writes; a range read
//! conflicts with every write to a key of its range in the table.
//!
//! Pure and bounded: at most [`Takeover::MAX_IN_FLIGHT`] transactions are tracked (past that a
//! new one goes out as under No-Wait), at most [`Takeover::MAX_CARRIED`] phase 2s ride on one
//! phase 1 (the oldest are left to their own delivery).

use crate::message::Decide;
use redt_dc_executor::Procedure;
use redt_proto::{DcId, TableId, TxnId};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The cells one transaction touches, as its locks will cover them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Per record `(table, key)`: the cells read and the cells written (bit i = cell i).
    records: Vec<((TableId, u64), u64, u64)>,
    /// Range reads: table and inclusive key bounds.
    ranges: Vec<(TableId, u64, u64)>,
}

impl Footprint {
    /// The footprint of `procedure`'s accesses and range reads.
    pub fn of(procedure: &dyn Procedure) -> Footprint {
        let accesses = procedure.accesses();
        let mut records: Vec<((TableId, u64), u64, u64)> = Vec::with_capacity(accesses.len());
        for a in accesses {
            match records.iter_mut().find(|(k, _, _)| *k == (a.table, a.key)) {
                Some((_, r, w)) => {
                    *r |= a.read;
                    *w |= a.write;
                }
                None => records.push(((a.table, a.key), a.read, a.write)),
            }
        }
        let ranges = procedure
            .ranges()
            .iter()
            .filter_map(|r| accesses.get(r.access).map(|a| (a.table, r.from.min(r.to), r.from.max(r.to))))
            .collect();
        Footprint { records, ranges }
    }

    /// Adds `other`'s records and ranges (the footprint of a batch of both).
    pub fn merge(&mut self, other: &Footprint) {
        for &(k, r, w) in &other.records {
            match self.records.iter_mut().find(|(x, _, _)| *x == k) {
                Some((_, rr, ww)) => {
                    *rr |= r;
                    *ww |= w;
                }
                None => self.records.push((k, r, w)),
            }
        }
        self.ranges.extend(other.ranges.iter().copied());
    }

    /// Whether nothing is written.
    fn read_only(&self) -> bool {
        self.records.iter().all(|&(_, _, w)| w == 0)
    }

    /// Whether `self` writes a key inside one of `other`'s range reads.
    fn writes_into_ranges_of(&self, other: &Footprint) -> bool {
        other
            .ranges
            .iter()
            .any(|&(t, lo, hi)| self.records.iter().any(|&((st, k), _, w)| st == t && w != 0 && (lo..=hi).contains(&k)))
    }

    /// Whether `self` and `other` conflict: a cell one writes and the other reads or writes,
    /// or a write into the other's range read.
    fn conflicts(&self, other: &Footprint) -> bool {
        let cells = self
            .records
            .iter()
            .any(|&(k, r, w)| other.records.iter().any(|&(ok, or, ow)| ok == k && (w & (or | ow) != 0 || r & ow != 0)));
        let ranged = |a: &Footprint, b: &Footprint| {
            a.ranges.iter().any(|&(t, lo, hi)| {
                b.records.iter().any(|&((bt, k), _, w)| bt == t && w != 0 && (lo..=hi).contains(&k))
            })
        };
        cells || ranged(self, other) || ranged(other, self)
    }
}

/// What the coordinator does with a new transaction ([`Takeover::admit`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Admission {
    /// Send phase 1 now; to each DC, carry these phase 2s of decided transactions it
    /// conflicts with (to be applied before it runs).
    Go {
        /// Per participant DC, the phase 2s to carry, oldest decision first.
        carried: BTreeMap<DcId, Vec<Decide>>,
        /// The conflicting transactions decided commit whose phase 2 may still be on its way,
        /// oldest decision first: the state the transaction will run on includes their writes,
        /// which a reconnaissance read before the hold may not have seen
        /// ([`crate::call::rebase`]).
        committed: Vec<TxnId>,
    },
    /// Hold it until `behind`, an undecided conflicting transaction of this coordinator, is
    /// decided ([`Takeover::decided`] then names it among the ones to admit again).
    Wait {
        /// The transaction it waits for.
        behind: TxnId,
    },
}

#[derive(Debug)]
struct Tracked {
    footprint: Footprint,
    /// The phase 2 sent to each DC, once decided.
    decided: Option<BTreeMap<DcId, Decide>>,
    /// The order it was decided in (older decisions are carried first).
    decided_seq: u64,
}

/// One coordinator's transactions in flight and the ones it holds back. See the module docs.
#[derive(Debug, Default)]
pub struct Takeover {
    tracked: HashMap<TxnId, Tracked>,
    /// Per record, the tracked transactions touching it.
    by_record: HashMap<(TableId, u64), BTreeSet<TxnId>>,
    /// Tracked transactions with range reads (checked against every new one).
    ranged: BTreeSet<TxnId>,
    /// Per undecided transaction, the ones waiting for it, in arrival order.
    waiting: HashMap<TxnId, Vec<TxnId>>,
    seq: u64,
}

impl Takeover {
    /// Transactions tracked at most; past it a new transaction goes out untracked (No-Wait).
    pub const MAX_IN_FLIGHT: usize = 4096;
    /// Phase 2s carried on one phase 1 to one DC at most.
    pub const MAX_CARRIED: usize = 16;

    /// Nothing in flight.
    pub fn new() -> Takeover {
        Takeover::default()
    }

    /// How many transactions are tracked (in flight, or decided with phase 2 on its way).
    pub fn tracked(&self) -> usize {
        self.tracked.len()
    }

    /// Admits `txn` touching `footprint`: wait for an undecided conflicting transaction, or
    /// go, carrying the decided ones' phase 2s. On [`Admission::Go`] the transaction is now
    /// tracked: the coordinator reports its decision ([`Takeover::decided`]) and its end
    /// ([`Takeover::finished`]). A read-only transaction never waits and carries nothing
    /// (its shared locks meet only writers, which hold it back no longer than No-Wait).
    pub fn admit(&mut self, txn: TxnId, footprint: Footprint) -> Admission {
        let others = self.others(txn, &footprint);
        let mut carried: Vec<(u64, TxnId, &BTreeMap<DcId, Decide>)> = Vec::new();
        for o in &others {
            let t = &self.tracked[o];
            if !t.footprint.conflicts(&footprint) {
                continue;
            }
            match &t.decided {
                None => {
                    self.waiting.entry(*o).or_default().push(txn);
                    return Admission::Wait { behind: *o };
                }
                Some(d) => carried.push((t.decided_seq, *o, d)),
            }
        }
        carried.sort_by_key(|(seq, _, _)| *seq);
        let committed = carried
            .iter()
            .filter(|(_, _, per_dc)| per_dc.values().any(|d| matches!(d.decision, redt_proto::Decision::Commit(_))))
            .map(|&(_, t, _)| t)
            .collect();
        let mut out: BTreeMap<DcId, Vec<Decide>> = BTreeMap::new();
        for (_, _, per_dc) in carried {
            for (dc, d) in per_dc {
                out.entry(*dc).or_default().push(d.clone());
            }
        }
        for v in out.values_mut() {
            let extra = v.len().saturating_sub(Self::MAX_CARRIED);
            v.drain(..extra);
        }
        if self.tracked.len() < Self::MAX_IN_FLIGHT && !footprint.read_only() {
            for (k, _, _) in &footprint.records {
                self.by_record.entry(*k).or_default().insert(txn);
            }
            if !footprint.ranges.is_empty() {
                self.ranged.insert(txn);
            }
            self.tracked.insert(txn, Tracked { footprint, decided: None, decided_seq: 0 });
        }
        Admission::Go { carried: out, committed }
    }

    /// The tracked transactions other than `txn` that may conflict with `footprint` (they
    /// touch one of its records, its ranges, or have ranges).
    fn others(&self, txn: TxnId, footprint: &Footprint) -> BTreeSet<TxnId> {
        let mut others: BTreeSet<TxnId> = self.ranged.clone();
        for (k, _, _) in &footprint.records {
            if let Some(s) = self.by_record.get(k) {
                others.extend(s.iter().copied());
            }
        }
        if !footprint.ranges.is_empty() {
            for (k, s) in &self.by_record {
                if footprint.ranges.iter().any(|&(t, lo, hi)| k.0 == t && (lo..=hi).contains(&k.1)) {
                    others.extend(s.iter().copied());
                }
            }
        }
        others.remove(&txn);
        others
    }

    /// An undecided tracked transaction that `footprint` conflicts with, if any: what
    /// [`Takeover::admit`] would wait for, asked without waiting.
    pub fn blocker(&self, footprint: &Footprint) -> Option<TxnId> {
        self.others(TxnId(u64::MAX), footprint)
            .into_iter()
            .find(|o| self.tracked[o].decided.is_none() && self.tracked[o].footprint.conflicts(footprint))
    }

    /// A batch for a transaction of `footprint` that may go now ([`Takeover::blocker`] finds
    /// nothing): which of `held` (the transactions held back, oldest first) join it, at most
    /// `max` in all, the leader included. A held transaction joins when it conflicts with the
    /// batch so far (it would otherwise wait for it), the batch so far writes into none of its
    /// range reads (their rows are read before the batch), and nothing undecided holds it
    /// back; the
    /// batch's footprint grows with each member. Returns the indices into `held` that join, in
    /// order, and the batch's footprint, to admit the leader with (docs/design.md, "Batches
    /// of held transactions").
    pub fn batch(&self, footprint: &Footprint, held: &[&Footprint], max: usize) -> (Vec<usize>, Footprint) {
        let mut union = footprint.clone();
        let mut members = Vec::new();
        for (i, f) in held.iter().enumerate() {
            if members.len() + 1 >= max {
                break;
            }
            if f.conflicts(&union) && !union.writes_into_ranges_of(f) && self.blocker(f).is_none() {
                union.merge(f);
                members.push(i);
            }
        }
        (members, union)
    }

    /// [`Takeover::admit`] for `txn`, which may lead a batch of at most `max` transactions
    /// (`max` below 2: none) taken from `held` (the transactions held back, oldest first): when
    /// nothing undecided holds it back, the held ones [`Takeover::batch`] picks join it and it
    /// is admitted with the batch's footprint. Returns the admission and the indices into
    /// `held` that joined (none unless it goes).
    pub fn admit_batch(
        &mut self,
        txn: TxnId,
        footprint: Footprint,
        held: &[&Footprint],
        max: usize,
    ) -> (Admission, Vec<usize>) {
        if max < 2 || self.blocker(&footprint).is_some() {
            return (self.admit(txn, footprint), Vec::new());
        }
        let (members, union) = self.batch(&footprint, held, max);
        match self.admit(txn, union) {
            go @ Admission::Go { .. } => (go, members),
            wait => (wait, Vec::new()),
        }
    }

    /// `txn` is decided and `phase2` is what its coordinator sends each DC. Returns the
    /// transactions that waited for it, in arrival order, to admit again.
    pub fn decided(&mut self, txn: TxnId, phase2: BTreeMap<DcId, Decide>) -> Vec<TxnId> {
        self.seq += 1;
        if let Some(t) = self.tracked.get_mut(&txn) {
            t.decided = Some(phase2);
            t.decided_seq = self.seq;
        }
        self.waiting.remove(&txn).unwrap_or_default()
    }

    /// `txn` is over (its phase 2 delivered, or it never ran): no later phase 1 needs to carry
    /// its decision. Returns the transactions that waited for it, to admit again.
    pub fn finished(&mut self, txn: TxnId) -> Vec<TxnId> {
        if let Some(t) = self.tracked.remove(&txn) {
            for (k, _, _) in &t.footprint.records {
                if let Some(s) = self.by_record.get_mut(k) {
                    s.remove(&txn);
                    if s.is_empty() {
                        self.by_record.remove(k);
                    }
                }
            }
            self.ranged.remove(&txn);
        }
        self.waiting.remove(&txn).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
