//! Membership and placement as a deterministic state machine: the state that Raft replicates
//! across DCs (docs/design.md, "Failover").
//!
//! It holds the placement epoch, whether each DC and node is up or removed, and for every
//! partition its ordered voting replicas (the first is the primary) and its learners.
//! [`Membership::apply`] takes one [`Command`] (a Raft log entry once committed) and either
//! changes the state and returns the [`Change`], or refuses it with a [`Refused`] reason and
//! leaves the state untouched. It reads no clock and no random numbers, so every replica of
//! the log that applies the same commands in the same order holds the same state.
//!
//! Invariants kept by every command (tests/membership_props.rs checks them over random
//! command sequences):
//! - every partition has at least one voter;
//! - no two replicas (voters or learners) of a partition sit in one DC;
//! - every replica is on an up node of an up DC (a removed DC or node holds none);
//! - the epoch increases by exactly one on each placement change and never otherwise.
//!
//! A restored DC or node gets no replica back: what it held may have missed commits, so it
//! only returns through a rebuild (a learner filled by snapshot, then [`Command::Promote`]).
//! [`Membership::plan_rebuild`] proposes those learners.

use redt_proto::{DcId, Epoch, NodeId, PartitionId, Topology};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::refused::Refused;

/// Whether a DC or a node takes part in the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Status {
    /// Part of the cluster; may hold replicas (a node only if its DC is up too).
    Up,
    /// Removed after its failure was confirmed; holds no replica.
    Removed,
}

pub use redt_proto::Learner;

/// The replicas of one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replicas {
    voters: Vec<NodeId>,
    learners: Vec<Learner>,
}

impl Replicas {
    /// Returns the voting replicas in order; the first is the primary. Never empty.
    pub fn voters(&self) -> &[NodeId] {
        &self.voters
    }

    /// Returns the learners in the order they were added.
    pub fn learners(&self) -> &[Learner] {
        &self.learners
    }

    /// Returns the primary (the first voter).
    pub fn primary(&self) -> Option<NodeId> {
        self.voters.first().copied()
    }

    /// Returns `n`, the number of voting replicas.
    pub fn n(&self) -> usize {
        self.voters.len()
    }

    /// Returns the commit quorum `Q(n) = ceil(3n/4)` of the voters (RedT §4.2; the
    /// coordinator's [`redt_proto::quorum`]).
    pub fn quorum(&self) -> usize {
        redt_proto::quorum(self.n())
    }

    /// Returns the majority `floor(n/2) + 1` of the voters, at which aborts and recovery
    /// decisions are recorded ([`redt_proto::majority`]).
    pub fn majority(&self) -> usize {
        redt_proto::majority(self.n())
    }

    /// Returns whether `node` holds a replica (voter or learner).
    pub fn holds(&self, node: NodeId) -> bool {
        self.voters.contains(&node) || self.learners.iter().any(|l| l.node == node)
    }

    /// Returns every replica node, voters first.
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.voters.iter().copied().chain(self.learners.iter().map(|l| l.node))
    }
}

/// A membership change, as proposed to Raft and applied by [`Membership::apply`].
/// Serializable: it is the payload of a Raft log entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Command {
    /// The DC's failure is confirmed: mark it removed and drop its replicas (voters and
    /// learners) from every partition, in a new epoch if it held any. Each partition's `n`
    /// shrinks and its quorum follows the new `n`.
    RemoveDc(DcId),
    /// The DC is back: mark it up. It gets no replica back (it is not trusted) until a rebuild
    /// adds learners there.
    RestoreDc(DcId),
    /// One node's failure is confirmed inside its DC: mark it removed and drop its replicas,
    /// in a new epoch if it held any.
    RemoveNode(NodeId),
    /// The node is back: mark it up, with no replica.
    RestoreNode(NodeId),
    /// Start a rebuild: add `node` as a learner of `partition`, in a new epoch.
    AddLearner {
        /// The partition to rebuild.
        partition: PartitionId,
        /// The node to hold the new replica.
        node: NodeId,
    },
    /// Finish a rebuild: the learner on `node`, added in `added_in` and now filled by its
    /// snapshot, becomes the last voter of `partition`, in a new epoch.
    Promote {
        /// The partition.
        partition: PartitionId,
        /// The learner's node.
        node: NodeId,
        /// The epoch that added the learner ([`Learner::added_in`]).
        added_in: Epoch,
    },
}

/// What an applied [`Command`] changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The epoch after the command: one above the previous epoch if a placement changed, the
    /// previous epoch otherwise.
    pub epoch: Epoch,
    /// The partitions whose replicas changed, in id order, with their new shape.
    pub partitions: Vec<PartitionChange>,
}

impl Change {
    /// Returns whether a placement changed (and so the epoch moved).
    pub fn placement_changed(&self) -> bool {
        !self.partitions.is_empty()
    }
}

/// The new shape of one partition after a [`Change`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionChange {
    /// The partition.
    pub partition: PartitionId,
    /// Its number of voters `n`.
    pub n: usize,
    /// Its commit quorum `Q(n)`, recomputed from the new `n`.
    pub quorum: usize,
    /// Its number of learners.
    pub learners: usize,
}

