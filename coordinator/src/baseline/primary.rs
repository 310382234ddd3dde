//! The primary's side of the replicated baselines (2PC-Paxos, EP-Paxos; RedT §4.3 Table 1):
//! execute its part, replicate its redo to its secondaries (Paxos accept, stable leader), and
//! pass the decision on to them, answering the coordinator only once every touched partition
//! has a majority (or the round timed out).
//!
//! Two pieces, both free of I/O:
//! - [`begin`] is the primary's local step on its executor core (runs where the core runs,
//!   with the verbs): execute, read back the redo, apply a decision. What it returns says
//!   whether the request is answered at once or needs the secondaries ([`Local`]).
//! - [`PrimaryTxn`] is the rest as a [`TxnMachine`]: one replication round whose result is
//!   the reply ([`Action::Reply`]); the round's sends still unanswered then go on (each
//!   until answered) so every secondary ends up with the redo and its decision.

use super::roles::{self, Replication};
use crate::catch_up::changes_of;
use crate::cost::Cost;
use crate::executor_core::{error_code_of, ExecuteArgs, ExecutorCore};
use crate::machine::{earliest, Action, AttemptId, TxnMachine};
use crate::message::{Accept, Decide, DecideRole, Execute, Prepare, Reply, Request};
use crate::node::error_code;
use crate::txn::CoordinatorOptions;
use redt_dc_executor::{AbortReason, Decision, RedoEntry, ReplicaChange, ReplicaOrigin, Vote};
use redt_proto::{Ballot, DcId, Epoch, NodeId, Topology, TxnId};
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

/// Whether `request` is served by a baseline primary's [`PrimaryTxn`] (it needs the
/// secondaries before it can be answered) rather than by the executor core alone.
pub fn is_primary_request(request: &Request) -> bool {
    match request {
        Request::Execute(e) => e.replicate,
        Request::Decide(d) => d.role == DecideRole::Primary,
        Request::Prepare(_) => true,
        Request::Record(_) | Request::Accept(_) | Request::LogDecision(_) => false,
    }
}

/// What a primary's executor core did with a request before any secondary is called.
#[derive(Debug)]
pub enum Local {
    /// Answer at once: nothing to replicate, or the request failed here.
    Reply(Reply),
    /// EP-Paxos phase 1: a commit vote of `dc` whose redo must reach the secondaries before
    /// the vote is answered.
    Vote {
        /// The primary's DC.
        dc: DcId,
        /// The commit vote.
        vote: Vote,
        /// Its redo, read back.
        redo: Vec<RedoEntry>,
    },
    /// 2PC-Paxos prepare: the redo this primary holds, to replicate.
    Prepare {
        /// The redo.
        redo: Vec<RedoEntry>,
    },
    /// A decision applied here, to pass on to the secondaries of the redo's partitions.
    Decided {
        /// The decision.
        decision: Decision,
        /// The redo it was applied to.
        redo: Vec<RedoEntry>,
    },
}

