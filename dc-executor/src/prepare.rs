//! A recoverer's PREPARE at one DC: find a transaction's redo entries on the DC's nodes,
//! fence the replicas that have not voted, promise the ballot, and report what each replica
//! holds (docs/design.md §2 and "Recovery").
//!
//! Everything comes from the MemStore (the ring, the vote words, the decision log): nothing a
//! crash can lose. The fence is the vote word's compare-and-swap `NONE → Abort`, the same
//! word phase 1 swaps `NONE → Commit`, so exactly one of the two wins.
//!
//! A replica that holds no unfinished entry of the transaction (it never voted, or voted
//! abort and finished its entry) gets a *fence entry*: a `Logged` entry with no locks or
//! changes whose vote word already says "abort, promised `b`". It is that replica's acceptor
//! state from then on: a later PREPARE promises on it and a RECORD records in it, as for any
//! entry. Without it such a replica could hold no recorded decision, and a partition whose
//! other replicas are gone (a removed DC) could never record one at a majority, so its
//! recovery went on for ever (sim seed 2082, default, 6 s). Its decision is applied like any
//! entry's (an abort, since its DC is behind); an unfinished one is recovered like any other.

use crate::decision_log::{self, Lookup};
use crate::error::Result;
use crate::executor::{Decision, EntryRef, Executor};
use crate::promise_table::{self, Raise};
use crate::ring::{self, EntryStatus, RedoEntry, VoteCode, VoteState, VoteWord};
use redt_proto::{Ballot, Cts, DcId, Epoch, NodeId, PartitionId, TxnId};

/// The transaction a PREPARE is for, as the recoverer read it from one of its redo entries:
/// what a fence entry written on a replica that holds none must carry, so that a later ring
/// scan recovers it like any other entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedTxn {
    /// The transaction.
    pub txn: TxnId,
    /// Its coordinator's start timestamp.
    pub start: Cts,
    /// The placement epoch it was planned in.
    pub epoch: Epoch,
    /// Its coordinator.
    pub coordinator: NodeId,
    /// Every DC it involves.
    pub participants: Vec<DcId>,
    /// Every partition it touches, ascending.
    pub partitions: Vec<PartitionId>,
}

/// What one replica node holds of a transaction, as a PREPARE found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Promise {
    /// An unfinished phase-1 entry, now promised to the ballot.
    Entry {
        /// Where it is.
        entry: EntryRef,
        /// Its vote after the fence (`Commit`, or `Abort` for an abort vote or a fence).
        vote: VoteCode,
        /// The decision recorded in it, with its ballot, if any.
        recorded: Option<(VoteCode, Ballot)>,
        /// The entry itself (its locks carry the versions the vote saw).
        redo: RedoEntry,
    },
    /// A decision was applied here (a finished entry, or its row in the decision log).
    Applied(Decision),
    /// The replica voted abort, or never voted and never will (the transaction's phase-1
    /// deadline is past), and holds no unfinished entry to promise in: its fence entry is
    /// already finished, or its ring had no room for one. An abort vote that holds no
    /// recorded decision.
    NoVote,
    /// Cannot tell: no entry, and the decision log evicted rows as late as the transaction.
    Unknown,
    /// The replica promised a higher ballot.
    Refused {
        /// The ballot it promised.
        promised: Ballot,
    },
}

/// One node's [`Promise`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodePromise {
    /// The replica node.
    pub node: NodeId,
    /// What it holds.
    pub promise: Promise,
}

impl Executor {
    /// PREPARE(`ballot`) for `txn` on each of `nodes` of this DC: scans the node's ring for
    /// `txn`'s phase-1 entries and swaps each unfinished one's vote word to promise `ballot`
    /// (fencing a replica that has not voted: `NONE → Abort`). A node without one answers an
    /// applied decision from its finished entry or its decision log; failing that, it gets a
    /// fence entry promised to `ballot` (see the module docs) unless it had one already or
    /// its ring has no room for one ([`Promise::NoVote`] then).
    ///
    /// The caller must only PREPARE once `txn`'s phase-1 deadline is past at every executor
    /// (a recovery timeout above the phase-1 timeout plus the clock-skew bound): "no entry"
    /// then means "never will have one".
    ///
    /// # Errors
    /// Verbs failures.
    pub fn prepare(&mut self, txn: &PreparedTxn, ballot: Ballot, nodes: &[NodeId]) -> Result<Vec<NodePromise>> {
        let mut out = Vec::with_capacity(nodes.len());
        for &node in nodes {
            let promise = match self.prepare_node(txn.txn, ballot, txn.start, node)? {
                (Promise::NoVote, Fenced::No) if self.fence_entries => self.fence(txn, ballot, node)?,
                (p, fenced) => {
                    self.release_row(txn.txn, node, &p, fenced)?;
                    p
                }
            };
            out.push(NodePromise { node, promise });
        }
        Ok(out)
    }

