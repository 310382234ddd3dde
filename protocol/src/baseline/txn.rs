//! A baseline coordinator's transaction as a state machine (RedT §4.3
//! Table 1): 2PC-Paxos, EP-Paxos (2PC-Paxos with Early Prepare) and TAPIR, behind the same
//! [`TxnMachine`] shape as RedT's [`crate::txn::CoordinatorTxn`].
//!
//! Sans-IO: [`BaselineTxn`] sends nothing, reads no clock and never sleeps. Each protocol is
//! a sequence of phases; a phase sends one request to each of a set of nodes at once and
//! closes when enough of them answered (every one, but a majority of the coordinator's
//! backups for the decision log), when every attempt has failed or answered, or when
//! [`CoordinatorOptions::phase1_timeout`] has passed since it opened. Answers that come after
//! their phase closed are ignored, as missing. A phase's cost is, per target, one
//! request/reply ([`Cost::rpc`]) with the nested cost its answer reported (none if it did not
//! answer in time), all in parallel; the phases add up.
//!
//! After the decision, the decision is delivered to every node that needs it, each until it
//! answers (a failed attempt is repeated every [`CoordinatorOptions::retry_every`], given up
//! after [`CoordinatorOptions::give_up_after`]). A commit's deliveries cost what their
//! answers cost; an abort's are not counted (presumed abort: the client already has its
//! answer, and RedT Table 2 counts committed transactions only).

use super::roles;
use crate::call;
use crate::cost::Cost;
use crate::delivery::{self, Delivery};
use crate::machine::{earliest, Action, AttemptId, TxnMachine};
use crate::machine::{TxnAnswer, TxnStatus};
use crate::message::{Decide, DecideRole, Execute, LogDecision, Prepare, Record, Reply, Request};
use crate::plan::{self, Plan, Scope};
use crate::stats::{AbortCause, Class, TxnCost};
use crate::txn::CoordinatorOptions;
use redt_dc_executor::{Decision, Vote};
use redt_proto::wire::ProcedureCall;
use redt_proto::{Ballot, Cts, DcId, NodeId, Placement, Protocol, Topology, TxnId};
use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

/// How many backups a baseline coordinator replicates its decision to (RedT Table 1's M).
pub const COORDINATOR_BACKUPS: usize = 2;

/// Which baseline a [`BaselineTxn`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Baseline {
    /// Replicated two-phase commit (`early_prepare` false: 2PC-Paxos) or Early Prepare with
    /// Paxos replication (`early_prepare` true: EP-Paxos).
    TwoPcPaxos {
        /// Each primary replicates its redo before voting (no separate prepare round).
        early_prepare: bool,
    },
    /// TAPIR: the coordinator talks to every replica.
    Tapir,
}

impl Baseline {
    /// The baseline `protocol` names; `None` for RedT (and RedT over TCP).
    pub fn of(protocol: Protocol) -> Option<Baseline> {
        match protocol {
            Protocol::TwoPcPaxos => Some(Baseline::TwoPcPaxos { early_prepare: false }),
            Protocol::EpPaxos => Some(Baseline::TwoPcPaxos { early_prepare: true }),
            Protocol::Tapir => Some(Baseline::Tapir),
            Protocol::Redt | Protocol::RedtTcp => None,
        }
    }

