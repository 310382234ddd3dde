//! The recoverer of one transaction as a state machine: PREPARE every participant DC with a
//! ballot, apply the recovery rule, record the decision at a majority of every partition, then
//! apply it everywhere (docs/design.md §2 and "Recovery", the NB variant).
//!
//! Sans-IO, in the shape of every protocol machine ([`TxnMachine`], `crate::machine`): it
//! sends nothing, reads no clock and never sleeps. The rule itself is the pure
//! [`crate::recovery::recover`]; this file only sequences rounds:
//!
//! 1. **Prepare**: `RecoveryPrepare(b)` to one node of each participant DC, which fences the
//!    replicas that have not voted and promises `b` ([`redt_dc_executor::Promise`]). A DC that
//!    does not answer within [`RecoveryOptions::round_timeout`] counts as unreachable; a
//!    refusal (a higher ballot promised somewhere) restarts the round above it.
//! 2. **Decide**: the promises become one [`PrepareReply`] per replica of every partition;
//!    [`recover`] decides or blocks. Blocked: the locks stay, the DCs waited for are reported
//!    ([`Recoverer::blocked_on`]) and the round is retried after a back-off.
//! 3. **Record**: unless the decision was already applied somewhere or abort votes alone decided
//!    it (no commit was or will ever be chosen: `recovery` rule 2), `Record(b, decision)` to
//!    every DC holding an entry, until a majority of every partition holds it (an abort-voting
//!    or unvoted replica holds an abort by itself). A failed round goes back to 1.
//! 4. **Apply**: `Decide` to every DC holding an entry (a commit's stale or fenced replicas are
//!    aborted and caught up from an up-to-date one, as the coordinator does:
//!    [`crate::catch_up`]) or a replica that answered `NoVote` (its promise may hold a row of
//!    its promise table that only a decision frees), retried with back-off until each is
//!    answered, however long. The recoverer also ships each catch-up itself, from the source
//!    DC's redo that its promises carried: the source's executor ships only on the first
//!    decision it applies, and another recoverer's may have come first (sim seed 55). Its
//!    shipments give up after [`RecoveryOptions::catch_up_give_up`], as a source's do.
//!
//! The commit timestamp is `1 + max(newest versions, start)` over the up-to-date votes, the
//! same function of the redo entries the coordinator uses ([`crate::plan::vote_table`]).

use crate::catch_up::{self, CatchUp};
use crate::decision::{majority, quorum, ItemKey, PartitionVotes, ReplicaVote};
use crate::delivery::{self, Delivery};
use crate::machine::{earliest, Action, AttemptId, TxnMachine};
use crate::message::{CatchUpTarget, Decide, DecideRole, Record, RecoveryPrepare, Reply, Request};
use crate::plan::{Plan, PlannedPartition};
use crate::recovery::{recover, PrepareReply, Recorded, RecordedDecision, Recovery, Why};
use crate::recovery_options::RecoveryOptions;
use redt_dc_executor::{CellVersion, Decision, EntryRef, NodePromise, Promise, RedoEntry, VoteCode};
use redt_proto::{Ballot, Cts, DcId, Epoch, NodeId, PartitionId, Placement, TableId, Topology, TxnId};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a redo entry found by a scan tells a recoverer about its transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Orphan {
    /// The transaction.
    pub txn: TxnId,
    /// Its coordinator.
    pub coordinator: NodeId,
    /// The coordinator's start timestamp.
    pub start: Cts,
    /// Every DC it involves.
    pub participants: Vec<DcId>,
    /// Every partition it touches.
    pub partitions: Vec<PartitionId>,
    /// The placement epoch it was planned in: recovery uses that epoch's replica sets.
    pub epoch: Epoch,
}

impl Orphan {
    /// The placement to recover this transaction with: that of the epoch it was planned in
    /// (its n, Q and majority; docs/design.md, "Failover"), from the node's `epochs`. `None` while the
    /// node has not applied that epoch (a later scan tries again).
    pub fn placement(&self, epochs: &crate::epochs::Epochs) -> Option<Placement> {
        epochs.get(self.epoch)
    }

    /// Whether a node of DC `my_dc` may start recovering this transaction at wall time
    /// `now_ms` (ms since `redt_dc_executor::ORIGIN_UNIX_MS`, the node's clock): it started
    /// (its coordinator's HLC reading, whose physical part is in the same unit) at least
    /// [`RecoveryOptions::recover_after`] ago — phase 1's deadline, the clock-skew bound, and
    /// the wait of the coordinator's DC (shorter) or of any other DC. A coordinator the
    /// topology does not know counts as another DC's.
    pub fn due(
        &self,
        topology: &Topology,
        my_dc: DcId,
        phase1_timeout: Duration,
        options: &RecoveryOptions,
        now_ms: u64,
    ) -> bool {
        let coordinator_dc = topology.nodes.get(self.coordinator.0 as usize).map(|c| c.dc);
        let own_dc = coordinator_dc == Some(my_dc);
        let mut after = options.recover_after(phase1_timeout, own_dc);
        if !own_dc {
            // The other DCs take turns, in the order of the participants, so that they do not
            // all start at once and duel with their ballots.
            let mut others = self.participants.iter().filter(|&&d| Some(d) != coordinator_dc);
            let rank = others.position(|&d| d == my_dc).unwrap_or(self.participants.len());
            after += options.turn.saturating_mul(u32::try_from(rank).unwrap_or(u32::MAX));
        }
        let after_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        now_ms >= (self.start.0 >> redt_dc_executor::LOGICAL_BITS).saturating_add(after_ms)
    }

