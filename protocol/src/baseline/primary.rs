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
use crate::delivery::{self, Delivery};
use crate::executor_core::ExecutorCore;
use crate::machine::{earliest, Action, AttemptId, TxnMachine};
use crate::message::{Accept, Decide, DecideRole, Execute, Prepare, Reply, Request};
use crate::txn::CoordinatorOptions;
use redt_dc_executor::{AbortReason, Decision, RedoEntry, ReplicaChange, ReplicaOrigin, Vote};
use redt_proto::error_code;
use redt_proto::{Ballot, DcId, Epoch, NodeId, Placement, TxnId};
use std::collections::{BTreeSet, VecDeque};
use std::time::Instant;

/// Whether `request` is served by a baseline primary's [`PrimaryTxn`] (it needs the
/// secondaries before it can be answered) rather than by the executor core alone.
pub fn is_primary_request(request: &Request) -> bool {
    match request {
        Request::Execute(e) => e.replicate,
        Request::Decide(d) => d.role == DecideRole::Primary,
        Request::Prepare(_) => true,
        Request::Record(_)
        | Request::Accept(_)
        | Request::LogDecision(_)
        | Request::RecoveryPrepare(_)
        | Request::Reservations(_)
        | Request::SnapshotRead(_)
        | Request::ReclaimCheck(_)
        | Request::VersionedRead { .. } => false,
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
    let internal = |core: &ExecutorCore, e: crate::Error| {
        Local::Reply(Reply::Error { code: error_code::INTERNAL, message: core.error_text(&e) })
    };
    match request {
        Request::Execute(args @ Execute { replicate: true, .. }) => {
            let txn = args.txn;
            let vote = match core.execute(&args, now_ms) {
                Ok(v) => v,
                Err(e) => return Local::Reply(Reply::Error { code: e.reply_code(), message: core.error_text(&e) }),
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
                        Err(e) => internal(core, e),
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
                    Err(e) => internal(core, e),
                };
            };
            let redo = match core.redo(txn, &entries) {
                Ok(r) => r,
                Err(e) => return internal(core, e),
            };
            match core.decide(txn, decision, &entries) {
                Ok(()) => Local::Decided { decision, redo },
                Err(e) => internal(core, e),
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
    let why = "redo not replicated to a majority of the secondaries".into();
    Vote::aborted(vote.txn, vote.hlc, AbortReason::User(why))
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
    /// The node's current placement.
    topology: Placement,
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
    /// The primary `me` continues `local` (from [`begin`]) for transaction `txn` at `now`, in
    /// placement `topology` (the node's current one).
    pub fn start(
        topology: Placement,
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
        self.deliveries.push(Delivery::new(to, request.clone(), now));
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
            .map(|(&n, ch)| {
                (
                    n,
                    Request::Accept(Accept {
                        origin: origin.clone(),
                        changes: ch.clone(),
                        decided: None,
                        behind: false,
                    }),
                )
            })
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
                let (txn, retry, give_up) = (self.txn, self.options.retry_every, self.options.give_up_after);
                if let Some(d) = self.deliveries.get_mut(i) {
                    d.failed(txn, &self.topology.node_name(d.to), error, now, retry, give_up);
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
        for (i, to, request) in delivery::due(&mut self.deliveries, now) {
            self.send(to, Purpose::Delivery(i), request);
        }
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let round = self.round.as_ref().map(|r| r.deadline);
        earliest([round, delivery::next_retry(&self.deliveries)])
    }
}

/// The primary's side on a fake clock, no sockets (RedT §4.3 Table 1: a primary answers only
/// once a majority of each partition holds its redo or decision).
#[cfg(test)]
mod tests {
    use super::*;
    use redt_dc_executor::{Change, EntryRef, EntryStatus, VoteWord};
    use redt_proto::{Cts, Offset, Topology};
    use std::time::Duration;

    fn topo() -> Placement {
        Placement::from(Topology::from_yaml("default.yaml", include_str!("../../../configs/default.yaml")).unwrap())
    }

    const TXN: TxnId = TxnId(5);
    /// The primary of partition p2 (dc2); its secondaries are nodes 4 (dc3) and 6 (dc4).
    const ME: NodeId = NodeId(2);

    /// A redo entry writing one key of partition p2.
    fn redo(t: &Topology) -> Vec<RedoEntry> {
        let schema = t.table_by_name("kv").unwrap();
        let key = (0..10_000).find(|&k| t.partition_of(schema, k).0 == 2).unwrap();
        vec![RedoEntry {
            txn: TXN,
            status: EntryStatus::Logged,
            cts: Cts(0),
            vote: VoteWord::NONE,
            epoch: Epoch(0),
            coordinator: NodeId(0),
            start: Cts(0),
            participants: vec![DcId(0), DcId(1)],
            partitions: Vec::new(),
            locks: vec![],
            changes: vec![Change { record: Offset(0), table: schema.id, key, cell: 0, value: vec![9] }],
        }]
    }

    fn drain(m: &mut PrimaryTxn) -> (Vec<(AttemptId, NodeId, Request)>, Vec<Reply>) {
        let (mut sends, mut replies) = (Vec::new(), Vec::new());
        while let Some(a) = m.poll_action() {
            match a {
                Action::Send { attempt, to, request } => sends.push((attempt, to, request)),
                Action::Reply { reply } => replies.push(reply),
                a => panic!("a primary yielded {a:?}"),
            }
        }
        (sends, replies)
    }

    #[test]
    fn only_requests_that_need_the_secondaries_go_to_a_primary_machine() {
        let decide = |role| {
            Request::Decide(Decide {
                txn: TXN,
                ballot: Ballot(0),
                decision: Decision::Abort,
                entries: vec![],
                role,
                catch_up: vec![],
            })
        };
        assert!(is_primary_request(&decide(DecideRole::Primary)));
        assert!(!is_primary_request(&decide(DecideRole::Executor)));
        assert!(!is_primary_request(&decide(DecideRole::Secondary)));
        assert!(is_primary_request(&Request::Prepare(Prepare { txn: TXN, entries: vec![] })));
    }

    #[test]
    fn a_prepare_answers_at_a_majority_and_keeps_delivering_to_the_rest() {
        let t = topo();
        let t0 = Instant::now();
        let options = CoordinatorOptions::default();
        let mut m = PrimaryTxn::start(t.clone(), ME, TXN, Local::Prepare { redo: redo(&t) }, options.clone(), t0);
        let (sends, replies) = drain(&mut m);
        assert!(replies.is_empty());
        assert_eq!(sends.iter().map(|s| s.1).collect::<Vec<_>>(), [NodeId(4), NodeId(6)]);
        assert!(sends.iter().all(|s| matches!(&s.2, Request::Accept(a) if a.origin.txn == TXN && a.origin.coordinator == NodeId(0) && a.changes.len() == 1)));
        assert_eq!(m.poll_timeout(), Some(t0 + options.phase1_timeout));
        // One secondary and the primary are a majority of three.
        m.handle_failure(sends[1].0, "unreachable", t0);
        m.handle_reply(sends[0].0, Reply::Accepted(true), t0);
        let (_, replies) = drain(&mut m);
        // Two secondaries in other DCs: 4 messages, 1 round trip, whatever they answered.
        assert_eq!(replies, [Reply::Prepared { ok: true, nested: Cost { messages: 4, round_trips: 1 } }]);
        // The unanswered secondary still gets the redo.
        assert!(!m.is_done());
        assert_eq!(m.poll_timeout(), Some(t0 + options.retry_every));
        m.handle_timeout(t0 + options.retry_every);
        let (retry, _) = drain(&mut m);
        assert_eq!(retry.len(), 1);
        assert_eq!(retry[0].1, NodeId(6));
        m.handle_reply(retry[0].0, Reply::Accepted(true), t0 + options.retry_every);
        assert!(m.is_done());
    }

    #[test]
    fn a_prepare_refused_by_every_secondary_fails() {
        let t = topo();
        let t0 = Instant::now();
        let mut m = PrimaryTxn::start(t.clone(), ME, TXN, Local::Prepare { redo: redo(&t) }, Default::default(), t0);
        let (sends, _) = drain(&mut m);
        for (a, _, _) in &sends {
            m.handle_reply(*a, Reply::Accepted(false), t0);
        }
        let (_, replies) = drain(&mut m);
        assert_eq!(replies, [Reply::Prepared { ok: false, nested: Cost { messages: 4, round_trips: 1 } }]);
        assert!(m.is_done());
    }

    #[test]
    fn a_decision_is_passed_on_and_answered_at_the_round_deadline_at_the_latest() {
        let t = topo();
        let t0 = Instant::now();
        let options = CoordinatorOptions { give_up_after: Duration::from_secs(1), ..Default::default() };
        let local = Local::Decided { decision: Decision::Commit(Cts(8)), redo: redo(&t) };
        let mut m = PrimaryTxn::start(t.clone(), ME, TXN, local, options.clone(), t0);
        let (sends, _) = drain(&mut m);
        assert!(sends.iter().all(|s| matches!(&s.2, Request::Decide(d) if d.role == DecideRole::Secondary && d.decision == Decision::Commit(Cts(8)))));
        m.handle_failure(sends[0].0, "unreachable", t0);
        m.handle_failure(sends[1].0, "unreachable", t0);
        m.handle_timeout(t0 + options.phase1_timeout);
        let (retries, replies) = drain(&mut m);
        assert_eq!(retries.len(), 2, "retried in the meantime");
        assert_eq!(replies, [Reply::Decided(Cost { messages: 4, round_trips: 1 })]);
        // Past `give_up_after`, an undelivered decision is given up.
        let late = t0 + options.phase1_timeout + Duration::from_millis(1);
        m.handle_failure(retries[0].0, "unreachable", late);
        m.handle_failure(retries[1].0, "unreachable", late);
        assert!(m.is_done());
    }

    #[test]
    fn ep_paxos_rolls_back_and_votes_abort_when_the_redo_misses_its_majority() {
        let t = topo();
        let t0 = Instant::now();
        let options = CoordinatorOptions::default();
        let vote = Vote {
            txn: TXN,
            abort: None,
            items: vec![],
            hlc: Cts(3),
            entries: vec![EntryRef { node: ME, index: 1, slots: 1 }],
        };
        let local = Local::Vote { dc: DcId(1), vote: vote.clone(), redo: redo(&t) };
        let mut m = PrimaryTxn::start(t.clone(), ME, TXN, local, options.clone(), t0);
        let (sends, _) = drain(&mut m);
        assert_eq!(sends.len(), 2);
        m.handle_timeout(t0 + options.phase1_timeout);
        // First the local part is aborted, at this node's own executor.
        let (local_abort, replies) = drain(&mut m);
        assert!(replies.is_empty());
        assert_eq!(local_abort.len(), 1);
        let (a, to, r) = &local_abort[0];
        assert_eq!(*to, ME);
        assert!(
            matches!(r, Request::Decide(d) if d.role == DecideRole::Executor && d.decision == Decision::Abort && d.entries == vote.entries)
        );
        m.handle_reply(*a, Reply::Decided(Cost::default()), t0 + options.phase1_timeout);
        // Then the secondaries are told, and the coordinator gets an abort vote with the cost.
        let (tell, replies) = drain(&mut m);
        assert_eq!(tell.iter().map(|s| s.1).collect::<Vec<_>>(), [NodeId(4), NodeId(6)]);
        assert!(tell.iter().all(
            |s| matches!(&s.2, Request::Decide(d) if d.role == DecideRole::Secondary && d.decision == Decision::Abort)
        ));
        assert!(
            matches!(&replies[..], [Reply::Vote { dc: DcId(1), vote, nested }] if !vote.is_commit() && *nested == Cost { messages: 4, round_trips: 1 })
        );
    }

    #[test]
    fn a_local_answer_is_replied_at_once() {
        let t = topo();
        let reply = Reply::Prepared { ok: false, nested: Cost::default() };
        let mut m = PrimaryTxn::start(t, ME, TXN, Local::Reply(reply.clone()), Default::default(), Instant::now());
        assert_eq!(drain(&mut m), (vec![], vec![reply]));
        assert!(m.is_done());
        assert_eq!(m.poll_timeout(), None);
    }
}
