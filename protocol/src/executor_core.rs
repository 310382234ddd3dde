//! The executor side of a node as a state machine: runs phase 1 for its DC, records decisions
//! in vote words, and applies phase 2 (RedT §4.2, Algorithm 1; docs/design.md §2).
//!
//! Sans-IO: no socket, no async, no clock read and no lock
//! inside. Requests come in through [`ExecutorCore::handle`] with the caller's time, and the
//! verbs of the DC are its storage (like raft-rs's `Storage`): they run synchronously on
//! whatever thread the driver gives the core (a dedicated thread per node in the real node,
//! `redt_coordinator::ExecutorThread`; the simulation's single thread). What must go out afterwards
//! (catch-up shipments) comes back in [`Handled::catch_up`].
//!
//! The executor itself is stateless; this core keeps two caches so that messages that
//! cross on the WAN do not leave locks behind: the redo entries of sub-transactions that
//! voted commit and await their decision (so a decision that arrives without entry
//! references — the coordinator never got the vote — still finds them), and the ids of
//! transactions decided before their phase 1 ran here or that voted abort here (so a late
//! or repeated phase 1 votes abort instead of taking locks nobody will release). A third bounded memory, of the
//! transactions decided here, makes a repeated decision (a retry whose first attempt did
//! land) a no-op: by then the redo entries it names may be flushed and their ring slots
//! reused by other transactions.
//!
//! Every memory here is bounded, so no client can wedge a node (docs/design.md,
//! "Limits and untrusted input"). The fences and decisions remember the last
//! [`TxnSet::CAP`] ids. The two caches of redo entries awaiting a decision are capped by the
//! topology's `limits:` and forget their oldest entry when full, never refusing a new one:
//! what they hold is also in the MemStore, and every reader falls back to it on a miss.
//! - `pending` (`limits.max_pending_votes`): a commit vote's entries are in the DC's rings,
//!   undecided. A decision or a record that names no entry then finds them with
//!   [`redt_dc_executor::Executor::find_entries`], as after a restart; one that names them
//!   does not need the memory. Only a repeated phase 1 needs the vote itself (it must get the
//!   same answer): the forgotten vote's id is kept in a [`TxnSet`], and a repeated phase 1 of
//!   it is answered an `OVER_LIMIT` error naming the limit, which the coordinator takes like a
//!   DC that could not vote (a lost message): it never becomes an abort vote that could make
//!   the coordinator skip this DC in phase 2, and it fences nothing (a fence would make a
//!   record naming no entry answer without recording in the ring). Entries leave `pending` at
//!   their decision; a vote whose decision went to another node of the DC (a recoverer's)
//!   stays until forgotten, which is why the cap is needed.
//! - `accepted` (`limits.max_accepted_redo`): replica redo a secondary wrote `Logged` into
//!   its own ring. Once one was forgotten, a decision that finds no remembered entry scans the
//!   node's ring for the transaction's `Logged` replica entries, as `accepted_before` does
//!   after a restart. A retried accept of a forgotten one writes a second copy, which that
//!   scan settles too.
//! - `accepted_before` is read once from the ring and only shrinks: bounded by the ring.

use crate::call;
use crate::catch_up::{self, CatchUpDebt};
use crate::epochs::Epochs;
use crate::error::{Error, Result};
use crate::limits::{Limit, OverLimit};
use crate::message::{
    Accept, Decide, DecideRole, Execute, LogDecision, ReclaimAnswer, ReclaimKey, Record, RecoveryPrepare, Reply,
    Request, Reservations, SnapshotRead,
};
use crate::plan;
use crate::rebuild::Purged;
use redt_dc_executor::{
    AbortReason, BoundedMap, DcHandle, Decision, EntryRef, Executor, Gap, Hlc, OwedEntry, RedoEntry, ReplicaChange,
    ReplicaOrigin, RingScan, SubTxn, TxnSet, Vote,
};
use redt_proto::error_code;
use redt_proto::{Ballot, Cts, DcId, Epoch, NodeId, PartitionId, TxnId};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

/// One round of freeing deleted records ([`ExecutorCore::take_reclaims`]): the checks to
/// send, and what the core needs to end the round ([`ExecutorCore::finish_reclaims`]).
#[derive(Debug)]
pub struct ReclaimRound {
    /// The candidates taken from the queue, with the tries each had.
    candidates: Vec<(u8, redt_dc_executor::DeletedRecord)>,
    /// Per node to ask: the node and its [`Request::ReclaimCheck`].
    pub asks: Vec<(NodeId, Request)>,
    /// Per ask, per key in it: the candidate's index.
    indexes: Vec<Vec<usize>>,
}

/// A catch-up source's way of deciding its entries: each entry's catch-up mask, and the commit
/// timestamp an aborted source keeps (`Executor::finish_owing`).
type Owing<'a> = (&'a dyn Fn(&RedoEntry) -> u8, Cts);

/// Index buckets one snapshot chunk scans at most (256 KiB of index).
const SNAPSHOT_BUCKETS: u64 = 4096;

/// Index buckets the sweep for deleted records after a start reads per reclaim round (one a
/// second on a node): a 2 M-bucket index is swept in under 9 minutes.
const SWEEP_BUCKETS: u64 = 4096;

/// How many transaction ids each bounded memory (fences, decided here) remembers.
const FENCE_MEMORY: usize = redt_dc_executor::TxnSet::CAP;

mutations! {
    /// Deliberate protocol bugs of the executor side, for showing that the simulation or a unit
    /// test catches them. All off by default; nothing outside tests turns them on. Has its fields
    /// only in a build with the `mutants` feature (the tests turn it on); without it, none, and
    /// every switch reads as off.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct ExecutorMutations {
        /// A phase 2 carried on a phase 1 (decided-holder takeover) is applied without the
        /// catch-up it names, so the DC left behind is never shipped the values: the phase 2
        /// delivered later is a repeat and ships nothing either.
        pub carried_without_catch_up: bool,
        /// A batch's members each run on the values read before the batch, not on what the
        /// members before them wrote (`BatchProcedure::without_overlay`): a lost update.
        pub batch_without_overlay: bool,
        /// A cell that several members of a batch write keeps the first member's value
        /// (`BatchProcedure::first_writer_wins`): a lost update.
        pub batch_first_writer_wins: bool,
        /// The executors of odd-numbered DCs run a batch's members last to first
        /// (`BatchProcedure::reversed`): two DCs order one batch differently.
        pub batch_order_by_dc: bool,
        /// A phase 1 that arrives after its transaction was decided (or fenced) here runs anyway
        /// and takes locks nobody will release.
        pub late_phase1_takes_locks: bool,
        /// A decision for a transaction already decided here touches nothing, not even the
        /// unfinished entry it names.
        pub repeated_decision_touches_nothing: bool,
        /// A catch-up source decides its redo without the catch-up mask, so its shipments live only
        /// in its memory (the bug before docs/design.md §2's "a catch-up outlives its source").
        pub catch_up_not_durable: bool,
        /// A phase 1 planned in another epoch than the executor's current one runs anyway (no epoch
        /// fence, docs/design.md, "Failover"): a transaction of a removed placement can commit.
        pub accept_other_epoch: bool,
        /// A catch-up source ships nothing to learners: a rebuilt replica misses the commits made
        /// while its snapshot was copied.
        pub no_catch_up_to_learners: bool,
        /// A voter serves a snapshot copy at once, without raising its epoch floor or waiting
        /// for its older-epoch entries: an older commit applied after the scan is missed.
        pub snapshot_without_fence: bool,
        /// A PREPARE writes no fence entry: a replica without an entry of the transaction can
        /// hold no recorded decision, so a partition that lost its other replicas to a removal
        /// never records one at a majority (sim seed 2082, default, 6 s).
        pub no_fence_entries: bool,
        /// A replica that answered `NoVote` because its ring had no room for a fence entry never
        /// gets one later: once its partition's other replicas are removed no majority can hold
        /// the recovery's record (sim seed 40186, bank, local-fast, 6 s).
        pub no_fence_after_full_ring: bool,
        /// A PREPARE keeps no promise in the node's promise table: a replica that answered
        /// `NoVote` because its ring was full promised nothing, so a later PREPARE of a lower
        /// ballot (a restarted executor, or another executor of the DC) gets a fence entry that
        /// accepts its RECORD after the higher ballot was promised.
        pub no_promise_table: bool,
        /// A removed node back from the dead aborts the undecided entries of its old-epoch
        /// transactions in every ring of its DC, not only its own: a live neighbour's entry of a
        /// committed transaction is aborted (sim seed 8, bank, default, `all,remove-node`, 6 s).
        pub discard_across_the_dc: bool,
        /// A replica whose DC a commit left behind ignores the catch-up's word that it was
        /// behind: a recoverer that saw the commit applied elsewhere commits its stale redo, whose
        /// values then stay at the commit's timestamp (sim seed 70117, bank, world-5dc-n5, 3 s).
        pub apply_stale_redo: bool,
        /// Replay keeps the first of two copies of a write at one commit timestamp
        /// ([`redt_dc_executor::ThomasRule::FirstWriteAtCts`]): a behind replica's stale redo,
        /// committed by a recoverer that saw the commit applied elsewhere before the catch-up
        /// landed, stays over the catch-up's values (sim seed 70185, bank, world-5dc-n5, 3 s).
        pub first_write_at_cts: bool,
        /// A decision recorded in an entry's vote word is never replaced by a higher ballot's
        /// RECORD (the rule before sim seed 50339, ycsb, default, `all,remove`, 6 s): a replica
        /// holding a lower-ballot abort refuses the commit the survivors must complete.
        pub first_record_stays: bool,
        /// Freeing a deleted record does not raise its node's deletion horizon, so a catch-up of
        /// an older write of the key, arriving after the free, creates the key again.
        pub free_deleted_without_horizon: bool,
        /// A learner's copy ends without emptying the rows no voter's copy refreshed
        /// ([`ExecutorCore::purge_unrefreshed`] purges nothing), so a key its voters deleted and
        /// freed while it was away keeps its old value there.
        pub keep_unrefreshed: bool,
        /// A replica frees its record of a deleted key a grace after the delete without asking
        /// the key's other replicas whether they hold the delete too
        /// ([`ExecutorCore::take_reclaims`]): one still waiting for the delete's catch-up keeps
        /// the old row, and a learner copying from the replicas merges it.
        pub reclaim_without_check: bool,
        /// A replica frees its record of a deleted key without looking at the catch-up floors
        /// (`redt_dc_executor::DcHandle::catch_up_floor`): a catch-up made after the free (a late
        /// phase 2 at its source, a late recovery) of a write older than the delete, to another key
        /// of the slot, meets the raised horizon and its replica stays behind for that key.
        pub reclaim_below_no_floor: bool,
        /// A recoverer's decision leaves the transaction's rows of its DC's promise tables held:
        /// a replica whose ring had no room for a fence entry keeps the row for good, and every
        /// transaction hashed to it gets no promise there (sim seed 7032, churn, sim-20dc,
        /// `--failover policy`, `all,remove,remove-node`: two of five replicas answer every
        /// PREPARE `Unknown`, and with the coordinator's DC removed the recovery never decides).
        pub decision_keeps_promise_rows: bool,
        /// A PREPARE answers a replica's vote from the first entry of the transaction its ring
        /// holds: the aborted try of a phase 1 that waited for a lock (docs/design.md §2,
        /// "Waiting for a lock") hides the commit vote of the try that followed, so a recoverer
        /// can count an abort where the coordinator counted a commit.
        pub prepare_reads_first_try: bool,
        /// Phase 1 skips the CHECKs of optimistic transactions (`kv_kind::CHECK`): every
        /// replica passes them whatever version it holds, so a transaction commits writes
        /// computed from a versioned read that a commit since made stale.
        pub skip_version_checks: bool,
        /// A coordinator's abort record (ballot 0) for a transaction whose decision this node
        /// already applied, with no entry left to record it in, answers "recorded": the
        /// coordinator counts the DC toward its abort majority though a recoverer may have
        /// committed the transaction there, and acknowledges an abort of a committed
        /// transaction (its coordinator's DC cut off past the recovery timeout, then healed).
        pub record_after_decision_counts: bool,
    }
}

