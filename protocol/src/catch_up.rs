//! Catching up the replicas a commit left behind (docs/design.md §2, phase 2).
//!
//! With `Q = ceil(3n/4) < n` (n ≥ 4) a transaction commits while some replicas of a partition
//! it writes voted abort, voted commit on an older version (stale: their writes were computed
//! from old values), or never answered. Their DC's own redo must not be applied; instead each
//! of those replicas gets a fresh `Committed` redo entry with the quorum's values, shipped by
//! a DC that was up to date for the partition. A DC votes once for all its replicas, so a DC
//! that left any written partition behind has all of its redo aborted, and every replica it
//! holds of a written partition is caught up.
//!
//! Pure: [`catch_up`] is a function of the plan and the vote table, [`shipments`] of a source's
//! redo and its targets; the driver sends. The same mechanism (an accept of redo into a
//! replica's own ring, then the decision that settles it) is how the baselines' secondaries
//! receive their primary's redo.
//!
//! # A catch-up outlives its source
//!
//! Once a transaction is decided everywhere no recoverer will ever look at it again, so a
//! catch-up that lived only in its source's memory died with it: a source that crashed before
//! its accept reached a behind replica left that replica behind for good (sim-20dc seed 2012).
//! The debt is therefore kept where a crash cannot reach it, in the source's own redo ring:
//!
//! - The source's executor decides each of its entries with a *catch-up mask*
//!   ([`owed_mask`]; bits 8..16 of the entry's status word, set in the same WRITE as the
//!   decision, `redt_dc_executor::Executor::finish_owing`). Replay applies the entry as any
//!   other but the ring's head stays before it, so the redo that the catch-up ships stays
//!   readable.
//! - The source's driver delivers the shipments with a [`Shipper`] (retries back off from
//!   [`RecoveryOptions::retry_base`] to [`RecoveryOptions::retry_max`]) and, once every one
//!   is acknowledged, clears the masks (`ExecutorCore::clear_owed`).
//! - Every recovery scan of a ring also lists its entries that still owe a catch-up. One that
//!   is as old as a recoverable orphan (`Orphan::due`) and that no machine of the ring's own
//!   node is shipping is shipped again by that node from the entry itself
//!   ([`reship_targets`]): the precise targets were in the lost memory, so every replica of
//!   the marked partitions outside the source's DC gets the values; up-to-date ones change
//!   nothing (Thomas write rule, the same `seen` version).
//! - Bounded: a shipper gives up after [`RecoveryOptions::catch_up_give_up`] (30 s) and the
//!   masks are cleared anyway, with an error naming the replicas it could not reach, so a
//!   replica that stays unreachable (a dead DC) holds a source's ring for at most that long
//!   (a ring that fills meanwhile makes its node vote abort, `RingFull`). Such a replica
//!   stays behind until the next committed write of each cell it missed reaches it (a
//!   catch-up carries whole cell values), or until a rebuild restores its DC; it is
//!   never read as current, since a stale vote is not up to date.
//!
//! Why the source's ring and not the behind replica's: a replica is often behind *because*
//! its ring was full (its DC voted abort, `RingFull`), so it may hold no entry of the
//! transaction at all; the source always holds one.
//!
//! Which values may be re-shipped: a source whose own redo commits was up to date for every
//! written partition, so all of its entry's changes are right. A source that ships one
//! partition while its DC was behind for another (the fallback of [`catch_up`]) has its redo
//! aborted, and only the shipped partitions' values are right: the mask names partitions by
//! their position in the entry's `partitions` list (bit `i` for position `i < 7`, bit 7 for
//! every position from 7 on), and such a source sets bit 7 only when every partition it holds
//! from position 7 on is shipped. Otherwise that part of its catch-up lives only in memory
//! (transactions over more than 7 partitions whose only up-to-date replicas all sit in DCs
//! behind elsewhere).

use crate::decision::PartitionVotes;
use crate::epochs::Epochs;
use crate::machine::{earliest, Action, AttemptId, TxnMachine};
use crate::message::{Accept, CatchUpTarget, Reply, Request};
use crate::plan::Plan;
use crate::recovery_options::RecoveryOptions;
use redt_dc_executor::{Decision, EntryRef, RedoEntry, ReplicaChange, ReplicaOrigin};
use redt_proto::{Cts, DcId, NodeId, PartitionId, Topology, TxnId};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What phase 2 of a commit does about replicas left behind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CatchUp {
    /// DCs whose own redo is aborted instead of committed: each left some written
    /// partition behind (abort vote, stale commit vote, or no vote).
    pub behind: BTreeSet<DcId>,
    /// Per source DC, the partitions whose values it ships and the replica nodes it ships
    /// them to. Every source was up to date for each partition it ships.
    pub sources: BTreeMap<DcId, Vec<(PartitionId, Vec<NodeId>)>>,
}

