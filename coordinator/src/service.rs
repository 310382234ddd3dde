//! The executor side of a node: runs phase 1 for its DC, records decisions in vote words,
//! and applies phase 2 (RedT §4.2; DESIGN.md §2).
//!
//! The executor itself is stateless; this service keeps two caches so that messages that
//! cross on the WAN do not leave locks behind: the redo entries of sub-transactions that
//! voted commit and await their decision (so a decision that arrives without entry
//! references — the coordinator never got the vote — still finds them), and the ids of
//! transactions decided before their phase 1 ran here (so a late phase 1 votes abort
//! instead of taking locks nobody will release). A third bounded memory, of the
//! transactions decided here, makes a repeated decision (a retry whose first attempt did
//! land) a no-op: by then the redo entries it names may be flushed and their ring slots
//! reused by other transactions.

use crate::baseline::roles::{self, Scope};
use crate::call;
use crate::error::Result;
use crate::plan;
use redt_dc_executor::{
    AbortReason, DcHandle, Decision, EntryRef, Executor, Hlc, RedoEntry, ReplicaChange, ReplicaOrigin, SubTxn,
    SystemClock, Verdict, Vote,
};
use redt_proto::wire::ProcedureCall;
use redt_proto::{Ballot, Cts, DcId, Epoch, NodeId, Topology, TxnId};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

/// How many transaction ids each bounded memory (fences, decided here) remembers.
const FENCE_MEMORY: usize = 100_000;

/// A phase-1 request as the service sees it.
#[derive(Clone, Debug)]
pub struct ExecuteArgs {
    /// The transaction.
    pub txn: TxnId,
    /// Its coordinator.
    pub coordinator: NodeId,
    /// Participant DCs.
    pub participants: Vec<DcId>,
    /// The call.
    pub call: ProcedureCall,
    /// Which replicas this node runs (RedT: every replica of its DC).
    pub scope: Scope,
}

/// A bounded map of transaction ids to decisions (oldest forgotten first).
#[derive(Default)]
struct DecisionMemory {
    map: HashMap<TxnId, Decision>,
    order: VecDeque<TxnId>,
}