    /// Whether a decision sent to a participant goes to a primary that passes it on to its
    /// secondaries (2PC-Paxos family) rather than to an executor that applies it.
    fn primaries(self) -> bool {
        matches!(self, Baseline::TwoPcPaxos { .. })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Phase 1 at the participants (primaries or every replica).
    Execute,
    /// 2PC-Paxos: the primaries replicate their redo; TAPIR: the replicas record the prepare.
    Prepare,
    /// 2PC-Paxos family, read-write: the decision goes to the coordinator's backups.
    Log,
    /// Delivering the commit.
    Committing,
    /// Delivering the abort (the client has its answer).
    Aborting,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    /// An attempt of the phase with this number.
    Phase(u32),
    /// An attempt of delivery `idx`.
    Delivery(usize),
}

/// The phase being waited for.
struct Phase {
    number: u32,
    targets: Vec<NodeId>,
    /// Answers that close it.
    enough: usize,
    deadline: Instant,
    /// Attempts neither answered nor failed.
    open: usize,
    /// Per answering node, whether it answered yes (phase 1: a vote of either kind is an
    /// answer; its content is in `BaselineTxn::votes`).
    answers: BTreeMap<NodeId, bool>,
    /// The answers' cost so far.
    cost: Cost,
}

/// One transaction as a baseline's coordinator runs it (RedT §4.3 Table 1).
///
/// 2PC-Paxos and EP-Paxos:
/// 1. Execute at the primaries (No-Wait 2PL); with Early Prepare each primary also
///    replicates its redo to its secondaries before voting.
/// 2. (2PC-Paxos) Prepare: each primary replicates its redo to a majority.
/// 3. Read-write only: the coordinator replicates its decision to a majority of itself and
///    its [`COORDINATOR_BACKUPS`] backups in other DCs. The decision is durable here: with
///    early ack the client is answered now.
/// 4. Commit at the primaries, each of which passes it on to its secondaries.
///
/// TAPIR: execute at every replica (each locks and reads its own copy and pre-writes its
/// redo), prepare (recorded in every replica's vote word: the fast quorum of a 3-replica
/// partition is all of it; skipped by read-only transactions), then commit at every replica.
/// With early ack the client is answered after prepare.
///
/// Any abort vote, missing vote, failed replication or failed log aborts (presumed abort:
/// nobody can have learned a commit): the client is answered at once and every participant
/// that did not vote abort is told.
pub struct BaselineTxn {
    baseline: Baseline,
    txn: TxnId,
    me: NodeId,
    my_dc: DcId,
    /// The placement the transaction is planned in.
    topology: Placement,
    options: CoordinatorOptions,
    call: ProcedureCall,
    plan: Plan,
    class: Class,
    stage: Stage,
    /// The nodes of phase 1 and of the decision: the primaries (2PC-Paxos family) or every
    /// replica (TAPIR), ascending.
    participants: Vec<NodeId>,
    votes: BTreeMap<NodeId, Vote>,
    /// The cost of the phases up to the decision.
    cost: Cost,
    phase: Option<Phase>,
    phases: u32,
    attempts: BTreeMap<AttemptId, (NodeId, Purpose)>,
    next_attempt: AttemptId,
    deliveries: Vec<Delivery>,
    actions: VecDeque<Action>,
}

impl BaselineTxn {
    /// Plans `call` as transaction `txn` coordinated by `me` under `baseline` and sends phase
    /// 1 to its participants, in placement `topology` (the node's current one).
    ///
    /// # Errors
    /// Why the call cannot run, the client's abort text: [`crate::Error::OverLimit`] for a
    /// call over the topology's limits (its planned records included), [`crate::Error::BadCall`]
    /// for an unknown procedure or table or malformed parameters, [`crate::Error::Topology`]
    /// for a coordinator outside the topology.
    pub fn start(
        baseline: Baseline,
        topology: Placement,
        me: NodeId,
        txn: TxnId,
        call: ProcedureCall,
        options: CoordinatorOptions,
        now: Instant,
    ) -> crate::Result<BaselineTxn> {
        let procedure = call::procedure(&topology, &call)?;
        let plan = plan::plan(&topology, procedure.as_ref())?;
        let my_dc = crate::txn::coordinator_dc(&topology, me)?;
        // The same classes as RedT's, so the rows of a comparison count the same transactions.
        let class = Class { read_write: !plan.read_only, inter_dc: plan.participants.iter().any(|&d| d != my_dc) };
        let participants = match baseline {
            Baseline::TwoPcPaxos { .. } => roles::primary_nodes(&plan),
            Baseline::Tapir => roles::replica_nodes(&plan),
        };
        let mut t = BaselineTxn {
            baseline,
            txn,
            me,
            my_dc,
            topology,
            options,
            call,
            plan,
            class,
            stage: Stage::Execute,
            participants,
            votes: BTreeMap::new(),
            cost: Cost::default(),
            phase: None,
            phases: 0,
            attempts: BTreeMap::new(),
            next_attempt: 0,
            deliveries: Vec::new(),
            actions: VecDeque::new(),
        };
        let (scope, replicate) = match baseline {
            Baseline::TwoPcPaxos { early_prepare } => (Scope::Primaries, early_prepare),
            Baseline::Tapir => (Scope::Node, false),
        };
        let execute = Request::Execute(Execute {
            txn,
            coordinator: me,
            participants: t.plan.participants.clone(),
            call: t.call.clone(),
            scope,
            replicate,
            start: Cts(0),
            deadline_ms: 0,
            partitions: Vec::new(),
            epoch: t.topology.epoch,
            share: 0,
            carried: Vec::new(),
        });
        let targets = t.participants.clone();
        let enough = targets.len();
        t.open_phase(Stage::Execute, targets, enough, |_, _| execute.clone(), now);
        Ok(t)
    }

    /// Which baseline this transaction runs.
    pub fn baseline(&self) -> Baseline {
        self.baseline
    }

    fn is_remote(&self, peer: NodeId) -> bool {
        self.topology.nodes.get(peer.0 as usize).is_some_and(|n| n.dc != self.my_dc)
    }

    fn send(&mut self, to: NodeId, purpose: Purpose, request: Request) {
        let attempt = self.next_attempt;
        self.next_attempt += 1;
        self.attempts.insert(attempt, (to, purpose));
        self.actions.push_back(Action::Send { attempt, to, request });
    }

    /// Opens the phase of `stage`: `request(self, target)` to every target; it closes after
    /// `enough` answers.
    fn open_phase(
        &mut self,
        stage: Stage,
        targets: Vec<NodeId>,
        enough: usize,
        request: impl Fn(&Self, NodeId) -> Request,
        now: Instant,
    ) {
        self.stage = stage;
        self.phases += 1;
        let number = self.phases;
        for &to in &targets {
            let r = request(self, to);
            self.send(to, Purpose::Phase(number), r);
        }
        self.phase = Some(Phase {
            number,
            open: targets.len(),
            targets,
            enough,
            deadline: now + self.options.phase1_timeout,
            answers: BTreeMap::new(),
            cost: Cost::default(),
        });
        self.check_phase(now);
    }

