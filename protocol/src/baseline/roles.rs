//! Who does what in the baselines (RedT §4.3 Table 1), as pure functions of the
//! plan and the topology: primaries, replica nodes, a primary's secondaries, a
//! coordinator's backups, and when a replication round has reached its majorities.
//!
//! Leaders are stable: the primary of a partition is the first replica of its placement
//! (`partitions[p].replicas[0]` in the topology file), the others are its secondaries.

use crate::decision::majority;
use crate::plan::Plan;
use redt_dc_executor::ReplicaChange;
use redt_proto::{NodeId, PartitionId, Topology};
use std::collections::{BTreeMap, BTreeSet};

/// The nodes holding the primary of a touched partition, ascending.
pub fn primary_nodes(plan: &Plan) -> Vec<NodeId> {
    let set: BTreeSet<NodeId> = plan.partitions.iter().filter_map(|p| p.replicas.first().map(|r| r.0)).collect();
    set.into_iter().collect()
}

/// The nodes holding any replica of a touched partition, ascending.
pub fn replica_nodes(plan: &Plan) -> Vec<NodeId> {
    let set: BTreeSet<NodeId> = plan.partitions.iter().flat_map(|p| p.replicas.iter().map(|r| r.0)).collect();
    set.into_iter().collect()
}

/// A coordinator's `m` backups: the node at the coordinator's position in each of the
/// next `m` DCs (by id, wrapping), skipping its own DC. Fewer when the topology has fewer
/// other DCs.
pub fn backups(topology: &Topology, coordinator: NodeId, m: usize) -> Vec<NodeId> {
    let own = topology.nodes[coordinator.0 as usize].dc;
    let position = topology.dcs[own.0 as usize].nodes.iter().position(|&n| n == coordinator).unwrap_or(0);
    let count = topology.dcs.len();
    (1..count)
        .map(|k| &topology.dcs[(own.0 as usize + k) % count])
        .filter(|dc| !dc.nodes.is_empty())
        .map(|dc| dc.nodes[position % dc.nodes.len()])
        .take(m)
        .collect()
}

/// Acknowledgements a coordinator needs from its `backups` for its decision to be on a
/// majority of the `backups + 1` copies (it holds one itself).
pub fn backup_acks_needed(backups: usize) -> usize {
    majority(backups + 1) - 1
}

/// What one primary sends in one replication round: per secondary node, the changes of
/// the partitions it replicates; per partition, its secondaries and the acknowledgements a
/// majority needs (the primary counts itself).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replication {
    /// Changes to send, by secondary node.
    pub per_node: BTreeMap<NodeId, Vec<ReplicaChange>>,
    /// `(partition, its secondaries, acknowledgements needed)`, ascending by partition.
    pub partitions: Vec<(PartitionId, Vec<NodeId>, usize)>,
}

impl Replication {
    /// Whether the acknowledgements of `acked` give every partition its majority.
    pub fn reached(&self, acked: &BTreeSet<NodeId>) -> bool {
        self.partitions
            .iter()
            .all(|(_, secondaries, need)| secondaries.iter().filter(|n| acked.contains(n)).count() >= *need)
    }

    /// Whether nothing needs replicating.
    pub fn is_empty(&self) -> bool {
        self.per_node.is_empty()
    }
}

