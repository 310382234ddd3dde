//! The coordinator's transaction as a state machine: plan → phase 1 → decision → record abort /
//! early ack → phase 2 → catch-up (RedT §4.2, Algorithm 1; docs/design.md §2).
//!
//! Sans-IO (in the manner of quinn-proto's `Connection`): [`CoordinatorTxn`] sends nothing,
//! reads no clock and never sleeps. The driver feeds it the fate of each request it asked for
//! ([`TxnMachine::handle_reply`], [`TxnMachine::handle_failure`]) and its timer
//! ([`TxnMachine::handle_timeout`]), each with the current time, then drains
//! [`TxnMachine::poll_action`] and re-arms its timer from [`TxnMachine::poll_timeout`]
//! (the shape every protocol's coordinator shares, [`crate::machine`]).
//! Every request is one attempt with one fate: a reply, or a failure (unreachable peer, a
//! call deadline). The decision rule is [`crate::decision::decide`], the catch-up planner
//! [`crate::catch_up::catch_up`]; this file only sequences them.

use crate::call;
use crate::catch_up::{self, CatchUp};
use crate::cost::Cost;
use crate::decision::{decide, majority, Ruling, Why};
use crate::delivery::{self, Delivery};
use crate::machine::{earliest, TxnAnswer, TxnMachine, TxnStatus};
pub use crate::machine::{Action, AttemptId};
use crate::message::{CatchUpTarget, Decide, DecideRole, Execute, Record, Reply, Request};
use crate::plan::{self, Plan, Scope};
use crate::stats::{AbortCause, Class, TxnCost};
use redt_dc_executor::{Decision, ReadView, Vote};
use redt_proto::wire::ProcedureCall;
use redt_proto::{Ballot, Cts, DcId, NodeId, Placement, Topology, TxnId};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

mutations! {
    /// Deliberate protocol bugs, for showing that the simulation catches them, and
    /// injected faults, for showing that recovery repairs them. All off by default; nothing outside
    /// tests turns them on. Has its fields only in a build with the `mutants` feature (the tests
    /// turn it on); without it, none, and every switch reads as off.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct CoordinatorMutations {
        /// Acknowledge an abort to the client before it is recorded at a majority of every
        /// touched partition (docs/design.md §2 forbids it: a recoverer could then commit it).
        pub ack_abort_before_record: bool,
        /// A fault, not a bug: the coordinator stops right after its decision (and after the
        /// early acknowledgement of a commit), sending neither abort records nor phase 2, as if
        /// its process died between the phases. Its sub-transactions keep their locks until a
        /// recoverer decides them (docs/design.md, "Recovery").
        pub stop_before_phase2: bool,
        /// A fault: the coordinators on this node stop right after their decision, before they
        /// answer the client, record an abort or start phase 2, as if the process died there: the
        /// client's answer is lost ([`TxnStatus::Unknown`]) and recoverers decide the transaction
        /// (the client asks what became of it).
        pub stop_before_answer_at: Option<NodeId>,
    }
}

/// How long a phase 1 that meets a lock held by another transaction waits for it at the
/// executor before it votes abort (docs/design.md §2, "Waiting for a lock";
/// [`crate::executor_core::ExecutorCore::with_lock_wait`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LockWait {
    /// The topology's `timeouts.lock_wait`, else zero: No-Wait (the default).
    #[default]
    FromTopology,
    /// Waiting: the topology's `timeouts.lock_wait` if it sets one above zero, else its largest
    /// link RTT ([`redt_proto::default_lock_wait`]).
    Waiting,
    /// This long (zero: No-Wait).
    For(Duration),
}

/// How a coordinator runs transactions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoordinatorOptions {
    /// The commit protocol (RedT unless a baseline is being measured).
    pub protocol: redt_proto::Protocol,
    /// Acknowledge a commit as soon as it is decided, before phase 2 (on by default).
    pub early_ack: bool,
    /// How long phase 1 waits for votes before deciding with what it has.
    pub phase1_timeout: Duration,
    /// First pause before retrying a phase-2 or record message to an unreachable DC; doubled
    /// per retry up to `retry_max`, with up to half again as jitter.
    pub retry_every: Duration,
    /// Largest pause between retries (5 s by default).
    pub retry_max: Duration,
    /// How long phase 2 keeps retrying before it gives up (and logs the transaction).
    pub give_up_after: Duration,
    /// The largest difference between two nodes' wall clocks, as NTP keeps it (250 ms by
    /// default). A node recovers an undecided transaction only once its phase-1 deadline has
    /// passed by this much on the node's own clock, so that no executor can still vote on it
    /// ([`crate::RecoveryOptions::clock_skew_bound`]; docs/design.md, "Recovery"). Every node of a
    /// cluster must run with the same bound (and the same `phase1_timeout`).
    pub clock_skew_bound: Duration,
    /// The options of the node's recovery task (`None`: [`crate::RecoveryOptions::for_topology`]
    /// of the node's topology; a real node sets them from its file's `timeouts:` section,
    /// `redt_coordinator::NodeTimeouts::apply`). Read through [`CoordinatorOptions::recovery_options`].
    pub recovery: Option<crate::RecoveryOptions>,
    /// The heartbeats of the node's failure detector (`None`:
    /// [`crate::detector_timeouts::DetectorTimeouts::defaults`] of the node's topology; a real node sets
    /// them from its file's `timeouts.detector`, `redt_coordinator::NodeTimeouts::apply`). Read through
    /// [`CoordinatorOptions::detector_timeouts`].
    pub detector: Option<crate::detector_timeouts::DetectorTimeouts>,
    /// How long a phase 1 that meets a lock held by another transaction waits for it at this
    /// node's executor before it votes abort; read through [`CoordinatorOptions::lock_wait_for`].
    pub lock_wait: LockWait,
    /// Decided-holder takeover ([`crate::takeover`]): a transaction that conflicts with an
    /// undecided one of the same coordinator waits for its decision, then its phase 1 carries
    /// the decided ones' phase 2s. Off by default (No-Wait as RedT §4.2 has it).
    pub takeover: bool,
    /// With [`CoordinatorOptions::takeover`]: the most transactions one batch takes, its leader
    /// included (docs/design.md, "Batches of held transactions"): a transaction that goes
    /// takes along the held ones that conflict with it, as one transaction whose members run
    /// in order. 0 or 1: no batches (the default); at most
    /// [`redt_dc_executor::MAX_BATCH_MEMBERS`].
    pub batch: usize,
    /// Run the node's membership Raft peer and remove a DC that a majority of the Raft voters
    /// suspect, in a new placement epoch (`redt_coordinator::membership_task`). Off by
    /// default (embedded clusters, tests); `redt node` turns it on unless `--no-failover`.
    pub failover: bool,
    /// Deliberate bugs and injected faults (tests only).
    pub mutations: CoordinatorMutations,
}

