//! A node's rebuilds: the snapshot copies it runs as a learner, by partition, and the voter
//! repairs it started — state the node's status reports and its rebuild driver
//! (`crate::rebuild_task`) keeps.

use redt_proto::{PartitionId, Placement};
use redt_protocol::rebuild::RebuildState;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// The rebuilds of a node, by partition, and its voter repairs.
#[derive(Debug)]
pub(crate) struct Rebuilds {
    learners: Mutex<BTreeMap<PartitionId, RebuildState>>,
    repairs: Mutex<Repairs>,
}

/// The voter repairs of a node: the placement `crate::rebuild_task::start` last looked at, and the partitions
/// being repaired.
#[derive(Debug)]
pub(crate) struct Repairs {
    pub(crate) seen: Placement,
    pub(crate) running: BTreeSet<PartitionId>,
}

impl Rebuilds {
    /// No rebuild yet; `file` is the placement the node starts from (its topology file's),
    /// which the first placement it adopts is compared with: a node that restarts repairs
    /// again every partition that lost a voter since (its memory of the repairs is gone).
    pub(crate) fn new(file: Placement) -> Rebuilds {
        Rebuilds { learners: Mutex::default(), repairs: Mutex::new(Repairs { seen: file, running: BTreeSet::new() }) }
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<PartitionId, RebuildState>> {
        self.learners.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn repairs(&self) -> std::sync::MutexGuard<'_, Repairs> {
        self.repairs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every rebuild this node runs or finished, by partition.
    pub(crate) fn snapshot(&self) -> Vec<(PartitionId, RebuildState)> {
        self.lock().iter().map(|(&p, s)| (p, s.clone())).collect()
    }
}