    /// The promise of a replica node that holds no unfinished entry of `txn` and never held
    /// a fence entry of it: raise its row of the promise table to `ballot` (refused below a
    /// ballot already there; no promise at all, `Unknown`, if another transaction holds the
    /// row), scan its ring again, write a fence entry promised to `ballot`, then read the row
    /// again and answer `Refused` (promising the row's ballot in the fence entry) if another
    /// PREPARE raised it meanwhile. See `promise_table.rs` for why this order.
    ///
    /// When the ring has no room for the fence entry the replica answers [`Promise::NoVote`]
    /// as it did before fence entries existed (an abort vote that holds no record), and the
    /// promise stays in the row, where a restarted executor and every other executor of the
    /// DC find it: a later PREPARE of a lower ballot is refused, one of this ballot or higher
    /// writes the fence entry once the ring has room. (Waiting for room instead deadlocks: two
    /// transactions whose undecided entries fill each other's rings each wait for a fence
    /// entry in the other's ring; sim seed 12, append, local-fast, `all,remove`, 3 s. Never
    /// writing one later leaves a partition whose other replicas were removed unable to hold
    /// its record at a majority for good; sim seed 40186, bank, local-fast, `all,remove`,
    /// 6 s.)
    fn fence(&mut self, txn: &PreparedTxn, ballot: Ballot, node: NodeId) -> Result<Promise> {
        let dc = self.dc().clone();
        if self.promise_table {
            match promise_table::raise(dc.verbs.as_ref(), node, &dc.layout, txn.txn, ballot)? {
                Raise::Refused(promised) => return Ok(Promise::Refused { promised }),
                Raise::Full => return Ok(Promise::Unknown),
                Raise::Promised { before: Some(_) } if !self.fence_after_full_ring => return Ok(Promise::NoVote),
                Raise::Promised { .. } => {}
            }
            // Another executor of the DC may have fenced the replica since the first scan.
            match self.prepare_node(txn.txn, ballot, txn.start, node)? {
                (Promise::NoVote, Fenced::No) => {}
                (p, fenced) => {
                    self.release_row(txn.txn, node, &p, fenced)?;
                    return Ok(p);
                }
            }
        }
        let written = self.fence_entry(txn, ballot, node)?;
        if !self.promise_table {
            return Ok(written);
        }
        match promise_table::ballot(dc.verbs.as_ref(), node, &dc.layout, txn.txn)? {
            Some(promised) if promised > ballot => {
                if let Promise::Entry { entry, redo, .. } = written {
                    // Best effort: the higher PREPARE's own scan may have promised it already.
                    let _ = self.promise_one(txn.txn, promised, entry, redo)?;
                }
                Ok(Promise::Refused { promised })
            }
            _ => Ok(written),
        }
    }

    /// Frees `txn`'s row of `node`'s promise table once the replica's answer comes from a
    /// finished entry or the decision log (a decision applied, or a fence entry finished):
    /// every later PREPARE answers from there, so the row is no longer read. Replay frees it
    /// too when it flushes a fence entry; this covers a row raised by a PREPARE that then
    /// found another executor's fence entry already finished.
    fn release_row(&mut self, txn: TxnId, node: NodeId, p: &Promise, fenced: Fenced) -> Result<()> {
        let finished = matches!(p, Promise::Applied(_)) || (*p == Promise::NoVote && fenced == Fenced::Yes);
        if self.promise_table && finished {
            let dc = self.dc().clone();
            promise_table::release(dc.verbs.as_ref(), node, &dc.layout, txn)?;
        }
        Ok(())
    }