impl CoordinatorOptions {
    /// The phase-1 timeout a real node uses by default on `topology`: 10 × its largest link
    /// RTT, at least 500 ms (500 ms at 2 ms and 40 ms RTT, 2.5 s at 250 ms). Recovery of a
    /// transaction whose coordinator died starts this long (plus the clock-skew bound and
    /// the DC's wait) after its start, so it bounds how long a crash holds locks; every node
    /// of a cluster derives the same value from the same topology.
    pub fn phase1_timeout_for(topology: &redt_proto::Topology) -> Duration {
        redt_proto::default_phase1_timeout(&topology.links)
    }

    /// The options a node's recovery task runs with on `topology`: [`CoordinatorOptions::recovery`]
    /// if set, else [`crate::RecoveryOptions::for_topology`]; either way with this
    /// `clock_skew_bound`.
    pub fn recovery_options(&self, topology: &redt_proto::Topology) -> crate::RecoveryOptions {
        match &self.recovery {
            Some(r) => crate::RecoveryOptions { clock_skew_bound: self.clock_skew_bound, ..r.clone() },
            None => crate::RecoveryOptions::for_topology(topology, self.clock_skew_bound),
        }
    }

    /// The lock wait a node's executor runs with on `topology`, as
    /// [`CoordinatorOptions::lock_wait`] says (zero: No-Wait).
    pub fn lock_wait_for(&self, topology: &redt_proto::Topology) -> Duration {
        let set = topology.timeouts.lock_wait;
        match self.lock_wait {
            LockWait::FromTopology => set.unwrap_or_default(),
            LockWait::Waiting => {
                set.filter(|w| !w.is_zero()).unwrap_or_else(|| redt_proto::default_lock_wait(&topology.links))
            }
            LockWait::For(d) => d,
        }
    }

    /// The failure detector's configuration a node runs with on `topology`:
    /// [`CoordinatorOptions::detector`] if set, else the topology's defaults.
    pub fn detector_timeouts(&self, topology: &redt_proto::Topology) -> crate::detector_timeouts::DetectorTimeouts {
        self.detector.clone().unwrap_or_else(|| crate::detector_timeouts::DetectorTimeouts::defaults(topology))
    }
}

