//! Catching up the replicas a commit left behind (DESIGN.md §2, phase 2).
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

use crate::decision::PartitionVotes;
use crate::message::{Accept, CatchUpTarget, Request};
use crate::plan::Plan;
use redt_dc_executor::{Decision, RedoEntry, ReplicaChange, ReplicaOrigin};
use redt_proto::{Cts, DcId, NodeId, PartitionId, Topology, TxnId};
use std::collections::{BTreeMap, BTreeSet};

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
    /// Whether nothing was left behind.
    pub fn is_empty(&self) -> bool {
        self.behind.is_empty()
    }
}

/// The catch-up of a committed transaction: `table` is [`crate::plan::vote_table`] of `plan`
/// over the votes the commit was decided on (one entry per planned partition, in order).
///
/// For each written partition, every replica that is not up to date puts its DC in
/// [`CatchUp::behind`]; then every replica of a written partition held by a DC in `behind`
/// is a target, and the partition's source is its first up-to-date replica's DC that is not
/// behind (or, if every up-to-date replica's DC is behind for another partition, the first
/// up-to-date one: its redo holds the right values for this partition even though the rest
/// of it is aborted). A written partition with no up-to-date replica (impossible for a
/// commit, which needs `Q ≥ 1` of them) gets no source.
pub fn catch_up(plan: &Plan, table: &[PartitionVotes]) -> CatchUp {
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
    if out.behind.is_empty() {
        return out;
    }
    for (i, up) in &written {
        let p = &plan.partitions[*i];
        let targets: Vec<NodeId> =
            p.replicas.iter().filter(|(_, dc)| out.behind.contains(dc)).map(|&(node, _)| node).collect();
        if targets.is_empty() {
            continue;
        }
        let fresh = || p.replicas.iter().zip(up).filter(|(_, &ok)| ok).map(|(&(_, dc), _)| dc);
        let Some(source) = fresh().find(|dc| !out.behind.contains(dc)).or_else(|| fresh().next()) else {
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

/// The requests a catch-up source sends for `txn` (DESIGN.md §2, phase 2): per replica node of
/// `targets`, one [`Accept`] of the new values its partitions got in `redo`, carrying the
/// commit, so the replica writes it `Committed` into its own ring at once (replay then
/// applies it under the Thomas write rule). A node holding several listed partitions gets
/// them in one accept. It is retried until answered; a copy written twice (the first answer
/// lost, or the replica restarted in between) changes nothing, by the same rule.
pub fn shipments(
    topology: &Topology,
    txn: TxnId,
    redo: &[RedoEntry],
    targets: &[CatchUpTarget],
) -> Vec<(NodeId, Request)> {
    let changes = changes_of(redo);
    let (coordinator, participants) =
        redo.first().map(|e| (e.coordinator, e.participants.clone())).unwrap_or((NodeId(0), Vec::new()));
    let mut per_node: BTreeMap<NodeId, (Cts, Vec<ReplicaChange>)> = BTreeMap::new();
    for t in targets {
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
        out.push((node, Request::Accept(Accept { origin, changes, decided: Some(Decision::Commit(cts)) })));
    }
    out
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
            let cu = catch_up(&p, &table);
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
        let cu = catch_up(&p, &[p0, p1]);
        assert_eq!(cu.behind, BTreeSet::from([dc(3)]));
        assert_eq!(
            cu.sources,
            BTreeMap::from([(dc(0), vec![(PartitionId(0), vec![NodeId(3)]), (PartitionId(1), vec![NodeId(13)])])])
        );

        // p0 fresh only on DCs 0, 1, 2 where DC 0 is behind on p1, and p1 fresh on 1, 2, 3.
        let p0 = PartitionVotes::new(vec![commit(5), commit(5), commit(5), ReplicaVote::Abort]);
        let p1 = PartitionVotes::new(vec![commit(3), commit(7), commit(7), ReplicaVote::Abort]);
        let cu = catch_up(&p, &[p0, p1]);
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
        let cu = catch_up(&p, &[p0, p1]);
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