impl CatchUp {
    /// Whether nothing was left behind and nobody is owed a catch-up (no learner either).
    pub fn is_empty(&self) -> bool {
        self.behind.is_empty() && self.sources.is_empty()
    }
}

/// The catch-up of a committed transaction: `table` is [`crate::plan::vote_table`] of `plan`
/// over the votes the commit was decided on (one entry per planned partition, in order).
///
/// For each written partition, every replica that is not up to date puts its DC in
/// [`CatchUp::behind`]; then every replica of a written partition held by a DC in `behind`
/// is a target, and so is every learner of a written partition (a replica being rebuilt
/// takes no part in phase 1, so it is always behind: docs/design.md, "Rebuild"). The
/// partition's source is its first up-to-date replica's DC that is not behind (or, if every
/// up-to-date replica's DC is behind for another partition, the first up-to-date one: its
/// redo holds the right values for this partition even though the rest of it is aborted).
/// A written partition with no up-to-date replica (impossible for a commit, which needs
/// `Q ≥ 1` of them) gets no source.
///
/// The source is chosen outside the DCs for which `removed` holds whenever an up-to-date
/// replica outside them exists: a DC the current epoch no longer places (removed after the
/// transaction was planned) may be dead, and if it comes back it drops its old entries, so a
/// debt given to it would never be paid (docs/design.md, "Failover"). `removed` is asked only when
/// something is owed.
pub fn catch_up(plan: &Plan, table: &[PartitionVotes], removed: &dyn Fn(DcId) -> bool) -> CatchUp {
    let written: Vec<(usize, Vec<bool>)> = plan
        .partitions
        .iter()
        .zip(table)
        .enumerate()
        .filter(|(_, (p, _))| p.writes)
        .map(|(i, (_, votes))| (i, votes.up_to_date()))
        .collect();
    let mut out = CatchUp::default();
    for (i, up) in &written {
        for (&(_, dc), &ok) in plan.partitions[*i].replicas.iter().zip(up) {
            if !ok {
                out.behind.insert(dc);
            }
        }
    }
    for (i, up) in &written {
        let p = &plan.partitions[*i];
        let mut targets: Vec<NodeId> =
            p.replicas.iter().filter(|(_, dc)| out.behind.contains(dc)).map(|&(node, _)| node).collect();
        targets.extend(p.learners.iter().copied());
        if targets.is_empty() {
            continue;
        }
        let fresh = || p.replicas.iter().zip(up).filter(|(_, &ok)| ok).map(|(&(_, dc), _)| dc);
        let placed = || fresh().filter(|&dc| !removed(dc));
        let Some(source) = placed()
            .find(|dc| !out.behind.contains(dc))
            .or_else(|| placed().next())
            .or_else(|| fresh().find(|dc| !out.behind.contains(dc)))
            .or_else(|| fresh().next())
        else {
            continue;
        };
        out.sources.entry(source).or_default().push((p.id, targets));
    }
    out
}

/// The cell changes of a primary's redo entries, as sent to its secondaries (and of a
/// RedT DC's redo, as shipped to the replicas a commit left behind).
pub fn changes_of(redo: &[RedoEntry]) -> Vec<ReplicaChange> {
    redo.iter()
        .flat_map(|e| {
            e.changes.iter().map(|c| {
                // The version the writer saw, from the lock intent of the change's record.
                let seen = e.locks.iter().find(|l| l.record == c.record).and_then(|l| l.seen_version(c.cell));
                ReplicaChange {
                    table: c.table,
                    key: c.key,
                    cell: c.cell,
                    value: c.value.clone(),
                    seen: seen.unwrap_or(0),
                }
            })
        })
        .collect()
}