/// Whether a delete committed at `cts` is at or below a catch-up floor as
/// [`ExecutorCore::catch_up_floor`] gives it: no floor (`Some(None)`) holds nothing back, an
/// unread one (`None`) everything.
fn below(cts: Cts, floor: Option<Option<Cts>>) -> bool {
    match floor {
        Some(None) => true,
        Some(Some(f)) => cts <= f,
        None => false,
    }
}

impl ExecutorMutations {
    /// The Thomas write rule replay applies entries by.
    pub fn thomas_rule(&self) -> redt_dc_executor::ThomasRule {
        if mutant!(self.first_write_at_cts) {
            redt_dc_executor::ThomasRule::FirstWriteAtCts
        } else {
            redt_dc_executor::ThomasRule::Versions
        }
    }
}

/// A bounded map of transaction ids to decisions (oldest forgotten first; a later decision
/// for a remembered transaction replaces the earlier one).
struct DecisionMemory(BoundedMap<TxnId, Decision>);

impl Default for DecisionMemory {
    fn default() -> Self {
        DecisionMemory(BoundedMap::new(FENCE_MEMORY))
    }
}

impl DecisionMemory {
    fn insert(&mut self, t: TxnId, d: Decision) {
        self.0.upsert(t, d, |old, new| *old = new);
    }

    fn get(&self, t: &TxnId) -> Option<Decision> {
        self.0.get(t).copied()
    }
}

/// A map holding at most `cap` keys: inserting a new key into a full map forgets the oldest
/// inserted one and returns it. Unlike [`BoundedMap`], a key can be removed (a decision
/// removes the vote it settles); each key carries its insertion number so that a key removed
/// and inserted again is not forgotten for its first insertion.
struct Capped<K, V> {
    map: HashMap<K, (u64, V)>,
    order: VecDeque<(u64, K)>,
    next: u64,
    cap: usize,
}

impl<K: std::hash::Hash + Eq + Copy, V> Capped<K, V> {
    fn new(cap: u64) -> Self {
        let cap = usize::try_from(cap).unwrap_or(usize::MAX).max(1);
        Capped { map: HashMap::new(), order: VecDeque::new(), next: 0, cap }
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn contains_key(&self, k: &K) -> bool {
        self.map.contains_key(k)
    }

    fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k).map(|(_, v)| v)
    }

    fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        self.map.get_mut(k).map(|(_, v)| v)
    }

    fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.map.iter().map(|(k, (_, v))| (k, v))
    }

    /// Sets `k` to `v` (a key present keeps its place); returns the key forgotten to make room.
    fn insert(&mut self, k: K, v: V) -> Option<(K, V)> {
        if let Some((_, old)) = self.map.get_mut(&k) {
            *old = v;
            return None;
        }
        let n = self.next;
        self.next += 1;
        self.map.insert(k, (n, v));
        self.order.push_back((n, k));
        if self.map.len() <= self.cap {
            return None;
        }
        while let Some((n, old)) = self.order.pop_front() {
            if self.map.get(&old).is_some_and(|(m, _)| *m == n) {
                return self.map.remove(&old).map(|(_, v)| (old, v));
            }
        }
        None
    }

    fn remove(&mut self, k: &K) -> Option<V> {
        let v = self.map.remove(k).map(|(_, v)| v);
        // Removed keys stay in `order` until it is twice as long as the map, then it is
        // compacted (amortized: the map must lose as many keys again before the next time).
        if self.order.len() > 2 * self.map.len() + 1024 {
            let map = &self.map;
            self.order.retain(|(n, k)| map.get(k).is_some_and(|(m, _)| m == n));
        }
        v
    }
}

/// What [`ExecutorCore::begin_execute`] found: the answer already, or a sub-transaction to run.
#[derive(Debug)]
pub enum Phase1 {
    /// The vote to give without running anything (decided or fenced here, a repeated phase
    /// 1's earlier vote, the wrong epoch, past the deadline).
    Answered(Vote),
    /// The sub-transaction to run on an executor of this DC.
    Run(SubTxn),
}

/// Runs `sub`, the sub-transaction [`ExecutorCore::begin_execute`] returned, on `executor`
/// at physical time `now_ms`, unless that is past the phase 1's deadline `deadline_ms` (0:
/// none): then it votes abort and touches nothing, as a phase 1 that arrives late does (a
/// recoverer may already count this replica's missing vote as an abort). What it returns
/// goes to [`ExecutorCore::finish_execute`].
///
/// # Errors
/// The executor's, as [`Executor::execute`].
pub fn run_phase1(
    executor: &mut Executor,
    sub: &SubTxn,
    deadline_ms: u64,
    now_ms: u64,
) -> redt_dc_executor::Result<Vote> {
    if deadline_ms != 0 && now_ms > deadline_ms {
        let why = "phase 1 ran after its deadline".to_string();
        return Ok(Vote::aborted(sub.txn, Cts(0), AbortReason::User(why)));
    }
    executor.execute(sub, now_ms)
}

/// What [`ExecutorCore::handle`] produced: the reply, and the catch-up the driver must then
/// deliver on the executor's behalf.
#[derive(Debug)]
pub struct Handled {
    /// The reply to the request.
    pub reply: Reply,
    /// The catch-ups this node now owes (docs/design.md §2, phase 2), one per transaction: per
    /// replica node an [`Accept`] of the new values carrying the commit, to deliver with a
    /// [`crate::catch_up::Shipper`], and the redo entries whose catch-up mask to clear
    /// ([`ExecutorCore::clear_owed`]) once it is done. A phase 2's, or those of the phase 2s
    /// a phase 1 carried ([`ExecutorCore::apply_carried`]).
    pub catch_up: Vec<CatchUpDebt>,
    /// `Some((t, request))`: the request was a phase 1 that met a lock held by another
    /// transaction and waits for it ([`ExecutorCore::with_lock_wait`]): it is not answered,
    /// `reply` is a placeholder not to be sent, and the driver hands `request` (the phase 1,
    /// given back) to [`ExecutorCore::handle`] again at `t` (ms, the clock of `now_ms`), or
    /// earlier once a decision applied on this node may have released the lock.
    pub retry: Option<(u64, Request)>,
}

impl Handled {
    fn reply(reply: Reply) -> Handled {
        Handled { reply, catch_up: Vec::new(), retry: None }
    }

    /// Phase 1 `args`, waiting for a lock, to be tried again at `at_ms`.
    fn waiting(at_ms: u64, args: Execute) -> Handled {
        Handled { reply: Reply::Ack, catch_up: Vec::new(), retry: Some((at_ms, Request::Execute(args))) }
    }

    fn error(code: u32, message: String) -> Handled {
        Handled::reply(Reply::Error { code, message })
    }
}

/// One chunk of a snapshot copy as a voter reads it: the records, the bucket to ask from next
/// (`None`: the end), and the voter's deletion horizon, READ before the buckets.
pub type SnapshotChunkRead = (Vec<redt_dc_executor::SnapshotRecord>, Option<u64>, Cts);

/// The executor side of one node (its state lives in memory and is lost on a crash, exactly
/// like a killed process's; what survives is in the MemStore).
pub struct ExecutorCore {
    /// The placements this node applied: phase 1 runs in the current one only.
    epochs: Arc<Epochs>,
    node: NodeId,
    dc_id: DcId,
    executor: Executor,
    hlc: Arc<Hlc>,
    /// Commit votes awaiting their decision (their redo entries hold the locks); at most
    /// `limits.max_pending_votes`, the oldest forgotten first (see the module's docs).
    pending: Capped<TxnId, Vote>,
    /// Transactions whose commit vote `pending` forgot (bounded): a repeated phase 1 of one
    /// is refused rather than run again.
    forgotten_votes: TxnSet,
    /// Commit votes `pending` forgot since this core started.
    votes_forgotten: u64,
    /// Transactions decided (abort) before their phase 1 ran here, or that voted abort here.
    fences: TxnSet,
    /// Transactions whose decision this node applied (bounded).
    decided: TxnSet,
    /// Of those, the ones whose decision here was a commit (bounded): a coordinator's late
    /// ballot-0 abort record is refused for them ([`ExecutorCore::record`]).
    committed: TxnSet,
    /// As a secondary (baselines, catch-up): redo accepted per (transaction, sender),
    /// awaiting its decision; at most `limits.max_accepted_redo` pairs, the oldest forgotten
    /// first (see the module's docs).
    accepted: Capped<(TxnId, NodeId), Vec<EntryRef>>,
    /// Pairs `accepted` forgot since this core started: once one was, a decision finding
    /// nothing remembered scans the ring.
    accepted_forgotten: u64,
    /// As a secondary: the `Logged` replica entries this node's ring held when a decision
    /// first named redo this process never accepted (a previous life of the process accepted
    /// it), by transaction. Read from the ring once, on that first miss.
    accepted_before: Option<HashMap<TxnId, Vec<EntryRef>>>,
    /// As a secondary: the decisions received (some before their redo).
    early_decisions: DecisionMemory,
    /// Baselines, as a coordinator's backup: the decisions logged here.
    decision_log: DecisionMemory,
    mutations: ExecutorMutations,
    /// How long after its delete a deleted record may be freed (`redt_dc_executor`'s
    /// `deleted.rs`); `None`: never.
    deleted_grace: Option<std::time::Duration>,
    /// The clock-skew bound (ms) a catch-up floor is lowered by ([`ExecutorCore::with_deleted_grace`]).
    clock_skew_bound_ms: u64,
    /// Partitions this node is a learner of whose snapshot copy is under way, with the keys a
    /// chunk or a replica change wrote since it began ([`ExecutorCore::begin_refresh`]).
    refreshed: HashMap<PartitionId, HashSet<(redt_proto::TableId, u64)>>,
    /// The next index bucket of the sweep for deleted records after a start
    /// ([`ExecutorCore::retire_deleted`]); `None` once done.
    sweep: Option<u64>,
    /// How long a phase 1 that meets a lock waits for it, ms (0: No-Wait).
    lock_wait_ms: u64,
    /// The phase 1s waiting for a lock: when each first met one (ms) and how many tries it
    /// made; at most `limits.max_pending_votes`, the oldest forgotten first (a forgotten one
    /// starts its wait again at its next try).
    waiting: Capped<TxnId, (u64, u32)>,
}

impl ExecutorCore {
    /// The executor side of node `node`, over its DC's data path, with the node's placements
    /// `epochs` (shared with its coordinators) and hybrid logical clock `hlc`.
    ///
    /// # Panics
    /// If `node` is not in the topology (a node is only built from its own topology).
    pub fn new(epochs: Arc<Epochs>, node: NodeId, dc: Arc<DcHandle>, hlc: Arc<Hlc>) -> Self {
        let dc_id = epochs.current().nodes[node.0 as usize].dc;
        let limits = epochs.current().limits;
        // A node whose ring was never written holds no deleted record a previous life knew of:
        // deletes reach a node through its ring (a phase 2, a catch-up); so a new store is not
        // swept. An unreadable ring is swept.
        let written =
            redt_dc_executor::ring::ring_bounds(dc.verbs.as_ref(), node, &dc.layout).map_or(true, |b| b.1 > 0);
        ExecutorCore {
            epochs,
            node,
            dc_id,
            executor: Executor::new(dc, hlc.clone()),
            hlc,
            pending: Capped::new(limits.max_pending_votes),
            forgotten_votes: TxnSet::default(),
            votes_forgotten: 0,
            fences: TxnSet::default(),
            decided: TxnSet::default(),
            committed: TxnSet::default(),
            accepted: Capped::new(limits.max_accepted_redo),
            accepted_forgotten: 0,
            accepted_before: None,
            early_decisions: DecisionMemory::default(),
            decision_log: DecisionMemory::default(),
            mutations: ExecutorMutations::default(),
            deleted_grace: None,
            clock_skew_bound_ms: 0,
            refreshed: HashMap::new(),
            sweep: written.then_some(0),
            lock_wait_ms: 0,
            waiting: Capped::new(limits.max_pending_votes),
        }
    }

