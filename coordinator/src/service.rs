//! The executor side of a node: runs phase 1 for its DC, records decisions in vote words,
//! and applies phase 2 (RedT §4.2; DESIGN.md §2).
//!
//! The executor itself is stateless; this service keeps two caches so that messages that
//! cross on the WAN do not leave locks behind: the redo entries of sub-transactions that
//! voted commit and await their decision (so a decision that arrives without entry
//! references — the coordinator never got the vote — still finds them), and the ids of
//! transactions decided before their phase 1 ran here (so a late phase 1 votes abort
//! instead of taking locks nobody will release).

use crate::call;
use crate::error::Result;
use crate::plan;
use redt_dc_executor::{AbortReason, DcHandle, Decision, EntryRef, Executor, Hlc, SubTxn, SystemClock, Verdict, Vote};
use redt_proto::wire::ProcedureCall;
use redt_proto::{Ballot, Cts, DcId, Epoch, NodeId, Topology, TxnId};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

/// How many decided-before-executed transaction ids are remembered.
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
    dc_id: DcId,
    dc: Arc<DcHandle>,
    hlc: Arc<Hlc>,
    pool: Mutex<Vec<Executor>>,
    pending: Mutex<HashMap<TxnId, Vec<EntryRef>>>,
    fences: Mutex<Fences>,
}

impl ExecutorService {
    /// A service for node `node` of `topology`, over its DC's data path.
    pub fn new(topology: Arc<Topology>, node: NodeId, dc: Arc<DcHandle>, hlc: Arc<Hlc>) -> Self {
        let dc_id = topology.nodes[node.0 as usize].dc;
        ExecutorService {
            topology,
            dc_id,
            dc,
            hlc,
            pool: Mutex::new(Vec::new()),
            pending: Mutex::new(HashMap::new()),
            fences: Mutex::new(Fences::default()),
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
        let procedure = call::procedure(&self.topology, &args.call)?;
        let plan = plan::plan(&self.topology, procedure.as_ref())?;
        let local = plan.local.get(&self.dc_id).cloned().unwrap_or_default();
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
                let mut pending = self.pending.lock().expect("pending");
                if fences.set.contains(&args.txn) {
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
    /// with none known, fences `txn` against a late phase 1).
    ///
    /// # Errors
    /// Data-path failures.
    pub fn decide(&self, txn: TxnId, decision: Decision, entries: &[EntryRef]) -> Result<()> {
        let remembered = {
            let mut fences = self.fences.lock().expect("fences");
            let mut pending = self.pending.lock().expect("pending");
            let r = pending.remove(&txn);
            if r.is_none() && entries.is_empty() {
                fences.insert(txn);
            }
            r
        };
        let entries = if entries.is_empty() { remembered.unwrap_or_default() } else { entries.to_vec() };
        if entries.is_empty() {
            return Ok(());
        }
        self.with_executor(|ex| ex.finish(txn, decision, &entries))?;
        Ok(())
    }

    /// Transactions that voted commit here and await their decision.
    pub fn pending(&self) -> usize {
        self.pending.lock().expect("pending").len()
    }
}
