//! What one node believes of the others ([`SuspectView`]): the nodes it suspects and the
//! DCs it suspects (every node of the DC suspected, never its own DC), with the changes each
//! failure-detector action makes to them. Pure: times are passed in (µs); the node's detector
//! driver (`crate::liveness`) feeds it and publishes it.

use redt_proto::{DcId, NodeId, Topology};
use std::collections::BTreeMap;

/// A change of what a node believes of the others, in the order it happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The node is now suspected.
    NodeSuspected(NodeId),
    /// The node, suspected for `suspected_for_us` µs, is alive again.
    NodeAlive {
        /// The node.
        node: NodeId,
        /// How long it was suspected, µs.
        suspected_for_us: u64,
    },
    /// Every node of the DC is now suspected.
    DcSuspected(DcId),
    /// A node of the DC, suspected for `suspected_for_us` µs, is alive again.
    DcAlive {
        /// The DC.
        dc: DcId,
        /// How long it was suspected, µs.
        suspected_for_us: u64,
    },
}

/// What one node believes of the others, from its detector's actions: the nodes it
/// suspects, the DCs it suspects (every node of the DC suspected; never its own DC, which it
/// is alive in) and the suspicions of a node it raised so far. Pure: times are passed in (µs).
#[derive(Clone, Debug)]
pub struct SuspectView {
    my_dc: DcId,
    /// DC of each node, by node id.
    dc_of: Vec<DcId>,
    /// Nodes of each DC, by DC id.
    nodes_of: Vec<Vec<NodeId>>,
    /// Suspected nodes, with when they became suspected (µs).
    nodes: BTreeMap<NodeId, u64>,
    /// Suspected DCs, with when they became suspected (µs).
    dcs: BTreeMap<DcId, u64>,
    suspicions_total: u64,
}

impl SuspectView {
    /// The view of node `me` of `topology`, suspecting nobody.
    pub fn new(topology: &Topology, me: NodeId) -> SuspectView {
        let dc_of: Vec<DcId> = topology.nodes.iter().map(|n| n.dc).collect();
        SuspectView {
            my_dc: dc_of.get(me.0 as usize).copied().unwrap_or(DcId(u16::MAX)),
            dc_of,
            nodes_of: topology.dcs.iter().map(|d| d.nodes.clone()).collect(),
            nodes: BTreeMap::new(),
            dcs: BTreeMap::new(),
            suspicions_total: 0,
        }
    }

    /// The detector suspects `node` at `now_us`: returns the changes (the node, then its DC
    /// if every node of it is now suspected). A node already suspected, or outside the
    /// topology, changes nothing.
    pub fn handle_suspect(&mut self, node: NodeId, now_us: u64) -> Vec<Change> {
        let Some(&dc) = self.dc_of.get(node.0 as usize) else { return vec![] };
        if self.nodes.contains_key(&node) {
            return vec![];
        }
        self.nodes.insert(node, now_us);
        self.suspicions_total += 1;
        let mut changes = vec![Change::NodeSuspected(node)];
        let all = self.nodes_of.get(dc.0 as usize).is_some_and(|n| n.iter().all(|n| self.nodes.contains_key(n)));
        if dc != self.my_dc && all && !self.dcs.contains_key(&dc) {
            self.dcs.insert(dc, now_us);
            changes.push(Change::DcSuspected(dc));
        }
        changes
    }

    /// The detector sees `node` alive again at `now_us`: returns the changes (its DC first,
    /// if it was suspected, then the node). A node not suspected changes nothing.
    pub fn handle_alive(&mut self, node: NodeId, now_us: u64) -> Vec<Change> {
        let Some(since) = self.nodes.remove(&node) else { return vec![] };
        let mut changes = vec![];
        if let Some(dc_since) = self.dc_of.get(node.0 as usize).and_then(|dc| self.dcs.remove(dc).map(|s| (*dc, s))) {
            changes.push(Change::DcAlive { dc: dc_since.0, suspected_for_us: now_us.saturating_sub(dc_since.1) });
        }
        changes.push(Change::NodeAlive { node, suspected_for_us: now_us.saturating_sub(since) });
        changes
    }