impl Command {
    /// The command as logs give it, naming nodes and DCs as `topology` does
    /// (`RemoveDc(dc2)`, not `RemoveDc(DcId(1))`).
    pub fn named(&self, topology: &Topology) -> String {
        match self {
            Command::RemoveDc(d) => format!("RemoveDc({})", topology.dc_name(*d)),
            Command::RestoreDc(d) => format!("RestoreDc({})", topology.dc_name(*d)),
            Command::RemoveNode(n) => format!("RemoveNode({})", topology.node_name(*n)),
            Command::RestoreNode(n) => format!("RestoreNode({})", topology.node_name(*n)),
            Command::AddLearner { partition, node } => {
                format!("AddLearner {{ partition: {partition}, node: {} }}", topology.node_name(*node))
            }
            Command::Promote { partition, node, added_in } => format!(
                "Promote {{ partition: {partition}, node: {}, added_in: {added_in} }}",
                topology.node_name(*node)
            ),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct NodeEntry {
    dc: DcId,
    status: Status,
}

/// A partition short of the replication factor, from [`Membership::plan_rebuild`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shortfall {
    /// The partition.
    pub partition: PartitionId,
    /// Replicas it has (voters and learners).
    pub replicas: usize,
    /// Replicas it lacks to reach the replication factor.
    pub missing: usize,
    /// [`Command::AddLearner`]s to propose, one per missing replica, each in a distinct up DC
    /// holding no replica of the partition. Fewer than `missing` when not enough such DCs (with
    /// an up node) exist.
    pub proposals: Vec<Command>,
}

/// The replicated membership and placement state (module docs give the invariants).
///
/// It is not deserializable: a Raft snapshot of it (not needed while the log is never
/// compacted) will have to go through [`Membership::new`]'s checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Membership {
    epoch: Epoch,
    replication_factor: usize,
    dcs: BTreeMap<DcId, Status>,
    nodes: BTreeMap<NodeId, NodeEntry>,
    partitions: BTreeMap<PartitionId, Replicas>,
    /// Mutant: removals below [`Membership::fewest_voters`] go through.
    too_few_voters_allowed: bool,
}

impl Membership {
    /// Builds the membership at `epoch` with every DC and node up: `nodes` lists each node with
    /// its DC, `partitions` each partition's voting replicas in order (the first is the
    /// primary), and `replication_factor` is the number of replicas per partition that
    /// [`Membership::plan_rebuild`] restores.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidMembership`] if a node is listed twice, a partition is listed twice or
    /// has no replica, a replica is on an unknown node or repeats a DC, or the replication
    /// factor is zero.
    pub fn new(
        epoch: Epoch,
        nodes: impl IntoIterator<Item = (NodeId, DcId)>,
        partitions: impl IntoIterator<Item = (PartitionId, Vec<NodeId>)>,
        replication_factor: usize,
    ) -> Result<Self> {
        let invalid = |m: String| Err(Error::InvalidMembership(m));
        if replication_factor == 0 {
            return invalid("the replication factor is zero".into());
        }
        let mut m = Membership {
            epoch,
            replication_factor,
            too_few_voters_allowed: false,
            dcs: BTreeMap::new(),
            nodes: BTreeMap::new(),
            partitions: BTreeMap::new(),
        };
        for (node, dc) in nodes {
            if m.nodes.insert(node, NodeEntry { dc, status: Status::Up }).is_some() {
                return invalid(format!("{node} is listed twice"));
            }
            m.dcs.insert(dc, Status::Up);
        }
        for (partition, voters) in partitions {
            if voters.is_empty() {
                return invalid(format!("partition {partition} has no replica"));
            }
            let mut dcs = Vec::with_capacity(voters.len());
            for &node in &voters {
                let Some(entry) = m.nodes.get(&node) else {
                    return invalid(format!("partition {partition}: {node} is not a member"));
                };
                if dcs.contains(&entry.dc) {
                    return invalid(format!("partition {partition}: two replicas in {}", entry.dc));
                }
                dcs.push(entry.dc);
            }
            if m.partitions.insert(partition, Replicas { voters, learners: Vec::new() }).is_some() {
                return invalid(format!("partition {partition} is listed twice"));
            }
        }
        Ok(m)
    }

    /// Builds the membership of a topology file: its epoch, DCs, nodes and partition replicas,
    /// with `replication_factor` replicas per partition to restore after a failure (usually the
    /// topology's `n`).
    ///
    /// # Errors
    ///
    /// As [`Membership::new`] (a validated topology only fails on a zero factor).
    pub fn from_topology(topology: &Topology, replication_factor: usize) -> Result<Self> {
        Self::new(
            topology.epoch,
            topology.nodes.iter().map(|n| (n.id, n.dc)),
            topology.partitions.iter().map(|p| (p.id, p.replicas.clone())),
            replication_factor,
        )
    }

    // ---- getters --------------------------------------------------------------------------

    /// Returns the current placement epoch.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// Returns the number of replicas per partition that a rebuild restores.
    pub fn replication_factor(&self) -> usize {
        self.replication_factor
    }

    /// The fewest voters a removal may leave a partition with: the replication factor `n`
    /// less the replicas the recovery rule tolerates losing for good while transactions of
    /// the older epochs are in flight, `min(Q − M, n − M)` with `Q = ceil(3n/4)` and
    /// `M = floor(n/2) + 1` (docs/design.md, "Recovery": the NB variant), and at least one. n = 3
    /// keeps 2, n = 5 keeps 4, n = 7 keeps 5; n = 4 (which tolerates none) keeps 3. Beyond
    /// that, a transaction of the first epoch whose votes sat in the removed replicas can be
    /// neither committed nor aborted safely by the survivors, and stays undecided for good.
    pub fn fewest_voters(&self) -> usize {
        let n = self.replication_factor;
        let (q, m) = (redt_proto::quorum(n), redt_proto::majority(n));
        n.saturating_sub((q.saturating_sub(m)).min(n.saturating_sub(m)).max(1))
    }