    /// Closes the open phase if it is over, and moves on.
    fn check_phase(&mut self, now: Instant) {
        let Some(p) = &self.phase else { return };
        if p.answers.len() < p.enough && p.open > 0 && now < p.deadline {
            return;
        }
        let Some(mut p) = self.phase.take() else { return };
        for &peer in p.targets.iter().filter(|t| !p.answers.contains_key(t)) {
            p.cost = p.cost.alongside(Cost::rpc(self.is_remote(peer), Cost::default()));
        }
        self.after_phase(p, now);
    }

    fn after_phase(&mut self, p: Phase, now: Instant) {
        match self.stage {
            Stage::Execute => {
                self.cost = p.cost;
                let voted = |n: &NodeId| self.votes.get(n).is_some_and(|v| v.is_commit());
                if !self.participants.iter().all(voted) {
                    let why = abort_reason(&self.topology, &self.votes, &self.participants);
                    let cause = abort_cause(&self.votes);
                    let to_primaries = self.baseline == Baseline::TwoPcPaxos { early_prepare: true };
                    return self.abort(why, cause, to_primaries, now);
                }
                match self.baseline {
                    Baseline::TwoPcPaxos { early_prepare: true } => self.log(now),
                    Baseline::TwoPcPaxos { early_prepare: false } => {
                        let targets = self.participants.clone();
                        let enough = targets.len();
                        let prepare =
                            |t: &Self, p: NodeId| Request::Prepare(Prepare { txn: t.txn, entries: t.entries_of(p) });
                        self.open_phase(Stage::Prepare, targets, enough, prepare, now);
                    }
                    Baseline::Tapir => {
                        // A read-only transaction has nothing to prepare: its shared locks at
                        // every replica already order it (RedT Table 1: TAPIR's T_re skips
                        // prepare).
                        let targets = if self.plan.read_only { Vec::new() } else { self.participants.clone() };
                        let enough = targets.len();
                        let record = |t: &Self, p: NodeId| {
                            Request::Record(Record {
                                txn: t.txn,
                                ballot: Ballot(0),
                                decision: Decision::Commit(Cts(0)),
                                entries: t.entries_of(p),
                            })
                        };
                        self.open_phase(Stage::Prepare, targets, enough, record, now);
                    }
                }
            }
            Stage::Prepare => {
                self.cost = self.cost.then(p.cost);
                if let Some(n) = p.targets.iter().find(|n| p.answers.get(n) != Some(&true)) {
                    return match self.baseline {
                        Baseline::TwoPcPaxos { .. } => {
                            let why = format!(
                                "prepare at {} failed: its redo did not reach a majority of its secondaries",
                                self.topology.node_name(*n)
                            );
                            self.abort(why, AbortCause::Replication, true, now)
                        }
                        Baseline::Tapir => {
                            let why = format!("prepare at {} failed: no fast quorum", self.topology.node_name(*n));
                            self.abort(why, AbortCause::Replication, false, now)
                        }
                    };
                }
                match self.baseline {
                    Baseline::TwoPcPaxos { .. } => self.log(now),
                    Baseline::Tapir => self.commit(now),
                }
            }
            Stage::Log => {
                self.cost = self.cost.then(p.cost);
                if p.answers.len() < p.enough {
                    // Backups that logged the commit learn the abort that replaces it.
                    for b in p.targets {
                        let abort = Request::LogDecision(LogDecision {
                            txn: self.txn,
                            decision: Decision::Abort,
                            participants: Vec::new(),
                        });
                        self.deliver(b, abort, now);
                    }
                    let why = "the decision did not reach a majority of the coordinator's backups".to_string();
                    return self.abort(why, AbortCause::Replication, true, now);
                }
                self.commit(now);
            }
            Stage::Committing | Stage::Aborting | Stage::Done => {}
        }
    }

    /// The decision log (2PC-Paxos family): read-write transactions replicate the commit to a
    /// majority of the coordinator and its backups; read-only ones commit at once.
    fn log(&mut self, now: Instant) {
        if self.plan.read_only {
            return self.commit(now);
        }
        let backups = roles::backups(&self.topology, self.me, COORDINATOR_BACKUPS);
        let needed = roles::backup_acks_needed(backups.len());
        let request = Request::LogDecision(LogDecision {
            txn: self.txn,
            decision: Decision::Commit(self.cts()),
            participants: self.participants.clone(),
        });
        self.open_phase(Stage::Log, backups, needed, |_, _| request.clone(), now);
    }

    /// The commit timestamp: above every executor clock reading and every version the votes
    /// report (the same rule as RedT's, over the baseline's votes).
    fn cts(&self) -> Cts {
        let max = self
            .votes
            .values()
            .flat_map(|v| {
                std::iter::once(v.hlc.0)
                    .chain(v.items.iter().flat_map(|i| i.versions.iter().map(|(_, ver)| ver.cts().0)))
            })
            .max()
            .unwrap_or(0);
        Cts(max.saturating_add(1).min(Cts::MASK))
    }

    fn entries_of(&self, n: NodeId) -> Vec<redt_dc_executor::EntryRef> {
        self.votes.get(&n).map(|v| v.entries.clone()).unwrap_or_default()
    }

    fn decide_request(&self, n: NodeId, decision: Decision, to_primary: bool) -> Request {
        Request::Decide(Decide {
            txn: self.txn,
            ballot: Ballot(0),
            decision,
            entries: self.entries_of(n),
            role: if to_primary { DecideRole::Primary } else { DecideRole::Executor },
            catch_up: Vec::new(),
        })
    }