/// The requests a catch-up source sends for `txn` (docs/design.md §2, phase 2): per replica node of
/// `targets`, one [`Accept`] of the new values its partitions got in `redo`, carrying the
/// commit, so the replica writes it `Committed` into its own ring at once (replay then
/// applies it under the Thomas write rule). A node holding several listed partitions gets
/// them in one accept. It is retried until answered; a copy written twice (the first answer
/// lost, or the replica restarted in between) changes nothing, by the same rule.
///
/// `first`: the source's own shipment at the decision, whose targets in voting replicas of
/// `topology` (the transaction's epoch) sit in DCs the commit left behind; each such Accept is
/// marked [`Accept::behind`]. A re-shipment (`first` false) goes to up-to-date replicas too
/// and marks none.
pub fn shipments(
    topology: &Topology,
    txn: TxnId,
    redo: &[RedoEntry],
    targets: &[CatchUpTarget],
    first: bool,
) -> Vec<(NodeId, Request)> {
    let changes = changes_of(redo);
    let (coordinator, participants) =
        redo.first().map(|e| (e.coordinator, e.participants.clone())).unwrap_or((NodeId(0), Vec::new()));
    let mut per_node: BTreeMap<NodeId, (Cts, Vec<ReplicaChange>)> = BTreeMap::new();
    let mut behind: BTreeSet<NodeId> = BTreeSet::new();
    for t in targets {
        if first {
            let voters = topology.partitions.get(t.partition.0 as usize).map(|p| &p.replicas[..]).unwrap_or(&[]);
            behind.extend(t.nodes.iter().copied().filter(|n| voters.contains(n)));
        }
        let part = changes
            .iter()
            .filter(|c| topology.table(c.table).map(|tb| topology.partition_of(tb, c.key)) == Some(t.partition));
        for &n in &t.nodes {
            let (cts, out) = per_node.entry(n).or_insert((t.cts, Vec::new()));
            *cts = (*cts).max(t.cts);
            out.extend(part.clone().cloned());
        }
    }
    let mut out = Vec::new();
    for (node, (cts, changes)) in per_node {
        if changes.is_empty() {
            continue;
        }
        let origin = ReplicaOrigin { txn, epoch: topology.epoch, coordinator, participants: participants.clone() };
        let behind = behind.contains(&node);
        out.push((node, Request::Accept(Accept { origin, changes, decided: Some(Decision::Commit(cts)), behind })));
    }
    out
}

/// The partition of one change of a redo entry, by its table's schema (`None` for a table the
/// topology does not know).
fn partition_of(topology: &Topology, table: redt_proto::TableId, key: u64) -> Option<PartitionId> {
    topology.table(table).map(|tb| topology.partition_of(tb, key))
}

/// The mask bit of partition `p` in `entry` (see the module docs): its position in the
/// entry's `partitions` list, positions from 7 on sharing bit 7.
fn mask_bit(entry: &RedoEntry, p: PartitionId) -> Option<u8> {
    entry.partitions.iter().position(|&q| q == p).map(|i| i.min(7) as u8)
}

/// The catch-up mask a source gives its redo `entry` when it ships the partitions `shipped`
/// (docs/design.md §2): one bit per shipped partition the entry holds changes of. `committed`
/// says whether the source's own redo commits (it was up to date for every written
/// partition); if not, bit 7 is set only when every partition of the entry sharing it is
/// shipped, so a re-shipment never carries a partition the source was behind for. Zero: the
/// entry owes nothing.
pub fn owed_mask(topology: &Topology, entry: &RedoEntry, shipped: &BTreeSet<PartitionId>, committed: bool) -> u8 {
    let mut mask = 0u8;
    let mut unshipped_at_7 = false;
    for c in &entry.changes {
        let Some(p) = partition_of(topology, c.table, c.key) else { continue };
        let Some(bit) = mask_bit(entry, p) else { continue };
        if shipped.contains(&p) {
            mask |= 1 << bit;
        } else if bit == 7 {
            unshipped_at_7 = true;
        }
    }
    if unshipped_at_7 && !committed {
        mask &= !(1 << 7);
    }
    mask
}