    /// Returns the status of `dc`, or `None` if it is not a member.
    pub fn dc_status(&self, dc: DcId) -> Option<Status> {
        self.dcs.get(&dc).copied()
    }

    /// Returns the status of `node` itself (its DC may be removed while it is up), or `None`
    /// if it is not a member.
    pub fn node_status(&self, node: NodeId) -> Option<Status> {
        self.nodes.get(&node).map(|e| e.status)
    }

    /// Returns the DC of `node`, or `None` if it is not a member.
    pub fn dc_of(&self, node: NodeId) -> Option<DcId> {
        self.nodes.get(&node).map(|e| e.dc)
    }

    /// Returns whether `node` can hold replicas: it and its DC are up.
    pub fn is_node_up(&self, node: NodeId) -> bool {
        self.nodes.get(&node).is_some_and(|e| e.status == Status::Up && self.dcs.get(&e.dc) == Some(&Status::Up))
    }

    /// Returns the member DCs and their status, in id order.
    pub fn dcs(&self) -> impl Iterator<Item = (DcId, Status)> + '_ {
        self.dcs.iter().map(|(&d, &s)| (d, s))
    }

    /// Returns the member nodes with their DC and own status, in id order.
    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, DcId, Status)> + '_ {
        self.nodes.iter().map(|(&n, e)| (n, e.dc, e.status))
    }

    /// Returns the replicas of `partition`, or `None` if it is not placed.
    pub fn replicas(&self, partition: PartitionId) -> Option<&Replicas> {
        self.partitions.get(&partition)
    }

    /// Returns every partition with its replicas, in id order.
    pub fn partitions(&self) -> impl Iterator<Item = (PartitionId, &Replicas)> + '_ {
        self.partitions.iter().map(|(&p, r)| (p, r))
    }

    /// Lets removals leave a partition below [`Membership::fewest_voters`] (the rule
    /// before `Refused::TooFewVoters`): a deliberate bug that the simulation must catch (sim
    /// seed 9000, bank, default, `all,remove,remove-node`: transactions of the first epoch
    /// lose two of their three replicas and stay undecided). Off unless a test turns it on.
    pub fn set_too_few_voters_allowed(&mut self, on: bool) {
        self.too_few_voters_allowed = on;
    }

    // ---- commands -------------------------------------------------------------------------

    /// Whether [`Membership::apply`] would take `command` now, changing nothing: what a
    /// leader asks before it proposes a removal, so that one it would refuse (say a second
    /// replica of a partition lost before the first is rebuilt) is not written to the log on
    /// every confirmation round.
    ///
    /// # Errors
    /// The [`Refused`] reason `apply` would give.
    pub fn check(&self, command: &Command) -> std::result::Result<(), Refused> {
        self.clone().apply(command).map(|_| ())
    }

    /// Applies `command`: changes the state and returns what changed, or refuses it and
    /// leaves the state as it was (module docs give the invariants every change keeps).
    ///
    /// # Errors
    ///
    /// The [`Refused`] reason: an unknown DC, node or partition; removing what is removed or
    /// restoring what is up; removing the last DC up or the last voter of a partition, or
    /// leaving a partition with fewer voters than [`Membership::fewest_voters`]; a
    /// learner on a removed node or DC, or in a DC that already holds a replica of the
    /// partition; promoting a node that is not that learner; an exhausted epoch counter.
    pub fn apply(&mut self, command: &Command) -> std::result::Result<Change, Refused> {
        match *command {
            Command::RemoveDc(dc) => self.remove_dc(dc),
            Command::RestoreDc(dc) => self.restore_dc(dc),
            Command::RemoveNode(node) => self.remove_node(node),
            Command::RestoreNode(node) => self.restore_node(node),
            Command::AddLearner { partition, node } => self.add_learner(partition, node),
            Command::Promote { partition, node, added_in } => self.promote(partition, node, added_in),
        }
    }

    fn remove_dc(&mut self, dc: DcId) -> std::result::Result<Change, Refused> {
        match self.dcs.get(&dc) {
            None => return Err(Refused::UnknownDc(dc)),
            Some(Status::Removed) => return Err(Refused::DcAlreadyRemoved(dc)),
            Some(Status::Up) => {}
        }
        if !self.dcs.iter().any(|(&d, &s)| d != dc && s == Status::Up) {
            return Err(Refused::LastDc(dc));
        }
        let change = self.drop_replicas(|m, node| m.dc_of(node) == Some(dc))?;
        self.dcs.insert(dc, Status::Removed);
        Ok(change)
    }

    fn restore_dc(&mut self, dc: DcId) -> std::result::Result<Change, Refused> {
        match self.dcs.get(&dc) {
            None => Err(Refused::UnknownDc(dc)),
            Some(Status::Up) => Err(Refused::DcNotRemoved(dc)),
            Some(Status::Removed) => {
                self.dcs.insert(dc, Status::Up);
                Ok(Change { epoch: self.epoch, partitions: Vec::new() })
            }
        }
    }

    fn remove_node(&mut self, node: NodeId) -> std::result::Result<Change, Refused> {
        match self.node_status(node) {
            None => return Err(Refused::UnknownNode(node)),
            Some(Status::Removed) => return Err(Refused::NodeAlreadyRemoved(node)),
            Some(Status::Up) => {}
        }
        let change = self.drop_replicas(|_, n| n == node)?;
        if let Some(e) = self.nodes.get_mut(&node) {
            e.status = Status::Removed;
        }
        Ok(change)
    }

    fn restore_node(&mut self, node: NodeId) -> std::result::Result<Change, Refused> {
        match self.nodes.get_mut(&node) {
            None => Err(Refused::UnknownNode(node)),
            Some(NodeEntry { status: Status::Up, .. }) => Err(Refused::NodeNotRemoved(node)),
            Some(e) => {
                e.status = Status::Up;
                Ok(Change { epoch: self.epoch, partitions: Vec::new() })
            }
        }
    }

    /// Drops every replica on a node matching `gone` from every partition, in a new epoch if
    /// any was dropped; refuses (changing nothing) if a partition would keep no voter.
    fn drop_replicas(&mut self, gone: impl Fn(&Membership, NodeId) -> bool) -> std::result::Result<Change, Refused> {
        let mut touched = Vec::new();
        for (&partition, replicas) in &self.partitions {
            if !replicas.nodes().any(|n| gone(self, n)) {
                continue;
            }
            if replicas.voters.iter().all(|&n| gone(self, n)) {
                let voter = replicas.primary().expect("every partition has a voter (membership invariant)");
                return Err(Refused::LastVoter { partition, voter });
            }
            let left = replicas.voters.iter().filter(|&&n| !gone(self, n)).count();
            let needed = self.fewest_voters();
            if left < needed && left < replicas.voters.len() && !self.too_few_voters_allowed {
                return Err(Refused::TooFewVoters { partition, left, needed });
            }
            touched.push(partition);
        }
        if touched.is_empty() {
            return Ok(Change { epoch: self.epoch, partitions: Vec::new() });
        }
        let epoch = self.next_epoch()?;
        let doomed: Vec<NodeId> = self.nodes.keys().copied().filter(|&n| gone(self, n)).collect();
        for p in &touched {
            if let Some(r) = self.partitions.get_mut(p) {
                r.voters.retain(|n| !doomed.contains(n));
                r.learners.retain(|l| !doomed.contains(&l.node));
            }
        }
        self.epoch = epoch;
        Ok(self.change(touched))
    }

    fn add_learner(&mut self, partition: PartitionId, node: NodeId) -> std::result::Result<Change, Refused> {
        let Some(replicas) = self.partitions.get(&partition) else {
            return Err(Refused::UnknownPartition(partition));
        };
        let Some(entry) = self.nodes.get(&node) else {
            return Err(Refused::UnknownNode(node));
        };
        if entry.status == Status::Removed {
            return Err(Refused::NodeRemoved(node));
        }
        let dc = entry.dc;
        if self.dcs.get(&dc) != Some(&Status::Up) {
            return Err(Refused::DcRemoved(dc));
        }
        if let Some(holder) = replicas.nodes().find(|&n| self.dc_of(n) == Some(dc)) {
            return Err(Refused::DcHoldsReplica { partition, dc, holder });
        }
        let epoch = self.next_epoch()?;
        if let Some(r) = self.partitions.get_mut(&partition) {
            r.learners.push(Learner { node, added_in: epoch });
        }
        self.epoch = epoch;
        Ok(self.change(vec![partition]))
    }

    fn promote(
        &mut self,
        partition: PartitionId,
        node: NodeId,
        added_in: Epoch,
    ) -> std::result::Result<Change, Refused> {
        let Some(replicas) = self.partitions.get(&partition) else {
            return Err(Refused::UnknownPartition(partition));
        };
        let Some(at) = replicas.learners.iter().position(|l| l.node == node) else {
            return Err(Refused::NotALearner { partition, node });
        };
        let current = replicas.learners[at].added_in;
        if current != added_in {
            return Err(Refused::LearnerChanged { partition, node, named: added_in, current });
        }
        let epoch = self.next_epoch()?;
        if let Some(r) = self.partitions.get_mut(&partition) {
            r.learners.remove(at);
            r.voters.push(node);
        }
        self.epoch = epoch;
        Ok(self.change(vec![partition]))
    }

    fn next_epoch(&self) -> std::result::Result<Epoch, Refused> {
        self.epoch.0.checked_add(1).map(Epoch).ok_or(Refused::EpochExhausted(self.epoch))
    }

    fn change(&self, touched: Vec<PartitionId>) -> Change {
        let partitions = touched
            .into_iter()
            .filter_map(|partition| {
                self.partitions.get(&partition).map(|r| PartitionChange {
                    partition,
                    n: r.n(),
                    quorum: r.quorum(),
                    learners: r.learners.len(),
                })
            })
            .collect();
        Change { epoch: self.epoch, partitions }
    }

    // ---- rebuild --------------------------------------------------------------------------

    /// Returns every partition with fewer replicas (voters and learners) than the replication
    /// factor, in id order, each with the learners to add: one per missing replica, in up DCs
    /// holding no replica of it, on up nodes. DCs and nodes holding the fewest replicas
    /// (counting the proposals made so far) come first, ties to the lowest id, so the plan is
    /// deterministic and spreads the rebuilt replicas.
    ///
    /// The proposals are valid in order against the current state; each one's epoch comes
    /// from the command that applies it. Promotion is not planned here: it waits for the
    /// learner's snapshot, which this state machine does not see.
    pub fn plan_rebuild(&self) -> Vec<Shortfall> {
        let mut load: BTreeMap<NodeId, usize> = self.nodes.keys().map(|&n| (n, 0)).collect();
        for r in self.partitions.values() {
            for n in r.nodes() {
                *load.entry(n).or_default() += 1;
            }
        }
        let mut plan = Vec::new();
        for (&partition, replicas) in &self.partitions {
            let have = replicas.voters.len() + replicas.learners.len();
            if have >= self.replication_factor {
                continue;
            }
            let missing = self.replication_factor - have;
            let mut taken: Vec<DcId> = replicas.nodes().filter_map(|n| self.dc_of(n)).collect();
            let mut proposals = Vec::new();
            while proposals.len() < missing {
                let Some(node) = self.least_loaded_candidate(&taken, &load) else { break };
                taken.extend(self.dc_of(node));
                *load.entry(node).or_default() += 1;
                proposals.push(Command::AddLearner { partition, node });
            }
            plan.push(Shortfall { partition, replicas: have, missing, proposals });
        }
        plan
    }

    /// Returns the up node, outside the DCs in `taken`, of the up DC with the fewest replicas
    /// and within it the node with the fewest, ties to the lowest ids.
    fn least_loaded_candidate(&self, taken: &[DcId], load: &BTreeMap<NodeId, usize>) -> Option<NodeId> {
        let mut per_dc: BTreeMap<DcId, (usize, Option<(usize, NodeId)>)> = BTreeMap::new();
        for (&node, entry) in &self.nodes {
            if taken.contains(&entry.dc) || self.dcs.get(&entry.dc) != Some(&Status::Up) {
                continue;
            }
            let l = load.get(&node).copied().unwrap_or(0);
            let slot = per_dc.entry(entry.dc).or_insert((0, None));
            slot.0 += l;
            if entry.status == Status::Up && slot.1.is_none_or(|best| (l, node) < best) {
                slot.1 = Some((l, node));
            }
        }
        per_dc
            .into_iter()
            .filter_map(|(dc, (dc_load, best))| best.map(|(_, node)| (dc_load, dc, node)))
            .min()
            .map(|(_, _, node)| node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's default layout: 4 DCs × 2 nodes (node 2d and 2d+1 in DC d), n = 3.
    fn paper() -> Membership {
        let nodes = (0..8).map(|n| (NodeId(n), DcId(n / 2)));
        let partitions = vec![
            (PartitionId(0), vec![NodeId(0), NodeId(2), NodeId(4)]),
            (PartitionId(1), vec![NodeId(3), NodeId(5), NodeId(7)]),
            (PartitionId(2), vec![NodeId(4), NodeId(6), NodeId(0)]),
            (PartitionId(3), vec![NodeId(7), NodeId(1), NodeId(2)]),
        ];
        Membership::new(Epoch(1), nodes, partitions, 3).unwrap()
    }

    fn voters(m: &Membership, p: u32) -> Vec<NodeId> {
        m.replicas(PartitionId(p)).unwrap().voters().to_vec()
    }

    /// Names, not internal ids: a refusal and a command, as logs give them, name
    /// DCs and nodes as the topology file does; `Display` keeps the ids (no topology at hand).
    #[test]
    fn refusals_and_commands_are_named_by_the_topology() {
        let path = format!("{}/../configs/local-fast.yaml", env!("CARGO_MANIFEST_DIR"));
        let t = Topology::load(std::path::Path::new(&path)).expect("config loads");
        let m = Membership::from_topology(&t, 3).unwrap();
        let why = m.check(&Command::RestoreDc(DcId(1))).unwrap_err();
        assert_eq!(why.named(&t), "dc2 is not removed");
        assert_eq!(why.to_string(), "dc#1 is not removed");
        let last = Refused::LastVoter { partition: PartitionId(0), voter: NodeId(3) };
        assert_eq!(last.named(&t), "removing it would leave partition p0 with no voter (its last voter is dc4-n1)");
        let holds = Refused::DcHoldsReplica { partition: PartitionId(2), dc: DcId(0), holder: NodeId(0) };
        assert_eq!(holds.named(&t), "dc1 already holds a replica of partition p2 on dc1-n1");
        assert_eq!(Command::RemoveDc(DcId(1)).named(&t), "RemoveDc(dc2)");
        assert_eq!(
            Command::AddLearner { partition: PartitionId(1), node: NodeId(2) }.named(&t),
            "AddLearner { partition: p1, node: dc3-n1 }"
        );
    }

    #[test]
    fn initial_placement_is_checked() {
        let nodes = || (0..4).map(|n| (NodeId(n), DcId(n / 2)));
        let bad =
            |parts: Vec<(PartitionId, Vec<NodeId>)>, rf| Membership::new(Epoch(1), nodes(), parts, rf).unwrap_err();
        assert!(bad(vec![(PartitionId(0), vec![NodeId(0), NodeId(1)])], 2)
            .to_string()
            .contains("two replicas in dc#0"));
        assert!(bad(vec![(PartitionId(0), vec![])], 2).to_string().contains("no replica"));
        assert!(bad(vec![(PartitionId(0), vec![NodeId(9)])], 2).to_string().contains("node#9 is not a member"));
        assert!(bad(vec![(PartitionId(0), vec![NodeId(0)]), (PartitionId(0), vec![NodeId(2)])], 2)
            .to_string()
            .contains("listed twice"));
        assert!(bad(vec![], 0).to_string().contains("replication factor"));
        let twice = Membership::new(Epoch(1), [(NodeId(0), DcId(0)), (NodeId(0), DcId(1))], vec![], 1);
        assert!(twice.is_err());
    }

    #[test]
    fn remove_dc_shrinks_every_partition_in_one_new_epoch() {
        // Removing a dead DC (n = 3 → 2): Q(2) = 2.
        let mut m = paper();
        let change = m.apply(&Command::RemoveDc(DcId(0))).unwrap();
        assert_eq!(change.epoch, Epoch(2));
        assert_eq!(m.epoch(), Epoch(2));
        let shapes: Vec<_> = change.partitions.iter().map(|c| (c.partition.0, c.n, c.quorum)).collect();
        assert_eq!(shapes, vec![(0, 2, 2), (2, 2, 2), (3, 2, 2)]);
        assert_eq!(voters(&m, 0), vec![NodeId(2), NodeId(4)], "the next voter becomes primary");
        assert_eq!(voters(&m, 1), vec![NodeId(3), NodeId(5), NodeId(7)], "untouched");
        assert_eq!(m.replicas(PartitionId(1)).unwrap().quorum(), 3);
        assert_eq!(m.dc_status(DcId(0)), Some(Status::Removed));
        assert_eq!(m.node_status(NodeId(0)), Some(Status::Up), "node status is its own");
        assert!(!m.is_node_up(NodeId(0)));
        assert_eq!(m.apply(&Command::RemoveDc(DcId(0))), Err(Refused::DcAlreadyRemoved(DcId(0))));
        assert_eq!(m.apply(&Command::RemoveDc(DcId(9))), Err(Refused::UnknownDc(DcId(9))));
        assert_eq!(m.epoch(), Epoch(2));
    }

    /// The paper's placement with replication factor 1: a majority of 1 is 1, so only the
    /// last voter guard stops a removal.
    fn paper_factor_one() -> Membership {
        let p = paper();
        let partitions: Vec<_> = p.partitions().map(|(id, r)| (id, r.voters().to_vec())).collect();
        Membership::new(Epoch(1), (0..8).map(|n| (NodeId(n), DcId(n / 2))), partitions, 1).unwrap()
    }

    /// A second replica of a partition lost before the first is rebuilt is not removed
    /// (n = 3: one voter left is fewer than the 2 it keeps); once a learner is promoted back to
    /// three voters, the next removal goes through. `check` answers as `apply` would and
    /// changes nothing.
    #[test]
    fn a_removal_below_a_majority_of_the_replication_factor_is_refused() {
        let mut m = paper();
        m.apply(&Command::RemoveDc(DcId(0))).unwrap();
        let before = m.clone();
        let below = Refused::TooFewVoters { partition: PartitionId(0), left: 1, needed: 2 };
        assert_eq!(m.check(&Command::RemoveDc(DcId(1))), Err(below.clone()));
        assert_eq!(m.apply(&Command::RemoveDc(DcId(1))), Err(below));
        assert!(matches!(m.apply(&Command::RemoveNode(NodeId(4))), Err(Refused::TooFewVoters { .. })));
        assert_eq!(m, before, "a refused command changes nothing");
        // Node 5 holds only partition 1, which still has three voters: allowed.
        assert!(m.check(&Command::RemoveNode(NodeId(5))).is_ok());
        assert_eq!(m, before, "check changes nothing");
        // Rebuilt: partition 0 gets a voter in DC 3, and DC 1 may go.
        let added_in = m.apply(&Command::AddLearner { partition: PartitionId(0), node: NodeId(6) }).unwrap().epoch;
        assert!(
            matches!(m.check(&Command::RemoveDc(DcId(1))), Err(Refused::TooFewVoters { .. })),
            "a learner is no voter"
        );
        m.apply(&Command::Promote { partition: PartitionId(0), node: NodeId(6), added_in }).unwrap();
        for (p, node) in [(2u32, NodeId(2)), (3, NodeId(4))] {
            let added_in = m.apply(&Command::AddLearner { partition: PartitionId(p), node }).unwrap().epoch;
            m.apply(&Command::Promote { partition: PartitionId(p), node, added_in }).unwrap();
        }
        assert!(m.apply(&Command::RemoveDc(DcId(1))).is_ok());
    }

    /// The fewest voters a removal leaves, by replication factor: `n − max(1, min(Q − M,
    /// n − M))`, and a removal that would go below it is refused.
    #[test]
    fn the_fewest_voters_follow_the_recovery_rules_tolerance() {
        let fewest = |n: u16| {
            let nodes = (0..n).map(|i| (NodeId(i), DcId(i)));
            let partitions = vec![(PartitionId(0), (0..n).map(NodeId).collect::<Vec<_>>())];
            Membership::new(Epoch(1), nodes, partitions, n as usize).unwrap().fewest_voters()
        };
        assert_eq!((1..=8).map(fewest).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4, 5, 5, 7]);
        // n = 5 (world-5dc-n5): one DC may go; a second is refused until a rebuild.
        let nodes = (0..5).map(|i| (NodeId(i), DcId(i)));
        let mut m = Membership::new(Epoch(1), nodes, vec![(PartitionId(0), (0..5).map(NodeId).collect())], 5).unwrap();
        m.apply(&Command::RemoveDc(DcId(4))).unwrap();
        assert_eq!(
            m.apply(&Command::RemoveDc(DcId(3))),
            Err(Refused::TooFewVoters { partition: PartitionId(0), left: 3, needed: 4 })
        );
    }

    #[test]
    fn remove_refuses_to_leave_a_partition_without_a_voter() {
        let mut m = paper_factor_one();
        m.apply(&Command::RemoveDc(DcId(0))).unwrap();
        m.apply(&Command::RemoveDc(DcId(1))).unwrap();
        assert_eq!(voters(&m, 0), vec![NodeId(4)]);
        assert_eq!(m.replicas(PartitionId(0)).unwrap().quorum(), 1);
        let before = m.clone();
        assert_eq!(
            m.apply(&Command::RemoveDc(DcId(2))),
            Err(Refused::LastVoter { partition: PartitionId(0), voter: NodeId(4) })
        );
        assert_eq!(m, before, "a refused command changes nothing");
        assert_eq!(
            m.apply(&Command::RemoveNode(NodeId(4))),
            Err(Refused::LastVoter { partition: PartitionId(0), voter: NodeId(4) })
        );
        // Node 5 of DC 2 holds only partition 1, which keeps node 7: allowed.
        let change = m.apply(&Command::RemoveNode(NodeId(5))).unwrap();
        assert_eq!(change.partitions.iter().map(|c| (c.partition.0, c.n)).collect::<Vec<_>>(), vec![(1, 1)]);
        // A learner does not count as a voter.
        let mut m = paper_factor_one();
        m.apply(&Command::RemoveDc(DcId(0))).unwrap();
        m.apply(&Command::RemoveDc(DcId(1))).unwrap();
        m.apply(&Command::AddLearner { partition: PartitionId(0), node: NodeId(6) }).unwrap();
        assert!(matches!(m.apply(&Command::RemoveDc(DcId(2))), Err(Refused::LastVoter { .. })));
    }

    #[test]
    fn the_last_dc_up_cannot_be_removed() {
        let mut m = Membership::new(Epoch(1), [(NodeId(0), DcId(0)), (NodeId(1), DcId(1))], vec![], 1).unwrap();
        m.apply(&Command::RemoveDc(DcId(0))).unwrap();
        assert_eq!(m.apply(&Command::RemoveDc(DcId(1))), Err(Refused::LastDc(DcId(1))));
    }

    #[test]
    fn removing_what_holds_no_replica_keeps_the_epoch() {
        let mut m = paper();
        // Node 6 holds a replica of partition 2 only; node 1 of partition 3 only.
        let mut m2 = m.clone();
        assert_eq!(m2.apply(&Command::RemoveNode(NodeId(6))).unwrap().epoch, Epoch(2));
        let c = m2.apply(&Command::RestoreNode(NodeId(6))).unwrap();
        assert!(!c.placement_changed());
        assert_eq!(c.epoch, Epoch(2));
        assert_eq!(m2.apply(&Command::RestoreNode(NodeId(6))), Err(Refused::NodeNotRemoved(NodeId(6))));
        let c = m2.apply(&Command::RemoveNode(NodeId(6))).unwrap();
        assert_eq!((c.epoch, c.placement_changed()), (Epoch(2), false), "no replica left on it");
        assert_eq!(m2.apply(&Command::RemoveNode(NodeId(6))), Err(Refused::NodeAlreadyRemoved(NodeId(6))));
        assert_eq!(m.apply(&Command::RestoreDc(DcId(1))), Err(Refused::DcNotRemoved(DcId(1))));
        assert_eq!(m.apply(&Command::RestoreNode(NodeId(42))), Err(Refused::UnknownNode(NodeId(42))));
    }

    #[test]
    fn a_restored_dc_gets_no_replica_back_until_rebuilt() {
        let mut m = paper();
        m.apply(&Command::RemoveDc(DcId(2))).unwrap();
        let c = m.apply(&Command::RestoreDc(DcId(2))).unwrap();
        assert_eq!((c.epoch, c.placement_changed()), (Epoch(2), false));
        assert_eq!(m.dc_status(DcId(2)), Some(Status::Up));
        assert!(m.partitions().all(|(_, r)| r.nodes().all(|n| m.dc_of(n) != Some(DcId(2)))));
        // The rebuild then proposes DC 2 again where it is the least loaded candidate.
        let plan = m.plan_rebuild();
        assert_eq!(plan.iter().map(|s| (s.partition.0, s.missing)).collect::<Vec<_>>(), vec![(0, 1), (1, 1), (2, 1)]);
        assert!(plan.iter().all(|s| s.proposals.len() == 1));
    }

    #[test]
    fn add_learner_refusals() {
        let mut m = paper();
        let add = |partition, node| Command::AddLearner { partition: PartitionId(partition), node: NodeId(node) };
        assert_eq!(m.apply(&add(9, 6)), Err(Refused::UnknownPartition(PartitionId(9))));
        assert_eq!(m.apply(&add(0, 60)), Err(Refused::UnknownNode(NodeId(60))));
        assert_eq!(
            m.apply(&add(0, 1)),
            Err(Refused::DcHoldsReplica { partition: PartitionId(0), dc: DcId(0), holder: NodeId(0) })
        );
        m.apply(&Command::RemoveNode(NodeId(6))).unwrap();
        assert_eq!(m.apply(&add(0, 6)), Err(Refused::NodeRemoved(NodeId(6))));
        m.apply(&Command::RemoveDc(DcId(3))).unwrap();
        assert_eq!(m.apply(&add(0, 7)), Err(Refused::DcRemoved(DcId(3))));
        let c = m.apply(&Command::RestoreDc(DcId(3))).unwrap();
        assert_eq!(c.epoch, Epoch(3));
        let c = m.apply(&add(0, 7)).unwrap();
        assert_eq!(c.epoch, Epoch(4));
        assert_eq!(c.partitions, vec![PartitionChange { partition: PartitionId(0), n: 3, quorum: 3, learners: 1 }]);
        assert_eq!(m.apply(&add(0, 6)), Err(Refused::NodeRemoved(NodeId(6))), "removed node checked first");
        m.apply(&Command::RestoreNode(NodeId(6))).unwrap();
        assert_eq!(
            m.apply(&add(0, 6)),
            Err(Refused::DcHoldsReplica { partition: PartitionId(0), dc: DcId(3), holder: NodeId(7) }),
            "a learner counts as the DC's replica"
        );
    }

    #[test]
    fn rebuild_adds_a_learner_then_promotes_it_in_new_epochs() {
        // Rebuild (docs/design.md): epoch e+1 removes, e+2 adds the learner, e+3 promotes.
        let mut m = paper();
        m.apply(&Command::RemoveDc(DcId(1))).unwrap();
        let plan = m.plan_rebuild();
        let shortfall = plan.iter().find(|s| s.partition == PartitionId(0)).unwrap();
        assert_eq!((shortfall.replicas, shortfall.missing), (2, 1));
        let Command::AddLearner { node, .. } = shortfall.proposals[0] else { panic!("{shortfall:?}") };
        assert_eq!(m.dc_of(node), Some(DcId(3)), "the only up DC without a replica of p0");
        for s in &plan {
            for c in &s.proposals {
                m.apply(c).unwrap();
            }
        }
        assert_eq!(m.epoch(), Epoch(2 + plan.len() as u32));
        assert!(m.plan_rebuild().is_empty(), "learners count towards the factor");
        let learner = m.replicas(PartitionId(0)).unwrap().learners()[0];
        assert_eq!(learner.node, node);
        let stale = Command::Promote { partition: PartitionId(0), node, added_in: Epoch(1) };
        assert_eq!(
            m.apply(&stale),
            Err(Refused::LearnerChanged {
                partition: PartitionId(0),
                node,
                named: Epoch(1),
                current: learner.added_in
            })
        );
        let other = Command::Promote { partition: PartitionId(0), node: NodeId(0), added_in: learner.added_in };
        assert_eq!(m.apply(&other), Err(Refused::NotALearner { partition: PartitionId(0), node: NodeId(0) }));
        let before = m.epoch();
        let c = m.apply(&Command::Promote { partition: PartitionId(0), node, added_in: learner.added_in }).unwrap();
        assert_eq!(c.epoch, Epoch(before.0 + 1));
        assert_eq!(c.partitions, vec![PartitionChange { partition: PartitionId(0), n: 3, quorum: 3, learners: 0 }]);
        assert_eq!(voters(&m, 0), vec![NodeId(0), NodeId(4), node], "promoted voters go last");
    }

    #[test]
    fn rebuild_spreads_learners_and_reports_what_it_cannot_place() {
        // Five DCs of one node each, six partitions of n = 3; DC 0 dies.
        let nodes = (0..5).map(|n| (NodeId(n), DcId(n)));
        let partitions = (0..6u32).map(|p| (PartitionId(p), (0..3).map(|i| NodeId(((p + i) % 5) as u16)).collect()));
        let mut m = Membership::new(Epoch(7), nodes, partitions, 3).unwrap();
        m.apply(&Command::RemoveDc(DcId(0))).unwrap();
        let plan = m.plan_rebuild();
        let picks: Vec<_> = plan.iter().map(|s| (s.partition.0, s.proposals.clone())).collect();
        // p0 = {0,1,2}, p3 = {3,4,0}, p4 = {4,0,1}, p5 = {0,1,2}; node loads after the removal:
        // 1:4, 2:4, 3:3, 4:3 (p1 {1,2,3}, p2 {2,3,4} untouched).
        let add = |p: u32, n: u16| Command::AddLearner { partition: PartitionId(p), node: NodeId(n) };
        assert_eq!(picks, vec![(0, vec![add(0, 3)]), (3, vec![add(3, 1)]), (4, vec![add(4, 2)]), (5, vec![add(5, 4)])]);
        // With rf = 5 and one DC gone, one replica per partition cannot be placed.
        let mut wide = m.clone();
        wide.replication_factor = 5;
        for s in wide.plan_rebuild() {
            assert_eq!(s.proposals.len() + 1, s.missing, "{s:?}");
        }
    }

    #[test]
    fn exhausted_epoch_refuses_placement_changes_only() {
        let mut m = paper();
        m.epoch = Epoch(u32::MAX);
        assert_eq!(m.apply(&Command::RemoveDc(DcId(0))), Err(Refused::EpochExhausted(Epoch(u32::MAX))));
        assert_eq!(m.dc_status(DcId(0)), Some(Status::Up));
        m.apply(&Command::RemoveNode(NodeId(5))).unwrap_err();
        let nodes = [(NodeId(0), DcId(0)), (NodeId(1), DcId(1))];
        let mut empty = Membership::new(Epoch(u32::MAX), nodes, vec![], 1).unwrap();
        assert!(empty.apply(&Command::RemoveDc(DcId(0))).is_ok(), "no placement change, no new epoch");
    }

    #[test]
    fn commands_round_trip_through_serde() {
        let commands = [
            Command::RemoveDc(DcId(1)),
            Command::RestoreDc(DcId(1)),
            Command::RemoveNode(NodeId(3)),
            Command::RestoreNode(NodeId(3)),
            Command::AddLearner { partition: PartitionId(2), node: NodeId(3) },
            Command::Promote { partition: PartitionId(2), node: NodeId(3), added_in: Epoch(9) },
        ];
        for c in commands {
            let json = serde_json::to_vec(&c).unwrap();
            assert_eq!(serde_json::from_slice::<Command>(&json).unwrap(), c);
        }
        assert!(serde_json::from_slice::<Command>(b"{\"RemoveDc\":-1}").is_err());
        assert!(serde_json::from_slice::<Command>(b"{\"Explode\":1}").is_err());
    }
}