    /// Commits: the decision to every participant, the client answered now with early ack.
    fn commit(&mut self, now: Instant) {
        self.stage = Stage::Committing;
        let decision = Decision::Commit(self.cts());
        for n in self.participants.clone() {
            let request = self.decide_request(n, decision, self.baseline.primaries());
            self.deliver(n, request, now);
        }
        if self.options.early_ack {
            let reads = self.reads();
            self.answer(TxnStatus::Committed, reads, Some(self.cost), None);
        }
        self.maybe_finish();
    }

    /// Aborts: answers the client and tells every participant that did not vote abort
    /// (`to_primaries`: as primaries, which pass it on to their secondaries); `cause` labels
    /// it in the abort counters.
    fn abort(&mut self, why: String, cause: AbortCause, to_primaries: bool, now: Instant) {
        self.stage = Stage::Aborting;
        let release: Vec<NodeId> =
            self.participants.iter().copied().filter(|n| self.votes.get(n).is_none_or(|v| v.is_commit())).collect();
        for n in release {
            let request = self.decide_request(n, Decision::Abort, to_primaries);
            self.deliver(n, request, now);
        }
        self.answer(TxnStatus::Aborted(why), Vec::new(), None, Some(cause));
        self.maybe_finish();
    }

    fn reads(&self) -> Vec<Option<Vec<u8>>> {
        crate::txn::reads(&self.topology, &self.call, &self.plan, &self.votes.values().collect::<Vec<_>>())
    }

    fn answer(
        &mut self,
        status: TxnStatus,
        reads: Vec<Option<Vec<u8>>>,
        cost: Option<Cost>,
        cause: Option<AbortCause>,
    ) {
        let cost = cost.map(TxnCost::from);
        self.actions.push_back(Action::Answer {
            answer: TxnAnswer { txn: self.txn, status, cause, reads },
            class: self.class,
            cost,
        });
    }

    fn deliver(&mut self, to: NodeId, request: Request, now: Instant) {
        let idx = self.deliveries.len();
        self.deliveries.push(Delivery::new(to, request.clone(), now));
        self.send(to, Purpose::Delivery(idx), request);
    }

    /// Once every delivery is settled: a commit without early ack is answered with its whole
    /// cost; otherwise the commit's deliveries are counted after the answer.
    fn maybe_finish(&mut self) {
        if !matches!(self.stage, Stage::Committing | Stage::Aborting) || self.deliveries.iter().any(|d| !d.done) {
            return;
        }
        let committed = self.stage == Stage::Committing;
        self.stage = Stage::Done;
        let delivered = self.deliveries.iter().filter_map(|d| d.cost).fold(Cost::default(), Cost::alongside);
        let after_answer = if !committed {
            None
        } else if self.options.early_ack {
            Some(delivered)
        } else {
            let reads = self.reads();
            self.answer(TxnStatus::Committed, reads, Some(self.cost.then(delivered)), None);
            None
        };
        self.actions.push_back(Action::Finished { class: self.class, after_answer });
    }
}

impl TxnMachine for BaselineTxn {
    fn txn(&self) -> TxnId {
        self.txn
    }

    fn is_done(&self) -> bool {
        self.stage == Stage::Done
    }

    fn handle_reply(&mut self, attempt: AttemptId, reply: Reply, now: Instant) {
        if let Reply::Error { message, .. } = reply {
            return self.handle_failure(attempt, &message, now);
        }
        let Some(&(peer, purpose)) = self.attempts.get(&attempt) else { return };
        let remote = self.is_remote(peer);
        match purpose {
            Purpose::Phase(number) => {
                if self.phase.as_ref().is_none_or(|p| p.number != number) {
                    self.attempts.remove(&attempt);
                    return; // its phase closed without it
                }
                let answer = match (self.stage, &reply) {
                    (Stage::Execute, Reply::Vote { vote, .. }) => Some(vote.is_commit()),
                    (Stage::Execute, _) => None,
                    (_, Reply::Prepared { ok, .. } | Reply::Recorded(ok)) => Some(*ok),
                    (_, Reply::Decided(_) | Reply::Ack) => Some(true),
                    _ => None,
                };
                let Some(yes) = answer else {
                    return self.handle_failure(attempt, "unexpected reply kind", now);
                };
                self.attempts.remove(&attempt);
                if let Reply::Vote { vote, .. } = &reply {
                    self.votes.insert(peer, vote.clone());
                }
                if let Some(p) = self.phase.as_mut() {
                    p.open -= 1;
                    p.cost = p.cost.alongside(Cost::rpc(remote, nested_of(&reply)));
                    p.answers.insert(peer, yes);
                }
                self.check_phase(now);
            }
            Purpose::Delivery(i) => {
                self.attempts.remove(&attempt);
                if let Some(d) = self.deliveries.get_mut(i).filter(|d| !d.done) {
                    d.done = true;
                    d.cost = Some(Cost::rpc(remote, nested_of(&reply)));
                }
                self.maybe_finish();
            }
        }
    }