    /// Writes a fence entry of `txn` promised to `ballot` on `node`'s ring (see the module
    /// docs) and returns its promise: [`Promise::NoVote`] when the ring has no room for it.
    fn fence_entry(&mut self, txn: &PreparedTxn, ballot: Ballot, node: NodeId) -> Result<Promise> {
        let state = VoteState { vote: VoteCode::Abort, promised: ballot, ..VoteState::default() };
        let Some(vote) = VoteWord::pack(state) else { return Ok(Promise::NoVote) };
        let redo = RedoEntry {
            txn: txn.txn,
            status: EntryStatus::Logged,
            cts: Cts(0),
            vote,
            epoch: txn.epoch,
            coordinator: txn.coordinator,
            start: txn.start,
            participants: txn.participants.clone(),
            partitions: txn.partitions.clone(),
            locks: Vec::new(),
            changes: Vec::new(),
        };
        let slots = ring::encoded_slots(&redo);
        let index = match self.reserve_slots(node, slots) {
            Ok(index) => index,
            Err(crate::Error::RingFull { .. }) => return Ok(Promise::NoVote),
            Err(e) => return Err(e),
        };
        let dc = self.dc().clone();
        let mut batch = crate::verbs::DoorbellBatch::new();
        ring::push_write(&mut batch, &dc.layout, index, &ring::encode_padded(&redo, index, slots));
        if let Err(e) = dc.verbs.post_batch(node, &mut batch) {
            if let Some(writer) = self.ring_writer(node) {
                // Best effort: a filler still owed is written by the writer's next settle.
                let _ = writer.abandon(dc.verbs.as_ref(), index, slots);
            }
            return Err(e.into());
        }
        Ok(Promise::Entry { entry: EntryRef { node, index, slots }, vote: VoteCode::Abort, recorded: None, redo })
    }

    /// The promise of one node, and whether it ever held a fence entry of `txn` (one in its
    /// ring, or a decision-log row flagged as one): a node gets at most one, or two
    /// recoverers that each find the other's fence entry finished would write new ones for
    /// ever.
    fn prepare_node(&mut self, txn: TxnId, ballot: Ballot, start: Cts, node: NodeId) -> Result<(Promise, Fenced)> {
        let dc = self.dc().clone();
        let mut fenced = Fenced::No;
        let mine: Vec<(u64, u64, RedoEntry)> = ring::ring_entries(dc.verbs.as_ref(), node, &dc.layout)?
            .into_iter()
            .filter(|(_, _, e)| e.txn == txn && !e.partitions.is_empty())
            .collect();
        let mut best: Option<Promise> = None;
        let mut finished: Option<Promise> = None;
        for (index, slots, entry) in mine {
            if entry.locks.is_empty() && entry.changes.is_empty() {
                fenced = Fenced::Yes;
            }
            match entry.status {
                EntryStatus::Intent | EntryStatus::Logged => {}
                EntryStatus::Committed => {
                    finished = Some(Promise::Applied(Decision::Commit(entry.cts)));
                    continue;
                }
                EntryStatus::Aborted => {
                    let voted = entry.vote.unpack().map(|s| s.vote);
                    let p = if voted == Some(VoteCode::Commit) {
                        Promise::Applied(Decision::Abort)
                    } else {
                        Promise::NoVote
                    };
                    if finished.is_none() || p != Promise::NoVote {
                        finished = Some(p);
                    }
                    continue;
                }
                EntryStatus::Flushed => {
                    let row = decision_log::lookup(dc.verbs.as_ref(), node, &dc.layout, txn, start)?;
                    fenced = fenced.or(row);
                    if let Some(p) = from_log(row) {
                        finished = Some(p);
                    }
                    continue;
                }
                EntryStatus::Empty => continue,
            }
            let r = EntryRef { node, index, slots };
            let p = self.promise_one(txn, ballot, r, entry)?;
            // A commit-voted entry is the replica's vote; an abort-voted one only if it has
            // none other (a phase 1 repeated after a restart, or one that waited for a lock
            // and tried again, leaves a second entry; a try that met a lock left its first
            // one aborted without a vote).
            let better = match (&best, &p) {
                (None, _) => true,
                (Some(Promise::Refused { .. }), _) => false,
                (_, Promise::Refused { .. }) => true,
                (Some(Promise::Entry { vote: VoteCode::Commit, .. }), _) => false,
                _ => true,
            };
            if better {
                best = Some(p);
            }
        }
        // An applied decision wins over a second, unfinished entry of the same transaction (a
        // phase 1 repeated after a restart): answering that entry's vote would hide the decision.
        if let Some(p @ Promise::Applied(_)) = finished {
            return Ok((p, fenced));
        }
        if self.prepare_reads_first_try && finished == Some(Promise::NoVote) {
            return Ok((Promise::NoVote, fenced));
        }
        if let Some(p) = best {
            return Ok((p, fenced));
        }
        let row = decision_log::lookup(dc.verbs.as_ref(), node, &dc.layout, txn, start)?;
        fenced = fenced.or(row);
        if let Some(p) = finished {
            return Ok((p, fenced));
        }
        Ok((from_log(row).unwrap_or(Promise::Unknown), fenced))
    }