/// The targets of shipping a source's redo `entry` again from its catch-up mask `owed`, after
/// its first shipper's memory was lost (docs/design.md §2): every partition of the entry's changes
/// that the mask names, to every replica (learners too) outside the source's DC `own_dc`, at the entry's
/// commit timestamp. Up-to-date replicas among them apply nothing (Thomas write rule).
pub fn reship_targets(topology: &Topology, own_dc: DcId, entry: &RedoEntry, owed: u8) -> Vec<CatchUpTarget> {
    let mut parts: BTreeSet<PartitionId> = BTreeSet::new();
    for c in &entry.changes {
        let Some(p) = partition_of(topology, c.table, c.key) else { continue };
        if mask_bit(entry, p).is_some_and(|bit| owed >> bit & 1 == 1) {
            parts.insert(p);
        }
    }
    parts
        .into_iter()
        .filter_map(|p| {
            let part = topology.partitions.get(p.0 as usize)?;
            let nodes: Vec<NodeId> = part
                .replicas
                .iter()
                .copied()
                .chain(part.learners.iter().map(|l| l.node))
                .filter(|n| topology.nodes.get(n.0 as usize).is_some_and(|x| x.dc != own_dc))
                .collect();
            (!nodes.is_empty()).then_some(CatchUpTarget { partition: p, nodes, cts: entry.cts })
        })
        .collect()
}

/// A catch-up a node owes: the accepts to deliver, and the redo entries whose catch-up mask to
/// clear once every accept is acknowledged (or the [`Shipper`] gives up).
#[derive(Clone, Debug, PartialEq)]
pub struct CatchUpDebt {
    /// The transaction.
    pub txn: TxnId,
    /// Per replica node, the accept that catches it up.
    pub ship: Vec<(NodeId, Request)>,
    /// The source's entries holding the debt (their masks are cleared when it is paid).
    pub owed: Vec<EntryRef>,
}

/// One accept being delivered until answered.
#[derive(Debug)]
struct Shipment {
    to: NodeId,
    /// `to`'s name in the topology, as logs name it.
    name: String,
    request: Request,
    failures: u32,
    retry_at: Option<Instant>,
    /// `None` while being delivered; then whether it was acknowledged (false: given up, or
    /// the node no longer holds a replica).
    acked: Option<bool>,
    /// Dropped because the current epoch places no replica on the node.
    unplaced: bool,
}

/// Delivers the accepts of one [`CatchUpDebt`] (docs/design.md §2, "a catch-up outlives its
/// source"), as a [`TxnMachine`]: each accept is sent at once and, until a reply other than an
/// error comes back, again after a pause that doubles from [`RecoveryOptions::retry_base`] to
/// [`RecoveryOptions::retry_max`]. It gives up on the undelivered ones once
/// [`RecoveryOptions::catch_up_give_up`] has passed since it started. Done when every accept
/// is answered or given up; its driver then clears the debt's masks.
///
/// With the node's placements ([`Shipper::start`]'s `placement`), an accept to a node the
/// current epoch places no replica on is dropped, at the start or at its next failure: a
/// removed DC is owed nothing (it rebuilds from a snapshot if it returns), and its debt must
/// not hold the ring's head for the whole give-up time (docs/design.md, "Failover").
#[derive(Debug)]
pub struct Shipper {
    txn: TxnId,
    shipments: Vec<Shipment>,
    attempts: BTreeMap<AttemptId, usize>,
    next_attempt: AttemptId,
    retry_base: Duration,
    retry_max: Duration,
    give_up_at: Instant,
    placement: Option<Arc<Epochs>>,
    actions: VecDeque<Action>,
}

impl Shipper {
    /// Starts delivering `ship` (the accepts of `txn`'s catch-up) at `now`; with `placement`,
    /// only to nodes its current epoch places a replica on (see the type's docs). Logs name
    /// the nodes as `topology` does.
    pub fn start(
        txn: TxnId,
        ship: Vec<(NodeId, Request)>,
        topology: &Topology,
        options: &RecoveryOptions,
        placement: Option<Arc<Epochs>>,
        now: Instant,
    ) -> Shipper {
        let mut s = Shipper {
            txn,
            shipments: ship
                .into_iter()
                .map(|(to, request)| Shipment {
                    to,
                    name: topology.node_name(to),
                    request,
                    failures: 0,
                    retry_at: None,
                    acked: None,
                    unplaced: false,
                })
                .collect(),
            attempts: BTreeMap::new(),
            next_attempt: 0,
            retry_base: options.retry_base,
            retry_max: options.retry_max.max(options.retry_base),
            give_up_at: now + options.catch_up_give_up,
            placement,
            actions: VecDeque::new(),
        };
        for i in 0..s.shipments.len() {
            if !s.drop_unplaced(i) {
                s.send(i);
            }
        }
        s
    }