    fn handle_failure(&mut self, attempt: AttemptId, error: &str, now: Instant) {
        let Some((peer, purpose)) = self.attempts.remove(&attempt) else { return };
        match purpose {
            Purpose::Phase(number) => {
                tracing::debug!(txn = %self.txn, peer = %self.topology.node_name(peer), "baseline phase: {error}");
                if let Some(p) = self.phase.as_mut().filter(|p| p.number == number) {
                    p.open -= 1;
                    self.check_phase(now);
                }
            }
            Purpose::Delivery(i) => {
                let (txn, retry, give_up) = (self.txn, self.options.retry_every, self.options.give_up_after);
                if let Some(d) = self.deliveries.get_mut(i) {
                    d.failed(txn, &self.topology.node_name(d.to), error, now, retry, give_up);
                }
                self.maybe_finish();
            }
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.check_phase(now);
        for (i, to, request) in delivery::due(&mut self.deliveries, now) {
            self.send(to, Purpose::Delivery(i), request);
        }
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let phase = self.phase.as_ref().map(|p| p.deadline);
        earliest([phase, delivery::next_retry(&self.deliveries)])
    }
}

/// The inter-DC cost a reply says its sender spent before answering.
pub(crate) fn nested_of(reply: &Reply) -> Cost {
    match reply {
        Reply::Vote { nested, .. } | Reply::Prepared { nested, .. } | Reply::Decided(nested) => *nested,
        _ => Cost::default(),
    }
}

/// The abort counters' label for an abort after phase 1, in [`abort_reason`]'s order: the
/// first abort vote's reason, else a vote that never came.
fn abort_cause(votes: &BTreeMap<NodeId, Vote>) -> AbortCause {
    match votes.values().find(|v| !v.is_commit()) {
        Some(v) => v.abort.as_ref().map_or(AbortCause::User, AbortCause::of_vote),
        None => AbortCause::Timeout,
    }
}

/// The client's error text for an abort after execution, naming nodes as `topology` does.
fn abort_reason(topology: &Topology, votes: &BTreeMap<NodeId, Vote>, targets: &[NodeId]) -> String {
    if let Some((n, v)) = votes.iter().find(|(_, v)| !v.is_commit()) {
        let why = v.abort.as_ref().map(|r| crate::codec::reason_named(r, topology)).unwrap_or_default();
        return format!("{} voted abort: {why}", topology.node_name(*n));
    }
    match targets.iter().find(|t| !votes.contains_key(t)) {
        Some(t) => format!("timed out waiting for the vote of {}", topology.node_name(*t)),
        None => "aborted".into(),
    }
}

/// The baselines' coordinators on a fake clock, no sockets: each test feeds the machine the
/// replies a cluster would send and pins the message sequence, quorums, timeouts, costs and
/// outcomes of RedT §4.3 Table 1 as implemented.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::kv_call;
    use redt_dc_executor::{EntryRef, KvOp};
    use std::time::Duration;

    fn topo() -> Placement {
        Placement::from(Topology::from_yaml("default.yaml", include_str!("../../../configs/default.yaml")).unwrap())
    }

    /// A key of the kv table whose partition's primary is `primary`.
    fn key_with_primary(t: &Topology, primary: u16) -> u64 {
        let schema = t.table_by_name("kv").unwrap();
        (0..10_000)
            .find(|&k| t.partitions[t.partition_of(schema, k).0 as usize].replicas[0] == NodeId(primary))
            .unwrap()
    }

    /// A write of one key whose primary is node 0 (the coordinator's own DC, dc1) and one whose
    /// primary is node 2 (dc2).
    fn two_dc_write(t: &Topology) -> ProcedureCall {
        let kv = t.table_by_name("kv").unwrap().id;
        kv_call(kv, &[KvOp::Write(key_with_primary(t, 0), vec![1]), KvOp::Write(key_with_primary(t, 2), vec![2])])
    }

    fn vote(txn: TxnId, node: NodeId, hlc: u64) -> Vote {
        Vote { txn, abort: None, items: vec![], hlc: Cts(hlc), entries: vec![EntryRef { node, index: hlc, slots: 1 }] }
    }

    fn abort_vote(txn: TxnId) -> Vote {
        Vote {
            txn,
            abort: Some(redt_dc_executor::AbortReason::User("lock held".into())),
            items: vec![],
            hlc: Cts(0),
            entries: vec![],
        }
    }

    fn vote_reply(t: &Topology, n: NodeId, vote: Vote, nested: Cost) -> Reply {
        Reply::Vote { dc: t.nodes[n.0 as usize].dc, vote, nested }
    }

    const TXN: TxnId = TxnId(77);
    const ME: NodeId = NodeId(0);

    fn start(baseline: Baseline, call: ProcedureCall, options: CoordinatorOptions, now: Instant) -> BaselineTxn {
        BaselineTxn::start(baseline, topo(), ME, TXN, call, options, now).unwrap()
    }

    /// Drains the machine's actions: its sends (attempt, to, request) and the rest.
    fn drain(m: &mut BaselineTxn) -> (Vec<(AttemptId, NodeId, Request)>, Vec<Action>) {
        let (mut sends, mut other) = (Vec::new(), Vec::new());
        while let Some(a) = m.poll_action() {
            match a {
                Action::Send { attempt, to, request } => sends.push((attempt, to, request)),
                a => other.push(a),
            }
        }
        (sends, other)
    }

    fn targets(sends: &[(AttemptId, NodeId, Request)]) -> Vec<NodeId> {
        sends.iter().map(|s| s.1).collect()
    }