/// The replication round of `changes` (a primary's redo) by `primary`: each change goes to
/// the secondaries of its partition. Changes of tables the topology lacks are dropped
/// (they cannot have been executed).
pub fn replication(topology: &Topology, primary: NodeId, changes: &[ReplicaChange]) -> Replication {
    let mut per_node: BTreeMap<NodeId, Vec<ReplicaChange>> = BTreeMap::new();
    let mut partitions: BTreeMap<PartitionId, (Vec<NodeId>, usize)> = BTreeMap::new();
    for c in changes {
        let Some(schema) = topology.table(c.table) else { continue };
        let pid = topology.partition_of(schema, c.key);
        let replicas = &topology.partitions[pid.0 as usize].replicas;
        let secondaries: Vec<NodeId> = replicas.iter().copied().filter(|&n| n != primary).collect();
        for &s in &secondaries {
            per_node.entry(s).or_default().push(c.clone());
        }
        let need = majority(replicas.len()).saturating_sub(usize::from(replicas.contains(&primary)));
        partitions.entry(pid).or_insert((secondaries, need));
    }
    Replication { per_node, partitions: partitions.into_iter().map(|(p, (s, n))| (p, s, n)).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{plan, scoped_accesses, Scope};
    use redt_dc_executor::KvProcedure;
    use redt_proto::DcId;

    fn topo() -> Topology {
        Topology::from_yaml("default.yaml", include_str!("../../../configs/default.yaml")).unwrap()
    }

    fn kv(keys: &[u64]) -> KvProcedure {
        let t = topo();
        let table = t.table_by_name("kv").unwrap();
        KvProcedure::new(table.id, 8, keys.iter().map(|&k| redt_dc_executor::KvOp::Write(k, vec![1])).collect())
    }

    #[test]
    fn scopes_partition_the_accesses_as_the_protocols_need() {
        let t = topo();
        for keys in [vec![0u64], vec![0, 1, 2], vec![3, 11, 19, 5], (0..16).collect()] {
            let p = plan(&t, &kv(&keys)).unwrap();
            // Every access's primary runs it exactly once under `Primaries`.
            let mut primaries = Vec::new();
            // Every replica of every access runs it exactly once under `Node`.
            let mut per_node = 0;
            for n in &t.nodes {
                primaries.extend(scoped_accesses(&p, n.dc, n.id, Scope::Primaries).into_iter().map(|la| la.access));
                per_node += scoped_accesses(&p, n.dc, n.id, Scope::Node).len();
            }
            primaries.sort();
            assert_eq!(primaries, (0..keys.len()).collect::<Vec<_>>(), "keys {keys:?}");
            let dc_total: usize = t.dcs.iter().map(|d| scoped_accesses(&p, d.id, d.nodes[0], Scope::Dc).len()).sum();
            assert_eq!(per_node, dc_total);
            assert_eq!(per_node, keys.len() * 3, "3 replicas per partition");
            // The primary nodes are exactly the nodes that run something under `Primaries`.
            let running: Vec<NodeId> = t
                .nodes
                .iter()
                .filter(|n| !scoped_accesses(&p, n.dc, n.id, Scope::Primaries).is_empty())
                .map(|n| n.id)
                .collect();
            assert_eq!(running, primary_nodes(&p));
            assert!(replica_nodes(&p).len() >= primary_nodes(&p).len());
        }
    }

    #[test]
    fn backups_sit_in_other_dcs_and_a_majority_counts_the_coordinator() {
        let t = topo();
        for n in &t.nodes {
            let b = backups(&t, n.id, 2);
            assert_eq!(b.len(), 2);
            let dcs: BTreeSet<DcId> = b.iter().map(|x| t.nodes[x.0 as usize].dc).collect();
            assert_eq!(dcs.len(), 2);
            assert!(!dcs.contains(&n.dc));
        }
        assert_eq!(backups(&t, NodeId(0), 10).len(), t.dcs.len() - 1);
        assert_eq!(backup_acks_needed(2), 1);
        assert_eq!(backup_acks_needed(4), 2);
        assert_eq!(backup_acks_needed(0), 0);
    }

    #[test]
    fn a_replication_round_reaches_its_majority_exactly_when_each_partition_has_one_more_ack() {
        let t = topo();
        let table = t.table_by_name("kv").unwrap().id;
        for keys in [vec![0u64], vec![0, 1], vec![0, 8, 16], vec![2, 5, 7]] {
            let schema = t.table(table).unwrap();
            let primary = t.partitions[t.partition_of(schema, keys[0]).0 as usize].replicas[0];
            let changes: Vec<ReplicaChange> = keys
                .iter()
                .filter(|&&k| t.partitions[t.partition_of(schema, k).0 as usize].replicas[0] == primary)
                .map(|&k| ReplicaChange { table, key: k, cell: 0, value: vec![7], seen: 0 })
                .collect();
            let r = replication(&t, primary, &changes);
            assert!(!r.is_empty());
            assert!(!r.per_node.contains_key(&primary));
            let secondaries: Vec<NodeId> = r.per_node.keys().copied().collect();
            // Exhaustive over every subset of secondaries that acknowledged.
            for mask in 0u32..(1 << secondaries.len()) {
                let acked: BTreeSet<NodeId> =
                    secondaries.iter().enumerate().filter(|(i, _)| mask >> i & 1 == 1).map(|(_, &n)| n).collect();
                let expect = r.partitions.iter().all(|(_, s, _)| s.iter().any(|n| acked.contains(n)));
                assert_eq!(r.reached(&acked), expect, "keys {keys:?} acked {acked:?}");
            }
        }
        assert!(replication(&t, NodeId(0), &[]).is_empty());
    }
}
