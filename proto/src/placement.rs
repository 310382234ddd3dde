//! A placement: which node holds which replica of each partition, at one epoch.
//!
//! The topology file places every partition's replicas at its own epoch; every placement
//! change the membership commits (a DC or node removed, a learner added or promoted) makes a
//! new epoch with other replica sets. DCs, nodes, tables, links and every other setting stay
//! the file's. A [`Placement`] is such a topology at one epoch; a bare [`Topology`] is the
//! file's static view.

use crate::ids::Epoch;
use crate::topology::Topology;
use std::ops::Deref;
use std::sync::Arc;

/// The topology at one epoch: the file's DCs, nodes, tables and links with the replica sets
/// (each partition's `replicas` and `learners`) the membership committed for `epoch`.
///
/// Cheap to clone (an `Arc` clone) and immutable; reads go through `Deref<Target = Topology>`.
/// Two placements are equal when their topologies are.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement(Arc<Topology>);

impl Placement {
    /// The placement the topology file describes, at the file's epoch: where a node starts
    /// before it applies any placement change.
    pub fn initial(file: Arc<Topology>) -> Placement {
        Placement(file)
    }

    /// The epoch these replica sets belong to.
    pub fn epoch(&self) -> Epoch {
        self.0.epoch
    }

    /// The underlying topology, shared, for the code that keeps or passes an
    /// `Arc<Topology>` (a client, a driver's static view).
    pub fn as_topology(&self) -> &Arc<Topology> {
        &self.0
    }
}

impl Deref for Placement {
    type Target = Topology;

    fn deref(&self) -> &Topology {
        &self.0
    }
}

impl AsRef<Topology> for Placement {
    fn as_ref(&self) -> &Topology {
        &self.0
    }
}

impl From<Topology> for Placement {
    /// `topology` taken as the placement of its own `epoch` (the builders of a new epoch's
    /// placement, `redt_protocol::epochs::placement`, end with this).
    fn from(topology: Topology) -> Placement {
        Placement(Arc::new(topology))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology() -> Topology {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/default.yaml");
        Topology::load(std::path::Path::new(path)).expect("default topology")
    }

    #[test]
    fn a_placement_reads_as_its_topology_and_clones_share_it() {
        let file = Arc::new(topology());
        let p = Placement::initial(file.clone());
        assert_eq!(p.epoch(), file.epoch);
        assert_eq!(p.partitions, file.partitions);
        assert!(Arc::ptr_eq(p.as_topology(), &file));
        assert!(Arc::ptr_eq(p.clone().as_topology(), &file), "a clone shares the topology");
        let mut next = (*file).clone();
        next.epoch = Epoch(file.epoch.0 + 1);
        let q = Placement::from(next);
        assert_eq!(q.epoch(), Epoch(file.epoch.0 + 1));
        assert_ne!(p, q);
    }
}