    fn answered(other: &[Action]) -> Option<(TxnStatus, Option<TxnCost>)> {
        other.iter().find_map(|a| match a {
            Action::Answer { answer, cost, .. } => Some((answer.status.clone(), *cost)),
            _ => None,
        })
    }

    fn cost(messages: u64, round_trips: u64) -> TxnCost {
        TxnCost { inter_dc_messages: messages, round_trips, client_round_trips: round_trips }
    }

    #[test]
    fn two_pc_paxos_executes_at_the_primaries_prepares_logs_at_a_backup_majority_then_commits() {
        let t = topo();
        let t0 = Instant::now();
        let mut m = start(Baseline::TwoPcPaxos { early_prepare: false }, two_dc_write(&t), Default::default(), t0);
        // 1. Execute at the primaries only (node 0 here, node 2 in dc2), no replication.
        let (sends, other) = drain(&mut m);
        assert!(other.is_empty());
        assert_eq!(targets(&sends), [NodeId(0), NodeId(2)]);
        for (_, _, r) in &sends {
            let Request::Execute(e) = r else { panic!("{r:?}") };
            assert_eq!((e.scope, e.replicate, e.coordinator), (Scope::Primaries, false, ME));
        }
        assert_eq!(m.poll_timeout(), Some(t0 + Duration::from_secs(2)), "the phase-1 timeout");
        m.handle_reply(sends[0].0, vote_reply(&t, NodeId(0), vote(TXN, NodeId(0), 10), Cost::default()), t0);
        assert!(drain(&mut m).0.is_empty(), "phase 1 waits for every primary");
        let t1 = t0 + Duration::from_millis(40);
        m.handle_reply(sends[1].0, vote_reply(&t, NodeId(2), vote(TXN, NodeId(2), 30), Cost::default()), t1);
        // 2. Prepare: each primary replicates the redo its vote names.
        let (prep, other) = drain(&mut m);
        assert!(other.is_empty());
        assert_eq!(targets(&prep), [NodeId(0), NodeId(2)]);
        assert_eq!(prep[1].2, Request::Prepare(Prepare { txn: TXN, entries: vote(TXN, NodeId(2), 30).entries }));
        assert_eq!(m.poll_timeout(), Some(t1 + Duration::from_secs(2)), "each phase has its own deadline");
        // The local primary replicated to two remote secondaries, the remote one to one remote
        // and one local secondary (as `Cost::rpc` counts them).
        m.handle_reply(prep[0].0, Reply::Prepared { ok: true, nested: Cost { messages: 4, round_trips: 1 } }, t1);
        m.handle_reply(prep[1].0, Reply::Prepared { ok: true, nested: Cost { messages: 2, round_trips: 1 } }, t1);
        // 3. The decision goes to the coordinator's two backups, in dc2 and dc3.
        let (log, other) = drain(&mut m);
        assert!(other.is_empty());
        assert_eq!(targets(&log), roles::backups(&t, ME, COORDINATOR_BACKUPS));
        assert_eq!(targets(&log), [NodeId(2), NodeId(4)]);
        let cts = Cts(31);
        for (_, _, r) in &log {
            assert_eq!(
                *r,
                Request::LogDecision(LogDecision {
                    txn: TXN,
                    decision: Decision::Commit(cts),
                    participants: vec![NodeId(0), NodeId(2)]
                })
            );
        }
        // One ack and the coordinator's own copy are a majority of three.
        m.handle_reply(log[1].0, Reply::Ack, t1);
        // 4. Commit at the primaries; with early ack the client is answered now.
        let (commit, other) = drain(&mut m);
        assert_eq!(targets(&commit), [NodeId(0), NodeId(2)]);
        let Request::Decide(d) = &commit[1].2 else { panic!() };
        assert_eq!(
            (d.decision, d.role, d.entries.clone()),
            (Decision::Commit(cts), DecideRole::Primary, vote(TXN, NodeId(2), 30).entries)
        );
        // Execute: 1 round trip, 2 messages (node 2); prepare: 1 + 1 nested, 2 + 4 + 2;
        // log: 1 round trip, 2 messages per backup (the late one's counted, unanswered).
        assert_eq!(answered(&other), Some((TxnStatus::Committed, Some(cost(2 + 8 + 4, 1 + 2 + 1)))));
        assert!(!m.is_done());
        // The late backup ack is ignored; the commit's cost comes after the answer.
        m.handle_reply(log[0].0, Reply::Ack, t1);
        m.handle_reply(commit[0].0, Reply::Decided(Cost { messages: 4, round_trips: 1 }), t1);
        assert!(!m.is_done());
        m.handle_reply(commit[1].0, Reply::Decided(Cost { messages: 2, round_trips: 1 }), t1);
        let (sends, other) = drain(&mut m);
        assert!(sends.is_empty());
        assert_eq!(
            other,
            [Action::Finished { class: m.class, after_answer: Some(Cost { messages: 4 + 4, round_trips: 2 }) }]
        );
        assert!(m.is_done());
    }