impl DecisionMemory {
    fn insert(&mut self, t: TxnId, d: Decision) {
        if self.map.insert(t, d).is_none() {
            self.order.push_back(t);
            if self.order.len() > FENCE_MEMORY {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
    }
}

#[derive(Default)]
struct Fences {
    set: HashSet<TxnId>,
    order: VecDeque<TxnId>,
}

impl Fences {
    fn insert(&mut self, t: TxnId) {
        if self.set.insert(t) {
            self.order.push_back(t);
            if self.order.len() > FENCE_MEMORY {
                if let Some(old) = self.order.pop_front() {
                    self.set.remove(&old);
                }
            }
        }
    }
}

/// The executor side of one node.
pub struct ExecutorService {
    topology: Arc<Topology>,
    node: NodeId,
    dc_id: DcId,
    dc: Arc<DcHandle>,
    hlc: Arc<Hlc>,
    pool: Mutex<Vec<Executor>>,
    pending: Mutex<HashMap<TxnId, Vec<EntryRef>>>,
    fences: Mutex<Fences>,
    /// Transactions whose decision this node applied (bounded).
    decided: Mutex<Fences>,
    /// Baselines, as a secondary: redo accepted from primaries (a transaction may have
    /// several here, one per primary), awaiting its decision.
    accepted: Mutex<HashMap<(TxnId, NodeId), Vec<EntryRef>>>,
    /// Baselines, as a secondary: the decisions received (some before their redo).
    early_decisions: Mutex<DecisionMemory>,
    /// Baselines, as a coordinator's backup: the decisions logged here.
    decision_log: Mutex<DecisionMemory>,
}

impl ExecutorService {
    /// A service for node `node` of `topology`, over its DC's data path.
    pub fn new(topology: Arc<Topology>, node: NodeId, dc: Arc<DcHandle>, hlc: Arc<Hlc>) -> Self {
        let dc_id = topology.nodes[node.0 as usize].dc;
        ExecutorService {
            topology,
            node,
            dc_id,
            dc,
            hlc,
            pool: Mutex::new(Vec::new()),
            pending: Mutex::new(HashMap::new()),
            fences: Mutex::new(Fences::default()),
            decided: Mutex::new(Fences::default()),
            accepted: Mutex::new(HashMap::new()),
            early_decisions: Mutex::new(DecisionMemory::default()),
            decision_log: Mutex::new(DecisionMemory::default()),
        }
    }

    /// The shared hybrid logical clock of this node.
    pub fn hlc(&self) -> &Arc<Hlc> {
        &self.hlc
    }

    fn with_executor<T>(&self, f: impl FnOnce(&mut Executor) -> T) -> T {
        let mut ex = self
            .pool
            .lock()
            .expect("executor pool")
            .pop()
            .unwrap_or_else(|| Executor::new(self.dc.clone(), self.hlc.clone(), Arc::new(SystemClock)));
        let out = f(&mut ex);
        self.pool.lock().expect("executor pool").push(ex);
        out
    }

    /// Runs phase 1 of `args` on this DC's replicas and returns the vote. Blocking (verbs);
    /// call from a blocking-capable thread.
    ///
    /// # Errors
    /// A malformed call, or a data-path failure.
    pub fn execute(&self, args: &ExecuteArgs) -> Result<Vote> {
        let abort = |reason| Vote { txn: args.txn, abort: Some(reason), items: vec![], hlc: Cts(0), entries: vec![] };
        if self.fences.lock().expect("fences").set.contains(&args.txn) {
            return Ok(abort(AbortReason::User("decided before its phase 1 arrived".into())));
        }
        if self.decided.lock().expect("decided").set.contains(&args.txn) {
            return Ok(abort(AbortReason::User("already decided here (a repeated phase 1)".into())));
        }
        let procedure = call::procedure(&self.topology, &args.call)?;
        let plan = plan::plan(&self.topology, procedure.as_ref())?;
        let local = roles::scoped_accesses(&plan, self.dc_id, self.node, args.scope);
        let sub = SubTxn {
            txn: args.txn,
            epoch: Epoch(self.topology.epoch.0),
            coordinator: args.coordinator,
            participants: args.participants.clone(),
            procedure,
            local,
        };
        let vote = self.with_executor(|ex| ex.execute(&sub))?;
        if vote.is_commit() {
            let fenced = {
                let fences = self.fences.lock().expect("fences");
                let decided = self.decided.lock().expect("decided");
                let mut pending = self.pending.lock().expect("pending");
                if fences.set.contains(&args.txn) || decided.set.contains(&args.txn) {
                    true
                } else {
                    pending.insert(args.txn, vote.entries.clone());
                    false
                }
            };
            if fenced {
                // The decision (abort) overtook this phase 1: undo at once.
                self.with_executor(|ex| ex.finish(args.txn, Decision::Abort, &vote.entries))?;
                return Ok(abort(AbortReason::User("decided before its phase 1 finished".into())));
            }
        }
        Ok(vote)
    }

    /// Records `commit`/abort at `ballot` in the vote words of `entries` (or of the entries
    /// this node remembers for `txn`). Returns whether all of them record it.
    ///
    /// # Errors
    /// Data-path failures.
    pub fn record(&self, txn: TxnId, commit: bool, ballot: Ballot, entries: &[EntryRef]) -> Result<bool> {
        let entries = if entries.is_empty() {
            self.pending.lock().expect("pending").get(&txn).cloned().unwrap_or_default()
        } else {
            entries.to_vec()
        };
        if entries.is_empty() {
            // Nothing executed here: fence so a late phase 1 cannot vote commit.
            if !commit {
                self.fences.lock().expect("fences").insert(txn);
            }
            return Ok(true);
        }
        let verdict = if commit { Verdict::Commit } else { Verdict::Abort };
        Ok(self.with_executor(|ex| ex.record(verdict, ballot, &entries))?)
    }

    /// Applies the decision for `txn` to `entries` (or to the entries this node remembers;
    /// with none known, fences `txn` against a late phase 1). A decision for a transaction
    /// already decided here is answered at once and touches nothing: its entries may have
    /// been flushed and their slots reused (the last 100,000 decided here are remembered).
    ///
    /// # Errors
    /// Data-path failures.
    pub fn decide(&self, txn: TxnId, decision: Decision, entries: &[EntryRef]) -> Result<()> {
        let remembered = {
            let mut fences = self.fences.lock().expect("fences");
            let mut decided = self.decided.lock().expect("decided");
            let mut pending = self.pending.lock().expect("pending");
            let r = pending.remove(&txn);
            if r.is_none() && decided.set.contains(&txn) {
                return Ok(()); // a repeated decision
            }
            if r.is_none() && entries.is_empty() {
                fences.insert(txn);
            }
            decided.insert(txn);
            r
        };
        let entries = if entries.is_empty() { remembered.unwrap_or_default() } else { entries.to_vec() };
        if entries.is_empty() {
            return Ok(());
        }
        self.with_executor(|ex| ex.finish(txn, decision, &entries))?;
        Ok(())
    }

    /// Whether this node applied a decision for `txn` (among the last 100,000 it decided).
    pub fn was_decided(&self, txn: TxnId) -> bool {
        self.decided.lock().expect("decided").set.contains(&txn)
    }

    /// The redo entries this node remembers for `txn` (a commit vote awaiting its decision).
    pub fn pending_entries(&self, txn: TxnId) -> Vec<EntryRef> {
        self.pending.lock().expect("pending").get(&txn).cloned().unwrap_or_default()
    }

    /// Takes the redo entries this node remembers for `txn` (a commit vote awaiting its
    /// decision), so a second decision for it finds none.
    pub fn take_pending(&self, txn: TxnId) -> Option<Vec<EntryRef>> {
        self.pending.lock().expect("pending").remove(&txn)
    }

    /// Reads back the redo entries of `txn` (a primary reads its own to replicate them).
    ///
    /// # Errors
    /// Verbs failures, a torn entry.
    pub fn redo(&self, txn: TxnId, entries: &[EntryRef]) -> Result<Vec<RedoEntry>> {
        Ok(self.with_executor(|ex| ex.read_entries(txn, entries))?)
    }

    /// Baselines, as a secondary: accepts the redo of `origin.txn` sent by `primary` into
    /// this node's ring (Paxos accept, stable leader). Returns false if the transaction was
    /// already decided abort here; if it was decided commit, settles the entry at once.
    ///
    /// # Errors
    /// A malformed change (unknown table, bad cell, oversized value), data-path failures.
    pub fn accept(&self, primary: NodeId, origin: &ReplicaOrigin, changes: &[ReplicaChange]) -> Result<bool> {
        let txn = origin.txn;
        if self.accepted.lock().expect("accepted").contains_key(&(txn, primary)) {
            return Ok(true); // a retried accept
        }
        let early = self.early_decisions.lock().expect("early decisions").map.get(&txn).copied();
        if early == Some(Decision::Abort) {
            return Ok(false);
        }
        let Some(entry) = self.with_executor(|ex| ex.accept_replica(self.node, origin, changes))? else {
            return Ok(true);
        };
        // A decision may have arrived while the entry was being written.
        let decided = {
            let early = self.early_decisions.lock().expect("early decisions");
            let mut accepted = self.accepted.lock().expect("accepted");
            match early.map.get(&txn).copied() {
                Some(d) => Some(d),
                None => {
                    // A retried accept handled alongside its original writes a second
                    // entry: keep both so both are settled (the second changes nothing
                    // under the Thomas write rule).
                    accepted.entry((txn, primary)).or_default().push(entry);
                    None
                }
            }
        };
        if let Some(d) = decided {
            self.with_executor(|ex| ex.settle_replica(txn, d, &[entry]))?;
            return Ok(d != Decision::Abort);
        }
        Ok(true)
    }

    /// Baselines, as a secondary: applies the decision to the redo accepted for `txn` from
    /// `primary` (committed entries are then applied by the replay task), and remembers it
    /// for redo still on its way.
    ///
    /// # Errors
    /// Data-path failures.
    pub fn settle(&self, txn: TxnId, primary: NodeId, decision: Decision) -> Result<()> {
        let entries = {
            // Remembered either way: a duplicate accept arriving later (a retry whose first
            // attempt did land) then settles itself instead of waiting forever.
            let mut early = self.early_decisions.lock().expect("early decisions");
            let mut accepted = self.accepted.lock().expect("accepted");
            early.insert(txn, decision);
            match accepted.remove(&(txn, primary)) {
                Some(e) => e,
                None => return Ok(()),
            }
        };
        Ok(self.with_executor(|ex| ex.settle_replica(txn, decision, &entries))?)
    }

    /// Baselines, as a coordinator's backup: logs its decision for `txn`.
    pub fn log_decision(&self, txn: TxnId, decision: Decision) {
        let mut log = self.decision_log.lock().expect("decision log");
        match log.map.get_mut(&txn) {
            // A later record replaces an earlier one (an abort replacing a commit whose
            // log round failed).
            Some(d) => *d = decision,
            None => log.insert(txn, decision),
        }
    }

    /// Baselines: the decision logged here for `txn` as a coordinator's backup, if any.
    pub fn logged_decision(&self, txn: TxnId) -> Option<Decision> {
        self.decision_log.lock().expect("decision log").map.get(&txn).copied()
    }

    /// Transactions that voted commit here and await their decision.
    pub fn pending(&self) -> usize {
        self.pending.lock().expect("pending").len()
    }
}