/// The primary's local step for `request` on its executor core at physical time `now_ms` (ms
/// since `redt_dc_executor::ORIGIN_UNIX_MS`): runs phase 1 (EP-Paxos), finds the redo to
/// prepare (2PC-Paxos), or applies a decision, and reads back the redo the secondaries need.
/// A request that is not a primary's ([`is_primary_request`]) is answered `MALFORMED`.
///
/// A decision applies to what this primary still holds for the transaction (the entries the
/// coordinator names are not trusted: they may be finished already); a retried or duplicate
/// decision finds nothing and only fences the transaction. A prepare of a transaction that no
/// longer holds anything here fails (its slots may be reused: never ship another
/// transaction's redo). Errors become [`Reply::Error`] (never a panic).
pub fn begin(core: &mut ExecutorCore, request: Request, now_ms: u64) -> Local {
    let internal = |e: crate::Error| Local::Reply(Reply::Error { code: error_code::INTERNAL, message: e.to_string() });
    match request {
        Request::Execute(Execute { txn, coordinator, participants, call, scope, replicate: true }) => {
            let args = ExecuteArgs { txn, coordinator, participants, call, scope };
            let vote = match core.execute(&args, now_ms) {
                Ok(v) => v,
                Err(e) => return Local::Reply(Reply::Error { code: error_code_of(&e), message: e.to_string() }),
            };
            if !vote.is_commit() {
                return Local::Reply(Reply::Vote { dc: core.dc(), vote, nested: Cost::default() });
            }
            match core.redo(txn, &vote.entries) {
                Ok(redo) => Local::Vote { dc: core.dc(), vote, redo },
                Err(e) => {
                    tracing::warn!(%txn, "cannot read its redo to replicate it: {e}");
                    // Nothing reached a secondary: abort here alone.
                    match core.decide(txn, Decision::Abort, &vote.entries) {
                        Ok(()) => Local::Reply(Reply::Vote {
                            dc: core.dc(),
                            vote: abort_vote(&vote),
                            nested: Cost::default(),
                        }),
                        Err(e) => internal(e),
                    }
                }
            }
        }
        Request::Prepare(Prepare { txn, .. }) => {
            let entries = core.pending_entries(txn);
            let failed = Local::Reply(Reply::Prepared { ok: false, nested: Cost::default() });
            if entries.is_empty() {
                return failed;
            }
            match core.redo(txn, &entries) {
                Ok(redo) => Local::Prepare { redo },
                Err(e) => {
                    tracing::warn!(%txn, "cannot read its redo to replicate it: {e}");
                    failed
                }
            }
        }
        Request::Decide(Decide { txn, decision, role: DecideRole::Primary, .. }) => {
            let Some(entries) = core.take_pending(txn) else {
                return match core.decide(txn, decision, &[]) {
                    Ok(()) => Local::Reply(Reply::Decided(Cost::default())),
                    Err(e) => internal(e),
                };
            };
            let redo = match core.redo(txn, &entries) {
                Ok(r) => r,
                Err(e) => return internal(e),
            };
            match core.decide(txn, decision, &entries) {
                Ok(()) => Local::Decided { decision, redo },
                Err(e) => internal(e),
            }
        }
        _ => Local::Reply(Reply::Error {
            code: error_code::MALFORMED,
            message: "not a request for a baseline primary".into(),
        }),
    }
}