    #[test]
    fn ep_paxos_replicates_in_phase_1_and_skips_prepare() {
        let t = topo();
        let t0 = Instant::now();
        let mut m = start(Baseline::TwoPcPaxos { early_prepare: true }, two_dc_write(&t), Default::default(), t0);
        let (sends, _) = drain(&mut m);
        assert!(sends
            .iter()
            .all(|(_, _, r)| matches!(r, Request::Execute(e) if e.replicate && e.scope == Scope::Primaries)));
        let nested = Cost { messages: 4, round_trips: 1 };
        for (a, n, _) in &sends {
            m.handle_reply(*a, vote_reply(&t, *n, vote(TXN, *n, 5), nested), t0);
        }
        let (log, other) = drain(&mut m);
        assert!(other.is_empty());
        assert!(log.iter().all(|(_, _, r)| matches!(r, Request::LogDecision(_))), "{log:?}");
        m.handle_failure(log[0].0, "unreachable", t0);
        m.handle_reply(log[1].0, Reply::Ack, t0);
        let (_, other) = drain(&mut m);
        // Execute with nested replication: 2 + 4 + 4 messages, 2 round trips; log: 4, 1.
        assert_eq!(answered(&other), Some((TxnStatus::Committed, Some(cost(10 + 4, 3)))));
    }

    #[test]
    fn a_missing_vote_times_out_to_abort_and_every_primary_that_did_not_vote_abort_is_told() {
        let t = topo();
        let t0 = Instant::now();
        let options = CoordinatorOptions::default();
        let mut m = start(Baseline::TwoPcPaxos { early_prepare: false }, two_dc_write(&t), options.clone(), t0);
        let (sends, _) = drain(&mut m);
        m.handle_reply(sends[0].0, vote_reply(&t, NodeId(0), vote(TXN, NodeId(0), 9), Cost::default()), t0);
        let deadline = t0 + options.phase1_timeout;
        m.handle_timeout(deadline - Duration::from_millis(1));
        assert!(drain(&mut m).1.is_empty(), "not before the deadline");
        m.handle_timeout(deadline);
        let (release, other) = drain(&mut m);
        assert_eq!(
            answered(&other),
            Some((TxnStatus::Aborted("timed out waiting for the vote of dc2-n1".into()), None))
        );
        // Both primaries are told (the silent one may hold locks), as executors: nothing was
        // replicated yet in 2PC-Paxos's phase 1.
        assert_eq!(targets(&release), [NodeId(0), NodeId(2)]);
        let decides: Vec<&Decide> =
            release.iter().map(|(_, _, r)| if let Request::Decide(d) = r { d } else { panic!("{r:?}") }).collect();
        assert!(decides.iter().all(|d| d.decision == Decision::Abort && d.role == DecideRole::Executor));
        assert_eq!(decides[0].entries, vote(TXN, NodeId(0), 9).entries);
        assert!(decides[1].entries.is_empty());
        // The vote arriving after its phase closed changes nothing.
        m.handle_reply(sends[1].0, vote_reply(&t, NodeId(2), vote(TXN, NodeId(2), 9), Cost::default()), deadline);
        assert!(drain(&mut m).0.is_empty());
        // An undelivered abort is retried every `retry_every` until answered.
        m.handle_reply(release[0].0, Reply::Decided(Cost::default()), deadline);
        m.handle_failure(release[1].0, "unreachable", deadline);
        assert_eq!(m.poll_timeout(), Some(deadline + options.retry_every));
        m.handle_timeout(deadline + options.retry_every);
        let (retry, _) = drain(&mut m);
        assert_eq!(retry.len(), 1);
        assert_eq!(retry[0].1, NodeId(2));
        m.handle_reply(retry[0].0, Reply::Decided(Cost::default()), deadline + options.retry_every);
        let (_, other) = drain(&mut m);
        assert_eq!(other, [Action::Finished { class: m.class, after_answer: None }], "an abort's cost is not counted");
        assert!(m.is_done());
    }

    #[test]
    fn an_abort_vote_aborts_at_once_and_the_abort_voter_is_not_told() {
        let t = topo();
        let t0 = Instant::now();
        let mut m = start(Baseline::TwoPcPaxos { early_prepare: true }, two_dc_write(&t), Default::default(), t0);
        let (sends, _) = drain(&mut m);
        m.handle_reply(sends[1].0, vote_reply(&t, NodeId(2), abort_vote(TXN), Cost::default()), t0);
        assert!(drain(&mut m).1.is_empty(), "phase 1 still waits for every primary");
        m.handle_reply(sends[0].0, vote_reply(&t, NodeId(0), vote(TXN, NodeId(0), 3), Cost::default()), t0);
        let (release, other) = drain(&mut m);
        assert_eq!(answered(&other), Some((TxnStatus::Aborted("dc2-n1 voted abort: lock held".into()), None)));
        let cause = other.iter().find_map(|a| match a {
            Action::Answer { answer, .. } => Some(answer.cause),
            _ => None,
        });
        assert_eq!(cause, Some(Some(AbortCause::User)), "the client is told the vote's cause");
        assert_eq!(targets(&release), [NodeId(0)]);
        // EP-Paxos primaries replicated their redo: they pass the abort on.
        assert!(
            matches!(&release[0].2, Request::Decide(d) if d.role == DecideRole::Primary && d.decision == Decision::Abort)
        );
    }