    /// Promises `ballot` in the vote word of one unfinished entry, fencing it if it has not
    /// voted. Re-reads the header before every compare-and-swap, as [`Executor::record`] does.
    fn promise_one(&mut self, txn: TxnId, ballot: Ballot, r: EntryRef, redo: RedoEntry) -> Result<Promise> {
        let dc = self.dc().clone();
        let at = ring::vote_offset(&dc.layout, r.index);
        loop {
            let header = match ring::read_header(dc.verbs.as_ref(), r.node, &dc.layout, r.index) {
                Ok(h) if h.txn == txn => h,
                _ => return Ok(Promise::Unknown),
            };
            match header.status {
                EntryStatus::Intent | EntryStatus::Logged => {}
                EntryStatus::Committed => return Ok(Promise::Applied(Decision::Commit(header.cts))),
                EntryStatus::Aborted if header.vote.unpack().map(|s| s.vote) == Some(VoteCode::Commit) => {
                    return Ok(Promise::Applied(Decision::Abort))
                }
                EntryStatus::Aborted => return Ok(Promise::NoVote),
                EntryStatus::Empty | EntryStatus::Flushed => return Ok(Promise::Unknown),
            }
            let cur = header.vote;
            let Some(state) = cur.unpack() else { return Ok(Promise::Unknown) };
            if state.promised > ballot {
                return Ok(Promise::Refused { promised: state.promised });
            }
            let vote = if state.vote == VoteCode::None { VoteCode::Abort } else { state.vote };
            let next = VoteState { vote, promised: ballot, ..state };
            let Some(word) = VoteWord::pack(next) else { return Ok(Promise::Refused { promised: state.promised }) };
            if word != cur && dc.verbs.compare_and_swap(r.node, at, cur.0, word.0)? != cur.0 {
                continue;
            }
            let recorded = (state.decision != VoteCode::None).then_some((state.decision, state.recorded));
            return Ok(Promise::Entry { entry: r, vote, recorded, redo: RedoEntry { vote: word, ..redo } });
        }
    }

    /// Frees `txn`'s row of the promise table of each of `nodes` that holds one (a recoverer's
    /// decision reached their DC). A replica whose ring had no room for a fence entry answered
    /// [`Promise::NoVote`] and kept its promise in the row, which otherwise only replay's flush
    /// of a fence entry frees: once the transaction is decided no PREPARE comes to write one,
    /// and the row would answer `Unknown` for good to every transaction hashed to it. Freeing
    /// it gives up no promise: the row keeps its ballot for its next owner, and a fence
    /// entry's read after its write sees every ballot raised in the row whoever holds it now
    /// ([`promise_table::ballot`]). Every node is tried; the first verbs failure is returned.
    ///
    /// # Errors
    /// Verbs failures.
    pub fn release_promises(&mut self, txn: TxnId, nodes: &[NodeId]) -> Result<()> {
        if !self.promise_table {
            return Ok(());
        }
        let dc = self.dc().clone();
        let mut first = Ok(());
        for &node in nodes {
            if let Err(e) = promise_table::release(dc.verbs.as_ref(), node, &dc.layout, txn) {
                first = first.and(Err(e));
            }
        }
        first
    }

    /// The unfinished phase-1 entries of `txn` on `nodes` (a decision that reaches an executor
    /// that has forgotten them, after a restart or from a recoverer).
    ///
    /// # Errors
    /// Verbs failures.
    pub fn find_entries(&self, txn: TxnId, nodes: &[NodeId]) -> Result<Vec<EntryRef>> {
        let dc = self.dc().clone();
        let mut out = Vec::new();
        let want = |h: &ring::HeaderPeek| h.txn == txn && h.unfinished();
        for &node in nodes {
            for (index, slots, _, e) in ring::ring_entries_where(dc.verbs.as_ref(), node, &dc.layout, &want)? {
                if e.txn == txn && matches!(e.status, EntryStatus::Intent | EntryStatus::Logged) {
                    out.push(EntryRef { node, index, slots });
                }
            }
        }
        Ok(out)
    }
}

/// Whether a node ever held a fence entry of a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fenced {
    No,
    Yes,
}

impl Fenced {
    /// This, or yes if `row` is a fence entry's.
    fn or(self, row: Lookup) -> Fenced {
        match row {
            Lookup::Found(r) if r.fence => Fenced::Yes,
            _ => self,
        }
    }
}

fn from_log(row: Lookup) -> Option<Promise> {
    match row {
        Lookup::Found(r) if r.status == EntryStatus::Committed => Some(Promise::Applied(Decision::Commit(r.cts))),
        Lookup::Found(r) if r.vote == VoteCode::Commit => Some(Promise::Applied(Decision::Abort)),
        Lookup::Found(_) | Lookup::Absent => Some(Promise::NoVote),
        Lookup::Evicted => None,
    }
}