    /// The transaction of a phase-1 redo entry (`None` for replica entries and fillers).
    pub fn of(entry: &RedoEntry) -> Option<Orphan> {
        (!entry.partitions.is_empty()).then(|| Orphan {
            txn: entry.txn,
            coordinator: entry.coordinator,
            start: entry.start,
            participants: entry.participants.clone(),
            partitions: entry.partitions.clone(),
            epoch: entry.epoch,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Prepare,
    Record,
    Apply,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    Prepare(u32),
    Record(u32),
    Decide(usize),
    /// A catch-up shipment the recoverer delivers itself (index into `deliveries`).
    Ship(usize),
}

/// Bits of a ballot below its counter: the recovering node's id (docs/design.md §2: ballots are
/// `(counter, node)`, ordered by counter first).
const NODE_BITS: u32 = 10;

/// The ballot `(counter, node)`.
pub fn ballot(counter: u32, node: NodeId) -> Ballot {
    Ballot(counter << NODE_BITS | (u32::from(node.0) & ((1 << NODE_BITS) - 1)))
}

/// One transaction being recovered by node `me` (docs/design.md §2, recovery).
pub struct Recoverer {
    orphan: Orphan,
    me: NodeId,
    /// The placement of the epoch the transaction was planned in ([`Orphan::placement`]).
    topology: Placement,
    options: RecoveryOptions,
    stage: Stage,
    ballot: Ballot,
    round: u32,
    open: usize,
    round_deadline: Option<Instant>,
    retry_at: Option<Instant>,
    retries: u32,
    promises: BTreeMap<DcId, Vec<NodePromise>>,
    refused: Option<Ballot>,
    decision: Option<Decision>,
    why: Option<Why>,
    holding: BTreeSet<DcId>,
    blocked_on: Vec<DcId>,
    /// Phase 2 of the decision, one delivery per DC.
    deliveries: Vec<Delivery>,
    attempts: BTreeMap<AttemptId, (DcId, Purpose)>,
    next_attempt: AttemptId,
    /// The node's placements, if the driver gave them: the decision is not retried to a node
    /// the current epoch no longer places a replica on ([`crate::epochs::unplaced`]).
    placement: Option<Arc<crate::epochs::Epochs>>,
    actions: VecDeque<Action>,
}

impl Recoverer {
    /// Gives the recoverer its node's placements: its decision is not retried to a node that
    /// the current epoch no longer places any replica on (docs/design.md, "Failover").
    pub fn with_placement(mut self, epochs: Arc<crate::epochs::Epochs>) -> Self {
        self.placement = Some(epochs);
        self
    }

    /// Starts recovering `orphan` from node `me` at `now`: the first PREPARE round, with
    /// ballot `(1, me)`, over `topology`, the placement of the orphan's epoch
    /// ([`Orphan::placement`]).
    pub fn start(topology: Placement, me: NodeId, orphan: Orphan, options: RecoveryOptions, now: Instant) -> Self {
        let mut r = Recoverer {
            orphan,
            me,
            topology,
            options,
            stage: Stage::Prepare,
            ballot: ballot(1, me),
            round: 0,
            open: 0,
            round_deadline: None,
            retry_at: None,
            retries: 0,
            promises: BTreeMap::new(),
            refused: None,
            decision: None,
            why: None,
            holding: BTreeSet::new(),
            blocked_on: Vec::new(),
            deliveries: Vec::new(),
            attempts: BTreeMap::new(),
            next_attempt: 0,
            placement: None,
            actions: VecDeque::new(),
        };
        r.prepare_round(now);
        r
    }

    /// The decision, once taken.
    pub fn decision(&self) -> Option<Decision> {
        self.decision
    }

    /// The decision once the recovery is done (recorded, and its phase 2 answered or given up
    /// at every DC): how it ended; `None` before.
    pub fn applied_decision(&self) -> Option<Decision> {
        self.recorded_decision().filter(|_| self.stage == Stage::Done)
    }

    /// The decision once it is recorded at a majority of every partition, or once it is
    /// applied without a record (found applied, or an abort no commit can overtake: `recovery`
    /// rules 1 and 2); phase 2 may still be on its way to some DCs. `None` before.
    pub fn recorded_decision(&self) -> Option<Decision> {
        self.decision.filter(|_| matches!(self.stage, Stage::Apply | Stage::Done))
    }

    /// The DCs the last blocked round waited for (empty unless blocked).
    pub fn blocked_on(&self) -> &[DcId] {
        &self.blocked_on
    }

    /// The names of the DCs of [`Self::blocked_on`], as the topology file gives them (logs
    /// name DCs, not their internal ids).
    pub fn blocked_on_names(&self) -> Vec<String> {
        self.blocked_on.iter().map(|&dc| self.topology.dc_name(dc)).collect()
    }

    /// Its transaction's coordinator, start and participants.
    pub fn orphan(&self) -> &Orphan {
        &self.orphan
    }

    fn dc_of(&self, node: NodeId) -> DcId {
        self.topology.nodes.get(node.0 as usize).map_or(DcId(u16::MAX), |n| n.dc)
    }

    /// The node of `dc` that serves the recoverer's requests: itself in its own DC, else the
    /// first node of the DC holding a replica of the transaction.
    /// The node of `dc` that runs this recovery's requests there: this node in its own DC;
    /// elsewhere the first replica of the transaction's partitions in `dc`, else the DC's first
    /// node, preferring one that is still a voter of something in the current placement (a
    /// node removed on its own may stay down for good while its DC serves).
    fn executor_of(&self, dc: DcId) -> NodeId {
        if self.dc_of(self.me) == dc {
            return self.me;
        }
        let candidates: Vec<NodeId> = self
            .orphan
            .partitions
            .iter()
            .filter_map(|p| self.topology.partitions.get(p.0 as usize))
            .flat_map(|p| p.replicas.iter().copied())
            .filter(|&n| self.dc_of(n) == dc)
            .chain(self.topology.dcs.get(dc.0 as usize).into_iter().flat_map(|d| d.nodes.iter().copied()))
            .collect();
        candidates
            .iter()
            .copied()
            .find(|&n| !self.unvoting(n))
            .or_else(|| candidates.first().copied())
            .unwrap_or(self.me)
    }

    /// Whether the current placement (when known) makes `node` a voter of nothing: removed
    /// (alone or with its DC), or back and only a learner. Nothing it holds is trusted.
    fn unvoting(&self, node: NodeId) -> bool {
        self.placement.as_deref().is_some_and(|e| !e.holds_voter(node))
    }

    fn send(&mut self, dc: DcId, purpose: Purpose, request: Request) {
        let to = self.executor_of(dc);
        self.send_to(to, purpose, request);
    }

    fn send_to(&mut self, to: NodeId, purpose: Purpose, request: Request) {
        let attempt = self.next_attempt;
        self.next_attempt += 1;
        self.attempts.insert(attempt, (self.dc_of(to), purpose));
        self.actions.push_back(Action::Send { attempt, to, request });
    }

    /// A back-off pause before retry `retries` ([`crate::delivery::backoff`] from
    /// `retry_base` up to `retry_max`, jittered by the transaction id).
    fn backoff(&self, retries: u32) -> Duration {
        crate::delivery::backoff(self.options.retry_base, self.options.retry_max, retries, self.orphan.txn.0)
    }

    fn prepare_round(&mut self, now: Instant) {
        self.stage = Stage::Prepare;
        self.round += 1;
        self.promises.clear();
        self.refused = None;
        self.open = 0;
        let round = self.round;
        for dc in self.orphan.participants.clone() {
            let request = Request::RecoveryPrepare(RecoveryPrepare {
                txn: self.orphan.txn,
                ballot: self.ballot,
                start: self.orphan.start,
                partitions: self.orphan.partitions.clone(),
                epoch: self.orphan.epoch,
                coordinator: self.orphan.coordinator,
                participants: self.orphan.participants.clone(),
            });
            self.open += 1;
            self.send(dc, Purpose::Prepare(round), request);
        }
        self.round_deadline = Some(now + self.options.round_timeout);
        if self.open == 0 {
            self.after_prepare(now);
        }
    }

    /// Every replica of every partition, as (node, DC), in placement order.
    fn partitions(&self) -> Vec<(PartitionId, Vec<(NodeId, DcId)>)> {
        self.orphan
            .partitions
            .iter()
            .filter_map(|&p| {
                let part = self.topology.partitions.get(p.0 as usize)?;
                Some((p, part.replicas.iter().map(|&n| (n, self.dc_of(n))).collect()))
            })
            .collect()
    }

    fn promise_of(&self, node: NodeId, dc: DcId) -> Option<&Promise> {
        self.promises.get(&dc)?.iter().find(|p| p.node == node).map(|p| &p.promise)
    }

    /// The recovery rule's view of the promises: one reply per replica per partition.
    fn replies(&self) -> Vec<Vec<PrepareReply>> {
        let keys = ItemKeys::of(self.promises.values().flatten());
        self.partitions()
            .iter()
            .map(|(p, replicas)| {
                replicas
                    .iter()
                    .map(|&(node, dc)| match self.promise_of(node, dc) {
                        None | Some(Promise::Unknown) | Some(Promise::Refused { .. }) => PrepareReply::Unreachable,
                        Some(Promise::Applied(d)) => PrepareReply::Applied(*d),
                        Some(Promise::NoVote) => PrepareReply::Prepared { vote: ReplicaVote::Abort, record: None },
                        Some(Promise::Entry { vote, recorded, redo, .. }) => PrepareReply::Prepared {
                            vote: match vote {
                                VoteCode::Commit => ReplicaVote::Commit {
                                    versions: keys.versions(&self.topology, *p, redo),
                                    hlc: self.orphan.start,
                                },
                                _ => ReplicaVote::Abort,
                            },
                            record: recorded.map(|(d, ballot)| Recorded {
                                ballot,
                                decision: match d {
                                    VoteCode::Commit => RecordedDecision::Commit(None),
                                    _ => RecordedDecision::Abort,
                                },
                            }),
                        },
                    })
                    .collect()
            })
            .collect()
    }

    fn after_prepare(&mut self, now: Instant) {
        self.round_deadline = None;
        if let Some(promised) = self.refused {
            // Someone promised a higher ballot: go above it after a pause.
            self.ballot = ballot((promised.0 >> NODE_BITS) + 1, self.me);
            return self.retry_later(now);
        }
        if self.partitions().is_empty() {
            return self.retry_later(now);
        }
        // The recovery rule: ours, unless a mutant takes the RedT paper's, votes beating records
        // or abort votes that wait for a majority.
        let mutants = (
            mutant!(self.options.mutations.papers_rule),
            mutant!(self.options.mutations.votes_beat_records),
            mutant!(self.options.mutations.abort_votes_need_a_majority),
        );
        let rule = match mutants {
            (true, _, _) => crate::recovery::papers_rule,
            (false, true, _) => crate::recovery::votes_beat_records,
            (false, false, true) => crate::recovery::abort_votes_need_a_majority,
            (false, false, false) => recover,
        };
        match rule(&self.replies()) {
            Recovery::Block { .. } => {
                self.blocked_on =
                    self.orphan.participants.iter().copied().filter(|dc| !self.promises.contains_key(dc)).collect();
                tracing::warn!(
                    txn = %self.orphan.txn,
                    waiting_for = ?self.blocked_on_names(),
                    "recovery blocked; locks stay held"
                );
                self.retry_later(now);
            }
            Recovery::Decide { decision, why } => {
                self.blocked_on.clear();
                self.decision = Some(decision);
                self.why = Some(why);
                // An abort that abort votes and records alone decided needs no record: no
                // commit was or will ever be chosen (`recovery` rule 2).
                if why == Why::Applied || why == Why::AbortVotes || mutant!(self.options.mutations.act_before_recording)
                {
                    self.apply(decision, now);
                } else {
                    self.record_round(decision, now);
                }
            }
        }
    }

    fn retry_later(&mut self, now: Instant) {
        self.retry_at = Some(now + self.backoff(self.retries));
        self.retries = self.retries.saturating_add(1);
    }

    fn entries_in(&self, dc: DcId) -> Vec<EntryRef> {
        self.promises
            .get(&dc)
            .into_iter()
            .flatten()
            .filter_map(|p| match &p.promise {
                Promise::Entry { entry, .. } => Some(*entry),
                _ => None,
            })
            .collect()
    }

    fn record_round(&mut self, decision: Decision, now: Instant) {
        self.stage = Stage::Record;
        self.round += 1;
        self.open = 0;
        self.holding.clear();
        let round = self.round;
        for dc in self.orphan.participants.clone() {
            let entries = self.entries_in(dc);
            if entries.is_empty() {
                continue;
            }
            let request = Request::Record(Record { txn: self.orphan.txn, ballot: self.ballot, decision, entries });
            self.open += 1;
            self.send(dc, Purpose::Record(round), request);
        }
        self.round_deadline = Some(now + self.options.round_timeout);
        self.after_record(now);
    }

    /// Whether a majority of every partition holds the decision: replicas of DCs whose record
    /// succeeded, replicas that applied it, and (for an abort) replicas that voted abort or
    /// never voted.
    fn recorded(&self, decision: Decision) -> bool {
        self.partitions().iter().all(|(_, replicas)| {
            let holds = replicas
                .iter()
                .filter(|&&(node, dc)| match self.promise_of(node, dc) {
                    Some(Promise::Entry { .. }) => self.holding.contains(&dc),
                    Some(Promise::Applied(d)) => *d == decision,
                    Some(Promise::NoVote) => decision == Decision::Abort,
                    _ => false,
                })
                .count();
            holds >= majority(replicas.len())
        })
    }

    fn after_record(&mut self, now: Instant) {
        let Some(decision) = self.decision else { return };
        if self.recorded(decision) {
            self.round_deadline = None;
            return self.apply(decision, now);
        }
        if self.open > 0 {
            return;
        }
        self.round_deadline = None;
        // Short of a majority (a DC unreachable, or a higher ballot promised): prepare again.
        self.stage = Stage::Prepare;
        self.ballot = ballot((self.ballot.0 >> NODE_BITS) + 1, self.me);
        self.retry_later(now);
    }

    /// Phase 2 of the recovered decision to every DC holding an entry.
    fn apply(&mut self, decision: Decision, now: Instant) {
        self.stage = Stage::Apply;
        let catch_up = match decision {
            Decision::Commit(_)
                if self.why == Some(Why::Applied)
                    && !mutant!(self.options.mutations.catch_up_after_applied)
                    && self.none_left_behind() =>
            {
                self.learners_only()
            }
            Decision::Commit(_) => self.catch_up(),
            Decision::Abort => CatchUp::default(),
        };
        let plan = self.plan();
        for dc in self.orphan.participants.clone() {
            let entries = self.entries_in(dc);
            let ships: Vec<CatchUpTarget> = match decision {
                Decision::Commit(cts) => catch_up
                    .sources
                    .get(&dc)
                    .into_iter()
                    .flatten()
                    .map(|(p, nodes)| CatchUpTarget { partition: *p, nodes: nodes.clone(), cts })
                    .collect(),
                Decision::Abort => Vec::new(),
            };
            // A DC that answered with no entry has nothing to apply, unless a replica there
            // answered `NoVote`: its ring may have had no room for a fence entry, and the
            // promise it kept instead holds the transaction's row of its promise table until a
            // decision frees it (`redt_dc_executor::promise_table`). One that did not answer
            // may hold entries the recoverer never saw: its executor finds them by scanning.
            let no_vote = self.promises.get(&dc).is_some_and(|ps| ps.iter().any(|p| p.promise == Promise::NoVote));
            if entries.is_empty() && ships.is_empty() && self.promises.contains_key(&dc) && !no_vote {
                continue;
            }
            if let (Decision::Commit(_), false) =
                (decision, mutant!(self.options.mutations.ship_only_through_the_source))
            {
                self.ship(dc, &ships, now);
            }
            let behind = catch_up.behind.contains(&dc);
            // A DC that did not answer counts as behind only for want of its votes: it may hold
            // up-to-date entries, so it is told to abort them only if the values reach every
            // replica it holds of the transaction's partitions; otherwise it is left to the
            // coordinator's phase 2 or a recovery that hears from it.
            if behind
                && !self.promises.contains_key(&dc)
                && !mutant!(self.options.mutations.abort_unheard_without_catch_up)
                && !Self::reaches(&catch_up, &plan, dc)
            {
                tracing::debug!(
                    txn = %self.orphan.txn,
                    dc = %self.topology.dc_name(dc),
                    "no catch-up can reach a DC that did not answer: its decision is left to others"
                );
                continue;
            }
            let d = if behind { Decision::Abort } else { decision };
            let request = Request::Decide(Decide {
                txn: self.orphan.txn,
                ballot: self.ballot,
                decision: d,
                entries,
                role: DecideRole::Executor,
                catch_up: ships,
            });
            let idx = self.deliveries.len();
            self.deliveries.push(Delivery::new(self.executor_of(dc), request.clone(), now));
            self.send(dc, Purpose::Decide(idx), request);
        }
        self.maybe_done();
    }

    /// Delivers the catch-up `ships` of source DC `dc` straight to the replicas, from the redo
    /// of `dc`'s promises (none if it promised no entry: then only its executor can ship).
    /// A re-shipment in the catch-up's sense: it never says the target was behind (only the
    /// coordinator, with every vote in hand, knows that), and a target that already holds the
    /// values changes nothing (Thomas write rule).
    fn ship(&mut self, dc: DcId, ships: &[CatchUpTarget], now: Instant) {
        let redo: Vec<RedoEntry> = self
            .promises
            .get(&dc)
            .into_iter()
            .flatten()
            .filter_map(|p| match &p.promise {
                Promise::Entry { redo, .. } => Some(redo.clone()),
                _ => None,
            })
            .collect();
        if redo.is_empty() || ships.is_empty() {
            return;
        }
        let placement = self.placement.clone();
        let targets: Vec<CatchUpTarget> = ships
            .iter()
            .map(|t| CatchUpTarget {
                nodes: t.nodes.iter().copied().filter(|&n| !crate::epochs::unplaced(placement.as_deref(), n)).collect(),
                ..t.clone()
            })
            .collect();
        for (to, request) in catch_up::shipments(&self.topology, self.orphan.txn, &redo, &targets, false) {
            let idx = self.deliveries.len();
            self.deliveries.push(Delivery::new(to, request.clone(), now));
            self.send_to(to, Purpose::Ship(idx), request);
        }
    }

    /// Whether `catch_up` ships to every replica `dc` holds of `plan`'s partitions (learners
    /// aside: they are owed a catch-up whatever their DC is told).
    fn reaches(catch_up: &CatchUp, plan: &Plan, dc: DcId) -> bool {
        plan.partitions.iter().all(|p| {
            p.replicas.iter().filter(|&&(_, d)| d == dc).all(|&(node, _)| {
                catch_up.sources.values().flatten().any(|(id, targets)| *id == p.id && targets.contains(&node))
            })
        })
    }

    /// Whether a commit found applied left no replica behind: the coordinator decided it
    /// (no entry shows a recovery ballot) and every partition's quorum is all its replicas
    /// (`Q(n) = n`, n ≤ 3), so every replica voted commit on up-to-date values and every DC
    /// commits its own redo, including DCs that did not answer. Recomputing the catch-up
    /// from the promises instead would count the replicas that applied the commit as missing
    /// votes and abort the redo of DCs that were up to date, with nobody left to ship them the
    /// values (found by the simulation: seed 1109, bank on local-fast.yaml).
    fn none_left_behind(&self) -> bool {
        let by_coordinator = self.promises.values().flatten().all(|p| match &p.promise {
            Promise::Entry { recorded: Some((_, b)), .. } => b.0 == 0,
            _ => true,
        });
        by_coordinator && self.partitions().iter().all(|(_, replicas)| quorum(replicas.len()) == replicas.len())
    }

    /// The catch-up of a commit that left no replica behind: only the learners of its
    /// partitions are owed one, each shipped by the partition's first replica's DC (every
    /// replica was up to date).
    fn learners_only(&self) -> CatchUp {
        let mut out = CatchUp::default();
        for p in self.plan().partitions {
            if let (Some(&(_, source)), false) = (p.replicas.first(), p.learners.is_empty()) {
                out.sources.entry(source).or_default().push((p.id, p.learners));
            }
        }
        out
    }

    /// The transaction's partitions as a plan, every one treated as written.
    fn plan(&self) -> Plan {
        Plan {
            participants: self.orphan.participants.clone(),
            local: BTreeMap::new(),
            partitions: self
                .partitions()
                .into_iter()
                .map(|(id, replicas)| {
                    let learners = self
                        .topology
                        .partitions
                        .get(id.0 as usize)
                        .map(|p| p.learners.iter().map(|l| l.node).collect())
                        .unwrap_or_default();
                    PlannedPartition { id, accesses: Vec::new(), replicas, writes: true, learners }
                })
                .collect(),
            read_only: false,
        }
    }

    /// The replicas a recovered commit leaves behind and who ships to them (as the
    /// coordinator's [`catch_up::catch_up`], every partition treated as written).
    ///
    /// A commit vote that read a version at or past the commit's timestamp counts as missing:
    /// it is a phase 1 run again after the commit was applied there (a delayed duplicate
    /// reaching a restarted node), so its values are the commit applied twice, and the
    /// replay never applies them. Taken for a vote, its newer versions would make it the
    /// source and leave the replicas whose votes the commit counted behind (sim seed 51086,
    /// bank on world-5dc-n5.yaml, `all,remove,remove-node`).
    fn catch_up(&self) -> CatchUp {
        let replies = self.replies();
        let plan = self.plan();
        let cts = match self.decision {
            Some(Decision::Commit(cts)) => cts,
            _ => Cts(Cts::MASK),
        };
        let stale = |vote: &ReplicaVote| match vote {
            ReplicaVote::Commit { versions, .. } => {
                !mutant!(self.options.mutations.stale_vote_as_source) && versions.iter().any(|(_, v)| v.cts() >= cts)
            }
            _ => false,
        };
        let table: Vec<PartitionVotes> = replies
            .iter()
            .map(|p| {
                PartitionVotes::new(
                    p.iter()
                        .map(|r| match r {
                            PrepareReply::Prepared { vote, .. } if !stale(vote) => vote.clone(),
                            _ => ReplicaVote::Missing,
                        })
                        .collect(),
                )
            })
            .collect();
        let placement = self.placement.as_deref();
        catch_up::catch_up(&plan, &table, &|dc| crate::epochs::dc_removed(placement, dc))
    }

    fn maybe_done(&mut self) {
        if self.stage == Stage::Apply && self.deliveries.iter().all(|d| d.done) {
            self.stage = Stage::Done;
            tracing::info!(txn = %self.orphan.txn, decision = ?self.decision, why = ?self.why, "recovered");
        }
    }
}

impl TxnMachine for Recoverer {
    fn txn(&self) -> TxnId {
        self.orphan.txn
    }

    /// Done; or abandoned once its own node is a voter of nothing (removed with its DC, or
    /// back and only a learner): it then drops its old entries instead of recovering them, and
    /// a recoverer of it would only duel with the survivors' (sim seed 2082, default, 6 s).
    fn is_done(&self) -> bool {
        self.stage == Stage::Done || self.placement.as_deref().is_some_and(|e| !e.holds_voter(self.me))
    }

    fn handle_reply(&mut self, attempt: AttemptId, reply: Reply, now: Instant) {
        if let Reply::Error { message, .. } = reply {
            return self.handle_failure(attempt, &message, now);
        }
        let Some((dc, purpose)) = self.attempts.remove(&attempt) else { return };
        match (purpose, reply) {
            (Purpose::Prepare(round), Reply::Promises(promises)) => {
                if round != self.round || self.stage != Stage::Prepare {
                    return;
                }
                self.open -= 1;
                // A DC removed since the transaction's epoch counts as unreachable: nothing it
                // holds is trusted, and once it learns of its removal it drops its undecided
                // entries (`ExecutorCore::discard_if_removed`), so a vote it gave here may be
                // gone by the record round (sim seed 88, world-5dc, 6 s: a commit decided on
                // such a vote could never be recorded at a majority).
                // The same holds for a node removed on its own (its DC stays up).
                if crate::epochs::dc_removed(self.placement.as_deref(), dc) {
                    tracing::debug!(
                        txn = %self.orphan.txn,
                        dc = %self.topology.dc_name(dc),
                        "promises of a removed DC ignored"
                    );
                } else {
                    let mut promises = promises;
                    promises.retain(|p| !self.unvoting(p.node));
                    for p in &promises {
                        if let Promise::Refused { promised } = p.promise {
                            self.refused = Some(self.refused.map_or(promised, |r| r.max(promised)));
                        }
                    }
                    self.promises.insert(dc, promises);
                }
                if self.open == 0 {
                    self.after_prepare(now);
                }
            }
            (Purpose::Record(round), Reply::Recorded(ok)) => {
                if round != self.round || self.stage != Stage::Record {
                    return;
                }
                self.open -= 1;
                if ok {
                    self.holding.insert(dc);
                }
                self.after_record(now);
            }
            (Purpose::Decide(i), Reply::Decided(_)) | (Purpose::Ship(i), Reply::Accepted(_)) => {
                if let Some(d) = self.deliveries.get_mut(i) {
                    d.done = true;
                }
                self.maybe_done();
            }
            (purpose, _) => {
                self.attempts.insert(attempt, (dc, purpose));
                self.handle_failure(attempt, "unexpected reply kind", now);
            }
        }
    }

    fn handle_failure(&mut self, attempt: AttemptId, error: &str, now: Instant) {
        let Some((dc, purpose)) = self.attempts.remove(&attempt) else { return };
        tracing::debug!(txn = %self.orphan.txn, dc = %self.topology.dc_name(dc), "recovery request failed: {error}");
        match purpose {
            Purpose::Prepare(round) if round == self.round && self.stage == Stage::Prepare => {
                self.open -= 1;
                if self.open == 0 {
                    self.after_prepare(now);
                }
            }
            Purpose::Record(round) if round == self.round && self.stage == Stage::Record => {
                self.open -= 1;
                self.after_record(now);
            }
            Purpose::Decide(i) => {
                let Some(pause) = self.deliveries.get(i).map(|d| self.backoff(d.failures)) else { return };
                let txn = self.orphan.txn;
                let own_dc = self.dc_of(self.deliveries[i].to) == self.dc_of(self.me);
                let name = self.topology.node_name(self.deliveries[i].to);
                let d = &mut self.deliveries[i];
                // A node removed with its DC is owed nothing: nothing it holds is trusted
                // again. But a recoverer on a removed node still finishes its own DC's entries
                // (their locks and the ring's head wait for it).
                if !own_dc && crate::epochs::unplaced(self.placement.as_deref(), d.to) {
                    tracing::info!(%txn, to = %name, "recovery decision dropped: the node holds no replica in the current epoch");
                    d.done = true;
                    self.maybe_done();
                    return;
                }
                // Never given up: nothing may stay locked, however long the outage.
                d.failed(txn, &name, error, now, pause, Duration::MAX);
            }
            Purpose::Ship(i) => {
                let Some(pause) = self.deliveries.get(i).map(|d| self.backoff(d.failures)) else { return };
                let (txn, give_up) = (self.orphan.txn, self.options.catch_up_give_up);
                let unplaced =
                    self.deliveries.get(i).is_some_and(|d| crate::epochs::unplaced(self.placement.as_deref(), d.to));
                let name = self.topology.node_name(self.deliveries[i].to);
                let d = &mut self.deliveries[i];
                if unplaced {
                    d.done = true;
                } else {
                    d.failed(txn, &name, error, now, pause, give_up);
                }
                self.maybe_done();
            }
            _ => {}
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.round_deadline.is_some_and(|t| now >= t) {
            self.round_deadline = None;
            // The DCs that have not answered count as unreachable.
            self.attempts.retain(|_, (_, p)| matches!(p, Purpose::Decide(_)));
            self.open = 0;
            match self.stage {
                Stage::Prepare => self.after_prepare(now),
                Stage::Record => self.after_record(now),
                _ => {}
            }
        }
        if self.retry_at.is_some_and(|t| now >= t) {
            self.retry_at = None;
            self.prepare_round(now);
        }
        for (i, to, request) in delivery::due(&mut self.deliveries, now) {
            let purpose = if matches!(request, Request::Accept(_)) { Purpose::Ship(i) } else { Purpose::Decide(i) };
            self.send_to(to, purpose, request);
        }
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        earliest([self.round_deadline, self.retry_at, delivery::next_retry(&self.deliveries)])
    }
}

/// A stable numbering of the records the promised entries lock, so that the versions two
/// replicas report for one cell compare under one [`ItemKey`].
struct ItemKeys(BTreeMap<(TableId, u64), u32>);

impl ItemKeys {
    fn of<'a>(promises: impl Iterator<Item = &'a NodePromise>) -> ItemKeys {
        let mut keys = BTreeMap::new();
        for p in promises {
            if let Promise::Entry { redo, .. } = &p.promise {
                for l in &redo.locks {
                    keys.entry((l.table, l.key)).or_insert(0);
                }
            }
        }
        for (i, v) in keys.values_mut().enumerate() {
            *v = i as u32;
        }
        ItemKeys(keys)
    }

    /// The `(item, version)` pairs `redo` saw on the records of partition `p`.
    fn versions(&self, topology: &Topology, p: PartitionId, redo: &RedoEntry) -> Vec<(ItemKey, CellVersion)> {
        let mut out = Vec::new();
        for l in &redo.locks {
            let Some(schema) = topology.table(l.table) else { continue };
            if topology.partition_of(schema, l.key) != p {
                continue;
            }
            let item = self.0.get(&(l.table, l.key)).copied().unwrap_or(u32::MAX);
            let cells = (0..64u16).filter(|c| l.cells >> c & 1 == 1);
            for (c, &v) in cells.zip(&l.versions) {
                out.push((ItemKey::new(item, c), CellVersion(v)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_log;

    fn topology() -> Placement {
        let path = format!("{}/../configs/local-fast.yaml", env!("CARGO_MANIFEST_DIR"));
        Placement::from(Topology::load(std::path::Path::new(&path)).expect("config loads"))
    }

    /// Transaction 1 of node#0, across the first three DCs, on partition 0, and the options
    /// its recoverer runs with.
    fn orphan_of(t: &Placement) -> (Orphan, RecoveryOptions) {
        let orphan = Orphan {
            txn: TxnId::new(NodeId(0), 1),
            coordinator: NodeId(0),
            start: Cts(1),
            participants: vec![DcId(0), DcId(1), DcId(2)],
            partitions: vec![PartitionId(0)],
            epoch: t.epoch,
        };
        (orphan, RecoveryOptions::for_topology(t, Duration::from_millis(250)))
    }

    /// Names, not internal ids, in every log line: a recovery that no DC answers
    /// blocks (docs/design.md §2, recovery), and its warning names the DCs it waits for as
    /// the topology file does (`dc1`, not `dc#0`); so does each failed request's line.
    #[test]
    fn a_blocked_recovery_names_the_dcs_it_waits_for() {
        let t = topology();
        let now = Instant::now();
        let (orphan, options) = orphan_of(&t);
        let (r, logged) = test_log::capture(|| {
            let mut r = Recoverer::start(t.clone(), NodeId(3), orphan, options, now);
            while let Some(a) = r.poll_action() {
                if let Action::Send { attempt, .. } = a {
                    r.handle_failure(attempt, "unreachable", now);
                }
            }
            r
        });
        assert_eq!(r.blocked_on(), [DcId(0), DcId(1), DcId(2)], "{logged}");
        let line = logged.lines().find(|l| l.contains("recovery blocked")).expect("the block is logged");
        assert!(line.contains(r#"waiting_for=["dc1", "dc2", "dc3"]"#), "{line}");
        assert!(logged.lines().any(|l| l.contains("recovery request failed") && l.contains("dc=dc2")), "{logged}");
        assert!(!logged.contains("dc#") && !logged.contains("DcId"), "{logged}");
    }

    /// A replica that answered `NoVote` may hold the transaction's row of its promise table
    /// (its ring had no room for a fence entry), which only a decision frees: its DC gets the
    /// decision although it holds no entry, while a DC that answered only with a decision
    /// applied gets nothing.
    #[test]
    fn a_dc_that_answered_no_vote_gets_the_decision() {
        let t = topology();
        let now = Instant::now();
        let (orphan, options) = orphan_of(&t);
        let mut r = Recoverer::start(t.clone(), NodeId(3), orphan, options, now);
        let mut prepares = Vec::new();
        while let Some(a) = r.poll_action() {
            if let Action::Send { attempt, to, request: Request::RecoveryPrepare(_) } = a {
                prepares.push((attempt, to));
            }
        }
        assert_eq!(prepares.len(), 3, "{prepares:?}");
        for (attempt, node) in prepares {
            let promise = if node == NodeId(1) { Promise::NoVote } else { Promise::Applied(Decision::Abort) };
            r.handle_reply(attempt, Reply::Promises(vec![NodePromise { node, promise }]), now);
        }
        assert_eq!(r.decision(), Some(Decision::Abort));
        let mut decided = Vec::new();
        while let Some(a) = r.poll_action() {
            if let Action::Send { to, request: Request::Decide(d), .. } = a {
                assert_eq!((d.decision, d.entries.is_empty()), (Decision::Abort, true), "{d:?}");
                decided.push(to);
            }
        }
        assert_eq!(decided, [NodeId(1)]);
    }
}