    #[test]
    fn a_decision_log_without_a_backup_majority_aborts_and_the_backups_learn_it() {
        let t = topo();
        let t0 = Instant::now();
        let mut m = start(Baseline::TwoPcPaxos { early_prepare: true }, two_dc_write(&t), Default::default(), t0);
        let (sends, _) = drain(&mut m);
        for (a, n, _) in &sends {
            m.handle_reply(*a, vote_reply(&t, *n, vote(TXN, *n, 5), Cost::default()), t0);
        }
        let (log, _) = drain(&mut m);
        m.handle_failure(log[0].0, "unreachable", t0);
        m.handle_reply(log[1].0, Reply::Error { code: 3, message: "down".into() }, t0);
        let (out, other) = drain(&mut m);
        assert!(matches!(answered(&other), Some((TxnStatus::Aborted(why), None)) if why.contains("backups")));
        let logs: Vec<NodeId> = out
            .iter()
            .filter(|s| matches!(&s.2, Request::LogDecision(l) if l.decision == Decision::Abort))
            .map(|s| s.1)
            .collect();
        assert_eq!(logs, [NodeId(2), NodeId(4)]);
        let decides =
            out.iter().filter(|s| matches!(&s.2, Request::Decide(d) if d.role == DecideRole::Primary)).count();
        assert_eq!(decides, 2);
    }

    #[test]
    fn tapir_needs_every_replica_for_its_fast_quorum() {
        let t = topo();
        let t0 = Instant::now();
        let call = two_dc_write(&t);
        let mut m = start(Baseline::Tapir, call, Default::default(), t0);
        // Execute at every replica of both partitions (3 + 3 nodes), each on its own copy.
        let (sends, _) = drain(&mut m);
        let mut replicas: Vec<NodeId> = [0u16, 2]
            .iter()
            .flat_map(|&p| {
                t.partitions[t.partition_of(t.table_by_name("kv").unwrap(), key_with_primary(&t, p)).0 as usize]
                    .replicas
                    .clone()
            })
            .collect();
        replicas.sort();
        replicas.dedup();
        assert_eq!(targets(&sends), replicas);
        assert!(sends
            .iter()
            .all(|(_, _, r)| matches!(r, Request::Execute(e) if e.scope == Scope::Node && !e.replicate)));
        for (a, n, _) in &sends {
            m.handle_reply(*a, vote_reply(&t, *n, vote(TXN, *n, 7), Cost::default()), t0);
        }
        // Prepare: a commit record at every replica.
        let (prep, _) = drain(&mut m);
        assert_eq!(targets(&prep), replicas);
        assert!(prep.iter().all(|(_, n, r)| *r
            == Request::Record(Record {
                txn: TXN,
                ballot: Ballot(0),
                decision: Decision::Commit(Cts(0)),
                entries: vote(TXN, *n, 7).entries
            })));
        // Every replica but one records it; one refuses: no fast quorum.
        for (a, _, _) in &prep[1..] {
            m.handle_reply(*a, Reply::Recorded(true), t0);
        }
        assert!(drain(&mut m).1.is_empty(), "the fast quorum is every replica");
        m.handle_reply(prep[0].0, Reply::Recorded(false), t0);
        let (release, other) = drain(&mut m);
        // Named as the topology file names the node, not by its id.
        let why = format!("prepare at {} failed: no fast quorum", t.node_name(replicas[0]));
        assert!(!why.contains("node#"), "{why}");
        assert_eq!(answered(&other), Some((TxnStatus::Aborted(why), None)));
        assert_eq!(targets(&release), replicas);
        assert!(release.iter().all(|(_, _, r)| matches!(r, Request::Decide(d) if d.role == DecideRole::Executor)));
    }

    #[test]
    fn tapir_commits_without_early_ack_after_phase_2_and_reads_skip_prepare() {
        let t = topo();
        let t0 = Instant::now();
        let kv = t.table_by_name("kv").unwrap().id;
        let read = kv_call(kv, &[KvOp::Read(key_with_primary(&t, 2))]);
        let options = CoordinatorOptions { early_ack: false, ..Default::default() };
        let mut m = start(Baseline::Tapir, read, options, t0);
        let (sends, _) = drain(&mut m);
        assert_eq!(sends.len(), 3, "every replica of one partition");
        for (a, n, _) in &sends {
            m.handle_reply(*a, vote_reply(&t, *n, vote(TXN, *n, 4), Cost::default()), t0);
        }
        // Read-only: straight to commit, and without early ack no answer yet.
        let (commit, other) = drain(&mut m);
        assert!(other.is_empty());
        assert!(commit
            .iter()
            .all(|(_, _, r)| matches!(r, Request::Decide(d) if d.decision == Decision::Commit(Cts(5)))));
        for (a, _, _) in &commit {
            m.handle_reply(*a, Reply::Decided(Cost::default()), t0);
        }
        let (_, other) = drain(&mut m);
        let remote = commit.iter().filter(|(_, n, _)| t.nodes[n.0 as usize].dc != t.nodes[0].dc).count() as u64;
        // Execute then commit, each one round trip and two messages per remote replica.
        assert_eq!(answered(&other), Some((TxnStatus::Committed, Some(cost(4 * remote, 2)))));
        assert!(matches!(other.last(), Some(Action::Finished { after_answer: None, .. })));
        assert!(m.is_done());
    }

    #[test]
    fn a_bad_call_is_refused_at_start() {
        let call = kv_call(redt_proto::TableId(999), &[KvOp::Read(1)]);
        let r = BaselineTxn::start(Baseline::Tapir, topo(), ME, TXN, call, Default::default(), Instant::now());
        assert!(r.is_err());
    }
}