    /// Sets how long a phase 1 that meets a lock held by another transaction waits for it
    /// before it votes abort (docs/design.md §2, "Waiting for a lock"; zero, the default:
    /// No-Wait). A waiting phase 1 holds nothing: each try that meets a lock gives back what
    /// it took and marks its redo entries aborted, and the next try runs the whole phase 1
    /// again, checks included, so a decision, a fence, a new epoch or the phase-1 deadline
    /// that arrives meanwhile ends the wait. Tries are 1 ms apart, doubling up to a quarter
    /// of the wait; the driver tries sooner after a decision applied here.
    pub fn with_lock_wait(mut self, wait: std::time::Duration) -> Self {
        self.lock_wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// When a phase 1 of `args` whose try at `now_ms` met a lock tries again, or `None` when
    /// it waited long enough (the lock wait, or the next try would reach its phase-1
    /// deadline): then it votes abort.
    fn next_try(&mut self, args: &Execute, now_ms: u64) -> Option<u64> {
        if self.lock_wait_ms == 0 {
            return None;
        }
        let (first, tries) = self.waiting.get(&args.txn).copied().unwrap_or((now_ms, 0));
        let step = (1u64 << tries.min(20)).min((self.lock_wait_ms / 4).max(1));
        let at = now_ms.saturating_add(step);
        let past_deadline = args.deadline_ms != 0 && at >= args.deadline_ms;
        if at > first.saturating_add(self.lock_wait_ms) || past_deadline {
            return None;
        }
        self.waiting.insert(args.txn, (first, tries + 1));
        Some(at)
    }

    /// Turns the freeing of deleted records on with `Some(grace)`, how long after its commit
    /// timestamp a deleted record may be freed (a node takes
    /// [`crate::RecoveryOptions::deleted_grace`] when `limits.free_deleted_records` is set; the
    /// simulation's shorter runs a shorter one), or off with `None` (the default).
    /// `clock_skew_bound` is the topology's (`RecoveryOptions::clock_skew_bound`): every
    /// replica's catch-up floor is lowered by it (`redt_dc_executor::DcHandle::catch_up_floor`).
    pub fn with_deleted_grace(
        mut self,
        grace: Option<std::time::Duration>,
        clock_skew_bound: std::time::Duration,
    ) -> Self {
        self.deleted_grace = grace;
        self.clock_skew_bound_ms = u64::try_from(clock_skew_bound.as_millis()).unwrap_or(u64::MAX);
        self.executor.set_deleted_grace(grace);
        self
    }

    /// Applies the mutations and options this core keeps to its executor (after a new one).
    fn configure_executor(&mut self) {
        let m = self.mutations;
        self.executor.set_fence_entries(!mutant!(m.no_fence_entries));
        self.executor.set_fence_after_full_ring(!mutant!(m.no_fence_after_full_ring));
        self.executor.set_promise_table(!mutant!(m.no_promise_table));
        self.executor.set_thomas_rule(m.thomas_rule());
        self.executor.set_first_record_stays(mutant!(m.first_record_stays));
        self.executor.set_deletion_horizon(!mutant!(m.free_deleted_without_horizon));
        self.executor.set_deleted_grace(self.deleted_grace);
        self.executor.set_prepare_reads_first_try(mutant!(m.prepare_reads_first_try));
        self.executor.set_version_checks(!mutant!(m.skip_version_checks));
    }

    /// Sets how long a ring reservation waits for replay before voting abort with
    /// `RingFull` (200 ms by default; the simulation uses zero: replay is another event).
    pub fn with_ring_patience(mut self, patience: std::time::Duration) -> Self {
        let dc = self.executor.dc().clone();
        self.executor = Executor::new(dc, self.hlc.clone()).with_ring_patience(patience);
        self.configure_executor();
        self
    }

    /// Turns deliberate bugs on (tests of the simulation only).
    pub fn with_mutations(mut self, mutations: ExecutorMutations) -> Self {
        self.mutations = mutations;
        self.configure_executor();
        self
    }

    /// A second executor over this node's DC, for phase 1s run on another thread than this
    /// core's ([`Phase1::Run`]): the same clock and ring patience, its own ring writers. Its
    /// reservations are its own to report ([`Executor::reservations`]).
    pub fn side_executor(&self) -> Executor {
        let mut side = Executor::new(self.executor.dc().clone(), self.hlc.clone())
            .with_ring_patience(self.executor.ring_patience());
        side.set_version_checks(!mutant!(self.mutations.skip_version_checks));
        side
    }

    /// This node's hybrid logical clock.
    pub fn hlc(&self) -> &Arc<Hlc> {
        &self.hlc
    }

    /// This node.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The placements (topologies by epoch) this core runs under.
    pub fn epochs(&self) -> &Arc<Epochs> {
        &self.epochs
    }

    /// This node's DC.
    pub fn dc(&self) -> DcId {
        self.dc_id
    }

    /// The gap at the head of this node's ring, if any (`redt_dc_executor::head_gap`).
    ///
    /// # Errors
    /// Verbs failures.
    pub fn head_gap(&self) -> Result<Option<Gap>> {
        let dc = self.executor.dc();
        Ok(redt_dc_executor::head_gap(dc.verbs.as_ref(), self.node, &dc.layout)?)
    }

    /// The undecided entries of this node's ring (`Intent` or `Logged`), as `(ring index,
    /// entry)` in ring order: what the recovery scan looks at
    /// (`redt_dc_executor::unfinished_entries`; docs/design.md §2, recovery).
    ///
    /// # Errors
    /// Verbs failures.
    pub fn unfinished_entries(&self) -> Result<Vec<(u64, RedoEntry)>> {
        let dc = self.executor.dc();
        Ok(redt_dc_executor::unfinished_entries(dc.verbs.as_ref(), self.node, &dc.layout)?)
    }

    /// How many records of this node hold a lock now (`redt status --locks`): a full scan of
    /// its index, one READ per record ([`redt_dc_executor::DcHandle::locked_records`]).
    ///
    /// # Errors
    /// Verbs failures.
    pub fn locks_held(&self) -> Result<u64> {
        Ok(self.executor.dc().locked_records(self.node)?.len() as u64)
    }

    /// Covers `gap` of this node's ring with fillers, once every writer of the DC said it
    /// holds no slot of it ([`crate::gap_watch::GapWatch`]). Returns the slots covered.
    ///
    /// # Errors
    /// Verbs failures.
    pub fn fill_gap(&mut self, gap: Gap) -> Result<u64> {
        Ok(self.executor.fill_gap(self.node, gap)?)
    }

    /// Handles one request from `from` at physical time `now_ms` (milliseconds since
    /// `redt_dc_executor::ORIGIN_UNIX_MS`, the node's own clock). Phase 1 with the baselines'
    /// `replicate`, and a decision for a baseline primary, need the network in the middle and
    /// are not handled here (they are answered with a `MALFORMED` error), nor is a 2PC-Paxos
    /// prepare: the baseline primary's state machine serves them
    /// (`crate::baseline::PrimaryTxn`).
    ///
    /// Under `durability: disk` the answer to a recorded decision, a phase 2, an accepted
    /// redo or a recovery promise is sent only once the DC's MemStore images hold what the
    /// request wrote (`redt_dc_executor::persist`; a phase 1 syncs inside the executor).
    pub fn handle(&mut self, from: NodeId, request: Request, now_ms: u64) -> Handled {
        let must_persist = matches!(
            request,
            Request::Record(_) | Request::Decide(_) | Request::Accept(_) | Request::RecoveryPrepare(_)
        );
        let handled = self.handle_unsynced(from, request, now_ms);
        if must_persist && self.executor.dc().durable && !matches!(handled.reply, Reply::Error { .. }) {
            let topology = self.epochs.current();
            let nodes = topology.nodes.iter().filter(|n| n.dc == self.dc_id).map(|n| n.id);
            if let Err(e) = self.executor.dc().persist(nodes) {
                return Handled::error(error_code::INTERNAL, {
                    let t = self.epochs.current();
                    format!(
                        "{}: what this request wrote could not be made durable: {}",
                        t.node_name(self.node),
                        e.named(&t)
                    )
                });
            }
        }
        handled
    }

    /// One step of the sweep for deleted records after a start ([`ExecutorCore::sweep_deleted`]),
    /// run at the start of each reclaim round while it lasts, off the requests' path. A failure
    /// is logged: the step is tried again at the next round.
    fn sweep_step(&mut self) {
        if self.sweep.is_none() {
            return;
        }
        if let Err(e) = self.sweep_deleted() {
            let t = self.epochs.current();
            tracing::warn!(node = %t.node_name(self.node), "sweeping for deleted records failed: {}", e.named(&t));
        }
    }

    /// Starts a round of freeing the deleted records whose grace has passed at `now_ms`, up to
    /// [`ReclaimKey::MAX_PER_CHECK`] (docs/design.md, "Records reclaimed"): a record is freed only once every
    /// other replica of its key's partition (voters and learners of the current placement)
    /// holds the delete too (`redt_dc_executor::DcHandle::holds_delete`), so no replica frees
    /// a key another still holds an older row of, which a learner copying from both would
    /// merge back, and every replica frees it in the end; and only at or below its own node's
    /// catch-up floor (each other replica's is checked by [`ExecutorCore::finish_reclaims`]).
    /// Records with no other replica are freed now. A step of the sweep after a start runs
    /// first. Returns the checks to send, one [`Request::ReclaimCheck`] per node, for the
    /// driver to answer with [`ExecutorCore::finish_reclaims`]; `None` when there is nothing
    /// to ask. Failures are logged: the records stay for another try.
    pub fn take_reclaims(&mut self, now_ms: u64) -> Option<ReclaimRound> {
        self.sweep_step();
        let mut taken = Vec::new();
        while taken.len() < ReclaimKey::MAX_PER_CHECK {
            let batch = self.executor.take_deleted_due(now_ms);
            if batch.is_empty() {
                break;
            }
            taken.extend(batch);
        }
        if taken.is_empty() {
            return None;
        }
        let current = self.epochs.current();
        let mut free_now = Vec::new();
        let mut candidates = Vec::new();
        let mut by_node: BTreeMap<NodeId, (Vec<ReclaimKey>, Vec<usize>)> = BTreeMap::new();
        let mut floors: BTreeMap<NodeId, Option<Option<Cts>>> = BTreeMap::new();
        for (tries, r) in taken {
            if !mutant!(self.mutations.reclaim_below_no_floor) {
                let floor = *floors.entry(r.node).or_insert_with(|| self.catch_up_floor(r.node));
                if !below(r.cts, floor) {
                    self.executor.deleted_held(now_ms, tries, r);
                    continue;
                }
            }
            let Some(table) = current.table(r.table) else { continue };
            let Some(part) = current.partitions.get(current.partition_of(table, r.key).0 as usize) else { continue };
            let others: Vec<NodeId> = part
                .replicas
                .iter()
                .copied()
                .chain(part.learners.iter().map(|l| l.node))
                .filter(|&n| n != self.node)
                .collect();
            if others.is_empty() || mutant!(self.mutations.reclaim_without_check) {
                free_now.push((tries, r));
                continue;
            }
            let i = candidates.len();
            candidates.push((tries, r));
            for n in others {
                let (keys, indexes) = by_node.entry(n).or_default();
                keys.push(ReclaimKey { table: r.table, key: r.key, cts: r.cts });
                indexes.push(i);
            }
        }
        if let Err(e) = self.executor.retire_taken(now_ms, free_now) {
            tracing::warn!(node = %current.node_name(self.node), "freeing deleted records failed: {}", Error::from(e).named(&current));
        }
        if candidates.is_empty() {
            return None;
        }
        let mut asks = Vec::with_capacity(by_node.len());
        let mut indexes = Vec::with_capacity(by_node.len());
        for (n, (keys, idx)) in by_node {
            asks.push((n, Request::ReclaimCheck(keys)));
            indexes.push(idx);
        }
        Some(ReclaimRound { candidates, asks, indexes })
    }

    /// Ends a round of [`ExecutorCore::take_reclaims`] at `now_ms`: `answers[i]` is what node
    /// `round.asks[i].0` answered (`None`: it did not). A record every asked node holds the
    /// delete of, below every asked node's catch-up floor, is freed; one above a floor is held
    /// back a second, the try not counted; the others are tried again a second later, up to 8
    /// times.
    pub fn finish_reclaims(&mut self, round: ReclaimRound, answers: &[Option<ReclaimAnswer>], now_ms: u64) {
        let mut ok = vec![true; round.candidates.len()];
        let mut held = vec![false; round.candidates.len()];
        for (i, indexes) in round.indexes.iter().enumerate() {
            match answers.get(i) {
                Some(Some(a)) if a.holds.len() == indexes.len() => {
                    for (&c, &h) in indexes.iter().zip(&a.holds) {
                        ok[c] &= h;
                        let cts = round.candidates[c].1.cts;
                        held[c] |= !mutant!(self.mutations.reclaim_below_no_floor) && !below(cts, Some(a.floor));
                    }
                }
                _ => indexes.iter().for_each(|&c| ok[c] = false),
            }
        }
        let mut free = Vec::new();
        for (((tries, r), ok), held) in round.candidates.into_iter().zip(ok).zip(held) {
            if held {
                self.executor.deleted_held(now_ms, tries, r);
            } else if ok {
                free.push((tries, r));
            } else {
                self.executor.deleted_busy(now_ms, tries, r);
            }
        }
        if let Err(e) = self.executor.retire_taken(now_ms, free) {
            let t = self.epochs.current();
            tracing::warn!(node = %t.node_name(self.node), "freeing deleted records failed: {}", Error::from(e).named(&t));
        }
    }

    /// `node`'s catch-up floor (`redt_dc_executor::DcHandle::catch_up_floor`): `Some(None)`
    /// when no entry of its ring may still make a catch-up, `None` when the ring could not be
    /// read (nothing is freed then).
    fn catch_up_floor(&self, node: NodeId) -> Option<Option<Cts>> {
        match self.executor.dc().catch_up_floor(node, self.clock_skew_bound_ms) {
            Ok(floor) => Some(floor),
            Err(e) => {
                let t = self.epochs.current();
                tracing::warn!(node = %t.node_name(node), "reading the catch-up floor failed: {}", Error::from(e).named(&t));
                None
            }
        }
    }

    /// One step of the sweep a started core makes once over its node's records, when freeing
    /// is on: the deleted records a previous life of the process remembered to free (its
    /// queue is in memory) are remembered again. [`SWEEP_BUCKETS`] index buckets per reclaim
    /// round; a bucket holding a record in use is swept again at the next.
    fn sweep_deleted(&mut self) -> Result<()> {
        let Some(from) = self.sweep else { return Ok(()) };
        if !self.executor.frees_deleted() {
            self.sweep = None;
            return Ok(());
        }
        let dc = self.executor.dc().clone();
        let chunk = redt_dc_executor::read_snapshot(&dc, self.node, from, SWEEP_BUCKETS, usize::MAX, &|_, _| true)?;
        self.queue_deleted_records(&chunk.records)?;
        self.sweep = chunk.next;
        Ok(())
    }

    /// How many records' catch-up changes were left out here as superseded by the record's
    /// floor since the last call (`redt_dc_executor::Executor::take_superseded`; the
    /// simulation reports them).
    pub fn take_superseded(&mut self) -> u64 {
        self.executor.take_superseded()
    }

    /// Records freed after a delete, candidates waiting, candidates forgotten (`redt status`).
    pub fn deleted_records(&self) -> (u64, usize, u64) {
        let q = self.executor.deleted_records();
        (q.freed, q.len(), q.forgotten)
    }

    /// The answer to a phase 1 that gave `vote`: the vote, or the error named in this node's
    /// topology.
    pub fn answer_vote(&self, vote: Result<Vote>) -> Handled {
        match vote {
            Ok(vote) => Handled::reply(Reply::Vote { dc: self.dc_id, vote, nested: Default::default() }),
            Err(e) => Handled::error(e.reply_code(), e.named(&self.epochs.current())),
        }
    }

    /// [`ExecutorCore::handle`] before the sync of the answer's writes.
    fn handle_unsynced(&mut self, from: NodeId, request: Request, now_ms: u64) -> Handled {
        match request {
            Request::Execute(mut e) if !e.replicate => {
                let paid = self.apply_carried(&mut e);
                let mut handled = self.execute_or_wait(e, now_ms);
                handled.catch_up.extend(paid);
                handled
            }
            Request::Record(Record { txn, ballot, decision, entries }) => {
                match self.record(txn, decision, ballot, &entries) {
                    Ok(ok) => Handled::reply(Reply::Recorded(ok)),
                    Err(e) => Handled::error(error_code::INTERNAL, e.named(&self.epochs.current())),
                }
            }
            Request::Decide(Decide { txn, ballot, decision, entries, role: DecideRole::Executor, catch_up }) => {
                // Ballot 0 is the coordinator's own phase 2; a recoverer decides with its ballot.
                let from_coordinator = ballot == Ballot(0);
                match self.decide_with_catch_up(txn, decision, &entries, &catch_up, from_coordinator) {
                    Ok(catch_up) => {
                        if !from_coordinator {
                            self.release_promises(txn);
                        }
                        Handled {
                            reply: Reply::Decided(Default::default()),
                            catch_up: catch_up.into_iter().collect(),
                            retry: None,
                        }
                    }
                    Err(e) => Handled::error(error_code::INTERNAL, e.named(&self.epochs.current())),
                }
            }
            Request::Decide(Decide { txn, decision, role: DecideRole::Secondary, .. }) => {
                match self.settle(txn, from, decision) {
                    Ok(()) => Handled::reply(Reply::Decided(Default::default())),
                    Err(e) => Handled::error(error_code::INTERNAL, e.named(&self.epochs.current())),
                }
            }
            Request::Accept(Accept { mut origin, changes, decided, behind }) => {
                origin.epoch = self.epochs.epoch();
                if let (true, Some(Decision::Commit(cts))) = (behind, decided) {
                    match self.drop_stale_redo(origin.txn, &changes, cts) {
                        Ok(true) => {}
                        Ok(false) => {
                            return Handled::error(
                                error_code::NOT_READY,
                                format!(
                                    "{}: a record the catch-up of {} writes is in use; retry",
                                    self.epochs.current().node_name(self.node),
                                    origin.txn
                                ),
                            )
                        }
                        Err(e) => return Handled::error(e.reply_code(), e.named(&self.epochs.current())),
                    }
                }
                match self.accept(from, &origin, &changes, decided) {
                    Ok(ok) => {
                        if ok {
                            self.note_refreshed(changes.iter().map(|c| (c.table, c.key)));
                            if let Some(Decision::Commit(cts)) = decided {
                                self.queue_shipped_deletes(&changes, cts);
                            }
                        }
                        Handled::reply(Reply::Accepted(ok))
                    }
                    Err(e) => Handled::error(e.reply_code(), e.named(&self.epochs.current())),
                }
            }
            // A node that is a voter of nothing (removed, or back and only a learner) trusts
            // nothing it held from before and drops its older undecided entries: it answers no
            // recoverer, which counts it as unreachable.
            Request::RecoveryPrepare(_) if !self.epochs.holds_voter(self.node) => Handled::error(
                error_code::NOT_READY,
                format!(
                    "{} holds no voting replica in {}: removed, nothing held here is trusted",
                    self.epochs.current().node_name(self.node),
                    self.epochs.epoch()
                ),
            ),
            Request::RecoveryPrepare(RecoveryPrepare {
                txn,
                ballot,
                start,
                partitions,
                epoch,
                coordinator,
                participants,
            }) => {
                // A node the current placement makes a voter of nothing (removed on its own
                // while its DC serves) is left out: recoverers ignore its promises, and its
                // memory may be out of reach with its process.
                let mut nodes = self.replica_nodes(&partitions, epoch);
                nodes.retain(|&n| n == self.node || self.epochs.holds_voter(n));
                let prepared =
                    redt_dc_executor::PreparedTxn { txn, start, epoch, coordinator, participants, partitions };
                match self.executor.prepare(&prepared, ballot, &nodes) {
                    Ok(promises) => {
                        // Whatever the answer, a phase 1 of `txn` arriving now must not lock.
                        self.fences.insert(txn);
                        Handled::reply(Reply::Promises(promises))
                    }
                    Err(e) => Handled::error(error_code::INTERNAL, e.named(&self.epochs.current())),
                }
            }
            Request::SnapshotRead(r) => match self.snapshot_read(&r) {
                Ok(Ok((records, next, horizon))) => Handled::reply(Reply::Snapshot { records, next, horizon }),
                Ok(Err(why)) => Handled::error(error_code::NOT_READY, why),
                Err(e) => Handled::error(e.reply_code(), e.named(&self.epochs.current())),
            },
            Request::Reservations(Reservations { ring }) => match self.executor.reservations(ring) {
                Ok(held) => Handled::reply(Reply::Reserved(held)),
                Err(e) => Handled::error(error_code::INTERNAL, e.named(&self.epochs.current())),
            },
            Request::LogDecision(LogDecision { txn, decision, .. }) => {
                self.log_decision(txn, decision);
                Handled::reply(Reply::Ack)
            }
            Request::ReclaimCheck(keys) => {
                let dc = self.executor.dc().clone();
                let Some(floor) = self.catch_up_floor(self.node) else {
                    return Handled::error(
                        error_code::INTERNAL,
                        "the ring could not be read for its catch-up floor".into(),
                    );
                };
                let holds =
                    keys.iter().map(|k| dc.holds_delete(self.node, k.table, k.key, k.cts).unwrap_or(false)).collect();
                Handled::reply(Reply::ReclaimChecked(ReclaimAnswer { holds, floor }))
            }
            Request::VersionedRead { table, keys } => match self.versioned_read(table, &keys) {
                Ok(items) => Handled::reply(Reply::VersionedValues(items)),
                Err(e) => Handled::error(e.code(), e.to_string()),
            },
            Request::Execute(_) | Request::Decide(_) | Request::Prepare(_) => {
                Handled::error(error_code::MALFORMED, "a baseline request reached the RedT executor core".into())
            }
        }
    }

    /// A versioned read of cell 0 of `keys` of `table` (wire id) from this node's DC, without
    /// locks ([`crate::versioned_read`]): every key must have a voting replica of its partition
    /// in the DC under the current placement. One answer per key, in order.
    ///
    /// # Errors
    /// As [`crate::versioned_read::check`] and [`crate::versioned_read::read_local`].
    pub fn versioned_read(
        &self,
        table: u32,
        keys: &[u64],
    ) -> std::result::Result<Vec<crate::versioned_read::Versioned>, crate::versioned_read::ReadRefused> {
        let topology = self.epochs.current();
        let table = crate::versioned_read::check(&topology, table, keys)?;
        crate::versioned_read::read_local(self.executor.dc(), &topology, self.dc_id, table, keys)
    }

    /// Applies the phase 2s `args` carries ([`Execute::carried`]: decided-holder takeover,
    /// [`crate::takeover`]), each exactly as its own delivery would (the catch-ups it owes
    /// returned to be paid), and leaves none on `args`, so the phase 1 then finds their locks
    /// released. A carried phase 2 that fails is left to its own delivery, which follows.
    pub fn apply_carried(&mut self, args: &mut Execute) -> Vec<CatchUpDebt> {
        let mut debts = Vec::new();
        for d in std::mem::take(&mut args.carried) {
            if d.role != DecideRole::Executor || d.ballot != Ballot(0) {
                continue;
            }
            let skip = mutant!(self.mutations.carried_without_catch_up);
            let targets = if skip { Vec::new() } else { d.catch_up };
            match self.decide_with_catch_up(d.txn, d.decision, &d.entries, &targets, true) {
                Ok(debt) => debts.extend(debt),
                Err(e) => {
                    tracing::debug!(txn = %d.txn, error = %e.named(&self.epochs.current()), "a carried phase 2 failed")
                }
            }
        }
        debts
    }

    /// One try of phase 1 of `args` at `now_ms`: its answer, or, when it met a lock held by
    /// another transaction and may wait longer ([`ExecutorCore::with_lock_wait`]), when to
    /// try again. The wait ends with the answer of the try that gets every lock (or of the
    /// checks of [`ExecutorCore::begin_execute`]), or with the abort vote of the last try.
    fn execute_or_wait(&mut self, args: Execute, now_ms: u64) -> Handled {
        let vote = match self.begin_execute(&args, now_ms) {
            Ok(Phase1::Answered(vote)) => Ok(vote),
            Ok(Phase1::Run(sub)) => {
                let vote = self.executor.execute(&sub, now_ms);
                let conflict = matches!(&vote, Ok(v) if matches!(v.abort, Some(AbortReason::LockConflict { .. })));
                if conflict {
                    if let Some(at) = self.next_try(&args, now_ms) {
                        return Handled::waiting(at, args);
                    }
                }
                self.finish_execute(args.txn, vote)
            }
            Err(e) => Err(e),
        };
        self.waiting.remove(&args.txn);
        self.answer_vote(vote)
    }

    /// Runs phase 1 of `args` on this DC's replicas at physical time `now_ms` and returns the
    /// vote. A transaction already decided or fenced here votes abort without touching a
    /// lock; one that already voted here and awaits its decision (a repeated phase 1) gets its
    /// vote again.
    ///
    /// # Errors
    /// [`Error::OverLimit`] for a request over the topology's limits (more participant DCs or
    /// partitions than it has, a call over `limits:`) and [`Error::BadCall`] for a malformed
    /// one, both before anything is planned or reserved; a data-path failure.
    pub fn execute(&mut self, args: &Execute, now_ms: u64) -> Result<Vote> {
        match self.begin_execute(args, now_ms)? {
            Phase1::Answered(vote) => Ok(vote),
            Phase1::Run(sub) => {
                let vote = self.executor.execute(&sub, now_ms);
                self.finish_execute(args.txn, vote)
            }
        }
    }

    /// The first part of [`ExecutorCore::execute`]: the checks against what this node
    /// remembers (decided, fenced, already voted, the epoch, the limits) and the plan of its
    /// accesses. Returns the answer when the checks give one, else the sub-transaction for an
    /// executor of this DC to run ([`ExecutorCore::side_executor`] on another thread for a
    /// large one), whose vote then goes to [`ExecutorCore::finish_execute`]. Nothing about
    /// `args.txn` may reach this core in between (the node's driver holds such requests back).
    ///
    /// # Errors
    /// As [`ExecutorCore::execute`], for what is checked before anything is planned.
    pub fn begin_execute(&mut self, args: &Execute, now_ms: u64) -> Result<Phase1> {
        let abort = |reason| Vote::aborted(args.txn, Cts(0), reason);
        if self.forgotten_votes.contains(&args.txn)
            && !self.pending.contains_key(&args.txn)
            && !self.fences.contains(&args.txn)
            && !self.decided.contains(&args.txn)
            && !mutant!(self.mutations.late_phase1_takes_locks)
        {
            // A repeated phase 1 whose commit vote was forgotten over the cap: running it
            // again could vote otherwise, and an abort vote or a fence here could hide the
            // ring's commit vote (see the module's docs). Refused, like a lost message.
            let max = self.pending.cap as u64;
            return Err(OverLimit { limit: Limit::PendingVotes, got: max.saturating_add(1), max }.into());
        }
        if args.deadline_ms != 0 && now_ms > args.deadline_ms && !self.pending.contains_key(&args.txn) {
            // A recoverer may already count this replica's missing vote as an abort.
            self.fences.insert(args.txn);
            return Ok(Phase1::Answered(abort(AbortReason::User("phase 1 arrived after its deadline".into()))));
        }
        if !mutant!(self.mutations.late_phase1_takes_locks) {
            if self.fences.contains(&args.txn) {
                return Ok(Phase1::Answered(abort(AbortReason::User("decided before its phase 1 arrived".into()))));
            }
            if self.decided.contains(&args.txn) {
                return Ok(Phase1::Answered(abort(AbortReason::User(
                    "already decided here (a repeated phase 1)".into(),
                ))));
            }
            if let Some(vote) = self.pending.get(&args.txn) {
                // A repeated phase 1 (a duplicate, a retry) gets the same vote: a different
                // answer could make the coordinator skip this DC in phase 2.
                return Ok(Phase1::Answered(vote.clone()));
            }
        }
        let topology = self.epochs.current();
        if args.epoch != topology.epoch && !mutant!(self.mutations.accept_other_epoch) {
            // The epoch fence (docs/design.md, "Failover"): a transaction planned in another placement
            // must not lock here. Fenced, as any abort vote: once this node applies the
            // transaction's epoch, a repeated phase 1 must not vote commit after the
            // coordinator counted this abort.
            self.fences.insert(args.txn);
            let why = if args.epoch < topology.epoch { "not in current epoch" } else { "epoch not applied here yet" };
            return Ok(Phase1::Answered(abort(AbortReason::User(format!(
                "{why}: planned in {}, this node is at {}",
                args.epoch, topology.epoch
            )))));
        }
        // Not trusted to have been checked by its sender: the limits again, before anything
        // is planned or reserved.
        match crate::limits::check_sub_txn(&topology, &args.participants, &args.partitions) {
            Ok(()) => {}
            Err(crate::limits::BadSubTxn::OverLimit(over)) => return Err(over.into()),
            Err(crate::limits::BadSubTxn::Malformed(why)) => return Err(Error::BadCall(why)),
        }
        let procedure = call::procedure(&topology, &args.call)?;
        #[cfg(feature = "mutants")]
        let procedure = match &args.call.kind {
            Some(redt_proto::wire::ProcedureKind::Batch(b)) => {
                let m = self.mutations;
                let mut batch = call::batch(&topology, b)?;
                if m.batch_without_overlay {
                    batch = batch.without_overlay();
                }
                if m.batch_first_writer_wins {
                    batch = batch.first_writer_wins();
                }
                if m.batch_order_by_dc && self.dc_id.0 % 2 == 1 {
                    batch = batch.reversed();
                }
                std::sync::Arc::new(batch)
            }
            _ => procedure,
        };
        let plan = plan::plan(&topology, procedure.as_ref())?;
        let local = plan::scoped_accesses(&plan, self.dc_id, self.node, args.scope);
        let sub = SubTxn {
            txn: args.txn,
            epoch: topology.epoch,
            coordinator: args.coordinator,
            start: args.start,
            participants: args.participants.clone(),
            partitions: args.partitions.clone(),
            procedure,
            local,
        };
        Ok(Phase1::Run(sub))
    }

    /// The last part of [`ExecutorCore::execute`]: remembers the vote `vote` of `txn` that an
    /// executor of this DC gave for the sub-transaction [`ExecutorCore::begin_execute`]
    /// returned (a commit vote awaits its decision; an abort vote fences the transaction) and
    /// returns it.
    ///
    /// # Errors
    /// The executor's data-path failure, as given.
    pub fn finish_execute(&mut self, txn: TxnId, vote: redt_dc_executor::Result<Vote>) -> Result<Vote> {
        let vote = vote?;
        if vote.is_commit() {
            if let Some((forgotten, _)) = self.pending.insert(txn, vote.clone()) {
                self.votes_forgotten += 1;
                self.forgotten_votes.insert(forgotten);
                if self.votes_forgotten == 1 {
                    tracing::warn!(node = %self.epochs.current().node_name(self.node), txn = %forgotten, max = self.pending.cap,
                        "a commit vote awaiting its decision was forgotten (limits.max_pending_votes): its entries wait in the ring");
                }
            }
        } else {
            // An abort vote decides the transaction: a repeated phase 1 (a duplicate, held
            // back past this one) must not run again, take locks, and vote commit where the
            // coordinator, having counted the abort, sends no decision.
            self.fences.insert(txn);
        }
        Ok(vote)
    }

    /// Records `decision` at `ballot` in the vote words of `entries` (or of the entries this
    /// node remembers for `txn`, or, remembering nothing of it — say after a restart — of
    /// the unfinished entries of `txn` the DC's rings hold). Returns whether all of them record
    /// it. With no entry at all, an abort fences `txn` so a late phase 1 cannot vote commit;
    /// but an abort of a transaction whose commit this node applied (a recoverer's, the
    /// coordinator cut off meanwhile) is refused (`false`).
    ///
    /// # Errors
    /// Data-path failures.
    pub fn record(&mut self, txn: TxnId, decision: Decision, ballot: Ballot, entries: &[EntryRef]) -> Result<bool> {
        let mut entries = if entries.is_empty() { self.pending_entries(txn) } else { entries.to_vec() };
        if entries.is_empty()
            && decision == Decision::Abort
            && self.committed.contains(&txn)
            && !mutant!(self.mutations.record_after_decision_counts)
        {
            // A commit of it was applied here: a recoverer's (the coordinator's own decisions
            // follow its record), whose entries are finished, so no vote word is left to refuse
            // a ballot-0 abort. A coordinator cut off from the DCs past the recovery timeout
            // sends that record once healed; counting this DC would let it acknowledge an
            // abort of a committed transaction. Not counted, it leaves the transaction to its
            // recoverer and answers "unknown".
            return Ok(false);
        }
        if entries.is_empty() && !self.fences.contains(&txn) && !self.decided.contains(&txn) {
            // A commit vote this process no longer remembers (it restarted since its phase 1)
            // is still in the ring: answering "recorded" without recording it there would let
            // the coordinator count this DC toward an abort majority that a recoverer, reading
            // the ring's commit vote, would not see.
            entries = self.entries_in_rings(txn)?;
        }
        if entries.is_empty() {
            if decision == Decision::Abort {
                self.fences.insert(txn);
            }
            tracing::debug!(
                %txn,
                ?decision,
                ?ballot,
                fenced = self.fences.contains(&txn),
                decided = self.decided.contains(&txn),
                "record: no entry here; recorded"
            );
            return Ok(true);
        }
        let recorded = self.executor.record(txn, decision, ballot, &entries)?;
        tracing::debug!(%txn, ?decision, ?ballot, entries = entries.len(), recorded, "record in the entries");
        Ok(recorded)
    }

    /// Frees `txn`'s rows of the promise tables of this DC's nodes, once a recoverer's decision
    /// of it was applied here ([`redt_dc_executor::Executor::release_promises`]): a replica
    /// whose ring had no room for a fence entry kept its promise there, and no later PREPARE
    /// of a decided transaction comes to write the fence entry whose flush would free it. Only
    /// PREPAREs claim rows, so a coordinator's own phase 2 frees none (and reads none). Best
    /// effort: a node its verbs cannot reach keeps its row.
    fn release_promises(&mut self, txn: TxnId) {
        if mutant!(self.mutations.decision_keeps_promise_rows) {
            return;
        }
        let nodes = self.epochs.current().dcs[self.dc_id.0 as usize].nodes.clone();
        if let Err(e) = self.executor.release_promises(txn, &nodes) {
            tracing::debug!(%txn, "promise-table rows left held: {e}");
        }
    }

    /// The unfinished entries of `txn` in the rings of this node's DC: what a decision or a
    /// record acts on when this process remembers nothing of `txn` (it restarted since).
    fn entries_in_rings(&self, txn: TxnId) -> Result<Vec<EntryRef>> {
        let nodes = self.epochs.current().dcs[self.dc_id.0 as usize].nodes.clone();
        Ok(self.executor.find_entries(txn, &nodes)?)
    }

    /// Applies the decision for `txn` to `entries` (or to the entries this node remembers;
    /// with none known, fences `txn` against a late phase 1). A decision for a transaction
    /// already decided here (the last 100,000 are remembered) finishes only the named entries
    /// that still hold `txn` unfinished: the others may have been flushed and their slots
    /// reused.
    ///
    /// # Errors
    /// Data-path failures.
    pub fn decide(&mut self, txn: TxnId, decision: Decision, entries: &[EntryRef]) -> Result<()> {
        self.decide_owing(txn, decision, entries, None)
    }

    /// [`ExecutorCore::decide`], giving each entry finished the catch-up mask `owing` says
    /// (with the commit timestamp an aborted source keeps).
    fn decide_owing(
        &mut self,
        txn: TxnId,
        decision: Decision,
        entries: &[EntryRef],
        owing: Option<Owing<'_>>,
    ) -> Result<()> {
        let remembered = self.pending.remove(&txn).map(|v| v.entries);
        if matches!(decision, Decision::Commit(_)) {
            self.committed.insert(txn);
        }
        if remembered.is_none() && self.decided.contains(&txn) {
            if mutant!(self.mutations.repeated_decision_touches_nothing) {
                return Ok(());
            }
            // A repeated decision: the entries it names may have been reused since, or be a
            // second entry of a phase 1 repeated after a restart that the first did not name.
            // Naming none, it finishes what the rings hold unfinished: a recoverer's fence
            // entry may have been written after the first decision (sim seed 43, bank,
            // default, `all,remove`, 6 s: a removed node, back and not yet told, took a
            // PREPARE after it had applied the abort; the recoverer, ignoring a removed DC's
            // promises, named nothing there).
            let found;
            let entries = if entries.is_empty() {
                found = self.entries_in_rings(txn)?;
                &found[..]
            } else {
                entries
            };
            return Ok(self.executor.finish_again(txn, decision, entries)?);
        }
        if remembered.is_none() && entries.is_empty() {
            self.fences.insert(txn);
        }
        self.decided.insert(txn);
        // Entries the coordinator names and entries remembered here are the same ones, unless
        // the coordinator never got the vote (then it names none). Nothing remembered (this
        // node restarted since its phase 1): the rings are the truth.
        let entries = match (entries.is_empty(), remembered) {
            (false, _) => entries.to_vec(),
            (true, Some(r)) => r,
            (true, None) => self.entries_in_rings(txn)?,
        };
        if entries.is_empty() {
            return Ok(());
        }
        match owing {
            Some((owed, ship_cts)) => Ok(self.executor.finish_owing(txn, decision, &entries, owed, ship_cts)?),
            None => Ok(self.executor.finish(txn, decision, &entries)?),
        }
    }

    /// Applies a phase-2 decision as this DC's executor. As a catch-up source (`catch_up` not
    /// empty) it first reads the DC's redo of `txn` — its slots may be reused once the
    /// decision is applied — then decides each entry with its catch-up mask (docs/design.md §2, "a
    /// catch-up outlives its source": replay applies it but the ring's head stays before it
    /// until [`ExecutorCore::clear_owed`]) and returns the debt: the shipments to the replicas
    /// left behind (per replica node, an accept of the partition's new values carrying the
    /// commit) and the entries holding it. A repeated decision ships nothing again.
    ///
    /// `from_coordinator`: the decision is the coordinator's own phase 2, whose targets it
    /// chose from every vote of its quorum; then the shipments to voters say
    /// [`crate::message::Accept::behind`]. A recoverer's targets come from the promises it
    /// got: a replica it did not hear from may hold the commit already, and the source it
    /// chose may be the one behind (sim seed 70185, bank, world-5dc-n5, `all,remove`, 3 s: a
    /// recoverer's shipment marked `behind` wrote a stale source's value over the commit on
    /// four replicas). Its shipments never say `behind`.
    ///
    /// # Errors
    /// Data-path failures.
    pub fn decide_with_catch_up(
        &mut self,
        txn: TxnId,
        decision: Decision,
        entries: &[EntryRef],
        targets: &[crate::message::CatchUpTarget],
        from_coordinator: bool,
    ) -> Result<Option<CatchUpDebt>> {
        let targets = self.placed(targets);
        if targets.is_empty() || self.decided.contains(&txn) {
            self.decide(txn, decision, entries)?;
            return Ok(None);
        }
        let mut held = if entries.is_empty() { self.pending_entries(txn) } else { entries.to_vec() };
        if held.is_empty() && !self.decided.contains(&txn) {
            // Remembering nothing (restarted since the vote): the rings are the truth, as in
            // `decide`, so the entries it finishes are the ones that ship and hold the debt.
            held = self.entries_in_rings(txn)?;
        }
        let redo = self.redo(txn, &held)?;
        let shipped: BTreeSet<PartitionId> = targets.iter().map(|t| t.partition).collect();
        let ship_cts = targets.iter().map(|t| t.cts).max().unwrap_or(Cts(0));
        let committed = matches!(decision, Decision::Commit(_));
        let durable = !mutant!(self.mutations.catch_up_not_durable);
        let topology = self.epochs.current();
        let owed =
            move |e: &RedoEntry| if durable { catch_up::owed_mask(&topology, e, &shipped, committed) } else { 0 };
        self.decide_owing(txn, decision, &held, Some((&owed, ship_cts)))?;
        let epoch = redo.first().map_or_else(|| self.epochs.epoch(), |e| e.epoch);
        let ship = catch_up::shipments(&self.epochs.get_or_current(epoch), txn, &redo, &targets, from_coordinator);
        Ok(Some(CatchUpDebt { txn, ship, owed: held }))
    }

    /// `targets` without the nodes the current epoch places no replica of the target's
    /// partition on (a removed DC's): nobody owes them a catch-up; they rebuild from a
    /// snapshot if they return (docs/design.md, "Rebuild").
    fn placed(&self, targets: &[crate::message::CatchUpTarget]) -> Vec<crate::message::CatchUpTarget> {
        let current = self.epochs.current();
        targets
            .iter()
            .filter_map(|t| {
                let part = current.partitions.get(t.partition.0 as usize)?;
                let skip_learners = mutant!(self.mutations.no_catch_up_to_learners);
                let nodes: Vec<NodeId> = t
                    .nodes
                    .iter()
                    .copied()
                    .filter(|&n| part.holds(n) && !(skip_learners && part.learner(n).is_some()))
                    .collect();
                (!nodes.is_empty()).then(|| crate::message::CatchUpTarget { nodes, ..t.clone() })
            })
            .collect()
    }

    /// Serves one chunk of a snapshot copy of `r.partition` to a learner added in `r.epoch`
    /// (docs/design.md, "Rebuild"; [`crate::rebuild`] has the argument). Before the first
    /// chunk (`from_bucket == 0`) this node raises its epoch floor to `r.epoch` and checks that
    /// its ring holds no entry of an older epoch that is not finished and applied; from then
    /// on no phase 1 of an older epoch can write here, so the records hold every older commit
    /// this replica was up to date for. Returns the records, the bucket to go on from and this
    /// node's deletion horizon ([`SnapshotChunkRead`]), or `Ok(Err(why))` when the copy cannot be served yet (the epoch not applied here, older
    /// entries unfinished) or here at all (not a voter of the partition).
    ///
    /// # Errors
    /// Data-path failures.
    pub fn snapshot_read(&mut self, r: &SnapshotRead) -> Result<std::result::Result<SnapshotChunkRead, String>> {
        let current = self.epochs.current();
        if current.epoch < r.epoch {
            return Ok(Err(format!(
                "{} has not applied {} yet (it is at {})",
                current.node_name(self.node),
                r.epoch,
                current.epoch
            )));
        }
        let Some(part) = current.partitions.get(r.partition.0 as usize) else {
            return Ok(Err(format!("partition {} is not in the topology", r.partition)));
        };
        if !part.replicas.contains(&self.node) {
            return Ok(Err(format!(
                "{} is not a voter of {} in {}",
                current.node_name(self.node),
                r.partition,
                current.epoch
            )));
        }
        let dc = self.executor.dc().clone();
        if r.from_bucket == 0 && !mutant!(self.mutations.snapshot_without_fence) {
            let at = dc.layout.epoch_floor_offset();
            let mut word = [0u8; 8];
            dc.verbs.read(self.node, at, &mut word)?;
            let epoch = u64::from(r.epoch.0);
            if u64::from_le_bytes(word) < epoch {
                dc.verbs.write(self.node, at, &epoch.to_le_bytes())?;
            }
            let older = redt_dc_executor::ring_entries(dc.verbs.as_ref(), self.node, &dc.layout)?
                .into_iter()
                .filter(|(_, _, e)| {
                    e.epoch < r.epoch
                        && matches!(
                            e.status,
                            redt_dc_executor::EntryStatus::Intent
                                | redt_dc_executor::EntryStatus::Logged
                                | redt_dc_executor::EntryStatus::Committed
                        )
                })
                .count();
            if older > 0 {
                return Ok(Err(format!(
                    "{} holds {older} redo entries of epochs before {} not finished and applied yet",
                    current.node_name(self.node),
                    r.epoch
                )));
            }
        }
        let keep = |table: redt_proto::TableId, key: u64| {
            current.table(table).is_some_and(|t| current.partition_of(t, key) == r.partition)
        };
        let max_bytes = r.max_bytes.clamp(1, SnapshotRead::MAX_BYTES) as usize;
        let chunk = redt_dc_executor::read_snapshot(&dc, self.node, r.from_bucket, SNAPSHOT_BUCKETS, max_bytes, &keep)?;
        // After the buckets: a freer raises the horizon before it frees, so a key freed
        // before its bucket was read, missing from the chunk, is under this horizon.
        let horizon = dc.max_deletion_horizon(self.node)?;
        Ok(Ok((chunk.records, chunk.next, horizon)))
    }

    /// Applies records of a snapshot copy to this node's own MemStore under the Thomas write
    /// rule (the learner's side, [`crate::rebuild`]), after raising this node's deletion
    /// horizon to the voter's `horizon`. Returns how many, in order, were applied: fewer when
    /// a record is in use (try the rest later).
    ///
    /// # Errors
    /// Data-path failures, and records that do not fit the schema (the copy comes from
    /// another node).
    pub fn apply_snapshot(&mut self, records: &[redt_dc_executor::SnapshotRecord], horizon: Cts) -> Result<usize> {
        let dc = self.executor.dc().clone();
        dc.raise_every_deletion_horizon(self.node, horizon)?;
        let applied =
            redt_dc_executor::apply_snapshot_by(&dc, self.node, records, self.mutations.thomas_rule())?.applied;
        self.note_refreshed(records[..applied].iter().map(|r| (r.table, r.key)));
        // A deleted record copied from a voter is freed here as there.
        self.queue_deleted_records(&records[..applied])?;
        Ok(applied)
    }

    /// Remembers the deleted records among `records` (this node's, as a snapshot reads them:
    /// no row, a version written) to be freed once their grace has passed.
    fn queue_deleted_records(&mut self, records: &[redt_dc_executor::SnapshotRecord]) -> Result<()> {
        for r in records.iter().filter(|r| !r.holds_row()) {
            let newest = r.newest_cts();
            if newest != Cts(0) {
                self.executor.queue_deleted(self.node, r.table, r.key, newest)?;
            }
        }
        Ok(())
    }

    /// Remembers the records a decided catch-up committed at `cts` empties (every change of a
    /// key zero bytes: a delete), to be freed here as the replicas that applied the delete
    /// through their own phase 2 free theirs: a replica that kept a deleted record the others
    /// freed would report the delete's versions where they report none, and every later
    /// transaction on the key would find them stale. Failures are logged: the record then
    /// stays, as before freeing.
    fn queue_shipped_deletes(&mut self, changes: &[redt_dc_executor::ReplicaChange], cts: Cts) {
        if !self.executor.frees_deleted() {
            return;
        }
        let mut keys: BTreeMap<(redt_proto::TableId, u64), bool> = BTreeMap::new();
        for c in changes {
            *keys.entry((c.table, c.key)).or_insert(true) &= c.value.iter().all(|&b| b == 0);
        }
        for ((table, key), _) in keys.into_iter().filter(|&(_, clears)| clears) {
            if let Err(e) = self.executor.queue_deleted(self.node, table, key, cts) {
                let t = self.epochs.current();
                tracing::warn!(node = %t.node_name(self.node), "remembering a shipped delete failed: {}", Error::from(e).named(&t));
            }
        }
    }

    /// Starts noting the keys of `partition` that a snapshot chunk or a replica change writes
    /// here, for the purge that ends a learner's copy ([`crate::rebuild`], "What the copy did
    /// not refresh"); forgets what an earlier copy of it noted. The driver calls it when the
    /// copy starts, before the first chunk. Memory: one entry per key of the partition (about
    /// 48 bytes each) until the purge ends.
    pub fn begin_refresh(&mut self, partition: PartitionId) {
        self.refreshed.insert(partition, HashSet::new());
    }

    /// Notes `keys` as written here for the copies under way ([`ExecutorCore::begin_refresh`]).
    fn note_refreshed(&mut self, keys: impl Iterator<Item = (redt_proto::TableId, u64)>) {
        if self.refreshed.is_empty() {
            return;
        }
        let current = self.epochs.current();
        for (table, key) in keys {
            let Some(t) = current.table(table) else { continue };
            if let Some(set) = self.refreshed.get_mut(&current.partition_of(t, key)) {
                set.insert((table, key));
            }
        }
    }

    /// One step of the purge that ends a learner's copy of `partition` ([`crate::rebuild`],
    /// "What the copy did not refresh"): scans this node's index from bucket `from_bucket`
    /// (at most 4,096 buckets) and empties every row of the partition that neither a chunk
    /// nor a replica change wrote since [`ExecutorCore::begin_refresh`]
    /// (`redt_dc_executor::purge_records`, each cell's version raised to this node's highest
    /// deletion horizon, which the voters' chunks raised to theirs). A record in use makes
    /// the step busy: [`Purged::next`] is `from_bucket` with no row emptied. At the end of the
    /// index the noted keys are forgotten. `Ok(Err(why))` when no copy of the partition is
    /// under way here (nothing is purged then).
    ///
    /// # Errors
    /// Data-path failures.
    pub fn purge_unrefreshed(
        &mut self,
        partition: PartitionId,
        from_bucket: u64,
    ) -> Result<std::result::Result<Purged, String>> {
        let current = self.epochs.current();
        let Some(refreshed) = self.refreshed.get(&partition) else {
            return Ok(Err(format!(
                "{} has no copy of {partition} under way to purge after",
                current.node_name(self.node)
            )));
        };
        let dc = self.executor.dc().clone();
        let keep = |table: redt_proto::TableId, key: u64| {
            current.table(table).is_some_and(|t| current.partition_of(t, key) == partition)
                && !refreshed.contains(&(table, key))
        };
        let chunk = redt_dc_executor::read_snapshot(
            &dc,
            self.node,
            from_bucket,
            SNAPSHOT_BUCKETS,
            SnapshotRead::MAX_BYTES as usize,
            &keep,
        )?;
        let live: Vec<&redt_dc_executor::SnapshotRecord> =
            chunk.records.iter().filter(|r| !mutant!(self.mutations.keep_unrefreshed) && r.holds_row()).collect();
        let rows: Vec<(redt_proto::TableId, u64)> = live.iter().map(|r| (r.table, r.key)).collect();
        let at = dc.max_deletion_horizon(self.node)?;
        let done = redt_dc_executor::purge_records(&dc, self.node, &rows, at)?;
        // Freed now, as the voters freed theirs (a record holding only versions would report
        // them where the voters report none): no other replica holds the key to ask about.
        if self.executor.frees_deleted() {
            let mut emptied = Vec::new();
            for r in live.iter().take(done.applied) {
                let newest = r.newest_cts();
                if let Some(record) = dc.index.lookup(dc.verbs.as_ref(), self.node, r.table, r.key)? {
                    let (node, table, key, cts) = (self.node, r.table, r.key, newest.max(at));
                    emptied.push(redt_dc_executor::DeletedRecord { node, table, key, record, cts });
                }
            }
            let raise = !mutant!(self.mutations.free_deleted_without_horizon);
            let fates = dc.retire_deleted(self.node, &emptied, Cts(Cts::MASK), raise)?;
            for (r, fate) in emptied.iter().zip(fates) {
                if fate == redt_dc_executor::DeletedFate::Busy {
                    self.executor.queue_deleted(r.node, r.table, r.key, r.cts)?;
                }
            }
        }
        if done.applied < rows.len() {
            // A record in use: the whole step again later (emptied rows are skipped then).
            return Ok(Ok(Purged { next: Some(from_bucket), rows: 0 }));
        }
        if chunk.next.is_none() {
            self.refreshed.remove(&partition);
        }
        Ok(Ok(Purged { next: chunk.next, rows: rows.len() as u64 }))
    }

    /// Drops the undecided transaction of `entry` (an entry of this node's ring) if this node
    /// was removed from the placement since the entry's epoch (it is a voter of nothing now: gone, or back
    /// and only a learner being rebuilt): nothing it holds is trusted
    /// again (docs/design.md, "Failover", a returning DC), the survivors decided the transaction
    /// without it, and recovering it from here, long after, only loads them. Its entries in
    /// this node's own ring are finished as aborted here, releasing their locks and the ring's
    /// head. Only its own: a node removed on its own shares its DC with voters, whose entries
    /// of the same transaction may hold a commit the survivors decided (sim seed 8, bank,
    /// default, `all,remove-node`, 6 s: aborting the whole DC's entries lost a committed write
    /// on the removed node's live neighbour). Each node of a removed DC discards its own.
    /// Returns whether it did.
    ///
    /// # Errors
    /// Data-path failures.
    pub fn discard_if_removed(&mut self, entry: &RedoEntry) -> Result<bool> {
        if entry.epoch >= self.epochs.epoch() || self.epochs.holds_voter(self.node) {
            return Ok(false);
        }
        if mutant!(self.mutations.discard_across_the_dc) {
            self.decide(entry.txn, Decision::Abort, &[])?;
            return Ok(true);
        }
        let mine = self.executor.find_entries(entry.txn, &[self.node])?;
        if !mine.is_empty() {
            self.decide(entry.txn, Decision::Abort, &mine)?;
        }
        Ok(true)
    }

    /// One pass over this node's ring for the recovery scan: its undecided entries and the
    /// entries that still owe a catch-up (`redt_dc_executor::ring_scan`).
    ///
    /// # Errors
    /// Verbs failures.
    pub fn ring_scan(&self) -> Result<RingScan> {
        let dc = self.executor.dc();
        Ok(redt_dc_executor::ring_scan(dc.verbs.as_ref(), self.node, &dc.layout)?)
    }

    /// How much of this node's record heap is in use.
    ///
    /// # Errors
    /// Verbs failures.
    pub fn record_heap(&self) -> Result<redt_dc_executor::RecordHeapUsage> {
        Ok(self.executor.dc().record_heap_usage(self.node)?)
    }

    /// Ring slots between this node's ring head and tail: written or reserved, not yet
    /// released by replay.
    ///
    /// # Errors
    /// Verbs failures.
    pub fn replay_backlog(&self) -> Result<u64> {
        let dc = self.executor.dc();
        let (head, tail) = redt_dc_executor::ring::ring_bounds(dc.verbs.as_ref(), self.node, &dc.layout)?;
        Ok(tail.saturating_sub(head))
    }

    /// The catch-up `owed` (an entry of this node's ring whose mask is set) shipped again from
    /// the entry itself, after the memory of its first shipper was lost (docs/design.md §2): to
    /// every replica outside this DC of the partitions the mask names
    /// ([`catch_up::reship_targets`]); clearing the entry's mask once delivered.
    pub fn reship(&self, owed: &OwedEntry) -> CatchUpDebt {
        let e = &owed.entry;
        let topology = self.epochs.get_or_current(e.epoch);
        let targets = self.placed(&catch_up::reship_targets(&topology, self.dc_id, e, owed.owed));
        let ship = catch_up::shipments(&topology, e.txn, std::slice::from_ref(e), &targets, false);
        CatchUpDebt { txn: e.txn, ship, owed: vec![EntryRef { node: self.node, index: owed.index, slots: owed.slots }] }
    }

    /// Clears the catch-up mask of `entries` of `txn` once its shipments are acknowledged (or
    /// given up), letting the ring's head pass them (`Executor::clear_owed`).
    ///
    /// # Errors
    /// Verbs failures.
    pub fn clear_owed(&mut self, txn: TxnId, entries: &[EntryRef]) -> Result<()> {
        Ok(self.executor.clear_owed(txn, entries)?)
    }

    /// Whether this node applied a decision for `txn` (among the last 100,000 it decided).
    pub fn was_decided(&self, txn: TxnId) -> bool {
        self.decided.contains(&txn)
    }

    /// The redo entries this node remembers for `txn` (a commit vote awaiting its decision).
    pub fn pending_entries(&self, txn: TxnId) -> Vec<EntryRef> {
        self.pending.get(&txn).map(|v| v.entries.clone()).unwrap_or_default()
    }

    /// Takes the redo entries this node remembers for `txn` (a commit vote awaiting its
    /// decision), so a second decision for it finds none.
    pub fn take_pending(&mut self, txn: TxnId) -> Option<Vec<EntryRef>> {
        self.pending.remove(&txn).map(|v| v.entries)
    }

    /// Reads back the redo entries of `txn` (a primary reads its own to replicate them).
    ///
    /// # Errors
    /// Verbs failures, a torn entry.
    pub fn redo(&self, txn: TxnId, entries: &[EntryRef]) -> Result<Vec<RedoEntry>> {
        Ok(self.executor.read_entries(txn, entries)?)
    }

    /// As a secondary: accepts the redo of `origin.txn` sent by `primary` into this node's
    /// ring (Paxos accept, stable leader; or a catch-up, which comes `decided`). Returns
    /// false if the transaction was already decided abort here; if it was decided commit (or
    /// comes decided), settles the entry at once. A catch-up that finds the ring full is
    /// applied to the records at once instead (`Executor::apply_replica_now`), unless a record
    /// is in use (then the ring's error is the answer).
    ///
    /// # Errors
    /// A malformed change (unknown table, bad cell, oversized value), data-path failures.
    pub fn accept(
        &mut self,
        primary: NodeId,
        origin: &ReplicaOrigin,
        changes: &[ReplicaChange],
        decided: Option<Decision>,
    ) -> Result<bool> {
        let txn = origin.txn;
        if self.accepted.contains_key(&(txn, primary)) {
            return Ok(true); // a retried accept
        }
        let early = decided.or_else(|| self.early_decisions.get(&txn));
        if early == Some(Decision::Abort) {
            return Ok(false);
        }
        let entry = match self.executor.accept_replica(self.node, origin, changes) {
            Ok(Some(entry)) => entry,
            Ok(None) => return Ok(true),
            // A decided catch-up whose ring is full is applied straight to the records: the
            // ring may be held by this node's own catch-up debts, waiting on the sender's ring
            // (docs/design.md §2). A record in use answers the ring's error: the sender retries.
            Err(e @ redt_dc_executor::Error::RingFull { .. }) => match decided {
                Some(Decision::Commit(cts)) => {
                    if self.executor.apply_replica_now(self.node, txn, changes, cts)? {
                        return Ok(true);
                    }
                    return Err(e.into());
                }
                _ => return Err(e.into()),
            },
            Err(e) => return Err(e.into()),
        };
        if let Some(d) = early {
            self.executor.settle_replica(txn, d, &[entry])?;
            return Ok(d != Decision::Abort);
        }
        match self.accepted.get_mut(&(txn, primary)) {
            Some(entries) => entries.push(entry),
            None => {
                if self.accepted.insert((txn, primary), vec![entry]).is_some() {
                    self.accepted_forgotten += 1;
                    if self.accepted_forgotten == 1 {
                        tracing::warn!(node = %self.epochs.current().node_name(self.node), max = self.accepted.cap,
                            "accepted redo awaiting its decision was forgotten (limits.max_accepted_redo): decisions scan the ring for it");
                    }
                }
            }
        }
        Ok(true)
    }

    /// A catch-up's first shipment says this node's DC was behind for `txn` (its vote stale or
    /// missing; [`crate::catch_up`]): its own redo of `txn` is not to be applied, the shipped
    /// values are the commit's. Aborts this node's unfinished phase-1 entries of `txn` (a
    /// decision naming them later finds them finished) and fences a late phase 1. If one was
    /// applied already, its cells carry the commit's timestamp, which the Thomas write rule
    /// would keep over the shipped values: they are written over it now. That happens when a
    /// recoverer decides commit because it saw the commit applied elsewhere: it cannot tell
    /// that this DC was behind (sim seed 70117, bank, world-5dc-n5, `all,remove`, 3 s: the
    /// stale redo's values stayed, at the commit's timestamp, and the bank total was off).
    /// Returns false, having written no cell, when a record the catch-up writes is in use
    /// (the sender retries).
    ///
    /// # Errors
    /// Data-path failures.
    pub fn drop_stale_redo(&mut self, txn: TxnId, changes: &[ReplicaChange], cts: Cts) -> Result<bool> {
        if mutant!(self.mutations.apply_stale_redo) {
            return Ok(true);
        }
        self.fences.insert(txn);
        use redt_dc_executor::decision_log::{self, Lookup};
        use redt_dc_executor::EntryStatus;
        // One READ pass over this node's ring: its own phase-1 entries of `txn` (replica
        // entries carry no partitions), unfinished or already committed.
        let dc = self.executor.dc().clone();
        let mut unfinished = Vec::new();
        let mut applied = false;
        for (index, slots, e) in redt_dc_executor::ring_entries(dc.verbs.as_ref(), self.node, &dc.layout)? {
            if e.txn != txn || e.partitions.is_empty() {
                continue;
            }
            match e.status {
                EntryStatus::Intent | EntryStatus::Logged => {
                    unfinished.push(EntryRef { node: self.node, index, slots })
                }
                EntryStatus::Committed => applied |= !e.locks.is_empty(),
                _ => {}
            }
        }
        if !unfinished.is_empty() {
            self.executor.finish(txn, Decision::Abort, &unfinished)?;
        }
        if !applied {
            // Flushed since: its decision-log row says so.
            let row = decision_log::lookup(dc.verbs.as_ref(), self.node, &dc.layout, txn, Cts(0))?;
            applied = matches!(row, Lookup::Found(r) if r.status == EntryStatus::Committed && !r.fence);
        }
        if !applied {
            return Ok(true);
        }
        let name = self.epochs.current().node_name(self.node);
        tracing::info!(node = %name, %txn, "stale redo of a behind DC was applied: the catch-up writes over it");
        Ok(self.executor.apply_replica_over_own(self.node, txn, changes, cts)?)
    }

    /// As a secondary: applies the decision to the redo accepted for `txn` from `primary`
    /// (committed entries are then applied by the replay task), and remembers it for redo
    /// still on its way. Redo accepted before this process restarted is found in the ring.
    ///
    /// # Errors
    /// Data-path failures.
    pub fn settle(&mut self, txn: TxnId, primary: NodeId, decision: Decision) -> Result<()> {
        // Remembered either way: a duplicate accept arriving later (a retry whose first
        // attempt did land) then settles itself instead of waiting forever.
        self.early_decisions.insert(txn, decision);
        let entries = match self.accepted.remove(&(txn, primary)) {
            Some(entries) => entries,
            None => {
                let before = self.accepted_before()?.remove(&txn).unwrap_or_default();
                if before.is_empty() && self.accepted_forgotten > 0 {
                    // Perhaps forgotten over `limits.max_accepted_redo`: the ring has it. Not
                    // the entries still remembered for another sender of `txn` (their own
                    // decision settles them).
                    let others: Vec<EntryRef> =
                        self.accepted.iter().filter(|((t, _), _)| *t == txn).flat_map(|(_, v)| v.clone()).collect();
                    let mut found = self.logged_replica_entries(Some(txn))?.remove(&txn).unwrap_or_default();
                    found.retain(|e| !others.contains(e));
                    found
                } else {
                    before
                }
            }
        };
        if entries.is_empty() {
            return Ok(());
        }
        Ok(self.executor.settle_replica(txn, decision, &entries)?)
    }

    /// The replica entries left `Logged` in this node's ring by a previous life of the
    /// process (see `accepted_before`), read on first use.
    fn accepted_before(&mut self) -> Result<&mut HashMap<TxnId, Vec<EntryRef>>> {
        if self.accepted_before.is_none() {
            self.accepted_before = Some(self.logged_replica_entries(None)?);
        }
        Ok(self.accepted_before.get_or_insert_with(HashMap::new))
    }

    /// The replica entries (of `only`, or of every transaction) this node's ring holds
    /// `Logged`, by transaction: one pass over the ring.
    fn logged_replica_entries(&self, only: Option<TxnId>) -> Result<HashMap<TxnId, Vec<EntryRef>>> {
        let dc = self.executor.dc().clone();
        let mut found: HashMap<TxnId, Vec<EntryRef>> = HashMap::new();
        for (index, slots, e) in redt_dc_executor::ring_entries(dc.verbs.as_ref(), self.node, &dc.layout)? {
            if only.is_some_and(|t| t != e.txn) {
                continue;
            }
            // Replica entries carry no partitions and hold no lock (a baseline primary's
            // entry has no partitions either, but holds its locks); fillers no changes.
            let replica = e.partitions.is_empty() && e.locks.iter().all(|l| l.lock_bits == 0);
            if e.status == redt_dc_executor::EntryStatus::Logged && replica && !e.changes.is_empty() {
                found.entry(e.txn).or_default().push(EntryRef { node: self.node, index, slots });
            }
        }
        Ok(found)
    }

    /// Baselines, as a coordinator's backup: logs its decision for `txn` (a later record
    /// replaces an earlier one: an abort replacing a commit whose log round failed).
    pub fn log_decision(&mut self, txn: TxnId, decision: Decision) {
        self.decision_log.insert(txn, decision);
    }

    /// Baselines: the decision logged here for `txn` as a coordinator's backup, if any.
    pub fn logged_decision(&self, txn: TxnId) -> Option<Decision> {
        self.decision_log.get(&txn)
    }

    /// The nodes of this DC holding a replica of any of `partitions` in `epoch`'s placement
    /// (the current one if this node never held that epoch), ascending.
    fn replica_nodes(&self, partitions: &[redt_proto::PartitionId], epoch: Epoch) -> Vec<NodeId> {
        let topology = self.epochs.get(epoch).unwrap_or_else(|| self.epochs.current());
        let mut nodes: Vec<NodeId> = partitions
            .iter()
            .filter_map(|p| topology.partitions.get(p.0 as usize))
            .flat_map(|p| p.replicas.iter().copied())
            .filter(|n| topology.nodes.get(n.0 as usize).is_some_and(|x| x.dc == self.dc_id))
            .collect();
        nodes.sort();
        nodes.dedup();
        nodes
    }

    /// Looks `txn` up on every node of this DC, read-only (the outcome query;
    /// [`crate::outcome`]): each node's ring (its phase-1 entries of `txn` and any committed
    /// entry of it, a catch-up's included) and, for entries gone or finished, its decision log,
    /// with `start_after` (a lower bound of the transaction's start, or the start read from an
    /// entry) deciding whether a missing row proves there was none. Nothing is written: no
    /// fence, no promise, no vote word is changed, and the fence memory is left alone, so the
    /// transaction runs and recovers exactly as if nobody had asked. A node that holds no
    /// voting replica now answers [`crate::outcome::FindingKind::Untrusted`]; a node whose
    /// ring cannot be read, [`crate::outcome::FindingKind::CannotTell`].
    pub fn lookup_txn(&self, txn: TxnId, start_after: Option<Cts>) -> Vec<crate::outcome::Finding> {
        use crate::outcome::{EntryFacts, Finding, FindingKind, Found};
        use redt_dc_executor::decision_log::{self, Lookup};
        use redt_dc_executor::{EntryStatus, VoteCode};
        let dc = self.executor.dc().clone();
        let current = self.epochs.current();
        let nodes = current.dcs.get(self.dc_id.0 as usize).map(|d| d.nodes.clone()).unwrap_or_default();
        let mut out = Vec::with_capacity(nodes.len());
        for node in nodes {
            if !self.epochs.holds_voter(node) {
                out.push(Finding { node, kind: FindingKind::Untrusted });
                continue;
            }
            let Ok(entries) = redt_dc_executor::ring_entries(dc.verbs.as_ref(), node, &dc.layout) else {
                out.push(Finding { node, kind: FindingKind::CannotTell });
                continue;
            };
            let mut f = Found::default();
            let mut any = false;
            let mut flushed = false;
            for (_, _, e) in entries.into_iter().filter(|(_, _, e)| e.txn == txn) {
                if e.status == EntryStatus::Committed {
                    f.committed = Some(e.cts);
                    any = true;
                }
                // Replica entries (catch-up, baselines) and fillers carry no partitions: only
                // a committed one tells anything.
                if e.partitions.is_empty() {
                    continue;
                }
                any = true;
                let vote = e.vote.unpack().map(|s| s.vote);
                f.commit_vote |= vote == Some(VoteCode::Commit);
                match e.status {
                    EntryStatus::Intent | EntryStatus::Logged => {
                        f.unfinished = true;
                        // An unreadable vote word counts as one that may still vote commit.
                        f.unvoted |= vote.is_none_or(|v| v == VoteCode::None);
                    }
                    EntryStatus::Flushed => flushed = true,
                    EntryStatus::Committed | EntryStatus::Aborted | EntryStatus::Empty => {}
                }
                f.entry.get_or_insert(EntryFacts { start: e.start, epoch: e.epoch, partitions: e.partitions });
            }
            let start = f.entry.as_ref().map(|e| e.start).or(start_after);
            let row = match start {
                Some(s) => decision_log::lookup(dc.verbs.as_ref(), node, &dc.layout, txn, s).ok(),
                None => None,
            };
            match row {
                Some(Lookup::Found(r)) => {
                    any = true;
                    if r.status == EntryStatus::Committed {
                        f.committed = Some(r.cts);
                    }
                    f.commit_vote |= r.vote == VoteCode::Commit;
                }
                Some(Lookup::Absent) => {}
                // A released entry whose row is gone may have been a commit.
                Some(Lookup::Evicted) | None if flushed => f.forgotten = true,
                Some(Lookup::Evicted) | None if !any => {
                    out.push(Finding { node, kind: FindingKind::CannotTell });
                    continue;
                }
                Some(Lookup::Evicted) | None => {}
            }
            let kind = if any { FindingKind::Found(f) } else { FindingKind::Nothing };
            out.push(Finding { node, kind });
        }
        out
    }

    /// The text of `e` for an error answer: nodes and tables named as the current placement's
    /// topology names them ([`Error::named`]).
    pub(crate) fn error_text(&self, e: &Error) -> String {
        e.named(&self.epochs.current())
    }

    /// Transactions that voted commit here and await their decision (as remembered: at most
    /// `limits.max_pending_votes`).
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// (transaction, sender) pairs of replica redo remembered awaiting their decision (at most
    /// `limits.max_accepted_redo`).
    pub fn accepted_pending(&self) -> usize {
        self.accepted.len()
    }

    /// What the caps forgot since this core started: commit votes over
    /// `limits.max_pending_votes`, and accepted redo over `limits.max_accepted_redo`.
    pub fn forgotten(&self) -> (u64, u64) {
        (self.votes_forgotten, self.accepted_forgotten)
    }
}