    /// Drops shipment `i` if the current epoch places no replica on its node; returns whether
    /// it did.
    fn drop_unplaced(&mut self, i: usize) -> bool {
        let Some(epochs) = &self.placement else { return false };
        let s = &mut self.shipments[i];
        if epochs.holds_replica(s.to, None) {
            return false;
        }
        tracing::info!(txn = %self.txn, to = %s.name, "catch-up dropped: the node holds no replica in the current epoch");
        s.acked = Some(false);
        s.unplaced = true;
        s.retry_at = None;
        true
    }

    /// The replica nodes whose accept is not acknowledged (after the shipper gave up: the
    /// replicas it left behind).
    pub fn undelivered(&self) -> Vec<NodeId> {
        self.shipments.iter().filter(|s| s.acked != Some(true)).map(|s| s.to).collect()
    }

    /// Whether every accept was acknowledged, but for those dropped because their node holds
    /// no replica any more.
    pub fn delivered(&self) -> bool {
        self.shipments.iter().all(|s| s.acked == Some(true) || s.unplaced)
    }

    fn send(&mut self, i: usize) {
        let attempt = self.next_attempt;
        self.next_attempt += 1;
        self.attempts.insert(attempt, i);
        let s = &mut self.shipments[i];
        s.retry_at = None;
        self.actions.push_back(Action::Send { attempt, to: s.to, request: s.request.clone() });
    }
}

impl TxnMachine for Shipper {
    fn txn(&self) -> TxnId {
        self.txn
    }

    fn is_done(&self) -> bool {
        self.shipments.iter().all(|s| s.acked.is_some())
    }

    fn handle_reply(&mut self, attempt: AttemptId, reply: Reply, now: Instant) {
        match reply {
            Reply::Accepted(_) => {
                if let Some(i) = self.attempts.remove(&attempt) {
                    let s = &mut self.shipments[i];
                    s.acked.get_or_insert(true);
                    s.retry_at = None;
                }
            }
            Reply::Error { message, .. } => self.handle_failure(attempt, &message, now),
            _ => self.handle_failure(attempt, "unexpected reply kind", now),
        }
    }

    fn handle_failure(&mut self, attempt: AttemptId, error: &str, now: Instant) {
        let Some(i) = self.attempts.remove(&attempt) else { return };
        if self.shipments[i].acked.is_some() || self.drop_unplaced(i) {
            return;
        }
        let (base, max, give_up_at, txn) = (self.retry_base, self.retry_max, self.give_up_at, self.txn);
        let s = &mut self.shipments[i];
        if s.acked.is_some() {
            return;
        }
        if now >= give_up_at {
            tracing::error!(
                %txn,
                to = %s.name,
                "catch-up undelivered, giving up: the replica stays behind until a later write of each cell \
                 reaches it or failover rebuilds it: {error}"
            );
            s.acked = Some(false);
            s.retry_at = None;
            return;
        }
        tracing::debug!(%txn, to = %s.name, "catch-up retry: {error}");
        let pause = base.saturating_mul(1u32 << s.failures.min(16)).min(max);
        s.failures = s.failures.saturating_add(1);
        s.retry_at = Some(now + pause);
    }