/// The abort vote that replaces a commit vote whose redo did not reach a majority.
fn abort_vote(vote: &Vote) -> Vote {
    Vote {
        txn: vote.txn,
        abort: Some(AbortReason::User("redo not replicated to a majority of the secondaries".into())),
        items: Vec::new(),
        hlc: vote.hlc,
        entries: Vec::new(),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    /// A send to a secondary, delivery `idx`.
    Delivery(usize),
    /// EP-Paxos: the abort applied at this primary's own executor after a failed round.
    LocalAbort,
}

/// What the replication round's result answers.
#[derive(Debug)]
enum Goal {
    /// EP-Paxos: the vote, or (round failed) an abort vote.
    Vote { dc: DcId, vote: Vote, changes: Vec<ReplicaChange> },
    /// 2PC-Paxos prepare: whether the redo reached its majorities.
    Prepared,
    /// A decision passed on.
    Decided,
}

/// The replication round being waited for.
struct Round {
    rep: Replication,
    /// Secondaries that accepted.
    acked: BTreeSet<NodeId>,
    deadline: Instant,
    /// Every send's cost, counted when sent (a request and its reply each).
    cost: Cost,
    /// Accept round (a secondary accepts with `Accepted(true)`) or decision round (any
    /// `Decided`).
    accept: bool,
}

/// One message to a secondary, delivered until answered.
struct Delivery {
    to: NodeId,
    request: Request,
    first_sent: Instant,
    retry_at: Option<Instant>,
    done: bool,
}

/// A baseline primary serving one request that needs its secondaries (RedT §4.3 Table 1):
/// EP-Paxos's phase 1 (replicate the redo, then vote), 2PC-Paxos's prepare (replicate the
/// redo), a decision (pass it on). One round sends to every secondary of the touched
/// partitions; its result is known once every partition has a majority (the primary counts
/// itself), every send is settled, or [`CoordinatorOptions::phase1_timeout`] has passed.
/// The round costs one request/reply per secondary, all in parallel, whatever the answers.
pub struct PrimaryTxn {
    txn: TxnId,
    me: NodeId,
    /// `None` only for a node outside the topology (then every peer counts as remote).
    my_dc: Option<DcId>,
    topology: Arc<Topology>,
    options: CoordinatorOptions,
    goal: Option<Goal>,
    round: Option<Round>,
    replied: bool,
    attempts: std::collections::BTreeMap<AttemptId, Purpose>,
    next_attempt: AttemptId,
    deliveries: Vec<Delivery>,
    /// EP-Paxos after a failed round: what the abort vote answers once the local part is
    /// rolled back (the primary's DC, its vote, the changes to tell the secondaries about, the
    /// round's cost).
    local_abort: Option<(DcId, Vote, Vec<ReplicaChange>, Cost)>,
    actions: VecDeque<Action>,
}

impl PrimaryTxn {
    /// The primary `me` continues `local` (from [`begin`]) for transaction `txn` at `now`.
    pub fn start(
        topology: Arc<Topology>,
        me: NodeId,
        txn: TxnId,
        local: Local,
        options: CoordinatorOptions,
        now: Instant,
    ) -> PrimaryTxn {
        let my_dc = topology.nodes.get(me.0 as usize).map(|n| n.dc);
        let mut t = PrimaryTxn {
            txn,
            me,
            my_dc,
            topology,
            options,
            goal: None,
            round: None,
            replied: false,
            attempts: Default::default(),
            next_attempt: 0,
            deliveries: Vec::new(),
            local_abort: None,
            actions: VecDeque::new(),
        };
        match local {
            Local::Reply(reply) => t.reply(reply),
            Local::Vote { dc, vote, redo } => {
                let changes = changes_of(&redo);
                t.accept_round(&redo, &changes, now);
                t.goal = Some(Goal::Vote { dc, vote, changes });
            }
            Local::Prepare { redo } => {
                t.accept_round(&redo, &changes_of(&redo), now);
                t.goal = Some(Goal::Prepared);
            }
            Local::Decided { decision, redo } => {
                t.decision_round(decision, &changes_of(&redo), true, now);
                t.goal = Some(Goal::Decided);
            }
        }
        t.check_round(now);
        t
    }

    fn is_remote(&self, peer: NodeId) -> bool {
        self.topology.nodes.get(peer.0 as usize).is_some_and(|n| Some(n.dc) != self.my_dc)
    }

    fn send(&mut self, to: NodeId, purpose: Purpose, request: Request) {
        let attempt = self.next_attempt;
        self.next_attempt += 1;
        self.attempts.insert(attempt, purpose);
        self.actions.push_back(Action::Send { attempt, to, request });
    }

    fn deliver(&mut self, to: NodeId, request: Request, now: Instant) {
        let idx = self.deliveries.len();
        self.deliveries.push(Delivery { to, request: request.clone(), first_sent: now, retry_at: None, done: false });
        self.send(to, Purpose::Delivery(idx), request);
    }

    /// Sends `rep`'s requests and, with `awaited`, waits for its majorities.
    fn round(&mut self, rep: Replication, requests: Vec<(NodeId, Request)>, accept: bool, awaited: bool, now: Instant) {
        let mut cost = Cost::default();
        for (to, request) in requests {
            cost = cost.alongside(Cost::rpc(self.is_remote(to), Cost::default()));
            self.deliver(to, request, now);
        }
        if awaited {
            let deadline = now + self.options.phase1_timeout;
            self.round = Some(Round { rep, acked: BTreeSet::new(), deadline, cost, accept });
        }
    }

    /// Paxos accept of the redo's changes at the secondaries of their partitions.
    fn accept_round(&mut self, redo: &[RedoEntry], changes: &[ReplicaChange], now: Instant) {
        let rep = roles::replication(&self.topology, self.me, changes);
        let (coordinator, participants) =
            redo.first().map_or((NodeId(0), Vec::new()), |e| (e.coordinator, e.participants.clone()));
        let origin = ReplicaOrigin { txn: self.txn, epoch: Epoch(0), coordinator, participants };
        let requests = rep
            .per_node
            .iter()
            .map(|(&n, ch)| (n, Request::Accept(Accept { origin: origin.clone(), changes: ch.clone() })))
            .collect();
        self.round(rep, requests, true, true, now);
    }

    /// The decision to the secondaries of the partitions `changes` touch.
    fn decision_round(&mut self, decision: Decision, changes: &[ReplicaChange], awaited: bool, now: Instant) {
        let rep = roles::replication(&self.topology, self.me, changes);
        let requests = rep
            .per_node
            .keys()
            .map(|&n| {
                let decide = Decide {
                    txn: self.txn,
                    ballot: Ballot(0),
                    decision,
                    entries: Vec::new(),
                    role: DecideRole::Secondary,
                    catch_up: Vec::new(),
                };
                (n, Request::Decide(decide))
            })
            .collect();
        self.round(rep, requests, false, awaited, now);
    }

    fn reply(&mut self, reply: Reply) {
        if !self.replied {
            self.replied = true;
            self.actions.push_back(Action::Reply { reply });
        }
    }

    /// Ends the round if its result is known, and acts on it.
    fn check_round(&mut self, now: Instant) {
        let Some(r) = &self.round else { return };
        let reached = r.rep.reached(&r.acked);
        let settled = self.deliveries.iter().all(|d| d.done);
        if !reached && !settled && now < r.deadline {
            return;
        }
        let cost = if r.rep.is_empty() { Cost::default() } else { r.cost };
        self.round = None;
        match self.goal.take() {
            Some(Goal::Prepared) => self.reply(Reply::Prepared { ok: reached, nested: cost }),
            Some(Goal::Decided) => self.reply(Reply::Decided(cost)),
            Some(Goal::Vote { dc, vote, .. }) if reached => self.reply(Reply::Vote { dc, vote, nested: cost }),
            Some(Goal::Vote { dc, vote, changes }) => {
                // The redo missed a majority: roll the local part back first (at this node's
                // own executor), then tell the secondaries and answer abort.
                let abort = Request::Decide(Decide {
                    txn: self.txn,
                    ballot: Ballot(0),
                    decision: Decision::Abort,
                    entries: vote.entries.clone(),
                    role: DecideRole::Executor,
                    catch_up: Vec::new(),
                });
                self.local_abort = Some((dc, vote, changes, cost));
                let me = self.me;
                self.send(me, Purpose::LocalAbort, abort);
            }
            None => {}
        }
    }
}

impl TxnMachine for PrimaryTxn {
    fn txn(&self) -> TxnId {
        self.txn
    }

    fn is_done(&self) -> bool {
        self.replied && self.local_abort.is_none() && self.deliveries.iter().all(|d| d.done)
    }

    fn handle_reply(&mut self, attempt: AttemptId, reply: Reply, now: Instant) {
        if let Reply::Error { message, .. } = reply {
            return self.handle_failure(attempt, &message, now);
        }
        let Some(purpose) = self.attempts.remove(&attempt) else { return };
        match purpose {
            Purpose::Delivery(i) => {
                let Some(d) = self.deliveries.get_mut(i).filter(|d| !d.done) else { return };
                d.done = true;
                let to = d.to;
                if let Some(r) = self.round.as_mut() {
                    let accepted =
                        if r.accept { reply == Reply::Accepted(true) } else { matches!(reply, Reply::Decided(_)) };
                    if accepted {
                        r.acked.insert(to);
                    }
                }
                self.check_round(now);
            }
            Purpose::LocalAbort => {
                let Some((dc, vote, changes, cost)) = self.local_abort.take() else { return };
                self.decision_round(Decision::Abort, &changes, false, now);
                self.reply(Reply::Vote { dc, vote: abort_vote(&vote), nested: cost });
            }
        }
    }

    fn handle_failure(&mut self, attempt: AttemptId, error: &str, now: Instant) {
        let Some(purpose) = self.attempts.remove(&attempt) else { return };
        match purpose {
            Purpose::Delivery(i) => {
                let (give_up, retry) = (self.options.give_up_after, self.options.retry_every);
                let txn = self.txn;
                if let Some(d) = self.deliveries.get_mut(i).filter(|d| !d.done) {
                    if now.duration_since(d.first_sent) > give_up {
                        tracing::error!(%txn, peer = %d.to, "undelivered, giving up: {error}");
                        d.done = true;
                    } else {
                        tracing::debug!(%txn, peer = %d.to, "retry: {error}");
                        d.retry_at = Some(now + retry);
                    }
                }
                self.check_round(now);
            }
            Purpose::LocalAbort => {
                if self.local_abort.take().is_some() {
                    let message = format!("cannot abort the local part: {error}");
                    self.reply(Reply::Error { code: error_code::INTERNAL, message });
                }
            }
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.check_round(now);
        for i in 0..self.deliveries.len() {
            let d = &mut self.deliveries[i];
            if !d.done && d.retry_at.is_some_and(|t| now >= t) {
                d.retry_at = None;
                let (to, request) = (d.to, d.request.clone());
                self.send(to, Purpose::Delivery(i), request);
            }
        }
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let round = self.round.as_ref().map(|r| r.deadline);
        let retries = self.deliveries.iter().filter(|d| !d.done).map(|d| d.retry_at);
        earliest(std::iter::once(round).chain(retries))
    }
}