    /// The suspected nodes, ascending.
    pub fn suspected_nodes(&self) -> Vec<NodeId> {
        self.nodes.keys().copied().collect()
    }

    /// The suspected DCs, ascending.
    pub fn suspected_dcs(&self) -> Vec<DcId> {
        self.dcs.keys().copied().collect()
    }

    /// Suspicions of a node raised so far (each time a node went from alive to suspected).
    pub fn suspicions_total(&self) -> u64 {
        self.suspicions_total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology(yaml: &str) -> Topology {
        Topology::from_yaml("test.yaml", yaml).expect("a valid topology")
    }

    fn default_yaml() -> Topology {
        topology(include_str!("../../configs/default.yaml"))
    }

    /// default.yaml: dc1 = {0, 1}, dc2 = {2, 3}, …; the view of node 0.
    #[test]
    fn a_dc_is_suspected_when_every_node_of_it_is() {
        let t = default_yaml();
        let mut v = SuspectView::new(&t, NodeId(0));
        assert_eq!(v.handle_suspect(NodeId(2), 100), vec![Change::NodeSuspected(NodeId(2))]);
        assert_eq!(v.suspected_dcs(), vec![], "one node of two");
        assert_eq!(
            v.handle_suspect(NodeId(3), 150),
            vec![Change::NodeSuspected(NodeId(3)), Change::DcSuspected(DcId(1))]
        );
        assert_eq!(v.suspected_nodes(), vec![NodeId(2), NodeId(3)]);
        assert_eq!(v.suspected_dcs(), vec![DcId(1)]);
        assert_eq!(v.handle_suspect(NodeId(3), 160), vec![], "already suspected");
        assert_eq!(v.suspicions_total(), 2);
        // One node back: the DC is alive again, then the node.
        assert_eq!(
            v.handle_alive(NodeId(2), 400),
            vec![
                Change::DcAlive { dc: DcId(1), suspected_for_us: 250 },
                Change::NodeAlive { node: NodeId(2), suspected_for_us: 300 }
            ]
        );
        assert_eq!(v.suspected_dcs(), vec![]);
        assert_eq!(v.handle_alive(NodeId(2), 500), vec![], "not suspected");
        // Suspected again: counted again, and the DC with it.
        assert_eq!(
            v.handle_suspect(NodeId(2), 600),
            vec![Change::NodeSuspected(NodeId(2)), Change::DcSuspected(DcId(1))]
        );
        assert_eq!(v.suspicions_total(), 3);
    }

    #[test]
    fn the_own_dc_is_never_suspected_and_unknown_nodes_change_nothing() {
        let t = default_yaml();
        let mut v = SuspectView::new(&t, NodeId(0));
        assert_eq!(v.handle_suspect(NodeId(1), 10), vec![Change::NodeSuspected(NodeId(1))]);
        assert_eq!(v.suspected_dcs(), vec![], "node 0 is alive in dc1");
        assert_eq!(v.handle_suspect(NodeId(999), 10), vec![]);
        assert_eq!(v.handle_alive(NodeId(999), 10), vec![]);
        assert_eq!(v.suspicions_total(), 1);
        // A DC of one node (local-fast) is suspected with it; a clock going back never panics.
        let lf = topology(include_str!("../../configs/local-fast.yaml"));
        let mut v = SuspectView::new(&lf, NodeId(0));
        assert_eq!(
            v.handle_suspect(NodeId(2), 50),
            vec![Change::NodeSuspected(NodeId(2)), Change::DcSuspected(DcId(2))]
        );
        assert_eq!(
            v.handle_alive(NodeId(2), 10),
            vec![
                Change::DcAlive { dc: DcId(2), suspected_for_us: 0 },
                Change::NodeAlive { node: NodeId(2), suspected_for_us: 0 }
            ]
        );
    }
}
