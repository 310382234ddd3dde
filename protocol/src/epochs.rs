//! The placements a node has applied, by epoch (docs/design.md, "Failover").
//!
//! A placement change (a DC removed, a replica added) makes a new epoch: the same topology
//! with other replica sets, a [`Placement`]. A transaction belongs to the epoch its coordinator planned it in;
//! its phase 1, decision, recovery and catch-up all use that epoch's replica sets (n, Q, M).
//! So a node keeps every epoch it applied, not only the current one:
//!
//! - coordinators plan new transactions in the current epoch ([`Epochs::current`]);
//! - executors run a phase 1 only of the current epoch and vote abort on any other (the
//!   epoch fence: once every replica a quorum of the old epoch needs has moved on, no
//!   transaction of the old epoch can commit, so no transaction mixes epochs);
//! - recoverers finish an old-epoch transaction with that epoch's replica sets
//!   ([`Epochs::get`]);
//! - nobody owes a catch-up to a node the current epoch no longer places a replica on: it
//!   rebuilds from a snapshot if it returns ([`Epochs::holds_replica`]).
//!
//! Epochs only move forward: [`Epochs::adopt`] ignores a placement not newer than the
//! current one. What changes between epochs is only `epoch` and the partitions' replica
//! lists; DCs, nodes, tables and links are those of the topology file.

use redt_proto::{Epoch, NodeId, PartitionId, Placement, Topology};
use std::collections::BTreeMap;
use std::sync::RwLock;

/// Every placement a node applied, by epoch, and the current (newest) one. Shared by the
/// node's coordinators, executor core and recovery task; cheap to read (a [`Placement`] clone,
/// an `Arc` clone, under a read lock).
#[derive(Debug)]
pub struct Epochs {
    inner: RwLock<Applied>,
}

/// The placements applied: the current one, and every kept one by epoch (the current
/// included).
#[derive(Debug)]
struct Applied {
    current: Placement,
    by_epoch: BTreeMap<Epoch, Placement>,
}

impl Epochs {
    /// The most epochs kept; older ones are forgotten first (a transaction that old has long
    /// been decided: recovery finishes in seconds).
    pub const KEPT: usize = 1024;