    fn handle_timeout(&mut self, now: Instant) {
        for i in 0..self.shipments.len() {
            let s = &self.shipments[i];
            if s.acked.is_none() && s.retry_at.is_some_and(|t| now >= t) {
                self.send(i);
            }
        }
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        earliest(self.shipments.iter().filter(|s| s.acked.is_none()).map(|s| s.retry_at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::{ItemKey, ReplicaVote};
    use crate::plan::PlannedPartition;
    use redt_dc_executor::CellVersion;
    use redt_proto::Cts;

    fn dc(i: u16) -> DcId {
        DcId(i)
    }

    /// A plan over `partitions`, each given as (writes, replica DCs); replica node = 10·p + DC.
    fn plan(partitions: &[(bool, &[u16])]) -> Plan {
        let partitions = partitions
            .iter()
            .enumerate()
            .map(|(i, &(writes, dcs))| PlannedPartition {
                id: PartitionId(i as u32),
                accesses: vec![i],
                replicas: dcs.iter().map(|&d| (NodeId(10 * i as u16 + d), dc(d))).collect(),
                writes,
                learners: Vec::new(),
            })
            .collect::<Vec<_>>();
        let participants: BTreeSet<DcId> = partitions.iter().flat_map(|p| p.replicas.iter().map(|r| r.1)).collect();
        Plan { participants: participants.into_iter().collect(), local: BTreeMap::new(), partitions, read_only: false }
    }

    fn commit(cts: u64) -> ReplicaVote {
        ReplicaVote::Commit { versions: vec![(ItemKey::new(0, 0), CellVersion::new(0, Cts(cts)))], hlc: Cts(1) }
    }

    /// Every DC's vote for every partition, exhaustively over 4 replicas in 4 DCs and two
    /// partitions (one written, one read), each DC voting up to date, stale, abort or
    /// nothing: the behind set is exactly the DCs not up to date for the written partition,
    /// every replica in a behind DC of the written partition is a target, and the source is
    /// up to date and not behind whenever such a DC exists.
    #[test]
    fn exhaustive_over_four_replicas() {
        let dcs: [u16; 4] = [0, 1, 2, 3];
        let p = plan(&[(true, &dcs), (false, &dcs)]);
        let kinds = [commit(5), commit(3), ReplicaVote::Abort, ReplicaVote::Missing];
        for code in 0..4usize.pow(4) {
            let votes: Vec<ReplicaVote> = (0..4).map(|d| kinds[code / 4usize.pow(d) % 4].clone()).collect();
            let table = vec![PartitionVotes::new(votes.clone()), PartitionVotes::new(votes.clone())];
            let up = table[0].up_to_date();
            let cu = catch_up(&p, &table, &|_| false);
            let expect_behind: BTreeSet<DcId> = (0..4).filter(|&d| !up[d as usize]).map(dc).collect();
            assert_eq!(cu.behind, expect_behind, "votes {votes:?}");
            if expect_behind.is_empty() {
                assert!(cu.sources.is_empty());
                continue;
            }
            let shipped: Vec<&(PartitionId, Vec<NodeId>)> = cu.sources.values().flatten().collect();
            if up.iter().any(|&u| u) {
                assert_eq!(shipped.len(), 1, "one source for the written partition only: {cu:?}");
                let (source, list) = cu.sources.iter().next().expect("a source");
                assert!(up[source.0 as usize] && !cu.behind.contains(source), "{votes:?} {cu:?}");
                assert_eq!(list[0].0, PartitionId(0), "the read partition ships nothing");
                let targets: Vec<NodeId> = expect_behind.iter().map(|d| NodeId(d.0)).collect();
                assert_eq!(list[0].1, targets, "{votes:?}");
            } else {
                assert!(shipped.is_empty(), "nothing up to date, nothing to ship: {cu:?}");
            }
        }
    }

    fn topology() -> Topology {
        let path = format!("{}/../configs/local-fast.yaml", env!("CARGO_MANIFEST_DIR"));
        Topology::load(std::path::Path::new(&path)).expect("config loads")
    }

    fn options() -> RecoveryOptions {
        let t = topology();
        let mut o = RecoveryOptions::for_topology(&t, Duration::from_millis(250));
        o.retry_base = Duration::from_millis(100);
        o.retry_max = Duration::from_millis(400);
        o.catch_up_give_up = Duration::from_secs(2);
        o
    }

    fn accept(to: u16) -> (NodeId, Request) {
        let origin =
            ReplicaOrigin { txn: TxnId(9), epoch: redt_proto::Epoch(1), coordinator: NodeId(0), participants: vec![] };
        (
            NodeId(to),
            Request::Accept(Accept { origin, changes: vec![], decided: Some(Decision::Commit(Cts(5))), behind: false }),
        )
    }

    fn sends(s: &mut Shipper) -> Vec<(AttemptId, NodeId)> {
        std::iter::from_fn(|| s.poll_action())
            .filter_map(|a| match a {
                Action::Send { attempt, to, .. } => Some((attempt, to)),
                _ => None,
            })
            .collect()
    }

    /// docs/design.md §2, "a catch-up outlives its source": a shipper sends every accept at once,
    /// retries each failed one after a pause doubling from `retry_base` up to `retry_max`, is
    /// done once each is acknowledged, and says so.
    #[test]
    fn a_shipper_retries_with_back_off_until_acknowledged() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut s = Shipper::start(TxnId(9), vec![accept(1), accept(2)], &topology(), &options(), None, t0);
        let first = sends(&mut s);
        assert_eq!(first.iter().map(|x| x.1).collect::<Vec<_>>(), [NodeId(1), NodeId(2)]);
        s.handle_reply(first[0].0, Reply::Accepted(true), ms(10));
        assert!(!s.is_done());
        let mut at = 10;
        let mut attempt = first[1].0;
        for pause in [100, 200, 400, 400] {
            s.handle_reply(attempt, Reply::Error { code: 3, message: "ring full".into() }, ms(at));
            assert_eq!(s.poll_timeout(), Some(ms(at + pause)), "backs off");
            s.handle_timeout(ms(at + pause - 1));
            assert!(sends(&mut s).is_empty(), "not before its time");
            at += pause;
            s.handle_timeout(ms(at));
            let again = sends(&mut s);
            assert_eq!(again.len(), 1);
            assert_eq!(again[0].1, NodeId(2));
            attempt = again[0].0;
        }
        s.handle_reply(attempt, Reply::Accepted(true), ms(at + 1));
        assert!(s.is_done() && s.delivered() && s.undelivered().is_empty());
        assert_eq!(s.poll_timeout(), None);
    }

    /// Bounded (docs/design.md §2): a replica that never acknowledges is given up after
    /// `catch_up_give_up`; the shipper is then done (its driver clears the masks) but not
    /// delivered, and names the replica it left behind.
    #[test]
    fn a_shipper_gives_up_after_its_bound() {
        let t0 = Instant::now();
        let mut s = Shipper::start(TxnId(9), vec![accept(3)], &topology(), &options(), None, t0);
        let mut attempt = sends(&mut s)[0].0;
        let mut now = t0;
        while !s.is_done() {
            now += Duration::from_millis(300);
            s.handle_failure(attempt, "unreachable", now);
            if s.is_done() {
                break;
            }
            s.handle_timeout(s.poll_timeout().expect("a retry is due"));
            attempt = sends(&mut s)[0].0;
        }
        assert!(now >= t0 + Duration::from_secs(2) && now < t0 + Duration::from_secs(3), "gave up at its bound");
        assert!(!s.delivered());
        assert_eq!(s.undelivered(), [NodeId(3)]);
    }

    /// Names, not internal ids, in every log line: giving up on a replica names
    /// it as the topology file does (`dc4-n1`, not `node#3`).
    #[test]
    fn a_shipper_names_the_replica_it_gives_up_on() {
        let t0 = Instant::now();
        let (_, logged) = crate::test_log::capture(|| {
            let mut s = Shipper::start(TxnId(9), vec![accept(3)], &topology(), &options(), None, t0);
            let attempt = sends(&mut s)[0].0;
            s.handle_failure(attempt, "unreachable", t0 + Duration::from_secs(3));
            assert!(s.is_done() && !s.delivered());
        });
        let line = logged.lines().find(|l| l.contains("catch-up undelivered, giving up")).expect("logged");
        assert!(line.contains("to=dc4-n1"), "{line}");
        assert!(!logged.contains("node#"), "{logged}");
    }

    /// The catch-up mask (docs/design.md §2): one bit per shipped partition by its position in the
    /// entry's partition list, positions from 7 on sharing bit 7, which a source behind for
    /// another partition sets only when every partition sharing it is shipped; re-shipping
    /// names exactly the marked partitions, to every replica outside the source's DC.
    #[test]
    fn the_mask_names_the_shipped_partitions() {
        let path = format!("{}/../configs/local-fast.yaml", env!("CARGO_MANIFEST_DIR"));
        let t = Topology::load(std::path::Path::new(&path)).expect("config loads");
        let kv = t.table_by_name("kv").expect("kv").id;
        let key_in = |p: u32| (0..1000u64).find(|&k| t.partition_of(t.table(kv).expect("kv"), k) == PartitionId(p));
        let change = |p: u32| redt_dc_executor::Change {
            record: redt_proto::Offset(0),
            table: kv,
            key: key_in(p).expect("a key in the partition"),
            cell: 0,
            value: vec![1; 8],
        };
        let mut e = RedoEntry::filler();
        e.status = redt_dc_executor::EntryStatus::Committed;
        e.cts = Cts(77);
        e.partitions = vec![PartitionId(0), PartitionId(2), PartitionId(3)];
        e.changes = vec![change(0), change(2)];
        let shipped = BTreeSet::from([PartitionId(2)]);
        assert_eq!(owed_mask(&t, &e, &shipped, true), 0b10);
        assert_eq!(owed_mask(&t, &e, &BTreeSet::from([PartitionId(3)]), true), 0, "no change of p3 here");
        assert_eq!(owed_mask(&t, &e, &BTreeSet::from([PartitionId(0), PartitionId(2)]), false), 0b11);
        let targets = reship_targets(&t, DcId(0), &e, 0b10);
        // p2 lives on dc3, dc4, dc1 (nodes 2, 3, 0): all but the source's DC.
        assert_eq!(
            targets,
            vec![CatchUpTarget { partition: PartitionId(2), nodes: vec![NodeId(2), NodeId(3)], cts: Cts(77) }]
        );
        // Positions from 7 on share bit 7: a behind source sets it only if all are shipped.
        // (Only positions matter to the mask: here p0 and p2 sit at positions 7 and 8.)
        e.partitions = [10, 11, 12, 13, 14, 15, 16, 0, 2].map(PartitionId).to_vec();
        let both = BTreeSet::from([PartitionId(0), PartitionId(2)]);
        assert_eq!(owed_mask(&t, &e, &both, false), 0x80);
        assert_eq!(owed_mask(&t, &e, &shipped, false), 0, "p0 shares bit 7 unshipped: not durable");
        assert_eq!(owed_mask(&t, &e, &shipped, true), 0x80, "a committed source's values are all right");
    }

    /// A DC behind for one written partition has its whole redo aborted, so its up-to-date
    /// replica of another written partition is caught up too; sources avoid behind DCs, but
    /// a partition whose only fresh replicas sit in behind DCs is still shipped, from one of
    /// them.
    #[test]
    fn a_dc_behind_anywhere_is_caught_up_everywhere() {
        // p0 on DCs 0..4, p1 on DCs 0..4; DC 3 stale on p0, up to date on p1.
        let p = plan(&[(true, &[0, 1, 2, 3]), (true, &[0, 1, 2, 3])]);
        let p0 = PartitionVotes::new(vec![commit(5), commit(5), commit(5), commit(3)]);
        let p1 = PartitionVotes::new(vec![commit(7), commit(7), commit(7), commit(7)]);
        let cu = catch_up(&p, &[p0, p1], &|_| false);
        assert_eq!(cu.behind, BTreeSet::from([dc(3)]));
        assert_eq!(
            cu.sources,
            BTreeMap::from([(dc(0), vec![(PartitionId(0), vec![NodeId(3)]), (PartitionId(1), vec![NodeId(13)])])])
        );

        // p0 fresh only on DCs 0, 1, 2 where DC 0 is behind on p1, and p1 fresh on 1, 2, 3.
        let p0 = PartitionVotes::new(vec![commit(5), commit(5), commit(5), ReplicaVote::Abort]);
        let p1 = PartitionVotes::new(vec![commit(3), commit(7), commit(7), ReplicaVote::Abort]);
        let cu = catch_up(&p, &[p0, p1], &|_| false);
        assert_eq!(cu.behind, BTreeSet::from([dc(0), dc(3)]));
        assert_eq!(
            cu.sources,
            BTreeMap::from([(
                dc(1),
                vec![(PartitionId(0), vec![NodeId(0), NodeId(3)]), (PartitionId(1), vec![NodeId(10), NodeId(13)])]
            )])
        );

        // p0 fresh only on DC 0, which is stale on p1; p1 fresh on DCs 1..4, stale on p0.
        let p0 = PartitionVotes::new(vec![commit(5), commit(3), commit(3), ReplicaVote::Abort]);
        let p1 = PartitionVotes::new(vec![commit(3), commit(7), commit(7), commit(7)]);
        let cu = catch_up(&p, &[p0, p1], &|_| false);
        assert_eq!(cu.behind, BTreeSet::from([dc(0), dc(1), dc(2), dc(3)]));
        assert_eq!(
            cu.sources,
            BTreeMap::from([
                (dc(0), vec![(PartitionId(0), vec![NodeId(0), NodeId(1), NodeId(2), NodeId(3)])]),
                (dc(1), vec![(PartitionId(1), vec![NodeId(10), NodeId(11), NodeId(12), NodeId(13)])]),
            ])
        );
    }
}