impl Default for CoordinatorOptions {
    fn default() -> Self {
        CoordinatorOptions {
            protocol: redt_proto::Protocol::Redt,
            early_ack: true,
            phase1_timeout: Duration::from_secs(2),
            retry_every: Duration::from_millis(200),
            retry_max: Duration::from_secs(5),
            give_up_after: Duration::from_secs(600),
            clock_skew_bound: Duration::from_millis(250),
            recovery: None,
            detector: None,
            lock_wait: LockWait::FromTopology,
            takeover: false,
            batch: 0,
            failover: false,
            mutations: CoordinatorMutations::default(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    Phase1,
    /// Recording the abort, in round `round`.
    Record(u32),
    /// Delivering phase 2, delivery `idx`.
    Decide(usize),
}

struct Attempt {
    dc: DcId,
    purpose: Purpose,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Phase1,
    /// Recording the abort: round number, whether a round is in flight.
    Recording,
    Phase2,
    Done,
}

/// One transaction as its coordinator runs it (RedT §4.2; docs/design.md §2).
pub struct CoordinatorTxn {
    txn: TxnId,
    start: Cts,
    me: NodeId,
    my_dc: DcId,
    plan: Plan,
    call: ProcedureCall,
    /// The placement the transaction is planned in (its epoch's replica sets).
    topology: Placement,
    options: CoordinatorOptions,
    class: Class,
    stage: Stage,
    votes: BTreeMap<DcId, Vote>,
    /// Why a DC's phase 1 failed (an error answer, an unreachable node, the call's
    /// deadline), for the client's error text when no vote explains the abort.
    failed: BTreeMap<DcId, String>,
    attempts: BTreeMap<AttemptId, Attempt>,
    next_attempt: AttemptId,
    phase1_deadline: Instant,
    phase1_open: usize,
    phase1_cost: Cost,
    decision: Option<Decision>,
    why: String,
    /// The abort counters' label for `why`.
    cause: AbortCause,
    answered: bool,
    catch_up: CatchUp,
    /// Commit votes that arrived after the decision and before phase 2 began.
    late: Vec<(DcId, Vote)>,
    late_cost: Cost,
    // Recording the abort.
    round: u32,
    round_open: usize,
    holding: BTreeSet<DcId>,
    /// DCs that refused the abort record (a recoverer's higher ballot, or the entry decided
    /// already): a ballot-0 record never lands there.
    refused: BTreeSet<DcId>,
    record_started: Option<Instant>,
    record_retry_at: Option<Instant>,
    // Phase 2: one delivery per DC, and the inter-DC messages of its failed attempts.
    deliveries: Vec<Delivery>,
    phase2_failed: Cost,
    /// The node's placements, if the driver gave them: phase 2 to a node the current epoch
    /// no longer places a replica on is dropped ([`crate::epochs::unplaced`]).
    placement: Option<std::sync::Arc<crate::epochs::Epochs>>,
    actions: VecDeque<Action>,
}

/// The DC of coordinator `me`.
///
/// # Errors
/// [`crate::Error::Topology`] when `me` is not a node of `topology`.
pub(crate) fn coordinator_dc(topology: &Topology, me: NodeId) -> crate::Result<DcId> {
    topology
        .nodes
        .get(me.0 as usize)
        .map(|n| n.dc)
        .ok_or_else(|| crate::Error::Topology(format!("coordinator {me} is not in the topology")))
}

impl CoordinatorTxn {
    /// Once decided, the phase 2 this coordinator sends each DC (the first one, with its
    /// entries and catch-up targets; a late vote's is not included), for later phase 1s to
    /// carry ([`crate::takeover`]); `None` while undecided.
    pub fn decided_phase2(&self) -> Option<BTreeMap<DcId, Decide>> {
        if self.decision.is_none() || !matches!(self.stage, Stage::Phase2 | Stage::Done) {
            return None;
        }
        let mut out = BTreeMap::new();
        for d in &self.deliveries {
            if let (Request::Decide(decide), Some(node)) = (&d.request, self.topology.nodes.get(d.to.0 as usize)) {
                out.entry(node.dc).or_insert_with(|| decide.clone());
            }
        }
        Some(out)
    }

    /// Gives the machine its node's placements: a phase-2 message to a node that the current
    /// epoch no longer places any replica on is not retried (docs/design.md, "Failover").
    pub fn with_placement(mut self, epochs: std::sync::Arc<crate::epochs::Epochs>) -> Self {
        self.placement = Some(epochs);
        self
    }

    /// Plans `call` as transaction `txn` coordinated by `me` and sends phase 1 to every
    /// participant DC (RedT §4.2, Algorithm 1 lines 1–3). `start` is the coordinator's HLC
    /// reading now: phase 1 carries it with its deadline (`start`'s milliseconds plus
    /// [`CoordinatorOptions::phase1_timeout`]), the executors record it in the redo entries,
    /// and the commit timestamp is above it. `topology` is the placement to plan in, the
    /// node's current one ([`crate::epochs::Epochs::current`]): the transaction belongs to its
    /// epoch.
    ///
    /// # Errors
    /// Why the call cannot run, the client's abort text: [`crate::Error::OverLimit`] for a
    /// call over the topology's limits (its planned records included, [`crate::limits`]),
    /// [`crate::Error::BadCall`] for an unknown procedure or table or malformed parameters,
    /// [`crate::Error::Topology`] for a coordinator outside the topology. `share` is the
    /// submitting client's share of the executors' bulk lane ([`Execute::share`]). The phase 1
    /// to each DC carries `carried`'s phase 2s of that DC ([`Execute::carried`]: decided-holder
    /// takeover, [`crate::takeover`]; empty without it).
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        topology: Placement,
        me: NodeId,
        txn: TxnId,
        call: ProcedureCall,
        share: u64,
        options: CoordinatorOptions,
        start: Cts,
        now: Instant,
        mut carried: BTreeMap<DcId, Vec<Decide>>,
    ) -> crate::Result<CoordinatorTxn> {
        let procedure = call::procedure(&topology, &call)?;
        let plan = plan::plan(&topology, procedure.as_ref())?;
        let my_dc = coordinator_dc(&topology, me)?;
        let remote = plan.participants.iter().filter(|&&d| d != my_dc).count() as u64;
        let class = Class { read_write: !plan.read_only, inter_dc: remote > 0 };
        let deadline_ms = (start.0 >> redt_dc_executor::LOGICAL_BITS) + options.phase1_timeout.as_millis() as u64;
        let mut t = CoordinatorTxn {
            txn,
            start,
            me,
            my_dc,
            phase1_deadline: now + options.phase1_timeout,
            phase1_open: 0,
            phase1_cost: Cost::default(),
            plan,
            call,
            topology,
            options,
            class,
            stage: Stage::Phase1,
            votes: BTreeMap::new(),
            failed: BTreeMap::new(),
            attempts: BTreeMap::new(),
            next_attempt: 0,
            decision: None,
            why: String::new(),
            cause: AbortCause::Timeout,
            answered: false,
            catch_up: CatchUp::default(),
            late: Vec::new(),
            late_cost: Cost::default(),
            round: 0,
            round_open: 0,
            holding: BTreeSet::new(),
            refused: BTreeSet::new(),
            record_started: None,
            record_retry_at: None,
            deliveries: Vec::new(),
            phase2_failed: Cost::default(),
            placement: None,
            actions: VecDeque::new(),
        };
        for dc in t.plan.participants.clone() {
            let request = Request::Execute(Execute {
                txn,
                coordinator: me,
                participants: t.plan.participants.clone(),
                call: t.call.clone(),
                scope: Scope::Dc,
                replicate: false,
                start,
                deadline_ms,
                partitions: t.plan.partitions.iter().map(|p| p.id).collect(),
                epoch: t.topology.epoch,
                share,
                carried: carried.remove(&dc).unwrap_or_default(),
            });
            t.phase1_open += 1;
            t.send(dc, Purpose::Phase1, request);
        }
        if t.plan.participants.is_empty() {
            t.try_decide(true, now);
        }
        Ok(t)
    }
}

impl TxnMachine for CoordinatorTxn {
    fn phase2(&self) -> Option<BTreeMap<DcId, Decide>> {
        self.decided_phase2()
    }

    /// The transaction id.
    fn txn(&self) -> TxnId {
        self.txn
    }

    /// Whether the transaction has nothing left to do (answered, phase 2 delivered or given
    /// up, no attempt outstanding that could still need a decision).
    fn is_done(&self) -> bool {
        self.stage == Stage::Done
    }

    /// The next action for the driver, if any.
    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When the driver must call [`TxnMachine::handle_timeout`] next (`None`: no timer).
    fn poll_timeout(&self) -> Option<Instant> {
        let phase1 = (self.stage == Stage::Phase1).then_some(self.phase1_deadline);
        earliest([phase1, self.record_retry_at, delivery::next_retry(&self.deliveries)])
    }

    /// Handles a timer firing at `now`: phase 1's deadline (decide with the votes there are),
    /// a retry of an abort's record round, or of an undelivered phase-2 message.
    fn handle_timeout(&mut self, now: Instant) {
        if self.stage == Stage::Phase1 && now >= self.phase1_deadline {
            self.try_decide(true, now);
        }
        if self.record_retry_at.is_some_and(|t| now >= t) {
            self.record_retry_at = None;
            self.record_round(now);
        }
        for (i, to, request) in delivery::due(&mut self.deliveries, now) {
            let dc = self.topology.nodes[to.0 as usize].dc;
            self.send_to(dc, to, Purpose::Decide(i), request);
        }
    }

    /// Handles the reply to `attempt` received at `now`.
    fn handle_reply(&mut self, attempt: AttemptId, reply: Reply, now: Instant) {
        if let Reply::Error { message, .. } = reply {
            return self.handle_failure(attempt, &message, now);
        }
        let Some(a) = self.attempts.remove(&attempt) else { return };
        let remote = a.dc != self.my_dc;
        match (a.purpose, reply) {
            (Purpose::Phase1, Reply::Vote { vote, .. }) if vote.txn == self.txn => {
                self.phase1_open -= 1;
                if self.stage == Stage::Phase1 {
                    self.votes.insert(a.dc, vote);
                    self.try_decide(self.phase1_open == 0, now);
                } else {
                    // A straggler: counted, and decided if it holds locks.
                    self.late_cost = self.late_cost.alongside(Cost { messages: u64::from(remote), round_trips: 0 });
                    if vote.is_commit() {
                        if self.stage == Stage::Recording {
                            self.late.push((a.dc, vote));
                        } else {
                            self.decide_late(a.dc, vote, now);
                        }
                    }
                }
            }
            (Purpose::Record(round), Reply::Recorded(ok)) => {
                if round == self.round && self.stage == Stage::Recording {
                    tracing::debug!(txn = %self.txn, dc = %self.topology.dc_name(a.dc), round, recorded = ok, "abort record answered");
                    self.round_open -= 1;
                    if ok {
                        self.holding.insert(a.dc);
                    } else {
                        self.refused.insert(a.dc);
                    }
                    self.after_record_reply(now);
                }
            }
            (Purpose::Decide(i), Reply::Decided(nested)) => {
                if let Some(d) = self.deliveries.get_mut(i) {
                    if !d.done {
                        d.done = true;
                        d.cost = Some(Cost::rpc(remote, nested));
                    }
                }
            }
            (purpose, _) => {
                // A reply of the wrong kind counts as a failure of the attempt.
                self.attempts.insert(attempt, Attempt { dc: a.dc, purpose });
                return self.handle_failure(attempt, "unexpected reply kind", now);
            }
        }
        self.maybe_finish();
    }

    /// Handles the failure of `attempt` at `now` (unreachable peer, call deadline, an error
    /// answer): a phase-1 attempt becomes a missing vote, a record attempt a refusal, a
    /// phase-2 attempt is retried after [`CoordinatorOptions::retry_every`].
    fn handle_failure(&mut self, attempt: AttemptId, error: &str, now: Instant) {
        let Some(a) = self.attempts.remove(&attempt) else { return };
        let remote = a.dc != self.my_dc;
        match a.purpose {
            Purpose::Phase1 => {
                tracing::debug!(txn = %self.txn, dc = %self.topology.dc_name(a.dc), "phase 1 failed: {error}");
                self.failed.insert(a.dc, error.to_string());
                self.phase1_open -= 1;
                if self.stage == Stage::Phase1 {
                    self.try_decide(self.phase1_open == 0, now);
                }
            }
            Purpose::Record(round) => {
                if round == self.round && self.stage == Stage::Recording {
                    self.round_open -= 1;
                    self.after_record_reply(now);
                }
            }
            Purpose::Decide(i) => {
                let give_up = self.options.give_up_after;
                let (base, max, salt) = (self.options.retry_every, self.options.retry_max, self.txn.0);
                let placement = self.placement.as_deref();
                if let Some(d) = self.deliveries.get_mut(i) {
                    if !d.done {
                        self.phase2_failed.messages += u64::from(remote);
                        if remote && crate::epochs::unplaced(placement, d.to) {
                            tracing::info!(txn = %self.txn, to = %self.topology.node_name(d.to), "phase 2 dropped: the node holds no replica in the current epoch");
                            d.done = true;
                        } else {
                            let pause = delivery::backoff(base, max, d.failures, salt);
                            d.failed(self.txn, &self.topology.dc_name(a.dc), error, now, pause, give_up);
                        }
                    }
                }
            }
        }
        self.maybe_finish();
    }
}

impl CoordinatorTxn {
    fn send(&mut self, dc: DcId, purpose: Purpose, request: Request) {
        let local = self.plan.local.get(&dc).map(Vec::as_slice).unwrap_or(&[]);
        let to = plan::executor_node(&self.topology, dc, local, self.me);
        self.send_to(dc, to, purpose, request);
    }

    fn send_to(&mut self, dc: DcId, to: NodeId, purpose: Purpose, request: Request) {
        let attempt = self.next_attempt;
        self.next_attempt += 1;
        self.attempts.insert(attempt, Attempt { dc, purpose });
        self.actions.push_back(Action::Send { attempt, to, request });
    }

    fn remote(&self) -> u64 {
        self.plan.participants.iter().filter(|&&d| d != self.my_dc).count() as u64
    }

    /// Applies the decision rule to the votes so far (RedT §4.2 "¾ quorum").
    fn try_decide(&mut self, final_round: bool, now: Instant) {
        let table = plan::vote_table(&self.plan, &self.votes, self.start);
        let Ruling::Decide { decision, why } = decide(&table, final_round) else {
            return;
        };
        let answered = self.votes.keys().filter(|&&dc| dc != self.my_dc).count() as u64;
        let remote = self.remote();
        self.phase1_cost = Cost { messages: remote + answered, round_trips: u64::from(remote > 0) };
        self.decision = Some(decision);
        match why {
            Why::Quorum => {
                let placement = self.placement.as_deref();
                let removed = |dc| crate::epochs::dc_removed(placement, dc);
                self.catch_up = catch_up::catch_up(&self.plan, &table, &removed);
                if mutant!(self.options.mutations.stop_before_answer_at == Some(self.me)) {
                    return self.die();
                }
                if self.options.early_ack {
                    let reads = reads(&self.topology, &self.call, &self.plan, &self.votes.values().collect::<Vec<_>>());
                    self.answer(TxnStatus::Committed, reads, Some(self.phase1_cost));
                }
                if mutant!(self.options.mutations.stop_before_phase2) {
                    return self.die();
                }
                self.start_phase2(now);
            }
            Why::CommitImpossible { partition } | Why::Timeout { partition } => {
                let proven = matches!(why, Why::CommitImpossible { .. });
                self.why = abort_reason(&self.topology, &self.votes, &self.failed, proven, &self.plan, partition);
                self.cause = abort_cause(&self.votes, &self.failed, proven);
                if mutant!(self.options.mutations.stop_before_answer_at == Some(self.me)) {
                    return self.die();
                }
                if mutant!(self.options.mutations.ack_abort_before_record) {
                    self.answer(TxnStatus::Aborted(self.why.clone()), Vec::new(), None);
                }
                if mutant!(self.options.mutations.stop_before_phase2) {
                    return self.die();
                }
                self.stage = Stage::Recording;
                self.holding = self.votes.iter().filter(|(_, v)| !v.is_commit()).map(|(&dc, _)| dc).collect();
                self.record_started = Some(now);
                self.record_round(now);
            }
        }
    }

    /// [`CoordinatorMutations::stop_before_phase2`]: done, with nothing more to send or wait for.
    fn die(&mut self) {
        tracing::warn!(txn = %self.txn, decision = ?self.decision, "injected fault: the coordinator stops before phase 2");
        self.stage = Stage::Done;
        self.attempts.clear();
        self.phase1_open = 0;
    }

    fn answer(&mut self, status: TxnStatus, reads: Vec<Option<Vec<u8>>>, cost: Option<Cost>) {
        if self.answered {
            return;
        }
        self.answered = true;
        let cost = cost.map(TxnCost::from);
        let cause = matches!(status, TxnStatus::Aborted(_)).then_some(self.cause);
        self.actions.push_back(Action::Answer {
            answer: TxnAnswer { txn: self.txn, status, cause, reads },
            class: self.class,
            cost,
        });
    }

    /// Whether a majority of every touched partition's replicas hold the abort (abort voters
    /// count: their vote can never become commit). docs/design.md §2.
    fn recorded(&self) -> bool {
        self.plan.partitions.iter().all(|p| {
            p.replicas.iter().filter(|(_, dc)| self.holding.contains(dc)).count() >= majority(p.replicas.len())
        })
    }

    /// Whether some partition can no longer reach a majority holding the abort: too many of
    /// its replicas' DCs refused the ballot-0 record.
    fn record_cannot_land(&self) -> bool {
        self.plan.partitions.iter().any(|p| {
            let open =
                p.replicas.iter().filter(|(_, dc)| !self.refused.contains(dc) || self.holding.contains(dc)).count();
            open < majority(p.replicas.len())
        })
    }

    /// Sends a round of abort records (ballot 0) to every participant DC that could have
    /// voted commit.
    fn record_round(&mut self, now: Instant) {
        self.round += 1;
        self.round_open = 0;
        let round = self.round;
        if self.recorded() {
            return self.on_recorded(now);
        }
        for dc in self.plan.participants.clone() {
            let entries = match self.votes.get(&dc) {
                Some(v) if !v.is_commit() => continue,
                Some(v) => v.entries.clone(),
                None => Vec::new(),
            };
            let request =
                Request::Record(Record { txn: self.txn, ballot: Ballot(0), decision: Decision::Abort, entries });
            self.round_open += 1;
            self.send(dc, Purpose::Record(round), request);
        }
        if self.round_open == 0 {
            self.after_record_reply(now);
        }
    }

    fn after_record_reply(&mut self, now: Instant) {
        if self.recorded() {
            return self.on_recorded(now);
        }
        if self.round_open > 0 {
            return;
        }
        // The round ended without a majority of some partition.
        if !self.answered {
            let why = format!("{}; the abort is not yet recorded at a majority", self.why);
            self.answer(TxnStatus::Unknown(why), Vec::new(), None);
        }
        if self.record_cannot_land() {
            // A recoverer owns the transaction (docs/design.md §2): it decides and applies it
            // everywhere; retrying ballot 0 here would only hold this machine for nothing.
            let refused: Vec<String> = self.refused.iter().map(|&dc| self.topology.dc_name(dc)).collect();
            tracing::info!(txn = %self.txn, ?refused, "abort record refused; recovery decides");
            self.stage = Stage::Done;
            self.finish();
            return;
        }
        let started = self.record_started.unwrap_or(now);
        if now.duration_since(started) > self.options.give_up_after {
            tracing::error!(txn = %self.txn, "abort never recorded at a majority; locks stay held");
            self.stage = Stage::Done;
            self.finish();
            return;
        }
        let pause = crate::delivery::backoff(
            self.options.retry_every,
            self.options.retry_max,
            self.round.saturating_sub(1),
            self.txn.0,
        );
        self.record_retry_at = Some(now + pause);
    }

    fn on_recorded(&mut self, now: Instant) {
        tracing::debug!(
            txn = %self.txn,
            holding = ?self.holding.iter().map(|&dc| self.topology.dc_name(dc)).collect::<Vec<_>>(),
            "abort held by a majority of every partition: answered aborted"
        );
        let why = self.why.clone();
        self.answer(TxnStatus::Aborted(why), Vec::new(), None);
        self.record_retry_at = None;
        self.start_phase2(now);
    }

    /// The decision each DC applies: a DC that left a written partition behind has its own
    /// redo aborted (its replicas are caught up instead).
    fn decision_in(&self, dc: DcId) -> Decision {
        match self.decision {
            Some(d @ Decision::Commit(_)) if !self.catch_up.behind.contains(&dc) => d,
            _ => Decision::Abort,
        }
    }

    /// Phase 2: the decision to every participant DC that did not vote abort, with the
    /// catch-up each ships (RedT §4.2, Algorithm 1 lines 10–16; docs/design.md §2).
    fn start_phase2(&mut self, now: Instant) {
        self.stage = Stage::Phase2;
        let cts = match self.decision {
            Some(Decision::Commit(c)) => c,
            _ => Cts(0),
        };
        for dc in self.plan.participants.clone() {
            let entries = match self.votes.get(&dc) {
                Some(v) if !v.is_commit() => continue,
                Some(v) => v.entries.clone(),
                None => Vec::new(),
            };
            let catch_up: Vec<CatchUpTarget> = self
                .catch_up
                .sources
                .get(&dc)
                .into_iter()
                .flatten()
                .map(|(p, nodes)| CatchUpTarget { partition: *p, nodes: nodes.clone(), cts })
                .collect();
            self.deliver(dc, entries, catch_up, now);
        }
        for (dc, vote) in std::mem::take(&mut self.late) {
            self.decide_late(dc, vote, now);
        }
        self.maybe_finish();
    }

    fn decide_late(&mut self, dc: DcId, vote: Vote, now: Instant) {
        self.deliver(dc, vote.entries, Vec::new(), now);
    }

    fn deliver(
        &mut self,
        dc: DcId,
        entries: Vec<redt_dc_executor::EntryRef>,
        catch_up: Vec<CatchUpTarget>,
        now: Instant,
    ) {
        let request = Request::Decide(Decide {
            txn: self.txn,
            ballot: Ballot(0),
            decision: self.decision_in(dc),
            entries,
            role: DecideRole::Executor,
            catch_up,
        });
        let local = self.plan.local.get(&dc).map(Vec::as_slice).unwrap_or(&[]);
        let to = plan::executor_node(&self.topology, dc, local, self.me);
        let idx = self.deliveries.len();
        self.deliveries.push(Delivery::new(to, request.clone(), now));
        self.send_to(dc, to, Purpose::Decide(idx), request);
    }

    fn maybe_finish(&mut self) {
        if self.stage != Stage::Phase2 || self.phase1_open > 0 || self.deliveries.iter().any(|d| !d.done) {
            return;
        }
        self.stage = Stage::Done;
        self.finish();
    }

    fn finish(&mut self) {
        let phase2 = self
            .deliveries
            .iter()
            .filter_map(|d| d.cost)
            .fold(self.phase2_failed, Cost::alongside)
            .alongside(self.late_cost);
        let committed = matches!(self.decision, Some(Decision::Commit(_)));
        if committed && !self.answered {
            let reads = reads(&self.topology, &self.call, &self.plan, &self.votes.values().collect::<Vec<_>>());
            let total = self.phase1_cost.then(phase2);
            self.answer(TxnStatus::Committed, reads, Some(total));
            self.actions.push_back(Action::Finished { class: self.class, after_answer: None });
        } else {
            let after = committed.then_some(phase2);
            self.actions.push_back(Action::Finished { class: self.class, after_answer: after });
        }
    }
}

/// The values each key/value operation read, from an up-to-date commit vote of each access
/// (the newest version among the votes); for a records call, what each get read
/// ([`call::encode_record_read`]: the record as it was before the transaction, or missing).
pub fn reads(topology: &Topology, call: &ProcedureCall, plan: &Plan, votes: &[&Vote]) -> Vec<Option<Vec<u8>>> {
    match &call.kind {
        Some(redt_proto::wire::ProcedureKind::Records(r)) => return record_reads(topology, r, plan, votes),
        Some(redt_proto::wire::ProcedureKind::Batch(b)) => return batch_reads(topology, b, plan, votes),
        _ => {}
    }
    let Some(kv) = call::kv_procedure(topology, call) else { return vec![] };
    let n = redt_dc_executor::Procedure::accesses(&kv).len();
    let values: Vec<Option<Vec<Vec<u8>>>> =
        newest_items(plan, votes, n).into_iter().map(|i| i.map(|(cells, _)| cells)).collect();
    let rows = newest_rows(votes, n);
    kv.observed(&ReadView::with_rows(&values, &rows))
}

/// What each key/value operation of each member of a batch read, members in order (a
/// member of another kind reads nothing): each member's values are the batch's, with what the
/// members before it wrote ([`redt_dc_executor::BatchProcedure::run_members`]).
fn batch_reads(
    topology: &Topology,
    b: &redt_proto::wire::BatchCall,
    plan: &Plan,
    votes: &[&Vote],
) -> Vec<Option<Vec<u8>>> {
    let Ok(batch) = call::batch(topology, b) else { return vec![] };
    let accesses = redt_dc_executor::Procedure::accesses(&batch);
    let mut values: Vec<Option<Vec<Vec<u8>>>> =
        newest_items(plan, votes, accesses.len()).into_iter().map(|i| i.map(|(cells, _)| cells)).collect();
    // Every cell at its stored width, so a member's write reads back as it is stored: a cell
    // no member reads was not reported, and is only ever read as a member before wrote it.
    for (v, a) in values.iter_mut().zip(accesses) {
        let (Some(cells), Some(schema)) = (v.as_mut(), topology.table(a.table)) else { continue };
        cells.resize(schema.cells.len(), Vec::new());
        for (cell, spec) in cells.iter_mut().zip(&schema.cells) {
            if cell.is_empty() {
                *cell = vec![0; spec.bytes as usize];
            }
        }
    }
    let Ok(runs) = batch.run_members(&ReadView::new(&values)) else { return vec![] };
    let mut out = Vec::new();
    for (c, view) in b.calls.iter().zip(&runs.views) {
        if let Some(kv) = call::kv_procedure(topology, c) {
            out.extend(kv.observed(&ReadView::new(view)));
        }
    }
    out
}

/// Per access of the plan (`n` of them): the rows of the range read it routes, from the
/// replica that returned the most rows (the newest on a tie). Once the transaction committed,
/// a quorum of replicas reported every row any replica reported, at its newest version, so
/// the fullest answer is an up-to-date one.
fn newest_rows(votes: &[&Vote], n: usize) -> Vec<Vec<redt_dc_executor::RangeRow>> {
    let mut best: Vec<(usize, Cts, Vec<redt_dc_executor::RangeRow>)> = vec![(0, Cts(0), Vec::new()); n];
    for v in votes.iter().filter(|v| v.is_commit()) {
        let mut answers: BTreeMap<(usize, NodeId), (Cts, Vec<redt_dc_executor::RangeRow>)> = BTreeMap::new();
        for item in &v.items {
            let Some(key) = item.row else { continue };
            let newest = item.versions.iter().map(|(_, ver)| ver.cts()).max().unwrap_or(Cts(0));
            let width = item.values.iter().map(|(c, _)| *c as usize + 1).max().unwrap_or(0);
            let mut cells = vec![Vec::new(); width];
            for (c, val) in &item.values {
                cells[*c as usize] = val.clone();
            }
            let e = answers.entry((item.access, item.node)).or_insert((Cts(0), Vec::new()));
            e.0 = e.0.max(newest);
            e.1.push(redt_dc_executor::RangeRow { key, cells });
        }
        for ((access, _), (newest, rows)) in answers {
            if access < n && (rows.len(), newest) > (best[access].0, best[access].1) {
                best[access] = (rows.len(), newest, rows);
            }
        }
    }
    best.into_iter().map(|(_, _, rows)| rows).collect()
}

/// Per access of the plan (`n` of them): the cells an up-to-date commit vote read (the one
/// with the newest version), and whether the record was absent there.
fn newest_items(plan: &Plan, votes: &[&Vote], n: usize) -> Vec<Option<(Vec<Vec<u8>>, bool)>> {
    let mut values: Vec<Option<(Vec<Vec<u8>>, bool)>> = vec![None; n];
    let mut best: Vec<Cts> = vec![Cts(0); n];
    for p in &plan.partitions {
        for &a in &p.accesses {
            for v in votes.iter().filter(|v| v.is_commit()) {
                for item in v.items.iter().filter(|i| i.access == a && i.row.is_none()) {
                    let newest = item.versions.iter().map(|(_, ver)| ver.cts()).max().unwrap_or(Cts(0));
                    if a < n && (values[a].is_none() || newest > best[a]) {
                        best[a] = newest;
                        let width = item.values.iter().map(|(c, _)| *c as usize + 1).max().unwrap_or(0);
                        let mut cells = vec![Vec::new(); width];
                        for (c, val) in &item.values {
                            cells[*c as usize] = val.clone();
                        }
                        values[a] = Some((cells, item.absent));
                    }
                }
            }
        }
    }
    values
}

/// What each operation of a records call read: a get its record ([`call::encode_record_read`]),
/// the others `None`.
fn record_reads(
    topology: &Topology,
    r: &redt_proto::wire::RecordsCall,
    plan: &Plan,
    votes: &[&Vote],
) -> Vec<Option<Vec<u8>>> {
    let Ok(ops) = call::record_ops(topology, r) else { return vec![] };
    // Accesses are the distinct records, in order of first mention (`RecordsProcedure::new`).
    let mut targets: Vec<(redt_proto::TableId, u64)> = Vec::new();
    let index: Vec<usize> = ops
        .iter()
        .map(|op| {
            let t = op.target();
            targets.iter().position(|x| *x == t).unwrap_or_else(|| {
                targets.push(t);
                targets.len() - 1
            })
        })
        .collect();
    let items = newest_items(plan, votes, targets.len());
    ops.iter()
        .zip(index)
        .map(|(op, a)| match op {
            redt_dc_executor::RecordOp::Get { .. } => {
                items[a].as_ref().map(|(cells, absent)| call::encode_record_read((!absent).then_some(cells.as_slice())))
            }
            _ => None,
        })
        .collect()
}

/// The abort counters' label for an abort, in [`abort_reason`]'s order: the first abort
/// vote's reason; else a DC that could not vote; else the rule's own case.
fn abort_cause(votes: &BTreeMap<DcId, Vote>, failed: &BTreeMap<DcId, String>, proven: bool) -> AbortCause {
    if let Some(v) = votes.values().find(|v| !v.is_commit()) {
        return v.abort.as_ref().map_or(AbortCause::User, AbortCause::of_vote);
    }
    if !failed.is_empty() {
        AbortCause::NoVote
    } else if proven {
        AbortCause::CommitImpossible
    } else {
        AbortCause::Timeout
    }
}

/// The client's error text for an abort: the first abort vote's reason; else why a phase 1
/// failed (the DCs of the partition that could not commit first); else the rule's own reason.
/// DCs and nodes are named as `topology` names them.
fn abort_reason(
    topology: &Topology,
    votes: &BTreeMap<DcId, Vote>,
    failed: &BTreeMap<DcId, String>,
    proven: bool,
    plan: &Plan,
    partition: usize,
) -> String {
    let pid = plan.partitions.get(partition).map(|p| p.id.0).unwrap_or(0);
    if let Some((dc, v)) = votes.iter().find(|(_, v)| !v.is_commit()) {
        let why = v.abort.as_ref().map(|r| crate::codec::reason_named(r, topology)).unwrap_or_default();
        return format!("{} voted abort: {why}", topology.dc_name(*dc));
    }
    let of_partition =
        |dc: &DcId| plan.partitions.get(partition).is_some_and(|p| p.replicas.iter().any(|r| r.1 == *dc));
    if let Some((dc, error)) = failed.iter().find(|(dc, _)| of_partition(dc)).or_else(|| failed.iter().next()) {
        return format!("{} could not vote: {error}", topology.dc_name(*dc));
    }
    if proven {
        format!("partition p{pid} cannot reach its commit quorum (stale replicas)")
    } else {
        format!("timed out waiting for the votes of partition p{pid}")
    }
}
