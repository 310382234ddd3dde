//! A structural check of a whole tree, for tests and reports: READs every node, level by
//! level along the sibling chains, and checks the B-link invariants.

use super::node::Node;
use super::{BTree, Cost};
use crate::error::Result;
use crate::verbs::Verbs;
use redt_proto::Offset;
use serde::Serialize;

/// The shape of a tree as [`BTree::check`] found it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TreeShape {
    /// Levels, leaves included (1 for a lone root leaf).
    pub height: u8,
    /// Nodes per level; index 0 is the leaves.
    pub nodes_per_level: Vec<u64>,
    /// Entries in the leaves.
    pub entries: u64,
    /// Mean fraction of a leaf's capacity in use.
    pub leaf_fill: f64,
    /// Nodes on the tree's free list (freed by merges, kept for the next splits).
    pub free_nodes: u64,
}

impl BTree {
    /// READs the whole tree and checks it: each level is a chain of nodes from low fence 0
    /// to a last node without a high fence, each node's high fence is its sibling's low
    /// fence, and the children of each level, in order, are exactly the chain of the level
    /// below, each child's low fence being its entry's key; and walks the free list, every
    /// node of which must be freed. Meant for a quiescent tree (no
    /// writer running): a split whose separator is not in the parent yet fails the check.
    ///
    /// # Errors
    /// [`crate::Error::TreeCorrupt`] naming the first node that breaks an invariant; READ
    /// errors.
    pub fn check(&self, verbs: &dyn Verbs) -> Result<TreeShape> {
        let mut cost = Cost::default();
        let root = self.read_root(verbs, &mut cost)?;
        let top = self.read_node(verbs, root, &mut cost)?;
        let height = top.level + 1;
        let mut nodes_per_level = vec![0u64; height as usize];
        let mut entries = 0u64;
        // The chain of the level being checked, as the level above listed it (the root alone
        // at the top): (offset, low fence expected).
        let mut expected: Vec<(Offset, u64)> = vec![(root, 0)];
        for level in (0..height).rev() {
            let mut next_expected = Vec::new();
            let mut at = Some(first_of(&expected));
            let mut low = 0u64;
            let mut i = 0usize;
            while let Some(offset) = at {
                let node: Node = self.read_node(verbs, offset, &mut cost)?;
                let bad = |why| Err(self.corrupt(offset, why));
                if node.level != level {
                    return bad("check: a node on the wrong level");
                }
                if node.low != low {
                    return bad("check: a low fence that is not its left neighbour's high fence");
                }
                if expected.get(i) != Some(&(offset, low)) {
                    return bad("check: a node its parent does not list, or lists with another key");
                }
                if level > 0 {
                    next_expected.extend(node.entries.iter().map(|&(k, c)| (Offset(c), k)));
                } else {
                    entries += node.entries.len() as u64;
                }
                nodes_per_level[level as usize] += 1;
                i += 1;
                match node.high {
                    Some(h) => low = h,
                    None if i != expected.len() => return bad("check: the chain ends before the parent's list"),
                    None => {}
                }
                at = node.sibling;
            }
            expected = next_expected;
        }
        let cap = super::node::capacity(self.node_bytes) as f64;
        let leaf_fill = entries as f64 / (nodes_per_level[0] as f64 * cap);
        let free_nodes = self.free_nodes(verbs, &mut cost)?;
        Ok(TreeShape { height, nodes_per_level, entries, leaf_fill, free_nodes })
    }
}

fn first_of(expected: &[(Offset, u64)]) -> Offset {
    expected.first().map(|e| e.0).expect("every level has a first node: the parent lists one at least")
}
