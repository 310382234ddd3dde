//! Membership invariants over random command sequences (docs/design.md, "Failover"): every
//! partition keeps a voter, no two replicas of a partition share a DC, removed DCs and nodes
//! hold no replica, the epoch moves by exactly one on each placement change and never
//! otherwise, a refused command changes nothing, rebuild plans apply, and replaying the same
//! commands gives the same state.

use proptest::prelude::*;
use redt_membership::{Command, Membership, Refused};
use redt_proto::{DcId, Epoch, NodeId, PartitionId};
use std::collections::BTreeSet;

const DCS: u16 = 5;
const NODES_PER_DC: u16 = 2;
const PARTITIONS: u32 = 6;

/// 5 DCs × 2 nodes (nodes 2d and 2d+1 in DC d); partition p on DCs p, p+1, p+2 (mod 5).
fn initial() -> Membership {
    let nodes = (0..DCS * NODES_PER_DC).map(|n| (NodeId(n), DcId(n / NODES_PER_DC)));
    let partitions = (0..PARTITIONS).map(|p| {
        let voters = (0..3).map(|i| {
            let dc = (p as u16 + i) % DCS;
            NodeId(dc * NODES_PER_DC + (p as u16 + i) % NODES_PER_DC)
        });
        (PartitionId(p), voters.collect())
    });
    Membership::new(Epoch(1), nodes, partitions, 3).expect("the initial layout is valid")
}

/// A step of a random run: a raw command (ids may be unknown), a promotion of an existing
/// learner (found in the state when the step runs), or applying a whole rebuild plan.
#[derive(Clone, Debug)]
enum Op {
    Raw(Command),
    PromoteLearner(usize),
    Rebuild,
}

fn op() -> impl Strategy<Value = Op> {
    let dc = (0..DCS + 1).prop_map(DcId);
    let node = (0..DCS * NODES_PER_DC + 1).prop_map(NodeId);
    let partition = (0..PARTITIONS + 1).prop_map(PartitionId);
    prop_oneof![
        3 => dc.clone().prop_map(|d| Op::Raw(Command::RemoveDc(d))),
        2 => dc.prop_map(|d| Op::Raw(Command::RestoreDc(d))),
        2 => node.clone().prop_map(|n| Op::Raw(Command::RemoveNode(n))),
        2 => node.clone().prop_map(|n| Op::Raw(Command::RestoreNode(n))),
        3 => (partition.clone(), node.clone()).prop_map(|(partition, node)| Op::Raw(Command::AddLearner { partition, node })),
        1 => (partition, node, 0..20u32)
            .prop_map(|(partition, node, e)| Op::Raw(Command::Promote { partition, node, added_in: Epoch(e) })),
        3 => any::<usize>().prop_map(Op::PromoteLearner),
        2 => Just(Op::Rebuild),
    ]
}

/// The commands an op stands for against the current state.
fn commands(m: &Membership, op: &Op) -> Vec<Command> {
    match op {
        Op::Raw(c) => vec![*c],
        Op::PromoteLearner(i) => {
            let learners: Vec<_> =
                m.partitions().flat_map(|(p, r)| r.learners().iter().map(move |l| (p, *l))).collect();
            if learners.is_empty() {
                return Vec::new();
            }
            let (partition, l) = learners[i % learners.len()];
            vec![Command::Promote { partition, node: l.node, added_in: l.added_in }]
        }
        Op::Rebuild => m.plan_rebuild().into_iter().flat_map(|s| s.proposals).collect(),
    }
}

