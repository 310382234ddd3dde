//! Planning: a transaction's accesses → one sub-transaction per DC holding a replica of a
//! touched partition (RedT §4.1; docs/design.md §1), and the votes of those DCs → the per-
//! partition vote table the decision reads.

use crate::decision::{ItemKey, PartitionVotes, ReplicaVote};
use crate::error::{Error, Result};
use redt_dc_executor::{LocalAccess, Procedure, Vote};
use redt_proto::{Cts, DcId, NodeId, PartitionId, Topology};
use std::collections::{BTreeMap, BTreeSet};

/// One touched partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedPartition {
    /// The partition.
    pub id: PartitionId,
    /// Accesses (indices into the plan) on this partition.
    pub accesses: Vec<usize>,
    /// Its replicas, as (node, DC), in placement order.
    pub replicas: Vec<(NodeId, DcId)>,
    /// Whether some access on this partition writes.
    pub writes: bool,
    /// Its learners (replicas being rebuilt): they take no part in phase 1, and a commit
    /// ships them the partition's new values as a catch-up (docs/design.md, "Rebuild").
    pub learners: Vec<NodeId>,
}

/// A planned transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Participant DCs, ascending.
    pub participants: Vec<DcId>,
    /// Per participant DC, the accesses it holds and on which node.
    pub local: BTreeMap<DcId, Vec<LocalAccess>>,
    /// Touched partitions, ascending by id.
    pub partitions: Vec<PlannedPartition>,
    /// Whether no access writes.
    pub read_only: bool,
}

/// Plans `procedure` on `topology`.
///
/// # Errors
/// [`Error::BadCall`] if an access names a table the topology does not have.
pub fn plan(topology: &Topology, procedure: &dyn Procedure) -> Result<Plan> {
    let mut partitions: BTreeMap<PartitionId, Vec<usize>> = BTreeMap::new();
    let mut read_only = true;
    let all = procedure.accesses();
    for (i, a) in all.iter().enumerate() {
        let schema = topology.table(a.table).ok_or_else(|| Error::BadCall(format!("unknown table {}", a.table)))?;
        partitions.entry(topology.partition_of(schema, a.key)).or_default().push(i);
        read_only &= a.write == 0;
    }
    let mut local: BTreeMap<DcId, Vec<LocalAccess>> = BTreeMap::new();
    let mut planned = Vec::with_capacity(partitions.len());
    for (pid, accesses) in partitions {
        let replicas: Vec<(NodeId, DcId)> = topology.partitions[pid.0 as usize]
            .replicas
            .iter()
            .map(|&n| (n, topology.nodes[n.0 as usize].dc))
            .collect();
        for &(node, dc) in &replicas {
            let list = local.entry(dc).or_default();
            list.extend(accesses.iter().map(|&access| LocalAccess { access, node }));
        }
        let writes = accesses.iter().any(|&a| all[a].write != 0);
        let learners = topology.partitions[pid.0 as usize].learners.iter().map(|l| l.node).collect();
        planned.push(PlannedPartition { id: pid, accesses, replicas, writes, learners });
    }
    for list in local.values_mut() {
        list.sort_by_key(|l| l.access);
    }
    Ok(Plan { participants: local.keys().copied().collect(), local, partitions: planned, read_only })
}

/// The executor node of `dc` for `accesses`: `own` if it is in `dc`, else the node holding
/// most of the accesses (lowest id on ties).
pub fn executor_node(topology: &Topology, dc: DcId, accesses: &[LocalAccess], own: NodeId) -> NodeId {
    if topology.nodes[own.0 as usize].dc == dc {
        return own;
    }
    let mut count: BTreeMap<NodeId, usize> = BTreeMap::new();
    for a in accesses {
        *count.entry(a.node).or_default() += 1;
    }
    count
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(n, _)| n)
        .unwrap_or(topology.dcs[dc.0 as usize].nodes[0])
}

/// The vote table of the touched partitions given the DC votes received so far (a DC's
/// vote stands for every replica it holds; RedT §4.2). Every commit vote carries the
/// coordinator's `start` reading as its clock, so the commit timestamp is
/// `1 + max(newest versions, start)`, a function of what the redo entries record: a recoverer
/// computes the same one (docs/design.md §2, recovery).
pub fn vote_table(plan: &Plan, votes: &BTreeMap<DcId, Vote>, start: Cts) -> Vec<PartitionVotes> {
    plan.partitions
        .iter()
        .map(|p| PartitionVotes {
            replicas: p
                .replicas
                .iter()
                .map(|&(node, dc)| match votes.get(&dc) {
                    None => ReplicaVote::Missing,
                    Some(v) if !v.is_commit() => ReplicaVote::Abort,
                    Some(v) => ReplicaVote::Commit {
                        versions: v
                            .items
                            .iter()
                            .filter(|i| i.node == node && p.accesses.contains(&i.access))
                            .flat_map(|i| {
                                i.versions.iter().map(move |&(c, ver)| {
                                    let item = match i.row {
                                        Some(key) => ItemKey::row(i.access as u32, key, c),
                                        None => ItemKey::new(i.access as u32, c),
                                    };
                                    (item, ver)
                                })
                            })
                            .collect(),
                        hlc: start,
                    },
                })
                .collect(),
        })
        .collect()
}

/// Which of a DC's planned accesses a node runs in phase 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every replica in the DC, on whichever node (RedT: one executor per DC).
    Dc,
    /// The primary replicas held by the receiving node (2PC-Paxos, EP-Paxos).
    Primaries,
    /// Every replica held by the receiving node (TAPIR).
    Node,
}

impl Scope {
    /// The wire code of `ExecuteRequest::scope`.
    pub fn code(self) -> u32 {
        match self {
            Scope::Dc => 0,
            Scope::Primaries => 1,
            Scope::Node => 2,
        }
    }

    /// Decodes a wire code; `None` for an unknown one.
    pub fn from_code(code: u32) -> Option<Scope> {
        match code {
            0 => Some(Scope::Dc),
            1 => Some(Scope::Primaries),
            2 => Some(Scope::Node),
            _ => None,
        }
    }
}

/// The accesses `node` (in `dc`) runs for `plan` under `scope`, ascending by access.
pub fn scoped_accesses(plan: &Plan, dc: DcId, node: NodeId, scope: Scope) -> Vec<LocalAccess> {
    let local = plan.local.get(&dc).map(Vec::as_slice).unwrap_or(&[]);
    match scope {
        Scope::Dc => local.to_vec(),
        Scope::Node => local.iter().filter(|la| la.node == node).copied().collect(),
        Scope::Primaries => {
            let led: BTreeSet<usize> = plan
                .partitions
                .iter()
                .filter(|p| p.replicas.first().map(|r| r.0) == Some(node))
                .flat_map(|p| p.accesses.iter().copied())
                .collect();
            local.iter().filter(|la| la.node == node && led.contains(&la.access)).copied().collect()
        }
    }
}