    /// Starts at `initial`, the only placement kept (the topology file's, [`Placement::initial`]).
    pub fn new(initial: Placement) -> Epochs {
        let by_epoch = BTreeMap::from([(initial.epoch(), initial.clone())]);
        Epochs { inner: RwLock::new(Applied { current: initial, by_epoch }) }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Applied> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The current placement: new transactions are planned in it.
    pub fn current(&self) -> Placement {
        self.read().current.clone()
    }

    /// The current epoch.
    pub fn epoch(&self) -> Epoch {
        self.read().current.epoch
    }

    /// The placement of `epoch`, if this node applied it (and still keeps it).
    pub fn get(&self, epoch: Epoch) -> Option<Placement> {
        self.read().by_epoch.get(&epoch).cloned()
    }

    /// The placement of `epoch` if known, else the current one: for the parts of a message
    /// that do not depend on placement (tables, DCs, nodes are the same in every epoch).
    pub fn get_or_current(&self, epoch: Epoch) -> Placement {
        self.get(epoch).unwrap_or_else(|| self.current())
    }

    /// Every placement kept, oldest epoch first.
    pub fn all(&self) -> Vec<Placement> {
        self.read().by_epoch.values().cloned().collect()
    }

    /// Makes `placement` the current one if its epoch is newer than the current one.
    /// Returns whether it did. Only the newest [`Epochs::KEPT`] epochs are kept.
    pub fn adopt(&self, placement: Placement) -> bool {
        let mut applied = self.inner.write().unwrap_or_else(|p| p.into_inner());
        if applied.current.epoch() >= placement.epoch() {
            return false;
        }
        applied.by_epoch.insert(placement.epoch(), placement.clone());
        applied.current = placement;
        while applied.by_epoch.len() > Self::KEPT {
            applied.by_epoch.pop_first();
        }
        true
    }

    /// Whether the current epoch places a replica (a voter or a learner) of `partition` on
    /// `node` (`None`: of any partition). A catch-up is owed only to such a node.
    pub fn holds_replica(&self, node: NodeId, partition: Option<PartitionId>) -> bool {
        let t = self.current();
        match partition {
            Some(p) => t.partitions.get(p.0 as usize).is_some_and(|p| p.holds(node)),
            None => t.partitions.iter().any(|p| p.holds(node)),
        }
    }
}

impl Epochs {
    /// Whether the current epoch makes `node` a voter of some partition. A node that is not
    /// (removed with its DC, or back and only a learner being rebuilt) trusts nothing it held
    /// from before: it drops its older undecided entries instead of recovering them
    /// (`ExecutorCore::discard_if_removed`).
    pub fn holds_voter(&self, node: NodeId) -> bool {
        self.current().partitions.iter().any(|p| p.replicas.contains(&node))
    }
}

/// Whether `placement` (a node's placements, where its driver gave them to a machine) places
/// no replica at all on `node` in the current epoch. A machine finishing a transaction
/// (phase 2, a recoverer's decision, a catch-up) stops retrying such a node of another DC: it
/// was removed, and if it returns it is rebuilt from a snapshot, never trusted with what it
/// held. (A machine on a removed node still finishes its own DC's entries.)
pub fn unplaced(placement: Option<&Epochs>, node: NodeId) -> bool {
    placement.is_some_and(|e| !e.holds_replica(node, None))
}

/// How many partitions `topology` holds below `factor` replicas: fewer voters, or a learner
/// not yet promoted (a rebuild under way).
pub fn under_replicated(topology: &Topology, factor: usize) -> usize {
    topology.partitions.iter().filter(|p| p.replicas.len() < factor || !p.learners.is_empty()).count()
}

/// Whether the node's current placement (`None`: no placements given) has removed `dc`
/// (see [`removed_dcs`]).
pub fn dc_removed(placement: Option<&Epochs>, dc: redt_proto::DcId) -> bool {
    placement.is_some_and(|e| {
        let t = e.current();
        t.dcs.get(dc.0 as usize).is_some_and(|d| !holds_a_voter(&t, d))
    })
}

/// The DCs of `topology` on whose nodes its placement puts no voting replica, ascending (a
/// topology file places replicas in every DC, so these are the DCs removed since, or back
/// and holding only learners).
pub fn removed_dcs(topology: &Topology) -> Vec<redt_proto::DcId> {
    topology.dcs.iter().filter(|d| !holds_a_voter(topology, d)).map(|d| d.id).collect()
}

fn holds_a_voter(topology: &Topology, dc: &redt_proto::Dc) -> bool {
    topology.partitions.iter().any(|p| p.replicas.iter().any(|n| dc.nodes.contains(n)))
}

/// The voter repairs `node` owes after its placement moved from `before` to `after`: every
/// partition it is a voter of in `after` that lost a voter on the way (removed with its DC,
/// or its node), with the other voters of `after` to copy from.
///
/// Why (docs/design.md, "Failover" and "Rebuild"): a commit that leaves a
/// replica behind gives its catch-up to one up-to-date replica's DC; if that DC dies before it
/// ships and is removed, it drops its undecided entries when it comes back, and the replica
/// behind would keep its old values. So every remaining voter copies the partition from
/// every other voter, under the Thomas write rule, as a learner does: each ends up with the
/// newest version of every cell any of them holds (sim seed 1, bank, world-5dc-n5,
/// `all,remove`).
pub fn repairs(before: &Topology, after: &Topology, node: NodeId) -> Vec<(PartitionId, Vec<NodeId>)> {
    after
        .partitions
        .iter()
        .filter(|p| p.replicas.contains(&node))
        .filter(|p| {
            before.partitions.get(p.id.0 as usize).is_some_and(|b| b.replicas.iter().any(|v| !p.replicas.contains(v)))
        })
        .map(|p| (p.id, p.replicas.iter().copied().filter(|&v| v != node).collect()))
        .collect()
}

/// One partition's replicas in a placement: the voters in order (the first is the primary
/// the baselines use) and the learners being rebuilt.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionReplicas {
    /// The voting replicas: `n` counts them, and only them.
    pub voters: Vec<NodeId>,
    /// The learners: they get every committed write and a snapshot, and never vote.
    pub learners: Vec<redt_proto::Learner>,
}

/// The placement `membership` describes over `base`: its epoch, and each partition's voters
/// and learners ([`placement`]).
pub fn placement_of(base: &Topology, membership: &redt_membership::Membership) -> Placement {
    let replicas: BTreeMap<PartitionId, PartitionReplicas> = membership
        .partitions()
        .map(|(p, r)| (p, PartitionReplicas { voters: r.voters().to_vec(), learners: r.learners().to_vec() }))
        .collect();
    placement(base, membership.epoch(), &replicas)
}

/// `base` with the replica sets `replicas` at `epoch`: the placement of a new epoch.
/// Partitions `replicas` leaves out keep `base`'s voters and learners. `base` is the topology
/// file or an earlier placement (a `&Placement` reads as one).
pub fn placement(base: &Topology, epoch: Epoch, replicas: &BTreeMap<PartitionId, PartitionReplicas>) -> Placement {
    let mut t = base.clone();
    t.epoch = epoch;
    for p in &mut t.partitions {
        if let Some(r) = replicas.get(&p.id) {
            p.replicas = r.voters.clone();
            p.learners = r.learners.clone();
        }
    }
    Placement::from(t)
}