fn check_invariants(m: &Membership) -> Result<(), TestCaseError> {
    for (p, r) in m.partitions() {
        prop_assert!(!r.voters().is_empty(), "partition {p} has no voter");
        // Never a second replica lost before the first is rebuilt (Refused::TooFewVoters).
        prop_assert!(r.voters().len() >= 2, "partition {p} below the 2 voters n = 3 keeps");
        let mut dcs = BTreeSet::new();
        for n in r.nodes() {
            let dc = m.dc_of(n).expect("replicas are members");
            prop_assert!(dcs.insert(dc), "partition {p}: two replicas in {dc}");
            prop_assert!(m.is_node_up(n), "partition {p}: replica on {n}, which is removed or in a removed DC");
        }
        prop_assert!(r.learners().iter().all(|l| l.added_in <= m.epoch()));
        prop_assert_eq!(r.quorum(), (3 * r.n()).div_ceil(4));
    }
    prop_assert!(m.dcs().any(|(_, s)| s == redt_membership::Status::Up), "no DC up");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_over_random_commands(ops in prop::collection::vec(op(), 1..60)) {
        let mut m = initial();
        let mut log = Vec::new();
        check_invariants(&m)?;
        for op in &ops {
            let is_plan = matches!(op, Op::Rebuild);
            for command in commands(&m, op) {
                let before = m.clone();
                let result = m.apply(&command);
                log.push(command);
                match &result {
                    Ok(change) => {
                        prop_assert_eq!(change.epoch, m.epoch());
                        let expected = if change.placement_changed() { before.epoch().0 + 1 } else { before.epoch().0 };
                        prop_assert_eq!(m.epoch(), Epoch(expected), "{:?} -> {:?}", command, change);
                        for c in &change.partitions {
                            let r = m.replicas(c.partition).expect("a changed partition exists");
                            prop_assert_eq!((c.n, c.quorum, c.learners), (r.n(), r.quorum(), r.learners().len()));
                        }
                        let replicas_moved = before.partitions().any(|(p, r)| m.replicas(p) != Some(r));
                        prop_assert_eq!(replicas_moved, change.placement_changed());
                    }
                    Err(reason) => {
                        prop_assert_eq!(&m, &before, "{:?} refused ({}) but changed the state", command, reason);
                        prop_assert!(!is_plan, "a rebuild proposal was refused: {:?}: {}", command, reason);
                    }
                }
                check_invariants(&m)?;
            }
        }
        // The same commands in the same order give the same state (what Raft relies on).
        let mut replay = initial();
        for c in &log {
            let _ = replay.apply(c);
        }
        prop_assert_eq!(replay, m);
    }

    #[test]
    fn a_removed_dc_holds_nothing_until_rebuilt(dc in 0..DCS) {
        let mut m = initial();
        m.apply(&Command::RemoveDc(DcId(dc))).unwrap();
        m.apply(&Command::RestoreDc(DcId(dc))).unwrap();
        let in_dc = |m: &Membership| m.partitions().flat_map(|(_, r)| r.nodes().collect::<Vec<_>>()).filter(|&n| m.dc_of(n) == Some(DcId(dc))).count();
        prop_assert_eq!(in_dc(&m), 0);
        for s in m.plan_rebuild() {
            prop_assert_eq!(s.proposals.len(), s.missing);
            for c in s.proposals {
                m.apply(&c).unwrap();
            }
        }
        prop_assert!(m.plan_rebuild().is_empty());
        prop_assert!(in_dc(&m) > 0, "the restored DC is used by the rebuild");
    }
}

/// Removing DCs one after another, with no rebuild between: every removal that would leave a
/// partition with fewer than 2 of its 3 replicas is refused, and every partition keeps 2.
#[test]
fn removing_every_dc_but_one_stops_at_too_few_voters_or_the_last_dc() {
    let mut m = initial();
    let mut refused = Vec::new();
    for dc in 0..DCS {
        if let Err(r) = m.apply(&Command::RemoveDc(DcId(dc))) {
            refused.push(r);
        }
    }
    assert!(
        refused.iter().all(|r| matches!(r, Refused::TooFewVoters { needed: 2, .. } | Refused::LastDc(_))),
        "{refused:?}"
    );
    assert!(!refused.is_empty());
    assert!(m.partitions().all(|(_, r)| r.n() >= 2));
}
