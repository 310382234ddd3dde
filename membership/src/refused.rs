//! Why the membership refuses a command ([`Refused`]): the command names something the
//! membership does not hold, or applying it would leave the cluster without a DC up or a
//! partition without a voter. Every replica of the Raft log refuses the same command for the
//! same reason.

use redt_proto::{DcId, Epoch, NodeId, PartitionId, Topology};

/// Why [`crate::Membership::apply`] refused a command. The state is unchanged; every replica of the
/// log refuses the same command for the same reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The command names a DC not in the membership.
    #[error("{}", self.plain())]
    UnknownDc(DcId),
    /// The command names a node not in the membership.
    #[error("{}", self.plain())]
    UnknownNode(NodeId),
    /// The command names a partition not in the membership.
    #[error("{}", self.plain())]
    UnknownPartition(PartitionId),
    /// `RemoveDc` of a DC already removed.
    #[error("{}", self.plain())]
    DcAlreadyRemoved(DcId),
    /// `RestoreDc` of a DC that is up.
    #[error("{}", self.plain())]
    DcNotRemoved(DcId),
    /// `RemoveNode` of a node already removed.
    #[error("{}", self.plain())]
    NodeAlreadyRemoved(NodeId),
    /// `RestoreNode` of a node that is up.
    #[error("{}", self.plain())]
    NodeNotRemoved(NodeId),
    /// Removing the DC would leave no DC up.
    #[error("{}", self.plain())]
    LastDc(DcId),
    /// Removing the DC or node would leave `partition` with no voter (its learners, if any,
    /// are not filled yet).
    #[error("{}", self.plain())]
    LastVoter {
        /// The first partition (in id order) that would be left without a voter.
        partition: PartitionId,
        /// Its only remaining voter.
        voter: NodeId,
    },
    /// Removing the DC or node would leave `partition` with `left` voters, fewer than the
    /// `needed` ([`crate::Membership::fewest_voters`]): more replicas of the partition lost before
    /// the first is rebuilt than the recovery rule tolerates. Transactions of the older epochs
    /// whose votes sat in the removed replicas could then be neither committed nor aborted
    /// safely, and would stay undecided for good; kept in the placement, the dead replicas are
    /// waited for instead, and their partition waits too.
    #[error("{}", self.plain())]
    TooFewVoters {
        /// The first partition (in id order) that would fall below.
        partition: PartitionId,
        /// Its voters after the removal.
        left: usize,
        /// [`crate::Membership::fewest_voters`].
        needed: usize,
    },
    /// `AddLearner` on a removed node.
    #[error("{}", self.plain())]
    NodeRemoved(NodeId),
    /// `AddLearner` on a node of a removed DC.
    #[error("{}", self.plain())]
    DcRemoved(DcId),
    /// `AddLearner` in a DC that already holds a replica of the partition.
    #[error("{}", self.plain())]
    DcHoldsReplica {
        /// The partition.
        partition: PartitionId,
        /// The DC of the proposed node.
        dc: DcId,
        /// The node of that DC holding the replica.
        holder: NodeId,
    },
    /// `Promote` of a node that is not a learner of the partition.
    #[error("{}", self.plain())]
    NotALearner {
        /// The partition.
        partition: PartitionId,
        /// The node named by the command.
        node: NodeId,
    },
    /// `Promote` names a learner added in another epoch than the current one on that node
    /// (the learner was removed and added again since the promotion was planned).
    #[error("{}", self.plain())]
    LearnerChanged {
        /// The partition.
        partition: PartitionId,
        /// The learner's node.
        node: NodeId,
        /// The epoch named by the command.
        named: Epoch,
        /// The epoch that added the current learner.
        current: Epoch,
    },
    /// The epoch counter is at its maximum; no placement can change any more.
    #[error("{}", self.plain())]
    EpochExhausted(Epoch),
}

impl Refused {
    /// The refusal's text, naming nodes and DCs as `topology` does (`dc2`, not `dc#1`), as
    /// logs and operators' messages give it.
    pub fn named(&self, topology: &Topology) -> String {
        self.text(&|n| topology.node_name(n), &|d| topology.dc_name(d))
    }

    /// The text naming nodes and DCs by their ids (its `Display`).
    fn plain(&self) -> String {
        self.text(&|n| n.to_string(), &|d| d.to_string())
    }

    /// The text, with `node` and `dc` naming nodes and DCs.
    fn text(&self, node: &dyn Fn(NodeId) -> String, dc: &dyn Fn(DcId) -> String) -> String {
        match self {
            Refused::UnknownDc(d) => format!("{} is not a member", dc(*d)),
            Refused::UnknownNode(n) => format!("{} is not a member", node(*n)),
            Refused::UnknownPartition(p) => format!("partition {p} is not placed"),
            Refused::DcAlreadyRemoved(d) => format!("{} is already removed", dc(*d)),
            Refused::DcNotRemoved(d) => format!("{} is not removed", dc(*d)),
            Refused::NodeAlreadyRemoved(n) => format!("{} is already removed", node(*n)),
            Refused::NodeNotRemoved(n) => format!("{} is not removed", node(*n)),
            Refused::LastDc(d) => format!("{} is the last DC up", dc(*d)),
            Refused::LastVoter { partition, voter } => format!(
                "removing it would leave partition {partition} with no voter (its last voter is {})",
                node(*voter)
            ),
            Refused::TooFewVoters { partition, left, needed } => format!(
                "removing it would leave partition {partition} with {left} voters, fewer than {needed}: more of its \
                 replicas lost before they are rebuilt than recovery tolerates"
            ),
            Refused::NodeRemoved(n) => format!("{} is removed", node(*n)),
            Refused::DcRemoved(d) => format!("{} is removed", dc(*d)),
            Refused::DcHoldsReplica { partition, dc: d, holder } => {
                format!("{} already holds a replica of partition {partition} on {}", dc(*d), node(*holder))
            }
            Refused::NotALearner { partition, node: n } => {
                format!("{} is not a learner of partition {partition}", node(*n))
            }
            Refused::LearnerChanged { partition, node: n, named, current } => {
                format!("the learner of partition {partition} on {} was added in {current}, not {named}", node(*n))
            }
            Refused::EpochExhausted(e) => format!("the epoch counter is exhausted at {e}"),
        }
    }
}