/// `base` without any replica (voter or learner) on a node of DC `dc`, at epoch
/// `base.epoch + 1`: what removing a dead DC does (docs/design.md, "Failover").
/// Used by tests; a real cluster and the simulation take the new placement from the
/// membership state machine.
pub fn without_dc(base: &Topology, dc: redt_proto::DcId) -> Placement {
    let outside = |n: &NodeId| base.nodes.get(n.0 as usize).is_some_and(|x| x.dc != dc);
    let replicas = base
        .partitions
        .iter()
        .map(|p| {
            let voters = p.replicas.iter().copied().filter(outside).collect();
            let learners = p.learners.iter().copied().filter(|l| outside(&l.node)).collect();
            (p.id, PartitionReplicas { voters, learners })
        })
        .collect();
    placement(base, Epoch(base.epoch.0 + 1), &replicas)
}

#[cfg(test)]
mod tests {
    use super::*;
    use redt_proto::DcId;
    use std::sync::Arc;

    fn topology() -> Topology {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/default.yaml");
        Topology::load(std::path::Path::new(path)).expect("default topology")
    }

    #[test]
    fn epochs_only_move_forward_and_old_ones_stay_readable() {
        let t = Placement::initial(Arc::new(topology()));
        let e1 = t.epoch();
        let epochs = Epochs::new(t.clone());
        let next = without_dc(&t, DcId(1));
        assert!(epochs.adopt(next.clone()));
        assert_eq!(epochs.epoch(), next.epoch);
        assert!(!epochs.adopt(t.clone()), "an older placement is ignored");
        assert!(!epochs.adopt(next.clone()), "the same epoch is ignored");
        assert_eq!(epochs.epoch(), next.epoch);
        assert_eq!(epochs.get(e1).as_deref(), Some(&*t), "the old epoch stays readable");
        assert_eq!(epochs.get(Epoch(99)), None);
        assert_eq!(epochs.get_or_current(Epoch(99)).epoch, next.epoch);
    }

    #[test]
    fn removing_a_dc_leaves_every_partition_without_it() {
        let t = topology();
        let dc = DcId(1);
        let next = without_dc(&t, dc);
        assert_eq!(next.epoch, Epoch(t.epoch.0 + 1));
        let mut shrunk = 0;
        for (before, after) in t.partitions.iter().zip(&next.partitions) {
            assert!(after.replicas.iter().all(|n| t.nodes[n.0 as usize].dc != dc));
            let had = before.replicas.iter().any(|n| t.nodes[n.0 as usize].dc == dc);
            assert_eq!(after.replicas.len() + usize::from(had), before.replicas.len());
            shrunk += usize::from(had);
        }
        assert!(shrunk > 0, "the default topology places replicas in every DC");
        let epochs = Epochs::new(Placement::from(t.clone()));
        let gone = t.dcs[dc.0 as usize].nodes[0];
        assert!(epochs.holds_replica(gone, None));
        epochs.adopt(next);
        assert!(!epochs.holds_replica(gone, None), "a removed DC's node holds nothing");
    }

    #[test]
    fn the_voters_left_after_a_removal_repair_from_each_other() {
        let t = topology();
        let after = without_dc(&t, DcId(1));
        let dc1 = &t.dcs[1].nodes;
        for node in t.nodes.iter().map(|n| n.id) {
            let owed = repairs(&t, &after, node);
            for p in &after.partitions {
                let lost = t.partitions[p.id.0 as usize].replicas.iter().any(|v| dc1.contains(v));
                let voter = p.replicas.contains(&node);
                match owed.iter().find(|(q, _)| *q == p.id) {
                    Some((_, from)) => {
                        assert!(lost && voter, "{node} repairs {} for nothing", p.id);
                        let mut others = p.replicas.clone();
                        others.retain(|&v| v != node);
                        assert_eq!(from, &others, "copies from every other voter");
                    }
                    None => assert!(!(lost && voter), "{node} owes {} a repair", p.id),
                }
            }
        }
        // No voter lost (a new epoch with the same replicas, or a promotion): no repair.
        let same = placement(&after, Epoch(after.epoch.0 + 1), &BTreeMap::new());
        assert!(t.nodes.iter().all(|n| repairs(&after, &same, n.id).is_empty()));
        assert!(t.nodes.iter().all(|n| repairs(&after, &t, n.id).is_empty()), "voters only added");
    }

    #[test]
    fn only_the_newest_epochs_are_kept() {
        let t = Placement::initial(Arc::new(topology()));
        let epochs = Epochs::new(t.clone());
        let mut e = t.epoch.0;
        for _ in 0..Epochs::KEPT + 5 {
            e += 1;
            epochs.adopt(placement(&t, Epoch(e), &BTreeMap::new()));
        }
        assert_eq!(epochs.epoch(), Epoch(e));
        assert_eq!(epochs.read().by_epoch.len(), Epochs::KEPT);
        assert!(epochs.get(t.epoch).is_none());
    }
}
